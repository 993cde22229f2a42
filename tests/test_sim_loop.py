"""The simulator's event loop: time order, tie order, cancellation, determinism."""
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
