/* arena_test.c - alignment, zeroing, large blocks, reset. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "spmdc/arena.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alignment_and_zero),
        cmocka_unit_test(test_large_and_many),
        cmocka_unit_test(test_strings),
        cmocka_unit_test(test_grow_in_place),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
