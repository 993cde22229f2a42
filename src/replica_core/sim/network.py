"""The simulator's in-process transport: request/response between nodes with per-link latency
and bandwidth, isolation, partitions and message loss, all on the event loop's clock.

A request that is lost (link down, dropped) is answered with a timeout error after
``timeout_ms``, as a Kafka client's ``request.timeout.ms`` would; a response that arrives after
its request timed out is discarded.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from replica_core.sim.loop import EventLoop

Handler = Callable[[int, Any, Callable[[Any, int], None]], None]


class RequestTimeout(Exception):
    """The request or its response was lost, or the peer did not answer in time."""


@dataclass
class Link:
    latency_ms: float = 1.0
    bandwidth_bytes_per_ms: float = 125_000.0  # 1 Gbit/s
    loss_rate: float = 0.0
    busy_until_ms: float = 0.0


class Network:
    """Nodes by integer id; node ``-1`` is conventionally the controller, clients use ids ≥ 1000."""

    def __init__(self, loop: EventLoop, *, latency_ms: float = 1.0,
                 bandwidth_bytes_per_ms: float = 125_000.0):
        self.loop = loop
        self.rng = loop.spawn_rng()
        self.default_latency_ms = latency_ms
        self.default_bandwidth = bandwidth_bytes_per_ms
        self._handlers: dict[int, Handler] = {}
        self._links: dict[tuple[int, int], Link] = {}
        self._down: set[int] = set()
        self._cut: set[frozenset[int]] = set()
        self.messages_sent = 0
        self.messages_lost = 0

    # --- topology ----------------------------------------------------------------------------
    def register(self, node: int, handler: Handler) -> None:
        self._handlers[node] = handler

    def link(self, src: int, dst: int) -> Link:
        key = (src, dst)
        if key not in self._links:
            self._links[key] = Link(self.default_latency_ms, self.default_bandwidth)
        return self._links[key]

    def isolate(self, node: int) -> None:
        """Cut every link to and from ``node`` (it keeps running)."""
        self._down.add(node)

    def partition(self, side_a: set[int], side_b: set[int]) -> None:
        for a in side_a:
            for b in side_b:
                self._cut.add(frozenset((a, b)))

    def heal(self) -> None:
        self._down.clear()
        self._cut.clear()

    def reachable(self, src: int, dst: int) -> bool:
        if self._down and (src in self._down or dst in self._down):
            return False
        return not self._cut or frozenset((src, dst)) not in self._cut

    def round_trip_ms(self, a: int, b: int) -> int:
        """Latency from ``a`` to ``b`` and back, whole ms (a small request and its answer)."""
        return int(round(self.link(a, b).latency_ms + self.link(b, a).latency_ms))

    # --- delivery ----------------------------------------------------------------------------
    def _transit_ms(self, src: int, dst: int, size: int) -> float | None:
        """Arrival delay, or None if the message is lost."""
        if not self.reachable(src, dst):
            return None
        link = self.link(src, dst)
        if link.loss_rate > 0.0 and self.rng.random() < link.loss_rate:
            return None
        now = self.loop.now
        start = max(float(now), link.busy_until_ms)
        done = start + size / link.bandwidth_bytes_per_ms
        link.busy_until_ms = done
        return done - now + link.latency_ms

    def send(self, src: int, dst: int, message: Any, size: int, deliver: Callable[[Any], None]) -> bool:
        """One-way message; False if it was lost."""
        self.messages_sent += 1
        delay = self._transit_ms(src, dst, size)
        if delay is None:
            self.messages_lost += 1
            return False
        self.loop.call_later(int(round(delay)), deliver, message)
        return True

    def request(
        self,
        src: int,
        dst: int,
        message: Any,
        size: int,
        on_response: Callable[[Any | RequestTimeout], None],
        timeout_ms: int = 30_000,
    ) -> None:
        """Send ``message`` to ``dst``'s handler; ``on_response`` gets the answer or a timeout."""
        state = {"done": False}

        def finish(result: Any) -> None:
            if not state["done"]:
                state["done"] = True
                timer.cancel()
                on_response(result)

        def respond(response: Any, response_size: int) -> None:
            self.send(dst, src, response, response_size, finish)

        def arrive(msg: Any) -> None:
            handler = self._handlers.get(dst)
            if handler is None or not self.reachable(src, dst):
                return
            handler(src, msg, respond)

        timer = self.loop.call_later(timeout_ms, finish, RequestTimeout(f"{src}->{dst} timed out"))
        self.send(src, dst, message, size, arrive)
