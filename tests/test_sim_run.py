"""Scenario runs: determinism of summary.json, the default scenario (shrunk), random faults,
the workload's batches, the example files and the ``simulate`` command line."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from replica_core.errors import InvalidConfigurationError
from replica_core.records import iter_batches, scan
from replica_core.sim import scenario as sc
from replica_core.sim.cluster import Cluster
from replica_core.sim.faults import plan_random, validate_rates
from replica_core.sim.invariants import records_digest
from replica_core.sim.report import dumps_canonical
from replica_core.sim.run import (
    CSV_SERIES,
    SUMMARY_KEYS,
    Sampler,
    run_scenario,
    simulate,
    write_outputs,
)
from replica_core.sim.workload import Workload

SMALL = {
    "topics.0.partitions": 60, "duration_s": 10, "faults.0.at_s": 3, "faults.1.at_s": 7,
    "broker.session.timeout.ms": 2000, "workload.batches_per_second": 2.0,
}


def small(**more):
    return sc.load(sc.default_scenario_path(), {**SMALL, **more})


def test_small_default_run_loses_nothing_and_has_every_summary_key():
    summary, series, info = run_scenario(small())
    assert set(SUMMARY_KEYS) <= set(summary)
    assert summary["acked_records"] > 0 and summary["lost_acked_records"] == 0
    assert summary["diverged_partitions"] == 0 and summary["failed_batches"] == 0
    assert summary["crashes"] == 1 and summary["restarts"] == 1
    assert summary["leader_elections"] > 0 and summary["unclean_elections"] == 0
    assert summary["isr_expands"] > 0  # broker 3 rejoined after its restart
    for key in ("produce_latency_ms", "replication_lag_records"):
        assert set(summary[key]) >= {"p50", "p99", "max"}
    assert summary["sim_seconds"] == 10 and summary["seed"] == 42
    assert len(series["t"]) == 11 and series["t"][-1] == 10.0
    assert {"wall_seconds", "events_per_second", "speed_vs_real_time"} <= set(info)
    assert "wall" not in json.dumps(summary)



def test_the_cyclic_collector_is_off_during_the_run_and_as_it_was_after():
    """The measured run turns the cyclic collector off (after freezing the setup's objects);
    afterwards the caller's collector is back as it was: on or off, its thresholds, nothing
    left frozen."""
    import gc

    seen = []
    scenario = small(duration_s=2, **{"faults.0.at_s": 1, "faults.1.at_s": 1.5})
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        workload_arrival = Workload._arrival

        def arrival(self, *args):
            seen.append((gc.isenabled(), gc.get_freeze_count() > 0))
            return workload_arrival(self, *args)

        Workload._arrival = arrival
        try:
            run_scenario(scenario)
            assert gc.isenabled() and gc.get_threshold() == (700, 10, 10)
            assert gc.get_freeze_count() == 0
            gc.disable()
            run_scenario(scenario)
            assert not gc.isenabled() and gc.get_freeze_count() == 0
        finally:
            Workload._arrival = workload_arrival
            gc.enable()
    finally:
        gc.set_threshold(*before)
    assert seen and all(state == (False, True) for state in seen)


def test_the_cyclic_collector_is_off_during_the_setup_too(monkeypatch):
    """Building the cluster, creating its topics and the warm-up run with the cyclic collector
    off (the setup builds what lives for the whole run, and no garbage cycles); the caller's
    collector is on again afterwards."""
    import gc

    seen = []
    create_topic = Cluster.create_topic

    def spy(self, *args, **kwargs):
        seen.append(gc.isenabled())
        try:
            return create_topic(self, *args, **kwargs)
        finally:
            seen.append(gc.isenabled())

    monkeypatch.setattr(Cluster, "create_topic", spy)
    assert gc.isenabled()
    run_scenario(small(duration_s=2, **{"faults.0.at_s": 1, "faults.1.at_s": 1.5}))
    assert seen == [False, False]
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_sampled_lags_are_every_led_partitions_followers_with_a_known_leo():
    """The lag sample: on each live broker, in row order, every follower slot of a partition it
    leads whose replica is known and has fetched (LEO known): leader LEO − follower LEO — with
    rows freed by leaderships that moved away among them."""
    c = Cluster(3, config={"min.insync.replicas": 1, "broker.session.timeout.ms": 2000,
                           "replica.lag.time.max.ms": 4000}, seed=7)
    c.create_topic("t", 12, 3)
    c.advance(1500)
    for k in range(12):
        c.produce("t", k, [b"v"] * (k + 1), acks=1)
    c.advance(500)
    c.crash(1)
    c.advance(4000)  # broker 1's partitions elect new leaders
    c.restart(1)
    c.advance(6000)  # broker 1 catches up and rejoins the ISRs
    c.controller_node.preferred_leader_election()  # leaderships move back: rows are freed
    c.advance(500)
    c.crash(3)  # keep broker 3's followers from fetching: lags stay behind
    for k in range(12):
        c.produce("t", k, [b"w"] * 3, acks=1)
    c.advance(300)
    freed = sum(len(c.brokers[b].rm.table._free) for b in (1, 2))
    assert freed > 0
    expected = []
    for b in sorted(c.brokers):
        broker = c.brokers[b]
        if not broker.alive:
            continue
        table = broker.rm.table
        for row in range(table.capacity):
            if not table.active[row]:
                continue
            for r in range(1, table.max_replicas):
                leo = int(table.leo[row, r])
                if table.replica_id[row, r] >= 0 and leo >= 0:
                    expected.append(int(table.leader_leo[row]) - leo)
    lags = Sampler(c, c.loop.now).lags()
    assert lags.dtype == np.int64
    assert lags.tolist() == expected
    assert any(expected)  # some followers are behind


def test_what_the_run_allocated_is_not_left_for_a_young_collection():
    """The run's objects join the oldest generation when it ends, unscanned: no young
    collection walks them afterwards (it could free none of them)."""
    import gc

    gc.collect()
    oldest = len(gc.get_objects(generation=2))
    parts = simulate(small(duration_s=2))
    assert parts.length_ms == 2000
    # a young collection at the end would have moved the run's hundreds of thousands of
    # objects into the middle generation; a handful may follow the collector's hand-back
    assert len(gc.get_objects(generation=1)) < 1000
    assert len(gc.get_objects(generation=2)) - oldest > 10_000
    assert gc.get_freeze_count() == 0


def test_same_seed_same_bytes_different_seed_different():
    a = dumps_canonical(run_scenario(small())[0])
    b = dumps_canonical(run_scenario(small())[0])
    c = dumps_canonical(run_scenario(small(seed=43))[0])
    assert a == b
    assert a != c


def test_random_faults_are_drawn_from_the_seed():
    rates = {"crashes_per_broker_hour": 200, "power_failure_fraction": 0.5,
             "isolations_per_broker_hour": 100, "partitions_per_hour": 100,
             "slowdowns_per_broker_hour": 100, "controller_drops_per_hour": 100}
    a = plan_random(rates, [1, 2, 3], 60_000, np.random.default_rng(1))
    b = plan_random(rates, [1, 2, 3], 60_000, np.random.default_rng(1))
    c = plan_random(rates, [1, 2, 3], 60_000, np.random.default_rng(2))
    assert a == b and a != c
    kinds = {p.kind for p in a}
    assert {"crash", "restart", "isolate", "unisolate"} <= kinds
    with pytest.raises(InvalidConfigurationError):
        validate_rates({"crashes_per_minute": 1})
    with pytest.raises(InvalidConfigurationError):
        validate_rates({"power_failure_fraction": 2})


def test_run_with_random_faults_keeps_every_acknowledged_record():
    s = small(**{"fault_rates.crashes_per_broker_hour": 360.0, "fault_rates.mean_downtime_s": 2.0,
                 "fault_rates.isolations_per_broker_hour": 180.0,
                 "fault_rates.mean_isolation_s": 3.0, "fault_rates.power_failure_fraction": 0.3})
    summary, _, _ = run_scenario(s)
    assert summary["faults_injected"] > 2
    causes = summary["lost_acked_records_by_cause"]
    assert causes["unexplained"] == 0 and causes["high_watermark_truncation"] == 0


def test_consumer_reads_committed_data():
    summary, _, _ = run_scenario(small(**{"workload.consumers": True,
                                         "workload.consumer_poll_ms": 500}))
    assert summary["consumed_records"] > 0 and summary["consumed_corrupt_batches"] == 0
    assert summary["consumed_records"] <= summary["acked_records"]


def test_workload_batches_are_valid_and_unique():
    c = Cluster(3, seed=1)
    c.create_topic("t", 4, 3)
    w = Workload(c, {"records_per_batch": 3, "record_bytes": 40, "keys": 7, "acks": "all"})
    a, b = w._batch(1, 5), w._batch(1, 6)
    for buf in (a, b):
        assert scan(buf, check_crc=True).headers[0, 14] == 1
    batch = next(iter(iter_batches(a)))
    recs = list(batch)
    assert [bytes(r.value)[:24] for r in recs] == [
        b"00000001:000000005:%04d|" % r for r in range(3)]
    assert all(len(r.value) == 40 for r in recs)
    assert recs[0].key.startswith(b"key-") and len(recs) == 3
    assert records_digest(a) != records_digest(b)


def test_examples_load_and_validate():
    names = sorted(p.stem for p in sc.examples_dir().glob("*.toml"))
    assert {"default", "kip101-scenario1", "kip101-scenario2", "kip279", "rolling-restart",
            "slow-follower-isr-flapping"} <= set(names)
    for name in names:
        s = sc.load(sc.examples_dir() / f"{name}.toml")
        assert s.topics and s.duration_s > 0
    with pytest.raises(InvalidConfigurationError):
        sc.load(sc.default_scenario_path(), {"workload.burst": 1})


@pytest.mark.parametrize("name,overrides", [
    ("slow-follower-isr-flapping", {"duration_s": 40, "topics.0.partitions": 30,
                                    "faults.1.at_s": 35}),
    ("rolling-restart", {"duration_s": 50, "topics.0.partitions": 60,
                         "workload.batches_per_second": 0.5}),
])
def test_examples_shrunk(name, overrides):
    summary, _, _ = run_scenario(sc.load(sc.examples_dir() / f"{name}.toml", overrides))
    assert summary["lost_acked_records"] == 0 and summary["diverged_partitions"] == 0
    assert summary["isr_shrinks"] + summary["isr_expands"] > 0
    if name == "rolling-restart":
        assert summary["offline_partition_seconds"] == 0
        assert summary["under_min_isr_partition_seconds"] == 0


def test_write_outputs(tmp_path):
    summary, series, info = run_scenario(small(duration_s=3, **{"faults.0.at_s": 1,
                                                                 "faults.1.at_s": 2}))
    paths = write_outputs(tmp_path / "o", summary, series, info)
    page = paths["report"].read_text()
    assert page.count("<svg") == 6 and "crash broker 3" in page
    assert json.loads(paths["summary"].read_text())["seed"] == 42
    fingerprint = summary["config"]["fingerprint"]
    assert fingerprint in page and json.loads(paths["run"].read_text())["config"][
        "fingerprint"] == fingerprint
    lines = paths["timeseries"].read_text().splitlines()
    assert lines[0].split(",") == [c for c in CSV_SERIES if c in series]
    assert len(lines) == len(series["t"]) + 1
    assert [float(line.split(",")[0]) for line in lines[1:]] == series["t"]


def test_simulate_command_end_to_end(tmp_path):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "replica_core.cli", "simulate", "--seed", "5",
           "--set", "topics.0.partitions=30", "--set", "duration_s=4",
           "--set", "faults.0.at_s=1", "--set", "faults.1.at_s=3",
           "--set", "replica.lag.time.max.ms=5000", "--out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "lost acked records" in done.stdout and "100%" in done.stderr
    assert "unavailable to producers" in done.stdout and "producer retries" in done.stdout
    assert done.stdout.splitlines()[-2].split()[:2] == ["verdict", "PASS:"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["seed"] == 5 and summary["partitions"] == 30
    config = summary["config"]
    assert config["overrides"]["replica.lag.time.max.ms"] == 5000 and \
        config["overrides"]["seed"] == 5
    assert config["kafka"]["broker"]["replica.lag.time.max.ms"] == 5000
    assert config["kafka"]["broker"]["replica.fetch.wait.max.ms"] == 500  # a default, listed
    assert config["scenario"]["topics"][0]["partitions"] == 30
    assert json.loads((out / "run.json").read_text())["wall_seconds"] > 0
    assert (out / "report.html").read_text().startswith("<!DOCTYPE html>")
    # another process with another string-hash seed writes the same bytes
    again = tmp_path / "again"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    done = subprocess.run(cmd[:-1] + [str(again), "-q"], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert (again / "summary.json").read_bytes() == (out / "summary.json").read_bytes()
    bad = subprocess.run(cmd[:4] + ["--set", "nonsense=1"], capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 2 and "nonsense" in bad.stderr


@pytest.mark.slow
def test_default_scenario_full_size():
    summary, _, info = run_scenario(sc.load(sc.default_scenario_path()))
    assert summary["partitions"] >= 3000 and summary["sim_seconds"] == 60
    assert summary["lost_acked_records"] == 0 and summary["diverged_partitions"] == 0
    assert summary["offline_partition_seconds"] == 0
    assert summary["leader_elections"] >= 400 and summary["isr_expands"] >= 1000


@pytest.mark.slow
@pytest.mark.parametrize("name", ["rolling-restart", "slow-follower-isr-flapping"])
def test_examples_full_size(name):
    summary, _, _ = run_scenario(sc.load(sc.examples_dir() / f"{name}.toml"))
    assert summary["lost_acked_records"] == 0 and summary["diverged_partitions"] == 0
    if name == "slow-follower-isr-flapping":
        assert summary["isr_shrinks"] > 50 and summary["isr_expands"] > 50
    else:
        assert summary["under_min_isr_partition_seconds"] == 0


def test_sharded_example_runs_its_lanes_shrunk():
    """examples/sharded.toml at a size one process runs: 8 lanes, nothing lost, the crashed
    broker's partitions elected elsewhere in every lane."""
    scenario = sc.load(sc.examples_dir() / "sharded.toml",
                       {"topics.0.partitions": 160, "duration_s": 30, "faults.1.at_s": 28})
    summary, _, _ = run_scenario(scenario)
    assert summary["fetcher_lanes"] == 8 and summary["partitions"] == 160
    assert summary["lost_acked_records"] == 0 and summary["diverged_partitions"] == 0
    assert summary["crashes"] == 1 and summary["leader_elections"] > 0


@pytest.mark.parametrize("argv", [["shard", "default"], ["sweep", "examples/grids/durability.toml"]])
def test_spark_commands_without_pyspark_say_how_to_get_it(argv, monkeypatch, capsys):
    import importlib.util

    from replica_core import cli

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "pyspark" else real(name, *a))
    argv = [a if not a.startswith("examples/") else str(sc.examples_dir() / a[9:]) for a in argv]
    assert cli.main(argv) == 2
    assert "needs PySpark" in capsys.readouterr().err


# ---- configuration in every output; bad input caught before any work -----------------------
QUICK = ["--set", "topics.0.partitions=6", "--set", "duration_s=2", "--set", "faults.0.at_s=0.5",
         "--set", "faults.1.at_s=1.5", "--set", "broker.session.timeout.ms=1000",
         "--set", "workload.batches_per_second=2", "-q"]


def test_default_out_names_the_overrides_and_never_overwrites_another_run(tmp_path, monkeypatch,
                                                                          capsys):
    from replica_core import cli

    monkeypatch.chdir(tmp_path)
    assert cli.main(["simulate", *QUICK]) == 0
    made = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert len(made) == 1
    out = tmp_path / "out" / made[0]
    first = (out / "summary.json").read_bytes()
    # six overrides make a long name: the directory is named by the configuration's hash
    assert made[0] == "default--" + json.loads(first)["config"]["fingerprint"]
    assert cli._default_out(small()) == cli._default_out(small())
    few = sc.load(sc.default_scenario_path(), {"seed": 3, "workload.acks": "1"})
    assert str(cli._default_out(few)) == "out/default--seed=3,workload.acks=1"
    assert str(cli._default_out(sc.load(sc.default_scenario_path()))) == "out/default"
    page = (out / "report.html").read_text()
    assert "topics.0.partitions=6" in page.split("</title>")[0]  # the title names the run
    capsys.readouterr()
    # the same configuration again: allowed (and the same bytes)
    assert cli.main(["simulate", *QUICK, "--out", str(out)]) == 0
    assert (out / "summary.json").read_bytes() == first
    # another configuration into that directory: refused before simulating
    capsys.readouterr()
    assert cli.main(["simulate", *QUICK, "--seed", "9", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "holds another run" in err and len(err.strip().splitlines()) == 1
    assert (out / "summary.json").read_bytes() == first
    assert cli.main(["simulate", *QUICK, "--seed", "9", "--out", str(out), "--force"]) == 0
    assert json.loads((out / "summary.json").read_text())["seed"] == 9


def test_out_that_cannot_be_written_fails_at_once(tmp_path, capsys):
    from replica_core import cli

    a_file = tmp_path / "taken"
    a_file.write_text("not a directory")
    for out in (a_file, a_file / "below"):
        assert cli.main(["simulate", *QUICK, "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "not a directory" in err
        assert "Traceback" not in err
    assert a_file.read_text() == "not a directory"
    grid = str(sc.examples_dir() / "grids" / "durability.toml")
    assert cli.main(["sweep", grid, "--out", str(a_file)]) == 2
    assert "not a directory" in capsys.readouterr().err
    assert cli.main(["shard", "default", "--out", str(a_file / "x")]) == 2
    assert "not a directory" in capsys.readouterr().err


def test_out_of_range_numbers_name_the_value_given(capsys):
    from replica_core import cli

    assert cli.main(["shard", "default", "--shards", "0"]) == 2
    assert "--shards needs a number ≥ 1, got 0" in capsys.readouterr().err
    grid = str(sc.examples_dir() / "grids" / "durability.toml")
    assert cli.main(["sweep", grid, "--slices", "-3"]) == 2
    assert "got -3" in capsys.readouterr().err
    assert cli.main(["simulate", "--set", "topics.0.partitions=0", "-q"]) == 2
    assert "needs partitions ≥ 1, got 0" in capsys.readouterr().err
    assert cli.main(["simulate", "--set", "topics.0.replication_factor=9", "-q"]) == 2
    assert "got 9" in capsys.readouterr().err
    assert cli.main(["simulate", "--set", "cluster.brokers=0", "-q"]) == 2
    assert "got 0" in capsys.readouterr().err


def test_min_isr_above_replication_factor_is_clamped_with_a_warning(tmp_path, capsys):
    from replica_core import cli

    out = tmp_path / "o"
    assert cli.main(["simulate", *QUICK, "--set", "min.insync.replicas=4", "--out",
                     str(out)]) == 0
    err = capsys.readouterr().err
    assert "warning" in err and "min.insync.replicas=4" in err and "clamps it to 3" in err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["warnings"] and summary["config"]["topics"]["events"][
        "effective_min_isr"] == 3
    # Kafka's effective min ISR is the replica count: nothing is under it before the crash
    assert summary["acked_records"] > 0
    assert "clamps it to 3" in (out / "report.html").read_text()
