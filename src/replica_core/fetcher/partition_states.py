"""Follower fetch state per partition and the fair ordered map of them (§7.1, §7.3).

Kafka: ``PartitionFetchState`` in ``AbstractFetcherThread.scala`` and
``org.apache.kafka.common.internals.PartitionStates``. Time is passed in (``now_ms``) instead of
read from the wall clock, so a fetcher driven by an injected clock is deterministic.
"""
from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Callable, Hashable, Iterable, Iterator, KeysView, Mapping
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType
from typing import Generic, TypeVar

from replica_core._slot_init import slot_init
from replica_core.replication.messages import TopicPartition

__all__ = ["FETCHING", "TRUNCATING", "PartitionFetchState", "PartitionStates", "ReplicaState",
           "TopicPartition"]


class ReplicaState(Enum):
    """The fetcher's per-partition phase (AbstractFetcherThread's ``ReplicaState``)."""

    TRUNCATING = "Truncating"
    FETCHING = "Fetching"


TRUNCATING = ReplicaState.TRUNCATING
FETCHING = ReplicaState.FETCHING


@slot_init
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
        if not changes.keys() <= _FIELDS:
            raise TypeError(f"unknown fetch state fields {sorted(changes.keys() - _FIELDS)}")
        get = changes.get
        return PartitionFetchState(
            get("fetch_offset", self.fetch_offset), get("lag", self.lag),  # type: ignore[arg-type]
            get("current_leader_epoch", self.current_leader_epoch),  # type: ignore[arg-type]
            get("delay_until_ms", self.delay_until_ms),  # type: ignore[arg-type]
            get("state", self.state), get("last_fetched_epoch", self.last_fetched_epoch),  # type: ignore[arg-type]
            get("topic_id", self.topic_id))  # type: ignore[arg-type]

    def delayed(self, now_ms: int, delay_ms: int) -> PartitionFetchState:
        """A copy delayed for ``delay_ms`` from ``now_ms`` (e.g. replica.fetch.backoff.ms)."""
        return PartitionFetchState(self.fetch_offset, self.lag, self.current_leader_epoch,
                                   now_ms + delay_ms, self.state, self.last_fetched_epoch,
                                   self.topic_id)


_FIELDS = frozenset(f.name for f in dataclasses.fields(PartitionFetchState))



K = TypeVar("K", bound=Hashable)
S = TypeVar("S")


class PartitionStates(Generic[K, S]):
    """Insertion-ordered partition → state map with move-to-end (Kafka's PartitionStates, §7.3).

    Fetch requests are built by iterating in this order; a partition that just returned data is
    moved to the end, so under a response size limit no partition starves. Keys are
    ``(topic, partition)`` tuples (e.g. :class:`TopicPartition`).

    Beyond Kafka's class, the map keeps a change journal so that a fetcher can build an
    incremental fetch (KIP-227) from what changed instead of rescanning every partition:

    * every partition whose state was set or removed since the last :meth:`take_changes`
      (:meth:`mark_changed` adds one whose request entry changed for another reason);
    * the due times of delayed states, so partitions whose back-off ended are found with
      :meth:`pop_due` and :meth:`next_due` without a scan (a heap of the distinct due times,
      each with the partitions delayed until then: a failed request delays every partition of
      the fetcher until the same time);
    * the Truncating partitions, for :meth:`truncating_items`;
    * each partition's place in the order (a sequence number bumped on every move to the end),
      so changed partitions can be put back in fair order.
    """

    __slots__ = ("_map", "_seq", "_next_seq", "_changed", "_due", "_due_at", "_in_truncation",
                 "state_value")

    def __init__(self, states: Mapping[K, S] | Iterable[tuple[K, S]] | None = None) -> None:
        self._map: dict[K, S] = {}
        self.state_value: Callable[[K], S | None] = self._map.get
        """``state_value(tp)``: ``tp``'s state, or None — the map's own lookup, bound once (the
        fetcher reads a state several times per partition per round)."""
        self._seq: dict[K, int] = {}
        self._next_seq = 0
        self._changed: dict[K, None] = {}
        self._due: list[int] = []  # a heap of the due times in _due_at
        self._due_at: dict[int, list[K]] = {}  # due time -> partitions delayed until then
        self._in_truncation: dict[K, None] = {}
        if states is not None:
            self.set(states)

    # -- the journal -----------------------------------------------------------------------------
    def _note(self, tp: K, state: S) -> None:
        """Journal a new state for ``tp`` (its place is set by the caller)."""
        self._changed[tp] = None
        if not isinstance(state, PartitionFetchState):
            return  # the map is generic (Kafka's is); delays and phases are fetch states'
        d = state.delay_until_ms
        if d is not None:
            group = self._due_at.get(d)
            if group is None:
                self._due_at[d] = [tp]
                heapq.heappush(self._due, d)
            else:
                group.append(tp)  # stale entries (delayed again, removed) are skipped when due
        if state.state is TRUNCATING:
            self._in_truncation[tp] = None
        elif self._in_truncation:
            self._in_truncation.pop(tp, None)

    def _to_end(self, tp: K) -> None:
        self._seq[tp] = self._next_seq
        self._next_seq += 1

    def take_changes(self) -> list[K]:
        """The partitions set, added or removed since the last call (each once, in the order of
        their first change), and a fresh journal."""
        changed = list(self._changed)
        self._changed.clear()
        return changed

    def mark_changed(self, tp: K) -> None:
        """Journal ``tp`` as changed although its state object is the same (e.g. its log start
        offset moved, which also goes into its fetch request entry)."""
        if tp in self._map:
            self._changed[tp] = None

    def pop_due(self, now_ms: int) -> list[K]:
        """The partitions whose delay ended at or before ``now_ms`` since the last call (they
        became ready without a state change); each once, by due time."""
        due = self._due
        if not due or due[0] > now_ms:
            return []
        out: dict[K, None] = {}
        m = self._map
        due_at = self._due_at
        while due and due[0] <= now_ms:
            d = heapq.heappop(due)
            for tp in due_at.pop(d):
                s = m.get(tp)
                if s is not None and s.delay_until_ms == d:  # type: ignore[attr-defined]
                    out[tp] = None
        return list(out)

    def has_truncating(self) -> bool:
        """Whether any partition is Truncating, delayed or not (:meth:`truncating_items` is
        empty otherwise): a check of the journal's Truncating set."""
        return bool(self._in_truncation)

    def order_key(self, tp: K) -> int:
        """``tp``'s place in the order: smaller comes first (``sorted(..., key=order_key)``)."""
        return self._seq[tp]

    # -- Kafka's PartitionStates ----------------------------------------------------------------
    def move_to_end(self, tp: K) -> None:
        """Move ``tp`` to the end, keeping its state (no-op if absent)."""
        if tp in self._map:
            self._map[tp] = self._map.pop(tp)
            self._to_end(tp)

    def update_and_move_to_end(self, tp: K, state: S) -> None:
        """Set ``tp``'s state and put it last (inserting it if absent)."""
        m = self._map
        m.pop(tp, None)
        m[tp] = state
        seq = self._next_seq  # _to_end, inlined (a fetcher moves a partition every data round)
        self._seq[tp] = seq
        self._next_seq = seq + 1
        self._note(tp, state)

    def update_fetched(self, tp: K, state: S) -> None:
        """:meth:`update_and_move_to_end` for a partition that was Fetching, undelayed, and
        fetched data: ``state`` is Fetching and undelayed too, so of the journal only the change
        is noted (no due time, and the Truncating set cannot hold ``tp``)."""
        m = self._map
        m.pop(tp, None)
        m[tp] = state
        seq = self._next_seq
        self._seq[tp] = seq
        self._next_seq = seq + 1
        self._changed[tp] = None

    def update_lag_and_move_to_end(self, tp: K, state: S) -> None:
        """:meth:`update_and_move_to_end` for a state that differs from ``tp``'s current one in
        its ``lag`` alone (so in nothing its fetch request entry, readiness or delay is made
        of): not journaled, as the next incremental request would find its entry unchanged."""
        m = self._map
        m.pop(tp, None)
        m[tp] = state
        seq = self._next_seq  # _to_end, inlined (a full answer sets every partition's lag)
        self._seq[tp] = seq
        self._next_seq = seq + 1

    def delay(self, tps: Iterable[K], now_ms: int, delay_ms: int) -> None:
        """Back off each of ``tps`` that is here and not delayed at ``now_ms`` (its state's
        :meth:`~PartitionFetchState.delayed` copy, moved last), in the order given — Kafka's
        ``delayPartitions``. The same as :meth:`update_and_move_to_end` per partition, the
        journal included; the partitions delayed here share one due time, so they join its group
        once it is found (or made). A delay keeps each state's phase, so the Truncating set
        (which holds exactly the partitions whose state is Truncating) is left as it is."""
        m = self._map
        get = m.get
        seq_of = self._seq
        changed = self._changed
        seq = self._next_seq
        due = now_ms + delay_ms
        group: list[K] | None = None
        for tp in tps:
            state = get(tp)
            if state is None:
                continue
            d = state.delay_until_ms  # type: ignore[attr-defined]
            if d is not None and d > now_ms:
                continue  # state.is_delayed(now_ms): its delay stands
            new = state.delayed(now_ms, delay_ms)  # type: ignore[attr-defined]
            del m[tp]
            m[tp] = new
            seq_of[tp] = seq
            seq += 1
            # _note(tp, new), for a delayed fetch state: changed, due at `due`, its phase kept
            changed[tp] = None
            if group is None:
                group = self._due_at.get(due)
                if group is None:
                    group = self._due_at[due] = []
                    heapq.heappush(self._due, due)
            group.append(tp)
        self._next_seq = seq

    def update(self, tp: K, state: S) -> None:
        """Set ``tp``'s state in place (appended last if absent)."""
        if tp not in self._map:
            self._to_end(tp)
        self._map[tp] = state
        self._note(tp, state)

    def remove(self, tp: K) -> None:
        """Forget ``tp`` (no-op if absent)."""
        if self._map.pop(tp, None) is not None:
            del self._seq[tp]
            self._in_truncation.pop(tp, None)
            self._changed[tp] = None

    def clear(self) -> None:
        self._changed.update(dict.fromkeys(self._map))
        self._map.clear()
        self._seq.clear()
        self._due.clear()
        self._due_at.clear()
        self._in_truncation.clear()

    def set(self, states: Mapping[K, S] | Iterable[tuple[K, S]]) -> None:
        """Replace everything with ``states``, grouping partitions of a topic together: topics in
        order of first appearance, each topic's partitions in their given order."""
        items = list(states.items()) if isinstance(states, Mapping) else list(states)
        by_topic: dict[object, list[tuple[K, S]]] = {}
        for tp, state in items:
            by_topic.setdefault(tp[0], []).append((tp, state))  # type: ignore[index]
        self.clear()
        for group in by_topic.values():
            for tp, state in group:
                self._map[tp] = state
                self._to_end(tp)
                self._note(tp, state)

    def contains(self, tp: K) -> bool:
        return tp in self._map

    def __contains__(self, tp: object) -> bool:
        return tp in self._map

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
        """(partition, state) pairs Truncating and not delayed, in order (``isTruncating``);
        from the journal's Truncating set, not a scan of the map."""
        if not self._in_truncation:
            return []
        m = self._map
        out = []
        for tp in sorted(self._in_truncation, key=self._seq.__getitem__):
            s = m[tp]
            d = s.delay_until_ms  # type: ignore[attr-defined]
            if d is None or d <= now_ms:
                out.append((tp, s))
        return out

    def next_due(self, now_ms: int) -> int | None:
        """The earliest ``delay_until_ms`` still in the future; None if no partition is delayed.
        From the journal's due times (stale ones dropped as they surface)."""
        due = self._due
        due_at = self._due_at
        m = self._map

        def live(d: int) -> bool:  # some partition is still delayed until d
            return any((s := m.get(tp)) is not None and s.delay_until_ms == d  # type: ignore[attr-defined]
                       for tp in due_at[d])

        while due:
            d = due[0]
            if not live(d):
                heapq.heappop(due)  # stale: removed, or delayed again since
                del due_at[d]
                continue
            if d > now_ms:
                return d
            break
        # delays ended but not yet taken by pop_due: look past them
        future = [d for d in due if d > now_ms and live(d)]
        return min(future) if future else None

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
