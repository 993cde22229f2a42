"""The leader's cache of incremental fetch sessions (KIP-227) and its eviction policy.

Kafka: ``FetchSessionCache`` in ``core/src/main/scala/kafka/server/FetchSession.scala`` (moved to
``org.apache.kafka.server.FetchSessionCacheShard`` when KAFKA-9401, Kafka 3.8, split the cache
into shards by session-id range to cut lock contention). This is one unsharded cache, Kafka's
behaviour before that split; a single shard behaves identically. It holds any session object
satisfying :class:`CachedSession`; the partitions a session caches are the caller's business.
Sessions here carry no topic ids (fetch versions < 13), so Kafka's ``usesTopicIds`` is left out.

Kafka keeps four indexes: sessions by id, ``lastUsed`` ordered by :class:`LastUsedKey`, and the
two eviction candidates ``evictableByPrivileged`` / ``evictableByAll`` ordered by
:class:`EvictableKey`. Time is passed in (``now_ms``), never read from a clock. ``lastUsed`` is
re-keyed on every fetch of a session and read only to evict, so it is kept as the sessions in
touch order (:class:`_LastUsedIndex`), which is its TreeMap order while time does not go back.
"""
from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, ValuesView
from typing import Generic, NamedTuple, Protocol, TypeVar

import numpy as np

from replica_core.replication.fetch_metadata import INVALID_SESSION_ID

__all__ = ["CachedSession", "EvictableKey", "FetchSessionCache", "LastUsedKey"]

_INT32_MAX = 2**31 - 1


class CachedSession(Protocol):
    """What the cache needs of a session (the fields of Kafka's ``FetchSession`` it reads).

    ``cached_size`` is the partition count the cache last accounted for, -1 while the session
    is not yet in the cache; only the cache writes it, ``last_used_ms``, ``creation_ms`` and
    ``privileged``. ``len(session)`` is the live partition count (``FetchSession.size``).
    """

    id: int
    privileged: bool
    creation_ms: int
    last_used_ms: int
    cached_size: int

    def __len__(self) -> int: ...


S = TypeVar("S", bound=CachedSession)
K = TypeVar("K", bound=tuple)
V = TypeVar("V")


class LastUsedKey(NamedTuple):
    """``lastUsed`` order: least recently used first, ties by id (Kafka's LastUsedKey)."""

    last_used_ms: int
    id: int


class EvictableKey(NamedTuple):
    """Eviction order (Kafka's EvictableKey): unprivileged before privileged, then fewer
    partitions, then lower id. The first key of an evictable index is the cheapest victim."""

    privileged: bool
    size: int
    id: int


def _last_used_key(session: CachedSession) -> LastUsedKey:
    return LastUsedKey(session.last_used_ms, session.id)


def _evictable_key(session: CachedSession) -> EvictableKey:
    return EvictableKey(session.privileged, session.cached_size, session.id)


class _SortedIndex(Generic[K, V]):
    """A TreeMap stand-in: a dict plus a min-heap of its keys, pruned lazily.

    ``put``/``remove`` are O(log n) amortised, ``first`` amortised O(log n). A key removed and
    put again may sit in the heap twice; the heap is rebuilt once it is twice the live size.
    """

    __slots__ = ("_heap", "_map")

    def __init__(self) -> None:
        self._map: dict[K, V] = {}
        self._heap: list[K] = []

    def __len__(self) -> int:
        return len(self._map)

    def __contains__(self, key: object) -> bool:
        return key in self._map

    def __iter__(self) -> Iterator[K]:
        """Live keys in ascending order (O(n log n); for inspection, not the hot path)."""
        return iter(sorted(self._map))

    def put(self, key: K, value: V) -> None:
        if key not in self._map:
            heapq.heappush(self._heap, key)
        self._map[key] = value

    def remove(self, key: K) -> V | None:
        value = self._map.pop(key, None)
        if value is not None and len(self._heap) > 2 * len(self._map) + 16:
            self._heap = list(self._map)
            heapq.heapify(self._heap)
        return value

    def first(self) -> tuple[K, V] | None:
        heap, live = self._heap, self._map
        while heap and heap[0] not in live:
            heapq.heappop(heap)
        if not heap:
            return None
        key = heap[0]
        return key, live[key]


class _LastUsedIndex(Generic[S]):
    """Kafka's ``lastUsed`` TreeMap (sessions by :class:`LastUsedKey`) as an insertion-ordered
    dict of the sessions, each moved to the end when touched.

    While every touch comes at a time no earlier than the one before (a clock that does not go
    back), the dict's order is ``last_used_ms`` order, so the least recently used session is
    the one with the smallest id among the leading run of equal ``last_used_ms``: a touch is a
    dict pop and insert, with no key built. A touch at an earlier time than a previous one
    turns the order off for good, and :meth:`first` then takes the minimum over all sessions.
    """

    __slots__ = ("_map", "_latest_ms", "_ordered")

    def __init__(self) -> None:
        self._map: dict[int, S] = {}
        self._latest_ms = -(2**63)
        self._ordered = True

    def __len__(self) -> int:
        return len(self._map)

    def touch(self, session: S, now_ms: int) -> None:
        """(Re)file ``session`` as used at ``now_ms`` (sets its ``last_used_ms``)."""
        session.last_used_ms = now_ms
        m = self._map
        m.pop(session.id, None)
        m[session.id] = session
        if now_ms >= self._latest_ms:
            self._latest_ms = now_ms
        else:
            self._ordered = False

    def remove(self, session: S) -> None:
        """Drop the session with ``session``'s id (as the cache's own map does)."""
        self._map.pop(session.id, None)

    def first(self) -> S | None:
        """The session with the smallest (``last_used_ms``, id), or None."""
        m = self._map
        if not m:
            return None
        if not self._ordered:
            return min(m.values(), key=_last_used_key)
        best: S | None = None
        for session in m.values():
            if best is None:
                best = session
            elif session.last_used_ms != best.last_used_ms:
                break
            elif session.id < best.id:
                best = session
        return best


class FetchSessionCache(Generic[S]):
    """Kafka's FetchSessionCache: at most ``max_entries`` sessions; eviction per :meth:`try_evict`.

    ``max_entries`` is ``max.incremental.fetch.session.cache.slots`` (default 1000);
    ``eviction_ms`` is how long a session must go unused to be stale, and how old it must be
    before sessions of any kind may displace it (KafkaServer passes
    MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS = 120000). Session ids come from ``rng``
    (default ``numpy.random.default_rng(0)``, so runs are reproducible) where Kafka uses
    ThreadLocalRandom. ``evictions`` counts IncrementalFetchSessionEvictionsPerSec marks.
    """

    def __init__(self, max_entries: int = 1000, eviction_ms: int = 120_000, *,
                 rng: np.random.Generator | None = None) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self._rng = rng if rng is not None else np.random.default_rng(0)
        self._sessions: dict[int, S] = {}
        self.sessions: ValuesView[S] = self._sessions.values()
        """The cached sessions (a live view, read only)."""
        self._last_used: _LastUsedIndex[S] = _LastUsedIndex()
        self._evictable_by_all: _SortedIndex[EvictableKey, S] = _SortedIndex()
        self._evictable_by_privileged: _SortedIndex[EvictableKey, S] = _SortedIndex()
        self._num_partitions = 0
        self.evictions = 0

    @property
    def size(self) -> int:
        """Sessions in the cache (gauge NumIncrementalFetchSessions)."""
        return len(self._sessions)

    @property
    def total_partitions(self) -> int:
        """Sum of the sessions' cached sizes (Kafka's numPartitions; the gauge
        NumIncrementalFetchPartitionsCached)."""
        return self._num_partitions

    def get(self, session_id: int) -> S | None:
        """The session with this id, or None (FetchSessionCache.get)."""
        return self._sessions.get(session_id)

    def evictable_by(self, privileged: bool) -> list[int]:
        """Ids a new session of this privilege may displace without staleness, cheapest first:
        the ``evictableByPrivileged`` or ``evictableByAll`` index in EvictableKey order."""
        index = self._evictable_by_privileged if privileged else self._evictable_by_all
        return [key.id for key in index]

    def new_session_id(self) -> int:
        """A random id in [1, 2**31 - 2] not in use (newSessionId: nextInt(1, Int.MaxValue))."""
        while True:
            session_id = int(self._rng.integers(1, _INT32_MAX))
            if session_id != INVALID_SESSION_ID and session_id not in self._sessions:
                return session_id

    def maybe_create_session(self, now_ms: int, privileged: bool, size: int,
                             create: Callable[[int], S]) -> int:
        """Create a session if there is room or :meth:`try_evict` makes some, with the
        candidate keyed ``EvictableKey(privileged, size, 0)``; else INVALID_SESSION_ID
        (maybeCreateSession).

        ``create(session_id)`` builds the session; the cache then sets what Kafka's FetchSession
        constructor receives from it (``privileged``, ``creation_ms = last_used_ms = now_ms``,
        ``cached_size = -1``), stores it and :meth:`touch`-es it. ``size`` is only the candidate
        key; the session's own ``len`` is what gets cached.
        """
        if len(self._sessions) >= self.max_entries and not self.try_evict(
                privileged, EvictableKey(privileged, size, 0), now_ms):
            return INVALID_SESSION_ID
        session_id = self.new_session_id()
        session = create(session_id)
        if session.id != session_id:
            raise ValueError(f"create({session_id}) built a session with id {session.id}")
        session.privileged = privileged
        session.creation_ms = now_ms
        session.last_used_ms = now_ms
        session.cached_size = -1
        self._sessions[session_id] = session
        self.touch(session, now_ms)
        return session_id

    def try_evict(self, privileged: bool, key: EvictableKey, now_ms: int) -> bool:
        """Evict one session to make room for a candidate keyed ``key`` (tryEvict).

        First the least recently used session if it is stale (unused for more than
        ``eviction_ms``), whatever its privilege. Otherwise the first entry of
        ``evictableByPrivileged`` (privileged candidate) or ``evictableByAll`` (unprivileged),
        and only if ``key`` is not smaller than that entry's key. True if a session was evicted.
        """
        oldest = self._last_used.first()
        if oldest is None:
            return False
        if now_ms - oldest.last_used_ms > self.eviction_ms:
            self.remove(oldest)
            self.evictions += 1
            return True
        index = self._evictable_by_privileged if privileged else self._evictable_by_all
        cheapest = index.first()
        if cheapest is None or key < cheapest[0]:
            return False
        self.remove(cheapest[1])
        self.evictions += 1
        return True

    def remove(self, session_or_id: S | int) -> S | None:
        """Drop a session (by object or id) from every index; the removed session, or None if
        it was not cached (FetchSessionCache.remove)."""
        if isinstance(session_or_id, int):
            session = self._sessions.get(session_or_id)
            if session is None:
                return None
        else:
            session = session_or_id
        self._last_used.remove(session)
        key = _evictable_key(session)
        self._evictable_by_all.remove(key)
        self._evictable_by_privileged.remove(key)
        removed = self._sessions.pop(session.id, None)
        if removed is not None:
            self._num_partitions -= session.cached_size
        return removed

    def touch(self, session: S, now_ms: int) -> None:
        """Mark the session used at ``now_ms`` and re-account its size (FetchSessionCache.touch).

        Re-keys it in ``lastUsed``; takes its old evictable keys and old cached size out (unless
        ``cached_size`` is -1), caches ``len(session)``, then files it under
        ``evictableByPrivileged`` if it is unprivileged or older than ``eviction_ms`` since
        creation, and under ``evictableByAll`` only if older than ``eviction_ms``.
        """
        old_size = session.cached_size
        previous_ms = session.last_used_ms
        if old_size != -1:
            # Already filed: with the same size and the same age class as at its last touch
            # (``last_used_ms``), re-keying would put it back where it is; only lastUsed moves.
            eviction_ms = self.eviction_ms
            if (old_size == len(session) and (previous_ms - session.creation_ms > eviction_ms)
                    == (now_ms - session.creation_ms > eviction_ms)):
                if previous_ms != now_ms:
                    self._last_used.touch(session, now_ms)
                return
        self._last_used.touch(session, now_ms)

        if old_size != -1:
            old_key = _evictable_key(session)
            self._evictable_by_privileged.remove(old_key)
            self._evictable_by_all.remove(old_key)
            self._num_partitions -= old_size
        session.cached_size = len(session)
        new_key = _evictable_key(session)
        aged = now_ms - session.creation_ms > self.eviction_ms
        if not session.privileged or aged:
            self._evictable_by_privileged.put(new_key, session)
        if aged:
            self._evictable_by_all.put(new_key, session)
        self._num_partitions += session.cached_size
