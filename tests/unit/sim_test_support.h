/* sim_test_support.h - helpers shared by interp_test.c and sim_test.c: shape
 * and list literals (SH, SC, OPS, IL, DL), a tiny IR builder (TB: adds
 * instructions named "<opcode>.<n>", parameters, constants, scalar reducer
 * computations), SimValue constructors, and the cmocka group setup/teardown
 * that owns the shared DiagEngine g_diag.  The functions are static inline
 * so a test that does not use one still compiles warning-free.
 */
#ifndef SPMDC_SIM_TEST_SUPPORT_H
#define SPMDC_SIM_TEST_SUPPORT_H

#include <stdio.h>

#include "spmdc/hlo.h"
#include "spmdc/sim.h"

/* SH(F32, 2, 3) -> f32[2,3]; SC(F32) -> f32[] */
#define SH(t, ...) shape_array(ET_##t, (int32_t)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})
#define SC(t) shape_scalar(ET_##t)
#define OPS(...) (int32_t[]){__VA_ARGS__}, (int32_t)(sizeof((int32_t[]){__VA_ARGS__}) / sizeof(int32_t))
#define IL(...) (int64_t[]){__VA_ARGS__}, (int32_t)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

typedef struct TB {
    HloModule *m;
    int32_t c;
    int n;
} TB;

static inline TB tb_new(HloModule *m, const char *name, bool entry)
{
    TB b = {m, hlo_add_computation(m, name, entry), 0};
    return b;
}

static inline HloInst *tb_inst(TB *b, int32_t i) { return hlo_inst(b->m, b->c, i); }
static inline HloAttrs *tb_attrs(TB *b, int32_t i) { return hlo_attrs_mut(b->m, tb_inst(b, i)); }

static inline int32_t tb_add(TB *b, HloOpcode op, Shape s, const int32_t *ops, int32_t n)
{
    char name[32];
    snprintf(name, sizeof name, "%s.%d", hlo_opcode_name(op), b->n++);
    return hlo_add_inst(b->m, b->c, op, name, &s, ops, n);
}

static inline int32_t tb_leaf(TB *b, HloOpcode op, Shape s) { return tb_add(b, op, s, NULL, 0); }

static inline int32_t tb_param(TB *b, int64_t num, Shape s)
{
    int32_t i = tb_leaf(b, HLO_PARAMETER, s);
    tb_inst(b, i)->param_number = (int32_t)num;
    return i;
}

static inline void tb_set_list(TB *b, IntList *l, const int64_t *v, int32_t n) { *l = hlo_intlist(b->m, v, n); }

/* A constant from doubles (floats) or integers (the class of s's type). */
static inline int32_t tb_const(TB *b, Shape s, const double *v, int64_t n)
{
    int32_t i = tb_leaf(b, HLO_CONSTANT, s);
    Literal *lit = ARENA_NEW(b->m->arena, Literal);
    lit->n = n;
    if (elem_type_is_float(s.type)) {
        lit->f = ARENA_ARRAY(b->m->arena, double, n);
        for (int64_t k = 0; k < n; k++) lit->f[k] = v[k];
    } else {
        lit->i = ARENA_ARRAY(b->m->arena, int64_t, n);
        for (int64_t k = 0; k < n; k++) lit->i[k] = (int64_t)v[k];
    }
    tb_attrs(b, i)->literal = lit;
    return i;
}

#define DL(...) (double[]){__VA_ARGS__}, (int64_t)(sizeof((double[]){__VA_ARGS__}) / sizeof(double))

/* Scalar computation root = op(p0, p1) (p1, p0 when swapped). */
static inline int32_t tb_binop_comp(HloModule *m, const char *name, ElemType t, HloOpcode op, bool swapped)
{
    TB b = tb_new(m, name, false);
    int32_t p0 = tb_param(&b, 0, shape_scalar(t)), p1 = tb_param(&b, 1, shape_scalar(t));
    Shape rs = shape_scalar(op == HLO_COMPARE ? ET_PRED : t);
    if (swapped)
        tb_add(&b, op, rs, OPS(p1, p0));
    else
        tb_add(&b, op, rs, OPS(p0, p1));
    return b.c;
}

/* An array value from doubles. */
static inline SimValue val_f(Shape s, const double *v, int64_t n)
{
    SimValue r = sim_value_new(&s);
    for (int64_t k = 0; k < n; k++) sim_value_set_f64(&r, k, v[k]);
    return r;
}

static inline SimValue val_i(Shape s, const double *v, int64_t n)
{
    SimValue r = sim_value_new(&s);
    for (int64_t k = 0; k < n; k++) sim_value_set_i64(&r, k, (int64_t)v[k]);
    return r;
}


/* ---------------------------------------------------------------- running */

static DiagEngine *g_diag;

static inline int setup(void **state)
{
    (void)state;
    g_diag = diag_create(NULL);
    return 0;
}

static inline int teardown(void **state)
{
    (void)state;
    diag_destroy(g_diag);
    return 0;
}

#endif
