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
from replica_core.storage.dump import VerifyReport, verify_log_dir
from replica_core.storage.loader import LogLoader, RecoveryReport
from replica_core.storage.log import Log, TimestampAndOffset
from replica_core.storage.log_manager import LogManager, load_log_dir
from replica_core.storage.segment import FetchDataInfo, LogOffsetMetadata, LogSegment, LogSegments
