"""The leader's fetch-session kernels (KIP-227 incremental fetch over the §6.2 state table):
``session_fetch`` picks what a follower's request must read and applies §6.2 to the quiet rest;
``session_pending`` picks what a parked request must answer (``session_pending_marked`` the same
among the columns a parked request marked). Native against its twin, and both against a plain
numpy statement of the rule."""
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
    )


def distinct_rows(s: dict) -> dict:
    """``s`` with every row held once (one session holds a partition once; a duplicate row
    would double-apply §6.2): later duplicates not led here."""
    _, first = np.unique(s["rows"], return_index=True)
    dup = np.ones(len(s["rows"]), bool)
    dup[first] = False
    dup &= s["rows"] >= 0
    s["rows"][dup] = -1
    s["slots"][dup] = -1
    return s


def block(order, s: dict | None = None, **columns) -> np.ndarray:
    """The session block the kernels take (one row per column, ``SESSION_*``): ``order`` and
    the columns of ``s`` (or keyword columns), the output row zeroed."""
    cols = dict(s or {}, **columns)
    lay = kernel_module("twin")
    out = np.zeros((lay.SESSION_ROW_COUNT, len(cols["rows"])), np.int64)
    out[lay.SESSION_ORDER, : len(order)] = order
    for name, row in (("rows", lay.SESSION_ROWS), ("slots", lay.SESSION_SLOTS),
                      ("fetch_offsets", lay.SESSION_FETCH_OFFSET),
                      ("log_starts", lay.SESSION_LOG_START), ("sent_hw", lay.SESSION_SENT_HW),
                      ("sent_log_start", lay.SESSION_SENT_LOG_START),
                      ("req_epochs", lay.SESSION_REQ_EPOCH), ("mark", lay.SESSION_MARK)):
        if name in cols:
            out[row] = cols[name]
    return out


def picked(b: np.ndarray, m: int) -> list[int]:
    return b[kernel_module("twin").SESSION_OUT, :m].tolist()


def test_native_and_twin_share_the_session_layout():
    names = ("SESSION_ORDER", "SESSION_ROWS", "SESSION_SLOTS", "SESSION_FETCH_OFFSET",
             "SESSION_LOG_START", "SESSION_SENT_HW", "SESSION_SENT_LOG_START",
             "SESSION_REQ_EPOCH", "SESSION_OUT", "SESSION_MARK", "SESSION_ROW_COUNT")
    native, twin = kernel_module("native"), kernel_module("twin")
    assert [getattr(native, n) for n in names] == [getattr(twin, n) for n in names]
    assert sorted(getattr(twin, n) for n in names[:-1]) == list(range(twin.SESSION_ROW_COUNT))


def busy_columns(cols, R: int, s: dict, n: int) -> np.ndarray:
    """Of the first ``n`` entries of ``s``, those led here that a scan must pick."""
    rows, slots = s["rows"][:n], s["slots"][:n]
    f = s["fetch_offsets"][:n]
    r = np.maximum(rows, 0)
    flat = r * R + np.maximum(slots, 0)
    return ((cols.leader_leo[r] != f)
            | (cols.hw[r] != s["sent_hw"][:n]) | (cols.leo.reshape(-1)[flat] != f)
            | (cols.log_start_offset[r, 0] != s["sent_log_start"][:n])
            | (cols.leader_epoch[r] != s["req_epochs"][:n])
            | (cols.in_max_isr.reshape(-1)[flat] == 0))


def reference_fetch(cols, R: int, s: dict, n: int, apply_quiet: bool, now: int, epoch: int,
                    twin) -> list[int]:
    """The rule as whole-array numpy, the quiet updates through the twin's §6.2 one by one."""
    rows, slots = s["rows"][:n], s["slots"][:n]
    f = s["fetch_offsets"][:n]
    led = rows >= 0
    busy = busy_columns(cols, R, s, n)
    chosen = np.flatnonzero(np.where(led, busy, True))  # not led here: answer the error
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
    s = distinct_rows(random_session(rng, cols, P, R, n + 2))  # two spare entries past n
    now = T0 + int(rng.integers(0, 4)) * 10_000
    # the session visits its columns in its own order: a random permutation of them
    order = rng.permutation(n + 2).astype(np.int64)
    a, b, c = copy_columns(cols), copy_columns(cols), copy_columns(cols)
    native = kernel_module("native").ReplicaStateKernels(a, R)
    twin = kernel_module("twin").ReplicaStateKernels(b, R)
    ref_twin = kernel_module("twin").ReplicaStateKernels(c, R)
    outs = []
    for kern in (native, twin):
        session = block(order, s)
        session[kernel_module("twin").SESSION_OUT] = -7
        m = kern.session_fetch(session, n, apply_quiet, now, 5)
        outs.append(picked(session, m))
    in_order = {k: v[order] for k, v in s.items()}
    expected = [int(order[k]) for k in
                reference_fetch(c, R, in_order, n, apply_quiet, now, 5, ref_twin)]
    assert outs[0] == outs[1] == expected
    assert_same_columns(a, b)
    assert_same_columns(a, c)


@settings(max_examples=200, deadline=None)
@given(P=st.integers(1, 10), R=st.integers(2, 5), n=st.integers(0, 24),
       seed=st.integers(0, 2**32 - 1), apply_quiet=st.booleans())
def test_session_fetch_since_gives_the_full_scan_when_its_promise_holds(P, R, n, seed,
                                                                       apply_quiet):
    """Columns marked below ``since`` are quiet (the caller's promise); the others carry any
    mark. The scan from ``since`` picks the columns, and writes the state, a scan of every
    column does — native and twin alike."""
    rng = np.random.default_rng(seed)
    cols = random_columns(rng, P, R)
    s = distinct_rows(random_session(rng, cols, P, R, n + 2))
    quiet = (s["rows"] >= 0) & ~busy_columns(cols, R, s, n + 2)
    since = 5
    s["mark"] = np.where(quiet & (rng.random(n + 2) < 0.8), rng.integers(0, since, n + 2),
                         rng.integers(since, 9, n + 2))
    now = T0 + int(rng.integers(0, 4)) * 10_000
    order = rng.permutation(n + 2).astype(np.int64)
    lay = kernel_module("twin")
    results = []
    for impl, start in (("native", lay.EVERY_COLUMN), ("native", since), ("twin", since)):
        assert kernel_module(impl).EVERY_COLUMN == lay.EVERY_COLUMN
        state = copy_columns(cols)
        session = block(order, s)
        m = kernel_module(impl).ReplicaStateKernels(state, R).session_fetch(
            session, n, apply_quiet, now, 5, start)
        results.append((picked(session, m), state))
    assert results[0][0] == results[1][0] == results[2][0]
    assert_same_columns(results[0][1], results[1][1])
    assert_same_columns(results[0][1], results[2][1])


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
        session = block(order, s)
        session[kernel_module("twin").SESSION_OUT] = -7
        m = kern.session_pending(session, n)
        got.append(picked(session, m))
    in_order = {k: v[order] for k, v in s.items()}
    assert got[0] == got[1] == [int(order[k]) for k in reference_pending(cols, in_order, n)]
    assert_same_columns(cols, before)  # a parked read changes no follower state


@settings(max_examples=200, deadline=None)
@given(P=st.integers(1, 10), R=st.integers(2, 5), n=st.integers(0, 24),
       seed=st.integers(0, 2**32 - 1))
def test_session_pending_marked_native_twin_and_reference_agree(P, R, n, seed):
    """Among the columns marked with the stamp asked for (others carry older or newer stamps),
    the ones with news, in session order."""
    rng = np.random.default_rng(seed)
    cols = random_columns(rng, P, R)
    s = random_session(rng, cols, P, R, n + 3)
    order = rng.permutation(n + 3).astype(np.int64)  # three columns the session never visits
    stamp = int(rng.integers(1, 5))
    marks = rng.integers(stamp - 1, stamp + 2, n + 3).astype(np.int64)
    before = copy_columns(cols)
    lay = kernel_module("twin")
    got = []
    for impl in ("native", "twin"):
        kern = kernel_module(impl).ReplicaStateKernels(cols, R)
        session = block(order, s)
        session[lay.SESSION_MARK] = marks
        session[lay.SESSION_OUT] = -7
        m = kern.session_pending_marked(session, n, stamp)
        got.append(picked(session, m))
    in_order = {k: v[order] for k, v in s.items()}
    news = [int(order[k]) for k in reference_pending(cols, in_order, n)]
    expected = [j for j in news if marks[j] == stamp]
    assert got[0] == got[1] == expected
    # every column marked: exactly what session_pending picks over the whole session
    full = []
    for impl in ("native", "twin"):
        kern = kernel_module(impl).ReplicaStateKernels(cols, R)
        session = block(order, s)
        session[lay.SESSION_MARK] = stamp
        full.append(picked(session, kern.session_pending_marked(session, n, stamp)))
    assert full[0] == full[1] == news
    assert_same_columns(cols, before)


@pytest.mark.parametrize("impl", ["native", "twin"])
def test_session_pending_marked_refuses_a_bad_block(impl):
    rng = np.random.default_rng(4)
    cols = random_columns(rng, 3, 3)
    kern = kernel_module(impl).ReplicaStateKernels(cols, 3)
    lay = kernel_module("twin")
    z = [0, 0]
    with pytest.raises(ValueError):  # more entries asked for than the block has columns
        kern.session_pending_marked(block([0, 1], rows=[0, 1], fetch_offsets=z), 3, 1)
    with pytest.raises(ValueError):  # a block missing rows
        kern.session_pending_marked(block([0, 1], rows=[0, 1])[:-1], 1, 1)
    with pytest.raises(IndexError):  # column 2 is not there
        kern.session_pending_marked(block([0, 2], rows=[0, 1], fetch_offsets=z), 2, 1)
    bad_row = block([0, 1], rows=[0, 7], fetch_offsets=z)  # no partition 7
    bad_row[lay.SESSION_MARK] = [1, 1]
    with pytest.raises(IndexError):
        kern.session_pending_marked(bad_row, 2, 1)
    bad_row[lay.SESSION_MARK] = [1, 0]  # a column not marked is not looked at
    zero = np.zeros(1, np.int64)
    expected = reference_pending(cols, dict(rows=zero, fetch_offsets=zero, sent_hw=zero,
                                            sent_log_start=zero, req_epochs=zero), 1)
    assert picked(bad_row, kern.session_pending_marked(bad_row, 2, 1)) == expected


def caught_up_columns(rng: np.random.Generator, partitions: int):
    """Columns of ``partitions`` led partitions with three replicas, every follower caught up
    (LEO 10 = the leader's, HW 8, epoch 2, log start 3, all in the maximal ISR) and never
    caught up before (last caught-up time 0)."""
    cols = random_columns(rng, partitions, 3)
    cols.n_replicas[:] = 3
    cols.leader_leo[:] = 10
    cols.hw[:] = 8
    cols.leader_epoch[:] = 2
    cols.in_max_isr[:, :] = 1
    cols.leo[:, :] = 10
    cols.log_start_offset[:, 0] = 3
    cols.last_caught_up_time_ms[:, :] = 0
    return cols


@pytest.mark.parametrize("impl", ["native", "twin"])
def test_quiet_entry_updates_last_caught_up_and_busy_entry_does_not(impl):
    """A caught-up follower with nothing to read gets §6.2 at once (lastCaughtUpTimeMs = now);
    an entry with a new HW is left for the read, which applies §6.2 itself."""
    cols = caught_up_columns(np.random.default_rng(1), 2)
    kern = kernel_module(impl).ReplicaStateKernels(cols, 3)
    b = block([0, 1], rows=[0, 1], slots=[1, 1], fetch_offsets=[10, 10], log_starts=[0, 0],
              sent_hw=[8, 7], sent_log_start=[3, 3], req_epochs=[2, 2])
    m = kern.session_fetch(b, 2, True, T0, 4)
    assert picked(b, m) == [1]  # partition 1's HW (8) differs from the one sent (7)
    assert cols.last_caught_up_time_ms[0, 1] == T0 and cols.broker_epoch[0, 1] == 4
    assert cols.last_caught_up_time_ms[1, 1] == 0


@pytest.mark.parametrize("impl", ["native", "twin"])
def test_bad_column_after_quiet_ones_raises_before_any_update(impl):
    """A bad column anywhere in the session (here after two quiet ones, in session order)
    refuses the whole fetch before any quiet column gets its §6.2 update; the same block
    with that column mended updates both quiet ones (they are quiet) and picks nothing."""
    cols = caught_up_columns(np.random.default_rng(6), 3)
    before = copy_columns(cols)
    kern = kernel_module(impl).ReplicaStateKernels(cols, 3)
    quiet = dict(rows=[0, 1, 2], fetch_offsets=[10, 10, 10], log_starts=[0, 0, 0],
                 sent_hw=[8, 8, 8], sent_log_start=[3, 3, 3], req_epochs=[2, 2, 2])
    bad = block([1, 0, 2], slots=[1, 2, 3], **quiet)  # column 2's slot 3 is past n_replicas
    with pytest.raises(IndexError):
        kern.session_fetch(bad, 3, True, T0, 4)
    assert_same_columns(cols, before)
    mended = block([1, 0, 2], slots=[1, 2, 2], **quiet)
    assert kern.session_fetch(mended, 3, True, T0, 4) == 0
    assert [int(cols.last_caught_up_time_ms[p, r]) for p, r in ((0, 1), (1, 2), (2, 2))] == \
        [T0, T0, T0]


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
    for sent, expected in ((4, []), (0, [0])):
        b = block([0], rows=[0], slots=[1], fetch_offsets=[10], log_starts=[0], sent_hw=[10],
                  sent_log_start=[sent], req_epochs=[2])
        m = kern.session_fetch(b, 1, False, T0, 4)
        assert picked(b, m) == expected
        m = kern.session_pending(b, 1)
        assert picked(b, m) == expected


@pytest.mark.parametrize("impl", ["native", "twin"])
def test_bad_slot_raises_and_changes_nothing(impl):
    rng = np.random.default_rng(2)
    cols = random_columns(rng, 3, 3)
    cols.n_replicas[:] = 2
    before = copy_columns(cols)
    kern = kernel_module(impl).ReplicaStateKernels(cols, 3)
    z = [0, 0]
    bad_slot = block([0, 1], rows=[0, 1], slots=[1, 2])  # slot 2 is past n_replicas
    with pytest.raises(IndexError):
        kern.session_fetch(bad_slot, 2, True, T0, 1)
    assert_same_columns(cols, before)
    with pytest.raises(ValueError):  # more entries asked for than the block has columns
        kern.session_pending(block([0, 1], rows=[0, 1], fetch_offsets=z), 3)
    with pytest.raises(ValueError):  # a block missing rows
        kern.session_pending(block([0, 1], rows=[0, 1])[:-1], 1)
    outside = block([0, 2], rows=[0, 1], slots=[1, 1], fetch_offsets=z)  # column 2 is not there
    with pytest.raises(IndexError):
        kern.session_pending(outside, 2)
    with pytest.raises(IndexError):
        kern.session_fetch(outside, 2, True, T0, 1)
    assert_same_columns(cols, before)


def test_native_session_kernels_take_only_a_writable_contiguous_int64_block():
    """The compiled session kernels read the block through numpy's C API: anything but a
    writable C-contiguous 2-D int64 array is refused (ValueError; not an array: TypeError)
    before anything is read or written."""
    rng = np.random.default_rng(5)
    cols = random_columns(rng, 3, 3)
    before = copy_columns(cols)
    native = kernel_module("native")
    kern = native.ReplicaStateKernels(cols, 3)
    good = block([0, 1], rows=[0, 1], slots=[1, 1], fetch_offsets=[0, 0])
    read_only = good.copy()
    read_only.flags.writeable = False
    wide = np.zeros((good.shape[0], 4), np.int64)
    wide[:, ::2] = good
    calls = (lambda b: kern.session_fetch(b, 2, True, T0, 1),
             lambda b: kern.session_pending(b, 2),
             lambda b: kern.session_pending_marked(b, 2, 1),
             lambda b: native.session_move_to_end(b, 2, 0))
    for bad in (good.astype(np.int32), read_only, wide[:, ::2], good[None]):
        kept = bad.copy()
        for call in calls:
            with pytest.raises(ValueError):
                call(bad)
        assert np.array_equal(bad, kept)
    for call in calls:
        with pytest.raises(TypeError):
            call(good.tolist())
        with pytest.raises(TypeError):
            call(None)
    assert_same_columns(cols, before)
    assert kern.session_pending(good, 2) >= 0  # the same block, as it should be, is taken


@settings(max_examples=100, deadline=None)
@given(n=st.integers(1, 30), seed=st.integers(0, 2**32 - 1))
def test_session_move_to_end_native_twin_and_reference_agree(n, seed):
    """Moving a column to the end of the session order keeps every other column in place;
    asked for a column outside the live order it refuses and changes nothing."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(n + 2)  # two columns past the live order
    j = int(order[int(rng.integers(0, n))])
    expected = [c for c in order[:n].tolist() if c != j] + [j]
    for impl in ("native", "twin"):
        session = block(order, rows=np.full(n + 2, -1))
        pos = kernel_module(impl).session_move_to_end(session, n, j)
        lay = kernel_module("twin")
        assert pos == order[:n].tolist().index(j)
        assert session[lay.SESSION_ORDER, :n].tolist() == expected
        assert session[lay.SESSION_ORDER, n:].tolist() == order[n:].tolist()
        before = session.copy()
        with pytest.raises(ValueError):
            kernel_module(impl).session_move_to_end(session, n, int(order[n]))
        assert np.array_equal(session, before)
