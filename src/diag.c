/* diag.c - diagnostic printing with source excerpts (see diag.h). */
#include "spmdc/diag.h"
#include "spmdc/arena.h"
#include "spmdc/strbuf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct SrcFile {
    const char *path;
    const char *text;     /* NULL after diag_release_text, until re-read */
    size_t len;
    char *owned;          /* the text as re-read (freed by diag_destroy) */
    int fd;               /* to re-read the released text from; -1: none */
    struct stat stamp;    /* fd's fstat as the text was read: a re-read needs the same file, size and times */
    uint32_t *line_start; /* offsets of line starts, computed lazily */
    uint32_t n_lines;
} SrcFile;

struct DiagEngine {
    FILE *sink;
    StrBuf mem;
    SrcFile *files;
    uint32_t n_files;
    int n_errors, n_warnings, limit;
    bool show_source;
    bool hide_warnings;   /* diag_set_show_warnings(false) */
    bool last_hidden;     /* the previous message was not shown: neither are its notes */
};

const SrcSpan SRC_SPAN_NONE = {{0, 0, 0}, {0, 0, 0}};

SrcSpan src_span_at(uint32_t file_id, uint32_t line, uint32_t col)
{
    SrcSpan s = {{file_id, line, col}, {file_id, line, col}};
    return s;
}

DiagEngine *diag_create(FILE *sink)
{
    DiagEngine *d = xcalloc(1, sizeof *d);
    d->sink = sink;
    d->limit = 20;
    d->show_source = true;
    return d;
}

void diag_destroy(DiagEngine *d)
{
    if (!d) return;
    for (uint32_t i = 0; i < d->n_files; i++) {
        free(d->files[i].line_start);
        free((char *)d->files[i].path);
        free(d->files[i].owned);
        if (d->files[i].fd >= 0) close(d->files[i].fd);
    }
    free(d->files);
    sb_free(&d->mem);
    free(d);
}

uint32_t diag_add_file(DiagEngine *d, const char *path, const char *text, size_t len)
{
    d->files = xrealloc(d->files, (d->n_files + 1) * sizeof(SrcFile));
    SrcFile *f = &d->files[d->n_files++];
    memset(f, 0, sizeof *f);
    size_t pl = strlen(path);
    char *p = xmalloc(pl + 1);
    memcpy(p, path, pl + 1);
    f->path = p;
    f->text = text;
    f->len = len;
    f->fd = -1;
    return d->n_files;
}

/* Whether a and b describe one file in one state: the same inode, size,
 * and modification and change times (a rewrite in place with as many bytes
 * moves both, to the kernel's timestamp granularity, a few milliseconds at
 * worst). */
bool diag_same_file_state(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

void diag_release_text(DiagEngine *d, uint32_t file_id, int fd, const struct stat *as_read)
{
    SPMDC_ASSERT(file_id >= 1 && file_id <= d->n_files);
    SrcFile *f = &d->files[file_id - 1];
    f->text = NULL;
    if (f->fd >= 0) close(f->fd);
    f->fd = fd;
    if (fd >= 0 && as_read) {
        f->stamp = *as_read;
    } else if (fd >= 0 && fstat(fd, &f->stamp) != 0) {
        close(fd);
        f->fd = -1;
    }
}

/* Re-reads a released text from its descriptor: false (and no more tries)
 * when the file is no longer as it was read (diag_release_text) or a
 * read fails. */
static bool reload_text(SrcFile *f)
{
    if (f->fd < 0) return false;
    struct stat st;
    char *buf = NULL;
    size_t got = 0;
    if (fstat(f->fd, &st) == 0 && diag_same_file_state(&st, &f->stamp) && (uint64_t)st.st_size == (uint64_t)f->len) {
        buf = xmalloc(f->len + 1);
        while (got < f->len) {
            ssize_t r = pread(f->fd, buf + got, f->len - got, (off_t)got);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) break;
            got += (size_t)r;
        }
    }
    close(f->fd);
    f->fd = -1;
    if (!buf || got != f->len) {
        free(buf);
        return false;
    }
    buf[got] = 0;
    f->text = f->owned = buf;
    return true;
}

const char *diag_file_path(const DiagEngine *d, uint32_t file_id)
{
    if (file_id == 0 || file_id > d->n_files) return NULL;
    return d->files[file_id - 1].path;
}

void diag_set_show_source(DiagEngine *d, bool on) { d->show_source = on; }
void diag_set_error_limit(DiagEngine *d, int limit) { d->limit = limit; }
void diag_set_show_warnings(DiagEngine *d, bool on) { d->hide_warnings = !on; }
int diag_error_count(const DiagEngine *d) { return d->n_errors; }
int diag_warning_count(const DiagEngine *d) { return d->n_warnings; }
const char *diag_text(const DiagEngine *d) { return sb_cstr(&d->mem); }

static void index_lines(SrcFile *f)
{
    if (f->line_start) return;
    uint32_t n = 1;
    for (size_t i = 0; i < f->len; i++)
        if (diag_is_line_end(f->text, f->len, i)) n++;
    f->line_start = xmalloc(n * sizeof(uint32_t));
    f->line_start[0] = 0;
    uint32_t k = 1;
    for (size_t i = 0; i < f->len; i++)
        if (diag_is_line_end(f->text, f->len, i)) f->line_start[k++] = (uint32_t)(i + 1);
    f->n_lines = n;
}

static void emit(DiagEngine *d, const char *s, size_t n)
{
    if (d->sink)
        fwrite(s, 1, n, d->sink);
    else
        sb_putn(&d->mem, s, n);
}

static void print_excerpt(DiagEngine *d, StrBuf *out, SrcSpan span)
{
    if (!d->show_source || span.begin.file_id == 0 || span.begin.file_id > d->n_files) return;
    SrcFile *f = &d->files[span.begin.file_id - 1];
    if (!f->text && !reload_text(f)) return;
    index_lines(f);
    uint32_t line = span.begin.line;
    if (line == 0 || line > f->n_lines) return;
    size_t start = f->line_start[line - 1];
    size_t end = start;
    while (end < f->len && f->text[end] != '\n' && f->text[end] != '\r') end++;
    size_t width = end - start;
    if (width > 200) width = 200; /* do not flood the terminal with minified input */
    sb_puts(out, "  ");
    for (size_t i = 0; i < width; i++) {
        unsigned char c = (unsigned char)f->text[start + i];
        sb_putc(out, (c == '\t' || (c >= 32 && c < 127) || c >= 128) ? (char)c : '?');
    }
    sb_puts(out, "\n  ");
    uint32_t col = span.begin.col ? span.begin.col : 1;
    for (uint32_t i = 1; i < col && i <= width; i++)
        sb_putc(out, f->text[start + i - 1] == '\t' ? '\t' : ' ');
    sb_putc(out, '^');
    if (span.end.line == line && span.end.col > col) {
        for (uint32_t i = col + 1; i <= span.end.col && i <= width; i++) sb_putc(out, '~');
    }
    sb_putc(out, '\n');
}

void diag_report(DiagEngine *d, DiagLevel level, SrcSpan span, const char *fmt, va_list ap)
{
    if (level != DIAG_ERROR && (level == DIAG_WARNING ? d->hide_warnings : d->last_hidden)) {
        d->last_hidden = true;
        return;
    }
    d->last_hidden = false;
    if (level == DIAG_ERROR) {
        d->n_errors++;
        if (d->limit > 0 && d->n_errors > d->limit) {
            if (d->n_errors == d->limit + 1) {
                const char *m = "spmdc: note: too many errors; further errors are not shown\n";
                emit(d, m, strlen(m));
            }
            return;
        }
    } else if (level == DIAG_WARNING) {
        d->n_warnings++;
    } else if (d->limit > 0 && d->n_errors > d->limit) {
        return;
    }
    StrBuf out = {0};
    const char *path = diag_file_path(d, span.begin.file_id);
    if (path && span.begin.line)
        sb_printf(&out, "%s:%u:%u: ", path, span.begin.line, span.begin.col ? span.begin.col : 1);
    else if (path)
        sb_printf(&out, "%s: ", path);
    else
        sb_puts(&out, "spmdc: ");
    sb_puts(&out, level == DIAG_ERROR ? "error: " : level == DIAG_WARNING ? "warning: " : "note: ");
    va_list ap2;
    va_copy(ap2, ap);
    char tmp[512];
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap2);
    va_end(ap2);
    if (n >= 0) sb_putn(&out, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
    sb_putc(&out, '\n');
    print_excerpt(d, &out, span);
    emit(d, sb_cstr(&out), out.len);
    sb_free(&out);
}

#define DEFINE_DIAG(fn, lvl)                                            \
    void fn(DiagEngine *d, SrcSpan span, const char *fmt, ...)          \
    {                                                                   \
        va_list ap;                                                     \
        va_start(ap, fmt);                                              \
        diag_report(d, lvl, span, fmt, ap);                             \
        va_end(ap);                                                     \
    }
DEFINE_DIAG(diag_error, DIAG_ERROR)
DEFINE_DIAG(diag_warning, DIAG_WARNING)
DEFINE_DIAG(diag_note, DIAG_NOTE)

_Noreturn void spmdc_fatal(const char *fmt, ...)
{
    int saved = errno;
    fputs("spmdc: fatal: ", stderr);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    size_t n = strlen(fmt);
    if (n && fmt[n - 1] == ':') fprintf(stderr, " %s", strerror(saved));
    fputc('\n', stderr);
    exit(1);
}

_Noreturn void spmdc_internal_error(const char *file, int line, const char *msg)
{
    fprintf(stderr, "spmdc: internal error at %s:%d: %s\n", file, line, msg);
    abort();
}
