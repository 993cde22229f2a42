"""``ReplicaStateTable.add_partition`` writes a new leader's row in one pass: the same row as
laying out the slots for new followers (``_write_slots``) and then starting a NEW leader's epoch
(``start_leader_epoch(new_leader=True)``) on a cleared row — every column, every slot, after
any mix of adds, removals (rows reused) and growth."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from replica_core.replication import ReplicaStateTable
from replica_core.replication.state import _PARTITION_COLUMNS, _SLOT_COLUMNS

T0 = 1_700_000_000_000
ME = 1


def _reference_add(table: ReplicaStateTable, replicas, isr, *, leader_epoch, now_ms, leader_leo,
                   hw, min_isr, eligible) -> int:
    """The row built step by step, with the table's own general-purpose pieces."""
    replicas = [int(b) for b in replicas]
    isr_set = {int(b) for b in isr}
    if len(replicas) > table.max_replicas:
        table.reserve(table.capacity, len(replicas))
    if table._free:
        import heapq

        p = heapq.heappop(table._free)
    else:
        if table.scan_bound == table.capacity:
            table.reserve(2 * table.capacity)
        p = table.scan_bound
        table.scan_bound += 1
    table._clear_row(p)
    table.leader_leo[p] = leader_leo
    table.hw[p] = hw
    table.min_isr[p] = min_isr
    table.active[p] = 1
    table._size += 1
    table._write_slots(p, replicas, isr_set, {}, eligible)
    table.start_leader_epoch(p, leader_epoch, now_ms, new_leader=True)
    return p


def _columns(table: ReplicaStateTable) -> dict:
    out = {name: getattr(table, name).copy() for name, _, _ in _PARTITION_COLUMNS}
    out.update({name: getattr(table, name).copy() for name, _, _ in _SLOT_COLUMNS})
    return out


_add = st.tuples(
    st.lists(st.integers(0, 7), min_size=0, max_size=5, unique=True),  # other replicas
    st.integers(0, 2**31 - 1),  # leader epoch
    st.integers(0, 1000),  # leader LEO
    st.integers(1, 3),  # min ISR
    st.data(),
)


@settings(max_examples=150, deadline=None)
@given(ops=st.lists(st.one_of(st.tuples(st.just("add"), _add),
                              st.tuples(st.just("remove"), st.integers(0, 30))),
                    min_size=1, max_size=25))
def test_add_partition_row_is_the_step_by_step_row(ops):
    fast = ReplicaStateTable(ME, capacity=2, max_replicas=2, pure=True)
    ref = ReplicaStateTable(ME, capacity=2, max_replicas=2, pure=True)
    added = 0
    for kind, arg in ops:
        if kind == "remove":
            active = [int(p) for p in fast.partitions()]
            if active:
                p = active[arg % len(active)]
                fast.remove_partition(p)
                ref.remove_partition(p)
            continue
        others, epoch, leo, min_isr, data = arg
        others = [b for b in others if b != ME]
        replicas = data.draw(st.permutations([ME, *others]))
        isr = data.draw(st.sets(st.sampled_from(replicas)))
        eligible = data.draw(st.none() | st.sets(st.sampled_from(replicas)))
        hw = data.draw(st.integers(0, leo))
        kw = dict(leader_epoch=epoch, now_ms=T0 + added, leader_leo=leo, hw=hw,
                  min_isr=min_isr, eligible=eligible)
        p = fast.add_partition(replicas, isr, **kw)
        q = _reference_add(ref, replicas, isr, **kw)
        assert p == q
        added += 1
        got, want = _columns(fast), _columns(ref)
        assert got.keys() == want.keys()
        for name in want:
            np.testing.assert_array_equal(got[name], want[name], err_msg=name)
        assert (len(fast), fast.scan_bound, fast.capacity) == (len(ref), ref.scan_bound,
                                                               ref.capacity)
    assert added or all(k == "remove" for k, _ in ops)


def test_new_leader_row_values():
    """The rule itself (§6.1): followers start empty, ISR members caught up now."""
    t = ReplicaStateTable(ME, capacity=4, pure=True)
    p = t.add_partition([3, ME, 2], [ME, 3], leader_epoch=5, now_ms=T0, leader_leo=10, hw=4,
                        min_isr=2, eligible=[2])
    assert list(t.replica_id[p]) == [ME, 3, 2]
    assert list(t.in_isr[p]) == [1, 1, 0] and list(t.in_max_isr[p]) == [1, 1, 0]
    assert list(t.eligible[p]) == [0, 0, 1]
    assert list(t.last_caught_up_time_ms[p]) == [0, T0, 0]
    assert list(t.leo[p, 1:]) == [-1, -1] and list(t.last_fetch_leader_leo[p, 1:]) == [-1, -1]
    assert (int(t.leader_epoch[p]), int(t.epoch_start_offset[p]), int(t.hw[p]),
            int(t.n_replicas[p]), int(t.min_isr[p])) == (5, 10, 4, 3, 2)
