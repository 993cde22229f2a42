"""A broker's follower fetchers, one per (source broker, fetcher id) (§7.9).

Kafka: ``AbstractFetcherManager`` / ``ReplicaFetcherManager``. A partition is served by fetcher
``assignment.fetcher_id(topic, partition, num.replica.fetchers)`` of the broker it follows, the
same hash Kafka uses, so partitions land on the same fetcher index as on a Kafka broker.
Fetchers are step functions (:meth:`ReplicaFetcher.do_work`); :meth:`ReplicaFetcherManager.do_work`
steps all of them once, for drivers that do not schedule fetchers individually.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from replica_core.clock import Clock
from replica_core.fetcher.assignment import fetcher_id as assign_fetcher_id
from replica_core.fetcher.endpoint import LeaderEndPoint
from replica_core.fetcher.fetcher import (
    FailedPartitions,
    FetcherConfig,
    InitialFetchState,
    ReplicaFetcher,
    ReplicaQuota,
    truncation_mode_of,
)
from replica_core.fetcher.partition_states import PartitionFetchState
from replica_core.replication.config import ReplicaConfig
from replica_core.replication.messages import TopicPartition

log = logging.getLogger(__name__)


class BrokerIdAndFetcherId(NamedTuple):
    broker_id: int
    fetcher_id: int


class ReplicaFetcherManager:
    """Creates, feeds and retires :class:`ReplicaFetcher` s for a follower broker.

    ``endpoint_factory(source_broker_id)`` returns the :class:`LeaderEndPoint` a new fetcher talks
    to (an :class:`InProcessLeaderEndPoint` over that broker's ReplicaManager in-process).
    ``truncation``/``truncate_on_fetch``/``quota`` are passed to every fetcher.
    """

    def __init__(self, broker_id: int, replica_manager: Any, config: Any,
                 endpoint_factory: Callable[[int], LeaderEndPoint], *, clock: Clock,
                 truncation: str | None = None, truncate_on_fetch: bool | None = None,
                 quota: ReplicaQuota | None = None) -> None:
        self.broker_id = broker_id
        self.replica_manager = replica_manager
        self.config = FetcherConfig.of(config)
        self.endpoint_factory = endpoint_factory
        self.clock = clock
        self.truncation = truncation if truncation is not None else truncation_mode_of(config)
        if truncate_on_fetch is None:  # IBP ≥ 2.7 unless the broker's config says otherwise
            truncate_on_fetch = config.truncate_on_fetch if isinstance(config, ReplicaConfig) \
                else True
        self.truncate_on_fetch = truncate_on_fetch
        self.quota = quota
        self.num_fetchers_per_broker = self.config.num_fetchers
        self.failed_partitions = FailedPartitions()
        self.fetchers: dict[BrokerIdAndFetcherId, ReplicaFetcher] = {}

    # -- assignment -----------------------------------------------------------------------------
    def fetcher_id(self, tp: TopicPartition) -> int:
        """``getFetcherId``: Kafka's ``abs(31 * topic.hashCode + partition) % num.replica.fetchers``."""
        return assign_fetcher_id(tp[0], tp[1], self.num_fetchers_per_broker)

    def create_fetcher(self, fetcher_id: int, source_broker: int) -> ReplicaFetcher:
        """``createFetcherThread``."""
        return ReplicaFetcher(
            fetcher_id, source_broker, self.endpoint_factory(source_broker), self.replica_manager,
            self.config, clock=self.clock, truncation=self.truncation,
            truncate_on_fetch=self.truncate_on_fetch, quota=self.quota,
            failed_partitions=self.failed_partitions)

    def add_fetcher_for_partitions(self, partitions: Mapping[TopicPartition, InitialFetchState]
                                   ) -> None:
        """``addFetcherForPartitions``: group by (leader, fetcher id), create missing fetchers,
        hand each its partitions (which also leave the failed set). With one fetcher per broker
        (Kafka's default ``num.replica.fetchers=1``) every partition's fetcher id is 0."""
        groups: dict[tuple[int, int], dict[TopicPartition, InitialFetchState]] = {}
        fetcher_id = None if self.num_fetchers_per_broker == 1 else self.fetcher_id
        for tp, ifs in partitions.items():
            if type(tp) is not TopicPartition:
                tp = TopicPartition(*tp)
            group_key = (ifs.leader, 0 if fetcher_id is None else fetcher_id(tp))
            group = groups.get(group_key)
            if group is None:
                group = groups[group_key] = {}
            group[tp] = ifs
        for (broker_id, fid), states in groups.items():
            key = BrokerIdAndFetcherId(broker_id, fid)
            fetcher = self.fetchers.get(key)
            if fetcher is None:
                fetcher = self.fetchers[key] = self.create_fetcher(key.fetcher_id, key.broker_id)
            fetcher.add_partitions(states)
            log.info("broker %d: added fetcher to broker %d for %d partitions", self.broker_id,
                     key.broker_id, len(states))

    def remove_fetcher_for_partitions(self, partitions: Iterable[TopicPartition]
                                      ) -> dict[TopicPartition, PartitionFetchState]:
        """``removeFetcherForPartitions``: remove from every fetcher and from the failed set;
        returns the fetch states the partitions had.

        Each fetcher is handed only the partitions it holds something for (a fetch state or a
        lag gauge): removing any other is a no-op there, and a LeaderAndIsr of thousands of
        partitions need not be offered whole to every fetcher."""
        tps = [tp if type(tp) is TopicPartition else TopicPartition(*tp) for tp in partitions]
        states: dict[TopicPartition, PartitionFetchState] = {}
        for fetcher in self.fetchers.values():
            followed = fetcher.partition_states.partition_set()
            gauges = fetcher.fetcher_lag_stats.stats
            held = [tp for tp in tps if tp in followed or tp in gauges]
            if held:
                states.update(fetcher.remove_partitions(held))
        self.failed_partitions.remove_all(tps)
        return states

    def shutdown_idle_fetcher_threads(self) -> None:
        """``shutdownIdleFetcherThreads``: retire fetchers left with no partitions."""
        for key in [k for k, f in self.fetchers.items() if f.partition_count <= 0]:
            self.fetchers.pop(key).shutdown()

    def resize_thread_pool(self, new_size: int) -> None:
        """``resizeThreadPool``: on a change of ``num.replica.fetchers`` take every partition out
        and re-add it at its current fetch offset and epoch, so the hash places it anew."""
        if new_size < 1:
            raise ValueError("num.replica.fetchers must be at least 1")
        if new_size != self.num_fetchers_per_broker:
            self.num_fetchers_per_broker = new_size
            moved: dict[TopicPartition, InitialFetchState] = {}
            for key, fetcher in list(self.fetchers.items()):
                for tp, st in fetcher.remove_all_partitions().items():
                    moved[tp] = InitialFetchState(key.broker_id, st.current_leader_epoch,
                                                  st.fetch_offset, st.topic_id)
                if key.fetcher_id >= new_size:
                    self.fetchers.pop(key).shutdown()
            self.add_fetcher_for_partitions(moved)
        self.shutdown_idle_fetcher_threads()

    def close_all_fetchers(self) -> None:
        """``closeAllFetchers``."""
        for fetcher in self.fetchers.values():
            fetcher.shutdown()
        self.fetchers.clear()

    def shutdown(self) -> None:
        """``ReplicaFetcherManager.shutdown``: close every fetcher."""
        self.close_all_fetchers()

    def get_fetcher(self, tp: TopicPartition) -> ReplicaFetcher | None:
        """The fetcher currently following ``tp``, if any."""
        tp = TopicPartition(*tp)
        for fetcher in self.fetchers.values():
            if tp in fetcher.partition_states:
                return fetcher
        return None

    def add_failed_partition(self, tp: TopicPartition) -> None:
        self.failed_partitions.add(tp)

    # -- driving --------------------------------------------------------------------------------
    def do_work(self) -> bool:
        """One ``do_work`` of every fetcher, in (source broker, fetcher id) order; True if any
        sent a fetch."""
        sent = False
        for key in sorted(self.fetchers):
            fetcher = self.fetchers.get(key)
            if fetcher is not None and fetcher.do_work():
                sent = True
        return sent

    # -- metrics --------------------------------------------------------------------------------
    def max_lag(self) -> int:
        """``MaxLag``: the largest ConsumerLag over all partitions of all fetchers (0 if none)."""
        return max((f.fetcher_lag_stats.max_lag() for f in self.fetchers.values()), default=0)

    def metrics(self) -> dict[str, Any]:
        """Kafka's ReplicaFetcherManager gauges (``MaxLag``, ``FailedPartitionsCount``,
        ``DeadThreadCount``) plus the fetchers' request and byte counts by fetcher name."""
        return {
            "MaxLag": self.max_lag(),
            "FailedPartitionsCount": len(self.failed_partitions),
            "DeadThreadCount": 0,
            "fetchers": {f.name: f.metrics() for f in self.fetchers.values()},
        }
