"""Writing magic v2 record batches (§1.1, §1.2; ``MemoryRecordsBuilder``, ``DefaultRecord``).

The builder is deliberately permissive about producer fields (a batch with a producer id and no
sequence can be built): rejecting such batches is the validator's job (§2.4), and tests need to
build them. Only values that cannot be encoded at all (out of their integer range, a header
without a key) raise ``ValueError``.
"""
from __future__ import annotations

import struct
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from replica_core.records.compression import codec_id, compress
from replica_core.records.control import (
    ControlRecordType,
    encode_control_key,
    encode_end_txn_marker,
)
from replica_core.records.varint import encode_varint, encode_varlong

if TYPE_CHECKING:
    from typing_extensions import Buffer

__all__ = ["build_batch", "build_end_txn_marker", "encode_headers", "timestamp_type_of"]

BATCH_OVERHEAD = 61
CRC_START = 21
ATTR_COMPRESSION_MASK = 0x07
ATTR_LOG_APPEND_TIME = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40

NO_TIMESTAMP = -1

_AFTER_CRC = struct.Struct(">hiqqqhii")
_BEFORE_CRC = struct.Struct(">qiibI")

_TIMESTAMP_TYPES = {
    "create": False, "createtime": False, "create_time": False,
    "log_append": True, "logappendtime": True, "log_append_time": True,
}

try:
    from replica_core._fast._crc import crc32c as _crc32c
except ImportError:
    from crc32c import crc32c as _crc32c

Header = tuple[str | bytes, "bytes | None"]


def timestamp_type_of(name: str) -> bool:
    """True for LogAppendTime, False for CreateTime ("create"/"log_append", or Kafka's names)."""
    try:
        return _TIMESTAMP_TYPES[name.lower()]
    except KeyError:
        raise ValueError(f"unknown timestamp type {name!r}") from None


def _wrap64(v: int) -> int:
    v &= 0xFFFFFFFFFFFFFFFF
    return v - (1 << 64) if v >> 63 else v


def _check(value: int, bits: int, name: str) -> int:
    lim = 1 << (bits - 1)
    if not -lim <= value < lim:
        raise ValueError(f"{name} {value} does not fit int{bits}")
    return value


def encode_headers(headers: Iterable[Header] | None) -> bytes:
    """The header section of a record: count varint, then (key, value) pairs (§1.2)."""
    if not headers:
        return b"\x00"
    out = bytearray()
    n = 0
    for key, value in headers:
        if key is None:
            raise ValueError("Invalid null header key found in headers")
        kb = key.encode("utf-8") if isinstance(key, str) else bytes(key)
        out += encode_varint(len(kb))
        out += kb
        if value is None:
            out += b"\x01"  # varint(-1)
        else:
            vb = bytes(value)
            out += encode_varint(len(vb))
            out += vb
        n += 1
    return encode_varint(n) + bytes(out)


def encode_record(out: bytearray, offset_delta: int, timestamp_delta: int, key: Buffer | None,
                  value: Buffer | None, header_section: bytes) -> None:
    """Append one v2 record to ``out``; ``header_section`` comes from :func:`encode_headers`."""
    body = bytearray(b"\x00")
    body += encode_varlong(timestamp_delta)
    body += encode_varint(offset_delta)
    if key is None:
        body += b"\x01"
    else:
        kb = bytes(key)
        body += encode_varint(len(kb))
        body += kb
    if value is None:
        body += b"\x01"
    else:
        vb = bytes(value)
        body += encode_varint(len(vb))
        body += vb
    body += header_section
    out += encode_varint(len(body))
    out += body


def assemble_batch(records: Buffer, *, count: int, base_offset: int, partition_leader_epoch: int,
                   attributes: int, last_offset_delta: int, base_timestamp: int,
                   max_timestamp: int, producer_id: int, producer_epoch: int,
                   base_sequence: int) -> bytes:
    """A v2 batch around an encoded record area, compressed with the codec in ``attributes``.

    The CRC-32C covers bytes [21, end) (§1.1).
    """
    codec = attributes & ATTR_COMPRESSION_MASK
    payload = compress(codec, records) if codec else bytes(records)
    after_crc = _AFTER_CRC.pack(
        _check(attributes, 16, "attributes"), _check(last_offset_delta, 32, "last_offset_delta"),
        _check(base_timestamp, 64, "base_timestamp"), _check(max_timestamp, 64, "max_timestamp"),
        _check(producer_id, 64, "producer_id"), _check(producer_epoch, 16, "producer_epoch"),
        _check(base_sequence, 32, "base_sequence"), _check(count, 32, "count")) + payload
    length = len(after_crc) + CRC_START - 12
    crc = _crc32c(after_crc)
    return _BEFORE_CRC.pack(_check(base_offset, 64, "base_offset"), _check(length, 32, "length"),
                            _check(partition_leader_epoch, 32, "partition_leader_epoch"), 2,
                            crc) + after_crc


def build_batch(values: Sequence[Buffer | None], *, keys: Sequence[Buffer | None] | None = None,
                timestamps: Sequence[int] | None = None,
                headers: Sequence[Iterable[Header] | None] | None = None, base_offset: int = 0,
                partition_leader_epoch: int = -1, compression: str | int = "none",
                timestamp_type: str = "create", producer_id: int = -1, producer_epoch: int = -1,
                base_sequence: int = -1, transactional: bool = False, control: bool = False,
                now_ms: int | None = None) -> bytes:
    """One magic v2 batch holding ``values`` (with ``keys``, ``timestamps``, ``headers``).

    Record ``i`` gets offset delta ``i``; ``baseTimestamp`` is the first record's timestamp and
    ``maxTimestamp`` the largest (``MemoryRecordsBuilder``), or ``now_ms`` for LogAppendTime.
    Missing timestamps default to ``now_ms`` (the wall clock if ``None``). An empty ``values``
    gives an empty batch (count 0, baseTimestamp -1), as compaction leaves on disk.
    """
    n = len(values)
    if keys is not None and len(keys) != n:
        raise ValueError(f"{len(keys)} keys for {n} values")
    if headers is not None and len(headers) != n:
        raise ValueError(f"{len(headers)} header lists for {n} values")
    if timestamps is not None and len(timestamps) != n:
        raise ValueError(f"{len(timestamps)} timestamps for {n} values")
    log_append = timestamp_type_of(timestamp_type)
    if now_ms is None and (timestamps is None or log_append):
        now_ms = int(time.time() * 1000)
    ts_list = [now_ms] * n if timestamps is None else [int(t) for t in timestamps]
    for t in ts_list:
        _check(t, 64, "timestamp")
    base_ts = ts_list[0] if n else NO_TIMESTAMP
    if log_append:
        max_ts = now_ms
    else:
        max_ts = max([NO_TIMESTAMP, *ts_list])
    attributes = codec_id(compression)
    if log_append:
        attributes |= ATTR_LOG_APPEND_TIME
    if transactional:
        attributes |= ATTR_TRANSACTIONAL
    if control:
        attributes |= ATTR_CONTROL
    area = bytearray()
    for i in range(n):
        encode_record(area, i, _wrap64(ts_list[i] - base_ts), None if keys is None else keys[i],
                      values[i], encode_headers(None if headers is None else headers[i]))
    return assemble_batch(
        area, count=n, base_offset=base_offset, partition_leader_epoch=partition_leader_epoch,
        attributes=attributes, last_offset_delta=max(n - 1, 0), base_timestamp=base_ts,
        max_timestamp=max_ts, producer_id=producer_id, producer_epoch=producer_epoch,
        base_sequence=base_sequence)


def build_end_txn_marker(commit: bool, *, producer_id: int, producer_epoch: int,
                         coordinator_epoch: int, base_offset: int = 0,
                         partition_leader_epoch: int = -1, timestamp_ms: int | None = None) -> bytes:
    """A transactional control batch with one COMMIT or ABORT marker (``MemoryRecords
    .withEndTransactionMarker``)."""
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    return build_batch([encode_end_txn_marker(coordinator_epoch)], keys=[encode_control_key(kind)],
                       timestamps=None if timestamp_ms is None else [timestamp_ms],
                       base_offset=base_offset, partition_leader_epoch=partition_leader_epoch,
                       producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=-1,
                       transactional=True, control=True, now_ms=timestamp_ms)
