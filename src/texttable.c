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

static size_t text_width(const char *s)
{
    size_t w = 0;
    for (; *s; s++)
        if (((unsigned char)*s & 0xC0) != 0x80) w++;
    return w;
}

static void pad(StrBuf *b, size_t n)
{
    for (size_t i = 0; i < n; i++) sb_putc(b, ' ');
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
        bool last = col == nc - 1 || i == t->n_cells - 1;
        size_t fill = width[col] - text_width(t->cells[i]);
        sb_puts(b, "  ");
        if (t->align[col] == 'r') pad(b, fill);
        sb_puts(b, t->cells[i]);
        if (t->align[col] != 'r' && !last) pad(b, fill);
        if (last) sb_putc(b, '\n');
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
    char digits[32];
    int n = snprintf(digits, sizeof digits, "%lld", (long long)v);
    int start = digits[0] == '-' ? 1 : 0;
    if (start) sb_putc(b, '-');
    for (int i = start; i < n; i++) {
        sb_putc(b, digits[i]);
        int left = n - 1 - i;
        if (left > 0 && left % 3 == 0) sb_putc(b, ',');
    }
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

void text_put_bytes(StrBuf *b, int64_t v, size_t w)
{
    StrBuf e = {0};
    text_put_grouped(&e, v);
    sb_puts(&e, " B");
    pad(b, w > e.len ? w - e.len : 0);
    sb_puts(b, sb_cstr(&e));
    sb_free(&e);
    if (v >= 1024) sb_putc(b, ' ');
    put_human(b, v);
}

size_t text_bytes_width(int64_t v)
{
    StrBuf e = {0};
    text_put_grouped(&e, v);
    size_t n = e.len + 2;
    sb_free(&e);
    return n;
}
