"""One log segment: a ``.log`` file plus its offset and time indexes (Kafka's ``LogSegment``).

KAFKA_SEMANTICS §1.4-1.8 (files, indexes, sparse index rule), §2.7 (rolling), §3.3 (read),
§4.1 (truncation), §5.4 (recovery). Batch framing and CRCs run in the batch kernel
(``_fast/_batch.pyx``), index searches in the index module; nothing here walks records.

Segments are not thread-safe; the owning :class:`~replica_core.storage.log.Log` serialises calls.
"""
from __future__ import annotations

import bisect
import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

import numpy as np

from replica_core._fast import load
from replica_core.errors import (
    CorruptRecordError,
    KafkaStorageError,
    LogSegmentOffsetOverflowError,
)
from replica_core.storage.index import OffsetIndex, TimeIndex

# --- file names (LogFileUtils) -------------------------------------------------------------
LOG_FILE_SUFFIX = ".log"
INDEX_FILE_SUFFIX = ".index"
TIME_INDEX_FILE_SUFFIX = ".timeindex"
TXN_INDEX_FILE_SUFFIX = ".txnindex"
SNAPSHOT_FILE_SUFFIX = ".snapshot"
DELETED_FILE_SUFFIX = ".deleted"
CLEANED_FILE_SUFFIX = ".cleaned"
SWAP_FILE_SUFFIX = ".swap"
INDEX_SUFFIXES = (INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX)

INT32_MAX = 2**31 - 1
NO_TIMESTAMP = -1
DEFAULT_MAX_INDEX_SIZE = 10 * 1024 * 1024

# Column layout of the batch kernel's header matrix (docs/contracts.md, "Batch kernels").
(COL_POSITION, COL_SIZE, COL_BASE_OFFSET, COL_LAST_OFFSET_DELTA, COL_PARTITION_LEADER_EPOCH,
 COL_MAGIC, COL_CRC, COL_ATTRIBUTES, COL_BASE_TIMESTAMP, COL_MAX_TIMESTAMP, COL_PRODUCER_ID,
 COL_PRODUCER_EPOCH, COL_BASE_SEQUENCE, COL_RECORD_COUNT, COL_CRC_OK) = range(15)
STOP_END, STOP_PARTIAL, STOP_CORRUPT = 0, 1, 2

LOG_OVERHEAD = 12
# Kafka's file reader (FileLogInputStream.nextBatch) takes no batch from the last 17 bytes of a
# file (baseOffset, batchLength, epoch, magic): a shorter tail is never a batch, not corruption.
HEADER_SIZE_UP_TO_MAGIC = 17
_SCAN_WINDOW = 64 * 1024
_SIZE_FIELD = struct.Struct(">i")
_NO_HEADERS = np.empty((0, 15), dtype=np.int64)
_recovery = load("_segment_recovery", "segment_recovery_py")


def filename_prefix(offset: int) -> str:
    """The 20-digit zero-padded base offset that names segment files (§1.4)."""
    return f"{offset:020d}"


def _in_dir(dir: str, name: str) -> str:
    """``os.path.join(dir, name)``: for a plain ``str`` directory not ending in ``/``, the string
    join it gives there, without its generality (segment paths are made on every roll and load)."""
    if type(dir) is str and dir and dir[-1] != "/":
        return f"{dir}/{name}"
    return os.path.join(dir, name)


def log_file_path(dir: str, base_offset: int, suffix: str = "") -> str:
    return _in_dir(dir, f"{base_offset:020d}{LOG_FILE_SUFFIX}{suffix}")


def offset_index_path(dir: str, base_offset: int, suffix: str = "") -> str:
    return _in_dir(dir, f"{base_offset:020d}{INDEX_FILE_SUFFIX}{suffix}")


def time_index_path(dir: str, base_offset: int, suffix: str = "") -> str:
    return _in_dir(dir, f"{base_offset:020d}{TIME_INDEX_FILE_SUFFIX}{suffix}")


def txn_index_path(dir: str, base_offset: int, suffix: str = "") -> str:
    return _in_dir(dir, f"{base_offset:020d}{TXN_INDEX_FILE_SUFFIX}{suffix}")


def _name_prefix(name: str) -> str:
    """A file name's part before its first ``.``, its directory left out (``os.path.basename``
    in line for a ``str``)."""
    base = name[name.rfind("/") + 1:] if type(name) is str else os.path.basename(name)
    return base.split(".", 1)[0]


def offset_from_file_name(name: str) -> int:
    """``Long.parseLong(name[0 : first '.'])``; raises ``ValueError`` for other names."""
    prefix = _name_prefix(name)
    if not prefix.isdigit():
        raise ValueError(f"not a segment file name: {name!r}")
    return int(prefix)


def is_canonical_file_name(name: str) -> bool:
    """Is ``name`` spelled with the 20-digit base offset Kafka writes (``5.log`` parses to the
    same offset as ``00000000000000000005.log`` but is not that file)?"""
    prefix = _name_prefix(name)
    return len(prefix) == 20 and prefix.isdigit() and int(prefix) < 2**63


# --- small value types ---------------------------------------------------------------------
class LogOffsetMetadata(NamedTuple):
    """An offset plus, when known, the segment holding it and the byte position there.

    Kafka's ``LogOffsetMetadata``; "message offset only" metadata has segment base −1 and
    position −1 (KAFKA_SEMANTICS §10).
    """

    message_offset: int
    segment_base_offset: int = -1
    relative_position_in_segment: int = -1

    @property
    def message_offset_only(self) -> bool:
        return self.segment_base_offset == -1 and self.relative_position_in_segment == -1

    def on_older_segment(self, other: LogOffsetMetadata) -> bool:
        if self.message_offset_only:
            raise KafkaStorageError(f"{self} cannot compare its segment info with {other}")
        return self.segment_base_offset < other.segment_base_offset

    def on_same_segment(self, other: LogOffsetMetadata) -> bool:
        if self.message_offset_only:
            raise KafkaStorageError(f"{self} cannot compare its segment info with {other}")
        return self.segment_base_offset == other.segment_base_offset

    def position_diff(self, other: LogOffsetMetadata) -> int:
        """Bytes between two positions of the same segment (DelayedFetch accounting)."""
        if not self.on_same_segment(other):
            raise KafkaStorageError(f"{self} is not on the same segment as {other}")
        return self.relative_position_in_segment - other.relative_position_in_segment


class FetchDataInfo(NamedTuple):
    """What a read returns: where it started and the raw batch bytes (may end mid-batch, §3.3)."""

    fetch_offset_metadata: LogOffsetMetadata
    records: bytes | memoryview
    first_entry_incomplete: bool = False


class LogOffsetPosition(NamedTuple):
    """The batch found by ``translate_offset``: its last offset, file position and size."""

    offset: int
    position: int
    size: int


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


_NO_TIMESTAMP_AT_0 = TimestampOffset(NO_TIMESTAMP, 0)  # an empty segment's, at base 0 (shared)
# NamedTuple(*fields) without the generated __new__'s frame, for the tuples made per read and
# per append: ``_new_tuple(LogOffsetMetadata, (offset, base, position))`` is
# ``LogOffsetMetadata(offset, base, position)`` (every field given)
_new_tuple = tuple.__new__
_NO_TAIL = 1 << 63  # LogSegment._tail_offset when no last append is known: above every offset
_LOG_NAME_AT_0 = f"/{0:020d}{LOG_FILE_SUFFIX}"  # "/" and the .log name of a segment at base 0


class SegmentRecovery(NamedTuple):
    """Outcome of :meth:`LogSegment.recover`.

    ``reason`` is ``""`` when nothing was cut, else ``"torn"`` (last batch runs past the end),
    ``"corrupt"`` (bad size/magic), ``"crc"`` (size < 61 or CRC mismatch), ``"offsets"``
    (offsets going backwards or overflowing the segment's relative range).
    """

    valid_bytes: int
    truncated_bytes: int
    batches: int
    next_offset: int
    reason: str
    first_bad_position: int
    headers: np.ndarray = _NO_HEADERS
    """The header rows (batch kernel layout) of the ``batches`` batches kept, positions
    absolute: what :meth:`LogSegment.scan_headers` of the recovered file yields."""


# --- kernels and collaborators, resolved lazily so this module imports on its own ---------------
_batch_kernel: Any = None


def batch_kernel() -> Any:
    """The batch kernel module (native unless ``REPLICA_CORE_PURE``)."""
    global _batch_kernel
    if _batch_kernel is None:
        from replica_core._fast import load

        _batch_kernel = load("_batch", "batch_py")
    return _batch_kernel


@contextmanager
def viewing(file: Any, position: int, n: int) -> Iterator[Any]:
    """A zero-copy view of ``file[position:position+n]``, released on exit (mmap safety)."""
    view = file.view(position, n)
    try:
        yield view
    finally:
        if isinstance(view, memoryview):
            try:
                view.release()
            except BufferError:
                pass


def _release(view: Any) -> None:
    """The end of :func:`viewing` (without the context manager's generator, on the scan and
    recovery paths)."""
    if isinstance(view, memoryview):
        try:
            view.release()
        except BufferError:
            pass


def last_offsets(headers: np.ndarray) -> np.ndarray:
    """Last offset of each framed batch (v2: base + lastOffsetDelta; legacy: the entry offset)."""
    delta = headers[:, COL_LAST_OFFSET_DELTA]
    return headers[:, COL_BASE_OFFSET] + np.where(headers[:, COL_MAGIC] >= 2, delta, 0)


class LogSegment:
    """A segment: batches appended to ``<base>.log``, sparse ``.index`` and ``.timeindex``.

    Build with :meth:`open`. Indexes open lazily (Kafka's ``LazyIndex``). ``size`` (bytes in
    the ``.log`` file) and ``log_file`` (that file's :class:`MediumFile`) are plain attributes,
    read-only to everyone but the segment.
    """

    __slots__ = ("medium", "dir", "base_offset", "index_interval_bytes", "max_index_size",
                 "roll_jitter_ms", "clock", "suffix", "size", "_offset_index", "_time_index",
                 "created", "_rolling_based_timestamp", "_max_ts", "_bytes_since_last_index_entry",
                 "_next_offset", "closed", "_indexes_preallocated", "log_file", "_tail_offset",
                 "_tail_position", "_tail_last", "__weakref__")

    def __init__(
        self,
        medium: Any,
        dir: str,
        base_offset: int,
        *,
        index_interval_bytes: int = 4096,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        roll_jitter_ms: int = 0,
        clock: Any = None,
        suffix: str = "",
        file_already_exists: bool = False,
        index_files_preallocated: bool = False,
        created_ms: int | None = None,
    ) -> None:
        """``created_ms``: when the segment was made (its files' creation; default: now on
        ``clock``), the start of time-based rolling without a batch timestamp."""
        if clock is None:
            from replica_core.clock import SystemClock

            clock = SystemClock()
        self.medium = medium
        self.dir = dir
        self.base_offset = base_offset = int(base_offset)
        self.index_interval_bytes = int(index_interval_bytes)
        self.max_index_size = int(max_index_size)
        self.roll_jitter_ms = int(roll_jitter_ms)
        self.clock = clock
        self.suffix = suffix
        path = log_file_path(dir, base_offset, suffix)
        try:
            self.log_file = medium.open(path, create=not file_already_exists)
        except FileNotFoundError:
            raise
        except OSError as e:
            raise KafkaStorageError(f"cannot open {path}: {e}") from e
        self.size = int(self.log_file.size())
        self._offset_index: Any = None
        self._time_index: Any = None
        self.created = clock.milliseconds() if created_ms is None else created_ms
        # None until known: the first batch's timestamp drives time-based rolling (§2.7)
        self._rolling_based_timestamp: int | None = None
        self._max_ts: TimestampOffset | None = None
        self._bytes_since_last_index_entry = 0
        self._next_offset: int | None = None if self.size else self.base_offset
        # the last append (see append): none known yet
        self._tail_offset = _NO_TAIL
        self._tail_position = 0
        self._tail_last = -1
        self.closed = False
        # the caller created this new segment's files, the indexes pre-allocated and empty:
        # their objects are built on first use (append, read, flush, close), knowing that
        self._indexes_preallocated = index_files_preallocated
        if index_files_preallocated:
            # what the (empty) time index would say: no timestamp yet, at the base offset
            self._max_ts = TimestampOffset(NO_TIMESTAMP, self.base_offset)
        if not file_already_exists:
            # a new segment gets its (pre-allocated) index files at once; existing ones load lazily
            _ = self.offset_index, self.time_index

    @classmethod
    def for_new_log(cls, medium: Any, dir: str, base_offset: int, index_interval_bytes: int,
                    max_index_size: int, clock: Any, created_ms: int) -> LogSegment:
        """What ``LogSegment(medium, dir, base_offset, index_interval_bytes=...,
        max_index_size=..., clock=clock, file_already_exists=True,
        index_files_preallocated=True, created_ms=created_ms)`` builds — a new log's first
        segment, its files made by the log, no roll jitter, no suffix — with the fields set
        in one step (the first append to most partitions builds one)."""
        if type(dir) is str and dir and dir[-1] != "/":
            path = dir + _LOG_NAME_AT_0 if base_offset == 0 and type(base_offset) is int \
                else f"{dir}/{base_offset:020d}{LOG_FILE_SUFFIX}"
        else:
            path = log_file_path(dir, base_offset)
        try:
            log_file = medium.open(path)
        except FileNotFoundError:
            raise
        except OSError as e:
            raise KafkaStorageError(f"cannot open {path}: {e}") from e
        segment = cls.__new__(cls)
        segment.medium = medium
        segment.dir = dir
        segment.base_offset = base_offset = int(base_offset)
        segment.index_interval_bytes = int(index_interval_bytes)
        segment.max_index_size = int(max_index_size)
        segment.roll_jitter_ms = 0
        segment.clock = clock
        segment.suffix = ""
        segment.log_file = log_file
        segment.size = size = int(log_file.size())
        segment._offset_index = None
        segment._time_index = None
        segment.created = created_ms
        segment._rolling_based_timestamp = None
        segment._max_ts = _NO_TIMESTAMP_AT_0 if base_offset == 0 \
            else TimestampOffset(NO_TIMESTAMP, base_offset)
        segment._bytes_since_last_index_entry = 0
        segment._next_offset = None if size else base_offset
        segment._tail_offset = _NO_TAIL
        segment._tail_position = 0
        segment._tail_last = -1
        segment.closed = False
        segment._indexes_preallocated = True
        return segment

    @classmethod
    def open(
        cls,
        medium: Any,
        dir: str,
        base_offset: int,
        config: Any = None,
        clock: Any = None,
        *,
        file_already_exists: bool = False,
        suffix: str = "",
        index_files_preallocated: bool = False,
        jitter_source: Any = None,
    ) -> LogSegment:
        """Open or create the segment at ``base_offset`` with ``config``'s segment settings
        (a :class:`LogConfig`; ``None`` means Kafka's defaults).

        Its roll jitter (``segment.jitter.ms``) is ``jitter_source(config)`` — the owning log's
        :class:`~replica_core.storage.config.SegmentJitter` — or, without one, a draw seeded by
        the directory's name and ``base_offset`` (never an unseeded generator)."""
        roll_jitter = 0
        if config is not None and config.segment_jitter_ms:
            if jitter_source is None:
                from replica_core.storage.config import DEFAULT_JITTER_SEED, SegmentJitter

                jitter_source = SegmentJitter(
                    DEFAULT_JITTER_SEED, f"{os.path.basename(os.path.normpath(dir))}@{base_offset}")
            roll_jitter = int(jitter_source(config))
        return cls(
            medium,
            dir,
            base_offset,
            index_interval_bytes=config.index_interval_bytes if config is not None else 4096,
            max_index_size=config.segment_index_bytes if config is not None else DEFAULT_MAX_INDEX_SIZE,
            roll_jitter_ms=roll_jitter,
            clock=clock,
            suffix=suffix,
            file_already_exists=file_already_exists,
            index_files_preallocated=index_files_preallocated,
        )

    # --- files --------------------------------------------------------------------------------
    @property
    def log_path(self) -> str:
        return log_file_path(self.dir, self.base_offset, self.suffix)

    @property
    def offset_index_path(self) -> str:
        return offset_index_path(self.dir, self.base_offset, self.suffix)

    @property
    def time_index_path(self) -> str:
        return time_index_path(self.dir, self.base_offset, self.suffix)

    @property
    def txn_index_path(self) -> str:
        return txn_index_path(self.dir, self.base_offset, self.suffix)

    @property
    def offset_index(self) -> Any:
        if self._offset_index is None:
            self._offset_index = OffsetIndex(
                self.medium, self.offset_index_path, self.base_offset, self.max_index_size,
                preallocated=self._indexes_preallocated,
            )
        return self._offset_index

    @property
    def time_index(self) -> Any:
        if self._time_index is None:
            self._time_index = TimeIndex(
                self.medium, self.time_index_path, self.base_offset, self.max_index_size,
                preallocated=self._indexes_preallocated,
            )
        return self._time_index

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size})"

    # --- timestamps -------------------------------------------------------------------------
    @property
    def max_timestamp_and_offset_so_far(self) -> TimestampOffset:
        """Largest batch max timestamp in the segment and the last offset of its batch."""
        if self._max_ts is None:
            ts, off = self.time_index.last_entry()
            self._max_ts = TimestampOffset(int(ts), int(off))
        return self._max_ts

    @property
    def max_timestamp_so_far(self) -> int:
        return self.max_timestamp_and_offset_so_far.timestamp

    def largest_timestamp(self) -> int:
        """The max batch timestamp, −1 when no batch carries one.

        When the time index knows nothing (e.g. it was missing and re-created empty at load),
        the batch headers are scanned once instead of falling back to the file's mtime as Kafka
        does, so timestamp lookups stay correct.
        """
        max_ts = self._max_ts
        if max_ts is None:
            max_ts = self.max_timestamp_and_offset_so_far
        ts = max_ts.timestamp  # max_timestamp_so_far, without its two property calls
        if ts < 0 and self.size > 0:
            best = self._max_ts
            for headers in self.scan_headers(0):
                col = headers[:, COL_MAX_TIMESTAMP]
                r = int(np.argmax(col))
                if int(col[r]) > best.timestamp:
                    best = TimestampOffset(int(col[r]), int(last_offsets(headers[r : r + 1])[0]))
            self._max_ts = best
            ts = best.timestamp
        return ts if ts >= 0 else NO_TIMESTAMP

    def _first_batch_timestamp(self) -> int | None:
        if self._rolling_based_timestamp is None and self.size >= 17:
            header = bytes(self.log_file.read(0, min(self.size, 61)))
            magic = header[16]
            if magic >= 2 and len(header) >= 43:
                self._rolling_based_timestamp = struct.unpack_from(">q", header, 35)[0]
            elif magic == 1 and len(header) >= 26:
                self._rolling_based_timestamp = struct.unpack_from(">q", header, 18)[0]
            else:
                self._rolling_based_timestamp = NO_TIMESTAMP
        return self._rolling_based_timestamp

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        """Record time since the first batch if it has a timestamp, else wall time since creation."""
        ts = self._first_batch_timestamp()
        if ts is not None and ts >= 0:
            return message_timestamp - ts
        return now_ms - self.created

    def first_batch_timestamp(self) -> int:
        ts = self._first_batch_timestamp()
        return ts if ts is not None and ts >= 0 else 2**63 - 1

    # --- rolling (§2.7) -----------------------------------------------------------------------
    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    def should_roll(
        self,
        *,
        max_segment_bytes: int,
        messages_size: int,
        max_segment_ms: int,
        max_timestamp_in_messages: int,
        max_offset_in_messages: int,
        now_ms: int,
    ) -> bool:
        """Roll before appending ``messages_size`` bytes? Size, record time, full index, overflow."""
        return self.roll_needed(messages_size, max_timestamp_in_messages, max_offset_in_messages,
                                now_ms, max_segment_bytes, max_segment_ms)

    def roll_needed(self, messages_size: int, max_timestamp: int, max_offset: int, now_ms: int,
                    max_segment_bytes: int, max_segment_ms: int) -> bool:
        """:meth:`should_roll` with positional arguments (the log's per-append call)."""
        size = self.size
        if size > max_segment_bytes - messages_size:
            return True
        if size > 0:
            ts = self._rolling_based_timestamp
            if ts is None:
                ts = self._first_batch_timestamp()
            # time_waited_for_roll: record time when the first batch has one, else wall time
            waited = max_timestamp - ts if ts is not None and ts >= 0 else now_ms - self.created
            if waited > max_segment_ms - self.roll_jitter_ms:
                return True
        index = self._offset_index
        if self._indexes_preallocated and self._time_index is None:
            # the time index is not built yet, so it is still empty: full only when it has one
            # slot at most (it keeps its last for the roll entry); the offset index, if not
            # built either, is empty too (then with two slots at most, but not full). Neither
            # is built just to be asked.
            return (self.max_index_size < 24 or (index is not None and index.is_full())
                    or not 0 <= max_offset - self.base_offset <= INT32_MAX)
        if index is None:
            index = self.offset_index
        if index.is_full():
            return True
        index = self._time_index
        if index is None:
            index = self.time_index
        return index.is_full() or not 0 <= max_offset - self.base_offset <= INT32_MAX

    # --- append (§1.8) ------------------------------------------------------------------------
    def append(
        self,
        largest_offset: int,
        largest_timestamp: int,
        shallow_offset_of_max_timestamp: int,
        records: bytes | bytearray | memoryview,
    ) -> None:
        """Append already-validated batches; add one sparse index entry if the interval is exceeded.

        The entry maps the LAST offset of this append to the position of its FIRST batch, and
        only once more than ``index.interval.bytes`` have accumulated (KAFKA_SEMANTICS §1.8, §11.1).
        """
        n = records.nbytes if isinstance(records, memoryview) else len(records)
        if n <= 0:
            return
        physical_position = self.size
        if physical_position == 0:
            self._rolling_based_timestamp = largest_timestamp
        if not 0 <= largest_offset - self.base_offset <= INT32_MAX:
            raise LogSegmentOffsetOverflowError(
                f"offset {largest_offset} cannot be stored relative to segment base "
                f"{self.base_offset}"
            )
        # the size is tracked here, so write at it (saves the fstat an append needs)
        try:
            self.log_file.write(physical_position, records)
        except OSError as e:
            # a short write must not leave half a batch behind the valid data
            try:
                self.log_file.truncate(physical_position)
            except OSError:
                pass
            raise KafkaStorageError(f"error appending to {self.log_path}: {e}") from e
        self.size = physical_position + n
        previous_next = self._next_offset
        if previous_next is not None:
            # the last append, for reads of its offsets: every batch before it ends below
            # previous_next; when it is one batch (its size field spans it), that batch's
            # last offset
            self._tail_offset = previous_next
            self._tail_position = physical_position
            self._tail_last = largest_offset \
                if _SIZE_FIELD.unpack_from(records, 8)[0] + LOG_OVERHEAD == n else -1
        else:
            self._tail_offset = _NO_TAIL
        self._next_offset = largest_offset + 1
        max_ts = self._max_ts
        if max_ts is None:
            max_ts = self.max_timestamp_and_offset_so_far
        if largest_timestamp > max_ts.timestamp:
            max_ts = self._max_ts = _new_tuple(
                TimestampOffset, (largest_timestamp, shallow_offset_of_max_timestamp))
        since = self._bytes_since_last_index_entry
        if since > self.index_interval_bytes:
            index = self._offset_index
            if index is None:
                index = self.offset_index
            index.append(largest_offset, physical_position)
            index = self._time_index
            if index is None:
                index = self.time_index
            index.maybe_append(max_ts.timestamp, max_ts.offset)
            since = 0
        self._bytes_since_last_index_entry = since + n

    # --- scanning helpers ------------------------------------------------------------------
    def scan_headers(self, position: int = 0, end: int | None = None) -> Iterator[np.ndarray]:
        """Batch headers from ``position`` to ``end`` in windows; COL_POSITION made absolute.

        Stops silently at a partial tail (§1.3), and, as Kafka's file reader does, at a tail of
        17 bytes or fewer whatever it holds; raises :class:`CorruptRecordError` at a batch with
        a bad size field or magic. CRCs are not checked here.
        """
        kernel = batch_kernel()
        end = self.size if end is None else min(end, self.size)
        pos = position
        window = _SCAN_WINDOW
        while pos < end:
            n = min(end - pos, window)
            view = self.log_file.view(pos, n)  # viewing(self.log_file, pos, n), in line
            try:
                headers, valid, stop = kernel.scan_batches(view, 0, n, False)
            finally:
                _release(view)
            if len(headers):
                headers[:, COL_POSITION] += pos
                yield headers
            if stop == STOP_CORRUPT:
                if end - (pos + valid) <= HEADER_SIZE_UP_TO_MAGIC:
                    return  # too short to hold a batch: FileLogInputStream ends here
                raise CorruptRecordError(
                    f"corrupt batch header at position {pos + valid} of {self.log_path}"
                )
            if stop == STOP_END:
                pos += valid
                continue
            if valid > 0:
                pos += valid
                continue
            if pos + n >= end:
                return  # partial batch at the end
            size_field = bytes(self.log_file.read(pos + 8, 4))
            if len(size_field) < 4:
                return
            need = _SIZE_FIELD.unpack(size_field)[0] + LOG_OVERHEAD
            if need <= n or pos + need > end:
                return
            window = need

    def _search_for_offset_with_size(
        self, target_offset: int, starting_position: int
    ) -> LogOffsetPosition | None:
        """First batch at or after ``starting_position`` whose last offset ≥ target.

        Kafka's ``FileRecords.searchForOffsetWithSize``: the batch kernel frames a small window
        (the target is normally within ``index.interval.bytes`` of the index entry) read with
        one ``pread``; the window grows when a single batch does not fit in it.
        """
        found = self._find_batch(target_offset, starting_position)
        return None if found is None else LogOffsetPosition(found[0], found[1], found[2])

    def _find_batch(
        self, target_offset: int, starting_position: int
    ) -> tuple[int, int, int, int, bytes] | None:
        """:meth:`_search_for_offset_with_size` as (last offset, position, size, window
        position, window): the bytes it has just read from the file at the window position,
        which hold the batch's header and often the whole batch."""
        find = batch_kernel().find_batch
        read = self.log_file.read
        end = self.size
        pos = starting_position
        window = max(2 * self.index_interval_bytes, 8192)
        while pos < end:
            n = min(end - pos, window)
            buf = read(pos, n)
            at, size, last, valid, stop = find(buf, 0, n, target_offset)
            if at >= 0:
                return last, pos + at, size, pos, buf
            if stop == STOP_CORRUPT:
                if end - (pos + valid) <= HEADER_SIZE_UP_TO_MAGIC:
                    return None  # too short to hold a batch (see scan_headers)
                raise CorruptRecordError(
                    f"corrupt batch header at position {pos + valid} of {self.log_path}"
                )
            if valid > 0:
                pos += valid
                continue
            if stop == STOP_END or pos + n >= end:
                return None  # nothing more, or a partial batch at the end (§1.3)
            need = _SIZE_FIELD.unpack_from(buf, 8)[0] + LOG_OVERHEAD
            if need <= n or pos + need > end:
                return None
            window = need
        return None

    def _index_position(self, offset: int) -> int:
        """The offset index's floor position for ``offset``. A new segment's pre-allocated
        index not built yet holds no entries: its lookup answers position 0 without building
        it."""
        index = self._offset_index
        if index is not None:
            return int(index.lookup(offset)[1])
        if self._indexes_preallocated:
            return 0
        return int(self.offset_index.lookup(offset)[1])

    def translate_offset(self, offset: int, starting_position: int = 0) -> LogOffsetPosition | None:
        """Offset-index floor lookup, then a header walk to the batch containing ``offset`` (§3.3)."""
        return self._search_for_offset_with_size(
            offset, max(self._index_position(offset), starting_position))

    # --- read (§3.3) --------------------------------------------------------------------------
    def read(
        self,
        start_offset: int,
        max_size: int,
        max_position: int | None = None,
        min_one_message: bool = False,
    ) -> FetchDataInfo | None:
        """Bytes from the batch containing ``start_offset``; ``None`` if no batch reaches it.

        ``max_position`` bounds the read (``None`` = segment size; negative = position unknown,
        which yields empty records). ``min_one_message`` lets the first batch exceed ``max_size``.
        The offset is translated as :meth:`translate_offset` does; records the header walk's
        window has just read from the file are taken from it, the rest read from the file. An
        offset of the segment's last append (a follower reading the newest batch) gives the
        same answer from where that append began: a one-batch append is that batch, without
        the index lookup or the walk.
        """
        if max_size < 0:
            raise ValueError(f"invalid max size {max_size} for read from {self.log_path}")
        if start_offset >= self._tail_offset and self._tail_last >= 0:
            # an offset at or after the last append, itself one batch (a follower's usual
            # read: the newest batch): that batch holds it, or no batch reaches it - what the
            # walk below finds, without the walk (the records are read from the file)
            if start_offset > self._tail_last:
                return None
            start_position = self._tail_position
            batch_size = self.size - start_position
            window = None
        else:
            # the walk from the index's floor position; for an offset of a last append of
            # several batches, from where that append began (the batches before it end below
            # the offset and the floor is not past it: the walk finds the same batch)
            found = self._find_batch(start_offset, self._tail_position
                                     if start_offset >= self._tail_offset
                                     else self._index_position(start_offset))
            if found is None:
                return None
            _, start_position, batch_size, window_position, window = found
        metadata = _new_tuple(LogOffsetMetadata, (start_offset, self.base_offset, start_position))
        adjusted = max(max_size, batch_size) if min_one_message else max_size
        if adjusted == 0 or (max_position is not None and max_position < 0):
            return FetchDataInfo(metadata, b"")
        limit = self.size if max_position is None else max_position
        fetch_size = min(limit - start_position, adjusted)
        if fetch_size <= 0:
            records = b""
        elif window is None:  # the last append's one batch
            records = self.log_file.read(start_position, fetch_size)
        else:
            at = start_position - window_position
            if at + fetch_size <= len(window):
                records = window[at:at + fetch_size]
            else:
                records = self.log_file.read(start_position, fetch_size)
        return _new_tuple(FetchDataInfo, (metadata, records, adjusted < batch_size))

    def read_next_offset(self) -> int:
        """The offset after the last batch (base offset when empty)."""
        if self._next_offset is not None:
            return self._next_offset
        position = int(self.offset_index.last_entry()[1])
        next_offset = self.base_offset
        for headers in self.scan_headers(position):
            next_offset = int(last_offsets(headers[-1:])[0]) + 1
        self._next_offset = next_offset
        return next_offset

    def tail_is_clean(self) -> bool:
        """Do the batches framed from the last offset-index entry end exactly at the end of the
        file? (No partial batch, junk or corrupt frame after the last whole batch.)

        What a clean shutdown promises of the active segment; appending after such a tail would
        bury it between batches. Caches the next offset when the tail is clean (the same walk
        :meth:`read_next_offset` does). Never raises for what it finds.
        """
        kernel = batch_kernel()
        end = self.size
        pos = int(self.offset_index.last_entry()[1]) if end else 0
        if not 0 <= pos <= end:
            return False
        next_offset = self.base_offset
        window = _SCAN_WINDOW
        while pos < end:
            n = min(end - pos, window)
            view = self.log_file.view(pos, n)  # viewing(self.log_file, pos, n), in line
            try:
                headers, valid, stop = kernel.scan_batches(view, 0, n, False)
            finally:
                _release(view)
            if len(headers):
                next_offset = int(last_offsets(headers[-1:])[0]) + 1
            if stop == STOP_CORRUPT or (stop == STOP_PARTIAL and pos + n >= end):
                return False
            pos += valid
            if stop == STOP_END or valid > 0:
                continue  # the whole window, or the window cut a batch: read on from it
            # one batch larger than the window: widen the window to it
            need = _SIZE_FIELD.unpack(bytes(self.log_file.read(pos + 8, 4)))[0] + LOG_OVERHEAD
            if need <= n or pos + need > end:
                return False
            window = need
        self._next_offset = next_offset
        return True

    def has_overflow(self) -> bool:
        next_offset = self.read_next_offset()
        return next_offset > self.base_offset and not self.can_convert_to_relative_offset(
            next_offset - 1
        )

    # --- recovery (§5.4) -----------------------------------------------------------------
    def recover(self, leader_epoch_cache: Any = None) -> SegmentRecovery:
        """Rebuild both indexes from the batches and cut the file at the first bad batch.

        A batch is bad when it is torn (runs past the end), has a bad size/magic, is shorter
        than 61 bytes or fails its CRC, or (our addition) its offsets go backwards or overflow
        the segment's relative range. New leader epochs seen in v2 batches are assigned to
        ``leader_epoch_cache``.
        """
        kernel = batch_kernel()
        self._max_ts = None
        size = self.size
        if size:
            view = self.log_file.view(0, size)  # viewing(self.log_file, 0, size), in line
            try:
                headers, valid, stop = kernel.scan_batches(view, 0, size, True)
            finally:
                _release(view)
        else:
            headers, valid, stop = _NO_HEADERS, 0, STOP_END
        reason = {STOP_END: "", STOP_PARTIAL: "torn", STOP_CORRUPT: "corrupt"}[int(stop)]
        if reason == "corrupt" and size - valid <= HEADER_SIZE_UP_TO_MAGIC:
            reason = "torn"  # too short to be a batch at all (see scan_headers)
        first_bad = valid if reason else -1
        cut, why, offset_entries, time_entries, max_ts, max_ts_offset, last = (
            _recovery.recovery_plan(headers, self.base_offset, self.index_interval_bytes,
                                    self.max_index_size))
        if why != _recovery.CUT_NONE:
            reason = "crc" if why == _recovery.CUT_CRC else "offsets"
            first_bad = valid = int(headers[cut, COL_POSITION])
        if cut:
            self._max_ts = TimestampOffset(max_ts, max_ts_offset)
        self._rewrite_indexes(offset_entries, time_entries)
        if leader_epoch_cache is not None and cut:
            latest = leader_epoch_cache.latest_epoch
            for epoch, base in _recovery.new_epochs(headers, cut,
                                                    -1 if latest is None else int(latest)):
                leader_epoch_cache.assign(epoch, base)

        truncated = size - valid
        if truncated > 0:
            self.log_file.truncate(valid)
            self.size = valid
        self._next_offset = last + 1
        self._tail_offset = _NO_TAIL  # the file may be cut
        self._bytes_since_last_index_entry = 0
        return SegmentRecovery(
            valid, truncated, cut, self._next_offset, reason if truncated > 0 else "", first_bad,
            headers[:cut],
        )

    def _rewrite_indexes(self, offset_entries: bytes, time_entries: bytes) -> None:
        """Replace both index files with the entries recovery derives (§5.4 step 3): what
        Kafka's loop of ``append``/``maybeAppend`` calls leaves behind (reset, one entry per
        qualifying batch, the final time entry, trim), computed by the recovery kernel and
        written in one write per file. The index objects are built over the handles that wrote
        them (what opening the files again gives: every entry in the file, the last one known),
        as Kafka's recovery leaves its indexes loaded."""
        medium = self.medium
        self.drop_indexes()
        self._indexes_preallocated = False  # the files hold these entries now
        for attr, path, data, kind in (
            ("_offset_index", self.offset_index_path, offset_entries, OffsetIndex),
            ("_time_index", self.time_index_path, time_entries, TimeIndex),
        ):
            f = medium.open(path, create=True)
            try:
                f.truncate(len(data))
                if data:
                    f.write(0, data)
            except BaseException:
                f.close()
                raise
            setattr(self, attr, kind.over_written_file(medium, path, self.base_offset,
                                                        self.max_index_size, f, data))

    def drop_indexes(self) -> None:
        """Release both index objects without trimming their files; they are opened again
        from the files when next used (Kafka's ``LazyIndex`` not loaded yet)."""
        for attr in ("_offset_index", "_time_index"):
            index = getattr(self, attr)
            if index is not None:
                index.close_handler()
                setattr(self, attr, None)

    # --- truncation (§4.1) --------------------------------------------------------------
    def truncate_to(self, offset: int) -> int:
        """Drop every batch whose last offset ≥ ``offset``; returns bytes removed.

        The cut is at the START of the first such batch; indexes are truncated at ``offset`` and
        re-expanded to full size because the segment becomes the active one again.
        """
        mapping = self.translate_offset(offset)
        oi, ti = self.offset_index, self.time_index
        oi.truncate_to(offset)
        ti.truncate_to(offset)
        oi.resize(self.max_index_size)
        ti.resize(self.max_index_size)
        truncated = 0
        if mapping is not None and mapping.position < self.size:
            truncated = self.size - mapping.position
            self.log_file.truncate(mapping.position)
            self.size = mapping.position
            self._next_offset = None
            self._tail_offset = _NO_TAIL  # the last append may be cut
        if self.size == 0:
            self.created = self.clock.milliseconds()
            self._rolling_based_timestamp = None
            self._next_offset = self.base_offset
        self._bytes_since_last_index_entry = 0
        if self._max_ts is None or self._max_ts.timestamp >= 0:
            self._max_ts = self._read_largest_timestamp()
        return truncated

    def _read_largest_timestamp(self) -> TimestampOffset:
        ts, off = self.time_index.last_entry()
        last_entry = TimestampOffset(int(ts), int(off))
        position = int(self.offset_index.lookup(last_entry.offset)[1])
        best = last_entry
        for headers in self.scan_headers(position):
            max_ts = headers[:, COL_MAX_TIMESTAMP]
            r = int(np.argmax(max_ts))
            if int(max_ts[r]) > best.timestamp:
                best = TimestampOffset(int(max_ts[r]), int(last_offsets(headers[r : r + 1])[0]))
        return best

    # --- lifecycle ----------------------------------------------------------------------
    def on_become_inactive(self) -> None:
        """At roll: write the final time-index entry and trim both indexes (§1.7)."""
        max_ts = self.max_timestamp_and_offset_so_far
        self.time_index.maybe_append(max_ts.timestamp, max_ts.offset, skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()

    def resize_indexes(self, size: int) -> None:
        self.offset_index.resize(size)
        self.time_index.resize(size)

    def flush(self) -> None:
        """fsync the log and both indexes."""
        self.log_file.flush()
        if self._indexes_preallocated:
            _ = self.offset_index, self.time_index  # their files exist: fsync them too
        if self._offset_index is not None:
            self._offset_index.flush()
        if self._time_index is not None:
            self._time_index.flush()

    def close(self) -> None:
        """Final time-index entry, trim indexes (done by their ``close``), close the file."""
        if self.closed:
            return
        if self._indexes_preallocated:
            _ = self.offset_index, self.time_index  # their files exist: trim them too
        if self._max_ts is not None:
            try:
                self.time_index.maybe_append(
                    self._max_ts.timestamp, self._max_ts.offset, skip_full_check=True
                )
            except Exception:  # noqa: BLE001 - Kafka swallows this too (Utils.swallow)
                pass
        for index in (self._offset_index, self._time_index):
            if index is not None:
                index.close()
        self.log_file.close()
        self.closed = True

    def close_handlers(self) -> None:
        """Close without touching index contents (used before deleting)."""
        if self.closed:
            return
        for index in (self._offset_index, self._time_index):
            if index is not None:
                try:
                    index.close()
                except Exception:  # noqa: BLE001
                    pass
        self.log_file.close()
        self.closed = True

    def _paths(self, suffix: str) -> list[str]:
        return [
            log_file_path(self.dir, self.base_offset, suffix),
            offset_index_path(self.dir, self.base_offset, suffix),
            time_index_path(self.dir, self.base_offset, suffix),
            txn_index_path(self.dir, self.base_offset, suffix),
        ]

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename all four files, e.g. ``""`` → ``".deleted"``; missing index files are skipped.

        Handles stay open where the medium allows, so the caller closes before renaming.
        """
        if self.suffix != old_suffix:
            raise KafkaStorageError(f"{self} has suffix {self.suffix!r}, not {old_suffix!r}")
        for src, dst in zip(self._paths(old_suffix), self._paths(new_suffix), strict=True):
            if self.medium.exists(src):
                self.medium.rename(src, dst)
        self.suffix = new_suffix

    def delete(self) -> None:
        """Close and remove every file of this segment (with whatever suffix it has now).

        Kafka renames a segment to ``.deleted`` and removes it ``file.delete.delay.ms`` later so
        that in-flight reads of the old files finish. Reads here return copies, so the log
        renames and then calls this at once (the step model); a crash in between leaves
        ``.deleted`` files that the loader removes.
        """
        self.close_handlers()
        for path in self._paths(self.suffix):
            if self.medium.exists(path):
                self.medium.remove(path)

    def deleted(self) -> bool:
        return not any(self.medium.exists(p) for p in self._paths(self.suffix))


class LogSegments:
    """The segments of one log keyed by base offset, in order (Kafka's ``LogSegments``).

    ``last`` — the segment with the highest base offset (the active one), None when empty — is
    a plain attribute, kept by every change (read on every append and by every log check)."""

    def __init__(self, segment: LogSegment | None = None) -> None:
        """Empty, or holding ``segment``."""
        if segment is None:
            self._bases: list[int] = []
            self._by_base: dict[int, LogSegment] = {}
        else:
            self._bases = [segment.base_offset]
            self._by_base = {segment.base_offset: segment}
        self.last: LogSegment | None = segment

    def add(self, segment: LogSegment) -> LogSegment | None:
        """Insert, replacing any segment with the same base; returns the replaced one."""
        base = segment.base_offset
        old = self._by_base.get(base)
        if old is None:
            bisect.insort(self._bases, base)
        self._by_base[base] = segment
        if base == self._bases[-1]:
            self.last = segment
        return old

    def remove(self, base_offset: int) -> LogSegment | None:
        seg = self._by_base.pop(base_offset, None)
        if seg is not None:
            bases = self._bases
            bases.remove(base_offset)
            if seg is self.last:
                self.last = self._by_base[bases[-1]] if bases else None
        return seg

    def clear(self) -> None:
        self._bases.clear()
        self._by_base.clear()
        self.last = None

    def close(self) -> None:
        for seg in self:
            seg.close()

    def __len__(self) -> int:
        return len(self._bases)

    def __bool__(self) -> bool:
        return bool(self._bases)

    def __iter__(self) -> Iterator[LogSegment]:
        by_base = self._by_base
        return iter([by_base[b] for b in self._bases])

    def __contains__(self, base_offset: object) -> bool:
        return base_offset in self._by_base

    def get(self, base_offset: int) -> LogSegment | None:
        return self._by_base.get(base_offset)

    def base_offsets(self) -> list[int]:
        return list(self._bases)

    @property
    def first(self) -> LogSegment | None:
        return self._by_base[self._bases[0]] if self._bases else None

    def floor(self, offset: int) -> LogSegment | None:
        """The segment with the largest base offset ≤ ``offset``."""
        i = bisect.bisect_right(self._bases, offset)
        return self._by_base[self._bases[i - 1]] if i else None

    def higher(self, base_offset: int) -> LogSegment | None:
        i = bisect.bisect_right(self._bases, base_offset)
        return self._by_base[self._bases[i]] if i < len(self._bases) else None

    def values(self, from_offset: int, to_offset: int) -> list[LogSegment]:
        """Segments from the one containing ``from_offset`` up to those below ``to_offset``."""
        if from_offset == to_offset:
            return []
        if to_offset < from_offset:
            raise ValueError(f"invalid segment range [{from_offset}, {to_offset})")
        i = bisect.bisect_right(self._bases, from_offset)
        start = i - 1 if i else 0
        stop = bisect.bisect_left(self._bases, to_offset)
        return [self._by_base[b] for b in self._bases[start:stop]]

    def after(self, base_offset: int) -> list[LogSegment]:
        """Segments with base offset strictly greater than ``base_offset``."""
        i = bisect.bisect_right(self._bases, base_offset)
        return [self._by_base[b] for b in self._bases[i:]]


__all__ = [
    "FetchDataInfo",
    "LogOffsetMetadata",
    "LogOffsetPosition",
    "LogSegment",
    "LogSegments",
    "SegmentRecovery",
    "TimestampOffset",
]
