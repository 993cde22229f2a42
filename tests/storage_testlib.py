"""Helpers for the storage tests: batches built and files parsed with ``struct`` alone.

Nothing here uses replica_core's record or index code, so tests can check our files against
Kafka's formats (KAFKA_SEMANTICS §1.1-1.6, §1.10) independently of our own readers.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

import crc32c as _crc32c

HEADER = struct.Struct(">qiibIhiqqqhii")  # the 61-byte v2 batch header (§1.1)


def _zigzag_varint(v: int) -> bytes:
    u = (v << 1) ^ (v >> 63)
    out = bytearray()
    while True:
        b = u & 0x7F
        u >>= 7
        if u:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def encode_record(offset_delta: int, ts_delta: int, key: bytes | None, value: bytes | None) -> bytes:
    body = bytearray(b"\x00")
    body += _zigzag_varint(ts_delta)
    body += _zigzag_varint(offset_delta)
    if key is None:
        body += _zigzag_varint(-1)
    else:
        body += _zigzag_varint(len(key)) + key
    if value is None:
        body += _zigzag_varint(-1)
    else:
        body += _zigzag_varint(len(value)) + value
    body += _zigzag_varint(0)  # no headers
    return _zigzag_varint(len(body)) + bytes(body)


def make_batch(
    values: list[bytes | None],
    *,
    base_offset: int = 0,
    timestamps: list[int] | None = None,
    epoch: int = -1,
    keys: list[bytes | None] | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    attributes: int = 0,
) -> bytes:
    """An uncompressed magic-2 batch, CRC-32C computed with the ``crc32c`` package."""
    n = len(values)
    if timestamps is None:
        timestamps = [1_700_000_000_000 + i for i in range(n)]
    keys = keys or [None] * n
    base_ts = timestamps[0] if n else -1
    records = b"".join(
        encode_record(i, timestamps[i] - base_ts, keys[i], values[i]) for i in range(n)
    )
    max_ts = max(timestamps) if n else -1
    body = struct.pack(
        ">hiqqqhii", attributes, max(n - 1, 0), base_ts, max_ts, producer_id, producer_epoch,
        base_sequence, n,
    ) + records
    crc = _crc32c.crc32c(body)
    return struct.pack(">qiibI", base_offset, 49 + len(records), epoch, 2, crc) + body


class Batch(NamedTuple):
    position: int
    base_offset: int
    last_offset: int
    size: int
    epoch: int
    max_timestamp: int
    crc_ok: bool


def parse_batches(data: bytes) -> list[Batch]:
    """Walk v2 batch headers with struct (stops at a partial tail)."""
    out = []
    pos = 0
    while pos + 61 <= len(data):
        (base, length, epoch, magic, crc, _attrs, last_delta, _bts, max_ts, _pid, _pe, _bs,
         _count) = HEADER.unpack_from(data, pos)
        size = length + 12
        if size < 61 or pos + size > len(data):
            break
        ok = _crc32c.crc32c(data[pos + 21 : pos + size]) == crc
        out.append(Batch(pos, base, base + last_delta, size, epoch, max_ts, ok))
        pos += size
    return out


def parse_offset_index(data: bytes, base_offset: int) -> list[tuple[int, int]]:
    """(absolute offset, position) entries of a ``.index`` file (8-byte entries, §1.5)."""
    return [
        (base_offset + rel, pos)
        for rel, pos in struct.iter_unpack(">ii", data[: len(data) // 8 * 8])
    ]


def parse_time_index(data: bytes, base_offset: int) -> list[tuple[int, int]]:
    """(timestamp, absolute offset) entries of a ``.timeindex`` file (12-byte entries, §1.6)."""
    return [
        (ts, base_offset + rel)
        for ts, rel in struct.iter_unpack(">qi", data[: len(data) // 12 * 12])
    ]


def parse_checkpoint(text: str) -> tuple[int, list[list[str]]]:
    """Kafka's text checkpoint: version line, count line, entries (§1.10)."""
    lines = text.split("\n")
    assert lines[-1] == "", "checkpoint must end with a newline"
    lines = lines[:-1]
    version = int(lines[0])
    count = int(lines[1])
    entries = [line.split(" ") for line in lines[2:]]
    assert len(entries) == count
    return version, entries


def expected_append_index(sizes: list[int], interval: int) -> list[int]:
    """Batch numbers that get an index entry under the append rule (§1.8), one batch per append."""
    out = []
    since = 0
    for i, size in enumerate(sizes):
        if since > interval:
            out.append(i)
            since = 0
        since += size
    return out


def expected_recovery_index(positions: list[int], interval: int) -> list[int]:
    """Batch numbers that get an entry when recovery rebuilds the index (§5.4)."""
    out = []
    last_entry = 0
    for i, pos in enumerate(positions):
        if pos - last_entry > interval:
            out.append(i)
            last_entry = pos
    return out
