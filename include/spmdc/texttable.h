/* texttable.h - the aligned text tables and byte figures of spmdc's reports
 * (the communication report, check's verdict, sweep's rows).
 *
 * A TextTable is filled cell by cell, row-major, and printed with its
 * columns aligned by code points (UTF-8): two spaces before every cell,
 * left- or right-aligned per column, the last column not padded.  Output
 * depends only on the cells (deterministic).
 */
#ifndef SPMDC_TEXTTABLE_H
#define SPMDC_TEXTTABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spmdc/strbuf.h"

#define TEXT_TABLE_MAX_COLS 16

typedef struct TextTable {
    int32_t n_cols;      /* 1..TEXT_TABLE_MAX_COLS */
    int32_t n_cells, cap;
    const char *align;   /* n_cols characters: 'l' or 'r' */
    char **cells;        /* heap copies */
} TextTable;

/* Appends cell's text as the next cell and clears cell. */
void text_table_put(TextTable *t, StrBuf *cell);
/* Appends a copy of s as the next cell. */
void text_table_puts(TextTable *t, const char *s);
/* Appends the table, one line per row. */
void text_table_print(StrBuf *b, const TextTable *t);
/* One cell as text_table_print lays it out, for a table printed row by row
 * without holding its cells (its column widths measured first): two
 * spaces, s padded with spaces to width code points (align 'r': before it,
 * 'l': after it); the last cell of a row is not padded and ends the line. */
void text_cell(StrBuf *b, const char *s, size_t width, char align, bool last);
/* Width of s in code points (UTF-8). */
size_t text_width(const char *s);
/* Frees the cells; t is empty afterwards (same columns). */
void text_table_free(TextTable *t);

/* 234881024 -> "234,881,024" (a '-' first for negative values). */
void text_put_grouped(StrBuf *b, int64_t v);
/* "234,881,024 B (224.0 MiB)": the exact byte count right-aligned to width
 * w (characters, the " B" included), then the binary unit rounded to one
 * decimal (KiB = 1024 B; nothing below 1 KiB). */
void text_put_bytes(StrBuf *b, int64_t v, size_t w);
/* Width of "234,881,024 B": the exact part of text_put_bytes. */
size_t text_bytes_width(int64_t v);

#endif
