"""Delayed operations keyed by partition, expired on an injected clock (§6.8, §6.9).

Kafka's ``DelayedOperation`` / ``DelayedOperationPurgatory`` (``DelayedOperation.scala``) as a
single-threaded step function: whoever drives the broker calls :meth:`Purgatory.advance_clock`
(Kafka's expiration reaper does it every 200 ms on a thread).

Expiry queue: a binary heap of ``(deadline_ms, sequence, op)`` with lazy deletion, not Kafka's
hierarchical timing wheel (``TimingWheel``/``SystemTimer``). The wheel exists to make insert and
cancel O(1) under heavy multi-threaded churn; here there is one thread, ``heapq`` runs in C, so
an insert costs O(log n) in native code while a wheel's bucket lists and overflow-wheel cascades
would run as Python bytecode. Completed ops are not removed from the heap at once (that would be
O(n)); they are skipped when popped, and the heap is rebuilt when they outnumber live entries,
so memory stays O(live). The heap also expires at exact millisecond deadlines, in
(deadline, insertion) order, which keeps simulations deterministic; the wheel's 1 ms tick gives
the same deadlines but an unspecified order within a bucket.

Completion rules (Kafka's): an op completes exactly once, through :meth:`DelayedOperation.
force_complete` (a flag checked and set), either from its own ``try_complete`` when its condition
holds or on expiry. On expiry Kafka's ``run()`` is ``if (forceComplete()) onExpiration()``, so
``on_complete`` runs first and ``on_expiration`` after it. Watch lists are purged of completed
ops lazily, as Kafka's: when a key is checked, and in bulk from ``advance_clock`` once more than
``purge_interval`` completed ops may linger (``watched`` counts them until then).
"""
from __future__ import annotations

import heapq
from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

from replica_core.clock import Clock


class DelayedOperation:
    """An operation that waits at most ``delay_ms`` for its condition (Kafka's DelayedOperation).

    Subclasses implement :meth:`try_complete` (check the condition; if it holds, return
    ``self.force_complete()``), :meth:`on_complete` (build the response; called exactly once) and
    :meth:`on_expiration` (metrics; called after ``on_complete`` when the op timed out).
    """

    def __init__(self, delay_ms: int) -> None:
        if delay_ms < 0:
            raise ValueError("delay_ms must be non-negative")
        self.delay_ms = int(delay_ms)
        self._completed = False
        self._timer: Purgatory[DelayedOperation] | None = None

    @property
    def is_completed(self) -> bool:
        return self._completed

    def force_complete(self) -> bool:
        """Complete now unless already completed: cancel the timer, call ``on_complete``.

        True iff this call did the completion (only the first caller does).
        """
        if self._completed:
            return False
        self._completed = True
        timer, self._timer = self._timer, None
        if timer is not None:
            timer._cancelled()
        self.on_complete()
        return True

    def try_complete(self) -> bool:
        """Complete (via :meth:`force_complete`) if the condition holds; True iff completed here."""
        raise NotImplementedError

    def on_complete(self) -> None:
        """The completion logic, run exactly once."""
        raise NotImplementedError

    def on_expiration(self) -> None:
        """Called after :meth:`on_complete` when the op completed by timing out."""


T = TypeVar("T", bound=DelayedOperation)


class Purgatory(Generic[T]):
    """Delayed operations watched under keys (topic-partitions) with expiry on ``clock``.

    ``watched`` is Kafka's PurgatorySize (watch-list entries, completed ones included until
    purged); ``delayed`` is NumDelayedOperations (ops waiting in the expiry queue).
    """

    def __init__(self, name: str, clock: Clock, *, purge_interval: int = 1000) -> None:
        self.name = name
        self.clock = clock
        self.purge_interval = int(purge_interval)
        self.watch_lists: dict[Hashable, list[T]] = {}
        """The watch list of each key with one (never empty: an emptied list leaves): read-only
        outside, where a key not in it means :meth:`check_and_complete` would find nothing."""
        self._heap: list[tuple[int, int, T]] = []
        self._seq = 0
        self._delayed = 0
        self._estimated_total = 0  # Kafka's estimatedTotalOperations
        self.earliest_moves = 0
        """How many timer starts so far became the earliest entry of the expiry queue: the only
        way the queue's first deadline (what :meth:`next_deadline_ms` and an event-driven
        driver read) moves earlier. While it stands still that deadline can only move later."""

    # ---- counts ------------------------------------------------------------------------------
    @property
    def watched(self) -> int:
        return sum(len(ops) for ops in self.watch_lists.values())

    @property
    def delayed(self) -> int:
        return self._delayed

    @property
    def has_watchers(self) -> bool:
        """Some key has a watch list (:meth:`check_and_complete` of any key may do something);
        False means every such call would find nothing."""
        return bool(self.watch_lists)

    def next_deadline_ms(self) -> int | None:
        """Earliest deadline of a pending op (None if none): when ``advance_clock`` next has work.

        Drops completed/cancelled entries from the head of the heap first, so the answer is exact.
        """
        heap = self._heap
        while heap and heap[0][2]._timer is not self:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def keys(self) -> list[Hashable]:
        """Keys with a non-empty watch list."""
        return list(self.watch_lists)

    # ---- operations --------------------------------------------------------------------------
    def try_complete_else_watch(self, op: T, keys: Iterable[Hashable], *,
                                recheck: bool = True) -> bool:
        """Complete ``op`` now if it can; else watch it under every key and start its timer.

        True iff it completed in this call (DelayedOperationPurgatory.tryCompleteElseWatch).
        ``recheck=False`` leaves out the second check after watching: for an op whose
        ``try_complete`` changes no state but its own, nothing can have changed since the
        first check, so the second would answer the same.
        """
        keys = list(keys)
        if not keys:
            raise ValueError("the watch key list can't be empty")
        if op._timer is not None:
            raise ValueError("operation is already in a purgatory")
        if op.try_complete():
            return True
        if op._completed:  # completed by someone else inside try_complete
            return False
        watchers = self.watch_lists
        for key in keys:
            ops = watchers.get(key)
            if ops is None:
                watchers[key] = [op]
            else:
                ops.append(op)
        self._estimated_total += 1
        # Kafka checks once more after watching, against events racing with the watch; with one
        # thread the only such event is a try_complete that mutated shared state, so keep it.
        if recheck and op.try_complete():
            return True
        if not op._completed:
            self._start_timer(op)
        return False

    def try_complete_else_delay(self, op: T) -> bool:
        """Complete ``op`` now if it can; else start its timer without watching it under any
        key. For an op its owner finds and checks itself (a parked session fetch, which the
        replica manager checks when a partition of its session changes): a watch list that
        nobody checks would only hold it until purged. ``try_complete`` is called once, as
        :meth:`try_complete_else_watch` with ``recheck=False``. True iff it completed here."""
        if op._timer is not None:
            raise ValueError("operation is already in a purgatory")
        if op.try_complete():
            return True
        if not op._completed:
            self._start_timer(op)
        return False

    def _start_timer(self, op: T) -> None:
        """``op`` waits in this purgatory's timer heap until its ``delay_ms`` is over."""
        op._timer = self  # type: ignore[assignment]
        self._delayed += 1
        self._seq += 1
        entry = (self.clock.milliseconds() + op.delay_ms, self._seq, op)
        heap = self._heap
        heapq.heappush(heap, entry)
        if heap[0] is entry:
            self.earliest_moves += 1

    def check_and_complete(self, key: Hashable) -> int:
        """Try to complete the ops watched under ``key``; how many completed here."""
        ops = self.watch_lists.get(key)
        if not ops:
            return 0
        completed = 0
        watchers = self.watch_lists
        if len(ops) == 1:  # the common case: one op watches the key
            op = ops[0]
            if not op._completed and op.try_complete():
                completed = 1
        else:
            # Completion callbacks may watch new ops under this key: walk a snapshot, then keep
            # what is still pending plus anything appended meanwhile.
            for op in list(ops):
                if not op._completed and op.try_complete():
                    completed += 1
        current = watchers.get(key)
        if current is not None:
            if len(current) == 1:
                if current[0]._completed:
                    del watchers[key]
                return completed  # else it stays as it is
            pending = [op for op in current if not op._completed]
            if pending:
                watchers[key] = pending
            else:
                del watchers[key]
        return completed

    def cancel_for_key(self, key: Hashable) -> list[T]:
        """Stop watching ``key`` (Kafka's cancelForKey): its ops leave the watch list and the
        expiry queue without being completed. Returns them."""
        ops = self.watch_lists.pop(key, [])
        for op in ops:
            if op._timer is self:
                op._timer = None
                self._cancelled()
        return ops

    def advance_clock(self, now_ms: int | None = None) -> int:
        """Expire every pending op whose deadline ≤ ``now_ms`` (default: the clock); how many.

        Each expired op runs ``on_complete`` then ``on_expiration`` (Kafka's ``run()``).
        """
        now = self.clock.milliseconds() if now_ms is None else int(now_ms)
        expired = 0
        # Re-read self._heap each time: completing an op may rebuild it.
        while self._heap and self._heap[0][0] <= now:
            _, _, op = heapq.heappop(self._heap)
            if op._timer is not self:
                continue  # completed or cancelled earlier
            if op.force_complete():
                expired += 1
                op.on_expiration()
        if self._estimated_total - self._delayed > self.purge_interval:
            self._estimated_total = self._delayed
            self.purge_completed()
        return expired

    def purge_completed(self) -> int:
        """Drop completed ops from every watch list (Kafka's purgeCompleted); how many entries."""
        purged = 0
        watchers = self.watch_lists
        for key, ops in list(watchers.items()):
            pending = [op for op in ops if not op._completed]
            dropped = len(ops) - len(pending)
            if not pending:
                del watchers[key]
            elif dropped:  # a list with nothing completed stays as it is
                watchers[key] = pending
            purged += dropped
        return purged

    def _cancelled(self) -> None:
        self._delayed -= 1
        # Lazy deletion: rebuild once dead heap entries outnumber live ones.
        if len(self._heap) > 64 and len(self._heap) > 2 * self._delayed:
            self._heap = [e for e in self._heap if e[2]._timer is self]
            heapq.heapify(self._heap)
