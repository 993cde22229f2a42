"""Kafka's errors, by their Java exception names, each carrying the wire error code.

Codes are Kafka's ``org.apache.kafka.common.protocol.Errors``. Internal exceptions that never
reach the wire (``OffsetsOutOfOrderError``, ``UnexpectedAppendOffsetError``, index errors) carry
code -1 (``UNKNOWN_SERVER_ERROR`` would be sent if one escaped).
"""
from __future__ import annotations

from enum import IntEnum


class Errors(IntEnum):
    """Kafka wire error codes used by replication and storage."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    NETWORK_EXCEPTION = 13
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_VERSION = 35
    INVALID_REPLICATION_FACTOR = 38
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    TRANSACTION_COORDINATOR_FENCED = 52
    OPERATION_NOT_ATTEMPTED = 55
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    KAFKA_STORAGE_ERROR = 56
    UNKNOWN_PRODUCER_ID = 59
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    ELECTION_NOT_NEEDED = 84
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    INVALID_RECORD = 87
    INVALID_UPDATE_VERSION = 95
    UNKNOWN_TOPIC_ID = 100
    INCONSISTENT_TOPIC_ID = 103
    FETCH_SESSION_TOPIC_ID_ERROR = 106
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108


class KafkaError(Exception):
    """Base of every replica_core error; ``code`` is the Kafka wire error."""

    code: Errors = Errors.UNKNOWN_SERVER_ERROR

    @property
    def error_name(self) -> str:
        return self.code.name


# --- record format and validation (§1, §2.9) -------------------------------------------------
class CorruptRecordError(KafkaError):
    """Batch smaller than its header, CRC mismatch, bad size field or magic (CorruptRecordException)."""

    code = Errors.CORRUPT_MESSAGE


class InvalidRecordError(KafkaError):
    """Structurally invalid records or a batch breaking a leader-side rule (InvalidRecordException)."""

    code = Errors.INVALID_RECORD


class InvalidTimestampError(KafkaError):
    """Timestamp outside the allowed window, or LogAppendTime set by a producer."""

    code = Errors.INVALID_TIMESTAMP


class RecordValidationError(KafkaError):
    """Per-record validation failures for one batch (RecordValidationException).

    ``record_errors`` lists ``(batch_index, message)``; ``code`` follows the wrapped error.
    """

    def __init__(self, cause: KafkaError, record_errors: list[tuple[int, str]]):
        super().__init__(str(cause))
        self.cause = cause
        self.record_errors = record_errors
        self.code = cause.code


class RecordTooLargeError(KafkaError):
    """A batch larger than ``max.message.bytes`` (RecordTooLargeException)."""

    code = Errors.MESSAGE_TOO_LARGE


class RecordBatchTooLargeError(KafkaError):
    """A record set larger than ``segment.bytes`` (RecordBatchTooLargeException)."""

    code = Errors.RECORD_LIST_TOO_LARGE


class UnsupportedCompressionTypeError(KafkaError):
    """Unknown codec id, or a codec whose library is missing."""

    code = Errors.UNSUPPORTED_COMPRESSION_TYPE


class UnsupportedForMessageFormatError(KafkaError):
    """A feature (transactions, idempotence) the batch's magic cannot carry."""

    code = Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT


class OffsetsOutOfOrderError(KafkaError):
    """Follower append whose batches do not have increasing offsets."""


class UnexpectedAppendOffsetError(KafkaError):
    """Follower append starting below the log end offset."""

    def __init__(self, message: str, first_offset: int, last_offset: int):
        super().__init__(message)
        self.first_offset = first_offset
        self.last_offset = last_offset


# --- storage (§1.5-1.7, §3, §5) ---------------------------------------------------------------
class OffsetOutOfRangeError(KafkaError):
    """Read or fetch outside [log start offset, log end offset]."""

    code = Errors.OFFSET_OUT_OF_RANGE


class KafkaStorageError(KafkaError):
    """An I/O failure; the log directory is taken offline (KafkaStorageException)."""

    code = Errors.KAFKA_STORAGE_ERROR


class InvalidOffsetError(KafkaError):
    """An index append that breaks monotonicity (InvalidOffsetException)."""


class IndexOffsetOverflowError(KafkaError):
    """An offset not expressible relative to the segment base (IndexOffsetOverflowException)."""


class LogSegmentOffsetOverflowError(KafkaError):
    """A batch whose offsets overflow its segment's 4-byte relative offsets."""


class CorruptIndexError(KafkaError):
    """An index file that fails its sanity check (CorruptIndexException)."""


class CorruptCheckpointError(KafkaError):
    """A checkpoint file that cannot be parsed (Kafka raises IOException 'Malformed line')."""

    code = Errors.KAFKA_STORAGE_ERROR


class InvalidConfigurationError(KafkaError):
    """An unknown or out-of-range configuration value (ConfigException)."""

    code = Errors.INVALID_REQUEST


class InvalidReplicationFactorError(KafkaError):
    """A topic's replicas cannot be placed: a non-positive replication factor, more replicas
    than registered brokers, or every broker fenced (InvalidReplicationFactorException)."""

    code = Errors.INVALID_REPLICATION_FACTOR


# --- replication (§3.5, §4.3, §6, §8.5) -------------------------------------------------------
class NotLeaderOrFollowerError(KafkaError):
    code = Errors.NOT_LEADER_OR_FOLLOWER


class UnknownTopicOrPartitionError(KafkaError):
    code = Errors.UNKNOWN_TOPIC_OR_PARTITION


class FencedLeaderEpochError(KafkaError):
    code = Errors.FENCED_LEADER_EPOCH


class UnknownLeaderEpochError(KafkaError):
    code = Errors.UNKNOWN_LEADER_EPOCH


class NotEnoughReplicasError(KafkaError):
    code = Errors.NOT_ENOUGH_REPLICAS


class NotEnoughReplicasAfterAppendError(KafkaError):
    code = Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND


class InvalidRequiredAcksError(KafkaError):
    code = Errors.INVALID_REQUIRED_ACKS


class RequestTimedOutError(KafkaError):
    code = Errors.REQUEST_TIMED_OUT


class NetworkException(KafkaError):
    """The connection to the broker closed before the answer came (NetworkException)."""

    code = Errors.NETWORK_EXCEPTION


class StaleControllerEpochError(KafkaError):
    code = Errors.STALE_CONTROLLER_EPOCH


class InconsistentTopicIdError(KafkaError):
    code = Errors.INCONSISTENT_TOPIC_ID


# --- idempotent producers and producer state (storage/producer_state.py) -----------------------
class OutOfOrderSequenceError(KafkaError):
    """A batch whose first sequence does not follow the producer's last one, or a new epoch
    not starting at sequence 0 (OutOfOrderSequenceException)."""

    code = Errors.OUT_OF_ORDER_SEQUENCE_NUMBER


class DuplicateSequenceError(KafkaError):
    """DuplicateSequenceException. Current Kafka's log never raises it: a retried batch that
    matches one of the producer's last five is answered with its original offsets, an older one
    is OUT_OF_ORDER_SEQUENCE_NUMBER. Kept for the code (a client treats it as success)."""

    code = Errors.DUPLICATE_SEQUENCE_NUMBER


class InvalidProducerEpochError(KafkaError):
    """A client or coordinator append with an epoch below the producer's current one
    (InvalidProducerEpochException, which replaced ProducerFencedException on produce in 2.7)."""

    code = Errors.INVALID_PRODUCER_EPOCH


class InvalidTxnStateError(KafkaError):
    """A non-transactional batch from a producer with an open transaction (InvalidTxnStateException)."""

    code = Errors.INVALID_TXN_STATE


class TransactionCoordinatorFencedError(KafkaError):
    """An end-transaction marker from an older coordinator epoch (TransactionCoordinatorFencedException)."""

    code = Errors.TRANSACTION_COORDINATOR_FENCED


class UnknownProducerIdError(KafkaError):
    """UnknownProducerIdException. Since KIP-360 (Kafka 2.5) the log accepts a producer it has
    no state for at any sequence, so the broker no longer raises it on produce; kept for the code."""

    code = Errors.UNKNOWN_PRODUCER_ID


class CorruptSnapshotError(KafkaError):
    """A producer-state ``.snapshot`` that fails its schema or CRC check (CorruptSnapshotException,
    a KafkaException: never sent on the wire; the log deletes the file and rebuilds)."""


# --- fetch sessions (KIP-227) -------------------------------------------------------------------
class FetchSessionIdNotFoundError(KafkaError):
    """An incremental fetch names a session the leader does not have (evicted or never made)."""

    code = Errors.FETCH_SESSION_ID_NOT_FOUND


class InvalidFetchSessionEpochError(KafkaError):
    """An incremental fetch whose session epoch is not the one the leader expects next."""

    code = Errors.INVALID_FETCH_SESSION_EPOCH


_BY_CODE: dict[Errors, type[KafkaError]] = {}
for _cls in list(globals().values()):
    if isinstance(_cls, type) and issubclass(_cls, KafkaError) and _cls is not KafkaError:
        _BY_CODE.setdefault(_cls.code, _cls)


def for_code(code: int | Errors, message: str = "") -> KafkaError:
    """An exception instance for a wire error code (KafkaError for codes without a class)."""
    cls = _BY_CODE.get(Errors(code), KafkaError)
    if cls is RecordValidationError:
        cls = InvalidRecordError
    err = cls(message or Errors(code).name)
    if cls is KafkaError:
        err.code = Errors(code)
    return err
