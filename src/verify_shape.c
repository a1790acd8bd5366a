/* verify_shape.c - shape inference, one rule per opcode (the half of verify
 * that knows the opcodes; verify.c drives it, verify_internal.h is shared).
 *
 * The result shape of an instruction is inferred from its operands and
 * attributes with XLA's rules (xla/service/shape_inference.cc, plus the HLO
 * verifier's "no implicit broadcast"): elementwise ops, data movement, dot
 * and convolution, reductions and windows, gather/scatter, sort and map,
 * tuples and control flow, collectives (group sizes from replica_groups,
 * channel_id and use_global_device_ids).  Called computations are checked
 * against the parameters and result the caller needs.  A failure is one
 * message in the caller's buffer, naming operands and attributes.
 *
 * verify_infer_shape is the inference alone.  It has no side effect except
 * that tuple results get their element arrays from the module arena, so other
 * passes use it to build new instructions.  Standalone inference scans a
 * callee once per use (verify_module passes prebuilt parameter tables).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "verify_internal.h"

/* ------------------------------------------------------------ small helpers */

static bool fail(Infer *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(Infer *x, const char *fmt, ...)
{
    if (x->err && x->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(x->err, x->errlen, fmt, ap);
        va_end(ap);
    }
    return false;
}

static Arena *tmp_arena(Infer *x)
{
    if (!x->tmp) {
        x->tmp = arena_create();
        x->own_tmp = true;
    }
    return x->tmp;
}

static int64_t cmul(Infer *x, int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r)) {
        x->overflow = true;
        return 0;
    }
    return r;
}

static int64_t cadd(Infer *x, int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r)) {
        x->overflow = true;
        return 0;
    }
    return r;
}

static bool is_value_type(ElemType t) { return type_ok(t) && t != ET_TOKEN && t != ET_OPAQUE; }

static bool same_dims(const Shape *a, const Shape *b)
{
    if (a->rank != b->rank) return false;
    for (int32_t d = 0; d < a->rank; d++)
        if (a->dims[d] != b->dims[d]) return false;
    return true;
}

static char *next_sbuf(Infer *x) { return x->sbuf[x->nsbuf++ % SBUF_N]; }

/* The shape as text, in a ring buffer valid for the next SBUF_N-1 calls. */
static const char *shs(Infer *x, const Shape *s)
{
    char *buf = next_sbuf(x);
    StrBuf b = {0};
    verify_put_shape(&b, s, 0);
    snprintf(buf, SBUF_LEN, "%s", sb_cstr(&b));
    sb_free(&b);
    return buf;
}

static const char *ils(Infer *x, const IntList *l)
{
    char *buf = next_sbuf(x);
    StrBuf b = {0};
    sb_int_list(&b, l->v, l->n, "{", ",", "}");
    snprintf(buf, SBUF_LEN, "%s", sb_cstr(&b));
    sb_free(&b);
    return buf;
}

static const char *opcode(const Infer *x) { return hlo_opcode_name(x->in->op); }
static const HloInst *opi(const Infer *x, int32_t k) { return &x->comp->insts[x->in->operands[k]]; }
static const Shape *ops(const Infer *x, int32_t k) { return opi(x, k)->shape; }
static const char *opn(const Infer *x, int32_t k) { return opi(x, k)->name ? opi(x, k)->name : "?"; }

static Shape arr(ElemType t, const Shape *like) { return shape_array(t, like->rank, like->dims); }

/* A copy of s without layout (tuples share their elements). */
static Shape plain(const Shape *s)
{
    Shape r = *s;
    r.has_layout = false;
    r.layout_tail = NULL;
    return r;
}

static Shape tuple_in(Arena *a, const Shape *elems, int32_t n)
{
    Shape s;
    memset(&s, 0, sizeof s);
    s.type = ET_TUPLE;
    s.n_elems = n;
    if (n > 0) {
        s.elems = ARENA_ARRAY(a, Shape, n);
        memcpy(s.elems, elems, sizeof(Shape) * (size_t)n);
    }
    return s;
}

/* A result tuple (elements in the output arena). */
static Shape tuple_of(Infer *x, const Shape *elems, int32_t n) { return tuple_in(x->out, elems, n); }

/* One array, or a tuple of the n shapes when n != 1. */
static Shape one_or_tuple(Infer *x, const Shape *elems, int32_t n)
{
    return n == 1 ? elems[0] : tuple_of(x, elems, n);
}

static int64_t elem_count(Infer *x, const Shape *s)
{
    int64_t n = 1;
    for (int32_t d = 0; d < s->rank; d++) n = cmul(x, n, s->dims[d]);
    return n;
}

static ElemType component_type(ElemType t) { return t == ET_C128 ? ET_F64 : t == ET_C64 ? ET_F32 : t; }

/* Operand k must be an array of a numeric or pred element type. */
static bool want_array(Infer *x, int32_t k)
{
    const Shape *s = ops(x, k);
    if (s->type == ET_TUPLE)
        return fail(x, "operand %d (%s) is a tuple %s; %s takes arrays", k, opn(x, k), shs(x, s), opcode(x));
    if (!is_value_type(s->type))
        return fail(x, "operand %d (%s) has element type %s, which %s does not accept", k, opn(x, k),
                    elem_type_name(s->type), opcode(x));
    return true;
}

static bool want_scalar(Infer *x, int32_t k, const char *what)
{
    if (!want_array(x, k)) return false;
    if (ops(x, k)->rank != 0)
        return fail(x, "operand %d (%s), the %s, must be a scalar, got %s", k, opn(x, k), what, shs(x, ops(x, k)));
    return true;
}

/* The declared shape is the result's starting point for ops whose result
 * dims are not a function of their operands (broadcast, reshape, iota). */
static bool want_declared_array(Infer *x)
{
    if (x->in->shape->type == ET_TUPLE || !is_value_type(x->in->shape->type))
        return fail(x, "the result of %s must be an array, declared %s", opcode(x), shs(x, x->in->shape));
    return true;
}

/* Each entry of l is a dimension of a rank-`rank` shape (whose = "operand",
 * "result", ...), none repeated, optionally ascending.  Sets *mask. */
static bool dim_list(Infer *x, const char *attr, const IntList *l, int32_t rank, const char *whose, bool sorted,
                     uint32_t *mask)
{
    uint32_t seen = 0;
    for (int32_t k = 0; k < l->n; k++) {
        int64_t v = l->v[k];
        if (v < 0 || v >= rank)
            return fail(x, "%s=%s: %lld is not a dimension of the rank-%d %s", attr, ils(x, l), (long long)v, rank,
                        whose);
        if (seen & (1u << v)) return fail(x, "%s=%s repeats dimension %lld", attr, ils(x, l), (long long)v);
        if (sorted && k > 0 && v < l->v[k - 1])
            return fail(x, "%s=%s must be in ascending order", attr, ils(x, l));
        seen |= 1u << v;
    }
    if (mask) *mask = seen;
    return true;
}

/* ------------------------------------------------------ called computations */

static bool callee_exists(Infer *x, const char *role, int32_t c)
{
    if (c < 0) return fail(x, "%s needs a %s computation", opcode(x), role);
    if (c >= x->m->n_comps) return fail(x, "%s computation index %d does not exist", role, c);
    const HloComputation *cc = &x->m->comps[c];
    if (cc->root < 0 || cc->root >= cc->n_insts) return fail(x, "%s computation %s has no ROOT", role, cc->name);
    return true;
}

static const int32_t *param_table(Infer *x, int32_t c, int32_t *n)
{
    if (x->ptab) {
        *n = x->pcount[c];
        return x->ptab[c];
    }
    return verify_param_table(&x->m->comps[c], tmp_arena(x), n);
}

/* Computation c takes exactly the parameters want[0..n) and, if ret is not
 * NULL, its ROOT has shape ret. */
static bool check_callee(Infer *x, const char *role, int32_t c, const Shape *want, int32_t n, const Shape *ret)
{
    if (!callee_exists(x, role, c)) return false;
    const HloComputation *cc = &x->m->comps[c];
    int32_t np;
    const int32_t *tab = param_table(x, c, &np);
    if (np != n)
        return fail(x, "%s computation %s takes %d parameter%s, expected %d", role, cc->name, np, np == 1 ? "" : "s",
                    n);
    for (int32_t k = 0; k < n; k++) {
        if (tab[k] < 0) return fail(x, "%s computation %s has no parameter %d", role, cc->name, k);
        const Shape *p = cc->insts[tab[k]].shape;
        if (!verify_same_shape(p, &want[k]))
            return fail(x, "%s computation %s: parameter %d is %s, expected %s", role, cc->name, k, shs(x, p),
                        shs(x, &want[k]));
    }
    const Shape *root = cc->insts[cc->root].shape;
    if (ret && !verify_same_shape(root, ret))
        return fail(x, "%s computation %s returns %s, expected %s", role, cc->name, shs(x, root), shs(x, ret));
    return true;
}

/* A reduction over n values with element types types[0..n): the reducer
 * takes 2n scalars (n accumulators, then n values) and returns n scalars (a
 * tuple when n > 1). */
static bool check_reducer(Infer *x, const char *role, int32_t c, const ElemType *types, int32_t n)
{
    Shape *want = ARENA_ARRAY(tmp_arena(x), Shape, 2 * n);
    for (int32_t k = 0; k < n; k++) want[k] = want[n + k] = shape_scalar(types[k]);
    Shape ret = n == 1 ? want[0] : tuple_in(tmp_arena(x), want, n);
    return check_callee(x, role, c, want, 2 * n, &ret);
}

/* ------------------------------------------------------------- elementwise */

static bool unary_type_ok(HloOpcode op, ElemType t, const char **want)
{
    bool f = elem_type_is_float(t), c = elem_type_is_complex(t), i = elem_type_is_integral(t);
    bool s = elem_type_is_signed_int(t);
    switch (op) {
    case HLO_FLOOR: case HLO_CEIL: case HLO_ROUND_AFZ: case HLO_ROUND_EVEN: case HLO_ERF: case HLO_IS_FINITE:
    case HLO_REDUCE_PRECISION:
        *want = "a floating-point";
        return f;
    case HLO_EXP: case HLO_EXPM1: case HLO_LOG: case HLO_LOG1P: case HLO_SQRT: case HLO_RSQRT: case HLO_CBRT:
    case HLO_TANH: case HLO_LOGISTIC: case HLO_SINE: case HLO_COSINE: case HLO_TAN: case HLO_REAL: case HLO_IMAG:
        *want = "a floating-point or complex";
        return f || c;
    case HLO_ABS: case HLO_SIGN:
        *want = "a signed integer, floating-point or complex";
        return s || f || c;
    case HLO_NEGATE:
        *want = "an integer, floating-point or complex";
        return i || f || c;
    case HLO_CLZ: case HLO_POPCNT:
        *want = "an integer";
        return i;
    case HLO_NOT:
        *want = "a pred or integer";
        return i || t == ET_PRED;
    default:
        return true;
    }
}

static bool infer_convert(Infer *x, const Shape *s, Shape *o)
{
    ElemType to = x->in->shape->type;
    if (to == ET_TUPLE || !is_value_type(to))
        return fail(x, "convert needs an array result of a numeric type, declared %s", shs(x, x->in->shape));
    if (elem_type_is_complex(s->type) && !elem_type_is_complex(to))
        return fail(x, "convert from complex %s to real %s is not defined (use real/imag)", elem_type_name(s->type),
                    elem_type_name(to));
    *o = arr(to, s);
    return true;
}

/* Same bit width: same dims.  Narrower result: a new minor dim of
 * in_bits/out_bits.  Wider result: the operand's minor dim must be
 * out_bits/in_bits and disappears. */
static bool infer_bitcast_convert(Infer *x, const Shape *s, Shape *o)
{
    ElemType to = x->in->shape->type;
    if (to == ET_TUPLE || !is_value_type(to))
        return fail(x, "bitcast-convert needs an array result of a numeric type, declared %s", shs(x, x->in->shape));
    if (elem_type_is_complex(s->type) != elem_type_is_complex(to))
        return fail(x, "bitcast-convert between complex and real types (%s to %s) is not defined",
                    elem_type_name(s->type), elem_type_name(to));
    /* XLA counts pred as one bit (StableHLO's i1), spmdc stores it in a byte:
     * no bit width is common to both, so pred only bitcasts to itself */
    if ((s->type == ET_PRED) != (to == ET_PRED))
        return fail(x, "bitcast-convert between pred and another type (%s to %s) is not supported: XLA counts pred "
                    "as one bit", elem_type_name(s->type), elem_type_name(to));
    int bi = elem_type_bits(s->type), bo = elem_type_bits(to);
    *o = arr(to, s);
    if (bi > bo) {
        if (bi % bo) return fail(x, "bitcast-convert from %s to %s: bit widths do not divide", elem_type_name(s->type),
                                 elem_type_name(to));
        if (s->rank >= SPMDC_MAX_RANK) return fail(x, "bitcast-convert would need a rank above %d", SPMDC_MAX_RANK);
        o->dims[o->rank++] = bi / bo;
    } else if (bi < bo) {
        if (bo % bi || s->rank == 0 || s->dims[s->rank - 1] != bo / bi)
            return fail(x, "bitcast-convert from %s to %s needs a minor dimension of size %d, got %s",
                        elem_type_name(s->type), elem_type_name(to), bi ? bo / bi : 0, shs(x, s));
        o->rank--;
    }
    return true;
}

static bool infer_unary(Infer *x, Shape *o)
{
    HloOpcode op = x->in->op;
    const Shape *s = ops(x, 0);
    if (op == HLO_COPY) {
        *o = plain(s);
        return true;
    }
    if (!want_array(x, 0)) return false;
    if (op == HLO_CONVERT) return infer_convert(x, s, o);
    if (op == HLO_BITCAST_CONVERT) return infer_bitcast_convert(x, s, o);
    const char *want = "";
    if (!unary_type_ok(op, s->type, &want))
        return fail(x, "%s expects %s operand, got %s", opcode(x), want, shs(x, s));
    ElemType t = s->type;
    if (op == HLO_IS_FINITE) t = ET_PRED;
    if (op == HLO_REAL || op == HLO_IMAG || op == HLO_ABS) t = component_type(t);
    *o = arr(t, s);
    return true;
}

/* Operands k0 and k of an elementwise op: same dims (HLO has no implicit
 * broadcast) and, if same_type, the same element type. */
static bool same_as(Infer *x, int32_t k0, int32_t k, bool same_type)
{
    const Shape *a = ops(x, k0), *b = ops(x, k);
    if (!same_dims(a, b))
        return fail(x, "operand %d (%s) is %s but operand %d (%s) is %s; %s needs equal dimensions (HLO has no "
                    "implicit broadcast)", k, opn(x, k), shs(x, b), k0, opn(x, k0), shs(x, a), opcode(x));
    if (same_type && a->type != b->type)
        return fail(x, "operand %d (%s) has element type %s but operand %d (%s) has %s", k, opn(x, k),
                    elem_type_name(b->type), k0, opn(x, k0), elem_type_name(a->type));
    return true;
}

static bool infer_binary(Infer *x, Shape *o)
{
    HloOpcode op = x->in->op;
    if (!want_array(x, 0) || !want_array(x, 1) || !same_as(x, 0, 1, true)) return false;
    const Shape *s = ops(x, 0);
    ElemType t = s->type;
    bool ok = true;
    const char *want = "";
    switch (op) {
    case HLO_AND: case HLO_OR: case HLO_XOR:
        ok = t == ET_PRED || elem_type_is_integral(t), want = "pred or integer";
        break;
    case HLO_SHIFT_LEFT: case HLO_SHIFT_RIGHT_ARITHMETIC: case HLO_SHIFT_RIGHT_LOGICAL:
        ok = elem_type_is_integral(t), want = "integer";
        break;
    case HLO_ATAN2:
        ok = elem_type_is_float(t) || elem_type_is_complex(t), want = "floating-point or complex";
        break;
    case HLO_SUBTRACT: case HLO_DIVIDE: case HLO_REMAINDER: case HLO_POWER: /* StableHLO's verifier: not on pred */
        ok = t != ET_PRED, want = "integer, floating-point or complex";
        break;
    case HLO_COMPLEX:
        ok = t == ET_F32 || t == ET_F64, want = "f32 or f64";
        t = t == ET_F64 ? ET_C128 : ET_C64;
        break;
    case HLO_COMPARE: {
        /* XLA's verifier: signed integers compare as SIGNED, unsigned ones and
         * pred as UNSIGNED, floating point as FLOAT or TOTALORDER, complex as
         * FLOAT. */
        const char *ct = hlo_attrs(x->in)->compare_type;
        bool fp = elem_type_is_float(t);
        const char *want_ct = elem_type_is_signed_int(t) ? "SIGNED"
                              : elem_type_is_unsigned_int(t) || t == ET_PRED ? "UNSIGNED"
                              : elem_type_is_complex(t) || fp ? "FLOAT"
                                                              : NULL;
        if (ct && want_ct && strcmp(ct, want_ct) != 0 && !(fp && strcmp(ct, "TOTALORDER") == 0))
            return fail(x, "compare of %s operands takes type=%s%s, not type=%s", elem_type_name(t), want_ct,
                        fp ? " or type=TOTALORDER" : "", ct);
        t = ET_PRED;
        break;
    }
    default:
        break;
    }
    if (!ok) return fail(x, "%s expects %s operands, got %s", opcode(x), want, shs(x, s));
    *o = arr(t, s);
    return true;
}

/* select(pred, on_true, on_false); clamp(min, operand, max). */
static bool infer_ternary(Infer *x, Shape *o)
{
    for (int32_t k = 0; k < 3; k++)
        if (!want_array(x, k)) return false;
    if (x->in->op == HLO_SELECT) {
        if (ops(x, 0)->type != ET_PRED)
            return fail(x, "the predicate of select, operand 0 (%s), must be pred, got %s", opn(x, 0),
                        shs(x, ops(x, 0)));
        if (!same_as(x, 1, 2, true)) return false;
        if (ops(x, 0)->rank != 0 && !same_as(x, 1, 0, false)) return false;
        *o = arr(ops(x, 1)->type, ops(x, 1));
        return true;
    }
    for (int32_t k = 0; k < 3; k += 2) {
        if (ops(x, k)->type != ops(x, 1)->type)
            return fail(x, "the %s bound, operand %d (%s), is %s but the operand has element type %s",
                        k ? "upper" : "lower", k, opn(x, k), shs(x, ops(x, k)), elem_type_name(ops(x, 1)->type));
        if (ops(x, k)->rank != 0 && !same_as(x, 1, k, false)) return false;
    }
    *o = arr(ops(x, 1)->type, ops(x, 1));
    return true;
}

/* ------------------------------------------------------------ data movement */

static bool infer_broadcast(Infer *x, Shape *o)
{
    const Shape *s = ops(x, 0), *d = x->in->shape;
    const IntList *l = &x->a->dimensions;
    if (!want_array(x, 0) || !want_declared_array(x)) return false;
    if (l->n != s->rank)
        return fail(x, "dimensions=%s has %d entries but the operand %s has rank %d", ils(x, l), l->n, shs(x, s),
                    s->rank);
    if (!dim_list(x, "dimensions", l, d->rank, "result", false, NULL)) return false;
    *o = arr(s->type, d);
    for (int32_t k = 0; k < l->n; k++) o->dims[l->v[k]] = s->dims[k];
    return true;
}

static bool infer_reshape(Infer *x, Shape *o)
{
    const Shape *s = ops(x, 0), *d = x->in->shape;
    if (!want_array(x, 0) || !want_declared_array(x)) return false;
    int64_t ni = elem_count(x, s), no = elem_count(x, d);
    if (x->in->op == HLO_BITCAST) {
        if (shape_byte_size(s) != shape_byte_size(d))
            return fail(x, "bitcast cannot change the byte size: operand %s has %lld bytes, result %s has %lld",
                        shs(x, s), (long long)shape_byte_size(s), shs(x, d), (long long)shape_byte_size(d));
        *o = plain(d);
        return true;
    }
    if (ni != no)
        return fail(x, "reshape cannot change the element count: operand %s has %lld elements, result %s has %lld",
                    shs(x, s), (long long)ni, shs(x, d), (long long)no);
    *o = arr(s->type, d);
    return true;
}

static bool infer_transpose(Infer *x, Shape *o)
{
    const Shape *s = ops(x, 0);
    const IntList *l = &x->a->dimensions;
    if (!want_array(x, 0)) return false;
    if (l->n != s->rank)
        return fail(x, "dimensions=%s is not a permutation of the %d dimensions of %s", ils(x, l), s->rank,
                    shs(x, s));
    if (!dim_list(x, "dimensions", l, s->rank, "operand", false, NULL)) return false;
    *o = arr(s->type, s);
    for (int32_t k = 0; k < l->n; k++) o->dims[k] = s->dims[l->v[k]];
    return true;
}

static bool infer_slice(Infer *x, Shape *o)
{
    const Shape *s = ops(x, 0);
    const HloAttrs *a = x->a;
    if (!want_array(x, 0)) return false;
    if (a->slice_start.n != s->rank || a->slice_limit.n != s->rank ||
        (a->slice_stride.n != 0 && a->slice_stride.n != s->rank))
        return fail(x, "slice needs one [start:limit:stride] per dimension of %s, got %d", shs(x, s),
                    a->slice_start.n);
    *o = arr(s->type, s);
    for (int32_t d = 0; d < s->rank; d++) {
        int64_t lo = a->slice_start.v[d], hi = a->slice_limit.v[d];
        int64_t st = a->slice_stride.n ? a->slice_stride.v[d] : 1;
        if (lo < 0 || hi > s->dims[d] || lo > hi)
            return fail(x, "slice dimension %d: [%lld:%lld] is not within [0:%lld] of %s", d, (long long)lo,
                        (long long)hi, (long long)s->dims[d], shs(x, s));
        if (st < 1) return fail(x, "slice dimension %d: stride %lld must be positive", d, (long long)st);
        o->dims[d] = (hi - lo) / st + ((hi - lo) % st != 0);
    }
    return true;
}

/* Start indices of dynamic-slice / dynamic-update-slice from operand
 * `first` on: one integer scalar per dimension of a rank-`rank` operand (or
 * the legacy single rank-1 vector), all of one element type. */
static bool start_indices(Infer *x, int32_t first, int32_t rank)
{
    int32_t n = x->in->n_operands - first;
    if (n == 1 && ops(x, first)->rank == 1 && ops(x, first)->dims[0] == rank) { /* legacy vector form */
        if (!want_array(x, first)) return false;
        if (!elem_type_is_integral(ops(x, first)->type))
            return fail(x, "the start indices of %s must be integers, got %s", opcode(x), shs(x, ops(x, first)));
        return true;
    }
    if (n != rank)
        return fail(x, "%s of a rank-%d operand takes %d start indices, got %d", opcode(x), rank, rank, n);
    for (int32_t k = first; k < x->in->n_operands; k++) {
        if (!want_scalar(x, k, "start index")) return false;
        if (!elem_type_is_integral(ops(x, k)->type))
            return fail(x, "start index operand %d (%s) must be an integer, got %s", k, opn(x, k), shs(x, ops(x, k)));
        if (ops(x, k)->type != ops(x, first)->type)
            return fail(x, "start indices have different element types, %s and %s", elem_type_name(ops(x, first)->type),
                        elem_type_name(ops(x, k)->type));
    }
    return true;
}

static bool infer_dynamic_slice(Infer *x, Shape *o)
{
    const Shape *s = ops(x, 0);
    const IntList *l = &x->a->dynamic_slice_sizes;
    if (!want_array(x, 0) || !start_indices(x, 1, s->rank)) return false;
    if (l->n != s->rank)
        return fail(x, "dynamic_slice_sizes=%s needs one size per dimension of %s", ils(x, l), shs(x, s));
    *o = arr(s->type, s);
    for (int32_t d = 0; d < s->rank; d++) {
        if (l->v[d] < 0 || l->v[d] > s->dims[d])
            return fail(x, "dynamic_slice_sizes=%s: size %lld of dimension %d is not within [0, %lld]", ils(x, l),
                        (long long)l->v[d], d, (long long)s->dims[d]);
        o->dims[d] = l->v[d];
    }
    return true;
}

static bool infer_dynamic_update_slice(Infer *x, Shape *o)
{
    const Shape *s = ops(x, 0), *u = ops(x, 1);
    if (!want_array(x, 0) || !want_array(x, 1)) return false;
    if (u->type != s->type || u->rank != s->rank)
        return fail(x, "the update %s does not fit the operand %s (element type and rank must match)", shs(x, u),
                    shs(x, s));
    for (int32_t d = 0; d < s->rank; d++)
        if (u->dims[d] > s->dims[d])
            return fail(x, "the update %s is larger than the operand %s in dimension %d", shs(x, u), shs(x, s), d);
    if (!start_indices(x, 2, s->rank)) return false;
    *o = arr(s->type, s);
    return true;
}

/* Result dim = lo + hi + n + max(n-1, 0) * interior; edges may be negative. */
static bool infer_pad(Infer *x, Shape *o)
{
    const Shape *s = ops(x, 0);
    const HloAttrs *a = x->a;
    if (!want_array(x, 0) || !want_scalar(x, 1, "padding value")) return false;
    if (ops(x, 1)->type != s->type)
        return fail(x, "the padding value %s must have the element type of the operand %s", shs(x, ops(x, 1)),
                    shs(x, s));
    if (a->pad_lo.n != s->rank || a->pad_hi.n != s->rank || (a->pad_interior.n && a->pad_interior.n != s->rank))
        return fail(x, "padding needs one lo_hi[_interior] entry per dimension of %s, got %d", shs(x, s),
                    a->pad_lo.n);
    *o = arr(s->type, s);
    for (int32_t d = 0; d < s->rank; d++) {
        int64_t in = a->pad_interior.n ? a->pad_interior.v[d] : 0, n = s->dims[d];
        if (in < 0) return fail(x, "interior padding %lld of dimension %d is negative", (long long)in, d);
        /* the edges first: a large edge and a negative one of about its size may cancel */
        int64_t r = cadd(x, cadd(x, a->pad_lo.v[d], a->pad_hi.v[d]), n);
        r = cadd(x, r, cmul(x, n > 0 ? n - 1 : 0, in));
        if (x->overflow) return fail(x, "padding of dimension %d of %s overflows 64-bit integers", d, shs(x, s));
        if (r < 0)
            return fail(x, "padding makes dimension %d of %s negative (%lld)", d, shs(x, s), (long long)r);
        o->dims[d] = r;
    }
    return true;
}

static bool infer_concatenate(Infer *x, Shape *o)
{
    const Shape *s = ops(x, 0);
    const IntList *l = &x->a->dimensions;
    if (!want_array(x, 0)) return false;
    if (l->n != 1) return fail(x, "concatenate needs exactly one dimension, got dimensions=%s", ils(x, l));
    if (!dim_list(x, "dimensions", l, s->rank, "operand", false, NULL)) return false;
    int64_t cd = l->v[0];
    *o = arr(s->type, s);
    for (int32_t k = 1; k < x->in->n_operands; k++) {
        const Shape *t = ops(x, k);
        if (!want_array(x, k)) return false;
        if (t->type != s->type || t->rank != s->rank)
            return fail(x, "operand %d (%s) is %s, which cannot be concatenated with %s", k, opn(x, k), shs(x, t),
                        shs(x, s));
        for (int32_t d = 0; d < s->rank; d++)
            if (d != cd && t->dims[d] != s->dims[d])
                return fail(x, "operand %d (%s) is %s but operand 0 is %s: they differ in dimension %d, not only in "
                            "the concatenated dimension %lld", k, opn(x, k), shs(x, t), shs(x, s), d, (long long)cd);
        o->dims[cd] = cadd(x, o->dims[cd], t->dims[cd]);
    }
    return true;
}

static bool infer_reverse(Infer *x, Shape *o)
{
    if (!want_array(x, 0)) return false;
    if (!dim_list(x, "dimensions", &x->a->dimensions, ops(x, 0)->rank, "operand", false, NULL)) return false;
    *o = arr(ops(x, 0)->type, ops(x, 0));
    return true;
}

static bool infer_iota(Infer *x, Shape *o)
{
    const Shape *d = x->in->shape;
    if (!want_declared_array(x)) return false;
    if (d->rank == 0) return fail(x, "iota needs a result of rank >= 1, declared %s", shs(x, d));
    if (!elem_type_is_integral(d->type) && !elem_type_is_float(d->type) && !elem_type_is_complex(d->type))
        return fail(x, "iota needs an integer, floating-point or complex result, declared %s", shs(x, d));
    if (x->a->iota_dimension < 0 || x->a->iota_dimension >= d->rank)
        return fail(x, "iota_dimension=%lld is not a dimension of %s", (long long)x->a->iota_dimension, shs(x, d));
    *o = plain(d);
    return true;
}

/* ------------------------------------------------------ dot and convolution */

/* The batch and contracting dims of one dot operand: in range, disjoint. */
static bool dot_side(Infer *x, const char *side, const IntList *batch, const IntList *contr, int32_t rank,
                     uint32_t *used)
{
    bool lhs = side[0] == 'l';
    const char *bn = lhs ? "lhs_batch_dims" : "rhs_batch_dims";
    const char *cn = lhs ? "lhs_contracting_dims" : "rhs_contracting_dims";
    uint32_t mb, mc;
    if (!dim_list(x, bn, batch, rank, side, false, &mb) || !dim_list(x, cn, contr, rank, side, false, &mc))
        return false;
    if (mb & mc) return fail(x, "%s and %s share a dimension", bn, cn);
    *used = mb | mc;
    return true;
}

/* The batch and contracting dims of a dot or ragged-dot (a: its
 * attributes, checked in range) have equal sizes on both sides; else
 * false after the error. */
static bool dot_dims_agree(Infer *x, const HloAttrs *a, const Shape *l, const Shape *r)
{
    for (int32_t k = 0; k < a->lhs_batch.n; k++)
        if (l->dims[a->lhs_batch.v[k]] != r->dims[a->rhs_batch.v[k]])
            return fail(x, "batch dimension %lld of lhs %s and %lld of rhs %s differ in size",
                        (long long)a->lhs_batch.v[k], shs(x, l), (long long)a->rhs_batch.v[k], shs(x, r));
    for (int32_t k = 0; k < a->lhs_contracting.n; k++)
        if (l->dims[a->lhs_contracting.v[k]] != r->dims[a->rhs_contracting.v[k]])
            return fail(x, "contracting dimension %lld of lhs %s and %lld of rhs %s differ in size",
                        (long long)a->lhs_contracting.v[k], shs(x, l), (long long)a->rhs_contracting.v[k], shs(x, r));
    return true;
}

/* Output dims: batch (lhs order), lhs free dims, rhs free dims. */
static bool infer_dot(Infer *x, Shape *o)
{
    const Shape *l = ops(x, 0), *r = ops(x, 1);
    const HloAttrs *a = x->a;
    uint32_t ul = 0, ur = 0;
    if (!want_array(x, 0) || !want_array(x, 1)) return false;
    if (a->lhs_batch.n != a->rhs_batch.n || a->lhs_contracting.n != a->rhs_contracting.n)
        return fail(x, "dot needs as many lhs as rhs batch dims (%d vs %d) and contracting dims (%d vs %d)",
                    a->lhs_batch.n, a->rhs_batch.n, a->lhs_contracting.n, a->rhs_contracting.n);
    if (!dot_side(x, "lhs", &a->lhs_batch, &a->lhs_contracting, l->rank, &ul) ||
        !dot_side(x, "rhs", &a->rhs_batch, &a->rhs_contracting, r->rank, &ur))
        return false;
    if (!dot_dims_agree(x, a, l, r)) return false;
    int32_t nb = a->lhs_batch.n, nc = a->lhs_contracting.n;
    if (nb + (l->rank - nb - nc) + (r->rank - nb - nc) > SPMDC_MAX_RANK)
        return fail(x, "the dot of %s and %s would have a rank above %d", shs(x, l), shs(x, r), SPMDC_MAX_RANK);
    ElemType t = is_value_type(x->in->shape->type) ? x->in->shape->type : l->type; /* preferred type */
    *o = shape_scalar(t);
    for (int32_t k = 0; k < nb; k++) o->dims[o->rank++] = l->dims[a->lhs_batch.v[k]];
    for (int32_t d = 0; d < l->rank; d++)
        if (!(ul & (1u << d))) o->dims[o->rank++] = l->dims[d];
    for (int32_t d = 0; d < r->rank; d++)
        if (!(ur & (1u << d))) o->dims[o->rank++] = r->dims[d];
    return true;
}

/* group_sizes: an integer [g], or [lhs batch dims..., g] when the ragged dim
 * is no batch dim; a free ragged dim's g is the rhs group dim's size. */
static bool ragged_group_sizes(Infer *x, HloRaggedMode mode, int64_t g_rhs)
{
    const Shape *l = ops(x, 0), *gs = ops(x, 2);
    const IntList *lb = &x->a->lhs_batch;
    if (!elem_type_is_integral(gs->type))
        return fail(x, "group_sizes (%s) must have an integer element type", shs(x, gs));
    bool batched = mode != RAGGED_BATCH && gs->rank == 1 + lb->n && lb->n > 0;
    if (gs->rank != 1 && !batched)
        return fail(x, "group_sizes %s must be [g]%s", shs(x, gs),
                    mode == RAGGED_BATCH ? " when the ragged dimension is a batch dimension"
                                         : " or [lhs batch dims..., g] (spmdc takes no other form)");
    for (int32_t k = 0; batched && k < lb->n; k++)
        if (gs->dims[k] != l->dims[lb->v[k]])
            return fail(x, "group_sizes %s: dimension %d must be lhs batch dimension %lld (size %lld)", shs(x, gs), k,
                        (long long)lb->v[k], (long long)l->dims[lb->v[k]]);
    if (mode == RAGGED_FREE && gs->dims[gs->rank - 1] != g_rhs)
        return fail(x, "group_sizes %s has %lld groups but the rhs group dimension has %lld", shs(x, gs),
                    (long long)gs->dims[gs->rank - 1], (long long)g_rhs);
    return true;
}

/* ragged-dot: a dot whose lhs has one ragged dim split into groups by
 * group_sizes.  A free (non-contracting) ragged dim picks, per group, one
 * slice of rhs's group dim (dropped from the result); a contracting one adds
 * a leading group dim to the result; a batch one is a plain dot. */
static bool infer_ragged_dot(Infer *x, Shape *o)
{
    const Shape *l = ops(x, 0), *r = ops(x, 1);
    const HloAttrs *a = x->a;
    uint32_t ul = 0, ur = 0, ug = 0;
    if (!want_array(x, 0) || !want_array(x, 1) || !want_array(x, 2)) return false;
    if (a->lhs_batch.n != a->rhs_batch.n || a->lhs_contracting.n != a->rhs_contracting.n)
        return fail(x, "ragged-dot needs as many lhs as rhs batch dims (%d vs %d) and contracting dims (%d vs %d)",
                    a->lhs_batch.n, a->rhs_batch.n, a->lhs_contracting.n, a->rhs_contracting.n);
    if (!dot_side(x, "lhs", &a->lhs_batch, &a->lhs_contracting, l->rank, &ul) ||
        !dot_side(x, "rhs", &a->rhs_batch, &a->rhs_contracting, r->rank, &ur))
        return false;
    if (!dim_list(x, "lhs_ragged_dims", &a->lhs_ragged, l->rank, "lhs", false, NULL) ||
        !dim_list(x, "rhs_group_dims", &a->rhs_group, r->rank, "rhs", false, &ug))
        return false;
    if (a->lhs_ragged.n != 1)
        return fail(x, "ragged-dot needs exactly one lhs ragged dimension, lhs_ragged_dims=%s", ils(x, &a->lhs_ragged));
    if (ug & ur) return fail(x, "rhs_group_dims=%s names a batch or contracting dimension of rhs", ils(x, &a->rhs_group));
    HloRaggedMode mode = hlo_ragged_mode(a);
    if (mode == RAGGED_FREE && a->rhs_group.n != 1)
        return fail(x, "a ragged non-contracting lhs dimension needs exactly one rhs group dimension, rhs_group_dims=%s",
                    ils(x, &a->rhs_group));
    if (mode != RAGGED_FREE && a->rhs_group.n != 0)
        return fail(x, "a ragged %s dimension takes no rhs group dimension, rhs_group_dims=%s",
                    mode == RAGGED_BATCH ? "batch" : "contracting", ils(x, &a->rhs_group));
    if (!dot_dims_agree(x, a, l, r)) return false;
    if (!ragged_group_sizes(x, mode, mode == RAGGED_FREE ? r->dims[a->rhs_group.v[0]] : 0)) return false;
    int32_t nb = a->lhs_batch.n, nc = a->lhs_contracting.n, lead = mode == RAGGED_CONTRACTING;
    if (lead + nb + (l->rank - nb - nc) + (r->rank - nb - nc - a->rhs_group.n) > SPMDC_MAX_RANK)
        return fail(x, "the ragged-dot of %s and %s would have a rank above %d", shs(x, l), shs(x, r), SPMDC_MAX_RANK);
    ElemType t = is_value_type(x->in->shape->type) ? x->in->shape->type : l->type; /* preferred type */
    *o = shape_scalar(t);
    if (lead) o->dims[o->rank++] = ops(x, 2)->dims[ops(x, 2)->rank - 1];
    for (int32_t k = 0; k < nb; k++) o->dims[o->rank++] = l->dims[a->lhs_batch.v[k]];
    for (int32_t d = 0; d < l->rank; d++)
        if (!(ul & (1u << d))) o->dims[o->rank++] = l->dims[d];
    for (int32_t d = 0; d < r->rank; d++)
        if (!((ur | ug) & (1u << d))) o->dims[o->rank++] = r->dims[d];
    return true;
}

/* Output size of one window dimension over a base of `base` elements
 * (XLA's InferWindowOutputShape; negative padding allowed). */
static bool window_dim(Infer *x, const WindowDim *w, int32_t d, int64_t base, int64_t *out)
{
    if (w->size <= 0 || w->stride <= 0 || w->lhs_dilate < 1 || w->rhs_dilate < 1)
        return fail(x, "window dimension %d needs size >= 1, stride >= 1 and dilations >= 1 (size=%lld stride=%lld "
                    "lhs_dilate=%lld rhs_dilate=%lld)", d, (long long)w->size, (long long)w->stride,
                    (long long)w->lhs_dilate, (long long)w->rhs_dilate);
    int64_t dilated = base == 0 ? 0 : cadd(x, cmul(x, base - 1, w->lhs_dilate), 1);
    int64_t padded = cadd(x, cadd(x, dilated, w->pad_lo), w->pad_hi);
    int64_t win = cadd(x, cmul(x, w->size - 1, w->rhs_dilate), 1);
    *out = padded < win ? 0 : (padded - win) / w->stride + 1;
    return true;
}

static int32_t window_rank(const HloAttrs *a) { return a->window ? a->window->rank : 0; }

/* Every dim of the conv labels is in range and used once per side. */
static bool conv_labels_ok(Infer *x, const ConvDims *c, int32_t rank)
{
    const int64_t *sides[3][2] = {{&c->in_batch, &c->in_feature}, {&c->k_in, &c->k_out}, {&c->out_batch, &c->out_feature}};
    const int64_t *sp[3] = {c->in_spatial, c->k_spatial, c->out_spatial};
    static const char *const names[3] = {"input", "kernel", "output"};
    for (int s = 0; s < 3; s++) {
        uint32_t seen = 0;
        for (int32_t k = -2; k < c->n_spatial; k++) {
            int64_t v = k < 0 ? *sides[s][k + 2] : sp[s][k];
            if (v < 0 || v >= rank || (seen & (1u << v)))
                return fail(x, "dim_labels: the %s dimensions are not a permutation of 0..%d", names[s], rank - 1);
            seen |= 1u << v;
        }
    }
    return true;
}

static bool conv_groups(Infer *x, int64_t fgc, int64_t bgc, int64_t in_f, int64_t k_in, int64_t k_out, int64_t batch)
{
    if (fgc < 1 || bgc < 1) return fail(x, "feature_group_count and batch_group_count must be >= 1");
    if (fgc > 1 && bgc > 1) return fail(x, "feature_group_count and batch_group_count cannot both exceed 1");
    if (in_f % fgc || in_f / fgc != k_in)
        return fail(x, "input feature dimension %lld does not equal kernel input features %lld times "
                    "feature_group_count %lld", (long long)in_f, (long long)k_in, (long long)fgc);
    if (k_out % fgc)
        return fail(x, "kernel output features %lld are not divisible by feature_group_count %lld", (long long)k_out,
                    (long long)fgc);
    if (batch % bgc || k_out % bgc)
        return fail(x, "input batch %lld and kernel output features %lld must be divisible by batch_group_count %lld",
                    (long long)batch, (long long)k_out, (long long)bgc);
    return true;
}

static bool infer_convolution(Infer *x, Shape *o)
{
    const Shape *l = ops(x, 0), *r = ops(x, 1);
    const ConvDims *c = x->a->conv;
    if (!want_array(x, 0) || !want_array(x, 1)) return false;
    if (!c) return fail(x, "convolution needs dim_labels");
    if (c->n_spatial < 0 || c->n_spatial > SPMDC_MAX_RANK - 2)
        return fail(x, "dim_labels have %d spatial dimensions, at most %d are supported", c->n_spatial,
                    SPMDC_MAX_RANK - 2);
    int32_t rank = c->n_spatial + 2;
    if (l->rank != rank || r->rank != rank)
        return fail(x, "dim_labels describe rank-%d operands but lhs is %s and rhs is %s", rank, shs(x, l), shs(x, r));
    if (!conv_labels_ok(x, c, rank)) return false;
    if (window_rank(x->a) != c->n_spatial)
        return fail(x, "the window has %d dimensions but the convolution has %d spatial dimensions",
                    window_rank(x->a), c->n_spatial);
    int64_t fgc = x->a->feature_group_count ? x->a->feature_group_count : 1;
    int64_t bgc = x->a->batch_group_count ? x->a->batch_group_count : 1;
    int64_t batch = l->dims[c->in_batch], k_out = r->dims[c->k_out];
    if (!conv_groups(x, fgc, bgc, l->dims[c->in_feature], r->dims[c->k_in], k_out, batch)) return false;
    *o = arr(is_value_type(x->in->shape->type) ? x->in->shape->type : l->type, l);
    o->dims[c->out_batch] = batch / bgc;
    o->dims[c->out_feature] = k_out;
    for (int32_t k = 0; k < c->n_spatial; k++) {
        const WindowDim *w = &x->a->window->dims[k];
        if (w->size != r->dims[c->k_spatial[k]])
            return fail(x, "window size %lld of spatial dimension %d does not match the kernel's %lld",
                        (long long)w->size, k, (long long)r->dims[c->k_spatial[k]]);
        if (!window_dim(x, w, k, l->dims[c->in_spatial[k]], &o->dims[c->out_spatial[k]])) return false;
    }
    return true;
}

/* ------------------------------------------------------------- reductions */

/* Inputs 0..n-1 are arrays of equal dims; inits n..2n-1 are scalars of the
 * matching element types.  Fills types[0..n). */
static bool inputs_and_inits(Infer *x, int32_t n, ElemType *types)
{
    for (int32_t k = 0; k < n; k++) {
        if (!want_array(x, k) || !same_as(x, 0, k, false) || !want_scalar(x, n + k, "init value")) return false;
        if (ops(x, n + k)->type != ops(x, k)->type)
            return fail(x, "init value %d (%s) is %s but input %d (%s) has element type %s", k, opn(x, n + k),
                        shs(x, ops(x, n + k)), k, opn(x, k), elem_type_name(ops(x, k)->type));
        types[k] = ops(x, k)->type;
    }
    return true;
}

static bool infer_reduce(Infer *x, Shape *o)
{
    int32_t n = x->in->n_operands / 2;
    const Shape *s = ops(x, 0);
    ElemType *types = ARENA_ARRAY(tmp_arena(x), ElemType, n);
    Shape *res = ARENA_ARRAY(tmp_arena(x), Shape, n);
    uint32_t mask;
    if (!inputs_and_inits(x, n, types)) return false;
    if (!dim_list(x, "dimensions", &x->a->dimensions, s->rank, "input", false, &mask)) return false;
    if (!check_reducer(x, "to_apply", x->a->to_apply, types, n)) return false;
    for (int32_t k = 0; k < n; k++) {
        res[k] = shape_scalar(types[k]);
        for (int32_t d = 0; d < s->rank; d++)
            if (!(mask & (1u << d))) res[k].dims[res[k].rank++] = s->dims[d];
    }
    *o = one_or_tuple(x, res, n);
    return true;
}

/* The window output dims of base shape s into *o (type kept from o). */
static bool window_shape(Infer *x, const Shape *s, Shape *o)
{
    if (window_rank(x->a) != s->rank)
        return fail(x, "the window has %d dimensions but the operand %s has rank %d", window_rank(x->a), shs(x, s),
                    s->rank);
    o->rank = s->rank;
    for (int32_t d = 0; d < s->rank; d++)
        if (!window_dim(x, &x->a->window->dims[d], d, s->dims[d], &o->dims[d])) return false;
    return true;
}

static bool infer_reduce_window(Infer *x, Shape *o)
{
    int32_t n = x->in->n_operands / 2;
    ElemType *types = ARENA_ARRAY(tmp_arena(x), ElemType, n);
    Shape *res = ARENA_ARRAY(tmp_arena(x), Shape, n);
    if (!inputs_and_inits(x, n, types)) return false;
    Shape w = shape_scalar(types[0]);
    if (!window_shape(x, ops(x, 0), &w)) return false;
    if (!check_reducer(x, "to_apply", x->a->to_apply, types, n)) return false;
    for (int32_t k = 0; k < n; k++) res[k] = arr(types[k], &w);
    *o = one_or_tuple(x, res, n);
    return true;
}

/* select-and-scatter(operand, source, init): source has the window output
 * shape of operand; select(a, b) -> pred[]; scatter reduces init-typed
 * scalars. */
static bool infer_select_and_scatter(Infer *x, Shape *o)
{
    const Shape *s = ops(x, 0), *src = ops(x, 1);
    if (!want_array(x, 0) || !want_array(x, 1) || !want_scalar(x, 2, "init value")) return false;
    Shape w = shape_scalar(src->type);
    if (!window_shape(x, s, &w)) return false;
    if (!same_dims(&w, src))
        return fail(x, "the source %s must have the window output shape of the operand, %s", shs(x, src), shs(x, &w));
    if (ops(x, 2)->type != src->type)
        return fail(x, "the init value %s must have the element type of the source %s", shs(x, ops(x, 2)),
                    shs(x, src));
    Shape sel[2] = {shape_scalar(s->type), shape_scalar(s->type)};
    Shape pred = shape_scalar(ET_PRED);
    if (!check_callee(x, "select", x->a->select, sel, 2, &pred)) return false;
    ElemType t = src->type;
    if (!check_reducer(x, "scatter", x->a->to_apply, &t, 1)) return false;
    *o = arr(s->type, s);
    return true;
}

/* -------------------------------------------------------- gather / scatter */

static bool disjoint(Infer *x, const char *na, uint32_t a, const char *nb, uint32_t b)
{
    return (a & b) ? fail(x, "%s and %s share a dimension", na, nb) : true;
}

/* Operand and indices batching dims: same count, disjoint from the index
 * vector dim, equal sizes. */
static bool batching_dims(Infer *x, const IntList *ob, const IntList *ib, const Shape *op, const Shape *ix,
                          int64_t ivd, const char *iname)
{
    if (!dim_list(x, iname, ib, ix->rank, "indices", false, NULL)) return false;
    for (int32_t k = 0; k < ib->n; k++)
        if (ib->v[k] == ivd) return fail(x, "%s=%s contains the index_vector_dim %lld", iname, ils(x, ib), (long long)ivd);
    if (ob->n != ib->n)
        return fail(x, "%s=%s and the operand batching dims %s differ in length", iname, ils(x, ib), ils(x, ob));
    for (int32_t k = 0; k < ob->n; k++)
        if (op->dims[ob->v[k]] != ix->dims[ib->v[k]])
            return fail(x, "operand batching dimension %lld and indices batching dimension %lld differ in size",
                        (long long)ob->v[k], (long long)ib->v[k]);
    return true;
}

/* index_vector_dim in [0, rank(indices)]; *nidx = length of one index
 * vector (1 when it is the implicit trailing dim); batch dims of the indices
 * (all but index_vector_dim) into bd[0..*nb). */
static bool index_vector(Infer *x, const Shape *ix, int64_t ivd, int64_t *nidx, int64_t *bd, int32_t *nb)
{
    if (!elem_type_is_integral(ix->type)) return fail(x, "the indices must be integers, got %s", shs(x, ix));
    if (ivd < 0 || ivd > ix->rank)
        return fail(x, "index_vector_dim=%lld is out of range for indices %s", (long long)ivd, shs(x, ix));
    *nidx = ivd == ix->rank ? 1 : ix->dims[ivd];
    *nb = 0;
    for (int32_t d = 0; d < ix->rank; d++)
        if (d != ivd) bd[(*nb)++] = ix->dims[d];
    return true;
}

static bool gather_slices(Infer *x, const Shape *op, uint32_t collapsed, uint32_t obatch)
{
    const HloAttrs *a = x->a;
    const IntList *ss = &a->slice_sizes;
    if (ss->n != op->rank)
        return fail(x, "slice_sizes=%s needs one size per dimension of the operand %s", ils(x, ss), shs(x, op));
    if (ss->n != a->offset_dims.n + a->collapsed_slice_dims.n + a->operand_batching_dims.n)
        return fail(x, "every operand dimension must be an offset, collapsed or batching dimension: %d slice sizes, "
                    "%d offset_dims, %d collapsed_slice_dims, %d operand_batching_dims", ss->n, a->offset_dims.n,
                    a->collapsed_slice_dims.n, a->operand_batching_dims.n);
    for (int32_t d = 0; d < ss->n; d++) {
        if (ss->v[d] < 0 || ss->v[d] > op->dims[d])
            return fail(x, "slice_sizes=%s: size %lld of dimension %d is not within [0, %lld]", ils(x, ss),
                        (long long)ss->v[d], d, (long long)op->dims[d]);
        if (((collapsed | obatch) & (1u << d)) && ss->v[d] > 1)
            return fail(x, "slice_sizes=%s: collapsed or batching dimension %d must have size 1, got %lld",
                        ils(x, ss), d, (long long)ss->v[d]);
    }
    return true;
}

static bool infer_gather(Infer *x, Shape *o)
{
    const Shape *op = ops(x, 0), *ix = ops(x, 1);
    const HloAttrs *a = x->a;
    int64_t nidx, bd[SPMDC_MAX_RANK + 1];
    int32_t nb;
    uint32_t moff, mcol, mob, msim;
    if (!want_array(x, 0) || !want_array(x, 1)) return false;
    if (!index_vector(x, ix, a->index_vector_dim, &nidx, bd, &nb)) return false;
    int32_t out_rank = a->offset_dims.n + nb;
    if (out_rank > SPMDC_MAX_RANK) return fail(x, "the gather result would have a rank above %d", SPMDC_MAX_RANK);
    if (!dim_list(x, "offset_dims", &a->offset_dims, out_rank, "result", true, &moff)) return false;
    if (a->start_index_map.n != nidx)
        return fail(x, "start_index_map=%s needs one entry per index vector component: %lld for indices %s",
                    ils(x, &a->start_index_map), (long long)nidx, shs(x, ix));
    if (!dim_list(x, "start_index_map", &a->start_index_map, op->rank, "operand", false, &msim) ||
        !dim_list(x, "collapsed_slice_dims", &a->collapsed_slice_dims, op->rank, "operand", true, &mcol) ||
        !dim_list(x, "operand_batching_dims", &a->operand_batching_dims, op->rank, "operand", true, &mob) ||
        !disjoint(x, "collapsed_slice_dims", mcol, "operand_batching_dims", mob) ||
        !disjoint(x, "start_index_map", msim, "operand_batching_dims", mob) ||
        !batching_dims(x, &a->operand_batching_dims, &a->start_indices_batching_dims, op, ix, a->index_vector_dim,
                       "start_indices_batching_dims") ||
        !gather_slices(x, op, mcol, mob))
        return false;
    *o = shape_scalar(op->type);
    int32_t next_slice = 0, next_batch = 0;
    for (int32_t d = 0; d < out_rank; d++) {
        if (moff & (1u << d)) {
            while ((mcol | mob) & (1u << next_slice)) next_slice++;
            o->dims[o->rank++] = a->slice_sizes.v[next_slice++];
        } else {
            o->dims[o->rank++] = bd[next_batch++];
        }
    }
    return true;
}

/* The updates' window dims fit the operand; their scatter dims equal the
 * indices' batch dims. */
static bool scatter_update_dims(Infer *x, const Shape *op, const Shape *up, uint32_t mwin, uint32_t skip,
                                const int64_t *bd)
{
    int32_t od = 0, sd = 0;
    for (int32_t d = 0; d < up->rank; d++) {
        if (mwin & (1u << d)) {
            while (skip & (1u << od)) od++;
            if (up->dims[d] > op->dims[od])
                return fail(x, "update window dimension %d (size %lld) exceeds operand dimension %d (size %lld)", d,
                            (long long)up->dims[d], od, (long long)op->dims[od]);
            od++;
        } else if (up->dims[d] != bd[sd++]) {
            return fail(x, "update scatter dimension %d (size %lld) does not match the indices' batch dimension "
                        "(size %lld)", d, (long long)up->dims[d], (long long)bd[sd - 1]);
        }
    }
    return true;
}

static bool scatter_dnums(Infer *x, const Shape *op, const Shape *ix, const Shape *up)
{
    const HloAttrs *a = x->a;
    int64_t nidx, bd[SPMDC_MAX_RANK + 1];
    int32_t nb;
    uint32_t mwin, mins, mob, msd;
    if (!index_vector(x, ix, a->index_vector_dim, &nidx, bd, &nb)) return false;
    if (up->rank != nb + a->update_window_dims.n)
        return fail(x, "the updates %s must have rank %d (%d scatter dims + %d update_window_dims)", shs(x, up),
                    nb + a->update_window_dims.n, nb, a->update_window_dims.n);
    if (!dim_list(x, "update_window_dims", &a->update_window_dims, up->rank, "updates", true, &mwin) ||
        !dim_list(x, "inserted_window_dims", &a->inserted_window_dims, op->rank, "operand", true, &mins) ||
        !dim_list(x, "input_batching_dims", &a->input_batching_dims, op->rank, "operand", true, &mob) ||
        !disjoint(x, "inserted_window_dims", mins, "input_batching_dims", mob) ||
        !batching_dims(x, &a->input_batching_dims, &a->scatter_indices_batching_dims, op, ix, a->index_vector_dim,
                       "scatter_indices_batching_dims"))
        return false;
    if (a->update_window_dims.n + a->inserted_window_dims.n + a->input_batching_dims.n != op->rank)
        return fail(x, "update_window_dims, inserted_window_dims and input_batching_dims must cover the %d operand "
                    "dimensions", op->rank);
    if (a->scatter_dims_to_operand_dims.n != nidx)
        return fail(x, "scatter_dims_to_operand_dims=%s needs one entry per index vector component: %lld for "
                    "indices %s", ils(x, &a->scatter_dims_to_operand_dims), (long long)nidx, shs(x, ix));
    if (!dim_list(x, "scatter_dims_to_operand_dims", &a->scatter_dims_to_operand_dims, op->rank, "operand", false,
                  &msd) ||
        !disjoint(x, "scatter_dims_to_operand_dims", msd, "input_batching_dims", mob))
        return false;
    return scatter_update_dims(x, op, up, mwin, mins | mob, bd);
}

/* scatter(inputs..., indices, updates...). */
static bool infer_scatter(Infer *x, Shape *o)
{
    int32_t n = (x->in->n_operands - 1) / 2;
    ElemType *types = ARENA_ARRAY(tmp_arena(x), ElemType, n);
    Shape *res = ARENA_ARRAY(tmp_arena(x), Shape, n);
    if (!want_array(x, n)) return false;
    for (int32_t k = 0; k < n; k++) {
        int32_t u = n + 1 + k;
        if (!want_array(x, k) || !want_array(x, u) || !same_as(x, 0, k, false) || !same_as(x, n + 1, u, false))
            return false;
        if (ops(x, u)->type != ops(x, k)->type)
            return fail(x, "updates %d (%s) is %s but input %d (%s) has element type %s", k, opn(x, u),
                        shs(x, ops(x, u)), k, opn(x, k), elem_type_name(ops(x, k)->type));
        types[k] = ops(x, k)->type;
        res[k] = arr(types[k], ops(x, k));
    }
    if (!scatter_dnums(x, ops(x, 0), ops(x, n), ops(x, n + 1))) return false;
    if (!check_reducer(x, "to_apply", x->a->to_apply, types, n)) return false;
    *o = one_or_tuple(x, res, n);
    return true;
}

/* ------------------------------------------------------------ sort and map */

static bool infer_sort(Infer *x, Shape *o)
{
    int32_t n = x->in->n_operands;
    Shape *want = ARENA_ARRAY(tmp_arena(x), Shape, 2 * n);
    Shape *res = ARENA_ARRAY(tmp_arena(x), Shape, n);
    for (int32_t k = 0; k < n; k++) {
        if (!want_array(x, k) || !same_as(x, 0, k, false)) return false;
        want[2 * k] = want[2 * k + 1] = shape_scalar(ops(x, k)->type);
        res[k] = arr(ops(x, k)->type, ops(x, k));
    }
    if (x->a->dimensions.n != 1)
        return fail(x, "sort needs exactly one dimension, got dimensions=%s", ils(x, &x->a->dimensions));
    if (!dim_list(x, "dimensions", &x->a->dimensions, ops(x, 0)->rank, "operand", false, NULL)) return false;
    Shape pred = shape_scalar(ET_PRED);
    if (!check_callee(x, "to_apply", x->a->to_apply, want, 2 * n, &pred)) return false;
    *o = one_or_tuple(x, res, n);
    return true;
}

/* topk(x), k=K: (values, s32 indices) of shape x with the last dim K. */
static bool infer_topk(Infer *x, Shape *o)
{
    if (!want_array(x, 0)) return false;
    const Shape *s = ops(x, 0);
    if (s->rank < 1) return fail(x, "topk needs an operand of rank >= 1, got %s", shs(x, s));
    if (x->a->k < 0) return fail(x, "topk needs k=");
    if (x->a->k > s->dims[s->rank - 1])
        return fail(x, "topk k=%lld is larger than the last dimension of %s", (long long)x->a->k, shs(x, s));
    Shape res[2] = {arr(s->type, s), arr(ET_S32, s)};
    res[0].dims[s->rank - 1] = res[1].dims[s->rank - 1] = x->a->k;
    *o = tuple_of(x, res, 2);
    return true;
}

static bool infer_map(Infer *x, Shape *o)
{
    int32_t n = x->in->n_operands;
    const IntList *l = &x->a->dimensions;
    Shape *want = ARENA_ARRAY(tmp_arena(x), Shape, n);
    for (int32_t k = 0; k < n; k++) {
        if (!want_array(x, k) || !same_as(x, 0, k, false)) return false;
        want[k] = shape_scalar(ops(x, k)->type);
    }
    for (int32_t k = 0; k < l->n; k++)
        if (l->n != ops(x, 0)->rank || l->v[k] != k)
            return fail(x, "map dimensions=%s must list every operand dimension in order", ils(x, l));
    if (!check_callee(x, "to_apply", x->a->to_apply, want, n, NULL)) return false;
    const HloComputation *cc = &x->m->comps[x->a->to_apply];
    const Shape *r = cc->insts[cc->root].shape;
    if (r->type == ET_TUPLE || !is_value_type(r->type) || r->rank != 0)
        return fail(x, "to_apply computation %s of map must return a scalar, returns %s", cc->name, shs(x, r));
    *o = arr(r->type, ops(x, 0));
    return true;
}

/* ----------------------------------------------------- structure and calls */

static bool infer_tuple(Infer *x, Shape *o)
{
    int32_t n = x->in->n_operands;
    Shape *el = ARENA_ARRAY(tmp_arena(x), Shape, n > 0 ? n : 1);
    for (int32_t k = 0; k < n; k++) el[k] = plain(ops(x, k));
    *o = tuple_of(x, el, n);
    return true;
}

static bool infer_gte(Infer *x, Shape *o)
{
    const Shape *t = ops(x, 0);
    int64_t i = x->a->index;
    if (t->type != ET_TUPLE)
        return fail(x, "get-tuple-element needs a tuple operand, got %s", shs(x, t));
    if (i < 0 || i >= t->n_elems)
        return fail(x, "index=%lld is out of range for the %d-element tuple %s", (long long)i, t->n_elems, shs(x, t));
    if (!verify_shape_top_ok(&t->elems[i]))
        return fail(x, "element %lld of the operand has a malformed shape", (long long)i);
    *o = plain(&t->elems[i]);
    return true;
}

static bool literal_fits(Infer *x, const Literal *l, const Shape *s, int depth)
{
    if (s->type == ET_TUPLE) {
        if (l->n_elems != s->n_elems || (s->n_elems && !l->elems) || depth > 64)
            return fail(x, "the tuple literal has %d elements but the shape %s has %d", l->n_elems, shs(x, s),
                        s->n_elems);
        for (int32_t k = 0; k < s->n_elems; k++)
            if (!literal_fits(x, &l->elems[k], &s->elems[k], depth + 1)) return false;
        return true;
    }
    int64_t n = elem_count(x, s);
    if (!l->elided && l->n != n && s->type != ET_TOKEN)
        return fail(x, "the literal has %lld value%s but %s has %lld element%s", (long long)l->n, l->n == 1 ? "" : "s",
                    shs(x, s), (long long)n, n == 1 ? "" : "s");
    return true;
}

static bool infer_constant(Infer *x, Shape *o)
{
    if (!x->a->literal) return fail(x, "constant has no literal");
    if (!literal_fits(x, x->a->literal, x->in->shape, 0)) return false;
    *o = plain(x->in->shape);
    return true;
}

static bool infer_while(Infer *x, Shape *o)
{
    const Shape *init = ops(x, 0);
    Shape pred = shape_scalar(ET_PRED);
    if (!check_callee(x, "condition", x->a->condition, init, 1, &pred)) return false;
    if (!check_callee(x, "body", x->a->body, init, 1, init)) return false;
    *o = plain(init);
    return true;
}

static bool infer_conditional(Infer *x, Shape *o)
{
    const IntList *b = &x->a->branches;
    const Shape *sel = ops(x, 0);
    ElemType st = x->a->branches_by_pred ? ET_PRED : ET_S32;
    if (b->n < 1 || (x->a->branches_by_pred && b->n != 2))
        return fail(x, "conditional needs true_computation and false_computation, or branch_computations");
    if (sel->type != st || sel->rank != 0)
        return fail(x, "the selector, operand 0 (%s), must be %s[], got %s", opn(x, 0), elem_type_name(st), shs(x, sel));
    if (x->in->n_operands != 1 + b->n)
        return fail(x, "conditional with %d branches takes %d operands (the selector and one argument per branch), got "
                    "%d", b->n, 1 + b->n, x->in->n_operands);
    const Shape *first = NULL;
    for (int32_t k = 0; k < b->n; k++) {
        int32_t c = (int32_t)b->v[k];
        if (b->v[k] < 0 || b->v[k] >= x->m->n_comps) return fail(x, "branch computation %d does not exist", k);
        if (!check_callee(x, "branch", c, ops(x, 1 + k), 1, first)) return false;
        const HloComputation *cc = &x->m->comps[c];
        if (!first) first = cc->insts[cc->root].shape;
    }
    *o = plain(first);
    return true;
}

static bool infer_call(Infer *x, Shape *o)
{
    int32_t n = x->in->n_operands;
    Shape *want = ARENA_ARRAY(tmp_arena(x), Shape, n > 0 ? n : 1);
    for (int32_t k = 0; k < n; k++) want[k] = *ops(x, k);
    if (!check_callee(x, "to_apply", x->a->to_apply, want, n, NULL)) return false;
    const HloComputation *cc = &x->m->comps[x->a->to_apply];
    *o = plain(cc->insts[cc->root].shape);
    return true;
}

static bool infer_custom_call(Infer *x, Shape *o)
{
    const IntList *l = &x->a->called;
    for (int32_t k = 0; k < l->n; k++)
        if (l->v[k] < 0 || l->v[k] >= x->m->n_comps)
            return fail(x, "called computation %d does not exist", k);
    const char *target = x->a->custom_call_target;
    if (!target) return fail(x, "custom-call needs custom_call_target");
    /* XLA's sharding remover and HLO verifier: a Sharding annotation is an
     * identity on exactly one operand; so is Shardy's xla.sdy.FuncResultSharding
     * (XLA's Shardy import replaces it by its operand, and aborts on another
     * operand count). */
    if (strcmp(target, "Sharding") == 0 || strcmp(target, "xla.sdy.FuncResultSharding") == 0) {
        if (x->in->n_operands != 1)
            return fail(x, "a %s custom-call annotates exactly one operand, got %d", target, x->in->n_operands);
        if (!verify_same_shape(x->in->shape, ops(x, 0)))
            return fail(x, "a %s custom-call cannot change the shape: operand %s, result %s", target,
                        shs(x, ops(x, 0)), shs(x, x->in->shape));
    }
    if (strcmp(target, "SPMDFullToShardShape") == 0 || strcmp(target, "SPMDShardToFullShape") == 0) {
        if (x->in->n_operands != 1)
            return fail(x, "a %s custom-call takes exactly one operand, got %d", target, x->in->n_operands);
        /* a border changes the dims (global <-> per device), never the element type or rank */
        const Shape *s = ops(x, 0), *r = x->in->shape;
        if (s->type == ET_TUPLE || r->type == ET_TUPLE || s->type != r->type || s->rank != r->rank)
            return fail(x, "a %s custom-call keeps its operand's element type and rank: operand %s, result %s",
                        target, shs(x, s), shs(x, r));
    }
    *o = plain(x->in->shape);
    return true;
}

static bool infer_rng(Infer *x, Shape *o)
{
    const char *dist = x->a->rng_distribution;
    if (!want_scalar(x, 0, "first parameter") || !want_scalar(x, 1, "second parameter") || !same_as(x, 0, 1, true) ||
        !want_declared_array(x))
        return false;
    ElemType t = ops(x, 0)->type;
    if (!dist) return fail(x, "rng needs distribution=rng_uniform or distribution=rng_normal");
    if (strcmp(dist, "rng_normal") == 0) {
        if (!elem_type_is_float(t)) return fail(x, "rng_normal needs floating-point parameters, got %s", elem_type_name(t));
    } else if (strcmp(dist, "rng_uniform") == 0) {
        if (!elem_type_is_float(t) && !elem_type_is_integral(t))
            return fail(x, "rng_uniform needs integer or floating-point parameters, got %s", elem_type_name(t));
    } else {
        return fail(x, "unknown rng distribution %s", dist);
    }
    *o = arr(t, x->in->shape);
    return true;
}

/* The largest state rng-bit-generator's algorithm takes, as XLA's verifier
 * and its CPU expansion check them (u64[2] up to this): three_fry 2;
 * philox (and rng_default, philox on CPU) 3. */
static int64_t rng_state_max(const HloAttrs *a)
{
    for (int32_t k = 0; a && k < a->n_raw; k++)
        if (strcmp(a->raw[k].name, "algorithm") == 0 && strncasecmp(a->raw[k].text, "rng_three_fry", 13) == 0)
            return 2;
    return 3;
}

static bool infer_rng_bit_generator(Infer *x, Shape *o)
{
    const Shape *d = x->in->shape;
    if (!want_array(x, 0)) return false;
    int64_t max = rng_state_max(x->a);
    const Shape *st = ops(x, 0);
    if (st->type != ET_U64 || st->rank != 1 || st->dims[0] < 2 || st->dims[0] > max)
        return fail(x, "rng-bit-generator's state, operand 0 (%s), must be %s, got %s", opn(x, 0),
                    max == 2 ? "u64[2] (rng_three_fry)" : "u64[2] or u64[3]", shs(x, st));
    if (d->type != ET_TUPLE && verify_shape_top_ok(d) && elem_type_is_integral(d->type)) {
        *o = plain(d); /* the values only, as XLA's verifier takes it (canonicalize adds the state) */
        return true;
    }
    if (d->type != ET_TUPLE || d->n_elems != 2 || !verify_shape_top_ok(&d->elems[1]) || d->elems[1].type == ET_TUPLE ||
        !elem_type_is_integral(d->elems[1].type))
        return fail(x, "rng-bit-generator returns a (state, integer values) tuple or the integer values, declared %s",
                    shs(x, d));
    Shape el[2] = {plain(ops(x, 0)), plain(&d->elems[1])};
    *o = tuple_of(x, el, 2);
    return true;
}

static bool infer_after_all(Infer *x, Shape *o)
{
    for (int32_t k = 0; k < x->in->n_operands; k++)
        if (ops(x, k)->type != ET_TOKEN)
            return fail(x, "after-all takes tokens, operand %d (%s) is %s", k, opn(x, k), shs(x, ops(x, k)));
    *o = shape_scalar(ET_TOKEN);
    return true;
}

/* ------------------------------------------------------------- transfers */

static bool is_token(const Shape *s) { return s->type == ET_TOKEN; }

/* infeed(token) -> (data, token[]); recv(token) -> (data, u32[], token[]):
 * the data's shape is the declared one. */
static bool infer_incoming(Infer *x, Shape *o, int32_t n_elems)
{
    const Shape *d = x->in->shape;
    if (!is_token(ops(x, 0)))
        return fail(x, "%s takes a token, operand 0 (%s) is %s", opcode(x), opn(x, 0), shs(x, ops(x, 0)));
    if (d->type != ET_TUPLE || d->n_elems != n_elems || !is_token(&d->elems[n_elems - 1]) ||
        (n_elems == 3 && (d->elems[1].type != ET_U32 || d->elems[1].rank != 0)))
        return fail(x, "%s returns %s, its declared shape is %s", opcode(x),
                    n_elems == 2 ? "(data, token[])" : "(data, u32[], token[])", shs(x, d));
    *o = plain(d);
    return true;
}

/* outfeed(data, token) -> token[]; send(data, token) -> (data, u32[], token[]). */
static bool infer_outgoing(Infer *x, Shape *o)
{
    if (!is_token(ops(x, 1)))
        return fail(x, "%s takes a token as operand 1, %s is %s", opcode(x), opn(x, 1), shs(x, ops(x, 1)));
    if (x->in->op == HLO_OUTFEED) {
        *o = shape_scalar(ET_TOKEN);
        return true;
    }
    Shape el[3] = {plain(ops(x, 0)), shape_scalar(ET_U32), shape_scalar(ET_TOKEN)};
    *o = tuple_of(x, el, 3);
    return true;
}

/* send-done(send) -> token[]; recv-done(recv) -> (data, token[]). */
static bool infer_done(Infer *x, Shape *o)
{
    const Shape *t = ops(x, 0);
    if (t->type != ET_TUPLE || t->n_elems != 3 || !is_token(&t->elems[2]))
        return fail(x, "%s takes the (data, u32[], token[]) of a %s, operand 0 (%s) is %s", opcode(x),
                    x->in->op == HLO_SEND_DONE ? "send" : "recv", opn(x, 0), shs(x, t));
    if (x->in->op == HLO_SEND_DONE) {
        *o = shape_scalar(ET_TOKEN);
        return true;
    }
    Shape el[2] = {plain(&t->elems[0]), shape_scalar(ET_TOKEN)};
    *o = tuple_of(x, el, 2);
    return true;
}

/* ------------------------------------------------------------- collectives */

int64_t verify_collective_group_size(const HloModule *m, const HloInst *in)
{
    const HloAttrs *a = hlo_attrs(in);
    int64_t parts = m->num_partitions > 0 ? m->num_partitions : 1;
    int64_t reps = m->replica_count > 0 ? m->replica_count : 1;
    bool partition_only = a->channel_id && (in->op == HLO_ALL_TO_ALL || in->op == HLO_COLLECTIVE_PERMUTE);
    if (a->replica_groups.n_groups > 0) {
        int64_t gs = a->replica_groups.group_size;
        if (a->channel_id && !a->use_global_device_ids && !partition_only) gs *= parts;
        return gs;
    }
    if (m->num_partitions <= 0 && m->replica_count <= 0) return 0;
    if (!a->channel_id) return reps;
    return partition_only ? parts : reps * parts;
}

static int cmp_i64(const void *p, const void *q)
{
    int64_t a = *(const int64_t *)p, b = *(const int64_t *)q;
    return (a > b) - (a < b);
}

/* ids[0..n) are >= 0 and distinct (what names the list in messages). */
static bool distinct_ids(Infer *x, const char *what, const int64_t *ids, int64_t stride, int64_t n)
{
    int64_t *v = ARENA_ARRAY(tmp_arena(x), int64_t, n > 0 ? n : 1);
    for (int64_t k = 0; k < n; k++) v[k] = ids[k * stride];
    qsort(v, (size_t)n, sizeof *v, cmp_i64);
    for (int64_t k = 0; k < n; k++) {
        if (v[k] < 0) return fail(x, "%s contain a negative device id %lld", what, (long long)v[k]);
        if (k > 0 && v[k] == v[k - 1]) return fail(x, "%s list device %lld more than once", what, (long long)v[k]);
    }
    return true;
}

static bool collective_attrs(Infer *x)
{
    const HloAttrs *a = x->a;
    const ReplicaGroups *g = &a->replica_groups;
    if (a->channel_id < 0) return fail(x, "channel_id=%lld must not be negative", (long long)a->channel_id);
    /* global device ids name partitions, which only a channel op addresses
     * (XLA: "Cannot have use_global_device_ids=true without channel_id";
     * its verifier wants the channel_id positive) */
    if (a->use_global_device_ids && a->channel_id == 0)
        return fail(x, "use_global_device_ids=true needs a positive channel_id");
    if (g->n_groups < 0 || (g->n_groups > 0 && (g->group_size < 1 || !g->ids)))
        return fail(x, "replica_groups are malformed (empty groups)");
    if (g->n_groups > 0 && g->group_size > SPMDC_MAX_DEVICES / g->n_groups)
        return fail(x, "replica_groups list more than %d devices", SPMDC_MAX_DEVICES);
    if (g->n_groups > 0 && !distinct_ids(x, "replica_groups", g->ids, 1, g->n_groups * g->group_size)) return false;
    if (x->in->op == HLO_COLLECTIVE_PERMUTE) {
        if (a->n_pairs < 0 || (a->n_pairs > 0 && !a->pairs)) return fail(x, "source_target_pairs are malformed");
        if (!distinct_ids(x, "source_target_pairs sources", a->pairs, 2, a->n_pairs) ||
            !distinct_ids(x, "source_target_pairs targets", a->pairs + (a->n_pairs ? 1 : 0), 2, a->n_pairs))
            return false;
    }
    return true;
}

/* all-gather multiplies dimension d by the group size n, reduce-scatter
 * divides it.  When the module does not give n, it is read off the declared
 * shape of the first operand's result. */
static bool infer_gather_scatter_collective(Infer *x, Shape *o)
{
    bool gather = x->in->op == HLO_ALL_GATHER;
    int32_t nops = x->in->n_operands;
    const IntList *l = &x->a->dimensions;
    Shape *res = ARENA_ARRAY(tmp_arena(x), Shape, nops);
    int64_t n = verify_collective_group_size(x->m, x->in);
    if (l->n != 1) return fail(x, "%s needs exactly one dimension, got dimensions=%s", opcode(x), ils(x, l));
    for (int32_t k = 0; k < nops; k++) {
        if (!want_array(x, k) || !dim_list(x, "dimensions", l, ops(x, k)->rank, "operand", false, NULL)) return false;
        int64_t d = l->v[0], sz = ops(x, k)->dims[d];
        if (n <= 0) {
            const Shape *dec = x->in->shape->type == ET_TUPLE && k < x->in->shape->n_elems ? &x->in->shape->elems[k]
                                                                                         : x->in->shape;
            int64_t ds = dec->type != ET_TUPLE && dec->rank > d && d >= 0 ? dec->dims[d] : 0;
            n = gather ? (sz > 0 && ds % sz == 0 ? ds / sz : 1) : (ds > 0 && sz % ds == 0 ? sz / ds : 1);
            if (n < 1) n = 1;
        }
        res[k] = arr(ops(x, k)->type, ops(x, k));
        if (!gather && sz % n)
            return fail(x, "reduce-scatter: dimension %lld of %s (size %lld) is not divisible by the group size %lld",
                        (long long)d, shs(x, ops(x, k)), (long long)sz, (long long)n);
        res[k].dims[d] = gather ? cmul(x, sz, n) : sz / n;
        if (!gather) {
            ElemType t = ops(x, k)->type;
            if (!check_reducer(x, "to_apply", x->a->to_apply, &t, 1)) return false;
        }
    }
    *o = one_or_tuple(x, res, nops);
    return true;
}

static bool infer_collective(Infer *x, Shape *o)
{
    HloOpcode op = x->in->op;
    int32_t nops = x->in->n_operands;
    if (!collective_attrs(x)) return false;
    if (op == HLO_ALL_GATHER || op == HLO_REDUCE_SCATTER) return infer_gather_scatter_collective(x, o);
    Shape *res = ARENA_ARRAY(tmp_arena(x), Shape, nops);
    for (int32_t k = 0; k < nops; k++) {
        if (!want_array(x, k)) return false;
        res[k] = arr(ops(x, k)->type, ops(x, k));
        ElemType t = ops(x, k)->type;
        if (op == HLO_ALL_REDUCE && !check_reducer(x, "to_apply", x->a->to_apply, &t, 1)) return false;
    }
    if (op == HLO_ALL_TO_ALL && x->a->dimensions.n == 0) { /* tuple form */
        *o = tuple_of(x, res, nops);
        return true;
    }
    if (op == HLO_ALL_TO_ALL) {
        int64_t n = verify_collective_group_size(x->m, x->in);
        if (nops != 1 || x->a->dimensions.n != 1)
            return fail(x, "all-to-all with dimensions= takes one array operand and one split dimension");
        if (!dim_list(x, "dimensions", &x->a->dimensions, res[0].rank, "operand", false, NULL)) return false;
        int64_t sz = res[0].dims[x->a->dimensions.v[0]];
        if (n > 0 && sz % n)
            return fail(x, "all-to-all: split dimension %lld of %s (size %lld) is not divisible by the group size "
                        "%lld", (long long)x->a->dimensions.v[0], shs(x, &res[0]), (long long)sz, (long long)n);
    }
    *o = one_or_tuple(x, res, nops);
    return true;
}

/* ------------------------------------------------------------- dispatch */

static bool check_arity(Infer *x)
{
    HloOpcode op = x->in->op;
    int32_t n = x->in->n_operands, ar = hlo_opcode_arity(op), min = 0;
    if (n < 0 || (n > 0 && !x->in->operands)) return fail(x, "malformed operand list");
    if (ar >= 0) {
        if (n != ar) return fail(x, "%s takes %d operand%s, got %d", opcode(x), ar, ar == 1 ? "" : "s", n);
        return true;
    }
    switch (op) {
    case HLO_SCATTER:
        if (n < 3 || n % 2 == 0)
            return fail(x, "scatter takes N inputs, the indices and N updates (an odd number >= 3 of operands), got %d",
                        n);
        return true;
    case HLO_REDUCE: case HLO_REDUCE_WINDOW:
        if (n < 2 || n % 2)
            return fail(x, "%s takes N inputs then N init values (an even number >= 2 of operands), got %d", opcode(x),
                        n);
        return true;
    case HLO_DYNAMIC_SLICE: case HLO_CONCATENATE: case HLO_SORT: case HLO_MAP: case HLO_CONDITIONAL:
    case HLO_ALL_REDUCE: case HLO_ALL_GATHER: case HLO_REDUCE_SCATTER: case HLO_ALL_TO_ALL:
        min = 1;
        break;
    case HLO_DYNAMIC_UPDATE_SLICE:
        min = 2;
        break;
    default:
        break;
    }
    if (n < min) return fail(x, "%s takes at least %d operand%s, got %d", opcode(x), min, min == 1 ? "" : "s", n);
    return true;
}

static bool check_operands(Infer *x)
{
    for (int32_t k = 0; k < x->in->n_operands; k++) {
        int32_t o = x->in->operands[k];
        if (o < 0 || o >= x->comp->n_insts)
            return fail(x, "operand %d refers to instruction index %d, which does not exist", k, o);
        if (!verify_shape_top_ok(x->comp->insts[o].shape))
            return fail(x, "operand %d (%s) has a malformed shape", k, opn(x, k));
    }
    return true;
}

static bool dispatch(Infer *x, Shape *o)
{
    switch (x->in->op) {
    case HLO_PARAMETER: *o = plain(x->in->shape); return true;
    case HLO_CONSTANT: return infer_constant(x, o);
    case HLO_IOTA: return infer_iota(x, o);
    case HLO_PARTITION_ID: case HLO_REPLICA_ID: *o = shape_scalar(ET_U32); return true;
    case HLO_AFTER_ALL: return infer_after_all(x, o);
    case HLO_INFEED: return infer_incoming(x, o, 2);
    case HLO_RECV: return infer_incoming(x, o, 3);
    case HLO_OUTFEED: case HLO_SEND: return infer_outgoing(x, o);
    case HLO_SEND_DONE: case HLO_RECV_DONE: return infer_done(x, o);
    case HLO_TUPLE: return infer_tuple(x, o);
    case HLO_GET_TUPLE_ELEMENT: return infer_gte(x, o);
    case HLO_OPTIMIZATION_BARRIER: *o = plain(ops(x, 0)); return true;
    case HLO_BROADCAST: return infer_broadcast(x, o);
    case HLO_RESHAPE: case HLO_BITCAST: return infer_reshape(x, o);
    case HLO_TRANSPOSE: return infer_transpose(x, o);
    case HLO_SLICE: return infer_slice(x, o);
    case HLO_DYNAMIC_SLICE: return infer_dynamic_slice(x, o);
    case HLO_DYNAMIC_UPDATE_SLICE: return infer_dynamic_update_slice(x, o);
    case HLO_PAD: return infer_pad(x, o);
    case HLO_CONCATENATE: return infer_concatenate(x, o);
    case HLO_REVERSE: return infer_reverse(x, o);
    case HLO_GATHER: return infer_gather(x, o);
    case HLO_SCATTER: return infer_scatter(x, o);
    case HLO_SORT: return infer_sort(x, o);
    case HLO_TOPK: return infer_topk(x, o);
    case HLO_DOT: return infer_dot(x, o);
    case HLO_RAGGED_DOT: return infer_ragged_dot(x, o);
    case HLO_CONVOLUTION: return infer_convolution(x, o);
    case HLO_REDUCE: return infer_reduce(x, o);
    case HLO_REDUCE_WINDOW: return infer_reduce_window(x, o);
    case HLO_SELECT_AND_SCATTER: return infer_select_and_scatter(x, o);
    case HLO_MAP: return infer_map(x, o);
    case HLO_RNG: return infer_rng(x, o);
    case HLO_RNG_BIT_GENERATOR: return infer_rng_bit_generator(x, o);
    case HLO_WHILE: return infer_while(x, o);
    case HLO_CONDITIONAL: return infer_conditional(x, o);
    case HLO_CALL: return infer_call(x, o);
    case HLO_CUSTOM_CALL: return infer_custom_call(x, o);
    case HLO_ALL_REDUCE: case HLO_ALL_GATHER: case HLO_REDUCE_SCATTER: case HLO_ALL_TO_ALL:
    case HLO_COLLECTIVE_PERMUTE: return infer_collective(x, o);
    default: break;
    }
    switch (hlo_opcode_category(x->in->op)) {
    case 'U': return infer_unary(x, o);
    case 'B': return infer_binary(x, o);
    case 'T': return infer_ternary(x, o);
    default: return fail(x, "no shape rule for opcode %s", opcode(x));
    }
}

bool verify_infer_inst(Infer *x, Shape *o)
{
    memset(o, 0, sizeof *o);
    if (x->in->op >= HLO_OPCODE_COUNT) return fail(x, "unknown opcode %d", (int)x->in->op);
    if (!check_arity(x) || !check_operands(x)) return false;
    if (!dispatch(x, o)) return false;
    if (x->overflow) return fail(x, "shape arithmetic overflows 64-bit integers");
    if (!verify_shape_ok(o, 0)) return fail(x, "the inferred shape is malformed");
    return true;
}

void verify_infer_setup(Infer *x, const HloModule *m, int32_t c, int32_t i, char *err, size_t errlen)
{
    memset(x, 0, offsetof(Infer, sbuf));
    x->m = m;
    x->comp = &m->comps[c];
    x->in = &x->comp->insts[i];
    x->a = hlo_attrs(x->in);
    x->err = err;
    x->errlen = errlen;
    if (err && errlen) err[0] = 0;
}

bool verify_infer_shape(const HloModule *m, int32_t c, int32_t i, Shape *out, char *err, size_t errlen)
{
    Infer x;
    memset(out, 0, sizeof *out);
    if (c < 0 || c >= m->n_comps || i < 0 || i >= m->comps[c].n_insts) {
        if (err && errlen) snprintf(err, errlen, "no instruction %d in computation %d", i, c);
        return false;
    }
    verify_infer_setup(&x, m, c, i, err, errlen);
    x.out = m->arena;
    bool ok = verify_infer_inst(&x, out);
    if (x.own_tmp) arena_destroy(x.tmp);
    return ok;
}

