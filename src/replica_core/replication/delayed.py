"""DelayedProduce (§6.8) and DelayedFetch (§6.9): operations parked in the purgatory.

Kafka's ``DelayedProduce.scala`` and ``DelayedFetch.scala`` on
:class:`~replica_core.replication.purgatory.DelayedOperation`. Both complete exactly once, either
when their condition holds (checked when the HW or LEO of one of their partitions moves, or
leadership changes) or on expiry; ``on_complete`` builds the response and hands it to
``deliver``.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from replica_core.errors import Errors, KafkaError
from replica_core.replication.messages import (
    FetchPartition,
    FetchResponse,
    ProducePartitionResponse,
    TopicPartition,
)
from replica_core.replication.partition import (
    ISOLATION_HIGH_WATERMARK,
    ISOLATION_LOG_END,
)
from replica_core.replication.purgatory import DelayedOperation

_NO_ERROR = Errors.NONE  # bound once for the per-partition checks

if TYPE_CHECKING:
    from replica_core.replication.fetch_session import FetchContext, IncrementalFetchContext
    from replica_core.replication.replica_manager import (
        FetchParams,
        LogReadResult,
        ReplicaManager,
    )


@dataclass(slots=True)
class ProducePartitionStatus:
    """Kafka's ProducePartitionStatus: the offset the HW must reach, the response so far (the
    local append's answer until an error replaces it) and whether its acks are awaited."""

    required_offset: int
    response: ProducePartitionResponse
    acks_pending: bool = False


class DelayedProduce(DelayedOperation):
    """acks=all produce waiting for the HW to pass each partition's last offset (§6.8).

    Partitions that failed locally are complete from the start; the others wait for their acks
    (``acks_pending``) and answer REQUEST_TIMED_OUT if the op completes while they still wait
    — on expiry; the data stays in the log. (Kafka sets that error at once and clears it when
    the acks arrive; here it is applied when the response is built, to those still waiting.)
    They complete when ``check_enough_replicas_reach_offset`` says so, or with
    NOT_LEADER_OR_FOLLOWER when the partition is no longer led or hosted here
    (UNKNOWN_TOPIC_OR_PARTITION when the broker's metadata no longer knows it).
    """

    def __init__(self, delay_ms: int, status: dict[TopicPartition, ProducePartitionStatus],
                 manager: ReplicaManager,
                 deliver: Callable[[dict[TopicPartition, ProducePartitionResponse]], None] | None
                 ) -> None:
        super().__init__(delay_ms)
        self.status = status
        self.manager = manager
        self.deliver = deliver
        self.responses: dict[TopicPartition, ProducePartitionResponse] | None = None
        for st in status.values():
            st.acks_pending = st.response.error_code == _NO_ERROR

    def try_complete(self) -> bool:
        pending = False
        manager = self.manager
        for tp, st in self.status.items():
            if not st.acks_pending:
                continue
            partition = manager.get_partition(tp)
            if partition is None:  # getPartitionOrError
                done, error = False, manager.metadata_cache.error_for_unhosted(tp)
            else:
                done, error = partition.check_enough_replicas_reach_offset(st.required_offset)
            if error != _NO_ERROR or done:
                st.acks_pending = False
                if error != _NO_ERROR:  # else the local append's answer stands
                    st.response = _with_error(st.response, error)
            else:
                pending = True
        if pending:
            return False
        return self.force_complete()

    def on_complete(self) -> None:
        """Build the responses (kept in ``responses``) and hand them to ``deliver``, if set
        (none while the op is first checked: an op complete at once is answered directly)."""
        self.responses = {tp: _with_error(st.response, Errors.REQUEST_TIMED_OUT)
                          if st.acks_pending else st.response
                          for tp, st in self.status.items()}
        if self.deliver is not None:
            self.deliver(self.responses)

    def on_expiration(self) -> None:
        self.manager._record_produce_expiration(
            [tp for tp, st in self.status.items() if st.acks_pending])


def _with_error(resp: ProducePartitionResponse, error: Errors) -> ProducePartitionResponse:
    return ProducePartitionResponse(error, resp.base_offset, resp.log_append_time_ms,
                                    resp.log_start_offset, resp.error_message, resp.record_errors)


@dataclass(slots=True)
class FetchPartitionStatus:
    """Kafka's FetchPartitionStatus: where the first read started, and the request's data."""

    start_offset_metadata: Any  # storage LogOffsetMetadata, or None when unknown
    fetch_info: FetchPartition


_COMPLETE = -1
"""What :meth:`DelayedFetch._progress` answers when the fetch must complete now."""
_UNRESOLVED = object()
"""A session partition the parking request did not read: it stood at the log end then."""


class DelayedFetch(DelayedOperation):
    """A fetch waiting for ``min_bytes`` or ``max_wait_ms`` (§6.9, Kafka's ``DelayedFetch``).

    ``try_complete`` completes at once on: A/B not leader any more, C unknown partition, D
    storage error, E the request's leader epoch now fenced, F the fetch offset beyond the end
    offset (leader truncated) or on an older segment than it (lagging / rolled), H the last
    fetched epoch now diverges or cannot be resolved; and G when the bytes available — per
    partition ``min(end position − fetch position, partition max bytes)`` for partitions whose
    fetch offset and end offset share a segment — reach ``min_bytes``. An offset known only as
    an offset (no segment position) adds nothing: the fetch then waits for other bytes or
    expiry (KAFKA-16452). The end offset is the LEO for followers and the HW for consumers. On
    completion the logs are read again (without updating follower state) and ``context`` (the
    request's fetch-session context) turns the reads into the response, handed to ``deliver``
    if set (none while the fetch is first checked: a fetch complete at once is answered
    directly).

    ``reads`` (the parking request's reads, made while the manager's read stamp was
    ``read_stamp``), when nothing was reported since: the first check leaves out the reads
    that stopped at the log end on the fast path (each adds 0 bytes and completes nothing while
    the log is as it was), and when every read stopped there and the stamp still stands at
    completion, those reads are the answer (the re-read would give the same, see
    ``ReplicaManager._read_stamp``).
    """

    def __init__(self, params: FetchParams,
                 statuses: Sequence[tuple[TopicPartition, FetchPartitionStatus]],
                 manager: ReplicaManager, deliver: Callable[[FetchResponse], None] | None,
                 context: FetchContext | None = None, *,
                 reads: Sequence[LogReadResult] | None = None,
                 read_stamp: tuple[int, int, int] | None = None) -> None:
        super().__init__(params.max_wait_ms)
        self.params = params
        self.statuses = list(statuses)
        self.manager = manager
        self.deliver = deliver
        self.context = context
        self.response: FetchResponse | None = None
        if reads is not None and read_stamp is not None and manager._read_stamp() == read_stamp:
            first = [status for status, r in zip(self.statuses, reads, strict=True)
                     if not r.at_log_end]
            self._first_statuses = first
            if not first:
                self._reads = reads
                self._read_stamp = read_stamp

    # set only for a fetch given its reads (see above)
    _first_statuses: list[tuple[TopicPartition, FetchPartitionStatus]] | None = None
    _reads: Sequence[LogReadResult] | None = None
    _read_stamp: tuple[int, int, int] | None = None

    def try_complete(self) -> bool:
        accumulated = 0
        statuses = self._first_statuses
        if statuses is None:
            statuses = self.statuses
        else:
            self._first_statuses = None
        for tp, st in statuses:
            got = self._progress(tp, st.start_offset_metadata, st.fetch_info)
            if got == _COMPLETE:
                return self.force_complete()
            accumulated += got
        if accumulated >= self.params.min_bytes:
            return self.force_complete()  # Case G
        return False

    def _progress(self, tp: TopicPartition, start: Any, info: FetchPartition) -> int:
        """One partition of ``tryComplete``: the bytes it adds, or ``_COMPLETE`` (cases A–F, H).
        ``start`` is ``_UNRESOLVED`` for a session partition that stood at the log end when the
        fetch parked; its position is looked up once the end has moved past it."""
        if start is None:
            return 0  # UNKNOWN_OFFSET_METADATA: nothing to compare
        partition = self.manager.get_partition(tp)
        if partition is None:
            return _COMPLETE  # Case C
        try:
            snapshot = partition.fetch_offset_snapshot(info.current_leader_epoch,
                                                       self.params.fetch_only_leader)
        except KafkaError:
            return _COMPLETE  # Cases A, B, D, E
        isolation = self.params.isolation
        end = (snapshot.log_end_offset if isolation == ISOLATION_LOG_END
               else snapshot.high_watermark if isolation == ISOLATION_HIGH_WATERMARK
               else snapshot.last_stable_offset)
        offset = info.fetch_offset if start is _UNRESOLVED else start.message_offset
        got = 0
        if offset > end.message_offset:
            return _COMPLETE  # Case F: the leader truncated
        if offset < end.message_offset:
            if start is _UNRESOLVED:
                try:
                    start = partition.log.convert_to_offset_metadata(offset)
                except KafkaError:
                    return _COMPLETE  # the offset left the log meanwhile
                self._resolved(tp, start)
            got = _available_bytes(start, end, info.partition_max_bytes)
            if got == _COMPLETE:
                return _COMPLETE
        if info.last_fetched_epoch >= 0:
            log = partition.log
            if (log is not None and info.last_fetched_epoch == log.latest_epoch
                    and log.log_end_offset >= info.fetch_offset):
                return got  # the latest epoch ends at the LEO: Case H cannot hold
            epoch_end = partition.last_offset_for_leader_epoch(
                info.current_leader_epoch, info.last_fetched_epoch, fetch_only_from_leader=False)
            if (epoch_end.error_code != _NO_ERROR or epoch_end.end_offset < 0
                    or epoch_end.leader_epoch < 0):
                return _COMPLETE  # Case H: cannot resolve the epoch
            if (epoch_end.leader_epoch < info.last_fetched_epoch
                    or epoch_end.end_offset < info.fetch_offset):
                return _COMPLETE  # Case H: diverging now
        return got

    def _resolved(self, tp: TopicPartition, start: Any) -> None:
        """Keep a lazily found start position (session fetches)."""

    def on_complete(self) -> None:
        manager = self.manager
        reads = self._reads
        if reads is not None and manager._read_stamp() == self._read_stamp:
            results = reads  # nothing changed since the reads at park, all at the log end
        else:
            parts = tuple(st.fetch_info for _, st in self.statuses)
            results = manager._read_from_log(self.params, parts, read_from_purgatory=True)
        if reads is not None:
            self._reads = None
        self._respond(results)

    def _respond(self, results: Sequence[LogReadResult]) -> None:
        manager = self.manager
        manager._record_delayed_fetch_completion(self.params.is_from_follower)
        if self.context is None:
            self.response = manager._fetch_response(results)
        else:
            self.response = self.context.generate(results, manager.clock.milliseconds())
        if self.deliver is not None:
            self.deliver(self.response)

    def on_expiration(self) -> None:
        self.manager._record_fetch_expiration(self.params.is_from_follower)


class DelayedSessionFetch(DelayedFetch):
    """A follower's incremental fetch parked over its whole fetch session.

    Kafka parks such a fetch with a status for every session partition and re-checks all of
    them whenever any one changes. Here the partitions the request read keep the start offset
    their read found; the others stood at the leader's log end, and their start is looked up
    only once the end moves past it. The replica manager reports each changed partition
    (:meth:`try_complete_after`), and only that partition's bytes are re-counted — the same
    total, since a partition's available bytes change only with the events that report it.
    On completion only partitions with something to send are read again, which gives the
    response Kafka's full re-read gives (:meth:`ReplicaManager._session_pending_reads`).

    Which partitions can have something to send is known without looking at the others: one
    whose read at park found news (KIP-227's new HW, log start, epoch or records, which the
    parked response has not sent yet) and one reported changed since (an append, a HW move);
    the rest had none at park and nothing about them changed. The fetch marks those columns
    of the session with its own stamp (``FetchSession.mark``). What is not reported per
    partition — a leadership change, a leader's log start move, a newer request in the
    session — makes the completion look at every partition instead.
    """

    def __init__(self, params: FetchParams, context: IncrementalFetchContext,
                 reads: Sequence[LogReadResult], manager: ReplicaManager,
                 deliver: Callable[[FetchResponse], None] | None) -> None:
        # DelayedFetch.__init__ with no statuses (and DelayedOperation.__init__ under it),
        # in one step: one is made per parked fetch
        delay_ms = params.max_wait_ms
        if delay_ms < 0:
            raise ValueError("delay_ms must be non-negative")
        self.delay_ms = int(delay_ms)
        self._completed = False
        self._timer = None
        self.params = params
        self.statuses = []
        self.manager = manager
        self.deliver = deliver
        self.context = context
        self.response = None
        self._incremental = context
        self.session = session = context.session
        # The columns that may have news when this completes carry its stamp: the ones read
        # now (the session scan picked them just before) and, later, each partition reported
        # changed. The others are left out while the leadership, the leaders' log starts and
        # the session (its partitions, its epoch) are as they are now.
        self.stamp = stamp = session.new_stamp()
        self.session_version = session.version
        self.session_epoch = context.expected_epoch
        self.leadership_gen = manager._leadership_gen
        self.log_start_gen = manager._log_start_gen
        mark = session.mark_cells
        index = session.index
        # what the first check (at park, straight after the reads) counts: not the reads that
        # stopped at the log end on the fast path, each 0 bytes and no completion while the
        # log has not changed since (it cannot in between)
        start: dict[TopicPartition, Any] = {}
        first: list[TopicPartition] = []
        for r in reads:
            tp = r.tp
            start[tp] = r.fetch_offset_metadata
            mark[index[tp]] = stamp
            if not r.at_log_end:
                first.append(tp)
        self.start = start
        self._first: list[TopicPartition] | None = first
        self.available: dict[TopicPartition, int] = {}
        self.accumulated = 0
        self._follower_read = params.isolation == ISOLATION_LOG_END and params.fetch_only_leader

    def try_complete(self) -> bool:
        index = self.session.index
        tps, self._first = self._first, None
        for tp in list(self.start) if tps is None else tps:
            i = index.get(tp)
            if i is not None and self._recount(tp, i):
                return self.force_complete()
        if self.accumulated >= self.params.min_bytes:
            return self.force_complete()  # Case G
        return False

    def try_complete_after(self, tp: TopicPartition) -> bool:
        """Re-check after ``tp`` changed (an append, a HW or leadership change)."""
        if self._completed:
            return False
        i = self.session.index.get(tp)
        if i is None:
            return False
        return self.changed_at(tp, i)

    def changed_at(self, tp: TopicPartition, i: int) -> bool:
        """:meth:`try_complete_after` for ``tp``, found in session column ``i``, while this
        fetch is not completed (for a caller that has looked the column up already)."""
        self.session.mark_cells[i] = self.stamp  # it may have news now
        if self._recount(tp, i) or self.accumulated >= self.params.min_bytes:
            return self.force_complete()
        return False

    def _recount(self, tp: TopicPartition, i: int) -> bool:
        """Re-count session slot ``i`` (partition ``tp``); True when the fetch must complete."""
        info: FetchPartition = self.session.parts[i]  # type: ignore[assignment]
        start = self.start.get(tp, _UNRESOLVED)
        if self._follower_read:
            got = self._follower_progress(tp, start, info)
        else:
            got = self._progress(tp, start, info)
        if got == _COMPLETE:
            return True
        available = self.available
        self.accumulated += got - available.get(tp, 0)
        available[tp] = got
        return False

    def _follower_progress(self, tp: TopicPartition, start: Any, info: FetchPartition) -> int:
        """:meth:`DelayedFetch._progress` for a follower's read to the log end (the one kind a
        session fetch parks), with fetchOffsetSnapshot inlined: only the LEO is compared, so
        the HW's position is not looked up. A partition whose start was left unresolved and
        whose end has moved past it adds at least one byte (its first batch lies between), so
        when one byte more reaches ``min_bytes`` the fetch completes whatever the position
        is; it is looked up only when the exact count matters."""
        if start is None:
            return 0  # UNKNOWN_OFFSET_METADATA: nothing to compare
        partition = self.manager._partitions.get(tp)
        if partition is None:
            return _COMPLETE  # Case C
        epoch = info.current_leader_epoch
        log = partition.log
        if ((epoch >= 0 and epoch != partition.leader_epoch) or log is None
                or not partition.is_leader):
            return _COMPLETE  # Cases A, B, D, E
        end = log.log_end_offset_metadata
        end_offset = end.message_offset
        offset = info.fetch_offset if start is _UNRESOLVED else start.message_offset
        if offset > end_offset:
            return _COMPLETE  # Case F: the leader truncated
        got = 0
        if offset < end_offset:
            if start is _UNRESOLVED:
                if (info.partition_max_bytes >= 1 and self.params.min_bytes
                        - self.accumulated + self.available.get(tp, 0) <= 1):
                    return _COMPLETE  # Case G (or F, H) whatever the position
                try:
                    start = log.convert_to_offset_metadata(offset)
                except KafkaError:
                    return _COMPLETE  # the offset left the log meanwhile
                self.start[tp] = start
            got = _available_bytes(start, end, info.partition_max_bytes)
            if got == _COMPLETE:
                return _COMPLETE
        last_fetched = info.last_fetched_epoch
        if last_fetched >= 0:
            if last_fetched == log.latest_epoch and log.log_end_offset >= info.fetch_offset:
                return got  # the latest epoch ends at the LEO: Case H cannot hold
            epoch_end = partition.last_offset_for_leader_epoch(
                epoch, last_fetched, fetch_only_from_leader=False)
            if (epoch_end.error_code != _NO_ERROR or epoch_end.end_offset < 0
                    or epoch_end.leader_epoch < 0):
                return _COMPLETE  # Case H: cannot resolve the epoch
            if epoch_end.leader_epoch < last_fetched or epoch_end.end_offset < info.fetch_offset:
                return _COMPLETE  # Case H: diverging now
        return got

    def _resolved(self, tp: TopicPartition, start: Any) -> None:
        self.start[tp] = start

    def on_complete(self) -> None:
        """Re-read the partitions with something to send; none (an idle long poll expiring)
        answers the empty response without a read."""
        manager = self.manager
        manager._session_fetch_done(self)
        parts = manager._session_pending_reads(self)
        results = (manager._read_from_log(self.params, parts, read_from_purgatory=True)
                   if parts else ())
        # DelayedFetch._respond for a follower's fetch in a session
        manager._record_delayed_fetch_completion(True)
        self.response = self._incremental.generate(results, manager.clock.milliseconds())
        if self.deliver is not None:
            self.deliver(self.response)


def _available_bytes(start: Any, end: Any, max_bytes: int) -> int:
    """Case G's bytes between a fetch position and the end position in one segment, capped
    at ``max_bytes``; 0 when either is known only as an offset (KAFKA-16452); ``_COMPLETE``
    when the start is on an older segment than the end (Case F: lagging, or just rolled)."""
    if (start.segment_base_offset < 0 or start.relative_position_in_segment < 0
            or end.segment_base_offset < 0 or end.relative_position_in_segment < 0):
        return 0  # either known only as an offset
    if start.segment_base_offset < end.segment_base_offset:
        return _COMPLETE
    if start.segment_base_offset == end.segment_base_offset:
        return min(end.relative_position_in_segment - start.relative_position_in_segment,
                   max_bytes)
    return 0

