/* parse_attrs.c - lowering of attribute values and constants (part of parse.c's
 * AST -> IR lowering; shared state in parse_internal.h).
 *
 * parse_lower_attrs sorts an instruction's attributes three ways: the typed
 * ones of the table ATTR_SPECS are checked and stored in HloAttrs by one
 * at_* function each (integer lists, computation references, enums, slice,
 * padding, window, dim_labels, replica groups in both the list and the iota
 * form, source-target pairs); `sharding=` goes to parse_sharding.c; anything
 * else XLA takes on the op (metadata, frontend_attributes, backend_config,
 * ...) is kept verbatim as RawAttr, metadata and frontend_attributes after
 * a check of their syntax (check_metadata, check_frontend) and of the
 * Shardy meshes frontend_attributes write (parse_check_sdy_meshes, which
 * also notes the inline ones for bind.c's choice of mesh).  A name given
 * twice, one the op does not take and one XLA does not know are errors.
 * parse_lower_literal turns `constant(...)` text into a Literal: it checks
 * the nesting and every value against the shape before it allocates, so a
 * short text that claims a huge shape costs nothing.
 * Everything the IR keeps goes to the module arena; temporaries to lw->tmp.
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "parse_internal.h"
#include "spmdc/sdy.h"

/* ================================================================ value helpers */

/* `{1,2,3}` -> IntList in the module arena.  NULL v is the empty list. */
static bool intlist_of(Lower *lw, const AstVal *attr, const AstVal *v, IntList *out)
{
    if (!is_group(v, AV_BRACE)) return parse_want(lw, attr, v, "a list of integers like {0,1}");
    int32_t n = ast_count(v->child);
    int64_t *vals = n ? ARENA_ARRAY(lw->m->arena, int64_t, n) : NULL;
    int32_t k = 0;
    for (const AstVal *e = v->child; e; e = e->next) {
        const AstVal *x = elem_single(e);
        if (!x || x->kind != AV_INT || x->t.is_u64)
            return parse_want(lw, attr, x ? x : e, "a list of integers like {0,1}");
        vals[k++] = x->t.i;
    }
    out->n = n;
    out->v = vals;
    return true;
}

static bool bool_of(Lower *lw, const AstVal *attr, const AstVal *v, bool *out)
{
    *out = false;
    if (is_word(v, "true")) *out = true;
    else if (is_word(v, "false")) *out = false;
    else return parse_want(lw, attr, v, "true or false");
    return true;
}

/* Splits "3x3" / "1_2x-1_0" style text into numbers; false on overflow or
 * malformed text.  Returns the count in *n (at most max). */
static bool split_nums(const char *s, uint32_t len, char sep, int64_t *out, int max, int *n)
{
    int k = 0;
    uint32_t i = 0;
    while (i <= len) {
        bool neg = i < len && s[i] == '-';
        if (neg) i++;
        uint64_t v = 0;
        uint32_t start = i;
        for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
            uint64_t d = (uint64_t)(s[i] - '0');
            if (v > ((uint64_t)INT64_MAX - d) / 10) return false;
            v = v * 10 + d;
        }
        if (i == start || k >= max) return false;
        out[k++] = neg ? -(int64_t)v : (int64_t)v;
        if (i == len) break;
        if (s[i] != sep) return false;
        i++;
    }
    *n = k;
    return true;
}

/* ================================================================ literals */

typedef struct LitFill {
    ElemType type;
    const Shape *shape;
    int64_t n, cap, k; /* expected, allocated, written */
    int64_t *i;
    double *f;
} LitFill;

/* *overflow: a finite number too large for a double (strtod's ERANGE). */
static bool lit_float(Lower *lw, const AstVal *v, double *out, bool *overflow)
{
    *out = 0;
    *overflow = false;
    char buf[80];
    switch ((AstValKind)v->kind) {
    case AV_INT:
    case AV_DECIMAL:
        if (v->t.n >= sizeof buf) return parse_err(lw, &v->loc, "number %.*s is too long", TOKF(v->t));
        memcpy(buf, v->t.s, v->t.n);
        buf[v->t.n] = 0;
        errno = 0;
        *out = strtod(buf, NULL);
        *overflow = errno == ERANGE && isinf(*out);
        return true;
    case AV_NAN: *out = v->t.s[0] == '-' ? -NAN : NAN; return true;
    case AV_NEGINF: *out = -INFINITY; return true;
    case AV_WORD:
        if (ast_tok_eq(v->t, "inf")) {
            *out = INFINITY;
            return true;
        }
        break;
    default: break;
    }
    return parse_err(lw, &v->loc, "expected a number, found %s", describe(lw, v));
}

/* The finite range of a floating-point literal of type t, as XLA 0.10.2's
 * parser checks it (measured value by value against it): f16 and bf16
 * literals are rounded to f32 first, others are taken as doubles; out of range when
 * rounding that to t (to nearest, ties to even) overflows, i.e. |x| >
 * *bound = max + ulp(max)/2, or |x| == *bound and the tie rounds away from
 * max (max's significand is odd; *tie_ok false).  *max is the largest finite
 * value (for the message).  False for types XLA does not check (f64, whose
 * test is strtod's own overflow; f4e2m1fn, which XLA's parser accepts at
 * any magnitude). */
static bool float_bound(ElemType t, double *max, double *bound, bool *tie_ok)
{
    /* max = (2 - 2^-m) * 2^e for significand bits m; fn/fnuz types whose
     * all-ones pattern is NaN lose one step (noted per row). */
    *tie_ok = false;
    switch (t) {
    case ET_F16: *max = 65504.0; *bound = 65520.0; return true;
    case ET_BF16: *max = 0x1.fep127; *bound = 0x1.ffp127; return true;
    case ET_F32: *max = 0x1.fffffep127; *bound = 0x1.ffffffp127; return true;
    case ET_F8E5M2: case ET_F8E5M2FNUZ: *max = 57344.0; *bound = 61440.0; return true;
    case ET_F8E4M3: case ET_F8E4M3FNUZ: *max = 240.0; *bound = 248.0; return true;
    case ET_F8E4M3FN: *max = 448.0; *bound = 464.0; *tie_ok = true; return true; /* 1.110b x 2^8: even */
    case ET_F8E4M3B11FNUZ: *max = 30.0; *bound = 31.0; return true;
    case ET_F8E3M4: *max = 15.5; *bound = 15.75; return true;
    case ET_F8E8M0FNU: *max = 0x1p127; *bound = 0x1.8p127; return true;
    default: return false;
    }
}

/* A finite float literal v (already read as *x) must fit type t. */
static bool lit_float_fits(Lower *lw, const AstVal *v, ElemType t, double x, bool overflowed)
{
    if (isnan(x) || (isinf(x) && !overflowed)) return true; /* written as nan / inf */
    double max, bound;
    bool tie_ok, out = overflowed;
    if (t == ET_F8E8M0FNU && x <= 0) /* powers of two only: no zero, no sign */
        return parse_err(lw, &v->loc, "value %.*s is out of range for f8e8m0fnu (positive powers of two)", TOKF(v->t));
    if (!out && float_bound(t, &max, &bound, &tie_ok)) {
        /* |x| at or above f32's own rounding bound overflows f32 (a cast would be undefined) */
        double a = fabs(x);
        if (t == ET_F16 || t == ET_BF16) a = a >= 0x1.ffffffp127 ? INFINITY : (double)(float)a;
        out = a > bound || (a == bound && !tie_ok);
    }
    if (!out) return true;
    if (!float_bound(t, &max, &bound, &tie_ok)) max = 0x1.fffffffffffffp1023;
    return parse_err(lw, &v->loc, "value %.*s is out of range for %s (largest finite value %g)", TOKF(v->t),
                     elem_type_name(t), max);
}

static bool lit_int(Lower *lw, const AstVal *v, ElemType t, int64_t *out)
{
    *out = 0;
    if (t == ET_PRED && (is_word(v, "true") || is_word(v, "false"))) {
        *out = is_word(v, "true");
        return true;
    }
    if (v->kind != AV_INT)
        return parse_err(lw, &v->loc, "expected %s for a %s constant, found %s",
                         t == ET_PRED ? "true, false, 0 or 1" : "an integer", elem_type_name(t), describe(lw, v));
    int bits = elem_type_bits(t);
    int64_t x = v->t.i;
    bool fits;
    if (t == ET_PRED) fits = !v->t.is_u64 && (x == 0 || x == 1);
    else if (elem_type_is_unsigned_int(t))
        fits = (x >= 0 || v->t.is_u64) && (bits == 64 || (x >= 0 && x < ((int64_t)1 << bits)));
    else fits = !v->t.is_u64 && (bits == 64 || (x >= -((int64_t)1 << (bits - 1)) && x < ((int64_t)1 << (bits - 1))));
    if (!fits) return parse_err(lw, &v->loc, "%.*s does not fit in %s", TOKF(v->t), elem_type_name(t));
    *out = x;
    return true;
}

static bool lit_scalar(Lower *lw, LitFill *lf, const AstVal *v)
{
    int64_t k = lf->k++;
    bool store = k < lf->cap;
    if (elem_type_is_complex(lf->type)) {
        if (!is_group(v, AV_PAREN) || ast_count(v->child) != 2)
            return parse_err(lw, &v->loc, "expected a complex value like (1, 2), found %s", describe(lw, v));
        double re, im;
        bool ore, oim;
        ElemType part = lf->type == ET_C64 ? ET_F32 : ET_F64;
        const AstVal *vre = elem_single(v->child) ? elem_single(v->child) : v->child;
        const AstVal *vim = elem_single(v->child->next) ? elem_single(v->child->next) : v->child->next;
        if (!lit_float(lw, vre, &re, &ore) || !lit_float_fits(lw, vre, part, re, ore)) return false;
        if (!lit_float(lw, vim, &im, &oim) || !lit_float_fits(lw, vim, part, im, oim)) return false;
        if (store) {
            lf->f[2 * k] = re;
            lf->f[2 * k + 1] = im;
        }
        return true;
    }
    if (elem_type_is_float(lf->type)) {
        double d;
        bool over;
        if (!lit_float(lw, v, &d, &over) || !lit_float_fits(lw, v, lf->type, d, over)) return false;
        if (store) lf->f[k] = d;
        return true;
    }
    int64_t x;
    if (!lit_int(lw, v, lf->type, &x)) return false;
    if (store) lf->i[k] = x;
    return true;
}

/* Walks `{...}` nested (rank - level) deep; innermost groups hold dims[rank-1]. */
static bool lit_nested(Lower *lw, LitFill *lf, const AstVal *v, int32_t level)
{
    const Shape *s = lf->shape;
    if (level == s->rank) return lit_scalar(lw, lf, v);
    if (!is_group(v, AV_BRACE))
        return parse_err(lw, &v->loc, "expected '{' (a %s constant nests %d level%s of braces), found %s",
                         parse_shape_str(lw, s), s->rank, s->rank == 1 ? "" : "s", describe(lw, v));
    int32_t n = ast_count(v->child);
    if (n != s->dims[level])
        return parse_err(lw, &v->loc, "this group of a %s constant has %d value%s, expected %lld",
                         parse_shape_str(lw, s), n, n == 1 ? "" : "s", (long long)s->dims[level]);
    for (const AstVal *e = v->child; e; e = e->next) {
        const AstVal *x = elem_single(e);
        if (!x) return parse_err(lw, &e->loc, "expected one value, found %s", describe(lw, e));
        if (!lit_nested(lw, lf, x, level + 1)) return false;
    }
    return true;
}

static bool lower_tuple_literal(Lower *lw, const Shape *s, const AstVal *v, Literal *out)
{
    if (!is_group(v, AV_PAREN) || ast_count(v->child) != s->n_elems)
        return parse_err(lw, &v->loc, "a %s constant needs a tuple of %d literals like (1, {2,3}), found %s",
                         parse_shape_str(lw, s), s->n_elems, describe(lw, v));
    out->n_elems = s->n_elems;
    out->elems = ARENA_ARRAY(lw->m->arena, Literal, s->n_elems ? s->n_elems : 1);
    int32_t k = 0;
    for (const AstVal *e = v->child; e; e = e->next, k++) {
        const AstVal *x = elem_single(e);
        if (!x) return parse_err(lw, &e->loc, "expected one literal, found %s", describe(lw, e));
        if (!parse_lower_literal(lw, &s->elems[k], x, &out->elems[k])) return false;
    }
    return true;
}

bool parse_lower_literal(Lower *lw, const Shape *s, const AstVal *v, Literal *out)
{
    memset(out, 0, sizeof *out);
    if (s->type == ET_TUPLE) return lower_tuple_literal(lw, s, v, out);
    if (elem_type_bits(s->type) == 0)
        return parse_err(lw, &v->loc, "constants of type %s are not supported", elem_type_name(s->type));
    int64_t n = 1;
    for (int32_t d = 0; d < s->rank && n >= 0; d++) n = mul_capped(n, s->dims[d], INT64_MAX / 4);
    if (n < 0) return parse_err(lw, &v->loc, "constant of shape %s has too many elements", parse_shape_str(lw, s));
    out->n = n;
    const AstVal *inner = is_group(v, AV_BRACE) ? elem_single(v->child) : NULL;
    if (s->rank > 0 && inner && inner->kind == AV_PUNCT && inner->punct == AP_ELLIPSIS && !v->child->next) {
        out->elided = true; /* `{...}`: values unspecified, none stored */
        return true;
    }
    if (s->rank > 0 && n > 0 && !is_group(v, AV_BRACE)) {
        /* one value for an array: XLA's parser sets the first element to it
         * and the others to zero (f32[2,3] constant(7) is {{7,0,0},{0,0,0}}) */
        LitFill one = {s->type, s, 1, 0, 0, NULL, NULL};
        if (!lit_scalar(lw, &one, v)) return false;
        one.cap = 1;
        one.k = 0;
        if (elem_type_is_float(s->type) || elem_type_is_complex(s->type))
            one.f = ARENA_ARRAY(lw->m->arena, double, n * (elem_type_is_complex(s->type) ? 2 : 1));
        else
            one.i = ARENA_ARRAY(lw->m->arena, int64_t, n);
        lit_scalar(lw, &one, v);
        out->i = one.i;
        out->f = one.f;
        diag_warning(lw->diag, ast_span(lw->cx, &v->loc),
                     "a %s constant given one value sets its first element to it and the others to zero, as XLA's "
                     "parser reads it; write {...} with every element, or broadcast a scalar, for a splat",
                     parse_shape_str(lw, s));
        return true;
    }
    /* Pass 1 checks the structure and every value without storing (so a
     * short text claiming a huge shape allocates nothing); pass 2 stores. */
    LitFill lf = {s->type, s, n, 0, 0, NULL, NULL};
    if (!lit_nested(lw, &lf, v, 0)) return false;
    SPMDC_ASSERT(lf.k == n);
    lf.cap = n;
    lf.k = 0;
    if (elem_type_is_float(s->type) || elem_type_is_complex(s->type))
        lf.f = ARENA_ARRAY(lw->m->arena, double, (n ? n : 1) * (elem_type_is_complex(s->type) ? 2 : 1));
    else
        lf.i = ARENA_ARRAY(lw->m->arena, int64_t, n ? n : 1);
    lit_nested(lw, &lf, v, 0);
    out->i = lf.i;
    out->f = lf.f;
    return true;
}

/* ================================================================ iota device lists */

/* Checks `[dims] T(perm)` of an iota form; fills perm (identity without T). */
bool parse_iota_source(Lower *lw, const AstVal *dims_v, const AstVal *perm_v, bool need_t, int64_t *dims,
                              int32_t *nd, int32_t *perm, int64_t *total, int32_t max_dims)
{
    int32_t n = 0;
    int64_t prod = 1;
    for (const AstVal *e = dims_v->child; e; e = e->next) {
        const AstVal *x = elem_single(e);
        if (n == max_dims) return parse_err(lw, &e->loc, "iota source has more than %d dimensions", max_dims);
        if (!parse_int_of(lw, x ? x : e, "iota source dimension", &dims[n])) return false;
        if (dims[n] < 1) return parse_err(lw, &x->loc, "iota source dimensions must be at least 1");
        prod = mul_capped(prod, dims[n++], SPMDC_MAX_DEVICES);
        if (prod < 0) return parse_err(lw, &dims_v->loc, "iota source has more than %d devices", SPMDC_MAX_DEVICES);
    }
    if (n == 0) return parse_err(lw, &dims_v->loc, "iota source '[...]' is empty");
    for (int32_t i = 0; i < n; i++) perm[i] = i;
    if (!perm_v) {
        if (need_t && n > 1)
            return parse_err(lw, &dims_v->loc, "an iota source with %d dimensions needs a transpose: write T(...) "
                                               "after '[...]', e.g. T(1,0)", n);
        *nd = n;
        *total = prod;
        return true;
    }
    if (ast_count(perm_v->child) != n)
        return parse_err(lw, &perm_v->loc, "T(...) must list %d dimension%s, one per iota source dimension", n,
                         n == 1 ? "" : "s");
    uint32_t seen = 0;
    int32_t k = 0;
    for (const AstVal *e = perm_v->child; e; e = e->next, k++) {
        const AstVal *x = elem_single(e);
        int64_t p;
        if (!parse_int_of(lw, x ? x : e, "T(...)", &p)) return false;
        if (p < 0 || p >= n || (seen >> p & 1))
            return parse_err(lw, &x->loc, "T(...) must be a permutation of 0..%d", n - 1);
        seen |= 1u << p;
        perm[k] = (int32_t)p;
    }
    *nd = n;
    *total = prod;
    return true;
}

/* Device ids of reshape(transpose(iota(dims), perm)) in row-major order. */
static void iota_expand(const int64_t *dims, int32_t nd, const int32_t *perm, int64_t total, int64_t *out)
{
    int64_t te[SPMDC_MAX_TILE_DIMS], stride[SPMDC_MAX_TILE_DIMS];
    for (int32_t i = 0; i < nd; i++) te[i] = dims[perm[i]];
    int64_t s = 1;
    for (int32_t i = nd - 1; i >= 0; i--) {
        stride[i] = s;
        s *= dims[i];
    }
    for (int64_t l = 0; l < total; l++) {
        int64_t rem = l, dev = 0;
        for (int32_t i = nd - 1; i >= 0; i--) {
            int64_t c = rem % te[i];
            rem /= te[i];
            dev += c * stride[perm[i]];
        }
        out[l] = dev;
    }
}

/* ================================================================ typed attributes */

typedef struct AttrSpec AttrSpec;
typedef bool (*AttrFn)(Lower *lw, const AstVal *attr, const AstVal *v, HloAttrs *a, const AttrSpec *spec);
struct AttrSpec {
    const char *name;
    AttrFn fn;
    size_t off;       /* HloAttrs field (or a small selector) */
    bool whole_value; /* fn gets the value's first prim with its juxtaposed followers */
    int32_t only;     /* 1 + the opcode whose HloAttrs.op_lists group the value fills (0: any
                         opcode); given to another opcode it is checked and dropped */
};

static bool at_intlist(Lower *lw, const AstVal *attr, const AstVal *v, HloAttrs *a, const AttrSpec *spec)
{
    IntList l;
    if (!intlist_of(lw, attr, v, &l)) return false;
    memcpy((char *)a + spec->off, &l, sizeof l);
    return true;
}

static bool at_int(Lower *lw, const AstVal *attr, const AstVal *v, HloAttrs *a, const AttrSpec *spec)
{
    if (!v || v->kind != AV_INT || v->t.is_u64) return parse_want(lw, attr, v, "an integer");
    if (v->t.i < 0) return parse_want(lw, attr, v, "a non-negative integer");
    memcpy((char *)a + spec->off, &v->t.i, sizeof(int64_t));
    return true;
}

/* An integer XLA requires to be at least 1 (reduce-precision's
 * exponent_bits: one bit tells zero from infinity; XLA 0.10.2 rejects 0). */
static bool at_positive(Lower *lw, const AstVal *attr, const AstVal *v, HloAttrs *a, const AttrSpec *spec)
{
    if (v && v->kind == AV_INT && !v->t.is_u64 && v->t.i < 1) return parse_want(lw, attr, v, "a positive integer");
    return at_int(lw, attr, v, a, spec);
}

static bool at_bool(Lower *lw, const AstVal *attr, const AstVal *v, HloAttrs *a, const AttrSpec *spec)
{
    bool b;
    if (!bool_of(lw, attr, v, &b)) return false;
    memcpy((char *)a + spec->off, &b, sizeof b);
    return true;
}

static bool at_string(Lower *lw, const AstVal *attr, const AstVal *v, HloAttrs *a, const AttrSpec *spec)
{
    if (!v || v->kind != AV_STRING) return parse_want(lw, attr, v, "a string");
    const char *s = ast_tok_str(lw->m->arena, v->t);
    memcpy((char *)a + spec->off, &s, sizeof s);
    return true;
}

/* A computation reference: must name a computation defined earlier. */
static bool comp_ref(Lower *lw, const AstVal *attr, const AstVal *v, int32_t *out)
{
    *out = -1;
    if (!v || (v->kind != AV_NAME && v->kind != AV_WORD)) return parse_want(lw, attr, v, "a computation name");
    NameEnt *e = name_find(lw->comp_names, v->t.s, v->t.n);
    if (!e) { /* maybe defined later: reported at the end of the module */
        Pending *p = ARENA_NEW(lw->keep, Pending);
        *p = (Pending){v->t, v->loc, lw->pending_comps};
        lw->pending_comps = p;
        return true;
    }
    if (e->idx >= lw->cur_comp) {
        parse_err(lw, &v->loc, "computation '%.*s' calls itself", TOKF(v->t));
        return false;
    }
    *out = e->idx;
    return true;
}

static bool at_comp(Lower *lw, const AstVal *attr, const AstVal *v, HloAttrs *a, const AttrSpec *spec)
{
    int32_t c;
    if (!comp_ref(lw, attr, v, &c)) return false;
    memcpy((char *)a + spec->off, &c, sizeof c);
    return true;
}

static bool at_complist(Lower *lw, const AstVal *attr, const AstVal *v, HloAttrs *a, const AttrSpec *spec)
{
    if (spec->off == offsetof(HloAttrs, branches) && a->branches_by_pred)
        return parse_err(lw, &attr->loc,
                         "branch_computations= cannot be combined with true_computation=/false_computation=");
    if (!is_group(v, AV_BRACE)) return parse_want(lw, attr, v, "a list of computations like {%a, %b}");
    IntList l = {ast_count(v->child), NULL};
    l.v = ARENA_ARRAY(lw->m->arena, int64_t, l.n ? l.n : 1);
    int32_t k = 0;
    for (const AstVal *e = v->child; e; e = e->next) {
        int32_t c;
        if (!comp_ref(lw, attr, elem_single(e) ? elem_single(e) : e, &c)) return false;
        l.v[k++] = c;
    }
    memcpy((char *)a + spec->off, &l, sizeof l);
    return true;
}

/* true_computation= / false_computation=: branches[0] / branches[1]. */
static bool at_branch(Lower *lw, const AstVal *attr, const AstVal *v, HloAttrs *a, const AttrSpec *spec)
{
    int32_t c;
    if (!comp_ref(lw, attr, v, &c)) return false;
    if (a->branches.n && !a->branches_by_pred)
        return parse_err(lw, &attr->loc, "%.*s= cannot be combined with branch_computations=", TOKF(attr->t));
    if (a->branches.n < 2) {
        int64_t *b = ARENA_ARRAY(lw->m->arena, int64_t, 2);
        b[0] = b[1] = -1;
        a->branches.v = b;
        a->branches.n = 2;
    }
    a->branches.v[spec->off] = c;
    a->branches_by_pred = true;
    return true;
}

static bool at_enum(Lower *lw, const AstVal *attr, const AstVal *v, const char *const *names, int32_t *out)
{
    *out = 0;
    for (int32_t i = 0; names[i]; i++)
        if (is_word(v, names[i])) {
            *out = i;
            return true;
        }
    StrBuf b = {0};
    sb_puts(&b, "one of");
    for (int32_t i = 0; names[i]; i++) sb_printf(&b, "%s %s", i ? "," : "", names[i]);
    bool r = parse_want(lw, attr, v, arena_strdup(lw->tmp, sb_cstr(&b)));
    sb_free(&b);
    return r;
}

static const char *const DIRECTIONS[] = {"EQ", "NE", "LT", "LE", "GT", "GE", NULL};
static const char *const COMPARE_TYPES[] = {"FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED", "PARTIALORDER", NULL};
static const char *const DISTRIBUTIONS[] = {"rng_uniform", "rng_normal", NULL};

static bool at_direction(Lower *lw, const AstVal *attr, const AstVal *v, HloAttrs *a, const AttrSpec *spec)
{
    (void)spec;
    int32_t k;
    if (!at_enum(lw, attr, v, DIRECTIONS, &k)) return false;
    a->direction = (CompareDir)k;
    return true;
}

static bool at_compare_type(Lower *lw, const AstVal *attr, const AstVal *v, HloAttrs *a, const AttrSpec *spec)
{
    (void)spec;
    int32_t k;
    if (!at_enum(lw, attr, v, COMPARE_TYPES, &k)) return false;
    a->compare_type = COMPARE_TYPES[k];
    return true;
}

static bool at_distribution(Lower *lw, const AstVal *attr, const AstVal *v, HloAttrs *a, const AttrSpec *spec)
{
    (void)spec;
    int32_t k;
    if (!at_enum(lw, attr, v, DISTRIBUTIONS, &k)) return false;
    a->rng_distribution = DISTRIBUTIONS[k];
    return true;
}

/* slice={[start:limit(:stride)], ...} */
static bool at_slice(Lower *lw, const AstVal *attr, const AstVal *v, HloAttrs *a, const AttrSpec *spec)
{
    (void)spec;
    static const char what[] = "slice ranges like {[0:4], [2:8:2]}";
    if (!is_group(v, AV_BRACE)) return parse_want(lw, attr, v, what);
    int32_t n = ast_count(v->child);
    int64_t *st = ARENA_ARRAY(lw->m->arena, int64_t, 3 * (n ? n : 1));
    int32_t k = 0;
    for (const AstVal *e = v->child; e; e = e->next, k++) {
        const AstVal *r = elem_single(e);
        const AstVal *x = is_group(r, AV_BRACKET) && r->child && !r->child->next ? r->child->child : NULL;
        int64_t num[3] = {0, 0, 1};
        int32_t got = 0;
        for (; x && got < 3; got++) {
            if (x->kind != AV_INT || x->t.is_u64) break;
            num[got] = x->t.i;
            x = x->next;
            if (!x) {
                got++;
                break;
            }
            if (x->kind != AV_PUNCT || x->punct != AP_COLON) break;
            x = x->next;
        }
        if (got < 2 || x) return parse_want(lw, attr, r ? r : e, what);
        st[k] = num[0];
        st[n + k] = num[1];
        st[2 * n + k] = num[2];
    }
    a->slice_start = (IntList){n, st};
    a->slice_limit = (IntList){n, st + n};
    a->slice_stride = (IntList){n, st + 2 * n};
    return true;
}

/* padding=lo_hi_interior x ... */
static bool at_padding(Lower *lw, const AstVal *attr, const AstVal *v, HloAttrs *a, const AttrSpec *spec)
{
    (void)spec;
    static const char what[] = "a padding config like 0_0x1_2 (low_high[_interior] per dimension)";
    if (!v || v->kind != AV_PAD) return parse_want(lw, attr, v, what);
    int64_t dims[SPMDC_MAX_RANK * 3];
    int32_t r = 0;
    const char *s = v->t.s, *e = s + v->t.n;
    int64_t *lo = ARENA_ARRAY(lw->m->arena, int64_t, 3 * SPMDC_MAX_RANK);
    while (s < e) {
        const char *x = memchr(s, 'x', (size_t)(e - s));
        if (!x) x = e;
        int n;
        /* a negative interior is read, and refused by the verifier with its value and dimension */
        if (r == SPMDC_MAX_RANK || !split_nums(s, (uint32_t)(x - s), '_', dims, 3, &n) || n < 2)
            return parse_want(lw, attr, v, what);
        lo[r] = dims[0];
        lo[SPMDC_MAX_RANK + r] = dims[1];
        lo[2 * SPMDC_MAX_RANK + r] = n == 3 ? dims[2] : 0;
        r++;
        s = x + 1;
    }
    a->pad_lo = (IntList){r, lo};
    a->pad_hi = (IntList){r, lo + SPMDC_MAX_RANK};
    a->pad_interior = (IntList){r, lo + 2 * SPMDC_MAX_RANK};
    return true;
}

/* One window sub-attribute value: INT or DXD (pad: PAD) -> per-dim numbers. */
static bool window_values(Lower *lw, const AstVal *sub, int64_t *vals, int *n, int64_t *pad_hi)
{
    const AstVal *v = sub->child;
    bool is_pad = ast_tok_eq(sub->t, "pad");
    if (is_pad && v && v->kind == AV_PAD) {
        const char *s = v->t.s, *e = s + v->t.n;
        int r = 0;
        while (s < e) {
            const char *x = memchr(s, 'x', (size_t)(e - s));
            if (!x) x = e;
            int64_t two[3];
            int k;
            if (r == SPMDC_MAX_RANK || !split_nums(s, (uint32_t)(x - s), '_', two, 2, &k) || k != 2) break;
            vals[r] = two[0];
            pad_hi[r++] = two[1];
            s = x + 1;
        }
        if (s >= e) {
            *n = r;
            return true;
        }
    } else if (!is_pad && v && (v->kind == AV_INT || v->kind == AV_DXD) &&
               split_nums(v->t.s, v->t.n, 'x', vals, SPMDC_MAX_RANK, n)) {
        return true;
    }
    return parse_err(lw, v ? &v->loc : &sub->loc, "window %.*s= expects %s, found %s", TOKF(sub->t),
                     is_pad ? "low_high per dimension like 1_1x0_0" : "one number per dimension like 3x3",
                     describe(lw, v));
}

static bool at_window(Lower *lw, const AstVal *attr, const AstVal *v, HloAttrs *a, const AttrSpec *spec)
{
    (void)spec;
    static const char *const subs[] = {"size", "stride", "pad", "lhs_dilate", "rhs_dilate", "rhs_reversal", NULL};
    if (!is_group(v, AV_BRACE) || (v->child && v->child->next))
        return parse_want(lw, attr, v, "a window like {size=3x3 stride=2x2 pad=1_1x1_1}");
    int64_t vals[6][SPMDC_MAX_RANK], pad_hi[SPMDC_MAX_RANK];
    int n[6] = {0};
    bool given[6] = {false};
    int rank = -1;
    for (const AstVal *sub = v->child ? v->child->child : NULL; sub; sub = sub->next) {
        int k = -1;
        for (int i = 0; sub->kind == AV_ATTR && subs[i]; i++)
            if (ast_tok_eq(sub->t, subs[i])) k = i;
        if (k < 0)
            return parse_err(lw, &sub->loc, "unknown window field %s (expected size=, stride=, pad=, lhs_dilate=, "
                                            "rhs_dilate= or rhs_reversal=)", describe(lw, sub));
        if (given[k]) return parse_err(lw, &sub->loc, "window field '%s=' given twice", subs[k]);
        given[k] = true;
        if (!window_values(lw, sub, vals[k], &n[k], pad_hi)) return false;
        if (rank >= 0 && n[k] != rank)
            return parse_err(lw, &sub->loc, "window field '%s=' has %d dimension%s, but earlier fields have %d",
                             subs[k], n[k], n[k] == 1 ? "" : "s", rank);
        rank = n[k];
    }
    if (rank > 0 && !given[0]) return parse_err(lw, &v->loc, "window has no size=");
    Window *w = ARENA_NEW(lw->m->arena, Window);
    w->rank = rank < 0 ? 0 : rank;
    for (int d = 0; d < w->rank; d++) {
        WindowDim *wd = &w->dims[d];
        wd->size = vals[0][d];
        wd->stride = given[1] ? vals[1][d] : 1;
        wd->pad_lo = given[2] ? vals[2][d] : 0;
        wd->pad_hi = given[2] ? pad_hi[d] : 0;
        wd->lhs_dilate = given[3] ? vals[3][d] : 1;
        wd->rhs_dilate = given[4] ? vals[4][d] : 1;
        wd->reversal = given[5] && vals[5][d] != 0;
        if (wd->size < 1 || wd->stride < 1 || wd->lhs_dilate < 1 || wd->rhs_dilate < 1 ||
            (given[5] && vals[5][d] != 0 && vals[5][d] != 1))
            return parse_err(lw, &v->loc, "window dimension %d: size, stride and dilations must be at least 1 and "
                                          "rhs_reversal 0 or 1", d);
    }
    a->window = w;
    return true;
}

/* One part of dim_labels: letters give batch/feature (or in/out) positions,
 * digits give spatial positions. */
static bool dim_label_part(const char *s, int32_t n, char c0, char c1, int64_t *p0, int64_t *p1, int64_t *sp,
                           int32_t *n_spatial)
{
    int32_t ns = 0;
    uint32_t seen = 0;
    *p0 = *p1 = -1;
    for (int32_t i = 0; i < n; i++) {
        if (s[i] == c0 && *p0 < 0) *p0 = i;
        else if (s[i] == c1 && *p1 < 0) *p1 = i;
        else if (s[i] >= '0' && s[i] <= '9' && s[i] - '0' < SPMDC_MAX_RANK && !(seen >> (s[i] - '0') & 1)) {
            seen |= 1u << (s[i] - '0');
            sp[s[i] - '0'] = i;
            ns++;
        } else if (s[i] != '?') {
            return false;
        }
    }
    *n_spatial = ns;
    return *p0 >= 0 && *p1 >= 0 && seen == (1u << ns) - 1;
}

static bool at_dim_labels(Lower *lw, const AstVal *attr, const AstVal *v, HloAttrs *a, const AttrSpec *spec)
{
    (void)spec;
    if (!v || v->kind != AV_DIMLABELS) return parse_want(lw, attr, v, "convolution dim labels like b01f_01io->b01f");
    /* The scanner guarantees the form <lhs>_<rhs>-><out>. */
    const char *s = v->t.s, *e = s + v->t.n;
    const char *us = memchr(s, '_', v->t.n);
    const char *ar = us;
    while (ar + 1 < e && !(ar[0] == '-' && ar[1] == '>')) ar++;
    ConvDims *cd = ARENA_NEW(lw->m->arena, ConvDims);
    int32_t n1, n2, n3;
    if (!dim_label_part(s, (int32_t)(us - s), 'b', 'f', &cd->in_batch, &cd->in_feature, cd->in_spatial, &n1) ||
        !dim_label_part(us + 1, (int32_t)(ar - us - 1), 'i', 'o', &cd->k_in, &cd->k_out, cd->k_spatial, &n2) ||
        !dim_label_part(ar + 2, (int32_t)(e - ar - 2), 'b', 'f', &cd->out_batch, &cd->out_feature, cd->out_spatial,
                        &n3) ||
        n1 != n2 || n2 != n3)
        return parse_err(lw, &v->loc, "malformed dim_labels %.*s: each part needs one b/f (i/o for the kernel) and "
                                      "the same spatial digits 0..n-1", TOKF(v->t));
    cd->n_spatial = n1;
    a->conv = cd;
    a->dim_labels = ast_tok_str(lw->m->arena, v->t);
    return true;
}

/* replica_groups={{0,1},{2,3}} or [G,S]<=[dims]T(perm) (v is the whole value). */
static bool at_replica_groups(Lower *lw, const AstVal *attr, const AstVal *v, HloAttrs *a, const AttrSpec *spec)
{
    (void)spec;
    ReplicaGroups *rg = &a->replica_groups;
    if (is_group(v, AV_BRACE) && !v->next) {
        int64_t n = ast_count(v->child), k = 0;
        for (const AstVal *e = v->child; e; e = e->next) {
            IntList l;
            if (!intlist_of(lw, attr, elem_single(e) ? elem_single(e) : e, &l)) return false;
            if (l.n == 0) return parse_err(lw, &e->loc, "empty replica group");
            if (e == v->child) {
                rg->group_size = l.n;
                rg->ids = ARENA_ARRAY(lw->m->arena, int64_t, n * l.n);
            } else if (l.n != rg->group_size) {
                return parse_err(lw, &e->loc, "replica groups must all have the same size: this one has %d ids, the "
                                              "first has %lld", l.n, (long long)rg->group_size);
            }
            memcpy(rg->ids + k, l.v, sizeof(int64_t) * (size_t)l.n);
            k += l.n;
        }
        rg->n_groups = n;
        return true;
    }
    const AstVal *gs = v, *le = gs ? gs->next : NULL, *src = le ? le->next : NULL, *t = src ? src->next : NULL;
    if (!is_group(gs, AV_BRACKET) || !le || le->kind != AV_PUNCT || le->punct != AP_LE ||
        !is_group(src, AV_BRACKET) || (t && (!is_group(t, AV_TPAREN) || t->next)))
        return parse_want(lw, attr, v, "groups like {{0,1},{2,3}} or [2,2]<=[4]");
    int64_t g[2], dims[SPMDC_MAX_TILE_DIMS], total = 0;
    int32_t nd = 0, perm[SPMDC_MAX_TILE_DIMS];
    if (ast_count(gs->child) != 2 || !elem_single(gs->child) || !elem_single(gs->child->next))
        return parse_want(lw, attr, gs, "[groups,group_size] before '<='");
    if (!parse_int_of(lw, elem_single(gs->child), "replica_groups", &g[0]) ||
        !parse_int_of(lw, elem_single(gs->child->next), "replica_groups", &g[1]))
        return false;
    if (!parse_iota_source(lw, src, t, false, dims, &nd, perm, &total, SPMDC_MAX_TILE_DIMS)) return false;
    if (g[0] < 1 || g[1] < 1 || mul_capped(g[0], g[1], SPMDC_MAX_DEVICES) != total)
        return parse_err(lw, &gs->loc,
                         "replica_groups [%lld,%lld] must hold exactly the %lld devices of its iota source",
                         (long long)g[0], (long long)g[1], (long long)total);
    rg->n_groups = g[0];
    rg->group_size = g[1];
    rg->ids = ARENA_ARRAY(lw->m->arena, int64_t, total);
    iota_expand(dims, nd, perm, total, rg->ids);
    return true;
}

static bool at_pairs(Lower *lw, const AstVal *attr, const AstVal *v, HloAttrs *a, const AttrSpec *spec)
{
    (void)spec;
    static const char what[] = "pairs like {{0,1},{1,0}}";
    if (!is_group(v, AV_BRACE)) return parse_want(lw, attr, v, what);
    int32_t n = ast_count(v->child), k = 0;
    int64_t *p = ARENA_ARRAY(lw->m->arena, int64_t, 2 * (n ? n : 1));
    for (const AstVal *e = v->child; e; e = e->next, k++) {
        IntList l;
        const AstVal *x = elem_single(e);
        if (!x) return parse_want(lw, attr, e, what);
        if (!intlist_of(lw, attr, x, &l)) return false;
        if (l.n != 2) return parse_err(lw, &x->loc, "a source_target pair needs exactly 2 ids, found %d", l.n);
        p[2 * k] = l.v[0];
        p[2 * k + 1] = l.v[1];
    }
    a->n_pairs = n;
    a->pairs = p;
    return true;
}

#define F(field) offsetof(HloAttrs, field)
#define ONLY(op) ((int32_t)(op) + 1)
static const AttrSpec ATTR_SPECS[] = {
    {"dimensions", at_intlist, F(dimensions), false, 0},
    {"lhs_contracting_dims", at_intlist, F(lhs_contracting), false, ONLY(HLO_DOT)},
    {"rhs_contracting_dims", at_intlist, F(rhs_contracting), false, ONLY(HLO_DOT)},
    {"lhs_batch_dims", at_intlist, F(lhs_batch), false, ONLY(HLO_DOT)},
    {"rhs_batch_dims", at_intlist, F(rhs_batch), false, ONLY(HLO_DOT)},
    {"lhs_ragged_dims", at_intlist, F(lhs_ragged), false, ONLY(HLO_RAGGED_DOT)},
    {"rhs_group_dims", at_intlist, F(rhs_group), false, ONLY(HLO_RAGGED_DOT)},
    {"dynamic_slice_sizes", at_intlist, F(dynamic_slice_sizes), false, ONLY(HLO_DYNAMIC_SLICE)},
    {"offset_dims", at_intlist, F(offset_dims), false, ONLY(HLO_GATHER)},
    {"collapsed_slice_dims", at_intlist, F(collapsed_slice_dims), false, ONLY(HLO_GATHER)},
    {"start_index_map", at_intlist, F(start_index_map), false, ONLY(HLO_GATHER)},
    {"slice_sizes", at_intlist, F(slice_sizes), false, ONLY(HLO_GATHER)},
    {"operand_batching_dims", at_intlist, F(operand_batching_dims), false, ONLY(HLO_GATHER)},
    {"start_indices_batching_dims", at_intlist, F(start_indices_batching_dims), false, ONLY(HLO_GATHER)},
    {"update_window_dims", at_intlist, F(update_window_dims), false, ONLY(HLO_SCATTER)},
    {"inserted_window_dims", at_intlist, F(inserted_window_dims), false, ONLY(HLO_SCATTER)},
    {"scatter_dims_to_operand_dims", at_intlist, F(scatter_dims_to_operand_dims), false, ONLY(HLO_SCATTER)},
    {"input_batching_dims", at_intlist, F(input_batching_dims), false, ONLY(HLO_SCATTER)},
    {"scatter_indices_batching_dims", at_intlist, F(scatter_indices_batching_dims), false, ONLY(HLO_SCATTER)},
    {"feature_group_count", at_int, F(feature_group_count), false, 0},
    {"batch_group_count", at_int, F(batch_group_count), false, 0},
    {"index", at_int, F(index), false, 0},
    {"iota_dimension", at_int, F(iota_dimension), false, 0},
    {"exponent_bits", at_positive, F(exponent_bits), false, 0},
    {"mantissa_bits", at_int, F(mantissa_bits), false, 0},
    {"channel_id", at_int, F(channel_id), false, 0},
    {"index_vector_dim", at_int, F(index_vector_dim), false, 0},
    {"use_global_device_ids", at_bool, F(use_global_device_ids), false, 0},
    {"is_stable", at_bool, F(is_stable), false, 0},
    {"k", at_int, F(k), false, 0},
    {"largest", at_bool, F(largest), false, 0},
    {"indices_are_sorted", at_bool, F(indices_are_sorted), false, 0},
    {"unique_indices", at_bool, F(unique_indices), false, 0},
    {"to_apply", at_comp, F(to_apply), false, 0},
    {"scatter", at_comp, F(to_apply), false, 0},
    {"select", at_comp, F(select), false, 0},
    {"condition", at_comp, F(condition), false, 0},
    {"body", at_comp, F(body), false, 0},
    {"true_computation", at_branch, 0, false, 0},
    {"false_computation", at_branch, 1, false, 0},
    {"branch_computations", at_complist, F(branches), false, 0},
    {"called_computations", at_complist, F(called), false, 0},
    {"custom_call_target", at_string, F(custom_call_target), false, 0},
    {"direction", at_direction, 0, false, 0},
    {"type", at_compare_type, 0, false, 0}, /* compare only (xla_rejects_attr) */
    {"distribution", at_distribution, 0, false, 0},
    {"slice", at_slice, 0, false, ONLY(HLO_SLICE)},
    {"padding", at_padding, 0, false, ONLY(HLO_PAD)},
    {"window", at_window, 0, false, 0},
    {"dim_labels", at_dim_labels, 0, false, 0},
    {"replica_groups", at_replica_groups, 0, true, 0},
    {"source_target_pairs", at_pairs, 0, false, 0},
};
#undef F
#undef ONLY
#define N_ATTR_SPECS ((int32_t)(sizeof ATTR_SPECS / sizeof ATTR_SPECS[0]))
_Static_assert(sizeof ATTR_SPECS / sizeof ATTR_SPECS[0] <= 64, "attribute seen-mask is a uint64_t");

/* Attributes XLA's HLO parser requires per opcode ("attribute X is expected
 * but not seen"), checked against XLA 0.10.2's parser op by op; spmdc never
 * substitutes a default for one of them.  A conditional needs
 * true_computation and false_computation, or branch_computations (checked
 * in parse_lower_attrs). */
static const struct {
    HloOpcode op;
    const char *names[6];
} REQUIRED_ATTRS[] = {
    {HLO_COMPARE, {"direction"}},
    {HLO_BROADCAST, {"dimensions"}},
    {HLO_TRANSPOSE, {"dimensions"}},
    {HLO_CONCATENATE, {"dimensions"}},
    {HLO_REVERSE, {"dimensions"}},
    {HLO_REDUCE, {"dimensions", "to_apply"}},
    {HLO_SORT, {"dimensions", "to_apply"}},
    {HLO_SLICE, {"slice"}},
    {HLO_PAD, {"padding"}},
    {HLO_IOTA, {"iota_dimension"}},
    {HLO_REDUCE_PRECISION, {"exponent_bits", "mantissa_bits"}},
    {HLO_GET_TUPLE_ELEMENT, {"index"}},
    {HLO_CONVOLUTION, {"dim_labels"}},
    {HLO_DYNAMIC_SLICE, {"dynamic_slice_sizes"}},
    {HLO_GATHER, {"offset_dims", "collapsed_slice_dims", "start_index_map", "index_vector_dim", "slice_sizes"}},
    {HLO_SCATTER, {"update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims", "index_vector_dim",
                   "to_apply"}},
    {HLO_WHILE, {"condition", "body"}},
    {HLO_CALL, {"to_apply"}},
    {HLO_MAP, {"to_apply"}},
    {HLO_REDUCE_WINDOW, {"to_apply"}},
    {HLO_SELECT_AND_SCATTER, {"select", "scatter"}},
    {HLO_ALL_REDUCE, {"to_apply"}},
    {HLO_ALL_GATHER, {"dimensions"}},
    {HLO_REDUCE_SCATTER, {"dimensions", "to_apply"}},
    {HLO_COLLECTIVE_PERMUTE, {"source_target_pairs"}},
    {HLO_CUSTOM_CALL, {"custom_call_target"}},
    {HLO_RNG, {"distribution"}},
};

/* Whether the attribute named `name` (an ATTR_SPECS entry) is in seen. */
static bool attr_seen(Lower *lw, uint64_t seen, const char *name)
{
    int32_t k = kw_find(&lw->attr_specs, name, (uint32_t)strlen(name));
    SPMDC_ASSERT(k >= 0);
    return (seen >> k) & 1;
}

/* Reports every attribute op requires that the instruction lacks. */
static bool check_required(Lower *lw, const AstInst *ai, HloOpcode op, uint64_t seen)
{
    bool ok = true;
    if (op == HLO_CONDITIONAL && !attr_seen(lw, seen, "branch_computations") &&
        !(attr_seen(lw, seen, "true_computation") && attr_seen(lw, seen, "false_computation")))
        ok = parse_err(lw, &ai->opcode_loc, "conditional needs true_computation= and false_computation=, or "
                                            "branch_computations=");
    int k = op < HLO_OPCODE_COUNT ? lw->required_attrs[op] : -1;
    if (k >= 0) {
        for (int j = 0; j < 6 && REQUIRED_ATTRS[k].names[j]; j++)
            if (!attr_seen(lw, seen, REQUIRED_ATTRS[k].names[j]))
                ok = parse_err(lw, &ai->opcode_loc, "%s needs attribute %s=%s", hlo_opcode_name(op),
                               REQUIRED_ATTRS[k].names[j],
                               op == HLO_COMPARE ? " (EQ, NE, LT, LE, GT or GE)" : "");
    }
    return ok;
}

/* ================================================================ verbatim attributes */

static int cmp_attr_name(const void *pa, const void *pb)
{
    const AstVal *a = *(const AstVal *const *)pa, *b = *(const AstVal *const *)pb;
    uint32_t n = a->t.n < b->t.n ? a->t.n : b->t.n;
    int c = memcmp(a->t.s, b->t.s, n);
    if (c == 0 && a->t.n != b->t.n) c = a->t.n < b->t.n ? -1 : 1;
    if (c == 0) c = a->loc.off < b->loc.off ? -1 : a->loc.off > b->loc.off;
    return c;
}

/* Reports every attribute of list[0..n) whose name an earlier one used. */
bool parse_check_dup_names(Lower *lw, const AstVal **list, int32_t n)
{
    bool ok = true;
    if (n <= 16) {
        for (int32_t i = 1; i < n; i++)
            for (int32_t j = 0; j < i; j++)
                if (list[i]->t.n == list[j]->t.n && memcmp(list[i]->t.s, list[j]->t.s, list[i]->t.n) == 0) {
                    ok = parse_err(lw, &list[i]->loc, "attribute '%.*s' is given twice", TOKF(list[i]->t));
                    parse_note(lw, &list[j]->loc, "first given here");
                    break;
                }
        return ok;
    }
    const AstVal **sorted = ARENA_ARRAY(lw->tmp, const AstVal *, n);
    memcpy(sorted, list, sizeof(*sorted) * (size_t)n);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_attr_name);
    for (int32_t i = 1, first = 0; i < n; i++) {
        if (sorted[i]->t.n == sorted[first]->t.n && memcmp(sorted[i]->t.s, sorted[first]->t.s, sorted[i]->t.n) == 0) {
            ok = parse_err(lw, &sorted[i]->loc, "attribute '%.*s' is given twice", TOKF(sorted[i]->t));
            parse_note(lw, &sorted[first]->loc, "first given here");
        } else {
            first = i;
        }
    }
    return ok;
}

/* name=value kept as written: text is the value's source text. */
RawAttr *parse_make_raw(Lower *lw, const AstVal **list, int32_t n)
{
    RawAttr *r = ARENA_ARRAY(lw->m->arena, RawAttr, n);
    for (int32_t i = 0; i < n; i++) {
        r[i].name = ast_tok_str(lw->m->arena, list[i]->t);
        uint32_t off = list[i]->child->loc.off, end = list[i]->loc.end;
        r[i].text = arena_strndup(lw->m->arena, lw->cx->text + off, end > off ? end - off : 0);
    }
    return r;
}

/* ================================================================ instruction attributes */

/* The attributes XLA's HLO parser (jaxlib 0.10.2) takes on each opcode besides
 * the ones every instruction may carry (XLA_COMMON_ATTRS), space-separated;
 * from its "unexpected attribute ... Allowed attributes:" message for each
 * opcode.  XLA_KNOWN_ATTRS is every name of the table and those of the
 * opcodes spmdc does not take (fft, reduce-precision, batch-norm-*, fusion,
 * triangular-solve, ...): one of those on an op whose entry lacks it is an
 * error, as in XLA, and so is a name XLA does not know at all (unknown_attr;
 * docs/input.md, section 5).  parse_attrs_init turns the lists into a name
 * table (Lower.xla_attrs) and a bit set per opcode (Lower.xla_op_attrs), so
 * the check is one probe per attribute. */
static const char XLA_COMMON_ATTRS[] = "backend_config control-predecessors frontend_attributes metadata origin parameter_replication sharding statistics";
static const char XLA_KNOWN_ATTRS[] =
    "algorithm api_version batch_group_count body branch_computations called_computations calls "
    "channel_id collapsed_slice_dims condition constrain_layout convolution_kind "
    "cross_program_prefetch_index custom_call_has_side_effect custom_call_target delta "
    "dim_labels dimensions direction distribution domain dynamic_slice_sizes epsilon "
    "exponent_bits false_computation feature_group_count feature_index fft_length fft_type "
    "index index_vector_dim indices_are_sorted infeed_config inferred_dimension "
    "input_batching_dims inserted_window_dims iota_dimension is_associative is_composite "
    "is_host_transfer is_reverse is_stable k kind largest left_side lhs_batch_dims "
    "lhs_contracting_dims lhs_ragged_dims literal lower mantissa_bits mode num_carries offset_dims "
    "operand_batching_dims operand_layout_constraints operand_precision outfeed_config "
    "outfeed_shape output_to_operand_aliasing padding padding_type replica_groups "
    "result_accuracy rhs_batch_dims rhs_contracting_dims rhs_group_dims scatter scatter_dims_to_operand_dims "
    "scatter_indices_batching_dims schedule select slice slice_sizes source_target_pairs "
    "sparsity_config start_index_map start_indices_batching_dims to_apply transpose_a "
    "true_computation type unique_indices unit_diagonal update_window_dims "
    "use_global_device_ids window ";
static const char *const XLA_OP_ATTRS[HLO_OPCODE_COUNT] = {
    [HLO_IOTA] = "iota_dimension",
    [HLO_REDUCE_PRECISION] = "exponent_bits mantissa_bits",
    [HLO_GET_TUPLE_ELEMENT] = "index",
    [HLO_EXP] = "result_accuracy",
    [HLO_EXPM1] = "result_accuracy",
    [HLO_LOG] = "result_accuracy",
    [HLO_LOG1P] = "result_accuracy",
    [HLO_SQRT] = "result_accuracy",
    [HLO_RSQRT] = "result_accuracy",
    [HLO_CBRT] = "result_accuracy",
    [HLO_TANH] = "result_accuracy",
    [HLO_LOGISTIC] = "result_accuracy",
    [HLO_SINE] = "result_accuracy",
    [HLO_COSINE] = "result_accuracy",
    [HLO_TAN] = "result_accuracy",
    [HLO_ERF] = "result_accuracy",
    [HLO_COMPARE] = "direction type",
    [HLO_BROADCAST] = "dimensions",
    [HLO_RESHAPE] = "inferred_dimension",
    [HLO_TRANSPOSE] = "dimensions",
    [HLO_SLICE] = "slice",
    [HLO_DYNAMIC_SLICE] = "dynamic_slice_sizes",
    [HLO_PAD] = "padding",
    [HLO_CONCATENATE] = "dimensions",
    [HLO_REVERSE] = "dimensions",
    [HLO_GATHER] = "collapsed_slice_dims index_vector_dim indices_are_sorted offset_dims operand_batching_dims slice_sizes start_index_map start_indices_batching_dims",
    [HLO_SCATTER] = "index_vector_dim indices_are_sorted input_batching_dims inserted_window_dims scatter_dims_to_operand_dims scatter_indices_batching_dims to_apply unique_indices update_window_dims",
    [HLO_SORT] = "dimensions is_stable to_apply",
    [HLO_TOPK] = "k largest",
    [HLO_DOT] = "algorithm lhs_batch_dims lhs_contracting_dims operand_precision rhs_batch_dims rhs_contracting_dims",
    [HLO_RAGGED_DOT] = "lhs_batch_dims lhs_contracting_dims lhs_ragged_dims operand_precision rhs_batch_dims rhs_contracting_dims rhs_group_dims",
    [HLO_CONVOLUTION] = "batch_group_count convolution_kind dim_labels feature_group_count operand_precision sparsity_config window",
    [HLO_REDUCE] = "dimensions to_apply",
    [HLO_REDUCE_WINDOW] = "to_apply window",
    [HLO_SELECT_AND_SCATTER] = "scatter select window",
    [HLO_MAP] = "dimensions to_apply",
    [HLO_RNG] = "distribution",
    [HLO_RNG_BIT_GENERATOR] = "algorithm",
    [HLO_WHILE] = "body condition",
    [HLO_CONDITIONAL] = "branch_computations false_computation true_computation",
    [HLO_CALL] = "is_composite to_apply",
    [HLO_CUSTOM_CALL] = "api_version batch_group_count called_computations custom_call_has_side_effect custom_call_target dim_labels feature_group_count literal operand_layout_constraints operand_precision output_to_operand_aliasing padding_type schedule to_apply window",
    [HLO_ALL_REDUCE] = "channel_id constrain_layout mode replica_groups to_apply use_global_device_ids",
    [HLO_ALL_GATHER] = "channel_id constrain_layout dimensions replica_groups use_global_device_ids",
    [HLO_REDUCE_SCATTER] = "channel_id constrain_layout dimensions mode replica_groups to_apply use_global_device_ids",
    [HLO_ALL_TO_ALL] = "channel_id constrain_layout dimensions replica_groups",
    [HLO_COLLECTIVE_PERMUTE] = "channel_id slice_sizes source_target_pairs",
    [HLO_INFEED] = "infeed_config",
    [HLO_OUTFEED] = "outfeed_config outfeed_shape",
    [HLO_SEND] = "channel_id is_host_transfer",
    [HLO_SEND_DONE] = "channel_id is_host_transfer",
    [HLO_RECV] = "channel_id is_host_transfer",
    [HLO_RECV_DONE] = "channel_id is_host_transfer",
};

/* Calls f(ctx, word, length, arg) for each word of the space-separated list. */
static void each_word(const char *list, void (*f)(void *, const char *, uint32_t, int32_t), void *ctx, int32_t arg)
{
    for (const char *p = list; p && *p;) {
        while (*p == ' ') p++;
        size_t k = strcspn(p, " ");
        if (k) f(ctx, p, (uint32_t)k, arg);
        p += k;
    }
}

static void add_known(void *ctx, const char *w, uint32_t n, int32_t arg)
{
    Lower *lw = ctx;
    (void)arg;
    if (kw_find(&lw->xla_attrs, w, n) >= 0) return;
    if (lw->n_xla_attrs == PARSE_MAX_XLA_ATTRS) abort(); /* XLA_KNOWN_ATTRS outgrew the bit sets: every parse stops */
    kw_add(&lw->xla_attrs, w, n, lw->n_xla_attrs++);
}

/* Index of a name every op takes in Lower.xla_attrs (no bit of its own). */
#define XLA_ATTR_COMMON (-2)

static void add_common(void *ctx, const char *w, uint32_t n, int32_t arg)
{
    Lower *lw = ctx;
    (void)arg;
    kw_add(&lw->xla_attrs, w, n, XLA_ATTR_COMMON);
}

static void allow_attr(void *ctx, const char *w, uint32_t n, int32_t op)
{
    Lower *lw = ctx;
    int32_t k = kw_find(&lw->xla_attrs, w, n);
    if (k >= 0) lw->xla_op_attrs[op][k / 64] |= (uint64_t)1 << (k % 64);
    /* an opcode taking a computation-valued attribute is one whose callees
     * the whole-module walks read (hlo_opcode_names_computations) */
    int32_t s = kw_find(&lw->attr_specs, w, n);
    SPMDC_ASSERT(s < 0 || !(ATTR_SPECS[s].fn == at_comp || ATTR_SPECS[s].fn == at_complist ||
                            ATTR_SPECS[s].fn == at_branch) ||
                 hlo_opcode_names_computations((HloOpcode)op));
}

/* An attribute XLA's parser knows but does not take on op (one it does not
 * know at all is unknown_attr's; one every op takes is kept verbatim); at: the name token
 * (its hash in t.i). */
static bool xla_rejects_attr(const Lower *lw, HloOpcode op, AstTok at)
{
    int32_t k = kw_find_tok(&lw->xla_attrs, at);
    if (k < 0 || op >= HLO_OPCODE_COUNT) return false; /* an unknown opcode is its own error */
    return !(lw->xla_op_attrs[op][k / 64] >> (k % 64) & 1);
}

/* Edit distance (insertions, deletions, substitutions, adjacent swaps) of
 * a[0..na) and b[0..nb), or limit + 1 once it exceeds limit (names longer
 * than 63 bytes: limit + 1). */
static int name_distance(const char *a, uint32_t na, const char *b, uint32_t nb, int limit)
{
    enum { MAX = 64 };
    if (na >= MAX || nb >= MAX || (na > nb ? na - nb : nb - na) > (uint32_t)limit) return limit + 1;
    int d[3][MAX]; /* rows i-2, i-1, i of the table, by i % 3 */
    for (uint32_t j = 0; j <= nb; j++) d[0][j] = (int)j;
    for (uint32_t i = 1; i <= na; i++) {
        int *r = d[i % 3], *p = d[(i + 2) % 3], *pp = d[(i + 1) % 3], best = limit + 1;
        r[0] = (int)i;
        for (uint32_t j = 1; j <= nb; j++) {
            int c = p[j - 1] + (a[i - 1] != b[j - 1]);
            if (p[j] + 1 < c) c = p[j] + 1;
            if (r[j - 1] + 1 < c) c = r[j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && pp[j - 2] + 1 < c) c = pp[j - 2] + 1;
            r[j] = c;
            if (c < best) best = c;
        }
        if (best > limit) return limit + 1;
    }
    return d[na % 3][nb];
}

typedef struct NearAttr {
    const Lower *lw;
    HloOpcode op;
    AstTok name;
    const char *best;
    uint32_t best_n;
    int best_d;
} NearAttr;

/* each_word's step for unknown_attr: keeps w if it is nearer the name than
 * the best so far and the op takes it (common: every op does). */
static void near_word(void *ctx, const char *w, uint32_t n, int32_t common)
{
    NearAttr *s = ctx;
    int32_t k = kw_find(&s->lw->xla_attrs, w, n);
    if (!common && (k < 0 || !(s->lw->xla_op_attrs[s->op][k / 64] >> (k % 64) & 1))) return;
    int d = name_distance(s->name.s, s->name.n, w, n, s->best_d - 1);
    if (d < s->best_d) {
        s->best = w;
        s->best_n = n;
        s->best_d = d;
    }
}

/* Attributes spmdc keeps verbatim whose value XLA's parser reads as a word
 * of a fixed set, booleans among them (checked against XLA 0.10.2's
 * parser): op is the opcode
 * the name means that on (HLO_OPCODE_COUNT: any), list for a `{a,b}` list
 * of such words, nocase where XLA folds the case. */
static const struct {
    const char *name;
    int op;
    bool list, nocase;
    const char *words;
} ENUM_ATTRS[] = {
    {"api_version", HLO_OPCODE_COUNT, false, true,
     "API_VERSION_ORIGINAL API_VERSION_STATUS_RETURNING API_VERSION_STATUS_RETURNING_UNIFIED API_VERSION_TYPED_FFI"},
    {"operand_precision", HLO_OPCODE_COUNT, true, true, "default high highest"},
    {"algorithm", HLO_RNG_BIT_GENERATOR, false, true, "rng_default rng_three_fry rng_philox"},
    {"algorithm", HLO_DOT, false, true,
     "unset dot_any_f8_any_f8_f32 dot_any_f8_any_f8_f32_fast_accum dot_f16_f16_f16 dot_f16_f16_f32 "
     "dot_bf16_bf16_bf16 dot_bf16_bf16_f32 dot_bf16_bf16_f32_x3 dot_bf16_bf16_f32_x6 dot_bf16_bf16_f32_x9 "
     "dot_tf32_tf32_f32 dot_tf32_tf32_f32_x3 dot_f32_f32_f32 dot_f64_f64_f64"},
    {"schedule", HLO_OPCODE_COUNT, false, true, "SCHEDULE_NONE SCHEDULE_LATEST SCHEDULE_EARLIEST"},
    {"custom_call_has_side_effect", HLO_OPCODE_COUNT, false, false, "true false"},
    {"is_host_transfer", HLO_OPCODE_COUNT, false, false, "true false"},
    {"constrain_layout", HLO_OPCODE_COUNT, false, false, "true false"},
    {"parameter_replication", HLO_OPCODE_COUNT, true, false, "true false"},
    {"padding_type", HLO_OPCODE_COUNT, false, false, "PADDING_INVALID PADDING_VALID PADDING_SAME"},
};

/* Whether the n bytes at w are one of the space-separated words. */
static bool word_in(const char *words, const char *w, size_t n, bool nocase)
{
    for (const char *p = words; *p;) {
        while (*p == ' ') p++;
        size_t k = strcspn(p, " ");
        if (k == n && (nocase ? strncasecmp(p, w, n) : strncmp(p, w, n)) == 0) return true;
        p += k;
    }
    return false;
}

/* One word of an ENUM_ATTRS attribute's value; false after reporting. */
static bool check_enum_word(Lower *lw, const AstVal *at, const AstVal *v, int32_t e)
{
    if (v && (v->kind == AV_WORD || v->kind == AV_STRING) && word_in(ENUM_ATTRS[e].words, v->t.s, v->t.n,
                                                                      ENUM_ATTRS[e].nocase))
        return true;
    StrBuf b = {0};
    for (const char *p = ENUM_ATTRS[e].words; *p;) {
        size_t k = strcspn(p, " ");
        sb_printf(&b, "%s%.*s", b.len ? ", " : "", (int)k, p);
        p += k;
        while (*p == ' ') p++;
    }
    bool ok = parse_want(lw, at, v, b.data ? b.data : "?");
    sb_free(&b);
    return ok;
}

/* A verbatim attribute whose value XLA reads as a word of a fixed set
 * (ENUM_ATTRS): any other word is an error, as in XLA's parser.  True for
 * every other attribute. */
static bool check_enum_attr(Lower *lw, HloOpcode op, const AstVal *at)
{
    for (int32_t e = 0; e < (int32_t)(sizeof ENUM_ATTRS / sizeof ENUM_ATTRS[0]); e++) {
        if (!ast_tok_eq(at->t, ENUM_ATTRS[e].name) || (ENUM_ATTRS[e].op != HLO_OPCODE_COUNT && ENUM_ATTRS[e].op != (int)op))
            continue;
        const AstVal *v = parse_attr_value(lw, at);
        if (!v) return false;
        if (!ENUM_ATTRS[e].list) return check_enum_word(lw, at, v, e);
        if (v->kind != AV_BRACE) return parse_want(lw, at, v, "a list {...}");
        bool ok = true;
        for (const AstVal *el = v->child; el; el = el->next) ok = check_enum_word(lw, at, elem_single(el), e) && ok;
        return ok;
    }
    return true;
}

/* A custom-call's operand_layout_constraints={s0, s1, ...} lists one shape
 * per operand, as XLA's parser checks ("Expected N operand layout
 * constraints"); false after reporting. */
static bool check_layout_constraints(Lower *lw, const AstInst *ai, const AstVal *at)
{
    const AstVal *v = parse_attr_value(lw, at);
    if (!v) return false;
    if (v->kind != AV_BRACE) return parse_want(lw, at, v, "a list of operand shapes {...}");
    int32_t n = ast_count(v->child), want = ai->operands ? ast_count(ai->operands->child) : 0;
    if (n != want)
        return parse_err(lw, &v->loc, "operand_layout_constraints lists %d shape%s for %d operand%s", n,
                         n == 1 ? "" : "s", want, want == 1 ? "" : "s");
    return true;
}

/* The error for an attribute name XLA's parser does not know, with the
 * nearest name op takes (at most 2 edits, 1 for names under 5 bytes) as a
 * note.  False. */
static bool unknown_attr(Lower *lw, HloOpcode op, const AstVal *at)
{
    bool ok = parse_err(lw, &at->loc, "unknown attribute '%.*s'", TOKF(at->t));
    NearAttr s = {lw, op, at->t, NULL, 0, at->t.n < 5 ? 2 : 3};
    each_word(XLA_COMMON_ATTRS, near_word, &s, 1);
    each_word(XLA_KNOWN_ATTRS, near_word, &s, 0);
    if (s.best) parse_note(lw, &at->loc, "did you mean '%.*s'?", (int)s.best_n, s.best);
    return ok;
}

/* ================================================================ verbatim values XLA checks */

/* A scan of a verbatim attribute value: s[0..n) at offset base of the input. */
typedef struct RawScan {
    Lower *lw;
    const char *s;
    uint32_t i, n, base;
    const char *what; /* the attribute's name, for messages */
} RawScan;

static AstLoc raw_loc(const RawScan *r, uint32_t from, uint32_t to) { return (AstLoc){r->base + from, r->base + to}; }

/* The end of the value that starts at from: the next blank, ',' or '}'
 * outside quotes (for underlining a value of the wrong kind). */
static uint32_t raw_value_end(const RawScan *r, uint32_t from)
{
    uint32_t j = from;
    bool quoted = false;
    for (; j < r->n; j++) {
        char c = r->s[j];
        if (quoted && c == '\\') j++;
        else if (c == '"') quoted = !quoted;
        else if (!quoted && (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',' || c == '}')) break;
    }
    return j > r->n ? r->n : j > from ? j : from + 1;
}

static void raw_blank(RawScan *r)
{
    while (r->i < r->n && (r->s[r->i] == ' ' || r->s[r->i] == '\t' || r->s[r->i] == '\n' || r->s[r->i] == '\r')) r->i++;
}

static bool raw_err_here(RawScan *r, const char *want)
{
    uint32_t end = r->i < r->n ? r->i + 1 : r->i;
    AstLoc at = raw_loc(r, r->i, end);
    if (r->i >= r->n) return parse_err(r->lw, &at, "%s ends where %s was expected", r->what, want);
    char c = r->s[r->i];
    if (c > ' ' && c < 127) return parse_err(r->lw, &at, "unexpected '%c' in %s, expected %s", c, r->what, want);
    return parse_err(r->lw, &at, "unexpected byte in %s, expected %s", r->what, want);
}

/* A name: a letter or '_', then letters, digits, '_' and (dotted) '.' and '-'. */
static bool raw_name(RawScan *r, bool dotted, uint32_t *from)
{
    *from = r->i;
    char c = r->i < r->n ? r->s[r->i] : 0;
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_')) return raw_err_here(r, "a field name");
    for (r->i++; r->i < r->n; r->i++) {
        c = r->s[r->i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                  (dotted && (c == '.' || c == '-'));
        if (!ok) break;
    }
    return true;
}

static bool raw_char(RawScan *r, char c, const char *want)
{
    raw_blank(r);
    if (r->i < r->n && r->s[r->i] == c) {
        r->i++;
        return true;
    }
    return raw_err_here(r, want);
}

/* A quoted string ('\' escapes the next byte), the value of field[0..flen). */
static bool raw_string(RawScan *r, const char *field, uint32_t flen)
{
    raw_blank(r);
    if (r->i >= r->n || r->s[r->i] != '"') {
        AstLoc at = raw_loc(r, r->i, r->i < r->n ? raw_value_end(r, r->i) : r->i);
        return parse_err(r->lw, &at, "%s field '%.*s' takes a quoted string", r->what, (int)flen, field);
    }
    uint32_t open = r->i++;
    for (; r->i < r->n && r->s[r->i] != '"'; r->i++)
        if (r->s[r->i] == '\\') r->i++;
    if (r->i >= r->n) {
        AstLoc at = raw_loc(r, open, open + 1);
        return parse_err(r->lw, &at, "string in %s is not closed", r->what);
    }
    r->i++;
    return true;
}

/* A decimal integer in [INT32_MIN, INT32_MAX], as XLA's metadata fields hold. */
static bool raw_int32(RawScan *r, const char *field, uint32_t flen)
{
    raw_blank(r);
    uint32_t from = r->i;
    if (r->i < r->n && r->s[r->i] == '-') r->i++;
    uint32_t digits = r->i;
    int64_t v = 0;
    bool big = false;
    for (; r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '9'; r->i++) {
        v = v * 10 + (r->s[r->i] - '0');
        big |= v > (int64_t)INT32_MAX + 1;
        if (big) v = (int64_t)INT32_MAX + 2;
    }
    bool neg = digits > from;
    char c = r->i < r->n ? r->s[r->i] : 0;
    bool word = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '.' || c == '"';
    AstLoc at = raw_loc(r, from, r->i == digits || word ? raw_value_end(r, from) : r->i);
    if (r->i == digits || word)
        return parse_err(r->lw, &at, "%s field '%.*s' takes an integer", r->what, (int)flen, field);
    if (big || v > (int64_t)INT32_MAX + neg)
        return parse_err(r->lw, &at, "%s field '%.*s' is out of range (a 32-bit integer)", r->what, (int)flen, field);
    return true;
}

/* The fields of XLA's OpMetadata that its HLO parser reads: kind 's' a
 * string, 'i' a 32-bit integer, 'l' a list of integers {1,2}. */
static const struct {
    const char *name;
    char kind;
} METADATA_FIELDS[] = {
    {"op_type", 's'},         {"op_name", 's'},           {"source_file", 's'},       {"source_line", 'i'},
    {"source_end_line", 'i'}, {"source_column", 'i'},     {"source_end_column", 'i'}, {"profile_type", 'l'},
    {"deduplicated_name", 's'}, {"scheduling_name", 's'}, {"stack_frame_id", 'i'},
};
#define N_METADATA_FIELDS ((int)(sizeof METADATA_FIELDS / sizeof METADATA_FIELDS[0]))

/* metadata={op_name="..." source_line=12 ...} as XLA's parser takes it:
 * fields in any order, each at most once, separated by blanks or a comma
 * (one comma also before the first field, none after the last). */
static bool check_metadata(Lower *lw, const AstVal *at)
{
    uint32_t off = at->child->loc.off, end = at->loc.end;
    RawScan r = {lw, lw->cx->text + off, 0, end > off ? end - off : 0, off, "metadata"};
    if (!raw_char(&r, '{', "'{'")) return false;
    uint32_t seen = 0;
    for (;;) {
        raw_blank(&r);
        if (r.i < r.n && r.s[r.i] == '}') break;
        if (r.i < r.n && r.s[r.i] == ',') {
            r.i++;
            raw_blank(&r);
        }
        uint32_t from;
        if (!raw_name(&r, false, &from)) return false;
        const char *f = r.s + from;
        uint32_t flen = r.i - from;
        int k = 0;
        while (k < N_METADATA_FIELDS && !(strlen(METADATA_FIELDS[k].name) == flen && memcmp(METADATA_FIELDS[k].name, f, flen) == 0)) k++;
        AstLoc floc = raw_loc(&r, from, r.i);
        if (k == N_METADATA_FIELDS) return parse_err(lw, &floc, "metadata has no field '%.*s'", (int)flen, f);
        if (seen >> k & 1) return parse_err(lw, &floc, "metadata field '%.*s' is given twice", (int)flen, f);
        seen |= 1u << k;
        if (!raw_char(&r, '=', "'='")) return false;
        bool ok;
        if (METADATA_FIELDS[k].kind == 's') {
            ok = raw_string(&r, f, flen);
        } else if (METADATA_FIELDS[k].kind == 'i') {
            ok = raw_int32(&r, f, flen);
        } else {
            ok = raw_char(&r, '{', "'{'");
            raw_blank(&r);
            bool first = true;
            while (ok && !(r.i < r.n && r.s[r.i] == '}')) {
                if (!first) ok = raw_char(&r, ',', "',' or '}'");
                ok = ok && raw_int32(&r, f, flen);
                raw_blank(&r);
                first = false;
            }
            ok = ok && raw_char(&r, '}', "'}'");
        }
        if (!ok) return false;
    }
    r.i++;
    raw_blank(&r);
    return r.i >= r.n || raw_err_here(&r, "the end of metadata");
}

/* frontend_attributes={name="value",...} as XLA's parser takes it: names
 * with '.' and '-' allowed, string values, separated by commas. */
static bool check_frontend(Lower *lw, const AstVal *at)
{
    uint32_t off = at->child->loc.off, end = at->loc.end;
    RawScan r = {lw, lw->cx->text + off, 0, end > off ? end - off : 0, off, "frontend_attributes"};
    if (!raw_char(&r, '{', "'{'")) return false;
    raw_blank(&r);
    for (bool first = true; !(r.i < r.n && r.s[r.i] == '}'); first = false) {
        if (!first && !raw_char(&r, ',', "',' or '}'")) return false;
        raw_blank(&r);
        uint32_t from;
        if (!raw_name(&r, true, &from)) return false;
        uint32_t flen = r.i - from;
        if (!raw_char(&r, '=', "'='") || !raw_string(&r, r.s + from, flen)) return false;
        raw_blank(&r);
    }
    r.i++;
    raw_blank(&r);
    return r.i >= r.n || raw_err_here(&r, "the end of frontend_attributes");
}

/* Where a frontend_attributes value starts in the input (for
 * note_inline_mesh). */
typedef struct SdyScan {
    Lower *lw;
    uint32_t base;
} SdyScan;

/* sdy_check_meshes' callback: keeps the first inline mesh with axes and the
 * first other one (HloModule.sdy_inline_mesh). */
static void note_inline_mesh(void *ctx, const SdyMesh *mesh, size_t at, size_t len)
{
    SdyScan *sc = ctx;
    HloModule *m = sc->lw->m;
    if (mesh->n_axes == 0 || m->sdy_inline_mesh[1]) return;
    const char *text = sc->lw->cx->text + sc->base + at + 4; /* the body, after "mesh" */
    SdyMesh first;
    if (m->sdy_inline_mesh[0] &&
        ((strlen(m->sdy_inline_mesh[0]) == len - 4 && memcmp(m->sdy_inline_mesh[0], text, len - 4) == 0) ||
         (sdy_read_mesh(m->sdy_inline_mesh[0], &first) && sdy_mesh_equal(&first, mesh))))
        return;
    int k = m->sdy_inline_mesh[0] ? 1 : 0;
    m->sdy_inline_mesh[k] = arena_strndup(m->arena, text, len - 4);
    AstLoc loc = {sc->base + (uint32_t)at, sc->base + (uint32_t)(at + len)};
    m->sdy_inline_span[k] = ast_span(sc->lw->cx, &loc);
}

bool parse_check_sdy_meshes(Lower *lw, const AstVal *at)
{
    uint32_t off = at->child->loc.off, end = at->loc.end;
    bool any = false;
    for (uint32_t i = off; !any && i + 5 <= end; i++) any = memcmp(lw->cx->text + i, "mesh<", 5) == 0;
    if (!any) return true;
    const char *text = arena_strndup(lw->tmp, lw->cx->text + off, end - off);
    SdyScan sc = {lw, off};
    SdyFault f;
    if (sdy_check_meshes(text, lw->tmp, note_inline_mesh, &sc, &f)) return true;
    AstLoc loc = {off + (uint32_t)f.at, off + (uint32_t)(f.at + f.len)};
    return parse_err(lw, &loc, "%s", f.why);
}

/* Whether spec's value goes into op's attributes: any opcode's, or the
 * list group of its opcode (ragged-dot's group extends dot's). */
static bool spec_fills(const AttrSpec *spec, HloOpcode op)
{
    int32_t group = op == HLO_RAGGED_DOT ? (int32_t)HLO_DOT + 1 : -1;
    return spec->only == 0 || spec->only == (int32_t)op + 1 || spec->only == group;
}

/* Typed attributes into out->attrs, sharding= into out->sharding, the
 * other names XLA takes on op verbatim.  Duplicates, names op does not take
 * and names XLA does not know are errors. */
bool parse_lower_attrs(Lower *lw, const AstInst *ai, HloOpcode op, InstOut *out)
{
    uint64_t seen = 0;
    const AstVal *first[N_ATTR_SPECS], *sharding = NULL;
    int32_t n_all = ast_count(ai->attrs), n_raw = 0;
    const AstVal **raw = n_all ? ARENA_ARRAY(lw->tmp, const AstVal *, n_all) : NULL;
    bool ok = true;
    for (const AstVal *at = ai->attrs; at; at = at->next) {
        int32_t ek = kw_find_tok(&lw->attr_specs, at->t); /* an op that does not take it: xla_rejects_attr */
        if (ast_tok_eq(at->t, "sharding")) {
            if (sharding) {
                ok = parse_err(lw, &at->loc, "attribute 'sharding' is given twice");
                parse_note(lw, &sharding->loc, "first given here");
                continue;
            }
            sharding = at;
            const AstVal *v = parse_attr_value(lw, at);
            out->sharding = v ? parse_lower_sharding(lw, at, v) : NULL;
            ok = out->sharding && ok;
        } else if (xla_rejects_attr(lw, op, at->t)) {
            ok = parse_err(lw, &at->loc, "%s takes no attribute '%.*s'", hlo_opcode_name(op), TOKF(at->t));
        } else if (ek >= 0) {
            if (seen >> ek & 1) {
                ok = parse_err(lw, &at->loc, "attribute '%.*s' is given twice", TOKF(at->t));
                parse_note(lw, &first[ek]->loc, "first given here");
                continue;
            }
            seen |= (uint64_t)1 << ek;
            first[ek] = at;
            const AttrSpec *spec = &ATTR_SPECS[ek];
            const AstVal *v = spec->whole_value ? at->child : parse_attr_value(lw, at);
            HloAttrs dropped; /* a list group of another opcode (op_lists are shared) */
            HloAttrs *dst = &out->attrs;
            if (!spec_fills(spec, op)) {
                memset(&dropped, 0, sizeof dropped);
                dst = &dropped;
            } else {
                out->any_attr = true;
            }
            ok = v && spec->fn(lw, at, v, dst, spec) && ok;
        } else if (op < HLO_OPCODE_COUNT && kw_find_tok(&lw->xla_attrs, at->t) == -1) {
            ok = unknown_attr(lw, op, at);
        } else {
            if (ast_tok_eq(at->t, "metadata")) ok = check_metadata(lw, at) && ok;
            else if (ast_tok_eq(at->t, "frontend_attributes"))
                ok = check_frontend(lw, at) && parse_check_sdy_meshes(lw, at) && ok;
            else if (op == HLO_CUSTOM_CALL && ast_tok_eq(at->t, "operand_layout_constraints"))
                ok = check_layout_constraints(lw, ai, at) && ok;
            else ok = check_enum_attr(lw, op, at) && ok;
            raw[n_raw++] = at;
        }
    }
    ok = check_required(lw, ai, op, seen) && ok;
    if (n_raw) {
        ok = parse_check_dup_names(lw, raw, n_raw) && ok;
        out->attrs.raw = parse_make_raw(lw, raw, n_raw);
        out->attrs.n_raw = n_raw;
        out->any_attr = true;
    }
    return ok;
}

void parse_attrs_init(Lower *lw)
{
    kw_init(lw->keep, &lw->attr_specs, (uint32_t)N_ATTR_SPECS);
    for (int32_t k = 0; k < N_ATTR_SPECS; k++)
        kw_add(&lw->attr_specs, ATTR_SPECS[k].name, (uint32_t)strlen(ATTR_SPECS[k].name), k);
    /* XLA's attribute names: an index each, and per opcode the set it takes */
    kw_init(lw->keep, &lw->xla_attrs, PARSE_MAX_XLA_ATTRS);
    lw->n_xla_attrs = 0;
    _Static_assert(sizeof REQUIRED_ATTRS / sizeof REQUIRED_ATTRS[0] < 128, "Lower.required_attrs holds int8_t");
    memset(lw->required_attrs, -1, sizeof lw->required_attrs);
    for (size_t k = 0; k < sizeof REQUIRED_ATTRS / sizeof REQUIRED_ATTRS[0]; k++)
        lw->required_attrs[REQUIRED_ATTRS[k].op] = (int8_t)k; /* one entry per opcode */
    each_word(XLA_KNOWN_ATTRS, add_known, lw, 0);
    each_word(XLA_COMMON_ATTRS, add_common, lw, 0);
    memset(lw->xla_op_attrs, 0, sizeof lw->xla_op_attrs);
    for (int32_t op = 0; op < HLO_OPCODE_COUNT; op++) each_word(XLA_OP_ATTRS[op], allow_attr, lw, op);
}
