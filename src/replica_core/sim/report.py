"""Run reports: ``summary.json`` (deterministic: same scenario and seed → same bytes),
``run.json`` (wall-clock figures, never compared) and a self-contained HTML page.

The page opens offline: no script, font or image is fetched; the charts are SVG written here
(axes with units and 1-2-5 ticks, fault periods shaded and named), so the bytes depend only on
the data. It starts with the verdict (each invariant PASS or FAIL with how often it was
checked, in the manner of a Jepsen result), then the scenario and its configuration, what
producers saw, each fault's recovery, the charts, losses, the fetch path and every config in
force.
"""
from __future__ import annotations

import html
import json
import math
from collections.abc import Callable, Mapping, Sequence
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


# --- numbers for people ---------------------------------------------------------------------------
def fmt_num(value: float | int | None, unit: str = "", *, digits: int = 3) -> str:
    """``12,345``, ``0.25``, ``6.24 s``: thousands separators, at most ``digits`` significant
    decimals, never an exponent, NaN or a stray ``1e-09`` (None and NaN print as a dash)."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    v = float(value)
    if abs(v) < 1e-9:
        text = "0"
    elif v.is_integer() and abs(v) < 1e15:
        text = f"{int(v):,}"
    else:
        mag = math.floor(math.log10(abs(v)))
        decimals = max(0, min(6, digits - 1 - mag))
        text = f"{v:,.{decimals}f}"
        if "." in text:
            text = text.rstrip("0").rstrip(".")
    return f"{text} {unit}".rstrip() if unit else text


def fmt_ms(ms: float) -> str:
    """A duration given in milliseconds: ``850 ms``, ``1.5 s``, ``2 min``, ``3 h``."""
    if ms < 1000:
        return fmt_num(ms, "ms")
    if ms < 120_000:
        return fmt_num(ms / 1000.0, "s")
    if ms < 7_200_000:
        return fmt_num(ms / 60_000.0, "min")
    return fmt_num(ms / 3_600_000.0, "h")


def fmt_at(seconds: float) -> str:
    """A moment on the run's clock: seconds, or the day of a long horizon."""
    if seconds < 86_400:
        return fmt_num(seconds, "s")
    return f"day {seconds / 86_400:.2f}"


def leadership_label(elected: int, unclean: int, offline: int) -> str:
    """What the controller did at one moment: ``3 leader elections, 1 unclean, 2 partitions
    offline`` (the parts that happened)."""
    labels = []
    if elected:
        labels.append(f"{elected} leader election{'s' if elected > 1 else ''}")
    if unclean:
        labels.append(f"{unclean} unclean")
    if offline:
        labels.append(f"{offline} partition{'s' if offline > 1 else ''} offline")
    return ", ".join(labels)


def nice_ticks(lo: float, hi: float, n: int = 5, *, integer: bool = False) -> list[float]:
    """Round tick values (1, 2, 2.5, 5 × 10^k steps) covering ``[lo, hi]`` with about ``n``
    intervals; the last tick is at or above ``hi``. ``integer``: steps of at least 1."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        lo, hi = 0.0, 1.0
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / max(1, n)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw - 1e-12)
    if integer:
        step = max(1.0, math.ceil(step))
    first = math.floor(lo / step + 1e-9) * step
    ticks = []
    k = 0
    while True:
        t = first + k * step
        ticks.append(round(t, 10))
        if t >= hi - 1e-9 * step:
            break
        k += 1
    return ticks


def log_ticks(lo: float, hi: float) -> list[float]:
    """Powers of ten covering ``[lo, hi]`` (both > 0)."""
    a = math.floor(math.log10(max(lo, 1e-3)))
    b = math.ceil(math.log10(max(hi, lo * 10)))
    return [10.0 ** k for k in range(a, b + 1)]


# --- SVG charts -------------------------------------------------------------------------------------
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9")
"""Okabe–Ito colours (distinguishable with colour-vision deficiencies)."""
_W, _H = 880, 260
_ML, _MR, _MT, _MB = 72, 20, 34, 46
_BAND_FILL = {"crash": "#d55e00", "shutdown": "#e69f00", "isolate": "#cc79a7",
              "partition": "#cc79a7", "slow": "#56b4e9", "drop_controller_messages": "#999999"}
_ENDS = {"crash": ("restart",), "shutdown": ("restart",), "isolate": ("unisolate", "heal"),
         "partition": ("heal_partition", "heal"), "slow": ("unslow",),
         "drop_controller_messages": ("restore_controller_messages",)}


def fault_periods(faults: Sequence[Mapping[str, Any]], end_s: float
                  ) -> tuple[list[tuple[float, float, str, str]], list[tuple[float, str]]]:
    """Fault records (``summary["fault_recovery"]``: at_s, kind, brokers, fault) as shaded
    periods ``(start, end, label, kind)`` — a crash until its broker restarts, an isolation
    until it ends, ... (open periods run to ``end_s``) — and the rest as moments."""
    periods: list[tuple[float, float, str, str]] = []
    moments: list[tuple[float, str]] = []
    used: set[int] = set()
    for i, f in enumerate(faults):
        if i in used:
            continue
        kind = str(f.get("kind", ""))
        if kind not in _ENDS:
            moments.append((float(f["at_s"]), str(f.get("fault", kind))))
            continue
        brokers = list(f.get("brokers", []))
        stop = end_s
        label = str(f.get("fault", kind))
        for j in range(i + 1, len(faults)):
            g = faults[j]
            if j in used or g.get("kind") not in _ENDS[kind]:
                continue
            if g.get("kind") == "heal" or list(g.get("brokers", [])) == brokers:
                stop = float(g["at_s"])
                label += f" → {g.get('kind')} at {fmt_num(stop)} s"
                if g.get("kind") != "heal":
                    used.add(j)
                break
        periods.append((float(f["at_s"]), stop, label, kind))
    return periods, moments


class _Frame:
    """Plot geometry: data ranges mapped to the SVG box, with the axes drawn."""

    def __init__(self, x0: float, x1: float, y_ticks: Sequence[float], *, log_x: bool = False,
                 height: int = _H) -> None:
        self.log_x = log_x
        self.x0, self.x1 = x0, x1 if x1 > x0 else x0 + 1
        self.y_ticks = list(y_ticks)
        self.y0, self.y1 = self.y_ticks[0], self.y_ticks[-1]
        if self.y1 <= self.y0:
            self.y1 = self.y0 + 1
        self.h = height

    def px(self, x: float) -> float:
        if self.log_x:
            lx = math.log10(max(x, 1e-9))
            a, b = math.log10(self.x0), math.log10(self.x1)
            return _ML + (lx - a) / (b - a) * (_W - _ML - _MR)
        return _ML + (x - self.x0) / (self.x1 - self.x0) * (_W - _ML - _MR)

    def py(self, y: float) -> float:
        return self.h - _MB - (y - self.y0) / (self.y1 - self.y0) * (self.h - _MT - _MB)


def _axes(f: _Frame, x_ticks: Sequence[float], x_label: str, y_label: str,
          fmt_x: Callable[[float], str], fmt_y: Callable[[float], str]) -> list[str]:
    out = []
    left, right = _ML, _W - _MR
    top, bottom = _MT, f.h - _MB
    for y in f.y_ticks:
        yy = f.py(y)
        out.append(f'<line x1="{left}" y1="{yy:.1f}" x2="{right}" y2="{yy:.1f}" '
                   f'class="grid"/>')
        out.append(f'<text x="{left - 6}" y="{yy + 4:.1f}" text-anchor="end" class="tick yt">'
                   f'{html.escape(fmt_y(y))}</text>')
    for x in x_ticks:
        xx = f.px(x)
        out.append(f'<line x1="{xx:.1f}" y1="{bottom}" x2="{xx:.1f}" y2="{bottom + 5}" '
                   f'class="axis"/>')
        out.append(f'<text x="{xx:.1f}" y="{bottom + 18}" text-anchor="middle" '
                   f'class="tick xt">{html.escape(fmt_x(x))}</text>')
    out.append(f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" class="axis"/>')
    out.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" class="axis"/>')
    out.append(f'<text x="{(left + right) / 2:.0f}" y="{f.h - 8}" text-anchor="middle" '
               f'class="label">{html.escape(x_label)}</text>')
    if y_label:
        out.append(f'<text transform="translate(16,{(top + bottom) / 2:.0f}) rotate(-90)" '
                   f'text-anchor="middle" class="label">{html.escape(y_label)}</text>')
    return out


def _bands(f: _Frame, periods: Sequence[tuple[float, float, str, str]],
           moments: Sequence[tuple[float, str]]) -> list[str]:
    out = []
    top, bottom = _MT, f.h - _MB
    for k, (a, b, label, kind) in enumerate(periods):
        xa, xb = f.px(max(a, f.x0)), f.px(min(b, f.x1))
        if xb < xa:
            continue
        fill = _BAND_FILL.get(kind, "#999999")
        out.append(f'<rect x="{xa:.1f}" y="{top}" width="{max(xb - xa, 1.5):.1f}" '
                   f'height="{bottom - top}" fill="{fill}" fill-opacity="0.13" class="band">'
                   f'<title>{html.escape(label)}: {fmt_num(a)}–{fmt_num(b)} s</title></rect>')
        out.append(f'<text x="{xa + 3:.1f}" y="{top + 11 + 11 * (k % 3)}" class="bandlabel" '
                   f'fill="{fill}">{html.escape(label)}</text>')
    for k, (t, label) in enumerate(moments):
        xx = f.px(t)
        out.append(f'<line x1="{xx:.1f}" y1="{top}" x2="{xx:.1f}" y2="{bottom}" '
                   f'class="moment"><title>{html.escape(label)} at {fmt_num(t)} s</title></line>')
        out.append(f'<text x="{xx + 3:.1f}" y="{bottom - 6 - 11 * (k % 3)}" '
                   f'class="bandlabel" fill="#555">{html.escape(label)}</text>')
    return out


def _svg(title: str, body: Sequence[str], height: int = _H, desc: str = "") -> str:
    d = f"<desc>{html.escape(desc)}</desc>" if desc else ""
    return (f'<figure><figcaption>{html.escape(title)}</figcaption>'
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_W} {height}" '
            f'width="{_W}" height="{height}" role="img" aria-label="{html.escape(title)}">'
            f'<title>{html.escape(title)}</title>{d}{"".join(body)}</svg></figure>')


def _legend(entries: Sequence[tuple[str, str]]) -> list[str]:
    out = []
    x = _ML
    for label, colour in entries:
        out.append(f'<rect x="{x}" y="8" width="14" height="4" fill="{colour}"/>')
        out.append(f'<text x="{x + 19}" y="14" class="legend">{html.escape(label)}</text>')
        x += 26 + 7 * len(label)
    return out


def line_chart(title: str, t: Sequence[float], series: Mapping[str, Sequence[float]], *,
               y_label: str, periods: Sequence[tuple[float, float, str, str]] = (),
               moments: Sequence[tuple[float, str]] = (), integer: bool = True,
               y_min_top: float = 1.0, x_label: str = "simulated time (s)") -> str:
    """Time series over simulated seconds, one line per entry of ``series`` (a series that
    is zero throughout says so in the legend), fault periods shaded and named."""
    t = [float(v) for v in t]
    if not t:
        return f"<h3>{html.escape(title)}</h3><p>no samples</p>"
    values = [float(v) for ys in series.values() for v in ys if math.isfinite(float(v))]
    top = max([y_min_top, *values])
    f = _Frame(min(t), max(t), nice_ticks(0.0, top, 5, integer=integer))
    body = _bands(f, periods, moments)
    body += _axes(f, nice_ticks(f.x0, f.x1, 8), x_label, y_label,
                  lambda v: fmt_num(v), lambda v: fmt_num(v))
    legend = []
    for i, (name, ys) in enumerate(series.items()):
        colour = PALETTE[i % len(PALETTE)]
        pts = [(x, float(y)) for x, y in zip(t, ys, strict=False) if math.isfinite(float(y))]
        if not pts:
            continue
        zero = all(y == 0 for _, y in pts)
        legend.append((f"{name}{' (0 at every sample)' if zero else ''}", colour))
        # sample and hold: a value holds from its sample until the next one
        coords = []
        for k, (x, y) in enumerate(pts):
            if k:
                coords.append(f"{f.px(x):.1f},{f.py(pts[k - 1][1]):.1f}")
            coords.append(f"{f.px(x):.1f},{f.py(y):.1f}")
        path = " ".join(coords)
        body.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.8" '
                    f'points="{path}"><title>{html.escape(name)}</title></polyline>')
    body += _legend(legend)
    return _svg(title, body)


def latency_cdf(title: str, latencies_ms: Sequence[float]) -> str:
    """The produce latency CDF on a logarithmic time axis, p50 and p99 marked."""
    arr = np.sort(np.asarray(latencies_ms, dtype=np.float64))
    if arr.size == 0:
        return f"<h3>{html.escape(title)}</h3><p>no acknowledged produce requests</p>"
    arr = np.maximum(arr, 1.0)  # the simulator's clock counts whole milliseconds
    n = arr.size
    lo, hi = 1.0, float(arr[-1]) * 1.05
    f = _Frame(lo, max(hi, 10.0), nice_ticks(0, 100, 5), log_x=True)
    ticks = log_ticks(lo, f.x1)
    f.x0, f.x1 = ticks[0], ticks[-1]
    body = _axes(f, ticks, "produce latency, acknowledged requests (log scale)",
                 "requests at or below (%)", fmt_ms, lambda v: fmt_num(v) + " %")
    k = max(1, n // 600)
    idx = list(range(0, n, k)) + [n - 1]
    pts = []
    for i in idx:
        pts.append(f"{f.px(float(arr[i])):.1f},{f.py(100.0 * (i + 1) / n):.1f}")
    body.append(f'<polyline fill="none" stroke="{PALETTE[0]}" stroke-width="2" '
                f'points="{" ".join(pts)}"><title>CDF of {n:,} requests</title></polyline>')
    for q, colour in ((50, PALETTE[2]), (99, PALETTE[1])):
        v = float(np.percentile(arr, q, method="lower"))
        xx = f.px(v)
        body.append(f'<line x1="{xx:.1f}" y1="{_MT}" x2="{xx:.1f}" y2="{_H - _MB}" '
                    f'stroke="{colour}" stroke-dasharray="4,3"/>')
        right = xx > _W - _MR - 90  # near the right edge: the label goes left of the line
        # at the foot of the line, where a CDF right of its p50 (left of its p99) has no curve
        body.append(f'<text x="{xx + (-4 if right else 4):.1f}" '
                    f'y="{_H - _MB - 22 + (0 if q == 50 else 14)}" '
                    f'text-anchor="{"end" if right else "start"}" class="legend" '
                    f'fill="{colour}">p{q} {html.escape(fmt_ms(v))}</text>')
    body += _legend([(f"{n:,} acknowledged requests", PALETTE[0])])
    return _svg(title, body)


def timeline_chart(title: str, end_s: float, periods: Sequence[tuple[float, float, str, str]],
                   moments: Sequence[tuple[float, str]],
                   leadership: Sequence[Sequence[float]],
                   losses: Sequence[Mapping[str, Any]]) -> str:
    """Swimlanes over simulated time: faults, leader elections (and unclean ones, and
    partitions left offline), acknowledged-record losses."""
    lanes = ("faults", "elections", "losses")
    # fault periods that would overlap (bar or label) go on rows of their own in the faults lane
    scale = (_W - _ML - _MR) / max(end_s, 1e-3)
    row_ends: list[float] = []
    rows = []
    for a, b, label, _kind in periods:
        xa = _ML + a * scale
        right = max(_ML + min(b, end_s) * scale, xa + 6 + 6.0 * len(label))
        k = next((i for i, e in enumerate(row_ends) if e <= xa), len(row_ends))
        if k == len(row_ends):
            row_ends.append(right)
        row_ends[k] = right
        rows.append(k)
    n_rows = max(1, len(row_ends))
    fault_units = max(1.0, 0.65 * n_rows)
    total = 2.0 + fault_units
    height = int(round(_MT + 34 * total + _MB))
    f = _Frame(0.0, max(end_s, 1e-3), [0.0, total], height=height)
    body = _axes(f, nice_ticks(0.0, f.x1, 8), "simulated time (s)", "",
                 lambda v: fmt_num(v), lambda v: "")
    for lane, centre in zip(lanes, (total - fault_units / 2, 1.5, 0.5), strict=True):
        y = f.py(centre)
        body.append(f'<text x="{_ML - 6}" y="{y + 4:.1f}" text-anchor="end" class="tick">'
                    f'{lane}</text>')
    row_units = fault_units / n_rows
    for (a, b, label, kind), k in zip(periods, rows, strict=True):
        y = f.py(total - (k + 0.5) * row_units)
        xa, xb = f.px(a), f.px(min(b, f.x1))
        fill = _BAND_FILL.get(kind, "#999999")
        body.append(f'<rect x="{xa:.1f}" y="{y - 9:.1f}" width="{max(xb - xa, 2):.1f}" '
                    f'height="18" fill="{fill}" fill-opacity="0.5"><title>{html.escape(label)}: '
                    f'{fmt_num(a)}–{fmt_num(b)} s</title></rect>')
        body.append(f'<text x="{xa + 3:.1f}" y="{y + 4:.1f}" class="bandlabel">'
                    f'{html.escape(label)}</text>')
    y = f.py(total - fault_units / 2)
    for t, label in moments:
        body.append(f'<circle cx="{f.px(t):.1f}" cy="{y:.1f}" r="4" fill="#555">'
                    f'<title>{html.escape(label)} at {fmt_num(t)} s</title></circle>')
    y = f.py(1.5)
    for t, elected, unclean, offline in leadership:
        label = leadership_label(int(elected), int(unclean), int(offline))
        colour = PALETTE[1] if unclean or offline else PALETTE[0]
        r = min(9.0, 3.0 + math.log10(1 + elected + unclean + offline) * 2)
        body.append(f'<circle cx="{f.px(t):.1f}" cy="{y:.1f}" r="{r:.1f}" fill="{colour}" '
                    f'fill-opacity="0.7"><title>{fmt_num(t)} s: {label}</title>'
                    f'</circle>')
    y = f.py(0.5)
    for ev in losses:
        body.append(f'<circle cx="{f.px(float(ev["found_s"])):.1f}" cy="{y:.1f}" r="5" '
                    f'fill="{PALETTE[1]}"><title>{fmt_num(float(ev["found_s"]))} s: '
                    f'{html.escape(str(ev["tp"]))} offsets {ev["first_offset"]:,}–'
                    f'{ev["last_offset"]:,} lost ({html.escape(str(ev["cause"]))})</title>'
                    f'</circle>')
    if not losses:
        body.append(f'<text x="{_ML + 8}" y="{y + 4:.1f}" class="legend">none</text>')
    return _svg(title, body, height)


# --- HTML -------------------------------------------------------------------------------------------
_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#222;
 max-width:960px;margin:1.5em auto;padding:0 1em}
h1{font-size:1.5em;margin:.2em 0}h2{font-size:1.15em;margin:1.6em 0 .5em;
 border-bottom:1px solid #ddd;padding-bottom:.2em}
.sub{color:#555;margin:.2em 0 1em}
.verdict{padding:.8em 1em;border-radius:6px;font-size:1.15em;font-weight:600;margin:1em 0 .6em}
.verdict.pass{background:#e6f4ea;border:1px solid #34a853;color:#137333}
.verdict.fail{background:#fce8e6;border:1px solid #d93025;color:#a50e0e}
table{border-collapse:collapse;margin:.4em 0 1em;font-size:13px}
th,td{padding:3px 10px;border-bottom:1px solid #eee;text-align:left;vertical-align:top}
th{background:#f6f6f6;font-weight:600}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
.badge{display:inline-block;padding:0 .5em;border-radius:3px;font-weight:700;color:#fff;
 font-size:12px}.badge.PASS{background:#1e8e3e}.badge.FAIL{background:#d93025}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:.5em 0 1em}
.card{flex:1 1 200px;border:1px solid #e3e3e3;border-radius:6px;padding:.5em .8em}
.card .k{color:#555;font-size:12px}.card .v{font-size:1.35em;font-weight:600}
.card .d{color:#666;font-size:12px}
figure{margin:1em 0}figcaption{font-weight:600;margin-bottom:.2em}
svg{max-width:100%;height:auto;background:#fff}
svg .grid{stroke:#eee}svg .axis{stroke:#888}svg .tick{font-size:11px;fill:#444}
svg .label{font-size:12px;fill:#222}svg .legend{font-size:12px;fill:#222}
svg .bandlabel{font-size:10.5px}svg .moment{stroke:#777;stroke-dasharray:3,3}
code{background:#f3f3f3;padding:0 .25em;border-radius:3px}
details{margin:.3em 0}summary{cursor:pointer}
.desc{white-space:pre-line;background:#fafafa;border-left:3px solid #ccc;padding:.5em .8em}
.muted{color:#777}
"""


def _e(value: Any) -> str:
    return html.escape(str(value))


def _table(head: Sequence[str], rows: Sequence[Sequence[Any]], numeric: Sequence[int] = ()
           ) -> str:
    num = set(numeric)
    h = "".join(f'<th{" class=n" if i in num else ""}>{_e(c)}</th>' for i, c in enumerate(head))
    body = []
    for row in rows:
        cells = "".join(f'<td{" class=n" if i in num else ""}>{c}</td>'
                        for i, c in enumerate(row))
        body.append(f"<tr>{cells}</tr>")
    return f"<table><tr>{h}</tr>{''.join(body)}</table>"


def _card(key: str, value: str, detail: str = "") -> str:
    d = f'<div class="d">{detail}</div>' if detail else ""
    return f'<div class="card"><div class="k">{_e(key)}</div><div class="v">{value}</div>{d}</div>'


def _verdict_html(summary: Mapping[str, Any]) -> str:
    v = summary.get("verdict") or {}
    ok = bool(v.get("ok", True))
    line = v.get("line", "")
    rows = [[f'<span class="badge {_e(r["status"])}">{_e(r["status"])}</span>',
             _e(r["description"]), fmt_num(r["checks"]), _e(r.get("detail") or "")]
            for r in v.get("invariants", [])]
    table = _table(["", "invariant", "checks", "detail"], rows, numeric=[2]) if rows else ""
    return (f'<div class="verdict {"pass" if ok else "fail"}">{_e(line)}</div>{table}'
            '<p class="muted">Invariants are checked while the run goes (HW, offsets and '
            'leader HW at every change; ISR agreement on changed partitions and a rotating '
            'sample; durability whenever a broker takes leadership) and over every partition '
            'at the end.</p>')


def _scenario_html(summary: Mapping[str, Any]) -> str:
    cfg = summary.get("config") or {}
    sc = cfg.get("scenario") or {}
    desc = sc.get("description") or "(no description)"
    # the TOML's line breaks are for the file; paragraphs (blank lines) are kept
    desc = "\n\n".join(" ".join(p.split()) for p in str(desc).split("\n\n"))
    topics = cfg.get("topics") or {}
    wl = sc.get("workload") or {}
    rows = [["brokers", fmt_num(summary.get("brokers"))],
            ["topics", ", ".join(
                f"{_e(n)}: {fmt_num(t['partitions'])} "
                f"partition{'s' if t['partitions'] != 1 else ''} × RF {t['replication_factor']}, "
                f"min.insync.replicas {t['min.insync.replicas']}"
                + (f" (effective {t['effective_min_isr']})"
                   if t['effective_min_isr'] != t['min.insync.replicas'] else "")
                for n, t in topics.items()) or "—"],
            ["workload", _e(f"{wl.get('batches_per_second')} batches/s per partition × "
                            f"{wl.get('records_per_batch')} records of {wl.get('record_bytes')} "
                            f"B, acks={wl.get('acks')}")],
            ["duration", fmt_num(sc.get("duration_s"), "s")
             + f" simulated, sampled every {fmt_num(sc.get('sample_interval_s'), 's')}"]
            if not sc.get("horizon_days") else
            ["horizon", f"{fmt_num(sc.get('horizon_days'))} days; fault episodes with "
             f"{fmt_num(sc.get('episode_margin_s'), 's')} of quiet before and after, sampled "
             f"every {fmt_num(sc.get('sample_interval_s'), 's')}"],
            ["seed", _e(sc.get("seed"))],
            ["truncation", _e(sc.get("truncation"))],
            ["storage", _e(sc.get("storage"))],
            ["configuration fingerprint", f"<code>{_e(cfg.get('fingerprint', '?'))}</code>"],
            ["replica-core", _e(cfg.get("replica_core_version", "?"))]]
    overrides = cfg.get("overrides") or {}
    ov = ", ".join(f"<code>{_e(k)}={_e(v)}</code>" for k, v in sorted(overrides.items()))
    rows.insert(0, ["overrides (--set, --seed)", ov or "none"])
    warn = "".join(f"<p><b>Warning:</b> {_e(w)}</p>" for w in cfg.get("warnings") or [])
    return (f'<div class="desc">{_e(desc)}</div>{warn}'
            + _table(["setting", "value"], rows))


def _figures_html(summary: Mapping[str, Any]) -> str:
    acks = (summary.get("config") or {}).get("scenario", {}).get("workload", {}).get("acks", "all")
    lat = summary.get("produce_latency_ms") or {}
    lag = summary.get("replication_lag_records") or {}
    errors = summary.get("producer_errors") or {}
    by_cause = summary.get("unavailable_partition_seconds_by_cause") or {}
    cause_text = ", ".join(f"{k.replace('_', ' ').replace('isr', 'ISR')} {fmt_num(v)}"
                           for k, v in by_cause.items() if v) or "none"
    lost = summary.get("lost_acked_records", 0)
    cards = [
        _card("unavailable to producers", fmt_num(summary.get("unavailable_partition_seconds"),
                                                  "partition-s"),
              f"acks={_e(acks)}; {_e(cause_text)}"),
        _card("offline (controller view)", fmt_num(summary.get("offline_partition_seconds"),
                                                   "partition-s"),
              "no leader at all"),
        _card("under-replicated", fmt_num(summary.get("under_replicated_partition_seconds"),
                                          "partition-s"),
              f"under min ISR {fmt_num(summary.get('under_min_isr_partition_seconds'))} "
              "partition-s"),
        _card("acknowledged records", fmt_num(summary.get("acked_records")),
              f"lost {fmt_num(lost)}; diverged partitions "
              f"{fmt_num(summary.get('diverged_partitions'))}; in the logs: "
              f"{fmt_num(summary.get('duplicate_batches', 0))} batches twice, "
              f"{fmt_num(summary.get('reordered_batches'))} out of produce order"),
        _card("produce latency p99", fmt_ms(float(lat.get("p99", 0))),
              f"p50 {fmt_ms(float(lat.get('p50', 0)))}, max {fmt_ms(float(lat.get('max', 0)))}"),
        _card("producer errors", fmt_num(sum(errors.values())),
              _e(", ".join(f"{k} {v:,}" for k, v in errors.items()) or "none")
              + f"; {fmt_num(summary.get('producer_retries', 0))} retries, "
              f"{fmt_num(summary.get('failed_batches', 0))} batches failed"),
        _card("leader elections", fmt_num(summary.get("leader_elections")),
              f"unclean {fmt_num(summary.get('unclean_elections'))}"),
        _card("replication lag", fmt_num(lag.get("max"), "records"),
              f"max; p99 {fmt_num(lag.get('p99'))}, p50 {fmt_num(lag.get('p50'))}"),
    ]
    return f'<div class="cards">{"".join(cards)}</div>'


def _recovery_html(summary: Mapping[str, Any]) -> str:
    rows = []
    def after(r: Mapping[str, Any], key: str) -> str:
        v = r.get(key)
        return "—" if v is None else "+" + fmt_ms(1000.0 * float(v))

    for r in summary.get("fault_recovery") or []:
        rows.append([fmt_at(r["at_s"]), _e(r["fault"]), after(r, "detected_after_s"),
                     after(r, "leaders_after_s"), after(r, "writable_after_s"),
                     after(r, "isr_full_after_s")])
    if not rows:
        return "<p>No faults were injected.</p>"
    return (_table(["at", "fault", "detected", "leaders again", "writable again",
                    "ISRs full again"], rows, numeric=[0, 2, 3, 4, 5]) + _storage_html(summary)
            + '<p class="muted">Measured from the fault: <b>detected</b> when the controller '
            'declared the broker dead (session expiry, or at once for a controlled shutdown); '
            '<b>leaders again</b> when every partition had a live, reachable leader; '
            '<b>writable again</b> when producers with the workload\'s acks could write to '
            'every partition; <b>ISRs full again</b> when no partition was under-replicated. '
            '— : the fault caused no such trouble (or it had not ended when the run did).</p>')


def storage_fault_lines(summary: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The storage faults of a run and the recovery they caused, as (label, text) lines;
    none when no storage fault was injected and recovery cut nothing."""
    sf = summary.get("storage_faults") or {}
    rec = sf.get("recovery") or {}
    injected = {k: v for k, v in sf.items() if k != "recovery" and v}
    if not injected and not rec.get("bytes_truncated") and not rec.get("indexes_rebuilt"):
        return []
    lines = [("storage faults", ", ".join(f"{k.replace('_', ' ')} {v:,}"
                                          for k, v in injected.items()) or "none")]
    cuts = ", ".join(f"{r} {n:,}" for r, n in (rec.get("truncations_by_reason") or {}).items()
                     if n)
    lines.append(("log recovery", (
        f"{rec.get('segments_recovered', 0):,} segments recovered in "
        f"{rec.get('logs_recovered', 0):,} logs; {rec.get('bytes_truncated', 0):,} B truncated"
        f"{' (' + cuts + ')' if cuts else ''}; {rec.get('segments_deleted', 0):,} segments "
        f"deleted; {rec.get('indexes_rebuilt', 0):,} indexes rebuilt")))
    return lines


_LONG_MAX = 2**63 - 1
"""Kafka's Long.MAX_VALUE: ``flush.messages`` / ``flush.ms`` default, "never"."""

_REFUSAL_MEANING = {
    ("LeaderAndIsr", "BROKER_NOT_AVAILABLE"): "not registered yet, KIP-380",
    ("UpdateMetadata", "BROKER_NOT_AVAILABLE"): "not registered yet, KIP-380",
    ("LeaderAndIsr", "STALE_BROKER_EPOCH"): "meant for a previous process, KIP-380",
    ("UpdateMetadata", "STALE_BROKER_EPOCH"): "meant for a previous process, KIP-380",
    ("AlterPartition", "INELIGIBLE_REPLICA"): "joining replica not eligible, KIP-903",
    ("Fetch", "stale replica epoch"): "a previous incarnation's fetch moved nothing, KIP-903",
}


def _count(n: int, what: str, plural: str = "") -> str:
    return f"{n:,} {what if n == 1 else (plural or what + 's')}"


def feature_lines(summary: Mapping[str, Any]) -> list[tuple[str, str]]:
    """What decided a run's outcome beyond replication itself, as (label, text) lines for the
    console and the report, each shown when the run uses or sets it: the producer's
    idempotence and epoch bumps; the log flush policy (with power failures or storage faults);
    eligible leader replicas (KIP-966, shown when enabled or set); broker-epoch fencing
    (KIP-380, KIP-903: switched off, or requests refused); retention; rack placement."""
    cfg = summary.get("config") or {}
    kafka = cfg.get("kafka") or {}
    scenario = cfg.get("scenario") or {}
    cluster = scenario.get("cluster") or {}
    broker = kafka.get("broker") or {}
    producer = kafka.get("producer") or {}
    log = kafka.get("log") or {}
    rows: list[tuple[str, str]] = []
    if producer:
        idem = str(producer.get("enable.idempotence", True)).lower() == "true"
        rows.append(("idempotent producer", (
            f"{'on' if idem else 'off'} (enable.idempotence={str(idem).lower()}, "
            "max.in.flight.requests.per.connection "
            f"{producer.get('max.in.flight.requests.per.connection', '?')}); "
            + _count(int(summary.get("producer_epoch_bumps", 0)), "producer epoch bump"))))
    power = any(str(f.get("mode")) == "power" for f in scenario.get("faults") or [])
    sf = summary.get("storage_faults") or {}
    if power or any(v for k, v in sf.items() if k != "recovery"):
        def setting(key: str) -> int:
            try:
                return int(log.get(key, _LONG_MAX))
            except (TypeError, ValueError):
                return _LONG_MAX

        messages, ms = setting("flush.messages"), setting("flush.ms")
        rows.append(("log flush (fsync)", (
            "flush.messages " + ("never" if messages == _LONG_MAX else f"{messages:,}")
            + ", flush.ms " + ("never" if ms == _LONG_MAX else f"{ms:,} ms")
            + ("; Kafka's default: no fsync on the produce path, a power failure keeps only "
               "what the OS had written back" if messages == ms == _LONG_MAX else ""))))
    elr = summary.get("elr")
    if elr is not None:
        rows.append(("eligible leader replicas", (
            "on (KIP-966): "
            + _count(int(elr.get("elections", 0)), "leader") + " elected from the ELR, "
            + _count(int(elr.get("unclean_shutdowns", 0)), "unclean shutdown")
            + " removed a broker from an ISR or ELR")))
    elif "eligible.leader.replicas.enable" in (scenario.get("configs") or {}):
        rows.append(("eligible leader replicas",
                     "off (eligible.leader.replicas.enable=false): a last ISR member back "
                     "from an unclean shutdown can be elected again"))
    fencing = []
    if not cluster.get("detect_bounces", True):
        fencing.append("KIP-380 off (cluster.detect_bounces=false): a restarted broker acts "
                       "on requests meant for its previous process")
    if str(broker.get("isr.broker.epochs", True)).lower() == "false":
        fencing.append("KIP-903 off (isr.broker.epochs=false): fetches and ISR changes carry "
                       "no broker epoch")
    refused = summary.get("requests_refused") or {}
    if refused:
        fencing.append("refused " + ", ".join(
            f"{api} {err} {n:,}"
            + (f" ({_REFUSAL_MEANING[api, err]})" if (api, err) in _REFUSAL_MEANING else "")
            for api, errs in refused.items() for err, n in errs.items()))
    if fencing:
        rows.append(("broker epochs", "; ".join(fencing)))
    ret = summary.get("retention")
    if ret:
        rows.append(("retention", (
            _count(int(ret.get("segments_deleted", 0)), "segment") + " deleted; "
            + _count(int(ret.get("follower_fetches_out_of_range", 0)), "follower fetch",
                     "follower fetches")
            + " answered OFFSET_OUT_OF_RANGE (the follower restarts at the leader's log "
            "start)")))
    placement = summary.get("rack_placement")
    if placement is not None:
        racks = cluster.get("racks")
        pairs = (list(enumerate(racks, 1)) if isinstance(racks, list)
                 else [(int(b), r) for b, r in (racks or {}).items()])
        by_rack: dict[str, list[str]] = {}
        for b, r in sorted(pairs):
            by_rack.setdefault(str(r), []).append(str(b))
        spans = placement.get("partitions_by_racks_spanned") or {}
        total = sum(spans.values())
        rows.append(("racks (brokers)", "; ".join(
            f"{r}: {', '.join(bs)}" for r, bs in sorted(by_rack.items()))
            + "; replicas span " + ", ".join(
                f"{_count(int(n), 'rack')} in {c:,}/{total:,} partitions"
                for n, c in sorted(spans.items(), key=lambda kv: -int(kv[0])))))
    return rows


def _features_html(summary: Mapping[str, Any]) -> str:
    lines = feature_lines(summary)
    if not lines:
        return "<p>Nothing beyond the defaults above.</p>"
    return _table(["feature", "in this run"], [[_e(k), _e(v)] for k, v in lines])


def _storage_html(summary: Mapping[str, Any]) -> str:
    lines = storage_fault_lines(summary)
    if not lines:
        return ""
    return _table(["storage", "what happened"], [[_e(k), _e(v)] for k, v in lines])


def _unavailability_html(summary: Mapping[str, Any]) -> str:
    by_cause = summary.get("unavailable_partition_seconds_by_cause") or {}
    text = {
        "no_leader": "no leader (the controller's offline partitions)",
        "leader_down": "the leader's process is down, the controller has not noticed yet",
        "leader_unreachable": "the leader runs but producers cannot reach it",
        "leader_not_ready": "elected leader has not applied its LeaderAndIsr yet",
        "under_min_isr": "ISR below min.insync.replicas (blocks acks=all only)",
    }
    rows = [[_e(k), _e(text.get(k, "")), fmt_num(v)] for k, v in by_cause.items()]
    by_acks = summary.get("unavailable_partition_seconds_by_acks") or {}
    foot = ", ".join(f"acks={_e(k)}: {fmt_num(v)} partition-s" for k, v in by_acks.items())
    return _table(["cause", "meaning", "partition-s"], rows, numeric=[2]) + \
        (f'<p class="muted">Total as producers see it: {foot}.</p>' if foot else "")


def _isr_html(summary: Mapping[str, Any]) -> str:
    names = {"alter_partition": "partition leaders (AlterPartition)",
             "broker_failure": "controller: broker lost (session expired)",
             "controlled_shutdown": "controller: controlled shutdown",
             "election": "controller: offline partition elected"}
    rows = [[_e(names.get(k, k)), fmt_num(v.get("shrink", 0)), fmt_num(v.get("expand", 0)),
             fmt_num(v.get("replace", 0))]
            for k, v in (summary.get("isr_changes_by_origin") or {}).items()]
    if not rows:
        return "<p>The ISRs never changed.</p>"
    return _table(["who", "shrinks", "expansions", "other changes"], rows, numeric=[1, 2, 3])


def _losses_html(summary: Mapping[str, Any]) -> str:
    events = summary.get("loss_events") or []
    if not events:
        return "<p>No acknowledged record was lost.</p>"
    def order(ev: Mapping[str, Any]) -> tuple[Any, ...]:  # events-2 before events-10
        topic, _, part = str(ev["tp"]).rpartition("-")
        return (ev["found_s"], topic, int(part) if part.isdigit() else -1, str(ev["tp"]),
                ev["first_offset"])

    events = sorted(events, key=order)
    rows = [[fmt_num(ev["found_s"], "s"), _e(ev["tp"]),
             f"{ev['first_offset']:,}–{ev['last_offset']:,}", fmt_num(ev["records"]),
             _e(ev["acks"]), _e(str(ev["cause"]).replace("_", " ")),
             _e(ev.get("fault") or "—"), fmt_num(ev["new_leader"])] for ev in events]
    more = summary.get("loss_events_not_listed", 0)
    tail = f"<p>… and {fmt_num(more)} more loss events (not listed).</p>" if more else ""
    return _table(["found at", "partition", "offsets", "records", "acks", "cause",
                   "fault", "new leader"], rows, numeric=[0, 3]) + tail


def _fetch_html(summary: Mapping[str, Any]) -> str:
    fp = summary.get("fetch_path") or {}
    per = fp.get("per_broker") or {}
    if not per:
        return "<p>No fetch-path figures.</p>"
    cols = [("follower_fetch_requests_per_s", "follower fetches/s"),
            ("full_fetches", "full"), ("incremental_fetches", "incremental"),
            ("sessionless_fetches", "sessionless"), ("fetch_session_errors", "session errors"),
            ("session_evictions", "session evictions"),
            ("delayed_fetches_completed", "delayed: completed"),
            ("delayed_fetches_expired", "delayed: expired"),
            ("incremental_fetch_sessions_at_end", "sessions at end")]
    rows = [[_e(b)] + [fmt_num(m.get(k, 0)) for k, _ in cols] for b, m in per.items()]
    total = fp.get("total") or {}
    rows.append(["<b>all</b>"] + [f"<b>{fmt_num(total.get(k, 0))}</b>" for k, _ in cols])
    return (_table(["broker (as leader)"] + [c for _, c in cols], rows,
                   numeric=list(range(1, len(cols) + 1)))
            + '<p class="muted">Kafka\'s meters, summed over each broker\'s restarts: '
            'FetchRequestsPerSec (follower), FullFetches / IncrementalFetches / '
            'SessionlessFetches (KIP-227), FetchSessionErrors, '
            'IncrementalFetchSessionEvictionsPerSec; delayed fetches completed before '
            'replica.fetch.wait.max.ms (DelayedFetch completions − FetchExpiresPerSec) and '
            'expired; NumIncrementalFetchSessions at the end.</p>')


def _config_html(summary: Mapping[str, Any]) -> str:
    cfg = summary.get("config") or {}
    kafka = cfg.get("kafka") or {}
    set_keys = set((cfg.get("scenario") or {}).get("configs") or {})
    parts = []
    titles = {"broker": "broker (replication)", "log": "log / topic defaults",
              "controller": "controller", "producer": "producer"}
    for group, values in kafka.items():
        rows = [[f"<code>{_e(k)}</code>", _e(v), "set" if k in set_keys else "default"]
                for k, v in values.items()]
        parts.append(f"<details><summary>{_e(titles.get(group, group))}: {len(rows)} "
                     f"settings, {sum(1 for r in rows if r[2] == 'set')} set</summary>"
                     + _table(["config", "value", ""], rows) + "</details>")
    sc = cfg.get("scenario") or {}
    parts.append("<details><summary>effective scenario (after overrides)</summary><pre>"
                 + _e(json.dumps(_canonical(sc), indent=2, sort_keys=True)) + "</pre></details>")
    return "".join(parts)


def _episodes_html(horizon: Mapping[str, Any]) -> str:
    rows = [[fmt_at(e["start_s"]), fmt_ms(1000.0 * float(e["length_s"])), fmt_num(e["faults"]),
             fmt_num(e["lost_acked_records"]), fmt_num(e["unavailable_partition_seconds"]),
             "yes" if e["settled"] else "<b>no</b>"]
            for e in horizon.get("episode_list") or []]
    more = int(horizon.get("episodes_not_listed", 0))
    note = (f"<p class='muted'>{fmt_num(more)} more episodes are counted but not listed.</p>"
            if more else "")
    return (_table(["starts", "simulated", "faults", "lost acked records",
                    "unavailable partition-s", "ended healthy"], rows,
                   numeric=[0, 1, 2, 3, 4]) + note
            + f"<p class='muted'>The faults were drawn over {fmt_num(horizon['days'])} days; "
            f"only these episodes were simulated ({100 * float(horizon['simulated_fraction']):.2g}"
            f" % of the horizon), each from {fmt_num(horizon['episode_margin_s'], 's')} before "
            "its first fault to as long after its last one ended, and on until the cluster was "
            "healthy (every broker up, every ISR full, no client blocked). Between episodes "
            "the cluster is healthy and nothing is lost; each episode is a fresh cluster "
            "(replica_core.sim.episodes).</p>")


def render_html(summary: Mapping[str, Any], timeseries: Mapping[str, Sequence[Any]],
                latencies_ms: Sequence[float] = (), events: Sequence[tuple[float, str]] = (),
                *, title_suffix: str = "") -> str:
    """The report page (``timeseries['t']`` in simulated seconds). ``events`` (time, label)
    are drawn as moments when the summary carries no fault records."""
    t = list(timeseries.get("t", []))
    end_s = float(summary.get("sim_seconds") or (t[-1] if t else 0.0))
    periods, moments = fault_periods(summary.get("fault_recovery") or [], end_s)
    if not summary.get("fault_recovery") and events:
        moments = [(float(s), str(label)) for s, label in events]
    name = str(summary.get("scenario_name", "simulation"))
    title = name + (f" ({title_suffix})" if title_suffix else "")
    horizon = summary.get("horizon")
    acks = (summary.get("config") or {}).get("scenario", {}).get("workload", {}).get("acks",
                                                                                       "all")
    charts = [
        line_chart("Partitions producers cannot write to, and offline partitions", t, {
            f"unavailable to producers (acks={acks})": timeseries.get("unavailable", []),
            "offline (no leader, controller view)": timeseries.get("offline", []),
        }, y_label="partitions", periods=periods, moments=moments),
        line_chart("Under-replicated partitions", t, {
            "under-replicated (ISR < replicas)": timeseries.get("under_replicated", []),
            "under min ISR": timeseries.get("under_min_isr", []),
        }, y_label="partitions", periods=periods, moments=moments),
        line_chart("Mean ISR size (partitions with a leader)", t,
                   {"mean ISR size": timeseries.get("mean_isr_size", [])},
                   y_label="replicas in ISR", periods=periods, moments=moments, integer=False),
        line_chart("Replication lag (leader LEO − follower LEO)", t, {
            "max over followers": timeseries.get("max_lag", []),
            "mean over followers": timeseries.get("mean_lag", []),
        }, y_label="records behind", periods=periods, moments=moments, integer=False),
        latency_cdf("Produce latency (acknowledged requests, CDF)", latencies_ms),
        timeline_chart("Timeline: faults, leader elections, losses", end_s, periods, moments,
                       list(timeseries.get("leadership", [])),
                       summary.get("loss_events") or []),
    ]
    simulated = f"{fmt_num(end_s, 's')} simulated"
    over_time = f"<h2 id='over-time'>Over time</h2>{''.join(charts)}"
    if horizon:
        days = float(horizon["days"])
        simulated = (f"{fmt_num(days)} day{'' if days == 1 else 's'} in "
                     f"{fmt_num(horizon['episodes'])} fault "
                     f"episodes ({fmt_num(horizon['simulated_seconds'], 's')} simulated)")
        over_time = (f"<h2 id='episodes'>Fault episodes</h2>{_episodes_html(horizon)}"
                     f"{charts[4]}")
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>replica-core: {_e(title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>replica-core simulation: {_e(title)}</h1>"
        f"<p class='sub'>seed {_e(summary.get('seed'))} · {fmt_num(summary.get('brokers'))} "
        f"brokers · {fmt_num(summary.get('partitions'))} partitions · "
        f"{simulated} · truncation {_e(summary.get('truncation'))}</p>"
        f"<h2 id='verdict'>Verdict</h2>{_verdict_html(summary)}"
        f"<h2 id='scenario'>Scenario</h2>{_scenario_html(summary)}"
        f"<h2 id='what-clients-saw'>What clients saw</h2>{_figures_html(summary)}"
        f"<h2 id='features'>Producer, flush, fencing, retention, racks</h2>"
        f"{_features_html(summary)}"
        f"<h2 id='faults-and-recovery'>Faults and recovery</h2>{_recovery_html(summary)}"
        f"{over_time}"
        f"<h2 id='unavailability-by-cause'>Unavailability by cause</h2>{_unavailability_html(summary)}"
        f"<h2 id='isr-changes-by-who-made-them'>ISR changes by who made them</h2>{_isr_html(summary)}"
        f"<h2 id='lost-acknowledged-records'>Lost acknowledged records</h2>{_losses_html(summary)}"
        f"<h2 id='fetch-path-leader-side'>Fetch path (leader side)</h2>{_fetch_html(summary)}"
        f"<h2 id='configuration-in-force'>Configuration in force</h2>{_config_html(summary)}"
        "<p class='muted'>summary.json holds every figure on this page; the same scenario "
        "and seed give the same bytes. timeseries.csv holds the sampled series.</p>"
        "</body></html>\n"
    )
