"""Plain twin of ``_segment_recovery.pyx``: what recovering one segment derives from its batch
headers, with numpy (KAFKA_SEMANTICS §5.4, Kafka's ``LogSegment.recover``).

Same functions, same results. ``h`` is an int64 C-contiguous ``(n, NCOLS)`` array of the
segment's batch headers in file order (``records.batch.scan`` layout); a batch's last offset is
base offset + last offset delta for v2 and the entry's own offset for legacy batches, wrapping in
two's complement like int64 arithmetic.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from replica_core.records.batch import kernels as _layout

NCOLS = _layout.NCOLS
_POS = _layout.COL_POSITION
_BASE = _layout.COL_BASE_OFFSET
_DELTA = _layout.COL_LAST_OFFSET_DELTA
_EPOCH = _layout.COL_PARTITION_LEADER_EPOCH
_MAGIC = _layout.COL_MAGIC
_MAX_TS = _layout.COL_MAX_TIMESTAMP
_CRC_OK = _layout.COL_CRC_OK

CUT_NONE, CUT_CRC, CUT_OFFSETS = 0, 1, 2
"""Why :func:`recovery_plan` cut the batches: not at all, a batch failing its CRC, or offsets
that go backwards or leave the segment's 32-bit relative range."""

NO_TIMESTAMP = -1
_INT32_MAX = 2**31 - 1
_OFFSET_ENTRY = np.dtype([("rel", ">i4"), ("pos", ">i4")])  # .index entry (§1.5)
_TIME_ENTRY = np.dtype([("ts", ">i8"), ("rel", ">i4")])  # .timeindex entry (§1.6)


def _check(h: Any) -> None:
    if (not isinstance(h, np.ndarray) or h.dtype != np.int64 or h.ndim != 2
            or h.shape[1] != NCOLS or not h.flags.c_contiguous):
        raise ValueError(f"headers must be a C-contiguous int64 (n, {NCOLS}) array")


def _last_offsets(h: np.ndarray) -> np.ndarray:
    return h[:, _BASE] + np.where(h[:, _MAGIC] >= 2, h[:, _DELTA], 0)


def _sparse_rows(positions: np.ndarray, interval: int) -> list[int]:
    """Rows that get an offset-index entry: a batch at position p does iff p − (position of the
    last entry, 0 at first) > ``interval`` (Kafka's ``indexIntervalBytes`` rule, §5.4)."""
    steps = np.searchsorted(positions, positions + interval, side="right").tolist()
    rows = []
    i = int(np.searchsorted(positions, interval, side="right"))
    while i < len(positions):
        rows.append(i)
        i = steps[i]
    return rows


def recovery_plan(h: Any, base_offset: int, index_interval: int,
                  max_index_size: int) -> tuple[int, int, bytes, bytes, int, int, int]:
    """What recovery keeps of a segment with base offset ``base_offset`` whose batches are ``h``.

    Returns ``(cut, why, offset_index, time_index, max_timestamp, max_timestamp_offset,
    last_offset)``: the batches before row ``cut`` are kept — the first batch failing its CRC
    (``why`` = :data:`CUT_CRC`), else the first whose base offset is not above the previous
    last offset, whose last offset is below its base or outside [base_offset, base_offset +
    2³¹ − 1] (:data:`CUT_OFFSETS`), is cut with everything after it. The index files' bytes are
    the entries Kafka's loop of ``offsetIndex.append`` / ``timeIndex.maybeAppend`` leaves for the
    kept batches, capped at ``max_index_size`` bytes each, the time index ending with the largest
    timestamp. ``max_timestamp`` / ``max_timestamp_offset`` are the segment's largest timestamp
    (``maxTimestampSoFar``, updated only when strictly greater) and the last offset of its batch
    (−1 / ``base_offset`` when nothing is kept); ``last_offset`` is the last kept batch's last
    offset (``base_offset`` − 1 when nothing is kept).
    """
    _check(h)
    if index_interval < 0 or max_index_size < 0:
        raise ValueError("index_interval and max_index_size must be >= 0")
    n = len(h)
    last = _last_offsets(h)
    bad = np.flatnonzero(h[:, _CRC_OK] != 1)
    cut = int(bad[0]) if bad.size else n
    why = CUT_CRC if cut < n else CUT_NONE
    if n:
        base = h[:, _BASE]
        order_bad = np.zeros(n, dtype=bool)
        order_bad[1:] = base[1:] <= last[:-1]
        order_bad |= last < base
        rel = last - base_offset
        order_bad |= (rel < 0) | (rel > _INT32_MAX)
        rows = np.flatnonzero(order_bad[:cut])
        if rows.size:
            cut = int(rows[0])
            why = CUT_OFFSETS
    h, last = h[:cut], last[:cut]

    # maxTimestampSoFar and its offset after each batch (strictly-greater update)
    max_ts = h[:, _MAX_TS]
    run_ts = np.maximum.accumulate(np.maximum(max_ts, NO_TIMESTAMP)) if cut else max_ts
    previous = np.empty(cut, dtype=np.int64)
    if cut:
        previous[0] = NO_TIMESTAMP
        previous[1:] = run_ts[:-1]
    owner = np.maximum.accumulate(np.where(max_ts > previous, np.arange(cut), -1))
    run_off = np.where(owner >= 0, last[np.maximum(owner, 0)], base_offset)

    positions = h[:, _POS]
    rows = _sparse_rows(positions, index_interval)[: max_index_size // 8]
    offsets = np.empty(len(rows), dtype=_OFFSET_ENTRY)
    offsets["rel"] = last[rows] - base_offset
    offsets["pos"] = positions[rows]
    # a time entry at each offset entry when the running maximum grew; then the final entry
    ts, off = run_ts[rows], run_off[rows]
    grew = np.empty(len(ts), dtype=np.int64)
    if len(ts):
        grew[0] = NO_TIMESTAMP
        grew[1:] = ts[:-1]
    keep = ts > grew
    max_time = max_index_size // 12
    ts, off = ts[keep][: max(max_time - 1, 0)], off[keep][: max(max_time - 1, 0)]
    top_ts, top_off = (int(run_ts[-1]), int(run_off[-1])) if cut else (NO_TIMESTAMP, base_offset)
    if cut and len(ts) < max_time and top_ts > (ts[-1] if len(ts) else NO_TIMESTAMP):
        ts = np.append(ts, top_ts)
        off = np.append(off, top_off)
    times = np.empty(len(ts), dtype=_TIME_ENTRY)
    times["ts"] = ts
    times["rel"] = off - base_offset
    last_offset = int(last[-1]) if cut else base_offset - 1
    return cut, why, offsets.tobytes(), times.tobytes(), top_ts, top_off, last_offset


def new_epochs(h: Any, n: int, latest_epoch: int) -> list[tuple[int, int]]:
    """``(epoch, base offset)`` of each v2 batch among the first ``n`` rows of ``h`` whose
    partition leader epoch is ≥ 0 and above ``latest_epoch`` and every earlier batch's: the
    assignments recovery makes to the leader epoch cache, in order."""
    _check(h)
    if n < 0:
        raise ValueError("n must be >= 0")
    h = h[:n]
    v2 = h[h[:, _MAGIC] >= 2]
    out: list[tuple[int, int]] = []
    current = latest_epoch
    for epoch, base in zip(v2[:, _EPOCH].tolist(), v2[:, _BASE].tolist(), strict=True):
        if epoch >= 0 and epoch > current:
            out.append((epoch, base))
        if epoch > current:
            current = epoch
    return out
