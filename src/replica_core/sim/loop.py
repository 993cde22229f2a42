"""A deterministic discrete-event loop: one injected clock, one seeded generator.

Events at the same millisecond run in the order they were scheduled (a sequence number breaks
ties), so a seed and a scenario fully determine a run (TigerBeetle's VOPR, FoundationDB's
simulation). Nothing here reads the wall clock.
"""
from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

import numpy as np

from replica_core.clock import ManualClock


class Timer:
    """A handle to a scheduled event; ``cancel()`` makes it a no-op."""

    __slots__ = ("at_ms", "cancelled")

    def __init__(self, at_ms: int):
        self.at_ms = at_ms
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class EventLoop:
    """Runs callbacks in simulated time order.

    ``rng`` is a ``numpy.random.Generator`` seeded from ``seed``; every random choice in a run
    must come from it (or from generators spawned from ``seed_sequence``).
    """

    def __init__(self, seed: int, *, start_ms: int = 1_700_000_000_000):
        self.clock = ManualClock(start_ms)
        self.start_ms = start_ms
        self.seed_sequence = np.random.SeedSequence(seed)
        self.rng = np.random.default_rng(self.seed_sequence.spawn(1)[0])
        self._queue: list[tuple[int, int, Timer, Callable[..., Any], tuple]] = []
        self._seq = 0
        self.events_run = 0

    @property
    def now(self) -> int:
        return self.clock._now  # noqa: SLF001 - the loop owns this clock; the hottest read

    @property
    def elapsed_ms(self) -> int:
        return self.now - self.start_ms

    def spawn_rng(self) -> np.random.Generator:
        """An independent generator derived deterministically from the seed."""
        return np.random.default_rng(self.seed_sequence.spawn(1)[0])

    def call_at(self, at_ms: int, fn: Callable[..., Any], *args: Any) -> Timer:
        at_ms = int(at_ms)
        now = self.clock._now  # noqa: SLF001
        if at_ms < now:
            at_ms = now
        timer = Timer(at_ms)
        heapq.heappush(self._queue, (at_ms, self._seq, timer, fn, args))
        self._seq += 1
        return timer

    def call_later(self, delay_ms: int, fn: Callable[..., Any], *args: Any) -> Timer:
        delay_ms = int(delay_ms)
        return self.call_at(self.clock._now + (delay_ms if delay_ms > 0 else 0), fn, *args)  # noqa: SLF001

    def next_event_ms(self) -> int | None:
        while self._queue and self._queue[0][2].cancelled:
            heapq.heappop(self._queue)
        return self._queue[0][0] if self._queue else None

    def step(self) -> bool:
        """Run the next event (moving the clock to it). False when nothing is scheduled."""
        while self._queue:
            at_ms, _, timer, fn, args = heapq.heappop(self._queue)
            if timer.cancelled:
                continue
            if at_ms > self.now:
                self.clock.set(at_ms)
            self.events_run += 1
            fn(*args)
            return True
        return False

    def run_until_time(self, end_ms: int) -> None:
        """Run every event due at or before ``end_ms``; the clock ends at ``end_ms``.

        The same events in the same order as ``step()`` repeated, with one heap look per event.
        """
        queue = self._queue
        pop = heapq.heappop
        clock = self.clock
        while queue:
            head = queue[0]
            if head[2].cancelled:
                pop(queue)
                continue
            at_ms = head[0]
            if at_ms > end_ms:
                break
            pop(queue)
            if at_ms > clock._now:  # noqa: SLF001
                clock.set(at_ms)
            self.events_run += 1
            head[3](*head[4])
        if end_ms > self.now:
            clock.set(end_ms)

    def advance(self, ms: int) -> None:
        self.run_until_time(self.now + int(ms))

    def run_until(self, predicate: Callable[[], bool], max_ms: int) -> bool:
        """Step until ``predicate()`` holds (True) or ``max_ms`` of simulated time pass (False)."""
        deadline = self.now + int(max_ms)
        while not predicate():
            nxt = self.next_event_ms()
            if nxt is None or nxt > deadline:
                if deadline > self.now:
                    self.clock.set(deadline)
                return predicate()
            self.step()
        return True
