"""The leader epoch cache: epoch → first offset of that epoch (§4.3, §4.4).

Kafka's ``LeaderEpochFileCache``. Entries have strictly increasing epochs AND strictly
increasing start offsets. New assignments are checkpointed synchronously; truncations are
checkpointed right after (Kafka schedules that write asynchronously; here it happens before the
call returns, which only makes the file fresher). A vanished partition directory is not an
error for the write after a truncation (``writeIfDirExists``).
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from typing import Any

from replica_core.storage.checkpoint import LeaderEpochCheckpointFile

__all__ = ["LeaderEpochCache", "UNDEFINED_EPOCH", "UNDEFINED_EPOCH_OFFSET"]

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    """Sorted (epoch, start_offset) entries backed by an optional ``leader-epoch-checkpoint``.

    ``latest_epoch`` — the latest cached epoch, −1 if none — is a plain attribute, kept by every
    change of the entries (the replicas read it several times per message), and so is the
    ``latest_epoch`` attribute of :attr:`mirror` when one is set (the log holding the cache)."""

    def __init__(self, checkpoint: LeaderEpochCheckpointFile | None = None,
                 entries: Iterable[tuple[int, int]] | None = None) -> None:
        """Load from ``checkpoint`` (through the assign rules, without rewriting it), or take
        ``entries`` as given (Kafka's ``withCheckpoint`` copy)."""
        self._checkpoint = checkpoint
        self._epochs: list[int] = []
        self._starts: list[int] = []
        self.latest_epoch: int = UNDEFINED_EPOCH
        self.mirror: Any = None
        source = entries if entries is not None else (
            checkpoint.read() if checkpoint is not None else ())
        for epoch, start in source:
            self._assign(epoch, start)

    # -- updates -------------------------------------------------------------------------------
    def _update_needed(self, epoch: int, start: int) -> bool:
        if not self._epochs:
            return True
        return epoch != self._epochs[-1] or start < self._starts[-1]

    def _set_latest(self, epoch: int) -> None:
        self.latest_epoch = epoch
        mirror = self.mirror
        if mirror is not None:
            mirror.latest_epoch = epoch

    def _assign(self, epoch: int, start: int) -> bool:
        if epoch < 0 or start < 0:
            raise ValueError(f"Received invalid partition leader epoch entry "
                             f"EpochEntry(epoch={epoch}, startOffset={start})")
        epochs, starts = self._epochs, self._starts
        # _update_needed, inlined
        if epochs and epoch == epochs[-1] and start >= starts[-1]:
            return False
        # Drop, from the end, every entry that would break monotonicity of epochs or offsets.
        while epochs and (epochs[-1] >= epoch or starts[-1] >= start):
            epochs.pop()
            starts.pop()
        epochs.append(epoch)
        starts.append(start)
        self._set_latest(int(epoch))
        return True

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset`` (§4.4); checkpoints if it changed.

        Needed iff the cache is empty, the epoch differs from the latest, or the start offset is
        below the latest's. Entries with epoch >= ``epoch`` or start >= ``start_offset`` are
        removed first. Negative values → ``ValueError``. Returns whether the cache changed.
        """
        epochs = self._epochs
        if epochs:
            if epoch == epochs[-1] and start_offset >= self._starts[-1] and start_offset >= 0:
                return False  # held already (what _assign answers first)
        elif epoch >= 0 and start_offset >= 0 and type(epoch) is int \
                and type(start_offset) is int:
            # the first epoch (a follower's first batch, a new leader): one entry, one write
            epochs.append(epoch)
            self._starts.append(start_offset)
            self._set_latest(epoch)
            checkpoint = self._checkpoint
            if checkpoint is not None:
                checkpoint.write([(epoch, start_offset)])
            return True
        if self._assign(int(epoch), int(start_offset)):
            self._write()
            return True
        return False

    def assign_all(self, entries: Iterable[tuple[int, int]]) -> None:
        """Assign each entry, then write the checkpoint once (if ``entries`` was non-empty)."""
        entries = list(entries)
        for epoch, start in entries:
            self._assign(int(epoch), int(start))
        if entries:
            self._write()

    def truncate_from_end(self, end_offset: int) -> None:
        """Remove entries with start offset >= ``end_offset`` (if ``end_offset >= 0``)."""
        starts = self._starts
        if end_offset >= 0 and starts and starts[-1] >= end_offset:
            cut = bisect_left(starts, end_offset)
            epochs = self._epochs
            del epochs[cut:]
            del starts[cut:]
            self._set_latest(int(epochs[-1]) if epochs else UNDEFINED_EPOCH)
            self._write_if_dir_exists()

    def truncate_from_start(self, start_offset: int) -> None:
        """Remove entries with start offset <= ``start_offset``; the last one removed comes back
        starting at ``start_offset`` ({1:0, 2:10, 3:20} at 15 → {2:15, 3:20})."""
        k = bisect_right(self._starts, start_offset)
        if k > 0:
            epoch = self._epochs[k - 1]
            self._epochs[:k] = [epoch]
            self._starts[:k] = [start_offset]
            self._write_if_dir_exists()

    def clear_and_flush(self) -> None:
        """Remove every entry and write the (empty) checkpoint."""
        self.clear()
        self._write()

    def clear(self) -> None:
        """Remove every entry without writing."""
        self._epochs.clear()
        self._starts.clear()
        self._set_latest(UNDEFINED_EPOCH)

    def _write(self) -> None:
        if self._checkpoint is not None:
            self._checkpoint.write(list(zip(self._epochs, self._starts, strict=True)))

    def _write_if_dir_exists(self) -> None:
        if self._checkpoint is not None:
            self._checkpoint.write_if_dir_exists(self.entries())

    # -- queries -------------------------------------------------------------------------------
    @property
    def checkpoint(self) -> LeaderEpochCheckpointFile | None:
        return self._checkpoint

    @property
    def is_empty(self) -> bool:
        return not self._epochs

    @property
    def non_empty(self) -> bool:
        return bool(self._epochs)

    @property
    def latest_entry(self) -> tuple[int, int] | None:
        return (self._epochs[-1], self._starts[-1]) if self._epochs else None

    @property
    def earliest_entry(self) -> tuple[int, int] | None:
        return (self._epochs[0], self._starts[0]) if self._epochs else None

    def entries(self) -> list[tuple[int, int]]:
        """All (epoch, start_offset), ascending."""
        return list(zip(self._epochs, self._starts, strict=True))

    def epoch_entry(self, epoch: int) -> tuple[int, int] | None:
        i = bisect_left(self._epochs, epoch)
        if i < len(self._epochs) and self._epochs[i] == epoch:
            return epoch, self._starts[i]
        return None

    def previous_epoch(self, epoch: int | None = None) -> int | None:
        """The largest cached epoch below ``epoch`` (default: below the latest)."""
        if epoch is None:
            if not self._epochs:
                return None
            epoch = self._epochs[-1]
        i = bisect_left(self._epochs, epoch)
        return self._epochs[i - 1] if i > 0 else None

    def previous_entry(self, epoch: int) -> tuple[int, int] | None:
        i = bisect_left(self._epochs, epoch)
        return (self._epochs[i - 1], self._starts[i - 1]) if i > 0 else None

    def next_epoch(self, epoch: int) -> int | None:
        """The smallest cached epoch above ``epoch``."""
        i = bisect_right(self._epochs, epoch)
        return self._epochs[i] if i < len(self._epochs) else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch of the last entry whose start offset is <= ``offset`` (None if none)."""
        i = bisect_right(self._starts, offset)
        return self._epochs[i - 1] if i > 0 else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetsForLeaderEpoch (§4.3).

        −1 → (−1, −1); the latest epoch → (epoch, LEO); nothing cached above it → (−1, −1);
        nothing cached at or below it → (requested, start of the first entry); otherwise
        (largest cached epoch <= requested, start of the smallest cached epoch > requested).
        """
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        epochs = self._epochs
        if epochs and epochs[-1] == requested_epoch:
            return requested_epoch, log_end_offset
        higher = bisect_right(epochs, requested_epoch)
        if higher == len(epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, self._starts[0]
        return epochs[higher - 1], self._starts[higher]

    def epoch_entries_in_range(self, start_offset: int, end_offset: int) -> list[tuple[int, int]]:
        """Entries as ``truncate_from_start(start)`` (if start >= 0) then
        ``truncate_from_end(end)`` would leave them, without changing the cache."""
        copy = LeaderEpochCache(None, self.entries())
        if start_offset >= 0:
            copy.truncate_from_start(start_offset)
        copy.truncate_from_end(end_offset)
        return copy.entries()

    def __len__(self) -> int:
        return len(self._epochs)

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self.entries()})"
