"""What a :class:`~replica_core.replication.partition.Partition` may reach besides itself.

Kafka hands its ``Partition`` narrow collaborators rather than the replica manager: the local
broker id and epoch supplier, the clock, an ``AlterPartitionListener`` (ISR changes and failed
updates), ``DelayedOperations`` (complete delayed produce/fetch when a HW moves), the
``AlterPartitionManager``, the ``LogManager`` (get or create the log) and the metadata cache.
These protocols are those seams here, plus the broker's replica-state table (Kafka keeps a
``Replica`` object per follower; here every leader-side follower state is a row of one table,
with a registry from rows back to partitions for the table-wide kernels).

:class:`PartitionLog` is what a partition uses of its log (:class:`~replica_core.storage.log.Log`
satisfies it).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from replica_core.clock import Clock
from replica_core.replication.config import ReplicaConfig
from replica_core.replication.messages import AlterPartitionItem, TopicPartition

if TYPE_CHECKING:
    from replica_core.replication.partition import Partition
    from replica_core.replication.state import ReplicaStateTable

__all__ = ["AlterPartitionSender", "DelayedOperations", "IsrChangeListener", "LeaderRows",
           "LogFactory", "PartitionContext", "PartitionLog", "ReplicaMetadata"]


class PartitionLog(Protocol):
    """The log calls a partition makes (UnifiedLog's API as the partition uses it)."""

    config: Any
    log_start_listener: Callable[[int], None] | None

    @property
    def log_start_offset(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...
    @property
    def high_watermark(self) -> int: ...
    @property
    def log_end_offset_metadata(self) -> Any: ...
    @property
    def latest_epoch(self) -> int: ...

    def append_as_leader(self, records: bytes | memoryview, leader_epoch: int, *,
                         origin: str = ...) -> Any: ...
    def append_as_follower(self, batch_bytes: bytes | bytearray | memoryview) -> Any: ...
    def read(self, fetch_offset: int, max_bytes: int, *, isolation: str = ...,
             min_one_message: bool = ...) -> Any: ...
    def update_high_watermark(self, hw: Any) -> int: ...
    def maybe_increment_high_watermark(self, new_hw: Any) -> Any: ...
    def fetch_high_watermark_metadata(self) -> Any: ...
    def maybe_assign_epoch_start_offset(self, leader_epoch: int, start_offset: int) -> None: ...
    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int] | None: ...
    def truncate_to(self, target_offset: int) -> bool: ...
    def truncate_fully_and_start_at(self, new_offset: int,
                                    log_start_offset: int | None = ...) -> None: ...


class IsrChangeListener(Protocol):
    """Kafka's AlterPartitionListener: a committed ISR change, or a failed update."""

    def mark_isr_change(self, tp: TopicPartition, *, expanded: bool) -> None: ...
    def mark_failed(self) -> None: ...


class DelayedOperations(Protocol):
    """Kafka's DelayedOperations: what to re-check when a leader's HW moves; and a leader's
    log start move, which the fetch sessions answer (KIP-227). (A follower's HW move is the
    fetcher's to act on, after its round: ``partitionsWithNewHighWatermark``.)"""

    def on_leader_hw_incremented(self, tp: TopicPartition) -> None: ...
    def on_leader_log_start_moved(self, tp: TopicPartition) -> None: ...


class AlterPartitionSender(Protocol):
    """Kafka's AlterPartitionManager: queue an ISR proposal for the controller."""

    def submit(self, item: AlterPartitionItem, *, retry: bool = False) -> None: ...
    def forget_unsent(self, tp: TopicPartition) -> None: ...


class LogFactory(Protocol):
    """Kafka's LogManager.getOrCreateLog."""

    def get_or_create_log(self, tp: TopicPartition, *, is_new: bool = False,
                          topic_id: str | None = None) -> PartitionLog: ...


class LeaderRows(Protocol):
    """Rows of the replica-state table back to their partitions (for table-wide kernels)."""

    def register_row(self, partition: Partition) -> None: ...
    def unregister_row(self, partition: Partition) -> None: ...


class ReplicaMetadata(Protocol):
    """The broker's metadata view: which replicas may join ISRs (KIP-841, KAFKA-15021)."""

    def eligible_replicas(self, replicas: Iterable[int]) -> list[int]: ...


@dataclass(frozen=True, slots=True)
class PartitionContext:
    """Everything a partition on broker ``broker_id`` reaches outside itself."""

    broker_id: int
    broker_epoch: Callable[[], int]
    clock: Clock
    config: ReplicaConfig
    table: ReplicaStateTable
    isr_listener: IsrChangeListener
    delayed: DelayedOperations
    alter_partition: AlterPartitionSender
    logs: LogFactory
    rows: LeaderRows
    metadata: ReplicaMetadata
