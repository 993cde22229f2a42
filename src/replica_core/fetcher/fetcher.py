"""A follower fetcher for one (source broker, fetcher id) (§4.5–4.8, §7).

Kafka: ``AbstractFetcherThread`` + ``ReplicaFetcherThread`` + the fetch-building half of
``RemoteLeaderEndPoint``. Kafka runs it as a thread looping on ``doWork``; here it is a step
function: whoever drives the broker calls :meth:`ReplicaFetcher.do_work` (a thread loop, the
simulator's event loop, a test). The pieces are public as well (:meth:`build_fetch` /
:meth:`process_fetch_response`, :meth:`build_epoch_request` / :meth:`process_epoch_response`), so
an asynchronous driver can put a network between building a request and processing its answer.

Truncation modes (``truncation=``):

* ``"leader_epoch"`` (default, Kafka ≥ 2.0): truncate by leader epoch (KIP-101, KIP-279). With
  ``truncate_on_fetch=True`` (IBP ≥ 2.7-IV1, the default) a partition whose log has an epoch starts
  Fetching at its LEO and every fetch carries ``lastFetchedEpoch``; the leader's diverging-epoch
  answers drive truncation. With ``truncate_on_fetch=False`` (IBP 2.0–2.6) partitions start
  Truncating and ask the leader with OffsetsForLeaderEpoch, round after round until complete.
  A log without any epoch falls back to truncating to its high watermark (§4.7).
* ``"high_watermark"`` (pre-0.11): when a partition starts being followed, it is truncated to the
  local high watermark (the ``init_offset`` the replica manager passes in this mode) and fetched
  from there; epochs are never sent nor used. This is the behaviour whose acknowledged-data loss
  KIP-101 fixed (§9.1), kept so the simulator can show it.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from replica_core.clock import Clock
from replica_core.errors import (
    CorruptRecordError,
    Errors,
    FencedLeaderEpochError,
    InvalidRecordError,
    KafkaError,
    KafkaStorageError,
    NotLeaderOrFollowerError,
    UnknownLeaderEpochError,
    UnknownTopicOrPartitionError,
)
from replica_core.fetcher.endpoint import LeaderEndPoint
from replica_core.fetcher.fetch_session_handler import FetchSessionHandler
from replica_core.fetcher.local_replica import FollowerReplicaManager, LocalReplica
from replica_core.fetcher.partition_states import (
    FETCHING,
    TRUNCATING,
    PartitionFetchState,
    PartitionStates,
)
from replica_core.fetcher.truncation import OffsetTruncationState, offset_truncation_state
from replica_core.replication.config import ReplicaConfig
from replica_core.replication.messages import (
    ISOLATION_READ_UNCOMMITTED,
    NO_EPOCH,
    EpochEndOffset,
    FetchPartition,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    InitialFetchState,
    OffsetForLeaderPartition,
    OffsetsForLeaderEpochRequest,
    TopicPartition,
)

log = logging.getLogger(__name__)

TRUNCATION_LEADER_EPOCH = "leader_epoch"
TRUNCATION_HIGH_WATERMARK = "high_watermark"
TRUNCATION_MODES = (TRUNCATION_LEADER_EPOCH, TRUNCATION_HIGH_WATERMARK)


# --- configuration ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class FetcherConfig:
    """The broker settings a follower fetcher uses, with Kafka's defaults (§6.10)."""

    fetch_max_bytes: int = 1_048_576            # replica.fetch.max.bytes (per partition)
    response_max_bytes: int = 10_485_760        # replica.fetch.response.max.bytes
    min_bytes: int = 1                          # replica.fetch.min.bytes
    wait_max_ms: int = 500                      # replica.fetch.wait.max.ms
    backoff_ms: int = 1000                      # replica.fetch.backoff.ms
    num_fetchers: int = 1                       # num.replica.fetchers
    isr_broker_epochs: bool = True              # fetches carry the broker epoch (KIP-903)

    _PROPERTIES: ClassVar[dict[str, str]] = {
        "replica.fetch.max.bytes": "fetch_max_bytes",
        "replica.fetch.response.max.bytes": "response_max_bytes",
        "replica.fetch.min.bytes": "min_bytes",
        "replica.fetch.wait.max.ms": "wait_max_ms",
        "replica.fetch.backoff.ms": "backoff_ms",
        "num.replica.fetchers": "num_fetchers",
    }

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> FetcherConfig:
        """From Kafka's dotted names; other keys are ignored (they belong to other layers)."""
        kwargs = {field: int(props[name]) for name, field in cls._PROPERTIES.items()
                  if name in props}
        return cls(**kwargs)

    @classmethod
    def of(cls, config: Any) -> FetcherConfig:
        """Accept a FetcherConfig, a dict of dotted names, or an object (e.g. ``ReplicaConfig``)
        with snake_case attributes named after the dotted names (``replica_fetch_max_bytes``)."""
        if config is None:
            return cls()
        if isinstance(config, FetcherConfig):
            return config
        if isinstance(config, Mapping):
            return cls.from_properties(config)
        if isinstance(config, ReplicaConfig):
            return cls(config.replica_fetch_max_bytes, config.replica_fetch_response_max_bytes,
                       config.replica_fetch_min_bytes, config.replica_fetch_wait_max_ms,
                       config.replica_fetch_backoff_ms, config.num_replica_fetchers,
                       config.isr_broker_epochs)
        raise TypeError(f"a fetcher config is a FetcherConfig, a ReplicaConfig or a mapping of "
                        f"Kafka property names, not {type(config).__name__}")


def truncation_mode_of(config: Any) -> str:
    """The ``truncation`` switch of a config (``ReplicaConfig.truncation`` or a ``"truncation"``
    property), ``"leader_epoch"`` when absent."""
    if isinstance(config, Mapping):
        return str(config.get("truncation", TRUNCATION_LEADER_EPOCH))
    if isinstance(config, ReplicaConfig):
        return config.truncation
    return TRUNCATION_LEADER_EPOCH


def initial_fetch_offset(log_end_offset: int, high_watermark: int, latest_epoch: int | None, *,
                         truncation: str = TRUNCATION_LEADER_EPOCH,
                         truncate_on_fetch: bool = True) -> int:
    """``ReplicaManager.initialFetchOffset``: the LEO when truncation-on-fetch is on and the log
    has an epoch, else the high watermark (the truncation point when no epoch can be used)."""
    if truncation == TRUNCATION_LEADER_EPOCH and truncate_on_fetch and latest_epoch is not None:
        return log_end_offset
    return high_watermark


# --- replication quota --------------------------------------------------------------------------
class ReplicaQuota(Protocol):
    """Follower-side replication throttling (Kafka's ``ReplicaQuota``)."""

    def is_throttled(self, tp: TopicPartition) -> bool: ...

    def is_quota_exceeded(self) -> bool: ...

    def record(self, value: int) -> None: ...


class UnboundedReplicaQuota:
    """No throttling (Kafka's ``UNBOUNDED_QUOTA``)."""

    def is_throttled(self, tp: TopicPartition) -> bool:
        return False

    def is_quota_exceeded(self) -> bool:
        return False

    def record(self, value: int) -> None:
        pass


class ReplicationQuota:
    """A byte-rate bound on throttled partitions over a sampled window on the injected clock
    (Kafka's ``ReplicationQuotaManager`` with ``replication.quota.window.num`` = 11 windows of
    ``replication.quota.window.size.seconds`` = 1 s).

    The rate is the bytes recorded in the retained windows divided by the elapsed time, counted as
    at least ``num_windows − 1`` full windows (Kafka's ``Rate.windowSize``). ``throttled`` is a
    set of partitions, or ``"*"`` for every partition; ``record`` always counts, even over the
    bound (as Kafka's ``record(value)`` with the quota check off).
    """

    def __init__(self, bytes_per_second: float, clock: Clock,
                 throttled: Iterable[TopicPartition] | str = (), *,
                 num_windows: int = 11, window_ms: int = 1000) -> None:
        self.bound = float(bytes_per_second)
        self.clock = clock
        self.num_windows = num_windows
        self.window_ms = window_ms
        self._all = throttled == "*"
        self._throttled = set() if self._all else {TopicPartition(*tp) for tp in throttled}
        self._samples: list[list[int]] = []   # [window_start_ms, bytes]

    def mark_throttled(self, partitions: Iterable[TopicPartition]) -> None:
        self._throttled.update(TopicPartition(*tp) for tp in partitions)

    def is_throttled(self, tp: TopicPartition) -> bool:
        return self._all or tp in self._throttled

    def _purge(self, now: int) -> None:
        horizon = now - self.num_windows * self.window_ms
        while self._samples and self._samples[0][0] + self.window_ms <= horizon:
            self._samples.pop(0)

    def record(self, value: int) -> None:
        now = self.clock.milliseconds()
        self._purge(now)
        if not self._samples or now >= self._samples[-1][0] + self.window_ms:
            self._samples.append([now, 0])
        self._samples[-1][1] += int(value)

    def rate(self) -> float:
        """Bytes per second over the retained windows."""
        now = self.clock.milliseconds()
        self._purge(now)
        if not self._samples:
            return 0.0
        elapsed = now - self._samples[0][0]
        elapsed = max(elapsed, (self.num_windows - 1) * self.window_ms)
        return sum(s[1] for s in self._samples) * 1000.0 / elapsed

    def is_quota_exceeded(self) -> bool:
        return self.rate() > self.bound


# --- metrics ------------------------------------------------------------------------------------
class Meter:
    """A counter named like Kafka's Yammer meters; rates are left to whoever samples ``count``."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0

    def mark(self, n: int = 1) -> None:
        self.count += n


class FetcherStats:
    """Kafka's ``FetcherStats``: ``RequestsPerSec`` and ``BytesPerSec`` per fetcher."""

    def __init__(self) -> None:
        self.request_rate = Meter()
        self.byte_rate = Meter()

    def metrics(self) -> dict[str, int]:
        return {"RequestsPerSec": self.request_rate.count, "BytesPerSec": self.byte_rate.count}


class FetcherLagMetrics:
    """Kafka's ``FetcherLagMetrics``: the ``ConsumerLag`` gauge of one partition (−1 = unknown)."""

    __slots__ = ("lag",)

    def __init__(self) -> None:
        self.lag = -1


class FetcherLagStats:
    """Per-partition lag gauges of one fetcher (Kafka's ``FetcherLagStats``)."""

    def __init__(self) -> None:
        self.stats: dict[TopicPartition, FetcherLagMetrics] = {}

    def get_and_maybe_put(self, tp: TopicPartition) -> FetcherLagMetrics:
        m = self.stats.get(tp)
        if m is None:
            m = self.stats[tp] = FetcherLagMetrics()
        return m

    def unregister(self, tp: TopicPartition | None = None) -> None:
        if tp is None:
            self.stats.clear()
        else:
            self.stats.pop(tp, None)

    def max_lag(self) -> int:
        """The largest lag, 0 when none is known (the fold behind the manager's ``MaxLag``)."""
        return max(0, max((m.lag for m in self.stats.values()), default=0))


class FailedPartitions:
    """Partitions a fetcher gave up on until the next LeaderAndIsr (Kafka's ``FailedPartitions``):
    storage errors, fencing by a leader of the same epoch, unexpected errors."""

    def __init__(self) -> None:
        self._set: set[TopicPartition] = set()

    def add(self, tp: TopicPartition) -> None:
        self._set.add(TopicPartition(*tp))

    def remove_all(self, tps: Iterable[TopicPartition]) -> None:
        if not self._set:
            return  # the common case (nothing failed): nothing to look up
        for tp in tps:
            self._set.discard(TopicPartition(*tp))

    def __contains__(self, tp: object) -> bool:
        return tp in self._set

    def __len__(self) -> int:
        return len(self._set)

    @property
    def size(self) -> int:
        return len(self._set)

    def partitions(self) -> set[TopicPartition]:
        return set(self._set)


# --- the local replica, as the fetcher sees it -------------------------------------------------
_NONE = Errors.NONE
_NO_ANSWER = object()


class _InFlight:
    """The request with the leader — a fetch (``fetch``) or an OffsetsForLeaderEpoch request —
    and, called with it, the place its answer goes (the endpoint's ``on_answer``)."""

    __slots__ = ("answer", "fetch", "fetcher", "request")

    def __init__(self, fetcher: ReplicaFetcher, fetch: bool,
                 request: FetchRequest | OffsetsForLeaderEpochRequest) -> None:
        self.fetcher = fetcher
        self.fetch = fetch
        self.request = request
        self.answer: Any = _NO_ANSWER

    def __call__(self, answer: Any) -> None:
        """Keep the answer; wake the driver when it came after the send returned."""
        fetcher = self.fetcher
        if fetcher._in_flight is not self or self.answer is not _NO_ANSWER:
            return  # stale (the fetcher moved on) or answered twice
        self.answer = answer
        if not fetcher._sending and fetcher.wakeup is not None:
            fetcher.wakeup()


def _error_name(code: int) -> str:
    try:
        return Errors(code).name
    except ValueError:
        return f"error code {code}"


class IllegalStateError(KafkaError):
    """A fetcher invariant broken (Kafka's IllegalStateException); the partition is failed."""


# --- the fetcher --------------------------------------------------------------------------------
class ReplicaFetcher:
    """Replicates the partitions this broker follows from one source broker (§7).

    Partition fetch states live in a :class:`PartitionStates` ordered map; fetch requests list
    ready partitions in its order, and a partition that received data, errored, or was (re)added
    goes to the end, so no partition starves under the response byte limit (§7.3).
    """

    __slots__ = ("fetcher_id", "source_broker", "leader", "replica_manager", "config", "clock",
                 "truncation", "truncate_on_fetch", "uses_leader_epochs", "quota",
                 "failed_partitions", "partition_states", "fetcher_stats", "fetcher_lag_stats",
                 "partitions_with_new_high_watermark", "_local", "incremental_build", "_entry_key",
                 "name", "session_handler", "_built", "_in_flight", "_sending", "running",
                 "truncation_listener", "wakeup", "__weakref__")

    def __init__(self, fetcher_id: int, source_broker: int, leader_endpoint: LeaderEndPoint,
                 replica_manager: FollowerReplicaManager, config: Any = None, *, clock: Clock,
                 truncation: str | None = None, truncate_on_fetch: bool = True,
                 quota: ReplicaQuota | None = None,
                 failed_partitions: FailedPartitions | None = None,
                 incremental_build: bool = True) -> None:
        if truncation is None:
            truncation = truncation_mode_of(config)
        if truncation not in TRUNCATION_MODES:
            raise ValueError(f"truncation must be one of {TRUNCATION_MODES}, not {truncation!r}")
        self.fetcher_id = fetcher_id
        self.source_broker = source_broker
        self.leader = leader_endpoint
        self.replica_manager = replica_manager
        self.config = FetcherConfig.of(config)
        self.clock = clock
        self.truncation = truncation
        # isTruncationOnFetchSupported; never in the pre-0.11 high watermark mode.
        self.truncate_on_fetch = truncate_on_fetch and truncation == TRUNCATION_LEADER_EPOCH
        # isOffsetForLeaderEpochSupported
        self.uses_leader_epochs = truncation == TRUNCATION_LEADER_EPOCH
        self.quota: ReplicaQuota = quota if quota is not None else UnboundedReplicaQuota()
        self.failed_partitions = failed_partitions if failed_partitions is not None \
            else FailedPartitions()
        self.partition_states: PartitionStates[TopicPartition, PartitionFetchState] = \
            PartitionStates()
        self.fetcher_stats = FetcherStats()
        self.fetcher_lag_stats = FetcherLagStats()
        self.partitions_with_new_high_watermark: list[TopicPartition] = []
        self._local = LocalReplica(replica_manager)
        self.incremental_build = incremental_build
        # what goes into every request entry besides the partition's state and log start: a
        # change (never in practice) forces a full pass
        self._entry_key: tuple[bool, int] | None = None
        self.name = f"ReplicaFetcherThread-{fetcher_id}-{source_broker}"
        # KIP-227: the session with the leader (RemoteLeaderEndPoint's fetchSessionHandler)
        self.session_handler = FetchSessionHandler(source_broker)
        # the last request built in the session (its answer is checked against the session)
        self._built: FetchRequest | None = None
        # the request with the leader, if any, and its answer once it came
        self._in_flight: _InFlight | None = None
        self._sending = False
        self.running = True
        self.truncation_listener: Callable[[Sequence[TopicPartition]], None] | None = None
        """Told of the partitions this fetcher truncated (observers such as the simulator's
        invariant checker), right after each truncation or, for a pass over several partitions
        (truncation to the high watermark), once after the pass, in truncation order."""
        self.wakeup: Callable[[], None] | None = None
        """Called when an answer arrives later than its send (a parked fetch completed, a
        network delivered it): whoever drives the fetcher should run :meth:`do_work` soon."""

    # -- identity -------------------------------------------------------------------------------
    @property
    def broker_id(self) -> int:
        return int(self.replica_manager.broker_id)

    @property
    def broker_epoch(self) -> int:
        """The broker epoch a fetch carries (KIP-903); −1 when the broker's ReplicaConfig
        models a metadata version before 3.5-IV1 (``isr_broker_epochs=False``)."""
        if not self.config.isr_broker_epochs:
            return -1
        return int(self.replica_manager.broker_epoch)

    def __repr__(self) -> str:
        return f"{self.name}({len(self.partition_states)} partitions)"

    # -- partitions -----------------------------------------------------------------------------
    def add_partitions(self, initial_fetch_states: Mapping[TopicPartition, InitialFetchState]
                       ) -> set[TopicPartition]:
        """Start (or keep) following partitions (``addPartitions``, §7.2).

        An existing state with the same current leader epoch is kept as is; a new or re-epoched
        partition gets its initial state (see :meth:`_initial_state`). Every added partition goes
        to the end of the order and leaves the failed set. Errors from asking the leader for a
        negative ``init_offset`` propagate, as in Kafka.
        """
        tps = [tp if type(tp) is TopicPartition else TopicPartition(*tp)
               for tp in initial_fetch_states]
        self.failed_partitions.remove_all(tps)
        states = self.partition_states
        state_value, update_and_move_to_end = states.state_value, states.update_and_move_to_end
        initial_state = self._initial_state
        for tp, ifs in zip(tps, initial_fetch_states.values(), strict=True):
            update_and_move_to_end(tp, initial_state(tp, ifs, state_value(tp)))
        if self.wakeup is not None and self.running:
            self.wakeup()  # partitionMapCond.signalAll(): a waiting thread looks again
        return set(tps)

    def _initial_state(self, tp: TopicPartition, ifs: InitialFetchState,
                       current: PartitionFetchState | None) -> PartitionFetchState:
        """``partitionFetchState``: keep a same-epoch state; ask the leader for a negative offset;
        with truncation-on-fetch, Fetching at ``init_offset`` if the log has an epoch (Truncating
        to the HW otherwise); without it — IBP 2.0–2.6, or the high watermark mode, where the
        replica manager passes the local HW as ``init_offset`` — Truncating."""
        if current is not None and current.current_leader_epoch == ifs.current_leader_epoch:
            return current
        if ifs.init_offset < 0:
            return self._fetch_offset_and_truncate(tp, ifs.topic_id, ifs.current_leader_epoch)
        if self.truncate_on_fetch:
            last_fetched_epoch = self._local.latest_epoch(tp)
            state = FETCHING if last_fetched_epoch is not None else TRUNCATING
            return PartitionFetchState(ifs.init_offset, None, ifs.current_leader_epoch, None,
                                       state, last_fetched_epoch, ifs.topic_id)
        return PartitionFetchState(ifs.init_offset, None, ifs.current_leader_epoch, None,
                                   TRUNCATING, None, ifs.topic_id)

    def remove_partitions(self, tps: Iterable[TopicPartition]
                          ) -> dict[TopicPartition, PartitionFetchState]:
        """Stop following ``tps``; returns the states they had (``removePartitions``)."""
        removed = {}
        states = self.partition_states
        unregister = self.fetcher_lag_stats.unregister
        for tp in tps:
            if type(tp) is not TopicPartition:
                tp = TopicPartition(*tp)
            state = states.state_value(tp)
            if state is not None:  # (remove is a no-op for a partition not followed here)
                states.remove(tp)
                removed[tp] = state
            unregister(tp)
        return removed

    def remove_all_partitions(self) -> dict[TopicPartition, PartitionFetchState]:
        """Stop following everything; returns the states (used when resizing the pool)."""
        return self.remove_partitions(list(self.partition_states))

    @property
    def partition_count(self) -> int:
        return len(self.partition_states)

    @property
    def partitions(self) -> set[TopicPartition]:
        return set(self.partition_states)

    def fetch_state(self, tp: TopicPartition) -> PartitionFetchState | None:
        return self.partition_states.state_value(TopicPartition(*tp))

    def shutdown(self) -> None:
        """Stop: the outstanding request's answer is dropped, metrics unregistered."""
        self.running = False
        self.abandon_request()
        self.fetcher_lag_stats.unregister()

    # -- the loop -------------------------------------------------------------------------------
    def do_work(self) -> bool:
        """One iteration of Kafka's ``doWork`` (§7.4): process the answer to the request with the
        leader if it has come; then, with no request outstanding, ``maybe_truncate()`` and
        ``maybe_fetch()``; then complete the leader-side delayed fetches whose HW moved here.

        Requests go out through the endpoint, whose answer may come at once (processed within
        this call) or later (the fetcher then waits: ``do_work`` does nothing until it comes, and
        :attr:`wakeup` is called when it does). Returns True if a fetch request was sent; False
        is where Kafka's thread waits ``replica.fetch.backoff.ms`` or for an answer.
        """
        self._process_answer()
        sent = False
        if self._in_flight is None and self.partition_states.has_truncating():
            self.maybe_truncate()  # (nothing to select otherwise: the common round skips it)
        if self._in_flight is None:
            sent = self.maybe_fetch()
        if self.partitions_with_new_high_watermark:
            self._complete_delayed_fetch_requests()
        return sent

    @property
    def awaiting_answer(self) -> bool:
        """A request is with the leader and its answer has not come yet."""
        f = self._in_flight
        return f is not None and f.answer is _NO_ANSWER

    def _send(self, flight: _InFlight) -> None:
        """Hand ``flight`` to the endpoint; an answer given during the call is processed now."""
        self._in_flight = flight
        self._sending = True
        try:
            if flight.fetch:
                self.leader.send_fetch(flight.request, flight)  # type: ignore[arg-type]
            else:
                self.leader.send_epoch_request(flight.request, flight)  # type: ignore[arg-type]
        except Exception as e:  # the transport itself failed
            flight(e)
        finally:
            self._sending = False
        if flight.answer is not _NO_ANSWER:  # answered during the call
            self._process_answer()

    def _process_answer(self) -> None:
        flight = self._in_flight
        if flight is None or flight.answer is _NO_ANSWER:
            return
        self._in_flight = None
        if flight.fetch:
            self.process_fetch_response(flight.request, flight.answer)  # type: ignore[arg-type]
        else:
            self.process_epoch_response(flight.request, flight.answer)  # type: ignore[arg-type]

    def abandon_request(self) -> None:
        """Forget the outstanding request (its answer, if it ever comes, is dropped) — as when
        the fetcher thread is shut down or its connection reset."""
        self._in_flight = None
        self._built = None

    def next_deadline_ms(self) -> int | None:
        """When a delayed partition next becomes due (the earliest ``delay_until_ms`` still in the
        future), so a driver whose ``do_work`` found nothing to do knows when to call again;
        None if no partition is delayed."""
        return self.partition_states.next_due(self.clock.milliseconds())

    def _complete_delayed_fetch_requests(self) -> None:
        if self.partitions_with_new_high_watermark:
            self.replica_manager.complete_delayed_fetch_requests(
                list(self.partitions_with_new_high_watermark))
            self.partitions_with_new_high_watermark.clear()

    # -- truncation -----------------------------------------------------------------------------
    def _truncating_partitions(self) -> tuple[
            dict[TopicPartition, OffsetForLeaderPartition],
            list[tuple[TopicPartition, PartitionFetchState]]]:
        """``fetchTruncatingPartitions``: Truncating partitions with a latest epoch (ask the
        leader) and, with their states, those without one (truncate to the high watermark)."""
        with_epochs: dict[TopicPartition, OffsetForLeaderPartition] = {}
        without: list[tuple[TopicPartition, PartitionFetchState]] = []
        items = self.partition_states.truncating_items(self.clock.milliseconds())
        if not self.uses_leader_epochs:
            return with_epochs, items  # no epoch is used: every one truncates to its HW
        latest_epoch = self._local.latest_epoch
        for item in items:
            tp = item[0]
            epoch = latest_epoch(tp)
            if epoch is not None:
                with_epochs[tp] = OffsetForLeaderPartition(tp, epoch,
                                                           item[1].current_leader_epoch)
            else:
                without.append(item)
        return with_epochs, without

    def maybe_truncate(self) -> None:
        """Truncate the partitions in Truncating state (§7.4): by leader epoch end offsets
        (one OffsetsForLeaderEpoch round) or, without an epoch, to the high watermark."""
        if not self.partition_states.has_truncating():
            return  # the common round: nothing to select
        with_epochs, without = self._truncating_partitions()
        if without:
            self._truncate_to_fetch_offsets(without, epochless=True)
        if with_epochs:
            request = OffsetsForLeaderEpochRequest(self.broker_id, tuple(with_epochs.values()))
            # a failed request errors every partition (retried after the backoff)
            self._send(_InFlight(self, False, request))

    def build_epoch_request(self) -> OffsetsForLeaderEpochRequest | None:
        """The OffsetsForLeaderEpoch request :meth:`maybe_truncate` would send (None if no
        Truncating partition has an epoch). Drivers also call :meth:`truncate_to_high_watermark`."""
        with_epochs, _ = self._truncating_partitions()
        if not with_epochs:
            return None
        return OffsetsForLeaderEpochRequest(self.broker_id, tuple(with_epochs.values()))

    def process_epoch_response(
        self, request: OffsetsForLeaderEpochRequest,
        answers: Mapping[TopicPartition, EpochEndOffset] | BaseException,
    ) -> None:
        """``truncateToEpochEndOffsets`` after the leader answered (or failed: every partition
        gets that error). Answers for partitions removed or re-epoched meanwhile are dropped."""
        requested = {p.tp: p for p in request.partitions}
        if isinstance(answers, BaseException):
            code = answers.code if isinstance(answers, KafkaError) else Errors.UNKNOWN_SERVER_ERROR
            answers = {tp: EpochEndOffset(code, NO_EPOCH, -1) for tp in requested}
        current: dict[TopicPartition, EpochEndOffset] = {}
        for tp, answer in answers.items():
            tp = TopicPartition(*tp)
            sent = requested.get(tp)
            state = self.partition_states.state_value(tp)
            if sent is None:
                log.warning("%s: leader answered for %s, which was not requested", self.name, tp)
                continue
            if state is not None and sent.current_leader_epoch == state.current_leader_epoch:
                current[tp] = answer
        truncated, errors = self._maybe_truncate_to_epoch_end_offsets(current, requested)
        self._delay_partitions(errors, self.config.backoff_ms)
        self._update_fetch_offset_and_maybe_mark_truncation_complete(truncated)

    def _truncate_on_fetch_response(self, diverging: Mapping[TopicPartition, EpochEndOffset]
                                    ) -> None:
        """Truncation driven by diverging-epoch fetch answers (§4.6, ``truncateOnFetchResponse``)."""
        truncated, errors = self._maybe_truncate_to_epoch_end_offsets(diverging, {})
        self._delay_partitions(errors, self.config.backoff_ms)
        self._update_fetch_offset_and_maybe_mark_truncation_complete(truncated)

    def truncate_to_high_watermark(self, tps: Iterable[TopicPartition] | None = None) -> None:
        """``truncateToHighWatermark``: truncate to the fetch offset, which for a partition in this
        state is the local HW it started from; the partition then fetches (§4.7). ``tps`` defaults
        to the Truncating partitions without an epoch."""
        if tps is None:
            self._truncate_to_fetch_offsets(self._truncating_partitions()[1], epochless=True)
            return
        state_value = self.partition_states.state_value
        self._truncate_to_fetch_offsets(
            [(tp, state) for tp in tps if (state := state_value(tp)) is not None])

    def _truncate_to_fetch_offsets(self, items: list[tuple[TopicPartition, PartitionFetchState]],
                                   epochless: bool = False) -> None:
        """:meth:`truncate_to_high_watermark` of ``(partition, its current state)`` pairs: each
        log truncated to the state's fetch offset (``doTruncate``: a failure marks the partition
        failed), the truncation listener told once of those truncated (in order), then their
        states updated as for any complete truncation. ``epochless``: the pairs are
        :meth:`_truncating_partitions`' partitions without a latest epoch (or epochs are not
        used): a truncation removes epochs and never adds one, so each log still has none and
        the last fetched epoch is set to None without asking the log again."""
        info = log.isEnabledFor(logging.INFO)
        following = self.partition_states.partition_set()  # (one failed below leaves it)
        truncate = self._truncate
        done: list[tuple[TopicPartition, int, bool]] = []
        for tp, state in items:
            if tp not in following:
                continue
            offset = state.fetch_offset
            if info:
                log.info("%s: truncating %s to its high watermark %d", self.name, tp, offset)
            try:
                truncate(tp, offset)
            except Exception:
                log.exception("%s: failed to truncate %s at %d", self.name, tp, offset)
                self._mark_partition_failed(tp)
                continue
            done.append((tp, offset, True))
        if not done:
            return
        if self.truncation_listener is not None:
            self.truncation_listener([item[0] for item in done])
        self._update_fetch_offset_and_maybe_mark_truncation_complete(done, epochless)

    def _maybe_truncate_to_epoch_end_offsets(
        self, fetched: Mapping[TopicPartition, EpochEndOffset],
        requested: Mapping[TopicPartition, OffsetForLeaderPartition],
    ) -> tuple[list[tuple[TopicPartition, int, bool]], list[TopicPartition]]:
        """Per answer: NONE → truncate to the §4.5 point; FENCED → ``onPartitionFenced``;
        any other error → retry after the backoff. Returns the truncations made (partition,
        point, complete) and the partitions to back off."""
        truncated: list[tuple[TopicPartition, int, bool]] = []
        errors: list[TopicPartition] = []
        for tp, answer in fetched.items():
            if tp not in self.partition_states:
                continue
            if answer.error_code == Errors.NONE:
                ts = self._offset_truncation_state(tp, answer)
                log.info("%s: truncating %s to %s for leader answer %s", self.name, tp, ts, answer)
                if self._do_truncate(tp, ts):
                    truncated.append((tp, ts.offset, ts.complete))
            elif answer.error_code == Errors.FENCED_LEADER_EPOCH:
                sent = requested.get(tp)
                if self._on_partition_fenced(tp, sent.current_leader_epoch if sent else None):
                    errors.append(tp)
            else:
                log.info("%s: retrying epoch request for %s after %s", self.name, tp,
                         _error_name(answer.error_code))
                errors.append(tp)
        return truncated, errors

    def _offset_truncation_state(self, tp: TopicPartition, answer: EpochEndOffset
                                 ) -> OffsetTruncationState:
        """``getOffsetTruncationState`` (§4.5), via :mod:`replica_core.fetcher.truncation`."""
        state = self.partition_states.state_value(tp)
        assert state is not None
        return offset_truncation_state(
            answer.leader_epoch, answer.end_offset, self._local.log_end_offset(tp),
            state.fetch_offset, lambda epoch: self._local.end_offset_for_epoch(tp, epoch))

    def _do_truncate(self, tp: TopicPartition, ts: OffsetTruncationState) -> bool:
        """Truncate the local log; a failure marks the partition failed (``doTruncate``)."""
        try:
            self._truncate(tp, ts.offset)
            if self.truncation_listener is not None:
                self.truncation_listener((tp,))
            return True
        except Exception:
            log.exception("%s: failed to truncate %s at %d", self.name, tp, ts.offset)
            self._mark_partition_failed(tp)
            return False

    def _truncate(self, tp: TopicPartition, offset: int) -> None:
        """``ReplicaFetcherThread.truncate`` (warns when cutting below the local HW)."""
        hw = self._local.truncate(tp, offset)
        if offset < hw:
            log.warning("%s: truncated %s to %d, below its high watermark %d",
                        self.name, tp, offset, hw)

    def _update_fetch_offset_and_maybe_mark_truncation_complete(
            self, truncated: Iterable[tuple[TopicPartition, int, bool]],
            epochless: bool = False) -> None:
        """After truncating (``(partition, truncation point, complete)`` each): fetch offset :=
        truncation point, last fetched epoch := the log's latest epoch (None for ``epochless``
        logs, known to have none), Fetching if truncation-on-fetch or truncation complete, else
        stay Truncating for another epoch round (KIP-279).

        Kafka rebuilds its map here with ``set`` (which regroups partitions by topic); the states
        are updated in place instead, keeping each partition's position.
        """
        states = self.partition_states
        truncate_on_fetch = self.truncate_on_fetch
        latest_epoch = self._local.latest_epoch if self.uses_leader_epochs and not epochless \
            else None
        for tp, offset, complete in truncated:
            current = states.state_value(tp)
            if current is None:
                continue
            # current.updated(fetch_offset=, state=, last_fetched_epoch=), field by field
            states.update(tp, PartitionFetchState(
                offset, current.lag, current.current_leader_epoch, current.delay_until_ms,
                FETCHING if (truncate_on_fetch or complete) else TRUNCATING,
                latest_epoch(tp) if latest_epoch is not None else None, current.topic_id))

    def _on_partition_fenced(self, tp: TopicPartition, request_epoch: int | None) -> bool:
        """``onPartitionFenced``: if the request carried this partition's current leader epoch the
        follower itself is behind → mark failed until a new LeaderAndIsr (False); if its epoch has
        moved on since, retry later (True)."""
        state = self.partition_states.state_value(tp)
        if state is None:
            return False
        if request_epoch is not None and request_epoch != NO_EPOCH \
                and request_epoch == state.current_leader_epoch:
            log.info("%s: %s is fenced at epoch %d; awaiting new leader state",
                     self.name, tp, state.current_leader_epoch)
            self._mark_partition_failed(tp)
            return False
        return True

    def _mark_partition_failed(self, tp: TopicPartition) -> None:
        self.failed_partitions.add(tp)
        self.remove_partitions([tp])
        log.warning("%s: partition %s marked as failed", self.name, tp)

    def _delay_partitions(self, tps: Iterable[TopicPartition], delay_ms: int) -> None:
        """``delayPartitions``: back off each partition not already delayed, moving it last
        (:meth:`PartitionStates.delay`: a failed request delays every partition of the
        fetcher, all until the same time)."""
        self.partition_states.delay(tps, self.clock.milliseconds(), delay_ms)

    # -- out of range (§4.8) --------------------------------------------------------------------
    def _fetch_offset_and_truncate(self, tp: TopicPartition, topic_id: str | None,
                                   current_leader_epoch: int) -> PartitionFetchState:
        """``fetchOffsetAndTruncate``: leader LEO below ours → truncate to it (unclean election;
        any remaining divergence is not repaired here); else start at max(leader LSO, our LEO),
        truncating fully first if the leader's log starts past our end."""
        replica_end = self._local.log_end_offset(tp)
        leader_end = self.leader.fetch_latest_offset(tp, current_leader_epoch).offset
        if leader_end < replica_end:
            log.warning("%s: resetting %s from %d to the leader's end offset %d",
                        self.name, tp, replica_end, leader_end)
            self._truncate(tp, leader_end)
            if self.truncation_listener is not None:
                self.truncation_listener((tp,))
            self.fetcher_lag_stats.get_and_maybe_put(tp).lag = 0
            return PartitionFetchState(leader_end, 0, current_leader_epoch, None, FETCHING,
                                       self._latest_epoch_if_used(tp), topic_id)
        leader_start = self.leader.fetch_earliest_offset(tp, current_leader_epoch).offset
        offset_to_fetch = max(leader_start, replica_end)
        if leader_start > replica_end:
            log.warning("%s: truncating %s fully and starting at the leader's start offset %d",
                        self.name, tp, leader_start)
            self._local.truncate_fully_and_start_at(tp, leader_start)
            if self.truncation_listener is not None:
                self.truncation_listener((tp,))
        initial_lag = leader_end - offset_to_fetch
        self.fetcher_lag_stats.get_and_maybe_put(tp).lag = initial_lag
        return PartitionFetchState(offset_to_fetch, initial_lag, current_leader_epoch, None,
                                   FETCHING, self._latest_epoch_if_used(tp), topic_id)

    def _latest_epoch_if_used(self, tp: TopicPartition) -> int | None:
        return self._local.latest_epoch(tp) if self.uses_leader_epochs else None

    def _handle_out_of_range(self, tp: TopicPartition, state: PartitionFetchState,
                             request_epoch: int | None) -> bool:
        """``handleOutOfRangeError``: True when handled (or fenced for good), False to back off."""
        try:
            new_state = self._fetch_offset_and_truncate(tp, state.topic_id,
                                                        state.current_leader_epoch)
        except FencedLeaderEpochError:
            return self._on_partition_fenced(tp, request_epoch)
        except (UnknownTopicOrPartitionError, UnknownLeaderEpochError,
                NotLeaderOrFollowerError) as e:
            log.info("%s: could not fetch offset for %s: %s", self.name, tp, e)
            return False
        except Exception:
            log.exception("%s: error getting offset for %s", self.name, tp)
            return False
        self.partition_states.update_and_move_to_end(tp, new_state)
        return True

    # -- fetching -------------------------------------------------------------------------------
    def build_fetch(self) -> tuple[FetchRequest | None, list[TopicPartition]]:
        """The fetch request for the ready partitions (:meth:`fetch_partitions`) and the
        partitions whose local log could not be read. None when there is nothing to send.

        The request is built in the fetch session with the leader (KIP-227): a full request
        first and after any session error, then incremental ones carrying only the partitions
        added or changed since the last request, and the partitions to forget. Building moves
        the session on, so every built request must be sent (and its answer processed).

        An incremental request is built from the partitions whose entry may have changed — the
        states journal's changes and ended delays (:class:`PartitionStates`), and partitions
        whose log start moved (:meth:`_process_partition_answers`) — so a round costs what changed,
        not every partition (``incremental_build``; the request is the same either way, which
        the tests check against the full pass)."""
        states = self.partition_states
        now = self.clock.milliseconds()
        changed = states.take_changes()
        due = states.pop_due(now)
        handler = self.session_handler
        cfg = self.config
        key = (self.truncate_on_fetch, cfg.fetch_max_bytes)
        if handler.next_metadata.is_full or not self.incremental_build \
                or type(self.quota) is not UnboundedReplicaQuota or key != self._entry_key:
            self._entry_key = key
            parts, errors = self.fetch_partitions()
            builder = handler.new_builder()
            builder.add_entries(parts)
            data = builder.build()
            to_send, to_forget = data.to_send, data.to_forget
        else:
            to_send, to_forget, errors = self._build_changes(changed, due, now)
        if not handler.session_partitions and not to_forget:
            self._built = None
            return None, errors
        metadata = handler.next_metadata
        rm = self.replica_manager
        # broker_id and broker_epoch (KIP-903), read in line; the fields in order
        request = FetchRequest(int(rm.broker_id), cfg.wait_max_ms, cfg.min_bytes,
                               cfg.response_max_bytes, to_send,
                               int(rm.broker_epoch) if cfg.isr_broker_epochs else -1,
                               ISOLATION_READ_UNCOMMITTED, metadata.session_id, metadata.epoch,
                               to_forget)
        self._built = request
        return request, errors

    def _build_changes(self, changed: list[TopicPartition], due: list[TopicPartition], now: int
                       ) -> tuple[tuple[FetchPartition, ...], tuple[TopicPartition, ...],
                                  list[TopicPartition]]:
        """The incremental request from the changed partitions alone: each one's entry as
        :meth:`fetch_partitions` would make it, in fair order, or its absence (not followed, not
        ready, or its log is gone), handed to :meth:`FetchSessionHandler.apply_changes`.
        Returns the partitions to send and to forget, and those whose log could not be read
        (delayed by ``replica.fetch.backoff.ms``)."""
        if due:
            changed = list(dict.fromkeys(changed + due))
        elif not changed:
            return (), (), []  # the session holds every entry as it is: all implied
        elif len(changed) == 1:
            # the common round: one partition changed (it appended); ready, its entry is the
            # whole change, else the general pass below drops it
            tp = changed[0]
            st = self.partition_states.state_value(tp)
            if st is not None and st.state is FETCHING and (
                    st.delay_until_ms is None or st.delay_until_ms <= now):
                entry = self._fetch_entry(tp, st)
                if entry is not None:
                    return (*self.session_handler.apply_change(entry), [])
        state_value = self.partition_states.state_value
        ready: list[tuple[TopicPartition, PartitionFetchState]] = []
        dropped: list[TopicPartition] = []
        for tp in changed:
            st = state_value(tp)
            if st is None:
                dropped.append(tp)
                continue
            d = st.delay_until_ms
            if st.state is not FETCHING or (d is not None and d > now):
                dropped.append(tp)
            else:
                ready.append((tp, st))
        if len(ready) > 1:
            order_key = self.partition_states.order_key
            ready.sort(key=lambda item: order_key(item[0]))
        entries: list[FetchPartition] = []
        errors: list[TopicPartition] = []
        fetch_entry = self._fetch_entry
        for tp, st in ready:
            entry = fetch_entry(tp, st)
            if entry is None:
                errors.append(tp)
                dropped.append(tp)
            else:
                entries.append(entry)
        if errors:
            self._delay_partitions(errors, self.config.backoff_ms)
        to_send, to_forget = self.session_handler.apply_changes(entries, dropped)
        return to_send, to_forget, errors

    def _fetch_entry(self, tp: TopicPartition, st: PartitionFetchState) -> FetchPartition | None:
        """``tp``'s request entry for state ``st``; None when its local log cannot be read."""
        try:
            lg = self.replica_manager.local_log(tp)
            if lg is None:
                raise NotLeaderOrFollowerError(f"no local log for {tp}")
            log_start = lg.log_start_offset
        except KafkaError:
            return None
        lfe = st.last_fetched_epoch
        return FetchPartition(tp, st.fetch_offset, self.config.fetch_max_bytes, log_start,
                              st.current_leader_epoch,
                              lfe if self.truncate_on_fetch and lfe is not None else NO_EPOCH)

    @property
    def wanted(self) -> list[FetchPartition]:
        """The entries of the partitions ready for fetch now, in fair order (§7.3), as the next
        full request would list them (no side effects)."""
        now = self.clock.milliseconds()
        out = []
        for tp, st in self.partition_states.ready_items(now):
            entry = self._fetch_entry(tp, st)
            if entry is not None:
                out.append(entry)
        return out

    def fetch_partitions(self) -> tuple[list[FetchPartition], list[TopicPartition]]:
        """The ready partitions' fetch entries, in fair order (§7.3, §7.5), and the partitions
        whose local log could not be read (already delayed by ``replica.fetch.backoff.ms``, as
        ``maybeFetch`` does right after ``buildFetch``). Throttled out-of-sync partitions are
        left out while the quota is exceeded. One pass over every partition: what a full
        request lists (and the reference the incremental build is tested against)."""
        now = self.clock.milliseconds()
        quota = self.quota
        throttling = type(quota) is not UnboundedReplicaQuota
        parts: list[FetchPartition] = []
        errors: list[TopicPartition] = []
        fetch_entry = self._fetch_entry
        for tp, st in self.partition_states.ready_items(now):
            # Only out-of-sync replicas of throttled partitions are throttled, and only while the
            # quota is exceeded, to avoid ISR thrashing (shouldFollowerThrottle).
            if throttling and not (st.lag is not None and st.lag <= 0) \
                    and quota.is_throttled(tp) and quota.is_quota_exceeded():
                continue
            entry = fetch_entry(tp, st)
            if entry is None:
                errors.append(tp)
            else:
                parts.append(entry)
        if errors:
            self._delay_partitions(errors, self.config.backoff_ms)
        return parts, errors

    def maybe_fetch(self) -> bool:
        """Build, send and process one fetch (``maybeFetch``); False if there was nothing to send."""
        request, _ = self.build_fetch()
        if request is None:
            return False
        self._send(_InFlight(self, True, request))
        return True

    def process_fetch_response(self, request: FetchRequest,
                               response: FetchResponse | BaseException) -> None:
        """``processFetchRequest`` (§7.6).

        A failed request (an exception, or a top-level error code) delays every partition. Per
        partition, an answer is used only if the partition is still here, still Fetching and not
        delayed, and its fetch offset is the one requested; otherwise it is stale and ignored.
        Diverging-epoch answers are truncated on after the loop and their records and HW ignored
        (KAFKA-14704); errored partitions are then delayed by ``replica.fetch.backoff.ms``.
        """
        self.fetcher_stats.request_rate.count += 1  # Meter.mark(), in line
        in_session = self._built is request
        if in_session:
            self._built = None
        errors: Iterable[TopicPartition] | None = None
        diverging: dict[TopicPartition, EpochEndOffset] | None = None
        if isinstance(response, BaseException):
            log.warning("%s: error in response for fetch request: %r", self.name, response)
            if in_session:
                self.session_handler.handle_error(response)
            errors = list(self.partition_states)
        elif in_session and not self.session_handler.handle_fetch_response(response):
            # a session error, or a response that does not match the session: nothing is
            # processed, and the next request is a full one (RemoteLeaderEndPoint.fetch)
            log.info("%s: fetch session problem (%s); next fetch is full", self.name,
                     _error_name(response.error_code))
        elif response.error_code != _NONE:
            log.warning("%s: error in response for fetch request: %r", self.name,
                        _error_name(response.error_code))
            errors = list(self.partition_states)
        else:
            asked = self.session_handler.session_partitions if in_session else \
                {p.tp: p for p in request.partitions}
            errors, diverging = self._process_partition_answers(asked, response.partitions)
        if diverging:
            self._truncate_on_fetch_response(diverging)
        if errors:
            self._delay_partitions(errors, self.config.backoff_ms)

    def _process_partition_answers(self, asked: Mapping[TopicPartition, FetchPartition],
                                   answers: tuple[FetchPartitionResponse, ...]
                                   ) -> tuple[dict[TopicPartition, None] | None,
                                              dict[TopicPartition, EpochEndOffset] | None]:
        """The per-partition half of ``processFetchRequest``: one pass over the answers, the
        common case (no error, no divergence) handled inline — ``processPartitionData``
        included — the rest by :meth:`_process_partition_error`. Returns the partitions to
        back off and the diverging-epoch answers to truncate on (None when there are none).

        ``ReplicaFetcherThread.processPartitionData`` (§7.7): the fetch offset must be the local
        LEO (else IllegalStateError: the partition is failed); the records are appended as
        follower; HW := min(leader HW, own LEO) (it may go down); the leader's log start offset
        is adopted (forward only; the next request carries it); throttled bytes are accounted.
        Then the partition's lag is the leader's HW minus the next fetch offset, and a
        partition that appended moves on to the offset after the appended batches (and their
        epoch) and to the end of the fair order."""
        errors: dict[TopicPartition, None] | None = None
        diverging: dict[TopicPartition, EpochEndOffset] | None = None
        now = self.clock.milliseconds()
        states = self.partition_states
        following = states.partition_set()  # a live view: a partition failed below leaves it
        state_value = states.state_value
        partition_of = self.replica_manager.partition
        gauges = self.fetcher_lag_stats.stats
        quota = self.quota
        throttling = type(quota) is not UnboundedReplicaQuota
        for pd in answers:
            tp = pd.tp
            fp = asked.get(tp)
            current = state_value(tp)
            if current is None or fp is None:
                continue
            fetch_offset = current.fetch_offset
            if fp.fetch_offset != fetch_offset or current.state is not FETCHING or (
                    current.delay_until_ms is not None and current.delay_until_ms > now):
                continue
            code = pd.error_code
            if code != _NONE:
                if self._process_partition_error(tp, current, fp, code):
                    if errors is None:
                        errors = {}
                    errors[tp] = None
                continue
            de = pd.diverging_epoch
            if de is not None and self.truncate_on_fetch and de.leader_epoch >= 0:
                if diverging is None:
                    diverging = {}
                diverging[tp] = EpochEndOffset(Errors.NONE, de.leader_epoch, de.end_offset)
                continue
            try:
                # getPartitionOrException and its localLogOrException
                partition = partition_of(tp)
                lg = partition.log if partition is not None else None
                if lg is None:
                    raise NotLeaderOrFollowerError(f"no local log for {tp}")
                leo = lg.log_end_offset
                if fetch_offset != leo:
                    raise IllegalStateError(f"offset mismatch for {tp}: fetched offset = "
                                            f"{fetch_offset}, log end offset = {leo}")
                records = pd.records
                size = records.nbytes if records.__class__ is memoryview else len(records)
                info = partition.append_records_to_follower(records) if size else None
                # Both updates below are no-ops when the values already match; skip the calls.
                leader_hw = pd.high_watermark
                before = lg.high_watermark
                if leader_hw != before \
                        and partition.update_follower_high_watermark(leader_hw) != before:
                    self.partitions_with_new_high_watermark.append(tp)
                if pd.log_start_offset > lg.log_start_offset:
                    lg.maybe_increment_log_start_offset(pd.log_start_offset)
                    states.mark_changed(tp)  # the next request carries the new start
                if size and throttling and quota.is_throttled(tp):
                    quota.record(size)
                appended = info is not None and info.valid_bytes > 0
                # the next fetch offset: past what was appended, else unchanged
                next_offset = info.last_offset + 1 if appended else fetch_offset  # type: ignore[union-attr]
                lag = leader_hw - next_offset
                if lag < 0:
                    lag = 0
                gauge = gauges.get(tp)
                if gauge is None:
                    gauge = self.fetcher_lag_stats.get_and_maybe_put(tp)
                gauge.lag = lag
                if appended:
                    if tp in following:
                        lle = info.last_leader_epoch
                        states.update_fetched(tp, PartitionFetchState(
                            next_offset, lag, current.current_leader_epoch, None, FETCHING,
                            lle if lle is not None and lle >= 0 else current.last_fetched_epoch,
                            current.topic_id))
                        self.fetcher_stats.byte_rate.count += info.valid_bytes  # Meter.mark
                    continue
                # nothing appended: the next fetch offset stays; only the lag may change.
                # An idle partition whose lag is known keeps its state object as is.
                if current.lag is None and tp in following:
                    # only the lag becomes known; the request entry is the same, so the next
                    # incremental build need not look at it
                    states.update_lag_and_move_to_end(tp, PartitionFetchState(
                        fetch_offset, lag, current.current_leader_epoch, None, FETCHING,
                        current.last_fetched_epoch, current.topic_id))
            except (CorruptRecordError, InvalidRecordError):
                # Possibly transient (a torn read on the leader): retry after the backoff.
                log.exception("%s: invalid records for %s at %d", self.name, tp, fetch_offset)
                if errors is None:
                    errors = {}
                errors[tp] = None
            except KafkaStorageError:
                log.exception("%s: storage error for %s", self.name, tp)
                self._mark_partition_failed(tp)
            except Exception:
                log.exception("%s: unexpected error processing %s at %d", self.name, tp,
                              fetch_offset)
                self._mark_partition_failed(tp)
        return errors, diverging

    def _process_partition_error(self, tp: TopicPartition, current: PartitionFetchState,
                                 fp: FetchPartition, code: int) -> bool:
        """A partition answered with an error code (§7.6); True when it is to back off."""
        request_epoch = fp.current_leader_epoch if fp.current_leader_epoch != NO_EPOCH else None
        if code == Errors.OFFSET_OUT_OF_RANGE:
            return not self._handle_out_of_range(tp, current, request_epoch)
        if code == Errors.FENCED_LEADER_EPOCH:
            return self._on_partition_fenced(tp, request_epoch)
        # UNKNOWN_LEADER_EPOCH (the leader has not caught up with the epoch yet),
        # NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID,
        # INCONSISTENT_TOPIC_ID, KAFKA_STORAGE_ERROR and anything else: back off and retry.
        if log.isEnabledFor(logging.DEBUG):  # (the name is looked up only to be logged)
            log.debug("%s: %s for %s from broker %d", self.name, _error_name(code), tp,
                      self.source_broker)
        return True

    # -- metrics --------------------------------------------------------------------------------
    def metrics(self) -> dict[str, Any]:
        """``RequestsPerSec``/``BytesPerSec`` counts and per-partition ``ConsumerLag``."""
        out: dict[str, Any] = self.fetcher_stats.metrics()
        out["ConsumerLag"] = {tp: m.lag for tp, m in self.fetcher_lag_stats.stats.items()}
        return out
