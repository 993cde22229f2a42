"""kafka-dump-log's decoders: --offsets-decoder, --transaction-log-decoder,
--cluster-metadata-decoder (replica_core.storage.dump_decoders over schema_reader).

No Kafka binary produces reference output here, so the expected strings come from elsewhere:

* records of the real fixture logs are decoded a second time in this file with ``struct`` alone,
  field by field as Kafka's schema files lay them out, and the expected JSON is built from that
  in the schema's field order (Kafka's ``JsonConverter`` order); every record must decode with
  no bytes left over;
* the decoded values are cross-checked against the rest of the directory: a group's record sits
  in ``__consumer_offsets-<abs(groupId.hashCode) % 50>``, committed topics exist, commits do not
  pass the partition's log end, the KRaft broker registration names ``node.id``;
* Kafka's own expected strings from ``DumpLogSegmentsTest.testOffsetsMessageParser`` are used
  verbatim for the cases it covers (quoted below), with the records encoded here by hand.
"""
from __future__ import annotations

import base64
import glob
import io
import json
import os
import struct
import sys

import pytest
from conftest import FIXTURE_LOGS, require_nonempty
from storage_testlib import make_batch, parse_batches

from replica_core.records import batch_at
from replica_core.records.record import Record
from replica_core.storage import dump_decoders as dd
from replica_core.storage.dump import main as dump_main
from replica_core.storage.schema_reader import (
    dumps,
    java_double_str,
    load_schema,
    read_message,
    schema_names,
    to_json_tree,
)

OFFSETS_LOGS = require_nonempty(sorted(glob.glob(
    os.path.join(str(FIXTURE_LOGS), "**", "__consumer_offsets-*", "*.log"), recursive=True)),
    "__consumer_offsets segments")
METADATA_DIR = FIXTURE_LOGS / "kafka-3.6.0-kraft" / "kraft-combined-logs"
METADATA_LOG = METADATA_DIR / "__cluster_metadata-0" / "00000000000000000000.log"
BOOTSTRAP = METADATA_DIR / "bootstrap.checkpoint"


def _records(path):
    data = open(path, "rb").read()
    for b in parse_batches(data):
        batch = batch_at(data[b.position:b.position + b.size])
        for r in batch:
            yield batch, r


def _json(obj) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _rec(key, value, offset=0):
    return Record(offset, 0, key, value, [])


# --- an independent reader: struct only, Kafka's schemas read by hand ---------------------------
class Buf:
    def __init__(self, data: bytes, pos: int = 0):
        self.d, self.p = data, pos

    def take(self, fmt: str):
        v = struct.unpack_from(fmt, self.d, self.p)
        self.p += struct.calcsize(fmt)
        return v[0] if len(v) == 1 else v

    def raw(self, n: int) -> bytes:
        out = self.d[self.p:self.p + n]
        assert len(out) == n
        self.p += n
        return out

    def str16(self):  # int16 length, -1 = null
        n = self.take(">h")
        return None if n < 0 else self.raw(n).decode()

    def bytes32(self):  # int32 length, -1 = null
        n = self.take(">i")
        return None if n < 0 else self.raw(n)

    def uvarint(self) -> int:
        v = shift = 0
        while True:
            b = self.d[self.p]
            self.p += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return v

    def cstr(self):  # compact string: uvarint length + 1, 0 = null
        n = self.uvarint() - 1
        return None if n < 0 else self.raw(n).decode()

    def tags(self) -> dict[int, bytes]:
        out = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            out[tag] = self.raw(self.uvarint())
        return out

    def done(self) -> bool:
        return self.p == len(self.d)


def _b64(raw: bytes | None):
    return None if raw is None else base64.b64encode(raw).decode()


def _uuid(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _subscription(raw: bytes) -> dict:
    """ConsumerProtocolSubscription: int16 version, Topics []string, UserData nullable bytes,
    OwnedPartitions (v1+) [Topic, Partitions []int32], GenerationId (v2+), RackId (v3+)."""
    b = Buf(raw)
    v = b.take(">h")
    out = {"topics": [b.str16() for _ in range(b.take(">i"))], "userData": _b64(b.bytes32())}
    if v >= 1:
        owned = []
        for _ in range(b.take(">i")):
            topic = b.str16()
            owned.append({"topic": topic, "partitions": [b.take(">i") for _ in range(b.take(">i"))]})
        out["ownedPartitions"] = owned
    if v >= 2:
        out["generationId"] = b.take(">i")
    if v >= 3:
        out["rackId"] = b.str16()
    assert b.done()
    return out


def _assignment(raw: bytes) -> dict:
    """ConsumerProtocolAssignment: int16 version, AssignedPartitions [Topic, Partitions],
    UserData nullable bytes."""
    b = Buf(raw)
    b.take(">h")
    parts = []
    for _ in range(b.take(">i")):
        topic = b.str16()
        parts.append({"topic": topic, "partitions": [b.take(">i") for _ in range(b.take(">i"))]})
    out = {"assignedPartitions": parts, "userData": _b64(b.bytes32())}
    assert b.done()
    return out


def expected_offsets(key: bytes, value: bytes | None) -> tuple[str, str, int, int | None]:
    """(key text, value text, record type, value version) for the non-flexible versions the
    fixtures hold: OffsetCommitKey v0-1, OffsetCommitValue v0-3, GroupMetadataKey v2,
    GroupMetadataValue v0-3 (group-coordinator/src/main/resources/common/message/*.json)."""
    k = Buf(key)
    rtype = k.take(">h")
    if rtype in (0, 1):
        kd = {"group": k.str16(), "topic": k.str16(), "partition": k.take(">i")}
    else:
        assert rtype == 2
        kd = {"group": k.str16()}
    assert k.done(), "bytes left after the key"
    key_text = _json({"type": str(rtype), "data": kd})
    if value is None:
        return key_text, "<DELETE>", rtype, None
    b = Buf(value)
    v = b.take(">h")
    if rtype in (0, 1):
        vd = {"offset": b.take(">q")}
        if v >= 3:
            vd["leaderEpoch"] = b.take(">i")
        vd["metadata"] = b.str16()
        vd["commitTimestamp"] = b.take(">q")
        if v == 1:
            vd["expireTimestamp"] = b.take(">q")
    else:
        vd = {"protocolType": b.str16(), "generation": b.take(">i"), "protocol": b.str16(),
              "leader": b.str16()}
        if v >= 2:
            vd["currentStateTimestamp"] = b.take(">q")
        members = []
        for _ in range(b.take(">i")):
            m = {"memberId": b.str16()}
            if v >= 3:
                m["groupInstanceId"] = b.str16()
            m["clientId"] = b.str16()
            m["clientHost"] = b.str16()
            if v >= 1:
                m["rebalanceTimeout"] = b.take(">i")
            m["sessionTimeout"] = b.take(">i")
            sub, asg = b.bytes32(), b.bytes32()
            consumer = vd["protocolType"] == "consumer"
            m["subscription"] = _subscription(sub) if consumer else _b64(sub)
            m["assignment"] = _assignment(asg) if consumer else _b64(asg)
            members.append(m)
        vd["members"] = members
    assert b.done(), "bytes left after the value"
    return key_text, _json({"version": str(v), "data": vd}), rtype, v


def _java_hash(s: str) -> int:
    h = 0
    for ch in s:  # the fixtures' group ids are ASCII: one UTF-16 unit per character
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


# --- __consumer_offsets on the fixtures ------------------------------------------------------
@pytest.mark.parametrize("path", OFFSETS_LOGS, ids=lambda p: p.split("kafka-logs/", 1)[-1])
def test_offsets_decoder_on_fixture_matches_independent_decode(path):
    for _batch, r in _records(path):
        key_text, value_text, _, _ = expected_offsets(r.key, r.value)
        assert dd.parse_offsets(r) == (key_text, value_text), f"offset {r.offset}"


def test_offsets_fixture_versions_are_all_exercised():
    """The (record type, value version) pairs the fixtures hold -- read from the raw int16
    prefixes -- are exactly those decoded above: OffsetCommit key 1 / value 3, GroupMetadata
    key 2 / values 2 and 3, and tombstones of both."""
    seen = set()
    for path in OFFSETS_LOGS:
        for _batch, r in _records(path):
            rtype = struct.unpack_from(">h", r.key)[0]
            version = None if r.value is None else struct.unpack_from(">h", r.value)[0]
            seen.add((rtype, version))
    assert seen == {(1, 3), (1, None), (2, 2), (2, 3), (2, None)}


def _log_end(part_dir: str) -> int:
    end = 0
    for name in os.listdir(part_dir):
        if name.endswith(".log"):
            end = max(end, int(name[:20]))
            batches = parse_batches(open(os.path.join(part_dir, name), "rb").read())
            if batches:
                end = max(end, batches[-1].last_offset + 1)
    return end


def test_offsets_cross_check_with_the_directory():
    """Decoded groups, topics and offsets agree with the directory they came from."""
    commits = groups = 0
    latest: dict[tuple[str, str, str], int | None] = {}
    for path in OFFSETS_LOGS:
        part = int(path.split("__consumer_offsets-")[1].split(os.sep)[0])
        log_dir = path.split(os.sep + "__consumer_offsets-")[0]
        for _batch, r in _records(path):
            key_text, value_text = dd.parse_offsets(r)
            key = json.loads(key_text)["data"]
            # GroupMetadataManager.partitionFor: Utils.abs(groupId.hashCode) % 50 partitions
            h = _java_hash(key["group"])
            assert (0 if h == -(2**31) else abs(h)) % 50 == part, key["group"]
            if "topic" in key:
                tp_dir = os.path.join(log_dir, f"{key['topic']}-{key['partition']}")
                assert os.path.isdir(tp_dir), tp_dir
            if value_text == "<DELETE>":
                if "topic" in key:
                    latest[(log_dir, key["group"], tp_dir)] = None
                continue
            value = json.loads(value_text)["data"]
            if "topic" in key:
                commits += 1
                latest[(log_dir, key["group"], tp_dir)] = value["offset"]
                # the broker stamps the record after the commit is timed
                assert 0 <= r.timestamp - value["commitTimestamp"] < 1000
                assert value["leaderEpoch"] >= -1 and value["metadata"] == ""
            else:
                groups += 1
                assert value["protocolType"] == "consumer"
                for m in value["members"]:
                    assert isinstance(m["subscription"], dict), "consumer protocol decoded"
                    for topic in m["subscription"]["topics"]:
                        assert glob.glob(os.path.join(log_dir, f"{topic}-*")), topic
                    for tp in m["assignment"]["assignedPartitions"]:
                        for p in tp["partitions"]:
                            assert os.path.isdir(os.path.join(log_dir, f"{tp['topic']}-{p}"))
    assert commits > 4000 and groups > 250
    # a group's last commit for a partition does not pass the partition's log end offset
    # (earlier commits may: kafka-3.1.0-zk re-created topic "design" with fewer records), except
    # where the partition is now an empty log at base 0 (design2-0, re-created after the commit)
    checked = 0
    for (_d, group, tp_dir), offset in latest.items():
        end = _log_end(tp_dir)
        if offset is not None and end > 0:
            assert offset <= end, (group, tp_dir, offset, end)
            checked += 1
    assert checked >= 5


def test_offsets_decoder_through_dump_log(tmp_path):
    """``dump-log --offsets-decoder`` prints ``key: {...} payload: {...}`` on each record line."""
    path = next(p for p in OFFSETS_LOGS if "kafka-2.7.1-zk" in p and os.path.getsize(p) > 0)
    out, err = io.StringIO(), io.StringIO()
    assert dump_main([path, "--offsets-decoder"], out, err) == 0, err.getvalue()
    lines = [ln for ln in out.getvalue().splitlines() if ln.startswith("| ")]
    expected = [expected_offsets(r.key, r.value) for _b, r in _records(path)]
    assert len(lines) == len(expected) > 0
    for line, (key_text, value_text, _, _) in zip(lines, expected, strict=True):
        assert line.endswith(f" headerKeys: [] key: {key_text} payload: {value_text}")


# --- Kafka's own expectations (DumpLogSegmentsTest.testOffsetsMessageParser) ------------------
def _s16(s: str | None) -> bytes:
    return struct.pack(">h", -1) if s is None else struct.pack(">h", len(s)) + s.encode()


def _cs(s: str | None) -> bytes:  # compact string
    if s is None:
        return b"\x00"
    raw = s.encode()
    return _uv(len(raw) + 1) + raw


def _uv(n: int) -> bytes:
    out = bytearray()
    while True:
        if n < 0x80:
            out.append(n)
            return bytes(out)
        out.append((n & 0x7F) | 0x80)
        n >>= 7


def test_kafka_vectors_consumer_group_records():
    key = struct.pack(">h", 3) + _s16("group")  # ConsumerGroupMetadataKey, record type 3
    value = struct.pack(">h", 0) + struct.pack(">i", 10) + b"\x00"  # ConsumerGroupMetadataValue v0
    assert dd.parse_offsets(_rec(key, value)) == (
        "{\"type\":\"3\",\"data\":{\"groupId\":\"group\"}}",
        "{\"version\":\"0\",\"data\":{\"epoch\":10}}")
    assert dd.parse_offsets(_rec(key, None)) == (
        "{\"type\":\"3\",\"data\":{\"groupId\":\"group\"}}", "<DELETE>")
    unknown = struct.pack(">h", 32767) + _s16("group")
    assert dd.parse_offsets(_rec(unknown, value)) == (
        "Unknown record type 32767 at offset 0, skipping.", None)
    # a default ConsumerGroupMemberMetadataValue v0 (six empty compact strings/arrays,
    # RebalanceTimeoutMs -1, no tags) read as the ConsumerGroupMetadataValue the key calls for
    member = struct.pack(">h", 0) + b"\x01" * 6 + struct.pack(">i", -1) + b"\x01" + b"\x00"
    assert dd.parse_offsets(_rec(key, member)) == (
        "Error at offset 0, skipping. Could not read record with version 0 from value's buffer "
        "due to: Error reading byte array of 536870911 byte(s): only 1 byte(s) available.", None)
    with pytest.raises(dd.DumpAbortError, match="Failed to decode message at offset 0 using "
                       r"offset topic decoder \(message had a missing key\)"):
        dd.parse_offsets(_rec(None, None))


def _group_metadata_v4(subscription: bytes, assignment: bytes) -> bytes:
    """GroupMetadataValue v4 (flexible): compact strings and arrays, tagged-field counts."""
    member = (_cs("member") + _cs("instance") + _cs("client") + _cs("host")
              + struct.pack(">ii", 1000, 100)
              + _uv(len(subscription) + 1) + subscription + _uv(len(assignment) + 1) + assignment
              + b"\x00")
    return (struct.pack(">h", 4) + _cs("consumer") + struct.pack(">i", 10) + _cs("range")
            + _cs("member") + struct.pack(">q", -1) + _uv(2) + member + b"\x00")


def test_kafka_vectors_group_metadata_v4_with_consumer_protocol():
    key = struct.pack(">h", 2) + _s16("group")
    # ConsumerProtocol.serializeSubscription at version 3: topics [foo], null user data,
    # owned [foo-0], generation 0, rack "rack"; serializeAssignment: [foo-0], null user data
    sub = (struct.pack(">h", 3) + struct.pack(">i", 1) + _s16("foo") + struct.pack(">i", -1)
           + struct.pack(">i", 1) + _s16("foo") + struct.pack(">ii", 1, 0) + struct.pack(">i", 0)
           + _s16("rack"))
    asg = (struct.pack(">h", 3) + struct.pack(">i", 1) + _s16("foo") + struct.pack(">ii", 1, 0)
           + struct.pack(">i", -1))
    assert dd.parse_offsets(_rec(key, _group_metadata_v4(sub, asg))) == (
        "{\"type\":\"2\",\"data\":{\"group\":\"group\"}}",
        "{\"version\":\"4\",\"data\":{\"protocolType\":\"consumer\",\"generation\":10,\"protocol\":\"range\","
        "\"leader\":\"member\",\"currentStateTimestamp\":-1,\"members\":[{\"memberId\":\"member\","
        "\"groupInstanceId\":\"instance\",\"clientId\":\"client\",\"clientHost\":\"host\","
        "\"rebalanceTimeout\":1000,\"sessionTimeout\":100,\"subscription\":{\"topics\":[\"foo\"],"
        "\"userData\":null,\"ownedPartitions\":[{\"topic\":\"foo\",\"partitions\":[0]}],"
        "\"generationId\":0,\"rackId\":\"rack\"},\"assignment\":{\"assignedPartitions\":"
        "[{\"topic\":\"foo\",\"partitions\":[0]}],\"userData\":null}}]}}")
    # malformed embedded protocol bytes stay base64, as Kafka keeps them
    assert dd.parse_offsets(_rec(key, _group_metadata_v4(b"Subscription", b"Assignment")))[1] == (
        "{\"version\":\"4\",\"data\":{\"protocolType\":\"consumer\",\"generation\":10,\"protocol\":\"range\","
        "\"leader\":\"member\",\"currentStateTimestamp\":-1,\"members\":[{\"memberId\":\"member\","
        "\"groupInstanceId\":\"instance\",\"clientId\":\"client\",\"clientHost\":\"host\","
        "\"rebalanceTimeout\":1000,\"sessionTimeout\":100,\"subscription\":\"U3Vic2NyaXB0aW9u\","
        "\"assignment\":\"QXNzaWdubWVudA==\"}]}}")


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_offset_commit_value_every_version(version):
    """OffsetCommitValue v0-4 (the fixtures hold v3): leaderEpoch from v3, expireTimestamp only
    in v1, v4 flexible with a tagged-field section (an unknown tag is skipped, never printed)."""
    key = struct.pack(">h", 1) + _s16("g") + _s16("t") + struct.pack(">i", 7)
    body = struct.pack(">q", 42)
    fields = {"offset": 42}
    if version >= 3:
        body += struct.pack(">i", 5)
        fields["leaderEpoch"] = 5
    body += _cs("meta") if version >= 4 else _s16("meta")
    fields["metadata"] = "meta"
    body += struct.pack(">q", 1_700_000_000_000)
    fields["commitTimestamp"] = 1_700_000_000_000
    if version == 1:
        body += struct.pack(">q", 1_700_000_099_999)
        fields["expireTimestamp"] = 1_700_000_099_999
    if version >= 4:
        body += _uv(1) + _uv(9) + _uv(3) + b"xyz"  # one unknown tagged field, tag 9
    value = struct.pack(">h", version) + body
    assert dd.parse_offsets(_rec(key, value)) == (
        '{"type":"1","data":{"group":"g","topic":"t","partition":7}}',
        _json({"version": str(version), "data": fields}))
    schema = load_schema("OffsetCommitValue")
    assert read_message(schema, value, version, 2)[1] == len(value)  # nothing left over


def test_offset_commit_value_newer_than_its_schema():
    """A version above the schema's (5 > 4): Kafka's generated reader keeps only the version
    bounds it needs for 0-4, so v5 reads like v4 (fields of open ranges, flexible encoding)."""
    key = struct.pack(">h", 1) + _s16("g") + _s16("t") + struct.pack(">i", 0)
    value = struct.pack(">h", 5) + struct.pack(">qi", 9, 2) + _cs("") + struct.pack(">q", 3) + b"\x00"
    assert dd.parse_offsets(_rec(key, value))[1] == (
        '{"version":"5","data":{"offset":9,"leaderEpoch":2,"metadata":"","commitTimestamp":3}}')


# --- __transaction_state ------------------------------------------------------------------------
def _txn_key(txn_id: str, version: int = 0) -> bytes:
    return struct.pack(">h", version) + _s16(txn_id)


def _txn_value_v0(pid, epoch, timeout, status, partitions, last_update, start) -> bytes:
    out = struct.pack(">hqhib", 0, pid, epoch, timeout, status)
    if partitions is None:
        out += struct.pack(">i", -1)
    else:
        out += struct.pack(">i", len(partitions))
        for topic, ids in partitions:
            out += _s16(topic) + struct.pack(">i", len(ids)) + b"".join(
                struct.pack(">i", i) for i in ids)
    return out + struct.pack(">qq", last_update, start)


def test_transaction_log_decoder():
    """TransactionLog.formatRecordKeyAndValue. The partitions print in the iteration order of
    the Scala mutable.HashSet they are collected in: for "foo" partitions 0, 1, 2 the hashes
    (TopicPartition.hashCode = 31 * (31 + p) + "foo".hashCode(), "foo".hashCode() = 101574)
    are 102535, 102566, 102597; improved (h ^ h >>> 16) 102534, 102567, 102596, whose buckets
    in the 16-slot table are 6, 7, 4 -- so foo-2 comes first."""
    value = _txn_value_v0(1000, 3, 60000, 1, [("foo", [0, 1, 2])], 1_700_000_000_123, 1_700_000_000_000)
    assert dd.parse_transaction_log(_rec(_txn_key("my-txn"), value)) == (
        "transaction_metadata::transactionalId=my-txn",
        "producerId:1000,producerEpoch:3,state=Ongoing,partitions=[foo-2,foo-0,foo-1],"
        "txnLastUpdateTimestamp=1700000000123,txnTimeoutMs=60000")
    empty = _txn_value_v0(7, 0, 100, 0, None, 5, -1)
    assert dd.parse_transaction_log(_rec(_txn_key("t"), empty))[1] == (
        "producerId:7,producerEpoch:0,state=Empty,partitions=[],txnLastUpdateTimestamp=5,"
        "txnTimeoutMs=100")
    assert dd.parse_transaction_log(_rec(_txn_key("t"), None)) == (
        "transaction_metadata::transactionalId=t", "<DELETE>")
    assert dd.parse_transaction_log(_rec(_txn_key("t", version=1), empty)) == (
        "unknown::version=1", None)
    with pytest.raises(dd.DumpAbortError, match="Unknown version 2 from the transaction log"):
        dd.parse_transaction_log(_rec(_txn_key("t"), struct.pack(">h", 2) + empty[2:]))
    with pytest.raises(dd.DumpAbortError, match="Unknown transaction state id 9"):
        dd.parse_transaction_log(_rec(_txn_key("t"), _txn_value_v0(7, 0, 100, 9, [], 5, -1)))


def test_transaction_log_value_v1_flexible_with_tags():
    """TransactionLogValue v1: compact encoding, PreviousProducerId / NextProducerId /
    ClientTransactionVersion as tagged fields (tags 0, 1, 2)."""
    body = (struct.pack(">h", 1) + struct.pack(">qhib", 55, 1, 900, 4)
            + _uv(2) + _cs("bar") + _uv(2) + struct.pack(">i", 3) + b"\x00"
            + struct.pack(">qq", 20, 10)
            + _uv(2) + _uv(0) + _uv(8) + struct.pack(">q", 54) + _uv(2) + _uv(2) + struct.pack(">h", 2))
    assert dd.parse_transaction_log(_rec(_txn_key("x"), body))[1] == (
        "producerId:55,producerEpoch:1,state=CompleteCommit,partitions=[bar-3],"
        "txnLastUpdateTimestamp=20,txnTimeoutMs=900")
    fields, end = read_message(load_schema("TransactionLogValue"), body, 1, 2)
    assert end == len(body)
    assert (fields["PreviousProducerId"], fields["NextProducerId"], fields["ClientTransactionVersion"]) \
        == (54, -1, 2)


def test_transaction_partitions_grow_the_table():
    """Thirteen partitions in one set: sizeHint(13) makes the table 32 slots (tableSizeFor of
    (13 + 1) / 0.75), so the order is by hash modulo 32, not 16."""
    ids = list(range(13))
    order = dd.transaction_partitions_order([[("t", i) for i in ids]])
    th = 116  # "t".hashCode()
    hashes = {i: (31 * (31 + i) + th) for i in ids}
    improved = {i: h ^ (h >> 16) for i, h in hashes.items()}
    assert [p for _, p in order] == sorted(ids, key=lambda i: (improved[i] & 31, improved[i]))
    assert [p for _, p in order] != sorted(ids, key=lambda i: (improved[i] & 15, improved[i]))


# --- __cluster_metadata -----------------------------------------------------------------------
def expected_metadata(value: bytes) -> str:
    """The JSON of the record types in the fixture's metadata log, read by hand from
    metadata/src/main/resources/common/metadata/*.json (all flexible from version 0)."""
    b = Buf(value)
    assert b.uvarint() == 1  # frame version
    api_key, version = b.uvarint(), b.uvarint()
    if api_key == 0:  # RegisterBrokerRecord
        d = {"brokerId": b.take(">i")}
        if version >= 2:
            d["isMigratingZkBroker"] = b.take(">?")
        d["incarnationId"] = _uuid(b.raw(16))
        d["brokerEpoch"] = b.take(">q")
        eps = []
        for _ in range(b.uvarint() - 1):
            ep = {"name": b.cstr(), "host": b.cstr(), "port": b.take(">H"),
                  "securityProtocol": b.take(">h")}
            assert b.tags() == {}
            eps.append(ep)
        d["endPoints"] = eps
        feats = []
        for _ in range(b.uvarint() - 1):
            f = {"name": b.cstr(), "minSupportedVersion": b.take(">h"),
                 "maxSupportedVersion": b.take(">h")}
            assert b.tags() == {}
            feats.append(f)
        d["features"] = feats
        d["rack"] = b.cstr()
        d["fenced"] = b.take(">?")
        if version >= 1:
            d["inControlledShutdown"] = b.take(">?")
        assert b.tags() == {}
        name = "REGISTER_BROKER_RECORD"
    elif api_key == 17:  # BrokerRegistrationChangeRecord: Fenced (tag 0) is tagged
        d = {"brokerId": b.take(">i"), "brokerEpoch": b.take(">q")}
        tags = b.tags()
        if 0 in tags and struct.unpack(">b", tags[0])[0] != 0:
            d["fenced"] = struct.unpack(">b", tags[0])[0]
        assert set(tags) <= {0}
        name = "BROKER_REGISTRATION_CHANGE_RECORD"
    elif api_key == 12:
        d = {"name": b.cstr(), "featureLevel": b.take(">h")}
        assert b.tags() == {}
        name = "FEATURE_LEVEL_RECORD"
    elif api_key == 21:
        d = {"zkMigrationState": b.take(">b")}
        assert b.tags() == {}
        name = "ZK_MIGRATION_STATE_RECORD"
    elif api_key == 23:  # BeginTransactionRecord: Name is tagged (tag 0), default null
        tags = b.tags()
        d = {"name": Buf(tags[0]).cstr()} if 0 in tags else {}
        name = "BEGIN_TRANSACTION_RECORD"
    elif api_key in (20, 24):
        d = {}
        assert b.tags() == {}
        name = "NO_OP_RECORD" if api_key == 20 else "END_TRANSACTION_RECORD"
    else:
        raise AssertionError(f"api key {api_key} not expected in the fixture")
    assert b.done(), "bytes left after the record"
    return _json({"type": name, "version": version, "data": d})


@pytest.mark.parametrize("path", [METADATA_LOG, BOOTSTRAP], ids=["log", "bootstrap"])
def test_cluster_metadata_decoder_matches_independent_decode(path):
    n = 0
    for batch, r in _records(path):
        if batch.is_control:
            continue
        assert r.key is None
        assert dd.parse_cluster_metadata(r) == (None, expected_metadata(r.value)), r.offset
        n += 1
    assert n >= 1


def test_cluster_metadata_cross_check_with_the_directory():
    """The broker registrations name this node (meta.properties node.id), which is also the
    quorum's only voter; metadata.version 14 is 3.6-IV2 (Kafka's MetadataVersion.IBP_3_6_IV2),
    the version a 3.6.0 broker bootstraps with, and the bootstrap checkpoint agrees."""
    props = dict(line.split("=", 1) for line in (METADATA_DIR / "meta.properties").read_text()
                 .splitlines() if "=" in line and not line.startswith("#"))
    quorum = json.loads((METADATA_DIR / "__cluster_metadata-0" / "quorum-state").read_text())
    node_id = int(props["node.id"])
    assert [v["voterId"] for v in quorum["currentVoters"]] == [node_id]
    types: dict[str, int] = {}
    for batch, r in _records(METADATA_LOG):
        if batch.is_control:
            continue
        rec = json.loads(dd.parse_cluster_metadata(r)[1])
        types[rec["type"]] = types.get(rec["type"], 0) + 1
        if rec["type"] in ("REGISTER_BROKER_RECORD", "BROKER_REGISTRATION_CHANGE_RECORD"):
            assert rec["data"]["brokerId"] == node_id
        if rec["type"] == "REGISTER_BROKER_RECORD":
            assert rec["data"]["endPoints"][0]["name"] == "PLAINTEXT"
            mv = next(f for f in rec["data"]["features"] if f["name"] == "metadata.version")
            assert mv["minSupportedVersion"] <= 14 <= mv["maxSupportedVersion"]
        if rec["type"] == "FEATURE_LEVEL_RECORD":
            assert rec["data"] == {"name": "metadata.version", "featureLevel": 14}
    assert types["NO_OP_RECORD"] > 3000 and types["REGISTER_BROKER_RECORD"] == 4
    boot = [json.loads(dd.parse_cluster_metadata(r)[1]) for b, r in _records(BOOTSTRAP)
            if not b.is_control]
    assert boot == [{"type": "FEATURE_LEVEL_RECORD", "version": 0,
                     "data": {"name": "metadata.version", "featureLevel": 14}}]


def _metadata_value(api_key: int, version: int, body: bytes) -> bytes:
    return _uv(1) + _uv(api_key) + _uv(version) + body


def test_metadata_records_with_tagged_fields_uuids_and_doubles():
    topic_id = bytes(range(100, 116))
    topic = _metadata_value(2, 0, _cs("orders") + topic_id + b"\x00")
    assert dd.parse_cluster_metadata(_rec(None, topic))[1] == (
        '{"type":"TOPIC_RECORD","version":0,"data":{"name":"orders","topicId":"'
        + _uuid(topic_id) + '"}}')
    # PartitionRecord v2: LeaderRecoveryState (tag 0, default 0) and EligibleLeaderReplicas
    # (tag 1, default null) are tagged; LastKnownElr (tag 2) is absent and stays null
    ints = lambda xs: _uv(len(xs) + 1) + b"".join(struct.pack(">i", x) for x in xs)  # noqa: E731
    dir_a, dir_b = bytes(16), bytes([1] * 16)
    body = (struct.pack(">i", 4) + topic_id + ints([1, 2]) + ints([1]) + ints([]) + ints([])
            + struct.pack(">iii", 1, 7, 9) + _uv(3) + dir_a + dir_b
            + _uv(2) + _uv(0) + _uv(1) + b"\x01" + _uv(1) + _uv(5) + ints([2, 3]))
    assert dd.parse_cluster_metadata(_rec(None, _metadata_value(3, 2, body)))[1] == (
        '{"type":"PARTITION_RECORD","version":2,"data":{"partitionId":4,"topicId":"'
        + _uuid(topic_id) + '","replicas":[1,2],"isr":[1],"removingReplicas":[],'
        '"addingReplicas":[],"leader":1,"leaderRecoveryState":1,"leaderEpoch":7,'
        '"partitionEpoch":9,"directories":["AAAAAAAAAAAAAAAAAAAAAA","AQEBAQEBAQEBAQEBAQEBAQ"],'
        '"eligibleLeaderReplicas":[2,3]}}')
    # PartitionRecord v0: no Directories field; a tagged field at its default is not printed
    body0 = (struct.pack(">i", 0) + topic_id + ints([1]) + ints([1]) + ints([]) + ints([])
             + struct.pack(">iii", 1, 0, 0) + _uv(1) + _uv(0) + _uv(1) + b"\x00")
    assert dd.parse_cluster_metadata(_rec(None, _metadata_value(3, 0, body0)))[1] == (
        '{"type":"PARTITION_RECORD","version":0,"data":{"partitionId":0,"topicId":"'
        + _uuid(topic_id) + '","replicas":[1],"isr":[1],"removingReplicas":[],'
        '"addingReplicas":[],"leader":1,"leaderEpoch":0,"partitionEpoch":0}}')
    # ClientQuotaRecord: float64 printed as Java's Double.toString
    for value, text in ((1.0e7, "1.0E7"), (1024.0, "1024.0"), (0.5, "0.5"), (1.5e-5, "1.5E-5")):
        quota = _metadata_value(14, 0, _uv(2) + _cs("user") + _cs(None) + b"\x00" + _cs("producer_byte_rate")
                                + struct.pack(">d", value) + b"\x00" + b"\x00")
        assert dd.parse_cluster_metadata(_rec(None, quota))[1] == (
            '{"type":"CLIENT_QUOTA_RECORD","version":0,"data":{"entity":[{"entityType":"user",'
            '"entityName":null}],"key":"producer_byte_rate","value":' + text + ',"remove":false}}')


def test_metadata_errors_read_as_kafka_reports_them():
    """ClusterMetadataLogMessageParser turns every failure into ``Error at <offset>, skipping.``
    with AbstractApiMessageSerde's message."""
    def parse(value):
        return dd.parse_cluster_metadata(_rec(None, value, offset=12))[1]

    assert parse(_metadata_value(99, 0, b"\x00")) == (
        "Error at 12, skipping. org.apache.kafka.common.errors.UnsupportedVersionException: "
        "Unknown metadata id 99")
    assert parse(_uv(2) + _uv(20) + _uv(0) + b"\x00") == (
        "Error at 12, skipping. Could not deserialize metadata record due to unknown frame "
        "version 2(only frame version 1 is supported)")
    assert parse(_uv(0) + _uv(20) + _uv(0) + b"\x00").startswith(
        "Error at 12, skipping. Could not deserialize metadata record with frame version 0.")
    assert parse(_metadata_value(20, 0, b"\x00\x07\x07")) == (
        "Error at 12, skipping. Found 2 byte(s) of garbage after 20")
    assert parse(_metadata_value(2, 0, _cs("t"))) == (
        "Error at 12, skipping. Failed to deserialize record with type 2")
    # a RegisterBrokerRecord newer than the schema (v9): the record reads leniently, but its
    # endpoint struct's generated reader checks the version and fails
    ep = _cs("PLAINTEXT") + _cs("h") + struct.pack(">Hh", 1, 0) + b"\x00"
    body = (struct.pack(">i", 1) + b"\x00" + bytes(16) + struct.pack(">q", 1) + _uv(2) + ep
            + _uv(1) + _cs(None) + b"\x00\x00" + b"\x00")
    assert parse(_metadata_value(0, 9, body)) == (
        "Error at 12, skipping. Failed to deserialize record with type 0")
    assert parse(_uv(1) + _uv(0x8000) + _uv(0)) == (
        "Error at 12, skipping. Value for type was too large.")


def test_cluster_metadata_through_dump_log(tmp_path):
    """``--cluster-metadata-decoder`` lines: no key, ``payload: {...}``; control batches keep
    their control suffix (LEADER_CHANGE is not decoded, as in Kafka)."""
    out, err = io.StringIO(), io.StringIO()
    assert dump_main(["--cluster-metadata-decoder", "--files", str(METADATA_LOG)], out, err) == 0
    lines = out.getvalue().splitlines()
    recs = [ln for ln in lines if ln.startswith("| ")]
    payloads = [ln for ln in recs if " payload: {" in ln]
    control = [ln for ln in recs if "controlType: LEADER_CHANGE(2)" in ln]
    assert len(payloads) + len(control) == len(recs)
    assert not any(" key: " in ln for ln in recs)
    assert len(control) == 5
    assert sum(1 for _b, r in _records(METADATA_LOG) if not _b.is_control) == len(payloads)


# --- KRaft control records, schema reader -------------------------------------------------------
def test_schemas_load_and_match_their_record_types():
    names = schema_names()
    assert len(names) == 64
    for name in names:
        load_schema(name)
    for rtype, (key_name, value_name) in dd.GROUP_RECORD_TYPES.items():
        assert rtype in load_schema(key_name).valid_versions, key_name
        assert load_schema(value_name).valid_versions.lo == 0
    keys = [load_schema(n).api_key for n in names if load_schema(n).type == "metadata"]
    assert len(keys) == len(set(keys)) == 25


def test_java_double_and_jackson_strings():
    """Double.toString as Java prints it; Jackson escapes control characters as \\uXXXX (upper
    case hex) except \\b \\t \\n \\f \\r, and leaves non-ASCII text as it is."""
    cases = [(1.0, "1.0"), (100.0, "100.0"), (0.001, "0.001"), (1.0e-4, "1.0E-4"),
             (9999999.0, "9999999.0"), (1.0e7, "1.0E7"), (12345678.9, "1.23456789E7"),
             (-2.5, "-2.5"), (0.0, "0.0"), (-0.0, "-0.0"), (1e300, "1.0E300"),
             (123.456, "123.456"), (5e-324, "4.9E-324")]
    for value, text in cases:
        assert java_double_str(value) == text
    assert dumps({"s": "a\"b\\c\n\t\x01\x1fé/"}) == '{"s":"a\\"b\\\\c\\n\\t\\u0001\\u001Fé/"}'
    # Jackson quotes the non-numbers (QUOTE_NON_NUMERIC_NUMBERS is on by default)
    assert dumps({"a": float("nan"), "b": float("-inf"), "c": 2.0}) == (
        '{"a":"NaN","b":"-Infinity","c":2.0}')


def test_control_record_text_reads_at_version_zero():
    value = struct.pack(">hqB", 0, 1_700_000_000_000, 0)
    assert dd.control_record_text(3, value) == (
        ' SnapshotHeader {"version":0,"lastContainedLogTimestamp":1700000000000}')
    assert dd.control_record_text(2, b"") is None  # LEADER_CHANGE is printed by type only
    with pytest.raises(dd.DumpAbortError):
        dd.control_record_text(4, b"\x00")  # a footer cut short


def test_every_fixture_record_decodes_with_no_leftover(tmp_path):
    """Every __consumer_offsets key and value and every metadata record of the fixtures is
    consumed to its last byte by the schema reader."""
    for path in OFFSETS_LOGS:
        for _b, r in _records(path):
            rtype = struct.unpack_from(">h", r.key)[0]
            key_name, value_name = dd.GROUP_RECORD_TYPES[rtype]
            assert read_message(load_schema(key_name), r.key, rtype, 2)[1] == len(r.key)
            if r.value is not None:
                version = struct.unpack_from(">h", r.value)[0]
                assert read_message(load_schema(value_name), r.value, version, 2)[1] == len(r.value)
    for path in (METADATA_LOG, BOOTSTRAP):
        for b, r in _records(path):
            if not b.is_control:
                schema, version, fields = dd.decode_metadata_record(r.value)
                assert to_json_tree(schema, fields, version) is not None


def test_string_decoder_is_kafkas_default(tmp_path):
    """--print-data-log with no decoder: key and value as UTF-8 text, invalid bytes as U+FFFD."""
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(make_batch([b"caf\xc3\xa9", b"\xff"], keys=[b"k", None],
                                timestamps=[1, 2]))
    out, err = io.StringIO(), io.StringIO()
    assert dump_main([str(path), "--print-data-log"], out, err) == 0
    lines = out.getvalue().splitlines()
    assert lines[-2].endswith("headerKeys: [] key: k payload: café")
    assert lines[-1].endswith("headerKeys: [] payload: \ufffd")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
