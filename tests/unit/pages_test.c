/* pages_test.c - the page cache: runs reused in front parts, assembled by
 * moving pages, grown mappings, runs that span two mappings, the cap. */
#define _GNU_SOURCE /* MADV_DONTFORK */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>
#include <pthread.h>
#include <sys/mman.h>

#include "spmdc/pages.h"

#include "bytes_test_support.h"

static void test_front_of_a_run(void **state)
{
    (void)state;
    pages_trim();
    size_t dirty;
    unsigned char *a = pages_map(8 * MIB, &dirty);
    assert_int_equal(dirty, 0); /* the cache was empty: fresh pages */
    assert_true(all_bytes(a, 8 * MIB, 0));
    memset(a, 0xab, 8 * MIB);
    pages_unmap(a, 8 * MIB);
    assert_int_equal(pages_cached(), 8 * MIB);
    /* the smallest run that holds it, its front part, as it was */
    unsigned char *b = pages_map(2 * MIB, &dirty);
    assert_ptr_equal(b, a);
    assert_int_equal(dirty, 2 * MIB);
    assert_true(all_bytes(b, 2 * MIB, 0xab));
    assert_int_equal(pages_cached(), 6 * MIB);
    pages_unmap(b, 2 * MIB); /* merges with the rest again */
    assert_int_equal(pages_cached(), 8 * MIB);
    pages_trim();
    assert_int_equal(pages_cached(), 0);
}

static void test_assembled_from_runs(void **state)
{
    (void)state;
    pages_trim();
    size_t dirty;
    unsigned char *x = pages_map(2 * MIB, &dirty), *y = pages_map(2 * MIB, &dirty), *z = pages_map(2 * MIB, &dirty);
    memset(x, 0x11, 2 * MIB);
    memset(z, 0x33, 2 * MIB);
    pages_unmap(x, 2 * MIB); /* y still mapped: x and z cannot merge */
    pages_unmap(z, 2 * MIB);
    assert_int_equal(pages_cached(), 4 * MIB);
    /* no run holds 5 MiB: both move into a fresh mapping, the rest fresh */
    unsigned char *p = pages_map(5 * MIB, &dirty);
    assert_int_equal(dirty, 4 * MIB);
    assert_int_equal(pages_cached(), 0);
    unsigned char first = p[0], second = first == 0x11 ? 0x33 : 0x11;
    assert_true(first == 0x11 || first == 0x33);
    assert_true(all_bytes(p, 2 * MIB, first));
    assert_true(all_bytes(p + 2 * MIB, 2 * MIB, second));
    assert_true(all_bytes(p + 4 * MIB, MIB, 0));
    pages_unmap(p, 5 * MIB);
    pages_unmap(y, 2 * MIB);
    pages_trim();
}

static void test_grow_takes_runs(void **state)
{
    (void)state;
    pages_trim();
    size_t dirty;
    unsigned char *p = pages_map(MIB, &dirty), *q = pages_map(2 * MIB, &dirty);
    memset(p, 0x77, MIB);
    memset(q, 0x55, 2 * MIB);
    pages_unmap(q, 2 * MIB);
    p = pages_grow(p, MIB, 4 * MIB, &dirty);
    assert_int_equal(dirty, 3 * MIB); /* q's pages after the old end */
    assert_true(all_bytes(p, MIB, 0x77));
    assert_true(all_bytes(p + MIB, 2 * MIB, 0x55));
    assert_true(all_bytes(p + 3 * MIB, MIB, 0));
    assert_int_equal(pages_cached(), 0);
    /* nothing cached: [old end, new end) is zero */
    p = pages_grow(p, 4 * MIB, 6 * MIB, &dirty);
    assert_int_equal(dirty, 4 * MIB);
    assert_true(all_bytes(p, MIB, 0x77));
    assert_true(all_bytes(p + 4 * MIB, 2 * MIB, 0));
    pages_unmap(p, 6 * MIB);
    pages_trim();
}

/* A mapping split in two by flags that keep the halves apart (mremap
 * moves within one mapping only). */
static unsigned char *two_mappings(size_t len, unsigned char v)
{
    size_t dirty;
    unsigned char *p = pages_map(len, &dirty);
    memset(p, v, len);
    assert_int_equal(madvise(p + len / 2, len / 2, MADV_DONTFORK), 0);
    return p;
}

static void test_runs_across_mappings(void **state)
{
    (void)state;
    pages_trim();
    size_t dirty;
    unsigned char *r = two_mappings(2 * MIB, 0x42);
    pages_unmap(r, 2 * MIB);
    unsigned char *p = pages_map(3 * MIB, &dirty); /* moved in parts */
    assert_int_equal(dirty, 2 * MIB);
    assert_true(all_bytes(p, 2 * MIB, 0x42));
    assert_true(all_bytes(p + 2 * MIB, MIB, 0));
    pages_unmap(p, 3 * MIB);
    pages_trim();
    /* growing such a mapping with nothing cached */
    unsigned char *g = two_mappings(2 * MIB, 0x24);
    g = pages_grow(g, 2 * MIB, 3 * MIB, &dirty);
    assert_int_equal(dirty, 2 * MIB);
    assert_true(all_bytes(g, 2 * MIB, 0x24));
    assert_true(all_bytes(g + 2 * MIB, MIB, 0));
    pages_unmap(g, 3 * MIB);
    pages_trim();
}

static void test_cap(void **state)
{
    (void)state;
    pages_trim();
    size_t dirty, big = PAGES_CACHE_MAX / 2 + MIB; /* never touched: address space only */
    unsigned char *a = pages_map(big, &dirty), *gap = pages_map(MIB, &dirty), *b = pages_map(big, &dirty);
    pages_unmap(a, big);
    pages_unmap(b, big); /* over the cap: unmapped */
    assert_int_equal(pages_cached(), big);
    pages_unmap(gap, MIB);
    assert_true(pages_cached() <= PAGES_CACHE_MAX);
    pages_trim();
    assert_int_equal(pages_cached(), 0);
}

/* The cache holds 256 runs: of runs the same size, the newest goes. */
static void test_run_slots(void **state)
{
    (void)state;
    pages_trim();
    size_t dirty, page = pages_size();
    unsigned char *p = pages_map(600 * page, &dirty);
    for (int k = 0; k < 300; k++) /* every other page: none touch */
        pages_unmap(p + 2 * k * page, page);
    assert_int_equal(pages_cached(), 256 * page);
    for (int k = 0; k < 300; k++) /* the pages between merge them */
        pages_unmap(p + (2 * k + 1) * page, page);
    assert_true(pages_cached() >= 256 * page);
    pages_trim();
    assert_int_equal(pages_cached(), 0);
}

/* Two threads take and give back blocks at once: each block keeps the
 * byte its thread wrote until that thread gives it back. */
static void *churn(void *arg)
{
    unsigned char v = (unsigned char)(uintptr_t)arg;
    unsigned s = v * 2654435761u;
    int bad = 0;
    unsigned char *prev = NULL;
    size_t prev_len = 0;
    for (int i = 0; i < 300 && !bad; i++) { /* holds one block while it takes the next */
        s = s * 1103515245u + 12345u;
        size_t dirty, len = (1 + (s >> 16) % 4) * MIB;
        unsigned char *p = pages_map(len, &dirty);
        if (i % 3 == 0) p = pages_grow(p, len, len + MIB, &dirty), len += MIB;
        memset(p, v, len);
        if (prev) {
            bad = !all_bytes(prev, prev_len, v);
            pages_unmap(prev, prev_len);
        }
        prev = p;
        prev_len = len;
    }
    bad |= !all_bytes(prev, prev_len, v);
    pages_unmap(prev, prev_len);
    return (void *)(uintptr_t)bad;
}

static void test_two_threads(void **state)
{
    (void)state;
    pages_trim();
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, churn, (void *)(uintptr_t)0x5a), 0);
    void *mine = churn((void *)(uintptr_t)0xa5), *theirs = NULL;
    assert_int_equal(pthread_join(t, &theirs), 0);
    assert_null(mine);
    assert_null(theirs);
    pages_trim();
    assert_int_equal(pages_cached(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_front_of_a_run),
        cmocka_unit_test(test_assembled_from_runs),
        cmocka_unit_test(test_grow_takes_runs),
        cmocka_unit_test(test_runs_across_mappings),
        cmocka_unit_test(test_cap),
        cmocka_unit_test(test_run_slots),
        cmocka_unit_test(test_two_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
