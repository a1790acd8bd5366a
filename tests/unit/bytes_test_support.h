/* bytes_test_support.h - helpers shared by arena_test.c and pages_test.c:
 * MIB and all_bytes (whether a block holds one byte value throughout). */
#ifndef SPMDC_BYTES_TEST_SUPPORT_H
#define SPMDC_BYTES_TEST_SUPPORT_H

#include <stddef.h>

#define MIB ((size_t)1 << 20)

/* Whether p[0, n) is all byte v. */
static inline int all_bytes(const unsigned char *p, size_t n, unsigned char v)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v) return 0;
    return 1;
}

#endif
