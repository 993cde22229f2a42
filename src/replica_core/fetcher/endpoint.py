"""The follower's view of a leader broker (Kafka's ``LeaderEndPoint`` / ``RemoteLeaderEndPoint``).

The fetcher is sans-IO: it builds request values and processes response values. A
``LeaderEndPoint`` carries them. :class:`InProcessLeaderEndPoint` hands them straight to another
broker's ``ReplicaManager`` in the same process (tests, benchmarks, a single-threaded simulator);
the same fetcher code can later run over a socket with another implementation.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Protocol, runtime_checkable

from replica_core.errors import Errors, NetworkException, RequestTimedOutError, for_code
from replica_core.replication.messages import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    EpochEndOffset,
    FetchRequest,
    FetchResponse,
    ListOffsetsPartition,
    OffsetsForLeaderEpochRequest,
    TopicPartition,
)


class EpochAndOffset(NamedTuple):
    """A ListOffsets answer as ``(leader_epoch, offset)`` (Kafka's ``OffsetAndEpoch``)."""

    leader_epoch: int
    offset: int


FetchAnswer = Callable[[FetchResponse | BaseException], None]
EpochAnswer = Callable[[Mapping[TopicPartition, EpochEndOffset] | BaseException], None]


@runtime_checkable
class LeaderEndPoint(Protocol):
    """What a follower fetcher needs from the broker it replicates from (Kafka's LeaderEndPoint).

    Fetch and OffsetsForLeaderEpoch are sent: the answer (the response, or the exception that
    failed the whole request) reaches ``on_answer`` exactly once, at once or later — a leader
    may park a fetch for up to its ``max_wait_ms`` (long polling). ``fetch_earliest_offset`` /
    ``fetch_latest_offset`` answer synchronously and raise the partition's ``KafkaError`` (e.g.
    ``FencedLeaderEpochError``) when the leader answers with an error, as
    ``RemoteLeaderEndPoint.fetchOffset`` does.
    """

    def send_fetch(self, request: FetchRequest, on_answer: FetchAnswer) -> None: ...

    def send_epoch_request(self, request: OffsetsForLeaderEpochRequest,
                           on_answer: EpochAnswer) -> None: ...

    def fetch_earliest_offset(self, tp: TopicPartition, current_leader_epoch: int) -> EpochAndOffset: ...

    def fetch_latest_offset(self, tp: TopicPartition, current_leader_epoch: int) -> EpochAndOffset: ...


class InProcessLeaderEndPoint:
    """A leader endpoint that calls another broker's ``ReplicaManager`` directly.

    A fetch goes to the leader's ``fetch_messages``: answered at once when it can be, else
    parked in the leader's fetch purgatory (§3.6, §6.9) and answered when the leader completes
    it — an append, a HW or leadership change, or ``replica.fetch.wait.max.ms`` passing on the
    leader's clock (its ``tick``). A failure to reach the leader (an exception from it) is the
    request's answer, and a fetch still parked when the leader's replica manager shuts down
    fails with ``NetworkException``, as a closed connection fails its in-flight requests.
    :meth:`fetch` is a synchronous shortcut for tests: it asks with ``max_wait_ms = 0``, so
    the leader answers at once.
    """

    def __init__(self, replica_manager: Any, follower_broker_id: int,
                 follower_broker_epoch: int = 0) -> None:
        self.replica_manager = replica_manager
        self.follower_broker_id = follower_broker_id
        self.follower_broker_epoch = follower_broker_epoch
        self._parked: dict[int, FetchAnswer] = {}
        self._seq = 0

    @property
    def leader_broker_id(self) -> int:
        return int(self.replica_manager.broker_id)

    def send_fetch(self, request: FetchRequest, on_answer: FetchAnswer) -> None:
        self._seq += 1
        token = self._seq
        parked = self._parked

        def answer(value: FetchResponse | BaseException) -> None:
            if parked.pop(token, None) is not None:  # not failed by a close meanwhile
                on_answer(value)

        rm = self.replica_manager
        try:
            response = rm.fetch_messages(request, answer)
        except Exception as e:  # the leader cannot be reached
            on_answer(e)
            return
        if response is not None:
            on_answer(response)
            return
        parked[token] = on_answer
        rm.connections.add(self)

    def leader_closed(self) -> None:
        """The leader's replica manager shut down: every fetch parked there fails."""
        parked, self._parked = self._parked, {}
        for on_answer in parked.values():
            on_answer(NetworkException(f"connection to broker {self.leader_broker_id} closed "
                                       "with a fetch outstanding"))

    def send_epoch_request(self, request: OffsetsForLeaderEpochRequest,
                           on_answer: EpochAnswer) -> None:
        try:
            answers: Mapping[TopicPartition, EpochEndOffset] | BaseException = \
                self.fetch_epoch_end_offsets(request)
        except Exception as e:
            answers = e
        on_answer(answers)

    def fetch(self, request: FetchRequest) -> FetchResponse:
        """Serve ``request`` on the leader now (asked with ``max_wait_ms = 0``)."""
        if request.max_wait_ms > 0:
            request = dataclasses.replace(request, max_wait_ms=0)
        response = self.replica_manager.fetch_messages(request)
        if response is None:  # pragma: no cover - max_wait_ms = 0 is answered at once
            raise RequestTimedOutError("in-process fetch was parked by the leader")
        return response

    def fetch_epoch_end_offsets(
        self, request: OffsetsForLeaderEpochRequest
    ) -> dict[TopicPartition, EpochEndOffset]:
        """OffsetsForLeaderEpoch on the leader (§4.3); an empty request is not sent."""
        if not request.partitions:
            return {}
        return dict(self.replica_manager.offsets_for_leader_epoch(request))

    def fetch_earliest_offset(self, tp: TopicPartition, current_leader_epoch: int) -> EpochAndOffset:
        """The leader's log start offset (ListOffsets EARLIEST, §4.8)."""
        return self._list_offset(tp, current_leader_epoch, EARLIEST_TIMESTAMP)

    def fetch_latest_offset(self, tp: TopicPartition, current_leader_epoch: int) -> EpochAndOffset:
        """The leader's log end offset (ListOffsets LATEST, §4.8)."""
        return self._list_offset(tp, current_leader_epoch, LATEST_TIMESTAMP)

    def _list_offset(self, tp: TopicPartition, current_leader_epoch: int,
                     timestamp: int) -> EpochAndOffset:
        tp = TopicPartition(*tp)
        answers = self.replica_manager.list_offsets(
            self.follower_broker_id, [ListOffsetsPartition(tp, timestamp, current_leader_epoch)])
        result = answers[tp]
        if result.error_code != Errors.NONE:
            raise for_code(result.error_code, f"ListOffsets {tp} on broker {self.leader_broker_id}")
        return EpochAndOffset(result.leader_epoch, result.offset)

    def __repr__(self) -> str:
        return (f"InProcessLeaderEndPoint(leader={self.leader_broker_id}, "
                f"follower={self.follower_broker_id})")
