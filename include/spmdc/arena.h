/* arena.h - bump allocators with a lifetime.
 *
 * Ownership rule (the only one in spmdc): nothing reachable from an HloModule
 * is freed on its own.  IR, names, shapes, shardings and attribute arrays are
 * allocated from the module's arena and released together by arena_destroy().
 * Per-pass temporaries come from a scratch arena that the driver resets after
 * every pass; no pointer into scratch may be stored in a module.
 *
 * Every allocation is zero-filled.  Out of memory calls spmdc_oom(), which
 * prints a message and exits (tests may replace the hook).  With
 * SPMDC_ARENA_DEBUG every allocation is its own malloc, so ASan sees overruns.
 */
#ifndef SPMDC_ARENA_H
#define SPMDC_ARENA_H

#include <stddef.h>

typedef struct Arena Arena;

/* A new, empty arena.  Never NULL (out of memory calls spmdc_oom). */
Arena *arena_create(void);
/* Frees every block of the arena and the arena itself.  NULL is a no-op. */
void arena_destroy(Arena *a);
/* Releases everything allocated so far; the arena stays usable.  One chunk
 * is kept, empty, so a per-item arena does not allocate a chunk per item. */
void arena_reset(Arena *a);
/* size bytes aligned to align (a power of two <= 64), zero-filled. */
void *arena_alloc(Arena *a, size_t size, size_t align);
/* Grows p (old_size bytes, from arena_alloc/arena_realloc of this arena with
 * the same align) to new_size bytes, zero-filling the new tail; returns the
 * new address (p is invalid afterwards).  Large blocks (16 KiB and up) are
 * grown in place or moved by realloc, so a doubling array costs O(final
 * size) memory instead of leaving every old copy in the arena. */
void *arena_realloc(Arena *a, void *p, size_t old_size, size_t new_size, size_t align);
/* Asks the kernel to back p (a block of a's from arena_alloc or
 * arena_realloc) with transparent huge pages when it has a mapping of its
 * own (MAP_MIN bytes and up, Linux; otherwise nothing).  For tables read
 * and written at random addresses (hash tables): every page of them is
 * touched anyway, so huge pages cost no more memory, one TLB entry covers
 * 512 pages and one fault maps them.  A block that arena_realloc grows
 * keeps the advice.  size is the block's size: a block under MAP_MIN bytes
 * has no mapping of its own, so nothing is searched for it. */
void arena_advise_random(Arena *a, const void *p, size_t size);
/* Copy of s (len bytes) with a terminating NUL. */
char *arena_strndup(Arena *a, const char *s, size_t len);
char *arena_strdup(Arena *a, const char *s);
/* Copy of n bytes of p (NULL when n == 0). */
void *arena_memdup(Arena *a, const void *p, size_t n);
/* Bytes handed out since creation/reset (for benchmarks). */
size_t arena_bytes_used(const Arena *a);

/* A point in an arena's life, to release back to: everything allocated
 * after arena_mark is released by arena_release, stack-wise (marks nest;
 * releasing an outer mark releases the inner ones' allocations too).  Made
 * for per-item temporaries in a long-lived pass: mark, work, release, so
 * the arena's size stays that of one item.  Nothing allocated (or grown
 * by arena_realloc) after the mark may be used after the release. */
typedef struct ArenaMark {
    void *head;          /* the head chunk then (NULL: none) */
    size_t used;         /* its bytes in use then */
    size_t total;        /* arena_bytes_used then */
    unsigned long long seq; /* chunks numbered from this on came later */
    size_t n_blocks;     /* SPMDC_ARENA_DEBUG: blocks then */
    int head_dedicated;
} ArenaMark;
ArenaMark arena_mark(const Arena *a);
/* Releases everything allocated since m (see ArenaMark).  One chunk made
 * since m is kept, empty, for the next allocations; the rest are freed. */
void arena_release(Arena *a, ArenaMark m);

/* Typed helpers: ARENA_NEW(a, T) and ARENA_ARRAY(a, T, n) return zeroed memory. */
#define ARENA_NEW(a, T) ((T *)arena_alloc((a), sizeof(T), _Alignof(T)))
#define ARENA_ARRAY(a, T, n) ((T *)arena_alloc((a), sizeof(T) * (size_t)(n), _Alignof(T)))

/* Out-of-memory hook: prints "spmdc: out of memory" and exits 70. */
_Noreturn void spmdc_oom(void);
/* malloc/realloc that never return NULL (call spmdc_oom instead). */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);

#endif
