"""Columnar leader-side replication state: every partition a broker leads, in numpy arrays.

Kafka keeps one ``Partition`` with a map of ``Replica`` objects per partition
(``Partition.scala``, ``Replica.scala``); here a broker keeps all of them in preallocated
columns (DESIGN.md, "Columnar replication state") so that the §6 rules run as kernels over one
row (a follower fetch) or over every row (the scheduled ISR-shrink check) alike. Kernels come
from ``replica_core._fast`` (``_replica_state`` ⟷ ``replica_state_py``).

Layout
------
* Per partition index ``p`` (length ``capacity``): ``leader_leo``, ``hw``, ``leader_epoch``,
  ``epoch_start_offset`` (leaderEpochStartOffsetOpt, −1 = none), ``min_isr``
  (min.insync.replicas), ``n_replicas`` (assigned replicas incl. the leader), ``isr_state``
  (:class:`IsrState`), ``active``.
* Per ``(p, slot)`` (shape ``(capacity, max_replicas)``): ``replica_id``, ``leo``,
  ``log_start_offset``, ``last_fetch_leader_leo``, ``last_fetch_time_ms``,
  ``last_caught_up_time_ms``, ``broker_epoch``, ``in_isr`` (committed ISR), ``in_max_isr``
  (maximal ISR, KIP-497), ``eligible`` (ISR-eligible: alive / not fenced / not shutting down /
  epoch matches — decided by the caller from its metadata).
* Slot 0 is the local leader (its follower columns are unused; its ``in_isr``/``in_max_isr``
  count towards ISR sizes); slots ``1 .. n_replicas - 1`` are the followers in assignment order;
  padding slots have ``replica_id`` −1 and every flag 0.

Columns are replaced when the table grows: read them through the table (``table.hw[p]``), never
keep a column across :meth:`ReplicaStateTable.add_partition`. Views (:class:`PartitionView`,
:class:`ReplicaView`) hold only the table and the indexes, so they survive growth.
"""
from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from enum import IntEnum
from itertools import accumulate
from typing import Any

import numpy as np
import numpy.typing as npt

from replica_core._fast import load

UNKNOWN_OFFSET = -1
"""``UnifiedLog.UnknownOffset``: a follower's LEO/LSO before its first fetch."""
NO_BROKER_EPOCH = -2
"""No broker epoch stored yet (Kafka's ``brokerEpoch = None``); −1 is the fetch's "unknown"."""
DEFAULT_REPLICA_LAG_TIME_MAX_MS = 30_000
# The kernels' ``follower_fetch_hw`` answer, bit flags (the kernel modules define the same):
FETCH_LEO_CHANGED = 1
"""The follower's LEO moved."""
FETCH_EXPAND = 2
"""The follower may join the ISR: the HW was left to the caller, which proposes that first."""
FETCH_HW_MOVED = 4
"""The HW advanced (the table's ``hw`` holds it)."""
# The kernels' ``lead_rows`` per-row flags (the kernel modules define the same):
_LEAD_KEPT_ROW = 1
_LEAD_NEW_EPOCH = 2
_LEAD_NEW_LEADER = 4


class IsrState(IntEnum):
    """Kafka's ``PartitionState`` kinds: ``CommittedPartitionState``, ``PendingExpandIsr``,
    ``PendingShrinkIsr`` (an AlterPartition in flight)."""

    COMMITTED = 0
    PENDING_EXPAND = 1
    PENDING_SHRINK = 2


# Compare an IsrState with a column's Python int (``isr_state.item(p)``), not with a numpy
# scalar: numpy then asks the enum class for ``__array_ufunc__``, which EnumType answers by
# raising AttributeError in Python, about 3 us per comparison (9,000 a default run).

_PARTITION_COLUMNS: tuple[tuple[str, Any, int], ...] = (
    ("leader_leo", np.int64, 0),
    ("hw", np.int64, 0),
    ("leader_epoch", np.int32, -1),
    ("epoch_start_offset", np.int64, UNKNOWN_OFFSET),
    ("min_isr", np.int32, 1),
    ("n_replicas", np.int32, 0),
    ("isr_state", np.uint8, IsrState.COMMITTED),
    ("active", np.uint8, 0),
)
_SLOT_COLUMNS: tuple[tuple[str, Any, int], ...] = (
    ("replica_id", np.int32, -1),
    ("leo", np.int64, UNKNOWN_OFFSET),
    ("log_start_offset", np.int64, UNKNOWN_OFFSET),
    ("last_fetch_leader_leo", np.int64, UNKNOWN_OFFSET),
    ("last_fetch_time_ms", np.int64, 0),
    ("last_caught_up_time_ms", np.int64, 0),
    ("broker_epoch", np.int64, NO_BROKER_EPOCH),
    ("in_isr", np.uint8, 0),
    ("in_max_isr", np.uint8, 0),
    ("eligible", np.uint8, 0),
)
# Follower state of a replica the leader has not heard from (Replica's empty ReplicaState).
_EMPTY_FOLLOWER = ("leo", "log_start_offset", "last_fetch_leader_leo", "last_fetch_time_ms",
                   "last_caught_up_time_ms", "broker_epoch")


class ReplicaStateTable:
    """Replication state of all partitions one broker leads (Kafka's ``Partition`` + ``Replica``
    leader-side fields), with the §6.2-§6.6 rules as kernels over rows or over the whole table.

    Partition indexes are handed out by :meth:`add_partition` (freed indexes are reused, lowest
    first); the owner maps topic-partitions to indexes.
    """

    __slots__ = ("broker_id", "replica_lag_time_max_ms", "kernel_module", "capacity",
                 "max_replicas", "scan_bound", "_free", "_size", "_out_hw", "_changed", "_mask",
                 "kernels", "membership_gen", "__weakref__",
                 *(name for name, _, _ in _PARTITION_COLUMNS + _SLOT_COLUMNS))  # the columns

    leader_leo: npt.NDArray[np.int64]
    hw: npt.NDArray[np.int64]
    leader_epoch: npt.NDArray[np.int32]
    epoch_start_offset: npt.NDArray[np.int64]
    min_isr: npt.NDArray[np.int32]
    n_replicas: npt.NDArray[np.int32]
    isr_state: npt.NDArray[np.uint8]
    active: npt.NDArray[np.uint8]
    replica_id: npt.NDArray[np.int32]
    leo: npt.NDArray[np.int64]
    log_start_offset: npt.NDArray[np.int64]
    last_fetch_leader_leo: npt.NDArray[np.int64]
    last_fetch_time_ms: npt.NDArray[np.int64]
    last_caught_up_time_ms: npt.NDArray[np.int64]
    broker_epoch: npt.NDArray[np.int64]
    in_isr: npt.NDArray[np.uint8]
    in_max_isr: npt.NDArray[np.uint8]
    eligible: npt.NDArray[np.uint8]

    def __init__(self, broker_id: int, *, max_replicas: int = 3, capacity: int = 1024,
                 replica_lag_time_max_ms: int = DEFAULT_REPLICA_LAG_TIME_MAX_MS,
                 pure: bool | None = None) -> None:
        if max_replicas < 1 or capacity < 1:
            raise ValueError("max_replicas and capacity must be positive")
        self.broker_id = int(broker_id)
        self.replica_lag_time_max_ms = int(replica_lag_time_max_ms)
        self.kernel_module = load("_replica_state", "replica_state_py", pure=pure)
        self.capacity = 0
        self.max_replicas = 0
        self.scan_bound = 0  # indexes [0, scan_bound) have ever been used
        self._free: list[int] = []
        self._size = 0
        self._allocate(int(capacity), int(max_replicas))

    # ---- storage -----------------------------------------------------------------------------
    def _allocate(self, capacity: int, max_replicas: int) -> None:
        old_p, old_r = self.capacity, self.max_replicas
        for name, dtype, fill in _PARTITION_COLUMNS:
            col = np.full(capacity, fill, dtype=dtype)
            if old_p:
                col[:old_p] = getattr(self, name)
            setattr(self, name, col)
        for name, dtype, fill in _SLOT_COLUMNS:
            col = np.full((capacity, max_replicas), fill, dtype=dtype)
            if old_p:
                col[:old_p, :old_r] = getattr(self, name)
            setattr(self, name, col)
        self.capacity, self.max_replicas = capacity, max_replicas
        self._out_hw = np.zeros(capacity, dtype=np.int64)
        self._changed = np.zeros(capacity, dtype=np.uint8)
        self._mask = np.zeros(capacity * max_replicas, dtype=np.uint8)
        self.membership_gen = 0
        """Bumped by every write of a row's layout, maximal ISR or followers' LEOs outside the
        §6.2 fetch update (a row led, dropped or re-laid, a new leader epoch, an ISR
        transition): while it stands, those are as they were (the fetch session scans rely on
        it, ``ReplicaManager._session_reads``)."""
        self.kernels = self.kernel_module.ReplicaStateKernels(self, max_replicas)

    def reserve(self, capacity: int, max_replicas: int | None = None) -> None:
        """Grow to at least ``capacity`` partitions and ``max_replicas`` slots (never shrinks)."""
        r = max(self.max_replicas, max_replicas or 0)
        if capacity > self.capacity or r > self.max_replicas:
            self._allocate(max(capacity, self.capacity), r)

    def __len__(self) -> int:
        return self._size

    def __contains__(self, p: object) -> bool:
        return isinstance(p, (int, np.integer)) and 0 <= p < self.capacity and bool(self.active[p])

    def partitions(self) -> npt.NDArray[np.intp]:
        """Indexes of the active partitions, ascending."""
        return np.flatnonzero(self.active[: self.scan_bound])

    # ---- membership --------------------------------------------------------------------------
    def add_partition(self, replicas: Sequence[int], isr: Iterable[int], *, leader_epoch: int,
                      now_ms: int, leader_leo: int = 0, hw: int = 0, min_isr: int = 1,
                      eligible: Iterable[int] | None = None) -> int:
        """Start leading a partition (Partition.makeLeader as a NEW leader, §6.1); its index.

        ``replicas`` is the assignment and must contain this broker. Followers start empty
        (LEO/LSO/lastFetchLeaderLogEndOffset −1, lastFetchTimeMs 0, no broker epoch);
        lastCaughtUpTimeMs is ``now_ms`` for ISR members, else 0. The leader epoch starts at
        ``leader_leo``; the HW is kept as given, not recomputed. ``eligible`` lists the
        ISR-eligible followers (default: all).
        """
        self.membership_gen += 1
        replicas = list(map(int, replicas))
        isr_set = set(map(int, isr))
        self._validate_assignment(replicas, isr_set)
        if min_isr < 1:
            raise ValueError("min.insync.replicas must be at least 1")
        if not 0 <= hw <= leader_leo:
            raise ValueError(f"high watermark {hw} outside [0, {leader_leo}]")
        if len(replicas) > self.max_replicas:
            self.reserve(self.capacity, len(replicas))
        if self._free:
            p = heapq.heappop(self._free)
            self._clear_row(p)  # isr_state COMMITTED; every slot padding, follower state empty
        else:
            if self.scan_bound == self.capacity:
                self.reserve(2 * self.capacity)
            # a row at scan_bound was never used: it holds the fill values _allocate gave it
            # (nothing writes at or past scan_bound), as a cleared row does
            p = self.scan_bound
            self.scan_bound += 1
        me = self.broker_id
        row = [me, *(b for b in replicas if b != me)]
        n = len(row)
        eligible_set = None if eligible is None else {int(b) for b in eligible}
        self.leader_leo[p] = leader_leo
        self.hw[p] = hw
        self.min_isr[p] = min_isr
        self.active[p] = 1
        self._size += 1
        # the slots as _write_slots lays them out for new followers, then a NEW leader's epoch
        # (start_leader_epoch): the followers' reset state is the cleared row's already. Slot by
        # slot: a handful of scalar stores cost less than building an array for each column.
        replica_id, in_isr_col, in_max_isr = self.replica_id, self.in_isr, self.in_max_isr
        eligible_col, caught_up = self.eligible, self.last_caught_up_time_ms
        for r, b in enumerate(row):
            f = b in isr_set
            replica_id[p, r] = b
            in_isr_col[p, r] = f
            in_max_isr[p, r] = f
            if r:
                eligible_col[p, r] = eligible_set is None or b in eligible_set
                caught_up[p, r] = now_ms if f else 0
        self.n_replicas[p] = n
        self.leader_epoch[p] = leader_epoch
        self.epoch_start_offset[p] = leader_leo
        return p

    def lead_partitions(self, rows: Sequence[int], replicas: Sequence[Sequence[int]],
                        isrs: Sequence[Sequence[int]], *, leader_epochs: Sequence[int],
                        leader_leos: Sequence[int], hws: Sequence[int],
                        min_isrs: Sequence[int], log_starts: Sequence[int],
                        new_epochs: Sequence[bool], new_leaders: Sequence[bool], now_ms: int,
                        ineligible: Iterable[int] = ()) -> list[int]:
        """Partition.makeLeader's table part (§6.1) for every partition of one LeaderAndIsr, in
        one validation pass and one kernel call; the rows, in order.

        Entry ``i`` is a partition this broker starts leading (``rows[i]`` −1: a row is taken
        as :meth:`add_partition` takes it, in entry order) or leads already (its row:
        :meth:`set_assignment` with this broker's eligibility, its LEO and min ISR, then with
        ``new_epochs[i]`` :meth:`start_leader_epoch` with ``new_leaders[i]``). Slot 0's log
        start becomes ``log_starts[i]``. Every row ends as those one-row calls leave it;
        ``ineligible`` are the brokers that may not join an ISR (KIP-841). Nothing is written
        when any entry breaks the assignment rules (the one-row calls' errors)."""
        self.membership_gen += 1
        k = len(rows)
        me = self.broker_id
        rows = [int(p) for p in rows]
        reps = [int(b) for rs in replicas for b in rs]
        rep_off = [0, *accumulate(map(len, replicas))]
        isr = [int(b) for ms in isrs for b in ms]
        isr_off = [0, *accumulate(map(len, isrs))]
        leos = list(leader_leos)
        hws = list(hws)
        min_isrs = list(min_isrs)
        if not (len(replicas) == len(isrs) == len(leader_epochs) == len(leos) == len(hws)
                == len(min_isrs) == len(log_starts) == len(new_epochs) == len(new_leaders)
                == k):
            raise ValueError("lead columns disagree in length")
        bad = self.kernels.check_lead(rows, reps, rep_off, isr, isr_off, min_isrs, leos, hws, me)
        if bad >= 0:
            self._raise_lead_error(rows[bad], list(replicas[bad]), set(isrs[bad]),
                                   min_isrs[bad], leos[bad], hws[bad])
        width = max(map(len, replicas), default=0)
        if width > self.max_replicas:
            self.reserve(self.capacity, width)
        flags = []
        free = self._free
        fresh = sum(1 for p in rows if p < 0)
        need = self.scan_bound + max(0, fresh - len(free))
        capacity = self.capacity
        while need > capacity:  # as add_partition grows: doubling when the rows run out
            capacity *= 2
        if capacity > self.capacity:
            self.reserve(capacity)
        for i, p in enumerate(rows):
            if p >= 0:
                flags.append(_LEAD_KEPT_ROW | (_LEAD_NEW_EPOCH if new_epochs[i] else 0)
                             | (_LEAD_NEW_LEADER if new_leaders[i] else 0))
                continue
            if free:
                rows[i] = heapq.heappop(free)
            else:
                rows[i] = self.scan_bound
                self.scan_bound += 1
            flags.append(0)
        self._size += fresh
        self.kernels.lead_rows(rows, flags, reps, rep_off, isr, isr_off,
                               sorted({int(b) for b in ineligible}), list(leader_epochs), leos,
                               hws, min_isrs, list(log_starts), now_ms, me)
        return rows

    def _raise_lead_error(self, p: int, replicas: list[int], isr: set[int], min_isr: int,
                          leader_leo: int, hw: int) -> None:
        """The error of the one-row call for a bad :meth:`lead_partitions` entry."""
        if p >= 0:
            self._check(p)
        self._validate_assignment(replicas, isr)
        if min_isr < 1:
            raise ValueError("min.insync.replicas must be at least 1")
        if p < 0 and not 0 <= hw <= leader_leo:
            raise ValueError(f"high watermark {hw} outside [0, {leader_leo}]")
        raise ValueError(f"bad leader state for partition {p}")  # (the kernel's rules are these)

    def remove_partition(self, p: int) -> None:
        """Stop leading partition ``p``; its index may be reused."""
        self.membership_gen += 1
        self._check(p)
        self._clear_row(p)
        self._size -= 1
        heapq.heappush(self._free, p)

    def set_assignment(self, p: int, replicas: Sequence[int], isr: Iterable[int],
                       eligible: Iterable[int] | None = None) -> None:
        """Partition.updateAssignmentAndIsr on the leader: followers still assigned keep their
        fetch state, new ones start empty, removed ones are dropped; the ISR becomes committed."""
        self.membership_gen += 1
        self._check(p)
        replicas = [int(b) for b in replicas]
        isr_set = {int(b) for b in isr}
        self._validate_assignment(replicas, isr_set)
        if len(replicas) > self.max_replicas:
            self.reserve(self.capacity, len(replicas))
        kept = {}
        for r in range(1, int(self.n_replicas[p])):
            kept[int(self.replica_id[p, r])] = {
                name: getattr(self, name)[p, r] for name in _EMPTY_FOLLOWER + ("eligible",)}
        self.isr_state[p] = IsrState.COMMITTED
        self._write_slots(p, replicas, isr_set, kept, eligible, new_follower_empty=True)

    def start_leader_epoch(self, p: int, leader_epoch: int, now_ms: int, *,
                           new_leader: bool) -> None:
        """The new-leader-epoch part of Partition.makeLeader (§6.1 step 5).

        The epoch starts at the leader's LEO; every follower is reset
        (Replica.resetReplicaState): a NEW leader forgets follower LEO/LSO/broker epoch and sets
        lastFetchLeaderLogEndOffset −1 and lastFetchTimeMs 0; a re-elected leader keeps them,
        sets lastFetchLeaderLogEndOffset to the epoch start and lastFetchTimeMs to ``now_ms`` for
        ISR members (0 otherwise). Either way lastCaughtUpTimeMs is ``now_ms`` for ISR members,
        else 0, so a follower outside the ISR does not hold the HW back. The HW is unchanged.
        """
        self.membership_gen += 1
        self._check(p)
        start = int(self.leader_leo[p])
        self.leader_epoch[p] = leader_epoch
        self.epoch_start_offset[p] = start
        n = int(self.n_replicas[p])
        in_isr = self.in_isr[p, 1:n].astype(bool)
        now_or_zero = np.where(in_isr, now_ms, 0)
        if new_leader:
            self.leo[p, 1:n] = UNKNOWN_OFFSET
            self.log_start_offset[p, 1:n] = UNKNOWN_OFFSET
            self.last_fetch_leader_leo[p, 1:n] = UNKNOWN_OFFSET
            self.last_fetch_time_ms[p, 1:n] = 0
            self.broker_epoch[p, 1:n] = NO_BROKER_EPOCH
        else:
            self.last_fetch_leader_leo[p, 1:n] = start
            self.last_fetch_time_ms[p, 1:n] = now_or_zero
        self.last_caught_up_time_ms[p, 1:n] = now_or_zero

    def _validate_assignment(self, replicas: list[int], isr: set[int]) -> None:
        if self.broker_id not in replicas:
            raise ValueError(f"broker {self.broker_id} is not in the assignment {replicas}")
        if len(set(replicas)) != len(replicas) or min(replicas) < 0:
            raise ValueError(f"bad assignment {replicas}")
        if not isr <= set(replicas):
            raise ValueError(f"ISR {sorted(isr)} is not a subset of the assignment {replicas}")

    def _clear_row(self, p: int) -> None:
        for name, _dtype, fill in _PARTITION_COLUMNS:
            getattr(self, name)[p] = fill
        for name, _dtype, fill in _SLOT_COLUMNS:
            getattr(self, name)[p, :] = fill

    def _write_slots(self, p: int, replicas: list[int], isr: set[int],
                     kept: dict[int, dict[str, Any]], eligible: Iterable[int] | None, *,
                     new_follower_empty: bool = False) -> None:
        """Lay out row ``p``'s slots. A follower new to the row starts as Kafka's
        ``ReplicaState.Empty`` when ``new_follower_empty`` (lastFetchLeaderLogEndOffset 0; a
        replica added to a partition this broker keeps leading), else as after a new leader's
        ``resetReplicaState`` (−1)."""
        followers = [b for b in replicas if b != self.broker_id]
        eligible_set = set(followers) if eligible is None else {int(b) for b in eligible}
        for name, _dtype, fill in _SLOT_COLUMNS:
            getattr(self, name)[p, :] = fill
        self.replica_id[p, 0] = self.broker_id
        self.in_isr[p, 0] = self.in_max_isr[p, 0] = self.broker_id in isr
        for r, b in enumerate(followers, start=1):
            self.replica_id[p, r] = b
            self.in_isr[p, r] = self.in_max_isr[p, r] = b in isr
            old = kept.get(b)
            if old is not None:
                for name, value in old.items():
                    getattr(self, name)[p, r] = value
                if eligible is not None:
                    self.eligible[p, r] = b in eligible_set
            else:
                self.eligible[p, r] = b in eligible_set
                if new_follower_empty:
                    self.last_fetch_leader_leo[p, r] = 0
        self.n_replicas[p] = len(replicas)

    def _check(self, p: int) -> None:
        if not (0 <= p < self.capacity and self.active[p]):
            raise IndexError(f"no partition {p}")

    # ---- reading -----------------------------------------------------------------------------
    def slot(self, p: int, broker_id: int) -> int:
        """Slot of ``broker_id`` in partition ``p`` (0 = this broker), −1 if not assigned."""
        self._check(p)
        ids = self.replica_id[p, : self.n_replicas[p]].tolist()
        return ids.index(broker_id) if broker_id in ids else -1

    def replicas(self, p: int) -> list[int]:
        """Broker ids by slot: this broker first, then the followers in assignment order."""
        self._check(p)
        return [int(b) for b in self.replica_id[p, : self.n_replicas[p]]]

    def isr(self, p: int) -> list[int]:
        """The committed ISR (slot order)."""
        self._check(p)
        n = self.n_replicas[p]
        return [int(b) for b in self.replica_id[p, :n][self.in_isr[p, :n] != 0]]

    def maximal_isr(self, p: int) -> list[int]:
        """The maximal ISR (KIP-497): committed ISR plus a pending expansion; the old ISR while a
        shrink is pending."""
        self._check(p)
        n = self.n_replicas[p]
        return [int(b) for b in self.replica_id[p, :n][self.in_max_isr[p, :n] != 0]]

    def sorted_isr(self, p: int) -> list[int]:
        """The committed ISR, ascending broker ids (one kernel call: no array temporaries)."""
        return self.kernels.sorted_isr(p)

    def sorted_maximal_isr(self, p: int) -> list[int]:
        """The maximal ISR (KIP-497), ascending broker ids."""
        return self.kernels.sorted_maximal_isr(p)

    def maximal_isr_size(self, p: int) -> int:
        """Members of the maximal ISR (what a produce response reports as the ISR size)."""
        return self.kernels.maximal_isr_size(p)

    def effective_min_isr(self, p: int) -> int:
        """min(min.insync.replicas, assigned replicas incl. the leader) (Partition.effectiveMinIsr)."""
        self._check(p)
        return int(min(self.min_isr[p], self.n_replicas[p]))

    def is_under_min_isr(self, p: int) -> bool:
        """Committed ISR smaller than the effective min ISR (Partition.isUnderMinIsr)."""
        return int(np.count_nonzero(self.in_isr[p])) < self.effective_min_isr(p)

    def partition(self, p: int) -> PartitionView:
        """A thin view of partition ``p``."""
        self._check(p)
        return PartitionView(self, p)

    # ---- ISR transitions (AlterPartition, §6.5-§6.7) -----------------------------------------
    def prepare_isr_expand(self, p: int, r: int) -> None:
        """PendingExpandIsr: slot ``r`` counts in the maximal ISR (for the HW) at once."""
        self.membership_gen += 1
        self._check_follower(p, r)
        if self.isr_state.item(p) != IsrState.COMMITTED:
            raise ValueError(f"partition {p} has an ISR update in flight")
        self.isr_state[p] = IsrState.PENDING_EXPAND
        self.in_max_isr[p, r] = 1

    def prepare_isr_shrink(self, p: int, slots: Iterable[int]) -> None:
        """PendingShrinkIsr: the maximal ISR stays the old ISR until the controller accepts."""
        self._check(p)
        for r in slots:
            self._check_follower(p, r)
        if self.isr_state.item(p) != IsrState.COMMITTED:
            raise ValueError(f"partition {p} has an ISR update in flight")
        self.isr_state[p] = IsrState.PENDING_SHRINK

    def commit_isr(self, p: int, isr: Iterable[int]) -> None:
        """CommittedPartitionState(isr): committed and maximal ISR both become ``isr`` (ids)."""
        self.membership_gen += 1
        self._check(p)
        isr_set = {int(b) for b in isr}
        n = int(self.n_replicas[p])
        ids = self.replica_id[p, :n].tolist()
        unknown = isr_set.difference(ids)
        if unknown:
            raise ValueError(f"ISR members {sorted(unknown)} are not assigned")
        # a replica set is a handful of ids: a plain membership test per slot
        member = [1 if b in isr_set else 0 for b in ids]
        self.in_isr[p, :n] = member
        self.in_max_isr[p, :n] = member
        self.isr_state[p] = IsrState.COMMITTED

    def revert_isr(self, p: int) -> None:
        """Drop an in-flight AlterPartition: back to the last committed ISR."""
        self.membership_gen += 1
        self._check(p)
        self.in_max_isr[p] = self.in_isr[p]
        self.isr_state[p] = IsrState.COMMITTED

    def _check_follower(self, p: int, r: int) -> None:
        self._check(p)
        if not 1 <= r < self.n_replicas[p]:
            raise IndexError(f"no follower slot ({p}, {r})")

    # ---- kernels: one partition --------------------------------------------------------------
    def update_follower_fetch(self, p: int, r: int, fetch_offset: int, follower_log_start: int,
                              fetch_time_ms: int, leader_end_offset: int,
                              broker_epoch: int = -1) -> bool:
        """§6.2 Replica.updateFetchStateOrThrow for follower slot ``r``; True iff its LEO changed.

        ``leader_end_offset`` is the leader LEO captured before the read. Hot loops may call
        ``table.kernels.follower_fetch`` directly (same arguments) to skip this frame.
        """
        return self.kernels.follower_fetch(p, r, fetch_offset, follower_log_start, fetch_time_ms,
                                           leader_end_offset, broker_epoch)

    def is_caught_up(self, p: int, r: int, now_ms: int) -> bool:
        """§6.3 isCaughtUp with replica.lag.time.max.ms."""
        return self.kernels.is_caught_up(p, r, now_ms, self.replica_lag_time_max_ms)

    def hw_candidate(self, p: int, now_ms: int) -> int:
        """§6.4: the HW partition ``p`` would have after maybeIncrementLeaderHW (≥ current)."""
        return self.kernels.hw_candidate(p, now_ms, self.replica_lag_time_max_ms)

    def maybe_increment_hw(self, p: int, now_ms: int) -> bool:
        """§6.4 maybeIncrementLeaderHW; True iff the HW moved (it never moves back)."""
        return self.kernels.maybe_increment_hw(p, now_ms, self.replica_lag_time_max_ms)

    def out_of_sync_slots(self, p: int, now_ms: int) -> list[int]:
        """§6.6 getOutOfSyncReplicas as follower slots (empty while an AlterPartition is in flight)."""
        self._check(p)
        if self.max_replicas > 63:
            self.kernels.out_of_sync_all(now_ms, self.replica_lag_time_max_ms, self.scan_bound,
                                         self._mask)
            row = self._mask[p * self.max_replicas: (p + 1) * self.max_replicas]
            return [int(r) for r in np.flatnonzero(row)]
        bits = self.kernels.out_of_sync(p, now_ms, self.replica_lag_time_max_ms)
        return [r for r in range(1, self.max_replicas) if bits >> r & 1]

    def out_of_sync_replicas(self, p: int, now_ms: int) -> list[int]:
        """§6.6 getOutOfSyncReplicas as broker ids."""
        return [int(self.replica_id[p, r]) for r in self.out_of_sync_slots(p, now_ms)]

    def can_expand_isr(self, p: int, r: int) -> bool:
        """§6.5 needsExpandIsr for follower slot ``r``."""
        return self.kernels.can_expand_isr(p, r)

    # ---- kernels: every partition ------------------------------------------------------------
    def update_follower_fetches(self, ps: npt.ArrayLike, rs: npt.ArrayLike,
                                fetch_offsets: npt.ArrayLike, follower_log_starts: npt.ArrayLike,
                                leader_end_offsets: npt.ArrayLike, fetch_time_ms: int,
                                broker_epoch: int = -1) -> npt.NDArray[np.bool_]:
        """§6.2 for every (ps[k], rs[k]) of one fetch request, in order; LEO-changed flags."""
        arrays = [np.ascontiguousarray(a, dtype=np.int64)
                  for a in (ps, rs, fetch_offsets, follower_log_starts, leader_end_offsets)]
        changed = np.zeros(len(arrays[0]), dtype=np.uint8)
        self.kernels.follower_fetch_batch(*arrays, fetch_time_ms, broker_epoch, changed)
        return changed.view(np.bool_)

    def maybe_increment_all_hw(self, now_ms: int) -> npt.NDArray[np.intp]:
        """§6.4 over every partition; indexes whose HW moved."""
        n = self.scan_bound
        self.kernels.hw_candidates_all(now_ms, self.replica_lag_time_max_ms, n, self.hw,
                                       self._changed)
        return np.flatnonzero(self._changed[:n])

    def hw_candidates(self, now_ms: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
        """§6.4 candidates for every index without applying them: (hw, changed) copies."""
        n = self.scan_bound
        self.kernels.hw_candidates_all(now_ms, self.replica_lag_time_max_ms, n, self._out_hw,
                                       self._changed)
        return self._out_hw[:n].copy(), self._changed[:n].astype(bool)

    def out_of_sync_all(self, now_ms: int) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
        """§6.6 over every partition: (partition indexes, follower slots) to shrink away."""
        self.kernels.out_of_sync_all(now_ms, self.replica_lag_time_max_ms, self.scan_bound,
                                     self._mask)
        return self._pairs()

    def maybe_increment_all_hw_and_out_of_sync(
            self, now_ms: int) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp],
                                        npt.NDArray[np.intp]]:
        """§6.4 and §6.6 in one sweep: (partitions whose HW moved, out-of-sync ps, rs)."""
        n = self.scan_bound
        self.kernels.hw_and_out_of_sync_all(now_ms, self.replica_lag_time_max_ms, n, self.hw,
                                            self._changed, self._mask)
        ps, rs = self._pairs()
        return np.flatnonzero(self._changed[:n]), ps, rs

    def expand_candidates_all(self) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
        """§6.5 over every partition: (partition indexes, follower slots) that may join the ISR."""
        self.kernels.expand_candidates_all(self.scan_bound, self._mask)
        return self._pairs()

    def follower_lags(self) -> npt.NDArray[np.int64]:
        """Every assigned follower's lag behind its leader, in records (leader LEO − follower
        LEO, as the leader sees them), over the active rows in row then slot order; a follower
        whose LEO the leader does not know yet is left out. One kernel pass."""
        n = self.scan_bound
        out = np.empty(n * self.max_replicas, dtype=np.int64)
        return out[:self.kernels.follower_lags(n, out)]

    def _pairs(self) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
        flat = np.flatnonzero(self._mask[: self.scan_bound * self.max_replicas])
        return flat // self.max_replicas, flat % self.max_replicas


class PartitionView:
    """One partition of a :class:`ReplicaStateTable`; reads and writes go to the table."""

    __slots__ = ("table", "index")

    def __init__(self, table: ReplicaStateTable, index: int) -> None:
        self.table = table
        self.index = index

    def __repr__(self) -> str:
        return (f"PartitionView({self.index}, leo={self.leader_leo}, hw={self.hw}, "
                f"epoch={self.leader_epoch}, isr={self.isr}, state={self.isr_state.name})")

    @property
    def leader_leo(self) -> int:
        return int(self.table.leader_leo[self.index])

    @leader_leo.setter
    def leader_leo(self, value: int) -> None:
        self.table.leader_leo[self.index] = value

    @property
    def hw(self) -> int:
        return int(self.table.hw[self.index])

    @property
    def leader_epoch(self) -> int:
        return int(self.table.leader_epoch[self.index])

    @property
    def epoch_start_offset(self) -> int:
        return int(self.table.epoch_start_offset[self.index])

    @property
    def min_isr(self) -> int:
        return int(self.table.min_isr[self.index])

    @min_isr.setter
    def min_isr(self, value: int) -> None:
        if value < 1:
            raise ValueError("min.insync.replicas must be at least 1")
        self.table.min_isr[self.index] = value

    @property
    def isr_state(self) -> IsrState:
        return IsrState(int(self.table.isr_state[self.index]))

    @property
    def replicas(self) -> list[int]:
        return self.table.replicas(self.index)

    @property
    def isr(self) -> list[int]:
        return self.table.isr(self.index)

    @property
    def maximal_isr(self) -> list[int]:
        return self.table.maximal_isr(self.index)

    def replica(self, broker_id: int) -> ReplicaView:
        """The follower ``broker_id`` of this partition."""
        r = self.table.slot(self.index, broker_id)
        if r < 1:
            raise KeyError(f"broker {broker_id} is not a follower of partition {self.index}")
        return ReplicaView(self.table, self.index, r)

    def followers(self) -> list[ReplicaView]:
        return [ReplicaView(self.table, self.index, r)
                for r in range(1, int(self.table.n_replicas[self.index]))]


class ReplicaView:
    """One follower slot of one partition (Kafka's remote ``Replica``), read from the table."""

    __slots__ = ("table", "index", "slot")

    def __init__(self, table: ReplicaStateTable, index: int, slot: int) -> None:
        self.table = table
        self.index = index
        self.slot = slot

    def __repr__(self) -> str:
        return (f"ReplicaView(broker={self.broker_id}, leo={self.log_end_offset}, "
                f"lastCaughtUpTimeMs={self.last_caught_up_time_ms}, in_isr={self.in_isr})")

    def _get(self, column: str) -> int:
        return int(getattr(self.table, column)[self.index, self.slot])

    @property
    def broker_id(self) -> int:
        return self._get("replica_id")

    @property
    def log_end_offset(self) -> int:
        return self._get("leo")

    @property
    def log_start_offset(self) -> int:
        return self._get("log_start_offset")

    @property
    def last_fetch_leader_log_end_offset(self) -> int:
        return self._get("last_fetch_leader_leo")

    @property
    def last_fetch_time_ms(self) -> int:
        return self._get("last_fetch_time_ms")

    @property
    def last_caught_up_time_ms(self) -> int:
        return self._get("last_caught_up_time_ms")

    @property
    def broker_epoch(self) -> int:
        return self._get("broker_epoch")

    @property
    def in_isr(self) -> bool:
        return bool(self._get("in_isr"))

    @property
    def in_maximal_isr(self) -> bool:
        return bool(self._get("in_max_isr"))

    @property
    def eligible(self) -> bool:
        return bool(self._get("eligible"))

    @eligible.setter
    def eligible(self, value: bool) -> None:
        self.table.eligible[self.index, self.slot] = bool(value)
