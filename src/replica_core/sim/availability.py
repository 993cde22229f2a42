"""Availability as a producer sees it, and each fault's recovery timeline.

The controller's view (:class:`~replica_core.sim.cluster._Tracker`) counts a partition offline
only while it has no leader at all. A producer is blocked longer than that: between a leader's
crash and the controller noticing (its session expiring), the controller still names the dead
broker, and until a newly elected leader has applied its LeaderAndIsr the broker answers
``NOT_LEADER_OR_FOLLOWER``. :class:`ClientView` classifies every partition, whenever something
it depends on changes, by the first reason a producer with fresh metadata could not write to it:

``no_leader``            the controller has no leader for it (offline)
``leader_down``          the controller's leader is a broker whose process is down (the
                         controller has not yet noticed: its session has not expired)
``leader_unreachable``   the leader's process runs but producers cannot reach it (isolated or
                         on the far side of a network partition)
``leader_not_ready``     the leader is up and reachable but does not lead the partition yet
                         (its LeaderAndIsr has not been applied) — it answers
                         NOT_LEADER_OR_FOLLOWER
``under_min_isr``        acks=all only: the committed ISR (the controller's) is smaller than the
                         effective ``min.insync.replicas`` (clamped to the replica count, as
                         Kafka's ``Partition.effectiveMinIsr``) — NOT_ENOUGH_REPLICAS

Everything is read from the product and the controller (who leads what, whose process runs,
which ISR is committed); nothing is recomputed. A partition blocked for any of the first four
reasons is unavailable to every producer; ``under_min_isr`` only to acks=all producers.

:class:`RecoveryLog` follows each injected fault: when the controller declared the broker dead
(detection), when every partition had a live, reachable leader again (election), when every
partition was writable again for the workload's acks, and when every ISR was full again.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from replica_core.sim.cluster import Cluster

CAUSES = ("no_leader", "leader_down", "leader_unreachable", "leader_not_ready", "under_min_isr")
"""Why a producer cannot write to a partition, in the order they are tested."""
LEADERLESS = 3
"""The first three causes: no live, reachable leader."""
WRITABLE = -1

FAULTS_DETECTED = frozenset({"crash", "shutdown", "isolate", "partition"})
"""Fault kinds that end a broker's session if they last (the controller must notice them)."""


@dataclass
class FaultRecovery:
    """One injected fault and what followed it (absolute loop milliseconds; None: did not
    happen, or the fault never caused that kind of trouble)."""

    at_ms: int
    description: str
    kind: str
    brokers: tuple[int, ...]
    detected_ms: int | None = None
    leaders_ms: int | None = None
    writable_ms: int | None = None
    isr_full_ms: int | None = None
    armed: dict[str, bool] = field(default_factory=lambda: dict.fromkeys(
        ("leaders", "writable", "isr_full"), False))
    arming: bool = True
    """Until the next fault starts, trouble seen is this fault's (arms the clocks above)."""

    @property
    def finished(self) -> bool:
        """No more clock of this fault can stop."""
        return not self.arming and all(getattr(self, attr) is not None or not self.armed[key]
                                       for key, attr in _CLOCKS)

    def as_dict(self, origin_ms: int) -> dict[str, Any]:
        def rel(ms: int | None) -> float | None:
            return None if ms is None else round((ms - self.at_ms) / 1000.0, 3)

        return {"at_s": round((self.at_ms - origin_ms) / 1000.0, 3),
                "fault": self.description, "kind": self.kind,
                "detected_after_s": rel(self.detected_ms),
                "leaders_after_s": rel(self.leaders_ms),
                "writable_after_s": rel(self.writable_ms),
                "isr_full_after_s": rel(self.isr_full_ms)}


class RecoveryLog:
    """The recovery timeline of every injected fault (see the module docstring)."""

    def __init__(self) -> None:
        self.records: list[FaultRecovery] = []
        self._open: list[FaultRecovery] = []

    def fault(self, now: int, description: str, kind: str, brokers: Sequence[int]) -> None:
        """A fault starts now: it owns the trouble seen until the next one starts."""
        for r in self._open:
            r.arming = False
        self._open = [r for r in self._open if not r.finished]
        rec = FaultRecovery(now, description, kind, tuple(int(b) for b in brokers))
        self.records.append(rec)
        self._open.append(rec)

    def broker_declared_dead(self, broker: int, now: int) -> None:
        for r in self.records:
            if r.detected_ms is None and r.kind in FAULTS_DETECTED and broker in r.brokers:
                r.detected_ms = now

    def observe(self, now: int, leaderless: int, blocked: int, under_replicated: int) -> None:
        """The current counts: partitions without a live reachable leader, partitions blocked
        for the workload's acks, under-replicated partitions."""
        if not self._open:
            return
        counts = {"leaders": leaderless, "writable": blocked, "isr_full": under_replicated}
        for r in self._open:
            for key, attr in _CLOCKS:
                if getattr(r, attr) is not None:
                    continue
                if counts[key] > 0:
                    if r.arming:
                        r.armed[key] = True
                elif r.armed[key]:
                    setattr(r, attr, now)
        self._open = [r for r in self._open if not r.finished]


_CLOCKS = (("leaders", "leaders_ms"), ("writable", "writable_ms"), ("isr_full", "isr_full_ms"))


class ClientView:
    """Per-partition writability for producers, integrated over time (see the module
    docstring). ``acks`` is the workload's (−1 = all): what counts as ``blocked``."""

    def __init__(self, cluster: Cluster, *, acks: int = -1, client_node: int = 999) -> None:
        self.cluster = cluster
        self.acks = acks
        self.client_node = client_node
        self.cause = np.zeros(0, dtype=np.int8)
        self.count = [0] * len(CAUSES)
        self.ms = [0] * len(CAUSES)
        self.t_last: int | None = None
        self.recovery = RecoveryLog()

    # ---- integration -------------------------------------------------------------------------
    def _advance(self, now: int) -> None:
        if self.t_last is not None and now > self.t_last:
            dt = now - self.t_last
            ms = self.ms
            for k, n in enumerate(self.count):
                if n:
                    ms[k] += n * dt
        self.t_last = now

    def close(self, now: int) -> None:
        self._advance(now)

    def reset_integrals(self, now: int) -> None:
        """Start integrating afresh at ``now`` (the start of the measured run)."""
        self._advance(now)
        self.ms = [0] * len(CAUSES)

    @property
    def leaderless(self) -> int:
        return sum(self.count[:LEADERLESS])

    def blocked_for(self, acks: int) -> int:
        """Partitions a producer with these acks cannot write to now."""
        n = sum(self.count[:len(CAUSES) - 1])
        return n + self.count[-1] if acks == -1 else n

    @property
    def blocked(self) -> int:
        return self.blocked_for(self.acks)

    def unavailable_ms(self, acks: int) -> int:
        n = sum(self.ms[:len(CAUSES) - 1])
        return n + self.ms[-1] if acks == -1 else n

    # ---- state changes -----------------------------------------------------------------------
    def grow(self, n: int) -> None:
        """``n`` new partitions (no leader yet)."""
        now = self.cluster.loop.now
        self._advance(now)
        self.cause = np.concatenate([self.cause, np.zeros(n, dtype=np.int8)])
        self.count[0] += n

    def refresh(self, pids: Iterable[int]) -> None:
        """Classify these partitions again (something they depend on changed)."""
        cluster = self.cluster
        now = cluster.loop.now
        self._advance(now)
        tracker = cluster.controller_node.tracker
        leaders = tracker.leader
        isr_size = tracker.isr_size
        min_isr = tracker.min_isr
        brokers = cluster.brokers
        reachable = cluster.network.reachable
        tps = cluster.tps
        cause = self.cause
        count = self.count
        client = self.client_node
        if not isinstance(pids, (list, range)):
            pids = list(pids)
        old_causes = cause
        if 4 * len(pids) >= len(cause):
            # many partitions: read each column once rather than an element per partition
            leaders, isr_size, min_isr = leaders.tolist(), isr_size.tolist(), min_isr.tolist()
            old_causes = cause.tolist()
        # per leader broker, what does not depend on the partition (looked at once per call):
        # its cause (1: down, 2: unreachable) or, when it serves, its replica manager's lookup
        by_leader: dict[int, Any] = {}
        for pid in pids:
            pid = int(pid)
            leader = int(leaders[pid])
            if leader < 0:
                new = 0
            else:
                served = by_leader.get(leader)
                if served is None:
                    b = brokers.get(leader)
                    if b is None or not b.alive or b.rm is None:
                        served = 1
                    elif not reachable(client, leader):
                        served = 2
                    else:
                        served = b.rm.partition
                    by_leader[leader] = served
                if served.__class__ is int:
                    new = served
                else:
                    p = served(tps[pid])
                    if p is None or not p.is_leader:
                        new = 3
                    elif isr_size[pid] < min_isr[pid]:
                        new = 4
                    else:
                        new = WRITABLE
            old = int(old_causes[pid])
            if old != new:
                if old >= 0:
                    count[old] -= 1
                if new >= 0:
                    count[new] += 1
                cause[pid] = new
                old_causes[pid] = new  # (the list read above, when it is one: a pid twice)
        self.recovery.observe(now, self.leaderless, self.blocked, tracker.under_rep)

    def observe(self) -> None:
        """Show the recovery log the current counts (after a fault that changed none)."""
        cluster = self.cluster
        self.recovery.observe(cluster.loop.now, self.leaderless, self.blocked,
                              cluster.controller_node.tracker.under_rep)

    def refresh_broker(self, broker: int) -> None:
        """Every partition whose controller-named leader is ``broker``."""
        leaders = self.cluster.controller_node.tracker.leader
        self.refresh(np.flatnonzero(leaders == broker).tolist())

    def refresh_tps(self, tps: Iterable[Any], broker: int) -> None:
        """Those of ``tps`` whose controller-named leader is ``broker`` (which changed their
        replicas): a partition's class reads its named leader's replica and nothing of another
        broker (the tracker and the network refresh what they change themselves)."""
        ids = self.cluster.tp_ids
        pids = np.fromiter((ids[tp] for tp in tps if tp in ids), dtype=np.intp)
        led = self.cluster.controller_node.tracker.leader[pids] == broker
        self.refresh(pids[led].tolist())

    def refresh_all(self) -> None:
        self.refresh(range(len(self.cause)))

    def counts_by_cause(self) -> dict[str, int]:
        return dict(zip(CAUSES, self.count, strict=True))

    def ms_by_cause(self) -> dict[str, int]:
        return dict(zip(CAUSES, self.ms, strict=True))


__all__ = ["CAUSES", "ClientView", "FaultRecovery", "RecoveryLog"]
