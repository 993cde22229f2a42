"""Strong scaling on this machine: the same sweep, and the same sharded cluster (fetcher
lanes), on local[1] and local[2].

    python benchmarks/bench_spark.py [--runs 8] [--partitions 150] [--duration 20] [--lanes 4]

Reports wall time per master, speed-up, efficiency = speed-up / cores (target >= 0.8), and the
fixed costs users size tasks with: session start-up (per job) and an empty task (per task).
Times are wall-clock on a shared machine: read the ratios.
"""
from __future__ import annotations

import argparse
import statistics
import time

from replica_core import spark as rc_spark
from replica_core.sweep import grid_from_dict


def grid(runs: int, partitions: int, duration: float):
    return grid_from_dict({
        "scenario": "default", "seeds": runs, "base_seed": 11,
        "set": {"duration_s": duration, "topics.0.partitions": partitions, "cluster.brokers": 3,
                "fault_rates.crashes_per_broker_hour": 120.0,
                "fault_rates.mean_downtime_s": 5.0},
    })


def timed_sweep(master: str, g, slices: int) -> tuple[float, float, float, list]:
    t0 = time.perf_counter()
    session = rc_spark._session(master, f"bench-{master}")
    t1 = time.perf_counter()
    sc = session.sparkContext
    # per-task overhead: many empty tasks
    sc.parallelize(range(64), 64).map(lambda x: x).count()
    t2 = time.perf_counter()
    sc.parallelize(range(64), 64).map(lambda x: x).count()
    per_task = (time.perf_counter() - t2) / 64
    # Warm every Python worker (imports, kernel modules) so the sweep measures simulation only.
    cores = sc.defaultParallelism
    sc.parallelize(range(cores * 4), cores * 4).map(
        lambda _: __import__("replica_core.sim.run").__name__).count()
    t3 = time.perf_counter()
    rows = rc_spark.run_sweep(g, spark=session, slices=slices)
    sweep_s = time.perf_counter() - t3
    session.stop()
    return sweep_s, t1 - t0, per_task, rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--partitions", type=int, default=150)
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--lanes", type=int, default=4,
                    help="fetcher lanes of the sharded-cluster measurement (1: skip it)")
    ap.add_argument("--repeats", type=int, default=2,
                    help="rounds of local[1], local[2], local[2], local[1] (order swapped so "
                    "drift on a shared machine hits both alike); medians reported")
    a = ap.parse_args()
    g = grid(a.runs, a.partitions, a.duration)
    # in-process baseline: the same rows, no Spark (what Spark must not slow down)
    t0 = time.perf_counter()
    local_rows = [rc_spark.run_row(r) for r in g.rows()]
    serial = time.perf_counter() - t0
    times: dict[str, list[float]] = {"local[1]": [], "local[2]": []}
    starts: dict[str, list[float]] = {"local[1]": [], "local[2]": []}
    tasks: dict[str, list[float]] = {"local[1]": [], "local[2]": []}
    for _ in range(a.repeats):
        for master in ("local[1]", "local[2]", "local[2]", "local[1]"):
            sweep_s, start_s, per_task, rows = timed_sweep(master, g, slices=a.runs)
            assert rows == local_rows, "results must not depend on Spark or parallelism"
            times[master].append(sweep_s)
            starts[master].append(start_s)
            tasks[master].append(per_task)
    one, two = statistics.median(times["local[1]"]), statistics.median(times["local[2]"])
    speedup = one / two
    print(f"runs: {a.runs} x ({a.partitions} partitions, {a.duration:g} s simulated); "
          f"{len(times['local[1]'])} timings per master, order swapped")
    print(f"in-process, no Spark: {serial:.2f} s")
    print(f"local[1] sweep: median {one:.2f} s {sorted(round(t, 2) for t in times['local[1]'])}")
    print(f"local[2] sweep: median {two:.2f} s {sorted(round(t, 2) for t in times['local[2]'])}")
    print(f"speed-up: {speedup:.2f}x   efficiency (speed-up / 2 cores): {speedup / 2:.2f}   "
          f"local[1] vs in-process: {one / serial:.2f}x")
    print(f"per-job start-up: {statistics.median(starts['local[1]']):.2f} s / "
          f"{statistics.median(starts['local[2]']):.2f} s   per-task overhead: "
          f"{statistics.median(tasks['local[1]']) * 1e3:.1f} ms / "
          f"{statistics.median(tasks['local[2]']) * 1e3:.1f} ms")
    if a.lanes > 1:
        sharded(a)


def sharded(a: argparse.Namespace) -> None:
    """One cluster split into ``a.lanes`` fetcher lanes: local[1] vs local[2], order swapped."""
    from replica_core.sim.report import dumps_canonical
    from replica_core.sim.run import run_scenario
    from replica_core.sim.scenario import default_scenario_path, load

    scenario = load(default_scenario_path(), {
        "fetcher_lanes": True, "num.replica.fetchers": a.lanes, "duration_s": a.duration,
        "topics.0.partitions": a.partitions * a.runs // 2})
    t0 = time.perf_counter()
    single = dumps_canonical(run_scenario(scenario)[0])
    serial = time.perf_counter() - t0
    times: dict[str, list[float]] = {"local[1]": [], "local[2]": []}
    for _ in range(a.repeats):
        for master in ("local[1]", "local[2]", "local[2]", "local[1]"):
            session = rc_spark._session(master, f"bench-shard-{master}")
            cores = session.sparkContext.defaultParallelism
            session.sparkContext.parallelize(range(cores * 4), cores * 4).map(
                lambda _: __import__("replica_core.sim.run").__name__).count()
            t = time.perf_counter()
            summary, _, _ = rc_spark.run_sharded(scenario, spark=session)
            times[master].append(time.perf_counter() - t)
            session.stop()
            assert dumps_canonical(summary) == single, "sharded summary must equal one process"
    one, two = statistics.median(times["local[1]"]), statistics.median(times["local[2]"])
    print(f"sharded cluster: {scenario.total_partitions} partitions in {a.lanes} lanes, "
          f"{a.duration:g} s simulated; one process {serial:.2f} s")
    print(f"local[1]: median {one:.2f} s   local[2]: median {two:.2f} s   speed-up "
          f"{one / two:.2f}x   efficiency {one / two / 2:.2f}")


if __name__ == "__main__":
    main()
