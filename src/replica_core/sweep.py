"""Configuration sweeps: a grid of Kafka configs × seeds, expanded into independent rows.

```toml
description = "What do min.insync.replicas and unclean election buy when leaders crash?"
scenario = "default"        # an embedded example name or a path to a scenario TOML
seeds = 3                   # runs per configuration
base_seed = 1

[set]                       # overrides applied to every row (same keys as --set)
duration_s = 30
"topics.0.partitions" = 300

[axes]                      # the grid: every combination of these values
"min.insync.replicas" = [1, 2]
"unclean.leader.election.enable" = [false, true]
"fault_rates.crashes_per_broker_hour" = [0.0, 20.0]

tradeoff = { x = "unavailable_partition_seconds", y = "lost_acked_records" }   # the chart
columns = ["lost_acked_records", "unavailable_partition_seconds"]   # summary.md's figures
risk = { p_loss_half_width = 0.05, per_year_relative_half_width = 0.25 }   # seeds to size for
```

Figures (``tradeoff``, ``columns``) are names of :data:`ROW_METRICS`.

Seeds come from the grid, never from where a row runs: row seed = ``SeedSequence(base_seed,
spawn_key=(seed_index,))``. Every configuration sees the same seeds (common random numbers), so
differences between configurations are not noise between seeds; a retried or re-partitioned task
recomputes exactly the same rows.

Results: :func:`flatten` turns a run's summary into one typed row (numbers as numbers, each axis
in its own typed column, the configuration named by the settings that differ between
configurations); :func:`summarise` gives per configuration the mean of every figure with a 95 %
interval across seeds (Student's t) and, for the probability that a run loses any acknowledged
record, a Wilson score interval, and the risk estimate (:mod:`replica_core.risk`: P(any loss),
records lost and unavailability per simulated year, loss sizes, the seeds a narrower interval
needs); :func:`paired` compares every two configurations seed by seed;
:func:`write_summary` writes ``summary.md``, ``summary.json``, ``summary.html`` and the charts
``tradeoff.svg`` and ``p_loss.svg``.
"""
from __future__ import annotations

import html
import itertools
import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from replica_core.errors import InvalidConfigurationError
from replica_core.sim import scenario as scenario_mod


@dataclass(frozen=True)
class SweepRow:
    """One simulation to run: the scenario document, its overrides and its seed."""

    row_id: int
    config_id: int
    seed_index: int
    seed: int
    overrides: dict[str, Any]
    axes: dict[str, Any]
    scenario_doc: dict[str, Any] = field(repr=False, default_factory=dict)
    label: str = ""
    """The configuration named by the settings that differ between configurations."""
    axis_kinds: dict[str, str] = field(default_factory=dict)
    """Each axis's column type (:func:`axis_type`)."""

    def scenario(self) -> scenario_mod.Scenario:
        return scenario_mod.from_dict(self.scenario_doc, {**self.overrides, "seed": self.seed})


@dataclass(frozen=True)
class Grid:
    scenario_doc: dict[str, Any]
    axes: dict[str, list[Any]]
    fixed: dict[str, Any]
    seeds: int
    base_seed: int
    source: str = ""
    description: str = ""
    """The question the grid answers."""
    tradeoff: tuple[str, str] = ("unavailable_partition_seconds", "lost_acked_records")
    """The figures on the x and y axes of ``tradeoff.svg``."""
    columns: tuple[str, ...] = ()
    """The figures of ``summary.md`` (default :data:`SUMMARY_COLUMNS`)."""
    risk: dict[str, float] = field(default_factory=lambda: dict(RISK_DEFAULTS))
    """The interval widths the risk estimate sizes the seeds for (:data:`RISK_DEFAULTS`)."""

    @property
    def n_configs(self) -> int:
        n = 1
        for values in self.axes.values():
            n *= len(values)
        return n

    def rows(self) -> list[SweepRow]:
        keys = list(self.axes)
        combos = list(itertools.product(*(self.axes[k] for k in keys))) if keys else [()]
        seeds = [row_seed(self.base_seed, i) for i in range(self.seeds)]
        kinds = {k: axis_type(v, k) for k, v in self.axes.items()}
        varying = [k for k in keys if len(self.axes[k]) > 1]
        out = []
        for config_id, combo in enumerate(combos):
            axes = dict(zip(keys, combo, strict=True))
            label = ", ".join(f"{short_name(k, self.scenario_doc)}={_show(axes[k])}"
                              for k in varying) or "base"
            for seed_index, seed in enumerate(seeds):
                out.append(SweepRow(
                    row_id=config_id * self.seeds + seed_index, config_id=config_id,
                    seed_index=seed_index, seed=seed, overrides={**self.fixed, **axes},
                    axes=axes, scenario_doc=self.scenario_doc, label=label, axis_kinds=kinds,
                ))
        return out


RISK_DEFAULTS = {"p_loss_half_width": 0.05, "per_year_relative_half_width": 0.25}
"""A grid's ``risk`` table: the seeds needed to narrow P(any loss) to ± ``p_loss_half_width``
and the per-year figures to ± ``per_year_relative_half_width`` of their means."""


def _risk_table(value: Any) -> dict[str, float]:
    if not isinstance(value, dict) or set(value) - set(RISK_DEFAULTS):
        raise InvalidConfigurationError(
            f"risk must be a table with keys among {sorted(RISK_DEFAULTS)}, got {value!r}")
    out = dict(RISK_DEFAULTS)
    for key, v in value.items():
        ok = isinstance(v, (int, float)) and not isinstance(v, bool)
        if not ok or not (0 < v < (0.5 if key == "p_loss_half_width" else math.inf)):
            bound = "within (0, 0.5)" if key == "p_loss_half_width" else "positive"
            raise InvalidConfigurationError(f"risk.{key} must be {bound}, got {v!r}")
        out[key] = float(v)
    return out


def row_seed(base_seed: int, seed_index: int) -> int:
    """The seed of the ``seed_index``-th run of every configuration (a 31-bit int)."""
    state = np.random.SeedSequence(int(base_seed), spawn_key=(int(seed_index),)).generate_state(1)
    return int(state[0] & 0x7FFFFFFF)


def _scenario_doc(ref: str, relative_to: Path | None) -> tuple[dict[str, Any], str]:
    candidates = []
    if relative_to is not None:
        candidates.append(relative_to / ref)
    candidates += [Path(ref), scenario_mod.examples_dir() / ref,
                   scenario_mod.examples_dir() / f"{ref}.toml"]
    for path in candidates:
        if path.is_file():
            with open(path, "rb") as fh:
                return tomllib.load(fh), str(path)
    raise InvalidConfigurationError(f"scenario {ref!r} not found (looked in {candidates})")


def load_grid(path: str | Path) -> Grid:
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            doc = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidConfigurationError(f"{path}: {exc}") from None
    return grid_from_dict(doc, relative_to=path.parent)


def grid_from_dict(doc: dict[str, Any], *, relative_to: Path | None = None) -> Grid:
    unknown = set(doc) - {"scenario", "seeds", "base_seed", "set", "axes", "description",
                          "tradeoff", "columns", "risk"}
    if unknown:
        raise InvalidConfigurationError(f"unknown grid keys: {sorted(unknown)}")
    scenario_doc, source = _scenario_doc(str(doc.get("scenario", "default")), relative_to)
    axes = {str(k): list(v) if isinstance(v, list) else [v] for k, v in doc.get("axes", {}).items()}
    if any(not v for v in axes.values()):
        raise InvalidConfigurationError("every axis needs at least one value")
    try:
        seeds = int(doc.get("seeds", 1))
    except (TypeError, ValueError):
        raise InvalidConfigurationError(f"seeds must be an integer, got {doc.get('seeds')!r}"
                                        ) from None
    if seeds < 1:
        raise InvalidConfigurationError(f"seeds must be at least 1, got {seeds}")
    base_seed = doc.get("base_seed", 1)
    if isinstance(base_seed, bool) or not isinstance(base_seed, int) or base_seed < 0:
        raise InvalidConfigurationError(
            f"base_seed must be a non-negative integer, got {base_seed!r}")
    for key, values in axes.items():
        if len({json.dumps(v) for v in values}) != len(values):
            raise InvalidConfigurationError(f"axis {key!r} repeats a value: {values}")
        axis_type(values, key)
    known = {name for name, _ in ROW_METRICS}
    trade = doc.get("tradeoff", {})
    if not isinstance(trade, dict) or set(trade) - {"x", "y"}:
        raise InvalidConfigurationError("tradeoff must be a table with x and y")
    tradeoff = (str(trade.get("x", "unavailable_partition_seconds")),
                str(trade.get("y", "lost_acked_records")))
    columns = tuple(str(c) for c in doc.get("columns", ()))
    for name in (*tradeoff, *columns):
        if name not in known:
            raise InvalidConfigurationError(f"unknown figure {name!r} (one of {sorted(known)})")
    grid = Grid(scenario_doc, axes, dict(doc.get("set", {})), seeds,
                int(doc.get("base_seed", 1)), source, str(doc.get("description", "")),
                tradeoff, columns, _risk_table(doc.get("risk", {})))
    # Validate every configuration up front: a bad value fails before any cluster time is spent.
    for row in grid.rows()[:: grid.seeds]:
        row.scenario()
    return grid


# --- result rows ----------------------------------------------------------------------------------
def axis_type(values: Sequence[Any], key: str = "axis") -> str:
    """The column type of an axis: ``bool``, ``int``, ``float`` or ``str`` (every value of the
    axis must have it; ints mix into floats)."""
    if all(isinstance(v, bool) for v in values):
        return "bool"
    if any(isinstance(v, bool) for v in values):
        raise InvalidConfigurationError(f"axis {key!r} mixes booleans with other values")
    if all(isinstance(v, int) for v in values):
        return "int"
    if all(isinstance(v, (int, float)) for v in values):
        return "float"
    if all(isinstance(v, str) for v in values):
        return "str"
    raise InvalidConfigurationError(f"axis {key!r} mixes strings with numbers: {values}")


def axis_column(key: str) -> str:
    """The result column of an axis: ``cfg_`` + the key with non-alphanumerics as ``_``."""
    return "cfg_" + "".join(c if c.isalnum() else "_" for c in key)


def _axis_value(value: Any, kind: str) -> Any:
    return float(value) if kind == "float" else value


SHORT_NAMES = {"workload.acks": "acks", "min.insync.replicas": "min ISR",
               "unclean.leader.election.enable": "unclean",
               "replica.lag.time.max.ms": "replica.lag.time.max.ms"}


def short_name(key: str, scenario_doc: Mapping[str, Any] | None = None) -> str:
    """How a setting is named in a configuration label (``faults.0.factor`` of a slow fault:
    ``slow factor``)."""
    if key in SHORT_NAMES:
        return SHORT_NAMES[key]
    head, _, attr = key.rpartition(".")
    if head.startswith("faults.") and head[7:].isdigit():
        faults = (scenario_doc or {}).get("faults", [])
        index = int(head[7:])
        kind = faults[index].get("kind") if index < len(faults) else None
        return f"{kind} {attr}" if kind else f"fault {index} {attr}"
    for prefix in ("workload.", "cluster.", "fault_rates."):
        if key.startswith(prefix):
            return key[len(prefix):]
    return key


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and value == 2**63 - 1:  # Kafka's "never" (flush.messages, flush.ms)
        return "Long.MAX_VALUE"
    return str(value)


def config_labels(grid: Grid) -> dict[int, str]:
    """Each configuration named by the settings that differ between configurations
    (``acks=all, min ISR=2, unclean=false``); ``base`` when nothing differs."""
    return {row.config_id: row.label for row in grid.rows()[:: grid.seeds]}


LOSS_CAUSES = ("unclean_election", "power_failure", "acks_1", "high_watermark_truncation",
               "stale_replica_rejoined", "unexplained")
UNAVAILABILITY_CAUSES = ("no_leader", "leader_down", "leader_unreachable", "leader_not_ready",
                         "under_min_isr")
STORAGE_FAULT_COUNTS = ("torn_writes", "torn_files", "torn_pages_kept", "torn_pages_lost",
                        "bit_flips", "bit_flips_missed", "fsyncs_lost", "lost_fsync_windows",
                        "slow_fsyncs", "slow_fsync_ms")
"""The injected storage faults of ``summary["storage_faults"]``, each a ``storage_<name>``
column."""
STORAGE_RECOVERY_COUNTS = ("bytes_truncated", "logs_with_data_lost", "segments_deleted",
                           "indexes_rebuilt")
"""What log recovery did about them (``storage_faults.recovery``): ``recovery_<name>``."""
ROW_METRICS: tuple[tuple[str, str], ...] = (
    ("acked_records", "int"), ("lost_acked_records", "int"), ("any_loss", "int"),
    *((f"lost_{c}", "int") for c in LOSS_CAUSES),
    ("diverged_partitions", "int"), ("duplicate_batches", "int"), ("reordered_batches", "int"),
    ("duplicated_records", "int"), ("reordered_records", "int"), ("producer_epoch_bumps", "int"),
    *((f"storage_{c}", "int") for c in STORAGE_FAULT_COUNTS),
    *((f"recovery_{c}", "int") for c in STORAGE_RECOVERY_COUNTS),
    ("unavailable_partition_seconds", "float"),
    *((f"unavailable_{c}_partition_seconds", "float") for c in UNAVAILABILITY_CAUSES),
    ("offline_partition_seconds", "float"), ("under_min_isr_partition_seconds", "float"),
    ("under_replicated_partition_seconds", "float"),
    ("isr_shrinks", "int"), ("isr_expands", "int"), ("isr_leader_shrinks", "int"),
    ("isr_leader_expands", "int"), ("isr_controller_removals", "int"),
    ("leader_elections", "int"), ("unclean_elections", "int"),
    ("produced_batches", "int"), ("acked_batches", "int"), ("failed_batches", "int"),
    ("producer_retries", "int"), ("producer_errors", "int"),
    ("faults_injected", "int"), ("crashes", "int"), ("power_failures", "int"),
    ("restarts", "int"),
    ("recovery_detected_s_max", "float"), ("recovery_writable_s_max", "float"),
    ("recovery_isr_full_s_max", "float"),
    ("follower_fetch_requests_per_s", "float"), ("full_fetches", "int"),
    ("incremental_fetches", "int"), ("fetch_session_evictions", "int"),
    ("delayed_fetches_completed", "int"), ("delayed_fetches_expired", "int"),
    ("produce_latency_ms_p50", "float"), ("produce_latency_ms_p99", "float"),
    ("produce_latency_ms_max", "float"), ("replication_lag_records_p50", "float"),
    ("replication_lag_records_p99", "float"), ("replication_lag_records_max", "float"),
    ("sim_seconds", "float"), ("events", "int"),
)
"""Every figure a sweep row carries, with its type (a float may be None: nothing to time)."""


def row_metrics(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The figures of one run's summary as typed values (see :data:`ROW_METRICS`)."""
    lost = summary.get("lost_acked_records_by_cause", {})
    unavailable = summary.get("unavailable_partition_seconds_by_cause", {})
    origins = summary.get("isr_changes_by_origin", {})
    fetch = summary.get("fetch_path", {}).get("total", {})
    recovery = summary.get("fault_recovery", [])

    def worst(key: str) -> float | None:
        values = [r[key] for r in recovery if r.get(key) is not None]
        return float(max(values)) if values else None

    out: dict[str, Any] = {
        "lost_acked_records": int(summary.get("lost_acked_records", 0)),
        "any_loss": int(summary.get("lost_acked_records", 0) > 0),
        "isr_leader_shrinks": int(origins.get("alter_partition", {}).get("shrink", 0)),
        "isr_leader_expands": int(origins.get("alter_partition", {}).get("expand", 0)),
        "isr_controller_removals": sum(int(v.get("shrink", 0)) for k, v in origins.items()
                                       if k != "alter_partition"),
        "producer_errors": sum(int(v) for v in summary.get("producer_errors", {}).values()),
        "power_failures": sum(1 for r in recovery
                              if r.get("kind") == "crash" and "(power)" in r.get("fault", "")),
        "recovery_detected_s_max": worst("detected_after_s"),
        "recovery_writable_s_max": worst("writable_after_s"),
        "recovery_isr_full_s_max": worst("isr_full_after_s"),
        "follower_fetch_requests_per_s": float(fetch.get("follower_fetch_requests_per_s", 0.0)),
        "full_fetches": int(fetch.get("full_fetches", 0)),
        "incremental_fetches": int(fetch.get("incremental_fetches", 0)),
        "fetch_session_evictions": int(fetch.get("session_evictions", 0)),
        "delayed_fetches_completed": int(fetch.get("delayed_fetches_completed", 0)),
        "delayed_fetches_expired": int(fetch.get("delayed_fetches_expired", 0)),
    }
    for c in LOSS_CAUSES:
        out[f"lost_{c}"] = int(lost.get(c, 0))
    storage = summary.get("storage_faults") or {}
    for c in STORAGE_FAULT_COUNTS:
        out[f"storage_{c}"] = int(storage.get(c, 0))
    for c in STORAGE_RECOVERY_COUNTS:
        out[f"recovery_{c}"] = int((storage.get("recovery") or {}).get(c, 0))
    for c in UNAVAILABILITY_CAUSES:
        out[f"unavailable_{c}_partition_seconds"] = float(unavailable.get(c, 0.0))
    for key in ("produce_latency_ms", "replication_lag_records"):
        dist = summary.get(key) or {}
        for stat in ("p50", "p99", "max"):
            out[f"{key}_{stat}"] = float(dist.get(stat, 0.0) or 0.0)
    for name, kind in ROW_METRICS:
        if name not in out:
            value = summary.get(name, 0) or 0
            out[name] = int(value) if kind == "int" else float(value)
    return {name: out[name] for name, _ in ROW_METRICS}


def flatten(row: SweepRow, summary: Mapping[str, Any]) -> dict[str, Any]:
    """One typed result row: ids, seed, the configuration (label, fingerprint, every axis in
    its own typed column, and all axes as JSON), then every figure of :data:`ROW_METRICS`."""
    out: dict[str, Any] = {"row_id": row.row_id, "config_id": row.config_id,
                           "seed_index": row.seed_index, "seed": row.seed,
                           "config_label": row.label,
                           "config_fingerprint": summary.get("config", {}).get("fingerprint", ""),
                           "axes": json.dumps(row.axes, sort_keys=True)}
    for key, value in sorted(row.axes.items()):
        kind = row.axis_kinds.get(key) or axis_type([value], key)
        out[axis_column(key)] = _axis_value(value, kind)
    out.update(row_metrics(summary))
    return out


SERIES_COLUMNS = ("t", "unavailable", "offline", "under_replicated", "under_min_isr",
                  "mean_isr_size", "max_lag", "mean_lag", "elections", "unclean_elections",
                  "acked_records", "lost_acked_records")
"""The time-series columns exported per sweep row (``t`` in simulated seconds)."""


def series_rows(row: SweepRow, series: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """One run's sampled series as long-format rows (row ids, then :data:`SERIES_COLUMNS`)."""
    cols = [c for c in SERIES_COLUMNS if c in series]
    out = []
    for values in zip(*(series[c] for c in cols), strict=True):
        r: dict[str, Any] = {"row_id": row.row_id, "config_id": row.config_id,
                             "seed_index": row.seed_index}
        for c, v in zip(cols, values, strict=True):
            r[c] = float(v)
        out.append(r)
    return out


# --- statistics -----------------------------------------------------------------------------------
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
"""Student's t, 97.5th percentile, for 1..30 degrees of freedom."""


def t975(df: int) -> float:
    """The two-sided 95 % critical value of Student's t with ``df`` degrees of freedom."""
    if df < 1:
        raise ValueError("needs at least one degree of freedom")
    if df <= 30:
        return _T975[df - 1]
    for limit, value in ((40, 2.021), (60, 2.000), (120, 1.980)):
        if df <= limit:
            return value
    return 1.960


def mean_ci95(values: Sequence[float]) -> tuple[float, float | None, float | None]:
    """Mean and a 95 % confidence interval of the mean (Student's t over the seeds); no
    interval from a single run."""
    xs = [float(v) for v in values]
    n = len(xs)
    if n == 0:
        raise ValueError("no values")
    mean = sum(xs) / n
    if n == 1:
        return mean, None, None
    var = sum((x - mean) ** 2 for x in xs) / (n - 1)
    half = t975(n - 1) * math.sqrt(var / n)
    return mean, mean - half, mean + half


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion ``k / n`` (95 % by default): unlike
    ``p ± z·√(p(1−p)/n)`` it stays inside [0, 1] and is not empty when k is 0 or n."""
    if n <= 0 or not 0 <= k <= n:
        raise ValueError(f"needs 0 ≤ k ≤ n and n > 0, got k={k}, n={n}")
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def summarise(grid: Grid, results: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per configuration: its label and axes, the number of runs, every figure of
    :data:`ROW_METRICS` as mean, 95 % interval, min and max over the seeds (timings over the
    runs that had them), P(any acknowledged record lost) with its Wilson interval, and the
    risk estimate (:func:`replica_core.risk.risk_estimate`)."""
    from replica_core.risk import risk_estimate

    labels = config_labels(grid)
    by_cfg: dict[int, list[Mapping[str, Any]]] = {}
    for r in results:
        by_cfg.setdefault(int(r["config_id"]), []).append(r)
    out = []
    for cfg, runs in sorted(by_cfg.items()):
        entry: dict[str, Any] = {"config_id": cfg, "label": labels.get(cfg, str(cfg)),
                                 "axes": json.loads(runs[0]["axes"]), "runs": len(runs),
                                 "fingerprint": runs[0].get("config_fingerprint", "")}
        metrics = {}
        for name, _kind in ROW_METRICS:
            values = [r[name] for r in runs if r.get(name) is not None]
            if not values:
                metrics[name] = {"mean": None, "ci95": None, "min": None, "max": None, "n": 0}
                continue
            mean, lo, hi = mean_ci95(values)
            metrics[name] = {"mean": mean, "ci95": None if lo is None else [lo, hi],
                             "min": min(values), "max": max(values), "n": len(values)}
        entry["metrics"] = metrics
        k = sum(1 for r in runs if r["lost_acked_records"] > 0)
        lo, hi = wilson(k, len(runs))
        entry["p_any_loss"] = {"runs_losing": k, "runs": len(runs), "p": k / len(runs),
                               "wilson95": [lo, hi]}
        entry["risk"] = risk_estimate(runs, **grid.risk)
        out.append(entry)
    return out


def paired(grid: Grid, results: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every two configurations compared over the seeds both ran
    (:func:`replica_core.risk.paired_comparison`, A = the lower config id), with their labels."""
    from replica_core.risk import paired_comparison

    labels = config_labels(grid)
    by_cfg: dict[int, list[Mapping[str, Any]]] = {}
    for r in results:
        by_cfg.setdefault(int(r["config_id"]), []).append(r)
    out = []
    for a, b in itertools.combinations(sorted(by_cfg), 2):
        seeds_a = {int(r["seed_index"]) for r in by_cfg[a]}
        if not seeds_a & {int(r["seed_index"]) for r in by_cfg[b]}:
            continue
        out.append({"a": a, "b": b, "a_label": labels.get(a, str(a)),
                    "b_label": labels.get(b, str(b)),
                    **paired_comparison(by_cfg[a], by_cfg[b])})
    return out


# --- outputs --------------------------------------------------------------------------------------
def _fmt_ci(m: Mapping[str, Any], unit: str = "") -> str:
    from replica_core.sim.report import fmt_num

    if m["mean"] is None:
        return "—"
    text = fmt_num(m["mean"], unit)
    if m["ci95"] is not None:
        lo, hi = m["ci95"]
        if m["min"] >= 0:  # a count or a duration: the interval does not go below zero
            lo = max(lo, 0.0)
        text += f" [{fmt_num(lo)}, {fmt_num(hi)}]"
    return text


METRIC_LABELS = {
    # figure: (table column, chart axis)
    "lost_acked_records": ("lost acked records", "acknowledged records lost"),
    "lost_unclean_election": ("lost: unclean election", "records lost to unclean elections"),
    "lost_power_failure": ("lost: power failure", "records lost to power failures"),
    "lost_acks_1": ("lost: acks=1", "acks=1 records lost"),
    "lost_stale_replica_rejoined": ("lost: stale replica rejoined",
                                    "records lost to stale replicas rejoining the ISR"),
    "duplicated_records": ("records read twice", "records a consumer reads twice"),
    "reordered_records": ("records out of order", "records a consumer reads out of order"),
    "producer_epoch_bumps": ("producer epoch bumps", "producer epoch bumps"),
    "unavailable_partition_seconds": ("unavailable partition-s",
                                      "partition-seconds producers could not write"),
    "offline_partition_seconds": ("offline partition-s", "partition-seconds offline"),
    "under_min_isr_partition_seconds": ("under min ISR partition-s",
                                        "partition-seconds under min ISR"),
    "under_replicated_partition_seconds": ("under-replicated partition-s",
                                           "partition-seconds under-replicated"),
    "produce_latency_ms_p99": ("p99 produce ms", "p99 produce latency (ms)"),
    "produce_latency_ms_max": ("max produce ms", "max produce latency (ms)"),
    "isr_shrinks": ("ISR shrinks", "ISR shrinks"),
    "isr_leader_shrinks": ("ISR shrinks by leaders", "ISR shrinks by leaders"),
    "unclean_elections": ("unclean elections", "unclean elections"),
    "faults_injected": ("faults", "faults injected"),
    "producer_errors": ("producer errors", "producer errors"),
}
"""How a figure is named in a table column and on a chart axis (with its unit)."""


def metric_label(name: str, *, axis: bool = False) -> str:
    default = name.replace("_", " ")
    column, chart = METRIC_LABELS.get(name, (default, default))
    return chart if axis else column


SUMMARY_COLUMNS = ("lost_acked_records", "lost_unclean_election", "lost_power_failure",
                   "lost_acks_1", "lost_stale_replica_rejoined", "duplicated_records",
                   "unavailable_partition_seconds", "offline_partition_seconds",
                   "under_min_isr_partition_seconds", "produce_latency_ms_p99",
                   "isr_shrinks", "unclean_elections", "faults_injected")
"""The figures of ``summary.md`` unless the grid names its own ``columns``."""


def summary_markdown(grid: Grid, table: Sequence[Mapping[str, Any]], rows: int,
                     pairs: Sequence[Mapping[str, Any]] | None = None) -> str:
    """``summary.md``: the question, then one line per configuration (mean [95 % interval]),
    the risk estimate per configuration (when the table has one) and the paired comparisons
    (``pairs``, :func:`paired`)."""
    from replica_core.sim.report import fmt_num

    columns = grid.columns or SUMMARY_COLUMNS
    head = ["configuration", "runs", "P(any loss) [Wilson 95 %]"] + [metric_label(c)
                                                                    for c in columns]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for e in table:
        p = e["p_any_loss"]
        cells = [e["label"], str(e["runs"]),
                 f"{p['runs_losing']}/{p['runs']} = {fmt_num(p['p'])} "
                 f"[{fmt_num(p['wilson95'][0])}, {fmt_num(p['wilson95'][1])}]"]
        cells += [_fmt_ci(e["metrics"][k]) for k in columns]
        lines.append("| " + " | ".join(cells) + " |")
    fixed = ", ".join(f"`{k}={v}`" for k, v in grid.fixed.items()) or "none"
    constant = ", ".join(f"`{k}={_show(v[0])}`" for k, v in grid.axes.items() if len(v) == 1)
    question = f"{grid.description.strip()}\n\n" if grid.description else ""
    return (
        f"# Sweep summary\n\n{question}"
        f"{rows} runs: {grid.n_configs} configurations × {grid.seeds} seeds (base seed "
        f"{grid.base_seed}; every configuration sees the same seeds). Scenario: "
        f"{grid.scenario_doc.get('name', '?')}; set for every run: {fixed}"
        + (f"; constant axes: {constant}" if constant else "") + ".\n\n"
        + "\n".join(lines) + "\n\n"
        "Each figure is the mean over the seeds with a 95 % confidence interval of the mean "
        "(Student's t) in brackets; P(any loss) is the share of runs that lost at least one "
        "acknowledged record, with a Wilson score interval. Unavailability counts the "
        "partition-seconds a producer with that configuration's acks could not write (no "
        "live reachable leader, a leader not yet known dead or not yet ready, and for "
        "acks=all an ISR below min.insync.replicas).\n"
        + risk_markdown(grid, table) + paired_markdown(pairs or (), grid))


def _fmt_interval(m: Mapping[str, Any] | None) -> str:
    """``mean [lo, hi]`` of a :func:`replica_core.risk.mean_interval`, the low end clipped at
    zero (the figures are counts and durations)."""
    if not m or m.get("mean") is None:
        return "—"
    return _fmt_ci({**m, "min": 0.0})


def _fmt_signed(m: Mapping[str, Any]) -> str:
    """A paired difference: ``mean [lo, hi]`` (not clipped: it may be negative)."""
    from replica_core.sim.report import fmt_num

    text = fmt_num(m["mean"])
    if m.get("ci95"):
        text += f" [{fmt_num(m['ci95'][0])}, {fmt_num(m['ci95'][1])}]"
    return text


def _sim_time(seconds: float) -> str:
    """Simulated time in s, min or h, whichever reads best (runs last seconds at least)."""
    from replica_core.sim.report import fmt_ms

    return fmt_ms(1000.0 * seconds)


def risk_markdown(grid: Grid, table: Sequence[Mapping[str, Any]]) -> str:
    """The ``## Risk per configuration`` section of ``summary.md`` (empty without estimates)."""
    from replica_core.sim.report import fmt_num

    entries = [e for e in table if e.get("risk")]
    if not entries:
        return ""
    h = grid.risk["p_loss_half_width"]
    rel = grid.risk["per_year_relative_half_width"]
    head = ["configuration", "runs (simulated time)", "P(run loses acked records) [Wilson 95 %]",
            "acked records lost per year [95 %]", "loss size when lost: p50 / p90 / max",
            "unavailable partition-s per year [95 %]", f"seeds for P(loss) ±{fmt_num(h)}"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    needs = []
    for e in entries:
        r = e["risk"]
        p = r["p_any_loss"]
        size = r["loss_size"]
        sizes = ("—" if not size["runs"] else
                 f"{fmt_num(size['p50'])} / {fmt_num(size['p90'])} / {fmt_num(size['max'])} "
                 f"({size['runs']} runs)")
        need = r["seeds_needed"]
        lines.append("| " + " | ".join([
            str(e["label"]), f"{r['runs']} ({_sim_time(r['sim_seconds'])})",
            f"{p['runs_losing']}/{p['runs']} = {fmt_num(p['p'])} "
            f"[{fmt_num(p['wilson95'][0])}, {fmt_num(p['wilson95'][1])}]",
            _fmt_interval(r["lost_records_per_year"]), sizes,
            _fmt_interval(r["unavailable_partition_seconds_per_year"]),
            f"{need['p_any_loss']:,}"]) + " |")
        at = ("the observed" if 0 < p["runs_losing"] < p["runs"] else
              "the worst-case p = 0.5, since every run agreed at")
        text = (f"- **{e['label']}**: to narrow P(loss) to ±{fmt_num(h)} you need "
                f"{need['p_any_loss']:,} seeds (at {at} p = {fmt_num(p['p'])}; this grid ran "
                f"{p['runs']})")
        per = [f"{name} {need[key]:,}" for key, name in (
            ("lost_records_per_year", "records lost per year"),
            ("unavailable_partition_seconds_per_year", "unavailability per year"))
            if need[key] is not None]
        if per:
            text += (f"; to narrow to ±{fmt_num(100 * rel)} % of the mean: "
                     + ", ".join(per) + " seeds")
        needs.append((str(e["label"]), text + "."))
    advice = [t for _, t in needs]
    rest = {t.split("**: ", 1)[1] for t in advice}
    if len(advice) > 1 and len(rest) == 1:  # every configuration gets the same advice
        advice = [f"- **every configuration**: {rest.pop()}"]
    return ("\n## Risk per configuration\n\n" + "\n".join(lines) + "\n\n" + "\n".join(advice)
            + "\n\nPer-year figures are each run's totals over its simulated time (a year is "
            "8,760 h), averaged over the runs with a 95 % Student-t interval; they describe the "
            "fault rates of the grid (accelerated rates give accelerated years). Loss sizes are "
            "quantiles (linear interpolation) over the runs that lost data. Losses are counted "
            "when a live leader is found without an acknowledged record, so a run that ends "
            "with every replica of a partition down has not yet counted that partition.\n")


def paired_markdown(pairs: Sequence[Mapping[str, Any]], grid: Grid) -> str:
    """The ``## Paired comparisons`` section of ``summary.md`` (empty without pairs)."""
    from replica_core.sim.report import fmt_num

    if not pairs:
        return ""
    head = ["A", "B", "seeds", "lost acked records per run, A − B [95 %]",
            "unavailable partition-s per run, A − B [95 %]", "seeds only A lost",
            "seeds only B lost", "both lost", "McNemar exact p"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def alike(q: Mapping[str, Any]) -> bool:  # no seed told the two apart
        d = q["difference"]
        return (not q["loss_runs"]["a_only"] and not q["loss_runs"]["b_only"]
                and all(d[k]["mean"] == 0 and (not d[k].get("ci95") or d[k]["ci95"] == [0, 0])
                        for k in ("lost_acked_records", "unavailable_partition_seconds")))

    same = [q for q in pairs if alike(q)]
    if same and len(same) == len(pairs):
        return ("\n## Paired comparisons (same seeds, same faults)\n\n"
                + ("The two configurations" if len(pairs) == 1 else
                   f"All {len(pairs):,} pairs of configurations")
                + " lost as many acknowledged records "
                "and were unavailable as long on every seed: loss and unavailability do not "
                "separate them.\n")
    for q in pairs:
        if same and alike(q):
            continue
        d = q["difference"]
        c = q["loss_runs"]
        lines.append("| " + " | ".join([
            str(q["a_label"]), str(q["b_label"]), str(q["pairs"]),
            _fmt_signed(d["lost_acked_records"]), _fmt_signed(d["unavailable_partition_seconds"]),
            str(c["a_only"]), str(c["b_only"]), str(c["both"]),
            fmt_num(c["mcnemar_exact_p"])]) + " |")
    omitted = (f"\n\n{len(same):,} more pairs are left out: they lost as many records and "
               "were unavailable as long on every seed." if same else "")
    return ("\n## Paired comparisons (same seeds, same faults)\n\n" + "\n".join(lines)
            + omitted + "\n\nEvery configuration ran the same seeds, so each seed gives a pair of runs "
            "under the same fault schedule; the differences A − B are averaged over the pairs "
            "with a 95 % Student-t interval (an interval excluding 0 separates the two). The "
            "counts are the seeds where only A, only B, or both lost acknowledged records; "
            "McNemar's exact test asks whether the discordant seeds split unevenly (a small p: "
            "one configuration loses data more often).\n")


def tradeoff_svg(table: Sequence[Mapping[str, Any]], *, seeds: int | None = None,
                 x: str = "unavailable_partition_seconds", y: str = "lost_acked_records"
                 ) -> str:
    """Scatter of two figures (by default availability against durability: x =
    partition-seconds producers with the configuration's acks could not write, y =
    acknowledged records lost), one named point per configuration at the means over the
    seeds, with 95 % intervals on both axes."""
    from replica_core.sim.report import PALETTE, fmt_num, nice_ticks

    legend_w = 330
    w, h, ml, mr, mt, mb = 980, 520, 80, 30 + legend_w, 40, 60
    pts = []
    for e in table:
        mx = e["metrics"][x]
        my = e["metrics"][y]
        pts.append((e, mx, my))

    def hi(m: Mapping[str, Any]) -> float:
        return float(m["ci95"][1]) if m.get("ci95") else float(m["mean"] or 0.0)

    xt = nice_ticks(0.0, max([1.0] + [hi(mx) for _, mx, _ in pts]), 6)
    yt = nice_ticks(0.0, max([1.0] + [hi(my) for _, _, my in pts]), 6)

    def px(v: float) -> float:
        return ml + (v - xt[0]) / (xt[-1] - xt[0]) * (w - ml - mr)

    def py(v: float) -> float:
        return h - mb - (v - yt[0]) / (yt[-1] - yt[0]) * (h - mt - mb)

    n = f" over {seeds} seeds" if seeds else ""
    title = f"{metric_label(y, axis=True)} against {metric_label(x, axis=True)}"
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" '
           f'height="{h}" font-family="sans-serif" font-size="12" role="img" '
           f'aria-label="{html.escape(title)}">',
           f'<title>{html.escape(title)}</title>',
           f'<rect x="0" y="0" width="{w}" height="{h}" fill="#fff"/>']
    for v in yt:
        out.append(f'<line x1="{ml}" y1="{py(v):.1f}" x2="{w - mr}" y2="{py(v):.1f}" '
                   f'stroke="#eee"/>')
        out.append(f'<text x="{ml - 6}" y="{py(v) + 4:.1f}" text-anchor="end" fill="#444">'
                   f'{html.escape(fmt_num(v))}</text>')
    for v in xt:
        out.append(f'<line x1="{px(v):.1f}" y1="{mt}" x2="{px(v):.1f}" y2="{h - mb}" '
                   f'stroke="#eee"/>')
        out.append(f'<text x="{px(v):.1f}" y="{h - mb + 18}" text-anchor="middle" '
                   f'fill="#444">{html.escape(fmt_num(v))}</text>')
    out.append(f'<line x1="{ml}" y1="{h - mb}" x2="{w - mr}" y2="{h - mb}" stroke="#888"/>')
    out.append(f'<line x1="{ml}" y1="{mt}" x2="{ml}" y2="{h - mb}" stroke="#888"/>')
    out.append(f'<text x="{(ml + w - mr) / 2:.0f}" y="{h - 14}" text-anchor="middle">'
               f'{html.escape(metric_label(x, axis=True))}: mean{n}, 95 % CI</text>')
    out.append(f'<text transform="translate(18,{(mt + h - mb) / 2:.0f}) rotate(-90)" '
               f'text-anchor="middle">{html.escape(metric_label(y, axis=True))}: mean{n}, 95 % '
               f'CI</text>')
    # points drawn on the same spot share one label ("4, 7, 10") instead of overprinting
    spots: dict[tuple[int, int], list[int]] = {}
    for i, (_e, mx, my) in enumerate(pts):
        key = (round(px(float(mx["mean"] or 0.0))), round(py(float(my["mean"] or 0.0))))
        spots.setdefault(key, []).append(i)
    for i, (e, mx, my) in enumerate(pts):
        colour = PALETTE[i % len(PALETTE)]
        vx, vy = float(mx["mean"] or 0.0), float(my["mean"] or 0.0)
        together = spots[(round(px(vx)), round(py(vy)))]
        if mx.get("ci95"):
            lo, up = max(mx["ci95"][0], 0.0), mx["ci95"][1]
            out.append(f'<line x1="{px(lo):.1f}" y1="{py(vy):.1f}" x2="{px(up):.1f}" '
                       f'y2="{py(vy):.1f}" stroke="{colour}" stroke-width="1.5"/>')
        if my.get("ci95"):
            lo, up = max(my["ci95"][0], 0.0), my["ci95"][1]
            out.append(f'<line x1="{px(vx):.1f}" y1="{py(lo):.1f}" x2="{px(vx):.1f}" '
                       f'y2="{py(up):.1f}" stroke="{colour}" stroke-width="1.5"/>')
        label = html.escape(str(e["label"]))
        number = i + 1
        out.append(f'<circle cx="{px(vx):.1f}" cy="{py(vy):.1f}" r="5" fill="{colour}">'
                   f'<title>{number}: {label}: {html.escape(metric_label(x, axis=True))} '
                   f'{fmt_num(vx)}, {html.escape(metric_label(y, axis=True))} {fmt_num(vy)}'
                   f'</title></circle>')
        if i == together[0]:
            shared = ", ".join(str(k + 1) for k in together)
            out.append(f'<text x="{px(vx) + 7:.1f}" y="{py(vy) - 6:.1f}" fill="{colour}" '
                       f'font-weight="bold">{shared}</text>')
        # the legend names every point: number, colour, configuration, the two means
        ly = mt + 8 + 34 * i
        lx = w - legend_w + 10
        out.append(f'<circle cx="{lx}" cy="{ly - 4}" r="5" fill="{colour}"/>')
        out.append(f'<text x="{lx + 10}" y="{ly}" fill="{colour}" font-weight="bold">'
                   f'{number}</text>')
        out.append(f'<text x="{lx + 28}" y="{ly}">{label}</text>')
        out.append(f'<text x="{lx + 28}" y="{ly + 14}" fill="#666" font-size="11">'
                   f'x {html.escape(fmt_num(vx))}, y {html.escape(fmt_num(vy))}</text>')
    out.append("</svg>\n")
    return "".join(out)


def p_loss_svg(table: Sequence[Mapping[str, Any]]) -> str:
    """P(a run loses any acknowledged record) per configuration, with Wilson 95 % intervals."""
    from replica_core.sim.report import fmt_num

    w, ml, mr, mt, row_h = 900, 300, 60, 30, 26
    h = mt + row_h * max(1, len(table)) + 56

    def px(v: float) -> float:
        return ml + v * (w - ml - mr)

    bottom = h - 56
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" '
           f'height="{h}" font-family="sans-serif" font-size="12" role="img" '
           f'aria-label="probability of losing acknowledged records per configuration">',
           '<title>P(any acknowledged record lost) per configuration</title>',
           f'<rect x="0" y="0" width="{w}" height="{h}" fill="#fff"/>']
    for k in range(11):
        v = k / 10
        out.append(f'<line x1="{px(v):.1f}" y1="{mt}" x2="{px(v):.1f}" y2="{bottom}" '
                   f'stroke="#eee"/>')
        out.append(f'<text x="{px(v):.1f}" y="{bottom + 16}" text-anchor="middle" '
                   f'fill="#444">{fmt_num(100 * v)} %</text>')
    out.append(f'<text x="{(ml + w - mr) / 2:.0f}" y="{h - 12}" text-anchor="middle">'
               'share of runs losing any acknowledged record (Wilson 95 % interval)</text>')
    for i, e in enumerate(table):
        y = mt + row_h * i + row_h / 2
        p = e["p_any_loss"]
        lo, hi = p["wilson95"]
        out.append(f'<text x="{ml - 8}" y="{y + 4:.1f}" text-anchor="end">'
                   f'{html.escape(str(e["label"]))}</text>')
        out.append(f'<line x1="{px(lo):.1f}" y1="{y:.1f}" x2="{px(hi):.1f}" y2="{y:.1f}" '
                   f'stroke="#0072B2" stroke-width="2"/>')
        out.append(f'<circle cx="{px(p["p"]):.1f}" cy="{y:.1f}" r="5" fill="#0072B2">'
                   f'<title>{p["runs_losing"]}/{p["runs"]} runs lost data; 95 % interval '
                   f'{fmt_num(100 * lo)}–{fmt_num(100 * hi)} %</title></circle>')
        out.append(f'<text x="{px(hi) + 6:.1f}" y="{y + 4:.1f}" fill="#444">'
                   f'{p["runs_losing"]}/{p["runs"]}</text>')
    out.append("</svg>\n")
    return "".join(out)


def grid_title(grid: Grid) -> str:
    """The grid's question: its description up to the first ``?`` or ``:`` (or sentence)."""
    text = " ".join(grid.description.split())
    if not text:
        return "Sweep summary"
    cut = min((i for i in (text.find("?"), text.find(": "), text.find(". ")) if i >= 0),
              default=len(text) - 1)
    return text[:cut + 1].rstrip(":").strip()


def _md_table_html(block: str) -> str:
    """A markdown table of ours as HTML (an interval ``[lo, hi]`` in a cell on its own line)."""
    lines = [line for line in block.splitlines() if line.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]

    def cell(text: str) -> str:
        value, sep, interval = text.partition(" [")
        if not sep:
            return html.escape(text)
        return f"{html.escape(value)}<br><span class='muted'>[{html.escape(interval)}</span>"

    return ("<table><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in head) + "</tr>"
            + "".join("<tr>" + "".join(f"<td>{cell(c)}</td>" for c in r) + "</tr>"
                      for r in cells) + "</table>")


def _md_section_html(md: str) -> str:
    """A section of ours (``## title``, tables, ``- **a**: b`` items, paragraphs) as HTML."""
    import re

    out = []
    for block in md.strip().split("\n\n"):
        if block.startswith("## "):
            out.append(f"<h2>{html.escape(block[3:].strip())}</h2>")
        elif block.startswith("|"):
            out.append(_md_table_html(block))
        elif block.startswith("- "):
            items = [re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", html.escape(line[2:]))
                     for line in block.splitlines()]
            out.append("<ul>" + "".join(f"<li>{i}</li>" for i in items) + "</ul>")
        else:
            out.append(f"<p class='muted'>{html.escape(block)}</p>")
    return "".join(out)


def summary_html(grid: Grid, table: Sequence[Mapping[str, Any]], rows: int,
                 pairs: Sequence[Mapping[str, Any]] | None = None) -> str:
    """A self-contained page: the question, the table, both charts, the risk estimate and
    the paired comparisons."""
    from replica_core.sim.report import _CSS

    md = summary_markdown(grid, table, rows)
    blocks = md.split("\n\n")
    table_html = _md_table_html(next(b for b in blocks if b.startswith("|")))
    notes = next(b for b in blocks if b.startswith("Each figure is the mean"))
    description = " ".join(grid.description.split())
    title = grid_title(grid)
    css = _CSS.replace("max-width:960px", "max-width:1240px")
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>replica-core sweep: {html.escape(title)}</title><style>{css}</style>"
            f"</head><body><h1>Sweep: {html.escape(title)}</h1>"
            f"<p>{html.escape(description)}</p>"
            f"<p class='sub'>{rows} runs: {grid.n_configs} configurations × {grid.seeds} seeds "
            f"(base seed {grid.base_seed})</p>{table_html}"
            f"<p class='muted'>{html.escape(notes)}</p>"
            f"<h2>{html.escape(metric_label(grid.tradeoff[1], axis=True))} against "
            f"{html.escape(metric_label(grid.tradeoff[0], axis=True))}</h2>"
            f"{tradeoff_svg(table, seeds=grid.seeds, x=grid.tradeoff[0], y=grid.tradeoff[1])}"
            f"<h2>Probability of losing acknowledged data</h2>{p_loss_svg(table)}"
            f"{_md_section_html(risk_markdown(grid, table))}"
            f"{_md_section_html(paired_markdown(pairs or (), grid))}"
            "</body></html>\n")


def write_summary(grid: Grid, results: Sequence[Mapping[str, Any]], out_dir: str | Path,
                  wall_s: float | None = None) -> None:
    """``summary.json`` (per configuration: label, axes, every figure's mean and interval,
    P(any loss), the risk estimate; every pair of configurations compared), ``summary.md``, ``summary.html``, ``tradeoff.svg``, ``p_loss.svg``, and
    ``run.json`` (wall-clock seconds) when ``wall_s`` is given."""
    from replica_core.sim.report import write_json

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    table = summarise(grid, results)
    pairs = paired(grid, results)
    write_json(out / "summary.json", {
        "grid": {"description": grid.description,
                 "scenario": grid.scenario_doc.get("name", ""),
                 "axes": grid.axes, "set": grid.fixed, "seeds": grid.seeds,
                 "base_seed": grid.base_seed, "tradeoff": list(grid.tradeoff),
                 "risk": dict(grid.risk)},
        "configs": table, "paired": pairs, "rows": len(results), "seeds": grid.seeds,
        "base_seed": grid.base_seed})
    if wall_s is not None:
        (out / "run.json").write_text(json.dumps({"wall_seconds": round(wall_s, 3)}) + "\n")
    (out / "summary.md").write_text(summary_markdown(grid, table, len(results), pairs))
    (out / "tradeoff.svg").write_text(tradeoff_svg(table, seeds=grid.seeds, x=grid.tradeoff[0],
                                                   y=grid.tradeoff[1]))
    (out / "p_loss.svg").write_text(p_loss_svg(table))
    (out / "summary.html").write_text(summary_html(grid, table, len(results), pairs))


def write_series_csv(path: str | Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """The sweep's time series (long format, one line per run and sample) as CSV."""
    cols = ["row_id", "config_id", "seed_index", *SERIES_COLUMNS]
    lines = [",".join(cols)]
    for r in sorted(rows, key=lambda r: (r["row_id"], r["t"])):
        lines.append(",".join("" if r.get(c) is None else f"{r[c]:.6g}"
                              if isinstance(r.get(c), float) else str(r[c]) for c in cols))
    Path(path).write_text("\n".join(lines) + "\n")
