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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
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


def build_cluster(scenario: Scenario, *, seed: int | None = None) -> Cluster:
    """The cluster a scenario describes (brokers 1..n), topics not yet created."""
    cl = scenario.cluster
    return Cluster(
        int(cl.get("brokers", 3)), config=scenario.configs,
        seed=scenario.seed if seed is None else seed,
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
            k: [] for k in ("t", "under_replicated", "offline", "under_min_isr", "_isr_sum",
                            "_online", "max_lag", "_lag_sum", "_lag_n", "elections",
                            "unclean_elections", "acked_records", "lost_acked_records")}
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
        s["_isr_sum"].append(int(tracker.isr_size[online].sum()))
        s["_online"].append(int(online.sum()))
        lag = self.lags()
        self.lag_samples.append(lag)
        s["max_lag"].append(int(lag.max()) if len(lag) else 0)
        s["_lag_sum"].append(int(lag.sum()))
        s["_lag_n"].append(len(lag))
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
    :class:`~replica_core.sim.invariants.InvariantViolation`. A scenario with
    ``fetcher_lanes = true`` runs as independent lanes (:mod:`replica_core.sim.lanes`).
    """
    wall0 = time.perf_counter()
    if scenario.fetcher_lanes:
        from replica_core.sim.lanes import lane_count, run_lane

        n = lane_count(scenario)
        parts = []
        for lane in range(n):
            sub = None if progress is None else _lane_progress(progress, lane, n)
            parts.append(run_lane(scenario, lane, progress=sub))
    else:
        parts = [simulate(scenario, progress=progress)]
    summary, series = merge_parts(scenario, parts)
    return summary, series, run_info(scenario, summary, time.perf_counter() - wall0)


def _lane_progress(progress: Progress, lane: int, lanes: int) -> Progress:
    def show(done_s: float, total_s: float, events: int) -> None:
        progress((lane * total_s + done_s) / lanes, total_s, events)
    return show


def run_info(scenario: Scenario, summary: dict[str, Any], wall: float) -> dict[str, Any]:
    """Wall-clock figures of a run (``run.json``; never part of the summary)."""
    events = summary["events"]
    return {
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


@dataclass
class RunParts:
    """What one simulated cluster (the whole scenario, or one lane of it) contributes to the
    summary, kept mergeable: counts, integrals, raw samples and per-sample sums."""

    counts: dict[str, Any]
    """Numbers (and nested dicts of numbers) that add up over lanes."""
    cluster_wide: dict[str, Any]
    """Broker-level figures every lane sees alike (crashes, restarts, faults): merged by max."""
    latencies_ms: list[float]
    lags: np.ndarray
    series: dict[str, list[float]]
    fault_timeline: list[tuple[float, str]]
    leadership_events: list[tuple[float, int, int, int]]


def simulate(scenario: Scenario, *, progress: Progress | None = None,
             partition_ids: Mapping[str, Sequence[int]] | None = None, seed: int | None = None,
             fault_rng: np.random.Generator | None = None) -> RunParts:
    """Run one cluster of ``scenario`` (``partition_ids`` per topic: only those partitions;
    ``seed`` for the loop instead of the scenario's; ``fault_rng`` draws the random faults)."""
    restore = quiet_logs()
    # A run allocates millions of small, mostly acyclic objects: collect young generations
    # less often (a measured 25-40 % of setup time goes to the cyclic collector otherwise).
    thresholds = gc.get_threshold()
    gc.set_threshold(50_000, 20, 100)
    try:
        cluster = build_cluster(scenario, seed=seed)
        try:
            return _run(cluster, scenario, progress, partition_ids, fault_rng)
        finally:
            cluster.close()
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
        restore()


def _run(cluster: Cluster, scenario: Scenario, progress: Progress | None,
         partition_ids: Mapping[str, Sequence[int]] | None,
         fault_rng: np.random.Generator | None) -> RunParts:
    loop = cluster.loop
    for t in scenario.topics:
        ids = None if partition_ids is None else list(partition_ids.get(t.name, ()))
        if ids is not None and not ids:
            continue
        cluster.create_topic(t.name, t.partitions, t.replication_factor, configs=t.configs,
                             partition_ids=ids)
    # warm-up: followers whose first fetch reached a leader before its LeaderAndIsr back off
    # replica.fetch.backoff.ms; let them settle before the measured run starts
    loop.advance(cluster.replica_config.replica_fetch_backoff_ms + 500)
    # the logs, replicas and sessions built so far live for the whole run: keep the cyclic
    # collector from walking them again on every full collection
    gc.freeze()
    duration_ms = int(round(scenario.duration_s * 1000))
    start = loop.now
    end = start + duration_ms
    workload = Workload(cluster, scenario.workload)
    faults = FaultInjector(cluster, scenario.faults, scenario.fault_rates,
                           duration_ms=duration_ms,
                           rng=fault_rng if fault_rng is not None else loop.spawn_rng())
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
    return _parts(cluster, start, workload, faults, sampler)


def _parts(cluster: Cluster, start: int, workload: Workload, faults: FaultInjector,
           sampler: Sampler) -> RunParts:
    checker = cluster.checker
    tracker = cluster.controller_node.tracker
    node = cluster.controller_node
    stats = cluster.controller.stats
    failed_fetch = 0
    for b in sorted(cluster.brokers):
        fm = cluster.brokers[b].fetcher_manager
        if fm is not None:
            failed_fetch += len(fm.failed_partitions)
    ledger = checker.ledger
    counts: dict[str, Any] = {
        "partitions": len(cluster.tps),
        "events": cluster.loop.events_run,
        "acked_records": sum(ledger.acked_records.values()),
        "acked_records_by_acks": {"all": ledger.acked_records.get(-1, 0),
                                  "1": ledger.acked_records.get(1, 0)},
        "lost_acked_records": checker.lost_acked_records,
        "lost_acked_records_by_cause": dict(checker.lost_records),
        "lost_acked_records_by_acks": {"all": checker.lost_by_acks.get(-1, 0),
                                       "1": checker.lost_by_acks.get(1, 0)},
        "diverged_partitions": len(checker.diverged),
        "offline_ms": tracker.ms["offline"],
        "under_min_isr_ms": tracker.ms["under_min_isr"],
        "under_replicated_ms": tracker.ms["under_replicated"],
        "offline_partitions_at_end": tracker.offline,
        "isr_shrinks": node.isr_shrinks,
        "isr_expands": node.isr_expands,
        "leader_elections": stats.leader_elections,
        "unclean_elections": stats.unclean_elections,
        "fetcher_failed_partitions": failed_fetch,
        "invariant_checks": dict(checker.checks),
        "network": {"messages": cluster.network.messages_sent,
                    "lost": cluster.network.messages_lost},
        **workload.stats(),
    }
    cluster_wide = {"brokers": len(cluster.brokers), "crashes": cluster.crashes,
                    "restarts": cluster.restarts, "faults_injected": faults.applied}
    lags = np.concatenate(sampler.lag_samples) if sampler.lag_samples else np.zeros(0, np.int64)
    leadership = [((at - start) / 1000.0, e, u, o)
                  for at, e, u, o in cluster.leadership_events if at >= start]
    return RunParts(counts, cluster_wide, list(workload.producer.latencies_ms), lags,
                    {k: list(v) for k, v in sampler.series.items()}, list(faults.timeline),
                    leadership)


def _add(a: Any, b: Any) -> Any:
    if isinstance(a, dict):
        return {k: _add(a.get(k, 0), b.get(k, 0)) for k in sorted(set(a) | set(b))}
    return a + b


SUMMED_SERIES = ("under_replicated", "offline", "under_min_isr", "elections",
                 "unclean_elections", "acked_records", "lost_acked_records", "_isr_sum",
                 "_online", "_lag_sum", "_lag_n")


def merge_parts(scenario: Scenario, parts: Sequence[RunParts]
                ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The summary and time series of a run from its parts (one part, or one per lane, in any
    order): counts add up, broker-level figures are shared, distributions come from the pooled
    samples — so a sharded run merges to exactly what one process computes."""
    if not parts:
        raise ValueError("nothing to merge")
    counts: dict[str, Any] = {}
    for p in parts:
        counts = _add(counts, p.counts) if counts else dict(p.counts)
    wide = {k: max(p.cluster_wide[k] for p in parts) for k in parts[0].cluster_wide}
    latencies = np.concatenate([np.asarray(p.latencies_ms, dtype=np.float64) for p in parts])
    lags = np.concatenate([np.asarray(p.lags, dtype=np.int64) for p in parts])
    summary: dict[str, Any] = {
        "scenario_name": scenario.name,
        "seed": scenario.seed,
        "truncation": scenario.truncation,
        "storage": scenario.storage,
        "brokers": wide["brokers"],
        "partitions": counts.pop("partitions"),
        "sim_seconds": scenario.duration_s,
        "offline_partition_seconds": counts.pop("offline_ms") / 1000.0,
        "under_min_isr_partition_seconds": counts.pop("under_min_isr_ms") / 1000.0,
        "under_replicated_partition_seconds": counts.pop("under_replicated_ms") / 1000.0,
        "produce_latency_ms": report.distribution(latencies),
        "replication_lag_records": report.distribution(lags),
        "crashes": wide["crashes"],
        "restarts": wide["restarts"],
        "faults_injected": wide["faults_injected"],
    }
    summary.update(counts)
    if scenario.fetcher_lanes:
        summary["fetcher_lanes"] = len(parts)
    return summary, _merge_series(parts, latencies)


def _merge_series(parts: Sequence[RunParts], latencies: np.ndarray) -> dict[str, Any]:
    first = parts[0].series
    out: dict[str, Any] = {"t": list(first["t"])}
    for key in SUMMED_SERIES:
        out[key] = [sum(vals) for vals in zip(*(p.series[key] for p in parts), strict=True)]
    out["max_lag"] = [max(vals) for vals in zip(*(p.series["max_lag"] for p in parts),
                                                strict=True)]
    out["mean_isr_size"] = [s / n if n else 0.0 for s, n in zip(out.pop("_isr_sum"),
                                                                 out.pop("_online"), strict=True)]
    out["mean_lag"] = [s / n if n else 0.0 for s, n in zip(out.pop("_lag_sum"),
                                                            out.pop("_lag_n"), strict=True)]
    out["produce_latency_samples"] = latencies.tolist()
    events: dict[float, list[int]] = {}
    for p in parts:
        for t, e, u, o in p.leadership_events:
            acc = events.setdefault(t, [0, 0, 0])
            acc[0] += e
            acc[1] += u
            acc[2] += o
    timeline = list(parts[0].fault_timeline)
    for t, (elected, unclean, offline) in events.items():
        labels = []
        if elected:
            labels.append(f"{elected} leader election{'s' if elected > 1 else ''}")
        if unclean:
            labels.append(f"{unclean} unclean")
        if offline:
            labels.append(f"{offline} partition{'s' if offline > 1 else ''} offline")
        timeline.append((t, ", ".join(labels)))
    out["fault_events"] = [[t, label] for t, label in sorted(timeline, key=lambda e: e[0])]
    return out


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


__all__ = ["SUMMARY_KEYS", "Progress", "RunParts", "Sampler", "build_cluster", "merge_parts",
           "run_info", "run_scenario", "simulate", "write_outputs"]
