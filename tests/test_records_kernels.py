"""The batch kernel contract (docs/contracts.md "Batch kernels") checked on both
implementations through ``kernel_impl``, against batches from our builder: header columns,
record columns, check_records semantics and in-place stamping."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import load_kernel

from replica_core.errors import InvalidRecordError
from replica_core.records import build_batch, decompress, iter_batches

NOW = 1_700_000_000_000
MAX = 2**63 - 1
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture
def k(kernel_impl):
    return load_kernel("_batch", "batch_py", kernel_impl)


def payload():
    parts = []
    for i, codec in enumerate(CODECS):
        parts.append(build_batch(
            [b"v%d" % j for j in range(i + 1)], keys=[None] + [b"k"] * i,
            timestamps=[NOW + 10 * j for j in range(i + 1)], base_offset=100 * i,
            partition_leader_epoch=i, compression=codec, producer_id=i, producer_epoch=1,
            base_sequence=3 * i, transactional=bool(i % 2)))
    return b"".join(parts), parts


def test_scan_columns_match_the_batches(k):
    buf, parts = payload()
    headers, valid, stop = k.scan_batches(buf)
    assert headers.dtype == np.int64 and headers.shape == (5, k.NCOLS)
    assert (valid, stop) == (len(buf), k.STOP_END)
    for row, b in zip(headers, iter_batches(buf), strict=True):
        assert row[k.COL_POSITION] == b.position
        assert row[k.COL_SIZE] == b.size
        assert row[k.COL_BASE_OFFSET] == b.base_offset
        assert row[k.COL_LAST_OFFSET_DELTA] == b.last_offset_delta
        assert row[k.COL_PARTITION_LEADER_EPOCH] == b.partition_leader_epoch
        assert row[k.COL_MAGIC] == 2
        assert row[k.COL_CRC] == b.crc
        assert row[k.COL_ATTRIBUTES] == b.attributes
        assert row[k.COL_BASE_TIMESTAMP] == b.base_timestamp
        assert row[k.COL_MAX_TIMESTAMP] == b.max_timestamp
        assert row[k.COL_PRODUCER_ID] == b.producer_id
        assert row[k.COL_PRODUCER_EPOCH] == b.producer_epoch
        assert row[k.COL_BASE_SEQUENCE] == b.base_sequence
        assert row[k.COL_RECORD_COUNT] == b.record_count
        assert row[k.COL_CRC_OK] == 1
    # a start inside the payload frames from there, valid_bytes relative to it
    start = len(parts[0])
    h2, valid2, _ = k.scan_batches(buf, start, -1)
    assert len(h2) == 4 and valid2 == len(buf) - start and h2[0, k.COL_POSITION] == start
    # without the CRC
    h3, _, _ = k.scan_batches(buf, 0, -1, False)
    assert (h3[:, k.COL_CRC_OK] == -1).all()


@pytest.mark.parametrize("codec", CODECS)
def test_decode_records_columns(k, codec):
    keys = [b"key", None, b""]
    values = [None, b"value", b"x" * 300]
    buf = build_batch(values, keys=keys, timestamps=[NOW, NOW - 5, NOW + 7],
                      headers=[[("a", b"1")], None, [("b", None), ("c", b"")]],
                      compression=codec, base_offset=50)
    area = decompress(codec, buf[61:]) if codec != "none" else buf
    start, end = (0, len(area)) if codec != "none" else (61, len(buf))
    cols = k.decode_records(area, start, end, 3, 50, NOW)
    assert cols.dtype == np.int64 and cols.shape == (3, 9)
    assert cols[:, 0].tolist() == [50, 51, 52]
    assert cols[:, 1].tolist() == [NOW, NOW - 5, NOW + 7]
    for (kp, kl), key in zip(cols[:, 2:4].tolist(), keys, strict=True):
        assert (None if kl < 0 else bytes(area[kp:kp + kl])) == key
    for (vp, vl), value in zip(cols[:, 4:6].tolist(), values, strict=True):
        assert (None if vl < 0 else bytes(area[vp:vp + vl])) == value
    assert cols[:, 7].tolist() == [1, 0, 2]
    assert cols[-1, 8] == end
    with pytest.raises(InvalidRecordError):
        k.decode_records(area, start, end, 4, 50, NOW)
    with pytest.raises(InvalidRecordError):
        k.decode_records(area, start, end, 2, 50, NOW)


def test_check_records(k):
    buf = build_batch([b"a", b"b", b"c", b"d"], keys=[b"k", None, b"k", b"k"],
                      timestamps=[NOW, NOW - 100, NOW + 100, NOW + 100])
    end = len(buf)
    assert k.check_records(buf, 61, end, 4, NOW, NOW, MAX, MAX, True, False) == (
        NOW + 100, 2, -1, k.RECORD_OK, 1)
    assert k.check_records(buf, 61, end, 4, NOW, NOW, MAX, MAX, True, True)[2:4] == (
        1, k.RECORD_NULL_KEY_COMPACTED)
    assert k.check_records(buf, 61, end, 4, NOW, NOW, 50, MAX, True, False)[2:4] == (
        1, k.RECORD_BAD_TIMESTAMP)
    assert k.check_records(buf, 61, end, 4, NOW, NOW, MAX, 50, True, False)[2:4] == (
        2, k.RECORD_BAD_TIMESTAMP)
    assert k.check_records(buf, 61, end, 4, NOW, NOW, 0, 0, False, False)[2:4] == (
        -1, k.RECORD_OK)


def test_stamp_batch(k):
    import crc32c

    for codec in CODECS:
        buf = bytearray(build_batch([b"v"] * 3, compression=codec, timestamps=[NOW] * 3))
        crc = k.stamp_batch(buf, 0, 7000, 12, 0x08 | (buf[22] & 7), NOW + 5)
        assert crc == crc32c.crc32c(bytes(buf[21:]))
        (b,) = iter_batches(bytes(buf))
        assert b.is_valid()
        assert (b.base_offset, b.partition_leader_epoch, b.timestamp_type, b.max_timestamp,
                b.compression) == (7000, 12, "log_append", NOW + 5, codec)
        assert [r.offset for r in b.records()] == [7000, 7001, 7002]
    with pytest.raises(InvalidRecordError):
        k.stamp_batch(bytearray(60), 0, 0, 0, 0, 0)


def test_legacy_rows(k):
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    b = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    for i in range(3):
        b.append(i, timestamp=NOW, key=None, value=b"v")
    buf = bytes(b.build())
    headers, valid, stop = k.scan_batches(buf)
    assert (len(headers), valid, stop) == (3, len(buf), k.STOP_END)
    assert headers[:, k.COL_MAGIC].tolist() == [1, 1, 1]
    assert headers[:, k.COL_BASE_OFFSET].tolist() == [0, 1, 2]
    assert (headers[:, k.COL_CRC_OK] == 1).all()
    assert (headers[:, k.COL_RECORD_COUNT] == -1).all()
    assert headers[:, k.COL_MAX_TIMESTAMP].tolist() == [NOW, NOW, NOW]   # the message's own
    v0 = LegacyRecordBatchBuilder(magic=0, compression_type=0, batch_size=1 << 20)
    v0.append(0, timestamp=None, key=None, value=b"v")
    assert k.scan_batches(bytes(v0.build()))[0][:, k.COL_MAX_TIMESTAMP].tolist() == [-1]


def test_empty_and_tiny_buffers(k):
    h, valid, stop = k.scan_batches(b"")
    assert (h.shape, valid, stop) == ((0, k.NCOLS), 0, k.STOP_END)
    h, valid, stop = k.scan_batches(b"\x00" * 11)
    assert (h.shape, valid, stop) == ((0, k.NCOLS), 0, k.STOP_PARTIAL)
    assert k.decode_records(b"", 0, 0, 0, 0, 0).shape == (0, 9)


def reference_find(k, buf, start, end, target):
    """find_batch stated through scan_batches: first framed batch with last offset ≥ target."""
    headers, valid, stop = k.scan_batches(buf, start, end, False)
    for row in headers:
        last = int(row[k.COL_BASE_OFFSET])
        if row[k.COL_MAGIC] == 2:
            last += int(row[k.COL_LAST_OFFSET_DELTA])
        if last >= target:
            pos, size = int(row[k.COL_POSITION]), int(row[k.COL_SIZE])
            return pos, size, last, pos + size - start, k.STOP_END
    return -1, -1, -1, valid, stop


def test_find_batch_first_batch_reaching_the_target(k):
    buf, parts = payload()  # batches at base offsets 0, 100, ..., 400 with 1..5 records
    lasts = [100 * i + i for i in range(5)]
    starts = np.cumsum([0] + [len(p) for p in parts])
    for target in (-5, 0, 1, 2, 100, 101, 102, 150, 404, 405):
        got = k.find_batch(buf, 0, -1, target)
        i = next((j for j, last in enumerate(lasts) if last >= target), None)
        if i is None:
            assert got == (-1, -1, -1, len(buf), k.STOP_END)
        else:
            assert got == (starts[i], len(parts[i]), lasts[i], starts[i + 1], k.STOP_END)
        assert got == reference_find(k, buf, 0, -1, target)
    # from a later start, positions stay absolute and valid bytes count from the start
    got = k.find_batch(buf, int(starts[2]), -1, 0)
    assert got[:3] == (starts[2], len(parts[2]), lasts[2])
    with pytest.raises(ValueError):
        k.find_batch(buf, 0, len(buf) + 1, 0)


def test_find_batch_legacy_truncated_and_corrupt(k):
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    b = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    for i in range(3):
        b.append(i, timestamp=NOW, key=None, value=b"v")
    legacy = bytes(b.build())
    assert k.find_batch(legacy, 0, -1, 2)[2] == 2  # legacy: the entry's own offset
    buf, parts = payload()
    rng = np.random.default_rng(7)
    for cut in rng.integers(0, len(buf), 40).tolist():
        for target in (0, 203, 404, 999):
            # a partial batch at the end stops the walk (STOP_PARTIAL) without a match
            assert k.find_batch(buf[:cut], 0, -1, target) == reference_find(
                k, buf[:cut], 0, -1, target)
    bad = bytearray(buf)
    bad[len(parts[0]) + 8:len(parts[0]) + 12] = (3).to_bytes(4, "big")  # length < 14: corrupt
    assert k.find_batch(bytes(bad), 0, -1, 50) == (-1, -1, -1, len(parts[0]), k.STOP_CORRUPT)
    assert k.find_batch(bytes(bad), 0, -1, 0)[0] == 0  # found before the corrupt batch
