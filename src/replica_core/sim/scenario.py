"""Scenarios: a TOML file that, with its seed, completely determines a simulation run.

```toml
name = "rolling-restart"
seed = 7
duration_s = 120
truncation = "leader_epoch"          # or "high_watermark" (pre-KIP-101 followers)
storage = "memory"                   # or "disk"

[cluster]
brokers = 5
latency_ms = 1.0                     # one-way, per link
bandwidth_mbps = 1000.0              # per link
processing_ms = 1.0                  # base service time a `slow` factor multiplies
detect_bounces = true                # a fast restart is a failure first and brokers refuse
                                     # stale controller requests (KIP-380); false: pre-2.2
                                     # controllers and brokers (the restarted broker keeps its
                                     # roles and serves requests meant for its old process)
# racks = ["a", "b", "c"]            # broker.rack of brokers 1..n: topics are placed rack-aware
                                     # (KRaft's striped placer); unset: rack-unaware as before

[configs]                            # Kafka broker/topic configs by their dotted names
"min.insync.replicas" = 2
"replica.lag.time.max.ms" = 30000
"broker.session.timeout.ms" = 18000  # controller: session expiry (also zookeeper.session...)
"retry.backoff.ms" = 100             # clients: also request.timeout.ms, delivery.timeout.ms,
"enable.idempotence" = true          # retries, max.in.flight.requests.per.connection

[[topics]]
name = "events"
partitions = 1000
replication_factor = 3
configs = { "unclean.leader.election.enable" = false }

[workload]
batches_per_second = 2.0             # per partition
records_per_batch = 10
record_bytes = 100
acks = "all"                         # all | 1 | 0  (-1 is "all")
keys = 0                             # distinct record keys (0: null keys)
consumers = false                    # a consumer reading committed data
consumer_poll_ms = 1000

[[faults]]                           # scripted faults
at_s = 30
kind = "crash"                       # crash | shutdown | restart | isolate | unisolate | partition |
broker = 1                           # heal_partition | heal | slow | unslow | flush |
mode = "process"                     # drop_controller_messages | restore_controller_messages |
                                     # replace_disk (restart with an empty data directory)
                                     # mode: crash → process | power; slow → fetch | disk | fsync | all
# factor = 1000.0                    # slow: service-time multiplier
# brokers = [1, 2]                   # partition: one side (the other: everyone else)
# torn_write = true                  # crash power: unflushed pages partly persist ("subset",
# bit_flips = 1                      # "prefix"); bits flipped in the files being written
                                     # storage kinds: bit_flip (topic, partition, segment, file,
                                     # bit) | lose_fsync | restore_fsync; slow mode "fsync"
# rack = "a"                         # instead of broker: crash | restart | isolate | unisolate
                                     # the whole rack (isolate: cut from other racks, the
                                     # controller and clients)
# racks = ["a"]                      # partition | heal_partition between these racks' brokers
                                     # and every other rack's (controller, clients unaffected)

[fault_rates]                        # random faults, drawn from the seed
crashes_per_broker_hour = 0.0
mean_downtime_s = 30.0
power_failure_fraction = 0.0
isolations_per_broker_hour = 0.0
mean_isolation_s = 20.0
slowdowns_per_broker_hour = 0.0      # also mean_slow_s, slow_factor
partitions_per_hour = 0.0            # also mean_partition_s
controller_drops_per_hour = 0.0      # also mean_controller_drop_s
torn_write_fraction = 0.0            # of power failures; bit_flips_per_broker_hour,
                                     # lost_fsyncs_per_broker_hour (mean_lost_fsync_s),
                                     # slow_fsyncs_per_broker_hour (mean_slow_fsync_s)
rack_outages_per_hour = 0.0          # per rack (needs cluster.racks); also mean_rack_outage_s,
                                     # rack_power_failure_fraction, rack_isolations_per_hour,
                                     # mean_rack_isolation_s, rack_partitions_per_hour,
                                     # mean_rack_partition_s

# in a planner's units instead (replica_core.sim.faults):
# broker_mtbf_hours = 4380           # instead of crashes_per_broker_hour
# repair_time = { distribution = "lognormal", median_s = 600, sigma = 1.0 }   # or exponential
#                                    # (mean_s) or fixed (value_s); instead of mean_downtime_s
# power_losses_per_year = 1          # cluster-wide: every broker at once
# rack_mtbf_hours = 8760             # per rack, instead of rack_outages_per_hour
# rack_power_losses_per_year = 1     # per rack: every broker of the rack loses power at once
# rack_repair_time = { ... }         # how long a rack stays down (default: repair_time)

[network]                            # latency distributions (default: cluster.latency_ms, fixed)
latency = { distribution = "lognormal", median_ms = 0.5, sigma = 0.3 }
spikes = { per_link_per_hour = 6, mean_s = 2, extra_ms = 50 }
# [[network.rack_latency]] racks = ["a", "b"], latency = {...};
# [[network.link_latency]] brokers = [1, 2], latency = {...}   (see sim/network.py)
```

Flush policy, as Kafka's configs: the topic-level ``flush.messages`` and ``flush.ms`` or the
broker names ``log.flush.interval.messages``, ``log.flush.interval.ms`` and
``log.flush.scheduler.interval.ms`` (a fallback for ``flush.ms``, as Kafka's
``ServerTopicConfigSynonyms`` maps them). The log flusher runs every
``log.flush.scheduler.interval.ms`` as Kafka's does; when only ``flush.ms`` (or
``log.flush.interval.ms``) is set it runs every ``flush.ms`` — Kafka's default scheduler
interval is Long.MAX, so there a time-based flush needs the scheduler interval set too.

Simulator-only settings (not Kafka's): ``sample_interval_s`` (time series), ``[cluster]``
``processing_ms`` and ``detect_bounces``; ``segment.index.bytes`` defaults to 8192 in the
simulator; ``fetcher_lanes = true`` simulates each replica fetcher's partitions as an
independent lane (:mod:`replica_core.sim.lanes`), which is what a sharded run needs.
``horizon_days`` (instead of ``duration_s``) draws the ``[fault_rates]`` faults over days or
years and simulates only the episodes around them, ``episode_margin_s`` of quiet time before
and after each (:mod:`replica_core.sim.episodes`).

``--set KEY=VALUE`` overrides any of it: ``truncation=high_watermark``, ``cluster.brokers=6``,
``workload.acks=1``, ``topics.0.partitions=100``; any other dotted key is a Kafka config
(``replica.lag.time.max.ms=10000``).
"""
from __future__ import annotations

import copy
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from replica_core.errors import InvalidConfigurationError

FAULT_KINDS = frozenset({
    "crash", "restart", "isolate", "unisolate", "partition", "heal_partition", "heal", "slow",
    "unslow", "drop_controller_messages", "restore_controller_messages", "flush", "shutdown",
    "bit_flip", "lose_fsync", "restore_fsync", "replace_disk",
})
NEEDS_BROKER = frozenset({"crash", "restart", "isolate", "unisolate", "slow", "unslow", "flush",
                          "shutdown", "bit_flip", "lose_fsync", "restore_fsync", "replace_disk"})
SLOW_MODES = frozenset({"process", "all", "fetch", "disk", "fsync"})
STORAGE_FAULT_KEYS = ("torn_write", "bit_flips", "topic", "partition", "segment", "file", "bit")
"""Fault keys of the storage faults (sim/storage_faults.py); None when not given."""
WORKLOAD_KEYS = frozenset({"batches_per_second", "records_per_batch", "record_bytes", "acks",
                           "keys", "consumers", "consumer_poll_ms"})
CLUSTER_KEYS = frozenset({"brokers", "latency_ms", "bandwidth_mbps", "processing_ms",
                          "detect_bounces", "racks"})
RACK_FAULT_KINDS = frozenset({"crash", "restart", "isolate", "unisolate"})
"""Kinds a ``rack = "..."`` fault may have; ``partition`` / ``heal_partition`` take ``racks``."""
RACKS_FAULT_KINDS = frozenset({"partition", "heal_partition"})
def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ValueError(f"expected true or false, got {value!r}")


TOP_LEVEL = {"name": str, "seed": int, "duration_s": float, "truncation": str, "storage": str,
             "description": str, "sample_interval_s": float, "fetcher_lanes": _bool,
             "horizon_days": float, "episode_margin_s": float}
TABLES = ("cluster", "workload", "fault_rates", "network")


@dataclass(frozen=True)
class Topic:
    name: str
    partitions: int
    replication_factor: int
    configs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Fault:
    at_s: float
    kind: str
    broker: int | None = None
    mode: str = "process"
    factor: float = 10.0
    brokers: tuple[int, ...] = ()
    torn_write: bool | str | None = None
    bit_flips: int | None = None
    topic: str | None = None
    partition: int | None = None
    segment: int | None = None
    file: str | None = None
    bit: int | None = None
    rack: str | None = None
    racks: tuple[str, ...] = ()


@dataclass(frozen=True)
class Scenario:
    name: str = "scenario"
    description: str = ""
    seed: int = 1
    duration_s: float = 60.0
    truncation: str = "leader_epoch"
    storage: str = "memory"
    sample_interval_s: float = 1.0
    fetcher_lanes: bool = False
    horizon_days: float = 0.0
    """With faults drawn over a long horizon (days), only the episodes around faults are
    simulated (:mod:`replica_core.sim.episodes`); 0: one run of ``duration_s``."""
    episode_margin_s: float = 60.0
    """Quiet time simulated before an episode's first fault and after its last one ends."""
    cluster: dict[str, Any] = field(default_factory=lambda: {
        "brokers": 3, "latency_ms": 1.0, "bandwidth_mbps": 1000.0})
    configs: dict[str, Any] = field(default_factory=dict)
    topics: tuple[Topic, ...] = ()
    workload: dict[str, Any] = field(default_factory=lambda: {
        "batches_per_second": 2.0, "records_per_batch": 10, "record_bytes": 100, "acks": "all"})
    faults: tuple[Fault, ...] = ()
    fault_rates: dict[str, Any] = field(default_factory=dict)
    network: dict[str, Any] = field(default_factory=dict)
    """``[network]``: latency distributions and delay spikes (:mod:`replica_core.sim.network`)."""
    overrides: dict[str, Any] = field(default_factory=dict, compare=False)
    """The ``--set``/``--seed`` overrides applied to the file (already part of every field)."""

    @property
    def acks(self) -> int:
        return parse_acks(self.workload.get("acks", "all"))

    @property
    def simulated_s(self) -> float:
        """The simulated time the run's figures cover: the horizon, or ``duration_s``."""
        return self.horizon_days * 86_400.0 if self.horizon_days > 0 else self.duration_s

    @property
    def total_partitions(self) -> int:
        return sum(t.partitions for t in self.topics)

    def fingerprint(self) -> str:
        """A short hash of the effective scenario (after overrides): two runs with the same
        fingerprint simulate the same thing (with the same package version)."""
        import hashlib
        import json

        text = json.dumps(self.to_dict(), sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:10]

    def min_isr_of(self, topic: Topic) -> int:
        """The ``min.insync.replicas`` a topic is configured with (topic, then broker config,
        then Kafka's default 1)."""
        value = topic.configs.get("min.insync.replicas",
                                  self.configs.get("min.insync.replicas", 1))
        try:
            return int(value)
        except (TypeError, ValueError):
            raise InvalidConfigurationError(
                f"min.insync.replicas: not an integer: {value!r}") from None

    def warnings(self) -> list[str]:
        """What the scenario asks for that Kafka quietly adjusts: a ``min.insync.replicas``
        above a topic's replication factor is clamped to the replica count (Kafka's
        ``Partition.effectiveMinIsr``), so acks=all still succeeds with every replica in
        the ISR."""
        out = []
        for t in self.topics:
            m = self.min_isr_of(t)
            if m > t.replication_factor:
                out.append(f"topic {t.name}: min.insync.replicas={m} exceeds "
                           f"replication_factor={t.replication_factor}; Kafka clamps it to "
                           f"{t.replication_factor} (effectiveMinIsr), so acks=all needs all "
                           f"{t.replication_factor} replicas in the ISR")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "description": self.description, "seed": self.seed,
            "duration_s": self.duration_s, "truncation": self.truncation,
            "storage": self.storage, "sample_interval_s": self.sample_interval_s,
            "fetcher_lanes": self.fetcher_lanes, "cluster": dict(self.cluster), "configs": dict(self.configs),
            "topics": [{"name": t.name, "partitions": t.partitions,
                        "replication_factor": t.replication_factor, "configs": dict(t.configs)}
                       for t in self.topics],
            "workload": dict(self.workload),
            "faults": [{k: v for k, v in f.__dict__.items() if v not in (None, ())}
                       for f in self.faults],
            "fault_rates": dict(self.fault_rates),
            # only when set: a scenario without one keeps its fingerprint
            **({"network": copy.deepcopy(self.network)} if self.network else {}),
            **({"horizon_days": self.horizon_days, "episode_margin_s": self.episode_margin_s}
               if self.horizon_days > 0 else {}),
        }


def parse_acks(value: Any) -> int:
    """Producer ``acks``: "all"/-1, 1 or 0 (Kafka rejects anything else: INVALID_REQUIRED_ACKS)."""
    if isinstance(value, str):
        v = value.strip().lower()
        if v in ("all", "-1"):
            return -1
        if v in ("0", "1"):
            return int(v)
    elif isinstance(value, int) and value in (-1, 0, 1):
        return value
    raise InvalidConfigurationError(f"acks must be all, -1, 0 or 1, not {value!r}")


def _coerce(text: str) -> Any:
    """A --set value: TOML scalar syntax where it parses (numbers, booleans), else a string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def _set_path(doc: dict[str, Any], key: str, value: Any) -> None:
    head, _, rest = key.partition(".")
    if head in TOP_LEVEL and not rest:
        doc[head] = value
    elif head in TABLES and rest:
        doc.setdefault(head, {})[rest] = value
    elif head in ("topics", "faults") and rest:
        index, _, attr = rest.partition(".")
        items = doc.get(head, [])
        if not index.isdigit() or int(index) >= len(items) or not attr:
            raise InvalidConfigurationError(f"--set {key}: no such {head} entry")
        items[int(index)][attr] = value
    elif "." in key:
        doc.setdefault("configs", {})[key] = value
    else:
        raise InvalidConfigurationError(f"--set {key}: unknown scenario key")


def from_dict(doc: dict[str, Any], overrides: dict[str, Any] | None = None) -> Scenario:
    """Build and validate a scenario; ``overrides`` maps --set keys to values (already coerced)."""
    doc = copy.deepcopy(doc)
    for key, value in (overrides or {}).items():
        _set_path(doc, key, value)
    unknown = set(doc) - set(TOP_LEVEL) - set(TABLES) - {"configs", "topics", "faults"}
    if unknown:
        raise InvalidConfigurationError(f"unknown scenario keys: {sorted(unknown)}")
    base = Scenario()
    kwargs: dict[str, Any] = {}
    for key, typ in TOP_LEVEL.items():
        if key in doc:
            try:
                kwargs[key] = typ(doc[key])
            except (TypeError, ValueError) as exc:
                raise InvalidConfigurationError(f"{key}: {exc}") from None
    for table in TABLES:
        merged = dict(getattr(base, table))
        merged.update(doc.get(table, {}))
        kwargs[table] = merged
    kwargs["configs"] = dict(doc.get("configs", {}))
    topics = []
    for t in doc.get("topics", []):
        try:
            topics.append(Topic(str(t["name"]), int(t["partitions"]), int(t["replication_factor"]),
                                dict(t.get("configs", {}))))
        except KeyError as exc:
            raise InvalidConfigurationError(f"topic entry missing {exc}") from None
        except (TypeError, ValueError) as exc:
            raise InvalidConfigurationError(f"topic {t.get('name')!r}: {exc}") from None
    kwargs["topics"] = tuple(topics)
    faults = []
    for f in doc.get("faults", []):
        kind = f.get("kind")
        if kind not in FAULT_KINDS:
            raise InvalidConfigurationError(f"fault kind {kind!r} not one of {sorted(FAULT_KINDS)}")
        racks = f.get("racks", ())
        if isinstance(racks, str):
            racks = (racks,)
        faults.append(Fault(float(f["at_s"]), kind, f.get("broker"), f.get("mode", "process"),
                            float(f.get("factor", 10.0)), tuple(f.get("brokers", ())),
                            rack=f.get("rack"), racks=tuple(racks),
                            **{k: f[k] for k in STORAGE_FAULT_KEYS if k in f}))
    kwargs["faults"] = tuple(sorted(faults, key=lambda f: f.at_s))
    kwargs["overrides"] = dict(overrides or {})
    if "horizon_days" in doc and "duration_s" in doc:
        raise InvalidConfigurationError(
            "give duration_s (one run) or horizon_days (episodes over a horizon), not both")
    sc = Scenario(**kwargs)
    _validate(sc)
    return sc


def _validate(sc: Scenario) -> None:
    if sc.truncation not in ("leader_epoch", "high_watermark"):
        raise InvalidConfigurationError("truncation must be leader_epoch or high_watermark")
    if sc.storage not in ("memory", "disk"):
        raise InvalidConfigurationError("storage must be memory or disk")
    if sc.duration_s <= 0:
        raise InvalidConfigurationError(f"duration_s must be positive, got {sc.duration_s:g}")
    if sc.horizon_days < 0:
        raise InvalidConfigurationError(
            f"horizon_days must be positive, got {sc.horizon_days:g}")
    if sc.episode_margin_s <= 0:
        raise InvalidConfigurationError(
            f"episode_margin_s must be positive, got {sc.episode_margin_s:g}")
    try:
        n = int(sc.cluster.get("brokers", 0))
    except (TypeError, ValueError):
        raise InvalidConfigurationError(
            f"cluster.brokers must be an integer, got {sc.cluster.get('brokers')!r}") from None
    if n < 1:
        raise InvalidConfigurationError(f"cluster.brokers must be at least 1, got {n}")
    for t in sc.topics:
        if t.partitions < 1:
            raise InvalidConfigurationError(
                f"topic {t.name}: needs partitions ≥ 1, got {t.partitions}")
        if not 1 <= t.replication_factor <= n:
            raise InvalidConfigurationError(
                f"topic {t.name}: needs 1 ≤ replication_factor ≤ {n} (the brokers), got "
                f"{t.replication_factor}")
        if sc.min_isr_of(t) < 1:
            raise InvalidConfigurationError(
                f"topic {t.name}: min.insync.replicas must be at least 1, got "
                f"{sc.min_isr_of(t)}")
    from replica_core.sim.network import parse_network, rack_map

    racks = rack_map(list(range(1, n + 1)), sc.cluster.get("racks"))
    parse_network(sc.network, racks=set(racks.values()), brokers=range(1, n + 1))
    for f in sc.faults:
        _validate_rack_fault(f, set(racks.values()))
    for f in sc.faults:
        if f.broker is not None and not 1 <= int(f.broker) <= n:
            raise InvalidConfigurationError(f"fault at {f.at_s}s names unknown broker {f.broker}")
        if f.rack is not None or f.racks:
            continue
        if f.kind in NEEDS_BROKER and f.broker is None:
            raise InvalidConfigurationError(f"fault {f.kind} at {f.at_s}s needs a broker")
        if f.kind == "crash" and f.mode not in ("process", "power"):
            raise InvalidConfigurationError("crash mode must be process or power")
        if f.kind == "slow" and f.mode not in SLOW_MODES:
            raise InvalidConfigurationError(
                f"slow mode must be fetch, disk, fsync or all, got {f.mode!r}")
        if f.kind == "partition" and not f.brokers:
            raise InvalidConfigurationError(f"partition fault at {f.at_s}s needs brokers = [...]")
        if any(not 1 <= int(b) <= n for b in f.brokers):
            raise InvalidConfigurationError(f"fault at {f.at_s}s names unknown brokers {f.brokers}")
    if sc.seed < 0:
        raise InvalidConfigurationError(f"seed must be a non-negative integer, got {sc.seed}")
    for table, key, low, strict in (
            ("workload", "batches_per_second", 0, False), ("workload", "records_per_batch", 1, False),
            ("workload", "record_bytes", 1, False), ("workload", "keys", 0, False),
            ("workload", "consumer_poll_ms", 1, False), ("cluster", "latency_ms", 0, False),
            ("cluster", "bandwidth_mbps", 0, True), ("cluster", "processing_ms", 0, False)):
        value = getattr(sc, table).get(key)
        if value is None or isinstance(value, bool):
            continue
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise InvalidConfigurationError(
                f"{table}.{key} must be a number, got {value!r}") from None
        if number < low or (strict and number <= low):
            need = f"> {low}" if strict else f"≥ {low}"
            raise InvalidConfigurationError(f"{table}.{key} must be {need}, got {value!r}")
    for f in sc.faults:
        if f.at_s < 0:
            raise InvalidConfigurationError(f"fault {f.kind} at_s must be ≥ 0, got {f.at_s:g}")
        if f.kind == "slow" and f.factor <= 0:
            raise InvalidConfigurationError(f"slow fault at {f.at_s:g}s: factor must be > 0, "
                                            f"got {f.factor:g}")
    if sc.sample_interval_s <= 0:
        raise InvalidConfigurationError(
            f"sample_interval_s must be positive, got {sc.sample_interval_s:g}")
    unknown = set(sc.workload) - WORKLOAD_KEYS
    if unknown:
        raise InvalidConfigurationError(f"unknown workload keys: {sorted(unknown)}")
    unknown = set(sc.cluster) - CLUSTER_KEYS
    if unknown:
        raise InvalidConfigurationError(f"unknown cluster keys: {sorted(unknown)}")
    from replica_core.sim.faults import validate_rates
    from replica_core.sim.storage_faults import fault_params

    for f in sc.faults:
        fault_params(f, {t.name: t.partitions for t in sc.topics})
    rates = validate_rates(sc.fault_rates)
    if not racks:
        drawn = sorted(k for k in rates if k.startswith("rack_") and k.endswith("_per_hour")
                       and rates[k] > 0)
        drawn += [k for k in ("rack_mtbf_hours", "rack_power_losses_per_year")
                  if k in rates and rates[k] > 0]
        if drawn:
            raise InvalidConfigurationError(
                f"fault_rates.{drawn[0]} needs racks: set cluster.racks (broker.rack per broker)")
    if sc.horizon_days > 0:
        from replica_core.sim.episodes import validate_horizon

        validate_horizon(sc, rates)
    acks = parse_acks(sc.workload.get("acks", "all"))
    from replica_core.sim.producer_config import producer_settings

    timeout = sc.configs.get("request.timeout.ms", 30_000)
    try:
        timeout = int(timeout)
    except (TypeError, ValueError):
        raise InvalidConfigurationError(
            f"request.timeout.ms must be an integer, got {timeout!r}") from None
    producer_settings(sc.configs, acks, timeout)


def _validate_rack_fault(f: Fault, known: set[str]) -> None:
    """A fault on whole racks names known racks, with a kind that applies to a rack."""
    if f.rack is None and not f.racks:
        return
    where = f"fault {f.kind} at {f.at_s:g}s"
    if f.broker is not None or f.brokers:
        raise InvalidConfigurationError(f"{where}: give broker(s) or rack(s), not both")
    if f.rack is not None and f.racks:
        raise InvalidConfigurationError(f"{where}: give rack or racks, not both")
    if f.rack is not None and f.kind not in RACK_FAULT_KINDS:
        raise InvalidConfigurationError(
            f"{where}: rack = ... applies to {sorted(RACK_FAULT_KINDS)}"
            + (" (a partition between racks takes racks = [...])"
               if f.kind in RACKS_FAULT_KINDS else ""))
    if f.racks and f.kind not in RACKS_FAULT_KINDS:
        raise InvalidConfigurationError(
            f"{where}: racks = [...] applies to {sorted(RACKS_FAULT_KINDS)} (one rack: rack = ...)")
    if not known:
        raise InvalidConfigurationError(
            f"{where} names a rack but cluster.racks is not set (broker.rack per broker)")
    for r in (f.rack,) if f.rack is not None else f.racks:
        if not isinstance(r, str) or r not in known:
            raise InvalidConfigurationError(
                f"{where} names unknown rack {r!r} (racks: {sorted(known)})")
    if f.racks and set(f.racks) >= known:
        raise InvalidConfigurationError(
            f"{where}: racks {list(f.racks)} leave no rack on the other side")


def load(path: str | Path, overrides: dict[str, Any] | None = None) -> Scenario:
    with open(path, "rb") as fh:
        try:
            doc = tomllib.load(fh)
        except tomllib.TOMLDecodeError as exc:
            raise InvalidConfigurationError(f"{path}: {exc}") from None
    return from_dict(doc, overrides)


def parse_overrides(pairs: list[str]) -> dict[str, Any]:
    """``["a.b=1", "truncation=high_watermark"]`` → ``{"a.b": 1, "truncation": "high_watermark"}``."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise InvalidConfigurationError(f"--set expects KEY=VALUE, got {pair!r}")
        out[key.strip()] = _coerce(value.strip())
    return out


def examples_dir() -> Path:
    """The scenarios shipped with the package (``replica_core/examples``)."""
    return Path(__file__).resolve().parent.parent / "examples"


def default_scenario_path() -> Path:
    return examples_dir() / "default.toml"
