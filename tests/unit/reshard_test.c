/* reshard_test.c - the reshard catalogue (src/reshard.c): plans, bytes, and
 * the index math of the emitted programs.
 *
 * Two kinds of tests:
 *  - planner tests: reshard_plan on states over a mesh, asserting the exact
 *    steps and per-device bytes (worked out by hand beside each assertion);
 *  - lowering tests: a module `p = parameter, sharding=S1; ROOT s =
 *    custom-call(p) "Sharding", sharding=S2` (or a partial source made by a
 *    reduce over a split dim) is partitioned and the per-device program is
 *    run by a small evaluator written here (int64 elements; partition-id,
 *    constant, dynamic-slice, reshape, transpose, copy, add, reduce and the
 *    four collectives with their group semantics), independent of the
 *    project's simulator.  Every device's result must equal its slice of the
 *    unpartitioned result.  Run exhaustively over all pairs of states of a
 *    small 2-D array on meshes x=2,y=4 and x=2,y=2,z=2.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "partition_internal.h"
#include "spmdc/hlo.h"
#include "spmdc/mesh.h"
#include "spmdc/partition.h"
#include "spmdc/report.h"
#include "spmdc/sharding.h"
#include "spmdc/sim.h"

/* ================================================================ helpers */

static Mesh mk_mesh(const char *spec)
{
    Mesh m;
    char err[200];
    assert_true(mesh_parse_spec(spec, &m, err, sizeof err));
    return m;
}

/* A Tiling from a compact text: dims separated by '|', atoms as digits, then
 * optional "+p" and partial atoms: "0|12" = dim 0 over atom 0, dim 1 over
 * atoms 1,2; "|+p01" = replicated, partial sum over atoms 0,1. */
static Tiling sp(const char *t)
{
    Tiling s;
    tiling_replicated(&s, 0);
    int32_t rank = 1;
    for (const char *c = t; *c && *c != '+'; c++)
        rank += *c == '|';
    s.rank = (int8_t)rank;
    int32_t d = 0;
    const char *c = t;
    int8_t run[SPMDC_MAX_ATOMS];
    int32_t n = 0;
    for (;; c++) {
        if (*c == '|' || *c == '\0' || *c == '+') {
            tiling_set_dim(&s, d++, run, n);
            n = 0;
            if (*c != '|')
                break;
        } else {
            run[n++] = (int8_t)(*c - '0');
        }
    }
    if (*c == '+') {
        for (c += 2; *c; c++)
            s.partial |= 1u << (*c - '0');
        s.kind = REDUCE_SUM;
    }
    return s;
}

static Shape shp(ElemType t, int32_t rank, int64_t d0, int64_t d1, int64_t d2)
{
    int64_t d[3] = {d0, d1, d2};
    return shape_array(t, rank, d);
}

/* Text of a state (rotating static buffers: for failure messages). */
static const char *spec_str(const Mesh *m, const Tiling *s)
{
    static char bufs[4][256];
    static int k;
    StrBuf b = {0};
    tiling_describe(&b, s, m);
    char *r = bufs[k++ % 4];
    snprintf(r, 256, "%s", sb_cstr(&b));
    sb_free(&b);
    return r;
}

/* ================================================================ planner */

static void test_plan_same_is_empty(void **state)
{
    (void)state;
    Mesh m = mk_mesh("model=8");
    Shape s = shp(ET_BF16, 2, 8192, 8192, 0);
    ReshardPlan plan;
    Tiling a = sp("012|");
    assert_true(reshard_plan(&m, &s, &a, &a, &plan));
    assert_int_equal(plan.n_steps, 0);
    assert_int_equal(plan.bytes, 0);
}

static void test_plan_replicated_to_split_is_local(void **state)
{
    (void)state;
    Mesh m = mk_mesh("model=8");
    Shape s = shp(ET_BF16, 2, 8192, 8192, 0);
    ReshardPlan plan;
    Tiling from = sp("|"), to = sp("012|");
    assert_true(reshard_plan(&m, &s, &from, &to, &plan));
    assert_int_equal(plan.n_steps, 1);
    assert_int_equal(plan.steps[0].kind, STEP_SLICE);
    assert_int_equal(plan.bytes, 0); /* a local dynamic-slice sends nothing */
}

static void test_plan_split_to_replicated_all_gather(void **state)
{
    (void)state;
    Mesh m = mk_mesh("model=8");
    Shape s = shp(ET_BF16, 2, 8192, 8192, 0);
    ReshardPlan plan;
    Tiling from = sp("012|"), to = sp("|");
    assert_true(reshard_plan(&m, &s, &from, &to, &plan));
    assert_int_equal(plan.n_steps, 1);
    assert_int_equal(plan.steps[0].kind, STEP_ALL_GATHER);
    assert_int_equal(plan.steps[0].dim, 0);
    assert_int_equal(plan.steps[0].n_atoms, 3);
    /* result per device 8192*8192*2 = 134,217,728 B; 7/8 of it = 117,440,512 */
    assert_int_equal(plan.bytes, 117440512);
    assert_false(plan.full_remat); /* the target is replicated: a plain gather */
}

static void test_plan_dim_swap_all_to_all(void **state)
{
    (void)state;
    Mesh m = mk_mesh("model=8");
    Shape s = shp(ET_BF16, 2, 8192, 8192, 0);
    ReshardPlan plan;
    Tiling from = sp("012|"), to = sp("|012");
    assert_true(reshard_plan(&m, &s, &from, &to, &plan));
    assert_int_equal(plan.n_steps, 1);
    assert_int_equal(plan.steps[0].kind, STEP_ALL_TO_ALL);
    assert_int_equal(plan.steps[0].dim, 0);
    assert_int_equal(plan.steps[0].dim2, 1);
    /* local bf16[1024,8192] = 16,777,216 B; all-to-all sends 7/8: 14,680,064 */
    assert_int_equal(plan.bytes, 14680064);
}

static void test_plan_partial_all_reduce(void **state)
{
    (void)state;
    Mesh m = mk_mesh("model=8");
    Shape s = shp(ET_BF16, 2, 8192, 8192, 0);
    ReshardPlan plan;
    Tiling from = sp("|+p012"), to = sp("|");
    assert_true(reshard_plan(&m, &s, &from, &to, &plan));
    assert_int_equal(plan.n_steps, 1);
    assert_int_equal(plan.steps[0].kind, STEP_ALL_REDUCE);
    /* 2*7/8 * 134,217,728 = 234,881,024 (docs/report.md's worked example) */
    assert_int_equal(plan.bytes, 234881024);
}

static void test_plan_partial_reduce_scatter(void **state)
{
    (void)state;
    Mesh m = mk_mesh("model=8");
    Shape s = shp(ET_BF16, 2, 8192, 8192, 0);
    ReshardPlan plan;
    Tiling from = sp("|+p012"), to = sp("012|");
    assert_true(reshard_plan(&m, &s, &from, &to, &plan));
    assert_int_equal(plan.n_steps, 1);
    assert_int_equal(plan.steps[0].kind, STEP_REDUCE_SCATTER);
    assert_int_equal(plan.steps[0].dim, 0);
    /* 7/8 * 134,217,728 = 117,440,512: half the all-reduce */
    assert_int_equal(plan.bytes, 117440512);
}

static void test_plan_partial_2d_scatter_then_reduce(void **state)
{
    (void)state;
    /* x=2,y=4: atoms x0=0, y0=1, y1=2.  Partial over all three, target dim 0
     * split over y: reduce-scatter over y (n=4) then all-reduce over x. */
    Mesh m = mk_mesh("x=2,y=4");
    Shape s = shp(ET_F32, 2, 64, 64, 0);
    ReshardPlan plan;
    Tiling from = sp("|+p012"), to = sp("12|");
    assert_true(reshard_plan(&m, &s, &from, &to, &plan));
    assert_int_equal(plan.n_steps, 2);
    assert_int_equal(plan.steps[0].kind, STEP_REDUCE_SCATTER);
    assert_int_equal(plan.steps[0].n_atoms, 2);
    /* f32[64,64] = 16,384 B; reduce-scatter n=4: 3/4 * 16,384 = 12,288 */
    assert_int_equal(plan.steps[0].bytes, 12288);
    assert_int_equal(plan.steps[1].kind, STEP_ALL_REDUCE);
    assert_int_equal(plan.steps[1].n_atoms, 1);
    /* then f32[16,64] = 4,096 B all-reduced over x (n=2): 2*1/2*4,096 = 4,096 */
    assert_int_equal(plan.steps[1].bytes, 4096);
    assert_int_equal(plan.bytes, 16384);
}

static void test_plan_slice_before_reduce(void **state)
{
    (void)state;
    /* Partial over x, target split over y on dim 1 and reduced: the local
     * slice comes first so the all-reduce moves a quarter of the data. */
    Mesh m = mk_mesh("x=2,y=4");
    Shape s = shp(ET_F32, 2, 64, 64, 0);
    ReshardPlan plan;
    Tiling from = sp("|+p0"), to = sp("|12");
    assert_true(reshard_plan(&m, &s, &from, &to, &plan));
    assert_int_equal(plan.n_steps, 2);
    assert_int_equal(plan.steps[0].kind, STEP_SLICE);
    assert_int_equal(plan.steps[1].kind, STEP_ALL_REDUCE);
    /* f32[64,16] = 4,096 B, n=2: 2*1/2*4,096 = 4,096 */
    assert_int_equal(plan.bytes, 4096);
}

static void test_plan_general_path_full_remat(void **state)
{
    (void)state;
    /* dim 0 over x, partial over y0 -> dim 0 over y0: y0 cannot be
     * reduce-scattered onto dim 0 behind x, so the partial is all-reduced
     * (local f32[32,64] = 8,192 B, n=2: 8,192 B), x is gathered away (result
     * f32[64,64] = 16,384 B, n=2: 8,192 B) and y0 sliced in: the whole tensor
     * was gathered, a full rematerialization. */
    Mesh m = mk_mesh("x=2,y=4");
    Shape s = shp(ET_F32, 2, 64, 64, 0);
    ReshardPlan plan;
    Tiling from = sp("0|+p1"), to = sp("1|");
    assert_true(reshard_plan(&m, &s, &from, &to, &plan));
    assert_int_equal(plan.n_steps, 3);
    assert_int_equal(plan.steps[0].kind, STEP_ALL_REDUCE);
    assert_int_equal(plan.steps[1].kind, STEP_ALL_GATHER);
    assert_int_equal(plan.steps[2].kind, STEP_SLICE);
    assert_true(plan.full_remat);
    assert_int_equal(plan.bytes, 16384);
}

static void test_plan_permute_then_gather(void **state)
{
    (void)state;
    /* dim 0 over (x, y) -> dim 0 over y: permute to (y, x) (local f32[8,64]
     * = 2,048 B moves once), then gather x off (result f32[16,64] = 4,096 B,
     * n=2: 2,048 B): 4,096 B instead of gathering everything (7/8 of
     * 16,384 = 14,336 B) and slicing. */
    Mesh m = mk_mesh("x=2,y=4");
    Shape s = shp(ET_F32, 2, 64, 64, 0);
    ReshardPlan plan;
    Tiling from = sp("012|"), to = sp("12|");
    assert_true(reshard_plan(&m, &s, &from, &to, &plan));
    assert_int_equal(plan.n_steps, 2);
    assert_int_equal(plan.steps[0].kind, STEP_COLLECTIVE_PERMUTE);
    assert_int_equal(plan.steps[0].bytes, 2048);
    assert_int_equal(plan.steps[1].kind, STEP_ALL_GATHER);
    assert_int_equal(plan.steps[1].bytes, 2048);
    assert_false(plan.full_remat);
    /* dim 0 over x (2 tiles) -> dim 0 over y (4 tiles): slice y0 in locally
     * (f32[16,64] = 4,096 B left), permute: 4,096 B (a gather of x would send
     * 8,192 B) */
    Tiling f2 = sp("0|"), t2 = sp("12|");
    assert_true(reshard_plan(&m, &s, &f2, &t2, &plan));
    assert_int_equal(plan.n_steps, 2);
    assert_int_equal(plan.steps[0].kind, STEP_SLICE);
    assert_int_equal(plan.steps[1].kind, STEP_COLLECTIVE_PERMUTE);
    assert_int_equal(plan.bytes, 4096);
}

static void test_plan_partial_gather_then_all_to_all(void **state)
{
    (void)state;
    /* dim 0 over (x, y0) -> dim 1 over x: gather only y0 on dim 0, then move
     * x to dim 1 by all-to-all (cheaper than gathering everything). */
    Mesh m = mk_mesh("x=2,y=4");
    Shape s = shp(ET_F32, 2, 64, 64, 0);
    ReshardPlan plan;
    Tiling from = sp("01|"), to = sp("|0");
    assert_true(reshard_plan(&m, &s, &from, &to, &plan));
    assert_int_equal(plan.n_steps, 2);
    assert_int_equal(plan.steps[0].kind, STEP_ALL_GATHER);
    assert_int_equal(plan.steps[0].n_atoms, 1);
    assert_int_equal(plan.steps[0].atoms[0], 1);
    /* f32[16,64] -> f32[32,64] = 8,192 B, n=2: 4,096 */
    assert_int_equal(plan.steps[0].bytes, 4096);
    assert_int_equal(plan.steps[1].kind, STEP_ALL_TO_ALL);
    /* all-to-all of f32[32,64] = 8,192 B over x (n=2): 4,096 */
    assert_int_equal(plan.steps[1].bytes, 4096);
    assert_false(plan.full_remat);
}

static void test_plan_reorder_collective_permute(void **state)
{
    (void)state;
    /* dim 0 over (x, y) -> dim 0 over (y, x): same 8 tiles, another device
     * order.  One collective-permute of the local s32[1,8] (32 B) instead of
     * gathering all of it (7/8 * 256 = 224 B) and slicing. */
    Mesh m = mk_mesh("x=2,y=4");
    Shape s = shp(ET_S32, 2, 8, 8, 0);
    ReshardPlan plan;
    Tiling from = sp("012|"), to = sp("120|");
    assert_true(reshard_plan(&m, &s, &from, &to, &plan));
    assert_int_equal(plan.n_steps, 1);
    assert_int_equal(plan.steps[0].kind, STEP_COLLECTIVE_PERMUTE);
    assert_int_equal(plan.bytes, 32);
    assert_false(plan.full_remat);
    /* a dim swap with equal tile counts stays an all-to-all pair when that is
     * cheaper: [{x},{y0}] -> [{y0},{x}] on x=2,y=2 is two all-to-alls of
     * 1/2 * 64 B each = 64 B, the permute 64 B too: the permute wins the tie
     * (one collective instead of two) */
    Mesh m2 = mk_mesh("x=2,y=2");
    Tiling f2 = sp("0|1"), t2 = sp("1|0");
    assert_true(reshard_plan(&m2, &s, &f2, &t2, &plan));
    assert_int_equal(plan.n_steps, 1);
    assert_int_equal(plan.steps[0].kind, STEP_COLLECTIVE_PERMUTE);
    assert_int_equal(plan.bytes, 64); /* local s32[4,4] = 64 B */
}

/* A state in another device order (a sharding whose device list is no
 * transposed iota): one collective-permute into the mesh's order first, one
 * out of it last, the plan between them in the mesh's order.  Device order
 * 1 reverses the 4 devices. */
static void test_plan_device_order(void **state)
{
    (void)state;
    Mesh m = mk_mesh("4");
    MeshPerms perms = {0};
    Arena *a = arena_create();
    perms.arena = a;
    m.perms = &perms;
    assert_int_equal(mesh_perm_intern(&perms, (int64_t[]){3, 2, 1, 0}, 4), 1);
    assert_int_equal(mesh_perm_intern(&perms, (int64_t[]){0, 1, 2, 3}, 4), 0);
    assert_int_equal(mesh_perm_intern(&perms, (int64_t[]){0, 1, 1, 3}, 4), -1);
    assert_int_equal(mesh_logical_device(&m, 1, 3), 0);
    Shape s = shp(ET_F32, 2, 16, 8, 0);
    ReshardPlan plan;
    Tiling rows = sp("01|"), rev = rows, cols = sp("|01"), rep = sp("|");
    rev.perm = 1;
    /* f32[4,8] = 128 B a device: the permute sends its whole block */
    assert_true(reshard_plan(&m, &s, &rev, &rows, &plan));
    assert_int_equal(plan.n_steps, 1);
    assert_int_equal(plan.steps[0].kind, STEP_COLLECTIVE_PERMUTE);
    assert_int_equal(plan.bytes, 128);
    /* to columns: permute (128 B) then all-to-all (3/4 * 128 = 96 B) */
    assert_true(reshard_plan(&m, &s, &rev, &cols, &plan));
    assert_int_equal(plan.n_steps, 2);
    assert_int_equal(plan.steps[0].kind, STEP_COLLECTIVE_PERMUTE);
    assert_int_equal(plan.steps[1].kind, STEP_ALL_TO_ALL);
    assert_int_equal(plan.bytes, 224);
    /* replicated into the reversed rows: a local slice, then the permute */
    assert_true(reshard_plan(&m, &s, &rep, &rev, &plan));
    assert_int_equal(plan.n_steps, 2);
    assert_int_equal(plan.steps[0].kind, STEP_SLICE);
    assert_int_equal(plan.steps[1].kind, STEP_COLLECTIVE_PERMUTE);
    assert_int_equal(plan.bytes, 128);
    /* the same state in the same order needs nothing; a replicated value has no order */
    assert_true(reshard_plan(&m, &s, &rev, &rev, &plan));
    assert_int_equal(plan.n_steps, 0);
    Tiling rep1 = rep;
    rep1.perm = 1;
    assert_true(tiling_equal(&rep, &rep1));
    assert_false(tiling_equal(&rows, &rev));
    arena_destroy(a);
}

/* A whole value becomes a pending sum by a local mask (the group's first
 * device keeps it, the others hold 0): no bytes.  Two pending reductions of
 * different kinds never meet. */
static void test_plan_mask_creates_partial(void **state)
{
    (void)state;
    Mesh m = mk_mesh("model=8");
    Shape s = shp(ET_F32, 1, 64, 0, 0);
    ReshardPlan plan;
    Tiling from = sp(""), to = sp("+p0");
    assert_true(reshard_plan(&m, &s, &from, &to, &plan));
    assert_int_equal(plan.n_steps, 1);
    assert_int_equal(plan.steps[0].kind, STEP_MASK);
    assert_int_equal(plan.steps[0].n_atoms, 1);
    assert_int_equal(plan.bytes, 0);
    /* split on atom 0 first: gathered (3/4... of the 2 tiles: 1/2 * 256 B = 128 B), then masked */
    Tiling split = sp("0"), to1 = sp("+p0");
    assert_true(reshard_plan(&m, &s, &split, &to1, &plan));
    assert_int_equal(plan.n_steps, 2);
    assert_int_equal(plan.steps[0].kind, STEP_ALL_GATHER);
    assert_int_equal(plan.steps[1].kind, STEP_MASK);
    assert_int_equal(plan.bytes, 128);
    Tiling mx = sp("+p0"), sum = sp("+p1");
    mx.kind = REDUCE_MAX;
    assert_false(reshard_plan(&m, &s, &mx, &sum, &plan));
    assert_int_equal(reshard_cost(&m, &s, &mx, &sum), PART_INF_COST);
}

/* ================================================================ evaluator */

typedef struct Arr {
    int32_t rank;
    int64_t dims[SPMDC_MAX_RANK];
    int64_t n;
    int64_t *v;
} Arr;

static Arr arr_new(int32_t rank, const int64_t *dims)
{
    Arr a;
    memset(&a, 0, sizeof a);
    a.rank = rank;
    a.n = 1;
    for (int32_t d = 0; d < rank; d++) {
        a.dims[d] = dims[d];
        a.n *= dims[d];
    }
    a.v = calloc((size_t)(a.n ? a.n : 1), sizeof(int64_t));
    return a;
}

static Arr arr_copy(const Arr *a)
{
    Arr r = arr_new(a->rank, a->dims);
    memcpy(r.v, a->v, sizeof(int64_t) * (size_t)a->n);
    return r;
}

static void unravel(const int64_t *dims, int32_t rank, int64_t lin, int64_t *idx)
{
    for (int32_t d = rank - 1; d >= 0; d--) {
        idx[d] = dims[d] ? lin % dims[d] : 0;
        lin = dims[d] ? lin / dims[d] : 0;
    }
}

static int64_t ravel(const int64_t *dims, int32_t rank, const int64_t *idx)
{
    int64_t l = 0;
    for (int32_t d = 0; d < rank; d++)
        l = l * dims[d] + idx[d];
    return l;
}

/* Sub-array [start, start+size) of a. */
static Arr arr_slice(const Arr *a, const int64_t *start, const int64_t *size)
{
    Arr r = arr_new(a->rank, size);
    int64_t idx[SPMDC_MAX_RANK];
    for (int64_t k = 0; k < r.n; k++) {
        unravel(size, a->rank, k, idx);
        for (int32_t d = 0; d < a->rank; d++)
            idx[d] += start[d];
        r.v[k] = a->v[ravel(a->dims, a->rank, idx)];
    }
    return r;
}

/* Concatenation of parts[0..n) along dim. */
static Arr arr_concat(Arr *const *parts, int64_t n, int32_t dim)
{
    int64_t dims[SPMDC_MAX_RANK];
    memcpy(dims, parts[0]->dims, sizeof dims);
    dims[dim] = parts[0]->dims[dim] * n;
    Arr r = arr_new(parts[0]->rank, dims);
    int64_t idx[SPMDC_MAX_RANK];
    for (int64_t k = 0; k < r.n; k++) {
        unravel(dims, r.rank, k, idx);
        int64_t part = idx[dim] / parts[0]->dims[dim];
        idx[dim] %= parts[0]->dims[dim];
        r.v[k] = parts[part]->v[ravel(parts[part]->dims, r.rank, idx)];
    }
    return r;
}

/* Chunk k of n along dim. */
static Arr arr_chunk(const Arr *a, int32_t dim, int64_t n, int64_t k)
{
    int64_t start[SPMDC_MAX_RANK] = {0}, size[SPMDC_MAX_RANK];
    memcpy(size, a->dims, sizeof size);
    size[dim] = a->dims[dim] / n;
    start[dim] = k * size[dim];
    return arr_slice(a, start, size);
}

typedef struct Eval {
    const HloModule *m;
    int64_t nd;
    Arr *vals; /* [inst * nd + dev] */
} Eval;

static Arr *val(Eval *e, int32_t inst, int64_t dev) { return &e->vals[(int64_t)inst * e->nd + dev]; }

static void check_shape(const HloInst *in, const Arr *a)
{
    assert_int_equal(a->rank, in->shape->rank);
    for (int32_t d = 0; d < a->rank; d++)
        assert_int_equal(a->dims[d], in->shape->dims[d]);
}

static Arr eval_local(Eval *e, const HloInst *in, int32_t i, int64_t dev, const Arr *args)
{
    const HloAttrs *a = hlo_attrs(in);
    Arr *op0 = in->n_operands ? val(e, in->operands[0], dev) : NULL;
    Arr r;
    (void)i;
    switch (in->op) {
    case HLO_PARAMETER: return arr_copy(&args[in->param_number]);
    case HLO_PARTITION_ID:
        r = arr_new(0, NULL);
        r.v[0] = dev;
        return r;
    case HLO_CONSTANT:
        r = arr_new(in->shape->rank, in->shape->dims);
        for (int64_t k = 0; k < r.n; k++)
            r.v[k] = a->literal->i ? a->literal->i[k] : (int64_t)a->literal->f[k];
        return r;
    case HLO_COPY:
    case HLO_CUSTOM_CALL: return arr_copy(op0);
    case HLO_RESHAPE:
        r = arr_new(in->shape->rank, in->shape->dims);
        assert_int_equal(r.n, op0->n);
        memcpy(r.v, op0->v, sizeof(int64_t) * (size_t)r.n);
        return r;
    case HLO_TRANSPOSE: {
        r = arr_new(in->shape->rank, in->shape->dims);
        int64_t o[SPMDC_MAX_RANK], s[SPMDC_MAX_RANK];
        for (int64_t k = 0; k < r.n; k++) {
            unravel(r.dims, r.rank, k, o);
            for (int32_t d = 0; d < r.rank; d++)
                s[a->dimensions.v[d]] = o[d];
            r.v[k] = op0->v[ravel(op0->dims, op0->rank, s)];
        }
        return r;
    }
    case HLO_DYNAMIC_SLICE: {
        int64_t start[SPMDC_MAX_RANK];
        for (int32_t d = 0; d < op0->rank; d++) {
            int64_t st = val(e, in->operands[1 + d], dev)->v[0], hi = op0->dims[d] - a->dynamic_slice_sizes.v[d];
            start[d] = st < 0 ? 0 : st > hi ? hi : st;
        }
        return arr_slice(op0, start, a->dynamic_slice_sizes.v);
    }
    case HLO_ADD: {
        Arr *op1 = val(e, in->operands[1], dev);
        r = arr_copy(op0);
        for (int64_t k = 0; k < r.n; k++)
            r.v[k] += op1->v[k];
        return r;
    }
    case HLO_REDUCE: {
        uint32_t red = 0;
        for (int32_t k = 0; k < a->dimensions.n; k++)
            red |= 1u << a->dimensions.v[k];
        r = arr_new(in->shape->rank, in->shape->dims);
        for (int64_t k = 0; k < r.n; k++)
            r.v[k] = val(e, in->operands[1], dev)->v[0];
        int64_t idx[SPMDC_MAX_RANK], o[SPMDC_MAX_RANK];
        for (int64_t k = 0; k < op0->n; k++) {
            unravel(op0->dims, op0->rank, k, idx);
            int32_t od = 0;
            for (int32_t d = 0; d < op0->rank; d++)
                if (!(red & (1u << d)))
                    o[od++] = idx[d];
            r.v[ravel(r.dims, r.rank, o)] += op0->v[k];
        }
        return r;
    }
    default: fail_msg("evaluator: unexpected opcode %s (%s)", hlo_opcode_name(in->op), in->name);
    }
    return arr_new(0, NULL);
}

static void eval_permute(Eval *e, const HloInst *in, int32_t i)
{
    const HloAttrs *a = hlo_attrs(in);
    assert_true(a->channel_id > 0);
    bool *seen_src = calloc((size_t)e->nd, sizeof(bool)), *seen_dst = calloc((size_t)e->nd, sizeof(bool));
    for (int64_t dev = 0; dev < e->nd; dev++)
        *val(e, i, dev) = arr_new(in->shape->rank, in->shape->dims); /* zeros where nothing arrives */
    for (int32_t k = 0; k < a->n_pairs; k++) {
        int64_t src = a->pairs[2 * k], dst = a->pairs[2 * k + 1];
        assert_false(seen_src[src]);
        assert_false(seen_dst[dst]);
        seen_src[src] = seen_dst[dst] = true;
        free(val(e, i, dst)->v);
        *val(e, i, dst) = arr_copy(val(e, in->operands[0], src));
        check_shape(in, val(e, i, dst));
    }
    free(seen_src);
    free(seen_dst);
}

static void eval_collective(Eval *e, const HloInst *in, int32_t i)
{
    const HloAttrs *a = hlo_attrs(in);
    if (in->op == HLO_COLLECTIVE_PERMUTE) {
        eval_permute(e, in, i);
        return;
    }
    const ReplicaGroups *g = &a->replica_groups;
    assert_true(a->channel_id > 0);
    assert_int_equal(g->n_groups * g->group_size, e->nd);
    int64_t n = g->group_size;
    Arr **parts = calloc((size_t)n, sizeof *parts);
    for (int64_t gi = 0; gi < g->n_groups; gi++) {
        const int64_t *mem = &g->ids[gi * n];
        for (int64_t k = 0; k < n; k++)
            parts[k] = val(e, in->operands[0], mem[k]);
        for (int64_t k = 0; k < n; k++) {
            Arr r;
            int32_t dim = a->dimensions.n ? (int32_t)a->dimensions.v[0] : 0;
            if (in->op == HLO_ALL_REDUCE || in->op == HLO_REDUCE_SCATTER) {
                Arr sum = arr_copy(parts[0]);
                for (int64_t s = 1; s < n; s++)
                    for (int64_t x = 0; x < sum.n; x++)
                        sum.v[x] += parts[s]->v[x];
                if (in->op == HLO_ALL_REDUCE) {
                    r = sum;
                } else {
                    r = arr_chunk(&sum, dim, n, k);
                    free(sum.v);
                }
            } else if (in->op == HLO_ALL_GATHER) {
                r = arr_concat(parts, n, dim);
            } else {
                assert_int_equal(in->op, HLO_ALL_TO_ALL);
                Arr *chunks = calloc((size_t)n, sizeof *chunks);
                Arr **cp = calloc((size_t)n, sizeof *cp);
                for (int64_t s = 0; s < n; s++) {
                    chunks[s] = arr_chunk(parts[s], dim, n, k);
                    cp[s] = &chunks[s];
                }
                r = arr_concat(cp, n, dim);
                for (int64_t s = 0; s < n; s++)
                    free(chunks[s].v);
                free(chunks);
                free(cp);
            }
            check_shape(in, &r);
            *val(e, i, mem[k]) = r;
        }
    }
    free(parts);
}

/* Runs the entry of m on nd devices; args[dev][param]. Returns the root
 * values per device (caller frees with eval_free). */
static Eval eval_run(const HloModule *m, int64_t nd, Arr *const *args)
{
    Eval e = {m, nd, NULL};
    const HloComputation *c = &m->comps[m->entry];
    e.vals = calloc((size_t)(c->n_insts * nd), sizeof(Arr));
    for (int32_t i = 0; i < c->n_insts; i++) {
        const HloInst *in = &c->insts[i];
        if (hlo_opcode_category(in->op) == 'C') {
            eval_collective(&e, in, i);
            continue;
        }
        for (int64_t dev = 0; dev < nd; dev++) {
            *val(&e, i, dev) = eval_local(&e, in, i, dev, args[dev]);
            check_shape(in, val(&e, i, dev));
        }
    }
    return e;
}

static void eval_free(Eval *e)
{
    const HloComputation *c = &e->m->comps[e->m->entry];
    for (int64_t k = 0; k < c->n_insts * e->nd; k++)
        free(e->vals[k].v);
    free(e->vals);
}

/* Device dev's block of global array g under state s. */
static Arr device_slice(const Mesh *m, const Arr *g, const Tiling *s, int64_t dev)
{
    int64_t start[SPMDC_MAX_RANK], size[SPMDC_MAX_RANK];
    for (int32_t d = 0; d < g->rank; d++) {
        const int8_t *at = tiling_dim(s, d);
        int64_t idx = 0, tiles = 1;
        for (int32_t k = 0; k < tiling_dim_n(s, d); k++) {
            idx = idx * m->atom_size[at[k]] + mesh_atom_coord(m, dev, at[k]);
            tiles *= m->atom_size[at[k]];
        }
        size[d] = g->dims[d] / tiles;
        start[d] = idx * size[d];
    }
    return arr_slice(g, start, size);
}

/* ================================================================ modules */

static Sharding *mk_sharding(HloModule *m, const Tiling *s)
{
    Sharding *sh = ARENA_NEW(m->arena, Sharding);
    *sh = sharding_from_tiling(s);
    return sh;
}

static int32_t add_computation(HloModule *m, ElemType t)
{
    int32_t c = hlo_add_computation(m, "add", false);
    Shape s = shape_scalar(t);
    int32_t x = hlo_add_inst(m, c, HLO_PARAMETER, "x", &s, NULL, 0);
    hlo_inst(m, c, x)->param_number = 0;
    int32_t y = hlo_add_inst(m, c, HLO_PARAMETER, "y", &s, NULL, 0);
    hlo_inst(m, c, y)->param_number = 1;
    int32_t xy[2] = {x, y};
    hlo_add_inst(m, c, HLO_ADD, "sum", &s, xy, 2);
    return c;
}

/* p: s32[8,8] in state `from` (or, if from is partial, a reduce over a
 * leading dim of 8 split over the partial atoms); ROOT custom-call Sharding
 * to `to`. */
static HloModule *reshard_module(const Mesh *mesh, const Tiling *from, const Tiling *to, Shape *param_shape,
                                 Tiling *param_spec)
{
    HloModule *m = hlo_module_new("reshard");
    m->mesh = *mesh;
    m->has_mesh = true;
    int32_t add = from->partial ? add_computation(m, ET_S32) : -1;
    int32_t c = hlo_add_computation(m, "main", true);
    Shape s2 = shp(ET_S32, 2, 8, 8, 0);
    int32_t v;
    if (!from->partial) {
        *param_shape = s2;
        *param_spec = *from;
        v = hlo_add_inst(m, c, HLO_PARAMETER, "p", &s2, NULL, 0);
        hlo_inst(m, c, v)->sharding = mk_sharding(m, from);
    } else {
        /* p: s32[8,8,8], dim 0 over the partial atoms (in mask order), dims
         * 1,2 as from's dims 0,1. */
        Tiling ps;
        tiling_replicated(&ps, 3);
        int8_t run[SPMDC_MAX_ATOMS];
        int32_t n = 0;
        for (int32_t a = 0; a < SPMDC_MAX_ATOMS; a++)
            if (from->partial & (1u << a))
                run[n++] = (int8_t)a;
        tiling_set_dim(&ps, 0, run, n);
        tiling_set_dim(&ps, 1, tiling_dim(from, 0), tiling_dim_n(from, 0));
        tiling_set_dim(&ps, 2, tiling_dim(from, 1), tiling_dim_n(from, 1));
        *param_shape = shp(ET_S32, 3, 8, 8, 8);
        *param_spec = ps;
        int32_t p = hlo_add_inst(m, c, HLO_PARAMETER, "p", param_shape, NULL, 0);
        hlo_inst(m, c, p)->sharding = mk_sharding(m, &ps);
        Shape s0 = shape_scalar(ET_S32);
        int32_t z = hlo_add_inst(m, c, HLO_CONSTANT, "zero", &s0, NULL, 0);
        Literal *lit = ARENA_NEW(m->arena, Literal);
        lit->n = 1;
        lit->i = ARENA_ARRAY(m->arena, int64_t, 1);
        hlo_attrs_mut(m, hlo_inst(m, c, z))->literal = lit;
        hlo_inst(m, c, z)->sharding = mk_sharding(m, &(Tiling){0});
        int32_t ops[2] = {p, z};
        v = hlo_add_inst(m, c, HLO_REDUCE, "r", &s2, ops, 2);
        HloAttrs *ra = hlo_attrs_mut(m, hlo_inst(m, c, v));
        int64_t d0 = 0;
        ra->dimensions = hlo_intlist(m, &d0, 1);
        ra->to_apply = add;
        hlo_inst(m, c, v)->sharding = mk_sharding(m, from);
    }
    int32_t r = hlo_add_inst(m, c, HLO_CUSTOM_CALL, "s", &s2, &v, 1);
    hlo_attrs_mut(m, hlo_inst(m, c, r))->custom_call_target = "Sharding";
    hlo_inst(m, c, r)->sharding = mk_sharding(m, to);
    return m;
}

typedef struct Run {
    HloModule *out;
    CommReport rep;
    DiagEngine *diag;
} Run;

static bool run_partition(const HloModule *in, Run *r)
{
    r->diag = diag_create(NULL);
    SpmdcOptions opt;
    memset(&opt, 0, sizeof opt);
    Arena *scratch = arena_create();
    PassCtx cx = {scratch, r->diag, &opt};
    report_init(&r->rep, in->name, &in->mesh);
    bool ok = partition_module(in, &r->out, &r->rep, &cx);
    arena_destroy(scratch);
    return ok;
}

static void run_free(Run *r)
{
    hlo_module_free(r->out);
    report_free(&r->rep);
    diag_destroy(r->diag);
}

/* Partitions the reshard module and checks every device's result. */
static void check_numeric(const Mesh *mesh, const Tiling *from, const Tiling *to)
{
    Shape ps;
    Tiling pspec;
    HloModule *in = reshard_module(mesh, from, to, &ps, &pspec);
    Run run;
    if (!run_partition(in, &run))
        fail_msg("partition failed: %s", diag_text(run.diag));
    /* Global input 0..N-1, global result computed directly. */
    Arr g = arr_new(ps.rank, ps.dims);
    for (int64_t k = 0; k < g.n; k++)
        g.v[k] = k * 7 % 101 - 50;
    Arr want;
    if (from->partial) {
        int64_t d[2] = {8, 8};
        want = arr_new(2, d);
        for (int64_t k = 0; k < g.n; k++)
            want.v[k % 64] += g.v[k];
    } else {
        want = arr_copy(&g);
    }
    int64_t nd = mesh->n_devices;
    Arr *args = calloc((size_t)nd, sizeof(Arr));
    Arr **argp = calloc((size_t)nd, sizeof(Arr *));
    for (int64_t dev = 0; dev < nd; dev++) {
        args[dev] = device_slice(mesh, &g, &pspec, dev);
        argp[dev] = &args[dev];
    }
    Eval e = eval_run(run.out, nd, argp);
    int32_t root = run.out->comps[run.out->entry].root;
    for (int64_t dev = 0; dev < nd; dev++) {
        Arr exp = device_slice(mesh, &want, to, dev);
        Arr *got = val(&e, root, dev);
        if (got->n != exp.n || memcmp(got->v, exp.v, sizeof(int64_t) * (size_t)exp.n) != 0) {
            StrBuf b = {0};
            HloPrintOptions po = {0};
            hlo_print_module(&b, run.out, &po);
            fail_msg("device %lld wrong for %s -> %s:\n%s", (long long)dev, spec_str(mesh, from), spec_str(mesh, to),
                     sb_cstr(&b));
        }
        free(exp.v);
    }
    /* The name contract: an instruction named like an input holds it in
     * its declared state; "s" must exist (the root), in state `to`. */
    assert_string_equal(run.out->comps[run.out->entry].insts[root].name, "s");
    eval_free(&e);
    for (int64_t dev = 0; dev < nd; dev++)
        free(args[dev].v);
    free(args);
    free(argp);
    free(g.v);
    free(want.v);
    run_free(&run);
    hlo_module_free(in);
}

/* ================================================================ exhaustive */

/* Every state of a rank-2 array over the mesh atoms: each atom on dim 0,
 * dim 1 or neither, in every order within a dim (plus, with partial, every
 * non-empty set of the unused atoms as pending sum). */
static int32_t gen_specs(const Mesh *m, bool partial, Tiling *out, int32_t cap)
{
    int32_t na = m->n_atoms, n = 0;
    int64_t combos = 1;
    for (int32_t a = 0; a < na; a++)
        combos *= partial ? 4 : 3;
    for (int64_t c = 0; c < combos; c++) {
        int64_t x = c;
        int8_t slot[SPMDC_MAX_ATOMS];
        uint32_t pmask = 0;
        for (int32_t a = 0; a < na; a++) {
            slot[a] = (int8_t)(x % (partial ? 4 : 3));
            x /= partial ? 4 : 3;
            if (slot[a] == 3)
                pmask |= 1u << a;
        }
        if (partial && !pmask)
            continue;
        /* all orders: permute the atom list and keep distinct results */
        int8_t perm[SPMDC_MAX_ATOMS];
        for (int32_t a = 0; a < na; a++)
            perm[a] = (int8_t)a;
        for (;;) {
            Tiling s;
            tiling_replicated(&s, 2);
            int8_t r0[SPMDC_MAX_ATOMS], r1[SPMDC_MAX_ATOMS];
            int32_t n0 = 0, n1 = 0;
            for (int32_t k = 0; k < na; k++) {
                if (slot[perm[k]] == 1)
                    r0[n0++] = perm[k];
                if (slot[perm[k]] == 2)
                    r1[n1++] = perm[k];
            }
            tiling_set_dim(&s, 0, r0, n0);
            tiling_set_dim(&s, 1, r1, n1);
            s.partial = pmask;
            s.kind = pmask ? REDUCE_SUM : REDUCE_NONE;
            bool dup = false;
            for (int32_t j = 0; j < n && !dup; j++)
                dup = tiling_equal(&out[j], &s);
            if (!dup && n < cap)
                out[n++] = s;
            /* next permutation */
            int32_t i = na - 2;
            while (i >= 0 && perm[i] >= perm[i + 1])
                i--;
            if (i < 0)
                break;
            int32_t j = na - 1;
            while (perm[j] <= perm[i])
                j--;
            int8_t t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
            for (int32_t a = i + 1, b = na - 1; a < b; a++, b--) {
                t = perm[a];
                perm[a] = perm[b];
                perm[b] = t;
            }
        }
    }
    return n;
}

static void exhaustive(const char *mesh_spec, bool partial)
{
    Mesh m = mk_mesh(mesh_spec);
    Tiling *from = calloc(512, sizeof(Tiling)), *to = calloc(512, sizeof(Tiling));
    int32_t nf = gen_specs(&m, partial, from, 512), nt = gen_specs(&m, false, to, 512);
    assert_true(nf > 0 && nt > 0);
    for (int32_t a = 0; a < nf; a++)
        for (int32_t b = 0; b < nt; b++)
            check_numeric(&m, &from[a], &to[b]);
    free(from);
    free(to);
}

static void test_numeric_exhaustive_x2_y4(void **state)
{
    (void)state;
    exhaustive("x=2,y=4", false);
}

static void test_numeric_exhaustive_x2_y2_z2(void **state)
{
    (void)state;
    exhaustive("x=2,y=2,z=2", false);
}

static void test_numeric_exhaustive_partial_x2_y4(void **state)
{
    (void)state;
    exhaustive("x=2,y=4", true);
}

static void test_numeric_exhaustive_partial_x2_y2_z2(void **state)
{
    (void)state;
    exhaustive("x=2,y=2,z=2", true);
}

static void test_numeric_mesh_8_and_6(void **state)
{
    (void)state;
    Mesh m = mk_mesh("a=2,b=2");
    Tiling f = sp("0|1"), t = sp("1|0");
    check_numeric(&m, &f, &t);
    Mesh m8 = mk_mesh("8");
    Tiling f8 = sp("012|"), t8 = sp("|012"), t8b = sp("|201");
    check_numeric(&m8, &f8, &t8);
    check_numeric(&m8, &f8, &t8b);
}

/* ================================================================ emitted programs */

/* The collectives of an output entry, in program order. */
static int32_t collectives(const HloModule *m, const HloInst **out, int32_t cap)
{
    const HloComputation *c = &m->comps[m->entry];
    int32_t n = 0;
    for (int32_t i = 0; i < c->n_insts; i++)
        if (hlo_opcode_category(c->insts[i].op) == 'C' && n < cap)
            out[n++] = &c->insts[i];
    return n;
}

static void assert_groups(const HloInst *in, int64_t ng, int64_t gs, const int64_t *ids)
{
    const ReplicaGroups *g = &hlo_attrs(in)->replica_groups;
    assert_int_equal(g->n_groups, ng);
    assert_int_equal(g->group_size, gs);
    for (int64_t k = 0; k < ng * gs; k++)
        assert_int_equal(g->ids[k], ids[k]);
}

static void test_2d_gather_groups(void **state)
{
    (void)state;
    /* x=2,y=4 (device = 4*x + y); p f32-like s32[8,8] split [{x},{y}] ->
     * replicated: one all-gather per dim.  Dim 0 (over x) in groups of the
     * devices that differ only in x: {0,4},{1,5},{2,6},{3,7}; dim 1 (over y)
     * in {0,1,2,3},{4,5,6,7}. */
    Mesh m = mk_mesh("x=2,y=4");
    Tiling from = sp("0|12"), to = sp("|");
    Shape ps;
    Tiling pspec;
    HloModule *in = reshard_module(&m, &from, &to, &ps, &pspec);
    Run run;
    assert_true(run_partition(in, &run));
    const HloInst *c[8];
    assert_int_equal(collectives(run.out, c, 8), 2);
    assert_int_equal(c[0]->op, HLO_ALL_GATHER);
    assert_int_equal(hlo_attrs(c[0])->dimensions.v[0], 0);
    static const int64_t over_x[8] = {0, 4, 1, 5, 2, 6, 3, 7};
    assert_groups(c[0], 4, 2, over_x);
    assert_int_equal(hlo_attrs(c[0])->channel_id, 1);
    assert_true(hlo_attrs(c[0])->use_global_device_ids);
    assert_int_equal(c[1]->op, HLO_ALL_GATHER);
    assert_int_equal(hlo_attrs(c[1])->dimensions.v[0], 1);
    static const int64_t over_y[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    assert_groups(c[1], 2, 4, over_y);
    assert_int_equal(hlo_attrs(c[1])->channel_id, 2);
    /* shapes: s32[4,2] -> s32[8,2] -> s32[8,8] */
    assert_int_equal(c[0]->shape->dims[0], 8);
    assert_int_equal(c[0]->shape->dims[1], 2);
    assert_int_equal(c[1]->shape->dims[1], 8);
    /* report: s32[8,2] = 64 B gathered over 2: 1/2*64 = 32; then s32[8,8] =
     * 256 B over 4: 3/4*256 = 192 */
    assert_int_equal(run.rep.n_records, 2);
    assert_int_equal(run.rep.records[0].kind, COLL_ALL_GATHER);
    assert_int_equal(run.rep.records[0].bytes_per_device, 32);
    assert_int_equal(run.rep.records[0].group_size, 2);
    assert_int_equal(run.rep.records[0].num_groups, 4);
    assert_int_equal(run.rep.records[0].operand_dims[0], 4);
    assert_int_equal(run.rep.records[0].result_dims[0], 8);
    assert_int_equal(run.rep.records[1].bytes_per_device, 192);
    assert_int_equal(run.rep.records[1].group_size, 4);
    assert_int_equal(run.rep.records[1].num_groups, 2);
    assert_int_equal(run.rep.records[1].n_atoms, 2);
    assert_string_equal(run.rep.records[1].cause_instruction, "s");
    assert_int_equal(run.rep.n_warnings, 0);
    run_free(&run);
    hlo_module_free(in);
}

static void test_all_to_all_program(void **state)
{
    (void)state;
    /* model=4: [{model},{}] -> [{},{model}] on s32[8,8]: local s32[2,8] is
     * split to [2,4,2] (dim 1 -> [4, 2]), all-to-all over dimension 1 in one
     * group {0,1,2,3}, transposed to [4,2,2] (received axis before dim 0),
     * merged to s32[8,2]. */
    Mesh m = mk_mesh("model=4");
    Tiling from = sp("01|"), to = sp("|01");
    Shape ps;
    Tiling pspec;
    HloModule *in = reshard_module(&m, &from, &to, &ps, &pspec);
    Run run;
    assert_true(run_partition(in, &run));
    const HloInst *c[8];
    assert_int_equal(collectives(run.out, c, 8), 1);
    assert_int_equal(c[0]->op, HLO_ALL_TO_ALL);
    assert_int_equal(c[0]->shape->rank, 3);
    assert_int_equal(c[0]->shape->dims[0], 2);
    assert_int_equal(c[0]->shape->dims[1], 4);
    assert_int_equal(c[0]->shape->dims[2], 2);
    assert_int_equal(hlo_attrs(c[0])->dimensions.v[0], 1);
    assert_false(hlo_attrs(c[0])->use_global_device_ids);
    static const int64_t all4[4] = {0, 1, 2, 3};
    assert_groups(c[0], 1, 4, all4);
    /* s32[2,4,2] = 64 B; all-to-all sends 3/4 of it: 48 */
    assert_int_equal(run.rep.records[0].bytes_per_device, 48);
    assert_int_equal(run.rep.records[0].kind, COLL_ALL_TO_ALL);
    const HloComputation *e = &run.out->comps[run.out->entry];
    const HloInst *root = &e->insts[e->root];
    assert_int_equal(root->shape->dims[0], 8);
    assert_int_equal(root->shape->dims[1], 2);
    run_free(&run);
    hlo_module_free(in);
}

static void test_replicated_to_split_program(void **state)
{
    (void)state;
    /* model=4, replicated -> [{},{model}]: partition-id, offset table
     * {0,2,4,6} (chunk 2 per device), dynamic-slice; no collective. */
    Mesh m = mk_mesh("model=4");
    Tiling from = sp("|"), to = sp("|01");
    Shape ps;
    Tiling pspec;
    HloModule *in = reshard_module(&m, &from, &to, &ps, &pspec);
    Run run;
    assert_true(run_partition(in, &run));
    const HloInst *c[8];
    assert_int_equal(collectives(run.out, c, 8), 0);
    assert_int_equal(run.rep.n_records, 0);
    const HloComputation *e = &run.out->comps[run.out->entry];
    int32_t t = hlo_find_inst(run.out, run.out->entry, "p.offset-table");
    assert_true(t >= 0);
    const Literal *lit = hlo_attrs(&e->insts[t])->literal;
    assert_int_equal(lit->n, 4);
    assert_int_equal(lit->i[0], 0);
    assert_int_equal(lit->i[1], 2);
    assert_int_equal(lit->i[2], 4);
    assert_int_equal(lit->i[3], 6);
    assert_true(hlo_find_inst(run.out, run.out->entry, "partition-id") >= 0);
    assert_true(hlo_find_inst(run.out, run.out->entry, "p.offset") >= 0);
    const HloInst *root = &e->insts[e->root];
    assert_int_equal(root->op, HLO_COPY);
    assert_int_equal(e->insts[root->operands[0]].op, HLO_DYNAMIC_SLICE);
    run_free(&run);
    hlo_module_free(in);
}

static void test_partial_reduce_scatter_program(void **state)
{
    (void)state;
    /* x=2,y=4: r = reduce over dim 0 of p s32[8,8,8] split over all atoms:
     * partial over {x,y}; target [{y},{}]: reduce-scatter over y
     * (dimensions={0}, groups {0,1,2,3},{4,5,6,7}) then all-reduce over x
     * (groups {0,4},{1,5},{2,6},{3,7}). */
    Mesh m = mk_mesh("x=2,y=4");
    Tiling from = sp("|+p012"), to = sp("12|");
    Shape ps;
    Tiling pspec;
    HloModule *in = reshard_module(&m, &from, &to, &ps, &pspec);
    Run run;
    assert_true(run_partition(in, &run));
    const HloInst *c[8];
    assert_int_equal(collectives(run.out, c, 8), 2);
    assert_int_equal(c[0]->op, HLO_REDUCE_SCATTER);
    assert_int_equal(hlo_attrs(c[0])->dimensions.v[0], 0);
    static const int64_t over_y[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    assert_groups(c[0], 2, 4, over_y);
    assert_int_equal(c[1]->op, HLO_ALL_REDUCE);
    static const int64_t over_x[8] = {0, 4, 1, 5, 2, 6, 3, 7};
    assert_groups(c[1], 4, 2, over_x);
    /* reducer computation add.s32 exists and is called */
    int32_t add = hlo_find_computation(run.out, "add.s32");
    assert_true(add >= 0);
    assert_true(add < run.out->entry);
    assert_int_equal(hlo_attrs(c[0])->to_apply, add);
    assert_int_equal(hlo_attrs(c[1])->to_apply, add);
    /* s32[8,8] = 256 B scattered over 4: 3/4*256 = 192; then s32[2,8] = 64 B
     * all-reduced over 2: 2*1/2*64 = 64 */
    assert_int_equal(run.rep.records[0].bytes_per_device, 192);
    assert_int_equal(run.rep.records[1].bytes_per_device, 64);
    /* the cause of a reduction is the op that made the value partial */
    assert_string_equal(run.rep.records[0].cause_instruction, "r");
    /* the shardings here are set by hand, not propagated: no origins */
    assert_string_equal(run.rep.records[0].reason, "r: reduced dim 0 of p sharded on 'x,y'; needed as [{y}, {}] by s, "
                                                   "which is [{y}, {}] (not traced to an annotation)");
    run_free(&run);
    hlo_module_free(in);
}

static void test_collective_permute_program(void **state)
{
    (void)state;
    /* x=2,y=4, device = 4x + y: [{x,y}, {}] -> [{y,x}, {}].  Device d needs
     * tile 2y + x, which device 2y + x holds: pairs by source
     * {0,0},{1,4},{2,1},{3,5},{4,2},{5,6},{6,3},{7,7}. */
    Mesh m = mk_mesh("x=2,y=4");
    Tiling from = sp("012|"), to = sp("120|");
    Shape ps;
    Tiling pspec;
    HloModule *in = reshard_module(&m, &from, &to, &ps, &pspec);
    Run run;
    assert_true(run_partition(in, &run));
    const HloInst *c[8];
    assert_int_equal(collectives(run.out, c, 8), 1);
    assert_int_equal(c[0]->op, HLO_COLLECTIVE_PERMUTE);
    const HloAttrs *a = hlo_attrs(c[0]);
    static const int64_t pairs[16] = {0, 0, 1, 4, 2, 1, 3, 5, 4, 2, 5, 6, 6, 3, 7, 7};
    assert_int_equal(a->n_pairs, 8);
    assert_memory_equal(a->pairs, pairs, sizeof pairs);
    assert_int_equal(a->channel_id, 1);
    assert_false(a->use_global_device_ids);
    assert_int_equal(a->replica_groups.n_groups, 0);
    assert_int_equal(run.rep.records[0].kind, COLL_COLLECTIVE_PERMUTE);
    assert_int_equal(run.rep.records[0].bytes_per_device, 32); /* s32[1,8] */
    assert_int_equal(run.rep.n_warnings, 0);
    run_free(&run);
    hlo_module_free(in);
    check_numeric(&m, &from, &to);
}

static void test_full_remat_warning(void **state)
{
    (void)state;
    Mesh m = mk_mesh("x=2,y=4");
    Tiling from = sp("0|+p1"), to = sp("1|");
    Shape ps;
    Tiling pspec;
    HloModule *in = reshard_module(&m, &from, &to, &ps, &pspec);
    Run run;
    assert_true(run_partition(in, &run));
    assert_int_equal(run.rep.n_warnings, 1);
    assert_string_equal(run.rep.warnings[0].kind, "full-rematerialization");
    assert_string_equal(run.rep.warnings[0].instruction, "s");
    /* the plan all-reduces y:(1)2, gathers x (the whole array on every
     * device) and slices y:(1)2 in: the target is split, the warning names
     * the planner's detour (the hand-built module has no source lines) */
    assert_int_equal(run.rep.warnings[0].line, 0);
    assert_string_equal(run.rep.warnings[0].message,
                        "r: s32[8,8] split [{x}, {}] partial(sum) over {y:(1)2} is all-gathered to its full size on "
                        "every device for s (its reshard to [{y:(1)2}, {}] goes through the whole array)");
    run_free(&run);
    hlo_module_free(in);
}

/* ================================================================ uneven shapes, simulated

 * Every pair of states of an s32[d0,d1] array whose dims do not divide by
 * their tile counts (XLA's ceil layout: tile i holds [i*c, min((i+1)*c, n)),
 * c = ceil(n/t)), including dims smaller than their tile count (tiles that
 * hold only padding).  The program runs on the project's simulator with the
 * padding of every input shard poisoned (0x5A5A5A5A); every device's real
 * elements must equal its slice of the global result. */

#define POISON INT64_C(0x5A5A5A5A)

/* reshard_module for s32[d0,d1] (partial sources: s32[8,d0,d1] reduced
 * over dim 0, split over the partial atoms). */
static HloModule *uneven_module(const Mesh *mesh, const Tiling *from, const Tiling *to, int64_t d0, int64_t d1,
                                Shape *param_shape, Tiling *param_spec)
{
    HloModule *m = hlo_module_new("uneven");
    m->mesh = *mesh;
    m->has_mesh = true;
    int32_t add = from->partial ? add_computation(m, ET_S32) : -1;
    int32_t c = hlo_add_computation(m, "main", true);
    Shape s2 = shp(ET_S32, 2, d0, d1, 0);
    int32_t v;
    if (!from->partial) {
        *param_shape = s2;
        *param_spec = *from;
        v = hlo_add_inst(m, c, HLO_PARAMETER, "p", &s2, NULL, 0);
        hlo_inst(m, c, v)->sharding = mk_sharding(m, from);
    } else {
        Tiling ps;
        tiling_replicated(&ps, 3);
        int8_t run[SPMDC_MAX_ATOMS];
        int32_t n = 0;
        for (int32_t a = 0; a < SPMDC_MAX_ATOMS; a++)
            if (from->partial & (1u << a))
                run[n++] = (int8_t)a;
        tiling_set_dim(&ps, 0, run, n);
        tiling_set_dim(&ps, 1, tiling_dim(from, 0), tiling_dim_n(from, 0));
        tiling_set_dim(&ps, 2, tiling_dim(from, 1), tiling_dim_n(from, 1));
        *param_shape = shp(ET_S32, 3, 8, d0, d1);
        *param_spec = ps;
        int32_t p = hlo_add_inst(m, c, HLO_PARAMETER, "p", param_shape, NULL, 0);
        hlo_inst(m, c, p)->sharding = mk_sharding(m, &ps);
        Shape s0 = shape_scalar(ET_S32);
        int32_t z = hlo_add_inst(m, c, HLO_CONSTANT, "zero", &s0, NULL, 0);
        Literal *lit = ARENA_NEW(m->arena, Literal);
        lit->n = 1;
        lit->i = ARENA_ARRAY(m->arena, int64_t, 1);
        hlo_attrs_mut(m, hlo_inst(m, c, z))->literal = lit;
        hlo_inst(m, c, z)->sharding = mk_sharding(m, &(Tiling){0});
        int32_t ops[2] = {p, z};
        v = hlo_add_inst(m, c, HLO_REDUCE, "r", &s2, ops, 2);
        HloAttrs *ra = hlo_attrs_mut(m, hlo_inst(m, c, v));
        int64_t dd = 0;
        ra->dimensions = hlo_intlist(m, &dd, 1);
        ra->to_apply = add;
        hlo_inst(m, c, v)->sharding = mk_sharding(m, from);
    }
    int32_t r = hlo_add_inst(m, c, HLO_CUSTOM_CALL, "s", &s2, &v, 1);
    hlo_attrs_mut(m, hlo_inst(m, c, r))->custom_call_target = "Sharding";
    hlo_inst(m, c, r)->sharding = mk_sharding(m, to);
    return m;
}

/* Device dev's shard (ceil layout) of the global int array g under s;
 * padding = POISON. valid (may be NULL) gets 1 for real elements. */
static SimValue uneven_shard(const Mesh *m, const int64_t *g, const Shape *gs, const Tiling *s, int64_t dev,
                             uint8_t **valid)
{
    Shape ls = tiling_local_shape(s, m, gs);
    SimValue r = sim_value_new(&ls);
    int64_t n = shape_elem_count(&ls);
    if (valid)
        *valid = calloc((size_t)n + 1, 1);
    for (int64_t k = 0; k < n; k++) {
        int64_t lin = k, gl = 0;
        int64_t idx[SPMDC_MAX_RANK];
        bool in = true;
        for (int32_t d = ls.rank - 1; d >= 0; d--) {
            idx[d] = lin % ls.dims[d] + tiling_offset(s, m, gs, d, dev);
            lin /= ls.dims[d];
            in &= idx[d] < gs->dims[d];
        }
        for (int32_t d = 0; d < ls.rank; d++)
            gl = gl * gs->dims[d] + idx[d];
        sim_value_set_i64(&r, k, in ? g[gl] : POISON);
        if (valid)
            (*valid)[k] = in;
    }
    return r;
}

static void check_uneven(const Mesh *mesh, const Tiling *from, const Tiling *to, int64_t d0, int64_t d1)
{
    Shape ps;
    Tiling pspec;
    HloModule *in = uneven_module(mesh, from, to, d0, d1, &ps, &pspec);
    Run run;
    if (!run_partition(in, &run))
        fail_msg("partition failed for %s -> %s: %s", spec_str(mesh, from), spec_str(mesh, to), diag_text(run.diag));
    int64_t n = shape_elem_count(&ps), nd = mesh->n_devices;
    int64_t *g = malloc(sizeof(int64_t) * (size_t)n), *want = calloc((size_t)(d0 * d1) + 1, sizeof(int64_t));
    for (int64_t k = 0; k < n; k++) {
        g[k] = k * 7 % 101 - 50;
        want[k % (d0 * d1)] += g[k];
    }
    SimValue *args = calloc((size_t)nd, sizeof(SimValue)), *outs = calloc((size_t)nd, sizeof(SimValue));
    for (int64_t dev = 0; dev < nd; dev++)
        args[dev] = uneven_shard(mesh, g, &ps, &pspec, dev, NULL);
    DiagEngine *diag = diag_create(NULL);
    SimOptions o = {nd, 1, NULL, NULL, 0};
    if (!sim_run_spmd(run.out, &o, args, 1, outs, diag))
        fail_msg("simulation failed: %s", diag_text(diag));
    Shape rs = shp(ET_S32, 2, d0, d1, 0);
    for (int64_t dev = 0; dev < nd; dev++) {
        uint8_t *valid;
        SimValue exp = uneven_shard(mesh, want, &rs, to, dev, &valid);
        int64_t ne = shape_elem_count(&exp.shape);
        bool ok = shape_elem_count(&outs[dev].shape) == ne && outs[dev].shape.rank == 2 &&
                  outs[dev].shape.dims[0] == exp.shape.dims[0];
        for (int64_t k = 0; ok && k < ne; k++)
            ok = !valid[k] || sim_value_get_i64(&outs[dev], k) == sim_value_get_i64(&exp, k);
        if (!ok) {
            StrBuf b = {0};
            HloPrintOptions po = {0};
            hlo_print_module(&b, run.out, &po);
            fail_msg("s32[%lld,%lld]: device %lld wrong for %s -> %s:\n%s", (long long)d0, (long long)d1,
                     (long long)dev, spec_str(mesh, from), spec_str(mesh, to), sb_cstr(&b));
        }
        free(valid);
        sim_value_release(&exp);
        sim_value_release(&outs[dev]);
        sim_value_release(&args[dev]);
    }
    /* every report row's bytes add up to the plan's (part_cost agrees) */
    int64_t total = 0;
    for (int32_t k = 0; k < run.rep.n_records; k++)
        total += run.rep.records[k].bytes_per_device;
    Shape gs2 = shp(ET_S32, 2, d0, d1, 0);
    if (!from->partial)
        assert_int_equal(total, reshard_cost(mesh, &gs2, from, to));
    diag_destroy(diag);
    free(args);
    free(outs);
    free(g);
    free(want);
    run_free(&run);
    hlo_module_free(in);
}

static void uneven_exhaustive(const char *mesh_spec, bool partial, int64_t d0, int64_t d1)
{
    Mesh m = mk_mesh(mesh_spec);
    Tiling *from = calloc(512, sizeof(Tiling)), *to = calloc(512, sizeof(Tiling));
    int32_t nf = gen_specs(&m, partial, from, 512), nt = gen_specs(&m, false, to, 512);
    for (int32_t a = 0; a < nf; a++)
        for (int32_t b = 0; b < nt; b++)
            check_uneven(&m, &from[a], &to[b], d0, d1);
    free(from);
    free(to);
}

static void test_uneven_exhaustive_x2_y4(void **state)
{
    (void)state;
    uneven_exhaustive("x=2,y=4", false, 7, 5);   /* 7 in 2/4/8 tiles: 4, 2, 1 rows; 5 likewise */
    uneven_exhaustive("x=2,y=4", false, 17, 3);  /* 3 < 4 and 8 tiles: some hold only padding */
    uneven_exhaustive("x=2,y=4", true, 7, 5);
}

static void test_uneven_exhaustive_x2_y2_z2(void **state)
{
    (void)state;
    uneven_exhaustive("x=2,y=2,z=2", false, 7, 5);
    uneven_exhaustive("x=2,y=2,z=2", true, 1, 31);
}

static void test_uneven_exhaustive_x3_y2(void **state)
{
    (void)state;
    uneven_exhaustive("x=3,y=2", false, 7, 10);
    uneven_exhaustive("x=3,y=2", true, 4, 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_same_is_empty),
        cmocka_unit_test(test_plan_replicated_to_split_is_local),
        cmocka_unit_test(test_plan_split_to_replicated_all_gather),
        cmocka_unit_test(test_plan_dim_swap_all_to_all),
        cmocka_unit_test(test_plan_partial_all_reduce),
        cmocka_unit_test(test_plan_partial_reduce_scatter),
        cmocka_unit_test(test_plan_partial_2d_scatter_then_reduce),
        cmocka_unit_test(test_plan_slice_before_reduce),
        cmocka_unit_test(test_plan_general_path_full_remat),
        cmocka_unit_test(test_plan_permute_then_gather),
        cmocka_unit_test(test_plan_partial_gather_then_all_to_all),
        cmocka_unit_test(test_plan_reorder_collective_permute),
        cmocka_unit_test(test_plan_mask_creates_partial),
        cmocka_unit_test(test_plan_device_order),
        cmocka_unit_test(test_2d_gather_groups),
        cmocka_unit_test(test_all_to_all_program),
        cmocka_unit_test(test_replicated_to_split_program),
        cmocka_unit_test(test_partial_reduce_scatter_program),
        cmocka_unit_test(test_collective_permute_program),
        cmocka_unit_test(test_full_remat_warning),
        cmocka_unit_test(test_numeric_mesh_8_and_6),
        cmocka_unit_test(test_numeric_exhaustive_x2_y4),
        cmocka_unit_test(test_numeric_exhaustive_x2_y2_z2),
        cmocka_unit_test(test_numeric_exhaustive_partial_x2_y4),
        cmocka_unit_test(test_numeric_exhaustive_partial_x2_y2_z2),
        cmocka_unit_test(test_uneven_exhaustive_x2_y4),
        cmocka_unit_test(test_uneven_exhaustive_x2_y2_z2),
        cmocka_unit_test(test_uneven_exhaustive_x3_y2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
