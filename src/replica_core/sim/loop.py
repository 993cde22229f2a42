"""A deterministic discrete-event loop: one injected clock, one seeded generator.

Events at the same millisecond run in the order they were scheduled (a sequence number breaks
ties), so a seed and a scenario fully determine a run (TigerBeetle's VOPR, FoundationDB's
simulation). Nothing here reads the wall clock.

Timers that share one fixed delay and are mostly cancelled (request timeouts) can wait in a
FIFO lane of that delay (:meth:`EventLoop.call_later_fifo`) with only the lane's earliest entry
in the heap: the lane's entries are already in (time, sequence) order, so they run exactly when
and in the order they would from the heap, and the heap every other event goes through stays
small.
"""
from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from replica_core.clock import ManualClock

_push = heapq.heappush
_pop = heapq.heappop


class Timer:
    """A handle to a scheduled event; ``cancel()`` makes it a no-op."""

    __slots__ = ("at_ms", "cancelled")

    def __init__(self, at_ms: int):
        self.at_ms = at_ms
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


_UNCANCELLED = Timer(0)
"""The timer slot of the events :meth:`EventLoop.post_at` schedules (never cancelled)."""


class _Lane:
    """The timers of one fixed delay, in (time, sequence) order: one of them (the earliest not
    known to be cancelled) is in the loop's heap when ``queued``; ``waiting`` are the others."""

    __slots__ = ("waiting", "queued")

    def __init__(self) -> None:
        self.waiting: deque[tuple] = deque()
        self.queued = False


def _run_lane_entry(loop: EventLoop, lane: _Lane, fn: Callable[..., Any], args: tuple) -> None:
    """A lane's timer is due: the lane's next timer takes its place in the heap, then it runs."""
    loop._promote(lane)  # noqa: SLF001
    fn(*args)


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
        """Heap of (time, sequence, timer, fn, args); a lane's entry has its lane sixth."""
        self._seq = 0
        self._lanes: dict[int, _Lane] = {}
        self.events_run = 0

    @property
    def now(self) -> int:
        return self.clock.now_ms  # the loop owns this clock; the hottest read

    @property
    def elapsed_ms(self) -> int:
        return self.now - self.start_ms

    def spawn_rng(self) -> np.random.Generator:
        """An independent generator derived deterministically from the seed."""
        return np.random.default_rng(self.seed_sequence.spawn(1)[0])

    def call_at(self, at_ms: int, fn: Callable[..., Any], *args: Any) -> Timer:
        if at_ms.__class__ is not int:
            at_ms = int(at_ms)
        now = self.clock.now_ms
        if at_ms < now:
            at_ms = now
        timer = Timer(at_ms)
        seq = self._seq
        self._seq = seq + 1
        _push(self._queue, (at_ms, seq, timer, fn, args))
        return timer

    def post_at(self, at_ms: int, fn: Callable[..., Any], *args: Any) -> None:
        """:meth:`call_at` for an event nobody cancels: no :class:`Timer` is made for it."""
        if at_ms.__class__ is not int:
            at_ms = int(at_ms)
        now = self.clock.now_ms
        if at_ms < now:
            at_ms = now
        seq = self._seq
        self._seq = seq + 1
        _push(self._queue, (at_ms, seq, _UNCANCELLED, fn, args))

    def call_later(self, delay_ms: int, fn: Callable[..., Any], *args: Any) -> Timer:
        if delay_ms.__class__ is not int:
            delay_ms = int(delay_ms)
        at_ms = self.clock.now_ms + (delay_ms if delay_ms > 0 else 0)
        timer = Timer(at_ms)
        seq = self._seq
        self._seq = seq + 1
        _push(self._queue, (at_ms, seq, timer, fn, args))
        return timer

    def call_later_fifo(self, delay_ms: int, fn: Callable[..., Any], *args: Any) -> Timer:
        """:meth:`call_later` for a timer of a delay many timers share and most cancel (request
        timeouts): it waits in that delay's lane, behind the lane's earlier timers, and runs
        exactly where :meth:`call_later` would have run it."""
        timer = Timer(0)
        self.start_fifo_timer(timer, delay_ms, fn, *args)
        return timer

    def start_fifo_timer(self, timer: Timer, delay_ms: int, fn: Callable[..., Any],
                         *args: Any) -> None:
        """:meth:`call_later_fifo` with a timer the caller made: an object that is its own
        timer (a :class:`Timer` subclass, as a network request in flight) costs no second
        object. ``timer`` must not be scheduled already; its ``at_ms`` is set here."""
        if delay_ms.__class__ is not int:
            delay_ms = int(delay_ms)
        if delay_ms < 0:
            delay_ms = 0
        at_ms = self.clock.now_ms + delay_ms
        timer.at_ms = at_ms
        seq = self._seq
        self._seq = seq + 1
        lane = self._lanes.get(delay_ms)
        if lane is None:
            lane = self._lanes[delay_ms] = _Lane()
        entry = (at_ms, seq, timer, _run_lane_entry, (self, lane, fn, args), lane)
        if lane.queued:
            lane.waiting.append(entry)
        else:
            lane.queued = True
            _push(self._queue, entry)

    def _promote(self, lane: _Lane) -> None:
        """The lane's entry left the heap: its next timer not yet cancelled takes its place."""
        waiting = lane.waiting
        while waiting:
            entry = waiting.popleft()
            if not entry[2].cancelled:
                _push(self._queue, entry)
                return
        lane.queued = False

    def _drop_head(self) -> None:
        """Remove the heap's head (a cancelled timer), keeping its lane's place in the heap."""
        head = _pop(self._queue)
        if len(head) > 5:
            self._promote(head[5])

    def next_event_ms(self) -> int | None:
        while self._queue and self._queue[0][2].cancelled:
            self._drop_head()
        return self._queue[0][0] if self._queue else None

    def step(self) -> bool:
        """Run the next event (moving the clock to it). False when nothing is scheduled."""
        while self._queue:
            if self._queue[0][2].cancelled:
                self._drop_head()
                continue
            at_ms, _, _, fn, args = _pop(self._queue)[:5]
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
        pop = _pop
        clock = self.clock
        while queue:
            head = queue[0]
            if head[2].cancelled:
                self._drop_head()
                continue
            at_ms = head[0]
            if at_ms > end_ms:
                break
            pop(queue)
            if at_ms > clock.now_ms:
                clock.now_ms = at_ms  # ManualClock.set: an int, later than now
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
