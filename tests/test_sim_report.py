"""Report writing: deterministic JSON, distributions, HTML with plots."""
import json

from replica_core.sim.report import distribution, dumps_canonical, render_html


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


def test_html_contains_every_chart_and_summary():
    page = render_html(
        {"acked_records": 10, "scenario_name": "demo"},
        {"t": [0, 1, 2], "under_replicated": [0, 3, 1], "offline": [0, 0, 0],
         "mean_isr_size": [3, 2.5, 3], "max_lag": [0, 10, 2], "elections": [0, 1, 1]},
        latencies_ms=[1, 2, 2, 3, 50], events=[(1.0, "crash broker 1")],
    )
    assert page.count("<svg") == 5
    assert "acked_records" in page and "crash broker 1" in page and "demo" in page
