/* verify_test.c - shape inference rules and verifier messages (src/verify.c).
 *
 * Modules are built with the IR builder.  Each rule has a test with the exact
 * inferred shape (worked out by hand in the comment beside it) and the
 * error tests check the exact message text.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "spmdc/diag.h"
#include "spmdc/hlo.h"
#include "spmdc/parse.h"
#include "spmdc/strbuf.h"
#include "spmdc/verify.h"

/* ---------------------------------------------------------------- helpers */

typedef struct B {
    HloModule *m;
    int32_t c; /* computation being built */
} B;

/* "f32[8,4]" -> Shape (arrays only). */
static Shape sh(const char *text)
{
    const char *lb = strchr(text, '[');
    assert_non_null(lb);
    ElemType t = elem_type_from_name(text, (size_t)(lb - text));
    assert_int_not_equal(t, ET_INVALID);
    int64_t d[SPMDC_MAX_RANK];
    int32_t r = 0;
    const char *p = lb + 1;
    while (*p != ']') {
        char *end;
        d[r++] = strtoll(p, &end, 10);
        p = *end == ',' ? end + 1 : end;
    }
    return shape_array(t, r, d);
}

static Shape tup(HloModule *m, int32_t n, const Shape *el)
{
    Shape s;
    memset(&s, 0, sizeof s);
    s.type = ET_TUPLE;
    s.n_elems = n;
    s.elems = (Shape *)el;
    return hlo_copy_shape(m, &s);
}

static B begin(void)
{
    B b = {hlo_module_new("m"), -1};
    return b;
}

static void comp(B *b, const char *name, bool entry) { b->c = hlo_add_computation(b->m, name, entry); }

static int32_t inst_s(B *b, HloOpcode op, const char *name, Shape s, int n, ...)
{
    int32_t opnd[16];
    va_list ap;
    va_start(ap, n);
    for (int k = 0; k < n; k++) opnd[k] = va_arg(ap, int32_t);
    va_end(ap);
    return hlo_add_inst(b->m, b->c, op, name, &s, opnd, n);
}

#define I(b, op, name, shape, ...) inst_s((b), (op), (name), sh(shape), __VA_ARGS__)

static int32_t param_s(B *b, const char *name, Shape s, int64_t number)
{
    int32_t i = hlo_add_inst(b->m, b->c, HLO_PARAMETER, name, &s, NULL, 0);
    hlo_inst(b->m, b->c, i)->param_number = number;
    return i;
}

static int32_t P(B *b, const char *name, const char *shape, int64_t number) { return param_s(b, name, sh(shape), number); }

static HloAttrs *A(B *b, int32_t i) { return hlo_attrs_mut(b->m, hlo_inst(b->m, b->c, i)); }

static IntList L(B *b, int n, ...)
{
    int64_t v[16];
    va_list ap;
    va_start(ap, n);
    for (int k = 0; k < n; k++) v[k] = va_arg(ap, int);
    va_end(ap);
    return hlo_intlist(b->m, v, n);
}

/* A computation `name` computing op over two scalars of type ty. */
static int32_t reducer(B *b, const char *name, const char *ty, HloOpcode op)
{
    int32_t save = b->c;
    comp(b, name, false);
    int32_t r = b->c;
    int32_t x = P(b, "x", ty, 0), y = P(b, "y", ty, 1);
    I(b, op, "r", ty, 2, x, y);
    b->c = save;
    return r;
}

static void assert_shape(const Shape *s, const char *want)
{
    StrBuf b = {0};
    shape_print(&b, s, false);
    assert_string_equal(sb_cstr(&b), want);
    sb_free(&b);
}

static void expect_infer(B *b, int32_t i, const char *want)
{
    Shape s;
    char err[400];
    bool ok = verify_infer_shape(b->m, b->c, i, &s, err, sizeof err);
    if (!ok) fail_msg("inference failed: %s", err);
    assert_shape(&s, want);
}

static void expect_infer_error(B *b, int32_t i, const char *want)
{
    Shape s;
    char err[400];
    assert_false(verify_infer_shape(b->m, b->c, i, &s, err, sizeof err));
    assert_string_equal(err, want);
}

/* verify_module's whole diagnostic output ("" when the module is valid). */
static void expect_verify(B *b, const char *want)
{
    DiagEngine *d = diag_create(NULL);
    bool ok = verify_module(b->m, d);
    assert_string_equal(diag_text(d), want);
    assert_int_equal(ok, want[0] == 0);
    diag_destroy(d);
}

static void done(B *b) { hlo_module_free(b->m); }

/* ------------------------------------------------------------ elementwise */

static void test_binary_same_shape(void **state)
{
    (void)state;
    B b = begin();
    comp(&b, "main", true);
    int32_t x = P(&b, "x", "f32[8,4]", 0), y = P(&b, "y", "f32[8,4]", 1);
    int32_t a = I(&b, HLO_ADD, "add.1", "f32[8,4]", 2, x, y);
    int32_t c = I(&b, HLO_COMPARE, "cmp", "pred[8,4]", 2, x, y);
    int32_t s = I(&b, HLO_SHIFT_LEFT, "shl", "f32[8,4]", 2, x, y);
    expect_infer(&b, a, "f32[8,4]");
    expect_infer(&b, c, "pred[8,4]"); /* compare -> pred, same dims */
    expect_infer_error(&b, s, "shift-left expects integer operands, got f32[8,4]");
    done(&b);
}

static void test_binary_no_implicit_broadcast(void **state)
{
    (void)state;
    B b = begin();
    comp(&b, "main", true);
    int32_t x = P(&b, "x", "f32[8,4]", 0), y = P(&b, "y", "f32[]", 1), z = P(&b, "z", "s32[8,4]", 2);
    I(&b, HLO_ADD, "add.2", "f32[8,4]", 2, x, y);
    I(&b, HLO_MULTIPLY, "mul.3", "f32[8,4]", 2, x, z);
    expect_verify(&b, "spmdc: error: add.2: operand 1 (y) is f32[] but operand 0 (x) is f32[8,4]; add needs equal "
                      "dimensions (HLO has no implicit broadcast)\n"
                      "spmdc: error: mul.3: operand 1 (z) has element type s32 but operand 0 (x) has f32\n");
    done(&b);
}

static void test_token_in_arithmetic(void **state)
{
    (void)state;
    B b = begin();
    comp(&b, "main", true);
    int32_t t = param_s(&b, "tok", shape_scalar(ET_TOKEN), 0);
    I(&b, HLO_NEGATE, "neg", "f32[]", 1, t);
    int32_t aa = inst_s(&b, HLO_AFTER_ALL, "aa", shape_scalar(ET_TOKEN), 2, t, t);
    expect_verify(&b, "spmdc: error: neg: operand 0 (tok) has element type token, which negate does not accept\n");
    expect_infer(&b, aa, "token[]");
    done(&b);
}

static void test_unary_types(void **state)
{
    (void)state;
    B b = begin();
    comp(&b, "main", true);
    int32_t c = P(&b, "c", "c64[3]", 0), i = P(&b, "i", "s32[3]", 1), f = P(&b, "f", "bf16[3]", 2);
    int32_t re = I(&b, HLO_REAL, "re", "f32[3]", 1, c);
    int32_t ab = I(&b, HLO_ABS, "ab", "f32[3]", 1, c);
    int32_t fin = I(&b, HLO_IS_FINITE, "fin", "pred[3]", 1, f);
    int32_t ex = I(&b, HLO_EXP, "ex", "s32[3]", 1, i);
    int32_t cp = I(&b, HLO_POPCNT, "pc", "s32[3]", 1, i);
    expect_infer(&b, re, "f32[3]"); /* real(c64) -> f32 */
    expect_infer(&b, ab, "f32[3]"); /* abs(c64) -> f32 */
    expect_infer(&b, fin, "pred[3]");
    expect_infer(&b, cp, "s32[3]");
    expect_infer_error(&b, ex, "exponential expects a floating-point or complex operand, got s32[3]");
    done(&b);
}

static void test_convert_and_bitcast_convert(void **state)
{
    (void)state;
    B b = begin();
    comp(&b, "main", true);
    int32_t f = P(&b, "f", "f32[4]", 0), c = P(&b, "c", "c64[4]", 1), h = P(&b, "h", "s16[4,2]", 2);
    int32_t cv = I(&b, HLO_CONVERT, "cv", "s8[4]", 1, f);
    int32_t bad = I(&b, HLO_CONVERT, "bad", "f32[4]", 1, c);
    int32_t narrow = I(&b, HLO_BITCAST_CONVERT, "narrow", "s16[4,2]", 1, f);
    int32_t wide = I(&b, HLO_BITCAST_CONVERT, "wide", "f32[4]", 1, h);
    int32_t same = I(&b, HLO_BITCAST_CONVERT, "same", "u32[4]", 1, f);
    expect_infer(&b, cv, "s8[4]");
    expect_infer_error(&b, bad, "convert from complex c64 to real f32 is not defined (use real/imag)");
    expect_infer(&b, narrow, "s16[4,2]"); /* 32 bits -> 2 x 16 bits: new minor dim 2 */
    expect_infer(&b, wide, "f32[4]");     /* minor dim 2 of s16 folds into one f32 */
    expect_infer(&b, same, "u32[4]");
    done(&b);
}

static void test_select_and_clamp(void **state)
{
    (void)state;
    B b = begin();
    comp(&b, "main", true);
    int32_t p = P(&b, "p", "pred[]", 0), pv = P(&b, "pv", "pred[8]", 1), pw = P(&b, "pw", "pred[4]", 2);
    int32_t x = P(&b, "x", "f32[8]", 3), y = P(&b, "y", "f32[8]", 4), lo = P(&b, "lo", "f32[]", 5);
    int32_t s1 = I(&b, HLO_SELECT, "s1", "f32[8]", 3, p, x, y);
    int32_t s2 = I(&b, HLO_SELECT, "s2", "f32[8]", 3, pv, x, y);
    int32_t s3 = I(&b, HLO_SELECT, "s3", "f32[8]", 3, pw, x, y);
    int32_t cl = I(&b, HLO_CLAMP, "cl", "f32[8]", 3, lo, x, y);
    expect_infer(&b, s1, "f32[8]"); /* scalar predicate */
    expect_infer(&b, s2, "f32[8]"); /* predicate with the same dims */
    expect_infer_error(&b, s3, "operand 0 (pw) is pred[4] but operand 1 (x) is f32[8]; select needs equal dimensions "
                               "(HLO has no implicit broadcast)");
    expect_infer(&b, cl, "f32[8]");
    done(&b);
}

/* ---------------------------------------------------------- data movement */

static void test_broadcast(void **state)
{
    (void)state;
    B b = begin();
    comp(&b, "main", true);
    int32_t x = P(&b, "x", "f32[4]", 0);
    int32_t ok = I(&b, HLO_BROADCAST, "bc.1", "f32[8,4]", 1, x);
    A(&b, ok)->dimensions = L(&b, 1, 1);
    int32_t bad = I(&b, HLO_BROADCAST, "bc.2", "f32[8,5]", 1, x);
    A(&b, bad)->dimensions = L(&b, 1, 1);
    int32_t oob = I(&b, HLO_BROADCAST, "bc.3", "f32[8,4]", 1, x);
    A(&b, oob)->dimensions = L(&b, 1, 2);
    expect_infer(&b, ok, "f32[8,4]");
    /* operand dim 0 (4) lands on result dim 1: the declared 5 is wrong */
    expect_verify(&b, "spmdc: error: bc.2: result shape f32[8,5] does not match the shape inferred from its "
                      "operands, f32[8,4]\n"
                      "spmdc: error: bc.3: dimensions={2}: 2 is not a dimension of the rank-2 result\n");
    done(&b);
}

static void test_reshape(void **state)
{
    (void)state;
    B b = begin();
    comp(&b, "main", true);
    int32_t x = P(&b, "x", "f32[8,4]", 0);
    int32_t ok = I(&b, HLO_RESHAPE, "r1", "f32[2,16]", 1, x);
    int32_t bad = I(&b, HLO_RESHAPE, "r2", "f32[30]", 1, x);
    expect_infer(&b, ok, "f32[2,16]"); /* 32 elements both */
    expect_infer_error(&b, bad, "reshape cannot change the element count: operand f32[8,4] has 32 elements, result "
                                "f32[30] has 30");
    done(&b);
}

static void test_transpose(void **state)
{
    (void)state;
    B b = begin();
    comp(&b, "main", true);
    int32_t x = P(&b, "x", "f32[2,3,5]", 0);
    int32_t t = I(&b, HLO_TRANSPOSE, "t", "f32[5,2,3]", 1, x);
    A(&b, t)->dimensions = L(&b, 3, 2, 0, 1);
    int32_t bad = I(&b, HLO_TRANSPOSE, "t2", "f32[5,2,3]", 1, x);
    A(&b, bad)->dimensions = L(&b, 3, 2, 0, 0);
    expect_infer(&b, t, "f32[5,2,3]"); /* out k = in perm[k]: 5, 2, 3 */
    expect_infer_error(&b, bad, "dimensions={2,0,0} repeats dimension 0");
    done(&b);
}

static void test_slice(void **state)
{
    (void)state;
    B b = begin();
    comp(&b, "main", true);
    int32_t x = P(&b, "x", "f32[10,8]", 0);
    int32_t s = I(&b, HLO_SLICE, "s", "f32[3,4]", 1, x);
    A(&b, s)->slice_start = L(&b, 2, 2, 0);
    A(&b, s)->slice_limit = L(&b, 2, 9, 8);
    A(&b, s)->slice_stride = L(&b, 2, 3, 2);
    int32_t bad = I(&b, HLO_SLICE, "s2", "f32[3,4]", 1, x);
    A(&b, bad)->slice_start = L(&b, 2, 2, 0);
    A(&b, bad)->slice_limit = L(&b, 2, 11, 8);
    expect_infer(&b, s, "f32[3,4]"); /* ceil((9-2)/3) = 3, ceil(8/2) = 4 */
    expect_infer_error(&b, bad, "slice dimension 0: [2:11] is not within [0:10] of f32[10,8]");
    done(&b);
}

static void test_dynamic_slice_and_update(void **state)
{
    (void)state;
    B b = begin();
    comp(&b, "main", true);
    int32_t x = P(&b, "x", "f32[10,8]", 0), i = P(&b, "i", "s32[]", 1), u = P(&b, "u", "f32[4,8]", 2);
    int32_t l = P(&b, "l", "s64[]", 3);
    int32_t ds = I(&b, HLO_DYNAMIC_SLICE, "ds", "f32[4,8]", 3, x, i, i);
    A(&b, ds)->dynamic_slice_sizes = L(&b, 2, 4, 8);
    int32_t dus = I(&b, HLO_DYNAMIC_UPDATE_SLICE, "dus", "f32[10,8]", 4, x, u, i, i);
    int32_t mixed = I(&b, HLO_DYNAMIC_UPDATE_SLICE, "dus2", "f32[10,8]", 4, x, u, i, l);
    int32_t few = I(&b, HLO_DYNAMIC_SLICE, "ds2", "f32[4,8]", 2, x, i);
    A(&b, few)->dynamic_slice_sizes = L(&b, 2, 4, 8);
    expect_infer(&b, ds, "f32[4,8]");
    expect_infer(&b, dus, "f32[10,8]");
    expect_infer_error(&b, mixed, "start indices have different element types, s32 and s64");
    expect_infer_error(&b, few, "dynamic-slice of a rank-2 operand takes 2 start indices, got 1");
    done(&b);
}

static void test_pad(void **state)
{
    (void)state;
    B b = begin();
    comp(&b, "main", true);
    int32_t x = P(&b, "x", "f32[4,5]", 0), v = P(&b, "v", "f32[]", 1);
    int32_t p = I(&b, HLO_PAD, "p", "f32[10,4]", 2, x, v);
    A(&b, p)->pad_lo = L(&b, 2, 1, -1);
    A(&b, p)->pad_hi = L(&b, 2, 2, 0);
    A(&b, p)->pad_interior = L(&b, 2, 1, 0);
    int32_t neg = I(&b, HLO_PAD, "p2", "f32[4,0]", 2, x, v);
    A(&b, neg)->pad_lo = L(&b, 2, 0, -4);
    A(&b, neg)->pad_hi = L(&b, 2, 0, -2);
    /* dim 0: 4 + 1 + 2 + 3*1 = 10; dim 1: 5 - 1 + 0 = 4 */
    expect_infer(&b, p, "f32[10,4]");
    expect_infer_error(&b, neg, "padding makes dimension 1 of f32[4,5] negative (-1)"); /* 5 - 4 - 2 */
    /* edges that cancel: 4 + INT64_MAX + (4 - INT64_MAX) = 8, though 4 + INT64_MAX overflows */
    const int64_t max_lo[2] = {INT64_MAX, 0}, cancel_hi[2] = {4 - INT64_MAX, 0}, one_hi[2] = {1, 0};
    int32_t cancel = I(&b, HLO_PAD, "p3", "f32[8,5]", 2, x, v);
    A(&b, cancel)->pad_lo = hlo_intlist(b.m, max_lo, 2);
    A(&b, cancel)->pad_hi = hlo_intlist(b.m, cancel_hi, 2);
    expect_infer(&b, cancel, "f32[8,5]");
    int32_t big = I(&b, HLO_PAD, "p4", "f32[8,5]", 2, x, v);
    A(&b, big)->pad_lo = hlo_intlist(b.m, max_lo, 2);
    A(&b, big)->pad_hi = hlo_intlist(b.m, one_hi, 2);
    expect_infer_error(&b, big, "padding of dimension 0 of f32[4,5] overflows 64-bit integers");
    done(&b);
}

static void test_concatenate_reverse_iota(void **state)
{
    (void)state;
    B b = begin();
    comp(&b, "main", true);
    int32_t x = P(&b, "x", "f32[2,3]", 0), y = P(&b, "y", "f32[5,3]", 1), z = P(&b, "z", "f32[5,4]", 2);
    int32_t c = I(&b, HLO_CONCATENATE, "c", "f32[7,3]", 2, x, y);
    A(&b, c)->dimensions = L(&b, 1, 0);
    int32_t bad = I(&b, HLO_CONCATENATE, "c2", "f32[7,3]", 2, x, z);
    A(&b, bad)->dimensions = L(&b, 1, 0);
    int32_t r = I(&b, HLO_REVERSE, "r", "f32[2,3]", 1, x);
    A(&b, r)->dimensions = L(&b, 2, 0, 1);
    int32_t io = I(&b, HLO_IOTA, "io", "s32[4,8]", 0);
    A(&b, io)->iota_dimension = 1;
    int32_t io2 = I(&b, HLO_IOTA, "io2", "s32[4,8]", 0);
    A(&b, io2)->iota_dimension = 2;
    expect_infer(&b, c, "f32[7,3]"); /* 2 + 5 along dim 0 */
    expect_infer_error(&b, bad, "operand 1 (z) is f32[5,4] but operand 0 is f32[2,3]: they differ in dimension 1, "
                                "not only in the concatenated dimension 0");
    expect_infer(&b, r, "f32[2,3]");
    expect_infer(&b, io, "s32[4,8]");
    expect_infer_error(&b, io2, "iota_dimension=2 is not a dimension of s32[4,8]");
    done(&b);
}

/* ----------------------------------------------------- dot, convolution */

static void test_dot(void **state)
{
    (void)state;
    B b = begin();
    comp(&b, "main", true);
    int32_t l = P(&b, "l", "f32[2,8,16]", 0), r = P(&b, "r", "f32[2,16,32]", 1);
    int32_t d = I(&b, HLO_DOT, "d", "f32[2,8,32]", 2, l, r);
    A(&b, d)->lhs_batch = L(&b, 1, 0);
    A(&b, d)->rhs_batch = L(&b, 1, 0);
    A(&b, d)->lhs_contracting = L(&b, 1, 2);
    A(&b, d)->rhs_contracting = L(&b, 1, 1);
    /* preferred element type: bf16 x bf16 -> f32 is legal */
    int32_t x = P(&b, "x", "bf16[8,16]", 2), y = P(&b, "y", "bf16[4,16]", 3);
    int32_t mixed = I(&b, HLO_DOT, "m", "f32[8,4]", 2, x, y);
    A(&b, mixed)->lhs_contracting = L(&b, 1, 1);
    A(&b, mixed)->rhs_contracting = L(&b, 1, 1);
    int32_t outer = I(&b, HLO_DOT, "o", "bf16[8,16,4,16]", 2, x, y);
    /* batch [2], lhs free [8], rhs free [32] */
    expect_infer(&b, d, "f32[2,8,32]");
    expect_infer(&b, mixed, "f32[8,4]");
    expect_infer(&b, outer, "bf16[8,16,4,16]"); /* no contracting dims: outer product */
    done(&b);
}

static void test_dot_mismatch_message(void **state)
{
    (void)state;
    B b = begin();
    comp(&b, "main", true);
    int32_t l = P(&b, "l", "f32[8,16]", 0), r = P(&b, "r", "f32[16,4]", 1), r2 = P(&b, "r2", "f32[8,4]", 2);
    int32_t d = I(&b, HLO_DOT, "dot.7", "f32[8,8]", 2, l, r);
    A(&b, d)->lhs_contracting = L(&b, 1, 1);
    A(&b, d)->rhs_contracting = L(&b, 1, 0);
    int32_t e = I(&b, HLO_DOT, "dot.8", "f32[8,4]", 2, l, r2);
    A(&b, e)->lhs_contracting = L(&b, 1, 1);
    A(&b, e)->rhs_contracting = L(&b, 1, 0);
    expect_verify(&b, "spmdc: error: dot.7: result shape f32[8,8] does not match the shape inferred from its operands, "
                      "f32[8,4]\n"
                      "spmdc: error: dot.8: contracting dimension 1 of lhs f32[8,16] and 0 of rhs f32[8,4] differ in "
                      "size\n");
    done(&b);
}

static ConvDims *conv_b01f(B *b)
{
    /* b01f_01io->b01f */
    ConvDims *c = ARENA_NEW(b->m->arena, ConvDims);
    c->n_spatial = 2;
    c->in_batch = 0, c->in_spatial[0] = 1, c->in_spatial[1] = 2, c->in_feature = 3;
    c->k_spatial[0] = 0, c->k_spatial[1] = 1, c->k_in = 2, c->k_out = 3;
    c->out_batch = 0, c->out_spatial[0] = 1, c->out_spatial[1] = 2, c->out_feature = 3;
    return c;
}

static Window *window2(B *b, int64_t size, int64_t stride, int64_t pad)
{
    Window *w = ARENA_NEW(b->m->arena, Window);
    w->rank = 2;
    for (int d = 0; d < 2; d++) {
        WindowDim wd = {size, stride, pad, pad, 1, 1, false};
        w->dims[d] = wd;
    }
    return w;
}

static void test_convolution(void **state)
{
    (void)state;
    B b = begin();
    comp(&b, "main", true);
    int32_t in = P(&b, "in", "f32[1,10,10,3]", 0), k = P(&b, "k", "f32[3,3,3,8]", 1);
    int32_t in6 = P(&b, "in6", "f32[1,10,10,6]", 2), in4 = P(&b, "in4", "f32[4,10,10,3]", 3);
    int32_t same = I(&b, HLO_CONVOLUTION, "same", "f32[1,10,10,8]", 2, in, k);
    A(&b, same)->conv = conv_b01f(&b), A(&b, same)->window = window2(&b, 3, 1, 1);
    int32_t strided = I(&b, HLO_CONVOLUTION, "strided", "f32[1,5,5,8]", 2, in, k);
    A(&b, strided)->conv = conv_b01f(&b), A(&b, strided)->window = window2(&b, 3, 2, 1);
    int32_t grouped = I(&b, HLO_CONVOLUTION, "grouped", "f32[1,8,8,8]", 2, in6, k);
    A(&b, grouped)->conv = conv_b01f(&b), A(&b, grouped)->window = window2(&b, 3, 1, 0);
    A(&b, grouped)->feature_group_count = 2;
    int32_t bg = I(&b, HLO_CONVOLUTION, "bg", "f32[2,10,10,8]", 2, in4, k);
    A(&b, bg)->conv = conv_b01f(&b), A(&b, bg)->window = window2(&b, 3, 1, 1);
    A(&b, bg)->batch_group_count = 2;
    int32_t badk = I(&b, HLO_CONVOLUTION, "badk", "f32[1,10,10,8]", 2, in6, k);
    A(&b, badk)->conv = conv_b01f(&b), A(&b, badk)->window = window2(&b, 3, 1, 1);
    expect_infer(&b, same, "f32[1,10,10,8]");   /* (10 + 2 - 3)/1 + 1 = 10 */
    expect_infer(&b, strided, "f32[1,5,5,8]");  /* (10 + 2 - 3)/2 + 1 = 5 */
    expect_infer(&b, grouped, "f32[1,8,8,8]");  /* 6 features / 2 groups = 3 = kernel input; 10 - 3 + 1 = 8 */
    expect_infer(&b, bg, "f32[2,10,10,8]");     /* batch 4 / batch_group_count 2 */
    expect_infer_error(&b, badk, "input feature dimension 6 does not equal kernel input features 3 times "
                                 "feature_group_count 1");
    done(&b);
}

/* ------------------------------------------------------------- reductions */

static void test_reduce(void **state)
{
    (void)state;
    B b = begin();
    int32_t add = reducer(&b, "add", "f32[]", HLO_ADD);
    /* variadic reducer: (f32 acc, s32 acc, f32 x, s32 y) -> (f32[], s32[]) */
    comp(&b, "argmax", false);
    int32_t rc = b.c;
    int32_t a0 = P(&b, "a0", "f32[]", 0), a1 = P(&b, "a1", "s32[]", 1);
    P(&b, "b0", "f32[]", 2), P(&b, "b1", "s32[]", 3);
    Shape el[2] = {sh("f32[]"), sh("s32[]")};
    inst_s(&b, HLO_TUPLE, "t", tup(b.m, 2, el), 2, a0, a1);
    comp(&b, "main", true);
    int32_t x = P(&b, "x", "f32[8,4]", 0), i = P(&b, "i", "s32[8,4]", 1);
    int32_t z = P(&b, "z", "f32[]", 2), zi = P(&b, "zi", "s32[]", 3);
    int32_t r = I(&b, HLO_REDUCE, "r", "f32[8]", 2, x, z);
    A(&b, r)->dimensions = L(&b, 1, 1), A(&b, r)->to_apply = add;
    Shape out[2] = {sh("f32[4]"), sh("s32[4]")};
    int32_t v = inst_s(&b, HLO_REDUCE, "v", tup(b.m, 2, out), 4, x, i, z, zi);
    A(&b, v)->dimensions = L(&b, 1, 0), A(&b, v)->to_apply = rc;
    int32_t wrong = I(&b, HLO_REDUCE, "w", "s32[8]", 2, i, zi);
    A(&b, wrong)->dimensions = L(&b, 1, 1), A(&b, wrong)->to_apply = add;
    expect_infer(&b, r, "f32[8]");
    expect_infer(&b, v, "(f32[4], s32[4])");
    expect_infer_error(&b, wrong, "to_apply computation add: parameter 0 is f32[], expected s32[]");
    expect_verify(&b, "spmdc: error: w: to_apply computation add: parameter 0 is f32[], expected s32[]\n");
    done(&b);
}

static void test_reduce_window_and_select_and_scatter(void **state)
{
    (void)state;
    B b = begin();
    int32_t add = reducer(&b, "add", "f32[]", HLO_ADD);
    int32_t save = b.c;
    comp(&b, "ge", false);
    int32_t ge = b.c;
    int32_t p = P(&b, "a", "f32[]", 0), q = P(&b, "b", "f32[]", 1);
    I(&b, HLO_COMPARE, "c", "pred[]", 2, p, q);
    b.c = save;
    comp(&b, "main", true);
    int32_t x = P(&b, "x", "f32[8,8]", 0), z = P(&b, "z", "f32[]", 1), src = P(&b, "s", "f32[4,4]", 2);
    int32_t rw = I(&b, HLO_REDUCE_WINDOW, "rw", "f32[4,4]", 2, x, z);
    A(&b, rw)->window = window2(&b, 2, 2, 0), A(&b, rw)->to_apply = add;
    int32_t dil = I(&b, HLO_REDUCE_WINDOW, "dil", "f32[14,14]", 2, x, z);
    A(&b, dil)->window = window2(&b, 2, 1, 0), A(&b, dil)->to_apply = add;
    A(&b, dil)->window->dims[0].lhs_dilate = A(&b, dil)->window->dims[1].lhs_dilate = 2;
    int32_t ss = I(&b, HLO_SELECT_AND_SCATTER, "ss", "f32[8,8]", 3, x, src, z);
    A(&b, ss)->window = window2(&b, 2, 2, 0), A(&b, ss)->to_apply = add, A(&b, ss)->select = ge;
    expect_infer(&b, rw, "f32[4,4]");    /* (8 - 2)/2 + 1 = 4 */
    expect_infer(&b, dil, "f32[14,14]"); /* base dilated to (8-1)*2+1 = 15; 15 - 2 + 1 = 14 */
    expect_infer(&b, ss, "f32[8,8]");
    expect_verify(&b, "");
    done(&b);
}

/* ---------------------------------------------------------- gather/scatter */

static void test_gather(void **state)
{
    (void)state;
    B b = begin();
    comp(&b, "main", true);
    int32_t op = P(&b, "op", "f32[10,9]", 0), ix = P(&b, "ix", "s32[5,1]", 1), ix2 = P(&b, "ix2", "s32[5,2]", 2);
    int32_t g = I(&b, HLO_GATHER, "g", "f32[5,9]", 2, op, ix);
    HloAttrs *a = A(&b, g);
    a->offset_dims = L(&b, 1, 1), a->collapsed_slice_dims = L(&b, 1, 0), a->start_index_map = L(&b, 1, 0);
    a->index_vector_dim = 1, a->slice_sizes = L(&b, 2, 1, 9);
    int32_t g2 = I(&b, HLO_GATHER, "g2", "f32[5,2,3]", 2, op, ix2);
    a = A(&b, g2);
    a->offset_dims = L(&b, 2, 1, 2), a->start_index_map = L(&b, 2, 0, 1);
    a->index_vector_dim = 1, a->slice_sizes = L(&b, 2, 2, 3);
    int32_t bad = I(&b, HLO_GATHER, "g3", "f32[5,9]", 2, op, ix2);
    a = A(&b, bad);
    a->offset_dims = L(&b, 1, 1), a->collapsed_slice_dims = L(&b, 1, 0), a->start_index_map = L(&b, 1, 0);
    a->index_vector_dim = 1, a->slice_sizes = L(&b, 2, 1, 9);
    /* batch dims of the indices (5) then the non-collapsed slice size 9 */
    expect_infer(&b, g, "f32[5,9]");
    expect_infer(&b, g2, "f32[5,2,3]"); /* no collapsed dims: both slice sizes are offset dims */
    expect_infer_error(&b, bad, "start_index_map={0} needs one entry per index vector component: 2 for "
                                "indices s32[5,2]");
    done(&b);
}

static void test_scatter(void **state)
{
    (void)state;
    B b = begin();
    int32_t add = reducer(&b, "add", "f32[]", HLO_ADD);
    comp(&b, "main", true);
    int32_t op = P(&b, "op", "f32[10,9]", 0), ix = P(&b, "ix", "s32[5,1]", 1), up = P(&b, "up", "f32[5,9]", 2);
    int32_t big = P(&b, "big", "f32[5,10]", 3);
    int32_t s = I(&b, HLO_SCATTER, "s", "f32[10,9]", 3, op, ix, up);
    HloAttrs *a = A(&b, s);
    a->update_window_dims = L(&b, 1, 1), a->inserted_window_dims = L(&b, 1, 0);
    a->scatter_dims_to_operand_dims = L(&b, 1, 0), a->index_vector_dim = 1, a->to_apply = add;
    int32_t bad = I(&b, HLO_SCATTER, "s2", "f32[10,9]", 3, op, ix, big);
    a = A(&b, bad);
    a->update_window_dims = L(&b, 1, 1), a->inserted_window_dims = L(&b, 1, 0);
    a->scatter_dims_to_operand_dims = L(&b, 1, 0), a->index_vector_dim = 1, a->to_apply = add;
    expect_infer(&b, s, "f32[10,9]");
    expect_infer_error(&b, bad, "update window dimension 1 (size 10) exceeds operand dimension 1 (size 9)");
    done(&b);
}

/* ------------------------------------------------------------ sort, map */

static void test_sort_and_map(void **state)
{
    (void)state;
    B b = begin();
    comp(&b, "lt", false);
    int32_t lt = b.c;
    int32_t k0 = P(&b, "k0", "f32[]", 0), k1 = P(&b, "k1", "f32[]", 1);
    P(&b, "v0", "s32[]", 2), P(&b, "v1", "s32[]", 3);
    I(&b, HLO_COMPARE, "c", "pred[]", 2, k0, k1);
    comp(&b, "cvt", false);
    int32_t cvt = b.c;
    int32_t f = P(&b, "f", "f32[]", 0);
    I(&b, HLO_CONVERT, "i", "s32[]", 1, f);
    comp(&b, "main", true);
    int32_t keys = P(&b, "keys", "f32[8]", 0), vals = P(&b, "vals", "s32[8]", 1);
    Shape el[2] = {sh("f32[8]"), sh("s32[8]")};
    int32_t s = inst_s(&b, HLO_SORT, "s", tup(b.m, 2, el), 2, keys, vals);
    A(&b, s)->dimensions = L(&b, 1, 0), A(&b, s)->to_apply = lt;
    int32_t m = I(&b, HLO_MAP, "m", "s32[8]", 1, keys);
    A(&b, m)->to_apply = cvt;
    int32_t bad = I(&b, HLO_SORT, "s1", "f32[8]", 1, keys);
    A(&b, bad)->dimensions = L(&b, 1, 0), A(&b, bad)->to_apply = lt;
    expect_infer(&b, s, "(f32[8], s32[8])");
    expect_infer(&b, m, "s32[8]"); /* map's result type is the callee's */
    expect_infer_error(&b, bad, "to_apply computation lt takes 4 parameters, expected 2");
    done(&b);
}

/* ------------------------------------------------- structure and control */

static void test_tuple_gte_barrier(void **state)
{
    (void)state;
    B b = begin();
    comp(&b, "main", true);
    int32_t x = P(&b, "x", "f32[2]", 0), y = P(&b, "y", "s32[]", 1);
    Shape el[2] = {sh("f32[2]"), sh("s32[]")};
    int32_t t = inst_s(&b, HLO_TUPLE, "t", tup(b.m, 2, el), 2, x, y);
    int32_t g = I(&b, HLO_GET_TUPLE_ELEMENT, "g", "s32[]", 1, t);
    A(&b, g)->index = 1;
    int32_t ob = inst_s(&b, HLO_OPTIMIZATION_BARRIER, "ob", tup(b.m, 2, el), 1, t);
    int32_t bad = I(&b, HLO_GET_TUPLE_ELEMENT, "g2", "s32[]", 1, t);
    A(&b, bad)->index = 2;
    expect_infer(&b, t, "(f32[2], s32[])");
    expect_infer(&b, g, "s32[]");
    expect_infer(&b, ob, "(f32[2], s32[])");
    expect_infer_error(&b, bad, "index=2 is out of range for the 2-element tuple (f32[2], s32[])");
    done(&b);
}

static void test_parameters_and_constants(void **state)
{
    (void)state;
    B b = begin();
    comp(&b, "main", true);
    P(&b, "p0", "f32[2]", 0);
    P(&b, "p1", "f32[2]", 2);
    int32_t c = I(&b, HLO_CONSTANT, "c", "s32[3]", 0);
    Literal *lit = ARENA_NEW(b.m->arena, Literal);
    int64_t vals[2] = {1, 2};
    lit->n = 2, lit->i = vals;
    A(&b, c)->literal = lit;
    I(&b, HLO_PARTITION_ID, "pid", "u32[]", 0);
    I(&b, HLO_REPLICA_ID, "rid", "s32[]", 0);
    expect_verify(&b, "spmdc: error: p1: parameter number 2 is out of range: computation main has 2 parameters, "
                      "numbered from 0\n"
                      "spmdc: error: c: the literal has 2 values but s32[3] has 3 elements\n"
                      "spmdc: error: rid: result shape s32[] does not match the shape inferred from its operands, "
                      "u32[]\n");
    done(&b);
}

static void test_parameter_number_reused(void **state)
{
    (void)state;
    B b = begin();
    comp(&b, "main", true);
    P(&b, "p0", "f32[2]", 1);
    P(&b, "p1", "f32[2]", 1);
    /* two parameters: numbers must be 0 and 1; 1 is used twice, 0 never */
    expect_verify(&b, "spmdc: error: p1: parameter number 1 is already used by p0\n");
    done(&b);
}

static void test_while(void **state)
{
    (void)state;
    B b = begin();
    comp(&b, "cond", false);
    int32_t cond = b.c;
    int32_t cp = P(&b, "p", "s32[]", 0), lim = I(&b, HLO_CONSTANT, "lim", "s32[]", 0);
    Literal *lit = ARENA_NEW(b.m->arena, Literal);
    int64_t ten = 10;
    lit->n = 1, lit->i = &ten;
    A(&b, lim)->literal = lit;
    I(&b, HLO_COMPARE, "lt", "pred[]", 2, cp, lim);
    comp(&b, "body", false);
    int32_t body = b.c;
    int32_t bp = P(&b, "p", "s32[]", 0);
    I(&b, HLO_ADD, "inc", "s32[]", 2, bp, bp);
    comp(&b, "badbody", false);
    int32_t badbody = b.c;
    int32_t q = P(&b, "p", "s32[]", 0);
    I(&b, HLO_CONVERT, "f", "f32[]", 1, q);
    comp(&b, "main", true);
    int32_t init = P(&b, "i", "s32[]", 0);
    int32_t w = I(&b, HLO_WHILE, "w", "s32[]", 1, init);
    A(&b, w)->condition = cond, A(&b, w)->body = body;
    int32_t w2 = I(&b, HLO_WHILE, "w2", "s32[]", 1, init);
    A(&b, w2)->condition = cond, A(&b, w2)->body = badbody;
    expect_infer(&b, w, "s32[]");
    expect_verify(&b, "spmdc: error: w2: body computation badbody returns f32[], expected s32[]\n");
    done(&b);
}

static void test_conditional_and_call(void **state)
{
    (void)state;
    B b = begin();
    comp(&b, "t", false);
    int32_t tc = b.c;
    int32_t tp = P(&b, "p", "f32[4]", 0);
    I(&b, HLO_NEGATE, "n", "f32[4]", 1, tp);
    comp(&b, "f", false);
    int32_t fc = b.c;
    int32_t fp = P(&b, "p", "s32[]", 0);
    I(&b, HLO_BROADCAST, "bc", "f32[4]", 1, I(&b, HLO_CONVERT, "cv", "f32[]", 1, fp));
    comp(&b, "main", true);
    int32_t pr = P(&b, "pr", "pred[]", 0), x = P(&b, "x", "f32[4]", 1), i = P(&b, "i", "s32[]", 2);
    int32_t c = I(&b, HLO_CONDITIONAL, "c", "f32[4]", 3, pr, x, i);
    A(&b, c)->branches = L(&b, 2, tc, fc), A(&b, c)->branches_by_pred = true;
    int32_t cl = I(&b, HLO_CALL, "cl", "f32[4]", 1, x);
    A(&b, cl)->to_apply = tc;
    int32_t bad = I(&b, HLO_CALL, "cl2", "f32[4]", 1, i);
    A(&b, bad)->to_apply = tc;
    int32_t cc = I(&b, HLO_CUSTOM_CALL, "cc", "f32[7,7]", 1, x);
    A(&b, cc)->custom_call_target = "Foo";
    expect_infer(&b, c, "f32[4]");
    expect_infer(&b, cl, "f32[4]");
    expect_infer_error(&b, bad, "to_apply computation t: parameter 0 is f32[4], expected s32[]");
    expect_infer(&b, cc, "f32[7,7]"); /* custom-call: the declared shape */
    done(&b);
}

/* ------------------------------------------------------------- collectives */

static void groups(B *b, int32_t i, int64_t n_groups, int64_t size)
{
    ReplicaGroups *g = &A(b, i)->replica_groups;
    g->n_groups = n_groups, g->group_size = size;
    g->ids = ARENA_ARRAY(b->m->arena, int64_t, n_groups * size);
    for (int64_t k = 0; k < n_groups * size; k++) g->ids[k] = k;
    A(b, i)->channel_id = 1, A(b, i)->use_global_device_ids = true;
}

static void test_collectives(void **state)
{
    (void)state;
    B b = begin();
    int32_t add = reducer(&b, "add", "f32[]", HLO_ADD);
    comp(&b, "main", true);
    int32_t x = P(&b, "x", "f32[8,6]", 0);
    int32_t ar = I(&b, HLO_ALL_REDUCE, "ar", "f32[8,6]", 1, x);
    groups(&b, ar, 1, 8), A(&b, ar)->to_apply = add;
    int32_t ag = I(&b, HLO_ALL_GATHER, "ag", "f32[32,6]", 1, x);
    groups(&b, ag, 2, 4), A(&b, ag)->dimensions = L(&b, 1, 0);
    int32_t rs = I(&b, HLO_REDUCE_SCATTER, "rs", "f32[2,6]", 1, x);
    groups(&b, rs, 2, 4), A(&b, rs)->dimensions = L(&b, 1, 0), A(&b, rs)->to_apply = add;
    int32_t rs3 = I(&b, HLO_REDUCE_SCATTER, "rs3", "f32[8,2]", 1, x);
    groups(&b, rs3, 2, 4), A(&b, rs3)->dimensions = L(&b, 1, 1), A(&b, rs3)->to_apply = add;
    int32_t a2a = I(&b, HLO_ALL_TO_ALL, "a2a", "f32[8,6]", 1, x);
    groups(&b, a2a, 4, 2), A(&b, a2a)->dimensions = L(&b, 1, 1);
    int32_t cp = I(&b, HLO_COLLECTIVE_PERMUTE, "cp", "f32[8,6]", 1, x);
    int64_t pairs[4] = {0, 1, 1, 0};
    A(&b, cp)->pairs = pairs, A(&b, cp)->n_pairs = 2;
    expect_infer(&b, ar, "f32[8,6]");
    expect_infer(&b, ag, "f32[32,6]"); /* dim 0: 8 x group size 4 */
    expect_infer(&b, rs, "f32[2,6]");  /* dim 0: 8 / 4 */
    expect_infer_error(&b, rs3, "reduce-scatter: dimension 1 of f32[8,6] (size 6) is not divisible by the group "
                                "size 4");
    expect_infer(&b, a2a, "f32[8,6]");
    expect_infer(&b, cp, "f32[8,6]");
    done(&b);
}

static void test_collective_group_size_modes(void **state)
{
    (void)state;
    B b = begin();
    b.m->num_partitions = 8;
    comp(&b, "main", true);
    int32_t x = P(&b, "x", "f32[2]", 0);
    /* no replica_groups, channel_id + global ids: all 8 devices */
    int32_t ag = I(&b, HLO_ALL_GATHER, "ag", "f32[16]", 1, x);
    A(&b, ag)->dimensions = L(&b, 1, 0), A(&b, ag)->channel_id = 1, A(&b, ag)->use_global_device_ids = true;
    /* replica_groups={{0}} with channel_id only: each replica brings its 8 partitions */
    int32_t ag2 = I(&b, HLO_ALL_GATHER, "ag2", "f32[16]", 1, x);
    groups(&b, ag2, 1, 1), A(&b, ag2)->use_global_device_ids = false, A(&b, ag2)->dimensions = L(&b, 1, 0);
    /* no channel_id: cross-replica, replica_count defaults to 1 */
    int32_t ag3 = I(&b, HLO_ALL_GATHER, "ag3", "f32[2]", 1, x);
    A(&b, ag3)->dimensions = L(&b, 1, 0);
    assert_int_equal(verify_collective_group_size(b.m, hlo_inst(b.m, b.c, ag)), 8);
    assert_int_equal(verify_collective_group_size(b.m, hlo_inst(b.m, b.c, ag2)), 8);
    assert_int_equal(verify_collective_group_size(b.m, hlo_inst(b.m, b.c, ag3)), 1);
    expect_verify(&b, "");
    done(&b);
}

/* Neither replica_groups nor num_partitions/replica_count: the group size is
 * unknown, so the declared multiple is accepted (not guessed as 1). */
static void test_collective_group_size_unknown(void **state)
{
    (void)state;
    B b = begin();
    int32_t add = reducer(&b, "add", "f32[]", HLO_ADD);
    comp(&b, "main", true);
    int32_t x = P(&b, "x", "f32[2,6]", 0);
    int32_t ag = I(&b, HLO_ALL_GATHER, "ag", "f32[16,6]", 1, x);
    A(&b, ag)->dimensions = L(&b, 1, 0);
    int32_t rs = I(&b, HLO_REDUCE_SCATTER, "rs", "f32[2,2]", 1, x);
    A(&b, rs)->dimensions = L(&b, 1, 1), A(&b, rs)->to_apply = add;
    int32_t bad = I(&b, HLO_ALL_GATHER, "ag2", "f32[5,6]", 1, x);
    A(&b, bad)->dimensions = L(&b, 1, 0);
    assert_int_equal(verify_collective_group_size(b.m, hlo_inst(b.m, b.c, ag)), 0);
    expect_infer(&b, ag, "f32[16,6]"); /* 16 = 2 x 8 */
    expect_infer(&b, rs, "f32[2,2]");  /* 6 / 3 */
    /* 5 is no multiple of 2: the factor cannot be read off, so n = 1 */
    expect_verify(&b, "spmdc: error: ag2: result shape f32[5,6] does not match the shape inferred from its operands, "
                      "f32[2,6]\n");
    done(&b);
}

static void test_replica_groups_and_pairs_checked(void **state)
{
    (void)state;
    B b = begin();
    int32_t add = reducer(&b, "add", "f32[]", HLO_ADD);
    comp(&b, "main", true);
    int32_t x = P(&b, "x", "f32[8]", 0);
    int32_t ar = I(&b, HLO_ALL_REDUCE, "ar", "f32[8]", 1, x);
    groups(&b, ar, 2, 2), A(&b, ar)->to_apply = add;
    A(&b, ar)->replica_groups.ids[3] = 1;
    int32_t cp = I(&b, HLO_COLLECTIVE_PERMUTE, "cp", "f32[8]", 1, x);
    int64_t pairs[4] = {0, 1, 2, 1};
    A(&b, cp)->pairs = pairs, A(&b, cp)->n_pairs = 2;
    expect_verify(&b, "spmdc: error: ar: replica_groups list device 1 more than once\n"
                      "spmdc: error: cp: source_target_pairs targets list device 1 more than once\n");
    done(&b);
}

static void test_rng(void **state)
{
    (void)state;
    B b = begin();
    comp(&b, "main", true);
    int32_t lo = P(&b, "lo", "f32[]", 0), hi = P(&b, "hi", "f32[]", 1), st = P(&b, "st", "u64[2]", 2);
    int32_t r = I(&b, HLO_RNG, "r", "f32[4,4]", 2, lo, hi);
    A(&b, r)->rng_distribution = "rng_uniform";
    Shape el[2] = {sh("u64[2]"), sh("u32[8]")};
    int32_t g = inst_s(&b, HLO_RNG_BIT_GENERATOR, "g", tup(b.m, 2, el), 1, st);
    int32_t nod = I(&b, HLO_RNG, "r2", "f32[4]", 2, lo, hi);
    expect_infer(&b, r, "f32[4,4]");
    expect_infer(&b, g, "(u64[2], u32[8])");
    expect_infer_error(&b, nod, "rng needs distribution=rng_uniform or distribution=rng_normal");
    done(&b);
}

/* ------------------------------------------------------- module structure */

static void test_arity(void **state)
{
    (void)state;
    B b = begin();
    int32_t add = reducer(&b, "add", "f32[]", HLO_ADD);
    comp(&b, "main", true);
    int32_t x = P(&b, "x", "f32[2]", 0), z = P(&b, "z", "f32[]", 1);
    I(&b, HLO_ADD, "a", "f32[2]", 3, x, x, x);
    int32_t r = I(&b, HLO_REDUCE, "r", "f32[]", 3, x, z, z);
    A(&b, r)->to_apply = add, A(&b, r)->dimensions = L(&b, 1, 0);
    I(&b, HLO_CONCATENATE, "c", "f32[2]", 0);
    expect_verify(&b, "spmdc: error: a: add takes 2 operands, got 3\n"
                      "spmdc: error: r: reduce takes N inputs then N init values (an even number >= 2 of operands), "
                      "got 3\n"
                      "spmdc: error: c: concatenate takes at least 1 operand, got 0\n");
    done(&b);
}

static void test_structure_errors(void **state)
{
    (void)state;
    B b = begin();
    comp(&b, "empty", false);
    comp(&b, "main", true);
    int32_t main = b.c;
    int32_t x = P(&b, "x", "f32[2]", 0);
    int32_t r = I(&b, HLO_REDUCE, "r", "f32[]", 0);
    (void)r;
    /* make r use an instruction defined after it */
    int32_t y = I(&b, HLO_NEGATE, "y", "f32[2]", 1, x);
    int32_t late = I(&b, HLO_NEGATE, "late", "f32[2]", 1, y);
    hlo_inst(b.m, main, late - 1)->operands[0] = late;
    int32_t later = hlo_add_computation(b.m, "later", false);
    int32_t lp = hlo_add_inst(b.m, later, HLO_PARAMETER, "p", &(Shape){.type = ET_F32}, NULL, 0);
    (void)lp;
    b.c = main;
    int32_t cl = I(&b, HLO_CALL, "cl", "f32[]", 1, x);
    A(&b, cl)->to_apply = later;
    expect_verify(&b, "spmdc: error: computation empty has no ROOT instruction\n"
                      "spmdc: error: r: reduce takes N inputs then N init values (an even number >= 2 of operands), "
                      "got 0\n"
                      "spmdc: error: y: operand 0, late, is not defined before its use\n"
                      "spmdc: error: cl: to_apply computation later must be defined before main, which calls it\n");
    done(&b);
}

static void test_no_entry_and_malformed_shape(void **state)
{
    (void)state;
    B b = begin();
    comp(&b, "main", false);
    Shape s = sh("f32[2]");
    s.dims[0] = -3;
    param_s(&b, "p", s, 0);
    expect_verify(&b, "spmdc: error: module m has no ENTRY computation\n"
                      "spmdc: error: p: malformed result shape (unknown element type, rank above 8 or a negative "
                      "dimension)\n");
    done(&b);
}

static void test_layout_is_not_an_error(void **state)
{
    (void)state;
    B b = begin();
    comp(&b, "main", true);
    int32_t x = P(&b, "x", "f32[8,4]", 0);
    Shape s = sh("f32[8,4]");
    s.has_layout = true, s.minor_to_major[0] = 0, s.minor_to_major[1] = 1;
    inst_s(&b, HLO_COPY, "c", s, 1, x);
    expect_verify(&b, "");
    done(&b);
}

static void test_diag_span_is_the_instruction(void **state)
{
    (void)state;
    static const char text[] = "HloModule m\nENTRY main {\n  x = f32[4] parameter(0)\n  ROOT n = s32[4] negate(x)\n}\n";
    B b = begin();
    DiagEngine *d = diag_create(NULL);
    uint32_t f = diag_add_file(d, "m.hlo", text, sizeof text - 1);
    comp(&b, "main", true);
    int32_t x = P(&b, "x", "f32[4]", 0);
    int32_t n = I(&b, HLO_NEGATE, "n", "s32[4]", 1, x);
    hlo_inst(b.m, b.c, n)->span = src_span_at(f, 4, 8);
    assert_false(verify_module(b.m, d));
    assert_string_equal(diag_text(d), "m.hlo:4:8: error: n: result shape s32[4] does not match the shape inferred "
                                      "from its operands, f32[4]\n"
                                      "    ROOT n = s32[4] negate(x)\n"
                                      "         ^\n");
    diag_destroy(d);
    done(&b);
}

/* ------------------------------------------------------------ from text */

/* Most opcodes in XLA's own text forms (collectives with iota and explicit
 * replica groups, variadic sort, while over a tuple, windows, gather and
 * scatter): a valid module, so no error. */
static const char MANY_OPS[] =
    "HloModule many, num_partitions=8\n"
    "\n"
    "add {\n"
    "  x = f32[] parameter(0)\n"
    "  y = f32[] parameter(1)\n"
    "  ROOT s = f32[] add(x, y)\n"
    "}\n"
    "\n"
    "ge {\n"
    "  a = f32[] parameter(0)\n"
    "  b = f32[] parameter(1)\n"
    "  ROOT c = pred[] compare(a, b), direction=GE\n"
    "}\n"
    "\n"
    "lt2 {\n"
    "  a = f32[] parameter(0)\n"
    "  b = f32[] parameter(1)\n"
    "  c = s32[] parameter(2)\n"
    "  d = s32[] parameter(3)\n"
    "  ROOT r = pred[] compare(a, b), direction=LT\n"
    "}\n"
    "\n"
    "cond {\n"
    "  p = (s32[], f32[4]) parameter(0)\n"
    "  i = s32[] get-tuple-element(p), index=0\n"
    "  n = s32[] constant(10)\n"
    "  ROOT lt = pred[] compare(i, n), direction=LT\n"
    "}\n"
    "\n"
    "body {\n"
    "  p = (s32[], f32[4]) parameter(0)\n"
    "  i = s32[] get-tuple-element(p), index=0\n"
    "  v = f32[4] get-tuple-element(p), index=1\n"
    "  one = s32[] constant(1)\n"
    "  i2 = s32[] add(i, one)\n"
    "  v2 = f32[4] negate(v)\n"
    "  ROOT t = (s32[], f32[4]) tuple(i2, v2)\n"
    "}\n"
    "\n"
    "ENTRY main {\n"
    "  x = f32[8,16]{1,0} parameter(0)\n"
    "  w = f32[16,32] parameter(1)\n"
    "  img = f32[2,10,10,3] parameter(2)\n"
    "  k = f32[3,3,3,8] parameter(3)\n"
    "  idx = s32[5,1] parameter(4)\n"
    "  big = f32[10,9] parameter(5)\n"
    "  upd = f32[5,9] parameter(6)\n"
    "  v4 = f32[4] parameter(7)\n"
    "  zero = f32[] constant(0)\n"
    "  d = f32[8,32] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  r = f32[8] reduce(d, zero), dimensions={1}, to_apply=add\n"
    "  rw = f32[4,16] reduce-window(d, zero), window={size=2x2 stride=2x2}, to_apply=add\n"
    "  g = f32[5,9] gather(big, idx), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,9}\n"
    "  sc = f32[10,9] scatter(big, idx, upd), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add\n"
    "  t = f32[32,8] transpose(d), dimensions={1,0}\n"
    "  b = f32[8,32,3] broadcast(d), dimensions={0,1}\n"
    "  sl = f32[4,16] slice(d), slice={[0:8:2], [0:32:2]}\n"
    "  pd = f32[10,36] pad(d, zero), padding=1_1x2_2\n"
    "  pd2 = f32[15,30] pad(d, zero), padding=0_0_1x-1_-1\n"
    "  cc = f32[16,32] concatenate(d, d), dimensions={0}\n"
    "  rs = f32[256] reshape(d)\n"
    "  io = s32[8,32] iota(), iota_dimension=0\n"
    "  cv = s32[8,32] convert(d)\n"
    "  cmp = pred[8,32] compare(d, d), direction=GT\n"
    "  sel = f32[8,32] select(cmp, d, d)\n"
    "  ss = f32[8,32] select-and-scatter(d, rw, zero), window={size=2x2 stride=2x2}, select=ge, scatter=add\n"
    "  st = (f32[8,32], s32[8,32]) sort(d, cv), dimensions={1}, to_apply=lt2\n"
    "  init = s32[] constant(0)\n"
    "  tup = (s32[], f32[4]) tuple(init, v4)\n"
    "  wh = (s32[], f32[4]) while(tup), condition=cond, body=body\n"
    "  ar = f32[8,32] all-reduce(d), channel_id=1, replica_groups=[1,8]<=[8], use_global_device_ids=true, to_apply=add\n"
    "  ag = f32[32,32] all-gather(d), channel_id=2, replica_groups=[2,4]<=[8], dimensions={0}, use_global_device_ids=true\n"
    "  rsc = f32[2,32] reduce-scatter(d), channel_id=3, replica_groups=[2,4]<=[8], dimensions={0}, use_global_device_ids=true, to_apply=add\n"
    "  a2a = f32[8,32] all-to-all(d), channel_id=4, replica_groups={{0,1},{2,3},{4,5},{6,7}}, dimensions={1}\n"
    "  cp = f32[8,32] collective-permute(d), channel_id=5, source_target_pairs={{0,1},{1,0}}\n"
    "  pid = u32[] partition-id()\n"
    "  ds = f32[4,32] dynamic-slice(d, init, init), dynamic_slice_sizes={4,32}\n"
    "  dus = f32[8,32] dynamic-update-slice(d, ds, init, init)\n"
    "  bc = s32[8,32] bitcast-convert(d)\n"
    "  ROOT out = (f32[8]) tuple(r)\n"
    "}\n";

static HloModule *parse_text(DiagEngine *d, const char *text)
{
    uint32_t f = diag_add_file(d, "t.hlo", text, strlen(text));
    diag_set_show_source(d, false);
    return parse_hlo(text, strlen(text), f, d);
}

static void test_text_many_ops_verify(void **state)
{
    (void)state;
    DiagEngine *d = diag_create(NULL);
    HloModule *m = parse_text(d, MANY_OPS);
    assert_non_null(m);
    assert_true(verify_module(m, d));
    assert_string_equal(diag_text(d), "");
    hlo_module_free(m);
    diag_destroy(d);
}

/* An instruction whose operand failed is not reported again (no cascade);
 * an independent error further down still is. */
static void test_text_errors_do_not_cascade(void **state)
{
    (void)state;
    static const char text[] = "HloModule m, num_partitions=4\n"
                               "ENTRY main {\n"
                               "  x = f32[8,16] parameter(0)\n"
                               "  w = f32[16,32] parameter(1)\n"
                               "  d = f32[8,31] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
                               "  n = f32[8,32] negate(d)\n"
                               "  t = f32[32,8] transpose(n), dimensions={1,0}\n"
                               "  pid = s32[] partition-id()\n"
                               "  ROOT r = (f32[32,8], s32[]) tuple(t, pid)\n"
                               "}\n";
    DiagEngine *d = diag_create(NULL);
    HloModule *m = parse_text(d, text);
    assert_non_null(m);
    assert_false(verify_module(m, d));
    /* d: 8x16 . 16x32 = 8x32; n and t use d's wrong shape but are not reported */
    assert_string_equal(diag_text(d), "t.hlo:5:3: error: d: result shape f32[8,31] does not match the shape inferred "
                                      "from its operands, f32[8,32]\n"
                                      "t.hlo:8:3: error: pid: result shape s32[] does not match the shape inferred "
                                      "from its operands, u32[]\n");
    hlo_module_free(m);
    diag_destroy(d);
}

/* n negates of f32[4] after a parameter n0, each of the one before
 * (chain) or each of n0; the instructions whose numbers are in
 * bad[0..n_bad) declare f32[3] instead.  Instruction k (k >= 1) is "n<k>"
 * on line k + 3. */
static char *negate_chain(int32_t n, const int32_t *bad, int n_bad, bool chain)
{
    StrBuf b = {0};
    sb_puts(&b, "HloModule m\nENTRY main {\n  n0 = f32[4] parameter(0)\n");
    for (int32_t k = 1; k <= n; k++) {
        bool wrong = false;
        for (int j = 0; j < n_bad; j++) wrong |= bad[j] == k;
        sb_printf(&b, "  %sn%d = f32[%d] negate(n%d)\n", k == n ? "ROOT " : "", k, wrong ? 3 : 4, chain ? k - 1 : 0);
    }
    sb_puts(&b, "}\n");
    char *r = strdup(sb_cstr(&b));
    sb_free(&b);
    return r;
}

/* Verifies negate_chain(70,000, bad, n_bad, chain), which must fail with
 * exactly the messages want. */
static void assert_chain_messages(const int32_t *bad, int n_bad, bool chain, const char *want)
{
    char *text = negate_chain(70000, bad, n_bad, chain);
    DiagEngine *d = diag_create(NULL);
    HloModule *m = parse_text(d, text);
    assert_non_null(m);
    assert_false(verify_module(m, d));
    assert_string_equal(diag_text(d), want);
    hlo_module_free(m);
    diag_destroy(d);
    free(text);
}

/* A computation of 70,001 instructions is checked in two halves on two
 * threads first (VERIFY_SPLIT_MIN is 65,536); the messages are those of the
 * checks in order: an error in each half, in order, and none for the users
 * of a failed instruction, also across the halves' boundary (35,000). */
static void test_split_halves_report_in_order(void **state)
{
    (void)state;
    enum { N = 70000 };
    char *ok = negate_chain(N, NULL, 0, true);
    DiagEngine *d = diag_create(NULL);
    HloModule *m = parse_text(d, ok);
    assert_non_null(m);
    assert_int_equal(m->comps[m->entry].n_insts, N + 1);
    assert_true(verify_module(m, d));
    assert_string_equal(diag_text(d), "");
    hlo_module_free(m);
    diag_destroy(d);
    free(ok);

    /* n34999 (first half, line 35002) is wrong: n35000, the second half's
     * first, and every later instruction use it, so none of them is
     * reported, also not n60000 and n70000, which declare the wrong shape
     * too */
    const int32_t bad[] = {34999, 60000, 70000};
    assert_chain_messages(bad, 3, true,
                          "t.hlo:35002:3: error: n34999: result shape f32[3] does not match the shape inferred from its "
                          "operands, f32[4]\n");
    /* independent instructions: an error in each half, reported in order */
    const int32_t bad2[] = {100, 36000};
    assert_chain_messages(bad2, 2, false,
                          "t.hlo:103:3: error: n100: result shape f32[3] does not match the shape inferred from its "
                          "operands, f32[4]\n"
                          "t.hlo:36003:3: error: n36000: result shape f32[3] does not match the shape inferred from its "
                          "operands, f32[4]\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_binary_same_shape),
        cmocka_unit_test(test_binary_no_implicit_broadcast),
        cmocka_unit_test(test_token_in_arithmetic),
        cmocka_unit_test(test_unary_types),
        cmocka_unit_test(test_convert_and_bitcast_convert),
        cmocka_unit_test(test_select_and_clamp),
        cmocka_unit_test(test_broadcast),
        cmocka_unit_test(test_reshape),
        cmocka_unit_test(test_transpose),
        cmocka_unit_test(test_slice),
        cmocka_unit_test(test_dynamic_slice_and_update),
        cmocka_unit_test(test_pad),
        cmocka_unit_test(test_concatenate_reverse_iota),
        cmocka_unit_test(test_dot),
        cmocka_unit_test(test_dot_mismatch_message),
        cmocka_unit_test(test_convolution),
        cmocka_unit_test(test_reduce),
        cmocka_unit_test(test_reduce_window_and_select_and_scatter),
        cmocka_unit_test(test_gather),
        cmocka_unit_test(test_scatter),
        cmocka_unit_test(test_sort_and_map),
        cmocka_unit_test(test_tuple_gte_barrier),
        cmocka_unit_test(test_parameters_and_constants),
        cmocka_unit_test(test_parameter_number_reused),
        cmocka_unit_test(test_while),
        cmocka_unit_test(test_conditional_and_call),
        cmocka_unit_test(test_collectives),
        cmocka_unit_test(test_collective_group_size_modes),
        cmocka_unit_test(test_collective_group_size_unknown),
        cmocka_unit_test(test_replica_groups_and_pairs_checked),
        cmocka_unit_test(test_rng),
        cmocka_unit_test(test_arity),
        cmocka_unit_test(test_structure_errors),
        cmocka_unit_test(test_no_entry_and_malformed_shape),
        cmocka_unit_test(test_layout_is_not_an_error),
        cmocka_unit_test(test_diag_span_is_the_instruction),
        cmocka_unit_test(test_text_many_ops_verify),
        cmocka_unit_test(test_text_errors_do_not_cascade),
        cmocka_unit_test(test_split_halves_report_in_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
