"""Catching up, partition data processing, metrics, the endpoint and the manager (§7.2, §7.7–7.9)."""
from __future__ import annotations

import dataclasses

import pytest
from conftest import patch_method
from fetcher_cluster import TP, FetcherCluster

from replica_core.errors import Errors, FencedLeaderEpochError, UnknownTopicOrPartitionError
from replica_core.fetcher import (
    FETCHING,
    FetcherConfig,
    InitialFetchState,
    fetcher_id,
    initial_fetch_offset,
)
from replica_core.replication.delayed import DelayedFetch, FetchPartitionStatus
from replica_core.replication.messages import (
    FetchPartition,
    FetchPartitionResponse,
    FetchRequest,
    OffsetForLeaderPartition,
    OffsetsForLeaderEpochRequest,
    TopicPartition,
)
from replica_core.replication.partition import ISOLATION_HIGH_WATERMARK
from replica_core.replication.replica_manager import FetchParams

pytestmark = pytest.mark.usefixtures("fetcher_transport")


def joining_follower(batches: int, **config) -> FetcherCluster:
    """Broker 0 leads TP alone (ISR {0}, so its HW is its LEO) with ``batches`` batches of one
    100-byte record; broker 1 then joins as an empty follower."""
    c = FetcherCluster((0, 1), **config)
    c.leader_and_isr(leader=0, isr=[0], replicas=[0])
    for i in range(batches):
        c.produce(values=[b"%03d" % i + b"." * 97])
    c.leader_and_isr(leader=0, isr=[0], replicas=[0, 1])
    return c


def test_follower_catches_up_from_empty_over_several_rounds():
    batch = 100 + 80                    # one record of 100 bytes plus batch/record overhead
    c = joining_follower(10, replica_fetch_max_bytes=batch + batch // 2)
    f = c.fetcher(1)
    lags, leos, hws = [], [], []
    rounds = 0
    while c.log(1).log_end_offset < 10:
        c.step([1])
        rounds += 1
        lags.append(f.fetcher_lag_stats.get_and_maybe_put(TP).lag)
        leos.append(c.log(1).log_end_offset)
        hws.append(c.log(1).high_watermark)
        assert rounds < 50
    # One whole batch per round (the cut-off second batch is trimmed by the follower).
    assert leos == list(range(1, 11))
    assert lags == [10 - n for n in leos]        # lag = leader HW − next fetch offset
    assert hws == leos                           # HW = min(leader HW 10, own LEO)
    assert f.fetch_state(TP).lag == 0 and f.fetch_state(TP).state is FETCHING
    assert c.log_bytes(1) == c.log_bytes(0)
    stats = f.metrics()
    assert stats["RequestsPerSec"] == rounds
    assert stats["BytesPerSec"] == len(c.log_bytes(0))
    assert stats["ConsumerLag"] == {TP: 0}
    c.step([1], rounds=2)
    assert 1 in c.rm(0).partition(TP).isr         # caught up: the leader expanded the ISR


def test_first_batch_larger_than_fetch_size_still_progresses():
    """KIP-74: the first partition's first batch is returned whole even above
    replica.fetch.max.bytes and replica.fetch.response.max.bytes."""
    c = FetcherCluster((0, 1), replica_fetch_max_bytes=100,
                       replica_fetch_response_max_bytes=100)
    c.leader_and_isr(leader=0)
    c.produce(values=[b"x" * 500] * 10)           # one batch of about 5 KB
    c.produce(values=[b"y" * 500] * 10)
    c.step([1])
    assert c.log(1).log_end_offset == 10
    c.step([1])
    assert c.log(1).log_end_offset == 20


def test_follower_adopts_leader_log_start_offset():
    c = joining_follower(6)
    c.step([1], rounds=3)
    c.log(0).maybe_increment_log_start_offset(4)
    c.produce(values=[b"z"])
    c.step([1])
    assert c.log(1).log_start_offset == 4
    st = c.fetcher(1).fetch_state(TP)
    assert st.fetch_offset == 7


def test_follower_high_watermark_can_move_down_with_the_leader():
    """§7.7: the follower's HW is set to min(leader HW, own LEO), even below its current HW."""
    c = joining_follower(3)
    c.step([1], rounds=2)
    assert c.log(1).high_watermark == 3
    f = c.fetcher(1)
    req, _ = f.build_fetch()
    resp = f.leader.fetch(req)
    assert resp.partitions == ()   # incremental session fetch: nothing new to send
    lead = c.log(0)
    low = dataclasses.replace(resp, partitions=(FetchPartitionResponse(
        TP, Errors.NONE, 1, 1, lead.log_start_offset, lead.log_end_offset),))
    f.process_fetch_response(req, low)
    assert c.log(1).high_watermark == 1


def test_lag_metrics_and_manager_max_lag():
    c = joining_follower(8, replica_fetch_max_bytes=200)
    fm = c.fm(1)
    assert fm.max_lag() == 0
    c.step([1], rounds=2)
    assert fm.max_lag() == 6
    assert fm.metrics()["MaxLag"] == 6
    c.step([1], rounds=10)
    assert fm.max_lag() == 0


# ---- initial state (§7.2) -------------------------------------------------------------------------
def test_initial_state_depends_on_mode_and_epoch():
    c = joining_follower(2)
    f = c.fetcher(1)
    st = f.fetch_state(TP)          # empty log: no epoch → Truncating to the HW
    assert st.state.value == "Truncating" and st.last_fetched_epoch is None
    c.step([1], rounds=2)
    epoch = c.leader_and_isr(leader=0, isr=[0], replicas=[0, 1], to=[1])
    st = c.fetcher(1).fetch_state(TP)
    assert (st.state, st.fetch_offset, st.last_fetched_epoch, st.current_leader_epoch) == \
        (FETCHING, 2, 0, epoch)
    assert initial_fetch_offset(5, 3, 0) == 5
    assert initial_fetch_offset(5, 3, None) == 3
    assert initial_fetch_offset(5, 3, 0, truncation="high_watermark") == 3


def test_same_epoch_add_keeps_state_but_moves_last():
    c = FetcherCluster((0, 1))
    tps = [TopicPartition("t", i) for i in range(2)]
    for tp in tps:
        c.leader_and_isr(tp, leader=0)
    f = c.fetcher(1, tps[0])
    f.maybe_truncate()
    before = f.fetch_state(tps[0])
    f.add_partitions({tps[0]: InitialFetchState(0, 0, 123)})
    assert f.fetch_state(tps[0]) is before
    assert list(f.partition_states) == [tps[1], tps[0]]


def test_negative_initial_offset_asks_the_leader():
    c = joining_follower(5)
    f = c.fetcher(1)
    f.remove_partitions([TP])
    f.add_partitions({TP: InitialFetchState(0, c.leader_epochs[TP], -1)})
    st = f.fetch_state(TP)
    assert (st.state, st.fetch_offset, st.lag) == (FETCHING, 0, 5)


# ---- endpoint -------------------------------------------------------------------------------------
def test_endpoint_answers_a_fetch_the_leader_would_park_as_if_expired():
    c = FetcherCluster((0, 1))
    c.leader_and_isr(leader=0)
    c.step([1], rounds=2)
    ep = c.endpoint(0, 1)
    req = FetchRequest(1, 500, 1 << 20, 1 << 20,
                       (FetchPartition(TP, 0, 1 << 20, 0, 0, -1),), c.broker_epochs[1])
    direct = c.rm(0).fetch_messages(req, lambda r: None)
    assert direct is None                          # the leader parks it
    resp = ep.fetch(req)
    assert resp.error_code == Errors.NONE
    assert len(resp.partitions[0].records) == 0


def test_endpoint_offsets_and_errors():
    c = joining_follower(4)
    c.log(0).maybe_increment_log_start_offset(1)
    ep = c.endpoint(0, 1)
    assert ep.fetch_latest_offset(TP, 1).offset == 4
    assert tuple(ep.fetch_earliest_offset(TP, 1))[1] == 1
    with pytest.raises(FencedLeaderEpochError):
        ep.fetch_latest_offset(TP, 0)
    with pytest.raises(UnknownTopicOrPartitionError):
        ep.fetch_earliest_offset(TopicPartition("nope", 0), 0)
    req = OffsetsForLeaderEpochRequest(1, (OffsetForLeaderPartition(TP, 0, 1),))
    answer = ep.fetch_epoch_end_offsets(req)[TP]
    assert answer.error_code == Errors.NONE and (answer.leader_epoch, answer.end_offset) == (0, 4)
    assert ep.fetch_epoch_end_offsets(OffsetsForLeaderEpochRequest(1, ())) == {}


# ---- manager (§7.9) -------------------------------------------------------------------------------
def test_manager_assigns_partitions_by_kafka_hash_and_closes_idle_fetchers():
    c = FetcherCluster((0, 1, 2), num_replica_fetchers=3)
    tps = [TopicPartition(topic, p) for topic in ("orders", "clicks") for p in range(6)]
    for i, tp in enumerate(tps):
        c.leader_and_isr(tp, leader=i % 2, replicas=[0, 1, 2])
    fm = c.fm(2)
    for i, tp in enumerate(tps):
        f = fm.get_fetcher(tp)
        assert (f.source_broker, f.fetcher_id) == (i % 2, fetcher_id(tp.topic, tp.partition, 3))
        assert f.name == f"ReplicaFetcherThread-{f.fetcher_id}-{f.source_broker}"
    assert set(fm.fetchers) == {(i % 2, fetcher_id(tp.topic, tp.partition, 3))
                                for i, tp in enumerate(tps)}
    for _ in range(3):
        c.step()
    removed = fm.remove_fetcher_for_partitions([tp for i, tp in enumerate(tps) if i % 2 == 0])
    assert len(removed) == 6 and all(s.state is FETCHING for s in removed.values())
    fm.shutdown_idle_fetcher_threads()
    assert {k.broker_id for k in fm.fetchers} == {1}
    fm.resize_thread_pool(1)
    assert list(fm.fetchers) == [(1, 0)]
    assert fm.fetchers[(1, 0)].partition_count == 6
    fm.close_all_fetchers()
    assert fm.fetchers == {}


def test_manager_do_work_replicates_every_partition():
    c = FetcherCluster((0, 1, 2), num_replica_fetchers=2)
    tps = [TopicPartition("t", p) for p in range(8)]
    for p, tp in enumerate(tps):
        c.leader_and_isr(tp, leader=p % 3)
        c.produce(tp, [b"a", b"b"])
    c.step(rounds=3)
    for tp in tps:
        assert {c.log(b, tp).log_end_offset for b in (0, 1, 2)} == {2}
        assert {c.log(b, tp).high_watermark for b in (0, 1, 2)} == {2}


def test_fetcher_config_from_properties_and_replica_config():
    cfg = FetcherConfig.from_properties({"replica.fetch.max.bytes": "2048",
                                         "num.replica.fetchers": 4, "other.key": 1})
    assert (cfg.fetch_max_bytes, cfg.num_fetchers, cfg.backoff_ms) == (2048, 4, 1000)
    c = FetcherCluster((0, 1), replica_fetch_backoff_ms=70, replica_fetch_wait_max_ms=9)
    cfg = FetcherConfig.of(c.config)
    assert (cfg.backoff_ms, cfg.wait_max_ms, cfg.response_max_bytes) == (70, 9, 10_485_760)


def test_a_follower_wakes_fetches_parked_on_a_new_hw_after_its_round(monkeypatch):
    """A fetch parked on a follower that reads up to the HW (a follower read, KIP-392) waits
    for the follower's HW. The fetcher adopts the leader's HW while processing the answer and
    only collects the partition (``partitionsWithNewHighWatermark``); the parked fetch is
    completed once the round is done (ReplicaFetcherThread.doWork →
    completeDelayedFetchRequests), not while the answer is processed."""
    c = FetcherCluster((0, 1))
    c.leader_and_isr(leader=0, isr=[0, 1], replicas=[0, 1])
    c.produce(values=[b"a", b"b"])
    c.step()                     # broker 1 holds the batch
    c.step([1])                  # its fetch at offset 2 moves the leader's HW (answered with 0)
    assert (c.log(1).log_end_offset, c.log(1).high_watermark, c.log(0).high_watermark) == (2, 0, 2)
    rm1 = c.rm(1)
    got: list = []
    params = FetchParams(-1, -1, 1000, 1, 1 << 20, ISOLATION_HIGH_WATERMARK,
                         fetch_only_leader=False)
    info = FetchPartition(TP, 0, 1 << 20)
    [read] = rm1._read_from_log(params, [info], read_from_purgatory=False)
    assert read.error == Errors.NONE and read.size == 0  # nothing below HW 0
    op = DelayedFetch(params, [(TP, FetchPartitionStatus(read.fetch_offset_metadata, info))],
                      rm1, got.append)
    assert not rm1.fetch_purgatory.try_complete_else_watch(op, [TP])
    at_completion: list[tuple[int, int]] = []
    real = type(rm1).complete_delayed_fetch_requests

    def complete(tps):
        at_completion.append((len(got), c.log(1).high_watermark))
        real(rm1, tps)

    patch_method(monkeypatch, rm1, "complete_delayed_fetch_requests", complete)
    c.step([1])                  # this answer carries HW 2
    assert at_completion == [(0, 2)]             # still parked when the round was done
    assert op.is_completed and len(got) == 1
    assert got[0].partitions[0].high_watermark == 2 and len(got[0].partitions[0].records) > 0
