"""Scenario files: loading, --set overrides, validation errors."""
import re

import pytest

from replica_core.errors import InvalidConfigurationError
from replica_core.sim import scenario as sc


def test_default_scenario_loads():
    s = sc.load(sc.default_scenario_path())
    assert s.total_partitions >= 3000 and s.cluster["brokers"] >= 5
    assert s.acks == -1 and s.truncation == "leader_epoch"
    assert [f.kind for f in s.faults] == ["crash", "restart"]


def test_overrides_route_to_scenario_tables_and_kafka_configs():
    o = sc.parse_overrides([
        "truncation=high_watermark", "replica.lag.time.max.ms=5000", "cluster.brokers=4",
        "workload.acks=1", "topics.0.partitions=10", "seed=9",
    ])
    s = sc.load(sc.default_scenario_path(), o)
    assert s.truncation == "high_watermark"
    assert s.configs["replica.lag.time.max.ms"] == 5000
    assert s.cluster["brokers"] == 4 and s.acks == 1 and s.seed == 9
    assert s.topics[0].partitions == 10


@pytest.mark.parametrize("bad", [
    ["truncation=sometimes"], ["workload.acks=2"], ["cluster.brokers=0"],
    ["topics.5.partitions=1"], ["nonsense=1"], ["duration_s=-1"],
])
def test_bad_overrides_raise_typed_error(bad):
    with pytest.raises(InvalidConfigurationError):
        sc.load(sc.default_scenario_path(), sc.parse_overrides(bad))


def test_malformed_toml_is_a_config_error(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text("name = [unclosed\n")
    with pytest.raises(InvalidConfigurationError):
        sc.load(p)


def test_round_trip_through_dict():
    s = sc.load(sc.default_scenario_path())
    assert sc.from_dict(s.to_dict()) == s


@pytest.mark.parametrize("override,message", [
    ({"seed": -1}, "seed must be a non-negative integer, got -1"),
    ({"workload.batches_per_second": -1}, "workload.batches_per_second must be ≥ 0, got -1"),
    ({"workload.records_per_batch": 0}, "workload.records_per_batch must be ≥ 1, got 0"),
    ({"cluster.bandwidth_mbps": 0}, "cluster.bandwidth_mbps must be > 0, got 0"),
    ({"topics.0.partitions": 0}, "needs partitions ≥ 1, got 0"),
    ({"duration_s": -5}, "duration_s must be positive, got -5"),
    ({"faults.0.at_s": -1}, "at_s must be ≥ 0, got -1"),
    ({"min.insync.replicas": 0}, "min.insync.replicas must be at least 1, got 0"),
])
def test_out_of_range_values_are_named_in_the_error(override, message):
    with pytest.raises(InvalidConfigurationError, match=re.escape(message)):
        sc.load(sc.default_scenario_path(), override)


def test_overrides_and_fingerprint_describe_the_effective_scenario():
    plain = sc.load(sc.default_scenario_path())
    same = sc.load(sc.default_scenario_path(), {"seed": 42})  # the file's own seed
    other = sc.load(sc.default_scenario_path(), {"min.insync.replicas": 1})
    assert plain.overrides == {} and same.overrides == {"seed": 42}
    assert plain.fingerprint() == same.fingerprint() != other.fingerprint()
    assert other.configs["min.insync.replicas"] == 1 and plain.warnings() == []
    clamped = sc.load(sc.default_scenario_path(), {"min.insync.replicas": 5})
    assert clamped.warnings() == [
        "topic events: min.insync.replicas=5 exceeds replication_factor=3; Kafka clamps it "
        "to 3 (effectiveMinIsr), so acks=all needs all 3 replicas in the ISR"]
