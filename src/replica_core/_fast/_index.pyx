# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Floor searches over Kafka index entries, straight from the big-endian file bytes (§1.5, §1.6).

Offset index entries are 8 bytes (int32 relative offset, int32 position), time index entries 12
bytes (int64 timestamp, int32 relative offset), both big-endian, read from the mmap (or
bytearray) that backs the index without copying. A searcher holds the buffer for its lifetime;
call ``release()`` before the file behind it is resized or closed.

Searches are two-level: each searcher caches the first key of every BLOCK entries (native
endian, built lazily as entries are appended, dropped past a truncation), finds the block with a
branchless binary search over those keys, then the slot with one inside the block (whose 512 or
768 bytes sit in one or two pages). This keeps a lookup in a 10 MiB index to a handful of cache
lines; Kafka's "warm section" (AbstractIndex) serves the same purpose for the page cache, and like
it changes no answer on a valid index. Batched lookups (GIL released) gallop forward when the
targets are non-decreasing (over the entries when targets are dense, else over the block keys),
and otherwise run GROUP searches in lock step so that their cache misses overlap; each answer's
entry is read while its cache line is still hot. The plain-Python
twin ``index_py.py`` makes the same comparisons, so the two agree on any bytes, sorted or not
(entries below ``entries`` are never rewritten in place, so the cached block keys stay exact).
"""
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from libc.stdint cimport int32_t, int64_t

import numpy as np

cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    #if defined(_MSC_VER)
    #include <stdlib.h>
    #define RC_BSWAP32 _byteswap_ulong
    #define RC_BSWAP64 _byteswap_uint64
    #else
    #define RC_BSWAP32 __builtin_bswap32
    #define RC_BSWAP64 __builtin_bswap64
    #endif
    static inline int64_t rc_be32(const unsigned char *p) {
        uint32_t v; memcpy(&v, p, 4); return (int64_t)(int32_t)RC_BSWAP32(v);
    }
    static inline int64_t rc_be64(const unsigned char *p) {
        uint64_t v; memcpy(&v, p, 8); return (int64_t)RC_BSWAP64(v);
    }
    """
    int64_t rc_be32(const unsigned char *p) nogil
    int64_t rc_be64(const unsigned char *p) nogil

OFFSET_ENTRY_SIZE = 8
TIME_ENTRY_SIZE = 12
cdef enum:
    GROUP = 32
    BLOCK = 64
    DENSE = 8  # ascending targets at least one per DENSE entries gallop over entries
BLOCK_ENTRIES = BLOCK
cdef int64_t INT32_MIN_ = -2147483648
cdef int64_t INT32_MAX_ = 2147483647
cdef int64_t INT64_MIN_ = -9223372036854775807 - 1

ctypedef fused key_t:
    int32_t
    int64_t


cdef inline int64_t _rel_target(int64_t target, int64_t base) noexcept nogil:
    """``target − base`` clamped into [INT32_MIN − 1, INT32_MAX] (same order against int32 keys)."""
    if target < base + INT32_MIN_:
        return INT32_MIN_ - 1
    if target - base > INT32_MAX_:
        return INT32_MAX_
    return target - base


cdef inline int64_t _key(key_t kind, const unsigned char *p) noexcept nogil:
    """The big-endian key at ``p``: int32 (offsets) or int64 (timestamps)."""
    if key_t is int32_t:
        return rc_be32(p)
    else:
        return rc_be64(p)


cdef inline Py_ssize_t _floor(key_t kind, const unsigned char *p, Py_ssize_t stride,
                              Py_ssize_t n, int64_t t) noexcept nogil:
    """Largest slot in [0, n) whose key (at ``p + slot*stride``) is <= t, else −1 (branchless)."""
    cdef Py_ssize_t b = 0, half
    if n == 0:
        return -1
    while n > 1:
        half = n >> 1
        b += half * (_key(kind, p + (b + half) * stride) <= t)
        n -= half
    return b + (_key(kind, p + b * stride) <= t) - 1


cdef inline Py_ssize_t _floor_heads(const int64_t *h, Py_ssize_t n, int64_t t) noexcept nogil:
    """Largest k < n with h[k] <= t, else −1 (branchless, native-endian keys)."""
    cdef Py_ssize_t b = 0, half
    if n == 0:
        return -1
    while n > 1:
        half = n >> 1
        b += half * (h[b + half] <= t)
        n -= half
    return b + (h[b] <= t) - 1


cdef inline Py_ssize_t _floor2(key_t kind, const unsigned char *p, Py_ssize_t stride,
                               Py_ssize_t n, const int64_t *heads, int64_t t) noexcept nogil:
    """``_floor`` in two levels: the block by its cached first key, then the slot inside it."""
    cdef Py_ssize_t blk, lo, cnt
    if n == 0:
        return -1
    blk = _floor_heads(heads, (n + BLOCK - 1) // BLOCK, t)
    if blk < 0:
        return -1
    lo = blk * BLOCK
    cnt = n - lo
    if cnt > BLOCK:
        cnt = BLOCK
    return lo + _floor(kind, p + lo * stride, stride, cnt, t)


cdef inline Py_ssize_t _lower(key_t kind, const unsigned char *p, Py_ssize_t stride,
                              Py_ssize_t n, int64_t t) noexcept nogil:
    """Smallest slot whose key is >= t, else −1."""
    cdef Py_ssize_t b = 0, half, m = n
    if n == 0:
        return -1
    while m > 1:
        half = m >> 1
        b += half * (_key(kind, p + (b + half) * stride) < t)
        m -= half
    b += (_key(kind, p + b * stride) < t)
    return -1 if b == n else b


cdef inline void _emit(key_t kind, const unsigned char *p, Py_ssize_t s, int64_t base,
                       int64_t *offsets, int64_t *values, Py_ssize_t i) noexcept nogil:
    """Write lookup answer ``i`` for slot ``s``: offset index → (offset, position), time
    index → (offset, timestamp); the fallbacks are (base, 0) and (base, −1)."""
    if key_t is int32_t:
        if s < 0:
            offsets[i] = base
            values[i] = 0
        else:
            offsets[i] = base + rc_be32(p + s * 8)
            values[i] = rc_be32(p + s * 8 + 4)
    else:
        if s < 0:
            offsets[i] = base
            values[i] = -1
        else:
            offsets[i] = base + rc_be32(p + s * 12 + 8)
            values[i] = rc_be64(p + s * 12)


cdef void _floor_many(key_t kind, const unsigned char *p, Py_ssize_t stride, Py_ssize_t n,
                      const int64_t *heads, const int64_t *targets, Py_ssize_t m, int64_t base,
                      int64_t *slots, int64_t *offsets, int64_t *values) noexcept nogil:
    """``_floor`` for each target (offset keys: ``_rel_target(target, base)``); fills ``slots``
    or, when ``offsets`` is not NULL, the lookup answers (see ``_emit``).

    Non-decreasing targets gallop forward from the previous answer (O(log gap) each): over the
    entries when there is at least one target per DENSE entries, else over the cached block keys
    and then inside the block. Any other order runs GROUP two-level searches (``_floor2``) in
    lock step so that their cache misses overlap.
    """
    cdef Py_ssize_t b[GROUP]
    cdef Py_ssize_t lo[GROUP]
    cdef int64_t tt[GROUP]
    cdef int64_t tb[GROUP]
    cdef Py_ssize_t g, j, cnt, length, half, i, prev, hi, step, a, e, mid, s
    cdef Py_ssize_t nh = (n + BLOCK - 1) // BLOCK
    cdef int64_t t
    cdef bint ascending = True
    for i in range(1, m):
        if targets[i] < targets[i - 1]:
            ascending = False
            break
    if n == 0:
        for i in range(m):
            if offsets != NULL:
                _emit(kind, p, -1, base, offsets, values, i)
            else:
                slots[i] = -1
        return
    if ascending and m * DENSE >= n:
        prev = -1  # dense targets: gallop over the entries themselves
        for i in range(m):
            if key_t is int32_t:
                t = _rel_target(targets[i], base)
            else:
                t = targets[i]
            step = 1
            hi = prev + 1
            while hi < n and _key(kind, p + hi * stride) <= t:
                prev = hi
                hi = prev + step
                step <<= 1
            a = prev + 1
            e = hi if hi < n else n
            while a < e:
                mid = (a + e) >> 1
                if _key(kind, p + mid * stride) <= t:
                    a = mid + 1
                else:
                    e = mid
            prev = a - 1
            if offsets != NULL:
                _emit(kind, p, prev, base, offsets, values, i)
            else:
                slots[i] = prev
        return
    if ascending:
        prev = 0  # gallop over the block keys, then search inside the block
        for i in range(m):
            if key_t is int32_t:
                t = _rel_target(targets[i], base)
            else:
                t = targets[i]
            if heads[prev] > t:
                s = -1
            else:
                step = 1
                hi = prev + 1
                while hi < nh and heads[hi] <= t:
                    prev = hi
                    hi = prev + step
                    step <<= 1
                a = prev + 1
                e = hi if hi < nh else nh
                while a < e:
                    mid = (a + e) >> 1
                    if heads[mid] <= t:
                        a = mid + 1
                    else:
                        e = mid
                prev = a - 1
                a = prev * BLOCK
                e = n - a if n - a < BLOCK else BLOCK
                s = a + _floor(kind, p + a * stride, stride, e, t)
            if offsets != NULL:
                _emit(kind, p, s, base, offsets, values, i)
            else:
                slots[i] = s
        return
    g = 0
    while g < m:
        cnt = m - g
        if cnt > GROUP:
            cnt = GROUP
        for j in range(cnt):
            if key_t is int32_t:
                tt[j] = _rel_target(targets[g + j], base)
            else:
                tt[j] = targets[g + j]
            b[j] = 0
        length = nh
        while length > 1:
            half = length >> 1
            for j in range(cnt):
                b[j] += half * (heads[b[j] + half] <= tt[j])
            length -= half
        for j in range(cnt):
            s = b[j] + (heads[b[j]] <= tt[j]) - 1  # block, or −1
            lo[j] = s * BLOCK
            if s >= 0 and n - lo[j] >= BLOCK:
                b[j] = lo[j]
                tb[j] = tt[j]
            else:  # no block, or the last partial one: searched alone below
                b[j] = 0
                tb[j] = INT64_MIN_
        if n >= BLOCK:
            length = BLOCK
            while length > 1:
                half = length >> 1
                for j in range(cnt):
                    b[j] += half * (_key(kind, p + (b[j] + half) * stride) <= tb[j])
                length -= half
        for j in range(cnt):
            if lo[j] < 0:
                s = -1
            elif n - lo[j] >= BLOCK:
                s = b[j] + (_key(kind, p + b[j] * stride) <= tt[j]) - 1
            else:
                s = lo[j] + _floor(kind, p + lo[j] * stride, stride, n - lo[j], tt[j])
            if offsets != NULL:
                _emit(kind, p, s, base, offsets, values, g + j)
            else:
                slots[g + j] = s
        g += cnt


cdef class _Searcher:
    cdef const unsigned char[::1] _buf
    cdef const unsigned char *_p
    cdef Py_ssize_t _entries
    cdef Py_ssize_t _capacity
    cdef int64_t _base
    cdef Py_ssize_t _esize
    cdef int64_t *_heads  # first key of each BLOCK entries, for blocks [0, _nheads)
    cdef Py_ssize_t _nheads
    cdef Py_ssize_t _heads_cap

    def __init__(self, buf, int64_t base_offset, Py_ssize_t entries=0):
        cdef const unsigned char[::1] view = memoryview(buf).cast("B")
        self._buf = view
        self._p = &view[0] if view.shape[0] > 0 else NULL
        self._capacity = view.shape[0] // self._esize
        self._base = base_offset
        self.entries = entries

    def __dealloc__(self):
        PyMem_Free(self._heads)

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
    def entries(self, Py_ssize_t n):
        if n < 0 or n > self._capacity:
            raise ValueError(f"{n} entries do not fit a buffer of {self._capacity} entries")
        self._entries = n
        # slots at or past ``n`` may be rewritten: forget the blocks that start there
        if self._nheads > (n + BLOCK - 1) // BLOCK:
            self._nheads = (n + BLOCK - 1) // BLOCK

    cdef int _sync(self) except -1:
        """Extend the cached block keys to cover every entry."""
        cdef Py_ssize_t need = (self._entries + BLOCK - 1) // BLOCK, k
        cdef int64_t *grown
        if self._nheads >= need:
            return 0
        if need > self._heads_cap:
            grown = <int64_t *> PyMem_Realloc(self._heads, max(need, 2 * self._heads_cap)
                                              * sizeof(int64_t))
            if grown == NULL:
                raise MemoryError()
            self._heads = grown
            self._heads_cap = max(need, 2 * self._heads_cap)
        for k in range(self._nheads, need):
            if self._esize == 8:
                self._heads[k] = rc_be32(self._p + k * BLOCK * 8)
            else:
                self._heads[k] = rc_be64(self._p + k * BLOCK * 12)
        self._nheads = need
        return 0

    def release(self) -> None:
        """Drop the buffer (so the mmap or bytearray behind it can be resized or closed)."""
        self._buf = None
        self._p = NULL
        self._entries = 0
        self._capacity = 0
        self._nheads = 0


cdef class OffsetSearcher(_Searcher):
    """Searches over offset-index entries (int32 relative offset, int32 position)."""

    def __cinit__(self, *args, **kwargs):
        self._esize = 8

    def lookup(self, int64_t target):
        """(offset, position) of the largest entry with offset <= target, else (base, 0)."""
        self._sync()
        cdef Py_ssize_t s = _floor2(<int32_t>0, self._p, 8, self._entries, self._heads,
                                    _rel_target(target, self._base))
        if s < 0:
            return (self._base, 0)
        return (self._base + rc_be32(self._p + s * 8), rc_be32(self._p + s * 8 + 4))

    def floor_slot(self, int64_t target) -> int:
        """Largest slot with offset <= target, −1 if none."""
        self._sync()
        return _floor2(<int32_t>0, self._p, 8, self._entries, self._heads,
                       _rel_target(target, self._base))

    def upper_slot_by_position(self, int64_t position) -> int:
        """Smallest slot with position >= ``position``, −1 if none."""
        return _lower(<int32_t>0, self._p + 4 if self._p != NULL else NULL, 8, self._entries,
                      position)

    def floor_slots(self, targets):
        """``floor_slot`` for every element of an int64 array (batched search)."""
        cdef const int64_t[::1] t = np.ascontiguousarray(targets, dtype=np.int64)
        cdef Py_ssize_t m = t.shape[0]
        out = np.empty(m, dtype=np.int64)
        cdef int64_t[::1] o = out
        self._sync()
        if m:
            with nogil:
                _floor_many(<int32_t>0, self._p, 8, self._entries, self._heads, &t[0], m,
                            self._base, &o[0], NULL, NULL)
        return out

    def lookup_many(self, targets):
        """``lookup`` for every element: (offsets, positions) as int64 arrays."""
        cdef const int64_t[::1] t = np.ascontiguousarray(targets, dtype=np.int64)
        cdef Py_ssize_t m = t.shape[0]
        out = np.empty((2, m), dtype=np.int64)
        offsets, positions = out[0], out[1]
        cdef int64_t[::1] off = offsets
        cdef int64_t[::1] pos = positions
        self._sync()
        if m:
            with nogil:
                _floor_many(<int32_t>0, self._p, 8, self._entries, self._heads, &t[0], m,
                            self._base, NULL, &off[0], &pos[0])
        return offsets, positions


cdef class TimeSearcher(_Searcher):
    """Searches over time-index entries (int64 timestamp, int32 relative offset)."""

    def __cinit__(self, *args, **kwargs):
        self._esize = 12

    def lookup(self, int64_t target):
        """(timestamp, offset) of the largest entry with timestamp <= target, else (−1, base)."""
        self._sync()
        cdef Py_ssize_t s = _floor2(<int64_t>0, self._p, 12, self._entries, self._heads, target)
        if s < 0:
            return (-1, self._base)
        return (rc_be64(self._p + s * 12), self._base + rc_be32(self._p + s * 12 + 8))

    def floor_slot(self, int64_t target) -> int:
        """Largest slot with timestamp <= target, −1 if none."""
        self._sync()
        return _floor2(<int64_t>0, self._p, 12, self._entries, self._heads, target)

    def floor_slot_by_offset(self, int64_t target) -> int:
        """Largest slot with offset <= target, −1 if none (searches the offset column)."""
        return _floor(<int32_t>0, self._p + 8 if self._p != NULL else NULL, 12, self._entries,
                      _rel_target(target, self._base))

    def floor_slots(self, targets):
        """``floor_slot`` for every element of an int64 array (batched search)."""
        cdef const int64_t[::1] t = np.ascontiguousarray(targets, dtype=np.int64)
        cdef Py_ssize_t m = t.shape[0]
        out = np.empty(m, dtype=np.int64)
        cdef int64_t[::1] o = out
        self._sync()
        if m:
            with nogil:
                _floor_many(<int64_t>0, self._p, 12, self._entries, self._heads, &t[0], m, 0,
                            &o[0], NULL, NULL)
        return out

    def lookup_many(self, targets):
        """``lookup`` for every element: (offsets, timestamps) as int64 arrays."""
        cdef const int64_t[::1] t = np.ascontiguousarray(targets, dtype=np.int64)
        cdef Py_ssize_t m = t.shape[0]
        out = np.empty((2, m), dtype=np.int64)
        offsets, timestamps = out[0], out[1]
        cdef int64_t[::1] off = offsets
        cdef int64_t[::1] ts = timestamps
        self._sync()
        if m:
            with nogil:
                _floor_many(<int64_t>0, self._p, 12, self._entries, self._heads, &t[0], m,
                            self._base, NULL, &off[0], &ts[0])
        return offsets, timestamps
