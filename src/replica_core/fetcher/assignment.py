"""Which fetcher serves a partition (§7.9, Kafka's ``AbstractFetcherManager.getFetcherId``).

``fetcherId = Utils.abs(31 * topic.hashCode() + partition) % num.replica.fetchers`` with Java
32-bit int arithmetic throughout. Matching it bit for bit keeps our partition-to-thread
assignment identical to a Kafka broker's.
"""
from __future__ import annotations

import sys
from array import array
from functools import lru_cache

_MASK = 0xFFFFFFFF
_INT_MIN = -(1 << 31)


def to_int32(n: int) -> int:
    """Wrap ``n`` to a Java ``int`` (two's complement, 32 bits)."""
    n &= _MASK
    return n - (1 << 32) if n & 0x80000000 else n


def java_abs(n: int) -> int:
    """Kafka's ``Utils.abs`` on an int: ``Math.abs`` except that ``Integer.MIN_VALUE`` maps to 0."""
    n = to_int32(n)
    return 0 if n == _INT_MIN else abs(n)


@lru_cache(maxsize=4096)
def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode``: ``h = 31 * h + c`` over UTF-16 code units, wrapping at 32 bits.

    Characters outside the BMP count as their two surrogates; lone surrogates as themselves.
    """
    units = array("H")
    units.frombytes(s.encode("utf-16-le", "surrogatepass"))
    if sys.byteorder == "big":
        units.byteswap()
    h = 0
    for c in units:
        h = (31 * h + c) & _MASK
    return to_int32(h)


def fetcher_id(topic: str, partition: int, num_fetchers: int) -> int:
    """Index of the fetcher (per source broker) that replicates ``topic``-``partition``."""
    if num_fetchers < 1:
        raise ValueError("num.replica.fetchers must be at least 1")
    return java_abs(31 * java_string_hash(topic) + partition) % num_fetchers
