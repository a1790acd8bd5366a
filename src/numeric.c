/* numeric.c - element storage and arithmetic of the reference interpreter.
 *
 * Elements are stored in their own type (see sim.h).  Floats are computed in
 * double and rounded to their type when stored: f32 by a float cast (double
 * rounding is exact for + - * / sqrt since 53 >= 2*24+2), bf16 and f16 by
 * round_fmt (nearest, ties to even, overflow to inf, subnormals kept).
 * Integers are computed in 64 bits with unsigned arithmetic (no UB) and
 * wrapped to the type's width; division by zero, INT_MIN / -1, shifts by
 * the width or more and negative integer powers follow XLA.  Kernels work on
 * chunks of CHUNK elements converted to double / int64 so that one switch
 * per chunk selects the operation.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

#define CHUNK 256

int num_elem_bytes(ElemType t)
{
    switch (t) {
    case ET_PRED: case ET_S1: case ET_S2: case ET_S4: case ET_S8:
    case ET_U1: case ET_U2: case ET_U4: case ET_U8: return 1;
    case ET_S16: case ET_U16: case ET_F16: case ET_BF16: return 2;
    case ET_S32: case ET_U32: case ET_F32: return 4;
    case ET_S64: case ET_U64: case ET_F64: return 8;
    case ET_TOKEN: return 0;
    default: return -1;
    }
}

bool num_type_supported(ElemType t) { return num_elem_bytes(t) >= 0; }
bool num_is_float(ElemType t) { return t == ET_F16 || t == ET_BF16 || t == ET_F32 || t == ET_F64; }

/* x rounded to a binary format with p significand bits, normal exponents
 * [emin, emax]: nearest, ties to even. */
static double round_fmt(double x, int p, int emin, int emax)
{
    if (x == 0 || !isfinite(x)) return x;
    int e;
    (void)frexp(x, &e);
    int ex = e - 1; /* x in [2^ex, 2^(ex+1)) */
    if (ex < emin) ex = emin;
    double q = ldexp(1.0, ex - (p - 1));
    double r = nearbyint(x / q) * q;
    if (fabs(r) >= ldexp(1.0, emax + 1)) r = copysign(INFINITY, x);
    return r;
}

double num_round(ElemType t, double x)
{
    switch (t) {
    case ET_F32: return (double)(float)x;
    case ET_BF16: return round_fmt(x, 8, -126, 127);
    case ET_F16: return round_fmt(x, 11, -14, 15);
    default: return x;
    }
}

static uint32_t float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint16_t bf16_from_double(double x)
{
    if (isnan(x)) return (uint16_t)(signbit(x) ? 0xffc0 : 0x7fc0);
    float f = (float)x;
    if ((double)f == x) { /* exact in float: the usual bit trick rounds to nearest even */
        uint32_t u = float_bits(f);
        u += 0x7fff + ((u >> 16) & 1);
        return (uint16_t)(u >> 16);
    }
    return (uint16_t)(float_bits((float)round_fmt(x, 8, -126, 127)) >> 16);
}

static double bf16_to_double(uint16_t h) { return (double)bits_float((uint32_t)h << 16); }

static uint16_t f16_from_double(double x)
{
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    if (isnan(x)) return sign | 0x7e00;
    double a = fabs(round_fmt(x, 11, -14, 15));
    if (isinf(a)) return sign | 0x7c00;
    if (a == 0) return sign;
    if (a < 0x1p-14) return (uint16_t)(sign | (uint16_t)(a * 0x1p24));
    int e;
    (void)frexp(a, &e);
    int ex = e - 1;
    uint16_t mant = (uint16_t)((ldexp(a, -ex) - 1.0) * 1024.0);
    return (uint16_t)(sign | (uint16_t)((ex + 15) << 10) | mant);
}

static double f16_to_double(uint16_t h)
{
    int ex = (h >> 10) & 0x1f, mant = h & 0x3ff;
    double v;
    if (ex == 0)
        v = ldexp(mant, -24);
    else if (ex == 31)
        v = mant ? NAN : INFINITY;
    else
        v = ldexp(1024 + mant, ex - 25);
    return (h & 0x8000) ? -v : v;
}

int64_t num_wrap(ElemType t, int64_t x)
{
    if (t == ET_PRED) return x != 0;
    int b = elem_type_bits(t);
    if (b >= 64 || b <= 0) return x;
    uint64_t mask = ((uint64_t)1 << b) - 1, u = (uint64_t)x & mask;
    if (elem_type_is_signed_int(t) && ((u >> (b - 1)) & 1)) u |= ~mask;
    return (int64_t)u;
}

int64_t num_f2i(ElemType to, double x)
{
    if (to == ET_PRED) return x != 0;
    if (isnan(x)) return 0;
    x = trunc(x);
    int b = elem_type_bits(to);
    if (elem_type_is_unsigned_int(to)) {
        if (x <= 0) return 0;
        if (x >= ldexp(1.0, b)) return num_wrap(to, -1);
        return (int64_t)(uint64_t)x;
    }
    double lo = -ldexp(1.0, b - 1);
    if (x <= lo) return b >= 64 ? INT64_MIN : (int64_t)lo;
    if (x >= -lo) return b >= 64 ? INT64_MAX : (int64_t)(-lo) - 1;
    return (int64_t)x;
}

double num_i2f(ElemType from, int64_t x) { return from == ET_U64 ? (double)(uint64_t)x : (double)x; }

int64_t num_get_i(ElemType t, const void *buf, int64_t i)
{
    const char *p = (const char *)buf;
    switch (t) {
    case ET_PRED: case ET_U1: case ET_U2: case ET_U4: case ET_U8: return ((const uint8_t *)p)[i];
    case ET_S1: case ET_S2: case ET_S4: case ET_S8: return ((const int8_t *)p)[i];
    case ET_S16: { int16_t v; memcpy(&v, p + 2 * i, 2); return v; }
    case ET_U16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return v; }
    case ET_S32: { int32_t v; memcpy(&v, p + 4 * i, 4); return v; }
    case ET_U32: { uint32_t v; memcpy(&v, p + 4 * i, 4); return v; }
    case ET_S64: case ET_U64: { int64_t v; memcpy(&v, p + 8 * i, 8); return v; }
    default: return num_f2i(ET_S64, num_get_f(t, buf, i));
    }
}

void num_set_i(ElemType t, void *buf, int64_t i, int64_t x)
{
    char *p = (char *)buf;
    if (num_is_float(t)) {
        num_set_f(t, buf, i, num_i2f(ET_S64, x));
        return;
    }
    x = num_wrap(t, x);
    switch (num_elem_bytes(t)) {
    case 1: { uint8_t v = (uint8_t)x; p[i] = (char)v; break; }
    case 2: { uint16_t v = (uint16_t)x; memcpy(p + 2 * i, &v, 2); break; }
    case 4: { uint32_t v = (uint32_t)x; memcpy(p + 4 * i, &v, 4); break; }
    case 8: memcpy(p + 8 * i, &x, 8); break;
    default: break;
    }
}

double num_get_f(ElemType t, const void *buf, int64_t i)
{
    const char *p = (const char *)buf;
    switch (t) {
    case ET_F32: { float v; memcpy(&v, p + 4 * i, 4); return v; }
    case ET_F64: { double v; memcpy(&v, p + 8 * i, 8); return v; }
    case ET_BF16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return bf16_to_double(v); }
    case ET_F16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return f16_to_double(v); }
    default: return num_i2f(t, num_get_i(t, buf, i));
    }
}

void num_set_f(ElemType t, void *buf, int64_t i, double x)
{
    char *p = (char *)buf;
    switch (t) {
    case ET_F32: { float v = (float)x; memcpy(p + 4 * i, &v, 4); break; }
    case ET_F64: memcpy(p + 8 * i, &x, 8); break;
    case ET_BF16: { uint16_t v = bf16_from_double(x); memcpy(p + 2 * i, &v, 2); break; }
    case ET_F16: { uint16_t v = f16_from_double(x); memcpy(p + 2 * i, &v, 2); break; }
    default: num_set_i(t, buf, i, num_f2i(t, x)); break;
    }
}

void num_load_f(ElemType t, const void *buf, int64_t start, int64_t n, double *out)
{
    if (t == ET_F32) {
        const char *p = (const char *)buf + 4 * start;
        for (int64_t k = 0; k < n; k++) {
            float v;
            memcpy(&v, p + 4 * k, 4);
            out[k] = v;
        }
    } else if (t == ET_F64) {
        memcpy(out, (const char *)buf + 8 * start, (size_t)n * 8);
    } else {
        for (int64_t k = 0; k < n; k++) out[k] = num_get_f(t, buf, start + k);
    }
}

void num_store_f(ElemType t, void *buf, int64_t start, int64_t n, const double *in)
{
    if (t == ET_F32) {
        char *p = (char *)buf + 4 * start;
        for (int64_t k = 0; k < n; k++) {
            float v = (float)in[k];
            memcpy(p + 4 * k, &v, 4);
        }
    } else if (t == ET_F64) {
        memmove((char *)buf + 8 * start, in, (size_t)n * 8);
    } else {
        for (int64_t k = 0; k < n; k++) num_set_f(t, buf, start + k, in[k]);
    }
}

void num_load_i(ElemType t, const void *buf, int64_t start, int64_t n, int64_t *out)
{
    for (int64_t k = 0; k < n; k++) out[k] = num_get_i(t, buf, start + k);
}

void num_store_i(ElemType t, void *buf, int64_t start, int64_t n, const int64_t *in)
{
    for (int64_t k = 0; k < n; k++) num_set_i(t, buf, start + k, in[k]);
}

/* ---------------------------------------------------------------- unary */

static bool unary_f(HloOpcode op, const double *a, double *r, int64_t n)
{
    for (int64_t k = 0; k < n; k++) {
        double x = a[k], y;
        switch (op) {
        case HLO_COPY: case HLO_REAL: y = x; break;
        case HLO_IMAG: y = 0; break;
        case HLO_ABS: y = fabs(x); break;
        case HLO_NEGATE: y = -x; break;
        case HLO_EXP: y = exp(x); break;
        case HLO_EXPM1: y = expm1(x); break;
        case HLO_LOG: y = log(x); break;
        case HLO_LOG1P: y = log1p(x); break;
        case HLO_SQRT: y = sqrt(x); break;
        case HLO_RSQRT: y = 1.0 / sqrt(x); break;
        case HLO_CBRT: y = cbrt(x); break;
        case HLO_TANH: y = tanh(x); break;
        case HLO_LOGISTIC: y = 1.0 / (1.0 + exp(-x)); break;
        case HLO_SINE: y = sin(x); break;
        case HLO_COSINE: y = cos(x); break;
        case HLO_TAN: y = tan(x); break;
        case HLO_ERF: y = erf(x); break;
        case HLO_FLOOR: y = floor(x); break;
        case HLO_CEIL: y = ceil(x); break;
        case HLO_ROUND_AFZ: y = round(x); break;
        case HLO_ROUND_EVEN: y = nearbyint(x); break;
        case HLO_SIGN: y = isnan(x) ? x : x > 0 ? 1.0 : x < 0 ? -1.0 : x; break;
        case HLO_IS_FINITE: y = isfinite(x) ? 1 : 0; break;
        default: return false;
        }
        r[k] = y;
    }
    return true;
}

static int popcount64(uint64_t u)
{
    int c = 0;
    for (; u; u &= u - 1) c++;
    return c;
}

static bool unary_i(HloOpcode op, ElemType t, const int64_t *a, int64_t *r, int64_t n)
{
    int b = elem_type_bits(t);
    bool uns = !elem_type_is_signed_int(t);
    uint64_t mask = b >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << b) - 1);
    for (int64_t k = 0; k < n; k++) {
        int64_t x = a[k], y;
        uint64_t u = (uint64_t)x & mask;
        bool neg = !uns && x < 0;
        switch (op) {
        case HLO_COPY: y = x; break;
        case HLO_ABS: y = neg ? (int64_t)(0 - (uint64_t)x) : x; break;
        case HLO_NEGATE: y = (int64_t)(0 - (uint64_t)x); break;
        case HLO_SIGN: y = neg ? -1 : x != 0; break;
        case HLO_NOT: y = t == ET_PRED ? !x : (int64_t)~(uint64_t)x; break;
        case HLO_POPCNT: y = popcount64(u); break;
        case HLO_CLZ: {
            int z = 0;
            for (int i = b - 1; i >= 0 && !((u >> i) & 1); i--) z++;
            y = z;
            break;
        }
        default: return false;
        }
        r[k] = y;
    }
    return true;
}

/* x's bits (a format of `eb` exponent and `mb` mantissa bits, held in the
 * low bits of u) rounded to exponent_bits and mantissa_bits, XLA's
 * algorithm (the evaluator's ReducePrecision). */
static uint64_t reduce_bits(uint64_t u, int eb, int mb, int64_t exponent_bits, int64_t mantissa_bits)
{
    uint64_t exp_mask = (((uint64_t)1 << eb) - 1) << mb, man_mask = ((uint64_t)1 << mb) - 1;
    bool nan = (u & exp_mask) == exp_mask && (u & man_mask) != 0;
    uint64_t x = u;
    if (mantissa_bits < mb) {
        int shift = mb - (int)mantissa_bits;
        uint64_t last = (uint64_t)1 << shift;
        uint64_t bias = (last >> 1) - 1 + ((x & last) >> shift);
        x = (x + bias) & ~(last - 1);
    }
    if (exponent_bits < eb) {
        uint64_t sign = (uint64_t)1 << (eb + mb);
        uint64_t ebias = ((uint64_t)1 << (eb - 1)) - 1;
        uint64_t rbias = exponent_bits > 0 ? ((uint64_t)1 << (exponent_bits - 1)) - 1 : 0;
        uint64_t e = x & exp_mask;
        if (e > (ebias + rbias) << mb)
            x = (x & sign) | exp_mask;
        else if (e <= (ebias - rbias) << mb)
            x = x & sign;
    }
    if (nan)
        x = mantissa_bits > 0 ? u : (u & ~man_mask);
    return x;
}

bool num_reduce_precision(ElemType t, const void *a, void *r, int64_t n, int64_t exponent_bits,
                          int64_t mantissa_bits)
{
    int eb, mb; /* the element type's own widths: only narrower ones change a value */
    switch (t) {
    case ET_F16: eb = 5; mb = 10; break;
    case ET_BF16: eb = 8; mb = 7; break;
    case ET_F32: eb = 8; mb = 23; break;
    case ET_F64: eb = 11; mb = 52; break;
    default: return false;
    }
    if (exponent_bits > eb) exponent_bits = eb;
    if (mantissa_bits > mb) mantissa_bits = mb;
    int bytes = (1 + eb + mb) / 8; /* each element's own encoding, rounded in place */
    for (int64_t k = 0; k < n; k++) {
        uint64_t u = 0;
        memcpy(&u, (const char *)a + bytes * k, (size_t)bytes); /* little-endian hosts */
        u = reduce_bits(u, eb, mb, exponent_bits, mantissa_bits);
        memcpy((char *)r + bytes * k, &u, (size_t)bytes);
    }
    return true;
}

bool num_unary(HloOpcode op, ElemType t, const void *a, ElemType rt, void *r, int64_t n)
{
    if (op == HLO_IS_FINITE && !num_is_float(t)) return false;
    if (num_is_float(t)) {
        double A[CHUNK];
        for (int64_t s = 0; s < n; s += CHUNK) {
            int64_t m = n - s < CHUNK ? n - s : CHUNK;
            num_load_f(t, a, s, m, A);
            if (!unary_f(op, A, A, m)) return false;
            num_store_f(rt, r, s, m, A);
        }
        return true;
    }
    int64_t A[CHUNK];
    for (int64_t s = 0; s < n; s += CHUNK) {
        int64_t m = n - s < CHUNK ? n - s : CHUNK;
        num_load_i(t, a, s, m, A);
        if (!unary_i(op, t, A, A, m)) return false;
        num_store_i(rt, r, s, m, A);
    }
    return true;
}

/* ---------------------------------------------------------------- binary */

static double fmax_nan(double x, double y) { return isnan(x) || isnan(y) ? NAN : x > y ? x : y; }
static double fmin_nan(double x, double y) { return isnan(x) || isnan(y) ? NAN : x < y ? x : y; }

static bool binary_f(HloOpcode op, const double *a, const double *b, double *r, int64_t n)
{
    int64_t k;
    switch (op) {
    case HLO_ADD: for (k = 0; k < n; k++) r[k] = a[k] + b[k]; break;
    case HLO_SUBTRACT: for (k = 0; k < n; k++) r[k] = a[k] - b[k]; break;
    case HLO_MULTIPLY: for (k = 0; k < n; k++) r[k] = a[k] * b[k]; break;
    case HLO_DIVIDE: for (k = 0; k < n; k++) r[k] = a[k] / b[k]; break;
    case HLO_REMAINDER: for (k = 0; k < n; k++) r[k] = fmod(a[k], b[k]); break;
    case HLO_MAXIMUM: for (k = 0; k < n; k++) r[k] = fmax_nan(a[k], b[k]); break;
    case HLO_MINIMUM: for (k = 0; k < n; k++) r[k] = fmin_nan(a[k], b[k]); break;
    case HLO_POWER: for (k = 0; k < n; k++) r[k] = pow(a[k], b[k]); break;
    case HLO_ATAN2: for (k = 0; k < n; k++) r[k] = atan2(a[k], b[k]); break;
    default: return false;
    }
    return true;
}

static int64_t ipow(int64_t base, int64_t e, bool uns)
{
    if (!uns && e < 0) return base == 1 ? 1 : 0;
    uint64_t r = 1, x = (uint64_t)base, ee = (uint64_t)e;
    for (; ee; ee >>= 1) {
        if (ee & 1) r *= x;
        x *= x;
    }
    return (int64_t)r;
}

static int64_t idiv(int64_t x, int64_t y, bool uns, bool rem)
{
    if (y == 0) return rem ? x : -1;
    if (uns) return (int64_t)(rem ? (uint64_t)x % (uint64_t)y : (uint64_t)x / (uint64_t)y);
    if (y == -1) return rem ? 0 : (int64_t)(0 - (uint64_t)x);
    return rem ? x % y : x / y;
}

static int64_t ishift(HloOpcode op, ElemType t, int64_t x, int64_t y)
{
    int b = elem_type_bits(t);
    uint64_t mask = b >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << b) - 1);
    uint64_t amt = (uint64_t)y & mask;
    if (amt >= (uint64_t)b) return op == HLO_SHIFT_RIGHT_ARITHMETIC && x < 0 ? -1 : 0;
    if (op == HLO_SHIFT_LEFT) return (int64_t)((uint64_t)x << amt);
    if (op == HLO_SHIFT_RIGHT_LOGICAL) return (int64_t)(((uint64_t)x & mask) >> amt);
    return x < 0 ? ~(~x >> amt) : x >> amt;
}

static bool binary_i(HloOpcode op, ElemType t, const int64_t *a, const int64_t *b, int64_t *r, int64_t n)
{
    bool uns = elem_type_is_unsigned_int(t);
    for (int64_t k = 0; k < n; k++) {
        int64_t x = a[k], y = b[k], z;
        bool lt = uns ? (uint64_t)x < (uint64_t)y : x < y;
        switch (op) {
        case HLO_ADD: z = (int64_t)((uint64_t)x + (uint64_t)y); break;
        case HLO_SUBTRACT: z = (int64_t)((uint64_t)x - (uint64_t)y); break;
        case HLO_MULTIPLY: z = (int64_t)((uint64_t)x * (uint64_t)y); break;
        case HLO_DIVIDE: z = idiv(x, y, uns, false); break;
        case HLO_REMAINDER: z = idiv(x, y, uns, true); break;
        case HLO_MAXIMUM: z = lt ? y : x; break;
        case HLO_MINIMUM: z = lt ? x : y; break;
        case HLO_POWER: z = ipow(x, y, uns); break;
        case HLO_AND: z = x & y; break;
        case HLO_OR: z = x | y; break;
        case HLO_XOR: z = x ^ y; break;
        case HLO_SHIFT_LEFT: case HLO_SHIFT_RIGHT_ARITHMETIC: case HLO_SHIFT_RIGHT_LOGICAL:
            if (t == ET_PRED) return false;
            z = ishift(op, t, x, y);
            break;
        default: return false;
        }
        r[k] = z;
    }
    return true;
}

double num_apply_f(HloOpcode op, ElemType t, double a, double b)
{
    double r = 0;
    binary_f(op, &a, &b, &r, 1);
    return num_round(t, r);
}

int64_t num_apply_i(HloOpcode op, ElemType t, int64_t a, int64_t b)
{
    int64_t r = 0;
    binary_i(op, t, &a, &b, &r, 1);
    return num_wrap(t, r);
}

bool num_binary_ok(HloOpcode op, ElemType t)
{
    double d = 1;
    int64_t i = 1;
    if (num_is_float(t)) return binary_f(op, &d, &d, &d, 1);
    return num_type_supported(t) && t != ET_TOKEN && binary_i(op, t, &i, &i, &i, 1);
}

bool num_binary(HloOpcode op, ElemType t, const void *a, const void *b, void *r, int64_t n)
{
    if (!num_binary_ok(op, t)) return false;
    if (num_is_float(t)) {
        if (t == ET_F32 && op == HLO_ADD) { /* the hot path of all-reduce / reduce */
            const char *pa = a, *pb = b;
            char *pr = r;
            for (int64_t k = 0; k < n; k++) {
                float x, y;
                memcpy(&x, pa + 4 * k, 4);
                memcpy(&y, pb + 4 * k, 4);
                x += y;
                memcpy(pr + 4 * k, &x, 4);
            }
            return true;
        }
        double A[CHUNK], B[CHUNK];
        for (int64_t s = 0; s < n; s += CHUNK) {
            int64_t m = n - s < CHUNK ? n - s : CHUNK;
            num_load_f(t, a, s, m, A);
            num_load_f(t, b, s, m, B);
            binary_f(op, A, B, A, m);
            num_store_f(t, r, s, m, A);
        }
        return true;
    }
    int64_t A[CHUNK], B[CHUNK];
    for (int64_t s = 0; s < n; s += CHUNK) {
        int64_t m = n - s < CHUNK ? n - s : CHUNK;
        num_load_i(t, a, s, m, A);
        num_load_i(t, b, s, m, B);
        binary_i(op, t, A, B, A, m);
        num_store_i(t, r, s, m, A);
    }
    return true;
}

/* ---------------------------------------------------------------- compare, convert */

static bool cmp_result(CompareDir dir, int c, bool unordered)
{
    if (unordered) return dir == CMP_NE;
    switch (dir) {
    case CMP_EQ: return c == 0;
    case CMP_NE: return c != 0;
    case CMP_LT: return c < 0;
    case CMP_LE: return c <= 0;
    case CMP_GT: return c > 0;
    case CMP_GE: return c >= 0;
    }
    return false;
}

/* Total order key of a double: -NaN < -inf < ... < -0 < +0 < ... < inf < NaN. */
static int64_t total_key(double x)
{
    int64_t b;
    memcpy(&b, &x, 8);
    return b < 0 ? b ^ INT64_MAX : b;
}

void num_compare(CompareDir dir, bool total, ElemType t, const void *a, const void *b, uint8_t *r, int64_t n)
{
    if (num_is_float(t)) {
        for (int64_t k = 0; k < n; k++) {
            double x = num_get_f(t, a, k), y = num_get_f(t, b, k);
            if (total) {
                int64_t kx = total_key(x), ky = total_key(y);
                r[k] = cmp_result(dir, kx < ky ? -1 : kx > ky, false);
            } else {
                r[k] = cmp_result(dir, x < y ? -1 : x > y, isnan(x) || isnan(y));
            }
        }
        return;
    }
    bool uns = elem_type_is_unsigned_int(t);
    for (int64_t k = 0; k < n; k++) {
        int64_t x = num_get_i(t, a, k), y = num_get_i(t, b, k);
        int c = uns ? ((uint64_t)x < (uint64_t)y ? -1 : (uint64_t)x > (uint64_t)y)
                    : (x < y ? -1 : x > y);
        r[k] = cmp_result(dir, c, false);
    }
}

void num_convert(ElemType from, const void *a, ElemType to, void *r, int64_t n)
{
    if (num_is_float(from)) {
        double A[CHUNK];
        for (int64_t s = 0; s < n; s += CHUNK) {
            int64_t m = n - s < CHUNK ? n - s : CHUNK;
            num_load_f(from, a, s, m, A);
            num_store_f(to, r, s, m, A); /* floats round, integers saturate */
        }
        return;
    }
    for (int64_t k = 0; k < n; k++) {
        int64_t x = num_get_i(from, a, k);
        if (!num_is_float(to)) {
            num_set_i(to, r, k, from == ET_PRED ? x : to == ET_PRED ? x != 0 : x);
        } else if (to == ET_F32 && (x > ((int64_t)1 << 53) || x < -((int64_t)1 << 53) || from == ET_U64)) {
            float f = from == ET_U64 ? (float)(uint64_t)x : (float)x; /* one rounding */
            num_set_f(to, r, k, f);
        } else {
            num_set_f(to, r, k, num_i2f(from, x));
        }
    }
}

/* ---------------------------------------------------------------- copies */

void num_strides(const int64_t *dims, int32_t rank, int64_t *strides)
{
    int64_t s = 1;
    for (int32_t d = rank - 1; d >= 0; d--) {
        strides[d] = s;
        s *= dims[d];
    }
}

static void copy_row(char *dst, int64_t ds, const char *src, int64_t ss, int64_t n, int es)
{
    if (ds == 1 && ss == 1) {
        memcpy(dst, src, (size_t)(n * es));
        return;
    }
    switch (es) {
    case 1: for (int64_t k = 0; k < n; k++) dst[k * ds] = src[k * ss]; break;
    case 2: for (int64_t k = 0; k < n; k++) memcpy(dst + 2 * k * ds, src + 2 * k * ss, 2); break;
    case 4: for (int64_t k = 0; k < n; k++) memcpy(dst + 4 * k * ds, src + 4 * k * ss, 4); break;
    case 8: for (int64_t k = 0; k < n; k++) memcpy(dst + 8 * k * ds, src + 8 * k * ss, 8); break;
    default: for (int64_t k = 0; k < n; k++) memcpy(dst + es * k * ds, src + es * k * ss, (size_t)es); break;
    }
}

void num_copy_box(void *dst, int64_t dst_off, const int64_t *dst_stride, const void *src, int64_t src_off,
                  const int64_t *src_stride, const int64_t *dims, int32_t rank, int es)
{
    if (es <= 0) return;
    for (int32_t d = 0; d < rank; d++)
        if (dims[d] <= 0) return;
    char *D = (char *)dst;
    const char *S = (const char *)src;
    if (rank == 0) {
        memcpy(D + dst_off * es, S + src_off * es, (size_t)es);
        return;
    }
    int64_t idx[SPMDC_MAX_RANK] = {0};
    int32_t last = rank - 1;
    for (;;) {
        copy_row(D + dst_off * es, dst_stride[last], S + src_off * es, src_stride[last], dims[last], es);
        int32_t d = last - 1;
        for (; d >= 0; d--) {
            idx[d]++;
            dst_off += dst_stride[d];
            src_off += src_stride[d];
            if (idx[d] < dims[d]) break;
            dst_off -= dst_stride[d] * dims[d];
            src_off -= src_stride[d] * dims[d];
            idx[d] = 0;
        }
        if (d < 0) return;
    }
}

void num_fill(void *dst, int64_t n, const void *elem, int es)
{
    char *D = (char *)dst;
    if (es <= 0 || n <= 0) return;
    bool zero = true;
    for (int k = 0; k < es; k++)
        if (((const char *)elem)[k]) zero = false;
    if (zero) {
        memset(D, 0, (size_t)(n * es));
        return;
    }
    for (int64_t k = 0; k < n; k++) memcpy(D + k * es, elem, (size_t)es);
}
