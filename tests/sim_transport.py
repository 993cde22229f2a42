"""The simulator's transport for the fetcher tests: :class:`FetcherCluster`'s ``"sim"`` mode.

Each follower fetcher talks to its leader through the simulator's own carrier,
:class:`~replica_core.sim.broker.SimLeaderEndPoint`: a fetch or OffsetsForLeaderEpoch request
crosses a :class:`~replica_core.sim.network.Network` (fixed latency, default 1 ms each way) on an
:class:`~replica_core.sim.loop.EventLoop` whose clock is the cluster's clock, reaches the leader's
real ``ReplicaManager`` (a fetch it cannot answer yet is parked in the leader's purgatory, the
connection held open), and the answer travels back through the network to the fetcher.

What makes the tests' ``step`` mean one complete round trip per fetcher is how the carrier is
driven, not what it carries: a send runs the event loop until the answer has come back — or,
for a long-poll fetch, until the leader has parked it (its answer then travels when the leader
completes it, and :meth:`SimTransport.settle` delivers it before the fetcher works again). The
fetcher's thread in Kafka does the same: ``RemoteLeaderEndPoint`` sends through a blocking
client and the thread waits for the response.

A stopped broker refuses connections (the simulator's ``Disconnected``, which the carrier turns
into a failed request) and resets those it held, as a crashed ``SimBroker`` process does.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

from replica_core.errors import RequestTimedOutError
from replica_core.fetcher.manager import ReplicaFetcherManager
from replica_core.replication.messages import (
    EpochEndOffset,
    FetchRequest,
    FetchResponse,
    OffsetsForLeaderEpochRequest,
    TopicPartition,
)
from replica_core.sim.broker import Disconnected, SimLeaderEndPoint
from replica_core.sim.loop import EventLoop
from replica_core.sim.network import Network

LATENCY_MS = 1
"""One-way network latency of every link."""


class _Process:
    """What the carrier needs of the sending broker: its node, the network, and which run of
    the broker is current (an answer reaching a stopped or restarted broker is dropped)."""

    def __init__(self, transport: SimTransport, broker_id: int) -> None:
        self._transport = transport
        self.broker_id = broker_id
        self.network = transport.network
        self.loop = transport.loop
        self.incarnation = 0

    @property
    def alive(self) -> bool:
        return self._transport.serving(self.broker_id) is not None

    def fsync_wait_ms(self) -> int:
        """The in-process brokers' fsyncs take no simulated time."""
        return 0


class SimTransport:
    """An event loop and network between brokers; ``serving(b)`` is the ReplicaManager broker
    ``b`` runs now, or None while it is down."""

    def __init__(self, serving: Callable[[int], Any], *, start_ms: int, socket_timeout_ms: int,
                 latency_ms: int = LATENCY_MS) -> None:
        self.serving = serving
        self.loop = EventLoop(0, start_ms=start_ms)
        self.network = Network(self.loop, latency_ms=latency_ms)
        self.socket_timeout_ms = socket_timeout_ms
        self._processes: dict[int, _Process] = {}
        # fetches a leader holds: node -> {id(request): (requesting node, respond)}
        self._parked: dict[int, dict[int, tuple[int, Callable[[Any, int], None]]]] = {}
        self._quiet_at = start_ms  # when every answer sent so far has arrived

    @property
    def clock(self) -> Any:
        return self.loop.clock

    # ---- brokers --------------------------------------------------------------------------------
    def started(self, b: int) -> None:
        """Broker ``b`` runs anew (a new process: answers to the old one are dropped, and the
        connections the old one held are reset if it was not stopped through :meth:`stopped`)."""
        proc = self._processes.get(b)
        if proc is None:
            proc = self._processes[b] = _Process(self, b)
            self.network.register(b, lambda src, msg, respond, b=b: self._serve(b, src, msg,
                                                                                respond))
        self._reset_connections(b)
        proc.incarnation += 1

    def stopped(self, b: int) -> None:
        """Broker ``b``'s process is gone: the connections it held are reset."""
        self._processes[b].incarnation += 1
        self._reset_connections(b)

    def _reset_connections(self, b: int) -> None:
        held = self._parked.pop(b, {})
        connections = list(held.values())
        held.clear()
        for src, respond in connections:
            self._respond(b, respond, Disconnected(b), 16, src)

    def process(self, b: int) -> _Process:
        """Broker ``b`` as the carrier sees it (after :meth:`started`)."""
        return self._processes[b]

    def endpoint(self, leader: int, follower: int) -> CarriedLeaderEndPoint:
        return CarriedLeaderEndPoint(self, follower, leader)

    def fetcher_manager(self, *args: Any, **kwargs: Any) -> ReplicaFetcherManager:
        """A ReplicaFetcherManager whose ``do_work`` first lets answers on their way arrive."""
        return _SettlingFetcherManager(self, *args, **kwargs)

    # ---- the leader's side of a connection ------------------------------------------------------
    # (what SimBroker._on_message does with FetchRequest and OffsetsForLeaderEpochRequest,
    # without its slow-broker delays, invariant checker and tick scheduling)
    def _serve(self, b: int, src: int, msg: Any, respond: Callable[[Any, int], None]) -> None:
        rm = self.serving(b)
        if rm is None:  # the process is down: the connection is refused
            self._respond(b, respond, Disconnected(b), 16, src)
            return
        if isinstance(msg, FetchRequest):
            key = id(msg)
            held = self._parked.setdefault(b, {})

            def reply(response: FetchResponse) -> None:  # the purgatory completed it
                if held.pop(key, None) is not None:  # unless the connection was reset
                    self._respond(b, respond, response, _fetch_size(response), src)

            try:
                response = rm.fetch_messages(msg, reply)
            except Exception as e:  # noqa: BLE001 - the failure is the request's answer
                self._respond(b, respond, e, 16, src)
                return
            if response is not None:
                self._respond(b, respond, response, _fetch_size(response), src)
            else:
                held[key] = (src, respond)
        elif isinstance(msg, OffsetsForLeaderEpochRequest):
            try:
                answer = dict(rm.offsets_for_leader_epoch(msg))
            except Exception as e:  # noqa: BLE001 - the failure is the request's answer
                self._respond(b, respond, e, 16, src)
                return
            self._respond(b, respond, answer, 32 + 24 * len(answer), src)
        else:  # pragma: no cover - programming error
            raise TypeError(f"broker {b} got an unknown message {msg!r}")

    def _respond(self, b: int, respond: Callable[[Any, int], None], answer: Any, size: int,
                 dst: int) -> None:
        """Answer a request from ``dst``, noting when the answer will have arrived."""
        respond(answer, size)
        link = self.network.link(b, dst)
        self._quiet_at = max(self._quiet_at, math.ceil(link.busy_until_ms + link.latency_ms))

    def is_parked(self, request: Any) -> bool:
        key = id(request)
        return any(key in held for held in self._parked.values())

    # ---- driving --------------------------------------------------------------------------------
    def carry(self, request: Any, send: Callable[[Callable[[Any], None]], None],
              on_answer: Callable[[Any], None], blocked_ms: int = 0) -> None:
        """``send`` the request and run the loop until its answer has been handed to
        ``on_answer``, or the leader parked it (long polling); a request held back
        ``blocked_ms`` by the sender's blocking ListOffsets gets that much longer."""
        done: list[bool] = []

        def answered(answer: Any) -> None:
            done.append(True)
            on_answer(answer)

        send(answered)
        self.loop.run_until(lambda: bool(done) or self.is_parked(request),
                            blocked_ms + self.socket_timeout_ms + 1)

    def settle(self) -> None:
        """Deliver every answer already sent (a parked fetch the leader completed since)."""
        if self._quiet_at > self.loop.now:
            self.loop.run_until_time(self._quiet_at)

    def advance(self, ms: int) -> None:
        """``ms`` of simulated time pass; what falls due meanwhile runs."""
        self.loop.advance(ms)


class CarriedLeaderEndPoint(SimLeaderEndPoint):
    """The simulator's leader endpoint, driven to completion per request (see the module), for
    a follower that is a :class:`FetcherCluster` broker rather than a ``SimBroker``."""

    def __init__(self, transport: SimTransport, follower: int, leader: int) -> None:
        super().__init__(transport.process(follower), leader)  # type: ignore[arg-type]
        self.transport = transport

    def socket_timeout_ms(self) -> int:
        return self.transport.socket_timeout_ms

    def leader_replica_manager(self) -> Any:
        rm = self.transport.serving(self.leader_id)
        if rm is None:
            raise RequestTimedOutError(f"broker {self.leader_id} unreachable")
        return rm

    def send_fetch(self, request: FetchRequest, on_answer: Callable[[Any], None]) -> None:
        self.transport.carry(
            request, lambda answered: SimLeaderEndPoint.send_fetch(self, request, answered),
            on_answer, self.blocked_ms)

    def send_epoch_request(self, request: OffsetsForLeaderEpochRequest,
                           on_answer: Callable[[Any], None]) -> None:
        self.transport.carry(
            request,
            lambda answered: SimLeaderEndPoint.send_epoch_request(self, request, answered),
            on_answer, self.blocked_ms)

    # the synchronous shortcuts InProcessLeaderEndPoint offers tests, over the network
    def fetch(self, request: FetchRequest) -> FetchResponse:
        """Ask the leader with ``max_wait_ms = 0`` (answered at once) and wait for the answer;
        a failed request raises."""
        if request.max_wait_ms > 0:
            request = dataclasses.replace(request, max_wait_ms=0)
        return self._ask(self.send_fetch, request)

    def fetch_epoch_end_offsets(self, request: OffsetsForLeaderEpochRequest
                                ) -> Mapping[TopicPartition, EpochEndOffset]:
        """OffsetsForLeaderEpoch on the leader; an empty request is not sent."""
        if not request.partitions:
            return {}
        return self._ask(self.send_epoch_request, request)

    def _ask(self, send: Callable[[Any, Callable[[Any], None]], None], request: Any) -> Any:
        box: list[Any] = []
        send(request, box.append)
        if not box:  # pragma: no cover - only a parked fetch stays unanswered
            raise RequestTimedOutError(f"no answer from broker {self.leader_id}")
        if isinstance(box[0], BaseException):
            raise box[0]
        return box[0]

    def __repr__(self) -> str:
        return f"CarriedLeaderEndPoint(leader={self.leader_id}, follower={self.broker.broker_id})"


class _SettlingFetcherManager(ReplicaFetcherManager):
    def __init__(self, transport: SimTransport, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._transport = transport

    def do_work(self) -> bool:
        self._transport.settle()
        return super().do_work()


def _fetch_size(response: FetchResponse) -> int:
    """The simulator's wire size of a fetch response (``SimBroker._on_fetch``)."""
    size = 32
    for p in response.partitions:
        records = p.records
        size += 40 + (records.nbytes if isinstance(records, memoryview) else len(records))
    return size
