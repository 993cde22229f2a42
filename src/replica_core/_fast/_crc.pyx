# cython: language_level=3, boundscheck=False, wraparound=False
"""CRC-32C (Castagnoli) over any buffer, in C with SSE4.2 where the CPU has it."""
from libc.stdint cimport uint32_t
from replica_core._fast.crc32c_hw cimport (
    rc_crc32c_hardware,
    rc_crc32c_init,
    rc_crc32c_set_engine,
    rc_crc32c_update,
)

rc_crc32c_init()


def crc32c(data, unsigned int crc=0):
    """CRC-32C of ``data`` (bytes-like), continuing from ``crc`` (0 to start)."""
    cdef const unsigned char[::1] view = memoryview(data).cast("B")
    cdef size_t n = view.shape[0]
    cdef uint32_t out
    if n == 0:
        return crc
    with nogil:
        out = rc_crc32c_update(crc, &view[0], n)
    return out


def hardware() -> bool:
    """True when the SSE4.2 instruction engine is in use."""
    return bool(rc_crc32c_hardware())


def set_engine(hardware: bool) -> None:
    """Use the CPU instruction (True, if present) or the portable tables (False); for tests."""
    rc_crc32c_set_engine(1 if hardware else 0)
