"""Issue 19, "one partition's damage takes the whole directory offline": damage in one
partition directory is recovered or isolated, never the log directory's problem.

Real Kafka partition directories (tests/data/kafka-logs) are copied to disk and damaged the way
the issue found them: a stray segment file with a short name, a junk tail after a clean
shutdown. The healthy partitions next to the damaged one must load byte for byte.
"""
from __future__ import annotations

import os
import shutil
import stat

import pytest
from conftest import FIXTURE_LOGS
from fuzz_harness import batch_kernel_build

from replica_core.errors import CorruptRecordError
from replica_core.records import build_batch, iter_batches, scan
from replica_core.storage.config import LogConfig
from replica_core.storage.log_manager import LogManager
from replica_core.storage.segment import LogSegment

NOW = 1_700_000_000_000
KAFKA_310 = FIXTURE_LOGS / "kafka-3.1.0-zk" / "data" / "kafka-logs"
KAFKA_212 = FIXTURE_LOGS / "kafka-2.1.2-zk" / "kafka-logs"
PARTITIONS = {  # partition dir -> where it comes from
    "design-0": KAFKA_310, "design-1": KAFKA_310, "design1-0": KAFKA_310,
    "__consumer_offsets-22": KAFKA_310,
    "__consumer_offsets-17": KAFKA_212,   # two segments: 0 and 58
}
DAMAGED = "design-0"


@pytest.fixture(params=["native", "twin"])
def build(request):
    with batch_kernel_build(request.param):
        yield request.param


def log_dir(tmp_path, *, clean: bool) -> str:
    """A broker log dir of real partitions (writable copies) and the 3.1.0 broker's
    checkpoints; with the clean-shutdown marker if ``clean``."""
    root = tmp_path / "kafka-logs"
    root.mkdir()
    for name, src in PARTITIONS.items():
        shutil.copytree(src / name, root / name)
    for name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                 "replication-offset-checkpoint"):
        shutil.copy(KAFKA_310 / name, root / name)
    if clean:
        (root / ".kafka_cleanshutdown").write_bytes(b"")
    for dirpath, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(dirpath, n)
            os.chmod(p, os.stat(p).st_mode | stat.S_IWUSR)
    return str(root)


def batches_of(part_dir) -> list[bytes]:
    """Every batch of a partition's segments, by a plain scan of the files."""
    out = []
    for name in sorted(os.listdir(part_dir)):
        if len(name) == 24 and name.endswith(".log"):
            data = open(os.path.join(part_dir, name), "rb").read()
            s = scan(data)
            out += [data[p:p + n] for p, n in zip(s.positions.tolist(), s.sizes.tolist(),
                                                  strict=True)]
    return out


def read_back(log) -> list[bytes]:
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        batches = list(iter_batches(log.read(offset, 1 << 30).records))
        if not batches:
            break
        out += [bytes(b.buffer) for b in batches]
        offset = batches[-1].last_offset + 1
    return out


def expected_healthy() -> dict[tuple[str, int], list[bytes]]:
    out = {}
    for name, src in PARTITIONS.items():
        topic, _, n = name.rpartition("-")
        out[(topic, int(n))] = batches_of(src / name)
    return out


def start(root: str, **kw) -> LogManager:
    manager = LogManager(root, LogConfig(), **kw)
    manager.startup()
    assert not manager.offline_dirs, manager.loads[root].failed
    return manager


def check_healthy(manager: LogManager, skip: str = DAMAGED) -> None:
    for tp, batches in expected_healthy().items():
        if f"{tp[0]}-{tp[1]}" == skip:
            continue
        log = manager.get_log(*tp)
        assert log is not None, tp
        assert read_back(log) == batches, tp
        assert log.log_end_offset == scan(batches[-1]).last_offsets[0] + 1


def append_and_read(log) -> None:
    leo = log.log_end_offset
    info = log.append_as_leader(build_batch([b"after"], now_ms=NOW), 50)
    assert info.first_offset == leo and log.log_end_offset == leo + 1
    assert [r.value for b in iter_batches(log.read(leo, 1 << 20).records)
            for r in b.records()] == [b"after"]


# --- stray segment files with short names -----------------------------------------------------
@pytest.mark.parametrize("clean", [True, False], ids=["clean", "unclean"])
@pytest.mark.parametrize("stray", ["5.log", "00000.log"])
def test_a_stray_short_named_segment_file(tmp_path, build, clean, stray):
    root = log_dir(tmp_path, clean=clean)
    part = os.path.join(root, DAMAGED)
    real = os.path.join(part, "00000000000000000000.log")
    shutil.copy(real, os.path.join(part, stray))         # the same bytes, another name
    stray_bytes = open(os.path.join(part, stray), "rb").read()
    manager = start(root)
    check_healthy(manager, skip="")                      # the damaged partition's data too
    log = manager.get_log("design", 0)
    assert stray in log.recovery_report.ignored_files
    assert open(os.path.join(part, stray), "rb").read() == stray_bytes   # left alone
    assert not os.path.exists(os.path.join(part, "00000000000000000005.log"))
    append_and_read(log)


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "unclean"])
def test_the_only_segment_under_a_short_name(tmp_path, build, clean):
    """Kafka parses the offset from ``00000.log`` and opens ``000…0.log``: it never reads the
    short-named file. Neither do we; the partition loads empty, its neighbours untouched."""
    root = log_dir(tmp_path, clean=clean)
    part = os.path.join(root, DAMAGED)
    os.rename(os.path.join(part, "00000000000000000000.log"), os.path.join(part, "00000.log"))
    manager = start(root)
    check_healthy(manager)
    log = manager.get_log("design", 0)
    assert log is not None and log.log_end_offset == log.log_start_offset
    assert "00000.log" in log.recovery_report.ignored_files
    assert os.path.getsize(os.path.join(part, "00000.log")) > 0
    append_and_read(log)


# --- junk after the last batch ------------------------------------------------------------------
@pytest.mark.parametrize("junk", [bytes(12), bytes(16), b"\xff" * 14, bytes(range(40))],
                         ids=["12-zeros", "16-zeros", "14-ff", "40-bytes"])
def test_junk_tail_after_a_clean_shutdown(tmp_path, build, junk):
    root = log_dir(tmp_path, clean=True)
    seg = os.path.join(root, DAMAGED, "00000000000000000000.log")
    size = os.path.getsize(seg)
    with open(seg, "ab") as f:
        f.write(junk)
    manager = start(root)
    check_healthy(manager, skip="")                      # nothing of the partition was lost
    log = manager.get_log("design", 0)
    assert os.path.getsize(seg) == size                  # the tail is gone before any append
    report = log.recovery_report
    assert [c.truncated_bytes for c in report.cuts] == [len(junk)]
    append_and_read(log)
    manager.shutdown()
    again = start(root)                                  # and the next start is clean again
    check_healthy(again, skip=DAMAGED)
    reloaded = again.get_log("design", 0)
    assert reloaded.log_end_offset == log.log_end_offset
    assert not reloaded.recovery_report.cuts
    last = list(iter_batches(read_back(reloaded)[-1]))[0]
    assert [r.value for r in last.records()] == [b"after"]


def test_junk_tail_with_the_recovery_point_past_the_end(tmp_path, build):
    """An unclean start whose recovery-point checkpoint lies beyond the log recovers no
    segment; the active one is still checked."""
    root = log_dir(tmp_path, clean=False)
    with open(os.path.join(root, "recovery-point-offset-checkpoint"), "w") as f:
        f.write(f"0\n1\ndesign 0 {2**63 - 1}\n")
    seg = os.path.join(root, DAMAGED, "00000000000000000000.log")
    size = os.path.getsize(seg)
    with open(seg, "ab") as f:
        f.write(bytes(range(29)))
    manager = start(root)
    check_healthy(manager, skip="")
    assert os.path.getsize(seg) == size


def test_a_short_junk_tail_is_no_batch_to_a_file_reader(tmp_path, build):
    """FileLogInputStream takes no batch from the last 17 bytes of a file: a segment that is not
    the active one keeps working with such a tail (a longer corrupt one is still an error)."""
    part = tmp_path / "__consumer_offsets-17"
    shutil.copytree(KAFKA_212 / "__consumer_offsets-17", part)
    for p in part.iterdir():
        os.chmod(p, os.stat(p).st_mode | stat.S_IWUSR)
    data = (part / "00000000000000000000.log").read_bytes()
    s = scan(data)
    for junk, ok in ((bytes(12), True), (bytes(17), True), (bytes(18), False)):
        (part / "00000000000000000000.log").write_bytes(data + junk)
        seg = LogSegment.open(_medium(), str(part), 0, LogConfig(), file_already_exists=True)
        try:
            if ok:
                headers = list(seg.scan_headers(0))
                assert sum(len(h) for h in headers) == len(s)
                assert seg.translate_offset(int(s.last_offsets[-1]) + 1) is None
                assert seg.read_next_offset() == int(s.last_offsets[-1]) + 1
            else:
                with pytest.raises(CorruptRecordError):
                    list(seg.scan_headers(0))
        finally:
            seg.close_handlers()


def _medium():
    from replica_core.storage.medium import FileMedium

    return FileMedium()


# --- a partition that only loads with full recovery ---------------------------------------------
def test_a_partition_failing_its_clean_load_is_recovered_alone(tmp_path, build):
    """``segment.index.bytes`` lowered below what the real index holds: loading after a clean
    shutdown cannot resize the index; the partition is loaded again with full recovery (which
    rebuilds its indexes within the new size) and nothing else is touched."""
    root = log_dir(tmp_path, clean=True)
    small = LogConfig(segment_index_bytes=16)
    manager = start(root, topic_configs={"design": small})
    load = manager.loads[root]
    assert set(load.recovered_partitions) == {("design", 0), ("design", 1)}
    assert "cannot resize" in load.recovered_partitions[("design", 0)]
    assert not load.failed_partitions
    check_healthy(manager, skip="")
    append_and_read(manager.get_log("design", 0))
