/* parse.c - HLO text -> IR: runs the scanner and grammar, then lowers the AST.
 *
 * parse_hlo() rejects NUL bytes up front, runs the pure bison parser over the
 * reentrant flex scanner (both write the AST of ast.h into a parse arena),
 * and, if that reported nothing, lowers the tree into a fresh HloModule:
 *  - computations are named first (so a call to a later computation gets a
 *    "define it before use" message), then lowered in order; without ENTRY the
 *    last one is the entry;
 *  - instruction names are resolved per computation through a uthash table
 *    (entries in the parse arena: no frees, nothing to leak), operands must be
 *    defined earlier; typed operands are checked against their definitions;
 *  - shapes, constants (Literal), typed attributes (HloAttrs, see the table
 *    ATTR_SPECS) and `sharding=` (ShardingSyntax, syntactic checks only: the
 *    mesh is bound later by bind.c) are interpreted; metadata,
 *    frontend_attributes, backend_config and unknown attributes are kept
 *    verbatim (RawAttr).
 * Every user error goes through diag_error at the offending token; lowering
 * keeps going to report several, and parse_hlo returns NULL if any was
 * reported.  Everything is linear in the input size.
 */
#include "spmdc/parse.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ast.h"
#include "hlo.tab.h"
#define YYSTYPE HLO_YYSTYPE
#define YYLTYPE AstLoc
#include "hlo.lex.h"

/* uthash tables live in the parse arena: nothing is freed one by one. */
#define uthash_malloc(sz) arena_alloc(hash_arena, (sz), 16)
#define uthash_free(ptr, sz) ((void)(ptr), (void)(sz))
#include <uthash.h>

/* printf arguments for a token, shortened for messages. */
#define TOKF(t) (int)((t).n > 64 ? 64 : (t).n), (t).s

typedef struct NameEnt {
    const char *key;        /* into the source text (or static) */
    uint32_t len;
    int32_t idx;
    AstLoc loc;             /* of the definition */
    UT_hash_handle hh;
} NameEnt;

/* A name that was not (yet) defined where it was used; resolved at the end
 * of the computation (operands) or of the module (computations), so the
 * message can say "used before its definition" when it is defined later. */
typedef struct Pending {
    AstTok name;
    AstLoc loc;
    struct Pending *next;
} Pending;

typedef struct Lower {
    ParseCtx *cx;
    DiagEngine *diag;
    int base_errors;        /* diag errors before parse_hlo began */
    int n_errors;           /* errors the lowering reported itself */
    HloModule *m;           /* created by the header or the first computation */
    Arena *tmp;             /* = cx->arena: reset after every hand-over */
    Arena *keep;            /* whole parse: computation names, tables, pending computations */
    Arena *comp_arena;      /* one computation: instruction names, signature, pending operands */
    NameEnt *comp_names;    /* computation name -> index */
    NameEnt *inst_names;    /* current computation: name -> index */
    NameEnt *opcodes;       /* opcode spelling -> HloOpcode */
    NameEnt *attr_specs;    /* attribute name -> ATTR_SPECS index */
    bool has_header;
    AstTok module_name;
    AstLoc module_name_loc;
    int32_t entry;          /* computation marked ENTRY, or -1 */
    AstLoc entry_loc;
    Pending *pending_comps;
    /* the computation being lowered */
    int32_t cur_comp;
    AstTok cur_comp_name;
    AstLoc comp_start;
    int comp_errors;        /* n_errors when it began */
    int32_t n_insts;
    int32_t root;
    AstLoc root_loc;
    Pending *pending_ops;
    bool has_sig;
    int32_t n_params;
    Shape *param_shapes;    /* signature, lowered (NULL entry shapes on error) */
    AstLoc *param_locs;
    bool *param_ok;
    Shape result;
    bool result_ok;
    AstLoc result_loc;
} Lower;

static bool err(Lower *lw, const AstLoc *loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool err(Lower *lw, const AstLoc *loc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    diag_report(lw->diag, DIAG_ERROR, loc->span, fmt, ap);
    va_end(ap);
    lw->n_errors++;
    return false;
}

static void note(Lower *lw, const AstLoc *loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note(Lower *lw, const AstLoc *loc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    diag_report(lw->diag, DIAG_NOTE, loc->span, fmt, ap);
    va_end(ap);
}

static const char *describe(Lower *lw, const AstVal *v) { return ast_describe(lw->cx, v); }

static NameEnt *name_find(NameEnt *tab, const char *s, uint32_t n)
{
    NameEnt *e = NULL;
    HASH_FIND(hh, tab, s, n, e);
    return e;
}

static NameEnt *name_add(Arena *hash_arena, NameEnt **tab, const char *s, uint32_t n, int32_t idx,
                         const AstLoc *loc)
{
    NameEnt *e = ARENA_NEW(hash_arena, NameEnt);
    e->key = s;
    e->len = n;
    e->idx = idx;
    if (loc) e->loc = *loc;
    HASH_ADD_KEYPTR(hh, *tab, e->key, e->len, e);
    return e;
}

static const char *shape_str(Lower *lw, const Shape *s)
{
    StrBuf b = {0};
    shape_print(&b, s, false);
    char *r = arena_strdup(lw->tmp, sb_cstr(&b));
    sb_free(&b);
    return r;
}

/* a * b, or -1 when it exceeds limit (both >= 0). */
static int64_t mul_capped(int64_t a, int64_t b, int64_t limit)
{
    if (a < 0 || b < 0) return -1;
    if (a != 0 && b > limit / a) return -1;
    return a * b;
}

/* ================================================================ value helpers */

/* The only prim of an element, or NULL. */
static const AstVal *elem_single(const AstVal *elem)
{
    return (elem && elem->child && !elem->child->next) ? elem->child : NULL;
}

static bool is_group(const AstVal *v, AstValKind k) { return v && v->kind == k; }

static bool is_word(const AstVal *v, const char *w) { return v && v->kind == AV_WORD && ast_tok_eq(v->t, w); }

/* The attribute's value, which must be one prim. */
static const AstVal *attr_value(Lower *lw, const AstVal *attr)
{
    const AstVal *v = attr->child;
    if (v && v->next) {
        err(lw, &v->next->loc, "unexpected %s after the value of attribute '%.*s'", describe(lw, v->next),
            TOKF(attr->t));
        return NULL;
    }
    return v;
}

static bool want(Lower *lw, const AstVal *attr, const AstVal *v, const char *what)
{
    return err(lw, v ? &v->loc : &attr->loc, "attribute '%.*s' expects %s, found %s", TOKF(attr->t), what,
               describe(lw, v));
}

static bool int_of(Lower *lw, const AstVal *v, const char *ctx, int64_t *out)
{
    *out = 0;
    if (!v || v->kind != AV_INT || v->flags)
        return err(lw, v ? &v->loc : NULL, "%s: expected an integer, found %s", ctx, describe(lw, v));
    if (v->t.is_u64) return err(lw, &v->loc, "%s: integer %.*s is too large", ctx, TOKF(v->t));
    *out = v->t.i;
    return true;
}

/* `{1,2,3}` -> IntList in the module arena.  NULL v is the empty list. */
static bool intlist_of(Lower *lw, const AstVal *attr, const AstVal *v, IntList *out)
{
    if (!is_group(v, AV_BRACE)) return want(lw, attr, v, "a list of integers like {0,1}");
    int32_t n = ast_count(v->child);
    int64_t *vals = n ? ARENA_ARRAY(lw->m->arena, int64_t, n) : NULL;
    int32_t k = 0;
    for (const AstVal *e = v->child; e; e = e->next) {
        const AstVal *x = elem_single(e);
        if (!x || x->kind != AV_INT || x->t.is_u64) return want(lw, attr, x ? x : e, "a list of integers like {0,1}");
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
    else return want(lw, attr, v, "true or false");
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

/* ================================================================ shapes */

static bool lower_array_shape(Lower *lw, const AstShape *as, Shape *out)
{
    memset(out, 0, sizeof *out);
    out->type = (ElemType)as->type.i; /* the scanner looked it up */
    bool ok = true;
    int32_t rank = 0;
    for (const AstVal *d = as->dims; d; d = d->next, rank++) {
        if (rank == SPMDC_MAX_RANK)
            return err(lw, &d->loc, "shape has more than %d dimensions (spmdc's limit)", SPMDC_MAX_RANK);
        if (d->flags & AVF_UNBOUNDED)
            ok = err(lw, &d->loc, "dynamic dimension '?' is not supported: spmdc needs static shapes");
        else if (d->flags & AVF_BOUNDED)
            ok = err(lw, &d->loc, "bounded dynamic dimension '<=%.*s' is not supported: spmdc needs static shapes",
                     TOKF(d->t));
        else if (d->t.i < 0 || d->t.is_u64)
            ok = err(lw, &d->loc, "dimension size %.*s is negative or too large", TOKF(d->t));
        else
            out->dims[rank] = d->t.i;
    }
    out->rank = rank;
    if (!as->layout || !ok) return ok;
    const AstLayout *l = as->layout;
    out->has_layout = true;
    int32_t n = ast_count(l->ints);
    if (n != rank && (n != 0 || !l->has_tail || rank != 0))
        return err(lw, &l->loc, "layout lists %d dimension%s but the shape has rank %d", n, n == 1 ? "" : "s", rank);
    uint32_t seen = 0;
    int32_t k = 0;
    for (const AstVal *d = l->ints; d; d = d->next, k++) {
        if (d->t.i < 0 || d->t.i >= rank || (seen >> d->t.i & 1))
            return err(lw, &d->loc, "layout {...} must be a permutation of 0..%d, found %.*s", rank - 1, TOKF(d->t));
        seen |= 1u << d->t.i;
        out->minor_to_major[k] = (int8_t)d->t.i;
    }
    if (l->has_tail) out->layout_tail = ast_text(lw->cx, &l->tail);
    if (out->layout_tail) out->layout_tail = arena_strdup(lw->m->arena, out->layout_tail);
    return true;
}

/* Tuple elements go to the parse arena (hlo_add_inst deep-copies shapes). */
static bool lower_shape(Lower *lw, const AstShape *as, Shape *out)
{
    if (!as->is_tuple) return lower_array_shape(lw, as, out);
    memset(out, 0, sizeof *out);
    out->type = ET_TUPLE;
    int32_t n = 0;
    for (const AstShape *e = as->elems; e; e = e->next) n++;
    out->n_elems = n;
    out->elems = n ? ARENA_ARRAY(lw->tmp, Shape, n) : NULL;
    bool ok = true;
    int32_t k = 0;
    for (const AstShape *e = as->elems; e; e = e->next) ok = lower_shape(lw, e, &out->elems[k++]) && ok;
    return ok;
}

/* A shape written as an attribute or operand prim: AV_SHAPE or a tuple `(...)`. */
static bool shape_of_val(Lower *lw, const AstVal *v, Shape *out)
{
    if (v->kind == AV_SHAPE) return lower_shape(lw, v->shape, out);
    if (v->kind != AV_PAREN) return err(lw, &v->loc, "expected a shape, found %s", describe(lw, v));
    memset(out, 0, sizeof *out);
    out->type = ET_TUPLE;
    out->n_elems = ast_count(v->child);
    out->elems = out->n_elems ? ARENA_ARRAY(lw->tmp, Shape, out->n_elems) : NULL;
    int32_t k = 0;
    for (const AstVal *e = v->child; e; e = e->next, k++) {
        const AstVal *x = elem_single(e);
        if (!x) return err(lw, &e->loc, "expected a shape, found %s", describe(lw, e));
        if (!shape_of_val(lw, x, &out->elems[k])) return false;
    }
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

static bool lit_float(Lower *lw, const AstVal *v, double *out)
{
    *out = 0;
    char buf[80];
    switch ((AstValKind)v->kind) {
    case AV_INT:
    case AV_DECIMAL:
        if (v->t.n >= sizeof buf) return err(lw, &v->loc, "number %.*s is too long", TOKF(v->t));
        memcpy(buf, v->t.s, v->t.n);
        buf[v->t.n] = 0;
        *out = strtod(buf, NULL);
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
    return err(lw, &v->loc, "expected a number, found %s", describe(lw, v));
}

static bool lit_int(Lower *lw, const AstVal *v, ElemType t, int64_t *out)
{
    *out = 0;
    if (t == ET_PRED && (is_word(v, "true") || is_word(v, "false"))) {
        *out = is_word(v, "true");
        return true;
    }
    if (v->kind != AV_INT)
        return err(lw, &v->loc, "expected %s for a %s constant, found %s",
                   t == ET_PRED ? "true, false, 0 or 1" : "an integer", elem_type_name(t), describe(lw, v));
    int bits = elem_type_bits(t);
    int64_t x = v->t.i;
    bool fits;
    if (t == ET_PRED) fits = !v->t.is_u64 && (x == 0 || x == 1);
    else if (elem_type_is_unsigned_int(t)) fits = (x >= 0 || v->t.is_u64) && (bits == 64 || (x >= 0 && x < ((int64_t)1 << bits)));
    else fits = !v->t.is_u64 && (bits == 64 || (x >= -((int64_t)1 << (bits - 1)) && x < ((int64_t)1 << (bits - 1))));
    if (!fits) return err(lw, &v->loc, "%.*s does not fit in %s", TOKF(v->t), elem_type_name(t));
    *out = x;
    return true;
}

static bool lit_scalar(Lower *lw, LitFill *lf, const AstVal *v)
{
    int64_t k = lf->k++;
    bool store = k < lf->cap;
    if (elem_type_is_complex(lf->type)) {
        if (!is_group(v, AV_PAREN) || ast_count(v->child) != 2)
            return err(lw, &v->loc, "expected a complex value like (1, 2), found %s", describe(lw, v));
        double re, im;
        if (!lit_float(lw, elem_single(v->child) ? elem_single(v->child) : v->child, &re)) return false;
        if (!lit_float(lw, elem_single(v->child->next) ? elem_single(v->child->next) : v->child->next, &im))
            return false;
        if (store) {
            lf->f[2 * k] = re;
            lf->f[2 * k + 1] = im;
        }
        return true;
    }
    if (elem_type_is_float(lf->type)) {
        double d;
        if (!lit_float(lw, v, &d)) return false;
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
        return err(lw, &v->loc, "expected '{' (a %s constant nests %d level%s of braces), found %s",
                   shape_str(lw, s), s->rank, s->rank == 1 ? "" : "s", describe(lw, v));
    int32_t n = ast_count(v->child);
    if (n != s->dims[level])
        return err(lw, &v->loc, "this group of a %s constant has %d value%s, expected %lld", shape_str(lw, s), n,
                   n == 1 ? "" : "s", (long long)s->dims[level]);
    for (const AstVal *e = v->child; e; e = e->next) {
        const AstVal *x = elem_single(e);
        if (!x) return err(lw, &e->loc, "expected one value, found %s", describe(lw, e));
        if (!lit_nested(lw, lf, x, level + 1)) return false;
    }
    return true;
}

static bool lower_literal(Lower *lw, const Shape *s, const AstVal *v, Literal *out);

static bool lower_tuple_literal(Lower *lw, const Shape *s, const AstVal *v, Literal *out)
{
    if (!is_group(v, AV_PAREN) || ast_count(v->child) != s->n_elems)
        return err(lw, &v->loc, "a %s constant needs a tuple of %d literals like (1, {2,3}), found %s",
                   shape_str(lw, s), s->n_elems, describe(lw, v));
    out->n_elems = s->n_elems;
    out->elems = ARENA_ARRAY(lw->m->arena, Literal, s->n_elems ? s->n_elems : 1);
    int32_t k = 0;
    for (const AstVal *e = v->child; e; e = e->next, k++) {
        const AstVal *x = elem_single(e);
        if (!x) return err(lw, &e->loc, "expected one literal, found %s", describe(lw, e));
        if (!lower_literal(lw, &s->elems[k], x, &out->elems[k])) return false;
    }
    return true;
}

static bool lower_literal(Lower *lw, const Shape *s, const AstVal *v, Literal *out)
{
    memset(out, 0, sizeof *out);
    if (s->type == ET_TUPLE) return lower_tuple_literal(lw, s, v, out);
    if (elem_type_bits(s->type) == 0)
        return err(lw, &v->loc, "constants of type %s are not supported", elem_type_name(s->type));
    int64_t n = 1;
    for (int32_t d = 0; d < s->rank && n >= 0; d++) n = mul_capped(n, s->dims[d], INT64_MAX / 4);
    if (n < 0) return err(lw, &v->loc, "constant of shape %s has too many elements", shape_str(lw, s));
    out->n = n;
    const AstVal *inner = is_group(v, AV_BRACE) ? elem_single(v->child) : NULL;
    if (s->rank > 0 && inner && inner->kind == AV_PUNCT && inner->punct == AP_ELLIPSIS && !v->child->next) {
        out->elided = true; /* `{...}`: values unspecified, none stored */
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
static bool iota_source(Lower *lw, const AstVal *dims_v, const AstVal *perm_v, bool need_t, int64_t *dims,
                        int32_t *nd, int32_t *perm, int64_t *total, int32_t max_dims)
{
    int32_t n = 0;
    int64_t prod = 1;
    for (const AstVal *e = dims_v->child; e; e = e->next) {
        const AstVal *x = elem_single(e);
        if (n == max_dims) return err(lw, &e->loc, "iota source has more than %d dimensions", max_dims);
        if (!int_of(lw, x ? x : e, "iota source dimension", &dims[n])) return false;
        if (dims[n] < 1) return err(lw, &x->loc, "iota source dimensions must be at least 1");
        prod = mul_capped(prod, dims[n++], SPMDC_MAX_DEVICES);
        if (prod < 0) return err(lw, &dims_v->loc, "iota source has more than %d devices", SPMDC_MAX_DEVICES);
    }
    if (n == 0) return err(lw, &dims_v->loc, "iota source '[...]' is empty");
    for (int32_t i = 0; i < n; i++) perm[i] = i;
    if (!perm_v) {
        if (need_t && n > 1)
            return err(lw, &dims_v->loc, "an iota source with %d dimensions needs a transpose: write T(...) after "
                                         "'[...]', e.g. T(1,0)", n);
        *nd = n;
        *total = prod;
        return true;
    }
    if (ast_count(perm_v->child) != n)
        return err(lw, &perm_v->loc, "T(...) must list %d dimension%s, one per iota source dimension", n,
                   n == 1 ? "" : "s");
    uint32_t seen = 0;
    int32_t k = 0;
    for (const AstVal *e = perm_v->child; e; e = e->next, k++) {
        const AstVal *x = elem_single(e);
        int64_t p;
        if (!int_of(lw, x ? x : e, "T(...)", &p)) return false;
        if (p < 0 || p >= n || (seen >> p & 1))
            return err(lw, &x->loc, "T(...) must be a permutation of 0..%d", n - 1);
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
    if (!v || v->kind != AV_INT || v->t.is_u64) return want(lw, attr, v, "an integer");
    if (v->t.i < 0) return want(lw, attr, v, "a non-negative integer");
    memcpy((char *)a + spec->off, &v->t.i, sizeof(int64_t));
    return true;
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
    if (!v || v->kind != AV_STRING) return want(lw, attr, v, "a string");
    const char *s = ast_tok_str(lw->m->arena, v->t);
    memcpy((char *)a + spec->off, &s, sizeof s);
    return true;
}

/* A computation reference: must name a computation defined earlier. */
static bool comp_ref(Lower *lw, const AstVal *attr, const AstVal *v, int32_t *out)
{
    *out = -1;
    if (!v || (v->kind != AV_NAME && v->kind != AV_WORD)) return want(lw, attr, v, "a computation name");
    NameEnt *e = name_find(lw->comp_names, v->t.s, v->t.n);
    if (!e) { /* maybe defined later: reported at the end of the module */
        Pending *p = ARENA_NEW(lw->keep, Pending);
        *p = (Pending){v->t, v->loc, lw->pending_comps};
        lw->pending_comps = p;
        return true;
    }
    if (e->idx >= lw->cur_comp) {
        err(lw, &v->loc, "computation '%.*s' calls itself", TOKF(v->t));
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
        return err(lw, &attr->loc, "branch_computations= cannot be combined with true_computation=/false_computation=");
    if (!is_group(v, AV_BRACE)) return want(lw, attr, v, "a list of computations like {%a, %b}");
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
        return err(lw, &attr->loc, "%.*s= cannot be combined with branch_computations=", TOKF(attr->t));
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
    bool r = want(lw, attr, v, arena_strdup(lw->tmp, sb_cstr(&b)));
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
    if (!is_group(v, AV_BRACE)) return want(lw, attr, v, what);
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
        if (got < 2 || x) return want(lw, attr, r ? r : e, what);
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
    if (!v || v->kind != AV_PAD) return want(lw, attr, v, what);
    int64_t dims[SPMDC_MAX_RANK * 3];
    int32_t r = 0;
    const char *s = v->t.s, *e = s + v->t.n;
    int64_t *lo = ARENA_ARRAY(lw->m->arena, int64_t, 3 * SPMDC_MAX_RANK);
    while (s < e) {
        const char *x = memchr(s, 'x', (size_t)(e - s));
        if (!x) x = e;
        int n;
        if (r == SPMDC_MAX_RANK || !split_nums(s, (uint32_t)(x - s), '_', dims, 3, &n) || n < 2 ||
            (n == 3 && dims[2] < 0))
            return want(lw, attr, v, what);
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
    return err(lw, v ? &v->loc : &sub->loc, "window %.*s= expects %s, found %s", TOKF(sub->t),
               is_pad ? "low_high per dimension like 1_1x0_0" : "one number per dimension like 3x3",
               describe(lw, v));
}

static bool at_window(Lower *lw, const AstVal *attr, const AstVal *v, HloAttrs *a, const AttrSpec *spec)
{
    (void)spec;
    static const char *const subs[] = {"size", "stride", "pad", "lhs_dilate", "rhs_dilate", "rhs_reversal", NULL};
    if (!is_group(v, AV_BRACE) || (v->child && v->child->next))
        return want(lw, attr, v, "a window like {size=3x3 stride=2x2 pad=1_1x1_1}");
    int64_t vals[6][SPMDC_MAX_RANK], pad_hi[SPMDC_MAX_RANK];
    int n[6] = {0};
    bool given[6] = {false};
    int rank = -1;
    for (const AstVal *sub = v->child ? v->child->child : NULL; sub; sub = sub->next) {
        int k = -1;
        for (int i = 0; sub->kind == AV_ATTR && subs[i]; i++)
            if (ast_tok_eq(sub->t, subs[i])) k = i;
        if (k < 0)
            return err(lw, &sub->loc, "unknown window field %s (expected size=, stride=, pad=, lhs_dilate=, "
                                      "rhs_dilate= or rhs_reversal=)", describe(lw, sub));
        if (given[k]) return err(lw, &sub->loc, "window field '%s=' given twice", subs[k]);
        given[k] = true;
        if (!window_values(lw, sub, vals[k], &n[k], pad_hi)) return false;
        if (rank >= 0 && n[k] != rank)
            return err(lw, &sub->loc, "window field '%s=' has %d dimension%s, but earlier fields have %d", subs[k],
                       n[k], n[k] == 1 ? "" : "s", rank);
        rank = n[k];
    }
    if (rank > 0 && !given[0]) return err(lw, &v->loc, "window has no size=");
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
            return err(lw, &v->loc, "window dimension %d: size, stride and dilations must be at least 1 and "
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
    if (!v || v->kind != AV_DIMLABELS) return want(lw, attr, v, "convolution dim labels like b01f_01io->b01f");
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
        return err(lw, &v->loc, "malformed dim_labels %.*s: each part needs one b/f (i/o for the kernel) and the same "
                                "spatial digits 0..n-1", TOKF(v->t));
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
            if (l.n == 0) return err(lw, &e->loc, "empty replica group");
            if (e == v->child) {
                rg->group_size = l.n;
                rg->ids = ARENA_ARRAY(lw->m->arena, int64_t, n * l.n);
            } else if (l.n != rg->group_size) {
                return err(lw, &e->loc, "replica groups must all have the same size: this one has %d ids, the "
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
        return want(lw, attr, v, "groups like {{0,1},{2,3}} or [2,2]<=[4]");
    int64_t g[2], dims[SPMDC_MAX_TILE_DIMS], total;
    int32_t nd, perm[SPMDC_MAX_TILE_DIMS];
    if (ast_count(gs->child) != 2 || !elem_single(gs->child) || !elem_single(gs->child->next))
        return want(lw, attr, gs, "[groups,group_size] before '<='");
    if (!int_of(lw, elem_single(gs->child), "replica_groups", &g[0]) ||
        !int_of(lw, elem_single(gs->child->next), "replica_groups", &g[1]))
        return false;
    if (!iota_source(lw, src, t, false, dims, &nd, perm, &total, SPMDC_MAX_TILE_DIMS)) return false;
    if (g[0] < 1 || g[1] < 1 || mul_capped(g[0], g[1], SPMDC_MAX_DEVICES) != total)
        return err(lw, &gs->loc, "replica_groups [%lld,%lld] must hold exactly the %lld devices of its iota source",
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
    if (!is_group(v, AV_BRACE)) return want(lw, attr, v, what);
    int32_t n = ast_count(v->child), k = 0;
    int64_t *p = ARENA_ARRAY(lw->m->arena, int64_t, 2 * (n ? n : 1));
    for (const AstVal *e = v->child; e; e = e->next, k++) {
        IntList l;
        const AstVal *x = elem_single(e);
        if (!x) return want(lw, attr, e, what);
        if (!intlist_of(lw, attr, x, &l)) return false;
        if (l.n != 2) return err(lw, &x->loc, "a source_target pair needs exactly 2 ids, found %d", l.n);
        p[2 * k] = l.v[0];
        p[2 * k + 1] = l.v[1];
    }
    a->n_pairs = n;
    a->pairs = p;
    return true;
}

#define F(field) offsetof(HloAttrs, field)
static const AttrSpec ATTR_SPECS[] = {
    {"dimensions", at_intlist, F(dimensions), false},
    {"lhs_contracting_dims", at_intlist, F(lhs_contracting), false},
    {"rhs_contracting_dims", at_intlist, F(rhs_contracting), false},
    {"lhs_batch_dims", at_intlist, F(lhs_batch), false},
    {"rhs_batch_dims", at_intlist, F(rhs_batch), false},
    {"dynamic_slice_sizes", at_intlist, F(dynamic_slice_sizes), false},
    {"offset_dims", at_intlist, F(offset_dims), false},
    {"collapsed_slice_dims", at_intlist, F(collapsed_slice_dims), false},
    {"start_index_map", at_intlist, F(start_index_map), false},
    {"slice_sizes", at_intlist, F(slice_sizes), false},
    {"operand_batching_dims", at_intlist, F(operand_batching_dims), false},
    {"start_indices_batching_dims", at_intlist, F(start_indices_batching_dims), false},
    {"update_window_dims", at_intlist, F(update_window_dims), false},
    {"inserted_window_dims", at_intlist, F(inserted_window_dims), false},
    {"scatter_dims_to_operand_dims", at_intlist, F(scatter_dims_to_operand_dims), false},
    {"input_batching_dims", at_intlist, F(input_batching_dims), false},
    {"scatter_indices_batching_dims", at_intlist, F(scatter_indices_batching_dims), false},
    {"feature_group_count", at_int, F(feature_group_count), false},
    {"batch_group_count", at_int, F(batch_group_count), false},
    {"index", at_int, F(index), false},
    {"iota_dimension", at_int, F(iota_dimension), false},
    {"channel_id", at_int, F(channel_id), false},
    {"index_vector_dim", at_int, F(index_vector_dim), false},
    {"use_global_device_ids", at_bool, F(use_global_device_ids), false},
    {"is_stable", at_bool, F(is_stable), false},
    {"indices_are_sorted", at_bool, F(indices_are_sorted), false},
    {"unique_indices", at_bool, F(unique_indices), false},
    {"to_apply", at_comp, F(to_apply), false},
    {"scatter", at_comp, F(to_apply), false},
    {"select", at_comp, F(select), false},
    {"condition", at_comp, F(condition), false},
    {"body", at_comp, F(body), false},
    {"true_computation", at_branch, 0, false},
    {"false_computation", at_branch, 1, false},
    {"branch_computations", at_complist, F(branches), false},
    {"called_computations", at_complist, F(called), false},
    {"custom_call_target", at_string, F(custom_call_target), false},
    {"direction", at_direction, 0, false},
    {"type", at_compare_type, 0, false}, /* compare only; elsewhere kept verbatim */
    {"distribution", at_distribution, 0, false},
    {"slice", at_slice, 0, false},
    {"padding", at_padding, 0, false},
    {"window", at_window, 0, false},
    {"dim_labels", at_dim_labels, 0, false},
    {"replica_groups", at_replica_groups, 0, true},
    {"source_target_pairs", at_pairs, 0, false},
};
#undef F
#define N_ATTR_SPECS ((int32_t)(sizeof ATTR_SPECS / sizeof ATTR_SPECS[0]))
_Static_assert(sizeof ATTR_SPECS / sizeof ATTR_SPECS[0] <= 64, "attribute seen-mask is a uint64_t");

/* ================================================================ shardings */

/* A sharding's brace content, flattened: the prims of every element in order,
 * with a comma item (v == NULL) between elements. */
typedef struct ShItem {
    const AstVal *v;
    const AstVal *elem; /* the element this item belongs to (comma: the next one) */
} ShItem;

typedef struct ShItems {
    ShItem *it;
    int32_t n;
} ShItems;

static ShItems sh_flatten(Lower *lw, const AstVal *brace)
{
    int32_t n = 0;
    for (const AstVal *e = brace->child; e; e = e->next) n += ast_count(e->child) + 1;
    ShItems r = {ARENA_ARRAY(lw->tmp, ShItem, n ? n : 1), 0};
    for (const AstVal *e = brace->child; e; e = e->next) {
        if (e != brace->child) r.it[r.n++] = (ShItem){NULL, e};
        for (const AstVal *p = e->child; p; p = p->next) r.it[r.n++] = (ShItem){p, e};
    }
    return r;
}

static const AstLoc *item_loc(const ShItems *its, int32_t i)
{
    if (i >= its->n) i = its->n - 1;
    return its->it[i].v ? &its->it[i].v->loc : &its->it[i].elem->loc;
}

static const char *item_describe(Lower *lw, const ShItems *its, int32_t i)
{
    if (i >= its->n) return "the end of the sharding";
    return its->it[i].v ? describe(lw, its->it[i].v) : "','";
}

/* devices=[t0,t1,...] then `<=[dims] T(perm)` or an explicit id list.
 * *i indexes the devices= item; on return it indexes the last item used. */
static bool sh_devices(Lower *lw, const ShItems *its, int32_t *i, ShardingSyntax *s)
{
    const AstVal *tv = its->it[*i].v->child;
    if (!is_group(tv, AV_BRACKET) || !tv->child)
        return err(lw, tv ? &tv->loc : item_loc(its, *i), "devices= expects tile dimensions like [2,4], found %s",
                   describe(lw, tv));
    int64_t prod = 1;
    for (const AstVal *e = tv->child; e; e = e->next) {
        if (s->n_tile_dims == SPMDC_MAX_TILE_DIMS)
            return err(lw, &e->loc, "more than %d tile dimensions", SPMDC_MAX_TILE_DIMS);
        int64_t d;
        if (!int_of(lw, elem_single(e) ? elem_single(e) : e, "tile dimension", &d)) return false;
        if (d < 1) return err(lw, &e->loc, "tile dimensions must be at least 1, found %lld", (long long)d);
        s->tile_dims[s->n_tile_dims++] = d;
        prod = mul_capped(prod, d, SPMDC_MAX_DEVICES);
        if (prod < 0) return err(lw, &tv->loc, "tile assignment has more than %d devices", SPMDC_MAX_DEVICES);
    }
    int32_t j = *i + 1;
    const AstVal *nx = j < its->n ? its->it[j].v : NULL;
    if (nx && nx->kind == AV_PUNCT && nx->punct == AP_LE) {
        const AstVal *src = j + 1 < its->n ? its->it[j + 1].v : NULL;
        const AstVal *t = j + 2 < its->n && is_group(its->it[j + 2].v, AV_TPAREN) ? its->it[j + 2].v : NULL;
        if (!is_group(src, AV_BRACKET))
            return err(lw, item_loc(its, j + 1), "expected the iota source like [8] after '<=', found %s",
                       item_describe(lw, its, j + 1));
        int64_t total;
        if (!iota_source(lw, src, t, true, s->iota_dims, &s->n_iota_dims, s->iota_perm, &total, SPMDC_MAX_TILE_DIMS))
            return false;
        s->has_perm = t != NULL;
        if (total != prod)
            return err(lw, &src->loc, "iota source has %lld devices but the tile dimensions need %lld",
                       (long long)total, (long long)prod);
        *i = j + (t ? 2 : 1);
        return true;
    }
    if (!nx || nx->kind != AV_INT)
        return err(lw, item_loc(its, j), "expected device ids or '<=' after devices=[...], found %s",
                   item_describe(lw, its, j));
    int64_t n = 1;
    while (j + 2 < its->n && !its->it[j + 1].v && its->it[j + 2].v && its->it[j + 2].v->kind == AV_INT) {
        j += 2;
        n++;
    }
    if (n != prod)
        return err(lw, &tv->loc, "devices=[...] needs %lld device ids, but %lld are listed", (long long)prod,
                   (long long)n);
    if (n <= 1) return err(lw, &tv->loc, "a tiled sharding needs at least 2 devices; use {maximal device=N}");
    s->n_devices = n;
    s->devices = ARENA_ARRAY(lw->m->arena, int64_t, n);
    for (int64_t k = 0, at = *i + 1; k < n; k++, at += 2) {
        if (!int_of(lw, its->it[at].v, "device id", &s->devices[k])) return false;
        if (s->devices[k] < 0) return err(lw, &its->it[at].v->loc, "device ids must be non-negative");
    }
    *i = j;
    return true;
}

static bool sh_subgroups(Lower *lw, const AstVal *v, ShardingSyntax *s)
{
    static const char *const names[] = {"replicated", "manual", "unreduced", "maximal"};
    const AstVal *g = v->child;
    if (!is_group(g, AV_BRACE) || !g->child)
        return err(lw, &v->loc, "last_tile_dims= expects a list like {manual, replicated}");
    for (const AstVal *e = g->child; e; e = e->next) {
        const AstVal *w = elem_single(e);
        int k = -1;
        for (int q = 0; q < 4; q++)
            if (is_word(w, names[q])) k = q;
        if (k < 0)
            return err(lw, &e->loc, "last_tile_dims: expected replicated, manual, unreduced or maximal, found %s",
                       describe(lw, e));
        if (s->n_subgroups == 4) return err(lw, &e->loc, "last_tile_dims lists more than 4 subgroups");
        s->subgroups[s->n_subgroups++] = (SubgroupType)k;
    }
    return true;
}

static bool sh_check_positional(Lower *lw, const AstVal *brace, const AstVal *kind, const AstVal *device,
                                const AstVal *devices, const AstVal *ltdr, const AstVal *ltd, ShardingSyntax *s)
{
    if (kind && is_word(kind, "maximal")) {
        if (devices) return err(lw, &devices->loc, "'maximal' cannot be combined with devices=[...]");
        if (!device) return err(lw, &kind->loc, "'maximal' needs a device, like {maximal device=0}");
    } else if (device) {
        return err(lw, &device->loc, "device=N is only valid after 'maximal'");
    }
    if (kind && devices)
        return err(lw, &devices->loc, "'%.*s' cannot be combined with devices=[...]", TOKF(kind->t));
    const AstVal *sub = ltdr ? ltdr : ltd;
    if (sub && !devices) return err(lw, &sub->loc, "'%.*s' needs devices=[...]", TOKF(sub->t));
    if (!kind && !devices)
        return err(lw, &brace->loc, "sharding has no kind: expected replicated, maximal device=N, manual, unknown "
                                    "or devices=[...]");
    if (ltdr && ltd) return err(lw, &ltd->loc, "use either last_tile_dim_replicate or last_tile_dims=, not both");
    int32_t n_sub = ltdr ? 1 : s->n_subgroups;
    if (devices && n_sub > s->n_tile_dims)
        return err(lw, &sub->loc, "%d subgroup dimension%s but only %d tile dimension%s", n_sub, n_sub == 1 ? "" : "s",
                   s->n_tile_dims, s->n_tile_dims == 1 ? "" : "s");
    return true;
}

/* {replicated} {maximal device=0} {devices=[2,2]0,1,2,3 last_tile_dim_replicate} ... */
static bool sh_positional(Lower *lw, const AstVal *brace, const ShItems *its, ShardingSyntax *s)
{
    static const char *const kinds[] = {"replicated", "maximal", "manual", "unknown", "unreduced"};
    static const ShardingSyntaxKind kind_of[] = {SSYN_REPLICATED, SSYN_MAXIMAL, SSYN_MANUAL, SSYN_UNKNOWN,
                                                 SSYN_UNREDUCED};
    const AstVal *kind = NULL, *device = NULL, *devices = NULL, *ltdr = NULL, *ltd = NULL;
    for (int32_t i = 0; i < its->n; i++) {
        const AstVal *v = its->it[i].v;
        if (!v)
            return err(lw, item_loc(its, i), "unexpected ',' before %s in sharding (items are separated by spaces)",
                       item_describe(lw, its, i + 1));
        int k = -1;
        for (int q = 0; q < 5; q++)
            if (is_word(v, kinds[q])) k = q;
        if (k >= 0) {
            if (kind) return err(lw, &v->loc, "sharding has two kinds, '%.*s' and '%.*s'", TOKF(kind->t), TOKF(v->t));
            kind = v;
            s->kind = kind_of[k];
        } else if (is_word(v, "last_tile_dim_replicate")) {
            ltdr = v;
            s->last_tile_dim_replicate = true;
        } else if (is_word(v, "shard_as") || is_word(v, "shard_like")) {
            int64_t g;
            if (i + 1 >= its->n || !int_of(lw, its->it[i + 1].v, describe(lw, v), &g)) return false;
            i++; /* accepted and ignored */
        } else if (v->kind == AV_ATTR && ast_tok_eq(v->t, "device")) {
            if (!int_of(lw, v->child, "device=", &s->device)) return false;
            if (s->device < 0) return err(lw, &v->child->loc, "device ids must be non-negative");
            device = v;
        } else if (v->kind == AV_ATTR && ast_tok_eq(v->t, "devices") && !devices) {
            devices = v;
            s->kind = SSYN_TILED;
            if (!sh_devices(lw, its, &i, s)) return false;
        } else if (v->kind == AV_ATTR && ast_tok_eq(v->t, "last_tile_dims") && !ltd) {
            ltd = v;
            if (!sh_subgroups(lw, v, s)) return false;
        } else if (!(v->kind == AV_ATTR && ast_tok_eq(v->t, "metadata"))) {
            return err(lw, &v->loc, "unexpected %s in sharding", describe(lw, v));
        }
    }
    return sh_check_positional(lw, brace, kind, device, devices, ltdr, ltd, s);
}

/* ---------------------------------------------------------------- named (mesh) form */

typedef struct AxisUse {
    bool full;
    int32_t n_sub;
} AxisUse;

/* `x`, `'x'`, `"x"`, or a sub-axis `x:(pre)size` / `'x':(pre)size` (one element's prims). */
static bool sh_axis_ref(Lower *lw, const AstVal *e, ShardingSyntax *s, AxisUse *use, AxisRefSyntax *out)
{
    const AstVal *p = e->child, *pre = NULL, *size = NULL;
    bool sub = false;
    if (p && p->kind == AV_LABEL) {
        sub = true;
        pre = p->next;
    } else if (p && p->kind == AV_STRING && p->next && p->next->kind == AV_PUNCT && p->next->punct == AP_COLON) {
        sub = true;
        pre = p->next->next;
    }
    size = pre ? pre->next : NULL;
    if (!p || (!sub && ((p->kind != AV_WORD && p->kind != AV_STRING) || p->next)) ||
        (sub && (!is_group(pre, AV_PAREN) || !elem_single(pre->child) || !size || size->next)))
        return err(lw, &e->loc, "expected a mesh axis like x or x:(2)2, found %s", describe(lw, e));
    int32_t a = -1;
    for (int32_t k = 0; k < s->n_mesh_axes; k++)
        if (ast_tok_eq(p->t, s->mesh_axis_names[k])) a = k;
    if (a < 0) return err(lw, &p->loc, "axis '%.*s' is not in the sharding's mesh", TOKF(p->t));
    memset(out, 0, sizeof *out);
    out->name = s->mesh_axis_names[a];
    out->span = e->loc.span;
    if (sub) {
        if (!int_of(lw, elem_single(pre->child), "sub-axis", &out->pre_size) || !int_of(lw, size, "sub-axis", &out->size))
            return false;
        int64_t whole = s->mesh_axis_sizes[a], span = mul_capped(out->pre_size, out->size, whole);
        if (out->pre_size < 1 || out->size < 1 || span < 0 || whole % span != 0)
            return err(lw, &e->loc, "sub-axis %s:(%lld)%lld does not fit axis '%s' of size %lld", out->name,
                       (long long)out->pre_size, (long long)out->size, out->name, (long long)whole);
    } else {
        out->size = s->mesh_axis_sizes[a];
    }
    if (use[a].full || (!sub && use[a].n_sub))
        return err(lw, &e->loc, "axis '%s' is used twice in one sharding", out->name);
    if (sub) use[a].n_sub++;
    else use[a].full = true;
    return true;
}

/* `{x, y}` axis lists (replicated=, unreduced=, manual=). */
static bool sh_axis_list(Lower *lw, const AstVal *v, ShardingSyntax *s, AxisUse *use, AxisRefSyntax **out,
                         int32_t *n)
{
    const AstVal *g = v->child;
    if (!is_group(g, AV_BRACE)) return err(lw, &v->loc, "%.*s= expects a list of axes like {x, y}", TOKF(v->t));
    *n = ast_count(g->child);
    *out = ARENA_ARRAY(lw->m->arena, AxisRefSyntax, *n ? *n : 1);
    int32_t k = 0;
    for (const AstVal *e = g->child; e; e = e->next)
        if (!sh_axis_ref(lw, e, s, use, &(*out)[k++])) return false;
    return true;
}

/* `[{x}, {y, ?}, {}]`: one entry per tensor dim; `?` (last) marks it open. */
static bool sh_dims(Lower *lw, const AstVal *v, ShardingSyntax *s, AxisUse *use)
{
    int32_t nd = ast_count(v->child);
    if (nd > SPMDC_MAX_RANK) return err(lw, &v->loc, "sharding lists more than %d dimensions", SPMDC_MAX_RANK);
    s->n_dims = nd;
    s->dim_n_axes = ARENA_ARRAY(lw->m->arena, int32_t, nd ? nd : 1);
    s->dim_axes = ARENA_ARRAY(lw->m->arena, AxisRefSyntax *, nd ? nd : 1);
    int32_t d = 0;
    for (const AstVal *e = v->child; e; e = e->next, d++) {
        const AstVal *g = elem_single(e);
        if (!is_group(g, AV_BRACE))
            return err(lw, &e->loc, "expected a dimension sharding like {x} or {}, found %s", describe(lw, e));
        int32_t n = ast_count(g->child);
        s->dim_axes[d] = ARENA_ARRAY(lw->m->arena, AxisRefSyntax, n ? n : 1);
        for (const AstVal *a = g->child; a; a = a->next) {
            const AstVal *q = elem_single(a);
            if (q && q->kind == AV_PUNCT && q->punct == AP_QUESTION) {
                if (a->next) return err(lw, &q->loc, "'?' must come last in a dimension sharding");
                s->open_dims |= 1u << d;
            } else if (!sh_axis_ref(lw, a, s, use, &s->dim_axes[d][s->dim_n_axes[d]++])) {
                return false;
            }
        }
    }
    return true;
}

/* mesh[x=2,y=4] or maximal_mesh[device_id=3]. */
static bool sh_mesh(Lower *lw, const AstVal *word, const AstVal *axes, ShardingSyntax *s)
{
    if (is_word(word, "maximal_mesh")) {
        const AstVal *a = elem_single(axes->child);
        if (!a || a->kind != AV_ATTR || !ast_tok_eq(a->t, "device_id") || !int_of(lw, a->child, "device_id=", &s->device))
            return err(lw, &axes->loc, "maximal_mesh expects [device_id=N]");
        s->kind = SSYN_MAXIMAL;
        return true;
    }
    int64_t prod = 1;
    for (const AstVal *e = axes->child; e; e = e->next) {
        /* x=2 (ATTR), or 'x'=2 / "x"=2 (STRING '=' INT) */
        const AstVal *a = e->child, *sz = NULL;
        if (a && a->kind == AV_ATTR && !a->next)
            sz = a->child;
        else if (a && a->kind == AV_STRING && a->next && a->next->punct == AP_EQ && a->next->next &&
                 !a->next->next->next)
            sz = a->next->next;
        if (!sz) return err(lw, &e->loc, "expected a mesh axis like x=2, found %s", describe(lw, e));
        if (s->n_mesh_axes == SPMDC_MAX_MESH_AXES)
            return err(lw, &e->loc, "mesh has more than %d axes", SPMDC_MAX_MESH_AXES);
        if (a->t.n >= 32 || a->t.n == 0 || memchr(a->t.s, 0, a->t.n))
            return err(lw, &a->loc, "mesh axis name '%.*s' is empty or longer than 31 bytes", TOKF(a->t));
        for (int32_t k = 0; k < s->n_mesh_axes; k++)
            if (ast_tok_eq(a->t, s->mesh_axis_names[k]))
                return err(lw, &a->loc, "mesh axis '%.*s' is declared twice", TOKF(a->t));
        int64_t size;
        if (!int_of(lw, sz, "mesh axis size", &size)) return false;
        prod = mul_capped(prod, size, SPMDC_MAX_DEVICES);
        if (size < 1 || prod < 0)
            return err(lw, &sz->loc, "mesh axis sizes must be at least 1 and the mesh at most %d devices",
                       SPMDC_MAX_DEVICES);
        s->mesh_axis_names[s->n_mesh_axes] = ast_tok_str(lw->m->arena, a->t);
        s->mesh_axis_sizes[s->n_mesh_axes++] = size;
    }
    s->kind = SSYN_NAMED;
    return true;
}

/* One item after the mesh: [dims], a bare kind word, or an axis-list attribute. */
static bool sh_named_item(Lower *lw, const AstVal *v, ShardingSyntax *s, AxisUse *use, bool *has_dims)
{
    if (is_group(v, AV_BRACKET) && !*has_dims && s->kind == SSYN_NAMED) {
        *has_dims = true;
        return sh_dims(lw, v, s, use);
    }
    if ((is_word(v, "replicated") || is_word(v, "manual") || is_word(v, "unreduced")) && !*has_dims) {
        s->named_replicated |= is_word(v, "replicated");
        s->named_manual |= is_word(v, "manual");
        s->named_unreduced |= is_word(v, "unreduced");
        return true;
    }
    if (v->kind == AV_ATTR && ast_tok_eq(v->t, "replicated") && !s->replicated_axes)
        return sh_axis_list(lw, v, s, use, &s->replicated_axes, &s->n_replicated_axes);
    if (v->kind == AV_ATTR && ast_tok_eq(v->t, "unreduced") && !s->unreduced_axes)
        return sh_axis_list(lw, v, s, use, &s->unreduced_axes, &s->n_unreduced_axes);
    if (v->kind == AV_ATTR && ast_tok_eq(v->t, "manual") && !s->manual_axes)
        return sh_axis_list(lw, v, s, use, &s->manual_axes, &s->n_manual_axes);
    if (v->kind == AV_ATTR && ast_tok_eq(v->t, "metadata")) return true;
    if (v->kind == AV_ATTR && ast_tok_eq(v->t, "device_ids"))
        return err(lw, &v->loc, "device_ids= in a mesh is not supported (spmdc numbers mesh devices in order)");
    return err(lw, &v->loc, "unexpected %s in a mesh sharding", describe(lw, v));
}

/* {mesh[x=2,y=4], [{x}, {}], replicated={y}} and {maximal_mesh[device_id=0]}. */
static bool sh_named(Lower *lw, const ShItems *its, ShardingSyntax *s)
{
    if (its->n < 2 || !is_group(its->it[1].v, AV_BRACKET))
        return err(lw, item_loc(its, 0), "expected the mesh axes like mesh[x=2,y=4]");
    if (!sh_mesh(lw, its->it[0].v, its->it[1].v, s)) return false;
    AxisUse use[SPMDC_MAX_MESH_AXES];
    memset(use, 0, sizeof use);
    bool has_dims = false;
    for (int32_t i = 2; i < its->n; i += 2) {
        if (its->it[i].v || i + 1 >= its->n || !its->it[i + 1].v)
            return err(lw, item_loc(its, i), "expected ',' between the parts of a mesh sharding, found %s",
                       item_describe(lw, its, i));
        if (!sh_named_item(lw, its->it[i + 1].v, s, use, &has_dims)) return false;
    }
    if (s->kind == SSYN_NAMED && !has_dims && !s->named_replicated && !s->named_manual && !s->named_unreduced)
        return err(lw, item_loc(its, 1), "mesh sharding needs per-dimension axes like [{x}, {}] or a kind "
                                         "(replicated, manual, unreduced)");
    return true;
}

/* One sharding (not a tuple) written as the brace group v. */
static bool sh_single(Lower *lw, const AstVal *v, ShardingSyntax *s)
{
    memset(s, 0, sizeof *s);
    s->span = v->loc.span;
    ShItems its = sh_flatten(lw, v);
    if (its.n == 0) return err(lw, &v->loc, "empty sharding '{}' inside a tuple sharding");
    const AstVal *first = its.it[0].v;
    if (is_word(first, "mesh") || is_word(first, "maximal_mesh")) return sh_named(lw, &its, s);
    return sh_positional(lw, v, &its, s);
}

/* sharding=: a single sharding or a flat tuple `{{...}, {...}}` (`{}` = empty tuple). */
static const ShardingSyntax *lower_sharding(Lower *lw, const AstVal *attr, const AstVal *v)
{
    if (!is_group(v, AV_BRACE)) {
        want(lw, attr, v, "a sharding like {replicated} or {devices=[2,1]0,1}");
        return NULL;
    }
    ShardingSyntax *s = ARENA_NEW(lw->m->arena, ShardingSyntax);
    const AstVal *first = v->child ? v->child->child : NULL;
    if (first && !is_group(first, AV_BRACE)) return sh_single(lw, v, s) ? s : NULL;
    s->kind = SSYN_TUPLE;
    s->span = v->loc.span;
    s->n_elems = ast_count(v->child);
    s->elems = ARENA_ARRAY(lw->m->arena, ShardingSyntax, s->n_elems ? s->n_elems : 1);
    int32_t k = 0;
    for (const AstVal *e = v->child; e; e = e->next, k++) {
        const AstVal *x = elem_single(e);
        if (!is_group(x, AV_BRACE)) {
            err(lw, &e->loc, "a tuple sharding lists one {...} per tuple element, found %s", describe(lw, e));
            return NULL;
        }
        const AstVal *inner = x->child ? x->child->child : NULL;
        if (is_group(inner, AV_BRACE)) {
            err(lw, &x->loc, "nested tuple shardings are not allowed: list one sharding per leaf, flat");
            return NULL;
        }
        if (!sh_single(lw, x, &s->elems[k])) return NULL;
    }
    return s;
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
static bool check_dup_names(Lower *lw, const AstVal **list, int32_t n)
{
    bool ok = true;
    if (n <= 16) {
        for (int32_t i = 1; i < n; i++)
            for (int32_t j = 0; j < i; j++)
                if (list[i]->t.n == list[j]->t.n && memcmp(list[i]->t.s, list[j]->t.s, list[i]->t.n) == 0) {
                    ok = err(lw, &list[i]->loc, "attribute '%.*s' is given twice", TOKF(list[i]->t));
                    note(lw, &list[j]->loc, "first given here");
                    break;
                }
        return ok;
    }
    const AstVal **sorted = ARENA_ARRAY(lw->tmp, const AstVal *, n);
    memcpy(sorted, list, sizeof(*sorted) * (size_t)n);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_attr_name);
    for (int32_t i = 1, first = 0; i < n; i++) {
        if (sorted[i]->t.n == sorted[first]->t.n && memcmp(sorted[i]->t.s, sorted[first]->t.s, sorted[i]->t.n) == 0) {
            ok = err(lw, &sorted[i]->loc, "attribute '%.*s' is given twice", TOKF(sorted[i]->t));
            note(lw, &sorted[first]->loc, "first given here");
        } else {
            first = i;
        }
    }
    return ok;
}

/* name=value kept as written: text is the value's source text. */
static RawAttr *make_raw(Lower *lw, const AstVal **list, int32_t n)
{
    RawAttr *r = ARENA_ARRAY(lw->m->arena, RawAttr, n);
    for (int32_t i = 0; i < n; i++) {
        r[i].name = ast_tok_str(lw->m->arena, list[i]->t);
        uint32_t off = list[i]->child->loc.off, end = list[i]->loc.end;
        r[i].text = arena_strndup(lw->m->arena, lw->cx->text + off, end > off ? end - off : 0);
    }
    return r;
}

/* ================================================================ instructions */

typedef struct InstOut {
    HloAttrs attrs;
    bool any_attr;
    const ShardingSyntax *sharding;
} InstOut;

static const HloAttrs ATTRS_DEFAULT = {.to_apply = -1, .select = -1, .condition = -1, .body = -1};

/* Typed attributes into out->attrs, sharding= into out->sharding, the rest
 * verbatim.  Duplicates are errors. */
static bool lower_attrs(Lower *lw, const AstInst *ai, HloOpcode op, InstOut *out)
{
    uint64_t seen = 0;
    const AstVal *first[N_ATTR_SPECS], *sharding = NULL;
    int32_t n_all = ast_count(ai->attrs), n_raw = 0;
    const AstVal **raw = n_all ? ARENA_ARRAY(lw->tmp, const AstVal *, n_all) : NULL;
    bool ok = true;
    for (const AstVal *at = ai->attrs; at; at = at->next) {
        NameEnt *e = name_find(lw->attr_specs, at->t.s, at->t.n);
        if (e && ATTR_SPECS[e->idx].fn == at_compare_type && op != HLO_COMPARE) e = NULL;
        if (ast_tok_eq(at->t, "sharding")) {
            if (sharding) {
                ok = err(lw, &at->loc, "attribute 'sharding' is given twice");
                note(lw, &sharding->loc, "first given here");
                continue;
            }
            sharding = at;
            const AstVal *v = attr_value(lw, at);
            out->sharding = v ? lower_sharding(lw, at, v) : NULL;
            ok = out->sharding && ok;
        } else if (e) {
            if (seen >> e->idx & 1) {
                ok = err(lw, &at->loc, "attribute '%.*s' is given twice", TOKF(at->t));
                note(lw, &first[e->idx]->loc, "first given here");
                continue;
            }
            seen |= (uint64_t)1 << e->idx;
            first[e->idx] = at;
            const AttrSpec *spec = &ATTR_SPECS[e->idx];
            const AstVal *v = spec->whole_value ? at->child : attr_value(lw, at);
            out->any_attr = true;
            ok = v && spec->fn(lw, at, v, &out->attrs, spec) && ok;
        } else {
            raw[n_raw++] = at;
        }
    }
    if (n_raw) {
        ok = check_dup_names(lw, raw, n_raw) && ok;
        out->attrs.raw = make_raw(lw, raw, n_raw);
        out->attrs.n_raw = n_raw;
        out->any_attr = true;
    }
    return ok;
}

/* Resolves a `name` / `shape name` operand to an earlier instruction.  An
 * unknown name is remembered and reported at the end of the computation. */
static bool lower_operand(Lower *lw, int32_t ci, const AstVal *e, int32_t *out)
{
    const AstVal *p = e->child, *ty = NULL, *nm = p;
    if (p && (p->kind == AV_SHAPE || p->kind == AV_PAREN) && p->next) {
        ty = p;
        nm = p->next;
    }
    if (!nm || (nm->kind != AV_NAME && nm->kind != AV_WORD) || nm->next) {
        if (nm && nm->kind == AV_WORD && is_group(nm->next, AV_PAREN))
            return err(lw, &e->loc, "nested instructions are not supported as operands: give '%.*s(...)' its own "
                                    "instruction", TOKF(nm->t));
        return err(lw, &e->loc, "expected an operand (an instruction name, optionally after its shape), found %s",
                   describe(lw, e));
    }
    NameEnt *d = name_find(lw->inst_names, nm->t.s, nm->t.n);
    if (!d) {
        Pending *pd = ARENA_NEW(lw->comp_arena, Pending);
        *pd = (Pending){nm->t, nm->loc, lw->pending_ops};
        lw->pending_ops = pd;
        return false;
    }
    *out = d->idx;
    if (!ty) return true;
    Shape decl;
    if (!shape_of_val(lw, ty, &decl)) return false;
    const Shape *def = &hlo_inst(lw->m, ci, d->idx)->shape;
    if (!shape_equal(&decl, def)) {
        err(lw, &ty->loc, "operand '%.*s' is written with shape %s but is defined as %s", TOKF(nm->t),
            shape_str(lw, &decl), shape_str(lw, def));
        note(lw, &d->loc, "'%.*s' is defined here", TOKF(nm->t));
        return false;
    }
    return true;
}

/* parameter(N) and constant(literal) take no instruction operands. */
static bool lower_leaf_operand(Lower *lw, const AstInst *ai, HloOpcode op, const Shape *shape, bool have_shape,
                               InstOut *out)
{
    const AstVal *grp = ai->operands, *v = elem_single(grp->child);
    if (grp->child && grp->child->next) v = NULL;
    if (op == HLO_PARAMETER) {
        if (!v || v->kind != AV_INT || v->t.is_u64 || v->t.i < 0 || v->t.i > INT32_MAX)
            return err(lw, &grp->loc, "parameter expects its number, like parameter(0)");
        out->attrs.param_number = v->t.i;
        out->any_attr = true;
        return true;
    }
    if (!have_shape) return err(lw, &ai->opcode_loc, "constant needs a result shape, like f32[2] constant({1, 2})");
    if (!v) return err(lw, &grp->loc, "constant expects one literal, like constant({1, 2})");
    Literal *lit = ARENA_NEW(lw->m->arena, Literal);
    if (!lower_literal(lw, shape, v, lit)) return false;
    out->attrs.literal = lit;
    out->any_attr = true;
    return true;
}

/* The result shape of an instruction written without one (elementwise ops,
 * tuple, get-tuple-element). */
static bool infer_shape(Lower *lw, int32_t ci, const AstInst *ai, HloOpcode op, const int32_t *ops, int32_t n,
                        const HloAttrs *a, Shape *out)
{
    char cat = hlo_opcode_category(op);
    const HloComputation *c = hlo_comp(lw->m, ci);
    if (op == HLO_TUPLE) {
        memset(out, 0, sizeof *out);
        out->type = ET_TUPLE;
        out->n_elems = n;
        out->elems = ARENA_ARRAY(lw->tmp, Shape, n ? n : 1);
        for (int32_t k = 0; k < n; k++) out->elems[k] = c->insts[ops[k]].shape;
        return true;
    }
    if (op == HLO_GET_TUPLE_ELEMENT && n == 1) {
        const Shape *t = &c->insts[ops[0]].shape;
        if (t->type != ET_TUPLE || a->index < 0 || a->index >= t->n_elems)
            return err(lw, &ai->opcode_loc, "get-tuple-element index=%lld is out of range for %s",
                       (long long)a->index, shape_str(lw, t));
        *out = t->elems[a->index];
        return true;
    }
    bool ew = (cat == 'U' || cat == 'B' || cat == 'T') && op != HLO_CONVERT && op != HLO_BITCAST_CONVERT &&
              op != HLO_COMPLEX && op != HLO_REAL && op != HLO_IMAG;
    if (ew && n >= 1) {
        *out = c->insts[ops[(cat == 'T' && n >= 2) ? 1 : 0]].shape;
        if (op == HLO_COMPARE && out->type != ET_TUPLE) out->type = ET_PRED;
        out->has_layout = false;
        out->layout_tail = NULL;
        return true;
    }
    return err(lw, &ai->opcode_loc, "'%s' needs a result shape (only elementwise ops, tuple and "
                                    "get-tuple-element may omit it)", hlo_opcode_name(op));
}

/* Name bookkeeping for instruction idx: duplicates and ROOT. */
static void name_inst(Lower *lw, const AstInst *ai, int32_t idx)
{
    NameEnt *e = name_find(lw->inst_names, ai->name.s, ai->name.n);
    if (e) {
        err(lw, &ai->name_loc, "duplicate instruction name '%.*s' in computation '%.*s'", TOKF(ai->name),
            TOKF(lw->cur_comp_name));
        note(lw, &e->loc, "'%.*s' is first defined here", TOKF(ai->name));
    } else {
        name_add(lw->comp_arena, &lw->inst_names, ai->name.s, ai->name.n, idx, &ai->name_loc);
    }
    if (ai->is_root && lw->root >= 0) {
        err(lw, &ai->root_loc, "computation '%.*s' has more than one ROOT", TOKF(lw->cur_comp_name));
        note(lw, &lw->root_loc, "the first ROOT is here");
    } else if (ai->is_root) {
        lw->root = idx;
        lw->root_loc = ai->root_loc;
    }
}

/* One instruction.  It is always appended (with a placeholder opcode or
 * shape after an error) so instruction indices match the text. */
static void lower_inst(Lower *lw, const AstInst *ai)
{
    int32_t ci = lw->cur_comp, idx = lw->n_insts++;
    NameEnt *oe = name_find(lw->opcodes, ai->opcode.s, ai->opcode.n);
    HloOpcode op = oe ? (HloOpcode)oe->idx : HLO_OPCODE_COUNT;
    bool ok = true, have_shape = ai->shape != NULL;
    if (!oe) ok = err(lw, &ai->opcode_loc, "unknown opcode '%.*s'", TOKF(ai->opcode));
    Shape shape;
    memset(&shape, 0, sizeof shape);
    shape.type = ET_F32;
    if (have_shape && !lower_shape(lw, ai->shape, &shape)) ok = have_shape = false;
    InstOut out = {ATTRS_DEFAULT, false, NULL};
    int32_t n = 0, *ops = NULL;
    if (oe && (op == HLO_PARAMETER || op == HLO_CONSTANT)) {
        if (!ai->shape || have_shape) ok = lower_leaf_operand(lw, ai, op, &shape, have_shape, &out) && ok;
    } else {
        int32_t n_elems = ast_count(ai->operands->child);
        ops = ARENA_ARRAY(lw->tmp, int32_t, n_elems ? n_elems : 1);
        for (const AstVal *e = ai->operands->child; e; e = e->next) {
            if (lower_operand(lw, ci, e, &ops[n])) n++;
            else ok = false;
        }
    }
    ok = lower_attrs(lw, ai, op, &out) && ok;
    if (oe && ok && !ai->shape) infer_shape(lw, ci, ai, op, ops, n, &out.attrs, &shape);
    name_inst(lw, ai, idx);
    int32_t got = hlo_add_inst(lw->m, ci, oe ? op : HLO_PARAMETER, ast_tok_str(lw->tmp, ai->name), &shape, ops, n);
    SPMDC_ASSERT(got == idx);
    HloInst *in = hlo_inst(lw->m, ci, got);
    in->span = ai->loc.span;
    in->sharding_src = out.sharding;
    if (out.any_attr) *hlo_attrs_mut(lw->m, in) = out.attrs;
}

/* ================================================================ computations */

/* Lowers the signature now (its AST is freed after the hand-over). */
static void keep_signature(Lower *lw, const AstCompHead *h)
{
    lw->has_sig = h->has_sig;
    lw->n_params = 0;
    if (!h->has_sig) return;
    for (const AstParam *p = h->params; p; p = p->next) lw->n_params++;
    int32_t n = lw->n_params ? lw->n_params : 1;
    lw->param_shapes = ARENA_ARRAY(lw->comp_arena, Shape, n);
    lw->param_locs = ARENA_ARRAY(lw->comp_arena, AstLoc, n);
    lw->param_ok = ARENA_ARRAY(lw->comp_arena, bool, n);
    Arena *saved = lw->tmp;
    lw->tmp = lw->comp_arena; /* tuple elements must outlive this call */
    int32_t k = 0;
    for (const AstParam *p = h->params; p; p = p->next, k++) {
        lw->param_ok[k] = lower_shape(lw, p->shape, &lw->param_shapes[k]);
        lw->param_locs[k] = p->loc;
    }
    lw->result_ok = lower_shape(lw, h->result, &lw->result);
    lw->result_loc = h->result->loc;
    lw->tmp = saved;
}

/* The signature `(p: f32[4]) -> f32[]` must agree with the parameters and root. */
static void check_signature(Lower *lw)
{
    const HloComputation *c = hlo_comp(lw->m, lw->cur_comp);
    for (int32_t i = 0; i < c->n_insts; i++) {
        const HloInst *in = &c->insts[i];
        int64_t k = hlo_attrs(in)->param_number;
        if (in->op != HLO_PARAMETER || k >= lw->n_params || !lw->param_ok[k] ||
            shape_equal(&lw->param_shapes[k], &in->shape))
            continue;
        err(lw, &lw->param_locs[k], "the signature declares parameter %lld as %s but '%s' is %s", (long long)k,
            shape_str(lw, &lw->param_shapes[k]), in->name, shape_str(lw, &in->shape));
    }
    const HloInst *root = &c->insts[c->root];
    if (lw->result_ok && !shape_equal(&lw->result, &root->shape))
        err(lw, &lw->result_loc, "the signature declares the result as %s but the root '%s' is %s",
            shape_str(lw, &lw->result), root->name, shape_str(lw, &root->shape));
}

static void lower_comp_attrs(Lower *lw, const AstVal *attrs, HloComputation *c)
{
    for (const AstVal *at = attrs; at; at = at->next) {
        const AstVal *v = attr_value(lw, at);
        if (!ast_tok_eq(at->t, "execution_thread"))
            err(lw, &at->loc, "unknown computation attribute '%.*s' (only execution_thread= is allowed here)",
                TOKF(at->t));
        else if (c->execution_thread)
            err(lw, &at->loc, "attribute 'execution_thread' is given twice");
        else if (!v || v->kind != AV_STRING)
            want(lw, at, v, "a string");
        else
            c->execution_thread = ast_tok_str(lw->m->arena, v->t);
    }
}

/* Operands that named no earlier instruction: defined later, or nowhere. */
static void report_pending_ops(Lower *lw)
{
    Pending *rev = NULL;
    while (lw->pending_ops) { /* the list is newest first: report in text order */
        Pending *p = lw->pending_ops;
        lw->pending_ops = p->next;
        p->next = rev;
        rev = p;
    }
    for (Pending *p = rev; p; p = p->next) {
        NameEnt *d = name_find(lw->inst_names, p->name.s, p->name.n);
        if (d) {
            err(lw, &p->loc, "operand '%.*s' is used before its definition", TOKF(p->name));
            note(lw, &d->loc, "'%.*s' is defined here", TOKF(p->name));
        } else {
            err(lw, &p->loc, "undefined operand '%.*s': no instruction of that name in computation '%.*s'",
                TOKF(p->name), TOKF(lw->cur_comp_name));
        }
    }
}

/* ================================================================ hand-overs from the parser */

/* Lowering stops at the first syntax error (the AST may be partial). */
static bool lowering(const Lower *lw)
{
    return diag_error_count(lw->diag) - lw->base_errors == lw->n_errors;
}

static void ensure_module(Lower *lw, const char *name)
{
    if (!lw->m) lw->m = hlo_module_new(name);
}

static void on_header(void *data, AstTok name, const AstLoc *name_loc, const AstVal *attrs)
{
    Lower *lw = data;
    if (!lowering(lw)) return;
    lw->has_header = true;
    lw->module_name = name;
    lw->module_name_loc = *name_loc;
    ensure_module(lw, ast_tok_str(lw->tmp, name));
    int32_t n_all = ast_count(attrs), n_raw = 0, k = 0;
    const AstVal **raw = n_all ? ARENA_ARRAY(lw->tmp, const AstVal *, n_all) : NULL;
    const AstVal **all = n_all ? ARENA_ARRAY(lw->tmp, const AstVal *, n_all) : NULL;
    for (const AstVal *at = attrs; at; at = at->next) {
        all[k++] = at;
        int64_t *dst = ast_tok_eq(at->t, "num_partitions") ? &lw->m->num_partitions
                       : ast_tok_eq(at->t, "replica_count") ? &lw->m->replica_count : NULL;
        if (!dst) {
            raw[n_raw++] = at;
            continue;
        }
        const AstVal *v = attr_value(lw, at);
        if (v && (v->kind != AV_INT || v->t.is_u64 || v->t.i < 1 || v->t.i > SPMDC_MAX_DEVICES))
            err(lw, &v->loc, "%.*s= expects a device count between 1 and %d, found %s", TOKF(at->t),
                SPMDC_MAX_DEVICES, describe(lw, v));
        else if (v)
            *dst = v->t.i;
    }
    check_dup_names(lw, all, n_all);
    if (n_raw) {
        lw->m->raw = make_raw(lw, raw, n_raw);
        lw->m->n_raw = n_raw;
    }
}

static void on_comp_begin(void *data, const AstCompHead *h)
{
    Lower *lw = data;
    if (!lowering(lw)) return;
    ensure_module(lw, "module");
    NameEnt *e = name_find(lw->comp_names, h->name.s, h->name.n);
    if (e) {
        err(lw, &h->name_loc, "duplicate computation name '%.*s'", TOKF(h->name));
        note(lw, &e->loc, "'%.*s' is first defined here", TOKF(h->name));
    }
    int32_t ci = hlo_add_computation(lw->m, ast_tok_str(lw->tmp, h->name), false);
    if (!e) name_add(lw->keep, &lw->comp_names, h->name.s, h->name.n, ci, &h->name_loc);
    if (h->is_entry && lw->entry >= 0) {
        err(lw, &h->entry_loc, "more than one ENTRY computation");
        note(lw, &lw->entry_loc, "the first ENTRY is here");
    } else if (h->is_entry) {
        lw->entry = ci;
        lw->entry_loc = h->entry_loc;
    }
    arena_reset(lw->comp_arena);
    lw->inst_names = NULL;
    lw->pending_ops = NULL;
    lw->cur_comp = ci;
    lw->cur_comp_name = h->name;
    lw->comp_start = h->is_entry ? h->entry_loc : h->name_loc;
    lw->comp_errors = lw->n_errors;
    lw->n_insts = 0;
    lw->root = -1;
    keep_signature(lw, h);
}

static void on_inst(void *data, const AstInst *inst)
{
    Lower *lw = data;
    if (lowering(lw)) lower_inst(lw, inst);
}

static void on_comp_end(void *data, const AstLoc *close, const AstVal *attrs)
{
    Lower *lw = data;
    if (!lowering(lw)) return;
    HloComputation *c = hlo_comp(lw->m, lw->cur_comp);
    c->root = lw->root >= 0 ? lw->root : c->n_insts - 1;
    c->span = ast_loc_join(&lw->comp_start, close).span;
    report_pending_ops(lw);
    if (c->n_insts == 0)
        err(lw, &lw->comp_start, "computation '%.*s' has no instructions", TOKF(lw->cur_comp_name));
    lower_comp_attrs(lw, attrs, c);
    if (lw->has_sig && c->n_insts > 0 && lw->n_errors == lw->comp_errors) check_signature(lw);
}

static const AstSink SINK_FNS = {NULL, on_header, on_comp_begin, on_inst, on_comp_end};

/* ================================================================ module */

/* After the parse: the entry computation, computations named before (or
 * without) their definition, empty input. */
static void finish_module(Lower *lw)
{
    HloModule *m = lw->m;
    if (!m || m->n_comps == 0) {
        if (lw->has_header)
            err(lw, &lw->module_name_loc, "module '%.*s' has no computations", TOKF(lw->module_name));
        else
            diag_error(lw->diag, src_span_at(lw->cx->file_id, 1, 1),
                       "empty input: expected 'HloModule' or a computation");
        return;
    }
    m->entry = lw->entry >= 0 ? lw->entry : m->n_comps - 1;
    m->comps[m->entry].is_entry = true;
    Pending *rev = NULL;
    while (lw->pending_comps) {
        Pending *p = lw->pending_comps;
        lw->pending_comps = p->next;
        p->next = rev;
        rev = p;
    }
    for (Pending *p = rev; p; p = p->next) {
        NameEnt *e = name_find(lw->comp_names, p->name.s, p->name.n);
        if (!e) {
            err(lw, &p->loc, "unknown computation '%.*s'", TOKF(p->name));
            continue;
        }
        err(lw, &p->loc, "computation '%.*s' is used before it is defined (computations must be defined before "
                         "their callers)", TOKF(p->name));
        note(lw, &e->loc, "'%.*s' is defined here", TOKF(p->name));
    }
}

static void build_tables(Lower *lw)
{
    for (int32_t op = 0; op < HLO_OPCODE_COUNT; op++) {
        const char *s = hlo_opcode_name((HloOpcode)op);
        name_add(lw->keep, &lw->opcodes, s, (uint32_t)strlen(s), op, NULL);
    }
    name_add(lw->keep, &lw->opcodes, "optimization-barrier", 20, HLO_OPTIMIZATION_BARRIER, NULL);
    for (int32_t k = 0; k < N_ATTR_SPECS; k++)
        name_add(lw->keep, &lw->attr_specs, ATTR_SPECS[k].name, (uint32_t)strlen(ATTR_SPECS[k].name), k, NULL);
}

/* ================================================================ entry point */

static bool reject_nul(const char *text, size_t len, uint32_t file_id, DiagEngine *diag)
{
    const char *nul = memchr(text, 0, len);
    if (!nul) return true;
    uint32_t line = 1, col = 1;
    for (const char *p = text; p < nul; p++) {
        if (*p == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    diag_error(diag, src_span_at(file_id, line, col), "NUL byte in the input (HLO text must not contain NUL)");
    return false;
}

/* Runs scanner + parser; the sink lowers as the parser goes. */
static void run_parser(ParseCtx *cx, Lower *lw)
{
    ScanState st;
    memset(&st, 0, sizeof st);
    st.cx = cx;
    st.line = st.col = 1;
    cx->scan = &st;
    yyscan_t scanner;
    if (hlo_yylex_init_extra(&st, &scanner) != 0) spmdc_oom();
    hlo_yy_scan_bytes(cx->text, (int)cx->len, scanner);
    int rc = hlo_yyparse(scanner, cx);
    hlo_yylex_destroy(scanner);
    cx->scan = NULL;
    if (rc != 0 && diag_error_count(cx->diag) == lw->base_errors)
        diag_error(cx->diag, src_span_at(cx->file_id, st.line, st.col), "could not parse the input");
}

HloModule *parse_hlo(const char *text, size_t len, uint32_t file_id, DiagEngine *diag)
{
    int base = diag_error_count(diag);
    if (len > (size_t)INT_MAX - 2) {
        diag_error(diag, src_span_at(file_id, 0, 0), "input is too large (%zu bytes; the limit is 2 GiB)", len);
        return NULL;
    }
    if (!reject_nul(text, len, file_id, diag)) return NULL;
    ParseCtx cx = {arena_create(), arena_create(), diag, file_id, text, (uint32_t)len, NULL, NULL};
    Lower lw;
    memset(&lw, 0, sizeof lw);
    lw.cx = &cx;
    lw.diag = diag;
    lw.base_errors = base;
    lw.tmp = cx.arena;
    lw.keep = cx.keep;
    lw.comp_arena = arena_create();
    lw.entry = -1;
    AstSink sink = SINK_FNS;
    sink.data = &lw;
    cx.sink = &sink;
    build_tables(&lw);
    run_parser(&cx, &lw);
    if (lowering(&lw)) finish_module(&lw);
    arena_destroy(lw.comp_arena);
    arena_destroy(cx.keep);
    arena_destroy(cx.arena);
    if (diag_error_count(diag) != base) {
        hlo_module_free(lw.m);
        return NULL;
    }
    return lw.m;
}
