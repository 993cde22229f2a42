"""The ``replica-core`` command line.

Subcommands import their layer lazily so that ``--help`` and ``--version`` stay instant.
"""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from replica_core import __version__


def _cmd_verify(args: argparse.Namespace) -> int:
    from replica_core.storage.dump import find_log_dirs, silence_closed_stdout, verify_log_dir

    status = 0
    try:
        for root in args.paths:
            log_dirs = find_log_dirs(root)
            if not log_dirs:
                print(f"{root}: no Kafka log directory found", file=sys.stderr)
                status = 2
                continue
            for log_dir in log_dirs:
                report = verify_log_dir(log_dir)
                print(report.render(verbose=args.verbose))
                if not report.ok:
                    status = 1
    except BrokenPipeError:  # `verify ... | head`: stop quietly, keeping the status so far
        silence_closed_stdout()
    return status


def _progress_bar(stream: TextIO) -> Callable[[float, float, int], None]:
    """A plain-text progress bar on ``stream`` (redrawn in place on a terminal)."""
    width = 30
    tty = stream.isatty()
    state = {"last": -1}

    def show(done_s: float, total_s: float, events: int) -> None:
        frac = 0.0 if total_s <= 0 else min(1.0, done_s / total_s)
        pct = int(frac * 100)
        if not tty and pct < 100 and pct - state["last"] < 10:
            return
        state["last"] = pct
        bar = "#" * int(frac * width) + "." * (width - int(frac * width))
        line = f"[{bar}] {pct:3d}%  {done_s:7.1f}/{total_s:.1f} s simulated  {events:,} events"
        if tty:
            stream.write("\r" + line + ("\n" if pct >= 100 else ""))
        else:
            stream.write(line + "\n")
        stream.flush()

    return show


def _n(value: float, unit: str = "") -> str:
    """A number for people: thousands separators, at most one decimal, a unit (a positive
    value too small for one decimal is "< 0.1", never "0.0")."""
    if 0 < float(value) < 0.05:
        text = "< 0.1"
    else:
        text = f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"
    return f"{text} {unit}".rstrip()


def _summary_table(summary: dict, run_info: dict) -> str:
    """The console summary: configuration, what clients saw, durability, the verdict last."""
    def dist(d: dict) -> str:
        return f"p50 {d['p50']:,g}  p99 {d['p99']:,g}  max {d['max']:,g}"

    cfg = summary.get("config", {})
    overrides = cfg.get("overrides") or {}
    acks = cfg.get("scenario", {}).get("workload", {}).get("acks", "all")
    by_cause = summary.get("unavailable_partition_seconds_by_cause", {})
    causes = ", ".join(f"{k.replace('_', ' ').replace('isr', 'ISR')} {_n(v)}"
                       for k, v in by_cause.items() if v)
    origins = summary.get("isr_changes_by_origin", {})

    def origin(name: str, way: str) -> int:
        return int(origins.get(name, {}).get(way, 0))

    ctrl_shrinks = sum(int(v.get("shrink", 0)) for k, v in origins.items()
                       if k != "alter_partition")
    errors = summary.get("producer_errors", {})
    error_text = ", ".join(f"{k} {v:,}" for k, v in errors.items()) or "none"
    fetch = summary.get("fetch_path", {}).get("total", {})
    rows = [
        ("scenario", f"{summary.get('scenario_name')} (config {cfg.get('fingerprint', '?')})"),
        ("overrides", ", ".join(f"{k}={v}" for k, v in overrides.items()) or "none"),
        ("seed / truncation", f"{summary.get('seed')} / {summary.get('truncation')}"),
        ("brokers / partitions", f"{summary.get('brokers'):,} / {summary.get('partitions'):,}"),
        ("simulated", _simulated(summary)),
        ("acked records", f"{summary['acked_records']:,} (acks={acks})"),
        ("lost acked records", f"{summary['lost_acked_records']:,}"),
        ("diverged partitions", f"{summary['diverged_partitions']:,}"),
        ("duplicates / reordered", (
            f"{summary.get('duplicate_batches', 0):,} batches written twice / "
            f"{summary.get('reordered_batches', 0):,} batches out of produce order; "
            f"a consumer reads {summary.get('duplicated_records', 0):,} records twice, "
            f"{summary.get('reordered_records', 0):,} out of order")),
        ("unavailable to producers",
         f"{_n(summary.get('unavailable_partition_seconds', 0), 'partition-s')}"
         + (f" ({causes})" if causes else "")),
        ("offline (controller view)", _n(summary["offline_partition_seconds"], "partition-s")),
        ("under-replicated", _n(summary.get("under_replicated_partition_seconds", 0),
                                "partition-s")),
        ("under min ISR", _n(summary["under_min_isr_partition_seconds"], "partition-s")),
        ("ISR shrinks / expands",
         f"{summary['isr_shrinks']:,} / {summary['isr_expands']:,} (leaders "
         f"{origin('alter_partition', 'shrink'):,} / {origin('alter_partition', 'expand'):,}, "
         f"controller removals {ctrl_shrinks:,})"),
        ("leader elections (unclean)",
         f"{summary['leader_elections']:,} ({summary['unclean_elections']:,})"),
        ("producer errors", error_text),
        ("producer retries / failed",
         f"{summary.get('producer_retries', 0):,} / {summary.get('failed_batches', 0):,} batches"),
        ("produce latency ms", dist(summary["produce_latency_ms"])),
        ("replication lag records", dist(summary["replication_lag_records"])),
    ]
    if fetch:
        rows.append(("follower fetches", (
            f"{_n(fetch.get('follower_fetch_requests_per_s', 0))}/s; "
            f"{fetch.get('incremental_fetches', 0):,} incremental, "
            f"{fetch.get('full_fetches', 0):,} full, "
            f"{fetch.get('session_evictions', 0):,} session evictions; delayed "
            f"{fetch.get('delayed_fetches_completed', 0):,} completed / "
            f"{fetch.get('delayed_fetches_expired', 0):,} expired")))
    for r in summary.get("fault_recovery", []):
        steps = [f"{label} +{r[key]:g} s" for key, label in (
            ("detected_after_s", "detected"), ("leaders_after_s", "leaders"),
            ("writable_after_s", "writable"), ("isr_full_after_s", "ISRs full"))
            if r.get(key) is not None]
        rows.append((f"  {_at(r['at_s'])} {r['fault']}", ", ".join(steps) or "no effect seen"))
    from replica_core.sim.report import feature_lines, storage_fault_lines

    rows += storage_fault_lines(summary)
    rows += feature_lines(summary)
    rows += [("wall seconds", f"{run_info.get('wall_seconds')}"),
             ("speed vs real time", f"{run_info.get('speed_vs_real_time')}x")]
    lost = summary.get("lost_acked_records_by_cause", {})
    if any(lost.values()):
        causes = ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in lost.items() if v)
        rows.insert(7, ("  by cause", causes))
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    verdict = summary.get("verdict", {}).get("line")
    if verdict:
        lines.append(f"{'verdict':<{width}}  {verdict}")
    return "\n".join(lines)


def _at(seconds: float) -> str:
    """A time on the run's clock: seconds, or the day of a horizon."""
    return f"{seconds:g} s" if seconds < 86_400 else f"day {seconds / 86_400:.2f}"


def _simulated(summary: dict) -> str:
    """Simulated time and events; a horizon run says how much of it its episodes covered."""
    text = f"{_n(summary['sim_seconds'], 's')}, {summary['events']:,} events"
    h = summary.get("horizon")
    if not h:
        return text
    unsettled = h["unsettled_episodes"]
    return (f"{h['days']:g} day{'' if h['days'] == 1 else 's'}: {h['episodes']:,} fault episodes ({h['faults']:,} faults), "
            f"{_n(h['simulated_seconds'], 's')} simulated "
            f"({100 * h['simulated_fraction']:.2g} % of the horizon), {summary['events']:,} "
            f"events; " + ("every episode ended healthy" if not unsettled
                           else f"{unsettled:,} episodes did not end healthy"))


def _default_out(scenario, prefix: str = "") -> Path:
    """``out/<name>`` for a scenario run as written; with overrides ``out/<name>--<k=v,...>``
    naming them, or ``out/<name>--<fingerprint>`` when that would be too long."""
    import re

    name = f"{prefix}{scenario.name}"
    if not scenario.overrides:
        return Path("out") / name
    slug = ",".join(f"{k}={v}" for k, v in sorted(scenario.overrides.items()))
    slug = re.sub(r"[^A-Za-z0-9._=,+-]", "_", slug)
    if len(slug) > 60:
        slug = scenario.fingerprint()
    return Path("out") / f"{name}--{slug}"


def _check_out(out: Path, *, fingerprint: str | None = None, force: bool = False
               ) -> str | None:
    """Why ``out`` cannot take this run's outputs (None: it can), found before any work:
    a file in the way, a directory that cannot be created or written (read-only file
    system, permissions), or — unless ``force`` — a directory holding another run's
    summary (a different configuration fingerprint)."""
    import errno
    import json
    import tempfile

    if out.exists() and not out.is_dir():
        return f"--out {out}: is a file, not a directory"
    probe = out
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if not probe.is_dir():
        return f"--out {out}: {probe} is a file, not a directory"
    try:
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError as e:
        why = "read-only file system" if e.errno == errno.EROFS else (e.strerror or str(e))
        return f"--out {out}: cannot write in {probe} ({why})"
    existing = out / "summary.json"
    if fingerprint is not None and not force and existing.is_file():
        try:
            old = json.loads(existing.read_text())["config"]["fingerprint"]
        except (OSError, ValueError, KeyError, TypeError):
            old = None
        if old != fingerprint:
            return (f"--out {out}: holds another run (config {old or 'unknown'}, this one is "
                    f"{fingerprint}); give another --out or --force to replace it")
    return None


def _load_scenario(args: argparse.Namespace, prog: str, extra: dict | None = None):
    """The scenario named on the command line with --seed/--set applied (None: error shown)."""
    from replica_core.errors import InvalidConfigurationError
    from replica_core.sim import scenario as scenario_mod

    try:
        overrides = scenario_mod.parse_overrides(args.set or [])
        if args.seed is not None:
            overrides["seed"] = args.seed
        overrides.update(extra or {})
        path = args.scenario or scenario_mod.default_scenario_path()
        if args.scenario and not Path(path).is_file():
            named = scenario_mod.examples_dir() / f"{args.scenario}.toml"
            if named.is_file():
                path = named
        scenario = scenario_mod.load(path, overrides)
    except (InvalidConfigurationError, OSError) as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return None
    for warning in scenario.warnings():
        print(f"{prog}: warning: {warning}", file=sys.stderr)
    return scenario


def _cmd_simulate(args: argparse.Namespace) -> int:
    from replica_core.errors import InvalidConfigurationError
    from replica_core.sim.invariants import InvariantViolation
    from replica_core.sim.run import run_scenario, unexplained_losses, write_outputs

    scenario = _load_scenario(args, "replica-core simulate")
    if scenario is None:
        return 2
    out = Path(args.out) if args.out else _default_out(scenario)
    problem = _check_out(out, fingerprint=scenario.fingerprint(), force=args.force)
    if problem is not None:
        print(f"replica-core simulate: {problem}", file=sys.stderr)
        return 2
    progress = None if args.quiet else _progress_bar(sys.stderr)
    try:
        summary, timeseries, run_info = run_scenario(scenario, progress=progress)
    except InvariantViolation as e:
        print(f"\n{e}", file=sys.stderr)
        return 3
    except InvalidConfigurationError as e:
        print(f"replica-core simulate: {e}", file=sys.stderr)
        return 2
    paths = write_outputs(out, summary, timeseries, run_info)
    print(_summary_table(summary, run_info))
    print(f"wrote {paths['summary']}, {paths['run']}, {paths['timeseries']}, {paths['report']}")
    unexplained = unexplained_losses(summary)
    if unexplained:
        print(f"replica-core simulate: {unexplained:,} acknowledged records were lost in a way "
              f"no fault or setting of the run explains (see loss_events)", file=sys.stderr)
        return 3
    return 0


def _need_spark(prog: str) -> bool:
    """PySpark (and a JVM) are optional: say how to get them instead of a traceback."""
    import importlib.util
    import shutil

    if importlib.util.find_spec("pyspark") is None:
        print(f"{prog}: needs PySpark: pip install \"replica-core[spark]\" (or pip install "
              "'.[spark]' in a checkout), and Java 17", file=sys.stderr)
        return False
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        print(f"{prog}: PySpark needs a JVM: install Java 17 (java on PATH or JAVA_HOME)",
              file=sys.stderr)
        return False
    return True


def _cmd_shard(args: argparse.Namespace) -> int:
    from replica_core.errors import InvalidConfigurationError
    from replica_core.sim.invariants import InvariantViolation
    from replica_core.sim.lanes import lane_count
    from replica_core.spark import run_sharded

    if args.shards is not None and args.shards < 1:
        print(f"replica-core shard: --shards needs a number ≥ 1, got {args.shards}",
              file=sys.stderr)
        return 2
    scenario = _load_scenario(args, "replica-core shard", {"fetcher_lanes": True})
    if scenario is None:
        return 2
    out = Path(args.out) if args.out else _default_out(scenario, "shard-")
    problem = _check_out(out, fingerprint=scenario.fingerprint(), force=args.force)
    if problem is not None:
        print(f"replica-core shard: {problem}", file=sys.stderr)
        return 2
    if not _need_spark("replica-core shard"):
        return 2
    lanes = lane_count(scenario)
    if lanes == 1:
        print("replica-core shard: num.replica.fetchers is 1, so the cluster is one lane and "
              "runs as one task (set num.replica.fetchers to split it)", file=sys.stderr)
    print(f"{scenario.total_partitions:,} partitions in {lanes} fetcher lanes over "
          f"{min(lanes, args.shards or lanes)} Spark tasks -> {out}", file=sys.stderr)
    try:
        summary, _series, run_info = run_sharded(scenario, shards=args.shards,
                                                 master=args.master, out_dir=out)
    except InvariantViolation as e:
        print(f"\n{e}", file=sys.stderr)
        return 3
    except InvalidConfigurationError as e:
        print(f"replica-core shard: {e}", file=sys.stderr)
        return 2
    print(_summary_table(summary, run_info))
    print(f"wrote {out / 'summary.json'}, {out / 'run.json'}, {out / 'timeseries.csv'}, "
          f"{out / 'report.html'}")
    return 0


def _cmd_dump_log(argv: list[str]) -> int:
    from replica_core.storage.dump import main as dump_main
    from replica_core.storage.dump import silence_closed_stdout

    try:
        return dump_main(argv)
    except BrokenPipeError:  # `dump-log ... | head`: the reader has what it wanted
        silence_closed_stdout()
        return 0


def _cmd_sweep(args: argparse.Namespace) -> int:
    from replica_core.errors import InvalidConfigurationError
    from replica_core.spark import run_sweep
    from replica_core.sweep import load_grid

    if args.slices is not None and args.slices < 1:
        print(f"replica-core sweep: --slices needs a number ≥ 1, got {args.slices}",
              file=sys.stderr)
        return 2
    try:
        grid = load_grid(args.grid)
    except (InvalidConfigurationError, OSError) as exc:
        print(f"replica-core sweep: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out or Path("out") / f"sweep-{Path(args.grid).stem}")
    problem = _check_out(out)
    if problem is not None:
        print(f"replica-core sweep: {problem}", file=sys.stderr)
        return 2
    if not _need_spark("replica-core sweep"):
        return 2
    print(f"{len(grid.rows())} runs: {grid.n_configs} configurations x {grid.seeds} seeds "
          f"-> {out}", file=sys.stderr)
    run_sweep(grid, master=args.master, out_dir=out, slices=args.slices)
    print((out / "summary.md").read_text())
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="replica-core",
        description="Kafka's replication and log storage core: verify and dump Kafka log "
        "directories, simulate clusters under failures.",
    )
    parser.add_argument("--version", action="version", version=f"replica-core {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    verify = sub.add_parser(
        "verify",
        help="check Kafka log directories: framing, CRCs, offsets, indexes, checkpoints",
        description="Verify every partition of every Kafka log directory found under PATH "
        "(a log dir, a partition dir, or any folder containing log dirs). Read-only.",
    )
    verify.add_argument("paths", nargs="+", metavar="PATH")
    verify.add_argument("-v", "--verbose", action="store_true", help="one line per partition")
    verify.set_defaults(func=_cmd_verify)

    simulate = sub.add_parser(
        "simulate",
        help="run a deterministic cluster simulation with faults; write summary.json, "
        "run.json and report.html",
        description="Simulate a Kafka cluster (brokers, controller, producers) built from "
        "replica_core's components under the faults of SCENARIO (a TOML file or the name of a "
        "shipped example; default: the embedded default scenario). Same scenario and seed give "
        "a byte-identical summary.json.",
    )
    simulate.add_argument("scenario", nargs="?", metavar="SCENARIO.toml")
    simulate.add_argument("--seed", type=int, help="override the scenario's seed")
    simulate.add_argument("--set", action="append", metavar="KEY=VALUE",
                          help="override a scenario key (truncation=high_watermark, "
                          "cluster.brokers=6, topics.0.partitions=100) or a Kafka config "
                          "(replica.lag.time.max.ms=10000); repeatable")
    simulate.add_argument("--out", metavar="DIR",
                          help="output directory (default ./out/NAME, or ./out/NAME--KEY=VALUE,... "
                          "naming the overrides; a directory holding another run is refused)")
    simulate.add_argument("--force", action="store_true",
                          help="replace the outputs of another run in --out")
    simulate.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    simulate.set_defaults(func=_cmd_simulate)

    sweep = sub.add_parser(
        "sweep",
        help="run a grid of configurations x seeds on Spark (local[*] unless --master)",
        description="Simulate every configuration of GRID.toml for each seed inside Spark "
        "mapPartitions; write results.parquet, summary.md, summary.json and tradeoff.svg.",
    )
    sweep.add_argument("grid", metavar="GRID.toml")
    sweep.add_argument("--master", default=None,
                       help="Spark master URL (default: local[*], or spark-submit's)")
    sweep.add_argument("--out", default=None, help="output directory (default ./out/sweep-NAME)")
    sweep.add_argument("--slices", type=int, default=None, help="Spark partitions for the rows")
    sweep.set_defaults(func=_cmd_sweep)

    shard = sub.add_parser(
        "shard",
        help="run one big cluster on Spark, split by fetcher lane (local[*] unless --master)",
        description="Simulate SCENARIO with fetcher_lanes = true: each of its "
        "num.replica.fetchers lanes is an independent cluster run inside Spark mapPartitions, "
        "all with the same broker faults; the merged summary equals what `replica-core "
        "simulate --set fetcher_lanes=true` computes in one process.",
    )
    shard.add_argument("scenario", nargs="?", metavar="SCENARIO.toml")
    shard.add_argument("--shards", type=int, default=None,
                       help="Spark tasks (default: one per lane)")
    shard.add_argument("--master", default=None,
                       help="Spark master URL (default: local[*], or spark-submit's)")
    shard.add_argument("--seed", type=int, help="override the scenario's seed")
    shard.add_argument("--set", action="append", metavar="KEY=VALUE",
                       help="override a scenario key or a Kafka config; repeatable")
    shard.add_argument("--out", metavar="DIR",
                       help="output directory (default ./out/shard-NAME[--overrides])")
    shard.add_argument("--force", action="store_true",
                       help="replace the outputs of another run in --out")
    shard.set_defaults(func=_cmd_shard)

    sub.add_parser(
        "dump-log",
        help="print .log/.index/.timeindex/.snapshot/.checkpoint files like Kafka's "
        "kafka-dump-log.sh, with its decoders (--offsets-decoder, --transaction-log-decoder, "
        "--cluster-metadata-decoder, --key-decoder-class, --value-decoder-class)",
        add_help=False,
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "dump-log":
        return _cmd_dump_log(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    return int(args.func(args) or 0)


def entry() -> int:
    """The ``replica-core`` console script: :func:`main`, then no collection at exit.

    A finished simulation leaves its cluster (millions of objects, many in reference cycles)
    for the cyclic collector; the interpreter's final collection would walk it all (a measured
    0.5-0.6 s after the default scenario) only to free memory the exiting process returns
    anyway. Freezing the heap once the command is done skips that walk; nothing is lost, as
    every output has been written and closed by then."""
    import gc

    rc = main()
    sys.stdout.flush()
    sys.stderr.flush()
    gc.freeze()
    return rc


if __name__ == "__main__":
    sys.exit(entry())
