"""Loading a log after a crash reads each recovered segment once (issue 13): the shortcuts
against the steps they replace.

* the producer-state rebuild takes a recovered segment's batches from the header rows its
  recovery scan found instead of scanning the file again (``SegmentRecovery.headers``,
  ``log._loaded_producer_batches``);
* recovery leaves both indexes built over the handles that rewrote them
  (``_Index.over_written_file``), as opening the files again would build them;
* a leader-epoch checkpoint content is parsed once per broker (``LeaderEpochCheckpointFile``),
  an offset checkpoint as written in one pass (``OffsetCheckpointFile``);
* a 20-digit segment file name is parsed once (``loader._canonical_prefix``).
"""
from __future__ import annotations

import struct

import numpy as np
import pytest

from replica_core.clock import ManualClock
from replica_core.errors import CorruptCheckpointError
from replica_core.records import build_batch
from replica_core.storage.checkpoint import (
    CheckpointFile,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
)
from replica_core.storage.config import LogConfig
from replica_core.storage.index import OffsetIndex, TimeIndex
from replica_core.storage.loader import _canonical_prefix
from replica_core.storage.log import (
    Log,
    _loaded_producer_batches,
    _segment_producer_batches,
)
from replica_core.storage.medium import FileMedium, MemoryMedium
from replica_core.storage.producer_state import _in_range
from replica_core.storage.segment import (
    LogSegments,
    is_canonical_file_name,
    offset_from_file_name,
)

T0 = 1_700_000_000_000
DIR = "/data/topic-0"


def _crashed_log(batches: int, segment_bytes: int = 100_000) -> tuple[MemoryMedium, LogConfig]:
    """A log of producer batches (three producers) mixed with plain ones, then a process crash
    (no clean close: the next open recovers every segment)."""
    medium, clock = MemoryMedium(), ManualClock(T0)
    medium.makedirs("/data")
    config = LogConfig.from_properties({"segment.bytes": segment_bytes,
                                        "index.interval.bytes": 256})
    lg = Log.open(DIR, config, medium=medium, clock=clock)
    seqs = {1: 0, 2: 0, 3: 0}
    for i in range(batches):
        pid = 1 + i % 3
        if i % 4 == 3:
            lg.append_as_leader(build_batch([b"plain"] * 2, timestamps=[T0 + i] * 2), 0)
            continue
        lg.append_as_leader(build_batch([b"v%d" % i] * 2, producer_id=pid, producer_epoch=0,
                                        base_sequence=seqs[pid], timestamps=[T0 + i] * 2), 0)
        seqs[pid] += 2
    lg.flush()
    medium.crash("process")
    return medium, config


def _recovered_segments(medium: MemoryMedium, config: LogConfig
                        ) -> tuple[LogSegments, dict[int, tuple[object, np.ndarray]]]:
    """The log's segments, each recovered, with the header rows each recovery returned."""
    lg = Log.open(DIR, config, medium=medium, clock=ManualClock(T0), had_clean_shutdown=True)
    segments = lg.segments
    scanned = {seg.base_offset: (seg, seg.recover().headers) for seg in segments}
    return segments, scanned


@pytest.mark.parametrize("batches", [7, 150])  # a few rows (Python filter), many (numpy)
def test_recovery_rows_are_what_a_scan_of_the_recovered_file_yields(batches):
    medium, config = _crashed_log(batches)
    segments, scanned = _recovered_segments(medium, config)
    for seg in segments:
        rows = scanned[seg.base_offset][1]
        scan = np.concatenate(list(seg.scan_headers(0)))
        assert rows.shape == scan.shape and rows.shape[0] > 0
        # every column but the CRC verdict (recovery checks CRCs, a plain scan does not)
        assert np.array_equal(rows[:, :-1], scan[:, :-1])


@pytest.mark.parametrize("batches", [7, 150])
def test_producer_batches_from_recovery_rows_equal_those_read_again(batches):
    medium, config = _crashed_log(batches)
    segments, scanned = _recovered_segments(medium, config)
    assert len(scanned) == 1 and len(scanned[0][1]) == batches
    leo = segments.last.read_next_offset()
    windows = [(0, leo), (0, 1), (5, leo), (leo // 3, 2 * leo // 3), (leo - 1, leo), (leo, leo)]
    for start, end in windows:
        fast = list(_in_range(_loaded_producer_batches(segments, scanned, 0, start, end),
                              start, end))
        slow = list(_in_range(_segment_producer_batches(segments, 0, start, end), start, end))
        assert fast == slow
        if end - start > 6:
            assert fast  # the window holds producer batches


def test_a_segment_not_recovered_in_this_load_is_read_from_its_file():
    medium, config = _crashed_log(9)
    segments, scanned = _recovered_segments(medium, config)
    leo = segments.last.read_next_offset()
    other = {0: (object(), scanned[0][1][:0])}  # rows of another segment object: not used
    fast = list(_loaded_producer_batches(segments, other, 0, 0, leo))
    assert fast == list(_in_range(_segment_producer_batches(segments, 0, 0, leo), 0, leo))
    assert len(fast) == 7  # 9 batches, two of them plain


def test_an_unclean_open_rebuilds_the_producer_state_the_slow_way_rebuilds():
    """Log.open after a crash (rows from recovery) against the same log's state rebuilt by
    reading the segments again (Log._rebuild_producer_state, the truncation path)."""
    medium, config = _crashed_log(40, segment_bytes=1500)
    lg = Log.open(DIR, config, medium=medium, clock=ManualClock(T0), had_clean_shutdown=False)
    assert len(lg.segments) >= 3 and lg.recovery_report.recovered_segments
    loaded = {pid: e.to_snapshot_entry() for pid, e in lg.producer_state.active_producers.items()}
    assert sorted(loaded) == [1, 2, 3]
    leo = lg.log_end_offset
    lg.producer_state.truncate_fully_and_start_at(lg.log_start_offset)
    lg._rebuild_producer_state(leo)  # noqa: SLF001 - the file-reading rebuild
    again = {pid: e.to_snapshot_entry() for pid, e in lg.producer_state.active_producers.items()}
    assert again == loaded


def _index_state(index) -> tuple:
    return (index.path, index.base_offset, index.max_index_size, index.entries,
            index.max_entries, index.length, index.last_entry(), index._appended)  # noqa: SLF001


@pytest.mark.parametrize("kind", [OffsetIndex, TimeIndex])
@pytest.mark.parametrize("entries", [0, 1, 5])
@pytest.mark.parametrize("medium_kind", ["memory", "file"])
def test_an_index_over_its_written_file_is_the_index_opened_again(kind, entries, medium_kind,
                                                                   tmp_path):
    if medium_kind == "memory":
        medium, d = MemoryMedium(), "/seg"
        medium.makedirs(d)
    else:
        medium, d = FileMedium(), str(tmp_path)
    base = 1000
    if kind is OffsetIndex:
        data = b"".join(struct.pack(">ii", 3 * i + 1, 100 * i) for i in range(entries))
    else:
        data = b"".join(struct.pack(">qi", T0 + 10 * i, 3 * i + 1) for i in range(entries))
    path = f"{d}/00000000000000001000{'.index' if kind is OffsetIndex else '.timeindex'}"
    f = medium.open(path, create=True)
    f.truncate(len(data))
    if data:
        f.write(0, data)
    built = kind.over_written_file(medium, path, base, 4096, f, data)
    opened = kind(medium, path, base, 4096)
    assert _index_state(built) == _index_state(opened)
    if entries:
        assert built.last_entry() == ((base + 3 * (entries - 1) + 1, 100 * (entries - 1))
                                      if kind is OffsetIndex
                                      else (T0 + 10 * (entries - 1), base + 3 * (entries - 1) + 1))
    for target in (base - 1, base, base + 4, base + 100):
        probe = target if kind is OffsetIndex else T0 + target - base
        assert built.lookup(probe) == opened.lookup(probe)
    # resized as the active segment's are at load: the entries stay, the length grows
    assert built.resize(4096) and opened.resize(4096)
    assert _index_state(built) == _index_state(opened)
    opened.close_handler()
    built.close()
    assert medium.read_bytes(path) == data  # closing trims to the entries


def test_recovery_leaves_indexes_as_reopening_them_would():
    medium, config = _crashed_log(60)
    lg = Log.open(DIR, config, medium=medium, clock=ManualClock(T0), had_clean_shutdown=False)
    seg = lg.segments.last
    assert lg.recovery_report.recovered_segments == [0]
    for index, kind, path in ((seg._offset_index, OffsetIndex, seg.offset_index_path),  # noqa: SLF001
                              (seg._time_index, TimeIndex, seg.time_index_path)):  # noqa: SLF001
        es = kind.ENTRY_SIZE  # re-expanded to segment.index.bytes, whole entries
        assert index is not None and index.length == es * (seg.max_index_size // es)
        reopened = kind(medium, path, seg.base_offset, seg.max_index_size)
        reopened._entries = index.entries  # noqa: SLF001 - a file is taken as full when opened
        reopened._reload_last()  # noqa: SLF001
        assert index.entries > 0 and index.last_entry() == reopened.last_entry()
        reopened.close_handler()
    # reads through the rebuilt indexes find every batch
    for offset in (0, 31, 77, lg.log_end_offset - 1):
        info = lg.read(offset, 100_000)
        assert int(np.frombuffer(bytes(info.records[:8]), ">i8")[0]) <= offset


def test_an_epoch_checkpoint_content_is_parsed_once_and_copied_out():
    medium = MemoryMedium()
    medium.makedirs("/d")
    checkpoint = LeaderEpochCheckpointFile(medium, "/d/leader-epoch-checkpoint")
    raw = b"0\n2\n0 0\n3 17\n"
    first = checkpoint.decode(raw)
    first.append((9, 99))  # the caller's own list
    second = checkpoint.decode(bytes(raw))
    general = CheckpointFile.decode(checkpoint, raw)  # the general reading rules
    assert second == general == [(0, 0), (3, 17)]
    assert checkpoint.decode(b"0\n1\n5 40\n") == [(5, 40)]


NAMES = ["00000000000000000000.log", "00000000000000000005.index", "5.log",
         "09223372036854775807.log", "09223372036854775808.log", "10000000000000000000.log",
         "0000000000000000000\u00b2.log", "00000000000000000000log", "000000000000000000000.log",
         "00000000000000000012.timeindex.deleted", "\u0660" * 20 + ".log", "x.log",
         "00000000000000000042.txnindex"]


@pytest.mark.parametrize("name", NAMES)
def test_a_20_digit_name_is_read_as_the_general_functions_read_it(name):
    if _canonical_prefix(name):
        assert offset_from_file_name(name) == int(name[:20])
        assert is_canonical_file_name(name)
        return
    try:
        offset_from_file_name(name)
    except ValueError:
        return
    # declined: not Kafka's 20 ASCII digits (a non-ASCII digit is left to the general path)
    assert not (is_canonical_file_name(name) and name[:20].isascii())


def test_the_name_family_holds_both_kinds():
    assert sum(map(_canonical_prefix, NAMES)) == 5


def test_only_the_active_segment_keeps_the_indexes_recovery_built():
    """Inactive recovered segments leave the load with their index objects unbuilt, as
    before (they open from their files on first use, so flushing them fsyncs what it did)."""
    medium, config = _crashed_log(40, segment_bytes=1500)
    lg = Log.open(DIR, config, medium=medium, clock=ManualClock(T0), had_clean_shutdown=False)
    segs = list(lg.segments)
    assert len(segs) >= 3 and lg.recovery_report.recovered_segments == [s.base_offset for s in segs]
    for seg in segs[:-1]:
        assert seg._offset_index is None and seg._time_index is None  # noqa: SLF001
        assert seg.offset_index.entries == len(medium.read_bytes(seg.offset_index_path)) // 8
    active = segs[-1]
    assert active._offset_index is not None and active._time_index is not None  # noqa: SLF001


OFFSET_CHECKPOINTS = [
    b"0\n3\nevents 0 5\nevents 1 0\nother.topic_x 12 9223372036854775807\n",
    b"0\n0\n",
    b"0\n2\nevents 0 5\n",                        # fewer entries than the count: corrupt
    b"0\n1\nevents 0 -1\n",                       # a negative offset: read, left to the caller
    b"0\n1\nevents 0 5",                          # no final line break
    b"0\n1\r\nevents 0 5\r\n",                    # Windows line breaks
    b"0\n1\nevents  0 5\n",                       # two spaces
    b"0\n1\nevents\t0 5\n",                       # a tab
    b"0\n1\nev\xc2\x85ents 0 5\n",                # U+0085 is not Java whitespace
    b"0\n1\nevents 0 99999999999999999999\n",     # past a long
    b"0\n1\nevents 2147483648 5\n",               # past an int
    b"1\n1\nevents 0 5\n",                        # another version
    b"0\n1\nev\xffents 0 5\n",                    # not UTF-8
    b"0\n1\nevents 0 +5\n",
    b"",
]


def _outcome(decode, raw: bytes):
    """What ``decode`` makes of ``raw``: the entries, or the corruption it reports."""
    try:
        return decode(raw)
    except CorruptCheckpointError as e:
        return ("corrupt", str(e))


def _offset_checkpoint() -> OffsetCheckpointFile:
    medium = MemoryMedium()
    medium.makedirs("/d")
    return OffsetCheckpointFile(medium, "/d/recovery-point-offset-checkpoint")


@pytest.mark.parametrize("raw", OFFSET_CHECKPOINTS)
def test_an_offset_checkpoint_reads_as_the_general_rules_read_it(raw):
    checkpoint = _offset_checkpoint()
    general = _outcome(lambda r: CheckpointFile.decode(checkpoint, r), raw)
    assert _outcome(checkpoint.decode, raw) == general


def test_the_offset_checkpoint_family_holds_good_and_bad_files():
    checkpoint = _offset_checkpoint()
    corrupt = [raw for raw in OFFSET_CHECKPOINTS
               if isinstance(_outcome(checkpoint.decode, raw), tuple)]
    assert 0 < len(corrupt) < len(OFFSET_CHECKPOINTS) - 5
    assert checkpoint.decode(OFFSET_CHECKPOINTS[0]) == [
        (("events", 0), 5), (("events", 1), 0), (("other.topic_x", 12), 2**63 - 1)]
    entries = {("events", p): 7 * p for p in range(1500)}
    assert dict(checkpoint.decode(checkpoint.encode(entries.items()))) == entries
