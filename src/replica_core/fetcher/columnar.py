"""Fetch states mirrored into columns, with ordering and lag as native kernels (issue #5).

:class:`ColumnarPartitionStates` is a :class:`PartitionStates` (the ordered map stays the source
of truth: ``state_value``, iteration and ``_map`` behave exactly the same) that also keeps one row
per partition in numpy columns — state, delay due time, lag, and the fair order as a linked list
over rows — so the whole-map passes run in ``replica_core._fast._fetch_order`` (or its twin):

* :meth:`ready_items` — Fetching and not delayed, in fair order (``buildFetch``'s selection);
* :meth:`truncating_items` — Truncating and not delayed (``maybeTruncate``'s selection);
* :meth:`next_due` — the earliest future delay;
* :meth:`max_state_lag` — the largest known ``PartitionFetchState.lag``.

The price is one kernel call per state change to keep the columns in step. Whether that pays is
measured in ``benchmarks/bench_fetcher.py``: part 2 per operation, part 3 a whole fetch round with
a fetcher's ``partition_states`` swapped for this class (the fetcher reaches its states only
through ``PartitionStates`` methods, so either works). It does not pay in the fetcher — the
kernel wins only the scans that return little (truncating, next due, max lag), while selecting the
ready partitions ties because each must become a Python (tp, state) pair anyway, and the upkeep
doubles the cost of every state update — so :class:`ReplicaFetcher` keeps the ordered map.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from replica_core._fast import load
from replica_core.fetcher.partition_states import (
    FETCHING,
    PartitionFetchState,
    PartitionStates,
    TopicPartition,
)

__all__ = ["ColumnarPartitionStates"]


class _Columns:
    """The arrays the kernel works on (see ``_fetch_order.pyx`` for the layout)."""

    __slots__ = ("state", "delay_until", "lag", "nxt", "prv", "ends")

    def __init__(self, capacity: int, kernels: Any, old: _Columns | None = None) -> None:
        self.state = np.zeros(capacity, np.uint8)
        self.delay_until = np.full(capacity, kernels.NO_DELAY, np.int64)
        self.lag = np.full(capacity, kernels.UNKNOWN_LAG, np.int64)
        self.nxt = np.full(capacity, -1, np.int64)
        self.prv = np.full(capacity, -1, np.int64)
        self.ends = np.full(2, -1, np.int64)
        if old is not None:
            n = len(old.state)
            for name in ("state", "delay_until", "lag", "nxt", "prv"):
                getattr(self, name)[:n] = getattr(old, name)
            self.ends[:] = old.ends


class ColumnarPartitionStates(PartitionStates[TopicPartition, PartitionFetchState]):
    """:class:`PartitionStates` of :class:`PartitionFetchState` with a columnar mirror."""

    __slots__ = ("_kmod", "_k", "_cols", "_rows", "_tps", "_sts", "_free", "_out", "_fetching",
                 "_truncating", "_no_delay", "_unknown_lag")

    def __init__(self, states: Mapping[TopicPartition, PartitionFetchState]
                 | Iterable[tuple[TopicPartition, PartitionFetchState]] | None = None, *,
                 capacity: int = 64, pure: bool | None = None) -> None:
        self._kmod = load("_fetch_order", "fetch_order_py", pure=pure)
        self._fetching = self._kmod.ST_FETCHING
        self._truncating = self._kmod.ST_TRUNCATING
        self._no_delay = self._kmod.NO_DELAY
        self._unknown_lag = self._kmod.UNKNOWN_LAG
        self._reset(max(1, int(capacity)))
        super().__init__(states)

    # -- storage --------------------------------------------------------------------------------
    def _reset(self, capacity: int) -> None:
        self._cols = _Columns(capacity, self._kmod)
        self._k = self._kmod.FetchOrderKernels(self._cols)
        self._out = np.empty(capacity, np.int64)
        self._rows: dict[TopicPartition, int] = {}
        self._tps: list[TopicPartition | None] = [None] * capacity
        self._sts: list[PartitionFetchState | None] = [None] * capacity  # state by row
        self._free = list(range(capacity - 1, -1, -1))

    def _grow(self) -> None:
        old = len(self._tps)
        cap = old * 2
        self._cols = _Columns(cap, self._kmod, self._cols)
        self._k = self._kmod.FetchOrderKernels(self._cols)
        self._out = np.empty(cap, np.int64)
        self._tps.extend([None] * (cap - old))
        self._sts.extend([None] * (cap - old))
        self._free.extend(range(cap - 1, old - 1, -1))

    def _new_row(self, tp: TopicPartition) -> int:
        if not self._free:
            self._grow()
        row = self._free.pop()
        self._rows[tp] = row
        self._tps[row] = tp
        return row

    def _write(self, tp: TopicPartition, s: PartitionFetchState, move: bool) -> None:
        row = self._rows.get(tp)
        if row is None:
            row = self._new_row(tp)  # first: growing the columns makes a new kernel
        self._sts[row] = s
        d = s.delay_until_ms
        lag = s.lag
        self._k.set_row(row, self._fetching if s.state is FETCHING else self._truncating,
                        self._no_delay if d is None else d,
                        self._unknown_lag if lag is None else lag, move)

    # -- mutations (the map first, then its mirror) ---------------------------------------------
    def move_to_end(self, tp: TopicPartition) -> None:
        if tp in self._map:
            super().move_to_end(tp)
            self._k.move_to_end(self._rows[tp])

    def update_and_move_to_end(self, tp: TopicPartition, state: PartitionFetchState) -> None:
        # PartitionStates.update_and_move_to_end and _write, inlined: this is the per-partition
        # upkeep of every data round.
        m = self._map
        m.pop(tp, None)
        m[tp] = state
        self._to_end(tp)
        self._note(tp, state)
        row = self._rows.get(tp)
        if row is None:
            row = self._new_row(tp)
        self._sts[row] = state
        d = state.delay_until_ms
        lag = state.lag
        self._k.set_row(row, self._fetching if state.state is FETCHING else self._truncating,
                        self._no_delay if d is None else d,
                        self._unknown_lag if lag is None else lag, True)

    def update_fetched(self, tp: TopicPartition, state: PartitionFetchState) -> None:
        super().update_fetched(tp, state)
        self._write(tp, state, True)

    def update_lag_and_move_to_end(self, tp: TopicPartition, state: PartitionFetchState) -> None:
        super().update_lag_and_move_to_end(tp, state)
        self._write(tp, state, True)

    def delay(self, tps: Iterable[TopicPartition], now_ms: int, delay_ms: int) -> None:
        # PartitionStates.delay as its per-partition definition, each row written as it moves
        state_value = self.state_value
        for tp in tps:
            state = state_value(tp)
            if state is not None and not state.is_delayed(now_ms):
                self.update_and_move_to_end(tp, state.delayed(now_ms, delay_ms))

    def update(self, tp: TopicPartition, state: PartitionFetchState) -> None:
        super().update(tp, state)
        self._write(tp, state, False)

    def remove(self, tp: TopicPartition) -> None:
        super().remove(tp)
        row = self._rows.pop(tp, None)
        if row is not None:
            self._k.free_row(row)
            self._tps[row] = None
            self._sts[row] = None
            self._free.append(row)

    def clear(self) -> None:
        super().clear()
        self._reset(len(self._tps))

    def set(self, states: Mapping[TopicPartition, PartitionFetchState]
            | Iterable[tuple[TopicPartition, PartitionFetchState]]) -> None:
        super().set(states)
        self._reset(max(len(self._tps), len(self._map)))
        for tp, s in self._map.items():
            self._write(tp, s, True)

    # -- whole-map passes (kernels) -------------------------------------------------------------
    def ready_items(self, now_ms: int) -> list[tuple[TopicPartition, PartitionFetchState]]:
        rows = self._out[:self._k.ready_in_order(now_ms, self._out)].tolist()
        return list(zip(map(self._tps.__getitem__, rows), map(self._sts.__getitem__, rows),
                        strict=True))

    def truncating_items(self, now_ms: int) -> list[tuple[TopicPartition, PartitionFetchState]]:
        rows = self._out[:self._k.truncating_in_order(now_ms, self._out)].tolist()
        return list(zip(map(self._tps.__getitem__, rows), map(self._sts.__getitem__, rows),
                        strict=True))

    def next_due(self, now_ms: int) -> int | None:
        due = self._k.next_due(now_ms)
        return None if due == self._no_delay else int(due)

    def max_state_lag(self) -> int:
        return int(self._k.max_lag())

    def row_order(self) -> list[TopicPartition]:
        """The partitions in the columns' order (equals the map's; for tests)."""
        k = self._k.order(self._out)
        tps = self._tps
        return [tps[r] for r in self._out[:k].tolist()]  # type: ignore[misc]
