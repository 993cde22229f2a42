"""Invariants checked while a simulation runs (TigerBeetle's VOPR: a failing seed is a bug report).

Checked continuously, at the points where the state they guard changes:

* **HW ≤ LEO** on every replica — after a leader serves a fetch or appends, after a follower
  processes a fetch response.
* **A leader's HW never decreases during its tenure** (one leader epoch on one broker).
* **Offsets strictly increase** — every batch a follower appends, and every log in the sweeps.
* **Replicas in the ISR agree below the HW** — batch by batch (base offset, last offset, CRC,
  CRC valid) between the leader and each ISR follower, for partitions whose leadership or logs
  changed recently and a rotating sample of the others; every partition at the end.
* **No acknowledged record is lost** — an acknowledged batch (partition, offset range, digest of
  its records) must be in every new leader's log. A loss is allowed, counted and classified,
  when an unclean election or power failures of every replica that held it explain it (or it
  was only acks=1, or the run models pre-KIP-101 ``high_watermark`` truncation, whose losses
  are the point); otherwise it is a violation.

A violation raises :class:`InvariantViolation` (seed, simulated time, the last traced events),
which stops the run. With ``strict=False`` (the default in ``high_watermark`` mode)
divergence and unexplained losses are counted instead, so the pre-KIP-101 anomalies can be
measured rather than stop the run; HW, monotonicity and offset-order violations always raise.
"""
from __future__ import annotations

import zlib
from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from replica_core.records import scan
from replica_core.records.batch import kernels as _batch_kernels
from replica_core.replication.messages import FetchResponse, TopicPartition

if TYPE_CHECKING:
    from replica_core.sim.broker import SimBroker
    from replica_core.sim.cluster import Cluster

_COL_POS = _batch_kernels.COL_POSITION
_COL_SIZE = _batch_kernels.COL_SIZE
_COL_BASE = _batch_kernels.COL_BASE_OFFSET
_COL_DELTA = _batch_kernels.COL_LAST_OFFSET_DELTA
_COL_CRC = _batch_kernels.COL_CRC
_COL_CRC_OK = _batch_kernels.COL_CRC_OK
_HEADER_BYTES = 61

LOSS_CAUSES = ("unclean_election", "power_failure", "acks_1", "high_watermark_truncation",
               "unexplained")


class InvariantViolation(AssertionError):
    """A broken invariant: which, where, the seed and simulated time, and the last events."""

    def __init__(self, invariant: str, detail: str, *, seed: int, time_ms: int,
                 sim_time_s: float, trace: list[str]) -> None:
        self.invariant = invariant
        self.detail = detail
        self.seed = seed
        self.time_ms = time_ms
        self.sim_time_s = sim_time_s
        self.trace = trace
        super().__init__(str(self))

    def __str__(self) -> str:
        lines = [f"invariant {self.invariant!r} violated at t={self.sim_time_s:.3f}s "
                 f"(seed {self.seed}): {self.detail}",
                 f"last {len(self.trace)} events:"]
        lines += [f"  {line}" for line in self.trace]
        return "\n".join(lines)


def records_digest(batch: bytes | memoryview) -> int:
    """Digest of a v2 batch's records area (everything after the 61-byte header): the leader
    rewrites header fields (base offset, epoch, CRC) but not the records of an uncompressed
    batch, so the producer's digest identifies the stored batch."""
    return zlib.crc32(memoryview(batch)[_HEADER_BYTES:])


def log_batches(log: Any) -> tuple[np.ndarray, list[Any]]:
    """(rows, files) for every batch of ``log``: rows = int64 (n, 7) of base offset, last
    offset, stored CRC, CRC-valid, then where the batch is — index into ``files`` (the segment
    files), position and size."""
    tables = []
    files: list[Any] = []
    for seg in log.segments:
        size = seg.size
        if size <= 0:
            continue
        f = seg.log_file
        view = f.view(0, size)
        try:
            headers = scan(view, check_crc=True).headers
        finally:
            view.release()
        if len(headers):
            rows = np.empty((len(headers), 7), dtype=np.int64)
            rows[:, 0] = headers[:, _COL_BASE]
            rows[:, 1] = headers[:, _COL_BASE] + headers[:, _COL_DELTA]
            rows[:, 2] = headers[:, _COL_CRC]
            rows[:, 3] = headers[:, _COL_CRC_OK]
            rows[:, 4] = len(files)
            rows[:, 5] = headers[:, _COL_POS]
            rows[:, 6] = headers[:, _COL_SIZE]
            tables.append(rows)
            files.append(f)
    if not tables:
        return np.zeros((0, 7), dtype=np.int64), files
    return (tables[0] if len(tables) == 1 else np.concatenate(tables)), files


class AckLedger:
    """Every acknowledged batch, compactly: per partition id the offset range, the digest of
    its records, when it was acknowledged, with which acks, and the ISR size at the time."""

    def __init__(self) -> None:
        self.entries: dict[int, list[list[int]]] = {}
        self.acked_records = {-1: 0, 1: 0}
        self.acked_batches = 0

    def record(self, pid: int, base_offset: int, count: int, digest: int, *, acks: int,
               isr_size: int, ack_ms: int) -> None:
        """Remember an acknowledged batch (acks=0 batches are never acknowledged)."""
        if acks == 0:
            return
        self.entries.setdefault(pid, []).append(
            [base_offset, count, digest, ack_ms, isr_size, acks, 0])
        self.acked_records[acks] = self.acked_records.get(acks, 0) + count
        self.acked_batches += 1


class InvariantChecker:
    """The continuous checks of one :class:`~replica_core.sim.cluster.Cluster`."""

    def __init__(self, cluster: Cluster, *, strict: bool, trace_events: int = 200,
                 check_interval_ms: int = 1000, sample_per_check: int = 10,
                 suspect_ms: int = 60_000, suspect_budget: int = 50) -> None:
        self.cluster = cluster
        self.strict = strict
        self.ledger = AckLedger()
        self.trace: deque[tuple[int, str, tuple]] = deque(maxlen=trace_events)
        self.check_interval_ms = check_interval_ms
        self.sample_per_check = sample_per_check
        self.suspect_ms = suspect_ms
        self._leader_hw: dict[tuple[int, TopicPartition], tuple[int, int]] = {}
        self._suspects: dict[TopicPartition, int] = {}
        self._checked: dict[TopicPartition, tuple[int, int, int]] = {}
        self._suspect_rotor = 0
        self.suspect_budget = suspect_budget
        self._rotor = 0
        self.diverged: set[TopicPartition] = set()
        self.lost_records = dict.fromkeys(LOSS_CAUSES, 0)
        self.lost_batches = dict.fromkeys(LOSS_CAUSES, 0)
        self.lost_by_acks = {-1: 0, 1: 0}
        self.checks = {"hw": 0, "leader_hw": 0, "offsets": 0, "isr_agreement": 0,
                       "durability": 0}
        self._scans: dict[tuple[int, TopicPartition], tuple[np.ndarray, list]] | None = None

    def _batches(self, broker_id: int, tp: TopicPartition, log: Any
                 ) -> tuple[np.ndarray, list[Any]]:
        """:func:`log_batches`, scanned once per log during a full check."""
        cache = self._scans
        if cache is None:
            return log_batches(log)
        key = (broker_id, tp)
        hit = cache.get(key)
        if hit is None:
            hit = cache[key] = log_batches(log)
        return hit

    # ---- reporting ---------------------------------------------------------------------------
    def fail(self, invariant: str, detail: str) -> None:
        """Raise :class:`InvariantViolation` with the seed, the time and the recent trace."""
        cluster = self.cluster
        loop = cluster.loop
        raise InvariantViolation(
            invariant, detail, seed=cluster.seed, time_ms=loop.now,
            sim_time_s=loop.elapsed_ms / 1000.0, trace=self.format_trace())

    def format_trace(self) -> list[str]:
        start = self.cluster.loop.start_ms
        return [f"{(t - start) / 1000.0:10.3f}s {kind} " + " ".join(str(a) for a in args)
                for t, kind, args in self.trace]

    @property
    def lost_acked_records(self) -> int:
        return sum(self.lost_records.values())

    # ---- touch points ------------------------------------------------------------------------
    def leader_touched(self, broker: SimBroker, tps: Iterable[TopicPartition]) -> None:
        """After a leader appended or served a fetch: HW ≤ LEO, HW monotonic in the tenure."""
        rm = broker.rm
        if rm is None:
            return
        bid = broker.broker_id
        tracked = self._leader_hw
        for tp in tps:
            p = rm.partition(tp)
            if p is None or not p.is_leader or p.log is None:
                continue
            hw = p.high_watermark
            leo = p.log.log_end_offset
            self.checks["hw"] += 1
            if hw > leo:
                self.fail("hw_le_leo", f"leader {bid} of {tp}: HW {hw} > LEO {leo}")
            key = (bid, tp)
            epoch = p.leader_epoch
            last = tracked.get(key)
            if last is not None and last[0] == epoch and hw < last[1]:
                self.fail("leader_hw_monotonic",
                          f"leader {bid} of {tp} in epoch {epoch}: HW went from {last[1]} to {hw}")
            self.checks["leader_hw"] += 1
            tracked[key] = (epoch, hw)

    def follower_fetched(self, broker: SimBroker, response: FetchResponse,
                         leos_before: dict[TopicPartition, int]) -> None:
        """After a follower processed a fetch response: HW ≤ LEO, appended offsets increase."""
        rm = broker.rm
        if rm is None:
            return
        for pd in response.partitions:
            lg = rm.local_log(pd.tp)
            if lg is None:
                continue
            hw, leo = lg.high_watermark, lg.log_end_offset
            self.checks["hw"] += 1
            if hw > leo:
                self.fail("hw_le_leo", f"follower {broker.broker_id} of {pd.tp}: HW {hw} > LEO {leo}")
            if pd.diverging_epoch is not None or leo < leos_before.get(pd.tp, -1):
                self.suspect(pd.tp)  # truncated (diverging epoch, or out of range)
                continue
            records = pd.records
            size = records.nbytes if isinstance(records, memoryview) else len(records)
            if not size:
                continue
            self.checks["offsets"] += 1
            if size >= 12 and int.from_bytes(records[8:12], "big") + 12 == size:
                continue  # exactly one batch (its length field spans the response): in order
            headers = scan(records, check_crc=False).headers
            if len(headers):
                base = headers[:, _COL_BASE]
                last = base + headers[:, _COL_DELTA]
                if np.any(base[1:] <= last[:-1]):
                    self.fail("offsets_increase",
                              f"fetch response for {pd.tp} to broker {broker.broker_id} has "
                              f"batches out of order: {base.tolist()}")

    def truncated(self, broker: SimBroker, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            self.suspect(tp)

    def became_leader(self, broker: SimBroker, tps: list[TopicPartition]) -> None:
        """A broker took leadership: its tenure starts; acknowledged data must be in its log."""
        rm = broker.rm
        if rm is None:
            return
        for tp in tps:
            self._leader_hw.pop((broker.broker_id, tp), None)
            self.suspect(tp)
            lg = rm.local_log(tp)
            if lg is not None:
                self.check_durability(tp, lg, broker.broker_id)
        self.leader_touched(broker, tps)

    def became_follower(self, broker: SimBroker, tps: list[TopicPartition]) -> None:
        bid = broker.broker_id
        for tp in tps:
            self._leader_hw.pop((bid, tp), None)
            self.suspect(tp)

    def broker_restarted(self, broker: SimBroker) -> None:
        bid = broker.broker_id
        for key in [k for k in self._leader_hw if k[0] == bid]:
            del self._leader_hw[key]

    def suspect(self, tp: TopicPartition) -> None:
        """Check ``tp``'s ISR agreement at the next periodic checks (for a while)."""
        self._suspects[tp] = self.cluster.loop.now + self.suspect_ms

    # ---- durability --------------------------------------------------------------------------
    def check_durability(self, tp: TopicPartition, log: Any, broker_id: int) -> int:
        """Every acknowledged batch of ``tp`` still un-lost must be in ``log``; returns the
        number of batches newly found lost (counted and classified)."""
        cluster = self.cluster
        pid = cluster.tp_ids.get(tp)
        entries = self.ledger.entries.get(pid) if pid is not None else None
        if not entries:
            return 0
        self.checks["durability"] += 1
        rows, files = self._batches(broker_id, tp, log)
        where = {int(b): k for k, b in enumerate(rows[:, 0].tolist())}
        leo = log.log_end_offset
        newly = 0
        for e in entries:
            if e[6]:
                continue
            base, count, digest = e[0], e[1], e[2]
            k = where.get(base)
            ok = False
            if k is not None and base + count <= leo and rows[k, 1] == base + count - 1:
                view = files[rows[k, 4]].view(int(rows[k, 5]), int(rows[k, 6]))
                try:
                    ok = records_digest(view) == digest
                finally:
                    view.release()
            if not ok:
                e[6] = 1
                newly += 1
                cause = self._classify(pid, tp, e, broker_id)  # type: ignore[arg-type]
                self.lost_records[cause] += count
                self.lost_batches[cause] += 1
                self.lost_by_acks[e[5]] = self.lost_by_acks.get(e[5], 0) + count
                cluster.trace("lost", str(tp), f"offsets {base}..{base + count - 1}",
                              f"acks={e[5]}", f"cause={cause}", f"leader={broker_id}")
                if cause == "unexplained" and self.strict:
                    self.fail("no_acked_record_lost",
                              f"{tp}: acknowledged (acks=all) offsets {base}..{base + count - 1} "
                              f"are not in the log of new leader {broker_id} (LEO {leo})")
        return newly

    def _classify(self, pid: int, tp: TopicPartition, entry: list[int], leader: int) -> str:
        """Why an acknowledged batch is gone: an unclean election; power failures (on the
        leader that lacks it — it lost its unflushed copy and was still the rightful leader —
        or on at least as many replicas as held it at the ack); acks=1; pre-KIP-101 HW
        truncation; otherwise unexplained (a bug)."""
        cluster = self.cluster
        ack_ms = entry[3]
        if any(t >= ack_ms for t in cluster.unclean_elections.get(pid, ())):
            return "unclean_election"
        replicas = cluster.replicas_of(tp)
        powered = {b for b in replicas
                   if any(t >= ack_ms for t in cluster.power_failures.get(b, ()))}
        if leader in powered or (powered and len(powered) >= max(1, entry[4])):
            return "power_failure"
        if entry[5] == 1:
            return "acks_1"
        if cluster.truncation == "high_watermark":
            return "high_watermark_truncation"
        return "unexplained"

    # ---- ISR agreement -----------------------------------------------------------------------
    def check_isr_agreement(self, tp: TopicPartition) -> bool:
        """Leader and ISR followers hold identical batches below the HW; False if diverged
        (counted; raises when strict)."""
        cluster = self.cluster
        leader_id, isr = cluster.leader_and_isr(tp)
        leader = cluster.brokers.get(leader_id)
        if leader is None or not leader.alive or leader.rm is None:
            return True
        p = leader.rm.partition(tp)
        if p is None or not p.is_leader or p.log is None:
            return True
        hw = p.high_watermark
        if hw <= 0:
            return True
        self.checks["isr_agreement"] += 1
        lrows, _ = self._batches(leader_id, tp, p.log)
        self._check_rows(tp, leader_id, lrows, hw)
        ok = True
        for b in p.isr:
            if b == leader_id:
                continue
            follower = cluster.brokers.get(b)
            if follower is None or not follower.alive or follower.rm is None:
                continue
            lg = follower.rm.local_log(tp)
            if lg is None:
                continue
            limit = min(hw, lg.log_end_offset)
            frows, _ = self._batches(b, tp, lg)
            self._check_rows(tp, b, frows, limit)
            a = lrows[lrows[:, 1] < limit]
            c = frows[frows[:, 1] < limit]
            if a.shape != c.shape or not np.array_equal(a[:, :3], c[:, :3]):
                ok = False
                if tp not in self.diverged:
                    self.diverged.add(tp)
                    cluster.trace("diverged", str(tp), f"leader={leader_id}", f"follower={b}",
                                  f"hw={hw}")
                if self.strict:
                    self.fail("isr_agree_below_hw",
                              f"{tp}: ISR follower {b} disagrees with leader {leader_id} below "
                              f"HW {hw}: leader batches {a[:, :2].tolist()} vs "
                              f"follower {c[:, :2].tolist()}")
        return ok

    def _check_rows(self, tp: TopicPartition, broker_id: int, rows: np.ndarray,
                    limit: int) -> None:
        if len(rows) > 1 and np.any(rows[1:, 0] <= rows[:-1, 1]):
            self.fail("offsets_increase", f"log of {tp} on broker {broker_id} has batches out of "
                                          f"order: {rows[:, 0].tolist()}")
        bad = rows[(rows[:, 1] < limit) & (rows[:, 3] != 1)]
        if len(bad):
            self.fail("isr_agree_below_hw",
                      f"log of {tp} on broker {broker_id} has a corrupt batch below the HW "
                      f"{limit}: base offset {int(bad[0, 0])} fails its CRC")

    # ---- sweeps ------------------------------------------------------------------------------
    def periodic(self) -> None:
        """Suspects whose leader HW moved since they were last checked (at most
        ``suspect_budget`` per call, in rotation), then a rotating sample of all partitions."""
        now = self.cluster.loop.now
        suspects = self._suspects
        if suspects:
            order = sorted(suspects)
            n = len(order)
            start = self._suspect_rotor % n
            budget = self.suspect_budget
            for k in range(n):
                tp = order[(start + k) % n]
                if budget > 0:
                    key = self._agreement_key(tp)
                    if key is not None and key != self._checked.get(tp):
                        self._checked[tp] = key
                        self.check_isr_agreement(tp)
                        budget -= 1
                if suspects[tp] <= now:
                    del suspects[tp]
                    self._checked.pop(tp, None)
            self._suspect_rotor = start + (self.suspect_budget - budget)
        tps = self.cluster.tps
        if tps and self.sample_per_check > 0:
            n = min(self.sample_per_check, len(tps))
            for k in range(n):
                self.check_isr_agreement(tps[(self._rotor + k) % len(tps)])
            self._rotor = (self._rotor + n) % len(tps)

    def _agreement_key(self, tp: TopicPartition) -> tuple[int, int, int] | None:
        """(leader, leader epoch, leader HW): nothing new to compare while it is unchanged."""
        leader_id = self.cluster.leader_and_isr(tp)[0]
        leader = self.cluster.brokers.get(leader_id)
        if leader is None or leader.rm is None:
            return None
        p = leader.rm.partition(tp)
        if p is None or not p.is_leader:
            return None
        return leader_id, p.leader_epoch, p.high_watermark

    def full_check(self) -> None:
        """Everything, over every partition: HW ≤ LEO and offset order on every live replica,
        ISR agreement, and durability against the current leaders."""
        cluster = self.cluster
        self._scans = {}
        try:
            self._full_check(cluster)
        finally:
            self._scans = None

    def _full_check(self, cluster: Cluster) -> None:
        for b in sorted(cluster.brokers):
            broker = cluster.brokers[b]
            if not broker.alive or broker.rm is None:
                continue
            for tp, p in sorted(broker.rm.partitions().items()):
                lg = p.log
                if lg is None:
                    continue
                hw = p.high_watermark
                if hw > lg.log_end_offset:
                    self.fail("hw_le_leo", f"broker {b} {tp}: HW {hw} > LEO {lg.log_end_offset}")
                rows, _ = self._batches(b, tp, lg)
                self._check_rows(tp, b, rows, -1)
        for tp in cluster.tps:
            self.check_isr_agreement(tp)
            leader_id, _ = cluster.leader_and_isr(tp)
            leader = cluster.brokers.get(leader_id)
            if leader is not None and leader.alive and leader.rm is not None:
                p = leader.rm.partition(tp)
                if p is not None and p.is_leader and p.log is not None:
                    self.check_durability(tp, p.log, leader_id)


__all__ = ["LOSS_CAUSES", "AckLedger", "InvariantChecker", "InvariantViolation", "log_batches",
           "records_digest"]
