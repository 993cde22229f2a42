"""Follower truncation against real leaders (§4.5–4.7, §9.1, §9.2, §9.4, §9.9).

Each scenario runs with truncation on fetch (diverging-epoch answers, IBP ≥ 2.7) and, where the
rule applies, with OffsetsForLeaderEpoch rounds (``truncate_on_fetch=False``, IBP 2.0–2.6).
"""
from __future__ import annotations

import pytest
from conftest import patch_method
from fetcher_cluster import TP, FetcherCluster

from replica_core.errors import Errors, KafkaStorageError
from replica_core.fetcher import FETCHING, TRUNCATING, InitialFetchState
from replica_core.replication.messages import EpochEndOffset, TopicPartition

pytestmark = pytest.mark.usefixtures("fetcher_transport")

BOTH = pytest.mark.parametrize("truncate_on_fetch", [True, False], ids=["on-fetch", "epoch-rpc"])


def truncation_round(f, truncate_on_fetch: bool) -> None:
    """One truncation step without fetching data: a fetch that comes back diverging, or one
    OffsetsForLeaderEpoch round."""
    if truncate_on_fetch:
        f.maybe_fetch()
    else:
        f.maybe_truncate()


def kip279_cluster(truncate_on_fetch: bool) -> FetcherCluster:
    """§9.4 steps 1–5: two fast unclean failovers leave brokers 1 and 2 with divergent tails.

    Broker 1: r0@0(e0) r2@1 r3@2 r4@3 (e2) r6@4 r7@5 (e4), cache {0:0, 2:1, 4:4}, leading e4.
    Broker 2: r0@0(e0) r1@1(e1) r5@2(e3), cache {0:0, 1:1, 3:2}, stopped.
    """
    c = FetcherCluster((1, 2), truncate_on_fetch=truncate_on_fetch,
                       unclean_leader_election_enable=True)
    c.leader_and_isr(leader=1)                                       # epoch 0
    c.produce(values=[b"r0"])
    c.step([2], rounds=2)
    c.stop(1)
    c.leader_and_isr(leader=2, isr=[2])                              # epoch 1
    c.produce(values=[b"r1"])
    c.stop(2)
    c.start(1)
    c.leader_and_isr(leader=1, isr=[1])                              # epoch 2
    for v in (b"r2", b"r3", b"r4"):
        c.produce(values=[v])
    c.stop(1)
    c.start(2)
    c.leader_and_isr(leader=2, isr=[2])                              # epoch 3
    c.produce(values=[b"r5"])
    c.stop(2)
    c.start(1)
    c.leader_and_isr(leader=1, isr=[1])                              # epoch 4
    c.produce(values=[b"r6"])
    c.produce(values=[b"r7"])
    assert c.log(1).leader_epoch_cache.entries() == [(0, 0), (2, 1), (4, 4)]
    return c


@BOTH
def test_kip279_multi_round_truncation_converges(truncate_on_fetch):
    c = kip279_cluster(truncate_on_fetch)
    c.start(2)
    assert c.log(2).leader_epoch_cache.entries() == [(0, 0), (1, 1), (3, 2)]
    c.leader_and_isr(leader=1, isr=[1], to=[2], leader_epoch=4)      # step 6: 2 follows 1
    f = c.fetcher(2)
    # Round 1: leader says (epoch 2, end 4); broker 2 never had epoch 2 → its own end of epoch 1
    # is 2: truncate to 2 (drops r5) and go another round with latest epoch 1.
    truncation_round(f, truncate_on_fetch)
    assert c.log(2).log_end_offset == 2
    st = f.fetch_state(TP)
    assert st.fetch_offset == 2 and st.last_fetched_epoch == 1
    assert st.state is (FETCHING if truncate_on_fetch else TRUNCATING)
    # Round 2: leader says (0, 1) for epoch 1; broker 2 has epoch 0 ending at 1: truncate to 1.
    truncation_round(f, truncate_on_fetch)
    assert c.log(2).log_end_offset == 1
    assert f.fetch_state(TP).state is FETCHING and f.fetch_state(TP).fetch_offset == 1
    c.step([2], rounds=3)
    assert c.values(2) == [b"r0", b"r2", b"r3", b"r4", b"r6", b"r7"]
    assert c.log_bytes(2) == c.log_bytes(1)
    assert c.log(2).leader_epoch_cache.entries() == [(0, 0), (2, 1), (4, 4)]


@BOTH
def test_epoch_known_to_both_truncates_to_leader_end(truncate_on_fetch):
    """§9.2 (KIP-101 scenario 2): after a power loss the follower holds m1 the new leader lacks;
    epoch 0 is known to both, the leader says it ends at 1."""
    c = FetcherCluster((1, 2), truncate_on_fetch=truncate_on_fetch)
    c.leader_and_isr(leader=1)
    c.produce(values=[b"m0"])
    c.step([2], rounds=2)
    c.log(1).flush()
    c.log(2).flush()
    c.produce(values=[b"m1"])
    c.step([2], rounds=2)
    c.log(1).flush()                   # broker 2 never flushes m1
    c.rm(1).checkpoint_high_watermarks()
    c.medium.crash("power")
    c.alive.clear()
    c.start(2)
    c.start(1)
    assert c.values(1) == [b"m0", b"m1"] and c.values(2) == [b"m0"]
    c.leader_and_isr(leader=2, isr=[2], to=[2])                      # epoch 1
    c.produce(values=[b"m2"])
    c.leader_and_isr(leader=2, isr=[2], to=[1], leader_epoch=1)
    c.step([1], rounds=3)
    assert c.values(1) == [b"m0", b"m2"] == c.values(2)


def test_high_watermark_mode_keeps_the_divergent_m1():
    """The same §9.2 sequence before KIP-101: broker 1 truncates to its HW 2, keeps m1, and the
    logs stay different at offset 1 while both look in sync."""
    c = FetcherCluster((1, 2), truncation="high_watermark")
    c.leader_and_isr(leader=1)
    c.produce(values=[b"m0"])
    c.step([2], rounds=2)
    c.log(1).flush()
    c.log(2).flush()
    c.produce(values=[b"m1"])
    c.step([2], rounds=2)
    c.log(1).flush()
    c.rm(1).checkpoint_high_watermarks()
    c.medium.crash("power")
    c.alive.clear()
    c.start(2)
    c.start(1)
    c.leader_and_isr(leader=2, isr=[2], to=[2])
    c.produce(values=[b"m2"])
    c.leader_and_isr(leader=2, isr=[2], to=[1], leader_epoch=1)
    c.step([1], rounds=3)
    assert c.values(1) == [b"m0", b"m1"]
    assert c.values(2) == [b"m0", b"m2"]


@BOTH
def test_epoch_unknown_to_leader_truncates_to_end_of_its_largest_smaller_epoch(truncate_on_fetch):
    """Follower 1 wrote r1 in epoch 1 as an unclean leader; leader 0 (epoch 2) never had epoch 1
    and answers (0, 1): the follower has epoch 0 and truncates to 1 in one round."""
    c = FetcherCluster((0, 1), truncate_on_fetch=truncate_on_fetch,
                       unclean_leader_election_enable=True)
    c.leader_and_isr(leader=0)
    c.produce(values=[b"r0"])
    c.step([1], rounds=2)
    c.stop(0)
    c.leader_and_isr(leader=1, isr=[1])                              # epoch 1
    c.produce(values=[b"r1"])
    c.stop(1)
    c.start(0)
    c.leader_and_isr(leader=0, isr=[0])                              # epoch 2
    c.produce(values=[b"r2"])
    c.start(1)
    c.leader_and_isr(leader=0, isr=[0], to=[1], leader_epoch=2)
    f = c.fetcher(1)
    truncation_round(f, truncate_on_fetch)
    assert c.log(1).log_end_offset == 1
    assert f.fetch_state(TP).state is FETCHING
    c.step([1], rounds=2)
    assert c.values(1) == [b"r0", b"r2"] == c.values(0)


def test_undefined_leader_answer_truncates_to_the_high_watermark_start():
    """A leader without epoch information answers UNDEFINED_EPOCH_OFFSET: truncate to the fetch
    offset the partition started at, its HW (§4.5 rule 1, §4.7)."""
    c = FetcherCluster((0, 1), truncate_on_fetch=False)
    c.leader_and_isr(leader=0)
    c.produce(values=[b"a"])
    c.produce(values=[b"b"])
    c.step([1], rounds=3)
    c.produce(values=[b"c"])
    c.step([1])                        # follower LEO 3, HW 2 (the HW before its fetch)
    assert (c.log(1).log_end_offset, c.log(1).high_watermark) == (3, 2)
    f = c.fetcher(1)
    f.remove_partitions([TP])
    f.add_partitions({TP: InitialFetchState(0, 0, c.log(1).high_watermark)})
    req = f.build_epoch_request()
    assert [(p.tp, p.leader_epoch, p.current_leader_epoch) for p in req.partitions] == [(TP, 0, 0)]
    f.process_epoch_response(req, {TP: EpochEndOffset(Errors.NONE, -1, -1)})
    assert c.log(1).log_end_offset == 2
    assert f.fetch_state(TP).state is FETCHING and f.fetch_state(TP).fetch_offset == 2


def test_old_protocol_leader_answer_without_epoch_uses_min_of_offsets():
    c = FetcherCluster((0, 1), truncate_on_fetch=False)
    c.leader_and_isr(leader=0)
    for v in (b"a", b"b", b"c"):
        c.produce(values=[v])
    c.step([1], rounds=2)
    f = c.fetcher(1)
    f.remove_partitions([TP])
    f.add_partitions({TP: InitialFetchState(0, 0, 3)})
    f.process_epoch_response(f.build_epoch_request(), {TP: EpochEndOffset(Errors.NONE, -1, 1)})
    assert c.log(1).log_end_offset == 1


def test_log_without_epoch_truncates_to_its_high_watermark():
    """No epoch in the follower's log (a pre-v2 log, or a cleared cache): the partition starts
    Truncating and is cut to its HW before fetching again (§4.7)."""
    c = FetcherCluster((0, 1))
    c.leader_and_isr(leader=0)
    for v in (b"a", b"b", b"c"):
        c.produce(values=[v])
    c.step([1], rounds=3)
    c.produce(values=[b"d"])
    c.produce(values=[b"e"])
    c.step([1])
    assert (c.log(1).log_end_offset, c.log(1).high_watermark) == (5, 3)
    c.log(1).leader_epoch_cache.clear_and_flush()
    c.leader_and_isr(leader=0, to=[1], leader_epoch=1)
    f = c.fetcher(1)
    st = f.fetch_state(TP)
    assert st.state is TRUNCATING and st.fetch_offset == 3 and st.last_fetched_epoch is None
    f.maybe_truncate()
    assert c.log(1).log_end_offset == 3
    assert f.fetch_state(TP).state is FETCHING
    c.leader_and_isr(leader=0, to=[0], leader_epoch=1)
    c.step([1], rounds=2)
    assert c.values(1) == [b"a", b"b", b"c", b"d", b"e"]


def test_logs_without_epochs_truncate_to_their_high_watermarks_in_one_pass(monkeypatch):
    """Several Truncating partitions without an epoch (§4.7): one ``maybe_truncate`` cuts each
    log to its HW and leaves it Fetching there, and tells the truncation listener once, in the
    fair order, of the partitions it truncated; a partition whose cut fails is marked failed
    (``doTruncate``) and the others are truncated all the same."""
    tps = [TopicPartition("t", i) for i in range(3)]
    c = FetcherCluster((0, 1))
    for tp in tps:
        c.leader_and_isr(tp, leader=0)
        for v in (b"a", b"b", b"c"):
            c.produce(tp, values=[v])
    c.step([1], rounds=3)
    for tp in tps:
        c.produce(tp, values=[b"d"])
        c.produce(tp, values=[b"e"])
    c.step([1])
    for tp in tps:
        assert (c.log(1, tp).log_end_offset, c.log(1, tp).high_watermark) == (5, 3)
        c.log(1, tp).leader_epoch_cache.clear_and_flush()
        c.leader_and_isr(tp, leader=0, to=[1], leader_epoch=1)
    f = c.fetcher(1)
    assert [f.fetch_state(tp).state for tp in tps] == [TRUNCATING] * 3
    told: list[list[TopicPartition]] = []
    f.truncation_listener = lambda truncated: told.append(list(truncated))

    def broken_cut(offset: int) -> None:
        raise KafkaStorageError("disk gone")

    patch_method(monkeypatch, c.rm(1).partition(tps[1]), "truncate_to", broken_cut)
    f.maybe_truncate()
    assert told == [[tps[0], tps[2]]]
    for tp in (tps[0], tps[2]):
        assert c.log(1, tp).log_end_offset == 3
        st = f.fetch_state(tp)
        assert (st.state, st.fetch_offset, st.last_fetched_epoch) == (FETCHING, 3, None)
    assert tps[1] in f.failed_partitions and f.fetch_state(tps[1]) is None
    assert c.log(1, tps[1]).log_end_offset == 5


def test_high_watermark_truncation_of_named_partitions_reads_their_epochs():
    """``truncate_to_high_watermark`` of named partitions (not the epoch-less selection): each
    state's last fetched epoch is the log's latest epoch after the cut, read from the log."""
    c = FetcherCluster((0, 1))
    c.leader_and_isr(leader=0)
    c.produce(values=[b"a"])
    c.leader_and_isr(leader=0, to=[0, 1], leader_epoch=3)
    c.produce(values=[b"b"])
    c.step([1], rounds=3)
    assert (c.log(1).log_end_offset, c.log(1).latest_epoch) == (2, 3)
    f = c.fetcher(1)
    f.partition_states.update(TP, f.fetch_state(TP).updated(last_fetched_epoch=None))
    f.truncate_to_high_watermark([TP])
    st = f.fetch_state(TP)
    assert (st.state, st.fetch_offset, st.last_fetched_epoch) == (FETCHING, 2, 3)
    assert c.log(1).log_end_offset == 2


def kip101_scenario1(truncation: str) -> tuple[FetcherCluster, list]:
    """§9.1 with brokers 1 (leader) and 2; returns the cluster and m1's produce answers."""
    c = FetcherCluster((1, 2), truncation=truncation)
    c.leader_and_isr(leader=1)                                     # epoch 0, ISR {1, 2}
    c.produce(values=[b"m0"], acks=-1)
    c.step([2], rounds=3)                                          # 1. both [m0], HW 1
    assert c.log(2).high_watermark == 1
    acked: list = []
    assert c.produce(values=[b"m1"], acks=-1, callback=acked.append) is None   # 2. parked
    c.step([2])                                                    # 3. follower m1, HW 1
    assert c.log(2).high_watermark == 1 and not acked
    f = c.fetcher(2)
    req, _ = f.build_fetch()                                       # 4. fetch at 2 ...
    f.leader.fetch(req)                                            # ... HW 2, m1 acknowledged,
    assert acked and acked[0][next(iter(acked[0]))].error_code == Errors.NONE
    c.restart(2)                                                   # ... answer never processed
    c.leader_and_isr(leader=1, to=[2], leader_epoch=0)             # 5. 2 follows again
    c.fetcher(2).maybe_truncate()
    c.stop(1)                                                      # 6. 1 dies, 2 elected
    c.leader_and_isr(leader=2, isr=[2], to=[2])
    c.start(1)                                                     # 7. 1 back as follower
    c.leader_and_isr(leader=2, isr=[2], to=[1], leader_epoch=1)
    c.step([1], rounds=3)
    return c, acked


def test_kip101_scenario1_high_watermark_truncation_loses_acknowledged_m1():
    c, _ = kip101_scenario1("high_watermark")
    assert c.values(2) == [b"m0"]
    assert c.values(1) == [b"m0"]      # the acknowledged m1 exists nowhere


def test_kip101_scenario1_leader_epoch_truncation_keeps_acknowledged_m1():
    c, _ = kip101_scenario1("leader_epoch")
    assert c.values(2) == [b"m0", b"m1"]
    assert c.values(1) == [b"m0", b"m1"]


def test_diverging_answer_ignores_records_and_high_watermark(monkeypatch):
    """KAFKA-14704: a deposed leader with uncommitted records gets a diverging epoch together with
    the new leader's HW; it must truncate first and not adopt that HW."""
    c = FetcherCluster((0, 1), unclean_leader_election_enable=True)
    c.leader_and_isr(leader=0)
    for i in range(5):
        c.produce(values=[b"c%d" % i])
    c.step([1], rounds=3)                     # both [c0..c4], HW 5
    assert c.log(1).high_watermark == 5
    c.stop(1)
    for i in range(5):
        c.produce(values=[b"u%d" % i])        # 5..9 in epoch 0, never replicated
    assert c.log(0).high_watermark == 5
    c.stop(0)
    c.start(1)
    c.leader_and_isr(leader=1, isr=[1])       # epoch 1, HW = LEO
    for i in range(5):
        c.produce(values=[b"n%d" % i])        # 5..9 in epoch 1
    assert c.log(1).high_watermark == 10
    c.start(0)
    c.leader_and_isr(leader=1, isr=[1], to=[0], leader_epoch=1)
    f = c.fetcher(0)
    follower = c.rm(0).partition(TP)
    calls: list[str] = []
    for name in ("append_records_to_follower", "update_follower_high_watermark"):
        real = getattr(follower, name)
        patch_method(monkeypatch, follower, name,
                     lambda *a, _n=name, _r=real: (calls.append(_n), _r(*a))[1])
    req, _ = f.build_fetch()
    resp = f.leader.fetch(req)
    pr = resp.partitions[0]
    assert pr.diverging_epoch is not None and pr.high_watermark == 10
    f.process_fetch_response(req, resp)
    assert calls == []                        # no append, no HW from a diverging answer
    assert c.log(0).log_end_offset == 5
    assert c.log(0).high_watermark == 5
    assert f.fetch_state(TP).fetch_offset == 5
    c.step([0], rounds=2)
    assert c.values(0) == c.values(1)
    assert c.log(0).high_watermark == 10
