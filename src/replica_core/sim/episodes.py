"""Fault episodes: a long horizon (days, years) simulated only where something goes wrong.

A planner's rates put a broker failure months apart; simulating the healthy months between them
would cost hours per seed and say nothing: a cluster with every replica in its ISR and no fault
in progress loses no acknowledged record and blocks no client (the loss oracle checks exactly
this on every run). With ``horizon_days`` the scenario's ``[fault_rates]`` (and scripted
``[[faults]]``, their ``at_s`` on the horizon's clock) are drawn over the whole horizon, from
the seed alone, and grouped into *episodes*:

* a fault that starts a condition (``crash``/``shutdown`` until ``restart``, ``isolate`` until
  ``unisolate``, ``slow`` until ``unslow``, ``partition`` until ``heal_partition``/``heal``,
  ``drop_controller_messages`` until ``restore_controller_messages``, ``lose_fsync`` until
  ``restore_fsync``; per broker, rack or side) keeps its episode open until the condition ends;
* faults less than two margins apart (``episode_margin_s``) share an episode;
* an episode is simulated from ``episode_margin_s`` before its first fault to
  ``episode_margin_s`` after its last condition ends, then on (without new produce traffic) until
  the cluster is healthy again — every broker up, every partition led with its full ISR, no
  client blocked — for at most ten margins more (``unsettled_episodes`` counts those that were
  not).

Every episode is a fresh cluster of the scenario (its own seed from the scenario seed and the
episode's number), so episodes are independent and can run anywhere in any order. The run's
figures add up over the episodes; ``sim_seconds`` is the horizon, so the risk figures per year
(:mod:`replica_core.risk`) read the horizon, not the simulated episodes.

What the decomposition assumes, and why it holds for this model:

* Nothing is lost or blocked between episodes: the cluster is healthy there (checked at every
  episode's end) and no fault is in progress.
* An episode starts with an empty page cache history beyond its warm-up margin: what brokers
  wrote before it is on disk. Linux writes dirty pages back after
  ``vm.dirty_expire_centisecs`` (30 s by default), so a margin of 60 s keeps at least the data a
  power failure could take.
* Faults whose damage waits for a later event in another episode cannot be carried: latent bit
  flips (found at a later restart) are refused with a horizon
  (``bit_flips_per_broker_hour``), and ``fetcher_lanes`` is refused too (lanes and episodes are
  two different splits of one run).
* A state a fault leaves behind after the cluster is healthy again — leaders not on their
  preferred replica, logs shorter than a long-lived cluster's — is not carried into the next
  episode; Kafka's preferred-leader rebalance (``auto.leader.rebalance.enable``, every
  ``leader.imbalance.check.interval.seconds``) restores the first in a real cluster.
"""
from __future__ import annotations

import dataclasses
import gc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from replica_core.errors import InvalidConfigurationError
from replica_core.sim.faults import PlannedFault, plan_all_random, scripted_plan
from replica_core.sim.lanes import fault_rng
from replica_core.sim.network import rack_map

if TYPE_CHECKING:
    from replica_core.sim.run import Progress, RunParts
    from replica_core.sim.scenario import Scenario

EPISODE_STREAM = 0x65706973
"""Spawn-key tag of the episodes' loop seeds."""
SETTLE_MARGINS = 10
"""An episode unhealthy at its end runs on for at most this many margins."""
EPISODES_LISTED = 500
"""At most this many episodes are listed in the summary (all are counted)."""

_OPENS = {"crash": "down", "shutdown": "down", "isolate": "isolated", "slow": "slow",
          "partition": "partition", "drop_controller_messages": "controller",
          "lose_fsync": "fsync"}
"""Faults that start a condition, by the condition's family."""
_CLOSES = {"restart": "down", "unisolate": "isolated", "unslow": "slow",
           "heal_partition": "partition", "restore_controller_messages": "controller",
           "restore_fsync": "fsync"}
"""Faults that end the condition of the same family and target."""


@dataclass(frozen=True)
class Episode:
    """One stretch of the horizon to simulate: ``[start_ms, end_ms)`` on the horizon's clock,
    its faults (times on the horizon's clock) and whether a condition lasts to the horizon's
    end (then it is not settled afterwards)."""

    index: int
    start_ms: int
    end_ms: int
    faults: tuple[PlannedFault, ...]
    open_at_end: bool = False

    def plan(self) -> list[PlannedFault]:
        """The faults on the episode's own clock (0 = its start)."""
        return [dataclasses.replace(p, at_ms=p.at_ms - self.start_ms) for p in self.faults]


def validate_horizon(sc: Scenario, rates: Mapping[str, Any]) -> None:
    """What a horizon cannot carry (see the module docstring), refused before any work."""
    if sc.fetcher_lanes:
        raise InvalidConfigurationError("horizon_days and fetcher_lanes cannot be combined")
    if float(rates.get("bit_flips_per_broker_hour", 0.0)) > 0:
        raise InvalidConfigurationError(
            "fault_rates.bit_flips_per_broker_hour: a latent bit flip is found at a later "
            "restart, which an episode of a horizon cannot carry; use duration_s")
    horizon_s = sc.horizon_days * 86_400.0
    for f in sc.faults:
        if f.at_s >= horizon_s:
            raise InvalidConfigurationError(
                f"fault {f.kind} at {f.at_s:g}s is beyond the horizon ({horizon_s:g}s)")


def _target(p: PlannedFault) -> tuple[Any, ...]:
    return (p.broker, p.rack, p.racks, p.brokers)


def group(plan: Sequence[PlannedFault], horizon_ms: int, margin_ms: int) -> list[Episode]:
    """The episodes of a fault schedule (see the module docstring); none for no faults."""
    episodes: list[Episode] = []
    open_: set[tuple[Any, ...]] = set()
    faults: list[PlannedFault] = []
    first = quiet = 0

    def close(open_at_end: bool) -> None:
        start = max(0, first - margin_ms)
        end = horizon_ms if open_at_end else min(horizon_ms, quiet + margin_ms)
        episodes.append(Episode(len(episodes), start, max(end, start + 1), tuple(faults),
                                open_at_end))

    for p in sorted(plan):
        if faults and not open_ and p.at_ms > quiet + 2 * margin_ms:
            close(False)
            faults = []
        if not faults:
            first = p.at_ms
        faults.append(p)
        if p.kind in _OPENS:
            open_.add((_OPENS[p.kind], *_target(p)))
        elif p.kind in _CLOSES:
            open_.discard((_CLOSES[p.kind], *_target(p)))
        elif p.kind == "heal":
            open_ = {c for c in open_ if c[0] != "partition"}
        if not open_:
            quiet = p.at_ms
    if faults:
        close(bool(open_))
    return episodes


def horizon_plan(scenario: Scenario) -> list[PlannedFault]:
    """Every fault of the horizon: the scripted ones and those drawn from the rates with the
    scenario seed's fault generator (the same draws as a lane's)."""
    n = int(scenario.cluster.get("brokers", 3))
    brokers = list(range(1, n + 1))
    racks = rack_map(brokers, scenario.cluster.get("racks"))
    horizon_ms = int(round(scenario.horizon_days * 86_400_000))
    return sorted(scripted_plan(scenario.faults) + plan_all_random(
        scenario.fault_rates, brokers, racks, horizon_ms, fault_rng(scenario.seed)))


def episode_seed(seed: int, index: int) -> int:
    """The loop seed of one episode, from the scenario seed and the episode's number only."""
    state = np.random.SeedSequence(seed, spawn_key=(EPISODE_STREAM, index)).generate_state(
        2, np.uint32)
    return int(state[0]) << 31 | int(state[1]) >> 1


def plan_episodes(scenario: Scenario) -> list[Episode]:
    """The episodes a horizon scenario simulates; a horizon without faults simulates one quiet
    episode of two margins (the figures then come from fault-free operation)."""
    horizon_ms = int(round(scenario.horizon_days * 86_400_000))
    margin_ms = int(round(scenario.episode_margin_s * 1000))
    episodes = group(horizon_plan(scenario), horizon_ms, margin_ms)
    return episodes or [Episode(0, 0, min(horizon_ms, 2 * margin_ms), ())]


def run_episode(scenario: Scenario, episode: Episode, *, progress: Progress | None = None
                ) -> RunParts:
    """Simulate one episode; its times come back on the horizon's clock."""
    from replica_core.sim.run import simulate

    margin_ms = int(round(scenario.episode_margin_s * 1000))
    parts = simulate(scenario, progress=progress, seed=episode_seed(scenario.seed, episode.index),
                     plan=episode.plan(), duration_ms=episode.end_ms - episode.start_ms,
                     settle_ms=0 if episode.open_at_end else SETTLE_MARGINS * margin_ms)
    return _shifted(parts, episode.start_ms / 1000.0)


def _shifted(parts: RunParts, by_s: float) -> RunParts:
    def at(t: float) -> float:
        return round(t + by_s, 3)

    series = dict(parts.series)
    series["t"] = [at(t) for t in series["t"]]
    losses = []
    for ev in parts.loss_events:
        ev = dict(ev)
        ev["acked_s"] = [at(t) for t in ev["acked_s"]]
        ev["found_s"] = at(ev["found_s"])
        losses.append(ev)
    recovery = [{**row, "at_s": at(row["at_s"])} for row in parts.fault_recovery]
    return dataclasses.replace(
        parts, series=series, loss_events=losses, fault_recovery=recovery,
        fault_timeline=[(at(t), label) for t, label in parts.fault_timeline],
        leadership_events=[(at(t), e, u, o) for t, e, u, o in parts.leadership_events])


def _unavailable_s(parts: RunParts, acks: int) -> float:
    by_cause = parts.counts["unavailable_ms_by_cause"]
    return sum(ms for cause, ms in by_cause.items()
               if acks == -1 or cause != "under_min_isr") / 1000.0


def run_horizon(scenario: Scenario, *, progress: Progress | None = None
                ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Simulate every episode of a horizon scenario, in order; the merged summary (with a
    ``horizon`` section) and time series (samples on the horizon's clock)."""
    from replica_core.sim.run import merge_parts

    episodes = plan_episodes(scenario)
    total_s = sum(e.end_ms - e.start_ms for e in episodes) / 1000.0
    parts: list[RunParts] = []
    rows = []
    done_s = 0.0
    events_done = 0
    for ep in episodes:
        sub = None
        if progress is not None:
            def sub(d: float, _t: float, events: int, _done: float = done_s,
                    _events: int = events_done) -> None:
                progress(min(_done + d, total_s), total_s, _events + events)
        part = run_episode(scenario, ep, progress=sub)
        # A finished episode's cluster is reference cycles that only a full collection
        # reaches (the run leaves its objects in the oldest generation): free it before the
        # next episode builds its own, or a long horizon holds every episode's cluster.
        gc.collect()
        done_s += (ep.end_ms - ep.start_ms) / 1000.0
        events_done += int(part.counts["events"])
        parts.append(part)
        rows.append({"start_s": ep.start_ms / 1000.0, "length_s": part.length_ms / 1000.0,
                     "faults": len(ep.faults),
                     "lost_acked_records": int(part.counts["lost_acked_records"]),
                     "unavailable_partition_seconds": _unavailable_s(part, scenario.acks),
                     "settled": part.settled})
    summary, series = merge_parts(scenario, parts, sequential=True)
    simulated = sum(p.length_ms for p in parts) / 1000.0
    summary["horizon"] = {
        "days": scenario.horizon_days,
        "episode_margin_s": scenario.episode_margin_s,
        "episodes": len(episodes),
        "faults": sum(len(e.faults) for e in episodes),
        "simulated_seconds": simulated,
        "simulated_fraction": simulated / scenario.simulated_s,
        "unsettled_episodes": sum(1 for p in parts if not p.settled),
        "episode_list": rows[:EPISODES_LISTED],
        "episodes_not_listed": max(0, len(rows) - EPISODES_LISTED),
    }
    return summary, series


__all__ = ["EPISODE_STREAM", "Episode", "episode_seed", "group", "horizon_plan",
           "plan_episodes", "run_episode", "run_horizon", "validate_horizon"]
