"""Per-error handling of fetch and OffsetsForLeaderEpoch answers, and stale answers (§4.8, §7.6).

Errors come from real leaders wherever a leader can produce them; the few a healthy in-process
leader cannot (a storage error code, corrupt bytes on the wire) are injected into a real
leader's response before the follower processes it.
"""
from __future__ import annotations

import dataclasses

import pytest
from conftest import patch_method
from fetcher_cluster import TP, BrokerDown, FetcherCluster

from replica_core.errors import (
    Errors,
    FencedLeaderEpochError,
    KafkaStorageError,
    RequestTimedOutError,
)
from replica_core.fetcher import FETCHING, TRUNCATING, InitialFetchState
from replica_core.replication.messages import EpochEndOffset, FetchResponse, TopicPartition

pytestmark = pytest.mark.usefixtures("fetcher_transport")


def leader_and_follower(n: int = 3, **config) -> FetcherCluster:
    """Broker 1 follows TP from broker 0 and has caught up with ``n`` one-record batches."""
    c = FetcherCluster((0, 1), **config)
    c.leader_and_isr(leader=0)
    for i in range(n):
        c.produce(values=[b"%d" % i])
    c.step([1], rounds=3)
    assert c.log(1).log_end_offset == n
    return c


def with_error(resp: FetchResponse, code: Errors, **changes) -> FetchResponse:
    parts = tuple(dataclasses.replace(p, error_code=code, records=b"", **changes)
                  for p in resp.partitions)
    return dataclasses.replace(resp, partitions=parts)


def is_delayed_by_backoff(c: FetcherCluster, f, tp=TP) -> bool:
    st = f.fetch_state(tp)
    return st is not None and st.delay_until_ms == (c.clock.milliseconds()
                                                    + c.config.replica_fetch_backoff_ms)


# ---- OFFSET_OUT_OF_RANGE (§4.8) ------------------------------------------------------------------
def test_out_of_range_above_leader_end_truncates_to_it():
    """Unclean election: the new leader (broker 2, out of the ISR) has fewer records than the old
    leader's HW. High watermark mode fetches from that HW and gets OFFSET_OUT_OF_RANGE; the
    follower truncates to the leader's LEO and fetches from there (§4.8 step 1)."""
    c = FetcherCluster((0, 1, 2), truncation="high_watermark")
    c.leader_and_isr(leader=0, isr=[0, 1])
    for i in range(3):
        c.produce(values=[b"a%d" % i])
    c.step([1, 2], rounds=3)          # all at 3; broker 2 joined the ISR
    for i in range(2):
        c.produce(values=[b"b%d" % i])
    c.step([1], rounds=3)
    c.advance(31_000)                 # broker 2 lags for too long: shrunk out of the ISR
    assert c.rm(0).partition(TP).isr == [0, 1]
    assert c.log(0).high_watermark == 5 and c.log(2).log_end_offset == 3
    c.stop(0)
    c.stop(1)
    c.leader_and_isr(leader=2, isr=[2], to=[2])                     # unclean
    c.start(0)
    epoch = c.leader_and_isr(leader=2, isr=[2], to=[0], leader_epoch=c.leader_epochs[TP])
    f = c.fetcher(0)
    f.maybe_truncate()
    assert c.log(0).log_end_offset == 5           # truncated to its HW 5: nothing cut
    f.maybe_fetch()
    assert c.log(0).log_end_offset == 3
    st = f.fetch_state(TP)
    assert (st.fetch_offset, st.lag, st.state, st.current_leader_epoch) == (3, 0, FETCHING, epoch)
    assert f.fetcher_lag_stats.get_and_maybe_put(TP).lag == 0


@pytest.mark.parametrize("truncation", ["leader_epoch", "high_watermark"])
def test_out_of_range_below_leader_start_restarts_the_log_there(truncation):
    """The leader deleted records below 6; an empty follower fetching at 0 is out of range: it
    truncates fully, starts at the leader's log start offset and fetches from there."""
    c = FetcherCluster((0, 1), truncation=truncation)
    c.leader_and_isr(leader=0, isr=[0], replicas=[0])
    for i in range(10):
        c.produce(values=[b"%d" % i])
    c.log(0).maybe_increment_log_start_offset(6)
    c.leader_and_isr(leader=0, isr=[0], replicas=[0, 1])
    f = c.fetcher(1)
    c.step([1])
    st = f.fetch_state(TP)
    assert (st.fetch_offset, st.lag, st.state) == (6, 4, FETCHING)
    assert c.log(1).log_start_offset == 6 and c.log(1).log_end_offset == 6
    c.step([1], rounds=2)
    assert c.values(1) == [b"%d" % i for i in range(6, 10)]


def behind_leader_start() -> FetcherCluster:
    """Broker 0 leads with records 0-3 and its log start moved to 2; broker 1, empty, has just
    become its follower (its first fetch, at 0, is out of range)."""
    c = FetcherCluster((0, 1))
    c.leader_and_isr(leader=0, isr=[0], replicas=[0])
    for i in range(4):
        c.produce(values=[b"%d" % i])
    c.log(0).maybe_increment_log_start_offset(2)
    c.leader_and_isr(leader=0, isr=[0], replicas=[0, 1])
    return c


def test_out_of_range_with_failing_offset_lookup_backs_off(monkeypatch):
    c = behind_leader_start()
    f = c.fetcher(1)

    def refuse(tp, epoch):
        raise BrokerDown("leader unreachable")

    monkeypatch.setattr(f.leader, "fetch_earliest_offset", refuse)
    c.step([1])
    assert is_delayed_by_backoff(c, f) and f.fetch_state(TP).fetch_offset == 0


def test_out_of_range_fenced_offset_lookup_follows_the_fenced_rule(monkeypatch):
    c = FetcherCluster((0, 1))
    c.leader_and_isr(leader=0, isr=[0], replicas=[0])
    c.produce(values=[b"x"])
    c.produce(values=[b"y"])
    c.log(0).maybe_increment_log_start_offset(1)
    c.leader_and_isr(leader=0, isr=[0], replicas=[0, 1])
    f = c.fetcher(1)

    def fenced(tp, epoch):
        raise FencedLeaderEpochError("newer epoch on the leader")

    monkeypatch.setattr(f.leader, "fetch_latest_offset", fenced)
    c.step([1])                        # request epoch == current epoch: this follower is behind
    assert f.fetch_state(TP) is None and TP in c.fm(1).failed_partitions


# ---- epochs (KIP-320) -----------------------------------------------------------------------------
def test_unknown_leader_epoch_backs_off_until_the_leader_catches_up():
    c = leader_and_follower()
    epoch = c.leader_and_isr(leader=0, to=[1])    # the follower learns epoch 1 first
    c.produce(values=[b"late"])
    f = c.fetcher(1)
    c.step([1])
    assert is_delayed_by_backoff(c, f)
    assert c.log(1).log_end_offset == 3 and f.fetch_state(TP).current_leader_epoch == epoch
    c.leader_and_isr(leader=0, to=[0], leader_epoch=epoch)
    c.step([1])
    assert c.log(1).log_end_offset == 3           # still backing off
    c.advance(c.config.replica_fetch_backoff_ms)
    c.step([1], rounds=2)
    assert c.log(1).log_end_offset == 4


def test_fenced_by_a_newer_leader_epoch_marks_the_partition_failed():
    c = leader_and_follower()
    epoch = c.leader_and_isr(leader=0, to=[0])    # the follower missed epoch 1
    f = c.fetcher(1)
    c.step([1])
    assert f.fetch_state(TP) is None
    assert TP in c.fm(1).failed_partitions
    assert c.fm(1).metrics()["FailedPartitionsCount"] == 1
    c.leader_and_isr(leader=0, to=[1], leader_epoch=epoch)   # new metadata: follow again
    assert TP not in c.fm(1).failed_partitions
    c.produce(values=[b"more"])
    c.step([1], rounds=2)
    assert c.log(1).log_end_offset == 4


def test_fenced_answer_after_the_follower_moved_on_is_retried():
    c = leader_and_follower()
    f = c.fetcher(1)
    req, _ = f.build_fetch()                      # sent at epoch 0
    epoch = c.leader_and_isr(leader=0)            # both move to epoch 1 meanwhile
    f = c.fetcher(1)
    resp = f.leader.fetch(req)
    assert resp.partitions[0].error_code == Errors.FENCED_LEADER_EPOCH
    assert f.fetch_state(TP).current_leader_epoch == epoch
    f.process_fetch_response(req, resp)
    assert TP not in c.fm(1).failed_partitions
    assert is_delayed_by_backoff(c, f)


# ---- leadership and topic errors ------------------------------------------------------------------
def test_not_leader_or_follower_backs_off():
    """Stale metadata: the follower fetches from broker 2, another follower of the same epoch."""
    c = FetcherCluster((0, 1, 2))
    c.leader_and_isr(leader=0)
    c.produce(values=[b"x"])
    fm = c.fm(1)
    fm.remove_fetcher_for_partitions([TP])
    fm.add_fetcher_for_partitions({TP: InitialFetchState(2, 0, 0)})
    f = fm.get_fetcher(TP)
    assert f.source_broker == 2
    f.maybe_truncate()
    req, _ = f.build_fetch()
    resp = f.leader.fetch(req)
    assert resp.partitions[0].error_code == Errors.NOT_LEADER_OR_FOLLOWER
    f.process_fetch_response(req, resp)
    assert is_delayed_by_backoff(c, f) and c.log(1).log_end_offset == 0


def test_unknown_topic_or_partition_backs_off():
    """Broker 2 does not host t-0 at all."""
    c = FetcherCluster((0, 1, 2))
    c.leader_and_isr(leader=0, replicas=[0, 1])
    fm = c.fm(1)
    fm.remove_fetcher_for_partitions([TP])
    fm.add_fetcher_for_partitions({TP: InitialFetchState(2, 0, 0)})
    f = fm.get_fetcher(TP)
    f.maybe_truncate()
    req, _ = f.build_fetch()
    resp = f.leader.fetch(req)
    assert resp.partitions[0].error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
    f.process_fetch_response(req, resp)
    assert is_delayed_by_backoff(c, f)


@pytest.mark.parametrize("code", [Errors.KAFKA_STORAGE_ERROR, Errors.UNKNOWN_TOPIC_ID,
                                  Errors.INCONSISTENT_TOPIC_ID, Errors.UNKNOWN_SERVER_ERROR,
                                  Errors.NOT_LEADER_OR_FOLLOWER])
def test_other_error_codes_back_off_and_keep_the_partition(code):
    c = leader_and_follower()
    c.produce(values=[b"new"])
    f = c.fetcher(1)
    req, _ = f.build_fetch()
    f.process_fetch_response(req, with_error(f.leader.fetch(req), code))
    assert is_delayed_by_backoff(c, f)
    assert f.fetch_state(TP).fetch_offset == 3 and TP not in c.fm(1).failed_partitions
    c.advance(c.config.replica_fetch_backoff_ms)
    c.step([1])
    assert c.log(1).log_end_offset == 4


def test_corrupt_records_are_retried_after_backoff():
    c = leader_and_follower()
    c.produce(values=[b"payload"])
    f = c.fetcher(1)
    req, _ = f.build_fetch()
    resp = f.leader.fetch(req)
    part = resp.partitions[0]
    data = bytearray(part.records)
    data[-1] ^= 0xFF                              # breaks the batch CRC
    bad = dataclasses.replace(resp, partitions=(dataclasses.replace(part, records=bytes(data)),))
    f.process_fetch_response(req, bad)
    assert c.log(1).log_end_offset == 3 and is_delayed_by_backoff(c, f)
    c.advance(c.config.replica_fetch_backoff_ms)
    c.step([1])
    assert c.values(1)[-1] == b"payload"


def test_storage_error_while_appending_fails_the_partition(monkeypatch):
    c = leader_and_follower()
    c.produce(values=[b"x"])
    partition = c.rm(1).partition(TP)

    def offline(records):
        raise KafkaStorageError("disk gone")

    patch_method(monkeypatch, partition, "append_records_to_follower", offline)
    f = c.fetcher(1)
    c.step([1])
    assert f.fetch_state(TP) is None and TP in c.fm(1).failed_partitions


def test_fetch_offset_not_at_log_end_fails_the_partition():
    """The log moved under the fetcher (IllegalStateException in processPartitionData)."""
    c = leader_and_follower()
    c.produce(values=[b"x"])
    f = c.fetcher(1)
    req, _ = f.build_fetch()
    resp = f.leader.fetch(req)
    c.log(1).truncate_to(2)
    f.process_fetch_response(req, resp)
    assert f.fetch_state(TP) is None and TP in c.fm(1).failed_partitions


def test_failed_request_delays_all_partitions():
    c = leader_and_follower()
    f = c.fetcher(1)
    req, _ = f.build_fetch()
    f.process_fetch_response(req, BrokerDown("connection refused"))
    assert is_delayed_by_backoff(c, f)
    assert f.build_fetch() == (None, [])
    assert not f.do_work()
    assert f.next_deadline_ms() == c.clock.milliseconds() + c.config.replica_fetch_backoff_ms


def test_top_level_error_closes_the_session_and_retries_in_full():
    """A top-level error answers the fetch session (FetchSessionHandler.handleResponse): nothing
    is processed, no partition is delayed, and the next request is a full one that closes the
    session it names (epoch 0) — RemoteLeaderEndPoint.fetch returns no partition data."""
    c = leader_and_follower()
    c.produce(values=[b"new"])
    f = c.fetcher(1)
    req, _ = f.build_fetch()
    assert req.session_id != 0 and req.session_epoch >= 1          # incremental by now
    f.process_fetch_response(req, FetchResponse(Errors.UNKNOWN_SERVER_ERROR, ()))
    assert not is_delayed_by_backoff(c, f) and c.log(1).log_end_offset == 3
    again, _ = f.build_fetch()
    assert (again.session_id, again.session_epoch) == (req.session_id, 0)
    assert [p.tp for p in again.partitions] == [TP]
    f.process_fetch_response(again, f.leader.fetch(again))
    assert c.log(1).log_end_offset == 4


# ---- stale answers --------------------------------------------------------------------------------
def stale_setup():
    c = leader_and_follower()
    c.produce(values=[b"new"])
    f = c.fetcher(1)
    req, _ = f.build_fetch()
    resp = f.leader.fetch(req)
    assert len(resp.partitions[0].records) > 0
    return c, f, req, resp


def test_answer_for_another_fetch_offset_is_ignored():
    c, f, req, resp = stale_setup()
    c.log(1).truncate_to(2)
    f.remove_partitions([TP])
    f.add_partitions({TP: InitialFetchState(0, 0, 2)})
    f.maybe_truncate()
    f.process_fetch_response(req, resp)
    assert c.log(1).log_end_offset == 2 and f.fetch_state(TP).fetch_offset == 2


def test_answer_for_a_removed_partition_is_ignored():
    c, f, req, resp = stale_setup()
    f.remove_partitions([TP])
    f.process_fetch_response(req, resp)
    assert c.log(1).log_end_offset == 3 and f.fetch_state(TP) is None


def test_answer_for_a_delayed_partition_is_ignored():
    c, f, req, resp = stale_setup()
    f._delay_partitions([TP], 1000)
    f.process_fetch_response(req, resp)
    assert c.log(1).log_end_offset == 3


def test_answer_for_a_truncating_partition_is_ignored():
    c, f, req, resp = stale_setup()
    st = f.fetch_state(TP)
    f.partition_states.update(TP, st.updated(state=TRUNCATING))
    f.process_fetch_response(req, resp)
    assert c.log(1).log_end_offset == 3


def test_answer_for_a_partition_not_in_the_request_is_ignored():
    c, f, req, resp = stale_setup()
    other = TopicPartition("t", 9)
    part = dataclasses.replace(resp.partitions[0], tp=other)
    f.process_fetch_response(req, dataclasses.replace(resp, partitions=(part,)))
    assert c.log(1).log_end_offset == 3 and f.fetch_state(TP).fetch_offset == 3


# ---- OffsetsForLeaderEpoch errors -----------------------------------------------------------------
def epoch_rpc_follower():
    c = FetcherCluster((0, 1), truncate_on_fetch=False)
    c.leader_and_isr(leader=0)
    c.produce(values=[b"a"])
    c.step([1], rounds=2)
    epoch = c.leader_and_isr(leader=0, to=[1])
    f = c.fetcher(1)
    assert f.fetch_state(TP).state is TRUNCATING
    return c, f, epoch


@pytest.mark.parametrize("code", [Errors.UNKNOWN_LEADER_EPOCH, Errors.NOT_LEADER_OR_FOLLOWER,
                                  Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.KAFKA_STORAGE_ERROR])
def test_epoch_answer_errors_back_off(code):
    c, f, _ = epoch_rpc_follower()
    req = f.build_epoch_request()
    f.process_epoch_response(req, {TP: EpochEndOffset(code, -1, -1)})
    assert is_delayed_by_backoff(c, f) and f.fetch_state(TP).state is TRUNCATING


def test_epoch_request_from_real_leader_unknown_epoch_backs_off():
    c, f, epoch = epoch_rpc_follower()
    f.maybe_truncate()                            # the leader is still at epoch 0
    assert is_delayed_by_backoff(c, f) and f.fetch_state(TP).state is TRUNCATING
    c.leader_and_isr(leader=0, to=[0], leader_epoch=epoch)
    c.advance(c.config.replica_fetch_backoff_ms)
    f.maybe_truncate()
    assert f.fetch_state(TP).state is FETCHING


def test_epoch_answer_fenced_with_current_epoch_fails_the_partition():
    c, f, _ = epoch_rpc_follower()
    req = f.build_epoch_request()
    f.process_epoch_response(req, {TP: EpochEndOffset(Errors.FENCED_LEADER_EPOCH, -1, -1)})
    assert f.fetch_state(TP) is None and TP in c.fm(1).failed_partitions


def test_epoch_answer_for_an_older_epoch_is_dropped():
    c, f, epoch = epoch_rpc_follower()
    req = f.build_epoch_request()
    f.add_partitions({TP: InitialFetchState(0, epoch + 1, 1)})
    f.process_epoch_response(req, {TP: EpochEndOffset(Errors.NONE, 0, 0)})
    assert c.log(1).log_end_offset == 1 and f.fetch_state(TP).state is TRUNCATING


def test_epoch_request_transport_failure_backs_off():
    c, f, _ = epoch_rpc_follower()
    req = f.build_epoch_request()
    f.process_epoch_response(req, BrokerDown("refused"))
    assert is_delayed_by_backoff(c, f) and f.fetch_state(TP).state is TRUNCATING


# ---- a long-poll fetch outstanding when the leader goes away ----------------------------------
def test_fetch_parked_on_a_leader_that_shuts_down_fails_and_the_follower_goes_on():
    """A caught-up follower's fetch parks on the leader (replica.fetch.wait.max.ms long poll).
    When the leader shuts down its connections close, so the parked fetch fails (a network
    error, as Kafka's NetworkClient reports a disconnect): the follower is not left waiting for
    an answer that never comes, backs its partitions off, and fetches again from the leader
    once it is back."""
    c = leader_and_follower(2, replica_fetch_wait_max_ms=500)
    f = c.fetcher(1)
    for _ in range(3):                                 # until the HW is known: then quiet
        c.step([1])
        c.advance(1)
    assert f.awaiting_answer                           # parked on the leader: nothing to read
    assert c.rm(0).fetch_purgatory.watched + len(c.rm(0)._parked_sessions) >= 1
    c.stop(0)
    c.advance(5)                                       # time for a reset to reach the follower
    assert not f.awaiting_answer                       # the parked fetch failed
    c.step([1])                                        # the failure is processed: backoff
    assert is_delayed_by_backoff(c, f)
    c.start(0)
    c.leader_and_isr(leader=0)                         # its leadership again, a new epoch
    c.produce(values=[b"after"])
    c.advance(c.config.replica_fetch_backoff_ms)
    for _ in range(6):
        c.step([1])
        c.advance(1)
    assert c.values(1)[-1] == b"after"


@pytest.mark.parametrize("fetcher_transport", ["sim"], indirect=True)
def test_list_offsets_blocks_the_fetcher_thread_for_its_round_trip():
    """Kafka's fetcher thread asks ListOffsets synchronously (fetchOffsetAndTruncate) and is
    blocked until the answer: over the simulated network the out-of-range reset costs the
    link's round trip, so the next fetch leaves that much later; a leader it cannot reach
    blocks it for replica.socket.timeout.ms."""
    c = behind_leader_start()
    f = c.fetcher(1)
    endpoint = f.leader
    round_trip = endpoint.round_trip_ms()
    assert round_trip == 2                            # 1 ms each way on the test network
    t0 = c.clock.milliseconds()
    c.step([1])                                       # fetch at 0: OFFSET_OUT_OF_RANGE
    first = c.clock.milliseconds() - t0
    # fetchOffsetAndTruncate asks ListOffsets LATEST, then EARLIEST: two round trips
    assert endpoint.blocked_ms == 2 * round_trip
    assert f.fetch_state(TP).fetch_offset == 2
    t1 = c.clock.milliseconds()
    c.step([1])                                       # the reset fetch, held back meanwhile
    assert c.clock.milliseconds() - t1 >= first + 2 * round_trip  # + the records transit
    assert endpoint.blocked_ms == 0
    assert c.values(1) == [b"2", b"3"]
    timeout = endpoint.socket_timeout_ms()
    c.stop(0)
    with pytest.raises(RequestTimedOutError):
        endpoint.fetch_earliest_offset(TP, c.leader_epochs[TP])
    assert endpoint.blocked_ms == timeout
