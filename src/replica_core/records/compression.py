"""Batch compression codecs: none, gzip, snappy, lz4, zstd (§1.1 attributes bits 0-2).

Byte formats are those Kafka's Java client and broker write and read
(``org.apache.kafka.common.compress``):

* gzip: RFC 1952 members (several concatenated members are read as one stream).
* snappy: xerial's block framing (16-byte header ``\\x82SNAPPY\\0`` + version + compatible
  version, then big-endian length-prefixed raw snappy blocks of up to 32 KiB), which the Java
  client, kafka-python and aiokafka write; a payload without that header is read as one raw
  snappy block, as xerial's ``SnappyInputStream`` does.
* lz4: the LZ4 frame format with independent blocks (KIP-57), 64 KiB blocks, no checksums, as
  ``Lz4BlockOutputStream`` writes. Magic v0 (legacy) batches were written with a wrong
  header checksum (KAFKA-3160) and are read without checking it.
* zstd: a standard zstd frame.

Unknown codec ids raise ``UnsupportedCompressionTypeError``; payloads that do not decompress
raise ``InvalidRecordError`` (Kafka fails the batch while iterating its records).

Every decompression is bounded (``max_output``): a batch can legitimately hold no more than its
record count times the largest record a broker accepts (``message.max.bytes`` /
``max.message.bytes``), see :func:`decompressed_limit`. Kafka streams records out of the codec with bounded buffers; here the
record area is decompressed whole, so the bound is enforced before memory is spent: claimed sizes
(a raw snappy block's length preamble, a zstd frame's content size) are checked before anything
is allocated, zstd frames are walked block by block for the most they can produce, gzip and lz4
are decompressed incrementally. Going over the bound is an ``InvalidRecordError``.
"""
from __future__ import annotations

import struct
import zlib
from typing import TYPE_CHECKING

import cramjam

from replica_core.errors import InvalidRecordError, UnsupportedCompressionTypeError

if TYPE_CHECKING:
    from typing_extensions import Buffer

__all__ = [
    "DEFAULT_MAX_RECORD_BYTES",
    "MAX_DECOMPRESSED_BYTES",
    "CODEC_IDS",
    "CODEC_NAMES",
    "GZIP",
    "LZ4",
    "NONE",
    "SNAPPY",
    "ZSTD",
    "codec_id",
    "codec_name",
    "compress",
    "decompress",
    "decompressed_limit",
]

NONE, GZIP, SNAPPY, LZ4, ZSTD = range(5)
CODEC_NAMES: dict[int, str] = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4",
                               ZSTD: "zstd"}
CODEC_IDS: dict[str, int] = {name: cid for cid, name in CODEC_NAMES.items()}
# Kafka's topic config spells "none" as "uncompressed" (compression.type).
_ALIASES = {"uncompressed": NONE}

# Kafka's default levels: gzip Deflater default (6), lz4 9, zstd 3 (KIP-390).
DEFAULT_LEVELS = {GZIP: 6, LZ4: 9, ZSTD: 3}

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024

_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_BLOCK = 64 * 1024
_LZ4_BLOCK_SIZES = {4: 64 * 1024, 5: 256 * 1024, 6: 1024 * 1024, 7: 4 * 1024 * 1024}

_DECODE_ERRORS = (cramjam.DecompressionError, zlib.error, ValueError, struct.error,
                  OverflowError, IndexError)

# Kafka's default max.message.bytes: the largest record (and batch) a broker accepts unless the
# topic says otherwise.
DEFAULT_MAX_RECORD_BYTES = 1048588
# Never more than a Java byte array holds, whatever the count says (Kafka's buffers are
# int-indexed).
MAX_DECOMPRESSED_BYTES = 2**31 - 1

_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_SKIPPABLE = 0x184D2A50      # 0x184D2A50..0x184D2A5F, low 4 bits free
_ZSTD_BLOCK_MAX = 128 * 1024      # a block never decodes to more (Block_Maximum_Size)


class _TooLarge(Exception):
    """Decompression would go over ``max_output``."""


def decompressed_limit(record_count: int, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> int:
    """The most a batch of ``record_count`` records may decompress to: each record at most the
    largest a broker accepts, the topic's ``max.message.bytes`` (``max_record_bytes``) or the
    broker default ``message.max.bytes``, whichever is larger (a topic limit below the default
    bounds compressed batches, not the records a producer may put in them); and never more than
    ``MAX_DECOMPRESSED_BYTES``."""
    if record_count <= 0:
        return 0
    per_record = max(int(max_record_bytes), DEFAULT_MAX_RECORD_BYTES)
    return min(int(record_count) * per_record, MAX_DECOMPRESSED_BYTES)


def codec_id(codec: int | str) -> int:
    """The attribute id of a codec given by id or name (``UnsupportedCompressionTypeError``)."""
    if isinstance(codec, str):
        key = codec.lower()
        if key in CODEC_IDS:
            return CODEC_IDS[key]
        if key in _ALIASES:
            return _ALIASES[key]
        raise UnsupportedCompressionTypeError(f"Unknown compression name: {codec}")
    if codec in CODEC_NAMES:
        return int(codec)
    raise UnsupportedCompressionTypeError(f"Unknown compression type id: {codec}")


def codec_name(codec: int | str) -> str:
    """The lower-case name ("none", "gzip", ...) of a codec id or name."""
    return CODEC_NAMES[codec_id(codec)]


# --- xxHash32, for the LZ4 frame descriptor checksum ------------------------------------------
_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M


def xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32 of ``data`` (used on the few bytes of an LZ4 frame descriptor)."""
    n = len(data)
    p = 0
    if n >= 16:
        v1, v2, v3, v4 = (seed + _P1 + _P2) & _M, (seed + _P2) & _M, seed & _M, (seed - _P1) & _M
        while p + 16 <= n:
            a, b, c, d = struct.unpack_from("<4I", data, p)
            v1 = (_rotl((v1 + a * _P2) & _M, 13) * _P1) & _M
            v2 = (_rotl((v2 + b * _P2) & _M, 13) * _P1) & _M
            v3 = (_rotl((v3 + c * _P2) & _M, 13) * _P1) & _M
            v4 = (_rotl((v4 + d * _P2) & _M, 13) * _P1) & _M
            p += 16
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M
    else:
        h = (seed + _P5) & _M
    h = (h + n) & _M
    while p + 4 <= n:
        h = (_rotl((h + struct.unpack_from("<I", data, p)[0] * _P3) & _M, 17) * _P4) & _M
        p += 4
    while p < n:
        h = (_rotl((h + data[p] * _P5) & _M, 11) * _P1) & _M
        p += 1
    h ^= h >> 15
    h = (h * _P2) & _M
    h ^= h >> 13
    h = (h * _P3) & _M
    h ^= h >> 16
    return h


# --- per-codec encoders and decoders ----------------------------------------------------------
def _gzip_compress(data: Buffer, level: int) -> bytes:
    c = zlib.compressobj(level, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


def _gzip_decompress(data: Buffer, limit: int) -> bytes:
    """Every member, in bounded steps: at most ``limit + 1`` bytes come out of zlib at once."""
    out = bytearray()
    rest: Buffer = data
    while True:
        d = zlib.decompressobj(31)
        tail = rest
        while True:
            chunk = d.decompress(tail, limit - len(out) + 1)
            out += chunk
            if len(out) > limit:
                raise _TooLarge
            tail = d.unconsumed_tail
            if d.eof or (not tail and not chunk):
                break
        if not d.eof:
            raise InvalidRecordError("gzip stream ends before its end of member")
        rest = d.unused_data
        if not rest:
            return bytes(out)


def _snappy_compress(data: Buffer) -> bytes:
    mv = memoryview(data).cast("B")
    out = bytearray(_XERIAL_HEADER)
    # At least one block: readers that need more than the 16-byte header to recognise the
    # framing (kafka-python, aiokafka) would otherwise read the header as raw snappy.
    for i in range(0, max(len(mv), 1), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(mv[i:i + _XERIAL_BLOCK]))
        out += struct.pack(">i", len(block))
        out += block
    return bytes(out)


def _snappy_claimed_length(block: memoryview) -> int:
    """The uncompressed length a raw snappy block declares (its varint preamble, < 2**32)."""
    value = 0
    for i in range(min(len(block), 5)):
        b = block[i]
        value |= (b & 0x7F) << (7 * i)
        if not b & 0x80:
            if value > 0xFFFFFFFF:
                break
            return value
    raise InvalidRecordError("raw snappy block with a malformed length preamble")


def _snappy_raw(block: memoryview, budget: int) -> bytes:
    """One raw snappy block; its declared length is checked before the decoder allocates it."""
    if _snappy_claimed_length(block) > budget:
        raise _TooLarge
    return bytes(cramjam.snappy.decompress_raw(block))


def _snappy_decompress(data: Buffer, limit: int) -> bytes:
    mv = memoryview(data).cast("B")
    if bytes(mv[:8]) != _XERIAL_MAGIC:
        return _snappy_raw(mv, limit)
    if len(mv) < 16:
        raise InvalidRecordError("truncated xerial snappy header")
    out = bytearray()
    p = 16
    while p < len(mv):
        if len(mv) - p < 4:
            raise InvalidRecordError("truncated xerial snappy block length")
        (n,) = struct.unpack_from(">i", mv, p)
        p += 4
        if n < 0 or n > len(mv) - p:
            raise InvalidRecordError(f"xerial snappy block of {n} bytes runs past the payload")
        out += _snappy_raw(mv[p:p + n], limit - len(out))
        p += n
    return bytes(out)


def _lz4_compress(data: Buffer, level: int) -> bytes:
    mv = memoryview(data).cast("B")
    descriptor = bytes((0x60, 0x40))  # version 01, independent blocks; 64 KiB max block
    out = bytearray(_LZ4_MAGIC + descriptor)
    out.append((xxh32(descriptor) >> 8) & 0xFF)
    for i in range(0, len(mv), _LZ4_BLOCK):
        chunk = mv[i:i + _LZ4_BLOCK]
        block = bytes(cramjam.lz4.compress_block(chunk, compression=level, store_size=False,
                                                 mode="high_compression" if level > 2 else
                                                 "default"))
        if len(block) >= len(chunk):
            out += struct.pack("<I", len(chunk) | 0x80000000)
            out += chunk
        else:
            out += struct.pack("<I", len(block))
            out += block
    out += b"\x00\x00\x00\x00"
    return bytes(out)


def _lz4_decompress(data: Buffer, limit: int, check_header: bool = True) -> bytes:
    mv = memoryview(data).cast("B")
    n = len(mv)
    if n < 7 or bytes(mv[:4]) != _LZ4_MAGIC:
        raise InvalidRecordError("not an LZ4 frame")
    flg, bd = mv[4], mv[5]
    if flg >> 6 != 1 or flg & 0x02 or bd & 0x8F:
        raise InvalidRecordError(f"unsupported LZ4 frame descriptor {flg:#04x} {bd:#04x}")
    if not flg & 0x20:
        raise InvalidRecordError("LZ4 frames with dependent blocks are not supported (KIP-57)")
    block_max = _LZ4_BLOCK_SIZES.get(bd >> 4)
    if block_max is None:
        raise InvalidRecordError(f"unsupported LZ4 block size code {bd >> 4}")
    p = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    if n < p + 1:
        raise InvalidRecordError("truncated LZ4 frame descriptor")
    if check_header and mv[p] != (xxh32(bytes(mv[4:p])) >> 8) & 0xFF:
        raise InvalidRecordError("LZ4 frame descriptor checksum mismatch")
    p += 1
    block_checksum = 4 if flg & 0x10 else 0
    out = bytearray()
    scratch: bytearray | None = None
    while True:
        if n - p < 4:
            raise InvalidRecordError("LZ4 frame ends before its end mark")
        (size,) = struct.unpack_from("<I", mv, p)
        p += 4
        if size == 0:
            return bytes(out)
        raw = size & 0x80000000
        size &= 0x7FFFFFFF
        if size > block_max or size > n - p:
            raise InvalidRecordError(f"LZ4 block of {size} bytes is too large or truncated")
        block = mv[p:p + size]
        if raw:
            if len(out) + size > limit:
                raise _TooLarge
            out += block
        else:
            if scratch is None:
                scratch = bytearray(min(block_max, limit - len(out) + 1))
            elif len(scratch) > limit - len(out) + 1:
                scratch = bytearray(limit - len(out) + 1)
            try:
                written = cramjam.lz4.decompress_block_into(block, scratch)
            except cramjam.DecompressionError:
                if len(scratch) < block_max:
                    raise _TooLarge from None  # may be the bound: report it as such
                raise
            if len(out) + written > limit:
                raise _TooLarge
            out += memoryview(scratch)[:written]
        p += size + block_checksum


def _zstd_most(mv: memoryview, limit: int) -> int:
    """The most the zstd frames in ``mv`` can decode to, from their headers alone (RFC 8878):
    raw and RLE blocks exactly their stated size, a compressed block at most 128 KiB.
    ``_TooLarge`` as soon as what is known exactly (raw and RLE blocks, a frame's declared
    content size) goes over ``limit``."""
    n = len(mv)
    p = 0
    exact = 0          # raw and RLE blocks, declared content sizes
    compressed = 0     # compressed blocks seen
    while p < n:
        if n - p < 4:
            raise InvalidRecordError("truncated zstd frame magic")
        magic = int.from_bytes(mv[p:p + 4], "little")
        if magic & 0xFFFFFFF0 == _ZSTD_SKIPPABLE:
            if n - p < 8:
                raise InvalidRecordError("truncated zstd skippable frame")
            p += 8 + int.from_bytes(mv[p + 4:p + 8], "little")
            continue
        if magic != _ZSTD_MAGIC:
            raise InvalidRecordError(f"not a zstd frame (magic {magic:#010x})")
        p += 4
        if p >= n:
            raise InvalidRecordError("truncated zstd frame header")
        descriptor = mv[p]
        p += 1
        single_segment = descriptor & 0x20
        fcs_size = (1 if single_segment else 0, 2, 4, 8)[descriptor >> 6]
        p += (0 if single_segment else 1) + (0, 1, 2, 4)[descriptor & 0x03]
        if p + fcs_size > n:
            raise InvalidRecordError("truncated zstd frame header")
        if fcs_size:
            content_size = int.from_bytes(mv[p:p + fcs_size], "little")
            if fcs_size == 2:
                content_size += 256
            if exact + content_size > limit:
                raise _TooLarge
        p += fcs_size
        while True:
            if n - p < 3:
                raise InvalidRecordError("truncated zstd block header")
            header = mv[p] | mv[p + 1] << 8 | mv[p + 2] << 16
            p += 3
            block_type, block_size = (header >> 1) & 0x03, header >> 3
            if block_type == 0:          # raw
                exact += block_size
                p += block_size
            elif block_type == 1:        # RLE: one byte repeated block_size times
                exact += block_size
                p += 1
            elif block_type == 2:        # compressed
                compressed += 1
                p += block_size
            else:
                raise InvalidRecordError("zstd block of the reserved type")
            if exact > limit:
                raise _TooLarge
            if header & 1:
                break
        if descriptor & 0x04:
            p += 4                       # content checksum
    if p > n:
        raise InvalidRecordError("zstd frame runs past the payload")
    return exact + compressed * _ZSTD_BLOCK_MAX


def _zstd_decompress(data: Buffer, limit: int) -> bytes:
    mv = memoryview(data).cast("B")
    if _zstd_most(mv, limit) <= limit:
        return bytes(cramjam.zstd.decompress(mv))
    # Compressed blocks may decode to less than the 128 KiB counted for each: decode into a
    # buffer one byte larger than the bound; filling it means the data is over the bound.
    out = bytearray(limit + 1)
    try:
        written = cramjam.zstd.decompress_into(mv, out)
    except cramjam.DecompressionError as exc:
        raise InvalidRecordError(
            f"zstd record data is corrupt or decompresses to more than {limit} bytes: "
            f"{exc}") from None
    if written > limit:
        raise _TooLarge
    return bytes(memoryview(out)[:written])


def compress(codec: int | str, data: Buffer, level: int | None = None) -> bytes:
    """``data`` compressed with ``codec`` in Kafka's byte format for that codec."""
    cid = codec_id(codec)
    if cid == NONE:
        return bytes(data)
    if level is None:
        level = DEFAULT_LEVELS.get(cid, 0)
    if cid == GZIP:
        return _gzip_compress(data, level)
    if cid == SNAPPY:
        return _snappy_compress(data)
    if cid == LZ4:
        return _lz4_compress(data, level)
    return bytes(cramjam.zstd.compress(data, level=level))


def decompress(codec: int | str, data: Buffer, *, legacy_v0: bool = False,
               max_output: int | None = None) -> bytes:
    """``data`` decompressed; ``InvalidRecordError`` if it is not a valid payload of ``codec``
    or would decompress to more than ``max_output`` bytes (default ``MAX_DECOMPRESSED_BYTES``;
    see :func:`decompressed_limit`).

    ``legacy_v0`` skips the LZ4 descriptor checksum that magic v0 writers got wrong.
    """
    cid = codec_id(codec)
    limit = MAX_DECOMPRESSED_BYTES if max_output is None else max(int(max_output), 0)
    try:
        if cid == NONE:
            if memoryview(data).nbytes > limit:
                raise _TooLarge
            return bytes(data)
        if cid == GZIP:
            return _gzip_decompress(data, limit)
        if cid == SNAPPY:
            return _snappy_decompress(data, limit)
        if cid == LZ4:
            return _lz4_decompress(data, limit, check_header=not legacy_v0)
        return _zstd_decompress(data, limit)
    except _TooLarge:
        raise InvalidRecordError(
            f"{CODEC_NAMES[cid]} record data decompresses to more than {limit} bytes, the most "
            "its records may hold") from None
    except _DECODE_ERRORS as exc:
        raise InvalidRecordError(
            f"Failed to decompress {CODEC_NAMES[cid]} record data: {exc}") from None
