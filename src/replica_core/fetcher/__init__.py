"""The follower side of replication: fetch states in fair order, fetcher assignment (§7)."""
from replica_core.fetcher.assignment import fetcher_id, java_abs, java_string_hash
from replica_core.fetcher.partition_states import (
    FETCHING,
    TRUNCATING,
    PartitionFetchState,
    PartitionStates,
    ReplicaState,
    TopicPartition,
)

__all__ = [
    "FETCHING",
    "TRUNCATING",
    "PartitionFetchState",
    "PartitionStates",
    "ReplicaState",
    "TopicPartition",
    "fetcher_id",
    "java_abs",
    "java_string_hash",
]
