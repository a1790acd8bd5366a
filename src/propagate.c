/* propagate.c - sharding propagation to a fixed point (see propagate.h).
 *
 * Every computation is propagated on its own.  Each instruction's value is a
 * list of array leaves (1 for arrays, the flat leaves of a tuple); the state
 * of a leaf is a tiling (per dim a run of mesh atoms), MANUAL, or "nothing
 * yet" (NULL, which ends as REPLICATED).  A leaf only ever grows: a merge
 * fills an unsplit dim, or extends a dim's run when the old run is its major
 * prefix, with atoms no other dim uses; a dim is never re-tiled differently.
 * MANUAL is the top: it replaces any inferred tiling and never changes.
 * Fixed leaves never change: user annotations (sharding_from_user), results
 * of ops without a rule (REPLICATED), and parameters and root of non-entry
 * computations (REPLICATED).
 *
 * Rules sit in RULES[], one entry per opcode (forward: operands -> result;
 * backward: a user -> its operand i); adding a rule is one entry and one
 * function pair, and a unit test walks hlo_opcodes.def for missing entries.  The driver runs four phases, each to a
 * fixed point of sweeps (forward in program order, then backward in reverse
 * program order, pulling from each value's users in program order), GSPMD
 * style:  0 pass-through ops (elementwise, copy, transpose, reshape, tuple,
 * get-tuple-element, opt-barrier, Sharding custom-call);  1 every rule but
 * broadcast (dot, reduce);  2 + broadcast backward;  3 + broadcast forward.
 * A dot's forward rule offers the larger operand's tiling first.  Sweeps are
 * linear and at most MAX_SWEEPS per phase.  Partial (unreduced) atoms are
 * never created; a user's are kept on that value and not propagated.
 *
 * Provenance: every leaf remembers the annotated instruction its first
 * state came from (lorg: the first source wins when two meet), and for each
 * mesh atom of its state the annotation that atom came from (aorg, a table
 * shared with the source leaf until the state grows), so a dim split by one
 * annotation and another dim by a second one are traced apart.  They end in
 * HloInst.sharding_origin / sharding_dim_origin for the report's causes.
 */
#include "spmdc/propagate.h"

#include <string.h>

enum { PH_PASS = 0, PH_ALL = 1, PH_BCAST_BWD = 2, PH_BCAST_FWD = 3, PH_COUNT = 4, PH_NEVER = 99 };
enum { MAX_SWEEPS = 64 };

/* One operand slot of a user: users[] of a value, in program order. */
typedef struct Edge {
    int32_t user;
    int32_t slot;
    int32_t off; /* tuple users: first leaf of this slot in the tuple */
} Edge;

typedef struct Prop {
    const HloComputation *c;
    const Mesh *mesh;
    Arena *scratch;
    int32_t *leaf_base;        /* [n+1]: first leaf of each instruction */
    const Shape **leaf_shape;  /* [leaves] */
    const Sharding **st;       /* [leaves]: current state, NULL = nothing yet */
    int32_t *lorg;             /* [leaves]: annotated instruction its first state came from, -1 */
    const int32_t **aorg;      /* [leaves]: per mesh atom, the annotated instruction that gave the
                                  state that atom (valid for the atoms it uses; never changed in
                                  place, so leaves share them), or NULL = unknown */
    uint8_t *fixed;            /* [leaves] */
    uint8_t *opaque;           /* [n]: instruction has no rule (result fixed replicated) */
    int32_t *aux;              /* [n]: get-tuple-element: first leaf in the operand */
    int32_t *ustart;           /* [n+1] */
    Edge *edges;
    int phase;
    bool changed;
} Prop;

typedef void (*FwdRule)(Prop *p, int32_t i);
typedef void (*BwdRule)(Prop *p, int32_t u, const Edge *e);

typedef enum RuleKind {
    RK_LEAF,   /* no operands: its value comes from its users */
    RK_OPAQUE, /* no rule: result replicated, operands get nothing */
    RK_RULES,
} RuleKind;

typedef struct Rule {
    const char *name;
    RuleKind kind;
    int8_t fwd_phase, bwd_phase;
    FwdRule fwd;
    BwdRule bwd;
} Rule;

static const Sharding MANUAL_SH = {.kind = SHARDING_MANUAL};

/* ================================================================ state */

static int32_t nleaves(const Prop *p, int32_t i) { return p->leaf_base[i + 1] - p->leaf_base[i]; }
static int32_t leaf(const Prop *p, int32_t i) { return p->leaf_base[i]; }
static const HloInst *inst(const Prop *p, int32_t i) { return &p->c->insts[i]; }

static uint32_t run_mask(const int8_t *a, int32_t n)
{
    uint32_t m = 0;
    for (int32_t k = 0; k < n; k++) m |= 1u << a[k];
    return m;
}

/* old merged with c: per dim, an unsplit dim takes c's run and a run that is
 * a major prefix of c's is extended, if the atoms added are unused.  Returns
 * true iff *out differs from old. */
static bool merge_tiling(const Sharding *old, const Sharding *c, Sharding *out)
{
    uint32_t used = sharding_tiled_atoms(old);
    Sharding r = sharding_tiled(old->tile.rank);
    bool grew = false;
    for (int32_t d = 0; d < old->tile.rank; d++) {
        const int8_t *oa = sharding_dim_atoms(old, d), *ca = sharding_dim_atoms(c, d);
        int32_t on = sharding_dim_n(old, d), cn = sharding_dim_n(c, d);
        const int8_t *take = oa;
        int32_t tn = on;
        if (cn > on && (on == 0 || memcmp(oa, ca, (size_t)on) == 0)) {
            uint32_t extra = run_mask(ca + on, cn - on);
            if (!(extra & used)) {
                take = ca;
                tn = cn;
                used |= extra;
                grew = true;
            }
        }
        sharding_set_dim(&r, d, take, tn);
    }
    *out = r;
    return grew;
}

static const Sharding *persist(Prop *p, const Sharding *s)
{
    Sharding *n = ARENA_NEW(p->scratch, Sharding);
    *n = *s;
    return n;
}

static void set_state(Prop *p, int32_t lf, const Sharding *s)
{
    p->st[lf] = s;
    p->changed = true;
}

/* Provenance after leaf lf's state grew from `old` (NULL: it had none) with
 * atoms offered by leaf `from`: the leaf keeps its first origin, and the
 * atoms it gained are traced to the annotations `from` had them from.  A
 * first state only has atoms of `from`'s state, so it shares its table. */
static void take_origin(Prop *p, int32_t lf, int32_t from, const Sharding *old)
{
    if (p->lorg[lf] < 0) p->lorg[lf] = p->lorg[from];
    const int32_t *src = p->aorg[from], *mine = p->aorg[lf];
    if (!old) {
        p->aorg[lf] = src;
        return;
    }
    uint32_t had = sharding_tiled_atoms(old);
    int32_t n = p->mesh->n_atoms;
    int32_t *a = ARENA_ARRAY(p->scratch, int32_t, n > 0 ? n : 1);
    for (int32_t k = 0; k < n; k++) {
        const int32_t *t = (had >> k) & 1u ? mine : src;
        a[k] = t ? t[k] : -1;
    }
    p->aorg[lf] = a;
}

/* Offers candidate c (a tiling without partial atoms, or MANUAL, built from
 * the state of leaf `from`) to leaf lf.  c_stored: c outlives the pass's
 * sweeps and may be kept by pointer. */
static void improve(Prop *p, int32_t lf, const Sharding *c, bool c_stored, int32_t from)
{
    if (!c || p->fixed[lf]) return;
    const Sharding *old = p->st[lf];
    if (old == c) return;
    if (c->kind == SHARDING_MANUAL) {
        if (!old || old->kind != SHARDING_MANUAL) {
            set_state(p, lf, &MANUAL_SH);
            p->lorg[lf] = p->lorg[from]; /* replaces the tiling, and its origin */
            p->aorg[lf] = NULL;
        }
        return;
    }
    if (c->kind != SHARDING_TILED || !sharding_is_tiled(c)) return;
    if (old && old->kind == SHARDING_MANUAL) return;
    const Shape *sh = p->leaf_shape[lf];
    if (!shape_is_array(sh) || c->tile.rank != sh->rank) return;
    if (!old) {
        set_state(p, lf, c_stored ? c : persist(p, c));
        take_origin(p, lf, from, NULL);
        return;
    }
    Sharding r;
    if (merge_tiling(old, c, &r)) {
        set_state(p, lf, persist(p, &r));
        take_origin(p, lf, from, old);
    }
}

/* Offers leaf dst the tiling of leaf sl in which dst dim j takes source dim
 * src_of[j] (-1: unsplit).  MANUAL passes as is. */
static void offer_mapped(Prop *p, int32_t sl, const int32_t *src_of, int32_t dst_rank, int32_t dst)
{
    const Sharding *src = p->st[sl];
    if (!src) return;
    if (src->kind == SHARDING_MANUAL) {
        improve(p, dst, src, true, sl);
        return;
    }
    if (src->kind != SHARDING_TILED) return;
    Sharding c = sharding_tiled(dst_rank);
    bool any = false;
    for (int32_t j = 0; j < dst_rank; j++) {
        int32_t d = src_of[j];
        if (d < 0 || d >= src->tile.rank || sharding_dim_n(src, d) == 0) continue;
        sharding_set_dim(&c, j, sharding_dim_atoms(src, d), sharding_dim_n(src, d));
        any = true;
    }
    if (any) improve(p, dst, &c, false, sl);
}

static bool same_dims(const Shape *a, const Shape *b)
{
    if (!shape_is_array(a) || !shape_is_array(b) || a->rank != b->rank) return false;
    for (int32_t d = 0; d < a->rank; d++)
        if (a->dims[d] != b->dims[d]) return false;
    return true;
}

/* ================================================================ rules: identity-like */

/* Leafwise identity from operand o to inst i where the leaf shapes agree
 * (elementwise ops, copy, opt-barrier, Sharding custom-call). */
static void pass_leaves(Prop *p, int32_t from, int32_t to)
{
    int32_t nl = nleaves(p, to);
    if (nleaves(p, from) != nl) return;
    int32_t f = leaf(p, from), t = leaf(p, to);
    for (int32_t l = 0; l < nl; l++)
        if (same_dims(p->leaf_shape[f + l], p->leaf_shape[t + l])) improve(p, t + l, p->st[f + l], true, f + l);
}

static void fwd_elementwise(Prop *p, int32_t i)
{
    const HloInst *in = inst(p, i);
    for (int32_t k = 0; k < in->n_operands; k++) pass_leaves(p, in->operands[k], i);
}

static void bwd_elementwise(Prop *p, int32_t u, const Edge *e)
{
    pass_leaves(p, u, inst(p, u)->operands[e->slot]);
}

static bool is_sharding_annotation(const HloInst *in)
{
    const char *t = hlo_attrs(in)->custom_call_target;
    return in->op == HLO_CUSTOM_CALL && in->n_operands == 1 && t && strcmp(t, "Sharding") == 0;
}

static void fwd_custom_call(Prop *p, int32_t i)
{
    if (is_sharding_annotation(inst(p, i))) fwd_elementwise(p, i);
}

static void bwd_custom_call(Prop *p, int32_t u, const Edge *e)
{
    if (is_sharding_annotation(inst(p, u))) bwd_elementwise(p, u, e);
}

static void fwd_tuple(Prop *p, int32_t i)
{
    const HloInst *in = inst(p, i);
    int32_t off = 0;
    for (int32_t k = 0; k < in->n_operands; k++) {
        int32_t o = in->operands[k], n = nleaves(p, o);
        if (off + n > nleaves(p, i)) return;
        for (int32_t l = 0; l < n; l++) {
            int32_t from = leaf(p, o) + l;
            improve(p, leaf(p, i) + off + l, p->st[from], true, from);
        }
        off += n;
    }
}

static void bwd_tuple(Prop *p, int32_t u, const Edge *e)
{
    int32_t o = inst(p, u)->operands[e->slot], n = nleaves(p, o);
    if (e->off + n > nleaves(p, u)) return;
    for (int32_t l = 0; l < n; l++) {
        int32_t from = leaf(p, u) + e->off + l;
        improve(p, leaf(p, o) + l, p->st[from], true, from);
    }
}

static void fwd_gte(Prop *p, int32_t i)
{
    int32_t o = inst(p, i)->operands[0], base = p->aux[i], n = nleaves(p, i);
    if (base < 0 || base + n > nleaves(p, o)) return;
    for (int32_t l = 0; l < n; l++) {
        int32_t from = leaf(p, o) + base + l;
        improve(p, leaf(p, i) + l, p->st[from], true, from);
    }
}

static void bwd_gte(Prop *p, int32_t u, const Edge *e)
{
    int32_t o = inst(p, u)->operands[e->slot], base = p->aux[u], n = nleaves(p, u);
    if (base < 0 || base + n > nleaves(p, o)) return;
    for (int32_t l = 0; l < n; l++) {
        int32_t from = leaf(p, u) + l;
        improve(p, leaf(p, o) + base + l, p->st[from], true, from);
    }
}

/* ================================================================ rules: transpose, broadcast */

/* The transpose's permutation if valid for operand and result ranks. */
static const int64_t *transpose_perm(const Prop *p, int32_t i)
{
    const HloInst *in = inst(p, i);
    const Shape *os = &inst(p, in->operands[0])->shape;
    const IntList *perm = &hlo_attrs(in)->dimensions;
    if (!shape_is_array(&in->shape) || !shape_is_array(os) || os->rank != in->shape.rank ||
        perm->n != os->rank)
        return NULL;
    uint32_t seen = 0;
    for (int32_t k = 0; k < perm->n; k++) {
        int64_t d = perm->v[k];
        if (d < 0 || d >= perm->n || (seen & (1u << d)) || os->dims[d] != in->shape.dims[k]) return NULL;
        seen |= 1u << d;
    }
    return perm->v;
}

static void offer_transposed(Prop *p, int32_t sl, const int64_t *perm, int32_t rank, int32_t dst)
{
    const Sharding *src = p->st[sl];
    if (!src) return;
    if (src->kind != SHARDING_TILED || src->tile.rank != rank) {
        improve(p, dst, src, true, sl); /* MANUAL (anything else is refused) */
        return;
    }
    Sharding c;
    sharding_transpose(src, perm, rank, &c);
    improve(p, dst, &c, false, sl);
}

static void fwd_transpose(Prop *p, int32_t i)
{
    const int64_t *perm = transpose_perm(p, i);
    if (!perm) return;
    offer_transposed(p, leaf(p, inst(p, i)->operands[0]), perm, inst(p, i)->shape.rank, leaf(p, i));
}

static void bwd_transpose(Prop *p, int32_t u, const Edge *e)
{
    const int64_t *perm = transpose_perm(p, u);
    if (!perm) return;
    int32_t rank = inst(p, u)->shape.rank;
    int64_t inv[SPMDC_MAX_RANK];
    for (int32_t k = 0; k < rank; k++) inv[perm[k]] = k;
    offer_transposed(p, leaf(p, u), inv, rank, leaf(p, inst(p, u)->operands[e->slot]));
}

/* Broadcast dim map: out_src[j] = operand dim feeding output dim j (-1 new);
 * in_dst[d] = output dim of operand dim d.  False if malformed. */
static bool broadcast_map(const Prop *p, int32_t i, int32_t *out_src, int32_t *in_dst)
{
    const HloInst *in = inst(p, i);
    const Shape *os = &inst(p, in->operands[0])->shape, *rs = &in->shape;
    const IntList *dims = &hlo_attrs(in)->dimensions;
    if (!shape_is_array(os) || !shape_is_array(rs) || dims->n != os->rank) return false;
    for (int32_t j = 0; j < rs->rank; j++) out_src[j] = -1;
    uint32_t seen = 0;
    for (int32_t d = 0; d < os->rank; d++) {
        int64_t j = dims->v[d];
        if (j < 0 || j >= rs->rank || (seen & (1u << j))) return false;
        seen |= 1u << j;
        bool same = os->dims[d] == rs->dims[j]; /* a size-1 operand dim is not copied */
        out_src[j] = same ? d : -1;
        in_dst[d] = same ? (int32_t)j : -1;
    }
    return true;
}

static void fwd_broadcast(Prop *p, int32_t i)
{
    int32_t out_src[SPMDC_MAX_RANK], in_dst[SPMDC_MAX_RANK];
    if (!broadcast_map(p, i, out_src, in_dst)) return;
    offer_mapped(p, leaf(p, inst(p, i)->operands[0]), out_src, inst(p, i)->shape.rank, leaf(p, i));
}

static void bwd_broadcast(Prop *p, int32_t u, const Edge *e)
{
    int32_t out_src[SPMDC_MAX_RANK], in_dst[SPMDC_MAX_RANK];
    if (!broadcast_map(p, u, out_src, in_dst)) return;
    int32_t o = inst(p, u)->operands[e->slot];
    offer_mapped(p, leaf(p, u), in_dst, inst(p, o)->shape.rank, leaf(p, o));
}

/* ================================================================ rules: reshape */

typedef struct RunBuf {
    int8_t a[SPMDC_MAX_ATOMS];
    int32_t n;
} RunBuf;

static int64_t run_size(const Mesh *mesh, const RunBuf *r)
{
    int64_t t = 1;
    for (int32_t k = 0; k < r->n; k++) t *= mesh->atom_size[r->a[k]];
    return t;
}

static void run_append(RunBuf *dst, const int8_t *a, int32_t n)
{
    if (dst->n + n > SPMDC_MAX_ATOMS) return; /* cannot happen: atoms are distinct */
    memcpy(dst->a + dst->n, a, (size_t)n);
    dst->n += n;
}

/* Walk state of reshape_tiling: current source piece (size s, run) and
 * target piece (size t, output dim tj). */
typedef struct ReshapeWalk {
    const Shape *from, *to;
    const Sharding *s;
    int32_t si, tj;          /* next source dim; current target dim */
    int64_t ssz, tsz;
    RunBuf run;
    int32_t atoms_after[SPMDC_MAX_RANK + 1]; /* atoms in source dims >= d */
    RunBuf out[SPMDC_MAX_RANK];
} ReshapeWalk;

static void walk_next_source(ReshapeWalk *w)
{
    w->run.n = 0;
    if (w->si >= w->from->rank) {
        w->ssz = 1;
        return;
    }
    w->ssz = w->from->dims[w->si];
    run_append(&w->run, sharding_dim_atoms(w->s, w->si), sharding_dim_n(w->s, w->si));
    w->si++;
}

static void walk_next_target(ReshapeWalk *w)
{
    w->tj++;
    w->tsz = w->tj < w->to->rank ? w->to->dims[w->tj] : 1;
}

/* Moves the run's major atoms with product t to the current output dim. */
static bool walk_split_prefix(ReshapeWalk *w, const Mesh *mesh, int64_t t)
{
    int64_t prod = 1;
    int32_t q = 0;
    while (q < w->run.n && prod < t) prod *= mesh->atom_size[w->run.a[q++]];
    if (prod != t) return false;
    run_append(&w->out[w->tj], w->run.a, q);
    memmove(w->run.a, w->run.a + q, (size_t)(w->run.n - q));
    w->run.n -= q;
    return true;
}

/* One step of partitioning.md A.5.  Returns 1 to continue, 0 done, -1 fail. */
static int walk_step(ReshapeWalk *w, const Mesh *mesh)
{
    if (w->run.n == 0 && w->atoms_after[w->si] == 0) return 0;
    if (w->tj >= w->to->rank) return -1;
    int64_t p = run_size(mesh, &w->run), s = w->ssz, t = w->tsz;
    if (p > 1 && s % p == 0 && t % p == 0) { /* the whole run sticks to this output dim */
        run_append(&w->out[w->tj], w->run.a, w->run.n);
        w->run.n = 0;
        w->ssz /= p;
        w->tsz /= p;
    } else if (s == t) {
        run_append(&w->out[w->tj], w->run.a, w->run.n);
        walk_next_source(w);
        walk_next_target(w);
    } else if (t == 1) {
        walk_next_target(w);
    } else if (s == 1) {
        walk_next_source(w); /* a split size-1 dim: its atoms become replicated */
    } else if (s > t) {       /* split: the run's major part goes to this dim */
        if (s % t != 0 || s % p != 0) return -1;
        if (p > 1 && !walk_split_prefix(w, mesh, t)) return -1;
        w->ssz /= t;
        walk_next_target(w);
    } else { /* merge with the next source dim */
        if (s % p != 0 || w->si >= w->from->rank) return -1;
        if (sharding_dim_n(w->s, w->si) > 0 && s != p) return -1; /* non-contiguous shard */
        w->ssz = s * w->from->dims[w->si];
        run_append(&w->run, sharding_dim_atoms(w->s, w->si), sharding_dim_n(w->s, w->si));
        w->si++;
    }
    return 1;
}

/* The tiling s of a value of shape `from` carried through a reshape to shape
 * `to` (partitioning.md A.5 on runs of atoms: a split keeps the run on the
 * major piece, a merge needs shard size 1 when the minor dim is split).
 * False if it cannot be carried or nothing stays split. */
static bool reshape_tiling(const Mesh *mesh, const Shape *from, const Sharding *s, const Shape *to, Sharding *out)
{
    if (s->kind != SHARDING_TILED || s->tile.rank != from->rank || shape_elem_count(from) != shape_elem_count(to) ||
        shape_elem_count(from) == 0)
        return false;
    ReshapeWalk w;
    memset(&w, 0, sizeof w);
    w.from = from;
    w.to = to;
    w.s = s;
    for (int32_t d = from->rank - 1; d >= 0; d--) w.atoms_after[d] = w.atoms_after[d + 1] + sharding_dim_n(s, d);
    walk_next_source(&w);
    w.tj = -1;
    walk_next_target(&w);
    int rc;
    for (int guard = 0; (rc = walk_step(&w, mesh)) == 1; guard++)
        if (guard > 4 * (SPMDC_MAX_RANK + SPMDC_MAX_ATOMS)) return false;
    if (rc < 0) return false;
    *out = sharding_tiled(to->rank);
    bool any = false;
    for (int32_t j = 0; j < to->rank; j++) {
        sharding_set_dim(out, j, w.out[j].a, w.out[j].n);
        any |= w.out[j].n > 0;
    }
    return any;
}

static void offer_reshaped(Prop *p, int32_t sl, const Shape *from, const Shape *to, int32_t dst)
{
    const Sharding *src = p->st[sl];
    if (!src) return;
    Sharding c;
    if (src->kind == SHARDING_MANUAL) improve(p, dst, src, true, sl);
    else if (shape_is_array(from) && shape_is_array(to) && reshape_tiling(p->mesh, from, src, to, &c))
        improve(p, dst, &c, false, sl);
}

static void fwd_reshape(Prop *p, int32_t i)
{
    int32_t o = inst(p, i)->operands[0];
    offer_reshaped(p, leaf(p, o), &inst(p, o)->shape, &inst(p, i)->shape, leaf(p, i));
}

static void bwd_reshape(Prop *p, int32_t u, const Edge *e)
{
    int32_t o = inst(p, u)->operands[e->slot];
    offer_reshaped(p, leaf(p, u), &inst(p, u)->shape, &inst(p, o)->shape, leaf(p, o));
}

/* ================================================================ rules: reduce */

/* Variadic reduce(inputs..., inits...): n_in inputs of one shape; out_src[j]
 * = input dim of output dim j, in_dst[d] = output dim of input dim d (-1
 * reduced).  False if malformed. */
static bool reduce_map(const Prop *p, int32_t i, int32_t *n_in, int32_t *out_src, int32_t *in_dst)
{
    const HloInst *in = inst(p, i);
    if (in->n_operands < 2 || in->n_operands % 2 != 0) return false;
    int32_t n = in->n_operands / 2;
    const Shape *is = &inst(p, in->operands[0])->shape;
    const IntList *dims = &hlo_attrs(in)->dimensions;
    if (!shape_is_array(is) || nleaves(p, i) != n) return false;
    for (int32_t k = 1; k < n; k++)
        if (!same_dims(is, &inst(p, in->operands[k])->shape)) return false;
    for (int32_t d = 0; d < is->rank; d++) in_dst[d] = 0;
    for (int32_t k = 0; k < dims->n; k++) {
        int64_t d = dims->v[k];
        if (d < 0 || d >= is->rank || in_dst[d] < 0) return false;
        in_dst[d] = -1;
    }
    int32_t r = 0;
    for (int32_t d = 0; d < is->rank; d++)
        if (in_dst[d] == 0) {
            out_src[r] = d;
            in_dst[d] = r++;
        }
    for (int32_t l = 0; l < n; l++) {
        const Shape *os = p->leaf_shape[leaf(p, i) + l];
        if (!shape_is_array(os) || os->rank != r) return false;
        for (int32_t j = 0; j < r; j++)
            if (os->dims[j] != is->dims[out_src[j]]) return false;
    }
    *n_in = n;
    return true;
}

static void fwd_reduce(Prop *p, int32_t i)
{
    int32_t n, out_src[SPMDC_MAX_RANK], in_dst[SPMDC_MAX_RANK];
    if (!reduce_map(p, i, &n, out_src, in_dst)) return;
    int32_t rank = p->leaf_shape[leaf(p, i)]->rank;
    for (int32_t k = 0; k < n; k++) {
        int32_t src = leaf(p, inst(p, i)->operands[k]);
        for (int32_t l = 0; l < n; l++) offer_mapped(p, src, out_src, rank, leaf(p, i) + l);
    }
}

static void bwd_reduce(Prop *p, int32_t u, const Edge *e)
{
    int32_t n, out_src[SPMDC_MAX_RANK], in_dst[SPMDC_MAX_RANK];
    if (!reduce_map(p, u, &n, out_src, in_dst) || e->slot >= n) return; /* init values: nothing */
    int32_t o = inst(p, u)->operands[e->slot];
    offer_mapped(p, leaf(p, u) + e->slot, in_dst, inst(p, o)->shape.rank, leaf(p, o));
}

/* ================================================================ rules: dot */

/* Dot dim maps.  Output dims: batch (lhs_batch order), lhs free, rhs free.
 * to_out[k][d]: output dim of operand k's dim d (-1 contracting);
 * to_other[k][d]: the other operand's dim paired with d (batch, contracting;
 * -1 free). */
typedef struct DotMap {
    int32_t to_out[2][SPMDC_MAX_RANK];
    int32_t to_other[2][SPMDC_MAX_RANK];
} DotMap;

/* Marks the listed dims of one operand (0: batch, 1: contracting) in role[]. */
static bool dot_roles(const IntList *l, int32_t rank, int8_t mark, int8_t *role, int32_t *idx)
{
    for (int32_t k = 0; k < l->n; k++) {
        int64_t d = l->v[k];
        if (d < 0 || d >= rank || role[d] != 2) return false;
        role[d] = mark;
        idx[d] = k;
    }
    return true;
}

static bool dot_map(const Prop *p, int32_t i, DotMap *dm)
{
    const HloInst *in = inst(p, i);
    if (in->n_operands != 2) return false;
    const HloAttrs *a = hlo_attrs(in);
    const Shape *s[2] = {&inst(p, in->operands[0])->shape, &inst(p, in->operands[1])->shape};
    const IntList *batch[2] = {&a->lhs_batch, &a->rhs_batch}, *contr[2] = {&a->lhs_contracting, &a->rhs_contracting};
    if (!shape_is_array(s[0]) || !shape_is_array(s[1]) || !shape_is_array(&in->shape) ||
        batch[0]->n != batch[1]->n || contr[0]->n != contr[1]->n)
        return false;
    int8_t role[2][SPMDC_MAX_RANK]; /* 0 batch, 1 contracting, 2 free */
    int32_t idx[2][SPMDC_MAX_RANK];
    int32_t nb = batch[0]->n, out = nb;
    for (int32_t k = 0; k < 2; k++) {
        memset(role[k], 2, sizeof role[k]);
        if (!dot_roles(batch[k], s[k]->rank, 0, role[k], idx[k]) ||
            !dot_roles(contr[k], s[k]->rank, 1, role[k], idx[k]))
            return false;
    }
    for (int32_t k = 0; k < 2; k++) {
        for (int32_t d = 0; d < s[k]->rank; d++) {
            int32_t o = role[k][d] == 0 ? idx[k][d] : role[k][d] == 2 ? out++ : -1;
            const IntList *pair = role[k][d] == 0 ? batch[1 - k] : contr[1 - k];
            dm->to_out[k][d] = o;
            dm->to_other[k][d] = role[k][d] == 2 ? -1 : (int32_t)pair->v[idx[k][d]];
            if (o >= in->shape.rank) return false;
            if (o >= 0 && in->shape.dims[o] != s[k]->dims[d]) return false;
            if (role[k][d] != 2 && s[1 - k]->dims[dm->to_other[k][d]] != s[k]->dims[d]) return false;
        }
    }
    return out == in->shape.rank;
}

/* Inverts a dim map of length n into dst-indexed form of length dst_rank. */
static void invert_map(const int32_t *to, int32_t n, int32_t dst_rank, int32_t *src_of)
{
    for (int32_t j = 0; j < dst_rank; j++) src_of[j] = -1;
    for (int32_t d = 0; d < n; d++)
        if (to[d] >= 0 && to[d] < dst_rank) src_of[to[d]] = d;
}

static void fwd_dot(Prop *p, int32_t i)
{
    DotMap dm;
    if (!dot_map(p, i, &dm)) return;
    const HloInst *in = inst(p, i);
    const Shape *s0 = &inst(p, in->operands[0])->shape, *s1 = &inst(p, in->operands[1])->shape;
    int32_t first = shape_byte_size(s1) > shape_byte_size(s0) ? 1 : 0; /* larger operand first */
    for (int32_t n = 0; n < 2; n++) {
        int32_t k = n == 0 ? first : 1 - first, o = in->operands[k], src_of[SPMDC_MAX_RANK];
        invert_map(dm.to_out[k], inst(p, o)->shape.rank, in->shape.rank, src_of);
        offer_mapped(p, leaf(p, o), src_of, in->shape.rank, leaf(p, i));
    }
}

/* Operand k from the output (batch, own free dims), then from the other
 * operand (batch and contracting dims pair up). */
static void bwd_dot(Prop *p, int32_t u, const Edge *e)
{
    DotMap dm;
    if (!dot_map(p, u, &dm) || e->slot > 1) return;
    const HloInst *in = inst(p, u);
    int32_t k = e->slot, o = in->operands[k], other = in->operands[1 - k];
    int32_t rank = inst(p, o)->shape.rank;
    offer_mapped(p, leaf(p, u), dm.to_out[k], rank, leaf(p, o));
    offer_mapped(p, leaf(p, other), dm.to_other[k], rank, leaf(p, o));
}

/* ================================================================ the table */

#define PASS(nm, f, b) {nm, RK_RULES, PH_PASS, PH_PASS, f, b}
#define ELEM PASS("elementwise", fwd_elementwise, bwd_elementwise)
#define LEAF {"leaf", RK_LEAF, PH_NEVER, PH_NEVER, NULL, NULL}
#define OPAQUE {"opaque", RK_OPAQUE, PH_NEVER, PH_NEVER, NULL, NULL}

static const Rule RULES[HLO_OPCODE_COUNT] = {
    [HLO_PARAMETER] = LEAF, [HLO_CONSTANT] = LEAF, [HLO_IOTA] = LEAF,
    [HLO_PARTITION_ID] = LEAF, [HLO_REPLICA_ID] = LEAF,
    [HLO_AFTER_ALL] = OPAQUE,
    [HLO_INFEED] = OPAQUE, [HLO_OUTFEED] = OPAQUE, [HLO_SEND] = OPAQUE, [HLO_SEND_DONE] = OPAQUE,
    [HLO_RECV] = OPAQUE, [HLO_RECV_DONE] = OPAQUE,
    [HLO_TUPLE] = PASS("tuple", fwd_tuple, bwd_tuple),
    [HLO_GET_TUPLE_ELEMENT] = PASS("get-tuple-element", fwd_gte, bwd_gte),
    [HLO_OPTIMIZATION_BARRIER] = PASS("identity", fwd_elementwise, bwd_elementwise),
    [HLO_COPY] = ELEM, [HLO_CONVERT] = ELEM, [HLO_BITCAST_CONVERT] = ELEM, [HLO_ABS] = ELEM,
    [HLO_NEGATE] = ELEM, [HLO_EXP] = ELEM, [HLO_EXPM1] = ELEM, [HLO_LOG] = ELEM, [HLO_LOG1P] = ELEM,
    [HLO_SQRT] = ELEM, [HLO_RSQRT] = ELEM, [HLO_CBRT] = ELEM, [HLO_TANH] = ELEM, [HLO_LOGISTIC] = ELEM,
    [HLO_SINE] = ELEM, [HLO_COSINE] = ELEM, [HLO_TAN] = ELEM, [HLO_ERF] = ELEM, [HLO_FLOOR] = ELEM,
    [HLO_CEIL] = ELEM, [HLO_ROUND_AFZ] = ELEM, [HLO_ROUND_EVEN] = ELEM, [HLO_SIGN] = ELEM, [HLO_NOT] = ELEM,
    [HLO_IS_FINITE] = ELEM, [HLO_POPCNT] = ELEM, [HLO_CLZ] = ELEM, [HLO_REAL] = ELEM, [HLO_IMAG] = ELEM,
    [HLO_ADD] = ELEM, [HLO_SUBTRACT] = ELEM, [HLO_MULTIPLY] = ELEM, [HLO_DIVIDE] = ELEM,
    [HLO_REMAINDER] = ELEM, [HLO_MAXIMUM] = ELEM, [HLO_MINIMUM] = ELEM, [HLO_POWER] = ELEM,
    [HLO_ATAN2] = ELEM, [HLO_AND] = ELEM, [HLO_OR] = ELEM, [HLO_XOR] = ELEM, [HLO_SHIFT_LEFT] = ELEM,
    [HLO_SHIFT_RIGHT_ARITHMETIC] = ELEM, [HLO_SHIFT_RIGHT_LOGICAL] = ELEM, [HLO_COMPARE] = ELEM,
    [HLO_COMPLEX] = ELEM, [HLO_SELECT] = ELEM, [HLO_CLAMP] = ELEM,
    [HLO_BROADCAST] = {"broadcast", RK_RULES, PH_BCAST_FWD, PH_BCAST_BWD, fwd_broadcast, bwd_broadcast},
    [HLO_RESHAPE] = PASS("reshape", fwd_reshape, bwd_reshape),
    [HLO_BITCAST] = OPAQUE,
    [HLO_TRANSPOSE] = PASS("transpose", fwd_transpose, bwd_transpose),
    [HLO_SLICE] = OPAQUE, [HLO_DYNAMIC_SLICE] = OPAQUE, [HLO_DYNAMIC_UPDATE_SLICE] = OPAQUE,
    [HLO_PAD] = OPAQUE, [HLO_CONCATENATE] = OPAQUE, [HLO_REVERSE] = OPAQUE, [HLO_GATHER] = OPAQUE,
    [HLO_SCATTER] = OPAQUE, [HLO_SORT] = OPAQUE, [HLO_TOPK] = OPAQUE,
    [HLO_DOT] = {"dot", RK_RULES, PH_ALL, PH_ALL, fwd_dot, bwd_dot},
    [HLO_CONVOLUTION] = OPAQUE,
    [HLO_REDUCE] = {"reduce", RK_RULES, PH_ALL, PH_ALL, fwd_reduce, bwd_reduce},
    [HLO_REDUCE_WINDOW] = OPAQUE, [HLO_SELECT_AND_SCATTER] = OPAQUE, [HLO_MAP] = OPAQUE,
    [HLO_RNG] = OPAQUE, [HLO_RNG_BIT_GENERATOR] = OPAQUE,
    [HLO_WHILE] = OPAQUE, [HLO_CONDITIONAL] = OPAQUE, [HLO_CALL] = OPAQUE,
    [HLO_CUSTOM_CALL] = PASS("custom-call", fwd_custom_call, bwd_custom_call),
    [HLO_ALL_REDUCE] = OPAQUE, [HLO_ALL_GATHER] = OPAQUE, [HLO_REDUCE_SCATTER] = OPAQUE,
    [HLO_ALL_TO_ALL] = OPAQUE, [HLO_COLLECTIVE_PERMUTE] = OPAQUE,
};

const char *propagate_rule_name(HloOpcode op)
{
    return (unsigned)op < HLO_OPCODE_COUNT ? RULES[op].name : NULL;
}

static bool is_opaque(const HloInst *in)
{
    if ((unsigned)in->op >= HLO_OPCODE_COUNT || !RULES[in->op].name) return true;
    int arity = hlo_opcode_arity(in->op);
    if (arity >= 0 && in->n_operands != arity) return true; /* malformed: no rule runs on it */
    if (in->op == HLO_CUSTOM_CALL) return !is_sharding_annotation(in);
    return RULES[in->op].kind == RK_OPAQUE;
}

/* ================================================================ setup */

static void collect_leaf_shapes(const Shape *s, const Shape **out, int32_t *n)
{
    if (!shape_is_tuple(s)) {
        out[(*n)++] = s;
        return;
    }
    for (int32_t k = 0; k < s->n_elems; k++) collect_leaf_shapes(&s->elems[k], out, n);
}

/* The propagated form of a user's leaf sharding: its tiling without partial
 * atoms, MANUAL, or NULL (replicated, maximal, nothing split, bad rank). */
static const Sharding *source_form(Prop *p, const Sharding *s, const Shape *sh)
{
    if (s->kind == SHARDING_MANUAL) return &MANUAL_SH;
    if (s->kind != SHARDING_TILED || !sharding_is_tiled(s) || !shape_is_array(sh) || s->tile.rank != sh->rank)
        return NULL;
    if (s->tile.partial == 0) return s;
    Sharding c = *s;
    c.tile.partial = 0;
    c.tile.kind = REDUCE_NONE;
    return persist(p, &c);
}

/* Leaf l of a bound sharding (a non-tuple one applies to every leaf), or NULL. */
static const Sharding *user_leaf(const Sharding *s, int32_t l)
{
    if (s->kind != SHARDING_TUPLE) return s;
    if (l >= s->n_elems || !s->elems || s->elems[l].kind == SHARDING_TUPLE) return NULL;
    return &s->elems[l];
}

/* Leaves, their shapes; operands in range (false if not). */
static bool setup_leaves(Prop *p)
{
    const HloComputation *c = p->c;
    int32_t n = c->n_insts, total = 0;
    p->leaf_base = ARENA_ARRAY(p->scratch, int32_t, n + 1);
    for (int32_t i = 0; i < n; i++) {
        for (int32_t k = 0; k < c->insts[i].n_operands; k++)
            if (c->insts[i].operands[k] < 0 || c->insts[i].operands[k] >= n) return false;
        p->leaf_base[i] = total;
        total += shape_leaf_count(&c->insts[i].shape);
    }
    p->leaf_base[n] = total;
    p->leaf_shape = ARENA_ARRAY(p->scratch, const Shape *, total + 1);
    p->st = ARENA_ARRAY(p->scratch, const Sharding *, total + 1);
    p->fixed = ARENA_ARRAY(p->scratch, uint8_t, total + 1);
    p->lorg = ARENA_ARRAY(p->scratch, int32_t, total + 1);
    p->aorg = ARENA_ARRAY(p->scratch, const int32_t *, total + 1);
    for (int32_t i = 0, k = 0; i < n; i++) collect_leaf_shapes(&c->insts[i].shape, p->leaf_shape, &k);
    return true;
}

/* Users in program order, with the tuple leaf offset of every slot. */
static void setup_edges(Prop *p)
{
    const HloComputation *c = p->c;
    int32_t n = c->n_insts;
    p->ustart = ARENA_ARRAY(p->scratch, int32_t, n + 1);
    for (int32_t i = 0; i < n; i++)
        for (int32_t k = 0; k < c->insts[i].n_operands; k++) p->ustart[c->insts[i].operands[k] + 1]++;
    for (int32_t i = 0; i < n; i++) p->ustart[i + 1] += p->ustart[i];
    p->edges = ARENA_ARRAY(p->scratch, Edge, p->ustart[n] + 1);
    int32_t *fill = ARENA_ARRAY(p->scratch, int32_t, n + 1);
    memcpy(fill, p->ustart, sizeof(int32_t) * (size_t)n);
    for (int32_t i = 0; i < n; i++) {
        int32_t off = 0;
        for (int32_t k = 0; k < c->insts[i].n_operands; k++) {
            int32_t o = c->insts[i].operands[k];
            p->edges[fill[o]++] = (Edge){i, k, off};
            off += nleaves(p, o);
        }
    }
}

/* aux[i] for every get-tuple-element: first leaf of element `index` in its
 * operand (-1 if malformed).  Prefix sums once per tuple operand. */
static void setup_gte(Prop *p)
{
    const HloComputation *c = p->c;
    int32_t n = c->n_insts;
    p->aux = ARENA_ARRAY(p->scratch, int32_t, n + 1);
    for (int32_t o = 0; o < n; o++) {
        const Shape *s = &c->insts[o].shape;
        int32_t *pre = NULL;
        for (int32_t e = p->ustart[o]; e < p->ustart[o + 1]; e++) {
            int32_t u = p->edges[e].user;
            if (c->insts[u].op != HLO_GET_TUPLE_ELEMENT) continue;
            int64_t idx = hlo_attrs(&c->insts[u])->index;
            p->aux[u] = -1;
            if (!shape_is_tuple(s) || idx < 0 || idx >= s->n_elems) continue;
            if (!pre) {
                pre = ARENA_ARRAY(p->scratch, int32_t, s->n_elems + 1);
                for (int32_t k = 0; k < s->n_elems; k++) pre[k + 1] = pre[k] + shape_leaf_count(&s->elems[k]);
            }
            p->aux[u] = pre[idx];
        }
    }
}

/* The per-atom origin table of instruction i's starting state: i itself
 * for an annotation; for a sharding an earlier propagation inferred, the
 * origins it recorded (dims of an array; else the whole); NULL if none. */
static const int32_t *seed_atom_origins(Prop *p, int32_t i, bool user)
{
    const HloInst *in = &p->c->insts[i];
    int32_t n = p->mesh->n_atoms, o = user ? i : in->sharding_origin;
    if (o >= p->c->n_insts) o = -1;
    const int32_t *dims = user || !shape_is_array(&in->shape) ? NULL : in->sharding_dim_origin;
    if (o < 0 && !dims) return NULL;
    int32_t *t = ARENA_ARRAY(p->scratch, int32_t, n > 0 ? n : 1);
    for (int32_t k = 0; k < n; k++) t[k] = o;
    const Sharding *s = in->sharding;
    for (int32_t d = 0; dims && s->kind == SHARDING_TILED && d < s->tile.rank && d < in->shape.rank; d++) {
        const int8_t *a = sharding_dim_atoms(s, d);
        int32_t od = dims[d] < p->c->n_insts ? dims[d] : -1;
        for (int32_t k = 0; k < sharding_dim_n(s, d); k++)
            if (a[k] >= 0 && a[k] < n) t[a[k]] = od;
    }
    return t;
}

/* Initial states: user annotations and forced-replicated leaves are fixed;
 * a non-user sharding already present seeds its leaves (with the origins
 * recorded for it). */
static void setup_states(Prop *p, bool is_entry)
{
    const HloComputation *c = p->c;
    p->opaque = ARENA_ARRAY(p->scratch, uint8_t, c->n_insts + 1);
    for (int32_t i = 0; i < c->n_insts; i++) {
        const HloInst *in = &c->insts[i];
        bool user = in->sharding_from_user && in->sharding;
        bool forced = !is_entry && (in->op == HLO_PARAMETER || i == c->root);
        const int32_t *table = NULL;
        bool seeded = false;
        p->opaque[i] = is_opaque(in);
        for (int32_t l = 0; l < nleaves(p, i); l++) {
            int32_t lf = leaf(p, i) + l;
            p->lorg[lf] = -1;
            if (user || (!p->opaque[i] && !forced && in->sharding)) {
                const Sharding *s = user_leaf(in->sharding, l);
                p->st[lf] = s ? source_form(p, s, p->leaf_shape[lf]) : NULL;
            }
            if (p->st[lf]) {
                if (!seeded) table = seed_atom_origins(p, i, user);
                seeded = true;
                p->lorg[lf] = user ? i : in->sharding_origin < c->n_insts ? in->sharding_origin : -1;
                p->aorg[lf] = table;
            }
            p->fixed[lf] = user || p->opaque[i] || forced;
        }
    }
}

/* ================================================================ driver */

static bool all_fixed(const Prop *p, int32_t i)
{
    for (int32_t lf = leaf(p, i); lf < leaf(p, i + 1); lf++)
        if (!p->fixed[lf]) return false;
    return true;
}

/* One forward sweep in program order, one backward sweep in reverse order. */
static void sweep(Prop *p)
{
    int32_t n = p->c->n_insts;
    for (int32_t i = 0; i < n; i++) {
        const Rule *r = &RULES[p->c->insts[i].op];
        if (!p->opaque[i] && r->fwd && p->phase >= r->fwd_phase && !all_fixed(p, i)) r->fwd(p, i);
    }
    for (int32_t o = n - 1; o >= 0; o--) {
        if (all_fixed(p, o)) continue;
        for (int32_t e = p->ustart[o]; e < p->ustart[o + 1]; e++) {
            int32_t u = p->edges[e].user;
            const Rule *r = &RULES[p->c->insts[u].op];
            if (!p->opaque[u] && r->bwd && p->phase >= r->bwd_phase) r->bwd(p, u, &p->edges[e]);
        }
    }
}

static void final_leaf(Sharding *out, const Sharding *st, const Shape *sh, bool named)
{
    if (!st) {
        *out = sharding_replicated();
        out->tile.rank = shape_is_array(sh) ? sh->rank : 0;
    } else {
        *out = *st;
        out->tile.partial = 0;
        out->tile.kind = REDUCE_NONE;
        out->n_elems = 0;
        out->elems = NULL;
        sharding_normalize(out);
    }
    out->named_form = named;
}

/* Writes every non-user instruction's sharding into the module arena. */
static void materialize(HloModule *m, HloComputation *c, const Prop *p, bool named)
{
    int32_t count = 0;
    for (int32_t i = 0; i < c->n_insts; i++) count += !(c->insts[i].sharding_from_user && c->insts[i].sharding);
    if (count == 0) return;
    Sharding *arr = ARENA_ARRAY(m->arena, Sharding, count);
    for (int32_t i = 0, j = 0; i < c->n_insts; i++) {
        HloInst *in = &c->insts[i];
        if (in->sharding_from_user && in->sharding) continue;
        Sharding *s = &arr[j++];
        int32_t nl = p ? nleaves(p, i) : shape_leaf_count(&in->shape);
        int32_t base = p ? leaf(p, i) : 0;
        if (shape_is_tuple(&in->shape)) {
            s->kind = SHARDING_TUPLE;
            s->n_elems = nl;
            s->named_form = named;
            s->elems = nl ? ARENA_ARRAY(m->arena, Sharding, nl) : NULL;
            const Shape **ls = p ? NULL : ARENA_ARRAY(m->arena, const Shape *, nl + 1);
            int32_t k = 0;
            if (ls) collect_leaf_shapes(&in->shape, ls, &k);
            for (int32_t l = 0; l < nl; l++)
                final_leaf(&s->elems[l], p ? p->st[base + l] : NULL, p ? p->leaf_shape[base + l] : ls[l], named);
        } else {
            final_leaf(s, p ? p->st[base] : NULL, &in->shape, named);
        }
        in->sharding = s;
    }
}

/* Per dim of array leaf lf's final state, the annotation that split it
 * (its major atom's origin), in the module arena; NULL when every split dim
 * came from the leaf's origin. */
static const int32_t *dim_origins(HloModule *m, const Prop *p, int32_t lf)
{
    const Sharding *s = p->st[lf];
    if (!s || s->kind != SHARDING_TILED || !p->aorg[lf]) return NULL;
    int32_t o[SPMDC_MAX_RANK];
    bool same = true;
    for (int32_t d = 0; d < s->tile.rank && d < SPMDC_MAX_RANK; d++) {
        int8_t a = sharding_dim_n(s, d) > 0 ? sharding_dim_atoms(s, d)[0] : -1;
        o[d] = a >= 0 && a < p->mesh->n_atoms ? p->aorg[lf][a] : -1;
        same &= sharding_dim_n(s, d) == 0 || o[d] == p->lorg[lf];
    }
    return same ? NULL : arena_memdup(m->arena, o, sizeof(int32_t) * (size_t)s->tile.rank);
}

/* Writes the provenance of every instruction: an annotation is its own
 * origin; an inferred sharding the origin of its first leaf that has one
 * (arrays: and per dim when the dims came from different annotations). */
static void record_origins(HloModule *m, HloComputation *c, const Prop *p)
{
    for (int32_t i = 0; i < c->n_insts; i++) {
        HloInst *in = &c->insts[i];
        in->sharding_origin = in->sharding_from_user && in->sharding ? i : -1;
        in->sharding_dim_origin = NULL;
        if (!p || in->sharding_origin >= 0) continue;
        for (int32_t lf = leaf(p, i); lf < leaf(p, i + 1) && in->sharding_origin < 0; lf++)
            if (p->st[lf]) in->sharding_origin = p->lorg[lf];
        if (shape_is_array(&in->shape) && nleaves(p, i) == 1) in->sharding_dim_origin = dim_origins(m, p, leaf(p, i));
    }
}

static void propagate_computation(HloModule *m, int32_t ci, Arena *scratch, bool named)
{
    HloComputation *c = &m->comps[ci];
    Prop p;
    memset(&p, 0, sizeof p);
    p.c = c;
    p.mesh = &m->mesh;
    p.scratch = scratch;
    if (!m->has_mesh || !setup_leaves(&p)) {
        materialize(m, c, NULL, named);
        record_origins(m, c, NULL);
        return;
    }
    setup_edges(&p);
    setup_gte(&p);
    setup_states(&p, c->is_entry || ci == m->entry);
    for (p.phase = 0; p.phase < PH_COUNT; p.phase++) {
        for (int s = 0; s < MAX_SWEEPS; s++) {
            p.changed = false;
            sweep(&p);
            if (!p.changed) break;
        }
    }
    materialize(m, c, &p, named);
    record_origins(m, c, &p);
}

/* Whether the input wrote its shardings in the named (mesh) form. */
static bool module_uses_named_form(const HloModule *m)
{
    for (int32_t ci = 0; ci < m->n_comps; ci++)
        for (int32_t i = 0; i < m->comps[ci].n_insts; i++) {
            const HloInst *in = &m->comps[ci].insts[i];
            if (!in->sharding_from_user || !in->sharding) continue;
            const Sharding *s = in->sharding;
            if (s->named_form || (s->kind == SHARDING_TUPLE && s->n_elems > 0 && s->elems[0].named_form))
                return true;
        }
    return false;
}

bool propagate_shardings(HloModule *m, PassCtx *cx)
{
    Arena *own = cx && cx->scratch ? NULL : arena_create();
    Arena *scratch = own ? own : cx->scratch;
    bool named = module_uses_named_form(m);
    for (int32_t ci = 0; ci < m->n_comps; ci++) propagate_computation(m, ci, scratch, named);
    arena_destroy(own);
    return true;
}
