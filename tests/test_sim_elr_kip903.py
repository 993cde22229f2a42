"""Eligible leader replicas (KIP-966) and stale broker epochs (KIP-903) in a running cluster:
the high-watermark rule, clean and unclean restarts as the controller learns them from the
registration, the disk-replacement fault, and the two shipped scenarios run both ways."""
import pytest

from replica_core.errors import InvalidConfigurationError
from replica_core.replication.messages import TopicPartition
from replica_core.sim import scenario as sc
from replica_core.sim.cluster import Cluster
from replica_core.sim.run import run_scenario

TP = TopicPartition("t", 0)
FAST = {"min.insync.replicas": 2, "broker.session.timeout.ms": 2000,
        "replica.lag.time.max.ms": 4000}


def cluster(**config):
    c = Cluster(3, config={**FAST, **config}, seed=11)
    c.create_topic("t", 1, 3, assignment=[(1, 2, 3)])
    return c


def produce(c, values, acks=-1):
    h = c.produce("t", 0, values, acks=acks)
    assert c.run_until(lambda: h.done, 5000), h
    assert h.ok, h
    return h


def registration(c, broker):
    return c.controller.partitions[TP], c.controller.brokers[broker]


# ---- the leader's HW rule (KAFKA-15583, §6.4) -------------------------------------------------
def test_hw_advances_only_with_isr_at_min_isr():
    c = cluster(**{"eligible.leader.replicas.enable": True})
    produce(c, [b"a", b"b"])
    assert c.partition_state("t", 0).high_watermark == 2
    c.crash(2)
    c.crash(3)
    c.advance(4000)
    p, _ = registration(c, 1)
    assert p.isr == (1,)
    produce(c, [b"c"], acks=1)  # acks=1 appends below min ISR
    state = c.partition_state("t", 0)
    assert state.replica_states[1].log_end_offset == 3
    assert state.high_watermark == 2  # ... but nothing commits
    c.restart(3)
    assert c.run_until(lambda: c.partition_state("t", 0).high_watermark == 3, 10_000)
    assert set(registration(c, 1)[0].isr) == {1, 3}


# ---- what the registration tells the controller (KIP-966) -------------------------------------
def test_replica_leaving_an_isr_at_min_isr_is_eligible_and_unclean_restart_removes_it():
    c = cluster(**{"eligible.leader.replicas.enable": True})
    produce(c, [b"a"])
    c.crash(2)
    c.advance(3000)
    p, _ = registration(c, 1)
    assert p.isr == (1, 3) and p.elr == ()  # still at min ISR: 2 is not eligible
    c.crash(3)
    c.advance(3000)
    assert p.isr == (1,) and p.elr == (3,)
    c.restart(3)  # after a process crash: no clean-shutdown marker
    c.advance(50)
    assert 3 not in p.elr and c.controller.stats.unclean_shutdowns == 1


def test_clean_shutdown_keeps_eligibility_across_the_restart():
    c = cluster(**{"eligible.leader.replicas.enable": True})
    produce(c, [b"a"])
    c.crash(2)
    c.advance(3000)
    c.shutdown(3)  # controlled: 3 leaves the ISR at min ISR, cleanly
    c.advance(2000)
    p, reg3 = registration(c, 3)
    assert p.isr == (1,) and p.elr == (3,) and not reg3.alive
    epoch = reg3.epoch
    c.restart(3)  # its marker holds the epoch it had: a clean restart
    c.advance(50)
    assert c.brokers[3].boot_broker_epoch == epoch
    assert c.controller.stats.unclean_shutdowns == 0
    assert 3 in p.elr or 3 in p.isr


def test_without_elr_restarts_never_touch_isr_membership():
    c = cluster()
    c.crash(2)
    c.crash(3)
    c.advance(3000)
    c.crash(1, "power")
    c.advance(3000)
    p, _ = registration(c, 1)
    assert p.isr == (1,) and p.leader == -1
    c.restart(1)
    c.advance(50)
    assert p.leader == 1 and p.elr == () and c.controller.stats.unclean_shutdowns == 0


# ---- the disk replacement fault and KIP-903 ---------------------------------------------------
def test_replace_disk_restarts_with_an_empty_data_directory():
    c = cluster()
    produce(c, [b"a", b"b", b"c"])
    assert c.log(3, "t", 0).log_end_offset == 3
    c.replace_disk(3)
    b3 = c.brokers[3]
    assert b3.alive and b3.boot_broker_epoch == -1 and c.disk_replacements[3]
    assert not b3.medium.exists(f"{b3.log_dir}/t-0/00000000000000000000.log")
    c.advance(3000)
    assert c.log(3, "t", 0).log_end_offset == 3  # caught up again from the leader


def test_replace_disk_needs_a_broker():
    with pytest.raises(InvalidConfigurationError, match="replace_disk"):
        sc.from_dict({"topics": [{"name": "t", "partitions": 1, "replication_factor": 1}],
                      "faults": [{"at_s": 1, "kind": "replace_disk"}]})


@pytest.mark.parametrize("checks", [True, False])
def test_fetch_and_alter_partition_carry_broker_epochs_only_with_kip903(checks):
    c = cluster(**{"isr.broker.epochs": checks})
    sent = []
    real = c.controller.alter_partition

    def observe(request):
        sent.append(request)
        return real(request)

    c.controller.alter_partition = observe
    c.crash(3)
    c.advance(3000)
    c.restart(3)
    assert c.run_until(lambda: len(registration(c, 1)[0].isr) == 3, 10_000)
    fetchers = list(c.brokers[2].fetcher_manager.fetchers.values())
    assert fetchers
    expected = c.controller.brokers[2].epoch if checks else -1
    assert all(f.broker_epoch == expected for f in fetchers)
    expand = [item for r in sent for item in r.items if 3 in item.new_isr]
    assert expand
    epochs = dict(expand[-1].new_isr_with_epochs)
    if checks:
        assert epochs[3] == c.controller.brokers[3].epoch and epochs[1] == c.brokers[1].broker_epoch
    else:
        assert set(epochs.values()) == {-1}


# ---- the shipped scenarios, both ways ----------------------------------------------------------
def run(name, **overrides):
    summary, _, _ = run_scenario(sc.load(sc.examples_dir() / f"{name}.toml", overrides))
    return summary


def test_last_replica_standing_loses_acked_records_without_elr_and_none_with_it():
    off = run("last-replica-standing")
    on = run("last-replica-standing", **{"eligible.leader.replicas.enable": True})
    assert off["lost_acked_records"] > 0
    assert off["lost_acked_records"] == off["lost_acked_records_by_cause"]["power_failure"]
    assert on["lost_acked_records"] == 0 and on["diverged_partitions"] == 0
    assert on["verdict"]["ok"] and not off["verdict"]["ok"]
    # ELR's price: the partition waits without a leader for the eligible replica
    off_s = off["unavailable_partition_seconds_by_cause"]["no_leader"]
    on_s = on["unavailable_partition_seconds_by_cause"]["no_leader"]
    assert on_s > off_s + 10
    assert on["offline_partition_seconds"] == on_s


def test_disk_replacement_loses_acked_records_without_kip903_and_none_with_it():
    on = run("disk-replacement")
    off = run("disk-replacement", **{"isr.broker.epochs": False})
    assert off["lost_acked_records"] > 0
    assert off["lost_acked_records"] == off["lost_acked_records_by_cause"]["stale_replica_rejoined"]
    assert on["lost_acked_records"] == 0 and on["diverged_partitions"] == 0
    assert on["verdict"]["ok"]
