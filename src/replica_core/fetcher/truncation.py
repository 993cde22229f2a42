"""Where a follower truncates, given the leader's answer for its latest epoch
(``AbstractFetcherThread.getOffsetTruncationState``; KAFKA_SEMANTICS §4.5, KIP-101, KIP-279).

Pure: the caller supplies the follower's log end offset and its own ``end_offset_for``.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class OffsetTruncationState(NamedTuple):
    """Truncate to ``offset``; ``complete`` is False when another epoch round must follow."""

    offset: int
    complete: bool


def offset_truncation_state(
    leader_epoch: int,
    leader_end_offset: int,
    follower_log_end_offset: int,
    current_fetch_offset: int,
    follower_end_offset_for: Callable[[int], tuple[int, int] | None],
) -> OffsetTruncationState:
    """The truncation point for one partition.

    * Leader end offset undefined → truncate to the current fetch offset (the high watermark the
      follower started from): the only HW truncation left in modern Kafka.
    * Leader epoch undefined (pre-KIP-279 leader) → ``min(leader end, follower LEO)``.
    * Otherwise ask the follower's own cache for the leader's epoch: if the follower never had
      that epoch (its answer names a different, smaller epoch) truncate to the end of that smaller
      epoch and go another round (multi-round, KIP-279); if it had it, truncate to the smaller
      of both ends; without a cache fall back to ``min(leader end, follower LEO)``.
    ``follower_end_offset_for(epoch)`` returns ``(epoch, end_offset)`` or ``None`` (no cache).
    """
    leo = follower_log_end_offset
    if leader_end_offset == UNDEFINED_EPOCH_OFFSET:
        return OffsetTruncationState(current_fetch_offset, True)
    if leader_epoch == UNDEFINED_EPOCH:
        return OffsetTruncationState(min(leader_end_offset, leo), True)
    local = follower_end_offset_for(leader_epoch)
    if local is None or local[1] == UNDEFINED_EPOCH_OFFSET:
        # No cache, or the follower tracks no epoch at or below the leader's (UnifiedLog's
        # endOffsetForEpoch answers None for an undefined offset).
        return OffsetTruncationState(min(leader_end_offset, leo), True)
    follower_epoch, follower_end = local
    if follower_epoch != leader_epoch:
        return OffsetTruncationState(min(follower_end, leo), False)
    return OffsetTruncationState(min(follower_end, leader_end_offset, leo), True)
