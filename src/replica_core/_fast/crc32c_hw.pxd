from libc.stdint cimport uint32_t

cdef extern from "crc32c_hw.h" nogil:
    void rc_crc32c_init()
    int rc_crc32c_hardware()
    void rc_crc32c_set_engine(int hardware)
    uint32_t rc_crc32c(const unsigned char *data, size_t len)
    uint32_t rc_crc32c_update(uint32_t crc, const unsigned char *data, size_t len)
