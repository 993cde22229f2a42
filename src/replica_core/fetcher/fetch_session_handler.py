"""The fetching side of an incremental fetch session (KIP-227) with one leader node.

Kafka: ``org.apache.kafka.clients.FetchSessionHandler``. The handler remembers which partitions
the session with the node holds and the :class:`FetchMetadata` for the next request; a
:class:`Builder` turns the partitions wanted next into a full request (every partition) or an
incremental one (only new or changed partitions, plus the ones to forget), and
:meth:`FetchSessionHandler.handle_response` moves the metadata on. The broker-side counterpart is
Kafka's FetchManager over :class:`replica_core.replication.fetch_session_cache.FetchSessionCache`.

Topic ids are left out (fetch versions < 13): no ``sessionTopicNames``, ``toReplace`` or
``canUseTopicIds``, and verification compares partitions only.
"""
from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass
from types import MappingProxyType

from replica_core.errors import Errors
from replica_core.replication.fetch_metadata import INVALID_SESSION_ID, FetchMetadata
from replica_core.replication.messages import FetchPartition, FetchResponse, TopicPartition

__all__ = ["Builder", "FetchRequestData", "FetchSessionHandler",
           "find_missing"]

log = logging.getLogger(__name__)

_NONE = Errors.NONE



def find_missing(to_find: Iterable[TopicPartition],
                 to_search: Set[TopicPartition]) -> list[TopicPartition]:
    """The items of ``to_find`` absent from ``to_search``, in ``to_find`` order (findMissing)."""
    return [tp for tp in to_find if tp not in to_search]


@dataclass(frozen=True, slots=True)
class FetchRequestData:
    """One built fetch request (FetchSessionHandler.FetchRequestData).

    ``to_send``: the partitions to put in the request: all of them for a full request; for an
    incremental one the new partitions (in add order) then the altered ones (in session order).
    ``to_forget``: partitions the incremental request drops from the session.
    ``session_partitions``: every partition the fetch covers, sent or implied — a read-only
    view of the handler's session, as Kafka's (unchanged until the next build), used to
    process the response. ``metadata``: the session id and epoch to send.
    """

    to_send: tuple[FetchPartition, ...]
    to_forget: tuple[TopicPartition, ...]
    session_partitions: Mapping[TopicPartition, FetchPartition]
    metadata: FetchMetadata

    def __str__(self) -> str:
        sent = ", ".join(str(p.tp) for p in self.to_send)
        if self.metadata.is_full:
            return f"FullFetchRequest(toSend=({sent}))"
        sent_tps = {p.tp for p in self.to_send}
        forget = ", ".join(str(tp) for tp in self.to_forget)
        implied = ", ".join(str(tp) for tp in self.session_partitions if tp not in sent_tps)
        return f"IncrementalFetchRequest(toSend=({sent}), toForget=({forget}), implied=({implied}))"


class Builder:
    """Collects the partitions wanted in the next fetch, then :meth:`build` s it once
    (FetchSessionHandler.Builder). Add order matters: a full response favours early partitions.
    """

    __slots__ = ("_handler", "_next")

    def __init__(self, handler: FetchSessionHandler) -> None:
        self._handler = handler
        self._next: dict[TopicPartition, FetchPartition] | None = {}

    def add(self, tp: TopicPartition, data: FetchPartition) -> None:
        """Want ``data`` for ``tp`` in the upcoming fetch; a repeated ``tp`` keeps its place and
        takes the newer data (LinkedHashMap.put)."""
        if self._next is None:
            raise RuntimeError("Builder.add after build")
        if data.tp != tp:
            raise ValueError(f"partition data for {data.tp} added under {tp}")
        self._next[tp] = data

    def add_entries(self, entries: Iterable[FetchPartition]) -> None:
        """:meth:`add` each entry under its own partition (``entry.tp``), in order: a fetcher's
        full request, one call for every ready partition."""
        nxt = self._next
        if nxt is None:
            raise RuntimeError("Builder.add after build")
        for data in entries:
            nxt[data.tp] = data

    def build(self) -> FetchRequestData:
        """Build the request for the handler's ``next_metadata``; a builder builds only once.

        Full metadata: the session becomes exactly the added partitions and all are sent.
        Incremental: each session partition not added again is removed (``to_forget``); one
        added with different data (``is`` then ``==``) takes the new data in place and is moved
        to the end of the send list; one added with equal data is implied, not sent. Partitions
        new to the session are appended to it and sent first.
        """
        nxt = self._next
        if nxt is None:
            raise RuntimeError("Builder.build called twice")
        self._next = None
        handler = self._handler
        metadata = handler.next_metadata
        if metadata.is_full:
            handler.session_partitions = nxt
            handler._pos = {tp: i for i, tp in enumerate(nxt)}
            handler._next_pos = len(nxt)
            log.debug("Built full fetch %s for node %d with %d partition(s).",
                      metadata, handler.node, len(nxt))
            return FetchRequestData(tuple(nxt.values()), (), MappingProxyType(nxt), metadata)

        session = handler.session_partitions
        pos = handler._pos
        removed: list[TopicPartition] = []
        altered = 0
        for tp, prev in list(session.items()):
            data = nxt.pop(tp, None)
            if data is None:
                del session[tp]
                del pos[tp]
                removed.append(tp)
            elif data is not prev and data != prev:
                nxt[tp] = data
                session[tp] = data
                altered += 1
        added = 0
        for tp, data in nxt.items():
            if tp in session:
                # Everything from here on is an altered partition moved to the end above.
                break
            session[tp] = data
            pos[tp] = handler._next_pos
            handler._next_pos += 1
            added += 1
        log.debug("Built incremental fetch %s for node %d. Added %d, altered %d, removed %d "
                  "out of %d partition(s).", metadata, handler.node, added, altered,
                  len(removed), len(session))
        return FetchRequestData(tuple(nxt.values()), tuple(removed), MappingProxyType(session),
                                metadata)


class FetchSessionHandler:
    """Fetch session state towards one leader ``node`` (Kafka's FetchSessionHandler).

    ``next_metadata`` starts at FetchMetadata.INITIAL; ``session_partitions`` (insertion
    ordered) is what the session holds, replaced wholesale by each full build.
    """

    __slots__ = ("_next_pos", "_pos", "next_metadata", "node", "session_partitions")

    def __init__(self, node: int) -> None:
        self.node = node
        self.next_metadata: FetchMetadata = FetchMetadata.INITIAL
        self.session_partitions: dict[TopicPartition, FetchPartition] = {}
        # each session partition's place in session order (smaller first), for build_changes
        self._pos: dict[TopicPartition, int] = {}
        self._next_pos = 0

    @property
    def session_id(self) -> int:
        """The session id the next request carries (sessionId)."""
        return self.next_metadata.session_id

    def new_builder(self) -> Builder:
        """A builder for the next fetch request (newBuilder)."""
        return Builder(self)

    def build_changes(self, changes: Mapping[TopicPartition, FetchPartition | None]
                      ) -> FetchRequestData:
        """The incremental request :meth:`Builder.build` would make if every session partition
        absent from ``changes`` were added again with equal data, in session order, and the
        partitions of ``changes`` were added (a value) or left out (None), in ``changes``
        order, among them — without visiting the unchanged partitions.

        So a fetcher that knows which partitions changed since its last request (their entries
        in fair order) pays for those alone; the request is the same, field for field. Only for
        incremental metadata (a full request lists every partition: use a :class:`Builder`).
        """
        wanted = []
        dropped = []
        for tp, data in changes.items():
            if data is None:
                dropped.append(tp)
            elif data.tp != tp:
                raise ValueError(f"partition data for {data.tp} added under {tp}")
            else:
                wanted.append(data)
        to_send, removed = self.apply_changes(wanted, dropped)
        return FetchRequestData(to_send, removed, MappingProxyType(self.session_partitions),
                                self.next_metadata)

    def apply_changes(self, wanted: Iterable[FetchPartition], dropped: Iterable[TopicPartition]
                      ) -> tuple[tuple[FetchPartition, ...], tuple[TopicPartition, ...]]:
        """:meth:`build_changes` for the entries ``wanted`` (in fair order) and the partitions
        ``dropped`` (not wanted: removed from the session if there), returning only what the
        request carries — the partitions to send and to forget; the session is
        :attr:`session_partitions` once this returns. (The fetcher's per-round build: no
        :class:`FetchRequestData` nor mapping to make.)"""
        metadata = self.next_metadata
        if metadata.is_full:
            raise RuntimeError("build_changes needs incremental metadata; use new_builder()")
        session = self.session_partitions
        pos = self._pos
        new: list[FetchPartition] = []
        altered: list[TopicPartition] = []
        for data in wanted:
            tp = data.tp
            prev = session.get(tp)
            if prev is None:
                new.append(data)
            elif data is not prev and data != prev:
                session[tp] = data
                altered.append(tp)
        removed = [tp for tp in dropped if tp in session]
        if removed:
            if len(removed) > 1:
                removed.sort(key=pos.__getitem__)
            for tp in removed:
                del session[tp]
                del pos[tp]
        if len(altered) > 1:
            altered.sort(key=pos.__getitem__)
        if new:
            next_pos = self._next_pos
            for data in new:
                session[data.tp] = data
                pos[data.tp] = next_pos
                next_pos += 1
            self._next_pos = next_pos
        if log.isEnabledFor(logging.DEBUG):
            log.debug("Built incremental fetch %s for node %d. Added %d, altered %d, removed %d "
                      "out of %d partition(s).", metadata, self.node, len(new), len(altered),
                      len(removed), len(session))
        for tp in altered:
            new.append(session[tp])
        return tuple(new), tuple(removed)

    def apply_change(self, data: FetchPartition
                     ) -> tuple[tuple[FetchPartition, ...], tuple[TopicPartition, ...]]:
        """:meth:`apply_changes` for one wanted entry and nothing dropped (the fetcher's round
        after one partition appended): sent when new to the session or altered, else implied."""
        metadata = self.next_metadata
        if metadata.is_full:
            raise RuntimeError("build_changes needs incremental metadata; use new_builder()")
        session = self.session_partitions
        tp = data.tp
        prev = session.get(tp)
        if prev is None:
            session[tp] = data
            self._pos[tp] = self._next_pos
            self._next_pos += 1
            added = 1
        elif data is prev or (data.fetch_offset == prev.fetch_offset and data == prev):
            added = -1  # (a new fetch offset, the usual change, is told without the full ==)
        else:
            session[tp] = data
            added = 0
        if log.isEnabledFor(logging.DEBUG):
            log.debug("Built incremental fetch %s for node %d. Added %d, altered %d, removed 0 "
                      "out of %d partition(s).", metadata, self.node, int(added > 0),
                      int(added == 0), len(session))
        return ((data,) if added >= 0 else ()), ()

    def verify_full_fetch_response_partitions(self, partitions: Set[TopicPartition]) -> str | None:
        """None if a full response holds exactly the session's partitions, else a description
        naming the omitted and the extra ones (verifyFullFetchResponsePartitions)."""
        if self.session_partitions.keys() == partitions:
            return None  # the common answer, in one set comparison
        extra = find_missing(partitions, self.session_partitions.keys())
        omitted = find_missing(self.session_partitions, partitions)
        if not extra and not omitted:
            return None
        problem = ""
        if omitted:
            problem += f"omittedPartitions=({', '.join(map(str, omitted))}), "
        if extra:
            problem += f"extraPartitions=({', '.join(map(str, extra))}), "
        return problem + f"response=({', '.join(map(str, partitions))})"

    def verify_incremental_fetch_response_partitions(
            self, partitions: Set[TopicPartition]) -> str | None:
        """None if an incremental response holds only session partitions, else a description
        naming the extra ones (verifyIncrementalFetchResponsePartitions)."""
        if self.session_partitions.keys() >= partitions:
            return None  # the common answer, in one set comparison
        extra = find_missing(partitions, self.session_partitions.keys())
        if not extra:
            return None
        return (f"extraPartitions=({', '.join(map(str, extra))}), "
                f"response=({', '.join(map(str, partitions))})")

    def handle_response(self, error_code: int, session_id: int,
                        response_partitions: Iterable[TopicPartition], *,
                        throttle_time_ms: int = 0) -> bool:
        """Advance ``next_metadata`` on a response; False if it cannot be processed
        (handleResponse).

        Top-level error: FETCH_SESSION_ID_NOT_FOUND -> INITIAL, any other ->
        next_close_existing_attempt_new; False. Full request: an empty response with
        ``throttle_time_ms`` > 0 (KIP-219) -> INITIAL, False; partitions not exactly the
        session's -> INITIAL, False; else session id 0 -> INITIAL (sessionless) or
        new_incremental(session_id), True. Incremental request: a partition outside the
        session -> next_close_existing_attempt_new, False; else session id 0 -> INITIAL (closed
        by the leader) or next_incremental, True.
        """
        metadata = self.next_metadata
        if error_code != _NONE:
            log.info("Node %d was unable to process the fetch request with %s: %s.",
                     self.node, metadata, _error_name(error_code))
            if error_code == Errors.FETCH_SESSION_ID_NOT_FOUND:
                self.next_metadata = FetchMetadata.INITIAL
            else:
                self.next_metadata = metadata.next_close_existing_attempt_new()
            return False
        partitions = dict.fromkeys(response_partitions).keys()
        if metadata.is_full:
            if not partitions and throttle_time_ms > 0:
                self.next_metadata = FetchMetadata.INITIAL
                return False
            problem = self.verify_full_fetch_response_partitions(partitions)
            if problem is not None:
                log.info("Node %d sent an invalid full fetch response with %s",
                         self.node, problem)
                self.next_metadata = FetchMetadata.INITIAL
                return False
            if session_id == INVALID_SESSION_ID:
                self.next_metadata = FetchMetadata.INITIAL
            else:
                self.next_metadata = FetchMetadata.new_incremental(session_id)
            return True
        problem = None if self.session_partitions.keys() >= partitions \
            else self.verify_incremental_fetch_response_partitions(partitions)
        if problem is not None:
            log.info("Node %d sent an invalid incremental fetch response with %s",
                     self.node, problem)
            self.next_metadata = metadata.next_close_existing_attempt_new()
            return False
        if session_id == INVALID_SESSION_ID:
            self.next_metadata = FetchMetadata.INITIAL
        else:
            self.next_metadata = metadata.next_incremental()
        return True

    def handle_fetch_response(self, response: FetchResponse) -> bool:
        """:meth:`handle_response` for a whole :class:`FetchResponse`. The common answer — no
        error, to an incremental request, naming only session partitions — is checked entry by
        entry against the session (no set of the response's partitions is made); every other
        answer goes through :meth:`handle_response`."""
        metadata = self.next_metadata
        if response.error_code == _NONE and not metadata.is_full:
            session = self.session_partitions
            for p in response.partitions:
                if p.tp not in session:
                    break
            else:
                self.next_metadata = FetchMetadata.INITIAL \
                    if response.session_id == INVALID_SESSION_ID else metadata.next_incremental()
                return True
        return self.handle_response(response.error_code, response.session_id,
                                    [p.tp for p in response.partitions],
                                    throttle_time_ms=response.throttle_time_ms)

    def handle_error(self, exc: BaseException) -> None:
        """Sending the request failed: close the session and try a new one on the next request
        (handleError -> next_close_existing_attempt_new)."""
        log.info("Error sending fetch request %s to node %d: %r", self.next_metadata,
                 self.node, exc)
        self.next_metadata = self.next_metadata.next_close_existing_attempt_new()

    def notify_close(self) -> None:
        """The next request closes the session without opening another (notifyClose ->
        next_close_existing, FINAL_EPOCH)."""
        self.next_metadata = self.next_metadata.next_close_existing()


def _error_name(code: int) -> str:
    try:
        return Errors(code).name
    except ValueError:
        return str(code)
