"""Producer state: what a partition log remembers about each idempotent/transactional producer.

Kafka's ``ProducerStateManager``, ``ProducerStateEntry``, ``ProducerAppendInfo`` and
``BatchMetadata`` (``storage/src/main/java/org/apache/kafka/storage/internals/log/``), and the
producer-state parts of ``UnifiedLog`` (``analyzeAndValidateProducerState``,
``rebuildProducerState``, ``loadProducersFromRecords``, ``updateProducers``,
``deleteProducerSnapshots``) and ``LogSegment.updateProducerState``.

Per producer id the log keeps its epoch, the metadata (last sequence, last offset, offset delta,
max timestamp) of its last five batches, the transaction coordinator epoch, the first offset of
an open transaction and the last timestamp. From that the leader

* answers a retried batch that matches one of the last five batches (same epoch, same first and
  last sequence) with the offsets it was first written at, writing nothing
  (:func:`analyze_and_validate_producer_state` returns the original :class:`BatchMetadata`);
* rejects a gap or an older retry (``OUT_OF_ORDER_SEQUENCE_NUMBER``), a new epoch not starting at
  sequence 0 (the same), and an epoch older than the producer's (``INVALID_PRODUCER_EPOCH``);
* accepts, at any sequence, a producer it holds no state for. Since KIP-360 (Kafka 2.5,
  commit fecb977b "Allow transactional producers to bump producer epoch") ``ProducerAppendInfo
  .checkSequence`` raises no ``UNKNOWN_PRODUCER_ID``: "If there is no current producer epoch
  (possibly because all producer records have been deleted due to retention or the DeleteRecords
  API) accept writes with any sequence number". So :class:`UnknownProducerIdError` is never
  raised here, and ``DUPLICATE_SEQUENCE_NUMBER`` neither (since KAFKA-6683 a duplicate of a
  retained batch succeeds with its original offsets).

Replicated appends (``AppendOrigin.REPLICATION``, followers and log recovery) are not validated:
an older epoch is accepted (and becomes the producer's epoch), gaps are accepted.

Transactions are not simulated, but their fields are kept as Kafka keeps them: an end-transaction
marker (a control batch) sets the coordinator epoch, may bump the producer epoch (clearing the
cached batches), and closes the open transaction; producers with an open transaction never
expire. Not modelled: KIP-890 transaction verification (``VerificationStateEntry``), and
``LogOffsetMetadata`` for transaction first offsets (plain offsets here).

Producer ids expire ``producer.id.expiration.ms`` (default 86400000) after their last batch's
timestamp, on the injected clock, when :meth:`ProducerStateManager.remove_expired_producers` runs
(Kafka schedules it every ``producer.id.expiration.check.interval.ms``, 600000) and when a
snapshot is loaded.

Snapshots (``<offset>.snapshot``, format in :mod:`~replica_core.storage.producer_state_snapshot`)
keep only each producer's *last* batch, so after a reload only that one is recognised as a
duplicate, as in Kafka.
"""
from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType
from typing import Any, NamedTuple, Protocol

from replica_core._slot_init import slot_init
from replica_core.errors import (
    CorruptSnapshotError,
    InvalidConfigurationError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    KafkaStorageError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from replica_core.records.control import (
    ControlRecordType,
    EndTransactionMarker,
    decode_end_txn_marker,
)
from replica_core.storage.medium import Medium
from replica_core.storage.producer_state_snapshot import (
    SnapshotEntry,
    encode_snapshot,
    flush_snapshot_file,
    list_snapshot_files,
    read_snapshot_file,
    snapshot_files_among,
    snapshot_path,
    write_snapshot_file,
)

__all__ = [
    "NUM_BATCHES_TO_RETAIN",
    "DEFAULT_PRODUCER_ID_EXPIRATION_MS",
    "DEFAULT_PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS",
    "DEFAULT_MAX_TRANSACTION_TIMEOUT_MS",
    "AppendOrigin",
    "BatchInfo",
    "BatchLike",
    "BatchMetadata",
    "CompletedTxn",
    "ProducerAppendInfo",
    "ProducerStateEntry",
    "ProducerStateManager",
    "ProducerStateUpdate",
    "TxnMetadata",
    "analyze_and_validate_producer_state",
    "apply_in_sequence",
    "apply_producer_state_update",
    "decrement_sequence",
    "delete_producer_snapshots",
    "in_sequence_entry",
    "increment_sequence",
    "load_producers_from_batches",
    "rebuild_producer_state",
    "update_producer_state_from_batch",
]

NO_PRODUCER_ID = -1  # RecordBatch.NO_PRODUCER_ID
NO_PRODUCER_EPOCH = -1  # RecordBatch.NO_PRODUCER_EPOCH
NO_SEQUENCE = -1  # RecordBatch.NO_SEQUENCE
NO_TIMESTAMP = -1  # RecordBatch.NO_TIMESTAMP
INT32_MAX = 2**31 - 1

NUM_BATCHES_TO_RETAIN = 5  # ProducerStateEntry.NUM_BATCHES_TO_RETAIN
# the empty batch_metadata every entry starts from (copied, never changed itself)
_NO_BATCHES: deque[Any] = deque(maxlen=NUM_BATCHES_TO_RETAIN)
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms (TransactionLogConfig)
DEFAULT_PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS = 600_000  # producer.id.expiration.check.interval.ms
DEFAULT_MAX_TRANSACTION_TIMEOUT_MS = 900_000  # transaction.max.timeout.ms
LATE_TRANSACTION_BUFFER_MS = 5 * 60 * 1000  # ProducerStateManager.LATE_TRANSACTION_BUFFER_MS


def increment_sequence(sequence: int, increment: int) -> int:
    """``DefaultRecordBatch.incrementSequence``: int32 sequences wrap from MAX_VALUE to 0."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int) -> int:
    """``DefaultRecordBatch.decrementSequence``, the inverse of :func:`increment_sequence`."""
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    """``ProducerAppendInfo.inSequence``: the next sequence, or 0 after Integer.MAX_VALUE."""
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class AppendOrigin(str, Enum):
    """Who is appending (Kafka's ``AppendOrigin``); equal to the plain strings the log uses."""

    CLIENT = "client"  # a producer: full sequence and epoch validation, duplicate detection
    REPLICATION = "replication"  # a follower or log recovery: no validation
    COORDINATOR = "coordinator"  # group/transaction coordinator: epoch checks only


def _origin(origin: AppendOrigin | str) -> AppendOrigin:
    if origin.__class__ is AppendOrigin:
        return origin  # type: ignore[return-value]
    try:
        return AppendOrigin(origin)
    except ValueError:
        raise ValueError(f"unknown append origin {origin!r}; expected one of "
                         f"{[o.value for o in AppendOrigin]}") from None


# --- value types ------------------------------------------------------------------------------
@slot_init
@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """One cached batch of a producer (``BatchMetadata``): its last sequence, last offset, the
    offset delta (last offset - first offset) and its max timestamp."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class CompletedTxn(NamedTuple):
    """A transaction closed by a COMMIT/ABORT marker at ``last_offset`` (``CompletedTxn``)."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass(slots=True)
class TxnMetadata:
    """An open (``last_offset`` None) or completed transaction (``TxnMetadata``)."""

    producer_id: int
    first_offset: int
    last_offset: int | None = None


class BatchLike(Protocol):
    """The batch header fields producer state reads. :class:`~replica_core.records.RecordBatch`
    and :class:`~replica_core.records.LegacyBatch` (never a producer id) satisfy it, as does
    :class:`BatchInfo`. A control batch's end-transaction marker is read from its first record
    (``records()``) unless the object carries ``end_txn_marker``."""

    @property
    def producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...
    @property
    def base_sequence(self) -> int: ...
    @property
    def base_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...
    @property
    def is_transactional(self) -> bool: ...
    @property
    def is_control(self) -> bool: ...


class BatchInfo(NamedTuple):
    """A batch's producer-relevant header fields, for callers holding no batch object (a header
    row of the batch kernel, a test). ``end_txn_marker``: a control batch's marker, None for an
    empty control batch."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    is_transactional: bool = False
    is_control: bool = False
    end_txn_marker: EndTransactionMarker | None = None

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset - self.base_offset)


def _last_sequence(batch: BatchLike) -> int:
    """``RecordBatch.lastSequence``: base sequence + last offset delta, wrapping; -1 without."""
    seq = getattr(batch, "last_sequence", None)
    if seq is not None:
        return int(seq)
    base = batch.base_sequence
    if base < 0:
        return NO_SEQUENCE
    return increment_sequence(base, batch.last_offset - batch.base_offset)


_MISSING = object()


def _end_txn_marker(batch: BatchLike) -> tuple[EndTransactionMarker, int] | None:
    """The marker of a control batch and its record's timestamp; None if the batch is empty
    (``ProducerAppendInfo.append``: "the entire transaction has been cleaned from the log")."""
    marker = getattr(batch, "end_txn_marker", _MISSING)
    if marker is not _MISSING:
        return None if marker is None else (marker, batch.max_timestamp)
    for record in batch.records():  # type: ignore[attr-defined]
        return decode_end_txn_marker(record.key, record.value), record.timestamp
    return None


def _has_producer_id(batch: Any) -> bool:
    """``RecordBatch.hasProducerId``: magic 2 and a producer id other than -1."""
    return getattr(batch, "magic", 2) >= 2 and batch.producer_id > NO_PRODUCER_ID


# --- ProducerStateEntry -----------------------------------------------------------------------
class ProducerStateEntry:
    """One producer's state (``ProducerStateEntry``): ``batch_metadata`` holds up to
    :data:`NUM_BATCHES_TO_RETAIN` batches, oldest first; a new epoch clears it."""

    __slots__ = ("producer_id", "producer_epoch", "coordinator_epoch", "last_timestamp",
                 "current_txn_first_offset", "batch_metadata")

    def __init__(self, producer_id: int, producer_epoch: int = NO_PRODUCER_EPOCH,
                 coordinator_epoch: int = -1, last_timestamp: int = NO_TIMESTAMP,
                 current_txn_first_offset: int | None = None,
                 first_batch: BatchMetadata | None = None) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.coordinator_epoch = coordinator_epoch
        self.last_timestamp = last_timestamp
        self.current_txn_first_offset = current_txn_first_offset
        # a copy of the empty template: the same empty deque bounded at NUM_BATCHES_TO_RETAIN,
        # without the constructor's keyword call (a new producer's first batch makes one)
        self.batch_metadata: deque[BatchMetadata] = _NO_BATCHES.copy()
        if first_batch is not None:
            self.batch_metadata.append(first_batch)

    @classmethod
    def empty(cls, producer_id: int) -> ProducerStateEntry:
        """No epoch, no coordinator epoch (-1), no timestamp, no batches."""
        return cls(producer_id)

    # reads (what an empty entry reports mirrors Kafka's sentinels)
    @property
    def is_empty(self) -> bool:
        return not self.batch_metadata

    @property
    def first_seq(self) -> int:
        return self.batch_metadata[0].first_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batch_metadata[-1].last_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def first_data_offset(self) -> int:
        return self.batch_metadata[0].first_offset if self.batch_metadata else -1

    @property
    def last_data_offset(self) -> int:
        return self.batch_metadata[-1].last_offset if self.batch_metadata else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batch_metadata[-1].offset_delta if self.batch_metadata else 0

    def copy_without_batches(self, producer_id: int | None = None) -> ProducerStateEntry:
        """``withProducerIdAndBatchMetadata(id, empty)``: same epochs, timestamp and open
        transaction, no batches."""
        return ProducerStateEntry(self.producer_id if producer_id is None else producer_id,
                                  self.producer_epoch, self.coordinator_epoch,
                                  self.last_timestamp, self.current_txn_first_offset)

    # writes
    def maybe_update_producer_epoch(self, producer_epoch: int) -> bool:
        """A different epoch replaces the current one and forgets the cached batches."""
        if self.producer_epoch != producer_epoch:
            self.batch_metadata.clear()
            self.producer_epoch = producer_epoch
            return True
        return False

    def add_batch(self, producer_epoch: int, last_seq: int, last_offset: int, offset_delta: int,
                  timestamp: int) -> None:
        self.maybe_update_producer_epoch(producer_epoch)
        self.batch_metadata.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def update(self, next_entry: ProducerStateEntry) -> None:
        """Fold in the entry an append built (``update(ProducerStateEntry)``): its epoch (a
        change clears the cache first), its batches appended, its coordinator epoch, open
        transaction and timestamp taken."""
        self.maybe_update_producer_epoch(next_entry.producer_epoch)
        self.batch_metadata.extend(next_entry.batch_metadata)
        self.coordinator_epoch = next_entry.coordinator_epoch
        self.current_txn_first_offset = next_entry.current_txn_first_offset
        self.last_timestamp = next_entry.last_timestamp

    def update_for_marker(self, producer_epoch: int, coordinator_epoch: int,
                          last_timestamp: int) -> None:
        """An end-transaction marker: epoch (maybe bumped), coordinator epoch, transaction
        closed, timestamp (``update(short, int, long)``)."""
        self.maybe_update_producer_epoch(producer_epoch)
        self.coordinator_epoch = coordinator_epoch
        self.current_txn_first_offset = None
        self.last_timestamp = last_timestamp

    def find_duplicate_batch(self, producer_epoch: int, first_seq: int,
                             last_seq: int) -> BatchMetadata | None:
        """``findDuplicateBatch``: the cached batch with exactly this sequence range, if the
        epoch is the current one."""
        if producer_epoch != self.producer_epoch:
            return None
        return self.batch_with_sequence_range(first_seq, last_seq)

    def batch_with_sequence_range(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        for meta in self.batch_metadata:
            if meta.first_seq == first_seq and meta.last_seq == last_seq:
                return meta
        return None

    def to_snapshot_entry(self) -> SnapshotEntry:
        """The snapshot row (``writeSnapshot``): the last batch only; -1/0 sentinels when empty."""
        return SnapshotEntry(self.producer_id, self.producer_epoch, self.last_seq,
                             self.last_data_offset, self.last_offset_delta, self.last_timestamp,
                             self.coordinator_epoch,
                             -1 if self.current_txn_first_offset is None
                             else self.current_txn_first_offset)

    @classmethod
    def from_snapshot_entry(cls, row: SnapshotEntry) -> ProducerStateEntry:
        """``readSnapshot``: a batch only when lastOffset >= 0 (its timestamp is the entry's);
        an open transaction only when currentTxnFirstOffset >= 0."""
        batch = (BatchMetadata(row.last_sequence, row.last_offset, row.offset_delta,
                               row.timestamp) if row.last_offset >= 0 else None)
        txn = row.current_txn_first_offset if row.current_txn_first_offset >= 0 else None
        return cls(row.producer_id, row.epoch, row.coordinator_epoch, row.timestamp, txn, batch)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProducerStateEntry):
            return NotImplemented
        return (self.producer_id, self.producer_epoch, self.coordinator_epoch,
                self.last_timestamp, self.current_txn_first_offset,
                list(self.batch_metadata)) == (
                    other.producer_id, other.producer_epoch, other.coordinator_epoch,
                    other.last_timestamp, other.current_txn_first_offset,
                    list(other.batch_metadata))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"ProducerStateEntry(producer_id={self.producer_id}, "
                f"producer_epoch={self.producer_epoch}, "
                f"current_txn_first_offset={self.current_txn_first_offset}, "
                f"coordinator_epoch={self.coordinator_epoch}, "
                f"last_timestamp={self.last_timestamp}, "
                f"batch_metadata={list(self.batch_metadata)})")


# --- ProducerAppendInfo -----------------------------------------------------------------------
class ProducerAppendInfo:
    """Validates one producer's batches of an append against its state and builds the updated
    entry without touching the manager (``ProducerAppendInfo``); the log applies it with
    :meth:`ProducerStateManager.update` only once the records are written."""

    __slots__ = ("topic_partition", "producer_id", "current_entry", "origin", "updated_entry",
                 "started_transactions")

    def __init__(self, producer_id: int, current_entry: ProducerStateEntry,
                 origin: AppendOrigin | str, topic_partition: str = "") -> None:
        self.topic_partition = topic_partition
        self.producer_id = producer_id
        self.current_entry = current_entry
        self.origin = _origin(origin)
        self.updated_entry = current_entry.copy_without_batches(producer_id)
        self.started_transactions: list[TxnMetadata] = []

    def _where(self, offset: int) -> str:
        part = f" in {self.topic_partition}" if self.topic_partition else ""
        return f"producer {self.producer_id} at offset {offset}{part}"

    def _check_producer_epoch(self, producer_epoch: int, offset: int) -> None:
        """An epoch below the current one: ``INVALID_PRODUCER_EPOCH`` for clients and
        coordinators; accepted (Kafka logs a warning) when replicating."""
        if producer_epoch < self.updated_entry.producer_epoch:
            if self.origin is not AppendOrigin.REPLICATION:
                raise InvalidProducerEpochError(
                    f"Epoch of {self._where(offset)} is {producer_epoch}, which is smaller than "
                    f"the last seen epoch {self.updated_entry.producer_epoch}")

    def _check_sequence(self, producer_epoch: int, first_seq: int, offset: int) -> None:
        """``checkSequence`` (client appends only)."""
        updated = self.updated_entry
        if producer_epoch != updated.producer_epoch:
            # a new epoch must start at 0, unless the producer has no epoch here at all
            if first_seq != 0 and updated.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"Invalid sequence number for new epoch of {self._where(offset)}: "
                    f"{producer_epoch} (request epoch), {first_seq} (seq. number), "
                    f"{updated.producer_epoch} (current producer epoch)")
            return
        if not updated.is_empty:
            current_last_seq = updated.last_seq
        elif producer_epoch == self.current_entry.producer_epoch:
            current_last_seq = self.current_entry.last_seq
        else:
            current_last_seq = NO_SEQUENCE
        # no epoch known (all its records deleted): any sequence is accepted (KIP-360)
        if not (self.current_entry.producer_epoch == NO_PRODUCER_EPOCH
                or _in_sequence(current_last_seq, first_seq)):
            raise OutOfOrderSequenceError(
                f"Out of order sequence number for {self._where(offset)}: {first_seq} "
                f"(incoming seq. number), {current_last_seq} (current end sequence number)")

    def append_data_batch(self, producer_epoch: int, first_seq: int, last_seq: int,
                          last_timestamp: int, first_offset: int, last_offset: int,
                          is_transactional: bool) -> None:
        """Validate and record one data batch (``appendDataBatch``)."""
        self._check_producer_epoch(producer_epoch, first_offset)
        if self.origin is AppendOrigin.CLIENT:
            self._check_sequence(producer_epoch, first_seq, first_offset)
        updated = self.updated_entry
        updated.add_batch(producer_epoch, last_seq, last_offset, last_offset - first_offset,
                          last_timestamp)
        if updated.current_txn_first_offset is not None and not is_transactional:
            raise InvalidTxnStateError(
                f"Expected transactional write from {self._where(first_offset)}")
        if updated.current_txn_first_offset is None and is_transactional:
            updated.current_txn_first_offset = first_offset
            self.started_transactions.append(TxnMetadata(self.producer_id, first_offset))

    def append_end_txn_marker(self, control_type: ControlRecordType | int,
                              coordinator_epoch: int, producer_epoch: int, offset: int,
                              timestamp: int) -> CompletedTxn | None:
        """A COMMIT/ABORT marker (``appendEndTxnMarker``): epoch check, coordinator fencing,
        then the transaction (if one was open) is returned as completed."""
        self._check_producer_epoch(producer_epoch, offset)
        updated = self.updated_entry
        if updated.coordinator_epoch > coordinator_epoch and \
                self.origin is not AppendOrigin.REPLICATION:
            raise TransactionCoordinatorFencedError(
                f"Invalid coordinator epoch for {self._where(offset)}: {coordinator_epoch} "
                f"(zombie), {updated.coordinator_epoch} (current)")
        completed = None
        if updated.current_txn_first_offset is not None:
            completed = CompletedTxn(self.producer_id, updated.current_txn_first_offset, offset,
                                     int(control_type) == ControlRecordType.ABORT)
        updated.update_for_marker(producer_epoch, coordinator_epoch, timestamp)
        return completed

    def append(self, batch: BatchLike) -> CompletedTxn | None:
        """One batch of this producer (``append(RecordBatch, …)``)."""
        if batch.is_control:
            found = _end_txn_marker(batch)
            if found is None:
                return None
            marker, timestamp = found
            return self.append_end_txn_marker(marker.control_type, marker.coordinator_epoch,
                                              batch.producer_epoch, batch.base_offset, timestamp)
        self.append_data_batch(batch.producer_epoch, batch.base_sequence, _last_sequence(batch),
                               batch.max_timestamp, batch.base_offset, batch.last_offset,
                               batch.is_transactional)
        return None

    def to_entry(self) -> ProducerStateEntry:
        return self.updated_entry

    def __repr__(self) -> str:
        e = self.updated_entry
        return (f"ProducerAppendInfo(producer_id={self.producer_id}, "
                f"producer_epoch={e.producer_epoch}, first_sequence={e.first_seq}, "
                f"last_sequence={e.last_seq}, "
                f"current_txn_first_offset={e.current_txn_first_offset}, "
                f"coordinator_epoch={e.coordinator_epoch}, last_timestamp={e.last_timestamp}, "
                f"started_transactions={self.started_transactions})")


# --- ProducerStateManager ---------------------------------------------------------------------
def _expiration_ms(value: Any) -> int:
    """``producer.id.expiration.ms``: an INT, at least 1."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= INT32_MAX:
        raise InvalidConfigurationError(
            f"Invalid value {value!r} for configuration producer.id.expiration.ms: "
            f"must be an int in [1, {INT32_MAX}]")
    return value


class ProducerStateManager:
    """The producer-id map of one partition log and its ``.snapshot`` files
    (``ProducerStateManager``).

    ``map_end_offset`` is the offset the in-memory state is complete up to (exclusive); a
    snapshot taken now is named after it. Snapshot files live in ``log_dir`` on ``medium``;
    the constructor lists them (``loadSnapshots``) and loads nothing — the log calls
    :func:`rebuild_producer_state` for that.
    """

    __slots__ = ("producer_id_expiration_ms", "max_transaction_timeout_ms", "medium", "log_dir",
                 "clock", "_topic_partition", "_producers", "_ongoing_txns", "_unreplicated_txns",
                 "_oldest_txn_last_timestamp", "_last_map_offset", "_last_snap_offset",
                 "_snapshots", "corrupt_snapshots", "__weakref__")

    def __init__(self, medium: Medium, log_dir: str | os.PathLike[str], clock: Any, *,
                 producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
                 max_transaction_timeout_ms: int = DEFAULT_MAX_TRANSACTION_TIMEOUT_MS,
                 topic_partition: str = "", list_existing: bool = True) -> None:
        self.producer_id_expiration_ms = _expiration_ms(producer_id_expiration_ms)
        self.max_transaction_timeout_ms = int(max_transaction_timeout_ms)
        self.medium = medium
        self.log_dir = os.fspath(log_dir)
        self.clock = clock
        self._topic_partition = topic_partition  # "": the directory's name, when first asked
        self._producers: dict[int, ProducerStateEntry] = {}
        self._ongoing_txns: dict[int, TxnMetadata] = {}  # by first offset
        self._unreplicated_txns: dict[int, TxnMetadata] = {}  # completed, marker above the HW
        self._oldest_txn_last_timestamp = -1
        self._last_map_offset = 0
        self._last_snap_offset = 0
        self._snapshots: dict[int, str] = (list_snapshot_files(medium, self.log_dir)
                                           if list_existing else {})
        self.corrupt_snapshots: list[tuple[str, str]] = []
        """``(path, reason)`` of each snapshot found corrupt and deleted on load."""

    @classmethod
    def for_new_log(cls, medium: Medium, log_dir: str | os.PathLike[str], clock: Any,
                    start_offset: int, *,
                    producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
                    **kwargs: Any) -> ProducerStateManager:
        """The manager of a partition directory just created: nothing to list or load, the state
        starts at ``start_offset`` and counts as snapshotted there (what
        :func:`rebuild_producer_state` leaves for an empty log, without touching the medium)."""
        if kwargs:
            m = cls(medium, log_dir, clock, list_existing=False,
                    producer_id_expiration_ms=producer_id_expiration_ms, **kwargs)
            m._last_map_offset = m._last_snap_offset = int(start_offset)
            return m
        # what that constructor call sets, field by field (a created log's first batch with a
        # producer id makes one)
        m = cls.__new__(cls)
        m.producer_id_expiration_ms = _expiration_ms(producer_id_expiration_ms)
        m.max_transaction_timeout_ms = DEFAULT_MAX_TRANSACTION_TIMEOUT_MS
        m.medium = medium
        m.log_dir = log_dir if type(log_dir) is str else os.fspath(log_dir)
        m.clock = clock
        m._topic_partition = ""
        m._producers = {}
        m._ongoing_txns = {}
        m._unreplicated_txns = {}
        m._oldest_txn_last_timestamp = -1
        m._last_map_offset = m._last_snap_offset = int(start_offset)
        m._snapshots = {}
        m.corrupt_snapshots = []
        return m

    # --- reads ------------------------------------------------------------------------------
    @property
    def topic_partition(self) -> str:
        """The partition's name in messages: as given, else its directory's name (the name it
        had when the manager was made: a renamed directory keeps it)."""
        name = self._topic_partition
        if not name:
            name = self._topic_partition = os.path.basename(self.log_dir)
        return name

    @property
    def map_end_offset(self) -> int:
        return self._last_map_offset

    @property
    def last_snapshot_offset(self) -> int:
        """The end offset the last written or loaded snapshot covers (``lastSnapOffset``)."""
        return self._last_snap_offset

    @property
    def active_producers(self) -> Mapping[int, ProducerStateEntry]:
        """Read-only view of ``{producer id: entry}``."""
        return MappingProxyType(self._producers)

    @property
    def producer_id_count(self) -> int:
        return len(self._producers)

    @property
    def is_empty(self) -> bool:
        return not self._producers and not self._unreplicated_txns

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files this manager knows, ascending."""
        return sorted(self._snapshots)

    @property
    def latest_snapshot_offset(self) -> int | None:
        return max(self._snapshots) if self._snapshots else None

    @property
    def oldest_snapshot_offset(self) -> int | None:
        return min(self._snapshots) if self._snapshots else None

    def fetch_snapshot(self, offset: int) -> str | None:
        """The path of the snapshot at exactly ``offset``, if there is one."""
        return self._snapshots.get(offset)

    # --- transactions (kept as Kafka keeps them) -------------------------------------------
    def first_undecided_offset(self) -> int | None:
        """First offset of the earliest open transaction."""
        return min(self._ongoing_txns) if self._ongoing_txns else None

    def first_unstable_offset(self) -> int | None:
        """The earlier of the first open transaction and the first completed one whose marker
        is not yet below the high watermark."""
        candidates = [min(d) for d in (self._ongoing_txns, self._unreplicated_txns) if d]
        return min(candidates) if candidates else None

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The LSO once ``completed`` completes: the first open transaction of another producer,
        else just past the marker."""
        for first in sorted(self._ongoing_txns):
            if self._ongoing_txns[first].producer_id != completed.producer_id:
                return first
        return completed.last_offset + 1

    def complete_txn(self, completed: CompletedTxn) -> None:
        txn = self._ongoing_txns.pop(completed.first_offset, None)
        if txn is None:
            raise ValueError(f"Attempted to complete transaction {completed} on partition "
                             f"{self.topic_partition} which was not started")
        txn.last_offset = completed.last_offset
        self._unreplicated_txns[completed.first_offset] = txn
        self._update_oldest_txn_timestamp()

    def has_late_transaction(self, now_ms: int) -> bool:
        last = self._oldest_txn_last_timestamp
        return last > 0 and now_ms - last > self.max_transaction_timeout_ms + LATE_TRANSACTION_BUFFER_MS

    def _update_oldest_txn_timestamp(self) -> None:
        if not self._ongoing_txns:
            self._oldest_txn_last_timestamp = -1
            return
        oldest = self._ongoing_txns[min(self._ongoing_txns)]
        entry = self._producers.get(oldest.producer_id)
        self._oldest_txn_last_timestamp = entry.last_timestamp if entry is not None else -1

    def _remove_unreplicated_transactions(self, offset: int) -> None:
        if not self._unreplicated_txns:
            return
        for first in [f for f, t in self._unreplicated_txns.items()
                      if t.last_offset is not None and t.last_offset < offset]:
            del self._unreplicated_txns[first]

    # --- appends --------------------------------------------------------------------------
    def prepare_update(self, producer_id: int, origin: AppendOrigin | str) -> ProducerAppendInfo:
        """A validator for ``producer_id``'s next batches (the manager is not changed)."""
        current = self._producers.get(producer_id) or ProducerStateEntry.empty(producer_id)
        return ProducerAppendInfo(producer_id, current, origin, self.topic_partition)

    def update(self, append_info: ProducerAppendInfo) -> None:
        """Apply a validated append (``update(ProducerAppendInfo)``)."""
        pid = append_info.producer_id
        if pid == NO_PRODUCER_ID:
            raise ValueError(f"Invalid producer id {pid} passed to update for partition "
                             f"{self.topic_partition}")
        updated = append_info.to_entry()
        current = self._producers.get(pid)
        if current is not None:
            current.update(updated)
        else:
            self._producers[pid] = updated
        for txn in append_info.started_transactions:
            self._ongoing_txns[txn.first_offset] = txn
        self._update_oldest_txn_timestamp()

    def load_producer_entry(self, entry: ProducerStateEntry) -> None:
        """Install an entry as read from a snapshot."""
        self._producers[entry.producer_id] = entry
        if entry.current_txn_first_offset is not None:
            self._ongoing_txns[entry.current_txn_first_offset] = TxnMetadata(
                entry.producer_id, entry.current_txn_first_offset)

    def update_map_end_offset(self, last_offset: int) -> None:
        """The state is now complete up to ``last_offset`` (exclusive): the log calls this after
        every append (LEO) and at a roll (the new segment's base)."""
        self._last_map_offset = int(last_offset)

    # --- expiration -----------------------------------------------------------------------
    def _is_expired(self, now_ms: int, entry: ProducerStateEntry) -> bool:
        return (entry.current_txn_first_offset is None
                and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms)

    def remove_expired_producers(self, now_ms: int | None = None) -> list[int]:
        """Forget producers idle for ``producer.id.expiration.ms`` (their last batch timestamp
        that long before ``now_ms``, default the clock) with no open transaction; returns
        their ids. A later batch from one of them is accepted at any sequence."""
        now = self.clock.milliseconds() if now_ms is None else now_ms
        gone = [pid for pid, e in self._producers.items() if self._is_expired(now, e)]
        for pid in gone:
            del self._producers[pid]
        return gone

    # --- high watermark and log start -----------------------------------------------------
    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Completed transactions whose markers are now below the HW stop holding the LSO."""
        if self._unreplicated_txns:  # none, mostly: every high watermark move asks
            self._remove_unreplicated_transactions(high_watermark)

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        self._remove_unreplicated_transactions(log_start_offset)
        if self._last_map_offset < log_start_offset:
            self._last_map_offset = log_start_offset
        latest = self.latest_snapshot_offset
        self._last_snap_offset = log_start_offset if latest is None else latest

    # --- snapshots ------------------------------------------------------------------------
    def take_snapshot(self, sync: bool = True) -> str | None:
        """Write ``<map_end_offset>.snapshot`` unless the state has not moved past the last
        snapshot (``takeSnapshot``); returns its path. ``sync=False`` is the roll's variant:
        call :func:`~replica_core.storage.producer_state_snapshot.flush_snapshot_file` later."""
        if self._last_map_offset <= self._last_snap_offset:
            return None
        path = snapshot_path(self.log_dir, self._last_map_offset)
        data = encode_snapshot(e.to_snapshot_entry() for e in self._producers.values())
        write_snapshot_file(self.medium, path, data, sync=sync)
        self._snapshots[self._last_map_offset] = path
        self._last_snap_offset = self._last_map_offset
        return path

    def flush_snapshot(self, path: str) -> bool:
        """fsync a snapshot written with ``sync=False`` (``flushProducerStateSnapshot``)."""
        return flush_snapshot_file(self.medium, path)

    def _remove_and_delete_snapshot(self, offset: int) -> None:
        path = self._snapshots.pop(offset, None)
        if path is not None and self.medium.exists(path):
            try:
                self.medium.remove(path)
            except OSError as e:
                raise KafkaStorageError(f"error deleting producer snapshot {path}: {e}") from e

    def delete_snapshots_before(self, offset: int) -> None:
        """Delete the snapshots below ``offset`` (exclusive)."""
        for off in [o for o in self._snapshots if o < offset]:
            self._remove_and_delete_snapshot(off)

    def remove_and_mark_snapshot_for_deletion(self, offset: int) -> str | None:
        """Forget the snapshot at ``offset`` and rename it ``….snapshot.deleted``; returns the
        new path (None if there was none, or the file had already gone)."""
        path = self._snapshots.pop(offset, None)
        if path is None:
            return None
        renamed = path + ".deleted"  # LogFileUtils.DELETED_FILE_SUFFIX
        try:
            self.medium.rename(path, renamed)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise KafkaStorageError(f"error renaming producer snapshot {path}: {e}") from e
        return renamed

    def remove_stray_snapshots(self, segment_base_offsets: Iterable[int],
                               file_names: list[str] | None = None) -> None:
        """Reload the file list, then delete each snapshot that is not at a segment base offset,
        except the newest such one when it lies above the last segment's base (the snapshot a
        clean shutdown writes at the log end offset) (``removeStraySnapshots``). Also deletes
        ``*.snapshot.tmp`` left by a crash during :meth:`take_snapshot` (no Kafka counterpart:
        Kafka writes no temporary file).

        ``file_names``: the directory's file names (no subdirectory) when the caller holds a
        listing whose snapshot names are current (the loader's); None lists the directory."""
        bases = set(segment_base_offsets)
        medium, log_dir = self.medium, self.log_dir
        if file_names is not None:
            self._delete_leftover_tmp_files(file_names)
            snapshots = snapshot_files_among(medium, log_dir, file_names)
        elif medium.exists(log_dir):
            # one listing serves both steps: removing ``*.snapshot.tmp`` files changes no
            # ``*.snapshot`` name, and a directory that lists is a directory
            names = medium.listdir(log_dir)
            self._delete_leftover_tmp_files(names)
            snapshots = snapshot_files_among(medium, log_dir, names)
        else:
            snapshots = {}
        self._snapshots = snapshots
        latest_stray: int | None = None
        for off in sorted(snapshots):
            if off in bases:
                continue
            if latest_stray is not None:
                self._remove_and_delete_snapshot(latest_stray)
            latest_stray = off
        if latest_stray is not None and bases and latest_stray < max(bases):
            self._remove_and_delete_snapshot(latest_stray)

    def _delete_leftover_tmp_files(self, names: list[str]) -> None:
        """Remove the ``*.snapshot.tmp`` files among ``names`` (the directory's listing)."""
        for name in names:
            if name.endswith(".snapshot.tmp"):
                self.medium.remove(os.path.join(self.log_dir, name))

    def read_snapshot(self, path: str) -> list[ProducerStateEntry]:
        """The entries of one snapshot file (:class:`CorruptSnapshotError` if it is corrupt)."""
        return [ProducerStateEntry.from_snapshot_entry(row)
                for row in read_snapshot_file(self.medium, path)]

    def _load_from_snapshot(self, log_start_offset: int, now_ms: int) -> None:
        """Load the newest snapshot; a corrupt one is deleted and the next older tried; with
        none left the state starts empty at ``log_start_offset`` (``loadFromSnapshot``)."""
        while self._snapshots:
            offset = max(self._snapshots)
            path = self._snapshots[offset]
            try:
                entries = self.read_snapshot(path)
            except CorruptSnapshotError as e:
                self.corrupt_snapshots.append((path, str(e)))
                self._remove_and_delete_snapshot(offset)
                continue
            for entry in entries:
                if not self._is_expired(now_ms, entry):
                    self.load_producer_entry(entry)
            self._last_snap_offset = self._last_map_offset = offset
            self._update_oldest_txn_timestamp()
            return
        self._last_snap_offset = self._last_map_offset = log_start_offset

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int,
                            now_ms: int | None = None) -> None:
        """Keep snapshots in ``(log_start_offset, log_end_offset]`` only, and unless the state
        already ends at ``log_end_offset``, reload it from the newest of them
        (``truncateAndReload``). The log end offset is assumed to be at or below the HW."""
        now = self.clock.milliseconds() if now_ms is None else now_ms
        for off in list(self._snapshots):
            if off > log_end_offset or off <= log_start_offset:
                self._remove_and_delete_snapshot(off)
        if log_end_offset != self._last_map_offset:
            self._producers.clear()
            self._ongoing_txns.clear()
            self._update_oldest_txn_timestamp()
            self._unreplicated_txns.clear()
            self._load_from_snapshot(log_start_offset, now)
        else:
            self.on_log_start_offset_incremented(log_start_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget every producer and delete every snapshot; the state starts at ``offset``."""
        self._producers.clear()
        self._ongoing_txns.clear()
        self._unreplicated_txns.clear()
        for off in list(self._snapshots):
            self._remove_and_delete_snapshot(off)
        self._last_snap_offset = 0
        self._last_map_offset = offset
        self._update_oldest_txn_timestamp()

    def truncate_fully_and_reload_snapshots(self) -> None:
        """``truncateFullyAndStartAt(0)`` then list the directory again."""
        self.truncate_fully_and_start_at(0)
        self._snapshots = list_snapshot_files(self.medium, self.log_dir)

    def update_parent_dir(self, log_dir: str | os.PathLike[str]) -> None:
        """The partition directory was renamed: the snapshot files moved with it."""
        if not self._topic_partition:  # the name stays that of the directory it was made in
            self._topic_partition = os.path.basename(self.log_dir)
        self.log_dir = os.fspath(log_dir)
        self._snapshots = {off: snapshot_path(self.log_dir, off) for off in self._snapshots}

    def __repr__(self) -> str:
        return (f"ProducerStateManager({self.topic_partition}, producers={len(self._producers)}, "
                f"map_end_offset={self._last_map_offset}, snapshots={self.snapshot_offsets()})")


# --- the log's calls (UnifiedLog / LogSegment) -------------------------------------------------
class ProducerStateUpdate(NamedTuple):
    """What :func:`analyze_and_validate_producer_state` found for one append."""

    producers: dict[int, ProducerAppendInfo]
    completed_txns: list[CompletedTxn]
    duplicate: BatchMetadata | None
    """A CLIENT append retrying one of a producer's last five batches: the original batch,
    whose ``first_offset``/``last_offset``/``timestamp`` the leader answers with, writing
    nothing."""


def _update_producers(manager: ProducerStateManager, batch: BatchLike,
                      producers: dict[int, ProducerAppendInfo],
                      origin: AppendOrigin) -> CompletedTxn | None:
    """``UnifiedLog.updateProducers``: one append info per producer, fed batch by batch."""
    pid = batch.producer_id
    info = producers.get(pid)
    if info is None:
        info = producers[pid] = manager.prepare_update(pid, origin)
    return info.append(batch)


def analyze_and_validate_producer_state(manager: ProducerStateManager,
                                        batches: Iterable[BatchLike],
                                        origin: AppendOrigin | str) -> ProducerStateUpdate:
    """Validate an append's batches (offsets already assigned) against the producer state
    without changing it (``UnifiedLog.analyzeAndValidateProducerState``).

    For a CLIENT append, the first batch that duplicates one of its producer's cached batches
    stops the analysis and is returned as ``duplicate``. Raises
    :class:`~replica_core.errors.OutOfOrderSequenceError`,
    :class:`~replica_core.errors.InvalidProducerEpochError`,
    :class:`~replica_core.errors.InvalidTxnStateError` or
    :class:`~replica_core.errors.TransactionCoordinatorFencedError` as Kafka does; batches
    without a producer id are skipped.
    """
    org = _origin(origin)
    producers: dict[int, ProducerAppendInfo] = {}
    completed: list[CompletedTxn] = []
    for batch in batches:
        if not _has_producer_id(batch):
            continue
        if org is AppendOrigin.CLIENT:
            entry = manager.last_entry(batch.producer_id)
            if entry is not None:
                dup = entry.find_duplicate_batch(batch.producer_epoch, batch.base_sequence,
                                                 _last_sequence(batch))
                if dup is not None:
                    return ProducerStateUpdate(producers, completed, dup)
        txn = _update_producers(manager, batch, producers, org)
        if txn is not None:
            completed.append(txn)
    return ProducerStateUpdate(producers, completed, None)


def apply_producer_state_update(manager: ProducerStateManager, update: ProducerStateUpdate,
                                last_offset: int) -> list[tuple[CompletedTxn, int]]:
    """After the records of a non-duplicate append are written: apply each producer's update,
    complete its transactions and move the map end offset to ``last_offset + 1`` (the tail of
    ``UnifiedLog.append``). Returns ``(completed transaction, last stable offset)`` pairs, what
    Kafka writes to the segment's transaction index for aborted ones."""
    if update.duplicate is not None:
        raise ValueError("a duplicate append writes nothing; there is no update to apply")
    for info in update.producers.values():
        manager.update(info)
    out = []
    for txn in update.completed_txns:
        lso = manager.last_stable_offset(txn)
        manager.complete_txn(txn)
        out.append((txn, lso))
    manager.update_map_end_offset(last_offset + 1)
    return out


def in_sequence_entry(manager: ProducerStateManager, producer_id: int, producer_epoch: int,
                      first_seq: int, last_seq: int, client: bool) -> ProducerStateEntry | None:
    """The common append in one step: the entry of a producer whose next batch — a data batch,
    not transactional, of the producer's current epoch, with no transaction open anywhere in the
    partition — needs no check but its sequence: for a client, the one after the producer's last
    and no duplicate of a cached batch; for a replicated batch, none. Then
    :func:`analyze_and_validate_producer_state` would accept it, changing nothing but that
    entry (see :func:`apply_in_sequence`). None: use the general functions.

    A producer the partition holds no state for is accepted at any sequence (KIP-360, see the
    module docstring) unless its epoch is below ``NO_PRODUCER_EPOCH``: the answer is then a new,
    empty entry, not yet in the manager, which :func:`apply_in_sequence` installs."""
    if manager._ongoing_txns:
        return None
    entry = manager._producers.get(producer_id)
    if entry is None:
        return ProducerStateEntry(producer_id) if producer_epoch >= NO_PRODUCER_EPOCH else None
    if entry.producer_epoch != producer_epoch or not entry.batch_metadata \
            or entry.current_txn_first_offset is not None:
        return None
    if client and (not _in_sequence(entry.batch_metadata[-1].last_seq, first_seq)
                   or entry.batch_with_sequence_range(first_seq, last_seq) is not None):
        return None
    return entry


def apply_in_sequence(manager: ProducerStateManager, entry: ProducerStateEntry,
                      producer_epoch: int, last_seq: int, first_offset: int, last_offset: int,
                      timestamp: int) -> None:
    """After the records of a batch :func:`in_sequence_entry` accepted are written: what
    :func:`apply_producer_state_update` does for it (the batch cached, the timestamp taken, the
    map end offset past it; a new producer's entry installed)."""
    # entry.add_batch, in line
    batches = entry.batch_metadata
    if entry.producer_epoch != producer_epoch:  # maybe_update_producer_epoch
        batches.clear()
        entry.producer_epoch = producer_epoch
    batches.append(BatchMetadata(last_seq, last_offset, last_offset - first_offset, timestamp))
    entry.last_timestamp = timestamp
    producers = manager._producers
    pid = entry.producer_id
    if pid not in producers:
        producers[pid] = entry
        if manager._ongoing_txns:
            manager._update_oldest_txn_timestamp()
        else:  # what _update_oldest_txn_timestamp sets with no open transaction
            manager._oldest_txn_last_timestamp = -1
    manager._last_map_offset = last_offset + 1


def update_producer_state_from_batch(manager: ProducerStateManager,
                                     batch: BatchLike) -> tuple[CompletedTxn, int] | None:
    """One batch read back during segment recovery (``LogSegment.updateProducerState``):
    replicated-origin update, transaction completion, map end offset past the batch."""
    result = None
    if _has_producer_id(batch):
        info = manager.prepare_update(batch.producer_id, AppendOrigin.REPLICATION)
        txn = info.append(batch)
        manager.update(info)
        if txn is not None:
            lso = manager.last_stable_offset(txn)
            manager.complete_txn(txn)
            result = (txn, lso)
    manager.update_map_end_offset(batch.last_offset + 1)
    return result


def load_producers_from_batches(manager: ProducerStateManager,
                                batches: Iterable[BatchLike]) -> None:
    """Replay batches already in the log (``UnifiedLog.loadProducersFromRecords``): replicated
    origin, all updates applied at the end. The map end offset is left to the caller."""
    producers: dict[int, ProducerAppendInfo] = {}
    completed: list[CompletedTxn] = []
    for batch in batches:
        if _has_producer_id(batch):
            txn = _update_producers(manager, batch, producers, AppendOrigin.REPLICATION)
            if txn is not None:
                completed.append(txn)
    for info in producers.values():
        manager.update(info)
    for txn in completed:
        manager.complete_txn(txn)


def _in_range(batches: Iterable[BatchLike], start: int, end: int) -> Iterator[BatchLike]:
    """Batches ending in ``[start, end)``: what ``segment.read(start, …, position of end)``
    returns."""
    for batch in batches:
        last = batch.last_offset
        if start <= last < end:
            yield batch


def rebuild_producer_state(manager: ProducerStateManager, *,
                           segment_base_offsets: Sequence[int],
                           read_batches: Callable[[int, int, int], Iterable[BatchLike]],
                           log_start_offset: int, last_offset: int,
                           reload_from_clean_shutdown: bool = False,
                           record_version: int = 2, now_ms: int | None = None) -> None:
    """Bring the state up to ``last_offset`` from the newest usable snapshot and the log
    (``UnifiedLog.rebuildProducerState``).

    ``read_batches(segment_base, start, end)`` yields the batches of the segment based at
    ``segment_base`` (all of them is fine: only those ending in ``[start, end)`` are used).

    * Legacy formats (``record_version`` < 2), or a clean shutdown that left no snapshot at all
      (an upgrade): nothing is scanned; empty snapshots are written at the bases of the last two
      segments and at ``last_offset``.
    * Otherwise: :meth:`ProducerStateManager.truncate_and_reload` drops snapshots outside
      ``(log_start_offset, last_offset]`` and loads the newest remaining one (deleting corrupt
      ones on the way down); then, if the state still ends below ``last_offset`` and there were
      producers before, the segments from the state's end are replayed, a snapshot being taken
      when reaching the base of either of the last two segments; finally a snapshot at
      ``last_offset``.
    """
    bases = sorted(segment_base_offsets)
    to_snapshot: list[int] = bases[-2:] + [last_offset]
    if record_version < 2 or (manager.latest_snapshot_offset is None
                              and reload_from_clean_shutdown):
        for off in to_snapshot:
            manager.update_map_end_offset(off)
            manager.take_snapshot()
        return
    now = manager.clock.milliseconds() if now_ms is None else now_ms
    empty_before = manager.is_empty and manager.map_end_offset >= last_offset
    manager.truncate_and_reload(log_start_offset, last_offset, now)
    map_end = manager.map_end_offset
    if last_offset > map_end and not empty_before:
        for i, base in enumerate(bases):
            nxt = bases[i + 1] if i + 1 < len(bases) else None
            # LogSegments.values(mapEndOffset, lastOffset): from the segment holding mapEnd
            if (nxt is not None and nxt <= map_end) or base >= last_offset:
                continue
            start = max(base, manager.map_end_offset, log_start_offset)
            manager.update_map_end_offset(start)
            if base in to_snapshot:
                manager.take_snapshot()
            end = last_offset if nxt is None else min(nxt, last_offset)
            load_producers_from_batches(manager, _in_range(read_batches(base, start, end),
                                                           start, end))
    manager.update_map_end_offset(last_offset)
    manager.take_snapshot()


def delete_producer_snapshots(manager: ProducerStateManager,
                              segment_base_offsets: Iterable[int]) -> list[str]:
    """The snapshots of deleted segments (``UnifiedLog.deleteProducerSnapshots``): each one at
    a segment's base is renamed ``.deleted`` and then removed (Kafka removes them after
    ``file.delete.delay.ms``; the log's step model removes at once). Returns the removed
    paths."""
    renamed = [p for p in (manager.remove_and_mark_snapshot_for_deletion(b)
                           for b in segment_base_offsets) if p is not None]
    medium = manager.medium
    for path in renamed:
        if medium.exists(path):
            try:
                medium.remove(path)
            except OSError as e:
                raise KafkaStorageError(f"error deleting producer snapshot {path}: {e}") from e
    return renamed
