/* print_test.c - hlo_print: IR built by hand printed as exact HLO text
 * (every HloAttrs field in XLA's spelling, literals, replica groups in iota
 * and explicit form, shardings, raw attributes), and print->parse->print
 * round trips once the parser is there. */
#include <setjmp.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "spmdc/hlo.h"
#include "spmdc/parse.h"

typedef struct Fx {
    HloModule *m;
    int32_t sum, main;
} Fx;

static Shape sh(ElemType t, int32_t rank, int64_t d0, int64_t d1, int64_t d2, int64_t d3)
{
    int64_t dims[4] = {d0, d1, d2, d3};
    return shape_array(t, rank, dims);
}

static const Shape F32 = {.type = ET_F32};

/* Adds an instruction to the entry; operands by name. */
static HloInst *add(Fx *f, int32_t c, HloOpcode op, const char *name, Shape s, const char *ops)
{
    int32_t idx[8], n = 0;
    char buf[128];
    snprintf(buf, sizeof buf, "%s", ops ? ops : "");
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        idx[n] = hlo_find_inst(f->m, c, tok);
        if (idx[n] < 0)
            fail_msg("no operand %s", tok);
        n++;
    }
    int32_t i = hlo_add_inst(f->m, c, op, name, &s, idx, n);
    return hlo_inst(f->m, c, i);
}

static int setup(void **state)
{
    Fx *f = calloc(1, sizeof *f);
    f->m = hlo_module_new("t");
    f->sum = hlo_add_computation(f->m, "sum", false);
    HloInst *a = add(f, f->sum, HLO_PARAMETER, "a", F32, NULL);
    HloInst *b = add(f, f->sum, HLO_PARAMETER, "b", F32, NULL);
    b->param_number = 1;
    (void)a;
    add(f, f->sum, HLO_ADD, "add", F32, "a,b");
    f->main = hlo_add_computation(f->m, "main", true);
    hlo_reserve_insts(f->m, f->main, 256); /* the tests hold HloInst pointers across adds */
    add(f, f->main, HLO_PARAMETER, "p", sh(ET_F32, 2, 8, 16, 0, 0), NULL);
    *state = f;
    return 0;
}

/* With PRINT_TEST_DUMP=DIR each test's module is also written to
 * DIR/<module>.<n>.hlo, to be checked by tools/check_xla_parse.py. */
static void dump(const HloModule *m)
{
    static int n;
    const char *dir = getenv("PRINT_TEST_DUMP");
    if (!dir)
        return;
    char path[512];
    snprintf(path, sizeof path, "%s/%s.%d.hlo", dir, m->name, n++);
    FILE *fp = fopen(path, "w");
    if (!fp)
        return;
    StrBuf b = {0};
    HloPrintOptions opt = {true, false, false};
    hlo_print_module(&b, m, &opt);
    fputs(sb_cstr(&b), fp);
    fclose(fp);
    sb_free(&b);
}

static int teardown(void **state)
{
    Fx *f = *state;
    dump(f->m);
    hlo_module_free(f->m);
    free(f);
    return 0;
}

static const HloPrintOptions ALL = {true, true, true};
static const HloPrintOptions NONE = {false, false, false};

static void expect_inst(Fx *f, const HloInst *inst, const HloPrintOptions *opt, const char *want)
{
    const HloComputation *c = hlo_comp(f->m, f->main);
    int32_t i = (int32_t)(inst - c->insts);
    StrBuf b = {0};
    hlo_print_inst(&b, f->m, f->main, i, opt);
    assert_string_equal(sb_cstr(&b), want);
    sb_free(&b);
}

static IntList L(Fx *f, int32_t n, const int64_t *v) { return hlo_intlist(f->m, v, n); }

/* ------------------------------------------------------------ constants */

static Literal *lit(Fx *f, int64_t n, const int64_t *iv, const double *fv)
{
    Literal *l = ARENA_NEW(f->m->arena, Literal);
    l->n = n;
    if (iv)
        l->i = arena_memdup(f->m->arena, iv, sizeof(int64_t) * (size_t)n);
    if (fv)
        l->f = arena_memdup(f->m->arena, fv, sizeof(double) * (size_t)n);
    return l;
}

static void test_constants(void **state)
{
    Fx *f = *state;
    HloInst *c0 = add(f, f->main, HLO_CONSTANT, "c0", F32, NULL);
    hlo_attrs_mut(f->m, c0)->literal = lit(f, 1, NULL, (double[]){0.0});
    expect_inst(f, c0, &NONE, "%c0 = f32[] constant(0)");

    HloInst *c1 = add(f, f->main, HLO_CONSTANT, "c1", sh(ET_F32, 2, 2, 3, 0, 0), NULL);
    hlo_attrs_mut(f->m, c1)->literal = lit(f, 6, NULL, (double[]){1, 2.5, -0.1, NAN, INFINITY, -INFINITY});
    expect_inst(f, c1, &NONE, "%c1 = f32[2,3] constant({{1, 2.5, -0.1}, {nan, inf, -inf}})");

    /* shortest text that reads back: 1/3, 1e+20, 1e-07, 0.1f as a double */
    HloInst *c2 = add(f, f->main, HLO_CONSTANT, "c2", sh(ET_F64, 1, 5, 0, 0, 0), NULL);
    hlo_attrs_mut(f->m, c2)->literal = lit(f, 5, NULL, (double[]){1.0 / 3.0, 1e20, 1e-7, (double)0.1f, -0.0});
    expect_inst(f, c2, &NONE,
                "%c2 = f64[5] constant({0.3333333333333333, 1e+20, 1e-07, 0.10000000149011612, -0.0})");

    HloInst *c3 = add(f, f->main, HLO_CONSTANT, "c3", sh(ET_PRED, 1, 3, 0, 0, 0), NULL);
    hlo_attrs_mut(f->m, c3)->literal = lit(f, 3, (int64_t[]){1, 0, 1}, NULL);
    expect_inst(f, c3, &NONE, "%c3 = pred[3] constant({true, false, true})");

    HloInst *c4 = add(f, f->main, HLO_CONSTANT, "c4", sh(ET_U64, 1, 2, 0, 0, 0), NULL);
    hlo_attrs_mut(f->m, c4)->literal = lit(f, 2, (int64_t[]){-1, 7}, NULL);
    expect_inst(f, c4, &NONE, "%c4 = u64[2] constant({18446744073709551615, 7})");

    HloInst *c5 = add(f, f->main, HLO_CONSTANT, "c5", sh(ET_S32, 0, 0, 0, 0, 0), NULL);
    hlo_attrs_mut(f->m, c5)->literal = lit(f, 1, (int64_t[]){-5}, NULL);
    expect_inst(f, c5, &NONE, "%c5 = s32[] constant(-5)");

    HloInst *c6 = add(f, f->main, HLO_CONSTANT, "c6", sh(ET_C64, 1, 1, 0, 0, 0), NULL);
    hlo_attrs_mut(f->m, c6)->literal = lit(f, 2, NULL, (double[]){1.5, -2});
    hlo_attrs_mut(f->m, c6)->literal->n = 1;
    expect_inst(f, c6, &NONE, "%c6 = c64[1] constant({(1.5, -2)})");

    HloInst *c7 = add(f, f->main, HLO_CONSTANT, "c7", sh(ET_BF16, 2, 64, 64, 0, 0), NULL);
    hlo_attrs_mut(f->m, c7)->literal = lit(f, 0, NULL, NULL);
    hlo_attrs_mut(f->m, c7)->literal->elided = true;
    expect_inst(f, c7, &NONE, "%c7 = bf16[64,64] constant({...})");

    HloInst *c8 = add(f, f->main, HLO_CONSTANT, "c8", sh(ET_F32, 2, 2, 0, 0, 0), NULL);
    hlo_attrs_mut(f->m, c8)->literal = lit(f, 0, NULL, NULL);
    expect_inst(f, c8, &NONE, "%c8 = f32[2,0] constant({{}, {}})");

    HloInst *c9 = add(f, f->main, HLO_CONSTANT, "c9", sh(ET_S8, 3, 2, 1, 2, 0), NULL);
    hlo_attrs_mut(f->m, c9)->literal = lit(f, 4, (int64_t[]){1, 2, 3, 4}, NULL);
    expect_inst(f, c9, &NONE, "%c9 = s8[2,1,2] constant({{{1, 2}}, {{3, 4}}})");
}

/* ------------------------------------------------------------ data movement */

static void test_shape_ops(void **state)
{
    Fx *f = *state;
    HloInst *p = hlo_inst(f->m, f->main, 0);
    Shape laid = *p->shape;
    laid.has_layout = true;
    laid.minor_to_major[0] = 1;
    laid.minor_to_major[1] = 0;
    p->shape = hlo_shape(f->m, &laid);
    expect_inst(f, p, &ALL, "%p = f32[8,16]{1,0} parameter(0)");
    expect_inst(f, p, &NONE, "%p = f32[8,16] parameter(0)");

    HloInst *io = add(f, f->main, HLO_IOTA, "io", sh(ET_S32, 2, 4, 8, 0, 0), NULL);
    hlo_attrs_mut(f->m, io)->iota_dimension = 1;
    expect_inst(f, io, &NONE, "%io = s32[4,8] iota(), iota_dimension=1");

    HloInst *bc = add(f, f->main, HLO_BROADCAST, "bc", sh(ET_F32, 3, 8, 4, 16, 0), "p");
    hlo_attrs_mut(f->m, bc)->dimensions = L(f, 2, (int64_t[]){0, 2});
    expect_inst(f, bc, &NONE, "%bc = f32[8,4,16] broadcast(%p), dimensions={0,2}");
    HloInst *c = add(f, f->main, HLO_CONSTANT, "c", F32, NULL);
    HloInst *bs = add(f, f->main, HLO_BROADCAST, "bs", sh(ET_F32, 1, 4, 0, 0, 0), "c");
    expect_inst(f, c, &NONE, "%c = f32[] constant(0)");
    expect_inst(f, bs, &NONE, "%bs = f32[4] broadcast(%c), dimensions={}");

    HloInst *tr = add(f, f->main, HLO_TRANSPOSE, "tr", sh(ET_F32, 2, 16, 8, 0, 0), "p");
    hlo_attrs_mut(f->m, tr)->dimensions = L(f, 2, (int64_t[]){1, 0});
    expect_inst(f, tr, &NONE, "%tr = f32[16,8] transpose(%p), dimensions={1,0}");

    HloInst *sl = add(f, f->main, HLO_SLICE, "sl", sh(ET_F32, 2, 4, 6, 0, 0), "p");
    HloAttrs *a = hlo_attrs_mut(f->m, sl);
    a->slice_start = L(f, 2, (int64_t[]){0, 2});
    a->slice_limit = L(f, 2, (int64_t[]){8, 14});
    a->slice_stride = L(f, 2, (int64_t[]){2, 1});
    expect_inst(f, sl, &NONE, "%sl = f32[4,6] slice(%p), slice={[0:8:2], [2:14]}");

    HloInst *s32 = add(f, f->main, HLO_CONSTANT, "i0", sh(ET_S32, 0, 0, 0, 0, 0), NULL);
    (void)s32;
    HloInst *ds = add(f, f->main, HLO_DYNAMIC_SLICE, "ds", sh(ET_F32, 2, 2, 16, 0, 0), "p,i0,i0");
    hlo_attrs_mut(f->m, ds)->dynamic_slice_sizes = L(f, 2, (int64_t[]){2, 16});
    expect_inst(f, ds, &NONE, "%ds = f32[2,16] dynamic-slice(%p, %i0, %i0), dynamic_slice_sizes={2,16}");

    HloInst *pd = add(f, f->main, HLO_PAD, "pd", sh(ET_F32, 2, 9, 18, 0, 0), "p,c");
    a = hlo_attrs_mut(f->m, pd);
    a->pad_lo = L(f, 2, (int64_t[]){0, 1});
    a->pad_hi = L(f, 2, (int64_t[]){1, -1});
    a->pad_interior = L(f, 2, (int64_t[]){0, 0});
    expect_inst(f, pd, &NONE, "%pd = f32[9,18] pad(%p, %c), padding=0_1x1_-1");
    a->pad_interior.v[1] = 1;
    expect_inst(f, pd, &NONE, "%pd = f32[9,18] pad(%p, %c), padding=0_1_0x1_-1_1");

    HloInst *cc = add(f, f->main, HLO_CONCATENATE, "cc", sh(ET_F32, 2, 16, 16, 0, 0), "p,p");
    hlo_attrs_mut(f->m, cc)->dimensions = L(f, 1, (int64_t[]){0});
    expect_inst(f, cc, &NONE, "%cc = f32[16,16] concatenate(%p, %p), dimensions={0}");

    HloInst *rv = add(f, f->main, HLO_REVERSE, "rv", sh(ET_F32, 2, 8, 16, 0, 0), "p");
    hlo_attrs_mut(f->m, rv)->dimensions = L(f, 1, (int64_t[]){1});
    expect_inst(f, rv, &NONE, "%rv = f32[8,16] reverse(%p), dimensions={1}");

    HloInst *rs = add(f, f->main, HLO_RESHAPE, "rs", sh(ET_F32, 1, 128, 0, 0, 0), "p");
    expect_inst(f, rs, &NONE, "%rs = f32[128] reshape(%p)");

    Shape tup_elems[2] = {sh(ET_F32, 2, 8, 16, 0, 0), F32};
    Shape tup = {.type = ET_TUPLE, .n_elems = 2, .elems = tup_elems};
    HloInst *tu = add(f, f->main, HLO_TUPLE, "tu", tup, "p,c");
    expect_inst(f, tu, &NONE, "%tu = (f32[8,16], f32[]) tuple(%p, %c)");
    HloInst *ge = add(f, f->main, HLO_GET_TUPLE_ELEMENT, "ge", F32, "tu");
    hlo_attrs_mut(f->m, ge)->index = 1;
    expect_inst(f, ge, &NONE, "%ge = f32[] get-tuple-element(%tu), index=1");

    HloInst *cmp = add(f, f->main, HLO_COMPARE, "cmp", sh(ET_PRED, 2, 8, 16, 0, 0), "p,p");
    hlo_attrs_mut(f->m, cmp)->direction = CMP_GE;
    expect_inst(f, cmp, &NONE, "%cmp = pred[8,16] compare(%p, %p), direction=GE");
    hlo_attrs_mut(f->m, cmp)->compare_type = "TOTALORDER";
    expect_inst(f, cmp, &NONE, "%cmp = pred[8,16] compare(%p, %p), direction=GE, type=TOTALORDER");
    HloInst *sel = add(f, f->main, HLO_SELECT, "sel", sh(ET_F32, 2, 8, 16, 0, 0), "cmp,p,p");
    expect_inst(f, sel, &NONE, "%sel = f32[8,16] select(%cmp, %p, %p)");
}

/* ------------------------------------------------------------ compute */

static void test_compute_ops(void **state)
{
    Fx *f = *state;
    HloInst *dot = add(f, f->main, HLO_DOT, "dot", sh(ET_F32, 2, 8, 8, 0, 0), "p,p");
    HloAttrs *a = hlo_attrs_mut(f->m, dot);
    a->lhs_contracting = L(f, 1, (int64_t[]){1});
    a->rhs_contracting = L(f, 1, (int64_t[]){1});
    expect_inst(f, dot, &NONE, "%dot = f32[8,8] dot(%p, %p), lhs_contracting_dims={1}, rhs_contracting_dims={1}");
    a->lhs_batch = L(f, 1, (int64_t[]){0});
    a->rhs_batch = L(f, 1, (int64_t[]){0});
    expect_inst(f, dot, &NONE,
                "%dot = f32[8,8] dot(%p, %p), lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={0}, "
                "rhs_contracting_dims={1}");

    HloInst *c = add(f, f->main, HLO_CONSTANT, "zero", F32, NULL);
    (void)c;
    HloInst *red = add(f, f->main, HLO_REDUCE, "red", sh(ET_F32, 1, 8, 0, 0, 0), "p,zero");
    a = hlo_attrs_mut(f->m, red);
    a->dimensions = L(f, 1, (int64_t[]){1});
    a->to_apply = f->sum;
    expect_inst(f, red, &NONE, "%red = f32[8] reduce(%p, %zero), dimensions={1}, to_apply=%sum");

    HloInst *rw = add(f, f->main, HLO_REDUCE_WINDOW, "rw", sh(ET_F32, 2, 4, 16, 0, 0), "p,zero");
    a = hlo_attrs_mut(f->m, rw);
    a->window = ARENA_NEW(f->m->arena, Window);
    a->window->rank = 2;
    a->window->dims[0] = (WindowDim){3, 2, 1, 0, 1, 1, false};
    a->window->dims[1] = (WindowDim){1, 1, 0, 0, 1, 1, false};
    a->to_apply = f->sum;
    expect_inst(f, rw, &NONE,
                "%rw = f32[4,16] reduce-window(%p, %zero), window={size=3x1 stride=2x1 pad=1_0x0_0}, to_apply=%sum");
    a->window->dims[0] = (WindowDim){2, 1, 0, 0, 1, 1, false};
    expect_inst(f, rw, &NONE, "%rw = f32[4,16] reduce-window(%p, %zero), window={size=2x1}, to_apply=%sum");

    HloInst *k = add(f, f->main, HLO_PARAMETER, "k", sh(ET_F32, 4, 3, 3, 4, 8), NULL);
    k->param_number = 1;
    HloInst *img = add(f, f->main, HLO_PARAMETER, "img", sh(ET_F32, 4, 1, 8, 8, 4), NULL);
    img->param_number = 2;
    HloInst *cv = add(f, f->main, HLO_CONVOLUTION, "cv", sh(ET_F32, 4, 1, 8, 8, 8), "img,k");
    a = hlo_attrs_mut(f->m, cv);
    a->window = ARENA_NEW(f->m->arena, Window);
    a->window->rank = 2;
    a->window->dims[0] = (WindowDim){3, 1, 1, 1, 1, 2, false};
    a->window->dims[1] = (WindowDim){3, 1, 1, 1, 1, 1, true};
    a->dim_labels = "b01f_01io->b01f";
    expect_inst(f, cv, &NONE,
                "%cv = f32[1,8,8,8] convolution(%img, %k), window={size=3x3 pad=1_1x1_1 rhs_dilate=2x1 "
                "rhs_reversal=0x1}, dim_labels=b01f_01io->b01f");
    /* labels rebuilt from ConvDims; group counts */
    a->dim_labels = NULL;
    a->conv = ARENA_NEW(f->m->arena, ConvDims);
    *a->conv = (ConvDims){.n_spatial = 2, .in_batch = 0, .in_feature = 3, .in_spatial = {1, 2},
                          .k_in = 2, .k_out = 3, .k_spatial = {0, 1},
                          .out_batch = 0, .out_feature = 3, .out_spatial = {1, 2}};
    a->feature_group_count = 2;
    a->window->dims[0].rhs_dilate = 1;
    a->window->dims[1].reversal = false;
    expect_inst(f, cv, &NONE,
                "%cv = f32[1,8,8,8] convolution(%img, %k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, "
                "feature_group_count=2");

    HloInst *ix = add(f, f->main, HLO_PARAMETER, "ix", sh(ET_S32, 2, 5, 1, 0, 0), NULL);
    ix->param_number = 3;
    HloInst *ga = add(f, f->main, HLO_GATHER, "ga", sh(ET_F32, 2, 5, 16, 0, 0), "p,ix");
    a = hlo_attrs_mut(f->m, ga);
    a->offset_dims = L(f, 1, (int64_t[]){1});
    a->collapsed_slice_dims = L(f, 1, (int64_t[]){0});
    a->start_index_map = L(f, 1, (int64_t[]){0});
    a->index_vector_dim = 1;
    a->slice_sizes = L(f, 2, (int64_t[]){1, 16});
    a->indices_are_sorted = true;
    expect_inst(f, ga, &NONE,
                "%ga = f32[5,16] gather(%p, %ix), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, "
                "index_vector_dim=1, slice_sizes={1,16}, indices_are_sorted=true");
    HloInst *up = add(f, f->main, HLO_PARAMETER, "up", sh(ET_F32, 2, 5, 16, 0, 0), NULL);
    up->param_number = 4;
    HloInst *sc = add(f, f->main, HLO_SCATTER, "sc", sh(ET_F32, 2, 8, 16, 0, 0), "p,ix,up");
    a = hlo_attrs_mut(f->m, sc);
    a->update_window_dims = L(f, 1, (int64_t[]){1});
    a->inserted_window_dims = L(f, 1, (int64_t[]){0});
    a->scatter_dims_to_operand_dims = L(f, 1, (int64_t[]){0});
    a->index_vector_dim = 1;
    a->unique_indices = true;
    a->to_apply = f->sum;
    expect_inst(f, sc, &NONE,
                "%sc = f32[8,16] scatter(%p, %ix, %up), update_window_dims={1}, inserted_window_dims={0}, "
                "scatter_dims_to_operand_dims={0}, index_vector_dim=1, unique_indices=true, to_apply=%sum");

    HloInst *so = add(f, f->main, HLO_SORT, "so", sh(ET_F32, 2, 8, 16, 0, 0), "p");
    a = hlo_attrs_mut(f->m, so);
    a->dimensions = L(f, 1, (int64_t[]){1});
    a->is_stable = true;
    a->to_apply = f->sum;
    expect_inst(f, so, &NONE, "%so = f32[8,16] sort(%p), dimensions={1}, is_stable=true, to_apply=%sum");

    HloInst *rng = add(f, f->main, HLO_RNG, "rng", sh(ET_F32, 1, 4, 0, 0, 0), "zero,zero");
    hlo_attrs_mut(f->m, rng)->rng_distribution = "rng_uniform";
    expect_inst(f, rng, &NONE, "%rng = f32[4] rng(%zero, %zero), distribution=rng_uniform");
}

/* ------------------------------------------------------------ collectives */

static ReplicaGroups groups(Fx *f, int64_t n, int64_t s, const int64_t *ids)
{
    ReplicaGroups g = {n, s, arena_memdup(f->m->arena, ids, sizeof(int64_t) * (size_t)(n * s))};
    return g;
}

static void test_collectives(void **state)
{
    Fx *f = *state;
    char err[128];
    assert_true(mesh_parse_spec("x=2,y=4", &f->m->mesh, err, sizeof err));
    f->m->has_mesh = true;
    HloInst *ar = add(f, f->main, HLO_ALL_REDUCE, "ar", sh(ET_F32, 2, 8, 16, 0, 0), "p");
    HloAttrs *a = hlo_attrs_mut(f->m, ar);
    a->channel_id = 1;
    a->use_global_device_ids = true;
    a->to_apply = f->sum;
    /* along y: {0,1,2,3},{4,5,6,7} */
    a->replica_groups = groups(f, 2, 4, (int64_t[]){0, 1, 2, 3, 4, 5, 6, 7});
    expect_inst(f, ar, &NONE,
                "%ar = f32[8,16] all-reduce(%p), channel_id=1, replica_groups=[2,4]<=[8], use_global_device_ids=true, "
                "to_apply=%sum");
    /* along x: {0,4},{1,5},{2,6},{3,7} */
    a->replica_groups = groups(f, 4, 2, (int64_t[]){0, 4, 1, 5, 2, 6, 3, 7});
    expect_inst(f, ar, &NONE,
                "%ar = f32[8,16] all-reduce(%p), channel_id=1, replica_groups=[4,2]<=[2,4]T(1,0), "
                "use_global_device_ids=true, to_apply=%sum");
    /* along y0 only: {0,2},{1,3},{4,6},{5,7} */
    a->replica_groups = groups(f, 4, 2, (int64_t[]){0, 2, 1, 3, 4, 6, 5, 7});
    expect_inst(f, ar, &NONE,
                "%ar = f32[8,16] all-reduce(%p), channel_id=1, replica_groups=[4,2]<=[2,2,2]T(0,2,1), "
                "use_global_device_ids=true, to_apply=%sum");
    /* no transposed iota: explicit */
    a->replica_groups = groups(f, 2, 4, (int64_t[]){0, 1, 2, 4, 3, 5, 6, 7});
    expect_inst(f, ar, &NONE,
                "%ar = f32[8,16] all-reduce(%p), channel_id=1, replica_groups={{0,1,2,4},{3,5,6,7}}, "
                "use_global_device_ids=true, to_apply=%sum");
    /* a subset of the devices: explicit */
    a->replica_groups = groups(f, 1, 2, (int64_t[]){0, 1});
    a->channel_id = 0;
    a->use_global_device_ids = false;
    expect_inst(f, ar, &NONE, "%ar = f32[8,16] all-reduce(%p), replica_groups=[1,2]<=[2], to_apply=%sum");
    a->replica_groups = groups(f, 1, 3, (int64_t[]){0, 2, 1});
    expect_inst(f, ar, &NONE, "%ar = f32[8,16] all-reduce(%p), replica_groups={{0,2,1}}, to_apply=%sum");
    a->replica_groups = (ReplicaGroups){0, 0, NULL};
    expect_inst(f, ar, &NONE, "%ar = f32[8,16] all-reduce(%p), replica_groups={}, to_apply=%sum");

    HloInst *ag = add(f, f->main, HLO_ALL_GATHER, "ag", sh(ET_F32, 2, 32, 16, 0, 0), "p");
    a = hlo_attrs_mut(f->m, ag);
    a->channel_id = 2;
    a->use_global_device_ids = true;
    a->dimensions = L(f, 1, (int64_t[]){0});
    a->replica_groups = groups(f, 2, 4, (int64_t[]){0, 1, 2, 3, 4, 5, 6, 7});
    expect_inst(f, ag, &NONE,
                "%ag = f32[32,16] all-gather(%p), channel_id=2, replica_groups=[2,4]<=[8], dimensions={0}, "
                "use_global_device_ids=true");

    HloInst *rs = add(f, f->main, HLO_REDUCE_SCATTER, "rs", sh(ET_F32, 2, 2, 16, 0, 0), "p");
    a = hlo_attrs_mut(f->m, rs);
    a->channel_id = 3;
    a->use_global_device_ids = true;
    a->dimensions = L(f, 1, (int64_t[]){0});
    a->to_apply = f->sum;
    a->replica_groups = groups(f, 1, 8, (int64_t[]){0, 1, 2, 3, 4, 5, 6, 7});
    expect_inst(f, rs, &NONE,
                "%rs = f32[2,16] reduce-scatter(%p), channel_id=3, replica_groups=[1,8]<=[8], "
                "use_global_device_ids=true, dimensions={0}, to_apply=%sum");

    HloInst *aa = add(f, f->main, HLO_ALL_TO_ALL, "aa", sh(ET_F32, 2, 8, 16, 0, 0), "p");
    a = hlo_attrs_mut(f->m, aa);
    a->channel_id = 4;
    a->dimensions = L(f, 1, (int64_t[]){1});
    a->replica_groups = groups(f, 4, 2, (int64_t[]){0, 4, 1, 5, 2, 6, 3, 7});
    expect_inst(f, aa, &NONE,
                "%aa = f32[8,16] all-to-all(%p), channel_id=4, replica_groups=[4,2]<=[2,4]T(1,0), dimensions={1}");

    HloInst *cp = add(f, f->main, HLO_COLLECTIVE_PERMUTE, "cp", sh(ET_F32, 2, 8, 16, 0, 0), "p");
    a = hlo_attrs_mut(f->m, cp);
    a->channel_id = 5;
    a->n_pairs = 2;
    a->pairs = arena_memdup(f->m->arena, (int64_t[]){0, 1, 1, 0}, 4 * sizeof(int64_t));
    expect_inst(f, cp, &NONE, "%cp = f32[8,16] collective-permute(%p), channel_id=5, source_target_pairs={{0,1},{1,0}}");
    HloInst *pid = add(f, f->main, HLO_PARTITION_ID, "pid", sh(ET_U32, 0, 0, 0, 0, 0), NULL);
    expect_inst(f, pid, &NONE, "%pid = u32[] partition-id()");
}

/* ------------------------------------------------------------ calls, shardings, raw */

static void test_calls_and_raw(void **state)
{
    Fx *f = *state;
    HloInst *cl = add(f, f->main, HLO_CALL, "cl", sh(ET_F32, 2, 8, 16, 0, 0), "p");
    hlo_attrs_mut(f->m, cl)->to_apply = f->sum;
    expect_inst(f, cl, &NONE, "%cl = f32[8,16] call(%p), to_apply=%sum");
    HloInst *wh = add(f, f->main, HLO_WHILE, "wh", sh(ET_F32, 2, 8, 16, 0, 0), "p");
    hlo_attrs_mut(f->m, wh)->condition = f->sum;
    hlo_attrs_mut(f->m, wh)->body = f->sum;
    expect_inst(f, wh, &NONE, "%wh = f32[8,16] while(%p), condition=%sum, body=%sum");
    HloInst *cd = add(f, f->main, HLO_CONDITIONAL, "cd", sh(ET_F32, 2, 8, 16, 0, 0), "p,p,p");
    HloAttrs *a = hlo_attrs_mut(f->m, cd);
    a->branches = L(f, 2, (int64_t[]){0, 0});
    expect_inst(f, cd, &NONE, "%cd = f32[8,16] conditional(%p, %p, %p), branch_computations={%sum, %sum}");
    a->branches_by_pred = true;
    expect_inst(f, cd, &NONE,
                "%cd = f32[8,16] conditional(%p, %p, %p), true_computation=%sum, false_computation=%sum");

    HloInst *cc = add(f, f->main, HLO_CUSTOM_CALL, "cc", sh(ET_F32, 2, 8, 16, 0, 0), "p");
    a = hlo_attrs_mut(f->m, cc);
    a->custom_call_target = "Sharding";
    hlo_add_raw_attr(f->m, cc, "backend_config", "\"unspecified_dims=[1]\"");
    hlo_add_raw_attr(f->m, cc, "metadata", "{op_name=\"x\"}");
    hlo_add_raw_attr(f->m, cc, "api_version", "API_VERSION_TYPED_FFI");
    expect_inst(f, cc, &NONE, "%cc = f32[8,16] custom-call(%p), custom_call_target=\"Sharding\", "
                              "api_version=API_VERSION_TYPED_FFI");
    expect_inst(f, cc, &ALL, "%cc = f32[8,16] custom-call(%p), custom_call_target=\"Sharding\", "
                             "backend_config=\"unspecified_dims=[1]\", metadata={op_name=\"x\"}, "
                             "api_version=API_VERSION_TYPED_FFI");
    a->called = L(f, 1, (int64_t[]){0});
    a->custom_call_target = "a\"b";
    /* a callee's backend_config configures it (a LAPACK call's uplo): kept */
    expect_inst(f, cc, &NONE, "%cc = f32[8,16] custom-call(%p), custom_call_target=\"a\\\"b\", "
                              "called_computations={%sum}, backend_config=\"unspecified_dims=[1]\", "
                              "api_version=API_VERSION_TYPED_FFI");

    /* shardings: the syntax before binding, the bound form after */
    HloInst *p = hlo_inst(f->m, f->main, 0);
    ShardingSyntax *syn = ARENA_NEW(f->m->arena, ShardingSyntax);
    syn->kind = SSYN_TILED;
    syn->n_tile_dims = 3;
    syn->tile_dims[0] = 2;
    syn->tile_dims[1] = 1;
    syn->tile_dims[2] = 2;
    syn->n_devices = 4;
    syn->devices = arena_memdup(f->m->arena, (int64_t[]){0, 2, 1, 3}, 4 * sizeof(int64_t));
    syn->last_tile_dim_replicate = true;
    p->sharding_src = syn;
    expect_inst(f, p, &ALL, "%p = f32[8,16] parameter(0), sharding={devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}");
    expect_inst(f, p, &NONE, "%p = f32[8,16] parameter(0)");
    char err[128];
    assert_true(mesh_parse_spec("4", &f->m->mesh, err, sizeof err));
    f->m->has_mesh = true;
    p->sharding = ARENA_NEW(f->m->arena, Sharding);
    DiagEngine *d = diag_create(NULL);
    assert_true(sharding_bind(syn, &f->m->mesh, p->shape, p->sharding, f->m->arena, d));
    diag_destroy(d);
    expect_inst(f, p, &ALL,
                "%p = f32[8,16] parameter(0), sharding={devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}");
}

static void test_module(void **state)
{
    Fx *f = *state;
    f->m->num_partitions = 8;
    f->m->n_raw = 1;
    f->m->raw = ARENA_NEW(f->m->arena, RawAttr);
    f->m->raw[0] = (RawAttr){"is_scheduled", "true"};
    HloInst *ng = add(f, f->main, HLO_NEGATE, "neg", sh(ET_F32, 2, 8, 16, 0, 0), "p");
    (void)ng;
    StrBuf b = {0};
    hlo_print_module(&b, f->m, &NONE);
    assert_string_equal(sb_cstr(&b), "HloModule t, num_partitions=8\n"
                                     "\n"
                                     "%sum {\n"
                                     "  %a = f32[] parameter(0)\n"
                                     "  %b = f32[] parameter(1)\n"
                                     "  ROOT %add = f32[] add(%a, %b)\n"
                                     "}\n"
                                     "\n"
                                     "ENTRY %main {\n"
                                     "  %p = f32[8,16] parameter(0)\n"
                                     "  ROOT %neg = f32[8,16] negate(%p)\n"
                                     "}\n");
    sb_clear(&b);
    f->m->replica_count = 2;
    hlo_print_module(&b, f->m, &ALL);
    assert_true(strncmp(sb_cstr(&b), "HloModule t, is_scheduled=true, replica_count=2, num_partitions=8\n", 66) == 0);
    sb_free(&b);
}

/* ------------------------------------------------------------ round trips */

/* Parses text, prints it (syntax shardings), checks it is unchanged; then
 * binds (no --mesh) and prints again, expecting bound_want (NULL: text). */
static void round_trip(const char *text, const char *bound_want)
{
    DiagEngine *d = diag_create(NULL);
    diag_set_show_source(d, false);
    uint32_t fid = diag_add_file(d, "rt.hlo", text, strlen(text));
    HloModule *m = parse_hlo(text, strlen(text), fid, d);
    if (!m)
        fail_msg("parse failed: %s", diag_text(d));
    StrBuf b = {0};
    HloPrintOptions opt = {true, true, true};
    hlo_print_module(&b, m, &opt);
    assert_string_equal(sb_cstr(&b), text);
    Arena *scratch = arena_create();
    SpmdcOptions o;
    memset(&o, 0, sizeof o);
    PassCtx cx = {scratch, d, &o};
    if (!bind_shardings(m, &cx))
        fail_msg("bind failed: %s", diag_text(d));
    sb_clear(&b);
    hlo_print_module(&b, m, &opt);
    assert_string_equal(sb_cstr(&b), bound_want ? bound_want : text);
    /* and the printed text parses to the same text again */
    HloModule *m2 = parse_hlo(sb_cstr(&b), b.len, diag_add_file(d, "rt2.hlo", sb_cstr(&b), b.len), d);
    if (!m2)
        fail_msg("reparse failed: %s", diag_text(d));
    StrBuf b2 = {0};
    hlo_print_module(&b2, m2, &opt);
    assert_string_equal(sb_cstr(&b2), sb_cstr(&b));
    sb_free(&b2);
    hlo_module_free(m2);
    arena_destroy(scratch);
    hlo_module_free(m);
    sb_free(&b);
    diag_destroy(d);
}

static const char RT_POSITIONAL[] =
    "HloModule rt, num_partitions=8\n"
    "\n"
    "%sum {\n"
    "  %a = f32[] parameter(0)\n"
    "  %b = f32[] parameter(1)\n"
    "  ROOT %add = f32[] add(%a, %b)\n"
    "}\n"
    "\n"
    "ENTRY %main {\n"
    "  %p = f32[8,16]{1,0} parameter(0), sharding={devices=[2,1,4]<=[8] last_tile_dim_replicate}\n"
    "  %q = f32[16,8]{1,0} parameter(1), sharding={devices=[4,2]<=[2,4]T(1,0)}\n"
    "  %dot = f32[8,8]{1,0} dot(%p, %q), lhs_contracting_dims={1}, rhs_contracting_dims={0}, "
    "sharding={devices=[2,1,4]<=[8] last_tile_dims={unreduced}}\n"
    "  %c = f32[] constant(0), sharding={replicated}\n"
    "  %r = f32[8] reduce(%dot, %c), dimensions={1}, to_apply=%sum, sharding={maximal device=3}\n"
    "  %i = s32[8,4] iota(), iota_dimension=1, sharding={devices=[1,2,2,2]<=[2,2,2]T(0,2,1) last_tile_dims={unreduced, replicated}}\n"
    "  %sl = f32[4,16] slice(%p), slice={[0:8:2], [0:16]}\n"
    "  %t = (f32[8], s32[8,4]) tuple(%r, %i), sharding={{replicated}, {devices=[8,1]<=[8]}}\n"
    "  ROOT %ar = f32[8] all-reduce(%r), channel_id=1, replica_groups=[2,4]<=[8], use_global_device_ids=true, "
    "to_apply=%sum\n"
    "}\n";

static const char RT_EXPLICIT[] =
    "HloModule rt2\n"
    "\n"
    "ENTRY %main {\n"
    "  %p = f32[8,8] parameter(0), sharding={devices=[2,2]0,2,1,3}\n"
    "  %q = f32[8,8] parameter(1), sharding={devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}\n"
    "  ROOT %s = f32[8,8] add(%p, %q), sharding={devices=[2,2]<=[4]}\n"
    "}\n";
static const char RT_EXPLICIT_BOUND[] =
    "HloModule rt2\n"
    "\n"
    "ENTRY %main {\n"
    "  %p = f32[8,8] parameter(0), sharding={devices=[2,2]<=[2,2]T(1,0)}\n"
    "  %q = f32[8,8] parameter(1), sharding={devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}\n"
    "  ROOT %s = f32[8,8] add(%p, %q), sharding={devices=[2,2]<=[4]}\n"
    "}\n";

static const char RT_NAMED[] =
    "HloModule rt3\n"
    "\n"
    "ENTRY %main {\n"
    "  %x = f32[64,64] parameter(0), sharding={mesh[x=2,y=4], [{}, {}]}\n"
    "  %a = f32[64,64] parameter(1), sharding={mesh[x=2,y=4], [{x}, {y}]}\n"
    "  %b = f32[64,64] parameter(2), sharding={mesh[x=2,y=4], [{y:(2)2}, {x, y:(1)2}]}\n"
    "  %h = f32[64,64] dot(%x, %a), lhs_contracting_dims={1}, rhs_contracting_dims={0}, "
    "sharding={mesh[x=2,y=4], [{}, {x}], unreduced={y}}\n"
    "  ROOT %y = f32[64,64] dot(%h, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, "
    "sharding={mesh[x=2,y=4], [{}, {}]}\n"
    "}\n";

static const char RT_KINDS[] =
    "HloModule rt4, num_partitions=4\n"
    "\n"
    "ENTRY %main {\n"
    "  %a = f32[8] parameter(0), sharding={manual}\n"
    "  %b = f32[8] parameter(1), sharding={unreduced}\n"
    "  %c = f32[8] parameter(2), sharding={unknown}\n"
    "  %d = f32[8,8] parameter(3), sharding={devices=[2,2]<=[4]}\n"
    "  %e = (f32[8], f32[8,8]) parameter(4), sharding={{manual}, {unknown}}\n"
    "  ROOT %t = (f32[8], f32[8]) tuple(%a, %b), sharding={{manual}, {unreduced}}\n"
    "}\n";

/* Repeated attribute sets and replica groups, alternating, and one set
 * shared by two opcodes' texts: the printer's memo (PrintMemo) must give
 * each instruction its own text. */
static const char RT_REPEATS[] =
    "HloModule rt6, num_partitions=4\n"
    "\n"
    "%sum {\n"
    "  %x = f32[] parameter(0)\n"
    "  %y = f32[] parameter(1)\n"
    "  ROOT %s = f32[] add(%x, %y)\n"
    "}\n"
    "\n"
    "ENTRY %main {\n"
    "  %p = f32[8,8] parameter(0)\n"
    "  %t0 = f32[8,8] transpose(%p), dimensions={1,0}\n"
    "  %t1 = f32[8,8] transpose(%t0), dimensions={0,1}\n"
    "  %r0 = f32[8,8] reverse(%t1), dimensions={1,0}\n"
    "  %t2 = f32[8,8] transpose(%r0), dimensions={1,0}\n"
    "  %t3 = f32[8,8] transpose(%t2), dimensions={0,1}\n"
    "  %a0 = f32[8,8] all-reduce(%t3), channel_id=1, replica_groups=[2,2]<=[4], to_apply=%sum\n"
    "  %a1 = f32[8,8] all-reduce(%a0), channel_id=2, replica_groups=[2,2]<=[2,2]T(1,0), to_apply=%sum\n"
    "  %a2 = f32[8,8] all-reduce(%a1), channel_id=3, replica_groups=[2,2]<=[4], to_apply=%sum\n"
    "  %a3 = f32[8,8] all-reduce(%a2), replica_groups=[1,4]<=[4], to_apply=%sum\n"
    "  %a4 = f32[8,8] all-reduce(%a3), replica_groups=[1,4]<=[4], to_apply=%sum\n"
    "  %a5 = f32[8,8] all-reduce(%a4), replica_groups=[2,2]<=[4], to_apply=%sum\n"
    "  ROOT %a6 = f32[8,8] all-reduce(%a5), replica_groups=[1,4]<=[4], to_apply=%sum\n"
    "}\n";

static const char RT_NAMED_KINDS[] =
    "HloModule rt5\n"
    "\n"
    "ENTRY %main {\n"
    "  %a = f32[8,8] parameter(0), sharding={mesh[x=2,y=2], replicated}\n"
    "  %b = f32[8,8] parameter(1), sharding={mesh[x=2,y=2], unreduced}\n"
    "  %c = f32[8,8] parameter(2), sharding={mesh[x=2,y=2], manual}\n"
    "  %d = f32[8,8] parameter(3), sharding={mesh[x=2,y=2], [{x, ?}, {?}]}\n"
    "  %e = f32[8,8] parameter(4), sharding={mesh[x=2,y=2], [{}, {}], replicated={y}}\n"
    "  ROOT %f = f32[] parameter(5), sharding={mesh[x=2,y=2], unreduced}\n"
    "}\n";
static const char RT_NAMED_KINDS_BOUND[] =
    "HloModule rt5\n"
    "\n"
    "ENTRY %main {\n"
    "  %a = f32[8,8] parameter(0), sharding={mesh[x=2,y=2], [{}, {}]}\n"
    "  %b = f32[8,8] parameter(1), sharding={mesh[x=2,y=2], [{}, {}], unreduced={x, y}}\n"
    "  %c = f32[8,8] parameter(2), sharding={mesh[x=2,y=2], manual}\n"
    "  %d = f32[8,8] parameter(3), sharding={mesh[x=2,y=2], [{x}, {}]}\n"
    "  %e = f32[8,8] parameter(4), sharding={mesh[x=2,y=2], [{}, {}]}\n"
    "  ROOT %f = f32[] parameter(5), sharding={mesh[x=2,y=2], unreduced}\n"
    "}\n";

static void test_round_trips(void **state)
{
    (void)state;
    round_trip(RT_POSITIONAL, NULL);
    round_trip(RT_EXPLICIT, RT_EXPLICIT_BOUND);
    round_trip(RT_NAMED, NULL);
    round_trip(RT_KINDS, NULL);
    round_trip(RT_REPEATS, NULL);
    round_trip(RT_NAMED_KINDS, RT_NAMED_KINDS_BOUND);
}

/* sb_int spells every int64 as printf's %lld does, appending after what
 * the buffer holds (the printer writes every number through it). */
static void test_int_digits(void **state)
{
    (void)state;
    static const int64_t vals[] = {0,    1,    9,          10,        11,         99,        100,       101,
                                   999,  1000, 1234567,    -1,        -9,         -10,       -99,       -100,
                                   -101, 65536, 4294967296, INT64_MAX, INT64_MIN, INT64_MIN + 1, 1000000000000000000};
    StrBuf b = {0};
    char want[64], all[2048] = "";
    sb_puts(&b, "x");
    strcat(all, "x");
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        snprintf(want, sizeof want, "%lld,", (long long)vals[i]);
        strcat(all, want);
        sb_int(&b, vals[i]);
        sb_putc(&b, ',');
        assert_string_equal(sb_cstr(&b), all);
        assert_int_equal(b.len, strlen(all));
    }
    sb_free(&b);
}

/* The printer spells a shape once per distinct array shape it meets (a
 * memo of 64 slots) and copies it after: 600 instructions over 90 shapes
 * that differ in element type, one dim, rank, layout or its absence, with
 * and without layouts printed, and shapes whose text is longer than a slot
 * holds, in runs and interleaved so slots are reused and evicted; then
 * 2,600 whose shapes differ from the one before only in layout, type or
 * the layout's absence.  Every line of the module must be the instruction
 * as printed on its own (hlo_print_inst, no memo). */
static void test_shape_memo_lines(void **state)
{
    (void)state;
    StrBuf t = {0};
    sb_puts(&t, "HloModule shapes\n\nENTRY %main {\n");
    for (int i = 0; i < 600; i++) {
        int v = i < 180 ? i / 2 : (i * 37) % 90;
        const char *ty = v % 3 == 0 ? "f32" : v % 3 == 1 ? "bf16" : "s32";
        char shape[200];
        if (v >= 80) /* long: 8 dims of 14 digits */
            snprintf(shape, sizeof shape, "%s[%d000000000000,%d000000000000,%d000000000000,%d000000000000,%d000000000000,%d000000000000,%d000000000000,%d000000000000]", ty, v, v, v, v, v, v, v, v + 1);
        else if (v % 4 == 0)
            snprintf(shape, sizeof shape, "%s[%d,%d]", ty, 8 + v, 16);
        else if (v % 4 == 1)
            snprintf(shape, sizeof shape, "%s[%d,%d]{0,1}", ty, 8 + v, 16);
        else if (v % 4 == 2)
            snprintf(shape, sizeof shape, "%s[%d,%d]{1,0}", ty, 8 + v, 16);
        else
            snprintf(shape, sizeof shape, "%s[%d,16,%d]", ty, 8 + v, v % 5);
        sb_printf(&t, "  %%p%d = %s parameter(%d)\n", i, shape, i);
    }
    /* then shapes that differ only in layout, type or the layout's absence:
     * the 24 layouts of f32[k,2,3,4], s32[k,2,3,4]{3,2,1,0} and f32[k,2,3,4]
     * one after the other, for 100 k (26 shapes over 64 slots share some) */
    int q = 0;
    for (int k = 1; k <= 100; k++)
        for (int l = 0; l < 26; l++, q++) {
            int perm[4] = {0, 1, 2, 3}, x = l;
            for (int a = 0; a < 4 && l < 24; a++) { /* the l-th permutation (factorial base) */
                int f = a == 0 ? 6 : a == 1 ? 2 : 1, pick = a < 3 ? x / f : 0;
                x = a < 3 ? x % f : 0;
                int v = perm[a + pick];
                memmove(perm + a + 1, perm + a, sizeof(int) * (size_t)pick);
                perm[a] = v;
            }
            char shape[64];
            if (l < 24)
                snprintf(shape, sizeof shape, "f32[%d,2,3,4]{%d,%d,%d,%d}", k, perm[0], perm[1], perm[2], perm[3]);
            else
                snprintf(shape, sizeof shape, "%s[%d,2,3,4]%s", l == 24 ? "s32" : "f32", k, l == 24 ? "{3,2,1,0}" : "");
            sb_printf(&t, "  %s%%q%d = %s parameter(%d)\n", k == 100 && l == 25 ? "ROOT " : "", q, shape, 600 + q);
        }
    sb_puts(&t, "}\n");
    DiagEngine *d = diag_create(NULL);
    diag_set_show_source(d, false);
    const char *text = sb_cstr(&t);
    HloModule *m = parse_hlo(text, t.len, diag_add_file(d, "s.hlo", text, t.len), d);
    if (!m)
        fail_msg("parse failed: %s", diag_text(d));
    for (int layouts = 0; layouts < 2; layouts++) {
        HloPrintOptions opt = {false, layouts == 1, false};
        StrBuf b = {0}, one = {0};
        hlo_print_module(&b, m, &opt);
        const char *line = strstr(sb_cstr(&b), "{\n");
        assert_non_null(line);
        line += 2;
        const HloComputation *c = &m->comps[m->entry];
        for (int32_t i = 0; i < c->n_insts; i++) {
            sb_clear(&one);
            sb_puts(&one, i == c->root ? "  ROOT " : "  ");
            hlo_print_inst(&one, m, m->entry, i, &opt);
            sb_putc(&one, '\n');
            assert_memory_equal(line, sb_cstr(&one), one.len);
            line += one.len;
        }
        assert_string_equal(line, "}\n");
        sb_free(&b);
        sb_free(&one);
    }
    /* one hand-checked line each way */
    StrBuf b = {0};
    HloPrintOptions with = {false, true, false};
    hlo_print_module(&b, m, &with);
    assert_non_null(strstr(sb_cstr(&b), "  %p3 = bf16[9,16]{0,1} parameter(3)\n"));
    sb_free(&b);
    hlo_module_free(m);
    diag_destroy(d);
    sb_free(&t);
}

int main(void)
{
#define T(x) cmocka_unit_test_setup_teardown(x, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_constants), T(test_shape_ops), T(test_compute_ops), T(test_collectives), T(test_calls_and_raw),
        T(test_module),    cmocka_unit_test(test_round_trips), cmocka_unit_test(test_int_digits),
        cmocka_unit_test(test_shape_memo_lines),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
