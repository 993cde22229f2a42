"""One partition's log: segments, append, read, truncation, flush and the high watermark.

Kafka's ``UnifiedLog`` + ``LocalLog`` without tiered storage or transactions (whose producer-state
fields are kept, but no transaction index is written).
KAFKA_SEMANTICS §2.1-2.8 (append, roll, flush), §3.2 (read), §4.1-4.2 (truncation), §5.2 (open).

Producer state (idempotent producers, :mod:`~replica_core.storage.producer_state`) is kept as
``UnifiedLog`` keeps it: loaded at open (the newest ``.snapshot``, then the log replayed from it
after an unclean shutdown), checked and updated by every append of a batch with a producer id
(a leader's retried batch that matches one of its producer's last five is answered with its
original offsets and not written again), snapshotted at each roll and at a clean close,
truncated with the log, and its snapshots deleted with their segments. Two differences, both
on purpose: a leader checks sequences and epochs *before* rolling or touching the epoch cache
(Kafka rolls first), so a rejected or duplicate batch changes nothing on disk; and a log created
empty builds its producer state only when something needs it (a batch with a producer id, a
roll, a truncation, a clean close), and appends without a producer id never touch it. Kafka
moves the state's end offset on every append; here it is brought to the log end offset when it
is next read, which gives the same snapshots.

Step model: Kafka's background work runs inline. Rolling flushes the old segments at once
(Kafka schedules that flush), and segments deleted by truncation are renamed to ``.deleted`` and
then removed immediately instead of after ``file.delete.delay.ms`` (reads here return copies of
the bytes, so nothing can still be reading the files; a crash between the two steps leaves
``.deleted`` files, which the loader removes). Retention's deletions keep Kafka's delay: the
owner (``LogManager``) removes the ``.deleted`` files when it is due. Truncation fsyncs the cut
segment and the directory so that a power failure cannot bring truncated batches back.

Not thread-safe: one owner calls a ``Log`` at a time (``LogManager`` loads logs in parallel, but
each log belongs to one thread).
"""
from __future__ import annotations

import functools
import os
import re
import struct
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from replica_core.errors import (
    CorruptCheckpointError,
    InvalidRecordError,
    KafkaStorageError,
    LogSegmentOffsetOverflowError,
    OffsetOutOfRangeError,
    OffsetsOutOfOrderError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from replica_core.storage import retention
from replica_core.storage.checkpoint import LeaderEpochCheckpointFile
from replica_core.storage.config import LogConfig
from replica_core.storage.leader_epoch import LeaderEpochCache
from replica_core.storage.loader import LogLoader, RecoveryReport, trim_epoch_cache
from replica_core.storage.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    BatchInfo,
    ProducerStateEntry,
    ProducerStateManager,
    ProducerStateUpdate,
    analyze_and_validate_producer_state,
    apply_in_sequence,
    apply_producer_state_update,
    delete_producer_snapshots,
    in_sequence_entry,
    increment_sequence,
    rebuild_producer_state,
)
from replica_core.storage.producer_state import _expiration_ms as _check_expiration_ms
from replica_core.storage.segment import (
    COL_ATTRIBUTES,
    COL_BASE_OFFSET,
    COL_BASE_SEQUENCE,
    COL_LAST_OFFSET_DELTA,
    COL_MAGIC,
    COL_MAX_TIMESTAMP,
    COL_PARTITION_LEADER_EPOCH,
    COL_POSITION,
    COL_PRODUCER_EPOCH,
    COL_PRODUCER_ID,
    COL_SIZE,
    DELETED_FILE_SUFFIX,
    INDEX_FILE_SUFFIX,
    INT32_MAX,
    LOG_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    FetchDataInfo,
    LogOffsetMetadata,
    LogSegment,
    LogSegments,
    _new_tuple,
    batch_kernel,
    filename_prefix,
    last_offsets,
    log_file_path,
    offset_index_path,
    time_index_path,
    txn_index_path,
)

__all__ = ["Log", "TimestampAndOffset", "parse_topic_partition", "LEADER_EPOCH_CHECKPOINT_FILE"]

LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
UNKNOWN_OFFSET = -1

# ListOffsets special timestamps (ListOffsetsRequest)
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4

_LONG_MAX = 2**63 - 1
_FIRST_HEADER = struct.Struct(">qiib")  # baseOffset, batchLength, partitionLeaderEpoch, magic
# a v2 batch header from its attributes (offset 21) to its base sequence (offset 53):
# attributes, lastOffsetDelta, baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence
_PRODUCER_FIELDS = struct.Struct(">hiqqqhi")
_PRODUCER_ID_AT = 43  # a v2 batch's producer id; its first byte is < 0x80 exactly when id >= 0
_TRANSACTIONAL_FLAG = 0x10
_CONTROL_FLAG = 0x20
_TOPIC_PARTITION = re.compile(r"^(.+)-(\d+)$")
_DIR_SUFFIXES = ("-delete", "-future", "-stray")
_ISOLATIONS = ("log_end", "high_watermark")

_records_module: Any = None


def _records() -> Any:
    global _records_module
    if _records_module is None:
        import replica_core.records as module

        _records_module = module
    return _records_module


def parse_topic_partition(dir_name: str) -> tuple[str, int]:
    """``topic-N`` (also ``topic-N.<uuid>-delete`` / ``-future`` / ``-stray``) → (topic, N)."""
    return _parse_topic_partition(os.fspath(dir_name))


@functools.lru_cache(maxsize=65_536)  # loading a log dir parses each name three times
def _parse_topic_partition(dir_name: str) -> tuple[str, int]:
    name = os.path.basename(os.path.normpath(dir_name))
    for suffix in _DIR_SUFFIXES:
        if name.endswith(suffix) and "." in name:
            name = name[: name.rindex(".")]
            break
    m = _TOPIC_PARTITION.match(name)
    if not m:
        raise KafkaStorageError(
            f"found directory {dir_name!r}, which is not in the form of topic-partition"
        )
    return m.group(1), int(m.group(2))


class TimestampAndOffset(NamedTuple):
    """The answer to a ListOffsets lookup (``leader_epoch`` None when unknown)."""

    timestamp: int
    offset: int
    leader_epoch: int | None


def _open_epoch_cache(medium: Any, dir: str) -> tuple[Any, str | None]:
    """The partition's leader epoch cache; a corrupt checkpoint is reset (returned warning)."""
    path = _join(dir, LEADER_EPOCH_CHECKPOINT_FILE)
    checkpoint = LeaderEpochCheckpointFile(medium, path)
    try:
        return LeaderEpochCache(checkpoint), None
    except (CorruptCheckpointError, ValueError) as e:
        # Kafka takes the directory offline here; a rebuilt cache lets the log load instead.
        medium.write_atomic(path, b"0\n0\n")
        return LeaderEpochCache(LeaderEpochCheckpointFile(medium, path)), (
            f"leader-epoch-checkpoint unreadable ({e}); reset to empty"
        )


def _recovered_epoch_cache(medium: Any, dir: str, log_end_offset: int,
                           log_start_offset: int) -> LeaderEpochCache | None:
    """The epoch cache of an untouched directory (:func:`_untouched_base`) as loading it after
    an unclean shutdown leaves it: the checkpoint read, then trimmed to the log as
    :meth:`LogLoader.load` trims it (:func:`~replica_core.storage.loader.trim_epoch_cache`). None
    when the checkpoint is unreadable (the long way resets it and reports that)."""
    checkpoint = LeaderEpochCheckpointFile(medium, _join(dir, LEADER_EPOCH_CHECKPOINT_FILE),
                                           exists=True)
    try:
        cache = LeaderEpochCache(checkpoint)
    except (CorruptCheckpointError, ValueError):
        return None
    trim_epoch_cache(cache, log_end_offset, log_start_offset)
    return cache


class _InSequence(NamedTuple):
    """A batch :func:`~replica_core.storage.producer_state.in_sequence_entry` accepted: what
    :func:`~replica_core.storage.producer_state.apply_in_sequence` needs once it is written."""

    entry: ProducerStateEntry
    producer_epoch: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int

    @property
    def duplicate(self) -> None:
        return None


def _producer_batch(buf: Any, pos: int) -> Any:
    """The producer-state view of the v2 batch at ``pos`` of an append buffer whose offsets are
    final: a :class:`BatchInfo` from its header, or the batch itself for a control batch (its
    end-transaction marker is in its record)."""
    base = _FIRST_HEADER.unpack_from(buf, pos)[0]
    attrs, delta, _, max_ts, pid, epoch, seq = _PRODUCER_FIELDS.unpack_from(buf, pos + 21)
    if attrs & _CONTROL_FLAG:
        return _records().batch_at(buf, pos)
    return BatchInfo(pid, epoch, seq, base, base + delta, max_ts,
                     bool(attrs & _TRANSACTIONAL_FLAG), False)


def _producer_rows(headers: np.ndarray) -> np.ndarray:
    """The header rows of v2 batches that carry a producer id."""
    return headers[(headers[:, COL_MAGIC] >= 2) & (headers[:, COL_PRODUCER_ID] >= 0)]


def _row_batch(row: list[int], read: Callable[[int, int], Any]) -> Any:
    """:func:`_producer_batch` for a header row (``read(position, size)`` gives the bytes of a
    control batch)."""
    attrs = row[COL_ATTRIBUTES]
    if attrs & _CONTROL_FLAG:
        return _records().batch_at(read(row[COL_POSITION], row[COL_SIZE]))
    base = row[COL_BASE_OFFSET]
    return BatchInfo(row[COL_PRODUCER_ID], row[COL_PRODUCER_EPOCH], row[COL_BASE_SEQUENCE], base,
                     base + row[COL_LAST_OFFSET_DELTA], row[COL_MAX_TIMESTAMP],
                     bool(attrs & _TRANSACTIONAL_FLAG), False)


def _segment_producer_batches(segments: LogSegments, base: int, start: int,
                              end: int) -> Any:
    """The batches with a producer id of the segment at ``base``, from the one holding
    ``start`` until one starts at or past ``end`` (what ``rebuild_producer_state`` reads)."""
    seg = segments.get(base)
    if seg is None:
        return
    position = int(seg.offset_index.lookup(start)[1]) if start > base else 0

    def read(pos: int, size: int) -> bytes:
        return bytes(seg.log_file.read(pos, size))

    for headers in seg.scan_headers(position):
        for row in _producer_rows(headers).tolist():
            yield _row_batch(row, read)
        if int(headers[-1, COL_BASE_OFFSET]) >= end:
            return


def _loaded_producer_batches(segments: LogSegments,
                             scanned: dict[int, tuple[LogSegment, np.ndarray]], base: int,
                             start: int, end: int) -> Any:
    """:func:`_segment_producer_batches` at load: a segment the loader has just recovered is
    not read again, its batches taken from the header rows its recovery scan found (the rows
    of the batches ending in ``[start, end)``, those the rebuild keeps of what that reads)."""
    seg = segments.get(base)
    hit = scanned.get(base)
    if seg is None or hit is None or hit[0] is not seg:
        return _segment_producer_batches(segments, base, start, end)
    if start > base:
        _ = seg.offset_index  # opened as the read from inside the segment would open it
    scanned_rows = hit[1]
    if len(scanned_rows) <= 64:  # the usual few batches: filtered as Python rows
        rows = [row for row in scanned_rows.tolist()
                if row[COL_MAGIC] >= 2 and row[COL_PRODUCER_ID] >= 0
                and start <= row[COL_BASE_OFFSET] + row[COL_LAST_OFFSET_DELTA] < end]
    else:
        headers = _producer_rows(scanned_rows)
        last = headers[:, COL_BASE_OFFSET] + headers[:, COL_LAST_OFFSET_DELTA]  # v2 rows only
        rows = headers[(last >= start) & (last < end)].tolist()
    if not rows:
        return ()
    log_file = seg.log_file

    def read(pos: int, size: int) -> bytes:
        return bytes(log_file.read(pos, size))

    return (_row_batch(row, read) for row in rows)


def _answer_duplicate(info: Any, update: ProducerStateUpdate) -> Any:
    """A retried batch already in the log: the append's answer carries the offsets (and, as
    ``log_append_time``, the timestamp) it was first written with (``UnifiedLog.append``)."""
    dup = update.duplicate
    assert dup is not None
    info.first_offset = dup.first_offset
    info.last_offset = dup.last_offset
    info.log_append_time = dup.timestamp
    return info


def _created_producer_state(medium: Any, dir: str, clock: Any, start: int, clean: bool,
                            expiration_ms: int) -> ProducerStateManager | None:
    """What loading a new, empty directory leaves of the producer state, when that is more
    than nothing: a log starting above 0 after a clean shutdown gets the empty snapshot at its
    start that ``rebuildProducerState`` writes when it finds no snapshot (the upgrade path).
    Otherwise None: the log makes its state when first needed, with no file."""
    if not (clean and start > 0):
        return None
    psm = ProducerStateManager(medium, dir, clock, producer_id_expiration_ms=expiration_ms,
                               list_existing=False)
    rebuild_producer_state(psm, segment_base_offsets=[start], read_batches=lambda *a: (),
                           log_start_offset=start, last_offset=start,
                           reload_from_clean_shutdown=True)
    return psm


def _config_values(config: Any) -> tuple[Any, ...]:
    """What :meth:`Log.update_config` caches of a config, in its attribute order."""
    timestamp_type = str(config.message_timestamp_type)
    log_append_time = timestamp_type == "LogAppendTime"
    before, after = int(config.timestamp_before_max_ms), int(config.timestamp_after_max_ms)
    compacted = bool(config.compact)
    max_message_bytes = int(config.max_message_bytes)
    compression = str(config.compression_type)
    # the topic half of the fused leader-append call (records.analyze_validate_and_assign);
    # None when the compression type is not a codec (the general path reports it)
    target = _records().fast_target_codec(compression)
    fast_topic = None if target is None else (
        log_append_time, before, after, target, compacted, max_message_bytes)
    return (int(config.segment_bytes), int(config.max_segment_ms), max_message_bytes,
            int(config.flush_messages), int(config.flush_ms), compacted, timestamp_type,
            log_append_time, before, after, compression, fast_topic)


# id(config) -> (config, its values) for LogConfig objects (frozen), shared by every log
_CONFIG_VALUES: dict[int, tuple[Any, tuple[Any, ...]]] = {}


def _cached_config_values(config: Any) -> tuple[Any, ...]:
    """:func:`_config_values`, worked out once per :class:`LogConfig` (frozen: its values never
    change); other config objects are read each time."""
    hit = _CONFIG_VALUES.get(id(config))
    if hit is not None and hit[0] is config:
        return hit[1]
    values = _config_values(config)
    if type(config) is LogConfig:
        if len(_CONFIG_VALUES) >= 256:
            _CONFIG_VALUES.clear()
        _CONFIG_VALUES[id(config)] = (config, values)
    return values


def _join(dir: str, name: str) -> str:
    """``os.path.join(dir, name)`` for a plain file name (no separator in ``name``)."""
    return dir + name if not dir or dir[-1] == "/" else dir + "/" + name


# what a new log at offset 0 starts with (immutable, shared): its high watermark (the offset
# only) and its log end (offset 0 at the start of segment 0)
_OFFSET_0_ONLY = LogOffsetMetadata(0)
_OFFSET_0_AT_0 = LogOffsetMetadata(0, 0, 0)

_new_log = object.__new__  # a Log whose fields the caller sets, all of them (Log._create_at_0)

# (log start offset, segment.index.bytes) -> the files of a new partition directory
_NEW_DIR_FILES: dict[tuple[int, int], tuple[tuple[str, int], ...]] = {}


def _new_dir_files(base_offset: int, index_bytes: int) -> tuple[tuple[str, int], ...]:
    """A new partition directory's files, in the order Kafka creates them: the leader epoch
    checkpoint (empty), then the first segment's ``.log`` (empty) and its pre-allocated
    ``.index`` and ``.timeindex`` (whole entries of ``segment.index.bytes``); one tuple shared
    by every directory of that shape."""
    key = (base_offset, index_bytes)
    files = _NEW_DIR_FILES.get(key)
    if files is None:
        prefix = filename_prefix(base_offset)
        files = ((LEADER_EPOCH_CHECKPOINT_FILE, 0), (prefix + LOG_FILE_SUFFIX, 0),
                 (prefix + INDEX_FILE_SUFFIX, index_bytes - index_bytes % 8),
                 (prefix + TIME_INDEX_FILE_SUFFIX, index_bytes - index_bytes % 12))
        if len(_NEW_DIR_FILES) >= 256:
            _NEW_DIR_FILES.clear()
        _NEW_DIR_FILES[key] = files
    return files


def _untouched_base(files: tuple[tuple[str, int], ...] | None, index_bytes: int) -> int | None:
    """The base offset of the one segment of a partition directory whose ``files`` (from
    :meth:`~replica_core.storage.medium.Medium.untouched_files`) are exactly what
    :meth:`Log._create` makes with ``segment.index.bytes`` = ``index_bytes``; else None."""
    if files is None or len(files) != 4 or index_bytes < 12:
        return None
    name = files[1][0]
    prefix = name[:-len(LOG_FILE_SUFFIX)]
    if not (name.endswith(LOG_FILE_SUFFIX) and len(prefix) == 20 and prefix.isdigit()
            and prefix.isascii()):
        return None
    base = int(prefix)
    return base if files == _new_dir_files(base, index_bytes) else None


class _NewLogSegments(LogSegments):
    """The segments of a log just created empty (:meth:`Log._create`): its one segment's files
    are on the medium already, and the :class:`LogSegment` object is built — as it would have
    been when the log was created (same config, creation time, jitter draw) — the first time
    anything asks the segments for anything. The object then turns into a plain
    :class:`LogSegments` (its class is switched), so later calls cost nothing extra.

    Every method and property of :class:`LogSegments` is wrapped here (generated below), so one
    added there is covered too; so is its attribute ``last``.
    """

    def __init__(self, medium: Any, dir: str, base_offset: int, config: Any, clock: Any,
                 jitter_source: Any, created_ms: int) -> None:
        # no containers yet: LogSegments.__init__ runs when the segment is made
        self._pending = (medium, dir, base_offset, config, clock, jitter_source, created_ms)
        self._owner: Log | None = None  # the log holding these segments (its segments_made)

    @property
    def base_offset(self) -> int:
        """The base offset of the segment to be made (``floor`` of any offset from it on)."""
        return self._pending[2]

    def _materialize(self) -> None:
        # if opening fails the segments stay pending: the next call tries again
        medium, dir, base_offset, config, clock, jitter_source, created_ms = self._pending
        if config.segment_jitter_ms:
            segment = LogSegment.open(medium, dir, base_offset, config, clock,
                                      file_already_exists=True, index_files_preallocated=True,
                                      jitter_source=jitter_source)
            segment.created = created_ms
        else:  # what open makes without a jitter to draw, in one call
            segment = LogSegment.for_new_log(medium, dir, base_offset, config.index_interval_bytes,
                                         config.segment_index_bytes, clock, created_ms)
        del self._pending
        owner = self._owner
        del self._owner
        # the class first: ``last``, read-only here, is the attribute __init__ sets there
        self.__class__ = LogSegments  # type: ignore[assignment]
        LogSegments.__init__(self, segment)
        if owner is not None:
            owner.segments_made = True


def _materializing(name: str, attr: Any) -> Any:
    if isinstance(attr, property):
        def get(self: _NewLogSegments) -> Any:
            self._materialize()
            return getattr(self, name)

        return property(get, doc=attr.__doc__)

    def method(self: _NewLogSegments, *args: Any, **kwargs: Any) -> Any:
        self._materialize()
        return getattr(self, name)(*args, **kwargs)

    method.__name__ = name
    method.__doc__ = attr.__doc__
    return method


for _name, _attr in list(vars(LogSegments).items()):
    if _name != "__init__" and (isinstance(_attr, property) or callable(_attr)) \
            and not isinstance(_attr, (staticmethod, classmethod, type)):
        setattr(_NewLogSegments, _name, _materializing(_name, _attr))
del _name, _attr
# LogSegments.last is an attribute its methods keep: read here, it makes the segment first
_NewLogSegments.last = _materializing(  # type: ignore[assignment]
    "last", property(doc="The segment with the highest base offset."))


class Log:
    """A partition log directory. Open with :meth:`Log.open`.

    ``log_start_offset``, ``log_end_offset``, ``log_end_offset_metadata`` (the LEO with its
    segment and position), ``high_watermark`` (the HW's offset; its metadata is
    :attr:`high_watermark_metadata`) and ``latest_epoch`` (the epoch cache's latest epoch, −1
    when none; the cache keeps it, as its ``mirror``) are plain attributes, read-only to
    everyone but the log and its cache: the upper layers read them several times per message,
    and an attribute costs a fraction of a property's call. So are ``segments`` (the
    :class:`LogSegments`) and ``segments_made``: False while the log is as :meth:`_create` left
    it — one empty segment, never written or read, whose object is not built yet (asking
    ``segments`` anything builds it, which sets this True): a reader may take it as holding no
    batches without building it.
    """

    __slots__ = ("dir", "medium", "clock", "jitter_source", "segments", "segments_made",
                 "log_start_offset",
                 "_recovery_point", "log_end_offset_metadata", "log_end_offset", "_hw",
                 "high_watermark", "leader_epoch_cache", "latest_epoch", "_psm",
                 "_psm_start", "_producer_id_expiration_ms", "_recovery_report", "_creation",
                 "last_flush_ms", "closed", "topic_id", "log_start_listener",
                 "high_watermark_changes", "config", "_pending_file_deletions", "topic",
                 "partition", "_segment_bytes", "_max_segment_ms", "_max_message_bytes",
                 "_flush_messages", "_flush_ms", "_compacted", "_timestamp_type",
                 "_log_append_time", "_timestamp_before_max_ms", "_timestamp_after_max_ms",
                 "_compression", "_fast_topic", "__weakref__")

    def __init__(
        self,
        dir: str,
        config: Any,
        medium: Any,
        clock: Any,
        segments: LogSegments,
        *,
        log_start_offset: int,
        recovery_point: int,
        next_offset_metadata: LogOffsetMetadata,
        leader_epoch_cache: Any,
        recovery_report: RecoveryReport | None = None,
        topic_partition: tuple[str, int] | None = None,
        jitter_source: Any = None,
        producer_state: ProducerStateManager | None = None,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> None:
        self.dir = dir
        #: (due ms, segment) of ``.deleted`` segments awaiting ``file.delete.delay.ms``
        self._pending_file_deletions: tuple[tuple[int, LogSegment], ...] = ()
        self.topic, self.partition = (parse_topic_partition(dir) if topic_partition is None
                                      else topic_partition)
        self.medium = medium
        self.clock = clock
        self.jitter_source = jitter_source  # roll jitter of new segments (LogSegment.open)
        self.segments = segments
        self.segments_made = type(segments) is not _NewLogSegments
        if not self.segments_made:
            segments._owner = self
        self.log_start_offset = int(log_start_offset)
        self._recovery_point = int(recovery_point)
        self.log_end_offset_metadata: LogOffsetMetadata = next_offset_metadata
        self.log_end_offset = next_offset_metadata.message_offset
        self._hw = _OFFSET_0_ONLY if self.log_start_offset == 0 \
            else LogOffsetMetadata(self.log_start_offset)
        self.high_watermark = self._hw.message_offset
        self.leader_epoch_cache = leader_epoch_cache
        leader_epoch_cache.mirror = self  # keeps latest_epoch
        self.latest_epoch = leader_epoch_cache.latest_epoch
        # None until needed (a created log): see _producer_state
        self._psm = producer_state
        self._psm_start = self.log_start_offset  # where a state made now starts, snapshotted
        self._producer_id_expiration_ms = producer_id_expiration_ms
        self._recovery_report = recovery_report
        # a created log's report is built when asked for: (dir, clean, start, recovery point,
        # whether an untouched existing directory was recovered)
        self._creation: tuple[str, bool, int, int, bool] | None = None
        self.last_flush_ms = clock.milliseconds()
        self.closed = False
        self.topic_id: str | None = None
        """The topic id the controller gave the partition (set by the replica manager)."""
        self.log_start_listener: Callable[[int], None] | None = None
        """Told the new log start offset whenever it changes (the leader's partition keeps it
        for its fetch sessions, which answer a moved log start: KIP-227)."""
        self.high_watermark_changes: set[Log] | None = None
        """A set this log adds itself to whenever its high watermark is set (the log manager's:
        its next ``replication-offset-checkpoint`` reads again only the logs in it)."""
        self.update_config(config)
        self._update_log_start_offset(self.log_start_offset)

    # --- construction -------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        partition_dir: str | os.PathLike[str],
        config: Any = None,
        *,
        medium: Any = None,
        clock: Any = None,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        had_clean_shutdown: bool = False,
        jitter_source: Any = None,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        topic_partition: tuple[str, int] | None = None,
    ) -> Log:
        """Open (creating if needed) and load ``<topic>-<partition>`` (KAFKA_SEMANTICS §5.2-5.3).

        ``recovery_point``/``log_start_offset`` come from the log dir's checkpoints; without a
        clean shutdown every segment from the one holding the recovery point is rescanned.
        What recovery changed is in :attr:`recovery_report`. ``jitter_source`` gives each new
        segment its roll jitter (a :class:`~replica_core.storage.config.SegmentJitter`; None: a
        draw seeded by the segment's directory name and base offset).

        The producer state is loaded as Kafka's ``LogLoader`` loads it: snapshots not at a
        segment base are removed (``removeStraySnapshots``), then ``rebuildProducerState`` loads
        the newest snapshot in (log start, log end] and replays the log from it (after a clean
        shutdown with no snapshot at all nothing is scanned). ``producer_id_expiration_ms`` is
        the broker's ``producer.id.expiration.ms``. ``topic_partition``: what the directory's
        name spells, when the caller has parsed it already (the log manager, listing its dirs).
        """
        _check_expiration_ms(producer_id_expiration_ms)
        if medium is None:
            from replica_core.storage.medium import FileMedium

            medium = FileMedium()
        if clock is None:
            from replica_core.clock import SystemClock

            clock = SystemClock()
        if config is None:
            from replica_core.storage.config import LogConfig

            config = LogConfig()
        dir = os.fspath(partition_dir)
        tp = parse_topic_partition(dir) if topic_partition is None else topic_partition
        if not medium.exists(dir):
            return cls._create(dir, config, medium, clock, log_start_offset,
                               min(recovery_point, log_start_offset), had_clean_shutdown, tp,
                               jitter_source=jitter_source,
                               producer_id_expiration_ms=producer_id_expiration_ms)
        if not had_clean_shutdown:
            base = _untouched_base(
                medium.untouched_files(dir, written=LEADER_EPOCH_CHECKPOINT_FILE),
                int(config.segment_index_bytes))
            if base is not None and log_start_offset <= base:
                # a directory created empty and never looked into since, its epoch checkpoint
                # perhaps written (a leader's first epoch): recovery would find it as it was
                # made (one empty segment, pre-allocated empty indexes, no snapshot) and leave
                # it so but for the epochs, which it trims to the log; recover it so without
                # reading the rest
                cache = _recovered_epoch_cache(medium, dir, base, log_start_offset)
                if cache is not None:
                    return cls._create(dir, config, medium, clock, base,
                                       min(recovery_point, base), False, tp,
                                       jitter_source=jitter_source,
                                       producer_id_expiration_ms=producer_id_expiration_ms,
                                       recovered=True, epoch_cache=cache)
        medium.makedirs(dir)
        cache, warning = _open_epoch_cache(medium, dir)
        if warning:
            # the epochs can only be rebuilt from the batches: recover every segment
            recovery_point, had_clean_shutdown = 0, False
        segments = LogSegments()
        report = RecoveryReport(dir, had_clean_shutdown)
        if warning:
            report.warnings.append(warning)
        loader = LogLoader(
            dir, config, medium, clock, segments,
            log_start_offset_checkpoint=log_start_offset,
            recovery_point_checkpoint=recovery_point,
            leader_epoch_cache=cache,
            had_clean_shutdown=had_clean_shutdown,
            report=report,
            jitter_source=jitter_source,
        )
        loaded = loader.load()
        psm = ProducerStateManager(medium, dir, clock, list_existing=False,
                                   producer_id_expiration_ms=producer_id_expiration_ms)
        bases = segments.base_offsets()
        # the snapshot files, from the loader's listing when still current (else listed again)
        psm.remove_stray_snapshots(bases, loader.file_names)
        rebuild_producer_state(psm, segment_base_offsets=bases,
                               read_batches=functools.partial(_loaded_producer_batches,
                                                              segments, loader.recovered_headers),
                               log_start_offset=loaded.log_start_offset,
                               last_offset=loaded.next_offset_metadata.message_offset,
                               reload_from_clean_shutdown=had_clean_shutdown)
        for path, why in psm.corrupt_snapshots:
            report.warnings.append(f"{os.path.basename(path)}: {why}; deleted")
        return cls(
            dir, config, medium, clock, segments,
            log_start_offset=loaded.log_start_offset,
            recovery_point=loaded.recovery_point,
            next_offset_metadata=loaded.next_offset_metadata,
            leader_epoch_cache=cache,
            recovery_report=report,
            topic_partition=tp,
            jitter_source=jitter_source,
            producer_state=psm,
            producer_id_expiration_ms=producer_id_expiration_ms,
        )

    @classmethod
    def _create(cls, dir: str, config: Any, medium: Any, clock: Any, log_start_offset: int,
                recovery_point: int, had_clean_shutdown: bool, tp: tuple[str, int],
                jitter_source: Any = None,
                producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
                recovered: bool = False, epoch_cache: LeaderEpochCache | None = None) -> Log:
        """A brand-new partition directory (``dir`` does not exist): what loading an empty one
        yields (one empty segment at the log start offset with pre-allocated indexes, an empty
        epoch cache), without listing or scanning anything.

        The medium creates the directory and its four files in one call (the same names,
        lengths and contents as creating them one by one). The objects wait for first use: the
        segment (:class:`_NewLogSegments`), its indexes (``index_files_preallocated``) and the
        recovery report, and the producer state (``_producer_state``: an empty directory has no
        snapshot to load and no batch to replay).

        ``recovered``: ``dir`` exists already, untouched since it was made so (see
        :func:`_untouched_base`), and is being loaded after an unclean shutdown; nothing is
        written, and the report says its one segment was loaded and recovered.
        ``epoch_cache``: its epoch cache as loading leaves it (:func:`_recovered_epoch_cache`;
        default: empty).
        """
        index_bytes = int(config.segment_index_bytes)
        if recovered:
            pass  # the files are there, exactly as this would make them
        elif index_bytes < 12:  # too small for an index entry: fail where the index is made
            return cls._create_stepwise(dir, config, medium, clock, log_start_offset,
                                        recovery_point, had_clean_shutdown, tp,
                                        jitter_source=jitter_source,
                                        producer_id_expiration_ms=producer_id_expiration_ms)
        else:
            medium.create_dir_with_files(dir, _new_dir_files(log_start_offset, index_bytes))
        cache = epoch_cache if epoch_cache is not None else LeaderEpochCache(
            LeaderEpochCheckpointFile(medium, _join(dir, LEADER_EPOCH_CHECKPOINT_FILE),
                                      exists=True), ())
        segments = _NewLogSegments(medium, dir, log_start_offset, config, clock, jitter_source,
                                   clock.milliseconds())
        if config.segment_jitter_ms:
            # the roll jitter is drawn when a segment is made: keep the draws in creation order
            segments._materialize()
        meta = _OFFSET_0_AT_0 if log_start_offset == 0 \
            else LogOffsetMetadata(log_start_offset, log_start_offset, 0)
        lg = cls(
            dir, config, medium, clock, segments,
            log_start_offset=log_start_offset,
            recovery_point=recovery_point,
            next_offset_metadata=meta,
            leader_epoch_cache=cache,
            topic_partition=tp,
            jitter_source=jitter_source,
            producer_state=_created_producer_state(medium, dir, clock, log_start_offset,
                                                   had_clean_shutdown,
                                                   producer_id_expiration_ms),
            producer_id_expiration_ms=producer_id_expiration_ms,
        )
        lg._creation = (dir, had_clean_shutdown, log_start_offset, recovery_point, recovered)
        return lg

    @staticmethod
    def _creates_at_0_in_one_step(config: Any) -> bool:
        """Whether :meth:`_create_at_0` can make logs under ``config``: its indexes take an
        entry (``segment.index.bytes`` ≥ 12) and its segments draw no roll jitter."""
        return int(config.segment_index_bytes) >= 12 and not config.segment_jitter_ms

    @classmethod
    def _create_at_0(cls, dir: str, config: Any, medium: Any, clock: Any, tp: tuple[str, int],
                     jitter_source: Any, producer_id_expiration_ms: int,
                     values: tuple[Any, ...]) -> Log:
        """What ``_create(dir, config, medium, clock, 0, 0, True, tp, jitter_source,
        producer_id_expiration_ms)`` makes — a brand-new directory, log start and recovery
        point 0 after a clean shutdown — for a caller creating many logs under one ``config``
        (:meth:`LogManager.create_logs`) that has checked :meth:`_creates_at_0_in_one_step`,
        worked out ``values`` (:func:`_cached_config_values`) once, and made ``dir`` with its
        files (``_new_dir_files(0, segment.index.bytes)``, what ``_create``'s first medium
        call makes) where nothing was (``medium.create_new_dir_with_files``). The same medium
        calls and clock reads in the same order; the log's fields are set in one step, each as
        :meth:`__init__` sets it for such a log (no producer state: its log starts at 0)."""
        cache = LeaderEpochCache(LeaderEpochCheckpointFile(
            medium, _join(dir, LEADER_EPOCH_CHECKPOINT_FILE), exists=True), ())
        segments = _NewLogSegments(medium, dir, 0, config, clock, jitter_source,
                                   clock.milliseconds())
        lg = _new_log(cls)
        lg.dir = dir
        lg._pending_file_deletions = ()
        lg.topic, lg.partition = tp
        lg.medium = medium
        lg.clock = clock
        lg.jitter_source = jitter_source
        lg.segments = segments
        lg.segments_made = False
        segments._owner = lg
        lg.log_start_offset = 0
        lg._recovery_point = 0
        lg.log_end_offset_metadata = _OFFSET_0_AT_0
        lg.log_end_offset = 0
        lg._hw = _OFFSET_0_ONLY
        lg.high_watermark = 0
        lg.leader_epoch_cache = cache
        cache.mirror = lg
        lg.latest_epoch = -1
        lg._psm = None
        lg._psm_start = 0
        lg._producer_id_expiration_ms = producer_id_expiration_ms
        lg._recovery_report = None
        lg.last_flush_ms = clock.milliseconds()
        lg.closed = False
        lg.topic_id = None
        lg.log_start_listener = None
        lg.high_watermark_changes = None
        lg.config = config
        (lg._segment_bytes, lg._max_segment_ms, lg._max_message_bytes,
         lg._flush_messages, lg._flush_ms, lg._compacted, lg._timestamp_type,
         lg._log_append_time, lg._timestamp_before_max_ms, lg._timestamp_after_max_ms,
         lg._compression, lg._fast_topic) = values
        lg._creation = (dir, True, 0, 0, False)
        return lg

    @classmethod
    def _create_stepwise(cls, dir: str, config: Any, medium: Any, clock: Any,
                         log_start_offset: int, recovery_point: int, had_clean_shutdown: bool,
                         tp: tuple[str, int], jitter_source: Any = None,
                         producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS
                         ) -> Log:
        """:meth:`_create` one file at a time, every object built at once (the reference the
        one-call path is tested against)."""
        from replica_core.storage.checkpoint import LeaderEpochCheckpointFile
        from replica_core.storage.leader_epoch import LeaderEpochCache

        medium.makedirs(dir)
        cache = LeaderEpochCache(LeaderEpochCheckpointFile(
            medium, os.path.join(dir, LEADER_EPOCH_CHECKPOINT_FILE)))
        segments = LogSegments()
        segment = LogSegment.open(medium, dir, log_start_offset, config, clock,
                                  jitter_source=jitter_source)
        segment.resize_indexes(int(config.segment_index_bytes))
        segments.add(segment)
        report = RecoveryReport(dir, had_clean_shutdown)
        report.log_start_offset = report.log_end_offset = log_start_offset
        report.recovery_point = recovery_point
        return cls(
            dir, config, medium, clock, segments,
            log_start_offset=log_start_offset,
            recovery_point=recovery_point,
            next_offset_metadata=LogOffsetMetadata(log_start_offset, log_start_offset, 0),
            leader_epoch_cache=cache,
            recovery_report=report,
            topic_partition=tp,
            jitter_source=jitter_source,
            producer_state=_created_producer_state(medium, dir, clock, log_start_offset,
                                                   had_clean_shutdown,
                                                   producer_id_expiration_ms),
            producer_id_expiration_ms=producer_id_expiration_ms,
        )

    def update_config(self, config: Any) -> None:
        """Adopt a new :class:`LogConfig` (append-path values are cached here)."""
        self.config = config
        values = _cached_config_values(config)
        (self._segment_bytes, self._max_segment_ms, self._max_message_bytes,
         self._flush_messages, self._flush_ms, self._compacted, self._timestamp_type,
         self._log_append_time, self._timestamp_before_max_ms, self._timestamp_after_max_ms,
         self._compression, self._fast_topic) = values

    # --- properties ---------------------------------------------------------------------
    @property
    def recovery_report(self) -> RecoveryReport | None:
        """What opening the directory found and changed (for a created log: nothing)."""
        report = self._recovery_report
        if report is None and self._creation is not None:
            dir, clean, start, recovery_point, recovered = self._creation
            report = RecoveryReport(dir, clean)
            report.log_start_offset = report.log_end_offset = start
            report.recovery_point = recovery_point
            if recovered:  # what the loader reports of its one (empty) segment
                report.segments_loaded = 1
                report.recovered_segments.append(start)
            self._recovery_report = report
        return report

    @recovery_report.setter
    def recovery_report(self, report: RecoveryReport | None) -> None:
        self._recovery_report = report
        self._creation = None

    @property
    def high_watermark_metadata(self) -> LogOffsetMetadata:
        return self._hw

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def active_segment(self) -> LogSegment:
        seg = self.segments.last
        assert seg is not None
        return seg

    @property
    def unflushed_messages(self) -> int:
        return self.log_end_offset - self._recovery_point

    @property
    def size(self) -> int:
        return sum(seg.size for seg in self.segments)

    def __repr__(self) -> str:
        return (
            f"Log({self.topic}-{self.partition}, lso={self.log_start_offset}, "
            f"hw={self.high_watermark}, leo={self.log_end_offset}, segments={len(self.segments)})"
        )

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int] | None:
        """(epoch, end offset) from the epoch cache, ``None`` when undefined (§4.3)."""
        epoch, offset = self.leader_epoch_cache.end_offset_for(leader_epoch, self.log_end_offset)
        if offset == UNKNOWN_OFFSET:
            return None
        return int(epoch), int(offset)

    # --- append (§2) ----------------------------------------------------------------------
    def append_as_leader(
        self, batch_bytes: bytes | bytearray | memoryview, leader_epoch: int, *, origin: str = "client"
    ) -> Any:
        """Validate, assign offsets from the LEO, stamp ``leader_epoch`` and append (§2.1-2.6).

        A batch with a producer id is checked against the producer state first
        (``analyzeAndValidateProducerState``): a client's retry of one of its producer's last
        five batches is not written and the answer carries the original batch's first and last
        offsets (and its timestamp as ``log_append_time``, as Kafka answers it); a sequence gap
        raises :class:`~replica_core.errors.OutOfOrderSequenceError`, an older producer epoch
        :class:`~replica_core.errors.InvalidProducerEpochError` — before anything is written.
        """
        if self.closed:
            self._check_open()  # raises
        now = self.clock.milliseconds()
        topic = self._fast_topic
        # One kernel call for the common append (one v2 batch, no rebuild, no error); anything
        # else, errors included, takes the general path below.
        fast = None if topic is None else (_records_module or _records()).analyze_validate_and_assign(
            batch_bytes, self.log_end_offset, leader_epoch, now, origin, *topic)
        if fast is None:
            return self._append(batch_bytes, origin, True, leader_epoch, False, now)
        info, valid, base_offset = fast
        last_offset = info.last_offset
        # the producer-state check (_check_producer_batch), in line: the common batch - data,
        # not transactional, in sequence - is checked by in_sequence_entry and applied by
        # apply_in_sequence once written; anything else by the general functions
        update = entry = None
        if valid[_PRODUCER_ID_AT] < 0x80:  # a producer id (-1: none)
            attrs, delta, _, max_ts, pid, epoch, seq = _PRODUCER_FIELDS.unpack_from(valid, 21)
            psm = self._producer_state()
            if not attrs & (_CONTROL_FLAG | _TRANSACTIONAL_FLAG) and seq >= 0:
                last_seq = increment_sequence(seq, delta)
                entry = in_sequence_entry(psm, pid, epoch, seq, last_seq, origin == "client")
            if entry is None:
                update = analyze_and_validate_producer_state(
                    psm, (_producer_batch(valid, 0),), origin)
                if update.duplicate is not None:
                    return _answer_duplicate(info, update)
        # §2.6 step 1 for the one v2 batch (what _assign_epochs_from reads back from its header;
        # the cache's own check skips an epoch it holds already)
        if leader_epoch >= 0:
            self.leader_epoch_cache.assign(leader_epoch, base_offset)
        self._write_validated(valid, info.valid_bytes, info.first_offset, last_offset,
                              info.max_timestamp, last_offset, now)
        if entry is not None:
            apply_in_sequence(psm, entry, epoch, last_seq, base_offset, last_offset, max_ts)
        elif update is not None:
            apply_producer_state_update(psm, update, last_offset)
        return info

    def append_as_follower(self, batch_bytes: bytes | bytearray | memoryview) -> Any:
        """Append batches with the leader's offsets; a partial trailing batch is dropped (§2.5).

        Batches with a producer id update the producer state with the replication rules (no
        sequence or epoch check, no duplicate detection), so a follower holds what its leader
        holds.

        The common fetch - one whole v2 batch at the LEO - takes one header scan
        (:func:`~replica_core.records.validator.analyze_follower_batch`) whose row also gives
        the producer fields and the epoch; anything else, errors included, takes the general
        path, which raises them in Kafka's order."""
        if self.closed:
            self._check_open()  # raises
        fast = (_records_module or _records()).analyze_follower_batch(batch_bytes) \
            if isinstance(batch_bytes, (bytes, memoryview)) else None
        if fast is None:
            return self._append(batch_bytes, "replication", False, -1, True)
        info, row = fast
        first_offset = info.first_offset
        last_offset = info.last_offset
        if first_offset < self.log_end_offset or last_offset - first_offset > INT32_MAX:
            # UnexpectedAppendOffsetError / LogSegmentOffsetOverflowError, from the general path
            return self._append(batch_bytes, "replication", False, -1, True)
        now = self.clock.milliseconds()
        # the producer-state check (_check_producer_fields), in line as in append_as_leader; a
        # replicated batch is never a duplicate (only client appends look for one)
        update = entry = None
        pid = row[COL_PRODUCER_ID]
        if pid >= 0:
            epoch = row[COL_PRODUCER_EPOCH]
            seq = row[COL_BASE_SEQUENCE]
            psm = self._producer_state()
            if not row[COL_ATTRIBUTES] & (_CONTROL_FLAG | _TRANSACTIONAL_FLAG) and seq >= 0:
                last_seq = increment_sequence(seq, last_offset - first_offset)
                entry = in_sequence_entry(psm, pid, epoch, seq, last_seq, False)
            if entry is None:
                update = analyze_and_validate_producer_state(
                    psm, (_producer_batch(batch_bytes, 0),), "replication")
        # §2.6 step 1 for the one v2 batch (what _assign_epochs_from reads from its header)
        epoch_of_batch = row[COL_PARTITION_LEADER_EPOCH]
        if epoch_of_batch >= 0:  # _maybe_assign_epoch, in line
            self.leader_epoch_cache.assign(epoch_of_batch, first_offset)
        self._write_validated(batch_bytes, info.valid_bytes, first_offset, last_offset,
                              info.max_timestamp, info.shallow_offset_of_max_timestamp, now)
        if entry is not None:
            apply_in_sequence(psm, entry, epoch, last_seq, first_offset, last_offset,
                              row[COL_MAX_TIMESTAMP])
        elif update is not None:
            apply_producer_state_update(psm, update, last_offset)
        return info

    def _append(
        self,
        records: Any,
        origin: str,
        assign_offsets: bool,
        leader_epoch: int,
        ignore_record_size: bool,
        now: int | None = None,
    ) -> Any:
        """The general append: any number of batches, any format, every error (§2.2-2.6)."""
        self._check_open()
        rec = _records()
        info = rec.analyze_and_validate(
            records, origin, max_message_bytes=self._max_message_bytes,
            ignore_record_size=ignore_record_size,
        )
        if info.valid_bytes <= 0:
            return info
        valid = rec.trim_invalid_bytes(records, info)
        leo = self.log_end_offset
        if now is None:
            now = self.clock.milliseconds()
        if assign_offsets:
            result = rec.validate_and_assign_offsets(
                valid, leo, leader_epoch, now,
                timestamp_type=self._timestamp_type,
                timestamp_before_max_ms=self._timestamp_before_max_ms,
                timestamp_after_max_ms=self._timestamp_after_max_ms,
                target_compression=self._compression,
                compacted=self._compacted,
                origin=origin,
                max_message_bytes=self._max_message_bytes,
            )
            valid = result.buffer
            first_offset = leo
            last_offset = result.last_offset
            if last_offset < leo:
                raise InvalidRecordError(
                    f"append to {self.topic}-{self.partition} assigns no offset (last offset "
                    f"{last_offset} below the log end offset {leo})")
            max_timestamp = result.max_timestamp
            shallow = result.shallow_offset_of_max_timestamp
            if result.message_size_maybe_changed:
                self._check_batch_sizes(valid)
            # LogAppendInfo is mutable: the log fills in what offset assignment decided (§2.4)
            info.first_offset = first_offset
            info.last_offset = last_offset
            info.max_timestamp = max_timestamp
            info.shallow_offset_of_max_timestamp = shallow
            if self._log_append_time:
                info.log_append_time = result.log_append_time
        else:
            if not info.offsets_monotonic:
                raise OffsetsOutOfOrderError(
                    f"out of order offsets found in append to {self.topic}-{self.partition}"
                )
            first_or_last = (
                info.first_offset if info.first_offset >= 0 else info.last_offset_of_first_batch
            )
            if first_or_last < leo:
                raise UnexpectedAppendOffsetError(
                    f"unexpected offset in append to {self.topic}-{self.partition}: first offset "
                    f"{first_or_last} is less than the next offset {leo}",
                    info.first_offset if info.first_offset >= 0 else first_or_last,
                    info.last_offset,
                )
            if info.last_offset - first_or_last > INT32_MAX:
                # Kafka rolls first and then fails in LogSegment.append; refusing before the
                # roll leaves the directory untouched
                raise LogSegmentOffsetOverflowError(
                    f"offsets {first_or_last}..{info.last_offset} of one append to "
                    f"{self.topic}-{self.partition} cannot share a segment")
            last_offset = info.last_offset
            max_timestamp = info.max_timestamp
            shallow = info.shallow_offset_of_max_timestamp
            first_offset = info.first_offset

        size = len(valid) if not isinstance(valid, memoryview) else valid.nbytes
        update, headers = self._producer_update(valid, size, origin)
        if update is not None and update.duplicate is not None:
            return _answer_duplicate(info, update)

        self._assign_epochs_from(valid, headers)

        self._write_validated(valid, size, first_offset, last_offset, max_timestamp, shallow, now)
        if update is not None:
            self._apply_producer_update(update, last_offset)
        return info

    def _check_producer_batch(self, buf: Any, origin: str) -> Any:
        """Check the one v2 batch of an append (offsets final, producer id set) against the
        producer state: the common case (:func:`in_sequence_entry`) in one step, anything else
        through :func:`analyze_and_validate_producer_state`."""
        base = _FIRST_HEADER.unpack_from(buf, 0)[0]
        attrs, delta, _, max_ts, pid, epoch, seq = _PRODUCER_FIELDS.unpack_from(buf, 21)
        return self._check_producer_fields(buf, origin, base, attrs, delta, max_ts, pid, epoch,
                                           seq)

    def _check_producer_fields(self, buf: Any, origin: str, base: int, attrs: int, delta: int,
                               max_ts: int, pid: int, epoch: int, seq: int) -> Any:
        """:meth:`_check_producer_batch` once the batch's header fields are read."""
        psm = self._producer_state()
        if not attrs & (_CONTROL_FLAG | _TRANSACTIONAL_FLAG) and seq >= 0:
            last_seq = increment_sequence(seq, delta)
            entry = in_sequence_entry(psm, pid, epoch, seq, last_seq, origin == "client")
            if entry is not None:
                return _InSequence(entry, epoch, last_seq, base, base + delta, max_ts)
        return analyze_and_validate_producer_state(psm, (_producer_batch(buf, 0),), origin)

    def _apply_producer_update(self, update: Any, last_offset: int) -> None:
        """The producer-state half of an append, once its records are written."""
        psm = self._psm
        assert psm is not None
        if type(update) is _InSequence:
            apply_in_sequence(psm, update.entry, update.producer_epoch, update.last_seq,
                              update.first_offset, update.last_offset, update.timestamp)
        else:
            apply_producer_state_update(psm, update, last_offset)

    def _producer_update(self, buf: Any, size: int, origin: str
                         ) -> tuple[Any, np.ndarray | None]:
        """Check an append's batches (offsets final) against the producer state; None when no
        batch has a producer id. Also returns the batch headers when it had to scan them (more
        than one batch), for the epoch-cache upkeep that follows."""
        _, length, _, magic = _FIRST_HEADER.unpack_from(buf, 0)
        if length + 12 == size:
            if magic < 2 or buf[_PRODUCER_ID_AT] >= 0x80:
                return None, None
            return self._check_producer_batch(buf, origin), None
        headers, _, _ = batch_kernel().scan_batches(buf, 0, -1, False)
        rows = _producer_rows(headers)
        if not len(rows):
            return None, headers
        batches = [_row_batch(row, lambda pos, n: buf[pos:pos + n]) for row in rows.tolist()]
        return analyze_and_validate_producer_state(self._producer_state(), batches,
                                                   origin), headers

    def _write_validated(
        self,
        valid: Any,
        size: int,
        first_offset: int,
        last_offset: int,
        max_timestamp: int,
        shallow: int,
        now: int,
    ) -> None:
        """§2.6 steps 2-8: size limit, roll, segment append, LEO, HW metadata, flush policy."""
        if size > self._segment_bytes:
            raise RecordBatchTooLargeError(
                f"message batch size is {size} bytes in append to {self.topic}-{self.partition}, "
                f"which exceeds the maximum configured segment size of {self._segment_bytes}"
            )
        segments = self.segments
        if type(segments) is _NewLogSegments:
            segments._materialize()  # a created log's first append: its segment is made now
        try:
            segment = segments.last
            if segment.roll_needed(size, max_timestamp, last_offset, now, self._segment_bytes,
                                   self._max_segment_ms):
                segment = self.roll(first_offset if first_offset >= 0 else last_offset - INT32_MAX)
            segment.append(last_offset, max_timestamp, shallow, valid)
        except OSError as e:
            # Kafka takes the log dir offline (maybeHandleIOException); the caller decides here
            raise KafkaStorageError(
                f"error while appending records to {self.topic}-{self.partition}: {e}"
            ) from e
        # _update_log_end_offset, inlined (the LEO only grows here), with the LEO's metadata
        # made from the segment just written
        leo = self.log_end_offset = last_offset + 1
        meta = self.log_end_offset_metadata = _new_tuple(
            LogOffsetMetadata, (leo, segment.base_offset, segment.size))
        if self._recovery_point > leo:
            self._recovery_point = leo
        if self.high_watermark >= leo:
            self._set_hw(meta)
        if leo - self._recovery_point >= self._flush_messages:
            self.flush(leo)

    def _check_batch_sizes(self, buf: Any) -> None:
        headers, _, _ = batch_kernel().scan_batches(buf, 0, -1, False)
        sizes = headers[:, COL_SIZE]
        if len(sizes) and int(sizes.max()) > self._max_message_bytes:
            raise RecordTooLargeError(
                f"message batch size is {int(sizes.max())} bytes in append to "
                f"{self.topic}-{self.partition}, which exceeds the maximum configured size of "
                f"{self._max_message_bytes}"
            )

    def _assign_epochs_from(self, buf: Any, headers: np.ndarray | None = None) -> None:
        """Epoch cache upkeep for every batch of an append (§2.6 step 1); ``headers``: the
        append's batch headers if already scanned."""
        cache = self.leader_epoch_cache
        base, length, epoch, magic = _FIRST_HEADER.unpack_from(buf, 0)
        total = len(buf) if not isinstance(buf, memoryview) else buf.nbytes
        if length + 12 == total:
            if magic >= 2:
                self._maybe_assign_epoch(epoch, base)
            elif not cache.is_empty:
                cache.clear_and_flush()
            return
        if headers is None:
            headers, _, _ = batch_kernel().scan_batches(buf, 0, -1, False)
        magics = headers[:, COL_MAGIC]
        epochs = headers[:, COL_PARTITION_LEADER_EPOCH]
        bases = headers[:, COL_BASE_OFFSET]
        # only the first batch of each run of equal epochs can change the cache
        change = np.ones(len(headers), dtype=bool)
        change[1:] = (epochs[1:] != epochs[:-1]) | (magics[1:] != magics[:-1])
        for r in np.flatnonzero(change).tolist():
            if magics[r] >= 2:
                self._maybe_assign_epoch(int(epochs[r]), int(bases[r]))
            elif not cache.is_empty:
                cache.clear_and_flush()

    def _maybe_assign_epoch(self, epoch: int, start_offset: int) -> None:
        if epoch < 0:
            # Kafka's cache rejects negative epochs; such batches (never stamped by a leader)
            # simply do not start an epoch here.
            return
        cache = self.leader_epoch_cache
        latest = cache.latest_entry
        if latest is not None and latest[0] == epoch and latest[1] <= start_offset:
            return
        cache.assign(epoch, start_offset)

    def maybe_assign_epoch_start_offset(self, leader_epoch: int, start_offset: int) -> None:
        """Record ``leader_epoch`` as starting at ``start_offset`` (a new leader at its LEO, §6.1)."""
        self.leader_epoch_cache.assign(leader_epoch, start_offset)

    # --- roll (§2.7) --------------------------------------------------------------------
    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at ``max(expected_next_offset, LEO)``; snapshot the
        producer state at its base offset (so recovery can start from the snapshot and that
        segment); flush the snapshot and the old segments."""
        self._check_open()
        new_offset = max(expected_next_offset or 0, self.log_end_offset)
        active = self.segments.last
        if new_offset in self.segments:
            if active.base_offset == new_offset and active.size == 0:
                # KAFKA-6388: an empty active segment whose index reports full
                self.segments.remove(new_offset)
                self._delete_segment_files([active])
            else:
                raise KafkaStorageError(
                    f"trying to roll a new segment for {self.topic}-{self.partition} at "
                    f"{new_offset} while it already exists"
                )
        elif active is not None and new_offset < active.base_offset:
            raise KafkaStorageError(
                f"trying to roll a new segment at {new_offset}, below the active segment "
                f"{active.base_offset}"
            )
        else:
            for path in (
                log_file_path(self.dir, new_offset),
                offset_index_path(self.dir, new_offset),
                time_index_path(self.dir, new_offset),
                txn_index_path(self.dir, new_offset),
            ):
                if self.medium.exists(path):
                    self.medium.remove(path)
            if active is not None:
                active.on_become_inactive()
        segment = LogSegment.open(self.medium, self.dir, new_offset, self.config, self.clock,
                                  jitter_source=self.jitter_source)
        self.segments.add(segment)
        self._update_log_end_offset(self.log_end_offset)
        psm = self._producer_state()
        psm.update_map_end_offset(new_offset)
        snapshot = psm.take_snapshot(sync=False)
        if self.high_watermark >= self.log_end_offset:
            self._set_hw(self.log_end_offset_metadata)
        # Kafka schedules this flush (the snapshot's, then the segments'); the step model runs
        # it now
        if snapshot is not None:
            psm.flush_snapshot(snapshot)
        self.flush(new_offset)
        return segment

    def _update_log_end_offset(self, offset: int) -> None:
        """The LEO moved to ``offset`` at the end of the active segment (a roll or a
        truncation has just made or cut it): its metadata is made from that segment."""
        self.log_end_offset = offset
        active = self.segments.last
        self.log_end_offset_metadata = LogOffsetMetadata(offset, active.base_offset, active.size)
        if self._recovery_point > offset:
            self._recovery_point = offset

    # --- high watermark (§5.2, §6.4) ---------------------------------------------------------
    def update_high_watermark(self, hw: int | LogOffsetMetadata) -> int:
        """Set the HW clamped to [LSO, LEO]; may move it down (follower / load time)."""
        given: LogOffsetMetadata | None = None
        if isinstance(hw, LogOffsetMetadata):
            given = hw
            offset = hw.message_offset
        else:
            offset = hw if hw.__class__ is int else int(hw)
        if offset < self.log_start_offset:
            meta = LogOffsetMetadata(self.log_start_offset)
        elif offset >= self.log_end_offset:
            meta = self.log_end_offset_metadata
        else:  # an offset alone becomes offset-only metadata, made only when it is kept
            meta = given if given is not None else _new_tuple(LogOffsetMetadata, (offset, -1, -1))
        self._set_hw(meta)
        return meta.message_offset

    def _set_hw(self, meta: LogOffsetMetadata) -> None:
        if meta.message_offset < 0:
            raise ValueError("high watermark offset should be non-negative")
        self._hw = meta
        self.high_watermark = meta.message_offset
        if self._psm is not None:
            self._psm.on_high_watermark_updated(meta.message_offset)
        changes = self.high_watermark_changes
        if changes is not None:
            changes.add(self)

    def maybe_increment_high_watermark(
        self, new_hw: LogOffsetMetadata
    ) -> LogOffsetMetadata | None:
        """Leader: move the HW forward (or to a newer segment at the same offset); old HW or None."""
        if new_hw.message_offset > self.log_end_offset:
            raise ValueError(
                f"high watermark {new_hw} update exceeds current log end offset "
                f"{self.log_end_offset_metadata}"
            )
        old = self.fetch_high_watermark_metadata()
        if old.message_offset < new_hw.message_offset or (
            old.message_offset == new_hw.message_offset and old.on_older_segment(new_hw)
        ):
            self._set_hw(new_hw)
            return old
        return None

    def maybe_update_high_watermark(self, hw: int) -> int | None:
        """Follower: adopt the leader's HW (clamped); the new value if it changed, else None."""
        old = self.high_watermark
        new = self.update_high_watermark(hw)
        return None if new == old else new

    def fetch_high_watermark_metadata(self) -> LogOffsetMetadata:
        """HW with segment/position filled in (resolved through the index when needed)."""
        hw = self._hw
        if hw.message_offset_only:
            if hw.message_offset < self.log_end_offset:
                hw = self.convert_to_offset_metadata(hw.message_offset)
            else:
                hw = self.log_end_offset_metadata
            if hw.message_offset == self.high_watermark:
                self._hw = hw
        return hw

    def convert_to_offset_metadata(self, offset: int) -> LogOffsetMetadata:
        """Segment and position of ``offset`` (OffsetOutOfRangeError outside the log)."""
        if offset < self.log_start_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is below the log start offset {self.log_start_offset} of "
                f"{self.topic}-{self.partition}"
            )
        return self._local_read(offset, 1, self.log_end_offset_metadata, False).fetch_offset_metadata

    # --- log start offset ----------------------------------------------------------------
    def _update_log_start_offset(self, offset: int) -> None:
        self.log_start_offset = offset
        if self.high_watermark < offset:
            self.update_high_watermark(offset)
        if self._recovery_point < offset:
            self._recovery_point = offset
        if self.log_start_listener is not None:
            self.log_start_listener(offset)

    def maybe_increment_log_start_offset(self, new_log_start_offset: int) -> bool:
        """Raise the LSO (DeleteRecords, follower catching up); never above the HW."""
        self._check_open()
        if new_log_start_offset > self.high_watermark:
            raise OffsetOutOfRangeError(
                f"cannot increment the log start offset to {new_log_start_offset} of partition "
                f"{self.topic}-{self.partition} since it is larger than the high watermark "
                f"{self.high_watermark}"
            )
        if new_log_start_offset > self.log_start_offset:
            self._update_log_start_offset(new_log_start_offset)
            self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
            if self._psm is not None:
                self._psm.on_log_start_offset_incremented(new_log_start_offset)
            else:  # what that call leaves in a state with no snapshot
                self._psm_start = new_log_start_offset
            return True
        return False

    # --- retention (storage/retention.py has the rules) --------------------------------------

    def delete_old_segments(self) -> int:
        """One retention check (``UnifiedLog.deleteOldSegments``): segments below the log start
        offset, then, with the ``delete`` cleanup policy, by ``retention.bytes`` and by
        ``retention.ms`` against the clock. Returns the number of segments deleted.

        Deleted segments leave the log at once (the log start offset moves to the first kept
        segment); their files are renamed ``.deleted`` and removed ``file.delete.delay.ms``
        later by :meth:`delete_due_files` (at once when the delay is 0)."""
        self._check_open()
        segments = self.segments
        if type(segments) is _NewLogSegments:
            return 0  # one empty segment, never written: nothing is deletable (and nothing read)
        config = self.config
        if len(segments) == 1 and self._keeps_only_segment(segments, config):
            return 0
        total = self._delete_old_segments(
            retention.log_start_offset_breached(self.log_start_offset))
        if config.delete:
            by_size = retention.retention_size_breached(self.size, int(config.retention_bytes))
            if by_size is not None:
                total += self._delete_old_segments(by_size)
            by_time = retention.retention_ms_breached(self.clock.milliseconds(),
                                                      int(config.retention_ms))
            if by_time is not None:
                total += self._delete_old_segments(by_time)
        return total

    def _keeps_only_segment(self, segments: LogSegments, config: Any) -> bool:
        """Whether no retention rule can delete a log's one segment, decided without the
        general walk: the log-start rule needs a next segment; the other two (``delete``
        policy only) take the last segment only once the high watermark has reached the log
        end and the segment holds bytes (an empty last segment is never deletable); by size
        only when ``retention.bytes`` ≥ 0 (left to the walk); by time when its largest
        timestamp is more than ``retention.ms`` old."""
        if not config.delete or self.high_watermark < self.log_end_offset:
            return True
        seg = segments.last
        if seg.size == 0:
            return True
        if int(config.retention_bytes) >= 0:
            return False
        by_time = retention.retention_ms_breached(self.clock.milliseconds(),
                                                  int(config.retention_ms))
        return by_time is None or not by_time(seg, None)

    def _delete_old_segments(self, predicate: Any) -> int:
        """``deleteOldSegments(predicate)`` + ``deleteSegments``: the deletable prefix goes; when
        that is every segment, a new active segment is rolled first (a log keeps one)."""
        deletable = retention.deletable_segments(list(self.segments), self.log_end_offset,
                                                 self.high_watermark, predicate)
        if not deletable:
            return 0
        to_delete = deletable
        if len(self.segments) == len(deletable):
            new_segment = self.roll()
            if deletable[-1].base_offset == new_segment.base_offset:
                to_delete = deletable[:-1]  # the empty active segment was replaced by the roll
        if to_delete:
            following = self.segments.higher(to_delete[-1].base_offset)
            assert following is not None  # the roll above guarantees a later segment
            self.maybe_increment_log_start_offset(following.base_offset)
            for seg in to_delete:
                self.segments.remove(seg.base_offset)
            self._delete_segment_files_async(to_delete)
            if self._psm is not None:  # no state made yet: no snapshot written
                delete_producer_snapshots(self._psm, [seg.base_offset for seg in to_delete])
        return len(deletable)

    def _delete_segment_files_async(self, segments: list[LogSegment]) -> None:
        """``LocalLog.deleteSegmentFiles(asyncDelete = true)``: rename to ``.deleted`` now,
        remove after ``file.delete.delay.ms`` (:meth:`delete_due_files`)."""
        delay = int(self.config.file_delete_delay_ms)
        for seg in segments:
            seg.close_handlers()
            seg.change_file_suffixes("", DELETED_FILE_SUFFIX)
        if delay <= 0:
            for seg in segments:
                seg.delete()
            return
        due = self.clock.milliseconds() + delay
        self._pending_file_deletions += tuple((due, seg) for seg in segments)

    @property
    def next_file_deletion_ms(self) -> int | None:
        """When the earliest ``.deleted`` file of this log is due for removal (None: none)."""
        pending = self._pending_file_deletions
        return min(due for due, _ in pending) if pending else None

    def delete_due_files(self) -> int:
        """Remove the ``.deleted`` segments whose ``file.delete.delay.ms`` has passed (Kafka's
        scheduled ``delete-file`` task); returns how many segments were removed."""
        pending = self._pending_file_deletions
        if not pending:
            return 0
        now = self.clock.milliseconds()
        due = [seg for at, seg in pending if at <= now]
        self._pending_file_deletions = tuple((at, seg) for at, seg in pending if at > now)
        for seg in due:
            seg.delete()
        return len(due)

    # --- read (§3.2) --------------------------------------------------------------------
    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        isolation: str = "log_end",
        min_one_message: bool = True,
    ) -> FetchDataInfo:
        """Bytes from the batch containing ``offset`` up to the isolation bound (§3.2).

        ``isolation="log_end"`` (followers) reads up to the LEO, ``"high_watermark"`` (consumers)
        up to the HW. Raises :class:`OffsetOutOfRangeError` below the log start offset or above
        the LEO; an offset between the bound and the LEO gives empty records.
        """
        if offset < self.log_start_offset:
            raise OffsetOutOfRangeError(
                f"received request for offset {offset} for partition {self.topic}-{self.partition}, "
                f"but we only have log segments starting from offset: {self.log_start_offset}."
            )
        if isolation == "log_end":
            max_meta = self.log_end_offset_metadata
        elif isolation == "high_watermark":
            max_meta = self.fetch_high_watermark_metadata()
        else:
            raise ValueError(f"isolation must be one of {_ISOLATIONS}, not {isolation!r}")
        return self._local_read(offset, max_bytes, max_meta, min_one_message)

    def _local_read(
        self,
        start_offset: int,
        max_length: int,
        max_meta: LogOffsetMetadata,
        min_one_message: bool,
    ) -> FetchDataInfo:
        end_offset = self.log_end_offset
        segments = self.segments
        if (start_offset == max_meta.message_offset and type(segments) is _NewLogSegments
                and segments.base_offset <= start_offset <= end_offset):
            # the one segment is not made yet: what the checks below give for it, unmade
            return FetchDataInfo(max_meta, b"")
        segment = segments.floor(start_offset)
        if start_offset > end_offset or segment is None:
            raise OffsetOutOfRangeError(
                f"received request for offset {start_offset} for partition "
                f"{self.topic}-{self.partition}, but we only have log segments upto {end_offset}."
            )
        if start_offset == max_meta.message_offset:
            return FetchDataInfo(max_meta, b"")
        if start_offset > max_meta.message_offset:
            return FetchDataInfo(self.convert_to_offset_metadata(start_offset), b"")
        while segment is not None:
            if segment.base_offset < max_meta.segment_base_offset:
                max_position: int | None = segment.size
            elif segment.base_offset == max_meta.segment_base_offset:
                # (a segment's base is >= 0, so such metadata is never offset-only)
                max_position = max_meta.relative_position_in_segment
            else:
                max_position = -1
            data = segment.read(start_offset, max_length, max_position, min_one_message)
            if data is not None:
                return data
            segment = self.segments.higher(segment.base_offset)
        return FetchDataInfo(self.log_end_offset_metadata, b"")

    # --- offsets by timestamp ---------------------------------------------------------
    def offset_for_timestamp(self, target_timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets: first record with timestamp ≥ target (or −1 latest, −2 earliest, −3 max)."""
        cache = self.leader_epoch_cache
        if target_timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            earliest = cache.earliest_entry
            epoch = earliest[0] if earliest is not None and earliest[1] <= self.log_start_offset else None
            return TimestampAndOffset(-1, self.log_start_offset, epoch)
        if target_timestamp == LATEST_TIMESTAMP:
            latest = self.latest_epoch
            return TimestampAndOffset(-1, self.log_end_offset, latest if latest >= 0 else None)
        if target_timestamp == MAX_TIMESTAMP:
            return self._max_timestamp_offset()
        for seg in self.segments:
            if seg.largest_timestamp() >= target_timestamp:
                return self._search_segment_for_timestamp(seg, target_timestamp, self.log_start_offset)
        return None

    def _max_timestamp_offset(self) -> TimestampAndOffset | None:
        best = None
        for seg in self.segments:
            ts = seg.max_timestamp_and_offset_so_far
            if best is None or ts.timestamp > best[1].timestamp:
                best = (seg, ts)
        if best is None or best[1].timestamp < 0:
            return None
        seg, ts = best
        position = int(seg.offset_index.lookup(ts.offset)[1])
        for headers in seg.scan_headers(position):
            rows = np.flatnonzero(headers[:, COL_MAX_TIMESTAMP] == ts.timestamp)
            if rows.size:
                r = int(rows[0])
                epoch = int(headers[r, COL_PARTITION_LEADER_EPOCH])
                return TimestampAndOffset(
                    ts.timestamp, int(last_offsets(headers[r : r + 1])[0]), epoch if epoch >= 0 else None
                )
        return None

    def _search_segment_for_timestamp(
        self, seg: LogSegment, target: int, starting_offset: int
    ) -> TimestampAndOffset | None:
        entry = seg.time_index.lookup(target)
        position = int(seg.offset_index.lookup(max(int(entry[1]), starting_offset))[1])
        for headers in seg.scan_headers(position):
            for r in np.flatnonzero(headers[:, COL_MAX_TIMESTAMP] >= target).tolist():
                pos, size = int(headers[r, COL_POSITION]), int(headers[r, COL_SIZE])
                epoch = int(headers[r, COL_PARTITION_LEADER_EPOCH])
                batch = bytes(seg.log_file.read(pos, size))
                for ts, off in _record_timestamps(batch, self._max_message_bytes):
                    if ts >= target and off >= starting_offset:
                        return TimestampAndOffset(ts, off, epoch if epoch >= 0 else None)
        return None

    # --- truncation (§4.1-4.2) ------------------------------------------------------------
    def truncate_to(self, target_offset: int) -> bool:
        """Keep offsets < ``target_offset``; True if data was removed (§4.1)."""
        self._check_open()
        if target_offset < 0:
            raise ValueError(f"cannot truncate partition {self.topic}-{self.partition} to a negative offset")
        if target_offset >= self.log_end_offset:
            self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
            return False
        if self.segments.first.base_offset > target_offset:
            self.truncate_fully_and_start_at(target_offset)
            return True
        psm = self._producer_state()  # complete up to the LEO before the cut
        doomed = self.segments.after(target_offset)
        for seg in doomed:
            self.segments.remove(seg.base_offset)
        self._delete_segment_files(doomed)
        active = self.segments.last
        active.truncate_to(target_offset)
        active.flush()
        self.medium.fsync_dir(self.dir)
        self._update_log_end_offset(target_offset)
        delete_producer_snapshots(psm, [seg.base_offset for seg in doomed])
        self.leader_epoch_cache.truncate_from_end(target_offset)
        if target_offset < self.log_start_offset:
            self.log_start_offset = target_offset
            if self.log_start_listener is not None:
                self.log_start_listener(target_offset)
        self._rebuild_producer_state(target_offset)
        if self.high_watermark >= self.log_end_offset:
            self._set_hw(self.log_end_offset_metadata)
        return True

    def truncate_fully_and_start_at(self, new_offset: int, log_start_offset: int | None = None) -> None:
        """Drop every segment and start empty at ``new_offset`` (§4.2); the producer state is
        emptied and its snapshots deleted."""
        self._check_open()
        if new_offset < 0:
            raise ValueError("cannot start a log at a negative offset")
        psm = self._producer_state()
        doomed = list(self.segments)
        self.segments.clear()
        self._delete_segment_files(doomed)
        segment = LogSegment.open(self.medium, self.dir, new_offset, self.config, self.clock,
                                  jitter_source=self.jitter_source)
        self.segments.add(segment)
        self.medium.fsync_dir(self.dir)
        self._update_log_end_offset(new_offset)
        self.leader_epoch_cache.clear_and_flush()
        psm.truncate_fully_and_start_at(new_offset)
        self.log_start_offset = new_offset if log_start_offset is None else int(log_start_offset)
        self._rebuild_producer_state(new_offset)
        self.update_high_watermark(self.log_end_offset_metadata)
        if self.log_start_listener is not None:
            self.log_start_listener(self.log_start_offset)

    def _delete_segment_files(self, segments: list[LogSegment]) -> None:
        """Rename to ``.deleted`` then remove (see the module docstring for the step model)."""
        for seg in segments:
            seg.close_handlers()
            seg.change_file_suffixes("", DELETED_FILE_SUFFIX)
        for seg in segments:
            seg.delete()

    # --- producer state ------------------------------------------------------------------
    def _producer_state(self) -> ProducerStateManager:
        """The producer state, complete up to the LEO. A created log makes it on first use:
        nothing to list or load, starting (and counting as snapshotted) where the log started
        or its start last moved to."""
        psm = self._psm
        if psm is None:
            psm = self._psm = ProducerStateManager.for_new_log(
                self.medium, self.dir, self.clock, self._psm_start,
                producer_id_expiration_ms=self._producer_id_expiration_ms)
            if self.log_end_offset == self._psm_start:
                return psm  # made ending at the LEO already
        # Kafka moves the end offset after every append; appends without a producer id skip it
        psm.update_map_end_offset(self.log_end_offset)
        return psm

    @property
    def producer_state(self) -> ProducerStateManager:
        """This log's :class:`~replica_core.storage.producer_state.ProducerStateManager`."""
        return self._producer_state()

    def _rebuild_producer_state(self, last_offset: int) -> None:
        """``UnifiedLog.rebuildProducerState`` after a truncation: reload from the newest
        snapshot at or below ``last_offset`` and replay the log up to it."""
        psm = self._psm
        assert psm is not None
        rebuild_producer_state(
            psm, segment_base_offsets=self.segments.base_offsets(),
            read_batches=functools.partial(_segment_producer_batches, self.segments),
            log_start_offset=self.log_start_offset, last_offset=last_offset)

    def remove_expired_producers(self, now_ms: int | None = None) -> list[int]:
        """Forget producers idle for ``producer.id.expiration.ms`` (Kafka's periodic
        ``PeriodicProducerExpirationCheck``); their ids."""
        if self._psm is None:
            return []
        return self._psm.remove_expired_producers(now_ms)

    # --- flush (§2.8) -----------------------------------------------------------------
    def flush(self, offset: int | None = None) -> None:
        """fsync segments below ``offset`` and make it the recovery point.

        ``None`` flushes everything including an empty active segment (Kafka's
        ``flush(forceFlushActiveSegment = true)``), leaving the recovery point at the LEO.
        """
        self._check_open()
        if offset is None:
            flush_offset, new_recovery_point = self.log_end_offset + 1, self.log_end_offset
        else:
            flush_offset = new_recovery_point = int(offset)
        rp = self._recovery_point
        if flush_offset <= rp:
            return
        to_flush = self.segments.values(rp, flush_offset)
        for seg in to_flush:
            seg.flush()
        if any(seg.base_offset >= rp for seg in to_flush):
            self.medium.fsync_dir(self.dir)
        if new_recovery_point > self._recovery_point:
            self._recovery_point = min(new_recovery_point, self.log_end_offset)
            self.last_flush_ms = self.clock.milliseconds()

    def flush_if_due(self) -> bool:
        """The ``flush.ms`` policy (LogManager's flush scheduler): flush when overdue."""
        if self._flush_ms == _LONG_MAX or self.closed:
            return False
        if self.clock.milliseconds() - self.last_flush_ms >= self._flush_ms:
            self.flush(self.log_end_offset)
            return True
        return False

    # --- lifecycle ---------------------------------------------------------------------
    def _check_open(self) -> None:
        if self.closed:
            raise KafkaStorageError(f"log {self.topic}-{self.partition} is closed")

    def close(self) -> None:
        """Snapshot the producer state at the LEO (so the next open scans nothing), then close
        all segments (indexes are trimmed); no flush — call :meth:`flush` first."""
        if self.closed:
            return
        if self._psm is not None or self.log_end_offset > self._psm_start:
            self._producer_state().take_snapshot()
        self.segments.close()
        self.closed = True

    def close_handlers(self) -> None:
        """Close the files without writing anything (Kafka's ``closeHandlers``: the log
        directory went offline, or the process is gone)."""
        if self.closed:
            return
        self.segments.close()
        self.closed = True

    def delete(self) -> None:
        """Close the log and remove its directory with everything in it."""
        if not self.closed:
            self.segments.close()
            self.closed = True
        self.segments.clear()
        self.medium.rmtree(self.dir)


def _record_timestamps(batch: bytes, max_record_bytes: int) -> list[tuple[int, int]]:
    """(timestamp, offset) of every record of one batch, decompressing when needed (at most
    record count × ``max_record_bytes``, the topic's ``max.message.bytes``)."""
    b = _records().batch_at(batch)
    rows = b.records(max_record_bytes) if b.magic == 2 else b.records()
    return [(r.timestamp, r.offset) for r in rows]

