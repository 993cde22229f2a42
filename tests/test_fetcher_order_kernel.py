"""Fetch ordering and lag over columns (KAFKA_SEMANTICS §7.3, §7.5, §7.8): the ``_fetch_order``
kernel and its plain twin, checked on Kafka's rules, against each other, and against the ordered
map (``PartitionStates``, the reference); then the fetcher itself running on
``ColumnarPartitionStates``."""
from __future__ import annotations

import importlib
import random

import numpy as np
import pytest
import test_fetcher_catchup as catchup
import test_fetcher_errors as fetch_errors
import test_fetcher_fairness as fairness
from hypothesis import given, settings
from hypothesis import strategies as st

from replica_core.fetcher import FETCHING, TRUNCATING, PartitionFetchState, PartitionStates
from replica_core.fetcher import fetcher as fetcher_module
from replica_core.fetcher.columnar import ColumnarPartitionStates
from replica_core.replication.messages import TopicPartition

T0 = 1_700_000_000_000
NATIVE_MODULE = "replica_core._fast._fetch_order"


def kernel_module(impl: str):
    """The compiled module or its twin; a missing native build fails loudly (conftest rule)."""
    name = "_fetch_order" if impl == "native" else "fetch_order_py"
    return importlib.import_module(f"replica_core._fast.{name}")


def columnar(impl: str, states=None, **kw) -> ColumnarPartitionStates:
    cps = ColumnarPartitionStates(states, pure=(impl == "twin"), **kw)
    if (type(cps._k).__module__ == NATIVE_MODULE) != (impl == "native"):
        pytest.fail(f"wanted the {impl} kernel, got {type(cps._k).__module__}")
    return cps


def fs(offset: int = 0, *, lag: int | None = 0, delay: int | None = None,
       state=FETCHING) -> PartitionFetchState:
    return PartitionFetchState(offset, lag, 1, delay, state, 0)


TPS = [TopicPartition("t", i) for i in range(6)]


def keys(items) -> list[TopicPartition]:
    return [tp for tp, _ in items]


# ---- Kafka's rules, on the columns ----------------------------------------------------------
def test_ready_is_fetching_and_not_delayed_in_fair_order(kernel_impl):
    cps = columnar(kernel_impl)
    cps.update_and_move_to_end(TPS[0], fs(delay=T0 + 1))            # delayed
    cps.update_and_move_to_end(TPS[1], fs())
    cps.update_and_move_to_end(TPS[2], fs(state=TRUNCATING))        # not fetching
    cps.update_and_move_to_end(TPS[3], fs(delay=T0))                # due exactly now: ready
    cps.update_and_move_to_end(TPS[4], fs(delay=T0 - 5))
    cps.update_and_move_to_end(TPS[5], fs(state=TRUNCATING, delay=T0 + 1))
    assert keys(cps.ready_items(T0)) == [TPS[1], TPS[3], TPS[4]]
    assert keys(cps.truncating_items(T0)) == [TPS[2]]
    assert keys(cps.ready_items(T0 + 1)) == [TPS[0], TPS[1], TPS[3], TPS[4]]
    assert keys(cps.truncating_items(T0 + 1)) == [TPS[2], TPS[5]]
    assert cps.next_due(T0) == T0 + 1 and cps.next_due(T0 + 1) is None
    assert cps.ready_items(T0) == [(tp, cps.state_value(tp)) for tp in (TPS[1], TPS[3], TPS[4])]


def test_served_partition_goes_last_and_update_keeps_place(kernel_impl):
    cps = columnar(kernel_impl, [(tp, fs(i)) for i, tp in enumerate(TPS[:4])])
    cps.update_and_move_to_end(TPS[1], fs(10))     # got data: to the back
    assert keys(cps.ready_items(T0)) == [TPS[0], TPS[2], TPS[3], TPS[1]]
    cps.update(TPS[2], fs(20, delay=T0 + 100))     # delayed in place (update keeps position)
    assert cps.row_order() == list(cps) == [TPS[0], TPS[2], TPS[3], TPS[1]]
    assert keys(cps.ready_items(T0)) == [TPS[0], TPS[3], TPS[1]]
    cps.move_to_end(TPS[0])
    cps.move_to_end(TPS[5])                        # absent: no-op
    assert cps.row_order() == list(cps) == [TPS[2], TPS[3], TPS[1], TPS[0]]


def test_round_robin_under_a_two_partition_limit(kernel_impl):
    cps = columnar(kernel_impl, [(tp, fs()) for tp in TPS[:5]])
    served = []
    for _ in range(5):
        batch = keys(cps.ready_items(T0))[:2]
        for tp in batch:
            cps.update_and_move_to_end(tp, cps.state_value(tp))
        served.extend(batch)
    assert served == TPS[:5] * 2


def test_remove_clear_set_and_growth(kernel_impl):
    cps = columnar(kernel_impl, capacity=2)
    for i, tp in enumerate(TPS):
        cps.update_and_move_to_end(tp, fs(i))      # grows 2 -> 4 -> 8
    cps.remove(TPS[2])
    cps.remove(TPS[2])                             # absent: no-op
    cps.update_and_move_to_end(TPS[2], fs(7))      # re-added: last, on a recycled row
    assert cps.row_order() == list(cps) == [*TPS[:2], *TPS[3:], TPS[2]]
    a0, b0, a1 = TopicPartition("a", 0), TopicPartition("b", 0), TopicPartition("a", 1)
    cps.set({a0: fs(1), b0: fs(2, delay=T0 + 9), a1: fs(3)})   # grouped by topic
    assert cps.row_order() == list(cps) == [a0, a1, b0]
    assert keys(cps.ready_items(T0)) == [a0, a1] and cps.next_due(T0) == T0 + 9
    cps.clear()
    assert cps.row_order() == [] and cps.ready_items(T0) == [] and cps.next_due(T0) is None
    assert cps.max_state_lag() == 0 and len(cps) == 0


def test_max_state_lag_ignores_unknown_and_removed(kernel_impl):
    cps = columnar(kernel_impl)
    assert cps.max_state_lag() == 0
    cps.update_and_move_to_end(TPS[0], fs(lag=None))
    assert cps.max_state_lag() == 0
    cps.update_and_move_to_end(TPS[1], fs(lag=3))
    cps.update_and_move_to_end(TPS[2], fs(lag=8))
    assert cps.max_state_lag() == 8
    cps.remove(TPS[2])
    assert cps.max_state_lag() == 3


def test_plain_tuples_are_the_same_keys(kernel_impl):
    cps = columnar(kernel_impl, [(("t", 0), fs())])
    cps.update_and_move_to_end(TPS[0], fs(5))
    assert cps.row_order() == [("t", 0)] and cps.state_value(TPS[0]).fetch_offset == 5


# ---- the kernel directly ----------------------------------------------------------------------
class Cols:
    def __init__(self, n: int, mod) -> None:
        self.state = np.zeros(n, np.uint8)
        self.delay_until = np.full(n, mod.NO_DELAY, np.int64)
        self.lag = np.full(n, mod.UNKNOWN_LAG, np.int64)
        self.nxt = np.full(n, -1, np.int64)
        self.prv = np.full(n, -1, np.int64)
        self.ends = np.full(2, -1, np.int64)


def test_kernel_lag_is_leader_hw_minus_next_offset_never_negative(kernel_impl):
    mod = kernel_module(kernel_impl)
    cols = Cols(4, mod)
    k = mod.FetchOrderKernels(cols)
    for r in range(3):
        k.set_row(r, mod.ST_FETCHING, mod.NO_DELAY, mod.UNKNOWN_LAG, True)
    rows = np.array([0, 1, 2], np.int64)
    best = k.set_lags(rows, np.array([10, 5, 7], np.int64), np.array([4, 9, 7], np.int64), 3)
    assert best == 6 and cols.lag[:3].tolist() == [6, 0, 0]
    assert k.set_lags(rows, rows, rows, 0) == 0
    assert k.max_lag() == 6
    k.free_row(0)
    assert k.max_lag() == 0 and not k.is_linked(0)   # freed rows do not count
    cols.lag[3] = 99                                  # an unused row does not count either
    assert k.max_lag() == 0


def test_kernel_rejects_bad_input(kernel_impl):
    mod = kernel_module(kernel_impl)
    cols = Cols(3, mod)
    k = mod.FetchOrderKernels(cols)
    with pytest.raises(IndexError):
        k.set_row(3, mod.ST_FETCHING, 0, 0, True)
    with pytest.raises(IndexError):
        k.move_to_end(-1)
    with pytest.raises(ValueError):
        k.set_row(0, mod.ST_FREE, 0, 0, True)
    with pytest.raises(IndexError):
        k.move_rows_to_end(np.array([0, 5], np.int64), 2)
    with pytest.raises(ValueError):
        k.move_rows_to_end(np.array([0], np.int64), 2)
    with pytest.raises(IndexError):
        k.set_lags(np.array([7], np.int64), np.zeros(1, np.int64), np.zeros(1, np.int64), 1)
    assert cols.ends.tolist() == [-1, -1] and not cols.state.any()   # nothing was written
    bad = Cols(3, mod)
    bad.delay_until = np.zeros(3, np.int32)
    with pytest.raises(ValueError):
        mod.FetchOrderKernels(bad)


def run_ops(mod, cols, ops) -> list:
    """Apply ``ops`` to a kernel over ``cols``; return every observable result."""
    k = mod.FetchOrderKernels(cols)
    n = len(cols.state)
    out = np.empty(n, np.int64)
    seen = []
    for op, a, b, c in ops:
        if op == "set":
            k.set_row(a, mod.ST_FETCHING if b % 3 else mod.ST_TRUNCATING,
                      mod.NO_DELAY if c % 4 == 0 else T0 + c - 8, c - 3 if c % 5 else
                      mod.UNKNOWN_LAG, bool(b % 2))
        elif op == "move":
            k.move_to_end(a)
        elif op == "moves":
            rows = np.array([a, b, a, c % n], np.int64)
            k.move_rows_to_end(rows, len(rows))
        elif op == "free":
            k.free_row(a)
        elif op == "lags":
            rows = np.array([a, b], np.int64)
            seen.append(k.set_lags(rows, np.array([c, c * 2], np.int64),
                                   np.array([b, a], np.int64), 2))
        k2 = k.order(out)
        seen.append(out[:k2].tolist())
        for now in (T0 - 10, T0, T0 + 10):
            seen.append(out[:k.ready_in_order(now, out)].tolist())
            seen.append(out[:k.truncating_in_order(now, out)].tolist())
            seen.append(k.next_due(now))
        seen.append(k.max_lag())
    seen.append([getattr(cols, f).tolist() for f in ("state", "delay_until", "lag", "nxt", "prv",
                                                     "ends")])
    return seen


OPS = st.lists(st.tuples(st.sampled_from(["set", "set", "move", "moves", "free", "lags"]),
                         st.integers(0, 7), st.integers(0, 7), st.integers(0, 20)),
               max_size=40)


@settings(max_examples=150, deadline=None)
@given(ops=OPS)
def test_native_and_twin_kernels_agree(ops):
    native, twin = kernel_module("native"), kernel_module("twin")
    assert run_ops(native, Cols(8, native), ops) == run_ops(twin, Cols(8, twin), ops)


# ---- columns against the ordered map (the reference) -----------------------------------------
MAP_OPS = st.lists(st.tuples(st.sampled_from(["uame", "uame", "update", "move", "remove", "set",
                                              "clear"]),
                             st.integers(0, 9), st.integers(0, 30)), max_size=50)


def apply(ps: PartitionStates, op: str, i: int, v: int) -> None:
    tp = TopicPartition("ab"[i % 2], i)
    s = fs(v, lag=None if v % 7 == 0 else v % 5, delay=None if v % 3 else T0 + v - 15,
           state=TRUNCATING if v % 11 == 0 else FETCHING)
    if op == "uame":
        ps.update_and_move_to_end(tp, s)
    elif op == "update":
        ps.update(tp, s)
    elif op == "move":
        ps.move_to_end(tp)
    elif op == "remove":
        ps.remove(tp)
    elif op == "set":
        ps.set([(TopicPartition("ab"[j % 2], j), s) for j in range(i % 4, i % 4 + v % 6)])
    elif op == "clear" and v % 4 == 0:
        ps.clear()


def views(ps: PartitionStates) -> list:
    out: list = [list(ps.items())]
    for now in (T0 - 20, T0, T0 + 20):
        out += [ps.ready_items(now), ps.truncating_items(now), ps.next_due(now)]
    out.append(ps.max_state_lag())
    return out


@settings(max_examples=150, deadline=None)
@given(ops=MAP_OPS)
def test_columns_answer_like_the_ordered_map(ops):
    ref: PartitionStates = PartitionStates()
    both = [columnar("native", capacity=2), columnar("twin", capacity=2)]
    for op, i, v in ops:
        apply(ref, op, i, v)
        for cps in both:
            apply(cps, op, i, v)
            assert views(cps) == views(ref)
            assert cps.row_order() == list(ref)


def test_columns_answer_like_the_map_over_many_partitions(kernel_impl):
    rng = random.Random(5)
    ref: PartitionStates = PartitionStates()
    cps = columnar(kernel_impl, capacity=8)
    for _ in range(3000):
        op = rng.choice(["uame", "uame", "uame", "update", "move", "remove"])
        i, v = rng.randrange(400), rng.randrange(60)
        apply(ref, op, i, v)
        apply(cps, op, i, v)
    assert views(cps) == views(ref) and cps.row_order() == list(ref)


# ---- the fetcher on columnar states ---------------------------------------------------------
FETCHER_CASES = [
    fairness.test_partition_that_received_data_goes_to_the_back,
    fairness.test_errored_partition_is_delayed_moved_last_and_skipped_until_backoff,
    fairness.test_failed_request_delays_every_partition_and_keeps_order,
    fairness.test_throttled_out_of_sync_partitions_are_skipped_while_quota_exceeded,
    catchup.test_follower_catches_up_from_empty_over_several_rounds,
    catchup.test_lag_metrics_and_manager_max_lag,
    catchup.test_same_epoch_add_keeps_state_but_moves_last,
    fetch_errors.test_unknown_leader_epoch_backs_off_until_the_leader_catches_up,
    fetch_errors.test_fenced_by_a_newer_leader_epoch_marks_the_partition_failed,
    fetch_errors.test_answer_for_a_truncating_partition_is_ignored,
    fetch_errors.test_answer_for_a_partition_not_in_the_request_is_ignored,
]


@pytest.mark.usefixtures("fetcher_transport")
@pytest.mark.parametrize("case", FETCHER_CASES, ids=lambda f: f.__name__.removeprefix("test_"))
def test_fetcher_rules_hold_on_columnar_states(monkeypatch, kernel_impl, case):
    """The fetcher only talks to its states through PartitionStates' methods, so Kafka's rules
    hold with the columnar states (the benchmark's part 3 runs the fetcher on them)."""
    monkeypatch.setattr(fetcher_module, "PartitionStates",
                        lambda: columnar(kernel_impl))
    case()
