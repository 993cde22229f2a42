"""End-to-end cost of one follower fetch round over 1,000 partitions, per partition.

Three brokers in one process on real logs (MemoryMedium), ReplicaManager on each; broker 0 leads
every partition, brokers 1 and 2 follow. One "round" for follower 1 is what a fetcher does:

* ``serve``   — the leader's ``fetch_messages`` for one FetchRequest naming every partition
  (fencing checks, ``Log.read`` per partition, the byte budget, the batched §6.2 fetch-state
  update through the state table's kernel, ISR check, HW advance, purgatory completion);
* ``process`` — the follower's side of the response: ``append_records_to_follower`` and
  ``update_follower_high_watermark`` per partition.

Measured with one new batch per partition since the previous round (produce not timed) and
with nothing new (an idle round). The peer in the same run: the state kernels alone —
``follower_fetch`` called once per partition from Python, and ``follower_fetch_batch`` over
1,000 rows — i.e. the part of ``serve`` that is replication state, not I/O or objects.

Run: ``python benchmarks/bench_replication.py [--partitions 1000] [--rounds 30]``
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from replication_harness import Cluster  # noqa: E402

from replica_core.records import build_batch  # noqa: E402
from replica_core.replication.messages import TopicPartition  # noqa: E402
from replica_core.storage.config import LogConfig  # noqa: E402


def _round(c: Cluster, tps: list[TopicPartition], follower: int) -> tuple[int, int, int]:
    """One fetch round for ``follower``: (serve ns, process ns, bytes)."""
    req = c.fetch_request(follower, tps)
    leader = c.rm(0)
    t0 = time.perf_counter_ns()
    resp = leader.fetch_messages(req)
    t1 = time.perf_counter_ns()
    c.apply(follower, resp)
    t2 = time.perf_counter_ns()
    return t1 - t0, t2 - t1, sum(len(p.records) for p in resp.partitions)


def run(partitions: int, rounds: int, records_per_batch: int, value_bytes: int) -> dict:
    # Small index pre-allocation: 3,000 logs with Kafka's 10 MiB default would need 60 GB.
    c = Cluster(n=3, log_config=LogConfig(segment_index_bytes=64 * 1024))
    tps = [TopicPartition("bench", i) for i in range(partitions)]
    for tp in tps:
        c.create(tp)
    leader = c.rm(0)
    batch = build_batch([b"x" * value_bytes] * records_per_batch)

    def produce_all() -> None:
        for tp in tps:
            leader.append_records({tp: batch}, acks=1, timeout_ms=30_000)

    # warm up: everything replicated, HW = LEO
    produce_all()
    for _ in range(2):
        _round(c, tps, 1)
        _round(c, tps, 2)

    busy_serve, busy_process, idle_serve, idle_process = [], [], [], []
    nbytes = 0
    for _ in range(rounds):
        produce_all()
        c.clock.advance(10)
        s, p, nbytes = _round(c, tps, 1)
        busy_serve.append(s)
        busy_process.append(p)
        _round(c, tps, 2)  # follower 2 keeps up too (untimed) so the HW moves every round
        c.clock.advance(10)
        s, p, _ = _round(c, tps, 1)
        idle_serve.append(s)
        idle_process.append(p)
        _round(c, tps, 2)
    assert all(c.partition(0, tp).high_watermark == c.partition(0, tp).log_end_offset
               for tp in tps)

    # peer: the state kernels alone, on the leader's real table
    table = leader.table
    kern = table.kernels
    rows = np.array([c.partition(0, tp).row for tp in tps], dtype=np.int64)
    slots = np.ones(partitions, dtype=np.int64)
    leos = table.leader_leo[rows].astype(np.int64)
    starts = np.zeros(partitions, dtype=np.int64)
    now = c.clock.milliseconds()
    reps = max(3, rounds)
    per_call = []
    rows_l, leos_l = rows.tolist(), leos.tolist()
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        for k in range(partitions):
            kern.follower_fetch(rows_l[k], 1, leos_l[k], 0, now, leos_l[k], 101)
        per_call.append((time.perf_counter_ns() - t0) / partitions)
    per_row_batch = []
    changed = np.zeros(partitions, dtype=np.uint8)
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        kern.follower_fetch_batch(rows, slots, leos, starts, leos, now, 101, changed)
        per_row_batch.append((time.perf_counter_ns() - t0) / partitions)

    med = statistics.median
    out = {
        "partitions": partitions,
        "rounds": rounds,
        "bytes_per_busy_round": nbytes,
        "kernel_module": kern.__class__.__module__,
        "busy_serve_us_per_partition": med(busy_serve) / partitions / 1e3,
        "busy_process_us_per_partition": med(busy_process) / partitions / 1e3,
        "busy_round_us_per_partition": (med(busy_serve) + med(busy_process)) / partitions / 1e3,
        "idle_serve_us_per_partition": med(idle_serve) / partitions / 1e3,
        "idle_process_us_per_partition": med(idle_process) / partitions / 1e3,
        "busy_round_ms": (med(busy_serve) + med(busy_process)) / 1e6,
        "kernel_follower_fetch_ns_per_call": med(per_call),
        "kernel_follower_fetch_batch_ns_per_row": med(per_row_batch),
    }
    out["round_vs_kernel_call"] = (out["busy_round_us_per_partition"] * 1e3
                                   / out["kernel_follower_fetch_ns_per_call"])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--records", type=int, default=1, help="records per produced batch")
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    res = run(args.partitions, args.rounds, args.records, args.value_bytes)
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    print(f"follower fetch round, {res['partitions']} partitions, {res['rounds']} rounds "
          f"(median), kernels: {res['kernel_module']}")
    print(f"  busy round (1 new batch/partition, {res['bytes_per_busy_round']} bytes):")
    print(f"    leader serve     {res['busy_serve_us_per_partition']:8.2f} us/partition")
    print(f"    follower process {res['busy_process_us_per_partition']:8.2f} us/partition")
    print(f"    total            {res['busy_round_us_per_partition']:8.2f} us/partition "
          f"({res['busy_round_ms']:.2f} ms/round)")
    print("  idle round (nothing new):")
    print(f"    leader serve     {res['idle_serve_us_per_partition']:8.2f} us/partition")
    print(f"    follower process {res['idle_process_us_per_partition']:8.2f} us/partition")
    print("  peer: state kernels alone")
    print(f"    follower_fetch, one call from Python   {res['kernel_follower_fetch_ns_per_call']:8.1f} ns")
    print(f"    follower_fetch_batch, per row          {res['kernel_follower_fetch_batch_ns_per_row']:8.1f} ns")
    print(f"  a busy round costs {res['round_vs_kernel_call']:.0f}x one kernel call per partition")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
