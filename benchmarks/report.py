"""Run the record benchmarks once and print, per shape, throughput and the ratios that matter.

    python benchmarks/report.py [--json out.json] [--from-json out.json] [-- extra pytest args]

Ratios come from one run (the machine is shared and noisy; only same-run ratios mean anything):
``x aiokafka`` = aiokafka time / our time (throughput ratio, target >= 4 for validate+assign,
uncompressed), ``% CRC`` = crc32c-package time / our time (share of raw CRC-32C throughput,
target >= 40 % on the 1 KB-record shapes, uncompressed). Medians are the headline; minimums are
printed too because they are least disturbed by other processes.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
OURS = ["ours_validate_assign", "ours_validate_assign_copy", "ours_scan_validate",
        "ours_append_path", "records_validate_and_assign"]
PEERS = ["aiokafka_c", "kafka_python"]
TARGET_AIO = 4.0
TARGET_CRC = 0.40


def run_pytest(json_path: Path, extra: list[str]) -> None:
    cmd = [sys.executable, "-m", "pytest", str(HERE / "bench_records.py"), "-q",
           "-p", "no:cacheprovider", "--benchmark-only", f"--benchmark-json={json_path}",
           "--benchmark-max-time=0.5", "--benchmark-min-rounds=10", "--benchmark-warmup=on",
           "--benchmark-columns=min,median,rounds", "--benchmark-sort=name", *extra]
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=HERE.parent, stdout=subprocess.DEVNULL)


def load(json_path: Path) -> dict[str, dict[str, dict]]:
    data = json.loads(json_path.read_text())
    groups: dict[str, dict[str, dict]] = {}
    for b in data["benchmarks"]:
        name = b["name"].split("[")[0].removeprefix("test_")
        groups.setdefault(b["group"], {})[name] = {
            "median": b["stats"]["median"], "min": b["stats"]["min"],
            "bytes": b["extra_info"]["bytes"],
        }
    return groups


def report(groups: dict[str, dict[str, dict]]) -> int:
    misses = 0
    order = sorted(groups, key=lambda g: (g.split("-")[0] != "none", g.split("-")[1],
                                          g.split("-")[2]))
    for group in order:
        g = groups[group]
        nbytes = next(iter(g.values()))["bytes"]
        print(f"\n== {group}  ({nbytes:,} bytes)")
        print(f"   {'contender':28s} {'median us':>10s} {'GB/s':>6s} {'x aiokafka':>11s} "
              f"{'% CRC':>7s}   (min-based: x aio, % CRC)")
        for name in ["crc32c_raw", *OURS, *PEERS]:
            if name not in g:
                continue
            t, tmin = g[name]["median"], g[name]["min"]
            cells = [f"   {name:28s} {t * 1e6:10.1f} {nbytes / t / 1e9:6.2f}"]
            if "aiokafka_c" in g and "crc32c_raw" in g:
                aio, crc = g["aiokafka_c"], g["crc32c_raw"]
                cells.append(f" {aio['median'] / t:10.1f}x {crc['median'] / t:7.0%}")
                cells.append(f"   ({aio['min'] / tmin:.1f}x, {crc['min'] / tmin:.0%})")
            print("".join(cells))
        if group.startswith("none-") and "ours_validate_assign" in g:
            t = g["ours_validate_assign"]["median"]
            x_aio = g["aiokafka_c"]["median"] / t
            x_crc = g["crc32c_raw"]["median"] / t
            needs_crc = "1KB" in group
            ok = x_aio >= TARGET_AIO and (x_crc >= TARGET_CRC or not needs_crc)
            misses += not ok
            print(f"   target validate+assign: >= {TARGET_AIO:.0f}x aiokafka"
                  + (f", >= {TARGET_CRC:.0%} CRC" if needs_crc else "")
                  + f" -> {'MET' if ok else 'MISSED'}")
    return misses


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--json", type=Path, help="where to keep pytest-benchmark's JSON")
    ap.add_argument("--from-json", type=Path, help="only print the report for an earlier run")
    ap.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = ap.parse_args()
    if args.from_json:
        json_path = args.from_json
    else:
        json_path = args.json or Path(tempfile.mkstemp(suffix=".json", prefix="bench_records_")[1])
        run_pytest(json_path, args.pytest_args)
        print(f"JSON: {json_path}")
    misses = report(load(json_path))
    print(f"\n{'all uncompressed validate+assign targets met' if not misses else f'{misses} target(s) missed'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
