/* sim_test.c - the N-device simulator: each collective's semantics on
 * hand-built per-device programs (all-reduce over groups {{0,1},{2,3}},
 * all-gather along dim 1, reduce-scatter, all-to-all, collective-permute
 * with zeros for non-targets), the group modes (channel_id,
 * use_global_device_ids), inconsistent groups, lockstep loops holding
 * collectives, and the per-instruction observer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "sim_test_support.h"

#define MAXDEV 8

/* Runs m on n devices with one argument each (consumed); asserts success. */
static void run_n(HloModule *m, int64_t n, SimValue *args, SimValue *outs)
{
    SimOptions o = {n, 1, NULL, NULL, 0};
    bool ok = sim_run_spmd(m, &o, args, 1, outs, g_diag);
    if (!ok) fprintf(stderr, "%s", diag_text(g_diag));
    assert_true(ok);
    for (int64_t d = 0; d < n; d++) sim_value_release(&args[d]);
}

static const char *run_n_fail(HloModule *m, int64_t n, SimValue *args)
{
    SimValue outs[MAXDEV];
    SimOptions o = {n, 1, NULL, NULL, 0};
    assert_false(sim_run_spmd(m, &o, args, 1, outs, g_diag));
    for (int64_t d = 0; d < n; d++) sim_value_release(&args[d]);
    return diag_text(g_diag);
}

static void expect_f(const SimValue *v, const double *want, int64_t n)
{
    assert_int_equal(shape_elem_count(&v->shape), n);
    for (int64_t k = 0; k < n; k++)
        if (sim_value_get_f64(v, k) != want[k]) {
            fprintf(stderr, "element %lld: got %.17g, want %.17g\n", (long long)k, sim_value_get_f64(v, k), want[k]);
            fail();
        }
}

static void expect_i(const SimValue *v, const int64_t *want, int64_t n)
{
    assert_int_equal(shape_elem_count(&v->shape), n);
    for (int64_t k = 0; k < n; k++)
        if (sim_value_get_i64(v, k) != want[k]) {
            fprintf(stderr, "element %lld: got %lld, want %lld\n", (long long)k, (long long)sim_value_get_i64(v, k),
                    (long long)want[k]);
            fail();
        }
}

#define EXPECT_F(v, ...) expect_f((v), DL(__VA_ARGS__))
#define EXPECT_I(v, ...) expect_i((v), IL(__VA_ARGS__))

static void release_n(SimValue *v, int64_t n)
{
    for (int64_t d = 0; d < n; d++) sim_value_release(&v[d]);
}

static void set_groups(TB *b, int32_t i, int64_t n_groups, int64_t size, const int64_t *ids)
{
    HloAttrs *a = tb_attrs(b, i);
    a->replica_groups.n_groups = n_groups;
    a->replica_groups.group_size = size;
    a->replica_groups.ids = ARENA_ARRAY(b->m->arena, int64_t, n_groups * size + 1);
    memcpy(a->replica_groups.ids, ids, sizeof(int64_t) * (size_t)(n_groups * size));
}

/* entry: p = parameter(0) of shape in; r = op(p) of shape out with channel_id=1
 * (use_global_device_ids for all-reduce/all-gather/reduce-scatter). */
static HloModule *one_collective(HloOpcode op, Shape in, Shape out, int32_t reducer_kind, int32_t *inst)
{
    HloModule *m = hlo_module_new("t");
    int32_t red = -1;
    if (reducer_kind == 1) red = tb_binop_comp(m, "add", in.type, HLO_ADD, false);
    if (reducer_kind == 2) { /* p0 - (-p1): an add the interpreter runs instruction by instruction */
        TB r = tb_new(m, "add_generic", false);
        int32_t p0 = tb_param(&r, 0, shape_scalar(in.type)), p1 = tb_param(&r, 1, shape_scalar(in.type));
        int32_t n1 = tb_add(&r, HLO_NEGATE, shape_scalar(in.type), OPS(p1));
        tb_add(&r, HLO_SUBTRACT, shape_scalar(in.type), OPS(p0, n1));
        red = r.c;
    }
    if (reducer_kind == 3) red = tb_binop_comp(m, "max", in.type, HLO_MAXIMUM, false);
    TB e = tb_new(m, "main", true);
    int32_t p = tb_param(&e, 0, in);
    *inst = tb_add(&e, op, out, OPS(p));
    HloAttrs *a = tb_attrs(&e, *inst);
    a->channel_id = 1;
    a->use_global_device_ids = op != HLO_ALL_TO_ALL && op != HLO_COLLECTIVE_PERMUTE;
    a->to_apply = red;
    return m;
}

static TB entry_of(HloModule *m) { TB b = {m, m->entry, 0}; return b; }

/* ---------------------------------------------------------------- collectives */

static void test_all_reduce_groups(void **state)
{
    (void)state;
    for (int32_t kind = 1; kind <= 3; kind++) {
        int32_t i;
        HloModule *m = one_collective(HLO_ALL_REDUCE, SH(F32, 2), SH(F32, 2), kind, &i);
        TB e = entry_of(m);
        set_groups(&e, i, 2, 2, (int64_t[]){0, 1, 2, 3});
        SimValue args[4], outs[4];
        for (int d = 0; d < 4; d++) args[d] = val_f(SH(F32, 2), DL(d + 1, 10 * (d + 1)));
        run_n(m, 4, args, outs);
        if (kind < 3) {
            /* {0,1}: [1+2, 10+20]; {2,3}: [3+4, 30+40] */
            EXPECT_F(&outs[0], 3, 30);
            EXPECT_F(&outs[1], 3, 30);
            EXPECT_F(&outs[2], 7, 70);
            EXPECT_F(&outs[3], 7, 70);
        } else {
            EXPECT_F(&outs[0], 2, 20);
            EXPECT_F(&outs[3], 4, 40);
        }
        release_n(outs, 4);
        hlo_module_free(m);
    }
}

static void test_all_reduce_modes(void **state)
{
    (void)state;
    int32_t i;
    /* no channel_id: groups of replica ids; one replica -> every device alone */
    HloModule *m = one_collective(HLO_ALL_REDUCE, SC(S32), SC(S32), 1, &i);
    TB e = entry_of(m);
    tb_attrs(&e, i)->channel_id = 0;
    tb_attrs(&e, i)->use_global_device_ids = false;
    set_groups(&e, i, 1, 1, (int64_t[]){0});
    SimValue args[4], outs[4];
    for (int d = 0; d < 4; d++) args[d] = val_i(SC(S32), DL(d + 1));
    run_n(m, 4, args, outs);
    EXPECT_I(&outs[0], 1);
    EXPECT_I(&outs[3], 4);
    release_n(outs, 4);
    /* channel_id without global ids: replica {0} brings all its partitions: 1+2+3+4 */
    tb_attrs(&e, i)->channel_id = 7;
    for (int d = 0; d < 4; d++) args[d] = val_i(SC(S32), DL(d + 1));
    run_n(m, 4, args, outs);
    EXPECT_I(&outs[0], 10);
    EXPECT_I(&outs[2], 10);
    release_n(outs, 4);
    /* variadic all-reduce: a tuple of two sums */
    hlo_module_free(m);
    m = hlo_module_new("t");
    int32_t add = tb_binop_comp(m, "add", ET_S32, HLO_ADD, false);
    e = tb_new(m, "main", true);
    int32_t p = tb_param(&e, 0, SC(S32)), q = tb_add(&e, HLO_NEGATE, SC(S32), OPS(p));
    Shape el[2] = {SC(S32), SC(S32)};
    Shape ts = {.type = ET_TUPLE, .n_elems = 2, .elems = el};
    i = tb_add(&e, HLO_ALL_REDUCE, ts, OPS(p, q));
    tb_attrs(&e, i)->to_apply = add;
    tb_attrs(&e, i)->channel_id = 1;
    tb_attrs(&e, i)->use_global_device_ids = true;
    for (int d = 0; d < 2; d++) args[d] = val_i(SC(S32), DL(d + 5));
    run_n(m, 2, args, outs);
    EXPECT_I(&outs[1].elems[0], 11); /* 5 + 6, groups {} = all devices */
    EXPECT_I(&outs[1].elems[1], -11);
    release_n(outs, 2);
    hlo_module_free(m);
}

static void test_all_gather_dim1(void **state)
{
    (void)state;
    int32_t i;
    HloModule *m = one_collective(HLO_ALL_GATHER, SH(S32, 2, 1), SH(S32, 2, 2), 0, &i);
    TB e = entry_of(m);
    tb_set_list(&e, &tb_attrs(&e, i)->dimensions, IL(1));
    set_groups(&e, i, 2, 2, (int64_t[]){0, 2, 1, 3});
    SimValue args[4], outs[4];
    for (int d = 0; d < 4; d++) args[d] = val_i(SH(S32, 2, 1), DL(d, 10 + d));
    run_n(m, 4, args, outs);
    EXPECT_I(&outs[0], 0, 2, 10, 12); /* group {0,2}: members side by side along dim 1 */
    EXPECT_I(&outs[2], 0, 2, 10, 12);
    EXPECT_I(&outs[1], 1, 3, 11, 13);
    EXPECT_I(&outs[3], 1, 3, 11, 13);
    release_n(outs, 4);
    /* group order decides the layout: {2,0} puts device 2 first */
    set_groups(&e, i, 2, 2, (int64_t[]){2, 0, 3, 1});
    for (int d = 0; d < 4; d++) args[d] = val_i(SH(S32, 2, 1), DL(d, 10 + d));
    run_n(m, 4, args, outs);
    EXPECT_I(&outs[0], 2, 0, 12, 10);
    EXPECT_I(&outs[3], 3, 1, 13, 11);
    release_n(outs, 4);
    hlo_module_free(m);
}

static void test_reduce_scatter(void **state)
{
    (void)state;
    int32_t i;
    HloModule *m = one_collective(HLO_REDUCE_SCATTER, SH(S32, 4), SH(S32, 1), 1, &i);
    TB e = entry_of(m);
    tb_set_list(&e, &tb_attrs(&e, i)->dimensions, IL(0));
    SimValue args[4], outs[4];
    for (int d = 0; d < 4; d++) args[d] = val_i(SH(S32, 4), DL(10 * d, 10 * d + 1, 10 * d + 2, 10 * d + 3));
    run_n(m, 4, args, outs);
    /* element k summed over devices: 10*(0+1+2+3) + 4k = 60 + 4k; device k keeps piece k */
    EXPECT_I(&outs[0], 60);
    EXPECT_I(&outs[1], 64);
    EXPECT_I(&outs[2], 68);
    EXPECT_I(&outs[3], 72);
    release_n(outs, 4);
    /* two groups {0,1},{2,3} of f32[2,2] along dim 1 */
    hlo_module_free(m);
    m = one_collective(HLO_REDUCE_SCATTER, SH(F32, 2, 2), SH(F32, 2, 1), 1, &i);
    e = entry_of(m);
    tb_set_list(&e, &tb_attrs(&e, i)->dimensions, IL(1));
    set_groups(&e, i, 2, 2, (int64_t[]){0, 1, 2, 3});
    for (int d = 0; d < 4; d++) args[d] = val_f(SH(F32, 2, 2), DL(d, 1, 2, 3));
    run_n(m, 4, args, outs);
    EXPECT_F(&outs[0], 1, 4); /* sum {0,1} = [[1,2],[4,6]], column 0 */
    EXPECT_F(&outs[1], 2, 6);
    EXPECT_F(&outs[2], 5, 4); /* sum {2,3} = [[5,2],[4,6]] */
    EXPECT_F(&outs[3], 2, 6);
    release_n(outs, 4);
    hlo_module_free(m);
}

static void test_all_to_all(void **state)
{
    (void)state;
    int32_t i;
    HloModule *m = one_collective(HLO_ALL_TO_ALL, SH(S32, 4), SH(S32, 4), 0, &i);
    TB e = entry_of(m);
    tb_set_list(&e, &tb_attrs(&e, i)->dimensions, IL(0));
    SimValue args[4], outs[4];
    for (int d = 0; d < 4; d++) args[d] = val_i(SH(S32, 4), DL(4 * d, 4 * d + 1, 4 * d + 2, 4 * d + 3));
    run_n(m, 4, args, outs);
    /* device k receives piece k of every device m in group order: 4m + k */
    EXPECT_I(&outs[0], 0, 4, 8, 12);
    EXPECT_I(&outs[1], 1, 5, 9, 13);
    EXPECT_I(&outs[3], 3, 7, 11, 15);
    release_n(outs, 4);
    set_groups(&e, i, 2, 2, (int64_t[]){0, 1, 2, 3});
    hlo_module_free(m);
    m = one_collective(HLO_ALL_TO_ALL, SH(S32, 2), SH(S32, 2), 0, &i);
    e = entry_of(m);
    tb_set_list(&e, &tb_attrs(&e, i)->dimensions, IL(0));
    set_groups(&e, i, 2, 2, (int64_t[]){0, 1, 2, 3});
    for (int d = 0; d < 4; d++) args[d] = val_i(SH(S32, 2), DL(2 * d, 2 * d + 1));
    run_n(m, 4, args, outs);
    EXPECT_I(&outs[0], 0, 2); /* {0,1}: piece 0 of devices 0 and 1 */
    EXPECT_I(&outs[1], 1, 3);
    EXPECT_I(&outs[2], 4, 6);
    EXPECT_I(&outs[3], 5, 7);
    release_n(outs, 4);
    hlo_module_free(m);
}

static void test_collective_permute(void **state)
{
    (void)state;
    int32_t i;
    HloModule *m = one_collective(HLO_COLLECTIVE_PERMUTE, SH(F32, 2), SH(F32, 2), 0, &i);
    TB e = entry_of(m);
    HloAttrs *a = tb_attrs(&e, i);
    a->n_pairs = 3;
    a->pairs = ARENA_ARRAY(m->arena, int64_t, 6);
    memcpy(a->pairs, (int64_t[]){0, 1, 1, 2, 2, 3}, sizeof(int64_t) * 6);
    SimValue args[4], outs[4];
    for (int d = 0; d < 4; d++) args[d] = val_f(SH(F32, 2), DL(d + 1, -(d + 1)));
    run_n(m, 4, args, outs);
    EXPECT_F(&outs[0], 0, 0); /* not a target: zeros */
    EXPECT_F(&outs[1], 1, -1);
    EXPECT_F(&outs[2], 2, -2);
    EXPECT_F(&outs[3], 3, -3);
    release_n(outs, 4);
    /* a target named twice is an error */
    memcpy(a->pairs, (int64_t[]){0, 1, 2, 1, 1, 0}, sizeof(int64_t) * 6);
    for (int d = 0; d < 4; d++) args[d] = val_f(SH(F32, 2), DL(0, 0));
    assert_string_equal(run_n_fail(m, 4, args),
                        "spmdc: error: collective-permute.1: source_target_pairs: 1 is the target of more than one pair\n");
    hlo_module_free(m);
}

static void test_inconsistent_groups(void **state)
{
    (void)state;
    static const struct {
        int64_t n_groups, size, ids[4];
        const char *msg;
    } cases[] = {
        {2, 2, {0, 1, 1, 2}, "spmdc: error: all-reduce.1: replica_groups: id 1 appears in more than one group\n"},
        {1, 2, {0, 1}, "spmdc: error: all-reduce.1: replica_groups: id 2 is in no group\n"},
        {2, 2, {0, 5, 1, 2}, "spmdc: error: all-reduce.1: replica_groups: id 5 is out of range (4 devices)\n"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int32_t i;
        HloModule *m = one_collective(HLO_ALL_REDUCE, SC(F32), SC(F32), 1, &i);
        TB e = entry_of(m);
        set_groups(&e, i, cases[k].n_groups, cases[k].size, cases[k].ids);
        SimValue args[4];
        for (int d = 0; d < 4; d++) args[d] = val_f(SC(F32), DL(d));
        diag_destroy(g_diag);
        g_diag = diag_create(NULL);
        assert_string_equal(run_n_fail(m, 4, args), cases[k].msg);
        hlo_module_free(m);
    }
}

/* ---------------------------------------------------------------- lockstep */

static void test_partition_id_and_while(void **state)
{
    (void)state;
    HloModule *m = hlo_module_new("t");
    int32_t add = tb_binop_comp(m, "add", ET_S32, HLO_ADD, false);
    Shape el[2] = {SC(S32), SC(S32)};
    Shape st = {.type = ET_TUPLE, .n_elems = 2, .elems = el};
    TB cd = tb_new(m, "cond", false);
    int32_t s = tb_param(&cd, 0, st), i = tb_add(&cd, HLO_GET_TUPLE_ELEMENT, SC(S32), OPS(s));
    int32_t three = tb_const(&cd, SC(S32), DL(3)), lt = tb_add(&cd, HLO_COMPARE, SC(PRED), OPS(i, three));
    tb_attrs(&cd, lt)->direction = CMP_LT;
    /* body: (i + 1, all-reduce(x)) */
    TB bd = tb_new(m, "body", false);
    s = tb_param(&bd, 0, st);
    i = tb_add(&bd, HLO_GET_TUPLE_ELEMENT, SC(S32), OPS(s));
    int32_t x = tb_add(&bd, HLO_GET_TUPLE_ELEMENT, SC(S32), OPS(s));
    tb_attrs(&bd, x)->index = 1;
    int32_t one = tb_const(&bd, SC(S32), DL(1)), i1 = tb_add(&bd, HLO_ADD, SC(S32), OPS(i, one));
    int32_t ar = tb_add(&bd, HLO_ALL_REDUCE, SC(S32), OPS(x));
    tb_attrs(&bd, ar)->to_apply = add;
    tb_attrs(&bd, ar)->channel_id = 1;
    tb_attrs(&bd, ar)->use_global_device_ids = true;
    tb_add(&bd, HLO_TUPLE, st, OPS(i1, ar));
    TB e = tb_new(m, "main", true);
    int32_t p = tb_param(&e, 0, SC(S32));
    int32_t pid = tb_leaf(&e, HLO_PARTITION_ID, SC(U32)), pc = tb_add(&e, HLO_CONVERT, SC(S32), OPS(pid));
    int32_t v = tb_add(&e, HLO_ADD, SC(S32), OPS(p, pc)), z = tb_const(&e, SC(S32), DL(0));
    int32_t init = tb_add(&e, HLO_TUPLE, st, OPS(z, v));
    int32_t w = tb_add(&e, HLO_WHILE, st, OPS(init));
    tb_attrs(&e, w)->condition = cd.c;
    tb_attrs(&e, w)->body = bd.c;
    int32_t res = tb_add(&e, HLO_GET_TUPLE_ELEMENT, SC(S32), OPS(w));
    tb_attrs(&e, res)->index = 1;
    SimValue args[2] = {val_i(SC(S32), DL(1)), val_i(SC(S32), DL(1))}, outs[2];
    run_n(m, 2, args, outs);
    /* x = 1 + partition id = [1, 2]; three all-reduces over 2 devices: 3, 6, 12 */
    EXPECT_I(&outs[0], 12);
    EXPECT_I(&outs[1], 12);
    release_n(outs, 2);
    hlo_module_free(m);
}

/* A module whose body adds its s32 counter up over the devices
 * (all-reduce) and whose condition runs it while it is below `limit`: the
 * loop's computations are made, the entry `main` is begun in *e; *cond and
 * *body are the computations' indices. */
static HloModule *allreduce_loop(int64_t limit, TB *e, int32_t *cond, int32_t *body)
{
    HloModule *m = hlo_module_new("t");
    int32_t add = tb_binop_comp(m, "add", ET_S32, HLO_ADD, false);
    TB cd = tb_new(m, "cond", false);
    int32_t s = tb_param(&cd, 0, SC(S32)), lim = tb_const(&cd, SC(S32), DL(limit));
    int32_t lt = tb_add(&cd, HLO_COMPARE, SC(PRED), OPS(s, lim));
    tb_attrs(&cd, lt)->direction = CMP_LT;
    TB bd = tb_new(m, "body", false);
    s = tb_param(&bd, 0, SC(S32));
    int32_t ar = tb_add(&bd, HLO_ALL_REDUCE, SC(S32), OPS(s));
    tb_attrs(&bd, ar)->to_apply = add;
    *e = tb_new(m, "main", true);
    *cond = cd.c;
    *body = bd.c;
    return m;
}

static void test_divergent_loop(void **state)
{
    (void)state;
    TB e;
    int32_t cond, body;
    HloModule *m = allreduce_loop(2, &e, &cond, &body);
    int32_t pid = tb_leaf(&e, HLO_PARTITION_ID, SC(U32)), pc = tb_add(&e, HLO_CONVERT, SC(S32), OPS(pid));
    int32_t w = tb_add(&e, HLO_WHILE, SC(S32), OPS(pc));
    tb_attrs(&e, w)->condition = cond;
    tb_attrs(&e, w)->body = body;
    SimValue outs[4];
    SimOptions o = {4, 1, NULL, NULL, 0};
    assert_false(sim_run_spmd(m, &o, NULL, 0, outs, g_diag));
    assert_string_equal(diag_text(g_diag), "spmdc: error: while.2: devices 0 and 2 disagree on the loop condition "
                                           "(the body holds collectives)\n");
    hlo_module_free(m);
}

/* A loop of scalar instructions is charged for interpreting them (at least
 * SIM_INST_MIN_COST element operations an instruction), not for their one
 * element each: 100,000 trips of 6 instructions pass a budget of 1e7 (at one
 * operation an instruction they counted 6e5, and nested loops ran for hours
 * under the 1e10 budget). */
static void test_loop_work_budget(void **state)
{
    (void)state;
    HloModule *m = hlo_module_new("t");
    TB cd = tb_new(m, "cond", false);
    int32_t s = tb_param(&cd, 0, SC(S32)), lim = tb_const(&cd, SC(S32), DL(100000));
    int32_t lt = tb_add(&cd, HLO_COMPARE, SC(PRED), OPS(s, lim));
    tb_attrs(&cd, lt)->direction = CMP_LT;
    TB bd = tb_new(m, "body", false);
    s = tb_param(&bd, 0, SC(S32));
    int32_t one = tb_const(&bd, SC(S32), DL(1));
    tb_add(&bd, HLO_ADD, SC(S32), OPS(s, one));
    TB e = tb_new(m, "main", true);
    int32_t p = tb_param(&e, 0, SC(S32));
    int32_t w = tb_add(&e, HLO_WHILE, SC(S32), OPS(p));
    tb_attrs(&e, w)->condition = cd.c;
    tb_attrs(&e, w)->body = bd.c;
    SimValue args[1] = {val_i(SC(S32), DL(0))}, outs[1];
    SimOptions o = {1, 1, NULL, NULL, 1e7};
    bool refused = false;
    assert_false(sim_run_spmd_why(m, &o, args, 1, outs, g_diag, &refused));
    assert_true(refused);
    assert_non_null(strstr(diag_text(g_diag), "went past its budget of 1e+07 element operations"));
    /* named at the entry's loop, with the instruction running inside it in a note */
    assert_non_null(strstr(diag_text(g_diag), "error: while.1: the simulation went past"));
    assert_non_null(strstr(diag_text(g_diag), "note: it was running parameter.0 in computation body"));
    sim_value_release(&args[0]);
    hlo_module_free(m);
}

/* A loop whose body holds a collective runs on the devices in lockstep; past
 * the budget it is named as the interpreter names it: at the entry's loop,
 * the instruction running inside it in a note, not at the instruction that
 * ran last. */
static void test_lockstep_loop_work_budget(void **state)
{
    (void)state;
    TB e;
    int32_t cond, body;
    HloModule *m = allreduce_loop(1000000, &e, &cond, &body);
    int32_t p = tb_param(&e, 0, SC(S32));
    int32_t w = tb_add(&e, HLO_WHILE, SC(S32), OPS(p));
    tb_attrs(&e, w)->condition = cond;
    tb_attrs(&e, w)->body = body;
    SimValue args[2] = {val_i(SC(S32), DL(1)), val_i(SC(S32), DL(-1))}, outs[2];
    SimOptions o = {2, 1, NULL, NULL, 1e7};
    bool refused = false;
    assert_false(sim_run_spmd_why(m, &o, args, 1, outs, g_diag, &refused));
    assert_true(refused);
    assert_non_null(strstr(diag_text(g_diag), "error: while.1: the simulation went past its budget of 1e+07"));
    assert_non_null(strstr(diag_text(g_diag), "note: it was running"));
    release_n(args, 2);
    hlo_module_free(m);
}

typedef struct Seen {
    int calls;
    int64_t last_inst;
    int64_t sum_at_inst1;
} Seen;

static void observe(void *user, int32_t inst, const SimValue *vals, int64_t n)
{
    Seen *s = user;
    s->calls++;
    s->last_inst = inst;
    if (inst == 1)
        for (int64_t d = 0; d < n; d++) s->sum_at_inst1 += sim_value_get_i64(&vals[d], 0);
}

static void test_observer(void **state)
{
    (void)state;
    HloModule *m = hlo_module_new("t");
    TB e = tb_new(m, "main", true);
    int32_t p = tb_param(&e, 0, SC(S32));
    int32_t n = tb_add(&e, HLO_NEGATE, SC(S32), OPS(p));
    tb_add(&e, HLO_ADD, SC(S32), OPS(n, p));
    Seen seen = {0, -1, 0};
    SimOptions o = {3, 1, observe, &seen, 0};
    SimValue args[3] = {val_i(SC(S32), DL(1)), val_i(SC(S32), DL(2)), val_i(SC(S32), DL(4))}, outs[3];
    assert_true(sim_run_spmd(m, &o, args, 1, outs, g_diag));
    assert_int_equal(seen.calls, 3);     /* one call per entry instruction */
    assert_int_equal(seen.last_inst, 2);
    assert_int_equal(seen.sum_at_inst1, -7); /* negate on 3 devices: -1 -2 -4 */
    EXPECT_I(&outs[2], 0);
    release_n(outs, 3);
    release_n(args, 3);
    hlo_module_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_all_reduce_groups, setup, teardown),
        cmocka_unit_test_setup_teardown(test_all_reduce_modes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_all_gather_dim1, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reduce_scatter, setup, teardown),
        cmocka_unit_test_setup_teardown(test_all_to_all, setup, teardown),
        cmocka_unit_test_setup_teardown(test_collective_permute, setup, teardown),
        cmocka_unit_test_setup_teardown(test_inconsistent_groups, setup, teardown),
        cmocka_unit_test_setup_teardown(test_partition_id_and_while, setup, teardown),
        cmocka_unit_test_setup_teardown(test_divergent_loop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_loop_work_budget, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lockstep_loop_work_budget, setup, teardown),
        cmocka_unit_test_setup_teardown(test_observer, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
