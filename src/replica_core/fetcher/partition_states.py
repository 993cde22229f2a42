"""Follower fetch state per partition and the fair ordered map of them (§7.1, §7.3).

Kafka: ``PartitionFetchState`` in ``AbstractFetcherThread.scala`` and
``org.apache.kafka.common.internals.PartitionStates``. Time is passed in (``now_ms``) instead of
read from the wall clock, so a fetcher driven by an injected clock is deterministic.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Iterable, Iterator, KeysView, Mapping
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType
from typing import Generic, TypeVar

from replica_core.replication.messages import TopicPartition

__all__ = ["FETCHING", "TRUNCATING", "PartitionFetchState", "PartitionStates", "ReplicaState",
           "TopicPartition"]


class ReplicaState(Enum):
    """The fetcher's per-partition phase (AbstractFetcherThread's ``ReplicaState``)."""

    TRUNCATING = "Truncating"
    FETCHING = "Fetching"


TRUNCATING = ReplicaState.TRUNCATING
FETCHING = ReplicaState.FETCHING


@dataclass(frozen=True, slots=True)
class PartitionFetchState:
    """Where a follower is for one partition (§7.1). Immutable: derive new states with
    :meth:`updated` or :meth:`delayed`, as Kafka copies its case class.

    ``delay_until_ms`` is Kafka's ``delay: Option[DelayedItem]`` as its due time (None = no
    delay); ``lag`` and ``last_fetched_epoch`` are None when unknown.
    """

    fetch_offset: int
    lag: int | None
    current_leader_epoch: int
    delay_until_ms: int | None = None
    state: ReplicaState = FETCHING
    last_fetched_epoch: int | None = None
    topic_id: str | None = None

    def is_delayed(self, now_ms: int) -> bool:
        """A delay is set and not yet due (DelayedItem.getDelay > 0)."""
        return self.delay_until_ms is not None and self.delay_until_ms > now_ms

    def is_ready_for_fetch(self, now_ms: int) -> bool:
        """Fetching and not delayed."""
        return self.state is FETCHING and not self.is_delayed(now_ms)

    def is_truncating(self, now_ms: int) -> bool:
        """Truncating and not delayed."""
        return self.state is TRUNCATING and not self.is_delayed(now_ms)

    @property
    def is_replica_in_sync(self) -> bool:
        """Lag known and ≤ 0 (only used for follower-side replication throttling)."""
        return self.lag is not None and self.lag <= 0

    def updated(self, **changes: object) -> PartitionFetchState:
        """A copy with ``changes`` applied."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def delayed(self, now_ms: int, delay_ms: int) -> PartitionFetchState:
        """A copy delayed for ``delay_ms`` from ``now_ms`` (e.g. replica.fetch.backoff.ms)."""
        return dataclasses.replace(self, delay_until_ms=now_ms + delay_ms)


K = TypeVar("K", bound=Hashable)
S = TypeVar("S")


class PartitionStates(Generic[K, S]):
    """Insertion-ordered partition → state map with move-to-end (Kafka's PartitionStates, §7.3).

    Fetch requests are built by iterating in this order; a partition that just returned data is
    moved to the end, so under a response size limit no partition starves. Keys are
    ``(topic, partition)`` tuples (e.g. :class:`TopicPartition`).
    """

    __slots__ = ("_map",)

    def __init__(self, states: Mapping[K, S] | Iterable[tuple[K, S]] | None = None) -> None:
        self._map: dict[K, S] = {}
        if states is not None:
            self.set(states)

    def move_to_end(self, tp: K) -> None:
        """Move ``tp`` to the end, keeping its state (no-op if absent)."""
        if tp in self._map:
            self._map[tp] = self._map.pop(tp)

    def update_and_move_to_end(self, tp: K, state: S) -> None:
        """Set ``tp``'s state and put it last (inserting it if absent)."""
        self._map.pop(tp, None)
        self._map[tp] = state

    def update(self, tp: K, state: S) -> None:
        """Set ``tp``'s state in place (appended last if absent)."""
        self._map[tp] = state

    def remove(self, tp: K) -> None:
        """Forget ``tp`` (no-op if absent)."""
        self._map.pop(tp, None)

    def clear(self) -> None:
        self._map.clear()

    def set(self, states: Mapping[K, S] | Iterable[tuple[K, S]]) -> None:
        """Replace everything with ``states``, grouping partitions of a topic together: topics in
        order of first appearance, each topic's partitions in their given order."""
        items = list(states.items()) if isinstance(states, Mapping) else list(states)
        by_topic: dict[object, list[tuple[K, S]]] = {}
        for tp, state in items:
            by_topic.setdefault(tp[0], []).append((tp, state))  # type: ignore[index]
        self._map.clear()
        for group in by_topic.values():
            for tp, state in group:
                self._map[tp] = state

    def contains(self, tp: K) -> bool:
        return tp in self._map

    def __contains__(self, tp: object) -> bool:
        return tp in self._map

    def state_value(self, tp: K) -> S | None:
        """``tp``'s state, or None."""
        return self._map.get(tp)

    def partition_set(self) -> KeysView[K]:
        """A live view of the partitions, in order."""
        return self._map.keys()

    def partition_state_map(self) -> Mapping[K, S]:
        """A live read-only view of the map, in order."""
        return MappingProxyType(self._map)

    def partition_state_values(self) -> list[S]:
        """The states, in order."""
        return list(self._map.values())

    def items(self) -> Iterator[tuple[K, S]]:
        """(partition, state) pairs in order."""
        return iter(self._map.items())

    # -- whole-map passes over PartitionFetchState values (the fetcher's selections) ------------
    # One Python loop each over the map; ColumnarPartitionStates answers the same from columns
    # with native kernels (replica_core.fetcher.columnar).
    def ready_items(self, now_ms: int) -> list[tuple[K, S]]:
        """(partition, state) pairs ready for fetch — Fetching and not delayed — in order
        (``isReadyForFetch``, the selection of ``buildFetch``, §7.5)."""
        return [(tp, s) for tp, s in self._map.items()
                if s.state is FETCHING  # type: ignore[attr-defined]
                and (s.delay_until_ms is None  # type: ignore[attr-defined]
                     or s.delay_until_ms <= now_ms)]  # type: ignore[attr-defined]

    def truncating_items(self, now_ms: int) -> list[tuple[K, S]]:
        """(partition, state) pairs Truncating and not delayed, in order (``isTruncating``)."""
        return [(tp, s) for tp, s in self._map.items()
                if s.state is TRUNCATING  # type: ignore[attr-defined]
                and (s.delay_until_ms is None  # type: ignore[attr-defined]
                     or s.delay_until_ms <= now_ms)]  # type: ignore[attr-defined]

    def next_due(self, now_ms: int) -> int | None:
        """The earliest ``delay_until_ms`` still in the future; None if no partition is delayed."""
        due = [d for s in self._map.values()
               if (d := s.delay_until_ms) is not None and d > now_ms]  # type: ignore[attr-defined]
        return min(due) if due else None

    def max_state_lag(self) -> int:
        """The largest known ``lag`` of the states, 0 when none is known."""
        return max(0, max((lag for s in self._map.values()
                           if (lag := s.lag) is not None), default=0))  # type: ignore[attr-defined]

    def __iter__(self) -> Iterator[K]:
        return iter(self._map)

    def __len__(self) -> int:
        return len(self._map)

    @property
    def size(self) -> int:
        return len(self._map)

    def __repr__(self) -> str:
        return f"PartitionStates({list(self._map.items())!r})"
