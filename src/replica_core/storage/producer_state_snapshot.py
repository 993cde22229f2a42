"""Producer-state snapshot files: ``<20-digit offset>.snapshot`` (Kafka's ``ProducerStateManager``
``readSnapshot``/``writeSnapshot``, schema ``storage/src/main/resources/message/ProducerSnapshot.json``).

Layout (§1.9), big-endian, version 1 only (``validVersions: "1"``, not flexible)::

    int16  version                    (1)
    uint32 crc                        CRC-32C of bytes [6, end of file)
    int32  count                      entries that follow
    count × 46 bytes:
        int64 producerId, int16 epoch, int32 lastSequence, int64 lastOffset,
        int32 offsetDelta, int64 timestamp, int32 coordinatorEpoch,
        int64 currentTxnFirstOffset   (-1: no open transaction)

Reading follows ``readSnapshot``: the version and the struct are parsed first (an unknown version,
a negative count, a count larger than the bytes left or an entry cut short are all "failed schema
validation"), then the CRC is checked over everything after the CRC field, trailing bytes
included. Bytes after the last entry are therefore accepted when the CRC covers them, as Kafka's
generated parser ignores them. Every failure is a :class:`CorruptSnapshotError`.

The file name is the producer-state end offset when the snapshot was taken (exclusive: the state
covers offsets below it), as ``LogFileUtils.producerSnapshotFile`` names it.

Writing differs from Kafka in one way, on purpose: Kafka writes the final name in place
(``FileChannel`` CREATE|WRITE, fsync when asked); here the bytes go to ``<name>.tmp`` which is then
renamed over the final name through the :class:`~replica_core.storage.medium.Medium`, so a
crash never leaves a half-written file under a ``.snapshot`` name on either medium.
"""
from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from typing import NamedTuple

from replica_core.errors import CorruptSnapshotError, KafkaStorageError
from replica_core.storage.medium import Medium

try:
    from replica_core._fast._crc import crc32c as _crc32c
except ImportError:  # pragma: no cover - the native kernels are not built
    from crc32c import crc32c as _crc32c

__all__ = [
    "SNAPSHOT_VERSION",
    "SNAPSHOT_SUFFIX",
    "SNAPSHOT_TMP_SUFFIX",
    "HEADER_SIZE",
    "ENTRY_SIZE",
    "SnapshotEntry",
    "encode_snapshot",
    "decode_snapshot",
    "snapshot_file_name",
    "snapshot_path",
    "snapshot_offset_from_name",
    "is_snapshot_file_name",
    "list_snapshot_files",
    "snapshot_files_among",
    "read_snapshot_file",
    "write_snapshot_file",
    "flush_snapshot_file",
]

SNAPSHOT_VERSION = 1
SNAPSHOT_SUFFIX = ".snapshot"  # LogFileUtils.PRODUCER_SNAPSHOT_FILE_SUFFIX
SNAPSHOT_TMP_SUFFIX = ".tmp"

_HEADER = struct.Struct(">hIi")  # version, crc, entry count
_ENTRY = struct.Struct(">qhiqiqiq")
HEADER_SIZE = _HEADER.size  # 10
ENTRY_SIZE = _ENTRY.size  # 46
_CRC_OFFSET = 2  # ProducerStateManager.CRC_OFFSET
_ENTRIES_OFFSET = 6  # ProducerStateManager.PRODUCER_ENTRIES_OFFSET: where the CRC starts
_INT64_MAX = 2**63 - 1


class SnapshotEntry(NamedTuple):
    """One ``ProducerSnapshot.ProducerEntry``, field for field, in file order."""

    producer_id: int
    epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int


def encode_snapshot(entries: Iterable[SnapshotEntry | tuple]) -> bytes:
    """The bytes of a version-1 snapshot holding ``entries`` in the given order.

    Values outside their field's range raise ``struct.error`` before anything is written.
    """
    rows = [_ENTRY.pack(*e) for e in entries]
    body = b"".join(rows)
    count = struct.pack(">i", len(rows))
    crc = _crc32c(count + body)
    return struct.pack(">hI", SNAPSHOT_VERSION, crc) + count + body


def decode_snapshot(raw: bytes | bytearray | memoryview, path: str = "<bytes>") -> list[SnapshotEntry]:
    """Parse snapshot bytes as ``ProducerStateManager.readSnapshot`` does (see the module doc);
    :class:`CorruptSnapshotError` names ``path`` and what failed."""
    mv = memoryview(raw).cast("B")
    n = len(mv)
    if n < 2:
        raise CorruptSnapshotError(
            f"Snapshot failed schema validation: {path} holds {n} bytes, no version")
    version = struct.unpack_from(">h", mv, 0)[0]
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(
            f"Snapshot failed schema validation: {path} contained an unknown file version "
            f"{version}")
    if n < HEADER_SIZE:
        raise CorruptSnapshotError(
            f"Snapshot failed schema validation: {path} holds {n} bytes, fewer than the "
            f"{HEADER_SIZE}-byte header")
    _, stored_crc, count = _HEADER.unpack_from(mv, 0)
    remaining = n - HEADER_SIZE
    if count < 0:
        raise CorruptSnapshotError(
            f"Snapshot failed schema validation: {path} has a null (negative, {count}) entry "
            f"array")
    if count > remaining or HEADER_SIZE + count * ENTRY_SIZE > n:
        raise CorruptSnapshotError(
            f"Snapshot failed schema validation: {path} declares {count} entries of "
            f"{ENTRY_SIZE} bytes but only {remaining} bytes follow the header")
    computed = _crc32c(mv[_ENTRIES_OFFSET:])
    if computed != stored_crc:
        raise CorruptSnapshotError(
            f"Snapshot is corrupt (CRC is no longer valid): {path}. Stored crc: {stored_crc}. "
            f"Computed crc: {computed}")
    return [SnapshotEntry(*_ENTRY.unpack_from(mv, HEADER_SIZE + i * ENTRY_SIZE))
            for i in range(count)]


# --- file names -------------------------------------------------------------------------
def snapshot_file_name(offset: int) -> str:
    """``<20-digit zero-padded offset>.snapshot`` (``LogFileUtils.producerSnapshotFile``)."""
    if not 0 <= offset <= _INT64_MAX:
        raise ValueError(f"snapshot offset {offset} is not a non-negative int64")
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def snapshot_path(dir: str, offset: int) -> str:
    return os.path.join(dir, snapshot_file_name(offset))


def is_snapshot_file_name(name: str) -> bool:
    """Kafka's ``isSnapshotFile`` test on the name: it ends with ``.snapshot``."""
    return name.endswith(SNAPSHOT_SUFFIX)


def snapshot_offset_from_name(name: str) -> int:
    """``LogFileUtils.offsetFromFileName``: the decimal before the first ``.``.

    Kafka's ``Long.parseLong`` fails the log load on anything else; here that is a
    :class:`KafkaStorageError` naming the file.
    """
    base = os.path.basename(name)
    prefix = base.split(".", 1)[0]
    if not prefix.isdigit() or not prefix.isascii() or int(prefix) > _INT64_MAX:
        raise KafkaStorageError(
            f"producer snapshot file name {base!r} does not start with an offset")
    return int(prefix)


# --- files on a medium --------------------------------------------------------------------
def list_snapshot_files(medium: Medium, dir: str) -> dict[int, str]:
    """``{offset: path}`` of the ``*.snapshot`` files (not directories) in ``dir``, ascending
    (``ProducerStateManager.listSnapshotFiles``; a missing directory lists nothing)."""
    if not medium.exists(dir) or not medium.is_dir(dir):
        return {}
    try:
        names = medium.listdir(dir)
    except OSError as e:
        raise KafkaStorageError(f"error listing producer snapshots in {dir}: {e}") from e
    return snapshot_files_among(medium, dir, names)


def snapshot_files_among(medium: Medium, dir: str, names: list[str]) -> dict[int, str]:
    """:func:`list_snapshot_files` given the names ``medium.listdir(dir)`` has just returned
    (a caller that lists ``dir`` anyway need not list it twice)."""
    found: dict[int, str] = {}
    for name in names:
        if not is_snapshot_file_name(name):
            continue
        path = os.path.join(dir, name)
        if medium.is_dir(path):
            continue
        found[snapshot_offset_from_name(name)] = path
    return dict(sorted(found.items()))


def read_snapshot_file(medium: Medium, path: str) -> list[SnapshotEntry]:
    """Read and decode one snapshot file (:class:`CorruptSnapshotError` if it is not one;
    :class:`KafkaStorageError` if it cannot be read)."""
    try:
        raw = medium.read_bytes(path)
    except OSError as e:
        raise KafkaStorageError(f"error reading producer snapshot {path}: {e}") from e
    return decode_snapshot(raw, path)


def write_snapshot_file(medium: Medium, path: str, data: bytes, *, sync: bool = True) -> None:
    """Put ``data`` at ``path`` via ``<path>.tmp`` and a rename.

    ``sync=True`` (Kafka's ``takeSnapshot()``: clean shutdown, recovery): the medium's
    ``write_atomic`` — fsync the file, rename, fsync the directory. ``sync=False`` (Kafka's
    ``takeSnapshot(false)`` at a roll, whose fsync is left to the scheduled flush): write and
    rename without any fsync; :func:`flush_snapshot_file` makes the contents durable later and
    the log's next directory fsync the name.
    """
    try:
        if sync:
            medium.write_atomic(path, data)
            return
        tmp = path + SNAPSHOT_TMP_SUFFIX
        f = medium.open(tmp, create=True)
        try:
            f.truncate(0)
            if data:
                f.append(data)
        finally:
            f.close()
        medium.rename(tmp, path)
    except OSError as e:
        raise KafkaStorageError(f"error writing producer snapshot {path}: {e}") from e


def flush_snapshot_file(medium: Medium, path: str) -> bool:
    """fsync ``path`` if it exists (``Utils.flushFileIfExists``, what the roll's scheduled
    ``flushProducerStateSnapshot`` does); False when there is no such file."""
    if not medium.exists(path):
        return False
    try:
        f = medium.open(path)
        try:
            f.flush()
        finally:
            f.close()
    except FileNotFoundError:
        return False
    except OSError as e:
        raise KafkaStorageError(f"error flushing producer snapshot {path}: {e}") from e
    return True
