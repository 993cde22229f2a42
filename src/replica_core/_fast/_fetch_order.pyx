# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Follower fetch ordering and lag over columnar fetch state (KAFKA_SEMANTICS §7.3, §7.5, §7.8).

Twin: ``fetch_order_py.py`` (same class, same results). The columns belong to the caller
(``replica_core.fetcher.columnar.ColumnarPartitionStates`` or the benchmark); this object holds
them and raw pointers into them, so a per-partition update from Python is one method call with
ints and no allocation, and the whole-table passes are plain C loops.

Layout, one row per partition (rows are recycled by the owner):

* ``state``        uint8  — ``ST_FREE`` (row unused), ``ST_FETCHING`` or ``ST_TRUNCATING``
* ``delay_until``  int64  — due time of the partition's delay (``NO_DELAY`` = not delayed)
* ``lag``          int64  — last known lag (``UNKNOWN_LAG`` = not known yet)
* ``nxt``/``prv``  int64  — the fair order (Kafka's PartitionStates, a LinkedHashMap) as a
  doubly linked list over rows; -1 ends it
* ``ends``         int64[2] — head and tail rows of that list (-1 when empty)

A partition is *delayed* while ``delay_until > now`` (``DelayedItem.getDelay > 0``), so
``NO_DELAY`` (the smallest int64) is never delayed.
"""
from libc.stdint cimport INT64_MIN, int64_t, uint8_t

cdef enum:
    C_ST_FREE = 0
    C_ST_FETCHING = 1
    C_ST_TRUNCATING = 2

cdef int64_t C_NO_DELAY = INT64_MIN
cdef int64_t C_UNKNOWN_LAG = INT64_MIN

ST_FREE = C_ST_FREE
ST_FETCHING = C_ST_FETCHING
ST_TRUNCATING = C_ST_TRUNCATING
NO_DELAY = C_NO_DELAY
UNKNOWN_LAG = C_UNKNOWN_LAG


cdef object _column(object a, object dtype, Py_ssize_t n):
    if a.dtype != dtype or a.ndim != 1 or not a.flags.c_contiguous or a.shape[0] < n:
        raise ValueError(f"column must be a C-contiguous 1-d {dtype} array of length >= {n}")
    return a


cdef class FetchOrderKernels:
    """Ordering and lag passes over one set of fetch-state columns."""

    cdef readonly Py_ssize_t capacity
    cdef object _keep
    cdef uint8_t* st
    cdef int64_t* delay
    cdef int64_t* lagc
    cdef int64_t* nxt
    cdef int64_t* prv
    cdef int64_t* ends

    def __init__(self, cols):
        import numpy as np
        cdef Py_ssize_t n = cols.state.shape[0]
        state = _column(cols.state, np.dtype(np.uint8), n)
        delay = _column(cols.delay_until, np.dtype(np.int64), n)
        lag = _column(cols.lag, np.dtype(np.int64), n)
        nxt = _column(cols.nxt, np.dtype(np.int64), n)
        prv = _column(cols.prv, np.dtype(np.int64), n)
        ends = _column(cols.ends, np.dtype(np.int64), 2)
        self._keep = (state, delay, lag, nxt, prv, ends)
        self.capacity = n
        cdef uint8_t[::1] s = state
        cdef int64_t[::1] d = delay, lg = lag, nx = nxt, pv = prv, e = ends
        self.st = &s[0] if n else NULL
        self.delay = &d[0] if n else NULL
        self.lagc = &lg[0] if n else NULL
        self.nxt = &nx[0] if n else NULL
        self.prv = &pv[0] if n else NULL
        self.ends = &e[0]

    cdef inline int _check(self, Py_ssize_t row) except -1:
        if row < 0 or row >= self.capacity:
            raise IndexError(f"row {row} outside [0, {self.capacity})")
        return 0

    # ---- the order (a linked list over rows) -------------------------------------------------
    cdef inline void _unlink(self, Py_ssize_t row) noexcept nogil:
        cdef int64_t p = self.prv[row], n = self.nxt[row]
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

    cdef inline void _push_back(self, Py_ssize_t row) noexcept nogil:
        cdef int64_t tail = self.ends[1]
        self.prv[row] = tail
        self.nxt[row] = -1
        if tail >= 0:
            self.nxt[tail] = row
        else:
            self.ends[0] = row
        self.ends[1] = row

    cdef inline bint _linked(self, Py_ssize_t row) noexcept nogil:
        return self.prv[row] >= 0 or self.ends[0] == row

    def move_to_end(self, Py_ssize_t row):
        """Move ``row`` last, linking it if it was not (``updateAndMoveToEnd``'s reordering)."""
        self._check(row)
        if not self._linked(row):
            self._push_back(row)
        elif self.ends[1] != row:
            self._unlink(row)
            self._push_back(row)

    def move_rows_to_end(self, const int64_t[::1] rows, Py_ssize_t k):
        """``move_to_end`` for ``rows[:k]`` in that order."""
        cdef Py_ssize_t i, r
        if k < 0 or k > rows.shape[0]:
            raise ValueError("k outside the rows")
        for i in range(k):
            self._check(rows[i])
        with nogil:
            for i in range(k):
                r = rows[i]
                if not self._linked(r):
                    self._push_back(r)
                elif self.ends[1] != r:
                    self._unlink(r)
                    self._push_back(r)

    def is_linked(self, Py_ssize_t row):
        """Whether ``row`` is in the order."""
        self._check(row)
        return self._linked(row)

    def set_row(self, Py_ssize_t row, int state, int64_t delay_until, int64_t lag, bint move):
        """Write one row's state, delay and lag; an unlinked row is linked last, a linked one is
        moved last if ``move`` (``updateAndMoveToEnd``) and keeps its place otherwise
        (``update``)."""
        self._check(row)
        if state != C_ST_FETCHING and state != C_ST_TRUNCATING:
            raise ValueError(f"state {state} is neither ST_FETCHING nor ST_TRUNCATING")
        self.st[row] = <uint8_t>state
        self.delay[row] = delay_until
        self.lagc[row] = lag
        if not self._linked(row):
            self._push_back(row)
        elif move and self.ends[1] != row:
            self._unlink(row)
            self._push_back(row)

    def free_row(self, Py_ssize_t row):
        """Unlink ``row`` (if linked) and mark it unused."""
        self._check(row)
        if self._linked(row):
            self._unlink(row)
        self.st[row] = C_ST_FREE
        self.delay[row] = C_NO_DELAY
        self.lagc[row] = C_UNKNOWN_LAG

    def order(self, int64_t[::1] out):
        """Every linked row in order into ``out``; returns the count."""
        cdef Py_ssize_t k = 0, cap = out.shape[0]
        cdef int64_t r
        with nogil:
            r = self.ends[0]
            while r >= 0 and k < cap:
                out[k] = r
                k += 1
                r = self.nxt[r]
        return k

    # ---- selections ---------------------------------------------------------------------------
    def ready_in_order(self, int64_t now, int64_t[::1] out):
        """Rows Fetching and not delayed, in fair order (``isReadyForFetch``, §7.5); the count."""
        cdef Py_ssize_t k = 0, cap = out.shape[0]
        cdef int64_t r
        with nogil:
            r = self.ends[0]
            while r >= 0 and k < cap:
                if self.st[r] == C_ST_FETCHING and self.delay[r] <= now:
                    out[k] = r
                    k += 1
                r = self.nxt[r]
        return k

    def truncating_in_order(self, int64_t now, int64_t[::1] out):
        """Rows Truncating and not delayed (``isTruncating``, §7.4), in order; the count."""
        cdef Py_ssize_t k = 0, cap = out.shape[0]
        cdef int64_t r
        with nogil:
            r = self.ends[0]
            while r >= 0 and k < cap:
                if self.st[r] == C_ST_TRUNCATING and self.delay[r] <= now:
                    out[k] = r
                    k += 1
                r = self.nxt[r]
        return k

    def next_due(self, int64_t now):
        """The earliest delay still in the future, ``NO_DELAY`` if none."""
        cdef Py_ssize_t i
        cdef int64_t best = C_NO_DELAY, d
        with nogil:
            for i in range(self.capacity):
                if self.st[i] != C_ST_FREE:
                    d = self.delay[i]
                    if d > now and (best == C_NO_DELAY or d < best):
                        best = d
        return best

    # ---- lag (§7.8) ---------------------------------------------------------------------------
    def set_lags(self, const int64_t[::1] rows, const int64_t[::1] high_watermark,
                 const int64_t[::1] next_offset, Py_ssize_t k):
        """``lag = max(0, leaderHW − nextOffset)`` for ``rows[:k]``; returns the largest (0 if
        ``k`` is 0)."""
        cdef Py_ssize_t i
        cdef int64_t lag, best = 0
        if k < 0 or k > rows.shape[0] or k > high_watermark.shape[0] or k > next_offset.shape[0]:
            raise ValueError("k outside the inputs")
        for i in range(k):
            self._check(rows[i])
        with nogil:
            for i in range(k):
                lag = high_watermark[i] - next_offset[i]
                if lag < 0:
                    lag = 0
                self.lagc[rows[i]] = lag
                if lag > best:
                    best = lag
        return best

    def max_lag(self):
        """The largest known lag over used rows, 0 when none is known (``MaxLag``)."""
        cdef Py_ssize_t i
        cdef int64_t best = 0, lag
        with nogil:
            for i in range(self.capacity):
                if self.st[i] != C_ST_FREE:
                    lag = self.lagc[i]
                    if lag > best:
                        best = lag
        return best
