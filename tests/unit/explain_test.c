/* explain_test.c - the explain sink (src/explain.c): candidates kept in the
 * partitioner's order (bytes, local work, enumeration) and capped, a
 * decision begun again starting over, report rows found by their link.
 * The printed chains are golden cases (tests/cases/explain/).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "spmdc/explain.h"

/* A rank-1 tiling split over atom a (a < 0: replicated). */
static Tiling t1(int8_t a)
{
    Tiling t;
    tiling_replicated(&t, 1);
    if (a >= 0)
        tiling_set_dim(&t, 0, &a, 1);
    return t;
}

static void test_order_and_cap(void **state)
{
    (void)state;
    Explain e;
    explain_init(&e);
    int32_t slots[1] = {0}, leaves[1] = {0};
    explain_begin(&e, 0, 0, 5, 1, slots, 1, leaves);
    /* (bytes, work): enumeration order 0..7 */
    static const int64_t bytes[] = {300, 100, 100, 50, 700, 100, 900, 200};
    static const double work[] = {1, 8, 4, 2, 1, 4, 1, 1};
    for (int k = 0; k < 8; k++) {
        Tiling w = t1((int8_t)k), r = t1(-1);
        explain_candidate(&e, &w, &r, bytes[k], work[k]);
    }
    const ExplainDecision *d = explain_decision(&e, 0, 5);
    assert_non_null(d);
    assert_int_equal(d->n_weighed, 8);
    assert_int_equal(d->n_alts, EXPLAIN_MAX_ALTS); /* 6 of 8 kept: 700 and 900 dropped */
    /* 50; 100 (work 4, order 2); 100 (work 4, order 5); 100 (work 8); 200; 300 */
    static const int64_t want_order[] = {3, 2, 5, 1, 7, 0};
    for (int k = 0; k < EXPLAIN_MAX_ALTS; k++)
        assert_int_equal(d->alts[k].order, want_order[k]);
    /* the same states again, cheaper: moves up, counted as weighed */
    Tiling w = t1(0), r = t1(-1);
    explain_candidate(&e, &w, &r, 60, 1);
    assert_int_equal(d->n_weighed, 9);
    assert_int_equal(d->alts[1].bytes, 60);
    assert_int_equal(d->n_alts, EXPLAIN_MAX_ALTS);
    /* begun again: starts over */
    explain_begin(&e, 0, 0, 5, 1, slots, 1, leaves);
    d = explain_decision(&e, 0, 5);
    assert_int_equal(d->n_weighed, 0);
    assert_int_equal(d->n_alts, 0);
    assert_null(explain_decision(&e, 1, 5));
    explain_free(&e);
}

static void test_links(void **state)
{
    (void)state;
    Explain e;
    explain_init(&e);
    Tiling a = t1(0), b = t1(-1);
    explain_link(&e, 0, 2, 0, 0, 7, 8, 0, 0, -1, &a, &b); /* rows 0 and 1 */
    explain_link(&e, 2, 2, 0, 0, 9, 9, 0, 0, -1, &a, &b); /* no rows: not kept */
    explain_link(&e, 3, 4, 0, 0, 11, 12, 0, 0, 11, &a, &b); /* row 3 */
    assert_int_equal(e.n_links, 2);
    assert_int_equal(explain_link_of(&e, 0)->value, 7);
    assert_int_equal(explain_link_of(&e, 1)->value, 7);
    assert_null(explain_link_of(&e, 2));                /* a row no reshard emitted */
    assert_int_equal(explain_link_of(&e, 3)->origin, 11);
    assert_null(explain_link_of(&e, 4));
    explain_free(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_and_cap),
        cmocka_unit_test(test_links),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
