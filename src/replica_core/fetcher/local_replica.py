"""The follower's own replicas as its fetchers see them (the fetcher ⟷ replica-manager seam).

Kafka's ``ReplicaFetcherThread`` reaches its broker through ``ReplicaManager``
(``localLogOrException``, ``getPartitionOrException``) and the partition's log. These protocols
name exactly what it uses: :class:`FollowerLog` (the log's follower-side API),
:class:`FollowerPartition` (append, HW, truncation) and :class:`FollowerReplicaManager`.
:class:`~replica_core.replication.replica_manager.ReplicaManager`, ``Partition`` and
:class:`~replica_core.storage.log.Log` satisfy them; :class:`LocalReplica` turns a missing
partition or log into ``NOT_LEADER_OR_FOLLOWER`` as Kafka's lookups do.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from replica_core.errors import NotLeaderOrFollowerError
from replica_core.replication.messages import TopicPartition

__all__ = ["FollowerLog", "FollowerPartition", "FollowerReplicaManager", "LocalReplica"]


class FollowerLog(Protocol):
    """What a fetcher reads and changes on a follower's log (UnifiedLog)."""

    @property
    def log_start_offset(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...
    @property
    def high_watermark(self) -> int: ...
    @property
    def latest_epoch(self) -> int:
        """The latest cached leader epoch, −1 when the cache is empty."""
        ...

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int] | None: ...
    def maybe_increment_log_start_offset(self, new_log_start_offset: int) -> bool: ...


class FollowerPartition(Protocol):
    """A followed partition: its log and the follower-side operations (Kafka's Partition)."""

    @property
    def log(self) -> FollowerLog | None: ...

    def append_records_to_follower(self, records: bytes | memoryview) -> Any: ...
    def update_follower_high_watermark(self, leader_hw: int) -> int: ...
    def truncate_to(self, offset: int) -> None: ...
    def truncate_fully_and_start_at(self, offset: int) -> None: ...


class FollowerReplicaManager(Protocol):
    """The broker's replica manager as its fetchers use it."""

    broker_id: int
    broker_epoch: int

    def partition(self, tp: TopicPartition) -> FollowerPartition | None: ...
    def local_log(self, tp: TopicPartition) -> FollowerLog | None: ...
    def complete_delayed_fetch_requests(self, tps: Iterable[TopicPartition]) -> None:
        """Wake leader-side fetches parked on ``tps`` (their HW moved here)."""
        ...


class LocalReplica:
    """The follower's partitions and logs by topic-partition; a missing one is
    ``NOT_LEADER_OR_FOLLOWER`` (``localLogOrException`` / ``getPartitionOrException``)."""

    __slots__ = ("rm",)

    def __init__(self, replica_manager: FollowerReplicaManager) -> None:
        self.rm = replica_manager

    def partition(self, tp: TopicPartition) -> FollowerPartition:
        p = self.rm.partition(tp)
        if p is None:
            raise NotLeaderOrFollowerError(f"no local replica of {tp}")
        return p

    def log(self, tp: TopicPartition) -> FollowerLog:
        lg = self.rm.local_log(tp)
        if lg is None:
            raise NotLeaderOrFollowerError(f"no local log for {tp}")
        return lg

    def latest_epoch(self, tp: TopicPartition) -> int | None:
        """``UnifiedLog.latestEpoch``: None when the epoch cache is empty."""
        lg = self.rm.local_log(tp)  # self.log(tp), inlined (once per partition truncated)
        if lg is None:
            raise NotLeaderOrFollowerError(f"no local log for {tp}")
        epoch = lg.latest_epoch
        return None if epoch < 0 else int(epoch)

    def end_offset_for_epoch(self, tp: TopicPartition, epoch: int) -> tuple[int, int] | None:
        """``UnifiedLog.endOffsetForEpoch``: (epoch, end offset), None if undefined."""
        return self.log(tp).end_offset_for_epoch(epoch)

    def log_end_offset(self, tp: TopicPartition) -> int:
        return int(self.log(tp).log_end_offset)

    def log_start_offset(self, tp: TopicPartition) -> int:
        return int(self.log(tp).log_start_offset)

    def high_watermark(self, tp: TopicPartition) -> int:
        return int(self.log(tp).high_watermark)

    def truncate(self, tp: TopicPartition, offset: int) -> int:
        """Truncate ``tp``'s log to ``offset``; returns its high watermark from before."""
        p = self.partition(tp)
        lg = p.log
        if lg is None:
            raise NotLeaderOrFollowerError(f"no local log for {tp}")
        hw = int(lg.high_watermark)
        p.truncate_to(offset)
        return hw

    def truncate_fully_and_start_at(self, tp: TopicPartition, offset: int) -> None:
        self.partition(tp).truncate_fully_and_start_at(offset)
