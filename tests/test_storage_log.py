"""Log: append (leader/follower), read, roll, flush, truncation, high watermark, LogManager.

KAFKA_SEMANTICS §2 (append, roll, flush), §3.2 (read), §4.1-4.2 (truncation), §5.1-5.2 (startup),
§1.10/§1.12 (checkpoint files and clean-shutdown marker, parsed here with plain text code).
"""
from __future__ import annotations

import json
import os
import struct
import threading

import pytest
from storage_testlib import make_batch, parse_batches, parse_checkpoint, parse_offset_index

from replica_core.clock import ManualClock
from replica_core.errors import (
    CorruptRecordError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    OffsetsOutOfOrderError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from replica_core.records import build_batch
from replica_core.storage.config import LogConfig
from replica_core.storage.log import Log
from replica_core.storage.log_manager import LogManager, load_log_dir
from replica_core.storage.medium import FileMedium, MemoryMedium
from replica_core.storage.segment import LogOffsetMetadata

T0 = 1_700_000_000_000


@pytest.fixture(params=["file", "memory"])
def env(request, tmp_path):
    if request.param == "file":
        medium, root = FileMedium(), str(tmp_path)
    else:
        medium, root = MemoryMedium(), "/data"
        medium.makedirs(root)
    return medium, root


@pytest.fixture
def memory_env():
    """Crash faults exist only on the page-cache model, so these tests take memory alone."""
    medium = MemoryMedium()
    medium.makedirs("/data")
    return medium, "/data"


def _open(env, config=None, clock=None, name="topic-0", **kw):
    medium, root = env
    return Log.open(os.path.join(root, name), config or LogConfig(), medium=medium,
                    clock=clock or ManualClock(T0), **kw)


def _batch(n=3, size=20, ts=None):
    return build_batch([bytes([65 + i % 26]) * size for i in range(n)],
                       timestamps=ts or [T0 + i for i in range(n)])


def _all_bytes(log):
    return b"".join(log.medium.read_bytes(s.log_path) for s in log.segments)


# --- leader append --------------------------------------------------------------------------
def test_the_four_offsets_a_leader_read_looks_at(env):
    """LEO, HW, log start and latest epoch, the attributes a leader's read compares."""
    log = _open(env)

    def offsets():
        return log.log_end_offset, log.high_watermark, log.log_start_offset, log.latest_epoch

    assert offsets() == (0, 0, 0, -1)  # empty: no epoch cached yet
    for _ in range(4):
        log.append_as_leader(_batch(3), leader_epoch=5)
    log.update_high_watermark(6)
    assert offsets() == (12, 6, 0, 5)
    assert log.maybe_increment_log_start_offset(3)
    assert offsets() == (12, 6, 3, 5)


def test_leader_append_assigns_offsets_and_stamps_epoch(env):
    log = _open(env)
    infos = [log.append_as_leader(_batch(3), leader_epoch=5) for _ in range(4)]
    assert [(i.first_offset, i.last_offset) for i in infos] == [(0, 2), (3, 5), (6, 8), (9, 11)]
    assert log.log_end_offset == 12
    assert log.log_end_offset_metadata == LogOffsetMetadata(12, 0, log.active_segment.size)
    parsed = parse_batches(_all_bytes(log))
    assert [(b.base_offset, b.last_offset, b.epoch) for b in parsed] == [
        (0, 2, 5), (3, 5, 5), (6, 8, 5), (9, 11, 5)]
    assert all(b.crc_ok for b in parsed)
    assert log.leader_epoch_cache.entries() == [(5, 0)]
    assert infos[-1].max_timestamp == T0 + 2 and infos[-1].shallow_offset_of_max_timestamp == 11
    medium, root = env
    version, entries = parse_checkpoint(medium.read_bytes(os.path.join(root, "topic-0", "leader-epoch-checkpoint")).decode())
    assert version == 0 and entries == [["5", "0"]]


def test_end_metadata_after_each_append_is_the_active_segment_end(env):
    """After every append - leader and follower, across segment rolls - the LEO's metadata is
    (LEO, active segment base, active segment size), a LogOffsetMetadata; a HW set below the
    LEO is offset-only metadata, at the LEO it is the LEO's."""
    medium, root = env
    cfg = LogConfig.from_properties({"segment.bytes": 400})  # a roll every few batches
    leader = _open(env, config=cfg)
    follower = _open(env, config=cfg, name="topic-1")
    for k in range(8):
        leader.append_as_leader(_batch(3), leader_epoch=2)
        follower.append_as_follower(leader.read(follower.log_end_offset, 1 << 20).records)
        for log in (leader, follower):
            seg = log.active_segment
            meta = log.log_end_offset_metadata
            assert type(meta) is LogOffsetMetadata
            assert meta == (3 * (k + 1), seg.base_offset, seg.size)
        assert follower.update_high_watermark(3 * k + 1) == 3 * k + 1
        hw = follower.high_watermark_metadata
        assert type(hw) is LogOffsetMetadata and hw == (3 * k + 1, -1, -1)
        assert hw.message_offset_only
    assert len(leader.segments) > 2 and len(follower.segments) > 2
    follower.update_high_watermark(follower.log_end_offset + 5)  # clamped to the LEO
    assert follower.high_watermark_metadata is follower.log_end_offset_metadata


def test_leader_rejects_bad_input_without_writing(env):
    log = _open(env, LogConfig.from_properties({"max.message.bytes": 2000}))
    log.append_as_leader(_batch(2), 1)
    before = _all_bytes(log)
    b = bytearray(_batch(2))
    b[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(bytes(b), 1)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(make_batch([b"x"], base_offset=7), 1)
    with pytest.raises(RecordTooLargeError):
        log.append_as_leader(_batch(1, size=5000), 1)
    assert _all_bytes(log) == before and log.log_end_offset == 2


def test_record_batch_larger_than_segment_is_rejected(env):
    log = _open(env, LogConfig.from_properties({"segment.bytes": 200}))
    with pytest.raises(RecordBatchTooLargeError):
        log.append_as_leader(_batch(5, size=100), 0)
    assert log.log_end_offset == 0


def test_log_append_time_topic(env):
    clock = ManualClock(T0 + 5000)
    log = _open(env, LogConfig.from_properties({"message.timestamp.type": "LogAppendTime"}), clock)
    info = log.append_as_leader(_batch(2), 0)
    assert info.log_append_time == T0 + 5000 and info.max_timestamp == T0 + 5000
    header = parse_batches(_all_bytes(log))[0]
    assert header.max_timestamp == T0 + 5000


# --- follower append --------------------------------------------------------------------------
def test_follower_append_keeps_offsets_and_drops_partial_tail(env):
    log = _open(env)
    b1 = make_batch([b"a", b"b"], base_offset=0, epoch=1)
    b2 = make_batch([b"c"], base_offset=2, epoch=2)
    b3 = make_batch([b"d", b"e"], base_offset=3, epoch=2)
    info = log.append_as_follower(b1 + b2 + b3[:-5])
    assert (info.first_offset, info.last_offset) == (0, 2)
    assert log.log_end_offset == 3
    assert _all_bytes(log) == b1 + b2
    assert log.leader_epoch_cache.entries() == [(1, 0), (2, 2)]
    with pytest.raises(UnexpectedAppendOffsetError):
        log.append_as_follower(make_batch([b"x"], base_offset=1, epoch=2))
    with pytest.raises(OffsetsOutOfOrderError):
        log.append_as_follower(make_batch([b"x"], base_offset=5, epoch=2)
                               + make_batch([b"y"], base_offset=4, epoch=2))
    # a gap (compacted leader) is fine
    log.append_as_follower(make_batch([b"z"], base_offset=10, epoch=3))
    assert log.log_end_offset == 11
    assert log.end_offset_for_epoch(2) == (2, 10)
    assert log.end_offset_for_epoch(3) == (3, 11)
    assert log.end_offset_for_epoch(0) == (0, 0)


# --- read (§3.2) ------------------------------------------------------------------------------
def test_read_isolation_and_bounds(env):
    log = _open(env)
    for _ in range(5):
        log.append_as_leader(_batch(2), 0)
    data = _all_bytes(log)
    parsed = parse_batches(data)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(11, 100)
    empty = log.read(10, 100)
    assert bytes(empty.records) == b"" and empty.fetch_offset_metadata == log.log_end_offset_metadata
    assert bytes(log.read(3, 1 << 20).records) == data[parsed[1].position:]
    # HW isolation: nothing at or above the HW
    assert log.high_watermark == 0
    assert bytes(log.read(0, 1 << 20, isolation="high_watermark").records) == b""
    assert bytes(log.read(5, 1 << 20, isolation="high_watermark").records) == b""  # above HW: empty, no error
    log.update_high_watermark(4)
    got = log.read(0, 1 << 20, isolation="high_watermark")
    assert bytes(got.records) == data[:parsed[2].position]
    # minOneMessage: the first batch may exceed max_bytes
    assert bytes(log.read(0, 1).records) == data[:parsed[0].size]
    small = log.read(0, 1, min_one_message=False)
    assert len(small.records) == 1 and small.first_entry_incomplete
    with pytest.raises(ValueError):
        log.read(0, 10, isolation="txn_committed")


def test_read_across_segments_and_below_log_start(env):
    log = _open(env, LogConfig.from_properties({"segment.bytes": 300}))
    for _ in range(8):
        log.append_as_leader(_batch(2), 0)
    assert len(log.segments) > 2
    for offset in range(16):
        info = log.read(offset, 1)
        seg = log.segments.floor(offset)
        assert info.fetch_offset_metadata.segment_base_offset == seg.base_offset
        first = parse_batches(bytes(info.records))[0]
        assert first.base_offset <= offset <= first.last_offset
    log.update_high_watermark(16)
    assert log.maybe_increment_log_start_offset(5)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(4, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.maybe_increment_log_start_offset(17)
    deleted = log.delete_old_segments()
    assert deleted >= 1 and log.segments.first.base_offset <= 5
    assert log.log_start_offset == 5


# --- roll (§2.7) and flush (§2.8) --------------------------------------------------------------
def test_roll_on_size_names_segments_and_flushes_old(env):
    log = _open(env, LogConfig.from_properties({"segment.bytes": 400}))
    sizes = []
    for _ in range(10):
        log.append_as_leader(_batch(2), 0)
        sizes.append(log.active_segment.size)
    bases = log.segments.base_offsets()
    assert len(bases) > 2 and bases[0] == 0
    medium, root = env
    names = medium.listdir(os.path.join(root, "topic-0"))
    for b in bases:
        assert f"{b:020d}.log" in names and f"{b:020d}.index" in names and f"{b:020d}.timeindex" in names
    for seg in list(log.segments)[:-1]:
        assert seg.size <= 400
        # inactive segments: index trimmed to its entries
        assert len(medium.read_bytes(seg.offset_index_path)) == 8 * seg.offset_index.entries
    # roll flushed everything below the active segment: recovery point = active base
    assert log.recovery_point == log.active_segment.base_offset


def test_roll_on_record_time(env):
    clock = ManualClock(T0)
    log = _open(env, LogConfig.from_properties({"segment.ms": 1000}), clock)
    log.append_as_leader(_batch(1, ts=[T0]), 0)
    log.append_as_leader(_batch(1, ts=[T0 + 1000]), 0)
    assert len(log.segments) == 1
    log.append_as_leader(_batch(1, ts=[T0 + 1001]), 0)
    assert log.segments.base_offsets() == [0, 2]


def test_flush_messages_policy_and_recovery_point(env):
    log = _open(env, LogConfig.from_properties({"flush.messages": 5}))
    log.append_as_leader(_batch(2), 0)
    assert log.recovery_point == 0
    log.append_as_leader(_batch(2), 0)
    assert log.recovery_point == 0
    log.append_as_leader(_batch(2), 0)
    assert log.recovery_point == 6
    log.flush()
    assert log.recovery_point == log.log_end_offset == 6


def test_memory_power_crash_loses_exactly_unflushed(memory_env):
    env = memory_env
    medium, root = env
    log = _open(env, LogConfig.from_properties({"segment.bytes": 500}))
    for _ in range(6):
        log.append_as_leader(_batch(2), 1)
    log.flush()
    flushed = _all_bytes(log)
    flushed_leo = log.log_end_offset
    assert log.recovery_point == flushed_leo
    for _ in range(6):
        log.append_as_leader(_batch(2), 1)
    # rolling flushed the segments below the new active one; the rest is only in the page cache
    durable_leo = log.recovery_point
    assert flushed_leo < durable_leo < log.log_end_offset
    everything = _all_bytes(log)
    durable = everything[:sum(b.size for b in parse_batches(everything) if b.last_offset < durable_leo)]
    assert durable.startswith(flushed)
    medium.crash("power")
    log = _open(env, recovery_point=0)
    assert log.log_end_offset == durable_leo
    assert _all_bytes(log) == durable
    assert not log.recovery_report.data_lost


# --- truncation (§4) ------------------------------------------------------------------------
def test_truncate_to_within_and_across_segments(env):
    log = _open(env, LogConfig.from_properties({"segment.bytes": 400}))
    for epoch in (1, 1, 2, 2, 3, 3, 4, 4):
        log.maybe_assign_epoch_start_offset(epoch, log.log_end_offset)
        log.append_as_leader(_batch(2), epoch)
    full = _all_bytes(log)
    log.update_high_watermark(16)
    assert not log.truncate_to(16)
    assert log.truncate_to(7)  # inside the batch [6, 7]: the whole batch goes, LEO = 7
    assert log.log_end_offset == 7
    parsed = parse_batches(_all_bytes(log))
    assert parsed[-1].last_offset == 5
    assert _all_bytes(log) == full[:sum(b.size for b in parsed)]
    assert log.high_watermark == 7 and log.recovery_point <= 7
    assert log.leader_epoch_cache.entries() == [(1, 0), (2, 4)]
    medium, root = env
    remaining = {n for n in medium.listdir(os.path.join(root, "topic-0")) if n.endswith(".log")}
    assert remaining == {f"{b:020d}.log" for b in log.segments.base_offsets()}
    log.append_as_leader(_batch(1), 5)
    assert log.log_end_offset == 8 and log.leader_epoch_cache.entries()[-1] == (5, 7)


def test_truncate_to_prunes_future_epochs_at_leo(env):
    log = _open(env)
    log.append_as_leader(_batch(2), 1)
    log.maybe_assign_epoch_start_offset(2, 2)  # elected, nothing written yet
    assert not log.truncate_to(5)  # target > LEO: the cache is cut at the LEO (start >= 2 goes)
    assert log.leader_epoch_cache.entries() == [(1, 0)]
    log.append_as_leader(_batch(2), 3)
    log.leader_epoch_cache.assign(4, 4)
    assert not log.truncate_to(4)
    assert log.leader_epoch_cache.entries() == [(1, 0), (3, 2)]


def test_truncate_below_first_segment_and_fully(env):
    log = _open(env)
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (100, 100, 100)
    log.append_as_follower(make_batch([b"a", b"b"], base_offset=100, epoch=4))
    assert log.truncate_to(50)
    assert log.segments.base_offsets() == [50] and log.log_end_offset == 50
    assert log.leader_epoch_cache.entries() == []


# --- high watermark -----------------------------------------------------------------------
def test_high_watermark_rules(env):
    log = _open(env, LogConfig.from_properties({"segment.bytes": 300}))
    for _ in range(6):
        log.append_as_leader(_batch(2), 0)
    assert log.update_high_watermark(100) == 12          # clamped to LEO
    assert log.update_high_watermark(3) == 3             # may go down
    old = log.maybe_increment_high_watermark(log.convert_to_offset_metadata(5))
    assert old.message_offset == 3 and log.high_watermark == 5
    assert log.maybe_increment_high_watermark(log.convert_to_offset_metadata(4)) is None
    with pytest.raises(ValueError):
        log.maybe_increment_high_watermark(LogOffsetMetadata(13))
    assert log.maybe_update_high_watermark(2) == 2
    assert log.maybe_update_high_watermark(2) is None
    meta = log.fetch_high_watermark_metadata()
    assert meta.message_offset == 2 and meta.segment_base_offset == log.segments.floor(2).base_offset
    # HW == LEO follows the LEO metadata across a roll (same offset, newer segment)
    log.update_high_watermark(12)
    log.roll()
    assert log.high_watermark_metadata == log.log_end_offset_metadata
    assert log.high_watermark_metadata.segment_base_offset == 12


def test_high_watermark_update_keeps_given_metadata_and_clamps(env):
    """``update_high_watermark`` (a follower adopting the leader's HW): an offset inside
    [log start, LEO) becomes offset-only metadata, metadata given there is kept as given, an
    offset at or past the LEO takes the LEO's metadata, one below the log start the log start."""
    log = _open(env, LogConfig.from_properties({"segment.bytes": 300}))
    for _ in range(6):
        log.append_as_leader(_batch(2), 0)
    assert log.update_high_watermark(7) == 7
    assert log.high_watermark_metadata == LogOffsetMetadata(7, -1, -1)
    given = log.convert_to_offset_metadata(5)
    assert given.segment_base_offset >= 0
    assert log.update_high_watermark(given) == 5 and log.high_watermark_metadata == given
    assert log.update_high_watermark(LogOffsetMetadata(40, 0, 0)) == 12
    assert log.high_watermark_metadata == log.log_end_offset_metadata
    assert log.maybe_increment_log_start_offset(4)
    assert log.update_high_watermark(1) == 4
    assert log.high_watermark_metadata == LogOffsetMetadata(4, -1, -1)


def test_offset_for_timestamp(env):
    log = _open(env, LogConfig.from_properties({"segment.bytes": 300}))
    for i in range(6):
        log.append_as_leader(_batch(2, ts=[T0 + 100 * i, T0 + 100 * i + 50]), 3)
    assert log.offset_for_timestamp(T0 + 120) == (T0 + 150, 3, 3)
    assert log.offset_for_timestamp(T0 + 200) == (T0 + 200, 4, 3)
    assert log.offset_for_timestamp(T0 + 10_000) is None
    assert log.offset_for_timestamp(-1) == (-1, 12, 3)
    assert log.offset_for_timestamp(-2) == (-1, 0, 3)
    assert log.offset_for_timestamp(-3) == (T0 + 550, 11, 3)


# --- reopen --------------------------------------------------------------------------------
def test_clean_reopen_trusts_files_and_keeps_offsets(env):
    log = _open(env, LogConfig.from_properties({"segment.bytes": 400}))
    for _ in range(10):
        log.append_as_leader(_batch(2), 2)
    log.flush()
    leo, data = log.log_end_offset, _all_bytes(log)
    log.close()
    medium, _ = env
    for seg in log.segments:
        idx = medium.read_bytes(seg.offset_index_path)
        assert parse_offset_index(idx, seg.base_offset) == [
            tuple(e) for e in parse_offset_index(idx, seg.base_offset)]
        assert len(idx) % 8 == 0
    log = _open(env, recovery_point=leo, had_clean_shutdown=True)
    assert log.recovery_report.recovered_segments == []
    assert log.log_end_offset == leo and log.recovery_point == leo and _all_bytes(log) == data
    # the active segment's indexes are re-expanded for appends
    assert log.active_segment.offset_index.max_entries == 10 * 1024 * 1024 // 8
    log.append_as_leader(_batch(1), 2)
    assert log.log_end_offset == leo + 1


# --- LogManager (§5.1) ----------------------------------------------------------------------
def test_log_manager_startup_shutdown_checkpoints_and_marker(env):
    medium, root = env
    log_dir = os.path.join(root, "kafka-logs")
    manager = LogManager(log_dir, LogConfig(), medium=medium, clock=ManualClock(T0))
    manager.startup()
    a = manager.create_log("a", 0)
    b = manager.create_log("b-topic", 3)
    for _ in range(3):
        a.append_as_leader(_batch(2), 1)
    b.append_as_leader(_batch(1), 1)
    a.update_high_watermark(4)
    a.maybe_increment_log_start_offset(2)
    manager.shutdown(broker_epoch=42)

    def cp(name):
        version, entries = parse_checkpoint(medium.read_bytes(os.path.join(log_dir, name)).decode())
        assert version == 0
        return {(t, int(p)): int(o) for t, p, o in entries}

    assert cp("recovery-point-offset-checkpoint") == {("a", 0): 6, ("b-topic", 3): 1}
    assert cp("replication-offset-checkpoint") == {("a", 0): 4, ("b-topic", 3): 0}
    assert cp("log-start-offset-checkpoint") == {("a", 0): 2}
    marker = json.loads(medium.read_bytes(os.path.join(log_dir, ".kafka_cleanshutdown")))
    assert marker == {"version": 0, "brokerEpoch": 42}

    seen_marker_during_load = []

    def progress(d, part, done, total):
        seen_marker_during_load.append(medium.exists(os.path.join(log_dir, ".kafka_cleanshutdown")))

    manager = load_log_dir(log_dir, LogConfig(), medium=medium, clock=ManualClock(T0),
                           num_recovery_threads=2, progress=progress)
    assert seen_marker_during_load == [False, False]  # KAFKA-10471: deleted before loading
    assert manager.loads[log_dir].had_clean_shutdown
    a = manager.get_log("a", 0)
    assert (a.log_start_offset, a.high_watermark, a.log_end_offset, a.recovery_point) == (2, 4, 6, 6)
    assert manager.get_log("b-topic", 3).log_end_offset == 1
    manager.shutdown()


def test_log_manager_bad_checkpoint_means_full_recovery(env):
    medium, root = env
    log_dir = os.path.join(root, "kafka-logs")
    manager = load_log_dir(log_dir, LogConfig(), medium=medium, clock=ManualClock(T0))
    lg = manager.create_log("t", 0)
    for _ in range(3):
        lg.append_as_leader(_batch(2), 1)
    manager.shutdown()
    medium.write_atomic(os.path.join(log_dir, "recovery-point-offset-checkpoint"), b"0\n2\nt 0 x\n")
    medium.remove(os.path.join(log_dir, ".kafka_cleanshutdown"))
    manager = load_log_dir(log_dir, LogConfig(), medium=medium, clock=ManualClock(T0))
    assert any("recovery-point-offset-checkpoint" in w for w in manager.loads[log_dir].warnings)
    lg = manager.get_log("t", 0)
    assert lg.recovery_report.recovered_segments == [0] and lg.log_end_offset == 6
    manager.shutdown()


def test_log_manager_loads_partitions_in_parallel(env):
    medium, root = env
    log_dir = os.path.join(root, "kafka-logs")
    manager = load_log_dir(log_dir, LogConfig(), medium=medium, clock=ManualClock(T0))
    for p in range(8):
        lg = manager.create_log("t", p)
        for _ in range(p + 1):
            lg.append_as_leader(_batch(2), 1)
    manager.shutdown()
    medium.remove(os.path.join(log_dir, ".kafka_cleanshutdown"))
    threads = set()
    manager = load_log_dir(log_dir, LogConfig(), medium=medium, num_recovery_threads=4,
                           progress=lambda *a: threads.add(threading.current_thread().name))
    assert {tp: lg.log_end_offset for tp, lg in manager.logs.items()} == {
        ("t", p): 2 * (p + 1) for p in range(8)}
    manager.shutdown()


def test_follower_append_header_struct_matches_contract(env):
    # batch bytes written by a follower are stored byte for byte
    log = _open(env)
    b = make_batch([b"k1", None, b"v3"], base_offset=0, epoch=9,
                   keys=[b"a", b"b", None], producer_id=7, producer_epoch=1, base_sequence=0)
    log.append_as_follower(b)
    data = _all_bytes(log)
    assert data == b
    assert struct.unpack_from(">i", data, 12)[0] == 9


def test_failed_write_raises_storage_error_and_leaves_no_partial_batch(env):
    from replica_core.errors import KafkaStorageError

    log = _open(env)
    log.append_as_leader(_batch(2), 0)
    before = _all_bytes(log)
    seg = log.active_segment
    real = seg.log_file

    class FullDisk:
        """The segment's file, but writes stop after 10 bytes with ENOSPC."""

        def __getattr__(self, name):
            return getattr(real, name)

        def write(self, position, data):
            real.write(position, bytes(data)[:10])
            raise OSError(28, "No space left on device")

    seg.log_file = FullDisk()
    with pytest.raises(KafkaStorageError):
        log.append_as_leader(_batch(2), 0)
    seg.log_file = real
    assert _all_bytes(log) == before and log.log_end_offset == 2
    log.append_as_leader(_batch(1), 0)
    assert [b.base_offset for b in parse_batches(_all_bytes(log))] == [0, 2]


@pytest.mark.parametrize("start,recovery_point,clean", [(0, 0, True), (0, 0, False), (120, 0, True),
                                                        (120, 500, False)])
def test_fresh_directory_open_matches_loading_an_empty_directory(start, recovery_point, clean):
    """Log.open on a directory that does not exist takes a short path; it must leave the same
    files and offsets as loading an empty directory that exists."""
    cfg = LogConfig.from_properties({"segment.index.bytes": 4096})
    results = []
    for pre_create in (False, True):
        medium = MemoryMedium()
        if pre_create:
            medium.makedirs("/data/t-0")
        lg = Log.open("/data/t-0", cfg, medium=medium, clock=ManualClock(7),
                      log_start_offset=start, recovery_point=recovery_point,
                      had_clean_shutdown=clean)
        files = {f: (medium.read_bytes(f), medium.durable_bytes(f)) for f in medium.files()}
        rep = lg.recovery_report
        results.append((files, lg.log_start_offset, lg.log_end_offset, lg.recovery_point,
                        lg.active_segment.base_offset, lg.leader_epoch_cache.entries(),
                        rep.had_clean_shutdown, rep.log_start_offset, rep.log_end_offset,
                        rep.recovery_point))
        lg.append_as_leader(build_batch([b"x"]), leader_epoch=0)
        assert lg.log_end_offset == start + 1
    assert results[0] == results[1]


def test_unchanged_checkpoint_is_not_rewritten_but_changes_and_losses_are():
    """LogManager rewrites a checkpoint only when its entries changed since it last made them
    durable, or the file went missing; the bytes are always those of the current entries."""
    from replica_core.storage.log_manager import LogManager

    medium = MemoryMedium()
    medium.makedirs("/d")
    lm = LogManager(["/d"], LogConfig(), medium=medium, clock=ManualClock(0))
    lm.startup()
    lg = lm.create_log("t", 0)
    lg.append_as_leader(build_batch([b"a", b"b"]), leader_epoch=0)
    writes = []
    real = medium.write_atomic
    medium.write_atomic = lambda path, data: (writes.append(path), real(path, data))[1]
    path = "/d/replication-offset-checkpoint"
    lm.checkpoint_high_watermarks()
    assert writes == [path] and medium.read_bytes(path) == b"0\n1\nt 0 0\n"
    lm.checkpoint_high_watermarks()
    assert writes == [path]  # nothing changed: not rewritten
    lg.update_high_watermark(2)
    lm.checkpoint_high_watermarks()
    assert writes == [path, path] and medium.read_bytes(path) == b"0\n1\nt 0 2\n"
    medium.remove(path)
    lm.checkpoint_high_watermarks()
    assert len(writes) == 3 and medium.read_bytes(path) == b"0\n1\nt 0 2\n"


def _expected_hw_checkpoint(lm: LogManager, log_dir: str) -> bytes:
    """The replication-offset-checkpoint of ``log_dir``: every log placed there, in the
    manager's order, with its high watermark (written out here, not by the checkpoint code)."""
    rows = [f"{t} {p} {lg.high_watermark}" for (t, p), lg in lm.logs.items()
            if lm.log_dir_of(t, p) == log_dir]
    return ("\n".join(["0", str(len(rows)), *rows]) + "\n").encode()


def test_hw_checkpoint_reads_again_only_moved_logs_and_writes_every_current_hw():
    """The HW checkpoint reads again only the logs whose HW was set since the last one; the
    file always holds every log's current HW, across appends, HW moves up and down, a log
    replaced under the same name, a new log and a deleted one, in two log dirs."""
    medium = MemoryMedium()
    medium.makedirs("/a")
    medium.makedirs("/b")
    lm = LogManager(["/a", "/b"], LogConfig(), medium=medium, clock=ManualClock(0))
    lm.startup()
    logs = [lm.create_log("t", i) for i in range(8)]
    assert {lm.log_dir_of("t", i) for i in range(8)} == {"/a", "/b"}
    for i, lg in enumerate(logs):
        for _ in range(i % 3 + 1):
            lg.append_as_leader(build_batch([b"x"] * (i + 1)), leader_epoch=0)

    def check() -> None:
        lm.checkpoint_high_watermarks()
        for d in ("/a", "/b"):
            path = f"{d}/replication-offset-checkpoint"
            assert medium.read_bytes(path) == _expected_hw_checkpoint(lm, d)

    check()
    for lg in logs[::2]:
        lg.update_high_watermark(lg.log_end_offset)
    check()
    logs[3].update_high_watermark(2)
    logs[4].update_high_watermark(1)  # down
    logs[0].truncate_to(1)
    check()
    check()  # nothing moved
    assert lm.delete_log("t", 5)
    replaced = lm.create_log("t", 5)  # a new log object under the same name, HW 0
    replaced.append_as_leader(build_batch([b"y"] * 4), leader_epoch=0)
    replaced.update_high_watermark(3)
    check()
    lm.create_log("u", 0).append_as_leader(build_batch([b"z"]), leader_epoch=0)
    lm.get_log("u", 0).update_high_watermark(1)
    logs[6].update_high_watermark(logs[6].log_end_offset)
    check()
    assert lm.delete_log("t", 1)
    check()
    rows = medium.read_bytes("/a/replication-offset-checkpoint").decode().splitlines()
    rows += medium.read_bytes("/b/replication-offset-checkpoint").decode().splitlines()
    assert "t 5 3" in rows and "u 0 1" in rows and not any(r.startswith("t 1 ") for r in rows)
    # the logs a restarted manager loads report their HW moves too
    lm.shutdown()
    lm = LogManager(["/a", "/b"], LogConfig(), medium=medium, clock=ManualClock(0))
    lm.startup()
    check()
    loaded = lm.get_log("t", 2)
    assert loaded.log_end_offset > 1
    loaded.update_high_watermark(1)
    check()
    assert "t 2 1" in (medium.read_bytes("/a/replication-offset-checkpoint")
                        + medium.read_bytes("/b/replication-offset-checkpoint")).decode()


def test_offsets_read_as_attributes_follow_rolls_truncations_and_first_use(env):
    """The attributes the upper layers read - log start, LEO and its metadata, HW, latest epoch,
    whether the segments are built - agree with what they summarise after a new log's first
    use, appends across rolls, a truncation inside a segment and across segments, and a full
    truncation."""
    cfg = LogConfig.from_properties({"segment.bytes": 400})

    def check(log):
        seg = log.segments.last
        assert seg is log.active_segment
        assert log.log_end_offset_metadata == (log.log_end_offset, seg.base_offset, seg.size)
        assert log.high_watermark == log.high_watermark_metadata.message_offset
        entries = log.leader_epoch_cache.entries()
        assert log.latest_epoch == (entries[-1][0] if entries else -1)
        assert log.segments_made

    log = _open(env, config=cfg)
    assert not log.segments_made  # a new log: its one segment waits for first use
    assert log.log_end_offset == log.log_start_offset == log.high_watermark == 0
    assert log.segments.last.base_offset == 0 and log.segments_made  # asking builds it
    check(log)
    for k in range(8):
        log.append_as_leader(_batch(3), leader_epoch=1 + k // 3)
        check(log)
    assert len(log.segments) > 2
    log.update_high_watermark(10)
    check(log)
    assert log.truncate_to(13)  # inside a batch of a later segment: that batch goes
    check(log)
    assert log.log_end_offset == 13 and log.latest_epoch == 2
    assert log.truncate_to(4)  # back into the first segments
    check(log)
    assert log.log_end_offset == 4 and log.high_watermark == 4 and log.latest_epoch == 1
    log.truncate_fully_and_start_at(40)
    check(log)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark, log.latest_epoch) == \
        (40, 40, 40, -1)
