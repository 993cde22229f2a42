"""All partition logs of a broker's log directories (Kafka's ``LogManager``).

KAFKA_SEMANTICS §5.1 (startup order), §1.10 (checkpoint files), §1.12 (clean-shutdown marker).
Startup per log dir: remember and DELETE the clean-shutdown marker before loading anything
(KAFKA-10471); read the recovery-point, log-start-offset and high-watermark checkpoints (an
unreadable one counts as empty, with a warning); load the partition directories with a pool of
``num_recovery_threads`` workers (the native recovery scan releases the GIL). Shutdown: flush
every log including empty active segments, close them, write the checkpoints, and re-create the
marker for every dir that either had one or loaded completely.

A log dir that fails with an I/O error goes offline (its logs are dropped) instead of failing
the broker, as Kafka's ``LogDirFailureChannel`` does. Bad data in one partition is that
partition's problem, never the directory's: a partition that fails to load after a clean
shutdown is loaded again with full recovery (as after a crash); one that still fails is left
out, reported in ``LogDirLoad.failed_partitions``, and refused by :meth:`LogManager.create_log`
(the partition alone is offline). Kafka stops the broker or the whole directory here.
"""
from __future__ import annotations

import functools
import logging
import operator
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from replica_core.errors import (
    CorruptCheckpointError,
    InvalidConfigurationError,
    KafkaStorageError,
)
from replica_core.storage.checkpoint import (
    CleanShutdownFile,
    OffsetCheckpointContent,
    OffsetCheckpointFile,
)
from replica_core.storage.config import SegmentJitter
from replica_core.storage.loader import RecoveryReport
from replica_core.storage.log import (
    Log,
    _cached_config_values,
    _join,
    _new_dir_files,
    parse_topic_partition,
)
from replica_core.storage.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS,
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
)
from replica_core.storage.producer_state import _expiration_ms as _check_expiration_ms

_UNSET: Any = object()  # (a dict's "no entry", where None is an entry)

__all__ = [
    "LogManager",
    "LogDirLoad",
    "load_log_dir",
    "RECOVERY_POINT_CHECKPOINT_FILE",
    "LOG_START_OFFSET_CHECKPOINT_FILE",
    "HIGH_WATERMARK_CHECKPOINT_FILE",
]

log = logging.getLogger(__name__)

RECOVERY_POINT_CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT_FILE = "log-start-offset-checkpoint"
HIGH_WATERMARK_CHECKPOINT_FILE = "replication-offset-checkpoint"
CLUSTER_METADATA_TOPIC = "__cluster_metadata"
DEFAULT_RETENTION_CHECK_INTERVAL_MS = 300_000   # log.retention.check.interval.ms
DEFAULT_INITIAL_TASK_DELAY_MS = 30_000          # log.initial.task.delay.ms
REMOTE_INDEX_CACHE_DIR = "remote-log-index-cache"

TopicPartition = tuple[str, int]
Progress = Callable[[str, str, int, int], None]


@dataclass
class LogDirLoad:
    """What startup found in one log dir."""

    log_dir: str
    had_clean_shutdown: bool = False
    loaded: int = 0
    reports: dict[TopicPartition, RecoveryReport] = field(default_factory=dict)
    skipped_dirs: list[str] = field(default_factory=list)
    deleted_dirs: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    failed: str | None = None
    #: partitions whose data could not be loaded even with full recovery: (topic, n) -> why
    failed_partitions: dict[TopicPartition, str] = field(default_factory=dict)
    #: partitions loaded only on the second try, with full recovery: (topic, n) -> first error
    recovered_partitions: dict[TopicPartition, str] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return self.failed is None


# what each offset checkpoint records per log
_RECOVERY_POINT = operator.attrgetter("recovery_point")
_HIGH_WATERMARK = operator.attrgetter("high_watermark")
_LOG_START_OFFSET = operator.attrgetter("log_start_offset")


def _LOG_START_ABOVE_FIRST_SEGMENT(lg: Log) -> bool:  # noqa: N802 - a constant-like predicate
    return lg.log_start_offset > lg.segments.first.base_offset


class LogManager:
    """Opens, tracks, checkpoints and shuts down the logs under ``log_dirs``.

    Call :meth:`startup` to load (or use :func:`load_log_dir`). ``topic_configs`` maps a topic
    name to its LogConfig; others use ``config``. A checkpoint whose entries are those this
    manager last wrote (and made durable) is not written again — Kafka rewrites it on every
    interval; the file's bytes are the same either way.

    ``rng`` (a ``numpy.random.Generator`` or ``random.Random``) is where segment roll jitter
    (``segment.jitter.ms``) comes from: one seed is drawn from it here, and each log gets a
    :class:`~replica_core.storage.config.SegmentJitter` of that seed and its name, so the
    jitter does not depend on the order logs open in. Without it each segment's jitter is
    seeded by its directory name and base offset (fixed, not random per process).
    """

    __slots__ = ("log_dirs", "retention_check_interval_ms", "initial_task_delay_ms",
                 "producer_id_expiration_ms", "producer_id_expiration_check_interval_ms", "config",
                 "topic_configs", "medium", "clock", "num_recovery_threads", "broker_epoch",
                 "_jitter_seed", "_logs", "_failed", "_log_dir_of", "_dir_count", "_written",
                 "_read_from", "_hw_changed", "loads", "offline_dirs", "started",
                 "_next_producer_expiration_check", "__weakref__")

    def __init__(
        self,
        log_dirs: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
        config: Any = None,
        *,
        medium: Any = None,
        clock: Any = None,
        num_recovery_threads: int = 1,
        topic_configs: dict[str, Any] | None = None,
        broker_epoch: int = -1,
        rng: Any = None,
        retention_check_interval_ms: int = DEFAULT_RETENTION_CHECK_INTERVAL_MS,
        initial_task_delay_ms: int = DEFAULT_INITIAL_TASK_DELAY_MS,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        producer_id_expiration_check_interval_ms: int = (
            DEFAULT_PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS),
    ) -> None:
        if medium is None:
            from replica_core.storage.medium import FileMedium

            medium = FileMedium()
        if clock is None:
            from replica_core.clock import SystemClock

            clock = SystemClock()
        if config is None:
            from replica_core.storage.config import LogConfig

            config = LogConfig()
        if isinstance(log_dirs, (str, os.PathLike)):
            log_dirs = [log_dirs]
        self.log_dirs = [os.fspath(d) for d in log_dirs]
        if not self.log_dirs:
            raise ValueError("at least one log dir is required")
        if num_recovery_threads < 1:
            raise ValueError("num_recovery_threads must be at least 1")
        if int(retention_check_interval_ms) < 1:
            raise InvalidConfigurationError(
                f"Invalid value {retention_check_interval_ms} for configuration "
                "log.retention.check.interval.ms: Value must be at least 1")
        if int(initial_task_delay_ms) < 0:
            raise InvalidConfigurationError(
                f"Invalid value {initial_task_delay_ms} for configuration "
                "log.initial.task.delay.ms: Value must be at least 0")
        self.retention_check_interval_ms = int(retention_check_interval_ms)
        """``log.retention.check.interval.ms``: how often the owner calls :meth:`cleanup_logs`."""
        self.initial_task_delay_ms = int(initial_task_delay_ms)
        """``log.initial.task.delay.ms``: when the owner first calls it after startup."""
        _check_expiration_ms(producer_id_expiration_ms)
        interval = producer_id_expiration_check_interval_ms
        if isinstance(interval, bool) or not isinstance(interval, int) \
                or not 1 <= interval <= 2**31 - 1:
            raise InvalidConfigurationError(
                f"Invalid value {interval!r} for configuration "
                f"producer.id.expiration.check.interval.ms: must be an int in [1, {2**31 - 1}]")
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producer_id_expiration_check_interval_ms = interval
        self.config = config
        self.topic_configs = dict(topic_configs or {})
        self.medium = medium
        self.clock = clock
        self.num_recovery_threads = num_recovery_threads
        self.broker_epoch = broker_epoch
        self._jitter_seed = None if rng is None else SegmentJitter.seed_from(rng)
        self._logs: dict[TopicPartition, Log] = {}
        self._failed: dict[TopicPartition, str] = {}  # partitions that could not be loaded
        self._log_dir_of: dict[TopicPartition, str] = {}
        self._dir_count: dict[str, int] = {}
        # checkpoint path -> the entries this manager last wrote there (and made durable)
        self._written: dict[str, OffsetCheckpointContent] = {}
        # checkpoint path -> the logs the entries last written there were read from, in order,
        # and the position of each (written unless an ``include`` chose the logs)
        self._read_from: dict[str, tuple[list[Log], dict[Log, int]]] = {}
        # the logs whose HW was set since the last HW checkpoint (each log adds itself)
        self._hw_changed: set[Log] = set()
        self.loads: dict[str, LogDirLoad] = {}
        self.offline_dirs: set[str] = set()
        self.started = False
        self._next_producer_expiration_check = clock.milliseconds() + interval

    # --- configuration ------------------------------------------------------------------
    def config_for(self, topic: str) -> Any:
        return self.topic_configs.get(topic, self.config)

    def _jitter(self, topic: str, partition: int) -> SegmentJitter | None:
        """The roll-jitter source of a log this manager opens (None: no ``rng`` injected)."""
        if self._jitter_seed is None:
            return None
        return SegmentJitter(self._jitter_seed, f"{topic}-{int(partition)}")

    # --- startup (§5.1) -----------------------------------------------------------------
    def startup(self, progress: Progress | None = None) -> dict[str, LogDirLoad]:
        """Load every partition of every log dir; ``progress(log_dir, partition_dir, done, total)``."""
        for d in self.log_dirs:
            if d in self.offline_dirs:
                continue
            try:
                self.medium.makedirs(d)
                self.loads[d] = self._load_dir(d, progress)
            except (OSError, KafkaStorageError) as e:
                log.error("log dir %s failed to load: %s", d, e)
                self._mark_offline(d, str(e))
        self.started = True
        return self.loads

    def read_broker_epoch_from_clean_shutdown_files(self) -> int:
        """The broker epoch the clean-shutdown markers recorded, read before :meth:`startup`
        deletes them (Kafka's ``readBrokerEpochFromCleanShutdownFiles``, sent as the
        registration's ``PreviousBrokerEpoch``, KIP-966): −1 unless every log dir is online
        and holds a marker with the same epoch."""
        epoch = -1
        for d in self.log_dirs:
            if d in self.offline_dirs:
                return -1
            found = self._marker(d).read_broker_epoch()
            if found is None or (epoch != -1 and found != epoch):
                return -1
            epoch = found
        return epoch

    def _marker(self, log_dir: str) -> Any:
        return CleanShutdownFile(self.medium, log_dir)

    def _read_checkpoint(self, log_dir: str, name: str, load: LogDirLoad) -> dict[TopicPartition, int]:
        path = os.path.join(log_dir, name)
        if not self.medium.exists(path):
            return {}
        try:
            entries = dict(OffsetCheckpointFile(self.medium, path).read())
        except (CorruptCheckpointError, OSError, ValueError) as e:
            load.warnings.append(f"{name} unreadable ({e}); treating it as empty")
            log.warning("%s: %s unreadable (%s); treating it as empty", log_dir, name, e)
            return {}
        negative = [tp for tp, offset in entries.items() if offset < 0]
        if negative:
            # no offset is negative: such an entry is damage, and only its partition's
            load.warnings.append(f"{name}: negative offsets for {sorted(negative)} ignored")
            for tp in negative:
                del entries[tp]
        return entries

    def _partition_dirs(self, log_dir: str, load: LogDirLoad) -> dict[str, tuple[str, int]]:
        """The partition directories to load, in listing order: path -> (topic, partition)."""
        out: dict[str, tuple[str, int]] = {}
        prefix = _join(log_dir, "")  # what _join puts before a name in log_dir (joined once)
        for name in self.medium.list_dirs(log_dir):  # files (the checkpoints) are not partitions
            path = prefix + name  # _join(log_dir, name): os.path.join for a listed name
            if name == REMOTE_INDEX_CACHE_DIR or name.startswith(CLUSTER_METADATA_TOPIC + "-"):
                load.skipped_dirs.append(name)
                continue
            if name.endswith("-delete"):
                # marked for deletion before the restart; Kafka deletes it after
                # file.delete.delay.ms, the step model at once
                try:
                    self.medium.rmtree(path)
                    load.deleted_dirs.append(name)
                except OSError as e:
                    load.warnings.append(f"could not delete {name}: {e}")
                continue
            if name.endswith(("-stray", "-future")):
                load.skipped_dirs.append(name)
                continue
            try:
                tp = parse_topic_partition(name)
            except KafkaStorageError as e:
                load.skipped_dirs.append(name)
                load.warnings.append(str(e))
                continue
            out[path] = tp
        return out

    def _load_dir(self, log_dir: str, progress: Progress | None) -> LogDirLoad:
        marker = self._marker(log_dir)
        load = LogDirLoad(log_dir)
        load.had_clean_shutdown = bool(marker.exists())
        if load.had_clean_shutdown:
            # KAFKA-10471: a crash while loading must count as unclean; the directory sync
            # makes that hold after a power failure too
            marker.delete()
            self.medium.fsync_dir(log_dir)
        recovery_points = self._read_checkpoint(log_dir, RECOVERY_POINT_CHECKPOINT_FILE, load)
        log_starts = self._read_checkpoint(log_dir, LOG_START_OFFSET_CHECKPOINT_FILE, load)
        high_watermarks = self._read_checkpoint(log_dir, HIGH_WATERMARK_CHECKPOINT_FILE, load)
        tps = self._partition_dirs(log_dir, load)
        dirs = list(tps)
        total = len(dirs)

        def open_one(path: str, had_clean_shutdown: bool = load.had_clean_shutdown) -> Log:
            tp = tps[path]  # the name parsed once, when listed
            lg = Log.open(
                path,
                self.config_for(tp[0]),
                medium=self.medium,
                clock=self.clock,
                recovery_point=recovery_points.get(tp, 0),
                log_start_offset=log_starts.get(tp, 0),
                had_clean_shutdown=had_clean_shutdown,
                jitter_source=self._jitter(*tp),
                producer_id_expiration_ms=self.producer_id_expiration_ms,
                topic_partition=tp,
            )
            lg.update_high_watermark(high_watermarks.get(tp, 0))
            return lg

        recover = functools.partial(open_one, had_clean_shutdown=False)
        workers = min(self.num_recovery_threads, max(1, total))
        if workers == 1:
            # one recovery thread: load in this thread, in directory order (no pool to pay for)
            results: Iterable[tuple[str, Callable[[], Log]]] = (
                (path, functools.partial(open_one, path)) for path in dirs)
            self._collect(log_dir, load, results, total, progress, recover)
        else:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="log-recovery") as pool:
                futures = [(path, pool.submit(open_one, path).result) for path in dirs]
                self._collect(log_dir, load, futures, total, progress, recover)
        return load

    def _load_or_isolate(self, path: str, result: Callable[[], Log], load: LogDirLoad,
                         recover: Callable[[str], Log]) -> Log | None:
        """One partition's log; None when its data cannot be loaded (the partition is then
        recorded as failed). I/O errors are the directory's (``KafkaStorageError``)."""
        try:
            return result()
        except (OSError, KafkaStorageError) as e:
            load.failed = f"{os.path.basename(path)}: {e}"
            raise KafkaStorageError(f"error loading {path}: {e}") from e
        except Exception as e:  # noqa: BLE001 - bad data in this partition, whatever it broke
            first = f"{type(e).__name__}: {e}"
        tp = parse_topic_partition(path)
        if load.had_clean_shutdown:
            log.warning("%s failed to load (%s); loading it again with full recovery", path, first)
            try:
                lg = recover(path)
            except (OSError, KafkaStorageError) as e:
                load.failed = f"{os.path.basename(path)}: {e}"
                raise KafkaStorageError(f"error loading {path}: {e}") from e
            except Exception as e:  # noqa: BLE001
                first = f"{first}; with full recovery: {type(e).__name__}: {e}"
            else:
                load.recovered_partitions[tp] = first
                if lg.recovery_report is not None:
                    lg.recovery_report.warnings.append(
                        f"first load failed ({first}); loaded with full recovery")
                return lg
        log.error("%s cannot be loaded; the partition is offline: %s", path, first)
        load.failed_partitions[tp] = first
        load.warnings.append(f"{os.path.basename(path)} is offline: {first}")
        self._failed[tp] = first
        return None

    def _collect(self, log_dir: str, load: LogDirLoad,
                 results: Iterable[tuple[str, Callable[[], Log]]], total: int,
                 progress: Any, recover: Callable[[str], Log]) -> None:
        """Register loaded logs in directory order; an I/O failure takes the dir offline, bad
        data only its partition (see the module docstring)."""
        done = 0
        for path, result in results:
            lg = self._load_or_isolate(path, result, load, recover)
            if lg is None:
                done += 1
                if progress is not None:
                    progress(log_dir, path, done, total)
                continue
            tp = (lg.topic, lg.partition)
            if tp in self._logs:
                raise KafkaStorageError(
                    f"duplicate log directories for {tp[0]}-{tp[1]}: "
                    f"{self._logs[tp].dir} and {lg.dir}"
                )
            self._logs[tp] = lg
            lg.high_watermark_changes = self._hw_changed
            self._place(tp, log_dir)
            if lg.recovery_report is not None:
                load.reports[tp] = lg.recovery_report
            done += 1
            load.loaded += 1
            if progress is not None:
                progress(log_dir, path, done, total)
        return load

    def _mark_offline(self, log_dir: str, reason: str) -> None:
        self.offline_dirs.add(log_dir)
        load = self.loads.setdefault(log_dir, LogDirLoad(log_dir))
        load.failed = load.failed or reason
        for tp in [tp for tp, d in self._log_dir_of.items() if d == log_dir]:
            lg = self._logs.pop(tp)
            self._unplace(tp)
            try:
                lg.close()
            except Exception:  # noqa: BLE001 - the dir is already failing
                pass

    # --- logs ----------------------------------------------------------------------------
    @property
    def logs(self) -> dict[TopicPartition, Log]:
        return dict(self._logs)

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def log_dir_of(self, topic: str, partition: int) -> str | None:
        return self._log_dir_of.get((topic, partition))

    def create_log(
        self, topic: str, partition: int, *, log_dir: str | None = None, config: Any = None
    ) -> Log:
        """The existing log, or a new empty one in ``log_dir`` (default: the dir with fewest logs)."""
        tp = (topic, partition)
        existing = self._logs.get(tp)
        if existing is not None:
            return existing
        failed = self._failed.get(tp)
        if failed is not None:
            raise KafkaStorageError(
                f"{topic}-{partition} failed to load and is offline: {failed}")
        log_dirs = self.log_dirs
        if log_dir is None and len(log_dirs) == 1 and not self.offline_dirs:
            log_dir = log_dirs[0]  # the only dir, online: the choice below, made at once
        elif log_dir is None or self.offline_dirs or log_dir not in log_dirs:
            online = [d for d in log_dirs if d not in self.offline_dirs]
            if not online:
                raise KafkaStorageError("no online log directory")
            if log_dir is None:
                counts = self._dir_count
                log_dir = min(online, key=lambda d: (counts.get(d, 0), online.index(d)))
            elif log_dir not in online:
                raise KafkaStorageError(f"log dir {log_dir} is offline or unknown")
        path = _join(log_dir, f"{topic}-{partition}")
        if config is None:
            config = self.config_for(topic)
        if self.medium.exists(path):
            # a directory nobody loaded may hold anything: recover it fully
            lg = Log.open(path, config, medium=self.medium, clock=self.clock,
                          had_clean_shutdown=False, jitter_source=self._jitter(topic, partition),
                          producer_id_expiration_ms=self.producer_id_expiration_ms)
        else:
            # what Log.open does for a directory that does not exist, the name already parsed
            lg = Log._create(path, config, self.medium, self.clock, 0, 0, True,
                             (topic, int(partition)), jitter_source=self._jitter(topic, partition),
                             producer_id_expiration_ms=self.producer_id_expiration_ms)
        self._adopt(tp, lg, log_dir)
        return lg

    def _adopt(self, tp: TopicPartition, lg: Log, log_dir: str) -> None:
        """A log just made for ``tp`` in ``log_dir`` joins this manager's logs."""
        self._logs[tp] = lg
        lg.high_watermark_changes = self._hw_changed
        if tp in self._log_dir_of:
            self._place(tp, log_dir)
        else:  # _place(tp, log_dir) for a partition placed nowhere yet, in line
            self._log_dir_of[tp] = log_dir
            counts = self._dir_count
            counts[log_dir] = counts.get(log_dir, 0) + 1

    def create_logs(self, tps: Iterable[tuple[str, int]], *, log_dir: str) -> None:
        """:meth:`create_log` of each of ``tps`` in ``log_dir``, in order (a LeaderAndIsr's
        partitions): a partition with a log keeps it, the others get theirs as
        :meth:`create_log` makes them. New empty directories under a config
        :meth:`Log._creates_at_0_in_one_step` accepts are made where nothing is, a run of one
        topic's in one medium call (``Medium.create_new_dirs_with_files``), and their logs by
        :meth:`Log._create_at_0`, with what does not depend on the partition (the checks of
        ``log_dir``, the directory's file list, the config's values) worked out once per
        call; anything else goes through :meth:`create_log` itself."""
        if self.offline_dirs or log_dir not in self.log_dirs:
            for topic, partition in tps:
                self.create_log(topic, partition, log_dir=log_dir)
            return
        logs = self._logs
        failed = self._failed
        # topic -> (config, its new directory's files, its values), or None: create_log's way
        shapes: dict[str, tuple[Any, tuple[tuple[str, int], ...], tuple[Any, ...]] | None] = {}
        run_topic = None
        run: list[tuple[int, str]] = []  # run_topic's partitions to make at 0, with dir names
        for topic, partition in tps:
            if (topic, partition) in logs:
                continue
            shape = shapes.get(topic, _UNSET)
            if shape is _UNSET:
                config = self.config_for(topic)
                shape = shapes[topic] = (
                    (config, _new_dir_files(0, int(config.segment_index_bytes)),
                     _cached_config_values(config))
                    if Log._creates_at_0_in_one_step(config) else None)
            at_0 = shape is not None and failed.get((topic, partition)) is None
            if at_0 and topic == run_topic:
                run.append((partition, f"{topic}-{partition}"))
                continue
            if run:
                self._create_run_at_0(log_dir, run_topic, shapes[run_topic], run)  # type: ignore[arg-type]
                run = []
            if at_0:
                run_topic = topic
                run.append((partition, f"{topic}-{partition}"))
            else:
                self.create_log(topic, partition, log_dir=log_dir)
        if run:
            self._create_run_at_0(log_dir, run_topic, shapes[run_topic], run)  # type: ignore[arg-type]

    def _create_run_at_0(self, log_dir: str, topic: str,
                         shape: tuple[Any, tuple[tuple[str, int], ...], tuple[Any, ...]],
                         run: list[tuple[int, str]]) -> None:
        """:meth:`create_logs`'s run of ``topic``'s ``(partition, directory name)`` in
        ``log_dir``: the directories made in one medium call, a log at 0 in each made
        (:meth:`Log._create_at_0`), :meth:`create_log` for one already there."""
        config, files, values = shape
        medium = self.medium
        clock = self.clock
        expiration = self.producer_id_expiration_ms
        create_at_0 = Log._create_at_0
        adopt = self._adopt
        jitter = self._jitter
        prefix = _join(log_dir, "")  # what _join puts before a name in log_dir (joined once)
        made = medium.create_new_dirs_with_files(log_dir, [name for _, name in run], files)
        for (partition, name), new in zip(run, made, strict=True):
            if not new:
                self.create_log(topic, partition, log_dir=log_dir)
                continue
            adopt((topic, partition),
                  create_at_0(prefix + name, config, medium, clock, (topic, int(partition)),
                              jitter(topic, partition), expiration, values),
                  log_dir)

    def _place(self, tp: TopicPartition, log_dir: str) -> None:
        self._unplace(tp)
        self._log_dir_of[tp] = log_dir
        self._dir_count[log_dir] = self._dir_count.get(log_dir, 0) + 1

    def _unplace(self, tp: TopicPartition) -> None:
        old = self._log_dir_of.pop(tp, None)
        if old is not None:
            self._dir_count[old] -= 1

    def delete_log(self, topic: str, partition: int) -> bool:
        """Remove a partition's log and its directory."""
        lg = self._logs.pop((topic, partition), None)
        if lg is None:
            return False
        self._unplace((topic, partition))
        lg.delete()
        return True

    def truncate_to(self, offsets: dict[TopicPartition, int]) -> None:
        """Truncate logs and checkpoint recovery points of the affected dirs (§4.1)."""
        dirs: dict[str, None] = {}  # in first-truncated order (a set's order is the hash seed's)
        for tp, offset in offsets.items():
            lg = self._logs.get(tp)
            if lg is not None and lg.truncate_to(offset):
                dirs[self._log_dir_of[tp]] = None
        for d in dirs:
            self._checkpoint_dir(d, RECOVERY_POINT_CHECKPOINT_FILE, _RECOVERY_POINT)

    def remove_expired_producers_if_due(self) -> int:
        """Kafka's ``PeriodicProducerExpirationCheck``: every
        ``producer.id.expiration.check.interval.ms`` (600000) on the injected clock, each log
        forgets producers idle for ``producer.id.expiration.ms`` (86400000). Kafka schedules the
        check per log from its creation; one schedule for all logs here. Returns how many
        producer ids were removed (0 when not due)."""
        now = self.clock.milliseconds()
        if now < self._next_producer_expiration_check:
            return 0
        interval = self.producer_id_expiration_check_interval_ms
        self._next_producer_expiration_check = now + interval - (
            (now - self._next_producer_expiration_check) % interval)
        return sum(len(lg.remove_expired_producers(now)) for lg in self._logs.values()
                   if not lg.closed)

    def flush_dirty_logs(self) -> int:
        """The ``flush.ms`` scheduler: flush every overdue log; returns how many were flushed."""
        return sum(1 for lg in self._logs.values() if lg.flush_if_due())

    # --- retention (LogManager.cleanupLogs; rules in storage/retention.py) ---------------------
    def cleanup_logs(self) -> int:
        """One retention check over every log (the owner calls it every
        ``log.retention.check.interval.ms``, first ``log.initial.task.delay.ms`` after startup);
        returns the number of segments deleted.

        Logs with the ``delete`` policy get :meth:`Log.delete_old_segments` (Kafka's retention
        task; for ``compact,delete`` logs its cleaner thread does the same); purely compacted
        logs are the cleaner's and are left alone. The log-start-offset checkpoint of every dir
        whose logs moved is written at once (Kafka writes it on its own schedule; a crash in
        between only makes the loader take the first segment's base offset). An I/O error takes
        the log's dir offline, as Kafka's ``maybeHandleIOException`` does.

        A log still as it was created (one empty segment never written, ``segments_made``
        false) has nothing any rule could delete and is passed over without a call."""
        total = 0
        moved: dict[str, None] = {}   # dirs in first-moved order
        for tp, lg in list(self._logs.items()):
            if not lg.segments_made and not lg.closed:
                continue  # what delete_old_segments answers for it: 0, nothing read
            cfg = lg.config
            if cfg.compact and not cfg.delete:
                continue
            log_dir = self._log_dir_of.get(tp)
            if log_dir in self.offline_dirs:
                continue
            try:
                n = lg.delete_old_segments()
            except (OSError, KafkaStorageError) as e:
                if log_dir is not None:
                    self._mark_offline(log_dir, f"deleting old segments of {tp[0]}-{tp[1]}: {e}")
                continue
            if n:
                total += n
                if log_dir is not None:
                    moved[log_dir] = None
        for d in moved:
            self._checkpoint_dir(d, LOG_START_OFFSET_CHECKPOINT_FILE, _LOG_START_OFFSET,
                                 _LOG_START_ABOVE_FIRST_SEGMENT)
        return total

    def next_file_deletion_ms(self) -> int | None:
        """When the earliest ``.deleted`` segment of any log is due (``file.delete.delay.ms``)."""
        dues = [due for lg in self._logs.values()
                if (due := lg.next_file_deletion_ms) is not None]
        return min(dues) if dues else None

    def delete_due_files(self) -> int:
        """Remove every ``.deleted`` segment that is due; returns how many."""
        total = 0
        for tp, lg in list(self._logs.items()):
            try:
                total += lg.delete_due_files()
            except OSError as e:
                log_dir = self._log_dir_of.get(tp)
                if log_dir is not None:
                    self._mark_offline(log_dir, f"deleting files of {tp[0]}-{tp[1]}: {e}")
        return total

    # --- checkpoints (§1.10) --------------------------------------------------------------
    def _logs_in(self, log_dir: str) -> dict[TopicPartition, Log]:
        if len(self.log_dirs) == 1 and log_dir in self.log_dirs:
            return dict(self._logs)  # one log dir holds every log
        return {tp: lg for tp, lg in self._logs.items() if self._log_dir_of.get(tp) == log_dir}

    def _checkpoint_dir(
        self,
        log_dir: str,
        name: str,
        value: Callable[[Log], int],
        include: Callable[[Log], bool] | None = None,
        changed: set[Log] | None = None,
    ) -> None:
        """Write checkpoint ``name`` of ``log_dir``: ``value`` of each of its logs (those
        ``include`` accepts), unless this manager last made exactly that durable there.
        ``changed``: the logs whose ``value`` may have moved since this manager last wrote the
        file (the others are not read again when the same logs are checkpointed)."""
        if log_dir in self.offline_dirs:
            self._read_from.pop(os.path.join(log_dir, name), None)  # read them all if ever back
            return
        # one log dir holds every log: read them in place (nothing here adds or drops a log)
        logs = self._logs if len(self.log_dirs) == 1 and log_dir in self.log_dirs \
            else self._logs_in(log_dir)
        path = os.path.join(log_dir, name)
        last = self._written.get(path)
        sources = None
        content = None
        if include is None:
            keys = list(logs)
            sources = list(logs.values())
            read = None if changed is None or last is None else self._read_from.get(path)
            if read is not None and last is not None and changed is not None \
                    and read[0] == sources and last.keys == keys:
                # the same logs as last time: only those in ``changed`` can differ, and only
                # the lines of those that did are formatted again
                offsets = last.offsets[:]
                position = read[1]
                moved = []
                for lg in changed:
                    i = position.get(lg)
                    if i is not None:
                        offset = value(lg)
                        if offset != offsets[i]:
                            offsets[i] = offset
                            moved.append(i)
                if not moved and self.medium.exists(path):
                    return  # as below: the same content as last made durable
                content = last.moved(offsets, moved)
            else:
                offsets = list(map(value, sources))
        else:
            keys, offsets = [], []
            for tp, lg in logs.items():
                if include(lg):
                    keys.append(tp)
                    offsets.append(value(lg))
        if content is None and last is not None and last.same_entries(keys, offsets) \
                and self.medium.exists(path):
            return  # same content as this manager last made durable: rewriting changes nothing
        try:
            checkpoint = OffsetCheckpointFile(self.medium, path)
            if content is None:
                # the lines of partitions whose offset did not move since the last write are
                # reused
                content = OffsetCheckpointContent(keys, offsets) if last is None \
                    else last.update(keys, offsets)
            checkpoint.write_content(content)
        except OSError as e:
            self._written.pop(path, None)
            self._read_from.pop(path, None)
            self._mark_offline(log_dir, f"writing {name}: {e}")
        else:
            self._written[path] = content
            if sources is None:
                self._read_from.pop(path, None)
            else:
                read = self._read_from.get(path)
                if read is None or read[0] != sources:
                    self._read_from[path] = (sources, {lg: i for i, lg in enumerate(sources)})

    def checkpoint_recovery_points(self) -> None:
        """Write ``recovery-point-offset-checkpoint`` in every online log dir."""
        for d in self.log_dirs:
            self._checkpoint_dir(d, RECOVERY_POINT_CHECKPOINT_FILE, _RECOVERY_POINT)

    def checkpoint_log_start_offsets(self) -> None:
        """Write ``log-start-offset-checkpoint``: only logs whose LSO is above their first segment."""
        for d in self.log_dirs:
            self._checkpoint_dir(
                d,
                LOG_START_OFFSET_CHECKPOINT_FILE,
                _LOG_START_OFFSET,
                _LOG_START_ABOVE_FIRST_SEGMENT,
            )

    def checkpoint_high_watermarks(self) -> None:
        """Write ``replication-offset-checkpoint`` (ReplicaManager's job in Kafka)."""
        changed = self._hw_changed
        for d in self.log_dirs:
            self._checkpoint_dir(d, HIGH_WATERMARK_CHECKPOINT_FILE, _HIGH_WATERMARK,
                                 changed=changed)
        changed.clear()

    # --- shutdown ------------------------------------------------------------------------
    def shutdown(self, broker_epoch: int | None = None) -> None:
        """Flush and close every log, write the checkpoints, then the clean-shutdown markers."""
        epoch = self.broker_epoch if broker_epoch is None else broker_epoch
        for d in self.log_dirs:
            if d in self.offline_dirs:
                continue
            logs = self._logs_in(d)
            try:
                for lg in logs.values():
                    if not lg.closed:
                        lg.flush()
                self._checkpoint_dir(d, RECOVERY_POINT_CHECKPOINT_FILE, _RECOVERY_POINT)
                self._checkpoint_dir(
                    d,
                    LOG_START_OFFSET_CHECKPOINT_FILE,
                    _LOG_START_OFFSET,
                    _LOG_START_ABOVE_FIRST_SEGMENT,
                )
                self._checkpoint_dir(d, HIGH_WATERMARK_CHECKPOINT_FILE, _HIGH_WATERMARK)
                for lg in logs.values():
                    lg.close()
                load = self.loads.get(d)
                if d not in self.offline_dirs and (load is None or load.complete or load.had_clean_shutdown):
                    self._marker(d).write(epoch)
            except (OSError, KafkaStorageError) as e:
                self._mark_offline(d, str(e))
        self._logs.clear()
        self._log_dir_of.clear()


def load_log_dir(
    log_dir: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    config: Any = None,
    *,
    medium: Any = None,
    clock: Any = None,
    num_recovery_threads: int = 1,
    progress: Progress | None = None,
) -> LogManager:
    """A started :class:`LogManager` over ``log_dir`` (one dir or several)."""
    manager = LogManager(
        log_dir, config, medium=medium, clock=clock, num_recovery_threads=num_recovery_threads
    )
    manager.startup(progress)
    return manager
