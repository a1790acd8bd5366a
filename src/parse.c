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
 *  - shapes are lowered here; constants (Literal), typed attributes (HloAttrs)
 *    and verbatim ones (RawAttr) in parse_attrs.c; `sharding=` (ShardingSyntax,
 *    syntax only: bind.c binds the mesh) in parse_sharding.c.  The three share
 *    the lowering state Lower of parse_internal.h.
 * Every user error goes through diag_error at the offending token; lowering
 * keeps going to report several, and parse_hlo returns NULL if any was
 * reported.  Everything is linear in the input size.
 */
#include "spmdc/parse.h"

#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>

#include "parse_internal.h"
#include "hlo.tab.h"
#define YYSTYPE HLO_YYSTYPE
#define YYLTYPE AstLoc
#include "hlo.lex.h"

/* ================================================================ diagnostics */

bool parse_err(Lower *lw, const AstLoc *loc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    diag_report(lw->diag, DIAG_ERROR, ast_span(lw->cx, loc), fmt, ap);
    va_end(ap);
    lw->n_errors++;
    return false;
}

void parse_note(Lower *lw, const AstLoc *loc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    diag_report(lw->diag, DIAG_NOTE, ast_span(lw->cx, loc), fmt, ap);
    va_end(ap);
}

const char *parse_shape_str(Lower *lw, const Shape *s)
{
    StrBuf b = {0};
    shape_print(&b, s, false);
    char *r = arena_strdup(lw->tmp, sb_cstr(&b));
    sb_free(&b);
    return r;
}

/* ================================================================ value helpers */

/* The attribute's value, which must be one prim. */
const AstVal *parse_attr_value(Lower *lw, const AstVal *attr)
{
    const AstVal *v = attr->child;
    if (v && v->next) {
        parse_err(lw, &v->next->loc, "unexpected %s after the value of attribute '%.*s'", describe(lw, v->next),
                  TOKF(attr->t));
        return NULL;
    }
    return v;
}

bool parse_want(Lower *lw, const AstVal *attr, const AstVal *v, const char *what)
{
    return parse_err(lw, v ? &v->loc : &attr->loc, "attribute '%.*s' expects %s, found %s", TOKF(attr->t), what,
                     describe(lw, v));
}

bool parse_int_of(Lower *lw, const AstVal *v, const char *ctx, int64_t *out)
{
    *out = 0;
    if (!v || v->kind != AV_INT || v->flags)
        return parse_err(lw, v ? &v->loc : NULL, "%s: expected an integer, found %s", ctx, describe(lw, v));
    if (v->t.is_u64) return parse_err(lw, &v->loc, "%s: integer %.*s is too large", ctx, TOKF(v->t));
    *out = v->t.i;
    return true;
}

/* ================================================================ shapes */

static bool lower_array_shape(Lower *lw, const AstShape *as, Shape *out)
{
    if (as->pre) { /* a SHAPE token: checked and lowered by the scanner */
        *out = *as->pre;
        return true;
    }
    memset(out, 0, sizeof *out);
    out->type = (ElemType)as->type.i; /* the scanner looked it up */
    bool ok = true;
    int32_t rank = 0;
    for (const AstVal *d = as->dims; d; d = d->next, rank++) {
        if (rank == SPMDC_MAX_RANK)
            return parse_err(lw, &d->loc, "shape has more than %d dimensions (spmdc's limit)", SPMDC_MAX_RANK);
        if (d->flags & AVF_UNBOUNDED)
            ok = parse_err(lw, &d->loc, "dynamic dimension '?' is not supported: spmdc needs static shapes");
        else if (d->flags & AVF_BOUNDED)
            ok = parse_err(lw, &d->loc,
                           "bounded dynamic dimension '<=%.*s' is not supported: spmdc needs static shapes",
                           TOKF(d->t));
        else if (d->t.i < 0 || d->t.is_u64)
            ok = parse_err(lw, &d->loc, "dimension size %.*s is negative or too large", TOKF(d->t));
        else
            out->dims[rank] = d->t.i;
    }
    out->rank = rank;
    if (!as->layout || !ok) return ok;
    const AstLayout *l = as->layout;
    out->has_layout = true;
    int32_t n = ast_count(l->ints);
    if (n != rank && (n != 0 || !l->has_tail || rank != 0))
        return parse_err(lw, &l->loc, "layout lists %d dimension%s but the shape has rank %d", n, n == 1 ? "" : "s",
                         rank);
    uint32_t seen = 0;
    int32_t k = 0;
    for (const AstVal *d = l->ints; d; d = d->next, k++) {
        if (d->t.i < 0 || d->t.i >= rank || (seen >> d->t.i & 1))
            return parse_err(lw, &d->loc, "layout {...} must be a permutation of 0..%d, found %.*s", rank - 1,
                             TOKF(d->t));
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
    if (v->kind != AV_PAREN) return parse_err(lw, &v->loc, "expected a shape, found %s", describe(lw, v));
    memset(out, 0, sizeof *out);
    out->type = ET_TUPLE;
    out->n_elems = ast_count(v->child);
    out->elems = out->n_elems ? ARENA_ARRAY(lw->tmp, Shape, out->n_elems) : NULL;
    int32_t k = 0;
    for (const AstVal *e = v->child; e; e = e->next, k++) {
        const AstVal *x = elem_single(e);
        if (!x) return parse_err(lw, &e->loc, "expected a shape, found %s", describe(lw, e));
        if (!shape_of_val(lw, x, &out->elems[k])) return false;
    }
    return true;
}

/* ================================================================ instructions */

static const HloAttrs ATTRS_DEFAULT = {.to_apply = -1, .select = -1, .condition = -1, .body = -1, .k = -1,
                                      .largest = true};


/* The entry of a name token (its hash in name.i), or NULL. */
static const InstName *inst_name_find(const Lower *lw, AstTok name)
{
    const InstNames *t = &lw->inst_names;
    if (!t->cap) return NULL;
    const char *s = name.s;
    uint32_t n = name.n, h = (uint32_t)name.i, mask = t->cap - 1;
    for (uint32_t i = h & mask;; i = (i + 1) & mask) {
        uint64_t v = t->slot[i];
        if (!v) return NULL;
        if ((uint32_t)(v >> 32) != h) continue;
        const InstName *e = &t->ents[(uint32_t)v - 1];
        if (e->len != n) continue;
        if (n <= INST_NAME_INLINE ? memcmp(e->inl, s, n) == 0 : memcmp(lw->cx->text + e->off + e->width - n, s, n) == 0)
            return e;
    }
}

/* Prefetches the entry of a name token's first slot (its hash in name.i)
 * when the slot's hash matches: an instruction's operands have their
 * entries' misses overlap instead of waiting for each in turn. */
static inline void inst_name_prefetch(const Lower *lw, AstTok name)
{
    const InstNames *t = &lw->inst_names;
    if (!t->cap) return;
    uint32_t h = (uint32_t)name.i;
    uint64_t v = t->slot[h & (t->cap - 1)];
    if (v && (uint32_t)(v >> 32) == h) __builtin_prefetch(&t->ents[(uint32_t)v - 1]);
}

static void inst_name_slot(InstNames *t, uint32_t h, uint32_t ent)
{
    uint32_t mask = t->cap - 1, i = h & mask;
    while (t->slot[i]) i = (i + 1) & mask;
    t->slot[i] = (uint64_t)h << 32 | (ent + 1);
}

/* Makes room in the instruction-name table for n names in all: entries
 * grown to n, slots to the smallest power of two >= 2n (kept at most half
 * full), rehashed in place.  on_comp_begin reserves a computation's names
 * from its line count (comp_size_hint), so a large computation's table is
 * sized once instead of rehashed ~log2(n) times (each rehash a pass of
 * random writes over a table larger than the cache at 1M names). */
static void inst_names_reserve(Lower *lw, uint32_t n)
{
    InstNames *t = &lw->inst_names;
    Arena *a = lw->comp_arena;
    if (n > t->cap_ents) {
        uint32_t cap = t->cap_ents ? t->cap_ents : 64;
        while (cap < n) cap *= 2;
        t->ents = arena_realloc(a, t->ents, sizeof(InstName) * t->cap_ents, sizeof(InstName) * cap, _Alignof(InstName));
        arena_advise_random(a, t->ents, sizeof(InstName) * cap);
        t->cap_ents = cap;
    }
    if (2 * (uint64_t)n > t->cap) { /* rehash into more slots (grown in place) */
        uint32_t cap = t->cap ? t->cap : 128;
        while (cap < 2 * (uint64_t)n) cap *= 2;
        t->slot = arena_realloc(a, t->slot, sizeof(uint64_t) * t->cap, sizeof(uint64_t) * cap, _Alignof(uint64_t));
        arena_advise_random(a, t->slot, sizeof(uint64_t) * cap);
        memset(t->slot, 0, sizeof(uint64_t) * cap);
        t->cap = cap;
        lw->cx->name_slot = t->slot;
        lw->cx->name_mask = cap - 1;
        for (uint32_t k = 0; k < t->n; k++) inst_name_slot(t, t->ents[k].hash, k);
    }
}

/* Adds a name that is not present: name is the token (its hash in name.i), loc the
 * token's location. */
static void inst_name_add(Lower *lw, AstTok name, int32_t idx, const AstLoc *loc)
{
    InstNames *t = &lw->inst_names;
    if (t->n == t->cap_ents || 2 * (t->n + 1) > t->cap) /* full: double */
        inst_names_reserve(lw, t->n ? 2 * t->n : 64);
    uint32_t h = (uint32_t)name.i;
    InstName *e = &t->ents[t->n];
    *e = (InstName){loc->off, loc->end - loc->off, name.n, h, idx, {0}};
    if (name.n <= INST_NAME_INLINE) memcpy(e->inl, name.s, name.n);
    inst_name_slot(t, h, t->n);
    t->n++;
}

/* The location of a name's definition. */
static AstLoc inst_name_loc(const InstName *e)
{
    AstLoc l;
    l.off = e->off;
    l.end = e->off + e->width;
    return l;
}

/* An operand element `name` or `shape name`: the value in the name's
 * place (of any kind, or NULL) and in *ty the shape before it (or NULL). */
static const AstVal *operand_parts(const AstVal *e, const AstVal **ty)
{
    const AstVal *p = e->child;
    *ty = NULL;
    if (p && (p->kind == AV_SHAPE || p->kind == AV_PAREN) && p->next) {
        *ty = p;
        return p->next;
    }
    return p;
}

/* Resolves a `name` / `shape name` operand to an earlier instruction.  An
 * unknown name is remembered and reported at the end of the computation. */
static bool lower_operand(Lower *lw, int32_t ci, const AstVal *e, int32_t *out)
{
    const AstVal *ty, *nm = operand_parts(e, &ty);
    if (!nm || (nm->kind != AV_NAME && nm->kind != AV_WORD) || nm->next) {
        if (nm && nm->kind == AV_WORD && is_group(nm->next, AV_PAREN))
            return parse_err(lw, &e->loc, "nested instructions are not supported as operands: give '%.*s(...)' its own "
                                          "instruction", TOKF(nm->t));
        return parse_err(lw, &e->loc, "expected an operand (an instruction name, optionally after its shape), found %s",
                         describe(lw, e));
    }
    const InstName *d = inst_name_find(lw, nm->t);
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
    const Shape *def = hlo_inst(lw->m, ci, d->idx)->shape;
    if (!shape_equal(&decl, def)) {
        parse_err(lw, &ty->loc, "operand '%.*s' is written with shape %s but is defined as %s", TOKF(nm->t),
                  parse_shape_str(lw, &decl), parse_shape_str(lw, def));
        AstLoc dl = inst_name_loc(d);
        parse_note(lw, &dl, "'%.*s' is defined here", TOKF(nm->t));
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
            return parse_err(lw, &grp->loc, "parameter expects its number, like parameter(0)");
        out->param_number = (int32_t)v->t.i;
        return true;
    }
    if (!have_shape)
        return parse_err(lw, &ai->opcode_loc, "constant needs a result shape, like f32[2] constant({1, 2})");
    if (!v) return parse_err(lw, &grp->loc, "constant expects one literal, like constant({1, 2})");
    Literal *lit = ARENA_NEW(lw->m->arena, Literal);
    if (!parse_lower_literal(lw, shape, v, lit)) return false;
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
        for (int32_t k = 0; k < n; k++) out->elems[k] = *c->insts[ops[k]].shape;
        return true;
    }
    if (op == HLO_GET_TUPLE_ELEMENT && n == 1) {
        const Shape *t = c->insts[ops[0]].shape;
        if (t->type != ET_TUPLE || a->index < 0 || a->index >= t->n_elems)
            return parse_err(lw, &ai->opcode_loc, "get-tuple-element index=%lld is out of range for %s",
                             (long long)a->index, parse_shape_str(lw, t));
        *out = t->elems[a->index];
        return true;
    }
    if (op == HLO_WHILE && n == 1) { /* the loop state, the operand */
        *out = *c->insts[ops[0]].shape;
        return true;
    }
    if (op == HLO_CALL && a->to_apply >= 0 && a->to_apply < lw->m->n_comps) { /* the callee's result */
        const HloComputation *callee = hlo_comp(lw->m, a->to_apply);
        if (callee->root >= 0) {
            *out = *callee->insts[callee->root].shape;
            return true;
        }
    }
    bool ew = (cat == 'U' || cat == 'B' || cat == 'T') && op != HLO_CONVERT && op != HLO_BITCAST_CONVERT &&
              op != HLO_COMPLEX && op != HLO_REAL && op != HLO_IMAG;
    if (ew && n >= 1) {
        *out = *c->insts[ops[(cat == 'T' && n >= 2) ? 1 : 0]].shape;
        if (op == HLO_COMPARE && out->type != ET_TUPLE) out->type = ET_PRED;
        out->has_layout = false;
        out->layout_tail = NULL;
        return true;
    }
    return parse_err(lw, &ai->opcode_loc, "'%s' needs a result shape (only elementwise ops, tuple, "
                                          "get-tuple-element, while and call may omit it)",
                     hlo_opcode_name(op));
}

/* Name bookkeeping for instruction idx: duplicates and ROOT. */
static void name_inst(Lower *lw, const AstInst *ai, int32_t idx)
{
    const InstName *e = inst_name_find(lw, ai->name);
    if (e) {
        parse_err(lw, &ai->name_loc, "duplicate instruction name '%.*s' in computation '%.*s'", TOKF(ai->name),
                  TOKF(lw->cur_comp_name));
        AstLoc el = inst_name_loc(e);
        parse_note(lw, &el, "'%.*s' is first defined here", TOKF(ai->name));
    } else {
        inst_name_add(lw, ai->name, idx, &ai->name_loc);
    }
    if (ai->is_root && lw->root >= 0) {
        parse_err(lw, &ai->root_loc, "computation '%.*s' has more than one ROOT", TOKF(lw->cur_comp_name));
        parse_note(lw, &lw->root_loc, "the first ROOT is here");
    } else if (ai->is_root) {
        lw->root = idx;
        lw->root_loc = ai->root_loc;
    }
}

/* ---------------------------------------------------------------- attribute memo */

/* control-predecessors={%a, ...} names instructions defined earlier in the
 * computation, as XLA's parser checks ("instruction 'a' is not defined"):
 * an error for any other name (the attribute is kept verbatim). */
static void check_control_predecessors(Lower *lw, const AstInst *ai)
{
    for (const AstVal *at = ai->attrs; at; at = at->next) {
        if (!ast_tok_eq(at->t, "control-predecessors")) continue;
        const AstVal *v = at->child;
        if (!v || v->next || v->kind != AV_BRACE) {
            parse_want(lw, at, v, "a list of instruction names {%a, ...}");
            continue;
        }
        for (const AstVal *e = v->child; e; e = e->next) {
            const AstVal *x = elem_single(e);
            if (!x || x->kind != AV_NAME)
                parse_err(lw, &e->loc, "control-predecessors lists instruction names (%%a), found %s", describe(lw, e));
            else if (!inst_name_find(lw, x->t))
                parse_err(lw, &x->loc, "control predecessor '%.*s' is not an instruction defined before '%.*s' in "
                          "computation '%.*s'", TOKF(x->t), TOKF(ai->name), TOKF(lw->cur_comp_name));
        }
    }
}

/* The text an instruction's attribute set is memoised by: from its first
 * attribute to the end of its last one, leaving out a `sharding=` given
 * last (it is lowered for each instruction: its spans are the
 * instruction's own).  False when there is no such text, or `sharding=`
 * is given elsewhere (a duplicate is an error to report). */
static bool attrs_memo_key(const Lower *lw, const AstInst *ai, AstLoc *key, const AstVal **sharding)
{
    *sharding = NULL;
    const AstVal *last_kept = NULL;
    for (const AstVal *at = ai->attrs; at; at = at->next) {
        if (ast_tok_eq(at->t, "sharding")) {
            if (at->next || *sharding) return false;
            *sharding = at;
        } else {
            last_kept = at;
        }
    }
    if (!last_kept) return false;
    key->off = ai->attrs->loc.off;
    key->end = last_kept->loc.end;
    (void)lw;
    return key->end > key->off;
}

static uint32_t attrs_memo_hash(const Lower *lw, const AstLoc *key, HloOpcode op)
{
    uint64_t h64 = hlo_hash_bytes((uint64_t)op, lw->cx->text + key->off, key->end - key->off);
    uint32_t h = (uint32_t)(h64 ^ h64 >> 32);
    return h ? h : 1;
}

static AttrsMemo *attrs_memo_find(Lower *lw, const AstLoc *key, HloOpcode op, uint32_t h)
{
    if (!lw->cap_memo) return NULL;
    uint32_t len = key->end - key->off, mask = lw->cap_memo - 1;
    for (uint32_t i = h & mask; lw->memo[i].hash; i = (i + 1) & mask) {
        AttrsMemo *e = &lw->memo[i];
        if (e->hash == h && e->op == (int32_t)op && e->len == len &&
            memcmp(lw->cx->text + e->off, lw->cx->text + key->off, len) == 0)
            return e;
    }
    return NULL;
}

static void attrs_memo_add(Lower *lw, const AstLoc *key, HloOpcode op, uint32_t h, const HloAttrs *attrs)
{
    if (2 * (lw->n_memo + 1) > lw->cap_memo) { /* rehash into twice the slots */
        uint32_t cap = lw->cap_memo ? lw->cap_memo * 2 : 256;
        AttrsMemo *old = lw->memo, *tab = ARENA_ARRAY(lw->keep, AttrsMemo, cap);
        for (uint32_t k = 0; k < lw->cap_memo; k++) {
            if (!old[k].hash) continue;
            uint32_t i = old[k].hash & (cap - 1);
            while (tab[i].hash) i = (i + 1) & (cap - 1);
            tab[i] = old[k];
        }
        lw->memo = tab;
        lw->cap_memo = cap;
    }
    uint32_t i = h & (lw->cap_memo - 1);
    while (lw->memo[i].hash) i = (i + 1) & (lw->cap_memo - 1);
    lw->memo[i] = (AttrsMemo){key->off, key->end - key->off, h, (int32_t)op, attrs};
    lw->n_memo++;
}

/* One instruction.  It is always appended (with a placeholder opcode or
 * shape after an error) so instruction indices match the text. */
/* Opcodes of XLA's HLO that spmdc does not take (docs/input.md); the first
 * line's are made by XLA's optimizer, so only an already compiled module
 * holds them. */
static const char XLA_COMPILED_OPCODES[] =
    " fusion copy-start copy-done all-gather-start all-gather-done all-reduce-start all-reduce-done "
    "collective-permute-start collective-permute-done async-start async-update async-done add-dependency ";
static const char XLA_OTHER_OPCODES[] =
    " fft cholesky triangular-solve batch-norm-training batch-norm-inference batch-norm-grad "
    "stochastic-convert collective-broadcast ragged-all-to-all domain dynamic-reshape get-dimension-size "
    "set-dimension-size rng-get-and-update-state ";

/* Whether the space-separated list holds the word t. */
static bool in_word_list(const char *list, AstTok t)
{
    for (const char *p = strstr(list, " "); p && p[1]; p = strchr(p + 1, ' '))
        if (strncmp(p + 1, t.s, t.n) == 0 && p[1 + t.n] == ' ') return true;
    return false;
}

/* The error for an opcode spmdc does not know: one of XLA's it does not
 * take is named so, with a note when only XLA's optimizer makes it.  False. */
static bool unknown_opcode(Lower *lw, const AstInst *ai)
{
    AstTok t = ai->opcode;
    if (in_word_list(XLA_COMPILED_OPCODES, t)) {
        parse_err(lw, &ai->opcode_loc, "opcode '%.*s' is not supported by spmdc", TOKF(t));
        parse_note(lw, &ai->opcode_loc, "'%.*s' is made by XLA's optimizer: this module was compiled already; give "
                   "spmdc the module JAX lowers, before compilation (lowered.as_text(dialect=\"hlo\"))", TOKF(t));
        return false;
    }
    if (in_word_list(XLA_OTHER_OPCODES, t))
        return parse_err(lw, &ai->opcode_loc, "opcode '%.*s' is not supported by spmdc (docs/input.md)", TOKF(t));
    return parse_err(lw, &ai->opcode_loc, "unknown opcode '%.*s'", TOKF(t));
}

/* Parameter instruction in has a number the signature declares, with
 * another shape (check_signature warns about it). */
static bool sig_differs(const Lower *lw, const HloInst *in)
{
    int64_t k = in->param_number;
    return k >= 0 && k < lw->n_params && lw->param_shape[k] >= 0 &&
           !shape_equal(&lw->sig_shapes[lw->param_shape[k]], in->shape);
}

/* The module's record of shape, which is *pre when pre (a shape the
 * scanner lowered, Lower.shape_recs) is not NULL. */
static const Shape *shape_record(Lower *lw, const Shape *pre, const Shape *shape)
{
    if (!pre) return hlo_shape(lw->m, shape);
    uint32_t slot = (uint32_t)((uintptr_t)pre >> 4) * 0x9E3779B1u >> 26; /* 6 bits */
    if (lw->shape_recs[slot].pre != pre) {
        lw->shape_recs[slot].pre = pre;
        lw->shape_recs[slot].rec = hlo_shape(lw->m, shape);
    }
    return lw->shape_recs[slot].rec;
}

static void lower_inst(Lower *lw, const AstInst *ai)
{
    int32_t ci = lw->cur_comp, idx = lw->n_insts++;
    int32_t opi = kw_find_tok(&lw->opcodes, ai->opcode);
    bool oe = opi >= 0;
    HloOpcode op = oe ? (HloOpcode)opi : HLO_OPCODE_COUNT;
    bool ok = true, have_shape = ai->shape != NULL;
    if (!oe) ok = unknown_opcode(lw, ai);
    Shape shape;
    memset(&shape, 0, sizeof shape);
    shape.type = ET_F32;
    if (have_shape && !lower_shape(lw, ai->shape, &shape)) ok = have_shape = false;
    InstOut out = {ATTRS_DEFAULT, false, NULL, 0};
    int32_t n = 0, *ops = NULL;
    lw->move.shared = NULL;
    if (oe && (op == HLO_PARAMETER || op == HLO_CONSTANT)) {
        if (!ai->shape || have_shape) ok = lower_leaf_operand(lw, ai, op, &shape, have_shape, &out) && ok;
    } else {
        int32_t n_elems = ast_count(ai->operands->child);
        ops = ARENA_ARRAY(lw->tmp, int32_t, n_elems ? n_elems : 1);
        for (const AstVal *e = ai->operands->child; n_elems > 1 && e; e = e->next) {
            const AstVal *ty, *nm = operand_parts(e, &ty);
            if (nm && (nm->kind == AV_NAME || nm->kind == AV_WORD)) inst_name_prefetch(lw, nm->t);
        }
        for (const AstVal *e = ai->operands->child; e; e = e->next) {
            if (lower_operand(lw, ci, e, &ops[n])) n++;
            else ok = false;
        }
    }
    /* The attribute set: from the memo when this opcode had the same
     * attribute text before (constants hold their literal there: never). */
    AstLoc key;
    const AstVal *sharding = NULL;
    bool memo = oe && op != HLO_CONSTANT && attrs_memo_key(lw, ai, &key, &sharding);
    uint32_t mh = memo ? attrs_memo_hash(lw, &key, op) : 0;
    const AttrsMemo *hit = memo ? attrs_memo_find(lw, &key, op, mh) : NULL;
    const HloAttrs *attrs = &out.attrs;
    if (hit) {
        if (hit->attrs) attrs = hit->attrs;
        if (sharding) {
            const AstVal *v = parse_attr_value(lw, sharding);
            out.sharding = v ? parse_lower_sharding(lw, sharding, v) : NULL;
            ok = out.sharding && ok;
        }
    } else {
        int errors = lw->n_errors;
        const Pending *pending = lw->pending_comps;
        ok = parse_lower_attrs(lw, ai, op, &out) && ok;
        /* Only a set lowered without a word (and no name left to resolve
         * later) is kept, and none holding a window, convolution dims or
         * literal: hlo_set_attrs shares those by address only, so each
         * instruction keeps its own (passes rewrite them per instruction). */
        memo = memo && lw->n_errors == errors && lw->pending_comps == pending && (!sharding || out.sharding) &&
               !out.attrs.window && !out.attrs.conv && !out.attrs.literal;
    }
    if (oe && ok && !ai->shape) infer_shape(lw, ci, ai, op, ops, n, attrs, &shape);
    check_control_predecessors(lw, ai);
    name_inst(lw, ai, idx);
    const Shape *rec = shape_record(lw, have_shape && !ai->shape->is_tuple ? ai->shape->pre : NULL, &shape);
    int32_t got = hlo_add_inst_rec(lw->m, ci, oe ? op : HLO_PARAMETER, ai->name.s ? ai->name.s : "", ai->name.n, rec,
                                   ops, n);
    SPMDC_ASSERT(got == idx);
    HloInst *in = hlo_inst(lw->m, ci, got);
    in->span = ast_span(lw->cx, &ai->loc);
    in->sharding_src = out.sharding;
    if (lw->move.shared && lw->move.shared == out.sharding)
        hlo_note_syntax_move(lw->m, ci, got, out.sharding, lw->move.line, lw->move.dcol);
    in->param_number = out.param_number;
    if (hit) {
        if (hit->attrs) {
            in->attrs = (HloAttrs *)hit->attrs;
            in->attrs_shared = true;
        }
    } else {
        if (out.any_attr) hlo_set_attrs(lw->m, in, &out.attrs);
        if (memo) attrs_memo_add(lw, &key, op, mh, out.any_attr ? in->attrs : NULL);
    }
    /* decided here, where its record is still in the cache: only a
     * parameter the signature declares otherwise waits for the computation's
     * end (check_signature) */
    if (lw->has_sig && in->op == HLO_PARAMETER && sig_differs(lw, in)) {
        if (lw->n_sig_params == lw->cap_sig_params) {
            int32_t cap = lw->cap_sig_params ? lw->cap_sig_params * 2 : 16;
            lw->sig_params = arena_realloc(lw->comp_arena, lw->sig_params, sizeof(int32_t) * (size_t)lw->cap_sig_params,
                                           sizeof(int32_t) * (size_t)cap, _Alignof(int32_t));
            lw->cap_sig_params = cap;
        }
        lw->sig_params[lw->n_sig_params++] = idx;
    }
}

/* ================================================================ computations */

/* A hash of a Shape's bytes, a word at a time. */
static uint32_t shape_bytes_hash(const Shape *s)
{
    uint64_t w[sizeof(Shape) / 8], h = 1469598103934665603ull;
    memcpy(w, s, sizeof w);
    for (size_t i = 0; i < sizeof w / 8; i++) h = (h ^ w[i]) * 1099511628211ull;
    return (uint32_t)(h ^ h >> 32);
}

/* The index in lw->sig_shapes of a lowered signature shape: an array shape
 * without a layout tail that is already there is shared (lower_array_shape
 * clears the whole Shape first, so equal shapes are equal bytes). */
static int32_t sig_shape_id(Lower *lw, const Shape *s)
{
    bool share = s->type != ET_TUPLE && !s->layout_tail;
    uint32_t h = share ? shape_bytes_hash(s) : 0;
    if (share && lw->cap_sig_slot) {
        for (uint32_t i = h & (lw->cap_sig_slot - 1);; i = (i + 1) & (lw->cap_sig_slot - 1)) {
            int32_t e = lw->sig_slot[i] - 1;
            if (e < 0) break;
            if (memcmp(&lw->sig_shapes[e], s, sizeof *s) == 0) return e;
        }
    }
    if (lw->n_sig_shapes == lw->cap_sig_shapes) {
        int32_t cap = lw->cap_sig_shapes ? lw->cap_sig_shapes * 2 : 16;
        lw->sig_shapes = arena_realloc(lw->comp_arena, lw->sig_shapes, sizeof(Shape) * (size_t)lw->cap_sig_shapes,
                                       sizeof(Shape) * (size_t)cap, _Alignof(Shape));
        lw->cap_sig_shapes = cap;
    }
    int32_t id = lw->n_sig_shapes++;
    memcpy(&lw->sig_shapes[id], s, sizeof *s); /* with its (cleared) padding */
    if (!share) return id;
    if (2 * (uint32_t)lw->n_sig_shapes > lw->cap_sig_slot) { /* rehash the shared ones into twice the slots */
        uint32_t cap = lw->cap_sig_slot ? lw->cap_sig_slot * 2 : 64;
        lw->sig_slot = ARENA_ARRAY(lw->comp_arena, int32_t, cap);
        lw->cap_sig_slot = cap;
        for (int32_t k = 0; k <= id; k++) {
            const Shape *x = &lw->sig_shapes[k];
            if (x->type == ET_TUPLE || x->layout_tail) continue;
            uint32_t i = shape_bytes_hash(x) & (cap - 1);
            while (lw->sig_slot[i]) i = (i + 1) & (cap - 1);
            lw->sig_slot[i] = k + 1;
        }
        return id;
    }
    uint32_t i = h & (lw->cap_sig_slot - 1);
    while (lw->sig_slot[i]) i = (i + 1) & (lw->cap_sig_slot - 1);
    lw->sig_slot[i] = id + 1;
    return id;
}

/* Lowers the signature now (its AST is freed after the hand-over). */
static void keep_signature(Lower *lw, const AstCompHead *h)
{
    lw->has_sig = h->has_sig;
    lw->n_params = 0;
    lw->sig_shapes = NULL;
    lw->n_sig_shapes = lw->cap_sig_shapes = 0;
    lw->sig_slot = NULL;
    lw->cap_sig_slot = 0;
    lw->sig_params = NULL;
    lw->n_sig_params = lw->cap_sig_params = 0;
    if (!h->has_sig) return;
    if (h->sig) {
        lw->n_params = (int32_t)h->sig->n;
    } else {
        for (const AstParam *p = h->params; p; p = p->next) lw->n_params++;
    }
    int32_t n = lw->n_params ? lw->n_params : 1;
    lw->param_shape = ARENA_ARRAY(lw->comp_arena, int32_t, n);
    lw->param_locs = ARENA_ARRAY(lw->comp_arena, AstLoc, n);
    Arena *saved = lw->tmp;
    lw->tmp = lw->comp_arena; /* tuple elements must outlive this call */
    int32_t k = 0;
    if (h->sig) { /* a SIGNATURE token: array shapes the scanner lowered, the label's loc with its ':' */
        for (; k < lw->n_params; k++) {
            const AstSigParam *p = &h->sig->p[k];
            lw->param_shape[k] = sig_shape_id(lw, p->shape);
            lw->param_locs[k] = (AstLoc){h->sig_off + p->label_off, h->sig_off + p->label_off + p->label_len + 1};
        }
    }
    for (const AstParam *p = h->params; p; p = p->next, k++) {
        Shape s;
        lw->param_shape[k] = lower_shape(lw, p->shape, &s) ? sig_shape_id(lw, &s) : -1;
        lw->param_locs[k] = p->loc;
    }
    lw->result_ok = lower_shape(lw, h->result, &lw->result);
    lw->result_loc = h->result->loc;
    lw->tmp = saved;
}

/* The signature `(p: f32[4]) -> f32[]`: the result must agree with the
 * root (an error, as in XLA's parser); a parameter that disagrees with its
 * parameter instruction is a warning, and the instruction's shape is used
 * (XLA's parser reads only the result of the signature; XLA's own
 * partitioner tests write `(arg_tuple.1: ())` over a bf16 parameter). */
static void check_signature(Lower *lw)
{
    const HloComputation *c = hlo_comp(lw->m, lw->cur_comp);
    for (int32_t j = 0; j < lw->n_sig_params; j++) {
        const HloInst *in = &c->insts[lw->sig_params[j]];
        int64_t k = in->param_number;
        const Shape *decl = &lw->sig_shapes[lw->param_shape[k]];
        diag_warning(lw->diag, ast_span(lw->cx, &lw->param_locs[k]),
                     "the signature declares parameter %lld as %s but '%s' is %s; '%s' keeps its own shape (XLA's "
                     "parser ignores the parameter list too)",
                     (long long)k, parse_shape_str(lw, decl), in->name, parse_shape_str(lw, in->shape), in->name);
    }
    const HloInst *root = &c->insts[c->root];
    if (lw->result_ok && !shape_equal(&lw->result, root->shape))
        parse_err(lw, &lw->result_loc, "the signature declares the result as %s but the root '%s' is %s",
                  parse_shape_str(lw, &lw->result), root->name, parse_shape_str(lw, root->shape));
}

static void lower_comp_attrs(Lower *lw, const AstVal *attrs, HloComputation *c)
{
    for (const AstVal *at = attrs; at; at = at->next) {
        const AstVal *v = parse_attr_value(lw, at);
        if (!ast_tok_eq(at->t, "execution_thread"))
            parse_err(lw, &at->loc, "unknown computation attribute '%.*s' (only execution_thread= is allowed here)",
                      TOKF(at->t));
        else if (c->execution_thread)
            parse_err(lw, &at->loc, "attribute 'execution_thread' is given twice");
        else if (!v || v->kind != AV_STRING)
            parse_want(lw, at, v, "a string");
        else
            c->execution_thread = ast_tok_str(lw->m->arena, v->t);
    }
}

/* Takes a pending list (built newest first) and returns it in text order. */
static Pending *in_text_order(Pending **list)
{
    Pending *rev = NULL;
    while (*list) {
        Pending *p = *list;
        *list = p->next;
        p->next = rev;
        rev = p;
    }
    return rev;
}

/* Operands that named no earlier instruction: defined later, or nowhere. */
static void report_pending_ops(Lower *lw)
{
    for (Pending *p = in_text_order(&lw->pending_ops); p; p = p->next) {
        const InstName *d = inst_name_find(lw, p->name);
        if (d) {
            parse_err(lw, &p->loc, "operand '%.*s' is used before its definition", TOKF(p->name));
            AstLoc dl = inst_name_loc(d);
            parse_note(lw, &dl, "'%.*s' is defined here", TOKF(p->name));
        } else {
            parse_err(lw, &p->loc, "undefined operand '%.*s': no instruction of that name in computation '%.*s'",
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

/* Records how many parameters and results entry_computation_layout={(P,
 * ...)->R} lists (the attribute itself is kept verbatim; a tuple R lists its
 * elements, as XLA's import flattens the entry's root tuple); finish_module
 * holds the entry to them, as XLA does.  Any other spelling is left to XLA. */
static void read_entry_layout(Lower *lw, const AstVal *at)
{
    const AstVal *b = at->child;
    if (!b || b->kind != AV_BRACE || !b->child || b->child->next) return;
    const AstVal *params = b->child->child;
    if (!params || params->kind != AV_PAREN) return;
    lw->layout_params = ast_count(params->child);
    lw->layout_loc = params->loc;
    const AstVal *arrow = params->next, *res = arrow ? arrow->next : NULL;
    if (!res || res->next || arrow->kind != AV_PUNCT || arrow->punct != AP_ARROW) return;
    if (res->kind == AV_PAREN) {
        lw->layout_results = ast_count(res->child);
    } else if (res->kind == AV_SHAPE && res->shape) {
        int32_t n = 0;
        for (const AstShape *e = res->shape->elems; e; e = e->next) n++;
        lw->layout_results = res->shape->is_tuple ? n : 1;
    } else {
        return;
    }
    lw->layout_result_loc = res->loc;
}

static void on_header(void *data, AstTok name, const AstLoc *name_loc, const AstVal *attrs)
{
    Lower *lw = data;
    if (!lowering(lw)) return;
    lw->has_header = true;
    lw->module_name = name;
    lw->module_name_loc = *name_loc;
    ensure_module(lw, ast_tok_str(lw->tmp, name));
    lw->m->span = ast_span(lw->cx, name_loc);
    int32_t n_all = ast_count(attrs), n_raw = 0, k = 0;
    const AstVal **raw = n_all ? ARENA_ARRAY(lw->tmp, const AstVal *, n_all) : NULL;
    const AstVal **all = n_all ? ARENA_ARRAY(lw->tmp, const AstVal *, n_all) : NULL;
    for (const AstVal *at = attrs; at; at = at->next) {
        all[k++] = at;
        int64_t *dst = ast_tok_eq(at->t, "num_partitions") ? &lw->m->num_partitions
                       : ast_tok_eq(at->t, "replica_count") ? &lw->m->replica_count : NULL;
        if (!dst) {
            if (ast_tok_eq(at->t, "frontend_attributes")) parse_check_sdy_meshes(lw, at);
            if (ast_tok_eq(at->t, "entry_computation_layout")) read_entry_layout(lw, at);
            raw[n_raw++] = at;
            continue;
        }
        const AstVal *v = parse_attr_value(lw, at);
        if (v && (v->kind != AV_INT || v->t.is_u64 || v->t.i < 1 || v->t.i > SPMDC_MAX_DEVICES))
            parse_err(lw, &v->loc, "%.*s= expects a device count between 1 and %d, found %s", TOKF(at->t),
                      SPMDC_MAX_DEVICES, describe(lw, v));
        else if (v)
            *dst = v->t.i;
    }
    parse_check_dup_names(lw, all, n_all);
    if (n_raw) {
        lw->m->raw = parse_make_raw(lw, raw, n_raw);
        lw->m->n_raw = n_raw;
    }
}

/* An upper bound of the instructions of the computation whose head is at
 * byte off: the lines after the head's up to the next line that starts
 * with '}' (where XLA prints a computation's closing brace), or 0 when no
 * such line follows.  Its instructions array is reserved at that size up
 * front rather than grown by doubling (each doubling copies the array: a
 * 1k-instruction entry's doublings touched 2.3 times its final size).  A
 * hint, not a limit: a computation written some other way grows as before.
 * The scans of one parse cover each line at most once (computations do not
 * overlap, and once a scan meets the end of the text, later heads are not
 * scanned). */
static int32_t comp_size_hint(Lower *lw, uint32_t off)
{
    const ParseCtx *cx = lw->cx;
    const uint32_t *ls = cx->line_start;
    if (!ls) return 0;
    uint32_t lo = 0, hi = cx->n_lines; /* the head's line: the last start <= off */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (ls[mid] <= off) lo = mid; else hi = mid;
    }
    if (lo >= lw->no_close_from) return 0;
    for (uint32_t k = lo + 1; k < cx->n_lines; k++)
        if (ls[k] < cx->len && cx->text[ls[k]] == '}')
            return k - lo - 1 < INT32_MAX / 2 ? (int32_t)(k - lo - 1) : 0;
    lw->no_close_from = lo;
    return 0;
}

static void on_comp_begin(void *data, const AstCompHead *h)
{
    Lower *lw = data;
    if (!lowering(lw)) return;
    ensure_module(lw, "module");
    NameEnt *e = name_find(lw->comp_names, h->name.s, h->name.n);
    if (e) {
        parse_err(lw, &h->name_loc, "duplicate computation name '%.*s'", TOKF(h->name));
        parse_note(lw, &e->loc, "'%.*s' is first defined here", TOKF(h->name));
    }
    int32_t ci = hlo_add_computation(lw->m, ast_tok_str(lw->tmp, h->name), false);
    int32_t hint = comp_size_hint(lw, h->name_loc.off);
    hlo_reserve_insts(lw->m, ci, hint);
    if (!e) name_add(lw->keep, &lw->comp_names, h->name.s, h->name.n, ci, &h->name_loc);
    if (h->is_entry && lw->entry >= 0) {
        parse_err(lw, &h->entry_loc, "more than one ENTRY computation");
        parse_note(lw, &lw->entry_loc, "the first ENTRY is here");
    } else if (h->is_entry) {
        lw->entry = ci;
        lw->entry_loc = h->entry_loc;
    }
    arena_reset(lw->comp_arena);
    memset(&lw->inst_names, 0, sizeof lw->inst_names);
    lw->cx->name_slot = NULL;
    if (hint > 0) inst_names_reserve(lw, (uint32_t)hint);
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
    AstLoc whole = ast_loc_join(&lw->comp_start, close);
    c->span = ast_span(lw->cx, &whole);
    report_pending_ops(lw);
    if (c->n_insts == 0)
        parse_err(lw, &lw->comp_start, "computation '%.*s' has no instructions", TOKF(lw->cur_comp_name));
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
            parse_err(lw, &lw->module_name_loc, "module '%.*s' has no computations", TOKF(lw->module_name));
        else
            diag_error(lw->diag, src_span_at(lw->cx->file_id, 1, 1),
                       "empty input: expected 'HloModule' or a computation");
        return;
    }
    m->entry = lw->entry >= 0 ? lw->entry : m->n_comps - 1;
    m->comps[m->entry].is_entry = true;
    if (lw->layout_params >= 0) {
        const HloComputation *e = &m->comps[m->entry];
        int32_t n = 0;
        for (int32_t i = 0; i < e->n_insts; i++) n += e->insts[i].op == HLO_PARAMETER;
        if (n != lw->layout_params)
            parse_err(lw, &lw->layout_loc,
                      "entry_computation_layout lists %d parameter%s but the entry computation '%s' has %d",
                      lw->layout_params, lw->layout_params == 1 ? "" : "s", e->name, n);
    }
    if (lw->layout_results >= 0) {
        const HloComputation *e = &m->comps[m->entry];
        const Shape *rs = e->insts[e->root].shape;
        int32_t n = rs->type == ET_TUPLE ? rs->n_elems : 1;
        if (n != lw->layout_results)
            parse_err(lw, &lw->layout_result_loc,
                      "entry_computation_layout lists %d result%s but the root of the entry computation '%s' is %s",
                      lw->layout_results, lw->layout_results == 1 ? "" : "s", e->name, parse_shape_str(lw, rs));
    }
    for (Pending *p = in_text_order(&lw->pending_comps); p; p = p->next) {
        NameEnt *e = name_find(lw->comp_names, p->name.s, p->name.n);
        if (!e) {
            parse_err(lw, &p->loc, "unknown computation '%.*s'", TOKF(p->name));
            continue;
        }
        parse_err(lw, &p->loc, "computation '%.*s' is used before it is defined (computations must be defined before "
                               "their callers)", TOKF(p->name));
        parse_note(lw, &e->loc, "'%.*s' is defined here", TOKF(p->name));
    }
}

static void build_tables(Lower *lw)
{
    kw_init(lw->keep, &lw->opcodes, HLO_OPCODE_COUNT + 1);
    for (int32_t op = 0; op < HLO_OPCODE_COUNT; op++) {
        const char *s = hlo_opcode_name((HloOpcode)op);
        kw_add(&lw->opcodes, s, (uint32_t)strlen(s), op);
    }
    kw_add(&lw->opcodes, "optimization-barrier", 20, HLO_OPTIMIZATION_BARRIER);
    parse_attrs_init(lw);
}

/* ================================================================ entry point */

/* Refuses MLIR text (what JAX's lowered.as_text() prints by default:
 * `module @jit_f attributes {...} {`, maybe after `#loc` alias lines),
 * which the scanner would stop at with "unexpected character '@'". */
static bool reject_mlir(const char *text, size_t len, uint32_t file_id, DiagEngine *diag)
{
    size_t i = 0;
    uint32_t line = 1, col = 1;
    for (;;) { /* blanks and '#' lines (MLIR attribute aliases; never HLO) */
        while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r' || text[i] == '\n')) {
            if (text[i] == '\n') line++, col = 1;
            else col++;
            i++;
        }
        if (i < len && text[i] == '#') {
            while (i < len && text[i] != '\n') i++;
            continue;
        }
        break;
    }
    bool mlir = false;
    if (len - i > 7 && memcmp(text + i, "module", 6) == 0 && (text[i + 6] == ' ' || text[i + 6] == '\t')) {
        size_t j = i + 6;
        while (j < len && (text[j] == ' ' || text[j] == '\t')) j++;
        mlir = j < len && (text[j] == '@' || text[j] == '{' || (len - j >= 10 && memcmp(text + j, "attributes", 10) == 0));
    } else if (len - i >= 9 && memcmp(text + i, "func.func", 9) == 0) {
        mlir = true;
    }
    if (!mlir) return true;
    diag_error(diag, src_span_at(file_id, line, col),
               "this is MLIR (StableHLO) text, not HLO text: give spmdc the HLO text JAX prints with "
               "lowered.as_text(dialect=\"hlo\")");
    return false;
}

static bool reject_nul(const char *text, size_t len, const AstLines *lines, uint32_t file_id, DiagEngine *diag)
{
    if (lines->nul == len) return true;
    const char *nul = text + lines->nul;
    uint32_t line = 1, col = 1;
    for (const char *p = text; p < nul; p++) {
        if (diag_is_line_end(text, len, (size_t)(p - text))) {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    diag_error(diag, src_span_at(file_id, line, col), "NUL byte in the input (HLO text must not contain NUL)");
    return false;
}

/* The parser of grammar/hlo.y made without LAC (CMakeLists.txt); its
 * header cannot be included beside hlo.tab.h (the same token names). */
int hlo_fast_yyparse(void *scanner, ParseCtx *cx);

static size_t g_thread_min = PARSE_THREAD_MIN;

void parse_set_thread_min(size_t bytes) { g_thread_min = bytes ? bytes : PARSE_THREAD_MIN; }

static bool g_fast_first = true;
static uint64_t g_fast_kept;

void parse_set_fast_first(bool on) { g_fast_first = on; }
uint64_t parse_fast_kept(void) { return g_fast_kept; }

/* Runs scanner + parser; the sink lowers as the parser goes.  fast: the
 * parser without LAC, which reads its tokens, whole shapes among them
 * (ScanState.coarse), through a ScanFeed: from a scanner on a thread of its
 * own when the input has g_thread_min bytes or more.  That scanner reports no errors (ScanState.quiet): a failed scan
 * leaves an error in cx->diag, so that the caller runs the parse again
 * without it. */
static void run_parser(ParseCtx *cx, Lower *lw, bool fast)
{
    ScanState st;
    memset(&st, 0, sizeof st);
    st.cx = cx;
    st.coarse = fast;
    yyscan_t scanner;
    if (hlo_yylex_init_extra(&st, &scanner) != 0) spmdc_oom();
    int rc;
    if (fast) {
        bool threaded = cx->len >= g_thread_min;
        if (threaded) cx->strings = arena_create();
        ScanFeed *feed = ast_feed_start(scanner, &st, cx, threaded);
        cx->scan = st.quiet ? NULL : &st;
        rc = hlo_fast_yyparse(feed, cx);
        ast_feed_finish(feed);
        if (st.failed && diag_error_count(cx->diag) == lw->base_errors)
            diag_error(cx->diag, src_span_at(cx->file_id, 0, 0), "the scanner reported an error");
    } else {
        cx->scan = &st;
        rc = hlo_yyparse(scanner, cx);
    }
    hlo_yylex_destroy(scanner);
    intern_free(&st.texts);
    intern_free(&st.shardings);
    cx->scan = NULL;
    if (rc != 0 && diag_error_count(cx->diag) == lw->base_errors)
    {
        SrcLoc at = ast_pos(cx, st.off);
        diag_error(cx->diag, src_span_at(cx->file_id, at.line, at.col), "could not parse the input");
    }
}

/* One parse and lowering of the whole input; NULL if it reported an error. */
static HloModule *parse_once(const char *text, size_t len, const AstLines *lines, uint32_t file_id, DiagEngine *diag,
                             bool fast)
{
    int base = diag_error_count(diag);
    ParseCtx cx = {.arena = arena_create(), .keep = arena_create(), .diag = diag, .file_id = file_id, .text = text,
                   .len = (uint32_t)len};
    Lower lw;
    memset(&lw, 0, sizeof lw);
    lw.cx = &cx;
    lw.diag = diag;
    lw.base_errors = base;
    lw.tmp = cx.arena;
    lw.keep = cx.keep;
    lw.comp_arena = arena_create();
    lw.entry = -1;
    lw.no_close_from = UINT32_MAX;
    lw.layout_params = -1;
    lw.layout_results = -1;
    AstSink sink = SINK_FNS;
    sink.data = &lw;
    cx.sink = &sink;
    build_tables(&lw);
    ast_lines_init(&cx, lines);
    lw.share_shardings = fast;
    run_parser(&cx, &lw, fast);
    if (lowering(&lw)) finish_module(&lw);
    ast_pool_free(&cx);
    intern_free(&lw.shared_syntax);
    arena_destroy(lw.comp_arena);
    arena_destroy(cx.keep);
    if (cx.strings) arena_destroy(cx.strings);
    arena_destroy(cx.arena);
    if (diag_error_count(diag) != base) {
        hlo_module_free(lw.m);
        return NULL;
    }
    return lw.m;
}

/* The parser without LAC runs first, its diagnostics into a probe engine.
 * On input it takes without a word (no error, warning or note) it read the
 * input as the LAC parser would have (the shapes its scanner read whole,
 * ast_scan_shape, lower to the same Shapes), so its module is the result.
 * Otherwise its module and messages are dropped and the LAC parser runs
 * with the caller's engine: every message (the exact expected-token lists
 * of syntax errors among them) is as that parser alone gives it. */
HloModule *parse_hlo(const char *text, size_t len, uint32_t file_id, DiagEngine *diag)
{
    if (len > (size_t)INT_MAX - 2) {
        diag_error(diag, src_span_at(file_id, 0, 0), "input is too large (%zu bytes; the limit is 2 GiB)", len);
        return NULL;
    }
    AstLines lines;
    ast_lines_scan(text, (uint32_t)len, &lines);
    HloModule *m = NULL;
    bool accepted = reject_nul(text, len, &lines, file_id, diag) && reject_mlir(text, len, file_id, diag);
    if (accepted && !g_fast_first) {
        m = parse_once(text, len, &lines, file_id, diag, false);
    } else if (accepted) {
        DiagEngine *probe = diag_create(NULL);
        diag_set_show_source(probe, false);
        m = parse_once(text, len, &lines, file_id, probe, true);
        bool clean = m && diag_error_count(probe) == 0 && diag_warning_count(probe) == 0 && diag_text(probe)[0] == 0;
        diag_destroy(probe);
        if (clean) {
            g_fast_kept++;
        } else {
            hlo_module_free(m);
            m = parse_once(text, len, &lines, file_id, diag, false);
        }
    }
    ast_lines_release(&lines);
    return m;
}
