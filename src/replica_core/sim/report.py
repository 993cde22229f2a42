"""Run reports: ``summary.json`` (deterministic: same scenario and seed → same bytes),
``run.json`` (wall-clock figures, never compared) and a self-contained HTML page with SVG plots.

No plotting library: the charts are a few SVG polylines, so the report renders anywhere and the
bytes depend only on the data.
"""
from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np


def distribution(values: Sequence[float] | np.ndarray) -> dict[str, float]:
    """p50, p99 and max (0 for an empty sample), rounded to 3 decimals for stable output."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 0:
        return {"p50": 0.0, "p99": 0.0, "max": 0.0, "count": 0}
    p50, p99 = np.percentile(arr, [50, 99], method="lower")
    return {"p50": round(float(p50), 3), "p99": round(float(p99), 3),
            "max": round(float(arr.max()), 3), "count": int(arr.size)}


def _canonical(obj: Any) -> Any:
    if isinstance(obj, float):
        if math.isnan(obj) or math.isinf(obj):
            return None
        return round(obj, 6)
    if isinstance(obj, Mapping):
        return {str(k): _canonical(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_canonical(v) for v in obj]
    if isinstance(obj, np.generic):
        return _canonical(obj.item())
    return obj


def dumps_canonical(obj: Any) -> str:
    """JSON with sorted keys and rounded floats: byte-identical for identical runs."""
    return json.dumps(_canonical(obj), sort_keys=True, indent=2) + "\n"


def write_json(path: str | Path, obj: Any) -> None:
    Path(path).write_text(dumps_canonical(obj), encoding="utf-8")


# --- HTML -------------------------------------------------------------------------------------
_W, _H, _PAD = 640, 200, 36
_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")


def _svg_lines(title: str, xs: Sequence[float], series: Mapping[str, Sequence[float]],
               x_label: str = "simulated seconds", markers: Sequence[tuple[float, str]] = ()) -> str:
    xs = list(xs)
    all_y = [y for ys in series.values() for y in ys]
    if not xs or not all_y:
        return f"<h3>{html.escape(title)}</h3><p>no data</p>"
    x0, x1 = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
    y1 = max(max(all_y), 1e-9)

    def px(x: float) -> float:
        return _PAD + (x - x0) / (x1 - x0) * (_W - 2 * _PAD)

    def py(y: float) -> float:
        return _H - _PAD + 8 - y / y1 * (_H - 2 * _PAD)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H + 20}" '
             f'font-family="sans-serif" font-size="11">',
             f'<line x1="{_PAD}" y1="{py(0):.1f}" x2="{_W - _PAD}" y2="{py(0):.1f}" stroke="#999"/>',
             f'<line x1="{_PAD}" y1="{py(0):.1f}" x2="{_PAD}" y2="{py(y1):.1f}" stroke="#999"/>',
             f'<text x="2" y="{py(y1) + 4:.1f}">{y1:.4g}</text>',
             f'<text x="2" y="{py(0) + 4:.1f}">0</text>',
             f'<text x="{_W / 2 - 40:.0f}" y="{_H + 14}">{html.escape(x_label)}</text>',
             f'<text x="{_PAD}" y="{_H + 14}">{x0:.4g}</text>',
             f'<text x="{_W - _PAD - 20}" y="{_H + 14}">{x1:.4g}</text>']
    for t, label in markers:
        parts.append(f'<line x1="{px(t):.1f}" y1="{py(0):.1f}" x2="{px(t):.1f}" y2="{py(y1):.1f}" '
                     f'stroke="#bbb" stroke-dasharray="3,3"><title>{html.escape(label)}</title></line>')
    for i, (name, ys) in enumerate(series.items()):
        colour = _COLOURS[i % len(_COLOURS)]
        pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(xs, ys, strict=False))
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{pts}"/>')
        parts.append(f'<text x="{_W - _PAD - 150}" y="{14 + 13 * i}" fill="{colour}">'
                     f'{html.escape(name)}</text>')
    parts.append("</svg>")
    return f"<h3>{html.escape(title)}</h3>" + "".join(parts)


def _svg_histogram(title: str, values: Sequence[float], bins: int = 40,
                   x_label: str = "ms") -> str:
    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 0:
        return f"<h3>{html.escape(title)}</h3><p>no data</p>"
    counts, edges = np.histogram(arr, bins=bins)
    centres = (edges[:-1] + edges[1:]) / 2
    return _svg_lines(title, centres.tolist(), {"count": counts.tolist()}, x_label=x_label)


def render_html(summary: Mapping[str, Any], timeseries: Mapping[str, Sequence[float]],
                latencies_ms: Sequence[float] = (), events: Sequence[tuple[float, str]] = ()) -> str:
    """One page: the summary table and the time-series plots (``timeseries['t']`` = seconds)."""
    t = timeseries.get("t", [])
    rows = "".join(
        f"<tr><td>{html.escape(str(k))}</td><td>{html.escape(json.dumps(_canonical(v)))}</td></tr>"
        for k, v in sorted(summary.items()) if k != "scenario"
    )
    charts = [
        _svg_lines("Under-replicated and offline partitions", t, {
            "under-replicated": timeseries.get("under_replicated", []),
            "offline": timeseries.get("offline", []),
            "under min ISR": timeseries.get("under_min_isr", []),
        }, markers=events),
        _svg_lines("Mean ISR size", t, {"mean ISR size": timeseries.get("mean_isr_size", [])},
                   markers=events),
        _svg_lines("Replication lag (records, max over partitions)", t,
                   {"max lag": timeseries.get("max_lag", []),
                    "mean lag": timeseries.get("mean_lag", [])}, markers=events),
        _svg_lines("Leader elections (cumulative)", t,
                   {"elections": timeseries.get("elections", []),
                    "unclean": timeseries.get("unclean_elections", [])}, markers=events),
        _svg_histogram("Produce latency distribution (acknowledged requests)", latencies_ms),
    ]
    name = html.escape(str(summary.get("scenario_name", "simulation")))
    event_list = "".join(f"<li>{s:.3f}s: {html.escape(e)}</li>" for s, e in events)
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>replica-core: {name}</title>"
        "<style>body{font-family:sans-serif;max-width:760px;margin:2em auto}"
        "td{padding:2px 8px;border-bottom:1px solid #eee;font-size:13px}</style></head><body>"
        f"<h1>replica-core simulation: {name}</h1>"
        f"<table>{rows}</table>{''.join(charts)}"
        f"<h3>Fault and election timeline</h3><ul>{event_list}</ul></body></html>\n"
    )
