"""Eligible leader replicas (KIP-966): the controller's partition change with ELR enabled
(Kafka's ``PartitionChangeBuilder`` with ``eligible.leader.replicas.enable``; §8.6).

One pure function, :func:`partition_change`, decides a partition's next leader, ISR, ELR and
last known leader from its current registration and a target ISR (the ISR minus a failed,
shutting-down or uncleanly restarted broker, or the ISR a leader proposed by AlterPartition):

1. **ELR upkeep.** With the target ISR at or above the topic's effective
   ``min.insync.replicas`` (``min(min.insync.replicas, replication factor)``) the ELR is
   emptied. Below it, every member of the current ISR or ELR that is not in the target ISR
   becomes (or stays) an eligible leader replica — it held every committed record when it left,
   because the high watermark does not advance while the ISR is below min ISR (KAFKA-15583,
   §6.4) — except a replica whose broker restarted after an unclean shutdown.
2. **Election** (only when the current leader is no longer valid): the first replica in
   assignment order that is acceptable (live, not the broker being removed) and in the target
   ISR — or, when the target ISR is empty, in the ELR. An ELR member elected becomes the whole
   ISR and leaves the ELR. With ISR and ELR both empty, the partition's last known leader, if
   it is acceptable, is elected (counted as unclean). Then, with
   ``unclean.leader.election.enable``, the first acceptable replica (unclean). Otherwise no
   leader (−1). An unclean election sets ISR = [leader], recovery state RECOVERING, and clears
   the ELR and the last known leader.
3. **ISR**: the target ISR — which, unlike without ELR, may be empty.
4. **Last known leader** (Kafka keeps it in ``lastKnownElr``): recorded as the partition's
   leader at the moment its ISR first becomes empty; cleared as soon as the partition has, or
   keeps, a leader.

Kafka HEAD's ``canElectLastKnownLeader`` logs when the last known leader is not acceptable but
elects it anyway; here it must be acceptable (live), so a partition never gets a dead leader.
"""
from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import NamedTuple

NO_LEADER = -1


class PartitionChange(NamedTuple):
    """The partition's next state under ELR rules."""

    leader: int
    isr: tuple[int, ...]
    elr: tuple[int, ...]
    last_known_elr: tuple[int, ...]
    unclean: bool = False
    """Elected outside the ISR and ELR (last known leader, or an unclean election)."""
    from_elr: bool = False
    """The new leader came from the ELR."""

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER


def effective_min_isr(min_insync_replicas: int, replicas: Sequence[int]) -> int:
    """``min(min.insync.replicas, replication factor)`` (ReplicationControlManager
    ``getTopicEffectiveMinIsr``)."""
    return max(1, min(int(min_insync_replicas), len(replicas)))


def partition_change(
    *,
    replicas: Sequence[int],
    leader: int,
    isr: Sequence[int],
    elr: Sequence[int],
    last_known_elr: Sequence[int],
    target_isr: Sequence[int],
    min_isr: int,
    acceptable: Callable[[int], bool],
    unclean_enabled: bool,
    unclean_shutdown: Collection[int] = (),
) -> PartitionChange:
    """The partition's next leader, ISR, ELR and last known leader (see the module docstring).

    ``min_isr`` is the effective min ISR; ``acceptable(b)`` says whether broker ``b`` may lead
    (live and not being removed); ``unclean_shutdown`` lists brokers that just registered after
    an unclean shutdown (never kept in the ELR).
    """
    target = tuple(r for r in replicas if r in set(target_isr))
    # 1. ELR upkeep (maybePopulateTargetElr)
    if len(target) >= min_isr:
        new_elr: tuple[int, ...] = ()
    else:
        candidates = set(elr) | set(isr)
        new_elr = tuple(r for r in replicas if r in candidates and r not in target
                        and r not in unclean_shutdown)

    # 2. election (electAnyLeader / tryElection)
    def valid(r: int) -> bool:
        return (r in target or (not target and r in new_elr)) and acceptable(r)

    new_leader = leader
    unclean = from_elr = False
    if not (leader != NO_LEADER and valid(leader)):
        chosen = next((r for r in replicas if valid(r)), NO_LEADER)
        if chosen == NO_LEADER and not target and not new_elr and len(last_known_elr) == 1 \
                and acceptable(last_known_elr[0]):
            chosen, unclean = last_known_elr[0], True
        if chosen == NO_LEADER and unclean_enabled:
            chosen = next((r for r in replicas if acceptable(r)), NO_LEADER)
            unclean = chosen != NO_LEADER
        if chosen != leader:
            new_leader = chosen
            if chosen in new_elr:
                from_elr = True
                target = (chosen,)
                new_elr = tuple(r for r in new_elr if r != chosen)
        else:
            unclean = False
    if unclean:
        # maybeUpdateRecordElr: an unclean election clears the ELR and the last known leader
        return PartitionChange(new_leader, (new_leader,), (), (), unclean=True)

    # 4. last known leader (maybeUpdateLastKnownLeader)
    new_lke = tuple(last_known_elr)
    isr_now_empty = not target and tuple(isr) != ()
    if isr_now_empty and leader != NO_LEADER and new_lke != (leader,):
        new_lke = (leader,)
    elif new_lke and (
            (new_leader != leader and new_leader != NO_LEADER)
            or (leader != NO_LEADER and new_leader != NO_LEADER)):
        new_lke = ()
    return PartitionChange(new_leader, target, new_elr, new_lke, unclean=False, from_elr=from_elr)


__all__ = ["NO_LEADER", "PartitionChange", "effective_min_isr", "partition_change"]
