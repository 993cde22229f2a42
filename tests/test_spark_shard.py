"""One cluster sharded over Spark tasks by fetcher lane: the merged summary equals the
single-process run for every shard count, and a retried task changes nothing."""
import shutil

import pytest

pytest.importorskip("pyspark")
if shutil.which("java") is None:  # pragma: no cover - CI has Java 17
    pytest.fail("PySpark needs a JVM (java on PATH)")

from replica_core import spark as rc_spark  # noqa: E402
from replica_core.sim import lanes  # noqa: E402
from replica_core.sim.report import dumps_canonical  # noqa: E402
from replica_core.sim.run import merge_parts, run_scenario  # noqa: E402
from replica_core.sim.scenario import from_dict  # noqa: E402

pytestmark = pytest.mark.spark

DOC = {
    "name": "sharded", "seed": 21, "duration_s": 10, "fetcher_lanes": True,
    "cluster": {"brokers": 4},
    "configs": {"num.replica.fetchers": 4, "min.insync.replicas": 2,
                "broker.session.timeout.ms": 4000},
    "topics": [{"name": "events", "partitions": 40, "replication_factor": 3}],
    "workload": {"batches_per_second": 1.0, "records_per_batch": 5, "record_bytes": 50},
    "faults": [{"at_s": 2, "kind": "crash", "broker": 1, "mode": "process"},
               {"at_s": 6, "kind": "restart", "broker": 1}],
    "fault_rates": {"slowdowns_per_broker_hour": 300.0, "mean_slow_s": 2.0},
}


@pytest.fixture(scope="module")
def session():
    s = rc_spark._session("local[2,3]", "replica-core-shard-tests", cores=2)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def scenario():
    return from_dict(DOC)


@pytest.fixture(scope="module")
def single(scenario):
    summary, _series, _info = run_scenario(scenario)
    return dumps_canonical(summary)


@pytest.mark.parametrize("shards", [1, 2, 4])
def test_sharded_summary_equals_single_process(session, scenario, single, shards, tmp_path):
    summary, series, info = rc_spark.run_sharded(scenario, shards=shards, spark=session,
                                                 out_dir=tmp_path)
    assert dumps_canonical(summary) == single
    assert info["shards"] == shards
    assert (tmp_path / "summary.json").read_text() == single
    assert "<svg" in (tmp_path / "report.html").read_text()
    assert summary["partitions"] == 40 and summary["acked_records"] > 0


def test_retried_lane_task_gives_the_same_summary(session, scenario, single):
    """A task failing on its first attempt is retried by Spark; the merge is unchanged."""
    body = rc_spark._lane_task(scenario)

    def flaky(it):
        from pyspark import TaskContext

        if TaskContext.get().attemptNumber() == 0:
            raise RuntimeError("simulated executor loss")
        return body(it)

    n = lanes.lane_count(scenario)
    done = dict(session.sparkContext.parallelize(list(range(n)), 2).mapPartitions(flaky)
                .collect())
    merged, _ = merge_parts(scenario, [done[k] for k in range(n)])
    assert dumps_canonical(merged) == single


def test_sharding_needs_lanes(session):
    with pytest.raises(ValueError, match="fetcher_lanes"):
        rc_spark.run_sharded(from_dict({**DOC, "fetcher_lanes": False}), spark=session)
