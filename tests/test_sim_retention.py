"""Retention in the simulator (issue 16): the brokers' LogManagers run their retention check on
the simulated clock; a follower that fell behind the leader's log start meets
OFFSET_OUT_OF_RANGE and resets to the leader's log start, as Kafka's fetcher does."""
from __future__ import annotations

import pytest

from replica_core.errors import InvalidConfigurationError
from replica_core.sim import scenario as sc
from replica_core.sim.cluster import Cluster, configs_in_force
from replica_core.sim.run import run_scenario

RETENTION = {
    "min.insync.replicas": 2, "broker.session.timeout.ms": 2000,
    "replica.lag.time.max.ms": 4000,
    "segment.bytes": 8192, "retention.bytes": 16384, "file.delete.delay.ms": 3000,
    "log.retention.check.interval.ms": 1000, "log.initial.task.delay.ms": 1000,
}


def _produce_for(c: Cluster, ms: int, batch: int = 20) -> None:
    """acks=all batches of ``batch`` 100-byte records, one every 50 ms for ``ms``."""
    for i in range(ms // 50):
        h = c.produce("t", 0, [b"%06d" % i + b"x" * 94] * batch)
        assert c.run_until(lambda h=h: h.done, 10_000) and h.ok, h
        c.advance(50)


def test_follower_behind_the_leaders_log_start_resets_to_it():
    c = Cluster(3, config=RETENTION, seed=16)
    c.create_topic("t", 1, 3, assignment=[[1, 2, 3]])
    c.advance(1500)
    _produce_for(c, 1000)
    behind = c.log(3, "t", 0).log_end_offset
    c.crash(3)
    _produce_for(c, 8000)                    # the ISR shrinks to {1, 2}; the HW moves on
    leader = c.log(1, "t", 0)
    assert c.partition_state("t", 0).isr == (1, 2)
    assert leader.log_start_offset > behind  # retention took what broker 3 still needs
    assert leader.segments.first.base_offset == leader.log_start_offset
    c.restart(3)
    assert c.run_until(lambda: c.partition_state("t", 0).isr == (1, 2, 3), 20_000)
    follower, leader = c.log(3, "t", 0), c.log(1, "t", 0)
    # its fetch at `behind` was out of range: it truncated fully and started at the leader's
    # log start (which retention on both sides may since have moved on together)
    assert follower.log_start_offset > behind
    assert follower.segments.first.base_offset >= follower.log_start_offset - 1000
    assert follower.log_end_offset == leader.log_end_offset
    assert all(seg.base_offset > behind for seg in follower.segments)
    c.check_invariants()
    assert c.checker.lost_acked_records == 0 and not c.checker.diverged


def test_deleted_files_go_after_file_delete_delay_on_the_simulated_clock():
    c = Cluster(3, config=RETENTION, seed=5)
    c.create_topic("t", 1, 3, assignment=[[1, 2, 3]])
    c.advance(1500)
    _produce_for(c, 4000)
    medium, tp_dir = c.brokers[1].medium, c.log(1, "t", 0).dir
    deleted = {n for n in medium.listdir(tp_dir) if n.endswith(".deleted")}
    due = c.brokers[1].lm.next_file_deletion_ms()
    assert deleted and due is not None and c.now_ms < due <= c.now_ms + 3000
    c.advance(due - c.now_ms - 1)
    assert deleted & set(medium.listdir(tp_dir))         # not before file.delete.delay.ms
    c.advance(3001)
    assert not deleted & set(medium.listdir(tp_dir))     # every one of them gone by then


def test_retention_settings_are_broker_configs_in_force():
    broker = configs_in_force({})["broker"]
    assert broker["log.retention.check.interval.ms"] == 300_000
    assert broker["log.initial.task.delay.ms"] == 30_000
    assert configs_in_force(RETENTION)["broker"]["log.retention.check.interval.ms"] == 1000
    with pytest.raises(InvalidConfigurationError, match="log.retention.check.interval.ms"):
        Cluster(3, config={"log.retention.check.interval.ms": 0})
    with pytest.raises(InvalidConfigurationError, match="log.initial.task.delay.ms"):
        Cluster(3, config={"log.initial.task.delay.ms": "soon"})


def test_retention_reset_example_loses_nothing_retained():
    scenario = sc.load(sc.examples_dir() / "retention-reset.toml",
                       {"topics.0.partitions": 2, "duration_s": 50})
    summary, _, _ = run_scenario(scenario)
    assert summary["lost_acked_records"] == 0 and summary["diverged_partitions"] == 0
    assert summary["isr_shrinks"] >= 2 and summary["isr_expands"] >= 2  # broker 3 out and back
    assert summary["config"]["kafka"]["broker"]["log.retention.check.interval.ms"] == 2000
