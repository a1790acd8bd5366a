/* strbuf.c - growable character buffer. */
#include "spmdc/strbuf.h"
#include "spmdc/arena.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sb_grow(StrBuf *b, size_t extra)
{
    if (b->len + extra + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra + 1) cap *= 2;
    b->data = xrealloc(b->data, cap);
    b->cap = cap;
}

void sb_printf(StrBuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char tmp[256];
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) {
        sb_putn(b, tmp, (size_t)n);
        return;
    }
    sb_grow(b, (size_t)n);
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* "00" "01" ... "99": two digits per table step. */
static const char DIGIT_PAIRS[] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                                  "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                                  "8081828384858687888990919293949596979899";

/* Decimal digits of u (1 for 0). */
static size_t n_digits(uint64_t u)
{
    size_t n = 1;
    for (; u >= 100; u /= 100) n += 2;
    return n + (u >= 10);
}

/* The digits go straight into the buffer, from the last one back, two per
 * division (sb_int prints every dimension and operand number of the output). */
void sb_int(StrBuf *b, int64_t v)
{
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    size_t n = n_digits(u) + (v < 0);
    if (b->len + n + 1 > b->cap) sb_grow(b, n);
    char *p = b->data + b->len + n;
    *p = 0;
    for (; u >= 100; u /= 100) {
        p -= 2;
        memcpy(p, DIGIT_PAIRS + 2 * (u % 100), 2);
    }
    if (u >= 10) {
        p -= 2;
        memcpy(p, DIGIT_PAIRS + 2 * u, 2);
    } else {
        *--p = (char)('0' + u);
    }
    if (v < 0) *--p = '-';
    b->len += n;
}

void sb_int_list(StrBuf *b, const int64_t *v, int32_t n, const char *open, const char *sep, const char *close)
{
    sb_puts(b, open);
    for (int32_t i = 0; i < n; i++) {
        if (i) sb_puts(b, sep);
        sb_int(b, v[i]);
    }
    sb_puts(b, close);
}

const char *sb_cstr(const StrBuf *b) { return b->data ? b->data : ""; }

void sb_clear(StrBuf *b)
{
    b->len = 0;
    if (b->data) b->data[0] = 0;
}

void sb_free(StrBuf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

void sb_flush(StrBuf *b)
{
    StrSink *s = b->sink;
    if (!s || b->len == 0) return;
    if (!s->failed && !s->write(s->ctx, b->data, b->len)) s->failed = true;
    sb_clear(b);
}
