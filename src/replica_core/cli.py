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


def _summary_table(summary: dict, run_info: dict) -> str:
    def fmt(value: object) -> str:
        if isinstance(value, dict) and "p50" in value:
            return f"p50 {value['p50']:g}  p99 {value['p99']:g}  max {value['max']:g}"
        if isinstance(value, float):
            return f"{value:,.3f}"
        if isinstance(value, int):
            return f"{value:,}"
        return str(value)

    rows = [
        ("scenario", summary.get("scenario_name")), ("seed", summary.get("seed")),
        ("truncation", summary.get("truncation")), ("brokers", summary.get("brokers")),
        ("partitions", summary.get("partitions")), ("simulated seconds", summary["sim_seconds"]),
        ("events", summary["events"]), ("acked records", summary["acked_records"]),
        ("lost acked records", summary["lost_acked_records"]),
        ("diverged partitions", summary["diverged_partitions"]),
        ("offline partition-seconds", summary["offline_partition_seconds"]),
        ("under-min-ISR partition-seconds", summary["under_min_isr_partition_seconds"]),
        ("ISR shrinks / expands", f"{summary['isr_shrinks']:,} / {summary['isr_expands']:,}"),
        ("leader elections (unclean)",
         f"{summary['leader_elections']:,} ({summary['unclean_elections']:,})"),
        ("produce latency ms", summary["produce_latency_ms"]),
        ("replication lag records", summary["replication_lag_records"]),
        ("wall seconds", run_info.get("wall_seconds")),
        ("speed vs real time", f"{run_info.get('speed_vs_real_time')}x"),
    ]
    width = max(len(k) for k, _ in rows)
    lost = summary.get("lost_acked_records_by_cause", {})
    if any(lost.values()):
        causes = ", ".join(f"{k} {v:,}" for k, v in lost.items() if v)
        rows.insert(9, ("  by cause", causes))
        width = max(width, len("  by cause"))
    return "\n".join(f"{k:<{width}}  {fmt(v)}" for k, v in rows)


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
        return scenario_mod.load(path, overrides)
    except (InvalidConfigurationError, OSError) as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return None


def _cmd_simulate(args: argparse.Namespace) -> int:
    from replica_core.errors import InvalidConfigurationError
    from replica_core.sim.invariants import InvariantViolation
    from replica_core.sim.run import run_scenario, write_outputs

    scenario = _load_scenario(args, "replica-core simulate")
    if scenario is None:
        return 2
    out = Path(args.out) if args.out else Path("out") / scenario.name
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
    print(f"wrote {paths['summary']}, {paths['run']}, {paths['report']}")
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

    scenario = _load_scenario(args, "replica-core shard", {"fetcher_lanes": True})
    if scenario is None:
        return 2
    if not _need_spark("replica-core shard"):
        return 2
    lanes = lane_count(scenario)
    if lanes == 1:
        print("replica-core shard: num.replica.fetchers is 1, so the cluster is one lane and "
              "runs as one task (set num.replica.fetchers to split it)", file=sys.stderr)
    out = Path(args.out) if args.out else Path("out") / f"shard-{scenario.name}"
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
    print(f"wrote {out / 'summary.json'}, {out / 'run.json'}, {out / 'report.html'}")
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

    try:
        grid = load_grid(args.grid)
    except (InvalidConfigurationError, OSError) as exc:
        print(f"replica-core sweep: {exc}", file=sys.stderr)
        return 2
    if not _need_spark("replica-core sweep"):
        return 2
    out = Path(args.out or Path("out") / f"sweep-{Path(args.grid).stem}")
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
    simulate.add_argument("--out", metavar="DIR", help="output directory (default ./out/<name>)")
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
    shard.add_argument("--out", metavar="DIR", help="output directory (default ./out/shard-NAME)")
    shard.set_defaults(func=_cmd_shard)

    sub.add_parser(
        "dump-log",
        help="print .log/.index/.timeindex/.snapshot/.checkpoint files like Kafka's "
        "kafka-dump-log.sh, with its decoders (--offsets-decoder, --transaction-log-decoder, "
        "--cluster-metadata-decoder)",
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
