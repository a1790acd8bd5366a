/* reshard.c - sharding states (Tiling), the reshard planner and its lowering.
 *
 * One transition catalogue serves every edge of the partitioner: a value in
 * state `from` (per dim a run of mesh atoms, maybe a pending reduction over
 * some atoms) must reach state `to`.  reshard_plan decides the steps, each
 * with its cost from comm_bytes_per_device (docs/report.md), greedily in
 * this order until the states agree:
 *   1. local dynamic-slice: a dim whose run is a prefix of the target's gets
 *      the next target atoms that are replicated (free) appended;
 *   2. reduce-scatter: ... or the next target atoms that are pending partial
 *      atoms (the scattered pieces are the minor tiles of that dim);
 *   3. all-reduce of partial atoms the target never splits on;
 *   4. all-to-all: a suffix of one dim's run that is not in place moves to
 *      the end of another dim's run where the target wants it;
 *   5. all-reduce of the remaining partial atoms;
 *   6. all-gather of a dim's out-of-place suffix (only as much as needed to
 *      expose an all-to-all, else all of it).
 * After a gather the freed atoms are sliced in again (the general path); if
 * that means gathering the whole tensor the plan says so (full_remat).
 * Two other plans compete with the greedy one on bytes: the permute plan
 * (slice, one collective-permute, gather) and the all-to-all-then-permute
 * plan (all-to-alls to the target's tile counts, one collective-permute).
 * reshard_lower emits the steps as HLO (partition-id offset tables,
 * collectives with replica groups from mesh_groups, reducer computations).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "partition_internal.h"

/* ================================================================ planning */

/* A Tiling with one fixed-size run per dim (easy to edit while planning). */
typedef struct Wide {
    int32_t rank;
    int32_t n[SPMDC_MAX_RANK];
    int8_t a[SPMDC_MAX_RANK][SPMDC_MAX_ATOMS];
    uint32_t partial;
    ReduceKind kind;
} Wide;

static void widen(const Tiling *s, Wide *w)
{
    memset(w, 0, sizeof *w);
    w->rank = s->rank;
    int32_t k = 0;
    for (int32_t d = 0; d < s->rank; d++) {
        w->n[d] = s->n[d];
        memcpy(w->a[d], s->atoms + k, s->n[d]);
        k += s->n[d];
    }
    w->partial = s->partial;
    w->kind = (ReduceKind)s->kind;
}

static void narrow(const Wide *w, Tiling *s)
{
    tiling_replicated(s, w->rank);
    int32_t k = 0;
    for (int32_t d = 0; d < w->rank; d++) {
        s->n[d] = (uint8_t)w->n[d];
        memcpy(s->atoms + k, w->a[d], (size_t)w->n[d]);
        k += w->n[d];
    }
    s->partial = w->partial;
    s->kind = (uint8_t)(w->partial ? w->kind : REDUCE_NONE);
}

static uint32_t wide_used(const Wide *w)
{
    uint32_t m = 0;
    for (int32_t d = 0; d < w->rank; d++)
        for (int32_t i = 0; i < w->n[d]; i++)
            m |= 1u << w->a[d][i];
    return m;
}

static int32_t common_prefix(const Wide *c, const Wide *t, int32_t d)
{
    int32_t k = 0;
    while (k < c->n[d] && k < t->n[d] && c->a[d][k] == t->a[d][k])
        k++;
    return k;
}

static bool is_prefix(const Wide *c, const Wide *t, int32_t d) { return common_prefix(c, t, d) == c->n[d]; }

static int64_t group_size(const Mesh *m, const int8_t *atoms, int32_t n)
{
    int64_t g = 1;
    for (int32_t i = 0; i < n; i++)
        g *= m->atom_size[atoms[i]];
    return g;
}

/* ================================================================ uneven geometry

 * A step that changes the number of tiles of a dim keeps XLA's ceil layout
 * (tiling.h) only when the shards nest: t tiles of c = ceil(n/t) split into
 * k tiles each of c' = ceil(n/(t*k)) with k*c' == c (always so when n
 * divides).  Otherwise the step gets fix-ups on that dim:
 *  - a dim that was whole (t == 1) is padded to k*c' before a slice or a
 *    reduce-scatter splits it, and a dim that ends whole is sliced back to n
 *    after an all-gather (local);
 *  - between two split layouts the rows are re-chunked by a halo exchange
 *    (halo.h): each device fetches the rows of its new shard from its
 *    neighbours by collective-permute.  A slice re-chunks to the new shards
 *    directly; a reduce-scatter or the receiving dim of an all-to-all first
 *    re-chunks the t tiles to stride k*c'; an all-gather or the giving dim of
 *    an all-to-all gathers stride k*c and re-chunks after.
 * The fix-ups' bytes are part of the step's cost (ReshardStep.halo_bytes). */

typedef enum FixKind { FIX_PAD, FIX_SLICE, FIX_HALO } FixKind;

typedef struct Fixup {
    FixKind kind;
    int32_t dim;
    int64_t size;                        /* the local dim after the fix-up */
    int8_t src[SPMDC_MAX_ATOMS], dst[SPMDC_MAX_ATOMS]; /* FIX_HALO: the dim's atoms before / after */
    int32_t n_src, n_dst;
    int64_t src_chunk, dst_chunk;        /* FIX_HALO: strides before / after (size: the window) */
} Fixup;

typedef struct Fixups {
    int32_t n_pre, n_post;
    Fixup pre[SPMDC_MAX_RANK], post[SPMDC_MAX_RANK];
    uint32_t sliced;                     /* STEP_SLICE: dims the fix-ups already cut to their shard */
} Fixups;

static int64_t dim_chunk(const Mesh *m, const Shape *g, const Tiling *s, int32_t d)
{
    return tiling_shard_size(g->dims[d], tiling_dim_tiles(s, m, d));
}

/* dim d goes from `from`'s layout to the layout of k times as many tiles of
 * `to` (split), i.e. to local size k*c' or directly c' (cut) */
static bool add_split_fix(const Mesh *m, const Shape *g, const Tiling *from, const Tiling *to, int32_t d, bool cut,
                          Fixup *f)
{
    int64_t tb = tiling_dim_tiles(from, m, d), ta = tiling_dim_tiles(to, m, d), k = ta / tb;
    int64_t cb = dim_chunk(m, g, from, d), ca = dim_chunk(m, g, to, d);
    if (k * ca == cb)
        return false;
    memset(f, 0, sizeof *f);
    f->dim = d;
    if (tb == 1) {
        f->kind = FIX_PAD;
        f->size = k * ca;
        return true;
    }
    f->kind = FIX_HALO;
    f->n_src = tiling_dim_n(from, d);
    memcpy(f->src, tiling_dim(from, d), (size_t)f->n_src);
    f->src_chunk = cb;
    if (cut) {
        f->n_dst = tiling_dim_n(to, d);
        memcpy(f->dst, tiling_dim(to, d), (size_t)f->n_dst);
        f->dst_chunk = ca;
        f->size = ca;
    } else {
        f->n_dst = f->n_src;
        memcpy(f->dst, f->src, (size_t)f->n_src);
        f->dst_chunk = k * ca;
        f->size = k * ca;
    }
    return true;
}

/* dim d was gathered from `from` (stride c) to the coarser `to`: k*c rows
 * hold [i*k*c, (i+1)*k*c); bring them to to's layout. */
static bool add_gather_fix(const Mesh *m, const Shape *g, const Tiling *from, const Tiling *to, int32_t d, Fixup *f)
{
    int64_t tb = tiling_dim_tiles(from, m, d), ta = tiling_dim_tiles(to, m, d), k = tb / ta;
    int64_t cb = dim_chunk(m, g, from, d), ca = dim_chunk(m, g, to, d);
    if (k * cb == ca)
        return false;
    memset(f, 0, sizeof *f);
    f->dim = d;
    f->size = ca;
    if (ta == 1) {
        f->kind = FIX_SLICE;
        return true;
    }
    f->kind = FIX_HALO;
    f->n_src = f->n_dst = tiling_dim_n(to, d);
    memcpy(f->src, tiling_dim(to, d), (size_t)f->n_src);
    memcpy(f->dst, f->src, (size_t)f->n_src);
    f->src_chunk = k * cb;
    f->dst_chunk = ca;
    return true;
}

/* The fix-ups of a step from `before`. */
static void step_fixups(const Mesh *m, const Shape *g, const Tiling *before, const ReshardStep *st, Fixups *fx)
{
    fx->n_pre = fx->n_post = 0; /* pre and post are read up to their counts */
    fx->sliced = 0;
    Fixup f;
    switch (st->kind) {
    case STEP_SLICE:
        for (int32_t d = 0; d < before->rank; d++) {
            if (tiling_dim_n(&st->after, d) == tiling_dim_n(before, d) ||
                !add_split_fix(m, g, before, &st->after, d, true, &f))
                continue;
            fx->pre[fx->n_pre++] = f;
            if (f.kind == FIX_HALO)
                fx->sliced |= 1u << d;
        }
        break;
    case STEP_REDUCE_SCATTER:
        if (add_split_fix(m, g, before, &st->after, st->dim, false, &f))
            fx->pre[fx->n_pre++] = f;
        break;
    case STEP_ALL_GATHER:
        if (add_gather_fix(m, g, before, &st->after, st->dim, &f))
            fx->post[fx->n_post++] = f;
        break;
    case STEP_ALL_TO_ALL:
        if (add_split_fix(m, g, before, &st->after, st->dim2, false, &f))
            fx->pre[fx->n_pre++] = f;
        if (add_gather_fix(m, g, before, &st->after, st->dim, &f))
            fx->post[fx->n_post++] = f;
        break;
    default: break;
    }
}

static bool fixup_windows(const Mesh *m, int64_t n, const int8_t *src, int32_t n_src, int64_t src_chunk,
                           const int8_t *dst, int32_t n_dst, int64_t dst_chunk, int64_t width, HaloDim *hd,
                           HaloWindow *w, HaloPlan *hp)
{
    hd->n = n;
    hd->tiles = group_size(m, src, n_src);
    hd->chunk = src_chunk;
    hd->circular = false;
    for (int64_t dev = 0; dev < m->n_devices; dev++) {
        int64_t st = mesh_run_index(m, dev, dst, n_dst) * dst_chunk;
        w[dev].tile = mesh_run_index(m, dev, src, n_src);
        w[dev].start = st;
        w[dev].lo = st;
        w[dev].hi = st + width < n ? st + width : n;
        if (w[dev].hi < w[dev].lo)
            w[dev].hi = w[dev].lo;
    }
    return halo_plan(hd, w, m->n_devices, width, true, hp);
}

/* Bytes of a FIX_HALO on a local array of shape ls (dim f->dim holding
 * f->src_chunk rows); RESHARD_INF_COST if it cannot be planned. */
static int64_t fix_halo_bytes(const Mesh *m, const Shape *g, const Shape *ls, const Fixup *f)
{
    HaloWindow *w = malloc(sizeof(HaloWindow) * (size_t)m->n_devices);
    HaloDim hd;
    HaloPlan hp;
    bool ok = w && fixup_windows(m, g->dims[f->dim], f->src, f->n_src, f->src_chunk, f->dst, f->n_dst,
                                         f->dst_chunk, f->size, &hd, w, &hp);
    free(w);
    if (!ok)
        return RESHARD_INF_COST;
    Shape r = shape_array(ls->type, ls->rank, ls->dims);
    r.dims[f->dim] = 1;
    return hp.rows_sent * shape_byte_size(&r);
}

/* Applies fix-ups to local shape *ls, adding their halo bytes to *bytes. */
static void fix_shape(const Mesh *m, const Shape *g, const Fixup *f, int32_t n, Shape *ls, int64_t *bytes)
{
    for (int32_t k = 0; k < n; k++) {
        if (f[k].kind == FIX_HALO) {
            Shape src = *ls;
            src.dims[f[k].dim] = f[k].src_chunk;
            int64_t b = fix_halo_bytes(m, g, &src, &f[k]);
            *bytes = *bytes + b < RESHARD_INF_COST ? *bytes + b : RESHARD_INF_COST;
        } else if (f[k].kind == FIX_SLICE) {
            ls->dims[f[k].dim] = g->dims[f[k].dim];
            continue;
        }
        ls->dims[f[k].dim] = f[k].size;
    }
}

/* st->bytes (collective and fix-ups) and st->halo_bytes of a step from
 * `before`: every buffer at the size the lowering emits. */
static void cost_step(const Mesh *m, const Shape *g, const Tiling *before, ReshardStep *st)
{
    Fixups fx;
    step_fixups(m, g, before, st, &fx);
    Shape ls = tiling_local_shape(before, m, g);
    int64_t halo = 0;
    fix_shape(m, g, fx.pre, fx.n_pre, &ls, &halo);
    int64_t gs = group_size(m, st->atoms, st->n_atoms), b = shape_byte_size(&ls), main = 0;
    Shape la = tiling_local_shape(&st->after, m, g);
    switch (st->kind) {
    case STEP_SLICE:
    case STEP_MASK: break;
    case STEP_ALL_REDUCE: main = comm_bytes_per_device(COLL_ALL_REDUCE, gs, b, b); break;
    case STEP_REDUCE_SCATTER: main = comm_bytes_per_device(COLL_REDUCE_SCATTER, gs, b, b / gs); break;
    case STEP_ALL_TO_ALL: main = comm_bytes_per_device(COLL_ALL_TO_ALL, gs, b, b); break;
    case STEP_ALL_GATHER: main = comm_bytes_per_device(COLL_ALL_GATHER, gs, b, b * gs); break;
    case STEP_COLLECTIVE_PERMUTE:
        main = comm_bytes_per_device(COLL_COLLECTIVE_PERMUTE, gs, b, shape_byte_size(&la));
        break;
    }
    if (st->kind == STEP_ALL_GATHER || st->kind == STEP_ALL_TO_ALL) {
        /* the post fix-ups run on the collective's result */
        Shape lr = la;
        lr.dims[st->dim] = tiling_dim_tiles(before, m, st->dim) / tiling_dim_tiles(&st->after, m, st->dim) *
                           dim_chunk(m, g, before, st->dim);
        fix_shape(m, g, fx.post, fx.n_post, &lr, &halo);
    }
    st->halo_bytes = halo;
    st->bytes = main + halo < RESHARD_INF_COST ? main + halo : RESHARD_INF_COST;
}

typedef struct Planner {
    const Mesh *m;
    const Shape *global;
    const Wide *t;
    Wide c;
    ReshardPlan *plan;
} Planner;

static void push(Planner *pl, StepKind k, int32_t dim, int32_t dim2, const int8_t *atoms, int32_t n, const Wide *after)
{
    ReshardPlan *plan = pl->plan;
    SPMDC_ASSERT(plan->n_steps < RESHARD_MAX_STEPS);
    ReshardStep *st = &plan->steps[plan->n_steps++];
    st->kind = k;
    st->dim = dim;
    st->dim2 = dim2;
    st->n_atoms = n;
    memset(st->atoms, 0, sizeof st->atoms);
    if (n)
        memcpy(st->atoms, atoms, (size_t)n);
    narrow(after, &st->after);
    Tiling before;
    narrow(&pl->c, &before);
    cost_step(pl->m, pl->global, &before, st);
    plan->bytes = plan->bytes + st->bytes < RESHARD_INF_COST ? plan->bytes + st->bytes : RESHARD_INF_COST;
    pl->c = *after;
}

/* 1. Append free (replicated) target atoms to every dim that is a prefix of
 * its target run: one dynamic-slice for all dims. */
static bool try_slice(Planner *pl)
{
    Wide nx = pl->c;
    uint32_t busy = wide_used(&pl->c) | pl->c.partial;
    bool any = false;
    for (int32_t d = 0; d < nx.rank; d++) {
        if (!is_prefix(&pl->c, pl->t, d))
            continue;
        while (nx.n[d] < pl->t->n[d]) {
            int8_t a = pl->t->a[d][nx.n[d]];
            if (busy & (1u << a))
                break;
            nx.a[d][nx.n[d]++] = a;
            busy |= 1u << a;
            any = true;
        }
    }
    if (any)
        push(pl, STEP_SLICE, -1, -1, NULL, 0, &nx);
    return any;
}

/* 2. Reduce-scatter pending atoms into a dim that wants them next. */
static bool try_reduce_scatter(Planner *pl)
{
    uint32_t red = pl->c.partial & ~pl->t->partial;
    for (int32_t d = 0; d < pl->c.rank && red; d++) {
        if (!is_prefix(&pl->c, pl->t, d))
            continue;
        int8_t run[SPMDC_MAX_ATOMS];
        int32_t n = 0;
        uint32_t mask = 0;
        for (int32_t k = pl->c.n[d]; k < pl->t->n[d] && (red & (1u << pl->t->a[d][k])); k++) {
            run[n++] = pl->t->a[d][k];
            mask |= 1u << pl->t->a[d][k];
        }
        if (n == 0)
            continue;
        Wide nx = pl->c;
        memcpy(&nx.a[d][nx.n[d]], run, (size_t)n);
        nx.n[d] += n;
        nx.partial &= ~mask;
        push(pl, STEP_REDUCE_SCATTER, d, -1, run, n, &nx);
        return true;
    }
    return false;
}

/* 3./5. All-reduce the pending atoms to drop (only those no target dim wants
 * when only_unwanted). */
static bool try_all_reduce(Planner *pl, bool only_unwanted)
{
    uint32_t red = pl->c.partial & ~pl->t->partial;
    if (only_unwanted)
        red &= ~wide_used(pl->t);
    if (!red)
        return false;
    int8_t atoms[SPMDC_MAX_ATOMS];
    int32_t n = 0;
    for (int32_t a = 0; a < SPMDC_MAX_ATOMS; a++)
        if (red & (1u << a))
            atoms[n++] = (int8_t)a;
    Wide nx = pl->c;
    nx.partial &= ~red;
    if (!nx.partial)
        nx.kind = REDUCE_NONE;
    push(pl, STEP_ALL_REDUCE, -1, -1, atoms, n, &nx);
    return true;
}

/* Largest k <= max_k such that the last k atoms of dim i's run are the next k
 * target atoms of dim j (j a prefix of its target); 0 if none. */
static int32_t a2a_match(const Planner *pl, int32_t i, int32_t j, int32_t max_k, int32_t end_i)
{
    const Wide *c = &pl->c, *t = pl->t;
    if (j == i || !is_prefix(c, t, j))
        return 0;
    int32_t room = t->n[j] - c->n[j];
    for (int32_t k = max_k < room ? max_k : room; k >= 1; k--) {
        if (memcmp(&c->a[i][end_i - k], &t->a[j][c->n[j]], (size_t)k) != 0)
            continue;
        return k;
    }
    return 0;
}

/* 4. Move an out-of-place suffix of one dim to where the target wants it. */
static bool try_all_to_all(Planner *pl)
{
    for (int32_t i = 0; i < pl->c.rank; i++) {
        int32_t excess = pl->c.n[i] - common_prefix(&pl->c, pl->t, i);
        for (int32_t j = 0; j < pl->c.rank && excess > 0; j++) {
            int32_t k = a2a_match(pl, i, j, excess, pl->c.n[i]);
            if (k == 0)
                continue;
            Wide nx = pl->c;
            int8_t run[SPMDC_MAX_ATOMS];
            memcpy(run, &pl->c.a[i][pl->c.n[i] - k], (size_t)k);
            nx.n[i] -= k;
            memcpy(&nx.a[j][nx.n[j]], run, (size_t)k);
            nx.n[j] += k;
            push(pl, STEP_ALL_TO_ALL, i, j, run, k, &nx);
            return true;
        }
    }
    return false;
}

/* Whether dropping dim j's out-of-place suffix would let another dim's
 * out-of-place suffix move into j by all-to-all. */
static bool gather_unblocks(const Planner *pl, int32_t j)
{
    Planner tmp = *pl;
    tmp.c.n[j] = common_prefix(&pl->c, pl->t, j);
    for (int32_t i = 0; i < tmp.c.rank; i++) {
        int32_t excess = tmp.c.n[i] - common_prefix(&tmp.c, tmp.t, i);
        if (i != j && excess > 0 && a2a_match(&tmp, i, j, excess, tmp.c.n[i]) > 0)
            return true;
    }
    return false;
}

/* How many atoms to gather off the end of dim d's out-of-place suffix
 * (length excess) so that an all-to-all can move the next one; excess if
 * none. */
static int32_t gather_to_expose(const Planner *pl, int32_t d, int32_t excess)
{
    for (int32_t k = 1; k < excess; k++)
        for (int32_t j = 0; j < pl->c.rank; j++)
            if (a2a_match(pl, d, j, 1, pl->c.n[d] - k) > 0)
                return k;
    return excess;
}

/* 6. Gather out-of-place atoms, preferring (a) a dim whose suffix blocks an
 * all-to-all into it, (b) just enough of a dim's suffix to expose an
 * all-to-all out of it, (c) the whole suffix of the first dim that has one. */
static bool try_all_gather(Planner *pl)
{
    int32_t dim = -1, s = 0;
    for (int32_t d = 0; d < pl->c.rank && dim < 0; d++) {
        int32_t excess = pl->c.n[d] - common_prefix(&pl->c, pl->t, d);
        if (excess > 0 && gather_unblocks(pl, d)) {
            dim = d;
            s = excess;
        }
    }
    for (int32_t d = 0; d < pl->c.rank && dim < 0; d++) {
        int32_t excess = pl->c.n[d] - common_prefix(&pl->c, pl->t, d);
        int32_t k = excess > 0 ? gather_to_expose(pl, d, excess) : 0;
        if (k > 0 && k < excess) {
            dim = d;
            s = k;
        }
    }
    for (int32_t d = 0; d < pl->c.rank && dim < 0; d++) {
        int32_t excess = pl->c.n[d] - common_prefix(&pl->c, pl->t, d);
        if (excess > 0) {
            dim = d;
            s = excess;
        }
    }
    if (dim < 0)
        return false;
    Wide nx = pl->c;
    int8_t run[SPMDC_MAX_ATOMS];
    memcpy(run, &pl->c.a[dim][pl->c.n[dim] - s], (size_t)s);
    nx.n[dim] -= s;
    push(pl, STEP_ALL_GATHER, dim, -1, run, s, &nx);
    if (wide_used(&nx) == 0 && wide_used(pl->t) != 0)
        pl->plan->full_remat = true;
    return true;
}

static bool wide_equal(const Wide *a, const Wide *b)
{
    if (a->rank != b->rank || a->partial != b->partial || (a->partial && a->kind != b->kind))
        return false;
    for (int32_t d = 0; d < a->rank; d++)
        if (a->n[d] != b->n[d] || memcmp(a->a[d], b->a[d], (size_t)a->n[d]) != 0)
            return false;
    return true;
}

/* Picks a free atom (bit in *free) whose size divides f, preferring atoms of
 * `want` (in order), then atoms the target leaves replicated; -1 if none. */
static int32_t pick_free_atom(const Mesh *m, uint32_t free, int64_t f, const int8_t *want, int32_t n_want,
                              uint32_t target_used)
{
    for (int32_t k = 0; k < n_want; k++)
        if ((free & (1u << want[k])) && f % m->atom_size[want[k]] == 0)
            return want[k];
    for (int32_t pass = 0; pass < 2; pass++)
        for (int32_t a = 0; a < m->n_atoms; a++)
            if ((free & (1u << a)) && f % m->atom_size[a] == 0 && (pass == 1 || !(target_used & (1u << a))))
                return a;
    return -1;
}

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Appends atoms (from *avail, sizes multiplying to f) to dim d of s. */
static bool grow_dim(const Mesh *m, Tiling *s, int32_t d, int64_t f, uint32_t *avail, const Tiling *prefer,
                     uint32_t avoid)
{
    int8_t run[SPMDC_MAX_ATOMS];
    int32_t n = tiling_dim_n(s, d);
    memcpy(run, tiling_dim(s, d), (size_t)n);
    while (f > 1) {
        int32_t a = pick_free_atom(m, *avail, f, tiling_dim(prefer, d), tiling_dim_n(prefer, d), avoid);
        if (a < 0)
            return false;
        run[n++] = (int8_t)a;
        *avail &= ~(1u << a);
        f /= m->atom_size[a];
    }
    tiling_set_dim(s, d, run, n);
    return true;
}

static ReshardStep *add_step(ReshardPlan *plan, StepKind k, const Tiling *after)
{
    ReshardStep *st = &plan->steps[plan->n_steps++];
    memset(st, 0, sizeof *st);
    st->kind = k;
    st->dim = st->dim2 = -1;
    st->after = *after;
    return st;
}

/* Appends a collective-permute step from state `from` to `to` over the mesh
 * atoms in `moved` (a bit per atom): every device sends its whole shard of
 * `from` (docs/report.md's cost of a permute). */
static void add_permute(ReshardPlan *plan, const Mesh *m, const Shape *global, const Tiling *from, const Tiling *to,
                        uint32_t moved)
{
    ReshardStep *st = add_step(plan, STEP_COLLECTIVE_PERMUTE, to);
    for (int32_t a = 0; a < SPMDC_MAX_ATOMS; a++)
        if (moved & (1u << a))
            st->atoms[st->n_atoms++] = (int8_t)a;
    Shape l = tiling_local_shape(from, m, global);
    st->bytes = comm_bytes_per_device(COLL_COLLECTIVE_PERMUTE, group_size(m, st->atoms, st->n_atoms),
                                      shape_byte_size(&l), shape_byte_size(&l));
    plan->bytes += st->bytes;
}

/* The permute plan, for non-partial states: on every dim, slice locally with
 * free atoms up to c = lcm(source tiles, target tiles) (mid1), permute to the
 * target extended by surplus atoms up to c (mid2: each device receives its
 * whole new block from exactly one device), then all-gather the surplus off
 * each dim.  Any step may be empty. */
static bool permute_plan(const Mesh *m, const Shape *global, const Tiling *from, const Tiling *to, ReshardPlan *plan)
{
    plan->n_steps = 0;
    plan->bytes = 0;
    plan->full_remat = false;
    if (from->partial || to->partial || tiling_equal(from, to))
        return false;
    Tiling mid1 = *from, mid2 = *to;
    uint32_t all = (1u << m->n_atoms) - 1;
    uint32_t free1 = all & ~tiling_used(from), free2 = all & ~tiling_used(to);
    for (int32_t d = 0; d < from->rank; d++) {
        int64_t a = tiling_dim_tiles(from, m, d), b = tiling_dim_tiles(to, m, d), c = a / gcd64(a, b) * b;
        if (global->dims[d] % c != 0 || !grow_dim(m, &mid1, d, c / a, &free1, to, tiling_used(to)) ||
            !grow_dim(m, &mid2, d, c / b, &free2, &mid1, tiling_used(from)))
            return false;
    }
    if (!tiling_equal(&mid1, from))
        add_step(plan, STEP_SLICE, &mid1);
    if (!tiling_equal(&mid1, &mid2)) {
        add_permute(plan, m, global, &mid1, &mid2, tiling_used(&mid1) | tiling_used(&mid2));
    }
    Tiling cur = mid2;
    for (int32_t d = 0; d < cur.rank; d++) {
        int32_t keep = tiling_dim_n(to, d), n = tiling_dim_n(&cur, d);
        if (n == keep)
            continue;
        Tiling next = cur;
        tiling_set_dim(&next, d, tiling_dim(&cur, d), keep);
        ReshardStep *st = add_step(plan, STEP_ALL_GATHER, &next);
        st->dim = d;
        st->n_atoms = n - keep;
        memcpy(st->atoms, tiling_dim(&cur, d) + keep, (size_t)(n - keep));
        Shape lb = tiling_local_shape(&cur, m, global), la = tiling_local_shape(&next, m, global);
        st->bytes = comm_bytes_per_device(COLL_ALL_GATHER, group_size(m, st->atoms, st->n_atoms), shape_byte_size(&lb),
                                          shape_byte_size(&la));
        plan->bytes += st->bytes;
        cur = next;
    }
    return plan->n_steps > 0;
}

/* Tiles of dim d of a Wide state. */
static int64_t wide_tiles(const Mesh *m, const Wide *w, int32_t d)
{
    int64_t t = 1;
    for (int32_t i = 0; i < w->n[d]; i++)
        t *= m->atom_size[w->a[d][i]];
    return t;
}

/* The all-to-all-then-permute plan, for non-partial states that split on
 * the same atoms, every dim divisible by its tiles in each: all-to-alls
 * move the longest minor run of a dim that has more tiles than the
 * target's to the end of a dim that has fewer, until every dim has the
 * target's tile count (the target's local shape); then one
 * collective-permute sends each block to the device the target puts it on.  A split moved across dims
 * ([{a}, {b}] to [{b}, {a}], a transposed operand) costs one all-to-all of
 * the atoms that differ in count plus one block, where gathering and
 * re-splitting costs more (XLA's plan). */
static bool a2a_permute_plan(const Mesh *m, const Shape *global, const Tiling *from, const Tiling *to,
                             ReshardPlan *plan)
{
    plan->n_steps = 0;
    plan->bytes = 0;
    plan->full_remat = false;
    if (from->partial || to->partial || from->perm || to->perm || tiling_used(from) != tiling_used(to) ||
        tiling_equal(from, to))
        return false;
    Wide t;
    widen(to, &t);
    Planner pl = {m, global, &t, {0}, plan};
    widen(from, &pl.c);
    for (int32_t d = 0; d < t.rank; d++)
        if (global->dims[d] % wide_tiles(m, &pl.c, d) != 0 || global->dims[d] % wide_tiles(m, &t, d) != 0)
            return false;
    for (;;) {
        /* the longest minor run of a dim with too many tiles that a dim
         * with too few can take whole: one all-to-all moves it */
        int32_t i = -1, j = -1, k = 0;
        for (int32_t d = 0; d < t.rank && i < 0; d++) {
            int64_t have = wide_tiles(m, &pl.c, d), want = wide_tiles(m, &t, d);
            if (have <= want)
                continue;
            for (int32_t n = pl.c.n[d]; n >= 1 && i < 0; n--) {
                int64_t f = 1;
                for (int32_t x = pl.c.n[d] - n; x < pl.c.n[d]; x++)
                    f *= m->atom_size[pl.c.a[d][x]];
                if (have % (want * f) != 0)
                    continue;
                for (int32_t e = 0; e < t.rank && j < 0; e++) {
                    int64_t he = wide_tiles(m, &pl.c, e), we = wide_tiles(m, &t, e);
                    if (e != d && he < we && we % (he * f) == 0 && global->dims[e] % (he * f) == 0)
                        j = e;
                }
                if (j >= 0) {
                    i = d;
                    k = n;
                }
            }
        }
        if (i < 0)
            break;
        if (plan->n_steps + 2 > RESHARD_MAX_STEPS)
            return false;
        int8_t run[SPMDC_MAX_ATOMS];
        memcpy(run, &pl.c.a[i][pl.c.n[i] - k], (size_t)k);
        Wide nx = pl.c;
        nx.n[i] -= k;
        memcpy(&nx.a[j][nx.n[j]], run, (size_t)k);
        nx.n[j] += k;
        push(&pl, STEP_ALL_TO_ALL, i, j, run, k, &nx);
    }
    for (int32_t d = 0; d < t.rank; d++)
        if (wide_tiles(m, &pl.c, d) != wide_tiles(m, &t, d))
            return false;
    if (!wide_equal(&pl.c, &t)) {
        Tiling before;
        narrow(&pl.c, &before);
        add_permute(plan, m, global, &before, to, tiling_used(to));
    }
    return plan->n_steps > 0;
}

static bool greedy_plan(const Mesh *m, const Shape *global, const Tiling *from, const Tiling *to, ReshardPlan *plan)
{
    Wide t;
    widen(to, &t);
    Planner pl = {m, global, &t, {0}, plan};
    widen(from, &pl.c);
    for (int32_t it = 0; it < RESHARD_MAX_STEPS; it++) {
        if (wide_equal(&pl.c, &t))
            return true;
        if (try_slice(&pl) || try_reduce_scatter(&pl) || try_all_reduce(&pl, true) || try_all_to_all(&pl) ||
            try_all_reduce(&pl, false) || try_all_gather(&pl))
            continue;
        return false; /* unreachable for valid states */
    }
    return false;
}

/* A collective-permute step between two device orders of one tiling. */
static void add_order_step(const Mesh *m, const Shape *global, const Tiling *before, const Tiling *after,
                           ReshardPlan *plan)
{
    SPMDC_ASSERT(plan->n_steps < RESHARD_MAX_STEPS);
    add_permute(plan, m, global, before, after, tiling_used(before));
}

bool reshard_plan(const Mesh *m, const Shape *global, const Tiling *from, const Tiling *to, ReshardPlan *plan)
{
    plan->n_steps = 0;
    plan->bytes = 0;
    plan->full_remat = false;
    if (from->rank != to->rank || !tiling_valid(to) || !tiling_valid(from))
        return false;
    if (from->partial && to->partial && to->kind != from->kind)
        return false;
    if (tiling_equal(from, to))
        return true;
    /* Device orders other than the mesh's: a collective-permute into the
     * mesh's order first, one out of it last, the plan in between. */
    bool fperm = from->perm && tiling_used(from), tperm = to->perm && tiling_used(to);
    if (fperm || tperm || from->perm || to->perm) {
        if ((fperm && from->partial) || (tperm && to->partial))
            return false;
        Tiling f0 = *from, t0 = *to;
        f0.perm = t0.perm = 0;
        if (fperm)
            add_order_step(m, global, from, &f0, plan);
        ReshardPlan inner;
        if (!reshard_plan(m, global, &f0, &t0, &inner) || plan->n_steps + inner.n_steps + 1 > RESHARD_MAX_STEPS)
            return false;
        memcpy(plan->steps + plan->n_steps, inner.steps, sizeof(ReshardStep) * (size_t)inner.n_steps);
        plan->n_steps += inner.n_steps;
        plan->bytes += inner.bytes;
        plan->full_remat = inner.full_remat;
        if (tperm)
            add_order_step(m, global, &t0, to, plan);
        return true;
    }
    /* Atoms only `to` is partial over are masked in at the end: plan to the
     * state without them first. */
    uint32_t masked = to->partial & ~from->partial;
    Tiling mid = *to;
    mid.partial &= ~masked;
    if (!mid.partial)
        mid.kind = REDUCE_NONE;
    if (!greedy_plan(m, global, from, &mid, plan))
        return false;
    ReshardPlan cp;
    if (permute_plan(m, global, from, &mid, &cp) &&
        (cp.bytes < plan->bytes || (cp.bytes == plan->bytes && cp.n_steps < plan->n_steps))) {
        plan->n_steps = cp.n_steps;
        memcpy(plan->steps, cp.steps, sizeof(ReshardStep) * (size_t)cp.n_steps);
        plan->bytes = cp.bytes;
        plan->full_remat = false;
    }
    if (a2a_permute_plan(m, global, from, &mid, &cp) &&
        (cp.bytes < plan->bytes || (cp.bytes == plan->bytes && cp.n_steps < plan->n_steps))) {
        plan->n_steps = cp.n_steps;
        memcpy(plan->steps, cp.steps, sizeof(ReshardStep) * (size_t)cp.n_steps);
        plan->bytes = cp.bytes;
        plan->full_remat = false;
    }
    if (masked) {
        SPMDC_ASSERT(plan->n_steps < RESHARD_MAX_STEPS);
        ReshardStep *st = add_step(plan, STEP_MASK, to);
        for (int32_t a = 0; a < SPMDC_MAX_ATOMS; a++)
            if (masked & (1u << a))
                st->atoms[st->n_atoms++] = (int8_t)a;
    }
    return true;
}

int64_t reshard_cost(const Mesh *m, const Shape *global, const Tiling *from, const Tiling *to)
{
    if (tiling_equal(from, to))
        return 0;
    ReshardPlan plan;
    if (!reshard_plan(m, global, from, to, &plan))
        return PART_INF_COST;
    return plan.bytes;
}

typedef struct MemoKey {
    int32_t type, rank;
    int64_t dims[SPMDC_MAX_RANK];   /* 0 past rank */
    Tiling from, to;
} MemoKey;

typedef struct MemoEnt {
    MemoKey key;
    int64_t cost;
    bool full;
} MemoEnt;

/* A kept plan: its steps inline (plans of more steps are not kept). */
#define PLAN_MEMO_SLOTS 512
#define PLAN_MEMO_STEPS 4
typedef struct PlanEnt {
    MemoKey key;
    bool full;                  /* the slot holds a plan */
    bool ok;                    /* reshard_plan's result */
    bool full_remat;
    int32_t n_steps;
    int64_t bytes;
    ReshardStep steps[PLAN_MEMO_STEPS];
} PlanEnt;

struct ReshardMemo {
    uint64_t e_mask, plan_mask; /* slots - 1 (powers of two) */
    MemoEnt *e;
    PlanEnt *plans;
};

_Static_assert(sizeof(MemoKey) % 8 == 0, "MemoKey is hashed as 64-bit words");

ReshardMemo *reshard_memo_new(Arena *arena, int64_t n_insts)
{
    uint64_t slots = 256; /* a slot per 4 instructions: a layered model repeats few reshards */
    while (slots < RESHARD_MEMO_SLOTS && (int64_t)slots * 4 < n_insts) slots *= 2;
    _Static_assert(RESHARD_MEMO_SLOTS / PLAN_MEMO_SLOTS == 16, "a sixteenth as many plans");
    ReshardMemo *memo = ARENA_NEW(arena, ReshardMemo);
    memo->e_mask = slots - 1;
    memo->plan_mask = slots / 16 - 1;
    memo->e = ARENA_ARRAY(arena, MemoEnt, slots);
    memo->plans = ARENA_ARRAY(arena, PlanEnt, slots / 16);
    return memo;
}

/* The key of (global, from, to) (its unused bytes zero) and its hash. */
static uint64_t memo_key(const Shape *global, const Tiling *from, const Tiling *to, MemoKey *k)
{
    memset(k, 0, sizeof *k);
    k->type = global->type;
    k->rank = global->rank;
    for (int32_t d = 0; d < global->rank && d < SPMDC_MAX_RANK; d++)
        k->dims[d] = global->dims[d];
    k->from = *from;
    k->to = *to;
    uint64_t w[sizeof *k / 8], h = 0x9e3779b97f4a7c15ull;
    memcpy(w, k, sizeof *k);
    for (size_t i = 0; i < sizeof *k / 8; i++) {
        h ^= w[i];
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    return h;
}

int64_t reshard_cost_memo(ReshardMemo *memo, const Mesh *m, const Shape *global, const Tiling *from, const Tiling *to)
{
    if (tiling_equal(from, to))
        return 0;
    MemoKey k;
    uint64_t h = memo_key(global, from, to, &k);
    MemoEnt *e = &memo->e[h & memo->e_mask];
    if (e->full && memcmp(&e->key, &k, sizeof k) == 0)
        return e->cost;
    e->key = k;
    e->cost = reshard_cost(m, global, from, to);
    e->full = true;
    return e->cost;
}

bool reshard_plan_memo(ReshardMemo *memo, const Mesh *m, const Shape *global, const Tiling *from, const Tiling *to,
                       ReshardPlan *plan)
{
    MemoKey k;
    uint64_t h = memo_key(global, from, to, &k);
    PlanEnt *e = &memo->plans[h & memo->plan_mask];
    if (e->full && memcmp(&e->key, &k, sizeof k) == 0) {
        plan->n_steps = e->n_steps;
        plan->bytes = e->bytes;
        plan->full_remat = e->full_remat;
        memcpy(plan->steps, e->steps, sizeof(ReshardStep) * (size_t)e->n_steps);
        return e->ok;
    }
    bool ok = reshard_plan(m, global, from, to, plan);
    if (!ok) { /* what a failed plan leaves is not read */
        plan->n_steps = 0;
        plan->bytes = 0;
        plan->full_remat = false;
    }
    if (plan->n_steps <= PLAN_MEMO_STEPS) {
        e->key = k;
        e->full = true;
        e->ok = ok;
        e->full_remat = plan->full_remat;
        e->n_steps = plan->n_steps;
        e->bytes = plan->bytes;
        memcpy(e->steps, plan->steps, sizeof(ReshardStep) * (size_t)plan->n_steps);
    }
    return ok;
}

/* ================================================================ lowering */

static const char *step_role(StepKind k)
{
    switch (k) {
    case STEP_SLICE: return "slice";
    case STEP_ALL_REDUCE: return "all-reduce";
    case STEP_REDUCE_SCATTER: return "reduce-scatter";
    case STEP_ALL_TO_ALL: return "all-to-all";
    case STEP_ALL_GATHER: return "all-gather";
    case STEP_COLLECTIVE_PERMUTE: return "collective-permute";
    case STEP_MASK: return "mask";
    }
    return "reshard";
}

static const char *step_name(Part *p, LowerNames *nm, const ReshardStep *st, const char *role)
{
    if (nm->decl && !nm->decl_named && tiling_equal(&st->after, nm->decl)) {
        nm->decl_named = true;
        return nm->base;
    }
    return part_name(p, nm->base, role);
}

/* Collective attributes: a fresh channel and the groups along atoms. */
static void set_collective(Part *p, int32_t v, const int8_t *atoms, int32_t n, bool global_ids)
{
    ReplicaGroups g = part_groups(p, atoms, n);
    HloAttrs *a = hlo_attrs_mut(p->out, part_out(p, v));
    a->channel_id = p->mod->next_channel++;
    a->replica_groups = g;
    a->use_global_device_ids = global_ids;
}

static void set_dims(Part *p, int32_t v, int64_t dim)
{
    HloAttrs *a = hlo_attrs_mut(p->out, part_out(p, v));
    a->dimensions = hlo_intlist(p->out, &dim, 1);
}

/* The lowering of one step: its fix-ups, its collective, the report rows. */
typedef struct Lower {
    Part *p;
    const Shape *global;
    const Tiling *before;
    const ReshardStep *st;
    const char *name, *base;     /* the step's result name; the value's name */
    int32_t row_inst;            /* the collective's report row: cause instruction and words */
    const char *row_why;
    HaloCause fix;               /* the fix-ups' rows */
    Fixups fx;
} Lower;

static CollectiveKind step_collective(StepKind k)
{
    switch (k) {
    case STEP_ALL_REDUCE: return COLL_ALL_REDUCE;
    case STEP_REDUCE_SCATTER: return COLL_REDUCE_SCATTER;
    case STEP_ALL_TO_ALL: return COLL_ALL_TO_ALL;
    case STEP_COLLECTIVE_PERMUTE: return COLL_COLLECTIVE_PERMUTE;
    default: return COLL_ALL_GATHER;
    }
}

static void record_main(Lower *lw, int32_t coll)
{
    const ReshardStep *st = lw->st;
    part_record(lw->p, step_collective(st->kind), coll, st->atoms, st->n_atoms, st->bytes - st->halo_bytes,
                lw->row_inst, lw->row_why);
}

/* Emits fix-ups f[0..n) on v (local shape *ls, updated). */
static int32_t apply_fixups(Lower *lw, int32_t v, Shape *ls, const Fixup *f, int32_t n)
{
    Part *p = lw->p;
    for (int32_t k = 0; k < n && v >= 0; k++) {
        int32_t d = f[k].dim;
        switch (f[k].kind) {
        case FIX_PAD: {
            Shape s0 = shape_scalar(ls->type);
            int32_t z = part_identity(p, REDUCE_SUM, &s0, lw->base);
            v = part_pad_dim(p, v, ls, z, d, 0, f[k].size - ls->dims[d], 0, part_name(p, lw->base, "pad"));
            ls->dims[d] = f[k].size;
            break;
        }
        case FIX_SLICE:
            v = part_slice_dim(p, v, ls, d, 0, lw->global->dims[d], 1, part_name(p, lw->base, "slice"));
            ls->dims[d] = lw->global->dims[d];
            break;
        case FIX_HALO: {
            HaloReq rq;
            HaloPlan hp;
            memset(&rq, 0, sizeof rq);
            rq.win = ARENA_ARRAY(p->scratch, HaloWindow, p->mesh->n_devices);
            if (!fixup_windows(p->mesh, lw->global->dims[d], f[k].src, f[k].n_src, f[k].src_chunk, f[k].dst,
                               f[k].n_dst, f[k].dst_chunk, f[k].size, &rq.d, rq.win, &hp)) {
                diag_error(p->cx->diag, SRC_SPAN_NONE, "%s: cannot re-chunk dim %d", lw->base, (int)d);
                return -1;
            }
            rq.dim = d;
            rq.width = f[k].size;
            rq.atoms = f[k].src;
            rq.n_atoms = f[k].n_src;
            rq.fill = -1;
            StrBuf b = {0};
            if (lw->fix.words)
                sb_printf(&b, "%s; ", lw->fix.words);
            sb_printf(&b, "dim %d of %s re-chunked from shards of %lld to %lld (%lld does not divide evenly)", (int)d,
                      lw->base, (long long)f[k].src_chunk, (long long)f[k].dst_chunk,
                      (long long)lw->global->dims[d]);
            HaloCause why = {lw->fix.inst, arena_strdup(p->scratch, sb_cstr(&b))};
            sb_free(&b);
            v = part_halo(p, v, ls, &rq, &hp, lw->base, &why);
            ls->dims[d] = f[k].size;
            break;
        }
        }
    }
    return v;
}

/* Whether the step's result takes the value's own name (it reaches the
 * declared state). */
static bool own_name(const Lower *lw) { return strcmp(lw->name, lw->base) == 0; }

/* The last instruction of a step that ends in fix-ups carries the value's
 * own name when the step reaches its declared state (the collective then
 * has a derived name); otherwise the fix-ups keep their own names. */
static int32_t named(Lower *lw, int32_t v)
{
    if (v >= 0 && own_name(lw))
        part_out(lw->p, v)->name = arena_strdup(lw->p->out->arena, lw->name);
    return v;
}

/* The name of a step's collective that fix-ups follow. */
static const char *coll_name(Lower *lw, const char *role)
{
    return own_name(lw) ? part_name(lw->p, lw->base, role) : lw->name;
}

static int32_t lower_slice(Lower *lw, int32_t v)
{
    Part *p = lw->p;
    const ReshardStep *st = lw->st;
    Shape ls = tiling_local_shape(lw->before, p->mesh, lw->global);
    Shape lout = tiling_local_shape(&st->after, p->mesh, lw->global);
    v = apply_fixups(lw, v, &ls, lw->fx.pre, lw->fx.n_pre);
    int32_t ops[1 + SPMDC_MAX_RANK];
    ops[0] = v;
    bool any = false;
    for (int32_t d = 0; d < lout.rank; d++) {
        int32_t nb = lw->before->n[d], na = st->after.n[d];
        bool cut = na > nb && !((lw->fx.sliced >> d) & 1u);
        ops[1 + d] = cut ? part_offset(p, tiling_dim(&st->after, d) + nb, na - nb, lout.dims[d], lw->base)
                         : part_zero(p);
        any |= cut;
    }
    if (v < 0 || !any)
        return named(lw, v);
    int32_t r = part_emit(p, HLO_DYNAMIC_SLICE, lw->name, &lout, ops, 1 + lout.rank);
    HloAttrs *a = hlo_attrs_mut(p->out, part_out(p, r));
    a->dynamic_slice_sizes = hlo_intlist(p->out, lout.dims, lout.rank);
    return r;
}

/* dim i loses the run A (its minor tiles), dim j gains it: split dim j into
 * [|A|, Lj/|A|], all-to-all along the new axis (chunk k goes to member k;
 * received chunks are stacked in sender order = A's tile index along i),
 * move that axis in front of dim i, merge.  Uneven dims get their fix-ups
 * before (j) and after (i). */
static int32_t lower_all_to_all(Lower *lw, int32_t v)
{
    Part *p = lw->p;
    const ReshardStep *st = lw->st;
    int32_t i = st->dim, j = st->dim2;
    int64_t n = group_size(p->mesh, st->atoms, st->n_atoms);
    Shape lin = tiling_local_shape(lw->before, p->mesh, lw->global);
    v = apply_fixups(lw, v, &lin, lw->fx.pre, lw->fx.n_pre);
    if (v < 0)
        return -1;
    int32_t r = lin.rank;
    int64_t sd[SPMDC_MAX_RANK + 1];
    for (int32_t d = 0, k = 0; d < r; d++) {
        if (d == j) {
            sd[k++] = n;
            sd[k++] = lin.dims[d] / n;
        } else {
            sd[k++] = lin.dims[d];
        }
    }
    if (r + 1 > SPMDC_MAX_RANK) {
        diag_error(p->cx->diag, SRC_SPAN_NONE, "%s: an all-to-all reshard of a rank-%d array needs rank %d, "
                   "more than %d", lw->base, (int)r, (int)r + 1, SPMDC_MAX_RANK);
        return -1;
    }
    Shape split = shape_array(lin.type, r + 1, sd);
    int32_t v1 = part_emit(p, HLO_RESHAPE, part_name(p, lw->base, "a2a-split"), &split, &v, 1);
    int32_t v2 = part_emit(p, HLO_ALL_TO_ALL, part_name(p, lw->base, "all-to-all"), &split, &v1, 1);
    set_collective(p, v2, st->atoms, st->n_atoms, false);
    set_dims(p, v2, j);
    record_main(lw, v2);
    /* Axis order: all but j, with j inserted just before dim i. */
    int64_t perm[SPMDC_MAX_RANK + 1], td[SPMDC_MAX_RANK + 1];
    int32_t k = 0;
    for (int32_t ax = 0; ax <= r; ax++) {
        if (ax == j)
            continue;
        int32_t dim_of_ax = ax < j ? ax : ax - 1; /* ax > j: original dim ax-1 (j+1: rest of dim j) */
        if (dim_of_ax == i)
            perm[k++] = j;
        perm[k++] = ax;
    }
    for (int32_t a = 0; a <= r; a++)
        td[a] = split.dims[perm[a]];
    Shape tsh = shape_array(lin.type, r + 1, td);
    int32_t v3 = part_emit(p, HLO_TRANSPOSE, part_name(p, lw->base, "a2a-transpose"), &tsh, &v2, 1);
    HloAttrs *ta = hlo_attrs_mut(p->out, part_out(p, v3));
    ta->dimensions = hlo_intlist(p->out, perm, r + 1);
    Shape mid = lin;
    mid.dims[j] = lin.dims[j] / n;
    mid.dims[i] = lin.dims[i] * n;
    if (lw->fx.n_post == 0)
        return part_emit(p, HLO_RESHAPE, lw->name, &mid, &v3, 1);
    int32_t v4 = part_emit(p, HLO_RESHAPE, coll_name(lw, "a2a-merge"), &mid, &v3, 1);
    return named(lw, apply_fixups(lw, v4, &mid, lw->fx.post, lw->fx.n_post));
}

/* Mixed-radix index of device's coordinates on the atoms of mask (ascending). */
static int64_t mask_index(const Mesh *m, uint32_t mask, int64_t dev)
{
    int64_t r = 0;
    for (int32_t a = 0; a < m->n_atoms; a++)
        if (mask & (1u << a))
            r = r * m->atom_size[a] + mesh_atom_coord(m, dev, a);
    return r;
}

/* Where a device's block sits in state s: its tile index on every dim, then
 * its index among the devices holding the same block. */
static int64_t block_key(const Mesh *m, const Tiling *s, int64_t dev)
{
    dev = mesh_logical_device(m, s->perm, dev);
    int64_t k = 0;
    for (int32_t d = 0; d < s->rank; d++) {
        const int8_t *at = tiling_dim(s, d);
        int64_t t = 0;
        for (int32_t i = 0; i < s->n[d]; i++)
            t = t * m->atom_size[at[i]] + mesh_atom_coord(m, dev, at[i]);
        k = k * tiling_dim_tiles(s, m, d) + t;
    }
    uint32_t rep = ((1u << m->n_atoms) - 1) & ~tiling_used(s);
    return k * mesh_mask_size(m, rep) + mask_index(m, rep, dev);
}

/* Device d gets its new block from the device whose old block has the same
 * key: pairs {src, d}, listed by source. */
static int32_t lower_permute(Part *p, int32_t v, const Shape *global, const Tiling *before, const ReshardStep *st,
                             const char *name)
{
    const Mesh *m = p->mesh;
    int64_t nd = m->n_devices;
    int64_t *holder = ARENA_ARRAY(p->scratch, int64_t, nd), *dst_of = ARENA_ARRAY(p->scratch, int64_t, nd);
    for (int64_t e = 0; e < nd; e++)
        holder[block_key(m, before, e)] = e;
    for (int64_t d = 0; d < nd; d++)
        dst_of[holder[block_key(m, &st->after, d)]] = d;
    Shape l = tiling_local_shape(&st->after, m, global);
    int32_t r = part_emit(p, HLO_COLLECTIVE_PERMUTE, name, &l, &v, 1);
    HloAttrs *a = hlo_attrs_mut(p->out, part_out(p, r));
    a->channel_id = p->mod->next_channel++;
    a->n_pairs = (int32_t)nd;
    a->pairs = ARENA_ARRAY(p->out->arena, int64_t, 2 * nd);
    for (int64_t s = 0; s < nd; s++) {
        a->pairs[2 * s] = s;
        a->pairs[2 * s + 1] = dst_of[s];
    }
    return r;
}

/* The group's first device (index 0 on the step's atoms) keeps the value,
 * the others take the identity of the pending reduction: partition-id ->
 * index on the atoms -> compare with 0 -> select. */
static int32_t lower_mask(Part *p, int32_t v, const Shape *global, const ReshardStep *st, const char *name,
                          const char *base)
{
    Shape l = tiling_local_shape(&st->after, p->mesh, global);
    int32_t first = part_first_in_group(p, st->atoms, st->n_atoms, base);
    Shape pl = shape_array(ET_PRED, l.rank, l.dims);
    int32_t pb = part_emit(p, HLO_BROADCAST, part_name(p, base, "mask-broadcast"), &pl, &first, 1);
    int32_t id = part_identity(p, (ReduceKind)st->after.kind, &l, base);
    int32_t ops[3] = {pb, v, id};
    return part_emit(p, HLO_SELECT, name, &l, ops, 3);
}

static int32_t lower_step(Lower *lw, int32_t v)
{
    Part *p = lw->p;
    const ReshardStep *st = lw->st;
    const Tiling *before = lw->before;
    Shape lout = tiling_local_shape(&st->after, p->mesh, lw->global);
    int32_t r;
    switch (st->kind) {
    case STEP_SLICE: return lower_slice(lw, v);
    case STEP_ALL_TO_ALL: return lower_all_to_all(lw, v);
    case STEP_ALL_REDUCE:
    case STEP_REDUCE_SCATTER: {
        Shape ls = tiling_local_shape(before, p->mesh, lw->global);
        v = apply_fixups(lw, v, &ls, lw->fx.pre, lw->fx.n_pre);
        if (v < 0)
            return -1;
        int32_t red = part_reducer(p, (ReduceKind)before->kind, lw->global->type);
        HloOpcode op = st->kind == STEP_ALL_REDUCE ? HLO_ALL_REDUCE : HLO_REDUCE_SCATTER;
        r = part_emit(p, op, lw->name, &lout, &v, 1);
        set_collective(p, r, st->atoms, st->n_atoms, true);
        if (st->kind == STEP_REDUCE_SCATTER)
            set_dims(p, r, st->dim);
        hlo_attrs_mut(p->out, part_out(p, r))->to_apply = red;
        record_main(lw, r);
        return r;
    }
    case STEP_ALL_GATHER: {
        Shape lg = tiling_local_shape(before, p->mesh, lw->global);
        lg.dims[st->dim] *= group_size(p->mesh, st->atoms, st->n_atoms);
        bool post = lw->fx.n_post > 0;
        r = part_emit(p, HLO_ALL_GATHER, post ? coll_name(lw, "all-gather") : lw->name, &lg, &v, 1);
        set_collective(p, r, st->atoms, st->n_atoms, true);
        set_dims(p, r, st->dim);
        record_main(lw, r);
        if (!post)
            return r;
        return named(lw, apply_fixups(lw, r, &lg, lw->fx.post, lw->fx.n_post));
    }
    case STEP_COLLECTIVE_PERMUTE:
        r = lower_permute(p, v, lw->global, before, st, lw->name);
        record_main(lw, r);
        return r;
    case STEP_MASK: return lower_mask(p, v, lw->global, st, lw->name, lw->base);
    }
    return -1;
}

int32_t reshard_lower(Part *p, int32_t local, const Shape *global, const Tiling *from, const ReshardPlan *plan,
                      LowerNames *names, const Cause *cause, int32_t origin_inst, const char *origin_reason,
                      StepFn on_step, void *user)
{
    Tiling cur = *from;
    int32_t v = local;
    for (int32_t s = 0; s < plan->n_steps; s++) {
        const ReshardStep *st = &plan->steps[s];
        bool reduce = st->kind == STEP_ALL_REDUCE || st->kind == STEP_REDUCE_SCATTER;
        const char *role = st->kind == STEP_ALL_TO_ALL ? "a2a-merge" : step_role(st->kind);
        Lower lw; /* field by field: step_fixups sets what is read of fx (1.7 KB) */
        lw.p = p;
        lw.global = global;
        lw.before = &cur;
        lw.st = st;
        lw.name = step_name(p, names, st, role);
        lw.base = names->base;
        lw.row_inst = reduce && origin_inst >= 0 ? origin_inst : cause->inst;
        lw.row_why = reduce && origin_reason ? origin_reason : cause->reason;
        lw.fix = (HaloCause){cause->inst, cause->reason};
        step_fixups(p->mesh, global, &cur, st, &lw.fx);
        v = lower_step(&lw, v);
        if (v < 0)
            return -1;
        if (on_step)
            on_step(p, user, v, &st->after);
        cur = st->after;
    }
    return v;
}
