"""KIP-380: a restarted broker never acts on its previous process's orders.

The product's rules (``ReplicaManager.controller_request_error``: nothing served before
registration, stale broker epochs refused whole, as ``KafkaApis.isBrokerEpochStale``), the
registration retry on Kafka's broker lifecycle backoff, and the sweep's finding as a scripted
scenario (examples/kip380.toml) run both ways: pre-KIP-380 the power-failed broker leads with an
empty log and acknowledged records are lost (explained as a power failure); with KIP-380 nothing
is lost — and with the broker-side check removed under a KIP-380 controller the loss matches no
cause's pattern, so the oracle stops the run."""
from __future__ import annotations

import numpy as np
import pytest

from replica_core.clock import ManualClock
from replica_core.errors import Errors
from replica_core.replication import ReplicaConfig, ReplicaManager
from replica_core.replication.messages import (
    UNKNOWN_BROKER_EPOCH,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    TopicPartition,
)
from replica_core.sim import scenario as sc
from replica_core.sim.broker import registration_backoff_ms
from replica_core.sim.cluster import Cluster
from replica_core.sim.invariants import InvariantViolation
from replica_core.sim.run import run_scenario, unexplained_losses, verdict
from replica_core.storage.config import LogConfig
from replica_core.storage.log_manager import LogManager
from replica_core.storage.medium import MemoryMedium

TP = TopicPartition("t", 0)


def manager(broker_epoch: int, *, fence: bool = True) -> ReplicaManager:
    clock = ManualClock(1_700_000_000_000)
    lm = LogManager(["/kafka/broker-0"], LogConfig(), medium=MemoryMedium(), clock=clock)
    lm.startup()
    lm.create_log(TP.topic, TP.partition)
    return ReplicaManager(0, lm, ReplicaConfig(), clock=clock, broker_epoch=broker_epoch,
                          fence_stale_controller_requests=fence)


def lead(broker_epoch: int, leader_epoch: int = 0) -> LeaderAndIsrRequest:
    """LeaderAndIsr making broker 0 the leader of t-0, addressed to ``broker_epoch``."""
    state = LeaderAndIsrPartitionState(TP.topic, TP.partition, 1, 0, leader_epoch, (0, 1), 0,
                                       (0, 1))
    return LeaderAndIsrRequest(99, 1, broker_epoch, (state,))


# ---- the product rules ---------------------------------------------------------------------------
def test_stale_broker_epoch_is_kafkas_error_77():
    assert Errors.STALE_BROKER_EPOCH == 77  # org.apache.kafka.common.protocol.Errors


def test_an_unregistered_broker_serves_no_controller_request():
    rm = manager(UNKNOWN_BROKER_EPOCH)
    for epoch in (UNKNOWN_BROKER_EPOCH, 101, 102):
        resp = rm.become_leader_or_follower(lead(epoch))
        assert resp.error_code == Errors.BROKER_NOT_AVAILABLE
        assert resp.partition_errors == {TP: Errors.BROKER_NOT_AVAILABLE}
    assert rm.partition(TP) is None and rm.controller_epoch == 0  # nothing changed
    assert rm.stop_replica(TP, delete=True, broker_epoch=101) == Errors.BROKER_NOT_AVAILABLE
    assert rm.log_manager.get_log(TP.topic, TP.partition) is not None
    assert rm.update_metadata(101, [(1, 7)], [1]) == Errors.BROKER_NOT_AVAILABLE
    assert rm.broker_epochs == {}
    rm.broker_epoch = 103  # registered: the same requests are served
    assert rm.become_leader_or_follower(lead(103)).partition_errors == {TP: Errors.NONE}
    assert rm.partition(TP).is_leader


@pytest.mark.parametrize("request_epoch,served", [
    (104, False),                 # meant for the previous process
    (105, True),                  # ours
    (106, True),                  # newer: the controller registered us before we heard
    (UNKNOWN_BROKER_EPOCH, True),  # an old request version naming no epoch is never stale
])
def test_a_stale_broker_epoch_is_refused_whole(request_epoch, served):
    rm = manager(105)
    resp = rm.become_leader_or_follower(lead(request_epoch))
    want = Errors.NONE if served else Errors.STALE_BROKER_EPOCH
    assert resp.partition_errors == {TP: want}
    assert (rm.partition(TP) is not None and rm.partition(TP).is_leader) == served
    assert rm.update_metadata(request_epoch, [(1, 9)], [1]) == want
    assert rm.broker_epochs == ({1: 9} if served else {})
    assert rm.stop_replica(TP, delete=True, broker_epoch=request_epoch) == want
    assert (rm.log_manager.get_log(TP.topic, TP.partition) is None) == served  # deleted or kept


def test_pre_kip380_brokers_serve_whatever_arrives():
    rm = manager(UNKNOWN_BROKER_EPOCH, fence=False)
    assert rm.become_leader_or_follower(lead(101)).partition_errors == {TP: Errors.NONE}
    rm = manager(105, fence=False)
    assert rm.become_leader_or_follower(lead(104)).partition_errors == {TP: Errors.NONE}


# ---- registration retry: Kafka's BrokerLifecycleManager backoff ---------------------------------
def test_registration_backoff_doubles_from_100_ms_up_to_the_session_timeout():
    rng = np.random.default_rng(3)
    for failures, nominal in ((0, 100), (1, 200), (2, 400), (5, 3200), (7, 12800)):
        delay = registration_backoff_ms(failures, 18_000, rng)
        assert nominal * 0.98 <= delay <= nominal * 1.02, (failures, delay)
    for failures in (8, 9, 30):  # 100 * 2**7.49 = 18000: capped, jitter never above it
        assert 18_000 * 0.98 <= registration_backoff_ms(failures, 18_000, rng) <= 18_000
    assert registration_backoff_ms(0, 50, rng) == 50  # max below the initial: constant


def test_a_lost_registration_is_retried_after_half_the_session_not_30_s():
    c = Cluster(3, seed=4, config={"broker.session.timeout.ms": 18_000})
    c.crash(3)
    c.isolate(3)
    c.restart(3)  # its registration is lost
    t0 = c.now_ms
    c.advance(2_000)
    c.unisolate(3)
    b = c.brokers[3]
    assert b.registration_timeout_ms() == 9_000  # min(controller.socket.timeout.ms, 18000/2)
    assert not c.run_until(lambda: b.registered, 9_000 - 2_000 - 1)
    assert c.run_until(lambda: b.registered, 1_000)
    assert c.now_ms - t0 <= 9_000 + 102 + 10  # the timeout, ~100 ms backoff, the round trip


# ---- the sweep's finding, scripted both ways ----------------------------------------------------
def kip380(detect_bounces: bool) -> dict:
    summary, _, _ = run_scenario(sc.load(sc.examples_dir() / "kip380.toml",
                                         {"cluster.detect_bounces": detect_bounces}))
    return summary


def test_kip380_scenario_loses_nothing():
    s = kip380(True)
    assert s["acked_records"] > 1000
    assert s["lost_acked_records"] == 0 and s["diverged_partitions"] == 0
    assert s["verdict"]["ok"] and unexplained_losses(s) == 0


def test_before_kip380_the_power_failed_broker_leads_with_an_empty_log():
    s = kip380(False)
    causes = s["lost_acked_records_by_cause"]
    assert s["lost_acked_records"] > 500 and causes["power_failure"] == s["lost_acked_records"]
    assert unexplained_losses(s) == 0 and not s["verdict"]["ok"]
    assert {ev["new_leader"] for ev in s["loss_events"]} == {2}
    assert {ev["fault"] for ev in s["loss_events"]} == {"crash broker 2 (power)"}
    assert min(ev["first_offset"] for ev in s["loss_events"]) == 0  # from the very start


def scripted(detect_bounces: bool) -> Cluster:
    """examples/kip380.toml's story through the control API (leader 1 dies, 2 power-fails and
    restarts cut off; it is reachable, unregistered, when the controller elects it)."""
    c = Cluster(3, seed=380, detect_bounces=detect_bounces,
                config={"min.insync.replicas": 2, "broker.session.timeout.ms": 18_000},
                trace_events=5_000)
    c.create_topic("t", 1, 3, assignment=[[1, 2, 3]])
    for k in range(20):
        h = c.produce("t", 0, [b"%d" % k] * 5, acks=-1)
        assert c.run_until(lambda h=h: h.done, 5_000) and h.ok
    c.advance(1_000)
    c.crash(1)
    c.advance(3_000)
    c.crash(2, mode="power")
    c.isolate(2)
    c.restart(2)
    return c


def test_the_unregistered_broker_refuses_the_leadership_meant_for_its_previous_process():
    c = scripted(True)
    c.advance(12_000)
    c.unisolate(2)
    c.advance(20_000)  # 1's session expires, 2 is elected and refuses; then 2's expires
    c.check_invariants()
    refused = [args for _, kind, args in c.checker.trace if kind == "refused"]
    assert refused and refused[0][:3] == (2, "LeaderAndIsr", "BROKER_NOT_AVAILABLE")
    assert c.partition_state("t", 0).leader == 3 and c.checker.lost_acked_records == 0
    assert c.log(3, "t", 0).log_end_offset == 100


def test_without_the_broker_check_the_oracle_finds_the_loss_unexplained():
    c = scripted(True)  # a KIP-380 controller ...
    c.brokers[2].rm.fence_stale_controller_requests = False  # ... and a broker without it
    c.advance(12_000)
    c.unisolate(2)
    with pytest.raises(InvariantViolation) as e:
        c.advance(20_000)
    assert e.value.invariant == "no_acked_record_lost"
    assert "new leader 2 (LEO 0): no batch of it starts at offset 0" in e.value.detail


def test_unexplained_losses_fail_the_verdict_and_are_named():
    summary = {"lost_acked_records": 7, "diverged_partitions": 0, "acked_records": 100,
               "lost_acked_records_by_cause": {"power_failure": 5, "unexplained": 2}}
    v = verdict(summary)
    assert not v["ok"] and unexplained_losses(summary) == 2
    assert "2 lost records match no fault's pattern (unexplained: a bug)" in v["line"]
    explained = {**summary, "lost_acked_records": 5,
                 "lost_acked_records_by_cause": {"power_failure": 5, "unexplained": 0}}
    assert unexplained_losses(explained) == 0
    assert verdict(explained)["line"].endswith(
        "every loss is explained by the configuration or the faults")
