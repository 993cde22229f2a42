"""The simulator's event loop: time order, tie order, cancellation, determinism."""
import pytest

from replica_core.sim.loop import EventLoop


def test_time_then_schedule_order():
    loop = EventLoop(seed=1)
    seen = []
    t0 = loop.now
    loop.call_later(10, seen.append, "b")
    loop.call_later(5, seen.append, "a")
    loop.call_later(10, seen.append, "c")
    loop.advance(20)
    assert seen == ["a", "b", "c"]
    assert loop.now == t0 + 20


def test_cancel_and_run_until():
    loop = EventLoop(seed=1)
    seen = []
    timer = loop.call_later(5, seen.append, "x")
    timer.cancel()
    loop.call_later(7, seen.append, "y")
    assert loop.run_until(lambda: "y" in seen, max_ms=100)
    assert seen == ["y"]
    assert not loop.run_until(lambda: False, max_ms=50)
    assert loop.elapsed_ms == 57


def test_same_seed_same_draws():
    a, b = EventLoop(seed=42), EventLoop(seed=42)
    assert list(a.rng.integers(0, 1000, 10)) == list(b.rng.integers(0, 1000, 10))
    assert list(a.spawn_rng().random(3)) == list(b.spawn_rng().random(3))
    assert list(EventLoop(seed=43).rng.integers(0, 1000, 10)) != list(
        EventLoop(seed=42).rng.integers(0, 1000, 10)
    )


def _busy_loop(seed: int) -> tuple[EventLoop, list]:
    """Events that schedule and cancel others, some at the boundary, some past it."""
    loop = EventLoop(seed=seed)
    seen: list = []
    timers: list = []

    def fire(name: str, depth: int) -> None:
        seen.append((loop.now, name))
        if depth < 3:
            timers.append(loop.call_later(int(loop.rng.integers(0, 15)), fire, name + "a", depth + 1))
            loop.call_later(int(loop.rng.integers(0, 15)), fire, name + "b", depth + 1)
            if len(timers) > 2:
                timers[-3].cancel()

    for i in range(5):
        loop.call_later(3 * i, fire, str(i), 0)
    return loop, seen


def test_run_until_time_is_step_repeated():
    """advance runs exactly the events step() would run up to the end, in the same order."""
    a, seen_a = _busy_loop(7)
    a.advance(25)
    b, seen_b = _busy_loop(7)
    end = b.now + 25
    while (nxt := b.next_event_ms()) is not None and nxt <= end:
        b.step()
    assert seen_a == seen_b and len(seen_a) > 10
    assert a.events_run == b.events_run == len(seen_a)
    assert a.now == end and all(t <= end for t, _ in seen_a)
    a.advance(100)
    b.run_until(lambda: False, max_ms=end + 100 - b.now)
    assert seen_a == seen_b


def _timeout_loop(seed: int, fifo: bool) -> tuple[EventLoop, list]:
    """Requests with timeouts of a few fixed delays, most cancelled by an answer, among other
    events at the same milliseconds; timeouts through ``call_later_fifo`` when ``fifo``."""
    loop = EventLoop(seed=seed)
    seen: list = []
    pending: list = []

    def timeout(name: str) -> None:
        seen.append((loop.now, "timeout", name))

    def tick(name: str, depth: int) -> None:
        seen.append((loop.now, "tick", name))
        rng = loop.rng
        if depth < 4:
            for k in range(int(rng.integers(1, 4))):
                delay = int(rng.choice([5, 5, 20, 0]))
                if fifo:
                    pending.append(loop.call_later_fifo(delay, timeout, f"{name}.{k}"))
                else:
                    pending.append(loop.call_later(delay, timeout, f"{name}.{k}"))
                loop.call_later(int(rng.integers(0, 12)), tick, f"{name}.{k}", depth + 1)
        for _ in range(int(rng.integers(0, 3))):  # answers cancel some timeouts in flight
            if pending:
                pending.pop(int(rng.integers(0, len(pending)))).cancel()
        if rng.random() < 0.3:
            loop.post_at(loop.now + int(rng.integers(0, 6)), seen.append, (loop.now, "post", name))

    for i in range(4):
        loop.call_later(2 * i, tick, str(i), 0)
    return loop, seen


def test_fifo_timers_run_exactly_where_heap_timers_would():
    """call_later_fifo (a lane per delay) gives the events, order, times and counts of
    call_later, under cancellation, same-millisecond ties, advance, step and run_until."""
    for seed in range(8):
        a, seen_a = _timeout_loop(seed, fifo=False)
        b, seen_b = _timeout_loop(seed, fifo=True)
        a.advance(17)
        b.advance(17)
        assert seen_a == seen_b and a.events_run == b.events_run
        end = a.now + 9
        while (nxt := a.next_event_ms()) is not None and nxt <= end:
            a.step()
        while (nxt := b.next_event_ms()) is not None and nxt <= end:
            b.step()
        assert seen_a == seen_b
        a.run_until(lambda: False, max_ms=200)
        b.run_until(lambda: False, max_ms=200)
        assert seen_a == seen_b and a.events_run == b.events_run and a.now == b.now
        assert any(kind == "timeout" for _, kind, _ in seen_a)
        assert len(seen_a) > 30


def test_post_at_runs_in_order_and_clamps_to_now():
    loop = EventLoop(seed=1)
    seen: list = []
    loop.post_at(loop.now + 5, seen.append, "b")
    loop.call_at(loop.now + 5, seen.append, "c")
    loop.post_at(loop.now - 10, seen.append, "a")  # in the past: runs now
    loop.advance(10)
    assert seen == ["a", "b", "c"] and loop.events_run == 3


def test_the_clocks_time_is_the_attribute_the_loop_moves():
    """ManualClock keeps the time in ``now_ms`` (read there by the simulator without a call):
    every way the time moves — the loop running an event, the loop ending at a time, step,
    advance, set — shows in it, and milliseconds() and the loop's ``now`` read the same."""
    loop = EventLoop(seed=1, start_ms=1_000)
    clock = loop.clock
    seen = []
    loop.call_at(1_500, lambda: seen.append((clock.now_ms, clock.milliseconds(), loop.now)))
    loop.run_until_time(2_000)
    assert seen == [(1_500, 1_500, 1_500)]
    assert clock.now_ms == clock.milliseconds() == loop.now == 2_000
    loop.call_at(2_300, seen.append, "stepped")
    assert loop.step()
    assert clock.now_ms == 2_300 and seen[-1] == "stepped"
    assert clock.advance(7) == 2_307 == clock.now_ms
    clock.set(3_000)
    assert clock.now_ms == clock.milliseconds() == loop.now == 3_000
    with pytest.raises(ValueError):
        clock.set(2_999)
    with pytest.raises(ValueError):
        clock.advance(-1)
    assert clock.now_ms == 3_000
