"""The written part of an index file, found without reading a preallocated zero tail.

Kafka creates the active segment's ``.index`` and ``.timeindex`` at their full size
(``segment.index.bytes``, 10 MiB by default) with ``RandomAccessFile.setLength`` and trims them to
their entries only when the segment is rolled or the log is closed cleanly (``AbstractIndex``
``resize``/``trimToValidSize``). After an unclean stop the files keep their size: entries first,
zeros after; on most file systems the zeros are a hole. Entries are written in order and none
but the first can be all zeros (offsets, and timestamps, strictly increase), so the written
entries are the slots before the first all-zero slot after slot 0 -- the rule
``DumpLogSegments`` applies (``entry.offset == baseOffset && i > 0`` ends its walk) -- and an
all-zero slot 0 followed by zeros is no entry at all.

:func:`written_extent` finds that boundary reading a few dozen bytes: the file's last data
region from ``SEEK_DATA``/``SEEK_HOLE`` where the file system reports holes (a hole needs no
look), then a binary search over the slots before it, each probe one ``pread`` of one slot. Its
cost does not grow with the zero tail, sparse or not.
"""
from __future__ import annotations

import errno
import os
from typing import NamedTuple

import numpy as np

__all__ = ["IndexExtent", "read_written_entries", "written_extent"]

_MAX_DATA_REGIONS = 64  # a preallocated index has one or two; give up walking beyond this


class IndexExtent(NamedTuple):
    """``entries`` written of the ``slots`` the file has room for (``size // entry_size``);
    ``bytes_read`` is what finding them cost."""

    entries: int
    slots: int
    bytes_read: int

    @property
    def preallocated(self) -> bool:
        """True when slots past the written entries are zeros (the file was not trimmed)."""
        return self.slots > self.entries


def _data_end(fd: int, size: int) -> int:
    """End of the file's last data region; ``size`` where holes are not reported."""
    seek_data = getattr(os, "SEEK_DATA", None)
    seek_hole = getattr(os, "SEEK_HOLE", None)
    if seek_data is None or seek_hole is None:
        return size
    end = 0
    pos = 0
    try:
        for _ in range(_MAX_DATA_REGIONS):
            if pos >= size:
                return min(end, size)
            data = os.lseek(fd, pos, seek_data)
            end = pos = os.lseek(fd, data, seek_hole)
    except OSError as e:
        if e.errno == errno.ENXIO:  # no data at or after pos: the rest is a hole
            return min(end, size)
        return size
    return size


def _slot_nonzero(fd: int, slot: int, entry_size: int) -> bool:
    return any(os.pread(fd, entry_size, slot * entry_size))


def written_extent(fd: int, entry_size: int, size: int | None = None) -> IndexExtent:
    """The written entries of the index open as ``fd`` (see the module docstring)."""
    if size is None:
        size = os.fstat(fd).st_size
    slots = size // entry_size
    if slots == 0:
        return IndexExtent(0, 0, 0)
    data_end = _data_end(fd, slots * entry_size)
    # slots wholly inside the trailing hole are zero without looking
    hi = min(slots, -(-data_end // entry_size))
    reads = 0
    lo = 1
    while lo < hi:  # invariant: slots [1, lo) are written, slots [hi, slots) are not
        mid = (lo + hi) // 2
        reads += 1
        if _slot_nonzero(fd, mid, entry_size):
            lo = mid + 1
        else:
            hi = mid
    n = lo if hi > 0 else 0
    if n == 1:
        reads += 1
        if not _slot_nonzero(fd, 0, entry_size):
            n = 0
    return IndexExtent(n, slots, reads * entry_size)


def read_written_entries(path: str, dtype: np.dtype, *, at_least_one: bool = False
                         ) -> tuple[np.ndarray, IndexExtent]:
    """The written entries of the index at ``path`` as a structured array of ``dtype``.

    ``at_least_one`` returns slot 0 even when it is unwritten zeros (``DumpLogSegments`` prints
    it: Kafka counts every slot of a file it opens read-only)."""
    with open(path, "rb") as fh:
        fd = fh.fileno()
        extent = written_extent(fd, dtype.itemsize)
        n = extent.entries
        if at_least_one and extent.slots:
            n = max(n, 1)
        raw = os.pread(fd, n * dtype.itemsize, 0) if n else b""
    return np.frombuffer(raw, dtype=dtype, count=len(raw) // dtype.itemsize), extent
