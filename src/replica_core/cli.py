"""The ``replica-core`` command line.

Subcommands import their layer lazily so that ``--help`` and ``--version`` stay instant.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from replica_core import __version__


def _cmd_verify(args: argparse.Namespace) -> int:
    from replica_core.storage.dump import find_log_dirs, verify_log_dir

    status = 0
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
    return status


def _cmd_dump_log(argv: list[str]) -> int:
    from replica_core.storage.dump import main as dump_main

    return dump_main(argv)


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

    sub.add_parser(
        "dump-log",
        help="print .log/.index/.timeindex files like Kafka's kafka-dump-log.sh",
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


if __name__ == "__main__":
    sys.exit(main())
