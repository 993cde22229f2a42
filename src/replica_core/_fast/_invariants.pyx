# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Invariant-checker kernels over the header rows of a log's batches (``sim/invariants.py``).

Twin: ``invariants_py.py`` (same functions, same results). ``h`` is an int64 C-contiguous
``(n, NCOLS)`` array in the batch kernels' column layout (``records.batch.scan`` headers, or
several of them stacked), one row per batch in log order. A batch's last offset is base offset
+ last offset delta, wrapping in two's complement like the numpy expression it replaces.
"""
cimport numpy as cnp
from libc.stdint cimport INT64_MIN, int64_t, uint64_t

from replica_core.records.batch import kernels as _layout

cnp.import_array()

cdef Py_ssize_t C_NCOLS = _layout.NCOLS
cdef Py_ssize_t C_BASE = _layout.COL_BASE_OFFSET
cdef Py_ssize_t C_DELTA = _layout.COL_LAST_OFFSET_DELTA
cdef Py_ssize_t C_CRC = _layout.COL_CRC
cdef Py_ssize_t C_CRC_OK = _layout.COL_CRC_OK

cdef enum:
    C_OUT_OF_ORDER = -2
    C_NONE = -1
    C_DIVERGED = -3

OUT_OF_ORDER = C_OUT_OF_ORDER
NONE = C_NONE
DIVERGED = C_DIVERGED


cdef const int64_t* _rows(cnp.ndarray h, Py_ssize_t *n) except NULL:
    if (cnp.PyArray_TYPE(h) != cnp.NPY_INT64 or cnp.PyArray_NDIM(h) != 2
            or cnp.PyArray_DIM(h, 1) != C_NCOLS or not cnp.PyArray_IS_C_CONTIGUOUS(h)):
        raise ValueError(f"headers must be a C-contiguous int64 (n, {C_NCOLS}) array")
    n[0] = cnp.PyArray_DIM(h, 0)
    return <const int64_t*>cnp.PyArray_DATA(h)


cdef inline int64_t _last(const int64_t *row) noexcept nogil:
    return <int64_t>(<uint64_t>row[C_BASE] + <uint64_t>row[C_DELTA])


cdef Py_ssize_t _check(const int64_t *p, Py_ssize_t n, int64_t limit) noexcept nogil:
    cdef Py_ssize_t i
    cdef const int64_t *row
    cdef Py_ssize_t bad = C_NONE
    cdef int64_t last, prev = 0
    for i in range(n):
        row = p + i * C_NCOLS
        last = _last(row)
        if i and row[C_BASE] <= prev:
            return C_OUT_OF_ORDER
        if bad == C_NONE and last < limit and row[C_CRC_OK] != 1:
            bad = i
        prev = last
    return bad


cdef bint _agree(const int64_t *pa, Py_ssize_t na, const int64_t *pb, Py_ssize_t nb,
                 int64_t limit, int64_t start) noexcept nogil:
    cdef Py_ssize_t i = 0, j = 0
    cdef const int64_t *ra
    cdef const int64_t *rb
    while True:
        while i < na and (_last(pa + i * C_NCOLS) >= limit or pa[i * C_NCOLS + C_BASE] < start):
            i += 1
        while j < nb and (_last(pb + j * C_NCOLS) >= limit or pb[j * C_NCOLS + C_BASE] < start):
            j += 1
        if i == na or j == nb:
            break
        ra = pa + i * C_NCOLS
        rb = pb + j * C_NCOLS
        # same base offset: same last offset exactly when the same delta
        if ra[C_BASE] != rb[C_BASE] or ra[C_DELTA] != rb[C_DELTA] or ra[C_CRC] != rb[C_CRC]:
            return False
        i += 1
        j += 1
    return i == na and j == nb


def check_rows(cnp.ndarray h not None, int64_t limit):
    """``OUT_OF_ORDER`` if some batch's base offset is not above the previous batch's last
    offset; else the index of the first batch whose last offset is below ``limit`` and whose
    CRC is not valid (CRC-ok column not 1); else ``NONE``."""
    cdef Py_ssize_t n = 0
    cdef const int64_t *p = _rows(h, &n)
    return _check(p, n, limit)


def agree_below(cnp.ndarray a not None, cnp.ndarray b not None, int64_t limit,
                int64_t start=INT64_MIN):
    """Whether the batches of ``a`` and of ``b`` whose last offset is below ``limit`` (and
    whose base offset is at least ``start``) form the same sequence of (base offset, last
    offset, stored CRC)."""
    cdef Py_ssize_t na = 0, nb = 0
    cdef const int64_t *pa = _rows(a, &na)
    cdef const int64_t *pb = _rows(b, &nb)
    return _agree(pa, na, pb, nb, limit, start)


def check_follower(cnp.ndarray a not None, cnp.ndarray b not None, int64_t limit):
    """An ISR follower's batches ``b`` against the leader's ``a`` below ``limit``, in one call:
    ``check_rows(b, limit)`` when that finds something; else ``NONE`` when ``agree_below(a,
    b, limit, start)`` — ``start`` the later of the two first base offsets, the lowest int64
    when either is empty (what both replicas still hold) — and ``DIVERGED`` when not."""
    cdef Py_ssize_t na = 0, nb = 0
    cdef const int64_t *pa = _rows(a, &na)
    cdef const int64_t *pb = _rows(b, &nb)
    cdef Py_ssize_t found = _check(pb, nb, limit)
    cdef int64_t start = INT64_MIN
    if found != C_NONE:
        return found
    if na and nb:
        start = pa[C_BASE] if pa[C_BASE] >= pb[C_BASE] else pb[C_BASE]
    return C_NONE if _agree(pa, na, pb, nb, limit, start) else C_DIVERGED
