"""The controller state machine: assignment, elections on broker loss, ISR changes (§6.7, §8)."""
from replica_core.controller import NO_LEADER, Controller, assign_replicas
from replica_core.errors import Errors
from replica_core.replication.messages import (
    AlterPartitionItem,
    AlterPartitionRequest,
    TopicPartition,
)

T0 = 1_700_000_000_000


def cluster(n=3):
    c = Controller()
    for b in range(1, n + 1):
        c.register_broker(b, T0)
    return c


def test_assignment_spreads_leaders_and_followers():
    a = assign_replicas(6, 3, [1, 2, 3])
    assert [r[0] for r in a] == [1, 2, 3, 1, 2, 3]
    assert all(len(set(r)) == 3 for r in a)
    # the follower shift changes after each full round, so pairs differ between rounds
    assert a[0] != a[3]


def test_create_topic_sends_leader_and_isr_to_every_replica():
    c = cluster()
    out = c.create_topic("t", 3, 3)
    assert set(out.requests) == {1, 2, 3}
    states = out.requests[1].partition_states
    assert {s.partition for s in states} == {0, 1, 2}
    assert all(s.leader_epoch == 0 and set(s.isr) == {1, 2, 3} and s.is_new for s in states)


def test_leader_loss_elects_next_isr_member_and_bumps_epoch():
    c = cluster()
    c.create_topic("t", 1, 3, assignment=[(1, 2, 3)])
    out = c.broker_failed(1)
    reg = c.partitions[TopicPartition("t", 0)]
    assert reg.leader == 2 and reg.isr == (2, 3) and reg.leader_epoch == 1
    assert set(out.requests) == {2, 3}
    assert c.stats.leader_elections == 1 and c.stats.unclean_elections == 0


def test_follower_loss_shrinks_isr_and_bumps_epoch():
    c = cluster()
    c.create_topic("t", 1, 3, assignment=[(1, 2, 3)])
    c.broker_failed(3)
    reg = c.partitions[TopicPartition("t", 0)]
    assert reg.leader == 1 and reg.isr == (1, 2) and reg.leader_epoch == 1


def test_offline_then_unclean_election_on_restart():
    c = cluster(2)
    c.create_topic("u", 1, 2, assignment=[(1, 2)], unclean_leader_election=True)
    c.create_topic("c", 1, 2, assignment=[(1, 2)], unclean_leader_election=False)
    c.broker_failed(2)  # ISR shrinks to [1]
    c.broker_failed(1)  # last ISR member gone
    assert c.partitions[TopicPartition("c", 0)].leader == NO_LEADER
    # unclean topic: broker 2 is not alive either, so still offline
    assert c.partitions[TopicPartition("u", 0)].leader == NO_LEADER
    c.register_broker(2, T0 + 1000)
    assert c.partitions[TopicPartition("u", 0)].leader == 2
    assert c.partitions[TopicPartition("u", 0)].isr == (2,)
    assert c.partitions[TopicPartition("c", 0)].leader == NO_LEADER
    assert c.stats.unclean_elections == 1
    c.register_broker(1, T0 + 2000)
    assert c.partitions[TopicPartition("c", 0)].leader == 1


def test_session_timeout_expires_silent_broker():
    c = cluster()
    c.create_topic("t", 1, 3, assignment=[(1, 2, 3)])
    for b in (2, 3):
        c.heartbeat(b, T0 + 20_000)
    c.tick(T0 + 20_000)
    assert not c.brokers[1].alive
    assert c.partitions[TopicPartition("t", 0)].leader == 2


def test_alter_partition_validation_and_success():
    c = cluster()
    c.create_topic("t", 1, 3, assignment=[(1, 2, 3)])
    tp = TopicPartition("t", 0)
    ep = c.brokers[1].epoch

    def req(isr, leader_epoch=0, partition_epoch=0, broker=1, epoch=ep):
        item = AlterPartitionItem(tp, leader_epoch, tuple(isr), partition_epoch)
        return c.alter_partition(AlterPartitionRequest(broker, epoch, (item,)))[0]

    assert req([1, 2], leader_epoch=-1).error_code == Errors.FENCED_LEADER_EPOCH
    assert req([1, 2], partition_epoch=7).error_code == Errors.INVALID_UPDATE_VERSION
    assert req([2, 3]).error_code == Errors.INVALID_REQUEST  # leader missing from ISR
    assert req([1, 2], broker=2, epoch=c.brokers[2].epoch).error_code == Errors.INVALID_REQUEST
    assert req([1, 2], epoch=ep - 1).error_code == Errors.STALE_BROKER_EPOCH
    ok = req([1, 2])
    assert ok.error_code == Errors.NONE and ok.isr == (1, 2) and ok.partition_epoch == 1
    assert c.partitions[tp].leader_epoch == 0
    c.broker_failed(3)
    # re-adding a dead broker is refused
    assert req([1, 2, 3], partition_epoch=1).error_code == Errors.INELIGIBLE_REPLICA
