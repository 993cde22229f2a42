"""The leader's fetch sessions (KIP-227): Kafka's ``FetchSession.scala`` beside the replica manager.

A fetch names a session by id and epoch (``FetchRequest.session_id`` / ``session_epoch``):

* epoch −1 (FINAL) without a session: a *sessionless* fetch, answered in full, nothing cached;
* epoch 0 (INITIAL): a *full* fetch; any session it names is closed, and a new one is created
  from its partitions when the response is generated (if the cache has, or can evict, a slot);
* epoch ≥ 1: an *incremental* fetch against the cached session. An unknown id answers
  ``FETCH_SESSION_ID_NOT_FOUND``, an epoch other than the one expected next answers
  ``INVALID_FETCH_SESSION_EPOCH``. The request carries only partitions added or changed (their
  new fetch offset, epochs, log start) and the partitions to forget; the response carries only
  partitions with records, a changed high watermark or log start offset, an error or a
  diverging epoch. A partition that returned records moves to the end of the session, so the
  response byte limit rotates fairly over the session.

Sessions live in a :class:`~replica_core.replication.fetch_session_cache.FetchSessionCache`
(``max.incremental.fetch.session.cache.slots``, Kafka's eviction rules). Topic ids are not used
(fetch versions below 13), so ``FETCH_SESSION_TOPIC_ID_ERROR`` never arises.

Storage: a session keeps its partitions as columns (fetch offset, leader epoch, the follower's
log start, the cached high watermark and log start offset, the partition's row and replica slot
in the leader's :class:`~replica_core.replication.state.ReplicaStateTable`) so that the leader
can scan a whole session in one kernel call: an incremental follower fetch reads only the
partitions Kafka's response filter could keep and updates the rest's follower fetch state in
the kernel (``session_fetch``); a parked session fetch re-reads only partitions with news
(``session_pending``), looking only at the columns it marked as possibly changed while the
leadership, the leaders' log starts and the session stayed as they were when it parked
(``session_pending_marked``, the ``mark`` row). Both give the response Kafka gives after reading
every partition. The scan itself compares the leader's values only on the columns marked since
the session's last scan (:meth:`FetchSession.begin_scan`).
"""
from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from replica_core._fast import load
from replica_core._fast.replica_state_py import (
    EVERY_COLUMN,
    SESSION_FETCH_OFFSET,
    SESSION_LOG_START,
    SESSION_MARK,
    SESSION_ORDER,
    SESSION_OUT,
    SESSION_REQ_EPOCH,
    SESSION_ROW_COUNT,
    SESSION_ROWS,
    SESSION_SENT_HW,
    SESSION_SENT_LOG_START,
    SESSION_SLOTS,
)
from replica_core.errors import Errors
from replica_core.replication.fetch_metadata import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    next_epoch,
)
from replica_core.replication.fetch_session_cache import FetchSessionCache
from replica_core.replication.messages import (
    FetchPartition,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    TopicPartition,
)

if TYPE_CHECKING:
    from replica_core.replication.replica_manager import LogReadResult

_session_kernels = load("_replica_state", "replica_state_py")

_NO_ERROR = Errors.NONE  # bound once for the per-partition response filter

INVALID_HIGH_WATERMARK = -1
"""What a cached partition's high watermark is before its first response and after an error,
so the next response always carries it (``CachedPartition``)."""

# The session's columns: rows of one (SESSION_ROW_COUNT, capacity) int64 block, laid out as the
# session kernels read it (``replica_state_py`` / ``_replica_state``), with their fill values.
_COLUMNS = (("_order", SESSION_ORDER, 0), ("rows", SESSION_ROWS, -1),
            ("slots", SESSION_SLOTS, -1), ("fetch_offset", SESSION_FETCH_OFFSET, -1),
            ("log_start", SESSION_LOG_START, -1),
            ("cached_hw", SESSION_SENT_HW, INVALID_HIGH_WATERMARK),
            ("cached_log_start", SESSION_SENT_LOG_START, -1),
            ("req_epoch", SESSION_REQ_EPOCH, -1), ("out", SESSION_OUT, 0),
            ("mark", SESSION_MARK, 0))

# The columns Python reads or writes one element at a time on the per-fetch paths, also held as
# memoryviews of the same rows: an element of a memoryview is a plain int each way, where a
# numpy element read builds a numpy scalar (the kernels keep taking the block).
_CELLS = (("fetch_offset_cells", SESSION_FETCH_OFFSET), ("log_start_cells", SESSION_LOG_START),
          ("cached_hw_cells", SESSION_SENT_HW), ("cached_log_start_cells", SESSION_SENT_LOG_START),
          ("req_epoch_cells", SESSION_REQ_EPOCH), ("out_cells", SESSION_OUT),
          ("mark_cells", SESSION_MARK))


class FetchSession:
    """One cached session (Kafka's ``FetchSession`` with its ``CachedPartition`` s as columns).

    ``epoch`` is the epoch the next incremental request must carry. ``index`` maps each
    partition to its column slot in session order (insertion order, rotated by
    :meth:`move_to_end`); ``parts[i]`` is the request data last received for slot ``i``.
    """

    def __init__(self, session_id: int, privileged: bool, replica_id: int, creation_ms: int,
                 epoch: int) -> None:
        self.id = session_id
        self.privileged = privileged
        self.replica_id = replica_id
        self.creation_ms = creation_ms
        self.last_used_ms = creation_ms
        self.epoch = epoch
        self.cached_size = -1
        self.index: dict[TopicPartition, int] = {}
        self.parts: list[FetchPartition | None] = []
        self._free: list[int] = []
        self.n = 0
        self.gen = -1
        self.version = 0
        """Bumped whenever a partition is added, updated or forgotten."""
        self.stamp = 0
        """The last stamp handed out (:meth:`new_stamp`)."""
        self.scan_stamp = 0
        """The stamp of the last session scan (:meth:`begin_scan`)."""
        self.scan_gens: tuple[int, ...] = ()
        """The leader's generations at the last session scan (see :meth:`begin_scan`)."""
        self._allocate(16, None)

    columns: np.ndarray
    """The block the session kernels take; the named columns below are its rows."""
    out: np.ndarray
    mark: np.ndarray
    """Stamps on the columns that may have changed (see :meth:`new_stamp`, :meth:`begin_scan`)."""
    _order: np.ndarray
    fetch_offset: np.ndarray
    req_epoch: np.ndarray
    log_start: np.ndarray
    cached_hw: np.ndarray
    cached_log_start: np.ndarray
    rows: np.ndarray
    slots: np.ndarray
    # the same rows as memoryviews, for element access from Python (see ``_CELLS``)
    fetch_offset_cells: memoryview
    log_start_cells: memoryview
    cached_hw_cells: memoryview
    cached_log_start_cells: memoryview
    req_epoch_cells: memoryview
    out_cells: memoryview
    mark_cells: memoryview

    def __len__(self) -> int:
        return len(self.index)

    def __repr__(self) -> str:
        return (f"FetchSession(id={self.id}, epoch={self.epoch}, partitions={len(self.index)}, "
                f"privileged={self.privileged})")

    # ---- partitions ------------------------------------------------------------------------
    def _allocate(self, cap: int, old: np.ndarray | None) -> None:
        """Allocate the block with ``cap`` columns, keeping what ``old`` held."""
        block = np.empty((SESSION_ROW_COUNT, cap), dtype=np.int64)
        for _, row, fill in _COLUMNS:
            block[row] = fill
        if old is not None:
            block[:, : old.shape[1]] = old
        self.columns = block
        for name, row, _ in _COLUMNS:
            setattr(self, name, block[row])
        for name, row in _CELLS:
            setattr(self, name, memoryview(block[row]))

    def _grow(self) -> None:
        self._allocate(2 * self.columns.shape[1], self.columns)

    def upsert(self, fp: FetchPartition) -> int:
        """Add a partition (cached HW and log start unknown) or update its request data
        (``CachedPartition.updateRequestParams``), marked changed; its column slot."""
        self.version += 1
        i = self.index.get(fp.tp)
        if i is None:
            if self._free:
                i = heapq.heappop(self._free)
            else:
                if self.n == len(self.fetch_offset):
                    self._grow()
                i = self.n
                self.n += 1
                self.parts.append(None)
            self.index[fp.tp] = i
            self._order[len(self.index) - 1] = i
            self.cached_hw[i] = INVALID_HIGH_WATERMARK
            self.cached_log_start[i] = -1
            self.rows[i] = -1
            self.slots[i] = -1
            self.gen = -1  # a new partition needs its row
        self.parts[i] = fp
        self.fetch_offset_cells[i] = fp.fetch_offset
        self.req_epoch_cells[i] = fp.current_leader_epoch
        self.log_start_cells[i] = fp.log_start_offset
        self.mark_cells[i] = self.stamp
        return i

    def fill(self, parts: Sequence[FetchPartition], hws: Sequence[int],
             log_starts: Sequence[int]) -> None:
        """A new session's partitions in order, with the HW and log start sent for each: what
        :meth:`upsert` of each then caching its HW and log start gives, column by column (the
        partitions of a full fetch's response; repeated partitions go one at a time)."""
        self.version += 1
        n = len(parts)
        index = {fp.tp: i for i, fp in enumerate(parts)}
        if self.index or self.n or len(index) != n:
            for fp, hw, start in zip(parts, hws, log_starts, strict=True):
                i = self.upsert(fp)
                self.cached_hw[i] = hw
                self.cached_log_start[i] = start
            return
        if len(hws) != n or len(log_starts) != n:
            raise ValueError(f"{n} partitions with {len(hws)} HWs and {len(log_starts)} log starts")
        cap = self.columns.shape[1]
        while cap < n:
            cap *= 2
        if cap != self.columns.shape[1]:
            self._allocate(cap, self.columns)
        self.index = index
        self.parts = list(parts)
        self.n = n
        self._order[:n] = np.arange(n)
        self.fetch_offset[:n] = [fp.fetch_offset for fp in parts]
        self.req_epoch[:n] = [fp.current_leader_epoch for fp in parts]
        self.log_start[:n] = [fp.log_start_offset for fp in parts]
        self.cached_hw[:n] = hws
        self.cached_log_start[:n] = log_starts
        self.gen = -1  # new partitions need their rows

    def forget(self, tp: TopicPartition) -> bool:
        i = self.index.pop(tp, None)
        if i is None:
            return False
        self.version += 1
        # past the end of the live order: dropped from it
        _session_kernels.session_move_to_end(self.columns, len(self.index) + 1, i)
        self.parts[i] = None
        self.rows[i] = -1
        self.slots[i] = -1
        self.fetch_offset[i] = -1
        heapq.heappush(self._free, i)
        return True

    def update(self, partitions: Iterable[FetchPartition], forgotten: Iterable[TopicPartition]
               ) -> tuple[list[TopicPartition], list[TopicPartition], list[TopicPartition]]:
        """``FetchSession.update``: upsert the request's partitions, then drop the forgotten
        ones; (added, updated, removed)."""
        added: list[TopicPartition] = []
        updated: list[TopicPartition] = []
        removed: list[TopicPartition] = []
        index = self.index
        for fp in partitions:
            (updated if fp.tp in index else added).append(fp.tp)
            self.upsert(fp)
        for tp in forgotten:
            if self.forget(tp):
                removed.append(tp)
        return added, updated, removed

    def move_to_end(self, tp: TopicPartition) -> None:
        i = self.index.pop(tp)
        self.index[tp] = i
        _session_kernels.session_move_to_end(self.columns, len(self.index), i)

    def new_stamp(self) -> int:
        """A stamp no column carries yet, for a fetch parking now: it marks the columns that
        may have news for that fetch (``mark[j] = stamp``), and a parked fetch's completion
        looks at those only (``session_pending_marked``). Later stamps void earlier ones."""
        self.stamp += 1
        return self.stamp

    def begin_scan(self, lookup: Any, gen: int, gens: tuple[int, ...], own_writes: bool
                   ) -> int:
        """Before a session scan (``session_fetch``): the rows (:meth:`refresh_rows`, once per
        leadership generation ``gen``) and the scan's ``since``. A column is marked
        (``mark[j] >= since``) when it was picked by the last scan (the caller marks picks
        with :attr:`scan_stamp`) or its request data (:meth:`upsert`), its leader's LEO or HW
        (the leader's change reports) changed since; the others were quiet then and are left
        unlooked-at, which holds while ``gens`` (the leadership, leaders' log-start and state
        table membership generations) are the last scan's and the follower's fetch states were
        last written by this session's own reads (``own_writes``). Otherwise ``EVERY_COLUMN``:
        every column is looked at."""
        since = self.scan_stamp
        if self.gen != gen or self.scan_gens != gens or not own_writes:
            self.refresh_rows(lookup, gen)
            self.scan_gens = gens
            since = EVERY_COLUMN
        self.scan_stamp = self.new_stamp()
        return since

    def order(self) -> np.ndarray:
        """Column slots in session order (kept alongside ``index``; read only)."""
        return self._order[: len(self.index)]

    def partitions(self) -> list[FetchPartition]:
        """The request data of every partition, in session order (``foreachPartition``)."""
        parts = self.parts
        return [parts[i] for i in self.index.values()]  # type: ignore[misc]

    # ---- rows in the leader's state table --------------------------------------------------
    def refresh_rows(self, lookup: Any, gen: int) -> None:
        """Map every partition to its (row, replica slot) for this session's follower, once
        per leadership generation ``gen``; (−1, −1) where this broker does not lead it or the
        follower is not a replica. ``lookup(tps, replica_id)`` gives the rows and the slots of
        ``tps`` as two lists, in order."""
        if gen == self.gen:
            return
        self.gen = gen
        index = self.index
        if not index:
            return
        rows, slots = lookup(index, self.replica_id)
        columns = list(index.values())
        self.rows[columns] = rows
        self.slots[columns] = slots


# ---- fetch contexts (Kafka's FetchContext family) ------------------------------------------
class SessionErrorContext:
    """A session error: the response is that error and nothing else."""

    session: FetchSession | None = None
    incremental = False

    def __init__(self, error: Errors) -> None:
        self.error = error

    def partitions(self) -> Sequence[FetchPartition]:
        return ()

    def generate(self, results: Sequence[LogReadResult], now_ms: int) -> FetchResponse:
        return FetchResponse(self.error, (), session_id=INVALID_SESSION_ID)


class SessionlessFetchContext:
    """A fetch outside any session: every partition asked for is read and answered."""

    session: FetchSession | None = None
    incremental = False
    error = Errors.NONE

    def __init__(self, partitions: Sequence[FetchPartition]) -> None:
        self._partitions = partitions

    def partitions(self) -> Sequence[FetchPartition]:
        return self._partitions

    def generate(self, results: Sequence[LogReadResult], now_ms: int) -> FetchResponse:
        return FetchResponse(Errors.NONE, partition_responses(results),
                             session_id=INVALID_SESSION_ID)


class FullFetchContext:
    """A full fetch: answered in full; the response creates the session when the cache has or
    can make room (otherwise session id 0: the fetcher stays sessionless)."""

    session: FetchSession | None = None
    incremental = False
    error = Errors.NONE

    def __init__(self, cache: FetchSessionCache, partitions: Sequence[FetchPartition],
                 privileged: bool, replica_id: int) -> None:
        self.cache = cache
        self._partitions = partitions
        self.privileged = privileged
        self.replica_id = replica_id

    def partitions(self) -> Sequence[FetchPartition]:
        return self._partitions

    def generate(self, results: Sequence[LogReadResult], now_ms: int) -> FetchResponse:
        by_tp = {fp.tp: fp for fp in self._partitions}

        def create(session_id: int) -> FetchSession:
            session = FetchSession(session_id, self.privileged, self.replica_id, now_ms,
                                   next_epoch(INITIAL_EPOCH))
            session.fill([by_tp[r.tp] for r in results], [r.high_watermark for r in results],
                         [r.log_start_offset for r in results])
            return session

        session_id = self.cache.maybe_create_session(now_ms, self.privileged, len(results),
                                                     create)
        return FetchResponse(Errors.NONE, partition_responses(results), session_id=session_id)


class IncrementalFetchContext:
    """An incremental fetch in ``session``: the response keeps only partitions that must be
    sent, and moves those with records to the end of the session."""

    __slots__ = ("session", "expected_epoch")
    incremental = True
    error = Errors.NONE

    def __init__(self, session: FetchSession, expected_epoch: int) -> None:
        self.session = session
        self.expected_epoch = expected_epoch

    def partitions(self) -> Sequence[FetchPartition]:
        return self.session.partitions()

    def generate(self, results: Sequence[LogReadResult], now_ms: int) -> FetchResponse:
        session = self.session
        if session.epoch != self.expected_epoch:
            # another request of this session went by meanwhile
            return FetchResponse(Errors.INVALID_FETCH_SESSION_EPOCH, (),
                                 session_id=INVALID_SESSION_ID)
        if not results:  # nothing read (an idle long poll expiring): the empty response
            return FetchResponse(_NO_ERROR, (), session_id=session.id)
        index = session.index
        cached_hw = session.cached_hw_cells
        cached_log_start = session.cached_log_start_cells
        kept = []
        for r in results:
            tp = r.tp
            i = index.get(tp)
            if i is None:
                continue
            # CachedPartition.maybeUpdateResponseData: in the response when it has records, a
            # diverging epoch, an error, or a HW or log start other than the one last sent
            # (cached here; HW −1 after an error, so the next response carries it again)
            sent = r.size > 0
            must = sent or r.diverging_epoch is not None
            hw = r.high_watermark
            if cached_hw[i] != hw:
                must = True
                cached_hw[i] = hw
            log_start = r.log_start_offset
            if cached_log_start[i] != log_start:
                must = True
                cached_log_start[i] = log_start
            if r.error != _NO_ERROR:
                must = True
                cached_hw[i] = INVALID_HIGH_WATERMARK
            if must:
                entry = r.entry
                if entry is None:
                    entry = r.entry = _entry(r)
                kept.append(entry)
                if sent:
                    session.move_to_end(tp)
        return FetchResponse(_NO_ERROR, tuple(kept), session_id=session.id)


FetchContext = SessionErrorContext | SessionlessFetchContext | FullFetchContext | \
    IncrementalFetchContext


def partition_responses(results: Iterable[LogReadResult]
                        ) -> tuple[FetchPartitionResponse, ...]:
    """The response entries for reads, in read order (``FetchPartitionData`` → wire); each
    read's entry is made once (a read shared by several fetches answers each with it)."""
    out = []
    for r in results:
        entry = r.entry
        if entry is None:
            entry = r.entry = _entry(r)
        out.append(entry)
    return tuple(out)


def _entry(r: LogReadResult) -> FetchPartitionResponse:
    return FetchPartitionResponse(r.tp, r.error, r.high_watermark, r.last_stable_offset,
                                  r.log_start_offset, r.log_end_offset, r.records,
                                  r.diverging_epoch)


class FetchManager:
    """Kafka's ``FetchManager``: turns a fetch's session id and epoch into a context."""

    def __init__(self, cache: FetchSessionCache) -> None:
        self.cache = cache

    def new_context(self, request: FetchRequest, is_follower: bool, now_ms: int) -> FetchContext:
        session_id, epoch = request.session_id, request.session_epoch
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.cache.remove(session_id)  # a full request closes the session it names
            if epoch == FINAL_EPOCH:
                return SessionlessFetchContext(request.partitions)
            return FullFetchContext(self.cache, request.partitions, is_follower,
                                    request.replica_id)
        session = self.cache.get(session_id)
        if session is None:
            return SessionErrorContext(Errors.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return SessionErrorContext(Errors.INVALID_FETCH_SESSION_EPOCH)
        # FetchSession.update, without the (added, updated, removed) lists nobody reads here
        for fp in request.partitions:
            session.upsert(fp)
        for tp in request.forgotten:
            session.forget(tp)
        if not session.index:
            self.cache.remove(session)
            return SessionlessFetchContext(request.partitions)
        self.cache.touch(session, now_ms)
        session.epoch = next_epoch(session.epoch)
        return IncrementalFetchContext(session, session.epoch)


__all__ = [
    "INVALID_HIGH_WATERMARK",
    "FetchContext",
    "FetchManager",
    "FetchSession",
    "FullFetchContext",
    "IncrementalFetchContext",
    "SessionErrorContext",
    "SessionlessFetchContext",
    "partition_responses",
]
