"""Report writing: deterministic JSON, distributions, numbers and ticks for people, and the HTML
page's content (verdict, labelled axes with real ticks, shaded fault periods, no NaN)."""
import json
import re

import pytest

from replica_core.sim import scenario as sc
from replica_core.sim.report import (
    distribution,
    dumps_canonical,
    fault_periods,
    fmt_ms,
    fmt_num,
    log_ticks,
    nice_ticks,
    render_html,
)
from replica_core.sim.run import run_scenario, verdict


def test_distribution_values():
    d = distribution(list(range(1, 101)))
    assert d["p50"] == 50 and d["p99"] == 99 and d["max"] == 100 and d["count"] == 100
    assert distribution([]) == {"p50": 0.0, "p99": 0.0, "max": 0.0, "count": 0}


def test_canonical_json_is_order_independent_and_rounded():
    a = dumps_canonical({"b": 1.00000000001, "a": [1, 2.5]})
    b = dumps_canonical({"a": [1, 2.5], "b": 1.0})
    assert a == b
    assert json.loads(a) == {"a": [1, 2.5], "b": 1.0}
    assert dumps_canonical({"x": float("nan")}) == dumps_canonical({"x": None})


@pytest.mark.parametrize("value,text", [
    (12345, "12,345"), (6244.0, "6,244"), (0.25, "0.25"), (1e-09, "0"), (0.0, "0"),
    (1234.5678, "1,235"), (0.012345, "0.0123"), (float("nan"), "—"), (None, "—"),
    (3.5, "3.5"), (-2.0, "-2"),
])
def test_numbers_for_people(value, text):
    assert fmt_num(value) == text


def test_durations():
    assert fmt_ms(850) == "850 ms" and fmt_ms(6244) == "6.24 s" and fmt_ms(240_000) == "4 min"


def test_ticks_are_round_and_cover_the_data():
    assert nice_ticks(0, 1500) == [0, 500, 1000, 1500]
    assert nice_ticks(0, 60, 8) == [0, 10, 20, 30, 40, 50, 60]
    assert nice_ticks(0, 3) == [0, 1, 2, 3] or nice_ticks(0, 3) == [0, 0.5, 1, 1.5, 2, 2.5, 3]
    assert nice_ticks(0, 0, integer=True) == [0, 1]  # an all-zero series: 0..1, never 1e-09
    assert nice_ticks(0, 7, integer=True)[-1] >= 7
    assert nice_ticks(0, 0.3) == [0, 0.1, 0.2, 0.3]
    assert log_ticks(1, 8608) == [1, 10, 100, 1000, 10000]


def test_fault_periods_pair_starts_with_their_ends():
    faults = [
        {"at_s": 3, "kind": "flush", "brokers": [2], "fault": "flush broker 2"},
        {"at_s": 5, "kind": "isolate", "brokers": [1], "fault": "isolate broker 1"},
        {"at_s": 8, "kind": "unisolate", "brokers": [1], "fault": "unisolate broker 1"},
        {"at_s": 20, "kind": "crash", "brokers": [3], "fault": "crash broker 3 (process)"},
        {"at_s": 25, "kind": "crash", "brokers": [2], "fault": "crash broker 2 (power)"},
        {"at_s": 40, "kind": "restart", "brokers": [3], "fault": "restart broker 3"},
    ]
    periods, moments = fault_periods(faults, 60.0)
    assert [(a, b, kind) for a, b, _, kind in periods] == [
        (5, 8, "isolate"), (20, 40, "crash"), (25, 60.0, "crash")]
    assert moments == [(3, "flush broker 2")]


def _summary(**more):
    base = {
        "scenario_name": "demo", "seed": 7, "brokers": 3, "partitions": 4, "sim_seconds": 10,
        "truncation": "leader_epoch", "acked_records": 1234, "lost_acked_records": 0,
        "diverged_partitions": 0, "lost_acked_records_by_cause": {},
        "invariant_checks": {"hw": 10, "leader_hw": 9, "offsets": 8, "isr_agreement": 7,
                             "durability": 6},
        "fault_recovery": [
            {"at_s": 2, "kind": "crash", "brokers": [1], "fault": "crash broker 1 (process)",
             "detected_after_s": 1.5, "leaders_after_s": 1.5, "writable_after_s": 1.51,
             "isr_full_after_s": 6.0},
            {"at_s": 6, "kind": "restart", "brokers": [1], "fault": "restart broker 1",
             "detected_after_s": None, "leaders_after_s": None, "writable_after_s": None,
             "isr_full_after_s": 2.0}],
        "config": {"overrides": {"seed": 7}, "fingerprint": "abcdef0123",
                   "scenario": {"description": "A small demonstration.", "workload":
                                {"acks": "all"}},
                   "kafka": {"broker": {"replica.lag.time.max.ms": 30000}}},
        "unavailable_partition_seconds_by_cause": {"leader_down": 3.0},
        "loss_events": [],
    }
    base.update(more)
    base["verdict"] = verdict(base)
    return base


SERIES = {"t": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
          "unavailable": [0, 0, 2, 2, 0, 0, 0, 0, 0, 0, 0],
          "offline": [0] * 11, "under_replicated": [0, 0, 0, 4, 4, 4, 4, 0, 0, 0, 0],
          "under_min_isr": [0] * 11, "mean_isr_size": [3, 3, 3, 2, 2, 2, 2.5, 3, 3, 3, 3],
          "max_lag": [0, 10, 2, 0, 0, 0, 0, 0, 0, 0, 0], "mean_lag": [0] * 11,
          "leadership": [[3.5, 2, 0, 0]]}


def svg_texts(page):
    return [re.sub(r"<[^>]+>", "", t) for t in re.findall(r"<text[^>]*>(.*?)</text>", page)]


def test_page_opens_with_the_verdict_and_names_the_run():
    page = render_html(_summary(), SERIES, latencies_ms=[1, 2, 2, 3, 50, 4000],
                       title_suffix="seed=7")
    title = page.split("<title>")[1].split("</title>")[0]
    assert title == "replica-core: demo (seed=7)"
    body = page.split("<body>")[1]
    first_h2 = body.index("<h2")
    assert body.index("verdict pass") > first_h2 and body.index("verdict pass") < body.index(
        "id='scenario'")
    assert "PASS: 5/5 invariants held; 1,234 acknowledged records, none lost" in page
    assert page.count('<span class="badge PASS">') == 5
    assert "A small demonstration." in page and "abcdef0123" in page


def test_charts_have_labelled_axes_real_ticks_and_named_fault_periods():
    page = render_html(_summary(), SERIES, latencies_ms=[1, 2, 2, 3, 50, 4000])
    assert page.count("<svg") == 6
    texts = svg_texts(page)
    assert texts.count("simulated time (s)") == 5  # four time charts and the timeline
    assert {"partitions", "replicas in ISR", "records behind",
            "requests at or below (%)"} <= set(texts)
    # x ticks every 2 s on the time axes, y ticks of the first chart 0..2
    for tick in ("0", "2", "4", "6", "8", "10", "1 ms", "10 ms", "1 s"):
        assert tick in texts, tick
    # the crash is a shaded period named on the chart, from 2 s to the restart at 6 s
    assert "crash broker 1 (process) → restart at 6 s" in texts
    assert re.search(r'<rect [^>]*class="band"><title>crash broker 1 \(process\) → restart at '
                     r'6 s: 2–6 s', page)
    # an all-zero series says so, and no label is NaN or an exponent
    assert any("(0 at every sample)" in t for t in texts)
    for t in texts:
        assert "NaN" not in t and not re.search(r"\de-\d", t), t
    # percentiles as the summary computes them (the lower value): p50 of 6 samples is the 3rd
    assert "p99 50 ms" in texts and "p50 2 ms" in texts


def test_a_failed_run_says_what_failed():
    s = _summary(lost_acked_records=40, diverged_partitions=1,
                 lost_acked_records_by_cause={"unclean_election": 40},
                 loss_events=[{"tp": "events-3", "first_offset": 10, "last_offset": 49,
                               "records": 40, "batches": 2, "acks": "all",
                               "acked_s": [1.0, 1.5], "found_s": 4.0,
                               "cause": "unclean_election", "new_leader": 2,
                               "fault": "crash broker 1 (process)"}])
    assert not s["verdict"]["ok"]
    page = render_html(s, SERIES)
    assert "verdict fail" in page and page.count('<span class="badge FAIL">') == 2
    assert "40 records lost: unclean election 40" in page
    assert "events-3" in page and "10–49" in page and "crash broker 1 (process)" in page


def test_page_is_self_contained():
    page = render_html(_summary(), SERIES, latencies_ms=[1, 2])
    assert "<script" not in page and "<link" not in page and "url(" not in page
    assert re.findall(r"https?://[^\"' ]+", page) == ["http://www.w3.org/2000/svg"] * 6


def test_report_of_a_real_run(tmp_path):
    overrides = {"topics.0.partitions": 12, "duration_s": 6, "faults.0.at_s": 1,
                 "faults.1.at_s": 4, "broker.session.timeout.ms": 1500,
                 "workload.batches_per_second": 2.0}
    summary, series, _ = run_scenario(sc.load(sc.default_scenario_path(), overrides))
    page = render_html(summary, series, latencies_ms=series["produce_latency_samples"])
    texts = svg_texts(page)
    assert any(t.startswith("crash broker 3 (process) → restart at 4 s") for t in texts)
    assert summary["verdict"]["line"] in page
    assert all("NaN" not in t and "e-0" not in t for t in texts)
    assert "1e-09" not in page and "NaN" not in page
