"""The simulator's in-process transport: request/response between nodes with per-link latency
and bandwidth, isolation, partitions and message loss, all on the event loop's clock.

A request that is lost (link down, dropped) is answered with a timeout error after
``timeout_ms``, as a Kafka client's ``request.timeout.ms`` would; a response that arrives after
its request timed out is discarded.

Latency is constant per link unless a :class:`NetworkConfig` (the scenario's ``[network]``)
gives a distribution — :class:`Latency`: fixed, uniform or log-normal, each optionally with a
tail (a small fraction of messages delayed by an extra exponential amount) — for every link,
per rack pair or per broker pair, and per-link delay spikes (:class:`DelaySpikes`: windows,
drawn as a Poisson process, during which a link adds a fixed delay). Every draw comes from a
generator of the link's own, keyed by the seed and the link (``SeedSequence(seed,
spawn_key=(stream, src, dst))``): latencies are a function of the seed, and a constant
configuration draws nothing, so its runs are what they were.

A link ``src → dst`` is one TCP connection: a message never arrives before one sent earlier on
it (a shorter draw waits for the earlier message). A broken connection fails the requests in
flight on it: a request that reaches a cut link (isolation, partition) is lost, so it times out
(a silent network cut gives TCP no signal); a crashed process resets its connections — requests
it holds or receives are answered at once with
:class:`~replica_core.sim.broker.Disconnected` (``SimBroker.crash``). A response already on the
wire when a cut starts still arrives (reachability is checked when it is sent).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np

from replica_core.errors import InvalidConfigurationError
from replica_core.sim.loop import EventLoop, Timer

LATENCY_STREAM = 0x6C6174656E6379  # spawn-key tag of the per-link latency generators
SPIKE_STREAM = 0x7370696B65  # spawn-key tag of the per-link delay-spike generators


class LatencyDistribution(str, Enum):
    FIXED = "fixed"
    UNIFORM = "uniform"
    LOGNORMAL = "lognormal"


_LATENCY_KEYS = {
    LatencyDistribution.FIXED: ("ms",),
    LatencyDistribution.UNIFORM: ("low_ms", "high_ms"),
    LatencyDistribution.LOGNORMAL: ("median_ms", "sigma"),
}
_TAIL_KEYS = ("tail_fraction", "tail_mean_ms")


@dataclass(frozen=True)
class Latency:
    """One-way latency of a message, in ms: ``fixed`` (``ms``), ``uniform`` (``low_ms`` ..
    ``high_ms``) or ``lognormal`` (``median_ms``, shape ``sigma``: the log's standard
    deviation); with probability ``tail_fraction`` a message is delayed by a further
    exponential amount of mean ``tail_mean_ms`` (the tail of a real network)."""

    distribution: LatencyDistribution = LatencyDistribution.FIXED
    ms: float = 1.0
    low_ms: float = 0.0
    high_ms: float = 0.0
    median_ms: float = 1.0
    sigma: float = 0.0
    tail_fraction: float = 0.0
    tail_mean_ms: float = 0.0

    @property
    def constant(self) -> bool:
        return self.distribution is LatencyDistribution.FIXED and self.tail_fraction == 0.0

    def sample(self, rng: np.random.Generator) -> float:
        d = self.distribution
        if d is LatencyDistribution.FIXED:
            value = self.ms
        elif d is LatencyDistribution.UNIFORM:
            value = float(rng.uniform(self.low_ms, self.high_ms))
        else:
            value = self.median_ms * math.exp(self.sigma * float(rng.standard_normal()))
        if self.tail_fraction > 0.0 and float(rng.random()) < self.tail_fraction:
            value += float(rng.exponential(self.tail_mean_ms))
        return value


def _number(spec: Mapping[str, Any], key: str, where: str, *, low: float = 0.0,
            strict: bool = False) -> float:
    value = spec[key]
    if isinstance(value, bool):
        raise InvalidConfigurationError(f"{where}.{key} must be a number, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InvalidConfigurationError(f"{where}.{key} must be a number, got {value!r}") from None
    if not math.isfinite(number) or number < low or (strict and number <= low):
        need = f"> {low:g}" if strict else f"≥ {low:g}"
        raise InvalidConfigurationError(f"{where}.{key} must be {need}, got {value!r}")
    return number


def parse_latency(spec: Any, where: str = "network.latency") -> Latency:
    """A :class:`Latency` from its table (``{distribution = "lognormal", median_ms = 2,
    sigma = 0.5}``) or a number (fixed ms); bad names or values raise
    InvalidConfigurationError naming ``where``."""
    if isinstance(spec, (int, float)) and not isinstance(spec, bool):
        return parse_latency({"distribution": "fixed", "ms": spec}, where)
    if not isinstance(spec, Mapping):
        raise InvalidConfigurationError(f"{where} must be a table or a number, got {spec!r}")
    name = spec.get("distribution", "fixed")
    try:
        dist = LatencyDistribution(name)
    except ValueError:
        raise InvalidConfigurationError(
            f"{where}.distribution {name!r} is not one of "
            f"{[d.value for d in LatencyDistribution]}") from None
    allowed = {"distribution", *_LATENCY_KEYS[dist], *_TAIL_KEYS}
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise InvalidConfigurationError(
            f"{where}: unknown keys {unknown} for a {dist.value} latency (allowed: "
            f"{sorted(allowed)})")
    missing = [k for k in _LATENCY_KEYS[dist] if k not in spec]
    if missing:
        raise InvalidConfigurationError(f"{where}: a {dist.value} latency needs {missing}")
    kw: dict[str, Any] = {"distribution": dist}
    if dist is LatencyDistribution.FIXED:
        kw["ms"] = _number(spec, "ms", where)
    elif dist is LatencyDistribution.UNIFORM:
        kw["low_ms"] = _number(spec, "low_ms", where)
        kw["high_ms"] = _number(spec, "high_ms", where)
        if kw["high_ms"] < kw["low_ms"]:
            raise InvalidConfigurationError(
                f"{where}: high_ms {kw['high_ms']:g} is below low_ms {kw['low_ms']:g}")
    else:
        kw["median_ms"] = _number(spec, "median_ms", where, strict=True)
        kw["sigma"] = _number(spec, "sigma", where)
    if "tail_fraction" in spec:
        kw["tail_fraction"] = _number(spec, "tail_fraction", where)
        if kw["tail_fraction"] > 1.0:
            raise InvalidConfigurationError(
                f"{where}.tail_fraction must be at most 1, got {spec['tail_fraction']!r}")
        if kw["tail_fraction"] > 0.0:
            if "tail_mean_ms" not in spec:
                raise InvalidConfigurationError(f"{where}: tail_fraction needs tail_mean_ms")
            kw["tail_mean_ms"] = _number(spec, "tail_mean_ms", where, strict=True)
    elif "tail_mean_ms" in spec:
        raise InvalidConfigurationError(f"{where}: tail_mean_ms needs tail_fraction")
    return Latency(**kw)


@dataclass(frozen=True)
class DelaySpikes:
    """Per-link delay spikes: each link, independently, has spikes starting as a Poisson
    process (``per_link_per_hour``), lasting an exponential time of mean ``mean_s`` (at least
    1 ms), during which every message on it takes ``extra_ms`` longer."""

    per_link_per_hour: float
    mean_s: float
    extra_ms: float


SPIKE_KEYS = ("per_link_per_hour", "mean_s", "extra_ms")


def parse_spikes(spec: Any, where: str = "network.spikes") -> DelaySpikes:
    if not isinstance(spec, Mapping):
        raise InvalidConfigurationError(f"{where} must be a table, got {spec!r}")
    unknown = sorted(set(spec) - set(SPIKE_KEYS))
    missing = [k for k in SPIKE_KEYS if k not in spec]
    if unknown or missing:
        raise InvalidConfigurationError(
            f"{where}: needs exactly {list(SPIKE_KEYS)}"
            + (f"; unknown {unknown}" if unknown else "") + (f"; missing {missing}" if missing else ""))
    return DelaySpikes(_number(spec, "per_link_per_hour", where),
                       _number(spec, "mean_s", where, strict=True),
                       _number(spec, "extra_ms", where))


@dataclass(frozen=True)
class NetworkConfig:
    """The scenario's ``[network]``: a default :class:`Latency` for every link (None: the
    cluster's constant ``latency_ms``), overrides per rack pair and per broker pair (both
    directions; a broker pair wins over its racks), and per-link :class:`DelaySpikes`."""

    latency: Latency | None = None
    rack_latency: tuple[tuple[frozenset[str], Latency], ...] = ()
    link_latency: tuple[tuple[frozenset[int], Latency], ...] = ()
    spikes: DelaySpikes | None = None

    @property
    def empty(self) -> bool:
        return (self.latency is None and not self.rack_latency and not self.link_latency
                and self.spikes is None)


NETWORK_KEYS = ("latency", "rack_latency", "link_latency", "spikes")


def parse_network(doc: Mapping[str, Any] | None, *, racks: Collection[str] = (),
                  brokers: Collection[int] = ()) -> NetworkConfig:
    """Validate a ``[network]`` table against the cluster's rack names and broker ids::

        [network]
        latency = { distribution = "lognormal", median_ms = 0.5, sigma = 0.3 }
        spikes = { per_link_per_hour = 6, mean_s = 2, extra_ms = 50 }
        [[network.rack_latency]]
        racks = ["a", "b"]                # ["a", "a"]: inside rack a
        latency = { distribution = "uniform", low_ms = 1, high_ms = 3 }
        [[network.link_latency]]
        brokers = [1, 2]
        latency = { distribution = "fixed", ms = 5, tail_fraction = 0.01, tail_mean_ms = 40 }
    """
    doc = dict(doc or {})
    unknown = sorted(set(doc) - set(NETWORK_KEYS))
    if unknown:
        raise InvalidConfigurationError(
            f"unknown network keys {unknown} (known: {list(NETWORK_KEYS)})")
    latency = parse_latency(doc["latency"]) if "latency" in doc else None
    spikes = parse_spikes(doc["spikes"]) if "spikes" in doc else None
    known_racks = set(racks)
    by_racks: list[tuple[frozenset[str], Latency]] = []
    for k, entry in enumerate(_entries(doc, "rack_latency")):
        where = f"network.rack_latency[{k}]"
        pair = _pair(entry, "racks", where)
        for r in pair:
            if r not in known_racks:
                raise InvalidConfigurationError(
                    f"{where} names unknown rack {r!r} (racks: {sorted(known_racks)})")
        by_racks.append((frozenset(str(r) for r in pair), parse_latency(entry["latency"],
                                                                         where + ".latency")))
    known_brokers = {int(b) for b in brokers}
    by_link: list[tuple[frozenset[int], Latency]] = []
    for k, entry in enumerate(_entries(doc, "link_latency")):
        where = f"network.link_latency[{k}]"
        pair = _pair(entry, "brokers", where)
        ids = []
        for b in pair:
            if isinstance(b, bool) or not isinstance(b, int) or b not in known_brokers:
                raise InvalidConfigurationError(f"{where} names unknown broker {b!r}")
            ids.append(int(b))
        if ids[0] == ids[1]:
            raise InvalidConfigurationError(f"{where}: a link joins two different brokers")
        by_link.append((frozenset(ids), parse_latency(entry["latency"], where + ".latency")))
    return NetworkConfig(latency, tuple(by_racks), tuple(by_link), spikes)


def _entries(doc: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    entries = doc.get(key, [])
    if not isinstance(entries, list) or not all(isinstance(e, Mapping) for e in entries):
        raise InvalidConfigurationError(f"network.{key} must be a list of tables")
    return entries


def _pair(entry: Mapping[str, Any], key: str, where: str) -> list[Any]:
    unknown = sorted(set(entry) - {key, "latency"})
    if unknown:
        raise InvalidConfigurationError(f"{where}: unknown keys {unknown}")
    pair = entry.get(key)
    if not isinstance(pair, list) or len(pair) != 2 or "latency" not in entry:
        raise InvalidConfigurationError(f"{where} needs {key} = [x, y] and a latency")
    return pair

Handler = Callable[[int, Any, Callable[[Any, int], None]], None]


class RequestTimeout(Exception):
    """The request or its response was lost, or the peer did not answer in time."""



def rack_map(ids: Sequence[int], racks: Sequence[str] | Mapping[int, str] | None
             ) -> dict[int, str]:
    """``broker.rack`` per broker id, from a mapping or a list (one rack per broker, in id
    order); rack names are non-empty strings."""
    if racks is None:
        return {}
    if isinstance(racks, Mapping):
        pairs = [(int(b), r) for b, r in racks.items()]
        unknown = sorted(b for b, _ in pairs if b not in ids)
        if unknown:
            raise InvalidConfigurationError(f"racks name unknown brokers {unknown}")
    else:
        racks = list(racks)
        if len(racks) != len(ids):
            raise InvalidConfigurationError(
                f"racks lists {len(racks)} racks for {len(ids)} brokers (one per broker)")
        pairs = list(zip(ids, racks, strict=True))
    for b, r in pairs:
        if not isinstance(r, str) or not r:
            raise InvalidConfigurationError(
                f"rack of broker {b} must be a non-empty string, got {r!r}")
    return dict(sorted(pairs))


@dataclass
class Link:
    latency_ms: float = 1.0
    bandwidth_bytes_per_ms: float = 125_000.0  # 1 Gbit/s
    loss_rate: float = 0.0
    busy_until_ms: float = 0.0
    model: Latency | None = None
    """A latency distribution (None: ``latency_ms``, constant)."""
    rng: np.random.Generator | None = field(default=None, repr=False)
    last_arrival_ms: int = 0
    """When the latest message sent on this connection arrives (none may arrive earlier)."""
    spike_rng: np.random.Generator | None = field(default=None, repr=False)
    spike_start_ms: float = 0.0
    spike_end_ms: float = 0.0


class Network:
    """Nodes by integer id; node ``-1`` is conventionally the controller, clients use ids ≥ 1000."""

    def __init__(self, loop: EventLoop, *, latency_ms: float = 1.0,
                 bandwidth_bytes_per_ms: float = 125_000.0):
        self.loop = loop
        self.rng = loop.spawn_rng()
        self.default_latency_ms = latency_ms
        self.default_bandwidth = bandwidth_bytes_per_ms
        self._handlers: dict[int, Handler] = {}
        self._links: dict[tuple[int, int], Link] = {}
        self._down: set[int] = set()
        self._cut: set[frozenset[int]] = set()
        self.messages_sent = 0
        self.messages_lost = 0
        self.config = NetworkConfig()
        self.racks: dict[int, str] = {}
        self._seed = 0
        self._origin_ms = float(loop.now)

    def configure(self, config: NetworkConfig, *, racks: Mapping[int, str] | None = None,
                  seed: int = 0) -> None:
        """Latency distributions and delay spikes (``config``), the rack of each broker node
        (for per-rack-pair latencies) and the seed every per-link generator derives from."""
        self.config = config
        self.racks = {int(n): str(r) for n, r in (racks or {}).items()}
        self._seed = int(seed)
        for (src, dst), link in self._links.items():
            self._shape(src, dst, link)

    def latency_of(self, src: int, dst: int) -> Latency | None:
        """The latency distribution of ``src → dst`` (None: the constant default)."""
        cfg = self.config
        if cfg.link_latency:
            pair = frozenset((src, dst))
            for nodes, model in cfg.link_latency:
                if nodes == pair:
                    return model
        if cfg.rack_latency and src in self.racks and dst in self.racks:
            pair_r = frozenset((self.racks[src], self.racks[dst]))
            for names, model in cfg.rack_latency:
                if names == pair_r:
                    return model
        return cfg.latency

    def _link_rng(self, stream: int, src: int, dst: int) -> np.random.Generator:
        key = (stream, src + 1, dst + 1)  # node ids ≥ -1 (the controller)
        return np.random.default_rng(np.random.SeedSequence(self._seed, spawn_key=key))

    def _shape(self, src: int, dst: int, link: Link) -> None:
        model = self.latency_of(src, dst)
        if model is None:
            link.latency_ms, link.model, link.rng = self.default_latency_ms, None, None
        elif model.constant:
            link.latency_ms, link.model, link.rng = model.ms, None, None
        else:
            link.model = model
            link.rng = self._link_rng(LATENCY_STREAM, src, dst)
        spikes = self.config.spikes
        if spikes is not None and spikes.per_link_per_hour > 0:
            link.spike_rng = self._link_rng(SPIKE_STREAM, src, dst)
            link.spike_start_ms = link.spike_end_ms = self._origin_ms
            self._next_spike(link, spikes)

    @staticmethod
    def _next_spike(link: Link, spikes: DelaySpikes) -> None:
        rng = link.spike_rng
        assert rng is not None
        start = link.spike_end_ms + float(rng.exponential(3_600_000.0 / spikes.per_link_per_hour))
        link.spike_start_ms = start
        link.spike_end_ms = start + max(1.0, float(rng.exponential(spikes.mean_s * 1000.0)))

    def spike_extra_ms(self, link: Link, now: float) -> float:
        """The extra delay of a message entering ``link`` at ``now`` (0 outside spikes)."""
        spikes = self.config.spikes
        if link.spike_rng is None or spikes is None:
            return 0.0
        while now >= link.spike_end_ms:
            self._next_spike(link, spikes)
        return spikes.extra_ms if now >= link.spike_start_ms else 0.0

    # --- topology ----------------------------------------------------------------------------
    def register(self, node: int, handler: Handler) -> None:
        self._handlers[node] = handler

    def link(self, src: int, dst: int) -> Link:
        key = (src, dst)
        if key not in self._links:
            link = self._links[key] = Link(self.default_latency_ms, self.default_bandwidth)
            if not self.config.empty:
                self._shape(src, dst, link)
        return self._links[key]

    def isolate(self, node: int) -> None:
        """Cut every link to and from ``node`` (it keeps running)."""
        self._down.add(node)

    def partition(self, side_a: set[int], side_b: set[int]) -> None:
        for a in side_a:
            for b in side_b:
                self._cut.add(frozenset((a, b)))

    def heal(self) -> None:
        self._down.clear()
        self._cut.clear()

    def reachable(self, src: int, dst: int) -> bool:
        if self._down and (src in self._down or dst in self._down):
            return False
        return not self._cut or frozenset((src, dst)) not in self._cut

    def round_trip_ms(self, a: int, b: int) -> int:
        """Latency from ``a`` to ``b`` and back, whole ms (a small request and its answer)."""
        return int(round(self.link(a, b).latency_ms + self.link(b, a).latency_ms))

    # --- delivery ----------------------------------------------------------------------------
    def _link_transit_ms(self, link: Link, size: int) -> float | None:
        """Arrival delay of a message of ``size`` bytes entering a reachable ``link`` now (it
        waits for the link's earlier bytes, then takes the link's latency and any delay
        spike); None if the message is dropped."""
        if link.loss_rate > 0.0 and self.rng.random() < link.loss_rate:
            return None
        now = self.loop.clock.now_ms  # the loop's clock, read as the loop does
        busy = link.busy_until_ms
        start = busy if busy > now else float(now)
        done = start + size / link.bandwidth_bytes_per_ms
        link.busy_until_ms = done
        if link.model is None:
            delay = done - now + link.latency_ms
        else:
            delay = done - now + link.model.sample(link.rng)  # type: ignore[arg-type]
        if link.spike_rng is not None:
            delay += self.spike_extra_ms(link, now)
        return delay

    def send(self, src: int, dst: int, message: Any, size: int, deliver: Callable[[Any], None]) -> bool:
        """One-way message; False if it was lost."""
        return self._post(src, dst, size, deliver, message)

    def _post(self, src: int, dst: int, size: int, fn: Callable[..., Any], *args: Any) -> bool:
        """Carry a message of ``size`` bytes from ``src`` to ``dst``: ``fn(*args)`` runs on
        its arrival; False (nothing scheduled) if it was lost (an unreachable or dropping
        link). A constant-latency, loss-free, spike-free link's delay is computed in line
        (what :meth:`_link_transit_ms` gives for it)."""
        self.messages_sent += 1
        down = self._down
        if (down and (src in down or dst in down)) or (
                self._cut and frozenset((src, dst)) in self._cut):
            self.messages_lost += 1
            return False
        link = self._links.get((src, dst))
        if link is None:
            link = self.link(src, dst)
        loop = self.loop
        now = loop.clock.now_ms  # the loop's clock, read as the loop does
        if link.model is None and link.spike_rng is None and link.loss_rate <= 0.0:
            # float(now) is exact (simulated ms are far below 2**53), and an int mixed with a
            # float in a comparison or sum is that same double: these are the doubles
            # _link_transit_ms computes, without converting ``now`` in each step
            fnow = float(now)
            busy = link.busy_until_ms
            done = (busy if busy > fnow else fnow) + size / link.bandwidth_bytes_per_ms
            link.busy_until_ms = done
            delay = done - fnow + link.latency_ms
        else:
            transit = self._link_transit_ms(link, size)
            if transit is None:
                self.messages_lost += 1
                return False
            delay = transit
        # round(delay) (a float: half to even, an int), called as the float method round() uses
        at = now + (delay.__round__() if delay > 0.0 else 0)
        if at < link.last_arrival_ms:  # in order on the connection, as TCP delivers
            at = link.last_arrival_ms
        link.last_arrival_ms = at
        loop.post_at(at, fn, *args)
        return True

    def request(
        self,
        src: int,
        dst: int,
        message: Any,
        size: int,
        on_response: Callable[[Any | RequestTimeout], None],
        timeout_ms: int = 30_000,
    ) -> None:
        """Send ``message`` to ``dst``'s handler; ``on_response`` gets the answer or a timeout."""
        exchange = _Exchange(self, src, dst, on_response)
        self.loop.start_fifo_timer(exchange, timeout_ms, _time_out, exchange)
        self._post(src, dst, size, _arrive, exchange, message)


class _Exchange(Timer):
    """One request in flight: delivered to the handler of ``dst`` if it is still reachable on
    arrival (:func:`_arrive`), answered once — by the handler's response (the exchange is the
    handler's ``respond``) or by the timeout (:func:`_time_out`), whichever is first (the
    other is then ignored). The exchange is its own timeout timer: answered, it is cancelled
    (``cancelled`` is "answered", so a timeout after the answer never runs)."""

    __slots__ = ("network", "src", "dst", "on_response")

    def __init__(self, network: Network, src: int, dst: int,
                 on_response: Callable[[Any], None]) -> None:
        self.at_ms = 0  # set when its timer starts
        self.cancelled = False
        self.network = network
        self.src = src
        self.dst = dst
        self.on_response = on_response

    def __call__(self, response: Any, response_size: int) -> None:
        """The handler's answer: back over the reverse link."""
        self.network._post(self.dst, self.src, response_size, _finish, self, response)  # noqa: SLF001


def _arrive(exchange: _Exchange, message: Any) -> None:
    network = exchange.network
    dst = exchange.dst
    handler = network._handlers.get(dst)  # noqa: SLF001
    if handler is None or not network.reachable(exchange.src, dst):
        return
    handler(exchange.src, message, exchange)


def _finish(exchange: _Exchange, result: Any) -> None:
    if not exchange.cancelled:
        exchange.cancelled = True  # answered: its timeout, if still to come, does nothing
        exchange.on_response(result)


def _time_out(exchange: _Exchange) -> None:
    """A request's timer went off: its answer is the timeout (made only then)."""
    _finish(exchange, RequestTimeout(f"{exchange.src}->{exchange.dst} timed out"))
