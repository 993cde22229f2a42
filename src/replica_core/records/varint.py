"""Zig-zag varints as Kafka writes them in v2 records (§1.2; ``ByteUtils.java``).

A signed value is zig-zag mapped (``(v << 1) ^ (v >> 31)`` for int32, ``>> 63`` for int64) and
written as unsigned LEB128: 7 bits a byte, least significant group first, high bit = "more".
At most 5 bytes for a varint and 10 for a varlong; reading more is ``InvalidRecordError``, as
``ByteUtils.readVarint`` throws ``IllegalArgumentException`` there. As in Java, the last allowed
byte contributes only the bits that fit (4 of the 5th varint byte, 1 of the 10th varlong byte).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from replica_core.errors import InvalidRecordError

if TYPE_CHECKING:
    from typing_extensions import Buffer

__all__ = [
    "MAX_VARINT_BYTES",
    "MAX_VARLONG_BYTES",
    "decode_varint",
    "decode_varlong",
    "encode_varint",
    "encode_varlong",
    "size_of_varint",
    "size_of_varlong",
]

MAX_VARINT_BYTES = 5
MAX_VARLONG_BYTES = 10

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)


def _uleb128(u: int) -> bytes:
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """The zig-zag varint encoding of an int32 (1-5 bytes)."""
    if not _INT32[0] <= value <= _INT32[1]:
        raise ValueError(f"varint value {value} is outside int32")
    if 0 <= value < 64:
        return bytes((value << 1,))
    return _uleb128(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def encode_varlong(value: int) -> bytes:
    """The zig-zag varlong encoding of an int64 (1-10 bytes)."""
    if not _INT64[0] <= value <= _INT64[1]:
        raise ValueError(f"varlong value {value} is outside int64")
    if 0 <= value < 64:
        return bytes((value << 1,))
    return _uleb128(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def size_of_varint(value: int) -> int:
    """Bytes ``encode_varint(value)`` takes (``ByteUtils.sizeOfVarint``)."""
    u = ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF
    return max(1, (u.bit_length() + 6) // 7)


def size_of_varlong(value: int) -> int:
    """Bytes ``encode_varlong(value)`` takes (``ByteUtils.sizeOfVarlong``)."""
    u = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    return max(1, (u.bit_length() + 6) // 7)


def _decode(buf: Buffer, pos: int, end: int | None, max_bytes: int, bits: int) -> tuple[int, int]:
    mv = memoryview(buf)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    lim = len(mv) if end is None else min(end, len(mv))
    raw = 0
    shift = 0
    for i in range(max_bytes):
        if pos >= lim:
            raise InvalidRecordError("Found invalid record structure: varint runs past the end")
        b = mv[pos]
        pos += 1
        if i == max_bytes - 1:
            if b & 0x80:
                kind = "varint" if bits == 32 else "varlong"
                raise InvalidRecordError(f"{kind} is longer than {max_bytes} bytes")
            raw |= (b << shift) & ((1 << bits) - 1)
            break
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
    return (raw >> 1) ^ -(raw & 1), pos


def decode_varint(buf: Buffer, pos: int = 0, end: int | None = None) -> tuple[int, int]:
    """Read a zig-zag varint at ``pos``: ``(value, next_pos)``; ``InvalidRecordError`` if malformed."""
    return _decode(buf, pos, end, MAX_VARINT_BYTES, 32)


def decode_varlong(buf: Buffer, pos: int = 0, end: int | None = None) -> tuple[int, int]:
    """Read a zig-zag varlong at ``pos``: ``(value, next_pos)``; ``InvalidRecordError`` if malformed."""
    return _decode(buf, pos, end, MAX_VARLONG_BYTES, 64)
