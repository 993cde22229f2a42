"""Plain-Python twin of ``_index.pyx``: floor searches over big-endian Kafka index entries.

Offset index entry: ``>ii`` (relative offset, position); time index entry: ``>qi`` (timestamp,
relative offset) (KAFKA_SEMANTICS §1.5, §1.6). The searches are the same comparisons in the same
order as the native kernel (a two-level branchless binary search: block of 64 entries by its first
key, then the slot; non-decreasing batches gallop, over the entries when dense, else over the
block keys), so both give identical answers on any bytes, sorted or not.
"""
from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import numpy as np

OFFSET_ENTRY_SIZE = 8
TIME_ENTRY_SIZE = 12
BLOCK_ENTRIES = BLOCK = 64  # entries per block of the two-level search
DENSE = 8  # ascending targets at least one per DENSE entries gallop over entries

_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1
_I32 = struct.Struct(">i").unpack_from
_I64 = struct.Struct(">q").unpack_from

Key = Callable[[int], int]


def _rel_target(target: int, base: int) -> int:
    """``target − base`` clamped into [INT32_MIN − 1, INT32_MAX] (same order against int32 keys)."""
    if target < base + _INT32_MIN:
        return _INT32_MIN - 1
    if target - base > _INT32_MAX:
        return _INT32_MAX
    return target - base


def _floor(key: Key, n: int, t: int) -> int:
    """Largest slot with key <= t, else −1 (the kernel's branchless binary search)."""
    if n == 0:
        return -1
    b = 0
    while n > 1:
        half = n >> 1
        if key(b + half) <= t:
            b += half
        n -= half
    return b + (1 if key(b) <= t else 0) - 1


def _floor2(key: Key, n: int, t: int) -> int:
    """``_floor`` in two levels: the block of BLOCK entries by its first key, then the slot in
    it (the native kernel caches the block keys; the answers are the same)."""
    if n == 0:
        return -1
    blk = _floor(lambda k: key(k * BLOCK), (n + BLOCK - 1) // BLOCK, t)
    if blk < 0:
        return -1
    lo = blk * BLOCK
    return lo + _floor(lambda i: key(lo + i), min(BLOCK, n - lo), t)


def _lower(key: Key, n: int, t: int) -> int:
    """Smallest slot with key >= t, else −1."""
    if n == 0:
        return -1
    b = 0
    m = n
    while m > 1:
        half = m >> 1
        if key(b + half) < t:
            b += half
        m -= half
    if key(b) < t:
        b += 1
    return -1 if b == n else b


def _floor_many(key: Key, n: int, targets: np.ndarray, rel: Callable[[int], int]) -> np.ndarray:
    m = len(targets)
    out = np.empty(m, dtype=np.int64)
    ts = [int(x) for x in targets]
    if n == 0:
        out[:] = -1
        return out
    ascending = all(ts[i] >= ts[i - 1] for i in range(1, m))
    if ascending and m * DENSE >= n:
        lo = -1
        for i, raw in enumerate(ts):
            t = rel(raw)
            step = 1
            hi = lo + 1
            while hi < n and key(hi) <= t:
                lo = hi
                hi = lo + step
                step <<= 1
            a, e = lo + 1, min(hi, n)
            while a < e:
                mid = (a + e) >> 1
                if key(mid) <= t:
                    a = mid + 1
                else:
                    e = mid
            lo = a - 1
            out[i] = lo
        return out
    if ascending:
        nh = (n + BLOCK - 1) // BLOCK
        head = lambda k: key(k * BLOCK)  # noqa: E731
        prev = 0
        for i, raw in enumerate(ts):
            t = rel(raw)
            if head(prev) > t:
                out[i] = -1
                continue
            step = 1
            hi = prev + 1
            while hi < nh and head(hi) <= t:
                prev = hi
                hi = prev + step
                step <<= 1
            a, e = prev + 1, min(hi, nh)
            while a < e:
                mid = (a + e) >> 1
                if head(mid) <= t:
                    a = mid + 1
                else:
                    e = mid
            prev = a - 1
            lo = prev * BLOCK
            out[i] = lo + _floor(lambda j, lo=lo: key(lo + j), min(BLOCK, n - lo), t)
        return out
    for i, raw in enumerate(ts):
        out[i] = _floor2(key, n, rel(raw))
    return out


def _int64_array(targets: Any) -> np.ndarray:
    return np.ascontiguousarray(targets, dtype=np.int64)


class _Searcher:
    _esize = 0

    def __init__(self, buf: Any, base_offset: int, entries: int = 0):
        self._buf: memoryview | None = memoryview(buf).cast("B")
        self._capacity = len(self._buf) // self._esize
        self._base = int(base_offset)
        self._entries = 0
        self.entries = entries

    @property
    def base_offset(self) -> int:
        return self._base

    @property
    def capacity(self) -> int:
        """Entries the held buffer has room for."""
        return self._capacity

    @property
    def entries(self) -> int:
        return self._entries

    @entries.setter
    def entries(self, n: int) -> None:
        if n < 0 or n > self._capacity:
            raise ValueError(f"{n} entries do not fit a buffer of {self._capacity} entries")
        self._entries = int(n)

    def release(self) -> None:
        """Drop the buffer (so the mmap or bytearray behind it can be resized or closed)."""
        if self._buf is not None:
            self._buf.release()
        self._buf = None
        self._entries = 0
        self._capacity = 0

    def _i32(self, pos: int) -> int:
        assert self._buf is not None
        return _I32(self._buf, pos)[0]

    def _i64(self, pos: int) -> int:
        assert self._buf is not None
        return _I64(self._buf, pos)[0]


class OffsetSearcher(_Searcher):
    """Searches over offset-index entries (int32 relative offset, int32 position)."""

    _esize = OFFSET_ENTRY_SIZE

    def _off(self, i: int) -> int:
        return self._i32(i * 8)

    def lookup(self, target: int) -> tuple[int, int]:
        """(offset, position) of the largest entry with offset <= target, else (base, 0)."""
        s = _floor2(self._off, self._entries, _rel_target(target, self._base))
        if s < 0:
            return (self._base, 0)
        return (self._base + self._i32(s * 8), self._i32(s * 8 + 4))

    def floor_slot(self, target: int) -> int:
        """Largest slot with offset <= target, −1 if none."""
        return _floor2(self._off, self._entries, _rel_target(target, self._base))

    def upper_slot_by_position(self, position: int) -> int:
        """Smallest slot with position >= ``position``, −1 if none."""
        return _lower(lambda i: self._i32(i * 8 + 4), self._entries, position)

    def floor_slots(self, targets: Any) -> np.ndarray:
        """``floor_slot`` for every element of an int64 array."""
        base = self._base
        return _floor_many(self._off, self._entries, _int64_array(targets),
                           lambda t: _rel_target(t, base))

    def lookup_many(self, targets: Any) -> tuple[np.ndarray, np.ndarray]:
        """``lookup`` for every element: (offsets, positions) as int64 arrays."""
        slots = self.floor_slots(targets)
        offsets = np.empty(len(slots), dtype=np.int64)
        positions = np.empty(len(slots), dtype=np.int64)
        for i, s in enumerate(slots.tolist()):
            if s < 0:
                offsets[i], positions[i] = self._base, 0
            else:
                offsets[i] = self._base + self._i32(s * 8)
                positions[i] = self._i32(s * 8 + 4)
        return offsets, positions


class TimeSearcher(_Searcher):
    """Searches over time-index entries (int64 timestamp, int32 relative offset)."""

    _esize = TIME_ENTRY_SIZE

    def _ts(self, i: int) -> int:
        return self._i64(i * 12)

    def lookup(self, target: int) -> tuple[int, int]:
        """(timestamp, offset) of the largest entry with timestamp <= target, else (−1, base)."""
        s = _floor2(self._ts, self._entries, target)
        if s < 0:
            return (-1, self._base)
        return (self._i64(s * 12), self._base + self._i32(s * 12 + 8))

    def floor_slot(self, target: int) -> int:
        """Largest slot with timestamp <= target, −1 if none."""
        return _floor2(self._ts, self._entries, target)

    def floor_slot_by_offset(self, target: int) -> int:
        """Largest slot with offset <= target, −1 if none (searches the offset column)."""
        return _floor(lambda i: self._i32(i * 12 + 8), self._entries,
                      _rel_target(target, self._base))

    def floor_slots(self, targets: Any) -> np.ndarray:
        """``floor_slot`` for every element of an int64 array."""
        return _floor_many(self._ts, self._entries, _int64_array(targets), lambda t: t)

    def lookup_many(self, targets: Any) -> tuple[np.ndarray, np.ndarray]:
        """``lookup`` for every element: (offsets, timestamps) as int64 arrays."""
        slots = self.floor_slots(targets)
        offsets = np.empty(len(slots), dtype=np.int64)
        timestamps = np.empty(len(slots), dtype=np.int64)
        for i, s in enumerate(slots.tolist()):
            if s < 0:
                offsets[i], timestamps[i] = self._base, -1
            else:
                offsets[i] = self._base + self._i32(s * 12 + 8)
                timestamps[i] = self._i64(s * 12)
        return offsets, timestamps
