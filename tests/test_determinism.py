"""Determinism has no holes: the same scenario and seed give the same summary.json bytes in any
process (whatever ``PYTHONHASHSEED``), and every random number a run uses comes from its seed.

Covers segment roll jitter (``segment.jitter.ms``: once drawn from an unseeded generator), the
wall clock (nothing in a run reads it), string-hash order (two processes with different hash
seeds), the order a log manager writes checkpoints in, and a static scan of the sources for
unseeded generators and clock reads.
"""
from __future__ import annotations

import ast
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import patch_method

import replica_core
from replica_core.clock import ManualClock
from replica_core.records import build_batch
from replica_core.sim import scenario as sc
from replica_core.sim.cluster import Cluster
from replica_core.sim.report import dumps_canonical
from replica_core.sim.run import run_scenario
from replica_core.storage import LogConfig, LogManager, LogSegment, MemoryMedium, SegmentJitter

JITTER = {"segment.jitter.ms": 50_000, "segment.ms": 20_000}
CFG = LogConfig.from_properties(JITTER)
T0 = 1_700_000_000_000

# the default scenario, shrunk (as tests/test_sim_run.py), with segments rolling every ~2 s
SMALL = {
    "topics.0.partitions": 12, "duration_s": 8, "faults.0.at_s": 3, "faults.1.at_s": 5,
    "broker.session.timeout.ms": 2000, "workload.batches_per_second": 2.0,
}


def small(**more):
    return sc.load(sc.default_scenario_path(), {**SMALL, **more})


# --- segment roll jitter: storage layer ---------------------------------------------------------
def test_segment_jitter_is_a_function_of_seed_and_name():
    def draws(seed, name, n=20):
        source = SegmentJitter(seed, name)
        return [source(CFG) for _ in range(n)]

    a = draws(7, "events-0")
    assert a == draws(7, "events-0")  # a fresh source with the same seed and name: same draws
    assert a != draws(8, "events-0") and a != draws(7, "events-1")
    assert all(0 <= d < 20_000 for d in a)  # abs(nextInt) % min(segment.jitter.ms, segment.ms)
    assert len(set(a)) > 10  # really drawn, not a constant
    # no jitter configured (Kafka's default): 0, and no generator is even built
    idle = SegmentJitter(7, "events-0")
    assert [idle(LogConfig()) for _ in range(3)] == [0, 0, 0] and idle._rng is None
    # the seed for a manager's sources comes from its injected generator, numpy's or Python's
    assert SegmentJitter.seed_from(np.random.default_rng(3)) == \
        SegmentJitter.seed_from(np.random.default_rng(3))
    import random
    assert SegmentJitter.seed_from(random.Random(3)) == SegmentJitter.seed_from(random.Random(3))
    assert SegmentJitter.seed_from(None) == 0


def test_segment_without_a_source_still_jitters_and_the_same_way_every_time():
    def jitter(base, name="events-0"):
        medium = MemoryMedium()
        medium.makedirs(f"/kafka/{name}")
        return LogSegment.open(medium, f"/kafka/{name}", base, CFG, ManualClock(T0)).roll_jitter_ms

    bases = (0, 100, 200, 300, 400)
    values = [jitter(b) for b in bases]
    assert values == [jitter(b) for b in bases]  # an unseeded generator fails this
    assert len(set(values)) > 1 and all(0 <= v < 20_000 for v in values)
    assert values != [jitter(b, "events-1") for b in bases]
    medium = MemoryMedium()
    medium.makedirs("/kafka/e-0")
    assert LogSegment.open(medium, "/kafka/e-0", 0, LogConfig(), ManualClock(T0)).roll_jitter_ms == 0


def _manager_jitters(rng, order, *, roll=2):
    """Open ``order``'s logs in that order under a manager with ``rng``, roll each ``roll``
    times; the jitter of every segment, per log."""
    medium = MemoryMedium()
    lm = LogManager(["/kafka"], CFG, medium=medium, clock=ManualClock(T0), rng=rng)
    lm.startup()
    for tp in order:
        lg = lm.create_log(*tp)
        for _ in range(roll):
            lg.append_as_leader(build_batch([b"v"], now_ms=T0), 0)
            lg.roll()
    return {tp: [s.roll_jitter_ms for s in lm.get_log(*tp).segments] for tp in sorted(order)}


def test_log_manager_draws_jitter_from_its_injected_generator():
    tps = [("events", p) for p in range(6)] + [("other", 0)]
    a = _manager_jitters(np.random.default_rng(1), tps)
    assert a == _manager_jitters(np.random.default_rng(1), tps[::-1])  # open order is irrelevant
    assert a != _manager_jitters(np.random.default_rng(2), tps)
    assert all(len(js) == 3 and len(set(js)) > 1 for js in a.values())  # one draw per segment
    assert len({js[0] for js in a.values()}) == len(tps)  # logs do not share a stream
    # without an injected generator: jittered all the same, and reproducibly
    assert _manager_jitters(None, tps) == _manager_jitters(None, tps[::-1])


# --- segment roll jitter: the simulator -------------------------------------------------------
def _sim_jitters(seed: int) -> dict:
    c = Cluster(3, config=JITTER, seed=seed)
    c.create_topic("t", 4, 3)
    c.create_topic("u", 2, 2)
    return {(b, tp): [s.roll_jitter_ms for s in lg.segments]
            for b, br in sorted(c.brokers.items()) for tp, lg in sorted(br.lm.logs.items())}


def test_simulated_brokers_draw_jitter_from_the_seed():
    a = _sim_jitters(1)
    assert a == _sim_jitters(1)
    assert a != _sim_jitters(2)
    values = [j for js in a.values() for j in js]
    assert len(values) == 16 and len(set(values)) > 8 and all(0 <= v < 20_000 for v in values)


def test_jittered_scenario_same_seed_same_bytes():
    jittered = small(**{"segment.ms": 2000, "segment.jitter.ms": 1500})
    a = dumps_canonical(run_scenario(jittered)[0])
    assert a == dumps_canonical(run_scenario(jittered)[0])
    # the jitter really moves segment rolls (and so what the run checks and measures)
    plain = dumps_canonical(run_scenario(small(**{"segment.ms": 2000}))[0])
    assert a != plain


# --- the wall clock -----------------------------------------------------------------------------
_WALL_CLOCKS = ("time", "time_ns", "monotonic", "monotonic_ns", "localtime", "gmtime", "ctime")


def test_a_run_never_reads_the_wall_clock(monkeypatch):
    """Any read of the wall clock from replica_core code during a run is a hole (run.json's
    wall seconds use ``time.perf_counter``, which this leaves alone)."""
    readers: list[str] = []

    def guard(name, real):
        def read(*args):
            frame = sys._getframe(1)
            module = frame.f_globals.get("__name__", "")
            if module.split(".")[0] == "replica_core":
                readers.append(f"{module}:{frame.f_lineno} time.{name}")
            return real(*args)
        return read

    for name in _WALL_CLOCKS:
        monkeypatch.setattr(time, name, guard(name, getattr(time, name)))
    run_scenario(small(**{"segment.ms": 2000, "segment.jitter.ms": 1500,
                          "workload.consumers": True}))
    assert readers == []


# --- string-hash order: two processes -----------------------------------------------------------
SCENARIO = """
name = "hash-order"
seed = 11
duration_s = 12
storage = "memory"
sample_interval_s = 1.0

[cluster]
brokers = 4

[configs]
"min.insync.replicas" = 2
"broker.session.timeout.ms" = 2000
"replica.lag.time.max.ms" = 4000
"num.replica.fetchers" = 2
"segment.bytes" = 20000
"segment.ms" = 3000
"segment.jitter.ms" = 2500

[[topics]]
name = "zeta"
partitions = 5
replication_factor = 3

[[topics]]
name = "alpha"
partitions = 4
replication_factor = 2
configs = { "unclean.leader.election.enable" = true, "min.insync.replicas" = 1 }

[[topics]]
name = "mid.topic-x"
partitions = 3
replication_factor = 3
configs = { "segment.bytes" = 4000 }

[workload]
batches_per_second = 3.0
records_per_batch = 5
record_bytes = 100
acks = "all"
keys = 7
consumers = true
consumer_poll_ms = 500

[[faults]]
at_s = 3
kind = "partition"
brokers = [1, 2]

[[faults]]
at_s = 5
kind = "heal"

[[faults]]
at_s = 6
kind = "crash"
broker = 2
mode = "power"

[[faults]]
at_s = 8
kind = "restart"
broker = 2

[fault_rates]
crashes_per_broker_hour = 300.0
mean_downtime_s = 2.0
power_failure_fraction = 0.5
isolations_per_broker_hour = 200.0
mean_isolation_s = 2.0
"""


def test_string_hash_seed_does_not_reach_the_summary(tmp_path):
    """Several topics (string keys everywhere: topic names, TopicPartitions, configs), random
    faults, a network partition, power failures and segment jitter, run by two processes with
    different string-hash seeds: the same summary.json bytes."""
    path = tmp_path / "hash-order.toml"
    path.write_text(SCENARIO)
    runs = []
    for hash_seed in ("1", "2"):
        out = tmp_path / f"hash-{hash_seed}"
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        cmd = [sys.executable, "-m", "replica_core.cli", "simulate", str(path), "-q",
               "--out", str(out)]
        runs.append((out, subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                           stderr=subprocess.PIPE, text=True)))
    summaries = []
    for out, proc in runs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        summaries.append((out / "summary.json").read_bytes())
    assert summaries[0] == summaries[1]
    assert b'"faults_injected": ' in summaries[0] and b'"crashes": 0' not in summaries[0]


# --- the order a log manager writes checkpoints in ----------------------------------------------
def test_truncation_checkpoints_dirs_in_a_fixed_order(monkeypatch):
    """``truncate_to`` checkpoints each affected log dir once, in the order its first log was
    truncated (Kafka: ``.map(_.parentDirFile).distinct``), not in a set's string-hash order."""
    dirs = [f"/kafka/d{i}" for i in range(8)]
    lm = LogManager(dirs, LogConfig(), medium=MemoryMedium(), clock=ManualClock(T0))
    lm.startup()
    for i, d in enumerate(dirs):
        for p in (2 * i, 2 * i + 1):
            lg = lm.create_log("t", p, log_dir=d)
            lg.append_as_leader(build_batch([b"a", b"b", b"c"], now_ms=T0), 0)
    order = [5, 2, 7, 0, 3, 6, 1, 4]  # the dirs' order in the request, not their names'
    request = {("t", 2 * i + k): 1 for i in order for k in (0, 1)}
    written: list[str] = []
    patch_method(monkeypatch, lm, "_checkpoint_dir", lambda d, *a, **kw: written.append(d))
    lm.truncate_to(request)
    assert written == [dirs[i] for i in order]
    assert all(lm.get_log("t", p).log_end_offset == 1 for p in range(16))


# --- static scan: no unseeded generator, no clock read ------------------------------------------
SRC = Path(replica_core.__file__).resolve().parent

# module.function calls that draw from an unseeded (OS- or process-seeded) generator or read
# the wall clock; (file relative to the package, call) pairs that are meant to are listed below
_RANDOM_FUNCS = {"random", "randint", "randrange", "choice", "choices", "shuffle", "sample",
                 "uniform", "getrandbits", "gauss", "normalvariate", "expovariate", "seed",
                 "randbytes", "triangular", "betavariate", "paretovariate", "SystemRandom"}
_NP_LEGACY = {"rand", "randn", "randint", "random", "random_sample", "choice", "shuffle",
              "permutation", "seed", "uniform", "normal", "exponential", "poisson",
              "RandomState", "bytes"}
_CLOCK_FUNCS = {("time", f) for f in _WALL_CLOCKS} | {
    ("datetime", "now"), ("datetime", "utcnow"), ("datetime", "today"), ("date", "today"),
    ("os", "urandom"), ("uuid", "uuid1"), ("uuid", "uuid4"), ("secrets", "token_bytes"),
    ("secrets", "randbits"), ("secrets", "choice"), ("secrets", "token_hex")}
ALLOWED = {
    ("clock.py", "time.time_ns"),          # SystemClock: the wall clock, for real brokers
    ("records/builder.py", "time.time"),   # build_batch(now_ms=None): Kafka's default, off-sim
}


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _holes(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ("random", "time", "secrets"):
            for alias in node.names:
                if alias.name != "Random" and not alias.name[0].isupper():
                    found.append((node.lineno, f"from {node.module} import {alias.name}"))
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func)
        head, _, last = name.rpartition(".")
        no_args = not node.args and not node.keywords
        if head == "random" and (last in _RANDOM_FUNCS or (last == "Random" and no_args)):
            found.append((node.lineno, name))
        elif head in ("np.random", "numpy.random") and (
                last in _NP_LEGACY or (last in ("default_rng", "SeedSequence") and no_args)):
            found.append((node.lineno, name))
        elif (head.rpartition(".")[2], last) in _CLOCK_FUNCS:
            found.append((node.lineno, name))
        elif name == "hash":  # str hashes change with PYTHONHASHSEED
            found.append((node.lineno, name))
    return found


def test_sources_have_no_unseeded_generator_or_clock_read():
    holes = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        for line, call in _holes(ast.parse(path.read_text(), str(path))):
            if (rel, call) not in ALLOWED:
                holes.append(f"{rel}:{line}: {call}")
    for path in sorted(SRC.rglob("*.pyx")):  # Cython: a textual check
        for line_no, line in enumerate(path.read_text().splitlines(), 1):
            if any(s in line for s in ("import random", "np.random.", "time.time", "rand()")):
                holes.append(f"{path.relative_to(SRC).as_posix()}:{line_no}: {line.strip()}")
    assert holes == []


@pytest.mark.parametrize("source,expected", [
    ("import random\nrandom.Random()\n", ["random.Random"]),
    ("import random\nrandom.Random(5)\nrandom.shuffle(x)\n", ["random.shuffle"]),
    ("import numpy as np\nnp.random.default_rng()\nnp.random.default_rng(1)\n",
     ["np.random.default_rng"]),
    ("import time\ntime.monotonic()\ntime.perf_counter()\n", ["time.monotonic"]),
    ("import datetime\ndatetime.datetime.now()\n", ["datetime.datetime.now"]),
    ("from random import randint\n", ["from random import randint"]),
    ("hash('a')\n", ["hash"]),
])
def test_the_scan_finds_what_it_looks_for(source, expected):
    assert [call for _, call in _holes(ast.parse(source))] == expected
