"""The record decoders of ``kafka-dump-log.sh``, rendering keys and values as Kafka does.

Each parser maps one record to the ``(key, payload)`` strings ``DumpLogSegments`` prints after
``key:`` and ``payload:`` (``None``: not printed), mirroring its ``MessageParser`` classes:

* :func:`parse_string` -- the default ``StringDecoder`` (``--print-data-log``): UTF-8 text;
* :func:`parse_offsets` -- ``--offsets-decoder`` (``OffsetsMessageParser``): a
  ``__consumer_offsets`` record as ``{"type":"<record type>","data":{...}}`` /
  ``{"version":"<v>","data":{...}}`` (``<DELETE>`` for a tombstone), the consumer protocol
  subscription and assignment of classic consumer groups decoded in place;
* :func:`parse_transaction_log` -- ``--transaction-log-decoder``
  (``TransactionLog.formatRecordKeyAndValue``);
* :func:`parse_cluster_metadata` -- ``--cluster-metadata-decoder``
  (``ClusterMetadataLogMessageParser``): ``{"type":"TOPIC_RECORD","version":0,"data":{...}}``.

:func:`control_record_text` renders KRaft control records (snapshot header and footer, KRaft
version, voters) as the record line shows them. Messages are decoded by
:mod:`replica_core.storage.schema_reader` from Kafka's schema files; errors read as Kafka's do.
An error after which Kafka's tool would stop (an exception escaping its parser) is raised as
:class:`DumpAbortError`.
"""
from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Iterable
from enum import Enum
from typing import Any

from replica_core.records.record import Record
from replica_core.storage.schema_reader import (
    JsonBinary,
    MessageSchema,
    Readable,
    ReadError,
    dumps,
    load_schema,
    read_message,
    schema_names,
    to_json_tree,
)

__all__ = [
    "DumpAbortError",
    "MessageParser",
    "RecordDecoder",
    "control_record_text",
    "decoder_class",
    "decoder_class_parser",
    "metadata_record_type_name",
    "parse_cluster_metadata",
    "parse_offsets",
    "parse_string",
    "parse_transaction_log",
    "parser_for",
    "transaction_partitions_order",
]

MessageParser = Callable[[Record], "tuple[str | None, str | None]"]


class DumpAbortError(Exception):
    """A record Kafka's tool cannot get past: its exception ends the dump of the file."""


class RecordDecoder(Enum):
    """Which ``MessageParser`` kafka-dump-log.sh uses (its decoder options)."""

    STRING = "string"
    OFFSETS = "offsets"
    TRANSACTION_LOG = "transaction-log"
    CLUSTER_METADATA = "cluster-metadata"


def _text(data: bytes) -> str:
    # new String(bytes, UTF_8): malformed input becomes U+FFFD
    return data.decode("utf-8", "replace")


def parse_string(record: Record) -> tuple[str | None, str | None]:
    """``DecoderMessageParser`` with Kafka's ``StringDecoder`` for key and value."""
    key = None if record.key is None else _text(record.key)
    value = None if record.value is None else _text(record.value)
    return key, value


# --- --key-decoder-class / --value-decoder-class -------------------------------------------------
# Kafka's org.apache.kafka.tools.api decoders (kafka.serializer before 3.x), by the text each
# makes of a key or value. DefaultDecoder is left out: it returns the byte array itself, which
# Kafka's tool prints as a JVM identity ("[B@1b6d3586"), different in every run.
def _fixed_width(width: int, what: str) -> Callable[[bytes], str]:
    def decode(data: bytes) -> str:
        # ByteBuffer.wrap(bytes).getInt()/getLong(): the first bytes, big-endian, rest ignored
        if len(data) < width:
            raise DumpAbortError(
                f"{what} cannot read {width} bytes from {len(data)} (BufferUnderflowException)")
        return str(int.from_bytes(data[:width], "big", signed=True))
    return decode


DECODER_CLASSES: dict[str, Callable[[bytes], str]] = {
    "StringDecoder": _text,
    "IntegerDecoder": _fixed_width(4, "IntegerDecoder"),
    "LongDecoder": _fixed_width(8, "LongDecoder"),
}
_DECODER_PACKAGES = ("org.apache.kafka.tools.api.", "kafka.serializer.")


def decoder_class(name: str) -> Callable[[bytes], str]:
    """The decoder a ``--key-decoder-class``/``--value-decoder-class`` value names (fully
    qualified, in Kafka's current or pre-3.0 package, or the bare class name); ``ValueError``
    naming it otherwise."""
    short = name
    for package in _DECODER_PACKAGES:
        if name.startswith(package):
            short = name[len(package):]
            break
    found = DECODER_CLASSES.get(short)
    if found is None:
        known = ", ".join(f"{_DECODER_PACKAGES[0]}{n}" for n in DECODER_CLASSES)
        why = (" (it prints a JVM array identity, not the bytes)"
               if short == "DefaultDecoder" else "")
        raise ValueError(f"unsupported decoder class {name!r}{why}; supported: {known}")
    return found


def decoder_class_parser(key_class: str, value_class: str) -> MessageParser:
    """``DecoderMessageParser`` with the two named decoders (null key or value: not printed)."""
    key_decoder, value_decoder = decoder_class(key_class), decoder_class(value_class)

    def parse(record: Record) -> tuple[str | None, str | None]:
        key = None if record.key is None else key_decoder(bytes(record.key))
        value = None if record.value is None else value_decoder(bytes(record.value))
        return key, value
    return parse


# --- __consumer_offsets ----------------------------------------------------------------------
# GroupCoordinatorRecordSerde: the key's leading int16 is the record type, which selects the key
# and value schemas; the key is read at version = record type.
GROUP_RECORD_TYPES: dict[int, tuple[str, str]] = {
    0: ("OffsetCommitKey", "OffsetCommitValue"),
    1: ("OffsetCommitKey", "OffsetCommitValue"),
    2: ("GroupMetadataKey", "GroupMetadataValue"),
    3: ("ConsumerGroupMetadataKey", "ConsumerGroupMetadataValue"),
    4: ("ConsumerGroupPartitionMetadataKey", "ConsumerGroupPartitionMetadataValue"),
    5: ("ConsumerGroupMemberMetadataKey", "ConsumerGroupMemberMetadataValue"),
    6: ("ConsumerGroupTargetAssignmentMetadataKey", "ConsumerGroupTargetAssignmentMetadataValue"),
    7: ("ConsumerGroupTargetAssignmentMemberKey", "ConsumerGroupTargetAssignmentMemberValue"),
    8: ("ConsumerGroupCurrentMemberAssignmentKey", "ConsumerGroupCurrentMemberAssignmentValue"),
    9: ("ShareGroupPartitionMetadataKey", "ShareGroupPartitionMetadataValue"),
    10: ("ShareGroupMemberMetadataKey", "ShareGroupMemberMetadataValue"),
    11: ("ShareGroupMetadataKey", "ShareGroupMetadataValue"),
    12: ("ShareGroupTargetAssignmentMetadataKey", "ShareGroupTargetAssignmentMetadataValue"),
    13: ("ShareGroupTargetAssignmentMemberKey", "ShareGroupTargetAssignmentMemberValue"),
    14: ("ShareGroupCurrentMemberAssignmentKey", "ShareGroupCurrentMemberAssignmentValue"),
    15: ("ShareGroupStatePartitionMetadataKey", "ShareGroupStatePartitionMetadataValue"),
}
CONSUMER_PROTOCOL_TYPE = "consumer"  # ConsumerProtocol.PROTOCOL_TYPE
_I16 = struct.Struct(">h")


class _UnknownRecordType(Exception):
    def __init__(self, record_type: int) -> None:
        super().__init__(f"Found an unknown record type {record_type}")
        self.record_type = record_type


def _read_version(buf: bytes, what: str) -> int:
    if len(buf) < 2:
        raise ReadError(f"Could not read version from {what}'s buffer.")
    return _I16.unpack_from(buf, 0)[0]


def _read_coordinator_message(schema: MessageSchema, buf: bytes, version: int,
                              what: str) -> dict:
    try:
        return read_message(schema, buf, version, 2)[0]
    except ReadError as e:
        raise ReadError(f"Could not read record with version {version} from {what}'s buffer "
                        f"due to: {e.kafka_text}.") from e


def _decode_embedded(node: dict, field: str, schema_name: str) -> None:
    """Replace ``node[field]`` (consumer protocol bytes: int16 version, then the message) by its
    decoded JSON; on any failure keep the bytes, as ``DumpLogSegments`` does."""
    raw = node.get(field)
    if not isinstance(raw, JsonBinary):
        return
    try:
        version = _read_version(raw, field)
        schema = load_schema(schema_name)
        fields = read_message(schema, raw, version, 2)[0]
        node[field] = to_json_tree(schema, fields, version)
    except (ReadError, KeyError):
        pass


def _group_value_tree(schema: MessageSchema, fields: dict, version: int) -> dict:
    tree = to_json_tree(schema, fields, version)
    if schema.name == "GroupMetadataValue" and tree.get("protocolType") == CONSUMER_PROTOCOL_TYPE:
        for member in tree.get("members") or []:
            if isinstance(member, dict):
                _decode_embedded(member, "subscription", "ConsumerProtocolSubscription")
                _decode_embedded(member, "assignment", "ConsumerProtocolAssignment")
    return tree


def parse_offsets(record: Record) -> tuple[str | None, str | None]:
    """``OffsetsMessageParser``: a ``__consumer_offsets`` record as Kafka's JSON."""
    if record.key is None:
        raise DumpAbortError(f"Failed to decode message at offset {record.offset} using offset "
                             "topic decoder (message had a missing key)")
    try:
        record_type = _read_version(record.key, "key")
        names = GROUP_RECORD_TYPES.get(record_type)
        if names is None:
            raise _UnknownRecordType(record_type)
        key_schema = load_schema(names[0])
        key_fields = _read_coordinator_message(key_schema, record.key, record_type, "key")
        value_text = "<DELETE>"
        if record.value is not None:
            value_schema = load_schema(names[1])
            version = _read_version(record.value, "value")
            value_fields = _read_coordinator_message(value_schema, record.value, version,
                                                     "value")
            value_tree = _group_value_tree(value_schema, value_fields, version)
            value_text = dumps({"version": str(version), "data": value_tree})
        key_text = dumps({"type": str(record_type),
                          "data": to_json_tree(key_schema, key_fields, record_type)})
        return key_text, value_text
    except _UnknownRecordType as e:
        return f"Unknown record type {e.record_type} at offset {record.offset}, skipping.", None
    except ReadError as e:
        return f"Error at offset {record.offset}, skipping. {e.kafka_text}", None


# --- __transaction_state ------------------------------------------------------------------------
TRANSACTION_STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
                      "CompleteAbort", "Dead", "PrepareEpochFence")  # TransactionState ids 0-7
TRANSACTION_VERSION_LEVELS = (0, 1, 2)  # TransactionVersion TV_0..TV_2


def _java_string_hash(s: str) -> int:
    h = 0
    raw = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(raw), 2):
        h = (31 * h + ((raw[i] << 8) | raw[i + 1])) & 0xFFFFFFFF
    return h


def _topic_partition_hash(topic: str, partition: int) -> int:
    """``TopicPartition.hashCode`` as an unsigned 32-bit value."""
    return (31 * ((31 + partition) & 0xFFFFFFFF) + _java_string_hash(topic)) & 0xFFFFFFFF


def _table_size_for(capacity: int) -> int:
    return min(1 << (max(capacity - 1, 4).bit_length() - 1) << 1, 1 << 30)


def transaction_partitions_order(groups: Iterable[Iterable[tuple[str, int]]]
                                 ) -> list[tuple[str, int]]:
    """The iteration order of the Scala ``mutable.HashSet`` that ``TransactionMetadata`` fills
    with each ``PartitionsSchema``'s partitions in turn (``topicPartitions ++= set``).

    That set (Scala 2.13: 16 buckets to start, load factor 0.75, ``sizeHint`` on each added set,
    growth before each single add of a set of at most 4) iterates bucket by bucket, each bucket
    in ascending improved hash (``h ^ (h >>> 16)`` of ``TopicPartition.hashCode``); so the
    printed order depends only on the hashes and the final table size.
    """
    length, threshold = 16, 12
    members: dict[tuple[str, int], tuple[int, int]] = {}
    for group in groups:
        uniq = list(dict.fromkeys(group))
        target = _table_size_for(int((len(uniq) + 1) / 0.75))
        if target > length:
            length, threshold = target, int(target * 0.75)
        for tp in uniq:
            if len(uniq) <= 4 and len(members) + 1 >= threshold:
                length *= 2
                threshold = int(length * 0.75)
            if tp not in members:
                h = _topic_partition_hash(*tp)
                improved = h ^ (h >> 16)
                signed = improved - (1 << 32) if improved >= 1 << 31 else improved
                members[tp] = (signed, len(members))
    return sorted(members, key=lambda tp: (members[tp][0] & (length - 1), members[tp][0],
                                           members[tp][1]))


def parse_transaction_log(record: Record) -> tuple[str | None, str | None]:
    """``TransactionLog.formatRecordKeyAndValue``: ``transaction_metadata::transactionalId=..``
    and ``producerId:..,producerEpoch:..,state=..,partitions=[..],txnLastUpdateTimestamp=..,
    txnTimeoutMs=..``."""
    if record.key is None:
        raise DumpAbortError(f"record at offset {record.offset} has no key")
    try:
        key_version = _read_version(record.key, "key")
        key_schema = load_schema("TransactionLogKey")
        if key_version not in key_schema.valid_versions:
            return f"unknown::version={key_version}", None
        txn_id = read_message(key_schema, record.key, key_version, 2)[0]["TransactionalId"]
        key_text = f"transaction_metadata::transactionalId={txn_id}"
        if record.value is None:
            return key_text, "<DELETE>"
        version = _read_version(record.value, "value")
        value_schema = load_schema("TransactionLogValue")
        if version not in value_schema.valid_versions:
            raise DumpAbortError(f"Unknown version {version} from the transaction log message "
                                 "value")
        v = read_message(value_schema, record.value, version, 2)[0]
    except ReadError as e:
        raise DumpAbortError(f"record at offset {record.offset}: {e.kafka_text}") from e
    status = v["TransactionStatus"]
    if not 0 <= status < len(TRANSACTION_STATES):
        raise DumpAbortError(f"Unknown transaction state id {status} from the transaction "
                             "status message")
    if v["ClientTransactionVersion"] not in TRANSACTION_VERSION_LEVELS:
        raise DumpAbortError("No feature:transaction.version with feature level "
                             f"{v['ClientTransactionVersion']}")
    state = TRANSACTION_STATES[status]
    groups: list[list[tuple[str, int]]] = []
    if state != "Empty":
        if v["TransactionPartitions"] is None:
            raise DumpAbortError(f"record at offset {record.offset}: null transaction partitions")
        groups = [[(p["Topic"], pid) for pid in p["PartitionIds"]]
                  for p in v["TransactionPartitions"]]
    partitions = ",".join(f"{t}-{p}" for t, p in transaction_partitions_order(groups))
    value_text = (f"producerId:{v['ProducerId']},producerEpoch:{v['ProducerEpoch']},"
                  f"state={state},partitions=[{partitions}],"
                  f"txnLastUpdateTimestamp={v['TransactionLastUpdateTimestampMs']},"
                  f"txnTimeoutMs={v['TransactionTimeoutMs']}")
    return key_text, value_text


# --- __cluster_metadata --------------------------------------------------------------------------
METADATA_FRAME_VERSION = 1  # AbstractApiMessageSerde.DEFAULT_FRAME_VERSION


@functools.cache
def _metadata_schemas() -> dict[int, MessageSchema]:
    out = {}
    for name in schema_names():
        s = load_schema(name)
        if s.type == "metadata" and s.api_key is not None:
            out[s.api_key] = s
    return out


def metadata_record_type_name(schema: MessageSchema) -> str:
    """``MetadataRecordType`` constant name: the schema name in upper snake case
    (``MessageGenerator.toSnakeCase``), e.g. ``TOPIC_RECORD``."""
    out = []
    prev_upper = True
    for c in schema.name:
        if c.isupper():
            if not prev_upper:
                out.append("_")
            out.append(c.lower())
            prev_upper = True
        else:
            out.append(c)
            prev_upper = False
    return "".join(out).upper()


class _MetadataParseError(Exception):
    pass


def _metadata_short(r: Any, entity: str) -> int:
    try:
        val = r.uvarint()
    except ReadError as e:
        raise _MetadataParseError(f"Error while reading {entity}") from e
    if val > 0x7FFF:
        raise _MetadataParseError(f"Value for {entity} was too large.")
    return ((val & 0xFFFF) ^ 0x8000) - 0x8000


def decode_metadata_record(value: bytes) -> tuple[MessageSchema, int, dict]:
    """``MetadataRecordSerde.read``: frame version 1, api key, version, then the record, with
    no bytes left over. Raises ``ValueError`` with Kafka's message."""
    r = Readable(value)
    try:
        frame = _metadata_short(r, "frame version")
        if frame == 0:
            raise _MetadataParseError(
                "Could not deserialize metadata record with frame version 0. Note that upgrades "
                "from the preview release of KRaft in 2.8 to newer versions are not supported.")
        if frame != METADATA_FRAME_VERSION:
            raise _MetadataParseError(
                f"Could not deserialize metadata record due to unknown frame version {frame}"
                f"(only frame version {METADATA_FRAME_VERSION} is supported)")
        api_key = _metadata_short(r, "type")
        version = _metadata_short(r, "version")
        schema = _metadata_schemas().get(api_key)
        if schema is None:
            raise _MetadataParseError("org.apache.kafka.common.errors.UnsupportedVersionException"
                                      f": Unknown metadata id {api_key}")
        try:
            fields, end = read_message(schema, value, version, r.pos)
        except ReadError as e:
            raise _MetadataParseError(f"Failed to deserialize record with type {api_key}") from e
        if end < len(value):
            raise _MetadataParseError(f"Found {len(value) - end} byte(s) of garbage after "
                                      f"{api_key}")
    except _MetadataParseError as e:
        raise ValueError(str(e)) from e
    return schema, version, fields


def parse_cluster_metadata(record: Record) -> tuple[str | None, str | None]:
    """``ClusterMetadataLogMessageParser``: no key; the value as
    ``{"type":"<RECORD_TYPE>","version":<v>,"data":{...}}`` or ``Error at <offset>, skipping.``"""
    if record.value is None:
        return None, f"Error at {record.offset}, skipping. null"
    try:
        schema, version, fields = decode_metadata_record(record.value)
    except ValueError as e:
        return None, f"Error at {record.offset}, skipping. {e}"
    return None, dumps({"type": metadata_record_type_name(schema), "version": version,
                        "data": to_json_tree(schema, fields, version)})


_PARSERS: dict[RecordDecoder, MessageParser] = {
    RecordDecoder.STRING: parse_string,
    RecordDecoder.OFFSETS: parse_offsets,
    RecordDecoder.TRANSACTION_LOG: parse_transaction_log,
    RecordDecoder.CLUSTER_METADATA: parse_cluster_metadata,
}


def parser_for(decoder: RecordDecoder) -> MessageParser:
    return _PARSERS[decoder]


# --- KRaft control records ------------------------------------------------------------------------
# ControlRecordType -> (label DumpLogSegments prints, schema); each is read at version 0
# (ControlRecordUtils.*_CURRENT_VERSION) and written at the version its own Version field holds.
CONTROL_RECORD_SCHEMAS: dict[int, tuple[str, str]] = {
    3: ("SnapshotHeader", "SnapshotHeaderRecord"),
    4: ("SnapshotFooter", "SnapshotFooterRecord"),
    5: ("KRaftVersion", "KRaftVersionRecord"),
    6: ("KRaftVoters", "VotersRecord"),
}


def control_record_text(type_id: int, value: bytes | None) -> str | None:
    """`` SnapshotHeader {"version":0,"lastContainedLogTimestamp":0}`` and the like for a KRaft
    control record, ``None`` for other types. ``DumpAbortError`` where Kafka's tool fails."""
    entry = CONTROL_RECORD_SCHEMAS.get(type_id)
    if entry is None:
        return None
    label, name = entry
    if value is None:
        raise DumpAbortError(f"{label} control record has no value")
    schema = load_schema(name)
    try:
        fields = read_message(schema, value, 0)[0]
    except ReadError as e:
        raise DumpAbortError(f"cannot read {label} control record: {e.kafka_text}") from e
    # written at the version the record names; the generated converter checks no range here
    version = fields["Version"]
    return f" {label} {dumps(to_json_tree(schema, fields, version))}"
