"""The follower side of replication: fetch states in fair order, fetcher assignment (§7)."""
from replica_core.fetcher.assignment import fetcher_id, java_abs, java_string_hash
from replica_core.fetcher.endpoint import (
    EpochAndOffset,
    InProcessLeaderEndPoint,
    LeaderEndPoint,
)
from replica_core.fetcher.fetcher import (
    TRUNCATION_HIGH_WATERMARK,
    TRUNCATION_LEADER_EPOCH,
    FailedPartitions,
    FetcherConfig,
    FetcherLagMetrics,
    FetcherLagStats,
    FetcherStats,
    InitialFetchState,
    ReplicaFetcher,
    ReplicaQuota,
    ReplicationQuota,
    UnboundedReplicaQuota,
    initial_fetch_offset,
)
from replica_core.fetcher.manager import ReplicaFetcherManager
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
    # follower fetchers (issue 5)
    "TRUNCATION_HIGH_WATERMARK",
    "TRUNCATION_LEADER_EPOCH",
    "EpochAndOffset",
    "FailedPartitions",
    "FetcherConfig",
    "FetcherLagMetrics",
    "FetcherLagStats",
    "FetcherStats",
    "InProcessLeaderEndPoint",
    "InitialFetchState",
    "LeaderEndPoint",
    "ReplicaFetcher",
    "ReplicaFetcherManager",
    "ReplicaQuota",
    "ReplicationQuota",
    "UnboundedReplicaQuota",
    "initial_fetch_offset",
]
