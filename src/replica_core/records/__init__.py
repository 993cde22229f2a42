"""Kafka's record formats: v2 batches (and legacy v0/v1 message sets) as zero-copy views,
batch building in all five codecs, framing scans, and the append-time validation of §2.2-§2.4.

The byte-level work runs in the batch kernel, ``replica_core._fast.load("_batch", "batch_py")``:
the compiled one when built, the plain-Python twin otherwise or with ``REPLICA_CORE_PURE=1``.
"""
from __future__ import annotations

from replica_core.records.batch import (
    BatchScan,
    RecordBatch,
    batch_at,
    iter_batches,
    kernels,
    scan,
    sequence_add,
)
from replica_core.records.builder import build_batch, build_end_txn_marker, encode_headers
from replica_core.records.compression import (
    CODEC_IDS,
    CODEC_NAMES,
    codec_id,
    codec_name,
    compress,
    decompress,
)
from replica_core.records.control import (
    ControlRecordType,
    EndTransactionMarker,
    control_record_type,
    decode_end_txn_marker,
    encode_control_key,
    encode_end_txn_marker,
)
from replica_core.records.legacy import LegacyBatch
from replica_core.records.record import NO_TIMESTAMP, Record
from replica_core.records.validator import (
    DEFAULT_MAX_MESSAGE_BYTES,
    ORIGINS,
    LogAppendInfo,
    ValidationResult,
    analyze_and_validate,
    analyze_follower_batch,
    analyze_validate_and_assign,
    fast_target_codec,
    trim_invalid_bytes,
    validate_and_assign_offsets,
)

STOP_END = kernels.STOP_END
STOP_PARTIAL = kernels.STOP_PARTIAL
STOP_CORRUPT = kernels.STOP_CORRUPT

__all__ = [
    "CODEC_IDS",
    "CODEC_NAMES",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "NO_TIMESTAMP",
    "ORIGINS",
    "STOP_CORRUPT",
    "STOP_END",
    "STOP_PARTIAL",
    "BatchScan",
    "ControlRecordType",
    "EndTransactionMarker",
    "LegacyBatch",
    "LogAppendInfo",
    "Record",
    "RecordBatch",
    "ValidationResult",
    "analyze_and_validate",
    "analyze_follower_batch",
    "analyze_validate_and_assign",
    "batch_at",
    "build_batch",
    "build_end_txn_marker",
    "codec_id",
    "codec_name",
    "compress",
    "control_record_type",
    "decode_end_txn_marker",
    "decompress",
    "encode_control_key",
    "encode_end_txn_marker",
    "encode_headers",
    "fast_target_codec",
    "iter_batches",
    "kernels",
    "scan",
    "sequence_add",
    "trim_invalid_bytes",
    "validate_and_assign_offsets",
]
