"""Seeded fuzzing of every entry point that takes bytes from outside (issue 19).

Inputs are seeded mutations (``random.Random(seed)``) of real record batches: every batch of
the Kafka logs in tests/data/kafka-logs (none and snappy codecs, KRaft control batches) plus
batches built by kafka-python and aiokafka in the codecs the fixtures lack. Directories are
seeded mutations of real partition directories from the same fixtures.

Each entry point answers with an *outcome*: ``["ok", digest]`` or ``["error", name, code]``.
Anything but a Kafka error escapes as :class:`FuzzFailure` naming the seed, the input number
and the entry point, so a failure is reproducible. The invariants checked on the way:

* a rejected append changes no byte of the partition directory and not the LEO;
* an accepted append stored what it acknowledged: the LEO moved to the last offset + 1, and the
  records read back from the log carry exactly the offsets the append reported;
* a produce answered ``NONE`` is in the log (same check), one answered with an error is not;
* the compiled kernel and its plain-Python twin give the same result on every input;
* a damaged partition never takes its log directory offline, and the healthy partitions next to
  it load byte for byte.

Run as a script (``python tests/fuzz_harness.py SEED COUNT``) it prints the outcomes as JSON,
which is how the tests compare the compiled build with ``REPLICA_CORE_PURE=1``.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import random
import struct
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import crc32c as crc32c_pypi

from replica_core import records as R
from replica_core._fast import batch_py as twin_kernel
from replica_core.clock import ManualClock
from replica_core.errors import KafkaError
from replica_core.records.compression import decompressed_limit
from replica_core.storage.config import LogConfig
from replica_core.storage.log import Log
from replica_core.storage.log_manager import LogManager
from replica_core.storage.medium import MemoryMedium

try:
    from replica_core._fast import _batch as native_kernel
except ImportError:  # pragma: no cover - the native build is expected in the test venv
    native_kernel = None

FIXTURE_LOGS = Path(__file__).resolve().parent / "data" / "kafka-logs"
NOW = 1_700_000_000_000
INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
# (offset, struct format) of every v2 header field a mutation may set (§1.1)
HEADER_FIELDS = [(0, ">q"), (8, ">i"), (12, ">i"), (16, ">b"), (21, ">h"), (23, ">i"),
                 (27, ">q"), (35, ">q"), (43, ">q"), (51, ">h"), (53, ">i"), (57, ">i")]
INTERESTING = [0, 1, 2, -1, -2, 7, 13, 14, 48, 49, 61, 127, -128, 255, 2**15 - 1, -(2**15),
               2**31 - 1, -(2**31), 2**32, 2**62, 2**63 - 1, -(2**63), NOW, NOW + 10**9]


class FuzzFailure(AssertionError):
    """An entry point broke a promise; the message says how to reproduce it."""


@contextlib.contextmanager
def batch_kernel_build(build: str) -> Iterator[Any]:
    """Run the records and storage layers on one batch-kernel build, ``"native"`` or
    ``"twin"`` (what ``REPLICA_CORE_PURE=1`` selects at import, swapped in where it is held)."""
    from replica_core import records as records_package
    from replica_core.records import batch as batch_module
    from replica_core.records import validator as validator_module
    from replica_core.storage import segment as segment_module

    module = native_kernel if build == "native" else twin_kernel
    if module is None:
        raise RuntimeError("the native batch kernel is not built")
    slots = [(batch_module, "kernels"), (records_package, "kernels"),
             (validator_module, "kernels"), (validator_module, "C"),
             (segment_module, "_batch_kernel")]
    saved = [(obj, name, getattr(obj, name)) for obj, name in slots]
    saved += [(validator_module, "_leader_append_fast", validator_module._leader_append_fast),
              (validator_module, "_validate_assign_fast",
               validator_module._validate_assign_fast)]
    try:
        for obj, name in slots:
            setattr(obj, name, module)
        validator_module._leader_append_fast = module.leader_append_fast
        validator_module._validate_assign_fast = module.validate_assign_fast
        yield module
    finally:
        for obj, name, value in saved:
            setattr(obj, name, value)


# --- the seed corpus -----------------------------------------------------------------------------
@functools.cache
def fixture_batches() -> tuple[bytes, ...]:
    """Every batch of the real Kafka logs (distinct bytes), in path order."""
    seen: dict[bytes, None] = {}
    for path in sorted(FIXTURE_LOGS.glob("**/*.log")):
        data = path.read_bytes()
        if not data:
            continue
        s = R.scan(data)
        for pos, size in zip(s.positions.tolist(), s.sizes.tolist(), strict=True):
            seen.setdefault(data[pos:pos + size], None)
    if not seen:
        raise RuntimeError(f"no Kafka fixture batches under {FIXTURE_LOGS}")
    return tuple(seen)


@functools.cache
def client_batches() -> tuple[bytes, ...]:
    """Batches as Kafka clients write them, in every codec: kafka-python and aiokafka."""
    from aiokafka.record._crecords import DefaultRecordBatchBuilder as AioBuilder
    from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder

    out = []
    for codec in (0, 1, 2, 3, 4):
        kp = KpBuilder(magic=2, compression_type=codec, is_transactional=False, producer_id=-1,
                       producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
        for i in range(12):
            kp.append(i, timestamp=NOW - 100 + i, key=b"key-%d" % i if i % 3 else None,
                      value=b"value %d " % i * (1 + i % 5), headers=[("h", b"x")] if i % 4 else [])
        out.append(bytes(kp.build()))
        if codec != 4:  # aiokafka's C builder has no zstd
            aio = AioBuilder(2, codec, 0, 7, 1, 0, 1 << 30)
            for i in range(9):
                aio.append(i, timestamp=NOW + i, key=None, value=b"aio %d" % i * 3, headers=[])
            out.append(bytes(aio.build()))
    for i, batch in enumerate(out):
        if batch[61:63] == b"\x1f\x8b":  # gzip: its header carries the build time; fix it
            fixed = bytearray(batch)
            fixed[65:69] = bytes(4)
            restamp(fixed)
            out[i] = bytes(fixed)
    out.append(R.build_batch([b"lat"] * 3, timestamp_type="log_append", now_ms=NOW))
    out.append(R.build_end_txn_marker(True, producer_id=5, producer_epoch=1, coordinator_epoch=2,
                                      timestamp_ms=NOW))
    return tuple(out)


def restamp(buf: bytearray, pos: int = 0) -> None:
    """Make the v2 batch at ``pos`` CRC-valid again (so the mutation reaches the later checks)."""
    if len(buf) - pos >= 61:
        size = struct.unpack_from(">i", buf, pos + 8)[0] + 12
        end = len(buf) if size < 61 or pos + size > len(buf) else pos + size
        struct.pack_into(">I", buf, pos + 17, crc32c_pypi.crc32c(bytes(buf[pos + 21:end])))



_V2_FIELDS = {"base_offset": (0, ">q"), "partition_leader_epoch": (12, ">i"),
              "last_offset_delta": (23, ">i"), "producer_id": (43, ">q"),
              "producer_epoch": (51, ">h"), "base_sequence": (53, ">i"), "count": (57, ">i")}
"""Where a v2 batch header keeps the fields :func:`with_fields` replaces (offset, format)."""


def with_fields(batch: bytes, **fields: int) -> bytes:
    """``batch`` (v2) with header fields replaced, CRC-valid again."""
    out = bytearray(batch)
    for name, value in fields.items():
        offset, fmt = _V2_FIELDS[name]
        struct.pack_into(fmt, out, offset, value)
    restamp(out)
    return bytes(out)

def mutate(rng: random.Random, seed: bytes) -> bytes:
    """One to three mutations of ``seed``; usually CRC-valid afterwards."""
    fixtures, clients = fixture_batches(), client_batches()
    buf = bytearray(seed)
    kind = rng.random()
    if kind < 0.03:
        return b""
    if kind < 0.06:
        return bytes(buf[:61])                                # a bare header
    for _ in range(rng.randint(1, 3)):
        k = rng.random()
        if k < 0.35 and len(buf) >= 61:
            off, fmt = rng.choice(HEADER_FIELDS)
            bits = 8 * struct.calcsize(fmt)
            value = rng.choice(INTERESTING + [rng.randint(-3, 3), rng.getrandbits(bits)])
            lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
            value = (value - lo) % (1 << bits) + lo if not lo <= value <= hi else value
            struct.pack_into(fmt, buf, off, value)
        elif k < 0.5 and len(buf) > 61:
            i = rng.randrange(61, len(buf))                   # the records / payload
            buf[i] = rng.choice([0x00, 0x01, 0x7F, 0x80, 0xFF, rng.randrange(256)])
        elif k < 0.6 and buf:
            i = rng.randrange(len(buf))
            buf[i] ^= 1 << rng.randrange(8)
        elif k < 0.7:
            del buf[rng.randrange(len(buf) + 1):]
        elif k < 0.8:
            buf += rng.randbytes(rng.randrange(1, 24))
        elif k < 0.9:
            buf += rng.choice(clients if rng.random() < 0.5 else fixtures)
        else:
            cut = rng.randrange(len(buf) + 1)
            buf[cut:cut] = rng.choice(clients)[:rng.randrange(1, 80)]
    if rng.random() < 0.75:
        restamp(buf)
    return bytes(buf)


def inputs(seed: int, count: int) -> Iterator[bytes]:
    """``count`` mutated batches for ``seed``: half from real Kafka logs, half client-built."""
    rng = random.Random(seed)
    fixtures, clients = fixture_batches(), client_batches()
    for _ in range(count):
        pool = fixtures if rng.random() < 0.5 else clients
        yield mutate(rng, rng.choice(pool))


# --- outcomes ------------------------------------------------------------------------------------
def digest(*parts: Any) -> str:
    h = hashlib.sha1()
    for p in parts:
        h.update(bytes(p) if isinstance(p, (bytes, bytearray, memoryview)) else repr(p).encode())
        h.update(b"|")
    return h.hexdigest()[:16]


def outcome(fn: Callable[[], Any]) -> list:
    """``["ok", digest]`` or ``["error", type name, code]``; any other exception escapes."""
    try:
        return ["ok", fn()]
    except KafkaError as e:
        return ["error", type(e).__name__, int(e.code)]


def _records_digest(batches: list) -> str:
    parts = []
    for b in batches:
        parts.append((type(b).__name__, b.size, bytes(b.buffer)))
        parts.append([tuple(r) for r in b.records()])
    return digest(*parts)


def parse(data: bytes) -> str:
    """The reader: framing, every header field, every record (decompressing)."""
    return _records_digest(list(R.iter_batches(data)))


def scan(data: bytes) -> str:
    s = R.scan(data)
    return digest(s.headers.tolist(), s.valid_bytes, s.stop)


def analyze(data: bytes, origin: str) -> str:
    info = R.analyze_and_validate(data, origin)
    return digest(info)


VALIDATE_SETTINGS = [
    dict(),
    dict(timestamp_type="log_append", origin="coordinator", target_compression="gzip"),
    dict(compacted=True, timestamp_before_max_ms=10**6, timestamp_after_max_ms=10**6),
    dict(target_compression="none", max_message_bytes=4096),
    dict(origin="coordinator", target_compression="zstd"),
]


def validate(data: bytes, setting: int, next_offset: int) -> str:
    """``validate_and_assign_offsets`` on its own; a stamped CRC must never cover bytes whose
    CRC was not valid before (issue 19)."""
    res = R.validate_and_assign_offsets(data, next_offset, 3, NOW, **VALIDATE_SETTINGS[setting])
    out = bytes(res.buffer)
    stored_crc = struct.unpack_from(">I", out, 17)[0]
    if stored_crc == crc32c_pypi.crc32c(out[21:]) and not _crc_was_valid(data):
        raise FuzzFailure("validate_and_assign_offsets wrote a valid CRC over a batch whose "
                          "CRC was not valid")
    return digest(out, res.first_offset, res.last_offset, res.max_timestamp,
                  res.log_append_time, res.num_records)


def _crc_was_valid(data: bytes) -> bool:
    s = R.scan(data)
    return bool(len(s)) and bool((s.crc_ok == 1).all())


# --- appends -------------------------------------------------------------------------------------
def _snapshot(medium: MemoryMedium, log: Log) -> tuple:
    files = {name: bytes(medium.read_bytes(f"{log.dir}/{name}"))
             for name in sorted(medium.listdir(log.dir))}
    return log.log_end_offset, files


def _check_stored(log: Log, first: int, last: int, where: str) -> tuple[int, int, int]:
    """What the log holds from ``first`` on: (first base offset, last offset, record count) of
    the batches there, every record decoded. The LEO must be ``last + 1``. (Kafka keeps the
    records' own offset deltas of an uncompressed batch as the producer sent them, so batch
    offsets and counts are what an append promises, not each record's offset.)"""
    if log.log_end_offset != last + 1:
        raise FuzzFailure(f"{where}: acknowledged offsets up to {last} but the LEO is "
                          f"{log.log_end_offset}")
    batches = list(R.iter_batches(log.read(first, 1 << 30).records))
    if not batches:
        return (-1, -1, 0)
    count = sum(len(list(b.records())) for b in batches)
    return (batches[0].base_offset, batches[-1].last_offset, count)


def new_log(index_interval_bytes: int = 4096) -> tuple[MemoryMedium, Log]:
    medium = MemoryMedium()
    # small pre-allocated indexes: the snapshots compare every byte of every file
    config = LogConfig(index_interval_bytes=index_interval_bytes, segment_index_bytes=4096)
    log = Log.open("/fuzz/t-0", config, medium=medium, clock=ManualClock(NOW))
    for base_values in ([b"a" * 40] * 3, [b"b" * 40] * 2):
        batch = bytearray(R.build_batch(base_values, now_ms=NOW))
        struct.pack_into(">q", batch, 0, log.log_end_offset)
        struct.pack_into(">i", batch, 12, 2)
        restamp(batch)
        log.append_as_follower(bytes(batch))
    return medium, log


def leader_append(data: bytes, origin: str) -> str:
    medium, log = new_log()
    before = _snapshot(medium, log)
    try:
        info = log.append_as_leader(data, 4, origin=origin)
    except KafkaError:
        if _snapshot(medium, log) != before:
            raise FuzzFailure("a rejected leader append changed the partition") from None
        raise
    if info.valid_bytes <= 0:   # nothing framed (§2.2): nothing appended, nothing reported
        if _snapshot(medium, log) != before:
            raise FuzzFailure("an empty leader append changed the partition")
        return digest("empty")
    stored = _check_stored(log, info.first_offset, info.last_offset, "leader append")
    if origin == "client" and stored != (info.first_offset, info.last_offset,
                                         info.last_offset - info.first_offset + 1):
        raise FuzzFailure(f"leader append reported offsets {info.first_offset}.."
                          f"{info.last_offset}, the log holds {stored}")
    return digest(_snapshot(medium, log))


def follower_append(data: bytes, rebase: bool, index_interval_bytes: int) -> str:
    medium, log = new_log(index_interval_bytes)
    if rebase and len(data) >= 61:  # aim the first batch at the LEO, past the offset check
        buf = bytearray(data)
        struct.pack_into(">q", buf, 0, log.log_end_offset)
        restamp(buf)
        data = bytes(buf)
    before = _snapshot(medium, log)
    try:
        info = log.append_as_follower(data)
    except KafkaError:
        if _snapshot(medium, log) != before:
            raise FuzzFailure("a rejected follower append changed the partition") from None
        raise
    after = _snapshot(medium, log)
    if info.valid_bytes <= 0:
        if after != before:
            raise FuzzFailure("an empty follower append changed the partition")
        return digest("empty")
    if log.log_end_offset != info.last_offset + 1 or log.log_end_offset <= before[0]:
        raise FuzzFailure(f"follower append moved the LEO from {before[0]} to "
                          f"{log.log_end_offset} for last offset {info.last_offset}")
    stored = b"".join(after[1][n] for n in sorted(after[1]) if n.endswith(".log"))
    previous = b"".join(before[1][n] for n in sorted(before[1]) if n.endswith(".log"))
    if stored != previous + data[:info.valid_bytes]:
        raise FuzzFailure("follower append did not store exactly the valid bytes it was given")
    return digest(after)


class ProduceTarget:
    """One leader partition behind a ReplicaManager; every produce goes to it (acks=1)."""

    def __init__(self) -> None:
        from replication_harness import TP, Cluster

        self.tp = TP
        self.cluster = Cluster()
        self.cluster.create(TP, replicas=(0,), isr=(0,))

    def produce(self, data: bytes) -> str:
        rm = self.cluster.rm(0)
        log = rm.local_log(self.tp)
        leo = log.log_end_offset
        resp = rm.append_records({self.tp: data}, acks=1, timeout_ms=1000)[self.tp]
        if resp.error_code != 0:
            if log.log_end_offset != leo:
                raise FuzzFailure(f"produce answered {resp.error_code} but the LEO moved")
            return f"error {int(resp.error_code)}"
        if log.log_end_offset == leo and 0 <= resp.base_offset < leo:
            return self._duplicate(log, data, resp.base_offset)
        if resp.base_offset != leo or log.log_end_offset <= leo:
            raise FuzzFailure(f"produce acknowledged at {resp.base_offset} but the LEO went "
                              f"from {leo} to {log.log_end_offset}: nothing stored")
        last = log.log_end_offset - 1
        if _check_stored(log, leo, last, "produce") != (leo, last, last - leo + 1):
            raise FuzzFailure("produce acknowledged records the log does not hold")
        return f"ok {digest(resp.base_offset, last - leo)}"

    @staticmethod
    def _duplicate(log: Any, data: bytes, base_offset: int) -> str:
        """An idempotent producer's retry of a batch already in the log is answered with the
        original offsets and not stored again (Kafka's ProducerStateManager): the log must hold,
        at that offset, a batch of the same producer id, epoch, base sequence and count."""
        want = struct.unpack_from(">qhi", data, 43) + struct.unpack_from(">i", data, 57)
        held = bytes(log.read(base_offset, 1 << 20).records)
        if len(held) < 61 or struct.unpack_from(">q", held, 0)[0] != base_offset:
            raise FuzzFailure(f"produce answered as a duplicate at {base_offset}, where the log "
                              "holds no batch")
        have = struct.unpack_from(">qhi", held, 43) + struct.unpack_from(">i", held, 57)
        if have != want or want[0] < 0:
            raise FuzzFailure(f"produce answered as a duplicate at {base_offset} of a batch with "
                              f"(producer id, epoch, sequence, count) {have}, not {want}")
        return f"duplicate {digest(base_offset, want)}"


# --- kernel parity ----------------------------------------------------------------------------------
def _kernel_outcome(mod: Any, name: str, args: tuple) -> tuple:
    try:
        res = getattr(mod, name)(*args)
    except (KafkaError, ValueError, OverflowError, TypeError, BufferError) as e:
        return ("error", type(e).__name__)
    if isinstance(res, tuple) and len(res) == 3 and hasattr(res[0], "tolist"):
        return ("ok", res[0].tolist(), int(res[1]), int(res[2]))
    if hasattr(res, "tolist"):
        return ("ok", res.tolist())
    if isinstance(res, tuple):
        return ("ok", tuple(bytes(x) if isinstance(x, bytearray) else x for x in res))
    if isinstance(res, R.ValidationResult):
        return ("ok", bytes(res.buffer), res.first_offset, res.last_offset, res.max_timestamp,
                res.num_records)
    return ("ok", res)


def _clamp(v: int, lo_hi: tuple[int, int]) -> int:
    return min(max(v, lo_hi[0]), lo_hi[1])


def kernel_calls(data: bytes) -> list[tuple[str, tuple]]:
    """The batch-kernel calls an input leads to (headers read by struct, as the callers do)."""
    calls: list[tuple[str, tuple]] = [
        ("scan_batches", (data, 0, -1, True, 2**31 - 1)),
        ("scan_batches", (data, 0, -1, False, 100)),
        ("find_batch", (data, 0, -1, 0)),
        ("find_batch", (data, 0, -1, 2**40)),
    ]
    for client, analyze_, lat, compacted in ((True, True, False, False),
                                              (False, False, True, True),
                                              (True, False, False, False)):
        calls.append(("leader_append_fast", (data, 100, 7, NOW, 10**6, 10**6, lat, compacted,
                                             client, analyze_, 1048588, -1)))
        calls.append(("validate_assign_fast", (data, 100, 7, NOW, 2**63 - 1, 2**63 - 1, lat,
                                               compacted, client, 1048588, -1,
                                               R.ValidationResult)))
    if len(data) >= 61:
        base, _, _, _, _, _, _, base_ts, _, _, _, _, count = struct.unpack_from(
            ">qiibIhiqqqhii", data)
        calls.append(("decode_records", (data, 61, len(data), count, base, base_ts)))
        calls.append(("check_records", (data, 61, len(data), count, base_ts, NOW, 10**6, 10**6,
                                        True, True)))
        codec = data[22] & 7
        if codec in (1, 2, 3, 4) and count >= 0:
            try:
                area = R.decompress(codec, memoryview(data)[61:],
                                    max_output=decompressed_limit(count))
            except KafkaError:
                area = None
            if area is not None:
                calls.append(("leader_append_fast", (data, 100, 7, NOW, 10**6, 10**6, False,
                                                     False, True, True, 1048588, -1, area)))
                calls.append(("decode_records", (area, 0, len(area), count, base, base_ts)))
    return calls


def check_kernel_parity(data: bytes) -> None:
    """Compiled and pure kernels agree on every call the input leads to (and on stamping)."""
    if native_kernel is None:
        return
    for name, args in kernel_calls(data):
        got = _kernel_outcome(native_kernel, name, args)
        want = _kernel_outcome(twin_kernel, name, args)
        if got != want:
            raise FuzzFailure(f"kernels disagree on {name}: native {str(got)[:200]} != "
                              f"twin {str(want)[:200]}")
    if len(data) >= 61:
        base = struct.unpack_from(">q", data)[0]
        for args in ((0, base, 5, 0x77, NOW), (0, _clamp(base + 2**62, INT64), -1, 0, -1)):
            mine, theirs = bytearray(data), bytearray(data)
            got = _kernel_outcome(native_kernel, "stamp_batch", (mine, *args))
            want = _kernel_outcome(twin_kernel, "stamp_batch", (theirs, *args))
            if got != want or mine != theirs:
                raise FuzzFailure(f"kernels disagree on stamp_batch{args}: {got} != {want}")


# --- one campaign over the batch entry points --------------------------------------------------------
ENTRY_POINTS = ["parse", "scan", "analyze-client", "analyze-replication", "validate",
                "leader-client", "leader-coordinator", "follower", "follower-at-leo", "produce"]


def run_batches(seed: int, count: int, *, parity: bool = True) -> list[list]:
    """Every input of ``seed`` through every entry point: one list of outcomes per input."""
    target = ProduceTarget()
    results = []
    for i, data in enumerate(inputs(seed, count)):
        setting = i % len(VALIDATE_SETTINGS)
        calls: list[tuple[str, Callable[[], Any]]] = [
            ("parse", lambda d=data: parse(d)),
            ("scan", lambda d=data: scan(d)),
            ("analyze-client", lambda d=data: analyze(d, "client")),
            ("analyze-replication", lambda d=data: analyze(d, "replication")),
            ("validate", lambda d=data, s=setting, n=100 if i % 7 else 2**63 - 5:
                validate(d, s, n)),
            ("leader-client", lambda d=data: leader_append(d, "client")),
            ("leader-coordinator", lambda d=data: leader_append(d, "coordinator")),
            ("follower", lambda d=data: follower_append(d, False, 4096)),
            ("follower-at-leo", lambda d=data: follower_append(d, True, 1)),
            ("produce", lambda d=data: target.produce(d)),
        ]
        row = []
        for name, fn in calls:
            try:
                row.append(outcome(fn))
            except Exception as e:
                raise FuzzFailure(f"seed {seed} input {i} ({len(data)} bytes, "
                                  f"{data[:80].hex()}...) at {name}: {type(e).__name__}: "
                                  f"{e}") from e
        if parity:
            try:
                check_kernel_parity(data)
            except FuzzFailure as e:
                raise FuzzFailure(f"seed {seed} input {i}: {e}") from None
        results.append(row)
    return results


# --- directories -----------------------------------------------------------------------------------
@functools.cache
def fixture_partitions() -> tuple[tuple[str, tuple[tuple[str, bytes], ...]], ...]:
    """(name, files) of every fixture partition directory holding at least one batch."""
    out = []
    for d in sorted(FIXTURE_LOGS.glob("*/**/*-[0-9]*")):
        if not d.is_dir() or d.name.startswith("__cluster_metadata"):
            continue
        files = tuple(sorted((f.name, f.read_bytes()) for f in d.iterdir() if f.is_file()))
        if any(n.endswith(".log") and data for n, data in files):
            out.append((str(d.relative_to(FIXTURE_LOGS)), files))
    if not out:
        raise RuntimeError(f"no fixture partitions under {FIXTURE_LOGS}")
    return tuple(out)


ODD_NAMES = ["5.log", "00000.log", "0.log", "00000000000000000000.log.swap", "7.index",
             "00000000000000000003.log", "junk.log", "00000000000000000000.timeindex.deleted"]


def damage(rng: random.Random, files: dict[str, bytes]) -> dict[str, bytes]:
    """One or two seeded kinds of damage to one partition directory's files."""
    files = dict(files)
    for _ in range(rng.randint(1, 2)):
        names = sorted(files)
        name = rng.choice(names)
        data = bytearray(files[name])
        k = rng.random()
        if k < 0.15:                                     # junk tail (an untrimmed file)
            data += rng.randbytes(rng.randint(1, 40))
        elif k < 0.25:
            data += bytes(rng.randint(12, 16))
        elif k < 0.4 and data:                           # torn write
            del data[rng.randrange(len(data)):]
        elif k < 0.55 and data:                          # flipped bytes
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        elif k < 0.65:                                   # renamed to a shorter spelling
            stem, dot, suffix = name.partition(".")
            if stem.isdigit():
                files[str(int(stem) + rng.randint(0, 9)) + dot + suffix] = files.pop(name)
            continue
        elif k < 0.72:                                   # lost file
            files.pop(name)
            continue
        elif k < 0.82:                                   # stray file
            files[rng.choice(ODD_NAMES)] = rng.randbytes(rng.randint(0, 80))
            continue
        elif k < 0.92:                                   # well-formed but wrong checkpoint
            entries = [(rng.choice([0, 1, 9, 2**31 - 1]), rng.choice([0, 3, 10**6, 2**63 - 1]))
                       for _ in range(rng.randint(0, 3))]
            files["leader-epoch-checkpoint"] = (
                f"0\n{len(entries)}\n" + "".join(f"{e} {s}\n" for e, s in entries)).encode()
            continue
        else:                                            # index entries that lie
            idx = [n for n in names if n.endswith((".index", ".timeindex"))]
            target = rng.choice(idx) if idx else "00000000000000000000.index"
            width = 8 if target.endswith(".index") else 12
            entries = bytearray()
            for _ in range(rng.randint(0, 6)):
                if width == 8:
                    entries += struct.pack(">ii", rng.choice([0, 1, 5, 100, -1]),
                                           rng.choice([0, 61, 1000, 10**6, -1]))
                else:
                    entries += struct.pack(">qi", rng.choice([0, NOW, -1, 2**63 - 1]),
                                           rng.choice([0, 1, 5, -1]))
            files[target] = bytes(entries)
            continue
        files[name] = bytes(data)
    return files


def _write_dir(medium: MemoryMedium, path: str, files: dict[str, bytes]) -> None:
    medium.makedirs(path)
    for name, data in files.items():
        f = medium.open(f"{path}/{name}", create=True)
        f.write(0, data)
        f.flush()
        f.close()


def _read_all(log: Log) -> list[tuple[int, bytes]]:
    """(last offset, bytes) of every batch the log returns, from its start to its end."""
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        info = log.read(offset, 1 << 30)
        batches = list(R.iter_batches(info.records))
        if not batches:
            break
        for b in batches:
            out.append((b.last_offset, bytes(b.buffer)))
        offset = max(offset, batches[-1].last_offset + 1)
    return out


@functools.cache
def _undamaged_batches(p: int) -> list[tuple[int, bytes]]:
    """What fixture partition ``p`` reads as when loaded on its own, undamaged."""
    medium = MemoryMedium()
    _write_dir(medium, "/p/t-0", dict(fixture_partitions()[p][1]))
    return _read_all(Log.open("/p/t-0", medium=medium, clock=ManualClock(NOW)))


def run_dirs(seed: int, count: int) -> list[list]:
    """Log dirs of three real partitions, one damaged; outcomes per dir (see the module doc)."""
    rng = random.Random(seed)
    partitions = fixture_partitions()
    results = []
    for i in range(count):
        chosen = rng.sample(range(len(partitions)), 3)
        victim = rng.randrange(3)
        clean = rng.random() < 0.5
        medium = MemoryMedium()
        expected: dict[tuple[str, int], list] = {}
        for j, p in enumerate(chosen):
            files = dict(partitions[p][1])
            if j == victim:
                files = damage(rng, files)
            _write_dir(medium, f"/data/t{j}-0", files)
        if clean:
            _write_dir(medium, "/data", {".kafka_cleanshutdown": b""})
        medium.fsync_dir("/data")
        for j, p in enumerate(chosen):
            if j != victim:
                expected[(f"t{j}", 0)] = _undamaged_batches(p)
        where = f"seed {seed} dir {i} (victim t{victim}, clean {clean})"
        try:
            row = _load_dir(medium, expected, victim, where)
        except FuzzFailure:
            raise
        except Exception as e:
            raise FuzzFailure(f"{where}: {type(e).__name__}: {e}") from e
        results.append(row)
    return results


def _load_dir(medium: MemoryMedium, expected: dict, victim: int, where: str) -> list:
    manager = LogManager("/data", LogConfig(), medium=medium, clock=ManualClock(NOW))
    manager.startup()
    if manager.offline_dirs:
        raise FuzzFailure(f"{where}: one partition's damage took the dir offline: "
                          f"{manager.loads['/data'].failed}")
    load = manager.loads["/data"]
    for tp, batches in expected.items():
        log = manager.get_log(*tp)
        if log is None or _read_all(log) != batches:
            raise FuzzFailure(f"{where}: healthy partition {tp} did not load as it was")
    tp = (f"t{victim}", 0)
    log = manager.get_log(*tp)
    if log is None:
        if tp not in load.failed_partitions:
            raise FuzzFailure(f"{where}: damaged partition neither loaded nor reported")
        return ["offline"]
    try:  # after a clean shutdown nothing is rescanned: damage inside may fail a read (typed)
        stored = digest(_read_all(log))
    except KafkaError as e:
        stored = type(e).__name__
    leo = log.log_end_offset
    info = log.append_as_leader(R.build_batch([b"after"], now_ms=NOW), 9)
    if info.first_offset != leo or log.log_end_offset != leo + 1:
        raise FuzzFailure(f"{where}: append after load did not land at the LEO {leo}")
    tail = log.read(leo, 1 << 20).records
    if [r.value for b in R.iter_batches(tail) for r in b.records()] != [b"after"]:
        raise FuzzFailure(f"{where}: the record appended after load does not read back")
    return ["loaded", leo, stored]


if __name__ == "__main__":
    mode, seed, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    if mode == "batches":
        print(json.dumps(run_batches(seed, count, parity=False)))
    else:
        print(json.dumps(run_dirs(seed, count)))
    sys.stdout.flush()
    os._exit(0)
