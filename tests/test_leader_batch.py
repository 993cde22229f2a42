"""LeaderAndIsr's leader side in one batch (§6.1): ``ReplicaStateTable.lead_partitions`` (one
validation pass, one kernel call) leaves every row as the one-row calls do, one partition at a
time (``add_partition``; ``set_assignment`` + LEO + min ISR + ``start_leader_epoch``), the
native kernel and its twin alike; and a LeaderAndIsr over many partitions leaves every
partition, row and leader-epoch checkpoint file as one request per partition does."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from replication_harness import Cluster
from test_replica_state import T0, copy_columns, kernel_module, random_columns

from replica_core.errors import Errors
from replica_core.replication import ReplicaStateTable
from replica_core.replication.messages import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    TopicPartition,
)
from replica_core.replication.partition import make_leaders
from replica_core.replication.state import _PARTITION_COLUMNS, _SLOT_COLUMNS

ME = 1
IMPLS = ("native", "twin")


def _columns(table: ReplicaStateTable) -> dict:
    out = {name: getattr(table, name).copy() for name, _, _ in _PARTITION_COLUMNS}
    out.update({name: getattr(table, name).copy() for name, _, _ in _SLOT_COLUMNS})
    return out


def _assert_same_table(a: ReplicaStateTable, b: ReplicaStateTable) -> None:
    got, want = _columns(a), _columns(b)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    assert (len(a), a.scan_bound, a.capacity, a.max_replicas, sorted(a._free)) == \
        (len(b), b.scan_bound, b.capacity, b.max_replicas, sorted(b._free))


def _one_row(table: ReplicaStateTable, row: int, replicas, isr, *, epoch, leo, hw, min_isr,
             log_start, new_epoch, new_leader, now, ineligible) -> int:
    """makeLeader's table part for one partition through the one-row calls."""
    eligible = [b for b in replicas if b not in ineligible]
    if row < 0:
        row = table.add_partition(replicas, isr, leader_epoch=epoch, now_ms=now, leader_leo=leo,
                                  hw=hw, min_isr=min_isr, eligible=eligible)
    else:
        table.set_assignment(row, replicas, isr, eligible)
        table.leader_leo[row] = leo
        table.min_isr[row] = min_isr
        if new_epoch:
            table.start_leader_epoch(row, epoch, now, new_leader=new_leader)
    table.log_start_offset[row, 0] = log_start
    return row


_entry = st.tuples(
    st.lists(st.integers(0, 7), max_size=4, unique=True),  # other replicas
    st.integers(0, 50),  # leader epoch
    st.integers(0, 100),  # leader LEO
    st.integers(1, 3),  # min ISR
    st.booleans(),  # new epoch (kept rows)
    st.booleans(),  # new leader (kept rows)
    st.integers(-1, 30),  # log start
    st.data(),
)


@pytest.mark.parametrize("impl", IMPLS)
@settings(max_examples=80, deadline=None)
@given(ops=st.lists(st.one_of(
    st.tuples(st.just("lead"), st.lists(st.tuples(st.integers(0, 40), _entry), max_size=6),
              st.sets(st.integers(0, 7), max_size=2)),
    st.tuples(st.just("remove"), st.integers(0, 40)),
    st.tuples(st.just("fetch"), st.integers(0, 40), st.integers(0, 3), st.integers(0, 100))),
    min_size=1, max_size=14))
def test_lead_partitions_rows_are_the_one_row_rows(impl, ops):
    pure = impl == "twin"
    batch = ReplicaStateTable(ME, capacity=2, max_replicas=2, pure=pure)
    ref = ReplicaStateTable(ME, capacity=2, max_replicas=2, pure=pure)
    now = T0
    led = 0
    for op in ops:
        now += 1000
        active = [int(p) for p in batch.partitions()]
        if op[0] == "remove":
            if active:
                p = active[op[1] % len(active)]
                batch.remove_partition(p)
                ref.remove_partition(p)
            continue
        if op[0] == "fetch":  # some follower state for kept rows to keep
            _, pick, slot, offset = op
            if active:
                p = active[pick % len(active)]
                r = 1 + slot % max(1, int(batch.n_replicas[p]) - 1)
                if r < int(batch.n_replicas[p]):
                    leo = int(batch.leader_leo[p])
                    for t in (batch, ref):
                        t.update_follower_fetch(p, r, min(offset, leo), 0, now, leo, 7)
            continue
        _, entries, ineligible = op
        rows, replicas, isrs, cols = [], [], [], {k: [] for k in (
            "leader_epochs", "leader_leos", "hws", "min_isrs", "log_starts", "new_epochs",
            "new_leaders")}
        used: set[int] = set()
        for pick, (others, epoch, leo, min_isr, new_epoch, new_leader, log_start, data) in entries:
            free_rows = [p for p in active if p not in used]
            row = -1
            if free_rows and pick % 3:  # a kept row, once per batch
                row = free_rows[pick % len(free_rows)]
                used.add(row)
            reps = data.draw(st.permutations([ME, *(b for b in others if b != ME)]))
            rows.append(row)
            replicas.append(list(reps))
            isrs.append(sorted(data.draw(st.sets(st.sampled_from(reps)))))
            for key, value in (("leader_epochs", epoch), ("leader_leos", leo),
                               ("hws", data.draw(st.integers(0, leo))), ("min_isrs", min_isr),
                               ("log_starts", log_start), ("new_epochs", new_epoch),
                               ("new_leaders", new_leader)):
                cols[key].append(value)
        got = batch.lead_partitions(rows, replicas, isrs, now_ms=now, ineligible=ineligible,
                                    **cols)
        want = [_one_row(ref, rows[i], replicas[i], isrs[i], epoch=cols["leader_epochs"][i],
                         leo=cols["leader_leos"][i], hw=cols["hws"][i],
                         min_isr=cols["min_isrs"][i], log_start=cols["log_starts"][i],
                         new_epoch=cols["new_epochs"][i], new_leader=cols["new_leaders"][i],
                         now=now, ineligible=ineligible)
                for i in range(len(rows))]
        assert got == want
        led += len(rows)
        _assert_same_table(batch, ref)
    assert led or all(op[0] != "lead" or not op[1] for op in ops)


def test_lead_partitions_values():
    """The rule itself: a new row as add_partition makes it, a kept re-elected row keeps its
    followers' LEOs and sets lastFetchLeaderLogEndOffset to the epoch start; a follower new to
    a kept row starts as ReplicaState.Empty; ineligible brokers are not eligible."""
    t = ReplicaStateTable(ME, capacity=4)
    p = t.add_partition([ME, 2, 3], [ME, 2, 3], leader_epoch=1, now_ms=T0, leader_leo=10, hw=10)
    t.update_follower_fetch(p, 1, 10, 0, T0 + 5, 10, 9)
    rows = t.lead_partitions([p, -1], [[ME, 2, 4], [5, ME]], [[ME, 2], [ME]],
                             leader_epochs=[2, 7], leader_leos=[12, 3], hws=[0, 1],
                             min_isrs=[2, 1], log_starts=[4, 0], new_epochs=[True, False],
                             new_leaders=[False, False], now_ms=T0 + 100, ineligible={4})
    assert rows[0] == p and rows[1] == 1
    assert list(t.replica_id[p]) == [ME, 2, 4]
    assert list(t.in_isr[p]) == [1, 1, 0] and list(t.eligible[p]) == [0, 1, 0]
    assert list(t.leo[p]) == [-1, 10, -1]  # broker 2 kept its LEO; 4 is new
    assert list(t.last_fetch_leader_leo[p]) == [-1, 12, 12]  # re-elected: the epoch start
    assert list(t.last_caught_up_time_ms[p]) == [0, T0 + 100, 0]
    assert (int(t.leader_epoch[p]), int(t.epoch_start_offset[p]), int(t.hw[p]),
            int(t.min_isr[p]), int(t.log_start_offset[p, 0])) == (2, 12, 10, 2, 4)
    q = rows[1]
    assert list(t.replica_id[q])[:2] == [ME, 5] and list(t.eligible[q])[:2] == [0, 1]
    assert (int(t.leader_epoch[q]), int(t.epoch_start_offset[q]), int(t.hw[q])) == (7, 3, 1)
    assert list(t.leo[q])[:2] == [-1, -1] and list(t.last_fetch_leader_leo[q])[:2] == [-1, -1]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("bad", [
    dict(replicas=[2, 3], isr=[2]),  # this broker not assigned
    dict(replicas=[ME, 2, 2], isr=[ME]),  # a replica twice
    dict(replicas=[ME, -3], isr=[ME]),  # a negative id
    dict(replicas=[ME, 2], isr=[ME, 4]),  # ISR outside the assignment
    dict(replicas=[ME, 2], isr=[ME], min_isr=0),
    dict(replicas=[ME, 2], isr=[ME], hw=11),  # HW past the LEO (a new row)
    dict(replicas=[ME, 2], isr=[ME], row=3),  # not an active row
])
def test_a_bad_entry_is_the_one_row_error_and_nothing_is_written(impl, bad):
    t = ReplicaStateTable(ME, capacity=4, pure=impl == "twin")
    p = t.add_partition([ME, 2], [ME, 2], leader_epoch=1, now_ms=T0, leader_leo=5, hw=5)
    before = _columns(t)
    row, replicas, isr = bad.get("row", -1), bad["replicas"], bad["isr"]
    min_isr, hw = bad.get("min_isr", 1), bad.get("hw", 0)
    ref = ReplicaStateTable(ME, capacity=4, pure=True)
    ref.add_partition([ME, 2], [ME, 2], leader_epoch=1, now_ms=T0, leader_leo=5, hw=5)
    with pytest.raises((ValueError, IndexError)) as one_row:
        _one_row(ref, row, replicas, isr, epoch=2, leo=10, hw=hw, min_isr=min_isr, log_start=0,
                 new_epoch=True, new_leader=False, now=T0, ineligible=())
    with pytest.raises(type(one_row.value), match=str(one_row.value).replace("[", r"\[")):
        # a good entry first: nothing of it is written either
        t.lead_partitions([p, row], [[ME, 2], replicas], [[ME], isr], leader_epochs=[2, 2],
                          leader_leos=[6, 10], hws=[0, hw], min_isrs=[1, min_isr],
                          log_starts=[0, 0], new_epochs=[True, True], new_leaders=[False, False],
                          now_ms=T0 + 1)
    after = _columns(t)
    for name in before:
        np.testing.assert_array_equal(after[name], before[name], err_msg=name)
    assert (len(t), t.scan_bound) == (1, 1)


# ---- native ⟷ twin parity of the kernels ------------------------------------------------------
@settings(max_examples=150, deadline=None)
@given(P=st.integers(1, 8), R=st.integers(2, 5), seed=st.integers(0, 2**32 - 1))
def test_lead_kernels_native_matches_twin(P, R, seed):
    rng = np.random.default_rng(seed)
    cols = random_columns(rng, P, R)
    ca, cb = copy_columns(cols), copy_columns(cols)
    native = kernel_module("native").ReplicaStateKernels(ca, R)
    twin = kernel_module("twin").ReplicaStateKernels(cb, R)
    me = 0
    k = int(rng.integers(0, 5))
    rows = [int(p) for p in rng.choice(P, size=min(k, P), replace=False)]
    rows += [-1] * (k - len(rows))
    reps, rep_off, isr, isr_off = [], [0], [], [0]
    for _ in range(k):
        n = int(rng.integers(1, R + 1))
        ids = [me, *(1 + int(b) for b in rng.permutation(2 * R)[:n - 1])]
        if rng.random() < 0.1:
            ids[int(rng.integers(0, n))] = int(rng.integers(-1, 3))  # maybe a bad assignment
        ids = [ids[j] for j in rng.permutation(n)]
        reps += ids
        rep_off.append(len(reps))
        members = [b for b in ids if rng.random() < 0.6]
        if rng.random() < 0.1:
            members.append(int(rng.integers(0, 4 * R)))
        isr += members
        isr_off.append(len(isr))
    flags = [int(rng.integers(0, 8)) if p >= 0 else 0 for p in rows]
    epochs = [int(x) for x in rng.integers(0, 9, k)]
    leos = [int(x) for x in rng.integers(0, 20, k)]
    hws = [int(x) for x in rng.integers(-1, 22, k)]
    min_isrs = [int(x) for x in rng.integers(0, 4, k)]
    log_starts = [int(x) for x in rng.integers(-1, 5, k)]
    ineligible = sorted({int(x) for x in rng.integers(0, 2 * R, int(rng.integers(0, 3)))})
    bad = native.check_lead(rows, reps, rep_off, isr, isr_off, min_isrs, leos, hws, me)
    assert bad == twin.check_lead(rows, reps, rep_off, isr, isr_off, min_isrs, leos, hws, me)
    # rows as lead_partitions hands them over: every one a real row, each once
    rows = [p if p >= 0 else int(rng.integers(0, P)) for p in rows]
    keep = [i for i, p in enumerate(rows) if p not in rows[:i]]
    rows = [rows[i] for i in keep]
    reps = [b for i in keep for b in reps[rep_off[i]:rep_off[i + 1]]]
    isr = [b for i in keep for b in isr[isr_off[i]:isr_off[i + 1]]]
    rep_off = [0, *np.cumsum([rep_off[i + 1] - rep_off[i] for i in keep]).tolist()]
    isr_off = [0, *np.cumsum([isr_off[i + 1] - isr_off[i] for i in keep]).tolist()]
    flags, epochs, leos, hws, min_isrs, log_starts = (
        [col[i] for i in keep] for col in (flags, epochs, leos, hws, min_isrs, log_starts))
    args = (rows, flags, reps, rep_off, isr, isr_off, ineligible, epochs, leos, hws, min_isrs,
            log_starts, T0, me)
    results = []
    for kern in (native, twin):
        try:
            results.append(kern.lead_rows(*args))
        except (IndexError, ValueError) as e:
            results.append(type(e))
    assert results[0] == results[1]
    for name, col in vars(ca).items():
        assert np.array_equal(col, getattr(cb, name)), name


@pytest.mark.parametrize("impl", IMPLS)
def test_lead_kernels_refuse_offsets_that_do_not_cut_the_lists(impl):
    kern = kernel_module(impl).ReplicaStateKernels(random_columns(np.random.default_rng(1), 2, 3),
                                                   3)
    with pytest.raises(ValueError, match="offsets"):
        kern.check_lead([-1], [0, 1], [0, 3], [], [0, 0], [1], [0], [0], 0)
    with pytest.raises(ValueError, match="offsets"):
        kern.lead_rows([0], [0], [0, 1], [0, 2], [0], [0, 0], [], [1], [0], [0], [1], [0], T0, 0)


# ---- a LeaderAndIsr over many partitions ----------------------------------------------------
TOPIC = "t"


def _state(c: Cluster, p: int, leader: int, isr, replicas, epoch: int) -> LeaderAndIsrPartitionState:
    return LeaderAndIsrPartitionState(TOPIC, p, c.controller_epoch, leader, epoch, tuple(isr),
                                      epoch, tuple(replicas))


def _send(c: Cluster, broker: int, states, *, one_by_one: bool) -> dict:
    errors = {}
    groups = [[s] for s in states] if one_by_one else [list(states)]
    for group in groups:
        req = LeaderAndIsrRequest(99, c.controller_epoch, c.broker_epochs[broker], tuple(group))
        errors.update(c.rm(broker).become_leader_or_follower(req).partition_errors)
    return errors


def _snapshot(c: Cluster, broker: int, n: int) -> dict:
    rm = c.rm(broker)
    out = {"table": _columns(rm.table)}
    for i in range(n):
        p = rm.partition(TopicPartition(TOPIC, i))
        if p is None:
            continue
        out[i] = (p.leader_id, p.leader_epoch, p.partition_epoch, p.leader_epoch_start_offset,
                  p.replicas, p.row, p.isr, p.high_watermark, dict(p.slot_of),
                  p.log_end_offset, p.log.leader_epoch_cache.entries() if p.log else None)
    files = {}
    for i in range(n):
        path = f"/kafka/broker-{broker}/{TOPIC}-{i}/leader-epoch-checkpoint"
        if c.medium.exists(path):
            files[path] = c.medium.read_bytes(path)
    out["files"] = files
    return out


def _assert_same(a: dict, b: dict) -> None:
    ta, tb = a.pop("table"), b.pop("table")
    for name in tb:
        np.testing.assert_array_equal(ta[name], tb[name], err_msg=name)
    assert a == b


def _scenario(one_by_one: bool, *, lose_dir: int | None = None) -> tuple[Cluster, list]:
    """Broker 0 leads partitions 0..11 of 3 brokers, some with data and fetched; then a second
    LeaderAndIsr re-elects some (kept rows, a changed assignment for one), moves others to
    broker 0 from broker 1, with a bumped epoch."""
    c = Cluster(3)
    n = 12
    first = [_state(c, i, 0 if i % 4 else 1, (0, 1, 2), (0, 1, 2) if i % 3 else (1, 0, 2), 0)
             for i in range(n)]
    answers = []
    for b in range(3):
        answers.append(_send(c, b, first, one_by_one=one_by_one))
    for i in range(n):
        tp = TopicPartition(TOPIC, i)
        leader = 0 if i % 4 else 1
        if i % 2:
            c.produce(tp, 2, acks=1, broker=leader)
            for _ in range(2):  # the second fetch reports the first one's records
                for f in (1, 2) if leader == 0 else (0, 2):
                    c.fetch(f, (tp,), leader=leader)
    c.clock.advance(500)
    if lose_dir is not None:
        c.medium.rmtree(f"/kafka/broker-0/{TOPIC}-{lose_dir}")
    second = []
    for i in range(n):
        if i % 4 == 0:  # led by 1 until now: broker 0 takes over, 1 left out of the ISR
            second.append(_state(c, i, 0, (0, 2), first[i].replicas, 1))
        elif i % 4 == 1:  # re-elected, 2 out of the ISR
            second.append(_state(c, i, 0, (0, 1), (0, 1, 2), 1))
        elif i == 2:  # re-elected with broker 2 replaced by 3 (a reassignment's end)
            second.append(_state(c, i, 0, (0, 1), (0, 1, 3), 1))
    answers.append(_send(c, 0, second, one_by_one=one_by_one))
    return c, answers


def test_a_leader_and_isr_batch_leaves_what_one_partition_at_a_time_leaves():
    batch, batch_answers = _scenario(False)
    single, single_answers = _scenario(True)
    assert batch_answers == single_answers
    assert all(e == Errors.NONE for answer in batch_answers for e in answer.values())
    for b in range(3):
        _assert_same(_snapshot(batch, b, 12), _snapshot(single, b, 12))
    led = batch.rm(0).leader_partitions()
    assert len(led) == 12 and all(p.leader_epoch == (1 if p.tp.partition % 4 < 2
                                                       or p.tp.partition == 2 else 0)
                                  for p in led)
    # re-elected partition 1 kept follower 1's fetch state; partition 2 has broker 3, empty
    p1 = batch.partition(0, TopicPartition(TOPIC, 1))
    assert p1.replica(1).log_end_offset == p1.log_end_offset == 2
    p2 = batch.partition(0, TopicPartition(TOPIC, 2))
    assert p2.replicas == (0, 1, 3) and p2.replica(3).log_end_offset == -1


def test_a_storage_error_stops_that_partition_only():
    """Partition 5's directory is gone before its re-election: its epoch checkpoint cannot be
    written (KAFKA_STORAGE_ERROR), every other partition of the request is made leader."""
    batch, batch_answers = _scenario(False, lose_dir=5)
    single, single_answers = _scenario(True, lose_dir=5)
    assert batch_answers == single_answers
    errors = batch_answers[-1]
    assert errors[TopicPartition(TOPIC, 5)] == Errors.KAFKA_STORAGE_ERROR
    assert all(e == Errors.NONE for tp, e in errors.items() if tp.partition != 5)
    for b in range(3):
        _assert_same(_snapshot(batch, b, 12), _snapshot(single, b, 12))


def test_make_leaders_twice_in_one_call_is_twice_one_after_the_other():
    c = Cluster(3)
    tp = TopicPartition(TOPIC, 0)
    _send(c, 0, [_state(c, 0, 0, (0, 1, 2), (0, 1, 2), 0)], one_by_one=False)
    p = c.partition(0, tp)
    again = _state(c, 0, 0, (0, 1), (0, 1, 2), 1)
    outcomes = make_leaders([(p, again), (p, again)])
    assert outcomes == [(False, False), (False, False)]
    assert p.leader_epoch == 1 and p.isr == [0, 1] and len(c.rm(0).table) == 1
    assert p.row == 0
