"""Record batch validation: our kernels against aiokafka's C codec, kafka-python and raw CRC-32C.

Every test in one group runs over the same bytes (see conftest.py), so ratios are read inside a
group of a single run (``benchmarks/report.py`` prints them). Contenders:

* ``crc32c_raw`` - the ``crc32c`` package over the whole buffer: the physical limit, since every
  path below must at least checksum every byte once.
* ``ours_scan_validate`` - ``scan_batches`` (framing + CRC-32C of every batch) then
  ``check_records`` over every batch (lz4: decompressed with cramjam first).
* ``ours_validate_assign`` - the leader's in-place path (§2.4) per batch: ``check_records``, then
  ``stamp_batch`` (offsets, epoch, max timestamp, new CRC) in a writable copy made once, as
  Kafka stamps the request buffer in place. Batch positions/counts come from the preceding
  analyze step (measured by ``ours_scan_validate``).
* ``ours_validate_assign_copy`` - the same, copying the bytes into a fresh bytearray each time.
* ``ours_append_path`` - scan with CRC + check + stamp: the whole leader append cost (2 CRCs).
* ``ours_leader_append_fast`` - the fused kernel ``leader_append_fast`` per batch, as the log
  calls it: framing, CRC-32C check, batch and record rules, offsets, epoch, max timestamp and a
  stamped copy in one call (lz4: the records decompressed with cramjam and passed in).
* ``records_validate_and_assign`` - ``replica_core.records.validate_and_assign_offsets`` per
  batch (the fused kernel for these batches, with its Python glue and result object).
* ``aiokafka_c`` / ``kafka_python`` - construct the batch, ``validate_crc()``, iterate every record.
"""
from __future__ import annotations

import importlib

import cramjam
import crc32c
import kafka.codec
import kafka.record.default_records as kp_default
import pytest
from aiokafka.record._crecords import DefaultRecordBatch as AioBatch
from aiokafka.record._crecords import MemoryRecords as AioMemoryRecords
from conftest import NOW_MS, Workload
from kafka.record.default_records import DefaultRecordBatch as KpBatch
from kafka.record.memory_records import MemoryRecords as KpMemoryRecords

from replica_core._fast import _batch

MAX = 2**63 - 1
LZ4 = 3
CRC_OK = _batch.COL_CRC_OK


def _kafka_python_lz4() -> None:
    # kafka-python reads lz4 through the `lz4` package, absent here; give it cramjam's decoder
    # (the one aiokafka uses) so both peers decompress with the same library.
    kafka.codec.has_lz4 = lambda: True
    kp_default.lz4_decode = lambda data: bytes(cramjam.lz4.decompress(data))


_kafka_python_lz4()


def _run(benchmark, w: Workload, fn, expect=None):
    """Benchmark ``fn`` in the workload's group; ``expect`` checks what it returned (work done)."""
    benchmark.group = w.group
    benchmark.extra_info["bytes"] = len(w.buf)
    benchmark.extra_info["records"] = w.n_records
    benchmark.extra_info["batches"] = len(w.batches)
    result = benchmark(fn)
    if expect is not None:
        assert result == expect


# --- the physical limit ------------------------------------------------------------------------
def test_crc32c_raw(benchmark, workload):
    buf = workload.buf
    _run(benchmark, workload, lambda: crc32c.crc32c(buf))


# --- ours -----------------------------------------------------------------------------------------
def scan_validate(buf) -> int:
    scan, check = _batch.scan_batches, _batch.check_records
    headers, valid, stop = scan(buf)
    if stop != _batch.STOP_END:
        raise ValueError("unexpected stop")
    n = 0
    for row in headers.tolist():
        pos, size, count, base_ts = row[0], row[1], row[13], row[8]
        if row[CRC_OK] != 1:
            raise ValueError("bad crc")
        if row[7] & 7:
            blob = cramjam.lz4.decompress(memoryview(buf)[pos + 61:pos + size])
            check(blob, 0, len(blob), count, base_ts, NOW_MS, MAX, MAX, True, False)
        else:
            check(buf, pos + 61, pos + size, count, base_ts, NOW_MS, MAX, MAX, True, False)
        n += count
    return n


def plan(batches):
    """Per batch, what the analyze step (the scan) already knows: record area, count, base
    timestamp, position, attributes."""
    return [(pos + 61, pos + size, count, base_ts, pos, attributes)
            for pos, size, count, base_ts, attributes in batches]


def validate_assign(writable, batch_plan, next_offset: int, leader_epoch: int = 7,
                    now=NOW_MS) -> int:
    check, stamp = _batch.check_records, _batch.stamp_batch
    for start, end, count, base_ts, pos, attributes in batch_plan:
        if attributes & 7:
            blob = cramjam.lz4.decompress(memoryview(writable)[start:end])
            res = check(blob, 0, len(blob), count, base_ts, now, MAX, MAX, True, False)
        else:
            res = check(writable, start, end, count, base_ts, now, MAX, MAX, True, False)
        if res[3]:
            raise ValueError("record rejected")
        stamp(writable, pos, next_offset, leader_epoch, attributes, res[0])
        next_offset += count
    return next_offset


def test_ours_scan_validate(benchmark, workload):
    buf = workload.buf
    _run(benchmark, workload, lambda: scan_validate(buf), workload.n_records)


def test_ours_validate_assign(benchmark, workload):
    writable = bytearray(workload.buf)
    batch_plan = plan(workload.batches)
    _run(benchmark, workload, lambda: validate_assign(writable, batch_plan, 1000),
         1000 + workload.n_records)


def test_ours_validate_assign_copy(benchmark, workload):
    buf, batch_plan = workload.buf, plan(workload.batches)
    _run(benchmark, workload, lambda: validate_assign(bytearray(buf), batch_plan, 1000),
         1000 + workload.n_records)


def test_ours_append_path(benchmark, workload):
    writable = bytearray(workload.buf)

    def append():
        headers, _, _ = _batch.scan_batches(writable)
        rows = headers.tolist()
        if any(r[CRC_OK] != 1 for r in rows):
            raise ValueError("bad crc")
        return validate_assign(writable, plan([(r[0], r[1], r[13], r[8], r[7]) for r in rows]),
                               1000)

    _run(benchmark, workload, append, 1000 + workload.n_records)


def test_ours_leader_append_fast(benchmark, workload):
    fast = _batch.leader_append_fast
    view = memoryview(workload.buf)
    plan_ = [(view[pos:pos + size], attributes & 7)
             for pos, size, _, _, attributes in workload.batches]

    def run():
        offset = 1000
        for s, codec in plan_:
            if codec:
                area = cramjam.lz4.decompress(s[61:])
                res = fast(s, offset, 7, NOW_MS, MAX, MAX, False, False, True, True, 1 << 30, -1,
                           area)
            else:
                res = fast(s, offset, 7, NOW_MS, MAX, MAX, False, False, True, True, 1 << 30, -1)
            if res[0] != _batch.FAST_OK:
                raise ValueError(f"fast path declined: status {res[0]}")
            offset = res[2] + 1
        return offset

    _run(benchmark, workload, run, 1000 + workload.n_records)


def test_records_validate_and_assign(benchmark, workload):
    try:
        records = importlib.import_module("replica_core.records")
        vaa = records.validate_and_assign_offsets
    except (ImportError, AttributeError):
        pytest.skip("replica_core.records.validate_and_assign_offsets not available yet")
    view = memoryview(workload.buf)
    slices = [view[pos:pos + size] for pos, size, *_ in workload.batches]

    def run():
        offset = 1000
        for s in slices:
            offset = vaa(s, offset, 7, NOW_MS).last_offset + 1
        return offset

    _run(benchmark, workload, run, 1000 + workload.n_records)


# --- peers ------------------------------------------------------------------------------------------
def _iterate(batch_cls, records_cls, buf, single: bool) -> int:
    n = 0
    if single:
        batches = [batch_cls(buf)]
    else:
        mr = records_cls(buf)
        batches = []
        while mr.has_next():
            batches.append(mr.next_batch())
    for b in batches:
        if not b.validate_crc():
            raise ValueError("bad crc")
        for _ in b:
            n += 1
    return n


def test_aiokafka_c(benchmark, workload):
    buf, single = workload.buf, workload.single
    _run(benchmark, workload, lambda: _iterate(AioBatch, AioMemoryRecords, buf, single),
         workload.n_records)


def test_kafka_python(benchmark, workload):
    buf, single = workload.buf, workload.single
    _run(benchmark, workload, lambda: _iterate(KpBatch, KpMemoryRecords, buf, single),
         workload.n_records)
