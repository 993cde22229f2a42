"""Leader-side replication kernels over 100,000 partitions × 3 replicas, against their peers.

One "pass" = what a leader does per round for every partition: apply one follower fetch per
follower (§6.2 lastCaughtUp rule; 200,000 updates given as one batch), then the HW candidate of
every partition (§6.4) and the out-of-sync followers for ISR shrink (§6.6). Peers, in the same
run, each timed from the same starting state and checked to give identical results:

* ``kernel``  — ``_replica_state`` (Cython): ``follower_fetch_batch`` + ``hw_and_out_of_sync_all``
* ``numba``   — the same loops under ``numba.njit`` (to justify Cython over numba)
* ``numpy``   — the best columnar numpy formulation here: preallocated buffers, ``out=`` everywhere
* ``python``  — the plain twin (``replica_state_py``) looping over Python lists

Then the cost of one follower-fetch update called from Python, per call.

Run: ``python benchmarks/bench_replica_state.py`` (``--help`` for sizes).
"""
from __future__ import annotations

import argparse
import statistics
import time
import timeit
from types import SimpleNamespace

import numba
import numpy as np

from replica_core._fast import replica_state_py
from replica_core.replication import ReplicaStateTable

T0 = 1_700_000_000_000
LAG = 30_000
SLOT_COLUMNS = ("leo", "log_start_offset", "last_fetch_leader_leo", "last_fetch_time_ms",
                "last_caught_up_time_ms", "broker_epoch", "in_isr", "in_max_isr", "eligible",
                "replica_id")
PARTITION_COLUMNS = ("leader_leo", "hw", "epoch_start_offset", "min_isr", "n_replicas",
                     "isr_state", "active", "leader_epoch")


# ---- setup ------------------------------------------------------------------------------------
def build_table(P: int, R: int, rng: np.random.Generator) -> ReplicaStateTable:
    table = ReplicaStateTable(0, max_replicas=R, capacity=P, pure=False)
    replicas = list(range(R))
    for _ in range(P):
        table.add_partition(replicas, replicas, leader_epoch=3, now_ms=T0 - 40_000,
                            leader_leo=0, min_isr=2)
    # A busy broker: leaders 0-50 offsets ahead of the last fetch, some followers out of the ISR,
    # some caught up long ago, a few ineligible, some partitions with an ISR change in flight.
    leader_leo = rng.integers(1_000, 2_000, P)
    table.leader_leo[:] = leader_leo
    table.hw[:] = leader_leo - rng.integers(0, 60, P)
    f = np.s_[:, 1:]
    shape = (P, R - 1)
    table.leo[f] = leader_leo[:, None] - rng.integers(0, 60, shape)
    table.last_fetch_leader_leo[f] = leader_leo[:, None] - rng.integers(0, 40, shape)
    table.last_fetch_time_ms[f] = T0 - rng.integers(0, 2_000, shape)
    table.last_caught_up_time_ms[f] = T0 - rng.choice([500, 5_000, 35_000, 90_000], shape)
    table.in_isr[f] = rng.random(shape) < 0.9
    table.in_max_isr[f] = table.in_isr[f] | (rng.random(shape) < 0.02)
    table.eligible[f] = rng.random(shape) < 0.97
    table.isr_state[:] = np.where(rng.random(P) < 0.02, 1, 0)
    table.log_start_offset[f] = 0
    return table


def build_batch(table: ReplicaStateTable, rng: np.random.Generator) -> SimpleNamespace:
    """One fetch per follower slot: offsets at or a little behind the leader."""
    P, R = table.capacity, table.max_replicas
    ps = np.repeat(np.arange(P, dtype=np.int64), R - 1)
    rs = np.tile(np.arange(1, R, dtype=np.int64), P)
    lend = table.leader_leo[ps].astype(np.int64)
    behind = np.where(rng.random(ps.size) < 0.5, 0, rng.integers(0, 50, ps.size))
    return SimpleNamespace(ps=ps, rs=rs, fetch_offsets=lend - behind,
                           log_starts=np.zeros(ps.size, np.int64), leader_end=lend,
                           now=T0 + 1_000, broker_epoch=5)


def snapshot(table: ReplicaStateTable) -> dict[str, np.ndarray]:
    return {n: getattr(table, n).copy() for n in SLOT_COLUMNS + PARTITION_COLUMNS}


def restore(table: ReplicaStateTable, snap: dict[str, np.ndarray]) -> None:
    for n, a in snap.items():
        np.copyto(getattr(table, n), a)


# ---- peer: the kernel -------------------------------------------------------------------------
class KernelPass:
    name = "kernel"

    def __init__(self, table: ReplicaStateTable, b: SimpleNamespace) -> None:
        self.t, self.k, self.b = table, table.kernels, b
        self.P, self.R = table.capacity, table.max_replicas
        self.changed_batch = np.zeros(b.ps.size, np.uint8)
        self.out_hw = np.zeros(self.P, np.int64)
        self.changed = np.zeros(self.P, np.uint8)
        self.mask = np.zeros(self.P * self.R, np.uint8)

    def run(self) -> None:
        b = self.b
        self.k.follower_fetch_batch(b.ps, b.rs, b.fetch_offsets, b.log_starts, b.leader_end,
                                    b.now, b.broker_epoch, self.changed_batch)
        self.k.hw_and_out_of_sync_all(b.now, LAG, self.P, self.out_hw, self.changed, self.mask)

    def prepare(self) -> None:
        pass

    def results(self):
        return self.out_hw, self.changed.astype(bool), self.mask.astype(bool)

    def columns(self) -> dict[str, np.ndarray]:
        return {n: getattr(self.t, n).reshape(-1).copy() for n in SLOT_COLUMNS}


# ---- peer: numba ------------------------------------------------------------------------------
@numba.njit(cache=False, nogil=True)
def _nb_fetch_batch(ps, rs, fos, lsos, lends, t, be, R, leo, lso, lfl, lft, lcu, bep, out):
    for k in range(ps.size):
        i = ps[k] * R + rs[k]
        c = lcu[i]
        if fos[k] >= lends[k]:
            c = max(c, t)
        elif fos[k] >= lfl[i]:
            c = max(c, lft[i])
        lcu[i] = c
        lfl[i] = max(lends[k], lfl[i])
        lft[i] = t
        out[k] = leo[i] != fos[k]
        leo[i] = fos[k]
        lso[i] = lsos[k]
        bep[i] = be


@numba.njit(cache=False, nogil=True)
def _nb_hw_oos(now, lag, R, leader_leo, hw, min_isr, n_rep, state, active, leo, lcu, in_isr,
               in_max, elig, out_hw, out_changed, out_mask):
    """The same fused row as the Cython kernel (isCaughtUp once per follower)."""
    out_mask[:] = 0
    for p in range(leader_leo.size):
        if not active[p]:
            out_hw[p] = hw[p]
            out_changed[p] = 0
            continue
        base = p * R
        nrep = n_rep[p]
        lleo = leader_leo[p]
        isr_size = in_isr[base]
        cand = lleo
        committed = state[p] == 0
        for r in range(1, nrep):
            i = base + r
            caught = leo[i] == lleo or now - lcu[i] <= lag
            isr_size += in_isr[i]
            if leo[i] < cand and (in_max[i] or (elig[i] and caught)):
                cand = leo[i]
            if committed and in_isr[i] and not caught:
                out_mask[i] = 1
        new = cand if isr_size >= min(min_isr[p], nrep) and cand > hw[p] else hw[p]
        out_changed[p] = new != hw[p]
        out_hw[p] = new


class NumbaPass(KernelPass):
    name = "numba"

    def __init__(self, table: ReplicaStateTable, b: SimpleNamespace) -> None:
        super().__init__(table, b)
        self.run()  # compile outside the timing

    def run(self) -> None:
        b, t, R = self.b, self.t, self.R
        _nb_fetch_batch(b.ps, b.rs, b.fetch_offsets, b.log_starts, b.leader_end, b.now,
                        b.broker_epoch, R, t.leo.reshape(-1), t.log_start_offset.reshape(-1),
                        t.last_fetch_leader_leo.reshape(-1), t.last_fetch_time_ms.reshape(-1),
                        t.last_caught_up_time_ms.reshape(-1), t.broker_epoch.reshape(-1),
                        self.changed_batch)
        _nb_hw_oos(b.now, LAG, R, t.leader_leo, t.hw, t.min_isr, t.n_replicas, t.isr_state,
                   t.active, t.leo.reshape(-1), t.last_caught_up_time_ms.reshape(-1),
                   t.in_isr.reshape(-1), t.in_max_isr.reshape(-1), t.eligible.reshape(-1),
                   self.out_hw, self.changed, self.mask)


# ---- peer: numpy ------------------------------------------------------------------------------
class NumpyPass:
    """The best numpy formulation found: its own SLOT-major copy of the per-replica columns
    ((R, P), so each follower slot is a contiguous vector — twice as fast as slicing the
    table's row-major (P, R) columns), gathers/scatters for the fetch batch (pairs are unique
    within one batch), whole-vector algebra for HW and out-of-sync, every temporary
    preallocated. The copy is made outside the timing, like the Python peer's lists."""

    name = "numpy"
    SLOT = ("leo", "log_start_offset", "last_fetch_leader_leo", "last_fetch_time_ms",
            "last_caught_up_time_ms", "broker_epoch", "in_isr", "in_max_isr", "eligible")

    def __init__(self, table: ReplicaStateTable, b: SimpleNamespace) -> None:
        self.t, self.b = table, b
        P, R, K = table.capacity, table.max_replicas, b.ps.size
        self.P, self.R = P, R
        i64 = np.int64
        self.s: dict[str, np.ndarray] = {}
        self.idx = np.empty(K, i64)
        self.g_lcu, self.g_lfl, self.g_lft, self.g_leo = (np.empty(K, i64) for _ in range(4))
        self.m1, self.m2 = np.empty(K, bool), np.empty(K, bool)
        self.changed_batch = np.empty(K, bool)
        F = (R - 1, P)
        self.eq, self.caught, self.hold, self.tmpb = (np.empty(F, bool) for _ in range(4))
        self.age, self.cand2 = np.empty(F, i64), np.empty(F, i64)
        self.cand = np.empty(P, i64)
        self.isr_size, self.eff = np.empty(P, i64), np.empty(P, i64)
        self.ok = np.empty(P, bool)
        self.out_hw = np.empty(P, i64)
        self.committed = np.empty(P, bool)
        self.mask = np.zeros((R, P), bool)

    def prepare(self) -> None:
        self.s = {n: np.ascontiguousarray(getattr(self.t, n).T) for n in self.SLOT}

    def run(self) -> None:
        t, b, s = self.t, self.b, self.s
        leo, lcu = s["leo"].reshape(-1), s["last_caught_up_time_ms"].reshape(-1)
        lfl, lft = s["last_fetch_leader_leo"].reshape(-1), s["last_fetch_time_ms"].reshape(-1)
        # §6.2 for the batch.
        idx = self.idx
        np.multiply(b.rs, self.P, out=idx)
        np.add(idx, b.ps, out=idx)
        np.take(lcu, idx, out=self.g_lcu)
        np.take(lfl, idx, out=self.g_lfl)
        np.take(lft, idx, out=self.g_lft)
        np.take(leo, idx, out=self.g_leo)
        np.greater_equal(b.fetch_offsets, b.leader_end, out=self.m1)
        np.greater_equal(b.fetch_offsets, self.g_lfl, out=self.m2)
        cand = self.g_lft  # candidate time: lastFetchTime (branch 2) ...
        np.copyto(cand, b.now, where=self.m1)  # ... or now (branch 1)
        np.logical_or(self.m1, self.m2, out=self.m2)
        np.maximum(self.g_lcu, cand, out=cand)
        np.copyto(self.g_lcu, cand, where=self.m2)
        np.put(lcu, idx, self.g_lcu)
        np.maximum(self.g_lfl, b.leader_end, out=self.g_lfl)
        np.put(lfl, idx, self.g_lfl)
        np.put(lft, idx, b.now)
        np.not_equal(self.g_leo, b.fetch_offsets, out=self.changed_batch)
        np.put(leo, idx, b.fetch_offsets)
        np.put(s["log_start_offset"].reshape(-1), idx, b.log_starts)
        np.put(s["broker_epoch"].reshape(-1), idx, b.broker_epoch)
        # §6.3 / §6.4 over follower slots (slot 0 is the leader).
        fleo = s["leo"][1:]
        lleo = t.leader_leo[None, :]
        np.equal(fleo, lleo, out=self.eq)
        np.subtract(b.now, s["last_caught_up_time_ms"][1:], out=self.age)
        np.less_equal(self.age, LAG, out=self.caught)
        np.logical_or(self.caught, self.eq, out=self.caught)
        np.logical_and(self.caught, s["eligible"][1:], out=self.hold)
        np.logical_or(self.hold, s["in_max_isr"][1:], out=self.hold)
        np.less(fleo, lleo, out=self.tmpb)
        np.logical_and(self.hold, self.tmpb, out=self.hold)
        np.copyto(self.cand2, lleo)
        np.copyto(self.cand2, fleo, where=self.hold)
        np.min(self.cand2, axis=0, out=self.cand)
        np.sum(s["in_isr"], axis=0, dtype=np.int64, out=self.isr_size)
        np.minimum(t.min_isr, t.n_replicas, out=self.eff)
        np.greater_equal(self.isr_size, self.eff, out=self.ok)
        np.logical_and(self.ok, t.active, out=self.ok)
        np.maximum(self.cand, t.hw, out=self.out_hw)
        np.copyto(self.out_hw, t.hw, where=~self.ok)
        # §6.6: ISR followers not caught up, Committed partitions only.
        np.equal(t.isr_state, 0, out=self.committed)
        np.logical_and(self.committed, t.active, out=self.committed)
        np.logical_not(self.caught, out=self.tmpb)
        np.logical_and(self.tmpb, s["in_isr"][1:], out=self.tmpb)
        np.logical_and(self.tmpb, self.committed[None, :], out=self.mask[1:])

    def results(self):
        return self.out_hw, self.out_hw != self.t.hw, self.mask.T.reshape(-1)

    def columns(self) -> dict[str, np.ndarray]:
        return {n: self.s[n].T.reshape(-1) if n in self.s else getattr(self.t, n).reshape(-1)
                for n in SLOT_COLUMNS}


# ---- peer: plain Python -----------------------------------------------------------------------
class PythonPass:
    name = "python"

    def __init__(self, table: ReplicaStateTable, b: SimpleNamespace) -> None:
        self.t, self.b, self.P, self.R = table, b, table.capacity, table.max_replicas
        self.lists = SimpleNamespace()
        self.bl = [b.ps.tolist(), b.rs.tolist(), b.fetch_offsets.tolist(), b.log_starts.tolist(),
                   b.leader_end.tolist()]

    def prepare(self) -> None:
        """Columns as Python lists (outside the timing; the twin then loops over them)."""
        self.lists = SimpleNamespace(**{n: getattr(self.t, n).reshape(-1).tolist()
                                        for n in SLOT_COLUMNS + PARTITION_COLUMNS})
        self.k = replica_state_py.ReplicaStateKernels(self.lists, self.R)
        self.changed_batch = [0] * len(self.bl[0])
        self.out_hw, self.changed, self.mask = [0] * self.P, [0] * self.P, [0] * (self.P * self.R)

    def run(self) -> None:
        b = self.b
        self.k.follower_fetch_batch(*self.bl, b.now, b.broker_epoch, self.changed_batch)
        self.k.hw_and_out_of_sync_all(b.now, LAG, self.P, self.out_hw, self.changed, self.mask)

    def results(self):
        return (np.array(self.out_hw), np.array(self.changed, bool), np.array(self.mask, bool))

    def columns(self) -> dict[str, np.ndarray]:
        return {n: np.array(getattr(self.lists, n)) for n in SLOT_COLUMNS}


# ---- driver -----------------------------------------------------------------------------------
def time_passes(table, batch, peers, repeat: int, python_repeat: int):
    snap = snapshot(table)
    times: dict[str, list[float]] = {p.name: [] for p in peers}
    reference = None
    for rep in range(repeat):
        for peer in peers:
            if peer.name == "python" and rep >= python_repeat:
                continue
            restore(table, snap)
            peer.prepare()  # peers with their own copy of the state take it here, untimed
            t0 = time.perf_counter()
            peer.run()
            times[peer.name].append(time.perf_counter() - t0)
            res = peer.results()
            cols = peer.columns()
            if reference is None:
                reference = (res, cols, peer.name)
            else:
                for a, b_, what in zip(res, reference[0], ("hw", "changed", "out-of-sync"),
                                       strict=True):
                    if not np.array_equal(a, b_):
                        raise AssertionError(f"{peer.name} {what} differs from {reference[2]}")
                for n, a in cols.items():
                    if not np.array_equal(a, reference[1][n]):
                        raise AssertionError(f"{peer.name} column {n} differs")
    restore(table, snap)
    return times


def per_call(table: ReplicaStateTable, n: int = 200_000) -> dict[str, float]:
    k = table.kernels
    p = table.capacity // 2
    lend = int(table.leader_leo[p])
    out = {}
    g = {"t": table, "k": k, "p": p, "e": lend, "now": T0 + 2_000}
    out["table.update_follower_fetch"] = min(timeit.repeat(
        "t.update_follower_fetch(p, 1, e, 0, now, e)", globals=g, number=n, repeat=5)) / n
    out["table.kernels.follower_fetch"] = min(timeit.repeat(
        "k.follower_fetch(p, 1, e, 0, now, e)", globals=g, number=n, repeat=5)) / n
    # Varying partitions (cache-cold rows), loop overhead included.
    rows = np.random.default_rng(7).integers(0, table.capacity, n).tolist()
    f = k.follower_fetch
    t0 = time.perf_counter()
    for q in rows:
        f(q, 2, lend, 0, T0 + 3_000, lend)
    out["kernels.follower_fetch, random rows, incl. loop"] = (time.perf_counter() - t0) / n
    twin = replica_state_py.ReplicaStateKernels(table, table.max_replicas)
    g["tw"] = twin
    out["twin follower_fetch (reference)"] = min(timeit.repeat(
        "tw.follower_fetch(p, 1, e, 0, now, e)", globals=g, number=n // 10, repeat=3)) / (n // 10)

    @numba.njit(cache=False)
    def nb_fetch(leo, lso, lfl, lft, lcu, bep, i, fo, ls, t, lend, be):
        c = lcu[i]
        if fo >= lend:
            c = max(c, t)
        elif fo >= lfl[i]:
            c = max(c, lft[i])
        lcu[i] = c
        lfl[i] = max(lend, lfl[i])
        lft[i] = t
        changed = leo[i] != fo
        leo[i] = fo
        lso[i] = ls
        bep[i] = be
        return changed

    cols = [getattr(table, c).reshape(-1) for c in ("leo", "log_start_offset",
                                                     "last_fetch_leader_leo",
                                                     "last_fetch_time_ms",
                                                     "last_caught_up_time_ms", "broker_epoch")]
    i = p * table.max_replicas + 1
    nb_fetch(*cols, i, lend, 0, T0, lend, -1)
    g.update(nb=nb_fetch, c=cols, i=i)
    out["numba njit with column arrays (not used)"] = min(timeit.repeat(
        "nb(c[0], c[1], c[2], c[3], c[4], c[5], i, e, 0, now, e, -1)", globals=g, number=n,
        repeat=5)) / n
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--python-repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=2024)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    table = build_table(args.partitions, args.replicas, rng)
    batch = build_batch(table, rng)
    print(f"{args.partitions:,} partitions × {args.replicas} replicas, "
          f"{batch.ps.size:,} follower fetches per pass (setup {time.perf_counter() - t0:.1f} s)")
    pristine = snapshot(table)
    peers = [KernelPass(table, batch), NumbaPass(table, batch), NumpyPass(table, batch),
             PythonPass(table, batch)]
    restore(table, pristine)  # numba compiled by running once
    times = time_passes(table, batch, peers, args.repeat, args.python_repeat)
    print("\nfull pass (fetch batch + HW + out-of-sync), identical results checked:")
    best = {name: min(ts) for name, ts in times.items()}
    for name, ts in times.items():
        print(f"  {name:7s} min {min(ts) * 1e3:9.2f} ms   median {statistics.median(ts) * 1e3:9.2f} ms"
              f"   ({len(ts)} runs)")
    k = best["kernel"]
    print(f"  ratios (min): numpy/kernel {best['numpy'] / k:.2f}×   numba/kernel "
          f"{best['numba'] / k:.2f}×   python/kernel {best['python'] / k:.0f}×")
    med = {name: statistics.median(ts) for name, ts in times.items()}
    print(f"  ratios (median): numpy/kernel {med['numpy'] / med['kernel']:.2f}×   numba/kernel "
          f"{med['numba'] / med['kernel']:.2f}×   python/kernel {med['python'] / med['kernel']:.0f}×")
    print("\none follower-fetch update from Python, per call:")
    for name, secs in per_call(table).items():
        print(f"  {name:48s} {secs * 1e9:8.0f} ns")


if __name__ == "__main__":
    main()
