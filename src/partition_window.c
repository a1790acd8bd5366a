/* partition_window.c - halo exchanges, and the windowed ops that need them:
 * convolution, reduce-window and select-and-scatter split on a window dim.
 *
 * part_halo lowers one exchange (halo.h has its geometry): every device
 * gets a window of one split dim of a local value, made of its own shard
 * and rows its neighbours send by collective-permute (one per hop and side),
 * or of the whole dim all-gathered when that is cheaper for a halo wider
 * than one shard; positions outside the real array are masked with the op's
 * padding value.  The report row of each collective names the halo it
 * carries (CommRecord.halo_*).
 *
 * A windowed op is partitioned from its rule (partition_rule.c) with its
 * WINDOW factors splittable: the cost of a candidate adds the bytes of its
 * halos (the same geometry the emission uses), the windowed operand is
 * resharded to the chosen tiling, each split window dim of it is exchanged
 * so that every device holds exactly the input its output shard reads (the
 * op's padding and base dilation made explicit), and the op runs locally
 * with that dim's padding removed.  Output shard t of a dim with n_out
 * outputs in T tiles holds outputs [t*c, min((t+1)*c, n_out)), c =
 * ceil(n_out/T): output o reads the padded, base-dilated input positions
 * o*stride - pad_lo + k*rhs_dilate, k < size (XLA's window semantics).
 */
#include <string.h>

#include <uthash.h>

#include "partition_internal.h"
#include "spmdc/halo.h"

/* ================================================================ emission helpers */

static Shape array_of(const Shape *s) { return shape_array(s->type, s->rank, s->dims); }

int32_t part_slice_dim(Part *p, int32_t x, const Shape *xs, int32_t dim, int64_t start, int64_t limit,
                          int64_t stride, const char *name)
{
    Shape s = array_of(xs);
    int64_t st[SPMDC_MAX_RANK], li[SPMDC_MAX_RANK], sd[SPMDC_MAX_RANK];
    for (int32_t d = 0; d < xs->rank; d++) {
        st[d] = 0;
        li[d] = xs->dims[d];
        sd[d] = 1;
    }
    st[dim] = start;
    li[dim] = limit;
    sd[dim] = stride;
    s.dims[dim] = limit > start ? (limit - start + stride - 1) / stride : 0;
    int32_t r = part_emit(p, HLO_SLICE, name, &s, &x, 1);
    HloAttrs *a = hlo_attrs_mut(p->out, part_out(p, r));
    a->slice_start = hlo_intlist(p->out, st, xs->rank);
    a->slice_limit = hlo_intlist(p->out, li, xs->rank);
    a->slice_stride = hlo_intlist(p->out, sd, xs->rank);
    return r;
}

int32_t part_pad_dim(Part *p, int32_t x, const Shape *xs, int32_t v, int32_t dim, int64_t lo, int64_t hi,
                        int64_t interior, const char *name)
{
    Shape s = array_of(xs);
    int64_t l[SPMDC_MAX_RANK] = {0}, h[SPMDC_MAX_RANK] = {0}, in[SPMDC_MAX_RANK] = {0};
    l[dim] = lo;
    h[dim] = hi;
    in[dim] = interior;
    s.dims[dim] = lo + hi + xs->dims[dim] + (xs->dims[dim] > 0 ? (xs->dims[dim] - 1) * interior : 0);
    int32_t ops[2] = {x, v};
    int32_t r = part_emit(p, HLO_PAD, name, &s, ops, 2);
    HloAttrs *a = hlo_attrs_mut(p->out, part_out(p, r));
    a->pad_lo = hlo_intlist(p->out, l, xs->rank);
    a->pad_hi = hlo_intlist(p->out, h, xs->rank);
    a->pad_interior = hlo_intlist(p->out, in, xs->rank);
    return r;
}

int32_t part_dynamic_slice_dim(Part *p, int32_t x, const Shape *xs, int32_t dim, int32_t off, int64_t w,
                                  const char *name)
{
    Shape s = array_of(xs);
    s.dims[dim] = w;
    int32_t ops[1 + SPMDC_MAX_RANK];
    ops[0] = x;
    for (int32_t d = 0; d < xs->rank; d++)
        ops[1 + d] = d == dim ? off : part_zero(p);
    int32_t r = part_emit(p, HLO_DYNAMIC_SLICE, name, &s, ops, 1 + xs->rank);
    hlo_attrs_mut(p->out, part_out(p, r))->dynamic_slice_sizes = hlo_intlist(p->out, s.dims, s.rank);
    return r;
}

/* A scalar constant of type t: the identity of k (sum: 0, max: lowest, min:
 * highest), one per computation. */
static int32_t emit_identity(Part *p, ReduceKind k, ElemType t)
{
    if (!p->identity[k][t]) {
        Shape s = shape_scalar(t);
        const char *name = part_fmt(p, "%s.%s", reduce_kind_name(k), elem_type_name(t));
        p->identity[k][t] = part_identity(p, k, &s, name) + 1;
    }
    return p->identity[k][t] - 1;
}

/* An exchange already emitted: the same windows of the same local value
 * are not sent twice (a forward convolution and the kernel gradient read
 * the same halo of the activations). */
typedef struct HaloMemo {
    int32_t local, dim, fill, result;
    int64_t width;
    uint64_t hash;
    HaloWindow *win;
    struct HaloMemo *next;    /* memos with the same hash */
    UT_hash_handle hh;        /* Part.halos, by hash */
} HaloMemo;

static uint64_t halo_hash(const Part *p, int32_t local, const HaloReq *rq)
{
    uint64_t h = 1469598103934665603ull;
    int64_t head[4] = {local, rq->dim, rq->fill, rq->width};
    for (int32_t k = 0; k < 4; k++) {
        h ^= (uint64_t)head[k];
        h *= 1099511628211ull;
    }
    for (int64_t d = 0; d < p->mesh->n_devices; d++) {
        const HaloWindow *w = &rq->win[d];
        int64_t v[4] = {w->tile, w->start, w->lo, w->hi};
        for (int32_t k = 0; k < 4; k++) {
            h ^= (uint64_t)v[k];
            h *= 1099511628211ull;
        }
    }
    return h;
}

/* A per-device array of HaloWindow (or int64) for costing a candidate:
 * one of four buffers of the Part, reused (slot 0..3); -1: a fresh array
 * (emission). */
static void *dev_array(Part *p, int32_t slot)
{
    size_t n = (size_t)p->mesh->n_devices;
    if (slot < 0)
        return arena_alloc(p->scratch, sizeof(HaloWindow) * n, _Alignof(HaloWindow));
    if (!p->halo_buf[slot])
        p->halo_buf[slot] = arena_alloc(p->scratch, sizeof(HaloWindow) * n, _Alignof(HaloWindow));
    return p->halo_buf[slot];
}

/* Bytes of one row (all other dims) of a local array of shape s along dim. */
static int64_t row_bytes(const Shape *s, int32_t dim)
{
    Shape r = array_of(s);
    r.dims[dim] = 1;
    return shape_byte_size(&r);
}

/* ================================================================ the exchange */

int64_t part_halo_bytes(const Shape *ls, int32_t dim, const HaloPlan *hp)
{
    return hp->rows_sent * row_bytes(ls, dim);
}

/* "dim 1 halo: 1 row below, 2 above" */
static void put_halo_words(StrBuf *b, int32_t dim, int64_t lo, int64_t hi)
{
    sb_printf(b, "halo of dim %d: %lld row%s below, %lld above", (int)dim, (long long)lo, lo == 1 ? "" : "s",
              (long long)hi);
}

/* Fills the report row just added with the halo it carries. */
static void record_halo(Part *p, int32_t dim, int64_t lo, int64_t hi)
{
    if (!p->rep || p->rep->n_records == 0)
        return;
    CommRecord *r = &p->rep->records[p->rep->n_records - 1];
    r->halo_dim = dim;
    r->halo_lo = lo;
    r->halo_hi = hi;
}

/* The piece a device sends by one hop: relay, its last (low side) or first
 * (high side) `piece` rows; direct mode, the rows its receiver reads, at
 * halo_direct_offset (a slice when every sender's offset is the same, else
 * a dynamic-slice at a per-device offset). */
static int32_t hop_piece(Part *p, int32_t local, const Shape *ls, const HaloReq *rq, const HaloPlan *hp, bool high,
                         int32_t hop, int64_t piece, const char *base)
{
    int32_t dim = rq->dim;
    int64_t c = ls->dims[dim];
    const char *role = high ? "halo-above" : "halo-below";
    if (!hp->direct)
        return piece == c ? local : part_slice_dim(p, local, ls, dim, high ? 0 : c - piece, high ? piece : c, 1,
                                                   part_name(p, base, role));
    const Mesh *m = p->mesh;
    int64_t nd = m->n_devices, *off = ARENA_ARRAY(p->scratch, int64_t, nd), first = -1;
    bool same = true;
    for (int64_t r = 0; r < nd; r++)
        off[r] = -1;
    for (int64_t r = 0; r < nd; r++) {
        const HaloWindow *w = &rq->win[r];
        if (!halo_needs_hop(&rq->d, hp, w, high, hop))
            continue;
        int64_t t = high ? w->tile + hop : w->tile - hop;
        if (rq->d.circular)
            t = ((t % rq->d.tiles) + rq->d.tiles) % rq->d.tiles;
        int64_t o = halo_direct_offset(&rq->d, hp, w, high, hop);
        off[mesh_device_at(m, r, rq->atoms, rq->n_atoms, t)] = o;
        same &= first < 0 || o == first;
        first = first < 0 ? o : first;
    }
    first = first < 0 ? 0 : first;
    if (same)
        return first == 0 && piece == c ? local
                                        : part_slice_dim(p, local, ls, dim, first, first + piece, 1, part_name(p, base, role));
    for (int64_t r = 0; r < nd; r++)
        off[r] = off[r] < 0 ? first : off[r];
    int32_t o = part_device_value(p, off, part_fmt(p, "%s.%s-offset", base, role));
    return part_dynamic_slice_dim(p, local, ls, dim, o, piece, part_name(p, base, role));
}

/* One hop: pieces of `piece` rows (hop_piece) go to the tile `hop` above
 * (below). */
static int32_t emit_hop(Part *p, int32_t local, const Shape *ls, const HaloReq *rq, const HaloPlan *hp, bool high,
                        int32_t hop, const char *base, const HaloCause *why)
{
    const Mesh *m = p->mesh;
    int32_t dim = rq->dim;
    int64_t piece = high ? hp->piece_hi[hop - 1] : hp->piece_lo[hop - 1];
    int32_t src = hop_piece(p, local, ls, rq, hp, high, hop, piece, base);
    Shape ps = array_of(ls);
    ps.dims[dim] = piece;
    int32_t cp = part_emit(p, HLO_COLLECTIVE_PERMUTE, part_name(p, base, "collective-permute"), &ps, &src, 1);
    int64_t nd = m->n_devices, n_pairs = 0;
    int64_t *pairs = ARENA_ARRAY(p->out->arena, int64_t, 2 * nd);
    /* listed by receiver: every receiver that needs the hop, from the tile
     * `hop` below (above) it */
    for (int64_t r = 0; r < nd; r++) {
        const HaloWindow *w = &rq->win[r];
        if (!halo_needs_hop(&rq->d, hp, w, high, hop))
            continue;
        int64_t t = high ? w->tile + hop : w->tile - hop;
        if (rq->d.circular)
            t = ((t % rq->d.tiles) + rq->d.tiles) % rq->d.tiles;
        if (t < 0 || t >= rq->d.tiles)
            continue;
        pairs[2 * n_pairs] = mesh_device_at(m, r, rq->atoms, rq->n_atoms, t);
        pairs[2 * n_pairs + 1] = r;
        n_pairs++;
    }
    HloAttrs *a = hlo_attrs_mut(p->out, part_out(p, cp));
    a->channel_id = p->mod->next_channel++;
    a->n_pairs = (int32_t)n_pairs;
    a->pairs = pairs;
    if (p->rep) {
        StrBuf b = {0};
        if (why->words)
            sb_printf(&b, "%s; ", why->words);
        put_halo_words(&b, dim, hp->need_lo, hp->need_hi);
        int32_t hops = high ? hp->hops_hi : hp->hops_lo;
        sb_printf(&b, "; this permute carries %lld row%s %sfrom the shard ", (long long)piece, piece == 1 ? "" : "s",
                  hp->direct ? "straight " : "");
        if (hop > 1)
            sb_printf(&b, "%d places ", (int)hop);
        sb_puts(&b, high ? "above" : "below");
        if (hp->direct) {
            int64_t c = ls->dims[dim];
            int32_t n_cp = 0, relay_hops = (int32_t)(halo_ceil_div(hp->need_lo, c) + halo_ceil_div(hp->need_hi, c));
            for (int32_t k = 0; k < hp->hops_lo; k++)
                n_cp += hp->piece_lo[k] > 0;
            for (int32_t k = 0; k < hp->hops_hi; k++)
                n_cp += hp->piece_hi[k] > 0;
            sb_printf(&b, " (direct: only the rows read, %lld in %d permute%s, instead of relaying %lld in %d hop%s)",
                      (long long)hp->rows_sent, (int)n_cp, n_cp == 1 ? "" : "s", (long long)hp->relay_rows,
                      (int)relay_hops, relay_hops == 1 ? "" : "s");
        } else if (hops > 1) {
            sb_printf(&b, " (hop %d of %d: the halo is wider than one shard)", (int)hop, (int)hops);
        }
        int64_t bytes = comm_bytes_per_device(COLL_COLLECTIVE_PERMUTE, 2, shape_byte_size(&ps), shape_byte_size(&ps));
        part_record(p, COLL_COLLECTIVE_PERMUTE, cp, rq->atoms, rq->n_atoms, bytes, why->inst, sb_cstr(&b));
        record_halo(p, dim, high ? 0 : piece, high ? piece : 0);
        sb_free(&b);
    }
    return cp;
}

static int32_t halo_emit(Part *p, int32_t local, const Shape *ls, const HaloReq *rq, const HaloPlan *hp,
                         const char *base, const HaloCause *why);

int32_t part_halo(Part *p, int32_t local, const Shape *ls, const HaloReq *rq, const HaloPlan *hp, const char *base,
                  const HaloCause *why)
{
    const Mesh *m = p->mesh;
    int32_t dim = rq->dim;
    uint64_t hash = halo_hash(p, local, rq);
    HaloMemo *head = NULL;
    HASH_FIND(hh, p->halos, &hash, sizeof hash, head);
    for (const HaloMemo *e = head; e; e = e->next)
        if (e->local == local && e->dim == dim && e->fill == rq->fill && e->width == rq->width &&
            memcmp(e->win, rq->win, sizeof(HaloWindow) * (size_t)m->n_devices) == 0)
            return e->result;
    int32_t result = halo_emit(p, local, ls, rq, hp, base, why);
    HaloMemo *e = ARENA_NEW(p->scratch, HaloMemo);
    e->local = local;
    e->dim = dim;
    e->fill = rq->fill;
    e->width = rq->width;
    e->hash = hash;
    e->win = arena_memdup(p->scratch, rq->win, sizeof(HaloWindow) * (size_t)m->n_devices);
    e->result = result;
    if (head) {
        e->next = head->next;
        head->next = e;
    } else {
        HASH_ADD(hh, p->halos, hash, sizeof e->hash, e);
    }
    return result;
}

void part_halo_fini(Part *p)
{
    HaloMemo *e, *t;
    HASH_ITER(hh, p->halos, e, t) { HASH_DEL(p->halos, e); }
}

/* part_halo's emission. */
static int32_t halo_emit(Part *p, int32_t local, const Shape *ls, const HaloReq *rq, const HaloPlan *hp,
                         const char *base, const HaloCause *why)
{
    const Mesh *m = p->mesh;
    int32_t dim = rq->dim;
    int64_t nd = m->n_devices, c = ls->dims[dim];
    int32_t buf = local;
    Shape bs = array_of(ls);
    if (hp->gather) {
        bs.dims[dim] = c * rq->d.tiles;
        buf = part_emit(p, HLO_ALL_GATHER, part_name(p, base, "all-gather"), &bs, &local, 1);
        HloAttrs *a = hlo_attrs_mut(p->out, part_out(p, buf));
        a->channel_id = p->mod->next_channel++;
        a->replica_groups = part_groups(p, rq->atoms, rq->n_atoms);
        a->use_global_device_ids = true;
        int64_t one = dim;
        a->dimensions = hlo_intlist(p->out, &one, 1);
        if (p->rep) {
            StrBuf b = {0};
            if (why->words)
                sb_printf(&b, "%s; ", why->words);
            put_halo_words(&b, dim, hp->need_lo, hp->need_hi);
            int32_t hops = (int32_t)(halo_ceil_div(hp->need_lo, c) > halo_ceil_div(hp->need_hi, c)
                                         ? halo_ceil_div(hp->need_lo, c) : halo_ceil_div(hp->need_hi, c));
            sb_printf(&b, "; wider than one shard, so the dim is all-gathered (%lld B a device) instead of a "
                      "%d-hop exchange (%lld B)", (long long)(hp->rows_sent * row_bytes(ls, dim)), (int)hops,
                      (long long)((hp->need_lo + hp->need_hi) * row_bytes(ls, dim)));
            int64_t bytes = comm_bytes_per_device(COLL_ALL_GATHER, rq->d.tiles, shape_byte_size(ls),
                                                  shape_byte_size(&bs));
            part_record(p, COLL_ALL_GATHER, buf, rq->atoms, rq->n_atoms, bytes, why->inst, sb_cstr(&b));
            record_halo(p, dim, hp->need_lo, hp->need_hi);
            sb_free(&b);
        }
    } else if (hp->hops_lo || hp->hops_hi) {
        /* [low pieces, farthest first | own shard | high pieces]; direct
         * mode skips the hops no device needs and, if no device reads it,
         * the own shard */
        int32_t n = 0;
        int32_t *parts = ARENA_ARRAY(p->scratch, int32_t, hp->hops_lo + 1 + hp->hops_hi);
        for (int32_t k = hp->hops_lo; k >= 1; k--)
            if (hp->piece_lo[k - 1] > 0)
                parts[n++] = emit_hop(p, local, ls, rq, hp, false, k, base, why);
        if (hp->own)
            parts[n++] = local;
        for (int32_t k = 1; k <= hp->hops_hi; k++)
            if (hp->piece_hi[k - 1] > 0)
                parts[n++] = emit_hop(p, local, ls, rq, hp, true, k, base, why);
        bs.dims[dim] = hp->left + (hp->own ? c : 0) + hp->right;
        if (n == 1) {
            buf = parts[0];
        } else {
            buf = part_emit(p, HLO_CONCATENATE, part_name(p, base, "halo"), &bs, parts, n);
            int64_t dd = dim;
            hlo_attrs_mut(p->out, part_out(p, buf))->dimensions = hlo_intlist(p->out, &dd, 1);
        }
    }
    if (hp->pad_lo || hp->pad_hi) {
        int32_t v = rq->fill >= 0 ? rq->fill : emit_identity(p, REDUCE_SUM, ls->type);
        buf = part_pad_dim(p, buf, &bs, v, dim, hp->pad_lo, hp->pad_hi, 0, part_name(p, base, "halo-pad"));
        bs.dims[dim] += hp->pad_lo + hp->pad_hi;
    }
    int64_t w = rq->width;
    if (hp->uniform) {
        if (hp->offset0 != 0 || w != bs.dims[dim])
            buf = part_slice_dim(p, buf, &bs, dim, hp->offset0, hp->offset0 + w, 1, part_name(p, base, "window"));
    } else {
        int64_t *off = ARENA_ARRAY(p->scratch, int64_t, nd);
        for (int64_t d = 0; d < nd; d++)
            off[d] = halo_offset(&rq->d, hp, &rq->win[d]);
        int32_t o = part_device_value(p, off, part_fmt(p, "%s.window-offset", base));
        buf = part_dynamic_slice_dim(p, buf, &bs, dim, o, w, part_name(p, base, "window"));
    }
    bs.dims[dim] = w;
    if (hp->fill && rq->fill >= 0)
        buf = part_mask_range(p, buf, &bs, dim, rq->win, 0, rq->d.n, rq->fill, base);
    return buf;
}

int32_t part_mask_range(Part *p, int32_t x, const Shape *xs, int32_t dim, const HaloWindow *win, int64_t lo,
                        int64_t hi, int32_t fill, const char *base)
{
    int64_t nd = p->mesh->n_devices, w = xs->dims[dim];
    int64_t *start = ARENA_ARRAY(p->scratch, int64_t, nd), first = INT64_MAX, end = INT64_MIN;
    for (int64_t d = 0; d < nd; d++) {
        start[d] = win[d].start;
        first = start[d] < first ? start[d] : first;
        end = start[d] + w > end ? start[d] + w : end;
    }
    bool need[2] = {first < lo, end > hi}; /* a bound no window crosses needs no compare */
    if (!need[0] && !need[1])
        return x;
    Shape is = shape_array(ET_S32, 1, &w), ps = shape_array(ET_PRED, 1, &w), s0 = shape_scalar(ET_S32);
    int32_t io = part_emit(p, HLO_IOTA, part_name(p, base, "position"), &is, NULL, 0);
    hlo_attrs_mut(p->out, part_out(p, io))->iota_dimension = 0;
    int32_t st = part_device_value(p, start, part_fmt(p, "%s.window-start", base));
    int32_t sb = part_emit(p, HLO_BROADCAST, part_name(p, base, "window-start-broadcast"), &is, &st, 1);
    int32_t ab[2] = {io, sb};
    int32_t pos = part_emit(p, HLO_ADD, part_name(p, base, "global-position"), &is, ab, 2);
    int64_t bounds[2] = {lo, hi};
    int32_t cmp[2], n_cmp = 0;
    for (int32_t k = 0; k < 2; k++) {
        if (!need[k])
            continue;
        int32_t bc = part_emit(p, HLO_CONSTANT, part_name(p, base, k ? "limit" : "first"), &s0, NULL, 0);
        Literal *lit = ARENA_NEW(p->out->arena, Literal);
        lit->n = 1;
        lit->i = arena_memdup(p->out->arena, &bounds[k], sizeof(int64_t));
        hlo_attrs_mut(p->out, part_out(p, bc))->literal = lit;
        int32_t bb = part_emit(p, HLO_BROADCAST, part_name(p, base, k ? "limit-broadcast" : "first-broadcast"), &is,
                               &bc, 1);
        int32_t ops[2] = {pos, bb};
        cmp[n_cmp] = part_emit(p, HLO_COMPARE, part_name(p, base, k ? "below-limit" : "from-first"), &ps, ops, 2);
        hlo_attrs_mut(p->out, part_out(p, cmp[n_cmp++]))->direction = k ? CMP_LT : CMP_GE;
    }
    int32_t in = n_cmp == 2 ? part_emit(p, HLO_AND, part_name(p, base, "inside"), &ps, cmp, 2) : cmp[0];
    Shape xp = array_of(xs);
    xp.type = ET_PRED;
    int32_t inb = part_emit(p, HLO_BROADCAST, part_name(p, base, "inside-broadcast"), &xp, &in, 1);
    int64_t dd = dim;
    hlo_attrs_mut(p->out, part_out(p, inb))->dimensions = hlo_intlist(p->out, &dd, 1);
    Shape xa = array_of(xs);
    int32_t fb = part_emit(p, HLO_BROADCAST, part_name(p, base, "fill-broadcast"), &xa, &fill, 1);
    int32_t ops[3] = {inb, x, fb};
    return part_emit(p, HLO_SELECT, part_name(p, base, "masked"), &xa, ops, 3);
}

int32_t part_mask_padding(Part *p, int32_t x, const Tiling *t, const Shape *gs, uint32_t dims, int32_t fill,
                          const char *base)
{
    Shape ls = tiling_local_shape(t, p->mesh, gs);
    for (int32_t d = 0; d < gs->rank && d < 32; d++) {
        if (!((dims >> d) & 1u) || gs->dims[d] % tiling_dim_tiles(t, p->mesh, d) == 0)
            continue;
        HaloWindow *w = ARENA_ARRAY(p->scratch, HaloWindow, p->mesh->n_devices);
        for (int64_t dev = 0; dev < p->mesh->n_devices; dev++)
            w[dev].start = tiling_offset(t, p->mesh, gs, d, dev);
        x = part_mask_range(p, x, &ls, d, w, 0, gs->dims[d], fill, base);
    }
    return x;
}

/* ================================================================ windowed ops */

/* Window attributes up to 2^31 (and dims up to 2^31 elements) keep every
 * product of the exchange arithmetic below 2^62; a window dim with larger
 * strides, pads or dilations is not split (the rule's way gathers it). */
#define WIN_TAME_LIMIT (INT64_C(1) << 31)

static bool tame(int64_t v) { return v >= -WIN_TAME_LIMIT && v <= WIN_TAME_LIMIT; }

bool part_geom_tame(const WinGeom *g)
{
    return tame(g->n_in) && tame(g->n_out) && tame(g->size) && tame(g->stride) && tame(g->pad_lo) &&
           tame(g->lhs_dilate) && tame(g->rhs_dilate);
}

static WinGeom geom_of(const WindowDim *w, int64_t n_in, int64_t n_out)
{
    WinGeom g = {n_in, n_out, w->size, w->stride > 0 ? w->stride : 1, w->pad_lo, w->lhs_dilate > 0 ? w->lhs_dilate : 1,
                 w->rhs_dilate > 0 ? w->rhs_dilate : 1};
    return g;
}

/* The exchange that gives every device the input its output shard reads:
 * rq (windows over the input dim, whose atoms split it into tiles), and for
 * a base-dilated window the dilated span each device then cuts out of its
 * window (*dil_width positions from the per-device offset dil_off[dev]
 * after interior padding by lhs_dilate-1).  Windows per device from the
 * device's tile index along the atoms. */
static void window_request(Part *p, const WinGeom *g, const int8_t *atoms, int32_t n_atoms, HaloReq *rq,
                           int64_t *dil_off, int64_t *dil_width, int32_t slot)
{
    const Mesh *m = p->mesh;
    int64_t nd = m->n_devices, T = 1;
    for (int32_t k = 0; k < n_atoms; k++)
        T *= m->atom_size[atoms[k]];
    int64_t co = tiling_shard_size(g->n_out, T), s = g->stride, ld = g->lhs_dilate;
    int64_t span = (g->size - 1) * g->rhs_dilate + 1; /* dilated window extent */
    int64_t wd = (co - 1) * s + span;                  /* dilated positions a device reads */
    rq->atoms = atoms;
    rq->n_atoms = n_atoms;
    rq->d.n = g->n_in;
    rq->d.tiles = T;
    rq->d.chunk = tiling_shard_size(g->n_in, T);
    rq->d.circular = false;
    rq->win = dev_array(p, slot);
    int64_t width = 0;
    for (int64_t dev = 0; dev < nd; dev++) {
        HaloWindow *w = &rq->win[dev];
        int64_t t = mesh_run_index(m, dev, atoms, n_atoms);
        int64_t first = t * co, last = (first + co < g->n_out ? first + co : g->n_out) - 1;
        int64_t d0 = first * s - g->pad_lo, dhi = last * s - g->pad_lo + span; /* dilated [d0, dhi) read */
        w->tile = t;
        if (ld == 1) {
            w->start = d0;
            w->lo = d0;
            w->hi = last >= first ? dhi : d0;
            width = wd;
        } else {
            w->start = halo_floor_div(d0, ld);
            w->lo = halo_ceil_div(d0, ld);
            w->hi = last >= first ? halo_ceil_div(dhi, ld) : w->lo;
            int64_t wx = halo_ceil_div(d0 + wd, ld) - w->start;
            width = wx > width ? wx : width;
            dil_off[dev] = d0 - w->start * ld;
        }
    }
    rq->width = width;
    if (ld > 1)
        *dil_width = wd;
}

/* The op being partitioned: its windowed operand tensor and, per factor,
 * the window dim it is (-1: none). */
typedef struct WinOp {
    int32_t operand;          /* rule tensor of the windowed operand (0) */
    int32_t win_dim[OPRULE_MAX_FACTORS]; /* WINDOW factor -> its window dim (and operand dim) */
    int32_t in_dim[OPRULE_MAX_FACTORS];  /* ... its dim of the windowed operand */
    int32_t out_dim[OPRULE_MAX_FACTORS]; /* ... its dim of the result */
} WinOp;

static const Window *op_window(const HloInst *in) { return hlo_attrs(in)->window; }

/* Geometry of window factor f of instruction i. */
static WinGeom factor_geom(Part *p, int32_t i, const RuleCtx *rc, const WinOp *wo, int32_t f)
{
    const HloInst *in = part_in(p, i);
    const OpRule *r = &rc->rule;
    const RuleTensor *x = &r->t[wo->operand], *o = &r->t[r->n_in];
    return geom_of(&op_window(in)->dims[wo->win_dim[f]], x->shape[wo->in_dim[f]], o->shape[wo->out_dim[f]]);
}

/* Fills wo for a convolution or a reduce-window; false when its window
 * dims may not be split (a reducer whose padding is not its identity, a
 * variadic reduce-window). */
static bool win_op_init(Part *p, int32_t i, const RuleCtx *rc, WinOp *wo)
{
    const HloInst *in = part_in(p, i);
    const HloAttrs *a = hlo_attrs(in);
    const OpRule *r = &rc->rule;
    memset(wo, 0xff, sizeof *wo);
    wo->operand = 0;
    if (!a->window || r->n_out != 1 || r->n_in < 1)
        return false;
    if (in->op == HLO_REDUCE_WINDOW) {
        if (in->n_operands != 2)
            return false;
        ReduceKind k = reducer_kind(p->in, a->to_apply);
        /* padding and base dilation are the init value: it must be an
         * identity of the reducer for the masked halo to be right */
        if (k == REDUCE_NONE || !is_reduce_identity(p->in, p->ic, in->operands[1], k))
            return false;
    }
    bool any = false;
    for (int32_t d = 0; d < r->t[0].rank; d++) {
        if (oprule_dim_n(r, 0, d) != 1)
            continue;
        int32_t f = oprule_dim_factor(r, 0, d, 0);
        if (r->factors[f].kind != FACTOR_WINDOW)
            continue;
        int32_t wd = d, od = d;
        if (in->op == HLO_CONVOLUTION) {
            const ConvDims *cd = a->conv;
            wd = -1;
            for (int32_t s = 0; cd && s < cd->n_spatial; s++)
                if (cd->in_spatial[s] == d) {
                    wd = s;
                    od = (int32_t)cd->out_spatial[s];
                }
            if (wd < 0)
                continue;
        }
        if (wd >= a->window->rank)
            continue;
        wo->win_dim[f] = wd;
        wo->in_dim[f] = d;
        wo->out_dim[f] = od;
        any = true;
    }
    return any;
}

/* Bytes of the halos a candidate needs (the exchanges run one split dim
 * after the other, each on the previous one's windows). */
/* ---------------------------------------------------------------- scans
 *
 * A reduce-window whose window covers every earlier element of its dim (a
 * cumulative sum, max, ...: size >= n, padding size-1 below, stride 1) is a
 * prefix scan.  Split over T shards it needs no halo: every device scans
 * its own shard, the shards' totals (one element per row) are all-gathered,
 * and each device combines its local scan with the reduction of the totals
 * of the shards below it: (T-1) rows a device, where the halo (or its
 * all-gather of the dim) sends (T-1)*c. */

static bool is_scan(const HloInst *in, const WinGeom *g)
{
    return in->op == HLO_REDUCE_WINDOW && g->stride == 1 && g->lhs_dilate == 1 && g->rhs_dilate == 1 &&
           g->n_out == g->n_in && g->size >= g->n_in && g->pad_lo == g->size - 1 && g->n_in > 1;
}

/* Bytes of the scan's all-gather of the totals, over T tiles. */
static int64_t scan_bytes(const Shape *ls, int32_t dim, int64_t tiles)
{
    return (tiles - 1) * row_bytes(ls, dim);
}

static int64_t win_extra(Part *p, const RuleCtx *rc, const RuleChoice *cand, void *user)
{
    const WinOp *wo = user;
    const OpRule *r = &rc->rule;
    const HloInst *in = part_in(p, rc->inst);
    const Shape *gs = part_in(p, in->operands[r->t[wo->operand].slot])->shape;
    Shape ls = tiling_local_shape(&cand->want[wo->operand], p->mesh, gs);
    int64_t bytes = 0;
    for (int32_t f = 0; f < r->n_factors && bytes < PART_INF_COST; f++) {
        if (wo->win_dim[f] < 0 || cand->fs.n[f] == 0)
            continue;
        WinGeom g = factor_geom(p, rc->inst, rc, wo, f);
        if (!part_geom_tame(&g))
            return PART_INF_COST;
        int32_t d = wo->in_dim[f];
        int64_t local = ls.dims[d];
        int64_t b = part_window_dim_bytes(p, &ls, d, &g, fsh_factor(&cand->fs, f), cand->fs.n[f]);
        if (is_scan(in, &g)) {
            ls.dims[d] = local;
            int64_t sb = scan_bytes(&ls, d, fsh_tiles(&cand->fs, p->mesh, f));
            b = sb <= b ? sb : b;
        }
        bytes = b >= PART_INF_COST ? PART_INF_COST : bytes + b;
    }
    return bytes;
}

/* Words of a window exchange's report rows: "x windowed by conv.1 (size 3,
 * stride 2, padding 0_1)". */
static const char *window_words(Part *p, int32_t i, int32_t v, const WindowDim *w)
{
    StrBuf b = {0};
    sb_printf(&b, "%s windowed by %s (size %lld", part_in(p, v)->name, part_in(p, i)->name, (long long)w->size);
    if (w->stride > 1)
        sb_printf(&b, ", stride %lld", (long long)w->stride);
    if (w->pad_lo || w->pad_hi)
        sb_printf(&b, ", padding %lld_%lld", (long long)w->pad_lo, (long long)w->pad_hi);
    if (w->lhs_dilate > 1)
        sb_printf(&b, ", base dilation %lld", (long long)w->lhs_dilate);
    if (w->rhs_dilate > 1)
        sb_printf(&b, ", window dilation %lld", (long long)w->rhs_dilate);
    sb_putc(&b, ')');
    const char *r = arena_strdup(p->scratch, sb_cstr(&b));
    sb_free(&b);
    return r;
}

int32_t part_window_dim(Part *p, int32_t x, Shape *xs, int32_t dim, const WinGeom *g, const int8_t *atoms,
                        int32_t n_atoms, int32_t fill, const char *base, const HaloCause *why)
{
    HaloReq rq;
    int64_t *doff = ARENA_ARRAY(p->scratch, int64_t, p->mesh->n_devices), dw = 0;
    window_request(p, g, atoms, n_atoms, &rq, doff, &dw, -1);
    rq.dim = dim;
    rq.fill = fill;
    HaloPlan hp;
    if (!halo_plan(&rq.d, rq.win, p->mesh->n_devices, rq.width, true, &hp))
        return -1; /* cost callbacks reject such candidates */
    x = part_halo(p, x, xs, &rq, &hp, base, why);
    xs->dims[dim] = rq.width;
    if (g->lhs_dilate > 1) {
        /* holes between the elements, then each device's dilated span */
        int64_t ld = g->lhs_dilate, have = (rq.width - 1) * ld + 1, need = 0;
        for (int64_t d = 0; d < p->mesh->n_devices; d++)
            need = doff[d] + dw > need ? doff[d] + dw : need;
        int64_t hi = need > have ? need - have : 0;
        x = part_pad_dim(p, x, xs, fill, dim, 0, hi, ld - 1, part_name(p, base, "dilated"));
        xs->dims[dim] = have + hi;
        bool same = true;
        for (int64_t d = 1; d < p->mesh->n_devices && same; d++)
            same = doff[d] == doff[0];
        if (same) {
            if (doff[0] != 0 || dw != xs->dims[dim])
                x = part_slice_dim(p, x, xs, dim, doff[0], doff[0] + dw, 1, part_name(p, base, "dilated-window"));
        } else {
            int32_t o = part_device_value(p, doff, part_fmt(p, "%s.dilated-offset", base));
            x = part_dynamic_slice_dim(p, x, xs, dim, o, dw, part_name(p, base, "dilated-window"));
        }
        xs->dims[dim] = dw;
    }
    return x;
}

int64_t part_window_dim_bytes(Part *p, Shape *xs, int32_t dim, const WinGeom *g, const int8_t *atoms,
                              int32_t n_atoms)
{
    HaloReq rq;
    int64_t *doff = dev_array(p, 0), dw = 0;
    window_request(p, g, atoms, n_atoms, &rq, doff, &dw, 1);
    HaloPlan hp;
    if (!halo_plan(&rq.d, rq.win, p->mesh->n_devices, rq.width, true, &hp))
        return PART_INF_COST;
    int64_t b = part_halo_bytes(xs, dim, &hp);
    xs->dims[dim] = g->lhs_dilate > 1 ? dw : rq.width;
    return b;
}

/* Exchanges the split window dims of the windowed operand (local x of shape
 * *xs, updated) so that each device holds the input its output shard reads,
 * base dilation made explicit; the window dims of `out` (the local op's
 * window) lose their padding and base dilation. */
static int32_t window_operand(Part *p, const RuleCtx *rc, const RuleChoice *ch, const WinOp *wo, int32_t x,
                              Shape *xs, int32_t fill, Window *out)
{
    const OpRule *r = &rc->rule;
    const HloInst *in = part_in(p, rc->inst);
    int32_t v = in->operands[r->t[wo->operand].slot];
    for (int32_t f = 0; f < r->n_factors && x >= 0; f++) {
        if (wo->win_dim[f] < 0 || ch->fs.n[f] == 0)
            continue;
        const WindowDim *wdim = &op_window(in)->dims[wo->win_dim[f]];
        WinGeom g = factor_geom(p, rc->inst, rc, wo, f);
        HaloCause why = {rc->inst, window_words(p, rc->inst, v, wdim)};
        x = part_window_dim(p, x, xs, wo->in_dim[f], &g, fsh_factor(&ch->fs, f), ch->fs.n[f], fill,
                            part_in(p, v)->name, &why);
        WindowDim *od = &out->dims[wo->win_dim[f]];
        od->pad_lo = od->pad_hi = 0;
        od->lhs_dilate = 1;
    }
    return x;
}

/* The scan of split window factor f (is_scan): a local scan of each shard,
 * the totals all-gathered, each device's exclusive prefix of them combined
 * with its local scan by the reducer. */
static bool emit_scan(Part *p, const RuleCtx *rc, const RuleChoice *ch, const WinOp *wo, int32_t f, int32_t *ops,
                      const Shape *xs)
{
    int32_t i = rc->inst;
    const HloInst *in = part_in(p, i);
    const HloAttrs *ia = hlo_attrs(in);
    int32_t d = wo->in_dim[f], wd = wo->win_dim[f];
    const int8_t *atoms = fsh_factor(&ch->fs, f);
    int32_t na = ch->fs.n[f];
    int64_t T = fsh_tiles(&ch->fs, p->mesh, f), c = xs->dims[d];
    ReduceKind k = reducer_kind(p->in, ia->to_apply);
    const char *nm = in->name;
    Tiling *leaves = part_result_leaves(p, rc, ch);
    Shape l = part_local_shape(p, in->shape, leaves);
    /* the local scan: the window as wide as the shard */
    int32_t loc = part_clone(p, i, part_name(p, nm, "local-scan"), &l, ops, in->n_operands);
    HloAttrs *la = hlo_attrs_mut(p->out, part_out(p, loc));
    oprule_localize_attrs(&rc->rule, p->in, p->ic, i, &ch->fs, p->mesh, la);
    la->window->dims[wd].size = c;
    la->window->dims[wd].pad_lo = c - 1;
    la->window->dims[wd].pad_hi = 0;
    /* the shard's total: its last element along d */
    int32_t tot = part_slice_dim(p, loc, &l, d, c - 1, c, 1, part_name(p, nm, "shard-total"));
    Shape ts = l;
    ts.dims[d] = 1;
    Shape gs = ts;
    gs.dims[d] = T;
    int32_t all = part_emit(p, HLO_ALL_GATHER, part_name(p, nm, "all-gather"), &gs, &tot, 1);
    HloAttrs *ga = hlo_attrs_mut(p->out, part_out(p, all));
    ga->channel_id = p->mod->next_channel++;
    ga->replica_groups = part_groups(p, atoms, na);
    ga->use_global_device_ids = true;
    int64_t dd = d;
    ga->dimensions = hlo_intlist(p->out, &dd, 1);
    if (p->rep) {
        int64_t b = comm_bytes_per_device(COLL_ALL_GATHER, T, shape_byte_size(&ts), shape_byte_size(&gs));
        StrBuf w = {0};
        sb_printf(&w, "%s scanned by %s along its split dim %d: the %lld shards' totals are all-gathered (%lld B a "
                  "device) instead of the prefix below each shard", part_in(p, in->operands[wo->operand])->name, nm,
                  (int)d, (long long)T, (long long)b);
        part_record(p, COLL_ALL_GATHER, all, atoms, na, b, i, sb_cstr(&w));
        sb_free(&w);
    }
    /* the reduction of the totals below each shard: an exclusive scan of the
     * gathered totals (window T, padding T below and -1 above), this device's
     * entry */
    int32_t eops[2] = {all, ops[1]};
    int32_t exc = part_emit(p, HLO_REDUCE_WINDOW, part_name(p, nm, "shards-below"), &gs, eops, 2);
    HloAttrs *ea = hlo_attrs_mut(p->out, part_out(p, exc));
    ea->to_apply = p->mod->comp_map[ia->to_apply];
    ea->window = ARENA_NEW(p->out->arena, Window);
    memset(ea->window, 0, sizeof *ea->window);
    ea->window->rank = gs.rank;
    for (int32_t e = 0; e < gs.rank; e++) {
        WindowDim *w = &ea->window->dims[e];
        w->size = e == d ? T : 1;
        w->stride = w->lhs_dilate = w->rhs_dilate = 1;
        w->pad_lo = e == d ? T : 0;
        w->pad_hi = e == d ? -1 : 0;
    }
    int64_t *idx = ARENA_ARRAY(p->scratch, int64_t, p->mesh->n_devices);
    for (int64_t dev = 0; dev < p->mesh->n_devices; dev++)
        idx[dev] = mesh_run_index(p->mesh, dev, atoms, na);
    int32_t pos = part_device_value(p, idx, part_fmt(p, "%s.shard-index", nm));
    int32_t mine = part_dynamic_slice_dim(p, exc, &gs, d, pos, 1, part_name(p, nm, "below-total"));
    int64_t rd[SPMDC_MAX_RANK], bd[SPMDC_MAX_RANK];
    int32_t nr = 0;
    for (int32_t e = 0; e < l.rank; e++)
        if (e != d) {
            rd[nr] = l.dims[e];
            bd[nr++] = e;
        }
    Shape rs = shape_array(l.type, nr, rd);
    int32_t flat = part_emit(p, HLO_RESHAPE, part_name(p, nm, "below-total-row"), &rs, &mine, 1);
    int32_t bc = part_emit(p, HLO_BROADCAST, part_name(p, nm, "below-total-broadcast"), &l, &flat, 1);
    hlo_attrs_mut(p->out, part_out(p, bc))->dimensions = hlo_intlist(p->out, bd, nr);
    HloOpcode op = k == REDUCE_MAX ? HLO_MAXIMUM : k == REDUCE_MIN ? HLO_MINIMUM : k == REDUCE_PROD ? HLO_MULTIPLY
                 : k == REDUCE_AND ? HLO_AND : k == REDUCE_OR ? HLO_OR : HLO_ADD;
    int32_t cops[2] = {loc, bc};
    bool partial = false;
    for (int32_t e = 0; e < p->vals[i].n_leaves; e++)
        partial |= leaves[e].partial != 0;
    int32_t res = part_emit(p, op, part_result_name(p, i, leaves, partial ? "partial" : "local"), &l, cops, 2);
    part_out(p, res)->span = in->span;
    part_rule_result(p, rc, ch, res);
    return true;
}

/* convolution, reduce-window: from the rule, window dims splittable. */
static bool h_windowed(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    RuleCtx rc;
    RuleChoice ch;
    WinOp wo;
    if (!part_rule_init(p, i, &rc))
        return part_default(p, i);
    bool windows = win_op_init(p, i, &rc, &wo);
    if (windows)
        rc.splittable |= 1u << FACTOR_WINDOW;
    if (!part_rule_choose(p, &rc, windows ? win_extra : NULL, &wo, &ch))
        return part_default(p, i);
    bool split = false;
    for (int32_t f = 0; windows && f < rc.rule.n_factors; f++)
        split |= wo.win_dim[f] >= 0 && ch.fs.n[f] > 0;
    if (!split)
        return part_rule_emit(p, &rc, &ch);
    int32_t *ops = ARENA_ARRAY(p->scratch, int32_t, in->n_operands + 1);
    if (part_rule_operands(p, &rc, &ch, ops) < 0)
        return false;
    const OpRule *r = &rc.rule;
    int32_t slot = r->t[wo.operand].slot;
    Shape xs = tiling_local_shape(&ch.want[wo.operand], p->mesh, part_in(p, in->operands[slot])->shape);
    int32_t scan_f = -1, n_split = 0;
    for (int32_t f = 0; f < r->n_factors; f++) {
        if (wo.win_dim[f] < 0 || ch.fs.n[f] == 0)
            continue;
        n_split++;
        WinGeom g = factor_geom(p, i, &rc, &wo, f);
        if (!is_scan(in, &g))
            continue;
        Shape t = xs;
        int64_t halo = part_window_dim_bytes(p, &t, wo.in_dim[f], &g, fsh_factor(&ch.fs, f), ch.fs.n[f]);
        if (scan_bytes(&xs, wo.in_dim[f], fsh_tiles(&ch.fs, p->mesh, f)) <= halo)
            scan_f = f;
    }
    if (scan_f >= 0 && n_split == 1)
        return emit_scan(p, &rc, &ch, &wo, scan_f, ops, &xs);
    int32_t fill = in->op == HLO_REDUCE_WINDOW ? ops[1] : emit_identity(p, REDUCE_SUM, xs.type);
    Window local_win = *op_window(in);
    int32_t x = window_operand(p, &rc, &ch, &wo, ops[slot], &xs, fill, &local_win);
    if (x < 0)
        return false;
    ops[slot] = x;
    Tiling *leaves = part_result_leaves(p, &rc, &ch);
    bool partial = false;
    for (int32_t l = 0; l < p->vals[i].n_leaves; l++)
        partial |= leaves[l].partial != 0;
    Shape l = part_local_shape(p, in->shape, leaves);
    int32_t res = part_clone(p, i, part_result_name(p, i, leaves, partial ? "partial" : "local"), &l, ops,
                             in->n_operands);
    HloAttrs *a = hlo_attrs_mut(p->out, part_out(p, res));
    oprule_localize_attrs(&rc.rule, p->in, p->ic, i, &ch.fs, p->mesh, a);
    *a->window = local_win;
    part_rule_result(p, &rc, &ch, res);
    return true;
}

/* ---------------------------------------------------------------- kernel-window split
 *
 * A convolution whose window is as large as its input (the kernel gradient
 * of a training step: conv(x, dy) with dy's spatial dims as the window) is
 * cheaper split on the KERNEL's spatial dim: device t takes the window
 * elements k in [t*c, (t+1)*c) of kernel shard t, the lhs rows those read
 * for every output (a halo of the lhs split the same way), and leaves a
 * partial sum over the split's atoms (XLA's halo exchange on the rhs). */

typedef struct RhsSplit {
    int32_t s;                /* spatial dim index (cd->in_spatial[s], k_spatial[s]) */
    int8_t atoms[SPMDC_MAX_ATOMS];
    int32_t n_atoms;
    RuleChoice ch;            /* the op's choice with both dims split and the result partial */
    int64_t bytes;
} RhsSplit;

/* The lhs windows of a kernel-window split of spatial dim s over atoms. */
static void rhs_request(Part *p, int32_t i, int32_t s, const int8_t *atoms, int32_t n_atoms, HaloReq *rq, int32_t slot)
{
    const HloInst *in = part_in(p, i);
    const HloAttrs *a = hlo_attrs(in);
    const ConvDims *cd = a->conv;
    const WindowDim *w = &a->window->dims[s];
    const Mesh *m = p->mesh;
    int64_t nd = m->n_devices, T = 1;
    for (int32_t k = 0; k < n_atoms; k++)
        T *= m->atom_size[atoms[k]];
    int64_t n_in = part_in(p, in->operands[0])->shape->dims[cd->in_spatial[s]];
    int64_t n_out = in->shape->dims[cd->out_spatial[s]], K = w->size, ck = tiling_shard_size(K, T);
    int64_t st = w->stride > 0 ? w->stride : 1, rd = w->rhs_dilate > 0 ? w->rhs_dilate : 1;
    memset(rq, 0, sizeof *rq);
    rq->atoms = atoms;
    rq->n_atoms = n_atoms;
    rq->d.n = n_in;
    rq->d.tiles = T;
    rq->d.chunk = tiling_shard_size(n_in, T);
    rq->width = (n_out - 1) * st + (ck - 1) * rd + 1;
    rq->win = dev_array(p, slot);
    for (int64_t dev = 0; dev < nd; dev++) {
        HaloWindow *hw = &rq->win[dev];
        int64_t t = mesh_run_index(m, dev, atoms, n_atoms), k0 = t * ck;
        hw->tile = t;
        hw->start = k0 * rd - w->pad_lo;
        /* every device's partial sum counts, so every position it multiplies
         * must be real data or 0, also where its kernel rows are padding */
        hw->lo = hw->start;
        hw->hi = hw->start + rq->width;
    }
}

/* Whether conv i can be split on the kernel window of spatial dim s (a
 * pending sum of the pieces, so only where the result type carries it). */
static bool rhs_splittable(Part *p, int32_t i, int32_t s)
{
    const HloInst *in = part_in(p, i);
    const HloAttrs *a = hlo_attrs(in);
    if (!a->conv || !a->window || s >= a->window->rank || in->n_operands != 2)
        return false;
    const WindowDim *w = &a->window->dims[s];
    const Shape *ks = part_in(p, in->operands[1])->shape;
    const Shape *ls = part_in(p, in->operands[0])->shape;
    WinGeom g = geom_of(w, ls->dims[a->conv->in_spatial[s]], in->shape->dims[a->conv->out_spatial[s]]);
    return part_geom_tame(&g) && w->lhs_dilate <= 1 && !w->reversal && ks->dims[a->conv->k_spatial[s]] == w->size &&
           w->size > 1 && contraction_sums_in_result(in->shape->type, ls->type, ks->type);
}

/* The kernel-window split of spatial dim s over atoms added to base (a
 * choice that splits no window factor): its wanted states, result and
 * cost; false if it does not combine. */
static bool rhs_candidate(Part *p, const RuleCtx *rc, const RuleChoice *base, int32_t s, const int8_t *atoms,
                          int32_t n_atoms, RhsSplit *out)
{
    const OpRule *r = &rc->rule;
    const HloInst *in = part_in(p, rc->inst);
    const ConvDims *cd = hlo_attrs(in)->conv;
    uint32_t mask = 0;
    for (int32_t k = 0; k < n_atoms; k++)
        mask |= 1u << atoms[k];
    if (base->pass || (fsh_used(&base->fs) & mask) || (base->res[0].partial & ~0u && base->res[0].kind != REDUCE_SUM &&
                                                        base->res[0].partial))
        return false;
    int32_t dl = (int32_t)cd->in_spatial[s], dk = (int32_t)cd->k_spatial[s];
    if (tiling_dim_n(&base->want[0], dl) || tiling_dim_n(&base->want[1], dk))
        return false;
    out->s = s;
    memcpy(out->atoms, atoms, (size_t)n_atoms);
    out->n_atoms = n_atoms;
    out->ch = *base;
    out->ch.want = ARENA_ARRAY(p->scratch, Tiling, r->n_in + 1);
    out->ch.res = ARENA_ARRAY(p->scratch, Tiling, r->n_out + 1);
    memcpy(out->ch.want, base->want, sizeof(Tiling) * (size_t)r->n_in);
    memcpy(out->ch.res, base->res, sizeof(Tiling) * (size_t)r->n_out);
    tiling_set_dim(&out->ch.want[0], dl, atoms, n_atoms);
    tiling_set_dim(&out->ch.want[1], dk, atoms, n_atoms);
    out->ch.res[0].partial |= mask;
    out->ch.res[0].kind = REDUCE_SUM;
    if (!tiling_valid(&out->ch.want[0]) || !tiling_valid(&out->ch.want[1]) || !tiling_valid(&out->ch.res[0]))
        return false;
    int64_t bytes = part_cost(p, in->operands[0], &out->ch.want[0]);
    bytes += part_cost(p, in->operands[1], &out->ch.want[1]);
    bytes += part_reshard_cost(p, in->shape, &out->ch.res[0], &rc->cur[r->n_in]);
    HaloReq rq;
    rhs_request(p, rc->inst, s, atoms, n_atoms, &rq, 1);
    HaloPlan hp;
    if (bytes >= PART_INF_COST || !halo_plan(&rq.d, rq.win, p->mesh->n_devices, rq.width, true, &hp))
        return false;
    Shape ls = tiling_local_shape(&out->ch.want[0], p->mesh, part_in(p, in->operands[0])->shape);
    out->bytes = bytes + part_halo_bytes(&ls, dl, &hp);
    return true;
}

/* Emits the kernel-window split c. */
static bool emit_rhs(Part *p, const RuleCtx *rc, const RhsSplit *c)
{
    int32_t i = rc->inst;
    const HloInst *in = part_in(p, i);
    const HloAttrs *ia = hlo_attrs(in);
    const ConvDims *cd = ia->conv;
    int32_t dl = (int32_t)cd->in_spatial[c->s], dk = (int32_t)cd->k_spatial[c->s];
    int32_t ops[2];
    if (part_rule_operands(p, rc, &c->ch, ops) < 0)
        return false;
    const Shape *lg = part_in(p, in->operands[0])->shape, *kg = part_in(p, in->operands[1])->shape;
    Shape xs = tiling_local_shape(&c->ch.want[0], p->mesh, lg), ks = tiling_local_shape(&c->ch.want[1], p->mesh, kg);
    HaloReq rq;
    rhs_request(p, i, c->s, c->atoms, c->n_atoms, &rq, -1);
    rq.dim = dl;
    rq.fill = emit_identity(p, REDUCE_SUM, xs.type);
    HaloPlan hp;
    if (!halo_plan(&rq.d, rq.win, p->mesh->n_devices, rq.width, true, &hp))
        return false;
    const char *xn = part_in(p, in->operands[0])->name, *kn = part_in(p, in->operands[1])->name;
    HaloCause why = {i, part_fmt(p, "%s read by %s for its share of the window (kernel %s split on dim %d)", xn,
                                 in->name, kn, (int)dk)};
    ops[0] = part_halo(p, ops[0], &xs, &rq, &hp, xn, &why);
    xs.dims[dl] = rq.width;
    /* the kernel's padding (a window that does not divide) contributes 0 */
    int64_t K = kg->dims[dk];
    if (K % rq.d.tiles != 0) {
        HaloWindow *w = ARENA_ARRAY(p->scratch, HaloWindow, p->mesh->n_devices);
        for (int64_t dev = 0; dev < p->mesh->n_devices; dev++)
            w[dev].start = tiling_offset(&c->ch.want[1], p->mesh, kg, dk, dev);
        ops[1] = part_mask_range(p, ops[1], &ks, dk, w, 0, K, rq.fill, part_name(p, kn, "unpadded"));
    }
    Tiling *leaves = part_result_leaves(p, rc, &c->ch);
    Shape l = part_local_shape(p, in->shape, leaves);
    int32_t res = part_clone(p, i, part_result_name(p, i, leaves, "partial"), &l, ops, 2);
    HloAttrs *a = hlo_attrs_mut(p->out, part_out(p, res));
    oprule_localize_attrs(&rc->rule, p->in, p->ic, i, &c->ch.fs, p->mesh, a);
    WindowDim *wd = &a->window->dims[c->s];
    wd->size = ks.dims[dk];
    wd->pad_lo = wd->pad_hi = 0;
    const char *reason = NULL;
    if (p->rep) {
        StrBuf b = {0};
        sb_printf(&b, "%s: window dim %d of kernel %s sharded on '%s'", in->name, (int)dk, kn,
                  part_axes_text(p, c->atoms, c->n_atoms));
        int32_t o = part_split_origin(p, in->operands[1], &c->ch.want[1], dk);
        if (o != PART_NOT_OWN && o != -1) {
            sb_puts(&b, " (");
            part_put_origin(p, &b, in->operands[1], o);
            sb_putc(&b, ')');
        }
        sb_puts(&b, ": each device sums its share of the window");
        reason = arena_strdup(p->scratch, sb_cstr(&b));
        sb_free(&b);
    }
    part_set_result(p, i, res, leaves, i, reason);
    return true;
}

/* The cheapest kernel-window split of conv i, from the atoms its lhs or
 * kernel already splits a spatial dim with; false if none. */
static bool best_rhs(Part *p, const RuleCtx *rc, const RuleChoice *base, RhsSplit *best)
{
    const HloInst *in = part_in(p, rc->inst);
    const ConvDims *cd = hlo_attrs(in)->conv;
    bool found = false;
    RhsSplit c;
    for (int32_t s = 0; cd && s < cd->n_spatial; s++) {
        if (!rhs_splittable(p, rc->inst, s))
            continue;
        const Tiling *srcs[2] = {&rc->cur[0], &rc->cur[1]};
        int32_t dims[2] = {(int32_t)cd->in_spatial[s], (int32_t)cd->k_spatial[s]};
        for (int32_t k = 0; k < 2; k++) {
            int32_t n = tiling_dim_n(srcs[k], dims[k]);
            if (n == 0 || !rhs_candidate(p, rc, base, s, tiling_dim(srcs[k], dims[k]), n, &c))
                continue;
            if (!found || c.bytes < best->bytes) {
                *best = c;
                found = true;
            }
        }
    }
    return found;
}

bool part_convolution(Part *p, int32_t i)
{
    RuleCtx rc;
    RuleChoice base;
    if (!part_rule_init(p, i, &rc))
        return part_default(p, i);
    RhsSplit rhs;
    if (part_rule_choose(p, &rc, NULL, NULL, &base) && best_rhs(p, &rc, &base, &rhs)) {
        /* against the best plan that splits no kernel window */
        RuleCtx rc2;
        RuleChoice ch;
        WinOp wo;
        part_rule_init(p, i, &rc2);
        bool windows = win_op_init(p, i, &rc2, &wo);
        if (windows)
            rc2.splittable |= 1u << FACTOR_WINDOW;
        if (!part_rule_choose(p, &rc2, windows ? win_extra : NULL, &wo, &ch) || rhs.bytes < ch.bytes)
            return emit_rhs(p, &rc, &rhs);
    }
    return h_windowed(p, i);
}
bool part_reduce_window(Part *p, int32_t i) { return h_windowed(p, i); }

/* ================================================================ select-and-scatter */

/* What a padded operand position must hold so that select never picks it
 * over a real element: the lowest value for a select that keeps the larger
 * (compare(a, b) GE/GT, a the current pick), the highest for LE/LT;
 * REDUCE_NONE when the select is no such compare. */
static ReduceKind select_fill(const HloModule *m, int32_t comp)
{
    if (comp < 0 || comp >= m->n_comps)
        return REDUCE_NONE;
    const HloComputation *c = &m->comps[comp];
    if (c->root < 0)
        return REDUCE_NONE;
    const HloInst *r = &c->insts[c->root];
    if (r->op != HLO_COMPARE || r->n_operands != 2)
        return REDUCE_NONE;
    const HloInst *a = &c->insts[r->operands[0]], *b = &c->insts[r->operands[1]];
    if (a->op != HLO_PARAMETER || b->op != HLO_PARAMETER)
        return REDUCE_NONE;
    bool swapped = a->param_number == 1 && b->param_number == 0;
    if (!swapped && !(a->param_number == 0 && b->param_number == 1))
        return REDUCE_NONE;
    CompareDir d = hlo_attrs(r)->direction;
    bool keeps_larger = d == CMP_GE || d == CMP_GT, keeps_smaller = d == CMP_LE || d == CMP_LT;
    if (!keeps_larger && !keeps_smaller)
        return REDUCE_NONE;
    return keeps_larger != swapped ? REDUCE_MAX : REDUCE_MIN; /* max's identity: the lowest value */
}

/* The two exchanges of a split window dim of select-and-scatter: the
 * operand's window (op), the source's (src), and per device where its
 * result shard starts in the local result (res_off).  Device t's result
 * rows [t*c, (t+1)*c) receive from the source windows o whose operand
 * window [o*s - pad_lo, o*s - pad_lo + span) overlaps them; every device
 * runs the windows [S_t, S_t + W_s) over the operand rows they cover (S_t
 * no later than the first window that starts at or before t*c, so the
 * local result covers the shard; extra windows scatter outside it). */
static void sas_requests(Part *p, const WinGeom *g, int64_t n_src, const int8_t *atoms, int32_t n_atoms,
                         HaloReq *op, HaloReq *src, int64_t *res_off, bool cost)
{
    const Mesh *m = p->mesh;
    int64_t nd = m->n_devices, T = 1;
    for (int32_t k = 0; k < n_atoms; k++)
        T *= m->atom_size[atoms[k]];
    int64_t c = tiling_shard_size(g->n_in, T), s = g->stride, span = (g->size - 1) * g->rhs_dilate + 1;
    HaloReq *rq[2] = {op, src};
    for (int32_t k = 0; k < 2; k++) {
        rq[k]->atoms = atoms;
        rq[k]->n_atoms = n_atoms;
        rq[k]->d.n = k ? n_src : g->n_in;
        rq[k]->d.tiles = T;
        rq[k]->d.chunk = tiling_shard_size(rq[k]->d.n, T);
        rq[k]->d.circular = false;
        rq[k]->win = dev_array(p, cost ? k : -1);
    }
    int64_t ws = 1;
    int64_t *first = ARENA_ARRAY(p->scratch, int64_t, nd), *olo = ARENA_ARRAY(p->scratch, int64_t, nd),
            *ohi = ARENA_ARRAY(p->scratch, int64_t, nd);
    if (cost) {
        first = dev_array(p, 2);
        olo = dev_array(p, 3);
        ohi = olo + nd; /* a slot holds nd HaloWindows: room for 4 * nd int64 */
    }
    for (int64_t dev = 0; dev < nd; dev++) {
        int64_t t = mesh_run_index(m, dev, atoms, n_atoms), lo = t * c, hi = lo + c;
        int64_t a = halo_ceil_div(lo + g->pad_lo - span + 1, s), b = halo_floor_div(hi - 1 + g->pad_lo, s) + 1;
        int64_t st = halo_floor_div(lo + g->pad_lo, s);
        st = a < st ? a : st;
        first[dev] = st;
        /* windows up to b, and enough of them for the result to reach hi */
        int64_t need = b - st, reach = halo_ceil_div(hi - st * s + g->pad_lo - span, s) + 1;
        need = reach > need ? reach : need;
        ws = need > ws ? need : ws;
        olo[dev] = a > 0 ? a : 0;
        ohi[dev] = b < n_src ? b : n_src;
        if (lo >= g->n_in)
            olo[dev] = ohi[dev]; /* a shard of padding only: nothing to compute */
    }
    int64_t wop = (ws - 1) * s + span;
    for (int64_t dev = 0; dev < nd; dev++) {
        int64_t t = mesh_run_index(m, dev, atoms, n_atoms);
        HaloWindow *w = &src->win[dev], *o = &op->win[dev];
        w->tile = o->tile = t;
        w->start = first[dev];
        o->start = first[dev] * s - g->pad_lo;
        /* the source values of the windows that overlap the shard, and the
         * positions the array does not have (they must scatter the
         * identity, masked, even on a device no real window reaches) */
        int64_t lo = INT64_MAX, hi = INT64_MIN, end = first[dev] + ws;
        if (olo[dev] < ohi[dev]) {
            lo = olo[dev];
            hi = ohi[dev];
            o->lo = olo[dev] * s - g->pad_lo;
            o->hi = (ohi[dev] - 1) * s - g->pad_lo + span;
        } else {
            o->lo = o->hi = o->start;
        }
        if (first[dev] < 0) {
            lo = first[dev] < lo ? first[dev] : lo;
            hi = (end < 0 ? end : 0) > hi ? (end < 0 ? end : 0) : hi;
        }
        if (end > n_src) {
            int64_t b0 = first[dev] > n_src ? first[dev] : n_src;
            lo = b0 < lo ? b0 : lo;
            hi = end > hi ? end : hi;
        }
        w->lo = lo <= hi ? lo : w->start;
        w->hi = lo <= hi ? hi : w->start;
        res_off[dev] = t * c - o->start;
    }
    src->width = ws;
    op->width = wop;
}

typedef struct SasOp {
    WinOp w;
    ReduceKind op_fill, src_fill;
} SasOp;

static int64_t sas_extra(Part *p, const RuleCtx *rc, const RuleChoice *cand, void *user)
{
    const SasOp *so = user;
    const OpRule *r = &rc->rule;
    const HloInst *in = part_in(p, rc->inst);
    Shape ls = tiling_local_shape(&cand->want[0], p->mesh, part_in(p, in->operands[0])->shape);
    Shape ss = tiling_local_shape(&cand->want[1], p->mesh, part_in(p, in->operands[1])->shape);
    int64_t bytes = 0;
    for (int32_t f = 0; f < r->n_factors; f++) {
        if (so->w.win_dim[f] < 0 || cand->fs.n[f] == 0)
            continue;
        int32_t d = so->w.in_dim[f];
        WinGeom g = geom_of(&op_window(in)->dims[so->w.win_dim[f]], r->t[0].shape[d], r->t[0].shape[d]);
        if (!part_geom_tame(&g) || !tame(r->t[1].shape[d]))
            return PART_INF_COST;
        HaloReq op, src;
        int64_t *off = (int64_t *)dev_array(p, 3) + 2 * p->mesh->n_devices;
        sas_requests(p, &g, r->t[1].shape[d], fsh_factor(&cand->fs, f), cand->fs.n[f], &op, &src, off, true);
        HaloPlan hp, hs;
        if (!halo_plan(&op.d, op.win, p->mesh->n_devices, op.width, true, &hp) ||
            !halo_plan(&src.d, src.win, p->mesh->n_devices, src.width, true, &hs))
            return PART_INF_COST;
        bytes += part_halo_bytes(&ls, d, &hp) + part_halo_bytes(&ss, d, &hs);
        ls.dims[d] = op.width;
        ss.dims[d] = src.width;
    }
    return bytes;
}

bool part_select_and_scatter(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    const HloAttrs *a = hlo_attrs(in);
    RuleCtx rc;
    RuleChoice ch;
    SasOp so;
    if (!part_rule_init(p, i, &rc))
        return part_default(p, i);
    const OpRule *r = &rc.rule;
    memset(&so.w, 0xff, sizeof so.w);
    so.w.operand = 0;
    so.op_fill = select_fill(p->in, a->select);
    so.src_fill = reducer_kind(p->in, a->to_apply);
    bool windows = false;
    if (a->window && r->n_in >= 2 && so.op_fill != REDUCE_NONE && so.src_fill != REDUCE_NONE) {
        for (int32_t d = 0; d < r->t[0].rank && d < a->window->rank; d++) {
            int32_t f = oprule_dim_factor(r, 0, d, 0);
            if (oprule_dim_n(r, 0, d) != 1 || r->factors[f].kind != FACTOR_WINDOW)
                continue;
            so.w.win_dim[f] = so.w.in_dim[f] = so.w.out_dim[f] = d;
            windows = true;
        }
    }
    if (windows)
        rc.splittable |= 1u << FACTOR_WINDOW;
    if (!part_rule_choose(p, &rc, windows ? sas_extra : NULL, &so, &ch))
        return part_default(p, i);
    bool split = false;
    for (int32_t f = 0; windows && f < r->n_factors; f++)
        split |= so.w.win_dim[f] >= 0 && ch.fs.n[f] > 0;
    if (!split)
        return part_rule_emit(p, &rc, &ch);
    int32_t *ops = ARENA_ARRAY(p->scratch, int32_t, in->n_operands + 1);
    if (part_rule_operands(p, &rc, &ch, ops) < 0)
        return false;
    const Shape *ogs = part_in(p, in->operands[0])->shape;
    Shape xs = tiling_local_shape(&ch.want[0], p->mesh, ogs);
    Shape ss = tiling_local_shape(&ch.want[1], p->mesh, part_in(p, in->operands[1])->shape);
    int32_t ofill = emit_identity(p, so.op_fill, xs.type);
    int32_t sfill = emit_identity(p, so.src_fill, ss.type);
    Window lw = *a->window;
    int32_t x = ops[0], sv = ops[1];
    int64_t nd = p->mesh->n_devices;
    /* per split dim: where the device's result shard starts in the local result */
    int32_t n_cut = 0, cut_dim[SPMDC_MAX_RANK];
    int64_t *cut_off[SPMDC_MAX_RANK], cut_w[SPMDC_MAX_RANK];
    for (int32_t f = 0; f < r->n_factors; f++) {
        if (so.w.win_dim[f] < 0 || ch.fs.n[f] == 0)
            continue;
        int32_t d = so.w.in_dim[f];
        WinGeom g = geom_of(&a->window->dims[d], r->t[0].shape[d], r->t[0].shape[d]);
        HaloReq op, src;
        int64_t *off = ARENA_ARRAY(p->scratch, int64_t, nd);
        sas_requests(p, &g, r->t[1].shape[d], fsh_factor(&ch.fs, f), ch.fs.n[f], &op, &src, off, false);
        op.dim = src.dim = d;
        op.fill = ofill;
        src.fill = sfill;
        HaloPlan hp, hs;
        if (!halo_plan(&op.d, op.win, nd, op.width, true, &hp) || !halo_plan(&src.d, src.win, nd, src.width, true, &hs))
            return false; /* the cost callback rejected such candidates */
        HaloCause why = {i, window_words(p, i, in->operands[0], &a->window->dims[d])};
        x = part_halo(p, x, &xs, &op, &hp, part_in(p, in->operands[0])->name, &why);
        xs.dims[d] = op.width;
        HaloCause whys = {i, window_words(p, i, in->operands[1], &a->window->dims[d])};
        sv = part_halo(p, sv, &ss, &src, &hs, part_in(p, in->operands[1])->name, &whys);
        ss.dims[d] = src.width;
        lw.dims[d].pad_lo = lw.dims[d].pad_hi = 0;
        cut_dim[n_cut] = d;
        cut_off[n_cut] = off;
        cut_w[n_cut++] = tiling_shard_size(r->t[0].shape[d], op.d.tiles);
    }
    ops[0] = x;
    ops[1] = sv;
    Tiling *leaves = part_result_leaves(p, &rc, &ch);
    Shape l = part_local_shape(p, in->shape, leaves);
    Shape wide = l;
    for (int32_t k = 0; k < n_cut; k++)
        wide.dims[cut_dim[k]] = xs.dims[cut_dim[k]];
    int32_t res = part_clone(p, i, part_name(p, in->name, "window"), &wide, ops, in->n_operands);
    HloAttrs *ra = hlo_attrs_mut(p->out, part_out(p, res));
    oprule_localize_attrs(r, p->in, p->ic, i, &ch.fs, p->mesh, ra);
    *ra->window = lw;
    /* each device's shard out of its local result */
    for (int32_t k = 0; k < n_cut; k++) {
        int32_t d = cut_dim[k];
        bool same = true;
        for (int64_t dev = 1; dev < nd && same; dev++)
            same = cut_off[k][dev] == cut_off[k][0];
        const char *name = k + 1 == n_cut ? part_result_name(p, i, leaves, "local") : part_name(p, in->name, "cut");
        if (same) {
            res = part_slice_dim(p, res, &wide, d, cut_off[k][0], cut_off[k][0] + cut_w[k], 1, name);
        } else {
            int32_t o = part_device_value(p, cut_off[k], part_fmt(p, "%s.shard-offset", in->name));
            res = part_dynamic_slice_dim(p, res, &wide, d, o, cut_w[k], name);
        }
        wide.dims[d] = cut_w[k];
    }
    part_rule_result(p, &rc, &ch, res);
    return true;
}
