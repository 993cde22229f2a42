"""A fetch request's incremental-session coordinates (KIP-227): session id and epoch.

Kafka: ``org.apache.kafka.common.requests.FetchMetadata``. Epoch 0 (INITIAL) asks the leader to
create a session, -1 (FINAL) to close any session and create none; both mark a *full* request
that lists every partition. Epochs from 1 up mark *incremental* requests within a session.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from replica_core._slot_init import slot_init

__all__ = ["FINAL_EPOCH", "INITIAL_EPOCH", "INVALID_SESSION_ID", "FetchMetadata", "next_epoch"]

INVALID_SESSION_ID = 0
"""The session id of a client with no session (FetchMetadata.INVALID_SESSION_ID)."""

INITIAL_EPOCH = 0
"""The first epoch: create (or recreate) a session (FetchMetadata.INITIAL_EPOCH)."""

FINAL_EPOCH = -1
"""Close any existing session and do not create one (FetchMetadata.FINAL_EPOCH)."""

_INT32_MAX = 2**31 - 1


def next_epoch(prev: int) -> int:
    """The epoch after ``prev`` (FetchMetadata.nextEpoch): FINAL stays FINAL (any negative
    epoch maps to it), Java's Integer.MAX_VALUE wraps to 1 (never back to INITIAL), else +1."""
    if prev < 0:
        return FINAL_EPOCH
    if prev == _INT32_MAX:
        return 1
    return prev + 1


@slot_init
@dataclass(frozen=True, slots=True)
class FetchMetadata:
    """(session id, epoch) of the next fetch request (Kafka's FetchMetadata value class)."""

    session_id: int
    epoch: int
    is_full: bool = field(init=False, repr=False, compare=False)
    """A full request, listing every partition: epoch INITIAL or FINAL (isFull). Set from the
    epoch at construction (read on every fetch built and answered)."""

    INITIAL: ClassVar[FetchMetadata]
    """(INVALID_SESSION_ID, INITIAL_EPOCH): a new FetchSessionHandler's first request."""
    LEGACY: ClassVar[FetchMetadata]
    """(INVALID_SESSION_ID, FINAL_EPOCH): implied by pre-KIP-227 requests without metadata."""

    def __post_init__(self) -> None:
        epoch = self.epoch
        _set_is_full(self, epoch == INITIAL_EPOCH or epoch == FINAL_EPOCH)

    def next_close_existing(self) -> FetchMetadata:
        """Close this session and create none: same id, FINAL_EPOCH (nextCloseExisting)."""
        return FetchMetadata(self.session_id, FINAL_EPOCH)

    def next_close_existing_attempt_new(self) -> FetchMetadata:
        """Close this session and try to create a new one: same id, INITIAL_EPOCH
        (nextCloseExistingAttemptNew; before KAFKA-7109 Kafka named this nextCloseExisting)."""
        return FetchMetadata(self.session_id, INITIAL_EPOCH)

    def next_incremental(self) -> FetchMetadata:
        """The next request in this session: same id, next_epoch(epoch) (nextIncremental)."""
        return FetchMetadata(self.session_id, next_epoch(self.epoch))

    @classmethod
    def new_incremental(cls, session_id: int) -> FetchMetadata:
        """The first incremental request of a session the leader just created: epoch
        next_epoch(INITIAL_EPOCH) = 1 (newIncremental)."""
        return cls(session_id, next_epoch(INITIAL_EPOCH))

    def __str__(self) -> str:
        sid = "INVALID" if self.session_id == INVALID_SESSION_ID else str(self.session_id)
        if self.epoch == INITIAL_EPOCH:
            epoch = "INITIAL"
        elif self.epoch == FINAL_EPOCH:
            epoch = "FINAL"
        else:
            epoch = str(self.epoch)
        return f"(sessionId={sid}, epoch={epoch})"


_set_is_full = FetchMetadata.__dict__["is_full"].__set__  # the slot's writer (the class is frozen)
FetchMetadata.INITIAL = FetchMetadata(INVALID_SESSION_ID, INITIAL_EPOCH)
FetchMetadata.LEGACY = FetchMetadata(INVALID_SESSION_ID, FINAL_EPOCH)
