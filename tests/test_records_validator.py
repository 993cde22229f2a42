"""The append-path rules of KAFKA_SEMANTICS §2.2-§2.4 (error table §2.9), one test per rule:
each test would fail if its rule were dropped or inverted."""
from __future__ import annotations

import gzip
import struct
import zlib

import crc32c as crc32c_pypi
import pytest
from kafka.record.legacy_records import LegacyRecordBatchBuilder as KpLegacyBuilder

from replica_core.errors import (
    CorruptRecordError,
    Errors,
    InvalidRecordError,
    InvalidTimestampError,
    OffsetsOutOfOrderError,
    RecordTooLargeError,
    RecordValidationError,
    UnsupportedCompressionTypeError,
)
from replica_core.records import (
    analyze_and_validate,
    build_batch,
    build_end_txn_marker,
    iter_batches,
    trim_invalid_bytes,
    validate_and_assign_offsets,
)
from replica_core.records.builder import assemble_batch, encode_headers, encode_record

NOW = 1_700_000_000_000
HOUR = 3_600_000


def batch(n=3, **kw):
    kw.setdefault("timestamps", [NOW - 10 + i for i in range(n)])
    kw.setdefault("keys", [b"k%d" % i for i in range(n)])
    return build_batch([b"value-%d" % i for i in range(n)], **kw)


def crafted(deltas=(0, 1, 2), *, count=None, last_offset_delta=None, attributes=0,
            base_offset=0, max_timestamp=None, producer_id=-1, base_sequence=-1,
            timestamps=None, keys=None) -> bytes:
    """A batch with chosen offset deltas and header fields, valid CRC."""
    timestamps = timestamps or [NOW + i for i in range(len(deltas))]
    area = bytearray()
    for i, d in enumerate(deltas):
        key = b"k%d" % i if keys is None else keys[i]
        encode_record(area, d, timestamps[i] - timestamps[0], key, b"v%d" % i, encode_headers([]))
    return assemble_batch(
        area, count=len(deltas) if count is None else count, base_offset=base_offset,
        partition_leader_epoch=-1, attributes=attributes,
        last_offset_delta=max(deltas) if last_offset_delta is None else last_offset_delta,
        base_timestamp=timestamps[0] if timestamps else -1,
        max_timestamp=max(timestamps, default=-1) if max_timestamp is None else max_timestamp,
        producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=base_sequence)


def fix_crc(buf: bytearray) -> bytes:
    struct.pack_into(">I", buf, 17, crc32c_pypi.crc32c(bytes(buf[21:])))
    return bytes(buf)


def legacy(magic, codec=0, n=3, key=b"k"):
    b = KpLegacyBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i in range(n):
        b.append(i, timestamp=NOW + i if magic else None, key=key, value=b"v%d" % i)
    return bytes(b.build())


def only(buf):
    (b,) = iter_batches(buf)
    return b


# --- §2.2 analyzeAndValidateRecords ---------------------------------------------------------
def test_client_batches_must_have_base_offset_zero():
    buf = batch(base_offset=5)
    with pytest.raises(InvalidRecordError) as e:
        analyze_and_validate(buf, "client")
    assert e.value.code == Errors.INVALID_RECORD
    for origin in ("replication", "coordinator"):
        assert analyze_and_validate(buf, origin).first_offset == 5
    # legacy formats are exempt (only v2 is checked)
    assert analyze_and_validate(legacy(1), "client").first_offset == -1


def test_append_info_fields():
    a = batch(2, base_offset=10, partition_leader_epoch=3, compression="gzip",
              timestamps=[NOW, NOW + 50])
    b = batch(4, base_offset=12, partition_leader_epoch=4, timestamps=[NOW + 1] * 4)
    info = analyze_and_validate(a + b + b[:20], "replication")
    assert info.first_offset == 10
    assert info.last_offset_of_first_batch == 11
    assert info.last_offset == 15
    assert info.last_leader_epoch == 4
    assert info.max_timestamp == NOW + 50
    assert info.shallow_offset_of_max_timestamp == 11
    assert info.valid_bytes == len(a) + len(b)
    assert info.shallow_count == 2
    assert info.num_records == 6
    assert info.source_compression == "gzip"
    assert info.log_append_time == -1
    assert info.offsets_monotonic
    assert info.first_or_last_offset_of_first_batch == 10
    assert info.num_messages == 6
    none = analyze_and_validate(batch(partition_leader_epoch=-1), "client")
    assert none.last_leader_epoch == -1 and none.source_compression == "none"


def test_source_compression_is_the_last_compressed_batch():
    parts = [batch(1, base_offset=0, compression="lz4"), batch(1, base_offset=1),
             batch(1, base_offset=2, compression="zstd"), batch(1, base_offset=3)]
    assert analyze_and_validate(b"".join(parts), "replication").source_compression == "zstd"


def test_max_timestamp_ties_keep_the_earliest_batch():
    a = batch(1, base_offset=0, timestamps=[NOW + 5])
    b = batch(1, base_offset=1, timestamps=[NOW + 5])
    c = batch(1, base_offset=2, timestamps=[NOW + 4])
    info = analyze_and_validate(a + b + c, "replication")
    assert (info.max_timestamp, info.shallow_offset_of_max_timestamp) == (NOW + 5, 0)
    d = batch(1, base_offset=3, timestamps=[NOW + 6])
    info = analyze_and_validate(a + b + c + d, "replication")
    assert (info.max_timestamp, info.shallow_offset_of_max_timestamp) == (NOW + 6, 3)


def test_legacy_first_offset_unknown_uses_last_offset_of_first_batch():
    info = analyze_and_validate(legacy(1), "replication")
    assert info.first_offset == -1
    assert info.last_offset_of_first_batch == 0
    assert info.first_or_last_offset_of_first_batch == 0
    assert info.last_offset == 2 and info.num_records == 3
    assert info.max_timestamp == NOW + 2


def test_follower_offsets_must_increase():
    a, b = batch(2, base_offset=10), batch(2, base_offset=11)   # last offsets 11, 12: fine
    assert analyze_and_validate(a + b, "replication").offsets_monotonic
    c = batch(2, base_offset=10)                                  # last offset 11 again
    with pytest.raises(OffsetsOutOfOrderError):
        analyze_and_validate(a + c, "replication")
    # the leader path reports it without raising
    info = analyze_and_validate(a + c, "coordinator")
    assert not info.offsets_monotonic


def test_record_too_large_unless_ignored():
    buf = batch(20)
    with pytest.raises(RecordTooLargeError) as e:
        analyze_and_validate(buf, "client", max_message_bytes=len(buf) - 1)
    assert e.value.code == Errors.MESSAGE_TOO_LARGE
    assert analyze_and_validate(buf, "client", max_message_bytes=len(buf)).valid_bytes == len(buf)
    info = analyze_and_validate(buf, "replication", max_message_bytes=10, ignore_record_size=True)
    assert info.valid_bytes == len(buf)


def test_crc_mismatch_and_short_batches_are_corrupt():
    bad = bytearray(batch())
    bad[-1] ^= 0x01
    with pytest.raises(CorruptRecordError) as e:
        analyze_and_validate(bytes(bad), "replication")
    assert e.value.code == Errors.CORRUPT_MESSAGE
    short = struct.pack(">qiib", 0, 40, 0, 2) + b"\x00" * 35   # framed, under 61 bytes
    with pytest.raises(CorruptRecordError):
        analyze_and_validate(short, "replication")
    bad_legacy = bytearray(legacy(0))
    bad_legacy[-1] ^= 0x01
    with pytest.raises(CorruptRecordError):
        analyze_and_validate(bytes(bad_legacy), "replication")


def test_check_order_within_a_batch():
    # base offset (client) before size, size before CRC
    bad = bytearray(batch(20, base_offset=3))
    bad[-1] ^= 0x01
    with pytest.raises(InvalidRecordError):
        analyze_and_validate(bytes(bad), "client", max_message_bytes=10)
    with pytest.raises(RecordTooLargeError):
        analyze_and_validate(bytes(bad), "coordinator", max_message_bytes=10)
    # an earlier batch's error wins over a later one's
    big = batch(30, base_offset=0)
    with pytest.raises(CorruptRecordError):
        analyze_and_validate(bytes(bad) + big, "replication", max_message_bytes=len(big) - 1)


def test_corrupt_frame_after_good_batches():
    good = batch()
    bad = bytearray(batch(base_offset=3))
    bad[16] = 7
    with pytest.raises(CorruptRecordError):
        analyze_and_validate(good + bytes(bad), "replication")


def test_unknown_codec_id():
    buf = bytearray(batch())
    struct.pack_into(">h", buf, 21, 6)
    with pytest.raises(UnsupportedCompressionTypeError) as e:
        analyze_and_validate(fix_crc(buf), "client")
    assert e.value.code == Errors.UNSUPPORTED_COMPRESSION_TYPE
    with pytest.raises(UnsupportedCompressionTypeError):
        list(only(fix_crc(buf)).records())


# --- §2.3 trimInvalidBytes ------------------------------------------------------------------
def test_trim_invalid_bytes():
    good = batch()
    info = analyze_and_validate(good, "client")
    assert trim_invalid_bytes(good, info) is good
    torn = good + good[:30]
    info = analyze_and_validate(torn, "replication")
    trimmed = trim_invalid_bytes(torn, info)
    assert isinstance(trimmed, memoryview) and bytes(trimmed) == good
    info.valid_bytes = -1
    with pytest.raises(CorruptRecordError):
        trim_invalid_bytes(torn, info)


# --- §2.4 batch-level rules -----------------------------------------------------------------
def test_no_batches_at_all():
    with pytest.raises(InvalidRecordError):
        validate_and_assign_offsets(b"", 0, 0, NOW)


@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_v2_must_be_exactly_one_batch(codec):
    two = batch(compression=codec) + batch()
    with pytest.raises(InvalidRecordError, match="more than one batch"):
        validate_and_assign_offsets(two, 0, 0, NOW, origin="coordinator")


def test_client_offset_range_and_count_rules():
    with pytest.raises(InvalidRecordError, match="invalid offset range"):
        validate_and_assign_offsets(crafted(last_offset_delta=-1), 0, 0, NOW)
    with pytest.raises(InvalidRecordError, match="Invalid reported count"):
        validate_and_assign_offsets(crafted((), count=0, last_offset_delta=0), 0, 0, NOW)
    with pytest.raises(InvalidRecordError, match="Inconsistent"):
        validate_and_assign_offsets(crafted(last_offset_delta=5), 0, 0, NOW)
    # the coordinator is not held to these: the producer's lastOffsetDelta is kept
    # (setLastOffset rewrites baseOffset = lastOffset - lastOffsetDelta)
    res = validate_and_assign_offsets(crafted(last_offset_delta=5), 100, 0, NOW,
                                      origin="coordinator")
    assert (res.first_offset, res.last_offset) == (100, 102)
    out = only(res.buffer)
    assert (out.base_offset, out.last_offset_delta, out.last_offset) == (97, 5, 102)


def test_clients_cannot_write_control_batches():
    marker = build_end_txn_marker(True, producer_id=1, producer_epoch=0, coordinator_epoch=0,
                                  timestamp_ms=NOW)
    with pytest.raises(InvalidRecordError, match="control"):
        validate_and_assign_offsets(marker, 0, 0, NOW)
    res = validate_and_assign_offsets(marker, 7, 2, NOW, origin="coordinator")
    assert only(res.buffer).is_control and res.first_offset == 7


def test_producer_id_requires_base_sequence():
    with pytest.raises(InvalidRecordError, match="sequence"):
        validate_and_assign_offsets(batch(producer_id=9, producer_epoch=0, base_sequence=-1),
                                    0, 0, NOW)
    ok = validate_and_assign_offsets(batch(producer_id=9, producer_epoch=0, base_sequence=0),
                                     0, 0, NOW)
    assert only(ok.buffer).producer_id == 9
    # not checked for the coordinator
    validate_and_assign_offsets(batch(producer_id=9, producer_epoch=0, base_sequence=-1), 0, 0,
                                NOW, origin="coordinator")


def test_mixed_magic_is_invalid():
    mixed = legacy(0, n=1) + legacy(1, n=1)
    with pytest.raises(InvalidRecordError, match="magic"):
        validate_and_assign_offsets(mixed, 0, 0, NOW)


# --- §2.4 record-level rules ----------------------------------------------------------------
def test_compacted_topics_need_keys():
    buf = batch(4, keys=[b"a", None, b"c", None])
    validate_and_assign_offsets(buf, 0, 0, NOW)          # fine when not compacted
    with pytest.raises(RecordValidationError) as e:
        validate_and_assign_offsets(buf, 0, 0, NOW, compacted=True)
    assert isinstance(e.value.cause, InvalidRecordError)
    assert e.value.code == Errors.INVALID_RECORD
    assert [i for i, _ in e.value.record_errors] == [1, 3]
    # the same inside a compressed batch
    with pytest.raises(RecordValidationError):
        validate_and_assign_offsets(batch(2, keys=[None, b"x"], compression="lz4"), 0, 0, NOW,
                                    compacted=True)


@pytest.mark.parametrize("codec", ["none", "snappy"])
def test_create_time_window(codec):
    buf = batch(3, timestamps=[NOW - 2 * HOUR, NOW, NOW + 2 * HOUR], compression=codec)
    validate_and_assign_offsets(buf, 0, 0, NOW)           # defaults: Long.MAX both ways
    with pytest.raises(RecordValidationError) as e:
        validate_and_assign_offsets(buf, 0, 0, NOW, timestamp_before_max_ms=HOUR)
    assert isinstance(e.value.cause, InvalidTimestampError)
    assert e.value.code == Errors.INVALID_TIMESTAMP
    assert [i for i, _ in e.value.record_errors] == [0]
    with pytest.raises(RecordValidationError) as e:
        validate_and_assign_offsets(buf, 0, 0, NOW, timestamp_after_max_ms=HOUR)
    assert [i for i, _ in e.value.record_errors] == [2]
    # message.timestamp.difference.max.ms stands in for both bounds when they are unset
    with pytest.raises(RecordValidationError) as e:
        validate_and_assign_offsets(buf, 0, 0, NOW, max_timestamp_difference_ms=HOUR)
    assert [i for i, _ in e.value.record_errors] == [0, 2]
    # exactly on the bound is allowed
    validate_and_assign_offsets(buf, 0, 0, NOW, max_timestamp_difference_ms=2 * HOUR)


def test_no_timestamp_is_never_out_of_range():
    buf = batch(2, timestamps=[-1, NOW])
    res = validate_and_assign_offsets(buf, 0, 0, NOW, max_timestamp_difference_ms=0)
    assert res.max_timestamp == NOW


def test_key_and_timestamp_errors_together_report_invalid_timestamp():
    buf = batch(3, keys=[None, b"k", b"k"], timestamps=[NOW, NOW - 2 * HOUR, NOW])
    with pytest.raises(RecordValidationError) as e:
        validate_and_assign_offsets(buf, 0, 0, NOW, compacted=True,
                                    timestamp_before_max_ms=HOUR)
    assert isinstance(e.value.cause, InvalidTimestampError)
    assert [i for i, _ in e.value.record_errors] == [0, 1]
    assert "key" in e.value.record_errors[0][1]


def test_log_append_time_topic():
    buf = batch(3, timestamps=[NOW - 10 * HOUR, NOW, NOW + 10 * HOUR])
    res = validate_and_assign_offsets(buf, 50, 1, NOW, timestamp_type="log_append",
                                      max_timestamp_difference_ms=HOUR)   # bounds not applied
    out = only(res.buffer)
    assert out.timestamp_type == "log_append" and out.max_timestamp == NOW
    assert out.is_valid()
    assert res.max_timestamp == NOW and res.log_append_time == NOW
    assert res.shallow_offset_of_max_timestamp == 52
    assert [r.timestamp for r in out.records()] == [NOW] * 3
    assert not res.message_size_maybe_changed


def test_producer_must_not_set_log_append_time():
    lat = batch(2, timestamp_type="log_append", now_ms=NOW)
    with pytest.raises(RecordValidationError) as e:
        validate_and_assign_offsets(lat, 0, 0, NOW, timestamp_type="log_append")
    assert isinstance(e.value.cause, InvalidTimestampError)
    assert [i for i, _ in e.value.record_errors] == [0, 1]
    # on a CreateTime topic the records read the batch maxTimestamp; -1 there is the error
    no_ts = crafted(attributes=0x08, max_timestamp=-1)
    with pytest.raises(RecordValidationError) as e:
        validate_and_assign_offsets(no_ts, 0, 0, NOW)
    assert isinstance(e.value.cause, InvalidTimestampError)
    # ... and a usable maxTimestamp passes, the batch becoming CreateTime
    res = validate_and_assign_offsets(lat, 0, 0, NOW)
    out = only(res.buffer)
    assert out.timestamp_type == "create" and out.is_valid()
    assert res.max_timestamp == NOW
    # outside the window it is a timestamp error
    with pytest.raises(RecordValidationError):
        validate_and_assign_offsets(batch(2, timestamp_type="log_append", now_ms=NOW - 5 * HOUR),
                                    0, 0, NOW, timestamp_before_max_ms=HOUR)


# --- §2.4 offset assignment -----------------------------------------------------------------
def test_in_place_uncompressed_assignment():
    buf = batch(4, partition_leader_epoch=-1, timestamps=[NOW, NOW + 9, NOW + 3, NOW + 1])
    res = validate_and_assign_offsets(buf, 1000, 17, NOW)
    out = only(res.buffer)
    assert (res.first_offset, res.last_offset, res.num_records) == (1000, 1003, 4)
    assert (out.base_offset, out.last_offset, out.partition_leader_epoch) == (1000, 1003, 17)
    assert res.max_timestamp == out.max_timestamp == NOW + 9
    assert res.shallow_offset_of_max_timestamp == 1003
    assert res.log_append_time == -1
    assert not res.message_size_maybe_changed
    assert out.is_valid()
    assert res.buffer[21:] == buf[21:]                 # only offset, epoch and CRC moved
    assert [r.offset for r in out.records()] == [1000, 1001, 1002, 1003]


def test_max_timestamp_is_recomputed_from_the_records():
    buf = crafted(timestamps=[NOW, NOW + 7, NOW + 2], max_timestamp=NOW + 999)
    res = validate_and_assign_offsets(buf, 0, 0, NOW)
    out = only(res.buffer)
    assert out.max_timestamp == res.max_timestamp == NOW + 7
    assert out.is_valid()


def test_high_attribute_bits_dropped_only_when_rewritten():
    buf = bytearray(crafted(max_timestamp=NOW + 2))
    struct.pack_into(">h", buf, 21, 0x0100)             # an unused bit
    buf = fix_crc(buf)
    kept = validate_and_assign_offsets(buf, 0, 0, NOW)    # type and max unchanged
    assert only(kept.buffer).attributes == 0x0100
    rewritten = validate_and_assign_offsets(buf, 0, 0, NOW, timestamp_type="log_append")
    assert only(rewritten.buffer).attributes == 0x08


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_same_codec_in_place(codec):
    buf = batch(5, compression=codec)
    res = validate_and_assign_offsets(buf, 40, 2, NOW)
    assert not res.message_size_maybe_changed
    assert res.buffer[61:] == buf[61:]                  # the compressed payload is untouched
    out = only(res.buffer)
    assert (out.base_offset, out.compression, out.partition_leader_epoch) == (40, codec, 2)
    assert [r.offset for r in out.records()] == list(range(40, 45))


def test_compressed_out_of_order_inner_offsets_are_rebuilt():
    raw = crafted((0, 2, 4), last_offset_delta=2)
    # recompress the same records with gzip, keeping the odd offset deltas
    area = bytes(only(raw).buffer[61:])
    gz = assemble_batch(area, count=3, base_offset=0, partition_leader_epoch=-1, attributes=1,
                        last_offset_delta=2, base_timestamp=NOW, max_timestamp=NOW + 2,
                        producer_id=-1, producer_epoch=-1, base_sequence=-1)
    res = validate_and_assign_offsets(gz, 10, 0, NOW)
    assert res.message_size_maybe_changed
    out = only(res.buffer)
    assert out.compression == "gzip"
    assert [r.offset for r in out.records()] == [10, 11, 12]
    assert [r.value for r in out.records()] == [b"v0", b"v1", b"v2"]
    # uncompressed, the same deltas are not looked at (assignOffsetsNonCompressed)
    kept = validate_and_assign_offsets(raw, 10, 0, NOW)
    assert not kept.message_size_maybe_changed


@pytest.mark.parametrize(("source", "target"), [("none", "gzip"), ("gzip", "zstd"),
                                                ("lz4", "uncompressed"), ("snappy", "lz4")])
def test_codec_change_recompresses(source, target):
    buf = batch(6, compression=source, producer_id=3, producer_epoch=1, base_sequence=10,
                transactional=True, headers=[[("h", b"%d" % i)] for i in range(6)])
    res = validate_and_assign_offsets(buf, 7, 5, NOW, target_compression=target)
    assert res.message_size_maybe_changed
    out = only(res.buffer)
    assert out.compression == ("none" if target == "uncompressed" else target)
    assert out.is_valid()
    assert (out.base_offset, out.last_offset, out.partition_leader_epoch) == (7, 12, 5)
    assert (out.producer_id, out.producer_epoch, out.base_sequence) == (3, 1, 10)
    assert out.is_transactional
    before = [(r.key, r.value, r.headers, r.timestamp) for r in only(buf).records()]
    assert [(r.key, r.value, r.headers, r.timestamp) for r in out.records()] == before
    assert res.max_timestamp == max(r[3] for r in before)


def test_target_producer_keeps_the_codec():
    res = validate_and_assign_offsets(batch(compression="zstd"), 0, 0, NOW,
                                      target_compression="producer")
    assert only(res.buffer).compression == "zstd" and not res.message_size_maybe_changed


def test_uncompressed_control_batch_is_never_recompressed():
    marker = build_end_txn_marker(False, producer_id=4, producer_epoch=1, coordinator_epoch=3,
                                  timestamp_ms=NOW)
    res = validate_and_assign_offsets(marker, 9, 1, NOW, origin="coordinator",
                                      target_compression="gzip")
    out = only(res.buffer)
    assert out.compression == "none" and out.is_control and not res.message_size_maybe_changed
    # an ordinary batch on the same topic is compressed
    res = validate_and_assign_offsets(batch(), 9, 1, NOW, target_compression="gzip")
    assert only(res.buffer).compression == "gzip"


def test_recompressed_batch_is_rechecked_against_max_message_bytes():
    values = [b"a" * 2000] * 10
    small = build_batch(values, compression="zstd", timestamps=[NOW] * 10)
    assert len(small) < 500
    info = analyze_and_validate(small, "client", max_message_bytes=1000)
    assert info.valid_bytes == len(small)
    with pytest.raises(RecordTooLargeError):
        validate_and_assign_offsets(small, 0, 0, NOW, target_compression="none",
                                    max_message_bytes=1000)
    # in place it is not re-checked here (the size cannot change)
    validate_and_assign_offsets(small, 0, 0, NOW, max_message_bytes=100)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [0, 1, 2])
def test_legacy_input_is_converted_to_v2(magic, codec):
    buf = legacy(magic, codec, n=4)
    info = analyze_and_validate(buf, "client")
    assert info.valid_bytes == len(buf)
    res = validate_and_assign_offsets(buf, 30, 6, NOW)
    assert res.message_size_maybe_changed
    out = only(res.buffer)
    assert out.magic == 2 and out.is_valid()
    assert out.compression == {0: "none", 1: "gzip", 2: "snappy"}[codec]
    recs = list(out.records())
    assert [r.offset for r in recs] == [30, 31, 32, 33]
    assert [r.value for r in recs] == [b"v0", b"v1", b"v2", b"v3"]
    assert [r.timestamp for r in recs] == ([NOW + i for i in range(4)] if magic else [-1] * 4)
    assert out.partition_leader_epoch == 6


def test_legacy_inner_crc_is_checked():
    inner = bytearray(legacy(1, 0, n=1))         # an uncompressed v1 message set
    inner[-1] ^= 0x01                            # breaks the inner CRC
    payload = gzip.compress(bytes(inner))
    body = struct.pack(">bBq", 1, 1, NOW) + struct.pack(">i", -1) + struct.pack(">i",
                                                                                 len(payload))
    body += payload
    msg = struct.pack(">I", zlib.crc32(body)) + body
    wrapper = struct.pack(">qi", 0, len(msg)) + msg
    assert only(wrapper).is_valid()
    with pytest.raises(CorruptRecordError):
        validate_and_assign_offsets(wrapper, 0, 0, NOW)


def test_buffer_types():
    buf = batch(compression="gzip")
    expected = validate_and_assign_offsets(buf, 3, 1, NOW).buffer
    for obj in (bytearray(buf), memoryview(buf), memoryview(b"xx" + buf)[2:]):
        assert validate_and_assign_offsets(obj, 3, 1, NOW).buffer == expected
    assert bytes(buf) == batch(compression="gzip")     # the input is never modified


def test_errors_carry_wire_codes():
    with pytest.raises(RecordValidationError) as e:
        validate_and_assign_offsets(batch(1, keys=[None]), 0, 0, NOW, compacted=True)
    assert e.value.error_name == "INVALID_RECORD"
    with pytest.raises(ValueError):
        validate_and_assign_offsets(batch(), 0, 0, NOW, origin="somewhere")
