"""The fetching side of KIP-227 sessions: Kafka's FetchSessionHandlerTest (testFindMissing,
testSessionless, testIncrementals, testDoubleBuild, testIncrementalPartitionRemoval,
testVerifyFullFetchResponsePartitions, testTopLevelErrorResetsMetadata) without topic ids, the
build and response rules they leave implicit, and FetchMetadata's epoch arithmetic."""
from __future__ import annotations

import dataclasses

import pytest
from conftest import clone_handler

from replica_core.errors import Errors
from replica_core.fetcher.fetch_session_handler import (
    FetchSessionHandler,
    find_missing,
)
from replica_core.replication.fetch_metadata import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    FetchMetadata,
    next_epoch,
)
from replica_core.replication.messages import (
    FetchPartition,
    FetchPartitionResponse,
    FetchResponse,
    TopicPartition,
)

FETCH_SESSION_ID_NOT_FOUND = Errors.FETCH_SESSION_ID_NOT_FOUND
INVALID_FETCH_SESSION_EPOCH = Errors.INVALID_FETCH_SESSION_EPOCH

foo0, foo1 = TopicPartition("foo", 0), TopicPartition("foo", 1)
bar0, bar1 = TopicPartition("bar", 0), TopicPartition("bar", 1)
baz0, baz1 = TopicPartition("baz", 0), TopicPartition("baz", 1)


def req(tp: TopicPartition, fetch_offset: int, log_start_offset: int,
        max_bytes: int) -> FetchPartition:
    """Kafka's ReqEntry: FetchRequest.PartitionData(fetchOffset, logStartOffset, maxBytes)."""
    return FetchPartition(tp, fetch_offset, max_bytes, log_start_offset=log_start_offset)


def build(handler: FetchSessionHandler, *parts: FetchPartition):
    builder = handler.new_builder()
    for p in parts:
        builder.add(p.tp, p)
    return builder.build()


def by_tp(*parts: FetchPartition) -> list[tuple[TopicPartition, FetchPartition]]:
    return [(p.tp, p) for p in parts]


# --- FetchMetadata ---------------------------------------------------------------------------
def test_next_epoch():
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH
    assert next_epoch(-7) == FINAL_EPOCH
    assert next_epoch(INITIAL_EPOCH) == 1
    assert next_epoch(41) == 42
    assert next_epoch(2**31 - 2) == 2**31 - 1
    assert next_epoch(2**31 - 1) == 1  # wraps past INITIAL_EPOCH


def test_fetch_metadata_transitions():
    assert (FetchMetadata.INITIAL.session_id, FetchMetadata.INITIAL.epoch) == (0, 0)
    assert (FetchMetadata.LEGACY.session_id, FetchMetadata.LEGACY.epoch) == (0, FINAL_EPOCH)
    assert FetchMetadata.INITIAL.is_full and FetchMetadata.LEGACY.is_full
    m = FetchMetadata.new_incremental(123)
    assert m == FetchMetadata(123, 1) and not m.is_full
    assert m.next_incremental() == FetchMetadata(123, 2)
    assert FetchMetadata(123, 2**31 - 1).next_incremental() == FetchMetadata(123, 1)
    assert m.next_close_existing() == FetchMetadata(123, FINAL_EPOCH)
    assert m.next_close_existing().is_full
    assert m.next_close_existing_attempt_new() == FetchMetadata(123, INITIAL_EPOCH)
    assert m.next_close_existing().next_incremental() == FetchMetadata(123, FINAL_EPOCH)
    assert str(FetchMetadata.INITIAL) == "(sessionId=INVALID, epoch=INITIAL)"
    assert str(FetchMetadata(5, FINAL_EPOCH)) == "(sessionId=5, epoch=FINAL)"
    assert str(FetchMetadata(5, 9)) == "(sessionId=5, epoch=9)"
    assert len({FetchMetadata(1, 2), FetchMetadata(1, 2), FetchMetadata(2, 1)}) == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.epoch = 3  # type: ignore[misc]


# --- FetchSessionHandler ---------------------------------------------------------------------
def test_find_missing():
    assert find_missing([foo0], {foo0}) == []
    assert find_missing([foo0], {foo1}) == [foo0]
    assert find_missing([foo0, foo1], {baz0}) == [foo0, foo1]
    assert find_missing([foo0, foo1, bar0, bar1], {bar0, baz0, baz1}) == [foo0, foo1, bar1]
    assert find_missing([foo0, foo1, bar0, bar1, baz1],
                        {foo0, foo1, bar0, bar1, baz0, baz1}) == []


def test_sessionless():
    """A leader that creates no session (session id 0): every request stays full."""
    handler = FetchSessionHandler(1)
    data = build(handler, req(foo0, 0, 100, 200), req(foo1, 10, 110, 210))
    assert data.to_send == (req(foo0, 0, 100, 200), req(foo1, 10, 110, 210))
    assert list(data.session_partitions.items()) == by_tp(req(foo0, 0, 100, 200),
                                                          req(foo1, 10, 110, 210))
    assert data.metadata == FetchMetadata(INVALID_SESSION_ID, INITIAL_EPOCH)

    assert handler.handle_response(Errors.NONE, INVALID_SESSION_ID, [foo0, foo1])
    assert handler.next_metadata == FetchMetadata.INITIAL

    data2 = build(handler, req(foo0, 0, 100, 200))
    assert data2.metadata == FetchMetadata(INVALID_SESSION_ID, INITIAL_EPOCH)
    assert data2.to_send == (req(foo0, 0, 100, 200),)
    assert data2.to_forget == ()  # a full request forgets nothing: it restates the session
    assert list(data2.session_partitions) == [foo0]


def test_incrementals():
    handler = FetchSessionHandler(1)
    data = build(handler, req(foo0, 0, 100, 200), req(foo1, 10, 110, 210))
    assert data.to_send == (req(foo0, 0, 100, 200), req(foo1, 10, 110, 210))
    assert data.metadata == FetchMetadata(INVALID_SESSION_ID, INITIAL_EPOCH)
    assert handler.handle_response(Errors.NONE, 123, [foo0, foo1])
    assert handler.next_metadata == FetchMetadata(123, 1)

    # An incremental request which adds one partition and modifies another.
    data2 = build(handler, req(foo0, 0, 100, 200), req(foo1, 10, 120, 210),
                  req(bar0, 20, 200, 200))
    assert not data2.metadata.is_full
    assert data2.metadata == FetchMetadata(123, 1)
    assert list(data2.session_partitions.items()) == by_tp(
        req(foo0, 0, 100, 200), req(foo1, 10, 120, 210), req(bar0, 20, 200, 200))
    assert data2.to_send == (req(bar0, 20, 200, 200), req(foo1, 10, 120, 210))
    assert data2.to_forget == ()

    assert handler.handle_response(Errors.NONE, 123, [foo1])
    assert handler.next_metadata == FetchMetadata(123, 2)

    # Without building: an INVALID_FETCH_SESSION_EPOCH response makes the next request close
    # the session and ask for a new one.
    assert not handler.handle_response(INVALID_FETCH_SESSION_EPOCH, INVALID_SESSION_ID, [])
    assert handler.next_metadata == FetchMetadata(123, INITIAL_EPOCH)

    data4 = build(handler, req(foo0, 0, 100, 200), req(foo1, 10, 120, 210),
                  req(bar0, 20, 200, 200))
    assert data4.metadata.is_full
    assert data4.metadata.session_id == data2.metadata.session_id
    assert data4.metadata.epoch == INITIAL_EPOCH
    expected = (req(foo0, 0, 100, 200), req(foo1, 10, 120, 210), req(bar0, 20, 200, 200))
    assert data4.to_send == expected
    assert list(data4.session_partitions.values()) == list(expected)


def test_double_build():
    handler = FetchSessionHandler(1)
    builder = handler.new_builder()
    builder.add(foo0, req(foo0, 0, 100, 200))
    builder.build()
    with pytest.raises(RuntimeError):
        builder.build()
    with pytest.raises(RuntimeError):
        builder.add(foo1, req(foo1, 0, 100, 200))


def test_incremental_partition_removal():
    handler = FetchSessionHandler(1)
    data = build(handler, req(foo0, 0, 100, 200), req(foo1, 10, 110, 210),
                 req(bar0, 20, 120, 220))
    assert data.to_send == (req(foo0, 0, 100, 200), req(foo1, 10, 110, 210),
                            req(bar0, 20, 120, 220))
    assert data.metadata.is_full
    assert handler.handle_response(Errors.NONE, 123, [foo0, foo1, bar0])

    # An incremental request which removes two partitions.
    data2 = build(handler, req(foo1, 10, 110, 210))
    assert not data2.metadata.is_full
    assert data2.metadata == FetchMetadata(123, 1)
    assert list(data2.session_partitions.items()) == by_tp(req(foo1, 10, 110, 210))
    assert data2.to_send == ()
    assert data2.to_forget == (foo0, bar0)
    assert list(handler.session_partitions) == [foo1]

    # FETCH_SESSION_ID_NOT_FOUND: the next request is a session-establishing full request.
    assert not handler.handle_response(FETCH_SESSION_ID_NOT_FOUND, INVALID_SESSION_ID, [])
    assert handler.next_metadata == FetchMetadata.INITIAL
    data3 = build(handler, req(foo0, 0, 100, 200))
    assert data3.metadata.is_full
    assert data3.metadata == FetchMetadata(INVALID_SESSION_ID, INITIAL_EPOCH)
    assert data3.to_send == (req(foo0, 0, 100, 200),)
    assert list(data3.session_partitions.items()) == by_tp(req(foo0, 0, 100, 200))


def test_verify_full_fetch_response_partitions():
    handler = FetchSessionHandler(1)
    issue = handler.verify_full_fetch_response_partitions({foo0, foo1, bar0})
    assert "extra" in issue and "omitted" not in issue
    build(handler, req(foo0, 0, 100, 200), req(foo1, 10, 110, 210), req(bar0, 20, 120, 220))
    assert handler.verify_full_fetch_response_partitions({foo0, foo1, bar0}) is None
    issue3 = handler.verify_full_fetch_response_partitions({foo0, foo1})
    assert "extra" not in issue3 and "omitted" in issue3 and "bar-0" in issue3


def test_verify_incremental_fetch_response_partitions():
    handler = FetchSessionHandler(1)
    build(handler, req(foo0, 0, 100, 200), req(foo1, 10, 110, 210))
    assert handler.verify_incremental_fetch_response_partitions({foo1}) is None
    assert handler.verify_incremental_fetch_response_partitions(set()) is None
    issue = handler.verify_incremental_fetch_response_partitions({foo1, bar0})
    assert "extraPartitions=(bar-0)" in issue


def test_top_level_error_resets_metadata():
    handler = FetchSessionHandler(1)
    data = build(handler, req(foo0, 0, 100, 200), req(foo1, 10, 110, 210))
    assert data.metadata == FetchMetadata(INVALID_SESSION_ID, INITIAL_EPOCH)
    assert handler.handle_response(Errors.NONE, 123, [foo0, foo1])

    unknown0 = TopicPartition("unknown", 0)
    data2 = build(handler, req(unknown0, 0, 100, 200))
    assert not data2.metadata.is_full
    assert data2.metadata == FetchMetadata(123, next_epoch(INITIAL_EPOCH))

    assert not handler.handle_response(Errors.UNKNOWN_TOPIC_ID, 123, [unknown0])
    # The next request starts a new epoch: it closes the session (and asks for a new one).
    data3 = handler.new_builder().build()
    assert data3.metadata == FetchMetadata(123, INITIAL_EPOCH)
    assert data3.to_send == () and data3.session_partitions == {}


def test_full_response_with_unrequested_or_missing_partitions_is_rejected():
    handler = FetchSessionHandler(1)
    build(handler, req(foo0, 0, 100, 200), req(foo1, 10, 110, 210))
    assert not handler.handle_response(Errors.NONE, 123, [foo0, foo1, bar0])
    assert handler.next_metadata == FetchMetadata.INITIAL
    build(handler, req(foo0, 0, 100, 200), req(foo1, 10, 110, 210))
    assert not handler.handle_response(Errors.NONE, 123, [foo0])
    assert handler.next_metadata == FetchMetadata.INITIAL
    build(handler, req(foo0, 0, 100, 200), req(foo1, 10, 110, 210))
    assert handler.handle_response(Errors.NONE, 123, [foo1, foo0])  # order does not matter
    assert handler.next_metadata == FetchMetadata(123, 1)
    # A full request that closes session 123: a bad response forgets the session id as well.
    handler.handle_error(TimeoutError())
    build(handler, req(foo0, 0, 100, 200))
    assert handler.next_metadata == FetchMetadata(123, INITIAL_EPOCH)
    assert not handler.handle_response(Errors.NONE, 456, [foo0, bar0])
    assert handler.next_metadata == FetchMetadata.INITIAL


def test_incremental_response_with_partition_outside_session_closes_it():
    handler = FetchSessionHandler(1)
    build(handler, req(foo0, 0, 100, 200), req(foo1, 10, 110, 210))
    assert handler.handle_response(Errors.NONE, 123, [foo0, foo1])
    build(handler, req(foo0, 0, 100, 200), req(foo1, 10, 110, 210))
    assert not handler.handle_response(Errors.NONE, 123, [foo1, bar0])
    assert handler.next_metadata == FetchMetadata(123, INITIAL_EPOCH)
    data = build(handler, req(foo1, 10, 110, 210))
    assert data.metadata.is_full and data.metadata.session_id == 123
    assert data.to_send == (req(foo1, 10, 110, 210),) and data.to_forget == ()
    assert list(handler.session_partitions) == [foo1]


def test_incremental_response_without_session_id_ends_the_session():
    handler = FetchSessionHandler(1)
    build(handler, req(foo0, 0, 100, 200))
    assert handler.handle_response(Errors.NONE, 123, [foo0])
    build(handler, req(foo0, 0, 100, 200))
    assert handler.handle_response(Errors.NONE, INVALID_SESSION_ID, [])
    assert handler.next_metadata == FetchMetadata.INITIAL


def test_empty_throttled_full_response_is_not_processed():
    handler = FetchSessionHandler(1)
    build(handler, req(foo0, 0, 100, 200))
    assert not handler.handle_response(Errors.NONE, 123, [], throttle_time_ms=500)
    assert handler.next_metadata == FetchMetadata.INITIAL
    # An empty incremental response while throttled is a normal response.
    build(handler, req(foo0, 0, 100, 200))
    assert handler.handle_response(Errors.NONE, 123, [foo0])
    build(handler, req(foo0, 0, 100, 200))
    assert handler.handle_response(Errors.NONE, 123, [], throttle_time_ms=500)
    assert handler.next_metadata == FetchMetadata(123, 2)


def test_send_error_closes_session_and_next_build_is_full():
    handler = FetchSessionHandler(1)
    build(handler, req(foo0, 0, 100, 200), req(foo1, 10, 110, 210))
    assert handler.handle_response(Errors.NONE, 123, [foo0, foo1])
    assert handler.handle_response(Errors.NONE, 123, []) is True
    assert handler.next_metadata == FetchMetadata(123, 2)
    handler.handle_error(ConnectionError("reset"))
    assert handler.next_metadata == FetchMetadata(123, INITIAL_EPOCH)
    data = build(handler, req(foo1, 10, 110, 210), req(bar0, 5, 0, 300))
    assert data.metadata.is_full
    assert data.to_send == (req(foo1, 10, 110, 210), req(bar0, 5, 0, 300))
    assert data.to_forget == ()
    assert list(handler.session_partitions) == [foo1, bar0]  # replaced, foo0 dropped


def test_other_top_level_errors_close_the_existing_session():
    handler = FetchSessionHandler(1)
    build(handler, req(foo0, 0, 100, 200))
    assert handler.handle_response(Errors.NONE, 77, [foo0])
    assert not handler.handle_response(Errors.UNKNOWN_SERVER_ERROR, 77, [foo0])
    assert handler.next_metadata == FetchMetadata(77, INITIAL_EPOCH)


def test_notify_close_sends_final_epoch():
    handler = FetchSessionHandler(1)
    build(handler, req(foo0, 0, 100, 200))
    assert handler.handle_response(Errors.NONE, 77, [foo0])
    handler.notify_close()
    assert handler.next_metadata == FetchMetadata(77, FINAL_EPOCH)
    data = build(handler, req(foo0, 0, 100, 200))
    assert data.metadata == FetchMetadata(77, FINAL_EPOCH) and data.to_send


def test_equal_data_is_implied_not_resent():
    handler = FetchSessionHandler(1)
    original = req(foo0, 0, 100, 200)
    build(handler, original, req(foo1, 10, 110, 210))
    assert handler.handle_response(Errors.NONE, 123, [foo0, foo1])
    copy = req(foo0, 0, 100, 200)
    assert copy == original and copy is not original
    data = build(handler, copy, req(foo1, 10, 110, 210))
    assert data.to_send == () and data.to_forget == ()
    assert handler.session_partitions[foo0] is original  # the session keeps its entry
    assert list(data.session_partitions) == [foo0, foo1]


def test_incremental_send_order():
    """New partitions first in add order, then altered ones in session order; the session keeps
    altered partitions in place and appends new ones."""
    handler = FetchSessionHandler(1)
    a, b, c = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)
    d, e = TopicPartition("t", 3), TopicPartition("t", 4)
    build(handler, req(a, 0, 0, 100), req(b, 0, 0, 100), req(c, 0, 0, 100))
    assert handler.handle_response(Errors.NONE, 9, [a, b, c])
    data = build(handler, req(d, 0, 0, 100), req(c, 5, 0, 100), req(e, 0, 0, 100),
                 req(a, 7, 0, 100), req(b, 0, 0, 100))
    assert [p.tp for p in data.to_send] == [d, e, a, c]
    assert data.to_send[2] == req(a, 7, 0, 100) and data.to_send[3] == req(c, 5, 0, 100)
    assert list(data.session_partitions) == [a, b, c, d, e]
    assert handler.session_partitions[c] == req(c, 5, 0, 100)
    # As Kafka's (Collections.unmodifiableMap): a read-only view of the session, which the
    # fetcher reads while the request is out — no copy per request.
    with pytest.raises(TypeError):
        data.session_partitions[a] = req(a, 8, 0, 100)  # type: ignore[index]
    build(handler, req(a, 7, 0, 100))
    assert list(data.session_partitions) == [a]


def test_readding_a_partition_keeps_its_place_with_newer_data():
    handler = FetchSessionHandler(1)
    builder = handler.new_builder()
    builder.add(foo0, req(foo0, 0, 100, 200))
    builder.add(foo1, req(foo1, 0, 100, 200))
    builder.add(foo0, req(foo0, 3, 100, 200))
    assert builder.build().to_send == (req(foo0, 3, 100, 200), req(foo1, 0, 100, 200))
    with pytest.raises(ValueError):
        handler.new_builder().add(foo0, req(foo1, 0, 100, 200))


# --- the fetcher's one-call forms: handle_fetch_response, apply_change --------------------------
def _session(session_id: int = 9) -> FetchSessionHandler:
    """A handler whose session holds foo0, foo1 and bar0 and whose next request is incremental."""
    handler = FetchSessionHandler(1)
    build(handler, req(foo0, 0, 0, 100), req(foo1, 0, 0, 100), req(bar0, 0, 0, 100))
    assert handler.handle_response(Errors.NONE, session_id, [foo0, foo1, bar0])
    assert not handler.next_metadata.is_full
    return handler


@pytest.mark.parametrize("error, session_id, tps, throttle", [
    (Errors.NONE, 9, [foo1], 0),                    # incremental, in the session: next epoch
    (Errors.NONE, 9, [], 0),                        # an empty incremental answer
    (Errors.NONE, 9, [foo0, foo0, bar0], 0),        # a repeated partition is still in it
    (Errors.NONE, INVALID_SESSION_ID, [foo0], 0),   # the leader closed the session
    (Errors.NONE, 9, [foo0, baz0], 0),              # a partition outside the session
    (FETCH_SESSION_ID_NOT_FOUND, 9, [], 0),
    (INVALID_FETCH_SESSION_EPOCH, 9, [foo0], 5),
])
def test_handle_fetch_response_is_handle_response(error, session_id, tps, throttle):
    """``handle_fetch_response(response)`` moves the session exactly as ``handle_response``
    given the response's fields, and says the same, for incremental and full requests."""
    response = FetchResponse(error, tuple(FetchPartitionResponse(tp, Errors.NONE) for tp in tps),
                             throttle, session_id)
    for handler in (_session(), FetchSessionHandler(1)):   # incremental, then full metadata
        if handler.next_metadata.is_full:
            build(handler, req(foo0, 0, 0, 100), req(bar0, 0, 0, 100))
        twin = clone_handler(handler)
        expected = twin.handle_response(error, session_id, tps, throttle_time_ms=throttle)
        assert handler.handle_fetch_response(response) is expected
        assert handler.next_metadata == twin.next_metadata


@pytest.mark.parametrize("entry", [
    req(foo1, 0, 0, 100),     # equal data: implied, nothing sent
    req(foo1, 4, 0, 100),     # a new fetch offset: altered, sent, kept in its place
    req(foo1, 0, 3, 100),     # a new log start offset
    req(baz0, 0, 0, 100),     # new to the session: sent and appended
])
def test_apply_change_is_apply_changes_of_one(entry):
    handler = _session()
    twin = clone_handler(handler)
    expected = twin.apply_changes([entry], [])
    got = handler.apply_change(entry)
    assert got == expected
    assert got[0] == (() if entry == req(foo1, 0, 0, 100) else (entry,))
    assert list(handler.session_partitions.items()) == list(twin.session_partitions.items())
    assert handler._pos == twin._pos and handler._next_pos == twin._next_pos
    with pytest.raises(RuntimeError):
        FetchSessionHandler(1).apply_change(entry)   # full metadata: a Builder's job


def test_add_entries_is_add_of_each():
    """``Builder.add_entries`` builds what ``add`` of each entry under its partition builds
    (a repeated partition keeps its first place and takes the later data), full and
    incremental, and refuses a built builder."""
    entries = [req(foo0, 0, 0, 100), req(bar0, 2, 0, 100), req(foo1, 1, 0, 100),
               req(foo0, 3, 0, 100)]
    for session_id in (None, 9):
        one, each = (FetchSessionHandler(1), FetchSessionHandler(1))
        if session_id is not None:
            one, each = _session(session_id), _session(session_id)
        b1 = one.new_builder()
        b1.add_entries(entries)
        got = b1.build()
        expected = build(each, *entries)
        assert got.to_send == expected.to_send and got.to_forget == expected.to_forget
        assert list(got.session_partitions.items()) == list(expected.session_partitions.items())
        if session_id is None:  # full: every entry, foo0 in its first place with its later data
            assert got.to_send == (req(foo0, 3, 0, 100), req(bar0, 2, 0, 100),
                                   req(foo1, 1, 0, 100))
        with pytest.raises(RuntimeError):
            b1.add_entries(entries)
