"""A broker's partitions on the leader side: columnar replica state, HW and ISR rules, purgatory (§6)."""
from replica_core.replication.config import ReplicaConfig
from replica_core.replication.delayed import DelayedFetch, DelayedProduce
from replica_core.replication.partition import Partition
from replica_core.replication.purgatory import DelayedOperation, Purgatory
from replica_core.replication.replica_manager import FetchParams, ReplicaManager
from replica_core.replication.state import (
    NO_BROKER_EPOCH,
    UNKNOWN_OFFSET,
    IsrState,
    PartitionView,
    ReplicaStateTable,
    ReplicaView,
)

__all__ = [
    "NO_BROKER_EPOCH",
    "UNKNOWN_OFFSET",
    "DelayedOperation",
    "IsrState",
    "PartitionView",
    "Purgatory",
    "ReplicaStateTable",
    "ReplicaView",
    # replication core (issue 4)
    "DelayedFetch",
    "DelayedProduce",
    "FetchParams",
    "Partition",
    "ReplicaConfig",
    "ReplicaManager",
]
