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
    """A clock that moves only when told to (Kafka's ``MockTime``)."""

    def __init__(self, start_ms: int = 1_700_000_000_000):
        self._now = int(start_ms)

    def milliseconds(self) -> int:
        return self._now

    def advance(self, ms: int) -> int:
        if ms < 0:
            raise ValueError("time cannot move backwards")
        self._now += int(ms)
        return self._now

    def set(self, now_ms: int) -> None:
        if now_ms < self._now:
            raise ValueError("time cannot move backwards")
        self._now = int(now_ms)
