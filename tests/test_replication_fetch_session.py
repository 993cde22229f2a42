"""The leader's fetch sessions (KIP-227) and long-poll fetches through the replica manager.

Kafka's rules (``FetchSession.scala``, ``KafkaApis.handleFetchRequest``, ``DelayedFetch``),
exercised on real replica managers over real logs: full then incremental fetches, session
errors, forgotten partitions, cache eviction, and the completion of parked (delayed) fetches by
each trigger — an append, expiry, a leadership change — but not by a HW change alone.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from replication_harness import TP, Cluster

from replica_core._fast.replica_state_py import EVERY_COLUMN, SESSION_MARK, SESSION_OUT
from replica_core.errors import Errors
from replica_core.replication import ReplicaConfig
from replica_core.replication.delayed import DelayedFetch, FetchPartitionStatus
from replica_core.replication.fetch_session import FetchSession
from replica_core.replication.messages import FetchPartition, FetchRequest, TopicPartition
from replica_core.replication.replica_manager import ReplicaManager
from replica_core.replication.state import _PARTITION_COLUMNS, _SLOT_COLUMNS
from replica_core.sim import scenario as sc
from replica_core.sim.run import run_scenario
from replica_core.storage.segment import LogOffsetMetadata

TP1 = TopicPartition("t", 1)


def cluster(**config) -> Cluster:
    c = Cluster(3, config=ReplicaConfig(**config))
    c.create(TP)
    c.create(TP1)
    return c


def session_fetch(c: Cluster, follower: int, tps, *, session_id: int, epoch: int,
                  forgotten=(), max_wait_ms: int = 0, callback=None, min_bytes: int = 1):
    req = c.fetch_request(follower, tps, max_wait_ms=max_wait_ms, min_bytes=min_bytes)
    req = dataclasses.replace(req, session_id=session_id, session_epoch=epoch,
                              forgotten=tuple(forgotten))
    return c.rm(0).fetch_messages(req, callback=callback)


def open_session(c: Cluster, follower: int = 1) -> int:
    resp = session_fetch(c, follower, (TP, TP1), session_id=0, epoch=0)
    assert resp.error_code == Errors.NONE and resp.session_id != 0
    assert [p.tp for p in resp.partitions] == [TP, TP1]        # a full response has them all
    c.apply(follower, resp)
    return resp.session_id


def test_full_then_incremental_sends_only_what_changed():
    c = cluster()
    sid = open_session(c)
    resp = session_fetch(c, 1, (), session_id=sid, epoch=1)
    assert (resp.error_code, resp.session_id, resp.partitions) == (Errors.NONE, sid, ())
    c.produce(TP1, 3)
    resp = session_fetch(c, 1, (), session_id=sid, epoch=2)
    assert [p.tp for p in resp.partitions] == [TP1] and len(resp.partitions[0].records) > 0
    c.apply(1, resp)
    # the follower sends its new fetch offset for TP1 only; the HW cannot move while follower 2
    # lags, so nothing must be sent
    resp = session_fetch(c, 1, (TP1,), session_id=sid, epoch=3)
    assert resp.partitions == ()
    c.fetch(2, (TP1,))
    c.fetch(2, (TP1,))                            # follower 2 catches up: HW 3
    resp = session_fetch(c, 1, (), session_id=sid, epoch=4)
    assert [(p.tp, p.high_watermark, len(p.records)) for p in resp.partitions] == [(TP1, 3, 0)]
    m = c.rm(0).metrics()
    assert (m["FullFetches"], m["IncrementalFetches"], m["NumIncrementalFetchSessions"],
            m["NumIncrementalFetchPartitionsCached"]) == (1, 4, 1, 2)
    # meters(): the same meters and session gauges, without the per-partition walk
    meters = c.rm(0).meters()
    assert (meters["FullFetches"], meters["IncrementalFetches"],
            meters["NumIncrementalFetchSessions"],
            meters["NumIncrementalFetchPartitionsCached"]) == (1, 4, 1, 2)
    assert meters == {k: v for k, v in m.items() if k in meters}
    assert "partitions" not in meters and "LeaderCount" not in meters


def test_session_errors_and_closing():
    c = cluster()
    sid = open_session(c)
    stale = session_fetch(c, 1, (), session_id=sid, epoch=5)
    assert (stale.error_code, stale.session_id) == (Errors.INVALID_FETCH_SESSION_EPOCH, 0)
    unknown = session_fetch(c, 1, (), session_id=sid + 1, epoch=1)
    assert unknown.error_code == Errors.FETCH_SESSION_ID_NOT_FOUND
    ok = session_fetch(c, 1, (), session_id=sid, epoch=1)        # errors left the session as is
    assert ok.error_code == Errors.NONE and ok.session_id == sid
    # a full request naming the session closes it and opens another
    again = session_fetch(c, 1, (TP, TP1), session_id=sid, epoch=0)
    assert again.session_id not in (0, sid)
    assert session_fetch(c, 1, (), session_id=sid, epoch=2).error_code == \
        Errors.FETCH_SESSION_ID_NOT_FOUND
    assert c.rm(0).metrics()["FetchSessionErrors"] == 3


def test_forgotten_partitions_leave_the_session_and_an_empty_session_is_closed():
    c = cluster()
    sid = open_session(c)
    c.produce(TP, 1)
    resp = session_fetch(c, 1, (), session_id=sid, epoch=1, forgotten=(TP,))
    assert resp.partitions == ()                  # TP's new record is not sent: TP was forgotten
    assert len(c.rm(0).fetch_manager.cache.get(sid)) == 1
    resp = session_fetch(c, 1, (), session_id=sid, epoch=2, forgotten=(TP1,))
    assert (resp.error_code, resp.session_id) == (Errors.NONE, 0)   # sessionless from here
    assert c.rm(0).fetch_manager.cache.get(sid) is None


def test_partition_added_to_a_session_is_sent_in_full_once():
    c = cluster()
    resp = session_fetch(c, 1, (TP,), session_id=0, epoch=0)
    sid = resp.session_id
    resp = session_fetch(c, 1, (TP1,), session_id=sid, epoch=1)
    assert [p.tp for p in resp.partitions] == [TP1]   # new in the session: HW not sent yet
    resp = session_fetch(c, 1, (), session_id=sid, epoch=2)
    assert resp.partitions == ()


def test_full_cache_leaves_a_new_fetcher_sessionless():
    """max.incremental.fetch.session.cache.slots = 1: a second follower's full fetch of the same
    size cannot evict the first (Kafka's EvictableKey order) and gets session id 0."""
    c = cluster(max_incremental_fetch_session_cache_slots=1)
    sid = open_session(c, 1)
    resp = session_fetch(c, 2, (TP, TP1), session_id=0, epoch=0)
    assert resp.error_code == Errors.NONE and resp.session_id == 0
    assert [p.tp for p in resp.partitions] == [TP, TP1]
    assert c.rm(0).fetch_manager.cache.get(sid) is not None
    assert c.rm(0).metrics()["IncrementalFetchSessionEvictionsPerSec"] == 0


def test_parked_session_fetch_completes_on_append():
    c = cluster()
    sid = open_session(c)
    got: list = []
    assert session_fetch(c, 1, (), session_id=sid, epoch=1, max_wait_ms=500,
                         callback=got.append) is None
    assert c.rm(0).fetch_purgatory.delayed == 1
    c.produce(TP, 2, acks=1)
    assert len(got) == 1 and [p.tp for p in got[0].partitions] == [TP]
    assert got[0].session_id == sid and len(got[0].partitions[0].records) > 0
    m = c.rm(0).metrics()
    assert (m["DelayedFetchCompletions.follower"], m["FetchExpiresPerSec.follower"]) == (1, 0)


def test_parked_session_fetch_counts_bytes_until_min_bytes():
    """Case G over a session: appends to partitions the parking request did not read count
    their bytes (from the follower's fetch offset's position) until min_bytes is reached."""
    c = cluster()
    c.produce(TP, 1, acks=1)
    one = len(c.partition(0, TP).log.read(0, 1 << 20).records)  # one produced batch
    sid = open_session(c)
    c.apply(1, session_fetch(c, 1, (TP,), session_id=sid, epoch=1))  # at the LEO everywhere
    got: list = []
    assert session_fetch(c, 1, (), session_id=sid, epoch=2, max_wait_ms=500,
                         min_bytes=2 * one + 1, callback=got.append) is None
    c.produce(TP1, 1, acks=1)
    c.produce(TP, 1, acks=1)
    assert got == []                 # two batches: one byte short of min_bytes
    c.produce(TP1, 1, acks=1)
    assert len(got) == 1             # the third reaches it
    assert sorted((p.tp, len(p.records)) for p in got[0].partitions) == [
        (TP, one), (TP1, 2 * one)]


def test_parked_session_fetch_expires_after_max_wait():
    c = cluster()
    sid = open_session(c)
    got: list = []
    assert session_fetch(c, 1, (), session_id=sid, epoch=1, max_wait_ms=500,
                         callback=got.append) is None
    c.advance(499)
    assert got == []
    c.advance(1)
    assert len(got) == 1 and got[0].partitions == () and got[0].session_id == sid
    m = c.rm(0).metrics()
    assert (m["DelayedFetchCompletions.follower"], m["FetchExpiresPerSec.follower"]) == (1, 1)


def test_high_watermark_change_alone_does_not_complete_a_follower_fetch():
    """A follower reads to the LEO: DelayedFetch waits for bytes past its fetch offset, not for
    a new HW (which it learns at expiry or with the next data)."""
    c = cluster()
    c.produce(TP, 2, acks=1)
    sid = open_session(c, 1)
    c.fetch(2, (TP, TP1))                        # follower 2 catches up too
    resp = session_fetch(c, 1, (TP,), session_id=sid, epoch=1)   # follower 1 at LEO 2
    c.apply(1, resp)
    got: list = []
    assert session_fetch(c, 1, (), session_id=sid, epoch=2, max_wait_ms=500,
                         callback=got.append) is None
    c.fetch(2, (TP,))                             # moves the leader's HW to 2
    assert c.partition(0, TP).high_watermark == 2
    assert got == []
    c.advance(500)
    assert [(p.tp, p.high_watermark) for p in got[0].partitions] == [(TP, 2)]


def test_leadership_change_completes_a_parked_fetch_with_the_error():
    c = cluster()
    sid = open_session(c)
    got: list = []
    assert session_fetch(c, 1, (), session_id=sid, epoch=1, max_wait_ms=500,
                         callback=got.append) is None
    c.leader_and_isr(TP, leader=1, isr=(0, 1, 2), brokers=[0])
    assert len(got) == 1   # Case A/E: the request's epoch is now fenced on the old leader
    assert [(p.tp, p.error_code) for p in got[0].partitions] == [
        (TP, Errors.FENCED_LEADER_EPOCH)]


def test_sessionless_long_poll_parks_and_completes():
    c = cluster()
    got: list = []
    assert c.fetch(1, (TP,), max_wait_ms=500, callback=got.append) is None
    c.produce(TP, 1, acks=1)
    assert len(got) == 1 and got[0].session_id == 0 and len(got[0].partitions[0].records) > 0


def test_offset_only_start_does_not_complete_early():
    """KAFKA-16452: a start offset known only as an offset adds no bytes, so the fetch waits for
    min bytes or expiry even though the log end moved past it."""
    c = cluster()
    c.produce(TP, 3, acks=1)
    rm = c.rm(0)
    req = c.fetch_request(1, (TP,), max_wait_ms=500)
    info = dataclasses.replace(req.partitions[0], fetch_offset=0)
    params = rm.fetch_params(dataclasses.replace(req, partitions=(info,)))
    got: list = []
    op = DelayedFetch(params, [(TP, FetchPartitionStatus(LogOffsetMetadata(0), info))], rm,
                      got.append)
    assert not op.try_complete()
    positioned = rm.partition(TP).log.convert_to_offset_metadata(0)
    op2 = DelayedFetch(params, [(TP, FetchPartitionStatus(positioned, info))], rm, got.append)
    assert op2.try_complete() and len(got) == 1


def test_sessionless_request_default_is_unchanged():
    """A FetchRequest built without session fields is sessionless (id 0, epoch −1)."""
    req = FetchRequest(1, 0, 1, 1 << 20, ())
    assert (req.session_id, req.session_epoch, req.forgotten) == (0, -1, ())
    c = cluster()
    resp = c.rm(0).fetch_messages(req)
    assert (resp.error_code, resp.session_id, resp.partitions) == (Errors.NONE, 0, ())
    assert c.rm(0).metrics()["SessionlessFetches"] == 1


@settings(max_examples=100, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from(["upsert", "forget", "move"]),
                              st.integers(0, 40)), max_size=120))
def test_session_order_follows_the_partition_map(ops):
    """The session's column order (what the session kernels walk) is always the partition
    map's iteration order — through additions, removals, slot reuse, growth and moves to the
    end (KIP-227's fairness rotation)."""
    session = FetchSession(1, False, 1, 0, 1)
    for op, k in ops:
        tp = TopicPartition("t", k)
        if op == "upsert":
            session.upsert(FetchPartition(tp, k, 0, 1 << 20, 0))
        elif op == "forget":
            session.forget(tp)
        elif tp in session.index:
            session.move_to_end(tp)
        assert session.order().tolist() == list(session.index.values())


def test_partition_read_at_the_log_end_counts_its_appends_once_parked():
    """A parking request that read a partition at the leader's LEO (nothing to send, only the
    follower's new fetch offset to record) keeps that position: later appends to it count
    their bytes towards min_bytes, beside those of a partition the request did not read."""
    c = cluster()
    c.produce(TP, 1, acks=1)
    one = len(c.partition(0, TP).log.read(0, 1 << 20).records)  # one produced batch
    sid = open_session(c)                       # follower 1 now holds the batch: LEO 1
    got: list = []
    assert session_fetch(c, 1, (TP,), session_id=sid, epoch=1, max_wait_ms=500,
                         min_bytes=2 * one + 1, callback=got.append) is None
    assert c.partition(0, TP).log_end_offset == 1
    c.produce(TP, 1, acks=1)
    c.produce(TP1, 1, acks=1)
    assert got == []                 # two batches: one byte short of min_bytes
    c.produce(TP, 1, acks=1)
    assert len(got) == 1 and got[0].session_id == sid
    assert sorted((p.tp, len(p.records)) for p in got[0].partitions) == [
        (TP, 2 * one), (TP1, one)]


def test_changes_to_a_partition_followed_here_leave_a_parked_session_fetch_waiting():
    """Broker 0 leads TP and follows TP1: its own follower appends and HW moves on TP1 do not
    complete follower 2's parked session fetch over TP; an append to TP does."""
    c = cluster()
    c.leader_and_isr(TP1, leader=1, isr=(0, 1, 2))
    resp = session_fetch(c, 2, (TP,), session_id=0, epoch=0)
    assert resp.error_code == Errors.NONE and resp.session_id != 0
    c.apply(2, resp)
    got: list = []
    assert session_fetch(c, 2, (), session_id=resp.session_id, epoch=1, max_wait_ms=500,
                         callback=got.append) is None
    c.produce(TP1, 2, acks=1)
    for _ in range(2):               # both followers fetch TP1's batch, then its new HW
        c.fetch(0, (TP1,))
        c.fetch(2, (TP1,))
    c.fetch(0, (TP1,))
    c.rm(0).complete_delayed_fetch_requests([TP1])  # what its fetcher does after appending
    assert c.partition(0, TP1).log_end_offset == 2 and c.partition(0, TP1).high_watermark == 2
    assert got == [] and c.rm(0).fetch_purgatory.delayed == 1
    c.produce(TP, 1, acks=1)
    assert len(got) == 1 and [p.tp for p in got[0].partitions] == [TP]
    assert len(got[0].partitions[0].records) > 0


def _log_bytes(c: Cluster, tp: TopicPartition, offset: int) -> bytes:
    """The leader's log from ``offset`` to its end, read straight from the log."""
    return bytes(c.rm(0).local_log(tp).read(offset, 1 << 20).records)


def test_parked_fetches_completed_by_one_append_get_the_same_read():
    """One append completes both followers' parked session fetches: each is answered with
    the appended batch as the log holds it (one read, its response entry shared)."""
    c = cluster()
    sids = {f: open_session(c, f) for f in (1, 2)}
    start = c.partition(0, TP).log_end_offset
    got: dict[int, list] = {1: [], 2: []}
    for f in (1, 2):
        assert session_fetch(c, f, (), session_id=sids[f], epoch=1, max_wait_ms=500,
                             callback=got[f].append) is None
    c.produce(TP, 3, acks=1)
    assert [len(got[f]) for f in (1, 2)] == [1, 1]
    one, two = got[1][0].partitions, got[2][0].partitions
    assert [p.tp for p in one] == [p.tp for p in two] == [TP]
    assert bytes(one[0].records) == bytes(two[0].records) == _log_bytes(c, TP, start)
    assert len(one[0].records) > 0
    assert one[0] is two[0]


def test_reads_at_the_same_log_end_share_one_answer_until_the_hw_moves():
    """Two followers reading a partition at its log end while its LEO, HW and log start stay
    as they were get the same answer (one read and one response entry, shared); once the HW
    moves, the next read at that log end answers the new HW."""
    c = cluster()
    sids = {f: open_session(c, f) for f in (1, 2)}
    c.produce(TP, 3, acks=1)
    for f in (1, 2):  # each gets the batch and appends it (the HW is still 0)
        resp = session_fetch(c, f, (), session_id=sids[f], epoch=1)
        assert [(p.tp, p.high_watermark) for p in resp.partitions] == [(TP, 0)]
        c.apply(f, resp)
    assert c.partition(0, TP).log_end_offset == 3
    # follower 1 reports offset 3 first: the HW stays 0 (follower 2 not there yet), nothing to
    # send; follower 2's report moves the HW to 3 after its read, still nothing to send to it
    resp = session_fetch(c, 1, (TP,), session_id=sids[1], epoch=2)
    assert resp.partitions == ()
    resp = session_fetch(c, 2, (TP,), session_id=sids[2], epoch=2)
    assert resp.partitions == ()
    assert c.partition(0, TP).high_watermark == 3
    # both now read TP at its log end (offset 3) with HW news: one answer for both
    one = session_fetch(c, 1, (), session_id=sids[1], epoch=3).partitions
    two = session_fetch(c, 2, (), session_id=sids[2], epoch=3).partitions
    assert [(p.tp, p.high_watermark, p.log_end_offset, len(p.records)) for p in one] \
        == [(TP, 3, 3, 0)]
    assert one[0] is two[0]
    # the next batch moves the LEO to 5; once both followers have reported offset 5 the HW is
    # 5, and follower 1's next read at that log end answers it: a new read, not the old one
    c.produce(TP, 2, acks=1)
    for f in (1, 2):
        c.apply(f, session_fetch(c, f, (), session_id=sids[f], epoch=4))
    assert session_fetch(c, 1, (TP,), session_id=sids[1], epoch=5).partitions == ()
    assert session_fetch(c, 2, (TP,), session_id=sids[2], epoch=5).partitions == ()
    again = session_fetch(c, 1, (), session_id=sids[1], epoch=6).partitions
    assert [(p.tp, p.high_watermark, p.log_end_offset, len(p.records)) for p in again] \
        == [(TP, 5, 5, 0)]
    assert again[0] is not one[0]


def test_a_change_between_two_completions_is_read_afresh():
    """Follower 1's answer, delivered at once, leads to another append before follower 2's
    parked fetch is completed: follower 2 is answered with both batches, not the first
    read's bytes."""
    c = cluster()
    sids = {f: open_session(c, f) for f in (1, 2)}
    start = c.partition(0, TP).log_end_offset
    got: dict[int, list] = {1: [], 2: []}

    def first(resp):
        got[1].append(resp)
        c.produce(TP, 2, acks=1, value=b"w" * 30)  # the log changes before follower 2's read

    assert session_fetch(c, 1, (), session_id=sids[1], epoch=1, max_wait_ms=500,
                         callback=first) is None
    assert session_fetch(c, 2, (), session_id=sids[2], epoch=1, max_wait_ms=500,
                         callback=got[2].append) is None
    c.produce(TP, 1, acks=1)
    assert [len(got[f]) for f in (1, 2)] == [1, 1]
    first_batch = bytes(got[1][0].partitions[0].records)
    both = bytes(got[2][0].partitions[0].records)
    assert both == _log_bytes(c, TP, start)
    assert len(both) > len(first_batch) > 0 and both.startswith(first_batch)


def _session_state(s: FetchSession) -> tuple:
    n = s.n
    return (list(s.index.items()), list(s.parts), n, s.columns.shape, s.gen,
            s.columns[:, :n].tolist(), s.order().tolist())


def test_a_new_session_filled_at_once_equals_one_upsert_at_a_time():
    """``fill`` (a full fetch's response creating its session) leaves the session as upserting
    each partition and caching its HW and log start does: same slots, order, columns and
    capacity (40 partitions grow the 16-column block twice); a request naming a partition
    twice goes one at a time, the second entry winning."""
    parts = [FetchPartition(TopicPartition("t", k), 100 + k, 1024, log_start_offset=k,
                            current_leader_epoch=k % 3) for k in range(40)]
    hws = [50 + k for k in range(40)]
    starts = [k // 2 for k in range(40)]
    one_by_one = FetchSession(9, True, 2, 0, 1)
    for fp, hw, start in zip(parts, hws, starts, strict=True):
        i = one_by_one.upsert(fp)
        one_by_one.cached_hw[i] = hw
        one_by_one.cached_log_start[i] = start
    at_once = FetchSession(9, True, 2, 0, 1)
    at_once.fill(parts, hws, starts)
    assert at_once.columns.shape == (one_by_one.columns.shape[0], 64)
    assert _session_state(at_once) == _session_state(one_by_one)
    assert at_once.partitions() == parts
    assert at_once.fetch_offset[39] == 139 and at_once.cached_hw[39] == 89

    twice = [parts[0], parts[1], dataclasses.replace(parts[0], fetch_offset=7)]
    dup = FetchSession(9, True, 2, 0, 1)
    dup.fill(twice, [1, 2, 3], [4, 5, 6])
    assert list(dup.index.items()) == [(parts[0].tp, 0), (parts[1].tp, 1)]
    assert dup.fetch_offset[0] == 7 and dup.cached_hw[0] == 3 and dup.cached_log_start[0] == 6


def test_session_cells_are_the_blocks_rows_through_growth():
    """The memoryview cells a session's per-fetch paths write and read are its block's rows:
    what upsert writes through them (past two growths of the 16-column block) is what the
    block holds, a write to the block shows in them, and ``fill`` reaches them too."""
    session = FetchSession(9, True, 2, 0, 1)
    for k in range(40):
        session.upsert(FetchPartition(TopicPartition("t", k), 100 + k, 1024,
                                      log_start_offset=k, current_leader_epoch=k % 3))
    assert session.columns.shape[1] == 64
    assert session.fetch_offset_cells.tolist()[:40] == [100 + k for k in range(40)]
    assert session.fetch_offset[:40].tolist() == [100 + k for k in range(40)]
    assert session.log_start[:40].tolist() == list(range(40))
    assert session.req_epoch[:40].tolist() == [k % 3 for k in range(40)]
    session.cached_hw_cells[39] = 77
    session.mark_cells[5] = 3
    assert session.cached_hw[39] == 77 and session.columns[SESSION_MARK, 5] == 3
    session.cached_log_start[7] = 12
    session.out[0] = 31
    assert session.cached_log_start_cells[7] == 12 and session.out_cells[0] == 31
    filled = FetchSession(9, True, 2, 0, 1)
    filled.fill([FetchPartition(TopicPartition("t", k), k, 1024) for k in range(20)],
                [k + 1 for k in range(20)], [0] * 20)
    assert filled.cached_hw_cells.tolist()[:20] == [k + 1 for k in range(20)]


def test_session_rows_map_each_partition_to_the_followers_table_slot():
    """A session's (row, slot) per partition is the leader's state-table row and the table's
    slot of the session's follower; (−1, −1) for a partition not led here."""
    c = cluster()
    c.leader_and_isr(TP1, leader=1, isr=(0, 1, 2))
    sid = open_session(c, follower=2)
    rm = c.rm(0)
    session = rm.fetch_manager.cache.get(sid)
    session.refresh_rows(rm._rows_and_slots, rm._leadership_gen)  # noqa: SLF001
    p = c.partition(0, TP)
    i, j = session.index[TP], session.index[TP1]
    assert (session.rows[i], session.slots[i]) == (p.row, p.table.slot(p.row, 2))
    assert session.slots[i] == 2 and p.follower_slot(1) == 1 and p.follower_slot(0) == -1
    assert (session.rows[j], session.slots[j]) == (-1, -1)


def test_high_watermark_news_found_by_the_parking_read_is_sent_on_completion():
    """The parking request's own fetch moves TP's HW (follower 1 reports the LEO follower 2
    already has) after TP was read with the old one: the parked response owes the new HW,
    and an append to TP1 that completes it sends TP's HW beside TP1's records."""
    c = cluster()
    sid = open_session(c)
    c.produce(TP, 2, acks=1)
    c.fetch(2, (TP, TP1))
    c.fetch(2, (TP, TP1))                        # follower 2 at LEO 2
    resp = session_fetch(c, 1, (), session_id=sid, epoch=1)
    assert [(p.tp, p.high_watermark, len(p.records) > 0) for p in resp.partitions] == [
        (TP, 0, True)]
    c.apply(1, resp)
    got: list = []
    assert session_fetch(c, 1, (TP,), session_id=sid, epoch=2, max_wait_ms=500,
                         callback=got.append) is None
    assert c.partition(0, TP).high_watermark == 2 and got == []
    c.produce(TP1, 1, acks=1)
    assert len(got) == 1
    # session order: TP moved to the end when its records were sent
    assert [(p.tp, p.high_watermark, len(p.records) > 0) for p in got[0].partitions] == [
        (TP1, 0, True), (TP, 2, False)]


def test_leader_log_start_move_is_sent_when_a_parked_fetch_completes():
    """KIP-227: a log start other than the one last sent is answered. Retention moving
    TP1's log start on the leader completes no parked fetch (DelayedFetch does not look at
    it), but the response that an append to TP then completes carries TP1's new log start."""
    c = cluster()
    c.produce(TP1, 2, acks=1)
    sid = open_session(c)                        # follower 1 holds TP1's two records
    c.fetch(2, (TP, TP1))
    c.fetch(2, (TP, TP1))                        # follower 2 too
    resp = session_fetch(c, 1, (TP1,), session_id=sid, epoch=1)   # HW 2 on the leader
    c.apply(1, resp)
    resp = session_fetch(c, 1, (), session_id=sid, epoch=2)
    assert [(p.tp, p.high_watermark, p.log_start_offset) for p in resp.partitions] == [
        (TP1, 2, 0)]
    got: list = []
    assert session_fetch(c, 1, (), session_id=sid, epoch=3, max_wait_ms=500,
                         callback=got.append) is None
    assert c.rm(0).local_log(TP1).maybe_increment_log_start_offset(1)
    assert got == []
    c.produce(TP, 1, acks=1)
    assert len(got) == 1
    assert [(p.tp, p.log_start_offset, len(p.records) > 0) for p in got[0].partitions] == [
        (TP, 0, True), (TP1, 1, False)]


_EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


_RUNS = [
    (sc.default_scenario_path(), {"topics.0.partitions": 60, "duration_s": 10,
                                  "faults.0.at_s": 3, "faults.1.at_s": 7,
                                  "broker.session.timeout.ms": 2000,
                                  "workload.batches_per_second": 2.0}),
    (_EXAMPLES / "retention-reset.toml", {"duration_s": 16, "faults.0.at_s": 4,
                                          "faults.1.at_s": 12}),
]


@pytest.mark.parametrize("path, overrides", _RUNS)
def test_parked_fetch_answers_what_a_scan_of_the_whole_session_finds(monkeypatch, path,
                                                                     overrides):
    """Every parked session fetch completed in a simulated run (appends, HW moves, a crash
    and restart, leadership changes, retention moving log starts) reads exactly the
    partitions, in the order, that a scan of its whole session picks at that moment."""
    real = ReplicaManager._session_pending_reads
    seen = {"marked": 0, "partitions": 0}

    def checked(self, op):
        parts = real(self, op)
        got = [fp.tp for fp in parts]
        session = op.session
        marked = (op.leadership_gen == self._leadership_gen
                  and op.log_start_gen == self._log_start_gen
                  and op.session_version == session.version
                  and op.session_epoch == session.epoch)
        session.refresh_rows(self._rows_and_slots, self._leadership_gen)
        m = self.table.kernels.session_pending(session.columns, len(session.index))
        assert got == [session.parts[i].tp for i in session.out[:m].tolist()]
        seen["marked"] += marked
        seen["partitions"] += len(got)
        return parts

    monkeypatch.setattr(ReplicaManager, "_session_pending_reads", checked)
    summary = run_scenario(sc.load(path, overrides))[0]
    assert summary["lost_acked_records"] == 0
    assert seen["marked"] > 100 and seen["partitions"] > 100


@pytest.mark.parametrize("path, overrides", _RUNS)
def test_session_scan_looking_at_the_marked_columns_gives_the_full_scan(monkeypatch, path,
                                                                        overrides):
    """Every follower session scan of a simulated run (appends, HW moves, ISR shrink and
    expansion, a crash and restart, leadership changes, retention moving log starts) picks
    the columns, and writes the state, a scan looking at every column does from the same
    state; most scans look only at the columns marked since the session's last one."""
    names = [n for n, _, _ in _PARTITION_COLUMNS + _SLOT_COLUMNS]
    real = ReplicaManager._session_reads
    seen = {"since": 0, "scans": 0}

    def checked(self, session, params, now):
        table = self.table
        kernels = table.kernels

        class Checking:
            def __getattr__(self, name):
                return getattr(kernels, name)

            def session_fetch(self, block, n, apply_quiet, now, epoch, since):
                state = SimpleNamespace(**{x: getattr(table, x).copy() for x in names})
                full = block.copy()
                m = kernels.session_fetch(block, n, apply_quiet, now, epoch, since)
                m_full = type(kernels)(state, table.max_replicas).session_fetch(
                    full, n, apply_quiet, now, epoch)
                assert full[SESSION_OUT, :m_full].tolist() == block[SESSION_OUT, :m].tolist()
                for x in names:
                    assert np.array_equal(getattr(state, x), getattr(table, x)), x
                seen["since"] += since != EVERY_COLUMN
                seen["scans"] += 1
                return m

        table.kernels = Checking()
        try:
            return real(self, session, params, now)
        finally:
            table.kernels = kernels

    monkeypatch.setattr(ReplicaManager, "_session_reads", checked)
    summary = run_scenario(sc.load(path, overrides))[0]
    assert summary["lost_acked_records"] == 0
    assert seen["since"] > 0.8 * seen["scans"] > 100


def test_one_session_fetch_moving_two_partitions_advances_each_hw_in_order():
    """Kafka's updateFollowerFetchState per partition of the fetch, in request order: one
    incremental fetch that brings follower 1 up on TP and TP1 moves both HWs (follower 2 is
    there already) and answers both acks=-1 produces, TP's first."""
    c = cluster()
    sid = open_session(c)
    answered: list = []
    for tp in (TP, TP1):
        assert c.produce(tp, 2, callback=lambda r, tp=tp: answered.append(
            (tp, r[tp].error_code, r[tp].base_offset))) is None
        c.catch_up((2,), tp)                        # follower 2 takes the batch, then asks on
    resp = session_fetch(c, 1, (), session_id=sid, epoch=1)
    assert [(p.tp, len(p.records) > 0) for p in resp.partitions] == [(TP, True), (TP1, True)]
    c.apply(1, resp)
    assert answered == [] and [c.partition(0, tp).high_watermark for tp in (TP, TP1)] == [0, 0]
    # the follower's next request carries both new fetch offsets
    resp = session_fetch(c, 1, (TP, TP1), session_id=sid, epoch=2)
    assert answered == [(TP, Errors.NONE, 0), (TP1, Errors.NONE, 0)]
    assert [c.partition(0, tp).high_watermark for tp in (TP, TP1)] == [2, 2]
    row = c.partition(0, TP1).row
    slot = c.partition(0, TP1).follower_slot(1)
    assert int(c.rm(0).table.leo[row, slot]) == 2
    # the reads came before the updates (their HW was 0, as sent): the new HWs go next time
    assert resp.partitions == ()
    resp = session_fetch(c, 1, (), session_id=sid, epoch=3)
    assert [(p.tp, p.high_watermark) for p in resp.partitions] == [(TP, 2), (TP1, 2)]


def test_fetch_metadata_is_full_is_set_from_the_epoch_on_every_construction() -> None:
    """``FetchMetadata.is_full`` is kept, not computed: every way of making one sets it (epoch
    INITIAL or FINAL), and it is neither compared, hashed nor shown."""
    import pickle

    from replica_core.replication.fetch_metadata import (
        FINAL_EPOCH,
        INITIAL_EPOCH,
        FetchMetadata,
    )

    made = [FetchMetadata(7, e) for e in (FINAL_EPOCH, INITIAL_EPOCH, 1, 2, 2**31 - 1, -5)]
    made += [FetchMetadata.INITIAL, FetchMetadata.LEGACY, FetchMetadata.new_incremental(7)]
    for m in list(made):
        made += [m.next_incremental(), m.next_close_existing(),
                 m.next_close_existing_attempt_new(), pickle.loads(pickle.dumps(m)),
                 dataclasses.replace(m, epoch=3), dataclasses.replace(m, epoch=INITIAL_EPOCH)]
    assert len(made) == 63
    for m in made:
        assert m.is_full is (m.epoch in (INITIAL_EPOCH, FINAL_EPOCH)), m
    assert [m.is_full for m in made[:9]] == [True, True, False, False, False, False, True, True,
                                            False]
    a, b = FetchMetadata(7, 1), FetchMetadata(7, 1)
    assert a == b and hash(a) == hash(b) and repr(a) == "FetchMetadata(session_id=7, epoch=1)"
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.is_full = True  # type: ignore[misc]


def test_a_change_reaches_every_session_holding_the_partition_parked_or_not():
    """A session scan compares the leader's values only on the columns marked since its last
    scan: an append to a partition marks it in every session holding it, so each session's
    next fetch still answers it (and an idle one answers nothing)."""
    c = cluster()
    sids = {f: open_session(c, f) for f in (1, 2)}
    for f, sid in sids.items():                       # a first scan of each session
        assert session_fetch(c, f, (), session_id=sid, epoch=1).partitions == ()
    c.produce(TP, 2)
    for f, sid in sids.items():
        resp = session_fetch(c, f, (), session_id=sid, epoch=2)
        assert [(p.tp, len(p.records) > 0) for p in resp.partitions] == [(TP, True)]
        session = c.rm(0).fetch_manager.cache.get(sid)
        assert session.mark[session.index[TP]] == session.scan_stamp   # read: looked at again
        assert session.mark[session.index[TP1]] < session.scan_stamp   # quiet: left out


def test_a_follower_left_out_of_the_maximal_isr_is_read_by_its_next_session_scan():
    """A caught-up follower's quiet partition leaves the maximal ISR between two fetches (an
    ISR change the leader reports for no partition): the next scan of its session still reads
    it, so the fetch proposes the follower's return to the ISR (maybeExpandIsr)."""
    c = cluster()
    sid = open_session(c)
    assert session_fetch(c, 1, (), session_id=sid, epoch=1).partitions == ()
    rm = c.rm(0)
    rm.table.commit_isr(c.partition(0, TP).row, [0, 2])
    sent = len(c.controller.requests)
    session_fetch(c, 1, (), session_id=sid, epoch=2)
    assert [(item.tp, 1 in item.new_isr) for item in c.controller.pending_items()[sent:]] == [
        (TP, True)]


def test_a_fetch_outside_the_session_moving_the_follower_leo_is_seen_by_the_next_scan():
    """The follower fetches a quiet partition outside its session from another offset (the
    leader records that LEO): the next scan of the session looks at the partition again and
    reads it, the recorded LEO not being the session's fetch offset."""
    c = cluster()
    c.produce(TP, 3)
    c.catch_up()
    sid = open_session(c)
    for epoch in (1, 2):
        assert session_fetch(c, 1, (), session_id=sid, epoch=epoch).partitions == ()
    req = c.fetch_request(1, (TP,))
    req = dataclasses.replace(req, partitions=(dataclasses.replace(req.partitions[0],
                                                                   fetch_offset=1),))
    c.rm(0).fetch_messages(req)
    session_fetch(c, 1, (), session_id=sid, epoch=3)
    session = c.rm(0).fetch_manager.cache.get(sid)
    assert session.mark[session.index[TP]] == session.scan_stamp     # picked, read
    assert session.mark[session.index[TP1]] < session.scan_stamp     # still quiet
