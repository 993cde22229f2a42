"""Run a scenario end to end: cluster, topics, workload, faults, sampling, summary.

:func:`run_scenario` is what the command line (``replica-core simulate``) and the Spark sweeps
call. Its ``summary`` is deterministic — same scenario and seed, same bytes of
``summary.json`` — because everything in it comes from the loop's clock and seeded generators;
wall-clock figures go only to ``run_info`` (``run.json``).
"""
from __future__ import annotations

import gc
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from replica_core.sim import report
from replica_core.sim.cluster import Cluster, quiet_logs
from replica_core.sim.faults import FaultInjector
from replica_core.sim.scenario import Scenario
from replica_core.sim.workload import Workload

Progress = Callable[[float, float, int], None]
"""``progress(simulated_seconds_done, simulated_seconds_total, events_so_far)``."""

SUMMARY_KEYS = (
    "acked_records", "lost_acked_records", "diverged_partitions", "offline_partition_seconds",
    "under_min_isr_partition_seconds", "isr_shrinks", "isr_expands", "leader_elections",
    "unclean_elections", "produce_latency_ms", "replication_lag_records", "sim_seconds",
    "events", "seed",
)


def build_cluster(scenario: Scenario) -> Cluster:
    """The cluster a scenario describes (brokers 1..n), topics not yet created."""
    cl = scenario.cluster
    return Cluster(
        int(cl.get("brokers", 3)), config=scenario.configs, seed=scenario.seed,
        storage=scenario.storage, truncation=scenario.truncation,
        latency_ms=float(cl.get("latency_ms", 1.0)),
        bandwidth_mbps=float(cl.get("bandwidth_mbps", 1000.0)),
        processing_base_ms=float(cl.get("processing_ms", 1.0)),
        detect_bounces=bool(cl.get("detect_bounces", True)),
        check_interval_ms=max(100, int(round(scenario.sample_interval_s * 1000))),
    )


class Sampler:
    """The time series of a run, one point per ``sample_interval_s``."""

    def __init__(self, cluster: Cluster, origin_ms: int) -> None:
        self.cluster = cluster
        self.origin_ms = origin_ms
        self.series: dict[str, list[float]] = {
            k: [] for k in ("t", "under_replicated", "offline", "under_min_isr", "mean_isr_size",
                            "max_lag", "mean_lag", "elections", "unclean_elections",
                            "acked_records", "lost_acked_records")}
        self.lag_samples: list[np.ndarray] = []

    def lags(self) -> np.ndarray:
        """Every follower's lag (leader LEO − follower LEO, in records) as its leader sees it."""
        out = []
        for b in sorted(self.cluster.brokers):
            broker = self.cluster.brokers[b]
            if not broker.alive or broker.rm is None:
                continue
            table = broker.rm.table
            rows = table.partitions()
            if not len(rows):
                continue
            ids = table.replica_id[rows, 1:]
            leo = table.leo[rows, 1:]
            lag = table.leader_leo[rows][:, None] - leo
            out.append(lag[(ids >= 0) & (leo >= 0)])
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)

    def sample(self) -> None:
        c = self.cluster
        tracker = c.controller_node.tracker
        tracker.close(c.loop.now)
        s = self.series
        s["t"].append(round((c.loop.now - self.origin_ms) / 1000.0, 3))
        s["under_replicated"].append(tracker.under_rep)
        s["offline"].append(tracker.offline)
        s["under_min_isr"].append(tracker.under_min)
        online = tracker.leader >= 0
        s["mean_isr_size"].append(float(tracker.isr_size[online].mean()) if online.any() else 0.0)
        lag = self.lags()
        self.lag_samples.append(lag)
        s["max_lag"].append(int(lag.max()) if len(lag) else 0)
        s["mean_lag"].append(float(lag.mean()) if len(lag) else 0.0)
        s["elections"].append(c.controller.stats.leader_elections)
        s["unclean_elections"].append(c.controller.stats.unclean_elections)
        s["acked_records"].append(sum(c.checker.ledger.acked_records.values()))
        s["lost_acked_records"].append(c.checker.lost_acked_records)


def run_scenario(scenario: Scenario, *, progress: Progress | None = None
                 ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Simulate ``scenario``; returns ``(summary, timeseries, run_info)``.

    ``summary`` holds at least :data:`SUMMARY_KEYS`; ``timeseries`` the sampled series
    (``t`` in seconds) plus ``produce_latency_samples`` and ``fault_events`` for the report;
    ``run_info`` the wall-clock figures. An invariant violation propagates as
    :class:`~replica_core.sim.invariants.InvariantViolation`.
    """
    wall0 = time.perf_counter()
    restore = quiet_logs()
    # A run allocates millions of small, mostly acyclic objects: collect young generations
    # less often (a measured 25-40 % of setup time goes to the cyclic collector otherwise).
    thresholds = gc.get_threshold()
    gc.set_threshold(50_000, 20, 100)
    try:
        cluster = build_cluster(scenario)
        try:
            summary, series = _run(cluster, scenario, progress)
        finally:
            cluster.close()
    finally:
        gc.set_threshold(*thresholds)
        restore()
    wall = time.perf_counter() - wall0
    events = summary["events"]
    run_info = {
        "scenario_name": scenario.name,
        "seed": scenario.seed,
        "wall_seconds": round(wall, 3),
        "events_per_second": round(events / wall, 1) if wall > 0 else None,
        "speed_vs_real_time": round(scenario.duration_s / wall, 2) if wall > 0 else None,
        "partitions": scenario.total_partitions,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "numpy": np.__version__,
    }
    return summary, series, run_info


def _run(cluster: Cluster, scenario: Scenario, progress: Progress | None
         ) -> tuple[dict[str, Any], dict[str, Any]]:
    loop = cluster.loop
    for t in scenario.topics:
        cluster.create_topic(t.name, t.partitions, t.replication_factor, configs=t.configs)
    # warm-up: followers whose first fetch reached a leader before its LeaderAndIsr back off
    # replica.fetch.backoff.ms; let them settle before the measured run starts
    loop.advance(cluster.replica_config.replica_fetch_backoff_ms + 500)
    duration_ms = int(round(scenario.duration_s * 1000))
    start = loop.now
    end = start + duration_ms
    workload = Workload(cluster, scenario.workload)
    faults = FaultInjector(cluster, scenario.faults, scenario.fault_rates,
                           duration_ms=duration_ms, rng=loop.spawn_rng())
    sampler = Sampler(cluster, start)
    workload.start(end)
    faults.start()
    sampler.sample()
    interval = max(1, int(round(scenario.sample_interval_s * 1000)))
    next_sample = start + interval
    while True:
        target = min(next_sample, end)
        loop.run_until_time(target)
        sampler.sample()
        if progress is not None:
            progress((loop.now - start) / 1000.0, scenario.duration_s, loop.events_run)
        if target >= end:
            break
        next_sample += interval
    cluster.check_invariants()
    cluster.controller_node.tracker.close(loop.now)
    return summarize(cluster, scenario, workload, faults, sampler), _series(
        cluster, start, sampler, workload, faults)


def _series(cluster: Cluster, start: int, sampler: Sampler, workload: Workload,
            faults: FaultInjector) -> dict[str, Any]:
    out: dict[str, Any] = dict(sampler.series)
    out["produce_latency_samples"] = list(workload.producer.latencies_ms)
    events = [(t, label) for t, label in faults.timeline]
    for at, elected, unclean, offline in cluster.leadership_events:
        if at < start:
            continue
        parts = []
        if elected:
            parts.append(f"{elected} leader election{'s' if elected > 1 else ''}")
        if unclean:
            parts.append(f"{unclean} unclean")
        if offline:
            parts.append(f"{offline} partition{'s' if offline > 1 else ''} offline")
        events.append(((at - start) / 1000.0, ", ".join(parts)))
    out["fault_events"] = [[t, label] for t, label in sorted(events, key=lambda e: e[0])]
    return out


def summarize(cluster: Cluster, scenario: Scenario, workload: Workload, faults: FaultInjector,
              sampler: Sampler) -> dict[str, Any]:
    """The canonical summary of a finished run (see :data:`SUMMARY_KEYS`)."""
    checker = cluster.checker
    tracker = cluster.controller_node.tracker
    node = cluster.controller_node
    stats = cluster.controller.stats
    lags = np.concatenate(sampler.lag_samples) if sampler.lag_samples else np.zeros(0)
    failed_fetch = 0
    for b in sorted(cluster.brokers):
        fm = cluster.brokers[b].fetcher_manager
        if fm is not None:
            failed_fetch += len(fm.failed_partitions)
    ledger = checker.ledger
    summary: dict[str, Any] = {
        "scenario_name": scenario.name,
        "seed": scenario.seed,
        "truncation": scenario.truncation,
        "storage": scenario.storage,
        "brokers": len(cluster.brokers),
        "partitions": len(cluster.tps),
        "sim_seconds": scenario.duration_s,
        "events": cluster.loop.events_run,
        "acked_records": sum(ledger.acked_records.values()),
        "acked_records_by_acks": {"all": ledger.acked_records.get(-1, 0),
                                  "1": ledger.acked_records.get(1, 0)},
        "lost_acked_records": checker.lost_acked_records,
        "lost_acked_records_by_cause": dict(checker.lost_records),
        "lost_acked_records_by_acks": {"all": checker.lost_by_acks.get(-1, 0),
                                       "1": checker.lost_by_acks.get(1, 0)},
        "diverged_partitions": len(checker.diverged),
        "offline_partition_seconds": tracker.ms["offline"] / 1000.0,
        "under_min_isr_partition_seconds": tracker.ms["under_min_isr"] / 1000.0,
        "under_replicated_partition_seconds": tracker.ms["under_replicated"] / 1000.0,
        "offline_partitions_at_end": tracker.offline,
        "isr_shrinks": node.isr_shrinks,
        "isr_expands": node.isr_expands,
        "leader_elections": stats.leader_elections,
        "unclean_elections": stats.unclean_elections,
        "produce_latency_ms": report.distribution(workload.producer.latencies_ms),
        "replication_lag_records": report.distribution(lags),
        "crashes": cluster.crashes,
        "restarts": cluster.restarts,
        "faults_injected": faults.applied,
        "fetcher_failed_partitions": failed_fetch,
        "invariant_checks": dict(checker.checks),
        "network": {"messages": cluster.network.messages_sent,
                    "lost": cluster.network.messages_lost},
    }
    summary.update(workload.stats())
    return summary


def write_outputs(out_dir: str | Path, summary: dict[str, Any], timeseries: dict[str, Any],
                  run_info: dict[str, Any]) -> dict[str, Path]:
    """Write ``summary.json``, ``run.json`` and ``report.html`` into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"summary": out / "summary.json", "run": out / "run.json",
             "report": out / "report.html"}
    report.write_json(paths["summary"], summary)
    report.write_json(paths["run"], run_info)
    events = [(float(t), str(label)) for t, label in timeseries.get("fault_events", [])]
    series = {k: v for k, v in timeseries.items()
              if k not in ("produce_latency_samples", "fault_events")}
    page = report.render_html(summary, series,
                              latencies_ms=timeseries.get("produce_latency_samples", []),
                              events=events)
    paths["report"].write_text(page, encoding="utf-8")
    return paths


__all__ = ["SUMMARY_KEYS", "Progress", "Sampler", "build_cluster", "run_scenario", "summarize",
           "write_outputs"]
