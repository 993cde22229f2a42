"""Append-time validation and leader offset assignment (§2.2-§2.4, errors per §2.9).

``analyze_and_validate`` is ``UnifiedLog.analyzeAndValidateRecords`` (every origin, before the
log lock); ``trim_invalid_bytes`` is ``trimInvalidBytes``; ``validate_and_assign_offsets`` is
``LogValidator.validateMessagesAndAssignOffsets`` for a topic on message format v2. Batch headers
come from one scan-kernel call; record-level checks run in ``check_records`` and the in-place
rewrite in ``stamp_batch``, so the common paths do no per-record Python work. Only a rebuild
(codec change, out-of-order inner offsets, legacy input) walks records in Python, as Kafka
rebuilds with a ``MemoryRecordsBuilder``.

The overwhelmingly common leader append - one v2 batch, uncompressed or kept in its codec - runs
in ONE call of the fused kernel ``leader_append_fast`` (``analyze_validate_and_assign`` for the
log; ``validate_and_assign_offsets`` tries it first too). The kernel only accepts what it can
finish exactly as the general path would; for anything else, any error included, it answers with
a status and the general path runs, so errors are always raised by the code below.
"""
from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from replica_core.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    LogSegmentOffsetOverflowError,
    OffsetsOutOfOrderError,
    RecordTooLargeError,
    RecordValidationError,
)
from replica_core.records.batch import (
    BATCH_OVERHEAD,
    CRC_START,
    MAX_FRAME_SIZE,
    _corrupt_frame_message,
    _crc32c,
    _view,
    kernels,
)
from replica_core.records.builder import (
    ATTR_CONTROL,
    ATTR_LOG_APPEND_TIME,
    ATTR_TRANSACTIONAL,
    assemble_batch,
    encode_record,
    timestamp_type_of,
)
from replica_core.records.compression import (
    CODEC_NAMES,
    NONE,
    codec_id,
    decompress,
    decompressed_limit,
)
from replica_core.records.legacy import LegacyBatch
from replica_core.records.record import NO_TIMESTAMP
from replica_core.records.varint import encode_varint

if TYPE_CHECKING:
    from typing_extensions import Buffer

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "ORIGINS",
    "LogAppendInfo",
    "ValidationResult",
    "analyze_and_validate",
    "analyze_follower_batch",
    "analyze_validate_and_assign",
    "fast_target_codec",
    "trim_invalid_bytes",
    "validate_and_assign_offsets",
]

DEFAULT_MAX_MESSAGE_BYTES = 1048588     # max.message.bytes
ORIGINS = ("client", "replication", "coordinator")
LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)
_COUNT = struct.Struct(">i")            # recordCount, at byte 57 of a v2 header
# The attribute bits computeAttributes() writes: codec, timestamp type, transactional,
# control, delete horizon (bits 7-15 are dropped whenever Kafka rewrites the attributes).
_KEPT_ATTRIBUTES = 0x77

C = kernels
_FAST_OK = kernels.FAST_OK
_FAST_NEED_RECORDS = kernels.FAST_NEED_RECORDS
_leader_append_fast = kernels.leader_append_fast
_validate_assign_fast = kernels.validate_assign_fast
_scan_one_v2_batch = kernels.scan_one_v2_batch
# timestamp_type spellings timestamp_type_of() accepts, as they usually come (exact strings)
_FAST_TIMESTAMP_TYPES = {"create": False, "CreateTime": False, "log_append": True,
                         "LogAppendTime": True}
# compression.type spellings with a fast-path target codec (−1: keep the producer's), exact
_FAST_TARGETS = {"producer": -1, **{name: cid for cid, name in CODEC_NAMES.items()}}
# append origins by exact name → "client" rules apply
_ORIGIN_CLIENT = {"client": True, "replication": False, "coordinator": False}
# What a bad argument makes the kernel raise; the general path then raises its own error.
_FAST_ARG_ERRORS = (OverflowError, TypeError, BufferError, ValueError)
_COL_BASE_OFFSET = kernels.COL_BASE_OFFSET
_COL_LAST_OFFSET_DELTA = kernels.COL_LAST_OFFSET_DELTA
_COL_ATTRIBUTES = kernels.COL_ATTRIBUTES
_COL_SIZE = kernels.COL_SIZE
_COL_CRC_OK = kernels.COL_CRC_OK
_COL_MAX_TIMESTAMP = kernels.COL_MAX_TIMESTAMP
_COL_PARTITION_LEADER_EPOCH = kernels.COL_PARTITION_LEADER_EPOCH
_COL_RECORD_COUNT = kernels.COL_RECORD_COUNT


@dataclass(slots=True)
class LogAppendInfo:
    """What ``analyze_and_validate`` learns from the headers (``LogAppendInfo.java``).

    The log updates ``first_offset``, ``last_offset``, ``max_timestamp``,
    ``shallow_offset_of_max_timestamp`` and ``log_append_time`` after offset assignment.
    """

    first_offset: int
    last_offset: int
    last_leader_epoch: int
    max_timestamp: int
    shallow_offset_of_max_timestamp: int
    log_append_time: int
    source_compression: str
    valid_bytes: int
    shallow_count: int
    num_records: int
    last_offset_of_first_batch: int
    offsets_monotonic: bool

    @property
    def first_or_last_offset_of_first_batch(self) -> int:
        """``firstOffset`` if known (v2), else the first batch's last offset."""
        return self.first_offset if self.first_offset >= 0 else self.last_offset_of_first_batch

    @property
    def num_messages(self) -> int:
        """``lastOffset - firstOffset + 1``: an upper bound (offsets may have gaps)."""
        return self.last_offset - self.first_offset + 1


@dataclass(slots=True)
class ValidationResult:
    """The leader's validated records and where their offsets and timestamps ended up.

    ``log_append_time`` is ``now_ms`` on a LogAppendTime topic, else -1 (the value the log
    puts in ``LogAppendInfo.logAppendTime``); ``shallow_offset_of_max_timestamp`` is the last
    offset of the (single, v2) batch.
    """

    buffer: bytes | bytearray
    first_offset: int
    last_offset: int
    max_timestamp: int
    shallow_offset_of_max_timestamp: int
    log_append_time: int
    message_size_maybe_changed: bool
    num_records: int


def _check_origin(origin: str) -> None:
    if origin not in ORIGINS:
        raise ValueError(f"unknown append origin {origin!r}; expected one of {ORIGINS}")


# --- §2.2 ------------------------------------------------------------------------------------
def analyze_and_validate(buffer: Buffer, origin: str, *,
                         max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                         ignore_record_size: bool = False) -> LogAppendInfo:
    """Header-level checks of an append, in Kafka's order for each batch: client batches (v2)
    must have baseOffset 0 (``InvalidRecordError``), size <= ``max_message_bytes`` unless
    ignored (``RecordTooLargeError``), valid CRC and size >= 61 (``CorruptRecordError``). A
    corrupt frame raises ``CorruptRecordError``; a partial trailing batch is left out of
    ``valid_bytes``. For ``origin == "replication"`` (the follower path) offsets must increase
    (``OffsetsOutOfOrderError``): Kafka's rule is that each batch's last offset exceeds the one
    before; here every v2 batch also has 0 ≤ base ≤ last, and no batch starts below the first
    one (which the log checks against its end offset), so a CRC-valid batch with a negative
    ``lastOffsetDelta`` never reaches the segment, whose LEO and index would go backwards.
    """
    _check_origin(origin)
    mv = _view(buffer)
    headers, valid_bytes, stop = kernels.scan_batches(mv, 0, -1, True, MAX_FRAME_SIZE)
    # One pass over plain ints: appends carry one to a few hundred batches, where per-call
    # numpy overhead would cost more than the loop.
    rows = headers.tolist()
    client = origin == "client"
    follower = origin == "replication"
    lasts: list[int] = []
    monotonic = True
    prev_last = -1
    ordered = True  # the follower's stricter rule (see above): no base below this floor
    floor = max(rows[0][C.COL_BASE_OFFSET], 0) if follower and rows else 0
    max_timestamp, shallow = NO_TIMESTAMP, -1
    num_records = 0
    source_codec = 0
    for row in rows:
        magic, size, base = row[C.COL_MAGIC], row[C.COL_SIZE], row[C.COL_BASE_OFFSET]
        v2 = magic >= 2
        last = base + row[C.COL_LAST_OFFSET_DELTA] if v2 and size >= BATCH_OVERHEAD else base
        codec = row[C.COL_ATTRIBUTES] & 0x07
        # The first batch failing any check raises that check's error (checks in Kafka's order).
        if client and v2 and base != 0:
            raise InvalidRecordError(
                "The baseOffset of the record batch in the append should be 0, but it is "
                f"{base}")
        if not ignore_record_size and size > max_message_bytes:
            raise RecordTooLargeError(
                f"The record batch size in the append is {size} bytes which exceeds "
                f"the maximum configured value of {max_message_bytes}.")
        if row[C.COL_CRC_OK] != 1:
            raise CorruptRecordError(f"Record is corrupt (stored crc = {row[C.COL_CRC]})")
        if codec > 4:
            codec_id(codec)  # raises UnsupportedCompressionTypeError
        if last <= prev_last:
            monotonic = False
        if follower and (last < base or base < floor):
            ordered = False
        prev_last = last
        lasts.append(last)
        if v2:
            batch_max_ts, count = row[C.COL_MAX_TIMESTAMP], row[C.COL_RECORD_COUNT]
        else:
            lb = LegacyBatch(mv, row[C.COL_POSITION], size)
            batch_max_ts, count = _legacy_shallow_timestamp(lb), _legacy_count(lb)
        if batch_max_ts > max_timestamp:  # strictly greater: ties keep the earliest batch
            max_timestamp, shallow = batch_max_ts, last
        num_records += count
        if codec:
            source_codec = codec
    if stop == C.STOP_CORRUPT:
        raise CorruptRecordError(_corrupt_frame_message(mv, int(valid_bytes)))
    if follower and not (monotonic and ordered):
        firsts = [r[C.COL_BASE_OFFSET] for r in rows[:20]]
        raise OffsetsOutOfOrderError(
            "Out of order offsets found in append to the follower (first offsets "
            f"{firsts}, last offsets {lasts[:20]})")
    n = len(rows)
    return LogAppendInfo(
        first_offset=rows[0][C.COL_BASE_OFFSET] if n and rows[0][C.COL_MAGIC] >= 2 else -1,
        last_offset=lasts[-1] if n else -1,
        last_leader_epoch=rows[-1][C.COL_PARTITION_LEADER_EPOCH] if n else -1,
        max_timestamp=max_timestamp,
        shallow_offset_of_max_timestamp=shallow,
        log_append_time=NO_TIMESTAMP,
        source_compression=CODEC_NAMES[source_codec],
        valid_bytes=int(valid_bytes),
        shallow_count=n,
        num_records=num_records,
        last_offset_of_first_batch=lasts[0] if n else -1,
        offsets_monotonic=monotonic,
    )


def analyze_follower_batch(buffer: bytes | memoryview) -> tuple[LogAppendInfo, list[int]] | None:
    """The follower's common append - exactly one whole v2 batch - in one header scan: what
    ``analyze_and_validate(buffer, "replication", ignore_record_size=True)`` returns for it, and
    the batch's header row (the kernel's ``COL_*`` columns), from which the log also takes the
    producer fields and the epoch (§2.5, §2.6 step 1).

    None whenever the general path must run: several batches or a partial one, a legacy batch,
    any check failing (bad CRC, unknown codec, a negative base offset or ``lastOffsetDelta``),
    so every error is raised by :func:`analyze_and_validate`, in Kafka's order."""
    if type(buffer) is memoryview and (buffer.format != "B" or buffer.ndim != 1):
        return None  # sized in other units than bytes: the general path casts it
    row = _scan_one_v2_batch(buffer, MAX_FRAME_SIZE)  # None: not exactly one whole v2 batch
    if row is None:
        return None
    base = row[_COL_BASE_OFFSET]
    last = base + row[_COL_LAST_OFFSET_DELTA]
    codec = row[_COL_ATTRIBUTES] & 0x07
    valid_bytes = row[_COL_SIZE]  # the batch is the whole buffer
    if valid_bytes < BATCH_OVERHEAD or row[_COL_CRC_OK] != 1 or codec > 4 or base < 0 \
            or last < base:
        return None
    max_ts = row[_COL_MAX_TIMESTAMP]
    if max_ts > NO_TIMESTAMP:
        shallow = last
    else:
        max_ts = shallow = NO_TIMESTAMP
    return LogAppendInfo(base, last, row[_COL_PARTITION_LEADER_EPOCH], max_ts, shallow,
                         NO_TIMESTAMP, CODEC_NAMES[codec], valid_bytes, 1,
                         row[_COL_RECORD_COUNT], last, True), row


def _legacy_shallow_timestamp(lb: LegacyBatch) -> int:
    try:
        return lb.max_timestamp
    except InvalidRecordError:
        return NO_TIMESTAMP


def _legacy_count(lb: LegacyBatch) -> int:
    """1 for a plain message; a wrapper's inner count when it decodes (else 1)."""
    if lb.attributes & 0x07 == 0:
        return 1
    try:
        return lb.record_count
    except (InvalidRecordError, CorruptRecordError):
        return 1


# --- §2.3 ------------------------------------------------------------------------------------
def trim_invalid_bytes(buffer: Buffer, info: LogAppendInfo) -> memoryview | bytes:
    """The first ``info.valid_bytes`` of ``buffer`` (drops a partial trailing batch);
    ``CorruptRecordError`` if ``valid_bytes < 0``."""
    if info.valid_bytes < 0:
        raise CorruptRecordError(
            f"Cannot append record batch with illegal length {info.valid_bytes}")
    mv = _view(buffer)
    if info.valid_bytes == len(mv):
        return buffer if isinstance(buffer, (bytes, memoryview)) else mv
    return mv[:info.valid_bytes]


# --- the fused fast path (§2.2 + §2.3 + §2.4 for one v2 batch) -------------------------------
def fast_target_codec(target_compression: str) -> int | None:
    """The kernel's ``target_codec`` for a topic's ``compression.type``: −1 for ``"producer"``
    (keep the producer's codec), else the codec id; ``None`` if the name is not a codec (the
    general path raises for it)."""
    if target_compression == "producer":
        return -1
    try:
        return codec_id(target_compression)
    except Exception:  # any failure: leave it to the general path, which raises
        return None


def _run_fast(buffer: Buffer, next_offset: int, leader_epoch: int, now_ms: int, before: int,
              after: int, log_append: bool, compacted: bool, client: bool, analyze: bool,
              max_message_bytes: int, target: int) -> tuple | None:
    """One call of ``leader_append_fast`` (two for a compressed batch: the records are
    decompressed once the header checks passed); the kernel's tuple if it finished, else None."""
    try:
        res = _leader_append_fast(buffer, next_offset, leader_epoch, now_ms, before, after,
                                  log_append, compacted, client, analyze, max_message_bytes,
                                  target)
        if res[0] == _FAST_NEED_RECORDS:
            try:
                mv = _view(buffer)
                limit = decompressed_limit(_COUNT.unpack_from(mv, 57)[0], max_message_bytes)
                area = decompress(res[5], mv[BATCH_OVERHEAD:], max_output=limit)
            except Exception:  # the general path raises the exact error
                return None
            res = _leader_append_fast(buffer, next_offset, leader_epoch, now_ms, before, after,
                                      log_append, compacted, client, analyze,
                                      max_message_bytes, target, area)
    except _FAST_ARG_ERRORS:
        return None
    return res if res[0] == _FAST_OK else None


def analyze_validate_and_assign(
        buffer: Buffer, next_offset: int, leader_epoch: int, now_ms: int,
        origin: str = "client", log_append_time: bool = False,
        timestamp_before_max_ms: int = LONG_MAX, timestamp_after_max_ms: int = LONG_MAX,
        target_codec: int = -1, compacted: bool = False,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> tuple[LogAppendInfo, bytearray, int] | None:
    """The leader's whole validation of one v2 batch in one kernel call: what
    ``analyze_and_validate`` + ``trim_invalid_bytes`` + ``validate_and_assign_offsets`` do,
    for the common case only.

    Returns ``(info, stamped_copy, base_offset)``: ``info`` as the log leaves it after offset
    assignment (first offset ``next_offset``, last offset, max timestamp and its shallow offset,
    ``log_append_time`` = ``now_ms`` on a LogAppendTime topic else −1), the stamped batch, and
    the base offset written into it (the epoch cache's start offset). Returns ``None`` whenever
    the general functions must run instead: not exactly one v2 batch, origin other than
    ``"client"``/``"coordinator"``, a rebuild, producer-set LogAppendTime, or any error (which
    the general functions then raise). Arguments are positional-friendly for the log's hot path;
    ``target_codec`` comes from :func:`fast_target_codec`.
    """
    if origin == "client":
        client = True
    elif origin == "coordinator":
        client = False
    else:
        return None   # unknown origins raise, and the follower path has its own rules
    res = _run_fast(buffer, next_offset, leader_epoch, now_ms, timestamp_before_max_ms,
                    timestamp_after_max_ms, log_append_time, compacted, client, True,
                    max_message_bytes, target_codec)
    if res is None:
        return None
    _, out, last, max_ts, count, codec, base, source_last, source_epoch = res
    # LogAppendInfo as analyze_and_validate builds it, then updated as the log does (§2.4)
    info = LogAppendInfo(next_offset, last, source_epoch, max_ts, last,
                         max_ts if log_append_time else NO_TIMESTAMP, CODEC_NAMES[codec],
                         len(out), 1, count, source_last, source_last > -1)
    return info, out, base


# --- §2.4 ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Topic:
    """The topic settings and request context the record checks need."""

    next_offset: int
    leader_epoch: int
    now: int
    log_append: bool
    before: int
    after: int
    compacted: bool
    client: bool
    max_message_bytes: int

    def bad_timestamp(self, ts: np.ndarray) -> np.ndarray:
        now = np.int64(self.now)
        with np.errstate(over="ignore"):
            return (ts != -1) & (((now - ts) > self.before) | ((ts - now) > self.after))


def validate_and_assign_offsets(
        buffer: Buffer, next_offset: int, leader_epoch: int, now_ms: int, *,
        timestamp_type: str = "create", max_timestamp_difference_ms: int = LONG_MAX,
        timestamp_before_max_ms: int | None = None, timestamp_after_max_ms: int | None = None,
        target_compression: str = "producer", compacted: bool = False, origin: str = "client",
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> ValidationResult:
    """The leader's validation and offset assignment (``LogValidator``, §2.4).

    Offsets start at ``next_offset`` (the LEO). Uncompressed v2 input, and compressed input
    whose codec equals the target with inner offsets 0..n-1, is rewritten in place (base
    offset, leader epoch, timestamp type and max timestamp, CRC). Anything else is rebuilt with
    the target codec (``"producer"`` keeps the producer's), and the rebuilt batch is checked
    against ``max_message_bytes`` (``RecordTooLargeError``). Batch rules raise
    ``InvalidRecordError``; record rules (compacted topics need keys, CreateTime bounds,
    producer-set LogAppendTime) raise ``RecordValidationError`` wrapping
    ``InvalidTimestampError`` if any timestamp failed, else ``InvalidRecordError``.
    """
    before = max_timestamp_difference_ms if timestamp_before_max_ms is None \
        else timestamp_before_max_ms
    after = max_timestamp_difference_ms if timestamp_after_max_ms is None \
        else timestamp_after_max_ms
    # The common case in one fused kernel call. The kernel only accepts int64-sized integers,
    # for which the conversions below cannot fail, so trying it before them changes no error:
    # anything it declines (errors included) takes the general path, which raises them.
    # (Dict lookups of exact strings, one kernel call inline: this glue is per produced batch.)
    if type(timestamp_type) is str and type(target_compression) is str and type(origin) is str:
        log_append = _FAST_TIMESTAMP_TYPES.get(timestamp_type)
        target = _FAST_TARGETS.get(target_compression)
        client = _ORIGIN_CLIENT.get(origin)
        if log_append is not None and target is not None and client is not None:
            try:
                done = _validate_assign_fast(buffer, next_offset, leader_epoch, now_ms, before,
                                             after, log_append, compacted, client,
                                             max_message_bytes, target, ValidationResult)
            except _FAST_ARG_ERRORS:
                done = None
            if done is not None:
                return done
            # compressed input needs its records decompressed; anything else goes general
            res = _run_fast(buffer, next_offset, leader_epoch, now_ms, before, after,
                            log_append, compacted, client, False, max_message_bytes, target)
            if res is not None:
                last = res[2]
                return ValidationResult(res[1], int(next_offset), last, res[3], last,
                                        res[3] if log_append else NO_TIMESTAMP, False, res[4])
    _check_origin(origin)
    # the topic's values, converted in the order (and with the errors) of the general path
    topic = _Topic(int(next_offset), int(leader_epoch), int(now_ms),
                   timestamp_type_of(timestamp_type), int(before), int(after), bool(compacted),
                   origin == "client", int(max_message_bytes))
    return _validate_and_assign_general(buffer, topic, target_compression)


def _validate_and_assign_general(buffer: Buffer, topic: _Topic,
                                 target_compression: str) -> ValidationResult:
    """Every input of :func:`validate_and_assign_offsets`: rebuilds, legacy input, errors."""
    mv = _view(buffer)
    headers, valid_bytes, stop = kernels.scan_batches(mv, 0, -1, False, MAX_FRAME_SIZE)
    if stop == C.STOP_CORRUPT:
        raise CorruptRecordError(_corrupt_frame_message(mv, int(valid_bytes)))
    if len(headers) == 0:
        raise InvalidRecordError("Record batch has no batches at all")
    codecs = [codec_id(int(c) & 0x07) for c in headers[:, C.COL_ATTRIBUTES].tolist()]
    source = next((c for c in reversed(codecs) if c != NONE), NONE)
    target = source if target_compression == "producer" else codec_id(target_compression)
    first = headers[0].tolist()  # plain ints: numpy scalar indexing costs ~100 ns each
    magics = headers[:, C.COL_MAGIC]

    if source == NONE and target == NONE and all(m == 2 for m in magics.tolist()):
        _check_single_batch(headers, source)
        _validate_batch(first, first, topic)
        return _assign_v2(mv, first, topic, target, in_place_allowed=True, compressed_path=False)

    _check_single_batch(headers, source)
    if int(first[C.COL_MAGIC]) == 2:
        _validate_batch(first, first, topic)
        in_place = source == target or (source == NONE and _is_control(first))
        return _assign_v2(mv, first, topic, target, in_place_allowed=in_place,
                          compressed_path=True)
    return _convert_legacy(mv, headers, topic, target)


def _is_control(row: Sequence[int]) -> bool:
    return bool(int(row[C.COL_ATTRIBUTES]) & ATTR_CONTROL)


def _check_single_batch(headers: np.ndarray, source: int) -> None:
    if len(headers) > 1 and (int(headers[0, C.COL_MAGIC]) >= 2 or source != NONE):
        raise InvalidRecordError("Compressed outer record has more than one batch")


def _validate_batch(first: Sequence[int], row: Sequence[int], topic: _Topic) -> None:
    """``LogValidator.validateBatch``: same magic as the first batch; client rules for v2.

    Other origins (the coordinator's own batches) are held to Kafka's offset rules only as far
    as the log needs (our addition): at least one record and ``lastOffsetDelta >= 0``, else the
    stamped batch would end at or below the LEO, or start above its own last offset.
    """
    if int(row[C.COL_MAGIC]) != int(first[C.COL_MAGIC]):
        raise InvalidRecordError(
            f"Batch magic {int(row[C.COL_MAGIC])} is not the same as the first batch's magic "
            f"byte {int(first[C.COL_MAGIC])}")
    if int(row[C.COL_MAGIC]) < 2:
        return
    if int(row[C.COL_SIZE]) < BATCH_OVERHEAD:
        raise CorruptRecordError(f"Record batch size {int(row[C.COL_SIZE])} is less than 61")
    base = int(row[C.COL_BASE_OFFSET])
    count_from_offsets = int(row[C.COL_LAST_OFFSET_DELTA]) + 1
    count = int(row[C.COL_RECORD_COUNT])
    if not topic.client:
        if count_from_offsets <= 0:
            raise InvalidRecordError(
                f"Batch has an invalid offset range: [{base}, {base + count_from_offsets - 1}]")
        if count <= 0:
            raise InvalidRecordError(f"Invalid reported count for record batch: {count}")
        return
    if count_from_offsets <= 0:
        raise InvalidRecordError(
            f"Batch has an invalid offset range: [{base}, {base + count_from_offsets - 1}]")
    if count <= 0:
        raise InvalidRecordError(f"Invalid reported count for record batch: {count}")
    if count_from_offsets != count:
        raise InvalidRecordError(
            f"Inconsistent batch offset range [{base}, {base + count_from_offsets - 1}] and "
            f"count of records {count}")
    if _is_control(row):
        raise InvalidRecordError("Clients are not allowed to write control records")
    if int(row[C.COL_PRODUCER_ID]) >= 0 and int(row[C.COL_BASE_SEQUENCE]) < 0:
        raise InvalidRecordError(
            f"Invalid sequence number {int(row[C.COL_BASE_SEQUENCE])} in record batch with "
            f"producerId {int(row[C.COL_PRODUCER_ID])}")


def _raise_record_errors(key_errors: np.ndarray, ts_errors: np.ndarray, producer_lat: bool,
                         topic: _Topic) -> None:
    """``processRecordErrors``: all failing records of the batch, in one exception."""
    errors: list[tuple[int, str]] = []
    any_ts = False
    for i in np.flatnonzero(key_errors | ts_errors).tolist():
        if key_errors[i]:
            errors.append((i, "Compacted topic cannot accept message without key"))
        else:
            any_ts = True
            if producer_lat:
                errors.append((i, "Invalid timestamp type in message. Producer should not set "
                                  "timestamp type to LogAppendTime."))
            else:
                errors.append((i, f"Timestamp is out of range. The timestamp should be within "
                                  f"[{topic.now - topic.before}, {topic.now + topic.after}]"))
    if not errors:
        return
    if any_ts:
        cause: InvalidRecordError | InvalidTimestampError = InvalidTimestampError(
            "One or more records have been rejected due to invalid timestamp")
    else:
        cause = InvalidRecordError("One or more records have been rejected")
    raise RecordValidationError(cause, errors)


def _check_v2_records(area: Buffer, start: int, end: int, row: Sequence[int],
                      topic: _Topic) -> tuple[int, bool]:
    """§2.4 record checks of one v2 batch via the kernel: ``(max_timestamp, offsets_in_order)``.

    In a batch flagged LogAppendTime every record's timestamp reads as the batch's
    maxTimestamp, so the timestamp rule is decided once for all records.
    """
    count = int(row[C.COL_RECORD_COUNT])
    base_ts = int(row[C.COL_BASE_TIMESTAMP])
    producer_lat = bool(int(row[C.COL_ATTRIBUTES]) & ATTR_LOG_APPEND_TIME)
    check_ts = not topic.log_append and not producer_lat
    max_ts, _, first_error, _, in_order = kernels.check_records(
        area, start, end, count, base_ts, topic.now, topic.before, topic.after, check_ts,
        topic.compacted)
    all_ts_bad = False
    if producer_lat:
        max_ts = int(row[C.COL_MAX_TIMESTAMP]) if count else NO_TIMESTAMP
        if topic.log_append or max_ts == NO_TIMESTAMP:
            all_ts_bad = True   # "Producer should not set timestamp type to LogAppendTime"
        else:
            all_ts_bad = bool(topic.bad_timestamp(np.array([max_ts], dtype=np.int64))[0])
    if (first_error >= 0 or all_ts_bad) and count:
        cols = kernels.decode_records(area, start, end, count, 0, base_ts)
        key_errors = (cols[:, 3] < 0) if topic.compacted else np.zeros(count, dtype=bool)
        if producer_lat:
            ts_errors = np.full(count, all_ts_bad)
        elif check_ts:
            ts_errors = topic.bad_timestamp(cols[:, 1])
        else:
            ts_errors = np.zeros(count, dtype=bool)
        _raise_record_errors(key_errors, ts_errors & ~key_errors,
                             producer_lat and (topic.log_append or max_ts == NO_TIMESTAMP), topic)
    return max(int(max_ts), NO_TIMESTAMP), bool(in_order)


def _check_crc(batch_view: memoryview, row: Sequence[int]) -> None:
    """``CorruptRecordError`` unless the v2 batch's stored CRC matches: checked before a fresh
    CRC is written over its bytes (a rewrite or a rebuild), so none is ever laundered."""
    if _crc32c(batch_view[CRC_START:]) != int(row[C.COL_CRC]):
        raise CorruptRecordError(f"Record is corrupt (stored crc = {int(row[C.COL_CRC])})")


def _check_offsets_fit(first_offset: int, last_offset: int) -> None:
    """Assigned offsets must be Java longs (Kafka's would wrap and fail at the segment), and
    none negative (a coordinator batch whose lastOffsetDelta exceeds its count would start
    below zero; Kafka fails later, in its epoch cache, with IllegalArgumentException)."""
    if not LONG_MIN <= first_offset <= last_offset <= LONG_MAX:
        raise LogSegmentOffsetOverflowError(
            f"Offsets [{first_offset}, {last_offset}] assigned from the log end offset do not "
            "fit a 64-bit offset")
    if first_offset < 0:
        raise InvalidRecordError(
            f"Batch has an invalid offset range: [{first_offset}, {last_offset}]")


def _assign_v2(mv: memoryview, row: Sequence[int], topic: _Topic, target: int, *,
               in_place_allowed: bool, compressed_path: bool) -> ValidationResult:
    pos, size = int(row[C.COL_POSITION]), int(row[C.COL_SIZE])
    if size < BATCH_OVERHEAD:
        raise CorruptRecordError(f"Record batch size {size} is less than 61")
    attributes = int(row[C.COL_ATTRIBUTES])
    source = attributes & 0x07
    batch_view = mv[pos:pos + size]
    count = int(row[C.COL_RECORD_COUNT])
    if source:
        area: Buffer = decompress(source, batch_view[BATCH_OVERHEAD:],
                                  max_output=decompressed_limit(count, topic.max_message_bytes))
        start, end = 0, len(area)
    else:
        area, start, end = batch_view, BATCH_OVERHEAD, size
    max_ts, in_order = _check_v2_records(area, start, end, row, topic)
    in_place = in_place_allowed
    if compressed_path and not (in_order and int(row[C.COL_BASE_OFFSET]) == 0):
        in_place = False   # "Some older clients do not implement the V1 internal offsets"
    if not in_place:
        _check_crc(batch_view, row)
        return _rebuild_v2(area, start, end, row, topic, target)

    last_offset = topic.next_offset + count - 1
    base_offset = last_offset - int(row[C.COL_LAST_OFFSET_DELTA])
    _check_offsets_fit(min(base_offset, topic.next_offset), last_offset)
    new_max = topic.now if topic.log_append else max_ts
    out = bytearray(batch_view)
    if bool(attributes & ATTR_LOG_APPEND_TIME) != topic.log_append or \
            int(row[C.COL_MAX_TIMESTAMP]) != new_max:
        # attributes and max timestamp change: the CRC must be checked, then recomputed
        _check_crc(batch_view, row)
        new_attributes = (attributes & _KEPT_ATTRIBUTES & ~ATTR_LOG_APPEND_TIME) | (
            ATTR_LOG_APPEND_TIME if topic.log_append else 0)
        kernels.stamp_batch(out, 0, base_offset, topic.leader_epoch, new_attributes, new_max)
    else:
        # nothing the CRC covers changes: the producer's CRC stays (Kafka's setMaxTimestamp
        # returns early), only the base offset and the leader epoch are written
        if not -(2**31) <= topic.leader_epoch < 2**31:
            raise InvalidRecordError(f"leader epoch {topic.leader_epoch} does not fit int32")
        struct.pack_into(">q", out, 0, base_offset)
        struct.pack_into(">i", out, 12, topic.leader_epoch)
    # The stamped copy is handed over as is (one copy of the request, as Kafka stamps in place).
    return ValidationResult(
        buffer=out, first_offset=topic.next_offset, last_offset=last_offset,
        max_timestamp=new_max, shallow_offset_of_max_timestamp=last_offset,
        log_append_time=topic.now if topic.log_append else NO_TIMESTAMP,
        message_size_maybe_changed=False, num_records=count)


def _rebuild_v2(area: Buffer, start: int, end: int, row: Sequence[int], topic: _Topic,
                target: int) -> ValidationResult:
    """``buildRecordsAndAssignOffsets``: the records re-encoded with fresh offsets and the
    target codec; producer fields (and the control flag) kept from the input batch."""
    count = int(row[C.COL_RECORD_COUNT])
    base_ts = int(row[C.COL_BASE_TIMESTAMP])
    cols = kernels.decode_records(area, start, end, count, 0, base_ts)
    amv = _view(area)
    if int(row[C.COL_ATTRIBUTES]) & ATTR_LOG_APPEND_TIME:
        timestamps = [int(row[C.COL_MAX_TIMESTAMP])] * count
    else:
        timestamps = cols[:, 1].tolist()
    records = [(
        None if kl < 0 else amv[kp:kp + kl],
        None if vl < 0 else amv[vp:vp + vl],
        encode_varint(hc) + bytes(amv[hp:rec_end]),
    ) for _, _, kp, kl, vp, vl, hp, hc, rec_end in cols.tolist()]
    attributes = int(row[C.COL_ATTRIBUTES]) & (ATTR_TRANSACTIONAL | ATTR_CONTROL)
    return _build_result(records, timestamps, attributes, int(row[C.COL_PRODUCER_ID]),
                         int(row[C.COL_PRODUCER_EPOCH]), int(row[C.COL_BASE_SEQUENCE]), topic,
                         target)


def _build_result(records: list, timestamps: list[int], attributes: int, producer_id: int,
                  producer_epoch: int, base_sequence: int, topic: _Topic,
                  target: int) -> ValidationResult:
    n = len(records)
    if n == 0:
        raise InvalidRecordError("Invalid reported count for record batch: 0")
    _check_offsets_fit(topic.next_offset, topic.next_offset + n - 1)
    first_ts = timestamps[0] if n else NO_TIMESTAMP
    area = bytearray()
    for i, (key, value, header_section) in enumerate(records):
        delta = (timestamps[i] - first_ts + 2**63) % 2**64 - 2**63
        encode_record(area, i, delta, key, value, header_section)
    max_ts = max([NO_TIMESTAMP, *timestamps])
    attributes |= target
    if topic.log_append:
        attributes |= ATTR_LOG_APPEND_TIME
    batch_max = topic.now if topic.log_append else max_ts
    last_offset = topic.next_offset + n - 1
    built = assemble_batch(
        area, count=n, base_offset=topic.next_offset, partition_leader_epoch=topic.leader_epoch,
        attributes=attributes, last_offset_delta=max(n - 1, 0), base_timestamp=first_ts,
        max_timestamp=batch_max, producer_id=producer_id, producer_epoch=producer_epoch,
        base_sequence=base_sequence)
    if len(built) > topic.max_message_bytes:
        raise RecordTooLargeError(
            f"Message batch size is {len(built)} bytes which exceeds the maximum configured "
            f"size of {topic.max_message_bytes}.")
    return ValidationResult(
        buffer=built, first_offset=topic.next_offset, last_offset=last_offset,
        max_timestamp=batch_max, shallow_offset_of_max_timestamp=last_offset,
        log_append_time=topic.now if topic.log_append else NO_TIMESTAMP,
        message_size_maybe_changed=True, num_records=n)


def _convert_legacy(mv: memoryview, headers: np.ndarray, topic: _Topic,
                    target: int) -> ValidationResult:
    """v0/v1 input converted to one v2 batch (``convertAndAssignOffsetsNonCompressed`` and the
    rebuild of ``validateMessagesAndAssignOffsetsCompressed``)."""
    first = headers[0].tolist()  # plain ints: numpy scalar indexing costs ~100 ns each
    records: list = []
    timestamps: list[int] = []
    for row in headers:
        _validate_batch(first, row, topic)
        lb = LegacyBatch(mv, int(row[C.COL_POSITION]), int(row[C.COL_SIZE]))
        lb.ensure_valid()  # converted to v2 under a fresh CRC: the entry's own must hold
        batch_records = list(lb.records(check_crc=lb.compression_id != NONE))
        ts = np.array([r.timestamp for r in batch_records], dtype=np.int64)
        key_errors = np.array([r.key is None for r in batch_records], dtype=bool) \
            if topic.compacted else np.zeros(len(ts), dtype=bool)
        producer_lat = lb.timestamp_type == "log_append"
        if not topic.log_append:
            ts_errors = topic.bad_timestamp(ts)
            lat_errors = (ts == NO_TIMESTAMP) & producer_lat
        else:
            ts_errors = np.zeros(len(ts), dtype=bool)
            lat_errors = np.full(len(ts), producer_lat)
        _raise_record_errors(key_errors, (ts_errors | lat_errors) & ~key_errors,
                             bool(lat_errors.any()), topic)
        for r in batch_records:
            records.append((r.key, r.value, b"\x00"))
            timestamps.append(r.timestamp)
    return _build_result(records, timestamps, 0, -1, -1, -1, topic, target)
