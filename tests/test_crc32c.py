"""The CRC-32C kernel against the ``crc32c`` PyPI package and the published check value."""
import os
import random

import crc32c as crc32c_pypi
import pytest
from hypothesis import given
from hypothesis import strategies as st

from replica_core._fast import _crc


def test_check_value():
    # The CRC catalogue's check value for CRC-32C over ASCII "123456789".
    assert _crc.crc32c(b"123456789") == 0xE3069283


def test_empty_and_continuation_of_nothing():
    assert _crc.crc32c(b"") == 0
    assert _crc.crc32c(b"", 0x1234) == 0x1234


@pytest.mark.parametrize(
    "size",
    # around the 3-lane boundaries of the hardware loop (3 x 256 and 3 x 8192) and alignment
    [1, 7, 8, 9, 767, 768, 769, 1535, 24575, 24576, 24577, 49153, 1 << 20, (1 << 20) + 13],
)
def test_matches_library_across_lane_boundaries(size):
    data = os.urandom(size)
    assert _crc.crc32c(data) == crc32c_pypi.crc32c(data)


def test_unaligned_views_and_buffer_types():
    data = bytearray(os.urandom(100_000))
    mv = memoryview(data)
    for start in range(0, 9):
        assert _crc.crc32c(mv[start:]) == crc32c_pypi.crc32c(bytes(data[start:]))
    import numpy as np

    arr = np.frombuffer(bytes(data), dtype=np.uint8)
    assert _crc.crc32c(arr) == crc32c_pypi.crc32c(bytes(data))


@given(st.binary(max_size=4096), st.integers(min_value=0, max_value=4096))
def test_continuation_equals_whole(data, cut):
    cut = min(cut, len(data))
    assert _crc.crc32c(data[cut:], _crc.crc32c(data[:cut])) == _crc.crc32c(data)


def test_single_bit_flip_detected():
    rng = random.Random(7)
    data = bytearray(os.urandom(4096))
    good = _crc.crc32c(data)
    for _ in range(64):
        i = rng.randrange(len(data))
        bit = 1 << rng.randrange(8)
        data[i] ^= bit
        assert _crc.crc32c(data) != good
        data[i] ^= bit


def test_portable_engine_matches_library():
    was_hw = _crc.hardware()
    try:
        _crc.set_engine(False)
        assert not _crc.hardware()
        for size in (0, 1, 9, 1000, 24577, 70001):
            data = os.urandom(size)
            assert _crc.crc32c(data) == crc32c_pypi.crc32c(data)
    finally:
        _crc.set_engine(was_hw)
