"""Sweep grids: expansion, seeds independent of execution, validation."""
import pytest

from replica_core.errors import InvalidConfigurationError
from replica_core.sweep import grid_from_dict, row_seed


def grid(**kw):
    doc = {"scenario": "default", "seeds": 2, "base_seed": 5,
           "set": {"duration_s": 10, "topics.0.partitions": 30},
           "axes": {"min.insync.replicas": [1, 2], "unclean.leader.election.enable": [False, True]}}
    doc.update(kw)
    return grid_from_dict(doc)


def test_rows_are_product_times_seeds_with_common_seeds():
    g = grid()
    rows = g.rows()
    assert g.n_configs == 4 and len(rows) == 8
    assert [r.row_id for r in rows] == list(range(8))
    # every configuration sees the same two seeds
    by_cfg = {}
    for r in rows:
        by_cfg.setdefault(r.config_id, []).append(r.seed)
    assert len({tuple(v) for v in by_cfg.values()}) == 1
    assert len(set(by_cfg[0])) == 2
    s = rows[3].scenario()
    assert s.seed == rows[3].seed and s.duration_s == 10 and s.topics[0].partitions == 30
    assert s.configs["min.insync.replicas"] == rows[3].axes["min.insync.replicas"]


def test_row_seed_is_a_pure_function():
    assert row_seed(5, 0) == row_seed(5, 0)
    assert row_seed(5, 0) != row_seed(5, 1) != row_seed(6, 1)
    assert grid().rows() == grid().rows()


@pytest.mark.parametrize("bad", [
    {"seeds": 0}, {"axes": {"workload.acks": [7]}}, {"axes": {"cluster.brokers": []}},
    {"scenario": "no-such-scenario"}, {"colour": "blue"}, {"base_seed": -2},
    {"seeds": "many"},
])
def test_bad_grids_fail_before_running(bad):
    with pytest.raises(InvalidConfigurationError):
        grid(**bad)


# ---- typed rows, intervals, labels, outputs ---------------------------------------------------
import json  # noqa: E402
import math  # noqa: E402
import re  # noqa: E402

from replica_core.spark import run_row  # noqa: E402  (pyspark itself is only imported to run)
from replica_core.sweep import (  # noqa: E402
    ROW_METRICS,
    config_labels,
    load_grid,
    mean_ci95,
    t975,
    wilson,
    write_summary,
)


def test_wilson_interval_matches_hand_computed_values():
    # k=5, n=10, z=1.96: centre (0.5 + 0.19208) / 1.38416 = 0.5, half 0.26339
    lo, hi = wilson(5, 10)
    assert lo == pytest.approx(0.2366, abs=1e-4) and hi == pytest.approx(0.7634, abs=1e-4)
    lo, hi = wilson(0, 10)  # no loss in 10 runs still leaves up to ~28 %
    assert lo == 0.0 and hi == pytest.approx(0.2775, abs=1e-4)
    assert wilson(10, 10)[1] == pytest.approx(1.0) and wilson(10, 10)[0] == pytest.approx(0.7225, abs=1e-4)
    with pytest.raises(ValueError):
        wilson(3, 2)


def test_mean_interval_uses_students_t():
    mean, lo, hi = mean_ci95([1.0, 2.0, 3.0])  # sd 1, t(2) = 4.303
    assert mean == 2.0 and lo == pytest.approx(2 - 4.303 / math.sqrt(3))
    assert hi == pytest.approx(2 + 4.303 / math.sqrt(3))
    assert mean_ci95([4.0]) == (4.0, None, None)
    assert t975(1) == 12.706 and t975(29) == 2.045 and t975(1000) == 1.96


def test_configurations_are_named_by_the_settings_that_differ():
    g = grid(axes={"min.insync.replicas": [1, 2], "workload.acks": ["all"],
                   "unclean.leader.election.enable": [False, True]})
    labels = config_labels(g)
    assert labels == {0: "min ISR=1, unclean=false", 1: "min ISR=1, unclean=true",
                      2: "min ISR=2, unclean=false", 3: "min ISR=2, unclean=true"}
    assert all(r.label == labels[r.config_id] for r in g.rows())
    with pytest.raises(InvalidConfigurationError):
        grid(axes={"min.insync.replicas": [1, "two"]})
    with pytest.raises(InvalidConfigurationError):
        grid(axes={"min.insync.replicas": [1, 1]})
    with pytest.raises(InvalidConfigurationError):
        grid(tradeoff={"x": "happiness", "y": "lost_acked_records"})


TINY = {"scenario": "default", "seeds": 2, "base_seed": 4,
        "description": "Does min.insync.replicas change anything when nothing fails?",
        "set": {"duration_s": 3, "topics.0.partitions": 6, "cluster.brokers": 3,
                "faults.0.at_s": 1, "faults.1.at_s": 2, "broker.session.timeout.ms": 1000,
                "workload.batches_per_second": 2.0},
        "axes": {"min.insync.replicas": [1, 2], "unclean.leader.election.enable": [False]}}


@pytest.fixture(scope="module")
def tiny():
    g = grid_from_dict(TINY)
    return g, [run_row(r) for r in g.rows()]


def test_rows_are_typed(tiny):
    g, results = tiny
    assert len(results) == 4
    for r in results:
        assert isinstance(r["cfg_min_insync_replicas"], int)
        assert isinstance(r["cfg_unclean_leader_election_enable"], bool)
        assert r["config_label"] in ("min ISR=1", "min ISR=2")
        assert len(r["config_fingerprint"]) == 10
        for name, kind in ROW_METRICS:
            value = r[name]
            if kind == "int":
                assert isinstance(value, int) and not isinstance(value, bool), name
            else:
                assert value is None or isinstance(value, float), name
        assert r["acked_records"] > 0 and r["faults_injected"] == 2
        assert r["crashes"] == 1 and r["recovery_detected_s_max"] > 0
    # the same seed under two configurations: the same faults, different fingerprints
    assert results[0]["seed"] == results[2]["seed"]
    assert results[0]["config_fingerprint"] != results[2]["config_fingerprint"]


def test_summary_files_name_configurations_and_show_intervals(tiny, tmp_path):
    g, results = tiny
    write_summary(g, results, tmp_path)
    table = json.loads((tmp_path / "summary.json").read_text())
    assert table["grid"]["description"] == TINY["description"]
    first = table["configs"][0]
    assert first["label"] == "min ISR=1" and first["runs"] == 2
    acked = [r["acked_records"] for r in results if r["config_id"] == 0]
    assert first["metrics"]["acked_records"]["mean"] == sum(acked) / 2
    lo, hi = first["metrics"]["acked_records"]["ci95"]
    assert lo <= sum(acked) / 2 <= hi
    assert first["p_any_loss"] == {"runs_losing": 0, "runs": 2, "p": 0.0,
                                   "wilson95": [0.0, pytest.approx(wilson(0, 2)[1])]}
    md = (tmp_path / "summary.md").read_text()
    assert TINY["description"] in md and "| min ISR=2 | 2 | 0/2 = 0 [0, 0.658] |" in md
    svg = (tmp_path / "tradeoff.svg").read_text()
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    assert "min ISR=1" in texts and "min ISR=2" in texts
    assert any("partition-seconds producers could not write" in t for t in texts)
    assert any("acknowledged records lost" in t for t in texts)
    assert sum(1 for t in texts if re.fullmatch(r"[\d,.]+", t)) >= 6  # tick values
    assert "NaN" not in svg and "e-0" not in svg
    page = (tmp_path / "summary.html").read_text()
    assert "<svg" in page and "https://" not in page and "<script" not in page
    assert (tmp_path / "p_loss.svg").read_text().count("<circle") == 2


@pytest.mark.parametrize("name", ["durability", "availability"])
def test_shipped_grids_ask_a_question_with_enough_seeds(name):
    from replica_core.sim.scenario import examples_dir

    g = load_grid(examples_dir() / "grids" / f"{name}.toml")
    assert len(g.description) > 200 and g.seeds >= 5
    assert g.n_configs >= 8
    if name == "durability":
        assert set(g.axes) == {"workload.acks", "min.insync.replicas",
                               "unclean.leader.election.enable"}
        assert g.seeds >= 20  # P(any loss) intervals narrow enough to separate configurations
        s = g.rows()[0].scenario()
        rates = s.fault_rates
        assert rates["crashes_per_broker_hour"] > 0 and rates["power_failure_fraction"] < 0.5
    else:
        assert "replica.lag.time.max.ms" in g.axes and g.tradeoff[0] == "produce_latency_ms_p99"


# ---- the risk estimate and paired comparisons in the summary ------------------------------------
def test_summary_carries_the_risk_estimate_and_paired_comparisons(tiny, tmp_path):
    g, results = tiny
    # hand-set outcomes on the real rows: config 0 (min ISR 1) lost 40 and 0 records on seeds 0
    # and 1, config 1 (min ISR 2) lost nothing; unavailability 10 s and 30 s more under min ISR 2
    rows = [dict(r) for r in results]
    by = {(r["config_id"], r["seed_index"]): r for r in rows}
    by[0, 0]["lost_acked_records"], by[0, 1]["lost_acked_records"] = 40, 0
    by[1, 0]["lost_acked_records"], by[1, 1]["lost_acked_records"] = 0, 0
    for s, extra in ((0, 10.0), (1, 30.0)):
        by[1, s]["unavailable_partition_seconds"] = by[0, s]["unavailable_partition_seconds"] + extra
    write_summary(g, rows, tmp_path)
    doc = json.loads((tmp_path / "summary.json").read_text())
    assert doc["grid"]["risk"] == {"p_loss_half_width": 0.05, "per_year_relative_half_width": 0.25}
    risk = doc["configs"][0]["risk"]
    year_fraction = 3.0 / (8760 * 3600)  # each run simulates 3 s
    assert risk["runs"] == 2 and risk["sim_seconds"] == 6.0
    assert risk["p_any_loss"]["runs_losing"] == 1 and risk["p_any_loss"]["p"] == 0.5
    assert risk["lost_records_per_year"]["mean"] == pytest.approx(20 / year_fraction)
    assert risk["loss_size"]["p50"] == 40 and risk["loss_size"]["runs"] == 1
    assert risk["seeds_needed"]["p_any_loss"] == 381  # observed p = 1/2: z²/(4·0.05²) − z²
    for figure in ("lost_records_per_year", "unavailable_partition_seconds_per_year"):
        m = risk[figure]
        assert isinstance(m["mean"], float) and all(isinstance(v, float) for v in m["ci95"])
        assert isinstance(m["n"], int)
    assert isinstance(risk["seeds_needed"]["p_any_loss"], int)
    (pair,) = doc["paired"]
    assert (pair["a_label"], pair["b_label"], pair["pairs"]) == ("min ISR=1", "min ISR=2", 2)
    assert pair["difference"]["lost_acked_records"]["mean"] == 20.0   # (40 + 0) / 2
    assert pair["difference"]["unavailable_partition_seconds"]["mean"] == pytest.approx(-20.0)
    assert pair["loss_runs"] == {"a_only": 1, "b_only": 0, "both": 0, "neither": 1,
                                 "mcnemar_exact_p": 1.0}
    md = (tmp_path / "summary.md").read_text()
    assert "## Risk per configuration" in md and "## Paired comparisons" in md
    assert "to narrow P(loss) to ±0.05 you need 381 seeds" in md
    assert "| min ISR=1 | min ISR=2 | 2 | 20 [" in md
    page = (tmp_path / "summary.html").read_text()
    assert "Risk per configuration</h2>" in page and "Paired comparisons" in page
    assert "<b>min ISR=1</b>" in page and "NaN" not in page


def test_a_grid_may_ask_for_other_interval_widths():
    g = grid(risk={"p_loss_half_width": 0.1})
    assert g.risk == {"p_loss_half_width": 0.1, "per_year_relative_half_width": 0.25}
    for bad in ({"p_loss_half_width": 0.7}, {"p_loss_half_width": "wide"}, {"width": 0.1},
                {"per_year_relative_half_width": 0}):
        with pytest.raises(InvalidConfigurationError):
            grid(risk=bad)


def test_risk_grid_answers_its_question():
    from replica_core.sim.scenario import examples_dir

    g = load_grid(examples_dir() / "grids" / "risk-az.toml")
    assert len(g.description) > 200 and g.seeds >= 20
    assert set(g.axes) == {"flush.messages", "eligible.leader.replicas.enable"}
    assert g.n_configs == 4
    s = g.rows()[0].scenario()
    assert s.fault_rates["broker_mtbf_hours"] > 0 and s.fault_rates["rack_mtbf_hours"] > 0
    assert s.fault_rates["rack_power_losses_per_year"] > 0
    assert s.fault_rates["repair_time"]["distribution"] == "lognormal"
    assert sorted(s.cluster["racks"]) == ["a", "b", "c"]
    assert s.acks == -1 and s.configs["min.insync.replicas"] == 2
    assert [t.replication_factor for t in s.topics] == [3]


def test_the_year_grid_runs_a_horizon_with_both_flush_policies():
    from replica_core.sim.scenario import examples_dir

    g = load_grid(examples_dir() / "grids" / "risk-year.toml")
    assert set(g.axes) == {"flush.messages"} and g.n_configs == 2 and g.seeds == 30
    scenarios = [r.scenario() for r in g.rows()]
    assert len(scenarios) == 60
    assert {s.configs.get("flush.messages") for s in scenarios} == {1, 2**63 - 1}
    assert all(s.horizon_days == 365 and s.simulated_s == 365 * 86_400 for s in scenarios)
    assert scenarios[0].fault_rates["broker_mtbf_hours"] == 4380


# ---- the newer figures as typed row columns, from real runs -------------------------------------
def _row_of(example, **overrides):
    from replica_core.sim.run import run_scenario
    from replica_core.sim.scenario import examples_dir, load
    from replica_core.sweep import row_metrics

    summary, _series, _info = run_scenario(load(examples_dir() / f"{example}.toml", overrides))
    return summary, row_metrics(summary)


NEW_COLUMNS = ("duplicated_records", "reordered_records", "producer_epoch_bumps",
               "lost_stale_replica_rejoined", "storage_torn_writes", "storage_torn_files",
               "storage_torn_pages_kept", "storage_torn_pages_lost", "storage_bit_flips",
               "storage_bit_flips_missed", "storage_fsyncs_lost", "storage_lost_fsync_windows",
               "storage_slow_fsyncs", "storage_slow_fsync_ms", "recovery_bytes_truncated",
               "recovery_logs_with_data_lost", "recovery_segments_deleted",
               "recovery_indexes_rebuilt")


def test_new_figures_are_typed_int_columns():
    kinds = dict(ROW_METRICS)
    for name in NEW_COLUMNS:
        assert kinds.get(name) == "int", name


def test_storage_fault_columns_come_from_a_power_outage():
    # the shipped power-outage: three brokers lose power with torn writes, nothing flushed
    summary, row = _row_of("power-outage")
    assert row["storage_torn_writes"] == 3  # one torn write per power-failed broker
    assert row["storage_torn_pages_lost"] > 0 and row["storage_torn_pages_kept"] > 0
    assert row["recovery_bytes_truncated"] > 0
    assert row["lost_power_failure"] > 0 and row["lost_stale_replica_rejoined"] == 0
    assert row["storage_bit_flips"] == 0 and row["storage_fsyncs_lost"] == 0
    for name in NEW_COLUMNS:
        assert isinstance(row[name], int) and not isinstance(row[name], bool), name
    sf = summary["storage_faults"]
    assert (row["storage_torn_pages_lost"], row["recovery_bytes_truncated"]) == (
        sf["torn_pages_lost"], sf["recovery"]["bytes_truncated"])


def test_duplicated_records_column_counts_retries_without_idempotence():
    _, off = _row_of("idempotence", **{"enable.idempotence": False})
    _, on = _row_of("idempotence")
    # each re-sent batch of the example holds 5 records, appended a second time without
    # idempotence and answered with its first offsets with it
    assert off["duplicated_records"] > 0 and off["duplicated_records"] % 5 == 0
    assert off["duplicate_batches"] * 5 == off["duplicated_records"]
    assert on["duplicated_records"] == 0 and on["duplicate_batches"] == 0


def test_stale_replica_loss_cause_is_a_column():
    _, off = _row_of("disk-replacement", **{"isr.broker.epochs": False})
    _, on = _row_of("disk-replacement")
    assert off["lost_stale_replica_rejoined"] > 0
    assert off["lost_stale_replica_rejoined"] == off["lost_acked_records"]
    assert on["lost_stale_replica_rejoined"] == 0 and on["lost_acked_records"] == 0


def test_configurations_no_seed_tells_apart_are_said_once(tiny, tmp_path):
    g, results = tiny
    # hand-set: both configurations lose nothing and are unavailable exactly as long per seed
    rows = [dict(r) for r in results]
    by = {(r["config_id"], r["seed_index"]): r for r in rows}
    for s in (0, 1):
        by[1, s]["unavailable_partition_seconds"] = by[0, s]["unavailable_partition_seconds"]
        by[1, s]["under_min_isr_partition_seconds"] = by[0, s]["under_min_isr_partition_seconds"]
        for c in (0, 1):
            by[c, s]["lost_acked_records"] = 0
    write_summary(g, rows, tmp_path)
    md = (tmp_path / "summary.md").read_text()
    paired = md[md.index("## Paired comparisons"):]
    assert "The two configurations lost as many acknowledged records" in paired
    assert "| min ISR=1 | min ISR=2 |" not in paired  # no table of zeros
    # both saw 0/2 runs losing: the seed advice is given once, for every configuration
    assert md.count("to narrow P(loss) to ±0.05 you need") == 1
    assert "- **every configuration**: to narrow P(loss)" in md
    assert "(6 s)" in md  # each configuration: 2 runs of 3 simulated seconds
    assert json.loads((tmp_path / "summary.json").read_text())["paired"]  # still in the json


def test_points_on_the_same_spot_share_one_label(tiny, tmp_path):
    g, results = tiny
    rows = [dict(r) for r in results]
    for r in rows:  # every configuration at the same means
        r["unavailable_partition_seconds"] = 7.0
        r["lost_acked_records"] = 0
    write_summary(g, rows, tmp_path)
    bold = re.findall(r'<text [^>]*font-weight="bold">([^<]*)</text>',
                      (tmp_path / "tradeoff.svg").read_text())
    assert bold == ["1, 2", "1", "2"]  # one label on the chart, both in the legend
