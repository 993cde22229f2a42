"""A simulated broker: real storage, ReplicaManager and fetchers, driven by the event loop.

Each :class:`SimBroker` owns a :class:`~replica_core.storage.log_manager.LogManager` over its
own medium (memory modelling the page cache, or a temporary directory), a
:class:`~replica_core.replication.ReplicaManager` and a fetcher manager whose fetchers talk to
leaders over the simulator's :class:`~replica_core.sim.network.Network`:

* **Fetch sessions (KIP-227).** A follower fetcher sends, per request, only the partitions whose
  fetch state changed (new offset, new epoch, added, forgotten); the leader keeps the session
  and answers only partitions with records, a new high watermark, or an error. The leader still
  updates every session partition's follower state on every fetch, as Kafka's incremental
  fetch does: partitions with something to read go through ``ReplicaManager.fetch_messages``,
  idle ones (fetch offset = leader LEO, nothing to report) through the state table's batch
  kernel ``update_follower_fetches`` — one call for all of them.
* **Parking.** A fetch with nothing to return waits on the leader (``replica.fetch.wait.max.ms``)
  until data is appended to one of its session partitions, leadership changes, or the wait
  expires — the completion rules of Kafka's DelayedFetch over the whole session; the completing
  read does not update follower state (``read_from_purgatory``), as in Kafka.
* **Time-driven work** runs from ``ReplicaManager.tick`` at ``next_tick_due_ms``.
* **Controller traffic** (registration, heartbeats, AlterPartition) goes over the network to node
  :data:`CONTROLLER_NODE`.

Faults: :meth:`SimBroker.crash` (``"process"``: every in-memory structure is dropped, the page
cache survives; ``"power"``: the medium keeps only flushed bytes), :meth:`SimBroker.restart`
(log recovery, then registration with a new broker epoch and LeaderAndIsr from the controller),
and :meth:`SimBroker.slow` (fetch responses and served requests take ``factor`` times longer).
"""
from __future__ import annotations

import heapq
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from replica_core.errors import Errors, RequestTimedOutError
from replica_core.fetcher.endpoint import EpochAndOffset
from replica_core.fetcher.fetcher import ReplicaFetcher
from replica_core.fetcher.manager import ReplicaFetcherManager
from replica_core.fetcher.partition_states import FETCHING, TRUNCATING, PartitionStates
from replica_core.replication import ReplicaManager
from replica_core.replication.messages import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    NO_EPOCH,
    AlterPartitionRequest,
    AlterPartitionResult,
    EpochEndOffset,
    FetchPartition,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    LeaderAndIsrRequest,
    ListOffsetsPartition,
    OffsetForLeaderPartition,
    OffsetsForLeaderEpochRequest,
    ProducePartitionResponse,
    TopicPartition,
)
from replica_core.sim.network import RequestTimeout
from replica_core.storage.log_manager import LogManager
from replica_core.storage.medium import FileMedium, MemoryMedium

if TYPE_CHECKING:
    from replica_core.sim.cluster import Cluster

CONTROLLER_NODE = -1
"""Network node id of the controller."""


# ---- messages on the simulated wire ------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ProduceRequest:
    tp: TopicPartition
    records: bytes
    acks: int
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class ProduceResponse:
    tp: TopicPartition
    error_code: Errors
    base_offset: int = -1
    isr_size: int = 0
    """Simulator-only: the leader's maximal ISR size when the response left (for loss causes)."""


@dataclass(frozen=True, slots=True)
class SessionFetchRequest:
    """A follower fetch in a fetch session (KIP-227): ``full`` replaces the session."""

    fetcher_id: int
    session_epoch: int
    full: bool
    request: FetchRequest
    forgotten: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True, slots=True)
class SessionFetchResponse:
    response: FetchResponse | None
    session_error: bool = False


@dataclass(frozen=True, slots=True)
class RegisterBroker:
    broker_id: int


@dataclass(frozen=True, slots=True)
class RegisterResponse:
    broker_epoch: int


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
    registered broker epochs used against stale fetches (KIP-841, KIP-903)."""

    broker_epochs: tuple[tuple[int, int], ...]
    alive: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ConsumerFetch:
    """A consumer's fetch (read up to the HW), answered at once with a FetchResponse."""

    request: FetchRequest


@dataclass(frozen=True, slots=True)
class Disconnected:
    """The answer of a crashed process: the connection was refused (no timeout to wait for)."""

    node: int


def is_failure(response: Any) -> bool:
    """A transport-level failure (timeout, lost message, refused connection)."""
    return isinstance(response, (RequestTimeout, Disconnected))


# ---- follower side: fetchers with fetch sessions ----------------------------------------------
class _TrackedStates(PartitionStates):
    """PartitionStates that remembers which partitions changed since the session last looked."""

    __slots__ = ("dirty",)

    def __init__(self) -> None:
        super().__init__()
        self.dirty: dict[TopicPartition, None] = {}

    def update_and_move_to_end(self, tp: Any, state: Any) -> None:
        super().update_and_move_to_end(tp, state)
        self.dirty[tp] = None

    def update(self, tp: Any, state: Any) -> None:
        super().update(tp, state)
        self.dirty[tp] = None

    def remove(self, tp: Any) -> None:
        super().remove(tp)
        self.dirty[tp] = None

    def clear(self) -> None:
        for tp in self._map:
            self.dirty[tp] = None
        super().clear()

    def set(self, states: Any) -> None:
        for tp in self._map:
            self.dirty[tp] = None
        super().set(states)
        for tp in self._map:
            self.dirty[tp] = None


class SessionFetcher(ReplicaFetcher):
    """A :class:`ReplicaFetcher` whose fetch states report their changes (for fetch sessions)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.partition_states = _TrackedStates()
        self.driver: FetchDriver | None = None

    def add_partitions(self, initial_fetch_states: Any) -> set[TopicPartition]:
        added = super().add_partitions(initial_fetch_states)
        if self.driver is not None:
            self.driver.poke()
        return added

    def shutdown(self) -> None:
        super().shutdown()
        if self.driver is not None:
            self.driver.stop()


class SimFetcherManager(ReplicaFetcherManager):
    """Creates :class:`SessionFetcher` s, each with a :class:`FetchDriver` on the event loop."""

    def __init__(self, broker: SimBroker, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.broker = broker

    def add_fetcher_for_partitions(self, partitions: Any) -> None:
        """As Kafka's makeFollowers: no fetcher for a partition without a live leader (−1)."""
        live = {tp: s for tp, s in partitions.items() if s.leader >= 0}
        if live:
            super().add_fetcher_for_partitions(live)

    def create_fetcher(self, fetcher_id: int, source_broker: int) -> ReplicaFetcher:
        fetcher = SessionFetcher(
            fetcher_id, source_broker, self.endpoint_factory(source_broker), self.replica_manager,
            self.config, clock=self.clock, truncation=self.truncation,
            truncate_on_fetch=self.truncate_on_fetch, quota=self.quota,
            failed_partitions=self.failed_partitions)
        fetcher.driver = FetchDriver(self.broker, fetcher)
        return fetcher


class SimLeaderEndPoint:
    """The synchronous half of the leader endpoint (ListOffsets for out-of-range handling).

    Fetch and OffsetsForLeaderEpoch travel over the network through :class:`FetchDriver`; the
    fetcher calls ListOffsets synchronously in the middle of processing a response, so it is
    answered directly from the leader when the leader is up and reachable, and fails like a
    timed-out request otherwise.
    """

    def __init__(self, broker: SimBroker, leader_id: int) -> None:
        self.broker = broker
        self.leader_id = leader_id

    def _leader_rm(self) -> ReplicaManager:
        cluster = self.broker.cluster
        leader = cluster.brokers.get(self.leader_id)
        if (leader is None or not leader.alive or leader.rm is None
                or not cluster.network.reachable(self.broker.broker_id, self.leader_id)):
            raise RequestTimedOutError(f"broker {self.leader_id} unreachable")
        return leader.rm

    def fetch(self, request: FetchRequest) -> FetchResponse:  # pragma: no cover - async path used
        raise RequestTimedOutError("fetches go through the FetchDriver")

    def fetch_epoch_end_offsets(self, request: OffsetsForLeaderEpochRequest
                                ) -> dict[TopicPartition, EpochEndOffset]:
        return dict(self._leader_rm().offsets_for_leader_epoch(request))

    def fetch_earliest_offset(self, tp: TopicPartition, current_leader_epoch: int) -> EpochAndOffset:
        return self._list_offset(tp, current_leader_epoch, EARLIEST_TIMESTAMP)

    def fetch_latest_offset(self, tp: TopicPartition, current_leader_epoch: int) -> EpochAndOffset:
        return self._list_offset(tp, current_leader_epoch, LATEST_TIMESTAMP)

    def _list_offset(self, tp: TopicPartition, epoch: int, timestamp: int) -> EpochAndOffset:
        from replica_core.errors import for_code

        tp = TopicPartition(*tp)
        result = self._leader_rm().list_offsets(
            self.broker.broker_id, [ListOffsetsPartition(tp, timestamp, epoch)])[tp]
        if result.error_code != Errors.NONE:
            raise for_code(result.error_code, f"ListOffsets {tp} on broker {self.leader_id}")
        return EpochAndOffset(result.leader_epoch, result.offset)


class FetchDriver:
    """Runs one fetcher's ``doWork`` loop asynchronously: truncation, then an incremental
    session fetch over the network, one request in flight at a time (§7.4)."""

    def __init__(self, broker: SimBroker, fetcher: SessionFetcher) -> None:
        self.broker = broker
        self.fetcher = fetcher
        self.incarnation = broker.incarnation
        self.leader = fetcher.source_broker
        self.in_flight = False
        self.stopped = False
        self._timer: Any = None
        self._timer_at = -1
        self.sent: dict[TopicPartition, FetchPartition] = {}
        self.session_epoch = 0
        self.need_full = True
        self._delays: list[tuple[int, int, TopicPartition]] = []
        self._seq = 0

    def stop(self) -> None:
        self.stopped = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _live(self) -> bool:
        return (not self.stopped and self.broker.alive
                and self.incarnation == self.broker.incarnation)

    def poke(self, at_ms: int | None = None) -> None:
        """Make sure the loop runs at ``at_ms`` (default now) unless a request is in flight."""
        if not self._live() or self.in_flight:
            return
        loop = self.broker.loop
        at = loop.now if at_ms is None else max(at_ms, loop.now)
        if self._timer is not None and self._timer_at <= at:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = at
        self._timer = loop.call_at(at, self._step)

    def _step(self) -> None:
        self._timer = None
        if not self._live() or self.in_flight:
            return
        fetcher = self.fetcher
        states: _TrackedStates = fetcher.partition_states  # type: ignore[assignment]
        now = self.broker.loop.now
        delays = self._delays
        while delays and delays[0][0] <= now:
            _, _, tp = heapq.heappop(delays)
            states.dirty[tp] = None
        if self.need_full:
            candidates = list(states.partition_set())
            candidates += [tp for tp in states.dirty if tp not in states]
        else:
            candidates = list(states.dirty)
        states.dirty.clear()
        # 1. truncation first (maybeTruncate), as doWork does
        truncating = []
        for tp in candidates:
            st = states.state_value(tp)
            if st is not None and st.state is TRUNCATING and not st.is_delayed(now):
                truncating.append(tp)
        if truncating and self._truncate(truncating):
            states.dirty.update(dict.fromkeys(candidates))
            return  # an OffsetsForLeaderEpoch request is in flight
        for tp in states.dirty:
            if tp not in candidates:
                candidates.append(tp)
        states.dirty.clear()
        # 2. the session delta (maybeFetch with KIP-227 incremental requests)
        cfg = fetcher.config
        send_epoch = fetcher.truncate_on_fetch
        rm = fetcher.replica_manager
        full = self.need_full
        sent = {} if full else self.sent
        parts: list[FetchPartition] = []
        forgotten: list[TopicPartition] = []
        for tp in candidates:
            st = states.state_value(tp)
            fp = None
            if st is not None:
                due = st.delay_until_ms
                if due is not None and due > now:
                    self._seq += 1
                    heapq.heappush(delays, (due, self._seq, tp))
                elif st.state is FETCHING:
                    lg = rm.local_log(tp)
                    if lg is None:
                        fetcher._delay_partitions([tp], cfg.backoff_ms)
                        states.dirty.pop(tp, None)
                        self._seq += 1
                        heapq.heappush(delays, (now + cfg.backoff_ms, self._seq, tp))
                    else:
                        lfe = st.last_fetched_epoch
                        fp = FetchPartition(
                            tp, st.fetch_offset, cfg.fetch_max_bytes, lg.log_start_offset,
                            st.current_leader_epoch,
                            lfe if send_epoch and lfe is not None else NO_EPOCH)
            if fp is not None:
                if sent.get(tp) != fp:
                    parts.append(fp)
                    sent[tp] = fp
            elif tp in sent:
                del sent[tp]
                forgotten.append(tp)
        if full:
            self.sent = sent
            if not sent:
                # nothing to fetch yet: stay idle until a partition is added or a delay ends
                if delays:
                    self.poke(delays[0][0])
                return
            parts = list(sent.values())
            forgotten = []
            self.need_full = False
            self.session_epoch = 0
        else:
            if not sent and not forgotten:
                if delays:
                    self.poke(delays[0][0])
                return
            self.session_epoch += 1
        request = FetchRequest(rm.broker_id, cfg.wait_max_ms, cfg.min_bytes,
                               cfg.response_max_bytes, tuple(parts), rm.broker_epoch)
        msg = SessionFetchRequest(fetcher.fetcher_id, self.session_epoch, full, request,
                                  tuple(forgotten))
        self.in_flight = True
        broker = self.broker
        broker.network.request(
            broker.broker_id, self.leader, msg, 64 + 40 * len(parts) + 16 * len(forgotten),
            self._on_fetch_response, timeout_ms=broker.cluster.replica_socket_timeout_ms)

    def _truncate(self, tps: list[TopicPartition]) -> bool:
        """Truncating partitions: by leader epoch (async OffsetsForLeaderEpoch) or to the HW.
        True if a request went out."""
        fetcher = self.fetcher
        rm = fetcher.replica_manager
        states = fetcher.partition_states
        with_epochs: list[OffsetForLeaderPartition] = []
        without: list[TopicPartition] = []
        for tp in tps:
            st = states.state_value(tp)
            if st is None:
                continue
            epoch = -1
            if fetcher.uses_leader_epochs:
                lg = rm.local_log(tp)
                epoch = lg.latest_epoch if lg is not None else -1
            if epoch >= 0:
                with_epochs.append(OffsetForLeaderPartition(tp, epoch, st.current_leader_epoch))
            else:
                without.append(tp)
        if without:
            fetcher.truncate_to_high_watermark(without)
            self.broker.cluster.checker.truncated(self.broker, without)
        if not with_epochs:
            return False
        request = OffsetsForLeaderEpochRequest(rm.broker_id, tuple(with_epochs))
        self.in_flight = True
        broker = self.broker
        broker.network.request(broker.broker_id, self.leader, request, 32 + 24 * len(with_epochs),
                               lambda answer: self._on_epochs(request, answer),
                               timeout_ms=broker.cluster.replica_socket_timeout_ms)
        return True

    def _on_epochs(self, request: OffsetsForLeaderEpochRequest, answer: Any) -> None:
        if not self._live():
            return
        self.in_flight = False
        if is_failure(answer):
            answer = RequestTimedOutError(str(answer))
        tps = [p.tp for p in request.partitions]
        self.fetcher.process_epoch_response(request, answer)
        self.broker.cluster.checker.truncated(self.broker, tps)
        self._step()

    def _on_fetch_response(self, answer: Any) -> None:
        if not self._live():
            return
        delay = self.broker.processing_delay_ms("fetch")
        if delay > 0:
            self.broker.loop.call_later(delay, self._process, answer)
        else:
            self._process(answer)

    def _process(self, answer: Any) -> None:
        if not self._live():
            return
        self.in_flight = False
        fetcher = self.fetcher
        broker = self.broker
        if is_failure(answer) or answer.session_error or answer.response is None:
            error = answer if isinstance(answer, BaseException) else RequestTimedOutError(
                f"fetch from broker {self.leader} failed: {answer!r}")
            fetcher.process_fetch_response(FetchRequest(fetcher.broker_id, 0, 0, 0, ()), error)
            self.need_full = True
            self.sent = {}
        else:
            response = answer.response
            sent = self.sent
            parts = tuple(sent[p.tp] for p in response.partitions if p.tp in sent)
            virtual = FetchRequest(fetcher.broker_id, 0, 0, 0, parts)
            rm = fetcher.replica_manager
            leos = {p.tp: _leo(rm, p.tp) for p in response.partitions
                    if p.error_code == Errors.OFFSET_OUT_OF_RANGE}  # may truncate
            fetcher.process_fetch_response(virtual, response)
            fetcher.partitions_with_new_high_watermark.clear()
            broker.cluster.checker.follower_fetched(broker, response, leos)
        self._step()


def _leo(rm: ReplicaManager, tp: TopicPartition) -> int:
    lg = rm.local_log(tp)
    return int(lg.log_end_offset) if lg is not None else -1


# ---- leader side: fetch sessions ----------------------------------------------------------------
class LeaderSession:
    """The leader's copy of one follower fetcher's session: per partition its latest
    FetchPartition, in columns for the vectorised "anything to send?" test."""

    def __init__(self, follower: int, fetcher_id: int) -> None:
        self.follower = follower
        self.fetcher_id = fetcher_id
        self.epoch = 0
        self.index: dict[TopicPartition, int] = {}
        self.parts: list[FetchPartition | None] = []
        self._free: list[int] = []
        cap = 16
        self.fetch_offset = np.full(cap, -1, dtype=np.int64)
        self.req_epoch = np.full(cap, -1, dtype=np.int64)
        self.log_start = np.full(cap, -1, dtype=np.int64)
        self.sent_hw = np.full(cap, -2, dtype=np.int64)
        self.rows = np.full(cap, -1, dtype=np.int64)
        self.slots = np.full(cap, -1, dtype=np.int64)
        self.mark = np.zeros(cap, dtype=np.uint8)  # scratch: entries this request changed
        self.out = np.zeros(cap, dtype=np.int64)  # scratch: the kernels' chosen entries
        self.n = 0
        self.gen = -1
        self.waiting: tuple[Callable[[Any, int], None], Any, FetchRequest] | None = None

    def _grow(self) -> None:
        cap = 2 * len(self.fetch_offset)
        for name, fill in (("fetch_offset", -1), ("req_epoch", -1), ("log_start", -1),
                           ("sent_hw", -2), ("rows", -1), ("slots", -1)):
            old = getattr(self, name)
            new = np.full(cap, fill, dtype=np.int64)
            new[: len(old)] = old
            setattr(self, name, new)
        self.mark = np.zeros(cap, dtype=np.uint8)
        self.out = np.zeros(cap, dtype=np.int64)

    def upsert(self, fp: FetchPartition, rm: ReplicaManager) -> int:
        i = self.index.get(fp.tp)
        if i is None:
            if self._free:
                i = heapq.heappop(self._free)
            else:
                if self.n == len(self.fetch_offset):
                    self._grow()
                i = self.n
                self.n += 1
                self.parts.append(None)
            self.index[fp.tp] = i
            self.sent_hw[i] = -2
            self._map_row(i, fp.tp, rm)
        self.parts[i] = fp
        self.fetch_offset[i] = fp.fetch_offset
        self.req_epoch[i] = fp.current_leader_epoch
        self.log_start[i] = fp.log_start_offset
        return i

    def forget(self, tp: TopicPartition) -> None:
        i = self.index.pop(tp, None)
        if i is not None:
            self.parts[i] = None
            self.rows[i] = -1
            self.slots[i] = -1
            self.fetch_offset[i] = -1
            heapq.heappush(self._free, i)

    def _map_row(self, i: int, tp: TopicPartition, rm: ReplicaManager) -> None:
        p = rm.partition(tp)
        row = p.row if p is not None and p.is_leader else -1
        slot = -1
        if row >= 0:
            slot = rm.table.slot(row, self.follower)
        self.rows[i] = row if slot > 0 else -1
        self.slots[i] = slot if slot > 0 else -1

    def refresh_rows(self, rm: ReplicaManager, gen: int) -> None:
        """Re-map every partition to its state-table row after leadership changed."""
        if gen == self.gen:
            return
        self.gen = gen
        for tp, i in self.index.items():
            self._map_row(i, tp, rm)


class SimBroker:
    """One broker of a :class:`~replica_core.sim.cluster.Cluster`."""

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
        self.alive = False
        self.crash_mode: str | None = None
        self.incarnation = 0
        self.broker_epoch = -1
        self.registered = False
        self.lm: LogManager | None = None
        self.rm: ReplicaManager | None = None
        self.fetcher_manager: SimFetcherManager | None = None
        self.sessions: dict[tuple[int, int], LeaderSession] = {}
        self.leadership_gen = 0
        self.slow_factors = {"fetch": 1.0, "disk": 1.0}
        self._tick_timer: Any = None
        self._tick_at = -1
        self._hb_timer: Any = None
        self._parked_produce: dict[int, Callable[[Any, int], None]] = {}
        self._produce_seq = 0
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
                        clock=self.loop.clock, topic_configs=cluster.topic_log_configs)
        lm.startup()
        rm = ReplicaManager(self.broker_id, lm, cluster.replica_config, clock=self.loop.clock,
                            alter_partition=self._send_alter_partition, broker_epoch=-1)
        fm = SimFetcherManager(self, self.broker_id, rm, cluster.replica_config,
                               lambda leader: SimLeaderEndPoint(self, leader),
                               clock=self.loop.clock, truncation=cluster.truncation)
        rm.fetcher_manager = fm
        self.lm, self.rm, self.fetcher_manager = lm, rm, fm
        self.sessions = {}
        self.leadership_gen += 1
        cluster.trace("start", self.broker_id, len(lm.logs))
        self._register()

    def _register(self) -> None:
        inc = self.incarnation

        def on_answer(answer: Any) -> None:
            if inc != self.incarnation or not self.alive:
                return
            if is_failure(answer):
                self.loop.call_later(self.cluster.retry_backoff_ms, self._register_if, inc)
                return
            self.broker_epoch = answer.broker_epoch
            if self.rm is not None:
                self.rm.broker_epoch = answer.broker_epoch
            first = not self.registered and self._hb_timer is None
            self.registered = True
            self.cluster.trace("registered", self.broker_id, answer.broker_epoch)
            if first:
                self._schedule_heartbeat()
                self._schedule_flusher()
            self._schedule_tick()

        self.network.request(self.broker_id, CONTROLLER_NODE, RegisterBroker(self.broker_id), 64,
                             on_answer, timeout_ms=self.cluster.controller_timeout_ms)

    def _register_if(self, inc: int) -> None:
        if inc == self.incarnation and self.alive:
            self._register()

    def crash(self, mode: str = "process") -> None:
        """Stop now. ``"process"``: in-memory state is gone, the page cache survives;
        ``"power"``: the medium keeps only what was flushed."""
        if mode not in ("process", "power"):
            raise ValueError(f"crash mode must be process or power, not {mode!r}")
        if not self.alive:
            return
        if mode == "power" and self.storage != "memory":
            raise ValueError("power failures need storage='memory' (a real disk cannot forget)")
        if mode == "process":
            # the process is gone but the host is up: every open connection is reset, so
            # requests this broker was holding (parked fetches and produces) fail at once
            for session in self.sessions.values():
                if session.waiting is not None:
                    session.waiting[1].cancel()
                    session.waiting[0](Disconnected(self.broker_id), 16)
                    session.waiting = None
            for respond in list(self._parked_produce.values()):
                respond(Disconnected(self.broker_id), 16)
        self._parked_produce = {}
        self.alive = False
        self.crash_mode = mode
        self.incarnation += 1
        for timer in (self._tick_timer, self._hb_timer):
            if timer is not None:
                timer.cancel()
        self._tick_timer = self._hb_timer = None
        if self.fetcher_manager is not None:
            for fetcher in self.fetcher_manager.fetchers.values():
                if getattr(fetcher, "driver", None) is not None:
                    fetcher.driver.stop()
        if self.storage == "memory":
            if self.lm is not None or mode == "power":
                self.medium.crash(mode)
        elif self.lm is not None:
            for lg in self.lm.logs.values():
                try:
                    lg.close()
                except Exception:  # noqa: BLE001 - the process is gone either way
                    pass
        self.sessions = {}
        self.lm = self.rm = self.fetcher_manager = None
        self.registered = False
        self.cluster.trace("crash", self.broker_id, mode)

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

    def close(self) -> None:
        """Release a disk broker's temporary directory."""
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    def slow(self, factor: float, target: str = "all") -> None:
        """Make fetch processing (``"fetch"``), serving produce/fetch (``"disk"``) or both
        (``"all"``) ``factor`` times slower; factor 1 restores normal speed."""
        targets = ("fetch", "disk") if target in ("all", "process") else (target,)
        for t in targets:
            if t not in self.slow_factors:
                raise ValueError(f"slow target must be fetch, disk or all, not {target!r}")
            self.slow_factors[t] = max(1.0, float(factor))

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
        if isinstance(msg, SessionFetchRequest):
            delay = self.processing_delay_ms("disk")
            if delay > 0:
                inc = self.incarnation
                self.loop.call_later(delay, self._fetch_later, inc, src, msg, respond)
            else:
                self._on_fetch(src, msg, respond)
        elif isinstance(msg, ProduceRequest):
            delay = self.processing_delay_ms("disk")
            if delay > 0:
                inc = self.incarnation
                self.loop.call_later(delay, self._produce_later, inc, msg, respond)
            else:
                self._on_produce(msg, respond)
        elif isinstance(msg, LeaderAndIsrRequest):
            self._on_leader_and_isr(msg, respond)
        elif isinstance(msg, MetadataUpdate):
            self._on_metadata(msg)
            respond(True, 16)
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

    def _fetch_later(self, inc: int, src: int, msg: SessionFetchRequest,
                     respond: Callable[[Any, int], None]) -> None:
        if inc == self.incarnation and self.alive:
            self._on_fetch(src, msg, respond)

    def _produce_later(self, inc: int, msg: ProduceRequest,
                       respond: Callable[[Any, int], None]) -> None:
        if inc == self.incarnation and self.alive:
            self._on_produce(msg, respond)

    def _on_metadata(self, msg: MetadataUpdate) -> None:
        rm = self.rm
        if rm is None:
            return
        alive = set(msg.alive)
        for b, epoch in msg.broker_epochs:
            rm.broker_epochs[b] = epoch
            if b != self.broker_id:
                rm.set_broker_eligible(b, b in alive)

    def _on_leader_and_isr(self, req: LeaderAndIsrRequest, respond: Callable[[Any, int], None]
                           ) -> None:
        rm = self.rm
        lm = self.lm
        assert rm is not None and lm is not None and self.fetcher_manager is not None
        for s in req.partition_states:
            if lm.get_log(s.topic, s.partition) is None and self.broker_id in s.replicas:
                # naming the log dir skips LogManager's per-call count of logs per dir
                lm.create_log(s.topic, s.partition, log_dir=self.log_dir)
        response = rm.become_leader_or_follower(req)
        self.leadership_gen += 1
        self.fetcher_manager.shutdown_idle_fetcher_threads()
        led = [s.tp for s in req.partition_states
               if s.leader == self.broker_id
               and response.partition_errors.get(s.tp, Errors.NONE) == Errors.NONE]
        followed = [s.tp for s in req.partition_states if s.leader != self.broker_id]
        self.cluster.trace("leader_and_isr", self.broker_id, len(req.partition_states), len(led))
        self.cluster.checker.became_leader(self, led)
        self.cluster.checker.became_follower(self, followed)
        for session in list(self.sessions.values()):
            if session.waiting is not None:
                self._complete_session(session)
        respond(response, 16 + 8 * len(req.partition_states))
        self._schedule_tick()

    # ---- produce -------------------------------------------------------------------------------
    def _on_produce(self, msg: ProduceRequest, respond: Callable[[Any, int], None]) -> None:
        rm = self.rm
        assert rm is not None
        tp = msg.tp

        self._produce_seq += 1
        key = self._produce_seq

        def reply(results: dict[TopicPartition, ProducePartitionResponse]) -> None:
            self._parked_produce.pop(key, None)
            if msg.acks == 0:
                return
            r = results[tp]
            isr_size = 0
            p = self.rm.partition(tp) if self.rm is not None else None
            if p is not None and p.is_leader and p.row >= 0:
                isr_size = p.manager.table.maximal_isr_size(p.row)
            respond(ProduceResponse(tp, Errors(r.error_code), r.base_offset, isr_size), 48)

        results = rm.append_records({tp: msg.records}, acks=msg.acks, timeout_ms=msg.timeout_ms,
                                    callback=reply)
        ok = results is None or results[tp].error_code == Errors.NONE
        if ok:
            self._wake_sessions(tp)
            self.cluster.checker.leader_touched(self, (tp,))
        if results is not None:
            reply(results)
        else:
            self._parked_produce[key] = respond
            self._schedule_tick()

    # ---- follower fetches on the leader ----------------------------------------------------------
    def _wake_sessions(self, tp: TopicPartition) -> None:
        if not self.sessions:
            return
        for session in list(self.sessions.values()):
            if session.waiting is not None and tp in session.index:
                self._complete_session(session)

    def _on_fetch(self, src: int, msg: SessionFetchRequest, respond: Callable[[Any, int], None]
                  ) -> None:
        rm = self.rm
        assert rm is not None
        key = (src, msg.fetcher_id)
        session = self.sessions.get(key)
        if msg.full:
            if session is not None and session.waiting is not None:
                session.waiting[1].cancel()
            session = self.sessions[key] = LeaderSession(src, msg.fetcher_id)
            session.gen = self.leadership_gen
        elif session is None or msg.session_epoch != session.epoch + 1:
            respond(SessionFetchResponse(None, session_error=True), 16)
            return
        else:
            if session.waiting is not None:
                session.waiting[1].cancel()
                session.waiting = None
            session.refresh_rows(rm, self.leadership_gen)
        session.epoch = msg.session_epoch
        for tp in msg.forgotten:
            session.forget(tp)
        request = msg.request
        changed = [session.upsert(fp, rm) for fp in request.partitions]
        mark = session.mark
        if changed:
            mark[changed] = 1
        stale = (request.replica_epoch != -1
                 and rm.broker_epochs.get(src, -1) > request.replica_epoch)
        # what to read (new records, a new HW or epoch, a follower LEO the leader has not
        # recorded, a follower outside the maximal ISR, a changed entry); §6.2 for the rest
        m = rm.table.kernels.session_fetch(
            session.rows, session.slots, session.fetch_offset, session.log_start,
            session.sent_hw, session.req_epoch, mark, session.n, not stale, self.loop.now,
            request.replica_epoch, session.out)
        if changed:
            mark[changed] = 0
        read_idx = session.out[:m].tolist()
        results: list[tuple[int, FetchPartitionResponse]] = []
        if read_idx:
            parts = session.parts
            read = FetchRequest(request.replica_id, 0, request.min_bytes, request.max_bytes,
                                tuple(parts[i] for i in read_idx),  # type: ignore[misc]
                                request.replica_epoch)
            response = rm.fetch_messages(read)
            assert response is not None
            results = self._select(session, read_idx, response.partitions)
            self.cluster.checker.leader_touched(self, [p.tp for p in read.partitions])
        size = sum(_size(p.records) for _, p in results)
        urgent = any(p.error_code != Errors.NONE or p.diverging_epoch is not None
                     for _, p in results)
        if size >= request.min_bytes or urgent or request.max_wait_ms <= 0:
            self._respond_fetch(session, results, respond)
            return
        inc = self.incarnation
        timer = self.loop.call_later(request.max_wait_ms, self._expire_session, inc, session)
        session.waiting = (respond, timer, request)

    def _select(self, session: LeaderSession, idx: list[int],
                answers: tuple[FetchPartitionResponse, ...]
                ) -> list[tuple[int, FetchPartitionResponse]]:
        """The answers an incremental response carries: records, a new HW, or an error."""
        out = []
        sent_hw = session.sent_hw
        for i, p in zip(idx, answers, strict=True):
            if (p.error_code != Errors.NONE or p.diverging_epoch is not None
                    or _size(p.records) > 0 or p.high_watermark != sent_hw[i]):
                out.append((i, p))
        return out

    def _respond_fetch(self, session: LeaderSession,
                       parts: list[tuple[int, FetchPartitionResponse]],
                       respond: Callable[[Any, int], None]) -> None:
        sent_hw = session.sent_hw
        size = 32
        for i, p in parts:
            size += 40 + _size(p.records)
            if p.error_code == Errors.NONE and session.parts[i] is not None:
                sent_hw[i] = p.high_watermark
        respond(SessionFetchResponse(FetchResponse(Errors.NONE, tuple(p for _, p in parts))),
                size)

    def _expire_session(self, inc: int, session: LeaderSession) -> None:
        if inc != self.incarnation or not self.alive or session.waiting is None:
            return
        self._complete_session(session)

    def _complete_session(self, session: LeaderSession) -> None:
        """DelayedFetch completion over a session: re-read what changed, without updating
        follower state (Kafka's read from the purgatory)."""
        respond, timer, request = session.waiting  # type: ignore[misc]
        session.waiting = None
        timer.cancel()
        rm = self.rm
        assert rm is not None
        session.refresh_rows(rm, self.leadership_gen)
        results: list[tuple[int, FetchPartitionResponse]] = []
        m = rm.table.kernels.session_pending(session.rows, session.fetch_offset, session.sent_hw,
                                             session.req_epoch, session.n, session.out)
        if m:
            idx = session.out[:m].tolist()
            parts = tuple(session.parts[i] for i in idx)
            params = rm.fetch_params(request)
            reads = rm._read_from_log(params, parts, read_from_purgatory=True)
            answers = tuple(
                FetchPartitionResponse(x.tp, x.error, x.high_watermark, x.last_stable_offset,
                                       x.log_start_offset, x.log_end_offset, x.records,
                                       x.diverging_epoch)
                for x in reads)
            results = self._select(session, idx, answers)
        self._respond_fetch(session, results, respond)

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
        if interval is None:
            return
        inc = self.incarnation

        def run() -> None:
            if inc != self.incarnation or not self.alive or self.lm is None:
                return
            self.lm.flush_dirty_logs()
            self.loop.call_later(interval, run)

        self.loop.call_later(interval, run)

    # ---- time-driven work -----------------------------------------------------------------------
    def _schedule_tick(self) -> None:
        rm = self.rm
        if rm is None or not self.alive:
            return
        due = max(rm.next_tick_due_ms(), self.loop.now)
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


def _size(records: Any) -> int:
    return records.nbytes if isinstance(records, memoryview) else len(records)


__all__ = [
    "CONTROLLER_NODE",
    "ConsumerFetch",
    "Disconnected",
    "FetchDriver",
    "Heartbeat",
    "HeartbeatResponse",
    "LeaderSession",
    "MetadataUpdate",
    "ProduceRequest",
    "ProduceResponse",
    "RegisterBroker",
    "RegisterResponse",
    "SessionFetchRequest",
    "SessionFetchResponse",
    "SessionFetcher",
    "SimBroker",
    "SimFetcherManager",
    "SimLeaderEndPoint",
    "is_failure",
]
