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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from replica_core import __version__
from replica_core.sim import report
from replica_core.sim.cluster import FETCH_METRICS, Cluster, configs_in_force, quiet_logs
from replica_core.sim.faults import FaultInjector, PlannedFault
from replica_core.sim.invariants import ScanDigests
from replica_core.sim.scenario import Scenario
from replica_core.sim.workload import Workload

Progress = Callable[[float, float, int], None]
"""``progress(simulated_seconds_done, simulated_seconds_total, events_so_far)``."""

SUMMARY_KEYS = (
    "acked_records", "lost_acked_records", "diverged_partitions", "offline_partition_seconds",
    "under_min_isr_partition_seconds", "isr_shrinks", "isr_expands", "leader_elections",
    "unclean_elections", "produce_latency_ms", "replication_lag_records", "sim_seconds",
    "events", "seed", "config", "unavailable_partition_seconds",
    "unavailable_partition_seconds_by_cause", "isr_changes_by_origin", "fault_recovery",
    "loss_events", "fetch_path", "verdict", "storage_faults",
)
LOSS_EVENTS_KEPT = 500
"""At most this many loss events go into the summary (the count of the rest is kept)."""


def config_section(scenario: Scenario) -> dict[str, Any]:
    """What a run was configured with: the effective scenario (file plus overrides), the
    overrides themselves, every Kafka config in force (defaults included), each topic's
    effective settings, warnings about adjusted settings, the package version and the
    scenario's fingerprint."""
    kafka = configs_in_force(scenario.configs, scenario.acks)
    topics = {}
    for t in scenario.topics:
        m = scenario.min_isr_of(t)
        topics[t.name] = {"partitions": t.partitions, "replication_factor": t.replication_factor,
                          "min.insync.replicas": m,
                          "effective_min_isr": min(m, t.replication_factor),
                          "configs": dict(t.configs)}
    return {"scenario": scenario.to_dict(), "overrides": dict(scenario.overrides),
            "kafka": kafka, "topics": topics, "warnings": scenario.warnings(),
            "replica_core_version": __version__, "fingerprint": scenario.fingerprint()}


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
        racks=cl.get("racks"), network=scenario.network or None, placement_seed=scenario.seed,
    )


class Sampler:
    """The time series of a run, one point per ``sample_interval_s``."""

    def __init__(self, cluster: Cluster, origin_ms: int) -> None:
        self.cluster = cluster
        self.origin_ms = origin_ms
        self.series: dict[str, list[float]] = {
            k: [] for k in ("t", "under_replicated", "offline", "unavailable", "under_min_isr",
                            "_isr_sum",
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
            if not table.scan_bound:  # no row ever used
                continue
            out.append(table.follower_lags())  # row order, as table.partitions() lists them
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)

    def sample(self) -> None:
        c = self.cluster
        tracker = c.controller_node.tracker
        tracker.close(c.loop.now)
        s = self.series
        s["t"].append(round((c.loop.now - self.origin_ms) / 1000.0, 3))
        s["under_replicated"].append(tracker.under_rep)
        s["offline"].append(tracker.offline)
        c.client_view.close(c.loop.now)
        s["unavailable"].append(c.client_view.blocked)
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
    if scenario.horizon_days > 0:
        from replica_core.sim.episodes import run_horizon

        summary, series = run_horizon(scenario, progress=progress)
        return summary, series, run_info(scenario, summary, time.perf_counter() - wall0)
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
        "config": config_section(scenario),
        "wall_seconds": round(wall, 3),
        "events_per_second": round(events / wall, 1) if wall > 0 else None,
        "speed_vs_real_time": round(scenario.simulated_s / wall, 2) if wall > 0 else None,
        "partitions": scenario.total_partitions,
        "python": sys.version.split()[0],
        # os.uname's fields only: platform.platform() may fork `uname -p`, a cost run.json's
        # wall time would include
        "platform": f"{platform.system()}-{platform.release()}-{platform.machine()}",
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
    loss_events: list[dict[str, Any]] = field(default_factory=list)
    """Losses found (times in seconds from the measured start)."""
    fault_recovery: list[dict[str, Any]] = field(default_factory=list)
    """Per injected fault, in order: its recovery timeline (see sim/availability.py)."""
    length_ms: int = 0
    """The measured run's simulated length (``duration_s``, plus any time spent settling)."""
    settled: bool = True
    """Whether the cluster was healthy at the end (asked only of episodes)."""


def simulate(scenario: Scenario, *, progress: Progress | None = None,
             partition_ids: Mapping[str, Sequence[int]] | None = None, seed: int | None = None,
             fault_rng: np.random.Generator | None = None,
             plan: Sequence[PlannedFault] | None = None, duration_ms: int | None = None,
             settle_ms: int = 0) -> RunParts:
    """Run one cluster of ``scenario`` (``partition_ids`` per topic: only those partitions;
    ``seed`` for the loop instead of the scenario's; ``fault_rng`` draws the random faults).

    An episode (:mod:`replica_core.sim.episodes`) passes its own fault ``plan`` and
    ``duration_ms``; with ``settle_ms`` the run goes on, without new produce traffic, until
    the cluster is healthy (:func:`healthy`) or that much longer."""
    restore = quiet_logs()
    # The setup (brokers, topics, every log, partition and fetcher, the warm-up) builds
    # objects that live for the whole run, and no garbage cycles: the cyclic collector stays
    # off until the run ends (measured: its collections during the default setup freed 0
    # objects and cost 5 % of the setup, 16 % at 10,000 partitions, one older-generation
    # pass walking everything built so far). The measured run keeps it off too (see _run).
    collecting = gc.isenabled()
    gc.disable()
    try:
        cluster = build_cluster(scenario, seed=seed)
        try:
            return _run(cluster, scenario, progress, partition_ids, fault_rng, plan,
                        duration_ms, settle_ms)
        finally:
            cluster.close()
    finally:
        # What the run allocated joins the setup's objects in the oldest generation, unscanned:
        # a young collection here would walk all of it and free nothing, since the finished
        # cluster's cycles run through the setup's objects, which only a full collection
        # examines (measured: 0 objects freed, 0.06 s at 3,000 partitions, 0.3 s at 10,000).
        gc.freeze()
        gc.unfreeze()
        if collecting:
            gc.enable()
        restore()


def healthy(cluster: Cluster) -> bool:
    """Every broker up, every partition led with its whole replica set in the ISR, and no
    client blocked: the state a cluster returns to after its faults are repaired."""
    tracker = cluster.controller_node.tracker
    return (tracker.offline == 0 and tracker.under_rep == 0 and cluster.client_view.blocked == 0
            and all(b.alive for b in cluster.brokers.values()))


def _run(cluster: Cluster, scenario: Scenario, progress: Progress | None,
         partition_ids: Mapping[str, Sequence[int]] | None,
         fault_rng: np.random.Generator | None, plan: Sequence[PlannedFault] | None = None,
         duration: int | None = None, settle_ms: int = 0) -> RunParts:
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
    # collector from walking them again on every full collection. It stays off (as during the
    # setup, see simulate()): what the run allocates is either freed by reference counting or
    # lives to the end of the run (the segments, files and producer states of partitions
    # written for the first time); its young-generation collections found no garbage (0
    # objects in 14 collections of the default scenario) yet cost 7 % of the run, 13 % at
    # 10,000 partitions. simulate() turns it back on, and what the run leaves behind is
    # collected then.
    gc.freeze()
    gc.disable()
    duration_ms = int(round(scenario.duration_s * 1000)) if duration is None else duration
    start = loop.now
    end = start + duration_ms
    # figures cover the measured run only: integrals and fetch meters start here
    tracker = cluster.controller_node.tracker
    tracker.close(start)
    tracker.ms = dict.fromkeys(tracker.ms, 0)
    cluster.client_view.acks = scenario.acks
    cluster.client_view.reset_integrals(start)
    fetch_base = cluster.fetch_metrics()
    workload = Workload(cluster, scenario.workload)
    faults = FaultInjector(cluster, scenario.faults, scenario.fault_rates,
                           duration_ms=duration_ms,
                           rng=fault_rng if fault_rng is not None else loop.spawn_rng(),
                           plan=plan)
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
            progress((loop.now - start) / 1000.0, duration_ms / 1000.0, loop.events_run)
        if target >= end:
            break
        next_sample += interval
    settled = True
    if settle_ms > 0:
        limit = end + settle_ms
        while not (settled := healthy(cluster)) and loop.now < limit:
            loop.run_until_time(min(loop.now + interval, limit))
            sampler.sample()
    digests: ScanDigests = {}
    scans = cluster.check_invariants(digests)
    cluster.controller_node.tracker.close(loop.now)
    cluster.client_view.close(loop.now)
    parts = _parts(cluster, start, workload, faults, sampler, fetch_base)
    # nothing has run since the check: its scans (and the digests it took) are what the logs hold
    parts.counts.update({k: v for k, v in workload.audit_logs(scans, digests).items()
                         if v is not None})
    parts.length_ms = loop.now - start
    parts.settled = settled
    return parts


def _fetch_counts(cluster: Cluster, base: Mapping[int, Mapping[str, int]]
                  ) -> dict[str, dict[str, int]]:
    """Per broker, the fetch-path meters over the measured run (all its processes)."""
    out = {}
    for b, now in cluster.fetch_metrics().items():
        before = base.get(b, {})
        row = {k: now[k] - before.get(k, 0) for k in FETCH_METRICS}
        row["NumIncrementalFetchSessions"] = now["NumIncrementalFetchSessions"]
        out[str(b)] = row
    return out


def _parts(cluster: Cluster, start: int, workload: Workload, faults: FaultInjector,
           sampler: Sampler, fetch_base: Mapping[int, Mapping[str, int]]) -> RunParts:
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
        "unavailable_ms_by_cause": cluster.client_view.ms_by_cause(),
        "unavailable_partitions_at_end": cluster.client_view.blocked,
        "isr_changes_by_origin": {o: dict(v) for o, v in sorted(node.isr_changes.items())},
        "fetch_per_broker": _fetch_counts(cluster, fetch_base),
        "leader_elections": stats.leader_elections,
        "unclean_elections": stats.unclean_elections,
        "fetcher_failed_partitions": failed_fetch,
        "invariant_checks": dict(checker.checks),
        "network": {"messages": cluster.network.messages_sent,
                    "lost": cluster.network.messages_lost},
        "storage_faults": cluster.storage_faults.summary(),
        **workload.stats(),
    }
    counts.update(_scenario_figures(cluster, counts["fetch_per_broker"]))
    cluster_wide = {"brokers": len(cluster.brokers), "crashes": cluster.crashes,
                    "restarts": cluster.restarts, "faults_injected": faults.applied}
    lags = np.concatenate(sampler.lag_samples) if sampler.lag_samples else np.zeros(0, np.int64)
    leadership = [((at - start) / 1000.0, e, u, o)
                  for at, e, u, o in cluster.leadership_events if at >= start]
    losses = []
    for ev in checker.loss_events:
        ev = dict(ev)
        ev["acked_s"] = [round((t - start) / 1000.0, 3) for t in ev.pop("acked_ms")]
        ev["found_s"] = round((ev.pop("found_ms") - start) / 1000.0, 3)
        losses.append(ev)
    recoveries = []
    for r in cluster.client_view.recovery.records:
        row = r.as_dict(start)
        row["brokers"] = list(r.brokers)
        recoveries.append(row)
    timeline = list(faults.timeline) + [((at - start) / 1000.0, label) for at, label
                                        in cluster.storage_faults.timeline if at >= start]
    return RunParts(counts, cluster_wide, list(workload.producer.latencies_ms), lags,
                    {k: list(v) for k, v in sampler.series.items()}, timeline,
                    leadership, losses, recoveries)


def _scenario_figures(cluster: Cluster, fetch_per_broker: Mapping[str, Mapping[str, int]]
                      ) -> dict[str, Any]:
    """Figures of the features a scenario may be about, each present only when it applies (so
    a run that uses none of them keeps its summary): ``requests_refused`` (by API and Kafka
    error: KIP-380's fenced controller requests, KIP-903's INELIGIBLE_REPLICA and follower
    fetches of a previous broker incarnation), ``elr`` (with
    eligible.leader.replicas.enable: leaders elected from the ELR, unclean shutdowns that
    removed a broker from an ISR or ELR), ``retention`` (segments deleted, follower fetches
    answered OFFSET_OUT_OF_RANGE) and ``rack_placement`` (with racks: partitions by the number
    of racks their replicas span)."""
    out: dict[str, Any] = {}
    refused = {api: dict(sorted(errors.items())) for api, errors
               in sorted(cluster.requests_refused.items())}
    stale = sum(int(m.get("StaleReplicaEpochFetches", 0)) for m in fetch_per_broker.values())
    if stale:  # KIP-903: answered NOT_LEADER_OR_FOLLOWER, the follower's position untouched
        refused["Fetch"] = {"stale replica epoch": stale}
    if refused:
        out["requests_refused"] = refused
    ctrl = cluster.controller
    if ctrl.elr_enabled:
        out["elr"] = {"elections": ctrl.stats.elr_elections,
                      "unclean_shutdowns": ctrl.stats.unclean_shutdowns}
    if cluster.retention_segments_deleted or cluster.follower_out_of_range:
        out["retention"] = {"segments_deleted": cluster.retention_segments_deleted,
                            "follower_fetches_out_of_range": cluster.follower_out_of_range}
    if cluster.racks:
        spans: dict[str, int] = {}
        for reg in ctrl.partitions.values():
            n = str(len({cluster.racks.get(b) for b in reg.replicas}))
            spans[n] = spans.get(n, 0) + 1
        out["rack_placement"] = {"partitions_by_racks_spanned": dict(sorted(spans.items()))}
    return out


def _add(a: Any, b: Any) -> Any:
    """Counts added key by key (a key one side lacks counts as zero there)."""
    if isinstance(a, dict) or isinstance(b, dict):
        a = a if isinstance(a, dict) else {}
        b = b if isinstance(b, dict) else {}
        return {k: _add(a.get(k, 0), b.get(k, 0)) for k in sorted(set(a) | set(b))}
    return a + b


SUMMED_SERIES = ("under_replicated", "offline", "unavailable", "under_min_isr", "elections",
                 "unclean_elections", "acked_records", "lost_acked_records", "_isr_sum",
                 "_online", "_lag_sum", "_lag_n")


EPISODE_SAME = ("partitions", "rack_placement")
"""Counts every episode of a horizon has alike (the same cluster's partitions)."""
EPISODE_LAST = ("offline_partitions_at_end", "unavailable_partitions_at_end")
"""Counts of the end of a run: the last episode's."""


def merge_parts(scenario: Scenario, parts: Sequence[RunParts], *, sequential: bool = False
                ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The summary and time series of a run from its parts (one part, or one per lane, in any
    order): counts add up, broker-level figures are shared, distributions come from the pooled
    samples — so a sharded run merges to exactly what one process computes.

    ``sequential``: the parts are episodes one after another (their times already on the
    horizon's clock, in order): broker-level figures, recovery rows and time series are
    concatenated, and rates per second are over the simulated episodes."""
    if not parts:
        raise ValueError("nothing to merge")
    counts: dict[str, Any] = {}
    for p in parts:
        counts = _add(counts, p.counts) if counts else dict(p.counts)
    if sequential:  # one cluster's partitions, one after another: not summed
        for key in EPISODE_SAME:
            if key in parts[0].counts:
                counts[key] = parts[0].counts[key]
        for key in EPISODE_LAST:
            counts[key] = parts[-1].counts[key]
        for b, row in counts["fetch_per_broker"].items():
            row["NumIncrementalFetchSessions"] = \
                parts[-1].counts["fetch_per_broker"].get(b, {}).get("NumIncrementalFetchSessions", 0)
    combine = sum if sequential else max
    wide = {k: combine(p.cluster_wide[k] for p in parts) for k in parts[0].cluster_wide}
    if sequential:
        wide["brokers"] = parts[0].cluster_wide["brokers"]
    latencies = np.concatenate([np.asarray(p.latencies_ms, dtype=np.float64) for p in parts])
    lags = np.concatenate([np.asarray(p.lags, dtype=np.int64) for p in parts])
    duration = scenario.simulated_s
    measured = sum(p.length_ms for p in parts) / 1000.0 if sequential else duration
    by_cause = {c: ms / 1000.0 for c, ms in counts.pop("unavailable_ms_by_cause").items()}
    leader_s = sum(v for c, v in by_cause.items() if c != "under_min_isr")
    by_acks = {"all": leader_s + by_cause["under_min_isr"], "1": leader_s}
    origins = counts.pop("isr_changes_by_origin")
    summary: dict[str, Any] = {
        "scenario_name": scenario.name,
        "seed": scenario.seed,
        "truncation": scenario.truncation,
        "storage": scenario.storage,
        "brokers": wide["brokers"],
        "partitions": counts.pop("partitions"),
        "sim_seconds": duration,
        "config": config_section(scenario),
        "offline_partition_seconds": counts.pop("offline_ms") / 1000.0,
        "under_min_isr_partition_seconds": counts.pop("under_min_isr_ms") / 1000.0,
        "under_replicated_partition_seconds": counts.pop("under_replicated_ms") / 1000.0,
        "unavailable_partition_seconds": by_acks["all" if scenario.acks == -1 else "1"],
        "unavailable_partition_seconds_by_cause": by_cause,
        "unavailable_partition_seconds_by_acks": by_acks,
        "isr_shrinks": sum(v["shrink"] for v in origins.values()),
        "isr_expands": sum(v["expand"] for v in origins.values()),
        "isr_changes_by_origin": origins,
        "produce_latency_ms": report.distribution(latencies),
        "replication_lag_records": report.distribution(lags),
        "crashes": wide["crashes"],
        "restarts": wide["restarts"],
        "faults_injected": wide["faults_injected"],
        "fault_recovery": ([row for p in parts for row in p.fault_recovery] if sequential
                           else _merge_recovery(parts)),
        "fetch_path": fetch_path(counts.pop("fetch_per_broker"), measured),
    }
    losses = sorted((ev for p in parts for ev in p.loss_events),
                    key=lambda e: (e["found_s"], e["tp"], e["first_offset"]))
    summary["loss_events"] = losses[:LOSS_EVENTS_KEPT]
    summary["loss_events_not_listed"] = max(0, len(losses) - LOSS_EVENTS_KEPT)
    summary.update(counts)
    if scenario.fetcher_lanes:
        summary["fetcher_lanes"] = len(parts)
    summary["verdict"] = verdict(summary)
    return summary, _merge_series(parts, latencies, sequential)


def _merge_recovery(parts: Sequence[RunParts]) -> list[dict[str, Any]]:
    """Every lane injects the same faults in the same order; a clock of the cluster stops
    when it stops in the last lane (None only if it stopped in none)."""
    out = []
    for rows in zip(*(p.fault_recovery for p in parts), strict=True):
        merged = dict(rows[0])
        for key in ("detected_after_s", "leaders_after_s", "writable_after_s",
                    "isr_full_after_s"):
            values = [r[key] for r in rows if r[key] is not None]
            merged[key] = max(values) if values else None
        out.append(merged)
    return out


FETCH_FIGURES = (
    # (summary name, Kafka meters summed)
    ("follower_fetch_requests", ("FetchRequestsPerSec.follower",)),
    ("consumer_fetch_requests", ("FetchRequestsPerSec.consumer",)),
    ("full_fetches", ("FullFetches",)),
    ("incremental_fetches", ("IncrementalFetches",)),
    ("sessionless_fetches", ("SessionlessFetches",)),
    ("fetch_session_errors", ("FetchSessionErrors",)),
    ("session_evictions", ("IncrementalFetchSessionEvictionsPerSec",)),
    ("delayed_fetches_expired", ("FetchExpiresPerSec.follower", "FetchExpiresPerSec.consumer")),
)


def fetch_path(per_broker: Mapping[str, Mapping[str, int]], duration_s: float
               ) -> dict[str, Any]:
    """The fetch-path figures of Kafka's broker metrics, per broker (leader side, summed over
    the broker's restarts) and in total: fetch requests (and per second), full vs
    incremental vs sessionless fetches (KIP-227 ``FullFetches``/``IncrementalFetches``),
    session errors and evictions, delayed fetches completed before their wait ran out vs
    expired (``DelayedFetchCompletions`` − ``FetchExpiresPerSec``, and the latter), and the
    incremental sessions cached at the end (``NumIncrementalFetchSessions``)."""
    rows: dict[str, dict[str, Any]] = {}
    for b in sorted(per_broker, key=int):
        m = per_broker[b]
        row: dict[str, Any] = {name: sum(int(m.get(k, 0)) for k in keys)
                               for name, keys in FETCH_FIGURES}
        completions = int(m.get("DelayedFetchCompletions.follower", 0)) + \
            int(m.get("DelayedFetchCompletions.consumer", 0))
        row["delayed_fetches_completed"] = completions - row["delayed_fetches_expired"]
        row["incremental_fetch_sessions_at_end"] = int(m.get("NumIncrementalFetchSessions", 0))
        row["follower_fetch_requests_per_s"] = (row["follower_fetch_requests"] / duration_s
                                                if duration_s > 0 else 0.0)
        rows[b] = row
    total: dict[str, Any] = {}
    for row in rows.values():
        for k, v in row.items():
            total[k] = total.get(k, 0) + v
    return {"per_broker": rows, "total": total}


INVARIANTS = (
    ("hw_le_leo", "HW ≤ LEO on every replica", "hw"),
    ("leader_hw_monotonic", "a leader's HW never decreases in its epoch", "leader_hw"),
    ("offsets_increase", "offsets strictly increase in every log", "offsets"),
    ("isr_agree_below_hw", "ISR replicas agree batch by batch below the HW", "isr_agreement"),
    ("no_acked_record_lost", "no acknowledged record is lost", "durability"),
)


def verdict(summary: Mapping[str, Any]) -> dict[str, Any]:
    """Each invariant with PASS or FAIL and how often it was checked, and a one-line verdict.

    A run that breaks an invariant the checker treats as a bug stops with an
    InvariantViolation; the invariants that can fail in a finished run are divergence and
    loss — counted when the scenario models the conditions that explain them (an unclean
    election, power failures, acks=1, pre-KIP-101 truncation). Losses no cause explains
    (``unexplained``) are named in the line; they fail the run (:func:`unexplained_losses`)."""
    checks = summary.get("invariant_checks", {})
    lost = int(summary.get("lost_acked_records", 0))
    diverged = int(summary.get("diverged_partitions", 0))
    causes = {k: v for k, v in summary.get("lost_acked_records_by_cause", {}).items() if v}
    rows = []
    for name, text, key in INVARIANTS:
        failed = 0
        detail = ""
        if name == "isr_agree_below_hw" and diverged:
            failed = diverged
            detail = f"{diverged:,} partition{'s' if diverged != 1 else ''} diverged"
            storage = summary.get("storage_faults") or {}
            if storage.get("fsyncs_lost") or storage.get("bit_flips"):
                detail += " (after injected lost fsyncs or bit flips)"
        if name == "no_acked_record_lost" and lost:
            failed = lost
            detail = f"{lost:,} records lost: " + ", ".join(
                f"{c.replace('_', ' ')} {n:,}" for c, n in sorted(causes.items()))
        rows.append({"name": name, "description": text, "status": "FAIL" if failed else "PASS",
                     "checks": int(checks.get(key, 0)), "failures": failed, "detail": detail})
    ok = all(r["status"] == "PASS" for r in rows)
    acked = int(summary.get("acked_records", 0))
    if ok:
        line = (f"PASS: {len(rows)}/{len(rows)} invariants held; {acked:,} acknowledged "
                f"records, none lost")
    else:
        failed_rows = [r for r in rows if r["status"] == "FAIL"]
        line = "FAIL: " + "; ".join(r["detail"] for r in failed_rows) + \
            f" ({len(rows) - len(failed_rows)}/{len(rows)} invariants held)"
        if causes and set(causes) <= {"unclean_election", "power_failure", "acks_1",
                                      "high_watermark_truncation", "stale_replica_rejoined"}:
            line += "; every loss is explained by the configuration or the faults"
        elif causes.get("unexplained"):
            line += (f"; {causes['unexplained']:,} lost records match no fault's pattern "
                     f"(unexplained: a bug)")
    return {"ok": ok, "line": line, "invariants": rows}


def unexplained_losses(summary: Mapping[str, Any]) -> int:
    """Acknowledged records lost that no cause explains: a run with any has failed (the
    command's exit status says so), even when the checker only counted them."""
    return int(summary.get("lost_acked_records_by_cause", {}).get("unexplained", 0))


def _merge_series(parts: Sequence[RunParts], latencies: np.ndarray, sequential: bool = False
                  ) -> dict[str, Any]:
    """Lanes: one clock, values summed sample by sample; episodes (``sequential``): the
    samples one after another."""
    out: dict[str, Any] = {}
    if sequential:
        for key in ("t", *SUMMED_SERIES, "max_lag"):
            out[key] = [v for p in parts for v in p.series[key]]
    else:
        out["t"] = list(parts[0].series["t"])
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
    timeline = ([e for p in parts for e in p.fault_timeline] if sequential
                else list(parts[0].fault_timeline))
    for t, (elected, unclean, offline) in events.items():
        timeline.append((t, report.leadership_label(elected, unclean, offline)))
    out["fault_events"] = [[t, label] for t, label in sorted(timeline, key=lambda e: e[0])]
    out["leadership"] = [[t, e, u, o] for t, (e, u, o) in sorted(events.items())]
    return out


def run_title(summary: Mapping[str, Any]) -> str:
    """What distinguishes this run from the scenario as written: its overrides."""
    overrides = summary.get("config", {}).get("overrides") or {}
    return ", ".join(f"{k}={v}" for k, v in sorted(overrides.items()))


CSV_SERIES = ("t", "unavailable", "offline", "under_replicated", "under_min_isr",
              "mean_isr_size", "max_lag", "mean_lag", "elections", "unclean_elections",
              "acked_records", "lost_acked_records")
"""The columns of ``timeseries.csv``, in order."""


def timeseries_csv(timeseries: Mapping[str, Any]) -> str:
    """The sampled series as CSV (one row per sample, ``t`` in simulated seconds), for
    plotting elsewhere."""
    cols = [c for c in CSV_SERIES if c in timeseries]
    lines = [",".join(cols)]
    for row in zip(*(timeseries[c] for c in cols), strict=True):
        lines.append(",".join(f"{v:.6g}" if isinstance(v, float) else str(v) for v in row))
    return "\n".join(lines) + "\n"


def write_outputs(out_dir: str | Path, summary: dict[str, Any], timeseries: dict[str, Any],
                  run_info: dict[str, Any]) -> dict[str, Path]:
    """Write ``summary.json``, ``run.json``, ``report.html`` and ``timeseries.csv`` into
    ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"summary": out / "summary.json", "run": out / "run.json",
             "report": out / "report.html", "timeseries": out / "timeseries.csv"}
    report.write_json(paths["summary"], summary)
    report.write_json(paths["run"], run_info)
    events = [(float(t), str(label)) for t, label in timeseries.get("fault_events", [])]
    series = {k: v for k, v in timeseries.items()
              if k not in ("produce_latency_samples", "fault_events")}
    page = report.render_html(summary, series,
                              latencies_ms=timeseries.get("produce_latency_samples", []),
                              events=events, title_suffix=run_title(summary))
    paths["report"].write_text(page, encoding="utf-8")
    paths["timeseries"].write_text(timeseries_csv(series), encoding="utf-8")
    return paths


__all__ = ["SUMMARY_KEYS", "Progress", "RunParts", "Sampler", "build_cluster", "config_section",
           "fetch_path", "merge_parts", "run_info", "run_scenario", "simulate",
           "timeseries_csv", "unexplained_losses", "verdict", "write_outputs"]
