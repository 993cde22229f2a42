"""The invariant checker's computations against brute-force references: the ``_invariants``
row kernels (native and twin) against the numpy expressions they replace, the checker's ISR
agreement / offset order / CRC / durability checks on randomised logs with planted divergence,
corruption and disorder against a plain re-implementation over ``iter_batches``, and the
periodic suspect rotation against the plain sorted-every-call loop."""
from __future__ import annotations

import random
from itertools import pairwise

import numpy as np
import pytest
from conftest import load_kernel

from replica_core.clock import ManualClock
from replica_core.records import build_batch, iter_batches
from replica_core.records.batch import kernels as batch_kernels
from replica_core.replication.messages import TopicPartition
from replica_core.sim.invariants import (
    InvariantChecker,
    InvariantViolation,
    log_batches,
    records_digest,
    scan_log,
)
from replica_core.storage.config import LogConfig
from replica_core.storage.log_manager import LogManager
from replica_core.storage.medium import MemoryMedium

NCOLS = batch_kernels.NCOLS
BASE = batch_kernels.COL_BASE_OFFSET
DELTA = batch_kernels.COL_LAST_OFFSET_DELTA
CRC = batch_kernels.COL_CRC
CRC_OK = batch_kernels.COL_CRC_OK
I64 = np.iinfo(np.int64)


# ---- the row kernels -------------------------------------------------------------------------
def kernels(impl: str):
    return load_kernel("_invariants", "invariants_py", impl)


def ref_check_rows(h: np.ndarray, limit: int) -> int:
    """The numpy checks the kernel replaces: order first, then the first corrupt row."""
    base, last = h[:, BASE], h[:, BASE] + h[:, DELTA]
    if len(h) > 1 and np.any(base[1:] <= last[:-1]):
        return -2
    bad = np.flatnonzero((last < limit) & (h[:, CRC_OK] != 1))
    return int(bad[0]) if len(bad) else -1


def ref_agree_below(a: np.ndarray, b: np.ndarray, limit: int, start: int = int(I64.min)) -> bool:
    def below(h):
        last = h[:, BASE] + h[:, DELTA]
        return np.stack([h[:, BASE], last, h[:, CRC]], axis=1)[(last < limit)
                                                                & (h[:, BASE] >= start)]
    x, y = below(a), below(b)
    return x.shape == y.shape and np.array_equal(x, y)


def random_headers(rng: random.Random, n: int | None = None) -> np.ndarray:
    n = rng.randint(0, 8) if n is None else n
    h = np.zeros((n, NCOLS), dtype=np.int64)
    offset = rng.choice([0, rng.randint(0, 1000), int(I64.max) - 20, int(I64.min) + 5])
    for i in range(n):
        delta = rng.choice([0, rng.randint(0, 5), rng.randint(-3, -1), 2**31 - 1])
        h[i, BASE] = offset
        h[i, DELTA] = delta
        h[i, CRC] = rng.choice([7, 9, rng.randint(0, 2**32 - 1)])
        h[i, CRC_OK] = rng.choice([1, 1, 1, 0, -1])
        step = rng.choice([delta + 1, delta + 1, 1, 0, -2, rng.randint(-5, 50)])
        offset = (offset + step + 2**63) % 2**64 - 2**63
    return h


def perturb(rng: random.Random, h: np.ndarray) -> np.ndarray:
    """A copy of ``h``, cut or extended, and sometimes one cell changed."""
    g = h[: rng.randint(0, len(h))] if rng.random() < 0.3 else h.copy()
    if rng.random() < 0.3:
        g = np.concatenate([g, random_headers(rng, rng.randint(1, 3))])
    if len(g) and rng.random() < 0.5:
        g[rng.randrange(len(g)), rng.choice([BASE, DELTA, CRC, CRC_OK])] += rng.choice([-1, 1])
    return np.ascontiguousarray(g)


def limits(rng: random.Random, h: np.ndarray) -> list[int]:
    out = [int(I64.min), -1, 0, int(I64.max), rng.randint(-10, 1100)]
    if len(h):
        i = rng.randrange(len(h))
        last = (int(h[i, BASE]) + int(h[i, DELTA]) + 2**63) % 2**64 - 2**63
        out += [last, last + 1]
    return [v for v in out if I64.min <= v <= I64.max]


def starts(rng: random.Random, a: np.ndarray, b: np.ndarray) -> list[int]:
    """Start offsets for agree_below: past everything, the later first base offset of the two
    (as the checker passes it) and a random batch's base offset and the next."""
    out = [int(I64.max)]
    if len(a) and len(b):
        out.append(max(int(a[0, BASE]), int(b[0, BASE])))
    if len(a):
        base = int(a[rng.randrange(len(a)), BASE])
        out += [base, base + 1]
    return [v for v in out if I64.min <= v <= I64.max]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_row_kernels_match_the_numpy_reference(kernel_impl):
    k = kernels(kernel_impl)
    rng = random.Random(20240611)
    for _ in range(3000):
        a = random_headers(rng)
        b = perturb(rng, a)
        lims = limits(rng, a)
        for limit in lims:
            assert k.check_rows(a, limit) == ref_check_rows(a, limit), (a, limit)
            assert k.agree_below(a, b, limit) == ref_agree_below(a, b, limit), (a, b, limit)
            assert k.agree_below(b, a, limit) == ref_agree_below(b, a, limit), (a, b, limit)
        for start in starts(rng, a, b):
            limit = rng.choice(lims)
            assert (k.agree_below(a, b, limit, start)
                    == ref_agree_below(a, b, limit, start)), (a, b, limit, start)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_row_kernels_native_and_twin_agree():
    native, twin = kernels("native"), kernels("twin")
    assert (native.OUT_OF_ORDER, native.NONE) == (twin.OUT_OF_ORDER, twin.NONE) == (-2, -1)
    rng = random.Random(7)
    for _ in range(2000):
        a = random_headers(rng)
        b = perturb(rng, a)
        lims = limits(rng, a)
        for limit in lims:
            assert native.check_rows(a, limit) == twin.check_rows(a, limit)
            assert native.agree_below(a, b, limit) == twin.agree_below(a, b, limit)
        for start in starts(rng, a, b):
            limit = rng.choice(lims)
            assert native.agree_below(a, b, limit, start) == twin.agree_below(a, b, limit, start)


def ref_check_follower(a: np.ndarray, b: np.ndarray, limit: int) -> int:
    """What the checker did before the one-call kernel: the follower's order and CRC verdicts,
    then agreement from the later of the two first base offsets."""
    found = ref_check_rows(b, limit)
    if found != -1:
        return found
    start = max(int(a[0, BASE]), int(b[0, BASE])) if len(a) and len(b) else int(I64.min)
    return -1 if ref_agree_below(a, b, limit, start) else -3


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_check_follower_is_check_rows_then_agree_below(kernel_impl):
    k = kernels(kernel_impl)
    assert k.DIVERGED == -3
    rng = random.Random(515)
    seen = set()
    for _ in range(3000):
        a = random_headers(rng)
        b = perturb(rng, a)
        for limit in limits(rng, a):
            got = k.check_follower(a, b, limit)
            assert got == ref_check_follower(a, b, limit), (a, b, limit)
            seen.add(got if got < 0 else "index")
    assert seen == {-3, -2, -1, "index"}  # every verdict came up


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_check_follower_native_and_twin_agree():
    native, twin = kernels("native"), kernels("twin")
    rng = random.Random(516)
    for _ in range(2000):
        a = random_headers(rng)
        b = perturb(rng, a)
        for limit in limits(rng, a):
            assert native.check_follower(a, b, limit) == twin.check_follower(a, b, limit)


@pytest.mark.parametrize("bad", [np.zeros((2, NCOLS), dtype=np.int32),
                                 np.zeros((2, NCOLS + 1), dtype=np.int64),
                                 np.zeros(NCOLS, dtype=np.int64),
                                 np.zeros((NCOLS, 4), dtype=np.int64).T])
def test_row_kernels_reject_other_arrays(kernel_impl, bad):
    k = kernels(kernel_impl)
    ok = np.zeros((1, NCOLS), dtype=np.int64)
    with pytest.raises(ValueError):
        k.check_rows(bad, 0)
    with pytest.raises(ValueError):
        k.agree_below(ok, bad, 0)
    with pytest.raises(ValueError):
        k.check_follower(ok, bad, 0)
    with pytest.raises(ValueError):
        k.check_follower(bad, ok, 0)


# ---- a cluster of fakes: just what the checker reads ---------------------------------------
class FakeFile:
    def __init__(self, data: bytes) -> None:
        self.buf = bytearray(data)

    def view(self, position: int = 0, n: int = -1) -> memoryview:
        end = len(self.buf) if n < 0 else min(len(self.buf), position + n)
        return memoryview(self.buf)[position:max(position, end)].toreadonly()


class FakeSegment:
    def __init__(self, data: bytes) -> None:
        self.log_file = FakeFile(data)
        self.size = len(data)


class FakeSegments(list):
    """The part of LogSegments the checker reads: length, iteration, the last segment."""

    @property
    def last(self) -> FakeSegment | None:
        return self[-1] if self else None


class FakeLog:
    def __init__(self, batches: list[bytes], cuts: list[int], leo: int, *,
                 log_start_offset: int = 0, expired: list[bytes] | None = None) -> None:
        edges = [0, *cuts, len(batches)]
        self.segments = FakeSegments(FakeSegment(b"".join(batches[lo:hi]))
                                     for lo, hi in pairwise(edges))
        self.log_end_offset = leo
        self.high_watermark = 0
        self.log_start_offset = log_start_offset
        self.expired = expired or []   # batches retention removed (below the log start)
        self.segments_made = True


class FakePartition:
    def __init__(self, tp, log, *, leader: bool, hw: int, isr: list[int], epoch: int = 3) -> None:
        self.tp, self.log, self.is_leader = tp, log, leader
        self.high_watermark, self.isr, self.leader_epoch = hw, isr, epoch


class FakeRM:
    def __init__(self) -> None:
        self.parts: dict = {}

    def partition(self, tp):
        return self.parts.get(tp)

    def leader_state(self, tp):
        p = self.parts.get(tp)
        if p is None or not p.is_leader or p.log is None:
            return None
        return p.leader_epoch, p.high_watermark, p.log.log_end_offset

    def local_log(self, tp):
        p = self.parts.get(tp)
        return p.log if p is not None else None

    def partitions(self) -> dict:
        return dict(self.parts)


class FakeBroker:
    def __init__(self, broker_id: int) -> None:
        self.broker_id, self.alive, self.rm = broker_id, True, FakeRM()


class FakeLoop:
    now = 1_000
    start_ms = 0
    elapsed_ms = 1_000


class NoStorageFaults:
    """No storage fault is injected into the fakes: none explains anything."""

    def explains(self, broker_id, tp) -> bool:
        return False


class FakeCluster:
    def __init__(self, n_brokers: int) -> None:
        self.seed = 99
        self.loop = FakeLoop()
        self.brokers = {b: FakeBroker(b) for b in range(1, n_brokers + 1)}
        self.tps: list[TopicPartition] = []
        self.tp_ids: dict[TopicPartition, int] = {}
        self.regs: dict[TopicPartition, tuple[int, tuple[int, ...], tuple[int, ...]]] = {}
        self.unclean_elections: dict = {}
        self.power_failures: dict = {}
        self.truncation = "leader_epoch"
        self.traced: list[tuple] = []
        self.disk_replacements: dict[int, tuple[int, ...]] = {}  # no disk is replaced here
        self.storage_faults = NoStorageFaults()

    def leader_and_isr(self, tp):
        reg = self.regs.get(tp)
        return (reg[0], reg[1]) if reg is not None else (-1, ())

    def replicas_of(self, tp):
        reg = self.regs.get(tp)
        return reg[2] if reg is not None else ()

    def trace(self, kind, *args) -> None:
        self.traced.append((kind, args))

    def fault_before(self, at_ms, brokers, *, kinds=None):
        return None  # no faults are injected into the fakes


def make_batch(rng: random.Random, base: int) -> bytes:
    values = [bytes([rng.randrange(4)]) * rng.randint(1, 3) for _ in range(rng.randint(1, 3))]
    return build_batch(values, base_offset=base, now_ms=1)


def corrupt(batch: bytes, rng: random.Random) -> bytes:
    b = bytearray(batch)
    b[rng.randrange(61, len(b))] ^= 0x40  # a records byte: the framing stays, the CRC fails
    return bytes(b)


def random_cluster(rng: random.Random, n_tps: int = 4) -> FakeCluster:
    """Partitions on brokers 1-3 with random logs: followers copy the leader's batches up to a
    point, then some carry a planted divergence, corruption, disorder or an extra tail."""
    c = FakeCluster(3)
    for pid in range(n_tps):
        tp = TopicPartition("t", pid)
        c.tps.append(tp)
        c.tp_ids[tp] = pid
        leader = rng.randint(1, 3)
        followers = [b for b in (1, 2, 3) if b != leader]
        batches, offset = [], 0
        for _ in range(rng.randint(0, 6)):
            batches.append(make_batch(rng, offset))
            offset = next(iter_batches(batches[-1])).last_offset + 1
        if batches and rng.random() < 0.1:
            i = rng.randrange(len(batches))
            batches[i] = corrupt(batches[i], rng)
        if len(batches) > 1 and rng.random() < 0.05:
            batches[0], batches[1] = batches[1], batches[0]
        leo = offset
        hw = rng.choice([0, leo, leo, rng.randint(0, leo + 1), leo + (rng.random() < 0.05)])
        isr = sorted([leader] + [b for b in followers if rng.random() < 0.8])
        logs = {leader: FakeLog(batches, sorted(rng.sample(range(1, len(batches) + 1),
                                                         min(len(batches), rng.randint(0, 2)))),
                                leo)}
        for b in followers:
            mine = list(batches[: rng.randint(0, len(batches))] if rng.random() < 0.4 else batches)
            end = next(iter_batches(mine[-1])).last_offset + 1 if mine else 0
            r = rng.random()
            if mine and r < 0.25:  # divergence: other records at the same offsets
                i = rng.randrange(len(mine))
                base = next(iter_batches(mine[i])).base_offset
                mine[i] = make_batch(rng, base)
                end = max(end, next(iter_batches(mine[i])).last_offset + 1)
            elif mine and r < 0.35:
                i = rng.randrange(len(mine))
                mine[i] = corrupt(mine[i], rng)
            elif len(mine) > 1 and r < 0.4:
                mine[-1], mine[-2] = mine[-2], mine[-1]
            elif r < 0.5:
                mine.append(make_batch(rng, end))
                end = next(iter_batches(mine[-1])).last_offset + 1
            logs[b] = FakeLog(mine, [1] if len(mine) > 1 and rng.random() < 0.3 else [],
                              max(0, end - (rng.random() < 0.1)))
        if batches and rng.random() < 0.15:  # retention removed the leader's oldest batches
            k = rng.randint(1, len(batches))
            start = next(iter_batches(batches[k])).base_offset if k < len(batches) else leo
            logs[leader] = FakeLog(batches[k:], [], leo, log_start_offset=start,
                                   expired=batches[:k])
        for b, lg in logs.items():
            if b != leader and rng.random() < 0.05:
                continue  # the follower has no log for it
            c.brokers[b].rm.parts[tp] = FakePartition(
                tp, lg, leader=b == leader, hw=hw if b == leader else min(hw, lg.log_end_offset),
                isr=isr)
        c.regs[tp] = (leader if rng.random() < 0.95 else 0, tuple(isr), (1, 2, 3))
    if rng.random() < 0.15:
        dead = c.brokers[rng.randint(1, 3)]
        if rng.random() < 0.5:
            dead.alive = False
        else:
            dead.rm = None
    return c


def add_ledger(rng: random.Random, checker: InvariantChecker, c: FakeCluster) -> None:
    """Acknowledge the leaders' batches (some with a wrong digest or a wrong count) and a few
    that were never written; each acknowledged by the current leader, another broker or an
    unknown one (acks=1 losses are explained only when another broker acknowledged them)."""
    for tp in c.tps:
        pid = c.tp_ids[tp]
        broker = c.brokers.get(c.regs[tp][0])
        lg = broker.rm.local_log(tp) if broker is not None and broker.rm is not None else None
        batches = []
        if lg is not None:
            batches += lg.expired
            for seg in lg.segments:
                batches += [bytes(b.buffer) for b in iter_batches(seg.log_file.view(0, seg.size))]
        for raw in batches:
            b = next(iter_batches(raw))
            count = b.last_offset - b.base_offset + 1 + (rng.random() < 0.05)
            digest = records_digest(raw) ^ (rng.random() < 0.05)
            checker.ledger.record(pid, b.base_offset, count, digest, acks=rng.choice([-1, 1]),
                                  isr_size=2, ack_ms=0, leader=rng.choice([-1, 1, 2, 3]))
        if rng.random() < 0.1:
            checker.ledger.record(pid, 10_000, 2, 5, acks=1, isr_size=2, ack_ms=0,
                                  leader=rng.choice([-1, 1, 2, 3]))


# ---- the brute-force reference ----------------------------------------------------------------
class RefViolation(Exception):
    def __init__(self, invariant: str, detail: str) -> None:
        super().__init__(invariant, detail)
        self.invariant, self.detail = invariant, detail


def ref_batches(log) -> list[dict]:
    """Every batch of ``log`` by ``iter_batches`` (no scan kernel): offsets, CRC, validity and
    its bytes."""
    out = []
    for seg in log.segments:
        if seg.size <= 0:
            continue
        for b in iter_batches(seg.log_file.view(0, seg.size)):
            last = (b.base_offset + b.last_offset_delta + 2**63) % 2**64 - 2**63
            out.append({"base": b.base_offset, "last": last, "crc": b.crc, "ok": b.is_valid(),
                        "raw": bytes(b.buffer)})
    return out


class Reference:
    """The invariants as stated, over :func:`ref_batches` (the checker before the kernels)."""

    def __init__(self, c: FakeCluster, checker: InvariantChecker, strict: bool) -> None:
        self.c, self.strict = c, strict
        self.ledger = {pid: [list(e) for e in es] for pid, es in checker.ledger.entries.items()}
        self.diverged: set = set()
        self.lost: dict[str, int] = {}
        self.checks = {"isr_agreement": 0, "durability": 0}

    def rows(self, tp, broker_id: int, batches: list[dict], limit: int) -> None:
        bases = [b["base"] for b in batches]
        if any(b["base"] <= a["last"] for a, b in pairwise(batches)):
            raise RefViolation("offsets_increase", f"log of {tp} on broker {broker_id} has "
                                                   f"batches out of order: {bases}")
        for b in batches:
            if b["last"] < limit and not b["ok"]:
                raise RefViolation("isr_agree_below_hw",
                                   f"log of {tp} on broker {broker_id} has a corrupt batch below "
                                   f"the HW {limit}: base offset {b['base']} fails its CRC")

    def leading(self, tp):
        leader_id = self.c.leader_and_isr(tp)[0]
        leader = self.c.brokers.get(leader_id)
        if leader is None or not leader.alive or leader.rm is None:
            return None
        p = leader.rm.partition(tp)
        if p is None or not p.is_leader or p.log is None:
            return None
        return leader_id, p

    def agreement(self, tp) -> bool:
        leading = self.leading(tp)
        if leading is None or leading[1].high_watermark <= 0:
            return True
        leader_id, p = leading
        hw = p.high_watermark
        self.checks["isr_agreement"] += 1
        mine = ref_batches(p.log)
        self.rows(tp, leader_id, mine, hw)
        ok = True
        for b in p.isr:
            follower = self.c.brokers.get(b)
            if b == leader_id or follower is None or not follower.alive or follower.rm is None:
                continue
            lg = follower.rm.local_log(tp)
            if lg is None:
                continue
            limit = min(hw, lg.log_end_offset)
            theirs = ref_batches(lg)
            self.rows(tp, b, theirs, limit)
            # only what both still hold: from the later of the two first base offsets
            start = max(mine[0]["base"], theirs[0]["base"]) if mine and theirs else 0
            a = [[x["base"], x["last"], x["crc"]] for x in mine
                 if x["last"] < limit and x["base"] >= start]
            z = [[x["base"], x["last"], x["crc"]] for x in theirs
                 if x["last"] < limit and x["base"] >= start]
            if a != z:
                ok = False
                self.diverged.add(tp)
                if self.strict:
                    raise RefViolation("isr_agree_below_hw",
                                       f"{tp}: ISR follower {b} disagrees with leader {leader_id} "
                                       f"below HW {hw}: {ref_difference(a, z)}")
        return ok

    def durability(self, tp, log, broker_id: int) -> int:
        entries = self.ledger.get(self.c.tp_ids[tp])
        if not entries:
            return 0
        self.checks["durability"] += 1
        where = {b["base"]: b for b in ref_batches(log)}
        newly = 0
        for e in entries:
            if e[6]:
                continue
            base, count, digest = e[0], e[1], e[2]
            if base + count <= log.log_start_offset:
                continue  # expired by retention
            b = where.get(base)
            if not (b is not None and base + count <= log.log_end_offset
                    and b["last"] == base + count - 1 and records_digest(b["raw"]) == digest):
                e[6] = 1
                newly += 1
                # acks=1: explained only when the broker that acknowledged it is known and is
                # not the new leader (it was lost before it was replicated)
                cause = "acks_1" if e[5] == 1 and e[7] not in (-1, broker_id) else "unexplained"
                self.lost[cause] = self.lost.get(cause, 0) + count
                if cause == "unexplained" and self.strict:
                    found = (f"no batch of it starts at offset {base}" if b is None else
                             f"it holds batch {b['base']}..{b['last']} crc "
                             f"{b['crc'] & 0xFFFFFFFF:08x} (records digest "
                             f"{records_digest(b['raw']):08x}) there")
                    raise RefViolation("no_acked_record_lost",
                                       f"{tp}: acknowledged (acks={'all' if e[5] == -1 else 1}) "
                                       f"offsets {base}..{base + count - 1} (records digest "
                                       f"{digest:08x}) are not in the log of new leader "
                                       f"{broker_id} (LEO {log.log_end_offset}): {found}")
        return newly

    def full_check(self) -> None:
        for b in sorted(self.c.brokers):
            broker = self.c.brokers[b]
            if not broker.alive or broker.rm is None:
                continue
            for tp, p in sorted(broker.rm.partitions().items()):
                lg = p.log
                if p.high_watermark > lg.log_end_offset:
                    raise RefViolation("hw_le_leo", f"broker {b} {tp}: HW {p.high_watermark} > "
                                                    f"LEO {lg.log_end_offset}")
                self.rows(tp, b, ref_batches(lg), -1)
        for tp in self.c.tps:
            leading = self.leading(tp)
            if leading is not None:
                self.agreement(tp)
                self.durability(tp, leading[1].log, leading[0])


def ref_difference(a: list[list[int]], z: list[list[int]]) -> str:
    """The checker's description of two replicas' differing batches, built separately: the
    first index where they differ and up to five batches from the one before it, each as
    ``base..last crc xxxxxxxx``."""
    same = 0
    for x, y in zip(a, z, strict=False):
        if x != y:
            break
        same += 1
    start = max(0, same - 1)

    def show(rows: list[list[int]]) -> str:
        text = ", ".join(f"{r[0]}..{r[1]} crc {r[2] & 0xFFFFFFFF:08x}"
                         for r in rows[start:same + 4])
        return "[" + text + (" ..." if len(rows) > same + 4 else "") + "]"

    return (f"first difference at batch #{same}: leader batches #{start}.. {show(a)} vs "
            f"follower {show(z)}")


def outcome(f, *args):
    try:
        return ("ok", f(*args))
    except (InvariantViolation, RefViolation) as e:
        return ("violation", e.invariant, e.detail)


def state(x) -> tuple:
    lost = {k: v for k, v in (x.lost if isinstance(x, Reference) else x.lost_records).items() if v}
    return (sorted(x.diverged), lost, {k: x.checks[k] for k in ("isr_agreement", "durability")})


@pytest.mark.parametrize("strict", [True, False])
def test_checker_flags_what_the_reference_flags(strict):
    rng = random.Random(1234 + strict)
    seen = set()
    for _ in range(400):
        c = random_cluster(rng)
        checker = InvariantChecker(c, strict=strict)  # type: ignore[arg-type]
        add_ledger(rng, checker, c)
        ref = Reference(c, checker, strict)
        got, want = outcome(checker.full_check), outcome(ref.full_check)
        assert got == want
        assert state(checker) == state(ref)
        seen.add(got[1] if got[0] == "violation" else "ok")
        for tp in c.tps:  # the periodic entry point, one partition at a time
            got, want = outcome(checker.check_isr_agreement, tp), outcome(ref.agreement, tp)
            assert got == want
            assert state(checker) == state(ref)
    # the planted faults were met: every kind of verdict came up
    assert {"ok", "offsets_increase", "isr_agree_below_hw", "hw_le_leo"} <= seen
    if strict:
        assert "no_acked_record_lost" in seen


def test_log_scan_and_log_batches_match_iter_batches():
    rng = random.Random(5)
    for _ in range(100):
        c = random_cluster(rng, 2)
        for broker in c.brokers.values():
            for p in (broker.rm.parts.values() if broker.rm else ()):
                want = ref_batches(p.log)
                headers, files, starts = scan_log(p.log)
                assert headers[:, BASE].tolist() == [b["base"] for b in want]
                rows, files2 = log_batches(p.log)
                assert files2 == files
                assert rows[:, :4].tolist() == [[b["base"], b["last"], b["crc"], int(b["ok"])]
                                                for b in want]
                for (k, pos, size), b in zip(rows[:, 4:].tolist(), want, strict=True):
                    assert bytes(files[k].view(pos, size)) == b["raw"]
                assert starts == sorted(starts) and len(starts) == len(files)


def test_log_scan_of_a_new_log_leaves_its_segment_unmade():
    """A log just created (its one empty segment not built yet) scans as no batches without
    being built; once written, its batches are found."""
    medium = MemoryMedium()
    medium.makedirs("/d")
    lm = LogManager(["/d"], LogConfig.from_properties({"segment.index.bytes": 4096}),
                    medium=medium, clock=ManualClock(1_700_000_000_000))
    lm.startup()
    lg = lm.create_log("t", 0)
    assert not lg.segments_made
    headers, files, starts = scan_log(lg)
    assert (len(headers), files, starts) == (0, [], [])
    assert not lg.segments_made  # the scan did not build it
    lg.append_as_leader(build_batch([b"a", b"b"]), leader_epoch=0)
    assert lg.segments_made
    headers, files, starts = scan_log(lg)
    assert headers[:, BASE].tolist() == [0] and len(files) == 1 and starts == [0]
    assert (headers[0, DELTA], headers[0, CRC_OK]) == (1, 1)
    lm.shutdown()


# ---- the periodic rotation ------------------------------------------------------------------
def ref_periodic(st: dict, suspects: dict, checked: dict, now: int, keys: dict, tps: list,
                 sample: int, budget_max: int, calls: list) -> None:
    """The periodic sweep as first written: sort the suspects every call, check in rotation
    those whose key moved (within the budget), drop the expired, then sample in rotation."""
    if suspects:
        order = sorted(suspects)
        n = len(order)
        start = st["suspect_rotor"] % n
        budget = budget_max
        for k in range(n):
            tp = order[(start + k) % n]
            if budget > 0:
                key = keys.get(tp)
                if key is not None and key != checked.get(tp):
                    checked[tp] = key
                    calls.append(tp)
                    budget -= 1
            if suspects[tp] <= now:
                del suspects[tp]
                checked.pop(tp, None)
        st["suspect_rotor"] = start + (budget_max - budget)
    if tps and sample > 0:
        n = min(sample, len(tps))
        for k in range(n):
            calls.append(tps[(st["rotor"] + k) % len(tps)])
        st["rotor"] = (st["rotor"] + n) % len(tps)


@pytest.mark.parametrize("seed", range(6))
def test_periodic_checks_the_same_partitions_in_the_same_order(seed):
    rng = random.Random(seed)
    c = FakeCluster(3)
    c.tps = [TopicPartition(rng.choice("abc"), i) for i in range(40)]
    budget, sample = rng.choice([0, 3, 10]), rng.choice([0, 2, 5])
    checker = InvariantChecker(c, strict=True, suspect_ms=rng.choice([500, 3000]),  # type: ignore[arg-type]
                               suspect_budget=budget, sample_per_check=sample)
    keys: dict = {}
    calls: list = []
    checker._agreement_key = keys.get  # type: ignore[method-assign]
    checker.check_isr_agreement = calls.append  # type: ignore[method-assign,assignment]
    ref_st, ref_suspects, ref_checked, ref_calls = {"suspect_rotor": 0, "rotor": 0}, {}, {}, []
    for _ in range(150):
        for _ in range(rng.choice([0, 0, 1, 5])):
            tp = rng.choice(c.tps)
            checker.suspect(tp)
            ref_suspects[tp] = c.loop.now + checker.suspect_ms
        for tp in rng.sample(c.tps, rng.randint(0, 8)):
            keys[tp] = rng.choice([None, (1, 1, rng.randint(0, 3))])
        c.loop.now += rng.choice([100, 1000])
        checker.periodic()
        ref_periodic(ref_st, ref_suspects, ref_checked, c.loop.now, keys, c.tps, sample, budget,
                     ref_calls)
        assert calls == ref_calls
        assert checker._suspects == ref_suspects and checker._checked == ref_checked
        assert (checker._suspect_rotor, checker._rotor) == (ref_st["suspect_rotor"],
                                                            ref_st["rotor"])


@pytest.mark.parametrize("seed", range(4))
def test_periodic_drops_expired_suspects_as_the_plain_loop_does(seed):
    """Suspect windows of changing length (a re-suspected partition can expire earlier than
    one suspected before it) and many steps with nothing expiring: the suspects dropped, the
    checks made and the rotation stay those of the plain loop that looks at every expiry."""
    rng = random.Random(100 + seed)
    c = FakeCluster(3)
    c.tps = [TopicPartition("t", i) for i in range(30)]
    checker = InvariantChecker(c, strict=True, suspect_budget=4,  # type: ignore[arg-type]
                               sample_per_check=1)
    keys: dict = {}
    calls: list = []
    checker._agreement_key = keys.get  # type: ignore[method-assign]
    checker.check_isr_agreement = calls.append  # type: ignore[method-assign,assignment]
    ref_st, ref_suspects, ref_checked, ref_calls = {"suspect_rotor": 0, "rotor": 0}, {}, {}, []
    dropped = 0
    for _ in range(300):
        checker.suspect_ms = rng.choice([50, 400, 5000, 20_000])
        for _ in range(rng.choice([0, 0, 0, 1, 3])):
            tp = rng.choice(c.tps)
            checker.suspect(tp)
            ref_suspects[tp] = c.loop.now + checker.suspect_ms
        for tp in rng.sample(c.tps, rng.randint(0, 5)):
            keys[tp] = rng.choice([None, (1, 1, rng.randint(0, 3))])
        c.loop.now += rng.choice([10, 100, 1000])
        before = len(ref_suspects)
        checker.periodic()
        ref_periodic(ref_st, ref_suspects, ref_checked, c.loop.now, keys, c.tps, 1, 4,
                     ref_calls)
        dropped += before - len(ref_suspects)
        assert calls == ref_calls
        assert checker._suspects == ref_suspects and checker._checked == ref_checked
        assert (checker._suspect_rotor, checker._rotor) == (ref_st["suspect_rotor"],
                                                            ref_st["rotor"])
    assert dropped > 0 and ref_suspects  # expiries happened, and suspects were still held


# ---- the loss causes as checked claims: each accepted only when its pattern is in the history --
class FakeLM:
    def __init__(self, leos: dict) -> None:
        self.logs = {tp: FakeLog([], [], leo) for tp, leo in leos.items()}


TP0 = TopicPartition("t", 0)


def one_batch_world(*, truncation: str = "leader_epoch", detect_bounces: bool = True):
    """Replicas (1, 2, 3) of t-0, ISR (1, 2, 3); a batch of offsets 0..4 acknowledged at t=100
    (written by the caller); broker 2 will lead with an empty log."""
    c = FakeCluster(3)
    c.loop = FakeLoop()
    c.loop.now = 0
    c.truncation = truncation
    c.detect_bounces = detect_bounces
    c.tps, c.tp_ids = [TP0], {TP0: 0}
    c.regs[TP0] = (1, (1, 2, 3), (1, 2, 3))
    raw = build_batch([b"a", b"b", b"c", b"d", b"e"], base_offset=0, now_ms=1)
    checker = InvariantChecker(c, strict=False)  # type: ignore[arg-type]
    return c, checker, raw


def at(c, ms: int) -> None:
    c.loop.now = ms


def ack(checker, raw: bytes, *, acks: int = -1, leader: int = 1, ack_ms: int = 100) -> None:
    checker.ledger.record(0, 0, 5, records_digest(raw), acks=acks, isr_size=3, ack_ms=ack_ms,
                          leader=leader)


def power_cycle(c, checker, broker: int, *, fail_ms: int, held: int, kept: int) -> None:
    """``broker`` loses power at ``fail_ms`` holding ``held`` offsets, restarts with ``kept``."""
    at(c, fail_ms)
    c.brokers[broker].lm = FakeLM({TP0: held})
    checker.power_failing(c.brokers[broker])
    c.power_failures.setdefault(broker, []).append(fail_ms)
    at(c, fail_ms + 50)
    c.brokers[broker].lm = FakeLM({TP0: kept})
    checker.broker_started(c.brokers[broker])


def lost_to(c, checker, leader: int = 2, at_ms: int = 1_000) -> str:
    """The new leader ``leader`` (an empty log) is checked: the cause of the one loss."""
    at(c, at_ms)
    assert checker.check_durability(TP0, FakeLog([], [], 0), leader) == 1
    (cause,) = [k for k, v in checker.lost_batches.items() if v]
    assert checker.loss_events[-1]["cause"] == cause
    return cause


@pytest.mark.parametrize("story,want", [
    ("alone_before_while_down", "power_failure"),   # ISR shrank to (2,) while 2 was down
    ("alone_at_the_failure", "power_failure"),      # 2 was already the only ISR member
    ("never_alone", "unexplained"),                 # 3 kept an ISR place: it still had it
    ("alone_after_back", "unexplained"),            # alone only once it served again
    ("flushed", "unexplained"),                     # its copy survived the power failure
    ("failed_before_ack", "unexplained"),           # it lost power before the ack
    ("never_held", "unexplained"),                  # it did not hold the batch when it failed
])
def test_power_failure_claim(story, want):
    c, checker, raw = one_batch_world()
    if story == "alone_at_the_failure":
        at(c, 150)
        checker.isr_changed(TP0, (1, 2, 3), (2,))
    ack(checker, raw)
    fail_ms = 50 if story == "failed_before_ack" else 200
    power_cycle(c, checker, 2, fail_ms=fail_ms,
                held=3 if story == "never_held" else 5, kept=5 if story == "flushed" else 0)
    if story == "alone_after_back":
        at(c, 300)
        checker.became_follower(c.brokers[2], [TP0])  # served: its time down is over
    if story != "alone_at_the_failure":
        at(c, 400)
        checker.isr_changed(TP0, (1, 2, 3), (2, 3) if story == "never_alone" else (2,))
    assert lost_to(c, checker) == want


@pytest.mark.parametrize("detect_bounces,declared_dead,leader,want", [
    (False, False, 2, "power_failure"),  # pre-KIP-380: 2 leads on its old process's standing
    (True, False, 2, "unexplained"),     # KIP-380: the bounce is noticed, no such leadership
    (False, True, 2, "unexplained"),     # declared dead since: it re-earned its place
    (False, False, 3, "unexplained"),    # someone else leads without the batch
])
def test_power_failure_claim_before_kip380(detect_bounces, declared_dead, leader, want):
    c, checker, raw = one_batch_world(detect_bounces=detect_bounces)
    ack(checker, raw)
    power_cycle(c, checker, 2, fail_ms=200, held=5, kept=0)
    if declared_dead:
        at(c, 500)
        checker.declared_dead(2)
    assert lost_to(c, checker, leader=leader) == want


@pytest.mark.parametrize("acks,acked_by,want", [
    (1, 1, "acks_1"),          # acknowledged by 1, lost before 2 (the new leader) had it
    (1, 2, "unexplained"),     # the new leader itself acknowledged it: it had it
    (1, -1, "unexplained"),    # who acknowledged it is unknown
    (-1, 1, "unexplained"),    # acks=all: every ISR member had it
])
def test_acks_1_claim(acks, acked_by, want):
    c, checker, raw = one_batch_world()
    ack(checker, raw, acks=acks, leader=acked_by)
    assert lost_to(c, checker) == want


def led(c, checker, broker: int, ms: int, batches: tuple = ()) -> None:
    """``broker`` applied LeaderAndIsr as leader of t-0 at ``ms`` holding ``batches``."""
    at(c, ms)
    leo = 5 if batches else 0
    c.brokers[broker].rm.parts[TP0] = FakePartition(TP0, FakeLog(list(batches), [], leo),
                                                    leader=True, hw=0, isr=[1, 2, 3])
    checker.became_leader(c.brokers[broker], [TP0])


@pytest.mark.parametrize("story,want", [
    ("deposed_after_the_ack", "acks_1"),     # 2 acked, then 1 led: 2 was deposed after
    ("acked_as_a_deposed_leader", "acks_1"),  # 1 had taken over when zombie 2 acked
    ("led_throughout", "unexplained"),       # nobody else led since 2's tenure began
    ("other_leader_before_tenure", "unexplained"),  # 1 led only before 2's tenure
])
def test_acks_1_claim_found_on_the_broker_that_acknowledged_it(story, want):
    c, checker, raw = one_batch_world()
    if story == "other_leader_before_tenure":
        led(c, checker, 1, 20)
    led(c, checker, 2, 50)
    if story == "acked_as_a_deposed_leader":
        led(c, checker, 1, 80)
    ack(checker, raw, acks=1, leader=2)  # at t=100
    if story == "deposed_after_the_ack":
        led(c, checker, 1, 300, (raw,))
    assert lost_to(c, checker, leader=2) == want


@pytest.mark.parametrize("truncation,when,before,after,want", [
    ("high_watermark", 300, 5, 0, "high_watermark_truncation"),  # KIP-101 scenario 1
    ("high_watermark", 50, 5, 0, "unexplained"),    # truncated before the ack
    ("high_watermark", 300, 4, 0, "unexplained"),   # never held the whole batch
    ("high_watermark", 300, 9, 5, "unexplained"),   # truncated above the batch
    ("leader_epoch", 300, 5, 0, "unexplained"),     # no HW truncation in this mode
])
def test_high_watermark_truncation_claim(truncation, when, before, after, want):
    c, checker, raw = one_batch_world(truncation=truncation)
    ack(checker, raw)
    at(c, when)
    c.brokers[2].rm.parts[TP0] = FakePartition(TP0, FakeLog([], [], after), leader=False,
                                               hw=after, isr=[1, 2, 3])
    checker.became_follower(c.brokers[2], [TP0], {TP0: before})
    assert lost_to(c, checker) == want


def test_unclean_election_claim_needs_an_election_after_the_ack():
    for elected_ms, want in ((300, "unclean_election"), (50, "unexplained")):
        c, checker, raw = one_batch_world()
        c.unclean_elections[0] = [elected_ms]
        ack(checker, raw)
        assert lost_to(c, checker) == want


def test_unexplained_loss_is_a_violation_naming_what_the_leader_holds():
    c, checker, raw = one_batch_world()
    checker.strict = True
    ack(checker, raw)
    other = build_batch([b"x", b"y", b"z", b"v", b"w"], base_offset=0, now_ms=1)
    with pytest.raises(InvariantViolation) as e:
        checker.check_durability(TP0, FakeLog([other], [], 5), 2)
    crc = next(iter_batches(other)).crc
    assert e.value.invariant == "no_acked_record_lost"
    assert f"records digest {records_digest(raw):08x}" in e.value.detail
    assert f"it holds batch 0..4 crc {crc:08x} (records digest {records_digest(other):08x})" \
        in e.value.detail


def diverged_world(detect_bounces: bool):
    """Leader 1 and ISR follower 2 hold different records at offsets 0..4 (HW 5); broker 2
    lost power at t=200 holding 5 offsets and came back with none."""
    c, checker, raw = one_batch_world(detect_bounces=detect_bounces)
    checker.strict = True
    other = build_batch([b"x", b"y", b"z", b"v", b"w"], base_offset=0, now_ms=1)
    power_cycle(c, checker, 2, fail_ms=200, held=5, kept=0)
    at(c, 1_000)
    c.brokers[1].rm.parts[TP0] = FakePartition(TP0, FakeLog([raw], [], 5), leader=True, hw=5,
                                               isr=[1, 2])
    c.brokers[2].rm.parts[TP0] = FakePartition(TP0, FakeLog([other], [], 5), leader=False,
                                               hw=5, isr=[1, 2])
    return c, checker, raw, other


def test_divergence_explained_by_a_power_failure_only_before_kip380():
    c, checker, raw, other = diverged_world(detect_bounces=False)
    assert checker.check_isr_agreement(TP0) is False  # counted, not raised
    assert checker.diverged == {TP0}
    assert checker.diverged_explained == {TP0: "power_failure of broker 2"}
    c, checker, raw, other = diverged_world(detect_bounces=True)
    with pytest.raises(InvariantViolation) as e:
        checker.check_isr_agreement(TP0)
    mine, theirs = next(iter_batches(raw)).crc, next(iter_batches(other)).crc
    assert mine != theirs
    assert e.value.invariant == "isr_agree_below_hw"
    assert (f"first difference at batch #0: leader batches #0.. [0..4 crc {mine:08x}] vs "
            f"follower [0..4 crc {theirs:08x}]") in e.value.detail
