"""Magic v2 record batches as zero-copy views, and framing a byte stream into batches.

Header layout and validity per §1.1 (``DefaultRecordBatch.java``); framing per §1.3
(``ByteBufferLogInputStream``): a partial trailing batch is silently not returned, a malformed
frame (size field < 14, magic outside 0..2) raises ``CorruptRecordError`` once the batches
before it have been yielded. The byte work runs in the batch kernel (native when built).
"""
from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from replica_core._fast import load
from replica_core.errors import CorruptRecordError
from replica_core.records.compression import (
    CODEC_NAMES,
    DEFAULT_MAX_RECORD_BYTES,
    codec_id,
    decompress,
    decompressed_limit,
)
from replica_core.records.legacy import LegacyBatch
from replica_core.records.record import Record
from replica_core.records.varint import decode_varint

if TYPE_CHECKING:
    from typing_extensions import Buffer

__all__ = ["BatchScan", "RecordBatch", "batch_at", "iter_batches", "scan"]

kernels = load("_batch", "batch_py")

LOG_OVERHEAD = 12
HEADER_SIZE_UP_TO_MAGIC = 17
BATCH_OVERHEAD = 61
CRC_START = 21
ATTR_COMPRESSION_MASK = 0x07
ATTR_LOG_APPEND_TIME = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40

# MemoryRecords frames with maxMessageSize = Integer.MAX_VALUE on the batchLength field, so
# no size field is too large for it; the kernel compares batchLength + 12.
MAX_FRAME_SIZE = 2**31 - 1 + LOG_OVERHEAD

_HEADER = struct.Struct(">qiibIhiqqqhii")

try:
    from replica_core._fast._crc import crc32c as _crc32c
except ImportError:
    from crc32c import crc32c as _crc32c


def _view(buf: Buffer) -> memoryview:
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    return mv


def sequence_add(base_sequence: int, delta: int) -> int:
    """Kafka's ``DefaultRecordBatch.incrementSequence``: int32 sequence wrapping to 0."""
    if base_sequence > 2**31 - 1 - delta:
        return delta - (2**31 - 1 - base_sequence) - 1
    return base_sequence + delta


class RecordBatch:
    """Zero-copy view of one magic v2 batch (§1.1). Field reads need a full 61-byte header
    (``CorruptRecordError`` otherwise); nothing is checked until :meth:`ensure_valid`."""

    __slots__ = ("_buf", "_position", "_size", "_h")

    def __init__(self, buffer: Buffer, position: int = 0, size: int | None = None) -> None:
        mv = _view(buffer)
        if len(mv) - position < HEADER_SIZE_UP_TO_MAGIC or position < 0:
            raise CorruptRecordError(f"no batch header at byte {position}")
        if size is None:
            size = struct.unpack_from(">i", mv, position + 8)[0] + LOG_OVERHEAD
        if size < LOG_OVERHEAD + 14 or size > len(mv) - position:
            raise CorruptRecordError(f"batch at byte {position} declares {size} bytes; "
                                     f"{len(mv) - position} available")
        if mv[position + 16] != 2:
            raise CorruptRecordError(f"batch at byte {position} has magic {mv[position + 16]}")
        self._buf = mv[position:position + size]
        self._position = position
        self._size = size
        self._h = _HEADER.unpack_from(self._buf) if size >= BATCH_OVERHEAD else None

    def _header(self) -> tuple:
        if self._h is None:
            raise CorruptRecordError(
                f"Record batch size {self._size} is less than the minimum {BATCH_OVERHEAD}")
        return self._h

    # --- header fields (§1.1) ------------------------------------------------------------------
    @property
    def buffer(self) -> memoryview:
        """The batch's bytes (a view into the original buffer)."""
        return self._buf

    @property
    def position(self) -> int:
        """Where the batch starts in the buffer it was read from."""
        return self._position

    @property
    def size(self) -> int:
        """Total bytes: batchLength + 12."""
        return self._size

    @property
    def base_offset(self) -> int:
        return struct.unpack_from(">q", self._buf, 0)[0]

    @property
    def partition_leader_epoch(self) -> int:
        return struct.unpack_from(">i", self._buf, 12)[0]

    @property
    def magic(self) -> int:
        return 2

    @property
    def crc(self) -> int:
        return self._header()[4]

    @property
    def attributes(self) -> int:
        return self._header()[5]

    @property
    def last_offset_delta(self) -> int:
        return self._header()[6]

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def base_timestamp(self) -> int:
        return self._header()[7]

    @property
    def max_timestamp(self) -> int:
        return self._header()[8]

    @property
    def producer_id(self) -> int:
        return self._header()[9]

    @property
    def producer_epoch(self) -> int:
        return self._header()[10]

    @property
    def base_sequence(self) -> int:
        return self._header()[11]

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record (-1 without a base sequence)."""
        if self.base_sequence < 0:
            return -1
        return sequence_add(self.base_sequence, self.last_offset_delta)

    @property
    def record_count(self) -> int:
        return self._header()[12]

    @property
    def compression_id(self) -> int:
        """Codec id (attributes bits 0-2); ``UnsupportedCompressionTypeError`` if unknown."""
        return codec_id(self.attributes & ATTR_COMPRESSION_MASK)

    @property
    def compression(self) -> str:
        return CODEC_NAMES[self.compression_id]

    @property
    def timestamp_type(self) -> str:
        """"log_append" if attributes bit 3 is set, else "create"."""
        return "log_append" if self.attributes & ATTR_LOG_APPEND_TIME else "create"

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & ATTR_DELETE_HORIZON)

    @property
    def delete_horizon_ms(self) -> int:
        """The delete horizon carried in baseTimestamp when attributes bit 6 is set, else -1."""
        return self.base_timestamp if self.has_delete_horizon else -1

    # --- validity ------------------------------------------------------------------------------
    def compute_checksum(self) -> int:
        """CRC-32C of bytes [21, size)."""
        return _crc32c(self._buf[CRC_START:])

    def is_valid(self) -> bool:
        """Size >= 61 and the stored CRC equals the computed one (``isValid``)."""
        return self._size >= BATCH_OVERHEAD and self.compute_checksum() == self.crc

    def ensure_valid(self) -> None:
        """``CorruptRecordError`` unless :meth:`is_valid` (``ensureValid``)."""
        if self._size < BATCH_OVERHEAD:
            raise CorruptRecordError(
                f"Record batch is corrupt (the size {self._size} is smaller than the minimum "
                f"allowed overhead {BATCH_OVERHEAD})")
        computed = self.compute_checksum()
        if computed != self.crc:
            raise CorruptRecordError(
                f"Record is corrupt (stored crc = {self.crc}, computed crc = {computed})")

    # --- records -------------------------------------------------------------------------------
    def record_area(self, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES
                    ) -> tuple[Buffer, int, int]:
        """``(buffer, start, end)`` of the uncompressed records: this view for an uncompressed
        batch, a decompressed copy otherwise, of at most ``record_count * max_record_bytes``
        bytes (the topic's ``max.message.bytes``; ``InvalidRecordError`` beyond that)."""
        h = self._header()
        cid = codec_id(h[5] & ATTR_COMPRESSION_MASK)
        if cid == 0:
            return self._buf, BATCH_OVERHEAD, self._size
        blob = decompress(cid, self._buf[BATCH_OVERHEAD:],
                          max_output=decompressed_limit(h[12], max_record_bytes))
        return blob, 0, len(blob)

    def record_columns(self, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES
                       ) -> tuple[Buffer, np.ndarray]:
        """The record area and its ``decode_records`` columns (``InvalidRecordError`` if the
        records are malformed or fewer/more than the declared count)."""
        h = self._header()
        area, start, end = self.record_area(max_record_bytes)
        cols = kernels.decode_records(area, start, end, h[12], h[0], h[7])
        return area, cols

    def records(self, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> Iterator[Record]:
        """Each record, decompressing as needed (see :meth:`record_area` for the bound). In a
        LogAppendTime batch every record reports the batch's maxTimestamp
        (``DefaultRecordBatch``)."""
        area, cols = self.record_columns(max_record_bytes)
        mv = _view(area)
        log_append = self.attributes & ATTR_LOG_APPEND_TIME
        max_ts = self.max_timestamp
        for offset, ts, kp, kl, vp, vl, hp, hc, _end in cols.tolist():
            yield Record(
                offset,
                max_ts if log_append else ts,
                None if kl < 0 else bytes(mv[kp:kp + kl]),
                None if vl < 0 else bytes(mv[vp:vp + vl]),
                _read_headers(mv, hp, hc) if hc else [],
            )

    def __iter__(self) -> Iterator[Record]:
        return self.records()

    def __repr__(self) -> str:
        if self._h is None:
            return f"RecordBatch(base_offset={self.base_offset}, size={self._size}, short header)"
        return (f"RecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
                f"count={self.record_count}, size={self._size}, "
                f"compression={self.attributes & ATTR_COMPRESSION_MASK}, "
                f"epoch={self.partition_leader_epoch})")


def _read_headers(mv: memoryview, pos: int, count: int) -> list[tuple[str, bytes | None]]:
    """Headers already checked by the kernel; keys decode like Java's ``new String(UTF_8)``."""
    out = []
    for _ in range(count):
        klen, pos = decode_varint(mv, pos)
        key = bytes(mv[pos:pos + klen]).decode("utf-8", errors="replace")
        pos += klen
        vlen, pos = decode_varint(mv, pos)
        if vlen < 0:
            out.append((key, None))
        else:
            out.append((key, bytes(mv[pos:pos + vlen])))
            pos += vlen
    return out


def batch_at(buffer: Buffer, position: int = 0, size: int | None = None) -> RecordBatch | LegacyBatch:
    """The v2 batch or legacy entry at ``position`` (by its magic byte)."""
    mv = _view(buffer)
    if len(mv) - position < HEADER_SIZE_UP_TO_MAGIC or position < 0:
        raise CorruptRecordError(f"no batch header at byte {position}")
    magic = mv[position + 16]
    if magic == 2:
        return RecordBatch(mv, position, size)
    if magic in (0, 1):
        return LegacyBatch(mv, position, size)
    raise CorruptRecordError(f"Invalid magic found in record: {magic}")


# --- framing ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class BatchScan:
    """The framed batches of a buffer: one int64 header row per batch (columns ``COL_*`` of
    the batch kernel), ``valid_bytes`` (sum of framed sizes) and why framing ``stop``-ped
    (``STOP_END``, ``STOP_PARTIAL`` or ``STOP_CORRUPT``)."""

    headers: np.ndarray
    valid_bytes: int
    stop: int

    def __len__(self) -> int:
        return len(self.headers)

    def column(self, col: int) -> np.ndarray:
        return self.headers[:, col]

    @property
    def positions(self) -> np.ndarray:
        return self.headers[:, kernels.COL_POSITION]

    @property
    def sizes(self) -> np.ndarray:
        return self.headers[:, kernels.COL_SIZE]

    @property
    def base_offsets(self) -> np.ndarray:
        """v2: baseOffset; legacy: the entry's offset field (its last offset)."""
        return self.headers[:, kernels.COL_BASE_OFFSET]

    @property
    def last_offsets(self) -> np.ndarray:
        """v2: baseOffset + lastOffsetDelta; legacy: the entry's offset field."""
        h = self.headers
        v2 = (h[:, kernels.COL_MAGIC] == 2) & (h[:, kernels.COL_SIZE] >= BATCH_OVERHEAD)
        return np.where(v2, h[:, kernels.COL_BASE_OFFSET] + h[:, kernels.COL_LAST_OFFSET_DELTA],
                        h[:, kernels.COL_BASE_OFFSET])

    @property
    def partition_leader_epochs(self) -> np.ndarray:
        return self.headers[:, kernels.COL_PARTITION_LEADER_EPOCH]

    @property
    def magics(self) -> np.ndarray:
        return self.headers[:, kernels.COL_MAGIC]

    @property
    def crcs(self) -> np.ndarray:
        return self.headers[:, kernels.COL_CRC]

    @property
    def attributes(self) -> np.ndarray:
        return self.headers[:, kernels.COL_ATTRIBUTES]

    @property
    def base_timestamps(self) -> np.ndarray:
        return self.headers[:, kernels.COL_BASE_TIMESTAMP]

    @property
    def max_timestamps(self) -> np.ndarray:
        return self.headers[:, kernels.COL_MAX_TIMESTAMP]

    @property
    def producer_ids(self) -> np.ndarray:
        return self.headers[:, kernels.COL_PRODUCER_ID]

    @property
    def producer_epochs(self) -> np.ndarray:
        return self.headers[:, kernels.COL_PRODUCER_EPOCH]

    @property
    def base_sequences(self) -> np.ndarray:
        return self.headers[:, kernels.COL_BASE_SEQUENCE]

    @property
    def record_counts(self) -> np.ndarray:
        return self.headers[:, kernels.COL_RECORD_COUNT]

    @property
    def crc_ok(self) -> np.ndarray:
        """1 valid, 0 invalid (or v2 shorter than 61 bytes), -1 not checked."""
        return self.headers[:, kernels.COL_CRC_OK]

    @property
    def is_corrupt(self) -> bool:
        return self.stop == kernels.STOP_CORRUPT

    @property
    def is_partial(self) -> bool:
        return self.stop == kernels.STOP_PARTIAL


def scan(buffer: Buffer, *, check_crc: bool = True, start: int = 0, end: int = -1,
         max_batch_size: int = MAX_FRAME_SIZE) -> BatchScan:
    """Frame ``buffer`` (§1.3) in one kernel call; nothing is raised for corrupt framing,
    see ``stop``."""
    headers, valid_bytes, stop = kernels.scan_batches(buffer, start, end, check_crc,
                                                      max_batch_size)
    return BatchScan(headers, int(valid_bytes), int(stop))


def iter_batches(buffer: Buffer) -> Iterator[RecordBatch | LegacyBatch]:
    """Zero-copy views of the batches in ``buffer`` (§1.3): a partial trailing batch ends the
    iteration silently; a corrupt frame raises ``CorruptRecordError`` after the batches before
    it (``ByteBufferLogInputStream``)."""
    mv = _view(buffer)
    s = scan(mv, check_crc=False)
    for pos, size, magic in s.headers[:, [kernels.COL_POSITION, kernels.COL_SIZE,
                                          kernels.COL_MAGIC]].tolist():
        if magic == 2:
            yield RecordBatch(mv, pos, size)
        else:
            yield LegacyBatch(mv, pos, size)
    if s.is_corrupt:
        raise CorruptRecordError(_corrupt_frame_message(mv, s.valid_bytes))


def _corrupt_frame_message(mv: memoryview, pos: int) -> str:
    if len(mv) - pos >= HEADER_SIZE_UP_TO_MAGIC:
        length = struct.unpack_from(">i", mv, pos + 8)[0]
        magic = struct.unpack_from(">b", mv, pos + 16)[0]
        if length < 14:
            return (f"Record size {length} is less than the minimum record overhead (14) "
                    f"at byte {pos}")
        if magic < 0 or magic > 2:
            return f"Invalid magic found in record at byte {pos}: {magic}"
        return f"Record size {length} exceeds the largest allowable message size at byte {pos}"
    length = struct.unpack_from(">i", mv, pos + 8)[0]
    return f"Record size {length} is less than the minimum record overhead (14) at byte {pos}"
