/* names_test.c - NameSet against a plain model: membership and the names
 * names_unique returns, through growth of the table, reserves and lookups
 * in between. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "spmdc/names.h"

/* The model: the set of names as a uthash table. */
typedef struct ModelEnt {
    char *name;
    UT_hash_handle hh;
} ModelEnt;

static bool model_has(ModelEnt *const *m, const char *name)
{
    ModelEnt *e = NULL;
    HASH_FIND_STR(*m, name, e);
    return e != NULL;
}

static void model_add(ModelEnt **m, const char *name)
{
    if (model_has(m, name)) return;
    ModelEnt *e = calloc(1, sizeof *e);
    e->name = strdup(name);
    HASH_ADD_KEYPTR(hh, *m, e->name, strlen(e->name), e);
}

/* names_unique's contract: name, else name.N with the smallest N >= 1 not held. */
static char *model_unique(ModelEnt **m, const char *name)
{
    char *r = malloc(strlen(name) + 24);
    strcpy(r, name);
    for (long long k = 1; model_has(m, r); k++) sprintf(r, "%s.%lld", name, k);
    model_add(m, r);
    return r;
}

static void model_free(ModelEnt **m)
{
    ModelEnt *e, *t;
    HASH_ITER(hh, *m, e, t) {
        HASH_DEL(*m, e);
        free(e->name);
        free(e);
    }
}

static uint64_t rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Random adds, unique names (fresh ones and taken ones, which need a
 * suffix), lookups of held and absent names, and reserves, checked against
 * the model after every step. */
static void run_mix(uint64_t seed, int steps, int reserve_every)
{
    Arena *a = arena_create();
    NameSet s;
    names_init(&s, a);
    ModelEnt *m = NULL;
    char buf[64];
    for (int i = 0; i < steps; i++) {
        uint64_t r = rng(&seed);
        int kind = (int)(r % 8);
        /* few bases, so fresh and taken names both come up often */
        snprintf(buf, sizeof buf, "%s.%llu", (r >> 8) % 3 ? "add" : "y", (unsigned long long)(r >> 16) % (uint64_t)(steps / 2 + 1));
        if (kind == 0) {
            const char *kept = arena_strdup(a, buf);
            names_add(&s, kept);
            model_add(&m, buf);
        } else if (kind <= 4) {
            const char *got = names_unique(&s, buf, a);
            char *want = model_unique(&m, buf);
            assert_string_equal(got, want);
            free(want);
        } else if (kind <= 6) {
            assert_int_equal(names_contains(&s, buf), model_has(&m, buf));
            snprintf(buf, sizeof buf, "absent.%d", i);
            assert_false(names_contains(&s, buf));
        } else if (reserve_every && i % reserve_every == 0) {
            names_reserve(&s, s.n + (uint32_t)(r >> 40) % 5000);
        }
    }
    /* everything the model holds is held */
    ModelEnt *e, *t;
    HASH_ITER(hh, m, e, t) assert_true(names_contains(&s, e->name));
    model_free(&m);
    arena_destroy(a);
}

static void test_mix_small(void **state)
{
    (void)state;
    run_mix(0x1234567u, 2000, 0);
}

static void test_mix_large_with_reserves(void **state)
{
    (void)state;
    run_mix(0x9e3779b97f4a7c15ull, 200000, 997);
}

/* A long run of fresh names: the table grows many times and each name
 * stays found; then the same names again get their suffixes in order. */
static void test_fresh_run_then_suffixes(void **state)
{
    (void)state;
    Arena *a = arena_create();
    NameSet s;
    names_init(&s, a);
    names_add(&s, "seed");
    char buf[32];
    for (int i = 0; i < 50000; i++) {
        snprintf(buf, sizeof buf, "v.%d.partial", i);
        assert_string_equal(names_unique(&s, buf, a), buf);
        if (i % 1000 == 999) { /* the newest name and an older one */
            assert_true(names_contains(&s, buf));
            snprintf(buf, sizeof buf, "v.%d.partial", i - 500);
            assert_true(names_contains(&s, buf));
        }
    }
    assert_int_equal(s.n, 50001);
    for (int i = 0; i < 50000; i += 7) {
        snprintf(buf, sizeof buf, "v.%d.partial", i);
        char want[48];
        snprintf(want, sizeof want, "%s.1", buf);
        assert_string_equal(names_unique(&s, buf, a), want);
        snprintf(want, sizeof want, "%s.2", buf);
        assert_string_equal(names_unique(&s, buf, a), want);
    }
    arena_destroy(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mix_small),
        cmocka_unit_test(test_mix_large_with_reserves),
        cmocka_unit_test(test_fresh_run_then_suffixes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
