/* arena_test.c - alignment, zeroing, large blocks, reset. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "spmdc/arena.h"
#include "spmdc/pages.h"

#include "bytes_test_support.h"

static void test_alignment_and_zero(void **state)
{
    (void)state;
    Arena *a = arena_create();
    for (size_t align = 1; align <= 64; align *= 2) {
        arena_alloc(a, 3, 1); /* misalign the cursor */
        unsigned char *p = arena_alloc(a, 100, align);
        assert_int_equal((uintptr_t)p % align, 0);
        for (int i = 0; i < 100; i++) assert_int_equal(p[i], 0);
        memset(p, 0xab, 100);
    }
    arena_destroy(a);
}

static void test_large_and_many(void **state)
{
    (void)state;
    Arena *a = arena_create();
    /* Larger than one 64 KiB chunk: gets its own block. */
    unsigned char *big = arena_alloc(a, 1u << 20, 16);
    big[(1u << 20) - 1] = 1;
    for (int i = 0; i < 100000; i++) {
        int *p = ARENA_NEW(a, int);
        assert_int_equal(*p, 0);
        *p = i;
    }
    /* 1 MiB + 100000 ints were handed out. */
    assert_int_equal(arena_bytes_used(a), (1u << 20) + 100000 * sizeof(int));
    arena_reset(a);
    assert_int_equal(arena_bytes_used(a), 0);
    int *q = ARENA_ARRAY(a, int, 10);
    assert_int_equal(q[9], 0);
    arena_destroy(a);
}

static void test_strings(void **state)
{
    (void)state;
    Arena *a = arena_create();
    char *s = arena_strndup(a, "hello world", 5);
    assert_string_equal(s, "hello");
    assert_string_equal(arena_strdup(a, ""), "");
    assert_null(arena_memdup(a, "x", 0));
    arena_destroy(a);
}

static void test_grow_in_place(void **state)
{
    (void)state;
    Arena *a = arena_create();
    /* Small: copied; the new tail is zeroed. */
    int *p = ARENA_ARRAY(a, int, 4);
    for (int i = 0; i < 4; i++) p[i] = i + 1;
    p = arena_realloc(a, p, 4 * sizeof(int), 8 * sizeof(int), _Alignof(int));
    assert_int_equal(p[3], 4);
    assert_int_equal(p[7], 0);
    /* Large, doubling 64 times over: contents survive, tails are zero, and
     * the arena holds the final size plus the first small copies only. */
    size_t n = 8192;
    int64_t *v = ARENA_ARRAY(a, int64_t, n);
    for (size_t i = 0; i < n; i++) v[i] = (int64_t)i;
    for (int k = 0; k < 6; k++, n *= 2) {
        v = arena_realloc(a, v, n * sizeof(int64_t), 2 * n * sizeof(int64_t), _Alignof(int64_t));
        assert_int_equal(v[n], 0);
        for (size_t i = n; i < 2 * n; i++) v[i] = (int64_t)i;
        int *small = ARENA_NEW(a, int); /* interleaved small allocations */
        *small = 7;
    }
    for (size_t i = 0; i < n; i++) assert_int_equal(v[i], (int64_t)i);
#ifndef SPMDC_ARENA_DEBUG /* (the debug allocator copies every time) */
    /* 16 + 32 bytes of ints, 8192*8 bytes grown to 524288*8, 6 small ints. */
    assert_int_equal(arena_bytes_used(a), 16 + 32 + 524288 * 8 + 6 * sizeof(int));
#endif
    arena_destroy(a);
}

/* Chunks of 1 MiB and up go back to the page cache (pages.h) when freed,
 * and the next arena's large chunks take their pages, old bytes and all:
 * every allocation from them is still zero. */
static void test_recycled_pages_are_cleared(void **state)
{
    (void)state;
    pages_trim();
    Arena *a = arena_create();
    unsigned char *big = arena_alloc(a, 3 * MIB, 16), *grown = arena_alloc(a, 2 * MIB, 16);
    memset(big, 0xff, 3 * MIB);
    memset(grown, 0xff, 2 * MIB);
    for (int i = 0; i < 3000; i++) /* bump chunks of 64 KiB doubling to 2 MiB */
        memset(arena_alloc(a, 1000, 8), 0xff, 1000);
    arena_destroy(a);
#ifndef SPMDC_ARENA_DEBUG
    size_t cached = pages_cached();
    assert_true(cached >= 8 * MIB); /* 3 + 2 MiB dedicated, 1 + 2 MiB of bump chunks */
#endif
    Arena *b = arena_create();
    unsigned char *d = arena_alloc(b, 2 * MIB, 16);
    assert_true(all_bytes(d, 2 * MIB, 0));
    for (int i = 0; i < 3000; i++)
        assert_true(all_bytes(arena_alloc(b, 1000, 8), 1000, 0));
    /* grown from recycled pages: the old part kept, the new tail zero */
    unsigned char *g = arena_alloc(b, MIB + 4096, 16);
    memset(g, 0x5a, MIB + 4096);
    g = arena_realloc(b, g, MIB + 4096, 5 * MIB, 16);
    assert_true(all_bytes(g, MIB + 4096, 0x5a));
    assert_true(all_bytes(g + MIB + 4096, 4 * MIB - 4096, 0));
    /* a malloc'd block grown into a mapping of recycled pages */
    Arena *c = arena_create();
    memset(arena_alloc(c, 3 * MIB, 16), 0xff, 3 * MIB);
    arena_destroy(c);
    unsigned char *s = arena_alloc(b, 64 * 1024, 16);
    memset(s, 0x5a, 64 * 1024);
    s = arena_realloc(b, s, 64 * 1024, 2 * MIB, 16);
    assert_true(all_bytes(s, 64 * 1024, 0x5a));
    assert_true(all_bytes(s + 64 * 1024, 2 * MIB - 64 * 1024, 0));
#ifndef SPMDC_ARENA_DEBUG
    assert_true(pages_cached() < cached); /* b took recycled pages */
#endif
    arena_destroy(b);
    pages_trim();
}

/* Random allocations, growths, releases and destructions over a few
 * arenas, with sizes from bytes to megabytes so chunks go to the page cache
 * and come back: every new byte is zero, a grown block keeps its bytes, and
 * no two live blocks share memory (each holds its own byte to the end). */
typedef struct LiveBlock {
    unsigned char *p;
    size_t n;
    unsigned char v;
    int arena;
} LiveBlock;

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void test_random_reuse(void **state)
{
    (void)state;
    pages_trim();
    enum { ARENAS = 4, MAX_LIVE = 200, STEPS = 2000 };
    Arena *ar[ARENAS];
    for (int k = 0; k < ARENAS; k++) ar[k] = arena_create();
    LiveBlock *live = calloc(MAX_LIVE, sizeof *live);
    int n_live = 0;
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    unsigned next_id = 0;
    for (int step = 0; step < STEPS; step++) {
        uint64_t r = rng_next(&seed);
        int k = (int)(r % ARENAS);
        unsigned op = (unsigned)(r >> 8) % 16;
        if (op == 0) { /* destroy an arena: its blocks die */
            arena_destroy(ar[k]);
            ar[k] = arena_create();
            int w = 0;
            for (int i = 0; i < n_live; i++)
                if (live[i].arena != k) live[w++] = live[i];
            n_live = w;
        } else if (op <= 3 && n_live > 0) { /* grow a large block */
            LiveBlock *b = &live[(r >> 16) % (uint64_t)n_live];
            if (b->n < 16 * 1024) continue;
            size_t m = b->n + 1 + (size_t)((r >> 24) % (3u << 20));
            b->p = arena_realloc(ar[b->arena], b->p, b->n, m, 16);
            assert_true(all_bytes(b->p, b->n, b->v));
            assert_true(all_bytes(b->p + b->n, m - b->n, 0));
            memset(b->p + b->n, b->v, m - b->n);
            b->n = m;
        } else if (n_live < MAX_LIVE) { /* allocate: small, mid or large */
            size_t n = op < 10 ? 1 + (size_t)((r >> 16) % 512)
                     : op < 14 ? 1 + (size_t)((r >> 16) % (64 * 1024))
                               : (1u << 20) + (size_t)((r >> 16) % (2u << 20));
            unsigned char *p = arena_alloc(ar[k], n, 8);
            assert_true(all_bytes(p, n, 0));
            unsigned char v = (unsigned char)(1 + next_id++ % 255);
            memset(p, v, n);
            live[n_live++] = (LiveBlock){p, n, v, k};
        }
    }
    for (int i = 0; i < n_live; i++)
        assert_true(all_bytes(live[i].p, live[i].n, live[i].v));
    for (int k = 0; k < ARENAS; k++) arena_destroy(ar[k]);
    free(live);
    pages_trim();
}

/* A bump chunk kept by arena_reset or arena_release (the newest one, for
 * the next allocations) holds the bytes written into it: what it hands out
 * again is zero, and a fresh bump chunk from reused heap memory is too. */
static void test_reused_bump_chunk_is_cleared(void **state)
{
    (void)state;
    Arena *a = arena_create();
    unsigned char *p = arena_alloc(a, 3000, 8);
    memset(p, 0xaa, 3000);
    arena_reset(a);
    unsigned char *q = arena_alloc(a, 3000, 8);
#ifndef SPMDC_ARENA_DEBUG /* (the debug allocator mallocs every block) */
    assert_ptr_equal(p, q); /* the same chunk, the same bytes */
#endif
    assert_true(all_bytes(q, 3000, 0));
    memset(q, 0xbb, 3000);
    ArenaMark m = arena_mark(a);
    unsigned char *r = arena_alloc(a, 5000, 8);
    memset(r, 0xcc, 5000);
    arena_release(a, m);
    unsigned char *t = arena_alloc(a, 5000, 8);
    assert_true(all_bytes(t, 5000, 0));
    assert_true(all_bytes(q, 3000, 0xbb)); /* older than the mark: kept */
    arena_destroy(a);
    for (int k = 0; k < 8; k++) { /* chunks of freed heap memory, written all over before */
        Arena *b = arena_create();
        unsigned char *u = arena_alloc(b, 40000, 8);
        assert_true(all_bytes(u, 40000, 0));
        memset(u, 0xdd, 40000);
        arena_destroy(b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alignment_and_zero),
        cmocka_unit_test(test_large_and_many),
        cmocka_unit_test(test_strings),
        cmocka_unit_test(test_grow_in_place),
        cmocka_unit_test(test_recycled_pages_are_cleared),
        cmocka_unit_test(test_random_reuse),
        cmocka_unit_test(test_reused_bump_chunk_is_cleared),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
