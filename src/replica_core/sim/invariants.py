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
  its records) must be in every new leader's log. A loss is counted under a cause only when the
  recorded history shows that cause's pattern (each explanation is a checked claim):

  - ``unclean_election``: the partition elected a leader from outside its ISR after the ack;
  - ``power_failure``: a replica that held the batch lost power after the ack, came back
    without it, and was — or became while down — the sole remaining ISR member (the only way
    Kafka loses acknowledged data to power failures); with ``detect_bounces=False``
    (pre-KIP-380) also when that replica itself leads again on its previous process's
    standing (the controller never declared it dead);
  - ``acks_1``: the batch was acknowledged with acks=1 and the new leader lacking it is not the
    leader that acknowledged it (the leader was lost before the batch was replicated);
  - ``high_watermark_truncation``: pre-KIP-101 truncation — the new leader held the batch and
    truncated it away to its high watermark when it became a follower after the ack;
  - ``unexplained``: anything else, a bug — a violation (counted when not strict; it fails the
    run either way).

A violation raises :class:`InvariantViolation` (seed, simulated time, the last traced events),
which stops the run. With ``strict=False`` (the default in ``high_watermark`` mode)
divergence and unexplained losses are counted instead, so the pre-KIP-101 anomalies can be
measured rather than stop the run; HW, monotonicity and offset-order violations always raise.
A divergence that a power failure explains under ``detect_bounces=False`` (an ISR member that
lost records to it kept its ISR place) is counted and traced as such, never raised. Violation
messages name the differing batches by offsets and CRC.
"""
from __future__ import annotations

import zlib
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from replica_core._fast import load
from replica_core.records.batch import MAX_FRAME_SIZE
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
_COL_NCOLS = _batch_kernels.NCOLS
_HEADER_BYTES = 61
_scan_batches = _batch_kernels.scan_batches
_kernels = load("_invariants", "invariants_py")
_OUT_OF_ORDER = _kernels.OUT_OF_ORDER
_NONE = _kernels.NONE
_DIVERGED = _kernels.DIVERGED
_INT64_MIN = -(2**63)
_NO_ROWS = np.zeros((0, _COL_NCOLS), dtype=np.int64)

# A log's batches as the checks see them: (headers, files, starts) — the batch-scan header rows
# (CRCs checked) of every batch in log order, the segment files holding them, and the first
# row of each file.
LogScan = tuple[np.ndarray, list[Any], list[int]]

# The records digests (:func:`records_digest`) of some rows of some logs' scans: by (broker,
# partition), scan row -> digest.
ScanDigests = dict[tuple[int, TopicPartition], dict[int, int]]

LOSS_CAUSES = ("unclean_election", "power_failure", "acks_1", "high_watermark_truncation",
               "stale_replica_rejoined", "unexplained")


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


def _scan_file(f: Any, size: int) -> np.ndarray:
    """The batch header rows of the first ``size`` bytes of segment file ``f`` (CRCs
    checked)."""
    view = f.view(0, size)
    try:
        return _scan_batches(view, 0, -1, True, MAX_FRAME_SIZE)[0]
    finally:
        view.release()


def scan_log(log: Any) -> LogScan:
    """Scan every segment of ``log`` once (CRCs checked): its :data:`LogScan`. A log whose
    one empty segment is not made yet holds nothing: it is not built to find that out."""
    if not log.segments_made:
        return _NO_ROWS, [], []
    segments = log.segments
    if len(segments) == 1:  # most logs: one segment, scanned without the general loop
        seg = segments.last
        size = seg.size
        if size <= 0:
            return _NO_ROWS, [], []
        f = seg.log_file
        headers = _scan_file(f, size)
        return (headers, [f], [0]) if len(headers) else (_NO_ROWS, [], [])
    files: list[Any] = []
    starts: list[int] = []
    found = _NO_ROWS
    parts: list[np.ndarray] | None = None  # two or more segments hold batches
    n = 0
    for seg in segments:
        size = seg.size
        if size <= 0:
            continue
        f = seg.log_file
        headers = _scan_file(f, size)
        k = len(headers)
        if k:
            if n:
                if parts is None:
                    parts = [found]
                parts.append(headers)
            else:
                found = headers
            files.append(f)
            starts.append(n)
            n += k
    return (found if parts is None else np.concatenate(parts)), files, starts


def log_batches(log: Any) -> tuple[np.ndarray, list[Any]]:
    """(rows, files) for every batch of ``log``: rows = int64 (n, 7) of base offset, last
    offset, stored CRC, CRC-valid, then where the batch is — index into ``files`` (the segment
    files), position and size."""
    headers, files, starts = scan_log(log)
    rows = np.empty((len(headers), 7), dtype=np.int64)
    rows[:, 0] = headers[:, _COL_BASE]
    rows[:, 1] = headers[:, _COL_BASE] + headers[:, _COL_DELTA]
    rows[:, 2] = headers[:, _COL_CRC]
    rows[:, 3] = headers[:, _COL_CRC_OK]
    rows[:, 4] = np.repeat(np.arange(len(files)), np.diff([*starts, len(headers)]))
    rows[:, 5] = headers[:, _COL_POS]
    rows[:, 6] = headers[:, _COL_SIZE]
    return rows, files


def _int64(v: int) -> int:
    """``v`` wrapped to int64 (two's complement), as the numpy row arithmetic does."""
    return (v + 2**63) % 2**64 - 2**63


def _from_common_start(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both logs' batches from the later of their first base offsets: retention deletes whole
    segments on each replica on its own schedule, so only what both still hold is compared."""
    if not len(a) or not len(b):
        return a, b
    start = max(int(a[0, _COL_BASE]), int(b[0, _COL_BASE]))
    return a[a[:, _COL_BASE] >= start], b[b[:, _COL_BASE] >= start]


def _common_start(a: np.ndarray, b: np.ndarray) -> int:
    """The first base offset both logs hold batches from (see :func:`_from_common_start`;
    the lowest int64 when either is empty: nothing is left out)."""
    if not len(a) or not len(b):
        return _INT64_MIN
    x, y = int(a[0, _COL_BASE]), int(b[0, _COL_BASE])  # (ints compare faster)
    return x if x >= y else y


def _batches_below(headers: np.ndarray, limit: int) -> list[tuple[int, int, int]]:
    """(base offset, last offset, CRC) of the batches whose last offset is below ``limit``."""
    base = headers[:, _COL_BASE]
    last = base + headers[:, _COL_DELTA]
    keep = last < limit
    return [tuple(r) for r in np.stack([base[keep], last[keep], headers[keep, _COL_CRC]],
                                       axis=1).tolist()]


def _describe_batch(row: tuple[int, int, int]) -> str:
    return f"{row[0]}..{row[1]} crc {row[2] & 0xFFFFFFFF:08x}"


def describe_difference(leader: list[tuple[int, int, int]],
                        follower: list[tuple[int, int, int]]) -> str:
    """Where two replicas' batches (base, last, CRC) first differ, with the batches around it
    on each side (CRCs included: equal offsets can hold different records)."""
    i = 0
    while i < len(leader) and i < len(follower) and leader[i] == follower[i]:
        i += 1
    lo, hi = max(0, i - 1), i + 4

    def side(rows: list[tuple[int, int, int]]) -> str:
        shown = ", ".join(_describe_batch(r) for r in rows[lo:hi])
        more = " ..." if len(rows) > hi else ""
        return f"[{shown}{more}]"

    return (f"first difference at batch #{i}: leader batches #{lo}.. {side(leader)} vs "
            f"follower {side(follower)}")


def _found_at(headers: np.ndarray, files: list[Any], starts: list[int], k: int | None,
              base: int) -> str:
    """What a log holds where an acknowledged batch should start (row ``k`` of its scan)."""
    if k is None:
        return f"no batch of it starts at offset {base}"
    row = headers[k].tolist()
    f = files[bisect_right(starts, k) - 1]
    view = f.view(row[_COL_POS], row[_COL_SIZE])
    try:
        digest = records_digest(view)
    finally:
        view.release()
    last = _int64(row[_COL_BASE] + row[_COL_DELTA])
    return (f"it holds batch {_describe_batch((row[_COL_BASE], last, row[_COL_CRC]))} "
            f"(records digest {digest:08x}) there")


class AckLedger:
    """Every acknowledged batch, compactly: per partition id the offset range, the digest of
    its records, when it was acknowledged, with which acks, the ISR size at the time, whether
    it was found lost, and the broker that acknowledged it (-1: unknown) — entry fields
    ``[base, count, digest, ack_ms, isr_size, acks, lost, leader]``."""

    def __init__(self) -> None:
        self.entries: dict[int, list[list[int]]] = {}
        self.acked_records = {-1: 0, 1: 0}
        self.acked_batches = 0

    def record(self, pid: int, base_offset: int, count: int, digest: int, *, acks: int,
               isr_size: int, ack_ms: int, leader: int = -1) -> None:
        """Remember an acknowledged batch (acks=0 batches are never acknowledged)."""
        if acks == 0:
            return
        self.entries.setdefault(pid, []).append(
            [base_offset, count, digest, ack_ms, isr_size, acks, 0, leader])
        self.acked_records[acks] = self.acked_records.get(acks, 0) + count
        self.acked_batches += 1


class PowerLoss:
    """One power failure of one broker, as the loss causes need it: when, each log's end
    offset just before (``held``), each log's end offset after recovery (``kept``, filled
    when the broker starts again), and when the broker next served each partition (applied
    a LeaderAndIsr for it: ``back``) — the end of its time down for that partition."""

    __slots__ = ("at_ms", "held", "kept", "back")

    def __init__(self, at_ms: int, held: dict[TopicPartition, int]) -> None:
        self.at_ms = at_ms
        self.held = held
        self.kept: dict[TopicPartition, int] | None = None
        self.back: dict[TopicPartition, int] = {}

    def lost(self, tp: TopicPartition, end: int) -> bool:
        """Did this power failure take offsets below ``end`` of ``tp`` that the broker held
        (all of them up to ``end`` before, fewer after its log recovery)?"""
        held = self.held.get(tp)
        if held is None or held < end or self.kept is None:
            return False
        return self.kept.get(tp, 0) < end


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
        # broker -> partition it leads -> (leader epoch, HW) at the last look
        self._leader_hw: dict[int, dict[TopicPartition, tuple[int, int]]] = {}
        self._suspects: dict[TopicPartition, int] = {}
        self._suspect_order: list[TopicPartition] | None = []  # sorted(_suspects); None: stale
        # at most the earliest expiry in _suspects (a lower bound: re-suspecting only delays
        # one): while it is in the future no suspect expires, without looking at them all
        self._suspects_until_floor = 2**63 - 1
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
        self._scans: dict[tuple[int, TopicPartition], LogScan] | None = None
        self._digests: ScanDigests | None = None  # filled during a full check, when asked
        self.leadership_listeners: list[Callable[[SimBroker, list[TopicPartition]], None]] = []
        """Observers told whenever a broker has applied LeaderAndIsr for some partitions."""
        self.loss_events: list[dict[str, Any]] = []
        """Every loss found: partition, offsets, records, acks, when acknowledged and found
        (loop ms), cause, the new leader lacking it and the fault that explains it."""
        # ---- the history the loss causes are checked against --------------------------------
        self._isr_history: dict[TopicPartition, tuple[list[int], list[tuple[int, ...]]]] = {}
        """Committed ISR changes per partition: (times, ISRs); the first entry is the ISR in
        force before the first change."""
        self._power_losses: dict[int, list[PowerLoss]] = {}
        """Per broker, its power failures with what each of its logs held and kept."""
        self._dead_at: dict[int, list[int]] = {}
        """Per broker, when the controller declared it dead (session expiry, bounce, shutdown)."""
        self._hw_truncations: dict[tuple[int, TopicPartition], list[tuple[int, int, int]]] = {}
        """(broker, partition) -> (when, LEO before, LEO after) of each follower truncation to
        the HW on LeaderAndIsr (``high_watermark`` mode only)."""
        self._leaders: dict[TopicPartition, list[tuple[int, int]]] = {}
        """(when, broker) of every leadership a broker took (applied LeaderAndIsr as leader)."""
        self.diverged_explained: dict[TopicPartition, str] = {}
        """Diverged partitions whose divergence a fault explains, with the explanation."""

    def _batches(self, broker_id: int, tp: TopicPartition, log: Any) -> LogScan:
        """:func:`scan_log`, scanned once per log during a full check."""
        cache = self._scans
        if cache is None:
            return scan_log(log)
        key = (broker_id, tp)
        hit = cache.get(key)
        if hit is None:
            hit = cache[key] = scan_log(log)
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
        tracked = self._leader_hw.get(bid)
        if tracked is None:
            tracked = self._leader_hw[bid] = {}
        checks = self.checks
        leader_state = rm.leader_state
        n = 0  # partitions checked: added to both counts once, after the loop (or at a failure)
        for tp in tps:
            state = leader_state(tp)
            if state is None:  # not led here (any more), or no log
                continue
            epoch, hw, leo = state
            if hw > leo:
                checks["hw"] += n + 1
                checks["leader_hw"] += n
                self.fail("hw_le_leo", f"leader {bid} of {tp}: HW {hw} > LEO {leo}")
            last = tracked.get(tp)
            if last is None or last[0] != epoch:
                tracked[tp] = (epoch, hw)
            elif hw != last[1]:
                if hw < last[1]:
                    checks["hw"] += n + 1
                    checks["leader_hw"] += n
                    self.fail("leader_hw_monotonic", f"leader {bid} of {tp} in epoch {epoch}: "
                              f"HW went from {last[1]} to {hw}")
                tracked[tp] = (epoch, hw)
            n += 1
        if n:
            checks["hw"] += n
            checks["leader_hw"] += n

    def follower_fetched(self, broker: SimBroker, response: FetchResponse,
                         leos_before: dict[TopicPartition, int]) -> None:
        """After a follower processed a fetch response: HW ≤ LEO, appended offsets increase."""
        rm = broker.rm
        if rm is None:
            return
        checks = self.checks
        local_log = rm.local_log
        hw_checks = 0  # added to checks["hw"] once, after the loop (or before a failure)
        for pd in response.partitions:
            tp = pd.tp
            lg = local_log(tp)
            if lg is None:
                continue
            hw, leo = lg.high_watermark, lg.log_end_offset
            hw_checks += 1
            if hw > leo:
                checks["hw"] += hw_checks
                self.fail("hw_le_leo", f"follower {broker.broker_id} of {tp}: HW {hw} > LEO {leo}")
            if pd.diverging_epoch is not None or (
                    leos_before and leo < leos_before.get(tp, -1)):
                self.suspect(tp)  # truncated (diverging epoch, or out of range)
                continue
            records = pd.records
            size = records.nbytes if isinstance(records, memoryview) else len(records)
            if not size:
                continue
            checks["offsets"] += 1
            if size >= 12 and int.from_bytes(records[8:12], "big") + 12 == size:
                continue  # exactly one batch (its length field spans the response): in order
            headers = _scan_batches(records, 0, -1, False, MAX_FRAME_SIZE)[0]
            if _kernels.check_rows(headers, _INT64_MIN) == _OUT_OF_ORDER:  # (no CRC verdicts)
                checks["hw"] += hw_checks
                self.fail("offsets_increase",
                          f"fetch response for {tp} to broker {broker.broker_id} has "
                          f"batches out of order: {headers[:, _COL_BASE].tolist()}")
        checks["hw"] += hw_checks

    def truncated(self, broker: SimBroker, tps: Iterable[TopicPartition]) -> None:
        self.suspect_all(tps)

    def became_leader(self, broker: SimBroker, tps: list[TopicPartition]) -> None:
        """A broker took leadership: its tenure starts; acknowledged data must be in its log."""
        rm = broker.rm
        if rm is None:
            return
        tracked = self._leader_hw.get(broker.broker_id, {})
        now = self.cluster.loop.now
        leaders = self._leaders
        self.suspect_all(tps)
        # check_durability has nothing to look at for a partition without acknowledged batches
        tp_ids = self.cluster.tp_ids
        acked = self.ledger.entries
        for tp in tps:
            tracked.pop(tp, None)
            pid = tp_ids.get(tp)
            if pid is not None and acked.get(pid):
                lg = rm.local_log(tp)
                if lg is not None:
                    self.check_durability(tp, lg, broker.broker_id)
            history = leaders.get(tp)
            if history is None:
                leaders[tp] = [(now, broker.broker_id)]
            else:
                history.append((now, broker.broker_id))
        self._served(broker.broker_id, tps)
        self.leader_touched(broker, tps)
        for listener in self.leadership_listeners:
            listener(broker, tps)

    def became_follower(self, broker: SimBroker, tps: list[TopicPartition],
                        leos_before: dict[TopicPartition, int] | None = None) -> None:
        """A broker follows ``tps``; ``leos_before`` (``high_watermark`` mode) are its log end
        offsets before the LeaderAndIsr, to record truncations to the HW."""
        tracked = self._leader_hw.get(broker.broker_id, {})
        for tp in tps:
            tracked.pop(tp, None)
        self.suspect_all(tps)
        if leos_before and broker.rm is not None:
            now = self.cluster.loop.now
            for tp, before in leos_before.items():
                lg = broker.rm.local_log(tp)
                if lg is not None and lg.log_end_offset < before:
                    self._hw_truncations.setdefault((broker.broker_id, tp), []).append(
                        (now, before, int(lg.log_end_offset)))
        self._served(broker.broker_id, tps)
        for listener in self.leadership_listeners:
            listener(broker, tps)

    def broker_restarted(self, broker: SimBroker) -> None:
        self._leader_hw.pop(broker.broker_id, None)

    # ---- history for the loss causes -----------------------------------------------------------
    def power_failing(self, broker: SimBroker) -> None:
        """``broker`` is about to lose power: remember what each of its logs holds."""
        lm = broker.lm
        held = {} if lm is None else {TopicPartition(*tp): int(lg.log_end_offset)
                                      for tp, lg in lm.logs.items()}
        self._power_losses.setdefault(broker.broker_id, []).append(
            PowerLoss(self.cluster.loop.now, held))

    def broker_started(self, broker: SimBroker) -> None:
        """``broker`` started again (logs recovered): what a power failure left it."""
        losses = self._power_losses.get(broker.broker_id)
        if not losses or losses[-1].kept is not None or broker.lm is None:
            return
        kept = {TopicPartition(*tp): int(lg.log_end_offset) for tp, lg in broker.lm.logs.items()}
        losses[-1].kept = {tp: kept.get(tp, 0) for tp in losses[-1].held}

    def isr_changed(self, tp: TopicPartition, old: Iterable[int], new: Iterable[int]) -> None:
        """The controller committed an ISR change of ``tp``."""
        hist = self._isr_history.get(tp)
        if hist is None:
            hist = self._isr_history[tp] = ([_INT64_MIN], [tuple(old)])
        hist[0].append(self.cluster.loop.now)
        hist[1].append(tuple(new))

    def declared_dead(self, broker_id: int) -> None:
        """The controller declared ``broker_id`` dead."""
        self._dead_at.setdefault(broker_id, []).append(self.cluster.loop.now)

    def _served(self, broker_id: int, tps: Iterable[TopicPartition]) -> None:
        """``broker_id`` applied LeaderAndIsr for ``tps``: a power failure's time down ends."""
        losses = self._power_losses.get(broker_id)
        if not losses:
            return
        loss = losses[-1]
        if loss.kept is None:
            return
        now = self.cluster.loop.now
        for tp in tps:
            loss.back.setdefault(tp, now)

    def _isr_at(self, tp: TopicPartition, t: int) -> tuple[int, ...]:
        hist = self._isr_history.get(tp)
        if hist is None:
            return tuple(self.cluster.leader_and_isr(tp)[1])
        return hist[1][bisect_right(hist[0], t) - 1]

    def _sole_isr_member(self, tp: TopicPartition, broker_id: int, start: int, end: int) -> bool:
        """Was ``broker_id`` the only ISR member of ``tp`` at ``start``, or did it become so
        by ``end``?"""
        alone = (broker_id,)
        if self._isr_at(tp, start) == alone:
            return True
        hist = self._isr_history.get(tp)
        if hist is None:
            return False
        times, isrs = hist
        for k in range(bisect_right(times, start), bisect_right(times, end)):
            if isrs[k] == alone:
                return True
        return False

    def _kept_isr_place(self, broker_id: int, since: int) -> bool:
        """Pre-KIP-380: the controller never declared ``broker_id`` dead since ``since`` (its
        new process kept the previous one's leaderships and ISR places)."""
        return not self.cluster.detect_bounces and not any(
            t >= since for t in self._dead_at.get(broker_id, ()))

    def suspect(self, tp: TopicPartition) -> None:
        """Check ``tp``'s ISR agreement at the next periodic checks (for a while)."""
        suspects = self._suspects
        if tp not in suspects:
            self._suspect_order = None
        until = suspects[tp] = self.cluster.loop.now + self.suspect_ms
        if until < self._suspects_until_floor:
            self._suspects_until_floor = until

    def suspect_all(self, tps: Iterable[TopicPartition]) -> None:
        """:meth:`suspect` each of ``tps`` (they all get the same expiry)."""
        suspects = self._suspects
        before = len(suspects)
        until = self.cluster.loop.now + self.suspect_ms
        any_tp = False
        for tp in tps:
            suspects[tp] = until
            any_tp = True
        if len(suspects) != before:
            self._suspect_order = None  # a new suspect: the rotation order is rebuilt
        if any_tp and until < self._suspects_until_floor:
            self._suspects_until_floor = until

    # ---- durability --------------------------------------------------------------------------
    def check_durability(self, tp: TopicPartition, log: Any, broker_id: int) -> int:
        """Every acknowledged batch of ``tp`` still un-lost must be in ``log``; returns the
        number of batches newly found lost (counted and classified). A batch wholly below the
        log start offset was removed by retention (or DeleteRecords): expired, not lost."""
        cluster = self.cluster
        pid = cluster.tp_ids.get(tp)
        entries = self.ledger.entries.get(pid) if pid is not None else None
        if not entries:
            return 0
        self.checks["durability"] += 1
        headers, files, starts = self._batches(broker_id, tp, log)
        rows = headers.tolist()
        where = {r[_COL_BASE]: k for k, r in enumerate(rows)}
        leo = log.log_end_offset
        log_start = log.log_start_offset
        newly = 0
        for e in entries:
            if e[6]:
                continue
            base, count, digest = e[0], e[1], e[2]
            if base + count <= log_start:
                continue  # expired
            k = where.get(base)
            ok = False
            if k is not None and base + count <= leo:
                row = rows[k]
                if _int64(row[_COL_BASE] + row[_COL_DELTA]) == base + count - 1:
                    f = files[bisect_right(starts, k) - 1]
                    view = f.view(row[_COL_POS], row[_COL_SIZE])
                    try:
                        found = records_digest(view)
                    finally:
                        view.release()
                    ok = found == digest
                    if self._digests is not None:  # a full check asked to keep them
                        self._digests.setdefault((broker_id, tp), {})[k] = found
            if not ok:
                e[6] = 1
                newly += 1
                cause = self._classify(pid, tp, e, broker_id)  # type: ignore[arg-type]
                self.lost_records[cause] += count
                self.lost_batches[cause] += 1
                self.lost_by_acks[e[5]] = self.lost_by_acks.get(e[5], 0) + count
                self._note_loss(tp, pid, e, cause, broker_id)
                cluster.trace("lost", str(tp), f"offsets {base}..{base + count - 1}",
                              f"acks={e[5]}", f"cause={cause}", f"leader={broker_id}")
                if cause == "unexplained" and self.strict:
                    acks = "all" if e[5] == -1 else e[5]
                    self.fail("no_acked_record_lost",
                              f"{tp}: acknowledged (acks={acks}) offsets {base}..{base + count - 1}"
                              f" (records digest {digest:08x}) are not in the log of new leader "
                              f"{broker_id} (LEO {leo}): "
                              f"{_found_at(headers, files, starts, k, base)}")
        return newly

    def _classify(self, pid: int, tp: TopicPartition, entry: list[int], leader: int) -> str:
        """Why an acknowledged batch is gone from the log of new leader ``leader``: the first
        cause whose pattern the recorded history shows (see the module docstring) — including a
        leader whose disk was replaced after the ack with KIP-903's broker-epoch checks off —
        otherwise ``unexplained`` (a bug)."""
        cluster = self.cluster
        ack_ms = entry[3]
        if any(t >= ack_ms for t in cluster.unclean_elections.get(pid, ())):
            return "unclean_election"
        if self._power_failure_explains(tp, entry, leader) is not None:
            return "power_failure"
        if entry[5] == 1 and self._acks_1_explains(tp, entry, leader):
            return "acks_1"
        if cluster.truncation == "high_watermark" and self._hw_truncation_explains(
                tp, entry, leader):
            return "high_watermark_truncation"
        replaced = cluster.disk_replacements.get(leader, ())
        if any(t >= ack_ms for t in replaced) and not cluster.replica_config.isr_broker_epochs:
            # KIP-903 off: the leader lacking it lost its disk after the ack and got back into
            # the ISR on a fetch from its previous incarnation
            return "stale_replica_rejoined"
        return "unexplained"

    def _power_failure_explains(self, tp: TopicPartition, entry: list[int], leader: int
                                ) -> tuple[int, int] | None:
        """(broker, time) of a power failure that explains losing ``entry``: the broker held
        the batch, lost power after the ack, came back without it, and was or became while
        down the sole ISR member; or — pre-KIP-380 — it is the new leader, leading on its
        previous process's standing. None if no power failure explains it."""
        if not self._power_losses:
            return None
        ack_ms, end = entry[3], entry[0] + entry[1]
        now = self.cluster.loop.now
        for b in self.cluster.replicas_of(tp):
            for loss in self._power_losses.get(b, ()):
                if loss.at_ms < ack_ms or not loss.lost(tp, end):
                    continue
                if self._sole_isr_member(tp, b, loss.at_ms, loss.back.get(tp, now)):
                    return b, loss.at_ms
                if b == leader and self._kept_isr_place(b, loss.at_ms):
                    return b, loss.at_ms
        return None

    def _acks_1_explains(self, tp: TopicPartition, entry: list[int], leader: int) -> bool:
        """An acks=1 batch is lost when the leader that acknowledged it loses the leadership
        before a follower has it: the new leader lacking it is another broker, or — found on
        the acknowledging broker itself — another broker led the partition since that broker's
        tenure began (it acknowledged as a deposed leader, or was deposed after, and truncated
        the batch away following the new leader)."""
        acked_by = entry[7] if len(entry) > 7 else -1
        if acked_by < 0:
            return False
        if acked_by != leader:
            return True
        history = self._leaders.get(tp, ())
        began = max((t for t, b in history if b == acked_by and t <= entry[3]), default=None)
        if began is None:
            return False
        return any(t >= began and b != acked_by for t, b in history)

    def _hw_truncation_explains(self, tp: TopicPartition, entry: list[int], leader: int) -> bool:
        """KIP-101's pattern: the new leader held the batch and truncated it away (to its HW,
        becoming a follower) after the ack."""
        ack_ms, end = entry[3], entry[0] + entry[1]
        return any(t >= ack_ms and before >= end > after
                   for t, before, after in self._hw_truncations.get((leader, tp), ()))

    def _note_loss(self, tp: TopicPartition, pid: int, entry: list[int], cause: str,
                   leader: int) -> None:
        """Add a loss to :attr:`loss_events`, extending the previous event when it is the next
        offsets of the same partition found at the same moment for the same reason."""
        base, count = entry[0], entry[1]
        now = self.cluster.loop.now
        acks = "all" if entry[5] == -1 else str(entry[5])
        events = self.loss_events
        if events:
            last = events[-1]
            if (last["tp"] == str(tp) and last["found_ms"] == now and last["cause"] == cause
                    and last["new_leader"] == leader and last["acks"] == acks
                    and last["last_offset"] + 1 == base):
                last["last_offset"] = base + count - 1
                last["records"] += count
                last["batches"] += 1
                last["acked_ms"] = [min(last["acked_ms"][0], entry[3]),
                                    max(last["acked_ms"][1], entry[3])]
                return
        events.append({
            "tp": str(tp), "first_offset": base, "last_offset": base + count - 1,
            "records": count, "batches": 1, "acks": acks, "acked_ms": [entry[3], entry[3]],
            "found_ms": now, "cause": cause, "new_leader": leader,
            "fault": self._explaining_fault(cause, pid, tp, entry, leader)})

    def _explaining_fault(self, cause: str, pid: int, tp: TopicPartition, entry: list[int],
                          leader: int) -> str | None:
        """The injected fault behind a loss: the power failure that took the data, the fault
        before the unclean election, otherwise the latest fault on one of the partition's
        replicas since the acknowledgement (None when none was injected)."""
        cluster = self.cluster
        ack_ms = entry[3]
        replicas = cluster.replicas_of(tp)
        if cause == "power_failure":
            explained = self._power_failure_explains(tp, entry, leader)
            if explained is not None:
                found = cluster.fault_before(explained[1], [explained[0]], kinds=("crash",))
                if found is not None:
                    return found
        if cause == "unclean_election":
            elected = [t for t in cluster.unclean_elections.get(pid, ()) if t >= ack_ms]
            if elected:
                return cluster.fault_before(elected[0], replicas)
        return cluster.fault_before(cluster.loop.now, replicas)

    # ---- ISR agreement -----------------------------------------------------------------------
    def check_isr_agreement(self, tp: TopicPartition) -> bool:
        """Leader and ISR followers hold identical batches below the HW; False if diverged
        (counted; raises when strict)."""
        leading = self._leading(tp)
        return True if leading is None else self._agreement(tp, *leading)

    def _leading(self, tp: TopicPartition) -> tuple[int, Any] | None:
        """(leader id, its partition) when the controller's leader of ``tp`` is alive and
        leads it with a log; else None."""
        leader_id = self.cluster.leader_and_isr(tp)[0]
        leader = self.cluster.brokers.get(leader_id)
        if leader is None or not leader.alive or leader.rm is None:
            return None
        p = leader.rm.partition(tp)
        if p is None or not p.is_leader or p.log is None:
            return None
        return leader_id, p

    def _agreement(self, tp: TopicPartition, leader_id: int, p: Any) -> bool:
        """:meth:`check_isr_agreement` given the leader's partition."""
        hw = p.high_watermark
        if hw <= 0:
            return True
        self.checks["isr_agreement"] += 1
        lrows = self._batches(leader_id, tp, p.log)[0]
        if _kernels.check_rows(lrows, hw) != _NONE:  # (clean: _check_rows has nothing to say)
            self._check_rows(tp, leader_id, lrows, hw)
        ok = True
        cluster = self.cluster
        brokers = cluster.brokers
        check_follower = _kernels.check_follower  # check_rows, then agree_below, in one call
        for b in p.isr:
            if b == leader_id:
                continue
            follower = brokers.get(b)
            if follower is None or not follower.alive or follower.rm is None:
                continue
            lg = follower.rm.local_log(tp)
            if lg is None:
                continue
            leo = lg.log_end_offset
            limit = hw if hw <= leo else leo  # min(hw, leo)
            frows = self._batches(b, tp, lg)[0]
            found = check_follower(lrows, frows, limit)
            if found == _NONE:
                continue  # clean and in agreement
            if found != _DIVERGED:  # out of order or corrupt below the limit
                self._check_rows(tp, b, frows, limit)
            if found == _DIVERGED or not _kernels.agree_below(lrows, frows, limit,
                                                              _common_start(lrows, frows)):
                ok = False
                why = self._divergence_explained(tp, leader_id, b)
                if tp not in self.diverged:
                    self.diverged.add(tp)
                    cluster.trace("diverged", str(tp), f"leader={leader_id}", f"follower={b}",
                                  f"hw={hw}", f"explained by {why}" if why else "unexplained")
                if why is not None:
                    self.diverged_explained.setdefault(tp, why)
                elif self.strict and not (self._storage_explains(b, tp) or
                                          self._storage_explains(leader_id, tp)):
                    la, fa = _from_common_start(lrows, frows)
                    self.fail("isr_agree_below_hw",
                              f"{tp}: ISR follower {b} disagrees with leader {leader_id} below "
                              f"HW {hw}: " + describe_difference(_batches_below(la, limit),
                                                                 _batches_below(fa, limit)))
        return ok

    def _storage_explains(self, broker_id: int, tp: TopicPartition) -> bool:
        """An injected storage fault (sim/storage_faults.py) can explain a bad log here."""
        return self.cluster.storage_faults.explains(broker_id, tp)

    def _divergence_explained(self, tp: TopicPartition, leader: int, follower: int
                              ) -> str | None:
        """Pre-KIP-380 (``detect_bounces=False``) a power failure explains a divergence: the
        leader or the follower lost records of ``tp`` to a power failure and kept its ISR
        place (the controller never declared it dead since). None when nothing explains it."""
        if not self._power_losses or self.cluster.detect_bounces:
            return None
        for b in (leader, follower):
            for loss in self._power_losses.get(b, ()):
                held = loss.held.get(tp)
                if (held is not None and loss.kept is not None and loss.kept.get(tp, 0) < held
                        and self._kept_isr_place(b, loss.at_ms)):
                    return f"power_failure of broker {b}"
        return None

    def _check_rows(self, tp: TopicPartition, broker_id: int, headers: np.ndarray,
                    limit: int) -> None:
        """Offsets strictly increase along the log; no batch below ``limit`` fails its CRC."""
        k = _kernels.check_rows(headers, limit)
        if k == _NONE:
            return
        if self._storage_explains(broker_id, tp):
            return  # injected storage damage, loaded as Kafka loads it: not a product bug
        if k == _OUT_OF_ORDER:
            self.fail("offsets_increase", f"log of {tp} on broker {broker_id} has batches out of "
                                          f"order: {headers[:, _COL_BASE].tolist()}")
        self.fail("isr_agree_below_hw",
                  f"log of {tp} on broker {broker_id} has a corrupt batch below the HW "
                  f"{limit}: base offset {int(headers[k, _COL_BASE])} fails its CRC")

    # ---- sweeps ------------------------------------------------------------------------------
    def periodic(self) -> None:
        """Suspects whose leader HW moved since they were last checked (at most
        ``suspect_budget`` per call, in rotation), then a rotating sample of all partitions."""
        now = self.cluster.loop.now
        suspects = self._suspects
        if suspects:
            order = self._suspect_order
            if order is None:
                order = self._suspect_order = sorted(suspects)
            n = len(order)
            start = self._suspect_rotor % n
            budget = self.suspect_budget
            checked = self._checked
            k = 0
            while budget > 0 and k < n:
                tp = order[(start + k) % n]
                k += 1
                key = self._agreement_key(tp)
                if key is not None and key != checked.get(tp):
                    checked[tp] = key
                    self.check_isr_agreement(tp)
                    budget -= 1
            if self._suspects_until_floor <= now:
                earliest = self._suspects_until_floor = min(suspects.values())
                if earliest <= now:  # expired suspects leave (after their check)
                    for tp in [tp for tp, until in suspects.items() if until <= now]:
                        del suspects[tp]
                        checked.pop(tp, None)
                    self._suspect_order = [tp for tp in order if tp in suspects]
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
        self.full_check_scans()

    def full_check_scans(self, digests: ScanDigests | None = None
                         ) -> dict[tuple[int, TopicPartition], LogScan]:
        """:meth:`full_check`, returning the scans it made (:func:`scan_log` of each live
        replica's log, by (broker, partition)): what those logs hold until they next change.
        ``digests``, when given, receives the records digests the durability checks computed
        of the batches of those scans (by (broker, partition), then scan row), as true as the
        scans themselves until those logs change."""
        cluster = self.cluster
        self._scans = scans = {}
        self._digests = digests
        try:
            self._full_check(cluster)
        finally:
            self._scans = None
            self._digests = None
        return scans

    def _full_check(self, cluster: Cluster) -> None:
        scans = self._scans
        assert scans is not None
        check_rows = _kernels.check_rows
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
                # each (broker, partition) once: scanned here, read from the cache after
                scan = scans[(b, tp)] = scan_log(lg)
                headers = scan[0]
                if len(headers) and check_rows(headers, -1) != _NONE:
                    self._check_rows(tp, b, headers, -1)  # (no rows: nothing to find)
        for tp in cluster.tps:
            leading = self._leading(tp)
            if leading is not None:
                leader_id, p = leading
                self._agreement(tp, leader_id, p)
                self.check_durability(tp, p.log, leader_id)


__all__ = ["LOSS_CAUSES", "AckLedger", "InvariantChecker", "InvariantViolation", "LogScan",
           "ScanDigests", "log_batches", "records_digest", "scan_log"]
