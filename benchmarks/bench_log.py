"""Log storage: leader append, recovery scan and single reads, each beside a raw peer.

    pytest benchmarks/bench_log.py --benchmark-only -p no:cacheprovider

One run, same bytes for both contenders of a group (the machine is shared; only same-run
ratios mean anything). The ratio table is printed at the end.

* ``append-16KiB``: ``Log.append_as_leader`` of 512 uncompressed 16 KiB batches (validation,
  offset assignment, epoch stamping and CRC, index upkeep, all on FileMedium) into a fresh log
  whose leader epoch was recorded at election, vs ``os.write`` of the same 512 chunks into a
  fresh file. Target: ours >= 40 % of os.write. These batches take the fused leader-append
  kernel (one call per append); ``append_general`` is the same appends through the general
  path (analyze_and_validate + validate_and_assign_offsets), for comparison.
  ``segment_append`` is the storage share alone (``LogSegment.append`` of the already validated
  batches, sparse index included).
* ``recovery-<shape>``: the recovery scan (``scan``: the batch kernel's framing + CRC-32C of
  every batch, as ``LogSegment.recover`` runs it) vs the ``crc32c`` package over the same 32 MiB
  in memory (target >= 50 %). ``recover`` is the whole ``LogSegment.recover()`` on the file
  (mmap view through FileMedium, index rebuild, truncation point); its fair peer ``crc32c_file``
  runs the same CRC over the same mmap view, paying the same page faults.
* ``read``: ``Log.read(offset, 1)`` (one batch, min_one_message) at random offsets of a 4,000
  batch log, vs ``os.pread`` of a batch-sized chunk at a known position.
"""
from __future__ import annotations

import os
import random

import crc32c
import pytest

from replica_core.clock import ManualClock
from replica_core.records import build_batch
from replica_core.storage.config import LogConfig
from replica_core.storage.log import Log
from replica_core.storage.medium import FileMedium
from replica_core.storage.segment import LogSegment, batch_kernel

T0 = 1_700_000_000_000
_results: dict[tuple[str, str], float] = {}
_bytes: dict[str, int] = {}


_mins: dict[tuple[str, str], float] = {}


def _record(benchmark, group: str, name: str, nbytes: int = 0) -> None:
    _results[(group, name)] = benchmark.stats.stats.median
    _mins[(group, name)] = benchmark.stats.stats.min
    if nbytes:
        _bytes[group] = nbytes


@pytest.fixture(scope="module", autouse=True)
def ratio_report(request):
    yield
    if not _results:
        return
    capman = request.config.pluginmanager.get_plugin("capturemanager")
    with capman.global_and_fixture_disabled():
        _print_ratios()


def _print_ratios() -> None:
    print()
    print("bench_log (medians; ratio = peer time / our time, i.e. our share of the peer's "
          "throughput; 'min' = the same from the fastest rounds, least disturbed by other load)")
    for group, ours, peer, target in (
        ("append-16KiB", "append_as_leader", "os_write", 0.40),
        ("append-16KiB", "append_general", "os_write", None),
        ("append-16KiB", "segment_append", "os_write", 0.40),
        ("recovery-16KiB", "scan", "crc32c", 0.50),
        ("recovery-16KiB", "recover", "crc32c", None),
        ("recovery-16KiB", "recover", "crc32c_file", 0.50),
        ("recovery-1KiB", "scan", "crc32c", 0.50),
        ("recovery-1KiB", "recover", "crc32c", None),
        ("recovery-1KiB", "recover", "crc32c_file", 0.50),
        ("read", "log_read", "os_pread", None),
    ):
        o, p = _results.get((group, ours)), _results.get((group, peer))
        if o is None or p is None:
            continue
        nbytes = _bytes.get(group, 0)
        rate = f"  ours {nbytes / o / 1e9:6.2f} GB/s  peer {nbytes / p / 1e9:6.2f} GB/s" if nbytes else ""
        verdict = ""
        if target is not None:
            verdict = "  (target {:.0%}: {})".format(target, "met" if p / o >= target else "MISSED")
        min_ratio = _mins[(group, peer)] / _mins[(group, ours)]
        print(f"  {group:15s} {ours:17s} {o * 1e6:10.1f} us  {peer:11s} {p * 1e6:10.1f} us"
              f"  ratio {p / o:6.1%} (min {min_ratio:6.1%}){rate}{verdict}")


# --- append ------------------------------------------------------------------------------------
N_APPEND = 512


@pytest.fixture(scope="module")
def batches_16k():
    rng = random.Random(7)
    out = []
    for _ in range(N_APPEND):
        values = [bytes(rng.randrange(256) for _ in range(16)) * 63 for _ in range(16)]
        b = build_batch(values, timestamps=[T0 + i for i in range(16)])
        out.append(b)
    assert all(15_000 < len(b) <= 16_384 + 200 for b in out)
    return out


def test_append_ours(benchmark, batches_16k, tmp_path_factory):
    counter = iter(range(10**6))

    def setup():
        d = tmp_path_factory.mktemp("append") / f"t-{next(counter)}"
        log = Log.open(str(d), LogConfig(), medium=FileMedium(), clock=ManualClock(T0))
        # a leader records its epoch when elected, before any append (Partition.makeLeader)
        log.maybe_assign_epoch_start_offset(1, 0)
        return (log,), {}

    def run(log):
        append = log.append_as_leader
        for b in batches_16k:
            append(b, 1)
        log.close()

    benchmark.group = "append-16KiB"
    benchmark.pedantic(run, setup=setup, rounds=15, iterations=1, warmup_rounds=1)
    _record(benchmark, "append-16KiB", "append_as_leader", sum(map(len, batches_16k)))


def test_append_general_path(benchmark, batches_16k, tmp_path_factory, monkeypatch):
    """The same appends with the fused path switched off (the kernel always declines)."""
    from replica_core.records import validator

    monkeypatch.setattr(validator, "_leader_append_fast", lambda *a: (2,) + (None,) * 8)
    counter = iter(range(10**6))

    def setup():
        d = tmp_path_factory.mktemp("append-general") / f"t-{next(counter)}"
        log = Log.open(str(d), LogConfig(), medium=FileMedium(), clock=ManualClock(T0))
        log.maybe_assign_epoch_start_offset(1, 0)
        return (log,), {}

    def run(log):
        append = log.append_as_leader
        for b in batches_16k:
            append(b, 1)
        log.close()

    benchmark.group = "append-16KiB"
    benchmark.pedantic(run, setup=setup, rounds=15, iterations=1, warmup_rounds=1)
    _record(benchmark, "append-16KiB", "append_general")


def test_append_segment_only(benchmark, batches_16k, tmp_path_factory):
    counter = iter(range(10**6))
    stamped = []
    offset = 0
    for b in batches_16k:
        stamped.append((offset + 15, bytes(b)))
        offset += 16

    def setup():
        d = tmp_path_factory.mktemp("segment") / f"t-{next(counter)}"
        d.mkdir()
        seg = LogSegment(FileMedium(), str(d), 0)
        return (seg,), {}

    def run(seg):
        append = seg.append
        for last, b in stamped:
            append(last, T0, last, b)
        seg.close()

    benchmark.group = "append-16KiB"
    benchmark.pedantic(run, setup=setup, rounds=15, iterations=1, warmup_rounds=1)
    _record(benchmark, "append-16KiB", "segment_append")


def test_append_os_write(benchmark, batches_16k, tmp_path_factory):
    counter = iter(range(10**6))

    def setup():
        path = tmp_path_factory.mktemp("write") / f"f-{next(counter)}"
        return (str(path),), {}

    def run(path):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        write = os.write
        for b in batches_16k:
            write(fd, b)
        os.close(fd)

    benchmark.group = "append-16KiB"
    benchmark.pedantic(run, setup=setup, rounds=15, iterations=1, warmup_rounds=1)
    _record(benchmark, "append-16KiB", "os_write")


# --- recovery ----------------------------------------------------------------------------------
SEGMENT_BYTES = 32 << 20


@pytest.fixture(scope="module", params=["16KiB", "1KiB"])
def segment_file(request, tmp_path_factory):
    size = 16 * 1024 if request.param == "16KiB" else 1024
    rng = random.Random(3)
    d = tmp_path_factory.mktemp("recovery") / "t-0"
    log = Log.open(str(d), LogConfig(), medium=FileMedium(), clock=ManualClock(T0))
    per_record = 1000 if size > 4096 else 240
    n_records = max(1, size // (per_record + 20))
    payload = bytes(rng.randrange(256) for _ in range(per_record))
    written = 0
    while written < SEGMENT_BYTES:
        b = build_batch([payload] * n_records, timestamps=[T0 + written % 1000] * n_records)
        log.append_as_leader(b, 1)
        written += len(b)
    log.flush()
    log.close()
    path = os.path.join(str(d), "00000000000000000000.log")
    with open(path, "rb") as fh:
        data = fh.read()
    yield request.param, str(d), data


def test_recover_ours(benchmark, segment_file):
    shape, d, data = segment_file
    medium = FileMedium()

    def setup():
        seg = LogSegment(medium, d, 0, file_already_exists=True)
        return (seg,), {}

    def run(seg):
        result = seg.recover()
        seg.close()
        assert result.truncated_bytes == 0

    benchmark.group = f"recovery-{shape}"
    benchmark.pedantic(run, setup=setup, rounds=10, iterations=1, warmup_rounds=1)
    _record(benchmark, benchmark.group, "recover", len(data))


def test_recover_scan_only(benchmark, segment_file):
    shape, _, data = segment_file
    scan = batch_kernel().scan_batches
    benchmark.group = f"recovery-{shape}"
    headers, valid, _ = benchmark(scan, data, 0, len(data), True)
    assert valid == len(data) and headers[:, 14].min() == 1
    _record(benchmark, benchmark.group, "scan", len(data))


def test_recover_crc32c_file(benchmark, segment_file):
    """The same CRC over the file as recovery reads it (a fresh mmap view through the medium)."""
    shape, d, data = segment_file
    medium = FileMedium()
    path = os.path.join(d, "00000000000000000000.log")

    def run():
        f = medium.open(path, writable=False)
        view = f.view(0, len(data))
        crc32c.crc32c(view)
        view.release()
        f.close()

    benchmark.group = f"recovery-{shape}"
    benchmark(run)
    _record(benchmark, benchmark.group, "crc32c_file", len(data))


def test_recover_crc32c_raw(benchmark, segment_file):
    shape, _, data = segment_file
    benchmark.group = f"recovery-{shape}"
    benchmark(crc32c.crc32c, data)
    _record(benchmark, benchmark.group, "crc32c", len(data))


# --- read --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def read_log(tmp_path_factory):
    d = tmp_path_factory.mktemp("read") / "t-0"
    log = Log.open(str(d), LogConfig(), medium=FileMedium(), clock=ManualClock(T0))
    for i in range(4000):
        log.append_as_leader(build_batch([b"%06d" % i * 40] * 4, timestamps=[T0 + i] * 4), 1)
    log.flush()
    yield log
    log.close()


def test_read_ours(benchmark, read_log):
    rng = random.Random(1)
    offsets = [rng.randrange(read_log.log_end_offset) for _ in range(1000)]
    it = iter(offsets * 1000)
    read = read_log.read

    def one():
        return read(next(it), 1)

    benchmark.group = "read"
    info = benchmark(one)
    assert len(info.records) > 0
    _record(benchmark, "read", "log_read")


def test_read_os_pread(benchmark, read_log):
    seg = read_log.active_segment
    fd = os.open(seg.log_path, os.O_RDONLY)
    size = read_log.read(0, 1).records
    n = len(size)
    rng = random.Random(1)
    positions = [rng.randrange(0, seg.size - n) for _ in range(1000)]
    it = iter(positions * 1000)
    pread = os.pread

    def one():
        return pread(fd, n, next(it))

    benchmark.group = "read"
    benchmark(one)
    os.close(fd)
    _record(benchmark, "read", "os_pread")
