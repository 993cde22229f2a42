"""Broker replication settings under Kafka's names and defaults (KAFKA_SEMANTICS §6.10).

Kafka: ``ReplicationConfigs.java``, ``ServerConfigs.java``, ``ServerLogConfigs.java`` and the
cross-checks in ``KafkaConfig.validateValues``. ``ReplicaConfig.from_properties`` takes the dotted
names; an unknown name or a bad value raises :class:`InvalidConfigurationError` naming the key.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from replica_core.errors import InvalidConfigurationError

TRUNCATION_LEADER_EPOCH = "leader_epoch"
TRUNCATION_HIGH_WATERMARK = "high_watermark"
_TRUNCATION_MODES = (TRUNCATION_LEADER_EPOCH, TRUNCATION_HIGH_WATERMARK)

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class ReplicaConfig:
    """Replication configuration of one broker; field ``a_b_c`` is Kafka's ``a.b.c``.

    ``truncation`` is replica_core's own switch (not a Kafka name): ``"leader_epoch"`` is Kafka
    ≥ 2.0 (followers truncate by OffsetsForLeaderEpoch / diverging epochs), ``"high_watermark"``
    the pre-0.11 rule (truncate to the local HW on becoming follower) that KIP-101 replaced.
    ``truncate_on_fetch`` is the inter-broker protocol's ``isTruncationOnFetchSupported`` (IBP
    ≥ 2.7, KIP-595's diverging epochs in fetch responses); False models IBP 2.0–2.6, where a new
    follower starts Truncating from its high watermark.

    ``eligible_leader_replicas_enable`` is Kafka's ``eligible.leader.replicas.enable`` (KIP-966,
    §8.6), read by the controller. Off by default here (Kafka 4.1 turns it on for new clusters)
    so that existing scenarios keep their meaning. ``isr_broker_epochs`` is replica_core's
    switch for KIP-903 (metadata.version ≥ 3.5-IV1, on in Kafka ≥ 3.5): followers send their
    broker epoch in Fetch (v15 ``ReplicaState``), the leader ignores a fetch from an older
    incarnation and puts each proposed member's epoch in AlterPartition (v3 ``BrokerState``),
    and the controller refuses a stale one with INELIGIBLE_REPLICA. False models older metadata
    versions: every epoch is sent as −1, which nobody can check.
    """

    replica_lag_time_max_ms: int = 30_000
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    replica_fetch_max_bytes: int = 1_048_576
    replica_fetch_response_max_bytes: int = 10_485_760
    replica_fetch_min_bytes: int = 1
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_backoff_ms: int = 1_000
    replica_socket_timeout_ms: int = 30_000
    num_replica_fetchers: int = 1
    replica_high_watermark_checkpoint_interval_ms: int = 5_000
    fetch_max_bytes: int = 57_671_680
    message_max_bytes: int = 1_048_588
    fetch_purgatory_purge_interval_requests: int = 1_000
    producer_purgatory_purge_interval_requests: int = 1_000
    request_timeout_ms: int = 30_000
    max_incremental_fetch_session_cache_slots: int = 1_000
    truncation: str = TRUNCATION_LEADER_EPOCH
    truncate_on_fetch: bool = True
    eligible_leader_replicas_enable: bool = False
    isr_broker_epochs: bool = True

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.type in ("int", int):
                if isinstance(value, bool) or not isinstance(value, int):
                    _bad(f.name, value, "an integer")
                low = _MINIMUM.get(f.name, 0)
                if value < low:
                    _bad(f.name, value, f"a value of at least {low}")
                if f.name in _INT32 and value > INT_MAX:
                    _bad(f.name, value, f"a value of at most {INT_MAX}")
            elif f.type in ("bool", bool) and not isinstance(value, bool):
                _bad(f.name, value, "true or false")
        if self.truncation not in _TRUNCATION_MODES:
            _bad("truncation", self.truncation, " or ".join(_TRUNCATION_MODES))
        # KafkaConfig.validateValues
        if self.replica_fetch_wait_max_ms > self.replica_socket_timeout_ms:
            raise InvalidConfigurationError(
                "replica.socket.timeout.ms should always be at least replica.fetch.wait.max.ms to "
                "prevent unnecessary socket timeouts")
        if self.replica_fetch_wait_max_ms > self.replica_lag_time_max_ms:
            raise InvalidConfigurationError(
                "replica.fetch.wait.max.ms should always be less than or equal to "
                "replica.lag.time.max.ms to prevent frequent changes in ISR")

    @property
    def isr_shrink_interval_ms(self) -> int:
        """Period of the ISR expiration task: replica.lag.time.max.ms / 2 (ReplicaManager.startup)."""
        return max(1, self.replica_lag_time_max_ms // 2)

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> ReplicaConfig:
        """Build from Kafka's dotted names (values may be strings, as in server.properties)."""
        kwargs: dict[str, Any] = {}
        fields = {f.name: f for f in dataclasses.fields(cls)}
        for key, raw in props.items():
            name = _PROPERTY_NAMES.get(key)
            if name is None:
                raise InvalidConfigurationError(f"Unknown replication configuration {key!r}")
            kwargs[name] = _coerce(key, raw, fields[name].type)
        return cls(**kwargs)

    def to_properties(self) -> dict[str, Any]:
        """The settings under their dotted names."""
        return {key: getattr(self, name) for key, name in _PROPERTY_NAMES.items()}

    def with_overrides(self, **changes: Any) -> ReplicaConfig:
        """A copy with some fields replaced (validated again)."""
        return dataclasses.replace(self, **changes)


def _property_name(field_name: str) -> str:
    return "truncation" if field_name == "truncation" else field_name.replace("_", ".")


_PROPERTY_NAMES: dict[str, str] = {
    _property_name(f.name): f.name for f in dataclasses.fields(ReplicaConfig)}
_MINIMUM = {
    "min_insync_replicas": 1,
    "replica_lag_time_max_ms": 1,
    "num_replica_fetchers": 1,
    "replica_high_watermark_checkpoint_interval_ms": 1,
    "fetch_max_bytes": 1024,
}
_INT32 = {name for name in _PROPERTY_NAMES.values()} - {
    "replica_lag_time_max_ms", "replica_high_watermark_checkpoint_interval_ms"}


def _bad(name: str, value: Any, expected: str) -> None:
    raise InvalidConfigurationError(
        f"Invalid value {value!r} for configuration {_property_name(name)}: expected {expected}")


def _coerce(key: str, raw: Any, typ: Any) -> Any:
    name = _PROPERTY_NAMES[key]
    if typ in ("bool", bool):
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
            return raw.strip().lower() == "true"
        _bad(name, raw, "true or false")
    if typ in ("int", int):
        if isinstance(raw, bool):
            _bad(name, raw, "an integer")
        if isinstance(raw, int):
            return raw
        if isinstance(raw, str):
            try:
                return int(raw.strip())
            except ValueError:
                pass
        _bad(name, raw, "an integer")
    if not isinstance(raw, str):
        _bad(name, raw, "a string")
    return raw.strip()
