"""KIP-903: the broker epochs an ISR expansion carries, checked by the controller (§6.7, §9.11),
restated from ReplicationControlManager.ineligibleReplicasForIsr and AlterPartitionRequest v3."""
from replica_core.controller import Controller
from replica_core.errors import Errors
from replica_core.replication.config import ReplicaConfig
from replica_core.replication.messages import (
    AlterPartitionItem,
    AlterPartitionRequest,
    BrokerState,
    TopicPartition,
)

T0 = 1_700_000_000_000
TP = TopicPartition("t", 0)


def shrunk_cluster():
    """Replicas (1, 2, 3) led by 1 with ISR {1, 2}: broker 3 restarted (new broker epoch)."""
    c = Controller()
    for b in (1, 2, 3):
        c.register_broker(b, T0)
    c.create_topic("t", 1, 3, assignment=[(1, 2, 3)])
    old_epoch_3 = c.brokers[3].epoch
    c.broker_failed(3)
    c.register_broker(3, T0 + 1000)
    assert c.brokers[3].epoch != old_epoch_3
    return c, old_epoch_3


def expand(c, epochs):
    p = c.partitions[TP]
    item = AlterPartitionItem(TP, p.leader_epoch, (1, 2, 3), p.partition_epoch,
                              broker_epochs=tuple(epochs))
    return c.alter_partition(AlterPartitionRequest(1, c.brokers[1].epoch, (item,)))[0]


def test_expansion_with_a_previous_incarnations_epoch_is_ineligible():
    c, stale = shrunk_cluster()
    r = expand(c, [c.brokers[1].epoch, c.brokers[2].epoch, stale])
    assert r.error_code == Errors.INELIGIBLE_REPLICA
    assert c.partitions[TP].isr == (1, 2)


def test_expansion_with_the_current_epoch_is_accepted():
    c, _ = shrunk_cluster()
    r = expand(c, [c.brokers[1].epoch, c.brokers[2].epoch, c.brokers[3].epoch])
    assert r.error_code == Errors.NONE and r.isr == (1, 2, 3)


def test_epoch_minus_one_and_requests_before_v3_are_not_checked():
    c, _ = shrunk_cluster()
    assert expand(c, [-1, -1, -1]).error_code == Errors.NONE
    c, _ = shrunk_cluster()
    assert expand(c, []).error_code == Errors.NONE  # v0-2: no epochs at all


def test_new_isr_with_epochs_reads_old_versions_as_unchecked():
    item = AlterPartitionItem(TP, 0, (1, 3), 0)
    assert item.new_isr_with_epochs == (BrokerState(1, -1), BrokerState(3, -1))
    item = AlterPartitionItem(TP, 0, (1, 3), 0, broker_epochs=(101, 105))
    assert item.new_isr_with_epochs == (BrokerState(1, 101), BrokerState(3, 105))


def test_the_switch_is_on_by_default_and_named_for_properties():
    assert ReplicaConfig().isr_broker_epochs is True
    assert ReplicaConfig.from_properties({"isr.broker.epochs": "false"}).isr_broker_epochs is False
    assert ReplicaConfig().eligible_leader_replicas_enable is False
    cfg = ReplicaConfig.from_properties({"eligible.leader.replicas.enable": "true"})
    assert cfg.eligible_leader_replicas_enable is True
