"""``verify`` and ``dump-log`` on the index files a broker leaves after an unclean stop.

Kafka creates an active segment's ``.index`` at ``segment.index.bytes`` (10 MiB) and its
``.timeindex`` at the largest multiple of 12 below that (``AbstractIndex``: ``setLength(
roundDownToExactMultiple(maxIndexSize, entrySize))``) and trims them only on roll or clean
shutdown; here such files are made the way the JVM makes them, by extending the file
(``os.truncate``: a hole on file systems that have them), after real entries written by our log.
Expected entries come from ``storage_testlib`` (struct walks of the trimmed files).
"""
from __future__ import annotations

import io
import os
import shutil
import stat

import pytest
from storage_testlib import parse_batches, parse_offset_index, parse_time_index

from replica_core.clock import ManualClock
from replica_core.records import build_batch
from replica_core.storage.config import LogConfig
from replica_core.storage.dump import main as dump_main
from replica_core.storage.dump import verify_log_dir
from replica_core.storage.index_extent import written_extent
from replica_core.storage.log import Log

T0 = 1_700_000_000_000
INDEX_BYTES = 10 * 1024 * 1024           # segment.index.bytes default
TIME_INDEX_BYTES = INDEX_BYTES // 12 * 12  # 10485756
MAX_PROBE_BYTES = 64 * 12                # a binary search over 1.3 M slots: ~21 single-slot reads


def _write_partition(tmp_path, batches=40):
    part = tmp_path / "t-0"
    log = Log.open(str(part), LogConfig.from_properties({"index.interval.bytes": 200}),
                   clock=ManualClock(T0))
    for i in range(batches):
        log.append_as_leader(build_batch([b"v%03d" % i * 20], timestamps=[T0 + 10 + i]), 3)
    log.flush()
    log.close()
    return part


def _paths(part):
    stem = str(part / "00000000000000000000")
    return stem + ".log", stem + ".index", stem + ".timeindex"


def _preallocate(path, size, *, sparse=True):
    """Extend to ``size`` as RandomAccessFile.setLength does, or write the zeros out."""
    if sparse:
        os.truncate(path, size)
    else:
        with open(path, "ab") as fh:
            fh.write(b"\x00" * (size - os.path.getsize(path)))


def _extent(path, entry_size):
    with open(path, "rb") as fh:
        return written_extent(fh.fileno(), entry_size)


@pytest.mark.parametrize("sparse", [True, False], ids=["sparse", "zeros-written"])
def test_verify_accepts_preallocated_indexes_with_entries(tmp_path, sparse):
    part = _write_partition(tmp_path)
    log_path, idx, tidx = _paths(part)
    entries = parse_offset_index(open(idx, "rb").read(), 0)
    tentries = parse_time_index(open(tidx, "rb").read(), 0)
    assert len(entries) > 5 and len(tentries) > 5
    before = verify_log_dir(str(part))
    assert before.ok and not before.warnings

    _preallocate(idx, INDEX_BYTES, sparse=sparse)
    _preallocate(tidx, TIME_INDEX_BYTES, sparse=sparse)
    report = verify_log_dir(str(part))
    assert report.ok, report.render(verbose=True)
    warnings = {f.where.split("/")[-1]: f.message for f in report.warnings}
    assert warnings["00000000000000000000.index"].startswith(
        f"preallocated, {len(entries)} of {INDEX_BYTES // 8} slots written")
    assert warnings["00000000000000000000.timeindex"].startswith(
        f"preallocated, {len(tentries)} of {TIME_INDEX_BYTES // 12} slots written")
    assert [vars(p) for p in report.partitions] == [
        dict(vars(p), warnings=2) for p in before.partitions]

    # the written entries are found by a few single-slot reads, not by reading 10 MiB
    for path, size, n in ((idx, 8, len(entries)), (tidx, 12, len(tentries))):
        extent = _extent(path, size)
        assert extent.entries == n
        assert 0 < extent.bytes_read <= MAX_PROBE_BYTES

    # and dump-log prints exactly the entries of the trimmed file
    out, err = io.StringIO(), io.StringIO()
    assert dump_main([idx, tidx], out, err) == 0, err.getvalue()
    lines = out.getvalue().splitlines()
    assert lines == ([f"Dumping {idx}"] + [f"offset: {o} position: {p}" for o, p in entries]
                     + [f"Dumping {tidx}"] + [f"timestamp: {t} offset: {o}" for t, o in tentries])


def test_verify_accepts_never_written_preallocated_indexes(tmp_path):
    """Both files all zeros (a segment rolled just before the crash): slot 0 is not an entry,
    so no "entry 0 (offset 0) points at position 0" and no "timestamp 0 above every batch's
    max timestamp"."""
    part = _write_partition(tmp_path)
    log_path, idx, tidx = _paths(part)
    for path, size in ((idx, INDEX_BYTES), (tidx, TIME_INDEX_BYTES)):
        os.truncate(path, 0)
        _preallocate(path, size)
    report = verify_log_dir(str(part))
    assert report.ok, report.render(verbose=True)
    assert not any("position 0" in f.message or "timestamp 0" in f.message
                   for f in report.findings)
    assert _extent(idx, 8).entries == 0 and _extent(tidx, 12).entries == 0
    assert _extent(idx, 8).bytes_read <= MAX_PROBE_BYTES

    # dump-log follows Kafka, which counts every slot of the file: it prints slot 0 and stops
    # at slot 1 (a zero entry after slot 0); slot 0 = (offset 0, position 0) matches the first
    # batch, whose last offset is 0, so no mismatch is reported
    out, err = io.StringIO(), io.StringIO()
    assert dump_main([idx, tidx], out, err) == 0
    assert out.getvalue().splitlines() == [f"Dumping {idx}", "offset: 0 position: 0",
                                           f"Dumping {tidx}", "timestamp: 0 offset: 0"]
    assert f"Found timestamp mismatch in :{os.path.abspath(tidx)}" in err.getvalue()
    out = io.StringIO()
    assert dump_main([idx, tidx, "--index-sanity-check"], out, io.StringIO()) == 0
    assert out.getvalue().splitlines()[1] == f"{idx} passed sanity check."


def test_verify_still_finds_bad_entries_before_the_zero_tail(tmp_path):
    part = _write_partition(tmp_path)
    log_path, idx, tidx = _paths(part)
    raw = bytearray(open(idx, "rb").read())
    entries = parse_offset_index(bytes(raw), 0)
    raw[2 * 8 + 4:2 * 8 + 8] = (entries[2][1] + 1).to_bytes(4, "big")  # entry 2: mid-batch
    with open(idx, "wb") as fh:
        fh.write(raw)
    _preallocate(idx, INDEX_BYTES)
    report = verify_log_dir(str(part))
    assert [f.message for f in report.errors] == [
        f"entry 2 (offset {entries[2][0]}) points at position {entries[2][1] + 1}, which is not "
        "the start of a batch"]


def test_fixture_partition_with_preallocated_indexes(tmp_path, fixture_logs):
    """A real Kafka 3.1.0 partition whose trimmed index files are given their preallocated
    zero tails again: verify's verdict and per-partition figures are those of the trimmed
    files."""
    src = fixture_logs / "kafka-3.1.0-zk/data/kafka-logs/design-0"
    part = tmp_path / "design-0"
    shutil.copytree(src, part)
    for n in os.listdir(part):
        os.chmod(part / n, os.stat(part / n).st_mode | stat.S_IWUSR)
    log_path, idx, tidx = _paths(part)
    n_idx = len(parse_offset_index(open(idx, "rb").read(), 0))
    n_tidx = len(parse_time_index(open(tidx, "rb").read(), 0))
    assert n_idx > 0 and n_tidx > 0 and parse_batches(open(log_path, "rb").read())
    before = verify_log_dir(str(part))
    assert before.ok
    _preallocate(idx, INDEX_BYTES)
    _preallocate(tidx, TIME_INDEX_BYTES)
    after = verify_log_dir(str(part))
    assert after.ok, after.render(verbose=True)
    assert after.partitions[0].batches == before.partitions[0].batches
    assert len(after.warnings) == len(before.warnings) + 2
    assert _extent(idx, 8).entries == n_idx and _extent(tidx, 12).entries == n_tidx


def test_written_extent_edge_cases(tmp_path):
    p = tmp_path / "00000000000000000000.index"
    p.write_bytes(b"")
    assert tuple(_extent(str(p), 8)) == (0, 0, 0)
    p.write_bytes(b"\x00" * 8)  # one zero slot: no entry
    assert _extent(str(p), 8)[:2] == (0, 1)
    p.write_bytes((0).to_bytes(4, "big") + (0).to_bytes(4, "big")
                  + (5).to_bytes(4, "big") + (700).to_bytes(4, "big") + b"\x00" * 800)
    # a real first entry (offset 0 at position 0) followed by another is two entries
    assert _extent(str(p), 8)[:2] == (2, 102)
    p.write_bytes(b"\x01" * 8 * 1000)  # a full, trimmed index: every slot written
    assert _extent(str(p), 8)[:2] == (1000, 1000)
