"""Fetcher lanes: a cluster simulated lane by lane merges to the same summary in any order,
lanes share the broker fault schedule, and lane membership is Kafka's fetcher id."""
import random

import pytest

from replica_core.fetcher.assignment import fetcher_id
from replica_core.sim import lanes
from replica_core.sim.report import dumps_canonical
from replica_core.sim.run import merge_parts, run_scenario
from replica_core.sim.scenario import from_dict

DOC = {
    "name": "lanes", "seed": 11, "duration_s": 12, "fetcher_lanes": True,
    "cluster": {"brokers": 4},
    "configs": {"num.replica.fetchers": 3, "min.insync.replicas": 2,
                "broker.session.timeout.ms": 4000},
    "topics": [{"name": "a", "partitions": 30, "replication_factor": 3},
               {"name": "b", "partitions": 5, "replication_factor": 2}],
    "workload": {"batches_per_second": 1.0, "records_per_batch": 5, "record_bytes": 50},
    "faults": [{"at_s": 3, "kind": "crash", "broker": 2},
               {"at_s": 7, "kind": "restart", "broker": 2}],
    "fault_rates": {"isolations_per_broker_hour": 300.0, "mean_isolation_s": 2.0},
}


@pytest.fixture(scope="module")
def scenario():
    return from_dict(DOC)


@pytest.fixture(scope="module")
def parts(scenario):
    return [lanes.run_lane(scenario, k) for k in range(lanes.lane_count(scenario))]


def test_lanes_partition_every_topic_by_fetcher_id(scenario):
    n = lanes.lane_count(scenario)
    assert n == 3
    for t in scenario.topics:
        seen = []
        for k in range(n):
            ids = lanes.lane_partitions(scenario, k)[t.name]
            assert all(fetcher_id(t.name, p, n) == k for p in ids)
            seen += ids
        assert sorted(seen) == list(range(t.partitions))
    with pytest.raises(ValueError):
        lanes.lane_partitions(scenario, 3)


def test_lane_seeds_differ_and_depend_only_on_seed_and_lane():
    assert lanes.lane_seed(11, 0) == lanes.lane_seed(11, 0)
    assert len({lanes.lane_seed(11, k) for k in range(8)}) == 8
    assert lanes.lane_seed(12, 0) != lanes.lane_seed(11, 0)
    a, b = lanes.fault_rng(11).random(4), lanes.fault_rng(11).random(4)
    assert (a == b).all()


def test_every_lane_sees_the_same_broker_faults(scenario, parts):
    timelines = [p.fault_timeline for p in parts]
    assert len(timelines[0]) > 2  # the scripted crash/restart and drawn isolations
    assert all(t == timelines[0] for t in timelines)
    assert all(p.cluster_wide == parts[0].cluster_wide for p in parts)
    assert sum(p.counts["partitions"] for p in parts) == 35


def test_merge_is_independent_of_lane_order_and_equals_run_scenario(scenario, parts):
    summary, _series, _info = run_scenario(scenario)
    merged, _ = merge_parts(scenario, parts)
    assert dumps_canonical(merged) == dumps_canonical(summary)
    shuffled = list(parts)
    random.Random(3).shuffle(shuffled)
    again, _ = merge_parts(scenario, shuffled)
    assert dumps_canonical(again) == dumps_canonical(summary)
    assert summary["fetcher_lanes"] == 3 and summary["partitions"] == 35
    assert summary["acked_records"] == sum(p.counts["acked_records"] for p in parts) > 0
    assert summary["crashes"] == 1 and summary["restarts"] == 1
    assert summary["produce_latency_ms"]["count"] == sum(len(p.latencies_ms) for p in parts)


def test_merged_series_add_up(scenario, parts):
    _, series = merge_parts(scenario, parts)
    for k, t in enumerate(series["t"]):
        assert t == parts[0].series["t"][k]
        assert series["under_replicated"][k] == sum(p.series["under_replicated"][k] for p in parts)
        assert series["max_lag"][k] == max(p.series["max_lag"][k] for p in parts)
        online = sum(p.series["_online"][k] for p in parts)
        isr = sum(p.series["_isr_sum"][k] for p in parts)
        assert series["mean_isr_size"][k] == pytest.approx(isr / online if online else 0.0)


def test_single_lane_scenario_is_the_plain_run():
    """num.replica.fetchers = 1: one lane, the same cluster as without lanes except its seed."""
    doc = {**DOC, "configs": {"min.insync.replicas": 2}, "faults": [], "fault_rates": {},
           "duration_s": 4}
    sc = from_dict(doc)
    assert lanes.lane_count(sc) == 1
    summary, _, _ = run_scenario(sc)
    assert summary["partitions"] == 35 and summary["fetcher_lanes"] == 1
