"""Issue 19, "acknowledged but not stored": a produce whose records are not exactly one whole v2
batch is answered with an error and never reaches the log (Kafka's
``ProduceRequest.validateRecords``, run by ``KafkaApis.handleProduceRequest`` before the append).
"""
from __future__ import annotations

import struct

import pytest
from fuzz_harness import fixture_batches, restamp
from replication_harness import TP, Cluster

from replica_core.errors import CorruptRecordError, Errors, InvalidRecordError
from replica_core.records import build_batch, iter_batches
from replica_core.records.produce_request import produce_records_error, validate_produce_records


def a_real_batch() -> bytes:
    """A client-shaped batch cut from a real Kafka log: base offset 0, stamped fields cleared."""
    for batch in fixture_batches():
        if batch[16] == 2 and batch[22] & 0x20 == 0 and len(batch) > 120:
            out = bytearray(batch)
            struct.pack_into(">q", out, 0, 0)
            restamp(out)
            return bytes(out)
    raise AssertionError("no data batch in the fixtures")


REAL = a_real_batch()

NOT_ONE_WHOLE_BATCH = {
    "empty": b"",
    "eleven bytes": REAL[:11],
    "cut short": REAL[:-1],
    "bare header": REAL[:61],
    "header up to magic": REAL[:17],
    "legacy magic 1": bytes(REAL[:16]) + b"\x01" + bytes(REAL[17:]),
    "two batches": REAL + REAL,
}


@pytest.fixture
def cluster() -> Cluster:
    c = Cluster()
    c.create()
    c.produce(n=2, acks=1)   # something in the log already
    return c


@pytest.mark.parametrize("acks", [1, -1, 0])
@pytest.mark.parametrize("name", sorted(NOT_ONE_WHOLE_BATCH))
def test_not_exactly_one_whole_batch_is_refused_before_the_log(cluster, acks, name):
    leo = cluster.partition(0).log_end_offset
    log = cluster.rm(0).local_log(TP)
    size = log.size
    resp = cluster.rm(0).append_records({TP: NOT_ONE_WHOLE_BATCH[name]}, acks=acks,
                                        timeout_ms=1000)
    assert resp is not None, "nothing may wait for replication"
    assert resp[TP].error_code == Errors.INVALID_RECORD
    assert resp[TP].base_offset == -1
    assert cluster.partition(0).log_end_offset == leo
    assert log.size == size
    assert cluster.rm(0).produce_purgatory.delayed == 0


@pytest.mark.parametrize("acks", [1, -1])
def test_a_corrupt_frame_is_corrupt_message(cluster, acks):
    bad = bytearray(REAL)
    struct.pack_into(">i", bad, 8, 13)            # batchLength below the 14-byte minimum
    leo = cluster.partition(0).log_end_offset
    resp = cluster.rm(0).append_records({TP: bytes(bad)}, acks=acks, timeout_ms=1000)
    assert resp[TP].error_code == Errors.CORRUPT_MESSAGE
    assert cluster.partition(0).log_end_offset == leo


def test_success_means_stored(cluster):
    leo = cluster.partition(0).log_end_offset
    # a whole batch followed by bytes that are no batch: Kafka's iterator stops there, the
    # log trims them (§2.3), and the answer NONE means the batch is in the log
    resp = cluster.rm(0).append_records({TP: REAL + REAL[:30]}, acks=1, timeout_ms=1000)
    assert resp[TP].error_code == Errors.NONE and resp[TP].base_offset == leo
    count = struct.unpack_from(">i", REAL, 57)[0]
    assert cluster.partition(0).log_end_offset == leo + count
    stored = cluster.rm(0).local_log(TP).read(leo, 1 << 20).records
    batches = list(iter_batches(stored))
    assert [b.base_offset for b in batches] == [leo]
    assert batches[0].buffer[61:] == REAL[61:]


def test_other_partitions_of_the_request_are_not_affected(cluster):
    leo = cluster.partition(0).log_end_offset
    other = type(TP)("t", 1)
    cluster.create(other)
    resp = cluster.rm(0).append_records({TP: b"", other: build_batch([b"x"])}, acks=1,
                                        timeout_ms=1000)
    assert resp[TP].error_code == Errors.INVALID_RECORD
    assert resp[other].error_code == Errors.NONE
    assert cluster.partition(0).log_end_offset == leo
    assert cluster.partition(0, other).log_end_offset == 1


@pytest.mark.parametrize("name", sorted(NOT_ONE_WHOLE_BATCH))
def test_validate_produce_records_names_kafkas_error(name):
    with pytest.raises(InvalidRecordError):
        validate_produce_records(NOT_ONE_WHOLE_BATCH[name])
    err = produce_records_error(NOT_ONE_WHOLE_BATCH[name])
    assert isinstance(err, InvalidRecordError) and err.code == Errors.INVALID_RECORD


def test_validate_produce_records_corrupt_frames():
    for offset, value, fmt in ((8, 0, ">i"), (16, 3, ">b"), (16, -1, ">b")):
        bad = bytearray(REAL)
        struct.pack_into(fmt, bad, offset, value)
        with pytest.raises(CorruptRecordError):
            validate_produce_records(bad)
    # a corrupt frame right after the one whole batch is corrupt too (the iterator reads it)
    with pytest.raises(CorruptRecordError):
        validate_produce_records(REAL + bytes(12))


def test_validate_produce_records_accepts_one_whole_batch():
    for ok in (REAL, memoryview(REAL), bytearray(REAL), REAL + REAL[:16], REAL + REAL[:-1]):
        assert produce_records_error(ok) is None
    assert isinstance(produce_records_error(None), InvalidRecordError)


def test_produce_records_error_agrees_with_validate_on_every_length_field():
    """The one-whole-batch shortcut of produce_records_error answers as the full check does
    for every length field and magic byte around the exact frame (as bytes, its shortcut's
    type, and as a bytearray, which always takes the full check)."""
    lengths = sorted({-1, 0, 13, 14, 15, len(REAL) - 13, len(REAL) - 12, len(REAL) - 11,
                      len(REAL), 2**31 - 1})
    for length in lengths:
        for magic in (0, 1, 2, 3, 0xFF):
            buf = bytearray(REAL)
            struct.pack_into(">i", buf, 8, length)
            buf[16] = magic
            for records in (bytes(buf), bytes(buf[:length + 12]) if 0 <= length else b""):
                try:
                    validate_produce_records(bytearray(records))
                    expected = None
                except (InvalidRecordError, CorruptRecordError) as e:
                    expected = (type(e), str(e))
                got = produce_records_error(records)
                assert (None if got is None else (type(got), str(got))) == expected, \
                    (length, magic, len(records))
