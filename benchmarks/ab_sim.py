"""A/B of the simulator between two git commits, interleaved: A B A B ...

Each commit is checked out into its own ``git worktree`` under a temporary directory, its Cython
extensions are built in place there (``python setup.py build_ext --inplace``), and every
measurement runs in a fresh subprocess with ``PYTHONPATH=<worktree>/src``, so the commit's own
Python code and compiled kernels are the ones imported (checked before measuring: the
subprocess reports where ``replica_core`` and ``replica_core._fast._batch`` came from).

The measurement is ``bench_sim.measure``'s, written against the API both old and new commits
have (``scenario.load(default_scenario_path(), overrides)``, ``run.run_scenario``,
``run.build_cluster`` + ``Cluster.create_topic``): the embedded default scenario end to end
(wall seconds), then the cluster setup alone (brokers started, topics created: the logs
LeaderAndIsr creates), with ``--partitions`` overriding ``topics.0.partitions``. Each repeat
first times ``LogManager.create_log`` of ``--create-logs`` new empty logs on the in-memory medium
(µs per log, as ``bench_sim.create_log_us``).

Usage::

    python benchmarks/ab_sim.py 737bb07 HEAD --repeats 3 [--partitions 3000,10000]
    python benchmarks/ab_sim.py HEAD . --setup-only --partitions 10000,30000

A directory holding a checkout (``.``: the current work tree) is used as it is instead:
uncommitted changes included, its in-place built extensions imported, nothing built there.
Medians per side and the ratio A/B are printed (above 1: B is faster), and whether the two
summaries are the same. Worktrees are removed at the end (``git worktree remove --force``);
``--keep`` leaves them for inspection.

Building needs Cython and setuptools >= 77 (pyproject's ``license`` form). When the running
interpreter lacks them they are installed once with ``pip install --target`` into
``--build-tools`` (default ``~/.cache/replica_core/ab_sim-build-tools``) and put on the build's
``PYTHONPATH``. Two commits whose ``src/replica_core/_fast`` and ``setup.py`` are the same share
one build (the extensions are copied).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

FAST_DIR = "src/replica_core/_fast"
DEFAULT_TOOLS = Path.home() / ".cache" / "replica_core" / "ab_sim-build-tools"

# Runs in the tree under test (its replica_core on PYTHONPATH). Only API that the commits being
# compared share: 737bb07 and later have all of it.
MEASURE = r'''
import gc, hashlib, json, sys, time
args = json.loads(sys.argv[1])
import replica_core
import replica_core._fast._batch as _batch
from replica_core.sim import scenario as sc
from replica_core.sim.cluster import quiet_logs
from replica_core.sim.run import build_cluster, run_scenario

out = {"module": replica_core.__file__, "kernel": _batch.__file__}
if args.get("check_only"):
    print(json.dumps(out))
    sys.exit(0)
if args.get("create_logs"):
    # us per LogManager.create_log of a new empty log on the in-memory medium (sim log config),
    # as bench_sim.create_log_us measures it
    from replica_core.clock import ManualClock
    from replica_core.sim.cluster import SIM_LOG_DEFAULTS
    from replica_core.storage.config import LogConfig
    from replica_core.storage.log_manager import LogManager
    from replica_core.storage.medium import MemoryMedium
    cfg = LogConfig.from_properties(SIM_LOG_DEFAULTS)
    gc.set_threshold(50_000, 20, 100)
    times = []
    for _ in range(3):
        medium = MemoryMedium()
        medium.makedirs("/data/broker-1")
        lm = LogManager(["/data/broker-1"], cfg, medium=medium, clock=ManualClock(0),
                        topic_configs={"t": cfg})
        lm.startup()
        t0 = time.perf_counter()
        for p in range(args["create_logs"]):
            lm.create_log("t", p, log_dir="/data/broker-1")
        times.append((time.perf_counter() - t0) / args["create_logs"] * 1e6)
        del lm, medium
        gc.collect()
    out["create_log_us"] = sorted(times)[1]
    print(json.dumps(out))
    sys.exit(0)
scenario = sc.load(sc.default_scenario_path(), args["overrides"])
out["partitions"] = scenario.total_partitions
if not args["setup_only"]:
    t0 = time.perf_counter()
    summary, _, info = run_scenario(scenario)
    out["wall"] = time.perf_counter() - t0
    out["events"] = summary["events"]
    out["acked_records"] = summary["acked_records"]
    out["lost_acked_records"] = summary["lost_acked_records"]
    out["summary_md5"] = hashlib.md5(
        json.dumps(summary, sort_keys=True, default=str).encode()).hexdigest()
    del summary, info
    gc.collect()
# the setup alone, as bench_sim._setup_seconds times it
restore = quiet_logs()
thresholds = gc.get_threshold()
gc.set_threshold(50_000, 20, 100)
try:
    t0 = time.perf_counter()
    cluster = build_cluster(scenario)
    for t in scenario.topics:
        cluster.create_topic(t.name, t.partitions, t.replication_factor, configs=t.configs)
    out["setup"] = time.perf_counter() - t0
    out["logs"] = sum(len(b.lm.logs) for b in cluster.brokers.values() if b.lm is not None)
finally:
    gc.set_threshold(*thresholds)
    restore()
print(json.dumps(out))
'''


def _git(repo: Path, *args: str, capture: bool = True) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], check=True, text=True,
                          stdout=subprocess.PIPE if capture else None)
    return (done.stdout or "").strip()


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _build_tools(tools: Path) -> str | None:
    """A PYTHONPATH entry providing Cython and setuptools >= 77, or None if already present."""
    probe = ("import Cython, setuptools, sys; "
             "sys.exit(0 if int(setuptools.__version__.split('.')[0]) >= 77 else 1)")
    if subprocess.run([sys.executable, "-c", probe], stderr=subprocess.DEVNULL).returncode == 0:
        return None
    env = dict(os.environ, PYTHONPATH=str(tools))
    if subprocess.run([sys.executable, "-c", probe], env=env,
                      stderr=subprocess.DEVNULL).returncode != 0:
        _log(f"installing Cython and setuptools>=77 into {tools} (once)")
        tools.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--upgrade", "--target",
                        str(tools), "cython>=3.0", "setuptools>=77", "wheel"], check=True)
    return str(tools)


def _build(tree: Path, tools: str | None) -> None:
    env = dict(os.environ)
    env.pop("REPLICA_CORE_ONLY", None)
    if tools:
        env["PYTHONPATH"] = tools
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace", "-q"], cwd=tree,
                   env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _log(f"  built {tree.name} in {time.perf_counter() - t0:.0f} s")


def _copy_extensions(src: Path, dst: Path) -> None:
    for so in (src / FAST_DIR).glob("*.so"):
        shutil.copy2(so, dst / FAST_DIR / so.name)


def _run(tree: Path, args: dict[str, Any]) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(tree / "src"))
    env.pop("REPLICA_CORE_PURE", None)
    done = subprocess.run([sys.executable, "-c", MEASURE, json.dumps(args)], cwd=tree, env=env,
                          check=True, text=True, stdout=subprocess.PIPE)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _check_imports(label: str, tree: Path) -> None:
    got = _run(tree, {"check_only": True})
    src = str((tree / "src").resolve())
    for key in ("module", "kernel"):
        if not str(Path(got[key]).resolve()).startswith(src):
            raise SystemExit(f"{label}: {key} imported from {got[key]}, not from {src}")
    _log(f"  {label}: replica_core and its kernels import from {src}")


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", help="commit A (a git revision, or a checkout's directory as is)")
    parser.add_argument("b", help="commit B")
    parser.add_argument("--repeats", type=int, default=3, help="runs per side and size")
    parser.add_argument("--partitions", default="3000",
                        help="comma-separated partition counts (default scenario: 3000)")
    parser.add_argument("--duration", type=float, default=None,
                        help="simulated seconds (default: the scenario's 60)")
    parser.add_argument("--setup-only", action="store_true",
                        help="time the cluster setup alone, not the run")
    parser.add_argument("--create-logs", type=int, default=20_000, metavar="N",
                        help="also time LogManager.create_log of N new logs per run (0: skip)")
    parser.add_argument("--keep", action="store_true", help="leave the worktrees in place")
    parser.add_argument("--build-tools", type=Path, default=DEFAULT_TOOLS)
    parser.add_argument("--json", metavar="PATH", help="write every measurement here")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.partitions.split(",") if s.strip()]
    repo = Path(_git(Path(__file__).resolve().parent, "rev-parse", "--show-toplevel"))

    sides: dict[str, dict[str, Any]] = {}
    for label, rev in (("A", args.a), ("B", args.b)):
        if (Path(rev) / "src" / "replica_core").is_dir():
            sides[label] = {"rev": rev, "sha": "as is", "tree": Path(rev).resolve()}
        else:
            sha = _git(repo, "rev-parse", "--verify", f"{rev}^{{commit}}")
            sides[label] = {"rev": rev, "sha": sha[:10], "full": sha, "tree": None}

    tmp = Path(tempfile.mkdtemp(prefix="ab_sim-"))
    added: list[Path] = []
    results: dict[str, dict[int, list[dict[str, Any]]]] = {"A": {}, "B": {}}
    try:
        tools: str | None = None
        built: dict[str, Path] = {}  # fingerprint of the kernel sources -> tree built with them
        for label, side in sides.items():
            if side["tree"] is None:
                tree = tmp / f"{label}-{side['sha']}"
                _git(repo, "worktree", "add", "--detach", "-q", str(tree), side["full"])
                added.append(tree)
                side["tree"] = tree
                key = hashlib.sha1(" ".join(
                    _git(repo, "rev-parse", f"{side['full']}:{p}")
                    for p in (FAST_DIR, "setup.py")).encode()).hexdigest()
                if key in built:
                    _copy_extensions(built[key], tree)
                    _log(f"  {label}: same kernel sources as {built[key].name}: extensions copied")
                else:
                    if tools is None:
                        tools = _build_tools(args.build_tools) or ""
                    _build(tree, tools or None)
                    built[key] = tree
            _check_imports(label, side["tree"])
            _log(f"{label} = {side['rev']} ({side['sha']}): {side['tree']}")

        creates: dict[str, list[float]] = {"A": [], "B": []}
        for rep in range(args.repeats):
            if args.create_logs:
                for label in ("A", "B"):
                    r = _run(sides[label]["tree"], {"create_logs": args.create_logs})
                    creates[label].append(r["create_log_us"])
                    _log(f"  run {rep + 1}/{args.repeats} create_log {label}: "
                         f"{r['create_log_us']:.2f} us/log")
            for n in sizes:
                overrides: dict[str, Any] = {"topics.0.partitions": n}
                if args.duration is not None:
                    overrides["duration_s"] = args.duration
                for label in ("A", "B"):
                    r = _run(sides[label]["tree"], {"overrides": overrides,
                                                    "setup_only": args.setup_only})
                    results[label].setdefault(n, []).append(r)
                    wall = f"wall {r['wall']:.2f} s, " if "wall" in r else ""
                    _log(f"  run {rep + 1}/{args.repeats} {n:,} partitions {label}: {wall}"
                         f"setup {r['setup']:.3f} s ({r['logs']:,} logs)")

        print(f"\nA = {args.a} ({sides['A']['sha']}), B = {args.b} ({sides['B']['sha']}); "
              f"{args.repeats} run(s) each, interleaved A B A B; medians, ratio A/B "
              f"(> 1: B faster)")
        metrics = [("setup", "setup s")] if args.setup_only else [
            ("wall", "wall s"), ("setup", "setup s"), ("run", "run s")]
        print(f"  {'partitions':>10} {'metric':>8} {'A':>9} {'B':>9} {'A/B':>7}")
        if args.create_logs:
            ca, cb = _median(creates["A"]), _median(creates["B"])
            print(f"  {'-':>10} {'create_log us':>8} {ca:>9.2f} {cb:>9.2f} {ca / cb:>6.2f}x")
        for n in sizes:
            for key, name in metrics:
                col = {}
                for label in ("A", "B"):
                    rows = results[label][n]
                    if key == "run":
                        col[label] = _median([r["wall"] - r["setup"] for r in rows])
                    else:
                        col[label] = _median([r[key] for r in rows])
                ratio = col["A"] / col["B"] if col["B"] else float("nan")
                print(f"  {n:>10,} {name:>8} {col['A']:>9.3f} {col['B']:>9.3f} {ratio:>6.2f}x")
            a0, b0 = results["A"][n][0], results["B"][n][0]
            per_log = [_median([r["setup"] for r in results[s][n]]) / results[s][n][0]["logs"]
                       * 1e6 for s in ("A", "B")]
            print(f"  {n:>10,} {'setup/log':>8} {per_log[0]:>7.1f}us {per_log[1]:>7.1f}us")
            if not args.setup_only:
                same = a0["summary_md5"] == b0["summary_md5"]
                print(f"  {n:>10,} summary: {'identical' if same else 'DIFFERS'} "
                      f"(events A {a0['events']:,} / B {b0['events']:,}, lost acked "
                      f"{a0['lost_acked_records']} / {b0['lost_acked_records']})")
        if args.json:
            with open(args.json, "w", encoding="utf-8") as fh:
                json.dump({"a": args.a, "b": args.b, "sides": {
                    k: {"rev": v["rev"], "sha": v["sha"]} for k, v in sides.items()},
                    "results": results, "create_log_us": creates}, fh, indent=2,
                    default=str)
    finally:
        if args.keep:
            _log(f"worktrees kept under {tmp}")
        else:
            for tree in added:
                subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force",
                                str(tree)], check=False)
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
