"""The simulator's idempotent producer (issue 17): Kafka's producer configs
``enable.idempotence``, ``max.in.flight.requests.per.connection``, ``retries`` and
``delivery.timeout.ms``, producer ids and sequences on the batches, and what a consumer of the
committed log sees when retries follow lost answers or a leader failover, with and without
idempotence."""
from __future__ import annotations

import struct

import pytest

from replica_core.errors import InvalidConfigurationError
from replica_core.sim import scenario as sc
from replica_core.sim.cluster import Cluster, configs_in_force
from replica_core.sim.invariants import records_digest, scan_log
from replica_core.sim.run import run_scenario
from replica_core.sim.workload import Workload

SCENARIO = sc.examples_dir() / "idempotence.toml"
FAST = {"broker.session.timeout.ms": 2000, "replica.lag.time.max.ms": 4000,
        "min.insync.replicas": 2}


def _run(idempotence: bool) -> dict:
    summary, _, _ = run_scenario(sc.load(SCENARIO, {"enable.idempotence": idempotence}))
    return summary


def test_the_shipped_failover_scenario_duplicates_records_only_without_idempotence():
    without, with_ = _run(False), _run(True)
    for s in (without, with_):
        assert s["lost_acked_records"] == 0 and s["failed_batches"] == 0
        assert s["producer_retries"] > 0 and s["leader_elections"] > 0
    assert without["config"]["kafka"]["producer"]["enable.idempotence"] is False
    assert with_["config"]["kafka"]["producer"]["enable.idempotence"] is True
    # a consumer of the committed logs reads some records twice without idempotence...
    assert without["duplicated_records"] > 0
    assert without["duplicated_records"] == 5 * without["duplicate_batches"]  # 5 per batch
    # ...and none with it, in produce order
    assert with_["duplicated_records"] == 0 and with_["duplicate_batches"] == 0
    assert with_["reordered_records"] == 0 and with_["reordered_batches"] == 0


def _busy_cluster(idempotence: bool, *, seed: int = 3):
    c = Cluster(3, config={**FAST, "request.timeout.ms": 1000,
                           "enable.idempotence": idempotence}, seed=seed)
    c.create_topic("t", 4, 3)
    c.advance(1500)
    w = Workload(c, {"batches_per_second": 5.0, "records_per_batch": 4, "record_bytes": 40})
    return c, w


def _lose_answers(c, w, ms: int = 2500) -> None:
    """Every leader's answers to the producer are lost for ``ms``: each batch sent then is
    appended, times out at the producer and is sent again."""
    w.start(c.loop.now + 8000)
    c.advance(2000)
    leaders = {c.leader_and_isr(tp)[0] for tp in c.tps}
    for b in leaders:
        c.network.link(b, 1000).loss_rate = 1.0
    c.advance(ms)
    for b in leaders:
        c.network.link(b, 1000).loss_rate = 0.0
    c.advance(6000)


def test_retries_after_lost_answers_are_answered_with_their_first_offsets():
    c, w = _busy_cluster(True)
    _lose_answers(c, w)
    p = w.producer
    assert p.errors.get("REQUEST_TIMED_OUT", 0) > 0  # appended batches were sent again
    assert p.failed_batches == 0 and p.acked_batches == p.sent_batches
    audit = w.audit_logs()
    assert audit["duplicate_batches"] == 0 and audit["duplicated_records"] == 0
    # every acknowledged batch is in its leader's log once, at the offset it was acked with
    for tp in c.tps:
        log = c.brokers[c.leader_and_isr(tp)[0]].rm.local_log(tp)
        headers, files, starts = scan_log(log)
        stored = []
        for k in range(len(headers)):
            i = max(j for j, s in enumerate(starts) if s <= k)
            view = files[i].view(int(headers[k, 0]), int(headers[k, 1]))
            stored.append((int(headers[k, 2]), records_digest(view)))
            view.release()
        acked = sorted((e[0], e[2]) for e in c.checker.ledger.entries[c.tp_ids[tp]])
        assert sorted(stored) == acked


def test_batches_carry_the_producer_id_epoch_and_per_partition_sequences():
    c, w = _busy_cluster(True)
    other = Workload(c, {"batches_per_second": 1.0})
    assert (w.producer.producer_id, w.producer.producer_epoch) == (0, 0)
    assert (other.producer.producer_id, other.producer.producer_epoch) == (1, 0)
    w.start(c.loop.now + 3000)
    c.advance(5000)
    for tp in c.tps:
        log = c.brokers[c.leader_and_isr(tp)[0]].rm.local_log(tp)
        fields = []
        for seg in log.segments:
            data = log.medium.read_bytes(seg.log_path)
            pos = 0
            while pos + 61 <= len(data):
                fields.append(struct.unpack_from(">qhi", data, pos + 43))
                pos += struct.unpack_from(">i", data, pos + 8)[0] + 12
        assert fields, tp
        assert {f[:2] for f in fields} == {(0, 0)}
        assert [f[2] for f in fields] == [4 * i for i in range(len(fields))]  # 4 records each


def test_no_more_than_max_in_flight_batches_of_a_partition_are_outstanding():
    c = Cluster(3, config={**FAST, "request.timeout.ms": 30_000,
                           "max.in.flight.requests.per.connection": 2}, seed=4)
    c.create_topic("t", 1, 3)
    c.advance(1500)
    w = Workload(c, {"batches_per_second": 50.0, "records_per_batch": 2, "record_bytes": 40})
    leader = c.leader_and_isr(c.tps[0])[0]
    c.network.link(leader, 1000).loss_rate = 1.0  # answers lost: requests stay outstanding
    w.start(c.loop.now + 2000)
    c.advance(1000)
    q = w.producer._queues[c.tp_ids[c.tps[0]]]
    assert q.in_flight == 2 and len(q.pending) > 10
    assert w.producer.sent_batches == q.in_flight + len(q.pending)


@pytest.mark.parametrize("configs,acks,names", [
    ({"enable.idempotence": True}, 1, "acks"),
    ({"enable.idempotence": True, "max.in.flight.requests.per.connection": 6}, -1,
     "max.in.flight.requests.per.connection"),
    ({"enable.idempotence": True, "retries": 0}, -1, "retries"),
    ({"enable.idempotence": "maybe"}, -1, "enable.idempotence"),
    ({"max.in.flight.requests.per.connection": 0}, -1, "max.in.flight.requests.per.connection"),
    ({"retries": -1}, -1, "retries"),
    ({"delivery.timeout.ms": 2000, "request.timeout.ms": 3000}, -1, "delivery.timeout.ms"),
])
def test_bad_producer_configs_are_refused_naming_the_config(configs, acks, names):
    doc = {"topics": [{"name": "t", "partitions": 1, "replication_factor": 1}],
           "cluster": {"brokers": 1}, "configs": configs,
           "workload": {"acks": {-1: "all", 1: 1}[acks]}}
    with pytest.raises(InvalidConfigurationError, match=names.replace(".", r"\.")):
        sc.from_dict(doc)


def test_idempotence_left_at_its_default_gives_way_as_in_kafka():
    """Not set explicitly, idempotence is turned off (not an error) by acks other than all, by
    retries=0 or by more than 5 requests in flight; delivery.timeout.ms left at its default is
    raised to request.timeout.ms."""
    assert configs_in_force({}, -1)["producer"]["enable.idempotence"] is True
    assert configs_in_force({}, 1)["producer"]["enable.idempotence"] is False
    assert configs_in_force({"retries": 0}, -1)["producer"]["enable.idempotence"] is False
    off = configs_in_force({"max.in.flight.requests.per.connection": 9}, -1)["producer"]
    assert (off["enable.idempotence"], off["max.in.flight.requests.per.connection"]) == (False, 9)
    assert configs_in_force({"request.timeout.ms": 200_000},
                            -1)["producer"]["delivery.timeout.ms"] == 200_000


def test_an_epoch_bump_never_re_sends_a_batch_that_may_be_in_the_log():
    """KIP-360: a batch that fails for good bumps the producer epoch, and batches re-sent under
    the new epoch get new sequences — which the leader cannot tell from new batches. Kafka
    bumps only once no batch of the old epoch is in flight or awaiting its retry, so a batch
    whose earlier attempt got no answer (and may be in the log) is never re-sequenced. A
    cluster with frequent isolations (this seed found by a search: before the rule it wrote
    140 records twice) bumps the epoch and still duplicates nothing."""
    doc = {"cluster.brokers": 5, "topics.0.partitions": 40, "workload.batches_per_second": 2.0,
           "fault_rates.isolations_per_broker_hour": 60.0, "fault_rates.mean_isolation_s": 5.0,
           "duration_s": 60, "fetcher_lanes": False, "num.replica.fetchers": 1, "seed": 4}
    summary, _, _ = run_scenario(sc.load(sc.examples_dir() / "sharded.toml", doc))
    assert summary["producer_epoch_bumps"] >= 1                # the situation arose
    assert summary["duplicated_records"] == 0
    assert summary["reordered_records"] == 0
    assert summary["lost_acked_records"] == 0


@pytest.mark.parametrize("keys", [0, 3])
def test_workload_batches_are_what_build_batch_makes_of_their_records(keys):
    """The workload patches each batch's ids into a template (joined around the ids without
    keys): the bytes are those ``build_batch`` encodes from the same values, keys and time."""
    from replica_core.records import build_batch

    c = Cluster(3, config=FAST, seed=1)
    c.create_topic("t", 2, 3)
    w = Workload(c, {"batches_per_second": 1.0, "records_per_batch": 5, "record_bytes": 30,
                     "keys": keys})
    c.advance(1234)
    for pid, seq in ((0, 0), (1, 7), (123_456_789, 1_000_000_001)):
        values = [b"%08d:%09d:%04d|" % (pid % 10**8, seq % 10**9, r) + b"." * 6
                  for r in range(5)]
        expected = build_batch(values, keys=[b"key-%08d" % ((seq * 5 + r) % keys)
                                             for r in range(5)] if keys else None,
                               now_ms=c.loop.now)
        assert w._batch(pid, seq) == expected


def test_the_same_bytes_are_sent_and_stored_whether_batches_come_stamped_or_not(monkeypatch):
    """The workload hands an idempotent producer its batches unstamped (the producer stamps
    every batch at its first send): the producer sends, and the brokers store, exactly the
    bytes of a run where every batch was stamped first."""
    from conftest import patch_method

    from replica_core.sim.broker import ProduceRequest
    from replica_core.sim.network import Network

    def run(stamped_first: bool) -> tuple[list, list, dict]:
        c = Cluster(3, config=FAST, seed=5)
        c.create_topic("t", 4, 3)
        sent: list[bytes] = []
        real_request = Network.request

        def request(src, dst, message, *args, **kwargs):
            if isinstance(message, ProduceRequest):
                sent.append(bytes(message.records))
            real_request(c.network, src, dst, message, *args, **kwargs)

        patch_method(monkeypatch, c.network, "request", request)
        w = Workload(c, {"batches_per_second": 20.0, "records_per_batch": 3,
                         "record_bytes": 40})
        assert w.producer.idempotent
        if stamped_first:  # the producer gets _batch's stamped bytes
            real = Workload._unstamped_batch
            inside: list[int] = []

            def stamped(pid: int, seq: int) -> bytes | bytearray:
                if inside:  # _batch's own call
                    return real(w, pid, seq)
                inside.append(1)
                try:
                    return w._batch(pid, seq)
                finally:
                    inside.pop()

            patch_method(monkeypatch, w, "_unstamped_batch", stamped)
        w.start(c.loop.now + 3000)
        c.advance(5000)
        assert w.producer.acked_batches > 100
        assert c.checker.ledger.acked_batches == w.producer.acked_batches
        logs = []
        for b in sorted(c.brokers):
            lm = c.brokers[b].lm
            for tp in sorted(c.tps):
                log = lm.get_log(tp.topic, tp.partition)
                stored = [seg.read(seg.base_offset, 1 << 30) for seg in log.segments]
                logs.append((b, tp, [bytes(r.records) for r in stored if r is not None]))
        assert len(sent) >= w.producer.acked_batches
        return sent, logs, c.checker.ledger.entries

    assert run(False) == run(True)


def test_the_audit_reads_a_full_checks_scans_as_it_reads_the_logs():
    """Without idempotence, lost answers leave batches twice in the logs: the end-of-run audit
    given the scans of the invariant check just made counts what it counts scanning itself,
    and the check scanned every live replica's log (the leaders' among them)."""
    c, w = _busy_cluster(False)
    _lose_answers(c, w)
    scans = c.check_invariants()
    leaders = {(c.leader_and_isr(tp)[0], tp) for tp in c.tps}
    assert leaders <= set(scans) and len(scans) == 3 * len(c.tps)
    fresh = w.audit_logs()
    assert fresh["duplicate_batches"] > 0  # the case is not empty
    assert w.audit_logs(scans) == fresh
