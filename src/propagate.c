/* propagate.c - sharding propagation over the whole module, on the op-rule
 * registry (see propagate.h and docs/propagation.md).
 *
 * Values are the array leaves of every instruction of every computation,
 * numbered module-wide ("leaves").  The state of a leaf is nothing yet,
 * MANUAL, or a Tiling (per dim a run of mesh atoms).  States only grow: a
 * dim's run is extended by atoms minor to it, never re-tiled, so every leaf
 * changes at most once per mesh atom and the whole pass is linear in the
 * module's size (times the atom count).
 *
 * Edges:
 *  - a factor op (oprule_class RULE_FACTORS) connects its array operands and
 *    result leaves through its rule (oprule.h): every tensor's state is
 *    projected onto the factors, runs are merged per factor (the longest run
 *    every giver's run is a prefix of), and the merged factor sharding is
 *    projected back onto the tensors that may still grow;
 *  - leaf-identity ops (tuple, get-tuple-element, opt-barrier, Sharding
 *    custom-call) and the data-flow ties of while / conditional / call
 *    connect single leaves (an identity edge per leaf pair), so a tuple of N
 *    leaves costs O(N);
 *  - the borders of a partially manual region (SPMDFullToShardShape,
 *    SPMDShardToFullShape) connect their operand and result dim by dim, and
 *    only the region's automatic atoms cross them (propose_border).
 * Partially manual values (inside a shard_map over some mesh axes) are
 * tilings over the automatic atoms; the atoms along which a leaf is manual
 * (lman, setup_manual) are forbidden on it and kept in its final sharding.
 * Which factors flow when follows Shardy's schedule (oprule_factor_flow):
 * phase 0 pass-through ops, phase 1 also every op's pass-through factors
 * (broadcast backward only), phase 2 everything; and user priorities
 * (`p<N>` on a dim, none = p0) wrap the phases in rounds, lowest N first:
 * in round N a dim of priority > N is empty, closed, and its atoms are
 * replicated on that value.
 *
 * Order independence: each phase is a sequence of steps.  A step evaluates
 * every edge next to a leaf that changed in the previous step against the
 * states at the start of the step, collects the proposals, and applies them
 * leaf by leaf at the end; several proposals for one leaf are merged as a
 * set (compatible ones together, a conflict by the cost model and the
 * written tie break), so the result depends on the graph, never on the
 * order of instructions in the file.  A value keeps what reached it first
 * (in steps, i.e. by distance from the annotations); later proposals only
 * extend it.
 *
 * Conflicts (two givers disagree on a factor, or one atom wanted by two
 * factors) are decided per op by the bytes each candidate factor sharding
 * makes the op's tensors move (reshard_cost, the report's cost model):
 * candidates are each giver's own factor sharding completed by the
 * compatible factors of the others; ties go to more tiles, then to the
 * candidate that splits the lowest-numbered factor (the most major dim of
 * the first operand) with the lexicographically smallest atoms.
 *
 * Provenance: each leaf remembers the annotation its first state came from
 * (lorg), per mesh atom the annotation that atom came from (aorg, shared
 * between leaves until a state grows from two sources), and the leaf and
 * instruction its first state came through (from, via) for --explain.
 */
#include "spmdc/propagate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spmdc/oprule.h"
#include "spmdc/reshard.h"
#include "spmdc/texttable.h"

enum { ST_NONE = 0, ST_MANUAL = 1, ST_FIRST = 2 };
enum { LF_FIXED = 1, LF_EXTENDED = 2 };
/* iflag bits: factor op; results fixed; an array (one leaf); its last
 * evaluation left nothing for a later phase to add; an identity edge's
 * instruction (tuple, get-tuple-element, ... and data-flow ops); a factor
 * op whose rule is the identity map (oprule_identity_map) */
enum { IF_FACTOR = 1, IF_FIXED = 2, IF_ARRAY = 4, IF_SETTLED = 8, IF_IDENTITY_EDGE = 16, IF_IDMAP = 32, IF_TIER_SHIFT = 6 };
enum { N_PHASES = 3 };
/* Per-op temporaries of ops with many tensors go to their own arena,
 * emptied once it holds this much. */
#define RULE_ARENA_LIMIT (1u << 20)

/* A user annotation on array leaves (one per distinct bound sharding and
 * rank: leaves share it). */
typedef struct Ann {
    Tiling t;                     /* as written, without partial atoms */
    uint32_t open;                /* dims propagation may extend */
    uint32_t forbid;              /* atoms never used on this value: replicated= and partial ones */
    uint8_t prio[SPMDC_MAX_RANK]; /* per dim N of p<N> (0 when none) */
} Ann;

/* A state offered to a leaf during a step. */
typedef struct Proposal {
    Tiling t;
    int32_t leaf;
    int32_t src;          /* leaf whose state it carries */
    int32_t via;          /* global instruction it came through */
    int32_t lorg;         /* annotation the source's state came from */
    const int32_t *aorg;  /* per-atom origins of its atoms (NULL: lorg for all) */
    int32_t pst;          /* t's pool index when known (a replayed evaluation; a tiling that splits
                             some dim), else ST_NONE */
    bool manual;
    bool consumer;        /* the leaf is an operand of `via` (else its result or an identity) */
    int32_t alt, n_alt;   /* an op that weighed a conflict: its candidates' states for the leaf and
                             their costs, alts[alt .. alt + n_alt) (apply_leaf); n_alt 0 otherwise */
} Proposal;

/* What an op that weighed a conflict would give one of its tensors under
 * one of its candidates, and the bytes the op moves under that candidate. */
typedef struct Alt {
    Tiling t;
    int64_t cost;
} Alt;

/* One candidate of a conflict: a factor sharding of op `inst` (op-level)
 * or a tiling of one leaf (value-level), and the bytes it costs. */
typedef struct Cand {
    FactorSharding fs;
    Tiling t;
    int64_t cost;
} Cand;

typedef struct Conflict {
    int32_t inst;   /* op-level: the op; value-level: the value's instruction */
    int32_t leaf;   /* value-level: the leaf; op-level: -1 */
    int32_t first;  /* index of its first candidate in cands */
    int32_t n, chosen;
} Conflict;

typedef struct Engine {
    HloModule *m;
    const Mesh *mesh;
    Arena *a;       /* lives through the pass */
    LeafMemo gte_leaves; /* leaf offsets of the last tuple a get-tuple-element read (in a) */
    Arena *ra;      /* op rules */
    int32_t n_atoms;
    /* instructions: global index gi = comp_first[c] + i */
    int32_t n_comps, n_insts;
    int32_t *comp_first; /* [n_comps + 1] */
    int32_t *icomp;      /* [n_insts] */
    uint8_t *iflag;      /* IF_* | tier << IF_TIER_SHIFT */
    int32_t *leaf0;      /* [n_insts + 1] */
    int32_t *ustart, *users; /* factor-op users of each instruction (CSR, global indices) */
    int32_t *special, n_special; /* identity and data-flow instructions, in order */
    int32_t *opl_start, *opl; /* factor ops: the first leaf of each operand (CSR over instructions) */
    int32_t *sid;        /* [n_insts]: shape id, equal for equal array shapes (type and dims) */
    int32_t *rid;        /* [n_insts]: factor ops' index into rules, -1 */
    /* The op rules, one per distinct (opcode, attributes, operand and result
     * shapes): built on first use (rstate 0 unbuilt, 1 built, 2 no rule). */
    OpRule *rules;
    uint8_t *rstate;
    int32_t *rfirst;     /* an instruction of each rule, which builds it */
    int32_t n_rules, cap_rules;
    Arena *rules_arena;
    int32_t *sharded, n_sharded; /* instructions that carry a sharding, in order */
    int32_t *op_stamp;   /* [n_insts]: step in which the op was last activated (steps count from 1), 0 */
    /* leaves */
    int32_t n_leaves;
    const Shape **lshape;
    int8_t *lrank;       /* rank of each leaf (a copy: the hot paths do not touch the IR) */
    int32_t *linst;
    int32_t *st;         /* ST_NONE, ST_MANUAL or an index into pool */
    uint8_t *lfl;
    int32_t *annx;       /* 1 + index into anns, 0 (leaf_ann reads it) */
    int32_t *nstart, *nbr, *nvia; /* identity neighbours (CSR) and the instruction of each edge */
    int32_t *bstart, *bnbr, *bvia; /* the same for the manual-region borders; NULL when there are none */
    uint32_t *lman;      /* atoms along which each leaf is partially manual; NULL when no value is */
    bool any_manual_atoms; /* some annotation has manual_atoms (setup_states) */
    int32_t *lorg;
    int32_t *from, *via; /* 1 + the leaf the first state came from, 0; the instruction it came through */
    const int32_t **aorg;
    int32_t *stamp;      /* 1 + the round in which the leaf was last put on the changed list, 0 */
    int32_t *pend;       /* first pending proposal, 0 (props[0] is never one) */
    /* growing arrays (heap) */
    Tiling *pool;          /* interned tilings: pool[0], pool[1] unused (ST_NONE, ST_MANUAL) */
    uint32_t *pused;       /* [cap_pool]: tiling_used of each */
    int32_t n_pool, cap_pool;
    int32_t *htab;         /* open-addressing hash of pool indices, -1 = free */
    uint32_t hcap;
    Ann *anns;
    int32_t n_anns, cap_anns;
    uint32_t *ann_closed, *ann_forbid; /* [n_anns]: in the current round (round_closures) */
    Proposal *props;             /* in the pass's arena (e->a) */
    /* [cap_props]: the next (older) proposal for the same leaf, 0; apart
     * from props, so that walking a leaf's list reads 4 bytes a proposal
     * (a value many ops use has one from each, spread over the step's) */
    int32_t *pnext;
    int32_t n_props, cap_props;
    int32_t *touched, n_touched, cap_touched;
    int32_t *front, n_front, cap_front;
    int32_t *front_cause;   /* [cap_front]: the op whose proposal the leaf took exactly, -1 */
    Proposal **pbuf;        /* one leaf's proposals while they are merged */
    int32_t cap_pbuf;
    int32_t *changed, n_changed, cap_changed;
    int32_t *ops, n_ops, cap_ops;
    int32_t *ops_scratch, cap_ops_scratch; /* scratch of the ops' sort */
    Conflict *conf;
    int32_t n_conf, cap_conf;
    Cand *cands;
    int32_t n_cands, cap_cands;
    Alt *alts;              /* the step's proposals' alternatives (Proposal.alt) */
    int32_t n_alts, cap_alts;
    /* evaluations of factor ops remembered by what they read (eval_op) */
    struct MemoEntry *memo;
    int32_t n_memo, cap_memo;
    int32_t *memo_slot;     /* open addressing over memo, -1 = free */
    uint32_t memo_cap;
    struct MemoProp *mprops;
    int32_t n_mprops, cap_mprops;
    /* the schedule */
    int32_t phase, prio, round, step;
    int32_t act_key;         /* phase * 2 + start of act, -1 */
    bool act[256];           /* per iflag value: a factor op active in this step (set_activation) */
    /* the replicated tiling of each rank, which cur_tiling copies whole for a
     * leaf with no state: one made there (a memset, then a byte store of the
     * rank) would be read back at once by 16-byte loads that wait for the
     * byte store to retire instead of taking its value forwarded */
    Tiling repl[SPMDC_MAX_RANK + 1];
    /* statistics */
    int64_t n_evals, n_steps;
} Engine;

#define GROW(arr, n, cap)                                                                                          \
    do {                                                                                                           \
        if ((n) >= (cap)) {                                                                                        \
            (cap) = (cap) ? (cap) * 2 : 64;                                                                        \
            (arr) = xrealloc((arr), sizeof(*(arr)) * (size_t)(cap));                                               \
        }                                                                                                          \
    } while (0)

/* ================================================================ small helpers */

static const HloInst *ginst(const Engine *e, int32_t gi)
{
    int32_t c = e->icomp[gi];
    return &e->m->comps[c].insts[gi - e->comp_first[c]];
}

static PropTier itier(const Engine *e, int32_t gi) { return (PropTier)(e->iflag[gi] >> IF_TIER_SHIFT); }

static bool prefix_of(const int8_t *a, int32_t na, const int8_t *b, int32_t nb)
{
    if (na > nb)
        return false;
    for (int32_t k = 0; k < na; k++) /* a few bytes: no library call */
        if (a[k] != b[k])
            return false;
    return true;
}

static int32_t leaf_rank(const Engine *e, int32_t lf) { return e->lrank[lf]; }

/* The annotation of leaf lf: an index into anns, -1 if none. */
static int32_t leaf_ann(const Engine *e, int32_t lf) { return e->annx[lf] - 1; }

/* Whether leaf lf is an array (the shape is read only for tuple leaves). */
static bool leaf_is_array(const Engine *e, int32_t lf)
{
    int32_t gi = e->linst[lf];
    return e->sid[gi] >= 0 || shape_is_array(e->lshape[lf]);
}

static bool has_tiling(const Engine *e, int32_t lf) { return e->st[lf] >= ST_FIRST; }

static const Tiling *state(const Engine *e, int32_t lf) { return &e->pool[e->st[lf]]; }

static uint64_t hash_mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ull + (h >> 31); }

static uint32_t tiling_hash(const Tiling *t)
{
    uint32_t h = 2166136261u;
    int32_t total = tiling_n_atoms(t);
    h = (h ^ (uint8_t)t->rank) * 16777619u;
    for (int32_t d = 0; d < t->rank; d++)
        h = (h ^ t->n[d]) * 16777619u;
    for (int32_t k = 0; k < total; k++)
        h = (h ^ (uint8_t)t->atoms[k]) * 16777619u;
    if (total != 0 || t->partial) /* tiling_equal reads the device order only then */
        h = (h ^ (uint32_t)t->perm) * 16777619u;
    return h;
}

static void pool_rehash(Engine *e)
{
    uint32_t cap = e->hcap ? e->hcap * 2 : 1024;
    free(e->htab);
    e->htab = xmalloc(sizeof(int32_t) * cap);
    memset(e->htab, 0xff, sizeof(int32_t) * cap);
    e->hcap = cap;
    for (int32_t k = ST_FIRST; k < e->n_pool; k++) {
        uint32_t h = tiling_hash(&e->pool[k]) & (cap - 1);
        while (e->htab[h] >= 0)
            h = (h + 1) & (cap - 1);
        e->htab[h] = k;
    }
}

/* The pool index of tiling t (interned: equal tilings share one index, so
 * states are compared by index and the final shardings are made once per
 * distinct tiling).  t carries no pending reduction. */
static int32_t pool_add(Engine *e, const Tiling *t)
{
    if (e->n_pool >= e->cap_pool) {
        e->cap_pool = e->cap_pool ? e->cap_pool * 2 : 64;
        e->pool = xrealloc(e->pool, sizeof(Tiling) * (size_t)e->cap_pool);
        e->pused = xrealloc(e->pused, sizeof(uint32_t) * (size_t)e->cap_pool);
    }
    if (e->n_pool < ST_FIRST) { /* the ST_NONE and ST_MANUAL slots */
        tiling_replicated(&e->pool[e->n_pool], 0);
        e->pused[e->n_pool] = 0;
        return e->n_pool++;
    }
    if ((uint32_t)e->n_pool * 2 >= e->hcap)
        pool_rehash(e);
    uint32_t h = tiling_hash(t) & (e->hcap - 1);
    for (; e->htab[h] >= 0; h = (h + 1) & (e->hcap - 1))
        if (tiling_equal(&e->pool[e->htab[h]], t))
            return e->htab[h];
    tiling_replicated(&e->pool[e->n_pool], t->rank);
    for (int32_t d = 0; d < t->rank; d++)
        tiling_set_dim(&e->pool[e->n_pool], d, tiling_dim(t, d), tiling_dim_n(t, d));
    e->pool[e->n_pool].perm = t->perm;
    e->pused[e->n_pool] = tiling_used(t);
    e->htab[h] = e->n_pool;
    return e->n_pool++;
}

/* The current state of leaf lf as a tiling (replicated when it has none). */
static Tiling cur_tiling(const Engine *e, int32_t lf)
{
    if (has_tiling(e, lf))
        return *state(e, lf);
    int32_t rank = leaf_rank(e, lf);
    SPMDC_ASSERT(rank >= 0 && rank <= SPMDC_MAX_RANK);
    return e->repl[rank];
}

static uint32_t dims_mask(int32_t rank) { return rank >= 32 ? 0xffffffffu : (1u << rank) - 1; }

/* Per annotation, the dims it closes and the atoms it forbids in round
 * priority e->prio (an annotation's leaves have its rank): a dim is closed
 * when it is not open or its priority comes later, and the atoms of a
 * later dim are kept off until then.  Made once per round (run). */
static void round_closures(Engine *e)
{
    for (int32_t x = 0; x < e->n_anns; x++) {
        const Ann *an = &e->anns[x];
        uint32_t closed = ~an->open & dims_mask(an->t.rank), f = an->forbid;
        for (int32_t d = 0; d < an->t.rank; d++)
            if (an->prio[d] > e->prio) {
                closed |= 1u << d;
                const int8_t *a = tiling_dim(&an->t, d);
                for (int32_t k = 0; k < tiling_dim_n(&an->t, d); k++)
                    f |= 1u << a[k];
            }
        e->ann_closed[x] = closed;
        e->ann_forbid[x] = f;
    }
}

/* Dims of leaf lf propagation may not extend in the current round. */
static uint32_t leaf_closed(const Engine *e, int32_t lf)
{
    if (e->lfl[lf] & LF_FIXED)
        return dims_mask(leaf_rank(e, lf));
    return leaf_ann(e, lf) < 0 ? 0 : e->ann_closed[leaf_ann(e, lf)];
}

/* Atoms propagation may not put on leaf lf in the current round: its
 * manual atoms, and what its annotation keeps off. */
static uint32_t leaf_forbid(const Engine *e, int32_t lf)
{
    uint32_t f = e->lman ? e->lman[lf] : 0;
    return leaf_ann(e, lf) < 0 ? f : f | e->ann_forbid[leaf_ann(e, lf)];
}

/* cur extended towards want: per open dim whose run is a major prefix of
 * want's, want's further atoms are appended while they are allowed on the
 * leaf (not forbidden, not used by another dim); a dim the tiles do not
 * divide is padded (tiling.h).  A split value keeps its device order
 * (Tiling.perm): it grows only from a tiling in the same order, and an
 * unsplit one takes want's.  True iff *out differs from cur. */
static bool extend_leaf(const Engine *e, int32_t lf, const Tiling *cur, const Tiling *want, Tiling *out)
{
    *out = *cur;
    if (want->rank != cur->rank || (e->lfl[lf] & LF_FIXED))
        return false;
    bool fresh = tiling_n_atoms(cur) == 0;
    if (!fresh && want->perm != cur->perm)
        return false;
    uint32_t closed = leaf_closed(e, lf), used = tiling_used(cur) | leaf_forbid(e, lf);
    bool changed = false;
    for (int32_t d = 0; d < cur->rank; d++) {
        int32_t cn = tiling_dim_n(cur, d), wn = tiling_dim_n(want, d);
        if ((closed >> d) & 1u || wn <= cn)
            continue;
        const int8_t *ca = tiling_dim(cur, d), *wa = tiling_dim(want, d);
        if (!prefix_of(ca, cn, wa, wn))
            continue;
        int8_t run[SPMDC_MAX_ATOMS];
        memcpy(run, wa, (size_t)wn);
        int32_t n = cn;
        while (n < wn && !((used >> wa[n]) & 1u))
            used |= 1u << wa[n++];
        if (n > cn) {
            tiling_set_dim(out, d, run, n);
            changed = true;
        }
    }
    if (changed && fresh)
        out->perm = want->perm;
    return changed;
}

/* Per dim one run a prefix of the other's, the longer runs together use no
 * atom twice, and both split tilings hold the same device order; *u (may
 * be NULL) gets that union. */
static bool compatible(const Tiling *a, const Tiling *b, Tiling *u)
{
    if (a->rank != b->rank)
        return false;
    int32_t na = tiling_n_atoms(a), nb = tiling_n_atoms(b);
    bool sa = na > 0, sb = nb > 0;
    if (sa && sb && a->perm != b->perm)
        return false;
    if (!sa || !sb) { /* one side unsplit: the other's runs, when no atom repeats */
        const Tiling *s = sa ? a : b;
        int32_t ns = sa ? na : nb;
        uint32_t used = 0;
        for (int32_t k = 0; k < ns; k++) {
            if ((used >> s->atoms[k]) & 1u)
                return false;
            used |= 1u << s->atoms[k];
        }
        if (u) {
            Tiling r;
            memset(&r, 0, sizeof r);
            r.rank = a->rank;
            r.perm = s->perm;
            memcpy(r.n, s->n, (size_t)a->rank);
            memcpy(r.atoms, s->atoms, (size_t)ns);
            *u = r;
        }
        return true;
    }
    Tiling r;
    tiling_replicated(&r, a->rank);
    r.perm = sa ? a->perm : b->perm;
    uint32_t used = 0;
    for (int32_t d = 0, pa = 0, pb = 0, pr = 0; d < a->rank; d++) {
        const int8_t *x = a->atoms + pa, *y = b->atoms + pb;
        int32_t nx = a->n[d], ny = b->n[d];
        pa += nx;
        pb += ny;
        if (nx < ny ? !prefix_of(x, nx, y, ny) : !prefix_of(y, ny, x, nx))
            return false;
        const int8_t *l = nx < ny ? y : x;
        int32_t nl = nx < ny ? ny : nx;
        for (int32_t k = 0; k < nl; k++) {
            if ((used >> l[k]) & 1u)
                return false;
            used |= 1u << l[k];
            r.atoms[pr++] = l[k];
        }
        r.n[d] = (uint8_t)nl;
    }
    if (u)
        *u = r;
    return true;
}

/* Canonical order of tilings: fewer atoms on dim 0 last... precisely: per
 * dim in order, more atoms first, then smaller atoms first. */
static int tiling_order(const Tiling *a, const Tiling *b)
{
    for (int32_t d = 0; d < a->rank && d < b->rank; d++) {
        int32_t na = tiling_dim_n(a, d), nb = tiling_dim_n(b, d);
        if (na != nb)
            return na > nb ? -1 : 1;
        int c = memcmp(tiling_dim(a, d), tiling_dim(b, d), (size_t)na);
        if (c)
            return c;
    }
    if (a->rank != b->rank)
        return a->rank - b->rank;
    return (int)a->perm - (int)b->perm;
}

static int64_t tiling_tiles(const Tiling *t, const Mesh *m)
{
    return mesh_mask_size(m, tiling_used(t));
}

static int64_t add_cost(int64_t a, int64_t b)
{
    int64_t r = a + b;
    return r > RESHARD_INF_COST ? RESHARD_INF_COST : r;
}

/* ================================================================ proposals */

/* A proposal to leaf: the caller sets its state (t), src, via and lorg. */
static Proposal *new_proposal(Engine *e, int32_t leaf)
{
    if (e->n_props >= e->cap_props) { /* in the pass's arena: its pages serve the next pass (pages.h) */
        int32_t cap = e->cap_props ? e->cap_props * 2 : 64;
        e->props = arena_realloc(e->a, e->props, sizeof(Proposal) * (size_t)e->cap_props,
                                 sizeof(Proposal) * (size_t)cap, _Alignof(Proposal));
        e->pnext = arena_realloc(e->a, e->pnext, sizeof(int32_t) * (size_t)e->cap_props, sizeof(int32_t) * (size_t)cap,
                                 _Alignof(int32_t));
        e->cap_props = cap;
    }
    Proposal *p = &e->props[e->n_props];
    p->aorg = NULL;
    p->pst = ST_NONE;
    p->manual = p->consumer = false;
    p->alt = p->n_alt = 0;
    p->leaf = leaf;
    e->pnext[e->n_props] = e->pend[leaf];
    if (e->pend[leaf] == 0) {
        GROW(e->touched, e->n_touched, e->cap_touched);
        e->touched[e->n_touched++] = leaf;
    }
    e->pend[leaf] = e->n_props++;
    return p;
}

/* Leaf dst offered state t, taken whole from leaf src through op via (the
 * origins are src's). */
static void propose_from(Engine *e, int32_t dst, const Tiling *t, int32_t src, int32_t via)
{
    Proposal *p = new_proposal(e, dst);
    p->t = *t;
    p->src = src;
    p->via = via;
    p->lorg = e->lorg[src];
    p->aorg = e->aorg[src];
}

static void propose_manual(Engine *e, int32_t leaf, int32_t src, int32_t via)
{
    if ((e->lfl[leaf] & LF_FIXED) || e->st[leaf] == ST_MANUAL || leaf_ann(e, leaf) >= 0)
        return;
    Proposal *p = new_proposal(e, leaf);
    memset(&p->t, 0, sizeof p->t);
    p->manual = true;
    p->src = src;
    p->via = via;
    p->lorg = e->lorg[src];
}

/* Identity edge: leaf dst offered the state of leaf src. */
static void propose_identity(Engine *e, int32_t src, int32_t dst, int32_t via)
{
    if (e->lfl[dst] & LF_FIXED || e->st[dst] == ST_MANUAL)
        return;
    if (e->st[src] == ST_MANUAL) {
        propose_manual(e, dst, src, via);
        return;
    }
    if (!has_tiling(e, src))
        return;
    Tiling cur = cur_tiling(e, dst), out;
    if (!extend_leaf(e, dst, &cur, state(e, src), &out))
        return;
    propose_from(e, dst, &out, src, via);
}

/* Border edge of a partially manual region (SPMDFullToShardShape /
 * SPMDShardToFullShape, via): leaf dst offered the state of leaf src from
 * the other side.  The dims map one to one and only automatic atoms cross:
 * to the local side (the one manual along more atoms, M) src's runs less
 * its manual atoms; to the full side, per dim the atoms of M dst already
 * has (the manual layout: major) followed by src's run.  Nothing crosses a
 * fully manual border (its local side is ST_MANUAL). */
static void propose_border(Engine *e, int32_t src, int32_t dst, int32_t via)
{
    if (!e->lman || !has_tiling(e, src) || (e->lfl[dst] & LF_FIXED) || e->st[dst] == ST_MANUAL)
        return;
    uint32_t to_local = e->lman[dst] & ~e->lman[src], to_full = e->lman[src] & ~e->lman[dst];
    const Tiling *s = state(e, src);
    Tiling cur = cur_tiling(e, dst), want, out;
    if ((to_local != 0) == (to_full != 0) || s->rank != cur.rank)
        return;
    tiling_replicated(&want, s->rank);
    for (int32_t d = 0; d < s->rank; d++) {
        int8_t run[SPMDC_MAX_ATOMS];
        int32_t n = 0;
        for (int32_t k = 0; to_full && k < tiling_dim_n(&cur, d); k++)
            if ((to_full >> tiling_dim(&cur, d)[k]) & 1u)
                run[n++] = tiling_dim(&cur, d)[k];
        for (int32_t k = 0; k < tiling_dim_n(s, d); k++)
            if (!((e->lman[dst] >> tiling_dim(s, d)[k]) & 1u))
                run[n++] = tiling_dim(s, d)[k];
        tiling_set_dim(&want, d, run, n);
    }
    want.perm = s->perm;
    if (!tiling_valid(&want) || !extend_leaf(e, dst, &cur, &want, &out))
        return;
    propose_from(e, dst, &out, src, via);
}

/* ================================================================ factor ops */

/* Tensor k's leaf of the op at global index gi. */
static int32_t tensor_leaf(const Engine *e, int32_t gi, const OpRule *r, int32_t k)
{
    const RuleTensor *t = &r->t[k];
    if (t->slot >= 0)
        return e->opl[e->opl_start[gi] + t->slot];
    return e->leaf0[gi] + t->leaf;
}

/* The rule of factor op gi (shared by every op with the same opcode,
 * attributes and shapes), or NULL when it has none. */
static const OpRule *rule_of(Engine *e, int32_t gi)
{
    int32_t x = e->rid[gi];
    if (x < 0)
        return NULL;
    if (e->rstate[x] == 0) {
        int32_t g = e->rfirst[x], c = e->icomp[g];
        e->rstate[x] = oprule_build(e->m, c, g - e->comp_first[c], e->rules_arena, &e->rules[x]) ? 1 : 2;
    }
    return e->rstate[x] == 1 ? &e->rules[x] : NULL;
}

typedef struct OpEval {
    const OpRule *r;
    int32_t gi, nt;
    PropTier tier;
    int32_t *lf;          /* [nt] */
    FactorSharding *fs;   /* [nt]: projections of the tensors with a tiling */
    bool *has;            /* [nt] */
    uint64_t *gives, *takes; /* [nt]: bit f: tensor k gives / takes factor f in this phase */
    uint16_t perm;        /* the device order of the split tensors when they share one, else 0 */
} OpEval;

static void flow(const Engine *e, const OpEval *o, int32_t k, int32_t f, bool *gives, bool *takes)
{
    (void)e;
    *gives = (o->gives[k] >> f) & 1u;
    *takes = (o->takes[k] >> f) & 1u;
}

/* The tiling F gives tensor k (dims F cannot tile are left unsplit); with
 * only: restricted to the factors k may take. */
static Tiling project(const Engine *e, const OpEval *o, int32_t k, const FactorSharding *F, bool only_takes)
{
    FactorSharding g;
    if (only_takes) {
        /* a permutation or window factor has the extent of each tensor's
         * dim: a run is taken only where its tiles divide the dim (a slice of
         * 61 of 64 columns, or a convolution's 3 output rows computed from
         * 32 input rows, stays whole) */
        uint64_t fits = ~(uint64_t)0;
        for (int32_t d = 0; d < o->r->t[k].rank; d++) {
            if (oprule_dim_n(o->r, k, d) != 1)
                continue;
            int32_t f = oprule_dim_factor(o->r, k, d, 0);
            FactorKind kind = (FactorKind)o->r->factors[f].kind;
            if ((kind == FACTOR_PERMUTATION || kind == FACTOR_WINDOW) && F->n[f] &&
                o->r->t[k].shape[d] % fsh_tiles(F, e->mesh, f) != 0)
                fits &= ~((uint64_t)1 << f);
        }
        fsh_init(&g, F->n_factors);
        int32_t gn = 0; /* g's runs, appended in factor order */
        for (int32_t f = 0, at = 0; f < F->n_factors; at += F->n[f], f++)
            if (F->n[f] && ((o->takes[k] & fits) >> f) & 1u) {
                memcpy(g.atoms + gn, F->atoms + at, F->n[f]);
                g.n[f] = F->n[f];
                gn += F->n[f];
            }
    } else {
        g = *F;
    }
    Tiling t;
    oprule_factors_to_tiling(o->r, k, &g, e->mesh, &t, NULL);
    t.perm = o->perm; /* the op runs alike on every device: its tensors keep their order */
    return t;
}

/* The cost of F to result k that no sharding reaches yet: it takes F's
 * split as it is, but a pending reduction F leaves (a contraction split on
 * both operands) is summed where the result ends, replicated unless a
 * later sharding reaches it; so the all-reduce is charged, and a candidate
 * that splits the contraction is not taken for free over one that moves an
 * operand instead. */
static int64_t unreached_result_cost(const Engine *e, const OpEval *o, int32_t k, const FactorSharding *F)
{
    ReduceKind kind;
    bool mixed;
    Tiling proj = project(e, o, k, F, false), whole;
    uint32_t partial = oprule_result_partial(o->r, F, &kind, &mixed) & ~tiling_used(&proj);
    if (!partial)
        return 0;
    if (mixed || kind == REDUCE_NONE)
        return RESHARD_INF_COST;
    proj.partial = partial;
    proj.kind = (uint8_t)kind;
    tiling_replicated(&whole, proj.rank);
    return reshard_cost(e->mesh, e->lshape[o->lf[k]], &proj, &whole);
}

/* Bytes tensor k moves if the op runs with factor sharding F: 0 when k can
 * simply grow to F's projection and F leaves k no pending reduction; else
 * an operand is resharded to it, a result from it (with the pending
 * reduction of F's reduction factors: a contraction split on both operands
 * is summed even where the result's split already matches) to its state; a
 * result no sharding reaches yet costs what unreached_result_cost says. */
static int64_t tensor_cost(const Engine *e, const OpEval *o, int32_t k, const FactorSharding *F)
{
    int32_t lf = o->lf[k];
    if (!has_tiling(e, lf))
        return k < o->r->n_in ? 0 : unreached_result_cost(e, o, k, F);
    const Tiling *s = state(e, lf);
    Tiling proj = project(e, o, k, F, false), grown;
    ReduceKind kind = REDUCE_NONE;
    bool mixed = false;
    uint32_t partial = k < o->r->n_in ? 0 : oprule_result_partial(o->r, F, &kind, &mixed) & ~tiling_used(&proj);
    if (!partial && !(e->lfl[lf] & LF_FIXED) &&
        (tiling_equal(s, &proj) || (extend_leaf(e, lf, s, &proj, &grown) && tiling_equal(&grown, &proj))))
        return 0;
    if (k < o->r->n_in)
        return reshard_cost(e->mesh, e->lshape[lf], s, &proj);
    if (partial && (mixed || kind == REDUCE_NONE))
        return RESHARD_INF_COST;
    proj.partial = partial;
    proj.kind = (uint8_t)(partial ? kind : REDUCE_NONE);
    return reshard_cost(e->mesh, e->lshape[lf], &proj, s);
}

static int64_t fs_cost(const Engine *e, const OpEval *o, const FactorSharding *F)
{
    int64_t c = 0;
    for (int32_t k = 0; k < o->nt; k++)
        c = add_cost(c, tensor_cost(e, o, k, F));
    return c;
}

static int64_t fs_tiles(const FactorSharding *F, const Mesh *m) { return mesh_mask_size(m, fsh_used(F)); }

/* Canonical order of factor shardings: per factor in order, more atoms
 * first, then smaller atoms first. */
static int fs_order(const FactorSharding *a, const FactorSharding *b)
{
    for (int32_t f = 0; f < a->n_factors; f++) {
        if (a->n[f] != b->n[f])
            return a->n[f] > b->n[f] ? -1 : 1;
        int c = memcmp(fsh_factor(a, f), fsh_factor(b, f), a->n[f]);
        if (c)
            return c;
    }
    return 0;
}

/* Longest run per factor that every giver's run is a prefix of.  best[f]
 * gets it (as a factor sharding), giver[f] the first tensor giving that run,
 * bad[f] whether two givers disagree. */
static void merge_factors(const Engine *e, const OpEval *o, FactorSharding *best, int32_t *giver, bool *bad)
{
    int32_t nf = o->r->n_factors;
    fsh_init(best, nf);
    for (int32_t f = 0; f < nf; f++) {
        giver[f] = -1;
        bad[f] = false;
        for (int32_t k = 0; k < o->nt; k++) {
            if (!o->has[k] || o->fs[k].n[f] == 0)
                continue;
            bool gv, tk;
            flow(e, o, k, f, &gv, &tk);
            if (!gv)
                continue;
            const int8_t *r = fsh_factor(&o->fs[k], f), *b = fsh_factor(best, f);
            int32_t nr = o->fs[k].n[f], nb = best->n[f];
            if (prefix_of(b, nb, r, nr)) {
                if (nr > nb) {
                    fsh_set(best, f, r, nr);
                    giver[f] = k;
                }
            } else if (!prefix_of(r, nr, b, nb)) {
                bad[f] = true;
            }
        }
    }
}

/* base completed by the conflict-free factors of best whose atoms are still
 * free, in factor order. */
static void complete(FactorSharding *base, const FactorSharding *best, const bool *bad)
{
    uint32_t used = fsh_used(base);
    for (int32_t f = 0; f < base->n_factors; f++) {
        if (base->n[f] || bad[f] || best->n[f] == 0)
            continue;
        const int8_t *r = fsh_factor(best, f);
        uint32_t m = 0;
        for (int32_t j = 0; j < best->n[f]; j++)
            m |= 1u << r[j];
        if (m & used)
            continue;
        fsh_set(base, f, r, best->n[f]);
        used |= m;
    }
}

static Cand *new_cand(Engine *e)
{
    GROW(e->cands, e->n_cands, e->cap_cands);
    Cand *c = &e->cands[e->n_cands++];
    memset(c, 0, sizeof *c);
    return c;
}

/* A conflict at the op: the candidates are each giver's factor sharding
 * (restricted to what it may give) completed by the others' compatible
 * factors, and the compatible factors alone; the cheapest wins. */
static void resolve_op(Engine *e, const OpEval *o, const FactorSharding *best, const bool *bad, FactorSharding *F)
{
    int32_t nf = o->r->n_factors, first = e->n_cands;
    FactorSharding c;
    fsh_init(&c, nf);
    complete(&c, best, bad);
    new_cand(e)->fs = c;
    for (int32_t k = 0; k < o->nt; k++) {
        if (!o->has[k])
            continue;
        fsh_init(&c, nf);
        for (int32_t f = 0; f < nf; f++) {
            bool gv, tk;
            flow(e, o, k, f, &gv, &tk);
            if (gv && o->fs[k].n[f])
                fsh_set(&c, f, fsh_factor(&o->fs[k], f), o->fs[k].n[f]);
        }
        if (fsh_used(&c) == 0)
            continue;
        complete(&c, best, bad);
        bool dup = false;
        for (int32_t j = first; j < e->n_cands && !dup; j++)
            dup = fsh_equal(&e->cands[j].fs, &c);
        if (!dup)
            new_cand(e)->fs = c;
    }
    int32_t n = e->n_cands - first, pick = 0;
    for (int32_t j = 0; j < n; j++) {
        Cand *cj = &e->cands[first + j];
        cj->cost = fs_cost(e, o, &cj->fs);
        if (j == 0)
            continue;
        const Cand *cp = &e->cands[first + pick];
        int64_t tj = fs_tiles(&cj->fs, e->mesh), tp = fs_tiles(&cp->fs, e->mesh);
        if (cj->cost < cp->cost || (cj->cost == cp->cost && (tj > tp || (tj == tp && fs_order(&cj->fs, &cp->fs) < 0))))
            pick = j;
    }
    *F = e->cands[first + pick].fs;
    GROW(e->conf, e->n_conf, e->cap_conf);
    e->conf[e->n_conf++] = (Conflict){o->gi, -1, first, n, pick};
}

/* Per-atom origins of what F's factors give tensor k: from the tensor that
 * gave each factor. */
static const int32_t *op_origins(Engine *e, const OpEval *o, const FactorSharding *F, const int32_t *giver,
                                 int32_t *src_out)
{
    int32_t src = -1;
    bool one = true;
    for (int32_t f = 0; f < F->n_factors; f++) {
        if (!F->n[f] || giver[f] < 0)
            continue;
        int32_t lf = o->lf[giver[f]];
        if (src < 0)
            src = lf;
        else if (lf != src && !(e->aorg[lf] ? e->aorg[lf] == e->aorg[src] : !e->aorg[src] && e->lorg[lf] == e->lorg[src]))
            one = false;
    }
    *src_out = src;
    if (src < 0)
        return NULL;
    if (one)
        return e->aorg[src];
    int32_t *t = ARENA_ARRAY(e->a, int32_t, e->n_atoms > 0 ? e->n_atoms : 1);
    for (int32_t k = 0; k < e->n_atoms; k++)
        t[k] = -1;
    for (int32_t f = 0; f < F->n_factors; f++) {
        if (!F->n[f] || giver[f] < 0)
            continue;
        int32_t lf = o->lf[giver[f]];
        const int8_t *a = fsh_factor(F, f);
        for (int32_t j = 0; j < F->n[f]; j++)
            t[a[j]] = e->aorg[lf] ? e->aorg[lf][a[j]] : e->lorg[lf];
    }
    return t;
}

/* Offers tensor k the grown state out, whose new atoms come from the
 * factors of gained (given by the tensors giver[f]); false when no other
 * tensor gave them (nothing new). */
static bool propose_grown(Engine *e, const OpEval *o, int32_t k, const Tiling *out, const FactorSharding *gained,
                          const int32_t *giver, int32_t pst)
{
    int32_t src;
    const int32_t *org = op_origins(e, o, gained, giver, &src);
    if (src < 0)
        return false;
    Proposal *p = new_proposal(e, o->lf[k]);
    p->t = *out;
    p->src = src;
    p->via = o->gi;
    p->lorg = e->lorg[src];
    p->aorg = org;
    p->pst = pst;
    p->consumer = k < o->r->n_in;
    return true;
}

/* ---------------------------------------------------------------- memo
 * An op's evaluation depends on its rule, the phase, and per tensor on its
 * state, whether it is fixed, and the dims and atoms closed to it in this
 * round; the provenance of what it proposes comes from its tensors' own.
 * A stack of layers evaluates the same few situations again and again:
 * each is computed once, and replayed (its proposals re-made with the
 * instance's leaves and origins).  Evaluations that record a conflict (for
 * --explain) are not remembered. */
enum { MEMO_TENSORS = 8, MEMO_MAX = 1 << 16 };

typedef struct MemoKey {
    int32_t nw;                          /* words used: 1 + 2 per tensor */
    uint64_t w[1 + 2 * MEMO_TENSORS];    /* rule and phase; per tensor its state and fixed bit, closed dims
                                            and forbidden atoms (memo_word) */
} MemoKey;

typedef struct MemoProp {
    int32_t k;
    int32_t pst; /* out's pool index (memo_add) */
    Tiling out;
    FactorSharding gained;
} MemoProp;

typedef struct MemoEntry {
    MemoKey key;
    uint64_t hash;
    int32_t first, n; /* its proposals in mprops */
    bool settled;
    int8_t giver[OPRULE_MAX_FACTORS];
} MemoEntry;

static uint64_t memo_hash(const MemoKey *k)
{
    uint64_t h0 = 0xcbf29ce484222325ull, h1 = 0x9e3779b97f4a7c15ull; /* two independent chains */
    int32_t i = 0;
    for (; i + 2 <= k->nw; i += 2) {
        h0 = hash_mix(h0, k->w[i]);
        h1 = hash_mix(h1, k->w[i + 1]);
    }
    if (i < k->nw)
        h0 = hash_mix(h0, k->w[i]);
    return hash_mix(h0, h1);
}

static bool memo_same(const MemoKey *a, const MemoKey *b)
{
    if (a->nw != b->nw)
        return false;
    for (int32_t i = 0; i < a->nw; i++)
        if (a->w[i] != b->w[i])
            return false;
    return true;
}

/* Starts a key of rule rid in phase `phase` over nt tensors. */
static void memo_start(MemoKey *key, int32_t rid, int32_t phase, int32_t nt)
{
    key->nw = 1 + 2 * nt;
    key->w[0] = (uint64_t)(uint32_t)rid | (uint64_t)(uint32_t)phase << 32;
}

/* Tensor k's words of a key: leaf lf's state, fixed bit, closed dims and
 * forbidden atoms. */
static inline __attribute__((always_inline)) void memo_word(const Engine *e, MemoKey *key, int32_t k, int32_t lf)
{
    uint32_t fixed = e->lfl[lf] & LF_FIXED;
    key->w[1 + 2 * k] = (uint64_t)(uint32_t)e->st[lf] | (uint64_t)fixed << 32;
    key->w[2 + 2 * k] = (uint64_t)leaf_closed(e, lf) | (uint64_t)leaf_forbid(e, lf) << 32;
}

/* The key of op o in the current phase (tensor leaves set); false when the
 * op has too many tensors to be remembered. */
static bool memo_key(const Engine *e, const OpEval *o, MemoKey *key)
{
    if (o->nt > MEMO_TENSORS)
        return false;
    memo_start(key, e->rid[o->gi], e->phase, o->nt);
    for (int32_t k = 0; k < o->nt; k++)
        memo_word(e, key, k, o->lf[k]);
    return true;
}

static const MemoEntry *memo_find(const Engine *e, const MemoKey *key, uint64_t h)
{
    if (!e->memo_cap)
        return NULL;
    for (uint32_t j = (uint32_t)h & (e->memo_cap - 1); e->memo_slot[j] >= 0; j = (j + 1) & (e->memo_cap - 1)) {
        const MemoEntry *me = &e->memo[e->memo_slot[j]];
        if (me->hash == h && memo_same(&me->key, key))
            return me;
    }
    return NULL;
}

static void memo_add(Engine *e, const MemoKey *key, uint64_t h, const MemoProp *props, int32_t n, bool settled,
                     const int32_t *giver, int32_t nf)
{
    if (e->n_memo >= MEMO_MAX)
        return;
    if ((uint32_t)(e->n_memo + 1) * 2 > e->memo_cap) {
        uint32_t cap = e->memo_cap ? e->memo_cap * 2 : 256;
        free(e->memo_slot);
        e->memo_slot = xmalloc(sizeof(int32_t) * cap);
        memset(e->memo_slot, 0xff, sizeof(int32_t) * cap);
        e->memo_cap = cap;
        for (int32_t x = 0; x < e->n_memo; x++) {
            uint32_t j = (uint32_t)e->memo[x].hash & (cap - 1);
            while (e->memo_slot[j] >= 0)
                j = (j + 1) & (cap - 1);
            e->memo_slot[j] = x;
        }
    }
    GROW(e->memo, e->n_memo, e->cap_memo);
    MemoEntry *me = &e->memo[e->n_memo];
    me->key = *key;
    me->hash = h;
    me->first = e->n_mprops;
    me->n = n;
    me->settled = settled;
    for (int32_t f = 0; f < OPRULE_MAX_FACTORS; f++)
        me->giver[f] = (int8_t)(f < nf ? giver[f] : -1);
    for (int32_t q = 0; q < n; q++) {
        GROW(e->mprops, e->n_mprops, e->cap_mprops);
        e->mprops[e->n_mprops] = props[q];
        /* a proposal's state (k >= 0; it always splits something) is interned
         * once here, not at every replay's apply_leaf */
        e->mprops[e->n_mprops++].pst =
            props[q].k >= 0 && tiling_n_atoms(&props[q].out) > 0 ? pool_add(e, &props[q].out) : ST_NONE;
    }
    uint32_t j = (uint32_t)h & (e->memo_cap - 1);
    while (e->memo_slot[j] >= 0)
        j = (j + 1) & (e->memo_cap - 1);
    e->memo_slot[j] = e->n_memo++;
}

/* Replays a remembered evaluation on op o. */
static void memo_replay(Engine *e, const OpEval *o, const MemoEntry *me)
{
    int32_t giver[OPRULE_MAX_FACTORS];
    for (int32_t f = 0; f < o->r->n_factors && me->n > 0; f++) /* what op_origins reads of it */
        giver[f] = me->giver[f];
    for (int32_t q = 0; q < me->n; q++) {
        const MemoProp *mp = &e->mprops[me->first + q];
        propose_grown(e, o, mp->k, &mp->out, &mp->gained, giver, mp->pst);
    }
    if (me->settled)
        e->iflag[o->gi] |= IF_SETTLED;
    else
        e->iflag[o->gi] &= (uint8_t)~IF_SETTLED;
}

/* The arena of one op's temporaries (ops with many tensors), emptied
 * first when it holds RULE_ARENA_LIMIT bytes: nothing in it outlives the
 * evaluation that allocates it. */
static Arena *op_arena(Engine *e)
{
    if (arena_bytes_used(e->ra) > RULE_ARENA_LIMIT)
        arena_reset(e->ra);
    return e->ra;
}

/* What an identity-map op does with its tensors' states (eval_idmap):
 * the merged tiling M, the tensor whose state is M (src_k; -1 when M
 * takes atoms from several, first_k the first of them), and the tensors
 * that grow to M with their new states. */
typedef struct IdmapPlan {
    bool conflict, any;
    Tiling M;
    int32_t src_k, first_k, n;
    int32_t *k;   /* [n]: the tensors proposed to (a replay reads them from the memo instead) */
    Tiling *out;  /* [n]: their tilings (likewise) */
} IdmapPlan;

/* An op whose rule is the identity map: the non-scalar tensors' tilings
 * merge dim by dim (what the factor merge does when factor d is dim d of
 * every tensor).  False on a conflict, which the general path resolves.
 * The plan is remembered like eval_op's evaluations (phase -1: the phase
 * does not matter here). */
static bool eval_idmap(Engine *e, int32_t gi)
{
    const int32_t *ol = e->opl + e->opl_start[gi];
    int32_t n_ops = e->opl_start[gi + 1] - e->opl_start[gi], res = e->leaf0[gi], rank = leaf_rank(e, res);
    int32_t nt = n_ops + 1;
    if (rank == 0)
        return true;
    e->n_evals++;
#define IDMAP_LEAF(k) ((k) < n_ops ? ol[k] : res)
    MemoKey key;
    bool memo = nt <= MEMO_TENSORS;
    if (memo) {
        memo_start(&key, e->rid[gi], -1, nt);
        for (int32_t k = 0; k < nt && memo; k++) {
            int32_t lf = IDMAP_LEAF(k);
            memo_word(e, &key, k, lf);
            memo = e->st[lf] != ST_MANUAL;
        }
    }
    uint64_t h = memo ? memo_hash(&key) : 0;
    const MemoEntry *me = memo ? memo_find(e, &key, h) : NULL;
    IdmapPlan pl;
    int32_t k_small[MEMO_TENSORS];
    Tiling out_small[MEMO_TENSORS];
    pl.k = nt <= MEMO_TENSORS ? k_small : ARENA_ARRAY(op_arena(e), int32_t, nt);
    pl.out = nt <= MEMO_TENSORS ? out_small : ARENA_ARRAY(e->ra, Tiling, nt);
    if (me) {
        pl.conflict = !me->settled;
        pl.src_k = me->giver[0];
        pl.first_k = me->giver[1];
        pl.any = me->giver[2];
        pl.M = e->mprops[me->first].out;
        pl.n = me->n - 1; /* the proposals are read from the memo below */
    } else {
        tiling_replicated(&pl.M, rank);
        pl.conflict = pl.any = false;
        pl.src_k = pl.first_k = -1;
        pl.n = 0;
        for (int32_t k = 0; k < nt; k++) {
            int32_t lf = IDMAP_LEAF(k);
            if (leaf_rank(e, lf) != rank)
                continue;
            if (e->st[lf] == ST_MANUAL) { /* never when remembered */
                for (int32_t j = 0; j < nt; j++) {
                    int32_t l2 = IDMAP_LEAF(j);
                    if (leaf_rank(e, l2) == rank)
                        propose_manual(e, l2, lf, gi);
                }
                return true;
            }
            if (!has_tiling(e, lf) || tiling_n_atoms(state(e, lf)) == 0)
                continue;
            if (!compatible(&pl.M, state(e, lf), &pl.M)) {
                pl.conflict = true;
                break;
            }
            pl.any = true;
            if (pl.first_k < 0)
                pl.first_k = k;
        }
        for (int32_t k = 0; k < nt && pl.any && !pl.conflict && pl.src_k < 0; k++) {
            int32_t lf = IDMAP_LEAF(k);
            if (leaf_rank(e, lf) == rank && has_tiling(e, lf) && tiling_equal(state(e, lf), &pl.M))
                pl.src_k = k;
        }
        for (int32_t k = 0; k < nt && pl.any && !pl.conflict; k++) {
            int32_t lf = IDMAP_LEAF(k);
            if (leaf_rank(e, lf) != rank || (e->lfl[lf] & LF_FIXED))
                continue;
            Tiling cur = cur_tiling(e, lf);
            if (extend_leaf(e, lf, &cur, &pl.M, &pl.out[pl.n]))
                pl.k[pl.n++] = k;
        }
        if (memo) {
            MemoProp mp[MEMO_TENSORS + 1];
            memset(mp, 0, sizeof mp);
            mp[0].k = -1;
            mp[0].out = pl.M;
            for (int32_t q = 0; q < pl.n; q++) {
                mp[q + 1].k = pl.k[q];
                mp[q + 1].out = pl.out[q];
            }
            int32_t g[3] = {pl.src_k, pl.first_k, pl.any};
            memo_add(e, &key, h, mp, pl.n + 1, !pl.conflict, g, 3);
        }
    }
    if (pl.conflict)
        return false;
    if (!pl.any)
        return true;
    const MemoProp *replayed = me ? &e->mprops[me->first + 1] : NULL;
    int32_t src = IDMAP_LEAF(pl.src_k >= 0 ? pl.src_k : pl.first_k), n_prop = 0;
    for (int32_t q = 0; q < pl.n; q++)
        n_prop += IDMAP_LEAF(replayed ? replayed[q].k : pl.k[q]) != src;
    if (n_prop == 0)
        return true;
    const int32_t *org = NULL;
    if (pl.src_k >= 0) {
        org = e->aorg[src];
    } else { /* the merged tiling takes atoms from several tensors */
        int32_t *t = ARENA_ARRAY(e->a, int32_t, e->n_atoms > 0 ? e->n_atoms : 1);
        uint32_t done = 0, want = tiling_used(&pl.M);
        for (int32_t k = 0; k < nt; k++) {
            int32_t lf = IDMAP_LEAF(k);
            if (leaf_rank(e, lf) != rank || !has_tiling(e, lf))
                continue;
            uint32_t u = e->pused[e->st[lf]] & want & ~done;
            for (int32_t a = 0; a < e->n_atoms; a++)
                if ((u >> a) & 1u)
                    t[a] = e->aorg[lf] ? e->aorg[lf][a] : e->lorg[lf];
            done |= u;
        }
        org = t;
    }
    for (int32_t q = 0; q < pl.n; q++) {
        int32_t lf = IDMAP_LEAF(replayed ? replayed[q].k : pl.k[q]);
        if (lf == src)
            continue;
        Proposal *p = new_proposal(e, lf);
        p->t = replayed ? replayed[q].out : pl.out[q];
        p->pst = replayed ? replayed[q].pst : ST_NONE;
        p->src = src;
        p->via = gi;
        p->lorg = e->lorg[src];
        p->aorg = org;
        p->consumer = lf != res;
    }
#undef IDMAP_LEAF
    return true;
}

/* The flows of the op's factors in phase `phase`, per tensor. */
static void set_flows(OpEval *o, int32_t phase)
{
    uint64_t g[2], t[2];
    oprule_flow_masks(o->r, o->tier, phase, g, t);
    for (int32_t k = 0; k < o->nt; k++) {
        o->gives[k] = g[k >= o->r->n_in];
        o->takes[k] = t[k >= o->r->n_in];
    }
}

typedef struct Decision {
    FactorSharding F;
    int32_t giver[OPRULE_MAX_FACTORS]; /* tensor that gave each factor's run, -1 */
    bool conflict;
} Decision;

/* The op's factor sharding from its tensors' states under o's flows: the
 * merged runs, or on a conflict the cheapest candidate (recorded) when
 * `resolve`, else just d->conflict. */
static void decide(Engine *e, const OpEval *o, bool resolve, Decision *d)
{
    int32_t nf = o->r->n_factors;
    FactorSharding best;
    bool bad[OPRULE_MAX_FACTORS], conflict = false;
    merge_factors(e, o, &best, d->giver, bad);
    for (int32_t f = 0; f < nf; f++)
        conflict |= bad[f];
    if (!conflict) { /* one atom wanted by two factors */
        uint32_t seen = 0;
        for (int32_t f = 0, at = 0; f < nf && !conflict; at += best.n[f], f++)
            for (int32_t j = 0; j < best.n[f]; j++) {
                conflict |= (seen >> best.atoms[at + j]) & 1u;
                seen |= 1u << best.atoms[at + j];
            }
    }
    d->conflict = conflict;
    if (!conflict) {
        d->F = best;
        return;
    }
    if (!resolve)
        return;
    resolve_op(e, o, &best, bad, &d->F);
    /* givers of the chosen runs, for provenance */
    for (int32_t f = 0; f < nf; f++) {
        d->giver[f] = -1;
        for (int32_t k = 0; k < o->nt && d->giver[f] < 0 && d->F.n[f]; k++)
            if (o->has[k] && o->fs[k].n[f] &&
                prefix_of(fsh_factor(&d->F, f), d->F.n[f], fsh_factor(&o->fs[k], f), o->fs[k].n[f]))
                d->giver[f] = k;
    }
}

/* Before the last phase, a factor's run ends before the first atom that a
 * tensor of the op holds on another factor which does not flow yet: an
 * atom splits one factor of an op at a time (a dot's rhs split on the
 * contracting dim over b keeps b off the lhs's free dims until the last
 * phase weighs the two). */
static void drop_held_atoms(const OpEval *o, FactorSharding *F)
{
    int32_t nf = o->r->n_factors;
    int8_t held_by[SPMDC_MAX_ATOMS];
    memset(held_by, -1, sizeof held_by);
    bool any = false;
    for (int32_t k = 0; k < o->nt; k++) {
        if (!o->has[k])
            continue;
        for (int32_t f = 0, at = 0; f < nf; at += o->fs[k].n[f], f++) {
            if ((o->gives[k] >> f) & 1u)
                continue;
            for (int32_t j = 0; j < o->fs[k].n[f]; j++) {
                held_by[o->fs[k].atoms[at + j]] = (int8_t)f;
                any = true;
            }
        }
    }
    if (!any)
        return;
    FactorSharding r;
    fsh_init(&r, nf);
    bool cut = false;
    for (int32_t f = 0, at = 0; f < nf; at += F->n[f], f++) {
        int32_t n = 0;
        while (n < F->n[f] && (held_by[F->atoms[at + n]] < 0 || held_by[F->atoms[at + n]] == f))
            n++;
        cut |= n < F->n[f];
        if (n)
            fsh_set(&r, f, F->atoms + at, n);
    }
    if (cut)
        *F = r;
}

/* Tensor k's state cur grown by what it takes of F, in *out; false if
 * nothing new (fixed, every run it takes already its own, or nothing fits). */
static bool tensor_grows_from(const Engine *e, const OpEval *o, int32_t k, const FactorSharding *F, const Tiling *cur,
                              Tiling *out)
{
    int32_t lf = o->lf[k];
    if (e->lfl[lf] & LF_FIXED)
        return false;
    bool fresh = false;
    for (int32_t f = 0, at = 0; f < F->n_factors && !fresh; at += F->n[f], f++)
        if (F->n[f] && ((o->takes[k] >> f) & 1u))
            fresh = !o->has[k] || o->fs[k].n[f] < F->n[f] ||
                    !prefix_of(F->atoms + at, F->n[f], fsh_factor(&o->fs[k], f), o->fs[k].n[f]);
    if (!fresh)
        return false;
    Tiling want = project(e, o, k, F, true);
    return tiling_n_atoms(&want) > 0 && extend_leaf(e, lf, cur, &want, out);
}

static bool tensor_grows(const Engine *e, const OpEval *o, int32_t k, const FactorSharding *F, Tiling *out)
{
    Tiling cur = cur_tiling(e, o->lf[k]);
    return tensor_grows_from(e, o, k, F, &cur, out);
}

/* The last proposal (to tensor k of the op o, which weighed conflict cf)
 * gets the op's alternatives: per candidate, the state tensor k would grow
 * to under it (its current state where it would not grow) and the bytes
 * the op moves under it, so that a leaf which receives this proposal and
 * another at once weighs what the op pays for each (apply_leaf). */
static void attach_alts(Engine *e, const OpEval *o, int32_t k, const Conflict *cf)
{
    Proposal *p = &e->props[e->n_props - 1];
    Tiling cur = cur_tiling(e, o->lf[k]);
    p->alt = e->n_alts;
    for (int32_t j = 0; j < cf->n; j++) {
        const Cand *c = &e->cands[cf->first + j];
        GROW(e->alts, e->n_alts, e->cap_alts);
        Alt *a = &e->alts[e->n_alts++];
        if (!tensor_grows_from(e, o, k, &c->fs, &cur, &a->t))
            a->t = cur;
        a->cost = c->cost;
    }
    p->n_alt = e->n_alts - p->alt;
}

static void eval_op(Engine *e, int32_t gi)
{
    if ((e->iflag[gi] & IF_IDMAP) && eval_idmap(e, gi))
        return;
    const OpRule *rp = rule_of(e, gi);
    if (!rp)
        return;
    e->n_evals++;
    OpEval o = {rp, gi, rp->n_in + rp->n_out, itier(e, gi), NULL, NULL, NULL, NULL, NULL, 0};
    enum { SMALL = 8 };
    int32_t lf_small[SMALL];
    bool has_small[SMALL], grows_small[SMALL];
    FactorSharding fs_small[SMALL];
    uint64_t gv_small[SMALL], tk_small[SMALL];
    Tiling out_small[SMALL];
    bool *grows = grows_small;
    Tiling *out = out_small;
    if (o.nt <= SMALL) {
        o.lf = lf_small;
        o.has = has_small;
        o.fs = fs_small;
        o.gives = gv_small;
        o.takes = tk_small;
    } else {
        o.lf = ARENA_ARRAY(op_arena(e), int32_t, o.nt);
        o.has = ARENA_ARRAY(e->ra, bool, o.nt);
        o.fs = ARENA_ARRAY(e->ra, FactorSharding, o.nt);
        o.gives = ARENA_ARRAY(e->ra, uint64_t, o.nt);
        o.takes = ARENA_ARRAY(e->ra, uint64_t, o.nt);
        grows = ARENA_ARRAY(e->ra, bool, o.nt);
        out = ARENA_ARRAY(e->ra, Tiling, o.nt);
    }
    bool any = false, manual = false;
    int32_t manual_src = -1;
    for (int32_t k = 0; k < o.nt; k++) {
        o.lf[k] = tensor_leaf(e, gi, rp, k);
        if (e->st[o.lf[k]] == ST_MANUAL) {
            manual = true;
            manual_src = o.lf[k];
        }
    }
    if (manual) {
        for (int32_t k = 0; k < o.nt; k++)
            propose_manual(e, o.lf[k], manual_src, gi);
        return;
    }
    MemoKey key;
    bool memo = memo_key(e, &o, &key);
    uint64_t h = memo ? memo_hash(&key) : 0;
    const MemoEntry *me = memo ? memo_find(e, &key, h) : NULL;
    if (me) {
        memo_replay(e, &o, me);
        return;
    }
    for (int32_t k = 0; k < o.nt; k++) {
        o.has[k] = has_tiling(e, o.lf[k]);
        if (o.has[k]) {
            oprule_tiling_to_factors(rp, k, state(e, o.lf[k]), e->mesh, &o.fs[k], NULL);
            if (fsh_used(&o.fs[k])) {
                uint16_t pk = state(e, o.lf[k])->perm;
                o.perm = !any || o.perm == pk ? pk : 0;
                any = true;
            }
        }
    }
    e->iflag[gi] |= IF_SETTLED;
    int32_t no_giver[1] = {-1};
    if (!any) { /* no tensor gives anything, in any phase */
        if (memo)
            memo_add(e, &key, h, NULL, 0, true, no_giver, 0);
        return;
    }
    int32_t nf = rp->n_factors;
    set_flows(&o, e->phase);
    Decision d;
    MemoProp mprops[MEMO_TENSORS];
    int32_t n_mp = 0;
    int32_t conf_before = e->n_conf, cands_before = e->n_cands;
    decide(e, &o, true, &d);
    if (e->phase < N_PHASES - 1)
        drop_held_atoms(&o, &d.F);
    bool none = fsh_used(&d.F) == 0, proposed = false;
    for (int32_t k = 0; k < o.nt; k++) {
        grows[k] = !none && tensor_grows(e, &o, k, &d.F, &out[k]);
        if (!grows[k])
            continue;
        /* origins from the factors that gave the new atoms */
        FactorSharding gained;
        fsh_init(&gained, nf);
        uint32_t had = e->pused[e->st[o.lf[k]]], now = tiling_used(&out[k]); /* ST_NONE, ST_MANUAL: 0 */
        for (int32_t f = 0, at = 0, gn = 0; f < nf; at += d.F.n[f], f++) {
            bool gain = false;
            for (int32_t j = 0; j < d.F.n[f]; j++)
                gain |= ((now & ~had) >> d.F.atoms[at + j]) & 1u;
            if (gain && d.giver[f] >= 0 && d.giver[f] != k) { /* appended in factor order */
                memcpy(gained.atoms + gn, d.F.atoms + at, d.F.n[f]);
                gained.n[f] = d.F.n[f];
                gn += d.F.n[f];
            }
        }
        if (!propose_grown(e, &o, k, &out[k], &gained, d.giver, ST_NONE)) {
            grows[k] = false; /* only its own runs: nothing new */
            continue;
        }
        if (e->n_conf > conf_before)
            attach_alts(e, &o, k, &e->conf[e->n_conf - 1]);
        if (memo)
            mprops[n_mp++] = (MemoProp){k, ST_NONE, out[k], gained};
        proposed = true;
    }
    if (!proposed) { /* a conflict that decided nothing: every tensor keeps what it has */
        e->n_conf = conf_before;
        e->n_cands = cands_before;
    }
    memo &= e->n_conf == conf_before;
    if (e->phase == N_PHASES - 1) {
        if (memo)
            memo_add(e, &key, h, mprops, n_mp, true, d.giver, nf);
        return;
    }
    /* Settled when, once its proposals are taken, the last phase's flows
     * would give its tensors nothing more: the phase starts then need not
     * look again (the proposals' leaves do not wake the op that made them). */
    Tiling *eff = out;
    for (int32_t k = 0; k < o.nt; k++) {
        if (grows[k]) {
            oprule_tiling_to_factors(rp, k, &out[k], e->mesh, &o.fs[k], NULL);
            o.has[k] = true;
        } else {
            eff[k] = cur_tiling(e, o.lf[k]);
        }
    }
    /* a factor a tensor holds that gives only in the last phase */
    uint64_t g_last[2], t_last[2];
    oprule_flow_masks(rp, o.tier, N_PHASES - 1, g_last, t_last);
    bool later = false;
    for (int32_t k = 0; k < o.nt && !later; k++) {
        uint64_t fresh = g_last[k >= rp->n_in] & ~o.gives[k];
        for (int32_t f = 0; f < nf && !later && o.has[k] && fresh; f++)
            later = ((fresh >> f) & 1u) && o.fs[k].n[f];
    }
    bool more = false;
    if (later) {
        set_flows(&o, N_PHASES - 1);
        Decision d2;
        decide(e, &o, false, &d2);
        more = d2.conflict;
        for (int32_t k = 0; k < o.nt && !more; k++) {
            Tiling o2;
            more = fsh_used(&d2.F) && tensor_grows_from(e, &o, k, &d2.F, &eff[k], &o2);
        }
        if (more)
            e->iflag[gi] &= (uint8_t)~IF_SETTLED;
    }
    if (memo)
        memo_add(e, &key, h, mprops, n_mp, !more, d.giver, nf);
}

/* ================================================================ applying a step */

static void note_changed(Engine *e, int32_t lf, int32_t cause)
{
    if (e->n_front >= e->cap_front) {
        e->cap_front = e->cap_front ? e->cap_front * 2 : 64;
        e->front = xrealloc(e->front, sizeof(int32_t) * (size_t)e->cap_front);
        e->front_cause = xrealloc(e->front_cause, sizeof(int32_t) * (size_t)e->cap_front);
    }
    e->front_cause[e->n_front] = cause;
    e->front[e->n_front++] = lf;
    if (e->stamp[lf] != e->round + 1) {
        e->stamp[lf] = e->round + 1;
        GROW(e->changed, e->n_changed, e->cap_changed);
        e->changed[e->n_changed++] = lf;
    }
}

static int proposal_order(const void *a, const void *b)
{
    const Proposal *x = *(const Proposal *const *)a, *y = *(const Proposal *const *)b;
    if (x->manual != y->manual)
        return x->manual ? -1 : 1;
    int c = tiling_order(&x->t, &y->t);
    if (c)
        return c;
    if (x->via != y->via)
        return x->via < y->via ? -1 : 1;
    return x->src < y->src ? -1 : x->src > y->src;
}

/* Sorts one leaf's proposals into proposal_order.  When they all offer the
 * same state (a value shared by many ops, such as a broadcast constant),
 * only the first in that order is read apart from the state (apply_leaf):
 * it is found in one scan and put first. */
static void order_proposals(Proposal **ps, int32_t n)
{
    bool same = true;
    for (int32_t j = 1; j < n && same; j++) /* one interned state is the same tiling */
        same = ps[j]->manual == ps[0]->manual &&
               ((ps[j]->pst >= ST_FIRST && ps[j]->pst == ps[0]->pst) ||
                (tiling_equal(&ps[j]->t, &ps[0]->t) && ps[j]->t.perm == ps[0]->t.perm &&
                 ps[j]->t.rank == ps[0]->t.rank));
    if (!same) {
        qsort(ps, (size_t)n, sizeof *ps, proposal_order);
        return;
    }
    int32_t best = 0; /* proposal_order of equal states: by via, then src */
    for (int32_t j = 1; j < n; j++)
        if (ps[j]->via < ps[best]->via || (ps[j]->via == ps[best]->via && ps[j]->src < ps[best]->src))
            best = j;
    Proposal *t = ps[0];
    ps[0] = ps[best];
    ps[best] = t;
}

/* Bytes the leaf moves for the proposal q if it takes t instead. */
static int64_t proposal_cost(const Engine *e, int32_t lf, const Tiling *t, const Proposal *q)
{
    if (compatible(t, &q->t, NULL))
        return 0;
    return q->consumer ? reshard_cost(e->mesh, e->lshape[lf], t, &q->t) : reshard_cost(e->mesh, e->lshape[lf], &q->t, t);
}

/* Bytes moved for the proposal q if the leaf takes t: proposal_cost, or,
 * when q comes from an op that weighed a conflict, what the op moves under
 * its cheapest candidate that gives the leaf t (the op runs on the leaf's
 * state instead of resharding it), else under the candidate it chose plus
 * the leaf's reshard. */
static int64_t proposal_cost_alt(const Engine *e, int32_t lf, const Tiling *t, const Proposal *q)
{
    if (q->n_alt == 0)
        return proposal_cost(e, lf, t, q);
    int64_t best = -1, own = -1;
    for (int32_t j = q->alt; j < q->alt + q->n_alt; j++) {
        const Alt *a = &e->alts[j];
        if (tiling_equal(&a->t, t) && (best < 0 || a->cost < best))
            best = a->cost;
        if (tiling_equal(&a->t, &q->t) && (own < 0 || a->cost < own))
            own = a->cost;
    }
    if (best >= 0)
        return best;
    return add_cost(own < 0 ? 0 : own, proposal_cost(e, lf, t, q));
}

/* The atoms proposal q's state uses. */
static uint32_t proposal_used(const Engine *e, const Proposal *q)
{
    return q->pst >= ST_FIRST ? e->pused[q->pst] : tiling_used(&q->t);
}

/* Merges the proposals of one leaf and applies the result. */
static void apply_leaf(Engine *e, int32_t lf, Proposal **ps, int32_t n)
{
    if (e->lfl[lf] & LF_FIXED)
        return;
    if (ps[0]->manual) {
        if (e->st[lf] != ST_MANUAL) {
            bool first = e->lorg[lf] < 0 && e->st[lf] == ST_NONE;
            e->st[lf] = ST_MANUAL;
            e->lorg[lf] = ps[0]->lorg;
            e->aorg[lf] = NULL;
            if (first || e->from[lf] == 0) {
                e->from[lf] = ps[0]->src + 1;
                e->via[lf] = ps[0]->via;
            }
            note_changed(e, lf, ps[0]->via);
        }
        return;
    }
    if (e->st[lf] == ST_MANUAL)
        return;
    Tiling cur = cur_tiling(e, lf), acc = n == 1 ? ps[0]->t : cur;
    int32_t chosen = 0;
    bool conflict = false;
    for (int32_t j = 0; j < n && n > 1 && !conflict; j++) {
        if (j > 0 && ps[j]->pst >= ST_FIRST && ps[j]->pst == ps[j - 1]->pst)
            continue; /* the state just merged into acc: acc holds it already */
        conflict = !compatible(&acc, &ps[j]->t, &acc);
    }
    if (conflict) {
        /* each proposal against the others by the bytes the leaf would move */
        int32_t first = e->n_cands;
        for (int32_t j = 0; j < n; j++) {
            if (j > 0 && tiling_equal(&ps[j]->t, &ps[j - 1]->t))
                continue;
            Cand *cd = new_cand(e);
            cd->t = ps[j]->t;
            for (int32_t q = 0; q < n; q++)
                cd->cost = add_cost(cd->cost, proposal_cost_alt(e, lf, &ps[j]->t, ps[q]));
        }
        int32_t nc = e->n_cands - first, pick = 0;
        for (int32_t j = 1; j < nc; j++) {
            const Cand *cj = &e->cands[first + j], *cp = &e->cands[first + pick];
            int64_t tj = tiling_tiles(&cj->t, e->mesh), tp = tiling_tiles(&cp->t, e->mesh);
            if (cj->cost < cp->cost || (cj->cost == cp->cost && tj > tp))
                pick = j;
        }
        const Tiling *win = &e->cands[first + pick].t;
        for (int32_t j = 0; j < n; j++)
            if (tiling_equal(&ps[j]->t, win)) {
                chosen = j;
                break;
            }
        acc = *win;
        for (int32_t j = 0; j < n; j++)
            compatible(&acc, &ps[j]->t, &acc);
        if (tiling_equal(&acc, &cur)) { /* it decided nothing */
            e->n_cands = first;
            return;
        }
        GROW(e->conf, e->n_conf, e->cap_conf);
        e->conf[e->n_conf++] = (Conflict){e->linst[lf], lf, first, nc, pick};
    }
    /* one proposal, or several of one interned state reaching a leaf that
     * had none: acc is that state */
    bool one_state = n > 1 && !conflict && e->st[lf] == ST_NONE && ps[0]->pst >= ST_FIRST;
    for (int32_t j = 1; j < n && one_state; j++)
        one_state = ps[j]->pst == ps[0]->pst;
    int32_t pst = n == 1 || one_state ? ps[0]->pst : ST_NONE;
    if (pst >= ST_FIRST ? pst == e->st[lf] : tiling_equal(&acc, &cur)) /* pst splits: never cur when unsplit */
        return;
    /* provenance: the new atoms come from the first proposal (canonical
     * order, the chosen one first) that holds them */
    uint32_t had = e->pused[e->st[lf]]; /* ST_NONE: 0 */
    const Proposal *pc = ps[chosen];
    uint32_t now = pst >= ST_FIRST ? e->pused[pst] : tiling_used(&acc);
    /* share the proposal's table when it says where every atom came from
     * (a NULL table means "the proposal's lorg", right only when that will
     * be the leaf's lorg too) */
    if (had == 0 && (n == 1 || (now & ~proposal_used(e, pc)) == 0) &&
        (pc->aorg || e->lorg[lf] < 0 || e->lorg[lf] == pc->lorg)) {
        e->aorg[lf] = pc->aorg;
    } else {
        int32_t *t = ARENA_ARRAY(e->a, int32_t, e->n_atoms > 0 ? e->n_atoms : 1);
        for (int32_t k = 0; k < e->n_atoms; k++)
            t[k] = (had >> k) & 1u ? (e->aorg[lf] ? e->aorg[lf][k] : e->lorg[lf]) : -1;
        /* each gained atom from the first proposal that holds it */
        uint32_t left = now & ~had;
        for (int32_t j = -1; j < n && left; j++) {
            const Proposal *q = j < 0 ? pc : ps[j];
            uint32_t take = proposal_used(e, q) & left;
            left &= ~take;
            for (; take; take &= take - 1) {
                int32_t k = __builtin_ctz(take);
                t[k] = q->aorg ? q->aorg[k] : q->lorg;
            }
        }
        e->aorg[lf] = t;
    }
    if (e->lorg[lf] < 0)
        e->lorg[lf] = pc->lorg;
    if (e->st[lf] == ST_NONE) {
        e->from[lf] = pc->src + 1;
        e->via[lf] = pc->via;
    }
    if (leaf_ann(e, lf) >= 0)
        e->lfl[lf] |= LF_EXTENDED;
    e->st[lf] = pst >= ST_FIRST ? pst : pool_add(e, &acc);
    /* an op whose own proposal the leaf took needs no second look for it */
    note_changed(e, lf, (n == 1 || tiling_equal(&acc, &pc->t)) && !(e->iflag[pc->via] & IF_IDENTITY_EDGE) ? pc->via : -1);
}

static void apply_step(Engine *e)
{
    e->n_front = 0;
    for (int32_t t = 0; t < e->n_touched; t++) {
        /* the touched leaves come in the order proposals first reached
         * them, scattered over the per-leaf arrays: ask for what apply_leaf
         * reads 16 leaves ahead, and the head proposal 8 ahead (in the loop
         * itself: GCC drops calls to a function that only prefetches) */
        if (t + 16 < e->n_touched) {
            int32_t la = e->touched[t + 16];
            __builtin_prefetch(&e->pend[la]);
            __builtin_prefetch(&e->lfl[la]);
            __builtin_prefetch(&e->st[la]);
            __builtin_prefetch(&e->lorg[la]);
        }
        if (t + 8 < e->n_touched) {
            int32_t la = e->touched[t + 8];
            if (e->pend[la] > 0) __builtin_prefetch(&e->props[e->pend[la]]);
            __builtin_prefetch(&e->aorg[la]);
            __builtin_prefetch(&e->from[la]);
            __builtin_prefetch(&e->via[la]);
        }
        /* one walk of the leaf's list: a value many ops use (a weight, a
         * broadcast constant) has a proposal from each, spread over the
         * step's, and a second walk would miss on all of them again */
        int32_t lf = e->touched[t], n = 0;
        for (int32_t p = e->pend[lf]; p > 0; p = e->pnext[p]) {
            GROW(e->pbuf, n, e->cap_pbuf);
            e->pbuf[n++] = &e->props[p];
        }
        if (n > 1)
            order_proposals(e->pbuf, n);
        apply_leaf(e, lf, e->pbuf, n);
        e->pend[lf] = 0;
    }
    e->n_touched = 0;
    e->n_props = 1;
    e->n_alts = 0;
}

/* ================================================================ the schedule */

/* Whether an op of tier t takes part in the current phase; with start, only
 * if the phase lets it do more than the earlier phases did. */
static bool tier_active(int32_t phase, PropTier t, bool start)
{
    switch (t) {
    case TIER_PASS_OP: return start ? phase == 0 : true;
    case TIER_FORWARD_OP: return true;
    case TIER_BROADCAST:
    case TIER_NORMAL: return phase >= 1;
    }
    return false;
}

/* Sorts the step's ops ascending: insertion sort for a few, else an LSD
 * radix sort through tmp (n entries; gi < 2^31) on 8-bit digits, or 11-bit
 * ones for many ops (a digit's pass costs its buckets plus n). */
static void sort_ops(int32_t *a, int32_t *tmp, int32_t n)
{
    if (n < 48) {
        for (int32_t i = 1; i < n; i++) {
            int32_t v = a[i], j = i;
            for (; j > 0 && a[j - 1] > v; j--)
                a[j] = a[j - 1];
            a[j] = v;
        }
        return;
    }
    int32_t *src = a, *dst = tmp;
    uint32_t max = (uint32_t)a[0];
    bool sorted = true; /* the frontier often activates its ops in order already */
    for (int32_t i = 1; i < n; i++) {
        sorted &= a[i - 1] <= a[i];
        max = (uint32_t)a[i] > max ? (uint32_t)a[i] : max;
    }
    if (sorted)
        return;
    int32_t bits = n < 4096 ? 8 : 11;
    uint32_t mask = (1u << bits) - 1;
    for (int32_t shift = 0; shift < 32 && (max >> shift) != 0; shift += bits) {
        int32_t cnt[2049];
        memset(cnt, 0, sizeof(int32_t) * (mask + 2));
        for (int32_t i = 0; i < n; i++)
            cnt[(((uint32_t)src[i] >> shift) & mask) + 1]++;
        for (uint32_t d = 0; d < mask; d++)
            cnt[d + 1] += cnt[d];
        for (int32_t i = 0; i < n; i++)
            dst[cnt[((uint32_t)src[i] >> shift) & mask]++] = src[i];
        int32_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != a)
        memcpy(a, src, sizeof(int32_t) * (size_t)n);
}

/* e->act[f]: whether an instruction with iflag f is a factor op that takes
 * part in this step (tier_active; with start, not settled), made when the
 * phase or start changes. */
static void set_activation(Engine *e, bool start)
{
    int32_t key = e->phase * 2 + start;
    if (e->act_key == key)
        return;
    e->act_key = key;
    for (int32_t f = 0; f < 256; f++)
        e->act[f] = (f & IF_FACTOR) && tier_active(e->phase, (PropTier)(f >> IF_TIER_SHIFT), start) &&
                    !(start && (f & IF_SETTLED));
}

/* The ops a step evaluates, gathered in locals (the engine's fields would be
 * reloaded after every store into its arrays). */
typedef struct Activation {
    const bool *act;           /* e->act */
    const uint8_t *iflag;
    int32_t *op_stamp, *ops;
    int32_t n_ops, cap_ops, step;
} Activation;

static inline void activate_op(Activation *ac, int32_t gi)
{
    if (!ac->act[ac->iflag[gi]] || ac->op_stamp[gi] == ac->step)
        return;
    ac->op_stamp[gi] = ac->step;
    GROW(ac->ops, ac->n_ops, ac->cap_ops);
    ac->ops[ac->n_ops++] = gi;
}

/* Everything next to leaf lf: identity neighbours (proposed at once), its
 * defining op and, for an array instruction, the ops that use it. */
static inline __attribute__((always_inline)) void activate_leaf(Engine *e, Activation *ac, int32_t lf, bool idents,
                                                                int32_t cause)
{
    if (idents) {
        for (int32_t k = e->nstart[lf]; k < e->nstart[lf + 1]; k++)
            propose_identity(e, lf, e->nbr[k], e->nvia[k]);
        for (int32_t k = e->bstart ? e->bstart[lf] : 0; e->bstart && k < e->bstart[lf + 1]; k++)
            propose_border(e, lf, e->bnbr[k], e->bvia[k]);
    }
    int32_t gi = e->linst[lf];
    if (gi != cause)
        activate_op(ac, gi);
    if (ac->iflag[gi] & IF_ARRAY)
        for (int32_t u = e->ustart[gi], end = e->ustart[gi + 1]; u < end; u++)
            if (e->users[u] != cause)
                activate_op(ac, e->users[u]);
}

/* One step: evaluate what the frontier (or, at a phase start, everything
 * changed this round) touches; apply. */
static void run_step(Engine *e, const int32_t *leaves, const int32_t *cause, int32_t n, bool start)
{
    e->step++;
    e->n_steps++;
    set_activation(e, start);
    Activation ac = {e->act, e->iflag, e->op_stamp, e->ops, 0, e->cap_ops, e->step};
    bool idents = !start || e->phase == 0; /* identity edges carry states at once: once per phase */
    for (int32_t k = 0; k < n; k++)
        activate_leaf(e, &ac, leaves[k], idents, cause ? cause[k] : -1);
    e->ops = ac.ops;
    e->n_ops = ac.n_ops;
    e->cap_ops = ac.cap_ops;
    /* in instruction order: the engine's per-instruction arrays are read
     * front to back.  The ops are those stamped with this step: when they
     * are many, a scan of the stamps lists them in order */
    if (e->n_ops > e->n_insts / 8) {
        int32_t k = 0;
        for (int32_t gi = 0; gi < e->n_insts; gi++)
            if (e->op_stamp[gi] == e->step)
                e->ops[k++] = gi;
    } else {
        if (e->n_ops > e->cap_ops_scratch) {
            e->cap_ops_scratch = e->cap_ops;
            e->ops_scratch = xrealloc(e->ops_scratch, sizeof(int32_t) * (size_t)e->cap_ops_scratch);
        }
        sort_ops(e->ops, e->ops_scratch, e->n_ops);
    }
    for (int32_t k = 0; k < e->n_ops; k++)
        eval_op(e, e->ops[k]);
    apply_step(e);
}

static void run_phases(Engine *e)
{
    for (e->phase = 0; e->phase < N_PHASES; e->phase++) {
        /* the changed list grows while we walk it: take a copy */
        int32_t n = e->n_changed;
        int32_t *start = xmalloc(sizeof(int32_t) * (size_t)(n ? n : 1));
        if (n > 0)
            memcpy(start, e->changed, sizeof(int32_t) * (size_t)n);
        run_step(e, start, NULL, n, true);
        free(start);
        int32_t *cur = NULL, *cause = NULL, cap = 0;
        while (e->n_front > 0) {
            int32_t nf = e->n_front;
            if (nf > cap) {
                cap = nf * 2;
                cur = xrealloc(cur, sizeof(int32_t) * (size_t)cap);
                cause = xrealloc(cause, sizeof(int32_t) * (size_t)cap);
            }
            memcpy(cur, e->front, sizeof(int32_t) * (size_t)nf);
            memcpy(cause, e->front_cause, sizeof(int32_t) * (size_t)nf);
            run_step(e, cur, cause, nf, false);
        }
        free(cur);
        free(cause);
    }
}

/* ================================================================ setup */

static void collect_leaf_shapes(const Shape *s, const Shape **out, int32_t *n)
{
    if (!shape_is_tuple(s)) {
        out[(*n)++] = s;
        return;
    }
    for (int32_t k = 0; k < s->n_elems; k++)
        collect_leaf_shapes(&s->elems[k], out, n);
}

/* Whether propagation ties leaves through op: identities and data flow. */
static bool is_special(HloOpcode op)
{
    switch (op) {
    case HLO_TUPLE:
    case HLO_GET_TUPLE_ELEMENT:
    case HLO_OPTIMIZATION_BARRIER:
    case HLO_CUSTOM_CALL:
    case HLO_WHILE:
    case HLO_CONDITIONAL:
    case HLO_CALL: return true;
    default: return false;
    }
}

/* Shape ids: equal for arrays of one element type and dims (the layout
 * aside), a distinct negative one for every other shape.  Open addressing
 * over the array ids. */
typedef struct ShapeIds {
    int32_t *slot;       /* cap entries: an array id, -1 = free */
    const Shape **rep;   /* [n_rep]: each array id's first shape */
    uint32_t cap;
    int32_t n_rep, cap_rep, n_other;
    int32_t recent[256]; /* 1 + the id last found for a cheap hash of the type, rank and outer dims, 0 */
} ShapeIds;

static uint64_t array_hash(const Shape *s)
{
    uint64_t h = hash_mix(hash_mix(0x9e3779b97f4a7c15ull, (uint64_t)s->type), (uint64_t)s->rank);
    for (int32_t d = 0; d < s->rank; d++)
        h = hash_mix(h, (uint64_t)s->dims[d]);
    return h;
}

static bool array_same(const Shape *a, const Shape *b)
{
    if (a->type != b->type || a->rank != b->rank)
        return false;
    for (int32_t d = 0; d < a->rank; d++) /* a few dims: no library call */
        if (a->dims[d] != b->dims[d])
            return false;
    return true;
}

static int32_t shape_id(ShapeIds *t, const Shape *s)
{
    if (!shape_is_array(s) || s->rank < 0 || s->rank > SPMDC_MAX_RANK)
        return -2 - t->n_other++;
    /* the shapes of a stack of layers repeat: first the id last found for
     * this cheap hash */
    uint64_t q = ((uint64_t)s->type << 8 | (uint64_t)s->rank) * 0x9e3779b97f4a7c15ull;
    if (s->rank > 0)
        q ^= ((uint64_t)s->dims[0] * 0xc2b2ae3d27d4eb4full) ^ ((uint64_t)s->dims[s->rank - 1] * 0x165667b19e3779f9ull);
    uint32_t r = (uint32_t)(q >> 56);
    if (t->recent[r] > 0 && array_same(t->rep[t->recent[r] - 1], s))
        return t->recent[r] - 1;
    if ((uint32_t)(t->n_rep + 1) * 2 > t->cap) {
        uint32_t cap = t->cap ? t->cap * 2 : 64;
        int32_t *slot = xmalloc(sizeof(int32_t) * cap);
        memset(slot, 0xff, sizeof(int32_t) * cap);
        for (uint32_t k = 0; k < t->cap; k++) {
            if (t->slot[k] < 0)
                continue;
            uint32_t j = (uint32_t)array_hash(t->rep[t->slot[k]]) & (cap - 1);
            while (slot[j] >= 0)
                j = (j + 1) & (cap - 1);
            slot[j] = t->slot[k];
        }
        free(t->slot);
        t->slot = slot;
        t->cap = cap;
    }
    uint32_t j = (uint32_t)array_hash(s) & (t->cap - 1);
    for (; t->slot[j] >= 0; j = (j + 1) & (t->cap - 1))
        if (array_same(t->rep[t->slot[j]], s)) {
            t->recent[r] = t->slot[j] + 1;
            return t->slot[j];
        }
    GROW(t->rep, t->n_rep, t->cap_rep);
    t->rep[t->n_rep] = s;
    t->slot[j] = t->n_rep;
    t->recent[r] = t->n_rep + 1;
    return t->n_rep++;
}

/* Instructions and leaves, module-wide, and the lists of special and
 * annotated instructions (one pass over the instructions). */
static void setup_index(Engine *e)
{
    HloModule *m = e->m;
    e->n_comps = m->n_comps;
    e->comp_first = ARENA_ARRAY(e->a, int32_t, m->n_comps + 1);
    int32_t n = 0;
    for (int32_t c = 0; c < m->n_comps; c++) {
        e->comp_first[c] = n;
        n += m->comps[c].n_insts;
    }
    e->comp_first[m->n_comps] = n;
    e->n_insts = n;
    e->icomp = ARENA_ARRAY(e->a, int32_t, n + 1);
    e->iflag = ARENA_ARRAY(e->a, uint8_t, n + 1);
    e->leaf0 = ARENA_ARRAY(e->a, int32_t, n + 1);
    e->op_stamp = ARENA_ARRAY(e->a, int32_t, n + 1);
    /* one pass: the lists have room for every instruction (pages never
     * written cost nothing), the leaf arrays grow when tuples add leaves */
    e->special = ARENA_ARRAY(e->a, int32_t, n + 1);
    e->sharded = ARENA_ARRAY(e->a, int32_t, n + 1);
    e->sid = ARENA_ARRAY(e->a, int32_t, n + 1);
    ShapeIds ids;
    memset(&ids, 0, sizeof ids);
    int32_t cap = n + 1, k = 0;
    e->lshape = ARENA_ARRAY(e->a, const Shape *, cap);
    e->lrank = ARENA_ARRAY(e->a, int8_t, cap);
    e->linst = ARENA_ARRAY(e->a, int32_t, cap);
    int32_t *icomp = e->icomp, *leaf0 = e->leaf0, *sid = e->sid, n_special = 0, n_sharded = 0;
    for (int32_t c = 0, gi = 0; c < m->n_comps; c++)
        for (int32_t i = 0; i < m->comps[c].n_insts; i++, gi++) {
            HLO_WALK_PREFETCH(&m->comps[c], i);
            const HloInst *in = &m->comps[c].insts[i];
            const Shape *sh = in->shape;
            icomp[gi] = c;
            leaf0[gi] = k;
            if (is_special(in->op))
                e->special[n_special++] = gi;
            if (in->sharding)
                e->sharded[n_sharded++] = gi;
            sid[gi] = shape_id(&ids, sh);
            if (!shape_is_tuple(sh)) {
                e->lshape[k] = sh;
                e->linst[k] = gi;
                e->lrank[k++] = (int8_t)sh->rank; /* a byte store: last */
                continue;
            }
            int32_t nl = shape_leaf_count(sh);
            if (k + nl + (n - gi) > cap) { /* room for this tuple and one leaf per later instruction */
                int32_t nc = (k + nl + (n - gi)) * 2;
                e->lshape = arena_realloc(e->a, e->lshape, sizeof(Shape *) * (size_t)cap, sizeof(Shape *) * (size_t)nc,
                                          _Alignof(const Shape *));
                e->lrank = arena_realloc(e->a, e->lrank, (size_t)cap, (size_t)nc, 1);
                e->linst = arena_realloc(e->a, e->linst, sizeof(int32_t) * (size_t)cap, sizeof(int32_t) * (size_t)nc,
                                         _Alignof(int32_t));
                cap = nc;
            }
            int32_t k0 = k;
            collect_leaf_shapes(sh, e->lshape, &k);
            for (int32_t l = k0; l < k; l++) {
                e->linst[l] = gi;
                e->lrank[l] = (int8_t)(shape_is_array(e->lshape[l]) ? e->lshape[l]->rank : 0);
            }
        }
    e->n_special = n_special;
    e->n_sharded = n_sharded;
    free(ids.slot);
    free(ids.rep);
    int32_t L = k;
    e->leaf0[n] = L;
    e->n_leaves = L;
    e->st = ARENA_ARRAY(e->a, int32_t, L + 1);
    e->lfl = ARENA_ARRAY(e->a, uint8_t, L + 1);
    e->aorg = ARENA_ARRAY(e->a, const int32_t *, L + 1);
    e->from = ARENA_ARRAY(e->a, int32_t, L + 1);
    e->via = ARENA_ARRAY(e->a, int32_t, L + 1);
    e->stamp = ARENA_ARRAY(e->a, int32_t, L + 1);
    e->pend = ARENA_ARRAY(e->a, int32_t, L + 1);
    e->n_props = 1; /* props[0] stands for none in pend and pnext */
    e->annx = ARENA_ARRAY(e->a, int32_t, L + 1);
    e->lorg = arena_alloc(e->a, sizeof(int32_t) * (size_t)(L + 1), _Alignof(int32_t));
    memset(e->lorg, 0xff, sizeof(int32_t) * (size_t)(L + 1));
}

/* Computations whose values are tied to their callers by data flow: the
 * entry, and the bodies, conditions, branches and callees of while,
 * conditional and call in them.  Others (reducers, comparators, ...) run on
 * replicated scalars. */
static bool *dataflow_comps(const Engine *e)
{
    const HloModule *m = e->m;
    bool *df = ARENA_ARRAY(e->a, bool, m->n_comps + 1);
    if (m->entry >= 0 && m->entry < m->n_comps)
        df[m->entry] = true;
    /* callees come before their callers: sweep the callers from the entry
     * down until nothing new is reached */
    for (bool grew = true; grew;) {
        grew = false;
        for (int32_t s = e->n_special - 1; s >= 0; s--) {
            int32_t gi = e->special[s];
            if (!df[e->icomp[gi]])
                continue;
            const HloInst *in = ginst(e, gi);
            const HloAttrs *a = hlo_attrs(in);
            int32_t refs[3] = {-1, -1, -1};
            if (in->op == HLO_WHILE) {
                refs[0] = a->body;
                refs[1] = a->condition;
            } else if (in->op == HLO_CALL) {
                refs[0] = a->to_apply;
            }
            for (int32_t r = 0; r < 3; r++)
                if (refs[r] >= 0 && refs[r] < m->n_comps && !df[refs[r]])
                    df[refs[r]] = grew = true;
            for (int32_t b = 0; in->op == HLO_CONDITIONAL && b < a->branches.n; b++) {
                int64_t bc = a->branches.v[b];
                if (bc >= 0 && bc < m->n_comps && !df[bc])
                    df[bc] = grew = true;
            }
        }
    }
    return df;
}

enum { NOT_ELEMENTWISE = -2 };

/* The arity of opcode op (hlo_opcode_arity) if its rule is elementwise,
 * else NOT_ELEMENTWISE. */
static int32_t elementwise_arity(HloOpcode op)
{
    return oprule_is_elementwise(op) ? hlo_opcode_arity(op) : NOT_ELEMENTWISE;
}

/* oprule_identity_map of factor op gi from the shape ids (the operands'
 * shapes are read only when their ids differ from the result's); arity is
 * elementwise_arity of its opcode. */
static bool identity_map(const Engine *e, const HloComputation *comp, const HloInst *in, int32_t gi, int32_t arity)
{
    if (arity == NOT_ELEMENTWISE || e->sid[gi] < 0)
        return false;
    if (arity >= 0 && in->n_operands != arity)
        return false;
    int32_t base = e->comp_first[e->icomp[gi]];
    for (int32_t k = 0; k < in->n_operands; k++) {
        int32_t o = in->operands[k];
        if (o < 0 || o >= comp->n_insts || e->sid[base + o] < 0)
            return false;
        if (e->sid[base + o] != e->sid[gi] && leaf_rank(e, e->leaf0[base + o]) != 0 &&
            !shape_same_dims(comp->insts[o].shape, in->shape))
            return false;
    }
    return true;
}

/* The rules' keys while they are assigned: per rule its opcode,
 * attributes, and shape ids of its result and operands. */
typedef struct RuleKeys {
    int32_t *slot;        /* cap entries: a rule index, -1 = free */
    uint64_t *hash;       /* [cap_rules] per rule */
    const HloAttrs **attrs;
    int32_t *start, *ids; /* per rule: ids[start[x] .. start[x+1]) = op, n, result sid, operand sids */
    int32_t n_ids, cap_ids, cap_start;
    int32_t *osid, cap_osid; /* the shape ids of the operands of the op being looked up */
    int32_t recent[256];     /* 1 + the rule last found for a cheap hash of (opcode, attributes, result), 0 */
    uint32_t cap;
} RuleKeys;

/* The rule index of factor op gi (its operands in range, their shape ids
 * in k->osid): one per distinct key, new ones unbuilt. */
static int32_t rule_index(Engine *e, RuleKeys *k, const HloInst *in, int32_t gi)
{
    int32_t nk = 3 + in->n_operands;
    const int32_t *osid = k->osid;
    /* a stack of layers repeats its ops: first the rule last found for
     * this opcode, attributes and result shape */
    uint32_t r = (uint32_t)(((uint64_t)(uintptr_t)in->attrs ^ (uint64_t)in->op * 0x9e3779b97f4a7c15ull ^
                             (uint64_t)(uint32_t)e->sid[gi] * 0xc2b2ae3d27d4eb4full) >>
                            56);
    if (k->recent[r] > 0) {
        int32_t x = k->recent[r] - 1;
        const int32_t *id = k->ids + k->start[x];
        bool same = k->attrs[x] == in->attrs && k->start[x + 1] - k->start[x] == nk && id[0] == (int32_t)in->op &&
                    id[1] == in->n_operands && id[2] == e->sid[gi];
        for (int32_t q = 0; q < in->n_operands && same; q++)
            same = id[3 + q] == osid[q];
        if (same)
            return x;
    }
    uint64_t h = hash_mix(hash_mix(hash_mix(0x51ed27u, (uint64_t)in->op), (uint64_t)(uintptr_t)in->attrs),
                          (uint64_t)in->n_operands);
    h = hash_mix(h, (uint64_t)(uint32_t)e->sid[gi]);
    for (int32_t j = 0; j < in->n_operands; j++)
        h = hash_mix(h, (uint64_t)(uint32_t)osid[j]);
    if ((uint32_t)(e->n_rules + 1) * 2 > k->cap) {
        uint32_t cap = k->cap ? k->cap * 2 : 64;
        int32_t *slot = xmalloc(sizeof(int32_t) * cap);
        memset(slot, 0xff, sizeof(int32_t) * cap);
        for (int32_t x = 0; x < e->n_rules; x++) {
            uint32_t j = (uint32_t)k->hash[x] & (cap - 1);
            while (slot[j] >= 0)
                j = (j + 1) & (cap - 1);
            slot[j] = x;
        }
        free(k->slot);
        k->slot = slot;
        k->cap = cap;
    }
    uint32_t j = (uint32_t)h & (k->cap - 1);
    for (; k->slot[j] >= 0; j = (j + 1) & (k->cap - 1)) {
        int32_t x = k->slot[j];
        const int32_t *id = k->ids + k->start[x];
        if (k->hash[x] != h || k->attrs[x] != in->attrs || k->start[x + 1] - k->start[x] != nk ||
            id[0] != (int32_t)in->op || id[1] != in->n_operands || id[2] != e->sid[gi])
            continue;
        bool same = true;
        for (int32_t q = 0; q < in->n_operands && same; q++)
            same = id[3 + q] == osid[q];
        if (same) {
            k->recent[r] = x + 1;
            return x;
        }
    }
    int32_t x = e->n_rules++;
    if (x + 1 >= e->cap_rules) {
        e->cap_rules = e->cap_rules ? e->cap_rules * 2 : 64;
        e->rules = xrealloc(e->rules, sizeof(OpRule) * (size_t)e->cap_rules);
        e->rstate = xrealloc(e->rstate, (size_t)e->cap_rules);
        e->rfirst = xrealloc(e->rfirst, sizeof(int32_t) * (size_t)e->cap_rules);
        k->hash = xrealloc(k->hash, sizeof(uint64_t) * (size_t)e->cap_rules);
        k->attrs = xrealloc((void *)k->attrs, sizeof(HloAttrs *) * (size_t)e->cap_rules);
        k->start = xrealloc(k->start, sizeof(int32_t) * (size_t)(e->cap_rules + 1));
    }
    e->rstate[x] = 0;
    e->rfirst[x] = gi;
    k->hash[x] = h;
    k->attrs[x] = in->attrs;
    if (x == 0)
        k->start[0] = 0;
    while (k->n_ids + nk > k->cap_ids) {
        k->cap_ids = k->cap_ids ? k->cap_ids * 2 : 256;
        k->ids = xrealloc(k->ids, sizeof(int32_t) * (size_t)k->cap_ids);
    }
    int32_t *id = k->ids + k->n_ids;
    id[0] = (int32_t)in->op;
    id[1] = in->n_operands;
    id[2] = e->sid[gi];
    for (int32_t q = 0; q < in->n_operands; q++)
        id[3 + q] = osid[q];
    k->n_ids += nk;
    k->start[x + 1] = k->n_ids;
    k->slot[j] = x;
    k->recent[r] = x + 1;
    return x;
}

/* Instruction classes, fixed results, the factor ops' rules and operand
 * leaves, and the factor-op users of every instruction (one pass over the
 * operands into a flat list, then a counting sort).  False if an operand
 * index is out of range (the IR verifier rejects such modules; nothing
 * propagates). */
static bool setup_classes(Engine *e, const bool *df)
{
    HloModule *m = e->m;
    int32_t n = e->n_insts, n_pairs = 0, n_opl = 0;
    /* room for two operands an instruction; in the pass's arena, whose pages
     * serve the next pass (pages.h) */
    int32_t cap_opl = 2 * n + 1024, cap_pairs = 2 * cap_opl;
    int32_t *pairs = ARENA_ARRAY(e->a, int32_t, cap_pairs); /* (operand, user) */
    int32_t *ustart = e->ustart = ARENA_ARRAY(e->a, int32_t, n + 1);
    int32_t *opl_start = e->opl_start = ARENA_ARRAY(e->a, int32_t, n + 1);
    int32_t *rid = e->rid = ARENA_ARRAY(e->a, int32_t, n + 1);
    int32_t *opl = ARENA_ARRAY(e->a, int32_t, cap_opl);
    const int32_t *leaf0 = e->leaf0, *sid = e->sid;
    uint8_t *iflag = e->iflag, *lfl = e->lfl;
    /* per opcode whose class does not depend on the instruction: its flags
     * but IF_IDMAP and IF_ARRAY (0xff: not seen yet) */
    uint8_t by_op[HLO_OPCODE_COUNT];
    memset(by_op, 0xff, sizeof by_op);
    int32_t arity[HLO_OPCODE_COUNT]; /* elementwise_arity, once per opcode (INT32_MIN: not yet) */
    for (int32_t op = 0; op < HLO_OPCODE_COUNT; op++)
        arity[op] = INT32_MIN;
    RuleKeys keys;
    memset(&keys, 0, sizeof keys);
    bool ok = true;
    for (int32_t c = 0, gi = 0; c < m->n_comps; c++) {
        const HloComputation *comp = &m->comps[c];
        int32_t base = e->comp_first[c], n_insts = comp->n_insts;
        for (int32_t i = 0; i < n_insts; i++, gi++) {
            HLO_WALK_PREFETCH(comp, i);
            const HloInst *in = &comp->insts[i];
            uint8_t f;
            if ((unsigned)in->op < HLO_OPCODE_COUNT && by_op[in->op] != 0xff && df[c]) {
                f = by_op[in->op];
            } else {
                OpRuleClass cls = oprule_class(m, c, i);
                f = (uint8_t)(oprule_tier(in->op) << IF_TIER_SHIFT);
                if (!df[c] || cls == RULE_OPAQUE)
                    f |= IF_FIXED;
                else if (cls == RULE_FACTORS)
                    f |= IF_FACTOR;
                else if (cls == RULE_IDENTITY || cls == RULE_DATAFLOW)
                    f |= IF_IDENTITY_EDGE;
                if (df[c] && (unsigned)in->op < HLO_OPCODE_COUNT && oprule_class_by_opcode(in->op))
                    by_op[in->op] = f;
            }
            if (f & IF_FACTOR) {
                int32_t ar = (unsigned)in->op < HLO_OPCODE_COUNT ? arity[in->op] : elementwise_arity(in->op);
                if (ar == INT32_MIN)
                    ar = arity[in->op] = elementwise_arity(in->op);
                if (identity_map(e, comp, in, gi, ar))
                    f |= IF_IDMAP;
            }
            if (sid[gi] >= 0)
                f |= IF_ARRAY;
            iflag[gi] = f;
            opl_start[gi] = n_opl;
            rid[gi] = -1;
            if (f & IF_FIXED)
                for (int32_t l = leaf0[gi]; l < leaf0[gi + 1]; l++)
                    lfl[l] |= LF_FIXED;
            if (!(f & IF_FACTOR))
                continue;
            int32_t no = in->n_operands;
            const int32_t *ops = in->operands;
            if (no > keys.cap_osid) {
                keys.cap_osid = no * 2;
                keys.osid = xrealloc(keys.osid, sizeof(int32_t) * (size_t)keys.cap_osid);
            }
            if (n_opl + no > cap_opl) {
                int32_t was = cap_opl;
                while (n_opl + no > cap_opl)
                    cap_opl *= 2;
                opl = arena_realloc(e->a, opl, sizeof(int32_t) * (size_t)was, sizeof(int32_t) * (size_t)cap_opl,
                                    _Alignof(int32_t));
            }
            if (n_pairs + 2 * no > cap_pairs) {
                int32_t was = cap_pairs;
                while (n_pairs + 2 * no > cap_pairs)
                    cap_pairs *= 2;
                pairs = arena_realloc(e->a, pairs, sizeof(int32_t) * (size_t)was, sizeof(int32_t) * (size_t)cap_pairs,
                                      _Alignof(int32_t));
            }
            for (int32_t k = 0; k < no; k++) {
                if (ops[k] < 0 || ops[k] >= n_insts) {
                    ok = false;
                    break;
                }
                int32_t o = base + ops[k];
                opl[n_opl++] = leaf0[o];
                keys.osid[k] = sid[o];
                if (k > 0 && ops[k - 1] == ops[k])
                    continue; /* the same operand twice in a row: one user entry */
                pairs[n_pairs++] = o;
                pairs[n_pairs++] = gi;
                ustart[o + 1]++;
            }
            if (!ok)
                break;
            rid[gi] = rule_index(e, &keys, in, gi);
        }
        if (!ok)
            break;
    }
    e->opl = opl;
    opl_start[n] = n_opl;
    free(keys.slot);
    free(keys.hash);
    free((void *)keys.attrs);
    free(keys.start);
    free(keys.ids);
    free(keys.osid);
    if (ok) {
        for (int32_t gi = 0; gi < n; gi++)
            ustart[gi + 1] += ustart[gi];
        int32_t *users = e->users = ARENA_ARRAY(e->a, int32_t, ustart[n] + 1);
        int32_t *fill = ARENA_ARRAY(e->a, int32_t, n + 1);
        memcpy(fill, ustart, sizeof(int32_t) * (size_t)n);
        for (int32_t p = 0; p < n_pairs; p += 2)
            users[fill[pairs[p]]++] = pairs[p + 1];
    }
    return ok;
}

typedef struct EdgeList {
    int32_t *a, *b, *via;
    int32_t n, cap;
} EdgeList;

static void push_edge(EdgeList *el, int32_t la, int32_t lb, int32_t via)
{
    if (el->n == el->cap) {
        el->cap = el->cap ? el->cap * 2 : 256;
        el->a = xrealloc(el->a, sizeof(int32_t) * (size_t)el->cap);
        el->b = xrealloc(el->b, sizeof(int32_t) * (size_t)el->cap);
        el->via = xrealloc(el->via, sizeof(int32_t) * (size_t)el->cap);
    }
    el->a[el->n] = la;
    el->b[el->n] = lb;
    el->via[el->n++] = via;
}

static void add_edge(Engine *e, EdgeList *el, int32_t la, int32_t lb, int32_t via)
{
    if (la != lb && shape_same_dims(e->lshape[la], e->lshape[lb]))
        push_edge(el, la, lb, via);
}

/* The edges of el as neighbour lists over the leaves (CSR, both ways:
 * *start[l] .. *start[l + 1] index *nbr and *via); frees el's arrays. */
static void edges_csr(Engine *e, EdgeList *el, int32_t **start_out, int32_t **nbr_out, int32_t **via_out)
{
    int32_t L = e->n_leaves;
    int32_t *start = ARENA_ARRAY(e->a, int32_t, L + 1);
    for (int32_t k = 0; k < el->n; k++) {
        start[el->a[k] + 1]++;
        start[el->b[k] + 1]++;
    }
    for (int32_t l = 0; l < L; l++)
        start[l + 1] += start[l];
    int32_t *nbr = ARENA_ARRAY(e->a, int32_t, start[L] + 1);
    int32_t *via = ARENA_ARRAY(e->a, int32_t, start[L] + 1);
    int32_t *fill = ARENA_ARRAY(e->a, int32_t, L + 1);
    memcpy(fill, start, sizeof(int32_t) * (size_t)L);
    for (int32_t k = 0; k < el->n; k++) {
        nbr[fill[el->a[k]]] = el->b[k];
        via[fill[el->a[k]]++] = el->via[k];
        nbr[fill[el->b[k]]] = el->a[k];
        via[fill[el->b[k]]++] = el->via[k];
    }
    free(el->a);
    free(el->b);
    free(el->via);
    el->a = el->b = el->via = NULL;
    el->n = el->cap = 0;
    *start_out = start;
    *nbr_out = nbr;
    *via_out = via;
}

/* Leaf l of instruction j of computation c and leaf l of instruction gi,
 * for l < n, tied (each leaf of both must exist). */
static void tie_leaves(Engine *e, EdgeList *el, int32_t ga, int32_t offa, int32_t gb, int32_t offb, int32_t n,
                       int32_t via)
{
    if (ga < 0 || gb < 0 || e->leaf0[ga] + offa + n > e->leaf0[ga + 1] || e->leaf0[gb] + offb + n > e->leaf0[gb + 1])
        return;
    for (int32_t l = 0; l < n; l++)
        add_edge(e, el, e->leaf0[ga] + offa + l, e->leaf0[gb] + offb + l, via);
}

/* Global index of parameter k of computation c, or -1. */
static int32_t comp_param(const Engine *e, int32_t c, int64_t k, int32_t **cache)
{
    if (c < 0 || c >= e->n_comps)
        return -1;
    const HloComputation *comp = &e->m->comps[c];
    if (!cache[c]) {
        int32_t np = 0;
        for (int32_t i = 0; i < comp->n_insts; i++)
            if (comp->insts[i].op == HLO_PARAMETER && comp->insts[i].param_number >= np)
                np = (int32_t)comp->insts[i].param_number + 1;
        cache[c] = ARENA_ARRAY(e->a, int32_t, np + 2);
        cache[c][0] = np;
        for (int32_t j = 0; j < np; j++)
            cache[c][j + 1] = -1;
        for (int32_t i = 0; i < comp->n_insts; i++)
            if (comp->insts[i].op == HLO_PARAMETER)
                cache[c][comp->insts[i].param_number + 1] = e->comp_first[c] + i;
    }
    return k >= 0 && k < cache[c][0] ? cache[c][k + 1] : -1;
}

static int32_t comp_root(const Engine *e, int32_t c)
{
    if (c < 0 || c >= e->n_comps || e->m->comps[c].root < 0)
        return -1;
    return e->comp_first[c] + e->m->comps[c].root;
}

static int32_t nleaves(const Engine *e, int32_t gi) { return e->leaf0[gi + 1] - e->leaf0[gi]; }

/* The identity edges: leaf-identity ops and the data-flow ties. */
static void setup_identities(Engine *e, const bool *df)
{
    HloModule *m = e->m;
    EdgeList el = {0}, bl = {0};
    int32_t **pcache = ARENA_ARRAY(e->a, int32_t *, m->n_comps + 1);
    for (int32_t sp = 0; sp < e->n_special; sp++) {
        int32_t gi = e->special[sp], c = e->icomp[gi], i = gi - e->comp_first[c];
        if (!df[c])
            continue;
        const HloComputation *comp = &m->comps[c];
        int32_t base = e->comp_first[c];
        const HloInst *in = &comp->insts[i];
        const HloAttrs *a = hlo_attrs(in);
        int32_t nl = nleaves(e, gi);
        bool in_range = true;
        for (int32_t k = 0; k < in->n_operands; k++)
            in_range &= in->operands[k] >= 0 && in->operands[k] < comp->n_insts;
        if (!in_range)
            continue;
        switch (in->op) {
        case HLO_TUPLE: {
            int32_t off = 0;
            for (int32_t k = 0; k < in->n_operands; k++) {
                int32_t o = base + in->operands[k], n = nleaves(e, o);
                tie_leaves(e, &el, gi, off, o, 0, n, gi);
                off += n;
            }
            break;
        }
        case HLO_GET_TUPLE_ELEMENT: {
            int32_t o = base + in->operands[0];
            const Shape *s = comp->insts[in->operands[0]].shape;
            if (!shape_is_tuple(s) || a->index < 0 || a->index >= s->n_elems)
                break;
            int32_t off = shape_leaf_offset(s, (int32_t)a->index, &e->gte_leaves, e->a);
            tie_leaves(e, &el, gi, 0, o, off, nl, gi);
            break;
        }
        case HLO_OPTIMIZATION_BARRIER:
            tie_leaves(e, &el, gi, 0, base + in->operands[0], 0, nl, gi);
            break;
        case HLO_CUSTOM_CALL: {
            OpRuleClass cls = oprule_class(m, c, i);
            if (cls == RULE_IDENTITY && in->n_operands == 1)
                tie_leaves(e, &el, gi, 0, base + in->operands[0], 0, nl, gi);
            int32_t o = in->n_operands == 1 ? base + in->operands[0] : -1;
            if (cls == RULE_MANUAL_BORDER && o >= 0 && nl == 1 && nleaves(e, o) == 1 &&
                shape_is_array(e->lshape[e->leaf0[gi]]) && shape_is_array(e->lshape[e->leaf0[o]]) &&
                leaf_rank(e, e->leaf0[gi]) == leaf_rank(e, e->leaf0[o]))
                push_edge(&bl, e->leaf0[o], e->leaf0[gi], gi); /* the dims map one to one */
            break;
        }
        case HLO_WHILE:
            tie_leaves(e, &el, gi, 0, base + in->operands[0], 0, nl, gi);
            tie_leaves(e, &el, gi, 0, comp_param(e, a->body, 0, pcache), 0, nl, gi);
            tie_leaves(e, &el, gi, 0, comp_root(e, a->body), 0, nl, gi);
            tie_leaves(e, &el, gi, 0, comp_param(e, a->condition, 0, pcache), 0, nl, gi);
            break;
        case HLO_CONDITIONAL:
            for (int32_t b = 0; b < a->branches.n; b++) {
                int32_t bc = (int32_t)a->branches.v[b];
                if (b + 1 < in->n_operands) {
                    int32_t o = base + in->operands[b + 1];
                    tie_leaves(e, &el, o, 0, comp_param(e, bc, 0, pcache), 0, nleaves(e, o), gi);
                }
                tie_leaves(e, &el, gi, 0, comp_root(e, bc), 0, nl, gi);
            }
            break;
        case HLO_CALL:
            for (int32_t k = 0; k < in->n_operands; k++) {
                int32_t o = base + in->operands[k];
                tie_leaves(e, &el, o, 0, comp_param(e, a->to_apply, k, pcache), 0, nleaves(e, o), gi);
            }
            tie_leaves(e, &el, gi, 0, comp_root(e, a->to_apply), 0, nl, gi);
            break;
        default: break;
        }
    }
    edges_csr(e, &el, &e->nstart, &e->nbr, &e->nvia);
    if (bl.n > 0) /* else e->bstart stays NULL */
        edges_csr(e, &bl, &e->bstart, &e->bnbr, &e->bvia);
}

/* Leaf l of a bound sharding (a non-tuple one applies to every leaf). */
static const Sharding *sharding_at(const Sharding *s, int32_t l)
{
    if (s->kind != SHARDING_TUPLE)
        return s;
    if (l >= s->n_elems || !s->elems || s->elems[l].kind == SHARDING_TUPLE)
        return NULL;
    return &s->elems[l];
}

/* The per-atom origin table of an earlier propagation's sharding of array
 * instruction gi (dims of a per-dim table, else its origin everywhere). */
static const int32_t *seeded_origins(Engine *e, int32_t gi, const Tiling *t, int32_t org)
{
    const HloInst *in = ginst(e, gi);
    int32_t base = e->comp_first[e->icomp[gi]], n = e->m->comps[e->icomp[gi]].n_insts;
    const int32_t *dims = shape_is_array(in->shape) ? in->sharding_dim_origin : NULL;
    if (org < 0 && !dims)
        return NULL;
    int32_t *tab = ARENA_ARRAY(e->a, int32_t, e->n_atoms > 0 ? e->n_atoms : 1);
    for (int32_t k = 0; k < e->n_atoms; k++)
        tab[k] = org;
    for (int32_t d = 0; dims && d < t->rank && d < in->shape->rank; d++) {
        const int8_t *a = tiling_dim(t, d);
        int32_t od = dims[d] >= 0 && dims[d] < n ? base + dims[d] : -1;
        for (int32_t k = 0; k < tiling_dim_n(t, d); k++)
            tab[a[k]] = od;
    }
    return tab;
}

/* A user annotation's Ann and visible state, by its bound sharding and
 * the leaf's rank. */
typedef struct AnnCache {
    const Sharding *s;
    int32_t rank, annx, vis;
} AnnCache;

enum { ANN_CACHE = 16 };

/* Atoms along which sharding s (NULL: none) is manual. */
static uint32_t manual_atoms_of(const Engine *e, const Sharding *s)
{
    uint32_t all = e->n_atoms >= 32 ? 0xffffffffu : (1u << e->n_atoms) - 1;
    if (!s)
        return 0;
    return s->kind == SHARDING_MANUAL ? all : s->manual_atoms & all;
}

/* Per instruction, the atoms its annotation's open dims may not take because
 * the instruction is the full side of a manual region's border: the operand
 * of an SPMDFullToShardShape and the result of an SPMDShardToFullShape.  The
 * annotation there fixes the layout along the atoms the border starts or
 * ends (each device's piece, as in_specs and out_specs say); an open dim
 * that took one of them would describe pieces the region does not hold
 * (partition_manual.c checks the two agree).  NULL when there is no border. */
static uint32_t *border_forbid(Engine *e)
{
    uint32_t *f = NULL;
    for (int32_t sp = 0; sp < e->n_special; sp++) { /* custom-calls are special (is_special) */
        int32_t gi = e->special[sp];
        const HloInst *in = ginst(e, gi);
        bool to_shard = hlo_is_custom_call(in, "SPMDFullToShardShape");
        if ((!to_shard && !hlo_is_custom_call(in, "SPMDShardToFullShape")) || in->n_operands != 1)
            continue;
        int32_t og = e->comp_first[e->icomp[gi]] + in->operands[0];
        const Sharding *inner = to_shard ? in->sharding : ginst(e, og)->sharding;
        const Sharding *outer = to_shard ? ginst(e, og)->sharding : in->sharding;
        uint32_t ends = manual_atoms_of(e, inner) & ~manual_atoms_of(e, outer);
        if (!ends)
            continue;
        if (!f)
            f = ARENA_ARRAY(e->a, uint32_t, e->n_insts + 1);
        f[to_shard ? og : gi] |= ends;
    }
    return f;
}

static void setup_states(Engine *e)
{
    HloModule *m = e->m;
    AnnCache cache[ANN_CACHE];
    memset(cache, 0, sizeof cache);
    const uint32_t *bforbid = border_forbid(e);
    for (int32_t x = 0; x < e->n_sharded; x++) {
        int32_t gi = e->sharded[x], c = e->icomp[gi];
        if (x + 16 < e->n_sharded) { /* the records are far apart: ask for them ahead */
            const HloInst *ahead = ginst(e, e->sharded[x + 16]);
            __builtin_prefetch(&ahead->sharding_from_user);
            __builtin_prefetch(&ahead->sharding);
        }
        const HloInst *in = ginst(e, gi);
        bool user = in->sharding_from_user;
        if (!user && (e->iflag[gi] & IF_FIXED))
            continue;
        HloRef ref;
        int32_t org = user ? gi
                      : hlo_origin_ref(m, c, in->sharding_origin, &ref) ? e->comp_first[ref.comp] + ref.inst
                                                                          : -1;
        for (int32_t l = e->leaf0[gi]; l < e->leaf0[gi + 1]; l++) {
            const Sharding *s = sharding_at(in->sharding, l - e->leaf0[gi]);
            if (user && s && s->kind != SHARDING_MANUAL && s->manual_atoms)
                e->any_manual_atoms = true;
            if (!s || !leaf_is_array(e, l))
                continue;
            /* shared shardings (bind_shardings) share their annotation */
            uint32_t extra = bforbid ? bforbid[gi] : 0;
            AnnCache *ac = &cache[((uintptr_t)s >> 4 ^ (uintptr_t)leaf_rank(e, l)) & (ANN_CACHE - 1)];
            if (user && !extra && ac->s == s && ac->rank == leaf_rank(e, l)) {
                e->annx[l] = ac->annx; /* as stored: 1 + index */
                e->lorg[l] = gi;
                e->st[l] = ac->vis;
                continue;
            }
            if (s->kind == SHARDING_MANUAL) {
                e->st[l] = ST_MANUAL;
                e->lorg[l] = org;
                if (user)
                    e->lfl[l] |= LF_FIXED;
                continue;
            }
            Tiling t;
            if (!sharding_to_tiling(s, leaf_rank(e, l), &t)) {
                if (user)
                    e->lfl[l] |= LF_FIXED;
                continue;
            }
            uint32_t partial = t.partial;
            t = tiling_strip_partial(t);
            if (!user) {
                if (tiling_n_atoms(&t) == 0)
                    continue;
                e->st[l] = pool_add(e, &t);
                e->lorg[l] = org;
                e->aorg[l] = seeded_origins(e, gi, &t, org);
                continue;
            }
            if (s->kind == SHARDING_MAXIMAL) {
                e->lfl[l] |= LF_FIXED;
                e->lorg[l] = org;
                e->st[l] = pool_add(e, &t);
                continue;
            }
            GROW(e->anns, e->n_anns, e->cap_anns);
            Ann *an = &e->anns[e->n_anns];
            e->annx[l] = 1 + e->n_anns++;
            e->lorg[l] = gi;
            memset(an, 0, sizeof *an);
            an->t = t;
            an->open = s->open_dims & dims_mask(t.rank);
            an->forbid = s->replicated_atoms | partial | s->manual_atoms | extra;
            for (int32_t d = 0; d < t.rank; d++)
                an->prio[d] = s->priority[d] ? (uint8_t)(s->priority[d] - 1) : 0;
            /* round 0 sees only the dims of priority 0 */
            Tiling vis = t;
            for (int32_t d = 0; d < t.rank; d++)
                if (an->prio[d] > 0)
                    tiling_set_dim(&vis, d, NULL, 0);
            e->st[l] = pool_add(e, &vis);
            ac->s = extra ? NULL : s; /* a border's Ann is its own */
            ac->rank = leaf_rank(e, l);
            ac->annx = e->annx[l]; /* as stored */
            ac->vis = e->st[l];
        }
    }
}

/* Partially manual values (shard_map over some mesh axes, the others left
 * automatic): e->lman[l] gets the atoms along which leaf l is manual.  The
 * sources are the annotations that are manual along some atoms but not all
 * (a region's SPMDFullToShardShape, its Sharding custom-calls); a factor
 * op's results are manual along the atoms of its manual operands, and
 * identity edges tie leaves that are one value.  Nothing crosses a border:
 * each side has its own annotation, and an SPMDShardToFullShape ends the
 * region.  A worklist over those edges; a leaf changes at most once per
 * atom.  e->lman stays NULL when no value is partially manual (fully manual
 * values are ST_MANUAL). */
static void setup_manual(Engine *e)
{
    uint32_t all = e->n_atoms >= 32 ? 0xffffffffu : (1u << e->n_atoms) - 1;
    int32_t *queue = NULL, nq = 0, cap = 0;
    if (!e->any_manual_atoms)
        return; /* no annotation is partially manual */
    for (int32_t x = 0; x < e->n_sharded; x++) {
        int32_t gi = e->sharded[x];
        const HloInst *in = ginst(e, gi);
        if (!in->sharding_from_user)
            continue;
        for (int32_t l = e->leaf0[gi]; l < e->leaf0[gi + 1]; l++) {
            const Sharding *sh = sharding_at(in->sharding, l - e->leaf0[gi]);
            uint32_t man = sh && sh->kind != SHARDING_MANUAL ? sh->manual_atoms & all : 0;
            if (!man || man == all || (e->lfl[l] & LF_FIXED) || !shape_is_array(e->lshape[l]))
                continue;
            if (!e->lman)
                e->lman = ARENA_ARRAY(e->a, uint32_t, e->n_leaves + 1);
            e->lman[l] |= man;
            GROW(queue, nq, cap);
            queue[nq++] = l;
        }
    }
    for (int32_t q = 0; q < nq; q++) {
        int32_t l = queue[q], gi = e->linst[l];
        uint32_t man = e->lman[l];
        for (int32_t k = e->nstart[l]; k < e->nstart[l + 1]; k++) {
            int32_t n = e->nbr[k];
            if ((e->lman[n] | man) != e->lman[n] && !(e->lfl[n] & LF_FIXED)) {
                e->lman[n] |= man;
                GROW(queue, nq, cap);
                queue[nq++] = n;
            }
        }
        if (!(e->iflag[gi] & IF_ARRAY))
            continue; /* a tuple's leaves reach their users through identity edges */
        for (int32_t u = e->ustart[gi]; u < e->ustart[gi + 1]; u++)
            for (int32_t r = e->leaf0[e->users[u]]; r < e->leaf0[e->users[u] + 1]; r++)
                if ((e->lman[r] | man) != e->lman[r] && !(e->lfl[r] & LF_FIXED)) {
                    e->lman[r] |= man;
                    GROW(queue, nq, cap);
                    queue[nq++] = r;
                }
    }
    free(queue);
}

/* ================================================================ results */

static void final_leaf(Sharding *out, const Engine *e, int32_t lf, bool named)
{
    if (e && e->st[lf] == ST_MANUAL) {
        *out = sharding_replicated();
        out->kind = SHARDING_MANUAL;
    } else if (e && has_tiling(e, lf)) {
        *out = sharding_from_tiling(state(e, lf));
        out->tile.rank = (int8_t)leaf_rank(e, lf);
    } else {
        *out = sharding_replicated();
    }
    if (e && out->kind == SHARDING_REPLICATED)
        out->tile.rank = (int8_t)(leaf_is_array(e, lf) ? leaf_rank(e, lf) : 0);
    if (e && e->lman && out->kind != SHARDING_MANUAL)
        out->manual_atoms = e->lman[lf]; /* manual along these, the tiling on the others */
    out->named_form = named;
}

/* The annotation of instruction in, with the leaves propagation extended
 * (open dims) replaced by their grown tilings (partial atoms kept). */
static Sharding *extended_annotation(const Engine *e, const HloInst *in, int32_t gi)
{
    HloModule *m = e->m;
    Sharding *s = ARENA_NEW(m->arena, Sharding);
    *s = *in->sharding;
    int32_t nl = nleaves(e, gi);
    if (shape_is_tuple(in->shape)) {
        s->kind = SHARDING_TUPLE;
        s->n_elems = nl;
        s->elems = ARENA_ARRAY(m->arena, Sharding, nl ? nl : 1);
        for (int32_t l = 0; l < nl; l++) {
            const Sharding *src = sharding_at(in->sharding, l);
            s->elems[l] = src ? *src : sharding_replicated();
        }
    }
    for (int32_t l = 0; l < nl; l++) {
        int32_t lf = e->leaf0[gi] + l;
        if (!(e->lfl[lf] & LF_EXTENDED))
            continue;
        Sharding *t = shape_is_tuple(in->shape) ? &s->elems[l] : s;
        uint32_t partial = t->tile.partial;
        uint8_t kind = t->tile.kind;
        bool named = t->named_form;
        uint32_t open = t->open_dims, rep = t->replicated_atoms, man = t->manual_atoms;
        uint8_t prio[SPMDC_MAX_RANK];
        memcpy(prio, t->priority, sizeof prio);
        *t = sharding_tiled(leaf_rank(e, lf));
        t->tile = *state(e, lf);
        t->tile.partial = partial;
        t->tile.kind = kind;
        t->named_form = named;
        t->open_dims = open;
        t->replicated_atoms = rep;
        t->manual_atoms = man;
        memcpy(t->priority, prio, sizeof prio);
        sharding_normalize(t);
    }
    return s;
}

/* Local index of global instruction o if it is in computation c, else -1. */
/* materialize's provenance state: dim_origins' memo (DIM_ORIGIN_SLOTS
 * entries), and the origin code of each instruction that an origin in
 * another computation names (other[gi]; 0: none yet; made at the first). */
typedef struct Origins {
    HloModule *m;
    const Engine *e;
    struct DimOrigins *seen;
    int32_t *other;
} Origins;

/* The origin code (HloInst.sharding_origin) in computation c of global
 * instruction o (-1: none): its index when it is in c, else the module's
 * code for it (hlo_add_origin, one per instruction). */
static int32_t origin_code(Origins *og, int32_t o, int32_t c)
{
    const Engine *e = og->e;
    if (o < 0)
        return -1;
    int32_t oc = e->icomp[o];
    if (oc == c)
        return o - e->comp_first[c];
    if (!og->other)
        og->other = xcalloc((size_t)e->n_insts + 1, sizeof(int32_t));
    if (!og->other[o])
        og->other[o] = hlo_add_origin(og->m, oc, o - e->comp_first[oc]);
    return og->other[o];
}

/* dim_origins' tables by what they are made of (the leaf's state, origin
 * table and origin, and the computation): leaves that share an origin
 * table share the result, in the module arena, read only. */
enum { DIM_ORIGIN_SLOTS = 256 };
typedef struct DimOrigins {
    const int32_t *aorg; /* NULL: empty slot */
    int32_t st, lorg, c;
    const int32_t *tab;
} DimOrigins;

/* Per dim of array leaf lf, the annotation that split it (its major
 * atom's origin), as local indices in computation c; NULL when every split
 * dim came from the leaf's origin. */
static const int32_t *dim_origins(Origins *og, int32_t lf, int32_t c)
{
    HloModule *m = og->m;
    const Engine *e = og->e;
    if (!has_tiling(e, lf) || !e->aorg[lf])
        return NULL;
    uint64_t h = hash_mix(hash_mix(hash_mix((uint64_t)(uintptr_t)e->aorg[lf], (uint64_t)e->st[lf]),
                                   (uint64_t)(uint32_t)e->lorg[lf]), (uint64_t)c);
    DimOrigins *slot = &og->seen[(h >> 24) & (DIM_ORIGIN_SLOTS - 1)];
    if (slot->aorg == e->aorg[lf] && slot->st == e->st[lf] && slot->lorg == e->lorg[lf] && slot->c == c)
        return slot->tab;
    *slot = (DimOrigins){e->aorg[lf], e->st[lf], e->lorg[lf], c, NULL};
    const Tiling *s = state(e, lf);
    int32_t o[SPMDC_MAX_RANK];
    bool same = true;
    int32_t own = origin_code(og, e->lorg[lf], c);
    for (int32_t d = 0; d < s->rank; d++) {
        int8_t a = tiling_dim_n(s, d) > 0 ? tiling_dim(s, d)[0] : -1;
        o[d] = a >= 0 ? origin_code(og, e->aorg[lf][a], c) : -1;
        same &= tiling_dim_n(s, d) == 0 || o[d] == own;
    }
    slot->tab = same ? NULL : arena_memdup(m->arena, o, sizeof(int32_t) * (size_t)s->rank);
    return slot->tab;
}

/* The provenance of instruction i of computation c (hlo.h): an annotation
 * is its own origin; an inferred sharding the origin of its first leaf that
 * has one (arrays: and per dim when the dims came from different
 * annotations). */
static void record_origin(Origins *og, int32_t c, int32_t i)
{
    const Engine *e = og->e;
    HloInst *in = &og->m->comps[c].insts[i];
    in->sharding_origin = in->sharding_from_user && in->sharding ? i : -1;
    in->sharding_dim_origin = NULL;
    if (!e || in->sharding_origin >= 0)
        return;
    int32_t gi = e->comp_first[c] + i;
    for (int32_t lf = e->leaf0[gi]; lf < e->leaf0[gi + 1] && in->sharding_origin < 0; lf++)
        if (e->st[lf] != ST_NONE && !(e->lfl[lf] & LF_FIXED))
            in->sharding_origin = origin_code(og, e->lorg[lf], c);
    if (e->sid[gi] >= 0 && nleaves(e, gi) == 1)
        in->sharding_dim_origin = dim_origins(og, e->leaf0[gi], c);
}

/* The shared sharding of array leaf lf (one per distinct final state, in
 * the module arena: shardings are never changed in place). */
static inline __attribute__((always_inline)) Sharding *shared_leaf(HloModule *m, const Engine *e, int32_t lf, bool named,
                                                                    Sharding **by_pool, Sharding **by_rank)
{
    int32_t st = e ? e->st[lf] : ST_NONE;
    if (e && e->lman && e->lman[lf] && st != ST_MANUAL) { /* a few values: one sharding each */
        Sharding *s = ARENA_NEW(m->arena, Sharding);
        final_leaf(s, e, lf, named);
        return s;
    }
    if (st >= ST_FIRST && by_pool[st])
        return by_pool[st];
    int32_t rank = e ? (leaf_is_array(e, lf) ? leaf_rank(e, lf) : 0) : 0;
    if (st == ST_NONE && by_rank[rank])
        return by_rank[rank];
    if (st == ST_MANUAL && by_rank[SPMDC_MAX_RANK + 1])
        return by_rank[SPMDC_MAX_RANK + 1];
    Sharding *s = ARENA_NEW(m->arena, Sharding);
    final_leaf(s, e, lf, named);
    if (st >= ST_FIRST)
        by_pool[st] = s;
    else
        by_rank[st == ST_MANUAL ? SPMDC_MAX_RANK + 1 : rank] = s;
    return s;
}

/* Writes every instruction's sharding (annotations are kept as they are
 * unless propagation extended an open dim; arrays with equal shardings
 * share one Sharding) and its provenance. */
static void materialize(HloModule *m, const Engine *e, bool named)
{
    Sharding **by_pool = e ? xcalloc((size_t)e->n_pool + 1, sizeof(Sharding *)) : NULL;
    Origins og = {m, e, xcalloc(DIM_ORIGIN_SLOTS, sizeof(DimOrigins)), NULL};
    m->n_origins = 0; /* every origin below is made again */
    Sharding *by_rank[SPMDC_MAX_RANK + 2] = {NULL};
    for (int32_t c = 0; c < m->n_comps; c++) {
        HloComputation *comp = &m->comps[c];
        for (int32_t i = 0; i < comp->n_insts; i++) {
            HLO_WALK_PREFETCH(comp, i);
            HloInst *in = &comp->insts[i];
            int32_t gi = e ? e->comp_first[c] + i : -1;
            if (in->sharding_from_user && in->sharding) {
                bool ext = false;
                for (int32_t l = e ? e->leaf0[gi] : 0; e && l < e->leaf0[gi + 1]; l++)
                    ext |= (e->lfl[l] & LF_EXTENDED) != 0;
                if (ext)
                    in->sharding = extended_annotation(e, in, gi);
                record_origin(&og, c, i);
                continue;
            }
            if (e && e->sid[gi] >= 0) { /* an inferred array: record_origin's case of one leaf */
                int32_t lf = e->leaf0[gi], st = e->st[lf];
                in->sharding = shared_leaf(m, e, lf, named, by_pool, by_rank);
                in->sharding_origin = st != ST_NONE && !(e->lfl[lf] & LF_FIXED) ? origin_code(&og, e->lorg[lf], c) : -1;
                in->sharding_dim_origin = st >= ST_FIRST && e->aorg[lf] ? dim_origins(&og, lf, c) : NULL;
                continue;
            }
            if (e ? !shape_is_tuple(in->shape) : !shape_is_tuple(in->shape)) {
                if (e) {
                    in->sharding = shared_leaf(m, e, e->leaf0[gi], named, by_pool, by_rank);
                } else {
                    Sharding *s = ARENA_NEW(m->arena, Sharding);
                    *s = sharding_replicated();
                    s->tile.rank = (int8_t)(shape_is_array(in->shape) ? in->shape->rank : 0);
                    s->named_form = named;
                    in->sharding = s;
                }
                record_origin(&og, c, i);
                continue;
            }
            int32_t nl = shape_leaf_count(in->shape);
            Sharding *s = ARENA_NEW(m->arena, Sharding);
            s->kind = SHARDING_TUPLE;
            s->n_elems = nl;
            s->named_form = named;
            s->elems = nl ? ARENA_ARRAY(m->arena, Sharding, nl) : NULL;
            const Shape **ls = e ? NULL : ARENA_ARRAY(m->arena, const Shape *, nl + 1);
            int32_t k = 0;
            if (ls)
                collect_leaf_shapes(in->shape, ls, &k);
            for (int32_t l = 0; l < nl; l++) {
                if (e) {
                    final_leaf(&s->elems[l], e, e->leaf0[gi] + l, named);
                } else {
                    s->elems[l] = sharding_replicated();
                    s->elems[l].tile.rank = (int8_t)(shape_is_array(ls[l]) ? ls[l]->rank : 0);
                    s->elems[l].named_form = named;
                }
            }
            in->sharding = s;
            record_origin(&og, c, i);
        }
    }
    free(og.seen);
    free(og.other);
    free(by_pool);
}

/* Whether the input wrote its shardings in the named (mesh) form. */
static bool module_uses_named_form(const HloModule *m)
{
    for (int32_t ci = 0; ci < m->n_comps; ci++)
        for (int32_t i = 0; i < m->comps[ci].n_insts; i++) {
            HLO_WALK_PREFETCH(&m->comps[ci], i);
            const HloInst *in = &m->comps[ci].insts[i];
            if (!in->sharding_from_user || !in->sharding)
                continue;
            const Sharding *s = in->sharding;
            if (s->named_form || (s->kind == SHARDING_TUPLE && s->n_elems > 0 && s->elems[0].named_form))
                return true;
        }
    return false;
}

/* ================================================================ the pass */

static int cmp_u8(const void *a, const void *b) { return (int)*(const uint8_t *)a - (int)*(const uint8_t *)b; }

static void run(Engine *e)
{
    /* priorities present, ascending (0 always) */
    uint8_t prios[257];
    int32_t np = 0;
    bool seen[256] = {false};
    seen[0] = true;
    prios[np++] = 0;
    for (int32_t k = 0; k < e->n_anns; k++)
        for (int32_t d = 0; d < e->anns[k].t.rank; d++)
            if (!seen[e->anns[k].prio[d]]) {
                seen[e->anns[k].prio[d]] = true;
                prios[np++] = e->anns[k].prio[d];
            }
    qsort(prios, (size_t)np, 1, cmp_u8);
    e->ann_closed = ARENA_ARRAY(e->a, uint32_t, e->n_anns + 1);
    e->ann_forbid = ARENA_ARRAY(e->a, uint32_t, e->n_anns + 1);
    for (int32_t l = 0; l < e->n_leaves; l++)
        if (e->st[l] != ST_NONE) {
            e->stamp[l] = 1;
            GROW(e->changed, e->n_changed, e->cap_changed);
            e->changed[e->n_changed++] = l;
        }
    for (int32_t r = 0; r < np; r++) {
        e->round = r;
        e->prio = prios[r];
        round_closures(e);
        if (r > 0) {
            /* the dims of this priority appear on their values */
            e->n_changed = 0;
            for (int32_t l = 0; l < e->n_leaves; l++) {
                if (leaf_ann(e, l) < 0)
                    continue;
                const Ann *an = &e->anns[leaf_ann(e, l)];
                Tiling t = cur_tiling(e, l);
                bool any = false;
                for (int32_t d = 0; d < an->t.rank; d++)
                    if (an->prio[d] == e->prio && tiling_dim_n(&an->t, d) > 0) {
                        tiling_set_dim(&t, d, tiling_dim(&an->t, d), tiling_dim_n(&an->t, d));
                        any = true;
                    }
                if (!any || !tiling_valid(&t))
                    continue;
                e->st[l] = pool_add(e, &t);
                e->stamp[l] = r + 1;
                GROW(e->changed, e->n_changed, e->cap_changed);
                e->changed[e->n_changed++] = l;
            }
        }
        run_phases(e);
    }
}

static void engine_free(Engine *e)
{
    free(e->pool);
    free(e->pused);
    free(e->htab);
    free(e->anns);
    free(e->touched);
    free(e->front);
    free(e->front_cause);
    free(e->pbuf);
    free(e->changed);
    free(e->ops);
    free(e->ops_scratch);
    free(e->conf);
    free(e->cands);
    free(e->alts);
    free(e->memo);
    free(e->memo_slot);
    free(e->mprops);
    free(e->rules);
    free(e->rstate);
    free(e->rfirst);
    arena_destroy(e->ra);
    arena_destroy(e->rules_arena);
}

/* Runs the engine on m; false (e untouched) when the module has no mesh or
 * an operand out of range. */
static bool engine_run(Engine *e, HloModule *m, Arena *scratch)
{
    memset(e, 0, sizeof *e);
    e->m = m;
    e->mesh = &m->mesh;
    e->a = scratch;
    e->n_atoms = m->mesh.n_atoms;
    e->act_key = -1;
    for (int32_t r = 0; r <= SPMDC_MAX_RANK; r++)
        tiling_replicated(&e->repl[r], r);
    if (!m->has_mesh)
        return false;
    setup_index(e);
    bool *df = dataflow_comps(e);
    if (!setup_classes(e, df))
        return false;
    e->ra = arena_create();
    e->rules_arena = arena_create();
    pool_add(e, &(Tiling){0}); /* ST_NONE */
    pool_add(e, &(Tiling){0}); /* ST_MANUAL */
    setup_identities(e, df);
    setup_states(e);
    setup_manual(e);
    run(e);
    return true;
}

bool propagate_shardings(HloModule *m, PassCtx *cx)
{
    return propagate_shardings_explained(m, cx, NULL);
}

/* ================================================================ explanation */

static void put_inst(StrBuf *b, const Engine *e, int32_t gi)
{
    const HloInst *in = ginst(e, gi);
    if (e->icomp[gi] != e->m->entry)
        sb_printf(b, "%s/", e->m->comps[e->icomp[gi]].name);
    sb_puts(b, in->name);
    if (in->span.begin.line)
        sb_printf(b, " (line %u)", (unsigned)in->span.begin.line);
}

static void put_leaf(StrBuf *b, const Engine *e, int32_t lf)
{
    int32_t gi = e->linst[lf];
    sb_puts(b, ginst(e, gi)->name);
    if (nleaves(e, gi) > 1 || shape_is_tuple(ginst(e, gi)->shape))
        sb_printf(b, "{%d}", (int)(lf - e->leaf0[gi]));
}

static void put_state(StrBuf *b, const Engine *e, int32_t lf)
{
    if (e->st[lf] == ST_MANUAL) {
        sb_puts(b, "manual");
        return;
    }
    if (e->lman && e->lman[lf]) { /* "[{data}, {}] manual over {model}" */
        Sharding s;
        final_leaf(&s, e, lf, false);
        sharding_describe(b, &s, e->mesh);
        return;
    }
    Tiling t = cur_tiling(e, lf);
    tiling_describe(b, &t, e->mesh);
}

/* Candidate c of op conflict k: the tiling it gives every tensor. */
static void put_op_candidate(StrBuf *b, Engine *e, const OpRule *r, int32_t gi, const Cand *c)
{
    for (int32_t k = 0; k < r->n_in + r->n_out; k++) {
        Tiling t;
        oprule_factors_to_tiling(r, k, &c->fs, e->mesh, &t, NULL);
        if (k == r->n_in)
            sb_puts(b, " -> ");
        else if (k > 0)
            sb_puts(b, ", ");
        int32_t lf = tensor_leaf(e, gi, r, k);
        put_leaf(b, e, lf);
        sb_putc(b, ' ');
        tiling_describe(b, &t, e->mesh);
    }
}

/* The candidates of a conflict, cheapest first as chosen, each with the
 * bytes per device it costs, aligned. */
static void put_candidates(StrBuf *b, Engine *e, const Conflict *cf, const OpRule *r)
{
    int64_t widest = 0;
    for (int32_t j = 0; j < cf->n; j++)
        widest = e->cands[cf->first + j].cost > widest ? e->cands[cf->first + j].cost : widest;
    size_t w = text_bytes_width(widest);
    /* the chosen one first, then the others by cost (ties in candidate order) */
    int32_t *order = xmalloc(sizeof(int32_t) * (size_t)(cf->n + 1)), n = 0;
    order[n++] = cf->chosen;
    for (int32_t j = 0; j < cf->n; j++)
        if (j != cf->chosen) {
            int32_t at = n++;
            while (at > 1 && e->cands[cf->first + order[at - 1]].cost > e->cands[cf->first + j].cost) {
                order[at] = order[at - 1];
                at--;
            }
            order[at] = j;
        }
    for (int32_t q = 0; q < n; q++) {
        const Cand *cd = &e->cands[cf->first + order[q]];
        sb_puts(b, q == 0 ? "    chosen  " : "            ");
        text_put_bytes(b, cd->cost, w);
        sb_puts(b, "  ");
        if (r)
            put_op_candidate(b, e, r, cf->inst, cd);
        else
            tiling_describe(b, &cd->t, e->mesh);
        sb_putc(b, '\n');
    }
    free(order);
}

static void explain_conflict(StrBuf *b, Engine *e, const Conflict *cf)
{
    const HloInst *in = ginst(e, cf->inst);
    if (cf->leaf >= 0) {
        sb_printf(b, "  conflict: %d shardings reached ", (int)cf->n);
        put_leaf(b, e, cf->leaf);
        sb_puts(b, " at once; bytes per device its producer and users would reshard under each:\n");
        put_candidates(b, e, cf, NULL);
        return;
    }
    sb_printf(b, "  conflict: the tensors of %s %s disagree; %d candidates, bytes per device to reshard its "
                 "tensors to each:\n",
              hlo_opcode_name(in->op), in->name, (int)cf->n);
    OpRule r;
    Arena *a = arena_create();
    int32_t c = e->icomp[cf->inst];
    if (oprule_build(e->m, c, cf->inst - e->comp_first[c], a, &r))
        put_candidates(b, e, cf, &r);
    arena_destroy(a);
}

/* Every leaf's path to the source of its first state, found in one pass
 * over from[]: len[l] the hops from l to the leaf whose state came from no
 * other (src[l]), or -1 for a leaf on or behind a cycle of from[]. */
typedef struct PathMemo {
    int32_t *len, *src;
} PathMemo;

static void path_memo(const Engine *e, PathMemo *pm)
{
    int32_t n = e->n_leaves;
    pm->len = xmalloc(sizeof(int32_t) * (size_t)(n ? n : 1));
    pm->src = xmalloc(sizeof(int32_t) * (size_t)(n ? n : 1));
    int32_t *stack = xmalloc(sizeof(int32_t) * (size_t)(n ? n : 1));
    enum { UNKNOWN = -2, ON_STACK = -3 };
    for (int32_t l = 0; l < n; l++)
        pm->len[l] = UNKNOWN;
    for (int32_t l0 = 0; l0 < n; l0++) {
        int32_t l = l0, ns = 0;
        while (l >= 0 && pm->len[l] == UNKNOWN) {
            pm->len[l] = ON_STACK;
            stack[ns++] = l;
            if (e->from[l] <= 0)
                break;
            l = e->from[l] - 1;
        }
        int32_t base;
        if (ns > 0 && e->from[stack[ns - 1]] <= 0) { /* the chain's source */
            base = stack[--ns];
            pm->len[base] = 0;
            pm->src[base] = base;
        } else if (l >= 0 && pm->len[l] >= 0) {
            base = l;
        } else { /* a cycle: walked by put_path */
            while (ns > 0)
                pm->len[stack[--ns]] = -1;
            continue;
        }
        while (ns > 0) {
            int32_t x = stack[--ns];
            pm->len[x] = pm->len[base] + 1;
            pm->src[x] = pm->src[base];
            base = x;
        }
    }
    free(stack);
}

/* The values the first state of leaf lf came through, from its source: the
 * source with its line, then per hop the value and, in parentheses, the
 * instruction it came through (its opcode alone when that is the value's
 * own instruction).  At most CAP hops shown: the ones nearest lf.  pm holds
 * the path's length and source (path_memo), so a leaf at the end of a long
 * chain costs CAP steps. */
static void put_path(StrBuf *b, const Engine *e, const PathMemo *pm, int32_t lf)
{
    enum { CAP = 12 };
    int32_t hops[CAP], n = 0, total = 0, src = lf;
    if (pm->len[lf] >= 0) {
        total = pm->len[lf];
        src = pm->src[lf];
        for (int32_t l = lf; n < CAP && n < total; l = e->from[l] - 1)
            hops[n++] = l;
    } else { /* on or behind a cycle of from[]: walked, at most n_leaves + 1 hops */
        for (int32_t l = lf; l >= 0 && e->from[l] > 0 && total <= e->n_leaves; l = e->from[l] - 1) {
            if (n < CAP)
                hops[n++] = l;
            total++;
            src = e->from[l] - 1;
        }
    }
    put_leaf(b, e, src);
    int32_t line = (int32_t)ginst(e, e->linst[src])->span.begin.line;
    if (line)
        sb_printf(b, " (line %d)", (int)line);
    for (int32_t k = n - 1; k >= 0; k--) {
        if (k == n - 1 && total > CAP)
            sb_printf(b, " -> ... (%d more)", (int)(total - CAP));
        int32_t l = hops[k];
        const HloInst *v = ginst(e, e->via[l]);
        sb_puts(b, " -> ");
        put_leaf(b, e, l);
        if (e->via[l] == e->linst[l])
            sb_printf(b, " (%s)", hlo_opcode_name(v->op));
        else
            sb_printf(b, " (%s %s)", hlo_opcode_name(v->op), v->name);
    }
}

/* The annotations leaf lf's atoms came from: "the annotation on x (line
 * 3)" or "the annotations on x (line 3), w (line 5)". */
static void put_sources(StrBuf *b, const Engine *e, int32_t lf)
{
    int32_t seen[SPMDC_MAX_ATOMS], ns = 0;
    if (e->st[lf] >= ST_FIRST) {
        const Tiling *t = state(e, lf);
        for (int32_t d = 0; d < t->rank; d++) {
            const int8_t *a = tiling_dim(t, d);
            for (int32_t k = 0; k < tiling_dim_n(t, d); k++) {
                int32_t o = e->aorg[lf] ? e->aorg[lf][a[k]] : e->lorg[lf];
                bool dup = false;
                for (int32_t j = 0; j < ns; j++)
                    dup |= seen[j] == o;
                if (!dup && o >= 0)
                    seen[ns++] = o;
            }
        }
    }
    if (ns == 0 && e->lorg[lf] >= 0)
        seen[ns++] = e->lorg[lf];
    if (ns == 0) {
        sb_puts(b, "a sharding set before propagation");
        return;
    }
    sb_puts(b, ns == 1 ? "the annotation on " : "the annotations on ");
    for (int32_t j = 0; j < ns; j++) {
        if (j)
            sb_puts(b, ", ");
        put_inst(b, e, seen[j]);
    }
}

/* One leaf: its sharding and where it came from.  ind is the indent of its
 * first line (its further lines two more). */
static void explain_leaf(StrBuf *b, const Engine *e, const PathMemo *pm, int32_t lf, const char *ind)
{
    put_state(b, e, lf);
    if (leaf_ann(e, lf) >= 0 && !(e->lfl[lf] & LF_EXTENDED)) {
        sb_puts(b, ", annotated\n");
        return;
    }
    if (leaf_ann(e, lf) < 0 && leaf_rank(e, lf) == 0 && e->st[lf] != ST_MANUAL) {
        sb_puts(b, ", a scalar\n");
        return;
    }
    if (leaf_ann(e, lf) < 0 && (e->lfl[lf] & LF_FIXED)) {
        sb_puts(b, e->st[lf] == ST_NONE || e->st[lf] >= ST_FIRST ? ", fixed by its instruction (no rule "
                                                                    "reaches through it, or a reducer's value)\n"
                                                                  : ", annotated\n");
        return;
    }
    if (e->st[lf] == ST_NONE) {
        sb_puts(b, ", no annotation reaches it\n");
        return;
    }
    sb_puts(b, leaf_ann(e, lf) >= 0 ? ", annotated, extended on its open dims\n" : "\n");
    sb_printf(b, "%s  from ", ind);
    put_sources(b, e, lf);
    sb_putc(b, '\n');
    if (e->from[lf] > 0) {
        sb_printf(b, "%s  path: ", ind);
        put_path(b, e, pm, lf);
        sb_putc(b, '\n');
    }
}

static void explain(StrBuf *b, Engine *e)
{
    /* conflicts per instruction, in instruction order */
    int32_t *cstart = xcalloc((size_t)e->n_insts + 1, sizeof(int32_t)), *clist = NULL;
    for (int32_t k = 0; k < e->n_conf; k++)
        cstart[e->conf[k].inst + 1]++;
    for (int32_t g = 0; g < e->n_insts; g++)
        cstart[g + 1] += cstart[g];
    clist = xmalloc(sizeof(int32_t) * (size_t)(e->n_conf ? e->n_conf : 1));
    int32_t *fill = xmalloc(sizeof(int32_t) * (size_t)(e->n_insts + 1));
    memcpy(fill, cstart, sizeof(int32_t) * (size_t)e->n_insts);
    for (int32_t k = 0; k < e->n_conf; k++)
        clist[fill[e->conf[k].inst]++] = k;
    PathMemo pm;
    path_memo(e, &pm);
    /* the summary */
    int64_t n_values = 0, n_ann = 0, n_prop = 0, n_none = 0, n_fixed = 0, n_scalars = 0;
    for (int32_t lf = 0; lf < e->n_leaves; lf++) {
        if (!shape_is_array(e->lshape[lf]))
            continue;
        if (leaf_rank(e, lf) == 0 && leaf_ann(e, lf) < 0 && e->st[lf] != ST_MANUAL) {
            n_scalars++;
            continue;
        }
        n_values++; /* the cases of explain_leaf */
        if (leaf_ann(e, lf) >= 0 || ((e->lfl[lf] & LF_FIXED) && e->st[lf] == ST_MANUAL))
            n_ann++;
        else if (e->lfl[lf] & LF_FIXED)
            n_fixed++;
        else if (e->st[lf] == ST_NONE)
            n_none++;
        else
            n_prop++;
    }
    sb_printf(b, "sharding propagation of module %s on mesh ", e->m->name ? e->m->name : "module");
    mesh_print(b, e->mesh);
    sb_printf(b,
              " (%d devices)\n%lld arrays: %lld annotated, %lld propagated, %lld that no annotation reaches, "
              "%lld fixed by their instruction; %lld scalars; %d conflict%s\n\n",
              (int)e->mesh->n_devices, (long long)n_values, (long long)n_ann, (long long)n_prop, (long long)n_none,
              (long long)n_fixed, (long long)n_scalars, (int)e->n_conf, e->n_conf == 1 ? "" : "s");
    for (int32_t gi = 0; gi < e->n_insts; gi++) {
        const HloInst *in = ginst(e, gi);
        int32_t n_arrays = 0;
        for (int32_t l = e->leaf0[gi]; l < e->leaf0[gi + 1]; l++)
            n_arrays += shape_is_array(e->lshape[l]);
        if (n_arrays == 0 && cstart[gi] == cstart[gi + 1])
            continue;
        put_inst(b, e, gi);
        sb_printf(b, ", %s:", hlo_opcode_name(in->op));
        if (shape_is_array(in->shape)) {
            sb_putc(b, ' ');
            explain_leaf(b, e, &pm, e->leaf0[gi], "");
        } else {
            sb_putc(b, '\n');
            for (int32_t l = e->leaf0[gi]; l < e->leaf0[gi + 1]; l++) {
                if (!shape_is_array(e->lshape[l]))
                    continue;
                sb_printf(b, "  {%d} ", (int)(l - e->leaf0[gi]));
                explain_leaf(b, e, &pm, l, "  ");
            }
        }
        for (int32_t k = cstart[gi]; k < cstart[gi + 1]; k++)
            explain_conflict(b, e, &e->conf[clist[k]]);
    }
    free(cstart);
    free(clist);
    free(fill);
    free(pm.len);
    free(pm.src);
}

bool propagate_shardings_explained(HloModule *m, PassCtx *cx, StrBuf *why)
{
    Arena *own = cx && cx->scratch ? NULL : arena_create();
    Arena *scratch = own ? own : cx->scratch;
    bool named = module_uses_named_form(m);
    Engine e;
    bool ran = engine_run(&e, m, scratch);
    if (why && ran)
        explain(why, &e);
    materialize(m, ran ? &e : NULL, named);
    if (ran)
        engine_free(&e);
    arena_destroy(own);
    return true;
}
