/* control_test.c - loops, conditionals, calls and manual regions in the
 * partitioner (src/partition_control.c, src/partition_manual.c) and the
 * trip counts of loops (hlo_while_trip_count): the report's multiplier and
 * per_trip for known, unknown and nested loops (bytes worked out by hand
 * beside each assertion), and the errors that name what cannot be
 * partitioned.  Numerical checks of the same features are the golden
 * `spmdc verify` cases in tests/cases/control.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "spmdc/driver.h"
#include "spmdc/hlo.h"
#include "spmdc/parse.h"
#include "spmdc/partition.h"
#include "spmdc/report.h"

typedef struct Compiled {
    DiagEngine *diag;
    HloModule *in, *out;
    CommReport rep;
    bool ok;
} Compiled;

/* Parses, binds, propagates and partitions text. */
static Compiled compile(const char *text)
{
    Compiled c;
    memset(&c, 0, sizeof c);
    c.diag = diag_create(NULL);
    diag_set_show_source(c.diag, false);
    SpmdcOptions opt;
    memset(&opt, 0, sizeof opt);
    Arena *scratch = arena_create();
    PassCtx cx = {scratch, c.diag, &opt};
    uint32_t fid = diag_add_file(c.diag, "t.hlo", text, strlen(text));
    c.in = driver_load_module(text, strlen(text), fid, &cx, true);
    if (c.in) {
        report_init(&c.rep, c.in->name, &c.in->mesh);
        c.ok = partition_module(c.in, &c.out, &c.rep, &cx);
    }
    arena_destroy(scratch);
    return c;
}

static void compiled_free(Compiled *c)
{
    hlo_module_free(c->in);
    hlo_module_free(c->out);
    report_free(&c->rep);
    diag_destroy(c->diag);
}

/* Trip count of the first while of the entry of text (parsed only). */
static int64_t trips_of(const char *text)
{
    DiagEngine *d = diag_create(NULL);
    uint32_t fid = diag_add_file(d, "t.hlo", text, strlen(text));
    HloModule *m = parse_hlo(text, strlen(text), fid, d);
    assert_non_null(m);
    int64_t r = -2;
    const HloComputation *e = &m->comps[m->entry];
    for (int32_t i = 0; i < e->n_insts; i++)
        if (e->insts[i].op == HLO_WHILE)
            r = hlo_while_trip_count(m, m->entry, i);
    hlo_module_free(m);
    diag_destroy(d);
    return r;
}

/* A counted loop over (s32[], f32[8,16]): condition `i CMP n` (n, cmp and
 * the operand order given), body i + step and x @ w with w split on the
 * contraction (a partial sum each trip), start from the entry. */
static char *loop_text(const char *cond_root, int step, int start, const char *while_attrs)
{
    static const char fmt[] =
        "HloModule loop\n"
        "\n"
        "%%add (a: f32[], b: f32[]) -> f32[] {\n"
        "  %%a = f32[] parameter(0)\n"
        "  %%b = f32[] parameter(1)\n"
        "  ROOT %%s = f32[] add(%%a, %%b)\n"
        "}\n"
        "\n"
        "%%cond (c: (s32[], f32[8,16])) -> pred[] {\n"
        "  %%c = (s32[], f32[8,16]) parameter(0)\n"
        "  %%i = s32[] get-tuple-element(%%c), index=0\n"
        "  %%n = s32[] constant(4)\n"
        "  ROOT %%lt = pred[] %s\n"
        "}\n"
        "\n"
        "%%body (b: (s32[], f32[8,16])) -> (s32[], f32[8,16]) {\n"
        "  %%b = (s32[], f32[8,16]) parameter(0), sharding={{mesh[m=2], []}, {mesh[m=2], [{}, {m}]}}\n"
        "  %%i = s32[] get-tuple-element(%%b), index=0\n"
        "  %%x = f32[8,16] get-tuple-element(%%b), index=1\n"
        "  %%w = f32[16,16] constant({...}), sharding={mesh[m=2], [{m}, {}]}\n"
        "  %%y = f32[8,16] dot(%%x, %%w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, "
        "sharding={mesh[m=2], [{}, {m}]}\n"
        "  %%step = s32[] constant(%d)\n"
        "  %%j = s32[] add(%%i, %%step)\n"
        "  ROOT %%r = (s32[], f32[8,16]) tuple(%%j, %%y), sharding={{mesh[m=2], []}, {mesh[m=2], [{}, {m}]}}\n"
        "}\n"
        "\n"
        "ENTRY %%main (x: f32[8,16]) -> f32[8,16] {\n"
        "  %%x = f32[8,16] parameter(0), sharding={mesh[m=2], [{}, {m}]}\n"
        "  %%z = s32[] constant(%d)\n"
        "  %%init = (s32[], f32[8,16]) tuple(%%z, %%x)\n"
        "  %%loop = (s32[], f32[8,16]) while(%%init), condition=%%cond, body=%%body%s, "
        "sharding={{mesh[m=2], []}, {mesh[m=2], [{}, {m}]}}\n"
        "  ROOT %%out = f32[8,16] get-tuple-element(%%loop), index=1, sharding={mesh[m=2], [{}, {m}]}\n"
        "}\n";
    size_t n = sizeof fmt + strlen(cond_root) + strlen(while_attrs) + 64;
    char *t = malloc(n);
    snprintf(t, n, fmt, cond_root, step, start, while_attrs);
    return t;
}

/* ================================================================ trip counts */

static void test_trip_count_scan_pattern(void **state)
{
    (void)state;
    char *t = loop_text("compare(%i, %n), direction=LT", 1, 0, "");
    assert_int_equal(trips_of(t), 4); /* i = 0, 1, 2, 3 */
    free(t);
    t = loop_text("compare(%n, %i), direction=GT", 1, 1, "");
    assert_int_equal(trips_of(t), 3); /* n > i from i = 1: 1, 2, 3 */
    free(t);
    t = loop_text("compare(%i, %n), direction=LT", 1, 9, "");
    assert_int_equal(trips_of(t), 0); /* starts past the limit */
    free(t);
}

static void test_trip_count_unknown(void **state)
{
    (void)state;
    char *t = loop_text("compare(%i, %n), direction=LT", 2, 0, "");
    assert_int_equal(trips_of(t), -1); /* steps of 2: not the pattern */
    free(t);
    t = loop_text("compare(%i, %n), direction=LE", 1, 0, "");
    assert_int_equal(trips_of(t), -1);
    free(t);
}

static void test_trip_count_backend_config(void **state)
{
    (void)state;
    char *t = loop_text("compare(%i, %n), direction=LE", 1, 0, ", backend_config={\"known_trip_count\":{\"n\":\"7\"}}");
    assert_int_equal(trips_of(t), 7); /* the config wins over the (unrecognised) pattern */
    free(t);
    t = loop_text("compare(%i, %n), direction=LT", 2, 0,
                  ", backend_config=\"{\\\"known_trip_count\\\":{\\\"n\\\":\\\"5\\\"}}\"");
    assert_int_equal(trips_of(t), 5);
    free(t);
}

/* ================================================================ the report */

static void test_loop_bytes_counted_per_trip(void **state)
{
    (void)state;
    char *t = loop_text("compare(%i, %n), direction=LT", 1, 0, "");
    Compiled c = compile(t);
    assert_true(c.ok);
    /* each trip: y's partial f32[8,16] (x's columns and w's rows split: the
     * whole 8x16 result, 512 B) reduce-scattered over m=2 back to the column
     * split: (2-1)/2*512 = 256 B; 4 trips: 1,024 B */
    assert_int_equal(c.rep.n_records, 1);
    assert_int_equal(c.rep.records[0].kind, COLL_REDUCE_SCATTER);
    assert_int_equal(c.rep.records[0].multiplier, 4);
    assert_false(c.rep.records[0].per_trip);
    assert_int_equal(c.rep.records[0].bytes_per_device, 1024);
    StrBuf b = {0};
    report_print_text(&b, &c.rep);
    assert_non_null(strstr(sb_cstr(&b), "1,024 B (1.0 KiB) in 4 loop trips"));
    sb_free(&b);
    compiled_free(&c);
    free(t);
}

static void test_unknown_trips_marked(void **state)
{
    (void)state;
    char *t = loop_text("compare(%i, %n), direction=LT", 2, 0, "");
    Compiled c = compile(t);
    assert_true(c.ok);
    /* the same 256 B per trip, counted once and marked */
    assert_int_equal(c.rep.n_records, 1);
    assert_int_equal(c.rep.records[0].multiplier, 1);
    assert_true(c.rep.records[0].per_trip);
    assert_int_equal(c.rep.records[0].bytes_per_device, 256);
    StrBuf b = {0};
    report_print_text(&b, &c.rep);
    assert_non_null(strstr(sb_cstr(&b), "256 B per trip of a loop whose trip count is unknown"));
    sb_clear(&b);
    report_print_json(&b, &c.rep);
    assert_non_null(strstr(sb_cstr(&b), "\"multiplier\": 1,\n      \"per_trip\": true,"));
    sb_free(&b);
    compiled_free(&c);
    free(t);
}

static void test_nested_loops_multiply(void **state)
{
    (void)state;
    static const char text[] =
        "HloModule nested\n"
        "\n"
        "%icond (c: (s32[], f32[8,16])) -> pred[] {\n"
        "  %c = (s32[], f32[8,16]) parameter(0)\n"
        "  %i = s32[] get-tuple-element(%c), index=0\n"
        "  %n = s32[] constant(4)\n"
        "  ROOT %lt = pred[] compare(%i, %n), direction=LT\n"
        "}\n"
        "\n"
        "%ibody (b: (s32[], f32[8,16])) -> (s32[], f32[8,16]) {\n"
        "  %b = (s32[], f32[8,16]) parameter(0), sharding={{mesh[m=2], []}, {mesh[m=2], [{}, {m}]}}\n"
        "  %i = s32[] get-tuple-element(%b), index=0\n"
        "  %x = f32[8,16] get-tuple-element(%b), index=1\n"
        "  %w = f32[16,16] constant({...}), sharding={mesh[m=2], [{m}, {}]}\n"
        "  %y = f32[8,16] dot(%x, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, "
        "sharding={mesh[m=2], [{}, {m}]}\n"
        "  %one = s32[] constant(1)\n"
        "  %j = s32[] add(%i, %one)\n"
        "  ROOT %r = (s32[], f32[8,16]) tuple(%j, %y), sharding={{mesh[m=2], []}, {mesh[m=2], [{}, {m}]}}\n"
        "}\n"
        "\n"
        "%ocond (c: (s32[], f32[8,16])) -> pred[] {\n"
        "  %c = (s32[], f32[8,16]) parameter(0)\n"
        "  %i = s32[] get-tuple-element(%c), index=0\n"
        "  %n = s32[] constant(3)\n"
        "  ROOT %lt = pred[] compare(%i, %n), direction=LT\n"
        "}\n"
        "\n"
        "%obody (b: (s32[], f32[8,16])) -> (s32[], f32[8,16]) {\n"
        "  %b = (s32[], f32[8,16]) parameter(0), sharding={{mesh[m=2], []}, {mesh[m=2], [{}, {m}]}}\n"
        "  %i = s32[] get-tuple-element(%b), index=0\n"
        "  %x = f32[8,16] get-tuple-element(%b), index=1\n"
        "  %z = s32[] constant(0)\n"
        "  %init = (s32[], f32[8,16]) tuple(%z, %x)\n"
        "  %inner = (s32[], f32[8,16]) while(%init), condition=%icond, body=%ibody, "
        "sharding={{mesh[m=2], []}, {mesh[m=2], [{}, {m}]}}\n"
        "  %y = f32[8,16] get-tuple-element(%inner), index=1, sharding={mesh[m=2], [{}, {m}]}\n"
        "  %one = s32[] constant(1)\n"
        "  %j = s32[] add(%i, %one)\n"
        "  ROOT %r = (s32[], f32[8,16]) tuple(%j, %y), sharding={{mesh[m=2], []}, {mesh[m=2], [{}, {m}]}}\n"
        "}\n"
        "\n"
        "ENTRY %main (x: f32[8,16]) -> f32[8,16] {\n"
        "  %x = f32[8,16] parameter(0), sharding={mesh[m=2], [{}, {m}]}\n"
        "  %z = s32[] constant(0)\n"
        "  %init = (s32[], f32[8,16]) tuple(%z, %x)\n"
        "  %outer = (s32[], f32[8,16]) while(%init), condition=%ocond, body=%obody, "
        "sharding={{mesh[m=2], []}, {mesh[m=2], [{}, {m}]}}\n"
        "  ROOT %out = f32[8,16] get-tuple-element(%outer), index=1, sharding={mesh[m=2], [{}, {m}]}\n"
        "}\n";
    Compiled c = compile(text);
    assert_true(c.ok);
    /* 256 B per inner trip, 4 inner trips per outer trip, 3 outer trips: 3,072 B */
    assert_int_equal(c.rep.n_records, 1);
    assert_int_equal(c.rep.records[0].multiplier, 12);
    assert_int_equal(c.rep.records[0].bytes_per_device, 3072);
    /* one body per call site, nested: obody calls ibody */
    assert_true(hlo_find_computation(c.out, "ibody") >= 0);
    assert_true(hlo_find_computation(c.out, "ibody") < hlo_find_computation(c.out, "obody"));
    compiled_free(&c);
}

/* ================================================================ manual regions: errors */

static void test_collective_outside_manual_region(void **state)
{
    (void)state;
    Compiled c = compile("HloModule u, num_partitions=2\n"
                         "\n"
                         "%add (a: f32[], b: f32[]) -> f32[] {\n"
                         "  %a = f32[] parameter(0)\n"
                         "  %b = f32[] parameter(1)\n"
                         "  ROOT %s = f32[] add(%a, %b)\n"
                         "}\n"
                         "\n"
                         "ENTRY %main (x: f32[8]) -> f32[8] {\n"
                         "  %x = f32[8] parameter(0), sharding={replicated}\n"
                         "  ROOT %ar = f32[8] all-reduce(%x), channel_id=1, replica_groups={{0,1}}, "
                         "use_global_device_ids=true, to_apply=%add\n"
                         "}\n");
    assert_false(c.ok);
    assert_non_null(strstr(diag_text(c.diag), "ar: all-reduce outside a manual region"));
    compiled_free(&c);
}

static void test_user_groups_along_automatic_axis(void **state)
{
    (void)state;
    /* manual along y only; the all-reduce's groups {0,2},{1,3} run along x */
    Compiled c = compile("HloModule u, num_partitions=4\n"
                         "\n"
                         "%add (a: f32[], b: f32[]) -> f32[] {\n"
                         "  %a = f32[] parameter(0)\n"
                         "  %b = f32[] parameter(1)\n"
                         "  ROOT %s = f32[] add(%a, %b)\n"
                         "}\n"
                         "\n"
                         "ENTRY %main (x: f32[8,8]) -> f32[8,8] {\n"
                         "  %x = f32[8,8] parameter(0), sharding={mesh[x=2,y=2], [{}, {y}]}\n"
                         "  %in = f32[8,4] custom-call(%x), custom_call_target=\"SPMDFullToShardShape\", "
                         "sharding={mesh[x=2,y=2], [{}, {}], manual={y}}\n"
                         "  %ar = f32[8,4] all-reduce(%in), channel_id=1, replica_groups={{0,2},{1,3}}, "
                         "use_global_device_ids=true, to_apply=%add\n"
                         "  ROOT %out = f32[8,8] custom-call(%ar), custom_call_target=\"SPMDShardToFullShape\", "
                         "sharding={mesh[x=2,y=2], [{}, {y}]}\n"
                         "}\n");
    assert_false(c.ok);
    assert_non_null(strstr(diag_text(c.diag), "ar: its replica groups run along x, which the region leaves "
                                              "automatic (manual: y)"));
    compiled_free(&c);
}

static void test_manual_region_kept(void **state)
{
    (void)state;
    /* manual along y: the region's all-reduce (groups {0,1},{2,3}: along y)
     * is kept; x stays automatic and splits the rows inside the region */
    Compiled c = compile("HloModule u, num_partitions=4\n"
                         "\n"
                         "%add (a: f32[], b: f32[]) -> f32[] {\n"
                         "  %a = f32[] parameter(0)\n"
                         "  %b = f32[] parameter(1)\n"
                         "  ROOT %s = f32[] add(%a, %b)\n"
                         "}\n"
                         "\n"
                         "ENTRY %main (x: f32[8,8]) -> f32[8,4] {\n"
                         "  %x = f32[8,8] parameter(0), sharding={mesh[x=2,y=2], [{x}, {y}]}\n"
                         "  %in = f32[8,4] custom-call(%x), custom_call_target=\"SPMDFullToShardShape\", "
                         "sharding={mesh[x=2,y=2], [{x}, {}], manual={y}}\n"
                         "  %ar = f32[8,4] all-reduce(%in), channel_id=1, replica_groups={{0,1},{2,3}}, "
                         "use_global_device_ids=true, to_apply=%add, sharding={mesh[x=2,y=2], [{x}, {}], "
                         "manual={y}}\n"
                         "  ROOT %out = f32[8,4] custom-call(%ar), custom_call_target=\"SPMDShardToFullShape\", "
                         "sharding={mesh[x=2,y=2], [{x}, {}]}\n"
                         "}\n");
    assert_true(c.ok);
    /* the user's all-reduce of the f32[4,4] piece (64 B) over y (2): 2*(2-1)/2*64 = 64 B */
    assert_int_equal(c.rep.n_records, 1);
    assert_true(c.rep.records[0].from_input);
    assert_int_equal(c.rep.records[0].bytes_per_device, 64);
    assert_int_equal(c.rep.records[0].group_size, 2);
    assert_int_equal(c.rep.records[0].num_groups, 2);
    assert_non_null(strstr(c.rep.records[0].reason, "written in the input inside a manual region"));
    const HloComputation *e = &c.out->comps[c.out->entry];
    int32_t ar = hlo_find_inst(c.out, c.out->entry, "ar");
    assert_true(ar >= 0);
    assert_int_equal(e->insts[ar].shape->dims[0], 4);
    assert_int_equal(e->insts[ar].shape->dims[1], 4);
    compiled_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trip_count_scan_pattern),
        cmocka_unit_test(test_trip_count_unknown),
        cmocka_unit_test(test_trip_count_backend_config),
        cmocka_unit_test(test_loop_bytes_counted_per_trip),
        cmocka_unit_test(test_unknown_trips_marked),
        cmocka_unit_test(test_nested_loops_multiply),
        cmocka_unit_test(test_collective_outside_manual_region),
        cmocka_unit_test(test_user_groups_along_automatic_axis),
        cmocka_unit_test(test_manual_region_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
