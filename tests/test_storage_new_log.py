"""A new, empty log costs its directory entry: what it defers must not show.

``Log.open`` of a partition directory that does not exist (what ``LogManager.create_log`` does
for every replica the simulator places) makes the directory and its four files in one medium
call — on ``MemoryMedium`` the files stay pending until something looks inside — and builds the
segment, its index objects and the recovery report on first use. ``Log._create_stepwise`` is
the reference: every file made one call at a time, every object built at once. Here both run
side by side through the same operations, crashes and reloads, and the media must hold the same
names, lengths, bytes and durable bytes (what a power failure would leave) at every step.
"""
from __future__ import annotations

import os
import random

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from replica_core.clock import ManualClock
from replica_core.errors import KafkaStorageError
from replica_core.records import build_batch
from replica_core.storage.config import LogConfig
from replica_core.storage.log import Log, _NewLogSegments
from replica_core.storage.log_manager import LogManager
from replica_core.storage.medium import FileMedium, Medium, MemoryMedium
from replica_core.storage.segment import LogSegments

T0 = 1_700_000_000_000
CFG = LogConfig.from_properties({"segment.index.bytes": 4096})
SMALL = LogConfig.from_properties({"segment.index.bytes": 4096, "segment.bytes": 300})
# one time-index slot: every append rolls (and below 12 bytes the log is made step by step)
TINY_INDEX = LogConfig.from_properties({"segment.index.bytes": 20})
CONFIGS = {"roll": SMALL, "roll_tiny_index": TINY_INDEX, "tiny_index_below_an_entry":
           LogConfig.from_properties({"segment.index.bytes": 10})}


def _batch(n: int = 3, epoch_ts: int = T0) -> bytes:
    return build_batch([b"v%d" % i for i in range(n)], timestamps=[epoch_ts + i for i in range(n)])


def _new_log(way: str, medium, root: str, cfg=CFG, clock=None, start: int = 0) -> Log:
    path = os.path.join(root, "t-0")
    clock = clock or ManualClock(T0)
    if way == "fast":
        lg = Log.open(path, cfg, medium=medium, clock=clock, log_start_offset=start,
                      recovery_point=start, had_clean_shutdown=True)
        # the deferral is in force (not below one index entry: made step by step there)
        assert isinstance(lg.segments, _NewLogSegments) == (cfg.segment_index_bytes >= 12)
        return lg
    return Log._create_stepwise(path, cfg, medium, clock, start, start, True, ("t", 0))


def test_new_dirs_with_files_make_the_same_tree_on_both_media(tmp_path):
    """``create_new_dirs_with_files`` on disk (one call per name) and in memory (one pass):
    the same answers and the same directories, files and lengths, before and after a write."""
    trees = []
    for medium, root in ((FileMedium(), str(tmp_path / "disk")), (MemoryMedium(), "/mem")):
        medium.makedirs(root)
        medium.create_dir_with_files(f"{root}/t-1", FILES)
        made = medium.create_new_dirs_with_files(root, ["t-0", "t-1", "t-2", "t-0"], FILES)
        snaps = [made, _tree(medium, root)]
        with medium.open(f"{root}/t-2/c") as f:
            f.append(b"x")
        snaps.append(_tree(medium, root))
        trees.append(snaps)
    assert trees[0] == trees[1]
    assert trees[0][0] == [True, False, True, False]
    assert sorted(trees[0][1]) == [f"t-{p}/{n}" for p in range(3) for n in "abcd"]


def _tree(medium, root: str) -> dict:
    """Every file under ``root`` (relative name -> its bytes), walked through the medium."""
    out = {}
    for name in medium.listdir(root):
        path = f"{root}/{name}"
        if medium.is_dir(path):
            out.update({f"{name}/{k}": v for k, v in _tree(medium, path).items()})
        else:
            out[name] = medium.read_bytes(path)
    return out


def _state(medium, root: str | None = None) -> dict:
    """Every file: (current bytes, durable bytes) — sizes and contents both (on disk: every
    file under ``root``, its bytes)."""
    if root is None:
        return {f: (medium.read_bytes(f), medium.durable_bytes(f)) for f in medium.files()}
    out = {}
    for dirpath, _, names in os.walk(root):
        for n in names:
            p = os.path.join(dirpath, n)
            out[os.path.relpath(p, root)] = (medium.read_bytes(p), None)
    return out


def _log_state(lg: Log) -> tuple:
    return (lg.log_start_offset, lg.log_end_offset, lg.high_watermark, lg.recovery_point,
            lg.leader_epoch_cache.entries(), [s.base_offset for s in lg.segments],
            [s.size for s in lg.segments])


# what happens to the log after it is created (each step applied to both logs)
STEPS = {
    "nothing": [],
    "append": [("append",)],
    "append_flush": [("append",), ("flush",)],
    "epoch": [("epoch", 3)],
    "epoch_append_flush": [("epoch", 3), ("append",), ("flush",)],
    "read_at_leo": [("read", 0)],
    "read_after_append": [("append",), ("read", 0)],
    "flush_empty": [("flush",)],
    "close": [("close",)],
    "truncate_fully": [("append",), ("truncate_fully", 10)],
    "truncate_to": [("append",), ("append",), ("truncate_to", 2)],
    "clock_then_append": [("advance", 5000), ("append",), ("flush",)],
    "roll": [("append",)] * 6 + [("flush",)],
    "roll_tiny_index": [("append",)] * 3 + [("flush",)],
    "tiny_index_below_an_entry": [("flush",)],
    "offset_for_timestamp": [("append",), ("ts", T0 + 1)],
    "max_timestamp": [("ts", -3)],
}


def _apply(lg: Log, step: tuple, clock: ManualClock) -> object:
    kind = step[0]
    if kind == "append":
        return lg.append_as_leader(_batch(), leader_epoch=max(lg.latest_epoch, 0)).last_offset
    if kind == "flush":
        return lg.flush()
    if kind == "epoch":
        return lg.maybe_assign_epoch_start_offset(step[1], lg.log_end_offset)
    if kind == "read":
        r = lg.read(step[1], 10_000)
        return bytes(r.records), tuple(r.fetch_offset_metadata)
    if kind == "close":
        return lg.close()
    if kind == "truncate_fully":
        return lg.truncate_fully_and_start_at(step[1])
    if kind == "truncate_to":
        return lg.truncate_to(step[1])
    if kind == "advance":
        return clock.advance(step[1])
    if kind == "ts":
        return lg.offset_for_timestamp(step[1])
    raise AssertionError(kind)


def _run(way: str, steps: list[tuple], crash: str | None, cfg) -> tuple:
    medium = MemoryMedium()
    medium.makedirs("/data")
    clock = ManualClock(T0)
    try:
        lg = _new_log(way, medium, "/data", cfg, clock)
    except ValueError as e:  # an index too small for one entry: both ways refuse it
        return ("error", str(e), _state(medium))
    trace = [_state(medium)]
    for step in steps:
        trace.append(repr(_apply(lg, step, clock)))
        trace.append(_state(medium))
    if not lg.closed:
        trace.append(_log_state(lg))
    if crash is not None:
        medium.crash(crash)
        trace.append(_state(medium))
    # reload what is there (recovering everything), then keep using it
    reloaded = Log.open("/data/t-0", cfg, medium=medium, clock=clock, had_clean_shutdown=False)
    trace.append(_log_state(reloaded))
    trace.append(_state(medium))
    reloaded.append_as_leader(_batch(2), leader_epoch=max(reloaded.latest_epoch, 0))
    reloaded.flush()
    trace.append(_log_state(reloaded))
    trace.append(_state(medium))
    medium.crash("power")
    trace.append(_state(medium))
    return tuple(trace)


@pytest.mark.parametrize("crash", [None, "process", "power"])
@pytest.mark.parametrize("steps", sorted(STEPS))
def test_new_log_leaves_what_creating_every_file_at_once_leaves(steps, crash):
    cfg = CONFIGS.get(steps, CFG)
    fast = _run("fast", STEPS[steps], crash, cfg)
    reference = _run("stepwise", STEPS[steps], crash, cfg)
    assert fast == reference
    assert (fast[0] == "error") == (steps == "tiny_index_below_an_entry")


def test_new_log_files_on_disk_match(tmp_path):
    """FileMedium takes the general path of the one call: the same files, lengths, bytes."""
    trees = []
    for way in ("fast", "stepwise"):
        medium, root = FileMedium(), str(tmp_path / way)
        os.makedirs(root)
        lg = _new_log(way, medium, root)
        snaps = [_state(medium, root)]
        lg.append_as_leader(_batch(), leader_epoch=0)
        lg.flush()
        snaps.append(_state(medium, root))
        lg.close()
        snaps.append(_state(medium, root))
        trees.append(snaps)
    assert trees[0] == trees[1]
    assert sorted(trees[0][0]) == ["t-0/00000000000000000000.index",
                                   "t-0/00000000000000000000.log",
                                   "t-0/00000000000000000000.timeindex",
                                   "t-0/leader-epoch-checkpoint"]
    assert [len(trees[0][0][k][0]) for k in sorted(trees[0][0])] == [4096, 0, 4092, 0]


def test_deferred_parts_are_built_as_they_would_have_been():
    """The segment keeps the creation time (time-based rolling counts from it), the recovery
    report says what creating reported, the segments object becomes a plain one."""
    medium = MemoryMedium()
    medium.makedirs("/data")
    clock = ManualClock(T0)
    # not after a clean shutdown: then a log starting above 0 gets Kafka's empty producer
    # snapshot at its start (rebuildProducerState finding none), which makes the directory
    lg = Log.open("/data/t-0", CFG, medium=medium, clock=clock, log_start_offset=7,
                  recovery_point=9, had_clean_shutdown=False)
    assert "/data/t-0" in medium._pending and medium.exists("/data/t-0/leader-epoch-checkpoint")
    clock.advance(60_000)
    report = lg.recovery_report
    assert (report.had_clean_shutdown, report.log_start_offset, report.log_end_offset,
            report.recovery_point, report.data_lost) == (False, 7, 7, 7, False)
    assert type(lg.segments) is _NewLogSegments
    seg = lg.active_segment
    assert type(lg.segments) is LogSegments and seg.base_offset == 7 and seg.created == T0
    assert seg._offset_index is None and seg._time_index is None  # still deferred
    lg.append_as_leader(_batch(), leader_epoch=0)  # below index.interval.bytes: no entry
    assert seg._offset_index is None and seg._time_index is None  # so still deferred
    # the directory stays pending, its log file made alone (the first open), the indexes not
    assert medium.exists(seg.offset_index_path) and "/data/t-0" in medium._pending
    assert seg.log_path in medium._files and seg.offset_index_path not in medium._files
    assert seg.offset_index.entries == 0 and seg.time_index.entries == 0
    assert seg.offset_index.max_entries == 512 and seg.time_index.max_entries == 341


def test_a_read_of_a_new_segment_builds_no_index_and_the_next_append_still_defers_them():
    """A leader's segment is read (by its followers) before it is appended to again: its
    pre-allocated offset index holds no entry, so the read starts at position 0 without
    building it; the append's roll check answers from both indexes' known emptiness (below
    index.interval.bytes: no entry)."""
    medium = MemoryMedium()
    medium.makedirs("/data")
    lg = Log.open("/data/t-0", CFG, medium=medium, clock=ManualClock(T0))
    first = _batch()
    lg.append_as_leader(first, leader_epoch=0)
    seg = lg.active_segment
    fetched = lg.read(0, 1_000_000)
    assert bytes(fetched.records) == bytes(seg.log_file.view(0, seg.size))
    assert fetched.fetch_offset_metadata.relative_position_in_segment == 0
    assert seg._offset_index is None and seg._time_index is None
    assert not seg.roll_needed(100, T0, lg.log_end_offset, T0, 1 << 30, 1 << 40)
    lg.append_as_leader(_batch(), leader_epoch=0)
    assert seg._offset_index is None and seg._time_index is None and lg.log_end_offset == 6
    # a read from the second batch finds it by walking the headers from position 0
    assert lg.read(3, 1_000_000).fetch_offset_metadata.relative_position_in_segment == len(first)
    # what the built indexes say is what the checks assumed
    assert seg.offset_index.entries == 0 and seg.time_index.entries == 0
    assert not seg.time_index.is_full()
    # an offset that cannot be stored relative to the base still asks for a roll
    assert seg.roll_needed(100, T0, 2**31 + 5, T0, 1 << 30, 1 << 40)


def test_log_manager_creates_new_logs_the_short_way():
    medium = MemoryMedium()
    medium.makedirs("/d")
    lm = LogManager(["/d"], CFG, medium=medium, clock=ManualClock(T0))
    lm.startup()
    lg = lm.create_log("t", 3)
    assert (lg.topic, lg.partition, lg.dir) == ("t", 3, "/d/t-3")
    assert isinstance(lg.segments, _NewLogSegments) and "/d/t-3" in medium._pending
    assert lm.create_log("t", 3) is lg
    lm.shutdown()  # flush and close: every file made, indexes trimmed
    assert medium.files() == ["/d/.kafka_cleanshutdown", "/d/log-start-offset-checkpoint",
                              "/d/recovery-point-offset-checkpoint",
                              "/d/replication-offset-checkpoint",
                              "/d/t-3/00000000000000000000.index",
                              "/d/t-3/00000000000000000000.log",
                              "/d/t-3/00000000000000000000.timeindex",
                              "/d/t-3/leader-epoch-checkpoint"]
    assert [len(medium.read_bytes(f"/d/t-3/00000000000000000000{s}"))
            for s in (".index", ".timeindex")] == [0, 0]


# --- MemoryMedium: a pending directory against the same files made one call at a time -------------
FILES = (("a", 0), ("b", 0), ("c", 16), ("d", 24))
NAMES = ["a", "b", "c", "d", "e"]
_ops = st.lists(st.one_of(
    st.tuples(st.just("newdir"), st.integers(0, 2)),
    st.tuples(st.just("newsub"), st.integers(0, 2), st.sampled_from(NAMES)),
    st.tuples(st.just("new_if_absent"), st.integers(0, 2)),
    st.tuples(st.just("newsub_if_absent"), st.integers(0, 2), st.sampled_from(NAMES)),
    st.tuples(st.just("newdirs_if_absent"), st.integers(-1, 2),
              st.lists(st.sampled_from([*NAMES, "d0", "d1", "d2", ".", "x/y", ""]), max_size=4)),
    st.tuples(st.just("append"), st.integers(0, 2), st.sampled_from(NAMES)),
    st.tuples(st.just("read"), st.integers(0, 2), st.sampled_from(NAMES)),
    st.tuples(st.just("remove"), st.integers(0, 2), st.sampled_from(NAMES)),
    st.tuples(st.just("rename"), st.integers(0, 2), st.sampled_from(NAMES), st.integers(0, 2),
              st.sampled_from(NAMES)),
    st.tuples(st.just("rmdir"), st.integers(0, 2)),
    st.tuples(st.just("mvdir"), st.integers(0, 2), st.integers(0, 2)),
    st.tuples(st.just("rmtree"), st.integers(0, 2)),
    st.tuples(st.just("mkdir_below"), st.integers(0, 2), st.sampled_from(NAMES)),
    st.tuples(st.just("fsync_dir"), st.integers(-1, 2)),
    st.tuples(st.just("write_atomic"), st.integers(0, 2), st.sampled_from(NAMES)),
    st.tuples(st.just("flush"), st.integers(0, 2), st.sampled_from(NAMES)),
    st.tuples(st.just("listdir"), st.integers(-1, 2)),
    st.tuples(st.just("crash"), st.sampled_from(["process", "power"])),
), max_size=30)


def _op(m: MemoryMedium, op: tuple, general: bool) -> object:
    d = lambda i: "/r" if i < 0 else f"/r/d{i}"  # noqa: E731
    kind = op[0]
    if kind == "newdir":
        if general:
            return Medium.create_dir_with_files(m, d(op[1]), FILES)
        return m.create_dir_with_files(d(op[1]), FILES)
    if kind == "newsub":
        sub = f"{d(op[1])}/{op[2]}"
        if general:
            return Medium.create_dir_with_files(m, sub, FILES)
        return m.create_dir_with_files(sub, FILES)
    if kind in ("new_if_absent", "newsub_if_absent"):
        path = d(op[1]) if kind == "new_if_absent" else f"{d(op[1])}/{op[2]}"
        if general:  # exists, then the file-by-file sequence where it said no
            if m.exists(path):
                return False
            Medium.create_dir_with_files(m, path, FILES)
            return True
        return m.create_new_dir_with_files(path, FILES)
    if kind == "newdirs_if_absent":
        if general:  # create_new_dir_with_files' general sequence per name, in order
            return [not m.exists(p) and (Medium.create_dir_with_files(m, p, FILES) or True)
                    for p in (os.path.join(d(op[1]), name) for name in op[2])]
        return m.create_new_dirs_with_files(d(op[1]), op[2], FILES)
    if kind == "append":
        with m.open(f"{d(op[1])}/{op[2]}", create=True) as f:
            return f.append(b"x" * 5)
    if kind == "read":
        return m.read_bytes(f"{d(op[1])}/{op[2]}")
    if kind == "remove":
        return m.remove(f"{d(op[1])}/{op[2]}")
    if kind == "rename":
        return m.rename(f"{d(op[1])}/{op[2]}", f"{d(op[3])}/{op[4]}")
    if kind == "rmdir":
        return m.remove(d(op[1]))
    if kind == "mvdir":
        return m.rename(d(op[1]), d(op[2]))
    if kind == "rmtree":
        return m.rmtree(d(op[1]))
    if kind == "mkdir_below":
        return m.makedirs(f"{d(op[1])}/{op[2]}/sub")
    if kind == "fsync_dir":
        return m.fsync_dir(d(op[1]))
    if kind == "write_atomic":
        return m.write_atomic(f"{d(op[1])}/{op[2]}", b"atomic")
    if kind == "flush":
        with m.open(f"{d(op[1])}/{op[2]}") as f:
            return f.flush()
    if kind == "listdir":
        return m.listdir(d(op[1]))
    return m.crash(op[1])


def _looks(m: MemoryMedium) -> list:
    """What can be seen without making anything: existence, kind, durable bytes."""
    paths = ["/r", *(f"/r/d{i}" for i in range(3))]
    paths += [f"/r/d{i}/{n}" for i in range(3) for n in NAMES]
    paths += [f"/r/d{i}/{n}/sub" for i in range(3) for n in NAMES]
    paths += [f"/r/d{i}/{n}/{k}" for i in range(3) for n in NAMES for k in NAMES]
    return [(p, m.exists(p), m.is_dir(p), m.durable_bytes(p)) for p in paths]


@settings(max_examples=300, deadline=None)
@given(ops=_ops, fsync_persists_name=st.booleans())
@example(ops=[("crash", "power")], fsync_persists_name=False)
@example(ops=[("fsync_dir", 0), ("crash", "power")], fsync_persists_name=False)
@example(ops=[("write_atomic", 1, "a"), ("crash", "power")], fsync_persists_name=False)
@example(ops=[("mvdir", 0, 2), ("fsync_dir", -1), ("crash", "power")], fsync_persists_name=False)
@example(ops=[("rmtree", 0), ("newdir", 0), ("read", 0, "c")], fsync_persists_name=False)
@example(ops=[("mkdir_below", 0, "a")], fsync_persists_name=False)
@example(ops=[("new_if_absent", 2), ("newsub_if_absent", 0, "a"), ("newsub_if_absent", 0, "e"),
              ("new_if_absent", 1), ("write_atomic", 2, "a"), ("crash", "power")],
         fsync_persists_name=False)
@example(ops=[("newsub", 0, "e"), ("mvdir", 0, 2)], fsync_persists_name=False)
@example(ops=[("newdirs_if_absent", -1, ["d2", "d0", "e", "d2", ".", ""]), ("listdir", -1),
              ("newdirs_if_absent", 0, ["a", "e", "x/y"]), ("crash", "power")],
         fsync_persists_name=False)
@example(ops=[("newsub", 0, "e"), ("rmtree", 0)], fsync_persists_name=False)
@example(ops=[("rename", 0, "c", 2, "e"), ("fsync_dir", 2), ("crash", "power")],
         fsync_persists_name=False)
def test_pending_directory_is_indistinguishable(ops, fsync_persists_name):
    """After any sequence of operations, a directory created in one step (files pending) and
    one created file by file give the same answers, errors, names, bytes and durable bytes.
    Every sequence starts with directories 0 and 1 created that way (so mostly pending)."""
    media = [MemoryMedium(fsync_persists_name=fsync_persists_name) for _ in range(2)]
    for m in media:
        m.makedirs("/r")
    for op in [("newdir", 0), ("newdir", 1), *ops]:
        results = []
        for general, m in zip((False, True), media, strict=True):
            try:
                results.append(("ok", _op(m, op, general)))
            except Exception as e:  # noqa: BLE001 - the same error is the point
                results.append(("error", type(e).__name__))
        assert results[0] == results[1], op
        assert _looks(media[0]) == _looks(media[1]), op
    assert media[0].files() == media[1].files()
    assert [_state(m) for m in media][0] == _state(media[1])
    for m in media:
        m.crash("power")
    assert _state(media[0]) == _state(media[1])


@pytest.mark.parametrize("start,name", [(7, "00000000000000000007.log"),
                                        (0, "00000000000000000000.log")])
def test_a_new_logs_first_segment_is_what_the_constructor_builds(start, name):
    """LogSegment.for_new_log (a new log's first segment, built when first used) sets every field
    the constructor sets for that segment, to the same values, and opens the same file (at
    base 0 its name is the shared one)."""
    from replica_core.storage.segment import LogSegment

    medium = MemoryMedium()
    medium.makedirs("/data")
    clock = ManualClock(T0)
    lg = Log.open("/data/t-0", CFG, medium=medium, clock=clock, log_start_offset=start,
                  recovery_point=start)
    assert type(lg.segments) is _NewLogSegments
    clock.advance(5_000)  # the creation time is the log's, not the clock's now
    made = lg.active_segment
    built = LogSegment(medium, "/data/t-0", start, index_interval_bytes=CFG.index_interval_bytes,
                       max_index_size=CFG.segment_index_bytes, clock=clock,
                       file_already_exists=True, index_files_preallocated=True, created_ms=T0)
    assert type(made) is LogSegment and made.created == T0
    names = [n for n in LogSegment.__slots__ if n not in ("log_file", "__weakref__")]
    unset = object()
    fields = {n: getattr(made, n, unset) for n in names}
    assert fields == {n: getattr(built, n, unset) for n in names}
    assert unset not in fields.values()  # every field set
    assert made.log_file.path == built.log_file.path == "/data/t-0/" + name
    assert made.log_file.writable and made.size == 0


# --- LogManager.create_logs: a LeaderAndIsr's new logs in one call ---------------------------------
JITTERED = LogConfig.from_properties({"segment.index.bytes": 4096, "segment.jitter.ms": 1000})
# new logs, one of them named twice; "j" draws a roll jitter (made by create_log itself),
# "small" has a config of its own; t-1 has a log, t-2 a directory nobody loaded
PARTS = [("t", 0), ("t", 1), ("j", 0), ("t", 2), ("t", 0), ("small", 0), ("t", 3), ("j", 1)]


def _manager() -> LogManager:
    medium = MemoryMedium()
    medium.makedirs("/d")
    lm = LogManager(["/d"], CFG, medium=medium, clock=ManualClock(T0), rng=random.Random(7),
                    topic_configs={"j": JITTERED, "small": TINY_INDEX})
    lm.startup()
    lm.create_log("t", 1)
    medium.create_dir_with_files("/d/t-2", (("00000000000000000000.log", 0),))
    return lm


def _slots(lg: Log) -> dict:
    """Every field of ``lg``; the objects it holds by what they hold."""
    out = {}
    for name in Log.__slots__:
        if name == "__weakref__":
            continue
        v = getattr(lg, name)  # an unset field raises here
        if name == "segments":
            v = (type(v).__name__, [(s.base_offset, s.size, s.created, s.roll_jitter_ms)
                                    for s in v])
        elif name == "leader_epoch_cache":
            v = (v.entries(), v._checkpoint.path if v._checkpoint is not None else None)
        elif name == "jitter_source":
            v = None if v is None else (v.seed, v.name)
        elif name in ("medium", "clock", "high_watermark_changes", "_psm"):
            v = type(v).__name__
        out[name] = v
    return out


def test_create_logs_makes_what_create_log_makes_one_at_a_time(monkeypatch):
    """The same request through ``create_log`` per partition and through ``create_logs``: the
    same logs field by field (the segments built on first use, as the same objects), the same
    placement, the same files and bytes on the medium — before and after a write, a crash and a
    reload."""
    one, many = _manager(), _manager()
    for topic, partition in PARTS:
        if one.get_log(topic, partition) is None:
            one.create_log(topic, partition, log_dir="/d")
    stepwise = []  # the logs create_logs left to create_log's own way
    create = Log._create.__func__
    monkeypatch.setattr(Log, "_create", classmethod(
        lambda cls, dir, *a, **k: stepwise.append(dir) or create(cls, dir, *a, **k)))
    many.create_logs(PARTS, log_dir="/d")
    monkeypatch.undo()
    assert stepwise == ["/d/j-0", "/d/j-1"]  # the jittered topic's; the rest in one step
    assert list(many._logs) == list(one._logs)
    assert many._log_dir_of == one._log_dir_of and many._dir_count == one._dir_count
    assert many.medium._pending == one.medium._pending
    assert type(many.get_log("t", 0).segments) is _NewLogSegments  # made the short way
    states = []
    for lm in (one, many):
        before = {tp: _slots(lg) for tp, lg in lm._logs.items()}  # (builds every segment)
        for lg in lm._logs.values():
            lg.append_as_leader(_batch(), leader_epoch=0)
            lg.flush()
        lm.checkpoint_high_watermarks()
        lm.medium.crash("power")
        again = LogManager(["/d"], CFG, medium=lm.medium, clock=lm.clock, rng=random.Random(7),
                           topic_configs={"j": JITTERED, "small": TINY_INDEX})
        again.startup()
        states.append((before, _state(lm.medium),
                       {tp: _log_state(lg) for tp, lg in again._logs.items()}))
    assert states[0] == states[1]
    assert states[0][0][("j", 0)]["segments"][1][0][3] != 0  # the jittered topic drew


def test_create_logs_keeps_existing_logs_and_refuses_failed_ones():
    """A partition with a log keeps that very object; one whose log failed to load is refused
    with create_log's error, after the partitions before it in the request were made."""
    lm = _manager()
    kept = lm.get_log("t", 1)
    lm._failed[("t", 9)] = "failed to load"
    with pytest.raises(KafkaStorageError, match="t-9 failed to load"):
        lm.create_logs([("t", 1), ("t", 5), ("t", 9), ("t", 6)], log_dir="/d")
    assert lm.get_log("t", 1) is kept
    assert lm.get_log("t", 5) is not None and lm.get_log("t", 6) is None


def test_create_logs_in_an_offline_or_unknown_dir_is_create_logs_error():
    lm = _manager()
    with pytest.raises(KafkaStorageError, match="offline or unknown"):
        lm.create_logs([("t", 5)], log_dir="/elsewhere")
    assert lm.get_log("t", 5) is None


def test_create_logs_refuses_an_index_below_one_entry_as_create_log_does():
    """``segment.index.bytes`` below one entry: the log is made step by step, and its index
    refuses the size, in both ways (the partitions before it made)."""
    errors = []
    for way in ("one", "many"):
        lm = _manager()
        lm.topic_configs["tiny"] = CONFIGS["tiny_index_below_an_entry"]
        with pytest.raises(ValueError, match="Invalid max index size") as e:
            if way == "one":
                for tp in [("t", 5), ("tiny", 0)]:
                    lm.create_log(*tp, log_dir="/d")
            else:
                lm.create_logs([("t", 5), ("tiny", 0)], log_dir="/d")
        errors.append((str(e.value), sorted(lm._logs), lm.medium.files()))
    assert errors[0] == errors[1]
