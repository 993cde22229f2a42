"""Brokers for the fetcher tests: real Logs on one MemoryMedium, one ReplicaManager per broker,
each with a ReplicaFetcherManager whose fetchers reach the leader's ReplicaManager through a
transport. The controller is the test: it sends LeaderAndIsr by hand and accepts every
AlterPartition at once. Time is one ManualClock.

Transports (``transport=``, default :attr:`FetcherCluster.default_transport`):

* ``"inprocess"``: an InProcessLeaderEndPoint calls the leader's ReplicaManager directly.
* ``"sim"``: the simulator's SimLeaderEndPoint carries each request across a simulated network
  with a fixed latency on an event loop whose clock is the cluster's (see ``sim_transport``).

Either way ``step`` is one complete fetch round per fetcher: a request's answer is processed
before its ``do_work`` returns, unless the leader parks the fetch (long polling); ``advance``
moves the clock (and runs what falls due on the loop), then ticks every live broker.

The ``fetcher_transport`` fixture (conftest) runs a test under each transport;
:func:`inprocess_only` narrows a test to the in-process one, with the reason.

A broker can be stopped (its endpoint then fails like a dead socket and it is never stepped) and
restarted (ReplicaManager and LogManager shut down and reopened over the same medium).
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pytest
from sim_transport import SimTransport

from replica_core.clock import ManualClock
from replica_core.errors import Errors
from replica_core.fetcher.endpoint import InProcessLeaderEndPoint
from replica_core.fetcher.fetcher import ReplicaFetcher
from replica_core.fetcher.manager import ReplicaFetcherManager
from replica_core.records import build_batch, iter_batches
from replica_core.replication import ReplicaConfig, ReplicaManager
from replica_core.replication.messages import (
    AlterPartitionRequest,
    AlterPartitionResult,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    TopicPartition,
)
from replica_core.storage.log_manager import LogManager
from replica_core.storage.medium import MemoryMedium

START_MS = 1_700_000_000_000
TP = TopicPartition("t", 0)
TRANSPORTS = ("inprocess", "sim")


def inprocess_only(reason: str) -> Any:
    """Mark a test of a ``fetcher_transport`` module to run in-process only; ``reason`` says
    why (it must: the exclusions are reported)."""
    if not reason.strip():
        raise ValueError("say why the test cannot run over the simulator's transport")
    return pytest.mark.parametrize("fetcher_transport", ["inprocess"], indirect=True)


class BrokerDown(ConnectionError):
    """The endpoint's broker is stopped (a refused connection)."""


class _BrokerRef:
    """Whatever ReplicaManager broker ``b`` runs now (survives restarts); fails while stopped."""

    def __init__(self, cluster: FetcherCluster, broker: int) -> None:
        self._cluster = cluster
        self._broker = broker

    def __getattr__(self, name: str) -> Any:
        if self._broker not in self._cluster.alive:
            raise BrokerDown(f"broker {self._broker} is down")
        return getattr(self._cluster.rms[self._broker], name)


class FetcherCluster:
    """Brokers ``brokers`` sharing a ManualClock and a MemoryMedium."""

    default_transport = "inprocess"
    """The transport of clusters built without ``transport=`` (the fixture sets it)."""

    def __init__(self, brokers: Sequence[int] = (0, 1, 2), *, log_config: Any = None,
                 truncate_on_fetch: bool = True, transport: str | None = None,
                 **config: Any) -> None:
        transport = self.default_transport if transport is None else transport
        if transport not in TRANSPORTS:
            raise ValueError(f"transport must be one of {TRANSPORTS}, not {transport!r}")
        self.medium = MemoryMedium()
        # Fetches are answered at once unless a test asks for long polling: each ``step`` is
        # then one complete fetch round trip per fetcher.
        config.setdefault("replica_fetch_wait_max_ms", 0)
        self.config = ReplicaConfig(truncate_on_fetch=truncate_on_fetch, **config)
        self.transport = transport
        self.sim: SimTransport | None = None
        if transport == "sim":
            self.sim = SimTransport(self._serving, start_ms=START_MS,
                                    socket_timeout_ms=self.config.replica_socket_timeout_ms)
            self.clock = self.sim.clock
        else:
            self.clock = ManualClock(START_MS)
        self.log_config = log_config
        self.truncate_on_fetch = truncate_on_fetch
        self.broker_ids = list(brokers)
        self.broker_epochs = {b: 100 + b for b in brokers}
        self.alive: set[int] = set()
        self.rms: dict[int, ReplicaManager] = {}
        self.log_managers: dict[int, LogManager] = {}
        self.leader_epochs: dict[TopicPartition, int] = {}
        self.partition_epochs: dict[TopicPartition, int] = {}
        self.controller_epoch = 1
        for b in brokers:
            self.start(b)

    # ---- brokers ---------------------------------------------------------------------------
    def start(self, b: int) -> None:
        lm = LogManager([f"/kafka/broker-{b}"], self.log_config, medium=self.medium,
                        clock=self.clock)
        lm.startup()
        rm = ReplicaManager(b, lm, self.config, clock=self.clock,
                            alter_partition=self._alter_partition,
                            broker_epoch=self.broker_epochs[b])
        make_manager = ReplicaFetcherManager if self.sim is None else self.sim.fetcher_manager
        rm.fetcher_manager = make_manager(
            b, rm, self.config, lambda leader, b=b: self.endpoint(leader, b), clock=self.clock,
            truncate_on_fetch=self.truncate_on_fetch)
        self.log_managers[b] = lm
        self.rms[b] = rm
        self.alive.add(b)
        if self.sim is not None:
            self.sim.started(b)

    def stop(self, b: int, *, clean: bool = True) -> None:
        """Shut broker ``b`` down (HWs checkpointed when ``clean``); its data stays on the medium."""
        self.rms[b].shutdown(clean=clean)
        self.log_managers[b].shutdown()
        self.alive.discard(b)
        if self.sim is not None:
            self.sim.stopped(b)

    def restart(self, b: int) -> None:
        self.stop(b)
        self.start(b)

    def endpoint(self, leader: int, follower: int) -> Any:
        """``follower``'s endpoint to ``leader`` over this cluster's transport."""
        if self.sim is not None:
            return self.sim.endpoint(leader, follower)
        return InProcessLeaderEndPoint(_BrokerRef(self, leader), follower,
                                       self.broker_epochs[follower])

    def _serving(self, b: int) -> ReplicaManager | None:
        """The ReplicaManager broker ``b`` runs now; None while it is down."""
        return self.rms.get(b) if b in self.alive else None

    def rm(self, b: int) -> ReplicaManager:
        return self.rms[b]

    def fm(self, b: int) -> ReplicaFetcherManager:
        return self.rms[b].fetcher_manager  # type: ignore[return-value]

    def fetcher(self, b: int, tp: TopicPartition = TP) -> ReplicaFetcher:
        f = self.fm(b).get_fetcher(tp)
        assert f is not None, f"broker {b} has no fetcher for {tp}"
        return f

    def log(self, b: int, tp: TopicPartition = TP) -> Any:
        """Broker ``b``'s log for ``tp`` (also before a LeaderAndIsr after a restart)."""
        lg = self.rms[b].local_log(tp)
        return lg if lg is not None else self.log_managers[b].get_log(tp.topic, tp.partition)

    # ---- controller ------------------------------------------------------------------------
    def _alter_partition(self, request: AlterPartitionRequest) -> None:
        rm = self.rms[request.broker_id]
        for item in request.items:
            self.partition_epochs[item.tp] = item.partition_epoch + 1
            rm.handle_alter_partition_response(AlterPartitionResult(
                item.tp, Errors.NONE, request.broker_id, item.leader_epoch, tuple(item.new_isr),
                item.partition_epoch + 1))

    def leader_and_isr(self, tp: TopicPartition = TP, *, leader: int,
                       isr: Sequence[int] | None = None, replicas: Sequence[int] | None = None,
                       leader_epoch: int | None = None, to: Iterable[int] | None = None) -> int:
        """Send LeaderAndIsr for ``tp`` to ``to`` (default: every live replica); the epoch used."""
        replicas = tuple(self.broker_ids if replicas is None else replicas)
        isr = tuple(replicas if isr is None else isr)
        if leader_epoch is None:
            leader_epoch = self.leader_epochs.get(tp, -1) + 1
        self.leader_epochs[tp] = leader_epoch
        pe = self.partition_epochs[tp] = self.partition_epochs.get(tp, -1) + 1
        state = LeaderAndIsrPartitionState(tp.topic, tp.partition, self.controller_epoch, leader,
                                           leader_epoch, isr, pe, replicas)
        targets = [b for b in replicas if b in self.alive] if to is None else list(to)
        for b in targets:
            resp = self.rms[b].become_leader_or_follower(
                LeaderAndIsrRequest(99, self.controller_epoch, self.broker_epochs[b], (state,)))
            assert resp.partition_errors.get(tp, Errors.NONE) == Errors.NONE, resp
        return leader_epoch

    # ---- clients and driving -----------------------------------------------------------------
    def produce(self, tp: TopicPartition = TP, values: Sequence[bytes] = (b"v",), *,
                acks: int = 1, broker: int | None = None, callback: Any = None) -> Any:
        leader = self.leader_of(tp) if broker is None else broker
        return self.rms[leader].append_records({tp: build_batch(list(values))}, acks=acks,
                                               timeout_ms=30_000, callback=callback)

    def leader_of(self, tp: TopicPartition = TP) -> int:
        for b in sorted(self.alive):
            p = self.rms[b].partition(tp)
            if p is not None and p.is_leader:
                return b
        raise LookupError(f"no live leader for {tp}")

    def step(self, brokers: Iterable[int] | None = None, rounds: int = 1) -> None:
        """``rounds`` times: one ``do_work`` of every fetcher of each live broker, in order."""
        for _ in range(rounds):
            for b in (sorted(self.alive) if brokers is None else brokers):
                self.fm(b).do_work()

    def advance(self, ms: int) -> None:
        if self.sim is not None:
            self.sim.advance(ms)
        else:
            self.clock.advance(ms)
        for b in sorted(self.alive):
            self.rms[b].tick()

    # ---- inspection --------------------------------------------------------------------------
    def values(self, b: int, tp: TopicPartition = TP) -> list[bytes]:
        """Record values of broker ``b``'s log for ``tp``, in offset order."""
        lg = self.log(b, tp)
        data = lg.read(lg.log_start_offset, 1 << 30).records
        return [bytes(r.value) for batch in iter_batches(bytes(data)) for r in batch.records()]

    def batches(self, b: int, tp: TopicPartition = TP) -> list[tuple[int, int, int]]:
        """(base offset, last offset, leader epoch) of each batch of broker ``b``'s log."""
        lg = self.log(b, tp)
        data = lg.read(lg.log_start_offset, 1 << 30).records
        return [(bt.base_offset, bt.last_offset, bt.partition_leader_epoch)
                for bt in iter_batches(bytes(data))]

    def log_bytes(self, b: int, tp: TopicPartition = TP) -> bytes:
        lg = self.log(b, tp)
        return bytes(lg.read(lg.log_start_offset, 1 << 30).records)
