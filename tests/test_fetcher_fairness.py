"""Fetch building and fair ordering (§7.3, §7.5): real leader and follower brokers in-process."""
from __future__ import annotations

import pytest
from conftest import patch_method
from fetcher_cluster import FetcherCluster

from replica_core.errors import KafkaStorageError
from replica_core.fetcher import FETCHING, ReplicationQuota
from replica_core.replication.messages import NO_EPOCH, TopicPartition

pytestmark = pytest.mark.usefixtures("fetcher_transport")

P = [TopicPartition("t", i) for i in range(3)]


def three_partitions(batches_each: int = 3, **config) -> FetcherCluster:
    """Broker 1 follows t-0..t-2 from broker 0, each holding ``batches_each`` one-record batches.

    A 1-byte response limit makes the leader return data for the first non-empty partition only
    (min one message, KIP-74), so every round shows whom the order favours.
    """
    config.setdefault("replica_fetch_response_max_bytes", 1)
    c = FetcherCluster((0, 1), **config)
    for tp in P:
        c.leader_and_isr(tp, leader=0)
    for tp in P:
        for i in range(batches_each):
            c.produce(tp, [b"%s-%d" % (str(tp).encode(), i)])
    return c


def request_order(c: FetcherCluster) -> list[TopicPartition]:
    """The partitions the next fetch asks for, in the fetcher's fair order (an incremental
    session request itself carries only the changed ones)."""
    parts, _ = c.fetcher(1, P[0]).fetch_partitions()
    return [p.tp for p in parts]


def leos(c: FetcherCluster) -> list[int]:
    return [c.log(1, tp).log_end_offset for tp in P]


def test_partition_that_received_data_goes_to_the_back():
    c = three_partitions()
    served = []
    orders = []
    for _ in range(7):
        orders.append(request_order(c))
        before = leos(c)
        c.step([1])
        after = leos(c)
        got = [tp for tp, b, a in zip(P, before, after, strict=True) if a > b]
        assert len(got) == 1
        served.append(got[0].partition)
    # Round 1: t-0 gets data; t-1 and t-2 get their first (empty) answer, which sets their lag
    # and also moves them last, in response order. From then on whoever got data goes last.
    assert served == [0, 0, 1, 2, 0, 1, 2]
    assert orders[1] == P
    assert orders[2] == [P[1], P[2], P[0]]
    assert orders[3] == [P[2], P[0], P[1]]
    c.step([1], rounds=2)
    assert leos(c) == [3, 3, 3]


def test_errored_partition_is_delayed_moved_last_and_skipped_until_backoff():
    c = three_partitions(batches_each=5)
    c.step([1])                       # t-0 data; t-1, t-2 lag known; order t-0, t-1, t-2
    assert request_order(c) == P
    # t-0's new epoch reaches the follower before the leader: UNKNOWN_LEADER_EPOCH for t-0.
    c.leader_and_isr(P[0], leader=0, to=[1])
    assert request_order(c) == [P[1], P[2], P[0]]  # re-added partitions go last
    c.step([1])
    state = c.fetcher(1, P[0]).fetch_state(P[0])
    assert state.delay_until_ms == c.clock.milliseconds() + c.config.replica_fetch_backoff_ms
    assert request_order(c) == [P[2], P[1]]         # t-1 got data; t-0 delayed and skipped
    c.step([1])
    assert request_order(c) == [P[1], P[2]]
    c.leader_and_isr(P[0], leader=0, leader_epoch=c.leader_epochs[P[0]], to=[0])
    c.advance(c.config.replica_fetch_backoff_ms)
    assert request_order(c) == [P[1], P[0], P[2]]   # back in the position it was moved to
    c.step([1], rounds=12)
    assert leos(c) == [5, 5, 5]


def test_failed_request_delays_every_partition_and_keeps_order():
    c = three_partitions()
    c.step([1])
    c.alive.discard(0)                # the leader stops answering
    assert not c.fm(1).do_work() or True
    assert request_order(c) == []     # all delayed
    f = c.fetcher(1, P[0])
    assert [tp for tp, _ in f.partition_states.items()] == P
    assert f.fetcher_stats.request_rate.count == 2
    c.alive.add(0)
    c.advance(c.config.replica_fetch_backoff_ms - 1)
    assert request_order(c) == []
    c.advance(1)
    assert request_order(c) == P
    c.step([1], rounds=8)
    assert leos(c) == [3, 3, 3]


def test_build_fetch_fields_follow_config_and_state():
    c = three_partitions(replica_fetch_max_bytes=4096, replica_fetch_min_bytes=7,
                         replica_fetch_wait_max_ms=250)
    c.step([1])
    req, errors = c.fetcher(1, P[0]).build_fetch()
    assert errors == []
    assert req.replica_id == 1 and req.replica_epoch == c.broker_epochs[1]
    assert (req.max_wait_ms, req.min_bytes, req.max_bytes) == (250, 7, 1)
    first = req.partitions[0]
    assert first.tp == P[0] and first.fetch_offset == 1 and first.partition_max_bytes == 4096
    assert first.current_leader_epoch == 0 and first.last_fetched_epoch == 0
    assert first.log_start_offset == 0
    assert all(p.last_fetched_epoch == NO_EPOCH for p in req.partitions[1:])  # empty logs


def test_high_watermark_mode_never_sends_last_fetched_epoch():
    c = three_partitions(truncation="high_watermark")
    c.step([1], rounds=3)
    req, _ = c.fetcher(1, P[0]).build_fetch()
    assert req is not None and all(p.last_fetched_epoch == NO_EPOCH for p in req.partitions)


def test_throttled_out_of_sync_partitions_are_skipped_while_quota_exceeded():
    c = three_partitions(batches_each=2, replica_fetch_response_max_bytes=10 << 20)
    quota = ReplicationQuota(100, c.clock, throttled=[P[1]])
    f = c.fetcher(1, P[0])
    f.quota = quota
    f.maybe_truncate()                # empty logs: Truncating to the HW 0, then Fetching
    quota.record(10_000)              # over 100 B/s for the next windows
    assert quota.is_quota_exceeded()
    assert request_order(c) == [P[0], P[2]]   # t-1 lag unknown: not in sync, throttled
    c.step([1])
    assert leos(c) == [2, 0, 2]
    c.advance(12_000)                  # the windows expire
    assert not quota.is_quota_exceeded()
    c.step([1], rounds=2)
    assert leos(c) == [2, 2, 2]
    assert f.fetch_state(P[1]).is_replica_in_sync
    quota.record(10_000)
    assert sorted(request_order(c)) == P   # in-sync replicas are never throttled


def test_partitions_whose_local_log_fails_are_collected_and_delayed(monkeypatch):
    c = three_partitions()
    c.fetcher(1, P[0]).maybe_truncate()
    rm = c.rm(1)
    real = rm.local_log

    def offline(tp):
        if tuple(tp) == tuple(P[1]):
            raise KafkaStorageError("log dir offline")
        return real(tp)

    patch_method(monkeypatch, rm, "local_log", offline)
    f = c.fetcher(1, P[0])
    req, errors = f.build_fetch()
    assert errors == [P[1]]
    assert [p.tp for p in req.partitions] == [P[0], P[2]]
    assert f.fetch_state(P[1]).is_delayed(c.clock.milliseconds())
    assert [tp for tp, _ in f.partition_states.items()] == [P[0], P[2], P[1]]


@pytest.mark.parametrize("num_fetchers", [1, 2])
def test_ready_states_are_fetching_and_not_delayed(num_fetchers):
    c = three_partitions(num_replica_fetchers=num_fetchers)
    c.step([1], rounds=10)
    for tp in P:
        st = c.fetcher(1, tp).fetch_state(tp)
        assert st.state is FETCHING and st.delay_until_ms is None and st.lag == 0
