/* interp_test.c - the reference interpreter, op by op, on modules built with
 * the IR builder.  Every expected value is worked out by hand in a comment
 * (bf16/f16 rounding cases, integer wraparound, dynamic-slice clamping, pad
 * with negative and interior padding, dot with batch dimensions, variadic
 * reduce, windows, gather/scatter, sort, control flow, errors).
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

/* Runs the entry on args; asserts success. */
static SimValue run(HloModule *m, SimValue *args, int32_t n)
{
    SimValue out;
    bool ok = sim_interp_run(m, args, n, 0, &out, g_diag);
    if (!ok) fprintf(stderr, "%s", diag_text(g_diag));
    assert_true(ok);
    for (int32_t k = 0; k < n; k++) sim_value_release(&args[k]);
    return out;
}

/* Runs and returns the diagnostics text (the run must fail). */
static const char *run_fail(HloModule *m, SimValue *args, int32_t n)
{
    SimValue out;
    assert_false(sim_interp_run(m, args, n, 0, &out, g_diag));
    for (int32_t k = 0; k < n; k++) sim_value_release(&args[k]);
    return diag_text(g_diag);
}

static void expect_f(const SimValue *v, const double *want, int64_t n)
{
    assert_int_equal(shape_elem_count(&v->shape), n);
    for (int64_t k = 0; k < n; k++) {
        double got = sim_value_get_f64(v, k);
        if (!(got == want[k] && signbit(got) == signbit(want[k])) && !(isnan(got) && isnan(want[k]))) {
            fprintf(stderr, "element %lld: got %.17g, want %.17g\n", (long long)k, got, want[k]);
            fail();
        }
    }
}

static void expect_i(const SimValue *v, const int64_t *want, int64_t n)
{
    assert_int_equal(shape_elem_count(&v->shape), n);
    for (int64_t k = 0; k < n; k++) {
        int64_t got = sim_value_get_i64(v, k);
        if (got != want[k]) {
            fprintf(stderr, "element %lld: got %lld, want %lld\n", (long long)k, (long long)got, (long long)want[k]);
            fail();
        }
    }
}

#define EXPECT_F(v, ...) expect_f((v), DL(__VA_ARGS__))
#define EXPECT_I(v, ...) expect_i((v), IL(__VA_ARGS__))

/* Module computing op(p0, p1) elementwise on shape s (result type rt). */
static SimValue binary(HloOpcode op, Shape s, ElemType rt, SimValue a, SimValue b)
{
    HloModule *m = hlo_module_new("t");
    TB e = tb_new(m, "main", true);
    int32_t p0 = tb_param(&e, 0, s), p1 = tb_param(&e, 1, s);
    Shape r = s;
    r.type = rt;
    tb_add(&e, op, r, OPS(p0, p1));
    SimValue args[2] = {a, b};
    SimValue out = run(m, args, 2);
    hlo_module_free(m);
    return out;
}

static SimValue unary(HloOpcode op, Shape s, ElemType rt, SimValue a)
{
    HloModule *m = hlo_module_new("t");
    TB e = tb_new(m, "main", true);
    int32_t p0 = tb_param(&e, 0, s);
    Shape r = s;
    r.type = rt;
    tb_add(&e, op, r, OPS(p0));
    SimValue out = run(m, &a, 1);
    hlo_module_free(m);
    return out;
}

/* ---------------------------------------------------------------- elementwise */

static void test_f32_binary(void **state)
{
    (void)state;
    Shape s = SH(F32, 4);
    static const struct {
        HloOpcode op;
        double want[4];
    } cases[] = {
        {HLO_ADD, {3.5, 1, 5, 0.75}},
        {HLO_SUBTRACT, {-0.5, -5, 13, 0.25}},
        {HLO_MULTIPLY, {3, -6, -36, 0.125}},
        /* -2/3 rounded to f32 is -0.666666686534881591796875 */
        {HLO_DIVIDE, {0.75, -0.666666686534881591796875, -2.25, 2}},
        {HLO_MAXIMUM, {2, 3, 9, 0.5}},
        {HLO_MINIMUM, {1.5, -2, -4, 0.25}},
        {HLO_REMAINDER, {1.5, -2, 1, 0}}, /* fmod: sign of the dividend */
        /* 1.5^2, (-2)^3, 9^-4 = 1/6561 = 1.5241579027587258e-4 -> f32 1.52415785123594105243682861328125e-4,
         * 0.5^0.25 = 0.840896415... -> f32 0.84089642763137817382812 */
        {HLO_POWER, {2.25, -8, 1.52415785123594105243682861328125e-4, 0.840896427631378173828125}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        SimValue r = binary(cases[k].op, s, ET_F32, val_f(s, DL(1.5, -2, 9, 0.5)), val_f(s, DL(2, 3, -4, 0.25)));
        expect_f(&r, cases[k].want, 4);
        sim_value_release(&r);
    }
    /* maximum/minimum propagate NaN */
    SimValue r = binary(HLO_MAXIMUM, SH(F32, 2), ET_F32, val_f(SH(F32, 2), DL(NAN, 1)), val_f(SH(F32, 2), DL(1, NAN)));
    assert_true(isnan(sim_value_get_f64(&r, 0)) && isnan(sim_value_get_f64(&r, 1)));
    sim_value_release(&r);
}

static void test_f32_unary(void **state)
{
    (void)state;
    Shape s = SH(F32, 4);
    static const struct {
        HloOpcode op;
        double want[4];
    } cases[] = {
        {HLO_ABS, {1.5, 0, 2.5, 4}},
        {HLO_NEGATE, {1.5, -0.0, -2.5, -4}},
        {HLO_FLOOR, {-2, 0, 2, 4}},
        {HLO_CEIL, {-1, 0, 3, 4}},
        {HLO_ROUND_AFZ, {-2, 0, 3, 4}},  /* halves away from zero */
        {HLO_ROUND_EVEN, {-2, 0, 2, 4}}, /* halves to even */
        {HLO_SIGN, {-1, 0, 1, 1}},
        {HLO_COPY, {-1.5, 0, 2.5, 4}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        SimValue r = unary(cases[k].op, s, ET_F32, val_f(s, DL(-1.5, 0, 2.5, 4)));
        expect_f(&r, cases[k].want, 4);
        sim_value_release(&r);
    }
    /* exp(0)=1, log(1)=0, sqrt(4)=2, rsqrt(4)=0.5, logistic(0)=0.5, tanh(0)=0 */
    static const HloOpcode ops[] = {HLO_EXP, HLO_LOG, HLO_SQRT, HLO_RSQRT, HLO_LOGISTIC, HLO_TANH, HLO_SINE, HLO_COSINE};
    static const double in[] = {0, 1, 4, 4, 0, 0, 0, 0}, want[] = {1, 0, 2, 0.5, 0.5, 0, 0, 1};
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        SimValue r = unary(ops[k], SC(F32), ET_F32, val_f(SC(F32), &in[k], 1));
        expect_f(&r, &want[k], 1);
        sim_value_release(&r);
    }
    SimValue r = unary(HLO_IS_FINITE, SH(F32, 3), ET_PRED, val_f(SH(F32, 3), DL(1, INFINITY, NAN)));
    EXPECT_I(&r, 1, 0, 0);
    sim_value_release(&r);
}

static void test_bf16_rounding(void **state)
{
    (void)state;
    Shape s = SH(BF16, 3);
    /* bf16 has 8 significand bits: ulp(1) = 2^-7.
     * 1 + 2^-8 is a tie between 1 and 1+2^-7 -> even -> 1.
     * (1+2^-7) + 2^-8 is a tie between 1+2^-7 (odd) and 1+2^-6 (even) -> 1.015625.
     * 256 + 1 -> ulp(256) = 2, tie between 256 and 258 -> 256. */
    SimValue r = binary(HLO_ADD, s, ET_BF16, val_f(s, DL(1, 1.0078125, 256)), val_f(s, DL(0.00390625, 0.00390625, 1)));
    EXPECT_F(&r, 1, 1.015625, 256);
    sim_value_release(&r);
    /* storing rounds: 1/3 -> 0.333984375 (0x3eab), 3.4e38 overflows to inf
     * (max bf16 0x7f7f = 3.3895313892515355e38; the midpoint to 2^128 is
     * 3.3961775292304740e38), -3.39e38 -> -max, -3.38e38 is below the midpoint
     * 3.3828852492725970e38 of 0x7f7e and 0x7f7f -> 0xff7e = -3.3762391092936863e38 */
    SimValue v = val_f(SH(BF16, 4), DL(1.0 / 3.0, 3.4e38, -3.39e38, -3.38e38));
    EXPECT_F(&v, 0.333984375, INFINITY, -3.3895313892515355e38, -3.3762391092936863e38);
    sim_value_release(&v);
    /* convert f32 -> bf16: 1+3*2^-8 ties to 1+2^-6 (even); 1+2^-8+2^-20 rounds up to 1+2^-7 */
    r = unary(HLO_CONVERT, SH(F32, 2), ET_BF16, val_f(SH(F32, 2), DL(1.01171875, 1.00390625 + 0x1p-20)));
    EXPECT_F(&r, 1.015625, 1.0078125);
    sim_value_release(&r);
    /* multiply rounds after the op: 1.0078125 * 1.0078125 = 1.01568603515625 -> 1.015625 */
    r = binary(HLO_MULTIPLY, SC(BF16), ET_BF16, val_f(SC(BF16), DL(1.0078125)), val_f(SC(BF16), DL(1.0078125)));
    EXPECT_F(&r, 1.015625);
    sim_value_release(&r);
}

static void test_f16_rounding(void **state)
{
    (void)state;
    /* f16: 11 significand bits, max 65504; 65520 is the tie to 65536 -> inf;
     * smallest subnormal 2^-24: 2^-25 ties to 0, 3*2^-25 ties to 2^-23;
     * 1/3 -> 0.333251953125 */
    SimValue v = val_f(SH(F16, 5), DL(65519, 65520, 0x1p-25, 3 * 0x1p-25, 1.0 / 3.0));
    EXPECT_F(&v, 65504, INFINITY, 0, 0x1p-23, 0.333251953125);
    sim_value_release(&v);
    /* 2048 + 1 in f16 (ulp 2) ties to 2048 */
    SimValue r = binary(HLO_ADD, SC(F16), ET_F16, val_f(SC(F16), DL(2048)), val_f(SC(F16), DL(1)));
    EXPECT_F(&r, 2048);
    sim_value_release(&r);
}

static void test_integer_wraparound(void **state)
{
    (void)state;
    SimValue r = binary(HLO_ADD, SH(S8, 2), ET_S8, val_i(SH(S8, 2), DL(127, -128)), val_i(SH(S8, 2), DL(1, -1)));
    EXPECT_I(&r, -128, 127);
    sim_value_release(&r);
    r = binary(HLO_ADD, SC(U8), ET_U8, val_i(SC(U8), DL(200)), val_i(SC(U8), DL(100)));
    EXPECT_I(&r, 44); /* 300 - 256 */
    sim_value_release(&r);
    r = binary(HLO_MULTIPLY, SH(S32, 2), ET_S32, val_i(SH(S32, 2), DL(65536, 65535)), val_i(SH(S32, 2), DL(65536, 65537)));
    EXPECT_I(&r, 0, -1); /* 2^32 -> 0; 65535*65537 = 2^32-1 -> -1 */
    sim_value_release(&r);
    r = unary(HLO_ABS, SH(S8, 2), ET_S8, val_i(SH(S8, 2), DL(-128, -5)));
    EXPECT_I(&r, -128, 5);
    sim_value_release(&r);
    r = unary(HLO_NEGATE, SC(S32), ET_S32, val_i(SC(S32), DL(-2147483648.0)));
    EXPECT_I(&r, INT32_MIN);
    sim_value_release(&r);
    r = unary(HLO_POPCNT, SH(S8, 2), ET_S8, val_i(SH(S8, 2), DL(-1, 6)));
    EXPECT_I(&r, 8, 2);
    sim_value_release(&r);
    r = unary(HLO_CLZ, SH(S32, 3), ET_S32, val_i(SH(S32, 3), DL(1, 0, -1)));
    EXPECT_I(&r, 31, 32, 0);
    sim_value_release(&r);
    r = unary(HLO_NOT, SH(S32, 2), ET_S32, val_i(SH(S32, 2), DL(0, 5)));
    EXPECT_I(&r, -1, -6);
    sim_value_release(&r);
    r = unary(HLO_NOT, SH(PRED, 2), ET_PRED, val_i(SH(PRED, 2), DL(0, 1)));
    EXPECT_I(&r, 1, 0);
    sim_value_release(&r);
    r = binary(HLO_POWER, SH(S32, 4), ET_S32, val_i(SH(S32, 4), DL(3, 2, 1, 2)), val_i(SH(S32, 4), DL(4, 31, -3, -1)));
    EXPECT_I(&r, 81, INT32_MIN, 1, 0); /* 2^31 wraps; negative exponent: 1 for base 1, else 0 */
    sim_value_release(&r);
}

static void test_integer_div_shift(void **state)
{
    (void)state;
    Shape s = SH(S32, 4);
    SimValue r = binary(HLO_DIVIDE, s, ET_S32, val_i(s, DL(-7, 7, -2147483648.0, 7)), val_i(s, DL(2, 0, -1, -2)));
    EXPECT_I(&r, -3, -1, INT32_MIN, -3); /* truncation; x/0 = -1; INT_MIN/-1 = INT_MIN */
    sim_value_release(&r);
    r = binary(HLO_REMAINDER, s, ET_S32, val_i(s, DL(-7, 7, -2147483648.0, 7)), val_i(s, DL(2, 0, -1, -2)));
    EXPECT_I(&r, -1, 7, 0, 1); /* sign of the dividend; x%0 = x; INT_MIN%-1 = 0 */
    sim_value_release(&r);
    r = binary(HLO_DIVIDE, SH(U32, 2), ET_U32, val_i(SH(U32, 2), DL(7, 4294967295.0)), val_i(SH(U32, 2), DL(0, 2)));
    EXPECT_I(&r, 4294967295LL, 2147483647LL); /* unsigned x/0 = all ones */
    sim_value_release(&r);
    r = binary(HLO_SHIFT_LEFT, s, ET_S32, val_i(s, DL(1, 1, 3, 1)), val_i(s, DL(31, 32, 2, -1)));
    EXPECT_I(&r, INT32_MIN, 0, 12, 0); /* amounts >= 32 (and negative, as unsigned) give 0 */
    sim_value_release(&r);
    r = binary(HLO_SHIFT_RIGHT_ARITHMETIC, s, ET_S32, val_i(s, DL(-8, -8, 8, 8)), val_i(s, DL(1, 40, 40, 2)));
    EXPECT_I(&r, -4, -1, 0, 2);
    sim_value_release(&r);
    r = binary(HLO_SHIFT_RIGHT_LOGICAL, s, ET_S32, val_i(s, DL(-8, -8, 8, -1)), val_i(s, DL(28, 32, 1, 0)));
    EXPECT_I(&r, 15, 0, 4, -1); /* 0xFFFFFFF8 >> 28 = 0xF */
    sim_value_release(&r);
    r = binary(HLO_AND, SH(U8, 3), ET_U8, val_i(SH(U8, 3), DL(0xF0, 0xFF, 3)), val_i(SH(U8, 3), DL(0x3C, 0, 1)));
    EXPECT_I(&r, 0x30, 0, 1);
    sim_value_release(&r);
}

static void test_convert(void **state)
{
    (void)state;
    /* f32 -> s8 saturates, truncates toward zero, NaN -> 0 */
    SimValue r = unary(HLO_CONVERT, SH(F32, 6), ET_S8, val_f(SH(F32, 6), DL(300.7, -1e10, NAN, 2.9, -2.9, -0.5)));
    EXPECT_I(&r, 127, -128, 0, 2, -2, 0);
    sim_value_release(&r);
    r = unary(HLO_CONVERT, SH(F32, 3), ET_U8, val_f(SH(F32, 3), DL(-5, 255.9, 256)));
    EXPECT_I(&r, 0, 255, 255);
    sim_value_release(&r);
    /* s32 -> s8 wraps (300 - 256 = 44, 200 - 256 = -56); s32 -> pred is x != 0 */
    r = unary(HLO_CONVERT, SH(S32, 2), ET_S8, val_i(SH(S32, 2), DL(300, 200)));
    EXPECT_I(&r, 44, -56);
    sim_value_release(&r);
    r = unary(HLO_CONVERT, SH(S32, 3), ET_PRED, val_i(SH(S32, 3), DL(2, 0, -1)));
    EXPECT_I(&r, 1, 0, 1);
    sim_value_release(&r);
    r = unary(HLO_CONVERT, SH(PRED, 2), ET_F32, val_i(SH(PRED, 2), DL(1, 0)));
    EXPECT_F(&r, 1, 0);
    sim_value_release(&r);
    /* s32 16777217 = 2^24 + 1 -> f32 ties to even 16777216 */
    r = unary(HLO_CONVERT, SC(S32), ET_F32, val_i(SC(S32), DL(16777217)));
    EXPECT_F(&r, 16777216);
    sim_value_release(&r);
    /* bitcast-convert f32 1.0 -> s32 0x3f800000 */
    r = unary(HLO_BITCAST_CONVERT, SC(F32), ET_S32, val_f(SC(F32), DL(1.0)));
    EXPECT_I(&r, 0x3f800000);
    sim_value_release(&r);
    /* width-changing bitcast-convert u32[2,2] -> u64[2] (little endian):
     * {1, 2} -> 1 + 2*2^32 = 8589934593; {7, 0} -> 7 */
    HloModule *m = hlo_module_new("t");
    TB e = tb_new(m, "main", true);
    int32_t p0 = tb_param(&e, 0, SH(U32, 2, 2));
    tb_add(&e, HLO_BITCAST_CONVERT, SH(U64, 2), OPS(p0));
    SimValue in = val_i(SH(U32, 2, 2), DL(1, 2, 7, 0));
    r = run(m, &in, 1);
    EXPECT_I(&r, 8589934593LL, 7);
    sim_value_release(&r);
    hlo_module_free(m);
}

static void test_compare_select_clamp(void **state)
{
    (void)state;
    HloModule *m = hlo_module_new("t");
    TB e = tb_new(m, "main", true);
    Shape s = SH(F32, 4);
    int32_t a = tb_param(&e, 0, s), b = tb_param(&e, 1, s);
    int32_t lt = tb_add(&e, HLO_COMPARE, SH(PRED, 4), OPS(a, b));
    tb_attrs(&e, lt)->direction = CMP_LT;
    int32_t ne = tb_add(&e, HLO_COMPARE, SH(PRED, 4), OPS(a, b));
    tb_attrs(&e, ne)->direction = CMP_NE;
    int32_t tot = tb_add(&e, HLO_COMPARE, SH(PRED, 4), OPS(a, b));
    tb_attrs(&e, tot)->direction = CMP_LT;
    tb_attrs(&e, tot)->compare_type = "TOTALORDER";
    int32_t sel = tb_add(&e, HLO_SELECT, s, OPS(lt, a, b));
    int32_t lo = tb_const(&e, SC(F32), DL(-1)), hi = tb_const(&e, SC(F32), DL(1));
    int32_t cl = tb_add(&e, HLO_CLAMP, s, OPS(lo, a, hi));
    Shape ts = {.type = ET_TUPLE, .n_elems = 5};
    Shape el[5] = {SH(PRED, 4), SH(PRED, 4), SH(PRED, 4), s, s};
    ts.elems = el;
    tb_add(&e, HLO_TUPLE, ts, OPS(lt, ne, tot, sel, cl));
    /* a = [-0, nan, 2, -5], b = [0, nan, 3, 7] */
    SimValue args[2] = {val_f(s, DL(-0.0, NAN, 2, -5)), val_f(s, DL(0, NAN, 3, 7))};
    SimValue r = run(m, args, 2);
    assert_int_equal(r.shape.n_elems, 5);
    EXPECT_I(&r.elems[0], 0, 0, 1, 1); /* IEEE: -0 == 0, NaN unordered */
    EXPECT_I(&r.elems[1], 0, 1, 1, 1); /* NaN != NaN */
    EXPECT_I(&r.elems[2], 1, 0, 1, 1); /* total order: -0 < +0; NaN == NaN */
    assert_true(sim_value_get_f64(&r.elems[3], 0) == 0 && !signbit(sim_value_get_f64(&r.elems[3], 0)));
    assert_true(sim_value_get_f64(&r.elems[3], 2) == 2 && sim_value_get_f64(&r.elems[3], 3) == -5);
    assert_true(sim_value_get_f64(&r.elems[4], 2) == 1 && sim_value_get_f64(&r.elems[4], 3) == -1);
    assert_true(isnan(sim_value_get_f64(&r.elems[4], 1)));
    sim_value_release(&r);
    hlo_module_free(m);
    /* unsigned compare: 0xFFFFFFFF > 1 */
    r = binary(HLO_COMPARE, SC(U32), ET_PRED, val_i(SC(U32), DL(4294967295.0)), val_i(SC(U32), DL(1)));
    EXPECT_I(&r, 0); /* default direction EQ */
    sim_value_release(&r);
}

static void test_data_movement(void **state)
{
    (void)state;
    HloModule *m = hlo_module_new("t");
    TB e = tb_new(m, "main", true);
    int32_t p = tb_param(&e, 0, SH(S32, 2, 3)); /* [[1,2,3],[4,5,6]] */
    int32_t tr = tb_add(&e, HLO_TRANSPOSE, SH(S32, 3, 2), OPS(p));
    tb_set_list(&e, &tb_attrs(&e, tr)->dimensions, IL(1, 0));
    int32_t rs = tb_add(&e, HLO_RESHAPE, SH(S32, 6), OPS(tr));
    int32_t sl = tb_add(&e, HLO_SLICE, SH(S32, 2), OPS(rs)); /* [1:6:3] of [1,4,2,5,3,6] */
    tb_set_list(&e, &tb_attrs(&e, sl)->slice_start, IL(1));
    tb_set_list(&e, &tb_attrs(&e, sl)->slice_limit, IL(6));
    tb_set_list(&e, &tb_attrs(&e, sl)->slice_stride, IL(3));
    int32_t bc = tb_add(&e, HLO_BROADCAST, SH(S32, 2, 2), OPS(sl)); /* operand dim 0 -> output dim 1 */
    tb_set_list(&e, &tb_attrs(&e, bc)->dimensions, IL(1));
    int32_t io = tb_leaf(&e, HLO_IOTA, SH(S32, 2, 3));
    tb_attrs(&e, io)->iota_dimension = 1;
    int32_t rv = tb_add(&e, HLO_REVERSE, SH(S32, 2, 3), OPS(p));
    tb_set_list(&e, &tb_attrs(&e, rv)->dimensions, IL(0, 1));
    int32_t cc = tb_add(&e, HLO_CONCATENATE, SH(S32, 2, 6), OPS(p, io));
    tb_set_list(&e, &tb_attrs(&e, cc)->dimensions, IL(1));
    Shape el[5] = {SH(S32, 6), SH(S32, 2, 2), SH(S32, 2, 3), SH(S32, 2, 3), SH(S32, 2, 6)};
    Shape ts = {.type = ET_TUPLE, .n_elems = 5, .elems = el};
    tb_add(&e, HLO_TUPLE, ts, OPS(rs, bc, io, rv, cc));
    SimValue arg = val_i(SH(S32, 2, 3), DL(1, 2, 3, 4, 5, 6));
    SimValue r = run(m, &arg, 1);
    EXPECT_I(&r.elems[0], 1, 4, 2, 5, 3, 6);
    EXPECT_I(&r.elems[1], 4, 3, 4, 3); /* slice = [4, 3], broadcast along dim 0 */
    EXPECT_I(&r.elems[2], 0, 1, 2, 0, 1, 2);
    EXPECT_I(&r.elems[3], 6, 5, 4, 3, 2, 1);
    EXPECT_I(&r.elems[4], 1, 2, 3, 0, 1, 2, 4, 5, 6, 0, 1, 2);
    sim_value_release(&r);
    hlo_module_free(m);
}

static void test_dynamic_slice_clamping(void **state)
{
    (void)state;
    HloModule *m = hlo_module_new("t");
    TB e = tb_new(m, "main", true);
    int32_t p = tb_param(&e, 0, SH(S32, 10)), i = tb_param(&e, 1, SC(S32));
    int32_t ds = tb_add(&e, HLO_DYNAMIC_SLICE, SH(S32, 4), OPS(p, i));
    tb_set_list(&e, &tb_attrs(&e, ds)->dynamic_slice_sizes, IL(4));
    (void)ds;
    static const double starts[] = {8, -3, 2};
    static const int64_t want[][4] = {{6, 7, 8, 9}, {0, 1, 2, 3}, {2, 3, 4, 5}}; /* 8 -> clamped to 10-4 = 6; -3 -> 0 */
    for (int k = 0; k < 3; k++) {
        SimValue args[2] = {val_i(SH(S32, 10), DL(0, 1, 2, 3, 4, 5, 6, 7, 8, 9)), val_i(SC(S32), &starts[k], 1)};
        SimValue r = run(m, args, 2);
        expect_i(&r, want[k], 4);
        sim_value_release(&r);
    }
    hlo_module_free(m);

    /* dynamic-update-slice of [1,2,3] at 4 into s32[5] zeros: clamped to 5-3 = 2 */
    m = hlo_module_new("t");
    e = tb_new(m, "main", true);
    int32_t op = tb_param(&e, 0, SH(S32, 2, 5)), up = tb_param(&e, 1, SH(S32, 1, 3));
    int32_t i0 = tb_const(&e, SC(S32), DL(-1)), i1 = tb_const(&e, SC(S32), DL(4));
    tb_add(&e, HLO_DYNAMIC_UPDATE_SLICE, SH(S32, 2, 5), OPS(op, up, i0, i1));
    SimValue args[2] = {val_i(SH(S32, 2, 5), DL(0, 0, 0, 0, 0, 0, 0, 0, 0, 0)), val_i(SH(S32, 1, 3), DL(1, 2, 3))};
    SimValue r = run(m, args, 2);
    EXPECT_I(&r, 0, 0, 1, 2, 3, 0, 0, 0, 0, 0); /* row -1 -> 0, column 4 -> 2 */
    sim_value_release(&r);
    hlo_module_free(m);
}

static void test_pad_negative_interior(void **state)
{
    (void)state;
    HloModule *m = hlo_module_new("t");
    TB e = tb_new(m, "main", true);
    int32_t p = tb_param(&e, 0, SH(F32, 3)), v = tb_const(&e, SC(F32), DL(9));
    /* interior 1: [1,9,2,9,3]; lo -1 drops the 1; hi 2 appends 9,9 -> size -1+2+3+2 = 6 */
    int32_t pd = tb_add(&e, HLO_PAD, SH(F32, 6), OPS(p, v));
    tb_set_list(&e, &tb_attrs(&e, pd)->pad_lo, IL(-1));
    tb_set_list(&e, &tb_attrs(&e, pd)->pad_hi, IL(2));
    tb_set_list(&e, &tb_attrs(&e, pd)->pad_interior, IL(1));
    /* second pad on a 2-d value: lo {1,0}, hi {0,-2}, interior {0,1}: [[1,2],[3,4]] ->
     * interior on dim 1: [[1,9,2],[3,9,4]], hi -2 on dim 1: [[1],[3]], lo 1 on dim 0: [[9],[1],[3]] */
    int32_t q = tb_param(&e, 1, SH(F32, 2, 2));
    int32_t pd2 = tb_add(&e, HLO_PAD, SH(F32, 3, 1), OPS(q, v));
    tb_set_list(&e, &tb_attrs(&e, pd2)->pad_lo, IL(1, 0));
    tb_set_list(&e, &tb_attrs(&e, pd2)->pad_hi, IL(0, -2));
    tb_set_list(&e, &tb_attrs(&e, pd2)->pad_interior, IL(0, 1));
    Shape el[2] = {SH(F32, 6), SH(F32, 3, 1)};
    Shape ts = {.type = ET_TUPLE, .n_elems = 2, .elems = el};
    tb_add(&e, HLO_TUPLE, ts, OPS(pd, pd2));
    SimValue args[2] = {val_f(SH(F32, 3), DL(1, 2, 3)), val_f(SH(F32, 2, 2), DL(1, 2, 3, 4))};
    SimValue r = run(m, args, 2);
    EXPECT_F(&r.elems[0], 9, 2, 9, 3, 9, 9);
    EXPECT_F(&r.elems[1], 9, 1, 3);
    sim_value_release(&r);
    hlo_module_free(m);
}

static void test_dot_batch_dims(void **state)
{
    (void)state;
    HloModule *m = hlo_module_new("t");
    TB e = tb_new(m, "main", true);
    int32_t l = tb_param(&e, 0, SH(F32, 2, 2, 3)), r = tb_param(&e, 1, SH(F32, 2, 3, 2));
    int32_t d = tb_add(&e, HLO_DOT, SH(F32, 2, 2, 2), OPS(l, r));
    HloAttrs *a = tb_attrs(&e, d);
    tb_set_list(&e, &a->lhs_batch, IL(0));
    tb_set_list(&e, &a->rhs_batch, IL(0));
    tb_set_list(&e, &a->lhs_contracting, IL(2));
    tb_set_list(&e, &a->rhs_contracting, IL(1));
    /* b0: [[1,2,3],[4,5,6]] x [[1,0],[0,1],[1,1]] = [[4,5],[10,11]]
     * b1: [[1,0,-1],[2,2,2]] x [[1,2],[3,4],[5,6]] = [[-4,-4],[18,24]] */
    SimValue args[2] = {val_f(SH(F32, 2, 2, 3), DL(1, 2, 3, 4, 5, 6, 1, 0, -1, 2, 2, 2)),
                        val_f(SH(F32, 2, 3, 2), DL(1, 0, 0, 1, 1, 1, 1, 2, 3, 4, 5, 6))};
    SimValue out = run(m, args, 2);
    EXPECT_F(&out, 4, 5, 10, 11, -4, -4, 18, 24);
    sim_value_release(&out);
    hlo_module_free(m);

    /* contracting over lhs dim 0: [[1,2],[3,4],[5,6]]^T . [1,1,2] = [14, 18] */
    m = hlo_module_new("t");
    e = tb_new(m, "main", true);
    l = tb_param(&e, 0, SH(F32, 3, 2));
    r = tb_param(&e, 1, SH(F32, 3));
    d = tb_add(&e, HLO_DOT, SH(F32, 2), OPS(l, r));
    tb_set_list(&e, &tb_attrs(&e, d)->lhs_contracting, IL(0));
    tb_set_list(&e, &tb_attrs(&e, d)->rhs_contracting, IL(0));
    SimValue args2[2] = {val_f(SH(F32, 3, 2), DL(1, 2, 3, 4, 5, 6)), val_f(SH(F32, 3), DL(1, 1, 2))};
    out = run(m, args2, 2);
    EXPECT_F(&out, 14, 18);
    sim_value_release(&out);
    hlo_module_free(m);

    /* s8 x s8 -> s8 wraps: [100, 100] . [1, 1] = 200 -> -56; bf16 result rounds once */
    m = hlo_module_new("t");
    e = tb_new(m, "main", true);
    l = tb_param(&e, 0, SH(S8, 2));
    r = tb_param(&e, 1, SH(S8, 2));
    d = tb_add(&e, HLO_DOT, SC(S8), OPS(l, r));
    tb_set_list(&e, &tb_attrs(&e, d)->lhs_contracting, IL(0));
    tb_set_list(&e, &tb_attrs(&e, d)->rhs_contracting, IL(0));
    SimValue args3[2] = {val_i(SH(S8, 2), DL(100, 100)), val_i(SH(S8, 2), DL(1, 1))};
    out = run(m, args3, 2);
    EXPECT_I(&out, -56);
    sim_value_release(&out);
    hlo_module_free(m);

    /* bf16: 256 + 1 + 1 accumulated in f32 = 258 (exact in bf16), not 256 as bf16 sums would give */
    m = hlo_module_new("t");
    e = tb_new(m, "main", true);
    l = tb_param(&e, 0, SH(BF16, 3));
    r = tb_param(&e, 1, SH(BF16, 3));
    d = tb_add(&e, HLO_DOT, SC(BF16), OPS(l, r));
    tb_set_list(&e, &tb_attrs(&e, d)->lhs_contracting, IL(0));
    tb_set_list(&e, &tb_attrs(&e, d)->rhs_contracting, IL(0));
    SimValue args4[2] = {val_f(SH(BF16, 3), DL(256, 1, 1)), val_f(SH(BF16, 3), DL(1, 1, 1))};
    out = run(m, args4, 2);
    EXPECT_F(&out, 258);
    sim_value_release(&out);
    hlo_module_free(m);
}

/* A ragged-dot of lhs l and rhs r shapes with group sizes gs. */
static int32_t ragged_dot(TB *e, Shape out, Shape ls, Shape rs, Shape gs, int32_t *l)
{
    l[0] = tb_param(e, 0, ls);
    l[1] = tb_param(e, 1, rs);
    l[2] = tb_param(e, 2, gs);
    return tb_add(e, HLO_RAGGED_DOT, out, l, 3);
}

/* Expected values from jax.lax.ragged_dot_general (jax 0.10.2), checked by
 * hand where noted. */
static void test_ragged_dot(void **state)
{
    (void)state;
    int32_t ops[3];
    /* free ragged dim: rows {0,1} use rhs[0] = [[-5,-4,-3],[-2,-1,0]], rows
     * {2,3} rhs[1] = [[1,2,3],[4,5,6]], row 4 is past the groups: zero.
     * row 0 = 1*[-5,-4,-3] + 2*[-2,-1,0]; row 2 = 5*[1,2,3] + 6*[4,5,6] */
    HloModule *m = hlo_module_new("t");
    TB e = tb_new(m, "main", true);
    int32_t d = ragged_dot(&e, SH(F32, 5, 3), SH(F32, 5, 2), SH(F32, 2, 2, 3), SH(S32, 2), ops);
    HloAttrs *a = tb_attrs(&e, d);
    tb_set_list(&e, &a->lhs_contracting, IL(1));
    tb_set_list(&e, &a->rhs_contracting, IL(1));
    tb_set_list(&e, &a->lhs_ragged, IL(0));
    tb_set_list(&e, &a->rhs_group, IL(0));
    SimValue args[3] = {val_f(SH(F32, 5, 2), DL(1, 2, 3, 4, 5, 6, 7, 8, 9, 10)),
                        val_f(SH(F32, 2, 2, 3), DL(-5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6)),
                        val_i(SH(S32, 2), DL(2, 2))};
    SimValue out = run(m, args, 3);
    EXPECT_F(&out, -9, -6, -3, -23, -16, -9, 29, 40, 51, 39, 54, 69, 0, 0, 0);
    sim_value_release(&out);
    hlo_module_free(m);

    /* the same in s32 with groups {3, 1}: row 2 uses rhs[0] now */
    m = hlo_module_new("t");
    e = tb_new(m, "main", true);
    d = ragged_dot(&e, SH(S32, 5, 3), SH(S32, 5, 2), SH(S32, 2, 2, 3), SH(S32, 2), ops);
    a = tb_attrs(&e, d);
    tb_set_list(&e, &a->lhs_contracting, IL(1));
    tb_set_list(&e, &a->rhs_contracting, IL(1));
    tb_set_list(&e, &a->lhs_ragged, IL(0));
    tb_set_list(&e, &a->rhs_group, IL(0));
    SimValue iargs[3] = {val_i(SH(S32, 5, 2), DL(1, 2, 3, 4, 5, 6, 7, 8, 9, 10)),
                         val_i(SH(S32, 2, 2, 3), DL(-5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6)),
                         val_i(SH(S32, 2), DL(3, 1))};
    out = run(m, iargs, 3);
    EXPECT_I(&out, -9, -6, -3, -23, -16, -9, -37, -26, -15, 39, 54, 69, 0, 0, 0);
    sim_value_release(&out);
    hlo_module_free(m);

    /* batched group sizes [b, g] = [[1,2],[2,0]], rhs [g, b, k, n] */
    m = hlo_module_new("t");
    e = tb_new(m, "main", true);
    d = ragged_dot(&e, SH(F32, 2, 3, 2), SH(F32, 2, 3, 2), SH(F32, 2, 2, 2, 2), SH(S32, 2, 2), ops);
    a = tb_attrs(&e, d);
    tb_set_list(&e, &a->lhs_batch, IL(0));
    tb_set_list(&e, &a->rhs_batch, IL(1));
    tb_set_list(&e, &a->lhs_contracting, IL(2));
    tb_set_list(&e, &a->rhs_contracting, IL(2));
    tb_set_list(&e, &a->lhs_ragged, IL(1));
    tb_set_list(&e, &a->rhs_group, IL(0));
    SimValue bargs[3] = {val_f(SH(F32, 2, 3, 2), DL(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)),
                         val_f(SH(F32, 2, 2, 2, 2), DL(-7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7, 8)),
                         val_i(SH(S32, 2, 2), DL(1, 2, 2, 0))};
    out = run(m, bargs, 3);
    EXPECT_F(&out, -17, -14, 15, 22, 23, 34, -29, -14, -37, -18, 0, 0);
    sim_value_release(&out);
    hlo_module_free(m);

    /* contracting ragged dim: groups {1, 2} of k = 4 (k = 3 unused), result
     * [g, m, n]; group 0 row 0 = 1 * [-4,-3,-2] */
    m = hlo_module_new("t");
    e = tb_new(m, "main", true);
    d = ragged_dot(&e, SH(F32, 2, 2, 3), SH(F32, 2, 4), SH(F32, 4, 3), SH(S64, 2), ops);
    a = tb_attrs(&e, d);
    tb_set_list(&e, &a->lhs_contracting, IL(1));
    tb_set_list(&e, &a->rhs_contracting, IL(0));
    tb_set_list(&e, &a->lhs_ragged, IL(1));
    SimValue cargs[3] = {val_f(SH(F32, 2, 4), DL(1, 2, 3, 4, 5, 6, 7, 8)),
                         val_f(SH(F32, 4, 3), DL(-4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7)),
                         val_i(SH(S64, 2), DL(1, 2))};
    out = run(m, cargs, 3);
    EXPECT_F(&out, -4, -3, -2, -20, -15, -10, 4, 9, 14, 8, 21, 34);
    sim_value_release(&out);
    hlo_module_free(m);

    /* batch ragged dim: a plain batched dot, the group sizes unread */
    m = hlo_module_new("t");
    e = tb_new(m, "main", true);
    d = ragged_dot(&e, SH(F32, 2, 1, 1), SH(F32, 2, 1, 2), SH(F32, 2, 2, 1), SH(S32, 1), ops);
    a = tb_attrs(&e, d);
    tb_set_list(&e, &a->lhs_batch, IL(0));
    tb_set_list(&e, &a->rhs_batch, IL(0));
    tb_set_list(&e, &a->lhs_contracting, IL(2));
    tb_set_list(&e, &a->rhs_contracting, IL(1));
    tb_set_list(&e, &a->lhs_ragged, IL(0));
    SimValue dargs[3] = {val_f(SH(F32, 2, 1, 2), DL(1, 2, 3, 4)), val_f(SH(F32, 2, 2, 1), DL(1, 2, 3, 4)),
                         val_i(SH(S32, 1), DL(1))};
    out = run(m, dargs, 3);
    EXPECT_F(&out, 5, 25);
    sim_value_release(&out);
    hlo_module_free(m);
}

static void test_reduce(void **state)
{
    (void)state;
    HloModule *m = hlo_module_new("t");
    int32_t mul = tb_binop_comp(m, "mul", ET_S32, HLO_MULTIPLY, false);
    int32_t addc = tb_binop_comp(m, "add", ET_BF16, HLO_ADD, false);
    TB e = tb_new(m, "main", true);
    int32_t p = tb_param(&e, 0, SH(S32, 2, 3)), one = tb_const(&e, SC(S32), DL(1));
    int32_t r0 = tb_add(&e, HLO_REDUCE, SH(S32, 3), OPS(p, one));
    tb_set_list(&e, &tb_attrs(&e, r0)->dimensions, IL(0));
    tb_attrs(&e, r0)->to_apply = mul;
    int32_t r1 = tb_add(&e, HLO_REDUCE, SC(S32), OPS(p, one));
    tb_set_list(&e, &tb_attrs(&e, r1)->dimensions, IL(0, 1));
    tb_attrs(&e, r1)->to_apply = mul;
    /* bf16 reduce rounds after every step: 256 + 1 -> 256, + 1 -> 256, + 2 -> 258 */
    int32_t q = tb_param(&e, 1, SH(BF16, 4)), z = tb_const(&e, SC(BF16), DL(0));
    int32_t r2 = tb_add(&e, HLO_REDUCE, SC(BF16), OPS(q, z));
    tb_set_list(&e, &tb_attrs(&e, r2)->dimensions, IL(0));
    tb_attrs(&e, r2)->to_apply = addc;
    Shape el[3] = {SH(S32, 3), SC(S32), SC(BF16)};
    Shape ts = {.type = ET_TUPLE, .n_elems = 3, .elems = el};
    tb_add(&e, HLO_TUPLE, ts, OPS(r0, r1, r2));
    SimValue args[2] = {val_i(SH(S32, 2, 3), DL(1, 2, 3, 4, 5, 6)), val_f(SH(BF16, 4), DL(256, 1, 1, 2))};
    SimValue r = run(m, args, 2);
    EXPECT_I(&r.elems[0], 4, 10, 18);
    EXPECT_I(&r.elems[1], 720);
    EXPECT_F(&r.elems[2], 258);
    sim_value_release(&r);
    hlo_module_free(m);
}

static void test_reduce_variadic_argmax(void **state)
{
    (void)state;
    HloModule *m = hlo_module_new("t");
    /* (acc_v, acc_i, x_v, x_i) -> x_v > acc_v ? (x_v, x_i) : (acc_v, acc_i) */
    TB f = tb_new(m, "argmax", false);
    int32_t av = tb_param(&f, 0, SC(F32)), ai = tb_param(&f, 1, SC(S32));
    int32_t xv = tb_param(&f, 2, SC(F32)), xi = tb_param(&f, 3, SC(S32));
    int32_t gt = tb_add(&f, HLO_COMPARE, SC(PRED), OPS(xv, av));
    tb_attrs(&f, gt)->direction = CMP_GT;
    int32_t sv = tb_add(&f, HLO_SELECT, SC(F32), OPS(gt, xv, av)), si = tb_add(&f, HLO_SELECT, SC(S32), OPS(gt, xi, ai));
    Shape el[2] = {SC(F32), SC(S32)};
    Shape ts = {.type = ET_TUPLE, .n_elems = 2, .elems = el};
    tb_add(&f, HLO_TUPLE, ts, OPS(sv, si));
    TB e = tb_new(m, "main", true);
    int32_t v = tb_param(&e, 0, SH(F32, 2, 4)), ix = tb_leaf(&e, HLO_IOTA, SH(S32, 2, 4));
    tb_attrs(&e, ix)->iota_dimension = 1;
    int32_t iv = tb_const(&e, SC(F32), DL(-INFINITY)), ii = tb_const(&e, SC(S32), DL(-1));
    Shape rel[2] = {SH(F32, 2), SH(S32, 2)};
    Shape rts = {.type = ET_TUPLE, .n_elems = 2, .elems = rel};
    int32_t red = tb_add(&e, HLO_REDUCE, rts, OPS(v, ix, iv, ii));
    tb_set_list(&e, &tb_attrs(&e, red)->dimensions, IL(1));
    tb_attrs(&e, red)->to_apply = f.c;
    SimValue arg = val_f(SH(F32, 2, 4), DL(3, 7, 7, 5, -1, -2, 0, -3));
    SimValue r = run(m, &arg, 1);
    EXPECT_F(&r.elems[0], 7, 0); /* ties keep the first: index 1 */
    EXPECT_I(&r.elems[1], 1, 2);
    sim_value_release(&r);
    hlo_module_free(m);
}

static Window *window1(HloModule *m, int64_t size, int64_t stride, int64_t lo, int64_t hi)
{
    Window *w = ARENA_NEW(m->arena, Window);
    w->rank = 1;
    w->dims[0] = (WindowDim){size, stride, lo, hi, 1, 1, false};
    return w;
}

static void test_windows(void **state)
{
    (void)state;
    HloModule *m = hlo_module_new("t");
    int32_t maxc = tb_binop_comp(m, "max", ET_F32, HLO_MAXIMUM, false);
    int32_t addc = tb_binop_comp(m, "add", ET_F32, HLO_ADD, false);
    int32_t gec = tb_binop_comp(m, "ge", ET_F32, HLO_COMPARE, false);
    hlo_comp(m, gec)->insts[2].attrs = NULL;
    hlo_attrs_mut(m, &hlo_comp(m, gec)->insts[2])->direction = CMP_GE;
    TB e = tb_new(m, "main", true);
    int32_t x = tb_param(&e, 0, SH(F32, 5)), ninf = tb_const(&e, SC(F32), DL(-INFINITY));
    /* max pool size 2 stride 2, pad hi 1: [1,3] [2,5] [4,pad] -> [3,5,4] */
    int32_t rw = tb_add(&e, HLO_REDUCE_WINDOW, SH(F32, 3), OPS(x, ninf));
    tb_attrs(&e, rw)->window = window1(m, 2, 2, 0, 1);
    tb_attrs(&e, rw)->to_apply = maxc;
    /* select-and-scatter on [1,5,3,2] windows of 2: picks index 1 and 2 */
    int32_t op = tb_param(&e, 1, SH(F32, 4)), src = tb_param(&e, 2, SH(F32, 2)), zero = tb_const(&e, SC(F32), DL(0));
    int32_t ss = tb_add(&e, HLO_SELECT_AND_SCATTER, SH(F32, 4), OPS(op, src, zero));
    tb_attrs(&e, ss)->window = window1(m, 2, 2, 0, 0);
    tb_attrs(&e, ss)->select = gec;
    tb_attrs(&e, ss)->to_apply = addc;
    /* convolution of x * kernel [1,0,-1], pad 1_1: out[p] = x[p-1] - x[p+1] */
    int32_t lhs = tb_add(&e, HLO_RESHAPE, SH(F32, 1, 1, 5), OPS(x));
    int32_t ker = tb_const(&e, SH(F32, 1, 1, 3), DL(1, 0, -1));
    int32_t cv = tb_add(&e, HLO_CONVOLUTION, SH(F32, 1, 1, 5), OPS(lhs, ker));
    ConvDims *cd = ARENA_NEW(m->arena, ConvDims);
    *cd = (ConvDims){.n_spatial = 1, .in_batch = 0, .in_feature = 1, .in_spatial = {2}, .k_out = 0, .k_in = 1,
                     .k_spatial = {2}, .out_batch = 0, .out_feature = 1, .out_spatial = {2}};
    tb_attrs(&e, cv)->conv = cd;
    tb_attrs(&e, cv)->window = window1(m, 3, 1, 1, 1);
    /* the same with stride 2 and the kernel reversed: out[p] = x[2p+1] - x[2p-1] */
    int32_t cv2 = tb_add(&e, HLO_CONVOLUTION, SH(F32, 1, 1, 3), OPS(lhs, ker));
    tb_attrs(&e, cv2)->conv = cd;
    tb_attrs(&e, cv2)->window = window1(m, 3, 2, 1, 1);
    tb_attrs(&e, cv2)->window->dims[0].reversal = true;
    /* depthwise (feature_group_count 2): features [1,2,3] and [4,5,6], kernels 2 and -1 */
    int32_t l2 = tb_param(&e, 3, SH(F32, 1, 2, 3)), k2 = tb_const(&e, SH(F32, 2, 1, 1), DL(2, -1));
    int32_t cv3 = tb_add(&e, HLO_CONVOLUTION, SH(F32, 1, 2, 3), OPS(l2, k2));
    tb_attrs(&e, cv3)->conv = cd;
    tb_attrs(&e, cv3)->feature_group_count = 2;
    Shape el[5] = {SH(F32, 3), SH(F32, 4), SH(F32, 1, 1, 5), SH(F32, 1, 1, 3), SH(F32, 1, 2, 3)};
    Shape ts = {.type = ET_TUPLE, .n_elems = 5, .elems = el};
    tb_add(&e, HLO_TUPLE, ts, OPS(rw, ss, cv, cv2, cv3));
    SimValue args[4] = {val_f(SH(F32, 5), DL(1, 3, 2, 5, 4)), val_f(SH(F32, 4), DL(1, 5, 3, 2)),
                        val_f(SH(F32, 2), DL(10, 20)), val_f(SH(F32, 1, 2, 3), DL(1, 2, 3, 4, 5, 6))};
    SimValue r = run(m, args, 4);
    EXPECT_F(&r.elems[0], 3, 5, 4);
    EXPECT_F(&r.elems[1], 0, 10, 20, 0);
    EXPECT_F(&r.elems[2], -3, -1, -2, -2, 5); /* x = [1,3,2,5,4]: 0-3, 1-2, 3-5, 2-4, 5-0 */
    EXPECT_F(&r.elems[3], 3, 2, -5);          /* reversed [-1,0,1]: x[1]-0, x[3]-x[1], 0-x[3] */
    EXPECT_F(&r.elems[4], 2, 4, 6, -4, -5, -6);
    sim_value_release(&r);
    hlo_module_free(m);
}

static void test_gather_scatter(void **state)
{
    (void)state;
    HloModule *m = hlo_module_new("t");
    int32_t addc = tb_binop_comp(m, "add", ET_S32, HLO_ADD, false);
    TB e = tb_new(m, "main", true);
    int32_t op = tb_param(&e, 0, SH(F32, 3, 2)), ix = tb_param(&e, 1, SH(S32, 3));
    int32_t g = tb_add(&e, HLO_GATHER, SH(F32, 3, 2), OPS(op, ix));
    HloAttrs *a = tb_attrs(&e, g);
    tb_set_list(&e, &a->offset_dims, IL(1));
    tb_set_list(&e, &a->collapsed_slice_dims, IL(0));
    tb_set_list(&e, &a->start_index_map, IL(0));
    tb_set_list(&e, &a->slice_sizes, IL(1, 2));
    a->index_vector_dim = 1;
    int32_t so = tb_param(&e, 2, SH(S32, 4)), si = tb_param(&e, 3, SH(S32, 3, 1)), su = tb_param(&e, 4, SH(S32, 3));
    int32_t sc = tb_add(&e, HLO_SCATTER, SH(S32, 4), OPS(so, si, su));
    a = tb_attrs(&e, sc);
    tb_set_list(&e, &a->inserted_window_dims, IL(0));
    tb_set_list(&e, &a->scatter_dims_to_operand_dims, IL(0));
    a->index_vector_dim = 1;
    a->to_apply = addc;
    Shape el[2] = {SH(F32, 3, 2), SH(S32, 4)};
    Shape ts = {.type = ET_TUPLE, .n_elems = 2, .elems = el};
    tb_add(&e, HLO_TUPLE, ts, OPS(g, sc));
    SimValue args[5] = {val_f(SH(F32, 3, 2), DL(1, 2, 3, 4, 5, 6)), val_i(SH(S32, 3), DL(2, 0, 5)),
                        val_i(SH(S32, 4), DL(10, 20, 30, 40)), val_i(SH(S32, 3, 1), DL(1, 1, 7)),
                        val_i(SH(S32, 3), DL(1, 2, 3))};
    SimValue r = run(m, args, 5);
    EXPECT_F(&r.elems[0], 5, 6, 1, 2, 5, 6); /* index 5 clamps to 3-1 = 2 */
    EXPECT_I(&r.elems[1], 10, 23, 30, 40);   /* 20+1+2; index 7 is out of bounds: skipped */
    sim_value_release(&r);
    hlo_module_free(m);
}

static void test_sort(void **state)
{
    (void)state;
    HloModule *m = hlo_module_new("t");
    /* ascending on keys: compare(p0, p1) LT (direct); descending: compare(p1, p0) LT (interpreted) */
    TB f = tb_new(m, "lt", false);
    int32_t p0 = tb_param(&f, 0, SC(S32)), p1 = tb_param(&f, 1, SC(S32));
    tb_param(&f, 2, SC(F32));
    tb_param(&f, 3, SC(F32));
    int32_t c = tb_add(&f, HLO_COMPARE, SC(PRED), OPS(p0, p1));
    tb_attrs(&f, c)->direction = CMP_LT;
    TB h = tb_new(m, "gt", false);
    p0 = tb_param(&h, 0, SC(S32));
    p1 = tb_param(&h, 1, SC(S32));
    tb_param(&h, 2, SC(F32));
    tb_param(&h, 3, SC(F32));
    c = tb_add(&h, HLO_COMPARE, SC(PRED), OPS(p1, p0));
    tb_attrs(&h, c)->direction = CMP_LT;
    TB e = tb_new(m, "main", true);
    int32_t k = tb_param(&e, 0, SH(S32, 5)), v = tb_param(&e, 1, SH(F32, 5));
    Shape el[2] = {SH(S32, 5), SH(F32, 5)};
    Shape ts = {.type = ET_TUPLE, .n_elems = 2, .elems = el};
    int32_t s1 = tb_add(&e, HLO_SORT, ts, OPS(k, v));
    tb_set_list(&e, &tb_attrs(&e, s1)->dimensions, IL(0));
    tb_attrs(&e, s1)->to_apply = f.c;
    tb_attrs(&e, s1)->is_stable = true;
    int32_t s2 = tb_add(&e, HLO_SORT, ts, OPS(k, v));
    tb_set_list(&e, &tb_attrs(&e, s2)->dimensions, IL(0));
    tb_attrs(&e, s2)->to_apply = h.c;
    tb_attrs(&e, s2)->is_stable = true;
    Shape el2[2] = {ts, ts};
    Shape ts2 = {.type = ET_TUPLE, .n_elems = 2, .elems = el2};
    tb_add(&e, HLO_TUPLE, ts2, OPS(s1, s2));
    SimValue args[2] = {val_i(SH(S32, 5), DL(3, 1, 2, 1, 3)), val_f(SH(F32, 5), DL(0, 1, 2, 3, 4))};
    SimValue r = run(m, args, 2);
    EXPECT_I(&r.elems[0].elems[0], 1, 1, 2, 3, 3);
    EXPECT_F(&r.elems[0].elems[1], 1, 3, 2, 0, 4); /* stable: equal keys keep their order */
    EXPECT_I(&r.elems[1].elems[0], 3, 3, 2, 1, 1);
    EXPECT_F(&r.elems[1].elems[1], 0, 4, 2, 1, 3);
    sim_value_release(&r);
    hlo_module_free(m);
}

/* topk along the last dim: values in total order (NaN above +inf), the lower
 * index first among equals; and the TopK custom-call by its comparator, or
 * without one the largest (XLA's CPU runtime gives [7,3,2] of
 * [0.5,3,-1,2,7,1], indices [4,1,3]). */
/* reduce-precision, the values XLA:CPU computes (jax 0.10.2,
 * lax.reduce_precision): the mantissa rounds to nearest even, values past
 * the reduced exponent range become a signed infinity, values below its
 * smallest normal a signed zero, NaN stays NaN; f16 rounds its own
 * encoding. */
static void test_reduce_precision(void **state)
{
    (void)state;
    static const int64_t eb[3] = {5, 8, 4}, mb[3] = {10, 7, 3};
    HloModule *m = hlo_module_new("t");
    TB e = tb_new(m, "main", true);
    int32_t x = tb_param(&e, 0, SH(F32, 11)), h = tb_param(&e, 1, SH(F16, 6));
    int32_t r[4];
    for (int k = 0; k < 3; k++) {
        r[k] = tb_add(&e, HLO_REDUCE_PRECISION, SH(F32, 11), OPS(x));
        tb_attrs(&e, r[k])->exponent_bits = eb[k];
        tb_attrs(&e, r[k])->mantissa_bits = mb[k];
    }
    r[3] = tb_add(&e, HLO_REDUCE_PRECISION, SH(F16, 6), OPS(h));
    tb_attrs(&e, r[3])->exponent_bits = 4;
    tb_attrs(&e, r[3])->mantissa_bits = 2;
    Shape el[4] = {SH(F32, 11), SH(F32, 11), SH(F32, 11), SH(F16, 6)};
    Shape all = {.type = ET_TUPLE, .n_elems = 4, .elems = el};
    tb_add(&e, HLO_TUPLE, all, OPS(r[0], r[1], r[2], r[3]));
    SimValue args[2] = {val_f(SH(F32, 11), DL(1 + 0x1p-10, 1 + 0x1p-11, 1 + 3 * 0x1p-11, 65520.0, 70000.0, 1e-5,
                                               6.0e-8, -3.3, NAN, INFINITY, 1 + 0x1p-8 + 0x1p-9)),
                        val_f(SH(F16, 6), DL(1.0, 1.0625, 1.09375, 0.0000305, 300.0, -0.3))};
    SimValue v = run(m, args, 2);
    EXPECT_F(&v.elems[0], 1.0009765625, 1.0, 1.001953125, INFINITY, INFINITY, 0.0, 0.0, -3.30078125, NAN, INFINITY,
             1.005859375);
    EXPECT_F(&v.elems[1], 1.0, 1.0, 1.0, 65536.0, 70144.0, 1.0013580322265625e-05, 6.007030606269836e-08, -3.296875,
             NAN, INFINITY, 1.0078125);
    EXPECT_F(&v.elems[2], 1.0, 1.0, 1.0, INFINITY, INFINITY, 0.0, 0.0, -3.25, NAN, INFINITY, 1.0);
    EXPECT_F(&v.elems[3], 1.0, 1.0, 1.0, 0.0, INFINITY, -0.3125);
    sim_value_release(&v);
    hlo_module_free(m);
}

static void test_topk(void **state)
{
    (void)state;
    HloModule *m = hlo_module_new("t");
    TB g = tb_new(m, "gt", false);
    int32_t p0 = tb_param(&g, 0, SC(F32)), p1 = tb_param(&g, 1, SC(F32));
    int32_t c = tb_add(&g, HLO_COMPARE, SC(PRED), OPS(p0, p1));
    tb_attrs(&g, c)->direction = CMP_GT;
    TB e = tb_new(m, "main", true);
    int32_t x = tb_param(&e, 0, SH(F32, 2, 5)), y = tb_param(&e, 1, SH(F32, 2, 5));
    Shape el[2] = {SH(F32, 2, 3), SH(S32, 2, 3)};
    Shape ts = {.type = ET_TUPLE, .n_elems = 2, .elems = el};
    int32_t t1 = tb_add(&e, HLO_TOPK, ts, OPS(x));
    tb_attrs(&e, t1)->k = 3;
    int32_t t2 = tb_add(&e, HLO_TOPK, ts, OPS(x));
    tb_attrs(&e, t2)->k = 3;
    tb_attrs(&e, t2)->largest = false;
    int32_t t3 = tb_add(&e, HLO_CUSTOM_CALL, ts, OPS(y));
    tb_attrs(&e, t3)->custom_call_target = "TopK";
    tb_attrs(&e, t3)->to_apply = g.c;
    int32_t t4 = tb_add(&e, HLO_CUSTOM_CALL, ts, OPS(y)); /* no comparator: the largest, as XLA's */
    tb_attrs(&e, t4)->custom_call_target = "TopK";
    Shape el3[4] = {ts, ts, ts, ts};
    Shape all = {.type = ET_TUPLE, .n_elems = 4, .elems = el3};
    tb_add(&e, HLO_TUPLE, all, OPS(t1, t2, t3, t4));
    /* row 0: 2, 7, 7, -1, 5; row 1: 0, nan, 3, 3, -inf */
    /* y: row 0 as x's, row 1: 0, 1, 3, 3, -inf */
    SimValue args[2] = {val_f(SH(F32, 2, 5), DL(2, 7, 7, -1, 5, 0, NAN, 3, 3, -INFINITY)),
                        val_f(SH(F32, 2, 5), DL(2, 7, 7, -1, 5, 0, 1, 3, 3, -INFINITY))};
    SimValue r = run(m, args, 2);
    EXPECT_F(&r.elems[0].elems[0], 7, 7, 5, NAN, 3, 3);
    EXPECT_I(&r.elems[0].elems[1], 1, 2, 4, 1, 2, 3);
    EXPECT_F(&r.elems[1].elems[0], -1, 2, 5, -INFINITY, 0, 3);
    EXPECT_I(&r.elems[1].elems[1], 3, 0, 4, 4, 0, 2);
    /* comparator a > b, stable: equal values keep their order */
    EXPECT_F(&r.elems[2].elems[0], 7, 7, 5, 3, 3, 1);
    EXPECT_I(&r.elems[2].elems[1], 1, 2, 4, 2, 3, 1);
    EXPECT_F(&r.elems[3].elems[0], 7, 7, 5, 3, 3, 1);
    EXPECT_I(&r.elems[3].elems[1], 1, 2, 4, 2, 3, 1);
    sim_value_release(&r);
    hlo_module_free(m);
}

/* rng draws a stream per instruction and device, in range; rng-bit-generator
 * is a function of its state and shape. */
static void test_random(void **state)
{
    (void)state;
    HloModule *m = hlo_module_new("t");
    TB e = tb_new(m, "main", true);
    int32_t a = tb_param(&e, 0, SC(S32)), b = tb_param(&e, 1, SC(S32)), st = tb_param(&e, 2, SH(U64, 2));
    int32_t r = tb_add(&e, HLO_RNG, SH(S32, 64), OPS(a, b));
    tb_attrs(&e, r)->rng_distribution = "rng_uniform";
    Shape el[2] = {SH(U64, 2), SH(U32, 8)};
    Shape gs = {.type = ET_TUPLE, .n_elems = 2, .elems = el};
    int32_t g = tb_add(&e, HLO_RNG_BIT_GENERATOR, gs, OPS(st));
    Shape out[2] = {SH(S32, 64), gs};
    tb_add(&e, HLO_TUPLE, (Shape){.type = ET_TUPLE, .n_elems = 2, .elems = out}, OPS(r, g));
    SimValue res[2];
    for (int64_t pid = 0; pid < 2; pid++) {
        SimValue args[3] = {val_i(SC(S32), DL(-3)), val_i(SC(S32), DL(5)), val_i(SH(U64, 2), DL(7, 9))};
        assert_true(sim_interp_run(m, args, 3, pid, &res[pid], g_diag));
        for (int k = 0; k < 3; k++) sim_value_release(&args[k]);
    }
    int64_t differ = 0;
    for (int64_t k = 0; k < 64; k++) {
        int64_t v = sim_value_get_i64(&res[0].elems[0], k);
        assert_true(v >= -3 && v < 5); /* [a, b) */
        differ += v != sim_value_get_i64(&res[1].elems[0], k);
    }
    assert_true(differ > 32); /* the two devices draw their own values */
    for (int64_t k = 0; k < 8; k++) /* the same state: the same bits on both */
        assert_int_equal(sim_value_get_i64(&res[0].elems[1].elems[1], k), sim_value_get_i64(&res[1].elems[1].elems[1], k));
    sim_value_release(&res[0]);
    sim_value_release(&res[1]);
    hlo_module_free(m);
}

static void test_control_flow(void **state)
{
    (void)state;
    HloModule *m = hlo_module_new("t");
    Shape el[2] = {SC(S32), SC(S32)};
    Shape st = {.type = ET_TUPLE, .n_elems = 2, .elems = el};
    /* cond: i < 5 */
    TB cd = tb_new(m, "cond", false);
    int32_t s = tb_param(&cd, 0, st), i = tb_add(&cd, HLO_GET_TUPLE_ELEMENT, SC(S32), OPS(s));
    int32_t five = tb_const(&cd, SC(S32), DL(5)), lt = tb_add(&cd, HLO_COMPARE, SC(PRED), OPS(i, five));
    tb_attrs(&cd, lt)->direction = CMP_LT;
    /* body: (i + 1, acc + i) */
    TB bd = tb_new(m, "body", false);
    s = tb_param(&bd, 0, st);
    i = tb_add(&bd, HLO_GET_TUPLE_ELEMENT, SC(S32), OPS(s));
    int32_t acc = tb_add(&bd, HLO_GET_TUPLE_ELEMENT, SC(S32), OPS(s));
    tb_attrs(&bd, acc)->index = 1;
    int32_t one = tb_const(&bd, SC(S32), DL(1));
    int32_t i1 = tb_add(&bd, HLO_ADD, SC(S32), OPS(i, one)), a1 = tb_add(&bd, HLO_ADD, SC(S32), OPS(acc, i));
    tb_add(&bd, HLO_TUPLE, st, OPS(i1, a1));
    /* branches: negate / copy; call: x + x; map: x * y + 1 */
    TB b0 = tb_new(m, "neg", false);
    tb_add(&b0, HLO_NEGATE, SC(S32), OPS(tb_param(&b0, 0, SC(S32))));
    TB b1 = tb_new(m, "dbl", false);
    int32_t q = tb_param(&b1, 0, SC(S32));
    tb_add(&b1, HLO_ADD, SC(S32), OPS(q, q));
    TB mp = tb_new(m, "fma", false);
    int32_t x = tb_param(&mp, 0, SC(F32)), y = tb_param(&mp, 1, SC(F32));
    int32_t xy = tb_add(&mp, HLO_MULTIPLY, SC(F32), OPS(x, y)), c1 = tb_const(&mp, SC(F32), DL(1));
    tb_add(&mp, HLO_ADD, SC(F32), OPS(xy, c1));

    TB e = tb_new(m, "main", true);
    int32_t z = tb_const(&e, SC(S32), DL(0)), init = tb_add(&e, HLO_TUPLE, st, OPS(z, z));
    int32_t w = tb_add(&e, HLO_WHILE, st, OPS(init));
    tb_attrs(&e, w)->condition = cd.c;
    tb_attrs(&e, w)->body = bd.c;
    int32_t sum = tb_add(&e, HLO_GET_TUPLE_ELEMENT, SC(S32), OPS(w));
    tb_attrs(&e, sum)->index = 1;
    int32_t pr = tb_param(&e, 0, SC(PRED)), sel = tb_param(&e, 1, SC(S32));
    int32_t c_pred = tb_add(&e, HLO_CONDITIONAL, SC(S32), OPS(pr, sum, sum));
    tb_set_list(&e, &tb_attrs(&e, c_pred)->branches, IL(b0.c, b1.c));
    tb_attrs(&e, c_pred)->branches_by_pred = true;
    int32_t c_idx = tb_add(&e, HLO_CONDITIONAL, SC(S32), OPS(sel, sum, sum));
    tb_set_list(&e, &tb_attrs(&e, c_idx)->branches, IL(b0.c, b1.c));
    int32_t call = tb_add(&e, HLO_CALL, SC(S32), OPS(sum));
    tb_attrs(&e, call)->to_apply = b1.c;
    int32_t ma = tb_param(&e, 2, SH(F32, 3)), mb = tb_param(&e, 3, SH(F32, 3));
    int32_t map = tb_add(&e, HLO_MAP, SH(F32, 3), OPS(ma, mb));
    tb_attrs(&e, map)->to_apply = mp.c;
    tb_set_list(&e, &tb_attrs(&e, map)->dimensions, IL(0));
    int32_t pid = tb_leaf(&e, HLO_PARTITION_ID, SC(U32));
    Shape rel[5] = {SC(S32), SC(S32), SC(S32), SH(F32, 3), SC(U32)};
    Shape rt = {.type = ET_TUPLE, .n_elems = 5, .elems = rel};
    int32_t ob = tb_add(&e, HLO_TUPLE, rt, OPS(c_pred, c_idx, call, map, pid));
    tb_add(&e, HLO_OPTIMIZATION_BARRIER, rt, OPS(ob));
    SimValue args[4] = {val_i(SC(PRED), DL(1)), val_i(SC(S32), DL(7)), val_f(SH(F32, 3), DL(1, 2, 3)),
                        val_f(SH(F32, 3), DL(4, 5, -1))};
    SimValue r;
    assert_true(sim_interp_run(m, args, 4, 3, &r, g_diag));
    EXPECT_I(&r.elems[0], -10); /* sum 0+1+2+3+4 = 10; pred true -> branch 0 (negate) */
    EXPECT_I(&r.elems[1], 20);  /* index 7 out of range -> last branch (double) */
    EXPECT_I(&r.elems[2], 20);
    EXPECT_F(&r.elems[3], 5, 11, -2);
    EXPECT_I(&r.elems[4], 3); /* partition id */
    sim_value_release(&r);
    for (int k = 0; k < 4; k++) sim_value_release(&args[k]);
    hlo_module_free(m);
}

static void test_errors(void **state)
{
    (void)state;
    HloModule *m = hlo_module_new("t");
    TB e = tb_new(m, "main", true);
    int32_t a = tb_param(&e, 0, SC(F32)), b = tb_param(&e, 1, SC(F32));
    tb_add(&e, HLO_RNG, SC(F32), OPS(a, b));
    SimValue args[2] = {val_f(SC(F32), DL(0)), val_f(SC(F32), DL(1))};
    assert_string_equal(run_fail(m, args, 2), "spmdc: error: rng.2: rng needs two scalar parameters and a "
                                              "distribution\n");
    hlo_module_free(m);

    diag_destroy(g_diag);
    g_diag = diag_create(NULL);
    m = hlo_module_new("t");
    e = tb_new(m, "main", true);
    tb_param(&e, 0, SH(C64, 2));
    SimValue none = {0};
    none.shape.type = ET_INVALID;
    assert_string_equal(run_fail(m, NULL, 0),
                        "spmdc: error: parameter.0: the interpreter does not support element type c64\n");
    (void)none;
    hlo_module_free(m);

    diag_destroy(g_diag);
    g_diag = diag_create(NULL);
    m = hlo_module_new("t");
    e = tb_new(m, "main", true);
    tb_param(&e, 0, SH(F32, 2));
    SimValue wrong = val_f(SH(F32, 3), DL(1, 2, 3));
    assert_string_equal(run_fail(m, &wrong, 1),
                        "spmdc: error: parameter.0: argument does not have the parameter's shape f32[2]\n");
    hlo_module_free(m);

    diag_destroy(g_diag);
    g_diag = diag_create(NULL);
    m = hlo_module_new("t");
    e = tb_new(m, "main", true);
    int32_t x = tb_param(&e, 0, SH(F32, 2));
    int32_t cc = tb_add(&e, HLO_CUSTOM_CALL, SH(F32, 2), OPS(x));
    tb_attrs(&e, cc)->custom_call_target = "Frobnicate";
    SimValue v = val_f(SH(F32, 2), DL(1, 2));
    assert_string_equal(run_fail(m, &v, 1), "spmdc: error: custom-call.1: the interpreter does not support "
                                            "custom-call target \"Frobnicate\"\n");
    hlo_module_free(m);
}

static void test_value_print_share(void **state)
{
    (void)state;
    SimValue v = val_i(SH(S32, 2, 2), DL(1, 2, 3, -4));
    SimValue t = sim_value_tuple(2);
    t.elems[0] = sim_value_share(&v);
    t.elems[1] = val_f(SC(BF16), DL(0.5));
    StrBuf b = {0};
    sim_value_print(&b, &t);
    assert_string_equal(sb_cstr(&b), "({{1, 2}, {3, -4}}, 0.5)");
    sb_free(&b);
    assert_ptr_equal(sim_value_data(&t.elems[0]), sim_value_data(&v)); /* shared, not copied */
    assert_ptr_equal(sim_value_leaf(&t, 1), &t.elems[1]);
    SimValue c = sim_value_clone(&t);
    assert_ptr_not_equal(sim_value_data(&c.elems[0]), sim_value_data(&v));
    sim_value_release(&c);
    sim_value_release(&t);
    sim_value_release(&v);
}

/* Every opcode of the table is either interpreted or rejected with a named error (no crash). */
static void test_opcode_table_walk(void **state)
{
    (void)state;
    for (int op = 0; op < HLO_OPCODE_COUNT; op++) {
        HloModule *m = hlo_module_new("t");
        TB e = tb_new(m, "main", true);
        int arity = hlo_opcode_arity((HloOpcode)op);
        int32_t n = arity < 0 ? 2 : arity, ops[3];
        for (int32_t k = 0; k < n; k++) ops[k] = tb_param(&e, k, SH(F32, 2));
        int32_t i = tb_add(&e, (HloOpcode)op, SH(F32, 2), ops, n);
        (void)i;
        SimValue args[3];
        for (int32_t k = 0; k < n; k++) args[k] = val_f(SH(F32, 2), DL(1, 2));
        SimValue out;
        DiagEngine *d = diag_create(NULL);
        bool ok = sim_interp_run(m, args, n, 0, &out, d);
        if (ok) sim_value_release(&out);
        else assert_non_null(strstr(diag_text(d), "error: "));
        diag_destroy(d);
        for (int32_t k = 0; k < n; k++) sim_value_release(&args[k]);
        hlo_module_free(m);
    }
}

static void test_more_elementwise(void **state)
{
    (void)state;
    /* expm1(0) = 0, log1p(0) = 0, cbrt(27) = 3, tan(0) = 0, erf(0) = 0, real(x) = x, imag(x) = 0 */
    static const HloOpcode ops[] = {HLO_EXPM1, HLO_LOG1P, HLO_CBRT, HLO_TAN, HLO_ERF, HLO_REAL, HLO_IMAG};
    static const double in[] = {0, 0, 27, 0, 0, -2.5, -2.5}, want[] = {0, 0, 3, 0, 0, -2.5, 0};
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        SimValue r = unary(ops[k], SC(F32), ET_F32, val_f(SC(F32), &in[k], 1));
        expect_f(&r, &want[k], 1);
        sim_value_release(&r);
    }
    /* atan2(1, 1) = pi/4 = 0.78539816339... -> f32 0.785398185253143310546875; atan2(0, -1) = pi -> f32 3.1415927410125732421875 */
    SimValue r = binary(HLO_ATAN2, SH(F32, 2), ET_F32, val_f(SH(F32, 2), DL(1, 0)), val_f(SH(F32, 2), DL(1, -1)));
    EXPECT_F(&r, 0.785398185253143310546875, 3.1415927410125732421875);
    sim_value_release(&r);
    r = binary(HLO_OR, SH(S32, 2), ET_S32, val_i(SH(S32, 2), DL(12, -16)), val_i(SH(S32, 2), DL(3, 1)));
    EXPECT_I(&r, 15, -15);
    sim_value_release(&r);
    r = binary(HLO_XOR, SH(PRED, 4), ET_PRED, val_i(SH(PRED, 4), DL(0, 0, 1, 1)), val_i(SH(PRED, 4), DL(0, 1, 0, 1)));
    EXPECT_I(&r, 0, 1, 1, 0);
    sim_value_release(&r);
    /* u64 values above 2^63 compare and divide unsigned */
    r = binary(HLO_MAXIMUM, SC(U64), ET_U64, val_i(SC(U64), DL(-1.0)), val_i(SC(U64), DL(5)));
    EXPECT_I(&r, -1); /* 0xFFFFFFFFFFFFFFFF is the maximum */
    sim_value_release(&r);
    /* complex on floats is not supported */
    HloModule *m = hlo_module_new("t");
    TB e = tb_new(m, "main", true);
    int32_t a = tb_param(&e, 0, SC(F32)), b = tb_param(&e, 1, SC(F32));
    tb_add(&e, HLO_COMPLEX, SC(F32), OPS(a, b));
    SimValue args[2] = {val_f(SC(F32), DL(1)), val_f(SC(F32), DL(2))};
    assert_string_equal(run_fail(m, args, 2), "spmdc: error: complex.2: complex is not defined on f32\n");
    hlo_module_free(m);
}

static void test_leaves_and_bitcast(void **state)
{
    (void)state;
    HloModule *m = hlo_module_new("t");
    TB e = tb_new(m, "main", true);
    int32_t p = tb_param(&e, 0, SH(F32, 2, 2));
    int32_t bc = tb_add(&e, HLO_BITCAST, SH(S32, 4), OPS(p)); /* same bytes, 4-byte ints */
    int32_t rid = tb_leaf(&e, HLO_REPLICA_ID, SC(U32));
    int32_t tok = tb_leaf(&e, HLO_AFTER_ALL, SC(TOKEN));
    Shape el[3] = {SH(S32, 4), SC(U32), SC(TOKEN)};
    Shape ts = {.type = ET_TUPLE, .n_elems = 3, .elems = el};
    tb_add(&e, HLO_TUPLE, ts, OPS(bc, rid, tok));
    SimValue arg = val_f(SH(F32, 2, 2), DL(1, -2, 0.5, 0));
    SimValue r = run(m, &arg, 1);
    EXPECT_I(&r.elems[0], 0x3f800000, (int32_t)0xc0000000, 0x3f000000, 0); /* IEEE bits of 1, -2, 0.5, 0 */
    EXPECT_I(&r.elems[1], 0);
    assert_int_equal(r.elems[2].shape.type, ET_TOKEN);
    sim_value_release(&r);
    hlo_module_free(m);
}

/* ((a, (b, c)), d): leaves a, b, c, d in that order, by sim_value_leaves
 * in one pass and by sim_value_leaf one at a time; a cap of 2 fills two
 * and still counts 4. */
static void test_value_leaves(void **state)
{
    (void)state;
    SimValue inner = sim_value_tuple(2), mid = sim_value_tuple(2), top = sim_value_tuple(2);
    inner.elems[0] = val_f(SC(F32), DL(2));
    inner.elems[1] = val_f(SC(F32), DL(3));
    mid.elems[0] = val_f(SC(F32), DL(1));
    mid.elems[1] = inner;
    top.elems[0] = mid;
    top.elems[1] = val_f(SC(F32), DL(4));
    const SimValue *l[4] = {0};
    assert_int_equal(sim_value_leaves(&top, l, 4), 4);
    for (int32_t k = 0; k < 4; k++) {
        assert_ptr_equal(l[k], sim_value_leaf(&top, k));
        assert_true(sim_value_get_f64(l[k], 0) == (double)(k + 1));
    }
    const SimValue *two[2] = {0};
    assert_int_equal(sim_value_leaves(&top, two, 2), 4);
    assert_ptr_equal(two[1], l[1]);
    assert_int_equal(sim_value_leaves(l[3], two, 2), 1); /* an array is its own leaf */
    assert_ptr_equal(two[0], l[3]);
    sim_value_release(&top);
}

static void test_gather_batching_and_base_dilation(void **state)
{
    (void)state;
    HloModule *m = hlo_module_new("t");
    int32_t addc = tb_binop_comp(m, "add", ET_S32, HLO_ADD, false);
    TB e = tb_new(m, "main", true);
    /* per-batch lookup: out[b] = operand[b][indices[b]] = [op[0][2], op[1][0]] = [3, 4] */
    int32_t op = tb_param(&e, 0, SH(S32, 2, 3)), ix = tb_param(&e, 1, SH(S32, 2));
    int32_t g = tb_add(&e, HLO_GATHER, SH(S32, 2), OPS(op, ix));
    HloAttrs *a = tb_attrs(&e, g);
    tb_set_list(&e, &a->collapsed_slice_dims, IL(1));
    tb_set_list(&e, &a->start_index_map, IL(1));
    tb_set_list(&e, &a->operand_batching_dims, IL(0));
    tb_set_list(&e, &a->start_indices_batching_dims, IL(0));
    tb_set_list(&e, &a->slice_sizes, IL(1, 1));
    a->index_vector_dim = 1;
    /* reduce-window, base dilation 2 on [1,2,3] -> [1,_,2,_,3]; size 2: holes are skipped -> [1,2,2,3] */
    int32_t v = tb_param(&e, 2, SH(S32, 3)), z = tb_const(&e, SC(S32), DL(0));
    int32_t rw = tb_add(&e, HLO_REDUCE_WINDOW, SH(S32, 4), OPS(v, z));
    Window *w = ARENA_NEW(m->arena, Window);
    w->rank = 1;
    w->dims[0] = (WindowDim){2, 1, 0, 0, 2, 1, false};
    tb_attrs(&e, rw)->window = w;
    tb_attrs(&e, rw)->to_apply = addc;
    Shape el[2] = {SH(S32, 2), SH(S32, 4)};
    Shape ts = {.type = ET_TUPLE, .n_elems = 2, .elems = el};
    tb_add(&e, HLO_TUPLE, ts, OPS(g, rw));
    SimValue args[3] = {val_i(SH(S32, 2, 3), DL(1, 2, 3, 4, 5, 6)), val_i(SH(S32, 2), DL(2, 0)), val_i(SH(S32, 3), DL(1, 2, 3))};
    SimValue r = run(m, args, 3);
    EXPECT_I(&r.elems[0], 3, 4);
    EXPECT_I(&r.elems[1], 1, 2, 2, 3);
    sim_value_release(&r);
    hlo_module_free(m);
}

static void test_convolution_batch_groups(void **state)
{
    (void)state;
    /* batch_group_count 2: lhs batches {0} and {1} pair with output features {0} and {1}.
     * lhs f32[2,1,2] (b, f, 0) = [[[1,2]], [[3,4]]], kernel f32[1,2,1] (i, o, 0) = [[[10],[100]]]
     * out f32[1,2,2]: feature 0 = 10*[1,2] = [10,20], feature 1 = 100*[3,4] = [300,400] */
    HloModule *m = hlo_module_new("t");
    TB e = tb_new(m, "main", true);
    int32_t l = tb_param(&e, 0, SH(F32, 2, 1, 2)), k = tb_const(&e, SH(F32, 1, 2, 1), DL(10, 100));
    int32_t cv = tb_add(&e, HLO_CONVOLUTION, SH(F32, 1, 2, 2), OPS(l, k));
    ConvDims *cd = ARENA_NEW(m->arena, ConvDims);
    *cd = (ConvDims){.n_spatial = 1, .in_batch = 0, .in_feature = 1, .in_spatial = {2}, .k_in = 0, .k_out = 1,
                     .k_spatial = {2}, .out_batch = 0, .out_feature = 1, .out_spatial = {2}};
    tb_attrs(&e, cv)->conv = cd;
    tb_attrs(&e, cv)->batch_group_count = 2;
    SimValue arg = val_f(SH(F32, 2, 1, 2), DL(1, 2, 3, 4));
    SimValue r = run(m, &arg, 1);
    EXPECT_F(&r, 10, 20, 300, 400);
    sim_value_release(&r);
    hlo_module_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_f32_binary, setup, teardown),
        cmocka_unit_test_setup_teardown(test_f32_unary, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bf16_rounding, setup, teardown),
        cmocka_unit_test_setup_teardown(test_f16_rounding, setup, teardown),
        cmocka_unit_test_setup_teardown(test_integer_wraparound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_integer_div_shift, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convert, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compare_select_clamp, setup, teardown),
        cmocka_unit_test_setup_teardown(test_data_movement, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dynamic_slice_clamping, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pad_negative_interior, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dot_batch_dims, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ragged_dot, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reduce, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reduce_variadic_argmax, setup, teardown),
        cmocka_unit_test_setup_teardown(test_windows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gather_scatter, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sort, setup, teardown),
        cmocka_unit_test_setup_teardown(test_topk, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reduce_precision, setup, teardown),
        cmocka_unit_test_setup_teardown(test_random, setup, teardown),
        cmocka_unit_test_setup_teardown(test_control_flow, setup, teardown),
        cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_value_print_share, setup, teardown),
        cmocka_unit_test_setup_teardown(test_opcode_table_walk, setup, teardown),
        cmocka_unit_test_setup_teardown(test_more_elementwise, setup, teardown),
        cmocka_unit_test_setup_teardown(test_leaves_and_bitcast, setup, teardown),
        cmocka_unit_test(test_value_leaves),
        cmocka_unit_test_setup_teardown(test_gather_batching_and_base_dilation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_convolution_batch_groups, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
