"""A deterministic Kafka cluster in one process: brokers, the controller and clients on one
event loop, with a control API for scripted scenarios (KAFKA_SEMANTICS §8, §9).

```python
c = Cluster(3, config={"min.insync.replicas": 2}, seed=7, truncation="leader_epoch")
c.create_topic("t", partitions=1, replication_factor=3)
h = c.produce("t", 0, [b"a", b"b"], acks=-1)
c.run_until(lambda: h.done, max_ms=5_000)
c.crash(1, mode="power"); c.advance(20_000); c.restart(1)
c.partition_state("t", 0)          # leader, epochs, ISR, HW and LEO per replica
c.log(2, "t", 0)                   # broker 2's Log of t-0
```

Brokers are :class:`~replica_core.sim.broker.SimBroker` s (real LogManager, ReplicaManager and
fetchers). A broker that registers again before its session expired (a fast restart) is handled
as a failure then a startup (KIP-380, KRaft) unless ``detect_bounces=False`` (ZooKeeper-era
controllers before Kafka 2.2 let it keep its leaderships and ISR places — what KIP-101's scenario
1 needs). The controller (:class:`~replica_core.controller.Controller`) runs behind
:class:`ControllerNode`, which carries its LeaderAndIsr and metadata over per-broker channels
(in order, one request in flight, retried until the broker answers or is declared dead — so
"lost" controller messages are delayed, as with Kafka's controller channel). Everything runs on
the loop's clock and generators: a seed and a configuration reproduce a run exactly.

Configuration keys are Kafka's dotted names, routed to every layer that knows them: broker
replication settings (:class:`~replica_core.replication.ReplicaConfig`), log settings
(:class:`~replica_core.storage.LogConfig`, broker synonyms accepted), the controller
(``broker.session.timeout.ms`` or ``zookeeper.session.timeout.ms``, default 18000;
``broker.heartbeat.interval.ms``, default 2000; ``controller.socket.timeout.ms``, default 30000)
and clients (``retry.backoff.ms``, ``retry.backoff.max.ms``, ``delivery.timeout.ms``,
``request.timeout.ms``). Unknown
keys raise :class:`~replica_core.errors.InvalidConfigurationError`. One simulator default
differs from Kafka's: ``segment.index.bytes`` is 8192 unless set (the 10 MiB default would be
pre-allocated in memory for every one of thousands of logs).
"""
from __future__ import annotations

import logging
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from replica_core.controller import Controller
from replica_core.controller.controller import (
    DEFAULT_SESSION_TIMEOUT_MS,
    ISR_ORIGIN_ALTER_PARTITION,
    Outbox,
)
from replica_core.errors import Errors, InvalidConfigurationError
from replica_core.replication import ReplicaConfig
from replica_core.replication.messages import (
    LEADER_RECOVERY_RECOVERING,
    AlterPartitionRequest,
    LeaderAndIsrRequest,
    TopicPartition,
)
from replica_core.sim.availability import ClientView
from replica_core.sim.broker import (
    CONTROLLER_NODE,
    Heartbeat,
    HeartbeatResponse,
    MetadataUpdate,
    RegisterBroker,
    RegisterResponse,
    SimBroker,
    is_failure,
)
from replica_core.sim.invariants import InvariantChecker, LogScan, ScanDigests
from replica_core.sim.loop import EventLoop
from replica_core.sim.network import Network, parse_network, rack_map
from replica_core.sim.producer_config import producer_settings
from replica_core.sim.storage_faults import StorageFaults
from replica_core.storage.config import LogConfig

CONTROLLER_KEYS = {
    "broker.session.timeout.ms": "session_timeout_ms",
    "zookeeper.session.timeout.ms": "session_timeout_ms",
    "broker.heartbeat.interval.ms": "heartbeat_interval_ms",
    "controller.socket.timeout.ms": "controller_timeout_ms",
}
CLIENT_KEYS = {
    "retry.backoff.ms": "retry_backoff_ms",
    "retry.backoff.max.ms": "retry_backoff_max_ms",
    "delivery.timeout.ms": "delivery_timeout_ms",
    "request.timeout.ms": "request_timeout_ms",
}
LOG_MANAGER_KEYS = {
    "log.retention.check.interval.ms": "retention_check_interval_ms",
    "log.initial.task.delay.ms": "initial_task_delay_ms",
}
"""Broker settings of the LogManager's scheduled work (retention), routed to ``log_manager``."""
PRODUCER_ONLY_KEYS = frozenset({"enable.idempotence", "max.in.flight.requests.per.connection",
                                "retries"})
"""Producer configs kept as given (validated by :func:`~replica_core.sim.producer_config.
producer_settings` with the workload's acks)."""
SIM_LOG_DEFAULTS = {"segment.index.bytes": 8192}
SCRIPT_CLIENT = 999
"""Network node of the client behind :meth:`Cluster.produce`."""
STORAGE_STREAM = 0x73746F72616765  # spawn-key tag of the brokers' storage generators
PLACEMENT_STREAM = 0x706C616365  # spawn-key tag of the replica placement generators


@dataclass(frozen=True)
class MetadataRequest:
    """A client asks for the partition leaders."""


@dataclass(frozen=True)
class MetadataResponse:
    leaders: np.ndarray


@dataclass
class ReplicaState:
    """One replica as its broker sees it (None fields when the broker is down)."""

    broker: int
    alive: bool
    is_leader: bool = False
    leader_epoch: int = -1
    high_watermark: int | None = None
    log_end_offset: int | None = None
    log_start_offset: int | None = None


@dataclass
class PartitionState:
    """The controller's view (leader, epochs, ISR) and every replica's HW and LEO."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    partition_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    replica_states: dict[int, ReplicaState] = field(default_factory=dict)

    @property
    def high_watermark(self) -> int | None:
        """The leader's HW (None when the partition has no live leader)."""
        rs = self.replica_states.get(self.leader)
        return rs.high_watermark if rs is not None and rs.is_leader else None


class ProduceHandle:
    """Resolves to the offsets of a produced batch, or an error."""

    __slots__ = ("tp", "count", "acks", "done", "error", "base_offset", "sent_ms", "acked_ms",
                 "attempts")

    def __init__(self, tp: TopicPartition, count: int, acks: int, sent_ms: int) -> None:
        self.tp = tp
        self.count = count
        self.acks = acks
        self.done = False
        self.error: Errors | None = None
        self.base_offset = -1
        self.sent_ms = sent_ms
        self.acked_ms = -1
        self.attempts = 0

    @property
    def ok(self) -> bool:
        return self.done and self.error is None

    @property
    def offsets(self) -> range:
        """The offsets the batch got (empty until acknowledged)."""
        if not self.ok or self.base_offset < 0:
            return range(0)
        return range(self.base_offset, self.base_offset + self.count)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.count - 1 if self.ok and self.base_offset >= 0 else -1

    def __repr__(self) -> str:
        state = ("pending" if not self.done else
                 f"error {self.error.name}" if self.error is not None else f"offsets {self.offsets}")
        return f"ProduceHandle({self.tp}, {state})"


def _config_int(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise InvalidConfigurationError(f"Invalid value {value!r} for configuration {key}")
    try:
        return int(value)
    except ValueError:
        raise InvalidConfigurationError(
            f"Invalid value {value!r} for configuration {key}") from None


def split_configs(config: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Route dotted keys to the layers that know them: ``replica``, ``log``, ``controller``,
    ``client``; a key no layer knows raises InvalidConfigurationError."""
    replica_names = set(ReplicaConfig().to_properties())
    log_names = set(LogConfig.config_names()) | set(LogConfig.synonym_names())
    out: dict[str, dict[str, Any]] = {"replica": {}, "log": {}, "controller": {}, "client": {},
                                      "log_manager": {}}
    for key, value in config.items():
        known = False
        if key in replica_names:
            out["replica"][key] = value
            known = True
        if key in log_names:
            out["log"][key] = value
            known = True
        if key in CONTROLLER_KEYS:
            out["controller"][CONTROLLER_KEYS[key]] = int(value)
            known = True
        if key in CLIENT_KEYS:
            out["client"][CLIENT_KEYS[key]] = int(value)
            known = True
        if key in LOG_MANAGER_KEYS:
            out["log_manager"][LOG_MANAGER_KEYS[key]] = _config_int(key, value)
            known = True
        if key in PRODUCER_ONLY_KEYS:
            out["client"][key] = value
            known = True
        if not known:
            raise InvalidConfigurationError(f"unknown configuration {key!r}")
    return out


def configs_in_force(config: Mapping[str, Any], acks: int = -1) -> dict[str, dict[str, Any]]:
    """Every configuration a simulated cluster runs with, defaults included, by the layer that
    reads it: ``broker`` (replication: :class:`~replica_core.replication.ReplicaConfig`),
    ``log`` (the topic-level defaults: :class:`~replica_core.storage.LogConfig`, with the
    simulator's ``segment.index.bytes`` default), ``controller`` and ``producer``; Kafka's
    dotted names, values as Kafka's properties print them. Unknown keys raise
    InvalidConfigurationError (as :class:`Cluster` does). The producer's idempotence is
    resolved for a producer sending with ``acks``."""
    routed = split_configs(config)
    replica = ReplicaConfig.from_properties(routed["replica"]).to_properties()
    replica.pop("truncation", None)  # the simulator's mode, not a Kafka config
    log_manager = log_manager_settings(routed["log_manager"])
    for key, attr in LOG_MANAGER_KEYS.items():
        replica[key] = log_manager[attr]
    log_props = routed["log"]
    if not any(k in log_props for k in ("segment.index.bytes", "log.index.size.max.bytes")):
        log_props = {**SIM_LOG_DEFAULTS, **log_props}
    log = LogConfig.from_properties(log_props).to_properties()
    ctrl = routed["controller"]
    session = int(ctrl.get("session_timeout_ms", DEFAULT_SESSION_TIMEOUT_MS))
    controller = {
        "broker.session.timeout.ms": session,
        "broker.heartbeat.interval.ms": int(ctrl.get("heartbeat_interval_ms",
                                                     max(1, min(2000, session // 3)))),
        "controller.socket.timeout.ms": int(ctrl.get("controller_timeout_ms", 30_000)),
    }
    client = routed["client"]
    request_timeout = int(client.get("request_timeout_ms", replica["request.timeout.ms"]))
    settings = producer_settings(config, acks, request_timeout)
    producer = {
        "retry.backoff.ms": int(client.get("retry_backoff_ms", 100)),
        "retry.backoff.max.ms": int(client.get("retry_backoff_max_ms", 1000)),
        "delivery.timeout.ms": settings.delivery_timeout_ms,
        "request.timeout.ms": request_timeout,
        "enable.idempotence": settings.enable_idempotence,
        "max.in.flight.requests.per.connection": settings.max_in_flight,
        "retries": settings.retries,
    }
    return {"broker": dict(sorted(replica.items())), "log": dict(sorted(log.items())),
            "controller": controller, "producer": producer}


def log_manager_settings(routed: Mapping[str, int]) -> dict[str, int]:
    """The LogManager's scheduling settings in force (Kafka's defaults for those not set);
    out-of-range values raise InvalidConfigurationError naming the key."""
    from replica_core.storage.log_manager import (
        DEFAULT_INITIAL_TASK_DELAY_MS,
        DEFAULT_RETENTION_CHECK_INTERVAL_MS,
    )

    out = {"retention_check_interval_ms": DEFAULT_RETENTION_CHECK_INTERVAL_MS,
           "initial_task_delay_ms": DEFAULT_INITIAL_TASK_DELAY_MS, **routed}
    if out["retention_check_interval_ms"] < 1:
        raise InvalidConfigurationError(
            f"Invalid value {out['retention_check_interval_ms']} for configuration "
            "log.retention.check.interval.ms: Value must be at least 1")
    if out["initial_task_delay_ms"] < 0:
        raise InvalidConfigurationError(
            f"Invalid value {out['initial_task_delay_ms']} for configuration "
            "log.initial.task.delay.ms: Value must be at least 0")
    return out


FETCH_METRICS = (
    "FetchRequestsPerSec.follower", "FetchRequestsPerSec.consumer", "FullFetches",
    "IncrementalFetches", "SessionlessFetches", "FetchSessionErrors",
    "IncrementalFetchSessionEvictionsPerSec", "DelayedFetchCompletions.follower",
    "FetchExpiresPerSec.follower", "DelayedFetchCompletions.consumer",
    "FetchExpiresPerSec.consumer", "StaleReplicaEpochFetches",
)
"""The fetch-path meters of Kafka's ReplicaManager / FetchManager a run reports (counts)."""


class _Tracker:
    """Per-partition leader and ISR size as the controller has them, integrated over time:
    offline, under-min-ISR and under-replicated partition-milliseconds."""

    def __init__(self) -> None:
        self.leader = np.zeros(0, dtype=np.int64)
        self.isr_size = np.zeros(0, dtype=np.int64)
        self.rf = np.zeros(0, dtype=np.int64)
        self.min_isr = np.zeros(0, dtype=np.int64)
        self.offline = 0
        self.under_min = 0
        self.under_rep = 0
        self.ms = {"offline": 0, "under_min_isr": 0, "under_replicated": 0}
        self.t_last: int | None = None
        self._leaders_view: np.ndarray | None = None
        """A read-only copy of ``leader`` while it has not changed (None: none made since)."""

    def leaders_snapshot(self) -> np.ndarray:
        """The leaders now, as a read-only array that later changes do not touch (what a
        metadata response carries): one copy shared by every snapshot until a leader moves."""
        view = self._leaders_view
        if view is None:
            view = self._leaders_view = self.leader.copy()
            view.flags.writeable = False
        return view

    def _advance(self, now: int) -> None:
        if self.t_last is not None and now > self.t_last:
            dt = now - self.t_last
            self.ms["offline"] += self.offline * dt
            self.ms["under_min_isr"] += self.under_min * dt
            self.ms["under_replicated"] += self.under_rep * dt
        self.t_last = now

    def grow(self, n: int, rf: int, min_isr: int) -> None:
        for name, fill in (("leader", -1), ("isr_size", 0), ("rf", rf), ("min_isr", min_isr)):
            setattr(self, name, np.concatenate([getattr(self, name),
                                                np.full(n, fill, dtype=np.int64)]))
        self._leaders_view = None
        self.offline += n

    def set(self, now: int, changes: Iterable[tuple[int, int, int]]) -> None:
        """Each ``(pid, leader, isr_size)`` of ``changes``: partition ``pid`` has this leader
        (−1: none) and ISR size from ``now``; the counts of offline (no leader), under-min-ISR
        and under-replicated partitions follow (a partition without a leader counts as offline
        only). One pass over the columns for all of them; a partition named twice ends as its
        last change says, as changing it once per entry would leave it (the counts telescope)."""
        self._advance(now)
        last = {int(pid): (int(leader), int(isr_size)) for pid, leader, isr_size in changes}
        if not last:
            return
        pids = np.fromiter(last, dtype=np.intp, count=len(last))
        new = np.array(list(last.values()), dtype=np.int64)
        leader, isr_size = new[:, 0], new[:, 1]
        old_leader, old_isr = self.leader[pids], self.isr_size[pids]
        min_isr, rf = self.min_isr[pids], self.rf[pids]
        if (leader != old_leader).any():
            self.leader[pids] = leader
            self._leaders_view = None
        self.isr_size[pids] = isr_size
        led, was_led = leader >= 0, old_leader >= 0
        self.offline += int(np.count_nonzero(~led)) - int(np.count_nonzero(~was_led))
        self.under_min += (int(np.count_nonzero(led & (isr_size < min_isr)))
                           - int(np.count_nonzero(was_led & (old_isr < min_isr))))
        self.under_rep += (int(np.count_nonzero(led & (isr_size < rf)))
                           - int(np.count_nonzero(was_led & (old_isr < rf))))

    def close(self, now: int) -> None:
        self._advance(now)


class _Channel:
    __slots__ = ("queue", "in_flight", "gen")

    def __init__(self, gen: int) -> None:
        self.queue: deque[Any] = deque()
        self.in_flight = False
        self.gen = gen


class ControllerNode:
    """The controller on the network: registration, heartbeats and session expiry,
    AlterPartition, client metadata, and LeaderAndIsr / UpdateMetadata to brokers."""

    def __init__(self, cluster: Cluster, controller: Controller) -> None:
        self.cluster = cluster
        self.controller = controller
        self.loop = cluster.loop
        self.network = cluster.network
        self.channels: dict[int, _Channel] = {}
        self._gen = 0
        self._tick_timer: Any = None
        self.tracker = _Tracker()
        self.isr_shrinks = 0
        """ISR shrinks the partition leaders made (AlterPartition)."""
        self.isr_expands = 0
        """ISR expansions the partition leaders made (AlterPartition)."""
        self.isr_changes: dict[str, dict[str, int]] = {}
        """Committed ISR changes by origin (controller.ISR_ORIGIN_*) and direction
        (shrink / expand / replace), observed through the controller's ISR listener."""
        controller.isr_listener = self._on_isr_change
        self.network.register(CONTROLLER_NODE, self._on_message)

    def _on_isr_change(self, tp: TopicPartition, old: tuple[int, ...], new: tuple[int, ...],
                       origin: str) -> None:
        way = "shrink" if len(new) < len(old) else "expand" if len(new) > len(old) else "replace"
        by = self.isr_changes.setdefault(origin, {"shrink": 0, "expand": 0, "replace": 0})
        by[way] += 1
        self.cluster.checker.isr_changed(tp, old, new)
        if origin == ISR_ORIGIN_ALTER_PARTITION:
            if way == "shrink":
                self.isr_shrinks += 1
            elif way == "expand":
                self.isr_expands += 1

    def _declared_dead(self, broker_id: int) -> None:
        self.cluster.client_view.recovery.broker_declared_dead(broker_id, self.loop.now)
        self.cluster.checker.declared_dead(broker_id)

    # ---- messages ------------------------------------------------------------------------------
    def _on_message(self, src: int, msg: Any, respond: Callable[[Any, int], None]) -> None:
        now = self.loop.now
        ctrl = self.controller
        if isinstance(msg, Heartbeat):
            reg = ctrl.brokers.get(msg.broker_id)
            if reg is not None and reg.alive and reg.epoch == msg.broker_epoch:
                ctrl.heartbeat(msg.broker_id, now)
                respond(HeartbeatResponse(False), 16)
            else:
                respond(HeartbeatResponse(True), 16)
        elif isinstance(msg, AlterPartitionRequest):
            results = self._alter_partition(msg)
            respond(results, 32 + 32 * len(results))
        elif isinstance(msg, MetadataRequest):
            leaders = self.tracker.leaders_snapshot()
            respond(MetadataResponse(leaders), 32 + 4 * len(leaders))
        elif isinstance(msg, RegisterBroker):
            b = msg.broker_id
            old = ctrl.brokers.get(b)
            if old is not None and old.alive and self.cluster.detect_bounces:
                # KIP-380 / KRaft: a broker registering again while its previous incarnation is
                # still live bounced; handle it as a failure (leaders moved, ISR shrunk) first
                self.cluster.trace("controller_bounce", b)
                self.channels.pop(b, None)
                outbox = ctrl.broker_failed(b)
                self._declared_dead(b)
                self._after_change(outbox)
            outbox = ctrl.register_broker(b, now, previous_broker_epoch=msg.previous_broker_epoch,
                                          rack=msg.rack)
            self._gen += 1
            self.channels[b] = _Channel(self._gen)
            respond(RegisterResponse(ctrl.brokers[b].epoch), 16)
            self.cluster.trace("controller_register", b, ctrl.brokers[b].epoch)
            self._after_change(outbox)
            self._schedule_tick()
        else:  # pragma: no cover - programming error
            raise TypeError(f"controller got an unknown message {msg!r}")

    def _alter_partition(self, req: AlterPartitionRequest) -> list[Any]:
        ctrl = self.controller
        results = ctrl.alter_partition(req)
        now = self.loop.now
        tp_ids = self.cluster.tp_ids
        changed = []
        changes = []
        for r in results:
            if r.error_code != Errors.NONE:
                self.cluster.refused("AlterPartition", Errors(r.error_code).name)
                continue
            reg = ctrl.partitions[r.tp]
            pid = tp_ids[r.tp]
            changes.append((pid, reg.leader, len(reg.isr)))
            changed.append(pid)
        if changed:
            self.tracker.set(now, changes)
            self.cluster.client_view.refresh(changed)
        self.cluster.trace("alter_partition", req.broker_id,
                           " ".join(f"{r.tp}:{Errors(r.error_code).name}:{list(r.isr)}"
                                    for r in results[:4]))
        return results

    # ---- controller decisions -----------------------------------------------------------------
    def _after_change(self, outbox: Outbox, *, liveness_changed: bool = True) -> None:
        """Record what changed (full diff against the tracker), then send the requests."""
        ctrl = self.controller
        cluster = self.cluster
        now = self.loop.now
        tracker = self.tracker
        tp_ids = cluster.tp_ids
        elected = unclean = offline = 0
        changed = []
        changes = []
        # read once: each partition is looked at once, and the tracker set after the loop
        leaders, isr_sizes = tracker.leader.tolist(), tracker.isr_size.tolist()
        for tp, reg in ctrl.partitions.items():
            pid = tp_ids[tp]
            old_leader = leaders[pid]
            if old_leader != reg.leader or isr_sizes[pid] != len(reg.isr):
                if (reg.leader >= 0 and reg.leader != old_leader
                        and reg.leader_recovery_state == LEADER_RECOVERY_RECOVERING):
                    cluster.unclean_elections.setdefault(pid, []).append(now)
                    cluster.trace("unclean_election", str(tp), f"leader={reg.leader}")
                    unclean += 1
                elif reg.leader != old_leader:
                    cluster.trace("election", str(tp), f"leader={reg.leader}",
                                  f"epoch={reg.leader_epoch}", f"isr={list(reg.isr)}")
                    if reg.leader >= 0 and old_leader >= 0:
                        elected += 1
                    elif reg.leader < 0:
                        offline += 1
                    else:
                        elected += 1
                changes.append((pid, reg.leader, len(reg.isr)))
                changed.append(pid)
        if changed:
            tracker.set(now, changes)
            cluster.client_view.refresh(changed)
        if elected or unclean or offline:
            cluster.leadership_events.append((now, elected, unclean, offline))
        for b, req in sorted(outbox.requests.items()):
            self.enqueue(b, req)
        if liveness_changed:
            self.broadcast_metadata()

    def broadcast_metadata(self) -> None:
        ctrl = self.controller
        epochs = tuple(sorted((b, r.epoch) for b, r in ctrl.brokers.items()))
        alive = tuple(sorted(b for b, r in ctrl.brokers.items() if r.alive))
        eligible = tuple(sorted(ctrl.isr_eligible_brokers))
        for b in alive:
            self.enqueue(b, MetadataUpdate(epochs, eligible, ctrl.brokers[b].epoch))

    def create_topic(self, name: str, partitions: int, replication_factor: int, *,
                     assignment: Sequence[Sequence[int]] | None, unclean: bool,
                     min_isr: int, partition_ids: Sequence[int] | None = None
                     ) -> list[TopicPartition]:
        outbox = self.controller.create_topic(name, partitions, replication_factor,
                                              assignment=assignment,
                                              unclean_leader_election=unclean,
                                              partition_ids=partition_ids,
                                              min_insync_replicas=min_isr,
                                              placement_random=self.cluster.placement_rng(name))
        ids = range(partitions) if partition_ids is None else partition_ids
        tps = [TopicPartition(name, p) for p in ids]
        rf = len(self.controller.partitions[tps[0]].replicas)
        self.tracker.close(self.loop.now)
        self.tracker.grow(len(tps), rf, min(min_isr, rf))
        self.cluster.client_view.grow(len(tps))
        return tps, outbox  # type: ignore[return-value]

    def tick(self) -> None:
        self._tick_timer = None
        outbox = self.controller.tick(self.loop.now)
        failed = [b for b, ch in self.channels.items()
                  if not self.controller.brokers[b].alive]
        for b in sorted(failed):
            del self.channels[b]
            self.cluster.trace("controller_broker_expired", b)
            self._declared_dead(b)
        if failed:
            self._after_change(outbox)
        self._schedule_tick()

    def broker_failed(self, broker_id: int) -> None:
        """Declare a broker dead now (as its session expiring would)."""
        outbox = self.controller.broker_failed(broker_id)
        self.channels.pop(broker_id, None)
        self._declared_dead(broker_id)
        self._after_change(outbox)

    def preferred_leader_election(self) -> None:
        self._after_change(self.controller.preferred_leader_election(), liveness_changed=False)

    def controlled_shutdown(self, broker_id: int) -> None:
        self.cluster.trace("controlled_shutdown", broker_id)
        self._after_change(self.controller.controlled_shutdown(broker_id))

    def _schedule_tick(self) -> None:
        ctrl = self.controller
        due = [r.last_heartbeat_ms + ctrl.session_timeout_ms + 1
               for r in ctrl.brokers.values() if r.alive]
        if not due:
            return
        at = min(due)
        if self._tick_timer is not None:
            if self._tick_timer.at_ms <= at:
                return
            self._tick_timer.cancel()
        self._tick_timer = self.loop.call_at(at, self.tick)

    # ---- channels ------------------------------------------------------------------------------
    def enqueue(self, broker_id: int, msg: LeaderAndIsrRequest | MetadataUpdate) -> None:
        ch = self.channels.get(broker_id)
        if ch is None:
            return
        ch.queue.append(msg)
        self._pump(broker_id)

    def _pump(self, broker_id: int) -> None:
        ch = self.channels.get(broker_id)
        if ch is None or ch.in_flight or not ch.queue:
            return
        msg = ch.queue[0]
        ch.in_flight = True
        gen = ch.gen
        size = 64 + 48 * len(msg.partition_states) if isinstance(msg, LeaderAndIsrRequest) else 64
        self.network.request(CONTROLLER_NODE, broker_id, msg, size,
                             lambda answer: self._on_answer(broker_id, gen, answer),
                             timeout_ms=self.cluster.controller_timeout_ms)

    def _on_answer(self, broker_id: int, gen: int, answer: Any) -> None:
        ch = self.channels.get(broker_id)
        if ch is None or ch.gen != gen:
            return
        ch.in_flight = False
        if is_failure(answer) or _error_code(answer) == Errors.BROKER_NOT_AVAILABLE:
            # lost, or the broker's new process has not registered yet: send it again
            self.loop.call_later(self.cluster.retry_backoff_ms, self._pump, broker_id)
            return
        ch.queue.popleft()
        self._pump(broker_id)

    def idle(self) -> bool:
        """No controller request queued or in flight."""
        return all(not ch.queue and not ch.in_flight for ch in self.channels.values())


def _error_code(answer: Any) -> Any:
    """The top-level error of a broker's answer to a controller request."""
    return answer if isinstance(answer, Errors) else getattr(answer, "error_code", None)


class Cluster:
    """Brokers, controller and clients of one simulation (see the module docstring)."""

    __slots__ = ("seed", "placement_seed", "detect_bounces", "storage", "truncation", "config",
                 "replica_config", "log_config", "session_timeout_ms", "heartbeat_interval_ms",
                 "controller_timeout_ms", "retry_backoff_ms", "retry_backoff_max_ms",
                 "request_timeout_ms", "delivery_timeout_ms", "_next_producer_id",
                 "replica_socket_timeout_ms", "processing_base_ms", "log_manager_settings",
                 "flush_interval_ms", "loop", "network", "racks", "tps", "tp_ids",
                 "topic_log_configs", "unclean_elections", "leadership_events", "power_failures",
                 "disk_replacements", "crashes", "restarts", "requests_refused",
                 "retention_segments_deleted", "follower_out_of_range", "fault_log",
                 "storage_faults", "fetch_banked", "client_view", "checker", "controller",
                 "controller_node", "_isolated", "_cuts", "_dropping", "brokers", "_producer",
                 "client_ids", "__weakref__")

    def __init__(self, brokers: int | Sequence[int] = 3, *,
                 config: Mapping[str, Any] | None = None, seed: int = 1,
                 storage: str = "memory", truncation: str = "leader_epoch",
                 latency_ms: float = 1.0, bandwidth_mbps: float = 1000.0,
                 strict: bool | None = None, processing_base_ms: float = 1.0,
                 trace_events: int = 200, check_interval_ms: int = 1000,
                 checks_per_interval: int = 10, detect_bounces: bool = True,
                 racks: Sequence[str] | Mapping[int, str] | None = None,
                 network: Mapping[str, Any] | None = None,
                 placement_seed: int | None = None) -> None:
        if truncation not in ("leader_epoch", "high_watermark"):
            raise InvalidConfigurationError("truncation must be leader_epoch or high_watermark")
        if storage not in ("memory", "disk"):
            raise InvalidConfigurationError("storage must be memory or disk")
        ids = list(range(1, int(brokers) + 1)) if isinstance(brokers, int) else \
            [int(b) for b in brokers]
        if not ids or min(ids) < 0 or len(set(ids)) != len(ids):
            raise InvalidConfigurationError(f"bad broker ids {ids}")
        self.seed = int(seed)
        self.placement_seed = self.seed if placement_seed is None else int(placement_seed)
        self.detect_bounces = bool(detect_bounces)
        self.storage = storage
        self.truncation = truncation
        self.config = dict(config or {})
        routed = split_configs(self.config)
        self.replica_config = ReplicaConfig.from_properties(
            {**routed["replica"], "truncation": truncation})
        self.log_config = LogConfig.from_properties({**SIM_LOG_DEFAULTS, **routed["log"]}
                                                    if not any(k in routed["log"] for k in (
                                                        "segment.index.bytes",
                                                        "log.index.size.max.bytes"))
                                                    else routed["log"])
        ctrl_cfg = routed["controller"]
        self.session_timeout_ms = ctrl_cfg.get("session_timeout_ms", DEFAULT_SESSION_TIMEOUT_MS)
        self.heartbeat_interval_ms = ctrl_cfg.get(
            "heartbeat_interval_ms", max(1, min(2000, self.session_timeout_ms // 3)))
        self.controller_timeout_ms = ctrl_cfg.get("controller_timeout_ms", 30_000)
        client = routed["client"]
        self.retry_backoff_ms = client.get("retry_backoff_ms", 100)
        self.retry_backoff_max_ms = client.get("retry_backoff_max_ms", 1000)
        self.request_timeout_ms = client.get("request_timeout_ms",
                                             self.replica_config.request_timeout_ms)
        self.delivery_timeout_ms = client.get("delivery_timeout_ms", 120_000)
        self._next_producer_id = 0
        self.replica_socket_timeout_ms = self.replica_config.replica_socket_timeout_ms
        self.processing_base_ms = float(processing_base_ms)
        self.log_manager_settings = log_manager_settings(routed["log_manager"])
        """``log.retention.check.interval.ms`` / ``log.initial.task.delay.ms`` of every broker."""
        flush_ms = min([int(cfg.flush_ms) for cfg in [self.log_config]])
        scheduler = self.config.get("log.flush.scheduler.interval.ms")
        if scheduler is not None:  # Kafka's log flusher period (LogManager flushCheckMs)
            flush_ms = _scheduler_ms(scheduler)
        self.flush_interval_ms: int | None = flush_ms if flush_ms < 2**62 else None
        """How often the log flusher runs: ``log.flush.scheduler.interval.ms``, else (a
        simulator default; Kafka's is Long.MAX, never) the broker-level ``flush.ms``."""
        self.loop = EventLoop(self.seed)
        self.network = Network(self.loop, latency_ms=latency_ms,
                               bandwidth_bytes_per_ms=float(bandwidth_mbps) * 125.0)
        self.racks: dict[int, str] = rack_map(ids, racks)
        """``broker.rack`` of each broker that has one (registered with the controller)."""
        if racks is not None or network:
            self.network.configure(
                parse_network(network, racks=set(self.racks.values()), brokers=ids),
                racks=self.racks, seed=self.seed)
        self.tps: list[TopicPartition] = []
        self.tp_ids: dict[TopicPartition, int] = {}
        self.topic_log_configs: dict[str, LogConfig] = {}
        self.unclean_elections: dict[int, list[int]] = {}
        self.leadership_events: list[tuple[int, int, int, int]] = []
        self.power_failures: dict[int, list[int]] = {}
        self.disk_replacements: dict[int, list[int]] = {}
        """Loop ms of each broker's disk replacements (for loss attribution)."""
        self.crashes = 0
        self.restarts = 0
        self.requests_refused: dict[str, dict[str, int]] = {}
        """Requests a broker or the controller refused, by API and Kafka error name (KIP-380's
        fenced controller requests, KIP-903's INELIGIBLE_REPLICA, ...): what users are shown."""
        self.retention_segments_deleted = 0
        self.follower_out_of_range = 0
        """Fetch answers a follower met with OFFSET_OUT_OF_RANGE (then reset its position)."""
        self.fault_log: list[tuple[int, str, str, tuple[int, ...]]] = []
        """Injected faults: (loop ms, description, kind, brokers involved)."""
        self.storage_faults = StorageFaults(self)
        """Torn writes, bit flips, lost and slow fsyncs, and the recovery they caused."""
        self.fetch_banked: dict[int, dict[str, int]] = {}
        """Fetch-path meters of broker processes that have stopped, per broker."""
        self.client_view = ClientView(self, client_node=SCRIPT_CLIENT)
        if strict is None:
            strict = truncation == "leader_epoch"
        self.checker = InvariantChecker(self, strict=strict, trace_events=trace_events,
                                        check_interval_ms=check_interval_ms,
                                        sample_per_check=checks_per_interval,
                                        suspect_ms=max(10_000,
                                                       3 * self.replica_config.replica_lag_time_max_ms))
        self.checker.leadership_listeners.append(
            lambda broker, tps: self.client_view.refresh_tps(tps, broker.broker_id))
        self.controller = Controller(
            session_timeout_ms=self.session_timeout_ms,
            eligible_leader_replicas=self.replica_config.eligible_leader_replicas_enable)
        self.controller_node = ControllerNode(self, self.controller)
        self._isolated: list[int] = []
        self._cuts: list[tuple[frozenset[int], frozenset[int]]] = []
        self._dropping: set[int] = set()
        self.brokers: dict[int, SimBroker] = {b: SimBroker(self, b, storage=storage) for b in ids}
        self._producer: Any = None
        self.client_ids: list[int] = [SCRIPT_CLIENT]
        for b in ids:
            self.brokers[b].start()
        self.run_until(lambda: all(br.registered for br in self.brokers.values()), 30_000)
        if check_interval_ms > 0:
            self.loop.call_later(check_interval_ms, self._periodic_check)

    # ---- bookkeeping ---------------------------------------------------------------------------
    def placement_rng(self, topic: str) -> np.random.Generator:
        """The generator the controller's rack-aware placement of ``topic`` draws from: the
        placement seed (the scenario's, in every lane) and the topic name only."""
        key = (PLACEMENT_STREAM, zlib.crc32(topic.encode()))
        return np.random.default_rng(np.random.SeedSequence(self.placement_seed, spawn_key=key))

    def storage_rng(self, broker_id: int, incarnation: int) -> np.random.Generator:
        """The generator a broker's LogManager draws segment roll jitter from when it starts:
        derived from the seed, the broker and its incarnation only (a key of its own, not a
        spawn from the loop's sequence), so it shifts no other stream of the run."""
        key = (STORAGE_STREAM, int(broker_id), int(incarnation))
        return np.random.default_rng(np.random.SeedSequence(self.seed, spawn_key=key))

    def note_fault(self, description: str, kind: str, brokers: Sequence[int]) -> None:
        """An injected fault starts now (for loss attribution and the recovery timeline)."""
        brokers = tuple(int(b) for b in brokers)
        self.fault_log.append((self.loop.now, description, kind, brokers))
        self.client_view.recovery.fault(self.loop.now, description, kind, brokers)

    def fault_before(self, at_ms: int, brokers: Iterable[int], *,
                     kinds: Iterable[str] | None = None) -> str | None:
        """The latest injected fault at or before ``at_ms`` involving one of ``brokers`` (and
        of one of ``kinds``), by its description; None if there is none."""
        wanted = set(brokers)
        kinds = None if kinds is None else set(kinds)
        for t, desc, kind, involved in reversed(self.fault_log):
            if t <= at_ms and (kinds is None or kind in kinds) and wanted & set(involved):
                return desc
        return None

    def _bank_fetch_metrics(self, broker: SimBroker) -> None:
        """Keep a stopping broker process's fetch-path meters (its next incarnation gets a new
        ReplicaManager whose meters start at zero)."""
        if broker.rm is None:
            return
        metrics = broker.rm.meters()
        bank = self.fetch_banked.setdefault(broker.broker_id, dict.fromkeys(FETCH_METRICS, 0))
        for key in FETCH_METRICS:
            bank[key] += int(metrics.get(key, 0))

    def fetch_metrics(self) -> dict[int, dict[str, int]]:
        """Per broker, every fetch-path meter summed over all its processes so far, and the
        current number of incremental fetch sessions it caches (0 when down)."""
        out = {}
        for b in sorted(self.brokers):
            total = dict(self.fetch_banked.get(b, dict.fromkeys(FETCH_METRICS, 0)))
            rm = self.brokers[b].rm
            sessions = 0
            if rm is not None:
                metrics = rm.meters()
                for key in FETCH_METRICS:
                    total[key] += int(metrics.get(key, 0))
                sessions = int(metrics.get("NumIncrementalFetchSessions", 0))
            total["NumIncrementalFetchSessions"] = sessions
            out[b] = total
        return out

    def refused(self, api: str, error: str) -> None:
        """Count a request refused with ``error`` (a Kafka error name)."""
        by_error = self.requests_refused.setdefault(api, {})
        by_error[error] = by_error.get(error, 0) + 1

    def trace(self, kind: str, *args: Any) -> None:
        """Append an event to the invariant checker's trace (kept for violation reports)."""
        self.checker.trace.append((self.loop.clock.now_ms, kind, args))

    def _periodic_check(self) -> None:
        self.checker.periodic()
        self.loop.call_later(self.checker.check_interval_ms, self._periodic_check)

    def leader_and_isr(self, tp: TopicPartition) -> tuple[int, tuple[int, ...]]:
        reg = self.controller.partitions.get(tp)
        return (reg.leader, reg.isr) if reg is not None else (-1, ())

    def replicas_of(self, tp: TopicPartition) -> tuple[int, ...]:
        reg = self.controller.partitions.get(tp)
        return reg.replicas if reg is not None else ()

    @property
    def now_ms(self) -> int:
        return self.loop.now

    @property
    def elapsed_s(self) -> float:
        return self.loop.elapsed_ms / 1000.0

    # ---- topics and clients --------------------------------------------------------------------
    def init_producer_id(self) -> tuple[int, int]:
        """An InitProducerId answer for a new idempotent producer: ``(producer id, epoch 0)``.
        Ids are handed out in order from 0, as the first block of Kafka's producer-id
        manager (no round trip is simulated)."""
        pid = self._next_producer_id
        self._next_producer_id += 1
        return pid, 0

    def create_topic(self, name: str, partitions: int, replication_factor: int, *,
                     configs: Mapping[str, Any] | None = None,
                     assignment: Sequence[Sequence[int]] | None = None,
                     wait: bool = True, partition_ids: Sequence[int] | None = None
                     ) -> list[TopicPartition]:
        """Create a topic (assignment as Kafka's rack-unaware one unless given); with ``wait``
        run until every live replica has its LeaderAndIsr. ``partition_ids`` hosts only those
        partitions of the topic (a fetcher lane, see :mod:`replica_core.sim.lanes`)."""
        configs = dict(configs or {})
        for key in configs:
            if key not in LogConfig.config_names():
                raise InvalidConfigurationError(f"unknown topic config {key!r}")
        topic_cfg = LogConfig.from_properties({**self.log_config.to_properties(), **configs})
        self.topic_log_configs[name] = topic_cfg
        for broker in self.brokers.values():
            if broker.lm is not None:
                broker.lm.topic_configs[name] = topic_cfg
        unclean = bool(configs["unclean.leader.election.enable"]) if \
            "unclean.leader.election.enable" in configs else \
            self.replica_config.unclean_leader_election_enable
        if isinstance(unclean, str):
            unclean = unclean.lower() == "true"
        min_isr = int(topic_cfg.min_insync_replicas) if topic_cfg.min_insync_replicas != 1 \
            else self.replica_config.min_insync_replicas
        first = len(self.tps)
        tps, outbox = self.controller_node.create_topic(
            name, partitions, replication_factor, assignment=assignment, unclean=unclean,
            min_isr=min_isr, partition_ids=partition_ids)
        for k, tp in enumerate(tps):
            self.tp_ids[tp] = first + k
        self.tps.extend(tps)
        self.controller_node._after_change(outbox, liveness_changed=False)
        if wait:
            self.run_until(self.controller_node.idle, 60_000)
        return tps

    @property
    def producer(self) -> Any:
        """The client behind :meth:`produce` (node :data:`SCRIPT_CLIENT`)."""
        if self._producer is None:
            from replica_core.sim.workload import Producer

            self._producer = Producer(self, SCRIPT_CLIENT, metadata="controller")
        return self._producer

    def produce(self, topic: str, partition: int, values: Sequence[bytes], *, acks: int | str = -1,
                keys: Sequence[bytes | None] | None = None, retries: int = 0,
                timeout_ms: int | None = None) -> ProduceHandle:
        """Send one batch to the partition's current leader (the controller's view); the handle
        resolves to its offsets or an error. Acknowledged batches join the durability ledger."""
        from replica_core.sim.scenario import parse_acks

        return self.producer.produce(TopicPartition(topic, partition), list(values),
                                     acks=parse_acks(acks), keys=keys, retries=retries,
                                     timeout_ms=timeout_ms)

    def send_one_way(self, src: int, dst: int, msg: Any, size: int) -> None:
        """A message without an answer (acks=0 produce): lost if the link is down."""
        broker = self.brokers.get(dst)
        if broker is None:
            return
        self.network.send(src, dst, msg, size,
                          lambda m: broker._on_message(src, m, _no_reply))  # noqa: SLF001

    # ---- time ----------------------------------------------------------------------------------
    def advance(self, ms: int) -> None:
        """Run every event due in the next ``ms`` simulated milliseconds."""
        self.loop.advance(ms)

    def step(self) -> bool:
        """Run the next event; False when nothing is scheduled."""
        return self.loop.step()

    def run_until(self, predicate: Callable[[], bool], max_ms: int) -> bool:
        """Run until ``predicate()`` holds (True) or ``max_ms`` pass (False)."""
        return self.loop.run_until(predicate, max_ms)

    # ---- faults --------------------------------------------------------------------------------
    def crash(self, broker: int, mode: str = "process", *, torn_write: str | None = None,
              bit_flips: int = 0) -> None:
        """Crash a broker: ``"process"`` (page cache survives) or ``"power"`` (only flushed
        bytes survive; ``torn_write`` "subset"/"prefix" lets some unflushed pages through,
        ``bit_flips`` flips bits in the files being written — sim/storage_faults.py). The
        controller notices when its session expires."""
        b = self.brokers[broker]
        if not b.alive:
            return
        self._bank_fetch_metrics(b)
        if mode == "power":
            self.checker.power_failing(b)
            self.storage_faults.power_failure(b, torn_write, int(bit_flips))
        else:
            b.crash(mode)
        self.crashes += 1
        if mode == "power":
            self.power_failures.setdefault(broker, []).append(self.loop.now)
        self.client_view.refresh_broker(broker)

    def shutdown(self, broker: int, *, delay_ms: int = 1000) -> None:
        """Controlled shutdown: the controller moves leadership away and drops the broker from
        ISRs (§8.3), then after ``delay_ms`` the broker stops cleanly (logs flushed, clean
        marker written) and the controller marks it dead at once."""
        b = self.brokers[broker]
        if not b.alive:
            return
        self.controller_node.controlled_shutdown(broker)
        self.loop.call_later(delay_ms, self._finish_shutdown, broker, b.incarnation)

    def _finish_shutdown(self, broker: int, incarnation: int) -> None:
        b = self.brokers[broker]
        if not b.alive or b.incarnation != incarnation:
            return
        self._bank_fetch_metrics(b)
        b.shutdown()
        self.client_view.refresh_broker(broker)
        self.controller_node.broker_failed(broker)

    def restart(self, broker: int) -> None:
        """Restart a crashed broker: log recovery, registration (new broker epoch), LeaderAndIsr."""
        b = self.brokers[broker]
        if b.alive:
            return
        self.checker.broker_restarted(b)
        b.restart()
        self.storage_faults.recovered(b)
        self.checker.broker_started(b)
        self.restarts += 1
        self.client_view.refresh_broker(broker)
        for tp in b.rm.partitions() if b.rm is not None else ():
            self.checker.suspect(tp)

    def replace_disk(self, broker: int) -> None:
        """A disk replacement: the broker stops (a process crash if it runs), comes back with
        an empty data directory and starts again at once — registering with no previous broker
        epoch, as a stale replica whose old fetches may still be in flight (KIP-903)."""
        b = self.brokers[broker]
        if b.alive:
            self.crash(broker, "process")
        b.wipe_log_dir()
        self.disk_replacements.setdefault(broker, []).append(self.loop.now)
        self.restart(broker)

    def isolate(self, broker: int) -> None:
        """Cut every link to and from a broker (it keeps running)."""
        if broker not in self._isolated:
            self._isolated.append(broker)
        self.network.isolate(broker)
        self.trace("isolate", broker)
        self.client_view.refresh_all()

    def unisolate(self, broker: int) -> None:
        """Restore one broker's links (other isolations and partitions stay)."""
        if broker in self._isolated:
            self._isolated.remove(broker)
            self._reapply_network()
        self.trace("unisolate", broker)
        self.client_view.refresh_all()

    def partition_network(self, side_a: Iterable[int], side_b: Iterable[int] | None = None) -> None:
        """A network partition between ``side_a`` and ``side_b`` (default: every other node,
        the controller and clients included)."""
        a = frozenset(int(x) for x in side_a)
        if side_b is None:
            side_b = [n for n in [*self.brokers, CONTROLLER_NODE, *self.client_ids] if n not in a]
        b = frozenset(int(x) for x in side_b)
        self._cuts.append((a, b))
        self.network.partition(set(a), set(b))
        self.trace("partition", sorted(a), sorted(b))
        self.client_view.refresh_all()

    def heal(self) -> None:
        """End every isolation and network partition."""
        self._isolated.clear()
        self._cuts.clear()
        self.network.heal()
        self.trace("heal")
        self.client_view.refresh_all()

    def heal_partition(self, side_a: Iterable[int], side_b: Iterable[int] | None = None) -> None:
        """End the network partitions whose first side is ``side_a`` (and second ``side_b``,
        when given)."""
        a = frozenset(int(x) for x in side_a)
        b = None if side_b is None else frozenset(int(x) for x in side_b)
        self._cuts = [c for c in self._cuts if c[0] != a or (b is not None and c[1] != b)]
        self._reapply_network()
        self.client_view.refresh_all()

    def _reapply_network(self) -> None:
        self.network.heal()
        for b in self._isolated:
            self.network.isolate(b)
        for a, b in self._cuts:
            self.network.partition(set(a), set(b))

    # ---- failure domains (broker.rack) -----------------------------------------------------------
    def brokers_in_racks(self, racks: Iterable[str]) -> tuple[int, ...]:
        """The brokers of these racks (InvalidConfigurationError naming an unknown rack)."""
        names = [str(r) for r in racks]
        known = set(self.racks.values())
        for r in names:
            if r not in known:
                raise InvalidConfigurationError(
                    f"unknown rack {r!r} (racks: {sorted(known)})")
        wanted = set(names)
        return tuple(b for b, r in self.racks.items() if r in wanted)

    def _other_racks(self, racks: Iterable[str]) -> tuple[int, ...]:
        inside = set(self.brokers_in_racks(racks))
        return tuple(b for b in self.racks if b not in inside)

    def crash_rack(self, rack: str, mode: str = "process") -> None:
        """A whole rack (availability zone) fails: every broker in it crashes (``"power"``:
        only flushed bytes survive on any of them)."""
        for b in self.brokers_in_racks([rack]):
            self.crash(b, mode)

    def restart_rack(self, rack: str) -> None:
        """Every crashed broker of a rack starts again (one down from a fault of its own
        too)."""
        for b in self.brokers_in_racks([rack]):
            self.restart(b)

    def isolate_rack(self, rack: str) -> None:
        """Cut a rack off: its brokers reach one another but nothing outside it — no broker of
        another rack, no controller, no client (the controller quorum and the clients live
        outside every rack)."""
        self.partition_network(self.brokers_in_racks([rack]))

    def unisolate_rack(self, rack: str) -> None:
        """End :meth:`isolate_rack` (other cuts stay)."""
        inside = frozenset(self.brokers_in_racks([rack]))
        self._cuts = [c for c in self._cuts if c[0] != inside or CONTROLLER_NODE not in c[1]]
        self._reapply_network()
        self.trace("unisolate_rack", rack)
        self.client_view.refresh_all()

    def partition_racks(self, racks: Iterable[str], others: Iterable[str] | None = None) -> None:
        """A network partition between the brokers of ``racks`` and those of ``others``
        (default: every other rack); the controller and clients still reach both sides."""
        racks = list(racks)
        side_b = self._other_racks(racks) if others is None else self.brokers_in_racks(others)
        self.partition_network(self.brokers_in_racks(racks), side_b)

    def heal_rack_partition(self, racks: Iterable[str], others: Iterable[str] | None = None
                            ) -> None:
        """End :meth:`partition_racks` for the same sides."""
        racks = list(racks)
        side_b = self._other_racks(racks) if others is None else self.brokers_in_racks(others)
        self.heal_partition(self.brokers_in_racks(racks), side_b)

    def slow(self, broker: int, factor: float, target: str = "all") -> None:
        """Slow a broker down: its fetch processing (``"fetch"``: a slow follower), its serving
        of produce and fetch requests (``"disk"``), or both; ``factor`` 1 restores it."""
        self.brokers[broker].slow(factor, target)
        self.trace("slow", broker, factor, target)

    def flush(self, broker: int) -> None:
        """Page-cache writeback on one broker: fsync every log it has (what it wrote so far
        survives a later power failure)."""
        b = self.brokers[broker]
        if b.lm is not None:
            for tp in sorted(b.lm.logs):
                b.lm.logs[tp].flush()
        self.trace("flush", broker)

    def drop_controller_messages(self, brokers: Iterable[int] | None = None) -> None:
        """Lose every message from the controller to these brokers (default all) until
        :meth:`restore_controller_messages`; the controller retries after its request timeout."""
        targets = sorted(self.brokers) if brokers is None else [int(b) for b in brokers]
        for b in targets:
            self.network.link(CONTROLLER_NODE, b).loss_rate = 1.0
            self._dropping.add(b)
        self.trace("drop_controller_messages", targets)

    def restore_controller_messages(self, brokers: Iterable[int] | None = None) -> None:
        targets = sorted(self._dropping) if brokers is None else [int(b) for b in brokers]
        for b in targets:
            self.network.link(CONTROLLER_NODE, b).loss_rate = 0.0
            self._dropping.discard(b)
        self.trace("restore_controller_messages", targets)

    def preferred_leader_election(self) -> None:
        """Move leadership back to each partition's first replica where it is in the ISR."""
        self.controller_node.preferred_leader_election()

    # ---- views ---------------------------------------------------------------------------------
    def partition_state(self, topic: str, partition: int) -> PartitionState:
        """Leader, epochs and ISR (controller), and every replica's HW and LEO (brokers)."""
        tp = TopicPartition(topic, partition)
        reg = self.controller.partitions[tp]
        state = PartitionState(topic, partition, reg.leader, reg.leader_epoch,
                               reg.partition_epoch, tuple(reg.isr), tuple(reg.replicas))
        for b in reg.replicas:
            broker = self.brokers.get(b)
            rs = ReplicaState(b, bool(broker is not None and broker.alive))
            if broker is not None and broker.rm is not None:
                p = broker.rm.partition(tp)
                if p is not None and p.log is not None:
                    rs.is_leader = p.is_leader
                    rs.leader_epoch = p.leader_epoch
                    rs.high_watermark = p.high_watermark
                    rs.log_end_offset = p.log_end_offset
                    rs.log_start_offset = p.log_start_offset
            state.replica_states[b] = rs
        return state

    def log(self, broker: int, topic: str, partition: int) -> Any:
        """Broker ``broker``'s Log of the partition (None when down or not hosted)."""
        b = self.brokers[broker]
        if b.rm is None:
            return None
        return b.rm.local_log(TopicPartition(topic, partition))

    def check_invariants(self, digests: ScanDigests | None = None
                         ) -> dict[tuple[int, TopicPartition], LogScan]:
        """Run every invariant over every partition now (raises InvariantViolation); returns
        the log scans the check made, and fills ``digests`` (when given) with the records
        digests it computed (:meth:`InvariantChecker.full_check_scans`)."""
        return self.checker.full_check_scans(digests)

    def close(self) -> None:
        """Release temporary directories (storage="disk")."""
        for b in self.brokers.values():
            b.close()


def _scheduler_ms(value: Any) -> int:
    """``log.flush.scheduler.interval.ms`` as a number of ms."""
    try:
        ms = int(value)
    except (TypeError, ValueError):
        raise InvalidConfigurationError(
            f"log.flush.scheduler.interval.ms: not an integer: {value!r}") from None
    if ms < 1:
        raise InvalidConfigurationError(
            f"log.flush.scheduler.interval.ms must be at least 1, got {ms}")
    return ms


def _no_reply(response: Any, size: int) -> None:
    """Where the answers to one-way messages go."""


def quiet_logs(level: int = logging.CRITICAL) -> Callable[[], None]:
    """Silence replica_core's log output (fetcher warnings during failures); returns a restore."""
    logger = logging.getLogger("replica_core")
    old = logger.level
    logger.setLevel(level)
    return lambda: logger.setLevel(old)


__all__ = ["FETCH_METRICS", "Cluster", "ControllerNode", "PartitionState", "ProduceHandle",
           "ReplicaState", "SCRIPT_CLIENT", "configs_in_force", "log_manager_settings", "quiet_logs",
           "split_configs"]
