/* driver.c - file I/O and the front half of the pipeline shared by the
 * subcommands (see driver.h). */
#define _XOPEN_SOURCE 700 /* realpath */
#include "spmdc/driver.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "spmdc/canonicalize.h"
#include "spmdc/parse.h"
#include "spmdc/propagate.h"
#include "spmdc/verify.h"

char *driver_read_file(const char *path, size_t *len)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) {
        fprintf(stderr, "spmdc: error: cannot read %s: %s\n", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = xmalloc(cap);
    for (;;) {
        if (n + 1 >= cap) {
            cap *= 2;
            buf = xrealloc(buf, cap);
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) break;
    }
    int bad = ferror(f), saved = errno;
    if (f != stdin) fclose(f);
    if (bad) {
        fprintf(stderr, "spmdc: error: cannot read %s: %s\n", path, strerror(saved));
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

/* Writes data to an open stream and closes it; false on any failure. */
static bool write_close(FILE *f, const char *data, size_t len)
{
    bool ok = f && fwrite(data, 1, len, f) == len;
    if (f) ok = (fclose(f) == 0) && ok;
    return ok;
}

/* The path a dangling symlink points to (relative targets resolved against
 * the link's directory), heap-allocated; NULL if path is no symlink. */
static char *dangling_target(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISLNK(st.st_mode)) return NULL;
    char link[4096];
    ssize_t n = readlink(path, link, sizeof link - 1);
    if (n <= 0) return NULL;
    link[n] = 0;
    const char *slash = strrchr(path, '/');
    size_t dir = (link[0] == '/' || !slash) ? 0 : (size_t)(slash - path) + 1;
    char *t = xmalloc(dir + (size_t)n + 1);
    memcpy(t, path, dir);
    memcpy(t + dir, link, (size_t)n + 1);
    return t;
}

bool driver_write_file(const char *path, const char *data, size_t len)
{
    if (strcmp(path, "-") == 0) {
        if (fwrite(data, 1, len, stdout) != len || fflush(stdout) != 0) {
            fprintf(stderr, "spmdc: error: cannot write standard output\n");
            return false;
        }
        return true;
    }
    struct stat st;
    bool exists = stat(path, &st) == 0; /* follows symlinks */
    if (exists && !S_ISREG(st.st_mode)) {
        /* A device or pipe (-o /dev/null, a FIFO): write in place, never rename over it. */
        if (write_close(fopen(path, "wb"), data, len)) return true;
        fprintf(stderr, "spmdc: error: cannot write %s: %s\n", path, strerror(errno));
        return false;
    }
    /* Write the file a symlink points to, not over the link (a dangling link
     * too: its target is created); keep an existing file's mode, else the
     * usual 0666 & ~umask. */
    char *target = exists ? realpath(path, NULL) : dangling_target(path);
    const char *dst = target ? target : path;
    mode_t mode;
    if (exists) {
        mode = st.st_mode & 07777;
    } else {
        mode_t mask = umask(0);
        umask(mask);
        mode = 0666 & ~mask;
    }
    size_t pl = strlen(dst);
    char *tmp = xmalloc(pl + 16);
    snprintf(tmp, pl + 16, "%s.tmpXXXXXX", dst);
    int fd = mkstemp(tmp);
    bool ok = fd >= 0;
    if (ok) {
        ok = fchmod(fd, mode) == 0;
        FILE *f = fdopen(fd, "wb");
        if (!f) close(fd);
        ok = write_close(f, data, len) && ok;
        ok = ok && rename(tmp, dst) == 0;
        if (!ok) {
            int saved = errno;
            unlink(tmp);
            errno = saved;
        }
    }
    if (!ok) fprintf(stderr, "spmdc: error: cannot write %s: %s\n", path, strerror(errno));
    free(tmp);
    free(target);
    return ok;
}

HloModule *driver_load_module(const char *text, size_t len, uint32_t file_id, PassCtx *cx, bool propagate)
{
    HloModule *m = parse_hlo(text, len, file_id, cx->diag);
    if (!m) return NULL;
    bool ok = verify_module(m, cx->diag) && bind_shardings(m, cx) && canonicalize_module(m, cx);
    arena_reset(cx->scratch);
    if (ok && propagate) {
        ok = propagate_shardings(m, cx);
        arena_reset(cx->scratch);
    }
    if (!ok) {
        hlo_module_free(m);
        return NULL;
    }
    return m;
}
