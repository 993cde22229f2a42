"""Crash and corruption recovery (KAFKA_SEMANTICS §5.3-5.5, §1.12, §9.13).

Each case damages a log the way a crash or a disk would, reopens it, and checks that it comes
back at the last valid batch with the right log end offset, reporting what was cut.
"""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest
from storage_testlib import make_batch, parse_batches, parse_offset_index

from replica_core.clock import ManualClock
from replica_core.records import batch_at, build_batch
from replica_core.storage.config import LogConfig
from replica_core.storage.dump import verify_log_dir
from replica_core.storage.log import Log
from replica_core.storage.log_manager import load_log_dir
from replica_core.storage.medium import FileMedium, MemoryMedium

T0 = 1_700_000_000_000
SMALL = LogConfig.from_properties({"segment.bytes": 600, "index.interval.bytes": 100})


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


def _dir(env, name="topic-0"):
    return os.path.join(env[1], name)


def _open(env, config=SMALL, **kw):
    return Log.open(_dir(env), config, medium=env[0], clock=ManualClock(T0), **kw)


def _write_log(env, batches=12, epoch=1):
    log = _open(env)
    for i in range(batches):
        log.append_as_leader(build_batch([b"%04d" % i * 10, b"x" * 30], timestamps=[T0 + i, T0 + i]),
                             epoch)
    log.flush()
    log.close()
    return log


def _segment_files(env):
    medium = env[0]
    return sorted(n for n in medium.listdir(_dir(env)) if n.endswith(".log"))


def _bytes(env, name):
    return env[0].read_bytes(os.path.join(_dir(env), name))


def _rewrite(env, name, data):
    f = env[0].open(os.path.join(_dir(env), name), create=True)
    f.truncate(0)
    f.append(data)
    f.close()


def _all_batches(env):
    out = []
    for name in _segment_files(env):
        out.extend(parse_batches(_bytes(env, name)))
    return out


def _check_readable(log):
    """Every offset reads back and belongs to the batch returned."""
    for offset in range(log.log_start_offset, log.log_end_offset):
        b = parse_batches(bytes(log.read(offset, 1).records))[0]
        assert b.base_offset <= offset <= b.last_offset and b.crc_ok


def test_tail_cut_mid_batch(env):
    _write_log(env)
    last = _segment_files(env)[-1]
    data = _bytes(env, last)
    parsed = parse_batches(data)
    cut = parsed[-1].position + 30
    _rewrite(env, last, data[:cut])
    log = _open(env, recovery_point=0)
    assert log.log_end_offset == parsed[-2].last_offset + 1 if len(parsed) > 1 else parsed[-1].base_offset
    report = log.recovery_report
    assert [(c.reason, c.truncated_bytes) for c in report.cuts] == [("torn", 30)]
    _check_readable(log)
    log.close()
    if isinstance(env[0], FileMedium):
        assert verify_log_dir(_dir(env)).ok


def test_flipped_byte_cuts_segment_and_drops_later_ones(env):
    _write_log(env, batches=20)
    names = _segment_files(env)
    assert len(names) >= 4
    victim = names[1]
    data = bytearray(_bytes(env, victim))
    parsed = parse_batches(bytes(data))
    k = len(parsed) // 2
    data[parsed[k].position + 61] ^= 0xFF
    _rewrite(env, victim, bytes(data))
    log = _open(env, recovery_point=0)
    assert log.log_end_offset == parsed[k].base_offset
    report = log.recovery_report
    assert report.cuts[0].reason == "crc" and report.cuts[0].base_offset == int(victim[:20])
    assert report.deleted_segments == [int(n[:20]) for n in names[2:]]
    assert _segment_files(env) == names[:2]
    _check_readable(log)
    # the log continues at the cut
    info = log.append_as_leader(build_batch([b"after"]), 2)
    assert info.first_offset == parsed[k].base_offset


def test_corruption_below_recovery_point_is_not_rescanned(env):
    _write_log(env, batches=20)
    names = _segment_files(env)
    first = bytearray(_bytes(env, names[0]))
    first[70] ^= 0xFF
    _rewrite(env, names[0], bytes(first))
    active_base = int(names[-1][:20])
    log = _open(env, recovery_point=active_base)
    # Kafka only rescans from the segment holding the recovery point (§11.10)
    assert log.recovery_report.recovered_segments == [active_base]
    assert not log.recovery_report.data_lost


@pytest.mark.parametrize("how", ["deleted", "garbage", "truncated"])
def test_bad_index_is_rebuilt_even_after_clean_shutdown(env, how):
    _write_log(env, batches=20)
    names = _segment_files(env)
    victim = names[0][:20] + ".index"
    good = _bytes(env, victim)
    assert len(good) >= 16
    medium = env[0]
    path = os.path.join(_dir(env), victim)
    if how == "deleted":
        medium.remove(path)
    elif how == "garbage":
        _rewrite(env, victim, bytes(random.Random(3).randrange(256) for _ in range(len(good))))
    else:
        _rewrite(env, victim, good[:-3])
    log = _open(env, recovery_point=10**9, had_clean_shutdown=True)
    assert [b for b, _ in log.recovery_report.rebuilt_indexes] == [0]
    assert not log.recovery_report.data_lost
    _check_readable(log)
    log.close()
    rebuilt = _bytes(env, victim)
    entries = parse_offset_index(rebuilt, 0)
    positions = {b.position for b in parse_batches(_bytes(env, names[0]))}
    assert entries and all(p in positions for _, p in entries)


def test_missing_time_index_is_recreated_empty_and_lookups_still_work(env):
    _write_log(env, batches=20)
    names = _segment_files(env)
    env[0].remove(os.path.join(_dir(env), names[0][:20] + ".timeindex"))
    log = _open(env, recovery_point=10**9, had_clean_shutdown=True)
    assert len(_bytes(env, names[0][:20] + ".timeindex")) == 0
    assert log.offset_for_timestamp(T0 + 1) == (T0 + 1, 2, 1)


def test_orphan_index_and_temp_files(env):
    _write_log(env, batches=20)
    names = _segment_files(env)
    medium, d = env[0], _dir(env)
    for n in ("00000000000000099999.index", "00000000000000099999.timeindex",
              "00000000000000000000.log.deleted", "00000000000000000000.index.deleted",
              "00000000000000000400.log.cleaned", "00000000000000000500.log.swap"):
        _rewrite(env, n, b"junk")
    log = _open(env, recovery_point=10**9, had_clean_shutdown=True)
    left = medium.listdir(d)
    assert not any(n.endswith((".deleted", ".cleaned", ".swap")) for n in left)
    assert "00000000000000099999.index" not in left
    r = log.recovery_report
    assert sorted(r.orphan_index_files) == ["00000000000000099999.index", "00000000000000099999.timeindex"]
    assert "00000000000000000500.log.swap" in r.deleted_temp_files  # above the lowest .cleaned
    assert sorted(n for n in left if n.endswith(".log")) == names
    _check_readable(log)


def test_swap_file_replaces_the_segments_it_covers(env):
    _write_log(env, batches=20)
    names = _segment_files(env)
    medium, d = env[0], _dir(env)
    target = names[1]
    data = _bytes(env, target)
    parsed = parse_batches(data)
    # a "compacted" copy of segment 1 without its first batch, as the cleaner would leave it
    compacted = data[parsed[1].position:]
    _rewrite(env, target + ".swap", compacted)
    log = _open(env, recovery_point=10**9, had_clean_shutdown=True)
    assert log.recovery_report.swap_files_completed == [target + ".swap"]
    assert target in log.recovery_report.replaced_by_swap
    assert _bytes(env, target) == compacted
    assert not any(n.endswith(".swap") for n in medium.listdir(d))
    # the replaced segment's stale index went with it; the new one was rebuilt
    assert [b for b, _ in log.recovery_report.rebuilt_indexes] == [int(target[:20])]
    assert parse_batches(bytes(log.read(parsed[0].base_offset, 1).records))[0].base_offset == parsed[1].base_offset


def test_log_start_offset_checkpoint_beyond_log_end_empties_log(env):
    _write_log(env, batches=6)
    log = _open(env, recovery_point=10**9, had_clean_shutdown=True, log_start_offset=1000)
    assert log.segments.base_offsets() == [1000]
    assert (log.log_start_offset, log.log_end_offset) == (1000, 1000)
    assert log.leader_epoch_cache.entries() == []


def test_unclean_load_below_log_start_checkpoint_empties_log(env):
    """The last segment is recovered (its rebuilt indexes held back to be written with the
    active segment's resize), then every segment is deleted: its indexes go with it."""
    _write_log(env, batches=6)
    log = _open(env, recovery_point=0, had_clean_shutdown=False, log_start_offset=1000)
    assert log.segments.base_offsets() == [1000]
    assert (log.log_start_offset, log.log_end_offset) == (1000, 1000)
    assert sorted(n for n in env[0].listdir(_dir(env)) if n.endswith((".log", ".index"))) == [
        "00000000000000001000.index", "00000000000000001000.log"]
    assert log.recovery_report.recovered_segments


def test_lost_epoch_checkpoint_is_rebuilt_by_recovery(env):
    log = _open(env)
    for epoch in (1, 1, 3, 3, 3, 7):
        log.append_as_leader(build_batch([b"v" * 50]), epoch)
    log.flush()
    log.close()
    env[0].remove(os.path.join(_dir(env), "leader-epoch-checkpoint"))
    log = _open(env, recovery_point=0)
    assert log.leader_epoch_cache.entries() == [(1, 0), (3, 2), (7, 5)]


def test_corrupt_epoch_checkpoint_is_rebuilt_from_all_segments(env):
    log = _open(env)
    for epoch in (2, 2, 4, 4, 4, 4, 4, 4, 4, 9):
        log.append_as_leader(build_batch([b"v" * 90]), epoch)
    log.flush()
    leo = log.log_end_offset
    log.close()
    _rewrite(env, "leader-epoch-checkpoint", b"0\n3\n2 0\ngarbage\n")
    log = _open(env, recovery_point=leo, had_clean_shutdown=True)
    assert log.leader_epoch_cache.entries() == [(2, 0), (4, 2), (9, 9)]
    assert log.recovery_report.warnings and not log.recovery_report.data_lost
    assert len(log.recovery_report.recovered_segments) == len(log.segments) > 1


def test_missing_clean_shutdown_marker_recovers_from_recovery_point(env):
    medium, root = env
    log_dir = os.path.join(root, "kafka-logs")
    manager = load_log_dir(log_dir, SMALL, medium=medium, clock=ManualClock(T0))
    lg = manager.create_log("t", 0)
    for i in range(20):
        lg.append_as_leader(build_batch([b"%03d" % i * 20]), 1)
    manager.shutdown()
    # clean restart: nothing scanned
    manager = load_log_dir(log_dir, SMALL, medium=medium, clock=ManualClock(T0))
    assert manager.loads[log_dir].had_clean_shutdown
    assert manager.get_log("t", 0).recovery_report.recovered_segments == []
    manager.shutdown()
    # marker gone: the segment holding the recovery point (= LEO after shutdown) is rescanned
    medium.remove(os.path.join(log_dir, ".kafka_cleanshutdown"))
    part = os.path.join(log_dir, "t-0")
    last = sorted(n for n in medium.listdir(part) if n.endswith(".log"))[-1]
    data = medium.read_bytes(os.path.join(part, last))
    f = medium.open(os.path.join(part, last))
    f.truncate(len(data) - 5)
    f.close()
    manager = load_log_dir(log_dir, SMALL, medium=medium, clock=ManualClock(T0))
    assert not manager.loads[log_dir].had_clean_shutdown
    lg = manager.get_log("t", 0)
    assert lg.recovery_report.recovered_segments == [int(last[:20])]
    assert lg.log_end_offset == 19 and lg.high_watermark <= 19
    manager.shutdown()


def test_crash_during_loading_counts_as_unclean(memory_env):
    """KAFKA-10471: the marker is deleted before loading, so a crash mid-load is unclean."""
    env = memory_env
    medium, root = env
    log_dir = os.path.join(root, "kafka-logs")
    manager = load_log_dir(log_dir, SMALL, medium=medium, clock=ManualClock(T0))
    lg = manager.create_log("t", 0)
    lg.append_as_leader(build_batch([b"v"]), 1)
    manager.shutdown()
    load_log_dir(log_dir, SMALL, medium=medium, clock=ManualClock(T0))  # ...and the broker dies
    medium.crash("power")
    manager = load_log_dir(log_dir, SMALL, medium=medium, clock=ManualClock(T0))
    assert not manager.loads[log_dir].had_clean_shutdown
    assert manager.get_log("t", 0).log_end_offset == 1


def test_power_crash_via_log_manager_loses_only_unflushed(memory_env):
    env = memory_env
    medium, root = env
    log_dir = os.path.join(root, "kafka-logs")
    cfg = LogConfig.from_properties({"segment.bytes": 10**6})
    manager = load_log_dir(log_dir, cfg, medium=medium, clock=ManualClock(T0))
    lg = manager.create_log("t", 0)
    for i in range(10):
        lg.append_as_leader(build_batch([b"%d" % i]), 1)
    lg.flush()
    manager.checkpoint_recovery_points()
    for i in range(10, 15):
        lg.append_as_leader(build_batch([b"%d" % i]), 1)
    medium.crash("power")
    manager = load_log_dir(log_dir, cfg, medium=medium, clock=ManualClock(T0))
    lg = manager.get_log("t", 0)
    assert lg.log_end_offset == 10
    values = [batch_at(bytes(lg.read(o, 1).records)).base_offset for o in range(10)]
    assert values == list(range(10))


# --- SIGKILL loop (slow) --------------------------------------------------------------------
CHILD = r"""
import os, random, sys
from replica_core.storage.log import Log
from replica_core.storage.config import LogConfig
from replica_core.records import build_batch

part, seed = sys.argv[1], int(sys.argv[2])
flushed_path = os.path.join(os.path.dirname(part), "flushed")
cfg = LogConfig.from_properties({"segment.bytes": 16384, "index.interval.bytes": 512})
log = Log.open(part, cfg, recovery_point=0)
rng = random.Random(seed)
i = log.log_end_offset
print("ready", flush=True)
while True:
    n = rng.randint(1, 6)
    values = [b"%d:" % (i + k) + bytes([(i + k) % 251]) * rng.randint(0, 200) for k in range(n)]
    info = log.append_as_leader(build_batch(values), 1)
    assert info.first_offset == i
    i += n
    if rng.random() < 0.05:
        log.flush()
        tmp = flushed_path + ".tmp"
        with open(tmp, "w") as fh:
            fh.write(str(log.recovery_point))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, flushed_path)
"""


def _check_record(offset, value):
    prefix, _, rest = value.partition(b":")
    assert int(prefix) == offset
    assert rest == bytes([offset % 251]) * len(rest)


@pytest.mark.slow
def test_sigkill_loop_keeps_every_flushed_record(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    rng = random.Random(20240601)
    trials = 50
    for trial in range(trials):
        root = tmp_path / f"trial{trial}"
        part = root / "t-0"
        root.mkdir()
        resumes = rng.randint(1, 3)  # kill the same log several times
        for _ in range(resumes):
            proc = subprocess.Popen([sys.executable, str(script), str(part), str(rng.randrange(1 << 30))],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            assert proc.stdout.readline().strip() == b"ready", proc.stderr.read().decode()
            time.sleep(rng.uniform(0.01, 0.4))
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        flushed_file = root / "flushed"
        flushed = int(flushed_file.read_text()) if flushed_file.exists() else 0
        log = Log.open(str(part), LogConfig.from_properties({"segment.bytes": 16384}),
                       recovery_point=flushed if trial % 2 else 0)
        assert log.log_end_offset >= flushed, f"trial {trial}: lost flushed data"
        offset = 0
        while offset < log.log_end_offset:
            batch = batch_at(bytes(log.read(offset, 1).records))
            for r in batch:
                assert r.offset == offset
                _check_record(offset, r.value)
                offset += 1
        assert offset == log.log_end_offset
        log.close()
        report = verify_log_dir(str(part))
        assert report.ok, report.render(verbose=True)


def test_make_batch_helper_sanity():
    b = make_batch([b"a"], base_offset=5)
    assert parse_batches(b)[0].crc_ok and batch_at(b).base_offset == 5


@pytest.mark.parametrize("extra", [None, "00000000000000000000.timeindex.deleted",
                                   "00000000000000000099.index"])
def test_loader_listing_serves_the_snapshot_cleanup_only_while_current(env, extra):
    """The producer state's stray-snapshot step takes the loader's listing when it is current
    (none, or a temp file removed before the segments are listed again), and lists again when
    a removal came after it (an orphan index): either way a leftover ``.snapshot.tmp`` and the
    extra file are gone after the load, and the snapshot at the log end is the only one."""
    from replica_core.storage.loader import LogLoader
    from replica_core.storage.segment import LogSegments

    _write_log(env, batches=3)
    medium, d = env[0], _dir(env)

    def damage():
        _rewrite(env, "00000000000000000001.snapshot.tmp", b"half")
        if extra is not None:
            _rewrite(env, extra, b"")

    damage()
    loader = LogLoader(d, SMALL, medium, ManualClock(T0), LogSegments())
    loader.load()
    names = loader.file_names
    if extra is not None and extra.endswith(".index"):
        assert names is None  # removed after the listing the segments were opened from
    else:
        assert names == [n for n in medium.listdir(d) if not medium.is_dir(os.path.join(d, n))]
        assert "00000000000000000001.snapshot.tmp" in names
    damage()  # again, for Log.open's own load
    log = _open(env)
    assert log.log_end_offset == 6  # 3 batches of 2 records
    left = medium.listdir(d)
    assert not [n for n in left if n.endswith(".tmp") or n == extra]
    assert [n for n in left if n.endswith(".snapshot")] == ["00000000000000000006.snapshot"]
    _check_readable(log)
    log.close()
