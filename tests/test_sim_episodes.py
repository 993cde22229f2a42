"""Fault episodes (sim/episodes.py): a long horizon simulated only around its faults."""
from __future__ import annotations

import json
import re

import pytest

from replica_core.errors import InvalidConfigurationError
from replica_core.sim import scenario as sc
from replica_core.sim.episodes import group, horizon_plan, plan_episodes, run_episode
from replica_core.sim.faults import PlannedFault
from replica_core.sim.run import run_scenario

MIN = 60_000
DAY = 86_400_000


def fault(at_ms: int, seq: int, kind: str, **kw) -> PlannedFault:
    return PlannedFault(at_ms, seq, kind, **kw)


def test_a_crash_and_its_late_restart_are_one_episode_with_margins():
    plan = [fault(10 * MIN, 0, "crash", broker=1), fault(70 * MIN, 1, "restart", broker=1)]
    (ep,) = group(plan, DAY, margin_ms=MIN)
    assert (ep.start_ms, ep.end_ms) == (9 * MIN, 71 * MIN)
    assert [p.at_ms for p in ep.plan()] == [MIN, 61 * MIN]
    assert not ep.open_at_end


def test_faults_closer_than_two_margins_share_an_episode_farther_ones_do_not():
    plan = [fault(10 * MIN, 0, "crash", broker=1), fault(11 * MIN, 1, "restart", broker=1),
            fault(12 * MIN + 59_000, 2, "isolate", broker=2),  # 1:59 after the restart
            fault(13 * MIN, 3, "unisolate", broker=2),
            fault(20 * MIN, 4, "slow", broker=3), fault(21 * MIN, 5, "unslow", broker=3)]
    eps = group(plan, DAY, margin_ms=MIN)
    assert [len(e.faults) for e in eps] == [4, 2]
    assert [(e.start_ms, e.end_ms) for e in eps] == [(9 * MIN, 14 * MIN), (19 * MIN, 22 * MIN)]


def test_an_open_condition_keeps_the_episode_going_whatever_the_gap():
    # broker 1 is still down when broker 2 crashes hours later: one episode
    plan = [fault(10 * MIN, 0, "crash", broker=1), fault(300 * MIN, 1, "crash", broker=2),
            fault(301 * MIN, 2, "restart", broker=2), fault(400 * MIN, 3, "restart", broker=1)]
    (ep,) = group(plan, DAY, margin_ms=MIN)
    assert (ep.start_ms, ep.end_ms) == (9 * MIN, 401 * MIN)


def test_a_restart_of_another_broker_does_not_close_a_crash():
    plan = [fault(10 * MIN, 0, "crash", broker=1), fault(11 * MIN, 1, "restart", broker=2),
            fault(500 * MIN, 2, "flush", broker=3)]
    (ep,) = group(plan, DAY, margin_ms=MIN)
    assert ep.open_at_end and ep.end_ms == DAY


def test_heal_ends_every_partition_and_instant_faults_are_their_own_episode():
    plan = [fault(10 * MIN, 0, "partition", brokers=(1,)),
            fault(10 * MIN, 1, "partition", brokers=(2, 3)),
            fault(30 * MIN, 2, "heal"), fault(600 * MIN, 3, "flush", broker=1)]
    eps = group(plan, DAY, margin_ms=MIN)
    assert [(e.start_ms, e.end_ms) for e in eps] == [(9 * MIN, 31 * MIN),
                                                     (599 * MIN, 601 * MIN)]
    assert group([], DAY, margin_ms=MIN) == []


def test_episodes_are_clipped_to_the_horizon():
    plan = [fault(10_000, 0, "crash", broker=1), fault(20_000, 1, "restart", broker=1)]
    (ep,) = group(plan, 50_000, margin_ms=MIN)
    assert (ep.start_ms, ep.end_ms) == (0, 50_000)


SMALL = {
    "name": "horizon-small", "seed": 3, "horizon_days": 1, "episode_margin_s": 10,
    "sample_interval_s": 5,
    "cluster": {"brokers": 3},
    "configs": {"min.insync.replicas": 2, "broker.session.timeout.ms": 6000},
    "topics": [{"name": "t", "partitions": 3, "replication_factor": 3}],
    "workload": {"batches_per_second": 1.0, "records_per_batch": 5, "record_bytes": 50,
                 "acks": "all"},
    "fault_rates": {"crashes_per_broker_hour": 0.04, "mean_downtime_s": 20,
                    "power_failure_fraction": 0.5},
}


def test_the_horizon_plan_is_a_pure_function_of_the_seed():
    a = sc.from_dict(SMALL)
    assert horizon_plan(a) == horizon_plan(sc.from_dict(SMALL))
    other = horizon_plan(sc.from_dict(SMALL, {"seed": 4}))
    assert horizon_plan(a) != other
    plan = horizon_plan(a)
    assert plan and all(0 <= p.at_ms < DAY for p in plan)
    assert {p.kind for p in plan} == {"crash", "restart"}


def test_a_horizon_run_covers_the_horizon_with_its_episodes_only():
    scenario = sc.from_dict(SMALL)
    episodes = plan_episodes(scenario)
    assert len(episodes) >= 2  # the seed draws several separate crashes in a day
    summary, series, info = run_scenario(scenario)
    h = summary["horizon"]
    assert summary["sim_seconds"] == 86_400.0
    assert h["episodes"] == len(episodes) == len(h["episode_list"])
    assert h["faults"] == sum(len(e.faults) for e in episodes) == summary["faults_injected"]
    assert h["unsettled_episodes"] == 0 and all(e["settled"] for e in h["episode_list"])
    assert h["simulated_seconds"] == pytest.approx(sum(e["length_s"] for e in h["episode_list"]))
    assert h["simulated_seconds"] < 0.2 * 86_400
    assert summary["partitions"] == 3
    # the episodes' figures add up to the run's
    assert summary["lost_acked_records"] == sum(e["lost_acked_records"] for e in h["episode_list"])
    assert summary["unavailable_partition_seconds"] == pytest.approx(
        sum(e["unavailable_partition_seconds"] for e in h["episode_list"]))
    assert summary["crashes"] == sum(1 for e in episodes for p in e.faults if p.kind == "crash")
    # samples and fault records sit on the horizon's clock, inside their episodes
    for row in summary["fault_recovery"]:
        assert any(e.start_ms / 1000 <= row["at_s"] <= e.end_ms / 1000 for e in episodes)
    assert series["t"][0] >= episodes[0].start_ms / 1000
    assert series["t"][-1] <= 86_400
    assert info["speed_vs_real_time"] > 0


def test_a_horizon_run_is_deterministic_and_an_episode_runs_alone():
    scenario = sc.from_dict(SMALL)
    a = json.dumps(run_scenario(scenario)[0], sort_keys=True)
    b = json.dumps(run_scenario(scenario)[0], sort_keys=True)
    assert a == b
    summary = json.loads(a)
    ep = plan_episodes(scenario)[1]
    alone = run_episode(scenario, ep)
    row = summary["horizon"]["episode_list"][1]
    assert alone.counts["lost_acked_records"] == row["lost_acked_records"]
    assert alone.length_ms / 1000 == row["length_s"]


def test_a_horizon_without_faults_simulates_one_quiet_episode():
    doc = dict(SMALL, fault_rates={})
    summary, _, _ = run_scenario(sc.from_dict(doc))
    assert summary["horizon"]["episodes"] == 1 and summary["horizon"]["faults"] == 0
    assert summary["horizon"]["simulated_seconds"] >= 20
    assert summary["lost_acked_records"] == 0 and summary["acked_records"] > 0


@pytest.mark.parametrize("change, message", [
    ({"duration_s": 60}, "not both"),
    ({"fetcher_lanes": True}, "fetcher_lanes"),
    ({"fault_rates": {"bit_flips_per_broker_hour": 0.1}}, "bit_flips_per_broker_hour"),
    ({"faults": [{"at_s": 90_000, "kind": "crash", "broker": 1}]}, "beyond the horizon"),
    ({"episode_margin_s": 0}, "episode_margin_s"),
    ({"horizon_days": -1}, "horizon_days"),
])
def test_what_a_horizon_cannot_carry_is_refused_before_any_work(change, message):
    with pytest.raises(InvalidConfigurationError, match=message):
        sc.from_dict(dict(SMALL, **change))


def test_the_shipped_year_example_loads_and_plans_episodes():
    scenario = sc.load(sc.examples_dir() / "rf3-year.toml")
    assert scenario.horizon_days == 365
    episodes = plan_episodes(scenario)
    assert episodes and all(e.end_ms > e.start_ms for e in episodes)
    covered = sum(e.end_ms - e.start_ms for e in episodes)
    assert covered < 0.01 * 365 * DAY


SMALL_TOML = """
name = "horizon-small"
seed = 3
horizon_days = 1
episode_margin_s = 10
sample_interval_s = 5
[cluster]
brokers = 3
[configs]
"min.insync.replicas" = 2
"broker.session.timeout.ms" = 6000
[[topics]]
name = "t"
partitions = 3
replication_factor = 3
[workload]
batches_per_second = 1.0
records_per_batch = 5
record_bytes = 50
acks = "all"
[fault_rates]
crashes_per_broker_hour = 0.04
mean_downtime_s = 20
power_failure_fraction = 0.5
"""


def test_console_and_report_say_what_a_horizon_run_covered(tmp_path, capsys):
    from replica_core import cli

    path = tmp_path / "small.toml"
    path.write_text(SMALL_TOML)
    assert sc.load(path) == sc.from_dict(SMALL)
    out_dir = tmp_path / "out"
    assert cli.main(["simulate", str(path), "-q", "--out", str(out_dir)]) == 0
    out = capsys.readouterr().out
    summary = json.loads((out_dir / "summary.json").read_text())
    h = summary["horizon"]
    assert re.search(rf"simulated +1 day: {h['episodes']} fault episodes \({h['faults']} faults\)"
                     r", [\d,.]+ s simulated \([\d.]+ % of the horizon\), [\d,]+ events; "
                     r"every episode ended healthy", out), out
    page = (out_dir / "report.html").read_text()
    assert f"1 day in {h['episodes']} fault episodes (" in page
    assert "<h2 id='episodes'>Fault episodes</h2>" in page
    assert "<h2 id='over-time'>" not in page
    assert page.count("<td>yes</td>") == h["episodes"]


def test_a_horizon_frees_each_episode_cluster_before_the_next(monkeypatch):
    """An episode's finished cluster is gone before the next episode builds its own (its
    cycles are collected), so a long horizon holds one cluster at a time."""
    import weakref

    from replica_core.sim import run as run_module

    built: list[weakref.ref] = []
    alive_when_built: list[int] = []
    original = run_module.build_cluster

    def build(*args, **kwargs):
        alive_when_built.append(sum(1 for ref in built if ref() is not None))
        cluster = original(*args, **kwargs)
        built.append(weakref.ref(cluster))
        return cluster

    monkeypatch.setattr(run_module, "build_cluster", build)
    scenario = sc.from_dict(SMALL)
    run_scenario(scenario)
    assert len(built) == len(plan_episodes(scenario)) >= 2
    assert alive_when_built == [0] * len(built)
