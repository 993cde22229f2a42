"""Injected time. Everything that reads time takes a clock; simulations use ``ManualClock``."""
from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def milliseconds(self) -> int: ...


class SystemClock:
    """Wall-clock milliseconds since the epoch."""

    def milliseconds(self) -> int:
        return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that moves only when told to (Kafka's ``MockTime``).

    ``now_ms`` is the time, a plain ``int`` attribute: code that holds this clock (the
    simulator's event loop and what it drives) reads it there, without a call. Only
    :meth:`advance`, :meth:`set` and the event loop moving the clock to its next event
    write it; it never goes back."""

    def __init__(self, start_ms: int = 1_700_000_000_000):
        self.now_ms = int(start_ms)

    def milliseconds(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> int:
        if ms < 0:
            raise ValueError("time cannot move backwards")
        self.now_ms += int(ms)
        return self.now_ms

    def set(self, now_ms: int) -> None:
        if now_ms < self.now_ms:
            raise ValueError("time cannot move backwards")
        self.now_ms = int(now_ms)
