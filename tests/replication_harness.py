"""A tiny in-process cluster for the replication tests: real logs on a MemoryMedium, one
ReplicaManager per broker, a stub controller answering AlterPartition, and follower fetches done
by hand (build a FetchRequest from the follower's LEO, call the leader's ``fetch_messages``,
append as follower, adopt the leader's HW). Not the simulator: every step is explicit.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from replica_core.clock import ManualClock
from replica_core.errors import Errors
from replica_core.records import build_batch
from replica_core.replication import ReplicaConfig, ReplicaManager
from replica_core.replication.messages import (
    AlterPartitionRequest,
    AlterPartitionResult,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    TopicPartition,
)
from replica_core.replication.partition import latest_epoch
from replica_core.storage.log_manager import LogManager
from replica_core.storage.medium import MemoryMedium

START_MS = 1_700_000_000_000
TP = TopicPartition("t", 0)


@dataclass
class StubController:
    """Answers AlterPartition requests: accepted at once (``auto``) or kept for the test."""

    auto: bool = True
    requests: list[AlterPartitionRequest] = field(default_factory=list)
    cluster: Any = None

    def transport(self, request: AlterPartitionRequest) -> None:
        self.requests.append(request)
        if self.auto:
            self.answer(request)

    def answer(self, request: AlterPartitionRequest, error: Errors = Errors.NONE,
               isr: Sequence[int] | None = None) -> None:
        rm = self.cluster.rm(request.broker_id)
        for item in request.items:
            if error == Errors.NONE:
                result = AlterPartitionResult(
                    item.tp, Errors.NONE, request.broker_id, item.leader_epoch,
                    tuple(item.new_isr if isr is None else isr), item.partition_epoch + 1)
            else:
                result = AlterPartitionResult(item.tp, error)
            rm.handle_alter_partition_response(result)

    def pending_items(self) -> list[Any]:
        return [item for req in self.requests for item in req.items]


class Cluster:
    """Brokers 0..n-1 sharing one ManualClock and one MemoryMedium."""

    def __init__(self, n: int = 3, *, config: ReplicaConfig | None = None, auto_isr: bool = True,
                 pure_kernels: bool | None = None, log_config: Any = None) -> None:
        self.clock = ManualClock(START_MS)
        self.medium = MemoryMedium()
        self.config = config or ReplicaConfig()
        self.controller = StubController(auto=auto_isr, cluster=self)
        self.controller_epoch = 1
        self.log_managers: dict[int, LogManager] = {}
        self.managers: dict[int, ReplicaManager] = {}
        self.broker_epochs = {b: 100 + b for b in range(n)}
        self.partition_epochs: dict[TopicPartition, int] = {}
        self.leader_epochs: dict[TopicPartition, int] = {}
        for b in range(n):
            lm = LogManager([f"/kafka/broker-{b}"], log_config, medium=self.medium,
                            clock=self.clock)
            lm.startup()
            self.log_managers[b] = lm
            self.managers[b] = ReplicaManager(
                b, lm, self.config, clock=self.clock, alter_partition=self.controller.transport,
                broker_epoch=self.broker_epochs[b], pure_kernels=pure_kernels)

    def rm(self, broker: int) -> ReplicaManager:
        return self.managers[broker]

    def partition(self, broker: int, tp: TopicPartition = TP) -> Any:
        return self.managers[broker].partition(tp)

    # ---- controller side -----------------------------------------------------------------
    def leader_and_isr(self, tp: TopicPartition, *, leader: int, isr: Sequence[int],
                       replicas: Sequence[int] = (0, 1, 2), leader_epoch: int | None = None,
                       partition_epoch: int | None = None, brokers: Iterable[int] | None = None,
                       controller_epoch: int | None = None, topic_id: str | None = None
                       ) -> dict[int, LeaderAndIsrResponse]:
        """Send one LeaderAndIsr for ``tp`` to ``brokers`` (default: the replicas)."""
        if leader_epoch is None:
            leader_epoch = self.leader_epochs.get(tp, -1) + 1
        if partition_epoch is None:
            partition_epoch = self.partition_epochs.get(tp, -1) + 1
        self.leader_epochs[tp] = leader_epoch
        self.partition_epochs[tp] = partition_epoch
        cepoch = self.controller_epoch if controller_epoch is None else controller_epoch
        state = LeaderAndIsrPartitionState(
            tp.topic, tp.partition, cepoch, leader, leader_epoch, tuple(isr), partition_epoch,
            tuple(replicas), topic_id=topic_id)
        out = {}
        for b in (replicas if brokers is None else brokers):
            req = LeaderAndIsrRequest(99, cepoch, self.broker_epochs[b], (state,))
            out[b] = self.managers[b].become_leader_or_follower(req)
        return out

    def create(self, tp: TopicPartition = TP, *, replicas: Sequence[int] = (0, 1, 2),
               leader: int = 0, isr: Sequence[int] | None = None) -> None:
        self.leader_and_isr(tp, leader=leader, isr=replicas if isr is None else isr,
                            replicas=replicas)

    # ---- clients ---------------------------------------------------------------------------
    def produce(self, tp: TopicPartition = TP, n: int = 1, *, acks: int = -1,
                timeout_ms: int = 30_000, broker: int | None = None, value: bytes = b"v" * 10,
                callback: Any = None) -> Any:
        leader = self.partition_leader(tp) if broker is None else broker
        batch = build_batch([value] * n)
        return self.managers[leader].append_records({tp: batch}, acks=acks, timeout_ms=timeout_ms,
                                                    callback=callback)

    def partition_leader(self, tp: TopicPartition) -> int:
        for b, rm in self.managers.items():
            p = rm.partition(tp)
            if p is not None and p.is_leader:
                return b
        raise LookupError(f"no leader for {tp}")

    def fetch_request(self, follower: int, tps: Sequence[TopicPartition] = (TP,), *,
                      max_wait_ms: int = 0, min_bytes: int = 1, max_bytes: int = 10 << 20,
                      partition_max_bytes: int = 1 << 20, send_epoch: bool = True,
                      current_leader_epoch: int | None = None,
                      last_fetched_epoch: int | None = None) -> FetchRequest:
        parts = []
        for tp in tps:
            p = self.partition(follower, tp)
            lfe = latest_epoch(p.log) if last_fetched_epoch is None else last_fetched_epoch
            parts.append(FetchPartition(
                tp, p.log_end_offset, partition_max_bytes, p.log_start_offset,
                p.leader_epoch if current_leader_epoch is None else current_leader_epoch,
                -1 if (lfe is None or not send_epoch) else lfe))
        return FetchRequest(follower, max_wait_ms, min_bytes, max_bytes, tuple(parts),
                            replica_epoch=self.broker_epochs[follower])

    def fetch(self, follower: int, tps: Sequence[TopicPartition] = (TP,), *, apply: bool = True,
              callback: Any = None, leader: int | None = None, **kw: Any) -> FetchResponse | None:
        """One follower fetch round against the leader; applied to the follower's log."""
        req = self.fetch_request(follower, tps, **kw)
        if leader is None:
            leader = self.partition(follower, tps[0]).leader_id
        resp = self.managers[leader].fetch_messages(req, callback=callback)
        if resp is not None and apply:
            self.apply(follower, resp)
        return resp

    def apply(self, follower: int, resp: FetchResponse) -> None:
        """What the fetcher does with a response (§7.7), minus its bookkeeping."""
        for pr in resp.partitions:
            if pr.error_code != Errors.NONE:
                continue
            p = self.partition(follower, pr.tp)
            if pr.diverging_epoch is not None:
                p.truncate_to(min(pr.diverging_epoch.end_offset, p.log_end_offset))
                continue
            records = pr.records
            if (records.nbytes if isinstance(records, memoryview) else len(records)) > 0:
                p.append_records_to_follower(bytes(records))
            p.update_follower_high_watermark(pr.high_watermark)

    def catch_up(self, followers: Sequence[int] = (1, 2), tp: TopicPartition = TP,
                 rounds: int = 2) -> None:
        for _ in range(rounds):
            for f in followers:
                self.fetch(f, (tp,))

    def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        for rm in self.managers.values():
            rm.tick()
