"""``replica-core dump-log`` and ``replica-core verify``: read-only views of Kafka log files.

``dump-log`` prints segment, offset-index, time-index, producer-snapshot, transaction-index and
KRaft checkpoint files line for line in the shape of Kafka's ``kafka-dump-log.sh``
(``kafka.tools.DumpLogSegments``) so the two outputs can be diffed: legacy records with their
``isValid``/``crc``, KRaft control records as JSON, and keys and values through the decoders of
:mod:`replica_core.storage.dump_decoders` (``--offsets-decoder``, ``--transaction-log-decoder``,
``--cluster-metadata-decoder``). ``verify`` checks a broker log directory (or one partition
directory): framing and CRCs, offsets increasing across batches and segments, index and
time-index entries (the written ones only: an index preallocated and left untrimmed by an unclean
stop is read up to its last entry, :mod:`replica_core.storage.index_extent`), the checkpoint files
and the leader-epoch checkpoint against the batches' epochs. Neither command writes anything.
"""
from __future__ import annotations

import argparse
import json
import mmap
import os
import re
import struct
import sys
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np

from replica_core.errors import KafkaError
from replica_core.storage.dump_decoders import (
    DumpAbortError,
    MessageParser,
    RecordDecoder,
    control_record_text,
    decoder_class_parser,
    parser_for,
)
from replica_core.storage.index_extent import IndexExtent, read_written_entries
from replica_core.storage.segment import (
    COL_ATTRIBUTES,
    COL_BASE_OFFSET,
    COL_BASE_SEQUENCE,
    COL_BASE_TIMESTAMP,
    COL_CRC,
    COL_CRC_OK,
    COL_LAST_OFFSET_DELTA,
    COL_MAGIC,
    COL_MAX_TIMESTAMP,
    COL_PARTITION_LEADER_EPOCH,
    COL_POSITION,
    COL_PRODUCER_EPOCH,
    COL_PRODUCER_ID,
    COL_RECORD_COUNT,
    COL_SIZE,
    INDEX_FILE_SUFFIX,
    INT32_MAX,
    LOG_FILE_SUFFIX,
    STOP_END,
    TIME_INDEX_FILE_SUFFIX,
    batch_kernel,
    last_offsets,
)

__all__ = ["main", "dump_file", "verify_log_dir", "find_log_dirs", "VerifyReport", "Finding",
           "RecordDecoder", "SegmentNameError", "silence_closed_stdout"]

_CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
_OFFSET_ENTRY = np.dtype([("rel", ">i4"), ("pos", ">i4")])
_TIME_ENTRY = np.dtype([("ts", ">i8"), ("rel", ">i4")])
_CHECKPOINTS = (
    "recovery-point-offset-checkpoint",
    "log-start-offset-checkpoint",
    "replication-offset-checkpoint",
    "cleaner-offset-checkpoint",
)
_TOPIC_PARTITION = re.compile(r"^(.+)-(\d+)$")
_KRAFT_SNAPSHOT_SUFFIX = ".checkpoint"
_KRAFT_SNAPSHOT = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")


# --- file access (read-only, independent of any Medium) ------------------------------------
class _Bytes:
    """A read-only map of a whole file (``b""`` when empty), closed on exit."""

    def __init__(self, path: str) -> None:
        self._f = open(path, "rb")
        size = os.fstat(self._f.fileno()).st_size
        self._mm = mmap.mmap(self._f.fileno(), size, access=mmap.ACCESS_READ) if size else None
        self.buf: Any = self._mm if self._mm is not None else b""
        self.size = size

    def __enter__(self) -> _Bytes:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._mm is not None:
            try:
                self._mm.close()
            except BufferError:
                pass
        self._f.close()


def _scan(buf: Any, size: int, check_crc: bool = True) -> tuple[np.ndarray, int, int]:
    if size == 0:
        return np.empty((0, 15), dtype=np.int64), 0, STOP_END
    return batch_kernel().scan_batches(buf, 0, size, check_crc)


class SegmentNameError(ValueError):
    """A file whose name does not start with a base offset (``<offset>.log`` and the like)."""


_LONG_NAME = re.compile(r"^[+-]?[0-9]+$")


def _base_offset_of(path: str) -> int:
    """The base offset a segment or index file is named after: the digits before the first
    ``.`` (``UnifiedLog.offsetFromFile``, a Java long)."""
    name = os.path.basename(path)
    stem = name.split(".", 1)[0]
    if _LONG_NAME.match(stem):
        value = int(stem)
        if -(2**63) <= value < 2**63:
            return value
    suffix = name[name.find("."):] if "." in name else ""
    raise SegmentNameError(
        f"{name} is not named like a segment file: the name must be the base offset in digits "
        f"followed by the suffix, e.g. 00000000000000000000{suffix}")


def _java_bool(v: bool) -> str:
    return "true" if v else "false"


def _increment_sequence(seq: int, delta: int) -> int:
    if seq > INT32_MAX - delta:
        return delta - (INT32_MAX - seq) - 1
    return seq + delta


def _timestamp_type(magic: int, attributes: int) -> str:
    if magic == 0:
        return "NoTimestampType"
    return "LogAppendTime" if attributes & 0x08 else "CreateTime"


def _batch_line(h: np.ndarray, last: int, position: int) -> str:
    magic = int(h[COL_MAGIC])
    attrs = int(h[COL_ATTRIBUTES])
    if magic >= 2:
        base_seq = int(h[COL_BASE_SEQUENCE])
        delta = int(h[COL_LAST_OFFSET_DELTA])
        last_seq = -1 if base_seq < 0 else _increment_sequence(base_seq, delta)
        horizon = (
            f"OptionalLong[{int(h[COL_BASE_TIMESTAMP])}]" if attrs & 0x40 else "OptionalLong.empty"
        )
        head = (
            f"baseOffset: {int(h[COL_BASE_OFFSET])} lastOffset: {last} "
            f"count: {int(h[COL_RECORD_COUNT])} baseSequence: {base_seq} lastSequence: {last_seq} "
            f"producerId: {int(h[COL_PRODUCER_ID])} producerEpoch: {int(h[COL_PRODUCER_EPOCH])} "
            f"partitionLeaderEpoch: {int(h[COL_PARTITION_LEADER_EPOCH])} "
            f"isTransactional: {_java_bool(bool(attrs & 0x10))} "
            f"isControl: {_java_bool(bool(attrs & 0x20))} deleteHorizonMs: {horizon}"
        )
    else:
        head = f"offset: {last}"
    max_ts = int(h[COL_MAX_TIMESTAMP])   # a v1 entry's is its message's timestamp (the kernel)
    return (
        f"{head} position: {position} {_timestamp_type(magic, attrs)}: {max_ts} "
        f"size: {int(h[COL_SIZE])} magic: {magic} compresscodec: {_CODECS.get(attrs & 0x07, 'unknown')} "
        f"crc: {int(h[COL_CRC])} isvalid: {_java_bool(int(h[COL_CRC_OK]) == 1)}"
    )


# --- records of one batch (through the records layer, which handles every codec) -----------------
@dataclass
class _Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    header_keys: list[str]
    sequence: int
    legacy_check: tuple[bool, int] | None = None  # (isValid, stored crc) of a v0/v1 record


def _legacy_checks(batch: bytes) -> list[tuple[bool, int]]:
    """(isValid, checksum) of each record of a v0/v1 entry, as ``DumpLogSegments`` prints them:
    the entry itself when uncompressed, else each inner message of the decompressed wrapper
    (``LegacyRecord.isValid``: CRC-32 of the message from its magic byte on)."""
    from replica_core.records.compression import codec_id, decompress
    from replica_core.records.legacy import parse_legacy_message

    crc = struct.unpack_from(">I", batch, 12)[0]
    codec = batch[17] & 0x07
    if codec == 0:
        return [(zlib.crc32(batch[16:]) == crc, crc)]
    msg = parse_legacy_message(memoryview(batch))
    payload = batch[msg.value_pos:msg.value_pos + max(msg.value_len, 0)]
    blob = decompress(codec_id(codec), payload, legacy_v0=msg.magic == 0)
    out = []
    p = 0
    while len(blob) - p >= 12:
        length = struct.unpack_from(">i", blob, p + 8)[0]
        if length < 14 or length > len(blob) - p - 12:
            break
        inner_crc = struct.unpack_from(">I", blob, p + 12)[0]
        out.append((zlib.crc32(blob[p + 16:p + 12 + length]) == inner_crc, inner_crc))
        p += 12 + length
    return out


def _iter_records(batch: bytes) -> Iterator[_Record]:
    from replica_core.records import batch_at, sequence_add

    b = batch_at(batch)
    magic = b.magic
    base_seq = b.base_sequence if magic >= 2 else -1
    base = b.base_offset
    records = list(b)
    checks: list[tuple[bool, int]] | list[None] = [None] * len(records)
    if magic < 2:
        checks = _legacy_checks(batch)
        if len(checks) != len(records):
            raise ValueError(f"{len(records)} records but {len(checks)} inner messages")
    for r, check in zip(records, checks, strict=True):
        seq = -1 if base_seq < 0 else sequence_add(base_seq, r.offset - base)
        yield _Record(r.offset, r.timestamp, r.key, r.value, [k for k, _ in r.headers], seq,
                      check)


# --- dump-log ----------------------------------------------------------------------------
@dataclass
class _DumpState:
    index_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    non_consecutive: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_out_of_order: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_not_found: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    failed: bool = False


def _record_line(r: _Record, magic: int, ts_type: str, control: bool, *, print_data: bool,
                 skip_record_metadata: bool, parser: MessageParser) -> str:
    """One ``| offset: ...`` line, field for field as ``DumpLogSegments.dumpLog`` prints it."""
    parts: list[str] = []
    prefix = "| "
    if not skip_record_metadata:
        parts.append(f"{prefix}offset: {r.offset} {ts_type}: {r.timestamp} "
                     f"keySize: {-1 if r.key is None else len(r.key)} "
                     f"valueSize: {-1 if r.value is None else len(r.value)}")
        prefix = " "
        if magic >= 2:
            parts.append(f" sequence: {r.sequence} headerKeys: [{','.join(r.header_keys)}]")
        if r.legacy_check is not None:
            parts.append(f" isValid: {_java_bool(r.legacy_check[0])} crc: {r.legacy_check[1]}}}")
        if control:
            parts.append(_control_suffix(r))
    if print_data and not control:
        key, payload = parser(_as_record(r))
        if key is not None:
            parts.append(f"{prefix}key: {key}")
        if payload is not None:
            parts.append(f" payload: {payload}")
    return "".join(parts)


def _as_record(r: _Record) -> Any:
    from replica_core.records.record import Record

    return Record(r.offset, r.timestamp, r.key, r.value, [])


def _dump_log(path: str, out: IO[str], err: IO[str], state: _DumpState, *, deep: bool,
              print_data: bool, skip_record_metadata: bool, max_bytes: int,
              parser: MessageParser) -> None:
    name = os.path.basename(path)
    if path.endswith(LOG_FILE_SUFFIX):
        out.write(f"Log starting offset: {_base_offset_of(path)}\n")
    elif name == "bootstrap.checkpoint":
        out.write("KRaft bootstrap snapshot\n")
    elif path.endswith(_KRAFT_SNAPSHOT_SUFFIX):
        m = _KRAFT_SNAPSHOT.match(name)
        if m:
            out.write(f"Snapshot end offset: {int(m.group(1))}, epoch: {int(m.group(2))}\n")
    with _Bytes(path) as f:
        size = min(f.size, max_bytes)
        headers, valid, _stop = _scan(f.buf, size, True)
        last = last_offsets(headers)
        last_record_offset = -1
        for i in range(len(headers)):
            h = headers[i]
            pos = int(h[COL_POSITION])
            out.write(_batch_line(h, int(last[i]), pos) + "\n")
            if not deep:
                continue
            attrs = int(h[COL_ATTRIBUTES])
            magic = int(h[COL_MAGIC])
            control = magic >= 2 and bool(attrs & 0x20)
            ts_type = _timestamp_type(magic, attrs)
            batch = bytes(f.buf[pos : pos + int(h[COL_SIZE])])
            try:
                records = list(_iter_records(batch))
            except (KafkaError, ValueError, struct.error) as e:
                out.write(f"| <cannot decode records: {e}>\n")
                state.failed = True
                continue
            for r in records:
                if last_record_offset != -1 and r.offset != last_record_offset + 1:
                    state.non_consecutive.setdefault(os.path.abspath(path), []).append(
                        (last_record_offset, r.offset)
                    )
                last_record_offset = r.offset
                try:
                    line = _record_line(r, magic, ts_type, control, print_data=print_data,
                                        skip_record_metadata=skip_record_metadata, parser=parser)
                except DumpAbortError as e:
                    err.write(f"Could not dump {path}: {e}\n")
                    state.failed = True
                    return
                out.write(line + "\n")
        trailing = f.size - valid
        if trailing > 0 and max_bytes >= f.size:
            out.write(f"Found {trailing} invalid bytes at the end of {os.path.basename(path)}\n")


def _control_suffix(r: _Record) -> str:
    """What the record line shows of a control record (``DumpLogSegments.dumpLog``): the
    end-transaction marker, the KRaft control record as JSON, or ``controlType: NAME(id)``."""
    from replica_core.records.control import (
        ControlRecordType,
        control_record_type,
        decode_end_txn_marker,
    )

    try:
        ctype = control_record_type(r.key)
        type_id = struct.unpack_from(">h", r.key or b"", 2)[0]
        if ctype in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            marker = decode_end_txn_marker(r.key, r.value)
            return (f" endTxnMarker: {marker.control_type.name} "
                    f"coordinatorEpoch: {marker.coordinator_epoch}")
    except KafkaError as e:
        raise DumpAbortError(f"control record at offset {r.offset}: {e}") from e
    text = control_record_text(type_id, r.value)
    if text is not None:
        return text
    return f" controlType: {ctype.name}({type_id})"


def _slot(fh: Any, i: int, dtype: np.dtype) -> np.void:
    raw = os.pread(fh.fileno(), dtype.itemsize, i * dtype.itemsize)
    return np.frombuffer(raw, dtype=dtype, count=1)[0]


def _sanity_check(path: str, time_index: bool) -> str | None:
    """Kafka's ``sanityCheck`` for an index file; the failure message or None. As Kafka counts
    every slot of the file it opens, the last entry is the last slot: the first and last slots
    are all it reads (a preallocated file's zero slot passes, as in Kafka)."""
    base = _base_offset_of(path)
    size = os.path.getsize(path)
    dtype = _TIME_ENTRY if time_index else _OFFSET_ENTRY
    slots = size // dtype.itemsize
    with open(path, "rb") as fh:
        first = _slot(fh, 0, dtype) if slots else None
        last = _slot(fh, slots - 1, dtype) if slots else None
    if time_index:
        if first is not None and last is not None:
            first_ts, last_ts = int(first["ts"]), int(last["ts"])
            last_off = base + int(last["rel"])
            if last_ts < first_ts:
                return (f"Corrupt time index found, time index file ({path}) has non-zero size but "
                        f"the last timestamp is {last_ts} which is less than the first timestamp {first_ts}")
            if last_off < base:
                return (f"Corrupt time index found, time index file ({path}) has non-zero size but "
                        f"the last offset is {last_off} which is less than the first offset {base}")
        if size % 12:
            return f"Time index file {path} is corrupt, found {size} bytes which is neither positive nor a multiple of 12."
    else:
        if last is not None and base + int(last["rel"]) < base:
            return (f"Corrupt index found, index file ({path}) has non-zero size but the last offset "
                    f"is {base + int(last['rel'])} which is less than the base offset {base}")
        if size % 8:
            return f"Index file {path} is corrupt, found {size} bytes which is neither positive nor a multiple of 8."
    return None


def _segment_headers(log_path: str) -> tuple[np.ndarray, np.ndarray]:
    if not os.path.exists(log_path):
        return np.empty((0, 15), dtype=np.int64), np.empty(0, dtype=np.int64)
    with _Bytes(log_path) as f:
        headers, _, _ = _scan(f.buf, f.size, False)
    return headers, last_offsets(headers)


def _dump_index(path: str, out: IO[str], err: IO[str], state: _DumpState, *,
                sanity_only: bool, verify_only: bool) -> None:
    base = _base_offset_of(path)
    # Kafka counts every slot; its walk stops at the first zero entry after slot 0, so the
    # written entries (at least slot 0) are all it can print
    entries, extent = read_written_entries(path, _OFFSET_ENTRY, at_least_one=True)
    if extent.slots == 0:
        out.write(f"{path} is empty.\n")
        return
    if sanity_only:
        problem = _sanity_check(path, False)
        if problem:
            err.write(problem + "\n")
            state.failed = True
        else:
            out.write(f"{path} passed sanity check.\n")
        return
    log_path = path[: -len(INDEX_FILE_SUFFIX)] + LOG_FILE_SUFFIX
    headers, last = _segment_headers(log_path)
    positions = headers[:, COL_POSITION]
    for i in range(len(entries)):
        rel, pos = int(entries["rel"][i]), int(entries["pos"][i])
        if rel == 0 and i > 0:
            return  # zero-filled preallocated tail of a crashed active index
        offset = base + rel
        r = int(np.searchsorted(positions, pos, side="left"))
        first_batch_last = int(last[r]) if r < len(last) else -1
        if first_batch_last != offset:
            state.index_mismatches.setdefault(os.path.abspath(path), []).append((offset, first_batch_last))
        if not verify_only:
            out.write(f"offset: {offset} position: {pos}\n")


def _dump_time_index(path: str, out: IO[str], err: IO[str], state: _DumpState, *,
                     sanity_only: bool, verify_only: bool) -> None:
    base = _base_offset_of(path)
    if sanity_only:
        problem = _sanity_check(path, True)
        if problem:
            err.write(problem + "\n")
            state.failed = True
        else:
            out.write(f"{path} passed sanity check.\n")
        return
    entries, _extent = read_written_entries(path, _TIME_ENTRY, at_least_one=True)
    stem = path[: -len(TIME_INDEX_FILE_SUFFIX)]
    headers, last = _segment_headers(stem + LOG_FILE_SUFFIX)
    apath = os.path.abspath(path)
    prev = -1
    for i in range(len(entries)):
        ts, rel = int(entries["ts"][i]), int(entries["rel"][i])
        if rel == 0 and i > 0:
            return
        offset = base + rel
        rows = np.flatnonzero(last >= offset)
        if rows.size == 0:
            state.time_not_found.setdefault(apath, []).append((offset, -1))
        elif int(last[rows[0]]) != offset:
            state.time_not_found.setdefault(apath, []).append((offset, int(last[rows[0]])))
        else:
            batch_max = int(headers[rows[0], COL_MAX_TIMESTAMP])
            if batch_max != ts:
                state.time_mismatches.setdefault(apath, []).append((ts, batch_max))
            if prev >= ts:
                state.time_out_of_order.setdefault(apath, []).append((ts, prev))
        if not verify_only:
            out.write(f"timestamp: {ts} offset: {offset}\n")
        prev = ts


def _decrement_sequence(seq: int, delta: int) -> int:
    return INT32_MAX - (delta - seq) + 1 if seq < delta else seq - delta


def _dump_producer_snapshot(path: str, out: IO[str], err: IO[str], state: _DumpState) -> None:
    """Producer-state snapshot (§1.9): version 1, CRC-32C of bytes 6.., 46-byte entries."""
    import crc32c

    with open(path, "rb") as fh:
        raw = fh.read()
    if len(raw) < 10:
        err.write(f"Snapshot failed schema validation: {len(raw)} bytes\n")
        state.failed = True
        return
    version, crc, count = struct.unpack_from(">hIi", raw, 0)
    if version != 1:
        err.write(f"Snapshot contained an unknown file version {version}\n")
        state.failed = True
        return
    if count < 0 or len(raw) != 10 + 46 * count:
        err.write(f"Snapshot failed schema validation: {count} entries in {len(raw)} bytes\n")
        state.failed = True
        return
    computed = crc32c.crc32c(raw[6:])
    if computed != crc:
        err.write(f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {crc}. "
                  f"Computed crc: {computed}\n")
        state.failed = True
        return
    for i in range(count):
        (pid, epoch, last_seq, last_offset, offset_delta, timestamp, coordinator_epoch,
         txn_first) = struct.unpack_from(">qhiqiqiq", raw, 10 + 46 * i)
        txn = f"OptionalLong[{txn_first}]" if txn_first >= 0 else "OptionalLong.empty"
        line = (f"producerId: {pid} producerEpoch: {epoch} coordinatorEpoch: {coordinator_epoch} "
                f"currentTxnFirstOffset: {txn} lastTimestamp: {timestamp} ")
        if last_offset >= 0:
            line += (f"firstSequence: {_decrement_sequence(last_seq, offset_delta)} "
                     f"lastSequence: {last_seq} lastOffset: {last_offset} "
                     f"offsetDelta: {offset_delta} timestamp: {timestamp}")
        out.write(line + "\n")


def _dump_txn_index(path: str, out: IO[str], err: IO[str], state: _DumpState) -> None:
    """Aborted-transaction index (§1.9): 34-byte entries."""
    with open(path, "rb") as fh:
        raw = fh.read()
    if len(raw) % 34:
        err.write(f"{path}: {len(raw)} bytes is not a multiple of 34\n")
        state.failed = True
    for version, pid, first, last, lso in struct.iter_unpack(">hqqqq", raw[: len(raw) // 34 * 34]):
        out.write(f"version: {version} producerId: {pid} firstOffset: {first} "
                  f"lastOffset: {last} lastStableOffset: {lso}\n")


def _print_errors(state: _DumpState, err: IO[str]) -> None:
    # the index mismatches and non-consecutive pairs are lists Kafka prepends to: newest first
    for name, pairs in state.index_mismatches.items():
        err.write(f"Mismatches in :{name}\n")
        for idx, logo in reversed(pairs):
            err.write(f"  Index offset: {idx}, log offset: {logo}\n")
    for name, pairs in state.time_mismatches.items():
        err.write(f"Found timestamp mismatch in :{name}\n")
        for a, b in pairs:
            err.write(f"  Index timestamp: {a}, log timestamp: {b}\n")
    for name, pairs in state.time_out_of_order.items():
        err.write(f"Found out of order timestamp in :{name}\n")
        for a, b in pairs:
            err.write(f"  Index timestamp: {a}, Previously indexed timestamp: {b}\n")
    for pairs in state.time_not_found.values():
        err.write("The following indexed offsets are not found in the log.\n")
        for a, b in pairs:
            err.write(f"Indexed offset: {a}, found log offset: {b}\n")
    for name, pairs in state.non_consecutive.items():
        err.write(f"Non-consecutive offsets in {name}\n")
        for a, b in reversed(pairs):
            err.write(f"  {a} is followed by {b}\n")


def dump_file(
    path: str,
    out: IO[str] | None = None,
    err: IO[str] | None = None,
    *,
    deep_iteration: bool = False,
    print_data: bool = False,
    index_sanity_check: bool = False,
    verify_index_only: bool = False,
    skip_record_metadata: bool = False,
    max_bytes: int = INT32_MAX,
    decoder: RecordDecoder = RecordDecoder.STRING,
) -> bool:
    """Dump one file like ``kafka-dump-log.sh``; False if it could not be dumped cleanly.

    A ``decoder`` other than STRING implies ``print_data`` (as Kafka's decoder options do)."""
    out = out or sys.stdout
    err = err or sys.stderr
    state = _DumpState()
    print_data = print_data or decoder is not RecordDecoder.STRING
    _dump_one(path, out, err, state, deep=deep_iteration or print_data, print_data=print_data,
              sanity=index_sanity_check, verify=verify_index_only,
              skip_meta=skip_record_metadata, max_bytes=max_bytes, parser=parser_for(decoder))
    _print_errors(state, err)
    return not state.failed


def _dump_one(path: str, out: IO[str], err: IO[str], state: _DumpState, *, deep: bool,
              print_data: bool, sanity: bool, verify: bool, skip_meta: bool, max_bytes: int,
              parser: MessageParser) -> None:
    out.write(f"Dumping {path}\n")
    name = os.path.basename(path)
    suffix = name[name.rfind("."):] if "." in name else ""
    try:
        if suffix in (LOG_FILE_SUFFIX, _KRAFT_SNAPSHOT_SUFFIX):
            _dump_log(path, out, err, state, deep=deep, print_data=print_data,
                      skip_record_metadata=skip_meta, max_bytes=max_bytes, parser=parser)
        elif suffix == INDEX_FILE_SUFFIX:
            _dump_index(path, out, err, state, sanity_only=sanity, verify_only=verify)
        elif suffix == TIME_INDEX_FILE_SUFFIX:
            _dump_time_index(path, out, err, state, sanity_only=sanity, verify_only=verify)
        elif suffix == ".snapshot":
            _dump_producer_snapshot(path, out, err, state)
        elif suffix == ".txnindex":
            _dump_txn_index(path, out, err, state)
        else:
            err.write(f"Ignoring unknown file {path}\n")
    except BrokenPipeError:
        raise  # the reader of stdout went away: not this file's fault (see silence_closed_stdout)
    except (OSError, ValueError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else e
        err.write(f"Could not dump {path}: {reason}\n")
        state.failed = True


_STRING_DECODER = "org.apache.kafka.tools.api.StringDecoder"


def _build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="replica-core dump-log",
        description="Print Kafka .log, .index, .timeindex, .snapshot, .txnindex and KRaft "
        ".checkpoint files in the format of kafka-dump-log.sh (kafka.tools.DumpLogSegments).",
    )
    p.add_argument("files", nargs="*", metavar="FILE", help="segment, index or time index files")
    p.add_argument("--files", dest="files_opt", default=None,
                   help="comma separated list of files (kafka-dump-log.sh spelling)")
    p.add_argument("--deep-iteration", action="store_true", help="print every record")
    p.add_argument("--print-data", "--print-data-log", dest="print_data", action="store_true",
                   help="print keys and values as UTF-8 (implies --deep-iteration)")
    decoders = p.add_argument_group(
        "decoders", "print keys and values as Kafka's internal topics store them (each implies "
        "--print-data-log; the first given of these wins, in this order)")
    decoders.add_argument("--offsets-decoder", action="store_true",
                          help="__consumer_offsets: offset commits and group metadata as JSON")
    decoders.add_argument("--transaction-log-decoder", action="store_true",
                          help="__transaction_state: transactional ids and their metadata")
    decoders.add_argument("--cluster-metadata-decoder", action="store_true",
                          help="KRaft __cluster_metadata records as JSON")
    classes = p.add_argument_group(
        "decoder classes", "otherwise keys and values go through these (Kafka's "
        "org.apache.kafka.tools.api StringDecoder, IntegerDecoder or LongDecoder; default "
        "StringDecoder); either option implies --print-data-log")
    classes.add_argument("--key-decoder-class", nargs="?", const=_STRING_DECODER, default=None,
                         metavar="CLASS")
    classes.add_argument("--value-decoder-class", nargs="?", const=_STRING_DECODER,
                         default=None, metavar="CLASS")
    p.add_argument("--index-sanity-check", action="store_true",
                   help="only run the startup sanity check on index files")
    p.add_argument("--verify-index-only", action="store_true",
                   help="check index entries against the log without printing them")
    p.add_argument("--skip-record-metadata", action="store_true")
    p.add_argument("--max-bytes", type=int, default=INT32_MAX,
                   help="read at most this many bytes of each .log file")
    p.add_argument("--max-message-size", type=int, default=5 * 1024 * 1024,
                   help="accepted for compatibility; unused")
    return p


def _decoder_of(args: argparse.Namespace) -> RecordDecoder:
    # DumpLogSegmentsOptions.messageParser: offsets, then transaction log, then cluster metadata
    if args.offsets_decoder:
        return RecordDecoder.OFFSETS
    if args.transaction_log_decoder:
        return RecordDecoder.TRANSACTION_LOG
    if args.cluster_metadata_decoder:
        return RecordDecoder.CLUSTER_METADATA
    return RecordDecoder.STRING


def main(argv: list[str] | None = None, out: IO[str] | None = None, err: IO[str] | None = None) -> int:
    """``replica-core dump-log FILE... [--deep-iteration] [--print-data-log] [--offsets-decoder |
    --transaction-log-decoder | --cluster-metadata-decoder | --key-decoder-class [CLASS]
    --value-decoder-class [CLASS]] [--index-sanity-check] [--verify-index-only]``. Exit 0 on
    success, 1 if a file failed, 2 on usage errors."""
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0) if e.code in (0, None) else 2
    files = list(args.files)
    if args.files_opt:
        files += [f for f in args.files_opt.split(",") if f]
    if not files:
        parser.print_usage(err or sys.stderr)
        (err or sys.stderr).write("replica-core dump-log: error: no FILE given\n")
        return 2
    out = out or sys.stdout
    err = err or sys.stderr
    decoder = _decoder_of(args)
    classes = (args.key_decoder_class, args.value_decoder_class)
    print_data = (args.print_data or decoder is not RecordDecoder.STRING
                  or any(c is not None for c in classes))
    parser = parser_for(decoder)
    if decoder is RecordDecoder.STRING and any(c is not None for c in classes):
        # DumpLogSegmentsOptions.messageParser: the decoder classes serve when no topic decoder
        try:
            parser = decoder_class_parser(
                *(_STRING_DECODER if c is None else c for c in classes))
        except ValueError as e:
            err.write(f"replica-core dump-log: error: {e}\n")
            return 2
    state = _DumpState()
    for path in files:
        _dump_one(path, out, err, state, deep=args.deep_iteration or print_data,
                  print_data=print_data, sanity=args.index_sanity_check,
                  verify=args.verify_index_only, skip_meta=args.skip_record_metadata,
                  max_bytes=args.max_bytes, parser=parser)
    _print_errors(state, err)
    return 1 if state.failed else 0


def silence_closed_stdout() -> None:
    """After a ``BrokenPipeError`` on stdout (``dump-log ... | head``): point stdout at
    ``/dev/null`` so that what is still buffered, and the interpreter's final flush, go nowhere
    instead of raising again; the command then ends quietly."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


# --- verify --------------------------------------------------------------------------------
@dataclass
class Finding:
    """One problem (``severity="error"``) or remark (``"warning"``) found by verify."""

    severity: str
    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.severity.upper()} {self.where}: {self.message}"


@dataclass
class PartitionSummary:
    name: str
    segments: int = 0
    batches: int = 0
    records: int = 0
    bytes: int = 0
    log_start_offset: int = -1
    log_end_offset: int = 0
    errors: int = 0
    warnings: int = 0


@dataclass
class VerifyReport:
    """Result of :func:`verify_log_dir`; ``ok`` when no error was found (warnings allowed)."""

    path: str
    partitions: list[PartitionSummary] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warning"]

    @property
    def ok(self) -> bool:
        return not self.errors

    def add(self, severity: str, where: str, message: str) -> None:
        self.findings.append(Finding(severity, where, message))

    def render(self, verbose: bool = False) -> str:
        """Human summary: one status line, then every error (and warnings when verbose)."""
        nseg = sum(p.segments for p in self.partitions)
        nbatch = sum(p.batches for p in self.partitions)
        nbytes = sum(p.bytes for p in self.partitions)
        status = "OK" if self.ok else f"{len(self.errors)} problem(s)"
        lines = [
            f"{self.path}: {status} - {len(self.partitions)} partition(s), {nseg} segment(s), "
            f"{nbatch} batch(es), {nbytes} bytes, {len(self.warnings)} warning(s)"
        ]
        if verbose:
            for p in self.partitions:
                lines.append(
                    f"  {p.name}: offsets [{p.log_start_offset}, {p.log_end_offset}), "
                    f"{p.segments} segment(s), {p.batches} batch(es), {p.records} record(s), "
                    f"{p.bytes} bytes, {p.errors} error(s), {p.warnings} warning(s)"
                )
        for f in self.findings:
            if f.severity == "error" or verbose:
                lines.append(f"  {f}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "ok": self.ok,
            "partitions": [vars(p) for p in self.partitions],
            "findings": [vars(f) for f in self.findings],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


def _is_partition_dir(path: str) -> bool:
    name = os.path.basename(os.path.normpath(path))
    if not _TOPIC_PARTITION.match(name) or not os.path.isdir(path):
        return False
    try:
        return any(n.endswith((LOG_FILE_SUFFIX, "leader-epoch-checkpoint")) for n in os.listdir(path))
    except OSError:
        return False


def _is_log_dir(path: str) -> bool:
    try:
        names = os.listdir(path)
    except OSError:
        return False
    if any(n in _CHECKPOINTS or n in ("meta.properties", ".kafka_cleanshutdown") for n in names):
        return True
    return any(_is_partition_dir(os.path.join(path, n)) for n in names)


def find_log_dirs(root: str | os.PathLike[str], max_depth: int = 4) -> list[str]:
    """Kafka log directories at or below ``root`` (``root`` itself if it is a partition dir)."""
    root = os.fspath(root)
    if not os.path.isdir(root):
        return []
    if _is_partition_dir(root) or _is_log_dir(root):
        return [root]
    found: list[str] = []
    if max_depth <= 0:
        return found
    for name in sorted(os.listdir(root)):
        sub = os.path.join(root, name)
        if os.path.isdir(sub) and not os.path.islink(sub):
            found.extend(find_log_dirs(sub, max_depth - 1))
    return found


def _parse_checkpoint(path: str, fields: int) -> list[list[str]]:
    """Kafka's text checkpoint (§1.10): version 0, count, entries; raises ValueError."""
    with open(path, encoding="utf-8") as fh:
        lines = fh.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        return []
    if lines[0].strip() != "0":
        raise ValueError(f"unrecognised version {lines[0].strip()!r}")
    if len(lines) < 2:
        return []
    count = int(lines[1].strip())
    entries = []
    for line in lines[2:]:
        parts = line.split()
        if len(parts) != fields:
            raise ValueError(f"malformed line {line!r}")
        entries.append(parts)
    if len(entries) != count:
        raise ValueError(f"expected {count} entries but found {len(entries)}")
    return entries


@dataclass
class _Partition:
    name: str
    path: str
    log_start: int = -1
    log_end: int = 0
    epochs: list[tuple[int, int, int]] = field(default_factory=list)  # (base offset, epoch, magic)


def _verify_segment(report: VerifyReport, part: _Partition, summary: PartitionSummary,
                    log_path: str, prev_last: int) -> tuple[int, np.ndarray, np.ndarray]:
    where = os.path.join(part.name, os.path.basename(log_path))
    base = _base_offset_of(log_path)
    with _Bytes(log_path) as f:
        headers, valid, stop = _scan(f.buf, f.size, True)
        size = f.size
    summary.bytes += size
    summary.batches += len(headers)
    if len(headers):
        counts = headers[:, COL_RECORD_COUNT]
        summary.records += int(np.where(counts >= 0, counts, 1).sum())
    if valid < size:
        kind = "a torn batch" if stop != 2 else "a corrupt batch header"
        report.add("error", where, f"{size - valid} bytes after the last complete batch at position "
                   f"{valid} ({kind}); recovery would cut them")
    bad_crc = np.flatnonzero(headers[:, COL_CRC_OK] != 1)
    for r in bad_crc[:5].tolist():
        report.add("error", where, f"batch at position {int(headers[r, COL_POSITION])} "
                   f"(offset {int(headers[r, COL_BASE_OFFSET])}) fails its CRC or is shorter than 61 bytes")
    if bad_crc.size > 5:
        report.add("error", where, f"... {bad_crc.size - 5} more batches with bad CRCs")
    last = last_offsets(headers)
    first = headers[:, COL_BASE_OFFSET]
    if len(headers):
        backwards = np.flatnonzero(last < first)
        for r in backwards[:3].tolist():
            report.add("error", where, f"batch at position {int(headers[r, COL_POSITION])} has last "
                       f"offset {int(last[r])} below its base offset {int(first[r])}")
        rel = last - base
        outside = np.flatnonzero((rel < 0) | (rel > INT32_MAX))
        if outside.size:
            r = int(outside[0])
            report.add("error", where, f"batch at position {int(headers[r, COL_POSITION])} with last "
                       f"offset {int(last[r])} does not fit segment base {base}")
        nonmono = np.flatnonzero(first[1:] <= last[:-1])
        for r in nonmono[:3].tolist():
            report.add("error", where, f"offsets go backwards at position "
                       f"{int(headers[r + 1, COL_POSITION])}: batch starts at {int(first[r + 1])} after "
                       f"last offset {int(last[r])}")
        if prev_last >= 0 and int(first[0]) <= prev_last:
            report.add("error", where, f"first offset {int(first[0])} is not above the previous "
                       f"segment's last offset {prev_last}")
    if prev_last >= 0 and base <= prev_last:
        report.add("error", where, f"segment base {base} is not above the previous segment's last "
                   f"offset {prev_last}")
    for r in range(len(headers)):
        part.epochs.append((int(first[r]), int(headers[r, COL_PARTITION_LEADER_EPOCH]),
                            int(headers[r, COL_MAGIC])))
    return (int(last[-1]) if len(last) else prev_last), headers, last


def _note_preallocated(report: VerifyReport, where: str, extent: IndexExtent) -> None:
    """A warning for an index Kafka preallocated and never trimmed (an unclean stop). Its zero
    slots are not entries -- nor is an all-zero slot 0 -- so they are neither read nor checked;
    Kafka loads such files as they are."""
    if extent.preallocated:
        report.add("warning", where, f"preallocated, {extent.entries} of {extent.slots} slots "
                   "written; the zero slots after them are not entries (not trimmed: the broker "
                   "did not shut down cleanly)")


def _verify_indexes(report: VerifyReport, part: _Partition, log_path: str, headers: np.ndarray,
                    last: np.ndarray, is_last_segment: bool) -> None:
    base = _base_offset_of(log_path)
    stem = log_path[: -len(LOG_FILE_SUFFIX)]
    positions = headers[:, COL_POSITION]
    seg_last = int(last[-1]) if len(last) else base - 1
    idx_path = stem + INDEX_FILE_SUFFIX
    where = os.path.join(part.name, os.path.basename(idx_path))
    if not os.path.exists(idx_path):
        if len(headers):
            report.add("warning", where, "missing; the loader rebuilds it")
    else:
        size = os.path.getsize(idx_path)
        if size % 8:
            report.add("error", where, f"{size} bytes is not a multiple of 8")
        entries, extent = read_written_entries(idx_path, _OFFSET_ENTRY)
        _note_preallocated(report, where, extent)
        rel = entries["rel"].astype(np.int64)
        pos = entries["pos"].astype(np.int64)
        n = len(rel)
        offs = base + rel
        if n:
            if np.any(np.diff(offs) <= 0):
                report.add("error", where, "offsets are not strictly increasing")
            if np.any(np.diff(pos) < 0):
                report.add("error", where, "positions go backwards")
            rows = np.searchsorted(positions, pos, side="left")
            at_start = (rows < len(positions)) & (positions[np.minimum(rows, len(positions) - 1)] == pos) \
                if len(positions) else np.zeros(n, dtype=bool)
            for i in np.flatnonzero(~at_start)[:3].tolist():
                report.add("error", where, f"entry {i} (offset {int(offs[i])}) points at position "
                           f"{int(pos[i])}, which is not the start of a batch")
            ok_rows = np.flatnonzero(at_start)
            if ok_rows.size:
                r = rows[ok_rows]
                prev_last = np.where(r > 0, last[np.maximum(r - 1, 0)], base - 1)
                bad = ok_rows[(prev_last >= offs[ok_rows]) | (offs[ok_rows] > seg_last)]
                for i in bad[:3].tolist():
                    report.add("error", where, f"entry {i} maps offset {int(offs[i])} to position "
                               f"{int(pos[i])}, where lookups would miss it")
    tidx_path = stem + TIME_INDEX_FILE_SUFFIX
    where = os.path.join(part.name, os.path.basename(tidx_path))
    if os.path.exists(tidx_path):
        size = os.path.getsize(tidx_path)
        if size % 12:
            report.add("error", where, f"{size} bytes is not a multiple of 12")
        entries, extent = read_written_entries(tidx_path, _TIME_ENTRY)
        _note_preallocated(report, where, extent)
        ts = entries["ts"].astype(np.int64)
        rel = entries["rel"].astype(np.int64)
        n = len(ts)
        offs = base + rel
        if n:
            if np.any(np.diff(ts) <= 0):
                report.add("error", where, "timestamps are not strictly increasing")
            if np.any(np.diff(offs) < 0):
                report.add("error", where, "offsets go backwards")
            if int(offs.min()) < base or int(offs.max()) > max(seg_last, base):
                report.add("error", where, f"offsets outside the segment [{base}, {seg_last}]")
            seg_max_ts = int(headers[:, COL_MAX_TIMESTAMP].max()) if len(headers) else -1
            if int(ts.max()) > seg_max_ts:
                report.add("error", where, f"timestamp {int(ts.max())} above every batch's max "
                           f"timestamp ({seg_max_ts})")


def _verify_epochs(report: VerifyReport, part: _Partition) -> None:
    path = os.path.join(part.path, "leader-epoch-checkpoint")
    where = os.path.join(part.name, "leader-epoch-checkpoint")
    if not os.path.exists(path):
        return
    try:
        entries = [(int(e), int(s)) for e, s in _parse_checkpoint(path, 2)]
    except (ValueError, OSError) as e:
        report.add("error", where, f"cannot be parsed: {e}")
        return
    for (e0, s0), (e1, s1) in zip(entries, entries[1:], strict=False):
        if e1 <= e0 or s1 <= s0:
            report.add("error", where, f"entries ({e0}, {s0}) then ({e1}, {s1}) are not strictly increasing")
            return
    if any(e < 0 or s < 0 for e, s in entries):
        report.add("error", where, "negative epoch or start offset")
        return
    batches = [(b, e) for b, e, m in part.epochs if m >= 2 and e >= 0]
    for (b0, e0), (b1, e1) in zip(batches, batches[1:], strict=False):
        if e1 < e0:
            report.add("error", part.name, f"batch at offset {b1} has leader epoch {e1}, below the "
                       f"epoch {e0} of the batch at offset {b0}")
            break
    if not entries:
        if batches:
            report.add("warning", where, "empty, but batches carry leader epochs")
        return
    starts = [s for _, s in entries]
    epochs = [e for e, _ in entries]
    mismatches = 0
    for b, e in batches:
        if b < starts[0]:
            continue
        i = int(np.searchsorted(starts, b, side="right")) - 1
        if epochs[i] != e:
            mismatches += 1
            if mismatches <= 3:
                report.add("error", where, f"offset {b} belongs to epoch {epochs[i]} by the "
                           f"checkpoint, but its batch carries epoch {e}")
    for e, s in entries:
        if s > part.log_end:
            report.add("warning", where, f"epoch {e} starts at {s}, beyond the log end offset "
                       f"{part.log_end} (the loader truncates it)")


def _verify_partition(report: VerifyReport, path: str) -> _Partition:
    name = os.path.basename(os.path.normpath(path))
    part = _Partition(name, path)
    summary = PartitionSummary(name)
    errors_before = len(report.errors)
    warnings_before = len(report.warnings)
    names = sorted(os.listdir(path))
    logs = []
    for n in names:
        full = os.path.join(path, n)
        if n.endswith((".deleted", ".cleaned", ".swap")):
            report.add("warning", os.path.join(name, n), "leftover temporary file; the loader handles it")
        elif n.endswith(LOG_FILE_SUFFIX):
            try:
                logs.append((_base_offset_of(n), full))
            except ValueError:
                report.add("warning", os.path.join(name, n), "not a segment file name")
        elif n.endswith((INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, ".txnindex")):
            stem = n.split(".", 1)[0]
            if stem + LOG_FILE_SUFFIX not in names:
                report.add("warning", os.path.join(name, n), "index without a .log; the loader deletes it")
    logs.sort()
    summary.segments = len(logs)
    prev_last = -1
    for i, (base, log_path) in enumerate(logs):
        if i == 0:
            part.log_start = base
        prev_last, headers, last = _verify_segment(report, part, summary, log_path, prev_last)
        _verify_indexes(report, part, log_path, headers, last, i == len(logs) - 1)
        part.log_end = max(prev_last + 1, base) if i == len(logs) - 1 else part.log_end
    _verify_epochs(report, part)
    summary.log_start_offset = part.log_start
    summary.log_end_offset = part.log_end
    summary.errors = len(report.errors) - errors_before
    summary.warnings = len(report.warnings) - warnings_before
    report.partitions.append(summary)
    return part


def _verify_log_dir_files(report: VerifyReport, log_dir: str, parts: dict[tuple[str, int], _Partition]) -> None:
    for cp in _CHECKPOINTS:
        path = os.path.join(log_dir, cp)
        if not os.path.exists(path):
            continue
        try:
            entries = _parse_checkpoint(path, 3)
            values = {(t, int(p)): int(o) for t, p, o in entries}
        except (ValueError, OSError) as e:
            report.add("error", cp, f"cannot be parsed: {e}")
            continue
        for tp, value in values.items():
            part = parts.get(tp)
            if part is None:
                continue
            if cp == "recovery-point-offset-checkpoint" and value > part.log_end:
                report.add("error", cp, f"{tp[0]}-{tp[1]}: recovery point {value} is beyond the log "
                           f"end offset {part.log_end} (flushed data is missing)")
            elif cp == "replication-offset-checkpoint" and value > part.log_end:
                report.add("warning", cp, f"{tp[0]}-{tp[1]}: high watermark {value} is beyond the log "
                           f"end offset {part.log_end} (clamped on load)")
            elif cp == "log-start-offset-checkpoint" and value > part.log_end:
                report.add("warning", cp, f"{tp[0]}-{tp[1]}: log start offset {value} is beyond the "
                           f"log end offset {part.log_end} (the loader empties the log)")
    marker = os.path.join(log_dir, ".kafka_cleanshutdown")
    if os.path.exists(marker):
        with open(marker, "rb") as fh:
            content = fh.read().strip()
        if content:
            try:
                json.loads(content)
            except ValueError:
                report.add("warning", ".kafka_cleanshutdown", "content is not JSON")


def verify_log_dir(
    path: str | os.PathLike[str],
    *,
    progress: Callable[[str, int, int], None] | None = None,
) -> VerifyReport:
    """Check a broker log dir (every partition below it) or a single partition dir; read-only.

    ``progress(partition_name, done, total)`` is called after each partition.
    """
    path = os.fspath(path)
    report = VerifyReport(path)
    if _is_partition_dir(path):
        dirs = [path]
        log_dir = None
    else:
        log_dir = path
        dirs = [os.path.join(path, n) for n in sorted(os.listdir(path))
                if _TOPIC_PARTITION.match(n) and os.path.isdir(os.path.join(path, n))]
    parts: dict[tuple[str, int], _Partition] = {}
    for i, d in enumerate(dirs):
        try:
            part = _verify_partition(report, d)
        except OSError as e:
            report.add("error", os.path.basename(d), f"unreadable: {e}")
            continue
        m = _TOPIC_PARTITION.match(part.name)
        if m:
            parts[(m.group(1), int(m.group(2)))] = part
        if progress is not None:
            progress(part.name, i + 1, len(dirs))
    if log_dir is not None:
        _verify_log_dir_files(report, log_dir, parts)
    return report
