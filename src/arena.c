/* arena.c - chunked bump allocator (see arena.h for the ownership rule).
 *
 * Dedicated chunks under MAP_MIN come from calloc, so they are zero
 * already; bump chunks under MAP_MIN from malloc, every byte cleared as it
 * is handed out.  An allocation is cleared only where it may hold old bytes
 * (Chunk.clean, which a mapped chunk of recycled pages starts at its dirty
 * end, and a malloc'd bump chunk at its end).  Big chunks keep
 * normal pages:
 * asking for transparent huge pages costs more in the kernel's compaction on
 * fault than the faults it saves.
 *
 * On Linux a chunk of MAP_MIN bytes or more (a dedicated one, or a bump
 * chunk once the arena has grown that far) is its own anonymous mapping
 * from pages.h, grown by arena_realloc with pages_grow (mremap): new pages
 * are mapped on first touch, so a doubling array's unused capacity costs
 * address space, not resident memory (realloc would need the tail cleared,
 * which touches every page).  Freed, the mapping goes back to pages.h's
 * cache and its resident pages serve the next large chunks; those hold old
 * bytes up to Chunk.dirty, which are cleared as the arena hands them out. */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* mremap */
#endif
#include "spmdc/arena.h"
#include "spmdc/pages.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

#define CHUNK_MIN (64u * 1024u)
/* Allocations this large get a chunk of their own, kept behind the head so
 * small allocations go on filling the head chunk. */
#define DEDICATED_MIN (CHUNK_MIN / 4)
/* Dedicated chunks this large are anonymous mappings (Linux). */
#define MAP_MIN (1u << 20)

typedef struct Chunk {
    struct Chunk *next;
    size_t cap;  /* usable bytes after the header */
    size_t used;
    size_t clean;   /* data[clean..cap) is known to be zero */
    unsigned long long seq; /* creation number in its arena (arena_release) */
    bool dedicated; /* holds exactly one large allocation (arena_realloc may grow it) */
    bool mapped;    /* its own mapping of map_len bytes from pages.h (MAP_MIN and up) */
    bool advised;   /* mapped, with transparent huge pages asked for (arena_advise_random) */
    size_t map_len;
    size_t dirty;   /* mapped: bytes of the mapping from here on are zero (before: maybe not) */
    _Alignas(64) unsigned char data[];
} Chunk;

struct Arena {
    Chunk *head;
    size_t total;
    unsigned long long next_seq;
#ifdef SPMDC_ARENA_DEBUG
    void **blocks;
    size_t n_blocks, cap_blocks;
#endif
};

_Noreturn void spmdc_oom(void)
{
    fputs("spmdc: fatal: out of memory\n", stderr);
    exit(70);
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) spmdc_oom();
    return p;
}

void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) spmdc_oom();
    return p;
}

void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) spmdc_oom();
    return q;
}

Arena *arena_create(void)
{
    return xcalloc(1, sizeof(Arena));
}

static void chunk_free(Chunk *c)
{
#ifdef __linux__
    if (c->mapped) {
#ifdef MADV_NOHUGEPAGE
        /* whoever reuses the pages gets normal ones for the pages it adds */
        if (c->advised) (void)madvise(c, c->map_len, MADV_NOHUGEPAGE);
#endif
        pages_unmap(c, c->map_len);
        return;
    }
#endif
    free(c);
}

static void free_chunks(Arena *a)
{
    Chunk *c = a->head;
    while (c) {
        Chunk *n = c->next;
        chunk_free(c);
        c = n;
    }
    a->head = NULL;
#ifdef SPMDC_ARENA_DEBUG
    for (size_t i = 0; i < a->n_blocks; i++) free(a->blocks[i]);
    a->n_blocks = 0;
#endif
}

void arena_destroy(Arena *a)
{
    if (!a) return;
    free_chunks(a);
#ifdef SPMDC_ARENA_DEBUG
    free(a->blocks);
#endif
    free(a);
}

void arena_reset(Arena *a)
{
#ifdef SPMDC_ARENA_DEBUG
    free_chunks(a);
#else
    /* The newest bump chunk stays, empty, for the next allocations: a
     * per-item arena (the parser's, reset after every instruction) would
     * otherwise get a fresh chunk from calloc, and clear it, per item. */
    Chunk *spare = NULL;
    for (Chunk *c = a->head; c;) {
        Chunk *n = c->next;
        if (!c->dedicated && !spare) spare = c;
        else chunk_free(c);
        c = n;
    }
    a->head = spare;
    if (spare) {
        spare->next = NULL;
        spare->used = 0;
    }
#endif
    a->total = 0;
}

size_t arena_bytes_used(const Arena *a) { return a->total; }

#ifndef SPMDC_ARENA_DEBUG
/* A zeroed chunk with cap data bytes. */
static Chunk *new_chunk(size_t cap) { return xcalloc(1, sizeof(Chunk) + cap); }

/* A bump chunk with cap data bytes from malloc, its header zeroed and its
 * data not: every byte is cleared as it is handed out (clean = cap), so a
 * chunk of which an arena uses a few bytes (most scratch arenas of a small
 * module) costs those bytes, where calloc clears all 64 KiB of a chunk
 * that reuses freed memory. */
static Chunk *new_bump_chunk(size_t cap)
{
    Chunk *c = xmalloc(sizeof(Chunk) + cap);
    memset(c, 0, sizeof *c);
    c->clean = cap;
    return c;
}

#ifdef __linux__
static size_t map_length(size_t cap)
{
    size_t page = pages_size(), n = sizeof(Chunk) + cap;
    if (n < cap) spmdc_oom();
    return (n + page - 1) & ~(page - 1);
}

/* A chunk of cap data bytes in its own mapping, header set; its data may
 * hold old bytes below dirty - sizeof(Chunk) (recycled pages). */
static Chunk *new_mapped_chunk(size_t cap)
{
    size_t len = map_length(cap), dirty;
    Chunk *c = pages_map(len, &dirty);
    memset(c, 0, sizeof *c);
    c->mapped = true;
    c->map_len = len;
    c->dirty = dirty > sizeof(Chunk) ? dirty : sizeof(Chunk);
    return c;
}

/* Bytes of c's data from off on that may hold old bytes, up to size. */
static size_t dirty_span(const Chunk *c, size_t off, size_t size)
{
    size_t end = c->dirty - sizeof(Chunk);
    if (off >= end) return 0;
    return end - off < size ? end - off : size;
}
#endif

/* A zeroed chunk for one allocation of size bytes. */
static Chunk *new_dedicated_chunk(size_t size)
{
#ifdef __linux__
    if (size >= MAP_MIN) {
        Chunk *c = new_mapped_chunk(size);
        memset(c->data, 0, dirty_span(c, 0, size));
        return c;
    }
#endif
    return new_chunk(size);
}

/* Clears data[off, off+size) of c where it may hold old bytes. */
static void clear_used(Chunk *c, size_t off, size_t size)
{
    if (off < c->clean) memset(c->data + off, 0, size < c->clean - off ? size : c->clean - off);
    if (off + size > c->clean) c->clean = off + size;
}
#endif

void arena_advise_random(Arena *a, const void *p, size_t size)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE) && !defined(SPMDC_ARENA_DEBUG)
    if (size < MAP_MIN) return; /* in a bump chunk or a calloc'd one: no mapping of its own */
    for (Chunk *c = a->head; c; c = c->next)
        if (c->dedicated && (const void *)c->data == p) {
            /* the whole mapping, so it stays one mapping for mremap */
            if (c->mapped && madvise(c, c->map_len, MADV_HUGEPAGE) == 0) c->advised = true;
            return;
        }
#else
    (void)a;
    (void)p;
    (void)size;
#endif
}

ArenaMark arena_mark(const Arena *a)
{
    ArenaMark m;
    memset(&m, 0, sizeof m);
    m.head = a->head;
    m.used = a->head ? a->head->used : 0;
    m.head_dedicated = a->head ? a->head->dedicated : 0;
    m.total = a->total;
    m.seq = a->next_seq;
#ifdef SPMDC_ARENA_DEBUG
    m.n_blocks = a->n_blocks;
#endif
    return m;
}

void arena_release(Arena *a, ArenaMark m)
{
#ifdef SPMDC_ARENA_DEBUG
    for (size_t i = m.n_blocks; i < a->n_blocks; i++) free(a->blocks[i]);
    if (m.n_blocks < a->n_blocks) a->n_blocks = m.n_blocks;
#endif
    Chunk *spare = NULL;
    for (Chunk **pp = &a->head; *pp;) {
        Chunk *c = *pp;
        if (c->seq < m.seq) {
            pp = &c->next;
            continue;
        }
        *pp = c->next;
        if (!c->dedicated && !spare) spare = c; /* the newest bump chunk */
        else chunk_free(c);
    }
    if (m.head && !m.head_dedicated) ((Chunk *)m.head)->used = m.used; /* still listed: older than m */
    if (spare) {
        spare->used = 0;
        spare->next = a->head;
        a->head = spare;
    }
    a->total = m.total;
}

void *arena_alloc(Arena *a, size_t size, size_t align)
{
    if (align == 0) align = 1;
    a->total += size;
#ifdef SPMDC_ARENA_DEBUG
    if (a->n_blocks == a->cap_blocks) {
        a->cap_blocks = a->cap_blocks ? a->cap_blocks * 2 : 64;
        a->blocks = xrealloc(a->blocks, a->cap_blocks * sizeof(void *));
    }
    void *p = NULL;
    if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size ? size : 1) != 0) spmdc_oom();
    memset(p, 0, size);
    a->blocks[a->n_blocks++] = p;
    return p;
#else
    Chunk *c = a->head;
    if (size >= DEDICATED_MIN && align <= 16) {
        /* malloc aligns to 16, and data sits at a multiple of 64 in Chunk. */
        Chunk *d = new_dedicated_chunk(size);
        d->cap = d->used = d->clean = size;
        d->seq = a->next_seq++;
        d->dedicated = true;
        if (c) {
            d->next = c->next;
            c->next = d;
        } else {
            d->next = NULL;
            a->head = d;
        }
        return d->data;
    }
    if (c && c->dedicated) c = NULL; /* never bump-allocate into a dedicated chunk */
    if (c) {
        uintptr_t base = (uintptr_t)c->data;
        size_t off = (size_t)(((base + c->used + (align - 1)) & ~(uintptr_t)(align - 1)) - base);
        if (off <= c->cap && size <= c->cap - off) {
            c->used = off + size;
            clear_used(c, off, size);
            return c->data + off;
        }
    }
    size_t cap = size + align > CHUNK_MIN ? size + align : CHUNK_MIN;
    if (c && c->cap * 2 > cap && c->cap < (64u << 20)) cap = c->cap * 2;
#ifdef __linux__
    Chunk *n = cap >= MAP_MIN ? new_mapped_chunk(cap) : new_bump_chunk(cap);
    if (n->mapped) n->clean = dirty_span(n, 0, cap);
#else
    Chunk *n = new_bump_chunk(cap);
#endif
    n->next = a->head;
    n->cap = cap;
    n->seq = a->next_seq++;
    n->dedicated = false;
    a->head = n;
    uintptr_t base = (uintptr_t)n->data;
    size_t off = (size_t)(((base + (align - 1)) & ~(uintptr_t)(align - 1)) - base);
    n->used = off + size;
    clear_used(n, off, size);
    return n->data + off;
#endif
}

void *arena_realloc(Arena *a, void *p, size_t old_size, size_t new_size, size_t align)
{
    if (!p) return arena_alloc(a, new_size, align);
    if (new_size <= old_size) return p;
#ifndef SPMDC_ARENA_DEBUG
    if (old_size >= DEDICATED_MIN && align <= 16) {
        for (Chunk **pp = &a->head; *pp; pp = &(*pp)->next) {
            Chunk *c = *pp;
            if (!c->dedicated || (void *)c->data != p) continue;
#ifdef __linux__
            if (c->mapped) {
                size_t len = map_length(new_size), moved = 0;
                if (len > c->map_len) {
                    c = pages_grow(c, c->map_len, len, &moved);
                    if (moved > c->map_len) c->dirty = moved; /* recycled pages after the old end */
                    c->map_len = len;
#ifdef MADV_HUGEPAGE
                    if (c->advised) (void)madvise(c, len, MADV_HUGEPAGE); /* the whole mapping, as before */
#endif
                }
                memset(c->data + old_size, 0, dirty_span(c, old_size, new_size - old_size));
            } else if (new_size >= MAP_MIN) {
                Chunk *d = new_mapped_chunk(new_size);
                Chunk h = *d;
                memcpy(d, c, sizeof(Chunk) + old_size);
                d->mapped = true;
                d->map_len = h.map_len;
                d->dirty = h.dirty;
                d->advised = h.advised;
                memset(d->data + old_size, 0, dirty_span(d, old_size, new_size - old_size));
                free(c);
                c = d;
            } else
#endif
            {
                c = xrealloc(c, sizeof(Chunk) + new_size);
                memset(c->data + old_size, 0, new_size - old_size);
            }
            c->cap = c->used = c->clean = new_size;
            *pp = c;
            a->total += new_size - old_size;
            return c->data;
        }
    }
#endif
    void *q = arena_alloc(a, new_size, align);
    memcpy(q, p, old_size);
    return q;
}

char *arena_strndup(Arena *a, const char *s, size_t len)
{
    char *p = arena_alloc(a, len + 1, 1);
    if (len) memcpy(p, s, len);
    p[len] = 0;
    return p;
}

char *arena_strdup(Arena *a, const char *s) { return arena_strndup(a, s, strlen(s)); }

void *arena_memdup(Arena *a, const void *p, size_t n)
{
    if (n == 0) return NULL;
    void *q = arena_alloc(a, n, 16);
    memcpy(q, p, n);
    return q;
}
