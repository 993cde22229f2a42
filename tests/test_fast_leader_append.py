"""The fused leader-append kernel ``leader_append_fast`` (docs/contracts.md "Batch kernels") and
the fast paths built on it: ``records.analyze_validate_and_assign``, the fast attempt inside
``validate_and_assign_offsets``, and ``Log.append_as_leader``.

* parity: the native kernel and its plain twin return identical tuples (status, stamped bytes,
  numbers) for client batches under every topic setting, and for hypothesis-mutated batches;
* equivalence: whenever the kernel accepts (FAST_OK), the fast path's answer equals the general
  path's (analyze_and_validate + trim_invalid_bytes + the general validate_and_assign_offsets,
  and the general Log append), byte for byte;
* fallback: whatever the kernel declines, the public functions give the general path's result
  or raise its exact error (type and message).
"""
from __future__ import annotations

import dataclasses
import os
import struct

import crc32c as crc32c_pypi
import numpy as np
import pytest
from aiokafka.record._crecords import DefaultRecordBatchBuilder as AioBuilder
from conftest import load_kernel
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import replica_core.records as records_module
from replica_core._fast import _batch as native
from replica_core._fast import batch_py as twin
from replica_core.clock import ManualClock
from replica_core.records import (
    analyze_and_validate,
    analyze_validate_and_assign,
    build_batch,
    build_end_txn_marker,
    decompress,
    fast_target_codec,
    trim_invalid_bytes,
    validate_and_assign_offsets,
)
from replica_core.records import validator as validator_module
from replica_core.records.validator import _Topic, _validate_and_assign_general
from replica_core.storage.config import LogConfig
from replica_core.storage.log import Log
from replica_core.storage.medium import MemoryMedium

NOW = 1_700_000_000_000
MAX = 2**63 - 1
MMB = 1048588
OK, NEED, UNSUPPORTED, REJECTED = 0, 1, 2, 3
FUZZ = settings(
    max_examples=int(os.environ.get("BATCH_FUZZ_EXAMPLES", "250")), deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


# --- inputs ------------------------------------------------------------------------------------
def client_batch(n=5, *, value_size=20, keys=True, headers=False, compression="none",
                 timestamps=None, **kw) -> bytes:
    return build_batch(
        [bytes([i % 251]) * value_size for i in range(n)],
        keys=[b"key-%d" % i if keys and i % 4 != 3 else None for i in range(n)]
        if keys != "all" else [b"key-%d" % i for i in range(n)],
        headers=[[("h", b"x" * (i % 3)), ("n", None)] if headers else [] for i in range(n)],
        timestamps=timestamps or [NOW - 1000 + (i * 7919) % 500 for i in range(n)],
        compression=compression, **kw)


def aio_batch(n, codec=0) -> bytes:
    b = AioBuilder(2, codec, 0, -1, -1, -1, 1 << 30)
    for i in range(n):
        b.append(i, timestamp=NOW - 50 + i, key=b"k%d" % i, value=b"word " * 20, headers=[])
    return bytes(b.build())


BATCHES = {
    "one": client_batch(1),
    "plain": client_batch(30),
    "all-keys": client_batch(12, keys="all"),
    "headers": client_batch(20, headers=True),
    "no-timestamps": build_batch([b"v"] * 4, keys=[b"k"] * 4, timestamps=[-1] * 4),
    "idempotent": client_batch(8, producer_id=77, producer_epoch=2, base_sequence=40),
    "transactional": client_batch(3, producer_id=9, producer_epoch=0, base_sequence=0,
                                  transactional=True),
    "gzip": client_batch(25, compression="gzip", headers=True),
    "snappy": client_batch(25, compression="snappy"),
    "lz4": client_batch(25, compression="lz4"),
    "zstd": client_batch(25, compression="zstd"),
    "aio": aio_batch(40),
    "aio-lz4": aio_batch(40, codec=3),
    "base-offset-3": client_batch(4, base_offset=3),
    "epoch-stamped": client_batch(4, partition_leader_epoch=12),
    "producer-lat": client_batch(4, timestamp_type="log_append", now_ms=NOW - 5),
    "control": build_end_txn_marker(True, producer_id=5, producer_epoch=1, coordinator_epoch=3,
                                    timestamp_ms=NOW),
    "big": client_batch(120, value_size=1024, headers=True),   # > 64 KiB: GIL-free branches
    "big-lz4": client_batch(120, value_size=1024, compression="lz4"),
}
BATCH_IDS = sorted(BATCHES)

# topic / request settings: (log_append_time, compacted, client, before, after, target)
SETTINGS = [
    (False, False, True, MAX, MAX, -1),
    (True, False, True, MAX, MAX, -1),
    (False, True, True, MAX, MAX, -1),
    (False, False, True, 600, 100, -1),
    (False, False, True, 2000, -200, -1),
    (False, False, False, MAX, MAX, -1),
    (True, True, False, MAX, MAX, -1),
    (False, False, True, MAX, MAX, 0),
    (False, False, True, MAX, MAX, 3),
]


def fix_crc(buf) -> bytes:
    buf = bytearray(buf)
    struct.pack_into(">I", buf, 17, crc32c_pypi.crc32c(bytes(buf[21:])))
    return bytes(buf)


def kernel_args(buf, *, next_offset=1000, epoch=5, now=NOW, before=MAX, after=MAX, lat=False,
                compacted=False, client=True, analyze=True, mmb=MMB, target=-1):
    return (buf, next_offset, epoch, now, before, after, lat, compacted, client, analyze, mmb,
            target)


def _outcome(fn, *args, **kwargs):
    try:
        return ("ok", fn(*args, **kwargs))
    except Exception as exc:  # the error type (and message) is part of the contract
        return ("error", type(exc), str(exc))


def both(args, records=None):
    """The native answer, asserting the twin's is identical (the full tuple, bytes included)."""
    extra = () if records is None else (records,)
    got = _outcome(native.leader_append_fast, *args, *extra)
    expected = _outcome(twin.leader_append_fast, *args, *extra)
    if got[0] == "error" or expected[0] == "error":
        assert got[:2] == expected[:2], f"native {got!r:.300} != twin {expected!r:.300}"
    else:
        assert got == expected, f"native {got!r:.300} != twin {expected!r:.300}"
    return got


def full_call(args):
    """Both kernels, with the records decompressed when asked for (what the records layer does)."""
    got = both(args)
    if got[0] == "ok" and got[1][0] == NEED:
        try:
            area = decompress(got[1][5], memoryview(args[0])[61:])
        except Exception:
            return got
        got = both(args, area)
    return got


# --- the general path, spelled out ---------------------------------------------------------------
def general_leader(buf, next_offset, epoch, now, *, origin="client", lat=False, before=MAX,
                   after=MAX, target="producer", compacted=False, mmb=MMB):
    """What Log._append does for a leader append with the general functions: (info, result)."""
    info = analyze_and_validate(buf, origin, max_message_bytes=mmb)
    valid = trim_invalid_bytes(buf, info)
    topic = _Topic(next_offset, epoch, now, lat, before, after, compacted, origin == "client", mmb)
    result = _validate_and_assign_general(valid, topic, target)
    info.first_offset = next_offset
    info.last_offset = result.last_offset
    info.max_timestamp = result.max_timestamp
    info.shallow_offset_of_max_timestamp = result.shallow_offset_of_max_timestamp
    if lat:
        info.log_append_time = result.log_append_time
    return info, result


TARGET_NAMES = {-1: "producer", 0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def check_equivalence(buf, *, next_offset=1000, epoch=5, now=NOW, lat=False, compacted=False,
                      client=True, before=MAX, after=MAX, target=-1, mmb=MMB):
    """The public fast paths against the general path, for any input (accepted or not)."""
    origin = "client" if client else "coordinator"
    target_name = TARGET_NAMES[target]
    general = _outcome(general_leader, buf, next_offset, epoch, now, origin=origin, lat=lat,
                       before=before, after=after, target=target_name, compacted=compacted,
                       mmb=mmb)
    fast = analyze_validate_and_assign(buf, next_offset, epoch, now, origin, lat, before, after,
                                       fast_target_codec(target_name), compacted, mmb)
    if fast is not None:
        assert general[0] == "ok", f"fast path accepted what the general path rejects: {general}"
        info, out, base = fast
        g_info, g_result = general[1]
        assert info == g_info
        assert dataclasses.astuple(info) == dataclasses.astuple(g_info)
        assert bytes(out) == bytes(g_result.buffer)
        assert isinstance(out, bytearray)
        assert base == struct.unpack_from(">q", g_result.buffer, 0)[0]
    # validate_and_assign_offsets (fast attempt + general) == the general path alone
    kw = dict(timestamp_type="log_append" if lat else "create", timestamp_before_max_ms=before,
              timestamp_after_max_ms=after, target_compression=target_name, compacted=compacted,
              origin=origin, max_message_bytes=mmb)
    public = _outcome(validate_and_assign_offsets, buf, next_offset, epoch, now, **kw)
    alone = _outcome(_validate_and_assign_general, buf,
                     _Topic(next_offset, epoch, now, lat, before, after, compacted, client, mmb),
                     target_name)
    assert public == alone
    return fast


# --- the contract, case by case ----------------------------------------------------------------
@pytest.fixture
def k(kernel_impl):
    return load_kernel("_batch", "batch_py", kernel_impl)


def test_constants_match_contract():
    for module in (native, twin):
        assert (module.FAST_OK, module.FAST_NEED_RECORDS, module.FAST_UNSUPPORTED,
                module.FAST_REJECTED) == (OK, NEED, UNSUPPORTED, REJECTED)


def test_common_append(k):
    buf = BATCHES["plain"]
    status, out, last, max_ts, count, codec, base, source_last, source_epoch = \
        k.leader_append_fast(*kernel_args(buf, next_offset=1000, epoch=7))
    assert (status, last, count, codec, base, source_last, source_epoch) == \
        (OK, 1029, 30, 0, 1000, 29, -1)
    assert max_ts == max(NOW - 1000 + (i * 7919) % 500 for i in range(30))
    assert isinstance(out, bytearray) and len(out) == len(buf)
    assert struct.unpack_from(">qiib", out, 0) == (1000, len(buf) - 12, 7, 2)
    # nothing under the CRC changed: the verified CRC is kept, and it is still right
    assert out[17:] == buf[17:]
    assert struct.unpack_from(">I", out, 17)[0] == crc32c_pypi.crc32c(bytes(out[21:]))
    assert buf == BATCHES["plain"]   # the input is never written


def test_log_append_time_topic_rewrites_attributes_and_crc(k):
    buf = BATCHES["plain"]
    res = k.leader_append_fast(*kernel_args(buf, lat=True, now=NOW + 5))
    out = res[1]
    assert res[0] == OK and res[3] == NOW + 5
    assert struct.unpack_from(">h", out, 21)[0] == 0x08
    assert struct.unpack_from(">q", out, 35)[0] == NOW + 5
    assert struct.unpack_from(">I", out, 17)[0] == crc32c_pypi.crc32c(bytes(out[21:]))


def test_stale_max_timestamp_is_recomputed_and_high_attribute_bits_dropped(k):
    buf = bytearray(BATCHES["plain"])
    struct.pack_into(">h", buf, 21, 0x0100)          # an unused high attribute bit
    struct.pack_into(">q", buf, 35, NOW + 999_999)   # a max timestamp no record has
    buf = fix_crc(buf)
    res = k.leader_append_fast(*kernel_args(buf))
    assert res[0] == OK
    assert struct.unpack_from(">h", res[1], 21)[0] == 0
    assert struct.unpack_from(">q", res[1], 35)[0] == res[3] < NOW
    check_equivalence(buf)


def test_without_analyze_the_crc_is_kept_or_checked(k):
    """Issue 19: a CRC is never laundered. Without analysis a batch whose stamping changes
    nothing the CRC covers keeps the client's CRC (even a wrong one: the leader did not look);
    one that must be rewritten (LogAppendTime) has its CRC checked first and is rejected."""
    bad = bytearray(BATCHES["plain"])
    struct.pack_into(">I", bad, 17, 12345)
    assert k.leader_append_fast(*kernel_args(bytes(bad)))[0] == REJECTED
    res = k.leader_append_fast(*kernel_args(bytes(bad), analyze=False))
    assert res[0] == OK and struct.unpack_from(">I", res[1], 17)[0] == 12345
    assert k.leader_append_fast(*kernel_args(bytes(bad), analyze=False, lat=True))[0] == REJECTED
    check_equivalence(bytes(bad))


@pytest.mark.parametrize("name", ["gzip", "snappy", "lz4", "zstd", "aio-lz4"])
def test_compressed_batch_needs_its_records(k, name):
    buf = BATCHES[name]
    first = k.leader_append_fast(*kernel_args(buf))
    codec = buf[22] & 7
    assert first == (NEED, None, -1, -1, -1, codec, -1, -1, -1)
    area = decompress(codec, memoryview(buf)[61:])
    res = k.leader_append_fast(*kernel_args(buf), area)
    assert res[0] == OK and res[5] == codec
    assert check_equivalence(buf) is not None
    # a different target codec means recompression: not the fast path
    other = 1 if codec != 1 else 4
    assert k.leader_append_fast(*kernel_args(buf, target=other), area)[0] == UNSUPPORTED
    assert k.leader_append_fast(*kernel_args(buf, target=0))[0] == UNSUPPORTED


def test_compressed_with_out_of_order_inner_offsets_is_rebuilt_elsewhere(k):
    from replica_core.records.builder import assemble_batch, encode_headers, encode_record
    from replica_core.records.compression import compress

    area = bytearray()
    for i, delta in enumerate((0, 2, 5)):
        encode_record(area, delta, i, b"k", b"v", encode_headers([]))
    buf = assemble_batch(compress(1, bytes(area)), count=3, base_offset=0,
                         partition_leader_epoch=-1, attributes=1, last_offset_delta=2,
                         base_timestamp=NOW, max_timestamp=NOW + 2, producer_id=-1,
                         producer_epoch=-1, base_sequence=-1)
    assert k.leader_append_fast(*kernel_args(buf), bytes(area))[0] == UNSUPPORTED
    assert check_equivalence(buf) is None


def test_shapes_outside_the_fast_path(k):
    one = BATCHES["plain"]
    legacy = bytearray(one)
    legacy[16] = 1
    for buf in (b"", one[:60], one + one, one + b"\x00", one[:-1], bytes(legacy)):
        assert k.leader_append_fast(*kernel_args(buf))[0] == UNSUPPORTED
    assert k.leader_append_fast(*kernel_args(BATCHES["producer-lat"]))[0] == UNSUPPORTED
    for epoch in (2**31, -(2**31) - 1):
        assert k.leader_append_fast(*kernel_args(one, epoch=epoch))[0] == UNSUPPORTED
    assert k.leader_append_fast(*kernel_args(one, next_offset=MAX - 10))[0] == UNSUPPORTED
    assert k.leader_append_fast(*kernel_args(one, next_offset=MAX - 29))[0] == OK


def test_rejections(k):
    assert k.leader_append_fast(*kernel_args(BATCHES["base-offset-3"]))[0] == REJECTED
    assert k.leader_append_fast(*kernel_args(BATCHES["base-offset-3"], analyze=False))[0] == OK
    assert k.leader_append_fast(
        *kernel_args(BATCHES["base-offset-3"], client=False))[0] == OK
    plain = BATCHES["plain"]
    assert k.leader_append_fast(*kernel_args(plain, mmb=len(plain) - 1))[0] == REJECTED
    assert k.leader_append_fast(*kernel_args(plain, mmb=len(plain)))[0] == OK
    assert k.leader_append_fast(*kernel_args(plain, mmb=1, analyze=False))[0] == OK
    # record rules: compacted topics need keys, CreateTime window
    assert k.leader_append_fast(*kernel_args(plain, compacted=True))[0] == REJECTED
    assert k.leader_append_fast(*kernel_args(BATCHES["all-keys"], compacted=True))[0] == OK
    assert k.leader_append_fast(*kernel_args(plain, before=100))[0] == REJECTED
    assert k.leader_append_fast(*kernel_args(plain, before=100, lat=True))[0] == OK
    assert k.leader_append_fast(*kernel_args(BATCHES["no-timestamps"], before=0, after=0))[0] == OK
    # client batch rules
    control = BATCHES["control"]
    assert k.leader_append_fast(*kernel_args(control))[0] == REJECTED
    assert k.leader_append_fast(*kernel_args(control, client=False))[0] == OK
    for offset, fmt, value in ((57, ">i", 0), (57, ">i", 31), (23, ">i", -1), (53, ">i", -1),
                               (21, ">h", 5)):
        bad = bytearray(BATCHES["idempotent"])
        struct.pack_into(fmt, bad, offset, value)
        assert k.leader_append_fast(*kernel_args(fix_crc(bad)))[0] == REJECTED, (offset, value)


def test_structural_record_errors_are_rejections(k):
    plain = BATCHES["plain"]
    for cut in (1, 5, 40):
        buf = bytearray(plain[:-cut])
        struct.pack_into(">i", buf, 8, len(buf) - 12)
        buf = fix_crc(buf)
        assert k.leader_append_fast(*kernel_args(buf))[0] == REJECTED
        check_equivalence(buf)
    extra = bytearray(plain + b"\x00")
    struct.pack_into(">i", extra, 8, len(extra) - 12)
    assert k.leader_append_fast(*kernel_args(fix_crc(extra)))[0] == REJECTED


def test_arguments_must_fit_int64(k):
    with pytest.raises(OverflowError):
        k.leader_append_fast(*kernel_args(BATCHES["plain"], next_offset=2**63))
    with pytest.raises(OverflowError):
        k.leader_append_fast(*kernel_args(BATCHES["plain"], now=-(2**63) - 1))


def test_buffer_types(k):
    buf = BATCHES["plain"]
    reference = k.leader_append_fast(*kernel_args(buf))
    for obj in (bytearray(buf), memoryview(buf), memoryview(b"xx" + buf)[2:]):
        assert k.leader_append_fast(*kernel_args(obj)) == reference


# --- parity and equivalence over the batches × settings ----------------------------------------
@pytest.mark.parametrize("name", BATCH_IDS)
@pytest.mark.parametrize("setting", range(len(SETTINGS)))
@pytest.mark.parametrize("analyze", [True, False])
def test_parity_on_client_batches(name, setting, analyze):
    lat, compacted, client, before, after, target = SETTINGS[setting]
    buf = BATCHES[name]
    full_call(kernel_args(buf, lat=lat, compacted=compacted, client=client, before=before,
                          after=after, target=target, analyze=analyze))


@pytest.mark.parametrize("name", BATCH_IDS)
@pytest.mark.parametrize("setting", range(len(SETTINGS)))
def test_fast_path_equals_general_path(name, setting):
    lat, compacted, client, before, after, target = SETTINGS[setting]
    buf = BATCHES[name]
    fast = check_equivalence(buf, lat=lat, compacted=compacted, client=client, before=before,
                             after=after, target=target, epoch=3, next_offset=500)
    # the fast path is not vacuous: the plain client batch on a default topic always takes it
    if (name, setting) in (("plain", 0), ("lz4", 0), ("big", 0)):
        assert fast is not None


# --- hypothesis: mutated batches -----------------------------------------------------------------
_mutation = st.tuples(st.one_of(st.integers(0, 70), st.integers(0, 10**6)),
                      st.integers(0, 255))


@FUZZ
@given(name=st.sampled_from(BATCH_IDS), mutations=st.lists(_mutation, max_size=4),
       repair_crc=st.booleans(), cut=st.integers(0, 3),
       setting=st.integers(0, len(SETTINGS) - 1), analyze=st.booleans(),
       next_offset=st.sampled_from([0, 1000, 2**62, MAX - 3]),
       epoch=st.sampled_from([-1, 0, 7, 2**31 - 1, 2**31]),
       mmb=st.sampled_from([MMB, 200, 10**9]))
def test_mutated_batches(name, mutations, repair_crc, cut, setting, analyze, next_offset, epoch,
                         mmb):
    lat, compacted, client, before, after, target = SETTINGS[setting]
    buf = bytearray(BATCHES[name])
    for pos, value in mutations:
        buf[pos % len(buf)] = value
    if cut:
        del buf[len(buf) - cut:]
        if cut > 1:   # sometimes keep the size field consistent with the cut
            struct.pack_into(">i", buf, 8, len(buf) - 12)
    if repair_crc and len(buf) > 21:
        buf = bytearray(fix_crc(buf))
    buf = bytes(buf)
    got = full_call(kernel_args(buf, next_offset=next_offset, epoch=epoch, lat=lat,
                                compacted=compacted, client=client, before=before, after=after,
                                target=target, analyze=analyze, mmb=mmb))
    event(f"kernel status {got[1][0] if got[0] == 'ok' else 'raised'}")
    check_equivalence(buf, next_offset=next_offset, epoch=epoch, lat=lat, compacted=compacted,
                      client=client, before=before, after=after, target=target, mmb=mmb)


@FUZZ
@given(n=st.integers(1, 40), value_size=st.integers(0, 300), keys=st.booleans(),
       compression=st.sampled_from(["none", "none", "gzip", "lz4", "zstd"]),
       ts_spread=st.integers(-5000, 5000), setting=st.integers(0, len(SETTINGS) - 1),
       next_offset=st.integers(0, 2**40), epoch=st.integers(-1, 2**31 - 1))
def test_generated_batches(n, value_size, keys, compression, ts_spread, setting, next_offset,
                           epoch):
    lat, compacted, client, before, after, target = SETTINGS[setting]
    buf = client_batch(n, value_size=value_size, keys="all" if keys else True,
                       compression=compression,
                       timestamps=[NOW + (i * ts_spread) // max(n, 1) for i in range(n)])
    full_call(kernel_args(buf, next_offset=next_offset, epoch=epoch, lat=lat,
                          compacted=compacted, client=client, before=before, after=after,
                          target=target))
    check_equivalence(buf, next_offset=next_offset, epoch=epoch, lat=lat, compacted=compacted,
                      client=client, before=before, after=after, target=target)


# --- the log: fast append == general append -------------------------------------------------------
def _log_transcript(config, appends, monkeypatch, *, fast: bool):
    """Append ``appends`` ((bytes, epoch) pairs, clock advancing) to a fresh log; everything
    observable: each answer or error, then the files, LEO, HW and epoch cache."""
    accepted = []
    real = validator_module._leader_append_fast

    def counting(*args):
        res = real(*args)
        accepted.append(res[0] == OK)
        return res

    if fast:
        monkeypatch.setattr(validator_module, "_leader_append_fast", counting)
    else:   # the general path alone: no fused call in the log nor in validate_and_assign_offsets
        monkeypatch.setattr(records_module, "analyze_validate_and_assign",
                            lambda *a, **kw: None)
        monkeypatch.setattr(validator_module, "_leader_append_fast",
                            lambda *a: (UNSUPPORTED, None, -1, -1, -1, -1, -1, -1, -1))
    medium = MemoryMedium()
    medium.makedirs("/data")
    clock = ManualClock(NOW)
    log = Log.open("/data/topic-0", config, medium=medium, clock=clock)
    log.maybe_assign_epoch_start_offset(1, 0)
    out = []
    for buf, epoch in appends:
        clock.advance(7)
        try:
            info = log.append_as_leader(buf, epoch)
            out.append(("ok", dataclasses.astuple(info)))
        except Exception as exc:
            out.append(("error", type(exc), str(exc)))
    out.append((log.log_end_offset, log.high_watermark, log.leader_epoch_cache.entries(),
                [s.base_offset for s in log.segments]))
    log.flush()
    log.close()
    files = {name: medium.read_bytes(f"/data/topic-0/{name}")
             for name in medium.listdir("/data/topic-0")}
    out.append(files)
    monkeypatch.undo()
    return out, sum(accepted)


def _appends():
    bad_crc = bytearray(BATCHES["plain"])
    bad_crc[-1] ^= 0xFF
    return [
        (BATCHES["plain"], 1), (BATCHES["headers"], 1), (BATCHES["lz4"], 1),
        (BATCHES["base-offset-3"], 1), (bytes(bad_crc), 1), (BATCHES["control"], 1),
        (BATCHES["idempotent"], 2), (BATCHES["producer-lat"], 2), (BATCHES["gzip"], 2),
        (BATCHES["plain"] + BATCHES["one"], 2), (BATCHES["plain"][:-3], 2),
        (BATCHES["big"], 3), (BATCHES["all-keys"], 3), (BATCHES["no-timestamps"], 3),
        (BATCHES["aio"], -1), (BATCHES["one"], 2**31), (BATCHES["plain"], 4),
    ] + [(client_batch(6, value_size=400), 4)] * 20


@pytest.mark.parametrize(("config", "min_fast"), [
    (LogConfig(), 20),
    (LogConfig(segment_bytes=40_000, index_interval_bytes=100), 20),
    (LogConfig(message_timestamp_type="LogAppendTime", max_message_bytes=20_000), 20),
    (LogConfig(cleanup_policy=("compact",), compression_type="lz4"), 0),   # all declined
    (LogConfig(message_timestamp_before_max_ms=500, message_timestamp_after_max_ms=0), 0),
], ids=["default", "small-segments", "log-append-time", "compact-lz4", "window"])
def test_log_fast_append_equals_general_append(config, min_fast, monkeypatch):
    fast, n_fast = _log_transcript(config, _appends(), monkeypatch, fast=True)
    general, _ = _log_transcript(config, _appends(), monkeypatch, fast=False)
    assert fast == general
    assert n_fast >= min_fast   # the common appends really took the fused path


@pytest.mark.parametrize("kw", [
    {"origin": "broker"}, {"timestamp_type": "wall"}, {"timestamp_type": "CREATETIME"},
    {"timestamp_type": "LogAppendTime"}, {"origin": "replication"},
    {"target_compression": "brotli"}, {"target_compression": "uncompressed"},
    {"max_message_bytes": "many"}, {"timestamp_before_max_ms": 1.5e18},
    {"next_offset": 10.0}, {"next_offset": "10"}, {"next_offset": 2**64},
    {"leader_epoch": 2**40}, {"now_ms": np.int64(NOW)}, {"next_offset": np.int64(7)},
])
def test_unusual_arguments_behave_as_the_general_path(kw):
    """The fast attempt inside validate_and_assign_offsets never changes an answer or an error."""
    args = {"next_offset": 1000, "leader_epoch": 5, "now_ms": NOW}
    args.update({k: kw[k] for k in args.keys() & kw.keys()})
    options = {k: v for k, v in kw.items() if k not in args}
    buf = BATCHES["plain"]
    public = _outcome(validate_and_assign_offsets, buf, args["next_offset"],
                      args["leader_epoch"], args["now_ms"], **options)

    def general():
        validator_module._check_origin(options.get("origin", "client"))
        before = options.get("timestamp_before_max_ms", MAX)
        topic = _Topic(int(args["next_offset"]), int(args["leader_epoch"]), int(args["now_ms"]),
                       validator_module.timestamp_type_of(options.get("timestamp_type", "create")),
                       int(before), int(MAX), False, options.get("origin", "client") == "client",
                       int(options.get("max_message_bytes", MMB)))
        return _validate_and_assign_general(buf, topic, options.get("target_compression",
                                                                    "producer"))

    assert public == _outcome(general)


# --- validate_assign_fast: the one-call entry of records.validate_and_assign_offsets ------------
@pytest.mark.parametrize("name", BATCH_IDS)
@pytest.mark.parametrize("setting", range(len(SETTINGS)))
def test_validate_assign_fast_parity(name, setting):
    """Native and twin give the same result object (or both decline), and it carries what
    leader_append_fast computes for the same call without a CRC check."""
    from replica_core.records import ValidationResult

    lat, compacted, client, before, after, target = SETTINGS[setting]
    buf = BATCHES[name]
    args = (buf, 500, 3, NOW, before, after, lat, compacted, client, MMB, target, ValidationResult)
    got = _outcome(native.validate_assign_fast, *args)
    expected = _outcome(twin.validate_assign_fast, *args)
    assert got[:2] == expected[:2] and (got[0] == "error" or got == expected)
    raw = native.leader_append_fast(buf, 500, 3, NOW, before, after, lat, compacted, client,
                                    False, MMB, target)
    if raw[0] != native.FAST_OK:
        assert got == ("ok", None)
    else:
        res = got[1]
        assert type(res) is ValidationResult and bytes(res.buffer) == bytes(raw[1])
        assert (res.first_offset, res.last_offset, res.max_timestamp, res.num_records) == (
            500, raw[2], raw[3], raw[4])
        assert res.log_append_time == (NOW if lat else -1)
        assert res.shallow_offset_of_max_timestamp == raw[2]
        assert res.message_size_maybe_changed is False
