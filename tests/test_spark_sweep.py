"""Sweeps on Spark (local[2] with task retries): rows equal the in-process runs, retries and re-slicing change
nothing, results are written as Parquet with a summary."""
import json
import shutil

import pytest

pytest.importorskip("pyspark")
if shutil.which("java") is None:  # pragma: no cover - CI has Java 17
    pytest.fail("PySpark needs a JVM (java on PATH)")

from replica_core import spark as rc_spark  # noqa: E402
from replica_core.sweep import grid_from_dict  # noqa: E402

pytestmark = pytest.mark.spark

GRID = {
    "scenario": "default", "seeds": 2, "base_seed": 3,
    "set": {"duration_s": 8, "topics.0.partitions": 12, "cluster.brokers": 3,
            "fault_rates.crashes_per_broker_hour": 400.0, "fault_rates.mean_downtime_s": 3.0},
    "axes": {"min.insync.replicas": [1, 2]},
}


@pytest.fixture(scope="module")
def session():
    s = rc_spark._session("local[2,3]", "replica-core-tests", cores=2)  # 3 attempts per task
    yield s
    s.stop()


@pytest.fixture(scope="module")
def grid():
    return grid_from_dict(GRID)


@pytest.fixture(scope="module")
def local_rows(grid):
    return [rc_spark.run_row(r) for r in grid.rows()]


def test_sweep_rows_equal_in_process_runs(session, grid, local_rows, tmp_path):
    results = rc_spark.run_sweep(grid, spark=session, out_dir=tmp_path)
    assert [r["row_id"] for r in results] == list(range(4))
    assert results == local_rows
    assert (tmp_path / "results.parquet").is_dir()
    back = session.read.parquet(str(tmp_path / "results.parquet")).count()
    assert back == 4
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert len(summary["configs"]) == 2 and summary["rows"] == 4
    assert [c["label"] for c in summary["configs"]] == ["min ISR=1", "min ISR=2"]
    assert "| min ISR=1 | 2 |" in (tmp_path / "summary.md").read_text()
    assert "<svg" in (tmp_path / "tradeoff.svg").read_text()
    assert all(r["acked_records"] > 0 for r in results)
    # typed columns: numbers are numbers, the axis is an integer column
    df = session.read.parquet(str(tmp_path / "results.parquet"))
    types = dict(df.dtypes)
    assert types["cfg_min_insync_replicas"] == "bigint" and types["acked_records"] == "bigint"
    assert types["unavailable_partition_seconds"] == "double"
    # the time series of every run, in Parquet and CSV
    series = session.read.parquet(str(tmp_path / "timeseries.parquet"))
    assert series.select("row_id").distinct().count() == 4
    lines = (tmp_path / "timeseries.csv").read_text().splitlines()
    assert lines[0].startswith("row_id,config_id,seed_index,t,") and len(lines) == 1 + 4 * 9


def test_reslicing_gives_identical_rows(session, grid, local_rows):
    assert rc_spark.run_sweep(grid, spark=session, slices=1) == local_rows
    assert rc_spark.run_sweep(grid, spark=session, slices=4) == local_rows


def test_retried_task_gives_identical_rows(session, grid, local_rows):
    """A task that fails on its first attempt is retried by Spark and yields the same rows."""
    rows = grid.rows()

    def flaky(it):
        from pyspark import TaskContext

        if TaskContext.get().attemptNumber() == 0:
            raise RuntimeError("simulated executor loss")
        return rc_spark.run_rows(it)

    sc = session.sparkContext
    out = sorted(sc.parallelize(rows, 2).mapPartitions(flaky).collect(),
                 key=lambda r: r["row_id"])
    assert out == local_rows
