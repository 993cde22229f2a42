"""Checkpoint files (§1.10), partition.metadata (§1.11), the clean-shutdown marker (§1.12), and
every real checkpoint file in the Kafka fixtures."""
from __future__ import annotations

import base64
import json
import uuid

import pytest
from conftest import FIXTURE_LOGS

from replica_core.errors import (
    CorruptCheckpointError,
    InconsistentTopicIdError,
    KafkaStorageError,
)
from replica_core.storage.checkpoint import (
    CheckpointFile,
    CleanShutdownFile,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
    PartitionMetadata,
    PartitionMetadataFile,
)
from replica_core.storage.medium import FileMedium, MemoryMedium

OFFSET_CHECKPOINTS = (
    "recovery-point-offset-checkpoint",
    "replication-offset-checkpoint",
    "log-start-offset-checkpoint",
    "cleaner-offset-checkpoint",
)


@pytest.fixture(params=["file", "memory"])
def fs(request, tmp_path):
    if request.param == "file":
        return FileMedium(), str(tmp_path)
    m = MemoryMedium()
    m.makedirs("/logs")
    return m, "/logs"


def put(m, path, data: bytes) -> None:
    with m.open(path, create=True) as f:
        f.truncate(0)
        f.append(data)


# --- generic format (§1.10) ------------------------------------------------------------------
def test_constructor_creates_missing_file_empty(fs):
    m, root = fs
    cp = OffsetCheckpointFile(m, f"{root}/recovery-point-offset-checkpoint")
    assert m.read_bytes(cp.path) == b""
    assert cp.read() == {}


def test_offset_checkpoint_writes_kafka_format(fs):
    m, root = fs
    cp = OffsetCheckpointFile(m, f"{root}/cp")
    cp.write({("my.topic_name-1", 0): 42, ("__consumer_offsets", 17): 9_000_000_000})
    assert m.read_bytes(f"{root}/cp") == (
        b"0\n2\nmy.topic_name-1 0 42\n__consumer_offsets 17 9000000000\n")
    assert cp.read() == {("my.topic_name-1", 0): 42, ("__consumer_offsets", 17): 9_000_000_000}
    cp.write({})
    assert m.read_bytes(f"{root}/cp") == b"0\n0\n"
    assert m.listdir(root) == ["cp"]  # no .tmp left behind


def test_leader_epoch_checkpoint_format(fs):
    m, root = fs
    cp = LeaderEpochCheckpointFile(m, f"{root}/leader-epoch-checkpoint")
    cp.write([(0, 0), (3, 354), (6, 712)])
    assert m.read_bytes(cp.path) == b"0\n3\n0 0\n3 354\n6 712\n"
    assert cp.read() == [(0, 0), (3, 354), (6, 712)]


@pytest.mark.parametrize("text,expected", [
    (b"", {}),                                   # empty file
    (b"0\n", {}),                                # count line missing
    (b"0", {}),
    (b"0\n0\n", {}),
    (b"0\n1\nt 1 5", {("t", 1): 5}),             # no final newline
    (b"0\r\n1\r\nt 1 5\r\n", {("t", 1): 5}),     # CRLF
    (b"0\r1\rt 1 5\r", {("t", 1): 5}),           # CR
    (b"0\n1\nt \t 1   5  \n", {("t", 1): 5}),    # runs of whitespace, trailing whitespace
    (b"0\n1\nt +1 -5\n", {("t", 1): -5}),        # Java parseInt/parseLong signs
    (b"0\n2\nt 1 5\nt 1 7\n", {("t", 1): 7}),    # duplicate key: later wins (HashMap.put)
])
def test_offset_checkpoint_read_rules(fs, text, expected):
    m, root = fs
    put(m, f"{root}/cp", text)
    assert OffsetCheckpointFile(m, f"{root}/cp").read() == expected


@pytest.mark.parametrize("text,line", [
    (b"1\n0\n", 1),                      # unknown version
    (b"x\n0\n", 1),
    (b" 0\n0\n", 1),                     # parseInt does not trim
    (b"0\nzero\n", 2),
    (b"0\n-1\n", 2),                     # negative count
    (b"0\n\n", 2),                       # empty count line
    (b"0\n1\nt 1\n", 3),                 # too few fields
    (b"0\n1\nt 1 5 6\n", 3),             # too many fields
    (b"0\n1\n t 1 5\n", 3),              # leading whitespace: Java split keeps an empty field
    (b"0\n1\nt x 5\n", 3),
    (b"0\n1\nt 1 5.0\n", 3),
    (b"0\n1\nt 2147483648 5\n", 3),      # partition beyond int32
    (b"0\n1\nt 1 9223372036854775808\n", 3),
    (b"0\n2\nt 1 5\n\n", 4),             # blank entry line
    (b"0\n2\nt 1 5\n", 3),               # fewer entries than the count
    (b"0\n1\nt 1 5\nu 2 6\n", 4),        # more entries than the count
    (b"0\n1\n\xff 1 5\n", 1),            # not UTF-8
])
def test_offset_checkpoint_malformed_names_file_and_line(fs, text, line):
    m, root = fs
    put(m, f"{root}/cp", text)
    with pytest.raises(CorruptCheckpointError) as info:
        OffsetCheckpointFile(m, f"{root}/cp").read()
    assert f"{root}/cp" in str(info.value)
    assert info.value.line_number == line
    assert f"line {line}" in str(info.value)


@pytest.mark.parametrize("text", [b"0\n1\n1\n", b"0\n1\n1 2 3\n", b"0\n1\n2147483648 0\n",
                                  b"0\n1\na 0\n"])
def test_leader_epoch_checkpoint_malformed(fs, text):
    m, root = fs
    put(m, f"{root}/le", text)
    with pytest.raises(CorruptCheckpointError):
        LeaderEpochCheckpointFile(m, f"{root}/le").read()


def test_read_of_deleted_checkpoint_is_a_storage_error(fs):
    m, root = fs
    cp = OffsetCheckpointFile(m, f"{root}/cp")
    m.remove(cp.path)
    with pytest.raises(KafkaStorageError):
        cp.read()


def test_write_into_missing_directory(fs):
    m, root = fs
    m.makedirs(f"{root}/p-0")
    cp = LeaderEpochCheckpointFile(m, f"{root}/p-0/leader-epoch-checkpoint")
    m.rmtree(f"{root}/p-0")
    with pytest.raises(KafkaStorageError):
        cp.write([(1, 0)])
    assert cp.write_if_dir_exists([(1, 0)]) is False


def test_topic_names_that_cannot_be_written_are_refused(fs):
    m, root = fs
    cp = OffsetCheckpointFile(m, f"{root}/cp")
    with pytest.raises(ValueError):
        cp.write({("bad topic", 0): 1})
    assert cp.read() == {}


def test_checkpoint_write_is_atomic_and_durable():
    m = MemoryMedium()
    m.makedirs("/logs")
    cp = OffsetCheckpointFile(m, "/logs/replication-offset-checkpoint")
    m.fsync_dir("/logs")
    cp.write({("t", 0): 10})
    m.crash("power")
    assert OffsetCheckpointFile(m, "/logs/replication-offset-checkpoint").read() == {("t", 0): 10}
    # an interrupted write (tmp written, not yet renamed) leaves the old checkpoint in place
    put(m, "/logs/replication-offset-checkpoint.tmp", b"0\n1\nt 0 99\n")
    assert OffsetCheckpointFile(m, "/logs/replication-offset-checkpoint").read() == {("t", 0): 10}


# --- clean shutdown marker (§1.12) -----------------------------------------------------------
def test_clean_shutdown_file(fs):
    m, root = fs
    csf = CleanShutdownFile(m, root)
    assert csf.path == f"{root}/.kafka_cleanshutdown"
    assert not csf.exists() and csf.read_broker_epoch() is None
    csf.write(1234)
    assert m.read_bytes(csf.path) == b'{"version":0,"brokerEpoch":1234}'
    assert json.loads(m.read_bytes(csf.path)) == {"version": 0, "brokerEpoch": 1234}
    assert csf.exists() and csf.read_broker_epoch() == 1234
    csf.write(7)  # rewriting truncates
    assert m.read_bytes(csf.path) == b'{"version":0,"brokerEpoch":7}'
    assert csf.delete() is True
    assert not csf.exists()
    assert csf.delete() is False


@pytest.mark.parametrize("content", [b"", b"{", b'{"version":0}', b'{"brokerEpoch":"x"}', b"[1]"])
def test_clean_shutdown_unreadable_epoch_is_none(fs, content):
    m, root = fs
    put(m, f"{root}/.kafka_cleanshutdown", content)
    csf = CleanShutdownFile(m, root)
    assert csf.exists()
    assert csf.read_broker_epoch() is None


def test_clean_shutdown_ignores_unknown_fields(fs):
    m, root = fs
    put(m, f"{root}/.kafka_cleanshutdown", b'{"version":0,"brokerEpoch":5,"extra":true}')
    assert CleanShutdownFile(m, root).read_broker_epoch() == 5


def test_fixture_clean_shutdown_markers():
    dirs = sorted(p.parent for p in FIXTURE_LOGS.rglob(".kafka_cleanshutdown"))
    assert dirs
    for d in dirs:
        csf = CleanShutdownFile(FileMedium(), str(d))
        assert csf.exists()
        assert csf.read_broker_epoch() is None  # pre-KIP-966 brokers wrote an empty marker


# --- partition.metadata (§1.11) --------------------------------------------------------------
def _topic_id() -> str:
    return base64.urlsafe_b64encode(uuid.UUID(int=0x1234_5678_9ABC).bytes).rstrip(b"=").decode()


def test_partition_metadata_write_and_read(fs):
    m, root = fs
    pm = PartitionMetadataFile(m, f"{root}/partition.metadata")
    assert not pm.exists()
    tid = _topic_id()
    pm.maybe_flush()  # nothing recorded: nothing written
    assert not pm.exists()
    pm.record(tid)
    pm.record(tid)  # the same id again is fine
    with pytest.raises(InconsistentTopicIdError):
        pm.record("vqSmEBIuSwm33bh8npzjMw")
    pm.maybe_flush()
    assert m.read_bytes(pm.path) == f"version: 0\ntopic_id: {tid}".encode()
    assert pm.read() == PartitionMetadata(0, tid)
    pm.record("vqSmEBIuSwm33bh8npzjMw")  # after the flush a new id may be recorded
    pm.delete()
    assert not pm.exists()


def test_partition_metadata_rejects_invalid_topic_ids(fs):
    m, root = fs
    pm = PartitionMetadataFile(m, f"{root}/partition.metadata")
    for bad in ("short", "!!!!!!!!!!!!!!!!!!!!!!", "A" * 25):
        with pytest.raises(ValueError):
            pm.record(bad)


@pytest.mark.parametrize("text,ok", [
    (b"version: 0\ntopic_id: vqSmEBIuSwm33bh8npzjMw", True),
    (b"version: 0\ntopic_id: vqSmEBIuSwm33bh8npzjMw\n", True),
    (b"version: 1\ntopic_id: vqSmEBIuSwm33bh8npzjMw", True),   # any version >= 0 is read
    (b"version: -1\ntopic_id: vqSmEBIuSwm33bh8npzjMw", False),
    (b"version:0\ntopic_id: vqSmEBIuSwm33bh8npzjMw", False),   # ":" must be followed by space
    (b"version: x\ntopic_id: vqSmEBIuSwm33bh8npzjMw", False),
    (b"version: 0\n", False),
    (b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", False),  # the zero UUID
    (b"version: 0\ntopic_id: not-a-uuid", False),
    (b"", False),
])
def test_partition_metadata_read_rules(fs, text, ok):
    m, root = fs
    put(m, f"{root}/partition.metadata", text)
    pm = PartitionMetadataFile(m, f"{root}/partition.metadata")
    if ok:
        assert pm.read().topic_id == "vqSmEBIuSwm33bh8npzjMw"
    else:
        with pytest.raises(CorruptCheckpointError):
            pm.read()


def test_fixture_partition_metadata_files():
    paths = sorted(FIXTURE_LOGS.rglob("partition.metadata"))
    assert paths
    for p in paths:
        meta = PartitionMetadataFile(FileMedium(), str(p)).read()
        version_line, topic_line = p.read_text().splitlines()[:2]
        assert meta == PartitionMetadata(int(version_line.split(": ")[1]),
                                         topic_line.split(": ")[1])


# --- every real checkpoint file in the fixtures ----------------------------------------------
def _independent_parse(text: str) -> list[list[str]]:
    lines = text.splitlines()
    if len(lines) < 2:
        return []
    assert lines[0] == "0"
    assert int(lines[1]) == len(lines) - 2
    return [line.split() for line in lines[2:]]


def test_every_fixture_offset_checkpoint_parses():
    seen = 0
    for name in OFFSET_CHECKPOINTS:
        for p in sorted(FIXTURE_LOGS.rglob(name)):
            got = OffsetCheckpointFile(FileMedium(), str(p)).read()
            want = {(t, int(part)): int(off) for t, part, off in _independent_parse(p.read_text())}
            assert got == want, p
            seen += 1
    assert seen >= 15
    rp = FIXTURE_LOGS / "kafka-2.1.2-zk" / "kafka-logs" / "cleaner-offset-checkpoint"
    assert OffsetCheckpointFile(FileMedium(), str(rp)).read() == {("__consumer_offsets", 17): 58}


def test_every_fixture_leader_epoch_checkpoint_parses():
    paths = sorted(FIXTURE_LOGS.rglob("leader-epoch-checkpoint"))
    assert len(paths) > 100
    for p in paths:
        got = LeaderEpochCheckpointFile(FileMedium(), str(p)).read()
        assert got == [(int(e), int(s)) for e, s in _independent_parse(p.read_text())], p
    kraft = FIXTURE_LOGS / "kafka-3.6.0-kraft" / "kraft-combined-logs" / "__cluster_metadata-0"
    entries = LeaderEpochCheckpointFile(FileMedium(), str(kraft / "leader-epoch-checkpoint")).read()
    assert entries[-1] == (6, 712) and len(entries) == 5


@pytest.mark.parametrize("entries", [[], [(("t", 0), 5)],
                                     [(("t", i), i * 7) for i in range(50)] + [(("u.v_w-1", 3), 2**40)]])
def test_offset_checkpoint_encode_matches_the_generic_encoder(entries):
    """OffsetCheckpointFile's own encoder (topic names checked once) writes the same bytes."""
    from replica_core.storage.checkpoint import CheckpointFile

    f = OffsetCheckpointFile(MemoryMedium(), "/x")
    assert f.encode(entries) == CheckpointFile.encode(f, entries)
    with pytest.raises(ValueError):
        f.encode([(("bad topic", 0), 1)])


def test_offset_checkpoint_content_reencodes_changed_lines_to_the_same_bytes():
    """OffsetCheckpointContent.update formats again only the moved offsets when the partitions
    are the same and in the same order; the file bytes are always what encode gives."""
    from replica_core.storage.checkpoint import OffsetCheckpointContent

    m = MemoryMedium()
    m.makedirs("/d")
    f = OffsetCheckpointFile(m, "/d/replication-offset-checkpoint")
    keys = [("t", i) for i in range(6)] + [("u", 0)]
    offsets = [0, 5, 9, 0, 2**40, 3, 7]
    content = OffsetCheckpointContent(keys, offsets)
    f.write_content(content)
    assert m.read_bytes(f.path) == b"0\n7\nt 0 0\nt 1 5\nt 2 9\nt 3 0\nt 4 1099511627776\nt 5 3\nu 0 7\n"
    moved = [0, 6, 9, 0, 2**40, 4, 7]
    updated = content.update(list(keys), moved)
    assert updated.lines is not content.lines and content.offsets == offsets  # a copy
    f.write_content(updated)
    assert m.read_bytes(f.path) == b"0\n7\nt 0 0\nt 1 6\nt 2 9\nt 3 0\nt 4 1099511627776\nt 5 4\nu 0 7\n"
    assert f.read() == dict(zip(keys, moved, strict=True))
    # told which offsets moved: the same lines as update finds by comparing them all
    assert content.moved(moved, [5, 1]).lines == updated.lines
    # other partitions, or another order: encoded afresh
    reordered = content.update(keys[::-1], offsets[::-1])
    assert "".join(reordered.lines) == "u 0 7\nt 5 3\nt 4 1099511627776\nt 3 0\nt 2 9\nt 1 5\nt 0 0\n"
    assert content.same_entries(keys[::-1], offsets[::-1])  # the same mapping, order aside
    assert not content.same_entries(keys, moved)
    assert not content.same_entries(keys[:-1], offsets[:-1])
    assert content.same_entries(list(keys), list(offsets))
    with pytest.raises(ValueError):
        content.update([("bad topic", 0)], [1])
    with pytest.raises(ValueError):
        OffsetCheckpointContent([("", 0)], [1])


_EPOCH_FILES = [
    b"0\n0\n",
    b"0\n1\n0 0\n",
    b"0\n3\n0 0\n4 1200\n17 999999999999999999\n",
    b"0\n2\n007 0012\n8 9\n",  # leading zeros: Integer.parseInt reads them
    b"0\n2\n2147483647 9223372036854775807\n2147483648 1\n",  # epoch past int32: corrupt
    b"0\n2\n0 0\n",  # fewer lines than the count: corrupt
    b"0\n1\n0 0\n1 5\n",  # more lines than the count: corrupt
    b"0\n1\n0  5\n",  # two spaces: Java's split on \s+ reads it
    b"0\n1\n-1 5\n",
    b"0\n1\n+1 5\n",
    b"0\r\n1\r\n3 5\r\n",
    b"0\n1\n3 5",  # no final line break
    b"1\n1\n3 5\n",  # another version
    b"0\n",
    b"",
    b"0\n1\n3 5 6\n",
    b"0\n1\n\xff 5\n",
]


@pytest.mark.parametrize("raw", _EPOCH_FILES)
def test_leader_epoch_decode_matches_the_general_rules(raw: bytes) -> None:
    """The one-match read of a checkpoint as written answers exactly what the line-by-line
    rules answer, entries or error, for files as written and files that are not."""
    cp = LeaderEpochCheckpointFile(MemoryMedium(), "/leader-epoch-checkpoint")

    def outcome(decode: object) -> object:
        try:
            return decode(raw)  # type: ignore[operator]
        except CorruptCheckpointError as e:
            return ("corrupt", str(e))

    general = outcome(lambda data: CheckpointFile.decode(cp, data))
    assert outcome(cp.decode) == general


def test_leader_epoch_decode_reads_a_written_file() -> None:
    cp = LeaderEpochCheckpointFile(MemoryMedium(), "/leader-epoch-checkpoint")
    assert cp.decode(b"0\n3\n0 0\n4 1200\n17 999999999999999999\n") == [
        (0, 0), (4, 1200), (17, 999999999999999999)]
    assert cp.decode(b"0\n2\n007 0012\n8 9\n") == [(7, 12), (8, 9)]


@pytest.mark.parametrize("entries,expected", [
    ([], b"0\n0\n"),
    ([(4, 0)], b"0\n1\n4 0\n"),
    ([(0, 0), (3, 354), (6, 2**62)], b"0\n3\n0 0\n3 354\n6 %d\n" % 2**62),
])
def test_leader_epoch_encode_writes_kafkas_lines(entries, expected):
    """The epoch checkpoint's own encoder: the version, the count, ``epoch offset`` lines — the
    same bytes as the generic encoder, also for numbers given as numpy integers or bools."""
    import numpy as np

    from replica_core.storage.checkpoint import CheckpointFile

    f = LeaderEpochCheckpointFile(MemoryMedium(), "/leader-epoch-checkpoint")
    assert f.encode(entries) == CheckpointFile.encode(f, entries) == expected
    as_numpy = [(np.int32(e), np.int64(s)) for e, s in entries]
    assert f.encode(as_numpy) == expected
    assert f.encode([(True, False)]) == b"0\n1\n1 0\n"
    f.write(entries)
    assert f.medium.read_bytes(f.path) == expected


@pytest.mark.parametrize("epoch,start,expected", [
    (0, 0, b"0\n1\n0 0\n"),
    (5, 0, b"0\n1\n5 0\n"),
    (2147483647, 2**62, b"0\n1\n2147483647 %d\n" % 2**62),
])
def test_leader_epoch_encode_of_a_list_of_one_entry(epoch, start, expected):
    """A list of one entry (a cache's first epoch, written by a new log's first append) is
    encoded in one step: the same bytes as one entry given any other way, as the generic
    encoder gives them, also for numpy integers; the file written holds them."""
    import numpy as np

    from replica_core.storage.checkpoint import CheckpointFile

    f = LeaderEpochCheckpointFile(MemoryMedium(), "/leader-epoch-checkpoint")
    assert f.encode([(epoch, start)]) == expected
    assert f.encode(((epoch, start),)) == f.encode(iter([(epoch, start)])) == expected
    assert CheckpointFile.encode(f, [(epoch, start)]) == expected
    assert f.encode([(np.int32(epoch), np.int64(start))]) == expected
    f.write([(epoch, start)])
    assert f.medium.read_bytes(f.path) == expected
