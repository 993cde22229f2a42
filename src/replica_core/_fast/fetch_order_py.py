"""Plain-Python twin of ``_fetch_order.pyx``: the reference for follower fetch ordering and lag.

Same class, same methods, same results, written as plain loops over the columns so each rule
reads like Kafka's code (KAFKA_SEMANTICS §7.3 ``PartitionStates``, §7.5 ``isReadyForFetch``, §7.8
``ConsumerLag``/``MaxLag``). See the compiled module for the column layout.
"""
from __future__ import annotations

from typing import Any

ST_FREE = 0
ST_FETCHING = 1
ST_TRUNCATING = 2
NO_DELAY = -(2**63)
UNKNOWN_LAG = -(2**63)

_COLUMNS = (("state", "uint8"), ("delay_until", "int64"), ("lag", "int64"), ("nxt", "int64"),
            ("prv", "int64"))


def _column(a: Any, dtype: str, n: int) -> Any:
    if str(a.dtype) != dtype or a.ndim != 1 or not a.flags.c_contiguous or a.shape[0] < n:
        raise ValueError(f"column must be a C-contiguous 1-d {dtype} array of length >= {n}")
    return a


class FetchOrderKernels:
    """Ordering and lag passes over one set of fetch-state columns (plain loops)."""

    def __init__(self, cols: Any) -> None:
        n = int(cols.state.shape[0])
        self.capacity = n
        self.st = _column(cols.state, "uint8", n)
        self.delay = _column(cols.delay_until, "int64", n)
        self.lagc = _column(cols.lag, "int64", n)
        self.nxt = _column(cols.nxt, "int64", n)
        self.prv = _column(cols.prv, "int64", n)
        self.ends = _column(cols.ends, "int64", 2)

    def _check(self, row: int) -> None:
        if row < 0 or row >= self.capacity:
            raise IndexError(f"row {row} outside [0, {self.capacity})")

    # ---- the order (a linked list over rows) -------------------------------------------------
    def _unlink(self, row: int) -> None:
        p, n = int(self.prv[row]), int(self.nxt[row])
        if p >= 0:
            self.nxt[p] = n
        else:
            self.ends[0] = n
        if n >= 0:
            self.prv[n] = p
        else:
            self.ends[1] = p
        self.prv[row] = -1
        self.nxt[row] = -1

    def _push_back(self, row: int) -> None:
        tail = int(self.ends[1])
        self.prv[row] = tail
        self.nxt[row] = -1
        if tail >= 0:
            self.nxt[tail] = row
        else:
            self.ends[0] = row
        self.ends[1] = row

    def _linked(self, row: int) -> bool:
        return bool(self.prv[row] >= 0 or self.ends[0] == row)

    def _move_to_end(self, row: int) -> None:
        if not self._linked(row):
            self._push_back(row)
        elif self.ends[1] != row:
            self._unlink(row)
            self._push_back(row)

    def move_to_end(self, row: int) -> None:
        """Move ``row`` last, linking it if it was not (``updateAndMoveToEnd``'s reordering)."""
        self._check(row)
        self._move_to_end(row)

    def move_rows_to_end(self, rows: Any, k: int) -> None:
        """``move_to_end`` for ``rows[:k]`` in that order."""
        if k < 0 or k > len(rows):
            raise ValueError("k outside the rows")
        picked = [int(r) for r in rows[:k]]
        for r in picked:
            self._check(r)
        for r in picked:
            self._move_to_end(r)

    def is_linked(self, row: int) -> bool:
        """Whether ``row`` is in the order."""
        self._check(row)
        return self._linked(row)

    def set_row(self, row: int, state: int, delay_until: int, lag: int, move: bool) -> None:
        """Write one row's state, delay and lag; an unlinked row is linked last, a linked one is
        moved last if ``move`` (``updateAndMoveToEnd``) and keeps its place otherwise
        (``update``)."""
        self._check(row)
        if state not in (ST_FETCHING, ST_TRUNCATING):
            raise ValueError(f"state {state} is neither ST_FETCHING nor ST_TRUNCATING")
        self.st[row] = state
        self.delay[row] = delay_until
        self.lagc[row] = lag
        if not self._linked(row):
            self._push_back(row)
        elif move and self.ends[1] != row:
            self._unlink(row)
            self._push_back(row)

    def free_row(self, row: int) -> None:
        """Unlink ``row`` (if linked) and mark it unused."""
        self._check(row)
        if self._linked(row):
            self._unlink(row)
        self.st[row] = ST_FREE
        self.delay[row] = NO_DELAY
        self.lagc[row] = UNKNOWN_LAG

    def _walk(self) -> list[int]:
        rows = []
        r = int(self.ends[0])
        while r >= 0:
            rows.append(r)
            r = int(self.nxt[r])
        return rows

    def _emit(self, rows: list[int], out: Any) -> int:
        k = min(len(rows), len(out))
        out[:k] = rows[:k]
        return k

    def order(self, out: Any) -> int:
        """Every linked row in order into ``out``; returns the count."""
        return self._emit(self._walk(), out)

    # ---- selections ---------------------------------------------------------------------------
    def ready_in_order(self, now: int, out: Any) -> int:
        """Rows Fetching and not delayed, in fair order (``isReadyForFetch``, §7.5); the count."""
        return self._emit([r for r in self._walk() if self.st[r] == ST_FETCHING
                           and self.delay[r] <= now], out)

    def truncating_in_order(self, now: int, out: Any) -> int:
        """Rows Truncating and not delayed (``isTruncating``, §7.4), in order; the count."""
        return self._emit([r for r in self._walk() if self.st[r] == ST_TRUNCATING
                           and self.delay[r] <= now], out)

    def next_due(self, now: int) -> int:
        """The earliest delay still in the future, ``NO_DELAY`` if none."""
        due = [int(self.delay[i]) for i in range(self.capacity)
               if self.st[i] != ST_FREE and self.delay[i] > now]
        return min(due) if due else NO_DELAY

    # ---- lag (§7.8) ---------------------------------------------------------------------------
    def set_lags(self, rows: Any, high_watermark: Any, next_offset: Any, k: int) -> int:
        """``lag = max(0, leaderHW − nextOffset)`` for ``rows[:k]``; returns the largest (0 if
        ``k`` is 0)."""
        if k < 0 or k > len(rows) or k > len(high_watermark) or k > len(next_offset):
            raise ValueError("k outside the inputs")
        for i in range(k):
            self._check(int(rows[i]))
        best = 0
        for i in range(k):
            lag = max(0, int(high_watermark[i]) - int(next_offset[i]))
            self.lagc[int(rows[i])] = lag
            best = max(best, lag)
        return best

    def max_lag(self) -> int:
        """The largest known lag over used rows, 0 when none is known (``MaxLag``)."""
        return max([0] + [int(self.lagc[i]) for i in range(self.capacity)
                          if self.st[i] != ST_FREE])
