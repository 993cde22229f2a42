"""Columnar leader-side replication state (KAFKA_SEMANTICS §6.1-§6.6): Kafka's rules, each with a
test that fails if the rule is dropped, run against the native kernel and its plain twin; then
native ⟷ twin parity on random states."""
from __future__ import annotations

import importlib
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replica_core.replication import IsrState, ReplicaStateTable
from replica_core.replication.state import (
    FETCH_EXPAND,
    FETCH_HW_MOVED,
    FETCH_LEO_CHANGED,
    NO_BROKER_EPOCH,
    UNKNOWN_OFFSET,
)

T0 = 1_700_000_000_000  # the clock starts far from zero: lastCaughtUpTimeMs 0 is then "long ago"
LAG = 30_000  # replica.lag.time.max.ms

NATIVE_MODULE = "replica_core._fast._replica_state"


def kernel_module(impl: str):
    """The compiled module or its twin; a missing native build fails loudly (conftest rule)."""
    name = "_replica_state" if impl == "native" else "replica_state_py"
    return importlib.import_module(f"replica_core._fast.{name}")


def make_table(impl: str, **kw) -> ReplicaStateTable:
    table = ReplicaStateTable(1, pure=(impl == "twin"), **kw)
    native = type(table.kernels).__module__ == NATIVE_MODULE
    if native != (impl == "native"):
        pytest.fail(f"wanted the {impl} kernel, got {type(table.kernels).__module__}")
    return table


@pytest.fixture
def table(kernel_impl: str) -> ReplicaStateTable:
    return make_table(kernel_impl, capacity=4)


def lead(table: ReplicaStateTable, *, replicas=(1, 2, 3), isr=(1, 2, 3), leo=10, hw=0,
         min_isr=1, now=T0, eligible=None) -> int:
    return table.add_partition(list(replicas), list(isr), leader_epoch=7, now_ms=now,
                               leader_leo=leo, hw=hw, min_isr=min_isr, eligible=eligible)


def fetch(table, p, broker, offset, now, leader_end=None) -> bool:
    r = table.slot(p, broker)
    end = int(table.leader_leo[p]) if leader_end is None else leader_end
    return table.update_follower_fetch(p, r, offset, 0, now, end)


def follower(table, p, broker):
    return table.partition(p).replica(broker)


# ---- §6.1 becoming leader ---------------------------------------------------------------------
def test_new_leader_resets_followers_and_keeps_hw(table):
    p = lead(table, isr=(1, 2), leo=10, hw=4)
    f2, f3 = follower(table, p, 2), follower(table, p, 3)
    assert (f2.log_end_offset, f2.log_start_offset, f2.last_fetch_leader_log_end_offset) == (
        UNKNOWN_OFFSET, UNKNOWN_OFFSET, UNKNOWN_OFFSET)
    assert f2.last_fetch_time_ms == 0 and f2.broker_epoch == NO_BROKER_EPOCH
    assert f2.last_caught_up_time_ms == T0  # in the ISR
    assert f3.last_caught_up_time_ms == 0  # not in the ISR
    view = table.partition(p)
    assert view.hw == 4 and view.epoch_start_offset == 10 and view.leader_epoch == 7
    # Followers with unknown LEO (-1) freeze the HW until they fetch (§6.1, rule 11.7).
    assert not table.maybe_increment_hw(p, T0)
    assert table.hw[p] == 4


def test_reelected_leader_keeps_follower_offsets(table):
    p = lead(table, isr=(1, 2), leo=10)
    fetch(table, p, 2, 10, T0 + 5)
    fetch(table, p, 3, 6, T0 + 5)
    table.leader_leo[p] = 12
    table.start_leader_epoch(p, 8, T0 + 100, new_leader=False)
    f2, f3 = follower(table, p, 2), follower(table, p, 3)
    assert f2.log_end_offset == 10 and f3.log_end_offset == 6
    assert f2.last_fetch_leader_log_end_offset == 12 == table.epoch_start_offset[p]
    assert (f2.last_fetch_time_ms, f2.last_caught_up_time_ms) == (T0 + 100, T0 + 100)
    assert (f3.last_fetch_time_ms, f3.last_caught_up_time_ms) == (0, 0)


# ---- §6.2 lastCaughtUpTimeMs ------------------------------------------------------------------
def test_caught_up_to_leader_end_sets_fetch_time(table):
    p = lead(table, leo=10)
    assert fetch(table, p, 2, 10, T0 + 50)  # LEO changed from -1
    f = follower(table, p, 2)
    assert f.last_caught_up_time_ms == T0 + 50
    assert (f.log_end_offset, f.last_fetch_time_ms, f.last_fetch_leader_log_end_offset) == (
        10, T0 + 50, 10)


def test_caught_up_to_previous_fetch_sets_previous_fetch_time(table):
    """Behind the leader now, but at or past what the leader had at the previous fetch: the
    follower was caught up as of the PREVIOUS fetch time, not now, and not unchanged."""
    p = lead(table, isr=(1, 2), leo=10)
    fetch(table, p, 2, 4, T0 + 100, leader_end=10)  # behind; lastFetchLeaderLEO := 10
    table.leader_leo[p] = 15
    fetch(table, p, 2, 10, T0 + 700, leader_end=15)  # reached 10, leader now at 15
    f = follower(table, p, 2)
    assert f.last_caught_up_time_ms == T0 + 100
    assert f.last_fetch_leader_log_end_offset == 15 and f.last_fetch_time_ms == T0 + 700


def test_behind_previous_fetch_leaves_last_caught_up(table):
    p = lead(table, isr=(1, 2), leo=10)
    fetch(table, p, 2, 4, T0 + 100, leader_end=10)
    before = follower(table, p, 2).last_caught_up_time_ms
    fetch(table, p, 2, 9, T0 + 700, leader_end=15)  # 9 < previous leader end 10
    assert follower(table, p, 2).last_caught_up_time_ms == before == T0


def test_last_caught_up_never_decreases(table):
    p = lead(table, isr=(1, 2), leo=10)  # lastCaughtUp = T0, lastFetchTime = 0
    fetch(table, p, 2, 3, T0 + 10, leader_end=10)  # branch 2 with previous fetch time 0
    assert follower(table, p, 2).last_caught_up_time_ms == T0


def test_last_fetch_leader_leo_is_a_max_and_leo_change_reported(table):
    p = lead(table, leo=10)
    fetch(table, p, 2, 4, T0 + 1, leader_end=10)
    assert not fetch(table, p, 2, 4, T0 + 2, leader_end=8)  # same LEO, lower leader end
    assert follower(table, p, 2).last_fetch_leader_log_end_offset == 10


def test_fetch_updates_log_start_offset_and_broker_epoch(table):
    p = lead(table)
    r = table.slot(p, 3)
    table.update_follower_fetch(p, r, 5, 2, T0, 10, broker_epoch=44)
    f = follower(table, p, 3)
    assert (f.log_start_offset, f.broker_epoch) == (2, 44)


def test_fetch_on_bad_slot_raises(table):
    p = lead(table)
    for r in (0, 3, -1):  # the leader's own slot, padding, negative
        with pytest.raises(IndexError):
            table.update_follower_fetch(p, r, 1, 0, T0, 10)
    with pytest.raises(IndexError):
        table.update_follower_fetch(3, 1, 1, 0, T0, 10)  # never-added index


# ---- §6.3 isCaughtUp / §6.6 shrink ------------------------------------------------------------
def test_shrink_only_after_lag_time(table):
    p = lead(table, leo=10)
    fetch(table, p, 2, 10, T0)
    fetch(table, p, 3, 10, T0)
    table.leader_leo[p] = 20  # followers stop fetching
    assert table.out_of_sync_replicas(p, T0 + LAG) == []
    assert table.is_caught_up(p, 1, T0 + LAG)
    assert table.out_of_sync_replicas(p, T0 + LAG + 1) == [2, 3]
    assert not table.is_caught_up(p, 1, T0 + LAG + 1)
    ps, rs = table.out_of_sync_all(T0 + LAG + 1)
    assert list(zip(ps.tolist(), rs.tolist(), strict=True)) == [(p, 1), (p, 2)]


def test_follower_at_leader_leo_is_never_out_of_sync(table):
    p = lead(table, leo=10)
    fetch(table, p, 2, 10, T0)
    assert table.out_of_sync_replicas(p, T0 + 10 * LAG) == [3]  # 3 never fetched


def test_no_shrink_while_alter_partition_in_flight(table):
    p = lead(table, leo=10)
    table.prepare_isr_expand(p, 1)
    assert table.out_of_sync_replicas(p, T0 + 10 * LAG) == []
    assert table.out_of_sync_all(T0 + 10 * LAG)[0].size == 0
    table.revert_isr(p)
    assert table.out_of_sync_replicas(p, T0 + 10 * LAG) == [2, 3]


def test_one_alter_partition_in_flight_at_a_time(table):
    """A pending expand or shrink refuses a second proposal until committed or reverted."""
    p = lead(table, isr=(1, 2), leo=10)
    r2, r3 = table.slot(p, 2), table.slot(p, 3)
    table.prepare_isr_expand(p, r3)
    assert table.isr_state[p] == 1  # PendingExpandIsr
    with pytest.raises(ValueError, match="in flight"):
        table.prepare_isr_expand(p, r3)
    with pytest.raises(ValueError, match="in flight"):
        table.prepare_isr_shrink(p, [r2])
    table.revert_isr(p)
    table.prepare_isr_shrink(p, [r2])
    assert table.isr_state[p] == 2  # PendingShrinkIsr
    with pytest.raises(ValueError, match="in flight"):
        table.prepare_isr_expand(p, r3)
    table.commit_isr(p, [1, 2])
    table.prepare_isr_expand(p, r3)
    assert table.isr_state[p] == IsrState.PENDING_EXPAND


def test_only_isr_members_are_out_of_sync(table):
    p = lead(table, isr=(1, 2), leo=10)
    assert table.out_of_sync_replicas(p, T0 + LAG + 1) == [2]


def test_lag_window_is_the_table_setting(kernel_impl):
    table = make_table(kernel_impl, replica_lag_time_max_ms=1000)
    p = lead(table, leo=10)
    assert table.out_of_sync_replicas(p, T0 + 1001) == [2, 3]


# ---- §6.4 HW ----------------------------------------------------------------------------------
def test_hw_is_min_over_isr(table):
    p = lead(table, leo=10)
    fetch(table, p, 2, 10, T0 + 1)
    fetch(table, p, 3, 7, T0 + 1)
    assert table.hw_candidate(p, T0 + 1) == 7
    assert table.maybe_increment_hw(p, T0 + 1) and table.hw[p] == 7
    fetch(table, p, 3, 10, T0 + 2)
    assert table.maybe_increment_hw(p, T0 + 2) and table.hw[p] == 10


def test_hw_held_back_by_caught_up_follower_outside_isr(table):
    p = lead(table, isr=(1, 2), leo=10)
    fetch(table, p, 2, 10, T0 + 1)
    fetch(table, p, 3, 5, T0 + 1, leader_end=5)  # caught up (to what the leader had) at T0+1
    assert table.is_caught_up(p, 2, T0 + 2)
    assert table.hw_candidate(p, T0 + 2) == 5
    # Once it is no longer caught up it stops holding the HW.
    assert table.hw_candidate(p, T0 + 1 + LAG + 1) == 10


def test_hw_not_held_back_by_ineligible_follower(table):
    p = lead(table, isr=(1, 2), leo=10, eligible=[2])  # 3 is fenced / shutting down
    fetch(table, p, 2, 10, T0 + 1)
    fetch(table, p, 3, 5, T0 + 1, leader_end=5)
    assert table.is_caught_up(p, 2, T0 + 2)
    assert table.hw_candidate(p, T0 + 2) == 10
    follower(table, p, 3).eligible = True
    assert table.hw_candidate(p, T0 + 2) == 5


def test_hw_never_decreases(table):
    p = lead(table, leo=10, hw=8)
    fetch(table, p, 2, 10, T0)
    fetch(table, p, 3, 5, T0)
    assert table.hw_candidate(p, T0) == 8
    assert not table.maybe_increment_hw(p, T0)
    assert table.hw[p] == 8
    assert table.maybe_increment_all_hw(T0).size == 0 and table.hw[p] == 8


def test_no_hw_advance_under_min_isr(table):
    p = lead(table, isr=(1,), leo=10, min_isr=2)
    fetch(table, p, 2, 10, T0)
    fetch(table, p, 3, 10, T0)
    assert table.is_under_min_isr(p)
    assert table.hw_candidate(p, T0) == 0
    assert not table.maybe_increment_hw(p, T0)
    assert table.maybe_increment_all_hw(T0).size == 0
    table.commit_isr(p, [1, 2])
    assert table.maybe_increment_hw(p, T0) and table.hw[p] == 10


def test_effective_min_isr_is_capped_by_assignment(table):
    p = lead(table, replicas=(1, 2), isr=(1, 2), leo=10, min_isr=3)
    fetch(table, p, 2, 10, T0)
    assert table.effective_min_isr(p) == 2
    assert table.maybe_increment_hw(p, T0) and table.hw[p] == 10


def test_pending_expansion_holds_hw_and_pending_shrink_keeps_old_isr(table):
    p = lead(table, isr=(1, 2), leo=10)
    fetch(table, p, 2, 10, T0)
    fetch(table, p, 3, 6, T0 - 2 * LAG, leader_end=6)  # caught up long ago: does not hold HW
    assert table.hw_candidate(p, T0) == 10
    table.prepare_isr_expand(p, 2)  # maximal ISR now includes 3
    assert table.partition(p).maximal_isr == [1, 2, 3] and table.isr(p) == [1, 2]
    assert table.maximal_isr_size(p) == 3 and not table.is_under_min_isr(p)
    assert table.hw_candidate(p, T0) == 6
    table.commit_isr(p, [1, 2, 3])
    assert table.partition(p).isr_state is IsrState.COMMITTED
    table.prepare_isr_shrink(p, [2])
    assert table.hw_candidate(p, T0) == 6  # 3 still in the maximal ISR until committed
    assert table.maximal_isr_size(p) == 3
    table.commit_isr(p, [1, 2])
    assert table.maximal_isr_size(p) == 2 and table.slot(p, 3) == 2 and table.slot(p, 9) == -1
    assert table.hw_candidate(p, T0) == 10


def test_hw_all_and_fused_pass_match_single_calls(table):
    ps = [lead(table, leo=10 + i, hw=0) for i in range(6)]
    for i, p in enumerate(ps):
        fetch(table, p, 2, 10 + i, T0)
        fetch(table, p, 3, 5 + i if i % 2 else 10 + i, T0 - 2 * LAG, leader_end=5 + i)
    table.remove_partition(ps[3])
    now = T0 + 1
    expected = {p: table.hw_candidate(p, now) for p in table.partitions().tolist()}
    expected_oos = sorted((p, r) for p in expected for r in table.out_of_sync_slots(p, now))
    hws, changed = table.hw_candidates(now)
    assert {p: int(hws[p]) for p in expected} == expected
    moved, oos_p, oos_r = table.maybe_increment_all_hw_and_out_of_sync(now)
    assert sorted(moved.tolist()) == sorted(p for p in expected if expected[p] > 0)
    assert changed[moved].all() and changed.sum() == len(moved)
    assert sorted(zip(oos_p.tolist(), oos_r.tolist(), strict=True)) == expected_oos
    assert {p: int(table.hw[p]) for p in expected} == expected


# ---- §6.5 ISR expansion -----------------------------------------------------------------------
@pytest.mark.parametrize(("leo", "hw", "epoch_start", "ok"), [
    (10, 8, 10, True),
    (9, 8, 10, False),  # LEO ≥ HW but below the current epoch's start (KAFKA-7128)
    (7, 8, 5, False),  # reached the epoch but below the HW
    (8, 8, 8, True),  # both bounds are inclusive
])
def test_expansion_needs_hw_and_epoch_start(table, leo, hw, epoch_start, ok):
    p = lead(table, isr=(1, 2), leo=epoch_start, hw=0)
    table.leader_leo[p] = max(leo, hw, epoch_start) + 5
    table.hw[p] = hw
    fetch(table, p, 3, leo, T0)
    assert table.can_expand_isr(p, 2) is ok
    ps, rs = table.expand_candidates_all()
    assert list(zip(ps.tolist(), rs.tolist(), strict=True)) == ([(p, 2)] if ok else [])


def test_expansion_needs_eligible_committed_and_not_in_isr(table):
    p = lead(table, isr=(1, 2), leo=10, hw=10, eligible=[2])
    fetch(table, p, 2, 10, T0)
    fetch(table, p, 3, 10, T0)
    assert not table.can_expand_isr(p, 1)  # already in the ISR
    assert not table.can_expand_isr(p, 2)  # ineligible
    follower(table, p, 3).eligible = True
    assert table.can_expand_isr(p, 2)
    table.prepare_isr_shrink(p, [1])
    assert not table.can_expand_isr(p, 2)  # AlterPartition in flight


def test_fused_fetch_moves_hw_unless_the_follower_may_join_the_isr(table, kernel_impl):
    flags = kernel_module(kernel_impl)
    leo_changed, expand, hw_moved = (flags.FETCH_LEO_CHANGED, flags.FETCH_EXPAND,
                                     flags.FETCH_HW_MOVED)
    # the table's callers read the flags from replication.state
    assert (leo_changed, expand, hw_moved) == (FETCH_LEO_CHANGED, FETCH_EXPAND, FETCH_HW_MOVED)
    assert len({leo_changed, expand, hw_moved}) == 3
    k = table.kernels
    p = lead(table, isr=(1, 2), leo=10, hw=0)
    r2, r3 = table.slot(p, 2), table.slot(p, 3)
    # ISR follower 2 reaches the leader's LEO; follower 3 (outside, never caught up) does not
    # hold the HW back
    assert k.follower_fetch_hw(p, r2, 10, 0, T0 + 1, 10, 5, LAG) == leo_changed | hw_moved
    assert table.hw[p] == 10 and follower(table, p, 2).broker_epoch == 5
    assert k.follower_fetch_hw(p, r2, 10, 0, T0 + 2, 10, 5, LAG) == 0  # nothing moved
    # follower 3 may join now: the HW is left to the caller (which proposes the expansion first)
    table.leader_leo[p] = 12
    assert k.follower_fetch_hw(p, r3, 11, 0, T0 + 3, 12, 5, LAG) == leo_changed | expand
    assert table.hw[p] == 10
    table.prepare_isr_expand(p, r3)  # pending: 3 is in the maximal ISR, so it holds the HW
    assert k.follower_fetch_hw(p, r2, 12, 0, T0 + 4, 12, 5, LAG) == leo_changed | hw_moved
    assert table.hw[p] == 11
    with pytest.raises(IndexError):
        k.follower_fetch_hw(p, 0, 12, 0, T0 + 5, 12, 5, LAG)  # slot 0 is the leader
    # the same checks for a fetch applied on its own (the multi-partition path)
    table.leader_leo[p] = 14
    assert table.update_follower_fetch(p, r2, 14, 0, T0 + 5, 14)
    assert k.expand_or_hw(p, r2, False, T0 + 5, LAG) == 0  # LEO not moved: no HW attempt
    assert table.hw[p] == 11
    assert k.expand_or_hw(p, r2, True, T0 + 5, LAG) == leo_changed  # 3 (at 11) holds the HW
    table.commit_isr(p, [1, 2, 3])
    assert table.update_follower_fetch(p, r3, 14, 0, T0 + 6, 14)
    assert k.expand_or_hw(p, r3, True, T0 + 6, LAG) == leo_changed | hw_moved
    assert table.hw[p] == 14
    with pytest.raises(IndexError):
        k.expand_or_hw(p, 3, True, T0 + 6, LAG)  # no slot 3 with three replicas


def test_isr_sizes_and_the_produce_completion_check(table):
    k = table.kernels
    p = lead(table, isr=(1, 2), leo=10, hw=4)
    assert (k.isr_size(p), k.maximal_isr_size(p)) == (2, 2)
    table.prepare_isr_expand(p, table.slot(p, 3))
    assert (k.isr_size(p), k.maximal_isr_size(p)) == (2, 3)
    assert k.reached_isr_size(p, 5) == -1  # HW 4 below the required offset
    assert k.reached_isr_size(p, 4) == 3
    table.remove_partition(p)
    for method, args in (("isr_size", ()), ("maximal_isr_size", ()), ("reached_isr_size", (0,))):
        with pytest.raises(IndexError):
            getattr(k, method)(p, *args)


# ---- table bookkeeping --------------------------------------------------------------------------
def test_growth_keeps_state_and_views(kernel_impl):
    table = make_table(kernel_impl, capacity=2, max_replicas=2)
    p0 = lead(table, replicas=(1, 2), isr=(1, 2), leo=10)
    view = table.partition(p0)
    fetch(table, p0, 2, 9, T0 + 3)
    ps = [lead(table, leo=20) for _ in range(5)]  # grows partitions and replica slots
    assert table.capacity >= 6 and table.max_replicas == 3 and len(table) == 6
    assert view.replica(2).log_end_offset == 9 and view.replicas == [1, 2]
    assert table.replicas(ps[0]) == [1, 2, 3]
    fetch(table, p0, 2, 10, T0 + 4)  # the rebuilt kernel writes the new columns
    assert view.replica(2).log_end_offset == 10


def test_remove_and_reuse_lowest_index(table):
    ps = [lead(table) for _ in range(4)]
    table.remove_partition(ps[2])
    table.remove_partition(ps[1])
    assert ps[1] not in table and len(table) == 2
    with pytest.raises(IndexError):
        table.hw_candidate(ps[1], T0)
    assert lead(table, replicas=(3, 1), isr=(1, 3)) == ps[1]
    assert table.replicas(ps[1]) == [1, 3]
    assert table.partitions().tolist() == [ps[0], ps[1], ps[3]]


def test_set_assignment_keeps_fetch_state_of_retained_followers(table):
    p = lead(table, leo=10)
    fetch(table, p, 3, 7, T0 + 1)
    table.set_assignment(p, [4, 1, 3], [1, 3])
    assert table.replicas(p) == [1, 4, 3] and table.isr(p) == [1, 3]
    assert follower(table, p, 3).log_end_offset == 7
    assert follower(table, p, 4).log_end_offset == UNKNOWN_OFFSET
    with pytest.raises(KeyError):
        follower(table, p, 2)


def test_assignment_validation(table):
    with pytest.raises(ValueError):
        lead(table, replicas=(2, 3), isr=(2,))  # this broker must lead
    with pytest.raises(ValueError):
        lead(table, replicas=(1, 2), isr=(1, 3))
    with pytest.raises(ValueError):
        lead(table, leo=5, hw=6)


def test_batch_fetch_matches_single_fetches(kernel_impl):
    a, b = make_table(kernel_impl), make_table(kernel_impl)
    for t in (a, b):
        for i in range(3):
            lead(t, leo=10 + i)
    batch = [(0, 1, 10, 1), (1, 2, 3, 0), (2, 1, 12, 2), (0, 1, 10, 1)]
    flags = a.update_follower_fetches([x[0] for x in batch], [x[1] for x in batch],
                                      [x[2] for x in batch], [x[3] for x in batch],
                                      [int(a.leader_leo[x[0]]) for x in batch], T0 + 9, 5)
    singles = [b.update_follower_fetch(p, r, o, s, T0 + 9, int(b.leader_leo[p]), 5)
               for p, r, o, s in batch]
    assert flags.tolist() == singles == [True, True, True, False]
    for name in ("leo", "log_start_offset", "last_caught_up_time_ms", "last_fetch_time_ms",
                 "last_fetch_leader_leo", "broker_epoch"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name


# ---- native ⟷ twin parity -------------------------------------------------------------------
def random_columns(rng: np.random.Generator, P: int, R: int) -> SimpleNamespace:
    n_rep = rng.integers(1, R + 1, P).astype(np.int32)
    follower = np.arange(R)[None, :] < n_rep[:, None]
    leader_leo = rng.integers(0, 12, P)

    def slot(values, fill, dtype):
        return np.where(follower, values, fill).astype(dtype)

    return SimpleNamespace(
        leader_leo=leader_leo.astype(np.int64),
        hw=np.minimum(rng.integers(0, 12, P), leader_leo).astype(np.int64),
        leader_epoch=rng.integers(-1, 4, P).astype(np.int32),
        epoch_start_offset=rng.integers(-1, 12, P).astype(np.int64),
        min_isr=rng.integers(1, R + 2, P).astype(np.int32),
        n_replicas=n_rep,
        isr_state=rng.integers(0, 3, P).astype(np.uint8),
        active=(rng.random(P) < 0.85).astype(np.uint8),
        leo=slot(rng.integers(-1, 13, (P, R)), -1, np.int64),
        log_start_offset=slot(rng.integers(-1, 3, (P, R)), -1, np.int64),
        last_fetch_leader_leo=slot(rng.integers(-1, 13, (P, R)), -1, np.int64),
        last_fetch_time_ms=slot(T0 + rng.integers(-3, 3, (P, R)) * 20_000, 0, np.int64),
        last_caught_up_time_ms=slot(
            np.where(rng.random((P, R)) < 0.2, 0, T0 + rng.integers(-3, 3, (P, R)) * 15_000),
            0, np.int64),
        broker_epoch=slot(rng.integers(-2, 3, (P, R)), NO_BROKER_EPOCH, np.int64),
        in_isr=slot(rng.integers(0, 2, (P, R)), 0, np.uint8),
        in_max_isr=slot(rng.integers(0, 2, (P, R)), 0, np.uint8),
        eligible=slot(rng.integers(0, 2, (P, R)), 0, np.uint8),
        # broker 0 in slot 0, then distinct follower ids; padding −1
        replica_id=slot(np.stack([np.concatenate(([0], 1 + rng.permutation(2 * R)[:R - 1]))
                                  for _ in range(P)]), -1, np.int32),
    )


def copy_columns(cols: SimpleNamespace) -> SimpleNamespace:
    return SimpleNamespace(**{k: v.copy() for k, v in vars(cols).items()})


def assert_same_columns(a: SimpleNamespace, b: SimpleNamespace) -> None:
    for name, col in vars(a).items():
        assert np.array_equal(col, getattr(b, name)), name


def call_both(native, twin, method: str, *args):
    results = []
    for k in (native, twin):
        try:
            results.append(("ok", getattr(k, method)(*args)))
        except (IndexError, ValueError) as e:
            results.append(("raise", type(e)))
    assert results[0] == results[1], (method, args, results)
    return results[0]


@settings(max_examples=150, deadline=None)
@given(P=st.integers(1, 12), R=st.integers(2, 5), seed=st.integers(0, 2**32 - 1),
       steps=st.integers(1, 40))
def test_native_matches_twin_on_random_states(P, R, seed, steps):
    rng = np.random.default_rng(seed)
    cols = random_columns(rng, P, R)
    ca, cb = copy_columns(cols), copy_columns(cols)
    native = kernel_module("native").ReplicaStateKernels(ca, R)
    twin = kernel_module("twin").ReplicaStateKernels(cb, R)
    for _ in range(steps):
        now = T0 + int(rng.integers(-2, 4)) * 15_000
        lag = int(rng.choice([0, LAG]))
        p, r = int(rng.integers(-1, P + 1)), int(rng.integers(-1, R + 1))
        op = int(rng.integers(0, 12))
        if op == 0:
            call_both(native, twin, "follower_fetch", p, r, int(rng.integers(-1, 14)),
                      int(rng.integers(0, 3)), now, int(rng.integers(0, 14)),
                      int(rng.integers(-1, 3)))
        elif op == 1:
            k = int(rng.integers(0, 5))
            batch = [rng.integers(0, P, k), rng.integers(1, R, k), rng.integers(-1, 14, k),
                     rng.integers(0, 3, k), rng.integers(0, 14, k)]
            batch = [np.ascontiguousarray(x, dtype=np.int64) for x in batch]
            out_a, out_b = np.zeros(k, np.uint8), np.zeros(k, np.uint8)
            res = []
            for kern, out in ((native, out_a), (twin, out_b)):
                try:
                    res.append(kern.follower_fetch_batch(*batch, now, 3, out))
                except (IndexError, ValueError) as e:
                    res.append(type(e))
            assert res[0] == res[1] and np.array_equal(out_a, out_b)
        elif op == 2:
            call_both(native, twin, "is_caught_up", p, r, now, lag)
        elif op == 3:
            call_both(native, twin, "hw_candidate", p, now, lag)
        elif op == 4:
            call_both(native, twin, "maybe_increment_hw", p, now, lag)
        elif op == 5:
            call_both(native, twin, "out_of_sync", p, now, lag)
        elif op == 6:
            call_both(native, twin, "can_expand_isr", p, r)
        elif op == 7:
            n = int(rng.integers(0, P + 1))
            oh = [np.full(P, -9, np.int64) for _ in range(2)]
            oc = [np.full(P, 9, np.uint8) for _ in range(2)]
            om = [np.full(P * R, 9, np.uint8) for _ in range(2)]
            a = native.hw_and_out_of_sync_all(now, lag, n, oh[0], oc[0], om[0])
            b = twin.hw_and_out_of_sync_all(now, lag, n, oh[1], oc[1], om[1])
            assert a == b
            for x, y in (oh, oc, om):
                assert np.array_equal(x, y)
            oh2, oc2, om2 = np.full(P, -9, np.int64), np.full(P, 9, np.uint8), np.full(P * R, 9, np.uint8)
            assert native.hw_candidates_all(now, lag, n, oh2, oc2) == a[0]
            assert native.out_of_sync_all(now, lag, n, om2) == a[1]
            assert np.array_equal(oh2[:n], oh[0][:n]) and np.array_equal(om2, om[0])
        elif op == 8:
            n = int(rng.integers(0, P + 1))
            om = [np.full(P * R, 9, np.uint8) for _ in range(2)]
            assert (native.expand_candidates_all(n, om[0])
                    == twin.expand_candidates_all(n, om[1]))
            assert np.array_equal(om[0], om[1])
        elif op == 9:
            call_both(native, twin, "follower_fetch_hw", p, r, int(rng.integers(-1, 14)),
                      int(rng.integers(0, 3)), now, int(rng.integers(0, 14)),
                      int(rng.integers(-1, 3)), lag)
            call_both(native, twin, "expand_or_hw", p, r, bool(rng.integers(0, 2)), now, lag)
        elif op == 10:
            call_both(native, twin, "isr_size", p)
            call_both(native, twin, "maximal_isr_size", p)
            call_both(native, twin, "reached_isr_size", p, int(rng.integers(-1, 14)))
            call_both(native, twin, "sorted_isr", p)
            call_both(native, twin, "sorted_maximal_isr", p)
        else:  # apply every HW in place, as the table does
            a = native.hw_candidates_all(now, lag, P, ca.hw, np.zeros(P, np.uint8))
            b = twin.hw_candidates_all(now, lag, P, cb.hw, np.zeros(P, np.uint8))
            assert a == b
        assert_same_columns(ca, cb)


@settings(max_examples=60, deadline=None)
@given(P=st.integers(1, 12), R=st.integers(2, 6), seed=st.integers(0, 2**32 - 1))
def test_sorted_isr_matches_the_column_slices_on_random_states(P, R, seed):
    """sorted_isr / sorted_maximal_isr (native and twin) equal sorting the numpy slice of the
    flagged slots (the table's isr / maximal_isr), as lists of Python ints; missing rows raise."""
    cols = random_columns(np.random.default_rng(seed), P, R)
    kernels = [kernel_module(impl).ReplicaStateKernels(copy_columns(cols), R)
               for impl in ("native", "twin")]
    for p in range(-1, P + 1):
        for method, flags in (("sorted_isr", cols.in_isr), ("sorted_maximal_isr", cols.in_max_isr)):
            if 0 <= p < P and cols.active[p]:
                n = cols.n_replicas[p]
                want = sorted(int(b) for b in cols.replica_id[p, :n][flags[p, :n] != 0])
                for k in kernels:
                    got = getattr(k, method)(p)
                    assert got == want and type(got) is list
                    assert all(type(b) is int for b in got)
            else:
                for k in kernels:
                    with pytest.raises(IndexError):
                        getattr(k, method)(p)


def test_table_sorted_isr_is_the_slot_order_isr_sorted(table):
    p = lead(table, replicas=(1, 9, 2), isr=(9, 2, 1))
    assert table.isr(p) == [1, 9, 2]  # slot order: this broker, then the assignment order
    assert table.sorted_isr(p) == table.sorted_maximal_isr(p) == [1, 2, 9]
    table.set_assignment(p, [1, 9, 2], [2, 1])
    assert table.sorted_isr(p) == table.sorted_maximal_isr(p) == [1, 2]
    table.remove_partition(p)
    with pytest.raises(IndexError):
        table.sorted_isr(p)


@pytest.mark.parametrize("impl", ["native", "twin"])
def test_bulk_kernels_reject_bad_bounds(impl):
    rng = np.random.default_rng(1)
    cols = random_columns(rng, 4, 3)
    k = kernel_module(impl).ReplicaStateKernels(cols, 3)
    with pytest.raises(ValueError):
        k.hw_candidates_all(T0, LAG, 5, np.zeros(5, np.int64), np.zeros(5, np.uint8))
    with pytest.raises(ValueError):
        k.out_of_sync_all(T0, LAG, 4, np.zeros(11, np.uint8))
    with pytest.raises(ValueError):
        type(k)(SimpleNamespace(**{**vars(cols), "hw": cols.hw[:3]}), 3)


@settings(max_examples=60, deadline=None)
@given(P=st.integers(1, 12), R=st.integers(2, 6), seed=st.integers(0, 2**32 - 1))
def test_follower_lags_match_the_column_mask_on_random_states(P, R, seed):
    """follower_lags (native and twin) gives, for every n, leader LEO − follower LEO of the
    follower slots with a replica id and a known LEO on active rows below n, in row then slot
    order (the numpy mask over the columns); a bad bound or a short output raises."""
    cols = random_columns(np.random.default_rng(seed), P, R)
    cols.replica_id[:, 1:][np.random.default_rng(seed + 1).random((P, R - 1)) < 0.2] = -1
    kernels = [kernel_module(impl).ReplicaStateKernels(copy_columns(cols), R)
               for impl in ("native", "twin")]
    for n in range(P + 1):
        ids, leo = cols.replica_id[:n, 1:], cols.leo[:n, 1:]
        mask = (ids >= 0) & (leo >= 0) & (cols.active[:n, None] != 0)
        want = (cols.leader_leo[:n, None] - leo)[mask]
        for k in kernels:
            out = np.full(P * R, -99, np.int64)
            count = k.follower_lags(n, out)
            assert count == len(want) and np.array_equal(out[:count], want)
    for k in kernels:
        with pytest.raises(ValueError):
            k.follower_lags(P + 1, np.zeros((P + 1) * R, np.int64))
        with pytest.raises(ValueError):
            k.follower_lags(P, np.zeros(P * R - 1, np.int64))


def test_table_follower_lags_are_what_the_leader_knows(table):
    """A follower the leader has not heard from is left out; each fetch sets its lag."""
    p = lead(table, replicas=(1, 2, 3), leo=10)
    q = lead(table, replicas=(1, 3), isr=(1, 3), leo=4)
    assert table.follower_lags().tolist() == []
    fetch(table, p, 3, 6, T0)
    fetch(table, q, 3, 4, T0)
    assert table.follower_lags().tolist() == [4, 0]
    fetch(table, p, 2, 9, T0)
    assert table.follower_lags().tolist() == [1, 4, 0]
    table.remove_partition(p)
    assert table.follower_lags().tolist() == [0]
    assert table.follower_lags().dtype == np.int64
