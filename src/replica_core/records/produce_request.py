"""The request-level check of a produce request's records (Kafka's ``ProduceRequest.validateRecords``).

Kafka runs it in ``KafkaApis.handleProduceRequest`` for every partition of a produce request
(v3 and later, i.e. every request that can carry magic v2), before anything is appended: the
partition's records must frame to exactly one whole record batch, of magic 2. A partition that
fails is answered with the exception's error and never reaches the log. Without this check an
empty, cut-short or bare-header payload would frame to zero batches, the log would append
nothing, and the producer would still be told ``NONE``.

Framing follows ``ByteBufferLogInputStream`` (§1.3): fewer than 12 bytes, or a batch running
past the end, is "no batch"; a size field below 14 or a magic outside 0..2 is corrupt
(``CorruptRecordError``, ``CORRUPT_MESSAGE``). Bytes after the one whole batch that do not make
a second whole batch are allowed (Kafka's iterator stops there; the log trims them, §2.3).
"""
from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from replica_core.errors import CorruptRecordError, InvalidRecordError, KafkaError

if TYPE_CHECKING:
    from typing_extensions import Buffer

__all__ = ["produce_records_error", "validate_produce_records"]

_LOG_OVERHEAD = 12
_HEADER_SIZE_UP_TO_MAGIC = 17
_RECORD_OVERHEAD_V0 = 14
_SIZE = struct.Struct(">i")


def _next_batch_size(mv: memoryview, pos: int) -> int | None:
    """``ByteBufferLogInputStream.nextBatchSize`` + the remaining-bytes test of ``nextBatch``:
    the size of the whole batch at ``pos``, None when there is none, CorruptRecordError for a
    malformed frame."""
    remaining = len(mv) - pos
    if remaining < _LOG_OVERHEAD:
        return None
    length = _SIZE.unpack_from(mv, pos + 8)[0]
    if length < _RECORD_OVERHEAD_V0:
        raise CorruptRecordError(
            f"Record size {length} is less than the minimum record overhead "
            f"({_RECORD_OVERHEAD_V0})")
    if remaining < _HEADER_SIZE_UP_TO_MAGIC:
        return None
    magic = mv[pos + 16]
    if magic > 2:  # as a signed byte: below 0 or above 2
        signed = magic - 256 if magic > 127 else magic
        raise CorruptRecordError(f"Invalid magic found in record: {signed}")
    size = length + _LOG_OVERHEAD
    return size if size <= remaining else None


def validate_produce_records(records: Buffer) -> None:
    """Raise unless ``records`` holds exactly one whole magic-2 batch (``validateRecords``).

    ``InvalidRecordError`` (``INVALID_RECORD``) for no whole batch (empty, cut short, a bare
    header), a batch of magic 0/1, or a second whole batch; ``CorruptRecordError``
    (``CORRUPT_MESSAGE``) for a malformed frame where a batch should start.
    """
    mv = records if isinstance(records, memoryview) else memoryview(records)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    size = _next_batch_size(mv, 0)
    if size is None:
        raise InvalidRecordError(
            "Produce requests must have at least one record batch per partition "
            f"(got {len(mv)} bytes, no whole batch)")
    if mv[16] != 2:
        raise InvalidRecordError(
            "Produce requests are only allowed to contain record batches with magic version 2")
    if size < len(mv) and _next_batch_size(mv, size) is not None:
        raise InvalidRecordError(
            "Produce requests are only allowed to contain exactly one record batch per partition")


def produce_records_error(records: Buffer) -> KafkaError | None:
    """The error :func:`validate_produce_records` raises for ``records``, or None if they pass.

    Anything that is not a byte buffer is an ``InvalidRecordError`` too.
    """
    # The common request, one whole magic-2 batch filling the bytes exactly, passes every check
    # of validate_produce_records (a frame of at least the v0 record overhead, no second batch).
    if type(records) is bytes and len(records) >= _HEADER_SIZE_UP_TO_MAGIC \
            and records[16] == 2:
        length = _SIZE.unpack_from(records, 8)[0]
        if length >= _RECORD_OVERHEAD_V0 and length + _LOG_OVERHEAD == len(records):
            return None
    try:
        validate_produce_records(records)
    except KafkaError as e:
        return e
    except (TypeError, ValueError, BufferError) as e:
        return InvalidRecordError(f"Produce request records are not a byte buffer: {e}")
    return None
