"""The segment recovery kernel (``_segment_recovery`` / ``segment_recovery_py``): what Kafka's
``LogSegment.recover`` derives from a segment's batch headers — where to cut, the rebuilt offset
and time index entries, the largest timestamp, the new leader epochs (§5.4). Native against its
twin on random headers, and both against a batch-by-batch statement of Kafka's loop."""
from __future__ import annotations

import importlib
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from storage_testlib import expected_recovery_index

from replica_core.records.batch import kernels as layout

TWIN = importlib.import_module("replica_core._fast.segment_recovery_py")
try:
    NATIVE = importlib.import_module("replica_core._fast._segment_recovery")
except ImportError:  # pragma: no cover - an unbuilt checkout
    NATIVE = None
KERNELS = [pytest.param(TWIN, id="twin"),
           pytest.param(NATIVE, id="native", marks=pytest.mark.skipif(
               NATIVE is None, reason="native kernels not built"))]


def headers(rows: list[dict]) -> np.ndarray:
    """A header matrix in the batch kernels' layout from per-batch fields."""
    h = np.zeros((len(rows), layout.NCOLS), dtype=np.int64)
    for i, r in enumerate(rows):
        h[i, layout.COL_POSITION] = r["pos"]
        h[i, layout.COL_BASE_OFFSET] = r["base"]
        h[i, layout.COL_LAST_OFFSET_DELTA] = r["delta"]
        h[i, layout.COL_MAGIC] = r["magic"]
        h[i, layout.COL_MAX_TIMESTAMP] = r["ts"]
        h[i, layout.COL_PARTITION_LEADER_EPOCH] = r["epoch"]
        h[i, layout.COL_CRC_OK] = r["crc_ok"]
    return h


def kafka_loop(rows: list[dict], base_offset: int, interval: int, max_index_size: int):
    """Kafka's recover loop, batch by batch: stop at the first bad batch; an offset entry when
    the batch starts more than ``interval`` bytes past the last entry, with a time entry
    (``maybeAppend``: only a strictly larger timestamp) of the running maximum; the indexes
    full at ``max_index_size``; at the end the time index gets the largest timestamp."""
    kept, prev_last = [], None
    for r in rows:
        last = r["base"] + (r["delta"] if r["magic"] >= 2 else 0)
        if (r["crc_ok"] != 1 or (prev_last is not None and r["base"] <= prev_last)
                or last < r["base"] or not 0 <= last - base_offset <= 2**31 - 1):
            break
        kept.append((r, last))
        prev_last = last
    offsets, times = [], []
    top_ts, top_off, last_entry = -1, base_offset, 0
    for r, last in kept:
        if r["ts"] > top_ts:
            top_ts, top_off = r["ts"], last
        if r["pos"] - last_entry > interval and len(offsets) < max_index_size // 8:
            offsets.append((last - base_offset, r["pos"]))
            last_entry = r["pos"]
            if top_ts > (times[-1][0] if times else -1) and len(times) < max_index_size // 12 - 1:
                times.append((top_ts, top_off - base_offset))
    if kept and len(times) < max_index_size // 12 and top_ts > (times[-1][0] if times else -1):
        times.append((top_ts, top_off - base_offset))
    return len(kept), offsets, times, top_ts, top_off


@st.composite
def segments(draw):
    n = draw(st.integers(0, 14))
    base_offset = draw(st.sampled_from([0, 7, 2**31, 2**40]))
    rows, pos, off = [], 0, base_offset + draw(st.integers(-2, 2))
    for _ in range(n):
        magic = draw(st.sampled_from([2, 2, 2, 1, 0]))
        delta = draw(st.integers(0, 5)) if magic >= 2 else 0
        if draw(st.integers(0, 15)) == 0:
            delta = draw(st.sampled_from([-3, 2**31, 2**62]))  # backwards or out of range
        if draw(st.integers(0, 15)) == 0:
            off -= draw(st.integers(1, 4))  # offsets that go backwards
        rows.append(dict(
            pos=pos, base=off, delta=delta, magic=magic,
            ts=draw(st.sampled_from([-1, 0, 5, 10, 10, 20, 2**40])),
            epoch=draw(st.integers(-1, 4)),
            crc_ok=0 if draw(st.integers(0, 20)) == 0 else 1,
        ))
        pos += draw(st.sampled_from([61, 70, 200, 4000, 5000]))
        off += (delta if 0 <= delta < 2**31 else 0) + 1
    interval = draw(st.sampled_from([0, 1, 100, 4096]))
    max_index_size = draw(st.sampled_from([0, 8, 12, 24, 36, 10 * 1024 * 1024]))
    latest = draw(st.integers(-1, 3))
    return rows, base_offset, interval, max_index_size, latest


@pytest.mark.skipif(NATIVE is None, reason="native kernels not built")
@settings(max_examples=400, deadline=None)
@given(segments())
def test_native_matches_twin(case):
    rows, base_offset, interval, max_index_size, latest = case
    h = headers(rows)
    plan = NATIVE.recovery_plan(h, base_offset, interval, max_index_size)
    assert plan == TWIN.recovery_plan(h, base_offset, interval, max_index_size)
    cut = plan[0]
    assert NATIVE.new_epochs(h, cut, latest) == TWIN.new_epochs(h, cut, latest)


@pytest.mark.parametrize("kernel", KERNELS)
@settings(max_examples=200, deadline=None)
@given(case=segments())
def test_plan_is_kafkas_recover_loop(kernel, case):
    rows, base_offset, interval, max_index_size, _ = case
    cut, why, oi, ti, top_ts, top_off, last = kernel.recovery_plan(
        headers(rows), base_offset, interval, max_index_size)
    n, offsets, times, want_ts, want_off = kafka_loop(rows, base_offset, interval, max_index_size)
    assert cut == n
    assert (why == kernel.CUT_NONE) == (cut == len(rows))
    assert [struct.unpack_from(">ii", oi, 8 * k) for k in range(len(oi) // 8)] == offsets
    assert [struct.unpack_from(">qi", ti, 12 * k) for k in range(len(ti) // 12)] == times
    if cut:
        assert (top_ts, top_off) == (want_ts, want_off)
        r = rows[cut - 1]
        assert last == r["base"] + (r["delta"] if r["magic"] >= 2 else 0)
    else:
        assert last == base_offset - 1


@pytest.mark.parametrize("kernel", KERNELS)
def test_why_names_the_first_bad_batch(kernel):
    good = dict(pos=0, base=0, delta=2, magic=2, ts=5, epoch=0, crc_ok=1)
    crc = dict(good, pos=100, base=3, crc_ok=0)
    backwards = dict(good, pos=100, base=1)
    assert kernel.recovery_plan(headers([good, crc]), 0, 0, 800)[:2] == (1, kernel.CUT_CRC)
    assert kernel.recovery_plan(headers([good, backwards]), 0, 0, 800)[:2] == (
        1, kernel.CUT_OFFSETS)
    # a CRC failure after an offset problem: the offset problem comes first
    assert kernel.recovery_plan(headers([good, backwards, crc]), 0, 0, 800)[:2] == (
        1, kernel.CUT_OFFSETS)
    assert kernel.recovery_plan(headers([good]), 0, 0, 800)[:2] == (1, kernel.CUT_NONE)


@pytest.mark.parametrize("kernel", KERNELS)
def test_offset_entries_follow_the_index_interval_rule(kernel):
    rng = np.random.default_rng(5)
    for _ in range(100):
        n = int(rng.integers(1, 300))
        sizes = rng.integers(61, int(rng.choice([100, 5000, 20000])), n)
        positions = np.concatenate([[0], np.cumsum(sizes[:-1])]).tolist()
        interval = int(rng.choice([0, 1, 100, 4096, 10000]))
        rows = [dict(pos=p, base=i, delta=0, magic=2, ts=i, epoch=0, crc_ok=1)
                for i, p in enumerate(positions)]
        oi = kernel.recovery_plan(headers(rows), 0, interval, 10 * 1024 * 1024)[2]
        entries = [struct.unpack_from(">ii", oi, 8 * k)[0] for k in range(len(oi) // 8)]
        assert entries == expected_recovery_index(positions, interval)


@pytest.mark.parametrize("kernel", KERNELS)
def test_new_epochs_only_rising_v2_epochs(kernel):
    rows = [dict(pos=0, base=0, delta=0, magic=2, ts=0, epoch=e, crc_ok=1) for e in
            (-1, 1, 1, 0, 3, 2, 4)]
    rows.insert(2, dict(pos=0, base=99, delta=0, magic=1, ts=0, epoch=9, crc_ok=1))
    for i, r in enumerate(rows):
        r["base"] = i
    h = headers(rows)
    assert kernel.new_epochs(h, len(rows), -1) == [(1, 1), (3, 5), (4, 7)]
    assert kernel.new_epochs(h, len(rows), 3) == [(4, 7)]
    assert kernel.new_epochs(h, 3, -1) == [(1, 1)]


@pytest.mark.parametrize("kernel", KERNELS)
def test_bad_arguments_are_refused(kernel):
    h = headers([dict(pos=0, base=0, delta=0, magic=2, ts=0, epoch=0, crc_ok=1)])
    with pytest.raises(ValueError, match="C-contiguous int64"):
        kernel.recovery_plan(h.astype(np.int32), 0, 0, 80)
    with pytest.raises(ValueError, match="C-contiguous int64"):
        kernel.recovery_plan(np.asfortranarray(np.vstack([h, h])), 0, 0, 80)
    with pytest.raises(ValueError, match=">= 0"):
        kernel.recovery_plan(h, 0, -1, 80)
    with pytest.raises(ValueError, match=">= 0"):
        kernel.new_epochs(h, -1, 0)
