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

if TYPE_CHECKING:
    from replica_core.replication.replica_manager import FetchParams, ReplicaManager


@dataclass(slots=True)
class ProducePartitionStatus:
    """Kafka's ProducePartitionStatus: the offset the HW must reach and the response so far."""

    required_offset: int
    response: ProducePartitionResponse
    acks_pending: bool = False


class DelayedProduce(DelayedOperation):
    """acks=all produce waiting for the HW to pass each partition's last offset (§6.8).

    Partitions that failed locally are complete from the start; the others begin with
    REQUEST_TIMED_OUT (what they answer on expiry — the data stays in the log) and complete
    when ``check_enough_replicas_reach_offset`` says so, or with NOT_LEADER_OR_FOLLOWER /
    UNKNOWN_TOPIC_OR_PARTITION when the partition is no longer led here.
    """

    def __init__(self, delay_ms: int, status: dict[TopicPartition, ProducePartitionStatus],
                 manager: ReplicaManager,
                 deliver: Callable[[dict[TopicPartition, ProducePartitionResponse]], None]) -> None:
        super().__init__(delay_ms)
        self.status = status
        self.manager = manager
        self.deliver = deliver
        self.responses: dict[TopicPartition, ProducePartitionResponse] | None = None
        for st in status.values():
            if st.response.error_code == Errors.NONE:
                st.acks_pending = True
                st.response = _with_error(st.response, Errors.REQUEST_TIMED_OUT)
            else:
                st.acks_pending = False

    def try_complete(self) -> bool:
        pending = False
        for tp, st in self.status.items():
            if not st.acks_pending:
                continue
            partition = self.manager.get_partition(tp)
            if partition is None:
                done, error = False, Errors.UNKNOWN_TOPIC_OR_PARTITION
            else:
                done, error = partition.check_enough_replicas_reach_offset(st.required_offset)
            if error != Errors.NONE or done:
                st.acks_pending = False
                st.response = _with_error(st.response, error)
            else:
                pending = True
        if pending:
            return False
        return self.force_complete()

    def on_complete(self) -> None:
        self.responses = {tp: st.response for tp, st in self.status.items()}
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


class DelayedFetch(DelayedOperation):
    """A fetch waiting for ``min_bytes`` or ``max_wait_ms`` (§6.9).

    ``try_complete`` completes at once on: A/B not leader any more, C unknown partition, D
    storage error, E the request's leader epoch now fenced, F the fetch offset beyond the end
    offset (leader truncated) or on an older segment than it (lagging / rolled), H the last
    fetched epoch now diverges or cannot be resolved; and G when the bytes available — per
    partition ``min(end position − fetch position, partition max bytes)`` for partitions whose
    fetch offset and end offset share a segment — reach ``min_bytes``. The end offset is the LEO
    for followers and the HW for consumers. On completion the logs are read again (without
    updating follower state) and the response delivered.
    """

    def __init__(self, params: FetchParams,
                 statuses: Sequence[tuple[TopicPartition, FetchPartitionStatus]],
                 manager: ReplicaManager, deliver: Callable[[FetchResponse], None]) -> None:
        super().__init__(params.max_wait_ms)
        self.params = params
        self.statuses = list(statuses)
        self.manager = manager
        self.deliver = deliver
        self.response: FetchResponse | None = None

    def try_complete(self) -> bool:
        params = self.params
        accumulated = 0
        for tp, st in self.statuses:
            start = st.start_offset_metadata
            if start is None:
                continue
            info = st.fetch_info
            partition = self.manager.get_partition(tp)
            if partition is None:
                return self.force_complete()  # Case C
            try:
                snapshot = partition.fetch_offset_snapshot(info.current_leader_epoch,
                                                           params.fetch_only_leader)
            except KafkaError:
                return self.force_complete()  # Cases A, B, D, E
            end = (snapshot.log_end_offset if params.isolation == ISOLATION_LOG_END
                   else snapshot.high_watermark if params.isolation == ISOLATION_HIGH_WATERMARK
                   else snapshot.last_stable_offset)
            if start.message_offset > end.message_offset:
                return self.force_complete()  # Case F: the leader truncated
            if start.message_offset < end.message_offset:
                if _offset_only(start) or _offset_only(end):
                    return self.force_complete()  # cannot place the bytes: answer now
                if start.segment_base_offset < end.segment_base_offset:
                    return self.force_complete()  # Case F: lagging or just rolled
                if start.segment_base_offset == end.segment_base_offset:
                    accumulated += min(
                        end.relative_position_in_segment - start.relative_position_in_segment,
                        info.partition_max_bytes)
            if info.last_fetched_epoch >= 0:
                epoch_end = partition.last_offset_for_leader_epoch(
                    info.current_leader_epoch, info.last_fetched_epoch,
                    fetch_only_from_leader=False)
                if (epoch_end.error_code != Errors.NONE or epoch_end.end_offset < 0
                        or epoch_end.leader_epoch < 0):
                    return self.force_complete()  # Case H: cannot resolve the epoch
                if (epoch_end.leader_epoch < info.last_fetched_epoch
                        or epoch_end.end_offset < info.fetch_offset):
                    return self.force_complete()  # Case H: diverging now
        if accumulated >= params.min_bytes:
            return self.force_complete()  # Case G
        return False

    def on_complete(self) -> None:
        parts = tuple(st.fetch_info for _, st in self.statuses)
        results = self.manager._read_from_log(self.params, parts, read_from_purgatory=True)
        self.response = self.manager._fetch_response(results)
        self.deliver(self.response)

    def on_expiration(self) -> None:
        self.manager._record_fetch_expiration(self.params.is_from_follower)


def _offset_only(meta: Any) -> bool:
    return meta.segment_base_offset < 0 or meta.relative_position_in_segment < 0
