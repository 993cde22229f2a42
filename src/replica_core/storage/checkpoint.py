"""Kafka's small text files: offset and leader-epoch checkpoints, partition.metadata, the
clean-shutdown marker (§1.10-§1.12).

All go through a :class:`~replica_core.storage.medium.Medium`. Checkpoints are written whole and
atomically (``<file>.tmp``, fsync, rename, directory fsync) and read with the rules of Kafka's
``CheckpointFile.CheckpointReadBuffer``; anything unparsable raises ``CorruptCheckpointError``
naming the file and the 1-based line number.
"""
from __future__ import annotations

import base64
import binascii
import json
import os
import posixpath
import re
from collections.abc import Iterable, Mapping
from itertools import compress, count
from operator import ne
from typing import Generic, NamedTuple, TypeVar

from replica_core.errors import (
    CorruptCheckpointError,
    InconsistentTopicIdError,
    KafkaStorageError,
)
from replica_core.storage.medium import Medium

__all__ = [
    "CheckpointFile",
    "OffsetCheckpointFile",
    "OffsetCheckpointContent",
    "LeaderEpochCheckpointFile",
    "CleanShutdownFile",
    "PartitionMetadata",
    "PartitionMetadataFile",
    "RECOVERY_POINT_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
    "CLEANER_OFFSET_CHECKPOINT",
    "LEADER_EPOCH_CHECKPOINT",
    "PARTITION_METADATA",
    "CLEAN_SHUTDOWN_FILE",
]

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"

T = TypeVar("T")

_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # Java BufferedReader.readLine terminators
_JAVA_WS = re.compile(r"[ \t\n\x0b\f\r]+")  # Java regex \s
_JAVA_INT = re.compile(r"[+-]?[0-9]+\Z")
_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64 = (-(1 << 63), (1 << 63) - 1)
# a leader-epoch checkpoint as written: every epoch below 2**31, every offset below 2**63
_CANONICAL_EPOCHS = re.compile(rb"0\n([0-9]{1,9})\n((?:[0-9]{1,9} [0-9]{1,18}\n)*)")


# an offset checkpoint as written: version 0, the count, ``topic partition offset`` lines (the
# topic free of Java's \s, the partition an int32, the offset a non-negative int64)
_CANONICAL_OFFSETS = re.compile(
    r"0\n([0-9]{1,9})\n((?:[^ \t\n\x0b\f\r]+ [0-9]{1,9} [0-9]{1,18}\n)*)")

# canonical leader-epoch checkpoint contents -> their entries: a broker's partitions share a
# few contents (``0\n1\n0 0\n``...), each parsed once (bytes are immutable; a list is copied out)
_EPOCHS_PARSED: dict[bytes, tuple[tuple[int, int], ...]] = {}


class _Malformed(Exception):
    pass


def _java_lines(text: str) -> list[str]:
    """Lines as successive ``BufferedReader.readLine`` calls return them."""
    lines = _LINE_BREAK.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _java_split(line: str, pattern: re.Pattern[str] = _JAVA_WS) -> list[str]:
    """``String.split(regex)``: a leading empty field is kept, trailing empty fields dropped."""
    parts = pattern.split(line)
    if len(parts) == 1:
        return parts
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _java_int(text: str, bounds: tuple[int, int] = _INT32) -> int:
    """``Integer.parseInt`` / ``Long.parseLong`` (bounds select which)."""
    if not _JAVA_INT.match(text):
        raise _Malformed(text)
    value = int(text)
    if not bounds[0] <= value <= bounds[1]:
        raise _Malformed(text)
    return value


def _corrupt(path: str, line_number: int, message: str) -> CorruptCheckpointError:
    err = CorruptCheckpointError(f"{message} (checkpoint file [{path}], line {line_number})")
    err.path = path  # type: ignore[attr-defined]
    err.line_number = line_number  # type: ignore[attr-defined]
    return err


class CheckpointFile(Generic[T]):
    """``<version>\\n<count>\\n<entry>\\n…`` (Kafka's ``CheckpointFile``, §1.10).

    Subclasses define ``_format(entry) -> str`` and ``_parse(fields) -> entry`` (raising
    ``_Malformed``). The file is created empty on construction if missing, as Kafka does.
    """

    VERSION = 0

    def __init__(self, medium: Medium, path: str | os.PathLike, version: int | None = None, *,
                 exists: bool = False):
        """``exists``: the caller has just made the file (skips the look)."""
        self.medium = medium
        self.path = os.fspath(path)
        self.version = self.VERSION if version is None else version
        if not exists and not medium.exists(self.path):
            medium.open(self.path, create=True).close()

    def _format(self, entry: T) -> str:
        raise NotImplementedError

    def _parse(self, fields: list[str]) -> T:
        raise NotImplementedError

    def encode(self, entries: Iterable[T]) -> bytes:
        """The file contents for ``entries``."""
        body = [self._format(e) for e in entries]
        lines = [str(self.version), str(len(body)), *body]
        return ("\n".join(lines) + "\n").encode("utf-8")

    def write_entries(self, entries: Iterable[T]) -> None:
        """Replace the file atomically (tmp + fsync + rename + directory fsync)."""
        self._write(self.encode(entries))

    def _write(self, data: bytes) -> None:
        """Replace the file with ``data`` atomically; an I/O error is ``KafkaStorageError``."""
        try:
            self.medium.write_atomic(self.path, data)
        except OSError as e:
            raise KafkaStorageError(f"Error while writing to checkpoint file {self.path}: {e}") from e

    def write_entries_if_dir_exists(self, entries: Iterable[T]) -> bool:
        """As ``write_entries`` but a vanished directory is not an error (returns False)."""
        data = self.encode(entries)
        try:
            self.medium.write_atomic(self.path, data)
        except FileNotFoundError:
            return False
        except OSError as e:
            raise KafkaStorageError(f"Error while writing to checkpoint file {self.path}: {e}") from e
        return True

    def read_entries(self) -> list[T]:
        """Parse the file (§1.10 read rules); ``CorruptCheckpointError`` on anything malformed."""
        try:
            raw = self.medium.read_bytes(self.path)
        except OSError as e:
            raise KafkaStorageError(f"Error while reading checkpoint file {self.path}: {e}") from e
        return self.decode(raw)

    def decode(self, raw: bytes) -> list[T]:
        """Parse checkpoint contents (see ``read_entries``)."""
        path = self.path
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise _corrupt(path, 1, f"Checkpoint file is not UTF-8: {e}") from e
        lines = _java_lines(text)
        if not lines:
            return []
        try:
            version = _java_int(lines[0])
        except _Malformed:
            raise _corrupt(path, 1, f"Malformed line in checkpoint file: {lines[0]!r}") from None
        if version != self.version:
            raise _corrupt(path, 1, f"Unrecognised version:{version}, expected version: "
                                    f"{self.version}")
        if len(lines) < 2:
            return []
        try:
            expected = _java_int(lines[1])
            if expected < 0:
                raise _Malformed(lines[1])
        except _Malformed:
            raise _corrupt(path, 2, f"Malformed line in checkpoint file: {lines[1]!r}") from None
        entries = []
        for i, line in enumerate(lines[2:], start=3):
            try:
                entries.append(self._parse(_java_split(line)))
            except _Malformed:
                raise _corrupt(path, i, f"Malformed line in checkpoint file: {line!r}") from None
        if len(entries) != expected:
            raise _corrupt(path, len(lines), f"Expected [{expected}] entries in checkpoint file, "
                                             f"but found only [{len(entries)}]")
        return entries


class OffsetCheckpointFile(CheckpointFile[tuple[tuple[str, int], int]]):
    """``topic partition offset`` lines: recovery point, log start offset, HW, cleaner offsets."""

    def _format(self, entry: tuple[tuple[str, int], int]) -> str:
        (topic, partition), offset = entry
        if not topic or _JAVA_WS.search(topic):
            raise ValueError(f"topic {topic!r} cannot be written to a checkpoint")
        return f"{topic} {int(partition)} {int(offset)}"

    def _parse(self, fields: list[str]) -> tuple[tuple[str, int], int]:
        if len(fields) != 3:
            raise _Malformed(fields)
        return (fields[0], _java_int(fields[1])), _java_int(fields[2], _INT64)

    def encode(self, entries: Iterable[tuple[tuple[str, int], int]]) -> bytes:
        """As :meth:`CheckpointFile.encode`; each distinct topic name is checked once (a log
        dir's checkpoint lists thousands of partitions of a few topics)."""
        keys: list[tuple[str, int]] = []
        offsets: list[int] = []
        for key, offset in entries:
            keys.append(key)
            offsets.append(offset)
        return self._content_bytes(OffsetCheckpointContent(keys, offsets))

    def _content_bytes(self, content: OffsetCheckpointContent) -> bytes:
        return f"{self.version}\n{len(content.lines)}\n{''.join(content.lines)}".encode()

    def decode(self, raw: bytes) -> list[tuple[tuple[str, int], int]]:
        """As :meth:`CheckpointFile.decode`; a file exactly as :meth:`encode` writes it (version
        0, the count, then that many ``topic partition offset`` lines, single spaces between
        fields, plain digits short enough to be in range) is split in one pass, anything else
        read by the general rules (a log dir's checkpoints hold a line per partition)."""
        if type(raw) is bytes and self.version == 0:
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                text = None  # the general rules report it
            m = None if text is None else _CANONICAL_OFFSETS.fullmatch(text)
            if m is not None:
                fields = m.group(2).replace("\n", " ").split(" ")  # a last "" after the last line
                if len(fields) == 3 * int(m.group(1)) + 1:
                    return [((topic, int(partition)), int(offset)) for topic, partition, offset
                            in zip(fields[0:-1:3], fields[1::3], fields[2::3], strict=True)]
        return super().decode(raw)

    def read(self) -> dict[tuple[str, int], int]:
        """``{(topic, partition): offset}`` (later duplicates win, like Kafka's HashMap)."""
        return dict(self.read_entries())

    def write(self, offsets: Mapping[tuple[str, int], int]) -> None:
        """Replace the checkpoint with ``offsets`` (atomic)."""
        self.write_entries(offsets.items())

    def write_content(self, content: OffsetCheckpointContent) -> None:
        """Replace the checkpoint with ``content`` (atomic): the bytes :meth:`encode` gives for
        its entries, from its lines."""
        self._write(self._content_bytes(content))


class OffsetCheckpointContent:
    """The entries of an offset checkpoint, in file order, with their encoded lines (what
    :meth:`OffsetCheckpointFile.encode` writes after its two header lines).

    A broker rewrites ``replication-offset-checkpoint`` every
    ``replica.high.watermark.checkpoint.interval.ms`` with every partition's HW, and between
    two writes most of them have not moved: :meth:`update` formats again only the lines whose
    offset changed when the partitions are the same, in the same order.
    """

    __slots__ = ("keys", "offsets", "lines")

    def __init__(self, keys: list[tuple[str, int]], offsets: list[int]) -> None:
        """Encode every entry (each distinct topic name checked once, as ``encode`` does)."""
        checked: set[str] = set()
        lines: list[str] = []
        line = lines.append
        for (topic, partition), offset in zip(keys, offsets, strict=True):
            if topic not in checked:
                if not topic or _JAVA_WS.search(topic):
                    raise ValueError(f"topic {topic!r} cannot be written to a checkpoint")
                checked.add(topic)
            line(f"{topic} {int(partition)} {int(offset)}\n")
        self.keys = keys
        self.offsets = offsets
        self.lines = lines

    def same_entries(self, keys: list[tuple[str, int]], offsets: list[int]) -> bool:
        """Do ``zip(keys, offsets)`` (distinct keys) map as these entries do, order aside?"""
        if keys == self.keys:
            return offsets == self.offsets
        return len(keys) == len(self.keys) and \
            dict(zip(keys, offsets, strict=True)) == dict(zip(self.keys, self.offsets, strict=True))

    def update(self, keys: list[tuple[str, int]], offsets: list[int]) -> OffsetCheckpointContent:
        """The content for ``zip(keys, offsets)``: with the same keys in the same order a copy
        with the changed lines formatted again, otherwise encoded afresh."""
        if keys != self.keys:
            return OffsetCheckpointContent(keys, offsets)
        return self.moved(offsets, compress(count(), map(ne, offsets, self.offsets)))

    def moved(self, offsets: list[int], indices: Iterable[int]) -> OffsetCheckpointContent:
        """The content for the same keys with ``offsets``, which differ from these entries'
        only at ``indices`` (a caller that knows which moved skips comparing them all): a copy
        with those lines formatted again."""
        keys = self.keys
        new = OffsetCheckpointContent.__new__(OffsetCheckpointContent)
        lines = self.lines[:]
        for i in indices:
            topic, partition = keys[i]
            lines[i] = f"{topic} {int(partition)} {int(offsets[i])}\n"
        new.keys = keys
        new.offsets = offsets
        new.lines = lines
        return new


class LeaderEpochCheckpointFile(CheckpointFile[tuple[int, int]]):
    """``epoch startOffset`` lines of a partition's ``leader-epoch-checkpoint``."""

    def _format(self, entry: tuple[int, int]) -> str:
        epoch, start = entry
        return f"{int(epoch)} {int(start)}"

    def _parse(self, fields: list[str]) -> tuple[int, int]:
        if len(fields) != 2:
            raise _Malformed(fields)
        return _java_int(fields[0]), _java_int(fields[1], _INT64)

    def encode(self, entries: Iterable[tuple[int, int]]) -> bytes:
        """As :meth:`CheckpointFile.encode`, in one format call per entry (``%d`` writes what
        ``int`` of the number does); a list of one entry (a cache's first epoch, written by a
        new log's first append) in one call."""
        if type(entries) is list and len(entries) == 1:
            epoch, start = entries[0]
            return b"%d\n1\n%d %d\n" % (self.version, epoch, start)
        body = [b"%d %d\n" % (epoch, start) for epoch, start in entries]
        if len(body) == 1:  # the common cache: one epoch
            return b"%d\n1\n%b" % (self.version, body[0])
        return b"%d\n%d\n%b" % (self.version, len(body), b"".join(body))

    def decode(self, raw: bytes) -> list[tuple[int, int]]:
        """As :meth:`CheckpointFile.decode`; a file exactly as :meth:`encode` writes it (version
        0, the count, then that many ``epoch start`` lines of plain digits short enough to be
        in range) is read in one match, anything else by the general rules."""
        if type(raw) is bytes and self.version == 0:
            parsed = _EPOCHS_PARSED.get(raw)
            if parsed is not None:
                return list(parsed)
            m = _CANONICAL_EPOCHS.fullmatch(raw)
            if m is not None:
                fields = m.group(2).split()
                if len(fields) == 2 * int(m.group(1)):
                    entries = [(int(epoch), int(start))
                               for epoch, start in zip(fields[::2], fields[1::2], strict=True)]
                    if len(raw) <= 256:  # the few short contents most partitions share
                        if len(_EPOCHS_PARSED) >= 4096:
                            _EPOCHS_PARSED.clear()
                        _EPOCHS_PARSED[raw] = tuple(entries)
                    return entries
        return super().decode(raw)

    def read(self) -> list[tuple[int, int]]:
        """``[(epoch, start_offset), ...]`` in file order."""
        return self.read_entries()

    def write(self, entries: Iterable[tuple[int, int]]) -> None:
        """Replace the checkpoint (atomic; synchronous; Kafka writes it on every change of the
        cache)."""
        self._write(self.encode(entries))

    def write_if_dir_exists(self, entries: Iterable[tuple[int, int]]) -> bool:
        """Write unless the partition directory is gone (being deleted); False then."""
        return self.write_entries_if_dir_exists(entries)


class CleanShutdownFile:
    """``<log dir>/.kafka_cleanshutdown``: JSON ``{"version":0,"brokerEpoch":N}`` (§1.12).

    Written as Kafka does: truncate, write, fsync the file (no directory fsync, so on a strict
    ``MemoryMedium`` a power failure before the directory is next synced loses the marker and the
    next start is treated as unclean — the safe direction).
    """

    VERSION = 0

    def __init__(self, medium: Medium, log_dir: str | os.PathLike):
        self.medium = medium
        self.path = posixpath.join(os.fspath(log_dir), CLEAN_SHUTDOWN_FILE)

    def exists(self) -> bool:
        return self.medium.exists(self.path)

    def write(self, broker_epoch: int, version: int = VERSION) -> None:
        data = json.dumps({"version": int(version), "brokerEpoch": int(broker_epoch)},
                          separators=(",", ":")).encode("utf-8")
        f = self.medium.open(self.path, create=True)
        try:
            f.truncate(0)
            f.append(data)
            f.flush()
        finally:
            f.close()

    def read_broker_epoch(self) -> int | None:
        """The broker epoch inside, or None if the file is missing, empty or unparsable."""
        try:
            content = json.loads(self.medium.read_bytes(self.path).decode("utf-8"))
        except (OSError, ValueError):
            return None
        epoch = content.get("brokerEpoch") if isinstance(content, dict) else None
        if isinstance(epoch, bool) or not isinstance(epoch, int):
            return None
        return epoch

    def delete(self) -> bool:
        """Delete if present (Kafka's ``deleteIfExists``); True if a file was removed."""
        if self.medium.exists(self.path):
            self.medium.remove(self.path)
            return True
        return False


class PartitionMetadata(NamedTuple):
    version: int
    topic_id: str


_METADATA_SEP = re.compile(r":[ \t\n\x0b\f\r]+")


def _uuid_bytes(topic_id: str) -> bytes:
    """Decode Kafka's ``Uuid.toString`` form (URL-safe base64, no padding) to 16 bytes."""
    if len(topic_id) > 24:
        raise ValueError(f"topic id {topic_id[:24]!r}... is too long to be a base64 UUID")
    padded = topic_id + "=" * (-len(topic_id) % 4)
    try:
        raw = base64.b64decode(padded, altchars=b"-_", validate=True)
    except (binascii.Error, ValueError) as e:
        raise ValueError(f"topic id {topic_id!r} is not URL-safe base64") from e
    if len(raw) != 16:
        raise ValueError(f"topic id {topic_id!r} decodes to {len(raw)} bytes, not 16")
    return raw


class PartitionMetadataFile:
    """``partition.metadata``: ``version: 0`` / ``topic_id: <base64 uuid>`` (§1.11)."""

    VERSION = 0

    def __init__(self, medium: Medium, path: str | os.PathLike):
        self.medium = medium
        self.path = os.fspath(path)
        self._dirty: str | None = None

    def record(self, topic_id: str) -> None:
        """Remember ``topic_id`` for the next ``maybe_flush`` (a different one is an error)."""
        _uuid_bytes(topic_id)
        if self._dirty is not None and self._dirty != topic_id:
            raise InconsistentTopicIdError(
                f"Tried to record topic ID {topic_id} to file but had already recorded "
                f"{self._dirty}")
        self._dirty = topic_id

    def maybe_flush(self) -> None:
        """Write the recorded topic id atomically, if one is pending."""
        topic_id = self._dirty
        if topic_id is None:
            return
        data = f"version: {self.VERSION}\ntopic_id: {topic_id}".encode()
        try:
            self.medium.write_atomic(self.path, data)
        except OSError as e:
            raise KafkaStorageError(
                f"Error while writing partition metadata file {self.path}: {e}") from e
        self._dirty = None

    def read(self) -> PartitionMetadata:
        """Parse the file; ``CorruptCheckpointError`` if malformed (any version >= 0 is read)."""
        path = self.path
        try:
            text = self.medium.read_bytes(path).decode("utf-8")
        except OSError as e:
            raise KafkaStorageError(
                f"Error while reading partition metadata file {path}: {e}") from e
        except UnicodeDecodeError as e:
            raise _corrupt(path, 1, f"Partition metadata file is not UTF-8: {e}") from e
        lines = _java_lines(text)
        if not lines:
            raise _corrupt(path, 1, "Malformed line in checkpoint file: empty file")
        fields = _java_split(lines[0], _METADATA_SEP)
        try:
            if len(fields) != 2:
                raise _Malformed(lines[0])
            version = _java_int(fields[1])
        except _Malformed:
            raise _corrupt(path, 1, f"Malformed line in checkpoint file: {lines[0]!r}") from None
        if version < self.VERSION:
            raise _corrupt(path, 1, f"Unrecognized version of partition metadata file: {version}")
        if len(lines) < 2:
            raise _corrupt(path, 2, "Malformed line in checkpoint file: missing topic_id line")
        fields = _java_split(lines[1], _METADATA_SEP)
        if len(fields) != 2:
            raise _corrupt(path, 2, f"Malformed line in checkpoint file: {lines[1]!r}")
        try:
            raw = _uuid_bytes(fields[1])
        except ValueError as e:
            raise _corrupt(path, 2, f"Malformed line in checkpoint file: {e}") from None
        if raw == bytes(16):
            raise _corrupt(path, 2, "Invalid topic ID in partition metadata file")
        return PartitionMetadata(version, fields[1])

    def exists(self) -> bool:
        return self.medium.exists(self.path)

    def delete(self) -> None:
        self.medium.remove(self.path)
