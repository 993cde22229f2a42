"""Kafka's answers at the edges of the produce/fetch paths (issue 13):

* a partition this broker does not host answers NOT_LEADER_OR_FOLLOWER when the broker's
  metadata knows it and UNKNOWN_TOPIC_OR_PARTITION when not (ReplicaManager.getPartitionOrError),
  for produce, fetch, OffsetsForLeaderEpoch, ListOffsets and a waiting acks=all produce;
* StopReplica without deletion leaves the partition hosted; with deletion it is gone, its
  waiting produce answered and its log deleted;
* a follower added to a partition its leader keeps leading starts as Replica.ReplicaState.Empty
  (lastFetchLeaderLogEndOffset 0), while a new leader resets followers to −1;
* the initial fetch offset follows the inter-broker protocol: the LEO with truncation on fetch
  (IBP ≥ 2.7) and the high watermark without it (ReplicaManager.initialFetchOffset).
"""
from __future__ import annotations

import pytest
from replication_harness import TP, Cluster

from replica_core.errors import Errors
from replica_core.records import build_batch
from replica_core.replication import ReplicaConfig
from replica_core.replication.messages import (
    FetchPartition,
    FetchRequest,
    ListOffsetsPartition,
    OffsetForLeaderPartition,
    OffsetsForLeaderEpochRequest,
    TopicPartition,
)
from replica_core.replication.state import ReplicaStateTable

OTHER = TopicPartition("t", 1)        # exists (broker 0 learns of it), hosted on 1 and 2 only
UNKNOWN = TopicPartition("nope", 0)   # no broker's metadata knows it

LATEST = -1


def _cluster() -> Cluster:
    c = Cluster()
    c.create(TP)
    c.create(OTHER, replicas=(1, 2), leader=1)
    c.rm(0).metadata_cache.update([OTHER])  # what UpdateMetadata would tell broker 0
    return c


def _fetch(rm, tp: TopicPartition):
    req = FetchRequest(1, 0, 1, 1 << 20, (FetchPartition(tp, 0, 1 << 20, 0, 0),))
    return rm.fetch_messages(req).partitions[0].error_code


@pytest.mark.parametrize(("tp", "expected"), [(OTHER, Errors.NOT_LEADER_OR_FOLLOWER),
                                               (UNKNOWN, Errors.UNKNOWN_TOPIC_OR_PARTITION)])
def test_unhosted_partition_answers_by_metadata(tp, expected):
    c = _cluster()
    rm = c.rm(0)
    assert rm.partition(tp) is None
    produced = rm.append_records({tp: build_batch([b"x"])}, acks=1, timeout_ms=1000)
    assert produced[tp].error_code == expected
    assert _fetch(rm, tp) == expected
    epochs = rm.offsets_for_leader_epoch(OffsetsForLeaderEpochRequest(
        1, (OffsetForLeaderPartition(tp, 0, 0),)))
    assert epochs[tp].error_code == expected
    assert rm.list_offsets(1, [ListOffsetsPartition(tp, LATEST, 0)])[tp].error_code == expected


def test_stop_replica_without_delete_keeps_the_partition_hosted():
    c = _cluster()
    c.produce(TP, n=2, acks=1)
    follower = c.rm(1)
    assert TP in follower.last_initial_fetch_states
    assert follower.stop_replica(TP, delete=False) == Errors.NONE
    assert follower.partition(TP) is not None            # still hosted ...
    assert TP not in follower.last_initial_fetch_states  # ... but no longer fetched
    leader = c.rm(0)
    assert leader.stop_replica(TP, delete=False) == Errors.NONE
    p = leader.partition(TP)
    assert p is not None and p.is_leader and p.log.log_end_offset == 2
    assert leader.log_manager.get_log(TP.topic, TP.partition) is p.log


def test_stop_replica_with_delete_unhosts_answers_waiting_produce_and_deletes_the_log():
    c = _cluster()
    leader = c.rm(0)
    answers = []
    parked = c.produce(TP, n=1, acks=-1, callback=answers.append)   # waits for the followers
    assert parked is None and not answers
    assert leader.stop_replica(TP, delete=True) == Errors.NONE
    assert leader.partition(TP) is None
    assert answers and answers[0][TP].error_code == Errors.NOT_LEADER_OR_FOLLOWER
    assert leader.log_manager.get_log(TP.topic, TP.partition) is None
    # the topic still exists, so the broker now answers as for any unhosted partition
    assert _fetch(leader, TP) == Errors.NOT_LEADER_OR_FOLLOWER


def test_follower_added_to_a_kept_leadership_starts_empty():
    table = ReplicaStateTable(0)
    row = table.add_partition([0, 1, 2], [0, 1, 2], leader_epoch=3, now_ms=1000, leader_leo=7)
    assert table.last_fetch_leader_leo[row, 1] == -1      # a new leader's resetReplicaState
    table.kernels.follower_fetch(row, 1, 7, 0, 1500, 7, 101)
    # a replica joins the assignment while broker 0 keeps leading (Partition's
    # updateAssignmentAndIsr makes a new Replica: ReplicaState.Empty)
    table.set_assignment(row, [0, 1, 2, 3], [0, 1, 2])
    slot = table.slot(row, 3)
    assert slot == 3
    assert table.last_fetch_leader_leo[row, slot] == 0
    assert table.leo[row, slot] == -1 and table.last_fetch_time_ms[row, slot] == 0
    assert table.last_caught_up_time_ms[row, slot] == 0
    # the others keep the state they had
    assert table.last_fetch_leader_leo[row, 1] == 7 and table.leo[row, 1] == 7
    assert table.last_fetch_leader_leo[row, 2] == -1


@pytest.mark.parametrize(("truncate_on_fetch", "expect_leo"), [(True, True), (False, False)])
def test_initial_fetch_offset_follows_truncation_on_fetch(truncate_on_fetch, expect_leo):
    c = Cluster(config=ReplicaConfig(truncate_on_fetch=truncate_on_fetch))
    c.create(TP)
    c.produce(TP, n=3, acks=1)               # LEO 3 on the leader, HW still 0
    leader_log = c.partition(0).log
    assert leader_log.log_end_offset == 3 and leader_log.high_watermark == 0
    # the leader steps down: it becomes a follower of broker 1
    c.leader_and_isr(TP, leader=1, isr=(0, 1, 2))
    state = c.rm(0).last_initial_fetch_states[TP]
    assert state.init_offset == (3 if expect_leo else 0)
