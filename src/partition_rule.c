/* partition_rule.c - the partitioner's generic path: an op with a factor
 * rule (oprule.h) is partitioned from its rule alone.
 *
 * 1. Candidates.  The op's factors that may be split (by default
 *    pass-through factors and reduction factors whose reduction an
 *    all-reduce can do; a handler may allow more) are grouped into classes
 *    by the set of tensors they index (dot: batch, contracting, lhs-free,
 *    rhs-free).  For each class the options are the assignments the
 *    tensors' states give it: each result's declared sharding, each
 *    operand's current state, and nothing; and each of these without the
 *    atoms an option of another class uses (so a split of one tensor and a
 *    split of another that share an atom still combine in part).  A
 *    candidate is one option per class (atoms used once).  Pending partial values of the operands may
 *    pass through (op_partial_passes: the op is linear in them in the same
 *    element type), as further candidates.
 * 2. Cost.  For each candidate the projection gives every operand's wanted
 *    tiling and every result's tiling (partial over the split reduction
 *    factors' atoms, plus what passed); the cost is the bytes per device of
 *    bringing the operands to their wanted states plus the results to their
 *    declared states (reshard_cost, the report's model), plus what a
 *    handler adds; ties go to the least local work (the product of the
 *    factors' local extents), then to the first candidate (results' options
 *    first, then operands in order).
 * 3. Emission.  Operands are resharded, the op is cloned with local shapes
 *    and localized attributes (oprule_localize_attrs), and the result's
 *    state is recorded.  An operand that does not index a split reduction
 *    factor but flows into the result (a reduce's init value, a scatter's
 *    operand) is wanted as a pending reduction over those atoms (the
 *    reshard's mask step keeps it on the group's first device), so that it
 *    counts once in the sum.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "partition_internal.h"
#include "spmdc/explain.h"

/* Bit k of a tensor mask: masks hold the first 32 tensors of a rule (an op
 * with more, a sort of 17 operands, leaves the rest out of them). */
static inline bool bit32(uint32_t m, int32_t k) { return k >= 0 && k < 32 && ((m >> k) & 1u); }

/* A decision part_by_rule keeps (its memo, below), with what the emission
 * derives from it alone, made on first use: the result leaves, the dims a
 * reshard of operand tensor k would be forced to gather (forced_dims), that
 * tensor k's wanted state moves no atoms off a dim the op needs whole
 * (moved_reason has no words), and whether localizing the attributes changes
 * them. */
typedef struct Decision {
    uint64_t hash;
    uint32_t key_n;
    const uint64_t *key;
    bool chosen;                   /* false: the default action (no rule, or no candidate) */
    int8_t localize;               /* 0: not known yet, 1: the attributes stay, 2: they change */
    RuleCtx rc;                    /* rule arrays and cur in scratch */
    RuleChoice ch;                 /* want and res in scratch */
    Tiling *leaves;                /* part_result_leaves, or NULL */
    uint32_t forced_known;         /* bit k (k < 32): forced[k] is known */
    uint32_t moved_none;           /* bit k: moved_reason of tensor k is known to be NULL */
    uint32_t *forced;              /* [n_in] */
    const Tiling **want_canon;     /* [n_in] ch.want's canonical copies (part_held_canon) */
    int32_t n_slots;               /* the op's operands */
    int32_t *slot_tensor;          /* [n_slots] oprule_operand_tensor of each */
    uint32_t mask_known;           /* bit k (k < 32): mask_padding of tensor k is known to do nothing */
    bool have_local;               /* local and partial below are known */
    bool partial;                  /* some result leaf is a pending reduction */
    Shape local;                   /* the result's per-device shape (an array: the key's) */
} Decision;

/* Candidate enumeration stops after this many factor assignments (the
 * options are ordered, so the first ones are the likely winners). */
#define MAX_COMBOS 4096
#define MAX_CLASSES 16
#define MAX_OPTIONS 24

/* ================================================================ setup */

bool part_rule_init(Part *p, int32_t i, RuleCtx *rc)
{
    memset(rc, 0, sizeof *rc);
    rc->inst = i;
    if (!oprule_build(p->in, p->ic, i, p->tmp, &rc->rule))
        return false;
    const OpRule *r = &rc->rule;
    int32_t nt = r->n_in + r->n_out;
    rc->cur = ARENA_ARRAY(p->tmp, Tiling, nt + 1);
    const HloInst *in = part_in(p, i);
    for (int32_t k = 0; k < r->n_in; k++) {
        const VState *st = part_primary(p, in->operands[r->t[k].slot]);
        if (p->vals[in->operands[r->t[k].slot]].n_leaves != 1)
            return false;
        rc->cur[k] = st->leaves[0];
    }
    const Tiling *decl = part_decl_leaves(p, i);
    for (int32_t k = r->n_in; k < nt; k++)
        rc->cur[k] = decl[r->t[k].leaf];
    rc->splittable = (1u << FACTOR_PASS) | (1u << FACTOR_REDUCTION);
    rc->unmasked = r->param_tensors;
    /* a device order shared by every split operand */
    int32_t order = -1;
    for (int32_t k = 0; k < r->n_in && order != 0; k++) {
        if (!tiling_used(&rc->cur[k]))
            continue;
        int32_t o = rc->cur[k].partial ? 0 : rc->cur[k].perm;
        order = order < 0 || order == o ? o : 0;
    }
    rc->order = (uint16_t)(order > 0 ? order : 0);
    return true;
}

/* cand run in device order `order`: every split operand and result in it;
 * false when a result is partial (a pending reduction is only kept in the
 * mesh's order). */
static bool in_order(const RuleCtx *rc, const RuleChoice *cand, uint16_t order, RuleChoice *out)
{
    const OpRule *r = &rc->rule;
    out->fs = cand->fs;
    out->pass = cand->pass;
    for (int32_t k = 0; k < r->n_in; k++) {
        out->want[k] = cand->want[k];
        if (tiling_used(&cand->want[k])) {
            if (cand->want[k].partial)
                return false;
            out->want[k].perm = order;
        }
    }
    for (int32_t l = 0; l < r->n_out; l++) {
        out->res[l] = cand->res[l];
        if (cand->res[l].partial)
            return false;
        if (tiling_used(&cand->res[l]))
            out->res[l].perm = order;
    }
    return true;
}

/* Whether factor f may be split under rc's policy. */
static bool splittable(const RuleCtx *rc, int32_t f)
{
    const Factor *fa = &rc->rule.factors[f];
    if (!((rc->splittable >> fa->kind) & 1u))
        return false;
    return fa->kind != FACTOR_REDUCTION || fa->reduce != REDUCE_NONE;
}

/* The operand dims whose factors cannot be split (for the remat warning). */
static uint32_t fixed_dims(const RuleCtx *rc, int32_t k)
{
    const OpRule *r = &rc->rule;
    uint32_t m = 0;
    for (int32_t d = 0; d < r->t[k].rank; d++)
        for (int32_t j = 0; j < oprule_dim_n(r, k, d); j++)
            if (!splittable(rc, oprule_dim_factor(r, k, d, j)))
                m |= 1u << d;
    return m;
}

/* forced_dims' answers for one rule: whether factor f split over the atoms
 * of a run gives every tensor of the rule a tiling (the answer depends on
 * the rule, f and the run only, so the operands of a wide op that bring the
 * same run ask it once). */
typedef struct FitMemo {
    uint8_t known[OPRULE_MAX_FACTORS]; /* 0 unknown, 1 fits, 2 does not */
    uint8_t n[OPRULE_MAX_FACTORS];
    int8_t atoms[OPRULE_MAX_FACTORS][SPMDC_MAX_ATOMS];
} FitMemo;

static bool factor_run_fits(Part *p, const OpRule *r, int32_t f, const int8_t *atoms, int32_t n, FitMemo *memo)
{
    if (memo->known[f] && memo->n[f] == n && memcmp(memo->atoms[f], atoms, (size_t)n) == 0)
        return memo->known[f] == 1;
    FactorSharding one;
    fsh_init(&one, r->n_factors);
    fsh_set(&one, f, atoms, n);
    bool ok = true;
    for (int32_t j = 0; j < r->n_in + r->n_out && ok; j++) {
        Tiling out;
        ok = oprule_factors_to_tiling(r, j, &one, p->mesh, &out, NULL);
    }
    memo->known[f] = ok ? 1 : 2;
    memo->n[f] = (uint8_t)n;
    memcpy(memo->atoms[f], atoms, (size_t)n);
    return ok;
}

/* The dims of operand tensor k whose current split the op cannot keep: a
 * factor that may not be split, atoms that do not fit the dim's factors,
 * or a factor whose split gives some other tensor no tiling (the shards of
 * a merged dim would not be contiguous).  A gather these force is an
 * involuntary rematerialization (part_get's warning).  memo holds the
 * answers for rc's rule so far. */
static uint32_t forced_dims(Part *p, const RuleCtx *rc, int32_t k, FitMemo *memo)
{
    const OpRule *r = &rc->rule;
    uint32_t m = fixed_dims(rc, k), unfit = 0;
    FactorSharding proj;
    Tiling t = tiling_strip_partial(rc->cur[k]);
    oprule_tiling_to_factors(r, k, &t, p->mesh, &proj, &unfit);
    m |= unfit;
    for (int32_t f = 0; f < r->n_factors; f++) {
        if (!proj.n[f] || factor_run_fits(p, r, f, fsh_factor(&proj, f), proj.n[f], memo))
            continue;
        for (int32_t d = 0; d < r->t[k].rank; d++)
            for (int32_t j = 0; j < oprule_dim_n(r, k, d); j++)
                if (oprule_dim_factor(r, k, d, j) == f)
                    m |= 1u << d;
    }
    return m;
}

/* ================================================================ candidates */

typedef struct Classes {
    int32_t n;
    uint32_t mask[MAX_CLASSES];          /* tensors of the class */
    int32_t of[OPRULE_MAX_FACTORS];      /* class of a factor, -1 not splittable */
    uint32_t tensors[OPRULE_MAX_FACTORS]; /* oprule_factor_tensors of every factor */
    int32_t n_opt[MAX_CLASSES];
    FactorSharding opt[MAX_CLASSES][MAX_OPTIONS];
} Classes;

/* Restriction of fs to the factors of class c. */
static void restrict_to(const Classes *cl, int32_t c, const FactorSharding *fs, FactorSharding *out)
{
    fsh_init(out, fs->n_factors);
    for (int32_t f = 0; f < fs->n_factors; f++)
        if (cl->of[f] == c && fs->n[f])
            fsh_set(out, f, fsh_factor(fs, f), fs->n[f]);
}

static void add_option(Classes *cl, int32_t c, const FactorSharding *o)
{
    for (int32_t k = 0; k < cl->n_opt[c]; k++)
        if (fsh_equal(&cl->opt[c][k], o))
            return;
    if (cl->n_opt[c] < MAX_OPTIONS)
        cl->opt[c][cl->n_opt[c]++] = *o;
}

/* The options of class c that move the atoms a tensor's state (projection
 * pj) puts on need-replication factors (a sort's sorted dim, an fft's
 * transformed dims) onto one of the class's factors, after the atoms pj
 * gives it (minor): the tensor keeps its split, moved to another dim by an
 * all-to-all, instead of gathering the dim the op needs whole (XLA's plan
 * for a sort along a split dim).  None when pj splits no such factor. */
static void add_moved_options(const OpRule *r, Classes *cl, int32_t c, const FactorSharding *pj)
{
    int8_t moved[SPMDC_MAX_ATOMS];
    int32_t nm = 0;
    for (int32_t f = 0; f < r->n_factors; f++) {
        if (cl->of[f] >= 0 || r->factors[f].kind != FACTOR_NEED_REPLICATION || !pj->n[f])
            continue;
        for (int32_t j = 0; j < pj->n[f] && nm < SPMDC_MAX_ATOMS; j++)
            moved[nm++] = fsh_factor(pj, f)[j];
    }
    if (nm == 0)
        return;
    FactorSharding base;
    restrict_to(cl, c, pj, &base);
    for (int32_t g = 0; g < r->n_factors; g++) {
        if (cl->of[g] != c || base.n[g] + nm > SPMDC_MAX_ATOMS)
            continue;
        int8_t atoms[SPMDC_MAX_ATOMS];
        memcpy(atoms, fsh_factor(&base, g), (size_t)base.n[g]);
        memcpy(atoms + base.n[g], moved, (size_t)nm);
        FactorSharding o = base;
        fsh_set(&o, g, atoms, base.n[g] + nm);
        add_option(cl, c, &o);
    }
}

static void build_classes(Part *p, const RuleCtx *rc, Classes *cl)
{
    const OpRule *r = &rc->rule;
    cl->n = 0; /* the rest is written as classes and options are made (no 40 KB clear per op) */
    for (int32_t f = 0; f < r->n_factors; f++)
        cl->tensors[f] = 0;
    for (int32_t k = 0; k < r->n_in + r->n_out && k < 32; k++)
        for (int32_t d = 0; d < r->t[k].rank; d++)
            for (int32_t j = 0; j < oprule_dim_n(r, k, d); j++)
                cl->tensors[oprule_dim_factor(r, k, d, j)] |= 1u << k;
    for (int32_t f = 0; f < r->n_factors; f++) {
        cl->of[f] = -1;
        if (!splittable(rc, f) || r->factors[f].size <= 1)
            continue;
        uint32_t m = cl->tensors[f];
        int32_t c = 0;
        while (c < cl->n && cl->mask[c] != m)
            c++;
        if (c == cl->n) {
            if (cl->n >= MAX_CLASSES)
                continue;
            cl->n_opt[cl->n] = 0;
            cl->mask[cl->n++] = m;
        }
        cl->of[f] = c;
    }
    int32_t nt = r->n_in + r->n_out;
    FactorSharding *proj = ARENA_ARRAY(p->tmp, FactorSharding, nt + 1);
    for (int32_t k = 0; k < nt; k++) {
        Tiling t = tiling_strip_partial(rc->cur[k]);
        oprule_tiling_to_factors(r, k, &t, p->mesh, &proj[k], NULL);
    }
    /* options: results' declared shardings first, then operands, then nothing */
    for (int32_t c = 0; c < cl->n; c++) {
        FactorSharding o;
        for (int32_t k = r->n_in; k < nt; k++)
            if (bit32(cl->mask[c], k)) {
                restrict_to(cl, c, &proj[k], &o);
                add_option(cl, c, &o);
            }
        for (int32_t k = 0; k < r->n_in; k++)
            if (bit32(cl->mask[c], k)) {
                restrict_to(cl, c, &proj[k], &o);
                add_option(cl, c, &o);
            }
        fsh_init(&o, r->n_factors);
        add_option(cl, c, &o);
        for (int32_t k = 0; k < nt && rc->move_whole; k++)
            if (bit32(cl->mask[c], k))
                add_moved_options(r, cl, c, &proj[k]);
    }
    /* an option whose atoms another class's option also uses, without
     * those atoms: the two combine (a dot's lhs split [{a}, {b}, {}] and
     * its rhs split on the contracting dim over b give batch a with
     * contracting b) */
    for (int32_t c = 0; c < cl->n; c++) {
        int32_t n0 = cl->n_opt[c];
        for (int32_t j = 0; j < n0; j++) {
            uint32_t used = fsh_used(&cl->opt[c][j]);
            for (int32_t c2 = 0; c2 < cl->n && used; c2++) {
                for (int32_t j2 = 0; c2 != c && j2 < cl->n_opt[c2]; j2++) {
                    uint32_t drop = used & fsh_used(&cl->opt[c2][j2]);
                    if (!drop || drop == used)
                        continue;
                    FactorSharding o;
                    fsh_init(&o, r->n_factors);
                    for (int32_t f = 0; f < r->n_factors; f++) {
                        int8_t a[SPMDC_MAX_ATOMS];
                        int32_t n = 0;
                        for (int32_t k = 0; k < cl->opt[c][j].n[f]; k++)
                            if (!(drop & (1u << fsh_factor(&cl->opt[c][j], f)[k])))
                                a[n++] = fsh_factor(&cl->opt[c][j], f)[k];
                        if (n)
                            fsh_set(&o, f, a, n);
                    }
                    add_option(cl, c, &o);
                }
            }
        }
    }
}

/* fs |= o (disjoint factors); false if an atom would be used twice. */
static bool merge_option(FactorSharding *fs, const FactorSharding *o)
{
    if (fsh_used(fs) & fsh_used(o))
        return false;
    for (int32_t f = 0; f < o->n_factors; f++)
        if (o->n[f])
            fsh_set(fs, f, fsh_factor(o, f), o->n[f]);
    return true;
}

/* ================================================================ evaluation */

static uint32_t mask_of(const int8_t *a, int32_t n)
{
    uint32_t m = 0;
    for (int32_t k = 0; k < n; k++)
        m |= 1u << a[k];
    return m;
}

/* Atoms of the split reduction factors tensor k does not index (tensors:
 * oprule_factor_tensors of every factor). */
static uint32_t unindexed_reduction(const OpRule *r, const uint32_t *tensors, int32_t k, const FactorSharding *fs)
{
    uint32_t m = 0;
    for (int32_t f = 0; f < r->n_factors; f++) {
        if (r->factors[f].kind != FACTOR_REDUCTION || fs->n[f] == 0)
            continue;
        if (!bit32(tensors[f], k))
            m |= mask_of(fsh_factor(fs, f), fs->n[f]);
    }
    return m;
}

/* Fills ch's tilings for factor sharding fs with the operands in `pass`
 * (tensor mask) keeping their pending reduction; false if some tensor has
 * no tiling for it or the states do not combine. */
static bool evaluate(Part *p, const RuleCtx *rc, const uint32_t *tensors, const FactorSharding *fs, uint32_t pass,
                     RuleChoice *ch)
{
    const OpRule *r = &rc->rule;
    const HloInst *in = part_in(p, rc->inst);
    int32_t nt = r->n_in + r->n_out;
    ReduceKind rk = REDUCE_NONE;
    bool mixed = false;
    uint32_t red = oprule_result_partial(r, fs, &rk, &mixed);
    if (mixed)
        return false;
    uint32_t passed = 0;
    ReduceKind pk = REDUCE_NONE;
    for (int32_t k = 0; k < r->n_in; k++) {
        if (!bit32(pass, k))
            continue;
        passed |= rc->cur[k].partial;
        pk = (ReduceKind)rc->cur[k].kind;
    }
    if ((passed & (red | fsh_used(fs))) || (passed && red && pk != rk))
        return false;
    ReduceKind kind = red ? rk : pk;
    ch->fs = *fs;
    ch->pass = pass;
    for (int32_t k = 0; k < nt; k++) {
        Tiling t;
        if (!oprule_factors_to_tiling(r, k, fs, p->mesh, &t, NULL))
            return false;
        if (k < r->n_in) {
            if (bit32(pass, k)) {
                /* a passing operand with no pending value is masked into
                 * the carriers' sum (pass_sets) */
                t.partial = rc->cur[k].partial ? rc->cur[k].partial : passed;
                t.kind = rc->cur[k].partial ? rc->cur[k].kind : (uint8_t)pk;
            } else {
                uint32_t mask = unindexed_reduction(r, tensors, k, fs);
                int32_t v = in->operands[r->t[k].slot];
                if (mask && !bit32(rc->unmasked, k) && !is_reduce_identity(p->in, p->ic, v, rk)) {
                    t.partial = mask;
                    t.kind = (uint8_t)rk;
                }
            }
        } else if (red | passed) {
            t.partial = red | passed;
            t.kind = (uint8_t)kind;
        }
        if (!tiling_valid(&t))
            return false;
        if (k < r->n_in)
            ch->want[k] = t;
        else
            ch->res[k - r->n_in] = t;
    }
    return true;
}

/* Bytes of the operands' reshards and the results' reshards to their
 * declared states; PART_INF_COST as soon as the sum passes `bound` (every
 * term is >= 0, so such a candidate cannot win). */
static int64_t cost_of(Part *p, const RuleCtx *rc, const RuleChoice *ch, int64_t bound)
{
    const OpRule *r = &rc->rule;
    const HloInst *in = part_in(p, rc->inst);
    int64_t bytes = 0;
    for (int32_t k = 0; k < r->n_in && bytes < PART_INF_COST; k++) {
        bytes += part_cost(p, in->operands[r->t[k].slot], &ch->want[k]);
        if (bytes > bound)
            return PART_INF_COST;
    }
    for (int32_t l = 0; l < r->n_out && bytes < PART_INF_COST && bytes <= bound; l++) {
        if (!part_leaf_read(p, rc->inst, r->t[r->n_in + l].leaf))
            continue;
        Shape s = shape_array(in->shape->type, r->t[r->n_in + l].rank, r->t[r->n_in + l].shape);
        const Shape *ls = shape_is_tuple(in->shape) ? &in->shape->elems[r->t[r->n_in + l].leaf] : in->shape;
        s.type = ls->type;
        bytes += part_reshard_cost(p, &s, &ch->res[l], &rc->cur[r->n_in + l]);
    }
    return bytes < PART_INF_COST && bytes <= bound ? bytes : PART_INF_COST;
}

/* The sets of carrier operands whose pending reductions may pass together
 * (tensor masks), written to sets; returns the count (0: none may pass). */
static int32_t pass_sets(Part *p, const RuleCtx *rc, uint32_t *sets, int32_t cap)
{
    const OpRule *r = &rc->rule;
    int32_t carriers[8], nc = 0;
    for (int32_t k = 0; k < r->n_in && nc < 8; k++)
        if (rc->cur[k].partial)
            carriers[nc++] = k;
    if (nc == 0 || nc > 4)
        return 0;
    int32_t n = 0;
    for (uint32_t s = 1; s < (1u << nc) && n < cap; s++) {
        uint32_t tensors = 0, slots = 0, atoms = 0;
        ReduceKind kind = REDUCE_NONE;
        bool ok = true, same = true;
        uint32_t first = 0;
        for (int32_t j = 0; j < nc; j++) {
            if (!((s >> j) & 1u))
                continue;
            const Tiling *t = &rc->cur[carriers[j]];
            if (kind == REDUCE_NONE) {
                kind = (ReduceKind)t->kind;
                first = t->partial;
            }
            ok &= t->kind == kind;
            same &= t->partial == first;
            ok &= !(atoms & t->partial) || t->partial == first;
            atoms |= t->partial;
            tensors |= 1u << carriers[j];
            slots |= 1u << r->t[carriers[j]].slot;
        }
        if (!ok || r->t[carriers[0]].slot > 31)
            continue;
        const HloInst *pin = part_in(p, rc->inst);
        const OpAlgebra *alg = op_algebra(pin->op);
        /* carriers over different atoms pass together only through a
         * contraction, which multiplies their sums (below); any other op
         * would count each carrier once per device of the others' atoms
         * (a concatenate of a sum over a and one over b, all-reduced over
         * a and b, holds each part |b| or |a| times) */
        if (alg->partial != PARTIAL_CONTRACT && !same)
            continue;
        if (alg->partial == PARTIAL_ALL && pin->op != HLO_SELECT) {
            /* the operands that hold no pending value join the sum kept on
             * one device of each group (the reshard's mask step): an
             * unreduced accumulator plus a replicated bias stays unreduced */
            for (int32_t k = 0; k < r->n_in && ok; k++) {
                if (bit32(tensors, k))
                    continue;
                ok = rc->cur[k].partial == 0 && k < 32 && r->t[k].slot <= 31;
                if (!ok)
                    break;
                tensors |= 1u << k;
                slots |= 1u << r->t[k].slot;
            }
            if (!ok)
                continue;
        }
        if (alg->partial == PARTIAL_CONTRACT && atoms != 0) {
            /* each operand its own atoms: they must not overlap (a dot is
             * linear in each operand, not in both: two sums over the same
             * atoms multiply to a double sum, not to a sum of products) */
            uint32_t seen = 0;
            for (int32_t j = 0; j < nc; j++)
                if ((s >> j) & 1u) {
                    ok &= !(seen & rc->cur[carriers[j]].partial);
                    seen |= rc->cur[carriers[j]].partial;
                }
            if (!ok)
                continue;
        }
        if (op_partial_passes(p->in, p->ic, rc->inst, kind, slots))
            sets[n++] = tensors;
    }
    return n;
}

/* Starts the explain sink's decision for rc's op (explain.h). */
static void explain_rule_begin(Part *p, const RuleCtx *rc, struct Explain *ex)
{
    const OpRule *r = &rc->rule;
    int32_t slots[EXPLAIN_MAX_TENSORS], leaves[EXPLAIN_MAX_TENSORS];
    for (int32_t k = 0; k < r->n_in && k < EXPLAIN_MAX_TENSORS; k++)
        slots[k] = r->t[k].slot;
    for (int32_t l = 0; l < r->n_out && l < EXPLAIN_MAX_TENSORS; l++)
        leaves[l] = r->t[r->n_in + l].leaf;
    explain_begin(ex, p->ic, p->oc, rc->inst, r->n_in, slots, r->n_out, leaves);
}

bool part_rule_choose(Part *p, RuleCtx *rc, RuleExtraFn extra, void *user, RuleChoice *best)
{
    const OpRule *r = &rc->rule;
    /* one buffer per partitioner run, shared by its computations: a Classes is ~40 KB */
    if (!p->mod->rule_scratch)
        p->mod->rule_scratch = ARENA_NEW(p->mod->scratch, Classes);
    Classes *cl = p->mod->rule_scratch;
    build_classes(p, rc, cl);
    uint32_t sets[16];
    int32_t n_sets = pass_sets(p, rc, sets, 15);
    RuleChoice cands[2], *cand = &cands[0];
    for (int32_t k = 0; k < 2; k++) {
        cands[k].want = ARENA_ARRAY(p->tmp, Tiling, r->n_in + 1);
        cands[k].res = ARENA_ARRAY(p->tmp, Tiling, r->n_out + 1);
    }
    int32_t n_orders = rc->keep_order && rc->order ? 2 : 1;
    best->want = ARENA_ARRAY(p->tmp, Tiling, r->n_in + 1);
    best->res = ARENA_ARRAY(p->tmp, Tiling, r->n_out + 1);
    best->bytes = PART_INF_COST;
    best->work = HUGE_VAL;
    bool found = false;
    struct Explain *ex = p->rep ? p->rep->explain : NULL;
    if (ex)
        explain_rule_begin(p, rc, ex);
    int64_t total = 1;
    for (int32_t c = 0; c < cl->n; c++)
        total = total * cl->n_opt[c] > MAX_COMBOS ? MAX_COMBOS : total * cl->n_opt[c];
    /* per option: its atoms (a candidate's options must not share one) and
     * every factor's local extent under it (the work of a candidate, its
     * local iteration space, is their product in factor order) */
    int32_t nf = r->n_factors;
    uint32_t used[MAX_CLASSES][MAX_OPTIONS];
    int64_t *ext = ARENA_ARRAY(p->tmp, int64_t, (size_t)(cl->n ? cl->n : 1) * MAX_OPTIONS * (size_t)(nf ? nf : 1));
    for (int32_t c = 0; c < cl->n; c++)
        for (int32_t o = 0; o < cl->n_opt[c]; o++) {
            const FactorSharding *op = &cl->opt[c][o];
            uint32_t u = 0;
            int64_t *e = &ext[((size_t)c * MAX_OPTIONS + (size_t)o) * (size_t)nf];
            for (int32_t f = 0, at = 0; f < nf; f++) { /* fsh_tiles of every factor, in one walk */
                int64_t tiles = 1;
                for (int32_t j = 0; j < op->n[f]; j++, at++) {
                    tiles *= p->mesh->atom_size[op->atoms[at]];
                    u |= 1u << op->atoms[at];
                }
                e[f] = tiling_shard_size(r->factors[f].size, tiles);
            }
            used[c][o] = u;
        }
    int32_t choice[MAX_CLASSES] = {0}; /* the odometer of x: class n-1 the least significant digit */
    for (int64_t x = 0; x < total; x++) {
        if (x > 0)
            for (int32_t c = cl->n - 1; c >= 0; c--) {
                if (++choice[c] < cl->n_opt[c])
                    break;
                choice[c] = 0;
            }
        uint32_t all = 0;
        bool ok = true;
        for (int32_t c = cl->n - 1; c >= 0 && ok; c--) {
            ok = !(all & used[c][choice[c]]);
            all |= used[c][choice[c]];
        }
        if (!ok)
            continue;
        /* A candidate wins only with fewer bytes, or as many and less local
         * work (every cost term is >= 0): once the best costs 0 bytes, a
         * candidate with no less work is skipped unweighed, and any other
         * stops being costed once its bytes pass what could still win.  The
         * explain sink weighs every candidate. */
        double work = 1;
        for (int32_t f = 0; f < nf; f++)
            work *= (double)(cl->of[f] < 0 ? r->factors[f].size
                                           : ext[((size_t)cl->of[f] * MAX_OPTIONS + (size_t)choice[cl->of[f]]) *
                                                     (size_t)nf + (size_t)f]);
        int64_t bound = PART_INF_COST;
        if (found && !ex) {
            bound = work < best->work ? best->bytes : best->bytes - 1;
            if (bound < 0)
                continue;
        }
        FactorSharding fs;
        fsh_init(&fs, nf);
        for (int32_t c = cl->n - 1; c >= 0; c--)
            merge_option(&fs, &cl->opt[c][choice[c]]);
        for (int32_t v = 0; v <= n_sets; v++) {
            uint32_t pass = v == 0 ? 0 : sets[v - 1];
            if (!evaluate(p, rc, cl->tensors, &fs, pass, &cands[0]))
                continue;
            for (int32_t o = 0; o < n_orders; o++) {
                if (o == 1 && !in_order(rc, &cands[0], rc->order, &cands[1]))
                    continue;
                cand = &cands[o];
                int64_t bytes = cost_of(p, rc, cand, bound);
                if (bytes < PART_INF_COST && extra) {
                    int64_t e = extra(p, rc, cand, user);
                    bytes = e >= PART_INF_COST ? PART_INF_COST : bytes + e;
                }
                if (bytes >= PART_INF_COST)
                    continue;
                if (ex)
                    explain_candidate(ex, cand->want, cand->res, bytes, work);
                if (bytes < best->bytes || (bytes == best->bytes && work < best->work)) {
                    best->fs = cand->fs;
                    best->pass = cand->pass;
                    memcpy(best->want, cand->want, sizeof(Tiling) * (size_t)r->n_in);
                    memcpy(best->res, cand->res, sizeof(Tiling) * (size_t)r->n_out);
                    best->bytes = bytes;
                    best->work = work;
                    found = true;
                }
            }
        }
    }
    return found;
}

/* ================================================================ report words */

/* Appends the dims among dims[0..n) of operand slot k of i that are split
 * in state s, each traced to the annotation that split it
 * (part_split_origin): "dim 1 of lhs h sharded on 'model' (from the
 * annotation on a, line 31)", "dim 1 of x sharded on 'x', dim 2 on 'y'
 * (annotated, line 3)"; one parenthesis when the dims agree, else one per
 * dim.  role: "lhs ", "".  axes: say which axes split each dim.  False
 * (nothing appended) if no dim is split. */
bool part_put_split_dims(Part *p, StrBuf *b, int32_t i, int32_t k, const Tiling *s, const int64_t *dims, int32_t n,
                         const char *role, bool axes)
{
    int32_t v = part_in(p, i)->operands[k], org[SPMDC_MAX_RANK], first = -1, count = 0;
    bool mixed = false;
    n = n < SPMDC_MAX_RANK ? n : SPMDC_MAX_RANK;
    for (int32_t j = 0; j < n; j++) {
        int32_t d = (int32_t)dims[j];
        if (d < 0 || d >= s->rank || tiling_dim_n(s, d) == 0) {
            org[j] = INT32_MIN; /* not split */
            continue;
        }
        org[j] = part_split_origin(p, v, s, d);
        if (count++ == 0)
            first = org[j];
        else
            mixed |= org[j] != first;
    }
    if (count == 0)
        return false;
    bool started = false;
    for (int32_t j = 0; j < n; j++) {
        if (org[j] == INT32_MIN)
            continue;
        int32_t d = (int32_t)dims[j];
        sb_puts(b, started ? ", dim " : "dim ");
        sb_int(b, d);
        if (!started) {
            sb_puts(b, " of ");
            sb_puts(b, role);
            sb_puts(b, part_in(p, v)->name);
            if (axes)
                sb_puts(b, " sharded");
        }
        started = true;
        if (axes) {
            sb_puts(b, " on '");
            part_put_atoms(p, b, tiling_dim(s, d), tiling_dim_n(s, d));
            sb_putc(b, '\'');
        }
        if (mixed && org[j] != -1) {
            sb_puts(b, " (");
            part_put_origin(p, b, v, org[j]);
            sb_putc(b, ')');
        }
    }
    if (!mixed && first != -1) {
        sb_puts(b, " (");
        part_put_origin(p, b, v, first);
        sb_putc(b, ')');
    }
    return true;
}

/* "y: contracting dim 1 of lhs h sharded on 'model' (from the annotation
 * on a, line 31) and dim 0 of rhs b (annotated, line 32)"; "s: reduced dim
 * 2 of a sharded on 'x' (annotated, line 3)". */
static const char *partial_reason(Part *p, const RuleCtx *rc, const RuleChoice *ch)
{
    const OpRule *r = &rc->rule;
    const HloInst *in = part_in(p, rc->inst);
    const char *word = "reduced ";
    const char *roles[2] = {"", ""};
    if (in->op == HLO_DOT || in->op == HLO_RAGGED_DOT) {
        word = "contracting ";
        roles[0] = "lhs ";
        roles[1] = "rhs ";
    } else if (in->op == HLO_CONVOLUTION) {
        word = "input-feature ";
        roles[0] = "lhs ";
        roles[1] = "kernel ";
    } else if (in->op == HLO_SCATTER) {
        word = "scattered ";
    } else if (in->op == HLO_GATHER || in->op == HLO_DYNAMIC_SLICE) {
        word = "indexed ";
    }
    StrBuf b = part_buf_take(p);
    sb_puts(&b, in->name);
    sb_puts(&b, ": ");
    sb_puts(&b, word);
    bool any = false;
    for (int32_t k = 0; k < r->n_in; k++) {
        int64_t dims[SPMDC_MAX_RANK];
        int32_t nd = 0;
        for (int32_t d = 0; d < r->t[k].rank; d++)
            for (int32_t j = 0; j < oprule_dim_n(r, k, d); j++) {
                int32_t f = oprule_dim_factor(r, k, d, j);
                if (r->factors[f].kind == FACTOR_REDUCTION && ch->fs.n[f]) {
                    dims[nd++] = d;
                    break;
                }
            }
        if (nd == 0)
            continue;
        int32_t slot = r->t[k].slot;
        size_t mark = b.len;
        if (any)
            sb_puts(&b, " and ");
        if (part_put_split_dims(p, &b, rc->inst, slot, &ch->want[k], dims, nd, slot < 2 ? roles[slot] : "", !any)) {
            any = true;
        } else { /* nothing split: no separator either */
            b.len = mark;
            b.data[mark] = 0;
        }
    }
    if (!any)
        sb_puts(&b, "dims");
    const char *res = arena_strndup(p->scratch, b.data, b.len);
    part_buf_give(p, &b);
    return res;
}

/* ================================================================ emission */

/* Operand tensor k (local instruction x) with the padding of every dim
 * that a split reduction factor sums over replaced by that reduction's
 * identity, so the padding of uneven shards never reaches the result (a
 * dot masks both operands: 0 * NaN would not vanish). */
static int32_t mask_padding(Part *p, const RuleCtx *rc, const RuleChoice *ch, int32_t k, int32_t x)
{
    const OpRule *r = &rc->rule;
    int32_t v = part_in(p, rc->inst)->operands[r->t[k].slot];
    const Shape *gs = part_in(p, v)->shape;
    for (int32_t d = 0; d < r->t[k].rank; d++) {
        ReduceKind rk = REDUCE_NONE;
        for (int32_t j = 0; j < oprule_dim_n(r, k, d); j++) {
            int32_t f = oprule_dim_factor(r, k, d, j);
            if (r->factors[f].kind == FACTOR_REDUCTION && ch->fs.n[f] > 0)
                rk = (ReduceKind)r->factors[f].reduce;
        }
        if (rk == REDUCE_NONE || gs->dims[d] % tiling_dim_tiles(&ch->want[k], p->mesh, d) == 0)
            continue;
        Shape s0 = shape_scalar(gs->type);
        int32_t fill = part_identity(p, rk, &s0, part_in(p, v)->name);
        x = part_mask_padding(p, x, &ch->want[k], gs, 1u << d, fill, part_name(p, part_in(p, v)->name, "unpadded"));
    }
    return x;
}

/* The report's reason when operand tensor k's wanted state moves the atoms
 * its current state puts on dims the op needs whole (need-replication
 * factors) onto other dims (rc->move_whole's candidates): "s: x resharded
 * from [{a}, {b}] to [{a, b}, {}]: s needs dim 1 whole on every device, so
 * its split moves to dim 0"; NULL for any other reshard (the default words)
 * or without a report. */
static const char *moved_reason(Part *p, const RuleCtx *rc, const Tiling *want, int32_t k, int32_t v)
{
    if (!p->rep || !rc->move_whole)
        return NULL;
    Tiling cur = tiling_strip_partial(rc->cur[k]);
    uint32_t fixed = fixed_dims(rc, k), whole = 0, to = 0;
    for (int32_t d = 0; d < cur.rank && d < 32; d++) {
        if (!((fixed >> d) & 1u) || tiling_dim_n(&cur, d) == 0 || tiling_dim_n(want, d) != 0)
            continue;
        for (int32_t e = 0; e < want->rank; e++) {
            if (e == d)
                continue;
            const int8_t *wa = tiling_dim(want, e);
            for (int32_t j = 0; j < tiling_dim_n(want, e); j++)
                if (wa[j] == tiling_dim(&cur, d)[0]) {
                    whole |= 1u << d;
                    to |= 1u << e;
                }
        }
    }
    if (!whole)
        return NULL;
    const char *name = part_in(p, rc->inst)->name;
    StrBuf b = {0};
    sb_printf(&b, "%s: %s resharded from %s to %s: %s needs ", name, part_in(p, v)->name, part_spec_text(p, &cur),
              part_spec_text(p, want), name);
    const char *sep = "dim";
    for (int32_t d = 0; d < 32; d++)
        if ((whole >> d) & 1u) {
            sb_printf(&b, "%s %d", sep, (int)d);
            sep = " and";
        }
    sb_puts(&b, " whole on every device, so its split moves to");
    sep = " dim";
    for (int32_t d = 0; d < 32; d++)
        if ((to >> d) & 1u) {
            sb_printf(&b, "%s %d", sep, (int)d);
            sep = " and";
        }
    sb_puts(&b, " (not gathered)");
    const char *r = arena_strdup(p->scratch, sb_cstr(&b));
    sb_free(&b);
    return r;
}

/* A kept decision's operands when each is already held in its wanted state
 * and known to need no mask (the common case of a repeated op); false
 * (ops partly written) otherwise. */
static bool operands_held(const Part *p, const Decision *d, const HloInst *in, int32_t *ops)
{
    if (in->n_operands != d->n_slots)
        return false;
    for (int32_t s = 0; s < d->n_slots; s++) {
        int32_t k = d->slot_tensor[s];
        if (k < 0 || k >= 32 || !bit32(d->mask_known, k))
            return false;
        if ((ops[s] = part_held_canon(p, in->operands[s], d->want_canon[k])) < 0)
            return false;
    }
    return true;
}

int32_t part_rule_operands(Part *p, const RuleCtx *rc, const RuleChoice *ch, int32_t *ops)
{
    const OpRule *r = &rc->rule;
    const HloInst *in = part_in(p, rc->inst);
    if (rc->dec && in->n_operands > 0 && operands_held(p, rc->dec, in, ops)) {
        p->limit_dims = 0;
        return 0;
    }
    FitMemo *fit = NULL; /* forced_dims' memo, made when first needed */
    for (int32_t s = 0; s < in->n_operands; s++) {
        int32_t k = oprule_operand_tensor(r, s);
        const Tiling *want = k >= 0 ? &ch->want[k] : NULL;
        if (!want) {
            int32_t n;
            Tiling *rep = part_replicated_leaves_in(p->tmp, part_in(p, in->operands[s])->shape, &n);
            p->limit_dims = PART_LIMIT_ALL;
            ops[s] = part_operand(p, rc->inst, s, rep);
        } else if ((ops[s] = rc->dec ? part_held_canon(p, in->operands[s], rc->dec->want_canon[k])
                                     : part_held(p, in->operands[s], want)) < 0) {
            /* the dims only matter to a reshard (part_get's remat warning) */
            Decision *d = rc->dec;
            bool kept = d && k < 32;
            if (kept && bit32(d->forced_known, k)) {
                p->limit_dims = d->forced[k];
            } else {
                if (!fit)
                    fit = ARENA_NEW(p->tmp, FitMemo);
                p->limit_dims = forced_dims(p, rc, k, fit);
                if (kept) {
                    d->forced[k] = p->limit_dims;
                    d->forced_known |= 1u << k;
                }
            }
            const char *moved = NULL;
            if (!kept || !bit32(d->moved_none, k)) {
                moved = moved_reason(p, rc, want, k, in->operands[s]);
                if (kept && !moved && p->rep)
                    d->moved_none |= 1u << k; /* its test reads the decision alone */
            }
            Cause cause = {rc->inst, moved, 0};
            ops[s] = part_get(p, in->operands[s], want, &cause);
        }
        if (want && ops[s] >= 0 && !(rc->dec && k < 32 && bit32(rc->dec->mask_known, k))) {
            int32_t x = ops[s];
            ops[s] = mask_padding(p, rc, ch, k, x);
            if (rc->dec && k < 32 && ops[s] == x)
                rc->dec->mask_known |= 1u << k; /* its test reads the decision and the operand's shape alone */
        }
        p->limit_dims = 0;
        if (ops[s] < 0)
            return -1;
    }
    return 0;
}

void part_rule_result(Part *p, const RuleCtx *rc, const RuleChoice *ch, int32_t local)
{
    const OpRule *r = &rc->rule;
    const HloInst *in = part_in(p, rc->inst);
    uint32_t own = 0, any = 0;
    for (int32_t l = 0; l < r->n_out; l++)
        any |= ch->res[l].partial;
    own = any;
    for (int32_t k = 0; k < r->n_in; k++)
        if (bit32(ch->pass, k))
            own &= ~ch->want[k].partial;
    int32_t origin = -1;
    const char *why = NULL;
    if (own) {
        origin = rc->inst;
        if (p->rep)
            why = partial_reason(p, rc, ch);
    } else if (any) {
        for (int32_t k = 0; k < r->n_in && origin < 0; k++)
            if (bit32(ch->pass, k)) {
                const VState *src = part_primary(p, in->operands[r->t[k].slot]);
                origin = src->origin;
                why = src->origin_reason;
            }
    }
    Tiling *leaves = rc->dec && rc->dec->leaves ? rc->dec->leaves : part_result_leaves(p, rc, ch);
    part_set_result(p, rc->inst, local, leaves, origin, why);
}

Tiling *part_result_leaves(Part *p, const RuleCtx *rc, const RuleChoice *ch)
{
    if (rc->dec && rc->dec->leaves)
        return rc->dec->leaves; /* the callers only read them (a canonical copy: part_set_result keeps the
                                   same address) */
    const OpRule *r = &rc->rule;
    int32_t n;
    Tiling *leaves = part_replicated_leaves_in(rc->dec ? p->scratch : p->tmp, part_in(p, rc->inst)->shape, &n);
    for (int32_t l = 0; l < r->n_out; l++)
        if (r->t[r->n_in + l].leaf < n)
            leaves[r->t[r->n_in + l].leaf] = ch->res[l];
    if (rc->dec)
        rc->dec->leaves = leaves = n == 1 ? (Tiling *)part_tiling_canon(p->mod, leaves) : leaves;
    return leaves;
}

static bool emit_clone(Part *p, const RuleCtx *rc, const RuleChoice *ch, const int32_t *ops, const Tiling *leaves,
                       const Shape *l, bool partial);

bool part_rule_emit(Part *p, const RuleCtx *rc, const RuleChoice *ch)
{
    const HloInst *in = part_in(p, rc->inst);
    int32_t few[8]; /* most ops: nothing of the instruction's own goes to Part.tmp */
    int32_t *ops = in->n_operands <= 8 ? few : ARENA_ARRAY(p->tmp, int32_t, in->n_operands + 1);
    if (part_rule_operands(p, rc, ch, ops) < 0)
        return false;
    Tiling *leaves = rc->dec && rc->dec->leaves ? rc->dec->leaves : part_result_leaves(p, rc, ch);
    Decision *d = rc->dec;
    if (!d || !d->have_local) { /* a decision's result is an array whose shape is in its key */
        bool partial = false;
        for (int32_t l = 0; l < p->vals[rc->inst].n_leaves; l++)
            partial |= leaves[l].partial != 0;
        Shape l = part_local_shape(p, in->shape, leaves);
        if (!d)
            return emit_clone(p, rc, ch, ops, leaves, &l, partial);
        d->local = l;
        d->partial = partial;
        d->have_local = true;
    }
    return emit_clone(p, rc, ch, ops, leaves, &d->local, d->partial);
}

/* A custom-call's operand_layout_constraints ({f32[8,4,4]{1,2,0}, ...}, one
 * shape per operand) rewritten to the per-device operands' shapes, the
 * layouts kept; a (copied) raw attribute array in a, or a unchanged when
 * the text is not one shape per operand. */
static void localize_layout_constraints(Part *p, const int32_t *ops, int32_t n, HloAttrs *a)
{
    int32_t at = -1;
    for (int32_t k = 0; k < a->n_raw; k++)
        if (strcmp(a->raw[k].name, "operand_layout_constraints") == 0)
            at = k;
    if (at < 0)
        return;
    const char *s = a->raw[at].text;
    StrBuf b = {0};
    bool ok = *s++ == '{';
    sb_putc(&b, '{');
    for (int32_t k = 0; ok && k < n; k++) {
        const char *lb = strchr(s, '['), *rb = lb ? strchr(lb, ']') : NULL;
        if (!lb || !rb) {
            ok = false;
            break;
        }
        const Shape *ls = part_out(p, ops[k])->shape;
        sb_printf(&b, "%s%.*s[", k ? ", " : "", (int)(lb - s), s);
        for (int32_t d = 0; d < ls->rank; d++)
            sb_printf(&b, "%s%lld", d ? "," : "", (long long)ls->dims[d]);
        sb_putc(&b, ']');
        s = rb + 1;
        if (*s == '{') { /* the layout */
            const char *e = strchr(s, '}');
            if (!e) {
                ok = false;
                break;
            }
            sb_printf(&b, "%.*s", (int)(e + 1 - s), s);
            s = e + 1;
        }
        if (k + 1 < n) {
            ok = *s == ',';
            s += ok;
            while (*s == ' ')
                s++;
        }
    }
    if (ok && strcmp(s, "}") == 0) {
        sb_putc(&b, '}');
        RawAttr *raw = ARENA_ARRAY(p->out->arena, RawAttr, a->n_raw);
        memcpy(raw, a->raw, sizeof(RawAttr) * (size_t)a->n_raw);
        raw[at].text = arena_strdup(p->out->arena, sb_cstr(&b));
        a->raw = raw;
    }
    sb_free(&b);
}

/* The per-device shape *l (a fresh copy of its tuple's elements) takes the
 * layouts of global shape g, leaf by leaf: a custom-call's result layout is
 * the layout its callee writes. */
static void keep_layouts(Part *p, const Shape *g, Shape *l)
{
    if (shape_is_tuple(g) && shape_is_tuple(l) && g->n_elems == l->n_elems) {
        Shape *e = ARENA_ARRAY(p->out->arena, Shape, l->n_elems);
        memcpy(e, l->elems, sizeof(Shape) * (size_t)l->n_elems);
        for (int32_t k = 0; k < l->n_elems; k++)
            keep_layouts(p, &g->elems[k], &e[k]);
        l->elems = e;
    } else if (shape_is_array(g) && shape_is_array(l) && g->rank == l->rank && g->has_layout) {
        l->has_layout = true;
        memcpy(l->minor_to_major, g->minor_to_major, sizeof l->minor_to_major);
    }
}

/* part_rule_emit's op and result, once its operands are ops and its result's
 * per-device shape l. */
static bool emit_clone(Part *p, const RuleCtx *rc, const RuleChoice *ch, const int32_t *ops, const Tiling *leaves,
                       const Shape *l, bool partial)
{
    const HloInst *in = part_in(p, rc->inst);
    int32_t r = part_clone(p, rc->inst, part_result_name(p, rc->inst, leaves, partial ? "partial" : "local"), l, ops,
                           in->n_operands);
    /* on a copy: an op whose attributes stay the defaults keeps none */
    HloInst *ri = part_out(p, r);
    if (!rc->dec || rc->dec->localize != 1) { /* the same decision localizes the same attributes alike */
        HloAttrs a = *hlo_attrs(ri);
        oprule_localize_attrs(&rc->rule, p->in, p->ic, rc->inst, &ch->fs, p->mesh, &a);
        if (in->op == HLO_CUSTOM_CALL) {
            localize_layout_constraints(p, ops, in->n_operands, &a);
            Shape ls = *ri->shape;
            keep_layouts(p, in->shape, &ls);
            ri->shape = hlo_shape(p->out, &ls);
        }
        bool change = memcmp(&a, hlo_attrs(ri), sizeof a) != 0;
        if (change)
            *hlo_attrs_mut(p->out, ri) = a;
        if (rc->dec)
            rc->dec->localize = change ? 2 : 1;
    }
    part_rule_result(p, rc, ch, r);
    return true;
}

/* ================================================================ decision memo */

/* part_by_rule's decision (the rule, the candidate chosen, or none) is a
 * function of what part_rule_init and part_rule_choose read: the opcode,
 * the attributes (a shared set by address; any other set is one
 * instruction's own), the result's shape and declared tiling, and per
 * operand its shape, whether it is a constant equal to the identity of a sum
 * or a product (is_reduce_identity; the other kinds accept any value), and
 * the tilings of every state it is held in (part_cost weighs them all; the
 * first is the primary).  Those are written as a key; an equal key gives
 * the same decision, so a program made of repeated layers decides each kind
 * of op once and then only emits it.  Not used with the explain sink (it
 * records every candidate weighed). */
#define DECISION_KEY_WORDS 128
#define DECISION_MAX 4096 /* entries kept (each ~1.5 KB); later decisions are made afresh */

/* The key is 64-bit words, hashed as they are written.  A tiling is its
 * canonical copy's address (part_tiling_canon: equal tilings, equal
 * addresses); every other piece says how many words follow it (an operand
 * count, a rank), so equal keys are equal contents. */
typedef struct DecisionKey {
    uint32_t n;                    /* words */
    uint64_t h;                    /* hash of w[0..n) */
    uint64_t w[DECISION_KEY_WORDS];
} DecisionKey;

struct RuleMemo {
    Decision **slot;               /* open addressing, NULL = free, at most half full */
    uint32_t cap, n;
};

/* A key being written: the next word, the end of the room, the running
 * hash (a local of decision_key's: the compiler keeps it in registers). */
typedef struct KeyPen {
    uint64_t *w, *end;
    uint64_t h;
} KeyPen;

static inline void key_word(KeyPen *k, uint64_t v)
{
    *k->w++ = v;
    k->h = (k->h ^ v) * 0x9fb21c651e98df25ull;
}

/* Element type, rank, `extra` (8 bits) and dims[0..rank); false if they do
 * not fit (with the `more` words the caller writes next). */
static inline bool key_shape(KeyPen *k, const Shape *s, uint32_t extra, int32_t more)
{
    int32_t rank = s->rank > 0 ? (s->rank < SPMDC_MAX_RANK ? s->rank : SPMDC_MAX_RANK) : 0;
    if (k->end - k->w < 1 + rank + more)
        return false;
    key_word(k, (uint64_t)(uint32_t)s->type | (uint64_t)(extra & 0xffu) << 24 | (uint64_t)(uint32_t)s->rank << 32);
    for (int32_t d = 0; d < rank; d++)
        key_word(k, (uint64_t)s->dims[d]);
    return true;
}

/* The key of instruction i's decision; false when it has none (a tuple, an
 * operand not yet partitioned, too long). */
static bool decision_key(Part *p, int32_t i, DecisionKey *key)
{
    const HloInst *in = part_in(p, i);
    key->n = 0;
    if (!shape_is_array(in->shape) || p->vals[i].n_leaves != 1)
        return false;
    for (int32_t s = 0; s < in->n_operands && s < 8; s++) { /* their misses overlap */
        const HloInst *vi = part_in(p, in->operands[s]);
        __builtin_prefetch(&vi->op);
        __builtin_prefetch(&vi->shape);
        __builtin_prefetch(&p->vals[in->operands[s]]);
    }
    const Tiling *decl = part_decl_leaves(p, i); /* one leaf: canonical */
    KeyPen k = {key->w, key->w + DECISION_KEY_WORDS, 0x9e3779b97f4a7c15ull};
    key_word(&k, (uint64_t)in->op | (uint64_t)(uint32_t)in->n_operands << 32);
    key_word(&k, (uint64_t)(uintptr_t)in->attrs); /* NULL: the defaults */
    if (!key_shape(&k, in->shape, 0, 1))
        return false;
    key_word(&k, (uint64_t)(uintptr_t)decl);
    for (int32_t s = 0; s < in->n_operands; s++) {
        int32_t v = in->operands[s];
        const HloInst *vi = part_in(p, v);
        if (!shape_is_array(vi->shape) || p->vals[v].n_leaves != 1 || !p->vals[v].states)
            return false;
        uint32_t id = 0;
        if (vi->op == HLO_CONSTANT) {
            if (!p->const_id)
                p->const_id = ARENA_ARRAY(p->scratch, uint8_t, p->in->comps[p->ic].n_insts + 1);
            if (!p->const_id[v]) /* a constant's answer is kept (0x80: known) */
                p->const_id[v] = (uint8_t)(0x80u | 1u | (is_reduce_identity(p->in, p->ic, v, REDUCE_SUM) ? 2u : 0u) |
                                           (is_reduce_identity(p->in, p->ic, v, REDUCE_PROD) ? 4u : 0u));
            id = p->const_id[v] & 0x7fu;
        }
        if (!key_shape(&k, vi->shape, id, 0))
            return false;
        for (const VState *st = p->vals[v].states; st; st = st->next) { /* canonical (add_state) */
            if (k.end == k.w)
                return false;
            key_word(&k, (uint64_t)(uintptr_t)st->leaves);
        }
        if (k.end == k.w)
            return false;
        key_word(&k, 0); /* no address */
    }
    key->n = (uint32_t)(k.w - key->w);
    key->h = k.h;
    return true;
}

/* The running hash, mixed down to the low bits the slots use. */
static uint64_t key_hash(const DecisionKey *k)
{
    uint64_t h = k->h ^ k->n;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 32);
}

static Decision *decision_find(const struct RuleMemo *m, const DecisionKey *k, uint64_t h, uint32_t *at)
{
    uint32_t mask = m->cap - 1, j = (uint32_t)h & mask;
    for (; m->slot[j]; j = (j + 1) & mask) {
        const Decision *d = m->slot[j];
        if (d->hash == h && d->key_n == k->n && memcmp(d->key, k->w, sizeof(uint64_t) * k->n) == 0)
            return m->slot[j];
    }
    *at = j;
    return NULL;
}

/* Keeps rc's decision (chosen: ch) under key k (hash h, free slot at);
 * returns it, or NULL when the memo is full. */
static Decision *decision_add(Part *p, struct RuleMemo *m, const DecisionKey *k, uint64_t h, uint32_t at,
                              const RuleCtx *rc, const RuleChoice *ch)
{
    if (m->n >= DECISION_MAX)
        return NULL;
    Decision *d = ARENA_NEW(p->scratch, Decision);
    d->hash = h;
    d->key_n = k->n;
    d->key = arena_memdup(p->scratch, k->w, sizeof(uint64_t) * k->n);
    d->chosen = ch != NULL;
    if (ch) {
        const OpRule *r = &rc->rule;
        int32_t nt = r->n_in + r->n_out, dims = 0;
        d->rc = *rc;
        d->rc.rule.t = arena_memdup(p->scratch, r->t, sizeof(RuleTensor) * (size_t)(nt + 1));
        for (int32_t t = 0; t < nt; t++)
            dims += r->t[t].rank;
        d->rc.rule.dim_start = arena_memdup(p->scratch, r->dim_start, sizeof(int32_t) * (size_t)(dims + 1));
        d->rc.rule.factor_of = arena_memdup(p->scratch, r->factor_of, (size_t)r->dim_start[dims] + 1);
        d->rc.cur = arena_memdup(p->scratch, rc->cur, sizeof(Tiling) * (size_t)(nt + 1));
        d->ch = *ch;
        d->ch.want = arena_memdup(p->scratch, ch->want, sizeof(Tiling) * (size_t)(r->n_in + 1));
        d->ch.res = arena_memdup(p->scratch, ch->res, sizeof(Tiling) * (size_t)(r->n_out + 1));
        d->forced = ARENA_ARRAY(p->scratch, uint32_t, r->n_in + 1);
        d->want_canon = ARENA_ARRAY(p->scratch, const Tiling *, r->n_in + 1);
        for (int32_t t = 0; t < r->n_in; t++)
            d->want_canon[t] = part_tiling_canon(p->mod, &ch->want[t]);
        d->n_slots = part_in(p, rc->inst)->n_operands;
        d->slot_tensor = ARENA_ARRAY(p->scratch, int32_t, d->n_slots + 1);
        for (int32_t s = 0; s < d->n_slots; s++)
            d->slot_tensor[s] = oprule_operand_tensor(r, s);
        d->rc.dec = d;
    }
    m->slot[at] = d;
    m->n++;
    if (2 * m->n <= m->cap)
        return d;
    uint32_t cap = 2 * m->cap, mask = cap - 1;
    Decision **slot = ARENA_ARRAY(p->scratch, Decision *, cap);
    for (uint32_t j = 0; j < m->cap; j++) {
        if (!m->slot[j])
            continue;
        uint32_t x = (uint32_t)m->slot[j]->hash & mask;
        while (slot[x])
            x = (x + 1) & mask;
        slot[x] = m->slot[j];
    }
    m->slot = slot;
    m->cap = cap;
    return d;
}

bool part_by_rule(Part *p, int32_t i)
{
    RuleCtx rc;
    RuleChoice ch;
    DecisionKey key;
    struct RuleMemo *m = NULL;
    uint64_t h = 0;
    uint32_t at = 0;
    if (!(p->rep && p->rep->explain) && decision_key(p, i, &key)) {
        m = p->mod->rule_memo;
        if (!m) {
            m = p->mod->rule_memo = ARENA_NEW(p->scratch, struct RuleMemo);
            m->cap = 256;
            m->slot = ARENA_ARRAY(p->scratch, Decision *, m->cap);
        }
        h = key_hash(&key);
        Decision *d = decision_find(m, &key, h, &at);
        if (d) {
            if (!d->chosen)
                return part_default(p, i);
            d->rc.inst = i; /* the kept context serves this instruction (nothing else reads it meanwhile) */
            return part_rule_emit(p, &d->rc, &d->ch);
        }
    }
    if (!part_rule_init(p, i, &rc)) {
        if (m)
            decision_add(p, m, &key, h, at, &rc, NULL);
        return part_default(p, i);
    }
    rc.keep_order = true; /* the cloned op runs the same on any device */
    rc.move_whole = true;
    if (!part_rule_choose(p, &rc, NULL, NULL, &ch)) {
        if (m)
            decision_add(p, m, &key, h, at, &rc, NULL);
        return part_default(p, i);
    }
    if (m) {
        Decision *d = decision_add(p, m, &key, h, at, &rc, &ch);
        if (d) { /* emitted from the kept copy, which learns its facts */
            d->rc.inst = i;
            return part_rule_emit(p, &d->rc, &d->ch);
        }
    }
    return part_rule_emit(p, &rc, &ch);
}
