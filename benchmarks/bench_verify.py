"""``verify`` on a log directory whose indexes were left preallocated by an unclean stop.

    python benchmarks/bench_verify.py [--partitions 32] [--rounds 5] [--before-rev abfa4c6]
    pytest benchmarks/bench_verify.py --benchmark-only -p no:cacheprovider

Three copies of the same log directory (``--partitions`` partitions of one segment each, 40
batches, real index entries written by our log) differ only in their index files:

* ``trimmed``: as a clean shutdown leaves them (entries only);
* ``sparse``: the active segment's ``.index``/``.timeindex`` at Kafka's preallocated sizes
  (10 MiB, 10485756 bytes), the tail a hole -- what a broker leaves after an unclean stop;
* ``zeros``: the same sizes with the zeros written out (a copy that lost the holes: ``cp``
  without ``--sparse``, an archive, a file system without holes).

Each is verified by the current ``verify_log_dir`` (``after``) and by the one of
``--before-rev`` (``before``: the module as it was at that commit, loaded from ``git show``;
skipped when git or the commit is not there). Rounds alternate between the contenders (the
machine is shared; only same-run ratios mean anything); medians and minimums are printed. The
target (issue 16): ``after`` on ``sparse`` and ``zeros`` costs about what ``trimmed`` costs.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from replica_core.clock import ManualClock
from replica_core.records import build_batch
from replica_core.storage.config import LogConfig
from replica_core.storage.dump import verify_log_dir
from replica_core.storage.log import Log

REPO = Path(__file__).resolve().parents[1]
BEFORE_REV = "abfa4c6"  # the last commit before the preallocated-index work
INDEX_BYTES = 10 * 1024 * 1024
TIME_INDEX_BYTES = INDEX_BYTES // 12 * 12
T0 = 1_700_000_000_000
LAYOUTS = ("trimmed", "sparse", "zeros")


def build_dirs(root: Path, partitions: int) -> dict[str, Path]:
    """The three log directories of the module docstring under ``root``."""
    trimmed = root / "trimmed"
    for p in range(partitions):
        log = Log.open(str(trimmed / f"bench-{p}"),
                       LogConfig.from_properties({"index.interval.bytes": 4096}),
                       clock=ManualClock(T0))
        for i in range(40):
            log.append_as_leader(build_batch([b"x" * 1000] * 4, timestamps=[T0 + i] * 4), 1)
        log.flush()
        log.close()
    out = {"trimmed": trimmed}
    for layout in ("sparse", "zeros"):
        d = root / layout
        shutil.copytree(trimmed, d)
        for part in d.iterdir():
            for name, size in (("00000000000000000000.index", INDEX_BYTES),
                               ("00000000000000000000.timeindex", TIME_INDEX_BYTES)):
                path = part / name
                if layout == "sparse":
                    os.truncate(path, size)
                else:
                    with open(path, "ab") as fh:
                        fh.write(b"\0" * (size - path.stat().st_size))
        out[layout] = d
    return out


def load_before(rev: str) -> Callable | None:
    """``verify_log_dir`` of ``storage/dump.py`` at ``rev``, or None."""
    try:
        src = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:src/replica_core/storage/dump.py"],
                             check=True, capture_output=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    tmp = Path(tempfile.mkdtemp(prefix="bench-verify-before-")) / "dump_before.py"
    tmp.write_bytes(src)
    spec = importlib.util.spec_from_file_location("replica_core_dump_before", tmp)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while defining
    spec.loader.exec_module(module)
    return module.verify_log_dir


def _warm(path: Path) -> None:
    # The page cache is warm for every contender alike (each layout is read once before timing).
    for f in path.rglob("*"):
        if f.is_file():
            with open(f, "rb") as fh:
                fh.read(1)


def run(partitions: int, rounds: int, before_rev: str) -> dict[tuple[str, str], list[float]]:
    contenders: dict[str, Callable] = {"after": verify_log_dir}
    before = load_before(before_rev)
    if before is not None:
        contenders["before"] = before
    else:
        print(f"(no 'before': git show {before_rev}:src/replica_core/storage/dump.py failed)")
    times: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-verify-") as tmp:
        dirs = build_dirs(Path(tmp), partitions)
        for d in dirs.values():
            _warm(d)
        for _ in range(rounds):
            for layout in LAYOUTS:
                for name, fn in contenders.items():
                    t = time.perf_counter()
                    report = fn(str(dirs[layout]))
                    times.setdefault((name, layout), []).append(time.perf_counter() - t)
                    if name == "after":
                        assert report.ok, report.render()
    return times


def report(times: dict[tuple[str, str], list[float]], partitions: int) -> str:
    lines = [f"verify of {partitions} partitions (1 segment, 40 batches each); seconds per run",
             f"{'contender':<9} {'layout':<8} {'median':>9} {'min':>9} {'vs trimmed':>11}"]
    for (name, layout), ts in sorted(times.items(), key=lambda kv: (kv[0][0], LAYOUTS.index(kv[0][1]))):
        base = statistics.median(times[(name, "trimmed")])
        med = statistics.median(ts)
        lines.append(f"{name:<9} {layout:<8} {med:9.4f} {min(ts):9.4f} {med / base:10.1f}x")
    return "\n".join(lines)


# --- pytest-benchmark entry points ---------------------------------------------------------------
@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    return build_dirs(tmp_path_factory.mktemp("verify"), 16)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_verify_after(benchmark, dirs, layout):
    benchmark.group = f"verify-{layout}"
    report = benchmark(verify_log_dir, str(dirs[layout]))
    assert report.ok


@pytest.mark.parametrize("layout", LAYOUTS)
def test_verify_before(benchmark, dirs, layout):
    fn = load_before(BEFORE_REV)
    if fn is None:
        pytest.skip(f"{BEFORE_REV} not available")
    benchmark.group = f"verify-{layout}"
    benchmark(fn, str(dirs[layout]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--before-rev", default=BEFORE_REV)
    args = ap.parse_args(argv)
    print(report(run(args.partitions, args.rounds, args.before_rev), args.partitions))
    return 0


if __name__ == "__main__":
    sys.exit(main())
