"""Disks as they fail: torn writes, bit flips, lost and slow fsyncs (issue 18, storage part).

The faults act on a broker's :class:`~replica_core.storage.medium.MemoryMedium` (the model is
documented there); the product's log recovery (``LogLoader``, ``LogSegment.recover``) finds and
repairs what they leave when the broker starts again. Nothing here repairs a log.

================================  ============================================================
``crash`` power + ``torn_write``   some pages of every unflushed range reach the disk:
                                   ``"subset"`` (default for ``true``: each page on its own,
                                   probability 1/2) or ``"prefix"`` (the first k of n pages,
                                   k uniform in 0..n); the torn tail is cut at recovery
``crash`` power + ``bit_flips``    that many bits flipped in what survives of the segment
                                   files that were being written (their durable bytes)
``bit_flip``                       one bit of one segment file's durable bytes flipped (bit
                                   rot): ``topic``/``partition``/``segment`` (base offset,
                                   default the oldest), ``file`` (log | index | timeindex),
                                   ``bit`` (default drawn); the running broker keeps reading
                                   its page cache — the flip shows after a power failure
``lose_fsync`` / ``restore_fsync`` the broker's fsyncs report success and persist nothing
                                   (pages marked clean, as Linux after a writeback error)
``slow`` mode ``fsync``            each fsync takes an exponential time of mean ``factor`` ×
                                   ``processing_ms``: the produce reply of an append that
                                   fsynced, or a follower's next fetch after its appends did,
                                   waits for it
================================  ============================================================

Where recovery finds a flipped bit is Kafka's rule: after an unclean shutdown only the segments
from the one holding the recovery-point checkpoint on are rescanned (a CRC mismatch cuts the
segment at that batch and deletes every later segment); a segment below it loads unchecked, and
the corrupt batch is served as it is. Lost fsyncs can leave worse: a segment that comes back
empty while a later one survives (Kafka's loader cuts nothing there), a log with a gap whose
replica rejoins the ISR. The invariant checker counts what such logs break (CRC verdicts,
divergence) instead of failing the run (:meth:`StorageFaults.explains`): the damage was
injected, not made by the product.

Randomness comes from a generator of its own, derived from the seed only, so storage faults
shift no other stream of a run. The counts (:meth:`StorageFaults.summary`) go into the run
summary as ``storage_faults``: what was injected and what the loader's
:class:`~replica_core.storage.loader.RecoveryReport` s say recovery did.
"""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from replica_core.errors import InvalidConfigurationError
from replica_core.storage.medium import TornWrite

if TYPE_CHECKING:
    from replica_core.sim.broker import SimBroker
    from replica_core.sim.cluster import Cluster
    from replica_core.sim.faults import PlannedFault

STORAGE_FAULT_KINDS = frozenset({"bit_flip", "lose_fsync", "restore_fsync"})
TORN_MODELS = {"subset": TornWrite.SUBSET, "prefix": TornWrite.PREFIX}
SEGMENT_FILES = {"log": ".log", "index": ".index", "timeindex": ".timeindex"}
STORAGE_RATE_KEYS = {
    "torn_write_fraction": 0.0, "bit_flips_per_broker_hour": 0.0,
    "lost_fsyncs_per_broker_hour": 0.0, "mean_lost_fsync_s": 30.0,
    "slow_fsyncs_per_broker_hour": 0.0, "mean_slow_fsync_s": 30.0,
}
"""``[fault_rates]`` keys of storage faults (defaults): the fraction of power failures whose
unflushed writes tear, latent bit flips per broker-hour, windows of lost fsyncs and of slow
fsyncs (``slow_factor`` times ``processing_ms`` each) per broker-hour with their mean length."""
STORAGE_STREAM = 0x746F726E  # spawn-key tag of the storage-fault generator
CUT_REASONS = ("torn", "corrupt", "crc", "offsets", "error")


def torn_model(value: Any, where: str) -> str | None:
    """A ``torn_write`` setting as a model name (None: no torn write); bad values raise."""
    if value is None or value is False:
        return None
    if value is True:
        return "subset"
    if isinstance(value, str) and value.lower() in TORN_MODELS:
        return value.lower()
    raise InvalidConfigurationError(
        f"{where}: torn_write must be true, false, \"subset\" or \"prefix\", got {value!r}")


def fault_params(f: Any, topics: Mapping[str, int] | None = None) -> tuple[tuple[str, Any], ...]:
    """The storage settings of a scripted fault (a scenario ``Fault``), validated, as sorted
    ``(key, value)`` pairs; ``topics`` maps topic names to partition counts when known."""
    where = f"fault {f.kind} at {f.at_s:g}s"
    out: dict[str, Any] = {}
    torn = torn_model(f.torn_write, where)
    flips = f.bit_flips
    if torn is not None or flips is not None:
        if f.kind != "crash" or f.mode != "power":
            raise InvalidConfigurationError(
                f"{where}: torn_write and bit_flips need kind = \"crash\" with mode = \"power\"")
    if torn is not None:
        out["torn_write"] = torn
    if flips is not None:
        if isinstance(flips, bool) or not isinstance(flips, int) or flips < 0:
            raise InvalidConfigurationError(
                f"{where}: bit_flips must be a non-negative integer, got {flips!r}")
        if flips:
            out["bit_flips"] = flips
    target = {"topic": f.topic, "partition": f.partition, "segment": f.segment, "file": f.file,
              "bit": f.bit}
    if any(v is not None for v in target.values()):
        if f.kind != "bit_flip":
            raise InvalidConfigurationError(
                f"{where}: topic, partition, segment, file and bit belong to kind = \"bit_flip\"")
        topic, part = target["topic"], target["partition"]
        if topic is None and (part is not None or target["segment"] is not None):
            raise InvalidConfigurationError(f"{where}: partition and segment need a topic")
        if topic is not None:
            if not isinstance(topic, str) or (topics is not None and topic not in topics):
                raise InvalidConfigurationError(f"{where}: unknown topic {topic!r}")
            out["topic"] = topic
            part = 0 if part is None else part
            if isinstance(part, bool) or not isinstance(part, int) or part < 0 or (
                    topics is not None and part >= topics[topic]):
                raise InvalidConfigurationError(
                    f"{where}: no partition {part!r} in topic {topic!r}")
            out["partition"] = part
        for key in ("segment", "bit"):
            v = target[key]
            if v is not None:
                if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                    raise InvalidConfigurationError(
                        f"{where}: {key} must be a non-negative integer, got {v!r}")
                out[key] = v
        if target["file"] is not None:
            if target["file"] not in SEGMENT_FILES:
                raise InvalidConfigurationError(
                    f"{where}: file must be one of {sorted(SEGMENT_FILES)}, got "
                    f"{target['file']!r}")
            out["file"] = target["file"]
    return tuple(sorted(out.items()))


def validate_storage_rates(rates: Mapping[str, float]) -> None:
    """Fractions at most 1 (the rates' other checks are :func:`faults.validate_rates`')."""
    value = rates.get("torn_write_fraction", 0.0)
    if value > 1:
        raise InvalidConfigurationError(
            f"fault_rates.torn_write_fraction must be at most 1, got {value:g}")


def plan_storage_random(r: Mapping[str, float], brokers: Sequence[int], duration_ms: int,
                        rng: np.random.Generator, first_seq: int) -> list[PlannedFault]:
    """The random storage faults of a run (bit flips, lost- and slow-fsync windows), drawn
    after every other random fault so that zero rates draw nothing."""
    from replica_core.sim.faults import PlannedFault

    out: list[PlannedFault] = []
    seq = first_seq

    def add(at: float, kind: str, b: int, **kw: Any) -> None:
        nonlocal seq
        if at < duration_ms:
            out.append(PlannedFault(int(at), seq, kind, broker=b, source="random", **kw))
            seq += 1

    def arrivals(per_hour: float, mean_s: float | None) -> list[tuple[float, float]]:
        spans: list[tuple[float, float]] = []
        if per_hour <= 0:
            return spans
        t = 0.0
        while True:
            t += float(rng.exponential(3_600_000.0 / per_hour))
            if t >= duration_ms:
                return spans
            length = 0.0 if mean_s is None else max(1.0, float(rng.exponential(mean_s * 1000)))
            spans.append((t, t + length))
            t += length

    for b in brokers:
        for at, _ in arrivals(r["bit_flips_per_broker_hour"], None):
            add(at, "bit_flip", b)
        for start, end in arrivals(r["lost_fsyncs_per_broker_hour"], r["mean_lost_fsync_s"]):
            add(start, "lose_fsync", b)
            add(end, "restore_fsync", b)
        for start, end in arrivals(r["slow_fsyncs_per_broker_hour"], r["mean_slow_fsync_s"]):
            add(start, "slow", b, factor=r["slow_factor"], mode="fsync")
            add(end, "unslow", b)
    return out


class StorageFaults:
    """The storage faults of one cluster: injection, the counts, the recovery found."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.rng = np.random.default_rng(
            np.random.SeedSequence(cluster.seed, spawn_key=(STORAGE_STREAM,)))
        self.injected = {"torn_writes": 0, "torn_files": 0, "torn_pages_kept": 0,
                         "torn_pages_lost": 0, "bit_flips": 0, "bit_flips_missed": 0,
                         "lost_fsync_windows": 0, "slow_fsyncs": 0, "slow_fsync_ms": 0}
        self.recovery: dict[str, Any] = {
            "logs_recovered": 0, "segments_recovered": 0, "bytes_truncated": 0,
            "truncations_by_reason": dict.fromkeys(CUT_REASONS, 0), "segments_deleted": 0,
            "indexes_rebuilt": 0, "logs_with_data_lost": 0}
        self.corrupted: set[tuple[int, tuple[str, int]]] = set()
        """(broker, (topic, partition)) whose segment files got an injected bit flip."""
        self.lied: set[int] = set()
        """Brokers that lost power after their disk lost fsyncs (any log may miss data)."""
        self.timeline: list[tuple[int, str]] = []
        """(loop ms, label): what recovery did after a restart, for the report."""

    # ---- injection ---------------------------------------------------------------------------
    def power_failure(self, broker: SimBroker, torn_write: str | None, bit_flips: int) -> None:
        """Crash ``broker`` by a power failure, tearing its unflushed writes and flipping bits
        in the files that were being written, as asked."""
        if broker.medium.fsyncs_lost:
            self.lied.add(broker.broker_id)
        torn = TORN_MODELS[torn_write] if torn_write is not None else None
        files = broker.crash("power", torn=torn, rng=self.rng if torn is not None else None)
        if torn is not None:
            self.injected["torn_writes"] += 1
            for tf in files or ():
                kept = len(tf.kept_pages)
                self.injected["torn_pages_kept"] += kept
                self.injected["torn_pages_lost"] += len(tf.dirty_pages) - kept
                self.injected["torn_files"] += 0 < kept < len(tf.dirty_pages)
        if bit_flips:
            logs = [tf.path for tf in files or () if tf.path.endswith(".log")]
            for _ in range(bit_flips):
                self._flip_among(broker, logs, cached=True)

    def apply(self, p: PlannedFault) -> None:
        """Inject a ``bit_flip``, ``lose_fsync`` or ``restore_fsync`` fault."""
        b = self.cluster.brokers[int(p.broker)]  # type: ignore[arg-type]
        medium = b.medium
        if p.kind == "lose_fsync":
            if not medium.lose_fsyncs:
                self.injected["lost_fsync_windows"] += 1
            medium.lose_fsyncs = True
        elif p.kind == "restore_fsync":
            medium.lose_fsyncs = False
        elif p.kind == "bit_flip":
            self._bit_flip(b, dict(p.storage))
        else:  # pragma: no cover - programming error
            raise InvalidConfigurationError(f"not a storage fault: {p.kind!r}")

    def _bit_flip(self, b: SimBroker, target: Mapping[str, Any]) -> None:
        # nothing is cached after a power failure until the broker reads it again
        cached = not b.alive and b.crash_mode == "power"
        suffix = SEGMENT_FILES[target.get("file", "log")]
        if "topic" in target:
            d = os.path.join(b.log_dir, f"{target['topic']}-{target['partition']}")
            paths = self._segment_files(b, d, suffix)
            if "segment" in target:
                name = f"{target['segment']:020d}{suffix}"
                paths = [p for p in paths if os.path.basename(p) == name]
            paths = paths[:1]  # the named segment, else the oldest
            if "bit" in target and paths:
                size = b.medium.durable_size(paths[0]) or 0
                if target["bit"] < 8 * size:
                    self._flip(b, paths[0], target["bit"], cached)
                    return
                paths = []
        else:
            paths = [p for d in self._partition_dirs(b)
                     for s in SEGMENT_FILES.values() for p in self._segment_files(b, d, s)]
        self._flip_among(b, paths, cached=cached)

    def _partition_dirs(self, b: SimBroker) -> list[str]:
        m = b.medium
        if not m.is_dir(b.log_dir):
            return []
        return [os.path.join(b.log_dir, n) for n in m.listdir(b.log_dir)
                if m.is_dir(os.path.join(b.log_dir, n))]

    @staticmethod
    def _segment_files(b: SimBroker, d: str, suffix: str) -> list[str]:
        m = b.medium
        if not m.is_dir(d):
            return []
        return [os.path.join(d, n) for n in m.listdir(d) if n.endswith(suffix)
                and (m.durable_size(os.path.join(d, n)) or 0) > 0]

    def _flip_among(self, b: SimBroker, paths: Sequence[str], *, cached: bool) -> None:
        """Flip one bit drawn uniformly over the durable bytes of ``paths``."""
        sizes = [b.medium.durable_size(p) or 0 for p in paths]
        total = sum(sizes)
        if total <= 0:
            self.injected["bit_flips_missed"] += 1
            return
        bit = int(self.rng.integers(0, 8 * total))
        for path, size in zip(paths, sizes, strict=True):
            if bit < 8 * size:
                self._flip(b, path, bit, cached)
                return
            bit -= 8 * size

    def _flip(self, b: SimBroker, path: str, bit: int, cached: bool) -> None:
        b.medium.flip_bit(path, bit, cached=cached)
        self.injected["bit_flips"] += 1
        from replica_core.storage.log import parse_topic_partition

        self.corrupted.add((b.broker_id, parse_topic_partition(os.path.dirname(path))))
        self.cluster.trace("bit_flip", b.broker_id, path, bit)

    def explains(self, broker_id: int, tp: tuple[str, int]) -> bool:
        """Whether an injected storage fault can explain a bad log of ``tp`` on ``broker_id``
        (a bit flip in its files, or fsyncs lost before a power failure): the invariant
        checker counts what it finds there instead of failing the run."""
        return broker_id in self.lied or (broker_id, tuple(tp)) in self.corrupted

    def slow_fsyncs(self, broker: SimBroker, fsyncs: int) -> int:
        """The extra time ``fsyncs`` fsyncs take on ``broker`` (0 unless slowed)."""
        if fsyncs <= 0 or broker.slow_factors.get("fsync", 1.0) <= 1.0:
            return 0
        delay = sum(broker.processing_delay_ms("fsync") for _ in range(fsyncs))
        self.injected["slow_fsyncs"] += fsyncs
        self.injected["slow_fsync_ms"] += delay
        return delay

    # ---- recovery ----------------------------------------------------------------------------
    def recovered(self, broker: SimBroker) -> None:
        """Add what the broker's log loading just reported (after a restart)."""
        lm = broker.lm
        if lm is None:
            return
        rec = self.recovery
        cuts = 0
        truncated = 0
        for load in lm.loads.values():
            for _tp, report in sorted(load.reports.items()):
                if report.recovered_segments:
                    rec["logs_recovered"] += 1
                rec["segments_recovered"] += len(report.recovered_segments)
                rec["segments_deleted"] += len(report.deleted_segments)
                rec["indexes_rebuilt"] += len(report.rebuilt_indexes)
                rec["logs_with_data_lost"] += report.data_lost
                for cut in report.cuts:
                    reason = cut.reason if cut.reason in CUT_REASONS else "error"
                    rec["truncations_by_reason"][reason] += 1
                    rec["bytes_truncated"] += cut.truncated_bytes
                    truncated += cut.truncated_bytes
                    cuts += 1
        if cuts:
            self.timeline.append((self.cluster.loop.now,
                                  f"broker {broker.broker_id} recovery: {cuts} cut"
                                  f"{'s' if cuts != 1 else ''}, {truncated:,} B truncated"))

    def summary(self) -> dict[str, Any]:
        """``storage_faults`` of the run summary: injected faults by kind, fsyncs lost (over
        every broker's disk), and the recovery the loader reported after restarts."""
        lost = sum(int(b.medium.fsyncs_lost)
                   for _, b in sorted(self.cluster.brokers.items()))
        injected = dict(self.injected)
        injected["fsyncs_lost"] = lost
        rec = dict(self.recovery)
        rec["truncations_by_reason"] = dict(rec["truncations_by_reason"])
        return {**dict(sorted(injected.items())), "recovery": rec}


__all__ = ["STORAGE_FAULT_KINDS", "STORAGE_RATE_KEYS", "StorageFaults", "fault_params",
           "plan_storage_random", "torn_model", "validate_storage_rates"]
