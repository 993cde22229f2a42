"""Plain-Python twin of ``_invariants.pyx``: the invariant checker's row kernels as plain loops.

Same functions, same results. ``h`` is an int64 C-contiguous ``(n, NCOLS)`` array of batch
header rows (``records.batch.scan`` layout) in log order; a batch's last offset is base offset
+ last offset delta, wrapping in two's complement like int64 arithmetic.
"""
from __future__ import annotations

from typing import Any

from replica_core.records.batch import kernels as _layout

NCOLS = _layout.NCOLS
_BASE = _layout.COL_BASE_OFFSET
_DELTA = _layout.COL_LAST_OFFSET_DELTA
_CRC = _layout.COL_CRC
_CRC_OK = _layout.COL_CRC_OK

OUT_OF_ORDER = -2
NONE = -1
DIVERGED = -3


def _rows(h: Any) -> list[list[int]]:
    if (str(h.dtype) != "int64" or h.ndim != 2 or h.shape[1] != NCOLS
            or not h.flags.c_contiguous):
        raise ValueError(f"headers must be a C-contiguous int64 (n, {NCOLS}) array")
    return h.tolist()


def _last(row: list[int]) -> int:
    """base + delta as int64 arithmetic (two's complement wrap)."""
    return (row[_BASE] + row[_DELTA] + 2**63) % 2**64 - 2**63


def check_rows(h: Any, limit: int) -> int:
    """``OUT_OF_ORDER`` if some batch's base offset is not above the previous batch's last
    offset; else the index of the first batch whose last offset is below ``limit`` and whose
    CRC is not valid (CRC-ok column not 1); else ``NONE``."""
    rows = _rows(h)
    for i in range(1, len(rows)):
        if rows[i][_BASE] <= _last(rows[i - 1]):
            return OUT_OF_ORDER
    for i, row in enumerate(rows):
        if _last(row) < limit and row[_CRC_OK] != 1:
            return i
    return NONE


def agree_below(a: Any, b: Any, limit: int, start: int = -(2**63)) -> bool:
    """Whether the batches of ``a`` and of ``b`` whose last offset is below ``limit`` (and
    whose base offset is at least ``start``) form the same sequence of (base offset, last
    offset, stored CRC)."""
    def below(h: Any) -> list[tuple[int, int, int]]:
        return [(r[_BASE], _last(r), r[_CRC]) for r in _rows(h)
                if _last(r) < limit and r[_BASE] >= start]
    return below(a) == below(b)


def check_follower(a: Any, b: Any, limit: int) -> int:
    """An ISR follower's batches ``b`` against the leader's ``a`` below ``limit``, in one call:
    ``check_rows(b, limit)`` when that finds something; else ``NONE`` when ``agree_below(a,
    b, limit, start)`` — ``start`` the later of the two first base offsets, the lowest int64
    when either is empty (what both replicas still hold) — and ``DIVERGED`` when not."""
    rows_a = _rows(a)
    found = check_rows(b, limit)
    if found != NONE:
        return found
    rows_b = _rows(b)
    start = -(2**63)
    if rows_a and rows_b:
        start = max(rows_a[0][_BASE], rows_b[0][_BASE])
    return NONE if agree_below(a, b, limit, start) else DIVERGED
