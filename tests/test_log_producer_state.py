"""Producer state inside the Log (issue 17): Kafka's UnifiedLogTest / ProducerStateManagerTest
cases about idempotent producers, restated at the level of our ``Log``.

A leader answers a retried batch with the offsets it was first written at and writes nothing; a
sequence gap and an old producer epoch are refused before a byte is written; followers rebuild
the same state from what they replicate; the state survives a clean close through its
``.snapshot`` file, is rebuilt from the log after an unclean shutdown, is truncated with the log,
and its snapshots go with their segments. The real Kafka directories with ``.snapshot`` files
(tests/data/kafka-logs, SOURCES.md) load through ``Log.open`` with the state their snapshots
hold.
"""
from __future__ import annotations

import os
import shutil
import stat
import struct

import pytest
from conftest import FIXTURE_LOGS, require_nonempty
from replication_harness import TP, Cluster

from replica_core.clock import ManualClock
from replica_core.errors import (
    Errors,
    InvalidConfigurationError,
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
)
from replica_core.records import build_batch
from replica_core.storage.config import LogConfig
from replica_core.storage.log import Log
from replica_core.storage.log_manager import LogManager
from replica_core.storage.medium import FileMedium, MemoryMedium
from replica_core.storage.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    AppendOrigin,
    BatchInfo,
    ProducerStateManager,
    analyze_and_validate_producer_state,
    apply_in_sequence,
    apply_producer_state_update,
    in_sequence_entry,
    increment_sequence,
)
from replica_core.storage.producer_state_snapshot import (
    SnapshotEntry,
    decode_snapshot,
    encode_snapshot,
    snapshot_file_name,
)

T0 = 1_700_000_000_000
PID = 4242
DIR = "/data/topic-0"


def _empty_state_manager() -> ProducerStateManager:
    """A producer state manager of an empty partition directory on a fresh medium."""
    m = MemoryMedium()
    m.makedirs(DIR)
    return ProducerStateManager(m, DIR, ManualClock(T0))
# "producer": the leader's one-call fast path; "gzip": recompression takes the general path
CODECS = ["producer", "gzip"]


def config(codec: str = "producer", **props) -> LogConfig:
    return LogConfig.from_properties({"compression.type": codec, **props})


def pbatch(seq: int, n: int = 2, *, pid: int = PID, epoch: int = 0, ts: int = T0) -> bytes:
    """``n`` records of producer ``pid`` with sequences ``seq``..``seq + n - 1``."""
    return build_batch([b"r%d" % (seq + i) for i in range(n)], producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq, timestamps=[ts] * n)


def plain(n: int = 1, ts: int = T0) -> bytes:
    return build_batch([b"p"] * n, timestamps=[ts] * n)


def new_log(codec: str = "producer", medium=None, clock=None, **props) -> Log:
    medium = MemoryMedium() if medium is None else medium
    medium.makedirs("/data")
    return Log.open(DIR, config(codec, **props), medium=medium, clock=clock or ManualClock(T0))


def log_bytes(lg: Log) -> bytes:
    return b"".join(lg.medium.read_bytes(seg.log_path) for seg in lg.segments)


def snapshots_on_disk(medium, dir: str = DIR) -> list[str]:
    return sorted(n for n in medium.listdir(dir) if n.endswith(".snapshot"))


def rows(lg: Log) -> dict[int, SnapshotEntry]:
    """Each producer's state as a snapshot row (epoch, last batch, timestamp, ...)."""
    return {pid: e.to_snapshot_entry() for pid, e in lg.producer_state.active_producers.items()}


def walk(data: bytes) -> list[tuple[int, int, int, int]]:
    """(base offset, last offset, producer id, base sequence) of each v2 batch, by struct."""
    out, pos = [], 0
    while pos + 61 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        delta, = struct.unpack_from(">i", data, pos + 23)
        pid, _, seq = struct.unpack_from(">qhi", data, pos + 43)
        out.append((base, base + delta, pid, seq))
        pos += length + 12
    return out


def stored_batches(lg: Log) -> list[tuple[int, int, int, int]]:
    return [b for seg in lg.segments for b in walk(lg.medium.read_bytes(seg.log_path))]


# --- the leader ---------------------------------------------------------------------------
@pytest.mark.parametrize("codec", CODECS)
def test_a_retried_batch_is_answered_with_its_original_offsets_and_not_written(codec):
    lg = new_log(codec)
    first = lg.append_as_leader(pbatch(0, 3), 0)
    lg.append_as_leader(plain(2), 0)
    lg.append_as_leader(pbatch(3, 2), 0)
    assert (first.first_offset, first.last_offset) == (0, 2)
    before, leo = log_bytes(lg), lg.log_end_offset
    assert leo == 7
    again = lg.append_as_leader(pbatch(0, 3), 0)
    assert (again.first_offset, again.last_offset) == (0, 2)
    assert again.log_append_time == T0  # Kafka answers with the original batch's timestamp
    assert lg.log_end_offset == leo and log_bytes(lg) == before
    # the producer's next batch continues after its last one
    nxt = lg.append_as_leader(pbatch(5, 1), 0)
    assert (nxt.first_offset, nxt.last_offset) == (7, 7)
    assert [b[3] for b in stored_batches(lg) if b[2] == PID] == [0, 3, 5]


def test_the_last_five_batches_are_recognised_and_an_older_retry_is_out_of_order():
    lg = new_log()
    for i in range(6):  # batches at offsets 0..5, sequences 0..5
        lg.append_as_leader(pbatch(i, 1), 0)
    assert lg.append_as_leader(pbatch(1, 1), 0).first_offset == 1  # 2nd newest-but-four: kept
    with pytest.raises(OutOfOrderSequenceError):
        lg.append_as_leader(pbatch(0, 1), 0)  # the oldest fell out of the five
    assert lg.log_end_offset == 6


@pytest.mark.parametrize("codec", CODECS)
def test_a_sequence_gap_is_refused_before_anything_is_written(codec):
    lg = new_log(codec)
    lg.append_as_leader(pbatch(0, 2), 0)
    before, epochs = log_bytes(lg), lg.leader_epoch_cache.entries()
    with pytest.raises(OutOfOrderSequenceError) as err:
        lg.append_as_leader(pbatch(5, 1), 3)  # expected 2; a new leader epoch too
    assert err.value.code == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log_bytes(lg) == before and lg.log_end_offset == 2
    assert lg.leader_epoch_cache.entries() == epochs  # not even the epoch cache moved
    assert lg.producer_state.last_entry(PID).last_seq == 1


@pytest.mark.parametrize("codec", CODECS)
def test_an_old_producer_epoch_is_refused_and_a_new_one_starts_at_zero(codec):
    lg = new_log(codec)
    lg.append_as_leader(pbatch(0, 2, epoch=3), 0)
    with pytest.raises(InvalidProducerEpochError) as err:
        lg.append_as_leader(pbatch(2, 1, epoch=2), 0)
    assert err.value.code == Errors.INVALID_PRODUCER_EPOCH
    with pytest.raises(OutOfOrderSequenceError):
        lg.append_as_leader(pbatch(2, 1, epoch=4), 0)  # a bumped epoch must start at 0
    assert lg.log_end_offset == 2
    lg.append_as_leader(pbatch(0, 1, epoch=4), 0)
    assert rows(lg)[PID][:4] == (PID, 4, 0, 2)  # epoch 4, last sequence 0 at offset 2


def test_producers_are_independent_and_a_producer_unknown_here_starts_anywhere():
    lg = new_log()
    lg.append_as_leader(pbatch(0, 2, pid=1), 0)
    lg.append_as_leader(pbatch(70, 2, pid=2), 0)  # no state for 2: any sequence (KIP-360)
    lg.append_as_leader(pbatch(2, 1, pid=1), 0)
    assert {p: r.last_sequence for p, r in rows(lg).items()} == {1: 2, 2: 71}


def test_logs_without_producer_ids_make_no_state_and_no_snapshot_until_closed():
    medium = MemoryMedium()
    lg = new_log(medium=medium)
    for _ in range(50):
        lg.append_as_leader(plain(2), 0)
    lg.append_as_follower(build_batch([b"f"], base_offset=100, timestamps=[T0]))
    assert snapshots_on_disk(medium) == []
    assert lg.remove_expired_producers(T0 + 10 * DEFAULT_PRODUCER_ID_EXPIRATION_MS) == []
    lg.flush()
    lg.close()  # Kafka snapshots at the log end offset on close, producers or not
    assert snapshots_on_disk(medium) == [snapshot_file_name(101)]
    assert decode_snapshot(medium.read_bytes(f"{DIR}/{snapshot_file_name(101)}")) == []


# --- the follower -------------------------------------------------------------------------
def test_a_follower_builds_the_leaders_state_from_what_it_replicates():
    leader = new_log()
    for i in range(4):
        leader.append_as_leader(pbatch(2 * i, 2, pid=7), 0)
        leader.append_as_leader(plain(), 0)
        leader.append_as_leader(pbatch(i, 1, pid=8, epoch=1), 0)
    medium = MemoryMedium()
    medium.makedirs("/f")
    follower = Log.open("/f/topic-0", config(), medium=medium, clock=ManualClock(T0))
    follower.append_as_follower(log_bytes(leader))
    assert rows(follower) == rows(leader)
    for pid in (7, 8):
        assert (list(follower.producer_state.last_entry(pid).batch_metadata)
                == list(leader.producer_state.last_entry(pid).batch_metadata))
    # replication checks nothing: an older epoch from the leader is taken as it comes
    follower.append_as_follower(build_batch([b"z"], base_offset=follower.log_end_offset,
                                            producer_id=8, producer_epoch=0, base_sequence=9,
                                            timestamps=[T0]))
    assert rows(follower)[8][1:3] == (0, 9)


def test_the_produce_path_returns_the_original_offsets_for_a_retry_and_followers_agree():
    c = Cluster()
    c.create()
    rm = c.rm(0)
    a, b = pbatch(0, 3, ts=c.clock.milliseconds()), pbatch(3, 2, ts=c.clock.milliseconds())
    assert rm.append_records({TP: a}, acks=1, timeout_ms=1000)[TP].base_offset == 0
    assert rm.append_records({TP: b}, acks=1, timeout_ms=1000)[TP].base_offset == 3
    retry = rm.append_records({TP: a}, acks=1, timeout_ms=1000)[TP]
    assert (retry.error_code, retry.base_offset) == (Errors.NONE, 0)
    assert c.partition(0).log_end_offset == 5
    c.catch_up()
    # acks=all: the retried batch is already replicated, so the answer comes at once
    again = rm.append_records({TP: b}, acks=-1, timeout_ms=1000)[TP]
    assert (again.error_code, again.base_offset) == (Errors.NONE, 3)
    gap = rm.append_records({TP: pbatch(9, 1, ts=c.clock.milliseconds())}, acks=1,
                            timeout_ms=1000)[TP]
    assert gap.error_code == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert c.partition(0).log_end_offset == 5
    for f in (1, 2):
        assert rows(c.partition(f).log) == rows(c.partition(0).log)


# --- snapshots, restarts ------------------------------------------------------------------
def test_state_survives_a_clean_close_through_the_snapshot_file():
    medium, clock = MemoryMedium(), ManualClock(T0)
    lg = new_log(medium=medium, clock=clock)
    lg.append_as_leader(pbatch(0, 3, epoch=2), 0)
    lg.append_as_leader(pbatch(0, 1, pid=9), 0)
    lg.append_as_leader(plain(), 0)
    lg.flush()
    lg.close()
    assert snapshots_on_disk(medium) == [snapshot_file_name(5)]
    on_disk = {r.producer_id: r for r in decode_snapshot(
        medium.read_bytes(f"{DIR}/{snapshot_file_name(5)}"))}
    # producer, epoch, last sequence, last offset, offset delta, timestamp, coordinator epoch,
    # open transaction
    assert on_disk == {PID: SnapshotEntry(PID, 2, 2, 2, 2, T0, -1, -1),
                       9: SnapshotEntry(9, 0, 0, 3, 0, T0, -1, -1)}
    again = Log.open(DIR, config(), medium=medium, clock=clock, had_clean_shutdown=True)
    assert rows(again) == on_disk
    assert again.append_as_leader(pbatch(0, 3, epoch=2), 0).first_offset == 0  # a retry
    with pytest.raises(OutOfOrderSequenceError):
        again.append_as_leader(pbatch(4, 1, epoch=2), 0)
    assert again.append_as_leader(pbatch(3, 1, epoch=2), 0).first_offset == 5


def test_a_roll_snapshots_the_state_at_the_new_segment_base():
    medium = MemoryMedium()
    lg = new_log(medium=medium)
    lg.append_as_leader(pbatch(0, 2), 0)
    lg.roll()
    lg.append_as_leader(pbatch(2, 2), 0)
    assert [s.base_offset for s in lg.segments] == [0, 2]
    assert snapshots_on_disk(medium) == [snapshot_file_name(2)]
    rows_at_roll = decode_snapshot(medium.read_bytes(f"{DIR}/{snapshot_file_name(2)}"))
    assert [(r.producer_id, r.last_sequence, r.last_offset) for r in rows_at_roll] == [(PID, 1, 1)]
    assert medium.durable_bytes(f"{DIR}/{snapshot_file_name(2)}") is not None  # flushed


def _busy_log(medium, clock, n=12):
    """Three producers over several segments (segment.bytes small), plain batches between."""
    lg = new_log(medium=medium, clock=clock, **{"segment.bytes": 400})
    seqs = {1: 0, 2: 0, 3: 100}
    lg.append_as_leader(pbatch(100, 1, pid=3), 0)
    seqs[3] = 101
    for i in range(n):
        for pid in (1, 2):
            lg.append_as_leader(pbatch(seqs[pid], 2, pid=pid, ts=T0 + i), 0)
            seqs[pid] += 2
        lg.append_as_leader(plain(3, ts=T0 + i), 0)
    return lg


@pytest.mark.parametrize("drop_snapshots", [False, True])
def test_an_unclean_shutdown_rebuilds_the_state_from_the_log(drop_snapshots):
    medium, clock = MemoryMedium(), ManualClock(T0)
    lg = _busy_log(medium, clock)
    assert len(lg.segments) >= 3 and snapshots_on_disk(medium)
    expected = rows(lg)
    leo = lg.log_end_offset
    lg.flush()
    medium.crash("process")  # no close: no snapshot at the log end
    if drop_snapshots:  # nothing to start from: the whole log is replayed
        for name in snapshots_on_disk(medium):
            medium.remove(f"{DIR}/{name}")
    again = Log.open(DIR, config(**{"segment.bytes": 400}), medium=medium, clock=clock,
                     had_clean_shutdown=False, recovery_point=lg.recovery_point)
    assert again.log_end_offset == leo
    assert rows(again) == expected
    assert again.producer_state.map_end_offset == leo
    assert snapshot_file_name(leo) in snapshots_on_disk(medium)  # written after the rebuild
    # the last batch of producer 1 is a retry; its next one is accepted
    last1 = expected[1]
    retry = pbatch(last1.last_sequence - 1, 2, pid=1, ts=last1.timestamp)
    assert again.append_as_leader(retry, 0).last_offset == last1.last_offset
    assert again.append_as_leader(pbatch(last1.last_sequence + 1, 1, pid=1), 0).first_offset == leo


def test_a_power_failure_rebuilds_from_what_survived():
    medium, clock = MemoryMedium(), ManualClock(T0)
    lg = _busy_log(medium, clock, n=4)
    lg.flush()
    durable = rows(lg)
    durable_leo = lg.log_end_offset
    lg.append_as_leader(pbatch(8, 2, pid=1), 0)  # not flushed: lost with the power
    medium.crash("power")
    again = Log.open(DIR, config(**{"segment.bytes": 400}), medium=medium, clock=clock,
                     had_clean_shutdown=False, recovery_point=durable_leo)
    assert again.log_end_offset == durable_leo and rows(again) == durable


def test_truncation_drops_the_state_above_the_truncation_point():
    medium, clock = MemoryMedium(), ManualClock(T0)
    lg = _busy_log(medium, clock)
    batches = stored_batches(lg)
    # cut in the middle: keep everything below the base of a batch of producer 2
    cut = [b for b in batches if b[2] == 2][len([b for b in batches if b[2] == 2]) // 2][0]
    kept = [b for b in batches if b[1] < cut]
    lg.truncate_to(cut)
    assert lg.log_end_offset == cut
    for pid in (1, 2, 3):
        mine = [b for b in kept if b[2] == pid]
        entry = lg.producer_state.last_entry(pid)
        base, last, _, seq = mine[-1]
        assert (entry.last_data_offset, entry.last_seq) == (last, seq + last - base)
    assert all(int(n[:20]) <= cut for n in snapshots_on_disk(medium))
    assert snapshot_file_name(cut) in snapshots_on_disk(medium)  # Kafka's rebuild writes it
    # the truncated batch of producer 2 is new again, not a duplicate
    removed = [b for b in batches if b[2] == 2 and b[0] >= cut][0]
    info = lg.append_as_leader(pbatch(removed[3], 2, pid=2), 0)
    assert info.first_offset == cut


def test_truncating_fully_forgets_every_producer_and_snapshot():
    medium, clock = MemoryMedium(), ManualClock(T0)
    lg = _busy_log(medium, clock, n=6)
    lg.truncate_fully_and_start_at(500)
    assert lg.producer_state.active_producers == {} and snapshots_on_disk(medium) == []
    assert lg.append_as_leader(pbatch(77, 1, pid=1), 0).first_offset == 500  # any sequence


def test_snapshots_are_deleted_with_their_segments():
    medium, clock = MemoryMedium(), ManualClock(T0)
    lg = _busy_log(medium, clock)
    bases = [s.base_offset for s in lg.segments]
    assert snapshots_on_disk(medium) == [snapshot_file_name(b) for b in bases[1:]]
    lg.update_high_watermark(lg.log_end_offset)
    lg.maybe_increment_log_start_offset(bases[3])
    assert lg.delete_old_segments() == 3
    assert snapshots_on_disk(medium) == [snapshot_file_name(b) for b in bases[3:]]
    # a producer whose batches are all gone keeps its state until it expires (Kafka)
    assert set(lg.producer_state.active_producers) == {1, 2, 3}


def test_idle_producers_expire_after_producer_id_expiration_ms():
    clock = ManualClock(T0)
    lg = Log.open(DIR, config(), medium=MemoryMedium(), clock=clock,
                  producer_id_expiration_ms=60_000)
    lg.append_as_leader(pbatch(0, 1, pid=1), 0)
    clock.advance(30_000)
    lg.append_as_leader(pbatch(0, 1, pid=2, ts=clock.milliseconds()), 0)
    clock.advance(30_000)
    assert lg.remove_expired_producers() == [1]
    assert set(lg.producer_state.active_producers) == {2}
    assert lg.append_as_leader(pbatch(40, 1, pid=1, ts=clock.milliseconds()), 0)  # any seq


def test_a_clean_open_of_a_new_log_above_zero_writes_kafkas_empty_snapshot():
    """Kafka's rebuildProducerState after a clean shutdown with no snapshot writes empty ones
    (the upgrade path); a log created at 0 has nothing to write."""
    for start, expected in ((0, []), (120, [snapshot_file_name(120)])):
        medium = MemoryMedium()
        medium.makedirs("/data")
        Log.open(DIR, config(), medium=medium, clock=ManualClock(T0), log_start_offset=start,
                 had_clean_shutdown=True)
        assert snapshots_on_disk(medium) == expected


# --- real Kafka directories -----------------------------------------------------------------
def _checkpoint(path) -> dict[str, int]:
    """``topic-partition`` -> offset from a Kafka offset checkpoint file (version 0)."""
    if not os.path.exists(path):
        return {}
    lines = open(path).read().split("\n")
    return {f"{t}-{p}": int(o) for t, p, o in (ln.split() for ln in lines[2:] if ln.strip())}


SNAPSHOT_DIRS = require_nonempty(sorted(
    {os.path.relpath(os.path.dirname(os.path.join(root, n)), FIXTURE_LOGS)
     for root, _, names in os.walk(FIXTURE_LOGS) for n in names if n.endswith(".snapshot")}),
    "partition directories with .snapshot files")


@pytest.mark.parametrize("rel", SNAPSHOT_DIRS)
def test_kafka_partition_dirs_load_the_state_their_snapshots_hold(tmp_path, rel):
    """Kafka's load rule, computed here from the files: the newest snapshot in
    (log start offset, log end offset] is the state (those logs hold no batch with a producer
    id, checked below, so nothing is replayed on top); snapshots at or below the log start are
    dropped (kafka-2.7.1 myTopic-0: its three producers are forgotten, as Kafka forgets them)."""
    src = FIXTURE_LOGS / rel
    kafka_logs = src.parent
    dst = tmp_path / src.name
    shutil.copytree(src, dst)
    for p in dst.iterdir():
        p.chmod(p.stat().st_mode | stat.S_IWUSR)
    segments = sorted(int(p.name[:20]) for p in dst.iterdir() if p.name.endswith(".log"))
    stored = [b for base in segments for b in walk((dst / f"{base:020d}.log").read_bytes())]
    assert all(b[2] == -1 for b in stored)
    leo = stored[-1][1] + 1 if stored else segments[-1]
    log_start = max(_checkpoint(kafka_logs / "log-start-offset-checkpoint").get(src.name, 0),
                    segments[0])
    snaps = {int(p.name[:20]): p for p in src.iterdir() if p.name.endswith(".snapshot")}
    in_range = [o for o in snaps if log_start < o <= leo]
    entries = decode_snapshot(snaps[max(in_range)].read_bytes()) if in_range else []
    newest = max([e.timestamp for e in entries], default=T0)
    clean = (kafka_logs / ".kafka_cleanshutdown").exists()
    lg = Log.open(str(dst), config(), medium=FileMedium(), clock=ManualClock(newest + 1),
                  log_start_offset=log_start, had_clean_shutdown=clean,
                  recovery_point=_checkpoint(kafka_logs / "recovery-point-offset-checkpoint")
                  .get(src.name, 0))
    assert lg.log_end_offset == leo
    assert rows(lg) == {e.producer_id: e for e in entries}
    assert lg.producer_state.map_end_offset == leo


def test_a_real_kafka_snapshot_at_the_log_end_brings_its_producers_back():
    """kafka-2.7.1 myTopic-0's snapshot (three idempotent producers) put where a clean close
    leaves one: at the end of a log. Reopened cleanly, its producers are there, a retry of a
    producer's last batch is answered with the offsets the snapshot holds, its next sequence
    is accepted."""
    snap = FIXTURE_LOGS / "kafka-2.7.1-zk/kafka-logs/myTopic-0/00000000000000000038.snapshot"
    entries = decode_snapshot(snap.read_bytes())
    assert [e.producer_id for e in entries] == [4001, 4002, 4003]
    newest = max(e.timestamp for e in entries)
    medium, clock = MemoryMedium(), ManualClock(newest + 1)
    lg = new_log(medium=medium, clock=clock)
    for _ in range(19):
        lg.append_as_leader(plain(2, ts=newest), 0)
    lg.flush()
    lg.close()
    path = f"{DIR}/{snapshot_file_name(38)}"
    assert decode_snapshot(medium.read_bytes(path)) == []
    medium.write_atomic(path, snap.read_bytes())
    again = Log.open(DIR, config(), medium=medium, clock=clock, had_clean_shutdown=True)
    assert rows(again) == {e.producer_id: e for e in entries}
    e = entries[0]
    retry = pbatch(e.last_sequence - e.offset_delta, e.offset_delta + 1, pid=e.producer_id,
                   epoch=e.epoch, ts=newest)
    info = again.append_as_leader(retry, 0)
    assert (info.first_offset, info.last_offset) == (e.last_offset - e.offset_delta, e.last_offset)
    nxt = again.append_as_leader(pbatch(e.last_sequence + 1, 1, pid=e.producer_id, epoch=e.epoch,
                                        ts=newest), 0)
    assert nxt.first_offset == 38
    # a day after its last batch a producer is forgotten when the snapshot is loaded
    late = ManualClock(newest + DEFAULT_PRODUCER_ID_EXPIRATION_MS)
    again.flush()
    again.close()
    medium.write_atomic(f"{DIR}/{snapshot_file_name(39)}", encode_snapshot(entries))
    assert Log.open(DIR, config(), medium=medium, clock=late,
                    had_clean_shutdown=True).producer_state.active_producers == {}


# --- the log manager ----------------------------------------------------------------------
def test_the_log_manager_expires_idle_producers_every_check_interval():
    clock, medium = ManualClock(T0), MemoryMedium()
    medium.makedirs("/d")
    lm = LogManager(["/d"], config(), medium=medium, clock=clock,
                    producer_id_expiration_ms=1_000,
                    producer_id_expiration_check_interval_ms=5_000)
    lm.startup()
    lg = lm.create_log("t", 0)
    lg.append_as_leader(pbatch(0, 1, pid=1), 0)
    lm.create_log("t", 1).append_as_leader(plain(), 0)  # no producer: nothing to expire
    clock.advance(4_999)
    assert lm.remove_expired_producers_if_due() == 0 and set(lg.producer_state.active_producers) == {1}
    clock.advance(1)
    assert lm.remove_expired_producers_if_due() == 1 and lg.producer_state.active_producers == {}
    lg.append_as_leader(pbatch(5, 1, pid=2, ts=clock.milliseconds()), 0)
    clock.advance(4_999)
    assert lm.remove_expired_producers_if_due() == 0  # next check 5 s after the last one
    clock.advance(1)
    assert lm.remove_expired_producers_if_due() == 1


def test_a_clean_broker_restart_keeps_producer_state_through_the_log_manager():
    clock, medium = ManualClock(T0), MemoryMedium()
    medium.makedirs("/d")
    lm = LogManager(["/d"], config(), medium=medium, clock=clock)
    lm.startup()
    lm.create_log("t", 0).append_as_leader(pbatch(0, 4, pid=3), 0)
    lm.shutdown()
    again = LogManager(["/d"], config(), medium=medium, clock=clock)
    again.startup()
    lg = again.get_log("t", 0)
    assert rows(lg)[3][2:4] == (3, 3)  # last sequence 3 at offset 3
    assert lg.append_as_leader(pbatch(0, 4, pid=3), 0).first_offset == 0


@pytest.mark.parametrize("kw,name", [
    ({"producer_id_expiration_ms": 0}, "producer.id.expiration.ms"),
    ({"producer_id_expiration_check_interval_ms": -5}, "producer.id.expiration.check.interval.ms"),
    ({"producer_id_expiration_check_interval_ms": "600000"},
     "producer.id.expiration.check.interval.ms"),
])
def test_bad_producer_expiration_settings_are_refused_by_name(kw, name):
    with pytest.raises(InvalidConfigurationError, match=name.replace(".", r"\.")):
        LogManager(["/d"], config(), medium=MemoryMedium(), clock=ManualClock(T0), **kw)


# --- the one-step path for the common append ----------------------------------------------
def test_the_one_step_path_leaves_what_the_general_path_leaves():
    """in_sequence_entry + apply_in_sequence against analyze_and_validate_producer_state +
    apply_producer_state_update over a seeded mix of appends (in sequence, retries, gaps, new
    and old epochs, replicated batches): whenever the one-step path takes a batch, both
    managers end in the same state. An open transaction anywhere sends every batch the
    general way."""
    import random

    manager = _empty_state_manager

    def state(m):
        return ({p: (e.to_snapshot_entry(), list(e.batch_metadata))
                 for p, e in m.active_producers.items()},
                m.first_unstable_offset(), m.map_end_offset)

    rng = random.Random(17)
    fast, general = manager(), manager()
    next_seq = {1: 0, 2: 0}
    epoch = {1: 0, 2: 0}
    offset, taken = 0, 0
    for _ in range(600):
        pid = rng.choice((1, 2))
        kind = rng.random()
        if kind < 0.05:
            epoch[pid] += 1
            next_seq[pid] = 0
        n = rng.randint(1, 4)
        seq = next_seq[pid]
        if 0.05 <= kind < 0.15:
            seq = max(0, seq - rng.randint(1, 8))  # a retry (maybe of an evicted batch)
        elif 0.15 <= kind < 0.2:
            seq += rng.randint(1, 3)  # a gap
        ep = epoch[pid] - (1 if 0.2 <= kind < 0.23 and epoch[pid] else 0)
        txn = False
        origin = AppendOrigin.REPLICATION if rng.random() < 0.3 else AppendOrigin.CLIENT
        b = BatchInfo(pid, ep, seq, offset, offset + n - 1, T0 + offset, is_transactional=txn)
        last_seq = increment_sequence(seq, n - 1)
        entry = None if txn else in_sequence_entry(fast, pid, ep, seq, last_seq,
                                                   origin is AppendOrigin.CLIENT)
        try:
            upd = analyze_and_validate_producer_state(general, [b], origin)
        except Exception as e:  # noqa: BLE001 - whatever the general path refuses
            assert entry is None, (b, origin, e)
            # the same refusal on the other manager: nothing changes on either
            with pytest.raises(type(e)):
                analyze_and_validate_producer_state(fast, [b], origin)
            continue
        if upd.duplicate is not None:
            assert entry is None
            continue
        apply_producer_state_update(general, upd, b.last_offset)
        if entry is not None:
            taken += 1
            apply_in_sequence(fast, entry, ep, last_seq, b.base_offset, b.last_offset,
                              b.max_timestamp)
        else:
            apply_producer_state_update(fast, analyze_and_validate_producer_state(
                fast, [b], origin), b.last_offset)
        assert state(fast) == state(general)
        if seq + n > next_seq[pid] and ep == epoch[pid]:
            next_seq[pid] = seq + n
        offset += n
    assert taken > 200  # the one-step path did most of the work
    upd = analyze_and_validate_producer_state(
        general, [BatchInfo(3, 0, 0, offset, offset, T0, is_transactional=True)],
        AppendOrigin.CLIENT)
    apply_producer_state_update(general, upd, offset)
    e1 = general.last_entry(1)
    assert in_sequence_entry(general, 1, e1.producer_epoch, e1.last_seq + 1, e1.last_seq + 1,
                             True) is None


def test_the_one_step_path_takes_new_producers_as_the_general_path_does():
    """A producer the partition holds nothing for: in_sequence_entry answers a new entry (any
    sequence, KIP-360) and apply_in_sequence installs it, leaving what the general path leaves;
    an epoch below NO_PRODUCER_EPOCH, or a transaction open in the partition, is left to the
    general path (which refuses the first for a client)."""
    from replica_core.errors import InvalidProducerEpochError
    manager = _empty_state_manager

    def state(m):
        return ([(p, e.to_snapshot_entry(), list(e.batch_metadata))
                 for p, e in m.active_producers.items()],  # in insertion order
                m.first_unstable_offset(), m.map_end_offset, m._oldest_txn_last_timestamp)

    fast, general = manager(), manager()
    offset = 0
    origins = (AppendOrigin.CLIENT, AppendOrigin.REPLICATION, AppendOrigin.COORDINATOR)
    for pid in range(40):
        origin = origins[pid % 3]
        epoch = (-1, 0, 3, 7)[pid % 4]
        seq = (0, 5, 2**31 - 1)[pid % 3]
        n = 1 + pid % 4
        last_seq = increment_sequence(seq, n - 1)
        b = BatchInfo(pid, epoch, seq, offset, offset + n - 1, T0 + pid)
        entry = in_sequence_entry(fast, pid, epoch, seq, last_seq, origin is AppendOrigin.CLIENT)
        assert entry is not None and entry.is_empty and pid not in fast.active_producers
        apply_producer_state_update(
            general, analyze_and_validate_producer_state(general, [b], origin), b.last_offset)
        apply_in_sequence(fast, entry, epoch, last_seq, b.base_offset, b.last_offset,
                          b.max_timestamp)
        assert state(fast) == state(general)
        offset += n
    assert len(fast.active_producers) == 40
    # an epoch below -1: the general path refuses it from a client, takes it when replicating
    assert in_sequence_entry(fast, 99, -2, 0, 0, True) is None
    with pytest.raises(InvalidProducerEpochError):
        analyze_and_validate_producer_state(
            fast, [BatchInfo(99, -2, 0, offset, offset, T0)], AppendOrigin.CLIENT)
    assert in_sequence_entry(fast, 99, -2, 0, 0, False) is None
    # a transaction open anywhere in the partition: the general path for everyone
    upd = analyze_and_validate_producer_state(
        general, [BatchInfo(500, 0, 0, offset, offset, T0, is_transactional=True)],
        AppendOrigin.CLIENT)
    apply_producer_state_update(general, upd, offset)
    assert in_sequence_entry(general, 501, 0, 0, 0, True) is None
    assert in_sequence_entry(general, 501, 0, 0, 0, False) is None
