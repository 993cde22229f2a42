"""Storage media: the same file-system behaviour from FileMedium and MemoryMedium, and the
MemoryMedium page-cache model (§2.8: written ≠ flushed)."""
from __future__ import annotations

import os
import posixpath

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replica_core.storage.medium import PAGE_SIZE, FileMedium, MemoryMedium, TornWrite


@pytest.fixture(params=["file", "memory"])
def fs(request, tmp_path):
    """(medium, root directory) for each medium."""
    if request.param == "file":
        return FileMedium(), str(tmp_path)
    m = MemoryMedium()
    m.makedirs("/data")
    return m, "/data"


def j(*parts: str) -> str:
    return posixpath.join(*parts)


# --- opening, reading, writing ----------------------------------------------------------------
def test_open_missing_without_create_raises(fs):
    m, root = fs
    with pytest.raises(FileNotFoundError):
        m.open(j(root, "nope"))
    assert not m.exists(j(root, "nope"))


def test_open_create_in_missing_directory_raises(fs):
    m, root = fs
    with pytest.raises(FileNotFoundError):
        m.open(j(root, "no-dir", "f"), create=True)


def test_create_gives_empty_file_and_existing_file_keeps_contents(fs):
    m, root = fs
    p = j(root, "f")
    with m.open(p, create=True) as f:
        assert f.size() == 0
        f.append(b"abc")
    with m.open(p, create=True) as f:  # create on an existing file does not truncate
        assert f.size() == 3
        assert bytes(f.read(0, 3)) == b"abc"


def test_append_returns_position_and_read_is_short_at_eof(fs):
    m, root = fs
    with m.open(j(root, "f"), create=True) as f:
        assert f.append(b"hello") == 0
        assert f.append(b" world") == 5
        assert f.size() == 11
        assert bytes(f.read(0, 5)) == b"hello"
        assert bytes(f.read(6, 100)) == b"world"
        assert bytes(f.read(11, 10)) == b""
        assert bytes(f.read(50, 10)) == b""
        assert bytes(f.read(3)) == b"lo world"  # n < 0: to the end


def test_write_in_place_and_past_end_zero_fills_gap(fs):
    m, root = fs
    with m.open(j(root, "f"), create=True) as f:
        f.append(b"aaaaaa")
        f.write(2, b"XY")
        assert bytes(f.read(0, 6)) == b"aaXYaa"
        f.write(8, b"Z")
        assert f.size() == 9
        assert bytes(f.read(0, 9)) == b"aaXYaa\x00\x00Z"
        assert f.append(b"!") == 9


def test_truncate_shrinks_and_extends_with_zeros(fs):
    m, root = fs
    with m.open(j(root, "f"), create=True) as f:
        f.append(b"0123456789")
        f.truncate(4)
        assert f.size() == 4
        f.truncate(8)
        assert bytes(f.read(0, 8)) == b"0123\x00\x00\x00\x00"
        assert f.append(b"x") == 8


def test_view_is_read_only_zero_copy_and_clipped(fs):
    m, root = fs
    with m.open(j(root, "f"), create=True) as f:
        f.append(b"abcdefgh")
        v = f.view()
        assert v.readonly
        assert bytes(v) == b"abcdefgh"
        part = f.view(2, 3)
        assert bytes(part) == b"cde"
        assert bytes(f.view(6, 100)) == b"gh"
        # an in-place write is seen through a view taken before it (same pages / same buffer)
        f.write(0, b"Z")
        assert bytes(v[:1]) == b"Z"
        v.release()
        part.release()


def test_view_of_empty_file_and_past_end(fs):
    m, root = fs
    with m.open(j(root, "f"), create=True) as f:
        assert len(f.view()) == 0
        f.append(b"ab")
        assert len(f.view(5)) == 0


def test_size_changes_while_a_view_is_held(fs):
    m, root = fs
    with m.open(j(root, "f"), create=True) as f:
        f.append(b"x" * 100)
        v = f.view(0, 10)
        f.append(b"y" * 10_000)  # growing must not be blocked by the view
        f.truncate(200_000)
        assert f.size() == 200_000
        assert bytes(f.view(100, 3)) == b"yyy"
        v.release()


def test_appends_at_the_end_with_and_without_views_keep_every_byte(fs):
    m, root = fs
    with m.open(j(root, "f"), create=True) as f:
        expected = b""
        for i in range(40):  # batches of growing sizes, each right at the end
            chunk = bytes([i]) * (7 + 97 * i)
            f.write(len(expected), memoryview(chunk))
            expected += chunk
            if i % 9 == 4:  # a view held across the next append, then released
                v = f.view(0, len(expected))
                f.append(b"v")
                expected += b"v"
                assert bytes(v) == expected[:-1]
                v.release()
        assert f.size() == len(expected)
        assert bytes(f.read(0, len(expected))) == expected


def test_closed_handle_and_read_only_handle(fs):
    m, root = fs
    p = j(root, "f")
    f = m.open(p, create=True)
    f.append(b"data")
    f.close()
    assert f.closed
    with pytest.raises(ValueError):
        f.read(0, 1)
    f.close()  # idempotent
    r = m.open(p, writable=False)
    assert bytes(r.read(0, 4)) == b"data"
    with pytest.raises(PermissionError):
        r.append(b"x")
    with pytest.raises(PermissionError):
        r.truncate(0)
    r.close()


# --- names ------------------------------------------------------------------------------------
def test_makedirs_exists_is_dir_listdir_sorted(fs):
    m, root = fs
    m.makedirs(j(root, "a", "b", "c"))
    m.makedirs(j(root, "a", "b"))  # no error when it exists
    for name in ("z", "m", "a0"):
        m.open(j(root, "a", name), create=True).close()
    assert m.is_dir(j(root, "a", "b"))
    assert not m.is_dir(j(root, "a", "z"))
    assert m.exists(j(root, "a", "b", "c"))
    assert m.listdir(j(root, "a")) == ["a0", "b", "m", "z"]
    assert m.listdir(j(root, "a", "b", "c")) == []
    with pytest.raises(FileNotFoundError):
        m.listdir(j(root, "missing"))


def test_list_files_and_list_dirs_split_listdir(fs):
    """list_files / list_dirs: the sorted names of a directory's files / subdirectories (on
    both media; MemoryMedium answers from its entries, the base class by listing and checking
    each name); a missing directory or a file raise as listdir does."""
    m, root = fs
    d = j(root, "p")
    m.makedirs(j(d, "sub.log"))  # a directory named like a file stays out
    m.makedirs(j(d, "a"))
    for name in ("z.index", "00000000000000000000.log", "b"):
        m.open(j(d, name), create=True).close()
    assert m.listdir(d) == ["00000000000000000000.log", "a", "b", "sub.log", "z.index"]
    assert m.list_files(d) == ["00000000000000000000.log", "b", "z.index"]
    assert m.list_dirs(d) == ["a", "sub.log"]
    assert m.list_files(d + "/") == m.list_files(d) and m.list_dirs(d + "/") == m.list_dirs(d)
    assert m.list_files(j(d, "a")) == [] == m.list_dirs(j(d, "a"))
    for method in (m.list_files, m.list_dirs):
        with pytest.raises(FileNotFoundError):
            method(j(root, "missing"))
        with pytest.raises(NotADirectoryError):
            method(j(d, "b"))


def test_memory_list_files_of_a_directory_made_in_one_call():
    """A directory created with its files in one call (still pending) lists its files as
    listdir does, and afterwards answers as a directory made file by file."""
    mem = MemoryMedium()
    mem.makedirs("/d")
    mem.create_dir_with_files("/d/p", (("x.log", 0), ("a.index", 16)))
    assert "/d/p" in mem._pending
    assert mem.list_files("/d/p") == ["a.index", "x.log"]
    assert "/d/p" not in mem._pending
    mem.create_dir_with_files("/d/r", (("y.log", 0),))
    assert mem.list_dirs("/d") == ["p", "r"] and mem.list_dirs("/d/r") == []
    mem.makedirs("/d/p/q")
    assert mem.list_files("/d/p") == ["a.index", "x.log"] == [
        n for n in mem.listdir("/d/p") if not mem.is_dir("/d/p/" + n)]


def test_remove_file_and_empty_directory(fs):
    m, root = fs
    m.makedirs(j(root, "d"))
    m.open(j(root, "d", "f"), create=True).close()
    with pytest.raises(OSError):
        m.remove(j(root, "d"))  # not empty
    m.remove(j(root, "d", "f"))
    assert not m.exists(j(root, "d", "f"))
    m.remove(j(root, "d"))
    assert not m.exists(j(root, "d"))
    with pytest.raises(FileNotFoundError):
        m.remove(j(root, "d"))


def test_rmtree(fs):
    m, root = fs
    m.makedirs(j(root, "t", "u"))
    m.open(j(root, "t", "u", "f"), create=True).close()
    m.open(j(root, "t", "g"), create=True).close()
    m.rmtree(j(root, "t"))
    assert not m.exists(j(root, "t"))
    assert m.listdir(root) == []


def test_rename_replaces_target_and_open_handle_follows(fs):
    m, root = fs
    a, b = j(root, "a"), j(root, "b")
    fa = m.open(a, create=True)
    fa.append(b"new")
    with m.open(b, create=True) as fb:
        fb.append(b"old contents")
    m.rename(a, b)
    assert not m.exists(a)
    assert m.read_bytes(b) == b"new"
    fa.append(b"!")  # the handle still refers to the renamed file
    fa.close()
    assert m.read_bytes(b) == b"new!"
    with pytest.raises(FileNotFoundError):
        m.rename(a, b)


def test_rename_directory_moves_its_contents(fs):
    m, root = fs
    m.makedirs(j(root, "topic-0"))
    with m.open(j(root, "topic-0", "00000000000000000000.log"), create=True) as f:
        f.append(b"batch")
    m.rename(j(root, "topic-0"), j(root, "topic-0.abc-delete"))
    assert not m.exists(j(root, "topic-0"))
    assert m.listdir(j(root, "topic-0.abc-delete")) == ["00000000000000000000.log"]
    assert m.read_bytes(j(root, "topic-0.abc-delete", "00000000000000000000.log")) == b"batch"


def test_write_atomic_replaces_and_leaves_no_tmp(fs):
    m, root = fs
    p = j(root, "checkpoint")
    m.write_atomic(p, b"0\n0\n")
    m.write_atomic(p, b"0\n1\nt 0 5\n")
    assert m.read_bytes(p) == b"0\n1\nt 0 5\n"
    assert m.listdir(root) == ["checkpoint"]


def test_fsync_dir_of_missing_directory_raises(fs):
    m, root = fs
    with pytest.raises(FileNotFoundError):
        m.fsync_dir(j(root, "missing"))
    m.fsync_dir(root)


def test_read_bytes_missing_raises(fs):
    m, root = fs
    with pytest.raises(FileNotFoundError):
        m.read_bytes(j(root, "missing"))


def test_file_medium_writes_real_files(tmp_path):
    m = FileMedium()
    p = str(tmp_path / "f")
    with m.open(p, create=True) as f:
        f.append(b"abc")
        f.write(5, b"z")
        f.flush()
    assert (tmp_path / "f").read_bytes() == b"abc\x00\x00z"
    assert os.path.getsize(p) == 6


# --- the page-cache model ---------------------------------------------------------------------
@pytest.fixture
def mem():
    m = MemoryMedium()
    m.makedirs("/d")
    return m


def test_power_loss_keeps_only_flushed_bytes(mem):
    with mem.open("/d/f", create=True) as f:
        f.append(b"durable")
        f.flush()
        f.append(b"+cached")
        f.write(0, b"D")
    mem.fsync_dir("/d")
    assert mem.read_bytes("/d/f") == b"Durable+cached"
    assert mem.durable_bytes("/d/f") == b"durable"
    mem.crash("power")
    assert mem.read_bytes("/d/f") == b"durable"


def test_process_crash_loses_nothing_but_closes_handles(mem):
    f = mem.open("/d/f", create=True)
    f.append(b"never flushed")
    mem.crash("process")
    assert f.closed
    with pytest.raises(ValueError):
        f.append(b"x")
    assert mem.read_bytes("/d/f") == b"never flushed"
    assert mem.crashes == ["process"]


def test_power_loss_closes_handles(mem):
    f = mem.open("/d/f", create=True)
    mem.crash("power")
    assert f.closed


def test_crash_closes_the_live_handles_and_the_medium_keeps_none_of_the_dropped_ones(mem):
    """The medium tracks open handles weakly: one dropped by its owner is forgotten, one still
    held is closed by a crash and follows a rename until then."""
    live = mem.open("/d/f", create=True)
    for _ in range(50):
        mem.open("/d/f").append(b"x")  # dropped at once
    assert len(mem._handles) == 1
    mem.rename("/d/f", "/d/g")
    assert live.path == "/d/g" and live.size() == 50
    mem.crash("process")
    assert live.closed and not mem._handles
    assert mem.read_bytes("/d/g") == b"x" * 50


def test_created_and_flushed_but_directory_not_synced_vanishes(mem):
    with mem.open("/d/new", create=True) as f:
        f.append(b"x")
        f.flush()
    assert mem.durable_bytes("/d/new") is None
    mem.crash("power")
    assert not mem.exists("/d/new")


def test_name_synced_but_contents_never_flushed_comes_back_empty(mem):
    with mem.open("/d/new", create=True) as f:
        f.append(b"lost")
    mem.fsync_dir("/d")
    mem.crash("power")
    assert mem.exists("/d/new")
    assert mem.read_bytes("/d/new") == b""


def test_fsync_persists_name_option_models_ext4(mem):
    m = MemoryMedium(fsync_persists_name=True)
    m.makedirs("/d")
    with m.open("/d/new", create=True) as f:
        f.append(b"kept")
        f.flush()
    m.crash("power")
    assert m.read_bytes("/d/new") == b"kept"


def test_unsynced_rename_reverts(mem):
    with mem.open("/d/a", create=True) as f:
        f.append(b"A")
        f.flush()
    with mem.open("/d/b", create=True) as f:
        f.append(b"B")
        f.flush()
    mem.fsync_dir("/d")
    mem.rename("/d/a", "/d/b")
    assert mem.read_bytes("/d/b") == b"A"
    mem.crash("power")
    assert mem.read_bytes("/d/a") == b"A"
    assert mem.read_bytes("/d/b") == b"B"


def test_synced_rename_survives(mem):
    with mem.open("/d/a", create=True) as f:
        f.append(b"A")
        f.flush()
    mem.rename("/d/a", "/d/b")
    mem.fsync_dir("/d")
    mem.crash("power")
    assert not mem.exists("/d/a")
    assert mem.read_bytes("/d/b") == b"A"


def test_unsynced_remove_reverts(mem):
    with mem.open("/d/f", create=True) as f:
        f.append(b"still here")
        f.flush()
    mem.fsync_dir("/d")
    mem.remove("/d/f")
    mem.crash("power")
    assert mem.read_bytes("/d/f") == b"still here"


def test_write_atomic_is_durable(mem):
    mem.write_atomic("/d/cp", b"0\n0\n")
    mem.crash("power")
    assert mem.read_bytes("/d/cp") == b"0\n0\n"
    assert mem.listdir("/d") == ["cp"]


def test_unflushed_truncate_reverts_to_flushed_length(mem):
    with mem.open("/d/f", create=True) as f:
        f.append(b"0123456789")
        f.flush()
        f.truncate(3)
    mem.fsync_dir("/d")
    mem.crash("power")
    assert mem.read_bytes("/d/f") == b"0123456789"


def test_flush_after_shrink_and_regrow_makes_the_zeros_durable(mem):
    with mem.open("/d/f", create=True) as f:
        f.append(b"abcdefgh")
        f.flush()
        f.truncate(2)
        f.truncate(8)
        f.write(7, b"Z")
        f.flush()
    mem.fsync_dir("/d")
    assert mem.durable_bytes("/d/f") == b"ab\x00\x00\x00\x00\x00Z"
    mem.crash("power")
    assert mem.read_bytes("/d/f") == b"ab\x00\x00\x00\x00\x00Z"


def test_directories_are_durable_at_once(mem):
    mem.makedirs("/d/topic-0")
    mem.crash("power")
    assert mem.is_dir("/d/topic-0")


def test_unknown_crash_kind_rejected(mem):
    with pytest.raises(ValueError):
        mem.crash("meteor")


# --- storage faults: torn writes, bit flips, lost fsyncs ---------------------------------------
def _pattern(n: int, seed: int) -> bytes:
    """``n`` bytes with no zero byte (so a page that did not reach the disk is visible)."""
    return bytes(1 + (i * 7 + seed) % 251 for i in range(n))


def _torn_setup(mem: MemoryMedium, durable_len: int, new_len: int) -> tuple[bytes, bytes]:
    old, new = _pattern(durable_len, 1), _pattern(new_len, 2)
    with mem.open("/d/seg", create=True) as f:
        f.append(old)
        f.flush()
        f.append(new)
    mem.fsync_dir("/d")
    return old, new


def test_torn_prefix_keeps_whole_leading_pages_of_the_unflushed_range(mem):
    partial = 0
    for seed in range(12):
        m = MemoryMedium()
        m.makedirs("/d")
        old, new = _torn_setup(m, 1000, 3 * PAGE_SIZE + 500)  # dirty bytes 1000..13788: pages 0-3
        cached = old + new
        (torn,) = m.crash("power", torn=TornWrite.PREFIX, rng=np.random.default_rng(seed))
        assert torn.path == "/d/seg"
        assert torn.dirty_pages == (0, 1, 2, 3)
        k = len(torn.kept_pages)
        assert torn.kept_pages == tuple(range(k))
        partial += 0 < k < 4
        after = m.read_bytes("/d/seg")
        if k == 0:
            assert after == old
        else:  # whole pages, up to the cached length
            assert after == cached[:min(k * PAGE_SIZE, len(cached))]
    assert partial  # some seed tears the write part way


def test_torn_subset_keeps_any_pages_and_zeros_the_rest_past_the_old_length(mem):
    seen_gap = False
    for seed in range(12):
        m = MemoryMedium()
        m.makedirs("/d")
        old, new = _torn_setup(m, 100, 4 * PAGE_SIZE)
        cached = old + new
        (torn,) = m.crash("power", torn=TornWrite.SUBSET, rng=np.random.default_rng(seed))
        assert torn.dirty_pages == (0, 1, 2, 3, 4)
        kept = set(torn.kept_pages)
        assert kept <= set(torn.dirty_pages)
        after = m.read_bytes("/d/seg")
        end = max([min((p + 1) * PAGE_SIZE, len(cached)) for p in kept], default=len(old))
        assert len(after) == max(end, len(old))
        for p in range(5):
            lo, hi = p * PAGE_SIZE, min((p + 1) * PAGE_SIZE, len(after))
            if lo >= hi:
                continue
            if p in kept:
                assert after[lo:hi] == cached[lo:hi]
            else:  # the old durable bytes, zeros past them
                assert after[lo:hi] == (old + bytes(len(after)))[lo:hi]
                seen_gap |= lo >= len(old) and any(q > p for q in kept)
    assert seen_gap  # some seed leaves a hole of zeros before a page that reached the disk


def test_power_failure_without_torn_model_reports_unflushed_files_and_keeps_nothing(mem):
    old, _new = _torn_setup(mem, 10, 20)
    (torn,) = mem.crash("power")
    assert torn.dirty_pages == (0,) and torn.kept_pages == ()
    assert mem.read_bytes("/d/seg") == old


def test_torn_write_needs_power_failure_and_generator(mem):
    with pytest.raises(ValueError):
        mem.crash("process", torn=TornWrite.PREFIX, rng=np.random.default_rng(1))
    with pytest.raises(ValueError):
        mem.crash("power", torn=TornWrite.PREFIX)
    with pytest.raises(ValueError):
        mem.crash("power", torn="prefix", rng=np.random.default_rng(1))


def test_bit_flip_hits_the_disk_copy_and_shows_after_a_power_failure(mem):
    with mem.open("/d/f", create=True) as f:
        f.append(b"\x00" * 16)
        f.flush()
    mem.fsync_dir("/d")
    mem.flip_bit("/d/f", 8 * 5 + 3)  # byte 5, bit 3
    assert mem.read_bytes("/d/f") == b"\x00" * 16  # the page cache still has the good copy
    assert mem.durable_bytes("/d/f") == b"\x00" * 5 + b"\x08" + b"\x00" * 10
    mem.crash("power")
    assert mem.read_bytes("/d/f") == b"\x00" * 5 + b"\x08" + b"\x00" * 10


def test_bit_flip_on_uncached_file_is_seen_at_once(mem):
    with mem.open("/d/f", create=True) as f:
        f.append(b"\xff\xff")
        f.flush()
    mem.fsync_dir("/d")
    mem.flip_bit("/d/f", 15, cached=True)
    assert mem.read_bytes("/d/f") == b"\xff\x7f"
    assert mem.durable_bytes("/d/f") == b"\xff\x7f"


def test_bit_flip_outside_durable_bytes_is_refused(mem):
    with mem.open("/d/f", create=True) as f:
        f.append(b"ab")
        f.flush()
        f.append(b"cd")  # cached, not durable
    with pytest.raises(FileNotFoundError):
        mem.flip_bit("/d/f", 0)  # the name is not durable yet
    mem.fsync_dir("/d")
    with pytest.raises(ValueError, match="bit 16"):
        mem.flip_bit("/d/f", 16)
    with pytest.raises(ValueError):
        mem.flip_bit("/d/f", -1)
    assert mem.durable_bytes("/d/f") == b"ab"


def test_lost_fsync_reports_success_persists_nothing_and_stays_lost(mem):
    with mem.open("/d/f", create=True) as f:
        f.append(b"AAAA")
        f.flush()
        mem.fsync_dir("/d")
        f.append(b"BBBB")
        mem.lose_fsyncs = True
        f.flush()  # reports success
        assert (mem.fsyncs, mem.fsyncs_lost) == (1, 1)
        mem.lose_fsyncs = False
        f.append(b"CCCC")
        f.flush()  # only what was written since the lost fsync is written now
    assert mem.fsyncs == 2
    mem.crash("power")
    assert mem.read_bytes("/d/f") == b"AAAA" + b"\x00" * 4 + b"CCCC"


def test_files_lists_current_paths(mem):
    mem.open("/d/b", create=True).close()
    mem.open("/d/a", create=True).close()
    assert mem.files() == ["/d/a", "/d/b"]


# --- both media agree on any sequence of file operations --------------------------------------
_file_ops = st.lists(st.one_of(
    st.tuples(st.just("append"), st.binary(max_size=300)),
    st.tuples(st.just("write"), st.integers(0, 2000), st.binary(min_size=1, max_size=100)),
    st.tuples(st.just("truncate"), st.integers(0, 2000)),
    st.tuples(st.just("read"), st.integers(0, 2100), st.integers(-1, 500)),
    st.tuples(st.just("view"), st.integers(0, 2100), st.integers(-1, 500)),
    st.tuples(st.just("flush")),
), max_size=30)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_file_ops)
def test_file_and_memory_media_agree(tmp_path, ops):
    fm, mm = FileMedium(), MemoryMedium()
    root = tmp_path / f"agree-{len(os.listdir(tmp_path))}"
    root.mkdir()
    ff = fm.open(str(root / "f"), create=True)
    mm.makedirs("/r")
    mf = mm.open("/r/f", create=True)
    for op in ops:
        if op[0] == "append":
            assert ff.append(op[1]) == mf.append(op[1])
        elif op[0] == "write":
            ff.write(op[1], op[2])
            mf.write(op[1], op[2])
        elif op[0] == "truncate":
            ff.truncate(op[1])
            mf.truncate(op[1])
        elif op[0] == "read":
            assert bytes(ff.read(op[1], op[2])) == bytes(mf.read(op[1], op[2]))
        elif op[0] == "view":
            a, b = ff.view(op[1], op[2]), mf.view(op[1], op[2])
            assert bytes(a) == bytes(b)
            a.release()
            b.release()
        else:
            ff.flush()
            mf.flush()
        assert ff.size() == mf.size()
    mf.flush()
    mm.fsync_dir("/r")
    assert (root / "f").read_bytes() == mm.read_bytes("/r/f") == mm.durable_bytes("/r/f")
    ff.close()
    mf.close()


# ---- the directory index of MemoryMedium against a brute-force scan ---------------------------
_name_ops = st.lists(st.one_of(
    st.tuples(st.just("create"), st.integers(0, 2), st.integers(0, 3)),
    st.tuples(st.just("remove"), st.integers(0, 2), st.integers(0, 3)),
    st.tuples(st.just("rename"), st.integers(0, 2), st.integers(0, 3), st.integers(0, 2),
              st.integers(0, 3)),
    st.tuples(st.just("mkdir"), st.integers(0, 2)),
    st.tuples(st.just("rmdir"), st.integers(0, 2)),
    st.tuples(st.just("mvdir"), st.integers(0, 2), st.integers(0, 2)),
    st.tuples(st.just("rmtree"), st.integers(0, 2)),
    st.tuples(st.just("fsync_dir"), st.integers(-1, 2)),
    st.tuples(st.just("flush"), st.integers(0, 2), st.integers(0, 3)),
    st.tuples(st.just("crash"), st.sampled_from(["process", "power"])),
), max_size=40)


def _scan_listdir(m: MemoryMedium, d: str) -> list[str]:
    files = [f.rsplit("/", 1)[1] for f in m.files() if f.rsplit("/", 1)[0] == d]
    dirs = [q.rsplit("/", 1)[1] for q in m._dirs if q not in (".", "/") and q.rsplit("/", 1)[0] == d]
    return sorted(files + dirs)


@settings(max_examples=150, deadline=None)
@given(ops=_name_ops)
def test_memory_medium_directory_index_matches_a_scan(ops):
    """listdir, fsync_dir and power failures through the per-directory index give what a scan
    of every name gives, after any sequence of name operations."""
    m = MemoryMedium()
    m.makedirs("/r/d0")
    handles = {}
    for op in ops:
        try:
            if op[0] == "create":
                f = m.open(f"/r/d{op[1]}/f{op[2]}", create=True)
                f.append(b"x%d" % op[2])
                handles[f.path] = f
            elif op[0] == "remove":
                m.remove(f"/r/d{op[1]}/f{op[2]}")
            elif op[0] == "rename":
                m.rename(f"/r/d{op[1]}/f{op[2]}", f"/r/d{op[3]}/f{op[4]}")
            elif op[0] == "mkdir":
                m.makedirs(f"/r/d{op[1]}")
            elif op[0] == "rmdir":
                m.remove(f"/r/d{op[1]}")
            elif op[0] == "mvdir":
                m.rename(f"/r/d{op[1]}", f"/r/d{op[2]}")
            elif op[0] == "rmtree":
                m.rmtree(f"/r/d{op[1]}")
            elif op[0] == "fsync_dir":
                d = "/r" if op[1] < 0 else f"/r/d{op[1]}"
                m.fsync_dir(d)
            elif op[0] == "flush":
                f = m.open(f"/r/d{op[1]}/f{op[2]}")
                f.flush()
            else:
                m.crash(op[1])
                handles.clear()
        except (FileNotFoundError, FileExistsError, IsADirectoryError, NotADirectoryError,
                OSError):
            pass
        for d in ["/r", *(f"/r/d{i}" for i in range(3))]:
            if m.is_dir(d):
                assert m.listdir(d) == _scan_listdir(m, d)
        live = {id(inode) for inode in m._files.values()}
        for f in handles.values():
            if not f.closed and id(f._inode) in live:  # renamed files keep their handles
                assert m._files.get(f.path) is f._inode
    # every current name is openable; a power failure keeps exactly the durable names
    for path in m.files():
        m.open(path).size()
    durable = sorted(m._durable)
    m.crash("power")
    assert m.files() == durable
    for d in ["/r", *(f"/r/d{i}" for i in range(3))]:
        if m.is_dir(d):
            assert m.listdir(d) == _scan_listdir(m, d)


@settings(max_examples=80, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from(["atomic", "create", "sync", "power", "open"]),
                              st.integers(0, 2), st.binary(max_size=20)), max_size=25))
def test_memory_write_atomic_matches_the_generic_steps(ops):
    """MemoryMedium's direct write_atomic leaves the same names, bytes and durable state as
    Medium's generic tmp-write/flush/rename/fsync_dir sequence."""
    from replica_core.storage.medium import Medium

    fast, slow = MemoryMedium(), MemoryMedium()
    keep = []
    for m in (fast, slow):
        m.makedirs("/d")
    for kind, i, data in ops:
        for m in (fast, slow):
            path = f"/d/f{i}"
            if kind == "atomic":
                (m.write_atomic if m is fast else lambda p, b, m=m: Medium.write_atomic(m, p, b))(
                    path, data)
            elif kind == "create":
                f = m.open(path, create=True)
                f.append(data)
                keep.append(f)
            elif kind == "sync":
                m.fsync_dir("/d")
            elif kind == "power":
                m.crash("power")
            elif m.exists(path):
                keep.append(m.open(path))
        assert fast.files() == slow.files()
        for p in fast.files():
            assert fast.read_bytes(p) == slow.read_bytes(p)
            assert fast.durable_bytes(p) == slow.durable_bytes(p)
        assert sorted(fast._durable) == sorted(slow._durable)


# --- sparse files: an extension is a hole until written or viewed ------------------------------
def test_extension_is_a_hole_that_reads_as_zeros_until_written(mem):
    with mem.open("/d/f", create=True) as f:
        f.append(b"head")
        f.truncate(10 * 1024 * 1024)  # segment.index.bytes' default pre-allocation
        inode = f._inode
        assert len(inode.buf) < 4096  # nothing materialised for the hole
        assert f.size() == 10 * 1024 * 1024
        assert f.read(0, 8) == b"head\x00\x00\x00\x00"
        assert f.read(5_000_000, 3) == b"\x00\x00\x00"
        f.write(4096, b"W")
        assert len(inode.buf) < 16384
        assert f.read(4094, 4) == b"\x00\x00W\x00"
        v = f.view(0, 8192)  # a view aliases bytes: the viewed range is filled
        assert len(inode.buf) >= 8192 and bytes(v[4096:4097]) == b"W"
        f.write(100, b"Q")  # inside the materialised range: the held view sees it
        assert bytes(v[100:101]) == b"Q"
        v.release()
        f.flush()
    mem.fsync_dir("/d")
    durable = mem.durable_bytes("/d/f")
    assert len(durable) == 10 * 1024 * 1024
    assert durable[:4] == b"head" and durable[100:101] == b"Q" and durable[4096:4097] == b"W"
    assert durable.count(0) == len(durable) - 6
    mem.crash("power")
    assert mem.read_bytes("/d/f") == durable


_sparse_ops = st.lists(st.one_of(
    st.tuples(st.just("append"), st.binary(max_size=200)),
    st.tuples(st.just("write"), st.integers(0, 3000), st.binary(min_size=1, max_size=100)),
    st.tuples(st.just("truncate"), st.integers(0, 3000)),
    st.tuples(st.just("view"), st.integers(0, 3100), st.integers(-1, 800)),
    st.tuples(st.just("flush")),
    st.tuples(st.just("crash")),
), max_size=40)


@settings(max_examples=200, deadline=None)
@given(ops=_sparse_ops)
def test_sparse_memory_file_matches_a_dense_model(ops):
    """Current and durable bytes after any mix of appends, writes, truncations (holes), views,
    flushes and power failures equal a model that keeps every byte."""
    m = MemoryMedium()
    m.makedirs("/r")
    f = m.open("/r/f", create=True)
    m.fsync_dir("/r")
    cur, durable = bytearray(), bytearray()
    for op in ops:
        if op[0] == "append":
            assert f.append(op[1]) == len(cur)
            cur += op[1]
        elif op[0] == "write":
            f.write(op[1], op[2])
            end = op[1] + len(op[2])
            if end > len(cur):
                cur += bytes(end - len(cur))
            cur[op[1]:end] = op[2]
        elif op[0] == "truncate":
            f.truncate(op[1])
            cur = cur[:op[1]] + bytes(max(0, op[1] - len(cur)))
        elif op[0] == "view":
            v = f.view(op[1], op[2])
            end = len(cur) if op[2] < 0 else min(len(cur), op[1] + op[2])
            assert bytes(v) == bytes(cur[op[1]:max(op[1], end)])
            v.release()
        elif op[0] == "flush":
            f.flush()
            durable = bytearray(cur)
        else:
            m.crash("power")
            cur = bytearray(durable)
            f = m.open("/r/f")
        assert f.size() == len(cur)
        assert f.read(0) == bytes(cur)
        assert m.durable_bytes("/r/f") == bytes(durable)


def test_memory_read_bytes_reads_what_a_handle_reads(mem):
    """MemoryMedium.read_bytes answers a made file from its inode (no handle): the same bytes a
    handle reads, a hole as zeros; a file of a pending directory from its listed length
    without making the directory; a path to normalise, a directory and a missing file take the
    handle's way and its errors."""
    with mem.open("/d/f", create=True) as f:
        f.append(b"abc")
        f.truncate(9)  # a hole after the written bytes
    with mem.open("/d/f", writable=False) as f:
        by_handle = bytes(f.read(0, f.size()))
    assert mem.read_bytes("/d/f") == by_handle == b"abc" + bytes(6)
    assert mem.read_bytes("/d/./f") == by_handle
    mem.create_dir_with_files("/d/p", (("a", 0), ("b", 5)))
    assert "/d/p" in mem._pending
    assert mem.read_bytes("/d/p/b") == bytes(5) and "/d/p" in mem._pending
    assert mem.read_bytes("/d/p/a") == b"" and "/d/p" in mem._pending
    assert mem.read_bytes("/d/./p/b") == bytes(5) and "/d/p" not in mem._pending
    with pytest.raises(FileNotFoundError):
        mem.read_bytes("/d/missing")
    with pytest.raises(IsADirectoryError):
        mem.read_bytes("/d/p")


@pytest.mark.parametrize("kind", ["bytes", "bytearray", "memoryview", "int32 view"])
def test_write_takes_any_buffer_as_its_bytes(fs, kind):
    """A write of bytes, a bytearray or a view (also one of a non-byte format, read as its raw
    bytes) stores the same bytes at the same place, on both media."""
    m, root = fs
    raw = np.arange(6, dtype=np.int32).tobytes()
    data = {"bytes": raw, "bytearray": bytearray(raw), "memoryview": memoryview(raw),
            "int32 view": memoryview(np.arange(6, dtype=np.int32))}[kind]
    with m.open(j(root, "f"), create=True) as f:
        f.write(3, data)
        f.write(0, data[:1] if kind != "int32 view" else memoryview(raw)[:1])
        assert f.size() == 3 + len(raw)
    assert m.read_bytes(j(root, "f")) == raw[:1] + b"\x00\x00" + raw
