"""Configuration sweeps: a grid of Kafka configs × seeds, expanded into independent rows.

```toml
scenario = "default"        # an embedded example name or a path to a scenario TOML
seeds = 3                   # runs per configuration
base_seed = 1

[set]                       # overrides applied to every row (same keys as --set)
duration_s = 30
"topics.0.partitions" = 300

[axes]                      # the grid: every combination of these values
"min.insync.replicas" = [1, 2]
"unclean.leader.election.enable" = [false, true]
"fault_rates.crashes_per_broker_hour" = [0.0, 20.0]
```

Seeds come from the grid, never from where a row runs: row seed = ``SeedSequence(base_seed,
spawn_key=(seed_index,))``. Every configuration sees the same seeds (common random numbers), so
differences between configurations are not noise between seeds; a retried or re-partitioned task
recomputes exactly the same rows.
"""
from __future__ import annotations

import itertools
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from replica_core.errors import InvalidConfigurationError
from replica_core.sim import scenario as scenario_mod


@dataclass(frozen=True)
class SweepRow:
    """One simulation to run: the scenario document, its overrides and its seed."""

    row_id: int
    config_id: int
    seed_index: int
    seed: int
    overrides: dict[str, Any]
    axes: dict[str, Any]
    scenario_doc: dict[str, Any] = field(repr=False, default_factory=dict)

    def scenario(self) -> scenario_mod.Scenario:
        return scenario_mod.from_dict(self.scenario_doc, {**self.overrides, "seed": self.seed})


@dataclass(frozen=True)
class Grid:
    scenario_doc: dict[str, Any]
    axes: dict[str, list[Any]]
    fixed: dict[str, Any]
    seeds: int
    base_seed: int
    source: str = ""

    @property
    def n_configs(self) -> int:
        n = 1
        for values in self.axes.values():
            n *= len(values)
        return n

    def rows(self) -> list[SweepRow]:
        keys = list(self.axes)
        combos = list(itertools.product(*(self.axes[k] for k in keys))) if keys else [()]
        seeds = [row_seed(self.base_seed, i) for i in range(self.seeds)]
        out = []
        for config_id, combo in enumerate(combos):
            axes = dict(zip(keys, combo, strict=True))
            for seed_index, seed in enumerate(seeds):
                out.append(SweepRow(
                    row_id=config_id * self.seeds + seed_index, config_id=config_id,
                    seed_index=seed_index, seed=seed, overrides={**self.fixed, **axes},
                    axes=axes, scenario_doc=self.scenario_doc,
                ))
        return out


def row_seed(base_seed: int, seed_index: int) -> int:
    """The seed of the ``seed_index``-th run of every configuration (a 31-bit int)."""
    state = np.random.SeedSequence(int(base_seed), spawn_key=(int(seed_index),)).generate_state(1)
    return int(state[0] & 0x7FFFFFFF)


def _scenario_doc(ref: str, relative_to: Path | None) -> tuple[dict[str, Any], str]:
    candidates = []
    if relative_to is not None:
        candidates.append(relative_to / ref)
    candidates += [Path(ref), scenario_mod.examples_dir() / ref,
                   scenario_mod.examples_dir() / f"{ref}.toml"]
    for path in candidates:
        if path.is_file():
            with open(path, "rb") as fh:
                return tomllib.load(fh), str(path)
    raise InvalidConfigurationError(f"scenario {ref!r} not found (looked in {candidates})")


def load_grid(path: str | Path) -> Grid:
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            doc = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidConfigurationError(f"{path}: {exc}") from None
    return grid_from_dict(doc, relative_to=path.parent)


def grid_from_dict(doc: dict[str, Any], *, relative_to: Path | None = None) -> Grid:
    unknown = set(doc) - {"scenario", "seeds", "base_seed", "set", "axes"}
    if unknown:
        raise InvalidConfigurationError(f"unknown grid keys: {sorted(unknown)}")
    scenario_doc, source = _scenario_doc(str(doc.get("scenario", "default")), relative_to)
    axes = {str(k): list(v) if isinstance(v, list) else [v] for k, v in doc.get("axes", {}).items()}
    if any(not v for v in axes.values()):
        raise InvalidConfigurationError("every axis needs at least one value")
    seeds = int(doc.get("seeds", 1))
    if seeds < 1:
        raise InvalidConfigurationError("seeds must be at least 1")
    grid = Grid(scenario_doc, axes, dict(doc.get("set", {})), seeds,
                int(doc.get("base_seed", 1)), source)
    # Validate every configuration up front: a bad value fails before any cluster time is spent.
    for row in grid.rows()[:: grid.seeds]:
        row.scenario()
    return grid
