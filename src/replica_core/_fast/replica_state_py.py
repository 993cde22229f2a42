"""Plain-Python twin of ``_replica_state.pyx``: the reference for the leader-side rules.

Same class, same methods, same results, written as plain loops so each rule reads like Kafka's
code (KAFKA_SEMANTICS §6.2-§6.6; ``Replica.scala``, ``Partition.scala``). Columns are indexed
flat: slot ``r`` of partition ``p`` is element ``p * R + r``. The columns may be numpy arrays
(as the table holds them) or plain lists (the benchmark's pure-Python peer).
"""
from __future__ import annotations

from typing import Any

COMMITTED = 0  # IsrState.COMMITTED

# follower_fetch_hw's answer, as bit flags
FETCH_LEO_CHANGED = 1  # the follower's LEO moved
FETCH_EXPAND = 2  # the follower may join the ISR: the HW was left to the caller
FETCH_HW_MOVED = 4  # the HW advanced (hw[p] holds the new value)

# lead_rows' per-row flags
LEAD_KEPT_ROW = 1  # the row exists (this broker leads already): its followers keep their state
LEAD_NEW_EPOCH = 2  # a kept row starts a new leader epoch
LEAD_NEW_LEADER = 4  # ... as a NEW leader (the followers' fetch state is forgotten)

# the fill values of a cleared row (ReplicaStateTable's column fills)
UNKNOWN_OFFSET = -1  # a follower's LEO / log start / lastFetchLeaderLogEndOffset unknown
NO_BROKER_EPOCH = -2  # no broker epoch stored yet

# A leader's fetch session as one (SESSION_ROW_COUNT, capacity) int64 block, one row per column
# (``FetchSession.columns``): the session kernels take it as a single buffer.
SESSION_ORDER = 0  # column indexes in session order (the first n are live)
SESSION_ROWS = 1  # state-table row, -1 where not led here
SESSION_SLOTS = 2  # the follower's replica slot in that row
SESSION_FETCH_OFFSET = 3  # the request's fetch offset
SESSION_LOG_START = 4  # the follower's log start offset
SESSION_SENT_HW = 5  # the HW last sent (-1: none / after an error)
SESSION_SENT_LOG_START = 6  # the leader's log start last sent
SESSION_REQ_EPOCH = 7  # the request's current leader epoch
SESSION_OUT = 8  # kernel output: the columns picked, in session order
SESSION_MARK = 9  # stamps on columns that may have changed (see FetchSession.new_stamp)
SESSION_ROW_COUNT = 10
EVERY_COLUMN = -(2**63)  # session_fetch's ``since`` checking every column in full


def _flat(a: Any) -> Any:
    if not hasattr(a, "reshape"):
        return a  # already a flat sequence (plain lists)
    if not a.flags.c_contiguous:
        raise ValueError("columns must be C-contiguous")
    return a.reshape(-1)


def session_move_to_end(session: Any, n: int, j: int) -> int:
    """Move column ``j`` to the end of the first ``n`` entries of the session order (closing
    its gap); its former position. ValueError if ``j`` is not among them."""
    if len(session) < SESSION_ROW_COUNT or n < 0 or n > len(session[SESSION_ORDER]):
        raise ValueError(f"{n} session entries do not fit the block")
    order = session[SESSION_ORDER]
    for pos in range(n):
        if int(order[pos]) == j:
            for k in range(pos, n - 1):
                order[k] = order[k + 1]
            order[n - 1] = j
            return pos
    raise ValueError(f"column {j} is not in the session order")



def _check_offsets(k: int, rep_off: Any, n_reps: int, isr_off: Any, n_isr: int) -> None:
    """``rep_off`` and ``isr_off`` cut flat lists of ``n_reps`` and ``n_isr`` ids into ``k``
    rows: k + 1 non-decreasing offsets from 0 to the list's length."""
    for off, total in ((rep_off, n_reps), (isr_off, n_isr)):
        if (len(off) != k + 1 or off[0] != 0 or off[k] != total
                or any(off[i + 1] < off[i] for i in range(k))):
            raise ValueError("row offsets do not cut the flat list")


def _check_block(session: Any, n: int) -> int:
    """A session block has every row and room for ``n`` columns; its column count."""
    if len(session) < SESSION_ROW_COUNT:
        raise ValueError(f"a session block has {SESSION_ROW_COUNT} rows, not {len(session)}")
    cap = len(session[SESSION_ORDER])
    if n < 0 or n > cap:
        raise ValueError(f"{n} session entries in a block of {cap} columns")
    return cap

class ReplicaStateKernels:
    """The §6 rules over one table's columns (plain loops)."""

    def __init__(self, cols: Any, max_replicas: int) -> None:
        self.max_replicas = int(max_replicas)
        self.leader_leo = cols.leader_leo
        self.hw = cols.hw
        self.leader_epoch = cols.leader_epoch
        self.epoch_start_offset = cols.epoch_start_offset
        self.min_isr = cols.min_isr
        self.n_replicas = cols.n_replicas
        self.isr_state = cols.isr_state
        self.active = cols.active
        self.leo = _flat(cols.leo)
        self.log_start_offset = _flat(cols.log_start_offset)
        self.last_fetch_leader_leo = _flat(cols.last_fetch_leader_leo)
        self.last_fetch_time_ms = _flat(cols.last_fetch_time_ms)
        self.last_caught_up_time_ms = _flat(cols.last_caught_up_time_ms)
        self.broker_epoch = _flat(cols.broker_epoch)
        self.in_isr = _flat(cols.in_isr)
        self.in_max_isr = _flat(cols.in_max_isr)
        self.eligible = _flat(cols.eligible)
        self.replica_id = _flat(cols.replica_id)
        self.num_partitions = len(self.leader_leo)
        if (len(self.hw) != self.num_partitions or len(self.leader_epoch) != self.num_partitions
                or len(self.leo) != self.num_partitions * max_replicas):
            raise ValueError("column shapes disagree")

    # ---- checks ------------------------------------------------------------------------------
    def _check_slot(self, p: int, r: int) -> None:
        if p < 0 or p >= self.num_partitions or r < 1 or r >= self.n_replicas[p]:
            raise IndexError(f"no follower slot ({p}, {r})")

    def _check_partition(self, p: int) -> None:
        if p < 0 or p >= self.num_partitions or not self.active[p]:
            raise IndexError(f"no partition {p}")

    def _check_bound(self, n: int) -> None:
        if n < 0 or n > self.num_partitions:
            raise ValueError(f"scan bound {n} outside [0, {self.num_partitions}]")

    # ---- §6.2 follower fetch -----------------------------------------------------------------
    def _fetch(self, i: int, fetch_offset: int, follower_log_start: int, fetch_time_ms: int,
               leader_end_offset: int, broker_epoch: int) -> bool:
        lcu = int(self.last_caught_up_time_ms[i])
        prev_lfl = int(self.last_fetch_leader_leo[i])
        prev_leo = int(self.leo[i])
        if fetch_offset >= leader_end_offset:
            # Fetched everything the leader had when this read started.
            lcu = max(lcu, fetch_time_ms)
        elif fetch_offset >= prev_lfl:
            # Fetched everything the leader had at the previous fetch: caught up as of then.
            lcu = max(lcu, int(self.last_fetch_time_ms[i]))
        self.last_caught_up_time_ms[i] = lcu
        self.last_fetch_leader_leo[i] = max(leader_end_offset, prev_lfl)
        self.last_fetch_time_ms[i] = fetch_time_ms
        self.leo[i] = fetch_offset
        self.log_start_offset[i] = follower_log_start
        self.broker_epoch[i] = broker_epoch
        return prev_leo != fetch_offset

    def follower_fetch(self, p: int, r: int, fetch_offset: int, follower_log_start: int,
                       fetch_time_ms: int, leader_end_offset: int, broker_epoch: int = -1) -> bool:
        """Apply one follower fetch (Replica.updateFetchStateOrThrow); True iff its LEO changed."""
        self._check_slot(p, r)
        return self._fetch(p * self.max_replicas + r, int(fetch_offset), int(follower_log_start),
                           int(fetch_time_ms), int(leader_end_offset), int(broker_epoch))

    def follower_fetch_hw(self, p: int, r: int, fetch_offset: int, follower_log_start: int,
                          fetch_time_ms: int, leader_end_offset: int, broker_epoch: int,
                          max_lag_ms: int) -> int:
        """Partition.updateFollowerFetchState's kernel part in one call: ``follower_fetch``,
        then the ISR-expansion check, then — only when the follower may NOT join the ISR (the
        caller proposes that first, which can change the maximal ISR) and its LEO moved —
        ``maybe_increment_hw`` at ``fetch_time_ms``. Flags FETCH_LEO_CHANGED | FETCH_EXPAND |
        FETCH_HW_MOVED."""
        self._check_slot(p, r)
        i = p * self.max_replicas + r
        changed = self._fetch(i, int(fetch_offset), int(follower_log_start), int(fetch_time_ms),
                              int(leader_end_offset), int(broker_epoch))
        return self._expand_or_hw(p, i, changed, int(fetch_time_ms), int(max_lag_ms))

    def expand_or_hw(self, p: int, r: int, leo_changed: bool, now_ms: int,
                     max_lag_ms: int) -> int:
        """What ``follower_fetch_hw`` does after the fetch state update, for a fetch already
        applied (``leo_changed``: its LEO moved); the same flags."""
        self._check_slot(p, r)
        return self._expand_or_hw(p, p * self.max_replicas + r, bool(leo_changed), int(now_ms),
                                  int(max_lag_ms))

    def _expand_or_hw(self, p: int, i: int, leo_changed: bool, now_ms: int,
                      max_lag_ms: int) -> int:
        """After a follower fetch on flat slot ``i``: FETCH_EXPAND if the follower may join the
        ISR (the HW is then left to the caller), else the HW advanced when the LEO moved."""
        flags = FETCH_LEO_CHANGED if leo_changed else 0
        if self._expand(p, i):
            return flags | FETCH_EXPAND
        if leo_changed:
            new = self._hw(p, now_ms, max_lag_ms)
            if new > self.hw[p]:
                self.hw[p] = new
                flags |= FETCH_HW_MOVED
        return flags

    def follower_fetch_batch(self, ps: Any, rs: Any, fetch_offsets: Any, follower_log_starts: Any,
                             leader_end_offsets: Any, fetch_time_ms: int, broker_epoch: int,
                             leo_changed: Any) -> int:
        """Apply fetches ``k`` in order; ``leo_changed[k]`` = 1 iff LEO moved; returns their count."""
        n = len(ps)
        if (len(rs) != n or len(fetch_offsets) != n or len(follower_log_starts) != n
                or len(leader_end_offsets) != n or len(leo_changed) < n):
            raise ValueError("batch arrays differ in length")
        for k in range(n):
            self._check_slot(int(ps[k]), int(rs[k]))
        changed = 0
        R = self.max_replicas
        for k in range(n):
            c = self._fetch(int(ps[k]) * R + int(rs[k]), int(fetch_offsets[k]),
                            int(follower_log_starts[k]), int(fetch_time_ms),
                            int(leader_end_offsets[k]), int(broker_epoch))
            leo_changed[k] = 1 if c else 0
            changed += c
        return changed

    # ---- a fetch session on the leader (KIP-227 incremental fetch + §6.2) ---------------------
    def _check_session(self, session: Any, n: int, with_slots: bool) -> None:
        cap = _check_block(session, n)
        order, rows, slots = session[SESSION_ORDER], session[SESSION_ROWS], session[SESSION_SLOTS]
        for k in range(n):
            j = int(order[k])
            if j < 0 or j >= cap:
                raise IndexError(f"session order entry {j} outside the columns")
            p = int(rows[j])
            if p < 0:
                continue
            if with_slots:
                self._check_slot(p, int(slots[j]))
            elif p >= self.num_partitions:
                raise IndexError(f"no partition {p}")

    def session_fetch(self, session: Any, n: int, apply_quiet: bool, fetch_time_ms: int,
                      broker_epoch: int, since: int = EVERY_COLUMN) -> int:
        """A follower's session fetch on the leader over the session's block (rows as
        ``SESSION_*``), visiting column ``j = order[k]`` for ``k < n`` (session order): writes
        to the ``out`` row, in that order, the columns to read and returns their count; a
        quiet column (led here, in the maximal ISR, caught up, same HW, log start (slot 0's)
        and epoch as last sent) gets the §6.2 fetch-state update at once when
        ``apply_quiet``. Not led here (``rows[j] < 0``): read, to answer its error. A column
        marked below ``since`` (``mark[j] < since``) is quiet without a look (the caller's
        promise: it was checked and quiet at the session's last scan, and nothing compared
        has changed since — its row, slot and session values, the row's replica count, the
        follower's LEO and maximal-ISR flag, the leader's LEO, HW, log start and epoch)."""
        self._check_session(session, n, True)
        order, rows, slots = session[SESSION_ORDER], session[SESSION_ROWS], session[SESSION_SLOTS]
        fetch_offsets, log_starts = session[SESSION_FETCH_OFFSET], session[SESSION_LOG_START]
        sent_hw, sent_log_start = session[SESSION_SENT_HW], session[SESSION_SENT_LOG_START]
        req_epochs, out = session[SESSION_REQ_EPOCH], session[SESSION_OUT]
        mark = session[SESSION_MARK]
        m = 0
        for k in range(n):
            j = int(order[k])
            p = int(rows[j])
            if int(mark[j]) < since:  # quiet without a look
                if apply_quiet:
                    f = int(fetch_offsets[j])  # the leader's LEO too
                    self._fetch(p * self.max_replicas + int(slots[j]), f, int(log_starts[j]),
                                int(fetch_time_ms), f, int(broker_epoch))
                continue
            if p < 0:
                out[m] = j
                m += 1
                continue
            f = int(fetch_offsets[j])
            i = p * self.max_replicas + int(slots[j])
            lleo = int(self.leader_leo[p])
            has_news = (lleo != f or int(self.hw[p]) != int(sent_hw[j])
                        or int(self.log_start_offset[p * self.max_replicas])
                        != int(sent_log_start[j])
                        or int(self.leader_epoch[p]) != int(req_epochs[j]))
            follower_moved = int(self.leo[i]) != f or not self.in_max_isr[i]
            if has_news or follower_moved:
                out[m] = j
                m += 1
            elif apply_quiet:
                self._fetch(i, f, int(log_starts[j]), int(fetch_time_ms), lleo, int(broker_epoch))
        return m

    def session_pending(self, session: Any, n: int) -> int:
        """A parked session fetch: the columns ``order[k]`` (``k < n``) with something to send
        now, written in order to the ``out`` row; their count — led here with new records, a
        new HW, log start or epoch, or fetched but no longer led here (``rows[j] < 0``,
        ``fetch_offsets[j] >= 0``: answered with the error)."""
        self._check_session(session, n, False)
        order, rows = session[SESSION_ORDER], session[SESSION_ROWS]
        fetch_offsets, sent_hw = session[SESSION_FETCH_OFFSET], session[SESSION_SENT_HW]
        sent_log_start, req_epochs = session[SESSION_SENT_LOG_START], session[SESSION_REQ_EPOCH]
        out = session[SESSION_OUT]
        m = 0
        for k in range(n):
            j = int(order[k])
            if self._has_news(int(rows[j]), int(fetch_offsets[j]), int(sent_hw[j]),
                              int(sent_log_start[j]), int(req_epochs[j])):
                out[m] = j
                m += 1
        return m

    def _has_news(self, p: int, f: int, sent_hw: int, sent_log_start: int,
                  req_epoch: int) -> bool:
        """A session column has something to send (a parked fetch's rule): led here (row
        ``p``) with records past the fetch offset ``f``, a HW, log start or epoch other than
        the one last sent; or not led here (``p < 0``) though fetched (``f >= 0``)."""
        if p < 0:
            return f >= 0
        return (int(self.leader_leo[p]) != f or int(self.hw[p]) != sent_hw
                or int(self.log_start_offset[p * self.max_replicas]) != sent_log_start
                or int(self.leader_epoch[p]) != req_epoch)

    def session_pending_marked(self, session: Any, n: int, stamp: int) -> int:
        """``session_pending`` over the columns marked ``stamp`` only (``mark[j] == stamp``):
        the marked columns ``order[k]`` (``k < n``) with something to send now, written in
        session order to the ``out`` row; their count. Only the order and mark rows are read
        for the others (and only the marked columns are checked)."""
        cap = _check_block(session, n)
        order, rows, mark = session[SESSION_ORDER], session[SESSION_ROWS], session[SESSION_MARK]
        marked = []
        for k in range(n):
            j = int(order[k])
            if j < 0 or j >= cap:
                raise IndexError(f"session order entry {j} outside the columns")
            if int(mark[j]) == stamp:
                if int(rows[j]) >= self.num_partitions:
                    raise IndexError(f"no partition {int(rows[j])}")
                marked.append(j)
        fetch_offsets, sent_hw = session[SESSION_FETCH_OFFSET], session[SESSION_SENT_HW]
        sent_log_start, req_epochs = session[SESSION_SENT_LOG_START], session[SESSION_REQ_EPOCH]
        out = session[SESSION_OUT]
        m = 0
        for j in marked:
            if self._has_news(int(rows[j]), int(fetch_offsets[j]), int(sent_hw[j]),
                              int(sent_log_start[j]), int(req_epochs[j])):
                out[m] = j
                m += 1
        return m

    # ---- §6.3 isCaughtUp ---------------------------------------------------------------------
    def _caught_up(self, p: int, i: int, now_ms: int, max_lag_ms: int) -> bool:
        return bool(self.leo[i] == self.leader_leo[p]
                    or now_ms - int(self.last_caught_up_time_ms[i]) <= max_lag_ms)

    def is_caught_up(self, p: int, r: int, now_ms: int, max_lag_ms: int) -> bool:
        """Replica.isCaughtUp: LEO == leader LEO or now - lastCaughtUpTimeMs <= max lag."""
        self._check_slot(p, r)
        return self._caught_up(p, p * self.max_replicas + r, int(now_ms), int(max_lag_ms))

    # ---- §6.4 HW -----------------------------------------------------------------------------
    def _hw(self, p: int, now_ms: int, max_lag_ms: int) -> int:
        base = p * self.max_replicas
        nrep = int(self.n_replicas[p])
        old = int(self.hw[p])
        isr_size = sum(int(self.in_isr[base + r]) for r in range(nrep))
        if isr_size < min(int(self.min_isr[p]), nrep):
            return old  # under min ISR: no advance (KAFKA-15583)
        cand = int(self.leader_leo[p])
        for r in range(1, nrep):
            i = base + r
            leo = int(self.leo[i])
            # Maximal ISR members hold the HW; so do caught-up, eligible non-ISR followers
            # (so they can reach it and join), but not ineligible ones (KAFKA-15021).
            if leo < cand and (self.in_max_isr[i]
                               or (self.eligible[i] and self._caught_up(p, i, now_ms, max_lag_ms))):
                cand = leo
        return cand if cand > old else old

    def hw_candidate(self, p: int, now_ms: int, max_lag_ms: int) -> int:
        """The HW partition ``p`` should have now (maybeIncrementLeaderHW; never below the current)."""
        self._check_partition(p)
        return self._hw(p, int(now_ms), int(max_lag_ms))

    def maybe_increment_hw(self, p: int, now_ms: int, max_lag_ms: int) -> bool:
        """Advance ``hw[p]`` to its candidate; True iff it moved."""
        self._check_partition(p)
        new = self._hw(p, int(now_ms), int(max_lag_ms))
        if new > self.hw[p]:
            self.hw[p] = new
            return True
        return False

    # ---- ISR sizes (§6.8 min ISR checks) ------------------------------------------------------
    def isr_size(self, p: int) -> int:
        """Members of the committed ISR of partition ``p`` (the leader included)."""
        self._check_partition(p)
        base = p * self.max_replicas
        return sum(int(self.in_isr[base + r]) for r in range(int(self.n_replicas[p])))

    def maximal_isr_size(self, p: int) -> int:
        """Members of the maximal ISR of partition ``p`` (KIP-497; the leader included)."""
        self._check_partition(p)
        base = p * self.max_replicas
        return sum(int(self.in_max_isr[base + r]) for r in range(int(self.n_replicas[p])))

    def sorted_isr(self, p: int) -> list[int]:
        """Broker ids of the committed ISR of partition ``p`` (the leader included), ascending."""
        self._check_partition(p)
        return self._sorted_members(p, self.in_isr)

    def sorted_maximal_isr(self, p: int) -> list[int]:
        """Broker ids of the maximal ISR of partition ``p`` (KIP-497), ascending."""
        self._check_partition(p)
        return self._sorted_members(p, self.in_max_isr)

    def _sorted_members(self, p: int, flags: Any) -> list[int]:
        base = p * self.max_replicas
        return sorted(int(self.replica_id[base + r]) for r in range(int(self.n_replicas[p]))
                      if flags[base + r])

    def reached_isr_size(self, p: int, required_offset: int) -> int:
        """checkEnoughReplicasReachOffset's inputs in one call: −1 while ``hw[p]`` is below
        ``required_offset``, else the maximal ISR's size."""
        self._check_partition(p)
        if self.hw[p] < required_offset:
            return -1
        return self.maximal_isr_size(p)

    def hw_candidates_all(self, now_ms: int, max_lag_ms: int, n: int, out_hw: Any,
                          out_changed: Any) -> int:
        """Candidates for partitions ``[0, n)`` into ``out_hw`` (may be the hw column itself) and
        ``out_changed``; inactive rows get their hw and 0. Returns how many changed."""
        self._check_bound(n)
        if len(out_hw) < n or len(out_changed) < n:
            raise ValueError("output arrays too short")
        changed = 0
        for p in range(n):
            if self.active[p]:
                new = self._hw(p, now_ms, max_lag_ms)
                c = 1 if new != self.hw[p] else 0
                out_changed[p] = c
                changed += c
                out_hw[p] = new
            else:
                out_hw[p] = self.hw[p]
                out_changed[p] = 0
        return changed

    # ---- §6.6 out-of-sync replicas -----------------------------------------------------------
    def _oos_slots(self, p: int, now_ms: int, max_lag_ms: int) -> list[int]:
        if self.isr_state[p] != COMMITTED:
            return []  # nothing is computed while an AlterPartition is in flight
        base = p * self.max_replicas
        return [r for r in range(1, int(self.n_replicas[p]))
                if self.in_isr[base + r] and not self._caught_up(p, base + r, now_ms, max_lag_ms)]

    def out_of_sync(self, p: int, now_ms: int, max_lag_ms: int) -> int:
        """Partition.getOutOfSyncReplicas as a bit mask of follower slots (0 while in flight)."""
        self._check_partition(p)
        if self.max_replicas > 63:
            raise ValueError("bit mask needs max_replicas <= 63")
        bits = 0
        for r in self._oos_slots(p, int(now_ms), int(max_lag_ms)):
            bits |= 1 << r
        return bits

    def out_of_sync_all(self, now_ms: int, max_lag_ms: int, n: int, out_mask: Any) -> int:
        """Flat (n * R) mask of out-of-sync ISR followers; returns how many."""
        self._check_bound(n)
        R = self.max_replicas
        if len(out_mask) < n * R:
            raise ValueError("output mask too short")
        count = 0
        for p in range(n):
            for r in range(R):
                out_mask[p * R + r] = 0
            if self.active[p]:
                for r in self._oos_slots(p, now_ms, max_lag_ms):
                    out_mask[p * R + r] = 1
                    count += 1
        return count

    def hw_and_out_of_sync_all(self, now_ms: int, max_lag_ms: int, n: int, out_hw: Any,
                               out_changed: Any, out_mask: Any) -> tuple[int, int]:
        """``hw_candidates_all`` and ``out_of_sync_all`` fused over one pass of memory."""
        self._check_bound(n)
        if len(out_hw) < n or len(out_changed) < n or len(out_mask) < n * self.max_replicas:
            raise ValueError("output arrays too short")
        return (self.hw_candidates_all(now_ms, max_lag_ms, n, out_hw, out_changed),
                self.out_of_sync_all(now_ms, max_lag_ms, n, out_mask))

    # ---- §6.5 ISR expansion ------------------------------------------------------------------
    def _expand(self, p: int, i: int) -> bool:
        leo = int(self.leo[i])
        start = int(self.epoch_start_offset[p])
        return bool(self.isr_state[p] == COMMITTED and not self.in_isr[i] and self.eligible[i]
                    and leo >= self.hw[p] and start >= 0 and leo >= start)

    def can_expand_isr(self, p: int, r: int) -> bool:
        """Partition.needsExpandIsr for slot ``r`` (Committed, not in ISR, eligible, LEO ≥ HW and
        ≥ leader epoch start offset)."""
        self._check_slot(p, r)
        return self._expand(p, p * self.max_replicas + r)

    def expand_candidates_all(self, n: int, out_mask: Any) -> int:
        """Flat (n * R) mask of follower slots that may join the ISR; returns how many."""
        self._check_bound(n)
        R = self.max_replicas
        if len(out_mask) < n * R:
            raise ValueError("output mask too short")
        count = 0
        for p in range(n):
            for r in range(R):
                out_mask[p * R + r] = 0
            if self.active[p]:
                for r in range(1, int(self.n_replicas[p])):
                    if self._expand(p, p * R + r):
                        out_mask[p * R + r] = 1
                        count += 1
        return count

    # ---- follower lags (a sampled gauge) ------------------------------------------------------
    def follower_lags(self, n: int, out: Any) -> int:
        """Leader LEO − follower LEO of every follower slot (1 .. R − 1) holding a replica id
        and a known LEO, over the active rows of [0, ``n``), in row then slot order, into
        ``out`` (at least n * R long); returns how many."""
        self._check_bound(n)
        R = self.max_replicas
        if len(out) < n * R:
            raise ValueError("output array too short")
        count = 0
        for p in range(n):
            if not self.active[p]:
                continue
            for r in range(1, R):
                i = p * R + r
                if self.replica_id[i] >= 0 and self.leo[i] >= 0:
                    out[count] = int(self.leader_leo[p]) - int(self.leo[i])
                    count += 1
        return count

    # ---- §6.1 makeLeader over the partitions of one LeaderAndIsr -----------------------------
    def check_lead(self, rows: Any, reps: Any, rep_off: Any, isr: Any, isr_off: Any,
                   min_isrs: Any, leos: Any, hws: Any, me: int) -> int:
        """The assignment rules for every row of a :meth:`lead_rows` call, before any is
        written: the index of the first bad row, or −1.

        Row ``i`` has replicas ``reps[rep_off[i]:rep_off[i + 1]]`` and ISR
        ``isr[isr_off[i]:isr_off[i + 1]]``. Bad: a kept row (``rows[i] >= 0``) that is not an
        active row; replicas that are not distinct non-negative ids including ``me``; an ISR
        member outside the replicas; ``min_isrs[i] < 1``; for a new row (``rows[i] < 0``) a HW
        outside ``[0, leos[i]]``. Offsets that do not cut the flat lists → ValueError."""
        k = len(rows)
        _check_offsets(k, rep_off, len(reps), isr_off, len(isr))
        if len(min_isrs) != k or len(leos) != k or len(hws) != k:
            raise ValueError("lead columns disagree in length")
        for i in range(k):
            p = int(rows[i])
            if p >= 0 and (p >= self.num_partitions or not self.active[p]):
                return i
            replicas = [int(b) for b in reps[rep_off[i]:rep_off[i + 1]]]
            if (any(b < 0 for b in replicas) or len(set(replicas)) != len(replicas)
                    or me not in replicas):
                return i
            if any(int(b) not in replicas for b in isr[isr_off[i]:isr_off[i + 1]]):
                return i
            if int(min_isrs[i]) < 1:
                return i
            if p < 0 and not 0 <= int(hws[i]) <= int(leos[i]):
                return i
        return -1

    def lead_rows(self, rows: Any, flags: Any, reps: Any, rep_off: Any, isr: Any, isr_off: Any,
                  ineligible: Any, epochs: Any, leos: Any, hws: Any, min_isrs: Any,
                  log_starts: Any, now_ms: int, me: int) -> int:
        """Partition.makeLeader's table part (§6.1) for many rows, each as its one-row path
        leaves it (``check_lead`` passed first); returns how many rows were written.

        A new row (no LEAD_KEPT_ROW flag) is written whole: LEO, HW and min ISR as given, the
        epoch starting at the LEO, the ISR committed, this broker in slot 0, the followers in
        assignment order, empty (UnknownOffset, no fetch, no broker epoch), eligible unless in
        ``ineligible``, caught up ``now_ms`` when in the ISR (ReplicaStateTable.add_partition).
        A kept row takes the new assignment (updateAssignmentAndIsr): followers still assigned
        keep their fetch state, new ones start as Kafka's ReplicaState.Empty
        (lastFetchLeaderLogEndOffset 0), eligibility is set anew, the ISR committed; then its
        LEO and min ISR, and with LEAD_NEW_EPOCH the new epoch (start_leader_epoch: every
        follower reset, forgotten with LEAD_NEW_LEADER). Either way slot 0's log start becomes
        ``log_starts[i]``."""
        k = len(rows)
        R = self.max_replicas
        _check_offsets(k, rep_off, len(reps), isr_off, len(isr))
        if (len(flags) != k or len(epochs) != k or len(leos) != k or len(hws) != k
                or len(min_isrs) != k or len(log_starts) != k):
            raise ValueError("lead columns disagree in length")
        for i in range(k):  # what keeps every store inside the row (check_lead checks more)
            p = int(rows[i])
            if p < 0 or p >= self.num_partitions:
                raise IndexError(f"no partition {p}")
            replicas = list(reps[rep_off[i]:rep_off[i + 1]])
            if len(replicas) > R or me not in replicas:
                raise ValueError(f"row {i}: replicas {replicas} without broker {me} or past "
                                 f"{R} slots")
        inel = {int(b) for b in ineligible}
        slot_columns = (self.replica_id, self.leo, self.log_start_offset,
                        self.last_fetch_leader_leo, self.last_fetch_time_ms,
                        self.last_caught_up_time_ms, self.broker_epoch, self.in_isr,
                        self.in_max_isr, self.eligible)
        fills = (-1, UNKNOWN_OFFSET, UNKNOWN_OFFSET, UNKNOWN_OFFSET, 0, 0, NO_BROKER_EPOCH, 0, 0,
                 0)
        for i in range(k):
            p = int(rows[i])
            base = p * R
            replicas = [int(b) for b in reps[rep_off[i]:rep_off[i + 1]]]
            members = {int(b) for b in isr[isr_off[i]:isr_off[i + 1]]}
            kept_row = bool(int(flags[i]) & LEAD_KEPT_ROW)
            kept: dict[int, tuple[int, ...]] = {}
            if kept_row:
                # the followers' state, by broker id, before the row is laid out anew
                for r in range(1, int(self.n_replicas[p])):
                    j = base + r
                    kept[int(self.replica_id[j])] = (
                        int(self.leo[j]), int(self.log_start_offset[j]),
                        int(self.last_fetch_leader_leo[j]), int(self.last_fetch_time_ms[j]),
                        int(self.last_caught_up_time_ms[j]), int(self.broker_epoch[j]))
            else:
                self.hw[p] = int(hws[i])
                self.leader_epoch[p] = int(epochs[i])
                self.epoch_start_offset[p] = int(leos[i])
                self.active[p] = 1
            self.isr_state[p] = COMMITTED
            self.n_replicas[p] = len(replicas)
            for column, fill in zip(slot_columns, fills, strict=True):
                for r in range(R):
                    column[base + r] = fill
            self.replica_id[base] = me
            self.in_isr[base] = self.in_max_isr[base] = int(me in members)
            followers = [b for b in replicas if b != me]
            for r, b in enumerate(followers, start=1):
                j = base + r
                f = b in members
                self.replica_id[j] = b
                self.in_isr[j] = self.in_max_isr[j] = int(f)
                self.eligible[j] = int(b not in inel)
                if not kept_row:
                    self.last_caught_up_time_ms[j] = now_ms if f else 0
                elif b in kept:
                    (self.leo[j], self.log_start_offset[j], self.last_fetch_leader_leo[j],
                     self.last_fetch_time_ms[j], self.last_caught_up_time_ms[j],
                     self.broker_epoch[j]) = kept[b]
                else:
                    self.last_fetch_leader_leo[j] = 0  # ReplicaState.Empty
            self.leader_leo[p] = int(leos[i])
            self.min_isr[p] = int(min_isrs[i])
            if kept_row and int(flags[i]) & LEAD_NEW_EPOCH:
                start = int(self.leader_leo[p])
                self.leader_epoch[p] = int(epochs[i])
                self.epoch_start_offset[p] = start
                for r in range(1, len(replicas)):
                    j = base + r
                    now_or_zero = now_ms if self.in_isr[j] else 0
                    if int(flags[i]) & LEAD_NEW_LEADER:
                        self.leo[j] = UNKNOWN_OFFSET
                        self.log_start_offset[j] = UNKNOWN_OFFSET
                        self.last_fetch_leader_leo[j] = UNKNOWN_OFFSET
                        self.last_fetch_time_ms[j] = 0
                        self.broker_epoch[j] = NO_BROKER_EPOCH
                    else:
                        self.last_fetch_leader_leo[j] = start
                        self.last_fetch_time_ms[j] = now_or_zero
                    self.last_caught_up_time_ms[j] = now_or_zero
            self.log_start_offset[base] = int(log_starts[i])
        return k
