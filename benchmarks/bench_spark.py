"""Strong scaling of a sweep on this machine: the same grid on local[1] and local[2].

    python benchmarks/bench_spark.py [--runs 8] [--partitions 150] [--duration 20]

Reports wall time per master, speed-up, efficiency = speed-up / cores (target >= 0.8), and the
fixed costs users size tasks with: session start-up (per job) and an empty task (per task).
Times are wall-clock on a shared machine: read the ratios.
"""
from __future__ import annotations

import argparse
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
    a = ap.parse_args()
    g = grid(a.runs, a.partitions, a.duration)
    one, start1, task1, rows1 = timed_sweep("local[1]", g, slices=a.runs)
    two, start2, task2, rows2 = timed_sweep("local[2]", g, slices=a.runs)
    assert rows1 == rows2, "results must not depend on parallelism"
    speedup = one / two
    print(f"runs: {a.runs} x ({a.partitions} partitions, {a.duration:g} s simulated)")
    print(f"local[1] sweep: {one:.2f} s   local[2] sweep: {two:.2f} s")
    print(f"speed-up: {speedup:.2f}x   efficiency (speed-up / 2 cores): {speedup / 2:.2f}")
    print(f"per-job start-up: {start1:.2f} s / {start2:.2f} s   "
          f"per-task overhead: {task1 * 1e3:.1f} ms / {task2 * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
