"""Availability as producers see it, ISR changes by who made them, fault recovery timelines,
loss events and the fetch-path meters kept across broker restarts — each observed from the
product and the controller, and checked here against independent observations (the
controller's assignment, its trace, the brokers' own meters)."""
import pytest

from replica_core.errors import Errors
from replica_core.sim import scenario as sc
from replica_core.sim.availability import CAUSES, RecoveryLog
from replica_core.sim.cluster import FETCH_METRICS, Cluster, _Tracker
from replica_core.sim.run import run_scenario

FAST = {"broker.session.timeout.ms": 2000, "replica.lag.time.max.ms": 4000}
N = 12


def cluster(**config):
    c = Cluster(3, config={"min.insync.replicas": 2, **FAST, **config}, seed=5)
    c.create_topic("t", N, 3)
    c.advance(1500)
    return c


def expired_at(c, broker):
    """When the controller's trace says it expired ``broker``'s session (loop ms)."""
    return [t for t, kind, args in c.checker.trace
            if kind == "controller_broker_expired" and args[0] == broker][-1]


def led_by(c, broker):
    return [tp for tp in c.tps if c.leader_and_isr(tp)[0] == broker]


def test_a_dead_leader_blocks_producers_until_the_controller_notices():
    c = cluster()
    view = c.client_view
    assert view.blocked == 0 and view.counts_by_cause() == dict.fromkeys(CAUSES, 0)
    mine = led_by(c, 1)
    assert mine
    view.reset_integrals(c.loop.now)
    crashed = c.loop.now
    c.crash(1)
    # the controller still names broker 1: its partitions are blocked, not offline
    assert view.counts_by_cause()["leader_down"] == len(mine)
    assert c.controller_node.tracker.offline == 0
    c.advance(5000)
    expired = expired_at(c, 1)
    view.close(c.loop.now)
    assert view.blocked == 0 and not led_by(c, 1)
    down_s = view.ms_by_cause()["leader_down"] / 1000.0
    # every partition broker 1 led was blocked from the crash until the session expired
    assert down_s == pytest.approx(len(mine) * (expired - crashed) / 1000.0)
    # then each new leader took a few milliseconds to apply its LeaderAndIsr
    not_ready_s = view.ms_by_cause()["leader_not_ready"] / 1000.0
    assert 0 < not_ready_s < len(mine) * 0.05


def test_under_min_isr_blocks_only_acks_all():
    c = cluster(**{"min.insync.replicas": 3})
    view = c.client_view
    view.reset_integrals(c.loop.now)
    c.crash(3)
    c.advance(4000)  # expired: broker 3 left every ISR
    assert all(3 not in c.leader_and_isr(tp)[1] for tp in c.tps)
    assert view.counts_by_cause()["under_min_isr"] == N - len(led_by(c, 3))
    assert view.blocked_for(-1) == N and view.blocked_for(1) == 0
    h = c.produce("t", 0, [b"x"], acks=-1)
    c.run_until(lambda: h.done, 5000)
    assert h.error == Errors.NOT_ENOUGH_REPLICAS  # the product agrees with the view
    view.close(c.loop.now)
    assert view.unavailable_ms(-1) > view.unavailable_ms(1)


def test_isolated_leader_is_unreachable_then_replaced():
    c = cluster()
    mine = led_by(c, 2)
    c.isolate(2)
    assert c.client_view.counts_by_cause()["leader_unreachable"] == len(mine)
    c.advance(5000)
    assert c.client_view.leaderless == 0 and not led_by(c, 2)
    c.unisolate(2)


def test_isr_changes_are_counted_by_who_made_them():
    c = cluster()
    in_isr = sum(1 for tp in c.tps if 1 in c.leader_and_isr(tp)[1])
    assert in_isr == N
    c.crash(1)
    c.advance(5000)
    # the controller removed the dead broker from every ISR it was in (the partitions it led
    # included, by their election)
    changes = c.controller_node.isr_changes
    assert changes["broker_failure"]["shrink"] == in_isr
    assert c.controller_node.isr_shrinks == 0  # no leader shrank an ISR itself
    c.restart(1)
    c.advance(5000)
    assert all(1 in c.leader_and_isr(tp)[1] for tp in c.tps)
    # ... and the leaders took it back, one AlterPartition expansion per partition
    assert changes["alter_partition"]["expand"] == N == c.controller_node.isr_expands


def test_recovery_log_times_each_fault():
    c = cluster()
    c.note_fault("crash broker 1 (process)", "crash", [1])
    crashed = c.loop.now
    c.crash(1)
    c.advance(5000)
    c.note_fault("restart broker 1", "restart", [1])
    restarted = c.loop.now
    c.restart(1)
    c.client_view.observe()
    c.advance(5000)
    crash, restart = c.client_view.recovery.records
    expired = expired_at(c, 1)
    assert crash.detected_ms == expired
    assert expired <= crash.leaders_ms <= crash.writable_ms < expired + 50
    assert crash.isr_full_ms is not None and crash.isr_full_ms > restarted
    assert restart.isr_full_ms == crash.isr_full_ms
    assert restart.detected_ms is None and restart.leaders_ms is None  # nothing to elect
    assert crash.as_dict(crashed)["detected_after_s"] == (expired - crashed) / 1000.0


def test_recovery_clocks_only_start_for_trouble_seen_before_the_next_fault():
    log = RecoveryLog()
    log.fault(0, "slow broker 2", "slow", [2])
    log.observe(1, 0, 0, 0)
    log.fault(10, "crash broker 1", "crash", [1])
    log.observe(10, 5, 5, 0)   # the crash's trouble, not the slowdown's
    log.observe(20, 0, 0, 0)
    slow, crash = log.records
    assert slow.leaders_ms is None and slow.finished
    assert crash.leaders_ms == 20 and crash.writable_ms == 20 and crash.isr_full_ms is None


def test_fetch_meters_survive_a_restart():
    c = cluster()
    for k in range(5):
        c.produce("t", k, [b"v"])
    c.advance(2000)
    before = c.brokers[2].rm.metrics()
    assert before["FetchRequestsPerSec.follower"] > 0
    c.crash(2)
    c.advance(3000)
    c.restart(2)
    c.advance(3000)
    live = c.brokers[2].rm.metrics()
    total = c.fetch_metrics()[2]
    for key in FETCH_METRICS:
        assert total[key] == before.get(key, 0) + live.get(key, 0), key
    assert total["NumIncrementalFetchSessions"] == live["NumIncrementalFetchSessions"]


SMALL = {"topics.0.partitions": 60, "duration_s": 10, "faults.0.at_s": 3, "faults.1.at_s": 7,
         "broker.session.timeout.ms": 2000, "workload.batches_per_second": 2.0}


def test_default_scenario_reports_client_view_and_controller_removals():
    summary, series, _ = run_scenario(sc.load(sc.default_scenario_path(), SMALL))
    crash = summary["fault_recovery"][0]
    assert crash["fault"] == "crash broker 3 (process)"
    # broker 3 led a sixth of the partitions; they were blocked from the crash to detection
    led = 60 / 6
    by_cause = summary["unavailable_partition_seconds_by_cause"]
    assert by_cause["leader_down"] == pytest.approx(led * crash["detected_after_s"], rel=0.01)
    assert summary["offline_partition_seconds"] == 0  # the controller never saw it offline
    assert summary["unavailable_partition_seconds"] >= by_cause["leader_down"]
    assert max(series["unavailable"]) == led
    # the controller removed broker 3 from the ISR of every partition it had a replica of
    assert summary["isr_changes_by_origin"]["broker_failure"]["shrink"] == 30
    assert summary["isr_shrinks"] >= 30 and summary["verdict"]["ok"]
    fetch = summary["fetch_path"]
    assert set(fetch["per_broker"]) == {"1", "2", "3", "4", "5", "6"}
    assert fetch["total"]["follower_fetch_requests"] == sum(
        b["follower_fetch_requests"] for b in fetch["per_broker"].values()) > 0
    assert fetch["total"]["incremental_fetches"] > fetch["total"]["full_fetches"] > 0


def test_losses_are_listed_with_cause_and_fault():
    scenario = sc.load(sc.examples_dir() / "kip279.toml")
    summary, _, _ = run_scenario(scenario)
    events = summary["loss_events"]
    assert summary["lost_acked_records"] > 0 and events
    assert sum(e["records"] for e in events) == summary["lost_acked_records"]
    by_cause = {}
    for e in events:
        by_cause[e["cause"]] = by_cause.get(e["cause"], 0) + e["records"]
        assert e["last_offset"] - e["first_offset"] + 1 >= e["records"] > 0
        assert e["acked_s"][0] <= e["acked_s"][1] <= e["found_s"]
        assert e["fault"] and "broker" in e["fault"]
    assert by_cause == {k: v for k, v in summary["lost_acked_records_by_cause"].items() if v}
    assert not summary["verdict"]["ok"] and summary["verdict"]["line"].startswith("FAIL")



def test_lost_responses_make_duplicates_the_log_audit_sees():
    from replica_core.sim.workload import Workload

    # a producer without idempotence (Kafka's default since 3.0 is with: see
    # test_sim_idempotence.py for the same loss with it)
    c = Cluster(3, config={"min.insync.replicas": 2, **FAST, "request.timeout.ms": 1000,
                           "enable.idempotence": False},
                seed=3)
    c.create_topic("t", 4, 3)
    c.advance(1500)
    w = Workload(c, {"batches_per_second": 5.0, "records_per_batch": 4, "record_bytes": 40})
    w.start(c.loop.now + 8000)
    c.advance(2000)
    assert w.audit_logs() == {"duplicate_batches": 0, "duplicate_records": 0,
                              "reordered_batches": 0, "duplicated_records": 0,
                              "reordered_records": 0}
    leaders = {c.leader_and_isr(tp)[0] for tp in c.tps}
    for b in leaders:  # the answers to the producer are lost: it retries appended batches
        c.network.link(b, 1000).loss_rate = 1.0
    c.advance(2500)
    for b in leaders:
        c.network.link(b, 1000).loss_rate = 0.0
    c.advance(6000)
    audit = w.audit_logs()
    assert audit["duplicate_batches"] > 0
    assert audit["duplicate_records"] == 4 * audit["duplicate_batches"]
    assert w.producer.errors.get("REQUEST_TIMED_OUT", 0) >= audit["duplicate_batches"]


def test_the_audit_reads_the_digests_the_full_check_took():
    """The end-of-run check hands the log audit the records digests its durability checks
    took (run.py): each is the CRC-32 of the records area (after the 61-byte header) of the
    batch at that row of the leader's scan, recomputed here from the stored bytes; the audit
    given them counts what it counts computing its own, and it does take them from there —
    two batches given one digest count as one batch written twice."""
    from bisect import bisect_right
    from zlib import crc32

    from replica_core.records.batch import kernels
    from replica_core.sim.workload import Workload

    c = Cluster(3, config={"min.insync.replicas": 2, **FAST}, seed=3)
    c.create_topic("t", 4, 3)
    c.advance(1500)
    w = Workload(c, {"batches_per_second": 5.0, "records_per_batch": 4, "record_bytes": 40})
    w.start(c.loop.now + 3000)
    c.advance(4000)
    digests = {}
    scans = c.check_invariants(digests)
    assert sum(len(rows) for rows in digests.values()) == w.producer.acked_batches > 4
    for (b, tp), rows in digests.items():
        assert b == c.leader_and_isr(tp)[0]
        headers, files, starts = scans[(b, tp)]
        for k, digest in rows.items():
            pos, size = int(headers[k, kernels.COL_POSITION]), int(headers[k, kernels.COL_SIZE])
            view = files[bisect_right(starts, k) - 1].view(pos, size)
            stored = bytes(view)
            view.release()
            assert digest == crc32(stored[61:])
    plain = w.audit_logs()
    assert plain["duplicate_batches"] == 0
    assert w.audit_logs(scans, digests) == plain
    (b, tp), rows = next((key, rows) for key, rows in digests.items() if len(rows) >= 2)
    first, second = sorted(rows)[:2]
    rows[second] = rows[first]
    assert w.audit_logs(scans, digests)["duplicate_batches"] == 1


def test_classifying_many_partitions_at_once_matches_one_by_one():
    """ClientView.refresh reads the controller's columns whole for a large set of partitions and
    element by element for a few: both give every partition the same cause."""
    c = cluster()
    mine = led_by(c, 1)
    assert mine
    c.crash(1)
    view = c.client_view
    view.refresh_all()  # the whole-column path (every partition)
    at_once = view.cause.tolist()
    counts = view.counts_by_cause()
    # broker 1 is down but still named by the controller: its partitions, and only they
    ids = {c.tp_ids[tp] for tp in mine}
    assert [pid for pid, cause in enumerate(at_once) if cause >= 0] == sorted(ids)
    assert counts["leader_down"] == len(mine)
    view.cause[:] = -1
    view.count[:] = [0] * len(view.count)
    for pid in range(N):
        view.refresh([pid])  # one partition: the element path
    assert view.cause.tolist() == at_once
    assert view.counts_by_cause() == counts


@pytest.mark.parametrize("many", [False, True])
def test_one_call_over_leaders_in_every_state_matches_one_by_one(many):
    """ClientView.refresh looks at each leader broker once per call: one call over partitions
    whose leaders are down, unreachable and serving — a partition named twice, the element
    path (a few partitions) and the whole-column path — gives each partition the cause a
    one-partition call gives it."""
    c = Cluster(4, config={"min.insync.replicas": 2, **FAST}, seed=5)
    c.create_topic("t", 40, 3)
    c.advance(1500)
    down, cut = led_by(c, 1), led_by(c, 2)
    serving = [tp for tp in c.tps if tp not in down and tp not in cut]
    assert down and cut and serving
    c.crash(1)
    c.isolate(2)  # the controller names both leaders still
    view = c.client_view
    ids = c.tp_ids
    pids = [ids[down[0]], ids[cut[0]], ids[serving[0]], ids[down[-1]], ids[cut[0]]]
    if many:
        pids += range(40)
    assert (4 * len(pids) >= 40) == many
    view.cause[:] = -1
    view.count[:] = [0] * len(view.count)
    view.refresh(pids)
    together, counts = view.cause.tolist(), view.counts_by_cause()
    assert {together[p] for p in pids} == {-1, 1, 2}  # writable, leader down, unreachable
    view.cause[:] = -1
    view.count[:] = [0] * len(view.count)
    for pid in pids:
        view.refresh([pid])
    assert view.cause.tolist() == together
    assert view.counts_by_cause() == counts
    c.unisolate(2)


def test_leadership_changes_keep_every_partition_classified_as_afresh():
    """A broker applying a LeaderAndIsr classifies again only the partitions it is the named
    leader of: through creation, a leader's crash, the elections and its restart, the view
    stays what classifying every partition afresh gives."""
    c = Cluster(4, config={"min.insync.replicas": 2, **FAST}, seed=5)
    c.create_topic("t", 40, 3)
    view = c.client_view

    def afresh_matches():
        kept, counts = view.cause.tolist(), view.counts_by_cause()
        view.refresh_all()
        return view.cause.tolist() == kept and view.counts_by_cause() == counts

    assert afresh_matches()
    c.advance(1500)
    assert afresh_matches()
    c.crash(1)
    for _ in range(8):
        c.advance(1000)
        assert afresh_matches()
    c.restart(1)
    for _ in range(8):
        c.advance(1000)
        assert afresh_matches()
    assert view.blocked == 0


def test_tracker_counts_follow_the_controllers_registrations():
    """The controller node's offline / under-min-ISR / under-replicated counts are those of
    the controller's partition registrations, after elections and ISR shrinks."""
    c = cluster(**{"min.insync.replicas": 3})
    c.crash(1)
    c.advance(6000)  # session expired: broker 1's partitions re-elected, ISRs shrunk
    c.crash(2)
    c.advance(6000)
    regs = list(c.controller.partitions.values())
    tracker = c.controller_node.tracker
    offline = sum(1 for r in regs if r.leader < 0)
    under_min = sum(1 for r in regs if r.leader >= 0 and len(r.isr) < 3)
    under_rep = sum(1 for r in regs if r.leader >= 0 and len(r.isr) < len(r.replicas))
    assert under_rep > 0 and offline + under_min > 0
    assert (tracker.offline, tracker.under_min, tracker.under_rep) == (
        offline, under_min, under_rep)


def test_metadata_answers_share_one_read_only_copy_until_a_leader_moves():
    """The controller answers metadata requests with the leaders at that moment: answers with
    no leader change between them share one copy nobody can write; a later move gives a
    new copy and leaves the earlier answers as they were."""
    t = _Tracker()
    t.grow(4, 3, 2)
    t.set(0, [(0, 1, 3)])
    first = t.leaders_snapshot()
    assert first.tolist() == [1, -1, -1, -1] and not first.flags.writeable
    t.set(5, [(0, 1, 2)])  # the ISR shrinks, the leader stays
    assert t.leaders_snapshot() is first
    with pytest.raises(ValueError):
        first[1] = 7
    t.set(9, [(1, 2, 3)])
    second = t.leaders_snapshot()
    assert second is not first
    assert second.tolist() == [1, 2, -1, -1] and first.tolist() == [1, -1, -1, -1]
    t.grow(1, 3, 2)
    assert t.leaders_snapshot().tolist() == [1, 2, -1, -1, -1]
