"""The leader epoch cache (§4.3 endOffsetFor, §4.4 cache rules) and its checkpoint writes."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replica_core.storage.checkpoint import LeaderEpochCheckpointFile
from replica_core.storage.leader_epoch import LeaderEpochCache
from replica_core.storage.medium import MemoryMedium


class CountingCheckpoint:
    """A checkpoint double that records every write."""

    def __init__(self, entries=()):
        self.entries = list(entries)
        self.writes: list[list[tuple[int, int]]] = []
        self.async_writes: list[list[tuple[int, int]]] = []

    def read(self):
        return list(self.entries)

    def write(self, entries):
        self.writes.append(list(entries))

    def write_if_dir_exists(self, entries):
        self.async_writes.append(list(entries))
        return True


@pytest.fixture
def disk():
    m = MemoryMedium()
    m.makedirs("/t-0")
    return m, LeaderEpochCheckpointFile(m, "/t-0/leader-epoch-checkpoint")


def cache_of(*entries):
    c = LeaderEpochCache(None)
    for e, s in entries:
        c.assign(e, s)
    return c


# --- assign (§4.4) ----------------------------------------------------------------------------
def test_empty_cache():
    c = LeaderEpochCache()
    assert c.is_empty and not c.non_empty and len(c) == 0
    assert c.latest_epoch == -1
    assert c.latest_entry is None and c.earliest_entry is None
    assert c.entries() == []
    assert c.epoch_for_offset(5) is None


def test_assign_appends_and_writes_checkpoint_synchronously(disk):
    m, cp = disk
    c = LeaderEpochCache(cp)
    assert c.assign(0, 0) is True
    assert m.read_bytes(cp.path) == b"0\n1\n0 0\n"
    c.assign(2, 10)
    assert m.read_bytes(cp.path) == b"0\n2\n0 0\n2 10\n"
    assert c.latest_epoch == 2 and c.latest_entry == (2, 10) and c.earliest_entry == (0, 0)
    m.crash("power")  # written atomically, so it survives
    assert LeaderEpochCheckpointFile(m, cp.path).read() == [(0, 0), (2, 10)]


def test_same_epoch_at_higher_offset_is_not_an_update():
    cp = CountingCheckpoint()
    c = LeaderEpochCache(cp)
    c.assign(3, 100)
    assert c.assign(3, 150) is False
    assert c.assign(3, 100) is False
    assert c.entries() == [(3, 100)]
    assert cp.writes == [[(3, 100)]]


def test_same_epoch_at_lower_offset_replaces_it():
    c = cache_of((1, 0), (3, 100))
    assert c.assign(3, 50) is True
    assert c.entries() == [(1, 0), (3, 50)]


def test_lower_epoch_removes_every_later_epoch():
    c = cache_of((1, 0), (3, 10), (5, 20))
    c.assign(2, 30)
    assert c.entries() == [(1, 0), (2, 30)]


def test_higher_epoch_at_lower_offset_removes_conflicting_offsets():
    c = cache_of((1, 0), (3, 10), (5, 20))
    c.assign(6, 10)
    assert c.entries() == [(1, 0), (6, 10)]
    c.assign(7, 5)
    assert c.entries() == [(1, 0), (7, 5)]


def test_new_epoch_at_the_latest_start_offset_replaces_it():
    """A leader elected twice before any write: the earlier epoch has no offsets at all."""
    c = cache_of((1, 0), (2, 40))
    c.assign(3, 40)
    assert c.entries() == [(1, 0), (3, 40)]


def test_negative_epoch_or_offset_rejected():
    c = LeaderEpochCache()
    with pytest.raises(ValueError):
        c.assign(-1, 0)
    with pytest.raises(ValueError):
        c.assign(0, -1)
    assert c.is_empty


def test_assign_all_writes_once():
    cp = CountingCheckpoint()
    c = LeaderEpochCache(cp)
    c.assign_all([(1, 0), (2, 5), (4, 9)])
    assert cp.writes == [[(1, 0), (2, 5), (4, 9)]]
    c.assign_all([])
    assert len(cp.writes) == 1


def test_loading_applies_assign_rules_without_rewriting():
    cp = CountingCheckpoint([(1, 0), (2, 10), (3, 10), (2, 30)])
    c = LeaderEpochCache(cp)
    assert c.entries() == [(1, 0), (2, 30)]
    assert cp.writes == []


def test_loading_from_a_real_checkpoint_file(disk):
    m, cp = disk
    m.write_atomic(cp.path, b"0\n3\n1 0\n2 298\n3 354\n")
    c = LeaderEpochCache(LeaderEpochCheckpointFile(m, cp.path))
    assert c.entries() == [(1, 0), (2, 298), (3, 354)]


# --- end_offset_for (§4.3) --------------------------------------------------------------------
@pytest.mark.parametrize("requested,expected", [
    (-1, (-1, -1)),      # undefined epoch
    (6, (6, 500)),       # the latest epoch: LEO
    (7, (-1, -1)),       # above everything cached
    (0, (0, 10)),        # below everything cached: start of the first entry
    (1, (1, 20)),        # cached: start of the next epoch
    (2, (1, 20)),        # not cached, between: largest epoch below, start of the next above
    (4, (3, 40)),
    (5, (5, 60)),
])
def test_end_offset_for(requested, expected):
    c = cache_of((1, 10), (3, 20), (5, 40), (6, 60))
    assert c.end_offset_for(requested, 500) == expected


def test_end_offset_for_empty_cache():
    assert LeaderEpochCache().end_offset_for(3, 100) == (-1, -1)
    assert LeaderEpochCache().end_offset_for(-1, 100) == (-1, -1)


# --- truncation (§4.4) ------------------------------------------------------------------------
def test_truncate_from_end_removes_entries_at_or_after_offset():
    cp = CountingCheckpoint()
    c = LeaderEpochCache(cp)
    c.assign_all([(1, 0), (2, 10), (3, 20)])
    c.truncate_from_end(10)
    assert c.entries() == [(1, 0)]
    assert cp.async_writes == [[(1, 0)]]


def test_truncate_from_end_noops():
    cp = CountingCheckpoint()
    c = LeaderEpochCache(cp)
    c.assign_all([(1, 0), (2, 10), (3, 20)])
    c.truncate_from_end(21)  # latest start below the end: nothing to do
    c.truncate_from_end(-1)  # undefined offset
    assert c.entries() == [(1, 0), (2, 10), (3, 20)]
    assert cp.async_writes == []
    LeaderEpochCache().truncate_from_end(0)


def test_epoch_entry_written_at_election_is_pruned_by_truncation_to_leo():
    """§11.3: the new epoch is cached at start = LEO before any record; truncateTo(LEO) prunes it."""
    c = cache_of((1, 0), (2, 100))
    c.truncate_from_end(100)
    assert c.entries() == [(1, 0)]


@pytest.mark.parametrize("start,expected", [
    (15, [(2, 15), (3, 20)]),          # the spec's example
    (20, [(3, 20)]),
    (10, [(2, 10), (3, 20)]),
    (0, [(1, 0), (2, 10), (3, 20)]),
    (25, [(3, 25)]),
])
def test_truncate_from_start(start, expected):
    cp = CountingCheckpoint()
    c = LeaderEpochCache(cp)
    c.assign_all([(1, 0), (2, 10), (3, 20)])
    c.truncate_from_start(start)
    assert c.entries() == expected
    assert cp.async_writes == [expected]


def test_truncate_from_start_before_first_entry_is_a_noop():
    cp = CountingCheckpoint()
    c = LeaderEpochCache(cp)
    c.assign_all([(1, 5), (2, 10)])
    c.truncate_from_start(4)
    assert c.entries() == [(1, 5), (2, 10)]
    assert cp.async_writes == []


def test_truncation_checkpoint_is_written_before_returning(disk):
    m, cp = disk
    c = LeaderEpochCache(cp)
    c.assign_all([(1, 0), (2, 10), (3, 20)])
    c.truncate_from_end(20)
    assert cp.read() == [(1, 0), (2, 10)]
    c.truncate_from_start(12)
    assert cp.read() == [(2, 12)]


def test_truncation_write_tolerates_a_deleted_partition_dir(disk):
    m, cp = disk
    c = LeaderEpochCache(cp)
    c.assign_all([(1, 0), (2, 10)])
    m.rmtree("/t-0")
    c.truncate_from_end(10)
    assert c.entries() == [(1, 0)]


def test_clear_and_flush(disk):
    m, cp = disk
    c = LeaderEpochCache(cp)
    c.assign(4, 7)
    c.clear_and_flush()
    assert c.is_empty
    assert m.read_bytes(cp.path) == b"0\n0\n"


def test_clear_does_not_write():
    cp = CountingCheckpoint()
    c = LeaderEpochCache(cp)
    c.assign(1, 1)
    c.clear()
    assert c.is_empty and len(cp.writes) == 1


# --- queries ----------------------------------------------------------------------------------
def test_epoch_for_offset():
    c = cache_of((1, 10), (3, 20), (5, 40))
    assert c.epoch_for_offset(9) is None
    assert c.epoch_for_offset(10) == 1
    assert c.epoch_for_offset(19) == 1
    assert c.epoch_for_offset(20) == 3
    assert c.epoch_for_offset(10**12) == 5


def test_neighbouring_epochs():
    c = cache_of((1, 10), (3, 20), (5, 40))
    assert c.previous_epoch() == 3
    assert c.previous_epoch(3) == 1 and c.previous_epoch(4) == 3 and c.previous_epoch(1) is None
    assert c.next_epoch(1) == 3 and c.next_epoch(2) == 3 and c.next_epoch(5) is None
    assert c.epoch_entry(3) == (3, 20) and c.epoch_entry(2) is None
    assert c.previous_entry(5) == (3, 20) and c.previous_entry(1) is None
    assert LeaderEpochCache().previous_epoch() is None


def test_epoch_entries_in_range_leaves_cache_alone():
    c = cache_of((1, 0), (2, 10), (3, 20))
    assert c.epoch_entries_in_range(5, 20) == [(1, 5), (2, 10)]
    assert c.epoch_entries_in_range(-1, 15) == [(1, 0), (2, 10)]
    assert c.entries() == [(1, 0), (2, 10), (3, 20)]


# --- model check ------------------------------------------------------------------------------
def reference_assign(entries, epoch, start):
    """§4.4 written out over a plain list."""
    if entries and entries[-1][0] == epoch and start >= entries[-1][1]:
        return entries
    while entries and (entries[-1][0] >= epoch or entries[-1][1] >= start):
        entries = entries[:-1]
    return entries + [(epoch, start)]


ops = st.lists(st.one_of(
    st.tuples(st.just("assign"), st.integers(0, 12), st.integers(0, 200)),
    st.tuples(st.just("end"), st.integers(-1, 220), st.just(0)),
    st.tuples(st.just("start"), st.integers(0, 220), st.just(0)),
), max_size=40)


@settings(max_examples=200, deadline=None)
@given(ops)
def test_random_operations_match_the_rules(operations):
    c = LeaderEpochCache()
    model: list[tuple[int, int]] = []
    for op, a, b in operations:
        if op == "assign":
            c.assign(a, b)
            model = reference_assign(model, a, b)
        elif op == "end":
            if a >= 0 and model and model[-1][1] >= a:
                model = [e for e in model if e[1] < a]
            c.truncate_from_end(a)
        else:
            removed = [e for e in model if e[1] <= a]
            if removed:
                model = [(removed[-1][0], a)] + [e for e in model if e[1] > a]
            c.truncate_from_start(a)
        assert c.entries() == model
        epochs = [e for e, _ in model]
        starts = [s for _, s in model]
        assert epochs == sorted(set(epochs)) and starts == sorted(set(starts))


def test_first_assign_writes_the_one_entry_checkpoint():
    """The empty cache's first epoch (a follower's first batch) is written as one entry; a
    second epoch rewrites both lines; an epoch the cache holds writes nothing; a negative one
    is refused before anything changes."""
    medium = MemoryMedium()
    medium.makedirs("/d/t-0")
    path = "/d/t-0/leader-epoch-checkpoint"
    c = LeaderEpochCache(LeaderEpochCheckpointFile(medium, path))
    with pytest.raises(ValueError):
        c.assign(-1, 0)
    with pytest.raises(ValueError):
        c.assign(0, -3)
    assert c.entries() == [] and medium.read_bytes(path) == b""
    assert c.assign(7, 120) is True
    assert medium.read_bytes(path) == b"0\n1\n7 120\n"
    assert medium.durable_bytes(path) == b"0\n1\n7 120\n"  # written atomically, flushed
    assert c.assign(7, 500) is False
    assert c.assign(9, 300) is True
    assert medium.read_bytes(path) == b"0\n2\n7 120\n9 300\n"
    # a numpy integer (from a header matrix) takes the general rules: the same file
    d = LeaderEpochCache(LeaderEpochCheckpointFile(medium, "/d/t-0/other"))
    assert d.assign(np.int64(7), np.int64(120)) is True
    assert medium.read_bytes("/d/t-0/other") == b"0\n1\n7 120\n"


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(
    st.tuples(st.just("assign"), st.integers(0, 12), st.integers(0, 200)),
    st.tuples(st.just("assign_np"), st.integers(0, 12), st.integers(0, 200)),
    st.tuples(st.just("end"), st.integers(-1, 220), st.just(0)),
    st.tuples(st.just("start"), st.integers(0, 220), st.just(0)),
    st.tuples(st.just("clear"), st.just(0), st.just(0)),
), max_size=30))
def test_latest_epoch_is_kept_on_the_cache_and_on_its_log(operations):
    """``latest_epoch`` is a plain attribute of the cache and of the log holding it (the
    cache's mirror): after every kind of change both are the last entry's epoch, an int, or
    -1 when the cache is empty; a cache read back from the checkpoint says the same."""
    from replica_core.clock import ManualClock
    from replica_core.storage.config import LogConfig
    from replica_core.storage.log import Log

    medium = MemoryMedium()
    medium.makedirs("/d")
    log = Log.open("/d/t-0", LogConfig(), medium=medium, clock=ManualClock(0))
    c = log.leader_epoch_cache
    assert c.latest_epoch == log.latest_epoch == -1
    for op, a, b in operations:
        if op == "assign":
            c.assign(a, b)
        elif op == "assign_np":
            c.assign(np.int64(a), np.int64(b))
        elif op == "end":
            c.truncate_from_end(a)
        elif op == "start":
            c.truncate_from_start(a)
        else:
            c.clear_and_flush()
        entries = c.entries()
        expected = entries[-1][0] if entries else -1
        assert type(c.latest_epoch) is int and c.latest_epoch == expected
        assert type(log.latest_epoch) is int and log.latest_epoch == expected
    reread = LeaderEpochCache(LeaderEpochCheckpointFile(medium, "/d/t-0/leader-epoch-checkpoint"))
    assert reread.latest_epoch == c.latest_epoch
