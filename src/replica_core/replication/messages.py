"""Requests and responses between brokers, controller and clients, as plain immutable values.

Field names follow Kafka's message JSON schemas (``clients/src/main/resources/common/message``)
in snake_case, so a transport can carry them and a reader who knows Kafka recognises them. Only
the fields replication uses are kept; errors are :class:`replica_core.errors.Errors` codes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from replica_core._slot_init import slot_init
from replica_core.errors import Errors

# Kafka's sentinels (FetchRequest.CONSUMER_REPLICA_ID, ListOffsetsRequest timestamps, ...).
CONSUMER_REPLICA_ID = -1
NO_LEADER = -1
NO_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2

ISOLATION_READ_UNCOMMITTED = 0
ISOLATION_READ_COMMITTED = 1

LEADER_RECOVERY_RECOVERED = 0
LEADER_RECOVERY_RECOVERING = 1

UNKNOWN_BROKER_EPOCH = -1
"""Kafka's ``AbstractControlRequest.UNKNOWN_BROKER_EPOCH``: a controller request that names no
broker epoch (never stale), and the epoch of a broker that has not registered yet."""


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


# --- LeaderAndIsr (controller -> broker, §8.5) ------------------------------------------------
@slot_init
@dataclass(frozen=True, slots=True)
class LeaderAndIsrPartitionState:
    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    is_new: bool = False
    leader_recovery_state: int = LEADER_RECOVERY_RECOVERED
    topic_id: str | None = None
    tp: TopicPartition = field(init=False, repr=False, compare=False)
    """``(topic, partition)``, built once with the state (every handler of the request asks
    for it several times per partition); not a field of Kafka's message."""

    def __post_init__(self) -> None:
        _set_tp(self, TopicPartition(self.topic, self.partition))


_set_tp = LeaderAndIsrPartitionState.__dict__["tp"].__set__
"""The ``tp`` slot's setter (the frozen ``__setattr__`` refuses it; ``__post_init__`` uses it)."""


@slot_init
@dataclass(frozen=True, slots=True)
class LeaderAndIsrRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    """The epoch of the broker process the controller addressed (KIP-380)."""
    partition_states: tuple[LeaderAndIsrPartitionState, ...]
    live_leaders: tuple[int, ...] = ()


@slot_init
@dataclass(frozen=True, slots=True)
class LeaderAndIsrResponse:
    error_code: Errors
    partition_errors: dict[TopicPartition, Errors] = field(default_factory=dict)


# --- Produce (client -> leader, §6.8) ---------------------------------------------------------
@slot_init
@dataclass(frozen=True, slots=True)
class ProducePartitionResponse:
    error_code: Errors
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    record_errors: tuple[tuple[int, str], ...] = ()


# --- Fetch (follower/consumer -> leader, §3, §6.9, §7.5) --------------------------------------
@slot_init
@dataclass(frozen=True, slots=True)
class FetchPartition:
    tp: TopicPartition
    fetch_offset: int
    partition_max_bytes: int
    log_start_offset: int = -1
    current_leader_epoch: int = NO_EPOCH
    last_fetched_epoch: int = NO_EPOCH


@slot_init
@dataclass(frozen=True, slots=True)
class FetchRequest:
    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    partitions: tuple[FetchPartition, ...]
    replica_epoch: int = -1
    isolation_level: int = ISOLATION_READ_UNCOMMITTED
    session_id: int = 0
    """KIP-227 fetch session: 0 with epoch −1 (FINAL) is a sessionless fetch; epoch 0 (INITIAL)
    asks for a new session (closing ``session_id`` if given); epoch ≥ 1 is an incremental fetch
    carrying only the partitions added or changed since the session's last request."""
    session_epoch: int = -1
    forgotten: tuple[TopicPartition, ...] = ()
    """Partitions an incremental fetch removes from its session (``ForgottenTopicsData``)."""

    @property
    def is_from_follower(self) -> bool:
        return self.replica_id >= 0


class EpochEndOffset(NamedTuple):
    """Answer to "where does epoch E end?" (OffsetForLeaderEpoch / a fetch's divergingEpoch)."""

    error_code: Errors
    leader_epoch: int
    end_offset: int


@slot_init
@dataclass(frozen=True, slots=True)
class FetchPartitionResponse:
    tp: TopicPartition
    error_code: Errors
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    log_end_offset: int = -1
    records: bytes | memoryview = b""
    diverging_epoch: EpochEndOffset | None = None
    preferred_read_replica: int = -1


@slot_init
@dataclass(frozen=True, slots=True)
class FetchResponse:
    error_code: Errors
    partitions: tuple[FetchPartitionResponse, ...]
    throttle_time_ms: int = 0
    session_id: int = 0
    """The fetch session the leader keeps for the next incremental request (0: none)."""


# --- OffsetsForLeaderEpoch (follower -> leader, §4.3) -----------------------------------------
@slot_init
@dataclass(frozen=True, slots=True)
class OffsetForLeaderPartition:
    tp: TopicPartition
    leader_epoch: int
    current_leader_epoch: int = NO_EPOCH


@slot_init
@dataclass(frozen=True, slots=True)
class OffsetsForLeaderEpochRequest:
    replica_id: int
    partitions: tuple[OffsetForLeaderPartition, ...]


# --- ListOffsets (follower -> leader, out-of-range handling §4.8) -----------------------------
@slot_init
@dataclass(frozen=True, slots=True)
class ListOffsetsPartition:
    tp: TopicPartition
    timestamp: int
    current_leader_epoch: int = NO_EPOCH


class ListOffsetsResult(NamedTuple):
    error_code: Errors
    timestamp: int
    offset: int
    leader_epoch: int


# --- AlterPartition (leader -> controller, §6.5-6.7) ------------------------------------------
class BrokerState(NamedTuple):
    """One proposed ISR member in AlterPartition v3 (``NewIsrWithEpochs``, KIP-903): its id and
    the broker epoch the leader last saw from it (−1: not checked)."""

    broker_id: int
    broker_epoch: int = -1


@slot_init
@dataclass(frozen=True, slots=True)
class AlterPartitionItem:
    tp: TopicPartition
    leader_epoch: int
    new_isr: tuple[int, ...]
    partition_epoch: int
    leader_recovery_state: int = LEADER_RECOVERY_RECOVERED
    broker_epochs: tuple[int, ...] = ()
    """Parallel to ``new_isr`` (v3); empty as in versions before 3 (every epoch −1)."""

    @property
    def new_isr_with_epochs(self) -> tuple[BrokerState, ...]:
        """The proposal as AlterPartition v3 carries it (v0–2 read as epoch −1 for all)."""
        epochs = self.broker_epochs or (-1,) * len(self.new_isr)
        return tuple([BrokerState(b, e) for b, e in zip(self.new_isr, epochs, strict=False)])


@slot_init
@dataclass(frozen=True, slots=True)
class AlterPartitionRequest:
    broker_id: int
    broker_epoch: int
    items: tuple[AlterPartitionItem, ...]


@slot_init
@dataclass(frozen=True, slots=True)
class AlterPartitionResult:
    tp: TopicPartition
    error_code: Errors
    leader_id: int = NO_LEADER
    leader_epoch: int = NO_EPOCH
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1
    leader_recovery_state: int = LEADER_RECOVERY_RECOVERED


# --- becoming follower: where a fetcher starts (§7.2, §7.10) ----------------------------------
@slot_init
@dataclass(frozen=True, slots=True)
class InitialFetchState:
    """Kafka's ``InitialFetchState``: the leader to fetch from, its epoch and the first offset
    (the LEO when the log has leader epochs, else the HW — ReplicaManager.initialFetchOffset)."""

    leader: int
    current_leader_epoch: int
    init_offset: int
    topic_id: str | None = None
