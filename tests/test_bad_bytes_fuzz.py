"""Issue 19's proof: seeded mutations of real Kafka batches and partition directories through
every entry point that takes outside bytes, on both batch-kernel builds (tests/fuzz_harness.py
says what is checked on every input). A bounded number runs by default; ``-m slow`` runs the
large campaign.
"""
from __future__ import annotations

import collections
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fuzz_harness import ENTRY_POINTS, client_batches, fixture_batches, run_batches, run_dirs

TESTS = Path(__file__).resolve().parent


@pytest.fixture(autouse=True)
def _quiet_recovery_logs():
    """Damaged directories make the loader log warnings by design."""
    logging.disable(logging.ERROR)
    yield
    logging.disable(logging.NOTSET)


def test_the_corpus_is_real_kafka_batches_in_every_codec():
    fixtures = fixture_batches()
    assert len(fixtures) > 1000
    codecs = {b[22] & 7 for b in fixtures} | {b[22] & 7 for b in client_batches()}
    assert codecs == {0, 1, 2, 3, 4}


def _tally(results: list[list]) -> dict[str, collections.Counter]:
    tally = {name: collections.Counter() for name in ENTRY_POINTS}
    for row in results:
        for name, out in zip(ENTRY_POINTS, row, strict=True):
            if name == "produce":   # an answer, not an exception: "ok ..." or "error <code>"
                tally[name]["ok" if out[1].startswith("ok") else out[1]] += 1
            else:
                tally[name][out[0] if out[0] == "ok" else out[1]] += 1
    return tally


@pytest.mark.parametrize("seed", [19, 1919])
def test_batch_entry_points(seed):
    results = run_batches(seed, 400)           # raises FuzzFailure with a reproducer
    tally = _tally(results)
    # the mutations reach past the framing and the CRC: every entry point both accepts and
    # rejects, and the appends see errors from the later checks too
    for name in ENTRY_POINTS:
        assert tally[name]["ok"] > 0, name
        if name != "scan":                     # framing reports, it never raises
            assert sum(tally[name].values()) > tally[name]["ok"], name
    assert {"OffsetsOutOfOrderError", "UnexpectedAppendOffsetError"} <= set(tally["follower"])
    assert {"InvalidRecordError", "CorruptRecordError"} <= set(tally["leader-client"])
    assert {"error 87", "error 2"} <= set(tally["produce"])   # INVALID_RECORD, CORRUPT_MESSAGE


def _campaign(mode: str, seed: int, count: int, pure: bool) -> list:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    env.pop("REPLICA_CORE_PURE", None)
    if pure:
        env["REPLICA_CORE_PURE"] = "1"
    proc = subprocess.run([sys.executable, str(TESTS / "fuzz_harness.py"), mode, str(seed),
                           str(count)], env=env, capture_output=True, text=True, timeout=1800,
                          cwd=TESTS.parent)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_compiled_and_pure_agree_on_every_batch_input():
    native = _campaign("batches", 23, 300, pure=False)
    pure = _campaign("batches", 23, 300, pure=True)
    assert len(native) == len(pure) == 300
    diffs = [(i, name, a, b) for i, (ra, rb) in enumerate(zip(native, pure, strict=True))
             for name, a, b in zip(ENTRY_POINTS, ra, rb, strict=True) if a != b]
    assert not diffs, diffs[:5]


def test_damaged_directories():
    results = run_dirs(19, 120)
    kinds = collections.Counter(r[0] for r in results)
    assert kinds["loaded"] > 0
    assert set(kinds) <= {"loaded", "offline"}


def test_compiled_and_pure_agree_on_every_directory():
    native = _campaign("dirs", 29, 60, pure=False)
    pure = _campaign("dirs", 29, 60, pure=True)
    assert native == pure


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(100, 120))
def test_batch_entry_points_large(seed):
    run_batches(seed, 10_000)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(200, 204))
def test_compiled_and_pure_agree_large(seed):
    assert _campaign("batches", seed, 5_000, pure=False) == \
        _campaign("batches", seed, 5_000, pure=True)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(300, 305))
def test_damaged_directories_large(seed):
    run_dirs(seed, 1_000)
    assert _campaign("dirs", seed, 300, pure=False) == _campaign("dirs", seed, 300, pure=True)
