"""Issue 19, "compressed input that explodes": every decompression is bounded by what the batch
can legitimately hold (its record count times the largest record a broker accepts), claimed
sizes are checked before anything is allocated, and going over is an ``InvalidRecordError``.

The bombs themselves (tests/fuzz_bombs.py) run in a subprocess under an address-space limit,
on both batch-kernel builds: unbounded, each one ends in ``MemoryError`` or kills the process.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import cramjam
import pytest
from fuzz_bombs import BOMBS, gzip_members, lz4_frame, snappy_claim, zstd_rle

from replica_core.errors import Errors, InvalidRecordError
from replica_core.records import build_batch, compress, decompress, iter_batches
from replica_core.records.compression import (
    DEFAULT_MAX_RECORD_BYTES,
    MAX_DECOMPRESSED_BYTES,
    decompressed_limit,
)

TESTS = Path(__file__).resolve().parent
CODECS = ["gzip", "snappy", "lz4", "zstd"]
DATA = b"".join(b"record %05d of a highly repetitive payload; " % i for i in range(4000))


def test_the_limit_is_the_count_times_the_largest_record():
    assert decompressed_limit(0) == 0
    assert decompressed_limit(-5) == 0
    assert decompressed_limit(3) == 3 * DEFAULT_MAX_RECORD_BYTES
    assert decompressed_limit(3, 10 * DEFAULT_MAX_RECORD_BYTES) == 30 * DEFAULT_MAX_RECORD_BYTES
    # a topic limit below the broker default bounds batches, not records
    assert decompressed_limit(3, 1000) == 3 * DEFAULT_MAX_RECORD_BYTES
    assert decompressed_limit(2**31 - 1) == MAX_DECOMPRESSED_BYTES


@pytest.mark.parametrize("codec", CODECS)
def test_bounded_decompression_stops_at_the_limit(codec):
    payload = compress(codec, DATA)
    assert decompress(codec, payload, max_output=len(DATA)) == DATA
    with pytest.raises(InvalidRecordError, match="more than"):
        decompress(codec, payload, max_output=len(DATA) - 1)
    with pytest.raises(InvalidRecordError):
        decompress(codec, payload, max_output=0)


def test_several_gzip_members_count_together():
    member = compress("gzip", DATA[:1000])
    assert decompress("gzip", member * 3, max_output=3000) == DATA[:1000] * 3
    with pytest.raises(InvalidRecordError):
        decompress("gzip", member * 3, max_output=2999)


def test_zstd_frames_are_walked_before_decoding():
    a, b = compress("zstd", DATA[:5000]), compress("zstd", DATA[5000:9000])
    assert decompress("zstd", a + b, max_output=9000) == DATA[:9000]
    with pytest.raises(InvalidRecordError):
        decompress("zstd", a + b, max_output=8999)
    # a declared content size above the limit fails before decoding
    declared = bytes(cramjam.zstd.compress(b"\x00" * 1_000_000))
    with pytest.raises(InvalidRecordError, match="more than"):
        decompress("zstd", declared, max_output=999_999)
    # RLE blocks: exact sizes, known from the block headers alone
    rle = zstd_rle(blocks=4)[61:]
    assert len(decompress("zstd", rle, max_output=4 * 131072)) == 4 * 131072
    with pytest.raises(InvalidRecordError):
        decompress("zstd", rle, max_output=4 * 131072 - 1)


def test_a_raw_snappy_claim_is_checked_before_allocating():
    batch = snappy_claim(claimed=0xFFFFFFFF)
    assert len(batch) < 100
    with pytest.raises(InvalidRecordError, match="more than"):
        decompress("snappy", batch[61:], max_output=MAX_DECOMPRESSED_BYTES)
    raw = bytes(cramjam.snappy.compress_raw(DATA))
    assert decompress("snappy", raw, max_output=len(DATA)) == DATA      # unframed raw snappy
    with pytest.raises(InvalidRecordError):
        decompress("snappy", raw, max_output=len(DATA) - 1)


@pytest.mark.parametrize("codec", CODECS)
def test_a_batch_reads_up_to_its_count_of_records(codec):
    values = [b"x" * 600_000, b"y" * 600_000]          # each under 1 MiB, together over
    batch = build_batch(values, compression=codec, now_ms=0)
    got = [r.value for b in iter_batches(batch) for r in b.records()]
    assert got == values
    # claim one record: the two no longer fit what one record may hold
    lied = bytearray(batch)
    lied[57:61] = (1).to_bytes(4, "big")
    with pytest.raises(InvalidRecordError) as e:
        list(next(iter_batches(bytes(lied))).records())
    assert e.value.code == Errors.INVALID_RECORD
    # a topic whose max.message.bytes allows larger records reads it
    assert len(list(next(iter_batches(batch)).records(2 * 1_048_588))) == 2


def test_bomb_builders_are_what_they_claim():
    """Small instances of each bomb decode to exactly the size their shape says."""
    assert len(decompress("zstd", zstd_rle(blocks=3)[61:])) == 3 * 131072
    assert len(decompress("gzip", gzip_members(members=2, member_bytes=1 << 20)[61:])) == 2 << 20
    assert len(decompress("lz4", lz4_frame(blocks=2)[61:])) == 8 << 20


@pytest.mark.parametrize("build", ["native", "twin"])
def test_bombs_under_an_address_space_limit(build):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    env.pop("REPLICA_CORE_PURE", None)
    if build == "twin":
        env["REPLICA_CORE_PURE"] = "1"
    proc = subprocess.run([sys.executable, str(TESTS / "fuzz_bombs.py"), "384"], env=env,
                          capture_output=True, text=True, timeout=300, cwd=TESTS.parent)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    results = json.loads(proc.stdout)
    assert set(results) == set(BOMBS)
    for bomb, entries in results.items():
        entries.pop("batch_bytes")
        assert len(entries) == 5
        for entry, outcome in entries.items():
            assert outcome[:3] == ["error", "InvalidRecordError", Errors.INVALID_RECORD], (
                bomb, entry, outcome)
