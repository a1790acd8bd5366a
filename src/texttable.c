/* texttable.c - aligned text tables and byte figures (texttable.h). */
#include "spmdc/texttable.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spmdc/arena.h"

void text_table_put(TextTable *t, StrBuf *cell)
{
    if (t->n_cells == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 64;
        t->cells = xrealloc(t->cells, sizeof(char *) * (size_t)t->cap);
    }
    const char *s = sb_cstr(cell);
    size_t n = strlen(s) + 1;
    char *c = xmalloc(n);
    memcpy(c, s, n);
    t->cells[t->n_cells++] = c;
    sb_clear(cell);
}

void text_table_puts(TextTable *t, const char *s)
{
    StrBuf b = {0};
    sb_puts(&b, s);
    text_table_put(t, &b);
    sb_free(&b);
}

size_t text_width(const char *s)
{
    size_t w = 0;
    for (; *s; s++)
        if (((unsigned char)*s & 0xC0) != 0x80) w++;
    return w;
}

static void pad(StrBuf *b, size_t n)
{
    static const char spaces[] = "                                ";
    while (n > 0) {
        size_t k = n < sizeof spaces - 1 ? n : sizeof spaces - 1;
        sb_putn(b, spaces, k);
        n -= k;
    }
}

void text_cell(StrBuf *b, const char *s, size_t width, char align, bool last)
{
    size_t w = text_width(s), fill = width > w ? width - w : 0;
    sb_putn(b, "  ", 2);
    if (align == 'r') pad(b, fill);
    sb_puts(b, s);
    if (align != 'r' && !last) pad(b, fill);
    if (last) sb_putc(b, '\n');
}

void text_table_print(StrBuf *b, const TextTable *t)
{
    size_t width[TEXT_TABLE_MAX_COLS] = {0};
    int32_t nc = t->n_cols < 1 ? 1 : t->n_cols > TEXT_TABLE_MAX_COLS ? TEXT_TABLE_MAX_COLS : t->n_cols;
    for (int32_t i = 0; i < t->n_cells; i++) {
        size_t w = text_width(t->cells[i]);
        if (w > width[i % nc]) width[i % nc] = w;
    }
    for (int32_t i = 0; i < t->n_cells; i++) {
        int32_t col = i % nc;
        text_cell(b, t->cells[i], width[col], t->align[col], col == nc - 1 || i == t->n_cells - 1);
    }
}

void text_table_free(TextTable *t)
{
    for (int32_t i = 0; i < t->n_cells; i++) free(t->cells[i]);
    free(t->cells);
    t->cells = NULL;
    t->n_cells = t->cap = 0;
}

void text_put_grouped(StrBuf *b, int64_t v)
{
    char tmp[32];
    size_t n = sizeof tmp;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    int k = 0;
    do {
        if (k > 0 && k % 3 == 0) tmp[--n] = ',';
        tmp[--n] = (char)('0' + u % 10);
        u /= 10;
        k++;
    } while (u);
    if (v < 0) tmp[--n] = '-';
    sb_putn(b, tmp + n, sizeof tmp - n);
}

/* "(224.0 MiB)"; nothing below 1 KiB. */
static void put_human(StrBuf *b, int64_t v)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (v < 1024) return;
    double x = (double)v / 1024.0;
    int u = 0;
    /* Roll over when rounding to one decimal would print 1024.0. */
    while (x >= 1023.95 && u < 5) x /= 1024.0, u++;
    sb_printf(b, "(%.1f %s)", x, units[u]);
}

/* Length of text_put_grouped(v)'s text. */
static size_t grouped_len(int64_t v)
{
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    size_t digits = 1;
    while (u >= 10) u /= 10, digits++;
    return (v < 0) + digits + (digits - 1) / 3;
}

void text_put_bytes(StrBuf *b, int64_t v, size_t w)
{
    size_t n = grouped_len(v) + 2;
    pad(b, w > n ? w - n : 0);
    text_put_grouped(b, v);
    sb_putn(b, " B", 2);
    if (v >= 1024) sb_putc(b, ' ');
    put_human(b, v);
}

size_t text_bytes_width(int64_t v) { return grouped_len(v) + 2; }
