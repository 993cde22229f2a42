"""validate_and_assign_offsets: the fused-kernel fast path returns exactly what the general
path returns (bytes and every field), and falls back for everything it does not cover."""
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replica_core import records
from replica_core.errors import KafkaError
from replica_core.records import validator

NOW = 1_700_000_000_000


def no_fast_path(m):
    """Make validate_and_assign_offsets take its general path only."""
    m.setattr(validator, "_run_fast", lambda *a, **k: None)
    m.setattr(validator, "_validate_assign_fast", lambda *a, **k: None)


def both(monkeypatch, batch, **kw):
    fast = records.validate_and_assign_offsets(batch, 500, 7, NOW, **kw)
    with monkeypatch.context() as m:
        no_fast_path(m)
        slow = records.validate_and_assign_offsets(batch, 500, 7, NOW, **kw)
    return fast, slow


def same(fast, slow):
    assert bytes(fast.buffer) == bytes(slow.buffer)
    for f in ("first_offset", "last_offset", "max_timestamp", "shallow_offset_of_max_timestamp",
              "log_append_time", "num_records"):
        assert getattr(fast, f) == getattr(slow, f), f


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    values=st.lists(st.binary(max_size=64), min_size=1, max_size=30),
    codec=st.sampled_from(["none", "gzip", "lz4", "zstd", "snappy"]),
    ts_type=st.sampled_from(["create", "log_append"]),
    ts_offset=st.integers(min_value=-10_000, max_value=10_000),
)
def test_fast_equals_general(monkeypatch, values, codec, ts_type, ts_offset):
    batch = records.build_batch(values, compression=codec,
                                timestamps=[NOW + ts_offset + i for i in range(len(values))])
    same(*both(monkeypatch, batch, timestamp_type=ts_type))


@pytest.mark.parametrize("kw", [
    {"timestamp_before_max_ms": 10, "timestamp_after_max_ms": 10},   # timestamps out of range
    {"compacted": True},                                               # null keys rejected
    {"max_message_bytes": 10},                                         # re-check (rebuild path)
])
def test_errors_match_general_path(monkeypatch, kw):
    batch = records.build_batch([b"x" * 50] * 3, timestamps=[NOW - 10**6] * 3)
    errors = []
    for disable in (False, True):
        with monkeypatch.context() as m:
            if disable:
                no_fast_path(m)
            try:
                records.validate_and_assign_offsets(batch, 0, 0, NOW, **kw)
                errors.append(None)
            except KafkaError as exc:
                errors.append((type(exc), exc.code))
    assert errors[0] == errors[1]
    if "max_message_bytes" not in kw:
        assert errors[0] is not None


def test_fast_path_is_taken_for_a_plain_client_batch(monkeypatch):
    taken = []
    real = validator._validate_assign_fast

    def spy(*a, **k):
        res = real(*a, **k)
        taken.append(res is not None)
        return res

    monkeypatch.setattr(validator, "_validate_assign_fast", spy)
    res = records.validate_and_assign_offsets(records.build_batch([b"a", b"b"]), 0, 0, NOW)
    assert taken == [True] and type(res) is records.ValidationResult and res.last_offset == 1


def test_compressed_batches_take_the_two_call_fast_path(monkeypatch):
    """A compressed batch: the one-call entry declines (records needed), _run_fast finishes."""
    taken = []
    real = validator._run_fast

    def spy(*a, **k):
        res = real(*a, **k)
        taken.append(res is not None)
        return res

    monkeypatch.setattr(validator, "_run_fast", spy)
    batch = records.build_batch([b"a" * 20, b"b"], compression="lz4")
    res = records.validate_and_assign_offsets(batch, 10, 0, NOW)
    assert taken == [True] and res.first_offset == 10 and res.last_offset == 11
