"""Fetch on the leader (KAFKA_SEMANTICS §3.1-§3.6, §4.3, §6.9, §9.7-§9.10): bounds, byte limits,
DelayedFetch, diverging epochs, KIP-320 fencing, OffsetsForLeaderEpoch and ListOffsets."""
from __future__ import annotations

import pytest
from conftest import patch_method
from replication_harness import TP, Cluster

from replica_core.errors import Errors, FencedLeaderEpochError, OffsetOutOfRangeError
from replica_core.records import build_batch, iter_batches
from replica_core.replication.messages import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    EpochEndOffset,
    FetchPartition,
    FetchRequest,
    ListOffsetsPartition,
    OffsetForLeaderPartition,
    OffsetsForLeaderEpochRequest,
    TopicPartition,
)
from replica_core.storage.config import LogConfig


def _offsets(records) -> list[int]:
    out = []
    for batch in iter_batches(bytes(records)):
        out.append((batch.base_offset, batch.last_offset))
    return out


def _consumer_fetch(c: Cluster, tps=(TP,), offset: int = 0, *, max_bytes: int = 1 << 20,
                    partition_max_bytes: int = 1 << 20, epoch: int = -1, **kw):
    req = FetchRequest(-1, kw.pop("max_wait_ms", 0), kw.pop("min_bytes", 1), max_bytes,
                       tuple(FetchPartition(tp, offset, partition_max_bytes,
                                            current_leader_epoch=epoch) for tp in tps))
    return c.rm(0).fetch_messages(req, **kw)


def test_fetch_params_follow_the_request_values_and_are_reused() -> None:
    """KafkaApis' FetchParams: max bytes capped by fetch.max.bytes, min bytes by max bytes,
    isolation by who fetches. Requests with the same six values share one params object;
    another value (another replica, epoch, wait, byte bound or isolation level) gets its own,
    and the map of them stays bounded."""
    c = Cluster(3)
    rm = c.rm(0)
    cap = rm.config.fetch_max_bytes
    follower = FetchRequest(1, 500, 1, 2 * cap, (), replica_epoch=7)
    params = rm.fetch_params(follower)
    assert tuple(params)[:6] == (1, 7, 500, 1, cap, "log_end")
    assert rm.fetch_params(FetchRequest(1, 500, 1, 2 * cap, (), replica_epoch=7)) is params
    assert rm.fetch_params(FetchRequest(1, 500, 1, 2 * cap, (), replica_epoch=8)).replica_epoch == 8
    assert rm.fetch_params(FetchRequest(2, 500, 1, 2 * cap, (), replica_epoch=7)).replica_id == 2
    small = rm.fetch_params(FetchRequest(1, 500, 100, 10, (), replica_epoch=7))
    assert (small.min_bytes, small.max_bytes) == (10, 10)  # min bytes capped by max bytes
    consumer = rm.fetch_params(FetchRequest(-1, 0, 1, 100, ()))
    committed = rm.fetch_params(FetchRequest(-1, 0, 1, 100, (), isolation_level=1))
    assert (consumer.isolation, committed.isolation) == ("high_watermark", "txn_committed")
    for wait in range(3000):  # far more distinct values than the map keeps
        assert rm.fetch_params(FetchRequest(1, wait, 1, 100, ())).max_wait_ms == wait
    assert len(rm._fetch_params) <= 1024
    assert rm.fetch_params(follower) == params


def test_consumers_read_to_hw_followers_to_leo() -> None:
    c = Cluster()
    c.create()
    c.produce(n=3, acks=1)
    c.catch_up()
    c.produce(n=2, acks=1)  # HW 3, LEO 5
    consumer = _consumer_fetch(c).partitions[0]
    assert consumer.high_watermark == 3
    assert _offsets(consumer.records) == [(0, 2)]
    follower = c.fetch(1, apply=False)
    fp = follower.partitions[0]
    assert _offsets(fp.records) == [(3, 4)]
    assert fp.high_watermark == 3 and fp.log_end_offset == 5
    beyond = _consumer_fetch(c, offset=4).partitions[0]  # between HW and LEO: empty, no error
    assert beyond.error_code == Errors.NONE and len(beyond.records) == 0
    past = _consumer_fetch(c, offset=6).partitions[0]
    assert past.error_code == Errors.OFFSET_OUT_OF_RANGE


def test_max_bytes_across_partitions_with_min_one_message_once() -> None:
    c = Cluster()
    tps = [TopicPartition("t", i) for i in range(4)]
    for tp in tps:
        c.create(tp)
    for tp in tps[1:]:
        c.produce(tp, n=5, acks=1, value=b"x" * 100)
        c.catch_up(tp=tp)
    size = len(build_batch([b"x" * 100] * 5))
    # tps[0] is empty and does not use up min-one-message; tps[1] exceeds max_bytes by one
    # whole batch (KIP-74); the later partitions get nothing.
    resp = _consumer_fetch(c, tps, max_bytes=10)
    assert [len(p.records) for p in resp.partitions] == [0, size, 0, 0]
    # Per-partition limit below the batch size: only the first non-empty partition may exceed
    # it; after that an incomplete first batch is answered as nothing (fetch v3+).
    resp = _consumer_fetch(c, tps, partition_max_bytes=size - 1)
    assert [len(p.records) for p in resp.partitions] == [0, size, 0, 0]
    # The request budget is shared in request order.
    resp = _consumer_fetch(c, tps, max_bytes=2 * size + 5)
    assert [len(p.records) for p in resp.partitions] == [0, size, size, 0]
    resp = _consumer_fetch(c, tps, max_bytes=3 * size)
    assert [len(p.records) for p in resp.partitions] == [0, size, size, size]


def test_delayed_fetch_completes_on_min_bytes() -> None:
    c = Cluster()
    c.create()
    got = []
    assert c.fetch(1, max_wait_ms=500, min_bytes=1, callback=got.append) is None
    assert c.rm(0).fetch_purgatory.delayed == 1
    c.produce(n=2, acks=1)
    assert len(got) == 1
    assert _offsets(got[0].partitions[0].records) == [(0, 1)]
    # The purgatory re-read does not record follower progress (§3.6).
    assert c.partition(0).replica(1).log_end_offset == 0


def test_delayed_fetch_waits_for_enough_bytes() -> None:
    c = Cluster()
    c.create()
    size = len(build_batch([b"v" * 10] * 2))
    got = []
    assert c.fetch(1, max_wait_ms=500, min_bytes=size + 1, callback=got.append) is None
    c.produce(n=2, acks=1)
    assert got == []
    c.produce(n=2, acks=1)
    assert len(got) == 1 and _offsets(got[0].partitions[0].records) == [(0, 1), (2, 3)]


def test_delayed_fetch_completes_on_timeout() -> None:
    c = Cluster()
    c.create()
    got = []
    assert _consumer_fetch(c, max_wait_ms=500, min_bytes=1, callback=got.append) is None
    c.advance(499)
    assert got == []
    c.advance(1)
    assert len(got) == 1
    assert got[0].partitions[0].error_code == Errors.NONE
    assert len(got[0].partitions[0].records) == 0
    assert c.rm(0).metrics()["FetchExpiresPerSec.consumer"] == 1


def test_delayed_fetch_completes_on_leader_epoch_change() -> None:
    c = Cluster()
    c.create()
    got = []
    assert c.fetch(1, max_wait_ms=500, callback=got.append) is None
    c.leader_and_isr(TP, leader=0, isr=(0, 1, 2), brokers=(0,))  # re-elected, epoch 1
    assert len(got) == 1
    assert got[0].partitions[0].error_code == Errors.FENCED_LEADER_EPOCH


def test_consumer_delayed_fetch_completes_when_hw_moves() -> None:
    c = Cluster()
    c.create()
    got = []
    assert _consumer_fetch(c, max_wait_ms=1000, callback=got.append) is None
    c.produce(n=2, acks=1)
    assert got == []  # LEO moved, HW did not
    c.catch_up()
    assert len(got) == 1 and _offsets(got[0].partitions[0].records) == [(0, 1)]


def _diverged_cluster() -> Cluster:
    """§9.8: broker 0 holds 10,11 of epoch 0 that the epoch-1 leader (broker 1) never had."""
    c = Cluster(n=2)
    c.create(replicas=(0, 1))
    c.produce(n=10, acks=1)
    c.catch_up(followers=(1,))
    c.produce(n=2, acks=1)  # 10, 11 (epoch 0) only on broker 0
    c.leader_and_isr(TP, leader=1, isr=(1,), replicas=(0, 1))
    c.produce(n=3, acks=1)  # 10..12 in epoch 1 on broker 1
    assert c.partition(0).log_end_offset == 12
    return c


def test_diverging_epoch_answer_without_state_update() -> None:
    c = _diverged_cluster()
    leader = c.partition(1)
    before = leader.replica(0)
    assert before.log_end_offset == -1
    resp = c.fetch(0, apply=False)
    p = resp.partitions[0]
    assert p.error_code == Errors.NONE
    assert p.diverging_epoch is not None
    assert (p.diverging_epoch.leader_epoch, p.diverging_epoch.end_offset) == (0, 10)
    assert len(p.records) == 0
    assert p.high_watermark == leader.high_watermark and p.log_end_offset == 13
    # KAFKA-13141: the leader did not record offset 12 as the follower's LEO.
    assert leader.replica(0).log_end_offset == -1
    assert leader.replica(0).last_fetch_time_ms == 0
    c.apply(0, resp)  # truncate to 10
    assert c.partition(0).log_end_offset == 10
    resp = c.fetch(0)
    assert resp.partitions[0].diverging_epoch is None
    assert leader.replica(0).log_end_offset == 10
    c.fetch(0)
    assert c.partition(0).log_end_offset == 13


def test_fetch_below_log_start_with_divergence_is_out_of_range() -> None:
    c = _diverged_cluster()
    leader_log = c.partition(1).log
    assert c.partition(1).high_watermark == 13
    leader_log.maybe_increment_log_start_offset(13)
    # Fetch offset 12 with a last fetched epoch, below the log start 13: OFFSET_OUT_OF_RANGE
    # from the epoch path itself (KAFKA-12996), not an answer the follower cannot apply.
    resp = c.fetch(0, apply=False)
    assert resp.partitions[0].error_code == Errors.OFFSET_OUT_OF_RANGE
    assert resp.partitions[0].diverging_epoch is None


def test_current_leader_epoch_fencing() -> None:
    c = Cluster()
    c.create()
    c.leader_and_isr(TP, leader=0, isr=(0, 1, 2))  # epoch 1 everywhere
    fenced = c.fetch(1, current_leader_epoch=0, apply=False).partitions[0]
    assert fenced.error_code == Errors.FENCED_LEADER_EPOCH
    unknown = c.fetch(1, current_leader_epoch=2, apply=False).partitions[0]
    assert unknown.error_code == Errors.UNKNOWN_LEADER_EPOCH
    assert c.partition(0).replica(1).log_end_offset == -1  # no state update from either
    ok = c.fetch(1, current_leader_epoch=1, apply=False).partitions[0]
    assert ok.error_code == Errors.NONE
    assert c.fetch(1, current_leader_epoch=-1, apply=False).partitions[0].error_code == Errors.NONE
    rm = c.rm(0)
    unknown_answer = rm.offsets_for_leader_epoch(OffsetsForLeaderEpochRequest(
        1, (OffsetForLeaderPartition(TP, 0, current_leader_epoch=5),)))
    assert unknown_answer[TP].error_code == Errors.UNKNOWN_LEADER_EPOCH
    fenced_answer = rm.offsets_for_leader_epoch(OffsetsForLeaderEpochRequest(
        1, (OffsetForLeaderPartition(TP, 0, current_leader_epoch=0),)))
    assert fenced_answer[TP].error_code == Errors.FENCED_LEADER_EPOCH
    not_leader = c.rm(1).offsets_for_leader_epoch(OffsetsForLeaderEpochRequest(
        2, (OffsetForLeaderPartition(TP, 0, current_leader_epoch=1),)))
    assert not_leader[TP].error_code == Errors.NOT_LEADER_OR_FOLLOWER
    follower_fetch_from_follower = c.fetch(2, leader=1, apply=False).partitions[0]
    assert follower_fetch_from_follower.error_code == Errors.NOT_LEADER_OR_FOLLOWER


def test_fetch_from_a_replica_outside_the_assignment() -> None:
    c = Cluster(n=4)
    c.create()
    parts = (FetchPartition(TP, 0, 1000, 0, current_leader_epoch=0),)
    resp = c.rm(0).fetch_messages(FetchRequest(3, 0, 1, 1000, parts))
    assert resp.partitions[0].error_code == Errors.UNKNOWN_LEADER_EPOCH
    parts = (FetchPartition(TP, 0, 1000, 0),)
    resp = c.rm(0).fetch_messages(FetchRequest(3, 0, 1, 1000, parts))
    assert resp.partitions[0].error_code == Errors.NOT_LEADER_OR_FOLLOWER


def test_offsets_for_leader_epoch_after_elections() -> None:
    c = Cluster()
    c.create()
    c.produce(n=5, acks=1)
    c.catch_up()
    c.leader_and_isr(TP, leader=1, isr=(0, 1, 2))  # epoch 1 starts at 5, nothing written
    rm = c.rm(1)

    def ask(epoch: int):
        a = rm.offsets_for_leader_epoch(OffsetsForLeaderEpochRequest(
            0, (OffsetForLeaderPartition(TP, epoch, current_leader_epoch=1),)))[TP]
        return a.error_code, a.leader_epoch, a.end_offset

    assert ask(0) == (Errors.NONE, 0, 5)  # KAFKA-7415: epoch 1 cached at LEO on election
    assert ask(1) == (Errors.NONE, 1, 5)  # latest epoch: the LEO
    c.produce(n=2, acks=1)
    assert ask(1) == (Errors.NONE, 1, 7)
    assert ask(-1) == (Errors.NONE, -1, -1)
    assert ask(9) == (Errors.NONE, -1, -1)


def test_list_offsets_earliest_latest_and_lagging_hw() -> None:
    c = Cluster()
    c.create()
    c.produce(n=4, acks=1)
    c.fetch(1)
    c.fetch(1)
    c.fetch(2)  # HW 0 (follower 2 reported 0); follower 1 knows HW 0
    c.fetch(2)
    rm = c.rm(0)
    earliest = rm.list_offsets(-1, [ListOffsetsPartition(TP, EARLIEST_TIMESTAMP)])[TP]
    assert (earliest.error_code, earliest.offset) == (Errors.NONE, 0)
    latest_consumer = rm.list_offsets(-1, [ListOffsetsPartition(TP, LATEST_TIMESTAMP)])[TP]
    assert (latest_consumer.offset, latest_consumer.leader_epoch) == (4, 0)
    c.produce(n=2, acks=1)
    assert rm.list_offsets(-1, [ListOffsetsPartition(TP, LATEST_TIMESTAMP)])[TP].offset == 4
    assert rm.list_offsets(1, [ListOffsetsPartition(TP, LATEST_TIMESTAMP)])[TP].offset == 6
    # A new leader whose HW lags its epoch start answers OFFSET_NOT_AVAILABLE to consumers.
    c.leader_and_isr(TP, leader=1, isr=(0, 1, 2))
    new = c.rm(1).list_offsets(-1, [ListOffsetsPartition(TP, LATEST_TIMESTAMP, 1)])[TP]
    assert c.partition(1).high_watermark < c.partition(1).leader_epoch_start_offset
    assert new.error_code == Errors.OFFSET_NOT_AVAILABLE
    fenced = c.rm(1).list_offsets(-1, [ListOffsetsPartition(TP, LATEST_TIMESTAMP, 0)])[TP]
    assert fenced.error_code == Errors.FENCED_LEADER_EPOCH


def test_follower_append_to_empty_log_inside_a_batch() -> None:
    c = Cluster()
    c.create()
    c.produce(n=5, acks=1)
    c.catch_up()
    batch = bytes(c.partition(0).log.read(0, 1 << 20).records)
    follower = c.partition(2)
    follower.truncate_fully_and_start_at(3)  # empty log starting inside the leader's batch
    assert follower.log_end_offset == follower.log_start_offset == 3
    follower.append_records_to_follower(batch)
    assert follower.log_start_offset == 0 and follower.log_end_offset == 5


def test_log_start_check_comes_before_the_divergence_answer(monkeypatch) -> None:
    """§3.5 step order on the leader: an undefined epoch end and a fetch offset below the log
    start are OFFSET_OUT_OF_RANGE even when the epochs diverge (KAFKA-12996)."""
    c = Cluster()
    c.create()
    c.produce(n=5, acks=1)
    c.catch_up()
    c.produce(n=5, acks=1)
    c.catch_up()
    leader = c.partition(0)
    log = leader.log
    diverging = EpochEndOffset(Errors.NONE, 0, 3)  # epoch 0 ends at 3 < fetch offset 7

    def read(fetch_offset: int):
        return leader.read_records(log, fetch_offset, 0, 0, 1 << 20, "log_end", True)

    answer = [diverging]
    patch_method(monkeypatch, leader, "last_offset_for_leader_epoch", lambda *a, **k: answer[0])
    info = read(7)
    assert info.fetched is None and info.diverging_epoch == diverging
    log.maybe_increment_log_start_offset(8)
    with pytest.raises(OffsetOutOfRangeError):
        read(7)
    answer[0] = EpochEndOffset(Errors.NONE, -1, -1)
    with pytest.raises(OffsetOutOfRangeError):
        read(9)
    answer[0] = EpochEndOffset(Errors.FENCED_LEADER_EPOCH, -1, -1)
    with pytest.raises(FencedLeaderEpochError):
        read(9)


def test_delayed_fetch_completes_when_the_log_rolls_past_it() -> None:
    """Case F: the fetch position is on an older segment than the end offset, so the bytes
    cannot be counted by position: answer now even though min_bytes is not reached."""
    c = Cluster(log_config=LogConfig(segment_bytes=300))
    c.create()
    got = []
    assert c.fetch(1, max_wait_ms=1000, min_bytes=1 << 20, callback=got.append) is None
    c.produce(n=1, acks=1)
    assert got == [] and len(c.partition(0).log.segments) == 1
    while len(c.partition(0).log.segments) == 1:
        c.produce(n=1, acks=1)
        assert got == [] or len(c.partition(0).log.segments) > 1
    assert len(got) == 1
    assert got[0].partitions[0].error_code == Errors.NONE
    assert len(got[0].partitions[0].records) > 0


def _parked_at_log_end(c: Cluster, got: list) -> None:
    """Follower 1 caught up on two batches, then a follower fetch at the leader's LEO parks
    (DelayedFetch over a read that stopped at the log end); the HW is still 0 (follower 2
    has fetched nothing)."""
    c.create()
    c.produce(n=2, acks=1)
    c.fetch(1)
    assert c.fetch(1, max_wait_ms=500, callback=got.append) is None
    assert c.partition(0).high_watermark == 0


def test_parked_follower_fetch_expiring_reads_again_after_a_change() -> None:
    """§6.9: a fetch completing re-reads its partitions. Follower 2 catching up moves the HW
    to 2 while follower 1's fetch is parked at the log end (0 bytes: it stays parked); the
    expiry answers the new HW, not the one read at park."""
    c = Cluster()
    got: list = []
    _parked_at_log_end(c, got)
    c.catch_up(followers=(2,))
    assert c.partition(0).high_watermark == 2
    assert got == []  # no bytes past the fetch offset: still parked
    c.advance(500)
    assert len(got) == 1
    answer = got[0].partitions[0]
    assert (answer.error_code, answer.high_watermark, answer.log_end_offset,
            len(answer.records)) == (Errors.NONE, 2, 2, 0)


def test_parked_follower_fetch_expiring_unchanged_answers_its_reads(monkeypatch) -> None:
    """Nothing reported about any partition, no leadership or log-start change since the
    reads at park, every read at the log end: the expiry answers those reads without reading
    again (the same values a re-read gives: LEO 2, HW 0)."""
    c = Cluster()
    got: list = []
    _parked_at_log_end(c, got)
    rm = c.rm(0)
    reads: list = []
    real = rm._read_from_log
    patch_method(monkeypatch, rm, "_read_from_log",
                 lambda *a, **kw: reads.append(a) or real(*a, **kw))
    c.advance(500)
    assert reads == []
    assert len(got) == 1
    answer = got[0].partitions[0]
    assert (answer.error_code, answer.high_watermark, answer.log_end_offset,
            answer.log_start_offset, len(answer.records)) == (Errors.NONE, 0, 2, 0, 0)
    assert rm.metrics()["FetchExpiresPerSec.follower"] == 1
