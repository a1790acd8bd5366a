/* canonicalize.c - inline calls, drop Shardy identities, give values-only
 * rng-bit-generators their state, prune dead computations (see
 * canonicalize.h).
 *
 * Input: a verified module whose shardings are bound.  Only the
 * computations that stay are rewritten: the entry and what it reaches
 * other than through a call (loop bodies and conditions, branches, reducers
 * and the like, also from inside inlined callees).  Each is copied top-down
 * in program order into a fresh instruction array; a call pushes its
 * callee onto an explicit stack and the callee's instructions are copied in
 * place, so an instruction is copied once per path of calls from a kept
 * computation to it (a chain of N nested calls costs N copies, not N^2,
 * and no C recursion).  Names stay unique (a clashing callee name gets a
 * ".N" suffix).  Invalidates any users/side tables.
 */
#include "spmdc/canonicalize.h"

#include <stdio.h>
#include <string.h>

#include "spmdc/names.h"
#include "spmdc/sdy.h"

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

static bool is_sdy_identity(const HloInst *in)
{
    if (in->op != HLO_CUSTOM_CALL || in->n_operands != 1) return false;
    const char *t = hlo_attrs(in)->custom_call_target;
    return t && strcmp(t, "xla.sdy.FuncResultSharding") == 0;
}

static bool is_sdy_border(const HloInst *in)
{
    return hlo_is_custom_call(in, "xla.sdy.GlobalToLocalShape") || hlo_is_custom_call(in, "xla.sdy.LocalToGlobalShape");
}

/* An rng-bit-generator declared with its values only (XLA's verifier takes
 * that form) rather than the (state, values) tuple. */
static bool is_rng_values_only(const HloInst *in)
{
    return in->op == HLO_RNG_BIT_GENERATOR && !shape_is_tuple(in->shape);
}

/* Whether in is rewritten: an inlined call, a Shardy
 * identity or border, a values-only rng-bit-generator. */
static bool is_rewritten(const HloInst *in, bool inline_calls)
{
    if (in->op == HLO_CALL) return inline_calls;
    return is_sdy_identity(in) || is_sdy_border(in) || is_rng_values_only(in);
}

/* Per computation, the instructions that can name computations
 * (hlo_opcode_names_computations), as indices in program order:
 * idx[start[ci] .. start[ci + 1]); and needs[ci], whether it holds an
 * instruction to rewrite.  Built by one read of every instruction's opcode
 * (and a custom-call's target), so the walks over callees read only these
 * few.  Arrays in scratch; valid until a computation is rewritten. */
typedef struct CalleeIndex {
    int32_t *start; /* [n_comps + 1] */
    int32_t *idx;
    bool *needs; /* [n_comps] */
} CalleeIndex;

static CalleeIndex callee_index(const HloModule *m, bool inline_calls, Arena *scratch)
{
    CalleeIndex ix;
    int32_t nc = m->n_comps, total = 0, cap = 64;
    ix.start = ARENA_ARRAY(scratch, int32_t, nc + 1);
    ix.needs = ARENA_ARRAY(scratch, bool, nc ? nc : 1);
    ix.idx = ARENA_ARRAY(scratch, int32_t, cap);
    for (int32_t ci = 0; ci < nc; ci++) {
        const HloComputation *c = &m->comps[ci];
        bool needs = false;
        ix.start[ci] = total;
        for (int32_t i = 0; i < c->n_insts; i++) {
            HLO_WALK_PREFETCH(c, i);
            const HloInst *in = &c->insts[i];
            bool names = hlo_opcode_names_computations(in->op);
            if (!names && in->op != HLO_RNG_BIT_GENERATOR) continue;
            needs |= is_rewritten(in, inline_calls);
            if (!names) continue;
            if (total == cap) {
                ix.idx = arena_realloc(scratch, ix.idx, sizeof(int32_t) * (size_t)cap,
                                       sizeof(int32_t) * (size_t)cap * 2, _Alignof(int32_t));
                cap *= 2;
            }
            ix.idx[total++] = i;
        }
        ix.needs[ci] = needs;
    }
    ix.start[nc] = total;
    return ix;
}

/* The name in's replacement takes in the output: in's own in a kept
 * computation (already in rw->names), a unique one for an inlined copy. */
static const char *out_name(Rewriter *rw, const HloInst *in, bool inlined)
{
    return inlined ? names_unique(&rw->names, in->name, rw->m->arena) : in->name;
}

/* The values-only rng-bit-generator in as the (state, values) form (named
 * NAME.state-bits, unannotated) and get-tuple-element 1 of it, which keeps
 * in's name (out_name), sharding and span.  op: the mapped state operand.
 * Returns the get-tuple-element's index. */
static int32_t split_rng_values(Rewriter *rw, const HloInst *in, int32_t op, bool inlined)
{
    HloModule *m = rw->m;
    HloInst r = *in;
    r.operands = ARENA_NEW(m->arena, int32_t);
    r.operands[0] = op;
    Shape pair[2] = {*rw->out[op].shape, *in->shape}, tuple;
    memset(&tuple, 0, sizeof tuple);
    tuple.type = ET_TUPLE;
    tuple.n_elems = 2;
    tuple.elems = pair;
    r.shape = hlo_shape(m, &tuple);
    size_t len = strlen(in->name) + sizeof ".state-bits";
    char *base = ARENA_ARRAY(rw->scratch, char, len);
    snprintf(base, len, "%s.state-bits", in->name);
    r.name = names_unique(&rw->names, base, m->arena);
    r.sharding = NULL;
    r.sharding_src = NULL;
    r.sharding_from_user = false;
    int32_t ri = emit(rw, &r);
    HloInst g;
    memset(&g, 0, sizeof g);
    g.op = HLO_GET_TUPLE_ELEMENT;
    g.name = out_name(rw, in, inlined);
    g.shape = in->shape;
    g.n_operands = 1;
    g.operands = ARENA_NEW(m->arena, int32_t);
    g.operands[0] = ri;
    g.attrs = ARENA_NEW(m->arena, HloAttrs);
    g.attrs->to_apply = g.attrs->select = g.attrs->condition = g.attrs->body = -1;
    g.attrs->index = 1;
    g.sharding = in->sharding;
    g.sharding_src = in->sharding_src;
    g.sharding_from_user = in->sharding_from_user;
    g.sharding_origin = -1;
    g.span = in->span;
    return emit(rw, &g);
}

/* ---------------------------------------------------------------- shard_map */

static const char *frontend_attrs(const HloInst *in)
{
    const HloAttrs *a = hlo_attrs(in);
    for (int32_t k = 0; k < a->n_raw; k++)
        if (strcmp(a->raw[k].name, "frontend_attributes") == 0) return a->raw[k].text;
    return NULL;
}

/* s with the atoms of mask taken out of its dims and made manual (every
 * atom: MANUAL); a partially manual one keeps s's open dims, priorities and
 * replicated automatic axes (Shardy's `{?}` in in_shardings / out_shardings:
 * propagation may add automatic axes there). */
static Sharding make_manual(const HloModule *m, const Sharding *s, int32_t rank, uint32_t mask)
{
    uint32_t all = m->mesh.n_atoms >= 32 ? 0xffffffffu : (1u << m->mesh.n_atoms) - 1;
    Sharding r = sharding_tiled(rank);
    if (mask == all) {
        r = sharding_replicated();
        r.kind = SHARDING_MANUAL;
        r.manual_atoms = all;
        return r;
    }
    for (int32_t d = 0; s->kind == SHARDING_TILED && d < rank && d < s->tile.rank; d++) {
        int8_t a[SPMDC_MAX_ATOMS];
        int32_t n = 0;
        const int8_t *src = sharding_dim_atoms(s, d);
        for (int32_t k = 0; k < sharding_dim_n(s, d); k++)
            if (!(mask & (1u << src[k]))) a[n++] = src[k];
        sharding_set_dim(&r, d, a, n);
    }
    r.manual_atoms = mask;
    r.named_form = s->named_form;
    r.open_dims = s->open_dims;
    r.replicated_atoms = s->replicated_atoms & ~mask;
    memcpy(r.priority, s->priority, sizeof r.priority);
    sharding_normalize(&r);
    return r;
}

/* Appends a custom-call of target t on operand x with shape and sharding
 * (the user's: never overwritten); returns its index. */
static int32_t emit_border(Rewriter *rw, const HloInst *like, const char *name, const char *t, int32_t x,
                           const Shape *shape, const Sharding *sh)
{
    HloInst n;
    memset(&n, 0, sizeof n);
    n.op = HLO_CUSTOM_CALL;
    n.name = names_unique(&rw->names, name, rw->m->arena);
    n.shape = hlo_shape(rw->m, shape);
    n.n_operands = 1;
    n.operands = ARENA_NEW(rw->m->arena, int32_t);
    n.operands[0] = x;
    n.attrs = ARENA_NEW(rw->m->arena, HloAttrs);
    n.attrs->to_apply = n.attrs->select = n.attrs->condition = n.attrs->body = -1;
    n.attrs->custom_call_target = arena_strdup(rw->m->arena, t);
    n.sharding = arena_memdup(rw->m->arena, sh, sizeof *sh);
    n.sharding_from_user = true;
    n.sharding_origin = -1;
    n.span = like->span;
    return emit(rw, &n);
}

/* Rewrites Shardy's shard_map borders into XLA's GSPMD ones: per value,
 * xla.sdy.GlobalToLocalShape becomes Sharding(in_sharding) then
 * SPMDFullToShardShape (manual along the manual axes), and
 * xla.sdy.LocalToGlobalShape becomes Sharding(manual) then
 * SPMDShardToFullShape(out_sharding); a tuple of the pieces keeps the
 * custom-call's name (out_name).  Returns the replacement's index, -1 after
 * an error. */
static int32_t rewrite_sdy_border(Rewriter *rw, const HloInst *in, const int32_t *ops, bool inlined,
                                  DiagEngine *diag)
{
    HloModule *m = rw->m;
    bool to_local = hlo_is_custom_call(in, "xla.sdy.GlobalToLocalShape");
    const char *fa = frontend_attrs(in);
    char why[200];
    uint32_t axes = 0;
    int32_t nv = in->n_operands, got = 0;
    ShardingSyntax *syn = ARENA_ARRAY(rw->scratch, ShardingSyntax, nv ? nv : 1);
    if (!m->has_mesh || sdy_manual_axes(fa, &m->mesh, &axes, why, sizeof why) != SDY_OK ||
        sdy_sharding_list(fa, to_local ? "xla.sdy.in_shardings" : "xla.sdy.out_shardings", &m->mesh, rw->scratch,
                          syn, nv, &got, why, sizeof why) != SDY_OK ||
        got != nv || (shape_is_tuple(in->shape) ? in->shape->n_elems : 1) != nv) {
        diag_error(diag, in->span, "%s: cannot read this shard_map border (%s)", in->name,
                   why[0] ? why : "its shardings do not match its values");
        return -1;
    }
    const char *name = out_name(rw, in, inlined); /* before the pieces take theirs */
    uint32_t mask = 0;
    for (int32_t a = 0; a < m->mesh.n_axes; a++)
        if (axes & (1u << a))
            for (int32_t k = 0; k < m->mesh.axes[a].n_atoms; k++) mask |= 1u << (m->mesh.axes[a].first_atom + k);
    int32_t *pieces = ARENA_ARRAY(rw->scratch, int32_t, nv ? nv : 1);
    for (int32_t k = 0; k < nv; k++) {
        const Shape *res = shape_is_tuple(in->shape) ? &in->shape->elems[k] : in->shape;
        const Shape *op = rw->out[ops[k]].shape;
        const Shape *global = to_local ? op : res;
        if (shape_is_tuple(op) || shape_is_tuple(res) || op->type != res->type || op->rank != res->rank) {
            /* as SPMDFullToShardShape / SPMDShardToFullShape: the dims change, nothing else */
            diag_error(diag, in->span, "%s: value %d of this shard_map border changes its element type or rank "
                       "(%s rank %d to %s rank %d); a border keeps both", in->name, k,
                       shape_is_tuple(op) ? "tuple" : elem_type_name(op->type), op->rank,
                       shape_is_tuple(res) ? "tuple" : elem_type_name(res->type), res->rank);
            return -1;
        }
        Sharding bound;
        if (syn[k].kind == SSYN_TILED) {
            /* a Shardy string reads as the positional form only over a mesh
             * whose device_ids are permuted (sdy.h); the manual sharding and
             * the body's axis indices are built over the mesh's own order */
            diag_error(diag, in->span, "%s: a shard_map over a mesh whose device_ids are in another order than "
                       "0..N-1 is not supported", in->name);
            return -1;
        }
        if (!sharding_bind(&syn[k], &m->mesh, global, &bound, m->arena, diag)) return -1;
        bound.named_form = true;
        Sharding man = make_manual(m, &bound, global->rank, mask);
        if (to_local) {
            int32_t sh = emit_border(rw, in, in->name, "Sharding", ops[k], op, &bound);
            pieces[k] = emit_border(rw, in, in->name, "SPMDFullToShardShape", sh, res, &man);
        } else {
            int32_t sh = emit_border(rw, in, in->name, "Sharding", ops[k], op, &man);
            pieces[k] = emit_border(rw, in, in->name, "SPMDShardToFullShape", sh, res, &bound);
        }
    }
    if (!shape_is_tuple(in->shape)) {
        rw->out[pieces[0]].name = name; /* the border's value keeps its name */
        return pieces[0];
    }
    HloInst t = *in;
    t.name = name;
    t.op = HLO_TUPLE;
    t.attrs = NULL;
    t.attrs_shared = false;
    t.sharding = NULL;
    t.sharding_src = NULL;
    t.sharding_from_user = false;
    t.sharding_origin = -1;
    t.sharding_dim_origin = NULL;
    t.operands = arena_memdup(m->arena, pieces, sizeof(int32_t) * (size_t)nv);
    return emit(rw, &t);
}

/* One computation being copied: kept (c is the computation being
 * rewritten) or inlined (its parameters map to args, the mapped operands of
 * the call at instruction i of the frame below, which finish_call turns
 * into the call's value when this frame is done). */
typedef struct Frame {
    const HloComputation *c;
    int32_t i;           /* next instruction to copy */
    int32_t *map;        /* [c->n_insts]: instruction -> index in rw->out */
    const int32_t *args; /* inlined: the call's mapped operands; NULL when kept */
    const char *name;    /* inlined, array-shaped call: the name its copy takes (reserved when the
                            call is reached, before the callee's names) */
} Frame;

/* The call in whose callee was copied with its root at new index root:
 * its value.  A tuple needs no copy (users reach its leaves through
 * get-tuple-element), and an annotation on the call moves to the body's
 * root unless that has its own; an array becomes a copy of the root named
 * name (the call's, or the one reserved for it) with the call's sharding
 * and span.  Returns the index of the call's value. */
static int32_t finish_call(Rewriter *rw, const HloInst *in, int32_t root, const char *name)
{
    if (shape_is_tuple(in->shape)) {
        HloInst *r = &rw->out[root];
        if (in->sharding && !r->sharding_from_user) {
            r->sharding = in->sharding;
            r->sharding_src = in->sharding_src;
            r->sharding_from_user = in->sharding_from_user;
        }
        return root;
    }
    HloInst copy = *in;
    copy.name = name;
    copy.sharding_origin = -1; /* indices change: propagation sets it again */
    copy.sharding_dim_origin = NULL;
    copy.op = HLO_COPY;
    copy.n_operands = 1;
    copy.operands = ARENA_NEW(rw->m->arena, int32_t);
    copy.operands[0] = root;
    copy.attrs = NULL;
    copy.attrs_shared = false;
    return emit(rw, &copy);
}

/* Rewrites computation ci (a kept one) in place: calls inlined (unless
 * inline_calls is false), Shardy identities and borders and values-only
 * rng-bit-generators replaced, the callees' instructions rewritten alike
 * as they are inlined.  Frames live on an explicit stack in scratch, so a
 * chain of nested calls of any depth uses no C stack.  False after an
 * error (reported). */
static bool rewrite_computation(HloModule *m, int32_t ci, Arena *scratch, DiagEngine *diag, bool inline_calls)
{
    HloComputation *c = &m->comps[ci];
    Rewriter rw = {.m = m, .scratch = scratch};
    names_init(&rw.names, scratch);
    for (int32_t i = 0; i < c->n_insts; i++) names_add(&rw.names, c->insts[i].name);
    int32_t n_frames = 0, cap_frames = 16, top_root = -1;
    Frame *fr = ARENA_ARRAY(scratch, Frame, cap_frames);
    fr[n_frames++] = (Frame){c, 0, ARENA_ARRAY(scratch, int32_t, c->n_insts ? c->n_insts : 1), NULL, NULL};
    while (n_frames) {
        Frame *f = &fr[n_frames - 1];
        bool inlined = f->args != NULL;
        if (f->i == f->c->n_insts) {
            int32_t root = f->map[f->c->root];
            const char *name = f->name;
            if (--n_frames == 0) {
                top_root = root;
                break;
            }
            /* back in the caller, at its call */
            f = &fr[n_frames - 1];
            f->map[f->i] = finish_call(&rw, &f->c->insts[f->i], root, name);
            f->i++;
            continue;
        }
        const HloInst *in = &f->c->insts[f->i];
        if (inlined && in->op == HLO_PARAMETER) {
            f->map[f->i++] = f->args[in->param_number];
            continue;
        }
        int32_t *ops = map_operands(&rw, in, f->map);
        if (in->op == HLO_CALL && inline_calls) {
            if (n_frames == cap_frames) {
                fr = arena_realloc(scratch, fr, sizeof(Frame) * (size_t)cap_frames,
                                   sizeof(Frame) * (size_t)cap_frames * 2, _Alignof(Frame));
                cap_frames *= 2;
            }
            const HloComputation *callee = &m->comps[hlo_attrs(in)->to_apply];
            /* the call's value keeps its name before the callee's take theirs */
            const char *name = shape_is_tuple(in->shape) ? NULL : out_name(&rw, in, inlined);
            fr[n_frames++] =
                (Frame){callee, 0, ARENA_ARRAY(scratch, int32_t, callee->n_insts ? callee->n_insts : 1),
                        ops ? ops : ARENA_NEW(scratch, int32_t), name};
            continue; /* f->i moves on when the callee's frame is done */
        }
        if (is_sdy_border(in)) {
            if ((f->map[f->i] = rewrite_sdy_border(&rw, in, ops, inlined, diag)) < 0) return false;
            f->i++;
            continue;
        }
        if (is_rng_values_only(in)) {
            f->map[f->i] = split_rng_values(&rw, in, ops[0], inlined);
            f->i++;
            continue;
        }
        HloInst copy = *in;
        copy.operands = ops;
        copy.sharding_origin = -1; /* indices change: propagation sets it again */
        copy.sharding_dim_origin = NULL;
        if (inlined) {
            copy.name = names_unique(&rw.names, in->name, m->arena);
            if (in->attrs) {
                /* its own set: prune renumbers each copy's references once */
                copy.attrs = ARENA_NEW(m->arena, HloAttrs);
                *copy.attrs = *in->attrs;
                copy.attrs_shared = false;
            }
        }
        if (is_sdy_identity(in)) {
            copy.op = HLO_COPY;
            copy.attrs = NULL;
            copy.attrs_shared = false;
        }
        f->map[f->i] = emit(&rw, &copy);
        f->i++;
    }
    c->root = top_root;
    c->insts = rw.out;
    c->n_insts = rw.n_out;
    c->cap_insts = rw.cap_out;
    return true;
}

/* Marks keep[ci] (n_comps bools, zeroed) for the computations that stay
 * once the calls are inlined (every call when inline_calls; none when
 * false, so keep[] is then what the entry reaches): the entry and every
 * computation that an instruction names other than as an inlined call's
 * callee, in a kept computation or in a callee inlined into one.  Each
 * computation's instructions are read once; an explicit stack in scratch,
 * no recursion; only the attributes of instructions that can name a
 * computation are read (hlo_opcode_names_computations): those ix lists
 * (NULL: found by reading every opcode). */
static void mark_kept(const HloModule *m, const CalleeIndex *ix, bool inline_calls, bool *keep, Arena *scratch)
{
    if (m->entry < 0) return;
    bool *seen = ARENA_ARRAY(scratch, bool, m->n_comps);
    int32_t *stack = ARENA_ARRAY(scratch, int32_t, m->n_comps), n = 0;
    keep[m->entry] = seen[m->entry] = true;
    stack[n++] = m->entry;
    while (n) {
        int32_t ci = stack[--n];
        const HloComputation *c = &m->comps[ci];
        int32_t n_walk = ix ? ix->start[ci + 1] - ix->start[ci] : c->n_insts;
        for (int32_t w = 0; w < n_walk; w++) {
            const HloInst *in = &c->insts[ix ? ix->idx[ix->start[ci] + w] : w];
            if (!hlo_opcode_names_computations(in->op)) continue; /* its attributes stay unread */
            const HloAttrs *a = hlo_attrs(in);
            int32_t one[] = {a->to_apply, a->select, a->condition, a->body};
            bool inlines = in->op == HLO_CALL && inline_calls;
            for (int32_t k = 0; k < 4 + a->branches.n + a->called.n; k++) {
                int32_t t = k < 4 ? one[k]
                            : k < 4 + a->branches.n ? (int32_t)a->branches.v[k - 4]
                                                    : (int32_t)a->called.v[k - 4 - a->branches.n];
                if (t < 0) continue;
                if (!(inlines && k == 0)) keep[t] = true;
                if (!seen[t]) {
                    seen[t] = true;
                    stack[n++] = t;
                }
            }
        }
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
    mark_kept(m, NULL, false, live, scratch);
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
            HloInst *in = &c->insts[i];
            if (!in->attrs || !hlo_opcode_names_computations(in->op)) continue;
            /* a shared set is renumbered once per instruction: into a copy */
            HloAttrs a = *in->attrs;
            if (a.to_apply >= 0) a.to_apply = map[a.to_apply];
            if (a.select >= 0) a.select = map[a.select];
            if (a.condition >= 0) a.condition = map[a.condition];
            if (a.body >= 0) a.body = map[a.body];
            if (a.branches.n) a.branches = remap_list(m, a.branches, map);
            if (a.called.n) a.called = remap_list(m, a.called, map);
            if (in->attrs_shared) hlo_set_attrs(m, in, &a);
            else *in->attrs = a;
        }
    }
}

/* How far expanding the called computations may grow a module: calls are
 * inlined (or with keep_calls partitioned once per call site), and the
 * partitioner partitions every loop body and condition and every branch
 * once per use; to four times the module's instructions plus 2^22.  A body
 * used by two loops, nested 30 deep, is 2^30 instructions from a 5 KB
 * input.  The entry's expanded size bounds all of it: every computation
 * that stays is expanded at least once inside it. */
#define EXPAND_GROWTH_FACTOR 4
#define EXPAND_GROWTH_SLACK (INT64_C(1) << 22)

/* The instructions the computations in expands per use (a call's callee, a
 * loop's body and condition, a conditional's branches) add once expanded,
 * by their expanded sizes size[] (callees come before computation ci),
 * saturating past limit; -1 when in expands none. */
static int64_t expanded_callees(const HloInst *in, int32_t ci, const int64_t *size, int64_t limit)
{
    if (in->op != HLO_CALL && in->op != HLO_WHILE && in->op != HLO_CONDITIONAL) return -1;
    const HloAttrs *a = hlo_attrs(in);
    int64_t n = -1;
    int32_t one[2] = {-1, -1};
    if (in->op == HLO_CALL)
        one[0] = a->to_apply;
    else if (in->op == HLO_WHILE) {
        one[0] = a->body;
        one[1] = a->condition;
    }
    int32_t nb = in->op == HLO_CONDITIONAL ? a->branches.n : 2;
    for (int32_t k = 0; k < nb; k++) {
        int32_t c = in->op == HLO_CONDITIONAL ? (int32_t)a->branches.v[k] : one[k];
        if (c < 0)
            continue;
        if (n < 0)
            n = 0;
        if (c < ci)
            n = n + size[c] > limit ? limit + 1 : n + size[c];
    }
    return n;
}

/* Reports an error when the entry's expansion passes the limit, at the
 * instruction where it does: in the first computation the entry reaches
 * (live[]) whose own expansion passes it, the instruction that takes it
 * past; false then.  Computations come callees first (verify checks it).
 * Every other instruction adds one, so only ix's are read: the run of
 * plain instructions before each is counted at once. */
static bool check_expansion(const HloModule *m, const CalleeIndex *ix, const bool *live, Arena *scratch,
                            DiagEngine *diag)
{
    if (m->entry < 0) return true;
    int64_t input = 0;
    for (int32_t ci = 0; ci < m->n_comps; ci++) input += m->comps[ci].n_insts;
    int64_t limit = EXPAND_GROWTH_FACTOR * input + EXPAND_GROWTH_SLACK;
    int64_t *size = ARENA_ARRAY(scratch, int64_t, m->n_comps ? m->n_comps : 1);
    for (int32_t ci = 0; ci < m->n_comps; ci++) {
        const HloComputation *c = &m->comps[ci];
        int64_t n = 0;
        int32_t next = 0, past = -1; /* instructions [0, next) counted; past: the one taking n past limit */
        for (int32_t k = ix->start[ci]; k <= ix->start[ci + 1]; k++) {
            int32_t i = k < ix->start[ci + 1] ? ix->idx[k] : c->n_insts;
            if (n + (i - next) > limit) { /* a plain instruction before i */
                past = next + (int32_t)(limit - n);
                break;
            }
            n += i - next;
            if (i == c->n_insts) break;
            int64_t inner = expanded_callees(&c->insts[i], ci, size, limit);
            int64_t add = 1 + (inner > 0 ? inner : 0);
            if (n + add > limit) {
                past = i;
                break;
            }
            n += add;
            next = i + 1;
        }
        if (past >= 0 && live[ci]) {
            const HloInst *in = &c->insts[past];
            diag_error(diag, in->span,
                       "%s: expanding the called computations grows the module past %lld instructions (%d "
                       "times its %lld, plus %lld): calls are inlined and loop bodies and branches "
                       "partitioned once per use, so computations used more than once and nested multiply "
                       "the instructions",
                       in->name, (long long)limit, EXPAND_GROWTH_FACTOR, (long long)input,
                       (long long)EXPAND_GROWTH_SLACK);
            return false;
        }
        size[ci] = past >= 0 ? limit + 1 : n;
    }
    return true;
}

bool canonicalize_module(HloModule *m, PassCtx *cx)
{
    bool changed = false, inline_calls = !(cx->opt && cx->opt->keep_calls);
    bool *live = ARENA_ARRAY(cx->scratch, bool, m->n_comps ? m->n_comps : 1);
    CalleeIndex ix = callee_index(m, inline_calls, cx->scratch);
    mark_kept(m, &ix, false, live, cx->scratch);
    if (!check_expansion(m, &ix, live, cx->scratch, cx->diag)) return false;
    bool *keep = live;
    if (inline_calls) {
        keep = ARENA_ARRAY(cx->scratch, bool, m->n_comps ? m->n_comps : 1);
        mark_kept(m, &ix, true, keep, cx->scratch);
    }
    for (int32_t ci = 0; ci < m->n_comps; ci++) {
        if (!keep[ci] || !ix.needs[ci]) continue;
        if (!rewrite_computation(m, ci, cx->scratch, cx->diag, inline_calls)) return false;
        changed = true;
    }
    if (changed) prune(m, cx->scratch);
    return true;
}
