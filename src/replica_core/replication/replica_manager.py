"""A broker's replica manager: LeaderAndIsr, produce, fetch, epochs, scheduled ISR work (§3, §6, §8.5).

Kafka's ``ReplicaManager.scala`` as a single-threaded step machine on an injected clock: every
public call runs to completion; time-driven work (ISR shrink every ``replica.lag.time.max.ms / 2``,
ISR change propagation, purgatory expiry, the HW checkpoint) runs from :meth:`ReplicaManager.tick`.

Conventions (docs/contracts.md, "Replication"):

* ``append_records`` and ``fetch_messages`` return their response when it is ready at once and
  ``None`` when the request was parked in a purgatory; a parked request's response goes to
  ``callback`` when it completes (a request answered at once does not call ``callback``).
* ISR changes leave as :class:`AlterPartitionRequest` values through ``alter_partition`` (one
  request per public call, carrying every item proposed during it — Kafka's
  AlterPartitionManager batches the same way); answers come back through
  :meth:`ReplicaManager.handle_alter_partition_response`. Without a transport the requests wait
  in :meth:`ReplicaManager.drain_alter_partition_requests`. Items to retry go out at the next
  :meth:`tick`.
* Committed ISR changes are also propagated to ``isr_change_listener`` in batches as ZooKeeper-era
  Kafka did (``maybePropagateIsrChanges``, checked every 2.5 s): when the last change is more
  than 5 s old or the last propagation more than 60 s old.
"""
from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

import numpy as np

from replica_core.clock import Clock
from replica_core.errors import (
    Errors,
    KafkaError,
    KafkaStorageError,
    RecordValidationError,
)
from replica_core.records.produce_request import produce_records_error
from replica_core.replication.config import TRUNCATION_HIGH_WATERMARK, ReplicaConfig
from replica_core.replication.delayed import (
    DelayedFetch,
    DelayedProduce,
    DelayedSessionFetch,
    FetchPartitionStatus,
    ProducePartitionStatus,
)
from replica_core.replication.fetch_metadata import INITIAL_EPOCH
from replica_core.replication.fetch_session import (
    FetchManager,
    FetchSession,
    partition_responses,
)
from replica_core.replication.fetch_session_cache import FetchSessionCache
from replica_core.replication.messages import (
    EARLIEST_TIMESTAMP,
    ISOLATION_READ_COMMITTED,
    LATEST_TIMESTAMP,
    NO_EPOCH,
    UNKNOWN_BROKER_EPOCH,
    AlterPartitionItem,
    AlterPartitionRequest,
    AlterPartitionResult,
    EpochEndOffset,
    FetchPartition,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    InitialFetchState,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    ListOffsetsPartition,
    ListOffsetsResult,
    OffsetsForLeaderEpochRequest,
    ProducePartitionResponse,
    TopicPartition,
)
from replica_core.replication.metadata_cache import MetadataCache
from replica_core.replication.partition import (
    ISOLATION_HIGH_WATERMARK,
    ISOLATION_LOG_END,
    ISOLATION_TXN_COMMITTED,
    Partition,
    latest_epoch,
    make_leaders,
)
from replica_core.replication.partition_context import PartitionContext
from replica_core.replication.purgatory import Purgatory
from replica_core.replication.state import ReplicaStateTable

ACKS_ALL = -1
ISR_CHANGE_PROPAGATION_BLACKOUT_MS = 5_000
"""ReplicaManager.IsrChangePropagationBlackOut: propagate once the last change is this old."""
ISR_CHANGE_PROPAGATION_INTERVAL_MS = 60_000
"""ReplicaManager.IsrChangePropagationInterval: propagate at least this often while changes wait."""
ISR_CHANGE_PROPAGATION_CHECK_MS = 2_500
"""Period of Kafka's "isr-change-propagation" task."""

_NO_ERROR = Errors.NONE
"""``Errors.NONE`` bound once for the per-partition fetch paths (an enum member lookup is not
free)."""

# Append errors Kafka answers without the partition's log start offset (appendToLocalLog).
_PLAIN_APPEND_ERRORS = frozenset({
    Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.NOT_LEADER_OR_FOLLOWER, Errors.MESSAGE_TOO_LARGE,
    Errors.RECORD_LIST_TOO_LARGE, Errors.CORRUPT_MESSAGE, Errors.KAFKA_STORAGE_ERROR})


class FetchParams(NamedTuple):
    """Kafka's FetchParams for one request (§3.1, §3.4)."""

    replica_id: int
    replica_epoch: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation: str
    fetch_only_leader: bool = True
    hard_max_bytes_limit: bool = False

    @property
    def is_from_follower(self) -> bool:
        return self.replica_id >= 0


class LogReadResult:
    """One partition's read (Kafka's LogReadResult); ``size`` is the byte length of its
    records, measured once."""

    __slots__ = ("tp", "error", "records", "fetch_offset_metadata", "diverging_epoch",
                 "high_watermark", "log_start_offset", "log_end_offset", "last_stable_offset",
                 "size", "entry")

    def __init__(self, tp: TopicPartition, error: Errors, records: Any = b"",
                 fetch_offset_metadata: Any = None, diverging_epoch: EpochEndOffset | None = None,
                 high_watermark: int = -1, log_start_offset: int = -1, log_end_offset: int = -1,
                 last_stable_offset: int = -1) -> None:
        self.tp = tp
        self.error = error
        self.records = records
        self.fetch_offset_metadata = fetch_offset_metadata
        self.diverging_epoch = diverging_epoch
        self.high_watermark = high_watermark
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset
        self.last_stable_offset = last_stable_offset
        self.size: int = records.nbytes if isinstance(records, memoryview) else len(records)
        self.entry: FetchPartitionResponse | None = None
        """The response entry made from this read (built once, by ``partition_responses``:
        a read shared by several parked fetches gives them the same immutable entry)."""

    at_log_end = False
    """True only for a :class:`LogEndReadResult`."""


class LogEndReadResult(LogReadResult):
    """A follower's read that starts at the LEO on the fast path (fetch offset = LEO, last
    fetched epoch unknown or the log's latest): nothing read, the LEO's position, no
    divergence possible. While the log does not change it counts 0 bytes towards a parked
    fetch and completes none (:class:`~replica_core.replication.delayed.DelayedSessionFetch`
    skips its count at park)."""

    __slots__ = ()
    at_log_end = True

    def __init__(self, tp: TopicPartition, log_end_metadata: Any, high_watermark: int,
                 log_start_offset: int, log_end_offset: int) -> None:
        """No error, no records (0 bytes), no divergence; the last stable offset is the HW."""
        self.tp = tp
        self.error = _NO_ERROR
        self.records = b""
        self.fetch_offset_metadata = log_end_metadata
        self.diverging_epoch = None
        self.high_watermark = high_watermark
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset
        self.last_stable_offset = high_watermark
        self.size = 0
        self.entry = None


class FetcherManagerLike(Protocol):
    """What the replica manager needs from its fetcher manager (AbstractFetcherManager)."""

    def add_fetcher_for_partitions(self, states: Mapping[TopicPartition, InitialFetchState]
                                   ) -> None: ...
    def remove_fetcher_for_partitions(self, tps: Iterable[TopicPartition]) -> None: ...
    def shutdown_idle_fetcher_threads(self) -> None: ...
    def shutdown(self) -> None: ...


class _PartitionHooks:
    """The replica manager as its partitions' narrow collaborators (``PartitionContext``):
    ISR change listener, delayed operations, AlterPartition sender, log factory, row registry."""

    __slots__ = ("_rm", "on_leader_hw_incremented", "forget_unsent", "get_or_create_log")

    def __init__(self, rm: ReplicaManager) -> None:
        self._rm = rm
        # the manager's own hooks, bound once: a leader's HW advance completes delayed
        # produce/fetch, and every LeaderAndIsr partition drops its unsent AlterPartition and
        # finds its log, without a forwarding frame
        self.on_leader_hw_incremented: Callable[[TopicPartition], None] = \
            rm._on_leader_hw_incremented
        self.forget_unsent: Callable[[TopicPartition], None] = \
            rm._forget_unsent_alter_partition
        self.get_or_create_log: Callable[..., Any] = rm._get_or_create_log

    def mark_isr_change(self, tp: TopicPartition, *, expanded: bool) -> None:
        self._rm._record_isr_change(tp, expanded=expanded)

    def mark_failed(self) -> None:
        self._rm._mark_failed_isr_update()

    def on_leader_log_start_moved(self, tp: TopicPartition) -> None:
        self._rm._on_leader_log_start_moved(tp)

    def submit(self, item: AlterPartitionItem, *, retry: bool = False) -> None:
        self._rm._submit_alter_partition(item, retry=retry)

    def register_row(self, partition: Partition) -> None:
        self._rm._by_row[partition.row] = partition

    def unregister_row(self, partition: Partition) -> None:
        self._rm._by_row.pop(partition.row, None)


class ReplicaManager:
    """Kafka's ReplicaManager for broker ``broker_id`` over ``log_manager``'s logs."""

    __slots__ = ("broker_id", "log_manager", "config", "clock", "alter_partition", "broker_epoch",
                 "fence_stale_controller_requests", "fetcher_manager", "isr_change_listener",
                 "controller_epoch", "metadata_cache", "table", "_partition_context",
                 "produce_purgatory", "fetch_purgatory", "fetch_manager", "_parked_sessions",
                 "_fetch_params", "_checkpoint_starts", "_shared_reads", "_log_end_reads",
                 "_leadership_gen",
                 "_log_start_gen", "_reported_changes", "_sessions", "_fetch_state_writers",
                 "_partitions", "partition",
                 "get_partition", "_logs", "local_log", "_by_row", "_unsent",
                 "_retry",
                 "_drained", "_ineligible", "broker_epochs", "_isr_change_set",
                 "_last_isr_change_ms", "_last_isr_propagation_ms", "_next_isr_shrink_ms",
                 "_next_isr_propagation_ms", "_next_hw_checkpoint_ms", "last_initial_fetch_states",
                 "_counters", "_shut_down", "connections", "__weakref__")

    def __init__(self, broker_id: int, log_manager: Any,
                 config: ReplicaConfig | Mapping[str, Any] | None = None, *, clock: Clock,
                 alter_partition: Callable[[AlterPartitionRequest], None] | None = None,
                 broker_epoch: int = 0, fetcher_manager: FetcherManagerLike | None = None,
                 isr_change_listener: Callable[[list[TopicPartition]], None] | None = None,
                 pure_kernels: bool | None = None,
                 session_id_rng: np.random.Generator | None = None,
                 metadata_cache: MetadataCache | None = None,
                 fence_stale_controller_requests: bool = True) -> None:
        if config is None:
            config = ReplicaConfig()
        elif not isinstance(config, ReplicaConfig):
            config = ReplicaConfig.from_properties(config)
        self.broker_id = int(broker_id)
        self.log_manager = log_manager
        self.config = config
        self.clock = clock
        self.alter_partition = alter_partition
        self.broker_epoch = int(broker_epoch)
        """This process's registered broker epoch; UNKNOWN_BROKER_EPOCH until it registers."""
        self.fence_stale_controller_requests = bool(fence_stale_controller_requests)
        """KIP-380 (Kafka ≥ 2.2): controller requests wait for registration and stale ones are
        refused; False models the older brokers that served whatever arrived."""
        self.fetcher_manager = fetcher_manager
        self.isr_change_listener = isr_change_listener
        self.controller_epoch = 0  # KafkaController.InitialControllerEpoch
        self.metadata_cache = metadata_cache if metadata_cache is not None else MetadataCache()
        self.table = ReplicaStateTable(broker_id, replica_lag_time_max_ms=config.replica_lag_time_max_ms,
                                       pure=pure_kernels)
        hooks = _PartitionHooks(self)
        self._partition_context = PartitionContext(
            self.broker_id, lambda: self.broker_epoch, clock, config, self.table,
            isr_listener=hooks, delayed=hooks, alter_partition=hooks, logs=hooks, rows=hooks,
            metadata=self)
        self.produce_purgatory: Purgatory[DelayedProduce] = Purgatory(
            "Produce", clock, purge_interval=config.producer_purgatory_purge_interval_requests)
        self.fetch_purgatory: Purgatory[DelayedFetch] = Purgatory(
            "Fetch", clock, purge_interval=config.fetch_purgatory_purge_interval_requests)
        self.fetch_manager = FetchManager(FetchSessionCache(
            config.max_incremental_fetch_session_cache_slots, rng=session_id_rng))
        self._sessions = self.fetch_manager.cache.sessions
        """The fetch session cache's sessions (a live view)."""
        self._fetch_state_writers: dict[int, FetchSession | None] = {}
        """Per follower: the session whose fetch last read (and so updated the follower's fetch
        states), None for a fetch outside a session (see :meth:`_session_reads`)."""
        self._parked_sessions: dict[int, DelayedSessionFetch] = {}
        self._fetch_params: dict[tuple[Any, ...], FetchParams] = {}
        """The params made for each set of request values (see :meth:`fetch_params`)."""
        self._shared_reads: dict[tuple[Any, ...], tuple[Any, Any, LogReadResult]] | None = None
        """While one change completes the parked session fetches watching a partition: the
        purgatory reads made so far (with the log end position and log they were made at), for
        the next fetch of the same read (see :meth:`_try_complete_delayed_fetch`); None
        otherwise."""
        self._log_end_reads: dict[TopicPartition, LogEndReadResult] = {}
        """Each partition's last read at its log end (:class:`LogEndReadResult`): a read at the
        same log end position object, HW, log start and LEO is that read again (its content
        is those values only), whoever fetches; it and its response entry are shared."""
        self._leadership_gen = 0
        self._log_start_gen = 0
        """Bumped when a leader's log start moves (retention, DeleteRecords): news for the
        fetch sessions that no per-partition report carries."""
        self._reported_changes = 0
        """Bumped by every per-partition change report (:meth:`_try_complete_delayed_fetch`
        and its follower form): with the two generations above it stamps the state a read
        depends on (see :meth:`_read_stamp`)."""
        self._partitions: dict[TopicPartition, Partition] = {}
        self.partition: Callable[[TopicPartition | tuple[str, int]], Partition | None] = \
            self._partitions.get  # type: ignore[assignment]
        """The hosted partition (leader_id, leader_epoch, isr, maximal_isr, high_watermark,
        log_end_offset, log, is_leader) of ``tp``, or None: the partition map's own lookup, read
        by the fetcher and the simulator per message without a Python frame (a TopicPartition
        hashes and compares as the plain ``(topic, partition)`` tuple, so either finds it)."""
        self.get_partition = self.partition
        self._logs: dict[TopicPartition, Any] = {}
        """Each hosted partition's log once it has one (``Partition.log``, set once per
        partition by its ``_ensure_log`` through :meth:`_get_or_create_log`): kept there and
        by :meth:`stop_replica`, where a partition stops being hosted."""
        self.local_log: Callable[[TopicPartition | tuple[str, int]], Any] = \
            self._logs.get  # type: ignore[assignment]
        """The log of hosted partition ``tp`` (``partition(tp).log``), or None: one lookup
        without a Python frame."""
        self._by_row: dict[int, Partition] = {}
        self._unsent: dict[TopicPartition, AlterPartitionItem] = {}
        self._retry: dict[TopicPartition, AlterPartitionItem] = {}
        self._drained: list[AlterPartitionRequest] = []
        self._ineligible: set[int] = set()
        self.broker_epochs: dict[int, int] = {}  # registered broker epochs (KIP-903), if known
        now = clock.milliseconds()
        self._isr_change_set: set[TopicPartition] = set()
        self._last_isr_change_ms = now
        self._last_isr_propagation_ms = now
        self._next_isr_shrink_ms = now  # Kafka schedules "isr-expiration" with delay 0
        self._next_isr_propagation_ms = now
        self._next_hw_checkpoint_ms: int | None = None  # starts with the first LeaderAndIsr
        self._checkpoint_starts = 0  # times it started (see tick_due_version)
        self.last_initial_fetch_states: dict[TopicPartition, InitialFetchState] = {}
        self._counters = {"IsrExpandsPerSec": 0, "IsrShrinksPerSec": 0,
                          "FailedIsrUpdatesPerSec": 0, "IsrChangePropagations": 0,
                          "ProduceExpiresPerSec": 0, "FetchExpiresPerSec.follower": 0,
                          "FetchExpiresPerSec.consumer": 0,
                          "FetchRequestsPerSec.follower": 0, "FetchRequestsPerSec.consumer": 0,
                          "IncrementalFetches": 0, "FullFetches": 0, "SessionlessFetches": 0,
                          "FetchSessionErrors": 0, "StaleReplicaEpochFetches": 0,
                          "DelayedFetchCompletions.follower": 0,
                          "DelayedFetchCompletions.consumer": 0}
        self._shut_down = False
        self.connections: weakref.WeakSet[Any] = weakref.WeakSet()
        """In-process connections holding parked requests here (``InProcessLeaderEndPoint``);
        a shutdown closes them, failing those requests, as closing the socket server does."""

    # ---- lookups (``partition``, ``get_partition`` and ``local_log`` are attributes) ----------
    def partitions(self) -> dict[TopicPartition, Partition]:
        return dict(self._partitions)

    def leader_state(self, tp: TopicPartition | tuple[str, int]) -> tuple[int, int, int] | None:
        """(leader epoch, HW, LEO) of ``tp`` when it is led here with a local log, else None:
        what a check of a leader's HW against its LEO reads, in one lookup."""
        p = self._partitions.get(tp)  # type: ignore[arg-type]
        if p is None or not p.is_leader:
            return None
        log = p.log
        if log is None:
            return None
        return p.leader_epoch, p.high_watermark, log.log_end_offset

    def leader_partitions(self) -> list[Partition]:
        return [p for p in self._partitions.values() if p.is_leader]

    # ---- controller requests: the broker epoch (KIP-380) --------------------------------------
    def controller_request_error(self, broker_epoch: int) -> Errors:
        """May this process serve a controller request (LeaderAndIsr, StopReplica,
        UpdateMetadata) addressed to broker epoch ``broker_epoch``? (§8.8)

        As Kafka since KIP-380: a broker serves no controller request before it has
        registered (BROKER_NOT_AVAILABLE: the request could not reach it yet, the controller
        tries again), and a request stamped with an epoch older than this process's is meant
        for a previous process of the broker — a fast restart — and is refused whole with
        STALE_BROKER_EPOCH (``KafkaApis.isBrokerEpochStale``; an epoch newer than ours can
        come before our registration answer and is served). UNKNOWN_BROKER_EPOCH (older
        request versions) is never stale. Errors.NONE when the request may be served; always
        NONE with ``fence_stale_controller_requests`` off (brokers before Kafka 2.2)."""
        if not self.fence_stale_controller_requests:
            return Errors.NONE
        if self.broker_epoch == UNKNOWN_BROKER_EPOCH:
            return Errors.BROKER_NOT_AVAILABLE
        if broker_epoch != UNKNOWN_BROKER_EPOCH and broker_epoch < self.broker_epoch:
            return Errors.STALE_BROKER_EPOCH
        return Errors.NONE

    def update_metadata(self, broker_epoch: int, broker_epochs: Iterable[tuple[int, int]],
                        alive: Iterable[int]) -> Errors:
        """UpdateMetadata (the part replication uses): the registered epoch of every broker
        (against stale fetches, KIP-841/KIP-903) and which are alive (ISR eligibility).
        Refused whole as :meth:`controller_request_error` says."""
        error = self.controller_request_error(broker_epoch)
        if error != Errors.NONE:
            return error
        live = set(alive)
        for b, epoch in broker_epochs:
            self.broker_epochs[b] = epoch
            if b != self.broker_id:
                self.set_broker_eligible(b, b in live)
        return Errors.NONE

    # ---- LeaderAndIsr (§8.5) -----------------------------------------------------------------
    def become_leader_or_follower(self, request: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
        """ReplicaManager.becomeLeaderOrFollower (ZK mode, §8.5).

        A request from an older controller epoch is refused whole (STALE_CONTROLLER_EPOCH for
        every partition). Per partition: a newer leader epoch is applied if this broker is
        assigned (else UNKNOWN_TOPIC_OR_PARTITION); an older or equal one answers
        STALE_CONTROLLER_EPOCH; a topic id that disagrees with the log's answers
        INCONSISTENT_TOPIC_ID. Leaders first stop their fetchers then run makeLeader (§6.1);
        followers run makeFollower, stop fetchers, complete their delayed operations, truncate
        to the HW in ``high_watermark`` mode, and restart fetchers at the initial fetch offset.
        Before all that, a request this process may not serve (not registered yet, or a stale
        broker epoch: :meth:`controller_request_error`) is refused whole, changing nothing.
        """
        error = self.controller_request_error(request.broker_epoch)
        if error != Errors.NONE:
            return LeaderAndIsrResponse(error, {s.tp: error for s in request.partition_states})
        if request.controller_epoch < self.controller_epoch:
            errors = {s.tp: Errors.STALE_CONTROLLER_EPOCH for s in request.partition_states}
            return LeaderAndIsrResponse(Errors.STALE_CONTROLLER_EPOCH, errors)
        self.controller_epoch = request.controller_epoch
        errors: dict[TopicPartition, Errors] = {}
        to_lead: list[tuple[Partition, LeaderAndIsrPartitionState]] = []
        to_follow: list[tuple[Partition, LeaderAndIsrPartitionState]] = []
        self.metadata_cache.update([state.tp for state in request.partition_states])
        partitions = self._partitions
        context = self._partition_context
        me = self.broker_id
        for state in request.partition_states:
            tp = state.tp
            partition = partitions.get(tp)
            if partition is None:
                partition = partitions[tp] = Partition(tp, context)
            if state.topic_id:
                log = partition.log
                log_topic_id = (log.topic_id if log is not None else None) or partition.topic_id
                inconsistent = bool(log_topic_id) and state.topic_id != log_topic_id
            else:
                inconsistent = False
            if inconsistent:
                errors[tp] = Errors.INCONSISTENT_TOPIC_ID
            elif state.leader_epoch > partition.leader_epoch:
                if me not in state.replicas:
                    errors[tp] = Errors.UNKNOWN_TOPIC_OR_PARTITION
                elif state.leader == me:
                    to_lead.append((partition, state))
                else:
                    to_follow.append((partition, state))
            else:
                errors[tp] = Errors.STALE_CONTROLLER_EPOCH
        touched: list[TopicPartition] = []
        if to_lead:
            self._remove_fetchers([p.tp for p, _ in to_lead])
            # makeLeaders: Partition.makeLeader for each, the table's part in one batch
            for (partition, _), outcome in zip(to_lead, make_leaders(to_lead), strict=True):
                errors[partition.tp] = (Errors.KAFKA_STORAGE_ERROR
                                        if isinstance(outcome, KafkaStorageError) else Errors.NONE)
                touched.append(partition.tp)
        if to_follow:
            completed = self._make_followers(to_follow, errors, request.live_leaders)
            # the followers whose delayed operations makeFollowers completed already (nothing
            # since could have added or unblocked any) are not looked at again
            touched.extend(p.tp for p, _ in to_follow if p not in completed)
        # Leadership or epoch changed: parked produce/fetch may now complete (not leader any more,
        # fenced epoch, or an HW that moved in makeLeader).
        if to_lead or to_follow:
            self._leadership_gen += 1
        self._complete_delayed_requests(touched)
        if self._next_hw_checkpoint_ms is None:
            self._next_hw_checkpoint_ms = self.clock.milliseconds()
            self._checkpoint_starts += 1
        if self.fetcher_manager is not None:
            self.fetcher_manager.shutdown_idle_fetcher_threads()
        self._flush_alter_partition()
        return LeaderAndIsrResponse(Errors.NONE, errors)

    def _make_followers(self, items: list[tuple[Partition, LeaderAndIsrPartitionState]],
                        errors: dict[TopicPartition, Errors], live_leaders: Sequence[int]
                        ) -> set[Partition]:
        """makeFollowers; the partitions whose delayed operations it completed."""
        changed: list[Partition] = []
        for partition, state in items:
            errors[partition.tp] = Errors.NONE
            try:
                if state.leader < 0 or (live_leaders and state.leader not in live_leaders):
                    # No leader, or leader not available: only make sure the log exists so its
                    # HW is checkpointed (KAFKA-1647); never start a fetcher towards it.
                    partition._ensure_log(state)
                    continue
                if partition.make_follower(state):
                    changed.append(partition)
            except KafkaStorageError:
                errors[partition.tp] = Errors.KAFKA_STORAGE_ERROR
        self._remove_fetchers([p.tp for p in changed])
        if changed:
            self._leadership_gen += 1
        self._complete_delayed_requests([p.tp for p in changed])
        if self.config.truncation == TRUNCATION_HIGH_WATERMARK:
            # Pre-KIP-101: truncate to the local HW before fetching from the new leader.
            for partition in changed:
                partition.truncate_to(int(partition.log.high_watermark))
        if self._shut_down or not changed:
            return set(changed)
        states = {p.tp: InitialFetchState(p.leader_id, p.leader_epoch,
                                          self.initial_fetch_offset(p.log), p.topic_id)
                  for p in changed}
        self.last_initial_fetch_states.update(states)
        if self.fetcher_manager is not None:
            self.fetcher_manager.add_fetcher_for_partitions(states)
        return set(changed)

    def _complete_delayed_requests(self, tps: Sequence[TopicPartition]) -> None:
        """completeDelayedFetchOrProduceRequests for each of ``tps`` in order: its delayed
        produce, then its delayed fetches. With no delayed operation anywhere nothing can
        complete, and the partitions are not looked at one by one."""
        produce = self.produce_purgatory
        if not (produce.has_watchers or self.fetch_purgatory.has_watchers
                or self._parked_sessions):
            return
        produce_watched = produce.watch_lists
        for tp in tps:
            if tp in produce_watched:
                produce.check_and_complete(tp)
            self._try_complete_delayed_fetch(tp)

    def initial_fetch_offset(self, log: Any) -> int:
        """ReplicaManager.initialFetchOffset: the LEO when truncation on fetch is supported (IBP
        ≥ 2.7, ``truncate_on_fetch``) and the log has leader epochs, else the HW (IBP 2.0–2.6
        and the high watermark truncation mode start Truncating from it)."""
        cfg = self.config
        if (cfg.truncation != TRUNCATION_HIGH_WATERMARK and cfg.truncate_on_fetch
                and latest_epoch(log) is not None):
            return int(log.log_end_offset)
        return int(log.high_watermark)

    def _remove_fetchers(self, tps: list[TopicPartition]) -> None:
        for tp in tps:
            self.last_initial_fetch_states.pop(tp, None)
        if tps and self.fetcher_manager is not None:
            self.fetcher_manager.remove_fetcher_for_partitions(tps)

    def stop_replica(self, tp: TopicPartition, *, delete: bool = False,
                     broker_epoch: int = UNKNOWN_BROKER_EPOCH) -> Errors:
        """StopReplica (``stopPartitions``): stop fetching ``tp``; with ``delete`` also stop
        hosting it (leadership and leader-side state dropped, waiting produce and fetch
        answered) and delete its log. Without ``delete`` the partition stays hosted as it is,
        as in Kafka (a follower of a broker in controlled shutdown keeps its replica). A
        request this process may not serve (:meth:`controller_request_error`) changes nothing
        and answers the error."""
        error = self.controller_request_error(broker_epoch)
        if error != Errors.NONE:
            return error
        tp = TopicPartition(*tp)
        if tp not in self._partitions:
            return Errors.NONE
        self._remove_fetchers([tp])
        if not delete:
            return Errors.NONE
        partition = self._partitions.pop(tp)
        self._logs.pop(tp, None)
        partition.stop()
        self._leadership_gen += 1
        self.produce_purgatory.check_and_complete(tp)
        self._try_complete_delayed_fetch(tp)
        self.log_manager.delete_log(tp.topic, tp.partition)
        return Errors.NONE

    # ---- produce (§6.8) ----------------------------------------------------------------------
    def append_records(self, entries: Mapping[TopicPartition, bytes | memoryview], *, acks: int,
                       timeout_ms: int,
                       callback: Callable[[dict[TopicPartition, ProducePartitionResponse]], None]
                       | None = None,
                       origin: str = "client") -> dict[TopicPartition, ProducePartitionResponse] | None:
        """ReplicaManager.appendRecords (§6.8).

        acks outside {−1, 0, 1} → INVALID_REQUIRED_ACKS everywhere, nothing written. Each
        partition appends as leader (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
        NOT_ENOUGH_REPLICAS for acks=−1 under min ISR, MESSAGE_TOO_LARGE, CORRUPT_MESSAGE,
        INVALID_RECORD, ... per partition). With acks=−1 and at least one successful append a
        DelayedProduce waits up to ``timeout_ms`` for the HW to pass every last offset
        (REQUEST_TIMED_OUT on expiry, data left in the log; NOT_ENOUGH_REPLICAS_AFTER_APPEND if
        the maximal ISR fell below min ISR). acks=0 still returns the values: the transport
        sends nothing (Kafka closes the connection on an error instead).
        """
        for key in entries:
            if type(key) is not TopicPartition:
                entries = {tp if type(tp) is TopicPartition else TopicPartition(*tp): v
                           for tp, v in entries.items()}
                break
        if acks not in (-1, 0, 1):
            return {tp: ProducePartitionResponse(Errors.INVALID_REQUIRED_ACKS) for tp in entries}
        results: dict[TopicPartition, ProducePartitionResponse] = {}
        # acks=-1: each partition's ProducePartitionStatus (the offset its HW must pass), made
        # as the partition is answered
        status: dict[TopicPartition, ProducePartitionStatus] | None = \
            {} if acks == ACKS_ALL else None
        client = origin == "client"
        ok = False  # at least one partition appended
        for tp, records in entries.items():
            # ProduceRequest.validateRecords: not exactly one whole v2 batch never reaches the log
            bad = produce_records_error(records) if client else None
            if bad is not None:
                response = results[tp] = ProducePartitionResponse(bad.code)
                offset = 0
            else:
                response, offset = self._append_to_local_log(tp, records, acks, origin)
                results[tp] = response
                if response.error_code == _NO_ERROR:
                    ok = True
            if status is not None:
                status[tp] = ProducePartitionStatus(offset, response)
        if status is None or not ok:
            return results
        # no callback while first checked: complete at once, the responses are returned here
        op = DelayedProduce(timeout_ms, status, self, None)
        # try_complete changes nothing but the op's own status: no second check after watching
        self.produce_purgatory.try_complete_else_watch(op, entries, recheck=False)
        if op.responses is not None:
            return op.responses
        op.deliver = callback  # parked: its completion answers through the callback
        return None

    def _append_to_local_log(self, tp: TopicPartition, records: Any, acks: int, origin: str
                             ) -> tuple[ProducePartitionResponse, int]:
        partition = self._partitions.get(tp)
        if partition is None:
            return ProducePartitionResponse(self.metadata_cache.error_for_unhosted(tp)), 0
        try:
            appended = partition.append_records_to_leader(records, required_acks=acks,
                                                          origin=origin)
        except RecordValidationError as e:
            return ProducePartitionResponse(
                e.code, log_start_offset=partition.log_start_offset, error_message=str(e),
                record_errors=tuple(e.record_errors)), 0
        except KafkaError as e:
            lso = -1 if e.code in _PLAIN_APPEND_ERRORS else partition.log_start_offset
            return ProducePartitionResponse(e.code, log_start_offset=lso, error_message=str(e)), 0
        except OSError as e:
            return ProducePartitionResponse(Errors.KAFKA_STORAGE_ERROR, error_message=str(e)), 0
        info = appended.info
        if appended.hw_incremented:
            self._on_leader_hw_incremented(tp)
        else:
            self._try_complete_delayed_fetch(tp)  # the LEO grew: followers may be waiting
        first = int(info.first_offset)
        last = int(info.last_offset)
        append_time = int(info.log_append_time)
        return (ProducePartitionResponse(Errors.NONE, first, append_time,
                                         partition.log_start_offset), last + 1)

    # ---- fetch (§3, §6.2, §6.9) --------------------------------------------------------------
    def fetch_messages(self, request: FetchRequest,
                       callback: Callable[[FetchResponse], None] | None = None
                       ) -> FetchResponse | None:
        """KafkaApis.handleFetchRequest + ReplicaManager.fetchMessages (§3.1-§3.6, KIP-227).

        The request's session id and epoch select a fetch context (sessionless, full, or
        incremental in a cached session; a session error is answered at once). Followers read
        up to the LEO, consumers up to the HW; ``max_bytes`` is shared across partitions in
        request (session) order with min-one-message for the first non-empty partition only
        (KIP-74), each partition also capped by its ``partition_max_bytes``. A follower's read
        updates its fetch state on the leader (lastCaughtUp rule, ISR expansion, HW, completing
        delayed produce/fetch) unless the read diverged (KAFKA-13141). Answered at once when
        ``max_wait_ms`` ≤ 0, nothing to fetch, ≥ ``min_bytes`` read, any error or diverging
        epoch; otherwise parked as a DelayedFetch until ``replica.fetch.wait.max.ms`` (the
        request's max wait) or a change that completes it, and delivered to ``callback``.
        """
        params = self.fetch_params(request)
        now = self.clock.milliseconds()
        follower = params.replica_id >= 0
        counters = self._counters
        counters["FetchRequestsPerSec.follower" if follower else "FetchRequestsPerSec.consumer"] += 1
        context = self.fetch_manager.new_context(request, follower, now)
        if context.error != _NO_ERROR:
            counters["FetchSessionErrors"] += 1
            return context.generate((), now)
        session = context.session
        if session is not None:
            counters["IncrementalFetches"] += 1
        elif request.session_epoch == INITIAL_EPOCH:
            counters["FullFetches"] += 1
        else:
            counters["SessionlessFetches"] += 1
        if session is not None and follower:
            parts: Sequence[FetchPartition] = self._session_reads(session, params, now)
            nothing_to_fetch = False
            stamp: tuple[int, int, int] | None = None
        else:
            if follower:
                self._fetch_state_writers[params.replica_id] = None
            parts = context.partitions()
            nothing_to_fetch = not parts
            stamp = self._read_stamp()  # the state the reads below see (see DelayedFetch)
        results = self._read_from_log(params, parts, read_from_purgatory=False,
                                      distinct=session is not None)
        readable = 0
        immediate = params.max_wait_ms <= 0 or nothing_to_fetch
        for r in results:
            readable += r.size
            if r.error != _NO_ERROR or r.diverging_epoch is not None:
                immediate = True
        if immediate or readable >= params.min_bytes:
            response = context.generate(results, now)
            if self._unsent:
                self._flush_alter_partition()
            return response
        # no delivery while first checked: a fetch complete at once is answered here
        op: DelayedFetch
        if session is not None and follower:
            # found through _parked_sessions when a partition of its session changes: its
            # timer is started, no watch list holds it
            op = DelayedSessionFetch(params, context, results, self, None)  # type: ignore[arg-type]
            self._parked_sessions[session.id] = op  # type: ignore[assignment]
            self.fetch_purgatory.try_complete_else_delay(op)
        else:
            op = DelayedFetch(params, [(info.tp, FetchPartitionStatus(r.fetch_offset_metadata, info))
                                       for info, r in zip(parts, results, strict=True)],
                              self, None, context, reads=results, read_stamp=stamp)
            # a fetch's try_complete changes only its own counts: one check is enough
            self.fetch_purgatory.try_complete_else_watch(op, [info.tp for info in parts],
                                                         recheck=False)
        if self._unsent:
            self._flush_alter_partition()
        if op._completed:
            return op.response
        op.deliver = callback  # parked: its completion answers through the callback
        return None

    def _session_reads(self, session: FetchSession, params: FetchParams, now: int
                       ) -> list[FetchPartition]:
        """The partitions of an incremental follower fetch that must be read: one kernel scan
        of the session in session order picks those whose read could be answered (records, a
        new HW or epoch, a follower LEO the leader has not recorded, a follower outside the
        maximal ISR, a partition no longer led here) and applies
        §6.2's fetch-state update to the rest, whose reads Kafka would drop from the response."""
        # a follower's fetch states are written by its fetches' reads only (the reads after
        # this scan are this session's, of the columns it picks)
        writers = self._fetch_state_writers
        gen = self._leadership_gen
        since = session.begin_scan(self._rows_and_slots, gen,
                                   (gen, self._log_start_gen, self.table.membership_gen),
                                   writers.get(session.replica_id) is session)
        writers[params.replica_id] = session
        stale = (params.replica_epoch != -1
                 and self.broker_epochs.get(params.replica_id, -1) > params.replica_epoch)
        try:
            m = self.table.kernels.session_fetch(session.columns, len(session.index), not stale,
                                                 now, params.replica_epoch, since)
        except BaseException:
            session.scan_gens = ()  # nothing looked at: the next scan looks at every column
            raise
        picked = session.out_cells[:m].tolist()  # column slots, as plain ints
        mark, stamp = session.mark_cells, session.scan_stamp
        for j in picked:  # looked at again by the next scan
            mark[j] = stamp
        return list(map(session.parts.__getitem__, picked))  # type: ignore[arg-type]

    def _session_pending_reads(self, op: DelayedSessionFetch) -> list[FetchPartition]:
        """A parked session fetch completing: the partitions with something to send now, in
        session order (a HW, log start or epoch other than the one last sent, records, or a
        partition no longer led here).

        Only the partitions ``op`` marked can have any (see :class:`DelayedSessionFetch`):
        while the leadership, every leader's log start and the session's partitions are as
        they were when it parked, only those are looked at; otherwise all are."""
        session = op.session
        gen = self._leadership_gen
        if (op.leadership_gen == gen and op.log_start_gen == self._log_start_gen
                and op.session_version == session.version and session.gen == gen
                and op.session_epoch == session.epoch):
            m = self.table.kernels.session_pending_marked(session.columns, len(session.index),
                                                          op.stamp)
        else:
            session.refresh_rows(self._rows_and_slots, gen)
            m = self.table.kernels.session_pending(session.columns, len(session.index))
        if not m:
            return []
        picked = session.out_cells[:m].tolist()
        return list(map(session.parts.__getitem__, picked))  # type: ignore[arg-type]

    def _rows_and_slots(self, tps: Iterable[TopicPartition], replica_id: int
                        ) -> tuple[list[int], list[int]]:
        """The state-table rows and replica slots of ``tps``, in order: a partition led here
        with ``replica_id`` among its followers has (row, slot), any other (−1, −1)."""
        partitions = self._partitions
        rows: list[int] = []
        slots: list[int] = []
        for tp in tps:
            p = partitions.get(tp)
            slot = -1
            if p is not None and p.is_leader and p.row >= 0:
                slot = p.slot_of.get(replica_id, -1)  # Partition.follower_slot
            if slot > 0:
                rows.append(p.row)
                slots.append(slot)
            else:
                rows.append(-1)
                slots.append(-1)
        return rows, slots

    def _session_fetch_done(self, op: DelayedSessionFetch) -> None:
        if self._parked_sessions.get(op.session.id) is op:
            del self._parked_sessions[op.session.id]

    def _read_stamp(self) -> tuple[int, int, int]:
        """What moves whenever a leader-side read may answer differently: the leadership
        generation (LeaderAndIsr, StopReplica), the leaders' log-start generation, and the
        count of per-partition change reports (every append, HW move or other change of a
        partition reaches :meth:`_try_complete_delayed_fetch` or its follower form). While it
        stands still, a read from the purgatory gives what the same read gave before."""
        return self._leadership_gen, self._log_start_gen, self._reported_changes

    def _try_complete_delayed_fetch(self, tp: TopicPartition) -> None:
        """Kafka's tryCompleteDelayedFetch for ``tp``: fetches watching it, then parked session
        fetches whose session holds it. Every session holding ``tp`` marks its column changed
        (see :meth:`FetchSession.begin_scan`)."""
        self._reported_changes += 1
        for session in self._sessions:
            i = session.index.get(tp)
            if i is not None:
                session.mark_cells[i] = session.stamp
        fetch = self.fetch_purgatory
        if tp in fetch.watch_lists:  # else its check finds nothing
            fetch.check_and_complete(tp)
        parked = self._parked_sessions
        if parked:
            # The fetches this change completes re-read the log without changing it (a read
            # from the purgatory updates no follower state), all within this call: no fault
            # or other event comes in between. The same read — same partition, offset, byte
            # cap, log end position, HW and log start — is made once and its result shared
            # (each follower's own checks, fencing and replica slot, still run per fetch).
            outer = self._shared_reads
            if outer is None:
                self._shared_reads = {}
            try:
                for op in list(parked.values()):
                    i = op.session.index.get(tp)
                    if i is not None and not op._completed:
                        op.changed_at(tp, i)
            finally:
                if outer is None:
                    self._shared_reads = None

    def _try_complete_delayed_fetch_as_follower(self, tp: TopicPartition) -> None:
        """:meth:`_try_complete_delayed_fetch` after a change to ``tp`` as a follower here (an
        append of fetched data, a new HW from the leader): only fetches watching ``tp`` itself
        (a consumer's, KIP-392) can wait on it. A parked follower session fetch watches, as
        Kafka's DelayedFetch does, the partitions its session held when it parked, all led here
        then (one not led here is read, answering its error at once); losing leadership of any
        of them completes it (LeaderAndIsr, StopReplica). So while ``tp`` is followed here no
        parked session fetch watches it, and the scan over them is left out."""
        self._reported_changes += 1
        if self._parked_sessions:
            partition = self._partitions.get(tp)
            if partition is None or partition.is_leader:  # not followed here: the full check
                self._try_complete_delayed_fetch(tp)
                return
        fetch = self.fetch_purgatory
        if tp in fetch.watch_lists:  # else its check finds nothing
            fetch.check_and_complete(tp)

    def fetch_params(self, request: FetchRequest) -> FetchParams:
        """FetchParams as KafkaApis builds them: max bytes capped by ``fetch.max.bytes``,
        min bytes by max bytes, isolation by who fetches.

        They depend on six values of the request only, which a fetcher repeats on every
        fetch: the (immutable) params made for a set of values are kept and handed out again
        (at most 1,024 sets; the map starts afresh when full)."""
        key = (request.replica_id, request.replica_epoch, request.max_wait_ms,
               request.min_bytes, request.max_bytes, request.isolation_level)
        made = self._fetch_params
        params = made.get(key)
        if params is not None:
            return params
        max_bytes = min(int(request.max_bytes), self.config.fetch_max_bytes)
        if request.replica_id >= 0:
            isolation = ISOLATION_LOG_END
        elif request.isolation_level == ISOLATION_READ_COMMITTED:
            isolation = ISOLATION_TXN_COMMITTED
        else:
            isolation = ISOLATION_HIGH_WATERMARK
        params = FetchParams(int(request.replica_id), int(request.replica_epoch),
                             int(request.max_wait_ms), min(int(request.min_bytes), max_bytes),
                             max_bytes, isolation)
        if len(made) >= 1024:
            made.clear()
        made[key] = params
        return params

    def _read_from_log(self, params: FetchParams, parts: Sequence[FetchPartition], *,
                       read_from_purgatory: bool, distinct: bool = False) -> list[LogReadResult]:
        """ReplicaManager.readFromLog (§3.4): reads in request order under one byte budget;
        ``distinct``: no partition repeats in ``parts`` (a session's).

        A read up to the log end whose last fetched epoch is the log's latest epoch cannot
        diverge (that epoch ends at the LEO, §3.5), so it goes straight to the log; one that
        starts at the LEO itself reads nothing and answers the LEO's position without a read
        (what the log's read gives there)."""
        limit = params.max_bytes
        min_one_message = not params.hard_max_bytes_limit
        replica_id = params.replica_id
        follower = replica_id >= 0
        update = follower and not read_from_purgatory
        stale_epoch = False
        if update:
            now = self.clock.milliseconds()  # the fetch time, taken before the reads
            stale_epoch = (params.replica_epoch != -1
                           and self.broker_epochs.get(replica_id, -1) > params.replica_epoch)
            if stale_epoch:  # KIP-903: a fetch of a previous incarnation moves nothing (ours)
                self._counters["StaleReplicaEpochFetches"] += 1
            # the follower fetch states to update after the reads (a read from the purgatory
            # updates none): (partition, slot, fetch offset, follower log start, leader LEO)
            updates: list[tuple[Partition, int, int, int, int]] = []
        isolation = params.isolation
        to_log_end = isolation == ISOLATION_LOG_END
        fetch_only_leader = params.fetch_only_leader
        hard_limit = params.hard_max_bytes_limit
        results: list[LogReadResult] = []
        partitions = self._partitions
        # reads shared between the parked fetches one change completes (purgatory reads only)
        shared = self._shared_reads if read_from_purgatory else None
        log_end_reads = self._log_end_reads
        for info in parts:
            tp = info.tp
            partition = partitions.get(tp)
            if partition is None:
                results.append(LogReadResult(tp, self.metadata_cache.error_for_unhosted(tp)))
                continue
            epoch = info.current_leader_epoch
            # Partition.localLogWithEpochOrThrow, inlined for the hot path: fencing, then role.
            if epoch >= 0 and epoch != partition.leader_epoch:
                results.append(LogReadResult(tp, Errors.FENCED_LEADER_EPOCH
                                             if partition.leader_epoch > epoch
                                             else Errors.UNKNOWN_LEADER_EPOCH))
                continue
            log = partition.log
            if log is None or (fetch_only_leader and not partition.is_leader):
                results.append(LogReadResult(tp, Errors.NOT_LEADER_OR_FOLLOWER))
                continue
            fetch_offset = info.fetch_offset
            try:
                if follower:  # Partition.follower_slot_or_raise, its lookup inlined
                    slot = partition.slot_of.get(replica_id, -1)
                    if slot < 1:
                        partition.follower_slot_or_raise(replica_id, epoch)  # raises
                else:
                    slot = -1
                if stale_epoch:
                    raise KafkaError("stale fetch from a previous broker incarnation")
                # Partition.readRecords' offsets, captured before the read (§3.5); the fast
                # path below compares the latest epoch too (all plain attributes of the log)
                leo = log.log_end_offset
                hw = log.high_watermark
                log_start = log.log_start_offset
                last_fetched = info.last_fetched_epoch
                if to_log_end and (last_fetched < 0 or (fetch_offset <= leo
                                                        and last_fetched == log.latest_epoch)):
                    if fetch_offset == leo:
                        end_meta = log.log_end_offset_metadata
                        res = log_end_reads.get(tp)
                        if (res is None or res.fetch_offset_metadata is not end_meta
                                or res.high_watermark != hw or res.log_start_offset != log_start
                                or res.log_end_offset != leo):
                            res = log_end_reads[tp] = LogEndReadResult(tp, end_meta, hw,
                                                                       log_start, leo)
                    elif shared is not None:
                        cap = min(info.partition_max_bytes, limit)
                        key = (tp, fetch_offset, cap, min_one_message, hard_limit)
                        hit = shared.get(key)
                        end_meta = log.log_end_offset_metadata
                        if (hit is not None and hit[0] is end_meta and hit[1] is log
                                and hit[2].high_watermark == hw
                                and hit[2].log_start_offset == log_start):
                            res = hit[2]
                        else:
                            res = _read_to_log_end(tp, log, fetch_offset, leo, hw, log_start,
                                                   cap, min_one_message, hard_limit)
                            shared[key] = (end_meta, log, res)
                    else:
                        res = _read_to_log_end(tp, log, fetch_offset, leo, hw, log_start,
                                               min(info.partition_max_bytes, limit),
                                               min_one_message, hard_limit)
                    diverging = None
                else:
                    read = partition.read_records(
                        log, fetch_offset, epoch, last_fetched,
                        min(info.partition_max_bytes, limit), isolation, min_one_message,
                        epoch_checked=True)
                    fetched = read.fetched
                    diverging = read.diverging_epoch
                    leo = read.log_end_offset
                    res = LogReadResult(tp, _NO_ERROR,
                                        b"" if fetched is None else _sendable(fetched, hard_limit),
                                        None if fetched is None else fetched.fetch_offset_metadata,
                                        diverging,
                                        read.high_watermark, read.log_start_offset, leo,
                                        read.last_stable_offset)
            except KafkaError as e:
                code = Errors.NOT_LEADER_OR_FOLLOWER if stale_epoch else e.code
                results.append(LogReadResult(tp, code))
                continue
            results.append(res)
            size = res.size
            if size > 0:
                min_one_message = False
            limit = limit - size if limit > size else 0
            if update and diverging is None:
                updates.append((partition, slot, fetch_offset, info.log_start_offset, leo))
        if update and updates:
            self._update_follower_fetch_states(updates, now, params.replica_epoch,
                                               distinct=distinct)
        return results

    def _update_follower_fetch_states(self, updates: list[tuple[Partition, int, int, int, int]],
                                      now: int, broker_epoch: int, *, distinct: bool) -> None:
        """§6.2 for every partition of one follower fetch, in read order: per partition
        Partition.updateFollowerFetchState (one kernel call for the state row, the
        ISR-expansion check and the HW), as Kafka's updateFollowerFetchState does. Partitions
        that may repeat (a fetch outside a session) get one kernel call for all their state
        rows first, then per partition the expansion check and, where the LEO moved, the HW.

        For ``distinct`` partitions the two orders agree: a partition's expansion check, HW and
        what its HW move completes read the fetching follower's state of that partition only."""
        if distinct or len(updates) == 1:
            for partition, slot, offset, start, leo in updates:
                partition.update_follower_fetch_state(slot, offset, start, now, leo, broker_epoch)
            return
        parts = [u[0] for u in updates]
        slots = [u[1] for u in updates]
        changed = self.table.update_follower_fetches(
            [p.row for p in parts], slots, [u[2] for u in updates], [u[3] for u in updates],
            [u[4] for u in updates], now, broker_epoch)
        for k, partition in enumerate(parts):
            partition.after_follower_fetch(slots[k], bool(changed[k]), now)

    def _fetch_response(self, results: Sequence[LogReadResult]) -> FetchResponse:
        return FetchResponse(Errors.NONE, partition_responses(results))

    def complete_delayed_fetch_requests(self, tps: Iterable[TopicPartition]) -> None:
        """Kafka's completeDelayedFetchRequests: a follower's fetcher, after its round, wakes
        the fetches parked on the partitions whose HW moved here (KIP-392 consumers)."""
        for tp in tps:
            self._try_complete_delayed_fetch_as_follower(tp)

    # ---- epochs and offsets (§4.3) -----------------------------------------------------------
    def offsets_for_leader_epoch(self, request: OffsetsForLeaderEpochRequest
                                 ) -> dict[TopicPartition, EpochEndOffset]:
        """ReplicaManager.lastOffsetForLeaderEpoch: per partition (epoch, end offset) from the
        leader's epoch cache, fenced by ``current_leader_epoch`` (KIP-320)."""
        out: dict[TopicPartition, EpochEndOffset] = {}
        for p in request.partitions:
            partition = self._partitions.get(p.tp)
            if partition is None:
                out[p.tp] = EpochEndOffset(self.metadata_cache.error_for_unhosted(p.tp),
                                           NO_EPOCH, -1)
            else:
                out[p.tp] = partition.last_offset_for_leader_epoch(
                    p.current_leader_epoch, p.leader_epoch, fetch_only_from_leader=True)
        return out

    def list_offsets(self, replica_id: int, partitions: Iterable[ListOffsetsPartition]
                     ) -> dict[TopicPartition, ListOffsetsResult]:
        """ReplicaManager.fetchOffset on the leader: earliest = log start offset, latest = LEO
        for a replica and HW for a consumer (OFFSET_NOT_AVAILABLE while a new leader's HW is
        below its epoch start), other timestamps through the time index."""
        out: dict[TopicPartition, ListOffsetsResult] = {}
        for lp in partitions:
            out[lp.tp] = self._list_offset(replica_id, lp)
        return out

    def _list_offset(self, replica_id: int, lp: ListOffsetsPartition) -> ListOffsetsResult:
        none = ListOffsetsResult(Errors.NONE, -1, -1, -1)
        partition = self._partitions.get(lp.tp)
        if partition is None:
            return ListOffsetsResult(self.metadata_cache.error_for_unhosted(lp.tp), -1, -1, -1)
        log = partition.local_log_or_error(lp.current_leader_epoch, require_leader=True)
        if isinstance(log, Errors):
            return ListOffsetsResult(log, -1, -1, -1)
        consumer = replica_id < 0
        hw = partition.high_watermark
        lagging = (consumer and partition.leader_epoch_start_offset is not None
                   and partition.leader_epoch_start_offset > hw)
        if lp.timestamp == LATEST_TIMESTAMP:
            if lagging:
                return ListOffsetsResult(Errors.OFFSET_NOT_AVAILABLE, -1, -1, -1)
            offset = hw if consumer else int(log.log_end_offset)
            return ListOffsetsResult(Errors.NONE, -1, offset, partition.leader_epoch)
        found = log.offset_for_timestamp(lp.timestamp)
        if found is None:
            return none
        epoch = found.leader_epoch if found.leader_epoch is not None else -1
        if lp.timestamp != EARLIEST_TIMESTAMP:
            if lagging:
                return ListOffsetsResult(Errors.OFFSET_NOT_AVAILABLE, -1, -1, -1)
            if consumer and found.offset >= hw:
                return none
        return ListOffsetsResult(Errors.NONE, int(found.timestamp), int(found.offset), int(epoch))

    # ---- AlterPartition (§6.5-§6.7) ----------------------------------------------------------
    def handle_alter_partition_response(
            self, result: AlterPartitionResult | Iterable[AlterPartitionResult]) -> None:
        """The controller's answer for one partition (or several) of an AlterPartition."""
        results = [result] if isinstance(result, AlterPartitionResult) else list(result)
        for r in results:
            partition = self._partitions.get(TopicPartition(*r.tp))
            if partition is not None:
                partition.handle_alter_partition_result(r)

    def drain_alter_partition_requests(self) -> list[AlterPartitionRequest]:
        """AlterPartition requests built while no transport was set (oldest first)."""
        self._flush_alter_partition()
        out, self._drained = self._drained, []
        return out

    def _submit_alter_partition(self, item: AlterPartitionItem, *, retry: bool = False) -> None:
        if retry:
            self._retry[item.tp] = item
        else:
            self._retry.pop(item.tp, None)
            self._unsent[item.tp] = item

    def _forget_unsent_alter_partition(self, tp: TopicPartition) -> None:
        self._unsent.pop(tp, None)
        self._retry.pop(tp, None)

    def _flush_alter_partition(self) -> None:
        if not self._unsent:
            return
        items, self._unsent = tuple(self._unsent.values()), {}
        request = AlterPartitionRequest(self.broker_id, self.broker_epoch, items)
        if self.alter_partition is None:
            self._drained.append(request)
        else:
            self.alter_partition(request)

    def _record_isr_change(self, tp: TopicPartition, *, expanded: bool) -> None:
        self._counters["IsrExpandsPerSec" if expanded else "IsrShrinksPerSec"] += 1
        self._isr_change_set.add(tp)
        self._last_isr_change_ms = self.clock.milliseconds()

    def _mark_failed_isr_update(self) -> None:
        self._counters["FailedIsrUpdatesPerSec"] += 1

    def set_broker_eligible(self, broker_id: int, eligible: bool) -> None:
        """Metadata: whether ``broker_id`` may join ISRs and hold back HWs (alive, not fenced,
        not shutting down — KIP-841, KAFKA-15021)."""
        if eligible:
            self._ineligible.discard(broker_id)
        else:
            self._ineligible.add(broker_id)
        mask = self.table.replica_id == broker_id
        mask[:, 0] = False
        self.table.eligible[mask] = 1 if eligible else 0

    def eligible_replicas(self, replicas: Iterable[int]) -> list[int]:
        return [b for b in replicas if b not in self._ineligible]

    # ---- delayed-operation hooks -------------------------------------------------------------
    def _on_leader_hw_incremented(self, tp: TopicPartition) -> None:
        produce = self.produce_purgatory
        if tp in produce.watch_lists:  # else its check finds nothing
            produce.check_and_complete(tp)
        self._try_complete_delayed_fetch(tp)

    def _on_leader_log_start_moved(self, tp: TopicPartition) -> None:
        """A leader's log start moved: fetch sessions answer it (KIP-227), though it completes
        no parked fetch (Kafka's DelayedFetch does not look at the log start)."""
        self._log_start_gen += 1

    def _record_produce_expiration(self, tps: list[TopicPartition]) -> None:
        self._counters["ProduceExpiresPerSec"] += 1

    def _record_fetch_expiration(self, from_follower: bool) -> None:
        self._counters["FetchExpiresPerSec.follower" if from_follower
                       else "FetchExpiresPerSec.consumer"] += 1

    def _record_delayed_fetch_completion(self, from_follower: bool) -> None:
        """Every DelayedFetch completion, expiry included (those also count in
        ``FetchExpiresPerSec``): completed early = completions − expiries."""
        self._counters["DelayedFetchCompletions.follower" if from_follower
                       else "DelayedFetchCompletions.consumer"] += 1

    # ---- storage hooks -----------------------------------------------------------------------
    def _get_or_create_log(self, tp: TopicPartition, *, is_new: bool = False,
                           topic_id: str | None = None) -> Any:
        lm = self.log_manager
        log = lm.get_log(tp.topic, tp.partition)
        if log is None:
            log = lm.create_log(tp.topic, tp.partition)
        if topic_id and log.topic_id is None:
            log.topic_id = topic_id
        self._logs[tp] = log  # the partition's log from now on (see local_log)
        return log

    # ---- scheduled work ----------------------------------------------------------------------
    def tick(self) -> None:
        """Run whatever is due on the injected clock: ISR shrink (every lag/2), AlterPartition
        retries, ISR change propagation (every 2.5 s), purgatory expiry, HW checkpoint."""
        now = self.clock.milliseconds()
        if now >= self._next_isr_shrink_ms:
            self.maybe_shrink_isr(now)
            self._next_isr_shrink_ms = _next_due(self._next_isr_shrink_ms,
                                                 self.config.isr_shrink_interval_ms, now)
        if self._retry:
            retry, self._retry = self._retry, {}
            for tp, item in retry.items():
                partition = self._partitions.get(tp)
                if partition is not None and partition.pending_alter_partition is item:
                    self._unsent.setdefault(tp, item)
        if self._unsent:
            self._flush_alter_partition()
        if now >= self._next_isr_propagation_ms:
            self.maybe_propagate_isr_changes(now)
            self._next_isr_propagation_ms = _next_due(self._next_isr_propagation_ms,
                                                      ISR_CHANGE_PROPAGATION_CHECK_MS, now)
        self.produce_purgatory.advance_clock(now)
        self.fetch_purgatory.advance_clock(now)
        if self._next_hw_checkpoint_ms is not None and now >= self._next_hw_checkpoint_ms:
            self.checkpoint_high_watermarks()
            self._next_hw_checkpoint_ms = _next_due(
                self._next_hw_checkpoint_ms,
                self.config.replica_high_watermark_checkpoint_interval_ms, now)

    def tick_due_version(self) -> int:
        """A count that moves whenever :meth:`next_tick_due_ms` may have become earlier: a
        purgatory timer that became its queue's first (``Purgatory.earliest_moves``) or the
        high-watermark checkpoint task started. :meth:`tick` only moves its due times later,
        and an expiry or purge only drops queue entries. While this count stands still,
        :meth:`next_tick_due_ms` is no earlier than when last read, so a driver whose wake-up
        is set no later than that need not read it again."""
        return (self.produce_purgatory.earliest_moves + self.fetch_purgatory.earliest_moves
                + self._checkpoint_starts)

    def next_tick_due_ms(self) -> int:
        """The earliest time at which :meth:`tick` has timed work (for event-driven drivers)."""
        due = self._next_isr_shrink_ms
        if self._next_isr_propagation_ms < due:
            due = self._next_isr_propagation_ms
        checkpoint = self._next_hw_checkpoint_ms
        if checkpoint is not None and checkpoint < due:
            due = checkpoint
        heap = self.produce_purgatory._heap
        if heap and heap[0][0] < due:
            due = heap[0][0]
        heap = self.fetch_purgatory._heap
        if heap and heap[0][0] < due:
            due = heap[0][0]
        return due

    def maybe_shrink_isr(self, now_ms: int | None = None) -> list[AlterPartitionItem]:
        """The "isr-expiration" task (§6.6): one kernel pass over every led partition finds the
        out-of-sync ISR followers; each affected partition proposes its shrink."""
        now = self.clock.milliseconds() if now_ms is None else int(now_ms)
        ps, rs = self.table.out_of_sync_all(now)
        items: list[AlterPartitionItem] = []
        if len(ps) == 0:
            return items
        by_row: dict[int, list[int]] = {}
        for p, r in zip(ps.tolist(), rs.tolist(), strict=True):
            by_row.setdefault(p, []).append(r)
        for row, slots in by_row.items():
            partition = self._by_row.get(row)
            if partition is not None:
                item = partition.maybe_shrink_isr(now, slots)
                if item is not None:
                    items.append(item)
        self._flush_alter_partition()
        return items

    def maybe_propagate_isr_changes(self, now_ms: int | None = None) -> list[TopicPartition]:
        """ReplicaManager.maybePropagateIsrChanges: hand the changed partitions to the listener
        when the last change is more than 5 s old or the last propagation more than 60 s old."""
        now = self.clock.milliseconds() if now_ms is None else int(now_ms)
        if not self._isr_change_set:
            return []
        if (self._last_isr_change_ms + ISR_CHANGE_PROPAGATION_BLACKOUT_MS < now
                or self._last_isr_propagation_ms + ISR_CHANGE_PROPAGATION_INTERVAL_MS < now):
            changed = sorted(self._isr_change_set)
            self._isr_change_set.clear()
            self._last_isr_propagation_ms = now
            self._counters["IsrChangePropagations"] += 1
            if self.isr_change_listener is not None:
                self.isr_change_listener(changed)
            return changed
        return []

    def checkpoint_high_watermarks(self) -> None:
        """Write every log's HW to ``replication-offset-checkpoint`` (checkpointHighWatermarks)."""
        self.log_manager.checkpoint_high_watermarks()

    def shutdown(self, clean: bool = True) -> None:
        """ReplicaManager.shutdown: stop fetchers; with ``clean`` checkpoint the HWs. The logs
        themselves belong to the LogManager (its own shutdown flushes and closes them)."""
        self._shut_down = True
        connections, self.connections = list(self.connections), weakref.WeakSet()
        for connection in connections:
            connection.leader_closed()
        self._remove_fetchers(list(self.last_initial_fetch_states))
        if self.fetcher_manager is not None:
            self.fetcher_manager.shutdown()
        if clean:
            self.checkpoint_high_watermarks()

    # ---- metrics -----------------------------------------------------------------------------
    def metrics(self) -> dict[str, Any]:
        """Kafka's ReplicaManager gauges and meters (meters as counts) plus per-partition
        HW/LEO: ``partitions[str(tp)]`` has HighWatermark, LogEndOffset, LogStartOffset,
        InSyncReplicasCount, ReplicasCount, UnderReplicated, UnderMinIsr, AtMinIsr."""
        table = self.table
        rows = table.partitions()
        if len(rows):
            isr_sizes = table.in_isr[rows].sum(axis=1).astype(np.int64)
            n_rep = table.n_replicas[rows].astype(np.int64)
            min_isr = np.minimum(table.min_isr[rows].astype(np.int64), n_rep)
        else:
            isr_sizes = n_rep = min_isr = np.zeros(0, dtype=np.int64)
        under_replicated = under_min = at_min = 0
        per_partition: dict[str, dict[str, int]] = {}
        leader_rows = {int(r): i for i, r in enumerate(rows.tolist())}
        for tp, partition in self._partitions.items():
            i = leader_rows.get(partition.row) if partition.is_leader else None
            if i is not None:
                rf = int(n_rep[i]) - len(partition.adding_replicas)
                ur = int(rf - int(isr_sizes[i]) > 0)
                um = int(isr_sizes[i] < min_isr[i])
                am = int(isr_sizes[i] == min_isr[i])
                isr_count = int(isr_sizes[i])
            else:
                ur = um = am = 0
                isr_count = 0
            under_replicated += ur
            under_min += um
            at_min += am
            log = partition.log
            per_partition[str(tp)] = {
                "HighWatermark": partition.high_watermark,
                "LogEndOffset": int(log.log_end_offset) if log is not None else -1,
                "LogStartOffset": int(log.log_start_offset) if log is not None else -1,
                "InSyncReplicasCount": isr_count,
                "ReplicasCount": len(partition.replicas),
                "UnderReplicated": ur,
                "UnderMinIsr": um,
                "AtMinIsr": am,
            }
        out: dict[str, Any] = {
            "LeaderCount": len(leader_rows),
            "PartitionCount": len(self._partitions),
            "OfflineReplicaCount": 0,
            "UnderReplicatedPartitions": under_replicated,
            "UnderMinIsrPartitionCount": under_min,
            "AtMinIsrPartitionCount": at_min,
            "PurgatorySize.Produce": self.produce_purgatory.watched,
            # a parked session fetch counts once (it is found through its session, not watched)
            "PurgatorySize.Fetch": self.fetch_purgatory.watched + len(self._parked_sessions),
            "NumDelayedOperations.Produce": self.produce_purgatory.delayed,
            "NumDelayedOperations.Fetch": self.fetch_purgatory.delayed,
            "NumIncrementalFetchSessions": self.fetch_manager.cache.size,
            "NumIncrementalFetchPartitionsCached": self.fetch_manager.cache.total_partitions,
            "IncrementalFetchSessionEvictionsPerSec": self.fetch_manager.cache.evictions,
        }
        out.update(self._counters)
        out["partitions"] = per_partition
        return out

    def meters(self) -> dict[str, int]:
        """The meters of :meth:`metrics` (counts since start) and its fetch-session cache gauges
        (``NumIncrementalFetchSessions``, ``NumIncrementalFetchPartitionsCached``,
        ``IncrementalFetchSessionEvictionsPerSec``), without walking the partitions."""
        cache = self.fetch_manager.cache
        out = {"NumIncrementalFetchSessions": cache.size,
               "NumIncrementalFetchPartitionsCached": cache.total_partitions,
               "IncrementalFetchSessionEvictionsPerSec": cache.evictions}
        out.update(self._counters)
        return out


def _read_to_log_end(tp: TopicPartition, log: Any, fetch_offset: int, leo: int, hw: int,
                     log_start: int, max_bytes: int, min_one_message: bool, hard_limit: bool
                     ) -> LogReadResult:
    """A follower's read that cannot diverge, below the LEO, up to it."""
    fetched = log.read(fetch_offset, max_bytes, isolation=ISOLATION_LOG_END,
                       min_one_message=min_one_message)
    return LogReadResult(tp, _NO_ERROR, _sendable(fetched, hard_limit),
                         fetched.fetch_offset_metadata, None, hw, log_start, leo, hw)


def _sendable(fetched: Any, hard_max_bytes_limit: bool) -> Any:
    """A read's records as a fetch response carries them: from fetch v3 on (no hard byte
    limit) an incomplete first batch is sent as nothing."""
    if fetched.first_entry_incomplete and not hard_max_bytes_limit:
        return b""
    return fetched.records


def _next_due(previous_due: int, period: int, now: int) -> int:
    """The next run of a fixed-rate task after ``now`` (missed periods are skipped)."""
    return previous_due + ((now - previous_due) // period + 1) * period
