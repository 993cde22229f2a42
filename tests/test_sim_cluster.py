"""The simulated cluster's control API: produce/acks, elections, crashes (process and power),
isolation, partitions, slow followers, lost controller messages, views, invariant violations."""
import pytest

from replica_core.errors import Errors, InvalidConfigurationError
from replica_core.replication.messages import TopicPartition
from replica_core.sim.cluster import Cluster, split_configs
from replica_core.sim.invariants import InvariantViolation

TP = TopicPartition("t", 0)
FAST = {"broker.session.timeout.ms": 2000, "replica.lag.time.max.ms": 4000}


def cluster(n=3, **config):
    c = Cluster(n, config={"min.insync.replicas": 2, **FAST, **config}, seed=11)
    c.create_topic("t", 1, n, assignment=[list(range(1, n + 1))])
    c.advance(1500)
    return c


def produce(c, values, acks=-1, partition=0):
    h = c.produce("t", partition, values, acks=acks)
    assert c.run_until(lambda: h.done, 10_000), h
    return h


def test_acks_all_replicates_before_acknowledging():
    c = cluster()
    h = produce(c, [b"a", b"b"])
    assert h.ok and list(h.offsets) == [0, 1] and h.last_offset == 1
    st = c.partition_state("t", 0)
    assert st.leader == 1 and st.isr == (1, 2, 3) and st.high_watermark == 2
    assert all(r.log_end_offset == 2 for r in st.replica_states.values())
    assert c.checker.ledger.acked_records[-1] == 2


def test_acks_one_and_zero():
    c = cluster()
    h1 = produce(c, [b"x"], acks=1)
    assert h1.ok and h1.base_offset == 0
    h0 = produce(c, [b"y"], acks=0)
    assert h0.ok and h0.base_offset == -1   # fire and forget
    c.advance(100)
    assert c.log(1, "t", 0).log_end_offset == 2


def test_not_enough_replicas_then_recovery():
    c = cluster()
    c.crash(2)
    c.crash(3)
    c.advance(3000)  # sessions expire: ISR shrinks to the leader
    assert c.partition_state("t", 0).isr == (1,)
    h = produce(c, [b"x"])
    assert h.error == Errors.NOT_ENOUGH_REPLICAS
    c.restart(2)
    c.advance(3000)
    assert c.partition_state("t", 0).isr == (1, 2)
    assert produce(c, [b"y"]).ok


def test_leader_crash_elects_from_isr_and_restarted_broker_rejoins():
    c = cluster()
    produce(c, [b"a"])
    c.crash(1)
    c.advance(3000)
    st = c.partition_state("t", 0)
    assert st.leader == 2 and st.isr == (2, 3) and st.leader_epoch == 1
    assert c.controller.stats.leader_elections == 1
    assert produce(c, [b"b"]).ok
    c.restart(1)
    c.advance(3000)
    st = c.partition_state("t", 0)
    assert st.isr == (1, 2, 3)
    assert st.replica_states[1].log_end_offset == 2 and not st.replica_states[1].is_leader
    assert c.brokers[1].broker_epoch > 103   # a new broker epoch on registration
    c.check_invariants()
    assert c.checker.lost_acked_records == 0


def test_fast_restart_is_handled_as_a_failure_first():
    c = cluster()
    produce(c, [b"a"])
    c.crash(1, "power")   # the leader loses its unflushed record ...
    c.restart(1)          # ... and is back before its session expired
    c.advance(100)
    st = c.partition_state("t", 0)
    assert st.leader == 2 and st.leader_epoch >= 1  # leadership moved away on registration
    c.advance(3000)
    assert c.partition_state("t", 0).isr == (1, 2, 3)
    c.check_invariants()
    assert c.checker.lost_acked_records == 0


def test_power_failure_loses_unflushed_bytes_locally_only():
    c = cluster()
    produce(c, [b"a"])
    c.crash(3, "power")
    c.restart(3)
    assert c.brokers[3].lm.logs[("t", 0)].log_end_offset == 0  # nothing was flushed
    c.advance(3000)
    assert c.log(3, "t", 0).log_end_offset == 1  # re-fetched from the leader
    c.check_invariants()
    assert c.power_failures == {3: [c.power_failures[3][0]]}


def test_isolated_leader_is_fenced_and_rejoins_after_heal():
    c = cluster()
    produce(c, [b"a"])
    c.isolate(1)
    c.advance(4000)
    st = c.partition_state("t", 0)
    assert st.leader == 2 and 1 not in st.isr
    assert st.replica_states[1].is_leader  # the zombie still believes it leads
    assert produce(c, [b"b"]).ok
    c.heal()
    c.advance(5000)  # heartbeats answer "fenced": it registers again and follows
    st = c.partition_state("t", 0)
    assert not st.replica_states[1].is_leader and st.isr == (1, 2, 3)
    assert c.log(1, "t", 0).log_end_offset == 2
    c.check_invariants()


def test_network_partition_of_the_leader_behaves_like_isolation():
    c = cluster()
    c.partition_network([1])
    c.advance(4000)
    assert c.partition_state("t", 0).leader != 1
    c.heal_partition([1])
    c.advance(5000)
    assert c.partition_state("t", 0).isr == (1, 2, 3)


def test_slow_follower_leaves_and_rejoins_the_isr():
    c = cluster(**{"broker.session.timeout.ms": 30_000})
    c.slow(3, 20_000, "fetch")   # ~20 s per fetch response
    for _ in range(10):
        produce(c, [b"x"], acks=1)
        c.advance(1000)
    c.advance(6000)
    assert 3 not in c.partition_state("t", 0).isr
    c.slow(3, 1)
    c.advance(30_000)
    assert c.partition_state("t", 0).isr == (1, 2, 3)
    assert c.controller_node.isr_shrinks >= 1 and c.controller_node.isr_expands >= 1


def test_lost_controller_messages_are_retried():
    c = cluster(**{"controller.socket.timeout.ms": 3000})
    c.drop_controller_messages([2])
    c.crash(1)
    c.advance(3000)
    st = c.partition_state("t", 0)
    assert st.leader == 2 and not st.replica_states[2].is_leader  # LeaderAndIsr lost
    c.restore_controller_messages()
    c.advance(5000)
    assert c.partition_state("t", 0).replica_states[2].is_leader
    assert produce(c, [b"x"]).ok


def test_controlled_shutdown_moves_leadership_first():
    c = cluster()
    produce(c, [b"a"])
    c.shutdown(1)
    c.advance(1500)
    st = c.partition_state("t", 0)
    assert st.leader == 2 and 1 not in st.isr and not c.brokers[1].alive
    c.restart(1)
    c.advance(3000)
    assert c.brokers[1].lm.loads["/kafka/broker-1"].had_clean_shutdown
    assert c.partition_state("t", 0).isr == (1, 2, 3)


def test_a_broker_in_controlled_shutdown_is_not_isr_eligible_on_the_leaders():
    """KIP-841 (Kafka's isReplicaIsrEligible): once the controller has a broker in controlled
    shutdown, the metadata it sends marks that broker ineligible, so leaders stop proposing it
    back into their ISRs while it is still fetching; it is eligible again after it restarts
    and registers."""
    c = cluster()
    produce(c, [b"a"])
    c.advance(600)
    c.shutdown(1, delay_ms=2000)
    c.advance(50)                                    # the metadata has reached the others
    for b in (2, 3):
        assert c.brokers[b].rm.eligible_replicas([1, 2, 3]) == [2, 3]
    c.advance(3000)
    c.restart(1)
    c.advance(3000)
    for b in (2, 3):
        assert c.brokers[b].rm.eligible_replicas([1, 2, 3]) == [1, 2, 3]
    assert c.partition_state("t", 0).isr == (1, 2, 3)


def test_views_and_logs():
    c = cluster()
    produce(c, [b"a"])
    assert c.log(2, "t", 0).high_watermark == 0  # the new HW arrives with the next fetch
    c.advance(600)
    assert c.log(2, "t", 0).high_watermark == 1
    c.crash(2)
    assert c.log(2, "t", 0) is None
    st = c.partition_state("t", 0)
    assert not st.replica_states[2].alive and st.replica_states[2].log_end_offset is None


def test_corrupted_replica_below_hw_stops_the_run_with_seed_time_and_trace():
    c = cluster()
    for v in (b"first", b"second"):
        produce(c, [v])
    c.advance(1000)
    lg = c.log(3, "t", 0)
    seg = lg.segments.first
    f = seg.log_file
    f.write(70, b"X")  # a byte of the first batch's records, CRC not updated
    with pytest.raises(InvariantViolation) as e:
        c.advance(5000)  # the periodic check samples every partition of this tiny cluster
    v = e.value
    assert v.invariant == "isr_agree_below_hw" and v.seed == 11
    assert v.time_ms == c.loop.now and v.sim_time_s > 0
    assert v.trace and any("leader_and_isr" in line for line in v.trace)
    assert "seed 11" in str(v) and "broker 3" in str(v)


def test_unknown_config_is_rejected_and_keys_route_to_layers():
    with pytest.raises(InvalidConfigurationError):
        Cluster(1, config={"no.such.key": 1})
    routed = split_configs({"min.insync.replicas": 2, "segment.bytes": 4096,
                            "broker.session.timeout.ms": 5000, "retry.backoff.ms": 50})
    assert routed["replica"] == {"min.insync.replicas": 2}
    assert routed["log"] == {"min.insync.replicas": 2, "segment.bytes": 4096}
    assert routed["controller"] == {"session_timeout_ms": 5000}
    assert routed["client"] == {"retry_backoff_ms": 50}


def test_disk_storage_runs_and_cleans_up(tmp_path):
    c = Cluster(2, config={"min.insync.replicas": 1, **FAST}, seed=3, storage="disk")
    c.create_topic("t", 2, 2)
    c.advance(1500)
    assert produce(c, [b"a"]).ok
    c.crash(1)
    c.restart(1)
    c.advance(3000)
    c.check_invariants()
    dirs = [b._tmpdir for b in c.brokers.values()]
    c.close()
    assert all(d is None for d in [b._tmpdir for b in c.brokers.values()]) and dirs[0]
    with pytest.raises(ValueError):
        Cluster(1, seed=1, storage="disk").brokers[1].crash("power")


def test_follower_fetch_check_catches_batches_out_of_order():
    """The running check on fetch responses: one batch passes without a scan, two batches in
    order pass, two out of order stop the run with offsets_increase."""
    from replica_core.errors import Errors
    from replica_core.records import build_batch
    from replica_core.replication.messages import (
        FetchPartitionResponse,
        FetchResponse,
        TopicPartition,
    )
    from replica_core.sim.invariants import InvariantViolation

    c = Cluster(3, seed=5)
    c.create_topic("t", 1, 3)
    follower = next(b for b in c.partition_state("t", 0).replicas
                    if b != c.partition_state("t", 0).leader)
    tp = TopicPartition("t", 0)

    def respond(*bases: int) -> FetchResponse:
        records = b"".join(build_batch([b"x", b"y"], base_offset=b) for b in bases)
        return FetchResponse(Errors.NONE, (FetchPartitionResponse(tp, Errors.NONE, 0, 0, 0, 0,
                                                                  records),))

    checker = c.checker
    before = checker.checks["offsets"]
    checker.follower_fetched(c.brokers[follower], respond(0), {})
    checker.follower_fetched(c.brokers[follower], respond(0, 2, 4), {})
    assert checker.checks["offsets"] == before + 2
    with pytest.raises(InvariantViolation, match="offsets_increase"):
        checker.follower_fetched(c.brokers[follower], respond(4, 2), {})


def test_controller_tracker_counts_are_the_columns_counted_afresh():
    """The controller's offline / under-min-ISR / under-replicated counts, kept up to date one
    partition change at a time, equal the columns counted from scratch (a partition without a
    leader counts as offline only), and the integrals add count × elapsed time."""
    import numpy as np

    from replica_core.sim.cluster import _Tracker

    rng = np.random.default_rng(3)
    t = _Tracker()
    t.grow(40, 3, 2)
    t.grow(25, 2, 1)
    t.close(0)  # integrating from 0
    now, integral = 0, {"offline": 0, "under_min_isr": 0, "under_replicated": 0}
    for _ in range(3000):
        dt = int(rng.integers(0, 4))
        integral["offline"] += t.offline * dt
        integral["under_min_isr"] += t.under_min * dt
        integral["under_replicated"] += t.under_rep * dt
        now += dt
        t.set(now, [(int(rng.integers(0, 65)), int(rng.integers(-1, 4)), int(rng.integers(0, 4)))])
        led = t.leader >= 0
        assert t.offline == int((~led).sum())
        assert t.under_min == int((led & (t.isr_size < t.min_isr)).sum())
        assert t.under_rep == int((led & (t.isr_size < t.rf)).sum())
        assert all(type(v) is int for v in (t.offline, t.under_min, t.under_rep))
    t.close(now)
    assert t.ms == integral and 0 < t.under_min < 65


def test_controller_tracker_sets_a_batch_as_one_change_at_a_time():
    """Changes set together (a partition possibly named more than once) leave the columns and
    counts as setting them one by one does."""
    import numpy as np

    from replica_core.sim.cluster import _Tracker

    rng = np.random.default_rng(5)
    one, many = _Tracker(), _Tracker()
    for t in (one, many):
        t.grow(30, 3, 2)
        t.grow(10, 2, 1)
    for now in range(200):
        changes = [(int(rng.integers(0, 40)), int(rng.integers(-1, 4)), int(rng.integers(0, 4)))
                   for _ in range(int(rng.integers(0, 12)))]
        for change in changes:
            one.set(now, [change])
        many.set(now, changes)
        assert one.leader.tolist() == many.leader.tolist()
        assert one.isr_size.tolist() == many.isr_size.tolist()
        assert (one.offline, one.under_min, one.under_rep) == \
            (many.offline, many.under_min, many.under_rep)
    one.close(200)
    many.close(200)
    assert one.ms == many.ms

