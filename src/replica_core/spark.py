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

import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from replica_core.sweep import (
    ROW_METRICS,
    SERIES_COLUMNS,
    Grid,
    SweepRow,
    axis_column,
    axis_type,
    flatten,
    series_rows,
    summarise,
    tradeoff_svg,
    write_series_csv,
    write_summary,
)


def run_row(row: SweepRow) -> dict[str, Any]:
    """Simulate one row; its typed result (:func:`replica_core.sweep.flatten`)."""
    return run_row_with_series(row)[0]


def run_row_with_series(row: SweepRow) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Simulate one row; its typed result and its time series (long format)."""
    import gc

    from replica_core.sim.run import run_scenario

    summary, timeseries, _info = run_scenario(row.scenario())
    out = flatten(row, summary), series_rows(row, timeseries)
    del summary, timeseries
    # A finished cluster is millions of objects in reference cycles that the cyclic collector
    # reaches only on a full collection: without one, a task running row after row grows by
    # the size of a cluster per row (measured: ~80 MB per 300-partition run).
    gc.collect()
    return out


def run_rows(rows: Iterable[SweepRow]) -> Iterator[dict[str, Any]]:
    """The ``mapPartitions`` body: simulate each row of the partition in turn."""
    for row in rows:
        yield run_row(row)


def run_rows_with_series(rows: Iterable[SweepRow]
                         ) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """As :func:`run_rows`, each result with its time series."""
    for row in rows:
        yield run_row_with_series(row)


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


_SPARK_TYPES = {"bool": "BooleanType", "int": "LongType", "float": "DoubleType",
               "str": "StringType"}


def result_schema(grid: Grid):
    """The typed schema of the result rows: ids, the configuration (label, fingerprint, each
    axis in a column of its own type, all axes as JSON), then every figure."""
    from pyspark.sql import types as T

    def typ(kind: str):
        return getattr(T, _SPARK_TYPES[kind])()

    fields = [T.StructField("row_id", T.LongType(), False),
              T.StructField("config_id", T.LongType(), False),
              T.StructField("seed_index", T.LongType(), False),
              T.StructField("seed", T.LongType(), False),
              T.StructField("config_label", T.StringType(), False),
              T.StructField("config_fingerprint", T.StringType(), False),
              T.StructField("axes", T.StringType(), False)]
    fields += [T.StructField(axis_column(k), typ(axis_type(grid.axes[k], k)), True)
               for k in sorted(grid.axes)]
    fields += [T.StructField(k, typ(kind), True) for k, kind in ROW_METRICS]
    return T.StructType(fields)


def series_schema():
    from pyspark.sql import types as T

    return T.StructType([T.StructField("row_id", T.LongType(), False),
                         T.StructField("config_id", T.LongType(), False),
                         T.StructField("seed_index", T.LongType(), False)]
                        + [T.StructField(c, T.DoubleType(), True) for c in SERIES_COLUMNS])


def run_sweep(grid: Grid, *, master: str | None = None, out_dir: str | Path | None = None,
              slices: int | None = None, spark=None) -> list[dict[str, Any]]:
    """Run every row of ``grid`` on Spark; returns the result rows sorted by ``row_id`` and,
    with ``out_dir``, writes ``results.parquet`` and ``timeseries.parquet`` (typed columns),
    ``timeseries.csv``, and the summary (:func:`replica_core.sweep.write_summary`)."""
    rows = grid.rows()
    own = spark is None
    spark = spark or _session(master, "replica-core-sweep")
    started = time.perf_counter()
    series: list[dict[str, Any]] = []
    try:
        sc = spark.sparkContext
        n = slices or min(len(rows), max(1, sc.defaultParallelism * 2))
        done = sc.parallelize(rows, n).mapPartitions(run_rows_with_series)
        if out_dir is not None:
            done = done.cache()
        schema = result_schema(grid)
        names = schema.fieldNames()
        df = spark.createDataFrame(done.map(lambda r: tuple(r[0].get(k) for k in names)),
                                   schema)
        if out_dir is not None:
            Path(out_dir).mkdir(parents=True, exist_ok=True)
            df.write.mode("overwrite").parquet(str(Path(out_dir) / "results.parquet"))
            s_schema = series_schema()
            s_names = s_schema.fieldNames()
            sdf = spark.createDataFrame(
                done.flatMap(lambda r: [tuple(x.get(k) for k in s_names) for x in r[1]]),
                s_schema)
            sdf.write.mode("overwrite").parquet(str(Path(out_dir) / "timeseries.parquet"))
            series = [r.asDict() for r in sdf.collect()]
        results = sorted((r.asDict() for r in df.collect()), key=lambda r: r["row_id"])
    finally:
        if own:
            spark.stop()
    if out_dir is not None:
        write_series_csv(Path(out_dir) / "timeseries.csv", series)
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


__all__ = ["flatten", "result_schema", "run_row", "run_row_with_series", "run_rows",
           "run_rows_with_series", "run_sharded", "run_sweep", "series_schema", "summarise",
           "tradeoff_svg", "write_summary"]
