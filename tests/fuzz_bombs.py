"""Decompression bombs in CRC-valid v2 batches, and a runner that feeds them to every entry
point that decompresses, under an address-space limit (issue 19).

Each bomb declares one record; a batch may legitimately decompress to one record's worth
(``max.message.bytes``) and each of these would decompress to hundreds of megabytes or more:

* ``zstd-rle``: a 96 KB zstd frame of 128 KiB RLE blocks (3 GiB), no content size declared;
* ``snappy-claim``: a xerial-snappy batch whose raw snappy block claims 4 GiB in its length
  preamble (the decoder would allocate the claimed size before reading a byte);
* ``gzip-members``: gzip members of 16 MiB of zeros each (about 1 GiB);
* ``lz4-frame``: an LZ4 frame of independent 4 MiB blocks of zeros (240 MiB).

``python tests/fuzz_bombs.py LIMIT_MB`` sets ``RLIMIT_AS`` to the process's current size plus
``LIMIT_MB`` and prints, as JSON, each bomb's outcome at each entry point (``["error", name,
code]`` or ``["ok"]``) and how long it took. Without bounds every one of them either raises
``MemoryError`` under that limit or, for the snappy claim, aborts the process.
"""
from __future__ import annotations

import json
import os
import resource
import struct
import sys
import time
import zlib

import cramjam
import crc32c as crc32c_pypi

NOW = 1_700_000_000_000
ZSTD_BLOCK = 128 * 1024


def v2_batch(codec: int, payload: bytes, count: int = 1) -> bytes:
    """A CRC-valid v2 batch of ``count`` records (client shape: base offset 0) around a payload."""
    after_crc = struct.pack(">hiqqqhii", codec, count - 1, NOW, NOW, -1, -1, -1, count) + payload
    header = struct.pack(">qiib", 0, len(after_crc) + 9, -1, 2)
    return header + struct.pack(">I", crc32c_pypi.crc32c(after_crc)) + after_crc


def zstd_rle(blocks: int = 24_000) -> bytes:
    """One zstd frame (no declared content size, 128 KiB window) of RLE blocks of 128 KiB."""
    frame = bytearray(b"\x28\xb5\x2f\xfd")
    frame += bytes([0x00, 0x38])            # descriptor: no FCS, no checksum; window 128 KiB
    for i in range(blocks):
        last = 1 if i == blocks - 1 else 0
        frame += (ZSTD_BLOCK << 3 | 1 << 1 | last).to_bytes(3, "little") + b"a"
    return v2_batch(4, bytes(frame))


def snappy_claim(claimed: int = 0xFFFFFFFF) -> bytes:
    """Xerial framing around one raw snappy block whose preamble claims ``claimed`` bytes."""
    varint = bytearray()
    v = claimed
    while True:
        if v < 0x80:
            varint.append(v)
            break
        varint.append(v & 0x7F | 0x80)
        v >>= 7
    block = bytes(varint) + b"\x0c" + b"abcd"      # then a 4-byte literal
    xerial = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", len(block)) + block
    return v2_batch(2, xerial)


def gzip_members(members: int = 60, member_bytes: int = 16 << 20) -> bytes:
    """``members`` gzip members, each ``member_bytes`` zeros."""
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    member = c.compress(bytes(member_bytes)) + c.flush()
    return v2_batch(1, member * members)


def lz4_frame(blocks: int = 60, block_bytes: int = 4 << 20) -> bytes:
    """An LZ4 frame (independent 4 MiB blocks, KIP-57) of ``blocks`` blocks of zeros."""
    from replica_core.records.compression import xxh32

    descriptor = bytes((0x60, 0x70))               # version 01, independent blocks; 4 MiB
    block = bytes(cramjam.lz4.compress_block(bytes(block_bytes), store_size=False))
    frame = bytearray(b"\x04\x22\x4d\x18" + descriptor)
    frame.append((xxh32(descriptor) >> 8) & 0xFF)
    for _ in range(blocks):
        frame += struct.pack("<I", len(block)) + block
    frame += bytes(4)
    return v2_batch(3, bytes(frame))


BOMBS = {"zstd-rle": zstd_rle, "snappy-claim": snappy_claim, "gzip-members": gzip_members,
         "lz4-frame": lz4_frame}


def entry_points(batch: bytes) -> dict:
    """Every path that decompresses a batch: reader, validator, leader append (fused and
    general), a timestamp lookup over a follower's stored copy."""
    from replica_core import records as R
    from replica_core.clock import ManualClock
    from replica_core.storage.config import LogConfig
    from replica_core.storage.log import Log
    from replica_core.storage.medium import MemoryMedium

    def reader():
        return [r.offset for b in R.iter_batches(batch) for r in b.records()]

    def validator():
        return R.validate_and_assign_offsets(batch, 0, 1, NOW).last_offset

    def validator_recompress():
        return R.validate_and_assign_offsets(batch, 0, 1, NOW, target_compression="none")

    def leader():
        log = Log.open("/b/leader-0", LogConfig(segment_index_bytes=4096), medium=MemoryMedium(),
                       clock=ManualClock(NOW))
        return log.append_as_leader(batch, 1).last_offset

    def timestamp_lookup():
        log = Log.open("/b/follower-0", LogConfig(segment_index_bytes=4096),
                       medium=MemoryMedium(), clock=ManualClock(NOW))
        log.append_as_follower(batch)          # a follower stores without decompressing
        return log.offset_for_timestamp(NOW)

    return {"reader": reader, "validator": validator,
            "validator-recompress": validator_recompress, "leader": leader,
            "timestamp-lookup": timestamp_lookup}


def run() -> dict:
    from replica_core.errors import KafkaError

    out = {}
    for name, build in BOMBS.items():
        batch = build()
        results = {"batch_bytes": len(batch)}
        for entry, fn in entry_points(batch).items():
            start = time.perf_counter()
            try:
                fn()
                results[entry] = ["ok"]
            except KafkaError as e:
                results[entry] = ["error", type(e).__name__, int(e.code)]
            results[entry].append(round(time.perf_counter() - start, 4))
        out[name] = results
    return out


def _vm_size() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


if __name__ == "__main__":
    import replica_core.records  # noqa: F401 - loaded before the limit is taken
    import replica_core.storage.log  # noqa: F401

    headroom = int(sys.argv[1]) << 20
    limit = _vm_size() + headroom
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    print(json.dumps(run()))
    sys.stdout.flush()
    os._exit(0)
