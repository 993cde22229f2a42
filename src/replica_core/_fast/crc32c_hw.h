#ifndef REPLICA_CORE_CRC32C_HW_H
#define REPLICA_CORE_CRC32C_HW_H
#include <stddef.h>
#include <stdint.h>

/* Must run once (with the GIL held) before any other call; the Cython module does it at import. */
void rc_crc32c_init(void);
/* 1 when the SSE4.2 engine is in use, 0 for the portable table engine. */
int rc_crc32c_hardware(void);
/* Select the engine (tests): 1 = hardware if the CPU has it, 0 = portable tables. */
void rc_crc32c_set_engine(int hardware);
/* Standard CRC-32C of data (initial value 0): crc32c(b"123456789") == 0xE3069283. */
uint32_t rc_crc32c(const unsigned char *data, size_t len);
/* Continue a CRC-32C: rc_crc32c_update(rc_crc32c(a), b) == rc_crc32c(a + b). */
uint32_t rc_crc32c_update(uint32_t crc, const unsigned char *data, size_t len);
#endif
