"""Produce on the leader (KAFKA_SEMANTICS §6.8): acks, min.insync.replicas, DelayedProduce."""
from __future__ import annotations

from replication_harness import TP, Cluster

from replica_core.errors import Errors
from replica_core.records import build_batch
from replica_core.replication import ReplicaConfig
from replica_core.replication.delayed import DelayedProduce, ProducePartitionStatus
from replica_core.replication.messages import ProducePartitionResponse, TopicPartition


def test_acks_1_answers_after_the_local_append() -> None:
    c = Cluster()
    c.create()
    resp = c.produce(n=3, acks=1)
    assert resp[TP].error_code == Errors.NONE and resp[TP].base_offset == 0
    resp = c.produce(n=2, acks=1)
    assert resp[TP].base_offset == 3
    assert c.partition(0).log_end_offset == 5
    assert c.partition(0).high_watermark == 0  # nobody replicated: acknowledged anyway
    assert c.rm(0).produce_purgatory.delayed == 0


def test_acks_0_and_1_ignore_min_isr_but_all_does_not() -> None:
    c = Cluster(config=ReplicaConfig(min_insync_replicas=2))
    c.create(isr=(0,))
    assert c.produce(n=1, acks=0)[TP].error_code == Errors.NONE
    assert c.produce(n=1, acks=1)[TP].error_code == Errors.NONE
    resp = c.produce(n=1, acks=-1)
    assert resp[TP].error_code == Errors.NOT_ENOUGH_REPLICAS
    assert c.partition(0).log_end_offset == 2  # rejected before anything was written


def test_invalid_required_acks() -> None:
    c = Cluster()
    c.create()
    resp = c.produce(n=1, acks=2)
    assert resp[TP].error_code == Errors.INVALID_REQUIRED_ACKS
    assert c.partition(0).log_end_offset == 0


def test_delayed_produce_completes_when_hw_passes_its_offset() -> None:
    c = Cluster()
    c.create()
    got = []
    assert c.produce(n=4, acks=-1, callback=got.append) is None
    assert c.rm(0).produce_purgatory.delayed == 1
    c.fetch(1)
    c.fetch(2)
    c.fetch(1)  # HW 0: follower 2 has not reported offset 4 yet
    assert got == []
    c.fetch(2)
    assert c.partition(0).high_watermark == 4
    assert len(got) == 1
    assert got[0][TP].error_code == Errors.NONE and got[0][TP].base_offset == 0
    assert c.rm(0).produce_purgatory.delayed == 0


def test_delayed_produce_times_out_and_the_data_stays() -> None:
    c = Cluster()
    c.create()
    got = []
    assert c.produce(n=3, acks=-1, timeout_ms=5_000, callback=got.append) is None
    c.advance(4_999)
    assert got == []
    c.advance(1)
    assert len(got) == 1 and got[0][TP].error_code == Errors.REQUEST_TIMED_OUT
    assert c.rm(0).metrics()["ProduceExpiresPerSec"] == 1
    assert c.partition(0).log_end_offset == 3
    c.catch_up()
    assert c.partition(1).log_end_offset == 3
    assert c.partition(0).high_watermark == 3


def test_delayed_produce_answers_not_leader_when_leadership_moves() -> None:
    c = Cluster()
    c.create()
    got = []
    c.produce(n=2, acks=-1, callback=got.append)
    c.leader_and_isr(TP, leader=1, isr=(0, 1, 2))
    assert len(got) == 1 and got[0][TP].error_code == Errors.NOT_LEADER_OR_FOLLOWER


def test_min_isr_checked_again_after_append() -> None:
    c = Cluster(config=ReplicaConfig(min_insync_replicas=2))
    c.create()
    c.produce(n=4, acks=-1, callback=lambda r: None)
    c.catch_up()
    partition = c.partition(0)
    assert partition.high_watermark == 4
    assert partition.check_enough_replicas_reach_offset(4) == (True, Errors.NONE)
    assert partition.check_enough_replicas_reach_offset(5) == (False, Errors.NONE)
    # The maximal ISR falls below min.insync.replicas after the append was acknowledged
    # locally (min ISR raised to 3 by a config change while follower 2 is out of the ISR).
    c.advance(31_000)  # both followers idle at the leader's LEO: still in sync
    assert partition.isr == [0, 1, 2]
    c.rm(0).table.partition(partition.row).min_isr = 3
    status = {TP: ProducePartitionStatus(4, ProducePartitionResponse(Errors.NONE, 0))}
    got = []
    op = DelayedProduce(1_000, status, c.rm(0), got.append)
    c.produce(n=1, acks=1)
    c.advance(31_000)  # followers lag now: shrink to {0}
    assert partition.isr == [0]
    assert partition.check_enough_replicas_reach_offset(4) == (
        True, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
    assert op.try_complete()
    assert got[0][TP].error_code == Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    # and a new acks=all produce is now refused before the append
    assert c.produce(n=1, acks=-1)[TP].error_code == Errors.NOT_ENOUGH_REPLICAS


def test_not_leader_and_unknown_partition() -> None:
    c = Cluster()
    c.create()
    resp = c.produce(n=1, acks=1, broker=1)
    assert resp[TP].error_code == Errors.NOT_LEADER_OR_FOLLOWER
    other = TopicPartition("other", 0)
    resp = c.rm(0).append_records({other: build_batch([b"x"])}, acks=1, timeout_ms=1000)
    assert resp[other].error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION


def test_record_too_large_and_corrupt_message() -> None:
    c = Cluster()
    c.create()
    resp = c.produce(n=1, acks=-1, value=b"x" * 1_100_000)
    assert resp[TP].error_code == Errors.MESSAGE_TOO_LARGE
    batch = bytearray(build_batch([b"hello", b"world"]))
    batch[-1] ^= 0xFF  # the CRC no longer matches
    resp = c.rm(0).append_records({TP: bytes(batch)}, acks=1, timeout_ms=1000)
    assert resp[TP].error_code == Errors.CORRUPT_MESSAGE
    assert c.partition(0).log_end_offset == 0
    assert c.rm(0).produce_purgatory.delayed == 0


def test_mixed_results_park_only_the_successful_partitions() -> None:
    c = Cluster()
    tp1 = TopicPartition("t", 1)
    c.create()
    c.create(tp1, leader=1)
    entries = {TP: build_batch([b"a"]), tp1: build_batch([b"b"])}
    got = []
    assert c.rm(0).append_records(entries, acks=-1, timeout_ms=1000, callback=got.append) is None
    c.advance(1_000)
    assert got[0][tp1].error_code == Errors.NOT_LEADER_OR_FOLLOWER
    assert got[0][TP].error_code == Errors.REQUEST_TIMED_OUT


def test_a_timed_out_or_forced_answer_keeps_the_append_offsets() -> None:
    """Partitions still waiting for their acks when the op completes answer REQUEST_TIMED_OUT
    with the offsets of their append (the data stays); an acknowledged one answers as the
    append did."""
    c = Cluster()
    c.create()
    c.produce(n=2, acks=1)
    got = []
    assert c.produce(n=3, acks=-1, timeout_ms=5_000, callback=got.append) is None
    c.advance(5_000)
    r = got[0][TP]
    assert (r.error_code, r.base_offset, r.log_start_offset) == (Errors.REQUEST_TIMED_OUT, 2, 0)
    # an op completed by force (not by its own check) answers the same for a waiting partition
    forced = []
    status = {TP: ProducePartitionStatus(99, ProducePartitionResponse(Errors.NONE, 7, -1, 0))}
    op = DelayedProduce(1_000, status, c.rm(0), forced.append)
    assert not op.try_complete() and op.force_complete()
    assert (forced[0][TP].error_code, forced[0][TP].base_offset) == (Errors.REQUEST_TIMED_OUT, 7)
    # and once the HW passes the offset, the append's own answer is delivered
    done = []
    status = {TP: ProducePartitionStatus(5, ProducePartitionResponse(Errors.NONE, 2, -1, 0))}
    op = DelayedProduce(1_000, status, c.rm(0), done.append)
    c.catch_up()
    assert op.try_complete()
    assert done[0][TP] == ProducePartitionResponse(Errors.NONE, 2, -1, 0)


def test_the_topic_min_isr_overrides_the_brokers_and_is_capped_by_the_assignment() -> None:
    """``Partition.effective_min_isr``: a topic's ``min.insync.replicas`` other than Kafka's
    default 1 wins over the broker's; either is capped by the number of assigned replicas."""
    from replica_core.storage.config import LogConfig

    c = Cluster(log_config=LogConfig(min_insync_replicas=2))  # broker default: 1
    c.create(isr=(0,))
    assert c.partition(0).effective_min_isr() == 2
    assert c.produce(n=1, acks=-1)[TP].error_code == Errors.NOT_ENOUGH_REPLICAS
    c = Cluster(config=ReplicaConfig(min_insync_replicas=3), log_config=LogConfig())
    c.create(replicas=(0, 1), isr=(0, 1))
    assert c.partition(0).effective_min_isr() == 2  # 3 wanted, two replicas assigned
    c = Cluster(config=ReplicaConfig(min_insync_replicas=2),
                log_config=LogConfig(min_insync_replicas=3))
    c.create()
    assert c.partition(0).effective_min_isr() == 3
