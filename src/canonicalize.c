/* canonicalize.c - inline calls, drop Shardy identities, prune dead
 * computations (see canonicalize.h).
 *
 * Input: a verified module whose shardings are bound.  Computations are
 * processed in definition order (callees first), so a callee is already
 * call-free when it is inlined.  Each rewritten computation gets a fresh
 * instruction array in program order; names stay unique (a clashing callee
 * name gets a ".N" suffix).  Invalidates any users/side tables.
 */
#include "spmdc/canonicalize.h"

#include <string.h>

#include "spmdc/names.h"

typedef struct Rewriter {
    HloModule *m;
    HloInst *out;
    int32_t n_out, cap_out;
    NameSet names;    /* every name in use in the computation being built (scratch) */
    Arena *scratch;
} Rewriter;

static int32_t emit(Rewriter *rw, const HloInst *src)
{
    if (rw->n_out == rw->cap_out) {
        int32_t cap = rw->cap_out ? rw->cap_out * 2 : 64;
        rw->out = arena_realloc(rw->m->arena, rw->out, sizeof(HloInst) * (size_t)rw->cap_out,
                                sizeof(HloInst) * (size_t)cap, _Alignof(HloInst));
        rw->cap_out = cap;
    }
    rw->out[rw->n_out] = *src;
    return rw->n_out++;
}

static int32_t *map_operands(Rewriter *rw, const HloInst *in, const int32_t *map)
{
    if (!in->n_operands) return NULL;
    int32_t *ops = ARENA_ARRAY(rw->m->arena, int32_t, in->n_operands);
    for (int32_t k = 0; k < in->n_operands; k++) ops[k] = map[in->operands[k]];
    return ops;
}

/* Appends callee's body with its parameters bound to args; returns the new
 * index of its root. */
static int32_t inline_body(Rewriter *rw, const HloComputation *callee, const int32_t *args)
{
    int32_t *map = ARENA_ARRAY(rw->scratch, int32_t, callee->n_insts ? callee->n_insts : 1);
    for (int32_t j = 0; j < callee->n_insts; j++) {
        const HloInst *in = &callee->insts[j];
        if (in->op == HLO_PARAMETER) {
            map[j] = args[hlo_attrs(in)->param_number];
            continue;
        }
        HloInst copy = *in;
        copy.name = names_unique(&rw->names, in->name, rw->m->arena);
        copy.sharding_origin = -1; /* indices change: propagation sets it again */
        copy.sharding_dim_origin = NULL;
        copy.operands = map_operands(rw, in, map);
        if (in->attrs) {
            copy.attrs = ARENA_NEW(rw->m->arena, HloAttrs);
            *copy.attrs = *in->attrs;
        }
        map[j] = emit(rw, &copy);
    }
    return map[callee->root];
}

static bool is_sdy_identity(const HloInst *in)
{
    const char *t = hlo_attrs(in)->custom_call_target;
    return in->op == HLO_CUSTOM_CALL && in->n_operands == 1 && t && strcmp(t, "xla.sdy.FuncResultSharding") == 0;
}

static bool needs_rewrite(const HloComputation *c)
{
    for (int32_t i = 0; i < c->n_insts; i++)
        if (c->insts[i].op == HLO_CALL || is_sdy_identity(&c->insts[i])) return true;
    return false;
}

static void rewrite_computation(HloModule *m, int32_t ci, Arena *scratch)
{
    HloComputation *c = &m->comps[ci];
    Rewriter rw = {.m = m, .scratch = scratch};
    names_init(&rw.names, scratch);
    for (int32_t i = 0; i < c->n_insts; i++) names_add(&rw.names, c->insts[i].name);
    int32_t *map = ARENA_ARRAY(scratch, int32_t, c->n_insts);
    for (int32_t i = 0; i < c->n_insts; i++) {
        const HloInst *in = &c->insts[i];
        HloInst copy = *in;
        copy.operands = map_operands(&rw, in, map);
        copy.sharding_origin = -1; /* indices change: propagation sets it again */
        copy.sharding_dim_origin = NULL;
        if (in->op == HLO_CALL) {
            int32_t root = inline_body(&rw, &m->comps[hlo_attrs(in)->to_apply], copy.operands);
            if (shape_is_tuple(&in->shape)) {
                /* A tuple needs no copy (users reach its leaves through
                 * get-tuple-element); an annotation on the call moves to the
                 * body's root unless that has its own. */
                HloInst *r = &rw.out[root];
                if (in->sharding && !r->sharding_from_user) {
                    r->sharding = in->sharding;
                    r->sharding_src = in->sharding_src;
                    r->sharding_from_user = in->sharding_from_user;
                }
                map[i] = root;
                continue;
            }
            /* The call's value: a copy that keeps its name, sharding and span. */
            copy.op = HLO_COPY;
            copy.n_operands = 1;
            copy.operands = ARENA_NEW(m->arena, int32_t);
            copy.operands[0] = root;
            copy.attrs = NULL;
        } else if (is_sdy_identity(in)) {
            copy.op = HLO_COPY;
            copy.attrs = NULL;
        }
        map[i] = emit(&rw, &copy);
    }
    c->root = map[c->root];
    c->insts = rw.out;
    c->n_insts = rw.n_out;
    c->cap_insts = rw.cap_out;
}

static void mark_reachable(const HloModule *m, int32_t ci, bool *live)
{
    if (live[ci]) return;
    live[ci] = true;
    const HloComputation *c = &m->comps[ci];
    for (int32_t i = 0; i < c->n_insts; i++) {
        const HloAttrs *a = hlo_attrs(&c->insts[i]);
        int32_t one[] = {a->to_apply, a->select, a->condition, a->body};
        for (int k = 0; k < 4; k++)
            if (one[k] >= 0) mark_reachable(m, one[k], live);
        for (int32_t k = 0; k < a->branches.n; k++) mark_reachable(m, (int32_t)a->branches.v[k], live);
        for (int32_t k = 0; k < a->called.n; k++) mark_reachable(m, (int32_t)a->called.v[k], live);
    }
}

static IntList remap_list(HloModule *m, IntList l, const int32_t *map)
{
    IntList r = hlo_intlist(m, l.v, l.n);
    for (int32_t k = 0; k < r.n; k++) r.v[k] = map[r.v[k]];
    return r;
}

/* Drops computations the entry cannot reach and renumbers references. */
static void prune(HloModule *m, Arena *scratch)
{
    if (m->entry < 0) return;
    bool *live = ARENA_ARRAY(scratch, bool, m->n_comps);
    mark_reachable(m, m->entry, live);
    int32_t *map = ARENA_ARRAY(scratch, int32_t, m->n_comps);
    int32_t n = 0;
    for (int32_t ci = 0; ci < m->n_comps; ci++) {
        map[ci] = live[ci] ? n : -1;
        if (live[ci]) m->comps[n++] = m->comps[ci];
    }
    if (n == m->n_comps) return;
    m->n_comps = n;
    m->entry = map[m->entry];
    for (int32_t ci = 0; ci < n; ci++) {
        HloComputation *c = &m->comps[ci];
        for (int32_t i = 0; i < c->n_insts; i++) {
            HloAttrs *a = c->insts[i].attrs;
            if (!a) continue;
            if (a->to_apply >= 0) a->to_apply = map[a->to_apply];
            if (a->select >= 0) a->select = map[a->select];
            if (a->condition >= 0) a->condition = map[a->condition];
            if (a->body >= 0) a->body = map[a->body];
            if (a->branches.n) a->branches = remap_list(m, a->branches, map);
            if (a->called.n) a->called = remap_list(m, a->called, map);
        }
    }
}

bool canonicalize_module(HloModule *m, PassCtx *cx)
{
    bool changed = false;
    for (int32_t ci = 0; ci < m->n_comps; ci++) {
        if (!needs_rewrite(&m->comps[ci])) continue;
        rewrite_computation(m, ci, cx->scratch);
        changed = true;
    }
    if (changed) prune(m, cx->scratch);
    return true;
}
