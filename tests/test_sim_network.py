"""In-process transport: latency, bandwidth serialisation, isolation and timeouts; latency
distributions, delay spikes and per-connection order."""
import math

import numpy as np
import pytest

from replica_core.errors import InvalidConfigurationError
from replica_core.sim.loop import EventLoop
from replica_core.sim.network import (
    Latency,
    LatencyDistribution,
    Network,
    RequestTimeout,
    parse_latency,
    parse_network,
    parse_spikes,
)


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


def test_each_request_is_answered_once_by_its_answer_or_its_timeout():
    """An answer before the timeout is the only one delivered (the timeout never fires); a
    request unanswered by its timeout gets the timeout, and answers after it are dropped."""
    loop = EventLoop(seed=3)
    net = Network(loop, latency_ms=2, bandwidth_bytes_per_ms=1000)
    held = []
    net.register(2, lambda src, msg, respond: held.append(respond))  # answered by hand below
    got = []
    t0 = loop.now
    net.request(1, 2, "a", 10, lambda r: got.append(("a", loop.now - t0, r)), timeout_ms=20)
    net.request(1, 2, "b", 10, lambda r: got.append(("b", loop.now - t0, r)), timeout_ms=20)
    loop.advance(5)  # both arrived after 2 ms
    held[0]("ra", 10)  # back 2 ms later
    loop.advance(30)
    held[1]("rb", 10)  # after b's timeout
    held[0]("again", 10)  # a second answer to a
    loop.advance(30)
    assert [(k, t, r if k == "a" else type(r)) for k, t, r in got] == [
        ("a", 7, "ra"), ("b", 20, RequestTimeout)]


def test_bandwidth_queues_back_to_back_messages():
    loop, net = make()
    arrivals = []
    t0 = loop.now
    for _ in range(3):
        net.send(1, 2, None, 1000, lambda m: arrivals.append(loop.now - t0))
    loop.advance(100)
    assert arrivals == [3, 4, 5]


def test_constant_link_arrivals_equal_the_general_paths():
    """A constant, loss-free link's arrival times (worked out in line by the carrier) are the
    ones the general per-message path (_link_transit_ms) gives for the same sends: a queue
    behind earlier bytes, sub-ms transfers, and delays of exactly half a ms, which round half
    to even (1.5 -> 2, 2.5 -> 2, 3.5 -> 4)."""
    sends = [(0, 187_500), (10, 62_500), (20, 312_500), (30, 62_500), (30, 187_500),
             (30, 10), (33, 312_500), (40, 1), (40, 125_000), (41, 40_000), (60, 0)]

    def arrivals(general: bool) -> list[int]:
        loop = EventLoop(seed=3)
        net = Network(loop, latency_ms=1.0, bandwidth_bytes_per_ms=125_000.0)
        if general:
            # the smallest positive loss rate takes the general path; with this seed no
            # random() draw is below it, so nothing is lost
            net.link(1, 2).loss_rate = 5e-324
        t0 = loop.now
        got: list[int] = []
        for at, size in sends:
            loop.run_until_time(t0 + at)
            assert net.send(1, 2, None, size, lambda m: got.append(loop.now - t0))
        loop.advance(100)
        return got

    fast = arrivals(False)
    assert fast == arrivals(True)
    # on an idle link: 2.5 ms -> 2, 1.5 ms -> 2, 3.5 ms -> 4 (half to even)
    assert fast[:3] == [2, 12, 24]
    assert len(fast) == len(sends)


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


# --- latency distributions, spikes, per-connection order (issue 18) ----------------------------
def shaped(config: dict, *, seed: int = 5, racks: dict | None = None, bandwidth: float = 1e9):
    loop = EventLoop(seed=seed)
    net = Network(loop, latency_ms=1, bandwidth_bytes_per_ms=bandwidth)
    racks = racks or {}
    net.configure(parse_network(config, racks=set(racks.values()), brokers=[1, 2, 3, 4]),
                  racks=racks, seed=seed)
    return loop, net


def arrivals(loop, net, src=1, dst=2, n=400, gap_ms=0):
    got = []
    t0 = loop.now
    for k in range(n):
        net.send(src, dst, k, 10, lambda m: got.append((loop.now - t0, m)))
        if gap_ms:
            loop.advance(gap_ms)
    loop.advance(100_000)
    return got


def test_random_latency_never_reorders_a_connection():
    # a wide log-normal with a tail: back-to-back sends draw very different latencies
    loop, net = shaped({"latency": {"distribution": "lognormal", "median_ms": 5, "sigma": 1.5,
                                    "tail_fraction": 0.05, "tail_mean_ms": 200}})
    got = arrivals(loop, net, gap_ms=1)
    assert [m for _, m in got] == list(range(400))  # in send order, as TCP delivers
    times = [t for t, _ in got]
    assert times == sorted(times)
    # ... yet the draws really differ: some messages waited behind a slower earlier one
    sent_at = list(range(400))
    waits = [t - s for t, s in zip(times, sent_at, strict=True)]
    assert len(set(waits)) > 20 and max(waits) > 50


def test_each_connection_is_ordered_on_its_own():
    loop, net = shaped({"latency": {"distribution": "uniform", "low_ms": 0, "high_ms": 50}})
    got = []
    for k in range(200):
        for src in (1, 3):
            net.send(src, 2, (src, k), 10, got.append)
        loop.advance(1)
    loop.advance(1000)
    for src in (1, 3):
        assert [k for s, k in got if s == src] == list(range(200))
    # the two connections interleave freely (each keeps only its own order)
    assert [s for s, _ in got] != [1, 3] * 200


def test_same_seed_same_latencies_other_seed_others():
    cfg = {"latency": {"distribution": "lognormal", "median_ms": 3, "sigma": 0.8}}
    one = arrivals(*shaped(cfg, seed=9), gap_ms=50)
    assert one == arrivals(*shaped(cfg, seed=9), gap_ms=50)
    assert one != arrivals(*shaped(cfg, seed=10), gap_ms=50)
    # a link's draws depend on the seed and the link alone, not on traffic elsewhere
    loop, net = shaped(cfg, seed=9)
    for k in range(50):
        net.send(3, 4, k, 10, lambda m: None)
    assert arrivals(loop, net, gap_ms=50) == one


def test_uniform_latency_stays_in_its_range():
    loop, net = shaped({"latency": {"distribution": "uniform", "low_ms": 10, "high_ms": 20}})
    waits = [t - k * 100 for k, (t, _) in enumerate(arrivals(loop, net, n=300, gap_ms=100))]
    assert min(waits) >= 10 and max(waits) <= 20 and len(set(waits)) == 11


def test_lognormal_median_and_tail():
    rng = np.random.default_rng(1)
    body = Latency(LatencyDistribution.LOGNORMAL, median_ms=4.0, sigma=0.5)
    draws = np.array([body.sample(rng) for _ in range(20_000)])
    assert abs(float(np.median(draws)) - 4.0) < 0.1
    assert abs(float(np.std(np.log(draws))) - 0.5) < 0.02
    tail = Latency(LatencyDistribution.LOGNORMAL, median_ms=4.0, sigma=0.5, tail_fraction=0.02,
                   tail_mean_ms=500.0)
    tailed = np.array([tail.sample(rng) for _ in range(20_000)])
    # the body alone almost never exceeds 4·e^(0.5·4) ≈ 30 ms; the tail adds about 2 % beyond
    assert float(np.mean(draws > 30)) < 0.001
    assert 0.012 < float(np.mean(tailed > 30)) < 0.025


def test_rack_pair_and_link_latency_override_the_default():
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    cfg = {"latency": {"distribution": "fixed", "ms": 1},
           "rack_latency": [{"racks": ["a", "b"], "latency": {"distribution": "fixed", "ms": 7}}],
           "link_latency": [{"brokers": [2, 4], "latency": 30}]}
    loop, net = shaped(cfg, racks=racks)

    def one_way(src, dst):
        got = []
        t0 = loop.now
        net.send(src, dst, None, 1, lambda m: got.append(loop.now - t0))
        loop.advance(1000)
        return got[0]

    assert (one_way(1, 2), one_way(1, 3), one_way(3, 1), one_way(4, 2), one_way(-1, 3)) == \
        (1, 7, 7, 30, 1)


def test_delay_spikes_come_and_go_per_link():
    cfg = {"spikes": {"per_link_per_hour": 360, "mean_s": 1, "extra_ms": 80}}
    loop, net = shaped(cfg, seed=2)
    got = arrivals(loop, net, n=600, gap_ms=100)  # one message every 100 ms for a minute
    waits = [t - k * 100 for k, (t, _) in enumerate(got)]
    assert set(waits) == {1, 81}  # 1 ms, or 1 + 80 inside a spike (100 ms apart: no queueing)
    spiked = waits.count(81)
    # ~6 spikes a minute of ~1 s each: some messages but far from all are delayed
    assert 0 < spiked < 300
    assert got == arrivals(*shaped(cfg, seed=2), n=600, gap_ms=100)
    assert got != arrivals(*shaped(cfg, seed=3), n=600, gap_ms=100)


def test_default_configuration_is_the_constant_latency():
    plain_loop = EventLoop(seed=3)
    plain = Network(plain_loop, latency_ms=2, bandwidth_bytes_per_ms=1000)
    loop, net = shaped({}, seed=3, bandwidth=1000)
    net.default_latency_ms = 2
    a = arrivals(plain_loop, plain, n=50)
    b = arrivals(loop, net, n=50)
    assert a == b and a[0][0] == 2 + 0  # 10 bytes at 1000 B/ms round to 0, then 2 ms


@pytest.mark.parametrize("spec, words", [
    ({"distribution": "gaussian", "ms": 1}, ["distribution", "'gaussian'"]),
    ({"distribution": "uniform", "low_ms": 5}, ["needs", "high_ms"]),
    ({"distribution": "uniform", "low_ms": 5, "high_ms": 2}, ["high_ms 2", "low_ms 5"]),
    ({"distribution": "lognormal", "median_ms": 0, "sigma": 1}, ["median_ms", "> 0"]),
    ({"distribution": "lognormal", "median_ms": 1, "sigma": -1}, ["sigma", "≥ 0"]),
    ({"distribution": "fixed", "ms": "fast"}, ["ms", "'fast'"]),
    ({"distribution": "fixed", "ms": 1, "sigma": 2}, ["unknown keys", "sigma"]),
    ({"distribution": "fixed", "ms": 1, "tail_fraction": 1.5, "tail_mean_ms": 3},
     ["tail_fraction", "at most 1"]),
    ({"distribution": "fixed", "ms": 1, "tail_fraction": 0.1}, ["tail_mean_ms"]),
    ({"distribution": "fixed", "ms": math.inf}, ["ms", "inf"]),
])
def test_latency_parameters_are_validated(spec, words):
    with pytest.raises(InvalidConfigurationError) as info:
        parse_latency(spec, "network.latency")
    assert all(w in str(info.value) for w in words), str(info.value)


def test_network_table_is_validated_against_racks_and_brokers():
    with pytest.raises(InvalidConfigurationError, match="unknown rack 'z'"):
        parse_network({"rack_latency": [{"racks": ["a", "z"], "latency": 3}]},
                      racks={"a", "b"}, brokers=[1, 2])
    with pytest.raises(InvalidConfigurationError, match="unknown broker 9"):
        parse_network({"link_latency": [{"brokers": [1, 9], "latency": 3}]}, brokers=[1, 2])
    with pytest.raises(InvalidConfigurationError, match="unknown network keys"):
        parse_network({"jitter": 3})
    with pytest.raises(InvalidConfigurationError, match="missing"):
        parse_spikes({"per_link_per_hour": 1, "mean_s": 1})


def test_in_flight_request_fails_when_its_connection_breaks():
    """A request on the wire when the link is cut is lost (a silent cut: it times out); one
    sent after the link heals gets through."""
    loop = EventLoop(seed=1)
    net = Network(loop, latency_ms=20, bandwidth_bytes_per_ms=1e9)
    net.register(2, lambda src, msg, respond: respond(("ok", msg), 10))
    got = []
    net.request(1, 2, "a", 10, got.append, timeout_ms=500)
    loop.advance(10)
    net.isolate(2)  # while "a" is still in flight
    loop.advance(600)
    assert len(got) == 1 and isinstance(got[0], RequestTimeout)
    net.heal()
    net.request(1, 2, "b", 10, got.append, timeout_ms=500)
    loop.advance(600)
    assert got[1] == ("ok", "b")
