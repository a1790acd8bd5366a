/* pipeline_test.c - the pass table (src/pipeline.c): every pass in order
 * under its --dump-after name, what each leaves in the state, a failing
 * pass stops the run, and (in builds with SPMDC_VERIFY_EACH_PASS, i.e.
 * Debug) a module a pass leaves invalid is an internal error naming it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "spmdc/hlo.h"
#include "spmdc/pipeline.h"
#include "spmdc/strbuf.h"

/* x is split in 2 on dim 0 over mesh[x=2]; y = negate(x) gets the same
 * sharding by propagation and becomes a local f32[4,4] negate. */
static const char TEXT[] = "HloModule p, num_partitions=2\n"
                           "ENTRY %main {\n"
                           "  %x = f32[8,4] parameter(0), sharding={devices=[2,1]<=[2]}\n"
                           "  ROOT %y = f32[8,4] negate(%x)\n"
                           "}\n";

typedef struct Run {
    DiagEngine *diag;
    Arena *scratch;
    SpmdcOptions opt;
    PassCtx cx;
    PipelineState st;
} Run;

static void start(Run *r, const char *text)
{
    memset(r, 0, sizeof *r);
    r->diag = diag_create(NULL);
    r->scratch = arena_create();
    r->cx.scratch = r->scratch;
    r->cx.diag = r->diag;
    r->cx.opt = &r->opt;
    r->st.text = text;
    r->st.len = strlen(text);
    r->st.file_id = diag_add_file(r->diag, "t.hlo", text, strlen(text));
}

static void finish(Run *r)
{
    pipeline_state_free(&r->st);
    arena_destroy(r->scratch);
    diag_destroy(r->diag);
}

static void test_table_order_and_names(void **state)
{
    (void)state;
    static const char *const names[PASS_COUNT] = {"parse", "verify", "bind", "canonicalize", "propagate", "partition"};
    for (int k = 0; k < PASS_COUNT; k++) {
        const PassInfo *p = pipeline_pass((PassId)k);
        assert_int_equal(p->id, k);
        assert_string_equal(p->name, names[k]);
        assert_ptr_equal(pipeline_find(names[k]), p);
        assert_non_null(p->run);
        assert_int_equal(p->on_output, k == PASS_PARTITION);
    }
    assert_null(pipeline_find("lower"));
    assert_null(pipeline_find(""));
    assert_string_equal(pipeline_pass_names(), "parse, verify, bind, canonicalize, propagate, partition");
}

static void test_each_pass_leaves_its_state(void **state)
{
    (void)state;
    Run r;
    start(&r, TEXT);
    assert_true(pipeline_run(&r.st, &r.cx, PASS_PARSE, PASS_VERIFY));
    const HloInst *x = hlo_inst(r.st.m, r.st.m->entry, 0), *y = hlo_inst(r.st.m, r.st.m->entry, 1);
    assert_non_null(x->sharding_src); /* written, not yet bound */
    assert_null(x->sharding);
    assert_false(r.st.m->has_mesh);
    assert_true(pipeline_run(&r.st, &r.cx, PASS_BIND, PASS_CANONICALIZE));
    assert_true(r.st.m->has_mesh);
    assert_int_equal(r.st.m->mesh.n_devices, 2);
    assert_non_null(x->sharding);
    assert_null(y->sharding); /* not annotated: propagation's job */
    assert_true(pipeline_run(&r.st, &r.cx, PASS_PROPAGATE, PASS_PROPAGATE));
    assert_non_null(y->sharding);
    assert_null(r.st.out);
    assert_ptr_equal(pipeline_module(&r.st, PASS_PROPAGATE), r.st.m);
    assert_true(pipeline_run(&r.st, &r.cx, PASS_PARTITION, PASS_PARTITION));
    assert_non_null(r.st.out);
    assert_true(r.st.has_report);
    assert_ptr_equal(pipeline_module(&r.st, PASS_PARTITION), r.st.out);
    const HloComputation *e = hlo_comp(r.st.out, r.st.out->entry);
    const HloInst *root = &e->insts[e->root];
    assert_int_equal(root->op, HLO_NEGATE);
    assert_int_equal(root->shape->dims[0], 4); /* 8 rows over 2 devices */
    assert_int_equal(root->shape->dims[1], 4);
    assert_int_equal(r.st.report.n_records, 0);
    assert_string_equal(diag_text(r.diag), "");
    finish(&r);
}

static void test_failing_pass_stops(void **state)
{
    (void)state;
    Run r;
    /* the declared f32[4] disagrees with negate's operand: verify fails, nothing later runs */
    start(&r, "HloModule p\nENTRY %main {\n  %x = f32[8] parameter(0)\n  ROOT %y = f32[4] negate(%x)\n}\n");
    assert_false(pipeline_run(&r.st, &r.cx, PASS_PARSE, PASS_PARTITION));
    assert_non_null(r.st.m);
    assert_false(r.st.m->has_mesh); /* bind did not run */
    assert_null(r.st.out);
    assert_int_equal(diag_error_count(r.diag), 1);
    finish(&r);
}

static void test_invalid_module_after_a_pass(void **state)
{
    (void)state;
    Run r;
    start(&r, TEXT);
    assert_true(pipeline_run(&r.st, &r.cx, PASS_PARSE, PASS_VERIFY));
    /* as if a pass had broken the module: negate's declared shape no longer fits its operand */
    HloInst *neg = hlo_inst(r.st.m, r.st.m->entry, 1);
    Shape bad = *neg->shape;
    bad.dims[0] = 5;
    neg->shape = hlo_shape(r.st.m, &bad);
    bool ok = pipeline_run(&r.st, &r.cx, PASS_BIND, PASS_BIND);
#if defined(SPMDC_VERIFY_EACH_PASS)
    assert_false(ok);
    assert_non_null(strstr(diag_text(r.diag), "internal error: the module fails the IR verifier after pass bind"));
#else
    assert_true(ok); /* release builds trust their passes */
#endif
    finish(&r);
}

/* A chain of N nested calls: f0 negates, f1..f(N-1) each call the one
 * before, the entry calls f(N-1) on x split in 2.  Inlined top-down, the
 * entry holds x, the negate, one copy per call inside the chain (named as
 * the calls are reached, outermost first: f(N-1)'s r.1 .. f1's r.(N-1),
 * emitted innermost first) and its own call's copy r: N+2
 * instructions, every other computation dropped; the whole chain is one
 * local f32[4,4] negate and N copies on each device, no collective.
 * (Inlining callees first rewrites f_i to i instructions: N^2/2 in all,
 * past the expansion limit of 4 x 10,003 + 2^22 at N = 5,000.) */
static void test_long_call_chain(void **state)
{
    (void)state;
    enum { N = 5000 };
    StrBuf b = {0};
    sb_puts(&b, "HloModule chain, num_partitions=2\n"
                    "%f0 (p: f32[8,4]) -> f32[8,4] {\n  %p = f32[8,4] parameter(0)\n  ROOT %n = f32[8,4] negate(%p)\n}\n");
    for (int i = 1; i < N; i++)
        sb_printf(&b, "%%f%d (p: f32[8,4]) -> f32[8,4] {\n  %%p = f32[8,4] parameter(0)\n"
                          "  ROOT %%r = f32[8,4] call(%%p), to_apply=%%f%d\n}\n", i, i - 1);
    sb_printf(&b, "ENTRY %%main {\n  %%x = f32[8,4] parameter(0), sharding={devices=[2,1]<=[2]}\n"
                      "  ROOT %%r = f32[8,4] call(%%x), to_apply=%%f%d\n}\n", N - 1);
    Run r;
    start(&r, sb_cstr(&b));
    assert_true(pipeline_run(&r.st, &r.cx, PASS_PARSE, PASS_CANONICALIZE));
    assert_int_equal(r.st.m->n_comps, 1);
    const HloComputation *c = hlo_comp(r.st.m, r.st.m->entry);
    assert_int_equal(c->n_insts, N + 2);
    assert_int_equal(c->insts[1].op, HLO_NEGATE);
    assert_string_equal(c->insts[1].name, "n");
    assert_int_equal(c->insts[2].op, HLO_COPY);
    assert_string_equal(c->insts[2].name, "r.4999");
    assert_int_equal(c->insts[2].operands[0], 1);
    assert_string_equal(c->insts[N].name, "r.1");
    assert_string_equal(c->insts[c->root].name, "r");
    assert_int_equal(c->insts[c->root].operands[0], N);
    assert_true(pipeline_run(&r.st, &r.cx, PASS_PROPAGATE, PASS_PARTITION));
    const HloComputation *e = hlo_comp(r.st.out, r.st.out->entry);
    assert_int_equal(e->n_insts, N + 2);
    assert_int_equal(e->insts[e->root].shape->dims[0], 4);
    assert_int_equal(r.st.report.n_records, 0);
    assert_string_equal(diag_text(r.diag), "");
    finish(&r);
    sb_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_order_and_names),
        cmocka_unit_test(test_each_pass_leaves_its_state),
        cmocka_unit_test(test_failing_pass_stops),
        cmocka_unit_test(test_invalid_module_after_a_pass),
        cmocka_unit_test(test_long_call_chain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
