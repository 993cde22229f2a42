"""Rack-aware replica placement: KRaft's striped replica placer (``StripedReplicaPlacer``, §8.7).

The rules, as the KRaft controller applies them when a topic is created without an explicit
assignment and at least one broker has ``broker.rack`` set:

* racks are visited round-robin in sorted order (brokers without a rack form one rack that
  sorts first); a placement starts one rack further than the previous one, from a start drawn
  at random once per topic — the "striped" pattern;
* inside a rack, brokers are taken round-robin (sorted ids, random start), a partition never
  getting the same broker twice; unfenced brokers are used before fenced ones;
* the first replica (the preferred leader) is always an unfenced broker;
* after as many placements as there are unfenced brokers, the rack order and every rack's
  broker order are shuffled, so later partitions do not repeat the same replica sets.

So with racks of equal size every partition's replicas span ``min(RF, racks)`` racks and
leadership spreads evenly over the brokers. Errors are Kafka's
``InvalidReplicationFactorException`` (a non-positive factor, more replicas than registered
brokers, every broker fenced).

Randomness comes from a :class:`PlacementRandom` (``next_int(bound)``, as ``java.util.Random``);
:class:`SeededRandom` adapts a seeded numpy generator, so a placement is a function of the
seed. A cluster with no rack set keeps the older rack-unaware assignment
(:func:`replica_core.controller.controller.assign_replicas`): the simulator's placements of
rack-less scenarios stay what they were.
"""
from __future__ import annotations

from collections.abc import Iterable, MutableSequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from replica_core.errors import InvalidReplicationFactorError


@dataclass(frozen=True)
class UsableBroker:
    """A broker the placer may use (Kafka's ``UsableBroker``): its id, ``broker.rack`` (None:
    not set) and whether it is fenced (registered but not heartbeating)."""

    id: int
    rack: str | None = None
    fenced: bool = False


class PlacementRandom(Protocol):
    def next_int(self, bound: int) -> int:
        """A uniform integer in ``[0, bound)``."""


class SeededRandom:
    """:class:`PlacementRandom` over a numpy generator (derived from the run's seed)."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def next_int(self, bound: int) -> int:
        return int(self.rng.integers(bound))


def shuffle(items: MutableSequence[Any], random: PlacementRandom) -> None:
    """Shuffle in place in ``java.util.Collections.shuffle``'s order of draws."""
    for i in range(len(items), 1, -1):
        j = random.next_int(i)
        items[i - 1], items[j] = items[j], items[i - 1]


class BrokerList:
    """Brokers of one rack (fenced or unfenced), iterated round-robin per placement "epoch":
    a new epoch restarts the iteration one position further on."""

    def __init__(self, brokers: Iterable[int] = ()) -> None:
        self.brokers: list[int] = list(brokers)
        self.index = 0
        self.offset = 0
        self.epoch = 0

    def initialize(self, random: PlacementRandom) -> None:
        if self.brokers:
            self.brokers.sort()
            self.offset = random.next_int(len(self.brokers))

    def next(self, epoch: int) -> int:
        """The next broker in this epoch, or -1 once every broker was returned in it."""
        n = len(self.brokers)
        if n == 0:
            return -1
        if self.epoch != epoch:
            self.epoch = epoch
            self.index = 0
            self.offset = (self.offset + 1) % n
        if self.index >= n:
            return -1
        broker = self.brokers[(self.index + self.offset) % n]
        self.index += 1
        return broker


class Rack:
    def __init__(self) -> None:
        self.fenced = BrokerList()
        self.unfenced = BrokerList()

    def initialize(self, random: PlacementRandom) -> None:
        self.fenced.initialize(random)
        self.unfenced.initialize(random)

    def shuffle(self, random: PlacementRandom) -> None:
        shuffle(self.fenced.brokers, random)
        shuffle(self.unfenced.brokers, random)

    def next_unfenced(self, epoch: int) -> int:
        return self.unfenced.next(epoch)

    def next(self, epoch: int) -> int:
        """An unfenced broker if any is left in this epoch, else a fenced one (or -1)."""
        result = self.unfenced.next(epoch)
        return result if result >= 0 else self.fenced.next(epoch)


def _rack_key(name: str | None) -> tuple[int, str]:
    return (0, "") if name is None else (1, name)


class RackList:
    """Every rack, sorted by name (no rack first), and the striping state of one topic."""

    def __init__(self, random: PlacementRandom, brokers: Iterable[UsableBroker]) -> None:
        self.random = random
        self.racks: dict[str | None, Rack] = {}
        self.num_total = 0
        self.num_unfenced = 0
        for b in brokers:
            rack = self.racks.setdefault(b.rack, Rack())
            if b.fenced:
                rack.fenced.brokers.append(int(b.id))
            else:
                rack.unfenced.brokers.append(int(b.id))
                self.num_unfenced += 1
            self.num_total += 1
        self.rack_names: list[str | None] = sorted(self.racks, key=_rack_key)
        # Kafka initialises its racks in hash-map order; a fixed (sorted) order keeps the
        # draws reproducible
        for name in self.rack_names:
            self.racks[name].initialize(random)
        self.epoch = 0
        self.offset = random.next_int(len(self.rack_names)) if self.rack_names else 0

    def place(self, replication_factor: int) -> list[int]:
        """The replicas of the next partition, preferred leader first."""
        _check(replication_factor, self.num_total, self.num_unfenced)
        if self.epoch == self.num_unfenced and self.num_unfenced > 1:
            shuffle(self.rack_names, self.random)
            for name in self.rack_names:  # Kafka shuffles in hash-map order; sorted here
                self.racks[name].shuffle(self.random)
            self.epoch = 0
        if self.offset == len(self.rack_names):
            self.offset = 0
        names = self.rack_names
        out: list[int] = []
        first = self.offset
        while True:  # the leader: the first rack (from offset) with an unfenced broker left
            result = self.racks[names[first]].next_unfenced(self.epoch)
            if result >= 0:
                out.append(result)
                break
            first = (first + 1) % len(names)
        index = self.offset
        for _ in range(1, replication_factor):
            result = -1
            while result < 0:
                if index == first:
                    first = -1  # the leader's rack is skipped once
                else:
                    result = self.racks[names[index]].next(self.epoch)
                index = (index + 1) % len(names)
            out.append(result)
        self.epoch += 1
        self.offset += 1
        return out


def _check(replication_factor: int, num_total: int, num_unfenced: int) -> None:
    if replication_factor <= 0:
        raise InvalidReplicationFactorError(
            f"Invalid replication factor {replication_factor}: the replication factor must be "
            f"positive.")
    if replication_factor > num_total:
        raise InvalidReplicationFactorError(
            f"The target replication factor of {replication_factor} cannot be reached because "
            f"only {num_total} broker(s) are registered.")
    if num_unfenced == 0:
        raise InvalidReplicationFactorError("All brokers are currently fenced.")


def place_replicas(n_partitions: int, replication_factor: int, brokers: Iterable[UsableBroker],
                   random: PlacementRandom | np.random.Generator) -> list[tuple[int, ...]]:
    """The replicas of ``n_partitions`` new partitions (KRaft's ``StripedReplicaPlacer.place``);
    raises InvalidReplicationFactorError before placing anything when it cannot be done."""
    if isinstance(random, np.random.Generator):
        random = SeededRandom(random)
    racks = RackList(random, brokers)
    # the placer's own order of checks (RackList.place checks the broker count first)
    if replication_factor > 0 and racks.num_unfenced == 0:
        raise InvalidReplicationFactorError("All brokers are currently fenced.")
    _check(replication_factor, racks.num_total, racks.num_unfenced)
    return [tuple(racks.place(replication_factor)) for _ in range(n_partitions)]


def racks_configured(brokers: Iterable[UsableBroker]) -> bool:
    """True when any broker has ``broker.rack`` set (the striped placer is used then)."""
    return any(b.rack is not None for b in brokers)


__all__ = ["BrokerList", "PlacementRandom", "Rack", "RackList", "SeededRandom", "UsableBroker",
           "place_replicas", "racks_configured", "shuffle"]
