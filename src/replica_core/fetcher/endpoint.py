"""The follower's view of a leader broker (Kafka's ``LeaderEndPoint`` / ``RemoteLeaderEndPoint``).

The fetcher is sans-IO: it builds request values and processes response values. A
``LeaderEndPoint`` carries them. :class:`InProcessLeaderEndPoint` hands them straight to another
broker's ``ReplicaManager`` in the same process (tests, benchmarks, a single-threaded simulator);
the same fetcher code can later run over a socket with another implementation.
"""
from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple, Protocol, runtime_checkable

from replica_core.errors import Errors, RequestTimedOutError, for_code
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


@runtime_checkable
class LeaderEndPoint(Protocol):
    """What a follower fetcher needs from the broker it replicates from (Kafka's LeaderEndPoint).

    ``fetch_earliest_offset`` / ``fetch_latest_offset`` raise the partition's ``KafkaError``
    (e.g. ``FencedLeaderEpochError``) when the leader answers with an error, as
    ``RemoteLeaderEndPoint.fetchOffset`` does; ``fetch`` raises for a failure of the whole
    request (transport or top-level error).
    """

    def fetch(self, request: FetchRequest) -> FetchResponse: ...

    def fetch_epoch_end_offsets(
        self, request: OffsetsForLeaderEpochRequest
    ) -> dict[TopicPartition, EpochEndOffset]: ...

    def fetch_earliest_offset(self, tp: TopicPartition, current_leader_epoch: int) -> EpochAndOffset: ...

    def fetch_latest_offset(self, tp: TopicPartition, current_leader_epoch: int) -> EpochAndOffset: ...


class InProcessLeaderEndPoint:
    """A leader endpoint that calls another broker's ``ReplicaManager`` directly.

    Fetch and purgatory: the leader may park a follower fetch in its fetch purgatory until
    ``min_bytes`` accumulate or ``max_wait_ms`` elapses (§3.6, §6.9). A synchronous call cannot
    wait, so this endpoint completes it *as if the max wait had elapsed*: it sends the request with
    ``max_wait_ms = 0``, which makes the leader answer at once with whatever is available — exactly
    the answer a parked fetch gives on expiry when nothing happens meanwhile (nothing can: the call
    is synchronous). The follower's fetch state on the leader is updated by that first read, as it
    would be by the first read of a parked fetch. Should the leader park the request anyway (it
    returns None), the response delivered to the callback is used if it already arrived; otherwise
    the endpoint raises ``RequestTimedOutError`` and the fetcher backs off as after any failed
    request.
    """

    def __init__(self, replica_manager: Any, follower_broker_id: int,
                 follower_broker_epoch: int = 0) -> None:
        self.replica_manager = replica_manager
        self.follower_broker_id = follower_broker_id
        self.follower_broker_epoch = follower_broker_epoch

    @property
    def leader_broker_id(self) -> int:
        return int(self.replica_manager.broker_id)

    def fetch(self, request: FetchRequest) -> FetchResponse:
        """Serve ``request`` on the leader now (a parked fetch is completed as if expired)."""
        if request.max_wait_ms > 0:
            request = dataclasses.replace(request, max_wait_ms=0)
        delivered: list[FetchResponse] = []
        response = self.replica_manager.fetch_messages(request, delivered.append)
        if response is None:
            if not delivered:
                raise RequestTimedOutError("in-process fetch was parked by the leader")
            response = delivered[0]
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
