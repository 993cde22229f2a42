# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Leader-side replication kernels over columnar state (KAFKA_SEMANTICS §6.2-§6.6).

Twin: ``replica_state_py.py`` (same class, same results). The arrays belong to
``replica_core.replication.state.ReplicaStateTable``; this object holds them and raw pointers
into them, so one follower-fetch update from Python is one method call with ints and no
allocation, and the whole-table passes are plain C loops without the GIL.

Layout: per-partition columns have length P; per-(partition, slot) columns are C-contiguous
(P, R) arrays used flat, slot ``r`` of partition ``p`` at ``p * R + r``. Slot 0 is the local
leader; follower slots are ``1 .. n_replicas[p] - 1``; padding slots have every flag 0.
"""
cimport cython
cimport numpy as cnp
from libc.stdint cimport INT64_MIN, int32_t, int64_t, uint8_t
from libc.stdlib cimport free, malloc
from libc.string cimport memset

cnp.import_array()

cdef enum:
    ST_COMMITTED = 0

COMMITTED = ST_COMMITTED  # IsrState.COMMITTED

# follower_fetch_hw's answer, as bit flags
cdef enum:
    FF_LEO_CHANGED = 1  # the follower's LEO moved
    FF_EXPAND = 2       # the follower may join the ISR: the HW was left to the caller
    FF_HW_MOVED = 4     # the HW advanced (hw[p] holds the new value)

FETCH_LEO_CHANGED = FF_LEO_CHANGED
FETCH_EXPAND = FF_EXPAND
FETCH_HW_MOVED = FF_HW_MOVED

# lead_rows' per-row flags
cdef enum:
    LR_KEPT_ROW = 1    # the row exists (this broker leads already): its followers keep their state
    LR_NEW_EPOCH = 2   # a kept row starts a new leader epoch
    LR_NEW_LEADER = 4  # ... as a NEW leader (the followers' fetch state is forgotten)

LEAD_KEPT_ROW = LR_KEPT_ROW
LEAD_NEW_EPOCH = LR_NEW_EPOCH
LEAD_NEW_LEADER = LR_NEW_LEADER

# the fill values of a cleared row (ReplicaStateTable's column fills)
cdef enum:
    UNKNOWN_OFFSET = -1  # a follower's LEO / log start / lastFetchLeaderLogEndOffset unknown
    NO_BROKER_EPOCH = -2  # no broker epoch stored yet

# A leader's fetch session as one C-contiguous (SESSION_COLUMNS, capacity) int64 block, one row
# per column (``FetchSession.columns``): the session kernels take it as a single buffer.
cdef enum:
    S_ORDER = 0           # column indexes in session order (the first n are live)
    S_ROWS = 1            # state-table row, -1 where not led here
    S_SLOTS = 2           # the follower's replica slot in that row
    S_FETCH_OFFSET = 3    # the request's fetch offset
    S_LOG_START = 4       # the follower's log start offset
    S_SENT_HW = 5         # the HW last sent (-1: none / after an error)
    S_SENT_LOG_START = 6  # the leader's log start last sent
    S_REQ_EPOCH = 7       # the request's current leader epoch
    S_OUT = 8             # kernel output: the columns picked, in session order
    S_MARK = 9            # stamps on columns that may have changed (FetchSession.new_stamp)
    SESSION_COLUMNS = 10

SESSION_ORDER = S_ORDER
SESSION_ROWS = S_ROWS
SESSION_SLOTS = S_SLOTS
SESSION_FETCH_OFFSET = S_FETCH_OFFSET
SESSION_LOG_START = S_LOG_START
SESSION_SENT_HW = S_SENT_HW
SESSION_SENT_LOG_START = S_SENT_LOG_START
SESSION_REQ_EPOCH = S_REQ_EPOCH
SESSION_OUT = S_OUT
SESSION_MARK = S_MARK
SESSION_ROW_COUNT = SESSION_COLUMNS
EVERY_COLUMN = INT64_MIN  # session_fetch's ``since`` checking every column in full


# Typed pointers, copied into locals by every loop: stores through the uint8 outputs (a char
# type, which may alias anything) then cannot force the column pointers to be reloaded.
cdef struct Cols:
    Py_ssize_t R
    int64_t* leader_leo
    int64_t* hw
    int32_t* epoch
    int64_t* epoch_start
    int32_t* min_isr
    int32_t* n_rep
    uint8_t* state
    uint8_t* active
    int64_t* leo
    int64_t* lso
    int64_t* lfl
    int64_t* lft
    int64_t* lcu
    int64_t* bep
    uint8_t* in_isr
    uint8_t* in_max
    uint8_t* elig
    int32_t* rid


cdef inline bint _has_news(Cols c, int64_t p, int64_t f, int64_t sent_hw, int64_t sent_log_start,
                           int64_t req_epoch) noexcept nogil:
    """A session column has something to send (a parked fetch's rule): led here (row ``p``)
    with records past the fetch offset ``f``, a HW, log start or epoch other than the one last
    sent; or not led here (``p < 0``) though fetched (``f >= 0``): answered with the error."""
    if p < 0:
        return f >= 0
    return (c.leader_leo[p] != f or c.hw[p] != sent_hw or c.lso[p * c.R] != sent_log_start
            or c.epoch[p] != req_epoch)


cdef inline bint _fetch(Cols c, Py_ssize_t i, int64_t fetch_offset, int64_t follower_log_start,
                        int64_t fetch_time_ms, int64_t leader_end_offset,
                        int64_t broker_epoch) noexcept nogil:
    """Replica.updateFetchStateOrThrow (§6.2) on flat slot ``i``; True iff LEO changed."""
    cdef int64_t lcu = c.lcu[i], prev_lfl = c.lfl[i], prev_leo = c.leo[i]
    if fetch_offset >= leader_end_offset:
        if fetch_time_ms > lcu:
            lcu = fetch_time_ms
    elif fetch_offset >= prev_lfl:
        if c.lft[i] > lcu:
            lcu = c.lft[i]
    c.lcu[i] = lcu
    c.lfl[i] = leader_end_offset if leader_end_offset > prev_lfl else prev_lfl
    c.lft[i] = fetch_time_ms
    c.leo[i] = fetch_offset
    c.lso[i] = follower_log_start
    c.bep[i] = broker_epoch
    return prev_leo != fetch_offset


cdef inline bint _caught_up(Cols c, Py_ssize_t p, Py_ssize_t i, int64_t now_ms,
                            int64_t max_lag_ms) noexcept nogil:
    """Replica.isCaughtUp (§6.3)."""
    return c.leo[i] == c.leader_leo[p] or now_ms - c.lcu[i] <= max_lag_ms


cdef inline int64_t _hw(Cols c, Py_ssize_t p, int64_t now_ms, int64_t max_lag_ms) noexcept nogil:
    """maybeIncrementLeaderHW's target (§6.4): never below the current HW."""
    cdef Py_ssize_t base = p * c.R, r, i
    cdef int32_t nrep = c.n_rep[p], isr_size = 0, eff_min = c.min_isr[p]
    cdef int64_t old = c.hw[p], lleo = c.leader_leo[p], cand = lleo, leo
    for r in range(nrep):
        isr_size += c.in_isr[base + r]
    if nrep < eff_min:
        eff_min = nrep
    if isr_size < eff_min:
        return old  # under min ISR: no advance (KAFKA-15583)
    for r in range(1, nrep):
        i = base + r
        leo = c.leo[i]
        # Maximal ISR members hold the HW; so do caught-up eligible followers outside it
        # (KAFKA-15021: ineligible ones do not).
        if leo < cand and (c.in_max[i] or (c.elig[i] and (leo == lleo
                                                          or now_ms - c.lcu[i] <= max_lag_ms))):
            cand = leo
    return cand if cand > old else old


cdef inline Py_ssize_t _oos_row(Cols c, Py_ssize_t p, int64_t now_ms, int64_t max_lag_ms,
                                uint8_t* out_mask) noexcept nogil:
    """Partition.getOutOfSyncReplicas (§6.6) into ``out_mask`` row ``p`` (already zeroed)."""
    cdef Py_ssize_t base = p * c.R, r, i, count = 0
    if c.state[p] != ST_COMMITTED:
        return 0  # nothing is computed while an AlterPartition is in flight
    for r in range(1, c.n_rep[p]):
        i = base + r
        if c.in_isr[i] and not _caught_up(c, p, i, now_ms, max_lag_ms):
            out_mask[i] = 1
            count += 1
    return count


cdef inline Py_ssize_t _hw_oos_row(Cols c, Py_ssize_t p, int64_t now_ms, int64_t max_lag_ms,
                                   int64_t* new_hw, uint8_t* out_mask) noexcept nogil:
    """``_hw`` and ``_oos_row`` for row ``p`` with isCaughtUp computed once per follower."""
    cdef Py_ssize_t base = p * c.R, r, i, count = 0
    cdef int32_t nrep = c.n_rep[p], isr_size = c.in_isr[base], eff_min = c.min_isr[p]
    cdef int64_t old = c.hw[p], lleo = c.leader_leo[p], cand = lleo, leo
    cdef bint caught, committed = c.state[p] == ST_COMMITTED
    for r in range(1, nrep):
        i = base + r
        leo = c.leo[i]
        caught = leo == lleo or now_ms - c.lcu[i] <= max_lag_ms
        isr_size += c.in_isr[i]
        if leo < cand and (c.in_max[i] or (c.elig[i] and caught)):
            cand = leo
        if committed and c.in_isr[i] and not caught:
            out_mask[i] = 1
            count += 1
    if nrep < eff_min:
        eff_min = nrep
    new_hw[0] = cand if isr_size >= eff_min and cand > old else old
    return count


cdef inline bint _expand(Cols c, Py_ssize_t p, Py_ssize_t i) noexcept nogil:
    """Partition.needsExpandIsr (§6.5)."""
    cdef int64_t leo = c.leo[i], start = c.epoch_start[p]
    return (c.state[p] == ST_COMMITTED and not c.in_isr[i] and c.elig[i]
            and leo >= c.hw[p] and start >= 0 and leo >= start)


cdef inline int _expand_or_hw(Cols c, Py_ssize_t p, Py_ssize_t i, bint leo_changed,
                              int64_t now_ms, int64_t max_lag_ms) noexcept nogil:
    """After a follower fetch on flat slot ``i``: FF_EXPAND if the follower may join the ISR
    (the HW is then left to the caller), else the HW advanced when the LEO moved."""
    cdef int flags = FF_LEO_CHANGED if leo_changed else 0
    cdef int64_t new
    if _expand(c, p, i):
        return flags | FF_EXPAND
    if leo_changed:
        new = _hw(c, p, now_ms, max_lag_ms)
        if new > c.hw[p]:
            c.hw[p] = new
            flags |= FF_HW_MOVED
    return flags


cdef inline Py_ssize_t _max_isr_size(Cols c, Py_ssize_t p) noexcept nogil:
    cdef Py_ssize_t base = p * c.R, r, count = 0
    for r in range(c.n_rep[p]):
        count += c.in_max[base + r]
    return count


cdef list _sorted_members(Cols c, Py_ssize_t p, const uint8_t* flags):
    """Broker ids of the slots of row ``p`` whose flag is set, ascending (a list of ints)."""
    cdef Py_ssize_t base = p * c.R, r
    cdef list out = []
    for r in range(c.n_rep[p]):
        if flags[base + r]:
            out.append(c.rid[base + r])
    out.sort()
    return out


cdef object _flat(object a):
    if not a.flags.c_contiguous:
        raise ValueError("columns must be C-contiguous")
    return a.reshape(-1)


cpdef Py_ssize_t session_move_to_end(cnp.ndarray session, Py_ssize_t n,
                                     int64_t j) except -1:
    """Move column ``j`` to the end of the first ``n`` entries of the session order (closing
    its gap); its former position. ValueError if ``j`` is not among them."""
    cdef Py_ssize_t k, pos = -1
    cdef int64_t* base
    _session_block(session, n, &base)
    cdef int64_t* order = base + S_ORDER * cnp.PyArray_DIM(session, 1)
    with nogil:
        for k in range(n):
            if order[k] == j:
                pos = k
                break
        if pos >= 0:
            for k in range(pos, n - 1):
                order[k] = order[k + 1]
            order[n - 1] = j
    if pos < 0:
        raise ValueError(f"column {j} is not in the session order")
    return pos


cdef Py_ssize_t _session_block(cnp.ndarray session, Py_ssize_t n, int64_t** base) except -1:
    """A session block is a writable C-contiguous 2-D int64 array with every row and room for
    ``n`` columns: its column count, its first element in ``base``. Read through numpy's C
    API: a typed memoryview argument costs a buffer export and a format check per call, on a
    path taken several times per fetch."""
    if session is None:
        raise TypeError("a session block is a numpy array, not None")
    if (cnp.PyArray_TYPE(session) != cnp.NPY_INT64 or cnp.PyArray_NDIM(session) != 2
            or not cnp.PyArray_IS_C_CONTIGUOUS(session)):
        raise ValueError("a session block is a C-contiguous 2-D int64 array")
    if not cnp.PyArray_ISWRITEABLE(session):
        raise ValueError("the session block is read-only")
    if cnp.PyArray_DIM(session, 0) < SESSION_COLUMNS:
        raise ValueError(f"a session block has {SESSION_COLUMNS} rows, not "
                         f"{cnp.PyArray_DIM(session, 0)}")
    cdef Py_ssize_t cap = cnp.PyArray_DIM(session, 1)
    if n < 0 or n > cap:
        raise ValueError(f"{n} session entries in a block of {cap} columns")
    base[0] = <int64_t*>cnp.PyArray_DATA(session)
    return cap


cdef class ReplicaStateKernels:
    """One table's columns, with the §6 rules as methods."""

    cdef Cols c
    cdef tuple _keep
    cdef readonly Py_ssize_t num_partitions
    cdef readonly Py_ssize_t max_replicas

    def __init__(self, cols, Py_ssize_t max_replicas):
        cdef int64_t[::1] leader_leo = cols.leader_leo, hw = cols.hw
        cdef int64_t[::1] epoch_start = cols.epoch_start_offset
        cdef int32_t[::1] epoch = cols.leader_epoch
        cdef int32_t[::1] min_isr = cols.min_isr, n_rep = cols.n_replicas
        cdef uint8_t[::1] state = cols.isr_state, active = cols.active
        cdef int64_t[::1] leo = _flat(cols.leo), lso = _flat(cols.log_start_offset)
        cdef int64_t[::1] lfl = _flat(cols.last_fetch_leader_leo)
        cdef int64_t[::1] lft = _flat(cols.last_fetch_time_ms)
        cdef int64_t[::1] lcu = _flat(cols.last_caught_up_time_ms)
        cdef int64_t[::1] bep = _flat(cols.broker_epoch)
        cdef uint8_t[::1] in_isr = _flat(cols.in_isr), in_max = _flat(cols.in_max_isr)
        cdef uint8_t[::1] elig = _flat(cols.eligible)
        cdef int32_t[::1] rid = _flat(cols.replica_id)
        cdef Py_ssize_t P = leader_leo.shape[0], PR = P * max_replicas
        if max_replicas < 1 or P < 1:
            raise ValueError("need at least one partition and one replica slot")
        for n in (hw.shape[0], epoch.shape[0], epoch_start.shape[0], min_isr.shape[0], n_rep.shape[0],
                  state.shape[0], active.shape[0]):
            if n != P:
                raise ValueError("column shapes disagree")
        for n in (leo.shape[0], lso.shape[0], lfl.shape[0], lft.shape[0], lcu.shape[0],
                  bep.shape[0], in_isr.shape[0], in_max.shape[0], elig.shape[0], rid.shape[0]):
            if n != PR:
                raise ValueError("column shapes disagree")
        self.num_partitions = P
        self.max_replicas = max_replicas
        self._keep = (leader_leo, hw, epoch, epoch_start, min_isr, n_rep, state, active, leo, lso, lfl,
                      lft, lcu, bep, in_isr, in_max, elig, rid)
        self.c.R = max_replicas
        self.c.leader_leo = &leader_leo[0]
        self.c.hw = &hw[0]
        self.c.epoch = &epoch[0]
        self.c.epoch_start = &epoch_start[0]
        self.c.min_isr = &min_isr[0]
        self.c.n_rep = &n_rep[0]
        self.c.state = &state[0]
        self.c.active = &active[0]
        self.c.leo = &leo[0]
        self.c.lso = &lso[0]
        self.c.lfl = &lfl[0]
        self.c.lft = &lft[0]
        self.c.lcu = &lcu[0]
        self.c.bep = &bep[0]
        self.c.in_isr = &in_isr[0]
        self.c.in_max = &in_max[0]
        self.c.elig = &elig[0]
        self.c.rid = &rid[0]

    # ---- checks ------------------------------------------------------------------------------
    cdef inline int _check_slot(self, Py_ssize_t p, Py_ssize_t r) except -1:
        if p < 0 or p >= self.num_partitions or r < 1 or r >= self.c.n_rep[p]:
            raise IndexError(f"no follower slot ({p}, {r})")
        return 0

    cdef inline int _check_partition(self, Py_ssize_t p) except -1:
        if p < 0 or p >= self.num_partitions or not self.c.active[p]:
            raise IndexError(f"no partition {p}")
        return 0

    cdef inline int _check_bound(self, Py_ssize_t n) except -1:
        if n < 0 or n > self.num_partitions:
            raise ValueError(f"scan bound {n} outside [0, {self.num_partitions}]")
        return 0

    # ---- §6.2 follower fetch -----------------------------------------------------------------
    cpdef bint follower_fetch(self, Py_ssize_t p, Py_ssize_t r, int64_t fetch_offset,
                              int64_t follower_log_start, int64_t fetch_time_ms,
                              int64_t leader_end_offset, int64_t broker_epoch=-1) except -1:
        """Apply one follower fetch (Replica.updateFetchStateOrThrow); True iff its LEO changed."""
        self._check_slot(p, r)
        return _fetch(self.c, p * self.c.R + r, fetch_offset, follower_log_start, fetch_time_ms,
                      leader_end_offset, broker_epoch)

    cpdef int follower_fetch_hw(self, Py_ssize_t p, Py_ssize_t r, int64_t fetch_offset,
                                int64_t follower_log_start, int64_t fetch_time_ms,
                                int64_t leader_end_offset, int64_t broker_epoch,
                                int64_t max_lag_ms) except -1:
        """Partition.updateFollowerFetchState's kernel part in one call: ``follower_fetch``,
        then the ISR-expansion check, then — only when the follower may NOT join the ISR (the
        caller proposes that first, which can change the maximal ISR) and its LEO moved —
        ``maybe_increment_hw`` at ``fetch_time_ms``. Flags FETCH_LEO_CHANGED | FETCH_EXPAND |
        FETCH_HW_MOVED."""
        self._check_slot(p, r)
        cdef Py_ssize_t i = p * self.c.R + r
        return _expand_or_hw(self.c, p, i, _fetch(self.c, i, fetch_offset, follower_log_start,
                                                   fetch_time_ms, leader_end_offset,
                                                   broker_epoch),
                             fetch_time_ms, max_lag_ms)

    cpdef int expand_or_hw(self, Py_ssize_t p, Py_ssize_t r, bint leo_changed, int64_t now_ms,
                           int64_t max_lag_ms) except -1:
        """What ``follower_fetch_hw`` does after the fetch state update, for a fetch already
        applied (``leo_changed``: its LEO moved); the same flags."""
        self._check_slot(p, r)
        return _expand_or_hw(self.c, p, p * self.c.R + r, leo_changed, now_ms, max_lag_ms)

    cpdef Py_ssize_t follower_fetch_batch(self, const int64_t[::1] ps, const int64_t[::1] rs,
                                          const int64_t[::1] fetch_offsets,
                                          const int64_t[::1] follower_log_starts,
                                          const int64_t[::1] leader_end_offsets,
                                          int64_t fetch_time_ms, int64_t broker_epoch,
                                          uint8_t[::1] leo_changed) except -1:
        """Apply fetches ``k`` in order; ``leo_changed[k]`` = 1 iff LEO moved; returns their count."""
        cdef Py_ssize_t k, n = ps.shape[0], changed = 0, bad = -1, P = self.num_partitions
        cdef int64_t p, r
        cdef Cols c = self.c
        cdef uint8_t flag
        if (rs.shape[0] != n or fetch_offsets.shape[0] != n or follower_log_starts.shape[0] != n
                or leader_end_offsets.shape[0] != n or leo_changed.shape[0] < n):
            raise ValueError("batch arrays differ in length")
        with nogil:  # validate everything first: a bad entry leaves the table untouched
            for k in range(n):
                p = ps[k]
                r = rs[k]
                if p < 0 or p >= P or r < 1 or r >= c.n_rep[p]:
                    bad = k
                    break
        if bad >= 0:
            raise IndexError(f"no follower slot ({ps[bad]}, {rs[bad]})")
        with nogil:
            for k in range(n):
                flag = _fetch(c, ps[k] * c.R + rs[k], fetch_offsets[k], follower_log_starts[k],
                              fetch_time_ms, leader_end_offsets[k], broker_epoch)
                leo_changed[k] = flag
                changed += flag
        return changed

    # ---- a fetch session on the leader (KIP-227 incremental fetch + §6.2) ---------------------
    cdef Py_ssize_t _check_session(self, cnp.ndarray session, Py_ssize_t n, bint with_slots,
                                   int64_t** base) except -1:
        """The session block is one (:func:`_session_block`: its column count, its first
        element in ``base``), every ``order[k]`` (k < n) is a column index, every led row a
        partition and, ``with_slots``, a follower slot of it."""
        cdef Py_ssize_t k, j, bad = -1, bad_order = -1, P = self.num_partitions
        cdef int64_t p, r
        cdef Cols c = self.c
        cdef Py_ssize_t cap = _session_block(session, n, base)
        cdef const int64_t* order = base[0] + S_ORDER * cap
        cdef const int64_t* rows = base[0] + S_ROWS * cap
        cdef const int64_t* slots = base[0] + S_SLOTS * cap
        with nogil:
            for k in range(n):
                j = order[k]
                if j < 0 or j >= cap:
                    bad_order = k
                    break
                p = rows[j]
                if p < 0:
                    continue
                if p >= P:
                    bad = j
                    break
                if with_slots:
                    r = slots[j]
                    if r < 1 or r >= c.n_rep[p]:
                        bad = j
                        break
        if bad_order >= 0:
            raise IndexError(f"session order entry {order[bad_order]} outside the columns")
        if bad >= 0:
            if with_slots:
                raise IndexError(f"no follower slot ({rows[bad]}, {slots[bad]})")
            raise IndexError(f"no partition {rows[bad]}")
        return cap

    cpdef Py_ssize_t session_fetch(self, cnp.ndarray session, Py_ssize_t n,
                                   bint apply_quiet, int64_t fetch_time_ms,
                                   int64_t broker_epoch, int64_t since=INT64_MIN) except -1:
        """A follower's session fetch on the leader over the session's block (rows as
        ``SESSION_*``), visiting column ``j = order[k]`` for ``k < n`` (session order): writes
        to the ``out`` row, in that order, the columns to read and returns their count; a
        quiet column (led here, in the maximal ISR, caught up, same HW, log start (slot 0's)
        and epoch as last sent) gets the §6.2 fetch-state update at once when
        ``apply_quiet``. Not led here (``rows[j] < 0``): read, to answer its error. A column
        marked below ``since`` (``mark[j] < since``) is quiet without a look (the caller's
        promise: it was checked and quiet at the session's last scan, and nothing compared
        has changed since — its row, slot and session values, the row's replica count, the
        follower's LEO and maximal-ISR flag, the leader's LEO, HW, log start and epoch).

        One pass checks each column it looks at as ``_check_session`` does (the first bad one,
        in session order, raises before anything is written) and sorts it into picked or
        quiet, reading the state only; the quiet columns' updates follow, in session order.
        That is the update-as-you-go result: an update writes no value the pass compares (a
        quiet follower's LEO is the fetch offset already; its slot is never slot 0, whose log
        start is compared; its times, leader-LEO mark and broker epoch are not compared)."""
        cdef Py_ssize_t k, j, m = 0, q, t, bad = -1, bad_order = -1, P = self.num_partitions
        cdef int64_t p, f, r, i
        cdef Cols c = self.c
        cdef int64_t* base
        cdef Py_ssize_t cap = _session_block(session, n, &base)
        if n == 0:
            return 0
        cdef const int64_t* order = base + S_ORDER * cap
        cdef const int64_t* rows = base + S_ROWS * cap
        cdef const int64_t* slots = base + S_SLOTS * cap
        cdef const int64_t* fetch_offsets = base + S_FETCH_OFFSET * cap
        cdef const int64_t* log_starts = base + S_LOG_START * cap
        cdef const int64_t* sent_hw = base + S_SENT_HW * cap
        cdef const int64_t* sent_log_start = base + S_SENT_LOG_START * cap
        cdef const int64_t* req_epochs = base + S_REQ_EPOCH * cap
        cdef const int64_t* mark = base + S_MARK * cap
        cdef int64_t* out = base + S_OUT * cap
        # picked columns from the front, quiet ones from the back (in reverse session order)
        cdef int64_t* sorted_cols = <int64_t*>malloc(n * sizeof(int64_t))
        if sorted_cols == NULL:
            raise MemoryError()
        q = n
        with nogil:
            for k in range(n):
                j = order[k]
                if j < 0 or j >= cap:
                    bad_order = k
                    break
                if mark[j] < since:
                    q -= 1
                    sorted_cols[q] = j
                    continue
                p = rows[j]
                if p < 0:
                    sorted_cols[m] = j
                    m += 1
                    continue
                r = slots[j]
                if p >= P or r < 1 or r >= c.n_rep[p]:
                    bad = j
                    break
                f = fetch_offsets[j]
                i = p * c.R + r
                if (c.leader_leo[p] != f or c.hw[p] != sent_hw[j] or c.leo[i] != f
                        or c.lso[p * c.R] != sent_log_start[j]
                        or c.epoch[p] != req_epochs[j] or not c.in_max[i]):
                    sorted_cols[m] = j
                    m += 1
                else:
                    q -= 1
                    sorted_cols[q] = j
            if bad_order < 0 and bad < 0:
                for t in range(m):
                    out[t] = sorted_cols[t]
                if apply_quiet:
                    t = n - 1
                    while t >= q:
                        j = sorted_cols[t]
                        f = fetch_offsets[j]  # the leader's LEO too: the column is quiet
                        _fetch(c, rows[j] * c.R + slots[j], f, log_starts[j], fetch_time_ms, f,
                               broker_epoch)
                        t -= 1
        free(sorted_cols)
        if bad_order >= 0:
            raise IndexError(f"session order entry {order[bad_order]} outside the columns")
        if bad >= 0:
            raise IndexError(f"no follower slot ({rows[bad]}, {slots[bad]})")
        return m

    cpdef Py_ssize_t session_pending(self, cnp.ndarray session, Py_ssize_t n) except -1:
        """A parked session fetch: the columns ``order[k]`` (``k < n``) with something to send
        now, written in order to the ``out`` row; their count — led here with new records, a
        new HW, log start or epoch, or fetched but no longer led here (``rows[j] < 0``,
        ``fetch_offsets[j] >= 0``: answered with the error)."""
        cdef Py_ssize_t k, j, m = 0
        cdef int64_t p, f
        cdef Cols c = self.c
        cdef int64_t* base
        cdef Py_ssize_t cap = self._check_session(session, n, False, &base)
        if n == 0:
            return 0
        cdef const int64_t* order = base + S_ORDER * cap
        cdef const int64_t* rows = base + S_ROWS * cap
        cdef const int64_t* fetch_offsets = base + S_FETCH_OFFSET * cap
        cdef const int64_t* sent_hw = base + S_SENT_HW * cap
        cdef const int64_t* sent_log_start = base + S_SENT_LOG_START * cap
        cdef const int64_t* req_epochs = base + S_REQ_EPOCH * cap
        cdef int64_t* out = base + S_OUT * cap
        with nogil:
            for k in range(n):
                j = order[k]
                p = rows[j]
                if _has_news(c, p, fetch_offsets[j], sent_hw[j], sent_log_start[j],
                             req_epochs[j]):
                    out[m] = j
                    m += 1
        return m

    cpdef Py_ssize_t session_pending_marked(self, cnp.ndarray session, Py_ssize_t n,
                                            int64_t stamp) except -1:
        """``session_pending`` over the columns marked ``stamp`` only (``mark[j] == stamp``):
        the marked columns ``order[k]`` (``k < n``) with something to send now, written in
        session order to the ``out`` row; their count. Only the order and mark rows are read
        for the others (and only the marked columns are checked)."""
        cdef Py_ssize_t k, j, t, m = 0, picked = 0, bad = -1, bad_order = -1, cap
        cdef Py_ssize_t P = self.num_partitions
        cdef int64_t p, f
        cdef Cols c = self.c
        cdef int64_t* base
        cap = _session_block(session, n, &base)
        if n == 0:
            return 0
        cdef const int64_t* order = base + S_ORDER * cap
        cdef const int64_t* rows = base + S_ROWS * cap
        cdef const int64_t* fetch_offsets = base + S_FETCH_OFFSET * cap
        cdef const int64_t* sent_hw = base + S_SENT_HW * cap
        cdef const int64_t* sent_log_start = base + S_SENT_LOG_START * cap
        cdef const int64_t* req_epochs = base + S_REQ_EPOCH * cap
        cdef const int64_t* mark = base + S_MARK * cap
        cdef int64_t* out = base + S_OUT * cap
        with nogil:
            # the marked columns in session order (checked), then the rule over them
            for k in range(n):
                j = order[k]
                if j < 0 or j >= cap:
                    bad_order = k
                    break
                if mark[j] == stamp:
                    if rows[j] >= P:
                        bad = j
                        break
                    out[picked] = j
                    picked += 1
            if bad_order < 0 and bad < 0:
                for t in range(picked):
                    j = out[t]
                    if _has_news(c, rows[j], fetch_offsets[j], sent_hw[j], sent_log_start[j],
                                 req_epochs[j]):
                        out[m] = j
                        m += 1
        if bad_order >= 0:
            raise IndexError(f"session order entry {order[bad_order]} outside the columns")
        if bad >= 0:
            raise IndexError(f"no partition {rows[bad]}")
        return m

    # ---- §6.3 isCaughtUp ---------------------------------------------------------------------
    cpdef bint is_caught_up(self, Py_ssize_t p, Py_ssize_t r, int64_t now_ms,
                            int64_t max_lag_ms) except -1:
        """Replica.isCaughtUp: LEO == leader LEO or now - lastCaughtUpTimeMs <= max lag."""
        self._check_slot(p, r)
        return _caught_up(self.c, p, p * self.c.R + r, now_ms, max_lag_ms)

    # ---- §6.4 HW -----------------------------------------------------------------------------
    cpdef int64_t hw_candidate(self, Py_ssize_t p, int64_t now_ms, int64_t max_lag_ms) except? -2:
        """The HW partition ``p`` should have now (maybeIncrementLeaderHW; never below the current)."""
        self._check_partition(p)
        return _hw(self.c, p, now_ms, max_lag_ms)

    cpdef bint maybe_increment_hw(self, Py_ssize_t p, int64_t now_ms,
                                  int64_t max_lag_ms) except -1:
        """Advance ``hw[p]`` to its candidate; True iff it moved."""
        self._check_partition(p)
        cdef int64_t new = _hw(self.c, p, now_ms, max_lag_ms)
        if new > self.c.hw[p]:
            self.c.hw[p] = new
            return True
        return False

    # ---- ISR sizes (§6.8 min ISR checks) ------------------------------------------------------
    cpdef Py_ssize_t isr_size(self, Py_ssize_t p) except -1:
        """Members of the committed ISR of partition ``p`` (the leader included)."""
        self._check_partition(p)
        cdef Py_ssize_t base = p * self.c.R, r, count = 0
        for r in range(self.c.n_rep[p]):
            count += self.c.in_isr[base + r]
        return count

    cpdef Py_ssize_t maximal_isr_size(self, Py_ssize_t p) except -1:
        """Members of the maximal ISR of partition ``p`` (KIP-497; the leader included)."""
        self._check_partition(p)
        return _max_isr_size(self.c, p)

    cpdef list sorted_isr(self, Py_ssize_t p):
        """Broker ids of the committed ISR of partition ``p`` (the leader included), ascending."""
        self._check_partition(p)
        return _sorted_members(self.c, p, self.c.in_isr)

    cpdef list sorted_maximal_isr(self, Py_ssize_t p):
        """Broker ids of the maximal ISR of partition ``p`` (KIP-497), ascending."""
        self._check_partition(p)
        return _sorted_members(self.c, p, self.c.in_max)

    cpdef Py_ssize_t reached_isr_size(self, Py_ssize_t p, int64_t required_offset) except -2:
        """checkEnoughReplicasReachOffset's inputs in one call: −1 while ``hw[p]`` is below
        ``required_offset``, else the maximal ISR's size."""
        self._check_partition(p)
        if self.c.hw[p] < required_offset:
            return -1
        return _max_isr_size(self.c, p)

    cpdef Py_ssize_t hw_candidates_all(self, int64_t now_ms, int64_t max_lag_ms, Py_ssize_t n,
                                       int64_t[::1] out_hw, uint8_t[::1] out_changed) except -1:
        """Candidates for partitions ``[0, n)`` into ``out_hw`` (may be the hw column itself) and
        ``out_changed``; inactive rows get their hw and 0. Returns how many changed."""
        cdef Py_ssize_t p, changed = 0
        cdef int64_t new
        cdef Cols c = self.c
        self._check_bound(n)
        if out_hw.shape[0] < n or out_changed.shape[0] < n:
            raise ValueError("output arrays too short")
        cdef int64_t* oh = &out_hw[0]
        cdef uint8_t* oc = &out_changed[0]
        with nogil:
            for p in range(n):
                new = _hw(c, p, now_ms, max_lag_ms) if c.active[p] else c.hw[p]
                oc[p] = new != c.hw[p]
                changed += oc[p]
                oh[p] = new
        return changed

    # ---- §6.6 out-of-sync replicas -----------------------------------------------------------
    cpdef int64_t out_of_sync(self, Py_ssize_t p, int64_t now_ms, int64_t max_lag_ms) except -1:
        """Partition.getOutOfSyncReplicas as a bit mask of follower slots (0 while in flight)."""
        cdef Py_ssize_t base, r
        cdef int64_t bits = 0
        self._check_partition(p)
        if self.c.R > 63:
            raise ValueError("bit mask needs max_replicas <= 63")
        if self.c.state[p] != ST_COMMITTED:
            return 0
        base = p * self.c.R
        for r in range(1, self.c.n_rep[p]):
            if self.c.in_isr[base + r] and not _caught_up(self.c, p, base + r, now_ms, max_lag_ms):
                bits |= (<int64_t>1) << r
        return bits

    cpdef Py_ssize_t out_of_sync_all(self, int64_t now_ms, int64_t max_lag_ms, Py_ssize_t n,
                                     uint8_t[::1] out_mask) except -1:
        """Flat (n * R) mask of out-of-sync ISR followers; returns how many."""
        cdef Py_ssize_t p, r, count = 0
        cdef Cols c = self.c
        self._check_bound(n)
        if out_mask.shape[0] < n * c.R:
            raise ValueError("output mask too short")
        if n == 0:
            return 0
        cdef uint8_t* om = &out_mask[0]
        with nogil:
            memset(om, 0, n * c.R)
            for p in range(n):
                if c.active[p]:
                    count += _oos_row(c, p, now_ms, max_lag_ms, om)
        return count

    # ---- §6.4 + §6.6 in one sweep ------------------------------------------------------------
    cpdef tuple hw_and_out_of_sync_all(self, int64_t now_ms, int64_t max_lag_ms, Py_ssize_t n,
                                       int64_t[::1] out_hw, uint8_t[::1] out_changed,
                                       uint8_t[::1] out_mask):
        """``hw_candidates_all`` and ``out_of_sync_all`` fused over one pass of memory."""
        cdef Py_ssize_t p, r, changed = 0, count = 0
        cdef int64_t new
        cdef Cols c = self.c
        self._check_bound(n)
        if out_hw.shape[0] < n or out_changed.shape[0] < n or out_mask.shape[0] < n * c.R:
            raise ValueError("output arrays too short")
        if n == 0:
            return 0, 0
        cdef int64_t* oh = &out_hw[0]
        cdef uint8_t* oc = &out_changed[0]
        cdef uint8_t* om = &out_mask[0]
        with nogil:
            memset(om, 0, n * c.R)
            for p in range(n):
                if c.active[p]:
                    count += _hw_oos_row(c, p, now_ms, max_lag_ms, &new, om)
                else:
                    new = c.hw[p]
                oc[p] = new != c.hw[p]
                changed += oc[p]
                oh[p] = new
        return changed, count

    # ---- §6.5 ISR expansion ------------------------------------------------------------------
    cpdef bint can_expand_isr(self, Py_ssize_t p, Py_ssize_t r) except -1:
        """Partition.needsExpandIsr for slot ``r`` (Committed, not in ISR, eligible, LEO ≥ HW and
        ≥ leader epoch start offset)."""
        self._check_slot(p, r)
        return _expand(self.c, p, p * self.c.R + r)

    cpdef Py_ssize_t expand_candidates_all(self, Py_ssize_t n, uint8_t[::1] out_mask) except -1:
        """Flat (n * R) mask of follower slots that may join the ISR; returns how many."""
        cdef Py_ssize_t p, r, i, count = 0
        cdef Cols c = self.c
        self._check_bound(n)
        if out_mask.shape[0] < n * c.R:
            raise ValueError("output mask too short")
        if n == 0:
            return 0
        cdef uint8_t* om = &out_mask[0]
        with nogil:
            memset(om, 0, n * c.R)
            for p in range(n):
                if c.active[p]:
                    for r in range(1, c.n_rep[p]):
                        i = p * c.R + r
                        if _expand(c, p, i):
                            om[i] = 1
                            count += 1
        return count

    # ---- follower lags (a sampled gauge) ------------------------------------------------------
    cpdef Py_ssize_t follower_lags(self, Py_ssize_t n, int64_t[::1] out) except -1:
        """Leader LEO − follower LEO of every follower slot (1 .. R − 1) holding a replica id
        and a known LEO, over the active rows of [0, ``n``), in row then slot order, into
        ``out`` (at least n * R long); returns how many."""
        cdef Py_ssize_t p, r, i, count = 0
        cdef Cols c = self.c
        self._check_bound(n)
        if out.shape[0] < n * c.R:
            raise ValueError("output array too short")
        if n == 0:
            return 0
        cdef int64_t* o = &out[0]
        with nogil:
            for p in range(n):
                if c.active[p]:
                    for r in range(1, c.R):
                        i = p * c.R + r
                        if c.rid[i] >= 0 and c.leo[i] >= 0:
                            o[count] = c.leader_leo[p] - c.leo[i]
                            count += 1
        return count

    # ---- §6.1 makeLeader over the partitions of one LeaderAndIsr -----------------------------
    @cython.boundscheck(True)
    cpdef Py_ssize_t check_lead(self, list rows, list reps, list rep_off, list isr, list isr_off,
                                list min_isrs, list leos, list hws, int64_t me) except -2:
        """The assignment rules for every row of a :meth:`lead_rows` call, before any is
        written: the index of the first bad row, or −1.

        Row ``i`` has replicas ``reps[rep_off[i]:rep_off[i + 1]]`` and ISR
        ``isr[isr_off[i]:isr_off[i + 1]]``. Bad: a kept row (``rows[i] >= 0``) that is not an
        active row; replicas that are not distinct non-negative ids including ``me``; an ISR
        member outside the replicas; ``min_isrs[i] < 1``; for a new row (``rows[i] < 0``) a HW
        outside ``[0, leos[i]]``. Offsets that do not cut the flat lists → ValueError."""
        cdef Py_ssize_t k = len(rows), i, j, j2, a, b, P = self.num_partitions
        cdef int64_t p, x
        cdef bint found
        _check_offsets(k, rep_off, len(reps), isr_off, len(isr))
        if len(min_isrs) != k or len(leos) != k or len(hws) != k:
            raise ValueError("lead columns disagree in length")
        for i in range(k):
            p = rows[i]
            if p >= 0 and (p >= P or not self.c.active[p]):
                return i
            a = rep_off[i]
            b = rep_off[i + 1]
            found = False
            for j in range(a, b):
                x = reps[j]
                if x < 0:
                    return i
                if x == me:
                    found = True
                for j2 in range(a, j):
                    if <int64_t>reps[j2] == x:
                        return i
            if not found:
                return i
            for j in range(isr_off[i], isr_off[i + 1]):
                x = isr[j]
                found = False
                for j2 in range(a, b):
                    if <int64_t>reps[j2] == x:
                        found = True
                        break
                if not found:
                    return i
            if <int64_t>min_isrs[i] < 1:
                return i
            if p < 0 and not 0 <= <int64_t>hws[i] <= <int64_t>leos[i]:
                return i
        return -1

    @cython.boundscheck(True)
    cpdef Py_ssize_t lead_rows(self, list rows, list flags, list reps, list rep_off, list isr,
                               list isr_off, list ineligible, list epochs, list leos, list hws,
                               list min_isrs, list log_starts, int64_t now_ms,
                               int64_t me) except -1:
        """Partition.makeLeader's table part (§6.1) for many rows, each as its one-row path
        leaves it (``check_lead`` passed first); returns how many rows were written.

        A new row (no LR_KEPT_ROW flag) is written whole: LEO, HW and min ISR as given, the
        epoch starting at the LEO, the ISR committed, this broker in slot 0, the followers in
        assignment order, empty (UnknownOffset, no fetch, no broker epoch), eligible unless in
        ``ineligible``, caught up ``now_ms`` when in the ISR (ReplicaStateTable.add_partition).
        A kept row takes the new assignment (updateAssignmentAndIsr): followers still assigned
        keep their fetch state, new ones start as Kafka's ReplicaState.Empty
        (lastFetchLeaderLogEndOffset 0), eligibility is set anew, the ISR committed; then its
        LEO and min ISR, and with LR_NEW_EPOCH the new epoch (start_leader_epoch: every
        follower reset, forgotten with LR_NEW_LEADER). Either way slot 0's log start becomes
        ``log_starts[i]``."""
        cdef Py_ssize_t k = len(rows), i, j, r, a, b, n, old_n, base, R = self.c.R
        cdef Py_ssize_t P = self.num_partitions, n_inel = len(ineligible)
        cdef int64_t p, x, f, now_or_zero, start
        cdef bint kept_row
        cdef Cols c = self.c
        cdef int64_t* kept
        cdef int64_t* inel
        _check_offsets(k, rep_off, len(reps), isr_off, len(isr))
        if (len(flags) != k or len(epochs) != k or len(leos) != k or len(hws) != k
                or len(min_isrs) != k or len(log_starts) != k):
            raise ValueError("lead columns disagree in length")
        for i in range(k):  # what keeps every store inside the row (check_lead checks more)
            p = rows[i]
            if p < 0 or p >= P:
                raise IndexError(f"no partition {p}")
            a = rep_off[i]
            b = rep_off[i + 1]
            if b - a > R or not _member(reps, a, b, me):
                raise ValueError(f"row {i}: replicas {reps[a:b]} without broker {me} or past "
                                 f"{R} slots")
        kept = <int64_t*>malloc((8 * R + n_inel + 1) * sizeof(int64_t))
        if kept == NULL:
            raise MemoryError()
        inel = kept + 8 * R
        try:
            for j in range(n_inel):
                inel[j] = ineligible[j]
            for i in range(k):
                p = rows[i]
                base = p * R
                a = rep_off[i]
                b = rep_off[i + 1]
                n = b - a
                old_n = 0
                kept_row = <int64_t>flags[i] & LR_KEPT_ROW
                if kept_row:
                    # the followers' state, by broker id, before the row is laid out anew
                    old_n = c.n_rep[p]
                    for r in range(1, old_n):
                        kept[8 * r] = c.rid[base + r]
                        kept[8 * r + 1] = c.leo[base + r]
                        kept[8 * r + 2] = c.lso[base + r]
                        kept[8 * r + 3] = c.lfl[base + r]
                        kept[8 * r + 4] = c.lft[base + r]
                        kept[8 * r + 5] = c.lcu[base + r]
                        kept[8 * r + 6] = c.bep[base + r]
                        kept[8 * r + 7] = c.elig[base + r]
                else:
                    c.hw[p] = hws[i]
                    c.epoch[p] = epochs[i]
                    c.epoch_start[p] = leos[i]
                    c.active[p] = 1
                c.state[p] = ST_COMMITTED
                c.n_rep[p] = <int32_t>n
                for r in range(R):
                    c.rid[base + r] = -1
                    c.leo[base + r] = UNKNOWN_OFFSET
                    c.lso[base + r] = UNKNOWN_OFFSET
                    c.lfl[base + r] = UNKNOWN_OFFSET
                    c.lft[base + r] = 0
                    c.lcu[base + r] = 0
                    c.bep[base + r] = NO_BROKER_EPOCH
                    c.in_isr[base + r] = 0
                    c.in_max[base + r] = 0
                    c.elig[base + r] = 0
                c.rid[base] = <int32_t>me
                c.in_isr[base] = c.in_max[base] = _member(isr, isr_off[i], isr_off[i + 1], me)
                r = 1
                for j in range(a, b):
                    x = reps[j]
                    if x == me:
                        continue
                    f = _member(isr, isr_off[i], isr_off[i + 1], x)
                    c.rid[base + r] = <int32_t>x
                    c.in_isr[base + r] = c.in_max[base + r] = <uint8_t>f
                    c.elig[base + r] = not _in(inel, n_inel, x)
                    if kept_row:
                        _restore(c, base + r, kept, old_n, x)
                    else:
                        c.lcu[base + r] = now_ms if f else 0
                    r += 1
                c.leader_leo[p] = leos[i]
                c.min_isr[p] = <int32_t>min_isrs[i]
                if kept_row and <int64_t>flags[i] & LR_NEW_EPOCH:
                    start = c.leader_leo[p]
                    c.epoch[p] = epochs[i]
                    c.epoch_start[p] = start
                    for r in range(1, n):
                        now_or_zero = now_ms if c.in_isr[base + r] else 0
                        if <int64_t>flags[i] & LR_NEW_LEADER:
                            c.leo[base + r] = UNKNOWN_OFFSET
                            c.lso[base + r] = UNKNOWN_OFFSET
                            c.lfl[base + r] = UNKNOWN_OFFSET
                            c.lft[base + r] = 0
                            c.bep[base + r] = NO_BROKER_EPOCH
                        else:
                            c.lfl[base + r] = start
                            c.lft[base + r] = now_or_zero
                        c.lcu[base + r] = now_or_zero
                c.lso[base] = log_starts[i]
        finally:
            free(kept)
        return k


cdef int _check_offsets(Py_ssize_t k, list rep_off, Py_ssize_t n_reps, list isr_off,
                        Py_ssize_t n_isr) except -1:
    """``rep_off`` and ``isr_off`` cut flat lists of ``n_reps`` and ``n_isr`` ids into ``k``
    rows: k + 1 non-decreasing offsets from 0 to the list's length."""
    if not (_cuts(rep_off, k, n_reps) and _cuts(isr_off, k, n_isr)):
        raise ValueError("row offsets do not cut the flat list")
    return 0


@cython.boundscheck(True)
cdef bint _cuts(list off, Py_ssize_t k, Py_ssize_t total) except -1:
    cdef Py_ssize_t i, prev = 0, cur
    if len(off) != k + 1 or <Py_ssize_t>off[0] != 0:
        return False
    for i in range(1, k + 1):
        cur = off[i]
        if cur < prev:
            return False
        prev = cur
    return prev == total


cdef inline uint8_t _member(list ids, Py_ssize_t a, Py_ssize_t b, int64_t x) except 2:
    cdef Py_ssize_t j
    for j in range(a, b):
        if <int64_t>ids[j] == x:
            return 1
    return 0


cdef inline bint _in(const int64_t* ids, Py_ssize_t n, int64_t x) noexcept nogil:
    cdef Py_ssize_t j
    for j in range(n):
        if ids[j] == x:
            return True
    return False


cdef inline void _restore(Cols c, Py_ssize_t i, const int64_t* kept, Py_ssize_t old_n,
                          int64_t broker) noexcept nogil:
    """Follower ``broker`` in flat slot ``i`` of a kept row: its fetch state as it was (the
    eligibility is set anew), or Kafka's ReplicaState.Empty for a replica new to the row."""
    cdef Py_ssize_t r
    for r in range(1, old_n):
        if kept[8 * r] == broker:
            c.leo[i] = kept[8 * r + 1]
            c.lso[i] = kept[8 * r + 2]
            c.lfl[i] = kept[8 * r + 3]
            c.lft[i] = kept[8 * r + 4]
            c.lcu[i] = kept[8 * r + 5]
            c.bep[i] = kept[8 * r + 6]
            return
    c.lfl[i] = 0
