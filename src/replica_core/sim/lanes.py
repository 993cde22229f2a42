"""Fetcher lanes: one cluster simulated as independent lanes, one per replica fetcher id.

A follower replicates partition ``p`` through fetcher ``fetcher_id(topic, p,
num.replica.fetchers)`` toward each leader (Kafka's ``AbstractFetcherManager.getFetcherId``),
and each fetcher has its own connection. A *lane* is the set of partitions sharing a fetcher id:
their fetch sessions, fetch sizes and backoffs interact; partitions of different lanes only
share what the broker as a whole shares.

With ``fetcher_lanes = true`` a scenario is simulated lane by lane: every lane is a complete
cluster (all brokers, the controller, clients) hosting only its lane's partitions, with

* the broker fault schedule drawn from the scenario seed alone — the same crashes, restarts,
  isolations and slowdowns at the same times in every lane;
* the lane's own generator (``SeedSequence(seed, spawn_key=(lane,))``) for everything per
  partition: produce arrivals, retries, processing delays, message loss.

Lanes are then independent by construction, so they can run anywhere in any order — one after
the other in one process (:func:`replica_core.sim.run.run_scenario`) or spread over Spark
executors (:func:`replica_core.spark.run_sharded`) — and :func:`replica_core.sim.run.merge_parts`
gives the same summary either way.

What the lane model leaves out: contention *between* lanes inside a broker — one link's
bandwidth shared by all fetchers, one controller channel carrying every partition's
LeaderAndIsr, one producer connection per broker. Broker liveness is decided in each lane from
that lane's heartbeats, which travel the same way in every lane.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from replica_core.fetcher.assignment import fetcher_id
from replica_core.replication import ReplicaConfig

if TYPE_CHECKING:
    from replica_core.sim.run import Progress, RunParts
    from replica_core.sim.scenario import Scenario

FAULT_STREAM = 0x6661756C74
"""Spawn key of the fault plan's generator (shared by every lane)."""


def lane_count(scenario: Scenario) -> int:
    """``num.replica.fetchers`` of the scenario (Kafka's default 1)."""
    value = scenario.configs.get("num.replica.fetchers", ReplicaConfig().num_replica_fetchers)
    n = int(value)
    if n < 1:
        raise ValueError("num.replica.fetchers must be at least 1")
    return n


def lane_partitions(scenario: Scenario, lane: int) -> dict[str, list[int]]:
    """The partitions of each topic that lane ``lane`` hosts."""
    n = lane_count(scenario)
    if not 0 <= lane < n:
        raise ValueError(f"lane {lane} outside 0..{n - 1}")
    return {t.name: [p for p in range(t.partitions) if fetcher_id(t.name, p, n) == lane]
            for t in scenario.topics}


def lane_seed(seed: int, lane: int) -> int:
    """The loop seed of one lane, derived from the scenario seed and the lane only."""
    state = np.random.SeedSequence(seed, spawn_key=(lane,)).generate_state(2, np.uint32)
    return int(state[0]) << 31 | int(state[1]) >> 1


def fault_rng(seed: int) -> np.random.Generator:
    """The generator of the random fault plan: the same in every lane of a run."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(FAULT_STREAM,)))


def run_lane(scenario: Scenario, lane: int, *, progress: Progress | None = None) -> RunParts:
    """Simulate one lane of ``scenario`` (see the module docstring)."""
    from replica_core.sim.run import simulate

    return simulate(scenario, progress=progress, partition_ids=lane_partitions(scenario, lane),
                    seed=lane_seed(scenario.seed, lane), fault_rng=fault_rng(scenario.seed))


def run_lanes(scenario: Scenario, lanes: list[int]) -> list[tuple[int, Any]]:
    """``[(lane, RunParts), ...]`` for the given lanes, in order (a Spark task's body)."""
    return [(lane, run_lane(scenario, lane)) for lane in lanes]


__all__ = ["fault_rng", "lane_count", "lane_partitions", "lane_seed", "run_lane", "run_lanes"]
