"""The leader's incremental fetch session cache (KIP-227): Kafka's FetchSessionTest cache cases
(testNewSessionId, testSessionCache, testResizeCachedSessions, testFetchSessionExpiration,
testPrivilegedSessionHandling) restated on FetchSessionCache, plus the EvictableKey order, the
two evictable indexes as ``touch`` files them, and a randomised check against a brute-force
statement of Kafka's rules."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from replica_core.replication.fetch_metadata import INVALID_SESSION_ID
from replica_core.replication.fetch_session_cache import EvictableKey, FetchSessionCache


@dataclass(eq=False)
class Session:
    """The smallest CachedSession: a list of partition numbers."""

    id: int
    partitions: list[int] = field(default_factory=list)
    privileged: bool = False
    creation_ms: int = 0
    last_used_ms: int = 0
    cached_size: int = -1

    def __len__(self) -> int:
        return len(self.partitions)


def dummy_create(size: int):
    """Kafka's dummyCreate: a session caching ``size`` partitions."""
    return lambda session_id: Session(session_id, list(range(size)))


def assert_cache_contains(cache: FetchSessionCache, *session_ids: int) -> None:
    for i, session_id in enumerate(session_ids, 1):
        assert cache.get(session_id) is not None, f"missing session {i} ({session_id})"
    assert cache.size == len(session_ids)


class ScriptedRng:
    """Stands in for numpy's Generator: ``integers`` returns the scripted values in turn."""

    def __init__(self, *values: int) -> None:
        self.values = list(values)
        self.calls: list[tuple[int, int]] = []

    def integers(self, low: int, high: int) -> int:
        self.calls.append((low, high))
        return self.values.pop(0)


def test_new_session_id_is_positive_int32():
    cache = FetchSessionCache(3, 100)
    ids = [cache.new_session_id() for _ in range(10_001)]
    assert all(0 < i < 2**31 - 1 for i in ids)
    assert len(set(ids)) > 10_000 - 5  # drawn at random over ~2**31 values


def test_new_session_ids_are_reproducible_and_use_the_injected_rng():
    a, b = FetchSessionCache(), FetchSessionCache()
    assert [a.new_session_id() for _ in range(5)] == [b.new_session_id() for _ in range(5)]
    c = FetchSessionCache(rng=np.random.default_rng(7))
    d = FetchSessionCache(rng=np.random.default_rng(8))
    assert [c.new_session_id() for _ in range(5)] != [d.new_session_id() for _ in range(5)]


def test_new_session_id_skips_ids_in_use():
    rng = ScriptedRng(41, 41, 41, 7)
    cache = FetchSessionCache(10, 100, rng=rng)
    assert cache.maybe_create_session(0, False, 1, dummy_create(1)) == 41
    assert cache.maybe_create_session(0, False, 1, dummy_create(1)) == 7
    assert rng.calls == [(1, 2**31 - 1)] * 4  # Kafka: nextInt(1, Int.MaxValue)


def test_session_cache():
    cache = FetchSessionCache(3, 100)
    assert cache.size == 0
    id1 = cache.maybe_create_session(0, False, 10, dummy_create(10))
    id2 = cache.maybe_create_session(10, False, 20, dummy_create(20))
    id3 = cache.maybe_create_session(20, False, 30, dummy_create(30))
    assert cache.maybe_create_session(30, False, 40, dummy_create(40)) == INVALID_SESSION_ID
    assert cache.maybe_create_session(40, False, 5, dummy_create(5)) == INVALID_SESSION_ID
    assert_cache_contains(cache, id1, id2, id3)
    cache.touch(cache.get(id1), 200)
    id4 = cache.maybe_create_session(210, False, 11, dummy_create(11))  # id2 is stale
    assert_cache_contains(cache, id1, id3, id4)
    cache.touch(cache.get(id1), 400)
    cache.touch(cache.get(id3), 390)
    cache.touch(cache.get(id4), 400)
    id5 = cache.maybe_create_session(410, False, 50, dummy_create(50))  # evicts id1 (10 < 50)
    assert_cache_contains(cache, id3, id4, id5)
    assert cache.maybe_create_session(410, False, 5, dummy_create(5)) == INVALID_SESSION_ID
    id6 = cache.maybe_create_session(410, True, 5, dummy_create(5))  # evicts id4 (11 < 30, 50)
    assert_cache_contains(cache, id3, id5, id6)
    assert cache.evictions == 3
    assert cache.total_partitions == 30 + 50 + 5


def test_resize_cached_sessions():
    cache = FetchSessionCache(2, 100)
    assert (cache.total_partitions, cache.size, cache.evictions) == (0, 0, 0)
    id1 = cache.maybe_create_session(0, False, 2, dummy_create(2))
    assert id1 > 0
    assert_cache_contains(cache, id1)
    session1 = cache.get(id1)
    assert len(session1) == 2
    assert (cache.total_partitions, cache.size, cache.evictions) == (2, 1, 0)
    id2 = cache.maybe_create_session(0, False, 4, dummy_create(4))
    session2 = cache.get(id2)
    assert id2 > 0
    assert_cache_contains(cache, id1, id2)
    assert (cache.total_partitions, cache.size, cache.evictions) == (6, 2, 0)
    cache.touch(session1, 200)
    cache.touch(session2, 200)
    id3 = cache.maybe_create_session(200, False, 5, dummy_create(5))
    assert id3 > 0
    assert_cache_contains(cache, id2, id3)
    assert (cache.total_partitions, cache.size, cache.evictions) == (9, 2, 1)
    cache.remove(id3)
    assert_cache_contains(cache, id2)
    assert (cache.total_partitions, cache.size, cache.evictions) == (4, 1, 1)
    session2.partitions.pop(0)
    assert (len(session2), session2.cached_size) == (3, 4)
    cache.touch(session2, session2.last_used_ms)
    assert cache.total_partitions == 3
    assert session2.cached_size == 3


def test_fetch_session_expiration():
    """Kafka's testFetchSessionExpiration at the cache: the least recently used session goes."""
    cache = FetchSessionCache(2, 1000)
    s1 = cache.maybe_create_session(0, False, 2, dummy_create(2))
    s2 = cache.maybe_create_session(500, False, 2, dummy_create(2))
    assert_cache_contains(cache, s1, s2)
    cache.touch(cache.get(s1), 1000)  # an incremental fetch in session 1
    s3 = cache.maybe_create_session(1501, False, 2, dummy_create(2))
    assert s3 != INVALID_SESSION_ID
    assert cache.get(s2) is None, "session 2 is stale; session 1 was used more recently"
    assert_cache_contains(cache, s1, s3)
    assert cache.evictions == 1


def test_stale_means_unused_for_more_than_eviction_ms():
    cache = FetchSessionCache(1, 1000)
    s1 = cache.maybe_create_session(0, False, 2, dummy_create(2))
    assert cache.maybe_create_session(1000, False, 2, dummy_create(2)) == INVALID_SESSION_ID
    s2 = cache.maybe_create_session(1001, False, 2, dummy_create(2))
    assert cache.get(s1) is None
    assert_cache_contains(cache, s2)


def test_privileged_session_handling():
    """Kafka's testPrivilegedSessionHandling at the cache."""
    cache = FetchSessionCache(2, 1000)
    s1 = cache.maybe_create_session(0, True, 2, dummy_create(2))
    assert cache.size == 1
    s2 = cache.maybe_create_session(500, False, 2, dummy_create(2))
    assert_cache_contains(cache, s1, s2)
    # Neither is stale nor older than eviction_ms: an unprivileged newcomer displaces nothing.
    assert cache.maybe_create_session(1000, False, 100, dummy_create(100)) == INVALID_SESSION_ID
    # A privileged newcomer displaces the unprivileged session 2 at once.
    s3 = cache.maybe_create_session(1000, True, 2, dummy_create(2))
    assert cache.get(s2) is None, "session 2 should have been evicted by session 3"
    assert_cache_contains(cache, s1, s3)
    # Session 1, though privileged, goes once stale.
    s4 = cache.maybe_create_session(1501, True, 2, dummy_create(2))
    assert cache.get(s1) is None, "session 1 should have been evicted by session 4"
    assert_cache_contains(cache, s3, s4)
    assert cache.evictions == 2


def test_privileged_newcomer_cannot_displace_a_young_privileged_session():
    cache = FetchSessionCache(1, 1000)
    cache.maybe_create_session(0, True, 1, dummy_create(1))
    assert cache.maybe_create_session(500, True, 100, dummy_create(100)) == INVALID_SESSION_ID
    assert cache.evictions == 0


def test_evictable_key_order():
    assert EvictableKey(False, 1000, 9) < EvictableKey(True, 1, 1)
    assert EvictableKey(False, 5, 9) < EvictableKey(False, 6, 1)
    assert EvictableKey(True, 5, 1) < EvictableKey(True, 5, 2)


def test_newcomer_must_not_be_smaller_than_the_victim():
    """The candidate key has id 0, so an equal size loses to any session: more partitions win."""
    cache = FetchSessionCache(1, 100)
    s1 = cache.maybe_create_session(0, False, 10, dummy_create(10))
    cache.touch(cache.get(s1), 50)
    cache.touch(cache.get(s1), 101)  # older than eviction_ms since creation, not stale
    assert cache.evictable_by(False) == [s1]
    assert not cache.try_evict(False, EvictableKey(False, 10, 0), 150)
    assert cache.try_evict(False, EvictableKey(False, 11, 0), 150)
    assert cache.size == 0 and cache.total_partitions == 0


def test_touch_files_sessions_under_the_evictable_indexes():
    cache = FetchSessionCache(10, 100)
    unpriv = cache.maybe_create_session(0, False, 3, dummy_create(3))
    priv = cache.maybe_create_session(0, True, 2, dummy_create(2))
    assert cache.evictable_by(True) == [unpriv]  # unprivileged: evictable by privileged at once
    assert cache.evictable_by(False) == []
    cache.touch(cache.get(unpriv), 100)
    cache.touch(cache.get(priv), 100)  # 100 - 0 is not more than 100
    assert cache.evictable_by(True) == [unpriv]
    assert cache.evictable_by(False) == []
    cache.touch(cache.get(priv), 101)
    assert cache.evictable_by(True) == [unpriv, priv]  # (False, 3) < (True, 2)
    assert cache.evictable_by(False) == [priv]
    cache.touch(cache.get(unpriv), 101)
    assert cache.evictable_by(False) == [unpriv, priv]
    cache.get(unpriv).partitions.clear()
    cache.touch(cache.get(unpriv), 102)  # re-keyed by its new size
    assert cache.evictable_by(True) == [unpriv, priv]
    assert cache.total_partitions == 2
    cache.remove(cache.get(priv))
    assert cache.evictable_by(True) == [unpriv] and cache.evictable_by(False) == [unpriv]


def test_created_session_gets_kafkas_constructor_fields():
    cache = FetchSessionCache(10, 100)
    made: list[Session] = []

    def create(session_id: int) -> Session:
        made.append(Session(session_id, [0, 1, 2], privileged=False, creation_ms=-5,
                            last_used_ms=-5, cached_size=99))
        return made[-1]

    session_id = cache.maybe_create_session(42, True, 3, create)
    session = cache.get(session_id)
    assert session is made[0]
    assert (session.id, session.privileged, session.creation_ms, session.last_used_ms,
            session.cached_size) == (session_id, True, 42, 42, 3)
    assert cache.total_partitions == 3
    with pytest.raises(ValueError):
        cache.maybe_create_session(42, False, 1, lambda sid: Session(sid + 1, [0]))


def test_remove_unknown_sessions():
    cache = FetchSessionCache(10, 100)
    s1 = cache.maybe_create_session(0, False, 4, dummy_create(4))
    assert cache.remove(12345) is None
    stray = Session(777, [0, 1])
    assert cache.remove(stray) is None
    assert cache.total_partitions == 4
    removed = cache.remove(s1)
    assert removed is not None and removed.id == s1
    assert cache.remove(s1) is None
    assert (cache.size, cache.total_partitions) == (0, 0)
    assert cache.evictable_by(True) == [] and not cache.try_evict(True, EvictableKey(True, 9, 0), 0)


def test_matches_a_brute_force_statement_of_kafkas_rules():
    """Random creates, touches, resizes and removes; after each, the cache's sessions, indexes
    and partition count equal a sorted()-over-everything model of FetchSessionCache."""
    rng = np.random.default_rng(2024)
    max_entries, eviction_ms = 12, 300
    cache = FetchSessionCache(max_entries, eviction_ms, rng=np.random.default_rng(1))
    # model: id -> [privileged, creation, last_used, cached_size, by_priv, by_all]
    model: dict[int, list] = {}
    now = 0

    def model_touch(session: Session, t: int) -> None:
        entry = model[session.id]
        aged = t - entry[1] > eviction_ms
        entry[2:] = [t, len(session), not entry[0] or aged, aged]

    def model_evict(privileged: bool, size: int, t: int) -> int | None:
        if not model:
            return None
        sid = min(model, key=lambda i: (model[i][2], i))
        if t - model[sid][2] > eviction_ms:
            return sid
        slot = 4 if privileged else 5
        ranked = sorted((e[0], e[3], i) for i, e in model.items() if e[slot])
        if ranked and (privileged, size, 0) >= ranked[0]:
            return ranked[0][2]
        return None

    for _ in range(4000):
        now += int(rng.integers(0, 40))
        op = rng.random()
        if op < 0.4:
            privileged, size = bool(rng.random() < 0.3), int(rng.integers(0, 30))
            victim = model_evict(privileged, size, now) if len(model) >= max_entries else -1
            sid = cache.maybe_create_session(now, privileged, size, dummy_create(size))
            if victim is None:
                assert sid == INVALID_SESSION_ID
                continue
            if victim != -1:
                del model[victim]
            model[sid] = [privileged, now, now, -1, False, False]
            model_touch(cache.get(sid), now)
        elif model and op < 0.85:
            sid = int(rng.choice(sorted(model)))
            session = cache.get(sid)
            if rng.random() < 0.3:
                session.partitions = list(range(int(rng.integers(0, 30))))
            cache.touch(session, now)
            model_touch(session, now)
        elif model:
            sid = int(rng.choice(sorted(model)))
            assert cache.remove(sid if rng.random() < 0.5 else cache.get(sid)).id == sid
            del model[sid]
        assert {sid for sid in model if cache.get(sid) is not None} == set(model)
        assert cache.size == len(model)
        assert cache.total_partitions == sum(e[3] for e in model.values())
        for privileged, slot in ((True, 4), (False, 5)):
            expected = [i for _, _, i in sorted((e[0], e[3], i) for i, e in model.items()
                                                if e[slot])]
            assert cache.evictable_by(privileged) == expected
    assert cache.evictions > 50


def test_least_recently_used_ties_go_to_the_lowest_id():
    """LastUsedKey order: sessions last used at the same time are evicted lowest id first,
    whatever order they were touched in."""
    cache = FetchSessionCache(3, 100, rng=ScriptedRng(7, 3, 5, 11, 12, 13))
    for _ in range(3):
        cache.maybe_create_session(0, False, 2, dummy_create(2))
    for sid in (5, 7, 3):  # touched at one time, in no id order
        cache.touch(cache.get(sid), 40)
    evicted = []
    for new_id in (11, 12, 13):
        before = {sid for sid in (3, 5, 7, 11, 12) if cache.get(sid) is not None}
        assert cache.maybe_create_session(500, False, 2, dummy_create(2)) == new_id
        evicted += sorted(before - {sid for sid in before if cache.get(sid) is not None})
    assert evicted == [3, 5, 7]
    assert cache.evictions == 3


def test_a_touch_back_in_time_still_evicts_the_least_recently_used():
    """A session touched at an earlier time than another was (a clock that went back) is the
    older one: the stale session evicted first is the one with the smallest last-used time."""
    cache = FetchSessionCache(3, 100, rng=ScriptedRng(7, 3, 5, 11, 12, 13))
    for _ in range(3):
        cache.maybe_create_session(0, False, 2, dummy_create(2))
    cache.touch(cache.get(3), 50)
    cache.touch(cache.get(7), 60)
    cache.touch(cache.get(5), 10)  # earlier than the touches before it
    order = []
    for new_id in (11, 12, 13):
        live = [sid for sid in (3, 5, 7) if cache.get(sid) is not None]
        assert cache.maybe_create_session(500, False, 2, dummy_create(2)) == new_id
        order += [sid for sid in live if cache.get(sid) is None]
    assert order == [5, 3, 7]
    # none stale and none old enough for evictableByAll: a new unprivileged session gets none
    assert cache.maybe_create_session(520, False, 2, dummy_create(2)) == INVALID_SESSION_ID
