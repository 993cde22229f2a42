"""Faults: scripted from the scenario's ``[[faults]]`` and random from its ``[fault_rates]``.

Every fault model is explicit and named (TigerBeetle's VOPR):

=============================  ==============================================================
``crash`` (mode process|power)  the broker stops; process: page cache kept; power: only
                                flushed bytes survive
``shutdown``                    controlled shutdown: leadership moved away, then a clean stop
``restart``                     log recovery, registration (new broker epoch), LeaderAndIsr
``isolate`` / ``unisolate``     every link of one broker cut / restored
``partition`` / ``heal``        network partition ``brokers`` vs everyone else / end all cuts
``slow`` / ``unslow``           a slow follower (mode ``fetch``), a slow disk (``disk``) or
                                both (``all``), ``factor`` times slower
``drop_controller_messages``    LeaderAndIsr, metadata and AlterPartition answers from the
``restore_controller_messages`` controller to ``broker`` (or every broker) are lost
``flush``                       page-cache writeback on one broker: everything it wrote so far
                                reaches its disk (survives a later power failure)
``bit_flip``, ``lose_fsync``,   storage faults (:mod:`replica_core.sim.storage_faults`; also
``restore_fsync``               ``crash`` power + ``torn_write`` / ``bit_flips``, ``slow``
                                mode ``fsync``)
``replace_disk``                the broker stops (if running), gets an empty data directory and
                                starts again at once (KIP-903's stale replica)
=============================  ==============================================================

Random faults (per broker unless noted), drawn once from the seed before the run, as Poisson
processes over the scenario's duration — each fault ends before the next of its kind starts::

    crashes_per_broker_hour, mean_downtime_s, power_failure_fraction
    isolations_per_broker_hour, mean_isolation_s
    slowdowns_per_broker_hour, mean_slow_s, slow_factor
    partitions_per_hour, mean_partition_s            (cluster-wide: a random minority side)
    controller_drops_per_hour, mean_controller_drop_s (cluster-wide)
    torn_write_fraction (of power failures), bit_flips_per_broker_hour,
    lost_fsyncs_per_broker_hour, mean_lost_fsync_s, slow_fsyncs_per_broker_hour,
    mean_slow_fsync_s                                (storage faults)

Whole racks (``broker.rack``, availability zones; need the scenario's ``cluster.racks``): a
scripted fault takes ``rack = "a"`` instead of a broker (``crash`` in either mode, ``restart``,
``isolate`` — cut from the other racks, the controller and clients — and ``unisolate``) or
``racks = ["a"]`` (``partition`` / ``heal_partition`` between those racks' brokers and every
other rack's). Drawn from rates (each rack independently, except partitions) by
:func:`plan_rack_faults`::

    rack_outages_per_hour, mean_rack_outage_s, rack_power_failure_fraction   (per rack)
    rack_isolations_per_hour, mean_rack_isolation_s                          (per rack)
    rack_partitions_per_hour, mean_rack_partition_s   (cluster-wide: one random rack vs the rest)

The same rates as a reliability planner states them (:data:`PLANNER_KEYS`)::

    broker_mtbf_hours = 4380          # mean time between failures of one broker (its mean
                                      # uptime from a repair to the next crash); instead of
                                      # crashes_per_broker_hour (= 1 / broker_mtbf_hours)
    repair_time = { distribution = "lognormal", median_s = 600, sigma = 1.0 }
                                      # how long a crashed broker stays down; or
                                      # { distribution = "exponential", mean_s = 600 } or
                                      # { distribution = "fixed", value_s = 600 };
                                      # instead of mean_downtime_s (exponential)
    power_losses_per_year = 2         # cluster-wide power losses: every broker loses power
                                      # at once (only flushed bytes survive) and all come back
                                      # together after one draw of repair_time
                                      # (exponential with mean_downtime_s without it)

Per rack, in the same units (need ``cluster.racks``; see :func:`plan_rack_outages`)::

    rack_mtbf_hours = 8760            # mean time between whole-zone outages of one rack (its
                                      # mean uptime from a repair to the next outage); instead
                                      # of rack_outages_per_hour; the share
                                      # rack_power_failure_fraction of them are power failures
    rack_power_losses_per_year = 1    # one rack's power goes: every broker in it loses power
                                      # at once (only flushed bytes survive)
    rack_repair_time = { distribution = "lognormal", median_s = 3600, sigma = 1.0 }
                                      # how long a rack stays down after either; without it
                                      # one draw of repair_time, or else exponential with
                                      # mean_rack_outage_s

These are drawn after every other random fault (each rack in sorted order: its outages, then
its power losses), so a schedule without them is the one the other keys alone give. A broker
is down over the union of its own crash windows and its rack's outages (as with
``power_losses_per_year``): one crash (``power`` when any merged window was a power failure)
and one restart per merged span.

A year is 8,760 hours. A broker that a power loss finds already down is kept down until the
later of its own repair and the power's return, and counts as power-failed (its page cache
is gone either way). Without the planner keys the draws are exactly those of the per-hour
rates alone.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from replica_core.errors import InvalidConfigurationError
from replica_core.sim.storage_faults import (
    STORAGE_FAULT_KINDS,
    STORAGE_RATE_KEYS,
    fault_params,
    plan_storage_random,
    validate_storage_rates,
)

if TYPE_CHECKING:
    from replica_core.sim.cluster import Cluster
    from replica_core.sim.scenario import Fault

RATE_KEYS = {
    "crashes_per_broker_hour": 0.0, "mean_downtime_s": 30.0, "power_failure_fraction": 0.0,
    "isolations_per_broker_hour": 0.0, "mean_isolation_s": 20.0,
    "slowdowns_per_broker_hour": 0.0, "mean_slow_s": 30.0, "slow_factor": 1000.0,
    "partitions_per_hour": 0.0, "mean_partition_s": 20.0,
    "controller_drops_per_hour": 0.0, "mean_controller_drop_s": 10.0,
    **STORAGE_RATE_KEYS,
}
RACK_RATE_KEYS = {
    "rack_outages_per_hour": 0.0, "mean_rack_outage_s": 60.0, "rack_power_failure_fraction": 0.0,
    "rack_isolations_per_hour": 0.0, "mean_rack_isolation_s": 30.0,
    "rack_partitions_per_hour": 0.0, "mean_rack_partition_s": 30.0,
}
RATE_KEYS.update(RACK_RATE_KEYS)
PLANNER_KEYS = ("broker_mtbf_hours", "repair_time", "power_losses_per_year")
"""Rate keys in a planner's units (see the module docstring); absent by default."""
RACK_PLANNER_KEYS = ("rack_mtbf_hours", "rack_power_losses_per_year", "rack_repair_time")
"""Per-rack rate keys in a planner's units (see the module docstring); absent by default."""
HOURS_PER_YEAR = 8760.0
REPAIR_DISTRIBUTIONS = {"exponential": ("mean_s",), "lognormal": ("median_s", "sigma"),
                        "fixed": ("value_s",)}
"""The repair-time distributions and the parameters each needs."""


@dataclass(frozen=True, order=True)
class PlannedFault:
    """One fault at ``at_ms`` after the run's start."""

    at_ms: int
    seq: int
    kind: str
    broker: int | None = None
    mode: str = "process"
    factor: float = 1.0
    brokers: tuple[int, ...] = ()
    source: str = "scripted"
    storage: tuple[tuple[str, Any], ...] = ()
    """Storage-fault settings, sorted (key, value) pairs (see sim/storage_faults.py)."""
    rack: str | None = None
    racks: tuple[str, ...] = ()

    def describe(self) -> str:
        parts = [self.kind]
        if self.broker is not None:
            parts.append(f"broker {self.broker}")
        if self.rack is not None:
            parts.append(f"rack {self.rack}")
        if self.racks:
            parts.append(f"racks {list(self.racks)}")
        if self.kind == "crash":
            parts.append(f"({self.mode})")
        if self.kind == "slow":
            parts.append(f"x{self.factor:g} ({self.mode})")
        if self.brokers:
            parts.append(f"brokers {list(self.brokers)}")
        if self.storage:
            parts.append("[" + ", ".join(f"{k} {v}" for k, v in self.storage) + "]")
        if self.source != "scripted":
            parts.append("[random]")
        return " ".join(parts)


def validate_repair_time(spec: Any, key: str = "repair_time") -> dict[str, Any]:
    """``repair_time`` (or ``key``, e.g. ``rack_repair_time``) as a normalised table
    (``distribution`` and its parameters as floats); a bad distribution, a missing, unknown or
    non-positive parameter raises."""
    if not isinstance(spec, Mapping):
        raise InvalidConfigurationError(
            f"fault_rates.{key} must be a table such as {{ distribution = \"exponential\", "
            f"mean_s = 600 }}, got {spec!r}")
    dist = spec.get("distribution")
    if dist not in REPAIR_DISTRIBUTIONS:
        raise InvalidConfigurationError(
            f"fault_rates.{key}.distribution must be one of "
            f"{sorted(REPAIR_DISTRIBUTIONS)}, got {dist!r}")
    params = REPAIR_DISTRIBUTIONS[dist]
    unknown = set(spec) - {"distribution", *params}
    if unknown:
        raise InvalidConfigurationError(
            f"fault_rates.{key}: {dist} takes {list(params)}, not {sorted(unknown)}")
    out: dict[str, Any] = {"distribution": dist}
    for name in params:
        if name not in spec:
            raise InvalidConfigurationError(f"fault_rates.{key}: {dist} needs {name}")
        value = spec[name]
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = float("nan")
        if isinstance(value, bool) or not number > 0 or number == float("inf"):
            raise InvalidConfigurationError(
                f"fault_rates.{key}.{name} must be a positive number, got {value!r}")
        out[name] = number
    return out


def draw_repair_ms(spec: Mapping[str, Any], rng: np.random.Generator) -> float:
    """One repair time (ms, at least 1) from a validated ``repair_time`` table."""
    dist = spec["distribution"]
    if dist == "fixed":
        seconds = float(spec["value_s"])
    elif dist == "exponential":
        seconds = float(rng.exponential(spec["mean_s"]))
    else:  # log-normal: ln(T) ~ Normal(ln(median), sigma^2)
        seconds = float(rng.lognormal(np.log(spec["median_s"]), spec["sigma"]))
    return max(1.0, seconds * 1000.0)


def validate_rates(rates: Mapping[str, Any]) -> dict[str, Any]:
    """The fault rates with defaults filled in (numbers as floats; ``repair_time``, when
    given, as a normalised table); unknown keys, negative values or a crash rate given both
    per hour and as an MTBF raise."""
    unknown = set(rates) - set(RATE_KEYS) - set(PLANNER_KEYS) - set(RACK_PLANNER_KEYS)
    if unknown:
        raise InvalidConfigurationError(f"unknown fault_rates keys: {sorted(unknown)}")
    out: dict[str, Any] = dict(RATE_KEYS)
    for key, value in rates.items():
        if key in ("repair_time", "rack_repair_time"):
            out[key] = validate_repair_time(value, key)
            continue
        try:
            out[key] = float(value)
        except (TypeError, ValueError):
            raise InvalidConfigurationError(f"fault_rates.{key}: not a number: {value!r}") from None
        if out[key] < 0:
            raise InvalidConfigurationError(
                f"fault_rates.{key} must not be negative, got {value!r}")
    if out["power_failure_fraction"] > 1:
        raise InvalidConfigurationError("fault_rates.power_failure_fraction must be at most 1")
    validate_storage_rates(out)
    if out["rack_power_failure_fraction"] > 1:
        raise InvalidConfigurationError("fault_rates.rack_power_failure_fraction must be at most 1")
    if "broker_mtbf_hours" in out:
        if "crashes_per_broker_hour" in rates:
            raise InvalidConfigurationError(
                "fault_rates: give broker_mtbf_hours or crashes_per_broker_hour, not both")
        if out["broker_mtbf_hours"] <= 0:
            raise InvalidConfigurationError(
                f"fault_rates.broker_mtbf_hours must be positive, got {rates['broker_mtbf_hours']!r}")
    if "rack_mtbf_hours" in out:
        if "rack_outages_per_hour" in rates:
            raise InvalidConfigurationError(
                "fault_rates: give rack_mtbf_hours or rack_outages_per_hour, not both")
        if not out["rack_mtbf_hours"] > 0:
            raise InvalidConfigurationError(
                f"fault_rates.rack_mtbf_hours must be positive, got {rates['rack_mtbf_hours']!r}")
    for key in ("power_losses_per_year", "rack_power_losses_per_year"):
        if key in out and not out[key] < float("inf"):  # infinite or NaN: no schedule
            raise InvalidConfigurationError(
                f"fault_rates.{key} must be a finite number, got {rates[key]!r}")
    return out


class _RandomPlan:
    """Random faults as they are drawn: kept when they start within the run, numbered in
    draw order from ``first_seq``."""

    def __init__(self, duration_ms: int, first_seq: int) -> None:
        self.duration_ms = duration_ms
        self.seq = first_seq
        self.faults: list[PlannedFault] = []

    def add(self, at: float, kind: str, **kw: Any) -> None:
        if at < self.duration_ms:
            self.faults.append(PlannedFault(int(at), self.seq, kind, source="random", **kw))
            self.seq += 1


def _windows(rng: np.random.Generator, per_hour: float, mean_s: float,
             duration_ms: int, lengths: Mapping[str, Any] | None = None
             ) -> list[tuple[float, float]]:
    """Fault windows as a Poisson process of starts, exponential lengths (at least 1 ms; one
    draw of the repair-time table ``lengths`` instead when given), one window ending before the
    next starts; nothing is drawn when ``per_hour`` is 0."""
    spans: list[tuple[float, float]] = []
    if per_hour <= 0:
        return spans
    t = 0.0
    gap_ms = 3_600_000.0 / per_hour
    while True:
        t += float(rng.exponential(gap_ms))
        if t >= duration_ms:
            return spans
        if lengths is not None:
            length = draw_repair_ms(lengths, rng)
        else:
            length = max(1.0, float(rng.exponential(mean_s * 1000.0)))
        spans.append((t, t + length))
        t += length


def plan_rack_faults(rates: Mapping[str, Any], racks: Mapping[int, str], duration_ms: int,
                     rng: np.random.Generator, *, first_seq: int = 2_000_000
                     ) -> list[PlannedFault]:
    """Draw the random whole-rack faults of a run from ``rng`` (a pure function of its state;
    racks in sorted order; nothing drawn when every rack rate is 0)."""
    r = validate_rates(rates)
    names = sorted(set(racks.values()))
    plan = _RandomPlan(duration_ms, first_seq)
    out, add = plan.faults, plan.add
    if not names:
        return out
    for name in names:
        for start, end in _windows(rng, r["rack_outages_per_hour"], r["mean_rack_outage_s"],
                                   duration_ms):
            mode = "power" if float(rng.random()) < r["rack_power_failure_fraction"] else "process"
            add(start, "crash", rack=name, mode=mode)
            add(end, "restart", rack=name)
        for start, end in _windows(rng, r["rack_isolations_per_hour"],
                                   r["mean_rack_isolation_s"], duration_ms):
            add(start, "isolate", rack=name)
            add(end, "unisolate", rack=name)
    if len(names) > 1:
        for start, end in _windows(rng, r["rack_partitions_per_hour"],
                                   r["mean_rack_partition_s"], duration_ms):
            side = (names[int(rng.integers(len(names)))],)
            add(start, "partition", racks=side)
            add(end, "heal_partition", racks=side)
    return out


def plan_rack_outages(rates: Mapping[str, Any], racks: Mapping[int, str], duration_ms: int,
                      rng: np.random.Generator) -> dict[str, list[tuple[float, float, str]]]:
    """Draw the whole-rack outages of the per-rack planner keys (``rack_mtbf_hours``,
    ``rack_power_losses_per_year``) from ``rng``: for each rack (sorted), ``(start_ms, end_ms,
    mode)`` windows, ``mode`` ``"power"`` or ``"process"``. Each rack in turn draws its outages
    (one mode draw each, against ``rack_power_failure_fraction``) and then its power losses;
    lengths from ``rack_repair_time``, else ``repair_time``, else exponential with
    ``mean_rack_outage_s``. Nothing is drawn (the generator is left as it was) without these
    keys; racks with no outage are left out."""
    r = validate_rates(rates)
    names = sorted(set(racks.values()))
    mtbf = r.get("rack_mtbf_hours")
    per_year = float(r.get("rack_power_losses_per_year", 0.0))
    out: dict[str, list[tuple[float, float, str]]] = {}
    if not names or (mtbf is None and per_year <= 0):
        return out
    lengths = r.get("rack_repair_time", r.get("repair_time"))
    mean_s = r["mean_rack_outage_s"]
    for name in names:
        spans: list[tuple[float, float, str]] = []
        if mtbf is not None:
            for start, end in _windows(rng, 1.0 / float(mtbf), mean_s, duration_ms, lengths):
                mode = "power" if float(rng.random()) < r["rack_power_failure_fraction"] \
                    else "process"
                spans.append((start, end, mode))
        for start, end in _windows(rng, per_year / HOURS_PER_YEAR, mean_s, duration_ms,
                                   lengths):
            spans.append((start, end, "power"))
        if spans:
            out[name] = sorted(spans)
    return out


def with_rack_outages(plan: list[PlannedFault],
                      outages: Mapping[str, Sequence[tuple[float, float, str]]],
                      racks: Mapping[int, str], duration_ms: int, *,
                      first_seq: int = 3_000_000) -> list[PlannedFault]:
    """``plan`` (random faults) with each broker of an affected rack down over the union of its
    own crash windows and its rack's ``outages`` (:func:`plan_rack_outages`): one crash per
    merged span — ``power`` when any window in it was, keeping a torn write its own power
    failure drew when that crash starts the span — and one restart when the span ends before
    the run does. Brokers of other racks and every other fault are kept as they were."""
    hit = sorted(b for b, rack in racks.items() if rack in outages)
    if not hit:
        return list(plan)
    keep = [p for p in plan if not (p.kind in ("crash", "restart") and p.broker in hit)]
    seq = first_seq
    for b in hit:
        spans: list[tuple[float, float, str, tuple[tuple[str, Any], ...]]] = []
        start_at: PlannedFault | None = None
        for p in sorted(q for q in plan if q.broker == b and q.kind in ("crash", "restart")):
            if p.kind == "crash":
                start_at = p
            elif start_at is not None:
                spans.append((float(start_at.at_ms), float(p.at_ms), start_at.mode,
                              start_at.storage))
                start_at = None
        if start_at is not None:  # down at the end of the run
            spans.append((float(start_at.at_ms), float("inf"), start_at.mode, start_at.storage))
        spans += [(s, e, mode, ()) for s, e, mode in outages[racks[b]]]
        spans.sort(key=lambda w: (w[0], w[1]))
        merged: list[list[Any]] = []
        for s, e, mode, storage in spans:
            if merged and s <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], e)
                if mode == "power":
                    merged[-1][2] = "power"
            else:
                merged.append([s, e, mode, storage])
        for s, e, mode, storage in merged:
            if s >= duration_ms:
                continue
            keep.append(PlannedFault(int(s), seq, "crash", broker=b, mode=mode,
                                     source="random", storage=storage if mode == "power" else ()))
            seq += 1
            if e < duration_ms:
                keep.append(PlannedFault(int(e), seq, "restart", broker=b, source="random"))
                seq += 1
    return keep


def plan_all_random(rates: Mapping[str, Any], brokers: Sequence[int], racks: Mapping[int, str],
                    duration_ms: int, rng: np.random.Generator) -> list[PlannedFault]:
    """Every random fault of a run, as the injector draws them: :func:`plan_random`, then
    :func:`plan_rack_faults`, then :func:`plan_rack_outages` merged into the brokers' crash
    windows (unsorted)."""
    plan = plan_random(rates, brokers, duration_ms, rng)
    rack_plan = plan_rack_faults(rates, racks, duration_ms, rng)
    outages = plan_rack_outages(rates, racks, duration_ms, rng)
    if outages:
        plan = with_rack_outages(plan, outages, racks, duration_ms)
    return plan + rack_plan


def crashes_per_broker_hour(rates: Mapping[str, Any]) -> float:
    """The per-broker crash rate of validated rates (from ``broker_mtbf_hours`` when given)."""
    if "broker_mtbf_hours" in rates:
        return 1.0 / float(rates["broker_mtbf_hours"])
    return float(rates["crashes_per_broker_hour"])


def plan_random(rates: Mapping[str, Any], brokers: Sequence[int], duration_ms: int,
                rng: np.random.Generator, *, first_seq: int = 1_000_000) -> list[PlannedFault]:
    """Draw the random faults of a run (deterministic for a generator state)."""
    r = validate_rates(rates)
    plan = _RandomPlan(duration_ms, first_seq)
    out, add = plan.faults, plan.add
    repair = r.get("repair_time")

    def windows(per_hour: float, mean_s: float, lengths: Mapping[str, Any] | None = None
                ) -> list[tuple[float, float]]:
        return _windows(rng, per_hour, mean_s, duration_ms, lengths)

    for b in brokers:
        for start, end in windows(crashes_per_broker_hour(r), r["mean_downtime_s"], repair):
            mode = "power" if float(rng.random()) < r["power_failure_fraction"] else "process"
            torn: tuple[tuple[str, Any], ...] = ()
            if mode == "power" and r["torn_write_fraction"] > 0 and \
                    float(rng.random()) < r["torn_write_fraction"]:
                torn = (("torn_write", "subset"),)
            add(start, "crash", broker=b, mode=mode, storage=torn)
            add(end, "restart", broker=b)
        for start, end in windows(r["isolations_per_broker_hour"], r["mean_isolation_s"]):
            add(start, "isolate", broker=b)
            add(end, "unisolate", broker=b)
        for start, end in windows(r["slowdowns_per_broker_hour"], r["mean_slow_s"]):
            add(start, "slow", broker=b, factor=r["slow_factor"], mode="all")
            add(end, "unslow", broker=b)
    for start, end in windows(r["partitions_per_hour"], r["mean_partition_s"]):
        k = max(1, (len(brokers) - 1) // 2)
        side = tuple(sorted(int(x) for x in rng.choice(np.asarray(brokers), k, replace=False)))
        add(start, "partition", brokers=side)
        add(end, "heal_partition", brokers=side)
    for start, end in windows(r["controller_drops_per_hour"], r["mean_controller_drop_s"]):
        add(start, "drop_controller_messages")
        add(end, "restore_controller_messages")
    out += plan_storage_random(r, brokers, duration_ms, rng, plan.seq)
    per_year = float(r.get("power_losses_per_year", 0.0))
    if per_year > 0:
        outages = windows(per_year / HOURS_PER_YEAR, r["mean_downtime_s"], repair)
        if outages:
            out = _with_power_losses(out, outages, brokers, duration_ms, plan.seq)
    return out


def _with_power_losses(plan: list[PlannedFault], outages: Sequence[tuple[float, float]],
                       brokers: Sequence[int], duration_ms: int, first_seq: int
                       ) -> list[PlannedFault]:
    """``plan`` with every broker's crash/restart windows merged with the cluster-wide power
    outages: a broker is down over the union of its own windows and the outages, one crash
    (``power`` when any merged window was a power loss) and one restart per merged span."""
    keep = [p for p in plan if p.kind not in ("crash", "restart")]
    seq = first_seq
    for b in brokers:
        spans: list[tuple[float, float, str]] = []
        start_at: tuple[float, str] | None = None
        for p in sorted(q for q in plan if q.broker == b and q.kind in ("crash", "restart")):
            if p.kind == "crash":
                start_at = (float(p.at_ms), p.mode)
            elif start_at is not None:
                spans.append((start_at[0], float(p.at_ms), start_at[1]))
                start_at = None
        if start_at is not None:  # down at the end of the run
            spans.append((start_at[0], float("inf"), start_at[1]))
        spans += [(s, e, "power") for s, e in outages]
        spans.sort()
        merged: list[list[Any]] = []
        for s, e, mode in spans:
            if merged and s <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], e)
                if mode == "power":
                    merged[-1][2] = "power"
            else:
                merged.append([s, e, mode])
        for s, e, mode in merged:
            keep.append(PlannedFault(int(s), seq, "crash", broker=b, mode=mode,
                                     source="random"))
            seq += 1
            if e < duration_ms:
                keep.append(PlannedFault(int(e), seq, "restart", broker=b, source="random"))
                seq += 1
    return keep


def scripted_plan(faults: Sequence[Fault]) -> list[PlannedFault]:
    """The scenario's ``[[faults]]`` as planned faults (numbered in file order from 0)."""
    return [PlannedFault(int(round(f.at_s * 1000)), k, f.kind,
                         None if f.broker is None else int(f.broker), f.mode, float(f.factor),
                         tuple(int(b) for b in f.brokers), storage=fault_params(f),
                         rack=f.rack, racks=tuple(f.racks))
            for k, f in enumerate(faults)]


class FaultInjector:
    """Schedules the scripted and random faults of a scenario on a cluster's loop and keeps
    the timeline (for the report)."""

    def __init__(self, cluster: Cluster, faults: Sequence[Fault], rates: Mapping[str, Any], *,
                 duration_ms: int, rng: np.random.Generator | None = None,
                 plan: Sequence[PlannedFault] | None = None) -> None:
        """``plan``, when given, is the whole schedule (already drawn: an episode's faults);
        otherwise the scripted ``faults`` plus the random ones drawn from ``rates``."""
        self.cluster = cluster
        if plan is None:
            rng = rng if rng is not None else cluster.loop.spawn_rng()
            plan = scripted_plan(faults) + plan_all_random(
                rates, sorted(cluster.brokers), cluster.racks, duration_ms, rng)
        self.plan = sorted(plan)
        if cluster.storage != "memory" and any(p.kind == "crash" and p.mode == "power"
                                               for p in self.plan):
            raise InvalidConfigurationError("power failures need storage = \"memory\"")
        if cluster.storage != "memory" and any(p.kind in STORAGE_FAULT_KINDS or p.mode == "fsync"
                                               for p in self.plan):
            raise InvalidConfigurationError("storage faults need storage = \"memory\"")
        self.timeline: list[tuple[float, str]] = []
        self.applied = 0
        self.origin_ms = cluster.loop.now

    def start(self) -> None:
        """Schedule every planned fault relative to now."""
        loop = self.cluster.loop
        self.origin_ms = loop.now
        for p in self.plan:
            loop.call_later(p.at_ms, self.apply, p)

    def apply(self, p: PlannedFault) -> None:
        """Inject one fault now."""
        c = self.cluster
        kind = p.kind
        b = p.broker
        involved = (b,) if b is not None else p.brokers or (
            tuple(sorted(c.brokers)) if kind in ("heal", "drop_controller_messages",
                                                  "restore_controller_messages") else ())
        on_racks = p.rack is not None or bool(p.racks)
        if on_racks:
            involved = c.brokers_in_racks((p.rack,) if p.rack is not None else p.racks)
        c.note_fault(p.describe(), kind, involved)
        if on_racks:
            apply_rack_fault(c, p)
        elif kind == "crash":
            c.crash(self._one(p), p.mode, **dict(p.storage))
        elif kind == "shutdown":
            c.shutdown(self._one(p))
        elif kind == "restart":
            c.restart(self._one(p))
        elif kind == "isolate":
            c.isolate(self._one(p))
        elif kind == "unisolate":
            c.unisolate(self._one(p))
        elif kind == "heal":
            c.heal()
        elif kind == "partition":
            side = p.brokers or ((b,) if b is not None else ())
            if not side:
                raise InvalidConfigurationError("a partition fault needs brokers = [...]")
            c.partition_network(side)
        elif kind == "heal_partition":
            c.heal_partition(p.brokers)
        elif kind == "slow":
            c.slow(self._one(p), p.factor,
                   p.mode if p.mode in ("fetch", "disk", "fsync") else "all")
        elif kind == "unslow":
            c.slow(self._one(p), 1.0, "all")
        elif kind == "flush":
            c.flush(self._one(p))
        elif kind == "replace_disk":
            c.replace_disk(self._one(p))
        elif kind == "drop_controller_messages":
            c.drop_controller_messages(None if b is None else [b])
        elif kind == "restore_controller_messages":
            c.restore_controller_messages(None if b is None else [b])
        elif kind in STORAGE_FAULT_KINDS:
            self._one(p)
            c.storage_faults.apply(p)
        else:  # pragma: no cover - validated by the scenario
            raise InvalidConfigurationError(f"unknown fault kind {kind!r}")
        self.applied += 1
        self.timeline.append(((c.loop.now - self.origin_ms) / 1000.0, p.describe()))
        c.client_view.observe()

    @staticmethod
    def _one(p: PlannedFault) -> int:
        if p.broker is None:
            raise InvalidConfigurationError(f"fault {p.kind} at {p.at_ms} ms needs a broker")
        return p.broker


def apply_rack_fault(c: Cluster, p: PlannedFault) -> None:
    """Inject a fault on whole racks (``p.rack`` or ``p.racks``)."""
    kind = p.kind
    if kind == "crash":
        c.crash_rack(str(p.rack), p.mode)
    elif kind == "restart":
        c.restart_rack(str(p.rack))
    elif kind == "isolate":
        c.isolate_rack(str(p.rack))
    elif kind == "unisolate":
        c.unisolate_rack(str(p.rack))
    elif kind == "partition":
        c.partition_racks(p.racks or (str(p.rack),))
    elif kind == "heal_partition":
        c.heal_rack_partition(p.racks or (str(p.rack),))
    else:
        raise InvalidConfigurationError(f"fault {kind} does not apply to a rack")


__all__ = ["HOURS_PER_YEAR", "PLANNER_KEYS", "RACK_PLANNER_KEYS", "RACK_RATE_KEYS", "RATE_KEYS",
           "REPAIR_DISTRIBUTIONS", "FaultInjector", "PlannedFault", "apply_rack_fault",
           "crashes_per_broker_hour", "draw_repair_ms", "plan_all_random", "plan_rack_faults",
           "plan_rack_outages", "plan_random", "scripted_plan", "validate_rates", "validate_repair_time",
           "with_rack_outages"]
