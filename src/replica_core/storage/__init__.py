"""One partition's log on disk: media, indexes, checkpoints, leader-epoch cache, the log."""
# ruff: noqa: F401  (re-exports)
from replica_core.storage.checkpoint import (
    CheckpointFile,
    CleanShutdownFile,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
    PartitionMetadata,
    PartitionMetadataFile,
)
from replica_core.storage.config import LogConfig, SegmentJitter
from replica_core.storage.index import OffsetIndex, TimeIndex
from replica_core.storage.leader_epoch import LeaderEpochCache
from replica_core.storage.medium import FileMedium, Medium, MediumFile, MemoryMedium

# log layer (segments, log, loading/recovery, log manager, dump/verify)
# isort: split
from replica_core.storage.loader import LogLoader, RecoveryReport
from replica_core.storage.log import Log, TimestampAndOffset
from replica_core.storage.log_manager import LogManager, load_log_dir
from replica_core.storage.segment import FetchDataInfo, LogOffsetMetadata, LogSegment, LogSegments


def __getattr__(name: str) -> object:
    """``verify_log_dir`` / ``VerifyReport`` load the dump tool (and its schema decoders) only
    when asked for: opening and running logs never needs them."""
    if name in ("verify_log_dir", "VerifyReport"):
        from replica_core.storage import dump

        return getattr(dump, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
