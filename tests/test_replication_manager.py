"""ReplicaManager: LeaderAndIsr handling (§8.5, §7.10), AlterPartition answers (§6.7), scheduled
work (ISR change propagation, HW checkpoint) and metrics."""
from __future__ import annotations

from replication_harness import START_MS, TP, Cluster

from replica_core.errors import Errors
from replica_core.replication import IsrState, ReplicaConfig
from replica_core.replication.messages import (
    AlterPartitionResult,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    TopicPartition,
)
from replica_core.storage.checkpoint import OffsetCheckpointFile


def test_stale_controller_epoch_rejects_the_whole_request() -> None:
    c = Cluster()
    c.controller_epoch = 5
    c.create()
    responses = c.leader_and_isr(TP, leader=1, isr=(0, 1, 2), controller_epoch=4)
    for resp in responses.values():
        assert resp.error_code == Errors.STALE_CONTROLLER_EPOCH
        assert resp.partition_errors[TP] == Errors.STALE_CONTROLLER_EPOCH
    assert c.partition(0).is_leader and c.partition(0).leader_epoch == 0
    assert c.rm(0).controller_epoch == 5


def test_stale_or_equal_leader_epoch_rejected_per_partition() -> None:
    c = Cluster()
    tp1 = TopicPartition("t", 1)
    c.create()
    c.create(tp1)
    c.leader_and_isr(TP, leader=0, isr=(0, 1, 2))  # TP at epoch 1
    old = LeaderAndIsrPartitionState("t", 0, 1, 1, 0, (0, 1, 2), 9, (0, 1, 2))
    same = LeaderAndIsrPartitionState("t", 0, 1, 1, 1, (0, 1, 2), 9, (0, 1, 2))
    new = LeaderAndIsrPartitionState("t", 1, 1, 1, 1, (0, 1, 2), 9, (0, 1, 2))
    resp = c.rm(0).become_leader_or_follower(LeaderAndIsrRequest(99, 1, c.broker_epochs[0], (old, new)))
    assert resp.error_code == Errors.NONE
    assert resp.partition_errors == {TP: Errors.STALE_CONTROLLER_EPOCH, tp1: Errors.NONE}
    assert c.partition(0).is_leader and c.partition(0).leader_epoch == 1
    assert not c.partition(0, tp1).is_leader and c.partition(0, tp1).leader_id == 1
    resp = c.rm(0).become_leader_or_follower(LeaderAndIsrRequest(99, 1, c.broker_epochs[0], (same,)))
    assert resp.partition_errors == {TP: Errors.STALE_CONTROLLER_EPOCH}
    assert c.partition(0).is_leader


def test_not_assigned_and_inconsistent_topic_id() -> None:
    c = Cluster(n=4)
    c.leader_and_isr(TP, leader=0, isr=(0, 1, 2), topic_id="A" * 22)
    resp = c.leader_and_isr(TP, leader=0, isr=(0, 1), replicas=(0, 1, 2), brokers=(3,))
    assert resp[3].partition_errors[TP] == Errors.UNKNOWN_TOPIC_OR_PARTITION
    resp = c.leader_and_isr(TP, leader=0, isr=(0, 1, 2), topic_id="B" * 22, brokers=(0,))
    assert resp[0].partition_errors[TP] == Errors.INCONSISTENT_TOPIC_ID


class FakeFetcherManager:
    def __init__(self) -> None:
        self.added: dict = {}
        self.removed: list = []

    def add_fetcher_for_partitions(self, states) -> None:
        self.added.update(states)

    def remove_fetcher_for_partitions(self, tps) -> None:
        self.removed.extend(tps)

    def shutdown_idle_fetcher_threads(self) -> None:
        pass

    def shutdown(self) -> None:
        pass


def test_become_follower_restarts_fetcher_at_log_end() -> None:
    c = Cluster()
    fm = FakeFetcherManager()
    c.rm(1).fetcher_manager = fm
    c.create()
    assert fm.added[TP].leader == 0 and fm.added[TP].current_leader_epoch == 0
    assert fm.added[TP].init_offset == 0
    c.produce(n=4, acks=1)
    c.catch_up()
    fm.added.clear()
    c.leader_and_isr(TP, leader=2, isr=(0, 1, 2))
    assert TP in fm.removed
    state = fm.added[TP]
    assert (state.leader, state.current_leader_epoch, state.init_offset) == (2, 1, 4)
    # Becoming leader stops the fetcher first.
    fm.removed.clear()
    c.leader_and_isr(TP, leader=1, isr=(0, 1, 2))
    assert fm.removed == [TP]
    assert c.partition(1).is_leader


def test_high_watermark_truncation_mode_truncates_on_becoming_follower() -> None:
    c = Cluster(config=ReplicaConfig(truncation="high_watermark"))
    fm = FakeFetcherManager()
    c.rm(0).fetcher_manager = fm
    c.create()
    c.produce(n=4, acks=1)
    c.catch_up()
    c.produce(n=3, acks=1)  # 4..6 not replicated; HW 4
    assert c.partition(0).high_watermark == 4
    c.leader_and_isr(TP, leader=1, isr=(1, 2))
    assert c.partition(0).log_end_offset == 4  # pre-KIP-101: cut to the local HW
    assert fm.added[TP].init_offset == 4


def test_leader_epoch_mode_keeps_the_log_for_the_fetcher() -> None:
    c = Cluster()
    c.create()
    c.produce(n=4, acks=1)
    c.catch_up()
    c.produce(n=3, acks=1)
    c.leader_and_isr(TP, leader=1, isr=(1, 2))
    assert c.partition(0).log_end_offset == 7  # truncation is the fetcher's job
    assert c.rm(0).last_initial_fetch_states[TP].init_offset == 7


def test_alter_partition_errors() -> None:
    c = Cluster(auto_isr=False)
    c.create(isr=(0, 1))
    leader = c.partition(0)
    c.fetch(2)  # proposes {0,1,2}
    req = c.controller.requests[-1]
    c.controller.answer(req, Errors.INELIGIBLE_REPLICA)  # reverted, no retry
    assert leader.isr_state == IsrState.COMMITTED and leader.maximal_isr == [0, 1]
    c.advance(1_000)
    assert len(c.controller.requests) == 1
    c.fetch(2)  # proposed again
    req = c.controller.requests[-1]
    c.controller.answer(req, Errors.FENCED_LEADER_EPOCH)  # stays pending until new metadata
    assert leader.isr_state == IsrState.PENDING_EXPAND
    c.fetch(2)
    c.advance(1_000)
    assert len(c.controller.requests) == 2
    c.controller.answer(req, Errors.UNKNOWN_SERVER_ERROR)  # anything else: retried
    assert len(c.controller.requests) == 2
    c.advance(1_000)
    assert len(c.controller.requests) == 3
    assert c.controller.requests[-1].items == req.items
    # A success for another leader epoch is ignored; ours is committed.
    c.rm(0).handle_alter_partition_response(
        AlterPartitionResult(TP, Errors.NONE, 0, 7, (0, 1, 2), 5))
    assert leader.isr_state == IsrState.PENDING_EXPAND
    c.controller.answer(c.controller.requests[-1])
    assert leader.isr == [0, 1, 2] and leader.partition_epoch == 1
    assert c.rm(0).metrics()["FailedIsrUpdatesPerSec"] == 4


def test_new_leader_and_isr_clears_a_pending_change() -> None:
    c = Cluster(auto_isr=False)
    c.create(isr=(0, 1))
    c.fetch(2)
    assert c.partition(0).isr_state == IsrState.PENDING_EXPAND
    c.leader_and_isr(TP, leader=0, isr=(0, 1, 2))
    leader = c.partition(0)
    assert leader.isr_state == IsrState.COMMITTED and leader.isr == [0, 1, 2]
    c.controller.answer(c.controller.requests[0], isr=(0, 1))  # the old answer arrives late
    assert leader.isr == [0, 1, 2]


def test_isr_change_propagation_is_batched() -> None:
    c = Cluster()
    seen: list[tuple[int, list]] = []
    c.rm(0).isr_change_listener = lambda tps: seen.append((c.clock.milliseconds(), tps))
    tp1 = TopicPartition("t", 1)
    c.create(isr=(0, 1))
    c.create(tp1, isr=(0, 1))
    c.fetch(2)  # TP: {0,1} -> {0,1,2}, committed at once
    changed_at = c.clock.milliseconds()
    for _ in range(2):
        c.advance(2_500)
        assert seen == []  # the last change is not yet more than 5 s old
    c.fetch(2, (tp1,))  # another change restarts the 5 s blackout
    last = c.clock.milliseconds()
    assert last > changed_at
    while not seen:
        c.advance(500)
    at, tps = seen[0]
    assert tps == [TP, tp1]
    assert at - last > 5_000
    assert c.rm(0).metrics()["IsrChangePropagations"] == 1


def test_isr_change_propagation_interval_bounds_the_delay() -> None:
    c = Cluster()
    seen: list[int] = []
    c.rm(0).isr_change_listener = lambda tps: seen.append(c.clock.milliseconds())
    tps = [TopicPartition("t", i) for i in range(40)]
    for tp in tps:
        c.create(tp, isr=(0, 1))
    # A change every 2 s keeps the 5 s blackout from ever passing; the 60 s interval fires.
    for tp in tps:
        c.fetch(2, (tp,))
        c.advance(2_000)
        if seen:
            break
    assert seen and seen[0] - START_MS > 60_000
    assert seen[0] - START_MS <= 60_000 + 2_500 + 2_000


def test_high_watermark_checkpoint_interval() -> None:
    c = Cluster()
    c.create()
    c.produce(n=3, acks=1)
    c.catch_up()
    path = "/kafka/broker-0/replication-offset-checkpoint"
    checkpoint = OffsetCheckpointFile(c.medium, path)
    c.advance(1)  # the first run is due at the first LeaderAndIsr
    assert checkpoint.read()[("t", 0)] == 3
    c.produce(n=2, acks=1)
    c.catch_up()
    interval = c.config.replica_high_watermark_checkpoint_interval_ms
    c.advance(interval - 2)
    assert checkpoint.read()[("t", 0)] == 3
    c.advance(1)
    assert checkpoint.read()[("t", 0)] == 5


def test_metrics() -> None:
    c = Cluster(config=ReplicaConfig(min_insync_replicas=2))
    tp1 = TopicPartition("t", 1)
    c.create()
    c.create(tp1, isr=(0,))
    m = c.rm(0).metrics()
    assert m["LeaderCount"] == 2 and m["PartitionCount"] == 2
    assert m["UnderReplicatedPartitions"] == 1
    assert m["UnderMinIsrPartitionCount"] == 1
    assert m["partitions"]["t-1"]["InSyncReplicasCount"] == 1
    c.produce(tp1, n=2, acks=1)
    assert c.rm(0).metrics()["partitions"]["t-1"]["LogEndOffset"] == 2
    assert c.rm(0).metrics()["partitions"]["t-1"]["HighWatermark"] == 0  # under min ISR
    assert c.rm(1).metrics()["UnderReplicatedPartitions"] == 0  # followers do not count


def test_partition_state_names_its_topic_partition_and_compares_by_message_fields() -> None:
    """A LeaderAndIsr partition state carries its (topic, partition) as a TopicPartition, kept
    current by ``dataclasses.replace``, and outside equality, hashing and repr (it is not a
    field of Kafka's message)."""
    import dataclasses

    state = LeaderAndIsrPartitionState("t", 3, 1, 2, 4, (2, 1), 5, (1, 2))
    assert type(state.tp) is TopicPartition and state.tp == ("t", 3)
    assert str(state.tp) == "t-3"
    moved = dataclasses.replace(state, partition=7)
    assert moved.tp == ("t", 7) and state.tp == ("t", 3)
    twin = LeaderAndIsrPartitionState("t", 3, 1, 2, 4, (2, 1), 5, (1, 2))
    assert twin == state and hash(twin) == hash(state) and twin != moved
    assert "tp=" not in repr(state)
    assert [f.name for f in dataclasses.fields(state) if f.compare][-1] == "topic_id"


def test_leader_state_is_the_leaders_epoch_hw_and_leo_and_none_elsewhere() -> None:
    """``leader_state``: (leader epoch, HW, LEO) where the partition is led here with a log;
    None on a follower, for a partition not hosted, and after leadership moves away."""
    c = Cluster()
    c.create(TP)
    c.produce(TP, 3, acks=1)
    for follower in (1, 2, 1, 2):  # both fetch the records, then report their LEO
        c.fetch(follower)
    leader = c.partition(0)
    assert (leader.log_end_offset, leader.high_watermark) == (3, 3)
    assert c.rm(0).leader_state(TP) == (leader.leader_epoch, 3, 3)
    c.produce(TP, 2, acks=1)
    assert c.rm(0).leader_state(TP) == (leader.leader_epoch, 3, 5)
    assert c.rm(1).leader_state(TP) is None
    assert c.rm(0).leader_state(TopicPartition("other", 0)) is None
    c.leader_and_isr(TP, leader=1, isr=(0, 1, 2))
    assert c.rm(0).leader_state(TP) is None
    # the new leader starts from the HW it had learnt as a follower (0: its last fetch was
    # answered before the old leader's HW moved) and its own LEO (the first 3 records)
    assert c.rm(1).leader_state(TP) == (c.partition(1).leader_epoch, 0, 3)


def test_tick_due_version_moves_whenever_the_next_tick_may_come_earlier() -> None:
    """``tick_due_version`` moves when the HW checkpoint task starts (first LeaderAndIsr) and
    when a parked operation's deadline comes before every other; while it stands still
    ``next_tick_due_ms`` is never earlier than it was."""
    c = Cluster()
    rm = c.rm(0)
    v0, due0 = rm.tick_due_version(), rm.next_tick_due_ms()
    c.create(TP)
    v1 = rm.tick_due_version()
    assert v1 == v0 + 1 and rm.next_tick_due_ms() <= due0
    c.advance(1)  # the tasks due at start run: every due time moves later
    v2, due2 = rm.tick_due_version(), rm.next_tick_due_ms()
    assert v2 == v1 and due2 > START_MS
    now = START_MS + 1
    c.produce(TP, 1, acks=-1, timeout_ms=due2 - now - 1)  # parked: due just before the rest
    v3, due3 = rm.tick_due_version(), rm.next_tick_due_ms()
    assert v3 == v2 + 1 and due3 == due2 - 1
    c.produce(TP, 1, acks=-1, timeout_ms=30_000)  # parked, due later: nothing earlier
    assert (rm.tick_due_version(), rm.next_tick_due_ms()) == (v3, due3)


def test_is_leader_follows_every_change_of_the_leader() -> None:
    """``Partition.is_leader`` is kept with ``leader_id``: through elections, demotions, and
    StopReplica with deletion."""
    c = Cluster()
    c.create()

    def leaders() -> list[bool]:
        return [c.partition(b).is_leader for b in range(3)]

    def agree() -> None:
        for b in range(3):
            p = c.partition(b)
            assert p.is_leader == (p.leader_id == b)

    assert leaders() == [True, False, False]
    agree()
    c.leader_and_isr(TP, leader=1, isr=(0, 1, 2))
    assert leaders() == [False, True, False]
    agree()
    c.leader_and_isr(TP, leader=2, isr=(0, 1, 2))
    assert leaders() == [False, False, True]
    agree()
    c.leader_and_isr(TP, leader=0, isr=(0, 1, 2))
    assert leaders() == [True, False, False]
    agree()
    stopped = c.partition(0)
    c.rm(0).stop_replica(TP, delete=True)
    assert not stopped.is_leader and stopped.leader_id == -1


def test_local_log_is_each_hosted_partitions_log() -> None:
    """``ReplicaManager.local_log`` (a lookup kept where partitions get logs and stop being
    hosted) answers ``partition(tp).log`` for every partition, through leading, following, a
    LeaderAndIsr without a live leader, a refused topic id, StopReplica with and without
    deletion, and hosting the partition again."""
    c = Cluster(n=4)
    tp1 = TopicPartition("t", 1)
    unknown = TopicPartition("u", 0)
    rms = [c.rm(b) for b in range(4)]

    def agree() -> None:
        for rm in rms:
            for tp in (TP, tp1, unknown, ("t", 0)):
                p = rm.partition(tp)
                assert rm.local_log(tp) is (p.log if p is not None else None)
                assert rm.get_partition(tp) is p

    agree()
    c.create()
    c.create(tp1, replicas=(1, 2, 3), leader=3)
    for b in (0, 1, 2):
        assert c.rm(b).local_log(TP) is not None
    agree()
    # refused: a topic id other than the log's; nothing new is made on broker 3 either
    c.leader_and_isr(TP, leader=0, isr=(0, 1, 2), topic_id="A" * 22, brokers=(0, 1, 2))
    c.leader_and_isr(TP, leader=0, isr=(0, 1, 2), topic_id="B" * 22, brokers=(0,))
    agree()
    # not assigned here: hosted without a log
    resp = c.leader_and_isr(unknown, leader=0, isr=(0, 1, 2), brokers=(3,))
    assert resp[3].partition_errors[unknown] == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert c.rm(3).partition(unknown) is not None and c.rm(3).local_log(unknown) is None
    agree()
    req = LeaderAndIsrRequest(99, 1, c.broker_epochs[3], (LeaderAndIsrPartitionState(
        "t", 0, 1, -1, 9, (0, 1, 2, 3), 9, (0, 1, 2, 3)),))
    assert c.rm(3).become_leader_or_follower(req).partition_errors[TP] == Errors.NONE
    assert c.rm(3).local_log(TP) is not None  # no leader: the log is made all the same
    agree()
    assert c.rm(1).stop_replica(TP) == Errors.NONE  # still hosted, log kept
    assert c.rm(1).local_log(TP) is not None
    agree()
    old = c.rm(2).local_log(tp1)
    assert c.rm(2).stop_replica(tp1, delete=True) == Errors.NONE
    assert c.rm(2).local_log(tp1) is None and c.rm(2).partition(tp1) is None
    agree()
    c.leader_and_isr(tp1, leader=3, isr=(1, 2, 3), replicas=(1, 2, 3))
    new = c.rm(2).local_log(tp1)
    assert new is not None and new is not old
    agree()
