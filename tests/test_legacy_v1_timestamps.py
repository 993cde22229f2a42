"""Magic v1 timestamps on a real Kafka 0.10.1 data directory (issue 16).

A v1 entry's batch max timestamp is its own (wrapper) message's timestamp
(``AbstractLegacyRecordBatch.maxTimestamp``). The scan kernels report it, so recovery rebuilds
the time index as ``LogSegment.recover`` does, ``offset_for_timestamp`` finds v1 records, and
``verify``/``dump-log`` compare Kafka's time index against the right values. Expected values
come from the fixture's bytes, read here with ``struct`` alone.
"""
from __future__ import annotations

import io
import os
import shutil
import struct
import zlib
from pathlib import Path

import pytest
from conftest import load_kernel, require_nonempty
from kafka.record.legacy_records import LegacyRecordBatchBuilder as KpLegacyBuilder

from replica_core.errors import InvalidRecordError
from replica_core.records import iter_batches
from replica_core.storage.dump import main as dump_log
from replica_core.storage.dump import verify_log_dir
from replica_core.storage.log_manager import load_log_dir

LEGACY_DIR = (Path(__file__).resolve().parent / "data" / "kafka-logs-legacy" / "kafka-0.10.1-zk"
              / "kafka-logs")
V1_LOGS = require_nonempty(
    sorted(str(p) for p in LEGACY_DIR.glob("*/*.log") if p.stat().st_size > 0), "v1 logs")
INDEX_INTERVAL = 4096          # index.interval.bytes, Kafka's default (the fixture's broker's)
NOW = 1_479_457_000_000


def _entries(data: bytes) -> list[tuple[int, int, int, int]]:
    """(position, size, offset, timestamp) of each v1 entry, from the bytes alone."""
    out, pos = [], 0
    while pos + 12 <= len(data):
        offset, length = struct.unpack_from(">qi", data, pos)
        assert data[pos + 16] == 1
        out.append((pos, length + 12, offset, struct.unpack_from(">q", data, pos + 18)[0]))
        pos += length + 12
    assert pos == len(data)
    return out


def _kafka_recovered_time_index(entries, base_offset: int) -> list[tuple[int, int]]:
    """The entries ``LogSegment.recover`` writes (then the closing ``maybeAppend``): an entry at
    every index point, holding the max timestamp so far and its offset, kept only when its
    timestamp is above the last entry's (``TimeIndex.maybeAppend``)."""
    out: list[tuple[int, int]] = []
    last_ts = -1
    max_ts, max_off = -1, base_offset
    valid = last_index_entry = 0

    def maybe_append(ts: int, off: int) -> None:
        nonlocal last_ts
        if ts > last_ts:
            out.append((ts, off))
            last_ts = ts

    for _pos, size, offset, ts in entries:
        if ts > max_ts:
            max_ts, max_off = ts, offset
        if valid - last_index_entry > INDEX_INTERVAL:
            maybe_append(max_ts, max_off)
            last_index_entry = valid
        valid += size
    maybe_append(max_ts, max_off)
    return out


def _time_index_bytes(entries: list[tuple[int, int]], base_offset: int) -> bytes:
    return b"".join(struct.pack(">qi", ts, off - base_offset) for ts, off in entries)


def test_fixture_is_magic_v1_from_kafka_0_10_1():
    for path in V1_LOGS:
        data = Path(path).read_bytes()
        entries = _entries(data)
        assert entries and all(ts > 1_479_000_000_000 for *_, ts in entries)
    foo = _entries((LEGACY_DIR / "foo-0" / "00000000000000000000.log").read_bytes())
    assert len(foo) == 204
    assert [ts for *_, ts in foo[:3]] == [1479457300602, 1479457349922, 1479457459435]


@pytest.mark.parametrize("impl", ["native", "twin"])
@pytest.mark.parametrize("path", V1_LOGS, ids=lambda p: p.split("kafka-logs/", 1)[-1])
def test_scan_reports_each_v1_message_timestamp_as_batch_max(impl, path):
    k = load_kernel("_batch", "batch_py", impl)
    data = Path(path).read_bytes()
    headers, valid, stop = k.scan_batches(data)
    assert (valid, stop) == (len(data), k.STOP_END)
    assert headers[:, k.COL_MAX_TIMESTAMP].tolist() == [ts for *_, ts in _entries(data)]
    assert (headers[:, k.COL_BASE_TIMESTAMP] == -1).all()   # v1 has no base timestamp


@pytest.mark.parametrize("codec", [1, 2, 3])
def test_compressed_v1_wrapper_max_timestamp_is_the_wrapper_timestamp(codec):
    """Kafka's broker stamps a CreateTime wrapper with its largest inner timestamp and a
    LogAppendTime one with the append time; the batch max is that wrapper field either way."""
    builder = KpLegacyBuilder(magic=1, compression_type=codec, batch_size=1 << 20)
    for i in range(4):
        builder.append(i, timestamp=NOW + (7 * i) % 5, key=None, value=b"v%d" % i)
    built = bytes(builder.build())
    for log_append in (False, True):
        buf = bytearray(built)
        struct.pack_into(">q", buf, 0, 903)                      # the broker's last offset
        if log_append:
            buf[17] |= 0x08
        stamped = NOW + 99 if log_append else NOW + 4          # max inner (7*i % 5 tops at 4)
        struct.pack_into(">q", buf, 18, stamped)
        struct.pack_into(">I", buf, 12, zlib.crc32(bytes(buf[16:])))
        (batch,) = iter_batches(bytes(buf))
        assert batch.max_timestamp == stamped
        for impl in ("native", "twin"):
            k = load_kernel("_batch", "batch_py", impl)
            assert k.scan_batches(bytes(buf))[0][0, k.COL_MAX_TIMESTAMP] == stamped
        records = list(batch.records())
        assert [r.offset for r in records] == [900, 901, 902, 903]
        expect = [NOW + 99] * 4 if log_append else [NOW + (7 * i) % 5 for i in range(4)]
        assert [r.timestamp for r in records] == expect


def test_v1_wrapper_offset_rule_kip31():
    """Inner v1 offsets are relative: absolute = wrapper - last inner + inner. A wrapper at 0 (a
    client's) reads as base 0; any other wrapper offset below the last inner one is invalid."""
    builder = KpLegacyBuilder(magic=1, compression_type=1, batch_size=1 << 20)
    for i in range(3):
        builder.append(i, timestamp=NOW, key=None, value=b"x")
    raw = bytes(builder.build())
    assert struct.unpack_from(">q", raw, 0)[0] == 0              # kafka-python leaves it to us
    (client,) = iter_batches(raw)
    assert [r.offset for r in client.records()] == [0, 1, 2]
    bad = bytearray(raw)
    struct.pack_into(">q", bad, 0, 1)                             # 1 < last inner (2), not 0
    struct.pack_into(">I", bad, 12, zlib.crc32(bytes(bad[16:])))
    (batch,) = iter_batches(bytes(bad))
    with pytest.raises(InvalidRecordError, match="wrapper offset '1' is less than the last inner"):
        list(batch.records())


@pytest.fixture
def v1_dir(tmp_path):
    dst = tmp_path / "kafka-logs"
    shutil.copytree(LEGACY_DIR, dst)
    return dst


@pytest.mark.parametrize("partition", ["foo-0", "__consumer_offsets-40", "topic1-0"])
def test_recovery_rebuilds_the_time_index_kafka_writes(v1_dir, partition):
    """The fixture carries no index files (the repository left out Kafka's preallocated ones),
    so loading recovers the segment; the rebuilt time index is entry for entry, byte for byte,
    what ``LogSegment.recover`` writes for the same bytes."""
    data = (v1_dir / partition / "00000000000000000000.log").read_bytes()
    expected = _kafka_recovered_time_index(_entries(data), 0)
    assert expected                                     # v1: never empty
    manager = load_log_dir(str(v1_dir))
    topic, n = partition.rsplit("-", 1)
    assert manager.get_log(topic, int(n)) is not None
    manager.shutdown()
    written = (v1_dir / partition / "00000000000000000000.timeindex").read_bytes()
    assert written == _time_index_bytes(expected, 0)


def test_offset_for_timestamp_on_a_v1_log(v1_dir):
    entries = _entries((v1_dir / "foo-0" / "00000000000000000000.log").read_bytes())
    manager = load_log_dir(str(v1_dir))
    try:
        lg = manager.get_log("foo", 0)
        for k in (0, 1, 57, 150, 203):
            target = entries[k][3]
            want = next((ts, off) for _p, _s, off, ts in entries if ts >= target)
            found = lg.offset_for_timestamp(target)
            assert found is not None and (found[0], found[1]) == want
        assert lg.offset_for_timestamp(max(ts for *_, ts in entries) + 1) is None
        latest = max(ts for *_, ts in entries)
        found = lg.offset_for_timestamp(-3)                 # MAX_TIMESTAMP
        assert found is not None and found[0] == latest
        assert found[1] == next(off for _p, _s, off, ts in entries if ts == latest)
    finally:
        manager.shutdown()


def test_verify_and_dump_accept_kafkas_time_index_for_v1(tmp_path):
    """With the time index Kafka writes next to the v1 segment, ``verify`` finds no timestamp
    mismatch and ``dump-log`` prints Kafka's entries and no error."""
    part = tmp_path / "foo-0"
    shutil.copytree(LEGACY_DIR / "foo-0", part)
    data = (part / "00000000000000000000.log").read_bytes()
    entries = _kafka_recovered_time_index(_entries(data), 0)
    (part / "00000000000000000000.timeindex").write_bytes(_time_index_bytes(entries, 0))
    report = verify_log_dir(str(part))
    assert report.ok, report.errors
    assert not [e for e in report.errors + report.warnings if "timeindex" in str(e)]
    out, err = io.StringIO(), io.StringIO()
    assert dump_log([str(part / "00000000000000000000.timeindex")], out=out, err=err) == 0
    assert err.getvalue() == ""
    assert [line for line in out.getvalue().splitlines() if line.startswith("timestamp:")] == [
        f"timestamp: {ts} offset: {off}" for ts, off in entries]


def test_dump_log_prints_v1_create_time():
    out, err = io.StringIO(), io.StringIO()
    assert dump_log([os.path.join(LEGACY_DIR, "topic1-0", "00000000000000000000.log")],
                    out=out, err=err) == 0
    lines = out.getvalue().splitlines()
    assert lines[2] == ("offset: 0 position: 0 CreateTime: 1479457582140 size: 43 magic: 1 "
                        "compresscodec: none crc: 385527893 isvalid: true")
