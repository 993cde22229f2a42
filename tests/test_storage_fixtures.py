"""Real Kafka log directories (tests/data/kafka-logs, see SOURCES.md there).

Each dir is copied to tmp (fixtures are read-only), loaded by our LogManager (plus
``__cluster_metadata-0``, which Kafka's LogManager leaves to the raft layer, through Log.open),
every offset is read back and compared with a struct walk of the segment files, and ``verify``
passes before and after loading (loading rebuilds the missing indexes).
"""
from __future__ import annotations

import os
import shutil
import stat

import pytest
from storage_testlib import parse_batches

from replica_core.records import batch_at
from replica_core.storage.config import LogConfig
from replica_core.storage.dump import verify_log_dir
from replica_core.storage.log import Log
from replica_core.storage.log_manager import LogManager

FIXTURE_DIRS = [
    "kafka-2.1.2-zk/kafka-logs",
    "kafka-2.7.1-zk/kafka-logs",
    "kafka-2.8.0-zk-snappy/kafka-logs",
    "kafka-3.1.0-zk/data/kafka-logs",
    "kafka-3.6.0-kraft/kraft-combined-logs",
]


def _copy(src, dst):
    shutil.copytree(src, dst)
    for root, dirs, files in os.walk(dst):
        for n in dirs + files:
            p = os.path.join(root, n)
            os.chmod(p, os.stat(p).st_mode | stat.S_IWUSR)
    return str(dst)


def _expected_batches(part_dir):
    """(base offset, last offset, bytes) of every batch, by struct, segment by segment."""
    out = []
    for name in sorted(os.listdir(part_dir)):
        if name.endswith(".log"):
            with open(os.path.join(part_dir, name), "rb") as fh:
                data = fh.read()
            for b in parse_batches(data):
                assert b.crc_ok
                out.append((b.base_offset, b.last_offset, data[b.position:b.position + b.size]))
    return out


def _check_reads(log: Log, batches):
    assert log.log_end_offset == (batches[-1][1] + 1 if batches else log.log_end_offset)
    for base, last, data in batches:
        for offset in range(max(base, log.log_start_offset), last + 1):
            info = log.read(offset, 1, min_one_message=True)
            assert bytes(info.records) == data, f"offset {offset}"
            assert info.fetch_offset_metadata.message_offset == offset
    # offsets inside compaction gaps resolve to the next batch
    for (_, l0, _), (b1, _, d1) in zip(batches, batches[1:], strict=False):
        if b1 > l0 + 1:
            assert bytes(log.read(l0 + 1, 1).records) == d1
    # every record decodes (decompression included)
    for _base, last, data in batches:
        records = list(batch_at(data))
        assert not records or records[-1].offset <= last


@pytest.mark.parametrize("rel", FIXTURE_DIRS)
def test_fixture_log_dir_loads_reads_and_verifies(fixture_logs, tmp_path, rel):
    src = fixture_logs / rel
    assert verify_log_dir(str(src)).ok
    log_dir = _copy(src, tmp_path / "logs")
    had_marker = os.path.exists(os.path.join(log_dir, ".kafka_cleanshutdown"))
    expected = {
        n: _expected_batches(os.path.join(log_dir, n))
        for n in os.listdir(log_dir) if os.path.isdir(os.path.join(log_dir, n))
    }
    manager = LogManager(log_dir, LogConfig(), num_recovery_threads=2)
    loads = manager.startup()
    assert loads[log_dir].had_clean_shutdown == had_marker
    assert not os.path.exists(os.path.join(log_dir, ".kafka_cleanshutdown"))
    logs = manager.logs
    for name, batches in expected.items():
        if name.startswith("__cluster_metadata"):
            assert all(tp[0] != "__cluster_metadata" for tp in logs)
            continue
        topic, _, part = name.rpartition("-")
        log = logs[(topic, int(part))]
        assert not log.recovery_report.data_lost, log.recovery_report.summary()
        _check_reads(log, batches)
        # every segment has its index files now (rebuilt where the fixture lacked them)
        for seg in log.segments:
            assert os.path.exists(seg.offset_index_path)
    manager.shutdown()
    assert os.path.exists(os.path.join(log_dir, ".kafka_cleanshutdown"))
    report = verify_log_dir(log_dir)
    assert report.ok, report.render(verbose=True)
    missing = [f for f in report.warnings if "missing" in f.message]
    assert all(f.where.startswith("__cluster_metadata") for f in missing), report.render(verbose=True)
    # reopen after our clean shutdown: nothing to recover, same contents
    manager = LogManager(log_dir, LogConfig())
    manager.startup()
    for tp, log in manager.logs.items():
        assert log.recovery_report.recovered_segments == []
        _check_reads(log, expected[f"{tp[0]}-{tp[1]}"])
    manager.shutdown()


def test_kraft_metadata_log_loads_directly(fixture_logs, tmp_path):
    src = fixture_logs / "kafka-3.6.0-kraft/kraft-combined-logs/__cluster_metadata-0"
    d = _copy(src, tmp_path / "__cluster_metadata-0")
    batches = _expected_batches(d)
    log = Log.open(d, LogConfig())
    assert not log.recovery_report.data_lost
    _check_reads(log, batches)
    # the epochs in the checkpoint (1, 2, 3, 5, 6) agree with what the batches carry
    assert [e for e, _ in log.leader_epoch_cache.entries()] == [1, 2, 3, 5, 6]
    log.close()
    assert verify_log_dir(d).ok
