"""Control records: the key and value of records in control batches (§1.2).

Key: int16 version (0) + int16 type (``ControlRecordType.java``). For ABORT/COMMIT the value is
an end-transaction marker: int16 version (0) + int32 coordinator epoch
(``EndTransactionMarker.java``). Unknown type ids read as UNKNOWN, as in Kafka; a key shorter
than 4 bytes or with a negative version is ``InvalidRecordError``.
"""
from __future__ import annotations

import struct
from enum import IntEnum
from typing import TYPE_CHECKING, NamedTuple

from replica_core.errors import InvalidRecordError

if TYPE_CHECKING:
    from typing_extensions import Buffer

__all__ = [
    "CONTROL_KEY_SIZE",
    "END_TXN_MARKER_VALUE_SIZE",
    "ControlRecordType",
    "EndTransactionMarker",
    "control_record_type",
    "decode_end_txn_marker",
    "encode_control_key",
    "encode_end_txn_marker",
]

CONTROL_KEY_SIZE = 4
CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VALUE_SIZE = 6
END_TXN_MARKER_VERSION = 0

_KEY = struct.Struct(">hh")
_MARKER = struct.Struct(">hi")


class ControlRecordType(IntEnum):
    """Control record types (``ControlRecordType.java``); UNKNOWN is -1."""

    UNKNOWN = -1
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


class EndTransactionMarker(NamedTuple):
    """A COMMIT or ABORT marker and the transaction coordinator's epoch."""

    control_type: ControlRecordType
    coordinator_epoch: int


def encode_control_key(control_type: ControlRecordType | int) -> bytes:
    """The 4-byte key of a control record of ``control_type``."""
    return _KEY.pack(CONTROL_KEY_VERSION, int(control_type))


def control_record_type(key: Buffer | None) -> ControlRecordType:
    """The type in a control record key (``ControlRecordType.parse``)."""
    if key is None:
        raise InvalidRecordError("Control record has no key")
    mv = memoryview(key).cast("B")
    if len(mv) < CONTROL_KEY_SIZE:
        raise InvalidRecordError(
            "Invalid value size found for end control record key. Must have at least "
            f"{CONTROL_KEY_SIZE} bytes, but found only {len(mv)}")
    version, type_id = _KEY.unpack_from(mv)
    if version < 0:
        raise InvalidRecordError(
            f"Invalid version found for control record: {version}. May indicate data corruption")
    try:
        return ControlRecordType(type_id)
    except ValueError:
        return ControlRecordType.UNKNOWN


def encode_end_txn_marker(coordinator_epoch: int) -> bytes:
    """The 6-byte value of a COMMIT/ABORT marker."""
    return _MARKER.pack(END_TXN_MARKER_VERSION, coordinator_epoch)


def decode_end_txn_marker(key: Buffer | None, value: Buffer | None) -> EndTransactionMarker:
    """The marker in a COMMIT/ABORT control record (``EndTransactionMarker.deserialize``)."""
    control_type = control_record_type(key)
    if control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise InvalidRecordError(
            f"Invalid control record type for end transaction marker: {control_type.name}")
    if value is None:
        raise InvalidRecordError("End transaction marker has no value")
    mv = memoryview(value).cast("B")
    if len(mv) < END_TXN_MARKER_VALUE_SIZE:
        raise InvalidRecordError(
            f"Invalid end transaction marker value of {len(mv)} bytes; "
            f"at least {END_TXN_MARKER_VALUE_SIZE} expected")
    version, epoch = _MARKER.unpack_from(mv)
    if version < 0:
        raise InvalidRecordError(
            f"Invalid version found for end transaction marker: {version}. "
            "May indicate data corruption")
    return EndTransactionMarker(control_type, epoch)
