/* names_test.c - NameSet against a plain model: membership and the names
 * names_unique returns, through growth of the table, reserves and lookups
 * in between; and a set over a NameBase against the same model. */
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

/* One step of a mixed run: name added to s and the model (add), or
 * names_unique of it checked against the model's answer. */
static void add_or_unique(NameSet *s, ModelEnt **m, Arena *a, const char *name, bool add)
{
    if (add) {
        names_add(s, arena_strdup(a, name));
        model_add(m, name);
        return;
    }
    const char *got = names_unique(s, name, a);
    char *want = model_unique(m, name);
    assert_string_equal(got, want);
    free(want);
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
        if (kind <= 4) {
            add_or_unique(&s, &m, a, buf, kind == 0);
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

/* The names of a base: an array of them. */
static const char *name_of(const void *ctx, uint32_t i) { return ((const char *const *)ctx)[i]; }

/* A set over a base against the model holding the base's names: names
 * without a '.', "op.N" names and names that a derived candidate equals
 * ("h.partial", "h.partial.1", whose prefix "h" is also a base name's
 * prefix, so the whole table is needed), then names_unique, names_add and
 * names_contains mixed as in run_mix.  (test_over_base_no_collision covers
 * the answers the small tables give alone.) */
static void run_over(uint64_t seed, int n_base, int steps)
{
    Arena *a = arena_create();
    ModelEnt *m = NULL;
    const char **names = calloc((size_t)n_base + 1, sizeof *names);
    char buf[64];
    int nb = 0;
    for (int i = 0; nb < n_base; i++) {
        uint64_t r = rng(&seed);
        static const char *const stems[] = {"h", "add", "y", "x.1", "zero"};
        const char *stem = stems[r % 5];
        switch ((r >> 8) % 4) {
        case 0: snprintf(buf, sizeof buf, "%s", stem); break;                                   /* no '.' or one */
        case 1: snprintf(buf, sizeof buf, "%s.%d", stem, i); break;                             /* op.N */
        case 2: snprintf(buf, sizeof buf, "%s.partial", stem); break;                           /* a derived one */
        default: snprintf(buf, sizeof buf, "%s.partial.%d", stem, i % 3 + 1); break;
        }
        if (model_has(&m, buf)) continue;
        model_add(&m, buf);
        names[nb++] = arena_strdup(a, buf);
    }
    NameBase base;
    names_base_init(&base, a, (uint32_t)nb, name_of, names);
    NameSet s;
    names_init(&s, a);
    names_set_base(&s, &base);
    for (int i = 0; i < steps; i++) {
        uint64_t r = rng(&seed);
        int kind = (int)(r % 8);
        static const char *const bases[] = {"h", "add.3", "y.7", "x.1", "zero", "w"};
        snprintf(buf, sizeof buf, "%s%s", bases[(r >> 8) % 6], (r >> 16) % 2 ? ".partial" : "");
        if (kind <= 4) {
            add_or_unique(&s, &m, a, buf, kind == 0);
        } else {
            assert_int_equal(names_contains(&s, buf), model_has(&m, buf));
            snprintf(buf, sizeof buf, "%s.%d", bases[(r >> 8) % 6], i % (n_base + 3));
            assert_int_equal(names_contains(&s, buf), model_has(&m, buf));
        }
    }
    ModelEnt *e, *t;
    HASH_ITER(hh, m, e, t) assert_true(names_contains(&s, e->name));
    model_free(&m);
    free(names);
    arena_destroy(a);
}

static void test_over_base(void **state)
{
    (void)state;
    run_over(0xabcdefu, 1000, 20000);
    run_over(0x5151u, 50000, 20000); /* the model searches suffixes from 1: quadratic in steps */
}

/* XLA's "op.N" names and derived ones whose prefix no base name has: the
 * answers come from the small tables. */
static void test_over_base_no_collision(void **state)
{
    (void)state;
    Arena *a = arena_create();
    const char *names[] = {"x", "zero", "h.1", "h.2", "y.1", "y.2", "act.1"}; /* "y" after "h": same length */
    NameBase base;
    names_base_init(&base, a, 7, name_of, names);
    assert_int_equal(base.prefixes.n, 3); /* h, act, y */
    assert_int_equal(base.undotted.n, 2);
    NameSet s;
    names_init(&s, a);
    names_set_base(&s, &base);
    assert_string_equal(names_unique(&s, "y.1.partial", a), "y.1.partial");
    assert_string_equal(names_unique(&s, "y.1.partial", a), "y.1.partial.1");
    assert_string_equal(names_unique(&s, "zero", a), "zero.1");
    assert_string_equal(names_unique(&s, "w", a), "w");
    assert_false(base.whole_built);
    assert_true(names_contains(&s, "x"));
    assert_false(names_contains(&s, "x.1"));   /* "x" is no prefix: no whole table */
    assert_false(base.whole_built);
    assert_true(names_contains(&s, "h.2"));    /* prefix "h": the whole table answers */
    assert_true(base.whole_built);
    assert_false(names_contains(&s, "h.3"));
    assert_string_equal(names_unique(&s, "h", a), "h");
    assert_string_equal(names_unique(&s, "h.1", a), "h.1.1");
    assert_string_equal(names_unique(&s, "y.2", a), "y.2.1");
    arena_destroy(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mix_small),
        cmocka_unit_test(test_mix_large_with_reserves),
        cmocka_unit_test(test_fresh_run_then_suffixes),
        cmocka_unit_test(test_over_base),
        cmocka_unit_test(test_over_base_no_collision),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
