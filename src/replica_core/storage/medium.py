"""Where the bytes of a log live: real files, or memory that models the page cache (§2.8).

Everything below the log reads and writes through a :class:`Medium` so that a simulated broker
can run on :class:`MemoryMedium`, where written is not the same as flushed.

:class:`FileMedium` is the real thing: ``os.pread``/``os.pwrite``/``os.fsync`` on file
descriptors, ``mmap`` for zero-copy views.

:class:`MemoryMedium` keeps, per file, the cached contents (what a running process sees) and the
durable contents (what a disk holds after a power failure), and two name tables: the current one
and the durable one. The model, chosen to be simple and POSIX-honest:

* ``MediumFile.flush()`` (fsync) makes the file's current contents durable. It does not make a
  new name durable (unless ``MemoryMedium(fsync_persists_name=True)``, which models ext4/xfs,
  where fsync of a new file also commits its directory entry).
* A file-level name change (creation, ``rename``, ``remove``) becomes durable only when its
  parent directory is synced with ``fsync_dir`` (``write_atomic`` does this, as Kafka's
  ``Utils.atomicMoveWithFallback`` does).
* Directory-level operations (``makedirs``, removing an empty directory, renaming a directory,
  ``rmtree``) are durable at once.
* ``crash("power")``: the name table reverts to the durable one (unsynced creations vanish,
  unsynced renames and removals revert) and every surviving file reverts to its last flushed
  contents; a file whose name was synced but whose contents never were comes back empty.
* ``crash("process")``: nothing is lost (the page cache outlives the process).
* Either crash closes every open :class:`MediumFile` (the process that held them is gone).

Storage faults (the simulator's disks as they fail; every choice comes from the caller's seeded
generator):

* **Torn write** — ``crash("power", torn=TornWrite.SUBSET, rng=g)``: of each file's unflushed
  range (the dirty bytes since its last flush, in :data:`PAGE_SIZE` pages) some whole pages
  reach the disk before the power goes. ``SUBSET`` (the default model): each dirty page
  survives on its own with probability 1/2 — a disk with a volatile write cache keeps no order
  among the pages of one writeback. ``PREFIX``: writeback in page order, cut short — the first
  ``k`` dirty pages survive, ``k`` uniform in ``0..n``. A surviving page is written whole (its
  cached bytes, up to the cached size) and extends the durable length to its end; the pages
  that did not survive keep their old durable bytes (zeros past the old durable length). A
  shrink that was never flushed stays unpersisted.
* **Bit flip** — :meth:`MemoryMedium.flip_bit`: one bit of the *durable* copy is inverted
  (bit rot, a latent sector error). The running process keeps reading the page cache's good
  copy; the flip shows after the next power failure (or at once with ``cached=True``, for a
  file whose pages are not cached, e.g. right after a power failure).
* **Lost fsync** — ``MemoryMedium.lose_fsyncs = True``: ``MediumFile.flush`` reports success,
  persists nothing and marks the file clean (as Linux does after a writeback error, the
  "fsyncgate" behaviour): the bytes are gone at the next power failure even if a later fsync of
  the same file succeeds. Counted in ``fsyncs_lost``; directory syncs and ``write_atomic`` are
  not affected.

Views (``MediumFile.view``) stay valid for the range they cover until the file's size changes;
after ``append``/``truncate`` take a new view. For ``FileMedium``, reading a view past a point
the file was since truncated to is undefined (the kernel sends SIGBUS), so release views before
shrinking a file.
"""
from __future__ import annotations

import mmap
import os
import posixpath
import shutil
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal

__all__ = ["Medium", "MediumFile", "FileMedium", "MemoryMedium", "PAGE_SIZE", "TornFile",
           "TornWrite"]

PAGE_SIZE = 4096
"""The page size of :class:`MemoryMedium`'s torn-write model (x86-64 and most file systems)."""


class TornWrite(Enum):
    """Which pages of a file's unflushed range reach the disk when the power fails."""

    SUBSET = "subset"
    """Each dirty page on its own, with probability 1/2 (no order among pages)."""
    PREFIX = "prefix"
    """The first ``k`` dirty pages, ``k`` uniform in ``0..n`` (writeback in page order)."""


@dataclass(frozen=True)
class TornFile:
    """One file that held unflushed bytes at a power failure: its dirty pages (page numbers)
    and those of them that reached the disk (empty when no torn write was modelled)."""

    path: str
    dirty_pages: tuple[int, ...]
    kept_pages: tuple[int, ...]

PathLike = str | os.PathLike


class MediumFile:
    """An open file of a :class:`Medium` (the interface; see the two implementations)."""

    __slots__ = ()
    path: str
    writable: bool

    def size(self) -> int:
        """Current length in bytes."""
        raise NotImplementedError

    def read(self, position: int, n: int = -1) -> bytes | memoryview:
        """Up to ``n`` bytes from ``position`` (short at EOF; ``n < 0`` reads to the end)."""
        raise NotImplementedError

    def view(self, position: int = 0, n: int = -1) -> memoryview:
        """A read-only zero-copy view of ``[position, position + n)`` (clipped at EOF)."""
        raise NotImplementedError

    def append(self, data: bytes | bytearray | memoryview) -> int:
        """Write ``data`` at the current end; returns the position it was written at."""
        raise NotImplementedError

    def write(self, position: int, data: bytes | bytearray | memoryview) -> None:
        """Overwrite in place at ``position`` (extends the file if it runs past the end)."""
        raise NotImplementedError

    def truncate(self, size: int) -> None:
        """Shrink to ``size`` bytes, or extend with zero bytes."""
        raise NotImplementedError

    def flush(self) -> None:
        """fsync: the current contents become durable."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    @property
    def closed(self) -> bool:
        raise NotImplementedError

    def __enter__(self) -> MediumFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Medium:
    """A file system: names, directories and :class:`MediumFile` handles."""

    fsyncs = 0
    """File fsyncs that persisted (counted by :class:`MemoryMedium`; 0 where not counted)."""
    fsyncs_lost = 0
    """File fsyncs that reported success and persisted nothing (injected on a MemoryMedium)."""

    def open(self, path: PathLike, *, create: bool = False, writable: bool = True) -> MediumFile:
        """Open ``path``; ``FileNotFoundError`` if it is absent and ``create`` is false."""
        raise NotImplementedError

    def exists(self, path: PathLike) -> bool:
        raise NotImplementedError

    def is_dir(self, path: PathLike) -> bool:
        raise NotImplementedError

    def listdir(self, path: PathLike) -> list[str]:
        """Names (not paths) in directory ``path``, sorted."""
        raise NotImplementedError

    def list_files(self, path: PathLike) -> list[str]:
        """The names in directory ``path`` that are not directories, sorted: :meth:`listdir`
        less its subdirectories (what a partition directory's loader reads)."""
        return self._split_listing(path, dirs=False)

    def list_dirs(self, path: PathLike) -> list[str]:
        """The names of the subdirectories of directory ``path``, sorted: :meth:`listdir` less
        its files (what a log directory's loader reads)."""
        return self._split_listing(path, dirs=True)

    def _split_listing(self, path: PathLike, *, dirs: bool) -> list[str]:
        d = os.fspath(path)
        prefix = d if d.endswith("/") else d + "/"
        return [name for name in self.listdir(d) if self.is_dir(prefix + name) == dirs]

    def makedirs(self, path: PathLike) -> None:
        """Create ``path`` and its missing parents (no error if it exists)."""
        raise NotImplementedError

    def remove(self, path: PathLike) -> None:
        """Remove a file or an empty directory."""
        raise NotImplementedError

    def rmtree(self, path: PathLike) -> None:
        """Remove a directory and everything below it."""
        raise NotImplementedError

    def rename(self, src: PathLike, dst: PathLike) -> None:
        """Atomically rename ``src`` to ``dst``, replacing a file at ``dst``."""
        raise NotImplementedError

    def fsync_dir(self, path: PathLike) -> None:
        """Make the names in directory ``path`` durable."""
        raise NotImplementedError

    def write_atomic(self, path: PathLike, data: bytes) -> None:
        """Write ``<path>.tmp``, fsync it, rename it over ``path``, fsync the directory (§1.10)."""
        path = os.fspath(path)
        tmp = path + ".tmp"
        f = self.open(tmp, create=True)
        try:
            f.truncate(0)
            if data:
                f.append(data)
            f.flush()
        finally:
            f.close()
        self.rename(tmp, path)
        self.fsync_dir(posixpath.dirname(path) or ".")

    def create_dir_with_files(self, path: PathLike, files: Iterable[tuple[str, int]]) -> None:
        """``makedirs(path)``, then for each ``(name, length)`` create file ``path/name`` and
        extend it to ``length`` zero bytes (``open(create=True)``, ``truncate(length)`` when
        ``length`` is not 0, close), in order; nothing is synced. A new partition directory
        with its first segment's files (§1.4) in one call: :class:`MemoryMedium` makes a
        directory that does not exist yet in one step, with no handles."""
        self.makedirs(path)
        base = os.fspath(path)
        for name, length in files:
            f = self.open(os.path.join(base, name), create=True)
            try:
                if length:
                    f.truncate(length)
            finally:
                f.close()

    def create_new_dir_with_files(self, path: PathLike, files: Iterable[tuple[str, int]]
                                  ) -> bool:
        """:meth:`create_dir_with_files` where nothing exists yet: False, and nothing done,
        when :meth:`exists` says ``path`` does; else the directory made and True. What a
        caller making a new partition directory only where there is none does, in one call
        (:class:`MemoryMedium` looks at the name once)."""
        if self.exists(path):
            return False
        self.create_dir_with_files(path, files)
        return True

    def create_new_dirs_with_files(self, parent: PathLike, names: Iterable[str],
                                   files: tuple[tuple[str, int], ...]) -> list[bool]:
        """:meth:`create_new_dir_with_files` of ``parent/name`` with ``files`` for each of
        ``names`` in order, and what each answered: a LeaderAndIsr's new partition
        directories, all in one log directory, in one call (:class:`MemoryMedium` checks the
        parent and the file list once)."""
        base = os.fspath(parent)
        return [self.create_new_dir_with_files(os.path.join(base, name), files)
                for name in names]

    def untouched_files(self, path: PathLike, *, written: str | None = None
                        ) -> tuple[tuple[str, int], ...] | None:
        """The ``(name, length)`` files :meth:`create_dir_with_files` made directory ``path``
        with, if nothing has looked inside it or changed it since; None otherwise, and None
        where the medium does not keep track (:class:`FileMedium`). Such a directory holds
        exactly those files: zero bytes of those lengths, their names not durable.

        ``written``: one of those names that :meth:`write_atomic` may have replaced since (any
        number of times, nothing else done): that file then holds what was last written, and
        every name is durable (the write's directory sync)."""
        return None

    def read_bytes(self, path: PathLike) -> bytes:
        """The whole current contents of file ``path``."""
        f = self.open(path, writable=False)
        try:
            return bytes(f.read(0, f.size()))
        finally:
            f.close()


# --------------------------------------------------------------------------------------------
# Real files
# --------------------------------------------------------------------------------------------


class _OSFile(MediumFile):
    __slots__ = ("path", "writable", "_fd", "_mmap", "_mmap_len")

    def __init__(self, path: str, fd: int, writable: bool):
        self.path = path
        self.writable = writable
        self._fd = fd
        self._mmap: mmap.mmap | None = None
        self._mmap_len = 0

    def _check(self) -> int:
        if self._fd < 0:
            raise ValueError(f"I/O operation on closed file {self.path}")
        return self._fd

    def _check_writable(self) -> int:
        fd = self._check()
        if not self.writable:
            raise PermissionError(f"{self.path} was opened read-only")
        return fd

    def size(self) -> int:
        return os.fstat(self._check()).st_size

    def read(self, position: int, n: int = -1) -> bytes:
        fd = self._check()
        if n < 0:
            n = max(0, os.fstat(fd).st_size - position)
        if n == 0:
            return b""
        out = os.pread(fd, n, position)
        if len(out) == n:
            return out
        parts = [out]
        got = len(out)
        while out and got < n:
            out = os.pread(fd, n - got, position + got)
            parts.append(out)
            got += len(out)
        return b"".join(parts)

    def view(self, position: int = 0, n: int = -1) -> memoryview:
        fd = self._check()
        size = os.fstat(fd).st_size
        end = size if n < 0 else min(size, position + n)
        if position >= end:
            return memoryview(b"")
        if self._mmap is None or self._mmap_len != size:
            self._drop_mmap()
            self._mmap = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
            self._mmap_len = size
        return memoryview(self._mmap)[position:end]

    def _drop_mmap(self) -> None:
        mm, self._mmap = self._mmap, None
        if mm is not None:
            try:
                mm.close()
            except BufferError:
                pass  # views still point at it; it is unmapped when the last one goes

    def _pwrite_all(self, fd: int, data: bytes | bytearray | memoryview, position: int) -> None:
        mv = memoryview(data).cast("B")
        done = 0
        while done < len(mv):
            done += os.pwrite(fd, mv[done:], position + done)

    def append(self, data: bytes | bytearray | memoryview) -> int:
        fd = self._check_writable()
        pos = os.fstat(fd).st_size
        self._pwrite_all(fd, data, pos)
        return pos

    def write(self, position: int, data: bytes | bytearray | memoryview) -> None:
        fd = self._check_writable()
        if position < 0:
            raise ValueError(f"negative position {position}")
        self._pwrite_all(fd, data, position)

    def truncate(self, size: int) -> None:
        fd = self._check_writable()
        if size < 0:
            raise ValueError(f"negative size {size}")
        self._drop_mmap()
        os.ftruncate(fd, size)

    def flush(self) -> None:
        os.fsync(self._check())

    def close(self) -> None:
        if self._fd >= 0:
            self._drop_mmap()
            fd, self._fd = self._fd, -1
            os.close(fd)

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


class FileMedium(Medium):
    """Real files through the OS (``os.pread``/``pwrite``/``fsync``, ``mmap`` views)."""

    def open(self, path: PathLike, *, create: bool = False, writable: bool = True) -> MediumFile:
        path = os.fspath(path)
        flags = (os.O_RDWR if writable else os.O_RDONLY) | getattr(os, "O_CLOEXEC", 0)
        if create:
            flags |= os.O_CREAT
        fd = os.open(path, flags, 0o644)
        return _OSFile(path, fd, writable)

    def exists(self, path: PathLike) -> bool:
        return os.path.exists(path)

    def is_dir(self, path: PathLike) -> bool:
        return os.path.isdir(path)

    def listdir(self, path: PathLike) -> list[str]:
        return sorted(os.listdir(path))

    def makedirs(self, path: PathLike) -> None:
        os.makedirs(path, exist_ok=True)

    def remove(self, path: PathLike) -> None:
        if os.path.isdir(path) and not os.path.islink(path):
            os.rmdir(path)
        else:
            os.remove(path)

    def rmtree(self, path: PathLike) -> None:
        shutil.rmtree(path)

    def rename(self, src: PathLike, dst: PathLike) -> None:
        os.replace(src, dst)

    def fsync_dir(self, path: PathLike) -> None:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# --------------------------------------------------------------------------------------------
# Memory modelling the page cache
# --------------------------------------------------------------------------------------------


def _grow_in_place(buf: bytearray, data: memoryview | bytes) -> bool:
    """Append ``data`` to ``buf`` in place (an append at the end of the bytes a file holds,
    e.g. a log's next batch: the buffer grows by its own over-allocation, without the
    zero-filled copy :meth:`_Inode.ensure` makes); False, nothing done, while a view holds
    ``buf`` (it cannot be resized then)."""
    try:
        buf += data
    except BufferError:
        return False
    return True


class _Inode:
    """One file's bytes, sparse like a file system's: ``size`` is the length, ``buf`` holds the
    materialised prefix and everything from ``len(buf)`` to ``size`` is a hole that reads as
    zeros (a pre-allocated index costs nothing until it is written or mapped). ``buf[size:]``
    is always zero. ``durable`` and ``durable_size`` are the flushed content, sparse the same
    way."""

    __slots__ = ("buf", "size", "durable", "durable_size", "dirty_lo", "dirty_hi")

    def __init__(self) -> None:
        self.buf = bytearray()
        self.size = 0
        self.durable: bytearray | None = None
        self.durable_size = 0
        self.dirty_lo = 1 << 62
        self.dirty_hi = 0

    def mark(self, lo: int, hi: int) -> None:
        if lo < self.dirty_lo:
            self.dirty_lo = lo
        if hi > self.dirty_hi:
            self.dirty_hi = hi

    def ensure(self, size: int) -> None:
        """Materialise ``size`` bytes without resizing ``buf`` in place (views may hold it)."""
        buf = self.buf
        cap = len(buf)
        if size > cap:
            new = bytearray(max(size, 2 * cap, 64))
            new[:cap] = buf
            self.buf = new

    def set_size(self, size: int) -> None:
        """Truncate or extend; an extension is a hole until written."""
        old = self.size
        if size < old:
            hi = min(old, len(self.buf))
            if size < hi:
                self.buf[size:hi] = bytes(hi - size)  # same length: allowed while views exist
        self.size = size
        self.mark(min(size, old), max(size, old))

    def flush(self) -> None:
        size = self.size
        buf = self.buf
        filled = min(size, len(buf))
        if self.durable is None:
            self.durable = bytearray(buf[:filled])
        else:
            d = self.durable
            if len(d) > size:
                del d[size:]
            lo, hi = self.dirty_lo, min(self.dirty_hi, size)
            if lo < hi:
                copy_hi = min(hi, filled)
                if len(d) < copy_hi:
                    d.extend(bytes(copy_hi - len(d)))
                if lo < copy_hi:
                    d[lo:copy_hi] = buf[lo:copy_hi]
                zero_lo, zero_hi = max(lo, filled), min(hi, len(d))
                if zero_lo < zero_hi:  # now a hole: what was durable there reads as zeros
                    d[zero_lo:zero_hi] = bytes(zero_hi - zero_lo)
        self.durable_size = size
        self.dirty_lo = 1 << 62
        self.dirty_hi = 0

    def dirty_pages(self, page: int) -> range:
        """Page numbers holding bytes written since the last flush (within the cached size)."""
        lo, hi = self.dirty_lo, min(self.dirty_hi, self.size)
        if lo >= hi:
            return range(0)
        return range(lo // page, (hi + page - 1) // page)

    def persist_pages(self, pages: Sequence[int], page: int) -> None:
        """Write these whole pages of the cached contents to the durable copy (a torn write)."""
        d = self.durable if self.durable is not None else bytearray()
        new_size = self.durable_size
        buf = self.buf
        for p in pages:
            lo = p * page
            hi = min(lo + page, self.size)
            if lo >= hi:
                continue
            if len(d) < hi:
                d.extend(bytes(hi - len(d)))
            src = buf[lo:min(hi, len(buf))]
            d[lo:lo + len(src)] = src
            if lo + len(src) < hi:  # a hole in the cache reads as zeros
                d[lo + len(src):hi] = bytes(hi - lo - len(src))
            new_size = max(new_size, hi)
        self.durable = d
        self.durable_size = new_size

    def mark_clean(self) -> None:
        """Forget the dirty range without persisting it (a lost fsync)."""
        self.dirty_lo = 1 << 62
        self.dirty_hi = 0

    def revert(self) -> None:
        if self.durable is None:
            self.buf = bytearray()
            self.size = 0
        else:
            self.buf = bytearray(self.durable)
            self.size = self.durable_size
        self.dirty_lo = 1 << 62
        self.dirty_hi = 0


class _MemoryFile(MediumFile):
    __slots__ = ("path", "writable", "_inode", "_medium", "__weakref__")

    def __init__(self, medium: MemoryMedium, path: str, inode: _Inode, writable: bool):
        self.path = path
        self.writable = writable
        self._inode: _Inode | None = inode
        self._medium = medium

    def _check(self) -> _Inode:
        inode = self._inode
        if inode is None:
            raise ValueError(f"I/O operation on closed file {self.path}")
        return inode

    def _check_writable(self) -> _Inode:
        inode = self._check()
        if not self.writable:
            raise PermissionError(f"{self.path} was opened read-only")
        return inode

    def size(self) -> int:
        inode = self._inode
        if inode is None:
            inode = self._check()  # raises
        return inode.size

    def read(self, position: int, n: int = -1) -> bytes:
        inode = self._inode
        if inode is None:
            inode = self._check()  # raises
        end = position + n
        if n < 0 or end > inode.size:  # (to the end, or clipped at EOF)
            end = inode.size
        if position >= end:
            return b""
        data = bytes(inode.buf[position:end])
        if len(data) < end - position:  # the rest is a hole
            data += bytes(end - position - len(data))
        return data

    def view(self, position: int = 0, n: int = -1) -> memoryview:
        inode = self._inode
        if inode is None:
            inode = self._check()  # raises
        end = position + n
        if n < 0 or end > inode.size:  # (to the end, or clipped at EOF)
            end = inode.size
        if position >= end:
            return memoryview(b"")
        if end > len(inode.buf):  # a view aliases the bytes: fill the hole first
            inode.ensure(end)
        return memoryview(inode.buf)[position:end].toreadonly()

    def append(self, data: bytes | bytearray | memoryview) -> int:
        inode = self._inode
        if inode is None or not self.writable:
            inode = self._check_writable()  # raises
        pos = inode.size
        self.write(pos, data)
        return pos

    def write(self, position: int, data: bytes | bytearray | memoryview) -> None:
        """Every file write (``append`` too) goes through here: the bytes land in the cache
        and the written range joins the dirty range (what the next flush persists)."""
        inode = self._inode
        if inode is None or not self.writable:
            inode = self._check_writable()  # raises
        if position < 0:
            raise ValueError(f"negative position {position}")
        # bytes are their own bytes; anything else is read as a flat byte view
        mv = data if type(data) is bytes else memoryview(data).cast("B")
        end = position + len(mv)
        lo = position
        size = inode.size
        if end > size:
            # set_size(end), inlined: an extension marks [old size, end) dirty
            inode.size = end
            if size < lo:
                lo = size
        buf = inode.buf
        cap = len(buf)
        if end <= cap:
            buf[position:end] = mv
        elif not buf and position == 0 and end >= 64:
            # the first bytes of a file (a new segment's first batch): what ensure(end) and
            # the copy leave - a new buffer of exactly these bytes - without the zero fill
            inode.buf = bytearray(mv)
        elif position != cap or not _grow_in_place(buf, mv):
            inode.ensure(end)
            inode.buf[position:end] = mv
        # mark(lo, end), inlined
        if lo < inode.dirty_lo:
            inode.dirty_lo = lo
        if end > inode.dirty_hi:
            inode.dirty_hi = end

    def truncate(self, size: int) -> None:
        inode = self._check_writable()
        if size < 0:
            raise ValueError(f"negative size {size}")
        inode.set_size(size)

    def flush(self) -> None:
        inode = self._check()
        m = self._medium
        if m.lose_fsyncs:
            inode.mark_clean()
            m.fsyncs_lost += 1
            return
        inode.flush()
        m.fsyncs += 1
        if m.fsync_persists_name and m._files.get(self.path) is inode:
            m._set_durable(self.path, inode)

    def close(self) -> None:
        self._inode = None

    @property
    def closed(self) -> bool:
        return self._inode is None


def _flushed_inode(data: bytes) -> _Inode:
    """A file holding ``data``, all of it durable (what ``write_atomic`` leaves)."""
    inode = _new_inode(_Inode)
    inode.buf = buf = bytearray(data)
    inode.size = inode.durable_size = len(buf)
    inode.durable = bytearray(buf)
    inode.dirty_lo = 1 << 62
    inode.dirty_hi = 0
    return inode


_new_inode = object.__new__  # an _Inode whose fields the caller sets, all of them


def _hole_inode(length: int) -> _Inode:
    """A new file extended to ``length`` by ``truncate`` (a hole, marked dirty as ``truncate``
    marks it, nothing durable): ``_Inode()`` then ``set_size(length)``, in one step."""
    inode = _new_inode(_Inode)
    inode.buf = bytearray()
    inode.durable = None
    inode.durable_size = 0
    inode.size = length
    if length:
        inode.dirty_lo = 0
        inode.dirty_hi = length
    else:
        inode.dirty_lo = 1 << 62
        inode.dirty_hi = 0
    return inode


_new_file = object.__new__  # a _MemoryFile whose fields the caller sets, all of them


def _norm(path: PathLike) -> str:
    """``posixpath.normpath``; a string with nothing to normalise (no empty, ``.`` or ``..``
    component, no trailing or leading ``./``) is returned as it is without the scan."""
    if type(path) is str and path and path[-1] != "/" and "/." not in path \
            and "//" not in path and path[:2] != "./":
        return path
    return posixpath.normpath(os.fspath(path))


def _parent(p: str) -> str:
    """The directory holding normalised path ``p`` (``posixpath.dirname``, "." or "/" at the top)."""
    d = p.rpartition("/")[0]
    if d:
        return d
    return "/" if p.startswith("/") else "."


def _under(p: str, d: str) -> bool:
    if d in (".", "/"):
        return p != d and (p.startswith("/") == (d == "/"))
    return p.startswith(d + "/")


class MemoryMedium(Medium):
    """An in-memory file system with a page cache: flushed ≠ written (see module docstring).

    Names are indexed by parent directory, so ``listdir``, ``fsync_dir`` and file ``rename``
    cost the size of one directory, not of the whole file system (a broker holds thousands of
    partition directories).
    """

    def __init__(self, *, fsync_persists_name: bool = False) -> None:
        #: ext4/xfs-like: fsync of a file also makes its current name durable (POSIX asks for a
        #: directory fsync; the default models that stricter rule).
        self.fsync_persists_name = fsync_persists_name
        self._dirs: set[str] = {"/", "."}
        self._files: dict[str, _Inode] = {}
        self._durable: dict[str, _Inode] = {}
        # parent directory -> child paths, for files, durable names and directories
        self._file_kids: dict[str, set[str]] = {}
        self._durable_kids: dict[str, set[str]] = {}
        self._dir_kids: dict[str, set[str]] = {}
        # weak references to the open handles (each drops itself from the set when its handle
        # is gone): what a WeakSet keeps, with no Python-level call per open
        self._handles: set[weakref.ref[_MemoryFile]] = set()
        self._drop_handle = self._handles.discard
        self.crashes: list[str] = []
        # new directories whose files are not made yet (create_dir_with_files): dir ->
        # ((name, length), ...). Such a file exists as far as anyone can tell (a hole of that
        # length, its name not durable); its inode is made when something looks inside.
        self._pending: dict[str, tuple[tuple[str, int], ...]] = {}
        # pending directories a write_atomic replaced one of the files of (path -> the bytes
        # written, its inode made with the directory: see _materialize): their names are
        # durable, as the write's directory sync makes them (see write_atomic)
        self._pending_written: dict[str, dict[str, bytes]] = {}
        # pending directories with files opened (made alone, in _files; see _make_one)
        self._pending_opened: set[str] = set()
        self._valid_file_lists: dict[tuple[tuple[str, int], ...], bool] = {}  # names checked
        self._last_valid_file_list: tuple[tuple[str, int], ...] | None = None
        # id(files) -> (files, their names) for the pending lists (one per shape, shared)
        self._file_list_names: dict[int, tuple[tuple[tuple[str, int], ...], frozenset[str]]] = {}
        # the last pending list write_atomic looked at, and its replaceable names
        self._replaceable_list: tuple[tuple[str, int], ...] | None = None
        self._replaceable: frozenset[str] = frozenset()
        #: while true, file fsyncs report success and persist nothing (see the module docstring)
        self.lose_fsyncs = False
        self.fsyncs = 0
        """File fsyncs that persisted."""
        self.fsyncs_lost = 0
        """File fsyncs that reported success but persisted nothing."""

    # -- index upkeep ----------------------------------------------------------------------
    @staticmethod
    def _index_add(index: dict[str, set[str]], p: str) -> None:
        d = _parent(p)
        kids = index.get(d)
        if kids is None:
            index[d] = {p}
        else:
            kids.add(p)

    @staticmethod
    def _index_drop(index: dict[str, set[str]], p: str) -> None:
        d = _parent(p)
        kids = index.get(d)
        if kids is not None:
            kids.discard(p)
            if not kids:
                del index[d]

    def _set_file(self, p: str, inode: _Inode) -> None:
        if p not in self._files:
            self._index_add(self._file_kids, p)
        self._files[p] = inode

    def _pop_file(self, p: str) -> _Inode:
        inode = self._files.pop(p)
        self._index_drop(self._file_kids, p)
        return inode

    def _set_durable(self, p: str, inode: _Inode) -> None:
        if p not in self._durable:
            self._index_add(self._durable_kids, p)
        self._durable[p] = inode

    def _reindex(self) -> None:
        """Rebuild every index from the tables (after bulk changes: rmtree, directory rename,
        power failure)."""
        self._file_kids, self._durable_kids, self._dir_kids = {}, {}, {}
        for p in self._files:
            self._index_add(self._file_kids, p)
        for p in self._durable:
            self._index_add(self._durable_kids, p)
        for p in self._dirs:
            if p not in (".", "/"):
                self._index_add(self._dir_kids, p)

    def _has_children(self, d: str) -> bool:
        return bool(self._file_kids.get(d)) or bool(self._dir_kids.get(d))

    # -- directories created with their files pending ------------------------------------------
    def _materialize(self, d: str) -> None:
        """Make the inodes of pending directory ``d``'s files: what the sequence of calls
        behind :meth:`Medium.create_dir_with_files` leaves (a hole of the length, marked dirty
        as ``truncate`` marks it, no durable content, the name not durable)."""
        files = self._pending.pop(d)
        # the files opened alone (made already, in the table)
        opened = self._pending_opened
        made = bool(opened) and d in opened
        if made:
            opened.discard(d)
        # the files a write_atomic replaced (their bytes, flushed)
        written = self._pending_written.pop(d, None) if self._pending_written else None
        table = self._files
        present = self._file_kids.get(d)
        # the write's directory sync of a directory that had no file names: every name of the
        # directory becomes durable, set in the same pass (else _sync_names below)
        durable = self._durable if written is not None and present is None \
            and d not in self._durable_kids else None
        prefix = d + "/"
        kids = set()
        for name, length in files:
            p = prefix + name
            inode = table.get(p) if made else None
            if inode is None:
                data = None if written is None else written.get(p)
                inode = _hole_inode(length) if data is None else _flushed_inode(data)
                table[p] = inode
            kids.add(p)
            if durable is not None:
                durable[p] = inode
        if present is None:
            self._file_kids[d] = kids
        else:
            present.update(kids)
        if durable is not None:
            self._durable_kids[d] = set(kids)
        elif written is not None:  # then the write's directory sync, as it would have happened
            self._sync_names(d)

    def _make_one(self, d: str, p: str, name: str, files: tuple[tuple[str, int], ...]
                  ) -> _Inode | None:
        """The first open of file ``name`` (path ``p``) of pending directory ``d`` (its
        ``files``): that file alone is made - what making the directory makes of it (a hole
        of its listed length, marked dirty as ``truncate`` marks it) - and the directory stays
        pending, its other files made when anything else looks inside. Its name is not in the
        directory indexes nor durable until then: everything that reads those (listing, a
        directory sync, a power failure, the durable-state queries, removal and renames) makes
        the directory first, which indexes it and applies a pending write's directory sync to
        it. None (nothing done) for a name not listed, or one a write replaced."""
        written = self._pending_written.get(d) if self._pending_written else None
        if written is not None and p in written:
            return None
        for listed, length in files:
            if listed == name:
                inode = self._files[p] = _hole_inode(length)
                self._pending_opened.add(d)
                return inode
        return None

    def _touch(self, p: str) -> None:
        """Before anything is done with path ``p``: materialise the pending directory it is
        in, or that it is."""
        pending = self._pending
        if pending:
            d = _parent(p)
            if d in pending:
                self._materialize(d)
            if p in pending:
                self._materialize(p)

    def _names_of(self, files: tuple[tuple[str, int], ...]) -> frozenset[str]:
        """The names in a pending file list."""
        hit = self._file_list_names.get(id(files))
        if hit is None or hit[0] is not files:
            hit = (files, frozenset(name for name, _ in files))
            if len(self._file_list_names) >= 64:
                self._file_list_names.clear()
            self._file_list_names[id(files)] = hit
        return hit[1]

    def _replaceable_names(self, files: tuple[tuple[str, int], ...]) -> frozenset[str]:
        """The names in a pending file list that ``write_atomic`` replaces while the directory
        stays pending: those whose ``.tmp`` name is not in the list too (remembered for the
        last list asked about: one shared tuple per shape)."""
        if files is self._replaceable_list:
            return self._replaceable
        names = self._names_of(files)
        replaceable = frozenset(n for n in names if n + ".tmp" not in names)
        self._replaceable_list, self._replaceable = files, replaceable
        return replaceable

    def _touch_written(self, p: str) -> None:
        """Before reading the durable names of path ``p``: make the pending directory it is in
        if a write made its names durable."""
        if self._pending_written:
            d = _parent(p)
            if d in self._pending_written:
                self._materialize(d)

    def _touch_tree(self, p: str) -> None:
        """Materialise every pending directory at or below ``p`` (before a bulk change)."""
        for d in [d for d in self._pending if d == p or _under(d, p)]:
            self._materialize(d)

    # -- names ---------------------------------------------------------------------------
    def open(self, path: PathLike, *, create: bool = False, writable: bool = True) -> MediumFile:
        # a string that is already a key is already normalised
        files = self._files
        inode = files.get(path) if type(path) is str else None  # type: ignore[arg-type]
        if inode is None and self._pending and type(path) is str:
            # the first open of a file of a pending directory: a pending directory is a
            # normalised path other than "/" and ".", so <it>/<plain name> is normalised too
            d, _, name = path.rpartition("/")
            listed = self._pending.get(d)
            if listed is not None and name and name != "." and name != "..":
                inode = self._make_one(d, path, name, listed)  # type: ignore[arg-type]
                if inode is None:
                    self._materialize(d)
                    inode = files.get(path)
        p = path if inode is not None else _norm(path)
        if inode is None:
            if p is not path:
                inode = files.get(p)  # type: ignore[arg-type]
            if inode is None and self._pending:
                pending = self._pending
                d = p.rpartition("/")[0]  # type: ignore[union-attr]
                if d in pending and p not in pending:
                    self._materialize(d)  # a file of a pending directory (its first open)
                else:
                    self._touch(p)  # type: ignore[arg-type]
                inode = files.get(p)  # type: ignore[arg-type]
        if inode is None:
            if p in self._dirs:
                raise IsADirectoryError(p)
            if not create:
                raise FileNotFoundError(p)
            if _parent(p) not in self._dirs:
                raise FileNotFoundError(f"no directory {_parent(p)} for {p}")
            inode = _Inode()
            self._set_file(p, inode)
        # _MemoryFile(self, p, inode, writable), its fields set here in one step
        f = _new_file(_MemoryFile)
        f.path = p
        f.writable = writable
        f._inode = inode
        f._medium = self
        self._handles.add(weakref.ref(f, self._drop_handle))
        return f

    def exists(self, path: PathLike) -> bool:
        files, dirs = self._files, self._dirs
        if type(path) is str and (path in files or path in dirs):
            return True
        return self._exists_normalised(_norm(path))

    def _exists_normalised(self, p: str) -> bool:
        """:meth:`exists` of normalised path ``p``: a made file or directory, or a name in the
        file list of a pending directory."""
        if p in self._files or p in self._dirs:
            return True
        if self._pending:
            # the parent of p as a pending directory (never "/" or ".", so "" misses it too)
            d, _, name = p.rpartition("/")
            names = self._pending.get(d)
            if names is not None:
                return name in self._names_of(names)
        return False

    def is_dir(self, path: PathLike) -> bool:
        return _norm(path) in self._dirs

    def listdir(self, path: PathLike) -> list[str]:
        names = self._kid_names(path, self._file_kids)
        names += self._kid_names(path, self._dir_kids)
        names.sort()
        return names

    def list_files(self, path: PathLike) -> list[str]:
        """:meth:`Medium.list_files` from the directory's file entries alone (no listing of
        its subdirectories, no per-name directory check)."""
        return self._kid_names(path, self._file_kids)

    def list_dirs(self, path: PathLike) -> list[str]:
        """:meth:`Medium.list_dirs` from the directory's subdirectory entries alone."""
        return self._kid_names(path, self._dir_kids)

    def _kid_names(self, path: PathLike, kids: dict[str, Any]) -> list[str]:
        """The sorted names of directory ``path``'s entries in ``kids`` (errors as listdir's)."""
        d = _norm(path)
        self._touch(d)
        if d not in self._dirs:
            if d in self._files:
                raise NotADirectoryError(d)
            raise FileNotFoundError(d)
        names = [p.rpartition("/")[2] for p in kids.get(d, ())]
        names.sort()
        return names

    def makedirs(self, path: PathLike) -> None:
        p = _norm(path)
        chain = []
        while p not in self._dirs:
            self._touch(p)
            if p in self._files:
                raise FileExistsError(f"{p} is a file")
            chain.append(p)
            p = _parent(p)
        self._dirs.update(chain)
        for q in chain:
            self._index_add(self._dir_kids, q)

    def remove(self, path: PathLike) -> None:
        p = _norm(path)
        self._touch(p)
        if p in self._files:
            self._pop_file(p)
        elif p in self._dirs and p not in (".", "/"):
            if self._has_children(p):
                raise OSError(39, "Directory not empty", p)
            self._dirs.discard(p)
            self._index_drop(self._dir_kids, p)
            for q in list(self._durable_kids.get(p, ())):
                del self._durable[q]
            self._durable_kids.pop(p, None)
        else:
            raise FileNotFoundError(p)

    def rmtree(self, path: PathLike) -> None:
        p = _norm(path)
        if p not in self._dirs:
            raise FileNotFoundError(p)
        for d in [d for d in self._pending if d == p or _under(d, p)]:
            del self._pending[d]  # its files go with it, never made (those opened below)
            self._pending_written.pop(d, None)
            self._pending_opened.discard(d)
        for table in (self._files, self._durable):
            for q in [q for q in table if _under(q, p)]:
                del table[q]
        self._dirs = {q for q in self._dirs if not _under(q, p)}
        if p not in (".", "/"):
            self._dirs.discard(p)
        self._reindex()

    def _retarget_handles(self, inode: _Inode, new_path: str) -> None:
        # open handles follow their file (files are renamed rarely: a scan is cheap enough)
        for ref in list(self._handles):
            h = ref()
            if h is not None and h._inode is inode:
                h.path = new_path

    def rename(self, src: PathLike, dst: PathLike) -> None:
        s, d = _norm(src), _norm(dst)
        if self._pending:
            self._touch(s)
            self._touch(d)
            if s in self._dirs:
                self._touch_tree(s)
        if s in self._files:
            if d in self._dirs:
                raise IsADirectoryError(d)
            if _parent(d) not in self._dirs:
                raise FileNotFoundError(f"no directory {_parent(d)} for {d}")
            inode = self._pop_file(s)
            self._set_file(d, inode)
            self._retarget_handles(inode, d)
        elif s in self._dirs and s not in (".", "/"):
            if d in self._files:
                raise NotADirectoryError(d)
            if d in self._dirs and self._has_children(d):
                raise OSError(39, "Directory not empty", d)
            if _parent(d) not in self._dirs or _under(d, s):
                raise FileNotFoundError(d)
            n = len(s)
            moved = []
            for table in (self._files, self._durable):
                for q in [q for q in table if _under(q, s)]:
                    inode = table.pop(q)
                    table[d + q[n:]] = inode
                    if table is self._files:
                        moved.append((inode, d + q[n:]))
            self._dirs = {(d + q[n:]) if (q == s or _under(q, s)) else q for q in self._dirs}
            self._reindex()
            for inode, new_path in moved:
                self._retarget_handles(inode, new_path)
        else:
            raise FileNotFoundError(s)

    def fsync_dir(self, path: PathLike) -> None:
        self._sync_names(_norm(path))

    def _sync_names(self, d: str) -> None:
        """:meth:`fsync_dir` of normalised path ``d``."""
        self._touch(d)
        if d not in self._dirs:
            raise FileNotFoundError(d)
        kids = self._file_kids.get(d)
        if kids and self._durable_kids.get(d) == kids:
            # the same names are durable already: only the files behind them may differ
            durable, files = self._durable, self._files
            for q in kids:
                durable[q] = files[q]
            return
        for q in self._durable_kids.pop(d, ()):
            del self._durable[q]
        if kids:
            files = self._files
            for q in kids:
                self._durable[q] = files[q]
            self._durable_kids[d] = set(kids)

    def create_dir_with_files(self, path: PathLike, files: Iterable[tuple[str, int]]) -> None:
        """:meth:`Medium.create_dir_with_files`: one that does not exist yet made as
        :meth:`create_new_dir_with_files` makes it, anything else by the general sequence."""
        if not self.create_new_dir_with_files(path, files):
            self._touch(_norm(path))  # a pending directory there (or its parent) made first
            super().create_dir_with_files(path, files)  # the general sequence of calls

    def create_new_dir_with_files(self, path: PathLike, files: Iterable[tuple[str, int]]
                                  ) -> bool:
        """:meth:`Medium.create_new_dir_with_files`. A directory that does not exist yet costs
        its directory entry: its files are pending, made the first time anything looks inside
        (listdir, remove, rename, fsync_dir, write_atomic of a file it does not list or one
        opened, makedirs below it, files()); opening one of them makes that one alone
        (:meth:`_make_one`), reading one makes nothing (:meth:`read_bytes`). Until then
        ``exists`` answers from the list and ``durable_bytes`` is None (a created name is not
        durable), a power failure drops them (the same reason), ``rmtree`` drops them unmade.
        ``files`` is kept as given when it is a tuple (share one per shape)."""
        d = _norm(path)
        if self._exists_normalised(d):
            return False
        self._touch(d)  # d is a new name: a pending directory it is in is made first
        parent = _parent(d)
        files, valid = self._checked_file_list(files)
        if not valid or parent not in self._dirs:
            super().create_dir_with_files(path, files)  # the general sequence of calls
            return True
        self._dirs.add(d)
        kids = self._dir_kids.get(parent)
        if kids is None:
            self._dir_kids[parent] = {d}
        else:
            kids.add(d)
        if files:
            self._pending[d] = files
        return True

    def create_new_dirs_with_files(self, parent: PathLike, names: Iterable[str],
                                   files: tuple[tuple[str, int], ...]) -> list[bool]:
        """:meth:`Medium.create_new_dirs_with_files`. Under a made directory that is not
        pending, with a valid file list, each plain name (one path component) is made as
        :meth:`create_new_dir_with_files` makes it, the parent and the list checked once;
        anything else by :meth:`create_new_dir_with_files` itself."""
        p = _norm(parent)
        files, valid = self._checked_file_list(files)
        if not valid or p not in self._dirs or p in self._pending or p == ".":
            return super().create_new_dirs_with_files(parent, names, files)
        prefix = p if p[-1] == "/" else p + "/"
        made_files, dirs, pending = self._files, self._dirs, self._pending
        kids = self._dir_kids.get(p)
        if kids is None:
            kids = self._dir_kids[p] = set()
        made: list[bool] = []
        for name in names:
            d = prefix + name
            if d in dirs or d in made_files:
                made.append(False)
            elif not name or "/" in name or name == "." or name == "..":
                made.append(self.create_new_dir_with_files(d, files))
            else:
                dirs.add(d)
                kids.add(d)
                if files:
                    pending[d] = files
                made.append(True)
        return made

    def _checked_file_list(self, files: Iterable[tuple[str, int]]
                           ) -> tuple[tuple[tuple[str, int], ...], bool]:
        """``files`` as a tuple (kept as given when it is one: share one per shape), and
        whether a pending directory can hold it: distinct plain names (one path component
        each), no negative length. Remembered per list."""
        if files is self._last_valid_file_list:
            return files, True  # the shape of the last call (one shared tuple): not hashed
        try:
            valid = self._valid_file_lists.get(files)  # type: ignore[call-overload]
        except TypeError:  # not hashable as given
            valid = None
        if valid is None:
            files = tuple((name, length) for name, length in files)
            valid = self._valid_file_lists.get(files)
        if valid is None:
            names = set()
            for name, length in files:
                if not name or "/" in name or name == "." or name == ".." or length < 0:
                    break
                names.add(name)
            valid = len(names) == len(files)
            if len(self._valid_file_lists) >= 64:
                self._valid_file_lists.clear()
            self._valid_file_lists[files] = valid
        if valid:
            self._last_valid_file_list = files
        return files, valid  # type: ignore[return-value]

    def read_bytes(self, path: PathLike) -> bytes:
        """:meth:`Medium.read_bytes`; a made file named by its normalised path is read without
        a handle (the same bytes: its cached contents, a hole read as zeros), and a file of a
        pending directory without making the directory (a read changes nothing)."""
        inode = self._files.get(path) if type(path) is str else None  # type: ignore[arg-type]
        if inode is None:
            if self._pending and type(path) is str:
                inode = self._pending_inode(path)  # type: ignore[arg-type]
            if inode is None:
                return super().read_bytes(path)  # normalises, makes a pending directory, raises
            if type(inode) is int:
                return bytes(inode)  # a hole of that length
            if type(inode) is bytes:
                return inode  # what a write_atomic left (immutable: no copy)
        size = inode.size
        data = bytes(inode.buf[:size])
        if len(data) < size:  # the rest is a hole
            data += bytes(size - len(data))
        return data

    def _pending_inode(self, path: str) -> bytes | int | None:
        """For normalised ``path`` naming a file of a pending directory: the bytes a
        :meth:`write_atomic` left in it, else its listed length (a hole not made yet); None
        for any other path."""
        d, _, name = path.rpartition("/")
        files = self._pending.get(d)
        if files is None:
            return None
        written = self._pending_written.get(d)
        if written is not None:
            data = written.get(path)
            if data is not None:
                return data
        for listed, length in files:
            if listed == name:
                return length
        return None

    def untouched_files(self, path: PathLike, *, written: str | None = None
                        ) -> tuple[tuple[str, int], ...] | None:
        """:meth:`Medium.untouched_files`: the files of a directory still pending (made by
        :meth:`create_dir_with_files` when it did not exist, not materialised since), the
        writes it waits with being to file ``written`` alone."""
        if not self._pending:
            return None
        d = _norm(path)
        files = self._pending.get(d)
        if files is None:
            return None
        if d in self._pending_opened:
            return None
        waiting = self._pending_written.get(d)
        if waiting is not None and (written is None or len(waiting) != 1
                                    or d + "/" + written not in waiting):
            return None
        return files

    def write_atomic(self, path: PathLike, data: bytes) -> None:
        """:meth:`Medium.write_atomic` without the intermediate handle: the same end state
        (``path`` holds ``data``, flushed; the directory's names durable; no ``.tmp`` left)."""
        pending = self._pending
        if type(path) is str:
            parent, _, name = path.rpartition("/")
            if pending:
                files = pending.get(parent)
                if files is not None:
                    if files is self._replaceable_list:
                        replaceable = self._replaceable
                    else:
                        replaceable = self._replaceable_names(files)
                    if name in replaceable and not (self._pending_opened
                                                    and path in self._files):
                        # a file of a pending directory (its leader epoch checkpoint; the
                        # path is normalised: a pending directory's and a plain name from its
                        # list): the bytes written wait with the directory, which stays
                        # pending; making it makes their inode (flushed) and applies the
                        # write's directory sync
                        # (nothing can see the difference before: anything that looks inside
                        # makes it, a power failure and the durable-state queries too)
                        written = self._pending_written.get(parent)
                        if written is None:
                            written = self._pending_written[parent] = {}
                        written[path] = data if type(data) is bytes else bytes(data)
                        return
            if path and path[-1] != "/" and "/." not in path and "//" not in path \
                    and path[:2] != "./":
                p = path  # _norm(path), inlined: parent and name are p's
            else:
                p = _norm(path)
                parent, _, name = p.rpartition("/")
        else:
            p = _norm(path)
            parent, _, name = p.rpartition("/")
        if not parent:  # _parent(p)
            parent = "/" if p[:1] == "/" else "."
        if pending:
            files = pending.get(parent)
            if files is not None:
                if p not in pending and name in self._replaceable_names(files) \
                        and not (self._pending_opened and p in self._files):
                    # as above (the path normalised here)
                    written = self._pending_written.get(parent)
                    if written is None:
                        written = self._pending_written[parent] = {}
                    written[p] = data if type(data) is bytes else bytes(data)
                    return
                self._materialize(parent)  # _touch(p)
            if p in pending:
                self._materialize(p)
        table = self._files
        if (p + ".tmp") in table or p in self._dirs or parent not in self._dirs:
            super().write_atomic(path, data)
            return
        if p not in table:
            self._index_add(self._file_kids, p)
        table[p] = _flushed_inode(data)
        # _sync_names(parent), its _touch done above (a made directory is never inside a
        # pending one)
        kids = self._file_kids.get(parent)
        if kids and self._durable_kids.get(parent) == kids:
            durable = self._durable
            for q in kids:
                durable[q] = table[q]
            return
        self._sync_names(parent)

    # -- faults and inspection -------------------------------------------------------------
    def crash(self, kind: Literal["process", "power"] = "process", *,
              torn: TornWrite | None = None, rng: Any = None) -> list[TornFile]:
        """Simulate a crash: ``"process"`` loses nothing, ``"power"`` keeps only what was synced
        — and with ``torn``, some pages of each file's unflushed range (drawn from ``rng``, a
        ``numpy.random.Generator``; files in path order). Returns, for a power failure, every
        durably named file that held unflushed bytes (:class:`TornFile`)."""
        if kind not in ("process", "power"):
            raise ValueError(f"unknown crash kind {kind!r}")
        if torn is not None and not isinstance(torn, TornWrite):
            raise ValueError(f"torn must be a TornWrite, not {torn!r}")
        if torn is not None and (kind != "power" or rng is None):
            raise ValueError("a torn write needs a power failure and a generator")
        for ref in list(self._handles):
            h = ref()
            if h is not None:
                h.close()
        self._handles = set()
        self._drop_handle = self._handles.discard
        out: list[TornFile] = []
        if kind == "power":
            for d in list(self._pending_written):
                self._materialize(d)  # its names are durable: its files are on the disk
            self._pending.clear()  # names never made durable: gone
            self._pending_opened.clear()
            self._files = dict(self._durable)
            seen: set[int] = set()
            for path in sorted(self._files):
                inode = self._files[path]
                if id(inode) in seen:
                    continue
                seen.add(id(inode))
                dirty = tuple(inode.dirty_pages(PAGE_SIZE))
                if dirty:
                    kept: tuple[int, ...] = ()
                    if torn is TornWrite.SUBSET:
                        mask = rng.random(len(dirty)) < 0.5
                        kept = tuple(p for p, k in zip(dirty, mask, strict=True) if k)
                    elif torn is TornWrite.PREFIX:
                        kept = dirty[:int(rng.integers(0, len(dirty) + 1))]
                    if kept:
                        inode.persist_pages(kept, PAGE_SIZE)
                    out.append(TornFile(path, dirty, kept))
                inode.revert()
            self._reindex()
        self.crashes.append(kind)
        return out

    def flip_bit(self, path: PathLike, bit: int, *, cached: bool = False) -> None:
        """Invert bit ``bit`` (``bit // 8`` is the byte, ``bit % 8`` the bit, 0 the lowest) of
        the durable copy of ``path``; with ``cached`` the page cache's copy too (a file whose
        pages are not cached). ``FileNotFoundError`` if ``path`` has no durable name,
        ``ValueError`` if the bit is not within its durable length."""
        p = _norm(path)
        self._touch_written(p)
        inode = self._durable.get(p)
        if inode is None:
            raise FileNotFoundError(f"{p} has no durable name")
        pos = int(bit) // 8
        if bit < 0 or pos >= inode.durable_size:
            raise ValueError(f"bit {bit} is outside the {inode.durable_size} durable bytes of {p}")
        mask = 1 << (int(bit) % 8)
        d = inode.durable if inode.durable is not None else bytearray()
        if len(d) <= pos:
            d.extend(bytes(pos + 1 - len(d)))
        d[pos] ^= mask
        inode.durable = d
        if cached and pos < inode.size:
            inode.ensure(pos + 1)
            inode.buf[pos] ^= mask

    def durable_size(self, path: PathLike) -> int | None:
        """The durable length of ``path`` (None: it would not exist after a power failure)."""
        p = _norm(path)
        self._touch_written(p)
        inode = self._durable.get(p)
        return None if inode is None else inode.durable_size

    def durable_bytes(self, path: PathLike) -> bytes | None:
        """What ``path`` would hold after a power failure now (None: it would not exist)."""
        p = _norm(path)
        self._touch_written(p)
        inode = self._durable.get(p)
        if inode is None:
            return None
        if inode.durable is None:
            return b""
        return bytes(inode.durable) + bytes(inode.durable_size - len(inode.durable))

    def files(self) -> list[str]:
        """Every current file path, sorted (for tests and reports)."""
        for d in list(self._pending):
            self._materialize(d)
        return sorted(self._files)
