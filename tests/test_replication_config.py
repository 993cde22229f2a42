"""ReplicaConfig: Kafka's names and defaults (KAFKA_SEMANTICS §6.10) and clear errors."""
from __future__ import annotations

import pytest

from replica_core.errors import InvalidConfigurationError
from replica_core.replication import ReplicaConfig


def test_defaults_are_kafkas() -> None:
    c = ReplicaConfig()
    props = c.to_properties()
    assert props["replica.lag.time.max.ms"] == 30_000
    assert props["min.insync.replicas"] == 1
    assert props["unclean.leader.election.enable"] is False
    assert props["replica.fetch.max.bytes"] == 1_048_576
    assert props["replica.fetch.response.max.bytes"] == 10_485_760
    assert props["replica.fetch.min.bytes"] == 1
    assert props["replica.fetch.wait.max.ms"] == 500
    assert props["replica.fetch.backoff.ms"] == 1_000
    assert props["num.replica.fetchers"] == 1
    assert props["replica.high.watermark.checkpoint.interval.ms"] == 5_000
    assert props["fetch.max.bytes"] == 57_671_680
    assert props["message.max.bytes"] == 1_048_588
    assert c.isr_shrink_interval_ms == 15_000


def test_from_properties_accepts_dotted_names_and_strings() -> None:
    c = ReplicaConfig.from_properties({
        "replica.lag.time.max.ms": "10000", "min.insync.replicas": 2,
        "unclean.leader.election.enable": "true", "truncation": "high_watermark"})
    assert c.replica_lag_time_max_ms == 10_000
    assert c.min_insync_replicas == 2
    assert c.unclean_leader_election_enable is True
    assert c.truncation == "high_watermark"
    assert c.isr_shrink_interval_ms == 5_000


@pytest.mark.parametrize("props, fragment", [
    ({"replica.lag.time.maxms": 1}, "Unknown replication configuration 'replica.lag.time.maxms'"),
    ({"min.insync.replicas": 0}, "min.insync.replicas"),
    ({"min.insync.replicas": "two"}, "min.insync.replicas"),
    ({"unclean.leader.election.enable": "yes"}, "unclean.leader.election.enable"),
    ({"replica.fetch.max.bytes": -1}, "replica.fetch.max.bytes"),
    ({"truncation": "none"}, "truncation"),
    ({"replica.fetch.wait.max.ms": 40_000}, "replica.socket.timeout.ms"),
    ({"replica.lag.time.max.ms": 100}, "replica.lag.time.max.ms"),
])
def test_bad_values_raise_a_clear_error(props: dict, fragment: str) -> None:
    with pytest.raises(InvalidConfigurationError, match=fragment.replace(".", r"\.")):
        ReplicaConfig.from_properties(props)
