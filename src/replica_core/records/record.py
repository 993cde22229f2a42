"""The record value every reader yields (v2 batches and legacy message sets alike)."""
from __future__ import annotations

from typing import NamedTuple

__all__ = ["NO_TIMESTAMP", "Record"]

NO_TIMESTAMP = -1


class Record(NamedTuple):
    """One record: absolute offset, timestamp (-1 if none), key and value (``None`` if null),
    headers as ``(str, bytes | None)`` pairs (always empty for magic v0/v1)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
