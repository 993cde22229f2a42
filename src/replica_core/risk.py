"""The risk estimate: many seeded runs of one configuration turned into the figures a planner
asks for — how likely is it to lose acknowledged data, how much, and how long are writes
refused — each with its uncertainty, and how many seeds a narrower answer would take.

Pure functions over sweep result rows (mappings with ``lost_acked_records``,
``unavailable_partition_seconds``, ``sim_seconds`` and, for pairing, ``seed_index``):

* :func:`risk_estimate` — per configuration: P(a run loses any acknowledged record) with a
  Wilson 95 % score interval; acknowledged records lost per simulated year and unavailable
  (client-view) partition-seconds per simulated year, each a mean over the runs with a 95 %
  Student-t interval; the loss sizes of the runs that lost data as quantiles; the seeds needed
  for a requested interval width (:func:`seeds_for_proportion`, :func:`seeds_for_mean`).
* :func:`paired_comparison` — two configurations run on the same seeds (common random
  numbers: the same fault schedule): the per-seed differences with a 95 % interval, and the
  discordant seeds (one lost data, the other did not) with McNemar's exact two-sided test.

A year is 8,760 hours (:data:`SECONDS_PER_YEAR`), as in the fault rates
(:data:`replica_core.sim.faults.HOURS_PER_YEAR`). Per-year figures are per-run totals divided
by the run's simulated years: with rates accelerated to make faults frequent in a short run,
they describe that accelerated world, not the planner's.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from replica_core.sim.faults import HOURS_PER_YEAR
from replica_core.sweep import mean_ci95, t975, wilson

SECONDS_PER_YEAR = HOURS_PER_YEAR * 3600.0
Z95 = 1.959964
"""The two-sided 95 % point of the standard normal (the Wilson interval's z)."""
LOSS_QUANTILES = (0.5, 0.9, 0.99)


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q``-quantile of ``values`` by linear interpolation between order statistics
    (Hyndman and Fan's type 7, numpy's default): position ``q·(n−1)`` in the sorted values."""
    if not values:
        raise ValueError("no values")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must be within [0, 1], got {q}")
    xs = sorted(float(v) for v in values)
    pos = q * (len(xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def wilson_half_width(p: float, n: float, z: float = Z95) -> float:
    """Half the width of the Wilson score interval at observed proportion ``p`` over ``n``
    runs (before clipping to [0, 1])."""
    if n <= 0:
        raise ValueError(f"needs n > 0, got {n}")
    return z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)


def seeds_for_proportion(p: float, half_width: float, z: float = Z95) -> int:
    """The fewest runs whose Wilson 95 % interval around proportion ``p`` is at most
    ±``half_width`` (the half-width falls as runs are added). At p = ½ this is
    ``⌈z²/(4h²) − z²⌉``: 381 runs for ±0.05."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be within [0, 1], got {p}")
    if not 0.0 < half_width < 0.5:
        raise ValueError(f"half_width must be within (0, 0.5), got {half_width}")
    lo, hi = 1, 1
    while wilson_half_width(p, hi, z) > half_width:
        lo, hi = hi, hi * 2
    while lo < hi:  # the smallest n in [lo, hi] meeting the width
        mid = (lo + hi) // 2
        if wilson_half_width(p, mid, z) <= half_width:
            hi = mid
        else:
            lo = mid + 1
    return lo


def seeds_for_mean(sd: float, half_width: float) -> int | None:
    """The fewest runs whose Student-t 95 % interval of a mean is at most ±``half_width``
    when the runs' standard deviation is ``sd``: the smallest n ≥ 2 with
    ``t₀.₉₇₅(n−1)·sd/√n ≤ half_width``. None when ``half_width`` is not positive; 2 when
    ``sd`` is 0."""
    if sd < 0:
        raise ValueError(f"sd must not be negative, got {sd}")
    if not half_width > 0:
        return None
    n = max(2, math.ceil((1.96 * sd / half_width) ** 2))
    while t975(n - 1) * sd / math.sqrt(n) > half_width:
        n += 1
    while n > 2 and t975(n - 2) * sd / math.sqrt(n - 1) <= half_width:
        n -= 1
    return n


def _sd(values: Sequence[float]) -> float:
    n = len(values)
    if n < 2:
        return 0.0
    mean = sum(values) / n
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))


def mean_interval(values: Sequence[float]) -> dict[str, Any]:
    """``{"mean", "ci95": [lo, hi] | None, "sd", "n"}``: the mean with a Student-t 95 %
    interval (none from a single value)."""
    mean, lo, hi = mean_ci95(values)
    return {"mean": mean, "ci95": None if lo is None else [lo, hi], "sd": _sd(values),
            "n": len(values)}


def per_year(runs: Sequence[Mapping[str, Any]], key: str) -> dict[str, Any]:
    """``key`` per simulated year: each run's value over its ``sim_seconds`` as years, then
    the mean over the runs with a 95 % interval (:func:`mean_interval`)."""
    rates = []
    for r in runs:
        seconds = float(r["sim_seconds"])
        if not seconds > 0:
            raise ValueError(f"a run with sim_seconds {seconds!r} has no time to rate over")
        rates.append(float(r[key]) * SECONDS_PER_YEAR / seconds)
    return mean_interval(rates)


def loss_sizes(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The acknowledged records lost by the runs that lost any: how many such runs, their
    mean, quantiles (:data:`LOSS_QUANTILES`, type 7) and maximum; None figures when no run
    lost anything."""
    sizes = [float(r["lost_acked_records"]) for r in runs if r["lost_acked_records"] > 0]
    out: dict[str, Any] = {"runs": len(sizes), "mean": None, "max": None}
    for q in LOSS_QUANTILES:
        out[f"p{round(q * 100)}"] = quantile(sizes, q) if sizes else None
    if sizes:
        out["mean"] = sum(sizes) / len(sizes)
        out["max"] = max(sizes)
    return out


def risk_estimate(runs: Sequence[Mapping[str, Any]], *, p_loss_half_width: float = 0.05,
                  per_year_relative_half_width: float = 0.25) -> dict[str, Any]:
    """The risk figures of one configuration's runs (see the module docstring).

    ``seeds_needed`` states how many runs would narrow P(any loss) to ±``p_loss_half_width``
    (at the observed proportion; at ½ when it is 0 or 1 — the worst case, since an observed 0
    says little about the true value) and the per-year loss and unavailability to ±
    ``per_year_relative_half_width`` of their means (at the observed spread; None when the
    mean is 0, where no relative width exists)."""
    if not runs:
        raise ValueError("no runs")
    n = len(runs)
    k = sum(1 for r in runs if r["lost_acked_records"] > 0)
    lo, hi = wilson(k, n)
    seconds = sum(float(r["sim_seconds"]) for r in runs)
    lost = per_year(runs, "lost_acked_records")
    unavailable = per_year(runs, "unavailable_partition_seconds")
    p = k / n
    p_plan = p if 0 < k < n else 0.5

    def relative(m: Mapping[str, Any]) -> int | None:
        if not m["mean"] > 0:
            return None
        return seeds_for_mean(m["sd"], per_year_relative_half_width * m["mean"])

    return {
        "runs": n, "sim_seconds": seconds, "sim_years": seconds / SECONDS_PER_YEAR,
        "p_any_loss": {"runs_losing": k, "runs": n, "p": p, "wilson95": [lo, hi]},
        "lost_records_per_year": lost,
        "loss_size": loss_sizes(runs),
        "unavailable_partition_seconds_per_year": unavailable,
        "seeds_needed": {
            "p_any_loss_half_width": p_loss_half_width,
            "p_any_loss": seeds_for_proportion(p_plan, p_loss_half_width),
            "p_any_loss_at": p_plan,
            "per_year_relative_half_width": per_year_relative_half_width,
            "lost_records_per_year": relative(lost),
            "unavailable_partition_seconds_per_year": relative(unavailable),
        },
    }


def mcnemar_exact_p(a_only: int, b_only: int) -> float:
    """McNemar's exact two-sided p-value for the discordant pairs (``a_only`` seeds where only
    A lost data, ``b_only`` where only B did): under "A and B lose equally often" each
    discordant seed goes either way with probability ½, so the p-value is
    ``min(1, 2·P(X ≤ min(a_only, b_only)))`` for X ~ Binomial(a_only + b_only, ½)."""
    if a_only < 0 or b_only < 0:
        raise ValueError("counts must not be negative")
    m = a_only + b_only
    if m == 0:
        return 1.0
    tail = sum(math.comb(m, i) for i in range(min(a_only, b_only) + 1)) / 2.0 ** m
    return min(1.0, 2.0 * tail)


PAIRED_METRICS = ("lost_acked_records", "unavailable_partition_seconds")
"""The figures :func:`paired_comparison` differences by default."""


def paired_comparison(a_runs: Sequence[Mapping[str, Any]], b_runs: Sequence[Mapping[str, Any]],
                      metrics: Sequence[str] = PAIRED_METRICS) -> dict[str, Any]:
    """Configuration A against B over the seeds both ran (matched by ``seed_index``): per
    figure the mean of the per-seed differences A − B with a Student-t 95 % interval (the
    paired interval: the common faults cancel), and the McNemar counts of seeds by which of
    the two lost acknowledged records, with the exact two-sided p-value."""
    a = {int(r["seed_index"]): r for r in a_runs}
    b = {int(r["seed_index"]): r for r in b_runs}
    if len(a) != len(a_runs) or len(b) != len(b_runs):
        raise ValueError("a configuration has two runs with the same seed_index")
    seeds = sorted(set(a) & set(b))
    if not seeds:
        raise ValueError("the two configurations share no seed")
    diffs = {}
    for m in metrics:
        diffs[m] = mean_interval([float(a[s][m]) - float(b[s][m]) for s in seeds])
    a_lost = [a[s]["lost_acked_records"] > 0 for s in seeds]
    b_lost = [b[s]["lost_acked_records"] > 0 for s in seeds]
    a_only = sum(1 for x, y in zip(a_lost, b_lost, strict=True) if x and not y)
    b_only = sum(1 for x, y in zip(a_lost, b_lost, strict=True) if y and not x)
    both = sum(1 for x, y in zip(a_lost, b_lost, strict=True) if x and y)
    return {"pairs": len(seeds), "difference": diffs,
            "loss_runs": {"a_only": a_only, "b_only": b_only, "both": both,
                          "neither": len(seeds) - a_only - b_only - both,
                          "mcnemar_exact_p": mcnemar_exact_p(a_only, b_only)}}


__all__ = ["LOSS_QUANTILES", "PAIRED_METRICS", "SECONDS_PER_YEAR", "Z95", "loss_sizes",
           "mcnemar_exact_p", "mean_interval", "paired_comparison", "per_year", "quantile",
           "risk_estimate", "seeds_for_mean", "seeds_for_proportion", "wilson_half_width"]
