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

    def describe(self) -> str:
        parts = [self.kind]
        if self.broker is not None:
            parts.append(f"broker {self.broker}")
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


def validate_rates(rates: Mapping[str, Any]) -> dict[str, float]:
    """The fault rates with defaults filled in; unknown keys or negative values raise."""
    unknown = set(rates) - set(RATE_KEYS)
    if unknown:
        raise InvalidConfigurationError(f"unknown fault_rates keys: {sorted(unknown)}")
    out = dict(RATE_KEYS)
    for key, value in rates.items():
        try:
            out[key] = float(value)
        except (TypeError, ValueError):
            raise InvalidConfigurationError(f"fault_rates.{key}: not a number: {value!r}") from None
        if out[key] < 0:
            raise InvalidConfigurationError(f"fault_rates.{key} must not be negative")
    if out["power_failure_fraction"] > 1:
        raise InvalidConfigurationError("fault_rates.power_failure_fraction must be at most 1")
    validate_storage_rates(out)
    return out


def plan_random(rates: Mapping[str, Any], brokers: Sequence[int], duration_ms: int,
                rng: np.random.Generator, *, first_seq: int = 1_000_000) -> list[PlannedFault]:
    """Draw the random faults of a run (deterministic for a generator state)."""
    r = validate_rates(rates)
    out: list[PlannedFault] = []
    seq = first_seq

    def add(at: float, kind: str, **kw: Any) -> None:
        nonlocal seq
        if at < duration_ms:
            out.append(PlannedFault(int(at), seq, kind, source="random", **kw))
            seq += 1

    def windows(per_hour: float, mean_s: float) -> list[tuple[float, float]]:
        spans = []
        if per_hour <= 0:
            return spans
        t = 0.0
        gap_ms = 3_600_000.0 / per_hour
        while True:
            t += float(rng.exponential(gap_ms))
            if t >= duration_ms:
                return spans
            length = max(1.0, float(rng.exponential(mean_s * 1000.0)))
            spans.append((t, t + length))
            t += length

    for b in brokers:
        for start, end in windows(r["crashes_per_broker_hour"], r["mean_downtime_s"]):
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
    out += plan_storage_random(r, brokers, duration_ms, rng, seq)
    return out


class FaultInjector:
    """Schedules the scripted and random faults of a scenario on a cluster's loop and keeps
    the timeline (for the report)."""

    def __init__(self, cluster: Cluster, faults: Sequence[Fault], rates: Mapping[str, Any], *,
                 duration_ms: int, rng: np.random.Generator | None = None) -> None:
        self.cluster = cluster
        brokers = sorted(cluster.brokers)
        plan = []
        for k, f in enumerate(faults):
            plan.append(PlannedFault(int(round(f.at_s * 1000)), k, f.kind,
                                     None if f.broker is None else int(f.broker), f.mode,
                                     float(f.factor), tuple(int(b) for b in f.brokers),
                                     storage=fault_params(f)))
        rng = rng if rng is not None else cluster.loop.spawn_rng()
        plan += plan_random(rates, brokers, duration_ms, rng)
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
        c.note_fault(p.describe(), kind, involved)
        if kind == "crash":
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


__all__ = ["RATE_KEYS", "FaultInjector", "PlannedFault", "plan_random", "validate_rates"]
