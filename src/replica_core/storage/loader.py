"""Loading one partition directory and recovering it after a crash (Kafka's ``LogLoader``).

KAFKA_SEMANTICS §5.3-5.5. Order of work:

1. temp files: delete ``*.deleted``; drop ``.swap`` files at or above the lowest ``.cleaned``
   offset (an interrupted split), delete ``.cleaned``;
2. complete the remaining swaps: delete the segments they replace, strip the ``.swap`` suffix;
3. open every ``.log``; delete index files without a ``.log``; a missing offset index or an
   index that fails its checks is rebuilt by recovering that segment;
4. after an unclean shutdown, recover every segment from the one containing the recovery point;
   the first segment that loses bytes ends recovery and every later segment is deleted;
5. clamp to the log-start-offset checkpoint, make sure an active segment exists, expand the
   active segment's indexes, trim the leader-epoch cache to the log.

Nothing here raises for bad data: whatever was cut is written into a :class:`RecoveryReport`.
A segment file whose name parses to a base offset but is not the 20-digit name Kafka writes
(``5.log``, ``00000.log``) is reported in ``ignored_files`` and left alone: Kafka parses the
offset and opens the 20-digit name (creating it empty), so it never reads such a file either,
and an empty segment below the end of the log would hide the offsets after it. After a clean
shutdown the active segment must end with a whole batch (appends would otherwise bury a junk
tail between batches); if it does not, it is recovered like a segment after a crash.
Deviations from Kafka: a segment whose offsets overflow its relative range or go backwards is cut
at that batch (Kafka splits overflowed legacy segments, and empties a segment whose rebuilt index
rejects an entry); producer-state snapshots are left to :meth:`Log.open
<replica_core.storage.log.Log.open>`, which loads the producer state once the segments are
loaded (Kafka's loader does it at the end of ``load``, and also snapshots each recovered
segment, which is not done here).
"""
from __future__ import annotations

import bisect
import logging
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from replica_core.errors import CorruptIndexError, KafkaError
from replica_core.storage.segment import (
    CLEANED_FILE_SUFFIX,
    DELETED_FILE_SUFFIX,
    INDEX_SUFFIXES,
    LOG_FILE_SUFFIX,
    SWAP_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    LogOffsetMetadata,
    LogSegment,
    LogSegments,
    is_canonical_file_name,
    last_offsets,
    offset_from_file_name,
)

log = logging.getLogger(__name__)

# KRaft snapshot deletions are handled by the raft layer (LogLoader skips them too)
_SNAPSHOT_DELETE_SUFFIX = ".checkpoint.deleted"
_TEMP_SUFFIXES = (DELETED_FILE_SUFFIX, CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)


@dataclass
class SegmentCut:
    """Bytes removed from one segment by recovery."""

    base_offset: int
    valid_bytes: int
    truncated_bytes: int
    reason: str
    next_offset: int


@dataclass
class RecoveryReport:
    """What loading one partition directory found and changed."""

    dir: str
    had_clean_shutdown: bool
    segments_loaded: int = 0
    deleted_temp_files: list[str] = field(default_factory=list)
    swap_files_completed: list[str] = field(default_factory=list)
    replaced_by_swap: list[str] = field(default_factory=list)
    orphan_index_files: list[str] = field(default_factory=list)
    rebuilt_indexes: list[tuple[int, str]] = field(default_factory=list)
    recovered_segments: list[int] = field(default_factory=list)
    cuts: list[SegmentCut] = field(default_factory=list)
    deleted_segments: list[int] = field(default_factory=list)
    ignored_files: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    log_start_offset: int = 0
    log_end_offset: int = 0
    recovery_point: int = 0

    @property
    def truncated_bytes(self) -> int:
        return sum(c.truncated_bytes for c in self.cuts)

    @property
    def data_lost(self) -> bool:
        """True when recovery removed bytes or whole segments."""
        return bool(self.cuts or self.deleted_segments)

    def summary(self) -> str:
        parts = [f"{self.dir}: {self.segments_loaded} segment(s), LEO {self.log_end_offset}"]
        if self.recovered_segments:
            parts.append(f"recovered {len(self.recovered_segments)}")
        if self.cuts:
            parts.append(
                "cut "
                + ", ".join(
                    f"{c.truncated_bytes} B at segment {c.base_offset} ({c.reason})" for c in self.cuts
                )
            )
        if self.deleted_segments:
            parts.append(f"deleted segments {self.deleted_segments}")
        if self.rebuilt_indexes:
            parts.append(f"rebuilt indexes {[b for b, _ in self.rebuilt_indexes]}")
        return "; ".join(parts)


@dataclass
class LoadedLogOffsets:
    log_start_offset: int
    recovery_point: int
    next_offset_metadata: LogOffsetMetadata


def _canonical_prefix(name: str) -> bool:
    """Does the listed file name start with Kafka's 20-digit offset (below 2**63) and a
    ``.``? Then :func:`offset_from_file_name` is ``int(name[:20])`` and
    :func:`is_canonical_file_name` holds (the other names go through those functions)."""
    return len(name) > 20 and name[20] == "." and name[:20].isdigit() \
        and name[:20].isascii() and name[:20] < "09223372036854775808"


def _strip_suffix(name: str, suffix: str) -> str:
    return name[: -len(suffix)] if suffix and name.endswith(suffix) else name


def trim_epoch_cache(cache: Any, log_end_offset: int, log_start_offset: int) -> None:
    """The load's last word on the leader epoch cache: entries from the log end offset on are
    dropped, then those wholly below the log-start checkpoint (each change written, as Kafka's
    LogLoader does: truncateFromEndAsyncFlush, then truncateFromStartAsyncFlush)."""
    cache.truncate_from_end(log_end_offset)
    cache.truncate_from_start(log_start_offset)


class LogLoader:
    """Runs §5.3 for one partition directory into ``segments``."""

    def __init__(
        self,
        dir: str,
        config: Any,
        medium: Any,
        clock: Any,
        segments: LogSegments,
        *,
        log_start_offset_checkpoint: int = 0,
        recovery_point_checkpoint: int = 0,
        leader_epoch_cache: Any = None,
        had_clean_shutdown: bool = False,
        report: RecoveryReport | None = None,
        jitter_source: Any = None,
    ) -> None:
        self.dir = dir
        self.config = config
        self.medium = medium
        self.clock = clock
        self.segments = segments
        self.log_start_offset_checkpoint = int(log_start_offset_checkpoint)
        self.recovery_point_checkpoint = int(recovery_point_checkpoint)
        self.leader_epoch_cache = leader_epoch_cache
        self.had_clean_shutdown = had_clean_shutdown
        self.report = report or RecoveryReport(dir, had_clean_shutdown)
        self.max_index_size = int(config.segment_index_bytes)
        self.jitter_source = jitter_source  # segment roll jitter (LogSegment.open)
        self._names: list[str] | None = None  # the directory's file names (see _files)
        #: base offset -> (segment, header rows of its batches) for each segment recovered
        #: in this load: what its recovery scan found, for the producer-state rebuild
        self.recovered_headers: dict[int, tuple[LogSegment, np.ndarray]] = {}

    # --- helpers ----------------------------------------------------------------------
    def _files(self) -> list[str]:
        """The file names in the directory, sorted (listed once until a step changes them)."""
        names = self._names
        if names is None:
            names = self._names = self.medium.list_files(self.dir)
        return names

    @property
    def file_names(self) -> list[str] | None:
        """The directory's file names as last listed, unless a removal or a completed swap
        changed them since (None then). Past that listing the loader makes, renames and deletes
        only segment files (a new active segment, rebuilt indexes, segments cut by recovery),
        so every other name in it, a producer snapshot's among them, is still current."""
        return self._names

    def _ignore(self, name: str) -> None:
        """A file whose name parses to an offset but is not Kafka's 20-digit spelling."""
        self.report.ignored_files.append(name)
        self.report.warnings.append(
            f"{name}: not a 20-digit segment file name; left alone, not loaded")

    def _remove(self, name: str) -> None:
        self._names = None
        try:
            self.medium.remove(os.path.join(self.dir, name))
        except FileNotFoundError:
            pass

    def _open_segment(self, base: int, suffix: str = "") -> LogSegment:
        return LogSegment.open(
            self.medium, self.dir, base, self.config, self.clock,
            file_already_exists=True, suffix=suffix, jitter_source=self.jitter_source,
        )

    # --- step 1-4: temp files and swaps ---------------------------------------------
    def _remove_temp_files_and_collect_swaps(self) -> list[str]:
        swaps: list[str] = []
        cleaned: list[str] = []
        min_cleaned = None
        for name in self._files():
            if not name.endswith(_TEMP_SUFFIXES):
                continue  # most names: none of the three
            if name.endswith(DELETED_FILE_SUFFIX) and not name.endswith(_SNAPSHOT_DELETE_SUFFIX):
                self._remove(name)
                self.report.deleted_temp_files.append(name)
            elif name.endswith(CLEANED_FILE_SUFFIX):
                try:
                    off = offset_from_file_name(name)
                    min_cleaned = off if min_cleaned is None else min(min_cleaned, off)
                except ValueError:
                    pass
                cleaned.append(name)
            elif name.endswith(SWAP_FILE_SUFFIX):
                swaps.append(name)
        valid_swaps = []
        for name in swaps:
            try:
                off = offset_from_file_name(name)
            except ValueError:
                self.report.ignored_files.append(name)
                continue
            if not is_canonical_file_name(name):
                self._ignore(name)
                continue
            if min_cleaned is not None and off >= min_cleaned:
                # part of a split that never completed (KAFKA-6264)
                self._remove(name)
                self.report.deleted_temp_files.append(name)
            else:
                valid_swaps.append(name)
        for name in cleaned:
            self._remove(name)
            self.report.deleted_temp_files.append(name)
        return valid_swaps

    def _complete_swaps(self, swaps: list[str]) -> None:
        min_swap = None
        max_swap = None
        for name in swaps:
            if not _strip_suffix(name, SWAP_FILE_SUFFIX).endswith(LOG_FILE_SUFFIX):
                continue
            base = offset_from_file_name(name)
            seg = self._open_segment(base, SWAP_FILE_SUFFIX)
            try:
                nxt = self._next_offset_by_scan(seg)
            finally:
                seg.close_handlers()
            min_swap = base if min_swap is None else min(min_swap, base)
            max_swap = nxt if max_swap is None else max(max_swap, nxt)
        if min_swap is not None and max_swap is not None:
            for name in self._files():
                if name.endswith(SWAP_FILE_SUFFIX):
                    continue
                try:
                    off = offset_from_file_name(name)
                except ValueError:
                    continue
                if min_swap <= off < max_swap:
                    self._remove(name)
                    self.report.replaced_by_swap.append(name)
        for name in list(self._files()):
            if name.endswith(SWAP_FILE_SUFFIX) and is_canonical_file_name(name):
                self._names = None
                self.medium.rename(
                    os.path.join(self.dir, name),
                    os.path.join(self.dir, _strip_suffix(name, SWAP_FILE_SUFFIX)),
                )
                self.report.swap_files_completed.append(name)

    @staticmethod
    def _next_offset_by_scan(seg: LogSegment) -> int:
        """Next offset of a swap segment from its batches (its index may be stale or absent)."""
        nxt = seg.base_offset
        try:
            for headers in seg.scan_headers(0):
                nxt = int(last_offsets(headers[-1:])[0]) + 1
        except KafkaError:
            pass
        return nxt

    # --- step 5: segments --------------------------------------------------------------
    def _index_problem(self, seg: LogSegment, time_index_new: bool) -> str | None:
        """Why the segment's indexes cannot be trusted, or None.

        Kafka only checks that the offset index exists (``sanityCheck``) and relies on recovery
        for the rest; we also run the index modules' sanity checks and verify that the entries
        are monotonic and point inside the ``.log`` so that a garbage index is rebuilt even after
        a clean shutdown.
        """
        if not self.medium.exists(seg.offset_index_path):
            return "missing offset index"
        try:
            seg.offset_index.sanity_check()
            if not time_index_new:
                seg.time_index.sanity_check()
        except CorruptIndexError as e:
            return f"corrupt index: {e}"
        try:
            raw = self.medium.read_bytes(seg.offset_index_path)
            entries = np.frombuffer(raw, dtype=">i4", count=(len(raw) // 8) * 2).reshape(-1, 2)
            if len(entries):
                rel, pos = entries[:, 0], entries[:, 1]
                if (
                    rel[0] < 0
                    or np.any(np.diff(rel.astype(np.int64)) <= 0)
                    or np.any(np.diff(pos.astype(np.int64)) < 0)
                    or pos[0] < 0
                    or int(pos[-1]) >= max(seg.size, 1)
                ):
                    return "offset index entries out of order or beyond the log"
            if not time_index_new:
                raw = self.medium.read_bytes(seg.time_index_path)
                n = len(raw) // 12
                if n:
                    arr = np.frombuffer(raw, dtype=np.dtype([("ts", ">i8"), ("rel", ">i4")]), count=n)
                    ts = arr["ts"].astype(np.int64)
                    rel = arr["rel"].astype(np.int64)
                    if np.any(np.diff(ts) <= 0) or np.any(np.diff(rel) < 0) or rel[0] < 0:
                        return "time index entries out of order"
        except OSError as e:
            return f"unreadable index: {e}"
        return None

    def _recover_segment(self, seg: LogSegment) -> int:
        result = seg.recover(self.leader_epoch_cache)
        self.recovered_headers[seg.base_offset] = (seg, result.headers)
        self.report.recovered_segments.append(seg.base_offset)
        if result.truncated_bytes > 0:
            self.report.cuts.append(
                SegmentCut(
                    seg.base_offset, result.valid_bytes, result.truncated_bytes,
                    result.reason, result.next_offset,
                )
            )
        return result.truncated_bytes

    def _load_segment_files(self) -> None:
        names = self._files()
        present = set(names)
        for name in names:
            if name.endswith(INDEX_SUFFIXES):
                if _canonical_prefix(name):  # offset_from_file_name's digits, as they are
                    log_name = name[:20] + LOG_FILE_SUFFIX
                else:
                    try:
                        base = offset_from_file_name(name)
                    except ValueError:
                        self.report.ignored_files.append(name)
                        continue
                    log_name = f"{base:020d}{LOG_FILE_SUFFIX}"
                if log_name not in present:
                    self._remove(name)
                    self.report.orphan_index_files.append(name)
        log_names = []
        for name in names:
            if not name.endswith(LOG_FILE_SUFFIX):
                continue
            if _canonical_prefix(name):
                log_names.append((int(name[:20]), name))
                continue
            try:
                base = offset_from_file_name(name)
            except ValueError:
                self.report.ignored_files.append(name)
                continue
            if is_canonical_file_name(name):
                log_names.append((base, name))
            else:
                self._ignore(name)
        log_names.sort()
        log_bases = [b for b, _ in log_names]
        for base, _name in log_names:
            time_index_new = f"{base:020d}{TIME_INDEX_FILE_SUFFIX}" not in present
            seg = self._open_segment(base)
            will_recover = not self.had_clean_shutdown and self._in_recovery_range(seg, log_bases)
            problem = None
            if not will_recover or not self.medium.exists(seg.offset_index_path):
                problem = self._index_problem(seg, time_index_new)
            if problem is not None:
                self.report.rebuilt_indexes.append((base, problem))
                self._recover_segment(seg)
            elif time_index_new:
                seg.time_index.resize(0)
            self.segments.add(seg)
        self.report.segments_loaded = len(self.segments)

    def _in_recovery_range(self, seg: LogSegment, log_bases: list[int]) -> bool:
        """Will step 6 recover this segment anyway (it is at/after the recovery point's segment)?"""
        i = bisect.bisect_right(log_bases, seg.base_offset)
        return i >= len(log_bases) or log_bases[i] > self.recovery_point_checkpoint

    # --- step 6: recovery ------------------------------------------------------------
    def _delete_segments(self, segs: list[LogSegment]) -> None:
        for seg in segs:
            self.segments.remove(seg.base_offset)
            seg.close_handlers()
            try:
                seg.change_file_suffixes("", DELETED_FILE_SUFFIX)
            except (OSError, KafkaError):
                pass
            seg.delete()
            self.report.deleted_segments.append(seg.base_offset)

    def _recover_log(self) -> tuple[int, int]:
        if not self.had_clean_shutdown:
            unflushed = self.segments.values(self.recovery_point_checkpoint, 2**63 - 1)
            already = set(self.report.recovered_segments)
            for i, seg in enumerate(unflushed):
                if seg.base_offset in already:
                    truncated = next(
                        (c.truncated_bytes for c in self.report.cuts if c.base_offset == seg.base_offset), 0
                    )
                else:
                    try:
                        truncated = self._recover_segment(seg)
                    except (KafkaError, OSError) as e:
                        self.report.warnings.append(
                            f"segment {seg.base_offset}: {e}; truncating it to its base offset"
                        )
                        size = seg.size
                        seg.truncate_to(seg.base_offset)
                        truncated = size - seg.size
                        if truncated:
                            self.report.cuts.append(
                                SegmentCut(seg.base_offset, seg.size, truncated, "error", seg.base_offset)
                            )
                if truncated > 0:
                    self._delete_segments(unflushed[i + 1 :])
                    break
        if self.segments:
            self._check_active_tail(self.segments.last)

        log_end: int | None = None
        if self.segments:
            leo = self.segments.last.read_next_offset()
            if leo >= self.log_start_offset_checkpoint:
                log_end = leo
            else:
                self.report.warnings.append(
                    f"log end offset {leo} below log start offset checkpoint "
                    f"{self.log_start_offset_checkpoint}: deleting all segments"
                )
                self._delete_segments(list(self.segments))
                if self.leader_epoch_cache is not None:
                    self.leader_epoch_cache.clear_and_flush()
        if not self.segments:
            self.segments.add(
                LogSegment.open(
                    self.medium, self.dir, self.log_start_offset_checkpoint, self.config,
                    self.clock, jitter_source=self.jitter_source,
                )
            )
        if self.had_clean_shutdown and log_end is not None:
            return log_end, log_end
        leo = log_end if log_end is not None else self.segments.last.read_next_offset()
        return min(self.recovery_point_checkpoint, leo), leo

    def _check_active_tail(self, seg: LogSegment) -> None:
        """The active segment, unless recovered in this load (a clean shutdown, or a recovery
        point past it), must end with a whole batch, else it is recovered now (Kafka's reader
        skips a tail of up to 17 bytes and appends after it; a longer one fails the load)."""
        if seg.base_offset in self.report.recovered_segments:
            return
        try:
            clean = seg.tail_is_clean()
        except (KafkaError, OSError, ValueError) as e:
            self.report.warnings.append(f"segment {seg.base_offset}: {e}")
            clean = False
        if not clean:
            self.report.warnings.append(
                f"segment {seg.base_offset} does not end with a whole batch; recovering it")
            self._recover_segment(seg)

    def load(self) -> LoadedLogOffsets:
        """Run every step; the segments end up in ``self.segments``."""
        swaps = self._remove_temp_files_and_collect_swaps()
        if swaps:
            self._names = None
            self._complete_swaps(swaps)
            self._names = None  # list again: completing swaps renames and removes files
        self.segments.clear()
        self._load_segment_files()
        recovery_point, leo = self._recover_log()
        active = self.segments.last
        for base, (seg, _) in self.recovered_headers.items():
            if seg is not active and self.segments.get(base) is seg:
                # recovery left its indexes built; an inactive segment's wait for first use
                seg.drop_indexes()
        active.resize_indexes(self.max_index_size)
        log_start = max(self.log_start_offset_checkpoint, self.segments.first.base_offset)
        if self.leader_epoch_cache is not None:
            trim_epoch_cache(self.leader_epoch_cache, leo, self.log_start_offset_checkpoint)
        self.report.log_start_offset = log_start
        self.report.log_end_offset = leo
        self.report.recovery_point = recovery_point
        return LoadedLogOffsets(
            log_start, recovery_point, LogOffsetMetadata(leo, active.base_offset, active.size)
        )
