"""Kafka's sparse segment indexes: ``.index`` (offset → position) and ``.timeindex`` (§1.5-§1.7).

Same bytes as Kafka's ``OffsetIndex``/``TimeIndex``: fixed-size big-endian entries in a file that
is pre-allocated to ``floor(max_index_size / entry_size) * entry_size`` bytes when created and
trimmed to its entries when the segment stops being active. An existing file is taken as full of
valid entries (``entries = length // entry_size``); that is why indexes are trimmed on roll/close
and rebuilt by recovery after an unclean shutdown.

Entries are written through the :class:`~replica_core.storage.medium.Medium` (in place) and
searched straight from a zero-copy view of the file by ``_fast/_index.pyx`` (twin
``_fast/index_py.py``).
"""
from __future__ import annotations

import os
import posixpath
import struct
from types import ModuleType
from typing import Any, ClassVar

import numpy as np

from replica_core import _fast
from replica_core.errors import CorruptIndexError, IndexOffsetOverflowError, InvalidOffsetError
from replica_core.storage.medium import Medium, MediumFile

__all__ = ["OffsetIndex", "TimeIndex", "DEFAULT_MAX_INDEX_SIZE", "NO_TIMESTAMP"]

DEFAULT_MAX_INDEX_SIZE = 10 * 1024 * 1024  # segment.index.bytes
NO_TIMESTAMP = -1  # RecordBatch.NO_TIMESTAMP
_INT32_MAX = (1 << 31) - 1
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")

_kernel = _fast.load("_index", "index_py")


class _ClosedSearcher:
    """Stands in for the kernel searcher once the index is closed."""

    def __init__(self, path: str):
        self._path = path

    def __getattr__(self, name: str) -> Any:
        raise ValueError(f"index {self._path} is closed")


class _LazySearcher:
    """Stands in for the kernel searcher until the index is first read: the mapping half of
    Kafka's ``LazyIndex`` (``LogSegment`` already defers opening an existing segment's index
    files; this defers mapping any open index, a new segment's pre-allocated ones included,
    which on the in-memory medium also leaves their zero-filled tail unallocated)."""

    __slots__ = ("_index",)

    def __init__(self, index: _Index):
        object.__setattr__(self, "_index", index)

    def __getattr__(self, name: str) -> Any:
        index = self._index
        index._map()
        return getattr(index._searcher, name)

    def __setattr__(self, name: str, value: Any) -> None:
        # ``entries`` updates before the first read: the searcher is built from the index's
        # own count when it is mapped
        if name != "entries":
            raise AttributeError(name)


class _Index:
    """What ``AbstractIndex`` shares: file sizing, entry count, resize/trim/reset, close."""

    ENTRY_SIZE: ClassVar[int]
    _SEARCHER: ClassVar[str]

    def __init__(
        self,
        medium: Medium,
        path: str | os.PathLike,
        base_offset: int,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        writable: bool = True,
        *,
        kernel: ModuleType | None = None,
        preallocated: bool = False,
    ) -> None:
        """``preallocated``: the file exists as this index's creation leaves it (pre-allocated,
        no entries yet; a new segment's index whose object the segment builds on first use),
        so it opens with no entries instead of being taken as full."""
        if base_offset < 0:
            raise ValueError(f"negative base offset {base_offset}")
        self.medium = medium
        self.path = os.fspath(path)
        self.base_offset = int(base_offset)
        self.max_index_size = int(max_index_size)
        self.writable = writable
        self._kernel = kernel if kernel is not None else _kernel
        self._searcher: Any = _LazySearcher(self)
        self._view: memoryview | None = None
        es = self.ENTRY_SIZE
        newly_created = preallocated or not medium.exists(self.path)
        if preallocated:
            if not writable:
                raise ValueError(f"a pre-allocated index is opened writable ({self.path})")
            f = medium.open(self.path, writable=True)
        elif newly_created:
            if not writable:
                raise FileNotFoundError(self.path)
            if self.max_index_size < es:
                raise ValueError(f"Invalid max index size: {self.max_index_size}")
            f = medium.open(self.path, create=True)
            f.truncate(es * (self.max_index_size // es))
        else:
            f = medium.open(self.path, writable=writable)
        self._file: MediumFile | None = f
        self._length = f.size()
        self._max_entries = self._length // es
        # A pre-existing index is assumed valid up to its (rounded-down) length.
        self._entries = 0 if newly_created else self._max_entries
        # every entry written by append (offsets strictly increasing), none taken from a file
        self._appended = newly_created
        self._reload_last()

    @classmethod
    def over_written_file(cls, medium: Medium, path: str, base_offset: int,
                          max_index_size: int, file: MediumFile, data: bytes) -> _Index:
        """The index :meth:`__init__` opens (writable, not pre-allocated) over an existing file
        whose whole content is ``data``, built over ``file``, the handle that has just written
        ``data`` (segment recovery rewrites both indexes so): the entries taken as the file's
        whole entries, the last one read from ``data``; the file is not opened or read again."""
        index = cls.__new__(cls)
        if base_offset < 0:
            raise ValueError(f"negative base offset {base_offset}")
        index.medium = medium
        index.path = path
        index.base_offset = int(base_offset)
        index.max_index_size = int(max_index_size)
        index.writable = True
        index._kernel = _kernel
        index._searcher = _LazySearcher(index)
        index._view = None
        index._file = file
        index._length = length = len(data)
        index._max_entries = index._entries = length // cls.ENTRY_SIZE
        index._appended = False  # entries taken from a file, as __init__ takes them
        index._reload_last_from(data)
        return index

    def _reload_last_from(self, data: bytes) -> None:
        """:meth:`_reload_last` with the file's content in hand."""
        raise NotImplementedError

    # -- mapping -------------------------------------------------------------------------------
    def _map(self) -> None:
        if self._file is None:
            raise ValueError(f"index {self.path} is closed")
        self._view = self._file.view(0, self._length)
        self._searcher = getattr(self._kernel, self._SEARCHER)(
            self._view, self.base_offset, self._entries)

    def _unmap(self) -> None:
        searcher = self._searcher
        if type(searcher) is _LazySearcher and self._view is None:
            return  # not mapped: nothing to release
        if not isinstance(searcher, (_LazySearcher, _ClosedSearcher)) and self._file is not None:
            searcher.release()
        self._searcher = _LazySearcher(self)
        if self._view is not None:
            self._view.release()
            self._view = None

    def _open_file(self) -> MediumFile:
        if self._file is None:
            raise ValueError(f"index {self.path} is closed")
        return self._file

    def _writable_file(self) -> MediumFile:
        f = self._open_file()
        if not self.writable:
            raise PermissionError(f"index {self.path} was opened read-only")
        return f

    def _set_entries(self, n: int) -> None:
        self._entries = n
        if n == 0:
            self._appended = True  # what follows comes through append
        self._searcher.entries = n
        self._reload_last()

    def _reload_last(self) -> None:
        raise NotImplementedError

    # -- sizes ---------------------------------------------------------------------------------
    @property
    def entries(self) -> int:
        """Number of valid entries."""
        return self._entries

    @property
    def max_entries(self) -> int:
        """Slots in the file as currently sized."""
        return self._max_entries

    @property
    def length(self) -> int:
        """File length in bytes."""
        return self._length

    @property
    def size_in_bytes(self) -> int:
        """Bytes used by entries (``entries * entry_size``)."""
        return self._entries * self.ENTRY_SIZE

    @property
    def closed(self) -> bool:
        return self._file is None

    def is_full(self) -> bool:
        """No slot left (``entries >= max_entries``)."""
        return self._entries >= self._max_entries

    def can_append_offset(self, offset: int) -> bool:
        """``0 <= offset − base <= Int32.MAX`` (used to decide a roll)."""
        return 0 <= offset - self.base_offset <= _INT32_MAX

    def relative_offset(self, offset: int) -> int:
        """``offset − base``, or ``IndexOffsetOverflowError`` if it does not fit an int32."""
        rel = offset - self.base_offset
        if rel < 0 or rel > _INT32_MAX:
            raise IndexOffsetOverflowError(f"Integer overflow for offset: {offset} ({self.path})")
        return rel

    # -- resizing ------------------------------------------------------------------------------
    def resize(self, new_size: int) -> bool:
        """Set the file length to ``new_size`` rounded down to whole entries; keep the entries.

        Returns False if the length was already that (Kafka's ``AbstractIndex.resize``).
        """
        if new_size < 0:
            raise ValueError(f"negative index size {new_size}")
        es = self.ENTRY_SIZE
        rounded = es * (new_size // es)
        if self._length == rounded:
            return False
        if rounded < self._entries * es:
            raise ValueError(f"cannot resize {self.path} to {rounded} bytes: it holds "
                             f"{self._entries} entries")
        f = self._writable_file()
        self._unmap()
        f.truncate(rounded)
        self._length = rounded
        self._max_entries = rounded // es
        # the entries and their bytes are kept, so is the last entry (_reload_last unneeded)
        return True

    def trim_to_valid_size(self) -> None:
        """Cut the file to exactly ``entries`` entries (on roll, close, after recovery)."""
        self.resize(self._entries * self.ENTRY_SIZE)

    def truncate(self) -> None:
        """Remove every entry (the file keeps its length)."""
        self._writable_file()
        self._set_entries(0)

    def reset(self) -> None:
        """Remove every entry and re-expand the file to ``max_index_size``."""
        self.truncate()
        self.resize(self.max_index_size)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset`` (no effect past the last entry)."""
        self._writable_file()
        # Kafka: no entry <= offset -> 0; an entry == offset -> keep those before it; else keep
        # through the floor entry. Both say: keep the entries with offset < ``offset``.
        self._set_entries(self._floor_slot_by_offset(offset - 1) + 1)

    def _floor_slot_by_offset(self, offset: int) -> int:
        raise NotImplementedError

    # -- lifecycle -----------------------------------------------------------------------------
    def flush(self) -> None:
        """fsync the index file."""
        self._open_file().flush()

    def close(self) -> None:
        """Trim to the valid entries, then release the file (Kafka's ``close``)."""
        if self._file is None:
            return
        if self.writable:
            self.trim_to_valid_size()
        self.close_handler()

    def close_handler(self) -> None:
        """Release the view and the file without trimming."""
        self._unmap()
        self._searcher = _ClosedSearcher(self.path)
        f, self._file = self._file, None
        if f is not None:
            f.close()

    def delete(self) -> bool:
        """Close and delete the file; False if it did not exist (Kafka's ``deleteIfExists``)."""
        self.close_handler()
        if self.medium.exists(self.path):
            self.medium.remove(self.path)
            return True
        return False

    def rename_to(self, path: str | os.PathLike) -> None:
        """Rename the backing file (e.g. to ``.deleted`` or from ``.swap``)."""
        path = os.fspath(path)
        try:
            self.medium.rename(self.path, path)
        finally:
            self.path = path

    def update_parent_dir(self, parent_dir: str | os.PathLike) -> None:
        """Point at the same file name in another directory (after the directory moved)."""
        self.path = posixpath.join(os.fspath(parent_dir), posixpath.basename(self.path))

    def _entry_bytes(self, n: int) -> bytes:
        """Slot ``n``'s bytes read from the file, for an index not mapped yet (reading the
        last entry after a resize or truncation does not map it)."""
        es = self.ENTRY_SIZE
        return self._open_file().read(n * es, es)

    def __enter__(self) -> _Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.path!r}, base_offset={self.base_offset}, "
                f"entries={self._entries}, max_entries={self._max_entries})")


class OffsetIndex(_Index):
    """Offset → file position, 8-byte entries ``>ii`` (relative offset, position) (§1.5)."""

    ENTRY_SIZE = 8
    _SEARCHER = "OffsetSearcher"

    def _reload_last(self) -> None:
        self._last_offset = self.last_entry()[0]

    def _reload_last_from(self, data: bytes) -> None:
        n = self._entries
        self._last_offset = self.base_offset if n == 0 else \
            self.base_offset + _OFFSET_ENTRY.unpack_from(data, (n - 1) * 8)[0]

    @property
    def last_offset(self) -> int:
        """Offset of the last entry (the base offset when empty)."""
        return self._last_offset

    def entry(self, n: int) -> tuple[int, int]:
        """The ``n``-th entry as (offset, position)."""
        if n < 0 or n >= self._entries:
            raise IndexError(f"Attempt to fetch the {n}th entry from index {self.path}, "
                             f"which has size {self._entries}")
        view = self._view
        if view is not None:
            rel, pos = _OFFSET_ENTRY.unpack_from(view, n * 8)
        else:
            rel, pos = _OFFSET_ENTRY.unpack_from(self._entry_bytes(n), 0)
        return self.base_offset + rel, pos

    def last_entry(self) -> tuple[int, int]:
        """The last entry, or (base_offset, 0) when empty."""
        if self._entries == 0:
            return self.base_offset, 0
        return self.entry(self._entries - 1)

    def append(self, offset: int, position: int) -> None:
        """Append (offset → position); offset must exceed the last one (``InvalidOffsetError``)."""
        f = self._writable_file()
        if self.is_full():
            raise ValueError(f"Attempt to append to a full index (size = {self._entries}).")
        if self._entries == 0 or offset > self._last_offset:
            rel = self.relative_offset(offset)
            if not 0 <= position <= _INT32_MAX:
                raise ValueError(f"position {position} does not fit an index entry")
            f.write(self._entries * 8, _OFFSET_ENTRY.pack(rel, position))
            self._entries += 1
            self._searcher.entries = self._entries
            self._last_offset = offset
        else:
            raise InvalidOffsetError(
                f"Attempt to append an offset {offset} to position {self._entries} no larger "
                f"than the last offset appended ({self._last_offset}) to {self.path}")

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """(offset, position) of the largest entry with offset <= target, else (base, 0).
        An open index answers without being searched or mapped when it has no entries, and,
        when every entry came through :meth:`append` (so offsets strictly increase), for a
        target at or past its last entry (a read at the log's tail): that entry."""
        if self._file is not None and (self._entries == 0 or (
                self._appended and target_offset >= self._last_offset)):
            return self.last_entry()
        return self._searcher.lookup(target_offset)

    def lookup_many(self, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``lookup`` of every target: (offsets, positions) as int64 arrays."""
        return self._searcher.lookup_many(np.ascontiguousarray(targets, dtype=np.int64))

    def fetch_upper_bound_offset(self, start_position: int, fetch_size: int) -> tuple[int, int] | None:
        """First entry whose position >= ``start_position + fetch_size`` (None if there is none)."""
        slot = self._searcher.upper_slot_by_position(start_position + fetch_size)
        return None if slot < 0 else self.entry(slot)

    def _floor_slot_by_offset(self, offset: int) -> int:
        return self._searcher.floor_slot(offset)

    def sanity_check(self) -> None:
        """``CorruptIndexError`` if the last offset is below the base or the length is ragged."""
        if self._entries != 0 and self._last_offset < self.base_offset:
            raise CorruptIndexError(
                f"Corrupt index found, index file ({self.path}) has non-zero size but the last "
                f"offset is {self._last_offset} which is less than the base offset "
                f"{self.base_offset}")
        if self._length % self.ENTRY_SIZE != 0:
            raise CorruptIndexError(
                f"Index file {self.path} is corrupt, found {self._length} bytes which is neither "
                f"positive nor a multiple of {self.ENTRY_SIZE}")


class TimeIndex(_Index):
    """Timestamp → offset, 12-byte entries ``>qi`` (timestamp, relative offset) (§1.6)."""

    ENTRY_SIZE = 12
    _SEARCHER = "TimeSearcher"

    def _reload_last(self) -> None:
        if self._entries == 0:
            self._last = (NO_TIMESTAMP, self.base_offset)
        else:
            self._last = self.entry(self._entries - 1)

    def _reload_last_from(self, data: bytes) -> None:
        n = self._entries
        if n == 0:
            self._last = (NO_TIMESTAMP, self.base_offset)
        else:
            ts, rel = _TIME_ENTRY.unpack_from(data, (n - 1) * 12)
            self._last = (ts, self.base_offset + rel)

    def is_full(self) -> bool:
        """``entries >= max_entries − 1``: the last slot is kept for the entry written at roll."""
        return self._entries >= self._max_entries - 1

    def entry(self, n: int) -> tuple[int, int]:
        """The ``n``-th entry as (timestamp, offset)."""
        if n < 0 or n >= self._entries:
            raise IndexError(f"Attempt to fetch the {n}th entry from time index {self.path} "
                             f"which has size {self._entries}")
        view = self._view
        if view is not None:
            ts, rel = _TIME_ENTRY.unpack_from(view, n * 12)
        else:
            ts, rel = _TIME_ENTRY.unpack_from(self._entry_bytes(n), 0)
        return ts, self.base_offset + rel

    def last_entry(self) -> tuple[int, int]:
        """The last entry, or (−1, base_offset) when empty."""
        return self._last

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append (timestamp, offset) if ``timestamp`` exceeds the last one (equal is ignored).

        ``offset`` below the last offset → ``InvalidOffsetError``; ``timestamp`` below the last
        timestamp → ``ValueError`` (Kafka's IllegalStateException); full → ``ValueError`` unless
        ``skip_full_check`` (used for the final entry at roll/close).
        """
        f = self._writable_file()
        if not skip_full_check and self.is_full():
            raise ValueError(f"Attempt to append to a full time index (size = {self._entries}).")
        last_ts, last_off = self._last
        if self._entries != 0 and offset < last_off:
            raise InvalidOffsetError(
                f"Attempt to append an offset ({offset}) to slot {self._entries} no larger than "
                f"the last offset appended ({last_off}) to {self.path}")
        if self._entries != 0 and timestamp < last_ts:
            raise ValueError(
                f"Attempt to append a timestamp ({timestamp}) to slot {self._entries} no larger "
                f"than the last timestamp appended ({last_ts}) to {self.path}")
        if timestamp > last_ts:
            rel = self.relative_offset(offset)
            if self._entries >= self._max_entries:
                raise ValueError(f"no slot left in time index {self.path}")
            f.write(self._entries * 12, _TIME_ENTRY.pack(timestamp, rel))
            self._entries += 1
            self._searcher.entries = self._entries
            self._last = (timestamp, offset)

    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the largest entry with timestamp <= target, else (−1, base)."""
        return self._searcher.lookup(target_timestamp)

    def lookup_many(self, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``lookup`` of every target timestamp: (offsets, timestamps) as int64 arrays."""
        return self._searcher.lookup_many(np.ascontiguousarray(targets, dtype=np.int64))

    def _floor_slot_by_offset(self, offset: int) -> int:
        return self._searcher.floor_slot_by_offset(offset)

    def sanity_check(self) -> None:
        """``CorruptIndexError`` if timestamps or offsets run backwards or the length is ragged."""
        last_ts, last_off = self._last
        if self._entries != 0:
            first_ts = self.entry(0)[0]
            if last_ts < first_ts:
                raise CorruptIndexError(
                    f"Corrupt time index found, time index file ({self.path}) has non-zero size "
                    f"but the last timestamp is {last_ts} which is less than the first timestamp "
                    f"{first_ts}")
            if last_off < self.base_offset:
                raise CorruptIndexError(
                    f"Corrupt time index found, time index file ({self.path}) has non-zero size "
                    f"but the last offset is {last_off} which is less than the first offset "
                    f"{self.base_offset}")
        if self._length % self.ENTRY_SIZE != 0:
            raise CorruptIndexError(
                f"Time index file {self.path} is corrupt, found {self._length} bytes which is "
                f"neither positive nor a multiple of {self.ENTRY_SIZE}")
