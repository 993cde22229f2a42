"""One follower fetch round over many partitions, and whether fetch ordering wants a kernel.

Part 1 — a round of ``ReplicaFetcher.do_work`` for broker 1 following N partitions led by broker
0, both real ReplicaManagers over real Logs on a MemoryMedium, wired by an
InProcessLeaderEndPoint (one setup per N, reused by every row for that N):

* ``idle``: steady state with nothing new (every partition answers empty) — the shape of Kafka's
  ``ReplicaFetcherThreadBenchmark`` (JMH, ``testFetcher``), whose leader is mocked to hand back a
  prebuilt empty response; so next to Kafka's figures compare ``build + process``.
* ``data``: every partition has one new 1-record batch (produced untimed before each round).

Each round is split into build (``maybe_truncate`` + ``build_fetch``), serve (the leader's
``fetch_messages``) and process (``process_fetch_response``), and the growth from 100 to 5,000
partitions is reported against linear growth (×50). Kafka's published JMH figures for the same
round: about 26.5 µs at 100 partitions and 2.59 ms at 5,000 (×98).

Part 2 — the native-hot-path question of issue 5, per operation: the fetcher's whole-map passes
(ready partitions in fair order, Truncating partitions, next delay due, reordering, state update
with move-to-end, lag gauges and MaxLag) on the Python ordered map (``PartitionStates``,
``FetcherLagStats``) versus ``ColumnarPartitionStates`` — the same states mirrored in columns,
passes done by the ``_fetch_order`` kernel — both as the fetcher would use them (Python values
out) and as the bare kernel call (row numbers out).

Part 3 — the Part 1 rounds again with the fetcher's states in ``ColumnarPartitionStates``: the
kernel selections plus the upkeep of the columns on every state change, end to end.

Run: ``python benchmarks/bench_fetcher.py`` (``--quick`` for a short run).
"""
from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable

import numpy as np

from replica_core.clock import ManualClock
from replica_core.fetcher import (
    FETCHING,
    TRUNCATING,
    FetcherLagStats,
    InProcessLeaderEndPoint,
    PartitionFetchState,
    PartitionStates,
    ReplicaFetcherManager,
)
from replica_core.fetcher.columnar import ColumnarPartitionStates
from replica_core.records import build_batch
from replica_core.replication import ReplicaConfig, ReplicaManager
from replica_core.replication.messages import (
    AlterPartitionResult,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    TopicPartition,
)
from replica_core.storage.config import LogConfig
from replica_core.storage.log_manager import LogManager
from replica_core.storage.medium import MemoryMedium

KAFKA_JMH_US = {100: 26.5, 5000: 2590.0}


# ---- part 1: a real fetch round ------------------------------------------------------------------
class Pair:
    """Leader broker 0 and follower broker 1 for ``n`` partitions of topic ``topic``."""

    def __init__(self, n: int) -> None:
        self.clock = ManualClock(1_700_000_000_000)
        medium = MemoryMedium()
        # replica.fetch.wait.max.ms=0: the leader answers every fetch at once, as the mocked
        # leader of Kafka's JMH benchmark does, so a round is build + serve + process in one
        # call and no long-poll fetch is left parked between rounds
        config = ReplicaConfig(replica_fetch_wait_max_ms=0)
        # Kafka preallocates 10 MiB per index file; on disk that is a sparse file, in memory it
        # would be 40 GB for 5,000 partitions on two brokers. 64 KiB indexes keep memory real.
        log_config = LogConfig.from_properties({"segment.index.bytes": 65536})
        self.rms: dict[int, ReplicaManager] = {}
        for b in (0, 1):
            lm = LogManager([f"/kafka/{b}"], log_config, medium=medium, clock=self.clock)
            lm.startup()
            rm = ReplicaManager(b, lm, config, clock=self.clock, broker_epoch=10 + b,
                                alter_partition=self._alter)
            rm.fetcher_manager = ReplicaFetcherManager(
                b, rm, config, lambda leader, b=b: InProcessLeaderEndPoint(
                    self.rms[leader], b, 10 + b), clock=self.clock)
            self.rms[b] = rm
        self.tps = [TopicPartition("topic", i) for i in range(n)]
        states = tuple(LeaderAndIsrPartitionState("topic", i, 1, 0, 0, (0, 1), 0, (0, 1))
                       for i in range(n))
        for rm in self.rms.values():
            rm.become_leader_or_follower(LeaderAndIsrRequest(9, 1, rm.broker_epoch, states))
        self.batch = build_batch([b"x" * 100])
        fm = self.rms[1].fetcher_manager
        assert len(fm.fetchers) == 1
        self.fetcher = next(iter(fm.fetchers.values()))
        self.produce()
        for _ in range(3):
            self.fetcher.do_work()
        assert all(s.state is FETCHING and s.lag == 0
                   for s in self.fetcher.partition_states.partition_state_values())

    def _alter(self, request) -> None:
        rm = self.rms[request.broker_id]
        for item in request.items:
            rm.handle_alter_partition_response(AlterPartitionResult(
                item.tp, 0, request.broker_id, item.leader_epoch, tuple(item.new_isr),
                item.partition_epoch + 1))

    def produce(self) -> None:
        leader = self.rms[0]
        batch = self.batch
        for tp in self.tps:
            leader.append_records({tp: batch}, acks=1, timeout_ms=30_000)

    def round(self) -> tuple[float, float, float]:
        """One do_work split in (build, serve, process) seconds."""
        f = self.fetcher
        t0 = time.perf_counter()
        f.maybe_truncate()
        req, _ = f.build_fetch()
        t1 = time.perf_counter()
        resp = f.leader.fetch(req)
        t2 = time.perf_counter()
        f.process_fetch_response(req, resp)
        f._complete_delayed_fetch_requests()
        t3 = time.perf_counter()
        return t1 - t0, t2 - t1, t3 - t2


def swap_states(fetcher, columnar: bool) -> None:
    """Put the fetcher's states in a ColumnarPartitionStates (or back in the ordered map),
    same partitions, same order, same state objects."""
    cls = ColumnarPartitionStates if columnar else PartitionStates
    if type(fetcher.partition_states) is cls:
        return
    fresh = cls()
    for tp, st in fetcher.partition_states.items():
        fresh.update_and_move_to_end(tp, st)
    fetcher.partition_states = fresh


def bench_rounds(pair: Pair, rounds: int, with_data: bool) -> list[tuple[float, float, float]]:
    """``rounds`` rounds, each as (build, serve, process) seconds."""
    samples = []
    leo_before = pair.rms[1].local_log(pair.tps[-1]).log_end_offset
    gc.collect()
    gc.disable()
    try:
        for _ in range(rounds):
            if with_data:
                pair.produce()
            samples.append(pair.round())
    finally:
        gc.enable()
    leo = pair.rms[1].local_log(pair.tps[-1]).log_end_offset
    assert leo == leo_before + (rounds if with_data else 0), (leo_before, leo)
    return samples


def summarize(samples: list[tuple[float, float, float]]) -> dict[str, float]:
    """The machine is shared: the fastest round is the least disturbed measurement of the work;
    the median of the totals is reported beside it."""
    build, serve, process = min(samples, key=sum)
    return {"build": build * 1e6, "serve": serve * 1e6, "process": process * 1e6,
            "total": (build + serve + process) * 1e6,
            "median": statistics.median(sum(s) for s in samples) * 1e6}


# ---- part 2: ordering and lag, map versus columns --------------------------------------------------
def timeit_us(fn: Callable[[], object], repeat: int, setup: Callable[[], object] | None = None
              ) -> float:
    """Best of 5 batches of ``repeat`` calls, µs per call (``setup`` runs untimed before each)."""
    if setup is not None:
        setup()
    fn()
    best = []
    for _ in range(5):
        total = 0.0
        for _ in range(repeat):
            if setup is not None:
                setup()
            t = time.perf_counter()
            fn()
            total += time.perf_counter() - t
        best.append(total / repeat)
    return min(best) * 1e6


def bench_ordering(n: int, pure: bool = False) -> dict[str, float]:
    """Each operation on the ordered map and on the columns (the same states in both), µs."""
    tps = [TopicPartition("topic", i) for i in range(n)]
    now = 1_700_000_000_000
    # 1 in 20 partitions delayed, 1 in 50 Truncating: what a fetcher carries after some errors.
    states = [PartitionFetchState(i * 7, i % 3, 5, now + 1000 + i if i % 20 == 0 else None,
                                  TRUNCATING if i % 50 == 1 else FETCHING, 4)
              for i in range(n)]
    ps: PartitionStates = PartitionStates()
    cps = ColumnarPartitionStates(capacity=n, pure=pure)
    for tp, st in zip(tps, states, strict=True):
        ps.update_and_move_to_end(tp, st)
        cps.update_and_move_to_end(tp, st)
    kernel = cps._k  # the raw kernel over the same columns: rows in, rows out
    out = np.empty(n, np.int64)
    assert ps.ready_items(now) == cps.ready_items(now)
    assert ps.truncating_items(now) == cps.truncating_items(now)
    assert ps.next_due(now) == cps.next_due(now)
    repeat = max(3, 20_000 // n)

    served = tps[::2]   # half the partitions returned data
    rows = np.array([cps._rows[tp] for tp in served], np.int64)
    new_states = {tp: PartitionFetchState(st.fetch_offset + 1, 0, 5, None, FETCHING, 4)
                  for tp, st in zip(tps[::2], states[::2], strict=True)}

    def map_served() -> None:
        for tp in served:
            ps.update_and_move_to_end(tp, new_states[tp])

    def columns_served() -> None:
        for tp in served:
            cps.update_and_move_to_end(tp, new_states[tp])

    def map_reorder() -> None:
        for tp in served:
            ps.move_to_end(tp)

    # Lag (§7.8): each served partition's gauge := max(0, HW − next offset), then MaxLag.
    gauges = FetcherLagStats()
    for tp in tps:
        gauges.get_and_maybe_put(tp).lag = 0
    hws = [st.fetch_offset + 1 + (i % 5) for i, st in enumerate(states[::2])]
    nexts = [st.fetch_offset + 1 for st in states[::2]]
    hw_arr, next_arr = np.array(hws, np.int64), np.array(nexts, np.int64)
    stats = gauges.stats

    def map_lag() -> int:
        for tp, hw, nx in zip(served, hws, nexts, strict=True):
            stats[tp].lag = max(0, hw - nx)
        return gauges.max_lag()

    def columns_lag() -> int:
        kernel.set_lags(rows, hw_arr, next_arr, len(rows))
        return kernel.max_lag()

    def columns_lag_from_lists() -> int:
        k = len(served)
        kernel.set_lags(rows, np.array(hws, np.int64), np.array(nexts, np.int64), k)
        return kernel.max_lag()

    assert map_lag() == columns_lag() == columns_lag_from_lists() == 4
    out_ = {
        "select:map": timeit_us(lambda: ps.ready_items(now), repeat),
        "select:columns": timeit_us(lambda: cps.ready_items(now), repeat),
        "select:kernel": timeit_us(lambda: kernel.ready_in_order(now, out), repeat),
        "truncating:map": timeit_us(lambda: ps.truncating_items(now), repeat),
        "truncating:columns": timeit_us(lambda: cps.truncating_items(now), repeat),
        "truncating:kernel": timeit_us(lambda: kernel.truncating_in_order(now, out), repeat),
        "next due:map": timeit_us(lambda: ps.next_due(now), repeat),
        "next due:columns": timeit_us(lambda: cps.next_due(now), repeat),
        "next due:kernel": timeit_us(lambda: kernel.next_due(now), repeat),
        "reorder ½:map": timeit_us(map_reorder, repeat),
        "reorder ½:kernel": timeit_us(lambda: kernel.move_rows_to_end(rows, len(rows)), repeat),
        "update+move ½:map": timeit_us(map_served, repeat),
        "update+move ½:columns": timeit_us(columns_served, repeat),
        "lag ½ + max:map": timeit_us(map_lag, repeat),
        "lag ½ + max:columns": timeit_us(columns_lag_from_lists, repeat),
        "lag ½ + max:kernel": timeit_us(columns_lag, repeat),
        "max lag:map": timeit_us(gauges.max_lag, repeat),
        "max lag:kernel": timeit_us(kernel.max_lag, repeat),
    }
    return out_


PART2_OPS = ("select", "truncating", "next due", "reorder ½", "update+move ½", "lag ½ + max",
             "max lag")
PART2_HELP = """\
  select        ready partitions (Fetching, not delayed) in fair order, as (tp, state) pairs
  truncating    Truncating, not delayed, in order (maybeTruncate's scan, every round)
  next due      earliest future delay (a driver's wake-up time)
  reorder ½     move half the partitions to the end (order only, states unchanged)
  update+move ½ new state + move to end for half (what a data round does per partition)
  lag ½ + max   lag gauge := max(0, HW − next) for half, then MaxLag
  max lag       MaxLag alone
  map = PartitionStates / FetcherLagStats in Python; columns = ColumnarPartitionStates (kernel
  plus turning rows into Python values); kernel = the bare kernel call (rows in, rows out)"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds")
    ap.add_argument("--sizes", default="100,1000,5000")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print("Part 1 — one follower fetch round, fetch states in the ordered map (µs; fastest round"
          " split in build + serve + process, and the median round)")
    print(f"{'partitions':>10} {'mode':>5} {'build':>9} {'serve':>9} {'process':>9} "
          f"{'total':>9} {'median':>9} {'µs/part':>8} {'build+proc':>10} {'Kafka JMH':>9}")
    results: dict[tuple[int, str, str], dict[str, float]] = {}
    setups: dict[int, float] = {}
    for n in sizes:
        rounds = (5 if n >= 5000 else 10) if args.quick else (10 if n >= 5000 else 30)
        t = time.perf_counter()
        pair = Pair(n)
        setups[n] = time.perf_counter() - t
        # Map and columns take turns, so a disturbance on the shared machine hits both alike.
        samples: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
        for _ in range(2 if args.quick else 3):
            for states in ("map", "columns"):
                swap_states(pair.fetcher, states == "columns")
                for mode in ("idle", "data"):
                    samples.setdefault((mode, states), []).extend(
                        bench_rounds(pair, rounds, mode == "data"))
        swap_states(pair.fetcher, False)
        for (mode, states), ss in samples.items():
            results[(n, mode, states)] = summarize(ss)
        for mode in ("idle", "data"):
            r = results[(n, mode, "map")]
            kafka = f"{KAFKA_JMH_US[n]:.1f}" if n in KAFKA_JMH_US and mode == "idle" else ""
            print(f"{n:>10} {mode:>5} {r['build']:>9.1f} {r['serve']:>9.1f} "
                  f"{r['process']:>9.1f} {r['total']:>9.1f} {r['median']:>9.1f} "
                  f"{r['total'] / n:>8.2f} {r['build'] + r['process']:>10.1f} {kafka:>9}",
                  flush=True)
        del pair
        gc.collect()
    print("  setup (two brokers, 2×N logs on a MemoryMedium, LeaderAndIsr, 3 warm-up rounds): "
          + ", ".join(f"{n:,}: {setups[n]:.1f} s" for n in sizes))
    lo, hi = min(sizes), max(sizes)
    if hi > lo:
        print(f"\nGrowth {lo} → {hi} partitions (linear = ×{hi / lo:.0f}; "
              f"Kafka JMH 100 → 5,000: ×{KAFKA_JMH_US[5000] / KAFKA_JMH_US[100]:.0f}):")
        for mode in ("idle", "data"):
            a, b = results[(lo, mode, "map")], results[(hi, mode, "map")]
            print(f"  {mode}: total ×{b['total'] / a['total']:.1f}, "
                  f"build+process ×{(b['build'] + b['process']) / (a['build'] + a['process']):.1f}"
                  f"  (µs/partition {a['total'] / lo:.2f} → {b['total'] / hi:.2f})")
            steps = []
            for x, y in zip(sizes, sizes[1:], strict=False):
                ratio = results[(y, mode, "map")]["total"] / results[(x, mode, "map")]["total"]
                steps.append(f"{x:,} → {y:,}: ×{ratio:.1f} for ×{y / x:.0f}")
            if len(steps) > 1:
                print(f"    step by step: {'; '.join(steps)}")
    if lo == 100 and hi == 5000:
        a, b = results[(100, "idle", "map")], results[(5000, "idle", "map")]
        print(f"  vs Kafka JMH (idle build+process): {a['build'] + a['process']:.0f} µs = "
              f"{(a['build'] + a['process']) / KAFKA_JMH_US[100]:.1f}× Kafka at 100, "
              f"{b['build'] + b['process']:.0f} µs = "
              f"{(b['build'] + b['process']) / KAFKA_JMH_US[5000]:.1f}× Kafka at 5,000")

    print("\nPart 2 — fetch ordering and lag: ordered map vs columns with the native kernel (µs)")
    print(PART2_HELP)
    verdicts: dict[str, list[str]] = {op: [] for op in PART2_OPS}
    for n in sizes:
        r = bench_ordering(n)
        round_us = results[(n, "data", "map")]["total"]
        print(f"  {n:>5} partitions (a data round: {round_us:,.0f} µs)")
        for op in PART2_OPS:
            m = r[f"{op}:map"]
            cells = [f"      {op:<14} map {m:>9.1f}"]
            best = m
            for kind in ("columns", "kernel"):
                v = r.get(f"{op}:{kind}")
                if v is None:
                    cells.append(" " * 22)
                    continue
                cells.append(f"   {kind} {v:>9.1f} ({v / m:4.2f})")
                best = min(best, v)
            cells.append(f"   map = {100 * m / round_us:4.1f}% of a round")
            print("".join(cells))
            cols = r.get(f"{op}:columns", r.get(f"{op}:kernel"))
            verdicts[op].append(f"{n}: {'columns' if cols < m else 'map'}")
    print("  faster (map vs columns as used):  "
          + "; ".join(f"{op}: " + ", ".join(v) for op, v in verdicts.items()))

    print("\nPart 3 — the same fetch round with the fetcher's states in ColumnarPartitionStates"
          " (kernel selections, columns kept in step on every state change), µs")
    print(f"{'partitions':>10} {'mode':>5} {'map b+p':>9} {'cols b+p':>9} {'cols/map':>8} "
          f"{'map total':>10} {'cols total':>10}")
    for n in sizes:
        for mode in ("idle", "data"):
            m, c = results[(n, mode, "map")], results[(n, mode, "columns")]
            mb, cb = m["build"] + m["process"], c["build"] + c["process"]
            print(f"{n:>10} {mode:>5} {mb:>9.1f} {cb:>9.1f} {cb / mb:>8.2f} "
                  f"{m['total']:>10.1f} {c['total']:>10.1f}")


if __name__ == "__main__":
    main()
