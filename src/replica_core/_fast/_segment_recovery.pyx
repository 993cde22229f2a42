# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""What recovering one segment derives from its batch headers, in one pass (KAFKA_SEMANTICS
§5.4, Kafka's ``LogSegment.recover``).

Twin: ``segment_recovery_py.py`` (same functions, same results; the docstrings there state the
rules). ``h`` is an int64 C-contiguous ``(n, NCOLS)`` array of batch headers in file order
(``records.batch.scan`` layout). Offsets wrap in two's complement like the int64 arithmetic of
the twin.
"""
cimport numpy as cnp
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t

from replica_core.records.batch import kernels as _layout

cnp.import_array()

cdef Py_ssize_t C_NCOLS = _layout.NCOLS
cdef Py_ssize_t C_POS = _layout.COL_POSITION
cdef Py_ssize_t C_BASE = _layout.COL_BASE_OFFSET
cdef Py_ssize_t C_DELTA = _layout.COL_LAST_OFFSET_DELTA
cdef Py_ssize_t C_EPOCH = _layout.COL_PARTITION_LEADER_EPOCH
cdef Py_ssize_t C_MAGIC = _layout.COL_MAGIC
cdef Py_ssize_t C_MAX_TS = _layout.COL_MAX_TIMESTAMP
cdef Py_ssize_t C_CRC_OK = _layout.COL_CRC_OK

CUT_NONE, CUT_CRC, CUT_OFFSETS = 0, 1, 2
NO_TIMESTAMP = -1
cdef int64_t C_NO_TIMESTAMP = -1
cdef int64_t C_INT32_MAX = 2147483647


cdef const int64_t* _rows(object h, Py_ssize_t *n) except NULL:
    if (not isinstance(h, cnp.ndarray) or cnp.PyArray_TYPE(h) != cnp.NPY_INT64
            or cnp.PyArray_NDIM(h) != 2 or cnp.PyArray_DIM(h, 1) != C_NCOLS
            or not cnp.PyArray_IS_C_CONTIGUOUS(h)):
        raise ValueError(f"headers must be a C-contiguous int64 (n, {C_NCOLS}) array")
    n[0] = cnp.PyArray_DIM(h, 0)
    return <const int64_t*>cnp.PyArray_DATA(<cnp.ndarray>h)


cdef inline int64_t _wrap_add(int64_t a, int64_t b) noexcept nogil:
    return <int64_t>(<uint64_t>a + <uint64_t>b)


cdef inline int64_t _wrap_sub(int64_t a, int64_t b) noexcept nogil:
    return <int64_t>(<uint64_t>a - <uint64_t>b)


cdef inline int64_t _last(const int64_t *row) noexcept nogil:
    if row[C_MAGIC] >= 2:
        return _wrap_add(row[C_BASE], row[C_DELTA])
    return row[C_BASE]


cdef inline void _put32(char *p, int64_t v) noexcept nogil:
    cdef uint32_t u = <uint32_t>(<int32_t>v)  # numpy's cast to >i4 keeps the low 32 bits
    p[0] = <char>(u >> 24)
    p[1] = <char>(u >> 16)
    p[2] = <char>(u >> 8)
    p[3] = <char>u


cdef inline void _put64(char *p, int64_t v) noexcept nogil:
    cdef uint64_t u = <uint64_t>v
    cdef int k
    for k in range(8):
        p[k] = <char>(u >> (56 - 8 * k))


cdef inline int64_t prev_ts_of(const char *tp, Py_ssize_t t) noexcept nogil:
    """The timestamp of time entry ``t − 1`` written at ``tp``."""
    cdef const unsigned char *q = <const unsigned char *>(tp + 12 * (t - 1))
    cdef uint64_t u = 0
    cdef int k
    for k in range(8):
        u = (u << 8) | q[k]
    return <int64_t>u


def recovery_plan(h, int64_t base_offset, int64_t index_interval, int64_t max_index_size):
    cdef Py_ssize_t n, i, cut, rows_n, max_off, max_time, t
    cdef const int64_t *p = _rows(h, &n)
    cdef const int64_t *row
    cdef int64_t last, prev_last = 0, rel, top_ts = C_NO_TIMESTAMP, top_off = base_offset
    cdef int64_t last_entry = 0, entry_ts, prev_entry_ts = C_NO_TIMESTAMP
    cdef int why = 0
    if index_interval < 0 or max_index_size < 0:
        raise ValueError("index_interval and max_index_size must be >= 0")
    cut = n
    for i in range(n):
        if p[i * C_NCOLS + C_CRC_OK] != 1:
            cut = i
            why = 1
            break
    for i in range(cut):
        row = p + i * C_NCOLS
        last = _last(row)
        rel = _wrap_sub(last, base_offset)
        if (i > 0 and row[C_BASE] <= prev_last) or last < row[C_BASE] or rel < 0 \
                or rel > C_INT32_MAX:
            cut = i
            why = 2
            break
        prev_last = last
    max_off = max_index_size // 8
    max_time = max_index_size // 12
    # first pass: how many index entries (to size the byte strings)
    rows_n = 0
    for i in range(cut):
        if p[i * C_NCOLS + C_POS] - last_entry > index_interval:
            rows_n += 1
            last_entry = p[i * C_NCOLS + C_POS]
    if rows_n > max_off:
        rows_n = max_off
    offsets = PyBytes_FromStringAndSize(NULL, rows_n * 8)
    times_buf = PyBytes_FromStringAndSize(NULL, (rows_n + 1) * 12)
    cdef char *op = PyBytes_AS_STRING(offsets)
    cdef char *tp = PyBytes_AS_STRING(times_buf)
    cdef Py_ssize_t o = 0
    cdef Py_ssize_t time_cap = max_time - 1 if max_time > 1 else 0
    t = 0
    last_entry = 0
    for i in range(cut):
        row = p + i * C_NCOLS
        last = _last(row)
        if row[C_MAX_TS] > top_ts:
            top_ts = row[C_MAX_TS]
            top_off = last
        if o < rows_n and row[C_POS] - last_entry > index_interval:
            last_entry = row[C_POS]
            _put32(op + 8 * o, _wrap_sub(last, base_offset))
            _put32(op + 8 * o + 4, row[C_POS])
            o += 1
            entry_ts = top_ts
            if entry_ts > prev_entry_ts and t < time_cap:
                _put64(tp + 12 * t, entry_ts)
                _put32(tp + 12 * t + 8, _wrap_sub(top_off, base_offset))
                t += 1
            prev_entry_ts = entry_ts
    if cut and t < max_time and top_ts > (prev_ts_of(tp, t) if t else C_NO_TIMESTAMP):
        _put64(tp + 12 * t, top_ts)
        _put32(tp + 12 * t + 8, _wrap_sub(top_off, base_offset))
        t += 1
    times = times_buf[: 12 * t]
    last = _last(p + (cut - 1) * C_NCOLS) if cut else base_offset - 1
    return int(cut), why, offsets, times, top_ts, top_off, last




def new_epochs(h, Py_ssize_t n, int64_t latest_epoch):
    cdef Py_ssize_t total, i
    cdef const int64_t *p = _rows(h, &total)
    cdef const int64_t *row
    cdef int64_t current = latest_epoch, epoch
    if n < 0:
        raise ValueError("n must be >= 0")
    if n > total:
        n = total
    out = []
    for i in range(n):
        row = p + i * C_NCOLS
        if row[C_MAGIC] < 2:
            continue
        epoch = row[C_EPOCH]
        if epoch > current:
            if epoch >= 0:
                out.append((epoch, row[C_BASE]))
            current = epoch
    return out
