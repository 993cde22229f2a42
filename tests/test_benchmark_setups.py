"""The benchmark scripts' own set-ups still build what they measure (they are not run by the
test suite otherwise, and a set-up the product has outgrown fails only when someone runs it)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from replica_core.fetcher import FETCHING

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_bench_fetcher_pair_follows_every_partition_and_fetches_new_data():
    """The fetch-round benchmark's leader/follower pair: one fetcher, every partition caught up;
    a produced batch is then fetched in one measured round."""
    bench = _load("bench_fetcher")
    pair = bench.Pair(20)
    assert len(pair.rms[1].fetcher_manager.fetchers) == 1
    states = list(pair.fetcher.partition_states.partition_state_values())
    assert len(states) == 20 and all(s.state is FETCHING and s.lag == 0 for s in states)
    follower_logs = [pair.rms[1].local_log(tp) for tp in pair.tps]
    before = [lg.log_end_offset for lg in follower_logs]
    pair.produce()
    build, serve, process = pair.round()
    assert min(build, serve, process) >= 0
    assert [lg.log_end_offset for lg in follower_logs] == [b + 1 for b in before]
