"""MemoryMedium's first-touch fast paths give the state of the general ones.

A new partition directory is made pending (``create_dir_with_files``); its leader epoch
checkpoint is written (``write_atomic``) while it stays pending, and its log is opened on the
first append (``open``, making the directory). For a normalised string path these skip the
normalisation and build their objects in one step. Each sequence below runs three ways: plain
strings (the fast paths), the same paths spelt with a ``/./`` to normalise (the general paths
of a pending directory), and a directory made file by file before any file operation (the
generic ``Medium.create_dir_with_files`` sequence, nothing pending). All three must agree on
every name, byte, durable byte and dirty page, and after a power failure with torn writes
(the same generator draws) on what survived.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replica_core.storage.medium import PAGE_SIZE, MemoryMedium, TornWrite

ROOT = "/k/broker-1"
FILES = (("leader-epoch-checkpoint", 0), ("00000000000000000000.log", 0),
         ("00000000000000000000.index", 8192), ("00000000000000000000.timeindex", 8184))
EPOCH, LOG, INDEX = FILES[0][0], FILES[1][0], FILES[2][0]
WAYS = ("fast", "normalise", "stepwise")


def _path(way: str, d: int, name: str | None = None) -> str:
    base = f"{ROOT}/./t-{d}" if way == "normalise" else f"{ROOT}/t-{d}"
    return base if name is None else f"{base}/{name}"


def _new(way: str, persist: bool = False) -> MemoryMedium:
    m = MemoryMedium(fsync_persists_name=persist)
    m.makedirs(ROOT)
    return m


def _apply(m: MemoryMedium, way: str, op: tuple, handles: list, seen: list) -> None:
    kind, d, n = op
    data = bytes((d * 31 + n + i) % 251 for i in range(n))
    if kind == "mk":
        if not m.exists(_path(way, d)):
            if way == "stepwise":
                m.makedirs(_path(way, d))  # an existing directory: the generic sequence
            m.create_dir_with_files(_path(way, d), FILES)
        return
    if not m.exists(_path(way, d)):
        seen.append(("absent", kind, d))
        return
    if kind == "epoch":
        m.write_atomic(_path(way, d, EPOCH), data)
    elif kind == "append":
        f = m.open(_path(way, d, LOG))
        seen.append(("pos", f.append(data), f.size()))
        handles.append(f)
    elif kind == "view":
        f = m.open(_path(way, d, LOG), writable=False)
        seen.append(("view", bytes(f.view(0, n)), bytes(f.read(n // 2, n))))
    elif kind == "index":
        f = m.open(_path(way, d, INDEX))
        f.write(8 * (n % 4), data[:8])
        seen.append(("index", f.size(), bytes(f.read(0, 40))))
    elif kind == "flush":
        m.open(_path(way, d, LOG)).flush()
    elif kind == "sync":
        m.fsync_dir(_path(way, d))
    elif kind == "exists":
        seen.append(("exists", m.exists(_path(way, d, EPOCH)), m.exists(_path(way, d, "x"))))
    elif kind == "durable":
        seen.append(("durable", m.durable_bytes(_path(way, d, EPOCH)),
                     m.durable_size(_path(way, d, LOG))))
    elif kind == "read":
        seen.append(("read", m.read_bytes(_path(way, d, EPOCH)),
                     m.read_bytes(_path(way, d, INDEX))[:16]))
    elif kind == "list":
        seen.append(("list", m.listdir(_path(way, d))))
    elif kind == "ckpt_index":  # an atomic write over a file perhaps opened already
        m.write_atomic(_path(way, d, INDEX), data[:16])
    elif kind == "rm_index":
        if m.exists(_path(way, d, INDEX)):
            m.remove(_path(way, d, INDEX))
    elif kind == "rmtree":
        m.rmtree(_path(way, d))
    else:  # a power failure mid-sequence: every handle closes
        m.crash("power")
    seen.append(("closed", [f.closed for f in handles]))


def _state(m: MemoryMedium) -> list:
    out = []
    for p in m.files():
        inode = m._files[p]
        out.append((p, m.read_bytes(p), m.durable_bytes(p), m.durable_size(p),
                    tuple(inode.dirty_pages(PAGE_SIZE))))
    dirs = sorted(q for q in m._dirs if q.startswith(ROOT))
    return [out, sorted(m._durable), [(q, m.listdir(q)) for q in dirs]]


def _run(ops: list, torn: TornWrite | None, seed: int, persist: bool = False) -> list:
    """Each way's observations, end state, and (with ``torn``) what a power failure kept."""
    results = []
    for way in WAYS:
        m, handles, seen = _new(way, persist), [], []
        for op in ops:
            try:
                _apply(m, way, op, handles, seen)
            except FileNotFoundError as e:  # a file a power failure took
                seen.append(("missing", op, str(e).replace("/./", "/")))
        if torn is None:
            results.append((seen, _state(m)))
        else:
            lost = m.crash("power", torn=torn, rng=np.random.default_rng(seed))
            kept = [(t.path, t.dirty_pages, t.kept_pages) for t in lost]
            results.append((seen, kept, _state(m), [f.closed for f in handles]))
    return results


_ops = st.lists(st.tuples(
    st.sampled_from(["mk", "mk", "epoch", "append", "append", "view", "index", "flush", "sync",
                     "exists", "durable", "power", "read", "list", "ckpt_index", "rm_index",
                     "rmtree"]),
    st.integers(0, 2), st.integers(0, 3 * PAGE_SIZE)), max_size=20)


@settings(max_examples=60, deadline=None)
@given(ops=_ops, seed=st.integers(0, 2**16), persist=st.booleans())
def test_first_touch_fast_paths_match_the_general_paths(ops, seed, persist):
    """``persist``: a file fsync makes its name durable too (``fsync_persists_name``)."""
    for torn in (None, TornWrite.SUBSET, TornWrite.PREFIX):
        fast, normalise, stepwise = _run(ops, torn, seed, persist)
        assert fast == normalise
        assert fast == stepwise


@pytest.mark.parametrize("persist", [False, True])
@pytest.mark.parametrize("then", ["read", "list", "ckpt_index", "rm_index", "flush", "sync",
                                  "durable", "power", "rmtree", "epoch", "index"])
@pytest.mark.parametrize("epoch_first", [False, True])
def test_first_open_makes_one_file_and_the_rest_as_before(epoch_first, then, persist):
    """A new directory's log opened and appended to (its epoch checkpoint written first, or
    not), then one more step: the log file alone is made by the open, and all three ways agree
    on everything after the step and after a torn power failure."""
    ops = [("mk", 0, 0)] + ([("epoch", 0, 8)] if epoch_first else []) + [
        ("append", 0, 100), (then, 0, 40), ("append", 0, 50)]
    m = _new("fast", persist)
    for op in ops[:-2]:
        _apply(m, "fast", op, [], [])
    d = _path("fast", 0)
    assert d in m._pending and set(m._files) == {f"{d}/{LOG}"}
    assert m.untouched_files(d) is None and m.untouched_files(d, written=EPOCH) is None
    for torn in (None, TornWrite.SUBSET):
        fast, normalise, stepwise = _run(ops, torn, 5, persist)
        assert fast == normalise == stepwise


@pytest.mark.parametrize("torn", [TornWrite.SUBSET, TornWrite.PREFIX])
def test_new_partition_first_touch_then_torn_power_failure(torn):
    """The common first touch (directory made pending, epoch checkpoint written, first batch
    appended to the log over two pages, unflushed) then a power failure: the checkpoint and
    the names survive by the write's directory sync, the log keeps the pages the generator
    chose, the same for all three ways."""
    ops = [("mk", 0, 0), ("epoch", 0, 8), ("append", 0, PAGE_SIZE + 100), ("view", 0, 64)]
    fast, normalise, stepwise = _run(ops, torn, 7)
    assert fast == normalise == stepwise
    seen, kept, state, closed = fast
    assert closed == [True]
    d = f"{ROOT}/t-0/"
    assert [(p, dirty) for p, dirty, _ in kept] == [  # in path order; the indexes are holes
        (d + INDEX, (0, 1)), (d + LOG, (0, 1)), (d + FILES[3][0], (0, 1))]
    files = {row[0]: row for row in state[0]}
    epoch = files[d + EPOCH]
    assert epoch[1] == epoch[2] == bytes((8 + i) % 251 for i in range(8))
    n = PAGE_SIZE + 100
    written = bytes((n + i) % 251 for i in range(n))
    expect = {(): b"", (0,): written[:PAGE_SIZE], (1,): bytes(PAGE_SIZE) + written[PAGE_SIZE:],
              (0, 1): written}[kept[1][2]]
    log = files[d + LOG]
    assert log[1] == log[2] == expect
    index_kept = kept[0][2]
    assert files[d + INDEX][1] == bytes(PAGE_SIZE * (index_kept[-1] + 1) if index_kept else 0)


def test_pending_epoch_write_keeps_the_directory_pending_and_untouched_answers():
    """The fast epoch write keeps the directory pending (made on the next look inside) and
    makes ``untouched_files`` answer None, as the general path does."""
    m = _new("fast")
    d = _path("fast", 0)
    m.create_dir_with_files(d, FILES)
    assert m.untouched_files(d) == FILES
    m.write_atomic(f"{d}/{EPOCH}", b"0\n0\n")
    assert d in m._pending and m.untouched_files(d) is None
    assert m.durable_bytes(f"{d}/{EPOCH}") == b"0\n0\n" and d not in m._pending
    assert m.durable_size(f"{d}/{LOG}") == 0  # its name made durable by the write's sync


def test_pending_epoch_write_keeps_its_own_copy_of_the_bytes():
    """A write into a pending directory waits with it as the bytes written, not as the
    caller's buffer: a bytearray changed after the write leaves the file as written - read
    while pending, once the directory is made, and after a power failure (durable by the
    write's sync)."""
    m = _new("fast")
    d = _path("fast", 0)
    m.create_dir_with_files(d, FILES)
    data = bytearray(b"0\n1\n5 0\n")
    m.write_atomic(f"{d}/{EPOCH}", data)
    data[:] = b"changed!"
    assert d in m._pending and m.read_bytes(f"{d}/{EPOCH}") == b"0\n1\n5 0\n"
    assert d in m._pending  # a read made nothing
    assert m.listdir(d) == sorted(name for name, _ in FILES) and d not in m._pending
    assert m.read_bytes(f"{d}/{EPOCH}") == b"0\n1\n5 0\n"
    m.crash("power")
    assert m.read_bytes(f"{d}/{EPOCH}") == b"0\n1\n5 0\n"
