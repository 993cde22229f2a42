"""KIP-101 and KIP-279 anomalies (KAFKA_SEMANTICS §9.1, §9.2, §9.4), driven step by step through
the Cluster control API on tiny clusters: reproduced with pre-KIP-101 high-watermark truncation,
absent with leader-epoch truncation."""
import pytest

from replica_core.records import iter_batches
from replica_core.replication.messages import TopicPartition
from replica_core.sim import scenario as sc
from replica_core.sim.cluster import Cluster
from replica_core.sim.invariants import InvariantViolation
from replica_core.sim.run import run_scenario

TP = TopicPartition("t", 0)
BASE = {"min.insync.replicas": 1, "broker.session.timeout.ms": 3000}


def produce(c, values, acks):
    h = c.produce("t", 0, values, acks=acks)
    assert c.run_until(lambda: h.done, 5000), h
    assert h.ok, h
    return h


def values(c, broker):
    out = []
    for seg in c.log(broker, "t", 0).segments:
        for batch in iter_batches(seg.log_file.read(0, seg.size)):
            out += [bytes(r.value) for r in batch]
    return out


def two_brokers(truncation, detect_bounces=True, **extra):
    c = Cluster(2, config={**BASE, **extra}, seed=5, truncation=truncation,
                detect_bounces=detect_bounces)
    c.create_topic("t", 1, 2, assignment=[[1, 2]])
    c.advance(2000)
    return c


def kip101_scenario1(truncation):
    """§9.1: follower restarts and truncates to its stale HW, then the leader dies. A 0.10-era
    controller does not notice the follower's fast restart (no KIP-380): it stays in the ISR."""
    c = two_brokers(truncation, detect_bounces=False)
    produce(c, [b"m0"], -1)
    c.advance(6000)  # follower HW 1 reaches its replication-offset-checkpoint
    h1 = produce(c, [b"m1"], -1)
    st = c.partition_state("t", 0)
    assert st.replica_states[1].high_watermark == 2
    assert st.replica_states[2].high_watermark == 1  # the HW=2 answer is still parked
    c.crash(2)
    c.crash(1)
    c.restart(2)
    c.advance(10_000)  # broker 1's session expires: 2, in the ISR, is elected (clean)
    assert c.partition_state("t", 0).leader == 2
    c.restart(1)
    c.advance(5000)
    c.check_invariants()
    return c, h1


def test_kip101_scenario1_loses_acked_data_with_hw_truncation():
    c, h1 = kip101_scenario1("high_watermark")
    assert values(c, 2) == [b"m0"] and values(c, 1) == [b"m0"]
    assert c.checker.lost_records["high_watermark_truncation"] == 1
    assert c.checker.lost_acked_records == 1
    assert c.controller.stats.unclean_elections == 0


def test_kip101_scenario1_no_loss_with_leader_epochs():
    c, h1 = kip101_scenario1("leader_epoch")
    assert values(c, 2) == [b"m0", b"m1"] == values(c, 1)
    assert c.checker.lost_acked_records == 0
    assert not c.checker.diverged


def kip101_scenario2(truncation):
    """§9.2: power loss on both; 2 (which lost m1) leads and writes m2 at offset 1."""
    c = two_brokers(truncation)
    produce(c, [b"m0"], -1)
    c.advance(1000)
    c.log(1, "t", 0).flush()
    c.log(2, "t", 0).flush()  # m0 on both disks
    produce(c, [b"m1"], -1)
    c.advance(6000)  # HW 2 checkpointed on both
    c.log(1, "t", 0).flush()  # m1 on broker 1's disk only
    c.crash(1, "power")
    c.crash(2, "power")
    c.advance(4000)
    c.restart(2)
    c.advance(2000)
    assert c.partition_state("t", 0).leader == 2
    assert values(c, 2) == [b"m0"]
    produce(c, [b"m2"], 1)
    c.restart(1)
    c.advance(5000)
    c.check_invariants()
    return c


def test_kip101_scenario2_diverges_with_hw_truncation():
    c = kip101_scenario2("high_watermark")
    assert values(c, 1) == [b"m0", b"m1"]
    assert values(c, 2) == [b"m0", b"m2"]
    assert c.partition_state("t", 0).isr == (1, 2)  # both "in sync"
    assert TP in c.checker.diverged
    assert c.checker.lost_records["power_failure"] == 1  # m1: both replicas lost power


def test_kip101_scenario2_converges_with_leader_epochs():
    c = kip101_scenario2("leader_epoch")
    assert values(c, 1) == [b"m0", b"m2"] == values(c, 2)
    assert not c.checker.diverged
    assert c.checker.lost_records == {**dict.fromkeys(c.checker.lost_records, 0),
                                      "power_failure": 1}


def kip279(truncation):
    """§9.4: alternating stops make every election after the first unclean."""
    c = two_brokers(truncation, **{"unclean.leader.election.enable": True})
    produce(c, [b"r0"], 1)
    c.advance(1000)
    c.crash(1)
    c.advance(4000)                                     # 2 leads
    produce(c, [b"r1"], 1)
    c.crash(2)
    c.advance(4000)
    c.restart(1)
    c.advance(1000)                                     # 1 leads (unclean)
    for v in (b"r2", b"r3", b"r4"):
        produce(c, [v], 1)
    c.advance(6000)
    c.crash(1)
    c.advance(4000)
    c.restart(2)
    c.advance(1000)                                     # 2 leads (unclean)
    assert values(c, 2) == [b"r0", b"r1"]
    produce(c, [b"r5"], 1)
    c.advance(6000)
    c.crash(2)
    c.advance(4000)
    c.restart(1)
    c.advance(1000)                                     # 1 leads (unclean)
    assert values(c, 1) == [b"r0", b"r2", b"r3", b"r4"]
    for v in (b"r6", b"r7"):
        produce(c, [v], 1)
    c.restart(2)                                        # 2 follows
    c.advance(6000)
    c.check_invariants()
    assert c.controller.stats.unclean_elections == 3
    return c


def test_kip279_diverges_with_hw_truncation():
    c = kip279("high_watermark")
    assert values(c, 1) == [b"r0", b"r2", b"r3", b"r4", b"r6", b"r7"]
    assert values(c, 2) == [b"r0", b"r1", b"r5", b"r4", b"r6", b"r7"]
    assert TP in c.checker.diverged


def test_kip279_converges_with_leader_epochs():
    c = kip279("leader_epoch")
    assert values(c, 2) == values(c, 1) == [b"r0", b"r2", b"r3", b"r4", b"r6", b"r7"]
    assert not c.checker.diverged
    lost = c.checker.lost_records
    assert lost["unclean_election"] > 0 and lost["unexplained"] == 0


def test_divergence_is_a_violation_when_strict():
    c = Cluster(2, config={**BASE, "unclean.leader.election.enable": True}, seed=5,
                truncation="high_watermark", strict=True)
    c.create_topic("t", 1, 2, assignment=[[1, 2]])
    c.advance(2000)
    produce(c, [b"m0"], -1)
    c.advance(1000)
    c.log(1, "t", 0).flush()
    c.log(2, "t", 0).flush()
    produce(c, [b"m1"], -1)
    c.advance(6000)
    c.log(1, "t", 0).flush()
    c.crash(1, "power")
    c.crash(2, "power")
    c.advance(4000)
    c.restart(2)
    c.advance(2000)
    produce(c, [b"m2"], 1)
    c.restart(1)
    with pytest.raises(InvariantViolation) as e:
        c.advance(5000)
        c.check_invariants()
    assert e.value.invariant == "isr_agree_below_hw" and e.value.seed == 5


@pytest.mark.parametrize("name", ["kip101-scenario1", "kip101-scenario2", "kip279"])
def test_example_scenarios_show_the_anomaly_only_with_hw_truncation(name):
    path = sc.examples_dir() / f"{name}.toml"
    hw, _, _ = run_scenario(sc.load(path, {"truncation": "high_watermark"}))
    le, _, _ = run_scenario(sc.load(path, {"truncation": "leader_epoch"}))
    causes = le["lost_acked_records_by_cause"]
    assert le["diverged_partitions"] == 0 and causes["unexplained"] == 0
    assert causes["high_watermark_truncation"] == 0
    if name == "kip101-scenario1":
        assert hw["lost_acked_records_by_cause"]["high_watermark_truncation"] > 0
        assert le["lost_acked_records"] == 0
    else:
        assert hw["diverged_partitions"] == 1
