"""A simulated broker: real storage, ReplicaManager and fetchers, driven by the event loop.

Each :class:`SimBroker` owns a :class:`~replica_core.storage.log_manager.LogManager` over its
own medium (memory modelling the page cache, or a temporary directory), a
:class:`~replica_core.replication.ReplicaManager` and a fetcher manager whose fetchers talk to
leaders over the simulator's :class:`~replica_core.sim.network.Network`:

* **Fetching is the product's.** Each follower fetcher is the real
  :class:`~replica_core.fetcher.fetcher.ReplicaFetcher` (fetch sessions, truncation, backoff)
  run by a :class:`FetcherThread` that only schedules its ``do_work``; its requests cross the
  simulated network to the leader's real ``ReplicaManager.fetch_messages`` (fetch sessions,
  DelayedFetch long polling up to ``replica.fetch.wait.max.ms``), whose answer — at once or when
  the purgatory completes it — travels back. The broker keeps no fetch logic of its own.
* **Time-driven work** runs from ``ReplicaManager.tick`` at ``next_tick_due_ms``.
* **Controller traffic** (registration, heartbeats, AlterPartition) goes over the network to node
  :data:`CONTROLLER_NODE`.

Faults: :meth:`SimBroker.crash` (``"process"``: every in-memory structure is dropped, the page
cache survives; ``"power"``: the medium keeps only flushed bytes), :meth:`SimBroker.restart`
(log recovery, then registration with a new broker epoch and LeaderAndIsr from the controller),
and :meth:`SimBroker.slow` (fetch responses and served requests take ``factor`` times longer).

Registration is retried as Kafka's ``BrokerLifecycleManager`` does: each attempt waits at most
``min(controller.socket.timeout.ms, broker.session.timeout.ms / 2)`` for its answer (the
lifecycle channel's retry timeout, KAFKA-14392), then the next goes out after an exponential
backoff (100 ms doubling up to ``broker.session.timeout.ms``, ±2 % jitter). Controller requests
(LeaderAndIsr, UpdateMetadata) carry the broker epoch they were addressed to; the
ReplicaManager refuses them before registration and when stale (KIP-380) unless the cluster
models pre-KIP-380 brokers (``detect_bounces=False``).
"""
from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from replica_core._slot_init import slot_init
from replica_core.errors import Errors, RequestTimedOutError
from replica_core.fetcher.endpoint import EpochAndOffset
from replica_core.fetcher.fetcher import ReplicaFetcher
from replica_core.fetcher.manager import ReplicaFetcherManager
from replica_core.replication import ReplicaManager
from replica_core.replication.messages import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    AlterPartitionRequest,
    AlterPartitionResult,
    FetchRequest,
    FetchResponse,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    ListOffsetsPartition,
    OffsetsForLeaderEpochRequest,
    ProducePartitionResponse,
    TopicPartition,
)
from replica_core.sim.network import RequestTimeout
from replica_core.storage.log_manager import LogManager
from replica_core.storage.medium import FileMedium, MemoryMedium, TornFile, TornWrite

if TYPE_CHECKING:
    from replica_core.sim.cluster import Cluster

CONTROLLER_NODE = -1
"""Network node id of the controller."""
REGISTRATION_BACKOFF_INITIAL_MS = 100
"""BrokerLifecycleManager's resend backoff: first delay after a failed registration..."""
REGISTRATION_BACKOFF_MULTIPLIER = 2
"""... doubled after each further failure, up to ``broker.session.timeout.ms`` ..."""
REGISTRATION_BACKOFF_JITTER = 0.02
"""... with this much random jitter either way (``ExponentialBackoff(100, 2, session, 0.02)``)."""
LIFECYCLE_STREAM = 0x6C696665  # spawn-key tag of the registration backoff jitter generators


def registration_backoff_ms(failures: int, max_ms: int, rng: np.random.Generator) -> int:
    """Kafka's ``ExponentialBackoff.backoff(failures)`` for the broker lifecycle: the delay
    before the next registration attempt after ``failures`` failed ones (0 = the first)."""
    initial = min(max_ms, REGISTRATION_BACKOFF_INITIAL_MS)
    if max_ms <= initial:
        return initial
    exp_max = np.log(max_ms / max(initial, 1)) / np.log(REGISTRATION_BACKOFF_MULTIPLIER)
    term = initial * REGISTRATION_BACKOFF_MULTIPLIER ** min(float(failures), float(exp_max))
    factor = rng.uniform(1 - REGISTRATION_BACKOFF_JITTER, 1 + REGISTRATION_BACKOFF_JITTER)
    return min(int(factor * term), max_ms)


# ---- messages on the simulated wire ------------------------------------------------------------
@slot_init
@dataclass(frozen=True, slots=True)
class ProduceRequest:
    tp: TopicPartition
    records: bytes
    acks: int
    timeout_ms: int


@slot_init
@dataclass(frozen=True, slots=True)
class ProduceResponse:
    tp: TopicPartition
    error_code: Errors
    base_offset: int = -1
    isr_size: int = 0
    """Simulator-only: the leader's maximal ISR size when the response left (for loss causes)."""


@dataclass(frozen=True, slots=True)
class RegisterBroker:
    broker_id: int
    previous_broker_epoch: int = -1
    """KIP-966 ``PreviousBrokerEpoch``: the epoch in the clean-shutdown markers at startup (−1
    after an unclean shutdown); a running process registering again sends its current one."""
    rack: str | None = None
    """``broker.rack`` (None: not set)."""


@dataclass(frozen=True, slots=True)
class RegisterResponse:
    broker_epoch: int


@slot_init
@dataclass(frozen=True, slots=True)
class Heartbeat:
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class HeartbeatResponse:
    fenced: bool


@dataclass(frozen=True, slots=True)
class MetadataUpdate:
    """Broker liveness and epochs from the controller (UpdateMetadata): ISR eligibility and the
    registered broker epochs used against stale fetches (KIP-841, KIP-903). ``broker_epoch``
    is the epoch of the broker it was addressed to (KIP-380)."""

    broker_epochs: tuple[tuple[int, int], ...]
    alive: tuple[int, ...]
    """The ISR-eligible brokers: alive (unfenced) and not in controlled shutdown (KIP-841)."""
    broker_epoch: int = -1


@dataclass(frozen=True, slots=True)
class ConsumerFetch:
    """A consumer's fetch (read up to the HW), answered at once with a FetchResponse."""

    request: FetchRequest


@slot_init
@dataclass(frozen=True, slots=True)
class Disconnected:
    """The answer of a crashed process: the connection was refused (no timeout to wait for)."""

    node: int


def is_failure(response: Any) -> bool:
    """A transport-level failure (timeout, lost message, refused connection)."""
    return isinstance(response, (RequestTimeout, Disconnected))


# ---- follower side: the product's fetchers, driven like Kafka's fetcher threads ----------------
class FetcherThread:
    """Runs one :class:`ReplicaFetcher`'s ``do_work`` on the event loop, as Kafka's fetcher
    thread loops on ``doWork``: again at once after a round trip, after
    ``replica.fetch.backoff.ms`` when there was nothing to send (or sooner when partitions are
    added), and when an answer arrives (later by a slowed broker's processing delay). It
    carries time only; every fetch decision is the fetcher's."""

    def __init__(self, broker: SimBroker, fetcher: ReplicaFetcher) -> None:
        self.broker = broker
        self.fetcher = fetcher
        self.incarnation = broker.incarnation
        self._timer: Any = None
        self._timer_at = -1
        self.arrived: FetchResponse | None = None
        fetcher.wakeup = self._on_wakeup
        fetcher.truncation_listener = self._truncated

    def _live(self) -> bool:
        b = self.broker
        return self.fetcher.running and b.alive and self.incarnation == b.incarnation

    def poke(self, at_ms: int | None = None) -> None:
        """Run ``do_work`` at ``at_ms`` (default now) unless a run is due earlier."""
        if not self._live():
            return
        loop = self.broker.loop
        now = loop.clock.now_ms
        at = now if at_ms is None or at_ms < now else at_ms  # max(at_ms, now)
        if self._timer is not None:
            if self._timer_at <= at:
                return
            self._timer.cancel()
        self._timer_at = at
        self._timer = loop.call_at(at, self._run)

    def _on_wakeup(self) -> None:
        broker = self.broker
        if broker.slow_factors["fetch"] > 1.0:
            self.poke(broker.loop.now + broker.processing_delay_ms("fetch"))
        else:
            self.poke()  # now (no processing delay)

    def _truncated(self, tps: Sequence[TopicPartition]) -> None:
        self.broker.cluster.checker.truncated(self.broker, tps)

    def _run(self) -> None:
        self._timer = None
        if not self._live():
            return
        fetcher = self.fetcher
        arrived, self.arrived = self.arrived, None
        leos: dict[TopicPartition, int] = {}
        if arrived is not None:
            for p in arrived.partitions:
                if p.error_code == _OFFSET_OUT_OF_RANGE:  # may truncate
                    leos[p.tp] = _leo(fetcher.replica_manager, p.tp)
            if leos:
                self.broker.cluster.follower_out_of_range += len(leos)
        fetcher.do_work()
        broker = self.broker
        if arrived is not None and broker.rm is not None:
            broker.cluster.checker.follower_fetched(broker, arrived, leos)
        if fetcher.awaiting_answer:
            return  # the answer's arrival wakes us
        # Nothing outstanding: Kafka's thread waits replica.fetch.backoff.ms for partitions
        # to become ready (or to be added, which wakes it) — after any time it spent blocked
        # in a ListOffsets that sent nothing after it.
        blocked = 0
        endpoint = fetcher.leader
        if isinstance(endpoint, SimLeaderEndPoint):
            blocked, endpoint.blocked_ms = endpoint.blocked_ms, 0
        self.poke(broker.loop.clock.now_ms + blocked + fetcher.config.backoff_ms)


class SimFetcherManager(ReplicaFetcherManager):
    """The product's fetcher manager whose fetchers each get a :class:`FetcherThread`."""

    def __init__(self, broker: SimBroker, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.broker = broker

    def add_fetcher_for_partitions(self, partitions: Any) -> None:
        """As Kafka's makeFollowers: no fetcher for a partition without a live leader (−1)."""
        live = {tp: s for tp, s in partitions.items() if s.leader >= 0}
        if live:
            super().add_fetcher_for_partitions(live)

    def create_fetcher(self, fetcher_id: int, source_broker: int) -> ReplicaFetcher:
        fetcher = super().create_fetcher(fetcher_id, source_broker)
        thread = FetcherThread(self.broker, fetcher)
        endpoint = fetcher.leader
        if isinstance(endpoint, SimLeaderEndPoint):
            endpoint.thread = thread
        thread.poke()
        return fetcher


class SimLeaderEndPoint:
    """A leader across the simulated network (Kafka's ``RemoteLeaderEndPoint`` transport).

    Fetch and OffsetsForLeaderEpoch travel as messages to the leader broker and back (a lost,
    timed-out or refused request is answered with the failure, after
    ``replica.socket.timeout.ms`` for a timeout). ListOffsets, which Kafka's fetcher thread asks
    synchronously in the middle of processing a response (blocking until the answer), is
    answered from the leader's state at the call when it is up and reachable, and fails like a
    timed-out request otherwise; either way the time the thread would have been blocked — the
    link's round trip, or ``replica.socket.timeout.ms`` for a leader it cannot reach — is
    charged to the thread: its next request leaves that much later (:attr:`blocked_ms`).

    The carrier needs little of the follower ``broker``: its ``broker_id`` (its network node),
    ``network``, ``loop``, ``incarnation`` / ``alive`` (an answer reaching a process that crashed
    or restarted since the send is dropped) and ``fsync_wait_ms()`` (its disk's pending fsync
    time, which holds the next request back). The two look-ups that need the whole simulated
    cluster are methods, :meth:`socket_timeout_ms` and :meth:`leader_replica_manager`, so a
    driver without a :class:`SimBroker` (the fetcher tests' simulated transport) reuses the
    carrier by overriding just those.
    """

    def __init__(self, broker: SimBroker, leader_id: int) -> None:
        self.broker = broker
        self.leader_id = leader_id
        self.thread: FetcherThread | None = None
        self.blocked_ms = 0
        """Time the fetcher thread spent blocked in ListOffsets since it last sent."""

    def send_fetch(self, request: FetchRequest, on_answer: Callable[[Any], None]) -> None:
        size = 64 + 40 * len(request.partitions) + 16 * len(request.forgotten)
        self._send(request, size, on_answer, "fetch")

    def send_epoch_request(self, request: OffsetsForLeaderEpochRequest,
                           on_answer: Callable[[Any], None]) -> None:
        self._send(request, 32 + 24 * len(request.partitions), on_answer, "epoch request")

    def _send(self, request: Any, size: int, on_answer: Callable[[Any], None], what: str) -> None:
        """Carry ``request`` to the leader; its answer (or the failure, as a timed-out request)
        goes to ``on_answer`` unless this broker process is gone by then."""
        broker = self.broker
        inc = broker.incarnation
        deliver = _LeaderAnswer(self, inc, on_answer, what)
        timeout = self.socket_timeout_ms()
        blocked, self.blocked_ms = self.blocked_ms, 0
        # the fetcher thread sends once its blocking ListOffsets returned and the fsyncs of
        # its last appends are done
        wait = blocked + broker.fsync_wait_ms()
        if wait > 0:
            broker.loop.call_later(wait, self._send_later, inc, request, size, deliver, timeout)
            return
        broker.network.request(broker.broker_id, self.leader_id, request, size, deliver,
                               timeout_ms=timeout)

    def _send_later(self, inc: int, request: Any, size: int, deliver: _LeaderAnswer,
                    timeout: int) -> None:
        broker = self.broker
        if inc == broker.incarnation and broker.alive:
            broker.network.request(broker.broker_id, self.leader_id, request, size, deliver,
                                   timeout_ms=timeout)

    def socket_timeout_ms(self) -> int:
        """``replica.socket.timeout.ms``: how long a request may go unanswered."""
        return self.broker.cluster.replica_socket_timeout_ms

    def round_trip_ms(self) -> int:
        """The link's round trip to the leader and back (latency only: ListOffsets is small)."""
        return self.broker.network.round_trip_ms(self.broker.broker_id, self.leader_id)

    def leader_replica_manager(self) -> ReplicaManager:
        """The leader's ReplicaManager, for the synchronous ListOffsets; RequestTimedOutError
        when the leader is down or cut off from this broker."""
        cluster = self.broker.cluster
        leader = cluster.brokers.get(self.leader_id)
        if (leader is None or not leader.alive or leader.rm is None
                or not cluster.network.reachable(self.broker.broker_id, self.leader_id)):
            raise RequestTimedOutError(f"broker {self.leader_id} unreachable")
        return leader.rm

    def fetch_earliest_offset(self, tp: TopicPartition, current_leader_epoch: int) -> EpochAndOffset:
        return self._list_offset(tp, current_leader_epoch, EARLIEST_TIMESTAMP)

    def fetch_latest_offset(self, tp: TopicPartition, current_leader_epoch: int) -> EpochAndOffset:
        return self._list_offset(tp, current_leader_epoch, LATEST_TIMESTAMP)

    def _list_offset(self, tp: TopicPartition, epoch: int, timestamp: int) -> EpochAndOffset:
        from replica_core.errors import for_code

        tp = TopicPartition(*tp)
        try:
            rm = self.leader_replica_manager()
        except RequestTimedOutError:
            self.blocked_ms += self.socket_timeout_ms()
            raise
        self.blocked_ms += self.round_trip_ms()
        result = rm.list_offsets(
            self.broker.broker_id, [ListOffsetsPartition(tp, timestamp, epoch)])[tp]
        if result.error_code != Errors.NONE:
            raise for_code(result.error_code, f"ListOffsets {tp} on broker {self.leader_id}")
        return EpochAndOffset(result.leader_epoch, result.offset)


class _LeaderAnswer:
    """Where the answer to a follower's request goes: to ``on_answer`` unless the process that
    sent it (``incarnation``) is gone; a transport failure arrives as RequestTimedOutError, a
    FetchResponse is also kept for the invariant checker (its thread's ``arrived``)."""

    __slots__ = ("endpoint", "incarnation", "on_answer", "what")

    def __init__(self, endpoint: SimLeaderEndPoint, incarnation: int,
                 on_answer: Callable[[Any], None], what: str) -> None:
        self.endpoint = endpoint
        self.incarnation = incarnation
        self.on_answer = on_answer
        self.what = what

    def __call__(self, answer: Any) -> None:
        endpoint = self.endpoint
        broker = endpoint.broker
        if self.incarnation != broker.incarnation or not broker.alive:
            return
        if isinstance(answer, FetchResponse):  # (never a failure: the common answer first)
            if endpoint.thread is not None:
                endpoint.thread.arrived = answer  # for the invariant checker, after processing
        elif is_failure(answer):
            answer = RequestTimedOutError(
                f"{self.what} to broker {endpoint.leader_id}: {answer!r}")
        self.on_answer(answer)


_OFFSET_OUT_OF_RANGE = Errors.OFFSET_OUT_OF_RANGE


def _leo(rm: ReplicaManager, tp: TopicPartition) -> int:
    lg = rm.local_log(tp)
    return int(lg.log_end_offset) if lg is not None else -1


class SimBroker:
    """One broker of a :class:`~replica_core.sim.cluster.Cluster`."""

    __slots__ = ("cluster", "loop", "network", "broker_id", "storage", "_tmpdir", "rng",
                 "session_rng", "alive", "crash_mode", "incarnation", "broker_epoch",
                 "boot_broker_epoch", "registered", "lm", "rm", "fetcher_manager", "_parked_fetch",
                 "slow_factors", "_fsyncs_seen", "_tick_timer", "_tick_at", "_tick_version",
                 "_file_deletion_timer",
                 "_file_deletion_at", "_hb_timer", "_register_failures", "_lifecycle_rng",
                 "_parked_produce", "_produce_seq", "_fetch_seq", "log_dir", "medium",
                 "__weakref__")

    def __init__(self, cluster: Cluster, broker_id: int, *, storage: str = "memory") -> None:
        self.cluster = cluster
        self.loop = cluster.loop
        self.network = cluster.network
        self.broker_id = int(broker_id)
        self.storage = storage
        self._tmpdir: str | None = None
        if storage == "memory":
            self.log_dir = f"/kafka/broker-{broker_id}"
            self.medium: Any = MemoryMedium()
        elif storage == "disk":
            self._tmpdir = tempfile.mkdtemp(prefix=f"replica-core-sim-b{broker_id}-")
            self.log_dir = os.path.join(self._tmpdir, "kafka-logs")
            self.medium = FileMedium()
        else:
            raise ValueError(f"storage must be memory or disk, not {storage!r}")
        self.rng = cluster.loop.spawn_rng()
        self.session_rng = cluster.loop.spawn_rng()  # fetch session ids, from the seed
        self.alive = False
        self.crash_mode: str | None = None
        self.incarnation = 0
        self.broker_epoch = -1
        self.boot_broker_epoch = -1
        self.registered = False
        self.lm: LogManager | None = None
        self.rm: ReplicaManager | None = None
        self.fetcher_manager: SimFetcherManager | None = None
        self._parked_fetch: dict[int, Callable[[Any, int], None]] = {}
        self.slow_factors = {"fetch": 1.0, "disk": 1.0, "fsync": 1.0}
        self._fsyncs_seen = 0  # the medium's fsync count at the last fsync_wait_ms
        self._tick_timer: Any = None
        self._tick_at = -1
        self._tick_version = -1  # rm.tick_due_version() when the tick time was last worked out
        self._file_deletion_timer: Any = None
        self._file_deletion_at = -1
        self._hb_timer: Any = None
        self._register_failures = 0
        self._lifecycle_rng: np.random.Generator | None = None
        self._parked_produce: dict[int, Callable[[Any, int], None]] = {}
        self._produce_seq = 0
        self._fetch_seq = 0
        self.network.register(self.broker_id, self._on_message)

    # ---- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        """Load the logs (recovering after a crash), then register with the controller."""
        if self.alive:
            return
        cluster = self.cluster
        self.incarnation += 1
        self.alive = True
        self.crash_mode = None
        self.registered = False
        self.broker_epoch = -1
        self.medium.makedirs(self.log_dir)
        lm = LogManager([self.log_dir], cluster.log_config, medium=self.medium,
                        clock=self.loop.clock, topic_configs=cluster.topic_log_configs,
                        rng=cluster.storage_rng(self.broker_id, self.incarnation),
                        **cluster.log_manager_settings)
        self.boot_broker_epoch = lm.read_broker_epoch_from_clean_shutdown_files()
        lm.startup()
        rm = ReplicaManager(self.broker_id, lm, cluster.replica_config, clock=self.loop.clock,
                            alter_partition=self._send_alter_partition, broker_epoch=-1,
                            session_id_rng=self.session_rng,
                            fence_stale_controller_requests=cluster.detect_bounces)
        fm = SimFetcherManager(self, self.broker_id, rm, cluster.replica_config,
                               lambda leader: SimLeaderEndPoint(self, leader),
                               clock=self.loop.clock, truncation=cluster.truncation)
        rm.fetcher_manager = fm
        self.lm, self.rm, self.fetcher_manager = lm, rm, fm
        self._parked_fetch = {}
        cluster.trace("start", self.broker_id, len(lm.logs))
        self._register_failures = 0
        self._lifecycle_rng = None
        self._register()

    def registration_timeout_ms(self) -> int:
        """How long one registration attempt waits for its answer: the broker lifecycle
        channel's retry timeout, ``broker.session.timeout.ms / 2`` (KAFKA-14392), capped by
        ``controller.socket.timeout.ms``."""
        cluster = self.cluster
        return max(1, min(cluster.controller_timeout_ms, cluster.session_timeout_ms // 2))

    def _register(self) -> None:
        inc = self.incarnation

        def on_answer(answer: Any) -> None:
            if inc != self.incarnation or not self.alive:
                return
            if is_failure(answer):
                if self._lifecycle_rng is None:
                    key = (LIFECYCLE_STREAM, self.broker_id, inc)
                    self._lifecycle_rng = np.random.default_rng(
                        np.random.SeedSequence(self.cluster.seed, spawn_key=key))
                delay = registration_backoff_ms(self._register_failures,
                                                self.cluster.session_timeout_ms,
                                                self._lifecycle_rng)
                self._register_failures += 1
                self.cluster.trace("register_failed", self.broker_id, f"retry in {delay} ms")
                self.loop.call_later(delay, self._register_if, inc)
                return
            self._register_failures = 0
            self.broker_epoch = answer.broker_epoch
            if self.rm is not None:
                self.rm.broker_epoch = answer.broker_epoch
            first = not self.registered and self._hb_timer is None
            self.registered = True
            self.cluster.trace("registered", self.broker_id, answer.broker_epoch)
            if first:
                self._schedule_heartbeat()
                self._schedule_flusher()
                self._schedule_retention()
                self._schedule_producer_expiration()
            self._schedule_tick()

        previous = self.broker_epoch if self.broker_epoch >= 0 else self.boot_broker_epoch
        register = RegisterBroker(self.broker_id, previous, self.cluster.racks.get(self.broker_id))
        self.network.request(self.broker_id, CONTROLLER_NODE, register, 64, on_answer,
                             timeout_ms=self.registration_timeout_ms())

    def _register_if(self, inc: int) -> None:
        if inc == self.incarnation and self.alive:
            self._register()

    def crash(self, mode: str = "process", *, torn: TornWrite | None = None,
              rng: Any = None) -> list[TornFile] | None:
        """Stop now. ``"process"``: in-memory state is gone, the page cache survives;
        ``"power"``: the medium keeps only what was flushed (with ``torn``, some unflushed
        pages too, drawn from ``rng``). Returns what the medium reports of a power failure."""
        if mode not in ("process", "power"):
            raise ValueError(f"crash mode must be process or power, not {mode!r}")
        if not self.alive:
            return
        if mode == "power" and self.storage != "memory":
            raise ValueError("power failures need storage='memory' (a real disk cannot forget)")
        if mode == "process":
            # the process is gone but the host is up: every open connection is reset, so
            # requests this broker was holding (parked fetches and produces) fail at once
            for respond in [*self._parked_fetch.values(), *self._parked_produce.values()]:
                respond(Disconnected(self.broker_id), 16)
        self._parked_produce = {}
        self._parked_fetch = {}
        self.alive = False
        self.crash_mode = mode
        self.incarnation += 1
        for timer in (self._tick_timer, self._hb_timer, self._file_deletion_timer):
            if timer is not None:
                timer.cancel()
        self._tick_timer = self._hb_timer = self._file_deletion_timer = None
        if self.fetcher_manager is not None:
            for fetcher in self.fetcher_manager.fetchers.values():
                fetcher.shutdown()  # the process is gone: no thread runs on
        torn_files = None
        if self.storage == "memory":
            if self.lm is not None or mode == "power":
                torn_files = self.medium.crash(mode, torn=torn, rng=rng)
        elif self.lm is not None:
            for lg in self.lm.logs.values():
                try:
                    lg.close_handlers()  # a dead process writes nothing (no snapshot)
                except Exception:  # noqa: BLE001 - the process is gone either way
                    pass
        self.lm = self.rm = self.fetcher_manager = None
        self.registered = False
        self.cluster.trace("crash", self.broker_id, mode)
        return torn_files

    def shutdown(self) -> None:
        """A clean stop (the end of a controlled shutdown): fetchers stop, every log is
        flushed and closed, the checkpoints and the clean-shutdown marker are written."""
        if not self.alive:
            return
        if self.rm is not None:
            self.rm.shutdown(clean=True)
        if self.lm is not None:
            self.lm.shutdown(self.broker_epoch)
            self.lm = None
        self.crash("process")
        self.cluster.trace("clean_shutdown", self.broker_id)

    def restart(self) -> None:
        """Start again after a crash: log recovery, registration, LeaderAndIsr."""
        self.start()

    def wipe_log_dir(self) -> None:
        """A new, empty disk for a stopped broker (a disk replacement): no logs, checkpoints
        or clean-shutdown marker survive."""
        if self.alive:
            raise ValueError(f"broker {self.broker_id} must be stopped before its disk is replaced")
        if self.storage == "memory":
            self.medium = MemoryMedium()
        else:
            shutil.rmtree(self.log_dir, ignore_errors=True)
        self.cluster.trace("replace_disk", self.broker_id)

    def close(self) -> None:
        """Release a disk broker's temporary directory."""
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    def slow(self, factor: float, target: str = "all") -> None:
        """Make fetch processing (``"fetch"``), serving produce/fetch (``"disk"``) or both
        (``"all"``) ``factor`` times slower; factor 1 restores normal speed. ``"fsync"``: every
        fsync (``flush.messages``, a roll, the flusher) takes ``factor`` × the base time, which
        a produce reply or a follower's next fetch waits for (:meth:`fsync_wait_ms`)."""
        targets = ("fetch", "disk") if target in ("all", "process") else (target,)
        if target in ("all", "process") and factor <= 1.0:
            targets = tuple(self.slow_factors)  # restoring speed ends an fsync slowdown too
        for t in targets:
            if t not in self.slow_factors:
                raise ValueError(f"slow target must be fetch, disk or all, not {target!r}")
            self.slow_factors[t] = max(1.0, float(factor))

    def fsync_wait_ms(self) -> int:
        """How long the fsyncs made on this broker's disk since the last call take when fsync
        is slowed (``slow`` mode ``"fsync"``; 0 otherwise): a produce waits for those of its
        append, a follower's next fetch for those of its last appends."""
        done = self.medium.fsyncs
        new, self._fsyncs_seen = done - self._fsyncs_seen, done
        if new <= 0 or self.slow_factors["fsync"] <= 1.0:
            return 0
        return self.cluster.storage_faults.slow_fsyncs(self, new)

    def processing_delay_ms(self, kind: str) -> int:
        """Extra service time of a slowed broker: exponential with mean factor × base."""
        factor = self.slow_factors[kind]
        if factor <= 1.0:
            return 0
        base = self.cluster.processing_base_ms
        return int(self.rng.exponential(base * factor))

    # ---- messages ------------------------------------------------------------------------------
    def _on_message(self, src: int, msg: Any, respond: Callable[[Any, int], None]) -> None:
        if not self.alive:
            if self.crash_mode == "process":
                respond(Disconnected(self.broker_id), 16)
            return
        slowed = self.slow_factors["disk"] > 1.0  # else processing_delay_ms is 0 (no draw)
        if isinstance(msg, FetchRequest):
            delay = self.processing_delay_ms("disk") if slowed else 0
            if delay > 0:
                inc = self.incarnation
                self.loop.call_later(delay, self._fetch_later, inc, src, msg, respond)
            else:
                self._on_fetch(src, msg, respond)
        elif isinstance(msg, ProduceRequest):
            delay = self.processing_delay_ms("disk") if slowed else 0
            if delay > 0:
                inc = self.incarnation
                self.loop.call_later(delay, self._produce_later, inc, msg, respond)
            else:
                self._on_produce(msg, respond)
        elif isinstance(msg, LeaderAndIsrRequest):
            self._on_leader_and_isr(msg, respond)
        elif isinstance(msg, MetadataUpdate):
            respond(self._on_metadata(msg), 16)
        elif isinstance(msg, ConsumerFetch):
            assert self.rm is not None
            req = msg.request
            if req.max_wait_ms > 0:
                req = FetchRequest(req.replica_id, 0, req.min_bytes, req.max_bytes,
                                   req.partitions, req.replica_epoch, req.isolation_level)
            answer = self.rm.fetch_messages(req)
            respond(answer, 32 + sum(40 + _size(p.records) for p in answer.partitions))
        elif isinstance(msg, OffsetsForLeaderEpochRequest):
            assert self.rm is not None
            answer = self.rm.offsets_for_leader_epoch(msg)
            respond(answer, 32 + 24 * len(answer))
        else:  # pragma: no cover - programming error
            raise TypeError(f"broker {self.broker_id} got an unknown message {msg!r}")

    def _fetch_later(self, inc: int, src: int, msg: FetchRequest,
                     respond: Callable[[Any, int], None]) -> None:
        if inc == self.incarnation and self.alive:
            self._on_fetch(src, msg, respond)

    def _produce_later(self, inc: int, msg: ProduceRequest,
                       respond: Callable[[Any, int], None]) -> None:
        if inc == self.incarnation and self.alive:
            self._on_produce(msg, respond)

    def _on_metadata(self, msg: MetadataUpdate) -> Errors:
        rm = self.rm
        if rm is None:
            return Errors.NONE
        error = rm.update_metadata(msg.broker_epoch, msg.broker_epochs, msg.alive)
        if error != Errors.NONE:
            self.cluster.refused("UpdateMetadata", error.name)
            self.cluster.trace("refused", self.broker_id, "UpdateMetadata", error.name,
                               f"request epoch {msg.broker_epoch}", f"ours {rm.broker_epoch}")
        return error

    def _on_leader_and_isr(self, req: LeaderAndIsrRequest, respond: Callable[[Any, int], None]
                           ) -> None:
        rm = self.rm
        lm = self.lm
        assert rm is not None and lm is not None and self.fetcher_manager is not None
        error = rm.controller_request_error(req.broker_epoch)
        if error != Errors.NONE:
            # not registered yet, or meant for a previous process of this broker (KIP-380):
            # refused before any log is created (the ReplicaManager would refuse it too)
            self.cluster.refused("LeaderAndIsr", error.name)
            self.cluster.trace("refused", self.broker_id, "LeaderAndIsr", error.name,
                               f"request epoch {req.broker_epoch}", f"ours {rm.broker_epoch}")
            respond(LeaderAndIsrResponse(error, {s.tp: error for s in req.partition_states}),
                    16 + 8 * len(req.partition_states))
            return
        hw_mode = self.cluster.truncation == "high_watermark"
        leos = None
        if hw_mode:  # what the followers hold before truncating to their HW (loss causes)
            leos = {s.tp: int(lg.log_end_offset) for s in req.partition_states
                    if s.leader != self.broker_id
                    and (lg := lm.get_log(s.topic, s.partition)) is not None}
        me = self.broker_id
        log_dir = self.log_dir
        # naming the log dir skips LogManager's per-call count of logs per dir
        lm.create_logs([(s.topic, s.partition) for s in req.partition_states if me in s.replicas],
                       log_dir=log_dir)
        response = rm.become_leader_or_follower(req)
        self.fetcher_manager.shutdown_idle_fetcher_threads()
        errors = response.partition_errors
        led: list[TopicPartition] = []  # led without error, in request order
        followed: list[TopicPartition] = []
        for s in req.partition_states:
            if s.leader != me:
                followed.append(s.tp)
            elif errors.get(s.tp, Errors.NONE) == Errors.NONE:
                led.append(s.tp)
        self.cluster.trace("leader_and_isr", self.broker_id, len(req.partition_states), len(led))
        self.cluster.checker.became_leader(self, led)
        self.cluster.checker.became_follower(self, followed, leos)
        respond(response, 16 + 8 * len(req.partition_states))
        self._schedule_tick()

    # ---- produce -------------------------------------------------------------------------------
    def _on_produce(self, msg: ProduceRequest, respond: Callable[[Any, int], None]) -> None:
        rm = self.rm
        assert rm is not None
        tp = msg.tp

        self._produce_seq += 1
        key = self._produce_seq
        answer = _ProduceReply(self, msg, key, respond)
        results = rm.append_records({tp: msg.records}, acks=msg.acks, timeout_ms=msg.timeout_ms,
                                    callback=answer)
        answer.fsync_wait = self.fsync_wait_ms()
        ok = results is None or results[tp].error_code == Errors.NONE
        if ok:
            self.cluster.checker.leader_touched(self, (tp,))
        if results is not None:
            answer(results)
        else:
            self._parked_produce[key] = respond
            self._schedule_tick()

    # ---- follower fetches on the leader ----------------------------------------------------------
    def _on_fetch(self, src: int, request: FetchRequest, respond: Callable[[Any, int], None]
                  ) -> None:
        """Hand a follower's fetch to the replica manager; a parked fetch is answered when the
        manager completes it (the connection stays open until then)."""
        rm = self.rm
        assert rm is not None
        self._fetch_seq += 1
        key = self._fetch_seq
        reply = _FetchReply(self, key, respond)
        response = rm.fetch_messages(request, reply)
        if response is not None:
            reply(response)
        else:
            self._parked_fetch[key] = respond
        self._schedule_tick()

    # ---- controller traffic ----------------------------------------------------------------------
    def _send_alter_partition(self, request: AlterPartitionRequest) -> None:
        inc = self.incarnation

        def on_answer(answer: Any) -> None:
            if inc != self.incarnation or not self.alive or self.rm is None:
                return
            if is_failure(answer):
                answer = [AlterPartitionResult(item.tp, Errors.REQUEST_TIMED_OUT)
                          for item in request.items]
            self.rm.handle_alter_partition_response(answer)
            self._schedule_tick()

        self.network.request(self.broker_id, CONTROLLER_NODE, request,
                             32 + 32 * len(request.items), on_answer,
                             timeout_ms=self.cluster.controller_timeout_ms)

    def _schedule_heartbeat(self) -> None:
        inc = self.incarnation
        self._hb_timer = self.loop.call_later(self.cluster.heartbeat_interval_ms,
                                              self._heartbeat, inc)

    def _heartbeat(self, inc: int) -> None:
        if inc != self.incarnation or not self.alive:
            return

        def on_answer(answer: Any) -> None:
            if inc != self.incarnation or not self.alive:
                return
            if not is_failure(answer) and answer.fenced and self.registered:
                # The controller expired our session (we were cut off): register again, with
                # a new broker epoch, as a ZooKeeper broker does after session expiry.
                self.registered = False
                self.cluster.trace("fenced", self.broker_id)
                self._register()

        self.network.request(self.broker_id, CONTROLLER_NODE,
                             Heartbeat(self.broker_id, self.broker_epoch), 32, on_answer,
                             timeout_ms=self.cluster.heartbeat_interval_ms)
        self._schedule_heartbeat()

    def _schedule_flusher(self) -> None:
        """Kafka's log flusher: with a finite ``flush.ms`` flush overdue logs that often."""
        interval = self.cluster.flush_interval_ms
        if interval is not None:
            self._schedule_periodic(interval, interval, LogManager.flush_dirty_logs)

    def _schedule_periodic(self, delay_ms: int, period_ms: int,
                           task: Callable[[LogManager], Any]) -> None:
        """Kafka's ``KafkaScheduler.schedule(name, task, delay, period)`` on the simulated
        clock: ``task`` runs on this process's LogManager ``delay_ms`` from now, then every
        ``period_ms``, until the process stops."""
        inc = self.incarnation

        def run() -> None:
            if inc != self.incarnation or not self.alive or self.lm is None:
                return
            task(self.lm)
            self.loop.call_later(period_ms, run)

        self.loop.call_later(delay_ms, run)

    def _schedule_retention(self) -> None:
        """Kafka's ``kafka-log-retention`` task: the LogManager's retention check
        ``log.initial.task.delay.ms`` after start, then every
        ``log.retention.check.interval.ms``, on the simulated clock."""
        lm = self.lm
        if lm is None:
            return

        def check(lm: LogManager) -> None:
            deleted = lm.cleanup_logs()
            if deleted:
                self.cluster.retention_segments_deleted += deleted
                self.cluster.trace("retention", self.broker_id, deleted)
                self._schedule_file_deletion()

        self._schedule_periodic(lm.initial_task_delay_ms, lm.retention_check_interval_ms, check)

    def _schedule_file_deletion(self) -> None:
        """Remove retention's ``.deleted`` files when ``file.delete.delay.ms`` has passed
        (Kafka's ``delete-file`` tasks); one timer, at the earliest due time."""
        lm = self.lm
        due = None if lm is None else lm.next_file_deletion_ms()
        if due is None:
            return
        if self._file_deletion_timer is not None:
            if self._file_deletion_at <= due:
                return
            self._file_deletion_timer.cancel()
        inc = self.incarnation

        def run() -> None:
            self._file_deletion_timer = None
            if inc != self.incarnation or not self.alive or self.lm is None:
                return
            self.lm.delete_due_files()
            self._schedule_file_deletion()

        self._file_deletion_at = max(due, self.loop.now)
        self._file_deletion_timer = self.loop.call_at(self._file_deletion_at, run)

    def _schedule_producer_expiration(self) -> None:
        """Kafka's ``PeriodicProducerExpirationCheck`` (every
        ``producer.id.expiration.check.interval.ms``)."""
        lm = self.lm
        if lm is not None:
            interval = lm.producer_id_expiration_check_interval_ms
            self._schedule_periodic(interval, interval, LogManager.remove_expired_producers_if_due)

    # ---- time-driven work -----------------------------------------------------------------------
    def _schedule_tick(self) -> None:
        """Wake the replica manager's :meth:`~ReplicaManager.tick` at its next due time. A
        pending wake-up is set no later than the due time last worked out; while
        ``tick_due_version`` stands still the due time has not moved earlier, so it stays."""
        rm = self.rm
        if rm is None or not self.alive:
            return
        version = rm.tick_due_version()
        if self._tick_timer is not None and version == self._tick_version:
            return
        self._tick_version = version
        due = rm.next_tick_due_ms()
        now = self.loop.clock.now_ms
        if due < now:
            due = now
        if self._tick_timer is not None:
            if self._tick_at <= due:
                return
            self._tick_timer.cancel()
        self._tick_at = due
        self._tick_timer = self.loop.call_at(due, self._tick, self.incarnation)

    def _tick(self, inc: int) -> None:
        if inc != self.incarnation or not self.alive or self.rm is None:
            return
        self._tick_timer = None
        self.rm.tick()
        self._schedule_tick()


class _ProduceReply:
    """The answer to a produce, now or when the purgatory completes it: after the broker's
    slow fsyncs of its append (``fsync_wait``, slow mode "fsync") unless the process is gone
    by then; none for acks=0. Carries the leader's maximal ISR size (for loss causes)."""

    __slots__ = ("broker", "msg", "key", "respond", "fsync_wait")

    def __init__(self, broker: SimBroker, msg: ProduceRequest, key: int,
                 respond: Callable[[Any, int], None]) -> None:
        self.broker = broker
        self.msg = msg
        self.key = key
        self.respond = respond
        self.fsync_wait = 0

    def __call__(self, results: dict[TopicPartition, ProducePartitionResponse]) -> None:
        if self.fsync_wait > 0:
            broker = self.broker
            broker.loop.call_later(self.fsync_wait, self._reply_later, broker.incarnation,
                                   results)
        else:
            self._reply(results)

    def _reply_later(self, inc: int, results: dict[TopicPartition, ProducePartitionResponse]
                     ) -> None:
        broker = self.broker
        if inc == broker.incarnation and broker.alive:
            self._reply(results)

    def _reply(self, results: dict[TopicPartition, ProducePartitionResponse]) -> None:
        broker = self.broker
        broker._parked_produce.pop(self.key, None)  # noqa: SLF001
        msg = self.msg
        if msg.acks == 0:
            return
        tp = msg.tp
        r = results[tp]
        isr_size = 0
        rm = broker.rm
        p = rm.partition(tp) if rm is not None else None
        if p is not None and p.is_leader and p.row >= 0:
            isr_size = p.table.maximal_isr_size(p.row)
        self.respond(ProduceResponse(tp, Errors(r.error_code), r.base_offset, isr_size), 48)


class _FetchReply:
    """The answer to a follower's fetch, now or when the purgatory completes it: the leader's
    partitions are checked (HW ≤ LEO, HW monotonic), then it goes back on the connection."""

    __slots__ = ("broker", "key", "respond")

    def __init__(self, broker: SimBroker, key: int, respond: Callable[[Any, int], None]) -> None:
        self.broker = broker
        self.key = key
        self.respond = respond

    def __call__(self, response: FetchResponse) -> None:
        broker = self.broker
        broker._parked_fetch.pop(self.key, None)  # noqa: SLF001
        size = 32
        partitions = response.partitions
        if partitions:
            tps = []
            for p in partitions:
                records = p.records
                size += 40 + (records.nbytes if isinstance(records, memoryview) else len(records))
                tps.append(p.tp)
            broker.cluster.checker.leader_touched(broker, tps)
        self.respond(response, size)


def _size(records: Any) -> int:
    return records.nbytes if isinstance(records, memoryview) else len(records)


__all__ = [
    "CONTROLLER_NODE",
    "ConsumerFetch",
    "Disconnected",
    "FetcherThread",
    "Heartbeat",
    "HeartbeatResponse",
    "MetadataUpdate",
    "ProduceRequest",
    "ProduceResponse",
    "RegisterBroker",
    "RegisterResponse",
    "SimBroker",
    "SimFetcherManager",
    "SimLeaderEndPoint",
    "is_failure",
]
