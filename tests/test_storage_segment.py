"""LogSegment: files, sparse index rule, read/translate, truncation, recovery, rolling.

KAFKA_SEMANTICS §1.4-1.8, §2.7, §3.3, §4.1, §5.4. Files are checked with ``struct`` parsers
(tests/storage_testlib.py), not with our index or batch readers.
"""
from __future__ import annotations

import random

import pytest
from storage_testlib import (
    expected_append_index,
    expected_recovery_index,
    make_batch,
    parse_batches,
    parse_offset_index,
    parse_time_index,
)

from replica_core.clock import ManualClock
from replica_core.errors import LogSegmentOffsetOverflowError
from replica_core.storage.medium import FileMedium, MemoryMedium
from replica_core.storage.segment import (
    LogSegment,
    LogSegments,
    log_file_path,
    offset_from_file_name,
    offset_index_path,
    time_index_path,
)

BASE = 100
T0 = 1_700_000_000_000


@pytest.fixture(params=["file", "memory"])
def medium_dir(request, tmp_path):
    if request.param == "file":
        medium, d = FileMedium(), str(tmp_path / "topic-0")
    else:
        medium, d = MemoryMedium(), "/data/topic-0"
    medium.makedirs(d)
    return medium, d


def _segment(medium, d, base=BASE, *, interval=4096, max_index=10 * 1024 * 1024, clock=None,
             exists=False):
    return LogSegment(medium, d, base, index_interval_bytes=interval, max_index_size=max_index,
                      clock=clock or ManualClock(T0), file_already_exists=exists)


def _fill(seg, n, *, base=BASE, seed=1, ts_jitter=False):
    """Append ``n`` single-batch appends of 1..6 records of random sizes; returns the batches."""
    rng = random.Random(seed)
    batches = []
    offset = base
    for i in range(n):
        count = rng.randint(1, 6)
        values = [bytes(rng.randrange(256) for _ in range(rng.randint(20, 700))) for _ in range(count)]
        ts = [T0 + 10 * i + (rng.randint(-5, 5) if ts_jitter else j) for j in range(count)]
        b = make_batch(values, base_offset=offset, timestamps=ts, epoch=3)
        last = offset + count - 1
        seg.append(last, max(ts), last, b)
        batches.append((offset, last, b, max(ts)))
        offset = last + 1
    return batches


def _read(medium, path):
    return medium.read_bytes(path)


def test_file_names_are_20_digit_base_offsets(medium_dir):
    medium, d = medium_dir
    seg = _segment(medium, d, 368769)
    _fill(seg, 3, base=368769)
    seg.close()
    names = medium.listdir(d)
    assert "00000000000000368769.log" in names
    assert "00000000000000368769.index" in names
    assert "00000000000000368769.timeindex" in names
    assert offset_from_file_name("00000000000000368769.log.swap") == 368769


def test_append_builds_sparse_index_per_interval_rule(medium_dir):
    medium, d = medium_dir
    seg = _segment(medium, d)
    batches = _fill(seg, 60)
    seg.close()
    data = _read(medium, seg.log_path)
    assert data == b"".join(b for _, _, b, _ in batches)
    parsed = parse_batches(data)
    assert [p.base_offset for p in parsed] == [b[0] for b in batches]
    sizes = [len(b) for _, _, b, _ in batches]
    rows = expected_append_index(sizes, 4096)
    assert rows, "the test must produce index entries"
    entries = parse_offset_index(_read(medium, seg.offset_index_path), BASE)
    # the LAST offset of the append maps to the position of its FIRST batch (§1.8)
    assert entries == [(batches[i][1], parsed[i].position) for i in rows]
    # index is trimmed at close: exactly its entries
    assert len(_read(medium, seg.offset_index_path)) == 8 * len(rows)
    tentries = parse_time_index(_read(medium, seg.time_index_path), BASE)
    ts = [t for t, _ in tentries]
    assert ts == sorted(set(ts)), "time index timestamps strictly increase"
    offs = [o for _, o in tentries]
    assert offs == sorted(offs)
    # final entry written at close: the segment's max timestamp and its batch's last offset
    max_ts = max(b[3] for b in batches)
    assert tentries[-1] == (max_ts, max(b[1] for b in batches if b[3] == max_ts))


def test_first_append_never_indexed_and_interval_is_strict(medium_dir):
    medium, d = medium_dir
    seg = _segment(medium, d, interval=100)
    b0 = make_batch([b"x" * 100], base_offset=BASE)
    seg.append(BASE, T0, BASE, b0)
    assert seg.offset_index.entries == 0
    b1 = make_batch([b"y"], base_offset=BASE + 1)
    seg.append(BASE + 1, T0, BASE + 1, b1)
    assert len(b0) > 100
    assert seg.offset_index.entries == 1
    assert tuple(seg.offset_index.entry(0)) == (BASE + 1, len(b0))


def test_read_starts_at_batch_containing_offset(medium_dir):
    medium, d = medium_dir
    seg = _segment(medium, d, interval=512)
    batches = _fill(seg, 40)
    data = _read(medium, seg.log_path)
    parsed = parse_batches(data)
    for (first, last, _b, _), p in zip(batches, parsed, strict=True):
        for o in (first, last):
            info = seg.read(o, 1 << 20)
            assert info.fetch_offset_metadata == (o, BASE, p.position)
            assert bytes(info.records) == data[p.position:]
            assert not info.first_entry_incomplete
    first, last, b, _ = batches[5]
    small = seg.read(first, 10)
    assert len(small.records) == 10 and small.first_entry_incomplete
    one = seg.read(first, 10, min_one_message=True)
    assert bytes(one.records) == b and not one.first_entry_incomplete
    bounded = seg.read(first, 1 << 20, max_position=parsed[7].position)
    assert bytes(bounded.records) == data[parsed[5].position:parsed[7].position]
    unknown = seg.read(first, 1 << 20, max_position=-1)
    assert bytes(unknown.records) == b"" and unknown.fetch_offset_metadata.message_offset == first
    assert seg.read(batches[-1][1] + 1, 100) is None
    assert seg.read_next_offset() == batches[-1][1] + 1


def test_read_takes_the_bytes_the_file_holds_on_either_side_of_the_search_window(medium_dir):
    """A read answers with the file's bytes whether they lie within the window the offset
    search has just read (index floor position + 8 KiB) or run past it."""
    medium, d = medium_dir
    seg = _segment(medium, d, interval=4096)
    batches = _fill(seg, 30, seed=7)
    data = _read(medium, seg.log_path)
    parsed = parse_batches(data)
    seen_inside = seen_past = False
    for (first, _last, b, _), p in zip(batches, parsed, strict=True):
        floor = seg.offset_index.lookup(first)[1]
        for size in (1, len(b), 8192 - (p.position - floor), 8193, 3 * 8192):
            info = seg.read(first, size)
            want = data[p.position:p.position + size]
            assert bytes(info.records) == want
            assert info.first_entry_incomplete == (size < len(b))
            inside = p.position + len(want) <= floor + 8192
            seen_inside |= inside
            seen_past |= not inside
    assert seen_inside and seen_past


def test_read_of_new_segment_finds_batches_without_building_its_index(medium_dir):
    """A new segment whose pre-allocated index files exist but whose index objects are not
    built yet (the log's first segment) holds no index entries: a read finds every batch from
    position 0 without building the offset index; once appends add entries, reads use them."""
    medium, d = medium_dir
    for path, size in ((log_file_path(d, BASE), 0), (offset_index_path(d, BASE), 8 * 1024),
                       (time_index_path(d, BASE), 12 * 1024)):
        f = medium.open(path, create=True)  # what the log's creation leaves: pre-allocated
        f.truncate(size)
        f.close()
    seg = LogSegment(medium, d, BASE, index_interval_bytes=2048, clock=ManualClock(T0),
                     file_already_exists=True, index_files_preallocated=True)
    batches = _fill(seg, 3)
    assert seg._offset_index is None  # noqa: SLF001 - not built by the appends so far
    parsed = parse_batches(_read(medium, seg.log_path))
    for (first, last, b, _), p in zip(batches, parsed, strict=True):
        for o in (first, last):
            info = seg.read(o, 1 << 20)
            assert info.fetch_offset_metadata == (o, BASE, p.position)
            assert bytes(info.records[: len(b)]) == b
    assert seg._offset_index is None  # noqa: SLF001 - the reads did not build it
    more = _fill(seg, 12, base=batches[-1][1] + 1, seed=2)
    entries = parse_offset_index(_read(medium, seg.offset_index_path), BASE)
    entries = [e for e in entries if e != (BASE, 0)]
    assert entries  # the appends crossed index.interval.bytes
    parsed = parse_batches(_read(medium, seg.log_path))
    for (first, _last, b, _), p in zip(batches + more, parsed, strict=True):
        info = seg.read(first, 1 << 20)
        assert info.fetch_offset_metadata == (first, BASE, p.position)
        assert bytes(info.records[: len(b)]) == b


def _reads(seg, offsets, sizes, positions):
    """Every read of ``offsets`` x ``sizes`` x ``positions`` x min_one_message: (metadata,
    records, incomplete) or None."""
    out = []
    for o in offsets:
        for size in sizes:
            for pos in positions:
                for one in (False, True):
                    info = seg.read(o, size, pos, one)
                    out.append(None if info is None else (
                        info.fetch_offset_metadata, bytes(info.records),
                        info.first_entry_incomplete))
    return out


def test_reads_of_the_last_append_agree_with_the_index_walk(medium_dir):
    """A read of an offset of the segment's last append (a follower's usual read) is answered
    from where that append began (one batch: without the header walk). The same segment's
    files opened afresh (nothing remembered: index lookup, then the walk) answer every read
    alike: offsets inside, before, between and past the last append, one-batch and
    several-batch appends, after a truncation cut into the last append, and after an append
    following it."""
    medium, d = medium_dir
    seg = _segment(medium, d, interval=512)
    batches = _fill(seg, 12, seed=3)
    next_offset = batches[-1][1] + 1

    def check():
        fresh = _segment(medium, d, exists=True, interval=512)
        data = _read(medium, seg.log_path)
        parsed = parse_batches(data)
        offsets = sorted({p.base_offset for p in parsed} | {p.last_offset for p in parsed}
                         | {p.last_offset + 1 for p in parsed} | {BASE})
        sizes = (0, 1, 100, 1 << 20)
        positions = (None, -1, len(data), parsed[-1].position if parsed else 0,
                     parsed[-1].position + 30 if parsed else 5)
        got = _reads(seg, offsets, sizes, positions)
        assert got == _reads(fresh, offsets, sizes, positions)
        assert any(r is not None and r[1] for r in got)
        fresh.close()

    check()  # the last append is one batch
    rng = random.Random(5)
    multi = b""
    for _ in range(3):  # then one append of three batches
        count = rng.randint(1, 4)
        values = [bytes(rng.randrange(256) for _ in range(rng.randint(20, 300)))
                  for _ in range(count)]
        multi += make_batch(values, base_offset=next_offset,
                            timestamps=[T0 + j for j in range(count)], epoch=3)
        next_offset += count
    seg.append(next_offset - 1, T0 + 3, next_offset - 1, multi)
    check()
    second = parse_batches(_read(medium, seg.log_path))[-2]
    seg.truncate_to(second.base_offset)  # cuts into the last append
    check()
    _fill(seg, 1, base=seg.read_next_offset(), seed=9)  # an append after the cut
    check()


def test_truncate_to_cuts_at_batch_start(medium_dir):
    medium, d = medium_dir
    seg = _segment(medium, d, interval=256)
    batches = _fill(seg, 30)
    parsed = parse_batches(_read(medium, seg.log_path))
    k = 17
    target = batches[k][0] + (1 if batches[k][1] > batches[k][0] else 0)  # maybe inside batch k
    removed = seg.truncate_to(target)
    assert seg.size == parsed[k].position
    assert removed == sum(p.size for p in parsed[k:])
    assert seg.read_next_offset() == batches[k][0]
    assert all(o < target for o, _ in [tuple(seg.offset_index.entry(i)) for i in range(seg.offset_index.entries)])
    seg.close()
    entries = parse_offset_index(_read(medium, seg.offset_index_path), BASE)
    assert all(o < target for o, _ in entries)
    tentries = parse_time_index(_read(medium, seg.time_index_path), BASE)
    assert all(o < target for _, o in tentries)
    assert tentries[-1][0] == max(b[3] for b in batches[:k])


def test_truncate_to_base_empties_segment(medium_dir):
    medium, d = medium_dir
    clock = ManualClock(T0)
    seg = _segment(medium, d, clock=clock)
    _fill(seg, 5)
    clock.advance(1000)
    seg.truncate_to(BASE)
    assert seg.size == 0 and seg.read_next_offset() == BASE
    assert seg.created == T0 + 1000


def test_recover_rebuilds_index_with_recovery_rule(medium_dir):
    medium, d = medium_dir
    seg = _segment(medium, d, interval=1024)
    batches = _fill(seg, 50, ts_jitter=True)
    seg.close()
    data = _read(medium, seg.log_path)
    medium.remove(seg.offset_index_path)
    medium.remove(seg.time_index_path)
    seg = _segment(medium, d, interval=1024, exists=True)
    result = seg.recover()
    assert result.truncated_bytes == 0 and result.next_offset == batches[-1][1] + 1
    parsed = parse_batches(data)
    rows = expected_recovery_index([p.position for p in parsed], 1024)
    entries = parse_offset_index(_read(medium, seg.offset_index_path), BASE)
    assert entries == [(parsed[i].last_offset, parsed[i].position) for i in rows]
    tentries = parse_time_index(_read(medium, seg.time_index_path), BASE)
    running, expected = -1, []
    owner = BASE
    for i, p in enumerate(parsed):
        if p.max_timestamp > running:
            running, owner = p.max_timestamp, p.last_offset
        if i in rows and (not expected or running > expected[-1][0]):
            expected.append((running, owner))
    if not expected or running > expected[-1][0]:
        expected.append((running, owner))
    assert tentries == expected


@pytest.mark.parametrize("damage", ["torn", "flip", "zeros"])
def test_recover_cuts_at_first_bad_batch(medium_dir, damage):
    medium, d = medium_dir
    seg = _segment(medium, d, interval=512)
    batches = _fill(seg, 20)
    data = _read(medium, seg.log_path)
    parsed = parse_batches(data)
    k = 12
    seg.close()
    f = medium.open(seg.log_path)
    if damage == "torn":
        f.truncate(parsed[k].position + parsed[k].size - 7)
        keep = k
    elif damage == "flip":
        pos = parsed[k].position + 40
        f.write(pos, bytes([data[pos] ^ 0x10]))
        keep = k
    else:
        f.append(bytes(300))  # zero-filled tail, as after a crash with preallocation
        keep = len(parsed)
    f.close()
    seg = _segment(medium, d, interval=512, exists=True)
    result = seg.recover()
    expected_size = parsed[keep].position if keep < len(parsed) else len(data)
    assert seg.size == expected_size
    assert result.valid_bytes == expected_size and result.truncated_bytes > 0
    assert result.reason in {"torn": ("torn",), "flip": ("crc",), "zeros": ("corrupt", "crc")}[damage]
    assert seg.read_next_offset() == batches[keep - 1][1] + 1
    assert _read(medium, seg.log_path) == data[:expected_size]


def test_recover_assigns_new_epochs(medium_dir):
    from replica_core.storage.checkpoint import LeaderEpochCheckpointFile
    from replica_core.storage.leader_epoch import LeaderEpochCache

    medium, d = medium_dir
    seg = _segment(medium, d)
    off = BASE
    for epoch in (1, 1, 2, 2, 5, 4, 5):
        b = make_batch([b"v"], base_offset=off, epoch=epoch)
        seg.append(off, T0, off, b)
        off += 1
    cache = LeaderEpochCache(LeaderEpochCheckpointFile(medium, d + "/leader-epoch-checkpoint"))
    seg.recover(cache)
    assert [tuple(e) for e in cache.entries()] == [(1, BASE), (2, BASE + 2), (5, BASE + 4)]


def test_should_roll_on_size_time_index_and_overflow(medium_dir):
    medium, d = medium_dir
    clock = ManualClock(T0)
    seg = _segment(medium, d, clock=clock)
    b = make_batch([b"a" * 50], base_offset=BASE, timestamps=[T0])
    kw = dict(max_segment_ms=1000, now_ms=T0)
    assert not seg.should_roll(max_segment_bytes=10_000, messages_size=len(b),
                               max_timestamp_in_messages=T0, max_offset_in_messages=BASE, **kw)
    seg.append(BASE, T0, BASE, b)
    # size: the append would overflow segment.bytes
    assert seg.should_roll(max_segment_bytes=2 * len(b) - 1, messages_size=len(b),
                           max_timestamp_in_messages=T0, max_offset_in_messages=BASE + 1, **kw)
    # record time, not wall time: first batch ts T0, incoming ts beyond segment.ms
    assert not seg.should_roll(max_segment_bytes=10_000, messages_size=len(b),
                               max_timestamp_in_messages=T0 + 1000, max_offset_in_messages=BASE + 1, **kw)
    assert seg.should_roll(max_segment_bytes=10_000, messages_size=len(b),
                           max_timestamp_in_messages=T0 + 1001, max_offset_in_messages=BASE + 1, **kw)
    # relative offset overflow
    assert seg.should_roll(max_segment_bytes=10_000, messages_size=len(b),
                           max_timestamp_in_messages=T0, max_offset_in_messages=BASE + 2**31, **kw)
    with pytest.raises(LogSegmentOffsetOverflowError):
        seg.append(BASE + 2**31, T0, BASE + 2**31, make_batch([b"z"], base_offset=BASE + 2**31))


def test_should_roll_uses_wall_time_without_timestamps(medium_dir):
    medium, d = medium_dir
    clock = ManualClock(T0)
    seg = _segment(medium, d, clock=clock)
    b = make_batch([b"a"], base_offset=BASE, timestamps=[-1])
    seg.append(BASE, -1, BASE, b)
    kw = dict(max_segment_bytes=10_000, messages_size=10, max_segment_ms=500,
              max_timestamp_in_messages=-1, max_offset_in_messages=BASE + 1)
    assert not seg.should_roll(now_ms=T0 + 500, **kw)
    assert seg.should_roll(now_ms=T0 + 501, **kw)


def test_should_roll_when_offset_index_full(medium_dir):
    medium, d = medium_dir
    seg = _segment(medium, d, interval=0, max_index=8 * 3)
    off = BASE
    kw = dict(max_segment_bytes=1 << 30, messages_size=10, max_segment_ms=1 << 40,
              max_timestamp_in_messages=T0, now_ms=T0)
    rolled_at = None
    for i in range(6):
        if seg.should_roll(max_offset_in_messages=off, **kw):
            rolled_at = i
            break
        seg.append(off, T0 + i, off, make_batch([b"v"], base_offset=off, timestamps=[T0 + i]))
        off += 1
    assert rolled_at is not None and seg.offset_index.is_full() or seg.time_index.is_full()


def test_on_become_inactive_trims_indexes(medium_dir):
    medium, d = medium_dir
    seg = _segment(medium, d, interval=512)
    _fill(seg, 30)
    n_off, n_time = seg.offset_index.entries, seg.time_index.entries
    seg.on_become_inactive()
    assert len(_read(medium, seg.offset_index_path)) == 8 * n_off
    assert len(_read(medium, seg.time_index_path)) in (12 * n_time, 12 * (n_time + 1))


def test_change_suffix_and_delete(medium_dir):
    medium, d = medium_dir
    seg = _segment(medium, d)
    _fill(seg, 3)
    seg.close_handlers()
    seg.change_file_suffixes("", ".deleted")
    assert all(n.endswith(".deleted") for n in medium.listdir(d))
    seg.delete()
    assert medium.listdir(d) == []


def test_log_segments_floor_and_values(medium_dir):
    medium, d = medium_dir
    segs = LogSegments()
    for base in (0, 50, 100):
        segs.add(_segment(medium, d, base))
    assert segs.floor(49).base_offset == 0 and segs.floor(100).base_offset == 100
    assert segs.floor(-1) is None
    assert [s.base_offset for s in segs.values(60, 2**62)] == [50, 100]
    assert [s.base_offset for s in segs.values(0, 100)] == [0, 50]
    assert segs.values(7, 7) == []
    assert segs.higher(50).base_offset == 100 and segs.higher(100) is None

def test_log_segments_made_with_one_segment_is_that_segment_added(medium_dir):
    medium, d = medium_dir
    seg = _segment(medium, d, 7)
    one, added = LogSegments(seg), LogSegments()
    added.add(seg)
    assert one.base_offsets() == added.base_offsets() == [7]
    assert one.last is seg and one.floor(9) is seg and one.get(7) is seg and len(one) == 1
    one.add(_segment(medium, d, 20))
    assert one.base_offsets() == [7, 20] and added.base_offsets() == [7]  # nothing shared


@pytest.mark.parametrize("d", ["/x/y", "x", "/", "x/", "", "./a/../b"])
def test_segment_file_paths_join_as_os_path_join(d):
    """The ``.log`` path is ``os.path.join(dir, 20-digit base + ".log" + suffix)``."""
    import os

    from replica_core.storage.segment import log_file_path

    for base, suffix in ((0, ""), (123, ".deleted"), (2**62, ".cleaned")):
        assert log_file_path(d, base, suffix) == os.path.join(d, f"{base:020d}.log{suffix}")


def test_segment_created_ms_is_its_creation_time_for_rolling():
    """``created_ms`` stands for the creation time (the clock's now by default): a segment
    with no batch timestamp rolls on wall time measured from it (§2.7)."""
    medium = MemoryMedium()
    medium.makedirs("/d")
    clock = ManualClock(5_000)
    assert LogSegment(medium, "/d", 0, clock=clock).created == 5_000
    seg = LogSegment(medium, "/d", 10, clock=clock, created_ms=1_000)
    assert seg.created == 1_000
    seg.append(10, -1, 10, make_batch([b"v"], base_offset=10, timestamps=[-1]))
    assert seg.time_waited_for_roll(5_000, -1) == 4_000


def test_last_is_kept_by_every_change_of_the_segments():
    """``LogSegments.last`` (a plain attribute) is the segment with the highest base offset
    after every add (in or out of order, replacing one at the same base), removal (of the last
    one or another, of a base it does not hold) and clear; None when empty."""
    medium = MemoryMedium()
    medium.makedirs("/data/topic-0")
    rng = random.Random(5)
    segs = LogSegments()
    assert segs.last is None
    held: dict[int, LogSegment] = {}
    for step in range(300):
        kind = rng.random()
        base = rng.choice((0, 10, 20, 30, 40, 50))
        if kind < 0.55:
            seg = _segment(medium, "/data/topic-0", base, exists=base in held)
            segs.add(seg)
            held[base] = seg
        elif kind < 0.95:
            assert segs.remove(base) is held.pop(base, None)
        else:
            segs.clear()
            held.clear()
        assert segs.last is (held[max(held)] if held else None), step
    assert LogSegments(held[max(held)] if held else None).last is segs.last
