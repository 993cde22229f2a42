"""Offset and time indexes (§1.5-§1.7): Kafka's bytes on disk, sizing, append/lookup/truncate
rules, the native kernel against its twin, and real Kafka index files."""
from __future__ import annotations

import bisect
import random
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURE_LOGS, load_kernel

from replica_core.errors import CorruptIndexError, IndexOffsetOverflowError, InvalidOffsetError
from replica_core.storage.index import OffsetIndex, TimeIndex
from replica_core.storage.medium import FileMedium, MemoryMedium

INT32_MAX = 2**31 - 1


@pytest.fixture(params=["file", "memory"])
def fs(request, tmp_path):
    if request.param == "file":
        return FileMedium(), str(tmp_path)
    m = MemoryMedium()
    m.makedirs("/seg")
    return m, "/seg"


@pytest.fixture
def kernel(kernel_impl):
    return load_kernel("_index", "index_py", kernel_impl)


def offset_entries(data: bytes) -> list[tuple[int, int]]:
    """Parse ``.index`` bytes independently of our reader."""
    return [struct.unpack_from(">ii", data, i) for i in range(0, len(data) - len(data) % 8, 8)]


def time_entries(data: bytes) -> list[tuple[int, int]]:
    return [struct.unpack_from(">qi", data, i) for i in range(0, len(data) - len(data) % 12, 12)]


def oidx(fs, kernel, base=0, size=800, name=None, **kw):
    m, root = fs
    return OffsetIndex(m, f"{root}/{name or f'{base:020d}.index'}", base, size, kernel=kernel, **kw)


def tidx(fs, kernel, base=0, size=1200, name=None, **kw):
    m, root = fs
    return TimeIndex(m, f"{root}/{name or f'{base:020d}.timeindex'}", base, size, kernel=kernel,
                     **kw)


# --- sizing (§1.7) ---------------------------------------------------------------------------
def test_new_indexes_are_preallocated_to_whole_entries_of_max_size(fs, kernel):
    m, root = fs
    o = OffsetIndex(m, f"{root}/a.index", 0, kernel=kernel)
    t = TimeIndex(m, f"{root}/a.timeindex", 0, kernel=kernel)
    assert m.open(o.path).size() == 10_485_760 and o.max_entries == 1_310_720
    assert m.open(t.path).size() == 10_485_756 and t.max_entries == 873_813
    assert o.entries == t.entries == 0
    small = oidx(fs, kernel, size=100)
    assert small.length == 96 and small.max_entries == 12
    stime = tidx(fs, kernel, size=100)
    assert stime.length == 96 and stime.max_entries == 8


def test_max_index_size_below_one_entry_is_rejected(fs, kernel):
    with pytest.raises(ValueError):
        oidx(fs, kernel, size=7)
    with pytest.raises(ValueError):
        tidx(fs, kernel, size=11)


@pytest.mark.parametrize("length,entries", [(0, 0), (16, 2), (20, 2), (800, 100)])
def test_existing_offset_index_is_taken_as_full_of_entries(fs, kernel, length, entries):
    m, root = fs
    with m.open(f"{root}/x.index", create=True) as f:
        f.append(b"".join(struct.pack(">ii", i, i * 10) for i in range(length // 8)) +
                 b"\x00" * (length % 8))
    idx = OffsetIndex(m, f"{root}/x.index", 0, 800, kernel=kernel)
    assert idx.entries == entries
    assert idx.length == length  # the file is not re-sized on open
    if entries:
        assert idx.last_entry() == (entries - 1, (entries - 1) * 10)


def test_existing_time_index_entries_round_down(fs, kernel):
    m, root = fs
    with m.open(f"{root}/x.timeindex", create=True) as f:
        f.append(struct.pack(">qi", 5, 0) + struct.pack(">qi", 9, 3) + b"\x00" * 6)
    t = TimeIndex(m, f"{root}/x.timeindex", 100, kernel=kernel)
    assert t.entries == 2
    assert t.last_entry() == (9, 103)


def test_crashed_preallocated_index_reopens_full_of_zero_entries(fs, kernel):
    """An untrimmed active index looks full after a restart; recovery must rebuild it."""
    idx = oidx(fs, kernel, base=0, size=80)
    idx.append(0, 0)
    idx.close_handler()  # crash: no trim
    again = oidx(fs, kernel, base=0, size=80)
    assert again.entries == 10 and again.is_full()
    assert again.entry(9) == (0, 0)


# --- offset index append (§1.5) --------------------------------------------------------------
def test_append_writes_big_endian_entries_in_place(fs, kernel):
    m, _ = fs
    idx = oidx(fs, kernel, base=1000, size=80)
    idx.append(1000, 0)
    idx.append(1007, 4096)
    idx.append(1000 + INT32_MAX, 2**31 - 1)
    data = m.read_bytes(idx.path)
    assert len(data) == 80  # still pre-allocated
    assert offset_entries(data)[:4] == [(0, 0), (7, 4096), (INT32_MAX, 2**31 - 1), (0, 0)]
    assert idx.entries == 3 and idx.last_offset == 1000 + INT32_MAX


def test_append_requires_strictly_increasing_offsets(fs, kernel):
    idx = oidx(fs, kernel, base=10)
    idx.append(15, 0)
    with pytest.raises(InvalidOffsetError):
        idx.append(15, 100)
    with pytest.raises(InvalidOffsetError):
        idx.append(12, 100)
    idx.append(16, 100)
    assert idx.entries == 2


def test_relative_offset_must_fit_int32(fs, kernel):
    idx = oidx(fs, kernel, base=100)
    with pytest.raises(IndexOffsetOverflowError):
        idx.append(99, 0)
    with pytest.raises(IndexOffsetOverflowError):
        idx.append(100 + INT32_MAX + 1, 0)
    assert idx.can_append_offset(100) and idx.can_append_offset(100 + INT32_MAX)
    assert not idx.can_append_offset(99) and not idx.can_append_offset(100 + INT32_MAX + 1)
    assert idx.entries == 0


def test_full_offset_index_rejects_appends(fs, kernel):
    idx = oidx(fs, kernel, size=24)
    for i in range(3):
        assert not idx.is_full()
        idx.append(i, i)
    assert idx.is_full()
    with pytest.raises(ValueError):
        idx.append(5, 5)


def test_entry_and_last_entry(fs, kernel):
    idx = oidx(fs, kernel, base=50)
    assert idx.last_entry() == (50, 0) and idx.last_offset == 50
    idx.append(52, 10)
    idx.append(60, 20)
    assert idx.entry(0) == (52, 10) and idx.entry(1) == (60, 20)
    assert idx.last_entry() == (60, 20)
    with pytest.raises(IndexError):
        idx.entry(2)


# --- offset index lookup ---------------------------------------------------------------------
def test_lookup_is_a_floor_search_with_base_fallback(fs, kernel):
    idx = oidx(fs, kernel, base=100)
    assert idx.lookup(100) == (100, 0)  # empty
    for off, pos in [(110, 0), (120, 300), (135, 700)]:
        idx.append(off, pos)
    assert idx.lookup(109) == (100, 0)  # below the first entry
    assert idx.lookup(-5) == (100, 0)
    assert idx.lookup(110) == (110, 0)
    assert idx.lookup(119) == (110, 0)
    assert idx.lookup(120) == (120, 300)
    assert idx.lookup(134) == (120, 300)
    assert idx.lookup(135) == (135, 700)
    assert idx.lookup(10**15) == (135, 700)  # beyond int32 relative range
    assert idx.lookup(2**63 - 1) == (135, 700)


def test_lookup_many_matches_lookup(fs, kernel):
    idx = oidx(fs, kernel, base=1_000, size=8 * 500)
    rng = random.Random(3)
    off = 1_000
    for i in range(400):
        off += rng.randint(1, 50)
        idx.append(off, i * 4096)
    targets = np.array([rng.randint(900, off + 100) for _ in range(300)] + [-1, 2**62],
                       dtype=np.int64)
    offsets, positions = idx.lookup_many(targets)
    assert offsets.dtype == positions.dtype == np.int64
    assert list(zip(offsets.tolist(), positions.tolist(), strict=True)) == [
        idx.lookup(int(t)) for t in targets]
    srt = np.sort(targets)  # the ascending path of the kernel
    so, sp = idx.lookup_many(srt)
    assert list(zip(so.tolist(), sp.tolist(), strict=True)) == [idx.lookup(int(t)) for t in srt]
    e0, e1 = idx.lookup_many(np.array([], dtype=np.int64))
    assert len(e0) == len(e1) == 0


def test_fetch_upper_bound_offset(fs, kernel):
    idx = oidx(fs, kernel, base=0)
    assert idx.fetch_upper_bound_offset(0, 10) is None
    for off, pos in [(5, 0), (10, 100), (20, 250)]:
        idx.append(off, pos)
    assert idx.fetch_upper_bound_offset(0, 0) == (5, 0)
    assert idx.fetch_upper_bound_offset(0, 100) == (10, 100)
    assert idx.fetch_upper_bound_offset(50, 51) == (20, 250)
    assert idx.fetch_upper_bound_offset(200, 51) is None


# --- truncation and resizing -----------------------------------------------------------------
@pytest.mark.parametrize("target,kept", [
    (9, 0),     # no entry <= target: everything goes
    (10, 0),    # exact match at the first entry: it goes too
    (15, 1),    # between: keep through the floor entry
    (20, 1),    # exact: drop it and after
    (31, 3),    # past the last entry: no effect
])
def test_offset_index_truncate_to(fs, kernel, target, kept):
    idx = oidx(fs, kernel, base=0)
    for off in (10, 20, 30):
        idx.append(off, off * 10)
    idx.truncate_to(target)
    assert idx.entries == kept
    assert idx.last_offset == ([0, 10, 20, 30][kept])
    idx.append(target + 100, 1000)  # appends continue after the cut


def test_truncate_keeps_file_length_and_trim_cuts_it(fs, kernel):
    m, _ = fs
    idx = oidx(fs, kernel, base=0, size=80)
    for off in (1, 2, 3):
        idx.append(off, off * 8)
    idx.truncate_to(3)
    assert len(m.read_bytes(idx.path)) == 80
    idx.trim_to_valid_size()
    data = m.read_bytes(idx.path)
    assert offset_entries(data) == [(1, 8), (2, 16)] and len(data) == 16
    assert idx.max_entries == 2 and idx.is_full()
    idx.truncate()
    assert idx.entries == 0 and idx.lookup(5) == (0, 0)


def test_resize_rounds_down_keeps_entries_and_reports_change(fs, kernel):
    m, _ = fs
    idx = oidx(fs, kernel, base=0, size=80)
    idx.append(3, 33)
    assert idx.resize(100) is True
    assert idx.length == 96 and idx.max_entries == 12 and len(m.read_bytes(idx.path)) == 96
    assert idx.resize(99) is False  # already 96 after rounding
    assert idx.entries == 1 and idx.lookup(7) == (3, 33)
    with pytest.raises(ValueError):
        idx.resize(7)  # fewer bytes than the entries


def test_reset_empties_and_reexpands(fs, kernel):
    idx = oidx(fs, kernel, base=0, size=80)
    idx.append(1, 1)
    idx.trim_to_valid_size()
    idx.reset()
    assert idx.entries == 0 and idx.length == 80 and idx.max_entries == 10


def test_close_trims_and_reopen_reads_same_entries(fs, kernel):
    m, _ = fs
    idx = oidx(fs, kernel, base=7, size=80)
    idx.append(7, 0)
    idx.append(9, 61)
    idx.close()
    assert idx.closed
    assert offset_entries(m.read_bytes(idx.path)) == [(0, 0), (2, 61)]
    with pytest.raises(ValueError):
        idx.append(10, 100)
    with pytest.raises(ValueError):
        idx.lookup(8)
    again = oidx(fs, kernel, base=7, size=80)
    assert again.entries == 2 and again.lookup(8) == (7, 0) and again.lookup(100) == (9, 61)


def test_delete_and_rename(fs, kernel):
    m, root = fs
    idx = oidx(fs, kernel, base=0)
    idx.append(1, 1)
    idx.rename_to(f"{root}/00000000000000000000.index.deleted")
    assert m.exists(f"{root}/00000000000000000000.index.deleted")
    assert not m.exists(f"{root}/00000000000000000000.index")
    assert idx.delete() is True
    assert not m.exists(idx.path)
    assert idx.delete() is False


def test_read_only_index(fs, kernel):
    m, root = fs
    idx = oidx(fs, kernel)
    idx.append(1, 1)
    idx.close()
    ro = oidx(fs, kernel, writable=False)
    assert ro.lookup(5) == (1, 1)
    with pytest.raises(PermissionError):
        ro.append(2, 2)
    ro.close()
    with pytest.raises(FileNotFoundError):
        OffsetIndex(m, f"{root}/missing.index", 0, writable=False, kernel=kernel)


# --- sanity check ----------------------------------------------------------------------------
def test_offset_index_sanity_check(fs, kernel):
    m, root = fs
    idx = oidx(fs, kernel, base=100)
    idx.append(100, 0)
    idx.sanity_check()
    with m.open(f"{root}/ragged.index", create=True) as f:
        f.append(struct.pack(">ii", 1, 1) + b"\x00\x00\x00\x00\x00")
    with pytest.raises(CorruptIndexError):
        OffsetIndex(m, f"{root}/ragged.index", 0, kernel=kernel).sanity_check()
    with m.open(f"{root}/below.index", create=True) as f:
        f.append(struct.pack(">ii", 0, 0) + struct.pack(">ii", -5, 10))
    with pytest.raises(CorruptIndexError):
        OffsetIndex(m, f"{root}/below.index", 100, kernel=kernel).sanity_check()


def test_time_index_sanity_check(fs, kernel):
    m, root = fs
    with m.open(f"{root}/back.timeindex", create=True) as f:
        f.append(struct.pack(">qi", 50, 1) + struct.pack(">qi", 40, 2))
    with pytest.raises(CorruptIndexError):
        TimeIndex(m, f"{root}/back.timeindex", 0, kernel=kernel).sanity_check()
    with m.open(f"{root}/below.timeindex", create=True) as f:
        f.append(struct.pack(">qi", 50, -1))
    with pytest.raises(CorruptIndexError):
        TimeIndex(m, f"{root}/below.timeindex", 10, kernel=kernel).sanity_check()
    with m.open(f"{root}/ragged.timeindex", create=True) as f:
        f.append(b"\x00" * 13)
    with pytest.raises(CorruptIndexError):
        TimeIndex(m, f"{root}/ragged.timeindex", 0, kernel=kernel).sanity_check()
    ok = tidx(fs, kernel)
    ok.maybe_append(5, 0)
    ok.sanity_check()


# --- time index (§1.6) -----------------------------------------------------------------------
def test_time_index_append_rules_and_bytes(fs, kernel):
    m, _ = fs
    t = tidx(fs, kernel, base=100)
    assert t.last_entry() == (-1, 100)
    t.maybe_append(-1, 100)  # NO_TIMESTAMP on an empty index: not > -1, ignored
    assert t.entries == 0
    t.maybe_append(1000, 100)
    t.maybe_append(1000, 105)  # equal timestamp: silently ignored
    assert t.entries == 1
    t.maybe_append(1005, 105)
    t.maybe_append(1006, 105)  # same offset, larger timestamp: appended
    with pytest.raises(InvalidOffsetError):
        t.maybe_append(2000, 104)
    with pytest.raises(ValueError):
        t.maybe_append(999, 110)
    with pytest.raises(IndexOffsetOverflowError):
        t.maybe_append(3000, 100 + INT32_MAX + 1)
    assert time_entries(m.read_bytes(t.path))[:3] == [(1000, 0), (1005, 5), (1006, 5)]
    assert t.last_entry() == (1006, 105)


def test_time_index_full_keeps_last_slot_for_roll(fs, kernel):
    t = tidx(fs, kernel, size=36)  # 3 slots
    t.maybe_append(1, 0)
    assert not t.is_full()
    t.maybe_append(2, 1)
    assert t.is_full()  # entries >= max_entries - 1
    with pytest.raises(ValueError):
        t.maybe_append(3, 2)
    t.maybe_append(3, 2, skip_full_check=True)
    assert t.entries == 3
    with pytest.raises(ValueError):
        t.maybe_append(4, 3, skip_full_check=True)  # no slot at all


def test_time_index_lookup_floor_by_timestamp(fs, kernel):
    t = tidx(fs, kernel, base=10)
    assert t.lookup(5) == (-1, 10)
    for ts, off in [(100, 10), (200, 15), (300, 15), (400, 30)]:
        t.maybe_append(ts, off)
    assert t.lookup(99) == (-1, 10)
    assert t.lookup(100) == (100, 10)
    assert t.lookup(299) == (200, 15)
    assert t.lookup(10**18) == (400, 30)
    offsets, stamps = t.lookup_many(np.array([99, 100, 299, 10**18, 250]))
    assert offsets.tolist() == [10, 10, 15, 30, 15]
    assert stamps.tolist() == [-1, 100, 200, 400, 200]


@pytest.mark.parametrize("target,kept", [(9, 0), (10, 0), (12, 1), (15, 1), (20, 3), (31, 4)])
def test_time_index_truncate_to_searches_offsets(fs, kernel, target, kept):
    t = tidx(fs, kernel, base=0)
    for ts, off in [(100, 10), (200, 15), (300, 15), (400, 30)]:
        t.maybe_append(ts, off)
    t.truncate_to(target)
    assert t.entries == kept
    assert t.last_entry() == [(-1, 0), (100, 10), None, (300, 15), (400, 30)][kept]


def test_time_index_resize_and_trim(fs, kernel):
    m, _ = fs
    t = tidx(fs, kernel, size=120)
    t.maybe_append(7, 1)
    t.trim_to_valid_size()
    assert len(m.read_bytes(t.path)) == 12 and t.max_entries == 1
    assert t.is_full()
    t.resize(120)
    assert t.last_entry() == (7, 1) and t.max_entries == 10
    t.reset()
    assert t.last_entry() == (-1, 0) and t.entries == 0


# --- the kernel against its twin -------------------------------------------------------------
def _entries_blob(rng: random.Random, n: int) -> tuple[bytes, bytes]:
    rels = sorted(rng.sample(range(0, 2**31 - 1), n))
    offs = b"".join(struct.pack(">ii", r, i * 97) for i, r in enumerate(rels))
    ts = sorted(rng.sample(range(-(2**40), 2**40), n))
    tim = b"".join(struct.pack(">qi", t, r) for t, r in zip(ts, rels, strict=True))
    return offs, tim


@pytest.mark.parametrize("n", [0, 1, 2, 3, 17, 64, 128, 130, 1000, 3000])
@pytest.mark.parametrize("shape", ["sorted", "junk"])
def test_native_and_twin_agree(n, shape):
    native = load_kernel("_index", "index_py", "native")
    twin = load_kernel("_index", "index_py", "twin")
    rng = random.Random(n * 7 + (shape == "junk"))
    if shape == "sorted":
        offs, tim = _entries_blob(rng, n)
    else:  # arbitrary bytes: both must still give the same answers
        offs, tim = rng.randbytes(8 * n), rng.randbytes(12 * n)
    base = rng.choice([0, 5, 2**40])
    targets = np.array([rng.randint(-(2**41), 2**41) for _ in range(200)]
                       + [base + rng.randint(-10, 2**31 + 10) for _ in range(200)]
                       + [2**63 - 1, -(2**63)], dtype=np.int64)
    # any order: lock-step path; ascending: dense gallop; a sparse ascending subset: block gallop
    for order in (targets, np.sort(targets), np.sort(targets)[::9]):
        o_n, o_t = native.OffsetSearcher(offs, base, n), twin.OffsetSearcher(offs, base, n)
        t_n, t_t = native.TimeSearcher(tim, base, n), twin.TimeSearcher(tim, base, n)
        for a, b in ((o_n, o_t), (t_n, t_t)):
            assert a.floor_slots(order).tolist() == b.floor_slots(order).tolist()
            for x, y in zip(a.lookup_many(order), b.lookup_many(order), strict=True):
                assert x.tolist() == y.tolist()
            for tv in order[::7].tolist():
                assert a.lookup(tv) == b.lookup(tv)
                assert a.floor_slot(tv) == b.floor_slot(tv)
        for tv in order[::5].tolist():
            assert o_n.upper_slot_by_position(tv) == o_t.upper_slot_by_position(tv)
            assert t_n.floor_slot_by_offset(tv) == t_t.floor_slot_by_offset(tv)


@pytest.mark.parametrize("n", [1, 2, 5, 64, 1000, 1025, 1026, 5000])
def test_kernel_floor_matches_reference(kernel, n):
    """Single and batched searches against ``bisect`` over the parsed entries."""
    rng = random.Random(n)
    offs, tim = _entries_blob(rng, n)
    rels = [struct.unpack_from(">i", offs, 8 * i)[0] for i in range(n)]
    stamps = [struct.unpack_from(">q", tim, 12 * i)[0] for i in range(n)]
    base = 1000
    o = kernel.OffsetSearcher(offs, base, n)
    t = kernel.TimeSearcher(tim, base, n)
    picks = sorted(set(range(0, n, max(1, n // 300))) | {0, n - 1, n - 1026, n - 1025, n - 1024})
    picks = [i for i in picks if 0 <= i < n]
    targets = [base + rels[i] + d for i in picks for d in (-1, 0, 1)] + [0, base, 2**62]
    want = [bisect.bisect_right(rels, x - base) - 1 for x in targets]
    assert o.floor_slots(np.array(targets, dtype=np.int64)).tolist() == want
    for step in (1, 11):  # ascending, dense then sparse
        asc = sorted(targets)[::step]
        assert o.floor_slots(np.array(asc, dtype=np.int64)).tolist() == [
            bisect.bisect_right(rels, x - base) - 1 for x in asc]
    assert [o.floor_slot(x) for x in targets] == want
    assert [o.lookup(x) for x in targets] == [
        (base + rels[w], 97 * w) if w >= 0 else (base, 0) for w in want]
    tts = [stamps[i] + d for i in picks for d in (-1, 0, 1)]
    want = [bisect.bisect_right(stamps, x) - 1 for x in tts]
    assert t.floor_slots(np.array(tts, dtype=np.int64)).tolist() == want
    asc = sorted(tts)[::11]
    assert t.floor_slots(np.array(asc, dtype=np.int64)).tolist() == [
        bisect.bisect_right(stamps, x) - 1 for x in asc]
    assert [t.floor_slot(x) for x in tts] == want
    assert [t.lookup(x) for x in tts] == [
        (stamps[w], base + rels[w]) if w >= 0 else (-1, base) for w in want]
    offs_targets = [base + rels[i] + d for i in picks for d in (-1, 0, 1)]
    assert [t.floor_slot_by_offset(x) for x in offs_targets] == [
        bisect.bisect_right(rels, x - base) - 1 for x in offs_targets]
    for x in (-1, 0, 1, 96, 97, 98, 97 * (n - 1), 97 * n, 97 * n + 1):
        assert o.upper_slot_by_position(x) == (bisect.bisect_left(range(0, 97 * n, 97), x)
                                               if x <= 97 * (n - 1) else -1)


def test_cached_block_keys_follow_truncation_and_rewrite(kernel):
    """Slots past a truncation get rewritten by later appends; searches must see the new bytes."""
    buf = bytearray(b"".join(struct.pack(">ii", 10 * i, i) for i in range(300)))
    s = kernel.OffsetSearcher(buf, 0, 300)
    assert s.lookup(2995) == (2990, 299)
    assert s.floor_slots(np.array([2995, 5])).tolist() == [299, 0]
    s.entries = 100
    for i in range(100, 300):  # what appends after truncate_to(1000) would write
        struct.pack_into(">ii", buf, 8 * i, 1000 + 7 * (i - 100), 5000 + i)
    s.entries = 300
    twin = load_kernel("_index", "index_py", "twin").OffsetSearcher(buf, 0, 300)
    targets = np.array([5, 995, 1000, 1006, 1007, 1500, 2392, 2393, 10_000], dtype=np.int64)
    assert s.floor_slots(targets).tolist() == twin.floor_slots(targets).tolist()
    assert [s.lookup(int(t)) for t in targets] == [twin.lookup(int(t)) for t in targets]
    assert s.lookup(1500) == (1497, 5171)


def test_index_truncate_then_append_across_blocks(fs, kernel):
    idx = oidx(fs, kernel, base=0, size=8 * 400)
    for i in range(300):
        idx.append(10 * i, i)
    assert idx.lookup(2995) == (2990, 299)
    idx.truncate_to(1000)  # keeps offsets < 1000: 100 entries
    for i in range(200):
        idx.append(1000 + 7 * i, 5000 + i)
    assert idx.lookup(1500) == (1497, 5071)
    assert idx.lookup_many(np.array([1500, 995]))[0].tolist() == [1497, 990]


def test_searcher_rejects_entries_beyond_its_buffer(kernel):
    s = kernel.OffsetSearcher(bytes(16), 0, 2)
    with pytest.raises(ValueError):
        s.entries = 3
    with pytest.raises(ValueError):
        kernel.TimeSearcher(bytes(12), 0, 2)
    s.release()
    assert s.entries == 0 and s.lookup(5) == (0, 0)


# --- real Kafka index files ------------------------------------------------------------------
def _fixture_indexes(suffix: str) -> list[Path]:
    return sorted(p for p in FIXTURE_LOGS.rglob(f"*{suffix}") if p.stat().st_size > 0)


def _batch_base_at(log: Path, position: int) -> int:
    with log.open("rb") as f:
        f.seek(position)
        base, length = struct.unpack(">qi", f.read(12))
    assert length >= 49
    return base


def test_fixture_offset_indexes_read_correctly(kernel):
    paths = _fixture_indexes(".index")
    assert len(paths) >= 10
    medium = FileMedium()
    for p in paths:
        base = int(p.name.split(".")[0])
        raw = p.read_bytes()
        expected = [(base + r, pos) for r, pos in offset_entries(raw)]
        idx = OffsetIndex(medium, str(p), base, writable=False, kernel=kernel)
        assert idx.entries == len(raw) // 8
        assert [idx.entry(i) for i in range(idx.entries)] == expected
        idx.sanity_check()
        log = p.with_suffix(".log")
        for off, pos in expected:
            assert idx.lookup(off) == (off, pos)
            assert idx.lookup(off + 1)[0] >= off
            assert _batch_base_at(log, pos) <= off  # points at a batch start in the .log
        assert idx.lookup(base - 1) == (base, 0)
        targets = np.arange(base - 2, expected[-1][0] + 3, dtype=np.int64)
        offs, poss = idx.lookup_many(targets)
        assert list(zip(offs.tolist(), poss.tolist(), strict=True)) == [
            idx.lookup(int(t)) for t in targets]
        idx.close()
        assert p.read_bytes() == raw  # read-only use leaves the file alone


def test_fixture_time_indexes_read_correctly(kernel):
    paths = _fixture_indexes(".timeindex")
    assert len(paths) >= 10
    for p in paths:
        base = int(p.name.split(".")[0])
        raw = p.read_bytes()
        expected = [(ts, base + r) for ts, r in time_entries(raw)]
        t = TimeIndex(FileMedium(), str(p), base, writable=False, kernel=kernel)
        assert [t.entry(i) for i in range(t.entries)] == expected
        assert t.last_entry() == expected[-1]
        t.sanity_check()
        for ts, off in expected:
            assert t.lookup(ts) == (ts, off)
        assert t.lookup(expected[0][0] - 1) == (-1, base)
        t.close()


def test_fixture_empty_trimmed_indexes(kernel):
    empties = sorted(p for p in FIXTURE_LOGS.rglob("*.index") if p.stat().st_size == 0)
    assert empties
    for p in empties[:20]:
        base = int(p.name.split(".")[0])
        idx = OffsetIndex(FileMedium(), str(p), base, writable=False, kernel=kernel)
        assert idx.entries == 0 and idx.max_entries == 0
        assert idx.is_full()  # a trimmed empty index has no room (KAFKA-6388 roll case)
        assert idx.lookup(base + 5) == (base, 0)
        idx.close()


def test_fixture_segment_without_index_gets_a_fresh_preallocated_one(tmp_path, kernel):
    """Some fixture dirs lack the active segment's index; opening writable creates it."""
    logs = [p for p in FIXTURE_LOGS.rglob("*.log") if not p.with_suffix(".index").exists()]
    assert logs
    src = logs[0]
    dst = tmp_path / src.parent.name
    shutil.copytree(src.parent, dst)
    for f in dst.iterdir():
        f.chmod(0o644)
    base = int(src.name.split(".")[0])
    idx = OffsetIndex(FileMedium(), str(dst / src.with_suffix(".index").name), base,
                      kernel=kernel)
    assert idx.entries == 0 and idx.length == 10_485_760
    assert (dst / src.with_suffix(".index").name).stat().st_size == 10_485_760
    idx.close()
    assert (dst / src.with_suffix(".index").name).stat().st_size == 0


def test_fixture_indexes_on_memory_medium(kernel):
    """The same bytes loaded into MemoryMedium give the same answers."""
    m = MemoryMedium()
    m.makedirs("/f")
    for i, p in enumerate(_fixture_indexes(".index")[:5]):
        base = int(p.name.split(".")[0])
        m.makedirs(f"/f/{i}")
        with m.open(f"/f/{i}/{p.name}", create=True) as f:
            f.append(p.read_bytes())
        a = OffsetIndex(m, f"/f/{i}/{p.name}", base, kernel=kernel)
        b = OffsetIndex(FileMedium(), str(p), base, writable=False, kernel=kernel)
        assert [a.entry(i) for i in range(a.entries)] == [b.entry(i) for i in range(b.entries)]
        a.close()
        b.close()


# --- lazy mapping (Kafka's LazyIndex) ---------------------------------------------------------
def test_index_maps_on_first_read_and_appends_before_it_are_seen(fs, kernel):
    """A new index is not mapped until read; entries appended before and after the first read
    are all found, and the file holds them whichever came first."""
    m, _ = fs
    o, t = oidx(fs, kernel, base=100, size=8000), tidx(fs, kernel, base=100, size=12000)
    assert o._view is None and t._view is None
    for i in range(50):
        o.append(100 + 3 * i, 40 * i)
        t.maybe_append(1_000 + 10 * i, 100 + 3 * i)
    assert o._view is None and t._view is None
    assert o.lookup(131) == (130, 400)  # first read maps
    assert t.lookup(1_095) == (1_090, 127)
    assert o._view is not None and t._view is not None
    for i in range(50, 80):  # appends after mapping go through the same bytes
        o.append(100 + 3 * i, 40 * i)
        t.maybe_append(1_000 + 10 * i, 100 + 3 * i)
    assert o.lookup(100 + 3 * 79 + 1) == (100 + 3 * 79, 40 * 79)
    assert t.lookup(1_000 + 10 * 79) == (1_000 + 10 * 79, 100 + 3 * 79)
    assert o.entry(60) == (280, 2_400)
    o.resize(8 * 80)  # remap after a resize is lazy again
    assert o._view is None and o.lookup(101) == (100, 0) and o.max_entries == 80
    o.close()
    assert offset_entries(m.read_bytes(o.path)) == [(3 * i, 40 * i) for i in range(80)]


def test_tail_lookups_answer_the_floor_entry_through_truncation_and_reopen(fs, kernel):
    """Lookups at, past and below the last entry give the floor entry read back from the
    file's bytes, for an index written by appends (tail lookups answered without a search),
    after truncations, and once closed and reopened from its file (searched)."""
    m, _ = fs
    rng = random.Random(7)
    idx = oidx(fs, kernel, base=1000, size=8 * 64)

    def check(index):
        m_entries = offset_entries(m.read_bytes(index.path))[: index.entries]
        offsets = [1000 + rel for rel, _ in m_entries]
        last = offsets[-1] if offsets else 1000
        for target in (999, 1000, last - 1, last, last + 1, last + 10**6,
                       rng.randrange(990, last + 5)):
            k = bisect.bisect_right(offsets, target)
            want = (offsets[k - 1], m_entries[k - 1][1]) if k else (1000, 0)
            assert index.lookup(target) == want, (target, want)

    offset = 1000
    for round_ in range(6):
        for _ in range(rng.randrange(1, 9)):
            offset += rng.randrange(1, 40)
            idx.append(offset, 100 * idx.entries)
            check(idx)
        if round_ % 2:
            idx.truncate_to(offset - rng.randrange(0, 60))
        elif round_ == 4:
            idx.truncate()  # every entry gone: what follows comes through append again
        offset = idx.last_offset
        check(idx)
    idx.close()
    check(oidx(fs, kernel, base=1000, size=8 * 64))


def test_preallocated_index_on_memory_costs_nothing_until_mapped():
    """The 10 MiB default pre-allocation is a hole on the in-memory medium until a lookup maps
    the index (then its whole length is there, as with Kafka's mmap). A lookup at or past the
    last entry of an index written by appends answers that entry without mapping."""
    m = MemoryMedium()
    m.makedirs("/seg")
    o = OffsetIndex(m, "/seg/00000000000000000000.index", 0)
    inode = m._files["/seg/00000000000000000000.index"]
    assert inode.size == 10_485_760 and len(inode.buf) == 0
    assert o.lookup(3) == (0, 0)
    o.append(5, 0)
    o.append(9, 4200)
    assert o.lookup(9) == (9, 4200) and o.lookup(12) == (9, 4200)
    assert len(inode.buf) < 4096
    assert o.lookup(6) == (5, 0)
    assert len(inode.buf) >= 10_485_760
