"""ReplicaFetcherManager: which fetcher follows a partition, and removal (§7.9).

Kafka's ``AbstractFetcherManager``: fetcher ``(leader, abs(31 * topic.hashCode + partition) %
num.replica.fetchers)``; ``removeFetcherForPartitions`` takes partitions out of every fetcher,
each fetcher dropping the partition's fetch state and its lag gauge.
"""
from __future__ import annotations

from fetcher_cluster import FetcherCluster

from replica_core.replication.messages import TopicPartition

TPS = [TopicPartition("t", p) for p in range(3)]


def _follow_from_two_leaders(**config) -> FetcherCluster:
    """Broker 2 follows t-0 and t-2 from broker 0 and t-1 from broker 1."""
    c = FetcherCluster((0, 1, 2), **config)
    for tp in TPS:
        c.leader_and_isr(tp, leader=1 if tp.partition == 1 else 0)
    return c


def _layout(c: FetcherCluster) -> dict[tuple[int, int], list[int]]:
    return {(k.broker_id, k.fetcher_id): sorted(tp.partition for tp in f.partition_states)
            for k, f in c.fm(2).fetchers.items() if f.partition_count}


def test_one_fetcher_per_leader_by_default():
    assert _layout(_follow_from_two_leaders()) == {(0, 0): [0, 2], (1, 0): [1]}


def test_fetcher_ids_follow_kafkas_topic_hash():
    # "t".hashCode() == 116; abs(31 * 116 + p) % 3 == (3596 + p) % 3 -> p=0: 2, 1: 0, 2: 1
    c = _follow_from_two_leaders(num_replica_fetchers=3)
    assert _layout(c) == {(0, 2): [0], (1, 0): [1], (0, 1): [2]}


def test_remove_takes_states_and_lag_gauges_from_the_fetchers_holding_them():
    c = _follow_from_two_leaders()
    fm = c.fm(2)
    f0, f1 = fm.get_fetcher(TPS[0]), fm.get_fetcher(TPS[1])
    assert f0 is not f1
    # a gauge left for a partition this fetcher no longer follows still goes with the removal
    f1.fetcher_lag_stats.get_and_maybe_put(TPS[2]).lag = 7
    assert fm.max_lag() == 7
    before = f0.fetch_state(TPS[2])
    removed = fm.remove_fetcher_for_partitions([TPS[2], TopicPartition("t", 9)])
    assert removed == {TPS[2]: before}
    assert TPS[2] not in f1.fetcher_lag_stats.stats and TPS[2] not in f0.fetcher_lag_stats.stats
    assert fm.max_lag() == 0
    assert _layout(c) == {(0, 0): [0], (1, 0): [1]}
    assert fm.get_fetcher(TPS[2]) is None
