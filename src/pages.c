/* pages.c - anonymous memory recycled within the process (see pages.h). */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* mremap */
#endif
#include "spmdc/pages.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <unistd.h>

#include "spmdc/arena.h"

size_t pages_size(void)
{
    static _Atomic size_t page; /* two threads may both set it, to the same value */
    size_t p = atomic_load_explicit(&page, memory_order_relaxed);
    if (!p) {
        long n = sysconf(_SC_PAGESIZE);
        p = n > 0 ? (size_t)n : 4096;
        atomic_store_explicit(&page, p, memory_order_relaxed);
    }
    return p;
}

static char *map_fresh(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) spmdc_oom();
    return p;
}

#ifdef __linux__
#include <pthread.h>

/* Runs the cache holds at most; the smallest goes when another comes. */
#define RUN_SLOTS 256
/* Pieces one request is assembled from at most. */
#define MAX_PIECES 32

typedef struct Run {
    char *p;
    size_t len;
} Run;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static Run g_runs[RUN_SLOTS];
static int g_n;
static size_t g_bytes;

/* Moves the pages of [src, src + len) to [dst, dst + len) (mapped or not:
 * what was there is unmapped).  mremap moves a range within one mapping
 * only (EFAULT otherwise): a run merged from neighbouring mappings is
 * moved in parts, halving where it fails.  Any other failure copies. */
static void move_run(char *src, size_t len, char *dst)
{
    if (mremap(src, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, dst) != MAP_FAILED) return;
    size_t page = pages_size();
    if (errno == EFAULT && len > page) {
        size_t half = (len / 2) & ~(page - 1);
        move_run(src, half, dst);
        move_run(src + half, len - half, dst + half);
        return;
    }
    /* dst lies in a mapping of ours (the fresh or the grown one): map it afresh, then copy */
    if (mmap(dst, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
        spmdc_oom();
    memcpy(dst, src, len);
    munmap(src, len);
}

static void drop_run(int i)
{
    g_bytes -= g_runs[i].len;
    g_runs[i] = g_runs[--g_n];
}

/* Takes cached pages for up to need bytes into pieces[] (at most
 * MAX_PIECES): the smallest run that holds need (its front part), or else
 * the largest runs until need is met.  Returns how many pieces. */
static int take_pieces(size_t need, Run *pieces)
{
    int n = 0;
    pthread_mutex_lock(&g_mu);
    int best = -1;
    for (int i = 0; i < g_n; i++)
        if (g_runs[i].len >= need && (best < 0 || g_runs[i].len < g_runs[best].len)) best = i;
    while (need > 0 && g_n > 0 && n < MAX_PIECES) {
        int k = best;
        if (k < 0) { /* the largest */
            k = 0;
            for (int i = 1; i < g_n; i++)
                if (g_runs[i].len > g_runs[k].len) k = i;
        }
        size_t part = g_runs[k].len < need ? g_runs[k].len : need;
        pieces[n].p = g_runs[k].p;
        pieces[n++].len = part;
        need -= part;
        if (part == g_runs[k].len) {
            drop_run(k);
        } else {
            g_runs[k].p += part;
            g_runs[k].len -= part;
            g_bytes -= part;
        }
        best = -1;
    }
    pthread_mutex_unlock(&g_mu);
    return n;
}

void *pages_map(size_t len, size_t *dirty)
{
    Run pieces[MAX_PIECES];
    int n = take_pieces(len, pieces);
    if (n == 1 && pieces[0].len == len) { /* one run held it: no system call */
        *dirty = len;
        return pieces[0].p;
    }
    char *p = map_fresh(len);
    size_t off = 0;
    for (int k = 0; k < n; k++) {
        move_run(pieces[k].p, pieces[k].len, p + off);
        off += pieces[k].len;
    }
    *dirty = off;
    return p;
}

void *pages_grow(void *p, size_t len, size_t new_len, size_t *dirty)
{
    Run pieces[MAX_PIECES];
    int n = take_pieces(new_len - len, pieces);
    char *q = mremap(p, len, new_len, MREMAP_MAYMOVE);
    if (q == MAP_FAILED) { /* a mapping merged from recycled runs */
        q = map_fresh(new_len);
        move_run(p, len, q);
    }
    size_t off = len;
    for (int k = 0; k < n; k++) {
        move_run(pieces[k].p, pieces[k].len, q + off);
        off += pieces[k].len;
    }
    *dirty = off;
    return q;
}

void pages_unmap(void *p, size_t len)
{
    char *b = p, *drop = NULL;
    size_t drop_len = 0;
    pthread_mutex_lock(&g_mu);
    if (g_bytes + len > PAGES_CACHE_MAX) {
        drop = b;
        drop_len = len;
    } else {
        for (int i = 0; i < g_n;) { /* merge with the runs it touches */
            if (g_runs[i].p + g_runs[i].len == b)
                b = g_runs[i].p;
            else if (b + len != g_runs[i].p) {
                i++;
                continue;
            }
            len += g_runs[i].len;
            drop_run(i);
        }
        if (g_n == RUN_SLOTS) { /* the smallest goes */
            int m = 0;
            for (int i = 1; i < g_n; i++)
                if (g_runs[i].len < g_runs[m].len) m = i;
            if (g_runs[m].len < len) {
                drop = g_runs[m].p;
                drop_len = g_runs[m].len;
                drop_run(m);
            } else {
                drop = b;
                drop_len = len;
            }
        }
        if (drop != b) {
            g_runs[g_n].p = b;
            g_runs[g_n++].len = len;
            g_bytes += len;
        }
    }
    pthread_mutex_unlock(&g_mu);
    if (drop) munmap(drop, drop_len);
}

void pages_setup_heap(void)
{
#if defined(__GLIBC__) && defined(M_ARENA_MAX)
    (void)mallopt(M_ARENA_MAX, 1);
    (void)mallopt(M_MMAP_THRESHOLD, 32 << 20);
    (void)mallopt(M_TRIM_THRESHOLD, 64 << 20);
#endif
}

void pages_trim(void)
{
    Run all[RUN_SLOTS];
    pthread_mutex_lock(&g_mu);
    int n = g_n;
    memcpy(all, g_runs, sizeof(Run) * (size_t)n);
    g_n = 0;
    g_bytes = 0;
    pthread_mutex_unlock(&g_mu);
    for (int i = 0; i < n; i++) munmap(all[i].p, all[i].len);
}

size_t pages_cached(void)
{
    pthread_mutex_lock(&g_mu);
    size_t n = g_bytes;
    pthread_mutex_unlock(&g_mu);
    return n;
}

#else /* no mremap: map and unmap directly */

void *pages_map(size_t len, size_t *dirty)
{
    *dirty = 0;
    return map_fresh(len);
}

void *pages_grow(void *p, size_t len, size_t new_len, size_t *dirty)
{
    char *q = map_fresh(new_len);
    memcpy(q, p, len);
    munmap(p, len);
    *dirty = len;
    return q;
}

void pages_unmap(void *p, size_t len) { munmap(p, len); }

void pages_trim(void) {}

void pages_setup_heap(void) {}

size_t pages_cached(void) { return 0; }

#endif
