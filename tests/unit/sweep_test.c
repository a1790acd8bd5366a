/* sweep_test.c - `spmdc sweep`'s mesh lists, reference rows and marks
 * (src/sweep.c); the compiled rows themselves are golden cases
 * (tests/cases/sweep/, figures in its README.md).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "spmdc/sweep.h"

static void test_spec(void **state)
{
    (void)state;
    SweepSpec s;
    memset(&s, 0, sizeof s);
    char err[300];
    assert_true(sweep_parse_spec(&s, "data=1,2  model=1,2,4,8", err, sizeof err));
    assert_int_equal(s.n_axes, 2);
    assert_string_equal(s.names[1], "model");
    assert_int_equal(s.n_sizes[1], 4);
    assert_int_equal(s.sizes[1][3], 8);
    assert_int_equal(sweep_n_rows(&s), 8); /* 2 * 4 */
    assert_true(sweep_parse_spec(&s, "pipe=3", err, sizeof err)); /* a second --mesh adds an axis */
    assert_int_equal(sweep_n_rows(&s), 8);
    static const char *const bad[] = {"model", "model=", "=2", "model=0", "model=1,2,", "model=1,,2", "model=x",
                                      "data=4", "model=65537"};
    static const char *const why[] = {"is not an axis", "is not an axis", "is not an axis", "not a list",
                                      "ends with ','", "not a list", "not a list", "given twice", "not a list"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        SweepSpec fresh;
        memset(&fresh, 0, sizeof fresh);
        /* "data=4": against the spec that already has data */
        assert_false(sweep_parse_spec(strcmp(bad[k], "data=4") ? &fresh : &s, bad[k], err, sizeof err));
        if (!strstr(err, why[k]))
            fail_msg("%s: %s", bad[k], err);
    }
}

static void test_reference_rows(void **state)
{
    (void)state;
    SweepSpec s;
    memset(&s, 0, sizeof s);
    char err[300];
    assert_true(sweep_parse_spec(&s, "data=1,2 model=1,2,4,8", err, sizeof err));
    SweepRow rows[8];
    memset(rows, 0, sizeof rows);
    for (int32_t r = 0; r < 8; r++) {
        rows[r].idx[0] = r / 4;
        rows[r].idx[1] = r % 4;
    }
    assert_int_equal(sweep_reference_row(&s, rows, 0), -1); /* data=1,model=1: the first */
    assert_int_equal(sweep_reference_row(&s, rows, 1), 0);  /* data=1,model=2 vs data=1,model=1 */
    assert_int_equal(sweep_reference_row(&s, rows, 3), 2);  /* model=8 vs model=4 */
    assert_int_equal(sweep_reference_row(&s, rows, 4), 0);  /* data=2,model=1 vs data=1,model=1 */
    assert_int_equal(sweep_reference_row(&s, rows, 6), 5);  /* data=2,model=4 vs data=2,model=2 */
}

static void test_marks(void **state)
{
    (void)state;
    SweepRow rows[3];
    memset(rows, 0, sizeof rows);
    for (int r = 0; r < 3; r++) {
        rows[r].ok = true;
        rows[r].ref = r - 1;
    }
    rows[0].mesh.n_devices = 2;
    rows[0].total_bytes = 1000;
    rows[0].count[COLL_ALL_REDUCE] = 1;
    rows[1].mesh.n_devices = 4;
    rows[1].total_bytes = 2000; /* 2000/1000 = 2 = 4/2: not faster */
    rows[1].count[COLL_ALL_REDUCE] = 1;
    rows[1].count[COLL_ALL_GATHER] = 1;
    rows[2].mesh.n_devices = 8;
    rows[2].total_bytes = 4001; /* 4001/2000 > 8/4: faster */
    rows[2].count[COLL_ALL_GATHER] = 2;
    sweep_compare(rows, 1);
    sweep_compare(rows, 2);
    assert_false(rows[1].bytes_faster);
    assert_int_equal(rows[1].appeared, 1u << COLL_ALL_GATHER);
    assert_int_equal(rows[1].disappeared, 0);
    assert_true(rows[2].bytes_faster);
    assert_int_equal(rows[2].appeared, 0);
    assert_int_equal(rows[2].disappeared, 1u << COLL_ALL_REDUCE);
    /* a failed reference: no marks */
    rows[1].ok = false;
    rows[2].bytes_faster = false;
    rows[2].disappeared = 0;
    sweep_compare(rows, 2);
    assert_false(rows[2].bytes_faster);
    assert_int_equal(rows[2].disappeared, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spec),
        cmocka_unit_test(test_reference_rows),
        cmocka_unit_test(test_marks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
