/* diag.h - user-facing diagnostics: `path:line:col: error: message`.
 *
 * Three classes of trouble are kept apart:
 *  - user errors (bad input, a program spmdc cannot partition): diag_error();
 *    the pass returns false and later passes do not run;
 *  - OS errors (cannot open a file): spmdc_fatal("open %s:", path) prints and
 *    exits 1 (a trailing ':' appends strerror(errno));
 *  - bugs: SPMDC_ASSERT / SPMDC_UNREACHABLE print the internal file:line and abort.
 *
 * Locations are 1-based lines and byte columns.  A span with line == 0 has no
 * location (the message is printed as `path: error: ...` or `spmdc: error:`).
 * Each error is followed by the source line and a `^~~~` under the span.
 * After `error_limit` errors (default 20) further errors are counted but not
 * printed.
 */
#ifndef SPMDC_DIAG_H
#define SPMDC_DIAG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct SrcLoc {
    uint32_t file_id; /* from diag_add_file; 0 = no file */
    uint32_t line;    /* 1-based; 0 = unknown */
    uint32_t col;     /* 1-based byte column */
} SrcLoc;

typedef struct SrcSpan {
    SrcLoc begin;
    SrcLoc end; /* inclusive last character (may equal begin) */
} SrcSpan;

typedef enum DiagLevel { DIAG_ERROR, DIAG_WARNING, DIAG_NOTE } DiagLevel;

typedef struct DiagEngine DiagEngine;

/* Diagnostics go to sink (stderr in the CLI).  sink == NULL collects them in
 * memory; diag_text() returns what was written (unit tests). */
DiagEngine *diag_create(FILE *sink);
void diag_destroy(DiagEngine *d);
/* Registers a source buffer (not copied: it must outlive the engine) under a
 * display path.  Returns its file_id (>= 1). */
uint32_t diag_add_file(DiagEngine *d, const char *path, const char *text, size_t len);
const char *diag_file_path(const DiagEngine *d, uint32_t file_id);
/* The owner of file_id's text is about to free it (a large input, once
 * parsed, is not kept for the few diagnostics that may follow).  The engine
 * takes fd, an open descriptor of the regular file the text was read from
 * (closed by the engine), and re-reads the file's len bytes from it the
 * first time an excerpt needs them, keeping them until diag_destroy.
 * as_read is fd's fstat taken before the text was read (NULL: fd's fstat
 * now).  A file that has changed since then (its inode, size, modification
 * or change time differ, so a rewrite in place with as many bytes counts
 * too, also one made while the text was read or parsed), or cannot be read,
 * gets no excerpts: the messages are printed without their source line. */
struct stat;
void diag_release_text(DiagEngine *d, uint32_t file_id, int fd, const struct stat *as_read);
/* Whether a and b (fstat results) describe one file in one state: the same
 * device and inode, size, and modification and change times. */
bool diag_same_file_state(const struct stat *a, const struct stat *b);
/* Whether the source line + caret is printed after each message (default on). */
void diag_set_show_source(DiagEngine *d, bool on);
void diag_set_error_limit(DiagEngine *d, int limit);
/* Whether warnings (and the notes that follow them) are shown and counted
 * (default on); errors always are.  For a second run over an input whose
 * warnings were already shown. */
void diag_set_show_warnings(DiagEngine *d, bool on);

void diag_error(DiagEngine *d, SrcSpan span, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void diag_warning(DiagEngine *d, SrcSpan span, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void diag_note(DiagEngine *d, SrcSpan span, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void diag_report(DiagEngine *d, DiagLevel level, SrcSpan span, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

int diag_error_count(const DiagEngine *d);
int diag_warning_count(const DiagEngine *d);
/* In-memory sink only: everything printed so far (NUL-terminated). */
const char *diag_text(const DiagEngine *d);

/* Whether text[i] (of len bytes) ends a line.  Lines end at "\n", "\r\n"
 * (counted once, at the '\n') or a lone "\r", as in XLA's parser; every
 * line and column spmdc reports counts them this way. */
static inline bool diag_is_line_end(const char *text, size_t len, size_t i)
{
    return text[i] == '\n' || (text[i] == '\r' && (i + 1 >= len || text[i + 1] != '\n'));
}

/* A span for a single point. */
SrcSpan src_span_at(uint32_t file_id, uint32_t line, uint32_t col);
extern const SrcSpan SRC_SPAN_NONE;

_Noreturn void spmdc_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
_Noreturn void spmdc_internal_error(const char *file, int line, const char *msg);

#define SPMDC_ASSERT(c) \
    do { if (!(c)) spmdc_internal_error(__FILE__, __LINE__, "assertion failed: " #c); } while (0)
#define SPMDC_UNREACHABLE() spmdc_internal_error(__FILE__, __LINE__, "unreachable")

#endif
