"""The broker's view of which partitions exist (Kafka's ``MetadataCache.contains``).

A broker answers a request for a partition it does not host by what its metadata says: the
topic-partition exists elsewhere → ``NOT_LEADER_OR_FOLLOWER`` (the client refreshes its metadata
and finds the new leader); unknown → ``UNKNOWN_TOPIC_OR_PARTITION``
(``ReplicaManager.getPartitionOrError``). Kafka fills the cache from UpdateMetadata requests (ZK
mode) or the metadata log (KRaft); here whoever plays the controller calls :meth:`update`, and
every LeaderAndIsr a broker receives also records its partitions.
"""
from __future__ import annotations

from collections.abc import Iterable

from replica_core.errors import Errors
from replica_core.replication.messages import TopicPartition

__all__ = ["MetadataCache"]


class MetadataCache:
    """The topic-partitions a broker's metadata knows."""

    __slots__ = ("_partitions",)

    def __init__(self, partitions: Iterable[tuple[str, int]] = ()) -> None:
        self._partitions: set[TopicPartition] = {TopicPartition(*tp) for tp in partitions}

    def update(self, partitions: Iterable[tuple[str, int]] = (), *,
               deleted: Iterable[tuple[str, int]] = ()) -> None:
        """Learn ``partitions``; forget ``deleted`` (a deleted topic's partitions)."""
        self._partitions.update([tp if type(tp) is TopicPartition else TopicPartition(*tp)
                                 for tp in partitions])
        if deleted:
            self._partitions.difference_update(TopicPartition(*tp) for tp in deleted)

    def contains(self, tp: tuple[str, int]) -> bool:
        return tp in self._partitions

    def error_for_unhosted(self, tp: tuple[str, int]) -> Errors:
        """The answer for ``tp`` on a broker that does not host it (getPartitionOrError)."""
        return Errors.NOT_LEADER_OR_FOLLOWER if tp in self._partitions \
            else Errors.UNKNOWN_TOPIC_OR_PARTITION
