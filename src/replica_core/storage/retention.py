"""Which old segments retention deletes: the pure rules of Kafka's ``UnifiedLog.deleteOldSegments``.

A log's retention check (``LogManager.cleanupLogs``, every ``log.retention.check.interval.ms``)
applies three rules in this order, each deleting a prefix of the segments, oldest first:

1. log start offset: a segment whose NEXT segment starts at or below the log start offset holds
   nothing readable any more (applied whatever the cleanup policy);
2. ``retention.bytes`` (``delete`` policy, ≥ 0): while the log is larger than ``retention.bytes``,
   drop the oldest segments whose sizes still fit in the excess;
3. ``retention.ms`` (``delete`` policy, ≥ 0): a segment whose largest timestamp is more than
   ``retention.ms`` before the check's start time.

For all three a segment is a candidate only while the high watermark has reached the next
segment's base offset (the log end offset for the last segment), so the log start offset never
passes the high watermark, and the walk stops at the first segment that is not deletable. The last
segment may be deletable too; it is then rolled first, because a log always keeps one segment,
and an empty last segment is never deletable. (Tiered storage's extra conditions are not
modelled.)
"""
from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import Protocol

__all__ = [
    "DeletionReason",
    "RetentionSegment",
    "Predicate",
    "deletable_segments",
    "log_start_offset_breached",
    "retention_size_breached",
    "retention_ms_breached",
]


class DeletionReason(enum.Enum):
    """Why a segment was deleted (Kafka's ``SegmentDeletionReason`` kinds)."""

    LOG_START_OFFSET = "log start offset breach"
    RETENTION_SIZE = "retention size breach"
    RETENTION_MS = "retention time breach"


class RetentionSegment(Protocol):
    """What the rules read of a segment (``LogSegment`` has it)."""

    @property
    def base_offset(self) -> int: ...

    @property
    def size(self) -> int: ...

    def largest_timestamp(self) -> int: ...


Predicate = Callable[[RetentionSegment, "RetentionSegment | None"], bool]
"""``(segment, next segment or None) -> deletable``."""


def deletable_segments(segments: Sequence[RetentionSegment], log_end_offset: int,
                       high_watermark: int, predicate: Predicate) -> list[RetentionSegment]:
    """The oldest segments, in order, up to the first one that is not deletable
    (``UnifiedLog.deletableSegments``): a segment is deletable when the high watermark has
    reached its upper bound (the next segment's base offset, or the log end offset) and
    ``predicate`` holds — evaluated only then, as the size rule counts what it accepts — and it
    is not an empty last segment."""
    out: list[RetentionSegment] = []
    n = len(segments)
    for i, seg in enumerate(segments):
        nxt = segments[i + 1] if i + 1 < n else None
        upper = nxt.base_offset if nxt is not None else log_end_offset
        if not (high_watermark >= upper and predicate(seg, nxt)):
            break
        if nxt is None and seg.size == 0:
            break
        out.append(seg)
    return out


def log_start_offset_breached(log_start_offset: int) -> Predicate:
    """Rule 1: the next segment starts at or below the log start offset."""
    def breached(seg: RetentionSegment, nxt: RetentionSegment | None) -> bool:
        return nxt is not None and nxt.base_offset <= log_start_offset
    return breached


def retention_size_breached(log_size: int, retention_bytes: int) -> Predicate | None:
    """Rule 2, or None when it cannot delete anything (``retention.bytes`` < 0, or the log is
    smaller than it). Stateful: each accepted segment's size comes off the excess."""
    if retention_bytes < 0 or log_size < retention_bytes:
        return None
    excess = log_size - retention_bytes

    def breached(seg: RetentionSegment, nxt: RetentionSegment | None) -> bool:
        nonlocal excess
        if excess - seg.size >= 0:
            excess -= seg.size
            return True
        return False
    return breached


def retention_ms_breached(now_ms: int, retention_ms: int) -> Predicate | None:
    """Rule 3, or None for unlimited (``retention.ms`` < 0): the segment's largest timestamp is
    more than ``retention_ms`` before ``now_ms``. A segment none of whose batches carries a
    timestamp (magic v0) is dated by its file's modification time in Kafka; segments here have
    no such time, so it is kept (and the walk stops there)."""
    if retention_ms < 0:
        return None

    def breached(seg: RetentionSegment, nxt: RetentionSegment | None) -> bool:
        largest = seg.largest_timestamp()
        return largest >= 0 and now_ms - largest > retention_ms
    return breached
