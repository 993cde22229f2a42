"""Workloads for the record benchmarks: the same bytes for every contender in a group.

A workload is one shape (records per batch x value size), one codec (none / lz4) and one layout:
a single batch, or a produce payload of many batches filling at most 1 MiB (distinct batches,
each as a producer writes it: base offset 0, e.g. one per partition of a produce request).
Batches are built with aiokafka's builder, which writes lz4 through cramjam; values are words
from a fixed vocabulary so lz4 has something to compress.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest
from aiokafka.record._crecords import DefaultRecordBatchBuilder

PAYLOAD_BYTES = 1 << 20
NOW_MS = 1_700_000_000_000
SHAPES = {"100x100B": (100, 100), "10x1KB": (10, 1024), "1000x1KB": (1000, 1024)}
CODECS = {"none": 0, "lz4": 3}
LAYOUTS = ("single", "payload1MiB")


@dataclass
class Workload:
    name: str
    buf: bytes
    n_records: int
    single: bool
    # per batch: (position, size, record_count, base_timestamp, attributes)
    batches: list[tuple[int, int, int, int, int]] = field(default_factory=list)

    @property
    def group(self) -> str:
        return self.name


def _values(rng: random.Random, n: int, size: int) -> list[bytes]:
    words = [bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))
             for _ in range(400)]
    out = []
    for _ in range(n):
        v = bytearray()
        while len(v) < size:
            v += rng.choice(words) + b" "
        out.append(bytes(v[:size]))
    return out


def build_batch(rng: random.Random, n: int, size: int, codec: int, first_key: int) -> bytes:
    """One producer batch: base offset 0 and inner offsets 0..n-1, as a client writes it."""
    b = DefaultRecordBatchBuilder(2, codec, 0, -1, -1, -1, 1 << 30)
    for i, value in enumerate(_values(rng, n, size)):
        b.append(i, timestamp=NOW_MS - 5000 + i, key=f"key-{first_key + i:08d}".encode(),
                 value=value, headers=[])
    return bytes(b.build())


def make_workload(shape: str, codec: str, layout: str) -> Workload:
    n, size = SHAPES[shape]
    rng = random.Random(f"{shape}/{codec}")
    parts: list[bytes] = []
    total = 0
    first_key = 0
    while True:
        batch = build_batch(rng, n, size, CODECS[codec], first_key)
        if parts and (layout == "single" or total + len(batch) > PAYLOAD_BYTES):
            break
        parts.append(batch)
        total += len(batch)
        first_key += n
        if layout == "single":
            break
    buf = b"".join(parts)
    w = Workload(f"{codec}-{shape}-{layout}", buf, n * len(parts), layout == "single")
    pos = 0
    for part in parts:
        count = int.from_bytes(part[57:61], "big", signed=True)
        base_ts = int.from_bytes(part[27:35], "big", signed=True)
        attributes = int.from_bytes(part[21:23], "big", signed=True)
        w.batches.append((pos, len(part), count, base_ts, attributes))
        pos += len(part)
    return w


WORKLOAD_IDS = [f"{c}-{s}-{lay}" for c in CODECS for s in SHAPES for lay in LAYOUTS]
_cache: dict[str, Workload] = {}


@pytest.fixture(params=WORKLOAD_IDS)
def workload(request) -> Workload:
    name = request.param
    if name not in _cache:
        codec, shape, layout = name.split("-")
        _cache[name] = make_workload(shape, codec, layout)
    return _cache[name]
