"""Loading a partition directory nobody has looked into since it was created costs its entry.

A broker that crashes and restarts loads every partition directory with full recovery. On
``MemoryMedium`` a directory made by ``Log.open``/``LogManager.create_log`` and never written to
is still pending (its files not made); ``Log.open`` recognises one whose files are exactly what
creating it makes and builds the log the way creating does, reading nothing. The reference is
the same directory loaded the long way (made first by listing it): the two must leave the same
log, the same recovery report, and media holding the same names, bytes and durable bytes —
after the load, after later appends and flushes, and after a power failure with torn writes.
"""
from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest

from replica_core.clock import ManualClock
from replica_core.records import build_batch
from replica_core.storage.config import LogConfig
from replica_core.storage.log import Log, _NewLogSegments, _untouched_base
from replica_core.storage.log_manager import LogManager
from replica_core.storage.medium import FileMedium, Medium, MemoryMedium, TornWrite

T0 = 1_700_000_000_000
CFG = LogConfig.from_properties({"segment.index.bytes": 4096})
OTHER_INDEX = LogConfig.from_properties({"segment.index.bytes": 2048})
DIR = "/data/t-0"


def _state(medium: MemoryMedium) -> dict:
    return {f: (medium.read_bytes(f), medium.durable_bytes(f)) for f in medium.files()}


def _log_state(lg: Log) -> tuple:
    psm = lg.producer_state
    return (lg.log_start_offset, lg.log_end_offset, lg.high_watermark, lg.recovery_point,
            lg.leader_epoch_cache.entries(), [s.base_offset for s in lg.segments],
            [s.size for s in lg.segments], [s.created for s in lg.segments],
            psm.map_end_offset, psm.last_snapshot_offset, dict(psm.active_producers),
            lg.active_segment.offset_index.entries, lg.active_segment.offset_index.max_entries,
            lg.active_segment.time_index.entries, lg.active_segment.time_index.max_entries)


def _report(lg: Log) -> dict:
    return dataclasses.asdict(lg.recovery_report)


def _run(long_way: bool, start: int, recovery_point: int, log_start: int, crash: str | None,
         reload_cfg: LogConfig = CFG, epochs: tuple = ()) -> tuple[bool, tuple]:
    medium = MemoryMedium()
    medium.makedirs("/data")
    clock = ManualClock(T0)
    created = Log.open(DIR, CFG, medium=medium, clock=clock, log_start_offset=start,
                       recovery_point=start, had_clean_shutdown=False)
    for entry in epochs:  # the epoch checkpoint written (a new leader's first epoch), or raw
        if isinstance(entry, bytes):
            medium.write_atomic(f"{DIR}/leader-epoch-checkpoint", entry)
        else:
            created.leader_epoch_cache.assign(*entry)
    if crash is not None:
        medium.crash(crash)
    clock.advance(1000)
    if long_way:
        medium.listdir(DIR)  # looks inside: the files are made, the directory no longer pending
    lg = Log.open(DIR, reload_cfg, medium=medium, clock=clock, recovery_point=recovery_point,
                  log_start_offset=log_start, had_clean_shutdown=False)
    short = isinstance(lg.segments, _NewLogSegments)
    trace: list = [_report(lg), _log_state(lg), _state(medium)]
    clock.advance(1000)
    lg.append_as_leader(build_batch([b"a", b"b"], timestamps=[T0, T0 + 1]), leader_epoch=2)
    lg.append_as_leader(build_batch([b"c"], timestamps=[T0 + 2], producer_id=9,
                                    producer_epoch=0, base_sequence=0), leader_epoch=3)
    trace += [_log_state(lg), _state(medium)]
    medium.fsync_dir(DIR)  # the names durable, the bytes not: a torn write can hit them
    torn = medium.crash("power", torn=TornWrite.SUBSET, rng=np.random.default_rng(5))
    trace += [torn, _state(medium)]
    again = Log.open(DIR, reload_cfg, medium=medium, clock=clock, had_clean_shutdown=False)
    trace += [_report(again), _log_state(again), _state(medium)]
    return short, tuple(trace)


@pytest.mark.parametrize("crash", [None, "process"])
@pytest.mark.parametrize(("start", "recovery_point", "log_start"),
                         [(0, 0, 0), (0, 40, 0), (7, 0, 0), (7, 7, 7), (7, 100, 3)])
def test_untouched_directory_loads_as_the_long_way_leaves_it(start, recovery_point, log_start,
                                                             crash):
    short, fast = _run(False, start, recovery_point, log_start, crash)
    long_way, reference = _run(True, start, recovery_point, log_start, crash)
    assert short and not long_way
    assert fast == reference
    report = fast[0]
    assert (report["segments_loaded"], report["recovered_segments"], report["had_clean_shutdown"],
            report["log_end_offset"], report["recovery_point"]) == (
        1, [start], False, start, min(recovery_point, start))


# epochs written into the pending directory before the crash: loading trims them to the empty
# log (truncate_from_end of its end offset, then truncate_from_start of the log start
# checkpoint), rewriting the checkpoint when that changes them
# case -> (what is written, the epochs loading leaves at log start checkpoints 0, 3 and 7)
BELOW = {0: [(2, 3)], 3: [(2, 3)], 7: [(2, 7)]}
EPOCH_CASES = {
    "first epoch at the log end": (((3, 7),), {}),
    "two epochs, one below the log end": (((2, 3), (5, 7)), BELOW),
    "epoch below the log end only": (((2, 3),), BELOW),
    "written twice": (((2, 7), (4, 7)), {}),
    "empty checkpoint written": ((b"0\n0\n",), {}),
}


@pytest.mark.parametrize("crash", [None, "process"])
@pytest.mark.parametrize("log_start", [0, 3, 7])
@pytest.mark.parametrize("case", sorted(EPOCH_CASES))
def test_directory_with_written_epochs_loads_as_the_long_way_leaves_it(case, log_start, crash):
    """A directory whose only change since it was made is its epoch checkpoint (written any
    number of times) takes the short way too: the same log, report, epochs and files (the
    checkpoint as the long way rewrites it, every name durable by the write's sync)."""
    epochs, left = EPOCH_CASES[case]
    short, fast = _run(False, 7, 7, log_start, crash, epochs=epochs)
    long_way, reference = _run(True, 7, 7, log_start, crash, epochs=epochs)
    assert short and not long_way
    assert fast == reference
    assert fast[1][4] == left.get(log_start, [])


@pytest.mark.parametrize("raw", [b"garbage", b"0\n1\n-1 0\n"])
def test_unreadable_epoch_checkpoint_takes_the_long_way(raw):
    """A written checkpoint that does not read (the long way resets it and warns): loaded the
    long way, the same either way."""
    short, fast = _run(False, 0, 0, 0, "process", epochs=(raw,))
    _, reference = _run(True, 0, 0, 0, "process", epochs=(raw,))
    assert not short
    assert fast == reference
    assert any("leader-epoch-checkpoint unreadable" in w for w in fast[0]["warnings"])


def test_read_bytes_of_a_pending_directory_keeps_it_pending():
    """Reading a file of a pending directory answers its bytes (a write's, else zeros of its
    listed length) without making the directory."""
    medium = MemoryMedium()
    medium.makedirs("/r")
    medium.create_dir_with_files("/r/p", PENDING_FILES)
    medium.write_atomic("/r/p/ckpt", b"0\n1\n0 0\n")
    assert medium.read_bytes("/r/p/ckpt") == b"0\n1\n0 0\n"
    assert medium.read_bytes("/r/p/00.index") == bytes(4096)
    assert medium.read_bytes("/r/p/00.log") == b""
    assert "/r/p" in medium._pending
    with pytest.raises(FileNotFoundError):
        medium.read_bytes("/r/p/absent")


def test_untouched_files_with_a_written_name():
    """``written`` admits writes to that one file only."""
    medium = MemoryMedium()
    medium.makedirs("/r")
    medium.create_dir_with_files("/r/p", PENDING_FILES)
    assert medium.untouched_files("/r/p", written="ckpt") == PENDING_FILES
    medium.write_atomic("/r/p/ckpt", b"0\n0\n")
    assert medium.untouched_files("/r/p") is None
    assert medium.untouched_files("/r/p", written="00.log") is None
    assert medium.untouched_files("/r/p", written="ckpt") == PENDING_FILES
    medium.write_atomic("/r/p/00.index", b"")
    assert medium.untouched_files("/r/p", written="ckpt") is None
    medium.read_bytes("/r/p/ckpt")
    assert "/r/p" in medium._pending
    medium.listdir("/r/p")
    assert medium.untouched_files("/r/p", written="ckpt") is None


@pytest.mark.parametrize(("cfg", "log_start"), [(OTHER_INDEX, 0), (CFG, 5)])
def test_directory_that_would_change_takes_the_long_way(cfg, log_start):
    """Another ``segment.index.bytes`` (the indexes are resized) or a log start checkpoint
    above the segment (every segment is deleted): loaded the long way, the same either way."""
    short, fast = _run(False, 0, 0, log_start, None, reload_cfg=cfg)
    _, reference = _run(True, 0, 0, log_start, None, reload_cfg=cfg)
    assert not short
    assert fast == reference


def test_power_failure_leaves_nothing_pending():
    """A power failure drops a pending directory's files (their names were never durable):
    the directory is loaded as an empty one, not as an untouched one."""
    medium = MemoryMedium()
    medium.makedirs("/data")
    Log.open(DIR, CFG, medium=medium, clock=ManualClock(T0), had_clean_shutdown=False)
    assert medium.untouched_files(DIR) is not None
    medium.crash("power")
    assert medium.untouched_files(DIR) is None and medium.listdir(DIR) == []


def test_untouched_files_only_while_nothing_looked_inside():
    medium = MemoryMedium()
    medium.makedirs("/data")
    lg = Log.open(DIR, CFG, medium=medium, clock=ManualClock(T0))
    files = medium.untouched_files(DIR)
    assert [n for n, _ in files] == ["leader-epoch-checkpoint", "00000000000000000000.log",
                                     "00000000000000000000.index",
                                     "00000000000000000000.timeindex"]
    assert _untouched_base(files, 4096) == 0 and _untouched_base(files, 2048) is None
    assert medium.exists(f"{DIR}/00000000000000000000.log")  # answered from the list
    assert medium.untouched_files(DIR) == files
    lg.maybe_assign_epoch_start_offset(0, 0)  # writes the epoch checkpoint: files made
    assert medium.untouched_files(DIR) is None
    assert FileMedium().untouched_files("/") is None


def test_log_manager_restart_reports_what_the_long_way_reports():
    """A broker's log dir after a process crash: created logs (some written, most not) load
    to the same logs, reports and files whether or not their directories were still pending."""
    results = []
    for long_way in (False, True):
        medium = MemoryMedium()
        clock = ManualClock(T0)
        lm = LogManager(["/d"], CFG, medium=medium, clock=clock)
        lm.startup()
        for p in range(6):
            lg = lm.create_log("t", p)
            if p % 3 == 0:
                lg.append_as_leader(build_batch([b"x"], timestamps=[T0]), leader_epoch=1)
        lm.checkpoint_recovery_points()
        medium.crash("process")
        if long_way:
            for p in range(6):
                medium.listdir(f"/d/t-{p}")
        clock.advance(5000)
        again = LogManager(["/d"], CFG, medium=medium, clock=clock)
        loads = again.startup()
        pending = sum(isinstance(lg.segments, _NewLogSegments) for lg in again.logs.values())
        results.append((pending, {tp: dataclasses.asdict(r)
                                  for tp, r in sorted(loads["/d"].reports.items())},
                        {tp: _log_state(lg) for tp, lg in sorted(again.logs.items())},
                        _state(medium)))
    assert results[0][0] == 4 and results[1][0] == 0
    assert results[0][1:] == results[1][1:]
    assert all(r["recovered_segments"] == [0] for r in results[0][1].values())
    assert os.path.basename(next(iter(results[0][1].values()))["dir"]) == "t-0"


# --- a write into a pending directory keeps it pending ---------------------------------------
# What a new leader does first: write the epoch checkpoint of a log created moments before.
PENDING_FILES = (("ckpt", 0), ("00.log", 0), ("00.index", 4096), ("00.timeindex", 4092))
AFTER_WRITE = {
    "nothing": [],
    "read": [("read", "ckpt")],
    "listdir": [("listdir",)],
    "append_log": [("append", "00.log")],
    "write_again": [("write", "ckpt", b"0\n1\n7 40\n")],
    "write_other": [("write", "00.log", b"x")],
    "durable_bytes": [("durable", "00.index")],
    "flip_bit": [("flip", "ckpt")],
    "remove": [("remove", "00.index")],
    "rename_dir": [("mvdir",)],
    "rmtree": [("rmtree",)],
    "fsync_dir": [("fsync_dir",)],
    "power": [("power",)],
    "torn_power": [("torn",)],
    "process_then_power": [("process",), ("torn",)],
}


def _medium_op(m: MemoryMedium, op: tuple) -> object:
    kind = op[0]
    if kind == "read":
        return m.read_bytes(f"/r/p/{op[1]}")
    if kind == "listdir":
        return m.listdir("/r/p")
    if kind == "append":
        with m.open(f"/r/p/{op[1]}") as f:
            return f.append(b"batch")
    if kind == "write":
        return m.write_atomic(f"/r/p/{op[1]}", op[2])
    if kind == "durable":
        return m.durable_bytes(f"/r/p/{op[1]}"), m.durable_size(f"/r/p/{op[1]}")
    if kind == "flip":
        return m.flip_bit(f"/r/p/{op[1]}", 3)
    if kind == "remove":
        return m.remove(f"/r/p/{op[1]}")
    if kind == "mvdir":
        return m.rename("/r/p", "/r/q")
    if kind == "rmtree":
        return m.rmtree("/r/p")
    if kind == "fsync_dir":
        return m.fsync_dir("/r/p")
    if kind == "power":
        return m.crash("power")
    if kind == "torn":
        return m.crash("power", torn=TornWrite.SUBSET, rng=np.random.default_rng(11))
    return m.crash(op[0])


@pytest.mark.parametrize("after", sorted(AFTER_WRITE))
def test_write_into_pending_directory_is_indistinguishable(after):
    """The one-call directory with a file replaced by ``write_atomic`` against the same
    directory made file by file: the same answers, names, bytes, durable bytes and torn pages
    (a power failure finds every name synced by the write)."""
    traces = []
    for general in (False, True):
        m = MemoryMedium()
        m.makedirs("/r")
        if general:
            Medium.create_dir_with_files(m, "/r/p", PENDING_FILES)
        else:
            m.create_dir_with_files("/r/p", PENDING_FILES)
        m.write_atomic("/r/p/ckpt", b"0\n1\n0 0\n")
        if not general:  # the write left the directory pending, and no longer untouched
            assert "/r/p" in m._pending and m.untouched_files("/r/p") is None
        trace = [m.exists("/r/p/ckpt"), m.exists("/r/p/00.index")]
        for op in AFTER_WRITE[after]:
            trace.append(repr(_medium_op(m, op)))
        trace.append(_state(m))
        trace.append(repr(m.crash("power", torn=TornWrite.SUBSET, rng=np.random.default_rng(3))))
        trace.append(_state(m))
        traces.append(trace)
    assert traces[0] == traces[1]


def test_write_of_a_name_the_directory_lacks_makes_it():
    """Only a file the pending directory lists is written the short way; a new name (or one
    whose ``.tmp`` is listed) makes the directory first."""
    m = MemoryMedium()
    m.makedirs("/r")
    m.create_dir_with_files("/r/p", PENDING_FILES + (("ckpt2", 0), ("ckpt2.tmp", 0)))
    m.write_atomic("/r/p/new", b"1")
    assert "/r/p" not in m._pending and m.read_bytes("/r/p/new") == b"1"
    m.create_dir_with_files("/r/s", PENDING_FILES + (("ckpt2", 0), ("ckpt2.tmp", 0)))
    m.write_atomic("/r/s/ckpt2", b"2")
    assert "/r/s" not in m._pending and not m.exists("/r/s/ckpt2.tmp")
