/* budget_test.c - budgets (src/budget.c): sizes with units and shares
 * parsed exactly, the budget file's syntax and its errors, and the verdict
 * of a report against a budget (figures worked out beside each assertion).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "spmdc/budget.h"

static int64_t size_of(const char *s)
{
    int64_t v = -1;
    char err[300];
    if (!budget_parse_size(s, &v, err, sizeof err))
        fail_msg("'%s': %s", s, err);
    return v;
}

static void size_fails(const char *s, const char *want)
{
    int64_t v;
    char err[300] = "";
    assert_false(budget_parse_size(s, &v, err, sizeof err));
    assert_non_null(strstr(err, want));
}

static void test_sizes(void **state)
{
    (void)state;
    assert_int_equal(size_of("0"), 0);
    assert_int_equal(size_of("4096"), 4096);
    assert_int_equal(size_of("234,881,024"), 234881024);        /* digit groups, as the report prints */
    assert_int_equal(size_of("1_000"), 1000);
    assert_int_equal(size_of("512MiB"), 536870912);             /* 512 * 2^20 */
    assert_int_equal(size_of("512 MiB"), 536870912);
    assert_int_equal(size_of("224MiB"), 234881024);             /* 224 * 1,048,576 */
    assert_int_equal(size_of("1.5GB"), 1500000000);             /* 1.5 * 10^9 */
    assert_int_equal(size_of("1.5GiB"), 1610612736);            /* 1.5 * 2^30 = 1,610,612,736 */
    assert_int_equal(size_of("1.5KiB"), 1536);
    assert_int_equal(size_of("2K"), 2048);                      /* K, M, G: powers of 1024 */
    assert_int_equal(size_of("3kB"), 3000);                     /* kB, MB, GB: powers of 1000 */
    assert_int_equal(size_of("3KB"), 3000);
    assert_int_equal(size_of("10 mb"), 10000000);               /* units ignore case */
    assert_int_equal(size_of("1TiB"), INT64_C(1099511627776));  /* 2^40 */
    /* exact however many digits: 10^29 * 2^50 (past 128 bits) is never formed */
    assert_int_equal(size_of("1.00000000000000000000000000000P"), INT64_C(1125899906842624)); /* 2^50 */
    assert_int_equal(size_of("0.001kB"), 1);
    assert_int_equal(size_of("9223372036854775807.000B"), INT64_C(9223372036854775807));
}

static void test_size_errors(void **state)
{
    (void)state;
    size_fails("", "is not a size");
    size_fails("MiB", "is not a size");
    size_fails("-1", "is not a size");
    size_fails("12XB", "unknown unit 'XB'");
    size_fails("0.5", "not a whole number of bytes");          /* half a byte */
    size_fails("1.1KiB", "not a whole number of bytes");       /* 1126.4 bytes */
    size_fails("8192PiB", "too large");                         /* 2^63 > INT64_MAX */
    size_fails("1,000,000,000,000,000,000,000,000,000P", "too large"); /* 10^27 * 2^50 */
    size_fails("0.00000000000000000000000000001P", "not a whole number of bytes");
    size_fails("1,,000", "unknown unit");                      /* a group separator between digits only */
}

static void test_shares(void **state)
{
    (void)state;
    int64_t n, d;
    char err[300];
    assert_true(budget_parse_share("5%", &n, &d, err, sizeof err));
    assert_int_equal(n, 5);                                     /* 5/100 */
    assert_int_equal(d, 100);
    assert_true(budget_parse_share("0.05", &n, &d, err, sizeof err));
    assert_int_equal(n, 5);                                     /* 5/100 */
    assert_int_equal(d, 100);
    assert_true(budget_parse_share("12.5%", &n, &d, err, sizeof err));
    assert_int_equal(n, 125);                                   /* 125/1000 */
    assert_int_equal(d, 1000);
    assert_true(budget_parse_share("1", &n, &d, err, sizeof err));
    assert_int_equal(n, 1);
    assert_int_equal(d, 1);
    assert_false(budget_parse_share("150%", &n, &d, err, sizeof err));
    assert_non_null(strstr(err, "more than the whole"));
    assert_false(budget_parse_share("5 percent", &n, &d, err, sizeof err));
}

static void test_set_and_override(void **state)
{
    (void)state;
    Budget b;
    memset(&b, 0, sizeof b);
    char err[400];
    assert_true(budget_set(&b, "bytes_per_device", "256MiB", "f:1", err, sizeof err));
    assert_int_equal(b.slot[BUDGET_BYTES].limit, 268435456);   /* 256 * 2^20 */
    assert_string_equal(b.slot[BUDGET_BYTES].source, "f:1");
    assert_true(budget_set(&b, "bytes_per_device", "100", "--max-bytes", err, sizeof err));
    assert_int_equal(b.slot[BUDGET_BYTES].limit, 100);         /* a later setting replaces */
    assert_string_equal(b.slot[BUDGET_BYTES].source, "--max-bytes");
    assert_true(budget_set(&b, "forbid", "all-to-all collective-permute", "f:2", err, sizeof err));
    assert_true(b.slot[BUDGET_KIND_COUNT + COLL_ALL_TO_ALL].set);
    assert_int_equal(b.slot[BUDGET_KIND_COUNT + COLL_ALL_TO_ALL].limit, 0);
    assert_true(b.slot[BUDGET_KIND_COUNT + COLL_COLLECTIVE_PERMUTE].set);
    assert_false(b.slot[BUDGET_KIND_COUNT + COLL_ALL_GATHER].set);
    assert_true(budget_set(&b, "full_rematerialization", "forbid", "f:3", err, sizeof err));
    assert_true(b.slot[BUDGET_REMAT].set);
    assert_true(budget_set(&b, "full_rematerialization", "allow", "f:4", err, sizeof err));
    assert_false(b.slot[BUDGET_REMAT].set);
    assert_true(budget_set(&b, "mesh", "data=2,model=4", "f:5", err, sizeof err));
    assert_true(b.has_mesh);
    assert_int_equal(b.mesh.n_devices, 8);
    assert_false(budget_set(&b, "bytes", "1", "f:6", err, sizeof err));
    assert_non_null(strstr(err, "unknown budget 'bytes'"));
    assert_string_equal(budget_key(BUDGET_KIND_BYTES + COLL_REDUCE_SCATTER), "reduce-scatter.bytes_per_device");
    assert_string_equal(budget_key(BUDGET_PEAK), "peak_bytes_per_device");
}

static void test_file_and_errors(void **state)
{
    (void)state;
    const char *text = "# comment\r\n"
                       "  collectives = 2   # trailing comment\r\n"
                       "\n"
                       "all-gather.bytes_per_device = 1KiB\n"
                       "oops\n"
                       "padding_share = 2%\n";
    DiagEngine *d = diag_create(NULL);
    diag_set_show_source(d, false);
    uint32_t fid = diag_add_file(d, "b.budget", text, strlen(text));
    Budget b;
    memset(&b, 0, sizeof b);
    assert_false(budget_read(&b, text, strlen(text), fid, "b.budget", d));
    assert_string_equal(diag_text(d), "b.budget:5:1: error: expected 'key = value' (e.g. bytes_per_device = 256MiB)\n");
    /* the good lines still count, each with its line */
    assert_int_equal(b.slot[BUDGET_COLLECTIVES].limit, 2);
    assert_string_equal(b.slot[BUDGET_COLLECTIVES].source, "b.budget:2");
    assert_int_equal(b.slot[BUDGET_KIND_BYTES + COLL_ALL_GATHER].limit, 1024);
    assert_int_equal(b.slot[BUDGET_PADDING].limit, 2);        /* 2/100 */
    assert_int_equal(b.slot[BUDGET_PADDING].den, 100);
    diag_destroy(d);
}

/* A report of two collectives and a warning, judged. */
static void test_judge(void **state)
{
    (void)state;
    CommReport r;
    report_init(&r, "m", NULL);
    CommRecord *c = report_add(&r, COLL_ALL_GATHER, "a.1", "h", 7, "why");
    c->bytes_per_device = 1000;
    c = report_add(&r, COLL_ALL_REDUCE, "y", "y", 9, "why");
    c->bytes_per_device = 5000;
    report_warn(&r, "full-rematerialization", "z", 11, "z: gathered");
    r.has_memory_estimate = true;
    r.peak_bytes_per_device = 9000;
    r.padding_bytes_per_device = 30;
    r.value_bytes_per_device = 1000;
    Budget b;
    memset(&b, 0, sizeof b);
    char err[400];
    assert_true(budget_set(&b, "bytes_per_device", "6000", "o", err, sizeof err));  /* 1000 + 5000: met */
    assert_true(budget_set(&b, "all-gather.count", "0", "o", err, sizeof err));     /* 1 > 0: over */
    assert_true(budget_set(&b, "full_rematerialization", "forbid", "o", err, sizeof err)); /* 1 > 0: over */
    assert_true(budget_set(&b, "padding_share", "3%", "o", err, sizeof err));       /* 30/1000 = 3%: met */
    assert_true(budget_set(&b, "peak_bytes_per_device", "8999", "o", err, sizeof err)); /* 9000: over */
    Verdict v;
    budget_judge(&b, &r, &v);
    assert_int_equal(v.n_set, 5);
    assert_int_equal(v.n_over, 3);
    assert_int_equal(v.item[BUDGET_BYTES].measured, 6000);
    assert_false(v.item[BUDGET_BYTES].over);
    assert_true(v.item[BUDGET_KIND_COUNT + COLL_ALL_GATHER].over);
    assert_string_equal(v.item[BUDGET_KIND_COUNT + COLL_ALL_GATHER].detail,
                        "the first is all-gather a.1 sending 1,000 B, for h (line 7)");
    assert_true(v.item[BUDGET_REMAT].over);
    assert_string_equal(v.item[BUDGET_REMAT].detail, "the first is at z (line 11): z: gathered");
    assert_false(v.item[BUDGET_PADDING].over);                   /* 30 * 100 <= 3 * 1000 */
    assert_true(v.item[BUDGET_PEAK].over);
    StrBuf t = {0};
    budget_print_text(&t, &b, &v);
    assert_non_null(strstr(sb_cstr(&t), "check: OVER BUDGET (3 of 5 budgets exceeded)\n"));
    assert_null(strstr(sb_cstr(&t), "  padding_share: "));     /* met: not among the exceeded */
    assert_non_null(strstr(sb_cstr(&t), "  all-gather.count: 1 > 0; the first is all-gather a.1"));
    sb_free(&t);
    report_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_size_errors),
        cmocka_unit_test(test_shares),
        cmocka_unit_test(test_set_and_override),
        cmocka_unit_test(test_file_and_errors),
        cmocka_unit_test(test_judge),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
