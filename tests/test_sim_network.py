"""In-process transport: latency, bandwidth serialisation, isolation and timeouts."""
from replica_core.sim.loop import EventLoop
from replica_core.sim.network import Network, RequestTimeout


def make():
    loop = EventLoop(seed=3)
    net = Network(loop, latency_ms=2, bandwidth_bytes_per_ms=1000)
    net.register(2, lambda src, msg, respond: respond(("echo", msg, src), 10))
    return loop, net


def test_request_response_timing():
    loop, net = make()
    got = []
    t0 = loop.now
    net.request(1, 2, "hi", 1000, lambda r: got.append((loop.now - t0, r)))
    loop.advance(100)
    # 1000 bytes at 1000 B/ms + 2 ms latency there; 10 bytes (rounds to 0) + 2 ms back.
    assert got == [(5, ("echo", "hi", 1))]


def test_bandwidth_queues_back_to_back_messages():
    loop, net = make()
    arrivals = []
    t0 = loop.now
    for _ in range(3):
        net.send(1, 2, None, 1000, lambda m: arrivals.append(loop.now - t0))
    loop.advance(100)
    assert arrivals == [3, 4, 5]


def test_isolated_node_times_out_and_heal_restores():
    loop, net = make()
    got = []
    net.isolate(2)
    net.request(1, 2, "x", 10, got.append, timeout_ms=50)
    loop.advance(100)
    assert len(got) == 1 and isinstance(got[0], RequestTimeout)
    net.heal()
    net.request(1, 2, "y", 10, got.append, timeout_ms=50)
    loop.advance(100)
    assert got[1] == ("echo", "y", 1)


def test_partition_is_symmetric():
    loop, net = make()
    net.partition({1}, {2})
    assert not net.reachable(1, 2) and not net.reachable(2, 1)
    assert net.reachable(1, 3)
