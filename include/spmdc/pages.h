/* pages.h - anonymous memory recycled within the process.
 *
 * A large block freed with munmap hands its pages back to the kernel, and
 * the next large block faults every page in again: about 2 us per 4 KiB
 * page on this project's machines, and each munmap of resident pages
 * interrupts the other core with a TLB shootdown while a second thread
 * runs.  A pass's scratch (propagation's tables, the parser's AST blocks)
 * is freed just before the next pass allocates as much again, so the arena
 * gives the mappings of its large chunks (arena.c: MAP_MIN bytes and up)
 * back here and takes its next ones from here.
 *
 * The cache is a list of runs: page-aligned address ranges, each with its
 * pages resident and its bytes left as they were.  A request is served by
 * the smallest run that holds it (the front part of it: no system call), or
 * else by a fresh mapping into which cached runs are moved with mremap (the
 * pages move, nothing is copied), the rest of it fresh.  So a fresh page is
 * mapped only when the cache is empty, and the process's resident size
 * stays what it would be with munmap, plus what the cache holds between a
 * pass's frees and the next pass's allocations.  pages_trim empties it (the
 * pipeline calls it after its last pass, before printing).
 *
 * Thread-safe: one mutex around the list; moving pages happens outside it.
 * On systems other than Linux every call maps and unmaps directly.
 */
#ifndef SPMDC_PAGES_H
#define SPMDC_PAGES_H
#include <stddef.h>

/* The most bytes the cache holds; a run given back beyond it is unmapped. */
#define PAGES_CACHE_MAX ((size_t)512 << 20)

/* The system's page size in bytes (sysconf; 4096 if it cannot tell).
 * Every length and address below is a multiple of it. */
size_t pages_size(void);

/* A readable, writable private mapping of len bytes (a multiple of the
 * page size, > 0).  Bytes [0, *dirty) hold what earlier owners wrote
 * (recycled pages); [*dirty, len) are zero.  Out of memory calls
 * spmdc_oom(). */
void *pages_map(size_t len, size_t *dirty);

/* Grows the mapping p of len bytes (from pages_map or pages_grow, whole)
 * to new_len > len bytes, keeping bytes [0, len); returns its new address
 * (p is invalid afterwards).  *dirty: the end of the recycled bytes moved
 * in after len, or len when [len, new_len) is all zero. */
void *pages_grow(void *p, size_t len, size_t new_len, size_t *dirty);

/* Gives back [p, p + len) (page-aligned, a mapping or a part of one from
 * pages_map/pages_grow) to the cache, or to the kernel when the cache is
 * full. */
void pages_unmap(void *p, size_t len);

/* Returns every cached page to the kernel. */
void pages_trim(void);

/* Bytes the cache holds now (tests and benchmarks). */
size_t pages_cached(void);

/* Sets up the C library's heap for a run (call once at start-up, before
 * any thread): with glibc, one heap for every thread (a thread's first
 * malloc would otherwise map a heap of its own, 64 MiB reserved, and fault
 * in fresh pages where the main heap holds freed ones), and blocks up to
 * 32 MiB from that heap, kept there when freed (up to 64 MiB at its top)
 * for the next pass, not mapped and unmapped one by one.  The 1k-instruction
 * transformer's page faults 542 -> 481, the 1M one's 188k -> 179k.  A no-op
 * elsewhere. */
void pages_setup_heap(void);

#endif
