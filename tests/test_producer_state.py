"""Producer state (idempotent producers): Kafka's ProducerStateManagerTest rules in our words,
snapshot files in Kafka's format, rebuild from the log, and the real snapshots of the fixtures.

The fixture logs (tests/data/kafka-logs, SOURCES.md) hold no idempotent batch in any .log file:
every batch has producer id -1. Their snapshots are all empty (10 bytes) except
kafka-2.7.1-zk myTopic-0/00000000000000000038.snapshot (3 producers), whose .log is empty (the
producers' segments were deleted by retention). So the reader is also checked against snapshot
bytes packed here from the documented layout, and a log with idempotent batches is built here.
"""
from __future__ import annotations

import shutil
import struct
from pathlib import Path

import crc32c
import pytest
from conftest import FIXTURE_LOGS, require_nonempty

from replica_core.clock import ManualClock
from replica_core.errors import (
    CorruptSnapshotError,
    Errors,
    InvalidConfigurationError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    KafkaStorageError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
    UnknownProducerIdError,
    for_code,
)
from replica_core.records import RecordBatch, build_batch, build_end_txn_marker, iter_batches
from replica_core.records.control import ControlRecordType, EndTransactionMarker
from replica_core.storage.medium import FileMedium, MemoryMedium
from replica_core.storage.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    NUM_BATCHES_TO_RETAIN,
    AppendOrigin,
    BatchInfo,
    BatchMetadata,
    ProducerStateEntry,
    ProducerStateManager,
    analyze_and_validate_producer_state,
    apply_producer_state_update,
    decrement_sequence,
    delete_producer_snapshots,
    increment_sequence,
    load_producers_from_batches,
    rebuild_producer_state,
    update_producer_state_from_batch,
)
from replica_core.storage.producer_state_snapshot import (
    SnapshotEntry,
    decode_snapshot,
    encode_snapshot,
    list_snapshot_files,
    snapshot_file_name,
)

INT32_MAX = 2**31 - 1
T0 = 1_700_000_000_000
PID = 1000
DIR = "/data/topic-0"


def new_manager(medium=None, clock=None, dir=DIR, **kw) -> ProducerStateManager:
    medium = MemoryMedium() if medium is None else medium
    medium.makedirs(dir)
    return ProducerStateManager(medium, dir, clock or ManualClock(T0), **kw)


def batch(pid=PID, epoch=0, seq=0, offset=0, count=1, ts=T0, txn=False) -> BatchInfo:
    """A data batch of ``count`` records starting at ``offset`` (sequences ``seq``..)."""
    return BatchInfo(pid, epoch, seq, offset, offset + count - 1, ts, is_transactional=txn)


def marker(pid=PID, epoch=0, offset=0, commit=True, coordinator_epoch=0, ts=T0) -> BatchInfo:
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    return BatchInfo(pid, epoch, -1, offset, offset, ts, True, True,
                     EndTransactionMarker(kind, coordinator_epoch))


def append(m: ProducerStateManager, *batches, origin=AppendOrigin.CLIENT):
    """What the log does for one append: validate, then (unless a duplicate) apply."""
    update = analyze_and_validate_producer_state(m, batches, origin)
    if update.duplicate is None:
        apply_producer_state_update(m, update, max(b.last_offset for b in batches))
    return update


# --- sequence and epoch rules (ProducerAppendInfo.checkSequence / checkProducerEpoch) -------------
def test_in_order_sequences_are_accepted_and_a_gap_or_replay_is_out_of_order():
    m = new_manager()
    append(m, batch(seq=0, offset=0))
    append(m, batch(seq=1, offset=1))
    assert m.last_entry(PID).last_seq == 1
    # the same sequence validated as a new batch (not through duplicate detection): out of order
    info = m.prepare_update(PID, AppendOrigin.CLIENT)
    with pytest.raises(OutOfOrderSequenceError) as e:
        info.append(batch(seq=1, offset=2))
    assert e.value.code == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER == 45
    with pytest.raises(OutOfOrderSequenceError):
        append(m, batch(seq=5, offset=2))
    # nothing changed by the rejected appends
    assert m.last_entry(PID).last_seq == 1 and m.map_end_offset == 2


def test_an_older_epoch_is_fenced_for_clients_and_coordinators():
    m = new_manager()
    append(m, batch(epoch=1, seq=0, offset=0))
    for origin in (AppendOrigin.CLIENT, AppendOrigin.COORDINATOR):
        with pytest.raises(InvalidProducerEpochError) as e:
            append(m, batch(epoch=0, seq=1, offset=1), origin=origin)
        assert e.value.code == Errors.INVALID_PRODUCER_EPOCH == 47
    assert m.last_entry(PID).producer_epoch == 1


def test_epoch_bump_restarts_sequences_at_zero_and_forgets_the_cached_batches():
    m = new_manager()
    for i in range(3):
        append(m, batch(epoch=0, seq=i, offset=i))
    with pytest.raises(OutOfOrderSequenceError):  # a new epoch must start at 0
        append(m, batch(epoch=1, seq=3, offset=3))
    append(m, batch(epoch=1, seq=0, offset=3))
    entry = m.last_entry(PID)
    assert (entry.producer_epoch, entry.first_seq, entry.last_seq) == (1, 0, 0)
    assert len(entry.batch_metadata) == 1
    # the old epoch's batch (seq 2) is neither a duplicate nor acceptable any more
    with pytest.raises(InvalidProducerEpochError):
        append(m, batch(epoch=0, seq=2, offset=4))


def test_unknown_producer_is_accepted_at_any_sequence_since_kip_360():
    m = new_manager()
    update = append(m, batch(pid=7, epoch=3, seq=17, offset=0))
    assert update.duplicate is None
    assert m.last_entry(7).last_seq == 17
    assert UnknownProducerIdError("x").code == Errors.UNKNOWN_PRODUCER_ID == 59
    assert isinstance(for_code(59), UnknownProducerIdError)


def test_first_append_of_an_unknown_producer_is_not_sequence_checked_at_all():
    """With no epoch on record (currentEntry empty) ``checkSequence`` accepts every batch of
    the append, even a gap between two batches of the same request."""
    m = new_manager()
    append(m, batch(pid=8, epoch=0, seq=0, offset=0), batch(pid=8, epoch=0, seq=5, offset=1))
    assert m.last_entry(8).last_seq == 5
    with pytest.raises(OutOfOrderSequenceError):  # from now on the producer is known
        append(m, batch(pid=8, epoch=0, seq=7, offset=2))


def test_later_batches_of_one_append_follow_the_earlier_ones():
    m = new_manager()
    append(m, batch(seq=0, offset=0))
    append(m, batch(seq=1, offset=1), batch(seq=2, offset=2, count=3), batch(seq=5, offset=5))
    assert m.last_entry(PID).last_seq == 5 and len(m.last_entry(PID).batch_metadata) == 4
    with pytest.raises(OutOfOrderSequenceError):
        append(m, batch(seq=6, offset=6), batch(seq=6, offset=7))


def test_marker_only_state_fences_and_requires_sequence_zero():
    m = new_manager()
    append(m, marker(epoch=2, offset=27))
    entry = m.last_entry(PID)
    assert (entry.producer_epoch, entry.last_seq, entry.is_empty) == (2, -1, True)
    with pytest.raises(InvalidProducerEpochError):
        append(m, batch(epoch=0, seq=0, offset=28))
    with pytest.raises(OutOfOrderSequenceError):
        append(m, batch(epoch=2, seq=17, offset=28))
    append(m, batch(epoch=2, seq=0, offset=28))
    assert m.last_entry(PID).last_seq == 0


def test_abort_marker_with_bumped_epoch_resets_sequences():
    m = new_manager()
    append(m, batch(epoch=0, seq=0, offset=0, txn=True))
    append(m, batch(epoch=0, seq=1, offset=1, txn=True))
    append(m, marker(epoch=1, offset=2, commit=False))
    entry = m.last_entry(PID)
    assert (entry.producer_epoch, entry.current_txn_first_offset, entry.last_seq) == (1, None, -1)
    with pytest.raises(OutOfOrderSequenceError):
        append(m, batch(epoch=1, seq=2, offset=3, txn=True))
    with pytest.raises(OutOfOrderSequenceError):
        append(m, batch(epoch=2, seq=2, offset=3, txn=True))
    append(m, batch(epoch=1, seq=0, offset=3, txn=True))
    assert (m.last_entry(PID).producer_epoch, m.last_entry(PID).last_seq) == (1, 0)


def test_sequence_wraps_from_int32_max_to_zero():
    m = new_manager()
    append(m, batch(epoch=15, seq=INT32_MAX, offset=735), origin=AppendOrigin.REPLICATION)
    with pytest.raises(OutOfOrderSequenceError):
        append(m, batch(epoch=15, seq=1, offset=1235))
    append(m, batch(epoch=15, seq=0, offset=1235))
    entry = m.last_entry(PID)
    assert (entry.first_seq, entry.last_seq) == (INT32_MAX, 0)


def test_a_batch_whose_sequences_wrap():
    assert increment_sequence(INT32_MAX - 10, 20) == 9
    assert decrement_sequence(9, 20) == INT32_MAX - 10
    m = new_manager()
    b = batch(epoch=15, seq=INT32_MAX - 10, offset=2000, count=21)
    assert b.last_sequence == 9
    append(m, b, origin=AppendOrigin.REPLICATION)
    entry = m.last_entry(PID)
    assert (entry.first_seq, entry.last_seq) == (INT32_MAX - 10, 9)
    assert (entry.first_data_offset, entry.last_data_offset) == (2000, 2020)
    # retrying that wrapped batch is recognised as a duplicate
    assert append(m, b).duplicate == BatchMetadata(9, 2020, 20, T0)


def test_kafka_python_batch_with_wrapping_sequences():
    """A batch built by another client library: RecordBatch reads its producer fields and the
    state follows them, including a last sequence past the wrap."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0,
                                  producer_id=77, producer_epoch=3, base_sequence=INT32_MAX - 1,
                                  batch_size=1 << 20)
    for i in range(4):
        b.append(i, timestamp=T0 + i, key=None, value=b"v%d" % i, headers=[])
    raw = bytearray(b.build())
    raw[0:8] = struct.pack(">q", 50)  # the leader's offset (baseOffset is outside the CRC)
    rb = RecordBatch(bytes(raw))
    m = new_manager()
    append(m, rb)
    entry = m.last_entry(77)
    assert (entry.producer_epoch, entry.first_seq, entry.last_seq) == (3, INT32_MAX - 1, 1)
    assert (entry.first_data_offset, entry.last_data_offset, entry.last_timestamp) == (
        50, 53, T0 + 3)
    assert append(m, rb).duplicate == BatchMetadata(1, 53, 3, T0 + 3)


def test_replication_skips_sequence_checks_and_takes_older_epochs():
    m = new_manager()
    append(m, batch(epoch=5, seq=0, offset=0))
    append(m, batch(epoch=5, seq=3, offset=1), origin=AppendOrigin.REPLICATION)  # a gap
    assert m.last_entry(PID).last_seq == 3
    append(m, batch(epoch=4, seq=9, offset=2), origin="replication")  # an older epoch
    entry = m.last_entry(PID)
    assert (entry.producer_epoch, entry.last_seq, len(entry.batch_metadata)) == (4, 9, 1)


def test_prepare_update_does_not_change_the_manager():
    m = new_manager()
    append(m, batch(seq=0, offset=15, count=6))
    info = m.prepare_update(PID, "client")
    info.append(batch(seq=6, offset=21, count=5))
    assert m.last_entry(PID).last_seq == 5 and info.to_entry().last_seq == 10
    m.update(info)
    assert (m.last_entry(PID).first_seq, m.last_entry(PID).last_seq) == (0, 10)


def test_unknown_origin_is_rejected():
    with pytest.raises(ValueError, match="origin"):
        analyze_and_validate_producer_state(new_manager(), [batch()], "leader")


def test_new_entries_keep_five_batches_each_in_their_own_deque():
    """Every entry starts with an empty batch list of its own, bounded at five batches (the
    oldest dropped): filling one entry leaves another new one, and the next new one, empty."""
    a, b = ProducerStateEntry(1), ProducerStateEntry(2, 0)
    assert a.batch_metadata is not b.batch_metadata
    for i in range(7):
        a.add_batch(0, i, 10 * i, 0, T0 + i)
    assert [m.last_seq for m in a.batch_metadata] == [2, 3, 4, 5, 6]
    assert a.batch_metadata.maxlen == 5
    assert list(b.batch_metadata) == [] and b.batch_metadata.maxlen == 5
    c = ProducerStateEntry(3)
    assert list(c.batch_metadata) == [] and c.batch_metadata.maxlen == 5


# --- duplicates (UnifiedLog.analyzeAndValidateProducerState / findDuplicateBatch) ------------------
def test_retry_of_any_of_the_last_five_batches_returns_its_original_offsets():
    m = new_manager()
    sent = []
    assert NUM_BATCHES_TO_RETAIN == 5
    for i in range(6):  # 6 batches of 2 records, seq 0-1, 2-3, ...
        b = batch(seq=2 * i, offset=10 * i, count=2, ts=T0 + i)
        append(m, b)
        sent.append(b)
    end = m.map_end_offset
    for i, b in enumerate(sent[1:], start=1):
        retry = b._replace(base_offset=100, last_offset=101)  # the leader assigned new offsets
        dup = append(m, retry).duplicate
        assert dup is not None
        assert (dup.first_offset, dup.last_offset, dup.timestamp) == (10 * i, 10 * i + 1, T0 + i)
        assert (dup.first_seq, dup.last_seq) == (2 * i, 2 * i + 1)
    assert m.map_end_offset == end  # a duplicate changes nothing
    # the first batch is no longer cached: its retry is out of order, not a duplicate
    with pytest.raises(OutOfOrderSequenceError):
        append(m, sent[0]._replace(base_offset=100, last_offset=101))


def test_a_duplicate_needs_the_same_epoch_and_exact_sequence_range():
    m = new_manager()
    append(m, batch(epoch=2, seq=0, offset=0, count=3))
    with pytest.raises(OutOfOrderSequenceError):  # same first sequence, different last one
        append(m, batch(epoch=2, seq=0, offset=3, count=2))
    with pytest.raises(OutOfOrderSequenceError):  # same range under a newer epoch: new epoch != 0
        append(m, batch(epoch=3, seq=1, offset=3, count=2))


def test_duplicate_stops_a_multi_batch_append_and_applies_nothing():
    m = new_manager()
    append(m, batch(pid=1, seq=0, offset=0))
    update = analyze_and_validate_producer_state(
        m, [batch(pid=2, seq=0, offset=1), batch(pid=1, seq=0, offset=2)], "client")
    assert update.duplicate == BatchMetadata(0, 0, 0, T0)
    assert m.last_entry(2) is None
    with pytest.raises(ValueError):
        apply_producer_state_update(m, update, 2)


def test_duplicates_are_not_looked_for_when_replicating():
    m = new_manager()
    append(m, batch(seq=0, offset=0))
    update = append(m, batch(seq=0, offset=1), origin=AppendOrigin.REPLICATION)
    assert update.duplicate is None
    assert m.last_entry(PID).last_data_offset == 1


def test_batches_without_producer_id_are_ignored():
    m = new_manager()
    update = append(m, BatchInfo(-1, -1, -1, 0, 4, T0))
    assert update.producers == {} and m.active_producers == {}
    assert m.map_end_offset == 5


# --- transactions (kept as Kafka keeps them) ---------------------------------------------------
def test_non_transactional_write_inside_a_transaction_is_rejected():
    m = new_manager()
    append(m, batch(seq=0, offset=0, txn=True))
    with pytest.raises(InvalidTxnStateError) as e:
        append(m, batch(seq=1, offset=1))
    assert e.value.code == Errors.INVALID_TXN_STATE == 48


def test_transaction_lifecycle_and_coordinator_fencing():
    m = new_manager()
    append(m, batch(seq=0, offset=99, txn=True))
    assert m.first_unstable_offset() == 99 and m.first_undecided_offset() == 99
    assert m.last_entry(PID).current_txn_first_offset == 99
    update = analyze_and_validate_producer_state(m, [marker(offset=105, coordinator_epoch=5)],
                                                 "coordinator")
    done = apply_producer_state_update(m, update, 105)
    assert [(t.first_offset, t.last_offset, t.is_aborted, lso) for t, lso in done] == [
        (99, 105, False, 106)]
    assert m.first_undecided_offset() is None and m.first_unstable_offset() == 99
    m.on_high_watermark_updated(106)
    assert m.first_unstable_offset() is None
    entry = m.last_entry(PID)
    assert (entry.coordinator_epoch, entry.current_txn_first_offset, entry.last_seq) == (5, None, 0)
    with pytest.raises(TransactionCoordinatorFencedError) as e:
        append(m, marker(offset=106, coordinator_epoch=4), origin="coordinator")
    assert e.value.code == Errors.TRANSACTION_COORDINATOR_FENCED == 52


def test_producers_with_an_open_transaction_never_expire():
    clock = ManualClock(T0)
    m = new_manager(clock=clock)
    append(m, batch(pid=1, seq=0, offset=0, ts=T0, txn=True))
    append(m, batch(pid=2, seq=0, offset=1, ts=T0))
    clock.advance(DEFAULT_PRODUCER_ID_EXPIRATION_MS + 1)
    assert m.remove_expired_producers() == [2]
    assert set(m.active_producers) == {1}


def test_late_transaction_is_detected_after_timeout_plus_buffer_and_survives_reload():
    """hasLateTransaction: the oldest open transaction's producer was last seen more than
    transaction.max.timeout.ms + 5 minutes ago."""
    m = new_manager(max_transaction_timeout_ms=60_000)
    append(m, batch(seq=0, offset=0, ts=T0, txn=True))
    limit = T0 + 60_000 + 5 * 60 * 1000
    assert not m.has_late_transaction(limit) and m.has_late_transaction(limit + 1)
    m.take_snapshot()
    fresh = ProducerStateManager(m.medium, DIR, ManualClock(T0), max_transaction_timeout_ms=60_000)
    fresh.truncate_and_reload(0, 1)
    assert fresh.has_late_transaction(limit + 1)
    append(m, marker(offset=1, ts=T0 + 10))
    assert not m.has_late_transaction(limit + 1)


# --- expiration (producer.id.expiration.ms) -----------------------------------------------------
def test_producer_id_expires_after_the_configured_idle_time():
    assert DEFAULT_PRODUCER_ID_EXPIRATION_MS == 86_400_000
    clock = ManualClock(T0)
    m = new_manager(clock=clock, producer_id_expiration_ms=1000)
    append(m, batch(seq=0, offset=0, ts=T0))
    clock.advance(999)
    assert m.remove_expired_producers() == [] and PID in m.active_producers
    clock.advance(1)
    assert m.remove_expired_producers() == [PID] and m.producer_id_count == 0
    # once forgotten, the producer is accepted at whatever sequence it continues with
    append(m, batch(seq=1, offset=1, ts=clock.milliseconds()))
    assert m.last_entry(PID).last_seq == 1 and m.map_end_offset == 2


@pytest.mark.parametrize("bad", [0, -5, 2**31, 1.5, True, "1000"])
def test_expiration_config_is_validated(bad):
    with pytest.raises(InvalidConfigurationError, match="producer.id.expiration.ms"):
        new_manager(producer_id_expiration_ms=bad)


def test_expired_producers_are_dropped_when_a_snapshot_is_loaded():
    clock = ManualClock(T0)
    m = new_manager(clock=clock)
    append(m, batch(seq=0, offset=0, ts=T0))
    append(m, batch(seq=1, offset=1, ts=T0 + 1))
    m.take_snapshot()
    fresh = ProducerStateManager(m.medium, DIR, clock)
    fresh.truncate_and_reload(0, 2, now_ms=T0 + 1 + DEFAULT_PRODUCER_ID_EXPIRATION_MS)
    assert fresh.active_producers == {} and fresh.map_end_offset == 2
    append(fresh, batch(seq=2, offset=2, ts=T0 + DEFAULT_PRODUCER_ID_EXPIRATION_MS + 2))
    assert fresh.last_entry(PID).last_seq == 2


# --- snapshots ------------------------------------------------------------------------------
@pytest.fixture(params=["memory", "file"])
def medium_and_dir(request, tmp_path):
    if request.param == "memory":
        return MemoryMedium(), DIR
    return FileMedium(), str(tmp_path / "topic-0")


def test_snapshot_round_trip_keeps_each_producers_last_batch(medium_and_dir):
    medium, dir = medium_and_dir
    m = new_manager(medium, dir=dir)
    for i in range(3):
        append(m, batch(pid=1, epoch=4, seq=2 * i, offset=3 * i, count=2, ts=T0 + i))
    append(m, batch(pid=2, seq=0, offset=9, txn=True, ts=T0 + 5))
    path = m.take_snapshot()
    assert Path(path).name == "00000000000000000010.snapshot" == snapshot_file_name(10)
    assert medium.listdir(dir) == ["00000000000000000010.snapshot"]  # no temporary left
    assert m.take_snapshot() is None  # the state has not moved
    fresh = ProducerStateManager(medium, dir, ManualClock(T0 + 10))
    fresh.truncate_and_reload(0, 10)
    assert fresh.map_end_offset == 10 and fresh.last_snapshot_offset == 10
    one = fresh.last_entry(1)
    assert (one.producer_epoch, one.last_seq, one.first_seq, one.last_data_offset) == (4, 5, 4, 7)
    assert list(one.batch_metadata) == [BatchMetadata(5, 7, 1, T0 + 2)]
    assert fresh.last_entry(2).current_txn_first_offset == 9
    assert fresh.first_undecided_offset() == 9
    # re-writing the loaded state gives the same bytes
    data = medium.read_bytes(path)
    assert encode_snapshot(e.to_snapshot_entry() for e in fresh.active_producers.values()) == data


def test_truncate_and_reload_keeps_snapshots_in_range_only():
    m = new_manager()
    for i in range(5):
        append(m, batch(seq=i, offset=i))
        m.take_snapshot()
    assert m.snapshot_offsets() == [1, 2, 3, 4, 5]
    m.truncate_and_reload(1, 3)
    assert (m.oldest_snapshot_offset, m.latest_snapshot_offset) == (2, 3)
    assert m.medium.listdir(DIR) == [snapshot_file_name(2), snapshot_file_name(3)]
    assert m.last_entry(PID).last_seq == 2 and m.map_end_offset == 3


def test_delete_snapshots_before_and_truncate_fully():
    m = new_manager()
    append(m, batch(seq=0, offset=0))
    append(m, batch(seq=1, offset=1))
    m.take_snapshot()
    append(m, batch(seq=2, offset=2))
    m.take_snapshot()
    assert m.snapshot_offsets() == [2, 3]
    m.delete_snapshots_before(3)
    assert m.snapshot_offsets() == [3] and m.medium.listdir(DIR) == [snapshot_file_name(3)]
    m.delete_snapshots_before(4)
    assert m.snapshot_offsets() == [] and m.medium.listdir(DIR) == []
    append(m, batch(seq=3, offset=3))
    m.take_snapshot()
    m.truncate_fully_and_start_at(0)
    assert m.medium.listdir(DIR) == [] and m.active_producers == {} and m.map_end_offset == 0
    append(m, batch(seq=0, offset=0))
    assert Path(m.take_snapshot()).name == snapshot_file_name(1)


def test_reload_snapshots_from_the_directory():
    m = new_manager()
    append(m, batch(seq=1, offset=1))
    append(m, batch(seq=2, offset=2))
    first = m.take_snapshot()
    saved = m.medium.read_bytes(first)
    append(m, batch(seq=3, offset=3))
    append(m, batch(seq=4, offset=4))
    m.take_snapshot()
    m.truncate_and_reload(3, 5)
    assert m.snapshot_offsets() == [5]
    m.medium.write_atomic(first, saved)
    m.truncate_fully_and_reload_snapshots()
    assert m.latest_snapshot_offset == 3 and m.snapshot_offsets() == [3]


def test_remove_stray_snapshots_keeps_the_clean_shutdown_one():
    m = new_manager()
    for off in (1, 2, 3, 5, 7):
        m.update_map_end_offset(off)
        m.take_snapshot()
    m.medium.write_atomic(f"{DIR}/{snapshot_file_name(9)}.tmp", b"half")
    m.remove_stray_snapshots([1, 5])  # 7 is above the last segment: the shutdown snapshot
    assert m.snapshot_offsets() == [1, 5, 7]
    assert m.medium.listdir(DIR) == [snapshot_file_name(o) for o in (1, 5, 7)]
    m.remove_stray_snapshots([1, 5, 8])  # now 7 is below the last segment: stray
    assert m.snapshot_offsets() == [1, 5]


def test_remove_stray_snapshots_from_a_given_listing_as_from_its_own():
    """Given the directory's file names (the loader's listing), remove_stray_snapshots deletes
    and keeps what it does when it lists the directory itself."""
    results = []
    for given in (False, True):
        m = new_manager()
        for off in (1, 2, 3, 5, 7):
            m.update_map_end_offset(off)
            m.take_snapshot()
        m.medium.write_atomic(f"{DIR}/{snapshot_file_name(9)}.tmp", b"half")
        m.medium.write_atomic(f"{DIR}/00000000000000000001.log", b"")
        names = m.medium.list_files(DIR) if given else None
        m.remove_stray_snapshots([1, 5], names)
        results.append((m.snapshot_offsets(), m.medium.listdir(DIR)))
    assert results[0] == results[1] == (
        [1, 5, 7], ["00000000000000000001.log"] + [snapshot_file_name(o) for o in (1, 5, 7)])


def test_snapshots_of_deleted_segments_are_renamed_then_removed():
    m = new_manager()
    for off in (3, 6, 9):
        m.update_map_end_offset(off)
        m.take_snapshot()
    assert m.remove_and_mark_snapshot_for_deletion(3) == f"{DIR}/{snapshot_file_name(3)}.deleted"
    assert snapshot_file_name(3) + ".deleted" in m.medium.listdir(DIR)
    assert m.remove_and_mark_snapshot_for_deletion(4) is None
    removed = delete_producer_snapshots(m, [6, 7])
    assert removed == [f"{DIR}/{snapshot_file_name(6)}.deleted"]
    assert m.snapshot_offsets() == [9]
    assert sorted(m.medium.listdir(DIR)) == [snapshot_file_name(3) + ".deleted",
                                              snapshot_file_name(9)]


def test_new_log_manager_matches_a_rebuild_of_an_empty_directory():
    medium = MemoryMedium()
    medium.makedirs(DIR)
    built = ProducerStateManager(medium, DIR, ManualClock(T0))
    rebuild_producer_state(built, segment_base_offsets=[40], read_batches=lambda *a: [],
                           log_start_offset=40, last_offset=40)
    new = ProducerStateManager.for_new_log(medium, DIR, ManualClock(T0), 40)
    for m in (built, new):
        assert (m.map_end_offset, m.last_snapshot_offset, m.snapshot_offsets()) == (40, 40, [])
        assert m.take_snapshot() is None  # a clean close right away writes nothing
        append(m, batch(seq=0, offset=40))
    assert Path(new.take_snapshot()).name == snapshot_file_name(41)


def test_new_log_manager_sets_every_field_the_constructor_sets():
    """ProducerStateManager.for_new_log sets its fields one by one: every slot the constructor
    sets (list_existing=False), to the same value, the expiration still checked."""
    medium = MemoryMedium()
    medium.makedirs(DIR)
    clock = ManualClock(T0)
    new = ProducerStateManager.for_new_log(medium, DIR, clock, 40,
                                           producer_id_expiration_ms=5_000)
    built = ProducerStateManager(medium, DIR, clock, producer_id_expiration_ms=5_000,
                                 list_existing=False)
    built._last_map_offset = built._last_snap_offset = 40
    names = [n for n in ProducerStateManager.__slots__ if n != "__weakref__"]
    unset = object()
    fields = {n: getattr(new, n, unset) for n in names}
    assert unset not in fields.values()  # every field set
    assert fields == {n: getattr(built, n, unset) for n in names}
    assert fields["producer_id_expiration_ms"] == 5_000 and fields["_last_map_offset"] == 40
    # containers are the manager's own, not shared with another new manager
    other = ProducerStateManager.for_new_log(medium, DIR, clock, 40)
    assert other._producers is not new._producers and other._snapshots is not new._snapshots
    with pytest.raises(InvalidConfigurationError, match="producer.id.expiration.ms"):
        ProducerStateManager.for_new_log(medium, DIR, clock, 0, producer_id_expiration_ms=0)


def test_a_badly_named_snapshot_file_fails_the_load():
    medium = MemoryMedium()
    medium.makedirs(DIR)
    medium.write_atomic(f"{DIR}/junk.snapshot", b"")
    with pytest.raises(KafkaStorageError, match="junk.snapshot"):
        ProducerStateManager(medium, DIR, ManualClock(T0))


def test_synced_snapshot_survives_power_failure_unsynced_one_does_not():
    medium = MemoryMedium()
    m = new_manager(medium)
    medium.fsync_dir("/data")
    append(m, batch(seq=0, offset=0))
    synced = m.take_snapshot(sync=True)
    want = medium.read_bytes(synced)
    append(m, batch(seq=1, offset=1))
    unsynced = m.take_snapshot(sync=False)
    medium.crash("power")
    assert medium.read_bytes(synced) == want
    assert not medium.exists(unsynced)
    # the roll's deferred flush (flushProducerStateSnapshot) plus the log's directory fsync
    m2 = new_manager(medium)
    m2.truncate_and_reload(0, 1)
    append(m2, batch(seq=1, offset=1))
    later = m2.take_snapshot(sync=False)
    assert m2.flush_snapshot(later)
    medium.fsync_dir(DIR)
    medium.crash("power")
    assert decode_snapshot(medium.read_bytes(later))[0].last_sequence == 1


# --- corrupt snapshots (CorruptSnapshotException) --------------------------------------------------
def _two_snapshots() -> tuple[ProducerStateManager, str, str]:
    m = new_manager()
    append(m, batch(seq=0, offset=0))
    older = m.take_snapshot()
    append(m, batch(seq=1, offset=1))
    newer = m.take_snapshot()
    return m, older, newer


@pytest.mark.parametrize("damage", ["bit_flip", "truncated", "empty", "bad_version",
                                    "negative_count", "count_too_large"])
def test_corrupt_latest_snapshot_is_deleted_and_the_older_one_used(damage):
    m, older, newer = _two_snapshots()
    raw = bytearray(m.medium.read_bytes(newer))
    if damage == "bit_flip":
        raw[-3] ^= 0x10
    elif damage == "truncated":
        raw = raw[:-5]
    elif damage == "empty":
        raw = bytearray()
    elif damage == "bad_version":
        raw[0:2] = struct.pack(">h", 2)
    elif damage == "negative_count":
        raw[6:10] = struct.pack(">i", -1)
    else:
        raw[6:10] = struct.pack(">i", 1000)
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(bytes(raw))
    m.medium.write_atomic(newer, bytes(raw))
    fresh = ProducerStateManager(m.medium, DIR, ManualClock(T0))
    fresh.truncate_and_reload(0, 2)
    assert [p for p, _ in fresh.corrupt_snapshots] == [newer]
    assert not fresh.medium.exists(newer) and fresh.snapshot_offsets() == [1]
    assert fresh.map_end_offset == 1 and fresh.last_entry(PID).last_seq == 0


def test_corrupt_snapshots_only_means_state_from_the_log_start():
    m, older, newer = _two_snapshots()
    for path in (older, newer):
        m.medium.write_atomic(path, b"\x00\x01garbage")
    fresh = ProducerStateManager(m.medium, DIR, ManualClock(T0))
    fresh.truncate_and_reload(0, 2)
    assert fresh.snapshot_offsets() == [] and fresh.active_producers == {}
    assert fresh.map_end_offset == 0  # the log start: the caller replays the log from here


def test_reader_against_bytes_packed_from_the_documented_layout():
    """Independent bytes: version int16, CRC-32C (crc32c package) of everything after the CRC
    field, int32 count, then 46-byte entries in ProducerSnapshot.json field order."""
    rows = [
        (42, 7, 99, 1234, 4, T0, 3, -1),
        (43, 0, -1, -1, 0, T0 + 1, 11, 500),  # marker-only producer with an open transaction
    ]
    body = struct.pack(">i", len(rows)) + b"".join(struct.pack(">qhiqiqiq", *r) for r in rows)
    raw = struct.pack(">hI", 1, crc32c.crc32c(body)) + body
    assert len(raw) == 10 + 46 * 2
    assert decode_snapshot(raw) == [SnapshotEntry(*r) for r in rows]
    assert encode_snapshot(SnapshotEntry(*r) for r in rows) == raw
    a, b = (ProducerStateEntry.from_snapshot_entry(SnapshotEntry(*r)) for r in rows)
    assert list(a.batch_metadata) == [BatchMetadata(99, 1234, 4, T0)]
    assert (a.first_seq, a.first_data_offset, a.coordinator_epoch) == (95, 1230, 3)
    assert a.current_txn_first_offset is None
    assert b.is_empty and (b.last_seq, b.current_txn_first_offset) == (-1, 500)
    # bytes after the last entry are accepted when the CRC covers them, as Kafka's parser does
    tail = body + b"\x00\x00"
    assert len(decode_snapshot(struct.pack(">hI", 1, crc32c.crc32c(tail)) + tail)) == 2
    with pytest.raises(CorruptSnapshotError, match="CRC"):
        decode_snapshot(raw + b"\x00\x00")


# --- rebuild from the log (UnifiedLog.rebuildProducerState) ---------------------------------------
class FakeSegments:
    """Batches grouped into segments as real v2 batch bytes (build_batch), read back with
    iter_batches: what a Log hands rebuild_producer_state."""

    def __init__(self, medium, dir, segments: dict[int, list[bytes]]):
        self.medium, self.dir = medium, dir
        for base, batches in segments.items():
            medium.write_atomic(f"{dir}/{base:020d}.log", b"".join(batches))
        self.bases = sorted(segments)
        self.reads: list[tuple[int, int, int]] = []

    def read(self, base, start, end):
        self.reads.append((base, start, end))
        return list(iter_batches(self.medium.read_bytes(f"{self.dir}/{base:020d}.log")))


def _idempotent_log():
    """Three segments; producer 1 idempotent, producer 2 transactional, plus plain batches."""
    segs: dict[int, list[bytes]] = {0: [], 8: [], 15: []}  # bases at batch boundaries
    live = []
    off, seq1, seq2 = 0, 0, 0
    for i in range(9):
        seg = max(b for b in segs if b <= off)
        if i % 3 == 0:
            raw = build_batch([b"a", b"b"], base_offset=off, producer_id=1, producer_epoch=0,
                              base_sequence=seq1, timestamps=[T0 + off, T0 + off + 1])
            seq1 += 2
        elif i % 3 == 1:
            raw = build_batch([b"t"], base_offset=off, producer_id=2, producer_epoch=5,
                              base_sequence=seq2, transactional=True, timestamps=[T0 + off])
            seq2 += 1
        else:
            raw = build_batch([b"p", b"q", b"r"], base_offset=off, timestamps=[T0 + off] * 3)
        segs[seg].append(raw)
        live.append(raw)
        off = RecordBatch(raw).last_offset + 1
    raw = build_end_txn_marker(True, producer_id=2, producer_epoch=5, coordinator_epoch=9,
                               base_offset=off, timestamp_ms=T0 + off)
    segs[15].append(raw)
    live.append(raw)
    return segs, live, off + 1


def _live_state(live):
    m = new_manager(dir="/live/topic-0")
    for raw in live:
        append(m, RecordBatch(raw), origin=AppendOrigin.REPLICATION)
    return m


def _entries(m):
    return {pid: e.to_snapshot_entry() for pid, e in m.active_producers.items()}


def test_rebuild_after_unclean_shutdown_replays_from_the_latest_snapshot():
    segs, live, leo = _idempotent_log()
    expected = _live_state(live)
    assert expected.last_entry(1).last_seq == 5 and expected.last_entry(2).coordinator_epoch == 9
    medium = MemoryMedium()
    medium.makedirs(DIR)
    log = FakeSegments(medium, DIR, segs)
    # a snapshot at the second segment's base, as the roll there wrote it
    early = _live_state([r for r in live if RecordBatch(r).last_offset < 8])
    snap = encode_snapshot(e.to_snapshot_entry() for e in early.active_producers.values())
    medium.write_atomic(f"{DIR}/{snapshot_file_name(8)}", snap)
    m = ProducerStateManager(medium, DIR, ManualClock(T0 + 100))
    m.remove_stray_snapshots(log.bases)
    rebuild_producer_state(m, segment_base_offsets=log.bases, read_batches=log.read,
                           log_start_offset=0, last_offset=leo)
    assert _entries(m) == _entries(expected)
    assert [b for b, _, _ in log.reads] == [8, 15]  # nothing below the snapshot was read
    assert m.map_end_offset == leo
    assert m.snapshot_offsets() == [8, 15, leo]  # last segment's base and the end, as Kafka


def test_rebuild_with_corrupt_snapshot_falls_back_to_the_log_start():
    segs, live, leo = _idempotent_log()
    medium = MemoryMedium()
    medium.makedirs(DIR)
    log = FakeSegments(medium, DIR, segs)
    medium.write_atomic(f"{DIR}/{snapshot_file_name(15)}", b"\x00\x01\x00")
    m = ProducerStateManager(medium, DIR, ManualClock(T0 + 100))
    m.update_map_end_offset(leo + 3)  # state from before a truncation to leo
    m.load_producer_entry(ProducerStateEntry(99, 0))
    rebuild_producer_state(m, segment_base_offsets=log.bases, read_batches=log.read,
                           log_start_offset=0, last_offset=leo)
    assert [p for p, _ in m.corrupt_snapshots] == [f"{DIR}/{snapshot_file_name(15)}"]
    assert _entries(m) == _entries(_live_state(live))
    assert [b for b, _, _ in log.reads] == [0, 8, 15]


def test_rebuild_after_truncation_matches_the_truncated_log():
    segs, live, leo = _idempotent_log()
    medium = MemoryMedium()
    medium.makedirs(DIR)
    log = FakeSegments(medium, DIR, segs)
    m = ProducerStateManager(medium, DIR, ManualClock(T0 + 100))
    rebuild_producer_state(m, segment_base_offsets=log.bases, read_batches=log.read,
                           log_start_offset=0, last_offset=leo)
    target = 12  # a batch boundary inside the second segment
    kept = [r for r in live if RecordBatch(r).last_offset < target]
    assert RecordBatch(kept[-1]).last_offset == target - 1
    delete_producer_snapshots(m, [15])
    rebuild_producer_state(m, segment_base_offsets=[0, 8], read_batches=log.read,
                           log_start_offset=0, last_offset=target)
    assert _entries(m) == _entries(_live_state(kept))
    assert m.map_end_offset == target and max(m.snapshot_offsets()) == target


def test_rebuild_to_an_offset_inside_a_batch_leaves_that_batch_out():
    """Truncation inside a batch removes the whole batch (LogSegment.truncateTo) and the state is
    rebuilt from the batches ending below the target (segment.read up to the position of the
    batch holding it)."""
    segs, live, leo = _idempotent_log()
    medium = MemoryMedium()
    medium.makedirs(DIR)
    log = FakeSegments(medium, DIR, segs)
    m = ProducerStateManager(medium, DIR, ManualClock(T0 + 100))
    m.load_producer_entry(ProducerStateEntry(99, 0))  # not empty: the scan is not skipped
    m.update_map_end_offset(leo)
    target = 13  # inside producer 1's batch 12-13
    assert any(RecordBatch(r).base_offset == 12 and RecordBatch(r).last_offset == 13
               and RecordBatch(r).producer_id == 1 for r in live)
    rebuild_producer_state(m, segment_base_offsets=[0, 8], read_batches=log.read,
                           log_start_offset=0, last_offset=target)
    kept = [r for r in live if RecordBatch(r).last_offset < target]
    assert _entries(m) == _entries(_live_state(kept))
    assert m.last_entry(1).last_seq == 3


def test_truncating_a_state_that_had_no_producers_scans_nothing():
    """rebuildProducerState's shortcut: no producers before a truncation (and the state at or
    beyond the target) means none after it, so the log is not read."""
    segs, live, leo = _idempotent_log()
    medium = MemoryMedium()
    medium.makedirs(DIR)
    log = FakeSegments(medium, DIR, segs)
    m = ProducerStateManager(medium, DIR, ManualClock(T0))
    m.update_map_end_offset(leo)
    rebuild_producer_state(m, segment_base_offsets=log.bases, read_batches=log.read,
                           log_start_offset=0, last_offset=12)
    assert log.reads == [] and m.active_producers == {} and m.map_end_offset == 12
    assert m.snapshot_offsets() == [12]


def test_clean_shutdown_without_snapshots_writes_empty_ones_and_scans_nothing():
    segs, live, leo = _idempotent_log()
    medium = MemoryMedium()
    medium.makedirs(DIR)
    log = FakeSegments(medium, DIR, segs)
    m = ProducerStateManager(medium, DIR, ManualClock(T0))
    rebuild_producer_state(m, segment_base_offsets=log.bases, read_batches=log.read,
                           log_start_offset=0, last_offset=leo,
                           reload_from_clean_shutdown=True)
    assert log.reads == [] and m.active_producers == {}
    assert m.snapshot_offsets() == [8, 15, leo]
    assert all(decode_snapshot(medium.read_bytes(p)) == [] for p in
               list_snapshot_files(medium, DIR).values())


def test_segment_recovery_updates_state_batch_by_batch():
    segs, live, leo = _idempotent_log()
    m = new_manager()
    results = [update_producer_state_from_batch(m, RecordBatch(r)) for r in live]
    assert _entries(m) == _entries(_live_state(live)) and m.map_end_offset == leo
    done = [r for r in results if r is not None]
    assert [(t.producer_id, t.first_offset, t.last_offset, lso) for t, lso in done] == [
        (2, 2, leo - 1, leo)]
    other = new_manager(dir="/other/topic-0")
    load_producers_from_batches(other, (RecordBatch(r) for r in live))
    assert _entries(other) == _entries(m)


# --- the real Kafka snapshots ----------------------------------------------------------------
SNAPSHOTS = require_nonempty(sorted(FIXTURE_LOGS.rglob("*.snapshot")), "producer snapshots")


def _id(p: Path) -> str:
    return str(p.relative_to(FIXTURE_LOGS))


@pytest.mark.parametrize("path", SNAPSHOTS, ids=_id)
def test_fixture_snapshot_loads_with_crc_and_reserialises_identically(path):
    raw = path.read_bytes()
    version, stored_crc, count = struct.unpack_from(">hIi", raw)
    assert version == 1 and len(raw) == 10 + 46 * count
    assert stored_crc == crc32c.crc32c(raw[6:])  # independently of the reader
    rows = decode_snapshot(raw, str(path))
    assert len(rows) == count
    assert encode_snapshot(rows) == raw
    entries = [ProducerStateEntry.from_snapshot_entry(r) for r in rows]
    assert encode_snapshot(e.to_snapshot_entry() for e in entries) == raw
    # through the manager, on the real directory (read only)
    m = ProducerStateManager(FileMedium(), str(path.parent), ManualClock(T0))
    offset = int(path.name.split(".")[0])
    assert m.fetch_snapshot(offset) == str(path)
    assert m.read_snapshot(str(path)) == entries


@pytest.mark.parametrize("path", SNAPSHOTS, ids=_id)
def test_fixture_snapshot_agrees_with_its_partition_log(path):
    """Replaying the partition's .log batches below the snapshot offset gives the producers the
    snapshot holds, except those whose batches are all below the log start (deleted segments):
    their last offset must then lie below the first segment's base."""
    logs = sorted(path.parent.glob("*.log"))
    assert logs, f"{path.parent} has no segment"
    first_base = int(logs[0].name.split(".")[0])
    offset = int(path.name.split(".")[0])
    assert offset >= first_base
    replayed = new_manager(dir="/replay/p-0")
    batches = [b for log in logs for b in iter_batches(log.read_bytes())
               if b.last_offset < offset]
    load_producers_from_batches(replayed, batches)
    snap = {r.producer_id: r for r in decode_snapshot(path.read_bytes())}
    for pid, entry in replayed.active_producers.items():
        row = snap.get(pid)
        assert row is not None, f"producer {pid} in the log but not in {path.name}"
        assert (row.epoch, row.last_sequence, row.last_offset) == (
            entry.producer_epoch, entry.last_seq, entry.last_data_offset)
    for pid, row in snap.items():
        if pid not in replayed.active_producers:
            assert row.last_offset < first_base, f"producer {pid}'s batches should be in the log"
        if row.last_offset >= 0:
            assert row.last_offset - row.offset_delta >= 0
            assert row.offset_delta >= 0


MYTOPIC = FIXTURE_LOGS / "kafka-2.7.1-zk/kafka-logs/myTopic-0"


def test_mytopic_snapshot_producers_behave_as_kafka_left_them():
    """The one fixture snapshot with producers (Kafka 2.7.1, three idempotent producers whose
    data was deleted by retention). Loaded, a producer continues at its next sequence, its
    retried last batch gets its original offsets, and all three expire
    ``producer.id.expiration.ms`` after their last timestamp."""
    src = MYTOPIC / "00000000000000000038.snapshot"
    rows = decode_snapshot(src.read_bytes())
    assert [r.producer_id for r in rows] == [4001, 4002, 4003]
    newest = max(r.timestamp for r in rows)
    medium = MemoryMedium()
    medium.makedirs(DIR)
    medium.write_atomic(f"{DIR}/{src.name}", src.read_bytes())
    m = ProducerStateManager(medium, DIR, ManualClock(newest + 1))
    m.truncate_and_reload(0, 38)  # a log start below the snapshot keeps it (see the next test)
    assert list(m.active_producers) == [4001, 4002, 4003] and m.map_end_offset == 38
    first = rows[0]
    e = m.last_entry(4001)
    assert (e.producer_epoch, e.last_seq, e.last_data_offset) == (
        first.epoch, first.last_sequence, first.last_offset)
    retry = BatchInfo(4001, first.epoch, first.last_sequence - first.offset_delta, 38,
                      38 + first.offset_delta, newest)
    dup = append(m, retry).duplicate
    assert dup is not None and (dup.first_offset, dup.last_offset) == (
        first.last_offset - first.offset_delta, first.last_offset)
    with pytest.raises(OutOfOrderSequenceError):
        append(m, BatchInfo(4001, first.epoch, first.last_sequence + 2, 38, 38, newest))
    append(m, BatchInfo(4001, first.epoch, first.last_sequence + 1, 38, 38, newest))
    assert m.last_entry(4001).last_seq == first.last_sequence + 1
    # a day after their last batches, loading the same snapshot keeps none of them
    late = ProducerStateManager(medium, DIR, ManualClock(0))
    late.truncate_and_reload(0, 38, now_ms=newest + DEFAULT_PRODUCER_ID_EXPIRATION_MS)
    assert late.active_producers == {} and late.map_end_offset == 38


def test_mytopic_restart_forgets_producers_of_a_snapshot_at_the_log_start(tmp_path):
    """Loaded as Kafka's LogLoader loads that directory: the log start offset is
    max(log-start-offset-checkpoint entry (none: 0), first segment base 38) = 38, the recovery
    point and LEO 38 (the only segment is empty). truncateAndReload drops every snapshot at or
    below the log start offset, so the snapshot goes and its producers are forgotten (a later
    batch from them is then accepted at any sequence)."""
    kafka_logs = MYTOPIC.parent
    assert "myTopic" not in (kafka_logs / "log-start-offset-checkpoint").read_text()
    recovery = (kafka_logs / "recovery-point-offset-checkpoint").read_text().split("\n")
    assert "myTopic 0 38" in recovery
    dir = tmp_path / "myTopic-0"
    shutil.copytree(MYTOPIC, dir)
    for f in dir.iterdir():
        f.chmod(0o644)
    rows = decode_snapshot((MYTOPIC / "00000000000000000038.snapshot").read_bytes())
    m = ProducerStateManager(FileMedium(), str(dir), ManualClock(max(r.timestamp for r in rows)))
    m.remove_stray_snapshots([38])
    assert m.snapshot_offsets() == [38]  # at a segment base: not stray
    rebuild_producer_state(m, segment_base_offsets=[38], read_batches=lambda *a: [],
                           log_start_offset=38, last_offset=38, reload_from_clean_shutdown=True)
    assert m.active_producers == {} and m.snapshot_offsets() == [] and m.map_end_offset == 38
    assert sorted(p.name for p in dir.iterdir()) == [
        "00000000000000000038.log", "leader-epoch-checkpoint"]
    append(m, BatchInfo(4001, 0, 500, 38, 38, rows[0].timestamp + 1))
    assert m.last_entry(4001).last_seq == 500


def test_errors_name_the_partition_directory_the_manager_was_made_in():
    """A manager names its partition after its directory (unless given a name), in errors and
    its repr — a new log's manager too — and keeps that name when the directory is renamed."""
    medium = MemoryMedium()
    medium.makedirs(DIR)
    for m in (ProducerStateManager(medium, DIR, ManualClock(T0)),
              ProducerStateManager.for_new_log(medium, DIR, ManualClock(T0), 0)):
        append(m, batch(seq=0, offset=0))
        m.update_parent_dir("/data/topic-0.0123abcd-delete")
        with pytest.raises(OutOfOrderSequenceError, match=r" in topic-0\b"):
            append(m, batch(seq=5, offset=1))
        assert repr(m).startswith("ProducerStateManager(topic-0, ")
    named = ProducerStateManager(medium, DIR, ManualClock(T0), topic_partition="t-9")
    assert repr(named).startswith("ProducerStateManager(t-9, ")
