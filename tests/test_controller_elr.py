"""Eligible leader replicas (KIP-966, §8.6) and the high-watermark rule they rely on (§6.4),
restated from Kafka's PartitionChangeBuilder / ReplicationControlManager and Partition."""
from replica_core.controller import NO_LEADER, Controller
from replica_core.controller.elr import effective_min_isr, partition_change
from replica_core.errors import Errors
from replica_core.replication.messages import (
    LEADER_RECOVERY_RECOVERING,
    AlterPartitionItem,
    AlterPartitionRequest,
    TopicPartition,
)

T0 = 1_700_000_000_000
TP = TopicPartition("t", 0)


def change(*, replicas=(1, 2, 3), leader=1, isr=(1, 2, 3), elr=(), lke=(), target, min_isr=2,
           live=(1, 2, 3), unclean=False, unclean_shutdown=()):
    return partition_change(replicas=replicas, leader=leader, isr=isr, elr=elr,
                            last_known_elr=lke, target_isr=target, min_isr=min_isr,
                            acceptable=lambda r: r in live, unclean_enabled=unclean,
                            unclean_shutdown=unclean_shutdown)


# ---- the ELR and the ISR ---------------------------------------------------------------------
def test_isr_at_or_above_min_isr_keeps_no_elr():
    c = change(isr=(1, 2, 3), target=(1, 2))
    assert c.leader == 1 and c.isr == (1, 2) and c.elr == ()


def test_replica_leaving_an_isr_at_min_isr_becomes_eligible():
    c = change(isr=(1, 2), target=(1,), live=(1, 2))
    assert c.isr == (1,) and c.elr == (2,) and c.leader == 1


def test_isr_back_at_min_isr_empties_the_elr():
    c = change(isr=(1,), elr=(2,), target=(1, 3))
    assert c.isr == (1, 3) and c.elr == ()


def test_elr_member_rejoining_isr_leaves_elr_when_still_below_min():
    c = change(isr=(1,), elr=(2, 3), target=(1, 2), min_isr=3)
    assert c.isr == (1, 2) and c.elr == (3,)


def test_unclean_shutdown_replica_never_enters_or_stays_in_elr():
    c = change(isr=(1, 2), elr=(3,), target=(1,), unclean_shutdown=(2,))
    assert c.elr == (3,)
    c = change(leader=NO_LEADER, isr=(), elr=(1, 3), target=(), unclean_shutdown=(3,),
               live=(1,))
    assert c.leader == 1 and c.isr == (1,) and c.elr == ()


def test_last_isr_member_failing_empties_isr_and_moves_it_to_elr():
    # 1 leads alone with 2 eligible; 1 fails and 2 is down too: no leader, ISR empty
    c = change(isr=(1,), elr=(2,), target=(), live=(3,))
    assert c.leader == NO_LEADER and c.isr == () and c.elr == (1, 2)
    assert c.last_known_elr == (1,)  # the leader when the ISR became empty


# ---- elections: ISR, then ELR, then the last known leader, then unclean -----------------------
def test_valid_leader_is_kept():
    c = change(isr=(1, 2, 3), target=(1, 3))
    assert c.leader == 1 and not c.from_elr and not c.unclean


def test_election_from_isr_in_assignment_order():
    c = change(replicas=(3, 1, 2), leader=2, isr=(1, 2, 3), target=(1, 3), live=(1, 3))
    assert c.leader == 3 and c.isr == (3, 1)


def test_election_from_elr_when_isr_is_empty():
    c = change(isr=(1,), elr=(2, 3), target=(), live=(3,))
    assert c.leader == 3 and c.from_elr and not c.unclean
    assert c.isr == (3,) and c.elr == (1, 2)  # the old leader joins the ELR


def test_elr_not_used_while_an_isr_member_is_live():
    c = change(leader=NO_LEADER, isr=(2,), elr=(1,), target=(2,), live=(1, 2))
    assert c.leader == 2 and not c.from_elr


def test_last_known_leader_elected_when_isr_and_elr_are_empty():
    c = change(leader=NO_LEADER, isr=(), elr=(), lke=(1,), target=(), live=(1, 2))
    assert c.leader == 1 and c.unclean and c.isr == (1,)
    assert c.elr == () and c.last_known_elr == ()


def test_last_known_leader_must_be_live():
    c = change(leader=NO_LEADER, isr=(), elr=(), lke=(1,), target=(), live=(2,))
    assert c.leader == NO_LEADER and c.last_known_elr == (1,)


def test_unclean_election_only_when_enabled_and_after_elr():
    c = change(leader=NO_LEADER, isr=(), elr=(3,), target=(), live=(2,), unclean=False)
    assert c.leader == NO_LEADER
    c = change(leader=NO_LEADER, isr=(), elr=(3,), target=(), live=(2,), unclean=True)
    assert c.leader == 2 and c.unclean and c.isr == (2,) and c.elr == ()


def test_effective_min_isr_is_clamped_to_the_replication_factor():
    assert effective_min_isr(3, (1, 2)) == 2
    assert effective_min_isr(2, (1, 2, 3)) == 2


# ---- the controller --------------------------------------------------------------------------
def controller(elr=True, n=3, min_isr=2):
    c = Controller(eligible_leader_replicas=elr)
    for b in range(1, n + 1):
        c.register_broker(b, T0)
    c.create_topic("t", 1, n, assignment=[tuple(range(1, n + 1))], min_insync_replicas=min_isr)
    return c


def test_broker_failures_fill_the_elr_and_it_elects():
    c = controller()
    c.broker_failed(3)
    p = c.partitions[TP]
    assert p.isr == (1, 2) and p.elr == ()
    c.broker_failed(2)
    assert p.isr == (1,) and p.elr == (2,)
    c.broker_failed(1)
    assert p.leader == NO_LEADER and p.isr == () and p.elr == (1, 2)
    # 2 comes back after a clean shutdown (its marker holds its last epoch): elected from ELR
    c.register_broker(2, T0 + 5_000, previous_broker_epoch=c.brokers[2].epoch)
    assert p.leader == 2 and p.isr == (2,) and p.elr == (1,)
    assert c.stats.elr_elections == 1 and c.stats.unclean_elections == 0


def test_without_elr_the_last_isr_member_stays_and_is_reelected():
    c = controller(elr=False)
    for b in (3, 2, 1):
        c.broker_failed(b)
    p = c.partitions[TP]
    assert p.leader == NO_LEADER and p.isr == (1,) and p.elr == ()
    c.register_broker(1, T0 + 5_000, previous_broker_epoch=-1)  # ignored without ELR
    assert p.leader == 1 and p.isr == (1,)


def test_unclean_restart_removes_broker_from_elr_and_blocks_its_election():
    c = controller()
    for b in (3, 2, 1):
        c.broker_failed(b)
    p = c.partitions[TP]
    epoch_before = p.partition_epoch
    c.register_broker(1, T0 + 5_000, previous_broker_epoch=-1)  # no clean-shutdown marker
    assert p.leader == NO_LEADER and p.isr == () and p.elr == (2,)
    # the ELR is the controller's own state: brokers see no change, so no epoch moves (§8.6)
    assert p.partition_epoch == epoch_before
    assert c.stats.unclean_shutdowns == 1
    # a clean restart of 2 then elects it from the ELR
    c.register_broker(2, T0 + 6_000, previous_broker_epoch=c.brokers[2].epoch)
    assert p.leader == 2 and p.isr == (2,)


def test_last_known_leader_after_every_elr_member_restarted_uncleanly():
    c = controller()
    for b in (3, 2, 1):
        c.broker_failed(b)
    p = c.partitions[TP]
    assert p.last_known_elr == (1,)
    c.register_broker(2, T0 + 5_000, previous_broker_epoch=-1)
    assert p.leader == NO_LEADER and p.elr == (1,)
    c.register_broker(1, T0 + 6_000, previous_broker_epoch=-1)
    # ISR and ELR are empty now; the last known leader (1) is elected, as an unclean election
    assert p.leader == 1 and p.isr == (1,) and p.elr == ()
    assert p.leader_recovery_state == LEADER_RECOVERY_RECOVERING
    assert c.stats.unclean_elections == 1


def test_controlled_shutdown_moves_a_clean_replica_into_the_elr():
    c = controller()
    c.broker_failed(3)
    c.controlled_shutdown(2)
    p = c.partitions[TP]
    assert p.isr == (1,) and p.elr == (2,) and p.leader == 1


def test_alter_partition_shrink_below_min_isr_fills_elr_and_expansion_empties_it():
    c = controller()
    ep = c.brokers[1].epoch
    p = c.partitions[TP]

    def alter(isr):
        item = AlterPartitionItem(TP, p.leader_epoch, tuple(isr), p.partition_epoch)
        return c.alter_partition(AlterPartitionRequest(1, ep, (item,)))[0]

    r = alter([1, 2])
    assert r.error_code == Errors.NONE and p.elr == ()
    leader_epoch = p.leader_epoch
    r = alter([1])
    assert r.error_code == Errors.NONE and r.isr == (1,) and p.elr == (2,)
    assert p.leader_epoch == leader_epoch  # a leader's shrink bumps only the partition epoch
    r = alter([1, 3])
    assert r.error_code == Errors.NONE and p.isr == (1, 3) and p.elr == ()


def test_registration_with_matching_previous_epoch_is_clean():
    c = controller()
    c.broker_failed(2)  # ISR {1, 3} is still at min ISR: 2 is not eligible
    c.broker_failed(1)
    p = c.partitions[TP]
    assert p.leader == 3 and p.isr == (3,) and p.elr == (1,)
    c.register_broker(1, T0 + 1, previous_broker_epoch=c.brokers[1].epoch)
    assert p.elr == (1,) and c.stats.unclean_shutdowns == 0
    c.register_broker(3, T0 + 2, previous_broker_epoch=c.brokers[3].epoch - 1)  # stale marker
    assert c.stats.unclean_shutdowns == 1 and 3 not in p.isr
