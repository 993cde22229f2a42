"""LogConfig: Kafka's topic config names, defaults (§6.10) and ConfigDef validation."""
from __future__ import annotations

import dataclasses
import random

import pytest

from replica_core.errors import InvalidConfigurationError
from replica_core.storage.config import LONG_MAX, LogConfig

KAFKA_DEFAULTS = {
    "segment.bytes": 1073741824,
    "segment.ms": 604800000,
    "segment.jitter.ms": 0,
    "segment.index.bytes": 10485760,
    "index.interval.bytes": 4096,
    "flush.messages": LONG_MAX,
    "flush.ms": LONG_MAX,
    "max.message.bytes": 1048588,
    "message.timestamp.type": "CreateTime",
    "message.timestamp.difference.max.ms": LONG_MAX,
    "message.timestamp.before.max.ms": LONG_MAX,
    "message.timestamp.after.max.ms": LONG_MAX,
    "file.delete.delay.ms": 60000,
    "preallocate": False,
    "cleanup.policy": ("delete",),
    "compression.type": "producer",
    "min.insync.replicas": 1,
    "unclean.leader.election.enable": False,
    "retention.ms": 604800000,
    "retention.bytes": -1,
    "max.compaction.lag.ms": LONG_MAX,
    "min.compaction.lag.ms": 0,
    "delete.retention.ms": 86400000,
    "min.cleanable.dirty.ratio": 0.5,
}


def test_defaults_are_kafkas():
    c = LogConfig()
    assert LogConfig.config_names() == sorted(KAFKA_DEFAULTS)
    for name, value in KAFKA_DEFAULTS.items():
        assert getattr(c, name.replace(".", "_")) == value, name
        assert LogConfig.attribute_for(name) == name.replace(".", "_")
    assert LogConfig.from_properties({}) == c


def test_from_properties_parses_strings_like_configdef():
    c = LogConfig.from_properties({
        "segment.bytes": " 1048576 ",
        "segment.ms": "+3600000",
        "flush.messages": 1,
        "preallocate": "TRUE",
        "unclean.leader.election.enable": True,
        "cleanup.policy": "compact , delete",
        "compression.type": "zstd",
        "message.timestamp.type": "LogAppendTime",
        "min.cleanable.dirty.ratio": "0.25",
        "retention.bytes": "-5",
    })
    assert c.segment_bytes == 1048576 and c.segment_ms == 3600000 and c.flush_messages == 1
    assert c.preallocate is True and c.unclean_leader_election_enable is True
    assert c.cleanup_policy == ("compact", "delete")
    assert c.compression_type == "zstd" and c.message_timestamp_type == "LogAppendTime"
    assert c.min_cleanable_dirty_ratio == 0.25 and c.retention_bytes == -5
    assert LogConfig.from_properties({"cleanup.policy": ["compact"]}).cleanup_policy == ("compact",)
    assert LogConfig.from_properties({"cleanup.policy": ""}).cleanup_policy == ()


@pytest.mark.parametrize("props,attr,value", [
    ({"log.segment.bytes": "2048"}, "segment_bytes", 2048),
    ({"log.index.interval.bytes": 100}, "index_interval_bytes", 100),
    ({"log.flush.interval.messages": "10"}, "flush_messages", 10),
    ({"log.flush.interval.ms": "5"}, "flush_ms", 5),
    ({"log.flush.scheduler.interval.ms": "6"}, "flush_ms", 6),
    ({"log.roll.ms": "1000"}, "segment_ms", 1000),
    ({"log.roll.hours": "2"}, "segment_ms", 7_200_000),
    ({"log.roll.jitter.hours": 1}, "segment_jitter_ms", 3_600_000),
    ({"log.index.size.max.bytes": 4096}, "segment_index_bytes", 4096),
    ({"message.max.bytes": "2000"}, "max_message_bytes", 2000),
    ({"log.retention.hours": 1}, "retention_ms", 3_600_000),
    ({"log.retention.minutes": 2}, "retention_ms", 120_000),
    ({"log.retention.hours": -3}, "retention_ms", -1),
    ({"log.segment.delete.delay.ms": 0}, "file_delete_delay_ms", 0),
    ({"log.preallocate": "true"}, "preallocate", True),
    ({"log.cleanup.policy": "compact"}, "cleanup_policy", ("compact",)),
    ({"log.message.timestamp.type": "LogAppendTime"}, "message_timestamp_type", "LogAppendTime"),
    ({"log.cleaner.max.compaction.lag.ms": 10}, "max_compaction_lag_ms", 10),
    ({"log.cleaner.min.cleanable.ratio": 0.1}, "min_cleanable_dirty_ratio", 0.1),
])
def test_broker_synonyms(props, attr, value):
    assert getattr(LogConfig.from_properties(props), attr) == value


def test_synonym_precedence():
    # the topic name wins over broker synonyms; among synonyms, Kafka's order
    c = LogConfig.from_properties({"segment.ms": 5, "log.roll.ms": 6, "log.roll.hours": 7})
    assert c.segment_ms == 5
    c = LogConfig.from_properties({"log.roll.ms": 6, "log.roll.hours": 7})
    assert c.segment_ms == 6
    c = LogConfig.from_properties({"log.retention.minutes": 1, "log.retention.hours": 1})
    assert c.retention_ms == 60_000


def test_unknown_key_names_the_key():
    with pytest.raises(InvalidConfigurationError, match="segment.byte") as info:
        LogConfig.from_properties({"segment.byte": 100})
    assert info.value.key == "segment.byte"
    with pytest.raises(InvalidConfigurationError, match="log.dirs"):
        LogConfig.from_properties({"log.dirs": "/tmp"})
    with pytest.raises(InvalidConfigurationError):
        LogConfig.from_properties({"segment_bytes": 100})  # attribute names are not config names


@pytest.mark.parametrize("key,value", [
    ("segment.bytes", 13),                 # below LegacyRecord.RECORD_OVERHEAD_V0
    ("segment.bytes", "13"),
    ("segment.bytes", 2**31),              # not an int32
    ("segment.bytes", "1e6"),
    ("segment.bytes", "abc"),
    ("segment.bytes", True),               # a boolean is not an int
    ("segment.bytes", 1.5),
    ("segment.ms", 0),
    ("segment.jitter.ms", -1),
    ("segment.index.bytes", 3),
    ("index.interval.bytes", -1),
    ("flush.messages", 0),
    ("flush.ms", -1),
    ("flush.ms", 2**63),                   # not an int64
    ("max.message.bytes", -1),
    ("message.timestamp.type", "createtime"),  # case-sensitive, like ValidString.in
    ("message.timestamp.type", 1),
    ("message.timestamp.difference.max.ms", -1),
    ("message.timestamp.before.max.ms", -1),
    ("message.timestamp.after.max.ms", -1),
    ("file.delete.delay.ms", -1),
    ("preallocate", "yes"),
    ("preallocate", 1),
    ("cleanup.policy", "compact,foo"),
    ("cleanup.policy", 5),
    ("compression.type", "zip"),
    ("compression.type", "none"),          # the broker-side name is "uncompressed"
    ("min.insync.replicas", 0),
    ("unclean.leader.election.enable", "maybe"),
    ("retention.ms", -2),
    ("max.compaction.lag.ms", 0),
    ("min.compaction.lag.ms", -1),
    ("delete.retention.ms", -1),
    ("min.cleanable.dirty.ratio", 1.5),
    ("min.cleanable.dirty.ratio", "nan"),
    ("log.segment.bytes", 10),
    ("log.roll.hours", 0),
])
def test_invalid_values_name_the_key(key, value):
    with pytest.raises(InvalidConfigurationError) as info:
        LogConfig.from_properties({key: value})
    assert key in str(info.value)


def test_accepted_edge_values():
    c = LogConfig.from_properties({"segment.bytes": 14, "retention.ms": -1, "retention.bytes": -1,
                                   "index.interval.bytes": 0, "max.message.bytes": 0,
                                   "min.cleanable.dirty.ratio": 1, "flush.ms": 0})
    assert c.segment_bytes == 14 and c.retention_ms == -1 and c.index_interval_bytes == 0


def test_min_compaction_lag_may_not_exceed_max():
    with pytest.raises(InvalidConfigurationError, match="min.compaction.lag.ms"):
        LogConfig.from_properties({"min.compaction.lag.ms": 10, "max.compaction.lag.ms": 5})


def test_direct_construction_is_validated_and_frozen():
    with pytest.raises(InvalidConfigurationError, match="segment.bytes"):
        LogConfig(segment_bytes=10)
    c = LogConfig(segment_bytes=1024)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.segment_bytes = 2048  # type: ignore[misc]
    assert c.replace(segment_bytes=2048).segment_bytes == 2048
    with pytest.raises(InvalidConfigurationError):
        c.replace(segment_ms=0)
    assert LogConfig(cleanup_policy=["compact"]).cleanup_policy == ("compact",)


def test_to_properties_round_trips():
    c = LogConfig.from_properties({"segment.bytes": 4096, "cleanup.policy": "compact,delete",
                                   "preallocate": True, "min.cleanable.dirty.ratio": 0.75})
    props = c.to_properties()
    assert props["segment.bytes"] == "4096"
    assert props["cleanup.policy"] == "compact,delete"
    assert props["preallocate"] == "true"
    assert set(props) == set(KAFKA_DEFAULTS)
    assert all(isinstance(v, str) for v in props.values())
    assert LogConfig.from_properties(props) == c


def test_derived_values():
    c = LogConfig()
    assert c.delete and not c.compact
    assert c.max_segment_ms == c.segment_ms
    assert c.init_file_size == 0
    compacted = LogConfig.from_properties({"cleanup.policy": "compact", "segment.ms": 1000,
                                           "max.compaction.lag.ms": 500})
    assert compacted.compact and not compacted.delete and compacted.max_segment_ms == 500
    not_compacted = LogConfig.from_properties({"segment.ms": 1000, "max.compaction.lag.ms": 500})
    assert not_compacted.max_segment_ms == 1000
    pre = LogConfig.from_properties({"preallocate": "true", "segment.bytes": 1 << 20})
    assert pre.init_file_size == 1 << 20


def test_timestamp_windows_fall_back_to_the_deprecated_difference():
    c = LogConfig.from_properties({"message.timestamp.difference.max.ms": 1000})
    assert c.timestamp_before_max_ms == 1000 and c.timestamp_after_max_ms == 1000
    c = LogConfig.from_properties({"message.timestamp.difference.max.ms": 1000,
                                   "message.timestamp.before.max.ms": 50,
                                   "message.timestamp.after.max.ms": 60})
    assert c.timestamp_before_max_ms == 50 and c.timestamp_after_max_ms == 60
    assert LogConfig().timestamp_before_max_ms == LONG_MAX


def test_random_segment_jitter():
    assert LogConfig().random_segment_jitter(random.Random(1)) == 0
    c = LogConfig.from_properties({"segment.jitter.ms": 1000, "segment.ms": 300})
    draws = [c.random_segment_jitter(random.Random(s)) for s in range(200)]
    assert all(0 <= d < 300 for d in draws)  # bounded by min(jitter, segment.ms)
    assert len(set(draws)) > 50
    assert draws == [c.random_segment_jitter(random.Random(s)) for s in range(200)]


@pytest.mark.parametrize("policy,compact,delete", [
    ("delete", False, True), ("compact", True, False), ("compact,delete", True, True),
])
def test_cleanup_policy_flags_are_read_once_and_stay_out_of_equality(policy, compact, delete):
    """``compact`` and ``delete`` follow the policy; once read they are kept on the config, which compares, hashes, copies and pickles by its
    fields as before."""
    import pickle

    c = LogConfig.from_properties({"cleanup.policy": policy})
    fresh = LogConfig.from_properties({"cleanup.policy": policy})
    assert (c.compact, c.delete) == (compact, delete)
    assert (c.compact, c.delete) == (compact, delete)  # the kept answers
    assert c == fresh and hash(c) == hash(fresh)
    assert pickle.loads(pickle.dumps(c)) == fresh
    flipped = c.replace(cleanup_policy=("compact",) if delete else ("delete",))
    assert (flipped.compact, flipped.delete) == (delete, not delete)
