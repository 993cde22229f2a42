"""The simulator end to end: the default scenario against real time, and how wall time grows
with the number of partitions.

Part 1 — the embedded default scenario (3,000 partitions, RF 3, 6 brokers, 60 simulated
seconds, one broker crash and restart) through ``run_scenario``, as ``replica-core simulate``
runs it: wall seconds, speed against real time (target ≥ 10×, issue 6), events per second, and
where the time goes — cluster setup (9,000 logs created by LeaderAndIsr), the simulated run,
and the restarted broker's log recovery inside it.

Part 2 — scaling: the same scenario at 1,000, 3,000, 10,000 and 30,000 partitions (same
per-partition produce rate, so traffic grows with partitions too), each split into setup and run,
with the setup per log created (µs) and each row's growth against the previous one (× wall for
× partitions: 1.0 is linear).

Peers in the same run: the same cluster with no producer (setup plus the idle cost of fetch
sessions, heartbeats and scheduled ticks), and the bare event loop running the same number of
no-op events (the floor any discrete-event simulator in Python pays per event).

Run: ``python benchmarks/bench_sim.py`` (``--quick``: 20 simulated seconds, 1k/3k/10k, no 30k;
``--sizes 1000,30000`` to choose the rows; ``--json out.json`` to keep the figures).
Two commits side by side, interleaved: ``benchmarks/ab_sim.py``. ``pytest benchmarks/bench_sim.py`` runs Part 1's default
scenario and the bare-loop peer under pytest-benchmark and prints the speed against real time.
"""
from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from typing import Any

import pytest

from replica_core.sim import scenario as sc
from replica_core.sim.cluster import quiet_logs
from replica_core.sim.loop import EventLoop
from replica_core.sim.run import build_cluster, run_scenario


def _setup_seconds(scenario: sc.Scenario) -> float:
    """Wall time to start the brokers and create the topics (what every run pays first)."""
    restore = quiet_logs()
    thresholds = gc.get_threshold()
    gc.set_threshold(50_000, 20, 100)
    try:
        t0 = time.perf_counter()
        cluster = build_cluster(scenario)
        for t in scenario.topics:
            cluster.create_topic(t.name, t.partitions, t.replication_factor, configs=t.configs)
        return time.perf_counter() - t0
    finally:
        gc.set_threshold(*thresholds)
        restore()


def _restart_seconds(scenario: sc.Scenario) -> float:
    """Wall time of one broker's restart (log recovery of its share of the partitions)."""
    restore = quiet_logs()
    try:
        cluster = build_cluster(scenario)
        for t in scenario.topics:
            cluster.create_topic(t.name, t.partitions, t.replication_factor, configs=t.configs)
        cluster.crash(3)
        t0 = time.perf_counter()
        cluster.restart(3)
        return time.perf_counter() - t0
    finally:
        restore()


def create_log_us(logs: int = 20_000, rounds: int = 3) -> float:
    """µs per ``LogManager.create_log`` of a new, empty log on the in-memory medium with the
    simulator's log config (what LeaderAndIsr does for every replica at setup): the median of
    ``rounds`` fresh managers, each creating ``logs`` logs, with the run's collector thresholds."""
    from replica_core.clock import ManualClock
    from replica_core.sim.cluster import SIM_LOG_DEFAULTS
    from replica_core.storage.config import LogConfig
    from replica_core.storage.log_manager import LogManager
    from replica_core.storage.medium import MemoryMedium

    cfg = LogConfig.from_properties(SIM_LOG_DEFAULTS)
    thresholds = gc.get_threshold()
    gc.set_threshold(50_000, 20, 100)
    times = []
    try:
        for _ in range(rounds):
            medium = MemoryMedium()
            medium.makedirs("/data/broker-1")
            lm = LogManager(["/data/broker-1"], cfg, medium=medium, clock=ManualClock(0),
                            topic_configs={"t": cfg})
            lm.startup()
            t0 = time.perf_counter()
            for p in range(logs):
                lm.create_log("t", p, log_dir="/data/broker-1")
            times.append((time.perf_counter() - t0) / logs * 1e6)
            del lm, medium
            gc.collect()
    finally:
        gc.set_threshold(*thresholds)
    return sorted(times)[len(times) // 2]


def _loaded_loop(events: int) -> EventLoop:
    """A bare EventLoop holding ``events`` no-op callbacks, 100 per simulated millisecond."""
    loop = EventLoop(1)
    noop = lambda: None  # noqa: E731
    for k in range(events):
        loop.call_at(loop.now + k // 100, noop)
    return loop


def _drain(loop: EventLoop) -> int:
    n = 0
    while loop.step():
        n += 1
    return n


def _loop_floor(events: int) -> float:
    """Seconds for the bare EventLoop to run ``events`` no-op callbacks."""
    loop = _loaded_loop(events)
    t0 = time.perf_counter()
    _drain(loop)
    return time.perf_counter() - t0


def _replication_factor(scenario: sc.Scenario) -> int:
    """Replicas per partition, weighted over the topics (logs created = partitions × this)."""
    total = sum(t.partitions for t in scenario.topics)
    return round(sum(t.partitions * t.replication_factor for t in scenario.topics) / total) \
        if total else 0


def measure(overrides: dict[str, Any]) -> dict[str, Any]:
    scenario = sc.load(sc.default_scenario_path(), overrides)
    summary, _, info = run_scenario(scenario)
    setup = _setup_seconds(scenario)
    wall = info["wall_seconds"]
    return {
        "partitions": scenario.total_partitions,
        "logs": scenario.total_partitions * _replication_factor(scenario),
        "sim_seconds": scenario.duration_s,
        "wall_seconds": wall,
        "setup_seconds": round(setup, 3),
        "run_seconds": round(wall - setup, 3),
        "speed_vs_real_time": info["speed_vs_real_time"],
        "events": summary["events"],
        "events_per_second": info["events_per_second"],
        "acked_records": summary["acked_records"],
        "produced_batches": summary["produced_batches"],
        "lost_acked_records": summary["lost_acked_records"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--sizes", help="comma-separated partition counts of the scaling rows "
                        "(default 1000,3000,10000,30000; --quick: without 30000)")
    args = parser.parse_args(argv)
    duration = 20 if args.quick else 60
    if args.sizes:
        sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
    else:
        sizes = [1000, 3000, 10000] if args.quick else [1000, 3000, 10000, 30000]
    out: dict[str, Any] = {}

    print(f"default scenario, {duration} simulated seconds", flush=True)
    head = measure({"duration_s": duration})
    out["default"] = head
    idle = measure({"duration_s": duration, "workload.batches_per_second": 0.0})
    out["peer_idle"] = idle
    restart = _restart_seconds(sc.load(sc.default_scenario_path()))
    floor = _loop_floor(head["events"])
    per_log = create_log_us()
    out["create_log_us"] = round(per_log, 2)
    out["restart_seconds"] = round(restart, 3)
    out["peer_loop_floor_seconds"] = round(floor, 3)
    print(f"  wall {head['wall_seconds']:.2f} s = {head['speed_vs_real_time']:.2f}x real time "
          f"(target >= 10x); {head['events']:,} events, {head['events_per_second']:,.0f} events/s")
    print(f"  setup (6 brokers, {head['partitions']:,} partitions x RF 3 logs) "
          f"{head['setup_seconds']:.2f} s; simulated run {head['run_seconds']:.2f} s, of which "
          f"one broker restart (log recovery of its 1,500 logs) ~{restart:.2f} s")
    print(f"  log creation: {per_log:.1f} us per LogManager.create_log (new empty log, "
          f"in-memory medium, the simulator's log config)")
    print(f"  traffic: {head['produced_batches']:,} batches, {head['acked_records']:,} acked "
          f"records, {head['lost_acked_records']} lost")
    print(f"  peer, no producer: wall {idle['wall_seconds']:.2f} s (setup "
          f"{idle['setup_seconds']:.2f} s, idle run {idle['run_seconds']:.2f} s, "
          f"{idle['events']:,} events)")
    print(f"  peer, bare event loop with {head['events']:,} no-op events: {floor:.3f} s "
          f"({head['events'] / floor:,.0f} events/s)")

    print(f"\nscaling with partitions ({duration} simulated seconds, same per-partition rate)")
    print(f"  {'partitions':>10} {'wall s':>8} {'setup s':>8} {'us/log':>7} {'run s':>8} "
          f"{'x real':>7} {'events':>9} {'events/s':>9} {'wall vs 1st':>11} {'growth':>7}")
    rows = []
    for n in sizes:
        r = head if n == head["partitions"] else measure({"duration_s": duration,
                                                         "topics.0.partitions": n})
        r["setup_us_per_log"] = round(r["setup_seconds"] / r["logs"] * 1e6, 1) \
            if r["logs"] else None
        prev = rows[-1] if rows else None
        # growth: how much more wall per partition than the previous row (1.0 = linear)
        r["growth_vs_previous"] = None if prev is None else round(
            (r["wall_seconds"] / prev["wall_seconds"]) / (n / prev["partitions"]), 2)
        rows.append(r)
        base = rows[0]["wall_seconds"]
        growth = "" if r["growth_vs_previous"] is None else f"{r['growth_vs_previous']:.2f}"
        print(f"  {n:>10,} {r['wall_seconds']:>8.2f} {r['setup_seconds']:>8.2f} "
              f"{r['setup_us_per_log'] or 0:>7.1f} {r['run_seconds']:>8.2f} "
              f"{r['speed_vs_real_time']:>7.2f} {r['events']:>9,} "
              f"{r['events_per_second']:>9,.0f} {r['wall_seconds'] / base:>10.2f}x "
              f"{growth:>7}", flush=True)
    out["scaling"] = rows
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(out, fh, indent=2)
    return 0


# --- the same target under pytest-benchmark (``pytest benchmarks/bench_sim.py``) ------------------
_medians: dict[str, float] = {}
_events: dict[str, int] = {}


@pytest.fixture(scope="module", autouse=True)
def ratio_report(request):
    yield
    if "default" not in _medians:
        return
    capman = request.config.pluginmanager.get_plugin("capturemanager")
    with capman.global_and_fixture_disabled():
        wall, events = _medians["default"], _events["default"]
        print(f"\nbench_sim: default scenario {events:,} events, median wall {wall:.2f} s = "
              f"{60 / wall:.2f}x real time (target >= 10x), {events / wall:,.0f} events/s")
        if "loop_floor" in _medians:
            print(f"  bare event loop, same number of no-op events: "
                  f"{wall / _medians['loop_floor']:,.0f}x faster than the simulator")


def test_sim_default_scenario(benchmark):
    """The embedded default scenario end to end; the limit it is held to is real time."""
    scenario = sc.load(sc.default_scenario_path())
    summary, _, _ = benchmark.pedantic(run_scenario, args=(scenario,), rounds=2, iterations=1)
    assert summary["lost_acked_records"] == 0 and summary["sim_seconds"] == 60
    benchmark.group = "sim-default"
    _medians["default"] = benchmark.stats.stats.median
    _events["default"] = summary["events"]
    benchmark.extra_info["speed_vs_real_time"] = round(60 / _medians["default"], 2)


def test_sim_bare_loop_floor(benchmark):
    """Peer: the bare event loop running as many no-op events as the default scenario."""
    events = _events.get("default", 29_605)
    ran = benchmark.pedantic(_drain, setup=lambda: ((_loaded_loop(events),), {}), rounds=3,
                             iterations=1)
    assert ran == events
    benchmark.group = "sim-default"
    _medians["loop_floor"] = benchmark.stats.stats.median


if __name__ == "__main__":
    sys.exit(main())
