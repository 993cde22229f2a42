"""Follower truncation points (§4.5), including the KIP-101 and KIP-279 sequences of §9."""
from replica_core.fetcher.truncation import offset_truncation_state


def cache_end_offset_for(entries, log_end_offset):
    """§4.3 endOffsetFor over a list of (epoch, start_offset), written out independently."""

    def lookup(requested):
        if not entries:
            return None
        if requested == entries[-1][0]:
            return requested, log_end_offset
        later = [e for e in entries if e[0] > requested]
        earlier = [e for e in entries if e[0] <= requested]
        if not later:
            return -1, -1
        if not earlier:
            return requested, entries[0][1]
        return earlier[-1][0], later[0][1]

    return lookup


def test_undefined_leader_offset_truncates_to_fetch_offset():
    s = offset_truncation_state(-1, -1, 10, 7, cache_end_offset_for([(0, 0)], 10))
    assert s == (7, True)


def test_undefined_leader_epoch_uses_min_of_offsets():
    assert offset_truncation_state(-1, 5, 10, 0, cache_end_offset_for([(0, 0)], 10)) == (5, True)
    assert offset_truncation_state(-1, 15, 10, 0, cache_end_offset_for([(0, 0)], 10)) == (10, True)


def test_same_epoch_takes_smallest_of_three():
    follower = cache_end_offset_for([(0, 0), (1, 4)], 9)
    assert offset_truncation_state(1, 6, 9, 0, follower) == (6, True)
    assert offset_truncation_state(1, 12, 9, 0, follower) == (9, True)


def test_no_follower_cache_falls_back_to_leader_offset():
    assert offset_truncation_state(3, 4, 9, 0, lambda e: None) == (4, True)


def test_kip101_scenario1_follower_keeps_acknowledged_message():
    # §9.1: follower log [m0, m1] (epoch 0, LEO 2), HW 1. Leader says epoch 0 ends at 2.
    follower = cache_end_offset_for([(0, 0)], 2)
    assert offset_truncation_state(0, 2, 2, 1, follower) == (2, True)


def test_kip101_scenario2_divergent_offset_dropped():
    # §9.2: broker 1 holds m0, m1 in epoch 0; leader 2 cache {0:0, 1:1} answers (0, 1).
    follower = cache_end_offset_for([(0, 0)], 2)
    assert offset_truncation_state(0, 1, 2, 2, follower) == (1, True)


def test_kip279_multi_round():
    # §9.4: follower 2: log [r0, r1, r5], cache {0:0, 1:1, 3:2}, LEO 3.
    follower_entries = [(0, 0), (1, 1), (3, 2)]
    # Round 1: leader 1 (cache {0:0, 2:1, 4:4}) answers for epoch 3 with (2, 4).
    s1 = offset_truncation_state(2, 4, 3, 3, cache_end_offset_for(follower_entries, 3))
    assert s1 == (2, False)
    # The follower truncates to 2: entries with start >= 2 removed; latest epoch is now 1.
    follower_entries = [(0, 0), (1, 1)]
    # Round 2: leader answers for epoch 1 with (0, 1).
    s2 = offset_truncation_state(0, 1, 2, 2, cache_end_offset_for(follower_entries, 2))
    assert s2 == (1, True)


def test_leader_epoch_older_than_follower_cache():
    # Follower cache starts at epoch 5; leader names epoch 2 → follower answers (2, start of 5).
    follower = cache_end_offset_for([(5, 100), (6, 120)], 130)
    assert offset_truncation_state(2, 110, 130, 0, follower) == (100, True)
