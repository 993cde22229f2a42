"""Leader-side rules (KAFKA_SEMANTICS §6.1-§6.7): lastCaughtUp, HW, ISR expansion and shrink.

Real logs on a MemoryMedium, brokers wired in-process by ``replication_harness``; the clock is
a ManualClock far from zero. Each test runs with the native kernels and their plain twins.
"""
from __future__ import annotations

import pytest
from replication_harness import START_MS, TP, Cluster

from replica_core.errors import Errors
from replica_core.replication import IsrState


@pytest.fixture(params=["native", "twin"])
def pure(request) -> bool:
    return request.param == "twin"


def test_last_caught_up_both_branches_and_unchanged(pure: bool) -> None:
    c = Cluster(pure_kernels=pure, auto_isr=False)
    c.create(isr=(0, 1))  # follower 2 outside the ISR: lastCaughtUpTimeMs starts at 0
    c.produce(n=5, acks=1)
    r2 = c.partition(0).replica(2)
    assert r2.last_caught_up_time_ms == 0

    c.clock.advance(1_000)
    t1 = c.clock.milliseconds()
    c.fetch(2)  # offset 0 < LEO 5; previous lastFetchLeaderLogEndOffset unknown (-1)
    assert r2.log_end_offset == 0
    assert r2.last_fetch_leader_log_end_offset == 5
    assert r2.last_fetch_time_ms == t1
    assert r2.last_caught_up_time_ms == 0  # previous lastFetchTimeMs was 0

    c.clock.advance(1_000)
    c.produce(n=3, acks=1)  # leader LEO 8 while the follower fetches at 5
    c.fetch(2)
    # Branch 2: fetch offset 5 >= the leader LEO of the previous fetch (5), so the follower was
    # caught up as of that previous fetch.
    assert r2.log_end_offset == 5
    assert r2.last_caught_up_time_ms == t1

    c.clock.advance(1_000)
    t3 = c.clock.milliseconds()
    c.fetch(2)  # Branch 1: fetch offset 8 >= leader LEO 8 -> caught up now
    assert r2.log_end_offset == 8
    assert r2.last_caught_up_time_ms == t3

    # Neither branch: the follower went back (truncated) below the last fetch's leader LEO.
    c.produce(n=2, acks=1)
    c.partition(2).truncate_to(5)
    c.clock.advance(1_000)
    c.fetch(2)
    assert r2.log_end_offset == 5
    assert r2.last_caught_up_time_ms == t3
    assert r2.last_fetch_leader_log_end_offset == 10


def test_hw_held_back_by_caught_up_follower_outside_isr(pure: bool) -> None:
    c = Cluster(pure_kernels=pure, auto_isr=False)
    c.create(isr=(0, 1))
    c.produce(n=5, acks=1)
    # Follower 1 never fetches: after the lag window the leader proposes dropping it.
    c.advance(31_000)
    leader = c.partition(0)
    assert leader.isr_state == IsrState.PENDING_SHRINK
    shrink = c.controller.requests[-1]
    assert shrink.items[0].new_isr == (0,)
    # While the shrink is in flight follower 2 cannot join, but it catches up.
    c.fetch(2)
    c.fetch(2)
    assert leader.replica(2).log_end_offset == 5
    assert leader.isr_state == IsrState.PENDING_SHRINK
    c.produce(n=3, acks=1)  # leader LEO 8; follower 2 stays at 5
    c.controller.answer(shrink)  # ISR {0}: follower 1 no longer holds the HW
    assert leader.isr == [0]
    # Follower 2 is outside the ISR but caught up and eligible: it holds the HW at its LEO.
    assert leader.high_watermark == 5
    assert leader.log.high_watermark == 5
    # An ineligible replica (fenced / shutting down) does not hold it (KAFKA-15021).
    c.rm(0).set_broker_eligible(2, False)
    c.produce(n=1, acks=1)
    assert leader.high_watermark == 9


def test_caught_up_follower_stops_holding_hw_after_lag(pure: bool) -> None:
    c = Cluster(pure_kernels=pure, auto_isr=False)
    c.create(isr=(0,))
    c.produce(n=5, acks=1)
    leader = c.partition(0)
    assert leader.high_watermark == 5  # followers outside the ISR, never caught up
    c.fetch(1)
    c.fetch(1)  # caught up at 5 -> expansion proposed (pending: maximal ISR holds the HW)
    c.controller.answer(c.controller.requests[-1], Errors.INELIGIBLE_REPLICA)  # reverted
    assert leader.isr == [0] and leader.maximal_isr == [0]
    c.produce(n=5, acks=1)
    assert leader.high_watermark == 5  # follower 1 caught up within the lag: holds the HW
    c.clock.advance(30_001)
    c.produce(n=1, acks=1)
    assert leader.high_watermark == 11  # no longer caught up: ignored


def test_hw_not_recomputed_on_election_and_never_backwards(pure: bool) -> None:
    c = Cluster(pure_kernels=pure)
    c.create()
    c.produce(n=5, acks=1)
    c.produce(n=5, acks=1)
    c.fetch(1)
    c.fetch(2)
    c.fetch(1)  # follower 1 at 10; leader HW still 0 (follower 2's LEO 0)
    assert c.partition(1).high_watermark == 0
    c.fetch(2)
    assert c.partition(0).high_watermark == 10
    assert c.partition(1).high_watermark == 0  # its last response carried HW 0

    # Broker 1 becomes leader in epoch 1: its HW is kept at 0, not recomputed to 10.
    c.leader_and_isr(TP, leader=1, isr=(0, 1, 2))
    new = c.partition(1)
    assert new.is_leader and new.leader_epoch == 1
    assert new.high_watermark == 0
    assert new.log.high_watermark == 0
    # Followers start unknown: one of them fetching does not move it ...
    c.fetch(0)
    assert new.high_watermark == 0
    # ... every maximal-ISR member must have fetched once.
    c.fetch(2)
    assert new.high_watermark == 10
    # A follower reporting a lower LEO cannot move the leader's HW backwards.
    c.partition(2).truncate_to(5)  # a batch boundary
    c.fetch(2)
    assert new.replica(2).log_end_offset == 5
    assert new.high_watermark == 10


def test_new_leader_epoch_is_cached_at_log_end(pure: bool) -> None:
    c = Cluster(pure_kernels=pure)
    c.create()
    c.produce(n=5, acks=1)
    c.leader_and_isr(TP, leader=0, isr=(0, 1, 2))  # re-elected, epoch 1, nothing written yet
    log = c.partition(0).log
    assert log.leader_epoch_cache.entries()[-1] == (1, 5)  # KAFKA-7415
    assert c.partition(0).leader_epoch_start_offset == 5


def test_isr_expansion_needs_hw_and_epoch_start(pure: bool) -> None:
    c = Cluster(pure_kernels=pure)
    c.create(isr=(0, 1))
    c.produce(n=5, acks=1)
    c.fetch(1)
    c.fetch(1)
    c.produce(n=5, acks=1)
    c.fetch(1)
    c.fetch(1)
    assert c.partition(0).high_watermark == 10
    # Follower 2 fetches one batch (min one message): its LEO 0 is below the HW 10.
    c.fetch(2, partition_max_bytes=1)
    assert c.partition(0).replica(2).log_end_offset == 0
    assert c.partition(2).log_end_offset == 5
    assert c.partition(0).isr == [0, 1]
    assert c.controller.requests == []

    # KAFKA-7128: broker 0 dies, broker 1 leads epoch 1 with a stale HW (5) and LEO 10.
    assert c.partition(1).high_watermark == 5
    c.leader_and_isr(TP, leader=1, isr=(0, 1), brokers=(1, 2))
    leader = c.partition(1)
    assert leader.high_watermark == 5 and leader.leader_epoch_start_offset == 10
    c.fetch(2)  # LEO 5 >= HW 5 but below the epoch start 10: may not join
    assert leader.replica(2).log_end_offset == 5
    assert leader.isr == [0, 1]
    assert c.controller.requests == []
    c.fetch(2)  # now at 10: reached the current epoch
    assert leader.replica(2).log_end_offset == 10
    assert [item.new_isr for item in c.controller.pending_items()] == [(0, 1, 2)]
    assert leader.isr == [0, 1, 2]
    assert c.rm(1).metrics()["IsrExpandsPerSec"] == 1


def test_pending_expansion_counts_in_maximal_isr(pure: bool) -> None:
    c = Cluster(pure_kernels=pure, auto_isr=False)
    c.create(isr=(0, 1))
    c.fetch(1)
    c.fetch(2)  # LEO 0 >= HW 0 and >= epoch start 0: proposed
    leader = c.partition(0)
    assert leader.isr_state == IsrState.PENDING_EXPAND
    assert leader.isr == [0, 1] and leader.maximal_isr == [0, 1, 2]
    c.produce(n=4, acks=1)
    c.fetch(1)
    c.fetch(1)
    assert leader.replica(1).log_end_offset == 4
    assert leader.high_watermark == 0  # follower 2 (pending) holds it
    c.fetch(2)
    c.fetch(2)
    assert leader.high_watermark == 4


def test_shrink_after_lag_window(pure: bool) -> None:
    c = Cluster(pure_kernels=pure)
    c.create()
    c.produce(n=5, acks=1)
    lag = c.config.replica_lag_time_max_ms
    # Follower 2 keeps up for 7 s, then stops; follower 1 keeps fetching every second.
    for _ in range(7):
        c.fetch(1)
        c.fetch(2)
        c.advance(1_000)
    last_caught_up = c.partition(0).replica(2).last_caught_up_time_ms
    removed_at = None
    while removed_at is None and c.clock.milliseconds() < START_MS + 120_000:
        c.produce(n=1, acks=1)
        c.fetch(1)
        c.advance(1_000)
        if 2 not in c.partition(0).isr:
            removed_at = c.clock.milliseconds()
    assert removed_at is not None
    waited = removed_at - last_caught_up
    assert lag < waited <= lag * 3 // 2
    assert c.partition(0).isr == [0, 1]
    assert c.rm(0).metrics()["IsrShrinksPerSec"] == 1


def test_follower_at_leader_leo_is_never_out_of_sync(pure: bool) -> None:
    c = Cluster(pure_kernels=pure)
    c.create()
    c.produce(n=3, acks=1)
    c.catch_up()
    for _ in range(10):
        c.advance(10_000)  # nobody fetches for 100 s, but nothing was written either
    assert c.partition(0).isr == [0, 1, 2]
    c.produce(n=1, acks=1)  # now both lag, and lastCaughtUp is 100 s old
    c.advance(15_000)
    assert c.partition(0).isr == [0]


def test_shrink_is_not_applied_before_the_controller_accepts(pure: bool) -> None:
    c = Cluster(pure_kernels=pure, auto_isr=False)
    c.create(isr=(0, 1))
    c.produce(n=2, acks=1)
    c.advance(31_000)
    leader = c.partition(0)
    assert leader.isr_state == IsrState.PENDING_SHRINK
    assert leader.isr == [0, 1] and leader.maximal_isr == [0, 1]
    assert leader.high_watermark == 0  # a pending shrink does not advance the HW
    c.controller.answer(c.controller.requests[-1])
    assert leader.isr == [0]
    assert leader.high_watermark == 2
