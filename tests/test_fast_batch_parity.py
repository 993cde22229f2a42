"""Batch kernels (docs/contracts.md "Batch kernels"): native ``_batch`` against its twin
``batch_py`` and against independent readers (kafka-python, aiokafka, the ``crc32c`` package).

Parity: for every input both kernels return identical values (same dtype, shape and contents for
arrays) or raise the same error type. Inputs: batches built by kafka-python and aiokafka, the real
Kafka logs under ``tests/data/kafka-logs``, records encoded here field by field (to reach
varint corner cases no client writes), and hypothesis-generated, mutated, truncated and garbage
buffers.
"""
from __future__ import annotations

import importlib
import mmap
import os
import random
import struct
import zlib

import crc32c as crc32c_pypi
import numpy as np
import pytest
from aiokafka import codec as aio_codec
from aiokafka.record._crecords import DefaultRecordBatch as AioBatch
from aiokafka.record._crecords import DefaultRecordBatchBuilder as AioBuilder
from conftest import FIXTURE_LOGS, require_nonempty
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch as KpBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder
from kafka.record.legacy_records import LegacyRecordBatch as KpLegacyBatch
from kafka.record.legacy_records import LegacyRecordBatchBuilder as KpLegacyBuilder

from replica_core._fast import _batch as native
from replica_core.errors import InvalidRecordError

try:
    twin = importlib.import_module("replica_core._fast.batch_py")
except ImportError:  # written in parallel; parity checks run once it exists
    twin = None



MAX = 2**63 - 1
NOW = 1_700_000_000_000
CODEC_DECODE = {
    1: aio_codec.gzip_decode,
    2: aio_codec.snappy_decode,
    3: aio_codec.lz4_decode,
    4: aio_codec.zstd_decode,
}
# BATCH_FUZZ_EXAMPLES=5000 for a long soak; the default keeps the suite quick.
FUZZ = settings(
    max_examples=int(os.environ.get("BATCH_FUZZ_EXAMPLES", "300")), deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


# --- running both kernels -----------------------------------------------------------------------
def _normalise(value):
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.shape, value.tolist())
    if isinstance(value, tuple):
        return tuple(_normalise(v) for v in value)
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, np.integer):
        return int(value)
    return value


def _outcome(module, name, args):
    try:
        return ("ok", _normalise(getattr(module, name)(*args)))
    except Exception as exc:  # the error type is part of the contract
        return ("error", type(exc))


def both(name, *args):
    """Native result (or raised error), asserting the twin agrees when it exists."""
    got = _outcome(native, name, args)
    if twin is not None:
        expected = _outcome(twin, name, args)
        assert got == expected, f"{name}{_short(args)}: native {got!r:.300} != twin {expected!r:.300}"
    return got


def both_stamp(buf, *args):
    """stamp_batch on separate copies; the rewritten bytes and the CRC must agree."""
    mine = bytearray(buf)
    got = _outcome(native, "stamp_batch", (mine, *args))
    if twin is not None:
        theirs = bytearray(buf)
        expected = _outcome(twin, "stamp_batch", (theirs, *args))
        assert got == expected
        assert mine == theirs
    return got, mine


def _short(args):
    return tuple(f"<{len(a)} bytes>" if isinstance(a, (bytes, bytearray)) else a for a in args)


def scan(buf, *args):
    kind, value = both("scan_batches", buf, *args)
    assert kind == "ok", f"scan_batches raised {value}"
    _, _, shape, rows = value[0]
    assert shape == (len(rows), native.NCOLS)
    if args[:3] in ((), (0,), (0, -1), (0, -1, True)):  # the whole buffer, CRCs checked
        check_one_v2_batch(buf, rows, value[2], *args[3:])
    return np.array(rows, dtype=np.int64).reshape(shape), value[1], value[2]


def check_one_v2_batch(buf, rows, stop, *max_size):
    """``scan_one_v2_batch`` (native and twin) gives the whole-buffer scan's one row exactly
    when that scan frames one v2 batch and stops at the end, else None."""
    one_v2 = len(rows) == 1 and stop == native.STOP_END and rows[0][native.COL_MAGIC] == 2
    kind, value = both("scan_one_v2_batch", buf, *max_size)
    assert (kind, value) == ("ok", rows[0] if one_v2 else None)


# --- encoding records field by field ------------------------------------------------------------
def uvarint(u: int, width: int = 0) -> bytes:
    """Unsigned LEB128, padded with redundant continuation groups to ``width`` bytes."""
    out = bytearray()
    while True:
        b = u & 0x7F
        u >>= 7
        if u == 0 and len(out) + 1 >= width:
            out.append(b)
            return bytes(out)
        out.append(b | 0x80)


def varint(v: int, width: int = 0) -> bytes:
    return uvarint(((v << 1) ^ (v >> 31)) & 0xFFFFFFFF, width)


def varlong(v: int, width: int = 0) -> bytes:
    return uvarint(((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF, width)


def encode_record(ts_delta=0, offset_delta=0, key=b"k", value=b"v", headers=(), *,
                  key_len=None, value_len=None, header_count=None, length_adjust=0,
                  widths=(0, 0, 0, 0, 0, 0)) -> bytes:
    w_len, w_ts, w_off, w_key, w_val, w_hc = widths
    body = bytearray(b"\x00")
    body += varlong(ts_delta, w_ts) + varint(offset_delta, w_off)
    body += varint(key_len if key_len is not None else (-1 if key is None else len(key)), w_key)
    body += key or b""
    body += varint(value_len if value_len is not None else (-1 if value is None else len(value)), w_val)
    body += value or b""
    body += varint(len(headers) if header_count is None else header_count, w_hc)
    for hk, hv in headers:
        body += varint(len(hk)) + hk
        body += varint(-1 if hv is None else len(hv)) + (hv or b"")
    return varint(len(body) + length_adjust, w_len) + bytes(body)


def encode_batch(records: bytes, count: int, *, base_offset=0, base_timestamp=NOW,
                 max_timestamp=NOW, attributes=0, last_offset_delta=None, epoch=-1,
                 producer_id=-1, producer_epoch=-1, base_sequence=-1) -> bytes:
    lod = count - 1 if last_offset_delta is None else last_offset_delta
    after_crc = struct.pack(">hiqqqhii", attributes, lod, base_timestamp, max_timestamp,
                            producer_id, producer_epoch, base_sequence, count) + records
    crc = crc32c_pypi.crc32c(after_crc)
    return struct.pack(">qiibI", base_offset, 49 + len(records), epoch, 2, crc) + after_crc


# --- batches from the clients ------------------------------------------------------------------
def kp_batch(n, value_size=10, *, codec=0, keys=True, headers=False, base_ts=NOW,
             transactional=False, producer=(-1, -1, -1)) -> bytes:
    b = KpBuilder(magic=2, compression_type=codec, is_transactional=transactional,
                  producer_id=producer[0], producer_epoch=producer[1],
                  base_sequence=producer[2], batch_size=1 << 30)
    for i in range(n):
        b.append(i, timestamp=base_ts + (i * 7919) % 1000,
                 key=(b"key-%d" % i) if keys and i % 5 else None,
                 value=bytes([i % 251]) * value_size if i % 7 else None,
                 headers=[(f"h{i}", b"x" * (i % 3)), ("n", None)] if headers else [])
    return bytes(b.build())


def aio_batch(n, value_size=10, *, codec=0, headers=False) -> bytes:
    b = AioBuilder(magic=2, compression_type=codec, is_transactional=0, producer_id=-1,
                   producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    for i in range(n):
        b.append(i, timestamp=NOW + i, key=b"k%d" % i, value=b"v" * value_size,
                 headers=[("trace", b"abc")] if headers else [])
    return bytes(b.build())


def legacy_batch(magic, n=3, codec=0) -> bytes:
    b = KpLegacyBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i in range(n):
        b.append(i, timestamp=NOW + i if magic else None, key=b"k%d" % i, value=b"v" * i)
    return bytes(b.build())


CLIENT_BATCHES = {
    "kp-1": kp_batch(1),
    "kp-100x100": kp_batch(100, 100),
    "kp-10x1k-headers": kp_batch(10, 1024, headers=True),
    "kp-idempotent": kp_batch(20, producer=(4000, 3, 17)),
    "kp-transactional": kp_batch(5, transactional=True, producer=(77, 1, 0)),
    "kp-gzip": kp_batch(50, 200, codec=1, headers=True),
    "aio-headers": aio_batch(30, 64, headers=True),
    "aio-snappy": aio_batch(40, 300, codec=2),
    "aio-lz4": aio_batch(40, 300, codec=3),
    "aio-zstd": aio_batch(40, 300, codec=4),
    "kp-empty-values": kp_batch(64, 0, keys=False),
    "kp-200x1k": kp_batch(200, 1024, headers=True),   # over 64 KiB: the GIL-free paths
}


def fixture_log_files():
    return require_nonempty(
        sorted(p for p in FIXTURE_LOGS.glob("**/*.log") if p.stat().st_size > 0),
        "non-empty *.log files")


def fixture_log_ids():
    return [str(p.relative_to(FIXTURE_LOGS)) for p in fixture_log_files()]


def record_area(buf, row):
    """(blob, start, end) holding the records of a framed v2 batch, decompressed if needed."""
    pos, size = int(row[native.COL_POSITION]), int(row[native.COL_SIZE])
    codec = int(row[native.COL_ATTRIBUTES]) & 7
    if codec == 0:
        return buf, pos + 61, pos + size
    blob = CODEC_DECODE[codec](bytes(buf[pos + 61:pos + size]))
    return blob, 0, len(blob)


# --- the twin itself ----------------------------------------------------------------------------
def test_twin_present():
    if twin is None:
        pytest.skip("replica_core._fast.batch_py not written yet: parity checks ran native only")
    for name in ("scan_batches", "scan_one_v2_batch", "decode_records", "check_records",
                 "stamp_batch"):
        assert callable(getattr(twin, name))


def test_constants_match_contract():
    cols = ["COL_POSITION", "COL_SIZE", "COL_BASE_OFFSET", "COL_LAST_OFFSET_DELTA",
            "COL_PARTITION_LEADER_EPOCH", "COL_MAGIC", "COL_CRC", "COL_ATTRIBUTES",
            "COL_BASE_TIMESTAMP", "COL_MAX_TIMESTAMP", "COL_PRODUCER_ID", "COL_PRODUCER_EPOCH",
            "COL_BASE_SEQUENCE", "COL_RECORD_COUNT", "COL_CRC_OK"]
    expected = {name: i for i, name in enumerate(cols)}
    expected.update(NCOLS=15, STOP_END=0, STOP_PARTIAL=1, STOP_CORRUPT=2, RECORD_OK=0,
                    RECORD_BAD_STRUCTURE=1, RECORD_BAD_TIMESTAMP=2, RECORD_NULL_KEY_COMPACTED=3)
    for module in [native] + ([twin] if twin is not None else []):
        assert {name: getattr(module, name) for name in expected} == expected


# --- scan against the clients and the crc32c package ------------------------------------------
def assert_header_matches_kafka_python(buf, row):
    pos, size = int(row[native.COL_POSITION]), int(row[native.COL_SIZE])
    raw = bytes(buf[pos:pos + size])
    kb = KpBatch(raw)
    assert row[native.COL_BASE_OFFSET] == kb.base_offset
    assert row[native.COL_PARTITION_LEADER_EPOCH] == kb.leader_epoch
    assert row[native.COL_MAGIC] == kb.magic == 2
    assert row[native.COL_CRC] == kb.crc
    assert row[native.COL_ATTRIBUTES] == kb.attributes
    assert row[native.COL_LAST_OFFSET_DELTA] == kb.last_offset_delta
    assert row[native.COL_BASE_TIMESTAMP] == kb.first_timestamp
    assert row[native.COL_MAX_TIMESTAMP] == kb.max_timestamp
    assert row[native.COL_PRODUCER_ID] == kb.producer_id
    assert row[native.COL_PRODUCER_EPOCH] == kb.producer_epoch
    assert row[native.COL_BASE_SEQUENCE] == kb.base_sequence
    assert row[native.COL_RECORD_COUNT] == kb.records_count
    assert row[native.COL_CRC_OK] == int(crc32c_pypi.crc32c(raw[21:]) == kb.crc) == 1
    assert row[native.COL_CRC_OK] == int(kb.validate_crc())


def assert_records_match_clients(buf, row):
    """decode_records against aiokafka's (C) and kafka-python's record readers."""
    pos, size = int(row[native.COL_POSITION]), int(row[native.COL_SIZE])
    raw = bytes(buf[pos:pos + size])
    blob, start, end = record_area(buf, row)
    kind, value = both("decode_records", blob, start, end, int(row[native.COL_RECORD_COUNT]),
                       int(row[native.COL_BASE_OFFSET]), int(row[native.COL_BASE_TIMESTAMP]))
    assert kind == "ok", value
    cols = np.array(value[3], dtype=np.int64).reshape(value[2])
    readers = [AioBatch(raw)]
    if int(row[native.COL_ATTRIBUTES]) & 7 in (0, 1):  # kafka-python here lacks snappy/lz4/zstd
        readers.append(KpBatch(raw))
    log_append_time = int(row[native.COL_ATTRIBUTES]) & 8
    for reader in readers:
        recs = list(reader)
        assert len(recs) == len(cols)
        for rec, c in zip(recs, cols, strict=True):
            assert c[0] == rec.offset
            if not log_append_time:
                assert c[1] == rec.timestamp
            key = None if c[3] < 0 else bytes(blob[c[2]:c[2] + c[3]])
            value_ = None if c[5] < 0 else bytes(blob[c[4]:c[4] + c[5]])
            assert key == rec.key
            assert value_ == rec.value
            assert c[7] == len(rec.headers)
        assert cols[-1][8] == end if len(cols) else start == end


@pytest.mark.parametrize("name", sorted(CLIENT_BATCHES))
def test_client_batches(name):
    buf = CLIENT_BATCHES[name]
    headers, valid, stop = scan(buf)
    assert (len(headers), valid, stop) == (1, len(buf), native.STOP_END)
    assert_header_matches_kafka_python(buf, headers[0])
    assert_records_match_clients(buf, headers[0])


@pytest.mark.parametrize("path_id", fixture_log_ids())
def test_fixture_logs(path_id):
    path = FIXTURE_LOGS / path_id
    data = path.read_bytes()
    headers, valid, stop = scan(data)
    # SOURCES.md: all v2, every CRC checks out, no trailing bytes.
    assert (valid, stop) == (len(data), native.STOP_END)
    assert (headers[:, native.COL_CRC_OK] == 1).all()
    assert np.array_equal(np.cumsum(headers[:, native.COL_SIZE])[:-1], headers[1:, 0])
    for row in headers[:40]:
        assert_header_matches_kafka_python(data, row)
        assert_records_match_clients(data, row)
    for row in headers:
        blob, start, end = record_area(data, row)
        count = int(row[native.COL_RECORD_COUNT])
        both("decode_records", blob, start, end, count, int(row[2]), int(row[8]))
        assert both("check_records", blob, start, end, count, int(row[8]), NOW, MAX, MAX,
                    True, False)[0] == "ok"
    # the same scan over an mmap and without the CRC
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        h_mm, valid_mm, stop_mm = scan(mm)
        assert np.array_equal(h_mm, headers) and (valid_mm, stop_mm) == (valid, stop)
        del h_mm
    h_nocrc, _, _ = scan(data, 0, -1, False)
    assert (h_nocrc[:, native.COL_CRC_OK] == -1).all()
    assert np.array_equal(h_nocrc[:, :native.COL_CRC_OK], headers[:, :native.COL_CRC_OK])


def test_fixture_logs_cut_anywhere():
    """Every cut of a real log frames exactly the batches wholly before the cut."""
    data = (FIXTURE_LOGS / "kafka-3.6.0-kraft/kraft-combined-logs/__cluster_metadata-0/"
            "00000000000000000000.log").read_bytes()[:60_000]
    full, _, _ = scan(data)
    ends = full[:, 0] + full[:, 1]
    rng = random.Random(11)
    for cut in [0, 1, 11, 12, 16, 17, 60, 61] + [rng.randrange(len(data)) for _ in range(150)]:
        h, valid, stop = scan(data, 0, cut)
        n = int(np.searchsorted(ends, cut, side="right"))
        assert len(h) == n and valid == (ends[n - 1] if n else 0)
        assert stop == (native.STOP_END if valid == cut else native.STOP_PARTIAL)
        # and from a batch boundary in the middle
        if n > 2:
            mid = int(full[1, 0])
            h2, valid2, _ = scan(data, mid, cut)
            assert len(h2) == n - 1 and valid2 == valid - mid
            assert np.array_equal(h2, h[1:])


def test_buffer_types_agree():
    buf = CLIENT_BATCHES["kp-100x100"] + CLIENT_BATCHES["aio-lz4"]
    reference = scan(buf)
    arr = np.frombuffer(buf, dtype=np.uint8)
    for obj in (bytearray(buf), memoryview(buf), arr, memoryview(b"xx" + buf)[2:]):
        h, valid, stop = scan(obj)
        assert np.array_equal(h, reference[0]) and (valid, stop) == reference[1:]
    n = len(CLIENT_BATCHES["kp-100x100"])
    for obj in (buf, bytearray(buf), arr):
        kind, value = both("decode_records", obj, 61, n, 100, 0, NOW)
        assert kind == "ok"


def test_legacy_batches():
    for magic in (0, 1):
        for codec in (0, 1):
            buf = legacy_batch(magic, 4, codec)
            headers, valid, stop = scan(buf)
            assert valid == len(buf) and stop == native.STOP_END
            # a v1 entry's max timestamp is its own message's (AbstractLegacyRecordBatch):
            # each record's for plain messages, kafka-python's client wrapper carries 0
            expect_ts = ([NOW + i for i in range(4)] if codec == 0 else [0]) if magic else \
                [-1] * len(headers)
            assert headers[:, native.COL_MAX_TIMESTAMP].tolist() == expect_ts
            for row in headers:
                pos, size = int(row[0]), int(row[1])
                kb = KpLegacyBatch(buf[pos:pos + size], magic)
                assert row[native.COL_MAGIC] == magic
                assert row[native.COL_CRC] == struct.unpack_from(">I", buf, pos + 12)[0]
                assert row[native.COL_CRC] == zlib.crc32(buf[pos + 16:pos + size])
                assert row[native.COL_CRC_OK] == 1 == int(kb.validate_crc())
                assert row[native.COL_ATTRIBUTES] == buf[pos + 17]
                assert row[native.COL_BASE_OFFSET] == struct.unpack_from(">q", buf, pos)[0]
                for col in (3, 4, 8, 10, 11, 12, 13):
                    assert row[col] == -1
            bad = bytearray(buf)
            bad[-1] ^= 1
            assert scan(bytes(bad))[0][-1, native.COL_CRC_OK] == 0
            assert (scan(buf, 0, -1, False)[0][:, native.COL_CRC_OK] == -1).all()


# --- framing corner cases (§1.3) --------------------------------------------------------------
def test_framing_stops():
    one = CLIENT_BATCHES["kp-1"]
    assert scan(b"")[1:] == (0, native.STOP_END)
    assert scan(b"\x00" * 11)[1:] == (0, native.STOP_PARTIAL)
    assert scan(one + one[:11])[1:] == (len(one), native.STOP_PARTIAL)
    assert scan(one + one[:16])[1:] == (len(one), native.STOP_PARTIAL)
    assert scan(one + one[:-1])[1:] == (len(one), native.STOP_PARTIAL)
    small = bytearray(one)
    small[8:12] = struct.pack(">i", 13)
    assert scan(one + bytes(small))[1:] == (len(one), native.STOP_CORRUPT)
    # size field checked before the 17-byte minimum, as in ByteBufferLogInputStream
    assert scan(one + bytes(small[:12]))[1:] == (len(one), native.STOP_CORRUPT)
    for magic in (-1, 3, 0x7F):
        bad = bytearray(one)
        bad[16] = magic & 0xFF
        assert scan(one + bytes(bad))[1:] == (len(one), native.STOP_CORRUPT)
        # a bad magic is seen even when the batch would not fit
        assert scan(one + bytes(bad[:20]))[1:] == (len(one), native.STOP_CORRUPT)
    assert scan(one + one, 0, -1, True, len(one))[1:] == (2 * len(one), native.STOP_END)
    assert scan(one + one, 0, -1, True, len(one) - 1)[1:] == (0, native.STOP_CORRUPT)
    negative = bytearray(one)
    negative[8:12] = struct.pack(">i", -5)
    assert scan(bytes(negative))[1:] == (0, native.STOP_CORRUPT)


def test_short_v2_batch_is_framed_but_invalid():
    # size field 14..48: framed (Kafka frames by size only) but shorter than the 61-byte header
    for length in (14, 20, 48):
        buf = struct.pack(">qiib", 42, length, -1, 2) + b"\xab" * (length - 5)
        headers, valid, stop = scan(buf)
        assert (len(headers), valid, stop) == (1, len(buf), native.STOP_END)
        row = headers[0]
        assert row[0] == 0 and row[1] == length + 12 and row[2] == 42 and row[5] == 2
        assert row[native.COL_CRC_OK] == 0


def test_crc_flags_follow_crc32c_package():
    buf = bytearray(CLIENT_BATCHES["kp-10x1k-headers"] * 3)
    n = len(buf) // 3
    rng = random.Random(5)
    for _ in range(40):
        i = rng.randrange(len(buf))
        if i % n < 21:
            continue  # keep framing and the stored CRC intact
        buf[i] ^= 1 << rng.randrange(8)
        headers, _, _ = scan(bytes(buf))
        for row in headers:
            p, s = int(row[0]), int(row[1])
            assert row[native.COL_CRC_OK] == int(
                crc32c_pypi.crc32c(bytes(buf[p + 21:p + s])) == row[native.COL_CRC])


# --- record walks: encoded field by field ------------------------------------------------------
def walk_both(records: bytes, count: int, *, base_offset=1000, base_ts=NOW, pad=b""):
    """decode_records and check_records over ``pad + records``; both outcomes."""
    buf = pad + records
    start, end = len(pad), len(buf)
    dec = both("decode_records", buf, start, end, count, base_offset, base_ts)
    chk = both("check_records", buf, start, end, count, base_ts, NOW, MAX, MAX, True, False)
    assert dec[0] == chk[0], (dec, chk)
    return dec, chk


def test_record_columns_and_positions():
    recs = [
        encode_record(0, 0, b"key", b"value"),
        encode_record(-5, 1, None, b""),
        encode_record(9, 2, b"", None, [(b"a", b"1"), (b"bb", None)]),
    ]
    pad = b"\xee" * 9
    dec, chk = walk_both(b"".join(recs), 3, pad=pad)
    cols = np.array(dec[1][3]).reshape(3, 9)
    p = len(pad)
    r0 = p + 1 + 1 + 1 + 1 + 1  # length, attributes, ts, offset, key length
    assert cols[0].tolist() == [1000, NOW, r0, 3, r0 + 3 + 1, 5, r0 + 3 + 1 + 5 + 1, 0,
                                p + len(recs[0])]
    assert cols[1, 0] == 1001 and cols[1, 1] == NOW - 5
    assert cols[1, 3] == -1 and cols[1, 5] == 0
    assert cols[2, 3] == 0 and cols[2, 5] == -1 and cols[2, 7] == 2
    assert cols[2, 8] == p + sum(map(len, recs))
    assert chk[1] == (NOW + 9, 2, -1, native.RECORD_OK, 1)


@pytest.mark.parametrize(
    "record, count, ok",
    [
        (encode_record(widths=(0, 10, 5, 5, 5, 5)), 1, True),        # maximal widths
        (encode_record(widths=(0, 11, 0, 0, 0, 0)), 1, False),       # varlong of 11 bytes
        (encode_record(widths=(0, 0, 6, 0, 0, 0)), 1, False),        # varint of 6 bytes
        (encode_record(widths=(6, 0, 0, 0, 0, 0)), 1, False),        # length varint of 6
        (encode_record(key_len=-2), 1, False),
        (encode_record(value_len=-7), 1, False),
        (encode_record(header_count=-1), 1, False),
        (encode_record(headers=[(b"k", None)], header_count=2), 1, False),
        (encode_record(length_adjust=1), 1, False),                  # body shorter than prefix
        (encode_record(length_adjust=-1), 1, False),                 # body longer than prefix
        (encode_record(length_adjust=1) + b"\x00", 1, False),
        (encode_record(key=b"abc", key_len=50), 1, False),           # key runs past the end
        (encode_record() * 2, 3, False),                             # fewer than count
        (encode_record() * 2, 1, False),                             # bytes left over
        (encode_record() + b"\x00", 1, False),
        (b"", 0, True),
        (b"\x00", 0, False),
        (encode_record(), -1, False),
        (encode_record(), 2**31 - 1, False),                         # count vs bytes available
        (encode_record(), 2**62, False),
        (b"\x01", 1, False),                                         # body of 0 bytes... short
        (b"\xff\xff\xff\xff\x0f" + b"\x00" * 20, 1, False),          # length -2^31
    ],
)
def test_structural_errors(record, count, ok):
    dec, chk = walk_both(record, count)
    if ok:
        assert dec[0] == "ok"
    else:
        assert dec == ("error", InvalidRecordError) == chk


def test_header_value_negative_is_null():
    # Kafka reads any negative header value length as null; only key/value lengths < -1 fail.
    body = bytearray(b"\x00" + varlong(0) + varint(0) + varint(1) + b"k" + varint(1) + b"v")
    body += varint(1) + varint(1) + b"h" + varint(-9)
    rec = varint(len(body)) + bytes(body)
    dec, _ = walk_both(rec, 1)
    assert dec[0] == "ok"


def test_varint_overlong_high_bits_wrap_like_java():
    # 5th varint byte keeps only its low 4 bits, 10th varlong byte only its low bit
    # (ByteUtils.readVarint / readVarlong); these encodings are legal there.
    off5 = bytes([0x84, 0x80, 0x80, 0x80, 0x70])      # raw = 4 | (0x70 << 28) -> 4 in 32 bits
    ts10 = bytes([0x86] + [0x80] * 8 + [0x7E])          # raw = 6 | (0x7E << 63) -> 6 in 64 bits
    body = b"\x00" + ts10 + off5 + varint(-1) + varint(-1) + varint(0)
    rec = varint(len(body)) + body
    dec, chk = walk_both(rec, 1, base_offset=10, base_ts=100)
    assert dec[0] == "ok"
    cols = dec[1][3][0]
    assert cols[0] == 10 + 2 and cols[1] == 100 + 3


def test_decode_never_reads_past_end():
    rec = encode_record(1, 0, b"key", b"value")
    for cut in range(len(rec)):
        dec, chk = walk_both(rec[:cut] + b"\x02" * 64, 1, pad=b"")
        assert dec[0] == "error"
        # the same bytes with `end` cut short inside a larger buffer
        buf = rec + b"\x00" * 16
        assert both("decode_records", buf, 0, cut, 1, 0, 0) == ("error", InvalidRecordError)


# --- check_records semantics (§2.4) -------------------------------------------------------------
def test_check_records_rules():
    recs = [
        encode_record(0, 0, b"a", b"1"),
        encode_record(-100_000, 1, None, b"2"),   # null key, old timestamp
        encode_record(5_000, 2, b"c", b"3"),      # future
        encode_record(5_000, 4, b"d", b"4"),      # out-of-order offset delta, ties max
    ]
    area = b"".join(recs)
    base = NOW - 10

    def check(before, after, check_ts, keys):
        kind, value = both("check_records", area, 0, len(area), 4, base, NOW, before, after,
                           check_ts, keys)
        assert kind == "ok"
        return value

    assert check(MAX, MAX, True, False) == (base + 5_000, 2, -1, native.RECORD_OK, 0)
    assert check(MAX, MAX, True, True) == (base + 5_000, 2, 1, native.RECORD_NULL_KEY_COMPACTED, 0)
    assert check(1000, MAX, True, False)[2:4] == (1, native.RECORD_BAD_TIMESTAMP)
    assert check(MAX, 1000, True, False)[2:4] == (2, native.RECORD_BAD_TIMESTAMP)
    assert check(1000, 1000, False, False)[2:4] == (-1, native.RECORD_OK)
    # key error wins over the timestamp error on the same record
    assert check(1000, MAX, True, True)[2:4] == (1, native.RECORD_NULL_KEY_COMPACTED)
    # ts == -1 (NO_TIMESTAMP) is never a timestamp error
    rec = encode_record(-1 - base, 0, b"k", b"v")
    assert both("check_records", rec, 0, len(rec), 1, base, NOW, 0, 0, True, False)[1][2:4] == (
        -1, native.RECORD_OK)
    assert both("check_records", b"", 0, 0, 0, base, NOW, 0, 0, True, True) == (
        "ok", (-1, -1, -1, native.RECORD_OK, 1))


def test_timestamp_window_uses_java_long_arithmetic():
    # now - ts overflows: Java wraps it, so a far-past garbage timestamp is not rejected here
    far = encode_record(0, 0, b"k", b"v")
    kind, value = both("check_records", far, 0, len(far), 1, -(2**63), NOW, MAX, MAX,
                       True, False)
    assert kind == "ok"


# --- stamping ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["kp-1", "kp-100x100", "aio-lz4", "kp-transactional",
                                  "kp-200x1k"])
def test_stamp_batch(name):
    buf = CLIENT_BATCHES[name]
    (kind, crc), out = both_stamp(buf, 0, 123456789, 42, 0x0108, NOW + 77)
    assert kind == "ok"
    assert crc == crc32c_pypi.crc32c(bytes(out[21:]))
    kb = KpBatch(bytes(out))
    assert (kb.base_offset, kb.leader_epoch, kb.attributes, kb.max_timestamp, kb.crc) == (
        123456789, 42, 0x0108, NOW + 77, crc)
    assert kb.validate_crc()
    assert out[12 + 4 + 1 + 4 + 2:35] == buf[23:35] and out[43:] == buf[43:]
    headers, _, _ = scan(bytes(out))
    assert headers[0, native.COL_CRC_OK] == 1
    # attributes keep only the low 16 bits; negative values are two's complement
    (kind, _), out2 = both_stamp(buf, 0, -1, -1, 0x7_0003, -1)
    assert kind == "ok" and out2[21:23] == b"\x00\x03"


def test_stamp_batch_inside_a_payload_and_errors():
    a, b = CLIENT_BATCHES["kp-1"], CLIENT_BATCHES["kp-100x100"]
    payload = a + b
    (kind, crc), out = both_stamp(payload, len(a), 5, 6, 0, NOW)
    assert kind == "ok" and out[:len(a)] == a
    assert crc == crc32c_pypi.crc32c(bytes(out[len(a) + 21:]))
    for pos in (-1, 1, len(payload) - 60, len(payload)):
        (kind, err), _ = both_stamp(payload, pos, 0, 0, 0, 0)
        assert kind == "error"
    (kind, err), _ = both_stamp(b[:-1], 0, 0, 0, 0, 0)
    assert (kind, err) == ("error", InvalidRecordError)


# --- hypothesis: records, garbage, mutations ---------------------------------------------------
record_st = st.tuples(
    st.integers(-(2**63), 2**63 - 1),                 # timestamp delta
    st.integers(-(2**31), 2**31 - 1),                 # offset delta
    st.none() | st.binary(max_size=40),               # key
    st.none() | st.binary(max_size=200),              # value
    st.lists(st.tuples(st.binary(max_size=10), st.none() | st.binary(max_size=10)), max_size=3),
)


@FUZZ
@given(st.lists(record_st, max_size=20), st.integers(-(2**62), 2**62),
       st.integers(-(2**62), 2**62))
def test_encoded_records_roundtrip(records, base_offset, base_ts):
    area = b"".join(encode_record(*r) for r in records)
    dec, chk = walk_both(area, len(records), base_offset=base_offset, base_ts=base_ts)
    assert dec[0] == "ok"
    cols = np.array(dec[1][3], dtype=np.int64).reshape(len(records), 9)
    for (ts_d, off_d, key, value, headers), c in zip(records, cols, strict=True):
        assert c[0] == np.int64(base_offset + off_d)
        assert c[1] == ((base_ts + ts_d + 2**63) % 2**64) - 2**63
        assert (None if c[3] < 0 else area[c[2]:c[2] + c[3]]) == key
        assert (None if c[5] < 0 else area[c[4]:c[4] + c[5]]) == value
        assert c[7] == len(headers)


@FUZZ
@given(st.binary(max_size=400), st.booleans(), st.integers(14, 2**31 - 1))
def test_garbage_scan(data, check_crc, max_size):
    scan(data, 0, -1, check_crc, max_size)


@FUZZ
@given(st.binary(max_size=300), st.integers(0, 80), st.integers(-(2**40), 2**40),
       st.integers(-(2**40), 2**40), st.booleans(), st.booleans())
def test_garbage_records(data, count, base_ts, now, check_ts, keys):
    walk_both(data, count, base_ts=base_ts)
    both("check_records", data, 0, len(data), count, base_ts, now, 3600_000, 3600_000,
         check_ts, keys)


MUTATION_BASES = [
    CLIENT_BATCHES["kp-1"],
    CLIENT_BATCHES["kp-idempotent"],
    CLIENT_BATCHES["aio-headers"],
    kp_batch(12, 30, headers=True),
    CLIENT_BATCHES["kp-1"] + kp_batch(3, 5) + CLIENT_BATCHES["aio-lz4"],
]

mutation_st = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10**6), st.integers(0, 7)),
    st.tuples(st.just("set"), st.integers(0, 10**6), st.integers(0, 255)),
    st.tuples(st.just("cut"), st.integers(0, 10**6), st.just(0)),
    st.tuples(st.just("insert"), st.integers(0, 10**6), st.integers(0, 255)),
    st.tuples(st.just("delete"), st.integers(0, 10**6), st.integers(1, 8)),
)


def mutate(buf: bytes, mutations) -> bytes:
    out = bytearray(buf)
    for kind, where, arg in mutations:
        if not out:
            break
        i = where % len(out)
        if kind == "flip":
            out[i] ^= 1 << arg
        elif kind == "set":
            out[i] = arg
        elif kind == "cut":
            del out[i:]
        elif kind == "insert":
            out.insert(i, arg)
        else:
            del out[i:i + arg]
    return bytes(out)


@FUZZ
@given(st.sampled_from(range(len(MUTATION_BASES))), st.lists(mutation_st, min_size=1, max_size=4),
       st.booleans(), st.integers(-3, 3), st.integers(0, 20), st.booleans())
def test_mutated_batches(which, mutations, check_crc, count_shift, start_shift, keys):
    original = MUTATION_BASES[which]
    buf = mutate(original, mutations)
    assume(buf != original)
    scan(buf, 0, -1, check_crc)
    # record walks over the mutated area, with the original header's count and base values
    count = max(0, struct.unpack_from(">i", original, 57)[0] + count_shift)
    start = min(len(buf), 61 + start_shift % 3)
    end = len(buf)
    base_ts = struct.unpack_from(">q", original, 27)[0]
    both("decode_records", buf, start, end, count, 0, base_ts)
    both("check_records", buf, start, end, count, base_ts, NOW, 60_000, 60_000, True, keys)
    both_stamp(buf, 0, 7, 1, 0, NOW)


@FUZZ
@given(st.lists(st.sampled_from(sorted(CLIENT_BATCHES)), min_size=1, max_size=6),
       st.integers(0, 10**6), st.integers(0, 10**6))
def test_concatenated_payload_ranges(names, a, b):
    buf = b"".join(CLIENT_BATCHES[n] for n in names)
    a, b = sorted((a % (len(buf) + 1), b % (len(buf) + 1)))
    headers, valid, stop = scan(buf, a, b)
    assert valid <= b - a
    if len(headers):
        assert headers[0, 0] == a


# --- arguments outside the buffer or the C types ------------------------------------------------
def test_argument_errors_agree():
    buf = CLIENT_BATCHES["kp-100x100"]
    n = len(buf)
    for args in ((buf, -1), (buf, 0, n + 1), (buf, 10, 5), (buf, n + 1, -1)):
        assert both("scan_batches", *args) == ("error", ValueError)
    for start, end in ((-1, n), (61, n + 1), (100, 99)):
        assert both("decode_records", buf, start, end, 1, 0, 0) == ("error", ValueError)
        assert both("check_records", buf, start, end, 1, 0, 0, 0, 0, True, True) == (
            "error", ValueError)
    assert both("decode_records", buf, 61, n, 2**63, 0, 0) == ("error", OverflowError)
    assert both("check_records", buf, 61, n, 100, 2**63, 0, 0, 0, True, True) == (
        "error", OverflowError)
    for bad in ((0, 2**63, 0, 0, 0), (0, 0, 2**31, 0, 0), (0, 0, 0, 0, -(2**63) - 1)):
        assert both_stamp(buf, *bad)[0] == ("error", OverflowError)


def test_stamp_batch_needs_a_writable_buffer():
    buf = CLIENT_BATCHES["kp-1"]
    for read_only in (buf, memoryview(buf), memoryview(bytearray(buf)).toreadonly()):
        assert both("stamp_batch", read_only, 0, 1, 1, 0, 0) == ("error", ValueError)
    arr = np.frombuffer(bytearray(buf), dtype=np.uint8)
    kind, crc = both("stamp_batch", arr, 0, 9, 9, 0, NOW)
    assert kind == "ok" and crc == crc32c_pypi.crc32c(arr[21:].tobytes())
