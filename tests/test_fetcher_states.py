"""Follower fetch states, their fair ordering, and fetcher assignment (KAFKA_SEMANTICS §7.1, §7.3,
§7.9)."""
from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replica_core.fetcher import (
    FETCHING,
    TRUNCATING,
    PartitionFetchState,
    PartitionStates,
    TopicPartition,
    fetcher_id,
    java_abs,
    java_string_hash,
)

T0 = 1_700_000_000_000


# ---- §7.1 PartitionFetchState -----------------------------------------------------------------
def state(**kw) -> PartitionFetchState:
    base = dict(fetch_offset=10, lag=None, current_leader_epoch=3)
    base.update(kw)
    return PartitionFetchState(**base)


def test_delay_is_pending_until_due():
    s = state(delay_until_ms=T0 + 1000)
    assert s.is_delayed(T0) and s.is_delayed(T0 + 999)
    assert not s.is_delayed(T0 + 1000)  # remaining delay max(due - now, 0) must be > 0
    assert not state().is_delayed(T0)


def test_ready_and_truncating_need_state_and_no_delay():
    fetching, truncating = state(state=FETCHING), state(state=TRUNCATING)
    assert fetching.is_ready_for_fetch(T0) and not fetching.is_truncating(T0)
    assert truncating.is_truncating(T0) and not truncating.is_ready_for_fetch(T0)
    for s in (fetching, truncating):
        d = s.delayed(T0, 1000)
        assert d.delay_until_ms == T0 + 1000
        assert not d.is_ready_for_fetch(T0 + 500) and not d.is_truncating(T0 + 500)
    assert fetching.delayed(T0, 1000).is_ready_for_fetch(T0 + 1000)
    assert truncating.delayed(T0, 1000).is_truncating(T0 + 1000)


@pytest.mark.parametrize(("lag", "in_sync"), [(None, False), (0, True), (-1, True), (1, False)])
def test_replica_in_sync_needs_known_non_positive_lag(lag, in_sync):
    assert state(lag=lag).is_replica_in_sync is in_sync


def test_fetch_state_is_an_immutable_value():
    s = state(last_fetched_epoch=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.fetch_offset = 11  # type: ignore[misc]
    t = s.updated(fetch_offset=20, lag=0)
    assert (s.fetch_offset, t.fetch_offset, t.lag, t.last_fetched_epoch) == (10, 20, 0, 2)
    assert t == state(fetch_offset=20, lag=0, last_fetched_epoch=2)
    assert s.state is FETCHING and s.delay_until_ms is None and s.topic_id is None


# ---- §7.3 PartitionStates ---------------------------------------------------------------------
A0, A1, B0, B1, C0 = (TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0),
                      TopicPartition("b", 1), TopicPartition("c", 0))


def test_update_and_move_to_end_moves_to_the_tail():
    ps: PartitionStates[TopicPartition, int] = PartitionStates()
    for i, tp in enumerate((A0, A1, B0)):
        ps.update_and_move_to_end(tp, i)
    ps.update_and_move_to_end(A0, 9)
    assert list(ps) == [A1, B0, A0] and ps.state_value(A0) == 9


def test_update_keeps_the_position():
    ps = PartitionStates([(A0, 0), (A1, 1), (B0, 2)])
    ps.update(A0, 5)
    assert list(ps.items()) == [(A0, 5), (A1, 1), (B0, 2)]
    ps.update(C0, 7)  # a new partition goes last
    assert list(ps) == [A0, A1, B0, C0]


def test_move_to_end_and_remove():
    ps = PartitionStates([(A0, 0), (A1, 1), (B0, 2)])
    ps.move_to_end(A0)
    ps.move_to_end(C0)  # absent: no-op
    assert list(ps) == [A1, B0, A0]
    ps.remove(B0)
    ps.remove(C0)
    assert list(ps) == [A1, A0] and len(ps) == ps.size == 2
    assert ps.contains(A1) and A1 in ps and B0 not in ps and ps.state_value(B0) is None


def test_set_groups_partitions_by_topic_in_first_appearance_order():
    ps = PartitionStates([(C0, "old")])
    ps.set({A1: 1, B1: 2, A0: 3, C0: 4, B0: 5})
    assert list(ps) == [A1, A0, B1, B0, C0]
    assert ps.partition_state_values() == [1, 3, 2, 5, 4]
    ps.set([(B0, 0)])  # replaces everything
    assert list(ps.partition_set()) == [B0]


def test_plain_tuples_are_the_same_keys():
    ps = PartitionStates([(("a", 0), 1)])
    assert A0 in ps and ps.state_value(A0) == 1
    assert str(A0) == "a-0"


def test_views_are_live_and_read_only():
    ps = PartitionStates([(A0, 0)])
    view = ps.partition_state_map()
    ps.update(B0, 1)
    assert dict(view) == {A0: 0, B0: 1}
    with pytest.raises(TypeError):
        view[C0] = 2  # type: ignore[index]


def test_moving_served_partitions_to_the_end_is_round_robin():
    """buildFetch with room for two partitions per response: every partition is served in turn."""
    tps = [TopicPartition("t", i) for i in range(5)]
    ps = PartitionStates([(tp, state()) for tp in tps])
    served = []
    for _ in range(5):
        batch = [tp for tp, s in ps.items() if s.is_ready_for_fetch(T0)][:2]
        for tp in batch:
            ps.update_and_move_to_end(tp, ps.state_value(tp))
        served.extend(batch)
    assert served == tps * 2


# ---- §7.9 fetcher assignment ------------------------------------------------------------------
def java_hash_by_definition(s: str) -> int:
    """s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units, reduced to a signed 32-bit int."""
    raw = s.encode("utf-16-be", "surrogatepass")
    units = [int.from_bytes(raw[i:i + 2], "big") for i in range(0, len(raw), 2)]
    n = len(units)
    v = sum(c * 31 ** (n - 1 - i) for i, c in enumerate(units)) % 2**32
    return v - 2**32 if v >= 2**31 else v


# String.hashCode values (checked once against OpenJDK 17's String.hashCode).
KNOWN_HASHES = {
    "": 0,
    "a": 97,
    "ab": 97 * 31 + 98,
    "hello": 99162322,
    "Aa": 2112,
    "BB": 2112,
    "__consumer_offsets": -970371369,
    "replicated-topic": -887126723,
    "polygenelubricants": -(2**31),  # Integer.MIN_VALUE
    "\u00e9": 0xE9,  # é: one code unit
    "\u65e5\u672c": 0x65E5 * 31 + 0x672C,  # 日本
    "\U0001F600": 0xD83D * 31 + 0xDE00,  # 😀 = surrogate pair D83D DE00
    "topic-\U0001F600-\u00fc": 819757296,
}


@pytest.mark.parametrize(("s", "expected"), list(KNOWN_HASHES.items()))
def test_java_string_hash_known_values(s, expected):
    assert java_string_hash(s) == expected == java_hash_by_definition(s)


@given(st.text(max_size=60))
def test_java_string_hash_matches_definition(s):
    assert java_string_hash(s) == java_hash_by_definition(s)


def test_lone_surrogate_hashes_as_its_code_unit():
    assert java_string_hash("\ud800") == 0xD800


def test_java_abs():
    assert java_abs(-(2**31)) == 0  # Math.abs(MIN) would stay negative
    assert java_abs(-5) == 5 and java_abs(7) == 7
    assert java_abs(2**31) == 0  # wraps to MIN first


# (topic, partition, num.replica.fetchers) -> fetcherId, from Kafka's formula run on a JVM.
KNOWN_FETCHER_IDS = [
    ("polygenelubricants", 0, 3, 0),  # 31 * MIN + 0 wraps to MIN; Utils.abs(MIN) = 0
    ("polygenelubricants", 1, 3, 1),
    ("polygenelubricants", 7, 4, 1),
    ("polygenelubricants", 123456, 7, 5),
    ("polygenelubricants", 2**31 - 1, 5, 1),
    ("__consumer_offsets", 0, 3, 2),
    ("__consumer_offsets", 1, 3, 1),
    ("__consumer_offsets", 7, 4, 0),
    ("__consumer_offsets", 123456, 7, 2),
    ("__consumer_offsets", 2**31 - 1, 5, 0),
    ("replicated-topic", 0, 3, 2),
    ("replicated-topic", 7, 4, 2),
    ("replicated-topic", 123456, 7, 0),
    ("\U0001F600", 0, 3, 1),
    ("\U0001F600", 1, 3, 2),
    ("\U0001F600", 123456, 7, 3),
]


@pytest.mark.parametrize(("topic", "partition", "n", "expected"), KNOWN_FETCHER_IDS)
def test_fetcher_id_known_values(topic, partition, n, expected):
    assert fetcher_id(topic, partition, n) == expected


def test_fetcher_id_min_value_maps_to_zero():
    # Math.abs would leave MIN negative (MIN % 3 == -2 in Java); Python's abs would give 2.
    assert (31 * java_string_hash("polygenelubricants")) % 2**32 == 2**31
    assert fetcher_id("polygenelubricants", 0, 3) == 0
    assert abs(-(2**31)) % 3 == 2


@given(st.text(max_size=30), st.integers(0, 2**31 - 1), st.integers(1, 16))
def test_fetcher_id_in_range_and_single_fetcher_is_zero(topic, partition, n):
    fid = fetcher_id(topic, partition, n)
    assert 0 <= fid < n
    assert fetcher_id(topic, partition, 1) == 0


def test_fetcher_id_rejects_no_fetchers():
    with pytest.raises(ValueError):
        fetcher_id("t", 0, 0)


def test_a_lag_only_update_moves_to_the_end_without_journaling():
    """``update_lag_and_move_to_end``: the new state is set and goes last (fair order), but
    the partition is not journaled (its request entry is unchanged), on both maps."""
    from replica_core.fetcher.columnar import ColumnarPartitionStates

    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    for states in (PartitionStates(), ColumnarPartitionStates()):
        states.update_and_move_to_end(a, state())
        states.update_and_move_to_end(b, state(fetch_offset=20))
        assert states.take_changes() == [a, b]
        states.update_lag_and_move_to_end(a, state(lag=7))
        assert list(states) == [b, a] and states.state_value(a) == state(lag=7)
        assert states.take_changes() == []
        assert [tp for tp, _ in states.ready_items(T0)] == [b, a]
        assert states.max_state_lag() == 7


def test_has_truncating_follows_the_truncating_partitions_delayed_or_not():
    """``has_truncating``: whether any partition is Truncating, delayed or not — False exactly
    when no ``truncating_items`` can come out at any time (the fetcher's cheap round check), on
    both maps."""
    from replica_core.fetcher.columnar import ColumnarPartitionStates

    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    for states in (PartitionStates(), ColumnarPartitionStates()):
        assert not states.has_truncating()
        states.update_and_move_to_end(a, state())
        assert not states.has_truncating()
        states.update(b, state(state=TRUNCATING, delay_until_ms=T0 + 1000))
        assert states.has_truncating() and states.truncating_items(T0) == []
        assert [tp for tp, _ in states.truncating_items(T0 + 1000)] == [b]
        states.update(b, state(fetch_offset=4))  # truncation complete: Fetching again
        assert not states.has_truncating()
        states.update_and_move_to_end(a, state(state=TRUNCATING))
        assert states.has_truncating()
        states.remove(a)
        assert not states.has_truncating()
        states.update(b, state(state=TRUNCATING))
        states.clear()
        assert not states.has_truncating()


def test_a_fetched_update_moves_to_the_end_and_is_journaled():
    """``update_fetched`` (a Fetching partition that appended data): the new state is set, goes
    last and is journaled (its request entry changed), on both maps — as
    ``update_and_move_to_end`` would do with the same state."""
    from replica_core.fetcher.columnar import ColumnarPartitionStates

    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    for states in (PartitionStates(), ColumnarPartitionStates()):
        states.update_and_move_to_end(a, state())
        states.update_and_move_to_end(b, state(fetch_offset=20))
        assert states.take_changes() == [a, b]
        states.update_fetched(a, state(fetch_offset=11, lag=0, last_fetched_epoch=3))
        assert list(states) == [b, a] and states.state_value(a).fetch_offset == 11
        assert states.take_changes() == [a]
        assert [tp for tp, _ in states.ready_items(T0)] == [b, a]
        assert states.pop_due(T0 + 10**9) == [] and not states.has_truncating()


def test_partitions_delayed_until_one_time_come_due_together():
    """A failed request delays every partition of a fetcher until the same time: ``pop_due``
    gives each partition still delayed until then once, in due-time order, leaving out those
    delayed again (later) or removed since; ``next_due`` skips such stale times."""
    tps = [TopicPartition("t", i) for i in range(6)]
    states = PartitionStates()
    for tp in tps:
        states.update_and_move_to_end(tp, state(delay_until_ms=T0 + 100))
    states.update_and_move_to_end(tps[0], state(delay_until_ms=T0 + 100))  # same time again
    states.update_and_move_to_end(tps[1], state(delay_until_ms=T0 + 300))  # delayed again
    states.update_and_move_to_end(tps[2], state(delay_until_ms=T0 + 50))   # an earlier time
    states.remove(tps[3])
    assert states.next_due(T0) == T0 + 50
    assert states.pop_due(T0 + 49) == []
    due = states.pop_due(T0 + 100)  # by due time; among one time's partitions, any order
    assert due[0] == tps[2] and sorted(due[1:]) == [tps[0], tps[4], tps[5]]
    assert states.pop_due(T0 + 100) == []
    assert states.next_due(T0 + 100) == T0 + 300
    states.remove(tps[1])
    assert states.next_due(T0 + 100) is None and states.pop_due(T0 + 10**6) == []
    # a time that passed without pop_due is looked past by next_due
    states.update_and_move_to_end(tps[0], state(delay_until_ms=T0 + 200))
    states.update_and_move_to_end(tps[4], state(delay_until_ms=T0 + 400))
    assert states.next_due(T0 + 250) == T0 + 400
    assert states.pop_due(T0 + 250) == [tps[0]]


def _journal(states: PartitionStates) -> tuple:
    """Everything a PartitionStates holds: the order and states, places, the change journal,
    the due times and their groups, the Truncating set (in their orders)."""
    return (list(states.items()), dict(states._seq), states._next_seq, list(states._changed),
            sorted(states._due), {d: list(g) for d, g in states._due_at.items()},
            list(states._in_truncation))


@given(st.lists(st.tuples(st.sampled_from([FETCHING, TRUNCATING]),
                          st.sampled_from([None, T0 - 5, T0, T0 + 5, T0 + 100])),
                max_size=8),
       st.lists(st.integers(0, 9), max_size=14), st.sampled_from([0, 100]))
def test_delay_is_each_partition_delayed_and_moved_last_in_turn(initial, picks, delay_ms):
    """``delay`` (a failed request backs off every partition, Kafka's delayPartitions) leaves
    exactly what ``update_and_move_to_end(tp, state.delayed(now, delay))`` leaves for each
    given partition in turn that is here and not delayed — map order, places, journal, due
    groups, Truncating set — on both maps; partitions not here, or still delayed, are skipped."""
    from replica_core.fetcher.columnar import ColumnarPartitionStates

    tps = [TopicPartition("t", i) for i in range(10)]  # the last ones are never here
    for cls in (PartitionStates, ColumnarPartitionStates):
        made = []
        for _ in range(2):
            states = cls()
            for i, (phase, due) in enumerate(initial):
                states.update_and_move_to_end(tps[i], state(fetch_offset=i, state=phase,
                                                            delay_until_ms=due))
            # an older group for the same due time, and a stale one
            states.update_and_move_to_end(TopicPartition("u", 0), state(delay_until_ms=T0 + 100))
            states.take_changes()
            made.append(states)
        fast, reference = made
        fast.delay([tps[i] for i in picks], T0, delay_ms)
        for i in picks:
            s = reference.state_value(tps[i])
            if s is not None and not s.is_delayed(T0):
                reference.update_and_move_to_end(tps[i], s.delayed(T0, delay_ms))
        assert _journal(fast) == _journal(reference)
        assert fast.pop_due(T0 + 1000) == reference.pop_due(T0 + 1000)
        if cls is ColumnarPartitionStates:
            assert fast.row_order() == reference.row_order()
            assert fast.ready_items(T0) == reference.ready_items(T0)
            assert fast.truncating_items(T0 + 1000) == reference.truncating_items(T0 + 1000)
