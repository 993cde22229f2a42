"""The controller: broker liveness, leader election and LeaderAndIsr fan-out (§8)."""
from replica_core.controller.election import (
    NO_LEADER,
    Election,
    controlled_shutdown_election,
    new_partition_election,
    offline_partition_election,
    preferred_replica_election,
    remove_replica_from_isr,
)

__all__ = [
    "NO_LEADER",
    "Election",
    "controlled_shutdown_election",
    "new_partition_election",
    "offline_partition_election",
    "preferred_replica_election",
    "remove_replica_from_isr",
]
from replica_core.controller.controller import (  # noqa: E402
    BrokerRegistration,
    Controller,
    Outbox,
    PartitionRegistration,
    assign_replicas,
)

__all__ += ["BrokerRegistration", "Controller", "Outbox", "PartitionRegistration", "assign_replicas"]
