/* strbuf.h - growable NUL-terminated character buffer (heap, owned by the caller).
 *
 * StrBuf b = {0}; sb_printf(&b, "%d", 3); ... use b.data (may be NULL while
 * len == 0; sb_cstr() never is) ...; sb_free(&b);
 *
 * A buffer with a sink (StrSink) streams: a printer calls sb_flush_point
 * where the text so far is final (between instructions, between records),
 * and once SB_SINK_CHUNK bytes have gathered they are handed to the sink
 * and the buffer starts again empty.  The text is never held whole; the
 * printer does not know whether it streams.  Text after the last flush
 * point stays in the buffer until sb_flush.
 */
#ifndef SPMDC_STRBUF_H
#define SPMDC_STRBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Where a streaming StrBuf's text goes.  write(ctx, data, len) consumes
 * data[0..len) and returns false on failure; after a failure `failed` is
 * set and later text is dropped (the owner of the sink reports it). */
typedef struct StrSink {
    bool (*write)(void *ctx, const char *data, size_t len);
    void *ctx;
    bool failed;
} StrSink;

typedef struct StrBuf {
    char *data;  /* NUL-terminated once anything was appended */
    size_t len;  /* bytes, without the NUL */
    size_t cap;
    StrSink *sink; /* NULL: the buffer holds all its text (not owned) */
} StrBuf;

/* Bytes gathered before sb_flush_point hands them to the sink: large
 * enough that the write system calls cost nothing, small enough to stay in
 * the L2 cache while the kernel copies them. */
#define SB_SINK_CHUNK ((size_t)256 * 1024)

/* Room for extra more bytes and the NUL (the slow path of the appenders). */
void sb_grow(StrBuf *b, size_t extra);

static inline void sb_putn(StrBuf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) sb_grow(b, n);
    if (n) memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
}

static inline void sb_putc(StrBuf *b, char c)
{
    if (b->len + 2 > b->cap) sb_grow(b, 1);
    b->data[b->len++] = c;
    b->data[b->len] = 0;
}

static inline void sb_puts(StrBuf *b, const char *s) { sb_putn(b, s, strlen(s)); }

void sb_printf(StrBuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* v in decimal, as printf's %" PRId64 " spells it (without printf's cost). */
void sb_int(StrBuf *b, int64_t v);
/* u's decimal digits and a NUL written at p (room for 21 bytes); returns
 * the digits written. */
size_t str_put_u64(char *p, uint64_t u);
/* Appends "{a,b,c}" style lists: open, items separated by sep, close. */
void sb_int_list(StrBuf *b, const int64_t *v, int32_t n, const char *open, const char *sep, const char *close);
const char *sb_cstr(const StrBuf *b);
void sb_clear(StrBuf *b);
void sb_free(StrBuf *b);

/* Hands the buffer's text to its sink (if any) and empties the buffer. */
void sb_flush(StrBuf *b);
/* The text so far is final: with a sink and at least SB_SINK_CHUNK bytes
 * gathered, sb_flush.  Without a sink, nothing. */
static inline void sb_flush_point(StrBuf *b)
{
    if (b->sink && b->len >= SB_SINK_CHUNK) sb_flush(b);
}

/* Texts by the bytes of a key, for printers that spell the same value
 * again and again (a layer's shapes and collectives are the next layer's):
 * TEXT_MEMO_SETS sets of two slots, the less recently used of a set
 * replaced.  A key is a struct whose unused and padding bytes the caller
 * zeroes, at most TEXT_MEMO_KEY bytes.  Zero-initialize; text_memo_free. */
#define TEXT_MEMO_SETS 32
#define TEXT_MEMO_KEY 256
typedef struct TextMemoSlot {
    uint64_t used; /* TextMemo.clock when last found or put (0: empty) */
    size_t key_len;
    unsigned char key[TEXT_MEMO_KEY];
    StrBuf text;
} TextMemoSlot;
typedef struct TextMemo {
    TextMemoSlot slot[2 * TEXT_MEMO_SETS];
    uint64_t clock;
} TextMemo;
/* The text kept for key[0..n), or NULL. */
const StrBuf *text_memo_find(TextMemo *m, const void *key, size_t n);
/* The emptied buffer that now keeps key[0..n)'s text, for the caller to
 * fill (it replaces the less recently used slot of the key's set). */
StrBuf *text_memo_put(TextMemo *m, const void *key, size_t n);
void text_memo_free(TextMemo *m);

#endif
