"""Per-topic log configuration with Kafka's names, defaults and validators (§6.10, ``LogConfig``).

Attributes are the dotted topic config names with ``_`` (``segment.bytes`` → ``segment_bytes``).
:meth:`LogConfig.from_properties` reads the dotted names (and the broker-wide ``log.``-style
synonyms of ``ServerTopicConfigSynonyms``), as strings or native values, the way Kafka's
``ConfigDef`` parses them; anything unknown or invalid raises ``InvalidConfigurationError`` naming
the offending key.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

from replica_core.errors import InvalidConfigurationError

__all__ = ["LogConfig", "LONG_MAX", "SegmentJitter", "DEFAULT_JITTER_SEED"]

LONG_MAX = (1 << 63) - 1
_INT = ((-(1 << 31)), (1 << 31) - 1)
_LONG = ((-(1 << 63)), LONG_MAX)
_JAVA_INT = re.compile(r"[+-]?[0-9]+\Z")
_LIST_SEP = re.compile(r"\s*,\s*")

HOUR_MS = 60 * 60 * 1000
MINUTE_MS = 60 * 1000

COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("compact", "delete")


@dataclass(frozen=True)
class _Synonym:
    name: str
    kind: str
    minimum: float | None = None
    convert: Callable[[Any], Any] = lambda v: v


@dataclass(frozen=True)
class _Spec:
    name: str
    attr: str
    kind: str  # int | long | bool | double | string | list
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] | None = None
    synonyms: tuple[_Synonym, ...] = ()


def _hours(v: int) -> int:
    return v * HOUR_MS


def _retention(factor: int) -> Callable[[int], int]:
    # KafkaConfig.logRetentionTimeMillis: any negative value means "unlimited" (-1).
    return lambda v: -1 if v * factor < 0 else v * factor


_SPECS: tuple[_Spec, ...] = (
    _Spec("segment.bytes", "segment_bytes", "int", 14,  # LegacyRecord.RECORD_OVERHEAD_V0
          synonyms=(_Synonym("log.segment.bytes", "int", 14),)),
    _Spec("segment.ms", "segment_ms", "long", 1,
          synonyms=(_Synonym("log.roll.ms", "long"),
                    _Synonym("log.roll.hours", "int", 1, _hours))),
    _Spec("segment.jitter.ms", "segment_jitter_ms", "long", 0,
          synonyms=(_Synonym("log.roll.jitter.ms", "long"),
                    _Synonym("log.roll.jitter.hours", "int", 0, _hours))),
    _Spec("segment.index.bytes", "segment_index_bytes", "int", 4,
          synonyms=(_Synonym("log.index.size.max.bytes", "int", 4),)),
    _Spec("index.interval.bytes", "index_interval_bytes", "int", 0,
          synonyms=(_Synonym("log.index.interval.bytes", "int", 0),)),
    _Spec("flush.messages", "flush_messages", "long", 1,
          synonyms=(_Synonym("log.flush.interval.messages", "long", 1),)),
    _Spec("flush.ms", "flush_ms", "long", 0,
          synonyms=(_Synonym("log.flush.interval.ms", "long"),
                    _Synonym("log.flush.scheduler.interval.ms", "long"))),
    _Spec("max.message.bytes", "max_message_bytes", "int", 0,
          synonyms=(_Synonym("message.max.bytes", "int", 0),)),
    _Spec("message.timestamp.type", "message_timestamp_type", "string",
          choices=TIMESTAMP_TYPES,
          synonyms=(_Synonym("log.message.timestamp.type", "string"),)),
    _Spec("message.timestamp.difference.max.ms", "message_timestamp_difference_max_ms", "long", 0,
          synonyms=(_Synonym("log.message.timestamp.difference.max.ms", "long", 0),)),
    _Spec("message.timestamp.before.max.ms", "message_timestamp_before_max_ms", "long", 0,
          synonyms=(_Synonym("log.message.timestamp.before.max.ms", "long", 0),)),
    _Spec("message.timestamp.after.max.ms", "message_timestamp_after_max_ms", "long", 0,
          synonyms=(_Synonym("log.message.timestamp.after.max.ms", "long", 0),)),
    _Spec("file.delete.delay.ms", "file_delete_delay_ms", "long", 0,
          synonyms=(_Synonym("log.segment.delete.delay.ms", "long", 0),)),
    _Spec("preallocate", "preallocate", "bool",
          synonyms=(_Synonym("log.preallocate", "bool"),)),
    _Spec("cleanup.policy", "cleanup_policy", "list", choices=CLEANUP_POLICIES,
          synonyms=(_Synonym("log.cleanup.policy", "list"),)),
    _Spec("compression.type", "compression_type", "string", choices=COMPRESSION_TYPES),
    _Spec("min.insync.replicas", "min_insync_replicas", "int", 1),
    _Spec("unclean.leader.election.enable", "unclean_leader_election_enable", "bool"),
    _Spec("retention.ms", "retention_ms", "long", -1,
          synonyms=(_Synonym("log.retention.ms", "long", None, _retention(1)),
                    _Synonym("log.retention.minutes", "int", None, _retention(MINUTE_MS)),
                    _Synonym("log.retention.hours", "int", None, _retention(HOUR_MS)))),
    _Spec("retention.bytes", "retention_bytes", "long",
          synonyms=(_Synonym("log.retention.bytes", "long"),)),
    _Spec("max.compaction.lag.ms", "max_compaction_lag_ms", "long", 1,
          synonyms=(_Synonym("log.cleaner.max.compaction.lag.ms", "long", 1),)),
    _Spec("min.compaction.lag.ms", "min_compaction_lag_ms", "long", 0,
          synonyms=(_Synonym("log.cleaner.min.compaction.lag.ms", "long", 0),)),
    _Spec("delete.retention.ms", "delete_retention_ms", "long", 0,
          synonyms=(_Synonym("log.cleaner.delete.retention.ms", "long", 0),)),
    _Spec("min.cleanable.dirty.ratio", "min_cleanable_dirty_ratio", "double", 0, 1,
          synonyms=(_Synonym("log.cleaner.min.cleanable.ratio", "double", 0),)),
)
_BY_NAME = {s.name: s for s in _SPECS}
_BY_ATTR = {s.attr: s for s in _SPECS}
_SYNONYMS = {syn.name: (spec, syn) for spec in _SPECS for syn in spec.synonyms}


def _bad(key: str, value: Any, why: str) -> InvalidConfigurationError:
    err = InvalidConfigurationError(f"Invalid value {value!r} for configuration {key}: {why}")
    err.key = key  # type: ignore[attr-defined]
    return err


def _parse(key: str, value: Any, kind: str, minimum: float | None = None,
           maximum: float | None = None, choices: tuple[str, ...] | None = None) -> Any:
    """Kafka ``ConfigDef.parseType`` plus the ``atLeast``/``between``/``in`` validators."""
    if kind in ("int", "long"):
        lo, hi = _INT if kind == "int" else _LONG
        if isinstance(value, bool):
            raise _bad(key, value, f"expected a {kind}")
        if isinstance(value, Integral):
            out = int(value)
        elif isinstance(value, str) and _JAVA_INT.match(value.strip()):
            out = int(value.strip())
        else:
            raise _bad(key, value, f"expected a {'32' if kind == 'int' else '64'}-bit integer")
        if not lo <= out <= hi:
            raise _bad(key, value, f"out of range for a {kind}")
    elif kind == "bool":
        if isinstance(value, bool):
            out = value
        elif isinstance(value, str) and value.strip().lower() in ("true", "false"):
            out = value.strip().lower() == "true"
        else:
            raise _bad(key, value, "expected true or false")
    elif kind == "double":
        if isinstance(value, bool):
            raise _bad(key, value, "expected a number")
        try:
            out = float(value.strip()) if isinstance(value, str) else float(value)
        except (TypeError, ValueError):
            raise _bad(key, value, "expected a number") from None
        if not isinstance(value, (str, Real)) or math.isnan(out):
            raise _bad(key, value, "expected a number")
    elif kind == "string":
        if not isinstance(value, str):
            raise _bad(key, value, "expected a string")
        out = value.strip()
        if choices is not None and out not in choices:
            raise _bad(key, value, f"String must be one of: {', '.join(choices)}")
    elif kind == "list":
        if isinstance(value, str):
            text = value.strip()
            items = [] if not text else _LIST_SEP.split(text)
        elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            items = [v.strip() for v in value]
        else:
            raise _bad(key, value, "expected a comma-separated list")
        if choices is not None:
            for item in items:
                if item not in choices:
                    raise _bad(key, value, f"Invalid value {item} for configuration {key}: "
                                           f"String must be one of: {', '.join(choices)}")
        out = tuple(items)
    else:  # pragma: no cover - table error
        raise AssertionError(kind)
    if minimum is not None and out < minimum:
        raise _bad(key, value, f"Value must be at least {minimum:g}")
    if maximum is not None and out > maximum:
        raise _bad(key, value, f"Value must be no more than {maximum:g}")
    return out


def _render(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


@dataclass(frozen=True)
class LogConfig:
    """Kafka's topic-level log configs (defaults as in Kafka; see ``from_properties``)."""

    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * HOUR_MS
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    max_message_bytes: int = 1024 * 1024 + 12  # 1 MiB + Records.LOG_OVERHEAD
    message_timestamp_type: str = "CreateTime"
    message_timestamp_difference_max_ms: int = LONG_MAX
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    file_delete_delay_ms: int = 60000
    preallocate: bool = False
    cleanup_policy: tuple[str, ...] = ("delete",)
    compression_type: str = "producer"
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    retention_ms: int = 7 * 24 * HOUR_MS
    retention_bytes: int = -1
    max_compaction_lag_ms: int = LONG_MAX
    min_compaction_lag_ms: int = 0
    delete_retention_ms: int = 24 * HOUR_MS
    min_cleanable_dirty_ratio: float = 0.5

    def __post_init__(self) -> None:
        for spec in _SPECS:
            value = _parse(spec.name, getattr(self, spec.attr), spec.kind, spec.minimum,
                           spec.maximum, spec.choices)
            object.__setattr__(self, spec.attr, value)
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise _bad("min.compaction.lag.ms", self.min_compaction_lag_ms,
                       f"conflict topic config setting min.compaction.lag.ms "
                       f"({self.min_compaction_lag_ms}) > max.compaction.lag.ms "
                       f"({self.max_compaction_lag_ms})")

    # -- properties in and out -------------------------------------------------------------
    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> LogConfig:
        """Build from Kafka property names: topic names win over broker synonyms, and among
        synonyms the first in Kafka's order wins (``log.roll.ms`` over ``log.roll.hours``)."""
        for key in props:
            if key not in _BY_NAME and key not in _SYNONYMS:
                err = InvalidConfigurationError(f"Unknown topic config name: {key}")
                err.key = key  # type: ignore[attr-defined]
                raise err
        values: dict[str, Any] = {}
        for spec in _SPECS:
            if spec.name in props:
                values[spec.attr] = _parse(spec.name, props[spec.name], spec.kind, spec.minimum,
                                           spec.maximum, spec.choices)
                continue
            for syn in spec.synonyms:
                if syn.name in props:
                    raw = _parse(syn.name, props[syn.name], syn.kind, syn.minimum)
                    value = syn.convert(raw)
                    values[spec.attr] = _parse(syn.name, value, spec.kind, spec.minimum,
                                               spec.maximum, spec.choices)
                    break
        return cls(**values)

    def to_properties(self) -> dict[str, str]:
        """Every config under its dotted topic name, as Kafka would print it."""
        return {spec.name: _render(getattr(self, spec.attr)) for spec in _SPECS}

    def replace(self, **changes: Any) -> LogConfig:
        """A copy with some attributes changed (validated again)."""
        return dataclasses.replace(self, **changes)

    # -- derived values (LogConfig.java) ---------------------------------------------------
    # (cached: a frozen config's policy never changes, and the retention check reads both for
    # every log)
    @functools.cached_property
    def compact(self) -> bool:
        return any(p.lower() == "compact" for p in self.cleanup_policy)

    @functools.cached_property
    def delete(self) -> bool:
        return any(p.lower() == "delete" for p in self.cleanup_policy)

    @property
    def max_segment_ms(self) -> int:
        """``segment.ms``, or ``min(max.compaction.lag.ms, segment.ms)`` when compacted."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @property
    def init_file_size(self) -> int:
        """Initial ``.log`` file length: ``segment.bytes`` if preallocating, else 0."""
        return self.segment_bytes if self.preallocate else 0

    @property
    def timestamp_before_max_ms(self) -> int:
        """Effective before-window: ``message.timestamp.before.max.ms`` unless left at its
        default, then the deprecated ``message.timestamp.difference.max.ms``."""
        if self.message_timestamp_before_max_ms != LONG_MAX:
            return self.message_timestamp_before_max_ms
        return self.message_timestamp_difference_max_ms

    @property
    def timestamp_after_max_ms(self) -> int:
        """Effective after-window (same fallback as ``timestamp_before_max_ms``)."""
        if self.message_timestamp_after_max_ms != LONG_MAX:
            return self.message_timestamp_after_max_ms
        return self.message_timestamp_difference_max_ms

    def random_segment_jitter(self, rng: random.Random) -> int:
        """Roll jitter for a new segment: ``abs(nextInt) % min(segment.jitter.ms, segment.ms)``
        (0 when no jitter), drawn from the given seeded generator (logs draw through a
        :class:`SegmentJitter`)."""
        if self.segment_jitter_ms == 0:
            return 0
        v = rng.getrandbits(32)
        v = v - (1 << 32) if v >= 1 << 31 else v
        v = 0 if v == -(1 << 31) else abs(v)  # Utils.abs
        return v % min(self.segment_jitter_ms, self.segment_ms)

    @staticmethod
    def config_names() -> list[str]:
        """The dotted topic config names this class knows, sorted."""
        return sorted(_BY_NAME)

    @staticmethod
    def synonym_names() -> list[str]:
        """The broker-style synonyms ``from_properties`` also accepts, sorted."""
        return sorted(_SYNONYMS)

    @staticmethod
    def attribute_for(name: str) -> str:
        """Python attribute of a dotted topic config name."""
        return _BY_NAME[name].attr


#: The seed of segment roll jitter when nobody injects a generator (see :class:`SegmentJitter`).
DEFAULT_JITTER_SEED = 0


class SegmentJitter:
    """Where one log's segment roll jitter comes from, reproducibly.

    Kafka draws ``LogConfig.randomSegmentJitter`` from ``ThreadLocalRandom`` once per segment,
    when the segment is created (or reloaded); the segment rolls once it is older than
    ``segment.ms`` minus that jitter. Here each call (``source(config)``, once per new segment
    object) draws :meth:`LogConfig.random_segment_jitter` from a ``random.Random`` seeded from
    ``(seed, name)`` through SHA-512 (``random.Random``'s seeding of a ``str``), so the draws
    depend on neither ``PYTHONHASHSEED`` nor the process, nor on the order in which logs open
    (recovery threads) — only on the seed, the log's name and its own sequence of segments.
    The generator is built at the first non-zero draw: with ``segment.jitter.ms=0`` (Kafka's
    default) a source costs nothing and every draw is 0.

    A :class:`~replica_core.storage.log_manager.LogManager` built with ``rng=`` gives each log
    one, named ``<topic>-<partition>``, seeded by a single draw from that generator (the
    simulator injects one derived from the scenario's seed per broker start). Without an
    injected source a segment draws from one named after its directory and base offset
    under :data:`DEFAULT_JITTER_SEED`: still jittered and spread over partitions, and the
    same in every run.
    """

    __slots__ = ("seed", "name", "_rng")

    def __init__(self, seed: int, name: str) -> None:
        self.seed = int(seed)
        self.name = str(name)
        self._rng: random.Random | None = None

    @staticmethod
    def seed_from(rng: Any) -> int:
        """One 63-bit seed drawn from ``rng``: a ``numpy.random.Generator`` (``integers``) or a
        ``random.Random`` (``getrandbits``); ``None`` gives :data:`DEFAULT_JITTER_SEED`."""
        if rng is None:
            return DEFAULT_JITTER_SEED
        integers = getattr(rng, "integers", None)
        if integers is not None:
            return int(integers(0, 1 << 63))
        return int(rng.getrandbits(63))

    def __call__(self, config: LogConfig) -> int:
        """The roll jitter of a new segment under ``config`` (0 when it has no jitter)."""
        if config.segment_jitter_ms == 0:
            return 0
        if self._rng is None:
            self._rng = random.Random(f"segment-jitter:{self.seed}:{self.name}")
        return config.random_segment_jitter(self._rng)

    def __repr__(self) -> str:
        return f"SegmentJitter(seed={self.seed}, name={self.name!r})"


assert set(_BY_ATTR) == {f.name for f in dataclasses.fields(LogConfig)}
