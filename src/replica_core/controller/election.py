"""Partition leader election, as Kafka's controller decides it (``Election.scala``,
``PartitionLeaderElectionAlgorithms``; KAFKA_SEMANTICS §8.2-8.4).

Pure functions over (assignment, ISR, live brokers). Assignment order is the tie-breaker
everywhere: the first eligible replica in the assignment wins.
"""
from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import NamedTuple

NO_LEADER = -1


class Election(NamedTuple):
    """Outcome of one election: the leader (−1 for none), the new ISR, and whether it was unclean."""

    leader: int
    isr: tuple[int, ...]
    unclean: bool = False

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER


def new_partition_election(assignment: Sequence[int], live: Collection[int]) -> Election:
    """A new partition: leader = first live replica, ISR = all live replicas (ZK mode)."""
    live_replicas = tuple(r for r in assignment if r in live)
    if not live_replicas:
        return Election(NO_LEADER, ())
    return Election(live_replicas[0], live_replicas)


def offline_partition_election(
    assignment: Sequence[int],
    isr: Collection[int],
    live: Collection[int],
    *,
    unclean_enabled: bool,
) -> Election:
    """Leader lost: first assigned replica that is live and in the ISR; ISR := live ISR members.

    With ``unclean.leader.election.enable`` and no live ISR member, the first live assigned
    replica leads alone (ISR = [leader]) and the election is unclean: committed data it lacks is
    lost (§8.4, §9.15).
    """
    live_isr = tuple(r for r in assignment if r in isr and r in live)
    if live_isr:
        return Election(live_isr[0], tuple(r for r in isr if r in live))
    if unclean_enabled:
        for r in assignment:
            if r in live:
                return Election(r, (r,), unclean=True)
    return Election(NO_LEADER, tuple(isr))


def preferred_replica_election(
    assignment: Sequence[int], isr: Collection[int], live: Collection[int]
) -> Election | None:
    """Preferred leader election: only ``assignment[0]``, and only if live and in the ISR."""
    if not assignment:
        return None
    preferred = assignment[0]
    if preferred in live and preferred in isr:
        return Election(preferred, tuple(isr))
    return None


def controlled_shutdown_election(
    assignment: Sequence[int],
    isr: Collection[int],
    live: Collection[int],
    shutting_down: Collection[int],
) -> Election:
    """Controlled shutdown: first assigned replica live, in ISR and not shutting down; the new
    ISR drops shutting-down brokers."""
    new_isr = tuple(r for r in isr if r not in shutting_down)
    for r in assignment:
        if r in live and r in isr and r not in shutting_down:
            return Election(r, new_isr)
    return Election(NO_LEADER, tuple(isr))


def remove_replica_from_isr(leader: int, isr: Sequence[int], replica: int) -> tuple[int, tuple[int, ...]]:
    """A replica went offline (ZK ``doRemoveReplicasFromIsr``): drop it from the ISR, except that
    the last ISR member is never removed; if it led, the leader becomes −1.

    Returns (new leader, new ISR). The caller bumps the leader epoch.
    """
    if replica not in isr:
        return leader, tuple(isr)
    new_isr = tuple(r for r in isr if r != replica)
    if not new_isr:
        new_isr = tuple(isr)
    new_leader = NO_LEADER if leader == replica else leader
    return new_leader, new_isr
