"""The follower's one-batch append path (issue 13) against the general path it stands in for.

``analyze_follower_batch`` must answer exactly what ``analyze_and_validate(…, "replication",
ignore_record_size=True)`` answers, or None; ``Log.append_as_follower`` on it must leave the same
log — bytes, indexes, epoch cache, producer state — as the general ``Log._append``. The batches
are the real Kafka ones of tests/data/kafka-logs (and kafka-python/aiokafka ones in every codec),
on both batch-kernel builds.
"""
from __future__ import annotations

import struct

import pytest
from conftest import require_nonempty
from fuzz_harness import batch_kernel_build, client_batches, fixture_batches, with_fields

from replica_core.clock import ManualClock
from replica_core.errors import KafkaError
from replica_core.records import analyze_and_validate, analyze_follower_batch, scan
from replica_core.storage.config import LogConfig
from replica_core.storage.log import Log
from replica_core.storage.medium import MemoryMedium

NOW = 1_700_000_000_000


@pytest.fixture(params=["native", "twin"])
def build(request):
    with batch_kernel_build(request.param):
        yield request.param


def v2_batches() -> list[bytes]:
    return require_nonempty([b for b in fixture_batches() + client_batches() if b[16] == 2],
                            "v2 fixture batches")


def general(buf: bytes):
    return analyze_and_validate(buf, "replication", ignore_record_size=True)


def test_one_whole_batch_gets_what_the_general_analysis_gives(build):
    batches = v2_batches()
    taken = 0
    for b in batches:
        fast = analyze_follower_batch(b)
        assert fast is not None, b[:61].hex()  # real Kafka batches all qualify
        info, row = fast
        assert info == general(b)
        assert row == scan(b).headers.tolist()[0]
        taken += 1
    assert taken == len(batches)
    # memoryviews too, as fetch answers carry them; one sized in other units than bytes is
    # left to the general path
    info, _ = analyze_follower_batch(memoryview(batches[0]))
    assert info == general(batches[0])
    b = batches[0][:len(batches[0]) // 4 * 4]
    assert analyze_follower_batch(memoryview(b).cast("I")) is None


def test_anything_else_is_left_to_the_general_path(build):
    b = v2_batches()[0]
    corrupt = bytearray(b)
    corrupt[-1] ^= 0xFF
    nothing_else = {
        "two batches": b + with_fields(b, base_offset=struct.unpack_from(">q", b)[0] + 1000),
        "a partial tail": b + b[:30],
        "a partial batch": b[:-1],
        "a bad crc": bytes(corrupt),
        "a negative base offset": with_fields(b, base_offset=-5),
        "a negative last offset delta": with_fields(b, last_offset_delta=-1),
        "no bytes": b"",
    }
    for what, buf in nothing_else.items():
        assert analyze_follower_batch(buf) is None, what
    # each of those the general path takes (some with an error, which it raises)
    with pytest.raises(KafkaError):
        general(nothing_else["a bad crc"])
    with pytest.raises(KafkaError):
        general(nothing_else["a negative last offset delta"])
    assert general(nothing_else["two batches"]).shallow_count == 2


def _log(config: LogConfig) -> Log:
    return Log.open("/d/t-0", config, medium=MemoryMedium(), clock=ManualClock(NOW))


def _state(log: Log) -> tuple:
    producers = {pid: (e.to_snapshot_entry(), list(e.batch_metadata))
                 for pid, e in log.producer_state.active_producers.items()}
    return (log.log_end_offset, log.high_watermark, log.leader_epoch_cache.entries(), producers,
            log.producer_state.map_end_offset)


def _files(log: Log) -> dict[str, bytes]:
    medium = log.medium
    return {name: bytes(medium.read_bytes(f"{log.dir}/{name}"))
            for name in sorted(medium.listdir(log.dir))}


def _follower_stream(batches: list[bytes]) -> list[bytes]:
    """The batches re-based one after another from 0, with leader epochs that go up now and
    then, producer ids (new and returning producers, a bumped producer epoch, no sequence),
    and a few that the log refuses (a gap below the LEO, a bad CRC)."""
    out = []
    offset = 0
    for i, b in enumerate(batches):
        delta = struct.unpack_from(">i", b, 23)[0]
        fields = {"base_offset": offset, "partition_leader_epoch": 1 + i // 7}
        if i % 3:
            fields |= {"producer_id": 1000 + i % 5, "producer_epoch": (i // 11) % 3,
                       "base_sequence": -1 if i % 13 == 0 else i}
        out.append(with_fields(b, **fields))
        if i % 17 == 5:
            out.append(with_fields(b, base_offset=offset - 1))  # below the LEO: refused
        if i % 19 == 7:
            bad = bytearray(out[-1])
            bad[-1] ^= 0x55
            out.append(bytes(bad))  # a bad CRC: refused
        offset += delta + 1
    return out


@pytest.mark.parametrize("interval", [4096, 1], ids=["default-interval", "index-entry-due"])
def test_the_fast_append_leaves_what_the_general_append_leaves(build, interval):
    """Fed the same stream, a log appending through ``append_as_follower`` and one through the
    general ``_append`` answer the same (infos or errors) and end byte for byte the same."""
    config = LogConfig(index_interval_bytes=interval, segment_bytes=16 * 1024)
    fast, slow = _log(config), _log(config)
    stream = _follower_stream(v2_batches()[:60])
    refused = 0
    for buf in stream:
        try:
            want = slow._append(buf, "replication", False, -1, True)
        except KafkaError as e:
            refused += 1
            with pytest.raises(type(e)):
                fast.append_as_follower(buf)
        else:
            assert fast.append_as_follower(buf) == want
        assert _state(fast) == _state(slow)
    assert refused >= 6
    assert len(fast.segments) > 1  # the stream rolled segments on the way
    assert len(fast.leader_epoch_cache) > 6
    assert _files(fast) == _files(slow)


def test_sequences_wrapping_past_int32_max_on_both_append_paths(build):
    """A producer whose sequences wrap from 2**31 - 1 to 0 inside a batch: the follower's and
    the leader's one-batch paths (their producer-state check in line) cache the wrapped last
    sequence, and leave what the general append leaves."""
    b = next(b for b in v2_batches() if struct.unpack_from(">i", b, 23)[0] >= 3)
    delta = struct.unpack_from(">i", b, 23)[0]
    first_seq = 2**31 - 2
    wrapped = first_seq + delta - 2**31  # the sequence after 2**31 - 1 is 0
    assert 0 <= wrapped < delta
    config = LogConfig()
    # follower: the leader's offsets, then the producer's next batch at the wrapped sequence
    fast, slow = _log(config), _log(config)
    stream = [with_fields(b, base_offset=0, partition_leader_epoch=3, producer_id=77,
                          producer_epoch=1, base_sequence=first_seq),
              with_fields(b, base_offset=delta + 1, partition_leader_epoch=3, producer_id=77,
                          producer_epoch=1, base_sequence=wrapped + 1)]
    for buf in stream:
        assert fast.append_as_follower(buf) == slow._append(buf, "replication", False, -1, True)
    entry = fast.producer_state.last_entry(77)
    assert [m.last_seq for m in entry.batch_metadata] == [wrapped, wrapped + 1 + delta]
    assert _state(fast) == _state(slow)
    assert _files(fast) == _files(slow)
    # leader: a client's batches, offsets assigned; the retry of the first is a duplicate
    fast, slow = _log(config), _log(config)
    client = [with_fields(b, base_offset=0, producer_id=77, producer_epoch=1,
                          base_sequence=first_seq),
              with_fields(b, base_offset=0, producer_id=77, producer_epoch=1,
                          base_sequence=wrapped + 1)]
    for buf in client + client[:1]:
        got = fast.append_as_leader(buf, 5)
        want = slow._append(buf, "client", True, 5, False, fast.clock.milliseconds())
        assert (got.first_offset, got.last_offset) == (want.first_offset, want.last_offset)
    entry = fast.producer_state.last_entry(77)
    assert [m.last_seq for m in entry.batch_metadata] == [wrapped, wrapped + 1 + delta]
    assert fast.log_end_offset == 2 * (delta + 1)  # the retry was not written again
    assert _state(fast) == _state(slow)
    assert _files(fast) == _files(slow)
