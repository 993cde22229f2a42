"""Round trips with independent implementations of Kafka's record format (§1.1-§1.2).

Their builders -> our reader, and our builder -> their readers, for kafka-python and aiokafka
(both its C extension and its pure-Python classes), all five codecs, headers, null keys and
values, transactional and control batches, LogAppendTime; plus legacy v0/v1 message sets
written by kafka-python. Whichever batch kernel ``replica_core._fast.load`` returns is used.
"""
from __future__ import annotations

import struct

import crc32c as crc32c_pypi
import pytest
from aiokafka.record import default_records as aio_default
from aiokafka.record import memory_records as aio_memory
from kafka.record.default_records import DefaultRecordBatch as KpBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder as KpLegacyBuilder
from kafka.record.memory_records import MemoryRecords as KpMemoryRecords

from replica_core.records import (
    ControlRecordType,
    LegacyBatch,
    RecordBatch,
    build_batch,
    build_end_txn_marker,
    control_record_type,
    decode_end_txn_marker,
    iter_batches,
)

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
NOW = 1_700_000_000_000

AIO_BUILDERS = {
    "aio-c": aio_default.DefaultRecordBatchBuilder,
    "aio-py": aio_default._DefaultRecordBatchBuilderPy,
}
AIO_READERS = {
    "aio-c": aio_default.DefaultRecordBatch,
    "aio-py": aio_default._DefaultRecordBatchPy,
}
AIO_MEMORY = {
    "aio-c": aio_memory.MemoryRecords,
    "aio-py": aio_memory._MemoryRecordsPy,
}


def test_aiokafka_c_extension_is_loaded():
    # The "aio-c" cases must really exercise the C classes, not the pure fallback.
    assert aio_default.DefaultRecordBatch is not aio_default._DefaultRecordBatchPy
    assert aio_memory.MemoryRecords is not aio_memory._MemoryRecordsPy


def sample(n: int, value_size: int = 20, *, with_headers: bool = True):
    """Records with null keys and values, empty ones, and headers with null values."""
    out = []
    for i in range(n):
        key = None if i % 4 == 1 else (b"" if i % 4 == 2 else b"key-%d" % i)
        value = None if i % 5 == 3 else bytes([i % 256]) * (value_size + i % 7)
        headers = []
        if with_headers and i % 3:
            headers = [(f"h-{i}", b"x" * (i % 4)), ("null", None), ("ünï", b"\x00\xff")]
        ts = NOW + (i * 7919) % 5000 - 2500
        out.append((i, ts, key, value, headers))
    return out


def our_records(buf):
    batches = list(iter_batches(buf))
    return batches, [tuple(r) for b in batches for r in b.records()]


# --- their builders -> our reader -------------------------------------------------------------
@pytest.mark.parametrize("codec", sorted(CODECS))
@pytest.mark.parametrize("transactional", [False, True])
def test_kafka_python_builder_to_our_reader(codec, transactional):
    recs = sample(60)
    producer = (4242, 7, 100) if transactional else (-1, -1, -1)
    b = KpBuilder(magic=2, compression_type=CODECS[codec], is_transactional=transactional,
                  producer_id=producer[0], producer_epoch=producer[1], base_sequence=producer[2],
                  batch_size=1 << 30)
    for off, ts, key, value, headers in recs:
        assert b.append(off, timestamp=ts, key=key, value=value, headers=headers) is not None
    buf = bytes(b.build())
    batches, got = our_records(buf)
    assert len(batches) == 1
    batch = batches[0]
    assert isinstance(batch, RecordBatch)
    batch.ensure_valid()
    assert batch.is_valid()
    assert batch.compression == codec
    assert batch.is_transactional is transactional
    assert not batch.is_control
    assert batch.timestamp_type == "create"
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == producer
    assert batch.record_count == len(recs) == batch.last_offset_delta + 1
    assert (batch.base_offset, batch.last_offset, batch.next_offset) == (0, 59, 60)
    assert batch.base_timestamp == recs[0][1]
    assert batch.max_timestamp == max(r[1] for r in recs)
    assert batch.size == len(buf)
    assert got == [(o, t, k, v, h) for o, t, k, v, h in recs]


@pytest.mark.parametrize("impl", sorted(AIO_BUILDERS))
@pytest.mark.parametrize("codec", sorted(CODECS))
def test_aiokafka_builder_to_our_reader(impl, codec):
    recs = sample(45, 300)
    b = AIO_BUILDERS[impl](magic=2, compression_type=CODECS[codec], is_transactional=0,
                           producer_id=-1, producer_epoch=-1, base_sequence=-1,
                           batch_size=1 << 30)
    for off, ts, key, value, headers in recs:
        assert b.append(off, timestamp=ts, key=key, value=value, headers=headers) is not None
    b.set_producer_state(producer_id=17, producer_epoch=3, base_sequence=2**31 - 10)
    buf = bytes(b.build())
    batches, got = our_records(buf)
    (batch,) = batches
    batch.ensure_valid()
    assert batch.compression == codec
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (17, 3, 2**31 - 10)
    # sequences wrap at Int32.MAX (DefaultRecordBatch.incrementSequence)
    assert batch.last_sequence == 44 - 10
    assert got == [(o, t, k, v, h) for o, t, k, v, h in recs]


def test_kafka_python_memory_records_of_several_batches():
    """Several client batches back to back, as in a fetch response; offsets continue."""
    payload = b""
    expected = []
    offset = 0
    for codec in CODECS.values():
        b = KpBuilder(magic=2, compression_type=codec, is_transactional=False, producer_id=-1,
                      producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
        for _, ts, key, value, headers in sample(7):
            b.append(offset, timestamp=ts, key=key, value=value, headers=headers)
            expected.append((offset, ts, key, value, headers))
            offset += 1
        payload += bytes(b.build())
    # kafka-python's own framing agrees with ours on the batch boundaries
    kp_batches = []
    mr = KpMemoryRecords(payload)
    while mr.has_next():
        kp_batches.append(mr.next_batch())
    batches, got = our_records(payload)
    assert [b.base_offset for b in batches] == [b.base_offset for b in kp_batches]
    assert got == expected


# --- our builder -> their readers -------------------------------------------------------------
def their_records(buf: bytes, reader) -> list[tuple]:
    batch = reader(buf)
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]


@pytest.mark.parametrize("codec", sorted(CODECS))
@pytest.mark.parametrize("reader", ["kafka-python", "aio-c", "aio-py"])
def test_our_builder_to_their_readers(codec, reader):
    recs = sample(80, 100)
    buf = build_batch([r[3] for r in recs], keys=[r[2] for r in recs],
                      timestamps=[r[1] for r in recs], headers=[r[4] for r in recs],
                      compression=codec, base_offset=1000, partition_leader_epoch=9,
                      producer_id=77, producer_epoch=2, base_sequence=5, transactional=True)
    cls = KpBatch if reader == "kafka-python" else AIO_READERS[reader]
    batch = cls(buf)
    assert batch.validate_crc()
    assert batch.base_offset == 1000
    assert batch.compression_type == CODECS[codec]
    assert batch.is_transactional
    assert not batch.is_control_batch
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (77, 2, 5)
    assert batch.max_timestamp == max(r[1] for r in recs)
    assert their_records(buf, cls) == [(1000 + o, t, k, v, h) for o, t, k, v, h in recs]
    # the CRC they check is the CRC-32C over [21, end)
    assert struct.unpack_from(">I", buf, 17)[0] == crc32c_pypi.crc32c(buf[21:])


@pytest.mark.parametrize("impl", sorted(AIO_MEMORY))
def test_aiokafka_memory_records_frame_our_batches(impl):
    payload = b"".join(
        build_batch([b"v%d" % i for i in range(5)], base_offset=5 * n, compression=codec,
                    timestamps=[NOW] * 5)
        for n, codec in enumerate(CODECS))
    mr = AIO_MEMORY[impl](payload)
    seen = []
    while mr.has_next():
        batch = mr.next_batch()
        seen.extend(r.offset for r in batch)
    assert seen == list(range(25))


def test_log_append_time_batches_read_max_timestamp_everywhere():
    buf = build_batch([b"a", b"b"], timestamps=[NOW - 5, NOW - 9], timestamp_type="log_append",
                      now_ms=NOW + 1)
    (batch,) = iter_batches(buf)
    assert batch.timestamp_type == "log_append"
    assert batch.max_timestamp == NOW + 1
    assert [r.timestamp for r in batch.records()] == [NOW + 1, NOW + 1]
    for cls in (KpBatch, AIO_READERS["aio-c"], AIO_READERS["aio-py"]):
        b = cls(buf)
        assert b.timestamp_type == 1
        assert [r.timestamp for r in b] == [NOW + 1, NOW + 1]
    # kafka-python builds LogAppendTime batches only on the broker; patch one of theirs
    kb = KpBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                   producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    kb.append(0, timestamp=NOW, key=None, value=b"x", headers=[])
    theirs = bytearray(kb.build())
    struct.pack_into(">h", theirs, 21, 0x08)
    struct.pack_into(">q", theirs, 35, NOW + 50)
    struct.pack_into(">I", theirs, 17, crc32c_pypi.crc32c(bytes(theirs[21:])))
    (batch,) = iter_batches(bytes(theirs))
    assert batch.is_valid()
    assert [r.timestamp for r in batch.records()] == [NOW + 50]


@pytest.mark.parametrize("commit", [True, False])
def test_control_batches_both_ways(commit):
    buf = build_end_txn_marker(commit, producer_id=31, producer_epoch=4, coordinator_epoch=12,
                               base_offset=88, timestamp_ms=NOW)
    (batch,) = iter_batches(buf)
    assert batch.is_control and batch.is_transactional
    (rec,) = batch.records()
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    assert control_record_type(rec.key) is kind
    assert decode_end_txn_marker(rec.key, rec.value) == (kind, 12)
    # kafka-python reads control records of our control batch
    kb = KpBatch(buf)
    assert kb.is_control_batch and kb.validate_crc()
    (krec,) = list(kb)
    assert (krec.offset, krec.type, krec.version) == (88, int(kind), 0)
    assert (kb.producer_id, kb.producer_epoch) == (31, 4)
    # aiokafka sees the flags and the raw key/value
    ab = AIO_READERS["aio-c"](buf)
    assert ab.is_control_batch and ab.is_transactional
    (arec,) = list(ab)
    assert arec.key == rec.key and arec.value == rec.value == struct.pack(">hi", 0, 12)


def test_their_control_batch_to_our_reader():
    """A control batch patched into kafka-python's output: attribute bit 5 is read as such."""
    kb = KpBuilder(magic=2, compression_type=0, is_transactional=True, producer_id=5,
                   producer_epoch=0, base_sequence=-1, batch_size=1 << 20)
    kb.append(0, timestamp=NOW, key=struct.pack(">hh", 0, 1), value=struct.pack(">hi", 0, 3),
              headers=[])
    buf = bytearray(kb.build())
    attrs = struct.unpack_from(">h", buf, 21)[0] | 0x20
    struct.pack_into(">h", buf, 21, attrs)
    struct.pack_into(">I", buf, 17, crc32c_pypi.crc32c(bytes(buf[21:])))
    (batch,) = iter_batches(bytes(buf))
    assert batch.is_control and batch.is_transactional and batch.is_valid()
    (rec,) = batch.records()
    assert decode_end_txn_marker(rec.key, rec.value) == (ControlRecordType.COMMIT, 3)


def test_empty_and_null_edge_values_both_ways():
    values = [None, b"", b"v" * 70_000, None]
    keys = [None, None, b"", b"k" * 300]
    buf = build_batch(values, keys=keys, timestamps=[-1, 0, 2**40, -1])
    for cls in (KpBatch, AIO_READERS["aio-c"], AIO_READERS["aio-py"]):
        got = [(r.key, r.value) for r in cls(buf)]
        assert got == list(zip(keys, values, strict=True))
    (batch,) = iter_batches(buf)
    assert [(r.key, r.value, r.timestamp) for r in batch.records()] == list(
        zip(keys, values, [-1, 0, 2**40, -1], strict=True))
    assert batch.base_timestamp == -1 and batch.max_timestamp == 2**40


# --- legacy v0/v1 written by kafka-python -----------------------------------------------------
@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4"])
def test_legacy_message_sets(magic, codec):
    builder = KpLegacyBuilder(magic=magic, compression_type=CODECS[codec], batch_size=1 << 20)
    expected = []
    for i in range(6):
        key = None if i == 2 else b"k%d" % i
        value = None if i == 4 else b"value-%d" % i
        ts = NOW + i if magic else None
        builder.append(i, timestamp=ts, key=key, value=value)
        expected.append((i, ts if magic else -1, key, value, []))
    buf = bytes(builder.build())
    batches = list(iter_batches(buf))
    assert all(isinstance(b, LegacyBatch) for b in batches)
    assert all(b.is_valid() and b.magic == magic for b in batches)
    assert len(batches) == (6 if codec == "none" else 1)
    got = [tuple(r) for b in batches for r in b.records(check_crc=True)]
    assert got == expected
    last = batches[-1]
    # a client's compressed wrapper carries offset 0 until a broker assigns the last offset
    assert last.last_offset == (5 if codec == "none" else 0)
    assert batches[0].base_offset == 0
    assert last.compression == codec
    assert last.timestamp_type == ("create" if magic else "no_timestamp")
    assert sum(b.record_count for b in batches) == 6
    # a flipped bit in the last message is caught by the CRC-32
    bad = bytearray(buf)
    bad[-1] ^= 1
    assert not list(iter_batches(bytes(bad)))[-1].is_valid()


def test_legacy_v1_compressed_wrapper_offsets_and_log_append_time():
    """Inner v1 offsets are relative to the wrapper's (last) offset; a LogAppendTime wrapper
    gives its timestamp to every inner record."""
    builder = KpLegacyBuilder(magic=1, compression_type=1, batch_size=1 << 20)
    for i in range(3):
        builder.append(i, timestamp=NOW + i, key=None, value=b"x%d" % i)
    buf = bytearray(builder.build())
    struct.pack_into(">q", buf, 0, 500)               # wrapper offset = absolute last offset
    buf[17] |= 0x08                                    # LogAppendTime
    struct.pack_into(">q", buf, 18, NOW + 99)
    import zlib
    struct.pack_into(">I", buf, 12, zlib.crc32(bytes(buf[16:])))
    (batch,) = iter_batches(bytes(buf))
    assert batch.is_valid() and batch.timestamp_type == "log_append"
    assert [(r.offset, r.timestamp) for r in batch.records()] == [
        (498, NOW + 99), (499, NOW + 99), (500, NOW + 99)]
    assert batch.base_offset == 498 and batch.max_timestamp == NOW + 99
