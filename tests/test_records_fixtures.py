"""Every batch of the real Kafka logs in tests/data/kafka-logs (see SOURCES.md there):
framing reaches the end of each file, every CRC-32C checks, every batch's records decode to
exactly its declared count with the declared offsets, and the append-path analysis accepts the
logs as a follower would receive them (§1.1-§1.3, §2.2)."""
from __future__ import annotations

import mmap

import numpy as np
import pytest
from conftest import FIXTURE_LOGS, require_nonempty
from kafka.record.default_records import DefaultRecordBatch as KpBatch

from replica_core.records import (
    STOP_END,
    ControlRecordType,
    RecordBatch,
    analyze_and_validate,
    control_record_type,
    iter_batches,
    scan,
)

FIXTURES = FIXTURE_LOGS
LOGS = require_nonempty(sorted(FIXTURES.glob("**/*.log")), "*.log files")
NON_EMPTY = require_nonempty([p for p in LOGS if p.stat().st_size > 0], "non-empty *.log files")


def test_fixture_logs_present():
    assert len(LOGS) > 100
    assert len(NON_EMPTY) >= 30


@pytest.mark.parametrize("path", NON_EMPTY, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_batch_parses(path):
    data = path.read_bytes()
    s = scan(data)
    assert (s.valid_bytes, s.stop) == (len(data), STOP_END)
    assert (s.crc_ok == 1).all()
    assert (s.magics == 2).all()
    batches = list(iter_batches(data))
    assert len(batches) == len(s)
    next_offset = None
    for batch, row_pos in zip(batches, s.positions.tolist(), strict=True):
        assert isinstance(batch, RecordBatch)
        assert batch.position == row_pos
        assert batch.is_valid()
        batch.ensure_valid()
        records = list(batch.records())
        assert len(records) == batch.record_count
        offsets = [r.offset for r in records]
        assert all(batch.base_offset <= o <= batch.last_offset for o in offsets)
        assert offsets == sorted(offsets)
        if records and batch.timestamp_type == "create":
            assert max(r.timestamp for r in records) == batch.max_timestamp
        if next_offset is not None:
            assert batch.base_offset >= next_offset
        next_offset = batch.next_offset
    # the same through an mmap, zero-copy
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        views = list(iter_batches(mm))
        assert [b.base_offset for b in views] == [b.base_offset for b in batches]
        assert [b.crc for b in views] == s.crcs.tolist()
        del views
    info = analyze_and_validate(data, "replication")
    assert info.valid_bytes == len(data)
    assert info.shallow_count == len(batches)
    assert info.num_records == sum(b.record_count for b in batches)
    assert info.first_offset == batches[0].base_offset
    assert info.last_offset == batches[-1].last_offset
    assert info.offsets_monotonic


@pytest.mark.parametrize("path", NON_EMPTY[:12], ids=lambda p: str(p.relative_to(FIXTURES)))
def test_records_match_kafka_python(path):
    data = path.read_bytes()
    for batch in list(iter_batches(data))[:50]:
        if batch.compression not in ("none", "gzip"):
            continue
        theirs = [(r.offset, r.timestamp, r.key, r.value, list(r.headers))
                  for r in KpBatch(bytes(batch.buffer))]
        assert [tuple(r) for r in batch.records()] == theirs


def test_snappy_batches_of_kafka_2_8():
    """The Java client's snappy (xerial framing) in kafka-2.8.0-zk-snappy/some-topic-0."""
    path = FIXTURES / "kafka-2.8.0-zk-snappy/kafka-logs/some-topic-0/00000000000000000000.log"
    batches = list(iter_batches(path.read_bytes()))
    snappy = [b for b in batches if b.compression == "snappy"]
    assert len(snappy) == 9
    for b in snappy:
        assert bytes(b.buffer[61:69]) == b"\x82SNAPPY\x00"
        (rec,) = b.records()
        assert rec.key.startswith(b'{"customerId"')
        assert rec.value == b'{"item":"book","price":"23.9"}'
        assert rec.headers == [("__Key_TypeId__", b"bbejeck.model.PurchaseKey")]


def test_kraft_metadata_log_leader_change_batches():
    path = FIXTURES / "kafka-3.6.0-kraft/kraft-combined-logs/__cluster_metadata-0/" \
        "00000000000000000000.log"
    data = path.read_bytes()
    s = scan(data)
    assert len(s) > 3000
    epochs = s.partition_leader_epochs
    assert set(np.unique(epochs).tolist()) <= set(range(1, 7))
    assert (np.diff(epochs) >= 0).all()
    control = [b for b in iter_batches(data) if b.is_control]
    assert control
    for b in control:
        for rec in b.records():
            assert control_record_type(rec.key) is ControlRecordType.LEADER_CHANGE
