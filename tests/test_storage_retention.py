"""Retention (issue 16): Kafka's ``UnifiedLog.deleteOldSegments`` rules and ``LogManager``'s
retention check, on real files on disk.

The cases restate Kafka's ``UnifiedLogTest`` retention tests (size, time, log start offset,
cleanup policy, the high watermark bound, asynchronous deletion) in our words; file names,
checkpoint contents and ``.deleted`` renames are read back from the directory with plain code.
"""
from __future__ import annotations

import os

import pytest
from storage_testlib import parse_checkpoint

from replica_core.clock import ManualClock
from replica_core.errors import InvalidConfigurationError
from replica_core.records import build_batch
from replica_core.storage.config import LogConfig
from replica_core.storage.log import Log
from replica_core.storage.log_manager import LogManager
from replica_core.storage.medium import FileMedium
from replica_core.storage.retention import deletable_segments

T0 = 1_700_000_000_000
ONE = len(build_batch([b"test"], timestamps=[T0]))   # one single-record batch, in bytes
ONE_KEYED = len(build_batch([b"test"], keys=[b"k"], timestamps=[T0]))


def _config(one: int = ONE, **props) -> LogConfig:
    """Five single-record batches per segment, as Kafka's tests size their segments."""
    return LogConfig.from_properties({"segment.bytes": one * 5, "file.delete.delay.ms": 0,
                                      **props})


def _log(tmp_path, clock, one: int = ONE, **props) -> Log:
    return Log.open(str(tmp_path / "topic-0"), _config(one, **props), medium=FileMedium(),
                    clock=clock)


def _fill(log: Log, n: int, ts: int, *, key: bytes | None = None) -> None:
    for _ in range(n):
        log.append_as_leader(build_batch([b"test"], keys=None if key is None else [key],
                                         timestamps=[ts]), 0)


def _files(tmp_path, name="topic-0") -> list[str]:
    return sorted(os.listdir(tmp_path / name))


def _segment_bases(tmp_path, name="topic-0") -> list[int]:
    return sorted(int(f[:20]) for f in _files(tmp_path, name) if f.endswith(".log"))


@pytest.fixture
def clock():
    return ManualClock(T0)


def test_fifteen_records_make_three_segments(tmp_path, clock):
    log = _log(tmp_path, clock)
    _fill(log, 15, T0)
    assert _segment_bases(tmp_path) == [0, 5, 10]


def test_size_retention_keeps_what_fits(tmp_path, clock):
    """``retention.bytes`` = 10 records over 15: the oldest segment (5 records) goes."""
    log = _log(tmp_path, clock, **{"retention.bytes": ONE * 10})
    _fill(log, 15, T0)
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() == 1
    assert _segment_bases(tmp_path) == [5, 10]
    assert log.log_start_offset == 5


def test_size_retention_under_the_limit_deletes_nothing(tmp_path, clock):
    log = _log(tmp_path, clock, **{"retention.bytes": ONE * 15})
    _fill(log, 15, T0)
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() == 0
    assert _segment_bases(tmp_path) == [0, 5, 10]


def test_time_retention_deletes_expired_segments_including_the_active_one(tmp_path, clock):
    """Every segment's largest timestamp is expired: all go, the active one after a roll, and
    one empty segment at the log end remains."""
    log = _log(tmp_path, clock, **{"retention.ms": 10_000})
    _fill(log, 15, 10)
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() == 3
    assert _segment_bases(tmp_path) == [15]
    assert log.log_start_offset == 15 and log.log_end_offset == 15
    assert log.active_segment.size == 0


def test_time_retention_keeps_recent_segments(tmp_path, clock):
    log = _log(tmp_path, clock, **{"retention.ms": 10_000_000})
    _fill(log, 15, T0)
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() == 0
    assert _segment_bases(tmp_path) == [0, 5, 10]


def test_time_retention_uses_each_segments_largest_timestamp(tmp_path, clock):
    """Old records then new ones: only the segments whose newest record is expired go."""
    log = _log(tmp_path, clock, **{"retention.ms": 60_000})
    _fill(log, 10, T0 - 120_000)
    _fill(log, 5, T0 - 1_000)
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() == 2
    assert _segment_bases(tmp_path) == [10]
    clock.advance(60_000)          # now the last segment's newest record is 61 s old
    assert log.delete_old_segments() == 1
    assert _segment_bases(tmp_path) == [15]


def test_compact_policy_ignores_time_retention(tmp_path, clock):
    log = _log(tmp_path, clock, ONE_KEYED, **{"retention.ms": 10_000, "cleanup.policy": "compact"})
    _fill(log, 15, 10, key=b"k")
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() == 0
    assert _segment_bases(tmp_path) == [0, 5, 10]


def test_compact_and_delete_policy_applies_time_retention(tmp_path, clock):
    log = _log(tmp_path, clock, ONE_KEYED,
               **{"retention.ms": 10_000, "cleanup.policy": "compact,delete"})
    _fill(log, 15, 10, key=b"k")
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() == 3
    assert _segment_bases(tmp_path) == [15]


def test_log_start_offset_breach_deletes_whatever_the_policy(tmp_path, clock):
    """DeleteRecords moved the log start to 5: the first segment (0..4) is unreadable and goes;
    the segment holding the log start stays."""
    log = _log(tmp_path, clock, ONE_KEYED, **{"retention.ms": 10_000, "cleanup.policy": "compact"})
    _fill(log, 15, 10, key=b"k")
    log.update_high_watermark(log.log_end_offset)
    assert log.maybe_increment_log_start_offset(5)
    assert log.delete_old_segments() == 1
    assert _segment_bases(tmp_path) == [5, 10]
    assert log.log_start_offset == 5


def test_log_start_offset_inside_a_segment_keeps_it(tmp_path, clock):
    """As Kafka's ``testLogDeletionAfterDeleteRecords``: start 1 keeps all, 6 drops one, 15
    drops all but the (empty-rolled or active) last."""
    log = _log(tmp_path, clock)
    _fill(log, 15, T0)
    log.update_high_watermark(log.log_end_offset)
    log.maybe_increment_log_start_offset(1)
    assert log.delete_old_segments() == 0
    assert _segment_bases(tmp_path) == [0, 5, 10]
    log.maybe_increment_log_start_offset(6)
    assert log.delete_old_segments() == 1
    assert _segment_bases(tmp_path) == [5, 10]
    log.maybe_increment_log_start_offset(15)
    assert log.delete_old_segments() == 1
    assert _segment_bases(tmp_path) == [10]
    assert log.log_start_offset == 15


def test_log_start_offset_unblocks_time_retention_once(tmp_path, clock):
    """Kafka's ``testRetentionIdempotency``: a fresh segment first, an expired one behind it;
    moving the log start past the first lets time retention take the second; a second check
    deletes nothing."""
    log = _log(tmp_path, clock, **{"retention.ms": 900})
    _fill(log, 1, T0 + 100)
    log.roll()
    _fill(log, 1, T0)
    log.roll()
    _fill(log, 1, T0 + 100)
    clock.advance(901)
    log.update_high_watermark(log.log_end_offset)
    log.maybe_increment_log_start_offset(1)
    assert log.delete_old_segments() == 2
    assert log.delete_old_segments() == 0


def test_nothing_at_or_above_the_high_watermark_is_deleted(tmp_path, clock):
    """Kafka's ``testCannotDeleteSegmentsAtOrAboveHighWatermark``: every record is expired, yet
    each check removes only segments wholly below the high watermark."""
    log = _log(tmp_path, clock, **{"retention.ms": 999})
    _fill(log, 100, T0 - 1_000)
    assert len(_segment_bases(tmp_path)) == 20 and log.high_watermark == 0
    assert log.delete_old_segments() == 0                   # no high watermark yet
    for hw in range(0, 101):
        log.update_high_watermark(hw)
        log.delete_old_segments()
        bases = _segment_bases(tmp_path)
        assert log.log_start_offset <= hw
        assert bases[0] <= hw and all(b > hw for b in bases[1:])
        assert bases[0] >= log.log_start_offset
    assert log.log_start_offset == 100 and _segment_bases(tmp_path) == [100]
    assert log.active_segment.size == 0


def test_deleted_segments_wait_file_delete_delay_as_deleted_files(tmp_path, clock):
    """Kafka's ``testAsyncDelete``: the files are renamed ``.deleted`` at once and removed only
    ``file.delete.delay.ms`` later; the log no longer lists them in between."""
    log = _log(tmp_path, clock, **{"retention.ms": 999, "file.delete.delay.ms": 1_000})
    _fill(log, 10, T0 - 1_000)
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() == 2
    files = _files(tmp_path)
    assert "00000000000000000000.log.deleted" in files
    assert "00000000000000000005.log.deleted" in files
    assert "00000000000000000000.log" not in files and "00000000000000000005.log" not in files
    assert log.segments.base_offsets() == [10]
    assert log.next_file_deletion_ms == T0 + 1_000
    clock.advance(999)
    assert log.delete_due_files() == 0
    assert any(f.endswith(".deleted") for f in _files(tmp_path))
    clock.advance(1)
    assert log.delete_due_files() == 2
    assert not any(f.endswith(".deleted") for f in _files(tmp_path))
    assert log.next_file_deletion_ms is None


def test_leftover_deleted_files_are_removed_at_load(tmp_path, clock):
    log = _log(tmp_path, clock, **{"retention.ms": 999, "file.delete.delay.ms": 60_000})
    _fill(log, 10, T0 - 1_000)
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() == 2
    log.flush()
    log.close()                     # a stop before the delay ran out
    assert sum(f.endswith(".deleted") for f in _files(tmp_path)) >= 2
    again = Log.open(str(tmp_path / "topic-0"), _config(), medium=FileMedium(), clock=clock,
                     log_start_offset=10)
    assert not any(f.endswith(".deleted") for f in _files(tmp_path))
    assert again.log_start_offset == 10 and _segment_bases(tmp_path) == [10]


def test_deletable_segments_stops_at_the_first_kept_one():
    """The rule alone: a prefix, bounded by the high watermark, never an empty last segment."""

    class Seg:
        def __init__(self, base, size, ts):
            self.base_offset, self.size, self._ts = base, size, ts

        def largest_timestamp(self):
            return self._ts

    segs = [Seg(0, 10, 1), Seg(5, 10, 9), Seg(10, 10, 1), Seg(15, 0, -1)]
    old = lambda s, nxt: s.largest_timestamp() < 5  # noqa: E731
    assert [s.base_offset for s in deletable_segments(segs, 15, 15, old)] == [0]
    every = lambda s, nxt: True  # noqa: E731
    assert [s.base_offset for s in deletable_segments(segs, 15, 15, every)] == [0, 5, 10]
    assert [s.base_offset for s in deletable_segments(segs, 15, 9, every)] == [0]
    assert deletable_segments(segs, 15, 4, every) == []


# --- LogManager: the scheduled check and the log-start-offset checkpoint ----------------------
def test_cleanup_logs_deletes_and_moves_the_log_start_offset_checkpoint(tmp_path, clock):
    """DeleteRecords put t-0's log start at 6 (checkpointed, being above its first segment);
    the retention check deletes the two oldest segments, the log start becomes the first kept
    segment's base and the checkpoint drops the entry (Kafka lists only log starts above the
    first segment); a restart finds the same log start. The compacted topic is untouched."""
    root = str(tmp_path)
    checkpoint = os.path.join(root, "log-start-offset-checkpoint")
    lm = LogManager(root, _config(ONE_KEYED, **{"retention.bytes": ONE_KEYED * 5}),
                    medium=FileMedium(), clock=clock,
                    topic_configs={"kept": _config(ONE_KEYED, **{"cleanup.policy": "compact"})})
    lm.startup()
    for topic in ("t", "kept"):
        lg = lm.create_log(topic, 0)
        _fill(lg, 15, T0, key=b"k")
        lg.update_high_watermark(lg.log_end_offset)
    lm.get_log("t", 0).maybe_increment_log_start_offset(6)
    lm.checkpoint_log_start_offsets()
    with open(checkpoint) as fh:
        assert parse_checkpoint(fh.read()) == (0, [["t", "0", "6"]])
    assert lm.cleanup_logs() == 2                  # t: 15 records, 5 kept; kept: compact only
    assert _segment_bases(tmp_path, "t-0") == [10]
    assert _segment_bases(tmp_path, "kept-0") == [0, 5, 10]
    assert lm.get_log("t", 0).log_start_offset == 10
    with open(checkpoint) as fh:
        assert parse_checkpoint(fh.read()) == (0, [])
    assert lm.cleanup_logs() == 0
    lm.shutdown()
    again = LogManager(root, _config(ONE_KEYED), medium=FileMedium(), clock=clock)
    again.startup()
    assert again.get_log("t", 0).log_start_offset == 10
    again.shutdown()


def test_log_manager_retention_settings_are_checked():
    assert LogManager("/x").retention_check_interval_ms == 300_000
    assert LogManager("/x").initial_task_delay_ms == 30_000
    with pytest.raises(InvalidConfigurationError, match="log.retention.check.interval.ms"):
        LogManager("/x", retention_check_interval_ms=0)
    with pytest.raises(InvalidConfigurationError, match="log.initial.task.delay.ms"):
        LogManager("/x", initial_task_delay_ms=-1)


def test_log_manager_removes_due_deleted_files(tmp_path, clock):
    lm = LogManager(str(tmp_path), _config(**{"retention.ms": 999, "file.delete.delay.ms": 60_000}),
                    medium=FileMedium(), clock=clock)
    lm.startup()
    lg = lm.create_log("t", 0)
    _fill(lg, 10, T0 - 1_000)
    lg.update_high_watermark(lg.log_end_offset)
    assert lm.cleanup_logs() == 2
    assert lm.next_file_deletion_ms() == T0 + 60_000
    clock.advance(60_000)
    assert lm.delete_due_files() == 2
    assert not any(f.endswith(".deleted") for f in _files(tmp_path, "t-0"))
    assert lm.next_file_deletion_ms() is None
    lm.shutdown()


def test_cleanup_logs_passes_over_logs_never_written(tmp_path, clock):
    """Logs created empty and never written hold nothing any rule could delete: the check
    leaves them as they were made (their segment object not even built) and still deletes the
    expired segments of a written log; a closed log is still checked, and its error takes the
    dir offline as before."""
    root = str(tmp_path)
    lm = LogManager(root, _config(**{"retention.ms": 1000}), medium=FileMedium(), clock=clock)
    lm.startup()
    idle = [lm.create_log("idle", p) for p in range(3)]
    written = lm.create_log("t", 0)
    _fill(written, 10, T0)
    written.update_high_watermark(written.log_end_offset)
    assert lm.cleanup_logs() == 0   # nothing expired yet
    assert [lg.segments_made for lg in idle] == [False, False, False]
    clock.advance(5000)
    assert lm.cleanup_logs() == 2   # both segments of t-0 expired (the active one rolled first)
    assert _segment_bases(tmp_path, "t-0") == [10]
    assert lm.cleanup_logs() == 0
    idle[0].close()
    assert root not in lm.offline_dirs
    assert lm.cleanup_logs() == 0
    assert root in lm.offline_dirs  # a closed log fails its check: Kafka's I/O error path


# --- a log of one segment: decided without the general walk ------------------------------------
def _one_segment_log(tmp_path, clock, *, batches: int, hw_at_end: bool, ts: int,
                     key: bytes | None = None, **props) -> Log:
    """A log of one segment (segment.bytes far above what is written) holding ``batches``
    single-record batches stamped ``ts`` (keyed with ``key``: a compacted log's), its HW at
    the log end or one below."""
    log = Log.open(str(tmp_path / "topic-0"),
                   LogConfig.from_properties({"file.delete.delay.ms": 0, **props}),
                   medium=FileMedium(), clock=clock)
    _fill(log, batches, ts, key=key)
    if batches:
        log.update_high_watermark(log.log_end_offset if hw_at_end else log.log_end_offset - 1)
    assert len(log.segments) == 1
    return log


@pytest.mark.parametrize("batches,hw_at_end,ts,props,deleted", [
    # expired by time, HW at the end: the only segment goes (rolled first)
    (3, True, 10, {"retention.ms": 10_000}, 1),
    # expired, but the HW is below the log end: the segment's upper bound is not reached
    (3, False, 10, {"retention.ms": 10_000}, 0),
    # not expired yet
    (3, True, T0 - 5_000, {"retention.ms": 10_000}, 0),
    # unlimited time retention
    (3, True, 10, {"retention.ms": -1}, 0),
    # empty: an empty last segment is never deletable
    (0, True, 10, {"retention.ms": 10_000}, 0),
    # compact only: neither size nor time rules apply
    (3, True, 10, {"retention.ms": 10_000, "cleanup.policy": "compact"}, 0),
    # size rule: the log is larger than retention.bytes, but the segment does not fit the excess
    (3, True, T0, {"retention.bytes": ONE}, 0),
    # size rule with retention.bytes 0: the whole segment is excess
    (3, True, T0, {"retention.bytes": 0}, 1),
])
def test_one_segment_log_retention(tmp_path, clock, batches, hw_at_end, ts, props, deleted):
    """The log-start rule never deletes a log's only segment (it needs a next segment); the
    size and time rules take it only with the HW at the log end and bytes in it. The answer
    and what is left on disk are the rules' (stated in each case)."""
    log = _one_segment_log(tmp_path, clock, batches=batches, hw_at_end=hw_at_end, ts=ts,
                           key=b"k" if "cleanup.policy" in props else None, **props)
    end = log.log_end_offset
    assert log.delete_old_segments() == deleted
    assert _segment_bases(tmp_path) == ([end] if deleted else [0])
    assert log.log_start_offset == (end if deleted else 0)


def test_one_segment_log_answers_what_the_general_walk_answers(tmp_path, clock):
    """The same one-segment logs through the rules applied one by one, as the general path
    applies them (retention.deletable_segments with each rule's predicate): the same count."""
    from replica_core.storage import retention

    cases = [(3, True, 10), (3, False, 10), (3, True, T0 - 5_000), (0, True, 10)]
    for k, (batches, hw_at_end, ts) in enumerate(cases):
        sub = tmp_path / str(k)
        sub.mkdir()
        log = _one_segment_log(sub, clock, batches=batches, hw_at_end=hw_at_end, ts=ts,
                               **{"retention.ms": 10_000})
        segs = list(log.segments)
        walked = sum(len(retention.deletable_segments(segs, log.log_end_offset,
                                                      log.high_watermark, rule))
                     for rule in (retention.log_start_offset_breached(log.log_start_offset),
                                  retention.retention_ms_breached(clock.milliseconds(), 10_000)))
        assert log.delete_old_segments() == walked
