/* propagate_test.c - sharding propagation: one test per rule (forward and
 * backward), the lattice (merge, conflicts, user annotations), phase order,
 * fixed points that need several sweeps, determinism, Megatron MLP, a 2-D
 * mesh, and a 1M-instruction chain (timed, figure printed).
 *
 * Shardings are written as specs: "{0,1}{}" = rank 2, dim 0 split over atoms
 * 0 then 1 (major -> minor), dim 1 unsplit; "R" replicated (rank taken from
 * the instruction), "M" manual; a trailing " partial=A" marks atom A partial.
 * Meshes: model=8 (atoms 0,1,2 of size 2) and x=2,y=4 (atoms x0=0, y0=1,
 * y1=2).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "spmdc/hlo.h"
#include "spmdc/oprule.h"
#include "spmdc/parse.h"
#include "spmdc/pipeline.h"
#include "spmdc/propagate.h"
#include "spmdc/verify.h"

/* ================================================================ helpers */

static HloModule *new_module(bool two_d, int32_t *entry)
{
    HloModule *m = hlo_module_new("m");
    char err[128];
    if (two_d) {
        const char *names[] = {"x", "y"};
        int64_t sizes[] = {2, 4};
        assert_true(mesh_init(&m->mesh, 2, names, sizes, err, sizeof err));
    } else {
        const char *names[] = {"model"};
        int64_t sizes[] = {8};
        assert_true(mesh_init(&m->mesh, 1, names, sizes, err, sizeof err));
    }
    m->has_mesh = true;
    *entry = hlo_add_computation(m, "main", true);
    return m;
}

static Shape arr(int rank, ...)
{
    int64_t d[SPMDC_MAX_RANK] = {0};
    va_list ap;
    va_start(ap, rank);
    for (int k = 0; k < rank; k++) d[k] = va_arg(ap, int);
    va_end(ap);
    return shape_array(ET_F32, rank, d);
}

/* Gives instruction i of computation c the element type t (its shape record is shared: a new one). */
static void set_type(HloModule *m, int32_t c, int32_t i, ElemType t)
{
    HloInst *in = hlo_inst(m, c, i);
    Shape s = *in->shape;
    s.type = t;
    in->shape = hlo_shape(m, &s);
}

static int32_t add(HloModule *m, int32_t c, HloOpcode op, const char *name, Shape s, int n, ...)
{
    int32_t ops[16];
    va_list ap;
    va_start(ap, n);
    for (int k = 0; k < n; k++) ops[k] = va_arg(ap, int);
    va_end(ap);
    return hlo_add_inst(m, c, op, name, &s, ops, n);
}

static IntList ints(HloModule *m, int n, ...)
{
    int64_t v[SPMDC_MAX_RANK];
    va_list ap;
    va_start(ap, n);
    for (int k = 0; k < n; k++) v[k] = va_arg(ap, int);
    va_end(ap);
    return hlo_intlist(m, v, n);
}

static Sharding spec(const char *sp)
{
    if (strcmp(sp, "R") == 0) return sharding_replicated();
    if (strcmp(sp, "M") == 0) {
        Sharding s = sharding_replicated();
        s.kind = SHARDING_MANUAL;
        return s;
    }
    int32_t rank = 0;
    for (const char *q = sp; *q; q++) rank += *q == '{';
    Sharding s = sharding_tiled(rank);
    const char *q = sp;
    for (int32_t d = 0; d < rank; d++) {
        q = strchr(q, '{') + 1;
        int8_t atoms[SPMDC_MAX_ATOMS];
        int32_t n = 0;
        while (*q != '}') {
            if (*q >= '0' && *q <= '9') atoms[n++] = (int8_t)strtol(q, (char **)&q, 10);
            else q++;
        }
        sharding_set_dim(&s, d, atoms, n);
    }
    const char *pp = strstr(sp, "partial=");
    if (pp) {
        s.tile.partial = 1u << atoi(pp + 8);
        s.tile.kind = REDUCE_SUM;
    }
    sharding_normalize(&s);
    return s;
}

static void annotate(HloModule *m, int32_t c, int32_t i, const char *sp)
{
    HloInst *in = hlo_inst(m, c, i);
    in->sharding = ARENA_NEW(m->arena, Sharding);
    *in->sharding = spec(sp);
    if (in->sharding->kind == SHARDING_REPLICATED) in->sharding->tile.rank = in->shape->rank;
    in->sharding_from_user = true;
}

static void run(HloModule *m)
{
    PassCtx cx = {arena_create(), diag_create(NULL), NULL};
    assert_true(propagate_shardings(m, &cx));
    assert_int_equal(diag_error_count(cx.diag), 0);
    diag_destroy(cx.diag);
    arena_destroy(cx.scratch);
}

static void check_sharding(const HloModule *m, const Sharding *got, const Shape *sh, const char *sp, const char *what)
{
    Sharding want = spec(sp);
    StrBuf b = {0};
    sharding_describe(&b, got, &m->mesh);
    bool ok = sharding_equal(got, &want) && got->kind == want.kind;
    if (ok && got->kind == SHARDING_REPLICATED && shape_is_array(sh)) ok = got->tile.rank == sh->rank;
    if (!ok) fail_msg("%s: got %s (kind %d rank %d), want %s", what, sb_cstr(&b), got->kind, got->tile.rank, sp);
    sb_free(&b);
}

/* Instruction i of computation c has the sharding spec sp. */
static void check(const HloModule *m, int32_t c, int32_t i, const char *sp)
{
    const HloInst *in = hlo_inst(m, c, i);
    assert_non_null(in->sharding);
    check_sharding(m, in->sharding, in->shape, sp, in->name);
}

/* Leaf *l of a (nested) tuple shape, counting down; NULL if past the end. */
static const Shape *nth_leaf(const Shape *s, int32_t *l)
{
    if (!shape_is_tuple(s)) return (*l)-- == 0 ? s : NULL;
    for (int32_t k = 0; k < s->n_elems; k++) {
        const Shape *r = nth_leaf(&s->elems[k], l);
        if (r) return r;
    }
    return NULL;
}

static void check_leaf(const HloModule *m, int32_t c, int32_t i, int32_t l, const char *sp)
{
    const HloInst *in = hlo_inst(m, c, i);
    assert_non_null(in->sharding);
    assert_int_equal(in->sharding->kind, SHARDING_TUPLE);
    assert_true(l < in->sharding->n_elems);
    int32_t k = l;
    const Shape *leaf = nth_leaf(in->shape, &k);
    assert_non_null(leaf);
    check_sharding(m, &in->sharding->elems[l], leaf, sp, in->name);
}

/* Every instruction of every computation has a sharding. */
static void check_all_set(const HloModule *m)
{
    for (int32_t c = 0; c < m->n_comps; c++)
        for (int32_t i = 0; i < m->comps[c].n_insts; i++) {
            const HloInst *in = hlo_inst(m, c, i);
            assert_non_null(in->sharding);
            if (shape_is_tuple(in->shape)) {
                assert_int_equal(in->sharding->kind, SHARDING_TUPLE);
                assert_int_equal(in->sharding->n_elems, shape_leaf_count(in->shape));
            } else {
                assert_true(in->sharding->kind != SHARDING_TUPLE);
            }
            if (!in->sharding_from_user) assert_int_equal(in->sharding->tile.partial, 0);
        }
}

/* ================================================================ table */

/* Propagation has no rule table of its own: every opcode's rule comes from
 * the op-rule registry (a tier for the schedule too). */
static void test_rule_table_covers_every_opcode(void **state)
{
    (void)state;
    for (int op = 0; op < HLO_OPCODE_COUNT; op++)
        if (!oprule_name((HloOpcode)op)) fail_msg("opcode %s has no rule", hlo_opcode_name((HloOpcode)op));
    assert_int_equal(oprule_tier(HLO_ADD), TIER_PASS_OP);
    assert_int_equal(oprule_tier(HLO_RESHAPE), TIER_PASS_OP);
    assert_int_equal(oprule_tier(HLO_TRANSPOSE), TIER_PASS_OP);
    assert_int_equal(oprule_tier(HLO_DYNAMIC_SLICE), TIER_FORWARD_OP);
    assert_int_equal(oprule_tier(HLO_BROADCAST), TIER_BROADCAST);
    assert_int_equal(oprule_tier(HLO_DOT), TIER_NORMAL);
}

/* ================================================================ basics */

static void test_nothing_annotated_is_replicated(void **state)
{
    (void)state;
    int32_t c;
    HloModule *m = new_module(false, &c);
    int32_t p = add(m, c, HLO_PARAMETER, "p", arr(2, 8, 16), 0);
    int32_t n = add(m, c, HLO_NEGATE, "n", arr(2, 8, 16), 1, p);
    Shape el[2] = {arr(2, 8, 16), arr(0)};
    Shape ts = shape_scalar(ET_TUPLE);
    ts.n_elems = 2;
    ts.elems = el;
    int32_t s = add(m, c, HLO_CONSTANT, "s", arr(0), 0);
    int32_t t = add(m, c, HLO_TUPLE, "t", ts, 2, n, s);
    run(m);
    check_all_set(m);
    check(m, c, p, "R");
    check(m, c, n, "R");
    check(m, c, s, "R");
    check_leaf(m, c, t, 0, "R");
    assert_int_equal(hlo_inst(m, c, t)->sharding->elems[0].tile.rank, 2);
    check_leaf(m, c, t, 1, "R");
    hlo_module_free(m);
}

static void test_no_mesh_gives_replicated(void **state)
{
    (void)state;
    HloModule *m = hlo_module_new("m");
    int32_t c = hlo_add_computation(m, "main", true);
    int32_t p = add(m, c, HLO_PARAMETER, "p", arr(1, 8), 0);
    int32_t n = add(m, c, HLO_NEGATE, "n", arr(1, 8), 1, p);
    run(m);
    check(m, c, p, "R");
    check(m, c, n, "R");
    hlo_module_free(m);
}

/* ================================================================ elementwise */

static void test_elementwise_forward(void **state)
{
    (void)state;
    int32_t c;
    HloModule *m = new_module(false, &c);
    int32_t a = add(m, c, HLO_PARAMETER, "a", arr(2, 8, 16), 0);
    int32_t b = add(m, c, HLO_PARAMETER, "b", arr(2, 8, 16), 0);
    int32_t s = add(m, c, HLO_ADD, "s", arr(2, 8, 16), 2, a, b);
    int32_t e = add(m, c, HLO_EXP, "e", arr(2, 8, 16), 1, s);
    annotate(m, c, a, "{0,1}{}");
    run(m);
    check(m, c, a, "{0,1}{}");
    check(m, c, s, "{0,1}{}");
    check(m, c, e, "{0,1}{}");
    check(m, c, b, "{0,1}{}"); /* sibling operand, through add's backward rule */
    hlo_module_free(m);
}

static void test_elementwise_backward(void **state)
{
    (void)state;
    int32_t c;
    HloModule *m = new_module(false, &c);
    int32_t a = add(m, c, HLO_PARAMETER, "a", arr(2, 8, 16), 0);
    int32_t n = add(m, c, HLO_NEGATE, "n", arr(2, 8, 16), 1, a);
    int32_t cv = add(m, c, HLO_CONVERT, "cv", arr(2, 8, 16), 1, n);
    set_type(m, c, cv, ET_BF16);
    int32_t r = add(m, c, HLO_COPY, "r", arr(2, 8, 16), 1, cv);
    annotate(m, c, r, "{}{2}");
    run(m);
    check(m, c, cv, "{}{2}");
    check(m, c, n, "{}{2}");
    check(m, c, a, "{}{2}");
    hlo_module_free(m);
}

/* compare/select/clamp are elementwise; clamp's scalar bounds stay replicated. */
static void test_select_clamp_compare(void **state)
{
    (void)state;
    int32_t c;
    HloModule *m = new_module(false, &c);
    int32_t x = add(m, c, HLO_PARAMETER, "x", arr(1, 64), 0);
    int32_t y = add(m, c, HLO_PARAMETER, "y", arr(1, 64), 0);
    int32_t lo = add(m, c, HLO_CONSTANT, "lo", arr(0), 0);
    int32_t hi = add(m, c, HLO_CONSTANT, "hi", arr(0), 0);
    int32_t cmp = add(m, c, HLO_COMPARE, "cmp", arr(1, 64), 2, x, y);
    set_type(m, c, cmp, ET_PRED);
    int32_t sel = add(m, c, HLO_SELECT, "sel", arr(1, 64), 3, cmp, x, y);
    int32_t cl = add(m, c, HLO_CLAMP, "cl", arr(1, 64), 3, lo, sel, hi);
    annotate(m, c, y, "{1,2}");
    run(m);
    check(m, c, cmp, "{1,2}");
    check(m, c, x, "{1,2}");
    check(m, c, sel, "{1,2}");
    check(m, c, cl, "{1,2}");
    check(m, c, lo, "R");
    check(m, c, hi, "R");
    hlo_module_free(m);
}

/* ================================================================ broadcast */

static void test_broadcast_forward(void **state)
{
    (void)state;
    int32_t c;
    HloModule *m = new_module(false, &c);
    int32_t v = add(m, c, HLO_PARAMETER, "v", arr(1, 16), 0);
    int32_t b = add(m, c, HLO_BROADCAST, "b", arr(3, 4, 16, 2), 1, v);
    hlo_attrs_mut(m, hlo_inst(m, c, b))->dimensions = ints(m, 1, 1);
    annotate(m, c, v, "{0}");
    run(m);
    check(m, c, b, "{}{0}{}");
    hlo_module_free(m);
}

static void test_broadcast_backward(void **state)
{
    (void)state;
    int32_t c;
    HloModule *m = new_module(false, &c);
    int32_t v = add(m, c, HLO_PARAMETER, "v", arr(2, 16, 8), 0);
    int32_t b = add(m, c, HLO_BROADCAST, "b", arr(3, 8, 4, 16), 1, v);
    hlo_attrs_mut(m, hlo_inst(m, c, b))->dimensions = ints(m, 2, 2, 0);
    int32_t r = add(m, c, HLO_NEGATE, "r", arr(3, 8, 4, 16), 1, b);
    annotate(m, c, r, "{0}{1}{2}"); /* new dim 1 is dropped, 2 -> operand 0, 0 -> operand 1 */
    run(m);
    check(m, c, b, "{0}{1}{2}");
    check(m, c, v, "{2}{0}");
    hlo_module_free(m);
}

/* A size-1 operand dim broadcast to a larger dim carries nothing. */
static void test_broadcast_degenerate_dim(void **state)
{
    (void)state;
    int32_t c;
    HloModule *m = new_module(false, &c);
    int32_t v = add(m, c, HLO_PARAMETER, "v", arr(2, 1, 8), 0);
    int32_t b = add(m, c, HLO_BROADCAST, "b", arr(2, 16, 8), 1, v);
    hlo_attrs_mut(m, hlo_inst(m, c, b))->dimensions = ints(m, 2, 0, 1);
    int32_t r = add(m, c, HLO_NEGATE, "r", arr(2, 16, 8), 1, b);
    annotate(m, c, r, "{0}{1}");
    run(m);
    check(m, c, v, "{}{1}");
    hlo_module_free(m);
}

/* ================================================================ transpose */

static void test_transpose_forward_backward(void **state)
{
    (void)state;
    int32_t c;
    HloModule *m = new_module(false, &c);
    int32_t a = add(m, c, HLO_PARAMETER, "a", arr(3, 4, 8, 16), 0);
    int32_t t = add(m, c, HLO_TRANSPOSE, "t", arr(3, 16, 4, 8), 1, a);
    hlo_attrs_mut(m, hlo_inst(m, c, t))->dimensions = ints(m, 3, 2, 0, 1);
    int32_t b = add(m, c, HLO_PARAMETER, "b", arr(3, 4, 8, 16), 0);
    int32_t t2 = add(m, c, HLO_TRANSPOSE, "t2", arr(3, 16, 4, 8), 1, b);
    hlo_attrs_mut(m, hlo_inst(m, c, t2))->dimensions = ints(m, 3, 2, 0, 1);
    annotate(m, c, a, "{0}{}{1,2}");
    annotate(m, c, t2, "{}{2}{0}");
    run(m);
    check(m, c, t, "{1,2}{0}{}");  /* out dim k = in dim perm[k] */
    check(m, c, b, "{2}{0}{}");    /* in dim perm[k] = out dim k */
    hlo_module_free(m);
}

/* ================================================================ reshape */

static void test_reshape_split(void **state)
{
    (void)state;
    int32_t c;
    HloModule *m = new_module(false, &c);
    /* A.5 example: [8,2048]{4,1} -> [2,4,2048] gives {2,2,1}: atom 0 to dim 0, atom 1 to dim 1. */
    int32_t a = add(m, c, HLO_PARAMETER, "a", arr(2, 8, 2048), 0);
    int32_t r = add(m, c, HLO_RESHAPE, "r", arr(3, 2, 4, 2048), 1, a);
    /* [8] split 2 ways -> [4,2]: 4 % 2 == 0, the run stays on the major dim. */
    int32_t b = add(m, c, HLO_PARAMETER, "b", arr(1, 8), 0);
    int32_t rb = add(m, c, HLO_RESHAPE, "rb", arr(2, 4, 2), 1, b);
    annotate(m, c, a, "{0,1}{}");
    annotate(m, c, b, "{2}");
    run(m);
    check(m, c, r, "{0}{1}{}");
    check(m, c, rb, "{2}{}");
    hlo_module_free(m);
}

static void test_reshape_merge_and_fail(void **state)
{
    (void)state;
    int32_t c;
    HloModule *m = new_module(false, &c);
    /* [16,4]{4,1} -> [64]{4} */
    int32_t a = add(m, c, HLO_PARAMETER, "a", arr(2, 16, 4), 0);
    int32_t ra = add(m, c, HLO_RESHAPE, "ra", arr(1, 64), 1, a);
    /* [16,4]{1,4} -> [64] fails: the minor dim is split (non-contiguous shards). */
    int32_t b = add(m, c, HLO_PARAMETER, "b", arr(2, 16, 4), 0);
    int32_t rb = add(m, c, HLO_RESHAPE, "rb", arr(1, 64), 1, b);
    /* [2,4]{2,2} -> [8]{4}: shard size 1 on dim 0, so the runs concatenate. */
    int32_t d = add(m, c, HLO_PARAMETER, "d", arr(2, 2, 4), 0);
    int32_t rd = add(m, c, HLO_RESHAPE, "rd", arr(1, 8), 1, d);
    /* [6] split 4 ways (uneven) -> [2,3]: 6 = 2 x 3; atom 0 fills the factor
     * of 2, atom 1 does not divide the 3 and is dropped */
    int32_t e = add(m, c, HLO_PARAMETER, "e", arr(1, 6), 0);
    int32_t re = add(m, c, HLO_RESHAPE, "re", arr(2, 2, 3), 1, e);
    annotate(m, c, a, "{0,1}{}");
    annotate(m, c, b, "{}{0,1}");
    annotate(m, c, d, "{2}{0}");
    annotate(m, c, e, "{0,1}");
    run(m);
    check(m, c, ra, "{0,1}");
    check(m, c, rb, "R");
    check(m, c, rd, "{2,0}");
    check(m, c, re, "{0}{}");
    hlo_module_free(m);
}

static void test_reshape_size1_dims_and_backward(void **state)
{
    (void)state;
    int32_t c;
    HloModule *m = new_module(false, &c);
    int32_t a = add(m, c, HLO_PARAMETER, "a", arr(2, 8, 16), 0);
    int32_t r = add(m, c, HLO_RESHAPE, "r", arr(4, 1, 8, 1, 16), 1, a);
    int32_t b = add(m, c, HLO_PARAMETER, "b", arr(3, 8, 1, 16), 0);
    int32_t rb = add(m, c, HLO_RESHAPE, "rb", arr(2, 8, 16), 1, b);
    int32_t x = add(m, c, HLO_PARAMETER, "x", arr(1, 64), 0);
    int32_t rx = add(m, c, HLO_RESHAPE, "rx", arr(2, 8, 8), 1, x);
    annotate(m, c, a, "{0}{1,2}");
    annotate(m, c, b, "{0}{}{1}");
    annotate(m, c, rx, "{0,1}{}"); /* backward: [8,8]{4,1} -> [64]{4} */
    run(m);
    check(m, c, r, "{}{0}{}{1,2}");
    check(m, c, rb, "{0}{1}");
    check(m, c, x, "{0,1}");
    hlo_module_free(m);
}

/* ================================================================ reduce */

static int32_t add_reducer(HloModule *m)
{
    int32_t rc = hlo_add_computation(m, "sum", false);
    int32_t x = add(m, rc, HLO_PARAMETER, "x", arr(0), 0);
    int32_t y = add(m, rc, HLO_PARAMETER, "y", arr(0), 0);
    hlo_inst(m, rc, y)->param_number = 1;
    add(m, rc, HLO_ADD, "s", arr(0), 2, x, y);
    return rc;
}

static void test_reduce_forward_backward(void **state)
{
    (void)state;
    HloModule *m = hlo_module_new("m");
    const char *names[] = {"model"};
    int64_t sizes[] = {8};
    char err[64];
    assert_true(mesh_init(&m->mesh, 1, names, sizes, err, sizeof err));
    m->has_mesh = true;
    int32_t rc = add_reducer(m);
    int32_t c = hlo_add_computation(m, "main", true);
    int32_t a = add(m, c, HLO_PARAMETER, "a", arr(3, 8, 16, 32), 0);
    int32_t z = add(m, c, HLO_CONSTANT, "z", arr(0), 0);
    int32_t r = add(m, c, HLO_REDUCE, "r", arr(2, 8, 32), 2, a, z);
    hlo_attrs_mut(m, hlo_inst(m, c, r))->dimensions = ints(m, 1, 1);
    hlo_attrs_mut(m, hlo_inst(m, c, r))->to_apply = rc;
    int32_t b = add(m, c, HLO_PARAMETER, "b", arr(2, 8, 16), 0);
    int32_t rb = add(m, c, HLO_REDUCE, "rb", arr(1, 16), 2, b, z);
    hlo_attrs_mut(m, hlo_inst(m, c, rb))->dimensions = ints(m, 1, 0);
    hlo_attrs_mut(m, hlo_inst(m, c, rb))->to_apply = rc;
    annotate(m, c, a, "{0}{1}{2}"); /* dim 1 (reduced) is dropped: no partial */
    annotate(m, c, rb, "{1,2}");
    run(m);
    check_all_set(m);
    check(m, c, r, "{0}{2}");
    check(m, c, b, "{}{1,2}");
    check(m, c, z, "R");
    for (int32_t i = 0; i < 3; i++) check(m, rc, i, "R"); /* the reducer: replicated scalars */
    hlo_module_free(m);
}

static void test_variadic_reduce(void **state)
{
    (void)state;
    int32_t c;
    HloModule *m = new_module(false, &c);
    int32_t a = add(m, c, HLO_PARAMETER, "a", arr(2, 8, 16), 0);
    int32_t b = add(m, c, HLO_PARAMETER, "b", arr(2, 8, 16), 0);
    int32_t z = add(m, c, HLO_CONSTANT, "z", arr(0), 0);
    Shape el[2] = {arr(1, 8), arr(1, 8)};
    Shape ts = shape_scalar(ET_TUPLE);
    ts.n_elems = 2;
    ts.elems = el;
    int32_t r = add(m, c, HLO_REDUCE, "r", ts, 4, a, b, z, z);
    hlo_attrs_mut(m, hlo_inst(m, c, r))->dimensions = ints(m, 1, 1);
    annotate(m, c, a, "{0}{1}");
    run(m);
    check_leaf(m, c, r, 0, "{0}");
    check_leaf(m, c, r, 1, "{0}");
    /* the inputs share every factor, the reduced one too (a reduction
     * factor flows among the operands): b is split like a */
    check(m, c, b, "{0}{1}");
    hlo_module_free(m);
}

/* ================================================================ dot */

static int32_t add_dot(HloModule *m, int32_t c, const char *name, Shape s, int32_t l, int32_t r, int nb,
                       const int *lb, const int *rb, int nc, const int *lc, const int *rcn)
{
    int32_t d = add(m, c, HLO_DOT, name, s, 2, l, r);
    HloAttrs *a = hlo_attrs_mut(m, hlo_inst(m, c, d));
    int64_t v[4][SPMDC_MAX_RANK];
    for (int k = 0; k < nb; k++) v[0][k] = lb[k], v[1][k] = rb[k];
    for (int k = 0; k < nc; k++) v[2][k] = lc[k], v[3][k] = rcn[k];
    a->lhs_batch = hlo_intlist(m, v[0], nb);
    a->rhs_batch = hlo_intlist(m, v[1], nb);
    a->lhs_contracting = hlo_intlist(m, v[2], nc);
    a->rhs_contracting = hlo_intlist(m, v[3], nc);
    return d;
}

/* [B,M,K] x [B,K,N] -> [B,M,N]: batch and free dims forward; the other
 * operand's batch dim backward. */
static void test_dot_forward_batch_and_free(void **state)
{
    (void)state;
    int32_t c;
    HloModule *m = new_module(true, &c);
    int32_t l = add(m, c, HLO_PARAMETER, "l", arr(3, 4, 8, 16), 0);
    int32_t r = add(m, c, HLO_PARAMETER, "r", arr(3, 4, 16, 32), 0);
    int zero = 0, two = 2, one = 1;
    int32_t d = add_dot(m, c, "d", arr(3, 4, 8, 32), l, r, 1, &zero, &zero, 1, &two, &one);
    annotate(m, c, l, "{0}{1,2}{}");
    run(m);
    check(m, c, d, "{0}{1,2}{}");
    check(m, c, r, "{0}{}{}");
    hlo_module_free(m);
}

/* Contracting dim split on both operands over the same atoms: nothing on
 * the output, and no partial is created. */
static void test_dot_contracting_both_gives_nothing(void **state)
{
    (void)state;
    int32_t c;
    HloModule *m = new_module(false, &c);
    int32_t l = add(m, c, HLO_PARAMETER, "l", arr(2, 64, 128), 0);
    int32_t r = add(m, c, HLO_PARAMETER, "r", arr(2, 128, 32), 0);
    int one = 1, zero = 0;
    int32_t d = add_dot(m, c, "d", arr(2, 64, 32), l, r, 0, NULL, NULL, 1, &one, &zero);
    int32_t n = add(m, c, HLO_NEGATE, "n", arr(2, 64, 32), 1, d);
    annotate(m, c, l, "{}{0,1,2}");
    annotate(m, c, r, "{0,1,2}{}");
    run(m);
    check(m, c, d, "R");
    check(m, c, n, "R");
    assert_int_equal(hlo_inst(m, c, d)->sharding->tile.partial, 0);
    hlo_module_free(m);
}

static void test_dot_backward_from_output(void **state)
{
    (void)state;
    int32_t c;
    HloModule *m = new_module(true, &c);
    int32_t l = add(m, c, HLO_PARAMETER, "l", arr(2, 64, 128), 0);
    int32_t r = add(m, c, HLO_PARAMETER, "r", arr(2, 128, 32), 0);
    int one = 1, zero = 0;
    int32_t d = add_dot(m, c, "d", arr(2, 64, 32), l, r, 0, NULL, NULL, 1, &one, &zero);
    annotate(m, c, d, "{0}{1,2}");
    run(m);
    check(m, c, l, "{0}{}");
    check(m, c, r, "{}{1,2}");
    hlo_module_free(m);
}

/* lhs contracting dim k pairs with rhs contracting dim k. */
static void test_dot_contracting_from_other_operand(void **state)
{
    (void)state;
    int32_t c;
    HloModule *m = new_module(false, &c);
    int32_t l = add(m, c, HLO_PARAMETER, "l", arr(3, 8, 16, 4), 0);
    int32_t r = add(m, c, HLO_PARAMETER, "r", arr(3, 4, 32, 16), 0);
    int lc[] = {1, 2}, rcn[] = {2, 0};
    int32_t d = add_dot(m, c, "d", arr(2, 8, 32), l, r, 0, NULL, NULL, 2, lc, rcn);
    annotate(m, c, l, "{}{0,1}{2}");
    annotate(m, c, d, "R");
    run(m);
    check(m, c, r, "{2}{}{0,1}");
    check(m, c, d, "R");
    hlo_module_free(m);
}

/* Forward prefers the larger operand: both free dims want atom 0; the rhs
 * (16x64 f32 = 4096 bytes) beats the lhs (8x16 f32 = 512 bytes). */
static void test_dot_larger_operand_first(void **state)
{
    (void)state;
    int32_t c;
    HloModule *m = new_module(false, &c);
    int32_t l = add(m, c, HLO_PARAMETER, "l", arr(2, 8, 16), 0);
    int32_t r = add(m, c, HLO_PARAMETER, "r", arr(2, 16, 64), 0);
    int one = 1, zero = 0;
    int32_t d = add_dot(m, c, "d", arr(2, 8, 64), l, r, 0, NULL, NULL, 1, &one, &zero);
    annotate(m, c, l, "{0}{}");
    annotate(m, c, r, "{}{0}");
    /* Swap sizes: same program with the lhs larger. */
    int32_t l2 = add(m, c, HLO_PARAMETER, "l2", arr(2, 64, 16), 0);
    int32_t r2 = add(m, c, HLO_PARAMETER, "r2", arr(2, 16, 8), 0);
    int32_t d2 = add_dot(m, c, "d2", arr(2, 64, 8), l2, r2, 0, NULL, NULL, 1, &one, &zero);
    annotate(m, c, l2, "{0}{}");
    annotate(m, c, r2, "{}{0}");
    run(m);
    check(m, c, d, "{}{0}");
    check(m, c, d2, "{0}{}");
    hlo_module_free(m);
}

/* Megatron MLP over model=8: X replicated, A split on dim 1, B on dim 0. */
static void test_megatron_mlp(void **state)
{
    (void)state;
    int32_t c;
    HloModule *m = new_module(false, &c);
    int32_t x = add(m, c, HLO_PARAMETER, "X", arr(2, 8192, 8192), 0);
    int32_t a = add(m, c, HLO_PARAMETER, "A", arr(2, 8192, 8192), 0);
    int32_t b = add(m, c, HLO_PARAMETER, "B", arr(2, 8192, 8192), 0);
    int one = 1, zero = 0;
    int32_t h = add_dot(m, c, "H", arr(2, 8192, 8192), x, a, 0, NULL, NULL, 1, &one, &zero);
    int32_t g = add(m, c, HLO_TANH, "G", arr(2, 8192, 8192), 1, h);
    int32_t y = add_dot(m, c, "Y", arr(2, 8192, 8192), g, b, 0, NULL, NULL, 1, &one, &zero);
    int32_t y2 = add_dot(m, c, "Y2", arr(2, 8192, 8192), g, b, 0, NULL, NULL, 1, &one, &zero);
    annotate(m, c, x, "R");
    annotate(m, c, a, "{}{0,1,2}");
    annotate(m, c, b, "{0,1,2}{}");
    annotate(m, c, y, "R");
    run(m);
    check(m, c, h, "{}{0,1,2}");
    check(m, c, g, "{}{0,1,2}");
    check(m, c, y, "R");
    check(m, c, y2, "R"); /* unannotated: the contracting split gives nothing */
    check(m, c, x, "R");
    hlo_module_free(m);
}

/* ================================================================ tuples */

static void test_tuple_and_gte(void **state)
{
    (void)state;
    int32_t c;
    HloModule *m = new_module(false, &c);
    int32_t a = add(m, c, HLO_PARAMETER, "a", arr(1, 8), 0);
    int32_t b = add(m, c, HLO_PARAMETER, "b", arr(2, 8, 4), 0);
    int32_t s = add(m, c, HLO_PARAMETER, "s", arr(1, 16), 0);
    Shape inner_el[2] = {arr(1, 8), arr(2, 8, 4)};
    Shape inner = shape_scalar(ET_TUPLE);
    inner.n_elems = 2;
    inner.elems = inner_el;
    int32_t t1 = add(m, c, HLO_TUPLE, "t1", inner, 2, a, b);
    Shape outer_el[2] = {arr(1, 16), inner};
    Shape outer = shape_scalar(ET_TUPLE);
    outer.n_elems = 2;
    outer.elems = outer_el;
    int32_t t2 = add(m, c, HLO_TUPLE, "t2", outer, 2, s, t1);
    int32_t g1 = add(m, c, HLO_GET_TUPLE_ELEMENT, "g1", inner, 1, t2);
    hlo_attrs_mut(m, hlo_inst(m, c, g1))->index = 1;
    int32_t g2 = add(m, c, HLO_GET_TUPLE_ELEMENT, "g2", arr(2, 8, 4), 1, g1);
    hlo_attrs_mut(m, hlo_inst(m, c, g2))->index = 1;
    int32_t g0 = add(m, c, HLO_GET_TUPLE_ELEMENT, "g0", arr(1, 16), 1, t2);
    int32_t n0 = add(m, c, HLO_NEGATE, "n0", arr(1, 16), 1, g0);
    annotate(m, c, a, "{0}");
    annotate(m, c, n0, "{1}"); /* flows back: n0 -> g0 -> t2 leaf 0 -> s */
    run(m);
    check_all_set(m);
    check_leaf(m, c, t1, 0, "{0}");
    check_leaf(m, c, t1, 1, "R");
    check_leaf(m, c, t2, 0, "{1}");
    check_leaf(m, c, t2, 1, "{0}");
    check_leaf(m, c, t2, 2, "R");
    check_leaf(m, c, g1, 0, "{0}");
    check(m, c, g2, "R");
    check(m, c, g0, "{1}");
    check(m, c, s, "{1}");
    hlo_module_free(m);
}

/* parameter, constant, iota: nothing forward, everything from their users. */
static void test_leaves_take_from_users(void **state)
{
    (void)state;
    int32_t c;
    HloModule *m = new_module(false, &c);
    int32_t io = add(m, c, HLO_IOTA, "io", arr(2, 64, 8), 0);
    int32_t k = add(m, c, HLO_CONSTANT, "k", arr(2, 64, 8), 0);
    int32_t p = add(m, c, HLO_PARAMETER, "p", arr(2, 64, 8), 0);
    int32_t s1 = add(m, c, HLO_ADD, "s1", arr(2, 64, 8), 2, io, k);
    int32_t s2 = add(m, c, HLO_MULTIPLY, "s2", arr(2, 64, 8), 2, s1, p);
    annotate(m, c, s2, "{0,1}{2}");
    run(m);
    check(m, c, s1, "{0,1}{2}");
    check(m, c, io, "{0,1}{2}");
    check(m, c, k, "{0,1}{2}");
    check(m, c, p, "{0,1}{2}");
    hlo_module_free(m);
}

/* opt-barrier is a leafwise identity on tuples; bitcast-convert maps the
 * dims it keeps. */
static void test_opt_barrier_and_bitcast_convert(void **state)
{
    (void)state;
    int32_t c;
    HloModule *m = new_module(false, &c);
    int32_t a = add(m, c, HLO_PARAMETER, "a", arr(1, 8), 0);
    int32_t b = add(m, c, HLO_PARAMETER, "b", arr(2, 8, 4), 0);
    Shape el[2] = {arr(1, 8), arr(2, 8, 4)};
    Shape ts = shape_scalar(ET_TUPLE);
    ts.n_elems = 2;
    ts.elems = el;
    int32_t t = add(m, c, HLO_TUPLE, "t", ts, 2, a, b);
    int32_t ob = add(m, c, HLO_OPTIMIZATION_BARRIER, "ob", ts, 1, t);
    int32_t g = add(m, c, HLO_GET_TUPLE_ELEMENT, "g", arr(2, 8, 4), 1, ob);
    hlo_attrs_mut(m, hlo_inst(m, c, g))->index = 1;
    int32_t bc = add(m, c, HLO_BITCAST_CONVERT, "bc", arr(1, 8), 1, a);
    set_type(m, c, bc, ET_S32);
    int32_t x = add(m, c, HLO_PARAMETER, "x", arr(1, 8), 0);
    set_type(m, c, x, ET_F64);
    int32_t bw = add(m, c, HLO_BITCAST_CONVERT, "bw", arr(2, 8, 2), 1, x); /* f64[8] -> f32[8,2] */
    annotate(m, c, a, "{2}");
    annotate(m, c, g, "{}{0}");
    annotate(m, c, x, "{1}");
    run(m);
    check_leaf(m, c, ob, 0, "{2}");
    check_leaf(m, c, ob, 1, "{}{0}");
    check(m, c, b, "{}{0}");
    check(m, c, bc, "{2}");
    check(m, c, bw, "{1}{}"); /* the new minor dim stays whole, dim 0 is x's */
    hlo_module_free(m);
}

/* Malformed attributes (verify would reject them) never crash the pass;
 * the ops simply pass nothing. */
static void test_malformed_attrs_pass_nothing(void **state)
{
    (void)state;
    int32_t c;
    HloModule *m = new_module(false, &c);
    int32_t a = add(m, c, HLO_PARAMETER, "a", arr(2, 8, 8), 0);
    int32_t t = add(m, c, HLO_TRANSPOSE, "t", arr(2, 8, 8), 1, a);
    hlo_attrs_mut(m, hlo_inst(m, c, t))->dimensions = ints(m, 2, 0, 0);
    int32_t b = add(m, c, HLO_BROADCAST, "b", arr(2, 8, 8), 1, a);
    hlo_attrs_mut(m, hlo_inst(m, c, b))->dimensions = ints(m, 1, 5);
    int32_t r = add(m, c, HLO_REDUCE, "r", arr(1, 8), 2, a, a);
    hlo_attrs_mut(m, hlo_inst(m, c, r))->dimensions = ints(m, 1, 9);
    int one = 1, nine = 9;
    int32_t d = add_dot(m, c, "d", arr(2, 8, 8), a, a, 0, NULL, NULL, 1, &one, &nine);
    int32_t rs = add(m, c, HLO_RESHAPE, "rs", arr(1, 63), 1, a);
    int32_t g = add(m, c, HLO_GET_TUPLE_ELEMENT, "g", arr(2, 8, 8), 1, a);
    int32_t bad = add(m, c, HLO_NEGATE, "bad", arr(2, 8, 8), 0); /* arity 1 with no operand */
    annotate(m, c, a, "{0}{1}");
    run(m);
    check_all_set(m);
    check(m, c, t, "R");
    check(m, c, b, "R");
    check(m, c, r, "R");
    check(m, c, d, "R");
    check(m, c, rs, "R");
    check(m, c, g, "R");
    check(m, c, bad, "R");
    hlo_module_free(m);
}

/* A while ties its operand, body parameter, body root, condition parameter
 * and result leaf by leaf: an annotation on any of them reaches the others
 * (here the operand's, and in a second loop the body root's). */
static void test_while_ties(void **state)
{
    (void)state;
    HloModule *m = hlo_module_new("m");
    const char *names[] = {"model"};
    int64_t sizes[] = {8};
    char err[64];
    assert_true(mesh_init(&m->mesh, 1, names, sizes, err, sizeof err));
    m->has_mesh = true;
    int32_t cond = hlo_add_computation(m, "cond", false);
    int32_t cp = add(m, cond, HLO_PARAMETER, "cp", arr(1, 16), 0);
    add(m, cond, HLO_CONSTANT, "cr", arr(0), 0);
    int32_t body = hlo_add_computation(m, "body", false);
    int32_t bp = add(m, body, HLO_PARAMETER, "bp", arr(1, 16), 0);
    int32_t br = add(m, body, HLO_NEGATE, "br", arr(1, 16), 1, bp);
    int32_t cond2 = hlo_add_computation(m, "cond2", false);
    int32_t cp2 = add(m, cond2, HLO_PARAMETER, "cp2", arr(1, 16), 0);
    add(m, cond2, HLO_CONSTANT, "cr2", arr(0), 0);
    int32_t body2 = hlo_add_computation(m, "body2", false);
    int32_t bp2 = add(m, body2, HLO_PARAMETER, "bp2", arr(1, 16), 0);
    int32_t br2 = add(m, body2, HLO_EXP, "br2", arr(1, 16), 1, bp2);
    annotate(m, body2, br2, "{1,2}");
    int32_t c = hlo_add_computation(m, "main", true);
    int32_t p = add(m, c, HLO_PARAMETER, "p", arr(1, 16), 0);
    int32_t w = add(m, c, HLO_WHILE, "w", arr(1, 16), 1, p);
    hlo_attrs_mut(m, hlo_inst(m, c, w))->condition = cond;
    hlo_attrs_mut(m, hlo_inst(m, c, w))->body = body;
    int32_t n = add(m, c, HLO_NEGATE, "n", arr(1, 16), 1, w);
    int32_t q = add(m, c, HLO_PARAMETER, "q", arr(1, 16), 0);
    int32_t w2 = add(m, c, HLO_WHILE, "w2", arr(1, 16), 1, q);
    hlo_attrs_mut(m, hlo_inst(m, c, w2))->condition = cond2;
    hlo_attrs_mut(m, hlo_inst(m, c, w2))->body = body2;
    annotate(m, c, p, "{0}");
    run(m);
    check_all_set(m);
    check(m, c, w, "{0}");
    check(m, c, n, "{0}");
    check(m, body, bp, "{0}");
    check(m, body, br, "{0}");
    check(m, cond, cp, "{0}");
    /* the second loop: its body root's annotation reaches its parameter,
     * the loop's result and operand */
    check(m, body2, bp2, "{1,2}");
    check(m, cond2, cp2, "{1,2}");
    check(m, c, w2, "{1,2}");
    check(m, c, q, "{1,2}");
    hlo_module_free(m);
}

/* A conditional ties each branch's parameter to its operand and every
 * branch root to the result; reducers stay replicated scalars. */
static void test_conditional_ties(void **state)
{
    (void)state;
    HloModule *m = hlo_module_new("m");
    const char *names[] = {"x", "y"};
    int64_t sizes[] = {2, 4};
    char err[64];
    assert_true(mesh_init(&m->mesh, 2, names, sizes, err, sizeof err));
    m->has_mesh = true;
    int32_t rc = add_reducer(m);
    int32_t t = hlo_add_computation(m, "on_true", false);
    int32_t tp = add(m, t, HLO_PARAMETER, "tp", arr(2, 8, 16), 0);
    int32_t tr = add(m, t, HLO_NEGATE, "tr", arr(2, 8, 16), 1, tp);
    int32_t f = hlo_add_computation(m, "on_false", false);
    int32_t fp = add(m, f, HLO_PARAMETER, "fp", arr(2, 16, 8), 0);
    int32_t fr = add(m, f, HLO_TRANSPOSE, "fr", arr(2, 8, 16), 1, fp);
    hlo_attrs_mut(m, hlo_inst(m, f, fr))->dimensions = ints(m, 2, 1, 0);
    int32_t c = hlo_add_computation(m, "main", true);
    int32_t pred = add(m, c, HLO_PARAMETER, "pred", arr(0), 0);
    set_type(m, c, pred, ET_PRED);
    int32_t a = add(m, c, HLO_PARAMETER, "a", arr(2, 8, 16), 0);
    int32_t b = add(m, c, HLO_PARAMETER, "b", arr(2, 16, 8), 0);
    int32_t cd = add(m, c, HLO_CONDITIONAL, "cd", arr(2, 8, 16), 3, pred, a, b);
    int64_t br[2] = {t, f};
    hlo_attrs_mut(m, hlo_inst(m, c, cd))->branches = hlo_intlist(m, br, 2);
    int32_t z = add(m, c, HLO_CONSTANT, "z", arr(0), 0);
    int32_t r = add(m, c, HLO_REDUCE, "r", arr(1, 8), 2, cd, z);
    hlo_attrs_mut(m, hlo_inst(m, c, r))->dimensions = ints(m, 1, 1);
    hlo_attrs_mut(m, hlo_inst(m, c, r))->to_apply = rc;
    annotate(m, c, a, "{0}{1,2}");
    run(m);
    check_all_set(m);
    check(m, t, tp, "{0}{1,2}");
    check(m, t, tr, "{0}{1,2}");
    check(m, c, cd, "{0}{1,2}"); /* the true branch's root */
    check(m, f, fr, "{0}{1,2}"); /* the other root, tied to the result */
    check(m, f, fp, "{1,2}{0}"); /* back through the transpose */
    check(m, c, b, "{1,2}{0}");  /* and out to the operand of that branch */
    check(m, c, r, "{0}");
    for (int32_t i = 0; i < 3; i++) check(m, rc, i, "R");
    hlo_module_free(m);
}

/* ================================================================ annotations */

static void test_sharding_custom_call_and_copy(void **state)
{
    (void)state;
    int32_t c;
    HloModule *m = new_module(false, &c);
    int32_t x = add(m, c, HLO_PARAMETER, "x", arr(2, 8, 8), 0);
    int32_t cc = add(m, c, HLO_CUSTOM_CALL, "cc", arr(2, 8, 8), 1, x);
    hlo_attrs_mut(m, hlo_inst(m, c, cc))->custom_call_target = "Sharding";
    int32_t y = add(m, c, HLO_COPY, "y", arr(2, 8, 8), 1, cc);
    /* A custom-call with no rule is opaque: result replicated, operand gets nothing. */
    int32_t z = add(m, c, HLO_PARAMETER, "z", arr(2, 8, 8), 0);
    int32_t oc = add(m, c, HLO_CUSTOM_CALL, "oc", arr(2, 8, 8), 1, z);
    hlo_attrs_mut(m, hlo_inst(m, c, oc))->custom_call_target = "my_kernel";
    int32_t w = add(m, c, HLO_NEGATE, "w", arr(2, 8, 8), 1, oc);
    annotate(m, c, cc, "{1}{0}");
    annotate(m, c, w, "{0}{}");
    run(m);
    check(m, c, cc, "{1}{0}");
    check(m, c, y, "{1}{0}");
    check(m, c, x, "{1}{0}");
    check(m, c, oc, "R");
    check(m, c, z, "R");
    hlo_module_free(m);
}

/* Ops without a rule: result replicated, even when the operand or a user is
 * split; their operands get nothing. */
static void test_opaque_default(void **state)
{
    (void)state;
    int32_t c;
    HloModule *m = new_module(false, &c);
    int32_t a = add(m, c, HLO_PARAMETER, "a", arr(1, 16), 0);
    int32_t s = add(m, c, HLO_CUSTOM_CALL, "s", arr(1, 16), 1, a);
    hlo_attrs_mut(m, hlo_inst(m, c, s))->custom_call_target = "my_reduce";
    int32_t n = add(m, c, HLO_NEGATE, "n", arr(1, 16), 1, s);
    int32_t b = add(m, c, HLO_PARAMETER, "b", arr(1, 16), 0);
    int32_t k = add(m, c, HLO_CUSTOM_CALL, "k", arr(1, 16), 1, b);
    hlo_attrs_mut(m, hlo_inst(m, c, k))->custom_call_target = "my_kernel";
    int32_t u = add(m, c, HLO_NEGATE, "u", arr(1, 16), 1, k);
    annotate(m, c, a, "{0}");
    annotate(m, c, u, "{0}");
    run(m);
    check(m, c, s, "R");
    check(m, c, n, "R");
    check(m, c, k, "R");
    check(m, c, b, "R");
    hlo_module_free(m);
}

/* The user's collectives (inside a manual region) are identities on the
 * automatic axes, both ways; the dims an all-gather, reduce-scatter or
 * all-to-all moves data along stay whole; a manual operand makes the result
 * manual. */
static void test_collectives_pass_automatic_axes(void **state)
{
    (void)state;
    int32_t c;
    HloModule *m = new_module(true, &c);
    int32_t a = add(m, c, HLO_PARAMETER, "a", arr(2, 8, 16), 0);
    int32_t ar = add(m, c, HLO_ALL_REDUCE, "ar", arr(2, 8, 16), 1, a);
    int32_t ag = add(m, c, HLO_ALL_GATHER, "ag", arr(2, 8, 64), 1, ar);
    hlo_attrs_mut(m, hlo_inst(m, c, ag))->dimensions = ints(m, 1, 1);
    int32_t rs = add(m, c, HLO_REDUCE_SCATTER, "rs", arr(2, 4, 64), 1, ag);
    hlo_attrs_mut(m, hlo_inst(m, c, rs))->dimensions = ints(m, 1, 0);
    int32_t b = add(m, c, HLO_PARAMETER, "b", arr(2, 8, 16), 0);
    int32_t cp = add(m, c, HLO_COLLECTIVE_PERMUTE, "cp", arr(2, 8, 16), 1, b);
    int32_t ng = add(m, c, HLO_NEGATE, "ng", arr(2, 8, 16), 1, cp);
    int32_t mn = add(m, c, HLO_PARAMETER, "mn", arr(1, 8), 0);
    int32_t mar = add(m, c, HLO_ALL_REDUCE, "mar", arr(1, 8), 1, mn);
    annotate(m, c, a, "{0}{1}");
    annotate(m, c, ng, "{1}{0}");
    annotate(m, c, mn, "M");
    run(m);
    check(m, c, ar, "{0}{1}"); /* all-reduce: forward */
    check(m, c, ag, "{0}{}");  /* all-gather along dim 1: that dim whole */
    check(m, c, rs, "{}{}");   /* reduce-scatter along dim 0, the only split left */
    check(m, c, cp, "{1}{0}"); /* collective-permute: backward from ng */
    check(m, c, b, "{1}{0}");
    check(m, c, mar, "M");
    hlo_module_free(m);
}

/* Permutation factors (slice with a start, reverse, pad, concatenate,
 * dynamic slicing) propagate: the partitioner exchanges halos or permutes
 * for them.  Dims a slice takes whole are pass-through. */
static void test_permutation_factors(void **state)
{
    (void)state;
    int32_t c;
    HloModule *m = new_module(false, &c);
    int32_t a = add(m, c, HLO_PARAMETER, "a", arr(2, 16, 8), 0);
    int32_t s = add(m, c, HLO_SLICE, "s", arr(2, 8, 8), 1, a);
    HloAttrs *sa = hlo_attrs_mut(m, hlo_inst(m, c, s));
    sa->slice_start = ints(m, 2, 4, 0);
    sa->slice_limit = ints(m, 2, 12, 8);
    sa->slice_stride = ints(m, 2, 1, 1);
    int32_t r = add(m, c, HLO_REVERSE, "r", arr(2, 16, 8), 1, a);
    hlo_attrs_mut(m, hlo_inst(m, c, r))->dimensions = ints(m, 1, 1);
    int32_t b = add(m, c, HLO_PARAMETER, "b", arr(2, 16, 8), 0);
    int32_t cat = add(m, c, HLO_CONCATENATE, "cat", arr(2, 32, 8), 2, a, b);
    hlo_attrs_mut(m, hlo_inst(m, c, cat))->dimensions = ints(m, 1, 0);
    /* [12] split 8 ways would not divide: the slice's (permutation) dim
     * stays whole rather than become uneven */
    int32_t s12 = add(m, c, HLO_SLICE, "s12", arr(2, 12, 8), 1, a);
    /* [4] cannot take 8 tiles either */
    int32_t s4 = add(m, c, HLO_SLICE, "s4", arr(2, 4, 8), 1, a);
    HloAttrs *sa4 = hlo_attrs_mut(m, hlo_inst(m, c, s4));
    sa4->slice_start = ints(m, 2, 2, 0);
    sa4->slice_limit = ints(m, 2, 6, 8);
    sa4->slice_stride = ints(m, 2, 1, 1);
    HloAttrs *sa12 = hlo_attrs_mut(m, hlo_inst(m, c, s12));
    sa12->slice_start = ints(m, 2, 0, 0);
    sa12->slice_limit = ints(m, 2, 12, 8);
    sa12->slice_stride = ints(m, 2, 1, 1);
    annotate(m, c, a, "{0,1,2}{}");
    run(m);
    check(m, c, s, "{0,1,2}{}");
    check(m, c, r, "{0,1,2}{}");
    check(m, c, cat, "{0,1,2}{}");
    check(m, c, b, "{0,1,2}{}"); /* concatenated operands share the factor */
    check(m, c, s12, "R");
    check(m, c, s4, "R");
    hlo_module_free(m);
}

static void test_user_annotations_not_overwritten(void **state)
{
    (void)state;
    int32_t c;
    HloModule *m = new_module(false, &c);
    int32_t a = add(m, c, HLO_PARAMETER, "a", arr(2, 8, 8), 0);
    int32_t n1 = add(m, c, HLO_NEGATE, "n1", arr(2, 8, 8), 1, a);
    int32_t n2 = add(m, c, HLO_NEGATE, "n2", arr(2, 8, 8), 1, n1);
    int32_t n3 = add(m, c, HLO_NEGATE, "n3", arr(2, 8, 8), 1, n2);
    int32_t n4 = add(m, c, HLO_NEGATE, "n4", arr(2, 8, 8), 1, n3);
    annotate(m, c, a, "{0}{}");
    annotate(m, c, n2, "R");
    annotate(m, c, n4, "{}{1}");
    Sharding *before = hlo_inst(m, c, n2)->sharding;
    run(m);
    assert_ptr_equal(hlo_inst(m, c, n2)->sharding, before);
    check(m, c, a, "{0}{}");
    check(m, c, n1, "{0}{}");
    check(m, c, n2, "R");
    check(m, c, n3, "{}{1}");
    check(m, c, n4, "{}{1}");
    hlo_module_free(m);
}

/* Partial (unreduced) atoms stay on the annotated value; the tiling flows
 * on without them. */
static void test_partial_kept_not_propagated(void **state)
{
    (void)state;
    int32_t c;
    HloModule *m = new_module(false, &c);
    int32_t a = add(m, c, HLO_PARAMETER, "a", arr(2, 8, 8), 0);
    int32_t n = add(m, c, HLO_NEGATE, "n", arr(2, 8, 8), 1, a);
    int32_t b = add(m, c, HLO_PARAMETER, "b", arr(2, 8, 8), 0);
    int32_t nb = add(m, c, HLO_NEGATE, "nb", arr(2, 8, 8), 1, b);
    annotate(m, c, a, "{0}{} partial=2");
    annotate(m, c, b, "{}{} partial=1");
    run(m);
    check_all_set(m);
    check(m, c, a, "{0}{} partial=2");
    check(m, c, n, "{0}{}");
    check(m, c, b, "{}{} partial=1");
    check(m, c, nb, "R");
    hlo_module_free(m);
}

/* MANUAL spreads to its neighbours and beats a tiling; MAXIMAL spreads not. */
static void test_manual_and_maximal(void **state)
{
    (void)state;
    int32_t c;
    HloModule *m = new_module(false, &c);
    int32_t a = add(m, c, HLO_PARAMETER, "a", arr(1, 8), 0);
    int32_t b = add(m, c, HLO_PARAMETER, "b", arr(1, 8), 0);
    int32_t s = add(m, c, HLO_ADD, "s", arr(1, 8), 2, a, b);
    int32_t d = add(m, c, HLO_PARAMETER, "d", arr(1, 8), 0);
    int32_t nd = add(m, c, HLO_NEGATE, "nd", arr(1, 8), 1, d);
    annotate(m, c, a, "{0}");
    annotate(m, c, b, "M");
    HloInst *dd = hlo_inst(m, c, d);
    dd->sharding = ARENA_NEW(m->arena, Sharding);
    *dd->sharding = sharding_maximal(3);
    dd->sharding_from_user = true;
    run(m);
    check(m, c, s, "M");
    check(m, c, nd, "R");
    hlo_module_free(m);
}

/* ================================================================ lattice */

static void test_merge_compatible_and_conflicts(void **state)
{
    (void)state;
    int32_t c;
    HloModule *m = new_module(true, &c);
    /* Different dims over disjoint atoms: both. */
    int32_t a = add(m, c, HLO_PARAMETER, "a", arr(2, 8, 8), 0);
    int32_t b = add(m, c, HLO_PARAMETER, "b", arr(2, 8, 8), 0);
    int32_t s = add(m, c, HLO_ADD, "s", arr(2, 8, 8), 2, a, b);
    /* Same atom wanted by two dims: the moves cost the same either way, the
     * tie goes to the candidate that splits the lower dim. */
    int32_t c1 = add(m, c, HLO_PARAMETER, "c1", arr(2, 8, 8), 0);
    int32_t c2 = add(m, c, HLO_PARAMETER, "c2", arr(2, 8, 8), 0);
    int32_t s2 = add(m, c, HLO_ADD, "s2", arr(2, 8, 8), 2, c1, c2);
    /* A run that is a major prefix of the other's is extended. */
    int32_t e1 = add(m, c, HLO_PARAMETER, "e1", arr(2, 8, 8), 0);
    int32_t e2 = add(m, c, HLO_PARAMETER, "e2", arr(2, 8, 8), 0);
    int32_t s3 = add(m, c, HLO_ADD, "s3", arr(2, 8, 8), 2, e1, e2);
    /* Different runs on one dim: the cheaper for the op.  f32[8,8] = 256 B:
     * on y (f1 moves from x, 2 rows a device, to y: 64 B per device) beats
     * on x (f2 moves from y to x: 128 B per device). */
    int32_t f1 = add(m, c, HLO_PARAMETER, "f1", arr(2, 8, 8), 0);
    int32_t f2 = add(m, c, HLO_PARAMETER, "f2", arr(2, 8, 8), 0);
    int32_t s4 = add(m, c, HLO_ADD, "s4", arr(2, 8, 8), 2, f1, f2);
    annotate(m, c, a, "{0}{}");
    annotate(m, c, b, "{}{1,2}");
    annotate(m, c, c1, "{0}{}");
    annotate(m, c, c2, "{}{0}");
    annotate(m, c, e1, "{1}{}");
    annotate(m, c, e2, "{1,2}{}");
    annotate(m, c, f1, "{0}{}");
    annotate(m, c, f2, "{1,2}{}");
    run(m);
    check(m, c, s, "{0}{1,2}");
    check(m, c, s2, "{0}{}");
    check(m, c, s3, "{1,2}{}");
    check(m, c, s4, "{1,2}{}");
    hlo_module_free(m);
}

/* Information zig-zags: each rung needs one more forward+backward sweep
 * (add_j precedes add_{j-1} in program order). */
static void test_fixed_point_needs_several_sweeps(void **state)
{
    (void)state;
    int32_t c;
    HloModule *m = new_module(false, &c);
    enum { K = 6 };
    int32_t v[K + 1], s[K];
    char nm[16];
    for (int j = 0; j <= K; j++) {
        snprintf(nm, sizeof nm, "v%d", j);
        v[j] = add(m, c, HLO_PARAMETER, nm, arr(1, 64), 0);
    }
    for (int j = K - 1; j >= 0; j--) {
        snprintf(nm, sizeof nm, "s%d", j);
        s[j] = add(m, c, HLO_ADD, nm, arr(1, 64), 2, v[j], v[j + 1]);
    }
    annotate(m, c, v[0], "{2,0}");
    run(m);
    for (int j = 0; j < K; j++) check(m, c, s[j], "{2,0}");
    for (int j = 0; j <= K; j++) check(m, c, v[j], "{2,0}");
    hlo_module_free(m);
}

/* No sweep bound: a 300-rung zig-zag (each rung against program order)
 * reaches its end; the worklist follows the edges. */
static void test_zigzag_reaches_the_end(void **state)
{
    (void)state;
    int32_t c;
    HloModule *m = new_module(false, &c);
    enum { K = 300 };
    int32_t v[K + 1];
    char nm[16];
    for (int j = 0; j <= K; j++) {
        snprintf(nm, sizeof nm, "v%d", j);
        v[j] = add(m, c, HLO_PARAMETER, nm, arr(1, 64), 0);
    }
    for (int j = K - 1; j >= 0; j--) {
        snprintf(nm, sizeof nm, "s%d", j);
        add(m, c, HLO_ADD, nm, arr(1, 64), 2, v[j], v[j + 1]);
    }
    annotate(m, c, v[0], "{0}");
    run(m);
    check_all_set(m);
    check(m, c, v[1], "{0}");
    check(m, c, v[K], "{0}");
    hlo_module_free(m);
}

/* Phase order: elementwise (phase 0) settles the broadcast's result before
 * broadcast forward (phase 3) could offer its own. */
static void test_broadcast_comes_last(void **state)
{
    (void)state;
    int32_t c;
    HloModule *m = new_module(false, &c);
    int32_t v = add(m, c, HLO_PARAMETER, "v", arr(1, 16), 0);
    int32_t b = add(m, c, HLO_BROADCAST, "b", arr(2, 16, 16), 1, v);
    hlo_attrs_mut(m, hlo_inst(m, c, b))->dimensions = ints(m, 1, 1);
    int32_t w = add(m, c, HLO_PARAMETER, "w", arr(2, 16, 16), 0);
    int32_t s = add(m, c, HLO_ADD, "s", arr(2, 16, 16), 2, b, w);
    annotate(m, c, v, "{0,1,2}");
    annotate(m, c, w, "{0,1,2}{}");
    run(m);
    check(m, c, s, "{0,1,2}{}");
    check(m, c, b, "{0,1,2}{}");
    hlo_module_free(m);
}

/* Dot and reduce (phase 1) wait until pass-through ops settled: the add
 * gives d its split first.  Then the dot disagrees with d (l offers d's dim
 * 0 the atom d uses on dim 1); f32[16,16] = 1,024 B: keeping l's split and
 * moving d (all-to-all, 256 B per device) beats gathering l (512 B), so r
 * is left whole. */
static void test_passthrough_before_dot(void **state)
{
    (void)state;
    int32_t c;
    HloModule *m = new_module(false, &c);
    int32_t l = add(m, c, HLO_PARAMETER, "l", arr(2, 16, 16), 0);
    int32_t r = add(m, c, HLO_PARAMETER, "r", arr(2, 16, 16), 0);
    int one = 1, zero = 0;
    int32_t d = add_dot(m, c, "d", arr(2, 16, 16), l, r, 0, NULL, NULL, 1, &one, &zero);
    int32_t w = add(m, c, HLO_PARAMETER, "w", arr(2, 16, 16), 0);
    int32_t s = add(m, c, HLO_ADD, "s", arr(2, 16, 16), 2, d, w);
    annotate(m, c, l, "{0}{}");  /* dot forward would give d {0}{} */
    annotate(m, c, w, "{}{0}");  /* but the add's backward gives d {}{0} first */
    run(m);
    check(m, c, d, "{}{0}");
    check(m, c, r, "R");
    check(m, c, s, "{}{0}");
    hlo_module_free(m);
}

/* ================================================================ meshes, computations */

static void test_mesh_2d(void **state)
{
    (void)state;
    int32_t c;
    HloModule *m = new_module(true, &c);
    /* x (atom 0) on the batch, y (atoms 1,2) on the features. */
    int32_t in = add(m, c, HLO_PARAMETER, "in", arr(2, 32, 64), 0);
    int32_t w = add(m, c, HLO_PARAMETER, "w", arr(2, 64, 128), 0);
    int one = 1, zero = 0;
    int32_t d = add_dot(m, c, "d", arr(2, 32, 128), in, w, 0, NULL, NULL, 1, &one, &zero);
    int32_t r = add(m, c, HLO_RESHAPE, "r", arr(3, 32, 4, 32), 1, d);
    int32_t t = add(m, c, HLO_TRANSPOSE, "t", arr(3, 4, 32, 32), 1, r);
    hlo_attrs_mut(m, hlo_inst(m, c, t))->dimensions = ints(m, 3, 1, 0, 2);
    annotate(m, c, in, "{0}{}");
    annotate(m, c, w, "{}{1,2}");
    run(m);
    check(m, c, d, "{0}{1,2}");
    check(m, c, r, "{0}{1,2}{}"); /* 128 split 4 -> [4,32]: the run goes to the major 4 */
    check(m, c, t, "{1,2}{0}{}");
    hlo_module_free(m);
}

/* A call ties its operands to the callee's parameters and its result to
 * the callee's root; an annotation inside the callee propagates out. */
static void test_non_entry_computation(void **state)
{
    (void)state;
    HloModule *m = hlo_module_new("m");
    const char *names[] = {"model"};
    int64_t sizes[] = {8};
    char err[64];
    assert_true(mesh_init(&m->mesh, 1, names, sizes, err, sizeof err));
    m->has_mesh = true;
    int32_t body = hlo_add_computation(m, "body", false);
    int32_t bp = add(m, body, HLO_PARAMETER, "bp", arr(1, 16), 0);
    int32_t bn = add(m, body, HLO_NEGATE, "bn", arr(1, 16), 1, bp);
    int32_t bc = add(m, body, HLO_COPY, "bc", arr(1, 16), 1, bn);
    int32_t br = add(m, body, HLO_NEGATE, "br", arr(1, 16), 1, bc);
    annotate(m, body, bc, "{0}");
    int32_t c = hlo_add_computation(m, "main", true);
    int32_t p = add(m, c, HLO_PARAMETER, "p", arr(1, 16), 0);
    int32_t call = add(m, c, HLO_CALL, "call", arr(1, 16), 1, p);
    hlo_attrs_mut(m, hlo_inst(m, c, call))->to_apply = body;
    int32_t n = add(m, c, HLO_NEGATE, "n", arr(1, 16), 1, call);
    annotate(m, c, n, "{1}");
    run(m);
    check_all_set(m);
    /* the callee's annotation spreads through its values and out of its
     * parameter to the call's operand (one step each) */
    check(m, body, bn, "{0}");
    check(m, body, br, "{0}");
    check(m, body, bp, "{0}");
    check(m, c, p, "{0}");
    /* n reached the call's result one step before the root's tie did: the
     * result keeps n's split */
    check(m, c, call, "{1}");
    hlo_module_free(m);
}

static void test_named_form_follows_input(void **state)
{
    (void)state;
    int32_t c;
    HloModule *m = new_module(false, &c);
    int32_t a = add(m, c, HLO_PARAMETER, "a", arr(1, 8), 0);
    int32_t n = add(m, c, HLO_NEGATE, "n", arr(1, 8), 1, a);
    int32_t k = add(m, c, HLO_CONSTANT, "k", arr(0), 0);
    annotate(m, c, a, "{0}");
    hlo_inst(m, c, a)->sharding->named_form = true;
    run(m);
    assert_true(hlo_inst(m, c, n)->sharding->named_form);
    assert_true(hlo_inst(m, c, k)->sharding->named_form);
    hlo_module_free(m);
}

/* ================================================================ from HLO text */

/* parse -> verify -> bind -> propagate, as the driver does. */
static HloModule *propagate_text(DiagEngine *d, const char *text)
{
    uint32_t f = diag_add_file(d, "t.hlo", text, strlen(text));
    diag_set_show_source(d, false);
    HloModule *m = parse_hlo(text, strlen(text), f, d);
    if (!m) fail_msg("parse failed: %s", diag_text(d));
    PassCtx cx = {arena_create(), d, NULL};
    bool ok = verify_module(m, d) && bind_shardings(m, &cx);
    arena_reset(cx.scratch);
    ok = ok && propagate_shardings(m, &cx);
    arena_destroy(cx.scratch);
    if (!ok) fail_msg("pipeline failed: %s", diag_text(d));
    check_all_set(m);
    return m;
}

/* The printed sharding of instruction `name` of computation `comp`. */
static void assert_printed(const HloModule *m, const char *comp, const char *name, const char *want)
{
    int32_t c = hlo_find_computation(m, comp);
    assert_true(c >= 0);
    int32_t i = hlo_find_inst(m, c, name);
    assert_true(i >= 0);
    StrBuf b = {0};
    sharding_print(&b, hlo_inst(m, c, i)->sharding, &m->mesh);
    if (strcmp(sb_cstr(&b), want) != 0) fail_msg("%s: got %s, want %s", name, sb_cstr(&b), want);
    sb_free(&b);
}

/* parse .. canonicalize as the driver does (optionally --mesh), then
 * propagation with its explanation into *why (may be NULL). */
static HloModule *run_text(DiagEngine *d, const char *text, const char *mesh, StrBuf *why)
{
    SpmdcOptions opt;
    memset(&opt, 0, sizeof opt);
    char err[200];
    if (mesh) {
        assert_true(mesh_parse_spec(mesh, &opt.mesh, err, sizeof err));
        opt.has_mesh = true;
    }
    diag_set_show_source(d, false);
    PipelineState st;
    memset(&st, 0, sizeof st);
    st.text = text;
    st.len = strlen(text);
    st.file_id = diag_add_file(d, "t.hlo", text, st.len);
    PassCtx cx = {arena_create(), d, &opt};
    if (!pipeline_run(&st, &cx, PASS_PARSE, PASS_CANONICALIZE)) fail_msg("load failed: %s", diag_text(d));
    assert_true(propagate_shardings_explained(st.m, &cx, why));
    arena_destroy(cx.scratch);
    HloModule *m = st.m;
    st.m = NULL;
    pipeline_state_free(&st);
    check_all_set(m);
    return m;
}

/* Every op family, forward and backward, on a=2,b=2 from x [{a}, {b}]. */
static void test_text_op_families(void **state)
{
    (void)state;
    static const char text[] =
        "HloModule fam\n"
        "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"
        "lt {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = pred[] compare(a, b), direction=LT\n}\n"
        "ENTRY e {\n"
        "  x = f32[8,16] parameter(0), sharding={mesh[a=2,b=2], [{a}, {b}]}\n"
        "  z = f32[] constant(0)\n"
        "  pd = f32[8,20] pad(x, z), padding=0_0x2_2\n"
        "  i = s32[] parameter(1)\n"
        "  zi = s32[] constant(0)\n"
        "  dsl = f32[4,16] dynamic-slice(x, i, zi), dynamic_slice_sizes={4,16}\n"
        "  up = f32[4,16] parameter(2)\n"
        "  dus = f32[8,16] dynamic-update-slice(x, up, i, zi)\n"
        "  rw = f32[8,8] reduce-window(x, z), window={size=1x2 stride=1x2}, to_apply=add\n"
        "  srt = f32[8,16] sort(x), dimensions={1}, to_apply=lt\n"
        "  io = s32[8,16] iota(), iota_dimension=1\n"
        "  cv = s32[8,16] convert(x)\n"
        "  sio = s32[8,16] add(io, cv)\n"
        "  tab = f32[100,16] parameter(3)\n"
        "  ids = s32[8] parameter(4), sharding={mesh[a=2,b=2], [{a}]}\n"
        "  emb = f32[8,16] gather(tab, ids), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, "
        "index_vector_dim=1, slice_sizes={1,16}\n"
        "  img = f32[4,8,8,3] parameter(5), sharding={mesh[a=2,b=2], [{a}, {b}, {}, {}]}\n"
        "  k = f32[3,3,3,4] parameter(6)\n"
        "  conv = f32[4,8,8,4] convolution(img, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f\n"
        "  lo = f32[] constant(1)\n"
        "  rn = f32[8,16] rng(z, lo), distribution=rng_uniform\n"
        "  rnx = f32[8,16] add(rn, x)\n"
        "  bc = s32[8,16] bitcast-convert(x)\n"
        "  ROOT t = (f32[8,20], f32[4,16], f32[8,16], f32[8,8], f32[8,16], s32[8,16], f32[8,16], f32[4,8,8,4], "
        "f32[8,16], s32[8,16]) tuple(pd, dsl, dus, rw, srt, sio, emb, conv, rnx, bc)\n"
        "}\n";
    DiagEngine *d = diag_create(NULL);
    HloModule *m = run_text(d, text, NULL, NULL);
    /* pad and dynamic-slice (forward): permutation dims whose tiles divide */
    assert_printed(m, "e", "pd", "{mesh[a=2,b=2], [{a}, {b}]}");
    assert_printed(m, "e", "dsl", "{mesh[a=2,b=2], [{a}, {b}]}");
    /* dynamic-update-slice: operand and result share every factor; the
     * update's full dim 1 takes the result's split (backward from phase 1),
     * its partial dim 0 stays whole */
    assert_printed(m, "e", "dus", "{mesh[a=2,b=2], [{a}, {b}]}");
    assert_printed(m, "e", "up", "{mesh[a=2,b=2], [{}, {b}]}");
    /* reduce-window: the windowed dim halves, b still divides it */
    assert_printed(m, "e", "rw", "{mesh[a=2,b=2], [{a}, {b}]}");
    /* sort along dim 1: that dim stays whole */
    assert_printed(m, "e", "srt", "{mesh[a=2,b=2], [{a}, {}]}");
    /* iota takes its users' split (the partitioner offsets it), convert and
     * bitcast-convert of the same width are elementwise */
    assert_printed(m, "e", "io", "{mesh[a=2,b=2], [{a}, {b}]}");
    assert_printed(m, "e", "cv", "{mesh[a=2,b=2], [{a}, {b}]}");
    assert_printed(m, "e", "bc", "{mesh[a=2,b=2], [{a}, {b}]}");
    /* gather: the indices' batch dim reaches the output; the table's
     * indexed dim stays whole */
    assert_printed(m, "e", "emb", "{mesh[a=2,b=2], [{a}, {}]}");
    assert_printed(m, "e", "tab", "{mesh[a=2,b=2], [{}, {}]}");
    /* convolution: batch (pass-through) and a spatial window dim; the
     * kernel's dims get nothing */
    assert_printed(m, "e", "conv", "{mesh[a=2,b=2], [{a}, {b}, {}, {}]}");
    assert_printed(m, "e", "k", "{mesh[a=2,b=2], [{}, {}, {}, {}]}");
    /* rng takes its user's split */
    assert_printed(m, "e", "rn", "{mesh[a=2,b=2], [{a}, {b}]}");
    hlo_module_free(m);
    diag_destroy(d);
}

/* The issue's reshape: x f32[8,16] [{a,b},{}] on a=2,b=2 -> [2,4,16] is
 * [{a},{b},{}] (a purely local reshape), and the merge back is exact. */
static void test_text_reshape_split_merge(void **state)
{
    (void)state;
    static const char text[] =
        "HloModule rs\n"
        "ENTRY e {\n"
        "  x = f32[8,16] parameter(0), sharding={mesh[a=2,b=2], [{a, b}, {}]}\n"
        "  r = f32[2,4,16] reshape(x)\n"
        "  n = f32[2,4,16] negate(r)\n"
        "  y = f32[2,4,16] parameter(1), sharding={mesh[a=2,b=2], [{b}, {a}, {}]}\n"
        "  ROOT back = f32[8,16] reshape(y)\n"
        "}\n";
    DiagEngine *d = diag_create(NULL);
    HloModule *m = run_text(d, text, NULL, NULL);
    assert_printed(m, "e", "r", "{mesh[a=2,b=2], [{a}, {b}, {}]}");
    assert_printed(m, "e", "n", "{mesh[a=2,b=2], [{a}, {b}, {}]}");
    assert_printed(m, "e", "back", "{mesh[a=2,b=2], [{b, a}, {}]}");
    hlo_module_free(m);
    diag_destroy(d);
}

/* Open and closed dims, explicitly replicated axes, XLA's unspecified_dims:
 * propagation extends an open dim minor to what is written, never a closed
 * one, and never uses a replicated axis on that value. */
static void test_text_open_closed_replicated(void **state)
{
    (void)state;
    static const char text[] =
        "HloModule oc\n"
        "ENTRY e {\n"
        "  w = f32[8,8] parameter(0), sharding={mesh[a=2,b=2], [{b, a}, {}]}\n"
        "  o = f32[8,8] parameter(1), sharding={mesh[a=2,b=2], [{b, ?}, {}]}\n"
        "  c = f32[8,8] parameter(2), sharding={mesh[a=2,b=2], [{b}, {}]}\n"
        "  r = f32[8,8] parameter(3), sharding={mesh[a=2,b=2], [{?}, {?}], replicated={a}}\n"
        "  u = f32[8,8] add(o, w)\n"
        "  v = f32[8,8] add(c, w)\n"
        "  s = f32[8,8] add(r, w)\n"
        "  ROOT t = (f32[8,8], f32[8,8], f32[8,8]) tuple(u, v, s)\n"
        "}\n";
    DiagEngine *d = diag_create(NULL);
    HloModule *m = run_text(d, text, NULL, NULL);
    assert_printed(m, "e", "o", "{mesh[a=2,b=2], [{b, a}, {}]}"); /* open: b extended by a */
    assert_printed(m, "e", "c", "{mesh[a=2,b=2], [{b}, {}]}");    /* closed: as written */
    assert_printed(m, "e", "r", "{mesh[a=2,b=2], [{b}, {}]}");    /* open, but a is replicated on r */
    assert_printed(m, "e", "v", "{mesh[a=2,b=2], [{b, a}, {}]}");
    /* the annotation keeps its attributes, and stays a user annotation */
    int32_t c = m->entry, o = hlo_find_inst(m, c, "o");
    assert_true(hlo_inst(m, c, o)->sharding_from_user);
    assert_int_equal(hlo_inst(m, c, o)->sharding->open_dims, 1);
    hlo_module_free(m);
    diag_destroy(d);
    /* jax's with_sharding_constraint(x, P('x', P.UNCONSTRAINED)) in GSPMD
     * form: dim 1 of the constraint takes a's split through the sine */
    static const char uns[] =
        "HloModule jit_f, num_partitions=8\n"
        "ENTRY main {\n"
        "  a = f32[8,16] parameter(0), sharding={devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}\n"
        "  sn = f32[8,16] sine(a)\n"
        "  sc = f32[8,16] custom-call(sn), custom_call_target=\"Sharding\", sharding={devices=[2,1,4]<=[8] "
        "last_tile_dim_replicate}, backend_config=\"unspecified_dims=[1]\"\n"
        "  ROOT m = f32[8,16] multiply(sc, sc)\n"
        "}\n";
    d = diag_create(NULL);
    m = run_text(d, uns, "x=2,y=4", NULL);
    assert_printed(m, "main", "sc", "{devices=[2,4]<=[8]}");
    assert_printed(m, "main", "m", "{devices=[2,4]<=[8]}");
    assert_printed(m, "main", "sn", "{devices=[2,4]<=[8]}");
    hlo_module_free(m);
    diag_destroy(d);
}

/* A partially manual region (shard_map over model, data automatic), in
 * jax's GSPMD form: the borders' unspecified_dims let data cross them (model
 * never reaches a region value), the region's values propagate on data like
 * any others (a while loop's state too), keep manual={model}, and the user's
 * all-reduce is an identity on data. */
static void test_text_partially_manual(void **state)
{
    (void)state;
    static const char text[] =
        "HloModule pm, num_partitions=8\n"
        "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"
        "cond {\n  p = (s32[], f32[16,16]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n"
        "  n = s32[] constant(3)\n  ROOT lt = pred[] compare(i, n), direction=LT\n}\n"
        "body {\n  p = (s32[], f32[16,16]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n"
        "  v = f32[16,16] get-tuple-element(p), index=1\n  one = s32[] constant(1)\n  i1 = s32[] add(i, one)\n"
        "  e = f32[16,16] exponential(v)\n  ROOT t = (s32[], f32[16,16]) tuple(i1, e)\n}\n"
        "ENTRY main {\n"
        "  x = f32[16,64] parameter(0), sharding={devices=[2,4]<=[8]}\n"
        "  xs = f32[16,64] custom-call(x), custom_call_target=\"Sharding\", sharding={devices=[1,4,2]<=[2,4]T(1,0) "
        "last_tile_dim_replicate}, backend_config=\"unspecified_dims=[0,1]\"\n"
        "  xl = f32[16,16] custom-call(xs), custom_call_target=\"SPMDFullToShardShape\", sharding={devices=[1,1,4,2]"
        "<=[2,4]T(1,0) last_tile_dims={manual, replicated}}, backend_config=\"unspecified_dims=[0,1]\"\n"
        "  ar = f32[16,16] all-reduce(xl), channel_id=1, replica_groups={{0,1,2,3},{4,5,6,7}}, "
        "use_global_device_ids=true, to_apply=add\n"
        "  z = s32[] constant(0)\n"
        "  init = (s32[], f32[16,16]) tuple(z, ar)\n"
        "  w = (s32[], f32[16,16]) while(init), condition=cond, body=body\n"
        "  lv = f32[16,16] get-tuple-element(w), index=1\n"
        "  ys = f32[16,16] custom-call(lv), custom_call_target=\"Sharding\", sharding={devices=[1,1,4,2]<=[2,4]T(1,0) "
        "last_tile_dims={manual, replicated}}, backend_config=\"unspecified_dims=[0,1]\"\n"
        "  y = f32[16,16] custom-call(ys), custom_call_target=\"SPMDShardToFullShape\", sharding={replicated}, "
        "backend_config=\"unspecified_dims=[0,1]\"\n"
        "  ROOT n = f32[16,16] negate(y)\n"
        "}\n";
    DiagEngine *d = diag_create(NULL);
    StrBuf why = {0};
    HloModule *m = run_text(d, text, "data=2,model=4", &why);
    static const char *const inside = "{devices=[2,1,4]<=[8] last_tile_dims={manual}}";
    assert_printed(m, "main", "xs", "{devices=[2,4]<=[8]}");
    assert_printed(m, "main", "xl", inside);
    assert_printed(m, "main", "ar", inside);
    assert_printed(m, "main", "lv", inside);
    assert_printed(m, "body", "e", inside);
    assert_printed(m, "main", "ys", inside);
    /* out of the region: data only, and onwards */
    assert_printed(m, "main", "y", "{devices=[2,1,4]<=[8] last_tile_dim_replicate}");
    assert_printed(m, "main", "n", "{devices=[2,1,4]<=[8] last_tile_dim_replicate}");
    /* the loop state's leaf that holds region values is manual (model=4
     * is atoms 1 and 2); the counter, made from a constant, is not */
    int32_t b = hlo_find_computation(m, "body");
    const Sharding *st = hlo_inst(m, b, hlo_find_inst(m, b, "p"))->sharding;
    assert_int_equal(st->kind, SHARDING_TUPLE);
    assert_int_equal(st->elems[1].manual_atoms, 0x6);
    assert_int_equal(st->elems[0].manual_atoms, 0);
    if (!strstr(sb_cstr(&why), "ar (line 26), all-reduce: [{data}, {}] manual over {model}\n"))
        fail_msg("explanation:\n%s", sb_cstr(&why));
    sb_free(&why);
    hlo_module_free(m);
    diag_destroy(d);
    /* closed borders (no unspecified_dims): nothing crosses them */
    char closed[sizeof text];
    strcpy(closed, text);
    for (char *p = strstr(closed, "unspecified_dims=[0,1]"); p; p = strstr(p, "unspecified_dims=[0,1]"))
        memcpy(p, "unspecified_dims=[]   ", 22);
    d = diag_create(NULL);
    m = run_text(d, closed, "data=2,model=4", NULL);
    assert_printed(m, "main", "xs", "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}");
    assert_printed(m, "main", "ar", "{devices=[1,1,4,2]<=[2,4]T(1,0) last_tile_dims={manual, replicated}}");
    assert_printed(m, "main", "y", "{replicated}");
    hlo_module_free(m);
    diag_destroy(d);
}

/* Priorities: p0 (or none) propagates to the whole module before p1; a
 * dim of a later priority is empty and its axes replicated on its value
 * until its round.  In the named form and in JAX's Shardy export. */
static void test_text_priorities(void **state)
{
    (void)state;
    static const char named[] =
        "HloModule pr\n"
        "ENTRY e {\n"
        "  x = f32[8,8] parameter(0), sharding={mesh[a=2,b=2], [{a}p1, {}]}\n"
        "  y = f32[8,8] parameter(1), sharding={mesh[a=2,b=2], [{}, {a}]}\n"
        "  z = f32[8,8] add(x, y)\n"
        "  p = f32[8,8] parameter(2), sharding={mesh[a=2,b=2], [{b}p2, {}]}\n"
        "  q = f32[8,8] parameter(3), sharding={mesh[a=2,b=2], [{}, {b}p1]}\n"
        "  pq = f32[8,8] add(p, q)\n"
        "  ROOT w = (f32[8,8], f32[8,8]) tuple(z, pq)\n"
        "}\n";
    DiagEngine *d = diag_create(NULL);
    HloModule *m = run_text(d, named, NULL, NULL);
    /* y (p0 by default) splits z's dim 1 on a before x's p1 dim 0 appears;
     * without priorities the two would be a conflict for the cost model */
    assert_printed(m, "e", "z", "{mesh[a=2,b=2], [{}, {a}]}");
    assert_printed(m, "e", "x", "{mesh[a=2,b=2], [{a}, {}]}"); /* annotated: as written */
    /* p1 (q's b on dim 1) before p2 (p's b on dim 0) */
    assert_printed(m, "e", "pq", "{mesh[a=2,b=2], [{}, {b}]}");
    int32_t c = m->entry;
    assert_int_equal(hlo_inst(m, c, hlo_find_inst(m, c, "x"))->sharding->priority[0], 2);
    hlo_module_free(m);
    diag_destroy(d);
    /* the same in a Shardy export: the sdy strings carry the priorities and
     * b's replicated={x} keeps x off it */
    static const char sdy[] =
        "HloModule jit_f, frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<[\"x\"=2, \"y\"=4]>}}\n"
        "ENTRY main {\n"
        "  a = f32[8,16] parameter(0), frontend_attributes={xla.sdy.sharding=\"#sdy.sharding<@mesh, [{}, "
        "{\\\"y\\\"}p1]>\"}\n"
        "  b = f32[8,16] parameter(1), frontend_attributes={xla.sdy.sharding=\"#sdy.sharding<@mesh, "
        "[{\\\"y\\\"}p0, {?}], replicated={\\\"x\\\"}>\"}\n"
        "  sn = f32[8,16] sine(a)\n"
        "  ROOT m = f32[8,16] multiply(sn, b)\n"
        "}\n";
    d = diag_create(NULL);
    m = run_text(d, sdy, NULL, NULL);
    assert_printed(m, "main", "sn", "{mesh[x=2,y=4], [{y}, {}]}");
    assert_printed(m, "main", "m", "{mesh[x=2,y=4], [{y}, {}]}");
    assert_printed(m, "main", "b", "{mesh[x=2,y=4], [{y}, {}]}"); /* open dim 1, but x is replicated on b */
    c = m->entry;
    const Sharding *bs = hlo_inst(m, c, hlo_find_inst(m, c, "b"))->sharding;
    assert_int_equal(bs->priority[0], 1);
    assert_int_equal(bs->open_dims, 2);
    assert_int_equal(bs->replicated_atoms, 1); /* atom 0: x */
    hlo_module_free(m);
    diag_destroy(d);
}

/* A conflict is decided by the bytes each candidate moves, and --explain
 * lists the candidates with their costs.  f32[8,8] = 256 B on x=2,y=4: on
 * y, f1 moves from x to y (2 rows a device to the y shards): 64 B per
 * device; on x, f2 moves from y to x: 128 B; nothing split: 320 B. */
static void test_text_conflict_by_cost(void **state)
{
    (void)state;
    static const char text[] =
        "HloModule cf\n"
        "ENTRY e {\n"
        "  f1 = f32[8,8] parameter(0), sharding={mesh[x=2,y=4], [{x}, {}]}\n"
        "  f2 = f32[8,8] parameter(1), sharding={mesh[x=2,y=4], [{y}, {}]}\n"
        "  ROOT sum = f32[8,8] add(f1, f2)\n"
        "}\n";
    DiagEngine *d = diag_create(NULL);
    StrBuf why = {0};
    HloModule *m = run_text(d, text, NULL, &why);
    assert_printed(m, "e", "sum", "{mesh[x=2,y=4], [{y}, {}]}");
    const char *w = sb_cstr(&why);
    if (!strstr(w, "  conflict: the tensors of add sum disagree; 3 candidates, bytes per device to reshard its "
                   "tensors to each:\n"
                   "    chosen   64 B  f1 [{y}, {}], f2 [{y}, {}] -> sum [{y}, {}]\n"
                   "            128 B  f1 [{x}, {}], f2 [{x}, {}] -> sum [{x}, {}]\n"
                   "            320 B  f1 replicated, f2 replicated -> sum replicated\n"))
        fail_msg("explanation:\n%s", w);
    /* where it came from and the path */
    if (!strstr(w, "sum (line 5), add: [{y}, {}]\n  from the annotation on f2 (line 4)\n"
                   "  path: f2 (line 4) -> sum (add)\n"))
        fail_msg("explanation:\n%s", w);
    sb_free(&why);
    hlo_module_free(m);
    diag_destroy(d);
}

/* The shardings do not depend on the order of independent instructions in
 * the file: the same graph written in two orders gets the same sharding on
 * every value (here with conflicts that first-come order would decide). */
static void test_text_order_independent(void **state)
{
    (void)state;
    static const char *lines[] = {
        "  p = f32[16,16] parameter(0), sharding={mesh[x=2,y=2], [{x}, {}]}\n",
        "  q = f32[16,16] parameter(1), sharding={mesh[x=2,y=2], [{}, {x}]}\n",
        "  r = f32[16,16] parameter(2), sharding={mesh[x=2,y=2], [{y}, {}]}\n",
        "  s = f32[16,16] parameter(3)\n",
        "  a1 = f32[16,16] negate(p)\n",
        "  b1 = f32[16,16] negate(q)\n",
        "  c1 = f32[16,16] negate(r)\n",
        "  m1 = f32[16,16] add(a1, b1)\n",
        "  m2 = f32[16,16] add(b1, c1)\n",
        "  m3 = f32[16,16] multiply(s, m1)\n",
        "  d = f32[16,16] dot(m2, s), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n",
    };
    /* two topological orders of the same graph */
    static const int order_a[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    static const int order_b[] = {3, 2, 6, 1, 5, 8, 10, 0, 4, 7, 9};
    const int *orders[2] = {order_a, order_b};
    HloModule *ms[2];
    DiagEngine *ds[2];
    StrBuf texts[2] = {{0}, {0}};
    for (int o = 0; o < 2; o++) {
        sb_puts(&texts[o], "HloModule ord\nENTRY e {\n");
        for (int k = 0; k < 11; k++) sb_puts(&texts[o], lines[orders[o][k]]);
        sb_puts(&texts[o], "  ROOT t = (f32[16,16], f32[16,16], f32[16,16]) tuple(m3, d, m2)\n}\n");
        ds[o] = diag_create(NULL);
        ms[o] = run_text(ds[o], sb_cstr(&texts[o]), NULL, NULL);
    }
    static const char *names[] = {"s", "a1", "b1", "c1", "m1", "m2", "m3", "d", "t"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        const HloInst *ia = hlo_inst(ms[0], ms[0]->entry, hlo_find_inst(ms[0], ms[0]->entry, names[k]));
        const HloInst *ib = hlo_inst(ms[1], ms[1]->entry, hlo_find_inst(ms[1], ms[1]->entry, names[k]));
        if (!sharding_equal(ia->sharding, ib->sharding)) {
            StrBuf x = {0}, y = {0};
            sharding_describe(&x, ia->sharding, &ms[0]->mesh);
            sharding_describe(&y, ib->sharding, &ms[1]->mesh);
            fail_msg("%s: %s in one order, %s in the other", names[k], sb_cstr(&x), sb_cstr(&y));
        }
    }
    for (int o = 0; o < 2; o++) {
        hlo_module_free(ms[o]);
        diag_destroy(ds[o]);
        sb_free(&texts[o]);
    }
}

/* A tuple of 100,000 leaves: every leaf is one identity edge, the whole
 * module propagates in linear time (an O(leaves^2) pass would take
 * minutes here). */
static void test_wide_tuple(void **state)
{
    (void)state;
    enum { N = 100000 };
    int32_t c;
    HloModule *m = new_module(false, &c);
    int32_t *ps = malloc(sizeof(int32_t) * N);
    Shape *el = malloc(sizeof(Shape) * N);
    char nm[32];
    for (int32_t k = 0; k < N; k++) {
        snprintf(nm, sizeof nm, "p%d", (int)k);
        ps[k] = add(m, c, HLO_PARAMETER, nm, arr(1, 8), 0);
        hlo_inst(m, c, ps[k])->param_number = k;
        el[k] = arr(1, 8);
    }
    Shape ts = shape_scalar(ET_TUPLE);
    ts.n_elems = N;
    ts.elems = el;
    Shape tsc = hlo_copy_shape(m, &ts);
    int32_t t = hlo_add_inst(m, c, HLO_TUPLE, "t", &tsc, ps, N);
    int32_t ob = hlo_add_inst(m, c, HLO_OPTIMIZATION_BARRIER, "ob", &tsc, &t, 1);
    int32_t last = -1;
    for (int32_t k = 0; k < N; k++) {
        snprintf(nm, sizeof nm, "g%d", (int)k);
        Shape s = arr(1, 8);
        int32_t g = hlo_add_inst(m, c, HLO_GET_TUPLE_ELEMENT, nm, &s, &ob, 1);
        hlo_attrs_mut(m, hlo_inst(m, c, g))->index = k;
        if (k % 1000 == 0) {
            snprintf(nm, sizeof nm, "n%d", (int)k);
            last = add(m, c, HLO_NEGATE, nm, arr(1, 8), 1, g);
            annotate(m, c, last, (k / 1000) % 2 ? "{0}" : "{1,2}");
        }
    }
    run(m);
    check_all_set(m);
    check(m, c, ps[0], "{1,2}");   /* back through gte, opt-barrier and tuple */
    check(m, c, ps[1000], "{0}");
    check(m, c, ps[1], "R");
    check_leaf(m, c, t, 2000, "{1,2}");
    check_leaf(m, c, ob, 99000, "{0}");
    free(ps);
    free(el);
    hlo_module_free(m);
}

static void test_text_megatron_positional(void **state)
{
    (void)state;
    static const char text[] =
        "HloModule megatron, num_partitions=8\n"
        "ENTRY main {\n"
        "  x = bf16[8192,8192] parameter(0), sharding={replicated}\n"
        "  a = bf16[8192,8192] parameter(1), sharding={devices=[1,8]<=[8]}\n"
        "  b = bf16[8192,8192] parameter(2), sharding={devices=[8,1]<=[8]}\n"
        "  h = bf16[8192,8192] dot(x, a), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
        "  g = bf16[8192,8192] tanh(h)\n"
        "  ROOT y = bf16[8192,8192] dot(g, b), lhs_contracting_dims={1}, rhs_contracting_dims={0},"
        " sharding={replicated}\n"
        "}\n";
    DiagEngine *d = diag_create(NULL);
    HloModule *m = propagate_text(d, text);
    assert_printed(m, "main", "h", "{devices=[1,8]<=[8]}");
    assert_printed(m, "main", "g", "{devices=[1,8]<=[8]}");
    assert_printed(m, "main", "y", "{replicated}");
    assert_printed(m, "main", "x", "{replicated}");
    hlo_module_free(m);
    diag_destroy(d);
}

static void test_text_named_2d(void **state)
{
    (void)state;
    static const char text[] =
        "HloModule mlp2d\n"
        "sum {\n"
        "  a = f32[] parameter(0)\n"
        "  b = f32[] parameter(1)\n"
        "  ROOT s = f32[] add(a, b)\n"
        "}\n"
        "ENTRY main {\n"
        "  x = f32[32,64] parameter(0), sharding={mesh[x=2,y=4], [{x}, {}]}\n"
        "  w = f32[64,128] parameter(1), sharding={mesh[x=2,y=4], [{}, {y}]}\n"
        "  v = f32[128] parameter(2)\n"
        "  d = f32[32,128] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
        "  bv = f32[32,128] broadcast(v), dimensions={1}\n"
        "  s = f32[32,128] add(d, bv)\n"
        "  r = f32[32,8,16] reshape(s)\n"
        "  c = f32[32,8,16] custom-call(r), custom_call_target=\"Sharding\","
        " sharding={mesh[x=2,y=4], [{x}, {\"y\":(1)2}, {}]}\n"
        "  n = f32[32,8,16] negate(c)\n"
        "  z = f32[] constant(0)\n"
        "  ROOT red = f32[32,8] reduce(n, z), dimensions={2}, to_apply=sum\n"
        "}\n";
    DiagEngine *d = diag_create(NULL);
    HloModule *m = propagate_text(d, text);
    assert_printed(m, "main", "d", "{mesh[x=2,y=4], [{x}, {y}]}");
    assert_printed(m, "main", "v", "{mesh[x=2,y=4], [{y}]}"); /* broadcast backward */
    assert_printed(m, "main", "bv", "{mesh[x=2,y=4], [{x}, {y}]}");
    assert_printed(m, "main", "r", "{mesh[x=2,y=4], [{x}, {y}, {}]}"); /* 128 = 8x16: y stays on the 8 */
    assert_printed(m, "main", "n", "{mesh[x=2,y=4], [{x}, {y:(1)2}, {}]}");
    assert_printed(m, "main", "red", "{mesh[x=2,y=4], [{x}, {y:(1)2}]}");
    assert_printed(m, "sum", "s", "{mesh[x=2,y=4], replicated}");
    hlo_module_free(m);
    diag_destroy(d);
}

static void test_text_tuple_and_unknown(void **state)
{
    (void)state;
    static const char text[] =
        "HloModule t, num_partitions=4\n"
        "ENTRY main {\n"
        "  p = (f32[8,4], f32[8]) parameter(0), sharding={{devices=[4,1]<=[4]}, {replicated}}\n"
        "  a = f32[8,4] get-tuple-element(p), index=0\n"
        "  b = f32[8] get-tuple-element(p), index=1\n"
        "  n = f32[8,4] negate(a)\n"
        "  nb = f32[8] negate(b), sharding={unknown}\n"
        "  t = (f32[8,4], f32[8]) tuple(n, nb)\n"
        "  ROOT r = f32[4,8] transpose(n), dimensions={1,0}\n"
        "}\n";
    DiagEngine *d = diag_create(NULL);
    HloModule *m = propagate_text(d, text);
    assert_printed(m, "main", "a", "{devices=[4,1]<=[4]}");
    assert_printed(m, "main", "n", "{devices=[4,1]<=[4]}");
    assert_printed(m, "main", "nb", "{replicated}");
    assert_printed(m, "main", "t", "{{devices=[4,1]<=[4]}, {replicated}}");
    assert_printed(m, "main", "r", "{devices=[1,4]<=[4]}");
    hlo_module_free(m);
    diag_destroy(d);
}

/* ================================================================ determinism, scale */

static HloModule *build_mixed(int32_t *c)
{
    HloModule *m = new_module(true, c);
    int32_t x = add(m, *c, HLO_PARAMETER, "x", arr(2, 32, 64), 0);
    int32_t w = add(m, *c, HLO_PARAMETER, "w", arr(2, 64, 128), 0);
    int one = 1, zero = 0;
    int32_t d = add_dot(m, *c, "d", arr(2, 32, 128), x, w, 0, NULL, NULL, 1, &one, &zero);
    int32_t v = add(m, *c, HLO_PARAMETER, "v", arr(1, 128), 0);
    int32_t b = add(m, *c, HLO_BROADCAST, "b", arr(2, 32, 128), 1, v);
    hlo_attrs_mut(m, hlo_inst(m, *c, b))->dimensions = ints(m, 1, 1);
    int32_t s = add(m, *c, HLO_ADD, "s", arr(2, 32, 128), 2, d, b);
    int32_t r = add(m, *c, HLO_RESHAPE, "r", arr(3, 32, 8, 16), 1, s);
    int32_t z = add(m, *c, HLO_CONSTANT, "z", arr(0), 0);
    int32_t red = add(m, *c, HLO_REDUCE, "red", arr(2, 32, 8), 2, r, z);
    hlo_attrs_mut(m, hlo_inst(m, *c, red))->dimensions = ints(m, 1, 2);
    annotate(m, *c, x, "{0}{}");
    annotate(m, *c, w, "{}{2,1}");
    return m;
}

static void test_deterministic(void **state)
{
    (void)state;
    int32_t c1, c2;
    HloModule *m1 = build_mixed(&c1);
    HloModule *m2 = build_mixed(&c2);
    run(m1);
    run(m2);
    run(m2); /* a second run changes nothing either */
    for (int32_t i = 0; i < m1->comps[c1].n_insts; i++) {
        const Sharding *a = hlo_inst(m1, c1, i)->sharding, *b = hlo_inst(m2, c2, i)->sharding;
        assert_true(sharding_equal(a, b));
        assert_int_equal(a->kind, b->kind);
    }
    check(m1, c1, hlo_find_inst(m1, c1, "s"), "{0}{2,1}");
    check(m1, c1, hlo_find_inst(m1, c1, "v"), "{2,1}");
    check(m1, c1, hlo_find_inst(m1, c1, "r"), "{0}{2,1}{}");
    check(m1, c1, hlo_find_inst(m1, c1, "red"), "{0}{2,1}");
    hlo_module_free(m1);
    hlo_module_free(m2);
}

/* ================================================================ provenance */

/* Dim d's origin as the partitioner reads it: the per-dim table, or the
 * instruction's origin when there is none. */
static int32_t dim_origin(const HloModule *m, int32_t c, int32_t i, int32_t d)
{
    const HloInst *in = hlo_inst(m, c, i);
    return in->sharding_dim_origin ? in->sharding_dim_origin[d] : in->sharding_origin;
}

/* An annotation is its own origin; a value two hops away (a -> n -> e)
 * gets a's index, forward and backward; a value nothing reaches, and one
 * next to an annotation that is replicated (which does not spread), keep
 * -1. */
static void test_origin_two_hops_and_unreached(void **state)
{
    (void)state;
    int32_t c;
    HloModule *m = new_module(false, &c);
    int32_t q = add(m, c, HLO_PARAMETER, "q", arr(1, 8), 0);
    int32_t b = add(m, c, HLO_NEGATE, "b", arr(1, 8), 1, q);    /* backward: two hops before a */
    int32_t a = add(m, c, HLO_NEGATE, "a", arr(1, 8), 1, b);
    int32_t n = add(m, c, HLO_NEGATE, "n", arr(1, 8), 1, a);
    int32_t e = add(m, c, HLO_EXP, "e", arr(1, 8), 1, n);       /* forward: two hops after a */
    int32_t lone = add(m, c, HLO_PARAMETER, "lone", arr(1, 8), 0);
    int32_t r = add(m, c, HLO_PARAMETER, "r", arr(1, 8), 0);
    int32_t rn = add(m, c, HLO_NEGATE, "rn", arr(1, 8), 1, r);
    annotate(m, c, a, "{0,1}");
    annotate(m, c, r, "R");
    /* before propagation every instruction has no origin */
    for (int32_t i = 0; i < m->comps[c].n_insts; i++) assert_int_equal(hlo_inst(m, c, i)->sharding_origin, -1);
    run(m);
    check(m, c, e, "{0,1}");
    check(m, c, q, "{0,1}");
    assert_int_equal(hlo_inst(m, c, a)->sharding_origin, a);
    assert_int_equal(hlo_inst(m, c, n)->sharding_origin, a);
    assert_int_equal(hlo_inst(m, c, e)->sharding_origin, a);
    assert_int_equal(hlo_inst(m, c, b)->sharding_origin, a);
    assert_int_equal(hlo_inst(m, c, q)->sharding_origin, a);
    assert_null(hlo_inst(m, c, e)->sharding_dim_origin); /* its one split dim came from a */
    check(m, c, lone, "R");
    assert_int_equal(hlo_inst(m, c, lone)->sharding_origin, -1);
    assert_int_equal(hlo_inst(m, c, r)->sharding_origin, r); /* annotated replicated: its own origin */
    check(m, c, rn, "R");
    assert_int_equal(hlo_inst(m, c, rn)->sharding_origin, -1);
    hlo_module_free(m);
}

/* Dims split by different annotations are traced apart, through a dot, a
 * reshape and a transpose (x=2,y=4: x = atom 0, y = atoms 1,2).  d gets
 * both dims in one step; its origin is the annotation of its first split
 * dim (in), dim 1's is w. */
static void test_origin_per_dim(void **state)
{
    (void)state;
    int32_t c;
    HloModule *m = new_module(true, &c);
    int32_t in = add(m, c, HLO_PARAMETER, "in", arr(2, 32, 64), 0);
    int32_t w = add(m, c, HLO_PARAMETER, "w", arr(2, 64, 128), 0);
    int one = 1, zero = 0;
    int32_t d = add_dot(m, c, "d", arr(2, 32, 128), in, w, 0, NULL, NULL, 1, &one, &zero);
    int32_t r = add(m, c, HLO_RESHAPE, "r", arr(3, 32, 4, 32), 1, d);
    int32_t t = add(m, c, HLO_TRANSPOSE, "t", arr(3, 4, 32, 32), 1, r);
    hlo_attrs_mut(m, hlo_inst(m, c, t))->dimensions = ints(m, 3, 1, 0, 2);
    annotate(m, c, in, "{0}{}");
    annotate(m, c, w, "{}{1,2}");
    run(m);
    check(m, c, d, "{0}{1,2}");
    assert_int_equal(hlo_inst(m, c, d)->sharding_origin, in);
    assert_non_null(hlo_inst(m, c, d)->sharding_dim_origin);
    assert_int_equal(dim_origin(m, c, d, 0), in);
    assert_int_equal(dim_origin(m, c, d, 1), w);
    check(m, c, r, "{0}{1,2}{}");
    assert_int_equal(dim_origin(m, c, r, 0), in);
    assert_int_equal(dim_origin(m, c, r, 1), w);
    assert_int_equal(dim_origin(m, c, r, 2), -1); /* unsplit */
    check(m, c, t, "{1,2}{0}{}");
    assert_int_equal(dim_origin(m, c, t, 0), w);
    assert_int_equal(dim_origin(m, c, t, 1), in);
    /* the annotations themselves: their own origin, no per-dim table */
    assert_int_equal(hlo_inst(m, c, in)->sharding_origin, in);
    assert_null(hlo_inst(m, c, in)->sharding_dim_origin);
    hlo_module_free(m);
}

/* Two annotations meet on one dim: u = add(p, q) takes the longer run
 * {0,1} ({0} is its major part); the tensor that gave the whole run, q, is
 * u's origin and dim 0's.  Later, v has one source, u, and inherits that. */
static void test_origin_first_source_kept(void **state)
{
    (void)state;
    int32_t c;
    HloModule *m = new_module(false, &c);
    int32_t p = add(m, c, HLO_PARAMETER, "p", arr(2, 8, 8), 0);
    int32_t q = add(m, c, HLO_PARAMETER, "q", arr(2, 8, 8), 0);
    int32_t u = add(m, c, HLO_ADD, "u", arr(2, 8, 8), 2, p, q);
    int32_t v = add(m, c, HLO_NEGATE, "v", arr(2, 8, 8), 1, u);
    annotate(m, c, p, "{0}{}");
    annotate(m, c, q, "{0,1}{}");
    run(m);
    check(m, c, u, "{0,1}{}");
    assert_int_equal(hlo_inst(m, c, u)->sharding_origin, q);
    assert_int_equal(dim_origin(m, c, u, 0), q);
    check(m, c, v, "{0,1}{}");
    assert_int_equal(hlo_inst(m, c, v)->sharding_origin, q);
    hlo_module_free(m);
}

/* Origins are deterministic, and a second propagation (seeded by the
 * first one's shardings) keeps them, per dim too. */
static void test_origin_second_run_keeps(void **state)
{
    (void)state;
    int32_t c;
    HloModule *m = new_module(true, &c);
    int32_t in = add(m, c, HLO_PARAMETER, "in", arr(2, 32, 64), 0);
    int32_t w = add(m, c, HLO_PARAMETER, "w", arr(2, 64, 128), 0);
    int one = 1, zero = 0;
    int32_t d = add_dot(m, c, "d", arr(2, 32, 128), in, w, 0, NULL, NULL, 1, &one, &zero);
    int32_t g = add(m, c, HLO_TANH, "g", arr(2, 32, 128), 1, d);
    annotate(m, c, in, "{0}{}");
    annotate(m, c, w, "{}{1,2}");
    run(m);
    run(m);
    check(m, c, g, "{0}{1,2}");
    assert_int_equal(hlo_inst(m, c, g)->sharding_origin, in);
    assert_int_equal(dim_origin(m, c, g, 0), in);
    assert_int_equal(dim_origin(m, c, g, 1), w);
    assert_int_equal(hlo_inst(m, c, d)->sharding_origin, in);
    hlo_module_free(m);
}

/* From text, as the driver runs it: the Megatron MLP's h gets a's split. */
static void test_origin_text_megatron(void **state)
{
    (void)state;
    static const char text[] =
        "HloModule megatron, num_partitions=8\n"
        "ENTRY main {\n"
        "  x = bf16[64,64] parameter(0), sharding={replicated}\n"
        "  a = bf16[64,64] parameter(1), sharding={devices=[1,8]<=[8]}\n"
        "  b = bf16[64,64] parameter(2), sharding={devices=[8,1]<=[8]}\n"
        "  h = bf16[64,64] dot(x, a), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
        "  ROOT y = bf16[64,64] dot(h, b), lhs_contracting_dims={1}, rhs_contracting_dims={0},"
        " sharding={replicated}\n"
        "}\n";
    DiagEngine *dg = diag_create(NULL);
    HloModule *m = propagate_text(dg, text);
    int32_t c = m->entry;
    assert_int_equal(hlo_inst(m, c, hlo_find_inst(m, c, "h"))->sharding_origin, hlo_find_inst(m, c, "a"));
    assert_int_equal(hlo_inst(m, c, hlo_find_inst(m, c, "y"))->sharding_origin, hlo_find_inst(m, c, "y"));
    assert_int_equal(hlo_inst(m, c, hlo_find_inst(m, c, "b"))->sharding_origin, hlo_find_inst(m, c, "b"));
    hlo_module_free(m);
    diag_destroy(dg);
}

static double now_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* 1M-instruction elementwise chain.  Timed; nothing asserted about time. */
static void test_million_instruction_chain(void **state)
{
    (void)state;
    enum { N = 1000000 };
    int32_t c;
    HloModule *m = new_module(false, &c);
    Shape s = arr(2, 8, 128);
    int32_t prev = add(m, c, HLO_PARAMETER, "p", s, 0);
    annotate(m, c, prev, "{}{0,1,2}");
    char nm[24];
    for (int32_t i = 1; i < N; i++) {
        snprintf(nm, sizeof nm, "n%d", (int)i);
        prev = hlo_add_inst(m, c, i % 2 ? HLO_NEGATE : HLO_EXP, nm, &s, &prev, 1);
    }
    double t0 = now_sec();
    run(m);
    double t1 = now_sec();
    printf("propagate: %d-instruction chain in %.3f s\n", N, t1 - t0);
    check(m, c, prev, "{}{0,1,2}");
    check(m, c, N / 2, "{}{0,1,2}");
    assert_int_equal(hlo_inst(m, c, prev)->sharding_origin, 0); /* the annotated parameter, 999,999 hops away */
    hlo_module_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rule_table_covers_every_opcode),
        cmocka_unit_test(test_nothing_annotated_is_replicated),
        cmocka_unit_test(test_no_mesh_gives_replicated),
        cmocka_unit_test(test_elementwise_forward),
        cmocka_unit_test(test_elementwise_backward),
        cmocka_unit_test(test_select_clamp_compare),
        cmocka_unit_test(test_broadcast_forward),
        cmocka_unit_test(test_broadcast_backward),
        cmocka_unit_test(test_broadcast_degenerate_dim),
        cmocka_unit_test(test_transpose_forward_backward),
        cmocka_unit_test(test_reshape_split),
        cmocka_unit_test(test_reshape_merge_and_fail),
        cmocka_unit_test(test_reshape_size1_dims_and_backward),
        cmocka_unit_test(test_reduce_forward_backward),
        cmocka_unit_test(test_variadic_reduce),
        cmocka_unit_test(test_dot_forward_batch_and_free),
        cmocka_unit_test(test_dot_contracting_both_gives_nothing),
        cmocka_unit_test(test_dot_backward_from_output),
        cmocka_unit_test(test_dot_contracting_from_other_operand),
        cmocka_unit_test(test_dot_larger_operand_first),
        cmocka_unit_test(test_megatron_mlp),
        cmocka_unit_test(test_tuple_and_gte),
        cmocka_unit_test(test_leaves_take_from_users),
        cmocka_unit_test(test_opt_barrier_and_bitcast_convert),
        cmocka_unit_test(test_malformed_attrs_pass_nothing),
        cmocka_unit_test(test_while_ties),
        cmocka_unit_test(test_conditional_ties),
        cmocka_unit_test(test_sharding_custom_call_and_copy),
        cmocka_unit_test(test_opaque_default),
        cmocka_unit_test(test_collectives_pass_automatic_axes),
        cmocka_unit_test(test_permutation_factors),
        cmocka_unit_test(test_user_annotations_not_overwritten),
        cmocka_unit_test(test_partial_kept_not_propagated),
        cmocka_unit_test(test_manual_and_maximal),
        cmocka_unit_test(test_merge_compatible_and_conflicts),
        cmocka_unit_test(test_fixed_point_needs_several_sweeps),
        cmocka_unit_test(test_zigzag_reaches_the_end),
        cmocka_unit_test(test_broadcast_comes_last),
        cmocka_unit_test(test_passthrough_before_dot),
        cmocka_unit_test(test_mesh_2d),
        cmocka_unit_test(test_non_entry_computation),
        cmocka_unit_test(test_named_form_follows_input),
        cmocka_unit_test(test_text_megatron_positional),
        cmocka_unit_test(test_text_op_families),
        cmocka_unit_test(test_text_reshape_split_merge),
        cmocka_unit_test(test_text_open_closed_replicated),
        cmocka_unit_test(test_text_partially_manual),
        cmocka_unit_test(test_text_priorities),
        cmocka_unit_test(test_text_conflict_by_cost),
        cmocka_unit_test(test_text_order_independent),
        cmocka_unit_test(test_wide_tuple),
        cmocka_unit_test(test_text_named_2d),
        cmocka_unit_test(test_text_tuple_and_unknown),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_origin_two_hops_and_unreached),
        cmocka_unit_test(test_origin_per_dim),
        cmocka_unit_test(test_origin_first_source_kept),
        cmocka_unit_test(test_origin_second_run_keeps),
        cmocka_unit_test(test_origin_text_megatron),
        cmocka_unit_test(test_million_instruction_chain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
