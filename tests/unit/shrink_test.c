/* shrink_test.c - the small twin (src/shrink.c): size classes through
 * factors, reshapes as products, control flow, ops that name sizes; every
 * new size worked out beside its assertion (2·D + N mod D).
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
#include "spmdc/parse.h"
#include "spmdc/shrink.h"
#include "spmdc/verify.h"

static HloModule *parse_ok(const char *text)
{
    DiagEngine *d = diag_create(NULL);
    uint32_t fid = diag_add_file(d, "t.hlo", text, strlen(text));
    HloModule *m = parse_hlo(text, strlen(text), fid, d);
    if (!m || !verify_module(m, d))
        fail_msg("parse failed: %s", diag_text(d));
    diag_destroy(d);
    return m;
}

static const Shape *shape_of(const HloModule *m, const char *comp, const char *name)
{
    int32_t c = comp ? hlo_find_computation(m, comp) : m->entry;
    int32_t i = hlo_find_inst(m, c, name);
    if (i < 0)
        fail_msg("no %s", name);
    return m->comps[c].insts[i].shape;
}

static void still_valid(const HloModule *m)
{
    DiagEngine *d = diag_create(NULL);
    if (!verify_module(m, d))
        fail_msg("the twin is invalid: %s", diag_text(d));
    diag_destroy(d);
}

/* No mesh: D = 1, every class of N > 2 shrinks to 2; a reshape's merged dim
 * is the product of its pieces. */
static void test_reshape_product(void **state)
{
    (void)state;
    HloModule *m = parse_ok("HloModule r\n"
                            "ENTRY e {\n"
                            "  p = f32[64,32] parameter(0)\n"
                            "  q = f32[2048] reshape(p)\n"
                            "  n = f32[2048] negate(q)\n"
                            "  ROOT t = f32[64,32] reshape(n)\n"
                            "}\n");
    ShrinkResult r;
    shrink_module(m, &r);
    still_valid(m);
    /* 64 -> 2*1 + 0 = 2, 32 -> 2, 2048 = 64*32 -> 2*2 = 4 */
    assert_int_equal(shape_of(m, NULL, "p")->dims[0], 2);
    assert_int_equal(shape_of(m, NULL, "p")->dims[1], 2);
    assert_int_equal(shape_of(m, NULL, "q")->dims[0], 4);
    assert_int_equal(shape_of(m, NULL, "n")->dims[0], 4);
    assert_int_equal(shape_of(m, NULL, "t")->dims[1], 2);
    assert_int_equal(r.devices, 1);
    /* classes, largest first: 2048 -> 4 (q, n), 64 -> 2 (p, t), 32 -> 2 (p, t) */
    assert_int_equal(r.n_shrunk, 3);
    assert_int_equal(r.classes[0].from, 2048);
    assert_int_equal(r.classes[0].to, 4);
    assert_int_equal(r.classes[0].n_dims, 2);
    assert_int_equal(r.n_kept, 0);
    /* elements 3 * 2048 + 2048 = 8192 -> 4 * 4 = 16 */
    assert_true(r.elems_before == 8192.0 && r.elems_after == 16.0);
    shrink_result_free(&r);
    hlo_module_free(m);
}

/* A slice names its sizes: its dims, and everything tied to them, stay. */
static void test_slice_keeps(void **state)
{
    (void)state;
    HloModule *m = parse_ok("HloModule s\n"
                            "ENTRY e {\n"
                            "  p = f32[64,32] parameter(0)\n"
                            "  w = f32[32,48] parameter(1)\n"
                            "  s = f32[16,32] slice(p), slice={[0:16], [0:32]}\n"
                            "  ROOT d = f32[16,48] dot(s, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
                            "}\n");
    ShrinkResult r;
    shrink_module(m, &r);
    still_valid(m);
    /* p's dims are the slice's: 64 and 32 kept, and so 32 of w (contracted with s) and 16 of d */
    assert_int_equal(shape_of(m, NULL, "p")->dims[0], 64);
    assert_int_equal(shape_of(m, NULL, "w")->dims[0], 32);
    assert_int_equal(shape_of(m, NULL, "d")->dims[0], 16);
    /* w's 48 and d's 48: free, 48 -> 2 */
    assert_int_equal(shape_of(m, NULL, "w")->dims[1], 2);
    assert_int_equal(shape_of(m, NULL, "d")->dims[1], 2);
    assert_int_equal(r.n_shrunk, 1);
    assert_int_equal(r.n_kept, 3); /* 64, 32, 16 */
    assert_string_equal(r.classes[r.n_shrunk].kept_by, "s");
    shrink_result_free(&r);
    hlo_module_free(m);
}

/* The loop state, body and condition parameters, body root and while result
 * are one: all shrink alike. */
static void test_while_ties(void **state)
{
    (void)state;
    HloModule *m = parse_ok("HloModule loop\n"
                            "cond {\n"
                            "  s = (s32[], f32[40]) parameter(0)\n"
                            "  i = s32[] get-tuple-element(s), index=0\n"
                            "  n = s32[] constant(3)\n"
                            "  ROOT lt = pred[] compare(i, n), direction=LT\n"
                            "}\n"
                            "body {\n"
                            "  s = (s32[], f32[40]) parameter(0)\n"
                            "  i = s32[] get-tuple-element(s), index=0\n"
                            "  x = f32[40] get-tuple-element(s), index=1\n"
                            "  one = s32[] constant(1)\n"
                            "  j = s32[] add(i, one)\n"
                            "  y = f32[40] multiply(x, x)\n"
                            "  ROOT t = (s32[], f32[40]) tuple(j, y)\n"
                            "}\n"
                            "ENTRY e {\n"
                            "  p = f32[40] parameter(0)\n"
                            "  zero = s32[] constant(0)\n"
                            "  init = (s32[], f32[40]) tuple(zero, p)\n"
                            "  w = (s32[], f32[40]) while(init), condition=cond, body=body\n"
                            "  ROOT r = f32[40] get-tuple-element(w), index=1\n"
                            "}\n");
    ShrinkResult r;
    shrink_module(m, &r);
    still_valid(m);
    /* one class of 40 -> 2 through every leaf */
    assert_int_equal(shape_of(m, NULL, "p")->dims[0], 2);
    assert_int_equal(shape_of(m, NULL, "w")->elems[1].dims[0], 2);
    assert_int_equal(shape_of(m, "body", "y")->dims[0], 2);
    assert_int_equal(shape_of(m, "cond", "s")->elems[1].dims[0], 2);
    assert_int_equal(r.n_shrunk, 1);
    assert_int_equal(r.classes[0].n_dims, 9); /* p, init, w, r; body s, x, y, t; cond s: one each */
    shrink_result_free(&r);
    hlo_module_free(m);
}

/* On a mesh of 8: N' = 16 + N mod 8, so 8192 -> 16 and 8193 -> 17 (padded alike). */
static void test_mesh_residue(void **state)
{
    (void)state;
    const char *text = "HloModule u\n"
                       "ENTRY e {\n"
                       "  a = f32[8192] parameter(0), sharding={devices=[8]<=[8]}\n"
                       "  b = f32[8193] parameter(1), sharding={devices=[8]<=[8]}\n"
                       "  c = f32[12] parameter(2), sharding={devices=[4,2]<=[8] last_tile_dim_replicate}\n"
                       "  na = f32[8192] negate(a)\n"
                       "  nb = f32[8193] negate(b)\n"
                       "  ROOT t = (f32[8192], f32[8193], f32[12]) tuple(na, nb, c)\n"
                       "}\n";
    DiagEngine *d = diag_create(NULL);
    SpmdcOptions opt;
    memset(&opt, 0, sizeof opt);
    Arena *scratch = arena_create();
    PassCtx cx = {scratch, d, &opt};
    uint32_t fid = diag_add_file(d, "u.hlo", text, strlen(text));
    HloModule *m = driver_load_module(text, strlen(text), fid, &cx, false);
    if (!m)
        fail_msg("%s", diag_text(d));
    ShrinkResult r;
    shrink_module(m, &r);
    still_valid(m);
    assert_int_equal(r.devices, 8);
    assert_int_equal(shape_of(m, NULL, "a")->dims[0], 16);  /* 2*8 + 0 */
    assert_int_equal(shape_of(m, NULL, "nb")->dims[0], 17); /* 2*8 + 1: 17 mod 8 = 8193 mod 8 = 1 */
    assert_int_equal(shape_of(m, NULL, "c")->dims[0], 12);  /* 2*8 + 4 = 20 > 12: kept as it is */
    shrink_result_free(&r);
    hlo_module_free(m);
    arena_destroy(scratch);
    diag_destroy(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reshape_product),
        cmocka_unit_test(test_slice_keeps),
        cmocka_unit_test(test_while_ties),
        cmocka_unit_test(test_mesh_residue),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
