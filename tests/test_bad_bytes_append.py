"""Issue 19: a rejected append changes nothing; offsets never go backwards or past a Java long;
a CRC is never written over bytes whose own CRC was not checked.

Follower appends use batches cut from a real Kafka log (tests/data/kafka-logs), on real files,
on both batch-kernel builds.
"""
from __future__ import annotations

import os
import struct

import crc32c as crc32c_pypi
import pytest
from conftest import FIXTURE_LOGS
from fuzz_harness import batch_kernel_build, restamp, with_fields

from replica_core.errors import (
    CorruptRecordError,
    InvalidRecordError,
    LogSegmentOffsetOverflowError,
    OffsetsOutOfOrderError,
)
from replica_core.records import build_batch, iter_batches, scan, validate_and_assign_offsets
from replica_core.storage.config import LogConfig
from replica_core.storage.log import Log

NOW = 1_700_000_000_000
REAL_LOG = FIXTURE_LOGS / "kafka-3.1.0-zk" / "data" / "kafka-logs" / "design-0" / \
    "00000000000000000000.log"


@pytest.fixture(params=["native", "twin"])
def build(request):
    with batch_kernel_build(request.param):
        yield request.param


def real_batches() -> list[bytes]:
    data = REAL_LOG.read_bytes()
    s = scan(data)
    assert len(s) > 10 and (s.crc_ok == 1).all()
    return [data[p:p + n] for p, n in zip(s.positions.tolist(), s.sizes.tolist(), strict=True)]


def snapshot(log: Log) -> tuple[int, dict[str, bytes]]:
    """The LEO and every byte of every file of the partition directory."""
    files = {}
    for name in sorted(os.listdir(log.dir)):
        with open(os.path.join(log.dir, name), "rb") as f:
            files[name] = f.read()
    return log.log_end_offset, files


def follower_log(tmp_path, index_interval_bytes: int) -> tuple[Log, list[bytes]]:
    batches = real_batches()
    log = Log.open(tmp_path / "design-0", LogConfig(index_interval_bytes=index_interval_bytes))
    for b in batches[:6]:
        log.append_as_follower(b)
    log.flush()
    return log, batches[6:]


@pytest.mark.parametrize("interval", [4096, 1], ids=["default-interval", "index-entry-due"])
@pytest.mark.parametrize("delta", [-1, -7, -(2**31)])
def test_negative_last_offset_delta_never_reaches_the_log(tmp_path, build, interval, delta):
    log, rest = follower_log(tmp_path, interval)
    nxt = rest[0]
    assert struct.unpack_from(">q", nxt)[0] == log.log_end_offset
    before = snapshot(log)
    bad = with_fields(nxt, last_offset_delta=delta)   # CRC-valid, last offset below the base
    with pytest.raises(OffsetsOutOfOrderError):
        log.append_as_follower(bad)
    log.flush()
    assert snapshot(log) == before
    # the log is intact: the real batch goes on where the bad one was refused
    info = log.append_as_follower(nxt)
    assert log.log_end_offset == info.last_offset + 1 > before[0]
    assert bytes(log.read(before[0], 1 << 20).records) == nxt


def test_a_batch_starting_below_the_first_is_refused(tmp_path, build):
    log, rest = follower_log(tmp_path, 1)
    first, second = rest[0], rest[1]
    before = snapshot(log)
    for base in (-1, struct.unpack_from(">q", first)[0] - 1, -(2**40)):
        # the last offsets still increase (Kafka's own rule), the second batch starts too low
        moved = with_fields(second, base_offset=base,
                            last_offset_delta=struct.unpack_from(">i", second, 23)[0] + 2**30)
        with pytest.raises(OffsetsOutOfOrderError):
            log.append_as_follower(first + moved)
        assert snapshot(log) == before
    bad_first = with_fields(first, base_offset=-1, last_offset_delta=log.log_end_offset + 5)
    with pytest.raises(OffsetsOutOfOrderError):
        log.append_as_follower(bad_first)     # base -1 would pass for "no first offset"
    assert snapshot(log) == before


def test_offsets_that_cannot_share_a_segment_are_refused_before_any_roll(tmp_path, build):
    log, rest = follower_log(tmp_path, 4096)
    far = with_fields(rest[1], base_offset=log.log_end_offset + 2**31 + 10)
    before = snapshot(log)
    with pytest.raises(LogSegmentOffsetOverflowError):
        log.append_as_follower(rest[0] + far)
    assert snapshot(log) == before        # no new segment was rolled for it


# --- the leader: offsets assigned from the LEO --------------------------------------------------
def client_batch() -> bytes:
    return build_batch([b"value-%d" % i for i in range(5)], timestamps=[NOW - 5 + i for i in range(5)])


def test_offsets_past_long_max_are_a_typed_error(build):
    for origin in ("client", "coordinator"):
        with pytest.raises(LogSegmentOffsetOverflowError):
            validate_and_assign_offsets(client_batch(), 2**63 - 3, 0, NOW, origin=origin)
        with pytest.raises(LogSegmentOffsetOverflowError):
            validate_and_assign_offsets(client_batch(), 2**63 - 3, 0, NOW, origin=origin,
                                        target_compression="gzip")
    # the last offset that fits is fine
    res = validate_and_assign_offsets(client_batch(), 2**63 - 6, 0, NOW)
    assert res.last_offset == 2**63 - 2


@pytest.mark.parametrize(("fields", "match"), [
    (dict(count=0, last_offset_delta=0), "count"),
    (dict(last_offset_delta=-1), "offset range"),
    (dict(last_offset_delta=2**31 - 1), "offset range"),   # base would be negative
])
def test_coordinator_batches_that_would_sit_below_the_leo(tmp_path, build, fields, match):
    bad = with_fields(client_batch(), **fields)
    with pytest.raises(InvalidRecordError, match=match):
        validate_and_assign_offsets(bad, 10, 0, NOW, origin="coordinator")
    log = Log.open(tmp_path / "t-0")
    log.append_as_leader(client_batch(), 1)
    before = snapshot(log)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(bad, 1, origin="coordinator")
    assert snapshot(log) == before


# --- CRCs ----------------------------------------------------------------------------------------
def corrupted(batch: bytes) -> bytes:
    """A record value byte changed, the stored CRC left as it was: parseable, CRC-invalid."""
    out = bytearray(batch)
    out[out.index(b"value-3") + 6] ^= 0x01
    assert crc32c_pypi.crc32c(bytes(out[21:])) != struct.unpack_from(">I", out, 17)[0]
    return bytes(out)


def test_nothing_covered_changes_so_the_producers_crc_stays(build):
    bad = corrupted(client_batch())
    res = validate_and_assign_offsets(bad, 40, 2, NOW)
    out = bytes(res.buffer)
    assert out[17:] == bad[17:]                       # CRC and everything it covers kept
    assert struct.unpack_from(">qii", out) == (40, len(bad) - 12, 2)
    assert not next(iter_batches(out)).is_valid()     # still reads as corrupt


@pytest.mark.parametrize("kw", [
    dict(timestamp_type="log_append"),                # attributes and max timestamp rewritten
    dict(target_compression="gzip"),                  # rebuilt
    dict(origin="coordinator", timestamp_type="log_append"),
])
def test_a_rewrite_checks_the_crc_first(build, kw):
    bad = corrupted(client_batch())
    with pytest.raises(CorruptRecordError):
        validate_and_assign_offsets(bad, 40, 2, NOW, **kw)
    good = validate_and_assign_offsets(client_batch(), 40, 2, NOW, **kw)
    assert all(b.is_valid() for b in iter_batches(good.buffer))


def test_a_rewritten_max_timestamp_checks_the_crc_first(build):
    batch = bytearray(client_batch())
    struct.pack_into(">q", batch, 35, NOW - 1000)     # stored max timestamp is stale
    restamp(batch)
    bad = corrupted(bytes(batch))
    with pytest.raises(CorruptRecordError):
        validate_and_assign_offsets(bad, 0, 0, NOW)
    res = validate_and_assign_offsets(bytes(batch), 0, 0, NOW)
    assert struct.unpack_from(">q", res.buffer, 35)[0] == NOW - 1
    assert next(iter_batches(res.buffer)).is_valid()


def test_a_legacy_entry_is_converted_only_with_its_crc_valid(build):
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    b = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    for i in range(3):
        b.append(i, timestamp=NOW, key=None, value=b"legacy-%d" % i)
    good = bytes(b.build())
    res = validate_and_assign_offsets(good, 5, 0, NOW)
    assert next(iter_batches(res.buffer)).is_valid()
    bad = bytearray(good)
    bad[bad.index(b"legacy-1") + 7] ^= 0x01
    with pytest.raises(CorruptRecordError):
        validate_and_assign_offsets(bytes(bad), 5, 0, NOW)
