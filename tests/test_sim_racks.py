"""Failure domains (issue 18): brokers in racks (``broker.rack``), faults on whole racks —
outage, isolation, partition between racks — scripted and drawn from rates, and the shipped
AZ-outage scenario with what acks and min.insync.replicas buy when a zone goes."""
from __future__ import annotations

import numpy as np
import pytest

from replica_core.errors import InvalidConfigurationError
from replica_core.sim import scenario as sc
from replica_core.sim.broker import CONTROLLER_NODE
from replica_core.sim.cluster import SCRIPT_CLIENT, Cluster
from replica_core.sim.faults import FaultInjector, plan_rack_faults, validate_rates
from replica_core.sim.report import dumps_canonical
from replica_core.sim.run import build_cluster, run_scenario

RACKS = ["a", "b", "c", "a", "b", "c"]  # brokers 1..6
ZONE_A = {1, 4}
CONFIG = {"min.insync.replicas": 2, "broker.session.timeout.ms": 3000,
          "replica.lag.time.max.ms": 2000}
PARTS = 18


def rack_cluster(seed: int = 3) -> Cluster:
    c = Cluster(6, seed=seed, racks=RACKS, config=CONFIG)
    c.create_topic("t", PARTS, 3)
    return c


def states(c: Cluster):
    return [c.partition_state("t", p) for p in range(PARTS)]


def produce_for(c: Cluster, ms: int, acks: int = -1) -> list:
    handles = []
    for _ in range(ms // 50):
        handles += [c.produce("t", p, [b"v" * 20], acks=acks) for p in range(PARTS)]
        c.advance(50)
    return handles


def assert_full_isrs_eventually(c: Cluster) -> None:
    assert c.run_until(lambda: all(len(s.isr) == 3 for s in states(c)), 30_000)


# --- placement ---------------------------------------------------------------------------------
def test_every_partition_has_one_replica_per_zone():
    c = rack_cluster()
    for s in states(c):
        assert sorted(RACKS[b - 1] for b in s.replicas) == ["a", "b", "c"]
    assert {s.leader for s in states(c)} == {1, 2, 3, 4, 5, 6}


# --- a whole rack fails -------------------------------------------------------------------------
def test_rack_outage_elects_leaders_only_in_surviving_racks():
    c = rack_cluster()
    produce_for(c, 1000)
    led_by_a = [s.partition for s in states(c) if s.leader in ZONE_A]
    assert len(led_by_a) == PARTS // 3
    c.crash_rack("a", "power")
    assert not c.brokers[1].alive and not c.brokers[4].alive and c.brokers[2].alive
    c.advance(5_000)  # past broker.session.timeout.ms
    for s in states(c):
        assert s.leader not in ZONE_A and s.leader > 0  # nothing offline: b and c were in ISR
        assert not set(s.isr) & ZONE_A
        assert RACKS[s.leader - 1] in ("b", "c")
        assert s.replica_states[s.leader].is_leader  # the new leader knows it
    handles = produce_for(c, 1000)
    c.run_until(lambda: all(h.done for h in handles), 10_000)
    assert all(h.ok for h in handles)  # acks=all, min ISR 2: two zones are enough
    c.restart_rack("a")
    assert_full_isrs_eventually(c)
    c.check_invariants()
    assert c.checker.lost_acked_records == 0


def test_rack_isolation_cuts_the_zone_off_and_leaders_move():
    c = rack_cluster()
    produce_for(c, 500)
    c.isolate_rack("a")
    net = c.network
    assert net.reachable(1, 4) and net.reachable(4, 1)  # inside the zone
    for outside in (2, 3, 5, 6, CONTROLLER_NODE, SCRIPT_CLIENT):
        assert not net.reachable(1, outside) and not net.reachable(outside, 4)
    assert net.reachable(2, 3) and net.reachable(2, CONTROLLER_NODE)
    c.advance(5_000)  # the zone's sessions expire: it is fenced
    assert not c.controller.brokers[1].alive and not c.controller.brokers[4].alive
    for s in states(c):
        assert s.leader not in ZONE_A and not set(s.isr) & ZONE_A
    c.unisolate_rack("a")
    assert net.reachable(1, 2) and net.reachable(4, CONTROLLER_NODE)
    assert_full_isrs_eventually(c)
    assert c.controller.brokers[1].alive and c.controller.brokers[4].alive
    c.check_invariants()


def test_partition_between_racks_keeps_leaders_and_shrinks_isrs():
    c = rack_cluster()
    produce_for(c, 500)
    before = {s.partition: s.leader for s in states(c)}
    c.partition_racks(["a"])
    net = c.network
    assert not net.reachable(1, 2) and not net.reachable(4, 6)
    assert net.reachable(1, CONTROLLER_NODE) and net.reachable(SCRIPT_CLIENT, 4)
    assert net.reachable(1, 4) and net.reachable(2, 3)
    # writes go on (acks=1: a zone-a leader alone still takes them), past
    # replica.lag.time.max.ms; every broker still heartbeats to the controller
    produce_for(c, 6_000, acks=1)
    for s in states(c):
        assert s.leader == before[s.partition]  # no broker failed: no election
        if s.leader in ZONE_A:
            assert s.isr == (s.leader,)  # its followers sit across the cut
        else:
            assert not set(s.isr) & ZONE_A and len(s.isr) == 2
    # acks=all with min ISR 2: a zone-a leader alone refuses writes
    a_part = next(s.partition for s in states(c) if s.leader in ZONE_A)
    h = c.produce("t", a_part, [b"x"], acks=-1)
    c.run_until(lambda: h.done, 5_000)
    assert h.error is not None and h.error.name == "NOT_ENOUGH_REPLICAS"
    c.heal_rack_partition(["a"])
    assert net.reachable(1, 2)
    assert_full_isrs_eventually(c)


def test_unknown_rack_is_named():
    c = rack_cluster()
    with pytest.raises(InvalidConfigurationError, match="unknown rack 'z'.*'a', 'b', 'c'"):
        c.crash_rack("z")
    with pytest.raises(InvalidConfigurationError, match="3 racks for 6 brokers"):
        Cluster(6, racks=["a", "b", "c"])


# --- rack faults drawn from rates -----------------------------------------------------------------
RACK_RATES = {"rack_outages_per_hour": 120, "mean_rack_outage_s": 5,
              "rack_power_failure_fraction": 0.5, "rack_isolations_per_hour": 60,
              "mean_rack_isolation_s": 4, "rack_partitions_per_hour": 90,
              "mean_rack_partition_s": 3}
RACK_OF = dict(enumerate(RACKS, 1))


def test_rate_driven_rack_faults_are_a_pure_function_of_the_seed():
    a = plan_rack_faults(RACK_RATES, RACK_OF, 600_000, np.random.default_rng(1))
    assert a == plan_rack_faults(RACK_RATES, RACK_OF, 600_000, np.random.default_rng(1))
    assert a != plan_rack_faults(RACK_RATES, RACK_OF, 600_000, np.random.default_rng(2))
    assert {p.kind for p in a} == {"crash", "restart", "isolate", "unisolate", "partition",
                                   "heal_partition"}
    assert {p.mode for p in a if p.kind == "crash"} == {"power", "process"}
    assert {p.rack for p in a if p.rack} <= {"a", "b", "c"} and all(p.broker is None for p in a)
    assert all(p.source == "random" and 0 <= p.at_ms < 600_000 for p in a)
    for name in "abc":  # one outage of a rack ends before its next starts
        spans = [(p.at_ms, p.kind) for p in a if p.rack == name and p.kind in ("crash", "restart")]
        kinds = [k for _, k in sorted(spans)]
        assert kinds[::2] == ["crash"] * len(kinds[::2]) and "crash" not in kinds[1::2]
    # no rate: nothing drawn, the generator untouched
    rng = np.random.default_rng(5)
    assert plan_rack_faults({}, RACK_OF, 600_000, rng) == []
    assert rng.random() == np.random.default_rng(5).random()


def small_rack_scenario(**more):
    doc = {"name": "racks", "seed": 11, "duration_s": 12,
           "cluster": {"brokers": 6, "racks": RACKS},
           "configs": {"min.insync.replicas": 2, "broker.session.timeout.ms": 3000},
           "topics": [{"name": "t", "partitions": 12, "replication_factor": 3}],
           "workload": {"batches_per_second": 2.0, "acks": "all"},
           "fault_rates": {"rack_outages_per_hour": 600, "mean_rack_outage_s": 2,
                           "rack_partitions_per_hour": 300, "mean_rack_partition_s": 2}}
    doc.update(more)
    return sc.from_dict(doc)


def test_run_with_rack_fault_rates_same_seed_same_bytes():
    s = small_rack_scenario()
    one, _, _ = run_scenario(s)
    assert dumps_canonical(one) == dumps_canonical(run_scenario(s)[0])
    rack_faults = [f["fault"] for f in one["fault_recovery"] if "rack" in f["fault"]]
    assert rack_faults, one["fault_recovery"]
    assert one["lost_acked_records_by_cause"]["unexplained"] == 0
    other, _, _ = run_scenario(small_rack_scenario(seed=12))
    assert [f["fault"] for f in other["fault_recovery"]] != \
        [f["fault"] for f in one["fault_recovery"]]


def test_scripted_rack_faults_reach_the_cluster():
    s = small_rack_scenario(fault_rates={}, faults=[
        {"at_s": 1, "kind": "isolate", "rack": "b"}, {"at_s": 2, "kind": "unisolate", "rack": "b"},
        {"at_s": 3, "kind": "partition", "racks": ["c"]},
        {"at_s": 4, "kind": "heal_partition", "racks": ["c"]}])
    c = build_cluster(s)
    c.create_topic("t", 12, 3)
    inj = FaultInjector(c, s.faults, s.fault_rates, duration_ms=12_000)
    inj.start()
    c.advance(1_500)
    assert not c.network.reachable(2, CONTROLLER_NODE) and c.network.reachable(2, 5)
    c.advance(1_000)
    assert c.network.reachable(2, CONTROLLER_NODE)
    c.advance(1_000)
    assert not c.network.reachable(3, 1) and c.network.reachable(3, CONTROLLER_NODE)
    c.advance(1_000)
    assert c.network.reachable(3, 1)
    assert [d for _, d in inj.timeline] == ["isolate rack b", "unisolate rack b",
                                             "partition racks ['c']",
                                             "heal_partition racks ['c']"]


@pytest.mark.parametrize("change, words", [
    ({"faults": [{"at_s": 1, "kind": "crash", "rack": "d"}]}, ["unknown rack 'd'"]),
    ({"faults": [{"at_s": 1, "kind": "slow", "rack": "a"}]}, ["rack = ... applies to"]),
    ({"faults": [{"at_s": 1, "kind": "crash", "rack": "a", "broker": 1}]}, ["not both"]),
    ({"faults": [{"at_s": 1, "kind": "partition", "rack": "a"}]}, ["takes racks"]),
    ({"faults": [{"at_s": 1, "kind": "crash", "racks": ["a"]}]}, ["one rack: rack"]),
    ({"faults": [{"at_s": 1, "kind": "partition", "racks": ["a", "b", "c"]}]},
     ["no rack on the other side"]),
    ({"cluster": {"brokers": 6, "racks": ["a", "b"]}}, ["2 racks for 6 brokers"]),
    ({"cluster": {"brokers": 6, "racks": ["a", "b", "c", "a", "b", ""]}}, ["broker 6"]),
    ({"cluster": {"brokers": 6}, "faults": [{"at_s": 1, "kind": "crash", "rack": "a"}]},
     ["cluster.racks is not set"]),
    ({"cluster": {"brokers": 6}, "fault_rates": {"rack_outages_per_hour": 1}},
     ["rack_outages_per_hour needs racks"]),
    ({"fault_rates": {"rack_power_failure_fraction": 2}}, ["at most 1"]),
    ({"network": {"rack_latency": [{"racks": ["a", "q"], "latency": 2}]}}, ["unknown rack 'q'"]),
])
def test_rack_configuration_errors_name_the_bad_value(change, words):
    with pytest.raises(InvalidConfigurationError) as info:
        small_rack_scenario(**change)
    assert all(w in str(info.value) for w in words), str(info.value)


def test_rack_rates_are_known_fault_rates():
    assert validate_rates({"rack_outages_per_hour": 2})["mean_rack_outage_s"] == 60.0


# --- the shipped scenario: an AZ outage -----------------------------------------------------------
SHRINK = {"duration_s": 30, "faults.0.at_s": 8, "faults.1.at_s": 22, "topics.0.partitions": 30,
          "workload.batches_per_second": 2.0}
ISOLATE = {"faults.0.kind": "isolate", "faults.1.kind": "unisolate"}


def az(**more):
    return sc.load(sc.examples_dir() / "az-outage.toml", {**SHRINK, **more})


def test_az_outage_scenario_is_three_zones_rf3_losing_one():
    s = sc.load(sc.examples_dir() / "az-outage.toml")
    assert sorted(set(s.cluster["racks"])) == ["a", "b", "c"]
    assert [t.replication_factor for t in s.topics] == [3]
    assert [(f.kind, f.rack) for f in s.faults] == [("crash", "a"), ("restart", "a")]


def test_az_outage_elects_leaders_only_in_surviving_zones():
    s = az()
    c = build_cluster(s)
    c.create_topic("events", 30, 3)
    zone_a = {b for b, r in c.racks.items() if r == "a"}
    inj = FaultInjector(c, s.faults, s.fault_rates, duration_ms=30_000)
    inj.start()
    c.advance(8_000)
    led_by_a = {p for p in range(30) if c.partition_state("events", p).leader in zone_a}
    assert len(led_by_a) == 10
    seen_leaders = set()
    for _ in range(28):  # 14 s of the outage, every half second
        c.advance(500)
        for p in range(30):
            st = c.partition_state("events", p)
            assert st.leader not in zone_a or p in led_by_a and st.leader_epoch == 0
            if p in led_by_a and st.leader_epoch > 0:
                seen_leaders.add(st.leader)
    assert seen_leaders and not seen_leaders & zone_a
    assert all(c.partition_state("events", p).leader not in zone_a for p in led_by_a)


def test_az_outage_acks_all_min_isr_2_loses_nothing():
    summary, _, _ = run_scenario(az())
    assert summary["acked_records"] > 0 and summary["lost_acked_records"] == 0
    # the 10 partitions zone a led were unwritable until their leaders' sessions expired:
    # 9 s after the last heartbeat, which came at most 2 s before the power went
    down = summary["unavailable_partition_seconds_by_cause"]["leader_down"]
    assert 10 * 7 <= down <= 10 * 9
    assert summary["unavailable_partition_seconds"] < 10 * 9 + 1
    assert summary["offline_partition_seconds"] == 0  # zones b and c were in every ISR
    assert summary["unclean_elections"] == 0 and summary["leader_elections"] >= 10


def test_az_isolation_blocks_the_zone_and_explains_any_acks_1_loss():
    """A zone cut off from everything: its partitions are unavailable as `leader_unreachable`
    until new leaders are elected in the other zones; acks=all loses nothing, and whatever
    acks=1 loses is explained (the producer's requests to the cut-off leaders are lost on the
    cut links and wait out request.timeout.ms with max.in.flight.requests.per.connection
    occupied, so the stale leaders get no new writes in the moments after the zone comes
    back)."""
    kept, _, _ = run_scenario(az(**ISOLATE))
    assert kept["lost_acked_records"] == 0
    assert kept["unavailable_partition_seconds_by_cause"]["leader_unreachable"] > 10 * 7
    acks1, _, _ = run_scenario(az(**ISOLATE, **{"workload.acks": 1}))
    assert acks1["lost_acked_records_by_cause"]["unexplained"] == 0
    assert acks1["lost_acked_records_by_cause"]["acks_1"] == acks1["lost_acked_records"]
    assert acks1["unavailable_partition_seconds_by_cause"]["leader_unreachable"] > 10 * 7


def grey_zone(min_isr: int, mode: str):
    """Zone a is cut off from the other zones (not from the controller or clients) long enough
    for the partitions it leads to shrink their ISR to the zone-a leader alone, then loses
    power."""
    doc = az(**{"replica.lag.time.max.ms": 5000, "min.insync.replicas": min_isr}).to_dict()
    doc["faults"] = [{"at_s": 5, "kind": "partition", "racks": ["a"]},
                     {"at_s": 15, "kind": "crash", "rack": "a", "mode": mode},
                     {"at_s": 16, "kind": "heal_partition", "racks": ["a"]},
                     {"at_s": 22, "kind": "restart", "rack": "a"}]
    return run_scenario(sc.from_dict(doc))[0]


def test_min_isr_after_a_zone_partition_then_power_loss():
    one, two = grey_zone(1, "power"), grey_zone(2, "power")
    # min ISR 1: the lone zone-a leaders kept acknowledging acks=all writes, and their power
    # loss took them; min ISR 2 refused those writes (NOT_ENOUGH_REPLICAS) ...
    assert one["lost_acked_records"] > two["lost_acked_records"]
    assert two["under_min_isr_partition_seconds"] > 0 and one["under_min_isr_partition_seconds"] == 0
    # ... but still loses what was acknowledged before the ISR shrank: the zone-a leader, last
    # in the ISR, comes back without its unflushed tail and is elected again (the case
    # KIP-966's eligible leader replicas address)
    assert two["lost_acked_records"] > 0
    assert two["lost_acked_records_by_cause"]["power_failure"] == two["lost_acked_records"]
    assert all(e["acked_s"][1] < 5 for e in two["loss_events"])
    # a process crash keeps the page cache: nothing is lost with either setting
    assert grey_zone(1, "process")["lost_acked_records"] == 0


def test_every_lane_places_a_topic_alike():
    """A lane runs the cluster on a seed of its own (lanes.lane_seed) but must host the same
    replicas: placement draws from the scenario's seed and the topic name."""
    s = az()
    placed = []
    for loop_seed in (None, 12345):
        c = build_cluster(s, seed=loop_seed)
        c.create_topic("events", 30, 3, partition_ids=[0, 7, 29])
        placed.append([c.replicas_of(tp) for tp in c.tps])
    assert placed[0] == placed[1] and len(placed[0]) == 3


@pytest.mark.slow
def test_az_outage_full_size():
    summary, _, _ = run_scenario(sc.load(sc.examples_dir() / "az-outage.toml"))
    assert summary["lost_acked_records"] == 0 and summary["diverged_partitions"] == 0
    # the 20 partitions zone a led, each unwritable until its leader's session expired
    assert 20 * 7 <= summary["unavailable_partition_seconds_by_cause"]["leader_down"] <= 20 * 9
