"""Plain-Python twin of ``_batch.pyx``: framing scan, record walks, header stamping and the fused
leader append of one v2 batch.

The reference the compiled kernel is tested against (docs/contracts.md "Batch kernels";
KAFKA_SEMANTICS §1.1-§1.3, §2.2, §2.4). Same functions, same results, same error types. Integer
arithmetic follows Java's: int32/int64 fields wrap in two's complement, varints are read like
``ByteUtils.readVarint``/``readVarlong``.
"""
from __future__ import annotations

import struct
import zlib
from typing import Any

import numpy as np

from replica_core.errors import InvalidRecordError

try:
    from replica_core._fast._crc import crc32c as _crc32c
except ImportError:  # the compiled CRC is optional; the PyPI package is a dependency
    from crc32c import crc32c as _crc32c

# --- constants (docs/contracts.md) ------------------------------------------------------------
(COL_POSITION, COL_SIZE, COL_BASE_OFFSET, COL_LAST_OFFSET_DELTA, COL_PARTITION_LEADER_EPOCH,
 COL_MAGIC, COL_CRC, COL_ATTRIBUTES, COL_BASE_TIMESTAMP, COL_MAX_TIMESTAMP, COL_PRODUCER_ID,
 COL_PRODUCER_EPOCH, COL_BASE_SEQUENCE, COL_RECORD_COUNT, COL_CRC_OK) = range(15)
NCOLS = 15

STOP_END = 0
STOP_PARTIAL = 1
STOP_CORRUPT = 2

RECORD_OK = 0
RECORD_BAD_STRUCTURE = 1
RECORD_BAD_TIMESTAMP = 2
RECORD_NULL_KEY_COMPACTED = 3

# Byte layout (§1.1, §1.3).
LOG_OVERHEAD = 12                 # baseOffset + batchLength
HEADER_SIZE_UP_TO_MAGIC = 17
RECORD_OVERHEAD_V0 = 14           # smallest legal batchLength (a v0 message)
BATCH_OVERHEAD = 61               # v2 header
CRC_START = 21                    # v2 CRC-32C covers [21, size)
LEGACY_CRC_START = 16             # v0/v1 CRC-32 covers [16, size)
LEGACY_V1_MIN_SIZE = 34           # a v1 entry long enough to hold its timestamp field
LEGACY_TIMESTAMP = 18             # where a v1 message keeps its timestamp
MIN_RECORD_BYTES = 7              # length, attributes, ts, offset, key len, value len, count

_V2_HEADER = struct.Struct(">qiibIhiqqqhii")   # the 61-byte header (§1.1)
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")

_M32 = 0xFFFFFFFF
_M64 = 0xFFFFFFFFFFFFFFFF
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _wrap64(v: int) -> int:
    """Java long arithmetic: reduce to a signed 64-bit value."""
    v &= _M64
    return v - (1 << 64) if v >> 63 else v


def _bytes_view(buf: Any) -> memoryview:
    """A flat unsigned-byte view of any buffer (bytes, bytearray, memoryview, mmap, numpy)."""
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    return mv


def _check_int(value: int, lo: int, hi: int, name: str) -> int:
    value = int(value)
    if not lo <= value <= hi:
        raise OverflowError(f"{name} {value} does not fit its C type")
    return value


# --- framing scan (§1.3) -----------------------------------------------------------------------
def _frame(mv: memoryview, start: int, end: int, max_batch_size: int) -> tuple[list[int], int, int]:
    """Positions of the batches framed from ``start``; ByteBufferLogInputStream's check order."""
    positions: list[int] = []
    pos = start
    while True:
        if end - pos < LOG_OVERHEAD:
            stop = STOP_END if pos == end else STOP_PARTIAL
            break
        length = _I32.unpack_from(mv, pos + 8)[0]
        if length < RECORD_OVERHEAD_V0:
            stop = STOP_CORRUPT
            break
        size = length + LOG_OVERHEAD
        if size > max_batch_size:
            stop = STOP_CORRUPT
            break
        if end - pos < HEADER_SIZE_UP_TO_MAGIC:
            stop = STOP_PARTIAL
            break
        magic = mv[pos + 16]
        if magic > 2:  # as a signed byte: < 0 or > 2
            stop = STOP_CORRUPT
            break
        if size > end - pos:
            stop = STOP_PARTIAL
            break
        positions.append(pos)
        pos += size
    return positions, pos, stop


def scan_batches(buf: Any, start: int = 0, end: int = -1, check_crc: bool = True,
                 max_batch_size: int = 2**31 - 1) -> tuple[np.ndarray, int, int]:
    """Frame the batches in ``buf[start:end]``: ``(headers[n, NCOLS], valid_bytes, stop)``."""
    mv = _bytes_view(buf)
    n_bytes = len(mv)
    start = _check_int(start, _INT64_MIN, _INT64_MAX, "start")
    end = _check_int(end, _INT64_MIN, _INT64_MAX, "end")
    max_batch_size = _check_int(max_batch_size, _INT64_MIN, _INT64_MAX, "max_batch_size")
    if end == -1:
        end = n_bytes
    if start < 0 or end < start or end > n_bytes:
        raise ValueError(f"scan range [{start}, {end}) is not within a buffer of {n_bytes} bytes")
    positions, valid_end, stop = _frame(mv, start, end, max_batch_size)
    headers = np.full((len(positions), NCOLS), -1, dtype=np.int64)
    for i, pos in enumerate(positions):
        size = _I32.unpack_from(mv, pos + 8)[0] + LOG_OVERHEAD
        magic = mv[pos + 16]
        row = headers[i]
        if magic == 2:
            if size >= BATCH_OVERHEAD:
                (base_offset, _, epoch, _, crc, attributes, last_delta, base_ts, max_ts,
                 producer_id, producer_epoch, base_sequence, count) = _V2_HEADER.unpack_from(mv, pos)
                row[:] = (pos, size, base_offset, last_delta, epoch, magic, crc, attributes,
                          base_ts, max_ts, producer_id, producer_epoch, base_sequence, count, -1)
                if check_crc:
                    row[COL_CRC_OK] = int(_crc32c(mv[pos + CRC_START:pos + size]) == crc)
            else:
                row[COL_POSITION] = pos
                row[COL_SIZE] = size
                row[COL_BASE_OFFSET] = _I64.unpack_from(mv, pos)[0]
                row[COL_MAGIC] = magic
                row[COL_CRC_OK] = 0
        else:
            crc = _U32.unpack_from(mv, pos + 12)[0]
            row[COL_POSITION] = pos
            row[COL_SIZE] = size
            row[COL_BASE_OFFSET] = _I64.unpack_from(mv, pos)[0]
            row[COL_MAGIC] = magic
            row[COL_CRC] = crc
            row[COL_ATTRIBUTES] = mv[pos + 17]
            # a v1 entry's max timestamp is its (wrapper) message's timestamp
            # (AbstractLegacyRecordBatch.maxTimestamp); v0 has none (-1)
            if magic == 1 and size >= LEGACY_V1_MIN_SIZE:
                row[COL_MAX_TIMESTAMP] = _I64.unpack_from(mv, pos + LEGACY_TIMESTAMP)[0]
            if check_crc:
                row[COL_CRC_OK] = int(zlib.crc32(mv[pos + LEGACY_CRC_START:pos + size]) == crc)
    return headers, valid_end - start, stop


def scan_one_v2_batch(buf: Any, max_batch_size: int = 2**31 - 1) -> list[int] | None:
    """``buf`` framed as exactly one whole v2 batch: its header row (CRC checked) as a list,
    the one row ``scan_batches(buf, 0, -1, True, max_batch_size)`` gives when it frames one
    batch and stops at the end of ``buf``; None for anything else (no batch, several, a
    partial or corrupt frame, a legacy batch)."""
    headers, _, stop = scan_batches(buf, 0, -1, True, max_batch_size)
    if stop != STOP_END or len(headers) != 1 or headers[0, COL_MAGIC] != 2:
        return None
    return [int(v) for v in headers[0].tolist()]


def find_batch(buf: Any, start: int, end: int, target_offset: int
               ) -> tuple[int, int, int, int, int]:
    """The first framed batch from ``start`` whose last offset ≥ ``target_offset`` (Kafka's
    ``FileRecords.searchForOffsetWithSize`` over one buffer):
    ``(position, size, last_offset, valid_bytes, stop)``, position -1 when none; ``valid_bytes``
    and ``stop`` are then as ``scan_batches`` reports them."""
    mv = _bytes_view(buf)
    if end == -1:
        end = len(mv)
    if start < 0 or end < start or end > len(mv):
        raise ValueError(f"scan range [{start}, {end}) is not within a buffer of {len(mv)} bytes")
    positions, valid_end, stop = _frame(mv, start, end, 2**31 - 1)
    for pos in positions:
        size = _I32.unpack_from(mv, pos + 8)[0] + LOG_OVERHEAD
        last = _I64.unpack_from(mv, pos)[0]
        if mv[pos + 16] == 2:
            # v2: plus lastOffsetDelta; a length too short for the header has none (-1)
            last = _wrap64(last + (_I32.unpack_from(mv, pos + 23)[0]
                                   if size >= BATCH_OVERHEAD else -1))
        if last >= target_offset:
            return pos, size, last, pos + size - start, STOP_END
    return -1, -1, -1, valid_end - start, stop


# --- record walks (§1.2, §2.4) -----------------------------------------------------------------
class _Walk(Exception):
    """A structural problem found while walking; becomes InvalidRecordError with a message."""


def _varint(mv: memoryview, p: int, lim: int) -> tuple[int, int]:
    """Zig-zag varint at ``p`` (bounded by ``lim``): (value, next position).

    Like Java, the 5th byte contributes only its low 4 bits; a continuation bit there fails.
    """
    if p >= lim:
        raise _Walk("a varint runs past the end")
    b = mv[p]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), p + 1
    raw = 0
    shift = 0
    while True:
        if p >= lim:
            raise _Walk("a varint runs past the end")
        b = mv[p]
        p += 1
        if shift == 28:
            if b & 0x80:
                raise _Walk("varint longer than 5 bytes")
            raw |= (b << 28) & _M32
            break
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
    return (raw >> 1) ^ -(raw & 1), p


def _varlong(mv: memoryview, p: int, lim: int) -> tuple[int, int]:
    """Zig-zag varlong at ``p``: the 10th byte contributes only its low bit."""
    if p >= lim:
        raise _Walk("a varlong runs past the end")
    b = mv[p]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), p + 1
    raw = 0
    shift = 0
    while True:
        if p >= lim:
            raise _Walk("a varlong runs past the end")
        b = mv[p]
        p += 1
        if shift == 63:
            if b & 0x80:
                raise _Walk("varlong longer than 10 bytes")
            raw |= (b << 63) & _M64
            break
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
    return (raw >> 1) ^ -(raw & 1), p


def _parse_record(mv: memoryview, p: int, area_end: int) -> tuple[int, ...]:
    """One record at ``p``: (ts_delta, offset_delta, key_pos, key_len, value_pos, value_len,
    headers_pos, header_count, end). Every field is bounded by the record's length prefix."""
    body_len, p = _varint(mv, p, area_end)
    if body_len < 0 or body_len > area_end - p:
        raise _Walk(f"Invalid record size: {body_len} body bytes, negative or more than remain")
    lim = p + body_len
    if p >= lim:
        raise _Walk("a field runs past the end of the record")
    p += 1  # attributes: unused in v2
    ts_delta, p = _varlong(mv, p, lim)
    offset_delta, p = _varint(mv, p, lim)
    key_len, p = _varint(mv, p, lim)
    key_pos = p
    if key_len >= 0:
        if key_len > lim - p:
            raise _Walk("the key runs past the end of the record")
        p += key_len
    elif key_len != -1:
        raise _Walk(f"Invalid negative key length {key_len}")
    value_len, p = _varint(mv, p, lim)
    value_pos = p
    if value_len >= 0:
        if value_len > lim - p:
            raise _Walk("the value runs past the end of the record")
        p += value_len
    elif value_len != -1:
        raise _Walk(f"Invalid negative value length {value_len}")
    header_count, p = _varint(mv, p, lim)
    if header_count < 0:
        raise _Walk(f"Found invalid number of record headers {header_count}")
    headers_pos = p
    for _ in range(header_count):
        hkey_len, p = _varint(mv, p, lim)
        if hkey_len < 0:
            raise _Walk(f"Invalid negative header key size {hkey_len}")
        if hkey_len > lim - p:
            raise _Walk("a header key runs past the end of the record")
        p += hkey_len
        hval_len, p = _varint(mv, p, lim)
        # Kafka reads any negative header value length as a null value.
        if hval_len > 0:
            if hval_len > lim - p:
                raise _Walk("a header value runs past the end of the record")
            p += hval_len
    if p != lim:
        raise _Walk(f"Invalid record size: declared {body_len} body bytes but its fields end "
                    "elsewhere")
    return (ts_delta, offset_delta, key_pos, key_len, value_pos, value_len, headers_pos,
            header_count, lim)


def _check_area(n: int, start: int, end: int, count: int) -> None:
    if start < 0 or end < start or end > n:
        raise ValueError(f"record area [{start}, {end}) is not within a buffer of {n} bytes")
    if count < 0:
        raise InvalidRecordError(f"Found invalid record count {count}")
    if count > (end - start) // MIN_RECORD_BYTES:
        raise InvalidRecordError(
            f"Found invalid record structure: {count} records need at least "
            f"{count * MIN_RECORD_BYTES} bytes but the record area holds {end - start}")


def _walk(mv: memoryview, start: int, end: int, count: int):
    """Yield each parsed record of ``buf[start:end]``; structural errors raise InvalidRecordError."""
    p = start
    i = 0
    try:
        for i in range(count):
            if p >= end:
                raise _Walk(f"Found invalid record structure: expected {count} records but the "
                            f"record area ends after {i}")
            rec = _parse_record(mv, p, end)
            yield rec
            p = rec[8]
        if p != end:
            raise InvalidRecordError(
                f"Incorrect declared batch size, records still remaining in file: {end - p} "
                f"bytes left after {count} records (byte {p})")
    except _Walk as exc:
        raise InvalidRecordError(f"{exc} (record {i} at byte {p})") from None


def decode_records(buf: Any, start: int, end: int, count: int, base_offset: int,
                   base_timestamp: int) -> np.ndarray:
    """Walk ``count`` v2 records in ``buf[start:end]``: an int64 array of shape ``(count, 9)``."""
    mv = _bytes_view(buf)
    start = _check_int(start, _INT64_MIN, _INT64_MAX, "start")
    end = _check_int(end, _INT64_MIN, _INT64_MAX, "end")
    count = _check_int(count, _INT64_MIN, _INT64_MAX, "count")
    base_offset = _check_int(base_offset, _INT64_MIN, _INT64_MAX, "base_offset")
    base_timestamp = _check_int(base_timestamp, _INT64_MIN, _INT64_MAX, "base_timestamp")
    _check_area(len(mv), start, end, count)
    rows = [(_wrap64(base_offset + r[1]), _wrap64(base_timestamp + r[0]), r[2], r[3], r[4],
             r[5], r[6], r[7], r[8]) for r in _walk(mv, start, end, count)]
    return np.array(rows, dtype=np.int64).reshape(count, 9)


def check_records(buf: Any, start: int, end: int, count: int, base_timestamp: int, now_ms: int,
                  before_max_ms: int, after_max_ms: int, check_timestamps: bool,
                  require_keys: bool) -> tuple[int, int, int, int, int]:
    """One pass of the §2.4 record checks: ``(max_timestamp, offset_delta_of_max,
    first_error_index, error_kind, inner_offsets_in_order)``."""
    mv = _bytes_view(buf)
    start = _check_int(start, _INT64_MIN, _INT64_MAX, "start")
    end = _check_int(end, _INT64_MIN, _INT64_MAX, "end")
    count = _check_int(count, _INT64_MIN, _INT64_MAX, "count")
    base_timestamp = _check_int(base_timestamp, _INT64_MIN, _INT64_MAX, "base_timestamp")
    now_ms = _check_int(now_ms, _INT64_MIN, _INT64_MAX, "now_ms")
    before_max_ms = _check_int(before_max_ms, _INT64_MIN, _INT64_MAX, "before_max_ms")
    after_max_ms = _check_int(after_max_ms, _INT64_MIN, _INT64_MAX, "after_max_ms")
    _check_area(len(mv), start, end, count)
    max_ts = -1
    od_max = -1
    first_error = -1
    error_kind = RECORD_OK
    in_order = 1
    for i, r in enumerate(_walk(mv, start, end, count)):
        ts = _wrap64(base_timestamp + r[0])
        if r[1] != i:
            in_order = 0
        if i == 0 or ts > max_ts:
            max_ts = ts
            od_max = r[1]
        if first_error < 0:
            # Kafka's validateRecord checks the key before the timestamp.
            kind = RECORD_OK
            if require_keys and r[3] < 0:
                kind = RECORD_NULL_KEY_COMPACTED
            elif check_timestamps and ts != -1 and (
                    _wrap64(now_ms - ts) > before_max_ms or _wrap64(ts - now_ms) > after_max_ms):
                kind = RECORD_BAD_TIMESTAMP
            if kind != RECORD_OK:
                first_error = i
                error_kind = kind
    return max_ts, od_max, first_error, error_kind, in_order


# --- stamping (§2.4 in-place path) -------------------------------------------------------------
def stamp_batch(buf_writable: Any, pos: int, base_offset: int, partition_leader_epoch: int,
                attributes: int, max_timestamp: int) -> int:
    """Rewrite a v2 header in place (offset, epoch, attributes, max timestamp) and its CRC."""
    mv = _bytes_view(buf_writable)
    if mv.readonly:
        raise ValueError("buffer source array is read-only")
    pos = _check_int(pos, _INT64_MIN, _INT64_MAX, "pos")
    base_offset = _check_int(base_offset, _INT64_MIN, _INT64_MAX, "base_offset")
    partition_leader_epoch = _check_int(partition_leader_epoch, _INT32_MIN, _INT32_MAX,
                                        "partition_leader_epoch")
    attributes = _check_int(attributes, _INT64_MIN, _INT64_MAX, "attributes")
    max_timestamp = _check_int(max_timestamp, _INT64_MIN, _INT64_MAX, "max_timestamp")
    n = len(mv)
    if pos < 0 or n - pos < BATCH_OVERHEAD:
        raise InvalidRecordError(f"no v2 batch header at byte {pos}: the buffer holds {n} bytes")
    size = _I32.unpack_from(mv, pos + 8)[0] + LOG_OVERHEAD
    if mv[pos + 16] != 2:
        raise InvalidRecordError(f"batch at byte {pos} has magic {mv[pos + 16]}, not 2")
    if size < BATCH_OVERHEAD or size > n - pos:
        raise InvalidRecordError(
            f"batch at byte {pos} declares {size} bytes; {n - pos} available, 61 needed")
    struct.pack_into(">q", mv, pos, base_offset)
    struct.pack_into(">i", mv, pos + 12, partition_leader_epoch)
    struct.pack_into(">H", mv, pos + 21, attributes & 0xFFFF)
    struct.pack_into(">q", mv, pos + 35, max_timestamp)
    crc = _crc32c(mv[pos + CRC_START:pos + size])
    struct.pack_into(">I", mv, pos + 17, crc)
    return crc


# --- fused leader append of one v2 batch (§2.2 + §2.4, the common case) ------------------------
FAST_OK = 0
FAST_NEED_RECORDS = 1
FAST_UNSUPPORTED = 2
FAST_REJECTED = 3

_ATTR_CODEC_MASK = 0x07
_ATTR_LOG_APPEND_TIME = 0x08
_ATTR_CONTROL = 0x20
_KEPT_ATTRIBUTES = 0x77      # the bits Kafka's computeAttributes() keeps when it rewrites them
_MAX_CODEC = 4
_FAST_HEADER = struct.Struct(">qiibIhiqqqhii")
_NOT_OK = (-1, -1, -1, -1, -1, -1, -1)


def _fast_header(mv: memoryview, n: int, next_offset: int, leader_epoch: int, client: bool,
                 analyze: bool, max_message_bytes: int, target_codec: int):
    """Steps 1-5 of the contract: ``(status, header fields...)``; the CRC is checked after."""
    if n < BATCH_OVERHEAD or _I32.unpack_from(mv, 8)[0] + LOG_OVERHEAD != n or mv[16] != 2:
        return (FAST_UNSUPPORTED,)
    (base, _, epoch, _, _, attributes, lod, base_ts, max_ts, pid, _, seq,
     count) = _FAST_HEADER.unpack_from(mv, 0)
    codec = attributes & _ATTR_CODEC_MASK
    if analyze and ((client and base != 0) or n > max_message_bytes):
        return (FAST_REJECTED,)
    if codec > _MAX_CODEC:
        return (FAST_REJECTED,)
    if client:
        if (lod + 1 <= 0 or count <= 0 or lod + 1 != count or attributes & _ATTR_CONTROL
                or (pid >= 0 and seq < 0)):
            return (FAST_REJECTED,)
    elif count <= 0 or lod < 0:
        # no record, or a last offset below the base: the batch would sit at or below the LEO
        return (FAST_REJECTED,)
    if attributes & _ATTR_LOG_APPEND_TIME:
        return (FAST_UNSUPPORTED,)    # producer-set LogAppendTime: decided per topic, in Python
    if 0 <= target_codec != codec:
        return (FAST_UNSUPPORTED,)    # recompression
    if not _INT32_MIN <= leader_epoch <= _INT32_MAX:
        return (FAST_UNSUPPORTED,)
    last = next_offset + count - 1
    out_base = last - lod
    source_last = base + lod
    if not (_INT64_MIN <= last <= _INT64_MAX and _INT64_MIN <= out_base <= _INT64_MAX):
        return (FAST_UNSUPPORTED,)
    if out_base < 0:
        return (FAST_REJECTED,)       # no offset is negative (the general path says why)
    if not _INT64_MIN <= source_last <= _INT64_MAX:
        return (FAST_UNSUPPORTED,)
    return (FAST_OK, base, epoch, attributes, lod, base_ts, max_ts, count, codec, last,
            out_base, source_last)


def validate_assign_fast(buf: Any, next_offset: int, leader_epoch: int, now_ms: int,
                         before_max_ms: int, after_max_ms: int, log_append_time: bool,
                         compacted: bool, client: bool, max_message_bytes: int,
                         target_codec: int, result_type: Any) -> Any:
    """:func:`leader_append_fast` (no CRC check) for ``records.validate_and_assign_offsets``:
    ``result_type(out, next_offset, last_offset, max_timestamp, last_offset,
    log_append_time_or_-1, False, count)`` when it finished, else None."""
    res = leader_append_fast(buf, next_offset, leader_epoch, now_ms, before_max_ms,
                             after_max_ms, log_append_time, compacted, client, False,
                             max_message_bytes, target_codec)
    if res[0] != FAST_OK:
        return None
    last, new_max = res[2], res[3]
    return result_type(res[1], int(next_offset), last, new_max, last,
                       new_max if log_append_time else -1, False, res[4])


def leader_append_fast(buf: Any, next_offset: int, leader_epoch: int, now_ms: int,
                       before_max_ms: int, after_max_ms: int, log_append_time: bool,
                       compacted: bool, client: bool, analyze: bool, max_message_bytes: int,
                       target_codec: int, records: Any = None) -> tuple:
    """The leader's append of one v2 batch in one pass (contract: "Batch kernels"):
    ``(status, out, last_offset, max_timestamp, count, codec, base_offset,
    source_last_offset, source_leader_epoch)``."""
    mv = _bytes_view(buf)
    next_offset = _check_int(next_offset, _INT64_MIN, _INT64_MAX, "next_offset")
    leader_epoch = _check_int(leader_epoch, _INT64_MIN, _INT64_MAX, "leader_epoch")
    now_ms = _check_int(now_ms, _INT64_MIN, _INT64_MAX, "now_ms")
    before_max_ms = _check_int(before_max_ms, _INT64_MIN, _INT64_MAX, "before_max_ms")
    after_max_ms = _check_int(after_max_ms, _INT64_MIN, _INT64_MAX, "after_max_ms")
    max_message_bytes = _check_int(max_message_bytes, _INT64_MIN, _INT64_MAX,
                                   "max_message_bytes")
    target_codec = _check_int(target_codec, _INT64_MIN, _INT64_MAX, "target_codec")
    log_append_time, compacted = bool(log_append_time), bool(compacted)
    client, analyze = bool(client), bool(analyze)
    n = len(mv)
    h = _fast_header(mv, n, next_offset, leader_epoch, client, analyze, max_message_bytes,
                     target_codec)
    status = h[0]
    if status == FAST_OK and analyze:
        # before any decompression, as Kafka checks the CRC in analyzeAndValidateRecords
        if _crc32c(mv[CRC_START:n]) != _U32.unpack_from(mv, 17)[0]:
            status = FAST_REJECTED
    if status != FAST_OK:
        return (status, None, *_NOT_OK)
    (_, base, epoch, attributes, lod, base_ts, stored_max, count, codec, last, out_base,
     source_last) = h
    if codec:
        if records is None:
            return (FAST_NEED_RECORDS, None, -1, -1, -1, codec, -1, -1, -1)
        area = _bytes_view(records)
        start, end = 0, len(area)
    else:
        area, start, end = mv, BATCH_OVERHEAD, n
    # steps 7-8: the record walk (check_records' rules) and its verdict
    if count > (end - start) // MIN_RECORD_BYTES:
        return (FAST_REJECTED, None, *_NOT_OK)
    try:
        max_ts, _, first_error, _, in_order = check_records(
            area, start, end, count, base_ts, now_ms, before_max_ms, after_max_ms,
            not log_append_time, compacted)
    except InvalidRecordError:
        return (FAST_REJECTED, None, *_NOT_OK)
    if first_error >= 0:
        return (FAST_REJECTED, None, *_NOT_OK)
    if codec and not (in_order and base == 0):
        return (FAST_UNSUPPORTED, None, *_NOT_OK)
    # step 9: the stamped copy; the CRC is recomputed only when something it covers changes
    # (attributes, max timestamp), and only over bytes whose CRC was checked
    new_max = now_ms if log_append_time else max(max_ts, -1)
    rewrite = log_append_time or stored_max != new_max
    if rewrite and not analyze and _crc32c(mv[CRC_START:n]) != _U32.unpack_from(mv, 17)[0]:
        return (FAST_REJECTED, None, *_NOT_OK)
    out = bytearray(mv)
    struct.pack_into(">q", out, 0, out_base)
    struct.pack_into(">i", out, 12, leader_epoch)
    if rewrite:
        new_attributes = (attributes & _KEPT_ATTRIBUTES & ~_ATTR_LOG_APPEND_TIME) | (
            _ATTR_LOG_APPEND_TIME if log_append_time else 0)
        struct.pack_into(">H", out, 21, new_attributes & 0xFFFF)
        struct.pack_into(">q", out, 35, new_max)
        struct.pack_into(">I", out, 17, _crc32c(memoryview(out)[CRC_START:n]))
    return (FAST_OK, out, last, new_max, count, codec, out_base, source_last, epoch)
