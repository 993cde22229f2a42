"""The incremental fetch build against its reference, the full pass.

``FetchSessionHandler.build_changes`` (only the changed partitions) must give the request
``Builder.build`` gives when every wanted partition is added again; and a fetcher building from
its states journal (``ReplicaFetcher.incremental_build``) must send, round after round, exactly
the requests the one-pass build (``fetch_partitions`` into a ``Builder``) would send — through
appends, leader changes, broker failures and back-offs, truncation and log start moves.
"""
from __future__ import annotations

import random

import pytest
from conftest import clone_handler
from fetcher_cluster import FetcherCluster

from replica_core.errors import Errors
from replica_core.fetcher.fetch_session_handler import FetchRequestData, FetchSessionHandler
from replica_core.fetcher.fetcher import ReplicaFetcher
from replica_core.replication.fetch_metadata import FetchMetadata
from replica_core.replication.messages import FetchPartition, TopicPartition

TPS = [TopicPartition(t, p) for t in ("a", "b", "c") for p in range(4)]


def _reference(handler: FetchSessionHandler, wanted: list[FetchPartition]):
    builder = handler.new_builder()
    for fp in wanted:
        builder.add(fp.tp, fp)
    return builder.build()


def _same(a, b) -> None:
    assert a.to_send == b.to_send
    assert a.to_forget == b.to_forget
    assert list(a.session_partitions.items()) == list(b.session_partitions.items())
    assert a.metadata == b.metadata


@pytest.mark.parametrize("seed", range(25))
def test_build_changes_equals_the_full_builder(seed):
    rng = random.Random(seed)
    handler = FetchSessionHandler(1)
    wanted: dict[TopicPartition, FetchPartition] = {}
    for tp in rng.sample(TPS, 6):
        wanted[tp] = FetchPartition(tp, rng.randrange(10), 1000, 0)
    _reference(handler, list(wanted.values()))            # full build: the session starts
    handler.next_metadata = FetchMetadata.new_incremental(77)
    rounds_with_changes = 0
    for _ in range(40):
        changes: dict[TopicPartition, FetchPartition | None] = {}
        for tp in rng.sample(TPS, rng.randrange(0, 6)):
            roll = rng.random()
            if roll < 0.3:
                wanted.pop(tp, None)
                changes[tp] = None
            elif roll < 0.6 or tp not in wanted:
                # new or altered: re-added at the end of the fair order
                wanted.pop(tp, None)
                wanted[tp] = FetchPartition(tp, rng.randrange(10), 1000, rng.randrange(2))
                changes[tp] = wanted[tp]
            else:
                changes[tp] = wanted[tp]                    # "changed" to equal data: implied
        # changes come in fair order: the wanted order, then the removed ones
        ordered = {tp: changes[tp] for tp in wanted if tp in changes}
        ordered.update((tp, None) for tp in changes if tp not in wanted)
        expected = _reference(clone_handler(handler), list(wanted.values()))
        got = handler.build_changes(ordered)
        _same(got, expected)
        rounds_with_changes += bool(got.to_send or got.to_forget)
        handler.next_metadata = handler.next_metadata.next_incremental()
    assert rounds_with_changes > 5


def test_build_changes_refuses_full_metadata():
    with pytest.raises(RuntimeError, match="incremental"):
        FetchSessionHandler(1).build_changes({})


_checked: list[int] = []


def _checking_build_changes(self, changed, due, now):
    """ReplicaFetcher._build_changes, checked against the one-pass build on a twin session."""
    twin = clone_handler(self.session_handler)
    to_send, to_forget, errors = _ORIGINAL(self, changed, due, now)
    expected = _reference(twin, self.wanted)
    handler = self.session_handler
    _same(FetchRequestData(to_send, to_forget, handler.session_partitions,
                           handler.next_metadata), expected)
    _checked.append(len(to_send) + len(to_forget))
    return to_send, to_forget, errors


_ORIGINAL = ReplicaFetcher._build_changes


@pytest.mark.usefixtures("fetcher_transport")
@pytest.mark.parametrize("seed", range(8))
def test_fetcher_incremental_requests_equal_the_full_pass(monkeypatch, seed):
    monkeypatch.setattr(ReplicaFetcher, "_build_changes", _checking_build_changes)
    _checked.clear()
    rng = random.Random(seed)
    c = FetcherCluster((0, 1, 2))
    tps = TPS[:8]
    for i, tp in enumerate(tps):
        c.leader_and_isr(tp, leader=i % 3)
    for _ in range(120):
        roll = rng.random()
        live = sorted(c.alive)
        if roll < 0.45:
            tp = rng.choice(tps)
            try:
                c.produce(tp, [b"x" * rng.randrange(1, 50)] * rng.randrange(1, 4))
            except LookupError:
                pass
        elif roll < 0.55 and len(live) == 3:
            c.stop(rng.choice(live), clean=rng.random() < 0.5)   # fetches to it fail: back-off
        elif roll < 0.62 and len(live) < 3:
            down = next(b for b in (0, 1, 2) if b not in c.alive)
            c.start(down)
            for tp in tps:  # the restarted broker learns its partitions again
                c.leader_and_isr(tp, leader=c.leader_epochs and _live_leader(c, tp),
                                 to=[down], leader_epoch=c.leader_epochs[tp])
        elif roll < 0.72:
            tp = rng.choice(tps)
            c.leader_and_isr(tp, leader=rng.choice(live))  # a leader change: truncation
        elif roll < 0.80:
            tp = rng.choice(tps)
            lead = _live_leader(c, tp)
            lg = c.rm(lead).local_log(tp)
            if lg is not None and lg.high_watermark > lg.log_start_offset:
                lg.maybe_increment_log_start_offset(lg.high_watermark)  # DeleteRecords-like
        c.advance(rng.choice((0, 10, 100, 1000)))
        c.step()
    assert len(_checked) > 50 and sum(_checked) > 20, "the incremental path barely ran"


def _live_leader(c: FetcherCluster, tp: TopicPartition) -> int:
    try:
        return c.leader_of(tp)
    except LookupError:
        return sorted(c.alive)[0]


@pytest.mark.usefixtures("fetcher_transport")
def test_log_start_move_alone_is_sent_in_the_next_incremental_fetch():
    c = FetcherCluster((0, 1))
    tp = TPS[0]
    c.leader_and_isr(tp, leader=0)
    c.produce(tp, [b"a", b"b", b"c"])
    c.step(rounds=4)
    f = c.fetcher(1, tp)
    leader_log = c.rm(0).local_log(tp)
    leader_log.maybe_increment_log_start_offset(2)
    # one round: the leader's session answers the moved log start (nothing else changed), and
    # the follower adopts it
    c.step(rounds=1)
    assert c.log(1, tp).log_start_offset == 2
    # so its next incremental request carries the partition with the new log start
    request, _ = f.build_fetch()
    assert request is not None and request.session_epoch >= 1
    assert [(p.tp, p.log_start_offset) for p in request.partitions] == [(tp, 2)]
    f.abandon_request()
    # and the leader records it as the follower's log start
    leader = c.rm(0).partition(tp)
    resp = c.rm(0).fetch_messages(request)
    assert resp is not None and resp.error_code == Errors.NONE
    assert leader.replica(1).log_start_offset == 2
