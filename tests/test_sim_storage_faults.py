"""Storage faults in the simulator (issue 18): each reaches the product's log recovery and is
counted in the run summary; Kafka's flush configs decide what a power failure can take."""
from __future__ import annotations

import os

import numpy as np
import pytest

from replica_core.errors import InvalidConfigurationError
from replica_core.sim import scenario as sc
from replica_core.sim.cluster import Cluster
from replica_core.sim.faults import PlannedFault, plan_random
from replica_core.sim.report import dumps_canonical
from replica_core.sim.run import run_scenario, write_outputs
from replica_core.storage.log_manager import RECOVERY_POINT_CHECKPOINT_FILE
from replica_core.storage.medium import PAGE_SIZE

TOPIC = "t"


def _batches(data: bytes) -> list[tuple[int, int, int]]:
    """(position, size, base offset) of each v2 batch framed whole in ``data`` (read from the
    frame fields directly: base offset int64, then the int32 length of what follows)."""
    out, pos = [], 0
    while pos + 12 <= len(data):
        size = 12 + int.from_bytes(data[pos + 8:pos + 12], "big")
        if pos + size > len(data):
            break
        out.append((pos, size, int.from_bytes(data[pos:pos + 8], "big")))
        pos += size
    return out


def _cluster(seed: int = 3, **config) -> Cluster:
    c = Cluster(3, seed=seed, config={"min.insync.replicas": 2, **config})
    c.create_topic(TOPIC, 1, 3)
    return c


def _produce(c: Cluster, batches: int, *, records: int = 5, size: int = 500) -> None:
    for k in range(batches):
        values = [bytes([65 + (k + r) % 26]) * size for r in range(records)]
        h = c.produce(TOPIC, 0, values, acks=-1)
        assert c.run_until(lambda h=h: h.done, 10_000) and h.ok, h
    c.advance(1000)  # followers fetch the last batch


def _follower(c: Cluster) -> int:
    state = c.partition_state(TOPIC, 0)
    return next(b for b in state.replicas if b != state.leader)


def _segment_files(c: Cluster, b: int) -> list[str]:
    broker = c.brokers[b]
    d = os.path.join(broker.log_dir, f"{TOPIC}-0")
    return [os.path.join(d, n) for n in broker.medium.listdir(d) if n.endswith(".log")]


def _loaded(c: Cluster, b: int):
    """Broker ``b``'s log of the partition as its LogManager loaded it (before LeaderAndIsr)."""
    return c.brokers[b].lm.get_log(TOPIC, 0)


def _report(c: Cluster, b: int):
    (load,) = c.brokers[b].lm.loads.values()
    return load.reports[(TOPIC, 0)]


# --- torn write ------------------------------------------------------------------------------
def test_torn_tail_is_cut_at_the_last_whole_batch():
    """Part of the unflushed tail persists (whole pages); recovery keeps exactly the batches
    that survived whole and cuts the rest, as LogSegment.recover does."""
    torn_mid_batch = 0
    for seed in range(1, 9):
        c = _cluster(seed)
        b = _follower(c)
        _produce(c, 3)
        c.flush(b)
        (path,) = _segment_files(c, b)
        medium = c.brokers[b].medium
        flushed = medium.durable_bytes(path)
        _produce(c, 7)  # ~18 KB more, unflushed: several pages
        cached = medium.read_bytes(path)
        assert len(cached) > len(flushed) + 3 * PAGE_SIZE
        c.crash(b, "power", torn_write="prefix")
        on_disk = medium.read_bytes(path)
        # the durable prefix is intact; what follows is whole pages of the cached bytes
        assert on_disk[:len(flushed)] == flushed
        assert on_disk == cached[:len(on_disk)]
        assert len(on_disk) == len(flushed) or len(on_disk) % PAGE_SIZE == 0 or \
            len(on_disk) == len(cached)
        whole = [bt for bt in _batches(cached) if bt[0] + bt[1] <= len(on_disk)]
        keep = whole[-1][0] + whole[-1][1]
        next_offset = _batches(cached)[len(whole)][2] if len(whole) < len(
            _batches(cached)) else None
        c.restart(b)
        lg = _loaded(c, b)
        assert medium.read_bytes(path) == cached[:keep]
        if next_offset is not None:
            assert lg.log_end_offset == next_offset
        report = _report(c, b)
        if keep < len(on_disk):  # a batch was torn by the page boundary: cut
            (cut,) = report.cuts
            assert cut.reason == "torn" and cut.valid_bytes == keep
            assert cut.truncated_bytes == len(on_disk) - keep
            torn_mid_batch += keep > len(flushed)
        summary = c.storage_faults.summary()
        assert summary["torn_writes"] == 1
        assert summary["recovery"]["bytes_truncated"] == len(on_disk) - keep
        c.advance(3000)
        c.check_invariants()  # it catches up from the leader
        c.close()
    assert torn_mid_batch  # some seed kept more than was flushed and still cut a torn batch


# --- bit flips ---------------------------------------------------------------------------------
def _multi_segment_cluster(seed: int = 5) -> tuple[Cluster, int, list[str]]:
    c = _cluster(seed, **{"segment.bytes": 8192})
    b = _follower(c)
    _produce(c, 12)
    paths = _segment_files(c, b)
    assert len(paths) >= 3
    return c, b, paths


def test_bit_flip_in_an_old_segment_is_found_at_recovery_and_truncates_the_log():
    c, b, paths = _multi_segment_cluster()
    medium = c.brokers[b].medium
    old = medium.read_bytes(paths[0])
    batches = _batches(old)
    assert len(batches) >= 2 and medium.durable_bytes(paths[0]) == old  # rolled: flushed
    checkpoint = os.path.join(c.brokers[b].log_dir, RECOVERY_POINT_CHECKPOINT_FILE)
    assert medium.durable_bytes(checkpoint) is None  # so recovery rescans from offset 0
    pos, _size, second_base = batches[1]
    bit = 8 * (pos + 61 + 10) + 2  # in the second batch's records: covered by its CRC
    c.storage_faults.apply(PlannedFault(0, 0, "bit_flip", b, storage=(
        ("bit", bit), ("partition", 0), ("segment", 0), ("topic", TOPIC))))
    assert medium.read_bytes(paths[0]) == old  # the page cache still serves the good copy
    c.crash(b, "power")
    c.restart(b)
    report = _report(c, b)
    (cut,) = report.cuts
    assert (cut.base_offset, cut.reason, cut.valid_bytes) == (0, "crc", pos)
    assert cut.truncated_bytes == len(old) - pos
    later = sorted(int(os.path.basename(p)[:20]) for p in paths[1:])
    assert sorted(report.deleted_segments) == later  # Kafka deletes every later segment
    assert _loaded(c, b).log_end_offset == second_base
    assert medium.read_bytes(paths[0]) == old[:pos]
    summary = c.storage_faults.summary()
    assert summary["bit_flips"] == 1
    rec = summary["recovery"]
    assert rec["truncations_by_reason"]["crc"] == 1 and rec["segments_deleted"] == len(later)
    assert rec["bytes_truncated"] == len(old) - pos
    c.advance(5000)
    c.check_invariants()  # refetched from the leader: the ISR agrees again
    assert c.log(b, TOPIC, 0).log_end_offset == c.log(
        c.partition_state(TOPIC, 0).leader, TOPIC, 0).log_end_offset
    c.close()


def test_bit_flip_below_the_recovery_point_loads_unnoticed_as_in_kafka():
    c, b, paths = _multi_segment_cluster()
    broker = c.brokers[b]
    broker.lm.checkpoint_recovery_points()  # Kafka does this every 60 s
    old = broker.medium.read_bytes(paths[0])
    pos = _batches(old)[1][0]
    c.storage_faults.apply(PlannedFault(0, 0, "bit_flip", b, storage=(
        ("bit", 8 * (pos + 70)), ("partition", 0), ("topic", TOPIC))))
    c.crash(b, "power")
    c.restart(b)
    assert _report(c, b).cuts == []
    flipped = broker.medium.read_bytes(paths[0])
    assert len(flipped) == len(old) and flipped != old  # the corrupt batch is still there
    c.advance(2000)
    c.check_invariants()  # an injected flip, not a product bug
    c.close()


def test_bit_flip_in_an_old_offset_index_gets_it_rebuilt():
    """Below the recovery point Kafka rescans nothing, but an index that fails its checks is
    rebuilt from the segment's batches (the loader's index sanity check)."""
    c, b, paths = _multi_segment_cluster()
    broker = c.brokers[b]
    broker.lm.checkpoint_recovery_points()
    index = paths[0][:-len(".log")] + ".index"
    good = broker.medium.durable_bytes(index)
    assert len(good) >= 8  # at least one (relative offset, position) entry
    c.storage_faults.apply(PlannedFault(0, 0, "bit_flip", b, storage=(
        ("bit", 7), ("file", "index"), ("partition", 0), ("segment", 0), ("topic", TOPIC))))
    c.crash(b, "power")  # bit 7 of byte 0: the first entry's relative offset turns negative
    assert broker.medium.read_bytes(index)[0] == good[0] ^ 0x80
    c.restart(b)
    report = _report(c, b)
    assert [base for base, _why in report.rebuilt_indexes] == [0]
    assert report.cuts == []
    assert broker.medium.read_bytes(index)[:len(good)] == good  # rebuilt from the batches
    assert c.storage_faults.summary()["recovery"]["indexes_rebuilt"] == 1
    c.close()


def test_bit_flips_on_power_failure_land_in_the_files_being_written():
    c = _cluster(7)
    b = _follower(c)
    _produce(c, 2)
    c.flush(b)
    _produce(c, 2)
    (path,) = _segment_files(c, b)
    flushed = c.brokers[b].medium.durable_bytes(path)
    c.crash(b, "power", bit_flips=3)
    after = c.brokers[b].medium.read_bytes(path)
    diff = sum(bin(x ^ y).count("1") for x, y in zip(after, flushed, strict=True))
    assert len(after) == len(flushed) and 1 <= diff <= 3  # two flips may hit one bit
    assert c.storage_faults.summary()["bit_flips"] == 3
    c.close()


# --- lost fsync --------------------------------------------------------------------------------
@pytest.mark.parametrize("lose", [False, True])
def test_lost_fsync_loses_what_a_flush_claimed(lose):
    c = _cluster(11)
    b = _follower(c)
    _produce(c, 4)
    if lose:
        c.storage_faults.apply(PlannedFault(0, 0, "lose_fsync", b))
    c.flush(b)
    claimed = c.log(b, TOPIC, 0).recovery_point
    assert claimed == c.log(b, TOPIC, 0).log_end_offset > 0  # the flush reported success
    c.crash(b, "power")
    c.restart(b)
    recovered = _loaded(c, b).log_end_offset
    summary = c.storage_faults.summary()
    if lose:
        assert recovered < claimed
        assert summary["lost_fsync_windows"] == 1 and summary["fsyncs_lost"] > 0
    else:
        assert recovered == claimed
        assert summary["fsyncs_lost"] == 0
    c.close()


# --- slow fsync --------------------------------------------------------------------------------
def test_slow_fsync_holds_back_produce_replies_when_appends_fsync():
    c = _cluster(13, **{"log.flush.interval.messages": 1})
    leader = c.partition_state(TOPIC, 0).leader
    c.slow(leader, 2000.0, "fsync")
    h = c.produce(TOPIC, 0, [b"x" * 100], acks=1)
    assert c.run_until(lambda: h.done, 60_000) and h.ok
    slow = c.storage_faults.summary()
    assert slow["slow_fsyncs"] >= 1 and slow["slow_fsync_ms"] > 0
    assert h.acked_ms - h.sent_ms >= slow["slow_fsync_ms"]
    c.slow(leader, 1.0, "all")  # unslow ends it
    assert c.brokers[leader].slow_factors["fsync"] == 1.0
    c.close()


def test_slow_fsync_on_a_follower_delays_acks_all():
    """With an fsync on every append, a follower whose fsyncs are slow fetches again only after
    them: acks=all (which waits for every ISR member) waits too."""
    latency = {}
    for slowed in (False, True):
        c = _cluster(17, **{"log.flush.interval.messages": 1})
        follower = _follower(c)
        if slowed:
            c.slow(follower, 5000.0, "fsync")
        h = c.produce(TOPIC, 0, [b"y" * 100], acks=-1)
        assert c.run_until(lambda h=h: h.done, 60_000) and h.ok
        latency[slowed] = h.acked_ms - h.sent_ms
        summary = c.storage_faults.summary()
        assert (summary["slow_fsyncs"] > 0) == slowed
        c.close()
    assert latency[True] > latency[False]


# --- scenarios: flush policy, counts, determinism, validation ------------------------------------
def _power_outage(**configs) -> dict:
    """examples/power-outage.toml, shrunk: every broker loses power at once with torn writes,
    then comes back: only what reached the disks can survive."""
    overrides = {"topics.0.partitions": 6, "duration_s": 20, **configs}
    return run_scenario(sc.load(sc.examples_dir() / "power-outage.toml", overrides))[0]


def test_flush_on_every_message_loses_nothing_acknowledged_in_a_power_outage():
    default = _power_outage()
    assert default["lost_acked_records"] > 0
    assert default["lost_acked_records_by_cause"]["power_failure"] == default["lost_acked_records"]
    torn = default["storage_faults"]
    assert torn["torn_writes"] == 3 and torn["recovery"]["bytes_truncated"] > 0
    fsync = _power_outage(**{"log.flush.interval.messages": 1})
    assert fsync["acked_records"] > 0 and fsync["lost_acked_records"] == 0
    assert int(fsync["config"]["kafka"]["log"]["flush.messages"]) == 1
    # every acknowledged byte was on disk: a torn write has nothing unflushed to tear
    assert fsync["storage_faults"]["recovery"]["bytes_truncated"] == 0


STORAGE_DOC = {
    "name": "storage-faults", "seed": 9, "duration_s": 10, "storage": "memory",
    "cluster": {"brokers": 3},
    "configs": {"min.insync.replicas": 2, "broker.session.timeout.ms": 2000,
                "segment.bytes": 16384},
    "topics": [{"name": "events", "partitions": 3, "replication_factor": 3}],
    "workload": {"batches_per_second": 10.0, "records_per_batch": 5, "record_bytes": 200,
                 "acks": "all"},
    "faults": [
        {"at_s": 1, "kind": "lose_fsync", "broker": 2},
        {"at_s": 2, "kind": "flush", "broker": 2},
        {"at_s": 2.5, "kind": "restore_fsync", "broker": 2},
        {"at_s": 3, "kind": "bit_flip", "broker": 1, "topic": "events", "partition": 1,
         "segment": 0},
        {"at_s": 4, "kind": "crash", "broker": 1, "mode": "power", "torn_write": True,
         "bit_flips": 1},
        {"at_s": 4.5, "kind": "crash", "broker": 2, "mode": "power"},
        {"at_s": 5, "kind": "restart", "broker": 1},
        {"at_s": 5.5, "kind": "restart", "broker": 2},
        {"at_s": 6, "kind": "slow", "broker": 3, "mode": "fsync", "factor": 50},
        {"at_s": 7, "kind": "flush", "broker": 3},
    ],
}


def test_scripted_storage_faults_are_counted_and_reproducible(tmp_path):
    scenario = sc.from_dict(STORAGE_DOC)
    summary, series, _ = run_scenario(scenario)
    s = summary["storage_faults"]
    assert s["torn_writes"] == 1 and s["lost_fsync_windows"] == 1
    assert s["bit_flips"] + s["bit_flips_missed"] == 2
    assert s["fsyncs_lost"] > 0
    rec = s["recovery"]
    assert rec["segments_recovered"] > 0 and rec["logs_recovered"] > 0
    assert rec["bytes_truncated"] > 0 and rec["logs_with_data_lost"] >= 1
    # the lost fsyncs left broker 2 with logs missing data a flush claimed: what the checker
    # finds there is counted, not a failed run
    assert summary["diverged_partitions"] > 0
    assert "diverged (after injected lost fsyncs or bit flips)" in summary["verdict"]["line"]
    assert summary["lost_acked_records"] == 0  # one replica at a time: the others have it
    labels = [label for _, label in series["fault_events"]]
    assert any("torn_write subset" in label and "bit_flips 1" in label for label in labels)
    assert any(label.startswith("bit_flip broker 1") for label in labels)
    again = run_scenario(sc.from_dict(STORAGE_DOC))[0]
    assert dumps_canonical(again) == dumps_canonical(summary)
    write_outputs(tmp_path, summary, series, {})
    page = (tmp_path / "report.html").read_text()
    assert "torn writes 1" in page and "bit flips 2" in page and "indexes rebuilt" in page


@pytest.mark.parametrize(("fault", "message"), [
    ({"kind": "crash", "broker": 1, "mode": "power", "torn_write": "sideways"}, "'sideways'"),
    ({"kind": "crash", "broker": 1, "mode": "process", "torn_write": True}, "mode = \"power\""),
    ({"kind": "crash", "broker": 1, "mode": "power", "bit_flips": -2}, "-2"),
    ({"kind": "bit_flip", "broker": 1, "topic": "nope"}, "'nope'"),
    ({"kind": "bit_flip", "broker": 1, "topic": "events", "partition": 7}, "partition 7"),
    ({"kind": "bit_flip", "broker": 1, "topic": "events", "file": "journal"}, "'journal'"),
    ({"kind": "bit_flip", "broker": 1, "segment": 3}, "need a topic"),
    ({"kind": "bit_flip"}, "needs a broker"),
    ({"kind": "lose_fsync", "broker": 9}, "unknown broker 9"),
    ({"kind": "slow", "broker": 1, "mode": "fsinc"}, "'fsinc'"),
])
def test_bad_storage_faults_are_refused_naming_the_value(fault, message):
    doc = {**STORAGE_DOC, "faults": [{"at_s": 1, **fault}]}
    with pytest.raises(InvalidConfigurationError, match=message):
        sc.from_dict(doc)


def test_bad_storage_rates_and_flush_scheduler_are_refused_naming_the_value():
    with pytest.raises(InvalidConfigurationError, match="torn_write_fraction.*1.5"):
        sc.from_dict({**STORAGE_DOC, "fault_rates": {"torn_write_fraction": 1.5}})
    with pytest.raises(InvalidConfigurationError, match="bit_flips_per_broker_hour"):
        sc.from_dict({**STORAGE_DOC, "fault_rates": {"bit_flips_per_broker_hour": -1}})
    with pytest.raises(InvalidConfigurationError, match="'soon'"):
        Cluster(1, config={"log.flush.scheduler.interval.ms": "soon"})


def test_disk_storage_refuses_storage_faults():
    doc = {**STORAGE_DOC, "storage": "disk",
           "faults": [{"at_s": 1, "kind": "lose_fsync", "broker": 1}]}
    with pytest.raises(InvalidConfigurationError, match="storage faults need"):
        run_scenario(sc.from_dict(doc))


def test_flush_scheduler_interval_is_the_flusher_period():
    assert Cluster(1, config={"log.flush.interval.ms": 5000,
                              "log.flush.scheduler.interval.ms": 1000}).flush_interval_ms == 1000
    c = Cluster(1, config={"log.flush.scheduler.interval.ms": 700})
    assert c.flush_interval_ms == 700 and c.log_config.flush_ms == 700  # Kafka's fallback
    assert Cluster(1, config={"log.flush.interval.ms": 5000}).flush_interval_ms == 5000
    assert Cluster(1).flush_interval_ms is None


def test_random_storage_faults_come_from_the_seed_and_zero_rates_draw_nothing():
    base = {"crashes_per_broker_hour": 300, "power_failure_fraction": 0.5,
            "slowdowns_per_broker_hour": 100}
    zero = {**base, "torn_write_fraction": 0.0, "bit_flips_per_broker_hour": 0.0,
            "lost_fsyncs_per_broker_hour": 0.0, "slow_fsyncs_per_broker_hour": 0.0}
    assert plan_random(base, [1, 2, 3], 60_000, np.random.default_rng(4)) == \
        plan_random(zero, [1, 2, 3], 60_000, np.random.default_rng(4))
    rates = {**base, "torn_write_fraction": 1.0, "bit_flips_per_broker_hour": 300,
             "lost_fsyncs_per_broker_hour": 200, "slow_fsyncs_per_broker_hour": 200}
    a = plan_random(rates, [1, 2, 3], 60_000, np.random.default_rng(4))
    assert a == plan_random(rates, [1, 2, 3], 60_000, np.random.default_rng(4))
    kinds = {p.kind for p in a}
    assert {"bit_flip", "lose_fsync", "restore_fsync"} <= kinds
    assert any(p.kind == "slow" and p.mode == "fsync" for p in a)
    powered = [p for p in a if p.kind == "crash" and p.mode == "power"]
    assert powered and all(dict(p.storage) == {"torn_write": "subset"} for p in powered)
    assert all(p.storage == () for p in a if p.kind == "crash" and p.mode == "process")
