/* strbuf.h - growable NUL-terminated character buffer (heap, owned by the caller).
 *
 * StrBuf b = {0}; sb_printf(&b, "%d", 3); ... use b.data (may be NULL while
 * len == 0; sb_cstr() never is) ...; sb_free(&b);
 */
#ifndef SPMDC_STRBUF_H
#define SPMDC_STRBUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct StrBuf {
    char *data;  /* NUL-terminated once anything was appended */
    size_t len;  /* bytes, without the NUL */
    size_t cap;
} StrBuf;

void sb_putc(StrBuf *b, char c);
void sb_puts(StrBuf *b, const char *s);
void sb_putn(StrBuf *b, const char *s, size_t n);
void sb_printf(StrBuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* v in decimal, as printf's %" PRId64 " spells it (without printf's cost). */
void sb_int(StrBuf *b, int64_t v);
/* Appends "{a,b,c}" style lists: open, items separated by sep, close. */
void sb_int_list(StrBuf *b, const int64_t *v, int32_t n, const char *open, const char *sep, const char *close);
const char *sb_cstr(const StrBuf *b);
void sb_clear(StrBuf *b);
void sb_free(StrBuf *b);

#endif
