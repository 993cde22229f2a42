"""One partition on one broker: leader and follower roles, HW, ISR changes (KAFKA_SEMANTICS §6).

Kafka's ``Partition.scala``. The leader-side state of every partition a broker leads lives in the
broker's :class:`~replica_core.replication.state.ReplicaStateTable`; a ``Partition`` holds its row
index there (``row``, −1 while not leading) and applies the §6 rules through the table's kernels
(follower fetch update, HW, ISR expansion check). What the table does not hold — the log, the
leader and partition epochs, the assignment and the in-flight AlterPartition — lives here.

Who calls what: :class:`~replica_core.replication.replica_manager.ReplicaManager` owns the
partitions, the table and the purgatories; a ``Partition`` reaches only the narrow collaborators
of its :class:`~replica_core.replication.partition_context.PartitionContext` (as Kafka's does).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from replica_core.errors import (
    Errors,
    KafkaStorageError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    UnexpectedAppendOffsetError,
    UnknownLeaderEpochError,
    for_code,
)
from replica_core.replication.messages import (
    LEADER_RECOVERY_RECOVERED,
    NO_EPOCH,
    NO_LEADER,
    UNDEFINED_EPOCH_OFFSET,
    AlterPartitionItem,
    AlterPartitionResult,
    EpochEndOffset,
    LeaderAndIsrPartitionState,
    TopicPartition,
)
from replica_core.replication.partition_context import PartitionContext, PartitionLog
from replica_core.replication.state import (
    FETCH_EXPAND,
    FETCH_HW_MOVED,
    FETCH_LEO_CHANGED,
    NO_BROKER_EPOCH,
    IsrState,
)

ISOLATION_LOG_END = "log_end"
ISOLATION_HIGH_WATERMARK = "high_watermark"
ISOLATION_TXN_COMMITTED = "txn_committed"

# AlterPartition errors after which the leader stays pending until new metadata (§6.7).
_STAY_PENDING = frozenset({
    Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.UNKNOWN_TOPIC_ID, Errors.FENCED_LEADER_EPOCH,
    Errors.INVALID_UPDATE_VERSION, Errors.INVALID_REQUEST, Errors.NEW_LEADER_ELECTED})
_REVERT = frozenset({Errors.OPERATION_NOT_ATTEMPTED, Errors.INELIGIBLE_REPLICA})


class LogReadInfo(NamedTuple):
    """Partition.readRecords' answer: the read (None when diverging) and the offsets captured
    BEFORE the read (§3.5), so later appends never hide a follower's progress."""

    fetched: Any  # storage FetchDataInfo, or None with a diverging epoch
    diverging_epoch: EpochEndOffset | None
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    last_stable_offset: int


class AppendResult(NamedTuple):
    """appendRecordsToLeader's answer: the storage LogAppendInfo and whether the HW moved."""

    info: Any
    hw_incremented: bool


class OffsetSnapshot(NamedTuple):
    """fetchOffsetSnapshot for DelayedFetch: LEO, HW and last stable offset as metadata."""

    log_end_offset: Any
    high_watermark: Any
    last_stable_offset: Any


_ACT = FETCH_EXPAND | FETCH_HW_MOVED
"""The follower-fetch kernel flags that leave work to :meth:`Partition._after_fetch`."""


def _optional_epoch(epoch: int) -> int | None:
    """Kafka's ``optionalEpoch``: a request epoch < 0 means "not given"."""
    return epoch if epoch >= 0 else None


class Partition:
    """Kafka's ``Partition`` for ``tp`` on broker ``context.broker_id``."""

    __slots__ = ("tp", "broker_id", "table", "clock", "config", "_broker_epoch", "isr_listener",
                 "delayed", "alter_partition", "logs", "rows", "metadata", "log", "leader_id",
                 "is_leader", "leader_epoch", "partition_epoch", "controller_epoch",
                 "leader_epoch_start_offset", "replicas", "adding_replicas", "removing_replicas",
                 "leader_recovery_state", "topic_id", "row", "slot_of", "_pending",
                 "_pending_shrunk", "__weakref__")

    def __init__(self, tp: TopicPartition, context: PartitionContext) -> None:
        self.tp = tp
        self.broker_id = context.broker_id
        self.table = context.table  # the broker's replica-state table (rows while leading)
        self.clock = context.clock
        self.config = context.config
        self._broker_epoch = context.broker_epoch
        self.isr_listener = context.isr_listener
        self.delayed = context.delayed
        self.alter_partition = context.alter_partition
        self.logs = context.logs
        self.rows = context.rows
        self.metadata = context.metadata
        self.log: PartitionLog | None = None
        self.leader_id: int = NO_LEADER
        self.is_leader = False
        """``leader_id == broker_id``: kept with ``leader_id`` (read on every fetch and append)."""
        self.leader_epoch: int = NO_EPOCH
        self.partition_epoch: int = -1
        self.controller_epoch: int = 0
        self.leader_epoch_start_offset: int | None = None
        self.replicas: tuple[int, ...] = ()
        self.adding_replicas: tuple[int, ...] = ()
        self.removing_replicas: tuple[int, ...] = ()
        self.leader_recovery_state = LEADER_RECOVERY_RECOVERED
        self.topic_id: str | None = None
        self.row = -1  # index in the broker's ReplicaStateTable while leading
        self.slot_of: dict[int, int] = {}
        """Follower id -> its slot in the state-table row while leading (read-only outside)."""
        self._pending: AlterPartitionItem | None = None  # in-flight AlterPartition
        self._pending_shrunk: tuple[int, ...] = ()

    def __repr__(self) -> str:
        return (f"Partition({self.tp}, leader={self.leader_id}, epoch={self.leader_epoch}, "
                f"isr={self.isr}, hw={self.high_watermark}, leo={self.log_end_offset})")

    # ---- views -------------------------------------------------------------------------------
    @property
    def isr(self) -> list[int]:
        """The committed ISR, sorted (empty on a follower: Kafka clears it in makeFollower)."""
        return self.table.sorted_isr(self.row) if self.row >= 0 else []

    @property
    def maximal_isr(self) -> list[int]:
        """Committed ISR plus a pending expansion; the old ISR while a shrink is pending."""
        return self.table.sorted_maximal_isr(self.row) if self.row >= 0 else []

    @property
    def isr_state(self) -> IsrState:
        if self.row < 0:
            return IsrState.COMMITTED
        return IsrState(int(self.table.isr_state[self.row]))

    @property
    def pending_alter_partition(self) -> AlterPartitionItem | None:
        return self._pending

    @property
    def high_watermark(self) -> int:
        if self.row >= 0:
            return self.table.hw.item(self.row)  # a plain int, without a numpy scalar
        return int(self.log.high_watermark) if self.log is not None else -1

    @property
    def log_end_offset(self) -> int:
        return int(self.log.log_end_offset) if self.log is not None else -1

    @property
    def log_start_offset(self) -> int:
        return int(self.log.log_start_offset) if self.log is not None else -1

    @property
    def min_insync_replicas(self) -> int:
        """The topic's ``min.insync.replicas`` when its LogConfig sets one (a value other than
        Kafka's default 1), else the broker's (Kafka builds topic configs over broker defaults)."""
        value = self.log.config.min_insync_replicas if self.log is not None else 1
        if int(value) != 1:
            return int(value)
        return self.config.min_insync_replicas

    def effective_min_isr(self) -> int:
        """min(min.insync.replicas, assigned replicas) (Partition.effectiveMinIsr)."""
        return min(self.min_insync_replicas, max(1, len(self.replicas)))

    @property
    def is_under_replicated(self) -> bool:
        """Leader with an ISR smaller than the replication factor (isUnderReplicated)."""
        n = len(self.replicas) - len(self.adding_replicas)
        return self.is_leader and n - len(self.isr) > 0

    @property
    def is_under_min_isr(self) -> bool:
        return self.is_leader and self.row >= 0 and len(self.isr) < self.effective_min_isr()

    @property
    def is_at_min_isr(self) -> bool:
        return self.is_leader and self.row >= 0 and len(self.isr) == self.effective_min_isr()

    def replica(self, broker_id: int) -> Any:
        """The leader-side state of follower ``broker_id`` (a ReplicaView), or None."""
        if self.row < 0:
            return None
        try:
            return self.table.partition(self.row).replica(broker_id)
        except KeyError:
            return None

    # ---- leader / follower transitions -------------------------------------------------------
    def make_leader(self, state: LeaderAndIsrPartitionState) -> tuple[bool, bool]:
        """Partition.makeLeader (§6.1); (became leader now, HW moved).

        A state with an older partition epoch is skipped. On a new leader epoch the epoch cache
        gets (epoch, LEO) at once (KAFKA-7415) and every follower's fetch state is reset
        (Replica.resetReplicaState); the HW keeps the log's value, it is not recomputed.
        :func:`make_leaders` for one partition (a storage error is raised).
        """
        outcome = make_leaders([(self, state)])[0]
        if isinstance(outcome, KafkaStorageError):
            raise outcome
        return outcome

    def _prepare_leader(self, state: LeaderAndIsrPartitionState) -> Any:
        """makeLeader up to the state table: the assignment, the log (created if missing) and
        no AlterPartition in flight any more; the log."""
        self.controller_epoch = state.controller_epoch
        self._set_assignment(state)
        self.leader_recovery_state = LEADER_RECOVERY_RECOVERED  # RECOVERING is treated as RECOVERED
        log = self._ensure_log(state)
        self._pending = None
        self._pending_shrunk = ()
        self.alter_partition.forget_unsent(self.tp)
        return log

    def _finish_leader(self, state: LeaderAndIsrPartitionState, log: Any, leo: int,
                       is_new_leader_epoch: bool, now: int) -> bool:
        """makeLeader after the state table: the log start listener, the follower slots, the
        new epoch into the epoch cache (written through to its checkpoint), the epochs and the
        leadership; then maybeIncrementLeaderHW. True iff the HW moved."""
        log.log_start_listener = self._on_leader_log_start
        me = self.broker_id
        slot_of = {}
        for b in self.replicas:  # the followers' slots, in assignment order from 1
            if b != me:
                slot_of[b] = len(slot_of) + 1
        self.slot_of = slot_of
        if is_new_leader_epoch:
            log.maybe_assign_epoch_start_offset(state.leader_epoch, leo)
            self.leader_epoch = state.leader_epoch
            self.leader_epoch_start_offset = leo
        self.partition_epoch = state.partition_epoch
        self.leader_id = me
        self.is_leader = True
        return self.maybe_increment_leader_hw(now)

    def make_follower(self, state: LeaderAndIsrPartitionState) -> bool:
        """Partition.makeFollower (§7.10); True iff the leader epoch increased (restart fetcher).

        The ISR is cleared locally, the remote-replica state dropped and the epoch start offset
        forgotten; truncation is the fetcher's job (or the manager's in high_watermark mode).
        """
        if state.partition_epoch < self.partition_epoch:
            return False
        self.controller_epoch = state.controller_epoch
        is_new_leader_epoch = state.leader_epoch > self.leader_epoch
        self.leader_id = state.leader
        self.is_leader = state.leader == self.broker_id
        self.leader_epoch = state.leader_epoch
        self.leader_epoch_start_offset = None
        self.partition_epoch = state.partition_epoch
        self._set_assignment(state)
        self.leader_recovery_state = state.leader_recovery_state
        self._drop_leader_state()
        self._ensure_log(state)
        return is_new_leader_epoch

    def _set_assignment(self, state: LeaderAndIsrPartitionState) -> None:
        self.replicas = tuple(map(int, state.replicas))
        adding, removing = state.adding_replicas, state.removing_replicas
        self.adding_replicas = tuple(map(int, adding)) if adding else ()
        self.removing_replicas = tuple(map(int, removing)) if removing else ()
        if state.topic_id:
            self.topic_id = state.topic_id

    def _ensure_log(self, state: LeaderAndIsrPartitionState | None = None) -> Any:
        if self.log is None:
            self.log = self.logs.get_or_create_log(
                self.tp, is_new=bool(state.is_new) if state else False,
                topic_id=state.topic_id if state else None)
        return self.log

    def _on_leader_log_start(self, offset: int) -> None:
        """The leader's log start moved (DeleteRecords, retention): an incremental fetch session
        answers the partition with it (KIP-227 ``maybeUpdateResponseData``)."""
        if self.row >= 0:
            self.table.log_start_offset[self.row, 0] = offset
            self.delayed.on_leader_log_start_moved(self.tp)

    def _drop_leader_state(self) -> None:
        if self.log is not None and self.log.log_start_listener == self._on_leader_log_start:
            self.log.log_start_listener = None
        self._pending = None
        self._pending_shrunk = ()
        self.alter_partition.forget_unsent(self.tp)
        self.slot_of = {}
        if self.row >= 0:
            self.rows.unregister_row(self)
            self.table.remove_partition(self.row)
            self.row = -1

    def stop(self) -> None:
        """Forget leadership and leader-side state (StopReplica / partition removal)."""
        self.leader_id = NO_LEADER
        self.is_leader = False
        self._drop_leader_state()

    # ---- epoch fencing (KIP-320) -------------------------------------------------------------
    def check_current_leader_epoch(self, current_leader_epoch: int) -> Errors:
        """FENCED_LEADER_EPOCH if the request's epoch is older, UNKNOWN_LEADER_EPOCH if newer
        (Partition.checkCurrentLeaderEpoch); a request epoch < 0 is not checked."""
        if current_leader_epoch < 0:
            return Errors.NONE
        if self.leader_epoch > current_leader_epoch:
            return Errors.FENCED_LEADER_EPOCH
        if self.leader_epoch < current_leader_epoch:
            return Errors.UNKNOWN_LEADER_EPOCH
        return Errors.NONE

    def local_log_or_error(self, current_leader_epoch: int, require_leader: bool) -> Any:
        """getLocalLog: the log, or an Errors code (fencing first, then leadership)."""
        error = self.check_current_leader_epoch(current_leader_epoch)
        if error != Errors.NONE:
            return error
        if require_leader and not self.is_leader:
            return Errors.NOT_LEADER_OR_FOLLOWER
        if self.log is None:
            return Errors.NOT_LEADER_OR_FOLLOWER
        return self.log

    def local_log_with_epoch_or_raise(self, current_leader_epoch: int, require_leader: bool) -> Any:
        """localLogWithEpochOrThrow."""
        log = self.local_log_or_error(current_leader_epoch, require_leader)
        if isinstance(log, Errors):
            raise for_code(log, f"{self.tp}: {log.name} (request epoch {current_leader_epoch}, "
                                f"local epoch {self.leader_epoch}, leader {self.leader_id})")
        return log

    # ---- leader append -----------------------------------------------------------------------
    def append_records_to_leader(self, records: bytes | memoryview, *, required_acks: int,
                                 origin: str = "client") -> AppendResult:
        """Partition.appendRecordsToLeader (§6.8).

        With acks=−1 the COMMITTED ISR must reach the effective min ISR before anything is
        written (NotEnoughReplicasError); acks 0/1 ignore min ISR. After the append the HW may
        advance (the ISR may be the leader alone).
        """
        if not self.is_leader or self.row < 0 or self.log is None:
            raise NotLeaderOrFollowerError(
                f"Leader not local for partition {self.tp} on broker {self.broker_id}")
        table = self.table
        row = self.row
        if required_acks == -1:
            isr_size = table.kernels.isr_size(row)
            min_isr = self.effective_min_isr()
            if isr_size < min_isr:
                raise NotEnoughReplicasError(
                    f"The size of the current ISR {self.isr} is insufficient to satisfy the "
                    f"min.isr requirement of {min_isr} for partition {self.tp}")
        log = self.log
        info = log.append_as_leader(records, self.leader_epoch, origin=origin)
        table.leader_leo[row] = log.log_end_offset
        return AppendResult(info, self.maybe_increment_leader_hw())

    # ---- follower append ---------------------------------------------------------------------
    def append_records_to_follower(self, records: bytes | memoryview) -> Any:
        """Partition.appendRecordsToFollowerOrFutureReplica (§2.5).

        If the local log is empty (LEO == log start) and the leader's first batch straddles the
        LEO (its log start offset fell inside a batch), restart the log at the batch's first
        offset and append again.
        """
        log = self.log
        if log is None:
            raise NotLeaderOrFollowerError(f"Log for partition {self.tp} is not available")
        try:
            return log.append_as_follower(records)
        except UnexpectedAppendOffsetError as e:
            leo = int(log.log_end_offset)
            if leo == int(log.log_start_offset) and e.first_offset < leo <= e.last_offset:
                log.truncate_fully_and_start_at(e.first_offset)
                return log.append_as_follower(records)
            raise

    def update_follower_high_watermark(self, leader_hw: int) -> int:
        """A follower adopts the leader's HW, clamped to [log start, LEO]; the new HW.

        Kafka's ``log.updateHighWatermark`` in processPartitionData: it may move backwards. It
        completes nothing here: the fetcher collects the partitions whose HW moved
        (``partitionsWithNewHighWatermark``) and wakes the fetches parked on them once its
        round is done (ReplicaFetcherThread.doWork → completeDelayedFetchRequests).
        """
        log = self.log
        if log is None:
            raise NotLeaderOrFollowerError(f"Log for partition {self.tp} is not available")
        return log.update_high_watermark(leader_hw if leader_hw.__class__ is int
                                         else int(leader_hw))

    def truncate_to(self, offset: int) -> None:
        """Follower truncation (keep offsets < ``offset``)."""
        if self.log is None:
            raise NotLeaderOrFollowerError(f"Log for partition {self.tp} is not available")
        self.log.truncate_to(int(offset))

    def truncate_fully_and_start_at(self, offset: int) -> None:
        if self.log is None:
            raise NotLeaderOrFollowerError(f"Log for partition {self.tp} is not available")
        self.log.truncate_fully_and_start_at(int(offset))

    # ---- reads -------------------------------------------------------------------------------
    def follower_slot_or_raise(self, replica_id: int, current_leader_epoch: int) -> int:
        """followerReplicaOrThrow: the follower's slot in the state table.

        A replica outside the assignment gets UNKNOWN_LEADER_EPOCH when the request names an
        epoch (the pair is not yet known here), else NOT_LEADER_OR_FOLLOWER.
        """
        slot = self.slot_of.get(replica_id, -1)
        if slot < 1:
            cls = UnknownLeaderEpochError if current_leader_epoch >= 0 else NotLeaderOrFollowerError
            raise cls(f"Replica {replica_id} is not recognized as a valid replica of {self.tp} "
                      f"in leader epoch {self.leader_epoch}")
        return slot

    def follower_slot(self, replica_id: int) -> int:
        """The slot of follower ``replica_id`` in this leader's state-table row; −1 when it is
        not a follower here (the table's own ``slot`` answer for a follower, without its
        row scan)."""
        return self.slot_of.get(replica_id, -1)

    def read_records(self, log: Any, fetch_offset: int, current_leader_epoch: int,
                     last_fetched_epoch: int, max_bytes: int, isolation: str,
                     min_one_message: bool, *, epoch_checked: bool = False) -> LogReadInfo:
        """Partition.readRecords (§3.5).

        Offsets are captured before the read. With a last fetched epoch: an epoch lookup error
        is raised, an undefined answer is OFFSET_OUT_OF_RANGE, a fetch offset below the log start
        is OFFSET_OUT_OF_RANGE even when diverging (KAFKA-12996), and a diverging epoch returns
        no records, only ``diverging_epoch``. ``epoch_checked``: the caller has just passed
        ``current_leader_epoch`` through the fencing check, so the epoch lookup skips it.
        """
        hw = log.high_watermark
        log_start = log.log_start_offset
        leo = log.log_end_offset
        last_stable = hw  # no transactions: the last stable offset is the HW
        if last_fetched_epoch >= 0:
            if epoch_checked:
                found = log.end_offset_for_epoch(last_fetched_epoch)
                end = (EpochEndOffset(Errors.NONE, NO_EPOCH, UNDEFINED_EPOCH_OFFSET)
                       if found is None else EpochEndOffset(Errors.NONE, found[0], found[1]))
            else:
                end = self.last_offset_for_leader_epoch(current_leader_epoch, last_fetched_epoch,
                                                        fetch_only_from_leader=False)
            if end.error_code != Errors.NONE:
                raise for_code(end.error_code)
            if end.end_offset == UNDEFINED_EPOCH_OFFSET or end.leader_epoch == NO_EPOCH:
                raise OffsetOutOfRangeError(
                    f"Could not determine the end offset of the last fetched epoch "
                    f"{last_fetched_epoch} for {self.tp}")
            if fetch_offset < log_start:
                raise OffsetOutOfRangeError(
                    f"Received request for offset {fetch_offset} for partition {self.tp}, but we "
                    f"only have log segments in the range {log_start} to {leo}.")
            if end.leader_epoch < last_fetched_epoch or end.end_offset < fetch_offset:
                return LogReadInfo(None, EpochEndOffset(Errors.NONE, end.leader_epoch,
                                                        end.end_offset),
                                   hw, log_start, leo, last_stable)
        fetched = log.read(fetch_offset, max_bytes, isolation=_storage_isolation(isolation),
                           min_one_message=min_one_message)
        return LogReadInfo(fetched, None, hw, log_start, leo, last_stable)

    def fetch_offset_snapshot(self, current_leader_epoch: int, fetch_only_leader: bool
                              ) -> OffsetSnapshot:
        """fetchOffsetSnapshot: LEO, HW (and last stable offset) metadata for DelayedFetch."""
        log = self.local_log_with_epoch_or_raise(current_leader_epoch, fetch_only_leader)
        leo = log.log_end_offset_metadata
        hw = log.fetch_high_watermark_metadata()
        return OffsetSnapshot(leo, hw, hw)

    # ---- follower fetch state (§6.2) ---------------------------------------------------------
    def update_follower_fetch_state(self, slot: int, fetch_offset: int, follower_log_start: int,
                                    fetch_time_ms: int, leader_end_offset: int,
                                    broker_epoch: int = -1) -> bool:
        """Partition.updateFollowerFetchState through the state table's kernel (§6.2).

        Then: maybe expand the ISR; if the follower's LEO changed, maybe advance the HW; if the
        HW moved, complete delayed produce/fetch. Never called for a diverging read
        (KAFKA-13141). True iff the HW moved.
        """
        table = self.table
        # one kernel call for the replica state, the expansion check and (unless the follower
        # may join the ISR, which is proposed first) the HW
        flags = table.kernels.follower_fetch_hw(self.row, slot, fetch_offset, follower_log_start,
                                                fetch_time_ms, leader_end_offset, broker_epoch,
                                                table.replica_lag_time_max_ms)
        if not flags & _ACT:  # no expansion to propose, the HW did not move: nothing else to do
            return False
        return self._after_fetch(slot, flags, fetch_time_ms)

    def after_follower_fetch(self, slot: int, leo_changed: bool, now_ms: int) -> bool:
        """The part of updateFollowerFetchState after the replica state update: one kernel call
        for the expansion check and (unless the follower may join the ISR) the HW."""
        if self.row < 0:
            return False
        table = self.table
        flags = table.kernels.expand_or_hw(self.row, slot, leo_changed, now_ms,
                                           table.replica_lag_time_max_ms)
        if not flags & _ACT:
            return False
        return self._after_fetch(slot, flags, now_ms)

    def _after_fetch(self, slot: int, flags: int, now_ms: int) -> bool:
        """Act on the kernel's flags: a follower that may join the ISR is proposed first
        (maybeExpandIsr) and the HW computed after it (the pending expansion counts in the
        maximal ISR); a moved HW goes to the log and completes delayed produce/fetch."""
        if flags & FETCH_EXPAND:
            self.maybe_expand_isr(slot)
            if not (flags & FETCH_LEO_CHANGED and self.maybe_increment_leader_hw(now_ms)):
                return False
        elif flags & FETCH_HW_MOVED:
            _push_high_watermark(self.log, int(self.table.hw[self.row]))
        else:
            return False
        self.delayed.on_leader_hw_incremented(self.tp)
        return True

    # ---- HW (§6.4) ---------------------------------------------------------------------------
    def maybe_increment_leader_hw(self, now_ms: int | None = None) -> bool:
        """maybeIncrementLeaderHW through the table's kernel; True iff the HW moved.

        The kernel refuses while the ISR is under min ISR (KAFKA-15583), takes the min LEO over
        the maximal ISR and the caught-up eligible non-ISR followers, and never goes back.
        """
        if self.row < 0:
            return False
        table = self.table
        if now_ms is None:
            now_ms = self.clock.milliseconds()
        if not table.kernels.maybe_increment_hw(self.row, now_ms, table.replica_lag_time_max_ms):
            return False
        _push_high_watermark(self.log, int(table.hw[self.row]))
        return True

    # ---- ISR expansion / shrink (§6.5-§6.6) --------------------------------------------------
    def maybe_expand_isr(self, slot: int) -> AlterPartitionItem | None:
        """maybeExpandIsr: propose adding the follower in ``slot`` (PendingExpandIsr).

        Needs no AlterPartition in flight, the follower eligible and outside the ISR, and its
        LEO ≥ HW and ≥ the leader epoch's start offset (KAFKA-7128) — the kernel's check.
        """
        table = self.table
        if self.row < 0 or not table.kernels.can_expand_isr(self.row, slot):
            return None
        new_id = int(table.replica_id[self.row, slot])
        new_isr = self._ordered(set(self.isr) | {new_id})
        table.prepare_isr_expand(self.row, slot)
        return self._submit(new_isr, shrunk=())

    def maybe_shrink_isr(self, now_ms: int | None = None,
                         slots: Sequence[int] | None = None) -> AlterPartitionItem | None:
        """maybeShrinkIsr: propose removing out-of-sync ISR followers (PendingShrinkIsr).

        ``slots`` may carry the out-of-sync slots already computed by the all-partitions kernel;
        the maximal ISR stays the old ISR until the controller accepts.
        """
        if self.row < 0 or not self.is_leader:
            return None
        table = self.table
        if slots is None:
            if now_ms is None:
                now_ms = self.clock.milliseconds()
            slots = table.out_of_sync_slots(self.row, now_ms)
        if not slots or table.isr_state.item(self.row) != IsrState.COMMITTED:
            return None
        out = {int(table.replica_id[self.row, r]) for r in slots}
        new_isr = self._ordered(set(self.isr) - out)
        table.prepare_isr_shrink(self.row, [int(r) for r in slots])
        return self._submit(new_isr, shrunk=tuple(sorted(out)))

    def _ordered(self, ids: set[int]) -> tuple[int, ...]:
        return tuple(b for b in self.replicas if b in ids)

    def _submit(self, new_isr: tuple[int, ...], shrunk: tuple[int, ...]) -> AlterPartitionItem:
        """Send the proposal: AlterPartition v3 carries each member's broker epoch (KIP-903,
        the follower's from its last fetch); without ``isr_broker_epochs`` every epoch is −1
        (versions before 3, which the controller cannot check)."""
        table = self.table
        epochs = []
        with_epochs = self.config.isr_broker_epochs
        for b in new_isr:
            if not with_epochs:
                epochs.append(-1)
            elif b == self.broker_id:
                epochs.append(int(self._broker_epoch()))
            else:
                r = self.slot_of.get(b, -1)
                e = int(table.broker_epoch[self.row, r]) if r > 0 else NO_BROKER_EPOCH
                epochs.append(-1 if e == NO_BROKER_EPOCH else e)
        item = AlterPartitionItem(self.tp, self.leader_epoch, new_isr, self.partition_epoch,
                                  self.leader_recovery_state, tuple(epochs))
        self._pending = item
        self._pending_shrunk = shrunk
        self.alter_partition.submit(item)
        return item

    def handle_alter_partition_result(self, result: AlterPartitionResult) -> bool:
        """The controller's answer to our in-flight AlterPartition (§6.7); True iff HW moved.

        Ignored unless an AlterPartition is in flight. Success with our leader epoch and a
        partition epoch not older than ours commits the returned ISR; errors either revert to
        the last committed ISR (OPERATION_NOT_ATTEMPTED, INELIGIBLE_REPLICA), stay pending until
        new metadata (UNKNOWN_TOPIC_OR_PARTITION, FENCED_LEADER_EPOCH, ...), or retry.
        """
        item = self._pending
        if item is None or self.row < 0 or not self.is_leader:
            return False
        table = self.table
        error = Errors(result.error_code)
        if error == Errors.NONE:
            if result.leader_epoch != self.leader_epoch or result.partition_epoch < self.partition_epoch:
                self.isr_listener.mark_failed()
                return False
            expanded = table.isr_state.item(self.row) == IsrState.PENDING_EXPAND
            table.commit_isr(self.row, [b for b in result.isr if b in self.replicas])
            self.partition_epoch = result.partition_epoch
            self.leader_recovery_state = result.leader_recovery_state
            self._pending = None
            self._pending_shrunk = ()
            self.isr_listener.mark_isr_change(self.tp, expanded=expanded)
            if self.maybe_increment_leader_hw():
                self.delayed.on_leader_hw_incremented(self.tp)
                return True
            return False
        self.isr_listener.mark_failed()
        if error in _REVERT:
            table.revert_isr(self.row)
            self._pending = None
            self._pending_shrunk = ()
        elif error not in _STAY_PENDING:
            self.alter_partition.submit(item, retry=True)
        return False

    # ---- produce completion (§6.8) -----------------------------------------------------------
    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, Errors]:
        """checkEnoughReplicasReachOffset: (done, error) for a DelayedProduce.

        Done when the HW reached ``required_offset``; then NONE if the MAXIMAL ISR still meets
        the effective min ISR, else NOT_ENOUGH_REPLICAS_AFTER_APPEND. Not leader →
        NOT_LEADER_OR_FOLLOWER.
        """
        if self.leader_id != self.broker_id or self.row < 0:
            return False, Errors.NOT_LEADER_OR_FOLLOWER
        # the maximal ISR's size once the HW reached the offset, else -1
        size = self.table.kernels.reached_isr_size(self.row, required_offset)
        if size < 0:
            return False, Errors.NONE
        if self.effective_min_isr() <= size:
            return True, Errors.NONE
        return True, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND

    # ---- OffsetsForLeaderEpoch (§4.3) --------------------------------------------------------
    def last_offset_for_leader_epoch(self, current_leader_epoch: int, leader_epoch: int,
                                     fetch_only_from_leader: bool) -> EpochEndOffset:
        """Partition.lastOffsetForLeaderEpoch with KIP-320 fencing on ``current_leader_epoch``."""
        log = self.local_log_or_error(current_leader_epoch, fetch_only_from_leader)
        if isinstance(log, Errors):
            return EpochEndOffset(log, NO_EPOCH, UNDEFINED_EPOCH_OFFSET)
        found = log.end_offset_for_epoch(leader_epoch)
        if found is None:
            return EpochEndOffset(Errors.NONE, NO_EPOCH, UNDEFINED_EPOCH_OFFSET)
        return EpochEndOffset(Errors.NONE, int(found[0]), int(found[1]))


LeaderOutcome = tuple[bool, bool] | KafkaStorageError
"""One partition's :func:`make_leaders` answer: (became leader now, HW moved), or the storage
error that stopped it."""


def make_leaders(items: Sequence[tuple[Partition, LeaderAndIsrPartitionState]]
                 ) -> list[LeaderOutcome]:
    """Partition.makeLeader (§6.1) for the partitions of one LeaderAndIsr, all on one broker;
    one answer per item, in order.

    Each partition's effects are Kafka's, in Kafka's order for that partition: skipped with
    (False, False) when the state's partition epoch is older than the partition's; else the
    assignment and the log, then the replica state (:meth:`ReplicaStateTable.lead_partitions`,
    one call for every partition: followers reset on a new leader epoch, the ISR committed, the
    HW kept as the log has it), then on a new leader epoch (epoch, LEO) into the epoch cache
    and its checkpoint (KAFKA-7415), then the leadership and maybeIncrementLeaderHW. The
    partitions share nothing, so doing each step for all of them before the next step leaves
    every partition and file as one partition at a time would. A ``KafkaStorageError`` (the
    log cannot be created, the epoch checkpoint cannot be written) stops that partition where
    the one-partition path would stop, and is its answer. A partition named twice is made
    leader twice, the second time after the first is complete.
    """
    outcomes: list[LeaderOutcome] = []
    start = 0
    while start < len(items):  # runs of distinct partitions
        seen: set[int] = set()
        end = start
        while end < len(items) and id(items[end][0]) not in seen:
            seen.add(id(items[end][0]))
            end += 1
        outcomes.extend(_make_leaders_once(items[start:end]))
        start = end
    return outcomes


def _make_leaders_once(items: Sequence[tuple[Partition, LeaderAndIsrPartitionState]]
                       ) -> list[LeaderOutcome]:
    """:func:`make_leaders` for distinct partitions."""
    outcomes: list[LeaderOutcome] = [(False, False)] * len(items)
    if not items:
        return outcomes
    first = items[0][0]
    table = first.table
    now = first.clock.milliseconds()
    ready: list[tuple[int, Partition, LeaderAndIsrPartitionState, Any, int, bool, bool]] = []
    rows: list[int] = []
    replicas: list[tuple[int, ...]] = []
    isrs: list[Sequence[int]] = []
    epochs: list[int] = []
    leos: list[int] = []
    hws: list[int] = []
    min_isrs: list[int] = []
    log_starts: list[int] = []
    new_epochs: list[bool] = []
    new_leaders: list[bool] = []
    for i, (partition, state) in enumerate(items):
        if partition.table is not table:
            raise ValueError(f"{partition.tp} is not on the broker of {first.tp}")
        if state.partition_epoch < partition.partition_epoch:
            continue
        is_new_leader = not partition.is_leader
        is_new_leader_epoch = state.leader_epoch > partition.leader_epoch
        try:
            log = partition._prepare_leader(state)
        except KafkaStorageError as e:
            outcomes[i] = e
            continue
        leo = int(log.log_end_offset)
        ready.append((i, partition, state, log, leo, is_new_leader, is_new_leader_epoch))
        rows.append(partition.row)
        replicas.append(partition.replicas)
        isrs.append(state.isr)
        epochs.append(state.leader_epoch)
        leos.append(leo)
        hws.append(min(max(int(log.high_watermark), 0), leo))
        min_isrs.append(partition.min_insync_replicas)
        log_starts.append(int(log.log_start_offset))
        new_epochs.append(is_new_leader_epoch)
        new_leaders.append(is_new_leader)
    if not ready:
        return outcomes
    # ISR eligibility is a broker's (alive, not fenced, not shutting down: KIP-841)
    brokers = {b for reps in replicas for b in reps}
    ineligible = brokers.difference(first.metadata.eligible_replicas(sorted(brokers)))
    # Followers start unknown; ISR members count as caught up from now (§6.1 step 5).
    rows = table.lead_partitions(rows, replicas, isrs, leader_epochs=epochs, leader_leos=leos,
                                 hws=hws, min_isrs=min_isrs, log_starts=log_starts,
                                 new_epochs=new_epochs, new_leaders=new_leaders, now_ms=now,
                                 ineligible=ineligible)
    for (i, partition, state, log, leo, is_new_leader, is_new_leader_epoch), row in zip(
            ready, rows, strict=True):
        if partition.row < 0:
            partition.row = row
            partition.rows.register_row(partition)
        try:
            outcomes[i] = (is_new_leader,
                           partition._finish_leader(state, log, leo, is_new_leader_epoch, now))
        except KafkaStorageError as e:
            outcomes[i] = e
    return outcomes


# ---- storage seam: every call into the Log goes through these --------------------------------
def _storage_isolation(isolation: str) -> str:
    return ISOLATION_HIGH_WATERMARK if isolation == ISOLATION_TXN_COMMITTED else isolation


def latest_epoch(log: PartitionLog) -> int | None:
    """The log's latest cached leader epoch (None if the cache is empty)."""
    value = log.latest_epoch
    return None if value < 0 else int(value)


def _push_high_watermark(log: PartitionLog, hw: int) -> None:
    """Hand the leader's new HW to the log (UnifiedLog.maybeIncrementHighWatermark).

    At the leader's LEO the LEO's metadata goes with it (segment and position, which
    DelayedFetch byte accounting needs); otherwise the log resolves the position lazily.
    """
    leo_meta = log.log_end_offset_metadata
    if hw == leo_meta.message_offset:
        log.maybe_increment_high_watermark(leo_meta)
    else:
        log.maybe_increment_high_watermark(type(leo_meta)(hw))  # storage's LogOffsetMetadata


__all__ = [
    "ISOLATION_HIGH_WATERMARK",
    "ISOLATION_LOG_END",
    "ISOLATION_TXN_COMMITTED",
    "AppendResult",
    "LogReadInfo",
    "LeaderOutcome",
    "OffsetSnapshot",
    "Partition",
    "latest_epoch",
    "make_leaders",
]
