"""Simulation at Spark scale: configuration sweeps run row by row inside ``mapPartitions``.

Each row of a :mod:`replica_core.sweep` grid is an independent simulation; rows carry their own
seed (derived from the grid, never from the task), so a retried or re-partitioned task produces
identical rows. Results become a DataFrame, written as Parquet, plus a readable summary and an
SVG plot of the trade-off. ``master=None`` → ``local[*]`` (PySpark embedded, nothing to install).

Executors need ``replica_core`` importable: locally it already is; on a cluster ship the wheel
(``pip wheel .`` then ``spark-submit --py-files replica_core-*.whl`` does not work for compiled
code — use ``--archives`` with a packed virtualenv (``venv-pack``/``conda-pack``) and
``spark.pyspark.python``, or install the wheel on every node). See README "Spark".
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from replica_core.sweep import Grid, SweepRow

# Metrics pulled from each run's summary into flat columns (distributions → _p50/_p99/_max).
SCALAR_METRICS = (
    "acked_records", "lost_acked_records", "diverged_partitions", "offline_partition_seconds",
    "under_min_isr_partition_seconds", "isr_shrinks", "isr_expands", "leader_elections",
    "unclean_elections", "sim_seconds", "events",
)
DISTRIBUTIONS = ("produce_latency_ms", "replication_lag_records")


def axis_column(key: str) -> str:
    return "cfg_" + "".join(c if c.isalnum() else "_" for c in key)


def flatten(row: SweepRow, summary: dict[str, Any]) -> dict[str, Any]:
    """One result row: ids, seed, each axis value (as JSON text), the metrics."""
    out: dict[str, Any] = {"row_id": row.row_id, "config_id": row.config_id,
                           "seed_index": row.seed_index, "seed": row.seed,
                           "axes": json.dumps(row.axes, sort_keys=True)}
    for key, value in sorted(row.axes.items()):
        out[axis_column(key)] = json.dumps(value)
    for key in SCALAR_METRICS:
        out[key] = float(summary.get(key, 0) or 0)
    for key in DISTRIBUTIONS:
        dist = summary.get(key) or {}
        for stat in ("p50", "p99", "max"):
            out[f"{key}_{stat}"] = float(dist.get(stat, 0.0) or 0.0)
    return out


def run_row(row: SweepRow) -> dict[str, Any]:
    from replica_core.sim.run import run_scenario

    summary, _timeseries, _info = run_scenario(row.scenario())
    return flatten(row, summary)


def run_rows(rows: Iterable[SweepRow]) -> Iterator[dict[str, Any]]:
    """The ``mapPartitions`` body: simulate each row of the partition in turn."""
    for row in rows:
        yield run_row(row)


def _session(master: str | None, app_name: str, cores: int | None = None):
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", _python())
    builder = SparkSession.builder.appName(app_name)
    # Under spark-submit the master comes from its --master (the JVM gateway already exists);
    # otherwise run embedded.
    if master:
        builder = builder.master(master)
    elif "PYSPARK_GATEWAY_PORT" not in os.environ and not os.environ.get("SPARK_MASTER"):
        builder = builder.master("local[*]")
    builder = (builder.config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", str(cores or 4))
               .config("spark.task.maxFailures", "4")
               .config("spark.driver.memory", "2g"))
    return builder.getOrCreate()


def _python() -> str:
    import sys

    return sys.executable


def result_schema(grid: Grid):
    from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

    fields = [StructField("row_id", LongType(), False), StructField("config_id", LongType(), False),
              StructField("seed_index", LongType(), False), StructField("seed", LongType(), False),
              StructField("axes", StringType(), False)]
    fields += [StructField(axis_column(k), StringType(), True) for k in sorted(grid.axes)]
    fields += [StructField(k, DoubleType(), True) for k in SCALAR_METRICS]
    fields += [StructField(f"{k}_{s}", DoubleType(), True)
               for k in DISTRIBUTIONS for s in ("p50", "p99", "max")]
    return StructType(fields)


def run_sweep(grid: Grid, *, master: str | None = None, out_dir: str | Path | None = None,
              slices: int | None = None, spark=None) -> list[dict[str, Any]]:
    """Run every row of ``grid`` on Spark; returns the result rows sorted by ``row_id`` and, with
    ``out_dir``, writes ``results.parquet``, ``summary.md``, ``summary.json`` and
    ``tradeoff.svg``."""
    rows = grid.rows()
    own = spark is None
    spark = spark or _session(master, "replica-core-sweep")
    started = time.perf_counter()
    try:
        sc = spark.sparkContext
        n = slices or min(len(rows), max(1, sc.defaultParallelism * 2))
        rdd = sc.parallelize(rows, n).mapPartitions(run_rows)
        schema = result_schema(grid)
        names = schema.fieldNames()
        df = spark.createDataFrame(rdd.map(lambda r: tuple(r.get(k) for k in names)), schema)
        if out_dir is not None:
            df.cache()
            Path(out_dir).mkdir(parents=True, exist_ok=True)
            df.write.mode("overwrite").parquet(str(Path(out_dir) / "results.parquet"))
        results = sorted((r.asDict() for r in df.collect()), key=lambda r: r["row_id"])
    finally:
        if own:
            spark.stop()
    if out_dir is not None:
        write_summary(grid, results, Path(out_dir), wall_s=time.perf_counter() - started)
    return results


def _lane_task(scenario: Any):
    """The ``mapPartitions`` body of a sharded run: simulate each lane of the Spark partition."""
    def run(lanes: Iterable[int]) -> Iterator[tuple[int, Any]]:
        from replica_core.sim.lanes import run_lane

        for lane in lanes:
            yield lane, run_lane(scenario, lane)
    return run


def run_sharded(scenario: Any, *, shards: int | None = None, master: str | None = None,
                out_dir: str | Path | None = None, spark=None
                ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """One big cluster on Spark: its fetcher lanes (``num.replica.fetchers`` of them, see
    :mod:`replica_core.sim.lanes`) spread over ``shards`` tasks (default: one per lane), the
    lane results merged on the driver into the summary a single process computes for the same
    scenario and seed. Returns ``(summary, timeseries, run_info)``; with ``out_dir`` writes
    ``summary.json``, ``run.json`` and ``report.html`` as ``replica-core simulate`` does."""
    from replica_core.sim.lanes import lane_count
    from replica_core.sim.run import merge_parts, run_info, write_outputs

    if not scenario.fetcher_lanes:
        raise ValueError("a sharded run needs a scenario with fetcher_lanes = true")
    lanes = lane_count(scenario)
    n = max(1, min(lanes, shards or lanes))
    own = spark is None
    spark = spark or _session(master, "replica-core-shard")
    started = time.perf_counter()
    try:
        sc = spark.sparkContext
        done = sc.parallelize(list(range(lanes)), n).mapPartitions(_lane_task(scenario)).collect()
    finally:
        if own:
            spark.stop()
    by_lane = dict(done)
    if sorted(by_lane) != list(range(lanes)):
        raise RuntimeError(f"lanes missing from the sharded run: {sorted(set(range(lanes)) - set(by_lane))}")
    summary, series = merge_parts(scenario, [by_lane[k] for k in range(lanes)])
    info = run_info(scenario, summary, time.perf_counter() - started)
    info["shards"] = n
    if out_dir is not None:
        write_outputs(out_dir, summary, series, info)
    return summary, series, info


def summarise(grid: Grid, results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per configuration: mean over seeds of each metric, and which lost acknowledged data."""
    by_cfg: dict[int, list[dict[str, Any]]] = {}
    for r in results:
        by_cfg.setdefault(r["config_id"], []).append(r)
    out = []
    for cfg, runs in sorted(by_cfg.items()):
        entry: dict[str, Any] = {"config_id": cfg, "axes": json.loads(runs[0]["axes"]),
                                 "runs": len(runs)}
        for key in SCALAR_METRICS + tuple(f"{k}_{s}" for k in DISTRIBUTIONS
                                          for s in ("p50", "p99", "max")):
            entry[key] = sum(r[key] for r in runs) / len(runs)
        entry["runs_losing_acked_data"] = sum(1 for r in runs if r["lost_acked_records"] > 0)
        out.append(entry)
    return out


def write_summary(grid: Grid, results: list[dict[str, Any]], out_dir: Path,
                  wall_s: float | None = None) -> None:
    from replica_core.sim.report import write_json

    table = summarise(grid, results)
    write_json(out_dir / "summary.json", {"configs": table, "rows": len(results),
                                          "seeds": grid.seeds, "base_seed": grid.base_seed})
    if wall_s is not None:
        (out_dir / "run.json").write_text(json.dumps({"wall_seconds": round(wall_s, 3)}) + "\n")
    axes = sorted(grid.axes)
    head = axes + ["lost acked (mean)", "runs losing data", "offline s", "under-min-ISR s",
                   "p99 produce ms", "max lag", "unclean elections"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for e in table:
        cells = [json.dumps(e["axes"].get(a)) for a in axes] + [
            f"{e['lost_acked_records']:.1f}", f"{e['runs_losing_acked_data']}/{e['runs']}",
            f"{e['offline_partition_seconds']:.1f}", f"{e['under_min_isr_partition_seconds']:.1f}",
            f"{e['produce_latency_ms_p99']:.1f}", f"{e['replication_lag_records_max']:.0f}",
            f"{e['unclean_elections']:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    (out_dir / "summary.md").write_text(
        f"# Sweep summary\n\n{len(results)} runs, {grid.n_configs} configurations × "
        f"{grid.seeds} seeds (base seed {grid.base_seed}).\n\n" + "\n".join(lines) + "\n")
    (out_dir / "tradeoff.svg").write_text(tradeoff_svg(table))


def tradeoff_svg(table: list[dict[str, Any]]) -> str:
    """Scatter: unavailability (offline + under-min-ISR partition-seconds) against lost
    acknowledged records, one labelled point per configuration."""
    w, h, pad = 640, 400, 50
    xs = [e["offline_partition_seconds"] + e["under_min_isr_partition_seconds"] for e in table]
    ys = [e["lost_acked_records"] for e in table]
    x1, y1 = max(xs + [1e-9]), max(ys + [1e-9])
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
             f'font-family="sans-serif" font-size="10">',
             f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="#999"/>',
             f'<line x1="{pad}" y1="{h - pad}" x2="{pad}" y2="{pad}" stroke="#999"/>',
             f'<text x="{w / 2 - 120}" y="{h - 15}">unavailability (partition-seconds offline or '
             'under min ISR)</text>',
             f'<text x="5" y="{pad - 10}">lost acknowledged records (mean over seeds)</text>']
    for e, x, y in zip(table, xs, ys, strict=True):
        px = pad + x / x1 * (w - 2 * pad)
        py = h - pad - y / y1 * (h - 2 * pad)
        label = ", ".join(f"{k}={v}" for k, v in e["axes"].items())
        parts.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="4" fill="#1f77b4">'
                     f'<title>{label}</title></circle>')
        parts.append(f'<text x="{px + 6:.1f}" y="{py - 4:.1f}">{e["config_id"]}</text>')
    parts.append("</svg>\n")
    return "".join(parts)
