from collections.abc import Buffer, Callable
from typing import TypeVar

import numpy as np
import numpy.typing as npt

_R = TypeVar("_R")

COL_POSITION: int
COL_SIZE: int
COL_BASE_OFFSET: int
COL_LAST_OFFSET_DELTA: int
COL_PARTITION_LEADER_EPOCH: int
COL_MAGIC: int
COL_CRC: int
COL_ATTRIBUTES: int
COL_BASE_TIMESTAMP: int
COL_MAX_TIMESTAMP: int
COL_PRODUCER_ID: int
COL_PRODUCER_EPOCH: int
COL_BASE_SEQUENCE: int
COL_RECORD_COUNT: int
COL_CRC_OK: int
NCOLS: int

STOP_END: int
STOP_PARTIAL: int
STOP_CORRUPT: int

RECORD_OK: int
RECORD_BAD_STRUCTURE: int
RECORD_BAD_TIMESTAMP: int
RECORD_NULL_KEY_COMPACTED: int

def find_batch(
    buf: Buffer, start: int, end: int, target_offset: int
) -> tuple[int, int, int, int, int]: ...
def scan_batches(
    buf: Buffer,
    start: int = 0,
    end: int = -1,
    check_crc: bool = True,
    max_batch_size: int = 2**31 - 1,
) -> tuple[npt.NDArray[np.int64], int, int]: ...
def scan_one_v2_batch(buf: Buffer, max_batch_size: int = 2**31 - 1) -> list[int] | None: ...
def decode_records(
    buf: Buffer, start: int, end: int, count: int, base_offset: int, base_timestamp: int
) -> npt.NDArray[np.int64]: ...
def check_records(
    buf: Buffer,
    start: int,
    end: int,
    count: int,
    base_timestamp: int,
    now_ms: int,
    before_max_ms: int,
    after_max_ms: int,
    check_timestamps: bool,
    require_keys: bool,
) -> tuple[int, int, int, int, int]: ...
def stamp_batch(
    buf_writable: Buffer,
    pos: int,
    base_offset: int,
    partition_leader_epoch: int,
    attributes: int,
    max_timestamp: int,
) -> int: ...

FAST_OK: int
FAST_NEED_RECORDS: int
FAST_UNSUPPORTED: int
FAST_REJECTED: int

def leader_append_fast(
    buf: Buffer,
    next_offset: int,
    leader_epoch: int,
    now_ms: int,
    before_max_ms: int,
    after_max_ms: int,
    log_append_time: bool,
    compacted: bool,
    client: bool,
    analyze: bool,
    max_message_bytes: int,
    target_codec: int,
    records: Buffer | None = None,
) -> tuple[int, bytearray | None, int, int, int, int, int, int, int]: ...

def validate_assign_fast(
    buf: Buffer,
    next_offset: int,
    leader_epoch: int,
    now_ms: int,
    before_max_ms: int,
    after_max_ms: int,
    log_append_time: bool,
    compacted: bool,
    client: bool,
    max_message_bytes: int,
    target_codec: int,
    result_type: Callable[..., _R],
) -> _R | None: ...
