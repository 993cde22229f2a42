"""``replica-core dump-log`` (kafka-dump-log.sh's output shape) and ``replica-core verify``.

Expected lines follow Kafka's ``kafka.tools.DumpLogSegments`` field order; values are checked
against a struct walk of the files (tests/storage_testlib.py).
"""
from __future__ import annotations

import base64
import glob
import io
import os
import re
import shutil
import stat
import struct
import subprocess
import sys
import zlib

import pytest
from conftest import FIXTURE_LOGS, require_nonempty
from storage_testlib import make_batch, parse_batches, parse_offset_index, parse_time_index

from replica_core.cli import main as cli_main
from replica_core.clock import ManualClock
from replica_core.records import batch_at, build_batch, build_end_txn_marker
from replica_core.storage.config import LogConfig
from replica_core.storage.dump import main as dump_main
from replica_core.storage.dump import verify_log_dir
from replica_core.storage.log import Log

T0 = 1_700_000_000_000
BATCH_LINE = re.compile(
    r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) baseSequence: (-?\d+) "
    r"lastSequence: (-?\d+) producerId: (-?\d+) producerEpoch: (-?\d+) "
    r"partitionLeaderEpoch: (-?\d+) isTransactional: (true|false) isControl: (true|false) "
    r"deleteHorizonMs: (OptionalLong\.empty|OptionalLong\[\d+\]) position: (\d+) "
    r"(CreateTime|LogAppendTime): (-?\d+) size: (\d+) magic: 2 "
    r"compresscodec: (none|gzip|snappy|lz4|zstd) crc: (\d+) isvalid: (true|false)$"
)
RECORD_LINE = re.compile(
    r"^\| offset: (\d+) (CreateTime|LogAppendTime): (-?\d+) keySize: (-?\d+) valueSize: (-?\d+) "
    r"sequence: (-?\d+) headerKeys: \[(.*?)\]"
)


def _run(args):
    out, err = io.StringIO(), io.StringIO()
    code = dump_main(args, out, err)
    return code, out.getvalue().splitlines(), err.getvalue()


FIXTURE_ROOT = str(FIXTURE_LOGS)
FIXTURE_LOGS = require_nonempty(
    sorted(glob.glob(os.path.join(FIXTURE_ROOT, "**", "*.log"), recursive=True)), "*.log files")


@pytest.mark.parametrize("path", FIXTURE_LOGS, ids=lambda p: p.split("kafka-logs/", 1)[-1])
def test_dump_prints_every_fixture_batch(path):
    with open(path, "rb") as fh:
        data = fh.read()
    batches = parse_batches(data)
    code, lines, err = _run([path, "--deep-iteration"])
    assert code == 0, err
    assert lines[0] == f"Dumping {path}"
    assert lines[1] == f"Log starting offset: {int(os.path.basename(path)[:20])}"
    batch_lines = [m for m in map(BATCH_LINE.match, lines) if m]
    assert len(batch_lines) == len(batches)
    assert len([ln for ln in lines if ln.startswith("baseOffset:")]) == len(batches)
    for m, b in zip(batch_lines, batches, strict=True):
        assert int(m.group(1)) == b.base_offset and int(m.group(2)) == b.last_offset
        assert int(m.group(12)) == b.position and int(m.group(15)) == b.size
        assert int(m.group(8)) == b.epoch and int(m.group(14)) == b.max_timestamp
        assert m.group(18) == "true"
    records = [m for m in map(RECORD_LINE.match, lines) if m]
    expected = sum(len(list(batch_at(data[b.position:b.position + b.size]))) for b in batches)
    assert len(records) == expected
    if "__cluster_metadata" in path:
        assert any("controlType: LEADER_CHANGE(2)" in ln for ln in lines)


def _write_log(tmp_path, config=None):
    log = Log.open(str(tmp_path / "t-0"), config or LogConfig.from_properties({"index.interval.bytes": 200}),
                   clock=ManualClock(T0))
    log.append_as_leader(build_batch([b"hello", None], keys=[b"k", b"k2"], timestamps=[T0, T0 + 1],
                                     headers=[[("h1", b"x"), ("h2", None)], None]), 3)
    for i in range(20):
        log.append_as_leader(build_batch([b"v%02d" % i * 20], timestamps=[T0 + 10 + i],
                                         compression="gzip" if i % 2 else "none"), 3)
    log.append_as_leader(build_batch([b"idem"], producer_id=77, producer_epoch=2, base_sequence=2**31 - 1,
                                     timestamps=[T0 + 99]), 3)
    log.append_as_leader(build_end_txn_marker(True, producer_id=77, producer_epoch=2,
                                              coordinator_epoch=9, timestamp_ms=T0 + 100), 3,
                         origin="coordinator")
    log.flush()
    log.close()
    return log


def test_dump_our_log_with_print_data(tmp_path):
    _write_log(tmp_path)
    path = str(tmp_path / "t-0" / "00000000000000000000.log")
    code, lines, err = _run([path, "--print-data"])
    assert code == 0, err
    assert lines[3] == (f"| offset: 0 CreateTime: {T0} keySize: 1 valueSize: 5 sequence: -1 "
                        "headerKeys: [h1,h2] key: k payload: hello")
    assert lines[4] == f"| offset: 1 CreateTime: {T0 + 1} keySize: 2 valueSize: -1 sequence: -1 headerKeys: [] key: k2"
    assert any("compresscodec: gzip" in ln for ln in lines)
    idem = next(ln for ln in lines if "producerId: 77" in ln and ln.startswith("baseOffset"))
    # sequence arithmetic wraps at Int32.MAX (§1.1)
    assert "baseSequence: 2147483647 lastSequence: 2147483647" in idem
    marker = next(ln for ln in lines if "isControl: true" in ln)
    assert "isTransactional: true" in marker
    assert lines[-1].endswith("endTxnMarker: COMMIT coordinatorEpoch: 9")
    assert "payload" not in lines[-1]


def test_dump_index_and_time_index(tmp_path):
    _write_log(tmp_path)
    d = tmp_path / "t-0"
    idx, tidx = str(d / "00000000000000000000.index"), str(d / "00000000000000000000.timeindex")
    code, lines, err = _run([idx, tidx])
    assert code == 0 and err == ""
    entries = parse_offset_index(open(idx, "rb").read(), 0)
    tentries = parse_time_index(open(tidx, "rb").read(), 0)
    assert entries and tentries
    assert lines[0] == f"Dumping {idx}"
    assert lines[1:1 + len(entries)] == [f"offset: {o} position: {p}" for o, p in entries]
    assert lines[1 + len(entries)] == f"Dumping {tidx}"
    assert lines[2 + len(entries):] == [f"timestamp: {t} offset: {o}" for t, o in tentries]
    code, lines, _ = _run([idx, "--verify-index-only"])
    assert lines == [f"Dumping {idx}"]
    code, lines, _ = _run([idx, tidx, "--index-sanity-check"])
    assert lines == [f"Dumping {idx}", f"{idx} passed sanity check.",
                     f"Dumping {tidx}", f"{tidx} passed sanity check."]


def test_dump_reports_bad_files(tmp_path):
    _write_log(tmp_path)
    d = tmp_path / "t-0"
    log_path = d / "00000000000000000000.log"
    data = log_path.read_bytes()
    log_path.write_bytes(data + b"\x00" * 7)
    code, lines, _ = _run([str(log_path)])
    assert lines[-1] == "Found 7 invalid bytes at the end of 00000000000000000000.log"
    idx = d / "00000000000000000000.index"
    idx.write_bytes(idx.read_bytes() + b"\x01\x02\x03")
    code, lines, err = _run([str(idx), "--index-sanity-check"])
    assert code == 1 and "neither positive nor a multiple of 8" in err
    empty = d / "00000000000000000099.index"
    empty.write_bytes(b"")
    code, lines, _ = _run([str(empty)])
    assert lines[-1] == f"{empty} is empty."
    code, lines, err = _run([str(d / "leader-epoch-checkpoint")])
    assert "Ignoring unknown file" in err
    assert _run([])[0] == 2


def test_files_option_like_kafka(tmp_path):
    _write_log(tmp_path)
    d = tmp_path / "t-0"
    a, b = str(d / "00000000000000000000.log"), str(d / "00000000000000000000.index")
    code, lines, _ = _run(["--files", f"{a},{b}"])
    assert code == 0 and f"Dumping {a}" in lines and f"Dumping {b}" in lines


# --- verify --------------------------------------------------------------------------------
def _copy(src, dst):
    shutil.copytree(src, dst)
    for root, dirs, files in os.walk(dst):
        for n in dirs + files:
            p = os.path.join(root, n)
            os.chmod(p, os.stat(p).st_mode | stat.S_IWUSR)
    return dst


def test_verify_clean_and_damaged(tmp_path, capsys):
    _write_log(tmp_path)
    part = tmp_path / "t-0"
    report = verify_log_dir(str(part))
    assert report.ok, report.render(verbose=True)
    assert cli_main(["verify", str(part)]) == 0
    log_path = part / "00000000000000000000.log"
    data = bytearray(log_path.read_bytes())
    first = parse_batches(bytes(data))
    data[first[3].position + 70] ^= 1
    log_path.write_bytes(bytes(data))
    report = verify_log_dir(str(part))
    assert not report.ok
    assert any("CRC" in f.message for f in report.errors)
    assert cli_main(["verify", str(part)]) == 1
    assert '"ok": false' in report.to_json()


def test_verify_flags_bad_index_epochs_and_checkpoints(tmp_path, fixture_logs):
    _write_log(tmp_path)
    part = tmp_path / "t-0"
    idx = part / "00000000000000000000.index"
    entries = parse_offset_index(idx.read_bytes(), 0)
    raw = bytearray(idx.read_bytes())
    raw[4:8] = (entries[0][1] + 1).to_bytes(4, "big")  # not a batch start any more
    idx.write_bytes(bytes(raw))
    (part / "leader-epoch-checkpoint").write_text("0\n1\n1 0\n")
    report = verify_log_dir(str(part))
    messages = " | ".join(f.message for f in report.errors)
    assert "not the start of a batch" in messages
    assert "carries epoch 3" in messages

    log_dir = _copy(fixture_logs / "kafka-3.1.0-zk/data/kafka-logs", tmp_path / "logs")
    (log_dir / "recovery-point-offset-checkpoint").write_text("0\n1\ndesign 0 99999\n")
    report = verify_log_dir(str(log_dir))
    assert any("recovery point 99999" in f.message for f in report.errors)
    (log_dir / "replication-offset-checkpoint").write_text("0\n2\ndesign 0 1\n")
    report = verify_log_dir(str(log_dir))
    assert any("cannot be parsed" in f.message for f in report.errors)


def test_dump_producer_snapshot_and_txn_index(tmp_path):
    import struct

    import crc32c

    entries = (struct.pack(">qhiqiqiq", 77, 2, 5, 100, 3, T0, 9, -1)
               + struct.pack(">qhiqiqiq", 78, 0, 1, 200, 4, T0 + 1, -1, 150))
    body = struct.pack(">i", 2) + entries
    snap = tmp_path / "00000000000000000200.snapshot"
    snap.write_bytes(struct.pack(">hI", 1, crc32c.crc32c(body)) + body)
    code, lines, err = _run([str(snap)])
    assert code == 0, err
    assert lines[1] == (f"producerId: 77 producerEpoch: 2 coordinatorEpoch: 9 currentTxnFirstOffset: "
                        f"OptionalLong.empty lastTimestamp: {T0} firstSequence: 2 lastSequence: 5 "
                        f"lastOffset: 100 offsetDelta: 3 timestamp: {T0}")
    assert "currentTxnFirstOffset: OptionalLong[150]" in lines[2]
    assert "firstSequence: 2147483645 lastSequence: 1" in lines[2]  # decrementSequence wraps
    snap.write_bytes(snap.read_bytes()[:-1] + b"\x00")
    code, _, err = _run([str(snap)])
    assert code == 1 and "CRC is no longer valid" in err
    txn = tmp_path / "00000000000000000200.txnindex"
    txn.write_bytes(struct.pack(">hqqqq", 0, 77, 10, 20, 21))
    code, lines, _ = _run([str(txn)])
    assert lines[1] == "version: 0 producerId: 77 firstOffset: 10 lastOffset: 20 lastStableOffset: 21"
    snapshots = glob.glob(os.path.join(FIXTURE_ROOT, "**", "*.snapshot"), recursive=True)
    assert len(snapshots) > 5
    for path in snapshots:
        assert _run([path])[0] == 0


def test_dump_kraft_bootstrap_checkpoint(fixture_logs):
    """Snapshot header and footer print as Kafka's JSON (SnapshotHeaderRecord.json:
    Version int16, LastContainedLogTimestamp int64; SnapshotFooterRecord.json: Version int16)."""
    path = str(fixture_logs / "kafka-3.6.0-kraft/kraft-combined-logs/bootstrap.checkpoint")
    code, lines, _ = _run([path, "--deep-iteration"])
    assert code == 0 and lines[1] == "KRaft bootstrap snapshot"
    data = open(path, "rb").read()
    batches = parse_batches(data)
    header_rec = next(iter(batch_at(data[batches[0].position:batches[0].position + batches[0].size])))
    footer_rec = next(iter(batch_at(data[batches[-1].position:batches[-1].position + batches[-1].size])))
    assert struct.unpack(">hh", header_rec.key) == (0, 3) and struct.unpack(">hh", footer_rec.key) == (0, 4)
    version, last_ts, tags = struct.unpack(">hqB", header_rec.value)
    assert tags == 0
    (fversion, ftags) = struct.unpack(">hB", footer_rec.value)
    header_lines = [ln for ln in lines if "SnapshotHeader" in ln]
    footer_lines = [ln for ln in lines if "SnapshotFooter" in ln]
    assert len(header_lines) == 1 and len(footer_lines) == 1
    assert header_lines[0].endswith(
        f' headerKeys: [] SnapshotHeader {{"version":{version},"lastContainedLogTimestamp":{last_ts}}}')
    assert footer_lines[0].endswith(f' headerKeys: [] SnapshotFooter {{"version":{fversion}}}')
    assert not any("controlType: SNAPSHOT" in ln for ln in lines)
    assert lines[-1].endswith(footer_lines[0])


def _control_batch(tmp_path, type_id, value, offset=0):
    key = struct.pack(">hh", 0, type_id)
    batch = make_batch([value], keys=[key], base_offset=offset, attributes=0x20, timestamps=[T0])
    path = tmp_path / f"{offset:020d}.log"
    path.write_bytes(batch)
    return str(path)


def test_kraft_version_and_voters_control_records(tmp_path):
    """KRAFT_VERSION (5) and KRAFT_VOTERS (6) print as ``KRaftVersion {...}`` and
    ``KRaftVoters {...}``: the JSON of KRaftVersionRecord.json and VotersRecord.json, built here
    from their wire form (flexible version 0: compact arrays and strings, tagged-field counts)."""
    path = _control_batch(tmp_path, 5, struct.pack(">hhB", 0, 1, 0))
    code, lines, err = _run([path, "--deep-iteration"])
    assert code == 0, err
    assert lines[-1] == (f"| offset: 0 CreateTime: {T0} keySize: 4 valueSize: 5 sequence: -1 "
                         'headerKeys: [] KRaftVersion {"version":0,"kRaftVersion":1}')
    dir_id = bytes(range(16))
    endpoint = b"\x0bCONTROLLER" + b"\x0alocalhost" + struct.pack(">H", 9093) + b"\x00"
    voter = (struct.pack(">i", 3) + dir_id + b"\x02" + endpoint
             + struct.pack(">hhB", 0, 1, 0) + b"\x00")
    value = struct.pack(">h", 0) + b"\x02" + voter + b"\x00"
    path = _control_batch(tmp_path / "..", 6, value, offset=7)
    code, lines, err = _run([path, "--deep-iteration"])
    assert code == 0, err
    dir_text = base64.urlsafe_b64encode(dir_id).decode().rstrip("=")
    assert lines[-1].endswith(
        ' KRaftVoters {"version":0,"voters":[{"voterId":3,"voterDirectoryId":"' + dir_text
        + '","endpoints":[{"name":"CONTROLLER","host":"localhost","port":9093}],'
        '"kRaftVersionFeature":{"minSupportedVersion":0,"maxSupportedVersion":1}}]}')
    # unknown control types keep Kafka's "controlType: NAME(id)" form
    path = _control_batch(tmp_path, 9, b"\x00\x00", offset=20)
    assert _run([path, "--deep-iteration"])[1][-1].endswith(" controlType: UNKNOWN(9)")
    # and with --skip-record-metadata a control record line is empty, as in Kafka
    assert _run([path, "--skip-record-metadata", "--print-data-log"])[1][-1] == ""


def _legacy_entries(buf):
    """(offset, position, size, crc, magic, attributes, timestamp) of each v0/v1 log entry."""
    out, p = [], 0
    while p < len(buf):
        offset, length, crc, magic, attrs = struct.unpack_from(">qiIbB", buf, p)
        ts = struct.unpack_from(">q", buf, p + 18)[0] if magic == 1 else -1
        out.append((offset, p, length + 12, crc, magic, attrs, ts))
        p += length + 12
    return out


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_record_lines_like_kafka(tmp_path, magic):
    """Magic 0/1 entries (built by kafka-python): ``offset: N position: ...`` batch lines and
    record lines ending `` isValid: true crc: N}`` (DumpLogSegments prints the record's CRC,
    its validity and a stray closing brace)."""
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
    for i in range(3):
        builder.append(i, timestamp=T0 + i if magic else None, key=b"k%d" % i, value=b"v%d" % i)
    data = bytes(builder.build())
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    code, lines, err = _run([str(path), "--print-data-log"])
    assert code == 0, err
    ts_type = "CreateTime" if magic else "NoTimestampType"
    expected = ["Dumping " + str(path), "Log starting offset: 0"]
    for offset, pos, size, crc, m, _attrs, ts in _legacy_entries(data):
        assert zlib.crc32(data[pos + 16:pos + size]) == crc
        expected.append(f"offset: {offset} position: {pos} {ts_type}: {ts} size: {size} magic: {m} "
                        f"compresscodec: none crc: {crc} isvalid: true")
        expected.append(f"| offset: {offset} {ts_type}: {ts} keySize: 2 valueSize: 2 "
                        f"isValid: true crc: {crc}}} key: k{offset} payload: v{offset}")
    assert lines == expected


def test_legacy_compressed_wrapper_prints_inner_crcs(tmp_path):
    """A gzip v1 wrapper: one batch line (the wrapper's CRC), then each inner message with its
    own CRC; a flipped byte inside an inner message shows as ``isValid: false``."""
    import gzip

    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    builder = LegacyRecordBatchBuilder(magic=1, compression_type=1, batch_size=1 << 20)
    for i in range(4):
        builder.append(i, timestamp=T0 + i, key=None, value=b"value-%d" % i)
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, 3)  # a broker stores the last inner offset in the wrapper
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(bytes(data))
    (offset, pos, size, crc, _m, _a, ts), = _legacy_entries(bytes(data))
    key_len, value_len = struct.unpack_from(">ii", data, 26)  # v1: key at 26, no key here
    assert key_len == -1
    inner = gzip.decompress(bytes(data[34:34 + value_len]))
    inner_entries = _legacy_entries(inner)
    assert len(inner_entries) == 4
    code, lines, err = _run([str(path), "--deep-iteration"])
    assert code == 0, err
    assert lines[2] == (f"offset: 3 position: 0 CreateTime: {ts} size: {size} magic: 1 "
                        f"compresscodec: gzip crc: {crc} isvalid: true")
    for i, (_o, ipos, isize, icrc, _m, _a, its) in enumerate(inner_entries):
        assert zlib.crc32(inner[ipos + 16:ipos + isize]) == icrc
        assert lines[3 + i] == (f"| offset: {i} CreateTime: {its} keySize: -1 valueSize: 7 "
                                f"isValid: true crc: {icrc}}}")
    # corrupt the third inner message's value, re-wrap (the wrapper's own CRC stays valid)
    bad_inner = bytearray(inner)
    _o, ipos, isize, icrc, _m, _a, its = inner_entries[2]
    bad_inner[ipos + isize - 1] ^= 0x01
    packed = gzip.compress(bytes(bad_inner))
    wrapper = bytearray(data[:30]) + struct.pack(">i", len(packed)) + packed
    struct.pack_into(">i", wrapper, 8, len(wrapper) - 12)
    struct.pack_into(">I", wrapper, 12, zlib.crc32(bytes(wrapper[16:])))
    path.write_bytes(bytes(wrapper))
    code, lines, err = _run([str(path), "--deep-iteration"])
    assert lines[2].endswith(f"compresscodec: gzip crc: {zlib.crc32(bytes(wrapper[16:]))} isvalid: true")
    assert lines[5] == (f"| offset: 2 CreateTime: {its} keySize: -1 valueSize: 7 "
                        f"isValid: false crc: {icrc}}}")
    assert [ln.split(" isValid: ")[1][:4] for ln in lines[3:7]] == ["true", "true", "fals", "true"]


def test_skip_record_metadata_prefixes_like_kafka(tmp_path):
    """With --skip-record-metadata Kafka prints ``| key: K payload: V`` for a keyed record and
    `` payload: V`` (no ``|``) for one without a key."""
    batch = make_batch([b"a", b"b"], keys=[b"k", None], timestamps=[T0, T0])
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(batch)
    code, lines, err = _run([str(path), "--print-data-log", "--skip-record-metadata"])
    assert code == 0, err
    assert lines[-2:] == ["| key: k payload: a", " payload: b"]


def test_dump_rejects_badly_named_segment(tmp_path):
    """A .log/.index not named <base offset>.<suffix> gets a clear message, not a traceback or
    Python's ``invalid literal for int()``; other files are still dumped."""
    good = tmp_path / "00000000000000000000.log"
    good.write_bytes(make_batch([b"x"], timestamps=[T0]))
    for name in ("segment.log", "12ab.index", "1_000.timeindex"):
        bad = tmp_path / name
        bad.write_bytes(b"")
        code, lines, err = _run([str(bad), str(good)])
        assert code == 1
        assert f"Could not dump {bad}: {name} is not named like a segment file" in err
        assert "invalid literal" not in err and "Traceback" not in err
        assert f"Dumping {good}" in lines and "Log starting offset: 0" in lines
    code, _, err = _run([str(tmp_path / "00000000000000000099.log")])
    assert code == 1 and "No such file or directory" in err


def test_dump_log_into_closed_pipe_ends_quietly(fixture_logs):
    """``replica-core dump-log ... | head -1``: the reader closes the pipe early; the command
    stops with exit status 0 and nothing on stderr (no BrokenPipeError traceback)."""
    path = str(fixture_logs / "kafka-3.6.0-kraft/kraft-combined-logs/__cluster_metadata-0"
               / "00000000000000000000.log")
    assert os.path.getsize(path) > 100_000  # far more output than a pipe buffer holds
    proc = subprocess.Popen([sys.executable, "-m", "replica_core.cli", "dump-log",
                             "--cluster-metadata-decoder", path],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read()
    rc = proc.wait(timeout=120)
    assert first == f"Dumping {path}\n".encode()
    assert rc == 0
    assert err == b""
