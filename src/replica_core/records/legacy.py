"""Reading magic v0/v1 message sets, for logs written before Kafka 0.11 (§1.3).

Each log entry is ``offset int64, size int32`` then one message: ``crc uint32`` (CRC-32 of the
rest), ``magic int8``, ``attributes int8`` (bits 0-2 codec, bit 3 LogAppendTime in v1),
``timestamp int64`` (v1 only), ``key`` and ``value`` as int32-length-prefixed bytes (-1 = null)
(``LegacyRecord.java``). A compressed entry is a wrapper whose value is a compressed message
set; its offset is the offset of the LAST inner message. Inner offsets are absolute in v0 and
relative in v1 (KIP-31), where the absolute offset is ``wrapper - last_inner + inner``; a v1
wrapper at offset 0 (a client's, unassigned) takes base 0, and a non-zero wrapper offset below
the last inner one is invalid; a v1 LogAppendTime wrapper gives every inner record its own
timestamp (``AbstractLegacyRecordBatch.DeepRecordsIterator``). A v1 entry's max timestamp is
its own (wrapper) message's timestamp.
"""
from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple

from replica_core.errors import CorruptRecordError, InvalidRecordError
from replica_core.records.compression import (
    CODEC_NAMES,
    DEFAULT_MAX_RECORD_BYTES,
    ZSTD,
    codec_id,
    decompress,
)
from replica_core.records.record import NO_TIMESTAMP, Record

if TYPE_CHECKING:
    from typing_extensions import Buffer

__all__ = ["LegacyBatch", "LegacyMessage", "parse_legacy_message"]

LOG_OVERHEAD = 12
RECORD_OVERHEAD_V0 = 14       # crc, magic, attributes, key length, value length
CRC_START = 16                # CRC-32 covers [16, size) of an entry
ATTR_COMPRESSION_MASK = 0x07
ATTR_LOG_APPEND_TIME = 0x08
# A v0/v1 wrapper does not declare how many messages it holds, so its decompression is bounded
# by this many of the largest records a broker accepts (our choice; the v2 bound is the count).
LEGACY_WRAPPER_MAX_RECORDS = 64

_ENTRY = struct.Struct(">qiIbB")   # offset, size, crc, magic, attributes
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class LegacyMessage(NamedTuple):
    """The fields of one v0/v1 log entry; positions are relative to its view."""

    offset: int
    size: int              # entry size including the 12-byte log overhead
    crc: int
    magic: int
    attributes: int
    timestamp: int         # -1 for v0
    key_pos: int
    key_len: int           # -1 = null
    value_pos: int
    value_len: int         # -1 = null


def _view(buf: Buffer) -> memoryview:
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    return mv


def parse_legacy_message(mv: memoryview, pos: int = 0, end: int | None = None) -> LegacyMessage:
    """Parse the v0/v1 entry at ``pos``; ``InvalidRecordError`` if its fields do not fit."""
    end = len(mv) if end is None else end
    if end - pos < LOG_OVERHEAD + RECORD_OVERHEAD_V0:
        raise InvalidRecordError("Legacy message shorter than its header")
    offset, length, crc, magic, attributes = _ENTRY.unpack_from(mv, pos)
    if length < RECORD_OVERHEAD_V0 or length > end - pos - LOG_OVERHEAD:
        raise InvalidRecordError(f"Invalid legacy message size {length}")
    if magic not in (0, 1):
        raise InvalidRecordError(f"Invalid magic {magic} in a legacy message")
    size = length + LOG_OVERHEAD
    lim = pos + size
    p = pos + 18
    timestamp = NO_TIMESTAMP
    if magic == 1:
        if lim - p < 8 + 8:
            raise InvalidRecordError("Legacy v1 message shorter than its header")
        timestamp = _I64.unpack_from(mv, p)[0]
        p += 8
    fields = []
    for _ in range(2):
        if lim - p < 4:
            raise InvalidRecordError("Legacy message field runs past its end")
        n = _I32.unpack_from(mv, p)[0]
        p += 4
        if n < -1 or n > lim - p:
            raise InvalidRecordError(f"Invalid legacy key or value length {n}")
        fields.append((p - pos, n))
        p += max(n, 0)
    if p != lim:
        raise InvalidRecordError(
            f"Invalid legacy message size: {size} declared, fields end at {p - pos}")
    (key_pos, key_len), (value_pos, value_len) = fields
    return LegacyMessage(offset, size, crc, magic, attributes, timestamp, key_pos, key_len,
                         value_pos, value_len)


class LegacyBatch:
    """Zero-copy view of one v0/v1 log entry (a message, or a compressed wrapper message)."""

    __slots__ = ("_buf", "_msg", "_position", "_size", "_inner")

    def __init__(self, buffer: Buffer, position: int = 0, size: int | None = None) -> None:
        mv = _view(buffer)
        if len(mv) - position < LOG_OVERHEAD + RECORD_OVERHEAD_V0:
            raise CorruptRecordError("Legacy message shorter than its header")
        if size is None:
            size = _I32.unpack_from(mv, position + 8)[0] + LOG_OVERHEAD
        if size < LOG_OVERHEAD + RECORD_OVERHEAD_V0 or size > len(mv) - position:
            raise CorruptRecordError(f"Invalid legacy message size {size}")
        magic = mv[position + 16]
        if magic not in (0, 1):
            raise CorruptRecordError(f"Invalid magic {magic} for a legacy message")
        self._buf = mv[position:position + size]
        self._position = position
        self._size = size
        self._msg: LegacyMessage | None = None
        self._inner: list[Record] | None = None

    def _message(self) -> LegacyMessage:
        if self._msg is None:
            self._msg = parse_legacy_message(self._buf)
        return self._msg

    # --- header fields -------------------------------------------------------------------------
    @property
    def buffer(self) -> memoryview:
        """The entry's bytes (a view into the original buffer)."""
        return self._buf

    @property
    def position(self) -> int:
        return self._position

    @property
    def size(self) -> int:
        return self._size

    @property
    def magic(self) -> int:
        return self._buf[16]

    @property
    def crc(self) -> int:
        return struct.unpack_from(">I", self._buf, 12)[0]

    @property
    def attributes(self) -> int:
        return self._buf[17]

    @property
    def compression_id(self) -> int:
        return codec_id(self.attributes & ATTR_COMPRESSION_MASK)

    @property
    def compression(self) -> str:
        return CODEC_NAMES[self.compression_id]

    @property
    def timestamp_type(self) -> str:
        """"no_timestamp" (v0), "log_append" or "create" (v1)."""
        if self.magic == 0:
            return "no_timestamp"
        return "log_append" if self.attributes & ATTR_LOG_APPEND_TIME else "create"

    @property
    def last_offset(self) -> int:
        """The entry's offset field: the offset of its (last) message."""
        return _I64.unpack_from(self._buf, 0)[0]

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def base_offset(self) -> int:
        """First offset: the entry's own for a plain message, the first inner one for a wrapper."""
        if self.compression_id == 0:
            return self.last_offset
        inner = self._inner_records()
        return inner[0].offset

    @property
    def max_timestamp(self) -> int:
        """The entry's own (wrapper) message timestamp, −1 for v0 (``maxTimestamp()`` of
        ``AbstractLegacyRecordBatch``); for a broker-written CreateTime wrapper it is the largest
        inner timestamp, for a LogAppendTime one the append time every inner record carries."""
        return self._message().timestamp

    @property
    def record_count(self) -> int:
        return 1 if self.compression_id == 0 else len(self._inner_records())

    partition_leader_epoch = -1
    producer_id = -1
    producer_epoch = -1
    base_sequence = -1
    is_transactional = False
    is_control = False

    # --- validity ------------------------------------------------------------------------------
    def is_valid(self) -> bool:
        """Stored CRC-32 equals the CRC-32 of bytes [16, size) (``LegacyRecord.isValid``)."""
        return zlib.crc32(self._buf[CRC_START:]) == self.crc

    def ensure_valid(self) -> None:
        """``CorruptRecordError`` unless :meth:`is_valid`."""
        if not self.is_valid():
            raise CorruptRecordError(
                f"Record is corrupt (stored crc = {self.crc}, computed crc = "
                f"{zlib.crc32(self._buf[CRC_START:])})")

    # --- records -------------------------------------------------------------------------------
    def _inner_records(self, check_crc: bool = False) -> list[Record]:
        if self._inner is not None and not check_crc:
            return self._inner
        msg = self._message()
        cid = self.compression_id
        if cid == ZSTD:
            raise InvalidRecordError(
                f"Invalid wrapper compressionType found for magic version {msg.magic}: zstd")
        if msg.value_len < 0:
            raise InvalidRecordError("Compressed legacy wrapper has a null value")
        payload = self._buf[msg.value_pos:msg.value_pos + msg.value_len]
        blob = memoryview(decompress(
            cid, payload, legacy_v0=msg.magic == 0,
            max_output=LEGACY_WRAPPER_MAX_RECORDS * DEFAULT_MAX_RECORD_BYTES))
        entries: list[LegacyMessage] = []
        p = 0
        while len(blob) - p >= LOG_OVERHEAD:
            length = _I32.unpack_from(blob, p + 8)[0]
            if length < RECORD_OVERHEAD_V0:
                raise CorruptRecordError(f"Record size {length} is less than the minimum "
                                         f"record overhead ({RECORD_OVERHEAD_V0})")
            if length > len(blob) - p - LOG_OVERHEAD:
                break  # a partial inner entry ends the set, as in DataLogInputStream
            inner = parse_legacy_message(blob, p)
            if inner.magic != msg.magic:
                raise InvalidRecordError("Compressed message magic does not match wrapper magic")
            if inner.attributes & ATTR_COMPRESSION_MASK:
                raise InvalidRecordError("Inner messages must not be compressed")
            if check_crc and zlib.crc32(blob[p + CRC_START:p + inner.size]) != inner.crc:
                raise CorruptRecordError(f"Inner record is corrupt (stored crc = {inner.crc})")
            entries.append(inner._replace(key_pos=inner.key_pos + p,
                                          value_pos=inner.value_pos + p))
            p += inner.size
        if not entries:
            raise InvalidRecordError("Found invalid compressed record set with no inner records")
        # KIP-31: v1 inner offsets are relative to a base the wrapper's (last) offset gives;
        # a wrapper offset of 0 (a client's, before the broker assigns one) means base 0, any
        # other below the last inner offset is invalid (DeepRecordsIterator).
        base = 0
        if msg.magic > 0 and msg.offset != 0:
            if msg.offset < entries[-1].offset:
                raise InvalidRecordError(
                    "Found invalid wrapper offset in compressed v1 message set, wrapper offset "
                    f"'{msg.offset}' is less than the last inner message offset "
                    f"'{entries[-1].offset}' and it is not zero.")
            base = msg.offset - entries[-1].offset
        log_append = msg.magic > 0 and bool(msg.attributes & ATTR_LOG_APPEND_TIME)
        out = []
        for e in entries:
            out.append(Record(
                base + e.offset,
                msg.timestamp if log_append else e.timestamp,
                None if e.key_len < 0 else bytes(blob[e.key_pos:e.key_pos + e.key_len]),
                None if e.value_len < 0 else bytes(blob[e.value_pos:e.value_pos + e.value_len]),
                [],
            ))
        self._inner = out
        return out

    def records(self, *, check_crc: bool = False) -> Iterator[Record]:
        """The entry's records; a wrapper is decompressed. ``check_crc`` verifies inner CRCs
        (the leader does, ``LogValidator.validateRecord``)."""
        if self.compression_id != 0:
            yield from self._inner_records(check_crc)
            return
        msg = self._message()
        yield Record(
            msg.offset, msg.timestamp,
            None if msg.key_len < 0 else bytes(self._buf[msg.key_pos:msg.key_pos + msg.key_len]),
            None if msg.value_len < 0 else bytes(
                self._buf[msg.value_pos:msg.value_pos + msg.value_len]),
            [],
        )

    def __iter__(self) -> Iterator[Record]:
        return self.records()

    def __repr__(self) -> str:
        return (f"LegacyBatch(magic={self.magic}, offset={self.last_offset}, size={self.size}, "
                f"compression={self.compression})")
