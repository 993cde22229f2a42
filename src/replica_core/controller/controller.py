"""The controller as a sans-IO state machine: broker liveness, topic creation, elections,
ISR changes from AlterPartition, and the LeaderAndIsr requests to send (KAFKA_SEMANTICS §6.7, §8).

It never sends anything itself: every method returns the :class:`Outbox` of requests for the
caller (the simulator's network, a test) to deliver, delay or lose. Time comes from the caller.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from replica_core.controller.election import (
    NO_LEADER,
    controlled_shutdown_election,
    new_partition_election,
    offline_partition_election,
    preferred_replica_election,
)
from replica_core.controller.elr import PartitionChange, effective_min_isr, partition_change
from replica_core.controller.replica_placer import (
    PlacementRandom,
    UsableBroker,
    place_replicas,
    racks_configured,
)
from replica_core.errors import Errors
from replica_core.replication.messages import (
    LEADER_RECOVERY_RECOVERED,
    LEADER_RECOVERY_RECOVERING,
    AlterPartitionRequest,
    AlterPartitionResult,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    TopicPartition,
)

DEFAULT_SESSION_TIMEOUT_MS = 18_000  # zookeeper.session.timeout.ms (KRaft: broker.session.timeout.ms = 9000)

ISR_ORIGIN_ALTER_PARTITION = "alter_partition"
"""The partition leader's AlterPartition (its ISR shrink or expansion) committed."""
ISR_ORIGIN_BROKER_FAILURE = "broker_failure"
"""The controller removed a broker whose session ended (from ISRs it followed in, and the
ISR the offline election leaves for the partitions it led)."""
ISR_ORIGIN_CONTROLLED_SHUTDOWN = "controlled_shutdown"
ISR_ORIGIN_ELECTION = "election"
"""An offline partition elected when a broker registers (unclean: the ISR becomes the leader)."""
ISR_ORIGIN_UNCLEAN_SHUTDOWN = "unclean_shutdown"
"""With ELR: a broker registered after an unclean shutdown and left every ISR and ELR (KIP-966)."""

IsrListener = Callable[[TopicPartition, tuple[int, ...], tuple[int, ...], str], None]
"""``listener(tp, old_isr, new_isr, origin)``: an observer of every committed ISR change."""


@dataclass
class PartitionRegistration:
    """The controller's record of one partition (ZK ``LeaderIsrAndControllerEpoch``)."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    leader_recovery_state: int = LEADER_RECOVERY_RECOVERED
    elr: tuple[int, ...] = ()
    """Eligible leader replicas (KIP-966; empty unless ELR is enabled)."""
    last_known_elr: tuple[int, ...] = ()
    """The leader when the ISR last became empty (Kafka's ``lastKnownElr``; ELR only)."""


@dataclass
class BrokerRegistration:
    broker_id: int
    epoch: int
    alive: bool = True
    last_heartbeat_ms: int = 0
    shutting_down: bool = False
    rack: str | None = None
    """``broker.rack`` as the broker registered it (None: not set)."""


@dataclass
class ControllerStats:
    leader_elections: int = 0
    unclean_elections: int = 0
    offline_partitions_events: int = 0
    isr_changes: int = 0
    elr_elections: int = 0
    """Leaders elected from the ELR (KIP-966)."""
    unclean_shutdowns: int = 0
    """Registrations after an unclean shutdown that removed the broker from an ISR or ELR."""


@dataclass
class Outbox:
    """LeaderAndIsr requests to deliver, by destination broker."""

    requests: dict[int, LeaderAndIsrRequest] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.requests)

    def merge(self, other: Outbox) -> None:
        """Add ``other``'s requests: one request per broker carrying both's partition states
        (``other``'s, the later decision, where both name a partition)."""
        for b, req in other.requests.items():
            mine = self.requests.get(b)
            if mine is not None:
                states = {(s.topic, s.partition): s for s in mine.partition_states}
                states.update({(s.topic, s.partition): s for s in req.partition_states})
                leaders = tuple(sorted(set(mine.live_leaders) | set(req.live_leaders)))
                req = LeaderAndIsrRequest(req.controller_id, req.controller_epoch,
                                          req.broker_epoch, tuple(states.values()), leaders)
            self.requests[b] = req


def assign_replicas(
    n_partitions: int, replication_factor: int, brokers: Sequence[int], *, start_index: int = 0,
    replica_shift: int | None = None,
) -> list[tuple[int, ...]]:
    """Kafka's rack-unaware replica assignment (``AdminUtils.assignReplicasToBrokers``):
    leaders round-robin from ``start_index``; followers shifted by a per-round step so that
    replicas of consecutive partitions spread over different brokers."""
    n = len(brokers)
    if replication_factor < 1 or replication_factor > n:
        raise ValueError(f"replication factor {replication_factor} needs 1..{n} brokers")
    shift = start_index if replica_shift is None else replica_shift
    out = []
    for p in range(n_partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start_index) % n
        replicas = [brokers[first]]
        for j in range(replication_factor - 1):
            step = 1 + (shift + j) % (n - 1)
            replicas.append(brokers[(first + step) % n])
        out.append(tuple(replicas))
    return out


class Controller:
    """Cluster metadata and the decisions Kafka's controller makes on it."""

    def __init__(self, controller_id: int = -1, *, controller_epoch: int = 1,
                 session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
                 eligible_leader_replicas: bool = False):
        self.controller_id = controller_id
        self.elr_enabled = bool(eligible_leader_replicas)
        """``eligible.leader.replicas.enable`` (KIP-966; §8.6): elections and ISR changes go
        through :func:`~replica_core.controller.elr.partition_change`."""
        self.min_isr: dict[str, int] = {}
        """Each topic's ``min.insync.replicas`` (the ELR rules need it)."""
        self.controller_epoch = controller_epoch
        self.session_timeout_ms = session_timeout_ms
        self.brokers: dict[int, BrokerRegistration] = {}
        self.partitions: dict[TopicPartition, PartitionRegistration] = {}
        self.unclean_enabled: dict[str, bool] = {}
        self.stats = ControllerStats()
        self._next_broker_epoch = 100
        self.isr_listener: IsrListener | None = None
        """Observer of every ISR change the controller commits, with its origin (one of the
        ``ISR_ORIGIN_*`` names); it only watches, never changes a decision."""

    def _isr_changed(self, tp: TopicPartition, old: tuple[int, ...], new: tuple[int, ...],
                     origin: str) -> None:
        if self.isr_listener is not None and tuple(old) != tuple(new):
            self.isr_listener(tp, tuple(old), tuple(new), origin)

    # --- views ---------------------------------------------------------------------------------
    @property
    def live_brokers(self) -> set[int]:
        return {b for b, r in self.brokers.items() if r.alive}

    @property
    def isr_eligible_brokers(self) -> set[int]:
        """Brokers a leader may add to an ISR: registered, unfenced and not in controlled
        shutdown (KIP-841; what the metadata brokers receive says)."""
        return {b for b, r in self.brokers.items() if r.alive and not r.shutting_down}

    def offline_partitions(self) -> list[TopicPartition]:
        return [tp for tp, reg in self.partitions.items() if reg.leader == NO_LEADER]

    def partitions_of(self, broker_id: int) -> list[TopicPartition]:
        return [tp for tp, reg in self.partitions.items() if broker_id in reg.replicas]

    # --- outbox helpers ------------------------------------------------------------------------
    def _state(self, tp: TopicPartition, reg: PartitionRegistration, is_new: bool = False):
        return LeaderAndIsrPartitionState(
            topic=tp.topic, partition=tp.partition, controller_epoch=self.controller_epoch,
            leader=reg.leader, leader_epoch=reg.leader_epoch, isr=reg.isr,
            partition_epoch=reg.partition_epoch, replicas=reg.replicas, is_new=is_new,
            leader_recovery_state=reg.leader_recovery_state,
        )

    def _fan_out(self, changed: Iterable[TopicPartition], is_new: bool = False,
                 only: Iterable[int] | None = None) -> Outbox:
        """LeaderAndIsr for ``changed`` partitions to every live replica (or ``only`` those)."""
        per_broker: dict[int, list[LeaderAndIsrPartitionState]] = defaultdict(list)
        targets = None if only is None else set(only)
        live = self.live_brokers
        for tp in changed:
            reg = self.partitions[tp]
            state = self._state(tp, reg, is_new)
            for b in reg.replicas:
                if b in live and (targets is None or b in targets):
                    per_broker[b].append(state)
        out = Outbox()
        for b, states in sorted(per_broker.items()):
            leaders = tuple(sorted({s.leader for s in states if s.leader != NO_LEADER}))
            out.requests[b] = LeaderAndIsrRequest(
                controller_id=self.controller_id, controller_epoch=self.controller_epoch,
                broker_epoch=self.brokers[b].epoch, partition_states=tuple(states),
                live_leaders=leaders,
            )
        return out

    # --- brokers -------------------------------------------------------------------------------
    def register_broker(self, broker_id: int, now_ms: int, *,
                        previous_broker_epoch: int | None = None,
                        rack: str | None = None) -> Outbox:
        """A broker (re)starts: new broker epoch; it gets the full state of its partitions and
        offline partitions it can lead are elected (§8.3). ``rack`` is its ``broker.rack``.

        ``previous_broker_epoch`` is the registration's ``PreviousBrokerEpoch`` (KIP-966): the
        broker epoch its clean-shutdown marker recorded, −1 without one (None: not sent). With
        ELR enabled, a value other than the broker's last registered epoch is an unclean
        shutdown: the broker leaves every ISR and ELR first (``handleBrokerUncleanShutdown``,
        §8.6), so a replica that may have lost its unflushed tail is never elected from them."""
        pre: list[TopicPartition] = []
        old = self.brokers.get(broker_id)
        if (self.elr_enabled and old is not None and previous_broker_epoch is not None
                and previous_broker_epoch != old.epoch):
            pre = self._unclean_shutdown(broker_id)
        self._next_broker_epoch += 1
        self.brokers[broker_id] = BrokerRegistration(broker_id, self._next_broker_epoch, True, now_ms,
                                                     rack=rack)
        changed = self._elect_offline(ISR_ORIGIN_ELECTION)
        changed += [tp for tp in pre if tp not in changed]
        out = self._fan_out(self.partitions_of(broker_id), only=[broker_id])
        more = self._fan_out(changed)
        for b, req in more.requests.items():
            if b in out.requests:
                merged = {(s.topic, s.partition): s for s in out.requests[b].partition_states}
                merged.update({(s.topic, s.partition): s for s in req.partition_states})
                req = LeaderAndIsrRequest(req.controller_id, req.controller_epoch, req.broker_epoch,
                                          tuple(merged.values()), req.live_leaders)
            out.requests[b] = req
        return out

    def heartbeat(self, broker_id: int, now_ms: int) -> None:
        reg = self.brokers.get(broker_id)
        if reg is not None and reg.alive:
            reg.last_heartbeat_ms = now_ms

    def tick(self, now_ms: int) -> Outbox:
        """Expire brokers whose session timed out (ZK session / KRaft heartbeat)."""
        out = Outbox()
        for b, reg in sorted(self.brokers.items()):
            if reg.alive and now_ms - reg.last_heartbeat_ms > self.session_timeout_ms:
                # several sessions may end at once (a whole rack): keep every decision
                out.merge(self.broker_failed(b))
        return out

    def broker_failed(self, broker_id: int) -> Outbox:
        """The broker's session ended: partitions it led are re-elected (clean or unclean); it is
        removed from the ISR of the others (never the last member); each change bumps the leader
        epoch (ZK ``doRemoveReplicasFromIsr``, §8.3)."""
        reg = self.brokers.get(broker_id)
        if reg is None or not reg.alive:
            return Outbox()
        reg.alive = False
        live = self.live_brokers
        changed = []
        if self.elr_enabled:
            for tp, p in self.partitions.items():
                if (broker_id in p.isr or p.leader == broker_id) and self._change(
                        tp, p, [r for r in p.isr if r != broker_id], ISR_ORIGIN_BROKER_FAILURE,
                        lambda r: r in live):
                    changed.append(tp)
            return self._fan_out(changed)
        for tp, p in self.partitions.items():
            if broker_id not in p.replicas:
                continue
            if p.leader == broker_id:
                self._elect(tp, p, live, ISR_ORIGIN_BROKER_FAILURE)
                changed.append(tp)
            elif broker_id in p.isr and len(p.isr) > 1:
                old = p.isr
                p.isr = tuple(r for r in p.isr if r != broker_id)
                self._isr_changed(tp, old, p.isr, ISR_ORIGIN_BROKER_FAILURE)
                p.leader_epoch += 1
                p.partition_epoch += 1
                changed.append(tp)
        return self._fan_out(changed)

    def _elect(self, tp: TopicPartition, p: PartitionRegistration, live: set[int],
               origin: str = ISR_ORIGIN_ELECTION) -> None:
        e = offline_partition_election(
            p.replicas, p.isr, live, unclean_enabled=self.unclean_enabled.get(tp.topic, False)
        )
        if p.leader != NO_LEADER and e.leader == NO_LEADER:
            self.stats.offline_partitions_events += 1
        p.leader = e.leader
        old = p.isr
        p.isr = e.isr
        self._isr_changed(tp, old, p.isr, origin)
        p.leader_epoch += 1
        p.partition_epoch += 1
        if e.has_leader:
            self.stats.leader_elections += 1
        if e.unclean:
            self.stats.unclean_elections += 1
            p.leader_recovery_state = LEADER_RECOVERY_RECOVERING

    def _change(self, tp: TopicPartition, p: PartitionRegistration, target_isr: Sequence[int],
                origin: str, acceptable: Callable[[int], bool], *,
                unclean_shutdown: Sequence[int] = (), bump_on_shrink: bool = True) -> bool:
        """Apply the ELR rules (:func:`~replica_core.controller.elr.partition_change`) for a
        target ISR; True iff the leader or ISR changed (what brokers must be told).

        A new leader bumps the leader epoch, and so does an ISR shrink when ``bump_on_shrink``
        (the controller-initiated changes of this ZooKeeper-style controller); a leader or ISR
        change bumps the partition epoch. A change of the ELR or last known leader alone is the
        controller's own state: no epoch moves and nothing is sent — a broker ignores a
        LeaderAndIsr without a newer leader epoch (§8.5), so a partition epoch it never saw
        would fail its next AlterPartition (INVALID_UPDATE_VERSION). (KRaft bumps the
        partition epoch for every change: its brokers apply metadata deltas.)"""
        c: PartitionChange = partition_change(
            replicas=p.replicas, leader=p.leader, isr=p.isr, elr=p.elr,
            last_known_elr=p.last_known_elr, target_isr=target_isr,
            min_isr=effective_min_isr(self.min_isr.get(tp.topic, 1), p.replicas),
            acceptable=acceptable, unclean_enabled=self.unclean_enabled.get(tp.topic, False),
            unclean_shutdown=unclean_shutdown)
        p.elr, p.last_known_elr = c.elr, c.last_known_elr
        leader_changed = c.leader != p.leader
        isr_changed = set(c.isr) != set(p.isr)
        if not (leader_changed or isr_changed):
            return False
        if leader_changed and p.leader != NO_LEADER and not c.has_leader:
            self.stats.offline_partitions_events += 1
        old = p.isr
        shrunk = not set(old) <= set(c.isr)
        p.leader, p.isr = c.leader, c.isr
        self._isr_changed(tp, old, p.isr, origin)
        if leader_changed or (shrunk and bump_on_shrink):
            p.leader_epoch += 1
        p.partition_epoch += 1
        if leader_changed and c.has_leader:
            self.stats.leader_elections += 1
        if c.from_elr:
            self.stats.elr_elections += 1
        if c.unclean:
            self.stats.unclean_elections += 1
            p.leader_recovery_state = LEADER_RECOVERY_RECOVERING
        return True

    def _unclean_shutdown(self, broker_id: int) -> list[TopicPartition]:
        """KIP-966 ``handleBrokerUncleanShutdown``: the broker (not yet live again) leaves the
        ISR and ELR of every partition; leaders are elected where needed. Returns the
        partitions whose leader or ISR changed."""
        live = self.live_brokers - {broker_id}
        changed = []
        found = False
        for tp, p in self.partitions.items():
            if broker_id in p.isr or broker_id in p.elr:
                found = True
                if self._change(tp, p, [r for r in p.isr if r != broker_id],
                                ISR_ORIGIN_UNCLEAN_SHUTDOWN, lambda r: r in live,
                                unclean_shutdown=(broker_id,)):
                    changed.append(tp)
        if found:
            self.stats.unclean_shutdowns += 1
        return changed

    def _elect_offline(self, origin: str = ISR_ORIGIN_ELECTION) -> list[TopicPartition]:
        live = self.live_brokers
        changed = []
        if self.elr_enabled:
            for tp, p in self.partitions.items():
                if p.leader == NO_LEADER and self._change(tp, p, p.isr, origin,
                                                          lambda r: r in live):
                    changed.append(tp)
            return changed
        for tp, p in self.partitions.items():
            if p.leader != NO_LEADER:
                continue
            e = offline_partition_election(
                p.replicas, p.isr, live, unclean_enabled=self.unclean_enabled.get(tp.topic, False)
            )
            if e.has_leader:
                self._elect(tp, p, live, origin)
                changed.append(tp)
        return changed

    def controlled_shutdown(self, broker_id: int) -> Outbox:
        """Move leadership away from a broker that is shutting down cleanly (§8.3)."""
        reg = self.brokers.get(broker_id)
        if reg is None or not reg.alive:
            return Outbox()
        reg.shutting_down = True
        live = self.live_brokers
        changed = []
        if self.elr_enabled:
            # KRaft handleBrokerInControlledShutdown: a broker shutting down cleanly keeps its
            # data, so it may enter the ELR (§8.6)
            active = {b for b in live if not self.brokers[b].shutting_down}
            for tp, p in self.partitions.items():
                if broker_id in p.isr and self._change(
                        tp, p, [r for r in p.isr if r != broker_id],
                        ISR_ORIGIN_CONTROLLED_SHUTDOWN, lambda r: r in active):
                    changed.append(tp)
            return self._fan_out(changed)
        for tp, p in self.partitions.items():
            if broker_id not in p.isr:
                continue
            e = controlled_shutdown_election(p.replicas, p.isr, live, {broker_id})
            if p.leader == broker_id and e.has_leader:
                p.leader = e.leader
                self.stats.leader_elections += 1
            if p.leader != broker_id and len(e.isr) > 0:
                old = p.isr
                p.isr = e.isr
                self._isr_changed(tp, old, p.isr, ISR_ORIGIN_CONTROLLED_SHUTDOWN)
            p.leader_epoch += 1
            p.partition_epoch += 1
            changed.append(tp)
        return self._fan_out(changed)

    # --- topics --------------------------------------------------------------------------------
    def create_topic(
        self, topic: str, n_partitions: int, replication_factor: int, *,
        assignment: Sequence[Sequence[int]] | None = None, unclean_leader_election: bool = False,
        start_index: int = 0, partition_ids: Sequence[int] | None = None,
        min_insync_replicas: int = 1,
        placement_random: PlacementRandom | np.random.Generator | None = None,
    ) -> Outbox:
        """New partitions: leader = first live replica, ISR = live replicas, epoch 0 (§8.2).

        Without an ``assignment``: when any broker registered a ``broker.rack``, KRaft's striped
        rack-aware placement (:mod:`replica_core.controller.replica_placer`, drawing from
        ``placement_random``; fenced = not alive), else the rack-unaware assignment.

        ``partition_ids`` creates only those partitions of the topic (with the replicas the full
        assignment gives them): a simulator lane holds one fetcher's share of a topic."""
        if any(tp.topic == topic for tp in self.partitions):
            raise ValueError(f"topic {topic!r} already exists")
        brokers = sorted(self.brokers)
        usable = [UsableBroker(b, self.brokers[b].rack, not self.brokers[b].alive) for b in brokers]
        if assignment is None and racks_configured(usable):
            assignment = place_replicas(
                n_partitions, replication_factor, usable,
                placement_random if placement_random is not None else np.random.default_rng(0))
        if assignment is None:
            assignment = assign_replicas(n_partitions, replication_factor, brokers,
                                         start_index=start_index)
        self.unclean_enabled[topic] = unclean_leader_election
        self.min_isr[topic] = int(min_insync_replicas)
        live = self.live_brokers
        created = []
        ids = range(len(assignment)) if partition_ids is None else partition_ids
        for p in ids:
            replicas = assignment[p]
            e = new_partition_election(replicas, live)
            tp = TopicPartition(topic, p)
            self.partitions[tp] = PartitionRegistration(tuple(replicas), e.isr, e.leader)
            created.append(tp)
        return self._fan_out(created, is_new=True)

    def preferred_leader_election(self, tps: Iterable[TopicPartition] | None = None) -> Outbox:
        live = self.live_brokers
        changed = []
        for tp in list(tps) if tps is not None else list(self.partitions):
            p = self.partitions[tp]
            e = preferred_replica_election(p.replicas, p.isr, live)
            if e is None or e.leader == p.leader:
                continue
            p.leader = e.leader
            p.leader_epoch += 1
            p.partition_epoch += 1
            self.stats.leader_elections += 1
            changed.append(tp)
        return self._fan_out(changed)

    # --- AlterPartition (§6.7) -----------------------------------------------------------------
    def alter_partition(self, request: AlterPartitionRequest) -> list[AlterPartitionResult]:
        """Validate and apply ISR changes proposed by a leader; success bumps the partition epoch
        (the leader epoch is unchanged). Followers learn nothing: only the leader uses the ISR."""
        results = []
        sender = self.brokers.get(request.broker_id)
        for item in request.items:
            p = self.partitions.get(item.tp)
            if p is None:
                results.append(AlterPartitionResult(item.tp, Errors.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            err = Errors.NONE
            if sender is None or not sender.alive or sender.epoch != request.broker_epoch:
                err = Errors.STALE_BROKER_EPOCH
            if err == Errors.NONE and item.leader_epoch < p.leader_epoch:
                err = Errors.FENCED_LEADER_EPOCH
            elif err == Errors.NONE and p.leader != request.broker_id:
                err = Errors.INVALID_REQUEST
            elif err == Errors.NONE and item.partition_epoch != p.partition_epoch:
                err = Errors.INVALID_UPDATE_VERSION
            elif err == Errors.NONE and (
                p.leader not in item.new_isr or not set(item.new_isr) <= set(p.replicas)
            ):
                err = Errors.INVALID_REQUEST
            elif err == Errors.NONE and (
                item.leader_recovery_state == LEADER_RECOVERY_RECOVERING and len(item.new_isr) > 1
                or p.leader_recovery_state == LEADER_RECOVERY_RECOVERED
                and item.leader_recovery_state == LEADER_RECOVERY_RECOVERING
            ):
                err = Errors.INVALID_REQUEST
            elif err == Errors.NONE:
                # KIP-903: a joining member must be registered, unfenced, not shutting down,
                # and carry its current broker epoch (−1: not checked, AlterPartition < v3)
                added = set(item.new_isr) - set(p.isr)
                epochs = dict(item.new_isr_with_epochs)
                for r in sorted(added):
                    b = self.brokers.get(r)
                    if b is None or not b.alive or b.shutting_down or (
                        epochs.get(r, -1) not in (-1, b.epoch)
                    ):
                        err = Errors.INELIGIBLE_REPLICA
                        break
            if err != Errors.NONE:
                results.append(AlterPartitionResult(item.tp, err))
                continue
            if self.elr_enabled:
                active = self.isr_eligible_brokers
                self._change(item.tp, p, item.new_isr, ISR_ORIGIN_ALTER_PARTITION,
                             active.__contains__, bump_on_shrink=False)
                if p.partition_epoch == item.partition_epoch:
                    p.partition_epoch += 1  # an accepted request is a change (the leader's epoch)
                p.leader_recovery_state = item.leader_recovery_state
                self.stats.isr_changes += 1
                results.append(AlterPartitionResult(
                    item.tp, Errors.NONE, p.leader, p.leader_epoch, p.isr, p.partition_epoch,
                    p.leader_recovery_state))
                continue
            old = p.isr
            p.isr = tuple(item.new_isr)
            self._isr_changed(item.tp, old, p.isr, ISR_ORIGIN_ALTER_PARTITION)
            p.partition_epoch += 1
            p.leader_recovery_state = item.leader_recovery_state
            self.stats.isr_changes += 1
            results.append(AlterPartitionResult(
                item.tp, Errors.NONE, p.leader, p.leader_epoch, p.isr, p.partition_epoch,
                p.leader_recovery_state,
            ))
        return results
