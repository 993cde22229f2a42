"""Purgatory: delayed operations keyed by partition with expiry on an injected clock (§6.8, §6.9;
Kafka's DelayedOperation / DelayedOperationPurgatory)."""
from __future__ import annotations

import pytest

from replica_core.clock import ManualClock
from replica_core.replication import DelayedOperation, Purgatory

T0 = 1_700_000_000_000


class Op(DelayedOperation):
    """Completes when ``ready`` is set; records every callback in ``log``."""

    def __init__(self, delay_ms: int, log: list, name: str = "op", ready: bool = False):
        super().__init__(delay_ms)
        self.ready = ready
        self.log = log
        self.name = name
        self.tries = 0

    def try_complete(self) -> bool:
        self.tries += 1
        return self.force_complete() if self.ready else False

    def on_complete(self) -> None:
        self.log.append((self.name, "complete"))

    def on_expiration(self) -> None:
        self.log.append((self.name, "expire"))


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def purgatory(clock) -> Purgatory[Op]:
    return Purgatory("Produce", clock)


def test_completes_at_once_without_watching(purgatory):
    log: list = []
    op = Op(1000, log, ready=True)
    assert purgatory.try_complete_else_watch(op, ["t-0"])
    assert log == [("op", "complete")] and op.is_completed
    assert (purgatory.watched, purgatory.delayed) == (0, 0)


def test_watched_under_every_key_and_delayed(purgatory):
    log: list = []
    op = Op(1000, log)
    assert not purgatory.try_complete_else_watch(op, ["t-0", "t-1"])
    assert (purgatory.watched, purgatory.delayed) == (2, 1)
    assert log == [] and not op.is_completed
    assert sorted(purgatory.keys()) == ["t-0", "t-1"]


def test_check_and_complete_completes_once_even_if_several_keys_trigger(purgatory):
    log: list = []
    op = Op(1000, log)
    purgatory.try_complete_else_watch(op, ["t-0", "t-1"])
    assert purgatory.check_and_complete("t-0") == 0
    op.ready = True
    assert purgatory.check_and_complete("t-1") == 1
    assert purgatory.check_and_complete("t-0") == 0
    assert purgatory.check_and_complete("t-1") == 0
    assert log == [("op", "complete")]
    assert (purgatory.watched, purgatory.delayed) == (0, 0)
    assert purgatory.check_and_complete("unknown") == 0


def test_expiry_on_the_injected_clock(purgatory, clock):
    log: list = []
    op = Op(500, log)
    purgatory.try_complete_else_watch(op, ["t-0"])
    assert purgatory.advance_clock(T0 + 499) == 0 and log == []
    clock.advance(500)
    assert purgatory.advance_clock() == 1  # defaults to the clock: T0 + 500 is due
    # Kafka's run(): if (forceComplete()) onExpiration() — completion first, exactly once each.
    assert log == [("op", "complete"), ("op", "expire")]
    assert purgatory.delayed == 0
    op.ready = True
    assert purgatory.check_and_complete("t-0") == 0
    assert purgatory.advance_clock(T0 + 10_000) == 0
    assert log == [("op", "complete"), ("op", "expire")]


def test_deadline_counts_from_when_it_was_watched(purgatory, clock):
    log: list = []
    clock.advance(250)
    purgatory.try_complete_else_watch(Op(500, log), ["k"])
    assert purgatory.advance_clock(T0 + 749) == 0
    assert purgatory.advance_clock(T0 + 750) == 1


def test_completed_op_never_expires(purgatory):
    log: list = []
    op = Op(100, log)
    purgatory.try_complete_else_watch(op, ["t-0"])
    op.ready = True
    purgatory.check_and_complete("t-0")
    assert purgatory.advance_clock(T0 + 1000) == 0
    assert log == [("op", "complete")]


def test_force_complete_only_once(purgatory):
    log: list = []
    op = Op(100, log)
    purgatory.try_complete_else_watch(op, ["k"])
    assert op.force_complete()
    assert not op.force_complete()
    assert purgatory.delayed == 0 and log == [("op", "complete")]


def test_expiry_order_is_deadline_then_insertion(purgatory):
    log: list = []
    for name, delay in (("b", 200), ("a1", 100), ("c", 300), ("a2", 100)):
        purgatory.try_complete_else_watch(Op(delay, log, name), [name])
    assert purgatory.advance_clock(T0 + 250) == 3
    assert [n for n, what in log if what == "expire"] == ["a1", "a2", "b"]
    assert purgatory.delayed == 1


def test_watch_is_checked_again_after_watching(purgatory):
    """Kafka's safeTryCompleteOrElse: one more try once the op is on every watch list."""
    log: list = []

    class Second(Op):
        def try_complete(self) -> bool:
            self.tries += 1
            return self.force_complete() if self.tries >= 2 else False

    op = Second(100, log)
    assert purgatory.try_complete_else_watch(op, ["k"])
    assert purgatory.delayed == 0 and log == [("op", "complete")]


def test_without_recheck_the_op_is_checked_once_then_watched(purgatory):
    """recheck=False: the check after watching is left out; the op still waits on every key."""
    log: list = []
    op = Op(100, log)
    assert not purgatory.try_complete_else_watch(op, ["k", "j"], recheck=False)
    assert op.tries == 1 and (purgatory.watched, purgatory.delayed) == (2, 1)
    op.ready = True
    assert purgatory.check_and_complete("j") == 1 and log == [("op", "complete")]
    assert purgatory.delayed == 0


def test_delay_without_watching_expires_or_completes_once(purgatory, clock):
    """try_complete_else_delay: checked once, timed, on no watch list; it completes once,
    by its owner (force_complete, which stops the timer) or by expiry."""
    log: list = []
    ready = Op(100, log, "ready", ready=True)
    assert purgatory.try_complete_else_delay(ready)
    assert (purgatory.watched, purgatory.delayed) == (0, 0) and log == [("ready", "complete")]
    a, b = Op(100, log, "a"), Op(100, log, "b")
    assert not purgatory.try_complete_else_delay(a)
    assert not purgatory.try_complete_else_delay(b)
    assert a.tries == 1 and purgatory.keys() == []
    assert (purgatory.watched, purgatory.delayed) == (0, 2)
    with pytest.raises(ValueError):
        purgatory.try_complete_else_delay(a)  # already timed here
    assert a.force_complete() and purgatory.delayed == 1
    assert purgatory.next_deadline_ms() == T0 + 100
    assert purgatory.advance_clock(T0 + 100) == 1
    assert log == [("ready", "complete"), ("a", "complete"), ("b", "complete"),
                   ("b", "expire")]
    assert purgatory.delayed == 0 and purgatory.next_deadline_ms() is None


def test_watched_counts_completed_entries_until_purged(clock):
    purgatory: Purgatory[Op] = Purgatory("Fetch", clock, purge_interval=1)
    log: list = []
    ops = [Op(1000, log, str(i)) for i in range(3)]
    for op in ops:
        purgatory.try_complete_else_watch(op, ["a", "b"])
    for op in ops:
        op.ready = True
    assert purgatory.check_and_complete("a") == 3
    assert purgatory.watched == 3  # still listed under "b" (completed, not yet purged)
    assert purgatory.delayed == 0
    purgatory.advance_clock(T0)  # 3 completed > purge_interval 1: purge
    assert purgatory.watched == 0
    assert purgatory.purge_completed() == 0


def test_cancel_for_key_drops_without_completing(purgatory):
    log: list = []
    op = Op(100, log)
    purgatory.try_complete_else_watch(op, ["k"])
    assert purgatory.cancel_for_key("k") == [op]
    assert purgatory.delayed == 0 and purgatory.watched == 0
    assert purgatory.advance_clock(T0 + 1000) == 0
    assert log == [] and not op.is_completed


def test_callbacks_may_reenter_the_purgatory(purgatory):
    """A completion that unblocks another op on the same key (as an HW move does)."""
    log: list = []
    second = Op(1000, log, "second")

    class Chained(Op):
        def on_complete(self) -> None:
            super().on_complete()
            second.ready = True
            purgatory.try_complete_else_watch(Op(1000, log, "third"), ["k"])
            purgatory.check_and_complete("k")

    first = Chained(1000, log, "first")
    purgatory.try_complete_else_watch(first, ["k"])
    purgatory.try_complete_else_watch(second, ["k"])
    first.ready = True
    assert purgatory.check_and_complete("k") >= 1
    assert [n for n, what in log if what == "complete"] == ["first", "second"]
    assert purgatory.watched == 1 and purgatory.delayed == 1  # "third" waits
    assert purgatory.advance_clock(T0 + 1000) == 1
    assert log[-2:] == [("third", "complete"), ("third", "expire")]


def test_many_early_completions_keep_counts_exact(purgatory):
    log: list = []
    ops = [Op(30_000, log, str(i)) for i in range(500)]
    for i, op in enumerate(ops):
        purgatory.try_complete_else_watch(op, [i % 7])
    for op in ops[:450]:
        op.ready = True
    assert sum(purgatory.check_and_complete(k) for k in range(7)) == 450
    assert purgatory.delayed == 50 and purgatory.watched == 50
    assert purgatory.advance_clock(T0 + 30_000) == 50
    assert purgatory.delayed == 0 and len(log) == 450 + 100


def test_rejects_empty_keys_and_double_watch(purgatory):
    with pytest.raises(ValueError):
        purgatory.try_complete_else_watch(Op(1, []), [])
    op = Op(1, [])
    purgatory.try_complete_else_watch(op, ["k"])
    with pytest.raises(ValueError):
        purgatory.try_complete_else_watch(op, ["j"])
    with pytest.raises(ValueError):
        Op(-1, [])


def test_next_deadline_skips_completed_ops(purgatory):
    assert purgatory.next_deadline_ms() is None
    log: list = []
    early, late = Op(100, log, "early"), Op(300, log, "late")
    purgatory.try_complete_else_watch(early, ["a"])
    purgatory.try_complete_else_watch(late, ["b"])
    assert purgatory.next_deadline_ms() == T0 + 100
    early.ready = True
    purgatory.check_and_complete("a")
    assert purgatory.next_deadline_ms() == T0 + 300
    purgatory.cancel_for_key("b")
    assert purgatory.next_deadline_ms() is None


def test_earliest_moves_counts_only_timers_that_become_the_first_deadline(purgatory, clock):
    """``earliest_moves`` moves when a started timer is the queue's new first deadline, and
    only then: a later deadline, a completion or an expiry leaves it (the first deadline can
    then only move later)."""
    log: list = []
    assert purgatory.earliest_moves == 0
    purgatory.try_complete_else_watch(Op(1000, log, "a"), ["t-0"])
    assert (purgatory.earliest_moves, purgatory.next_deadline_ms()) == (1, T0 + 1000)
    purgatory.try_complete_else_watch(Op(5000, log, "b"), ["t-0"])  # later: not the first
    purgatory.try_complete_else_delay(Op(1000, log, "c"))  # same deadline, started after "a"
    assert (purgatory.earliest_moves, purgatory.next_deadline_ms()) == (1, T0 + 1000)
    purgatory.try_complete_else_delay(Op(200, log, "d"))
    assert (purgatory.earliest_moves, purgatory.next_deadline_ms()) == (2, T0 + 200)
    clock.advance(1000)
    assert purgatory.advance_clock() == 3  # "d", "a", "c" expire: the first deadline is later
    assert (purgatory.earliest_moves, purgatory.next_deadline_ms()) == (2, T0 + 5000)
    purgatory.try_complete_else_delay(Op(100, log, "e"))  # T0 + 1100: before "b"
    assert (purgatory.earliest_moves, purgatory.next_deadline_ms()) == (3, T0 + 1100)


def test_watch_lists_hold_exactly_the_keys_with_ops_to_check(purgatory, clock):
    """``watch_lists`` (what the replica manager looks at before calling check_and_complete):
    a key is in it iff it has a non-empty watch list, through watching, completing, expiry,
    purging and cancelling."""
    log: list = []

    def check() -> None:
        for key, ops in purgatory.watch_lists.items():
            assert ops, key
        assert purgatory.has_watchers == bool(purgatory.watch_lists)

    a, b, c = Op(100, log, "a"), Op(200, log, "b"), Op(300, log, "c")
    purgatory.try_complete_else_watch(a, ["k1", "k2"])
    purgatory.try_complete_else_watch(b, ["k2"])
    purgatory.try_complete_else_watch(c, ["k3"])
    assert set(purgatory.watch_lists) == {"k1", "k2", "k3"}
    check()
    a.ready = True
    assert purgatory.check_and_complete("k1") == 1
    assert set(purgatory.watch_lists) == {"k2", "k3"}  # k2 still holds a (completed) and b
    check()
    assert purgatory.check_and_complete("k2") == 0
    assert purgatory.watch_lists["k2"] == [b]
    check()
    clock.advance(200)
    purgatory.advance_clock()  # b expires; its list lingers until checked or purged
    assert purgatory.purge_completed() == 1
    assert set(purgatory.watch_lists) == {"k3"}
    check()
    assert purgatory.cancel_for_key("k3") == [c]
    assert purgatory.watch_lists == {}
    check()
    assert purgatory.check_and_complete("k3") == 0
