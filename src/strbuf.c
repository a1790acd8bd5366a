/* strbuf.c - growable character buffer. */
#include "spmdc/strbuf.h"
#include "spmdc/arena.h"
#include "spmdc/diag.h"

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

/* Writes the n digits of u ending at p (exclusive), from the last one back,
 * two per division. */
static void put_digits(char *p, uint64_t u)
{
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
}

size_t str_put_u64(char *p, uint64_t u)
{
    size_t n = n_digits(u);
    put_digits(p + n, u);
    p[n] = 0;
    return n;
}

/* The digits go straight into the buffer (sb_int prints every dimension
 * and operand number of the output). */
void sb_int(StrBuf *b, int64_t v)
{
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    size_t n = n_digits(u) + (v < 0);
    if (b->len + n + 1 > b->cap) sb_grow(b, n);
    char *p = b->data + b->len;
    if (v < 0) *p = '-';
    put_digits(p + n, u);
    p[n] = 0;
    b->len += n;
}

/* The set of key[0..n): its words mixed, then the high bits folded down. */
static TextMemoSlot *memo_set(TextMemo *m, const void *key, size_t n)
{
    const unsigned char *k = key;
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n, w;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        memcpy(&w, k + i, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
    }
    for (; i < n; i++) h = (h ^ k[i]) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 29;
    return &m->slot[2 * (h % TEXT_MEMO_SETS)];
}

const StrBuf *text_memo_find(TextMemo *m, const void *key, size_t n)
{
    TextMemoSlot *set = memo_set(m, key, n);
    for (int w = 0; w < 2; w++)
        if (set[w].used && set[w].key_len == n && memcmp(set[w].key, key, n) == 0) {
            set[w].used = ++m->clock;
            return &set[w].text;
        }
    return NULL;
}

StrBuf *text_memo_put(TextMemo *m, const void *key, size_t n)
{
    SPMDC_ASSERT(n <= TEXT_MEMO_KEY);
    TextMemoSlot *set = memo_set(m, key, n), *s = set[0].used <= set[1].used ? &set[0] : &set[1];
    s->used = ++m->clock;
    s->key_len = n;
    memcpy(s->key, key, n);
    sb_clear(&s->text);
    return &s->text;
}

void text_memo_free(TextMemo *m)
{
    for (int k = 0; k < 2 * TEXT_MEMO_SETS; k++) sb_free(&m->slot[k].text);
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
