"""The leader's fetch-session kernels (KIP-227 incremental fetch over the §6.2 state table):
``session_fetch`` picks what a follower's request must read and applies §6.2 to the quiet rest;
``session_pending`` picks what a parked request must answer. Native against its twin, and both
against a plain numpy statement of the rule."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_replica_state import (
    T0,
    assert_same_columns,
    copy_columns,
    kernel_module,
    random_columns,
)


def random_session(rng: np.random.Generator, cols, P: int, R: int, n: int) -> dict:
    """Session columns over ``cols``: each entry led here (a row and a follower slot) or not."""
    led = rng.random(n) < 0.8
    rows = np.where(led, rng.integers(0, P, n), -1).astype(np.int64)
    n_rep = cols.n_replicas
    slots = np.array([int(rng.integers(1, max(2, n_rep[r]))) if r >= 0 else -1 for r in rows],
                     dtype=np.int64)
    ok = np.array([r < 0 or s < n_rep[r] for r, s in zip(rows, slots, strict=True)], dtype=bool)
    rows[~ok] = -1
    slots[~ok] = -1
    lleo = np.where(rows >= 0, cols.leader_leo[np.maximum(rows, 0)], 0)
    near = rng.random(n) < 0.6  # most followers are caught up, as in a steady cluster
    fetch = np.where(near, lleo, rng.integers(-1, 13, n)).astype(np.int64)
    flat = rows * R + slots
    caught = rng.random(n) < 0.7
    leo = cols.leo.reshape(-1)
    leo[flat[(rows >= 0) & caught]] = fetch[(rows >= 0) & caught]
    hw = np.where(rows >= 0, cols.hw[np.maximum(rows, 0)], 0)
    ep = np.where(rows >= 0, cols.leader_epoch[np.maximum(rows, 0)], 0)
    lso0 = np.where(rows >= 0, cols.log_start_offset[np.maximum(rows, 0), 0], 0)
    return dict(
        rows=rows, slots=slots, fetch_offsets=fetch,
        log_starts=rng.integers(0, 3, n).astype(np.int64),
        sent_hw=np.where(rng.random(n) < 0.7, hw, rng.integers(-2, 12, n)).astype(np.int64),
        # the leader's own log start is slot 0's; most entries sent the current one
        sent_log_start=np.where(rng.random(n) < 0.8, lso0, rng.integers(-1, 4, n)
                                ).astype(np.int64),
        req_epochs=np.where(rng.random(n) < 0.8, ep, rng.integers(-1, 4, n)).astype(np.int64),
        changed=(rng.random(n) < 0.15).astype(np.uint8),
    )


def reference_fetch(cols, R: int, s: dict, n: int, apply_quiet: bool, now: int, epoch: int,
                    twin) -> list[int]:
    """The rule as whole-array numpy, the quiet updates through the twin's §6.2 one by one."""
    rows, slots = s["rows"][:n], s["slots"][:n]
    f = s["fetch_offsets"][:n]
    led = rows >= 0
    r = np.maximum(rows, 0)
    flat = r * R + np.maximum(slots, 0)
    busy = (s["changed"][:n].astype(bool) | (cols.leader_leo[r] != f)
            | (cols.hw[r] != s["sent_hw"][:n]) | (cols.leo.reshape(-1)[flat] != f)
            | (cols.log_start_offset[r, 0] != s["sent_log_start"][:n])
            | (cols.leader_epoch[r] != s["req_epochs"][:n])
            | (cols.in_max_isr.reshape(-1)[flat] == 0))
    chosen = np.flatnonzero(np.where(led, busy, s["changed"][:n].astype(bool)))
    if apply_quiet:
        for k in np.flatnonzero(led & ~busy):
            twin.follower_fetch(int(rows[k]), int(slots[k]), int(f[k]),
                                int(s["log_starts"][k]), now, int(cols.leader_leo[rows[k]]),
                                epoch)
    return chosen.tolist()


def reference_pending(cols, s: dict, n: int) -> list[int]:
    rows, f = s["rows"][:n], s["fetch_offsets"][:n]
    r = np.maximum(rows, 0)
    news = ((cols.leader_leo[r] != f) | (cols.hw[r] != s["sent_hw"][:n])
            | (cols.log_start_offset[r, 0] != s["sent_log_start"][:n])
            | (cols.leader_epoch[r] != s["req_epochs"][:n]))
    return np.flatnonzero(np.where(rows >= 0, news, f >= 0)).tolist()


@settings(max_examples=200, deadline=None)
@given(P=st.integers(1, 10), R=st.integers(2, 5), n=st.integers(0, 24),
       seed=st.integers(0, 2**32 - 1), apply_quiet=st.booleans())
def test_session_fetch_native_twin_and_reference_agree(P, R, n, seed, apply_quiet):
    rng = np.random.default_rng(seed)
    cols = random_columns(rng, P, R)
    s = random_session(rng, cols, P, R, n + 2)  # two spare entries past n are never looked at
    if len(set(s["rows"][s["rows"] >= 0].tolist())) != int((s["rows"] >= 0).sum()):
        # one session holds a partition once; duplicate rows would double-apply §6.2
        _, first = np.unique(s["rows"], return_index=True)
        dup = np.ones(len(s["rows"]), bool)
        dup[first] = False
        s["rows"][dup] = -1
        s["slots"][dup] = -1
    now = T0 + int(rng.integers(0, 4)) * 10_000
    # the session visits its columns in its own order: a random permutation of them
    order = rng.permutation(n + 2).astype(np.int64)
    a, b, c = copy_columns(cols), copy_columns(cols), copy_columns(cols)
    native = kernel_module("native").ReplicaStateKernels(a, R)
    twin = kernel_module("twin").ReplicaStateKernels(b, R)
    ref_twin = kernel_module("twin").ReplicaStateKernels(c, R)
    outs = []
    for kern in (native, twin):
        out = np.full(n + 2, -7, np.int64)
        m = kern.session_fetch(order, s["rows"], s["slots"], s["fetch_offsets"], s["log_starts"],
                               s["sent_hw"], s["sent_log_start"], s["req_epochs"], s["changed"], n,
                               apply_quiet, now,
                               5, out)
        outs.append(out[:m].tolist())
    in_order = {k: v[order] for k, v in s.items()}
    expected = [int(order[k]) for k in
                reference_fetch(c, R, in_order, n, apply_quiet, now, 5, ref_twin)]
    assert outs[0] == outs[1] == expected
    assert_same_columns(a, b)
    assert_same_columns(a, c)


@settings(max_examples=200, deadline=None)
@given(P=st.integers(1, 10), R=st.integers(2, 5), n=st.integers(0, 24),
       seed=st.integers(0, 2**32 - 1))
def test_session_pending_native_twin_and_reference_agree(P, R, n, seed):
    rng = np.random.default_rng(seed)
    cols = random_columns(rng, P, R)
    s = random_session(rng, cols, P, R, n + 3)
    order = rng.permutation(n + 3).astype(np.int64)  # three columns the session never visits
    before = copy_columns(cols)
    got = []
    for impl in ("native", "twin"):
        kern = kernel_module(impl).ReplicaStateKernels(cols, R)
        out = np.full(n, -7, np.int64)
        m = kern.session_pending(order, s["rows"], s["fetch_offsets"], s["sent_hw"],
                                 s["sent_log_start"], s["req_epochs"], n, out)
        got.append(out[:m].tolist())
    in_order = {k: v[order] for k, v in s.items()}
    assert got[0] == got[1] == [int(order[k]) for k in reference_pending(cols, in_order, n)]
    assert_same_columns(cols, before)  # a parked read changes no follower state


@pytest.mark.parametrize("impl", ["native", "twin"])
def test_quiet_entry_updates_last_caught_up_and_busy_entry_does_not(impl):
    """A caught-up follower with nothing to read gets §6.2 at once (lastCaughtUpTimeMs = now);
    an entry with a new HW is left for the read, which applies §6.2 itself."""
    rng = np.random.default_rng(1)
    cols = random_columns(rng, 2, 3)
    cols.n_replicas[:] = 3
    cols.leader_leo[:] = 10
    cols.hw[:] = 8
    cols.leader_epoch[:] = 2
    cols.in_max_isr[:, :] = 1
    cols.leo[:, :] = 10
    cols.log_start_offset[:, 0] = 3
    cols.last_caught_up_time_ms[:, :] = 0
    kern = kernel_module(impl).ReplicaStateKernels(cols, 3)
    rows = np.array([0, 1], np.int64)
    slots = np.array([1, 1], np.int64)
    fo = np.array([10, 10], np.int64)
    out = np.zeros(2, np.int64)
    m = kern.session_fetch(np.arange(2, dtype=np.int64), rows, slots, fo, np.zeros(2, np.int64),
                           np.array([8, 7], np.int64),
                           np.array([3, 3], np.int64), np.array([2, 2], np.int64),
                           np.zeros(2, np.uint8), 2, True, T0, 4, out)
    assert out[:m].tolist() == [1]  # partition 1's HW (8) differs from the one sent (7)
    assert cols.last_caught_up_time_ms[0, 1] == T0 and cols.broker_epoch[0, 1] == 4
    assert cols.last_caught_up_time_ms[1, 1] == 0


@pytest.mark.parametrize("impl", ["native", "twin"])
def test_leader_log_start_move_is_answered(impl):
    """KIP-227 maybeUpdateResponseData: a log start other than the one last sent must be
    answered, in a request and when a parked one completes; the same one need not."""
    rng = np.random.default_rng(3)
    cols = random_columns(rng, 1, 2)
    cols.n_replicas[:] = 2
    cols.leader_leo[:] = 10
    cols.hw[:] = 10
    cols.leader_epoch[:] = 2
    cols.in_max_isr[:, :] = 1
    cols.leo[:, :] = 10
    cols.log_start_offset[0, 0] = 4
    kern = kernel_module(impl).ReplicaStateKernels(cols, 2)
    one = lambda v: np.array([v], np.int64)  # noqa: E731
    out = np.zeros(1, np.int64)
    for sent, expected in ((4, []), (0, [0])):
        m = kern.session_fetch(one(0), one(0), one(1), one(10), one(0), one(10), one(sent), one(2),
                               np.zeros(1, np.uint8), 1, False, T0, 4, out)
        assert out[:m].tolist() == expected
        m = kern.session_pending(one(0), one(0), one(10), one(10), one(sent), one(2), 1, out)
        assert out[:m].tolist() == expected


@pytest.mark.parametrize("impl", ["native", "twin"])
def test_bad_slot_raises_and_changes_nothing(impl):
    rng = np.random.default_rng(2)
    cols = random_columns(rng, 3, 3)
    cols.n_replicas[:] = 2
    before = copy_columns(cols)
    kern = kernel_module(impl).ReplicaStateKernels(cols, 3)
    rows = np.array([0, 1], np.int64)
    slots = np.array([1, 2], np.int64)  # slot 2 is past n_replicas
    z = np.zeros(2, np.int64)
    with pytest.raises(IndexError):
        kern.session_fetch(np.arange(2, dtype=np.int64), rows, slots, z, z, z, z, z,
                           np.zeros(2, np.uint8), 2, True, T0, 1, np.zeros(2, np.int64))
    assert_same_columns(cols, before)
    with pytest.raises(ValueError):  # an order shorter than the entries asked for
        kern.session_pending(np.arange(2, dtype=np.int64), rows, z, z, z, z, 3,
                             np.zeros(3, np.int64))
    outside = np.array([0, 2], np.int64)  # column 2 does not exist
    with pytest.raises(IndexError):
        kern.session_pending(outside, rows, z, z, z, z, 2, np.zeros(2, np.int64))
    with pytest.raises(IndexError):
        kern.session_fetch(outside, rows, np.ones(2, np.int64), z, z, z, z, z,
                           np.zeros(2, np.uint8), 2, True, T0, 1, np.zeros(2, np.int64))
    assert_same_columns(cols, before)
