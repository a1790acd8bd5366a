/* partition_shape.c - shape ops on split dims without a full gather: slice
 * (strided too), pad (negative and interior too), concatenate and reverse
 * along a split dim, and two patterns folded into one exchange.
 *
 * Each op is partitioned from its rule (partition_rule.c) with its
 * PERMUTATION factors splittable; a candidate's cost adds the bytes of the
 * exchanges it needs (halo.h's geometry, the same the emission uses).  With
 * a permutation dim split over T tiles, output shard t holds the outputs
 * [t*c, min((t+1)*c, n_out)), c = ceil(n_out/T) (XLA's layout), and reads:
 *  - slice(start, stride): operand positions start + stride*o: a window of
 *    (c-1)*stride + 1 rows from the neighbours, then a local strided slice;
 *  - pad(lo, hi, interior): a window of size 1 with padding lo and base
 *    dilation interior+1 (partition_window.c), masked with the pad value;
 *  - concatenate: each operand's part of the shard, by a window of its own
 *    (masked outside it), the parts joined by position;
 *  - reverse: the mirrored shard (tile T-1-t) by one collective-permute,
 *    reversed locally, then shifted by the padding of uneven shards.
 * Folded patterns: a slice of a pad (through copies, the pad used only
 * there) is one pad with the slice's bounds folded into its padding (XLA's
 * algebraic simplifier does the same), and a concatenate of slices of one
 * value that rotate it (jnp.roll) is one circular halo: each device receives
 * only the wrapped rows.  The folded pad, copies and slices are not emitted
 * (part_deferred).
 */
#include <string.h>

#include "partition_internal.h"

/* ================================================================ users */

static const HloUsers *users(Part *p)
{
    if (!p->have_users) {
        p->users = hlo_compute_users(&p->in->comps[p->ic], p->scratch);
        p->have_users = true;
    }
    return &p->users;
}

/* The only user of instruction i, or -1 (several, none, or i is the root). */
static int32_t only_user(Part *p, int32_t i)
{
    const HloUsers *u = users(p);
    if (i == p->in->comps[p->ic].root || u->start[i + 1] - u->start[i] != 1)
        return -1;
    return u->users[u->start[i]];
}

bool part_leaf_read(Part *p, int32_t i, int32_t leaf)
{
    const HloComputation *c = &p->in->comps[p->ic];
    const Shape *s = part_in(p, i)->shape;
    if (i == c->root || !shape_is_tuple(s) || leaf < 0 || leaf >= s->n_elems)
        return true;
    for (int32_t e = 0; e < s->n_elems; e++)
        if (!shape_is_array(&s->elems[e]))
            return true; /* nested: leaves and elements differ */
    const HloUsers *u = users(p);
    for (int32_t j = u->start[i]; j < u->start[i + 1]; j++) {
        int32_t g = u->users[j];
        const HloInst *gi = part_in(p, g);
        if (gi->op != HLO_GET_TUPLE_ELEMENT)
            return true;
        if (hlo_attrs(gi)->index == leaf && (g == c->root || u->start[g + 1] > u->start[g]))
            return true;
    }
    return false;
}

/* Whether i may disappear into its user: its only use (an annotation on
 * it asks for a state no instruction then reads: the folded op runs in its
 * own result's sharding). */
static bool foldable(Part *p, int32_t i) { return only_user(p, i) >= 0; }

/* ================================================================ slice of pad */

/* The pad that slice s reads through foldable copies (every stride 1, the
 * pad foldable, every dim the slice cuts one the pad pads), or -1. */
static int32_t slice_of_pad(Part *p, int32_t s)
{
    const HloInst *si = part_in(p, s);
    const HloAttrs *sa = hlo_attrs(si);
    if (si->op != HLO_SLICE || si->n_operands != 1)
        return -1;
    for (int32_t d = 0; d < sa->slice_stride.n; d++)
        if (sa->slice_stride.v[d] != 1)
            return -1;
    int32_t x = si->operands[0];
    while (part_in(p, x)->op == HLO_COPY && foldable(p, x))
        x = part_in(p, x)->operands[0];
    const HloInst *pi = part_in(p, x);
    if (pi->op != HLO_PAD || !foldable(p, x) || !shape_is_array(pi->shape))
        return -1;
    const HloAttrs *pa = hlo_attrs(pi);
    if (pa->pad_lo.n != pi->shape->rank || sa->slice_start.n != pi->shape->rank)
        return -1;
    for (int32_t d = 0; d < pi->shape->rank; d++) {
        bool cut = sa->slice_start.v[d] != 0 || sa->slice_limit.v[d] != pi->shape->dims[d];
        bool padded = pa->pad_lo.v[d] || pa->pad_hi.v[d] || (pa->pad_interior.n && pa->pad_interior.v[d]);
        if (cut && !padded)
            return -1;
    }
    return x;
}

/* The padding of the folded pad: the slice's bounds moved into lo and hi. */
static void folded_padding(Part *p, int32_t s, int32_t pad, int64_t *lo, int64_t *hi)
{
    const HloAttrs *sa = hlo_attrs(part_in(p, s)), *pa = hlo_attrs(part_in(p, pad));
    const Shape *ps = part_in(p, pad)->shape;
    for (int32_t d = 0; d < ps->rank; d++) {
        lo[d] = pa->pad_lo.v[d] - sa->slice_start.v[d];
        hi[d] = pa->pad_hi.v[d] - (ps->dims[d] - sa->slice_limit.v[d]);
    }
}

/* ================================================================ roll */

/* A concatenate along dim d of slices of one value y (stride 1, whole on
 * every other dim, each slice foldable) that rotate y: piece k starts where
 * piece k-1 ends, modulo n, and the pieces add up to n.  *start: the
 * position of y at output position 0. */
static bool concat_roll(Part *p, int32_t c, int32_t *y, int64_t *start)
{
    const HloInst *ci = part_in(p, c);
    const HloAttrs *ca = hlo_attrs(ci);
    if (ci->op != HLO_CONCATENATE || ca->dimensions.n != 1 || ci->n_operands < 2 || !shape_is_array(ci->shape))
        return false;
    int32_t d = (int32_t)ca->dimensions.v[0], src = -1;
    int64_t n = ci->shape->dims[d], next = 0;
    for (int32_t k = 0; k < ci->n_operands; k++) {
        int32_t s = ci->operands[k];
        const HloInst *si = part_in(p, s);
        const HloAttrs *sa = hlo_attrs(si);
        if (si->op != HLO_SLICE || !foldable(p, s) || sa->slice_start.n != ci->shape->rank)
            return false;
        int32_t v = si->operands[0];
        if (src >= 0 && v != src)
            return false;
        src = v;
        const Shape *vs = part_in(p, v)->shape;
        if (!shape_is_array(vs) || vs->dims[d] != n)
            return false;
        for (int32_t e = 0; e < vs->rank; e++) {
            if (sa->slice_stride.n > e && sa->slice_stride.v[e] != 1)
                return false;
            if (e != d && (sa->slice_start.v[e] != 0 || sa->slice_limit.v[e] != vs->dims[e]))
                return false;
        }
        if (k == 0)
            *start = sa->slice_start.v[d];
        else if (sa->slice_start.v[d] != next % n)
            return false;
        next = sa->slice_limit.v[d];
    }
    *y = src;
    if (next % n != *start % n || *start % n == 0)
        return false;
    /* one circular exchange needs the dim split evenly in the result */
    const Tiling *decl = &part_decl_leaves(p, c)[0];
    int64_t tiles = tiling_dim_tiles(decl, p->mesh, d);
    return tiles > 1 && n % tiles == 0 && !decl->partial;
}

/* u itself, or, for a foldable copy, the first instruction down its chain
 * of only users that is not a foldable copy.  Memoized per copy, so the
 * walks over a chain of N copies cost N steps in all, not N^2. */
static int32_t copy_chain_end(Part *p, int32_t u)
{
    if (part_in(p, u)->op != HLO_COPY || !foldable(p, u))
        return u;
    if (!p->copy_end)
        p->copy_end = ARENA_ARRAY(p->scratch, int32_t, p->in->comps[p->ic].n_insts);
    int32_t end = u;
    while (part_in(p, end)->op == HLO_COPY && foldable(p, end) && !p->copy_end[end])
        end = only_user(p, end);
    if (part_in(p, end)->op == HLO_COPY && p->copy_end[end])
        end = p->copy_end[end] - 1;
    for (int32_t x = u; x != end && part_in(p, x)->op == HLO_COPY && !p->copy_end[x]; x = only_user(p, x))
        p->copy_end[x] = end + 1;
    return end;
}

bool part_deferred(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    if (in->op != HLO_PAD && in->op != HLO_COPY && in->op != HLO_SLICE)
        return false;
    if (!foldable(p, i))
        return false;
    int32_t u = only_user(p, i);
    if (in->op == HLO_SLICE && part_in(p, u)->op == HLO_CONCATENATE) {
        int32_t y;
        int64_t st;
        return concat_roll(p, u, &y, &st);
    }
    if (in->op == HLO_SLICE)
        return false;
    /* a pad or copy on the way to a slice that folds the pad */
    u = copy_chain_end(p, u);
    if (part_in(p, u)->op != HLO_SLICE)
        return false;
    int32_t pad = slice_of_pad(p, u);
    if (pad < 0)
        return false;
    for (int32_t x = part_in(p, u)->operands[0];; x = part_in(p, x)->operands[0]) {
        if (x == i)
            return true;
        if (x == pad)
            return false;
    }
}

/* ================================================================ helpers */

/* Whether the candidate splits a factor of kind `kind`. */
static bool splits_kind(const RuleCtx *rc, const RuleChoice *ch, FactorKind kind)
{
    for (int32_t f = 0; f < rc->rule.n_factors; f++)
        if (rc->rule.factors[f].kind == kind && ch->fs.n[f] > 0)
            return true;
    return false;
}

/* The single-factor dim of tensor k that factor f is, or -1. */
static int32_t dim_of(const OpRule *r, int32_t k, int32_t f)
{
    for (int32_t d = 0; d < r->t[k].rank; d++)
        if (oprule_dim_n(r, k, d) == 1 && oprule_dim_factor(r, k, d, 0) == f)
            return d;
    return -1;
}

/* Emits the clone of instruction i (attributes copied) named for result
 * instruction `res` in state leaves, and records it as res's result. */
static int32_t emit_result(Part *p, int32_t i, int32_t res, const Tiling *leaves, int32_t origin, const char *why,
                           const int32_t *ops, int32_t n_ops, HloAttrs **attrs)
{
    const HloInst *ri = part_in(p, res);
    bool partial = false;
    for (int32_t l = 0; l < p->vals[res].n_leaves; l++)
        partial |= leaves[l].partial != 0;
    Shape l = part_local_shape(p, ri->shape, leaves);
    int32_t r = part_clone(p, i, part_result_name(p, res, leaves, partial ? "partial" : "local"), &l, ops, n_ops);
    part_out(p, r)->span = ri->span;
    *attrs = hlo_attrs_mut(p->out, part_out(p, r));
    part_set_result(p, res, r, leaves, origin, why);
    return r;
}

/* ================================================================ pad */

typedef struct PadOp {
    int32_t pad;              /* the pad instruction */
    int64_t lo[SPMDC_MAX_RANK], hi[SPMDC_MAX_RANK], interior[SPMDC_MAX_RANK];
} PadOp;

static WinGeom pad_geom(const PadOp *po, const OpRule *r, int32_t d)
{
    WinGeom g = {r->t[0].shape[d], r->t[r->n_in].shape[d], 1, 1, po->lo[d], po->interior[d] + 1, 1};
    return g;
}

static int64_t pad_extra(Part *p, const RuleCtx *rc, const RuleChoice *cand, void *user)
{
    const PadOp *po = user;
    const OpRule *r = &rc->rule;
    Shape ls = tiling_local_shape(&cand->want[0], p->mesh, part_in(p, part_in(p, po->pad)->operands[0])->shape);
    int64_t bytes = 0;
    for (int32_t f = 0; f < r->n_factors && bytes < PART_INF_COST; f++) {
        int32_t d = dim_of(r, 0, f);
        if (r->factors[f].kind != FACTOR_PERMUTATION || cand->fs.n[f] == 0 || d < 0)
            continue;
        WinGeom g = pad_geom(po, r, d);
        if (!part_geom_tame(&g))
            return PART_INF_COST;
        int64_t b = part_window_dim_bytes(p, &ls, d, &g, fsh_factor(&cand->fs, f), cand->fs.n[f]);
        bytes = b >= PART_INF_COST ? PART_INF_COST : bytes + b;
    }
    return bytes;
}

/* Partitions pad instruction `pad` with the padding of po, for result
 * instruction `res` (the pad itself, or the slice folded into it: its shape
 * and declared sharding). */
static bool emit_pad(Part *p, const PadOp *po, int32_t res)
{
    int32_t pad = po->pad;
    const HloInst *pi = part_in(p, pad);
    RuleCtx rc;
    RuleChoice ch;
    if (!part_rule_init(p, pad, &rc))
        return res == pad ? part_default(p, pad) : false;
    OpRule *r = &rc.rule;
    if (res != pad) {
        /* the folded slice's result in place of the pad's */
        r->t[r->n_in].shape = part_in(p, res)->shape->dims;
        rc.cur[r->n_in] = part_decl_leaves(p, res)[0];
        for (int32_t f = 0; f < r->n_factors; f++) {
            int32_t d = dim_of(r, r->n_in, f);
            if (r->factors[f].kind == FACTOR_PASS && d >= 0)
                r->factors[f].size = r->t[r->n_in].shape[d];
        }
    }
    rc.splittable |= 1u << FACTOR_PERMUTATION;
    if (!part_rule_choose(p, &rc, pad_extra, (void *)po, &ch))
        return false;
    int32_t *ops = ARENA_ARRAY(p->scratch, int32_t, 2);
    if (part_rule_operands(p, &rc, &ch, ops) < 0)
        return false;
    const Shape *xg = part_in(p, pi->operands[0])->shape;
    Shape xs = tiling_local_shape(&ch.want[0], p->mesh, xg);
    int32_t x = ops[0];
    int64_t lo[SPMDC_MAX_RANK], hi[SPMDC_MAX_RANK], in[SPMDC_MAX_RANK];
    memcpy(lo, po->lo, sizeof lo);
    memcpy(hi, po->hi, sizeof hi);
    memcpy(in, po->interior, sizeof in);
    const char *base = part_in(p, pi->operands[0])->name;
    for (int32_t f = 0; f < r->n_factors && x >= 0; f++) {
        int32_t d = dim_of(r, 0, f);
        if (r->factors[f].kind != FACTOR_PERMUTATION || ch.fs.n[f] == 0 || d < 0)
            continue;
        WinGeom g = pad_geom(po, r, d);
        HaloCause why = {res, part_fmt(p, "%s padded by %s", base, part_in(p, res)->name)};
        x = part_window_dim(p, x, &xs, d, &g, fsh_factor(&ch.fs, f), ch.fs.n[f], ops[1], base, &why);
        lo[d] = hi[d] = in[d] = 0;
    }
    if (x < 0)
        return false;
    ops[0] = x;
    Tiling *leaves = part_result_leaves(p, &rc, &ch);
    int32_t origin = -1;
    const char *why = NULL;
    if (leaves[0].partial) {
        const VState *src = part_primary(p, pi->operands[0]);
        origin = src->origin;
        why = src->origin_reason;
    }
    HloAttrs *a;
    emit_result(p, pad, res, leaves, origin, why, ops, 2, &a);
    a->pad_lo = hlo_intlist(p->out, lo, xs.rank);
    a->pad_hi = hlo_intlist(p->out, hi, xs.rank);
    a->pad_interior = hlo_intlist(p->out, in, xs.rank);
    return true;
}

static void pad_op_of(Part *p, int32_t pad, PadOp *po)
{
    const HloAttrs *a = hlo_attrs(part_in(p, pad));
    memset(po, 0, sizeof *po);
    po->pad = pad;
    for (int32_t d = 0; d < a->pad_lo.n && d < SPMDC_MAX_RANK; d++) {
        po->lo[d] = a->pad_lo.v[d];
        po->hi[d] = a->pad_hi.v[d];
        po->interior[d] = a->pad_interior.n > d ? a->pad_interior.v[d] : 0;
    }
}

bool part_pad(Part *p, int32_t i)
{
    PadOp po;
    pad_op_of(p, i, &po);
    return emit_pad(p, &po, i);
}

/* ================================================================ slice */

typedef struct SliceGeom {
    int64_t n_in, n_out, start, stride;
} SliceGeom;

/* Device windows of a split sliced dim: shard t's outputs [t*c, ...) read
 * operand positions start + stride*o, a window of (c-1)*stride + 1. */
static void slice_request(Part *p, const SliceGeom *g, const int8_t *atoms, int32_t n_atoms, HaloReq *rq, bool cost)
{
    const Mesh *m = p->mesh;
    int64_t nd = m->n_devices, T = 1;
    for (int32_t k = 0; k < n_atoms; k++)
        T *= m->atom_size[atoms[k]];
    int64_t co = tiling_shard_size(g->n_out, T);
    memset(rq, 0, sizeof *rq);
    rq->atoms = atoms;
    rq->n_atoms = n_atoms;
    rq->d.n = g->n_in;
    rq->d.tiles = T;
    rq->d.chunk = tiling_shard_size(g->n_in, T);
    rq->width = (co - 1) * g->stride + 1;
    rq->fill = -1;
    if (cost) {
        if (!p->halo_buf[1])
            p->halo_buf[1] = arena_alloc(p->scratch, sizeof(HaloWindow) * (size_t)nd, _Alignof(HaloWindow));
        rq->win = p->halo_buf[1];
    } else {
        rq->win = ARENA_ARRAY(p->scratch, HaloWindow, nd);
    }
    for (int64_t dev = 0; dev < nd; dev++) {
        HaloWindow *w = &rq->win[dev];
        int64_t t = mesh_run_index(m, dev, atoms, n_atoms), first = t * co;
        int64_t last = (first + co < g->n_out ? first + co : g->n_out) - 1;
        w->tile = t;
        w->start = g->start + g->stride * first;
        w->lo = w->start;
        w->hi = last >= first ? g->start + g->stride * last + 1 : w->lo;
    }
}

static SliceGeom slice_geom(Part *p, int32_t i, const OpRule *r, int32_t d)
{
    const HloAttrs *a = hlo_attrs(part_in(p, i));
    SliceGeom g = {r->t[0].shape[d], r->t[r->n_in].shape[d], a->slice_start.v[d],
                   a->slice_stride.n > d && a->slice_stride.v[d] > 0 ? a->slice_stride.v[d] : 1};
    return g;
}

static int64_t slice_extra(Part *p, const RuleCtx *rc, const RuleChoice *cand, void *user)
{
    (void)user;
    const OpRule *r = &rc->rule;
    const HloInst *in = part_in(p, rc->inst);
    Shape ls = tiling_local_shape(&cand->want[0], p->mesh, part_in(p, in->operands[0])->shape);
    int64_t bytes = 0;
    for (int32_t f = 0; f < r->n_factors; f++) {
        int32_t d = dim_of(r, 0, f);
        if (r->factors[f].kind != FACTOR_PERMUTATION || cand->fs.n[f] == 0 || d < 0)
            continue;
        SliceGeom g = slice_geom(p, rc->inst, r, d);
        WinGeom wg = {g.n_in, g.n_out, 1, g.stride, -g.start, 1, 1};
        if (!part_geom_tame(&wg))
            return PART_INF_COST;
        HaloReq rq;
        slice_request(p, &g, fsh_factor(&cand->fs, f), cand->fs.n[f], &rq, true);
        HaloPlan hp;
        if (!halo_plan(&rq.d, rq.win, p->mesh->n_devices, rq.width, true, &hp))
            return PART_INF_COST;
        bytes += part_halo_bytes(&ls, d, &hp);
        ls.dims[d] = rq.width;
    }
    return bytes;
}

/* ================================================================ masked slice */

/* A slice that cuts split dims of its operand and leaves the result whole
 * along them (x[3] of row shards, a window of a few rows wanted
 * replicated): each device slices the part of the window it holds and
 * zeros the rest, and the result is a pending sum over those dims' atoms
 * (OR for pred): its consumer closes it (one all-reduce of the window, or
 * a reduce-scatter), as XLA does, instead of gathering the whole operand.
 * The operand stays in its current state; its split dims the slice takes
 * whole stay split. */
typedef struct MaskedSlice {
    Tiling res;               /* the result's state */
    uint32_t dims;            /* the masked dims */
    int64_t bytes;            /* bringing the result to its declared state */
} MaskedSlice;

static bool masked_slice_plan(Part *p, int32_t i, MaskedSlice *ms)
{
    const HloInst *in = part_in(p, i);
    int32_t x = in->operands[0];
    const Shape *xg = part_in(p, x)->shape;
    const HloAttrs *a = hlo_attrs(in);
    if (in->n_operands != 1 || p->vals[x].n_leaves != 1 || !shape_is_array(in->shape) ||
        a->slice_start.n != xg->rank || shape_elem_count(in->shape) == 0)
        return false;
    Tiling cur = part_primary(p, x)->leaves[0];
    ReduceKind kind = xg->type == ET_PRED ? REDUCE_OR : REDUCE_SUM;
    if (cur.partial && cur.kind != kind)
        return false;
    memset(ms, 0, sizeof *ms);
    ms->res = cur;
    uint32_t atoms = 0;
    for (int32_t d = 0; d < xg->rank; d++) {
        int64_t st = a->slice_stride.n > d ? a->slice_stride.v[d] : 1;
        bool cut = a->slice_start.v[d] != 0 || a->slice_limit.v[d] != xg->dims[d] || st != 1;
        if (!tiling_dim_n(&cur, d) || !cut)
            continue;
        ms->dims |= 1u << d;
        for (int32_t k = 0; k < tiling_dim_n(&cur, d); k++)
            atoms |= 1u << tiling_dim(&cur, d)[k];
    }
    if (!ms->dims)
        return false;
    ms->res = tiling_clear_dims(cur, ms->dims);
    ms->res.partial |= atoms;
    ms->res.kind = (uint8_t)kind;
    ms->res.perm = 0;
    if (cur.perm || !tiling_valid(&ms->res))
        return false;
    ms->bytes = part_reshard_cost(p, in->shape, &ms->res, &part_decl_leaves(p, i)[0]);
    return ms->bytes < PART_INF_COST;
}

static bool emit_masked_slice(Part *p, int32_t i, const MaskedSlice *ms)
{
    const HloInst *in = part_in(p, i);
    const Mesh *m = p->mesh;
    int32_t xv = in->operands[0];
    const Shape *xg = part_in(p, xv)->shape;
    const VState *src = part_primary(p, xv);
    const Tiling *cur = &src->leaves[0];
    Shape xs = tiling_local_shape(cur, m, xg);
    int32_t x = src->local;
    const char *base = part_in(p, xv)->name;
    const HloAttrs *ia = hlo_attrs(in);
    int64_t nd = m->n_devices, st[SPMDC_MAX_RANK], li[SPMDC_MAX_RANK], sd[SPMDC_MAX_RANK];
    ReduceKind kind = (ReduceKind)ms->res.kind;
    Shape s0 = shape_scalar(xg->type);
    int32_t zero = part_identity(p, kind, &s0, part_fmt(p, "%s.%s", reduce_kind_name(kind), elem_type_name(xg->type)));
    StrBuf words = {0};
    for (int32_t d = 0; d < xs.rank; d++) {
        st[d] = ia->slice_start.v[d];
        li[d] = ia->slice_limit.v[d];
        sd[d] = ia->slice_stride.n > d ? ia->slice_stride.v[d] : 1;
        if (tiling_dim_n(cur, d) && !((ms->dims >> d) & 1u)) {
            li[d] = xs.dims[d]; /* a split dim taken whole */
            continue;
        }
        if (!((ms->dims >> d) & 1u))
            continue;
        const int8_t *atoms = tiling_dim(cur, d);
        int32_t na = tiling_dim_n(cur, d);
        int64_t c = xs.dims[d], lo = st[d], span = (in->shape->dims[d] - 1) * sd[d] + 1, pad_lo = 0, pad_hi = 0;
        int64_t *tile = ARENA_ARRAY(p->scratch, int64_t, nd);
        for (int64_t dev = 0; dev < nd; dev++) {
            tile[dev] = mesh_run_index(m, dev, atoms, na) * c;
            if (tile[dev] >= lo + span || tile[dev] + c <= lo)
                continue; /* holds none of the window */
            pad_lo = tile[dev] - lo > pad_lo ? tile[dev] - lo : pad_lo;
            pad_hi = lo + span - (tile[dev] + c) > pad_hi ? lo + span - (tile[dev] + c) : pad_hi;
        }
        /* the window of every device that holds part of it, in its shard
         * padded by pad_lo, pad_hi rows */
        if (pad_lo || pad_hi) {
            x = part_pad_dim(p, x, &xs, zero, d, pad_lo, pad_hi, 0, part_name(p, base, "window-pad"));
            xs.dims[d] += pad_lo + pad_hi;
        }
        int64_t *off = ARENA_ARRAY(p->scratch, int64_t, nd), room = xs.dims[d] - span, first = -1;
        bool same = true;
        HaloWindow *win = ARENA_ARRAY(p->scratch, HaloWindow, nd);
        for (int64_t dev = 0; dev < nd; dev++) {
            int64_t o = lo - tile[dev] + pad_lo;
            off[dev] = o < 0 ? 0 : o > room ? room : o;
            win[dev].start = lo - tile[dev];
            same &= first < 0 || off[dev] == first;
            first = first < 0 ? off[dev] : first;
        }
        const char *wname = part_name(p, base, "window");
        if (same) {
            if (first != 0 || span != xs.dims[d])
                x = part_slice_dim(p, x, &xs, d, first, first + span, 1, wname);
        } else {
            int32_t o = part_device_value(p, off, part_fmt(p, "%s.window-offset", base));
            x = part_dynamic_slice_dim(p, x, &xs, d, o, span, wname);
        }
        xs.dims[d] = span;
        /* rows of the window outside the device's shard (local [0, c)) */
        x = part_mask_range(p, x, &xs, d, win, 0, c, zero, base);
        st[d] = 0;
        li[d] = span;
        if (p->rep)
            sb_printf(&words, "%s%s takes [%lld:%lld%s] of dim %d of %s, split on %s", words.len ? "; " : "",
                      in->name, (long long)lo, (long long)ia->slice_limit.v[d],
                      sd[d] != 1 ? part_fmt(p, ":%lld", (long long)sd[d]) : "", (int)d, base,
                      part_axes_text(p, atoms, na));
    }
    const char *why = NULL;
    if (p->rep) {
        sb_printf(&words, ": each device slices the rows it holds, %s elsewhere",
                  kind == REDUCE_OR ? "false" : "zeros");
        why = arena_strdup(p->scratch, sb_cstr(&words));
    }
    sb_free(&words);
    Shape l = tiling_local_shape(&ms->res, m, in->shape);
    int32_t r = part_clone(p, i, part_result_name(p, i, &ms->res, "partial"), &l, &x, 1);
    part_out(p, r)->span = in->span;
    HloAttrs *a = hlo_attrs_mut(p->out, part_out(p, r));
    a->slice_start = hlo_intlist(p->out, st, xs.rank);
    a->slice_limit = hlo_intlist(p->out, li, xs.rank);
    a->slice_stride = hlo_intlist(p->out, sd, xs.rank);
    int32_t origin = i;
    if (cur->partial) { /* the operand's pending sum flows on too */
        origin = src->origin;
        why = src->origin_reason;
    }
    part_set_result(p, i, r, &ms->res, origin, why);
    return true;
}

bool part_slice(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    int32_t pad = slice_of_pad(p, i);
    if (pad >= 0) {
        PadOp po;
        pad_op_of(p, pad, &po);
        folded_padding(p, i, pad, po.lo, po.hi);
        return emit_pad(p, &po, i);
    }
    RuleCtx rc;
    RuleChoice ch;
    MaskedSlice ms;
    if (!part_rule_init(p, i, &rc))
        return masked_slice_plan(p, i, &ms) ? emit_masked_slice(p, i, &ms) : part_default(p, i);
    rc.splittable |= 1u << FACTOR_PERMUTATION;
    bool masked = masked_slice_plan(p, i, &ms);
    if (!part_rule_choose(p, &rc, slice_extra, NULL, &ch))
        return masked ? emit_masked_slice(p, i, &ms) : part_default(p, i);
    if (masked && ms.bytes < ch.bytes)
        return emit_masked_slice(p, i, &ms);
    if (!splits_kind(&rc, &ch, FACTOR_PERMUTATION))
        return part_rule_emit(p, &rc, &ch);
    const OpRule *r = &rc.rule;
    int32_t *ops = ARENA_ARRAY(p->scratch, int32_t, 1);
    if (part_rule_operands(p, &rc, &ch, ops) < 0)
        return false;
    Shape xs = tiling_local_shape(&ch.want[0], p->mesh, part_in(p, in->operands[0])->shape);
    int32_t x = ops[0];
    const char *base = part_in(p, in->operands[0])->name;
    int64_t st[SPMDC_MAX_RANK], li[SPMDC_MAX_RANK], sd[SPMDC_MAX_RANK];
    const HloAttrs *ia = hlo_attrs(in);
    for (int32_t d = 0; d < xs.rank; d++) {
        st[d] = ia->slice_start.v[d];
        li[d] = ia->slice_limit.v[d];
        sd[d] = ia->slice_stride.n > d ? ia->slice_stride.v[d] : 1;
    }
    for (int32_t f = 0; f < r->n_factors; f++) {
        int32_t d = dim_of(r, 0, f);
        if (d < 0 || ch.fs.n[f] == 0)
            continue;
        if (r->factors[f].kind == FACTOR_PASS) {
            li[d] = xs.dims[d]; /* a split dim taken whole */
            continue;
        }
        if (r->factors[f].kind != FACTOR_PERMUTATION)
            continue;
        SliceGeom g = slice_geom(p, i, r, d);
        HaloReq rq;
        slice_request(p, &g, fsh_factor(&ch.fs, f), ch.fs.n[f], &rq, false);
        rq.dim = d;
        HaloPlan hp;
        if (!halo_plan(&rq.d, rq.win, p->mesh->n_devices, rq.width, true, &hp))
            return false;
        HaloCause why = {i, part_fmt(p, "%s sliced by %s", base, in->name)};
        x = part_halo(p, x, &xs, &rq, &hp, base, &why);
        xs.dims[d] = rq.width;
        st[d] = 0;
        li[d] = rq.width;
    }
    ops[0] = x;
    Tiling *leaves = part_result_leaves(p, &rc, &ch);
    int32_t origin = -1;
    const char *why = NULL;
    if (leaves[0].partial) {
        const VState *src = part_primary(p, in->operands[0]);
        origin = src->origin;
        why = src->origin_reason;
    }
    HloAttrs *a;
    emit_result(p, i, i, leaves, origin, why, ops, 1, &a);
    a->slice_start = hlo_intlist(p->out, st, xs.rank);
    a->slice_limit = hlo_intlist(p->out, li, xs.rank);
    a->slice_stride = hlo_intlist(p->out, sd, xs.rank);
    return true;
}

/* ================================================================ roll */

/* The rotation of y that concatenate c is (concat_roll): y brought to c's
 * declared tiling, then one circular exchange along the split dim: every
 * device's window starts `start` positions further, so it receives only
 * the rows that wrap over from its neighbour. */
static bool emit_roll(Part *p, int32_t c, int32_t y, int64_t start)
{
    const HloInst *ci = part_in(p, c);
    int32_t d = (int32_t)hlo_attrs(ci)->dimensions.v[0];
    const Tiling *decl = part_decl_leaves(p, c);
    Cause cause = {c, NULL, 0};
    int32_t x = part_get(p, y, decl, &cause);
    if (x < 0)
        return false;
    const Mesh *m = p->mesh;
    int64_t nd = m->n_devices, n = ci->shape->dims[d], T = tiling_dim_tiles(decl, m, d), ch = n / T;
    HaloReq rq;
    memset(&rq, 0, sizeof rq);
    rq.dim = d;
    rq.atoms = tiling_dim(decl, d);
    rq.n_atoms = tiling_dim_n(decl, d);
    rq.d.n = n;
    rq.d.tiles = T;
    rq.d.chunk = ch;
    rq.d.circular = true;
    rq.width = ch;
    rq.fill = -1;
    rq.win = ARENA_ARRAY(p->scratch, HaloWindow, nd);
    /* the shorter way round: a roll by 3 takes 3 rows from below, not n-3
     * from above */
    int64_t a = start % n;
    if (a > n / 2)
        a -= n;
    for (int64_t dev = 0; dev < nd; dev++) {
        HaloWindow *w = &rq.win[dev];
        w->tile = mesh_run_index(m, dev, rq.atoms, rq.n_atoms);
        w->start = w->tile * ch + a;
        w->lo = w->start;
        w->hi = w->start + ch;
    }
    HaloPlan hp;
    if (!halo_plan(&rq.d, rq.win, nd, rq.width, false, &hp))
        return false;
    Shape xs = tiling_local_shape(decl, m, part_in(p, y)->shape);
    const char *base = part_in(p, y)->name;
    HaloCause why = {c, part_fmt(p, "%s rotated by %s (a roll by %lld)", base, ci->name, (long long)((n - start % n) % n))};
    int32_t r = part_halo(p, x, &xs, &rq, &hp, base, &why);
    if (r == x)
        r = part_emit(p, HLO_COPY, "", &xs, &x, 1);
    part_out(p, r)->name = arena_strdup(p->out->arena, part_result_name(p, c, decl, "local"));
    part_out(p, r)->span = ci->span;
    part_set_result(p, c, r, decl, -1, NULL);
    return true;
}

/* ================================================================ concatenate */

/* Device windows of operand k of a concatenate split on its dim: shard t's
 * outputs [t*c, ...) that operand k holds, in its own positions. */
static void concat_request(Part *p, int64_t n_out, int64_t n_k, int64_t off, const int8_t *atoms, int32_t n_atoms,
                           HaloReq *rq, HaloWindow *win)
{
    const Mesh *m = p->mesh;
    int64_t T = 1;
    for (int32_t k = 0; k < n_atoms; k++)
        T *= m->atom_size[atoms[k]];
    int64_t co = tiling_shard_size(n_out, T);
    memset(rq, 0, sizeof *rq);
    rq->atoms = atoms;
    rq->n_atoms = n_atoms;
    rq->d.n = n_k;
    rq->d.tiles = T;
    rq->d.chunk = tiling_shard_size(n_k, T);
    rq->width = co;
    rq->fill = -1;
    rq->win = win;
    for (int64_t dev = 0; dev < m->n_devices; dev++) {
        HaloWindow *w = &win[dev];
        int64_t t = mesh_run_index(m, dev, atoms, n_atoms), first = t * co, end = first + co < n_out ? first + co : n_out;
        int64_t lo = first > off ? first : off, hi = end < off + n_k ? end : off + n_k;
        w->tile = t;
        w->start = first - off;
        w->lo = lo - off;
        w->hi = hi > lo ? hi - off : w->lo;
    }
}

/* The concat dim's factor, or -1. */
static int32_t concat_factor(const RuleCtx *rc)
{
    for (int32_t f = 0; f < rc->rule.n_factors; f++)
        if (rc->rule.factors[f].kind == FACTOR_PERMUTATION)
            return f;
    return -1;
}

static int64_t concat_extra(Part *p, const RuleCtx *rc, const RuleChoice *cand, void *user)
{
    (void)user;
    const OpRule *r = &rc->rule;
    const HloInst *in = part_in(p, rc->inst);
    int32_t f = concat_factor(rc);
    if (f < 0 || cand->fs.n[f] == 0)
        return 0;
    int32_t d = (int32_t)hlo_attrs(in)->dimensions.v[0];
    if (!p->halo_buf[1])
        p->halo_buf[1] = arena_alloc(p->scratch, sizeof(HaloWindow) * (size_t)p->mesh->n_devices, _Alignof(HaloWindow));
    int64_t bytes = 0, off = 0;
    for (int32_t k = 0; k < r->n_in; k++) {
        int64_t nk = r->t[k].shape[d];
        HaloReq rq;
        concat_request(p, r->t[r->n_in].shape[d], nk, off, fsh_factor(&cand->fs, f), cand->fs.n[f], &rq,
                       p->halo_buf[1]);
        off += nk;
        HaloPlan hp;
        if (!halo_plan(&rq.d, rq.win, p->mesh->n_devices, rq.width, true, &hp))
            return PART_INF_COST;
        Shape ls = tiling_local_shape(&cand->want[k], p->mesh, part_in(p, in->operands[r->t[k].slot])->shape);
        bytes += part_halo_bytes(&ls, d, &hp);
    }
    return bytes;
}

bool part_concatenate(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    int32_t y;
    int64_t start;
    if (concat_roll(p, i, &y, &start))
        return emit_roll(p, i, y, start);
    RuleCtx rc;
    RuleChoice ch;
    if (!part_rule_init(p, i, &rc))
        return part_default(p, i);
    rc.splittable |= 1u << FACTOR_PERMUTATION;
    if (!part_rule_choose(p, &rc, concat_extra, NULL, &ch))
        return part_default(p, i);
    int32_t f = concat_factor(&rc);
    if (f < 0 || ch.fs.n[f] == 0)
        return part_rule_emit(p, &rc, &ch);
    const OpRule *r = &rc.rule;
    int32_t *ops = ARENA_ARRAY(p->scratch, int32_t, in->n_operands + 1);
    if (part_rule_operands(p, &rc, &ch, ops) < 0)
        return false;
    int32_t d = (int32_t)hlo_attrs(in)->dimensions.v[0];
    const Mesh *m = p->mesh;
    int64_t nd = m->n_devices, off = 0, n_out = r->t[r->n_in].shape[d];
    Tiling *leaves = part_result_leaves(p, &rc, &ch);
    Shape l = part_local_shape(p, in->shape, leaves);
    int32_t acc = -1;
    int32_t pos = -1;
    for (int32_t k = 0; k < r->n_in; k++) {
        int32_t v = in->operands[r->t[k].slot];
        int64_t nk = r->t[k].shape[d];
        Shape xs = tiling_local_shape(&ch.want[k], m, part_in(p, v)->shape);
        HaloReq rq;
        concat_request(p, n_out, nk, off, fsh_factor(&ch.fs, f), ch.fs.n[f], &rq, ARENA_ARRAY(p->scratch, HaloWindow, nd));
        rq.dim = d;
        HaloPlan hp;
        if (!halo_plan(&rq.d, rq.win, nd, rq.width, true, &hp))
            return false;
        HaloCause why = {i, part_fmt(p, "%s concatenated by %s", part_in(p, v)->name, in->name)};
        int32_t piece = part_halo(p, ops[r->t[k].slot], &xs, &rq, &hp, part_in(p, v)->name, &why);
        if (k == 0) {
            acc = piece;
        } else {
            /* positions from off on are this operand's (later ones override) */
            if (pos < 0) {
                int64_t w = l.dims[d];
                Shape is = shape_array(ET_S32, 1, &w);
                int32_t io = part_emit(p, HLO_IOTA, part_name(p, in->name, "position"), &is, NULL, 0);
                hlo_attrs_mut(p->out, part_out(p, io))->iota_dimension = 0;
                int64_t *first = ARENA_ARRAY(p->scratch, int64_t, nd);
                for (int64_t dev = 0; dev < nd; dev++)
                    first[dev] = rq.win[dev].start + off;
                int32_t st = part_device_value(p, first, part_fmt(p, "%s.shard-start", in->name));
                int32_t sb = part_emit(p, HLO_BROADCAST, part_name(p, in->name, "shard-start-broadcast"), &is, &st, 1);
                int32_t ab[2] = {io, sb};
                pos = part_emit(p, HLO_ADD, part_name(p, in->name, "global-position"), &is, ab, 2);
            }
            int64_t w = l.dims[d], offv = off;
            Shape is = shape_array(ET_S32, 1, &w), ps = shape_array(ET_PRED, 1, &w), s0 = shape_scalar(ET_S32);
            int32_t oc = part_emit(p, HLO_CONSTANT, part_name(p, in->name, "operand-start"), &s0, NULL, 0);
            Literal *lit = ARENA_NEW(p->out->arena, Literal);
            lit->n = 1;
            lit->i = arena_memdup(p->out->arena, &offv, sizeof(int64_t));
            hlo_attrs_mut(p->out, part_out(p, oc))->literal = lit;
            int32_t ob = part_emit(p, HLO_BROADCAST, part_name(p, in->name, "operand-start-broadcast"), &is, &oc, 1);
            int32_t cops[2] = {pos, ob};
            int32_t cmp = part_emit(p, HLO_COMPARE, part_name(p, in->name, "from-operand"), &ps, cops, 2);
            hlo_attrs_mut(p->out, part_out(p, cmp))->direction = CMP_GE;
            Shape lp = l;
            lp.type = ET_PRED;
            int32_t cb = part_emit(p, HLO_BROADCAST, part_name(p, in->name, "from-operand-broadcast"), &lp, &cmp, 1);
            int64_t dd = d;
            hlo_attrs_mut(p->out, part_out(p, cb))->dimensions = hlo_intlist(p->out, &dd, 1);
            int32_t sops[3] = {cb, piece, acc};
            acc = part_emit(p, HLO_SELECT, part_name(p, in->name, "joined"), &l, sops, 3);
        }
        off += nk;
    }
    if (acc == ops[r->t[0].slot])
        acc = part_emit(p, HLO_COPY, part_name(p, in->name, "joined"), &l, &acc, 1);
    part_out(p, acc)->name = arena_strdup(p->out->arena, part_result_name(p, i, leaves, "local"));
    part_out(p, acc)->span = in->span;
    int32_t origin = -1;
    const char *why = NULL;
    if (leaves[0].partial) {
        const VState *src = part_primary(p, in->operands[0]);
        origin = src->origin;
        why = src->origin_reason;
    }
    part_set_result(p, i, acc, leaves, origin, why);
    return true;
}

/* ================================================================ reverse */

/* Device windows of the shift after the mirror permute: shard t then holds
 * the output rows [t*c - e, (t+1)*c - e), e = T*c - n its padding; it needs
 * [t*c, (t+1)*c).  In positions moved up by e, a plain halo from above. */
static void reverse_request(Part *p, int64_t n, const int8_t *atoms, int32_t n_atoms, HaloReq *rq, HaloWindow *win)
{
    const Mesh *m = p->mesh;
    int64_t T = 1;
    for (int32_t k = 0; k < n_atoms; k++)
        T *= m->atom_size[atoms[k]];
    int64_t c = tiling_shard_size(n, T), e = T * c - n;
    memset(rq, 0, sizeof *rq);
    rq->atoms = atoms;
    rq->n_atoms = n_atoms;
    rq->d.n = T * c;
    rq->d.tiles = T;
    rq->d.chunk = c;
    rq->width = c;
    rq->fill = -1;
    rq->win = win;
    for (int64_t dev = 0; dev < m->n_devices; dev++) {
        HaloWindow *w = &win[dev];
        w->tile = mesh_run_index(m, dev, atoms, n_atoms);
        w->start = w->tile * c + e;
        w->lo = w->start;
        int64_t end = w->tile * c + c < n ? w->tile * c + c : n;
        w->hi = end + e > w->lo ? end + e : w->lo;
    }
}

static int64_t reverse_extra(Part *p, const RuleCtx *rc, const RuleChoice *cand, void *user)
{
    (void)user;
    const OpRule *r = &rc->rule;
    const HloInst *in = part_in(p, rc->inst);
    Shape ls = tiling_local_shape(&cand->want[0], p->mesh, part_in(p, in->operands[0])->shape);
    if (!p->halo_buf[1])
        p->halo_buf[1] = arena_alloc(p->scratch, sizeof(HaloWindow) * (size_t)p->mesh->n_devices, _Alignof(HaloWindow));
    int64_t bytes = 0;
    for (int32_t f = 0; f < r->n_factors; f++) {
        int32_t d = dim_of(r, 0, f);
        if (r->factors[f].kind != FACTOR_PERMUTATION || cand->fs.n[f] == 0 || d < 0)
            continue;
        HaloReq rq;
        reverse_request(p, r->t[0].shape[d], fsh_factor(&cand->fs, f), cand->fs.n[f], &rq, p->halo_buf[1]);
        HaloPlan hp;
        if (!halo_plan(&rq.d, rq.win, p->mesh->n_devices, rq.width, true, &hp))
            return PART_INF_COST;
        bytes += shape_byte_size(&ls) + part_halo_bytes(&ls, d, &hp); /* the mirror permute, the shift */
    }
    return bytes;
}

bool part_reverse(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    RuleCtx rc;
    RuleChoice ch;
    if (!part_rule_init(p, i, &rc))
        return part_default(p, i);
    rc.splittable |= 1u << FACTOR_PERMUTATION;
    if (!part_rule_choose(p, &rc, reverse_extra, NULL, &ch))
        return part_default(p, i);
    if (!splits_kind(&rc, &ch, FACTOR_PERMUTATION))
        return part_rule_emit(p, &rc, &ch);
    const OpRule *r = &rc.rule;
    int32_t *ops = ARENA_ARRAY(p->scratch, int32_t, 1);
    if (part_rule_operands(p, &rc, &ch, ops) < 0)
        return false;
    const Mesh *m = p->mesh;
    int64_t nd = m->n_devices;
    Shape xs = tiling_local_shape(&ch.want[0], m, part_in(p, in->operands[0])->shape);
    const char *base = part_in(p, in->operands[0])->name;
    /* every reversed dim reversed locally, the split ones then mirrored */
    int32_t x = part_clone(p, i, part_name(p, base, "reversed"), &xs, ops, 1);
    for (int32_t f = 0; f < r->n_factors; f++) {
        int32_t d = dim_of(r, 0, f);
        if (r->factors[f].kind != FACTOR_PERMUTATION || ch.fs.n[f] == 0 || d < 0)
            continue;
        const int8_t *atoms = fsh_factor(&ch.fs, f);
        int32_t na = ch.fs.n[f];
        int64_t T = fsh_tiles(&ch.fs, m, f);
        int32_t cp = part_emit(p, HLO_COLLECTIVE_PERMUTE, part_name(p, base, "mirror"), &xs, &x, 1);
        HloAttrs *a = hlo_attrs_mut(p->out, part_out(p, cp));
        a->channel_id = p->mod->next_channel++;
        a->n_pairs = (int32_t)nd;
        a->pairs = ARENA_ARRAY(p->out->arena, int64_t, 2 * nd);
        for (int64_t dev = 0; dev < nd; dev++) {
            int64_t t = mesh_run_index(m, dev, atoms, na);
            a->pairs[2 * dev] = dev;
            a->pairs[2 * dev + 1] = mesh_device_at(m, dev, atoms, na, T - 1 - t);
        }
        if (p->rep) {
            const char *why = part_fmt(p, "%s reversed by %s along its split dim %d: each shard goes to the mirrored "
                                       "device", base, in->name, (int)d);
            int64_t b = shape_byte_size(&xs);
            part_record(p, COLL_COLLECTIVE_PERMUTE, cp, atoms, na, comm_bytes_per_device(COLL_COLLECTIVE_PERMUTE, T, b, b),
                        i, why);
        }
        HaloReq rq;
        reverse_request(p, r->t[0].shape[d], atoms, na, &rq, ARENA_ARRAY(p->scratch, HaloWindow, nd));
        rq.dim = d;
        HaloPlan hp;
        if (!halo_plan(&rq.d, rq.win, nd, rq.width, true, &hp))
            return false;
        HaloCause hw = {i, part_fmt(p, "%s reversed by %s: shards shifted by the %lld padding rows of the uneven "
                                    "dim", base, in->name, (long long)(rq.d.n - r->t[0].shape[d]))};
        x = part_halo(p, cp, &xs, &rq, &hp, base, &hw);
    }
    Tiling *leaves = part_result_leaves(p, &rc, &ch);
    part_out(p, x)->name = arena_strdup(p->out->arena, part_result_name(p, i, leaves, "local"));
    part_out(p, x)->span = in->span;
    int32_t origin = -1;
    const char *why = NULL;
    if (leaves[0].partial) {
        const VState *src = part_primary(p, in->operands[0]);
        origin = src->origin;
        why = src->origin_reason;
    }
    part_set_result(p, i, x, leaves, origin, why);
    return true;
}
