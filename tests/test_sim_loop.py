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
