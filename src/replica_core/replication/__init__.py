"""A broker's partitions on the leader side: columnar replica state, HW and ISR rules, purgatory (§6)."""
from replica_core.replication.purgatory import DelayedOperation, Purgatory
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
]
