"""Scenario files: loading, --set overrides, validation errors."""
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
