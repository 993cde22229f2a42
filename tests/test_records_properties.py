"""Property tests of the records layer (hypothesis).

* Round trip: whatever ``build_batch`` is given comes back from ``iter_batches``/``records``
  with the same header fields, and ``validate_and_assign_offsets`` keeps the records while
  assigning offsets.
* Malformed input -- truncated, bit-flipped, bad CRC, bad magic, negative or huge lengths and
  counts, overlong varints, random garbage -- only ever raises a ``KafkaError`` subclass from
  any entry point (never another exception type), and allocates memory in proportion to its
  size, not to the lengths it declares.
"""
from __future__ import annotations

import struct
import tracemalloc

import crc32c as crc32c_pypi
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from kafka.record.legacy_records import LegacyRecordBatchBuilder as KpLegacyBuilder

from replica_core.errors import CorruptRecordError, InvalidRecordError, KafkaError
from replica_core.records import (
    STOP_CORRUPT,
    STOP_END,
    STOP_PARTIAL,
    analyze_and_validate,
    build_batch,
    decompress,
    iter_batches,
    scan,
    trim_invalid_bytes,
    validate_and_assign_offsets,
)
from replica_core.records.varint import encode_varint, encode_varlong

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
NOW = 1_700_000_000_000
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

int64 = st.integers(-(2**63), 2**63 - 1)
header_st = st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=12)),
                     max_size=3)


@st.composite
def batch_args(draw):
    n = draw(st.integers(0, 25))
    values = draw(st.lists(st.none() | st.binary(max_size=60), min_size=n, max_size=n))
    keys = draw(st.lists(st.none() | st.binary(max_size=20), min_size=n, max_size=n))
    headers = draw(st.lists(header_st, min_size=n, max_size=n))
    timestamps = draw(st.lists(int64, min_size=n, max_size=n))
    kwargs = dict(
        keys=keys, headers=headers, timestamps=timestamps,
        base_offset=draw(st.integers(0, 2**62)),
        partition_leader_epoch=draw(st.integers(-1, 2**31 - 1)),
        compression=draw(st.sampled_from(CODECS)),
        timestamp_type=draw(st.sampled_from(["create", "log_append"])),
        producer_id=draw(st.integers(-1, 2**62)),
        producer_epoch=draw(st.integers(-1, 2**15 - 1)),
        base_sequence=draw(st.integers(-1, 2**31 - 1)),
        transactional=draw(st.booleans()),
        control=draw(st.booleans()),
        now_ms=draw(int64),
    )
    return values, kwargs


@FAST
@given(batch_args())
def test_build_parse_round_trip(args):
    values, kw = args
    buf = build_batch(values, **kw)
    s = scan(buf)
    assert (len(s), s.valid_bytes, s.stop) == (1, len(buf), STOP_END)
    assert s.crc_ok.tolist() == [1]
    (batch,) = iter_batches(buf)
    batch.ensure_valid()
    n = len(values)
    assert batch.record_count == n
    assert batch.base_offset == kw["base_offset"]
    assert batch.last_offset == kw["base_offset"] + max(n - 1, 0)
    assert batch.partition_leader_epoch == kw["partition_leader_epoch"]
    assert batch.compression == kw["compression"]
    assert batch.timestamp_type == kw["timestamp_type"]
    assert batch.is_transactional == kw["transactional"]
    assert batch.is_control == kw["control"]
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (
        kw["producer_id"], kw["producer_epoch"], kw["base_sequence"])
    log_append = kw["timestamp_type"] == "log_append"
    expected_max = kw["now_ms"] if log_append else max([-1, *kw["timestamps"]])
    assert batch.max_timestamp == expected_max
    records = list(batch.records())
    assert [r.offset for r in records] == [kw["base_offset"] + i for i in range(n)]
    assert [r.key for r in records] == kw["keys"]
    assert [r.value for r in records] == values
    assert [r.headers for r in records] == [list(h) for h in kw["headers"]]
    assert [r.timestamp for r in records] == (
        [kw["now_ms"]] * n if log_append else kw["timestamps"])


@FAST
@given(batch_args(), st.integers(0, 2**40), st.integers(-1, 2**31 - 1),
       st.sampled_from(["producer", *CODECS]), st.sampled_from(["create", "log_append"]))
def test_validate_assigns_offsets_and_keeps_records(args, next_offset, epoch, target, ts_type):
    values, kw = args
    assume(values)
    kw.update(base_offset=0, control=False, timestamp_type="create",
              timestamps=[NOW - i for i in range(len(values))])
    if kw["producer_id"] >= 0:
        kw["base_sequence"] = max(kw["base_sequence"], 0)
    buf = build_batch(values, **kw)
    info = analyze_and_validate(buf, "client")
    assert info.valid_bytes == len(buf) and info.num_records == len(values)
    res = validate_and_assign_offsets(buf, next_offset, epoch, NOW, target_compression=target,
                                      timestamp_type=ts_type)
    (batch,) = iter_batches(res.buffer)
    batch.ensure_valid()
    n = len(values)
    assert (res.first_offset, res.last_offset, res.num_records) == (
        next_offset, next_offset + n - 1, n)
    assert (batch.base_offset, batch.last_offset) == (res.first_offset, res.last_offset)
    assert batch.partition_leader_epoch == epoch
    assert batch.compression == (kw["compression"] if target == "producer" else target)
    assert batch.timestamp_type == ts_type
    assert res.max_timestamp == batch.max_timestamp == NOW   # now, or the newest record (NOW)
    records = list(batch.records())
    assert [r.offset for r in records] == list(range(next_offset, next_offset + n))
    assert [(r.key, r.value, r.headers) for r in records] == [
        (k, v, list(h)) for k, v, h in zip(kw["keys"], values, kw["headers"], strict=True)]
    assert (batch.producer_id, batch.is_transactional) == (kw["producer_id"],
                                                           kw["transactional"])
    # in place exactly when the codec is kept (inner offsets are 0..n-1 from our builder)
    assert res.message_size_maybe_changed == (target not in ("producer", kw["compression"]))
    if not res.message_size_maybe_changed:
        assert res.buffer[61:] == buf[61:]


# --- malformed input -------------------------------------------------------------------------
def exercise(buf) -> None:
    """Every reading and validating entry point; only KafkaError may escape (and is caught)."""
    s = scan(buf)
    assert s.stop in (STOP_END, STOP_PARTIAL, STOP_CORRUPT)
    assert 0 <= s.valid_bytes <= len(buf)
    try:
        for batch in iter_batches(buf):
            try:
                batch.is_valid()
                fields = (batch.base_offset, batch.last_offset, batch.max_timestamp,
                          batch.compression, batch.record_count, batch.timestamp_type)
                assert len(fields) == 6
                for record in batch.records():
                    assert record.offset is not None
            except KafkaError:
                pass
    except KafkaError:
        pass
    for origin in ("client", "replication", "coordinator"):
        try:
            info = analyze_and_validate(buf, origin)
        except KafkaError:
            continue
        trimmed = trim_invalid_bytes(buf, info)
        if info.valid_bytes == 0:
            continue
        for target, ts_type, compacted in (("producer", "create", False),
                                           ("zstd", "log_append", True),
                                           ("none", "create", False)):
            try:
                res = validate_and_assign_offsets(
                    trimmed, 10, 3, NOW, target_compression=target, timestamp_type=ts_type,
                    compacted=compacted, origin=origin, timestamp_before_max_ms=3_600_000)
            except KafkaError:
                continue
            (out,) = iter_batches(res.buffer)
            assert out.is_valid()


def client_batch(n=5, codec="none", headers=True):
    return build_batch([b"value-%d" % i for i in range(n)],
                       keys=[None if i == 1 else b"k%d" % i for i in range(n)],
                       headers=[[("h", b"x"), ("n", None)] if headers else None] * n,
                       timestamps=[NOW + i for i in range(n)], compression=codec)


def legacy_set(magic, codec):
    b = KpLegacyBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i in range(3):
        b.append(i, timestamp=NOW + i if magic else None, key=b"k", value=b"v%d" % i)
    return bytes(b.build())


BASES = [client_batch(codec=c) for c in CODECS] + [
    client_batch(1, headers=False) + client_batch(3, "gzip"),
    legacy_set(0, 0), legacy_set(1, 1), legacy_set(1, 2), legacy_set(0, 3),
]

mutation_st = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10**6), st.integers(0, 7)),
    st.tuples(st.just("set"), st.integers(0, 10**6), st.integers(0, 255)),
    st.tuples(st.just("cut"), st.integers(0, 10**6), st.just(0)),
    st.tuples(st.just("insert"), st.integers(0, 10**6), st.integers(0, 255)),
    st.tuples(st.just("delete"), st.integers(0, 10**6), st.integers(1, 8)),
)


def mutate(buf: bytes, mutations, fix_crc: bool) -> bytes:
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
    if fix_crc and len(out) >= 61 and out[16] == 2:
        # reach past the CRC check into the record walks and the validator
        size = min(len(out), struct.unpack_from(">i", out, 8)[0] + 12)
        if size >= 61:
            struct.pack_into(">I", out, 17, crc32c_pypi.crc32c(bytes(out[21:size])))
    return bytes(out)


@FUZZ
@given(st.sampled_from(range(len(BASES))), st.lists(mutation_st, min_size=1, max_size=4),
       st.booleans())
def test_mutated_batches_raise_only_kafka_errors(which, mutations, fix_crc):
    exercise(mutate(BASES[which], mutations, fix_crc))


@FUZZ
@given(st.binary(max_size=600))
def test_random_garbage_raises_only_kafka_errors(data):
    exercise(data)


@settings(max_examples=60, deadline=None)
@given(st.binary(min_size=20, max_size=200), st.sampled_from(CODECS[1:]))
def test_garbage_payloads_do_not_decompress(data, codec):
    try:
        decompress(codec, data)
    except InvalidRecordError:
        pass


def test_every_truncation_yields_only_whole_batches():
    parts = [build_batch([b"v"] * 3, base_offset=10 * i, compression=codec, now_ms=NOW)
             for i, codec in enumerate(CODECS)]
    payload = b"".join(parts)
    ends = []
    pos = 0
    for b in parts:
        pos += len(b)
        ends.append(pos)
    for cut in range(len(payload) + 1):
        buf = payload[:cut]
        whole = sum(1 for e in ends if e <= cut)
        batches = list(iter_batches(buf))             # a partial tail never raises
        assert len(batches) == whole
        info = analyze_and_validate(buf, "replication")
        assert info.valid_bytes == (ends[whole - 1] if whole else 0)
        assert bytes(trim_invalid_bytes(buf, info)) == payload[:info.valid_bytes]


def test_bad_crc_is_corrupt_everywhere():
    buf = bytearray(client_batch(4))
    buf[70] ^= 0x20
    (batch,) = iter_batches(bytes(buf))
    assert not batch.is_valid()
    try:
        batch.ensure_valid()
        raise AssertionError("ensure_valid accepted a bad CRC")
    except CorruptRecordError:
        pass
    for origin in ("client", "replication"):
        try:
            analyze_and_validate(bytes(buf), origin)
            raise AssertionError("analyze accepted a bad CRC")
        except CorruptRecordError:
            pass


def expect(exc_type, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except exc_type:
        return
    raise AssertionError(f"{fn.__name__} did not raise {exc_type.__name__}")


def test_bad_magic_and_size_fields_are_corrupt_frames():
    good = client_batch(2)
    for magic in (3, 0x7F, 0x80, 0xFF):
        bad = bytearray(good)
        bad[16] = magic
        assert scan(good + bytes(bad)).stop == STOP_CORRUPT
        assert scan(good + bytes(bad)).valid_bytes == len(good)
        expect(CorruptRecordError, list, iter_batches(good + bytes(bad)))
        expect(CorruptRecordError, analyze_and_validate, good + bytes(bad), "replication")
    for length in (-1, -(2**31), 0, 13):
        bad = bytearray(good)
        struct.pack_into(">i", bad, 8, length)
        assert scan(bytes(bad)).stop == STOP_CORRUPT
        expect(CorruptRecordError, list, iter_batches(bytes(bad)))
    # a huge size field is a batch that does not fit: silently partial, like a torn tail
    bad = bytearray(good)
    struct.pack_into(">i", bad, 8, 2**31 - 1)
    s = scan(bytes(bad))
    assert (len(s), s.stop) == (0, STOP_PARTIAL)
    assert list(iter_batches(bytes(bad))) == []


def with_fixed_crc(buf: bytearray) -> bytes:
    struct.pack_into(">I", buf, 17, crc32c_pypi.crc32c(bytes(buf[21:])))
    return bytes(buf)


def test_huge_declared_counts_and_lengths_allocate_nothing_big():
    tracemalloc.start()
    try:
        good = bytearray(client_batch(3))
        for count in (2**31 - 1, -1, -(2**31), 4):
            bad = bytearray(good)
            struct.pack_into(">i", bad, 57, count)
            (batch,) = iter_batches(with_fixed_crc(bad))
            assert batch.is_valid()
            expect(InvalidRecordError, list, batch.records())
            expect(KafkaError, validate_and_assign_offsets, bytes(bad), 0, 0, NOW)
        # a record whose length / key length varints claim 2^31-1 bytes
        for record in (encode_varint(2**31 - 1) + b"\x00" * 10,
                       encode_varint(20) + b"\x00" + encode_varlong(0) + encode_varint(0)
                       + encode_varint(2**31 - 1) + b"\x00" * 16):
            buf = build_batch([])
            bad = bytearray(buf[:61]) + record
            struct.pack_into(">i", bad, 8, len(bad) - 12)
            struct.pack_into(">i", bad, 57, 1)
            (batch,) = iter_batches(with_fixed_crc(bad))
            expect(InvalidRecordError, list, batch.records())
        _, peak = tracemalloc.get_traced_memory()
        assert peak < 8 * 1024 * 1024
    finally:
        tracemalloc.stop()


def test_overlong_varints_are_invalid_records():
    for record in (
        # length prefix of 6 bytes
        bytes([0x86, 0x80, 0x80, 0x80, 0x80, 0x00]) + b"\x00" * 6,
        # an 11-byte timestamp delta varlong
        encode_varint(17) + b"\x00" + bytes([0x80] * 10 + [0x00]) + b"\x00" * 5,
        # a 6-byte offset delta varint
        encode_varint(12) + b"\x00\x00" + bytes([0x80] * 5 + [0x00]) + b"\x00" * 4,
    ):
        bad = bytearray(build_batch([])[:61]) + record
        struct.pack_into(">i", bad, 8, len(bad) - 12)
        struct.pack_into(">i", bad, 57, 1)
        (batch,) = iter_batches(with_fixed_crc(bad))
        expect(InvalidRecordError, list, batch.records())
        expect(InvalidRecordError, validate_and_assign_offsets, bytes(bad), 0, 0, NOW)


@settings(max_examples=80, deadline=None)
@given(st.binary(min_size=0, max_size=300), st.integers(0, 2**31 - 1))
def test_garbage_record_areas_stay_small(area, count):
    tracemalloc.start()
    try:
        bad = bytearray(build_batch([])[:61]) + area
        struct.pack_into(">i", bad, 8, len(bad) - 12)
        struct.pack_into(">i", bad, 57, count)
        buf = with_fixed_crc(bad)
        exercise(buf)
        _, peak = tracemalloc.get_traced_memory()
        assert peak < 4 * 1024 * 1024
    finally:
        tracemalloc.stop()
