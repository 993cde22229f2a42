"""Codecs (byte formats other implementations write), varints and control records."""
from __future__ import annotations

import gzip
import os
import struct

import lz4.frame
import pytest
import snappy
import xxhash
import zstandard
from aiokafka import codec as aio_codec
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import codec as kp_codec

from replica_core.errors import InvalidRecordError, UnsupportedCompressionTypeError
from replica_core.records import (
    ControlRecordType,
    codec_id,
    codec_name,
    compress,
    control_record_type,
    decode_end_txn_marker,
    decompress,
    encode_control_key,
    encode_end_txn_marker,
)
from replica_core.records.compression import xxh32
from replica_core.records.varint import (
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
    size_of_varint,
    size_of_varlong,
)

DATA = [b"", b"x", os.urandom(1000), b"abcd" * 40_000, os.urandom(150_000)]
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def test_codec_ids_and_names():
    assert [codec_id(n) for n in CODECS] == [0, 1, 2, 3, 4]
    assert codec_id("uncompressed") == 0 and codec_name(4) == "zstd"
    assert codec_name("GZIP") == "gzip"
    for bad in (5, 6, 7, -1, "brotli"):
        with pytest.raises(UnsupportedCompressionTypeError):
            codec_id(bad)
        with pytest.raises(UnsupportedCompressionTypeError):
            decompress(bad, b"")


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("i", range(len(DATA)))
def test_round_trip(codec, i):
    assert decompress(codec, compress(codec, DATA[i])) == DATA[i]


@pytest.mark.parametrize("i", range(len(DATA)))
def test_what_others_write_we_read(i):
    data = DATA[i]
    # snappy: xerial framing (Java client, kafka-python, aiokafka) and raw snappy
    assert decompress("snappy", kp_codec.snappy_encode(data)) == data
    assert decompress("snappy", aio_codec.snappy_encode(data)) == data
    assert decompress("snappy", kp_codec.snappy_encode(data, xerial_compatible=False)) == data
    assert decompress("snappy", snappy.compress(data)) == data
    # lz4 frames with and without optional fields
    assert decompress("lz4", kp_codec.lz4_encode(data)) == data
    assert decompress("lz4", aio_codec.lz4_encode(data)) == data
    assert decompress("lz4", lz4.frame.compress(
        data, block_linked=False, store_size=True, content_checksum=True,
        block_checksum=True)) == data
    assert decompress("zstd", kp_codec.zstd_encode(data)) == data
    assert decompress("zstd", aio_codec.zstd_encode(data)) == data
    assert decompress("gzip", kp_codec.gzip_encode(data)) == data
    assert decompress("gzip", gzip.compress(data) + gzip.compress(data)) == data + data


@pytest.mark.parametrize("i", range(len(DATA)))
def test_what_we_write_others_read(i):
    data = DATA[i]
    assert kp_codec.snappy_decode(compress("snappy", data)) == data
    assert aio_codec.snappy_decode(compress("snappy", data)) == data
    assert compress("snappy", data)[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    assert lz4.frame.decompress(compress("lz4", data)) == data
    assert kp_codec.lz4_decode(compress("lz4", data)) == data
    assert zstandard.ZstdDecompressor().decompressobj().decompress(
        compress("zstd", data)) == data
    assert gzip.decompress(compress("gzip", data)) == data


def test_lz4_frame_layout_is_kafkas():
    frame = compress("lz4", b"hello" * 100)
    assert frame[:4] == b"\x04\x22\x4d\x18"
    assert frame[4] == 0x60          # version 01, independent blocks, no checksums
    assert frame[5] == 0x40          # 64 KiB blocks
    assert frame[6] == (xxhash.xxh32_intdigest(frame[4:6]) >> 8) & 0xFF
    assert frame.endswith(b"\x00\x00\x00\x00")


def test_lz4_rules():
    with pytest.raises(InvalidRecordError, match="dependent"):
        decompress("lz4", lz4.frame.compress(b"x" * 200_000, block_linked=True))
    # magic v0 writers got the descriptor checksum wrong (KAFKA-3160): read only for v0
    broken = kp_codec.lz4_encode_old_kafka(b"old data")
    assert decompress("lz4", broken, legacy_v0=True) == b"old data"
    with pytest.raises(InvalidRecordError, match="checksum"):
        decompress("lz4", broken)


@given(st.binary(max_size=100), st.integers(0, 2**32 - 1))
@settings(max_examples=200, deadline=None)
def test_xxh32_matches_xxhash(data, seed):
    assert xxh32(data, seed) == xxhash.xxh32_intdigest(data, seed)


@pytest.mark.parametrize("codec", CODECS[1:])
def test_truncated_payloads_are_invalid_records(codec):
    good = compress(codec, os.urandom(3000))
    for cut in (0, 1, 5, 17, len(good) // 2, len(good) - 1):
        try:
            out = decompress(codec, good[:cut])
        except InvalidRecordError:
            continue
        assert len(out) < 3000   # a raw-snappy misread may "succeed" only with less data


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_round_trip(v):
    enc = encode_varint(v)
    assert decode_varint(enc) == (v, len(enc)) and size_of_varint(v) == len(enc) <= 5


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip(v):
    enc = encode_varlong(v)
    assert decode_varlong(enc) == (v, len(enc)) and size_of_varlong(v) == len(enc) <= 10


def test_varint_limits():
    assert encode_varint(-1) == b"\x01" and encode_varint(1) == b"\x02"
    assert encode_varint(-64) == b"\x7f" and encode_varint(64) == b"\x80\x01"
    with pytest.raises(InvalidRecordError):
        decode_varint(b"\x80\x80\x80\x80\x80\x01")
    with pytest.raises(InvalidRecordError):
        decode_varlong(b"\x80" * 10 + b"\x01")
    with pytest.raises(InvalidRecordError):
        decode_varint(b"\x80\x80")
    # the 5th byte's high bits are dropped, as Java's int shift does
    assert decode_varint(bytes([0x84, 0x80, 0x80, 0x80, 0x70])) == (2, 5)
    with pytest.raises(ValueError):
        encode_varint(2**31)


def test_control_records():
    assert encode_control_key(ControlRecordType.COMMIT) == b"\x00\x00\x00\x01"
    assert control_record_type(b"\x00\x00\x00\x02") is ControlRecordType.LEADER_CHANGE
    assert control_record_type(b"\x00\x01\x00\x63") is ControlRecordType.UNKNOWN
    for bad in (None, b"\x00\x00\x00", b"\xff\xff\x00\x00"):
        with pytest.raises(InvalidRecordError):
            control_record_type(bad)
    key = encode_control_key(ControlRecordType.ABORT)
    assert decode_end_txn_marker(key, encode_end_txn_marker(42)) == (ControlRecordType.ABORT, 42)
    for value in (None, b"\x00\x00\x00", b"\xff\xff\x00\x00\x00\x01"):
        with pytest.raises(InvalidRecordError):
            decode_end_txn_marker(key, value)
    with pytest.raises(InvalidRecordError):
        decode_end_txn_marker(encode_control_key(ControlRecordType.LEADER_CHANGE),
                              encode_end_txn_marker(1))
