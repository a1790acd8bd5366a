/* partition_index.c - the partitioner's handlers for indexing, sorting and
 * multi-output reductions on split data: gather, scatter, dynamic-slice,
 * dynamic-update-slice, topk (the opcode and the TopK custom-call) and
 * variadic reduce (argmax / argmin value+index pairs).
 *
 * Each handler starts from the op's rule (oprule.h) and widens it where a
 * method exists for a dim the rule keeps whole; the generic path
 * (partition_rule.c) then prices every candidate with the report's cost
 * model, so the method runs only where it sends fewer bytes than gathering
 * the operand (the rule's way):
 *  - gather along a split indexed operand dim (slice size 1): a masked local
 *    gather.  Each device clamps the indices globally (XLA's semantics),
 *    subtracts its shard's offset, gathers from its shard and zeroes the rows
 *    whose index lies in another shard: the result is a pending sum over the
 *    dim's axes (one all-reduce later, or a reduce-scatter).
 *  - scatter into a split operand dim the update window covers with size 1:
 *    each device subtracts its shard's offset from the indices and scatters
 *    locally; an update whose index lies in another shard is out of bounds
 *    on this one and is skipped (XLA's semantics), so every update lands on
 *    exactly one device, in program order: right for any combiner and for
 *    duplicate indices.  Splitting the updates instead (the indices' batch
 *    dims) is the rule's reduction factor: associative combiners only.
 *  - dynamic-slice along a split dim: the start is clamped globally, each
 *    device slices what of the window lies in its shard from its shard
 *    padded with zeros: a pending sum over the dim's axes.
 *  - dynamic-update-slice along a split dim: the start is clamped globally,
 *    each device writes the part of the update that lies in its shard (a
 *    select between its shard and the update shifted into place): local, the
 *    update stays whole (no collective when it is replicated).
 *  - topk along a split last dim: local topk per shard (indices made
 *    global), an all-gather of the k candidates of every shard, a final topk
 *    over them; when gathering the operand costs no more, the rule's way.
 *  - variadic reduce along split dims, for reducers that select one of their
 *    two arguments per output (argmax, argmin): a local reduce, an
 *    all-gather of one candidate per shard, a final reduce.
 *  - rng: every device draws its own tile (XLA's semantics: the values are
 *    per device); devices that hold the same tile take their group's first
 *    device's draw (a pending sum closed by an all-reduce: a broadcast), so
 *    copies of a value always agree.  rng-bit-generator needs no handler:
 *    its bits are a function of the (replicated) state and the shard's shape.
 * Index arithmetic runs in s32 (s64 for s64 and u32 indices or dims of
 * 2^30 or more); u64 indices keep the rule's way.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "partition_internal.h"

/* ================================================================ emission helpers */

static Shape shape_of(Part *p, int32_t v) { return *part_out(p, v)->shape; }

static int32_t emit_as(Part *p, HloOpcode op, const char *base, const char *role, const Shape *s,
                       const int32_t *ops, int32_t n)
{
    return part_emit(p, op, part_name(p, base, role), s, ops, n);
}

/* An integer (or pred) constant of type t: a scalar when n < 0, else the
 * vector v[0..n). */
static int32_t int_const(Part *p, ElemType t, const int64_t *v, int64_t n, const char *base)
{
    Shape s = n < 0 ? shape_scalar(t) : shape_array(t, 1, &n);
    int64_t cnt = n < 0 ? 1 : n;
    int32_t c = emit_as(p, HLO_CONSTANT, base, "constant", &s, NULL, 0);
    Literal *lit = ARENA_NEW(p->out->arena, Literal);
    lit->n = cnt;
    lit->i = arena_memdup(p->out->arena, v, sizeof(int64_t) * (size_t)cnt);
    hlo_attrs_mut(p->out, part_out(p, c))->literal = lit;
    return c;
}

static int32_t int_scalar(Part *p, ElemType t, int64_t v, const char *base) { return int_const(p, t, &v, -1, base); }

static int32_t convert_to(Part *p, int32_t v, ElemType t, const char *base)
{
    Shape s = shape_of(p, v);
    if (s.type == t)
        return v;
    s.type = t;
    return emit_as(p, HLO_CONVERT, base, "convert", &s, &v, 1);
}

/* v broadcast to the dims of `like` (v's element type), v's dims going to
 * dims[0..nd). */
static int32_t bcast(Part *p, int32_t v, const Shape *like, const int64_t *dims, int32_t nd, const char *base)
{
    Shape s = shape_array(shape_of(p, v).type, like->rank, like->dims);
    int32_t r = emit_as(p, HLO_BROADCAST, base, "broadcast", &s, &v, 1);
    hlo_attrs_mut(p->out, part_out(p, r))->dimensions = hlo_intlist(p->out, dims, nd);
    return r;
}

static int32_t binop(Part *p, HloOpcode op, int32_t a, int32_t b, const char *base, const char *role)
{
    Shape s = shape_of(p, a);
    int32_t ab[2] = {a, b};
    return emit_as(p, op, base, role, &s, ab, 2);
}

static int32_t unop(Part *p, HloOpcode op, int32_t a, const char *base, const char *role)
{
    Shape s = shape_of(p, a);
    return emit_as(p, op, base, role, &s, &a, 1);
}

static int32_t compare(Part *p, int32_t a, int32_t b, CompareDir dir, const char *base)
{
    Shape s = shape_of(p, a);
    s.type = ET_PRED;
    int32_t ab[2] = {a, b};
    int32_t r = emit_as(p, HLO_COMPARE, base, "compare", &s, ab, 2);
    hlo_attrs_mut(p->out, part_out(p, r))->direction = dir;
    return r;
}

/* clamp(lo, v, hi) of scalars or same-shape arrays. */
static int32_t clamp3(Part *p, int32_t lo, int32_t v, int32_t hi, const char *base)
{
    Shape s = shape_of(p, v);
    int32_t ops[3] = {lo, v, hi};
    return emit_as(p, HLO_CLAMP, base, "clamp", &s, ops, 3);
}

/* pad(v) with `value` (a scalar of v's type), lo[d] / hi[d] elements on each
 * side of dim d. */
static int32_t pad_with(Part *p, int32_t v, int32_t value, const int64_t *lo, const int64_t *hi, const char *base)
{
    Shape s = shape_of(p, v);
    int64_t zero[SPMDC_MAX_RANK] = {0};
    for (int32_t d = 0; d < s.rank; d++)
        s.dims[d] += lo[d] + hi[d];
    int32_t ops[2] = {v, value};
    int32_t r = emit_as(p, HLO_PAD, base, "pad", &s, ops, 2);
    HloAttrs *a = hlo_attrs_mut(p->out, part_out(p, r));
    a->pad_lo = hlo_intlist(p->out, lo, s.rank);
    a->pad_hi = hlo_intlist(p->out, hi, s.rank);
    a->pad_interior = hlo_intlist(p->out, zero, s.rank);
    return r;
}

/* dynamic-slice(v, starts[0..rank)) of the given sizes, called name. */
static int32_t dyn_slice(Part *p, int32_t v, const int32_t *starts, const Shape *sizes, const char *name)
{
    int32_t ops[1 + SPMDC_MAX_RANK];
    ops[0] = v;
    memcpy(ops + 1, starts, sizeof(int32_t) * (size_t)sizes->rank);
    Shape s = shape_array(shape_of(p, v).type, sizes->rank, sizes->dims);
    int32_t r = part_emit(p, HLO_DYNAMIC_SLICE, name, &s, ops, 1 + sizes->rank);
    hlo_attrs_mut(p->out, part_out(p, r))->dynamic_slice_sizes = hlo_intlist(p->out, sizes->dims, sizes->rank);
    return r;
}

static bool list_has(const IntList *l, int64_t v)
{
    for (int32_t k = 0; k < l->n; k++)
        if (l->v[k] == v)
            return true;
    return false;
}

/* The element type local index arithmetic runs in, for indices of type it
 * into dims of at most max_dim elements: s32 when both fit with room for an
 * offset, s64 otherwise; false for u64 (values above 2^63 would change
 * meaning) and non-integers. */
static bool index_calc_type(ElemType it, int64_t max_dim, ElemType *ct)
{
    switch (it) {
    case ET_S8: case ET_S16: case ET_S32: case ET_U8: case ET_U16:
        *ct = max_dim < ((int64_t)1 << 30) ? ET_S32 : ET_S64;
        return true;
    case ET_S64: case ET_U32:
        *ct = ET_S64;
        return true;
    default: return false;
    }
}

static int64_t max_dim(const Shape *s)
{
    int64_t m = 0;
    for (int32_t d = 0; d < s->rank; d++)
        m = s->dims[d] > m ? s->dims[d] : m;
    return m;
}

/* Whether fs splits some factor of mask (bit f). */
static bool splits_any(const FactorSharding *fs, uint64_t mask)
{
    for (int32_t f = 0; f < fs->n_factors; f++)
        if (((mask >> f) & 1u) && fs->n[f] > 0)
            return true;
    return false;
}

/* The single factor of tensor k's dim d, or -1 (a dim of several factors). */
static int32_t dim_factor(const OpRule *r, int32_t k, int32_t d)
{
    return k >= 0 && d >= 0 && d < r->t[k].rank && oprule_dim_n(r, k, d) == 1 ? oprule_dim_factor(r, k, d, 0) : -1;
}

/* This device's s32[] offset along a dim of n elements that factor f splits
 * in fs (chunk = ceil(n / tiles), XLA's layout of uneven dims); *chunk gets
 * the shard size.  -1 if f is not split (*chunk = n). */
static int32_t factor_offset(Part *p, const FactorSharding *fs, int32_t f, int64_t n, int64_t *chunk,
                             const char *base)
{
    if (f < 0 || fs->n[f] == 0) {
        *chunk = n;
        return -1;
    }
    *chunk = tiling_shard_size(n, fsh_tiles(fs, p->mesh, f));
    return part_offset(p, fsh_factor(fs, f), fs->n[f], *chunk, base);
}

/* ================================================================ index vectors */

/* One component of a gather's / scatter's index vector. */
typedef struct IdxComp {
    int64_t hi;   /* global clamp bound (dim - slice size) */
    int64_t size; /* local extent of the indexed dim: its shard, or the whole dim */
    int32_t off;  /* s32[] offset of this device's shard, -1 when the dim is whole */
} IdxComp;

/* A value with one element per component (a scalar when `scalar`), of
 * type ct: constants vals[], or where dyn[j] >= 0 that instruction (an s32
 * scalar, converted). */
static int32_t comp_vector(Part *p, ElemType ct, const int64_t *vals, const int32_t *dyn, int32_t nc, bool scalar,
                           const char *base)
{
    bool any = false;
    for (int32_t j = 0; dyn && j < nc; j++)
        any |= dyn[j] >= 0;
    if (!any)
        return scalar ? int_scalar(p, ct, vals[0], base) : int_const(p, ct, vals, nc, base);
    if (scalar)
        return convert_to(p, dyn[0], ct, base);
    int32_t pieces[SPMDC_MAX_RANK + 1];
    int64_t one = 1;
    Shape s1 = shape_array(ct, 1, &one);
    for (int32_t j = 0; j < nc; j++) {
        int32_t v = dyn[j] >= 0 ? convert_to(p, dyn[j], ct, base) : int_scalar(p, ct, vals[j], base);
        pieces[j] = emit_as(p, HLO_RESHAPE, base, "reshape", &s1, &v, 1);
    }
    if (nc == 1)
        return pieces[0];
    int64_t n = nc;
    Shape s = shape_array(ct, 1, &n);
    int32_t r = emit_as(p, HLO_CONCATENATE, base, "concatenate", &s, pieces, nc);
    int64_t zero = 0;
    hlo_attrs_mut(p->out, part_out(p, r))->dimensions = hlo_intlist(p->out, &zero, 1);
    return r;
}

/* Local indices for this device's shards: ix (local indices, index vector
 * dim ivd; ivd == rank: one implicit component), converted to ct, each
 * component clamped to [0, hi] first when `clamp` (gather's semantics),
 * minus its shard's offset.  *inr (if not NULL) gets pred[ix's dims without
 * ivd]: every component within [0, size) (the row's slice is on this
 * device). */
static int32_t local_indices(Part *p, int32_t ix, int64_t ivd, const IdxComp *c, int32_t nc, bool clamp,
                             ElemType ct, int32_t *inr, const char *base)
{
    Shape is = shape_of(p, ix);
    bool scalar = ivd >= is.rank;
    is.type = ct;
    int64_t bd = ivd;
    int32_t nbd = scalar ? 0 : 1;
    int64_t zeros[SPMDC_MAX_RANK + 1] = {0}, vals[SPMDC_MAX_RANK + 1];
    int32_t offs[SPMDC_MAX_RANK + 1];
    int32_t x = convert_to(p, ix, ct, base);
    int32_t zero_b = bcast(p, comp_vector(p, ct, zeros, NULL, nc, scalar, base), &is, &bd, nbd, base);
    if (clamp) {
        for (int32_t j = 0; j < nc; j++)
            vals[j] = c[j].hi;
        int32_t hi_b = bcast(p, comp_vector(p, ct, vals, NULL, nc, scalar, base), &is, &bd, nbd, base);
        x = clamp3(p, zero_b, x, hi_b, base);
    }
    for (int32_t j = 0; j < nc; j++)
        offs[j] = c[j].off;
    int32_t off_b = bcast(p, comp_vector(p, ct, zeros, offs, nc, scalar, base), &is, &bd, nbd, base);
    x = binop(p, HLO_SUBTRACT, x, off_b, base, "local-indices");
    if (!inr)
        return x;
    for (int32_t j = 0; j < nc; j++)
        vals[j] = c[j].size;
    int32_t size_b = bcast(p, comp_vector(p, ct, vals, NULL, nc, scalar, base), &is, &bd, nbd, base);
    int32_t in = binop(p, HLO_AND, compare(p, x, zero_b, CMP_GE, base), compare(p, x, size_b, CMP_LT, base), base,
                       "in-shard");
    if (!scalar) {
        Shape rows = shape_array(ET_PRED, 0, NULL);
        for (int32_t d = 0; d < is.rank; d++)
            if (d != ivd)
                rows.dims[rows.rank++] = is.dims[d];
        int32_t ops[2] = {in, int_scalar(p, ET_PRED, 1, base)};
        in = emit_as(p, HLO_REDUCE, base, "in-shard-rows", &rows, ops, 2);
        HloAttrs *a = hlo_attrs_mut(p->out, part_out(p, in));
        a->dimensions = hlo_intlist(p->out, &bd, 1);
        a->to_apply = part_reducer(p, REDUCE_AND, ET_PRED);
    }
    *inr = in;
    return x;
}

/* The rule's tensor k's dim d gets a factor of its own (size n, kind) in
 * place of the one it shares; false if the rule has no room. */
static bool detach_dim(OpRule *r, int32_t k, int32_t d, int64_t n, FactorKind kind)
{
    if (r->n_factors >= OPRULE_MAX_FACTORS || oprule_dim_n(r, k, d) != 1)
        return false;
    Factor *f = &r->factors[r->n_factors];
    f->size = n;
    f->kind = (uint8_t)kind;
    f->reduce = REDUCE_NONE;
    r->factor_of[r->dim_start[r->t[k].dims + d]] = (int8_t)r->n_factors++;
    return true;
}

/* ================================================================ gather */

bool part_gather(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    const HloAttrs *a = hlo_attrs(in);
    RuleCtx rc;
    RuleChoice ch;
    if (!part_rule_init(p, i, &rc))
        return part_default(p, i);
    OpRule *r = &rc.rule;
    const Shape *os = part_in(p, in->operands[0])->shape, *is = part_in(p, in->operands[1])->shape;
    int32_t t0 = oprule_operand_tensor(r, 0), t1 = oprule_operand_tensor(r, 1);
    ReduceKind kind = in->shape->type == ET_PRED ? REDUCE_OR : REDUCE_SUM;
    ElemType ct = ET_S32;
    uint64_t masked = 0;
    /* an indexed dim sliced one element wide may be split: masked method */
    if (t0 >= 0 && t1 >= 0 && index_calc_type(is->type, max_dim(os), &ct) && !elem_type_is_complex(in->shape->type)) {
        for (int32_t j = 0; j < a->start_index_map.n; j++) {
            int64_t d = a->start_index_map.v[j];
            if (d < 0 || d >= os->rank || d >= a->slice_sizes.n || a->slice_sizes.v[d] != 1 ||
                list_has(&a->operand_batching_dims, d))
                continue;
            int32_t f = dim_factor(r, t0, (int32_t)d);
            if (f < 0 || r->factors[f].kind != FACTOR_NEED_REPLICATION || oprule_factor_tensors(r, f) != (1u << t0))
                continue;
            r->factors[f].kind = FACTOR_REDUCTION;
            r->factors[f].reduce = (uint8_t)kind;
            masked |= (uint64_t)1 << f;
        }
    }
    rc.unmasked = t1 >= 0 ? 1u << t1 : 0;
    if (!part_rule_choose(p, &rc, NULL, NULL, &ch))
        return part_default(p, i);
    if (!splits_any(&ch.fs, masked))
        return part_rule_emit(p, &rc, &ch);
    int32_t ops[2];
    if (part_rule_operands(p, &rc, &ch, ops) < 0)
        return false;
    IdxComp comps[SPMDC_MAX_RANK + 1];
    int32_t nc = a->start_index_map.n;
    for (int32_t j = 0; j < nc && j <= SPMDC_MAX_RANK; j++) {
        int32_t d = (int32_t)a->start_index_map.v[j];
        int32_t f = dim_factor(r, t0, d);
        comps[j].hi = os->dims[d] - a->slice_sizes.v[d];
        comps[j].off = factor_offset(p, &ch.fs, (masked >> f) & 1u ? f : -1, os->dims[d], &comps[j].size, in->name);
    }
    int32_t inr;
    int32_t il = local_indices(p, ops[1], a->index_vector_dim, comps, nc, true, ct, &inr, in->name);
    Tiling *leaves = part_result_leaves(p, &rc, &ch);
    Shape ol = part_local_shape(p, in->shape, leaves);
    int32_t gops[2] = {ops[0], il};
    int32_t g = part_clone(p, i, part_name(p, in->name, "local-gather"), &ol, gops, 2);
    oprule_localize_attrs(r, p->in, p->ic, i, &ch.fs, p->mesh, hlo_attrs_mut(p->out, part_out(p, g)));
    /* the rows whose slice is on another device become the sum's identity */
    int64_t rows[SPMDC_MAX_RANK];
    int32_t nr = 0;
    for (int32_t d = 0; d < ol.rank; d++)
        if (!list_has(&a->offset_dims, d))
            rows[nr++] = d;
    int32_t sel[3] = {bcast(p, inr, &ol, rows, nr, in->name), g, part_identity(p, kind, &ol, in->name)};
    int32_t res = part_emit(p, HLO_SELECT, part_result_name(p, i, leaves, "partial"), &ol, sel, 3);
    part_out(p, res)->span = in->span;
    part_rule_result(p, &rc, &ch, res);
    return true;
}

/* ================================================================ scatter */

bool part_scatter(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    const HloAttrs *a = hlo_attrs(in);
    RuleCtx rc;
    RuleChoice ch;
    if (!part_rule_init(p, i, &rc))
        return part_default(p, i);
    OpRule *r = &rc.rule;
    int32_t n = (in->n_operands - 1) / 2;
    const Shape *os = part_in(p, in->operands[0])->shape, *is = part_in(p, in->operands[n])->shape;
    const Shape *us = part_in(p, in->operands[n + 1])->shape;
    int32_t t0 = oprule_operand_tensor(r, 0);
    ElemType ct = ET_S32;
    uint64_t shifted = 0;
    /* an indexed operand dim the update window covers one element wide may
     * be split (the rule's PASS factor): each device scatters the updates
     * that fall in its shard; indices whose arithmetic has no type here keep
     * it whole */
    bool calc = index_calc_type(is->type, max_dim(os), &ct);
    if (t0 >= 0) {
        int64_t win[SPMDC_MAX_RANK]; /* update window size of each operand dim (1 if inserted) */
        for (int32_t d = 0, k = 0; d < os->rank; d++) {
            win[d] = 1;
            if (list_has(&a->inserted_window_dims, d) || list_has(&a->input_batching_dims, d))
                continue;
            if (k < a->update_window_dims.n && a->update_window_dims.v[k] >= 0 && a->update_window_dims.v[k] < us->rank)
                win[d] = us->dims[a->update_window_dims.v[k]];
            k++;
        }
        for (int32_t j = 0; j < a->scatter_dims_to_operand_dims.n; j++) {
            int64_t d = a->scatter_dims_to_operand_dims.v[j];
            if (d < 0 || d >= os->rank || win[d] != 1 || list_has(&a->input_batching_dims, d))
                continue;
            int32_t f = dim_factor(r, t0, (int32_t)d);
            if (f < 0 || (r->factors[f].kind != FACTOR_NEED_REPLICATION && r->factors[f].kind != FACTOR_PASS))
                continue;
            r->factors[f].kind = calc ? FACTOR_PASS : FACTOR_NEED_REPLICATION;
            if (calc)
                shifted |= (uint64_t)1 << f;
        }
    }
    if (!part_rule_choose(p, &rc, NULL, NULL, &ch))
        return part_default(p, i);
    if (!splits_any(&ch.fs, shifted))
        return part_rule_emit(p, &rc, &ch);
    int32_t *ops = ARENA_ARRAY(p->scratch, int32_t, in->n_operands);
    if (part_rule_operands(p, &rc, &ch, ops) < 0)
        return false;
    IdxComp comps[SPMDC_MAX_RANK + 1];
    int32_t nc = a->scatter_dims_to_operand_dims.n;
    for (int32_t j = 0; j < nc && j <= SPMDC_MAX_RANK; j++) {
        int32_t d = (int32_t)a->scatter_dims_to_operand_dims.v[j];
        int32_t f = dim_factor(r, t0, d);
        comps[j].hi = 0;
        comps[j].off = factor_offset(p, &ch.fs, (shifted >> f) & 1u ? f : -1, os->dims[d], &comps[j].size, in->name);
    }
    ops[n] = local_indices(p, ops[n], a->index_vector_dim, comps, nc, false, ct, NULL, in->name);
    Tiling *leaves = part_result_leaves(p, &rc, &ch);
    bool partial = false;
    for (int32_t l = 0; l < p->vals[i].n_leaves; l++)
        partial |= leaves[l].partial != 0;
    Shape ol = part_local_shape(p, in->shape, leaves);
    int32_t res = part_clone(p, i, part_result_name(p, i, leaves, partial ? "partial" : "local"), &ol, ops,
                             in->n_operands);
    part_rule_result(p, &rc, &ch, res);
    return true;
}

/* ================================================================ dynamic-slice */

bool part_dynamic_slice(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    RuleCtx rc;
    RuleChoice ch;
    if (!part_rule_init(p, i, &rc))
        return part_default(p, i);
    OpRule *r = &rc.rule;
    const Shape *os = part_in(p, in->operands[0])->shape, *rs = in->shape;
    int32_t t0 = oprule_operand_tensor(r, 0), tr = oprule_result_tensor(r, 0);
    ElemType it = in->n_operands > 1 ? part_in(p, in->operands[1])->shape->type : ET_S32, ct = ET_S32;
    ReduceKind kind = rs->type == ET_PRED ? REDUCE_OR : REDUCE_SUM;
    uint64_t masked = 0;
    /* a sliced dim may be split: each device slices what lies in its shard,
     * the result is a pending sum over the dim's axes */
    if (t0 >= 0 && tr >= 0 && in->n_operands == 1 + os->rank && index_calc_type(it, max_dim(os), &ct) &&
        !elem_type_is_complex(rs->type)) {
        for (int32_t d = 0; d < os->rank; d++) {
            int32_t f = dim_factor(r, t0, d);
            if (os->dims[d] == rs->dims[d] || f < 0 || r->factors[f].kind != FACTOR_PERMUTATION ||
                !detach_dim(r, tr, d, rs->dims[d], FACTOR_NEED_REPLICATION))
                continue;
            r->factors[f].kind = FACTOR_REDUCTION;
            r->factors[f].reduce = (uint8_t)kind;
            r->factors[f].size = os->dims[d];
            masked |= (uint64_t)1 << f;
        }
    }
    rc.unmasked = ~(t0 >= 0 ? 1u << t0 : 0u); /* the start indices stay whole */
    if (!part_rule_choose(p, &rc, NULL, NULL, &ch))
        return part_default(p, i);
    if (!splits_any(&ch.fs, masked))
        return part_rule_emit(p, &rc, &ch);
    int32_t *ops = ARENA_ARRAY(p->scratch, int32_t, in->n_operands);
    if (part_rule_operands(p, &rc, &ch, ops) < 0)
        return false;
    Tiling *leaves = part_result_leaves(p, &rc, &ch);
    Shape ol = part_local_shape(p, in->shape, leaves);
    int64_t lo[SPMDC_MAX_RANK] = {0};
    int32_t starts[SPMDC_MAX_RANK];
    for (int32_t d = 0; d < os->rank; d++) {
        int32_t f = dim_factor(r, t0, d);
        int32_t st = convert_to(p, ops[1 + d], ct, in->name);
        if (f < 0 || !((masked >> f) & 1u) || ch.fs.n[f] == 0) {
            starts[d] = st;
            continue;
        }
        /* the global start, clamped as XLA does; its place in this shard padded by S on both sides */
        int64_t c;
        int32_t off = convert_to(p, factor_offset(p, &ch.fs, f, os->dims[d], &c, in->name), ct, in->name);
        st = clamp3(p, int_scalar(p, ct, 0, in->name), st, int_scalar(p, ct, os->dims[d] - rs->dims[d], in->name),
                    in->name);
        st = binop(p, HLO_SUBTRACT, st, off, in->name, "shard-start");
        starts[d] = binop(p, HLO_ADD, st, int_scalar(p, ct, rs->dims[d], in->name), in->name, "padded-start");
        lo[d] = rs->dims[d];
    }
    Shape zs = shape_scalar(rs->type);
    int32_t padded = pad_with(p, ops[0], part_identity(p, kind, &zs, in->name), lo, lo, in->name);
    int32_t res = dyn_slice(p, padded, starts, &ol, part_result_name(p, i, leaves, "partial"));
    part_out(p, res)->span = in->span;
    part_rule_result(p, &rc, &ch, res);
    return true;
}

/* ================================================================ dynamic-update-slice */

bool part_dynamic_update_slice(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    RuleCtx rc;
    RuleChoice ch;
    if (!part_rule_init(p, i, &rc))
        return part_default(p, i);
    OpRule *r = &rc.rule;
    const Shape *os = part_in(p, in->operands[0])->shape, *us = part_in(p, in->operands[1])->shape;
    int32_t t0 = oprule_operand_tensor(r, 0);
    ElemType it = in->n_operands > 2 ? part_in(p, in->operands[2])->shape->type : ET_S32, ct = ET_S32;
    /* the updated dims may be split: each device writes its part */
    if (t0 >= 0 && in->n_operands == 2 + os->rank && us->rank == os->rank && index_calc_type(it, max_dim(os), &ct))
        rc.splittable |= 1u << FACTOR_PERMUTATION;
    if (!part_rule_choose(p, &rc, NULL, NULL, &ch))
        return part_default(p, i);
    uint64_t moved = 0;
    for (int32_t f = 0; f < r->n_factors; f++)
        if (r->factors[f].kind == FACTOR_PERMUTATION)
            moved |= (uint64_t)1 << f;
    if (!splits_any(&ch.fs, moved))
        return part_rule_emit(p, &rc, &ch);
    int32_t *ops = ARENA_ARRAY(p->scratch, int32_t, in->n_operands);
    if (part_rule_operands(p, &rc, &ch, ops) < 0)
        return false;
    Tiling *leaves = part_result_leaves(p, &rc, &ch);
    Shape ol = part_local_shape(p, in->shape, leaves);
    int64_t lo[SPMDC_MAX_RANK] = {0};
    int32_t starts[SPMDC_MAX_RANK], mask = -1;
    for (int32_t d = 0; d < os->rank; d++) {
        if (us->dims[d] == os->dims[d]) {
            starts[d] = int_scalar(p, ct, 0, in->name);
            continue;
        }
        /* global start clamped as XLA does; the update shifted into this
         * shard (padded by the shard size c on both sides), and the shard's
         * positions it covers */
        int64_t c;
        int32_t f = dim_factor(r, t0, d);
        int32_t off = factor_offset(p, &ch.fs, f, os->dims[d], &c, in->name);
        off = off >= 0 ? convert_to(p, off, ct, in->name) : int_scalar(p, ct, 0, in->name);
        int32_t st = clamp3(p, int_scalar(p, ct, 0, in->name), convert_to(p, ops[2 + d], ct, in->name),
                            int_scalar(p, ct, os->dims[d] - us->dims[d], in->name), in->name);
        int32_t sh = binop(p, HLO_SUBTRACT, int_scalar(p, ct, c, in->name), st, in->name, "shift");
        starts[d] = binop(p, HLO_ADD, sh, off, in->name, "update-start");
        lo[d] = c;
        Shape vs = shape_array(ct, 1, &c);
        int32_t pos = emit_as(p, HLO_IOTA, in->name, "iota", &vs, NULL, 0);
        hlo_attrs_mut(p->out, part_out(p, pos))->iota_dimension = 0;
        pos = binop(p, HLO_ADD, pos, bcast(p, off, &vs, NULL, 0, in->name), in->name, "position");
        int32_t end = binop(p, HLO_ADD, st, int_scalar(p, ct, us->dims[d], in->name), in->name, "end");
        int32_t m = binop(p, HLO_AND, compare(p, pos, bcast(p, st, &vs, NULL, 0, in->name), CMP_GE, in->name),
                          compare(p, pos, bcast(p, end, &vs, NULL, 0, in->name), CMP_LT, in->name), in->name,
                          "covered");
        int64_t dd = d;
        m = bcast(p, m, &ol, &dd, 1, in->name);
        mask = mask < 0 ? m : binop(p, HLO_AND, mask, m, in->name, "covered");
    }
    Shape zs = shape_scalar(us->type);
    int32_t zero = part_identity(p, REDUCE_SUM, &zs, in->name);
    int32_t upd = dyn_slice(p, pad_with(p, ops[1], zero, lo, lo, in->name), starts, &ol,
                            part_name(p, in->name, "update-shifted"));
    int32_t sel[3] = {mask, upd, ops[0]};
    int32_t res = part_emit(p, HLO_SELECT, part_result_name(p, i, leaves, "local"), &ol, sel, 3);
    part_out(p, res)->span = in->span;
    part_rule_result(p, &rc, &ch, res);
    return true;
}

/* ================================================================ candidates of every shard */

/* Per-device bytes of an array of the given local shape. */
static int64_t local_bytes(const Shape *s) { return shape_byte_size(s); }

/* all-gather of v along dim over atoms[0..n) (one report row, caused by
 * instruction i, in words `why`). */
static int32_t all_gather(Part *p, int32_t v, int64_t dim, const int8_t *atoms, int32_t n, int32_t i,
                          const char *why, const char *base)
{
    Shape s = shape_of(p, v);
    int64_t before = local_bytes(&s), g = 1;
    for (int32_t k = 0; k < n; k++)
        g *= p->mesh->atom_size[atoms[k]];
    s.dims[dim] *= g;
    int32_t r = emit_as(p, HLO_ALL_GATHER, base, "all-gather", &s, &v, 1);
    HloAttrs *a = hlo_attrs_mut(p->out, part_out(p, r));
    a->channel_id = p->mod->next_channel++;
    a->replica_groups = part_groups(p, atoms, n);
    a->use_global_device_ids = true;
    a->dimensions = hlo_intlist(p->out, &dim, 1);
    part_record(p, COLL_ALL_GATHER, r, atoms, n, comm_bytes_per_device(COLL_ALL_GATHER, g, before, local_bytes(&s)),
                i, why);
    return r;
}

static int64_t all_gather_bytes(const Mesh *m, const Shape *local, int64_t dim, const int8_t *atoms, int32_t n)
{
    int64_t g = 1;
    for (int32_t k = 0; k < n; k++)
        g *= m->atom_size[atoms[k]];
    Shape after = *local;
    after.dims[dim] *= g;
    return comm_bytes_per_device(COLL_ALL_GATHER, g, local_bytes(local), local_bytes(&after));
}

static int32_t get_element(Part *p, int32_t t, int64_t k, const char *base)
{
    Shape s = shape_of(p, t).elems[k];
    int32_t r = emit_as(p, HLO_GET_TUPLE_ELEMENT, base, "element", &s, &t, 1);
    hlo_attrs_mut(p->out, part_out(p, r))->index = k;
    return r;
}

static Shape tuple_shape(Part *p, const Shape *elems, int32_t n)
{
    Shape s;
    memset(&s, 0, sizeof s);
    s.type = ET_TUPLE;
    s.n_elems = n;
    s.elems = ARENA_ARRAY(p->out->arena, Shape, n);
    memcpy(s.elems, elems, sizeof(Shape) * (size_t)n);
    return s;
}

/* "x: the candidates of every shard of dim 1 of x sharded on 'd0'
 * (annotated, line 3)" */
static const char *candidates_reason(Part *p, int32_t i, const Tiling *w, const int64_t *dims, int32_t nd,
                                     const char *what)
{
    StrBuf b = {0}, t = {0};
    sb_printf(&b, "%s: %s of every shard", part_in(p, i)->name, what);
    if (part_put_split_dims(p, &t, i, 0, w, dims, nd, "", true))
        sb_printf(&b, " (%s)", sb_cstr(&t));
    const char *r = arena_strdup(p->scratch, sb_cstr(&b));
    sb_free(&b);
    sb_free(&t);
    return r;
}

/* ================================================================ topk */

bool part_topk(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    RuleCtx rc;
    RuleChoice ch;
    if (!part_rule_init(p, i, &rc))
        return part_default(p, i);
    rc.move_whole = true; /* the local topk runs on any split of the batch dims */
    bool have = part_rule_choose(p, &rc, NULL, NULL, &ch);
    const OpRule *r = &rc.rule;
    int32_t t0 = oprule_operand_tensor(r, 0);
    const Shape *xs = part_in(p, in->operands[0])->shape, *rs = in->shape;
    if (t0 < 0 || !shape_is_tuple(rs) || rs->n_elems != 2 || xs->rank < 1 || rs->elems[0].rank != xs->rank)
        return have ? part_rule_emit(p, &rc, &ch) : part_default(p, i);
    int32_t last = xs->rank - 1, na;
    Tiling w = tiling_strip_partial(rc.cur[t0]);
    int64_t k = rs->elems[0].dims[last], n = xs->dims[last], t = tiling_dim_tiles(&w, p->mesh, last);
    int64_t c = n / t;
    na = tiling_dim_n(&w, last);
    if (na == 0 || n % t != 0 || k > c || !tiling_is_even(&w, p->mesh, xs, NULL))
        return have ? part_rule_emit(p, &rc, &ch) : part_default(p, i);
    /* local topk per shard, all-gather of the k candidates, final topk */
    const int8_t *atoms = tiling_dim(&w, last);
    Tiling res = tiling_clear_dims(w, 1u << last);
    Tiling leaves[2] = {res, res};
    Shape xl = tiling_local_shape(&w, p->mesh, xs);
    Shape lv = xl, li = xl;
    lv.dims[last] = li.dims[last] = k;
    li.type = ET_S32;
    int64_t cost = part_cost(p, in->operands[0], &w);
    cost += all_gather_bytes(p->mesh, &lv, last, atoms, na) + all_gather_bytes(p->mesh, &li, last, atoms, na);
    const Tiling *decl = part_decl_leaves(p, i);
    for (int32_t l = 0; l < 2 && cost < PART_INF_COST; l++)
        if (part_leaf_read(p, i, l))
            cost += part_reshard_cost(p, &rs->elems[l], &leaves[l], &decl[l]);
    if (have && ch.bytes < cost) /* a tie: the candidates (the operand is not gathered whole) */
        return part_rule_emit(p, &rc, &ch);
    if (cost >= PART_INF_COST)
        return part_default(p, i);
    int32_t x = part_operand(p, i, 0, &w);
    if (x < 0)
        return false;
    const char *nm = in->name;
    Shape le[2] = {lv, li};
    Shape lt = tuple_shape(p, le, 2);
    int32_t loc = part_clone(p, i, part_name(p, nm, "local-topk"), &lt, &x, 1);
    int32_t vals = get_element(p, loc, 0, nm), idx = get_element(p, loc, 1, nm);
    int32_t off = part_offset(p, atoms, na, c, nm);
    idx = binop(p, HLO_ADD, idx, bcast(p, off, &li, NULL, 0, nm), nm, "global-indices");
    int64_t ld = last;
    const char *why = candidates_reason(p, i, &w, &ld, 1, "the top-k candidates");
    int32_t av = all_gather(p, vals, last, atoms, na, i, why, nm);
    int32_t ai = all_gather(p, idx, last, atoms, na, i, why, nm);
    int32_t fin = part_clone(p, i, part_name(p, nm, "candidates-topk"), &lt, &av, 1);
    int32_t fv = get_element(p, fin, 0, nm), pos = get_element(p, fin, 1, nm);
    /* the global index of each pick: take_along_axis(candidate indices, pos) */
    int64_t batch[SPMDC_MAX_RANK], ones[SPMDC_MAX_RANK], cd = last;
    for (int32_t d = 0; d < xs->rank; d++) {
        batch[d] = d;
        ones[d] = 1;
    }
    int32_t gops[2] = {ai, pos};
    int32_t fi = emit_as(p, HLO_GATHER, nm, "indices", &li, gops, 2);
    HloAttrs *ga = hlo_attrs_mut(p->out, part_out(p, fi));
    ga->offset_dims = hlo_intlist(p->out, NULL, 0);
    ga->collapsed_slice_dims = hlo_intlist(p->out, &cd, 1);
    ga->start_index_map = hlo_intlist(p->out, &cd, 1);
    ga->operand_batching_dims = hlo_intlist(p->out, batch, last);
    ga->start_indices_batching_dims = hlo_intlist(p->out, batch, last);
    ga->index_vector_dim = xs->rank;
    ga->slice_sizes = hlo_intlist(p->out, ones, xs->rank);
    int32_t tops[2] = {fv, fi};
    int32_t res_t = part_emit(p, HLO_TUPLE, part_result_name(p, i, leaves, "local"), &lt, tops, 2);
    part_out(p, res_t)->span = in->span;
    part_set_result(p, i, res_t, leaves, -1, NULL);
    return true;
}

/* ================================================================ variadic reduce */

/* all-reduce of v over atoms[0..n) with reduction k (one report row). */
static int32_t all_reduce(Part *p, int32_t v, ReduceKind k, const int8_t *atoms, int32_t n, int32_t i,
                          const char *why, const char *base)
{
    Shape s = shape_of(p, v);
    int64_t g = 1;
    for (int32_t j = 0; j < n; j++)
        g *= p->mesh->atom_size[atoms[j]];
    int32_t r = emit_as(p, HLO_ALL_REDUCE, base, "all-reduce", &s, &v, 1);
    HloAttrs *a = hlo_attrs_mut(p->out, part_out(p, r));
    a->channel_id = p->mod->next_channel++;
    a->replica_groups = part_groups(p, atoms, n);
    a->use_global_device_ids = true;
    a->to_apply = part_reducer(p, k, s.type);
    int64_t b = local_bytes(&s);
    part_record(p, COLL_ALL_REDUCE, r, atoms, n, comm_bytes_per_device(COLL_ALL_REDUCE, g, b, b), i, why);
    return r;
}

/* Input k (local x, state w) of variadic reduce i with the padding of its
 * unevenly split reduced dims replaced by its init value (local scalar
 * init): every shard then reduces real elements and init values only, the
 * same as the even case's per-shard reduce, which starts from the init
 * value too (an argmax pair's padding becomes (-inf, init index): it never
 * wins over a real element and ties as the init value itself does). */
static int32_t mask_reduced_padding(Part *p, int32_t i, int32_t k, const Tiling *w, int32_t x, int32_t init)
{
    const HloInst *in = part_in(p, i);
    const HloAttrs *a = hlo_attrs(in);
    const HloInst *v = part_in(p, in->operands[k]);
    uint32_t red = 0;
    for (int32_t j = 0; j < a->dimensions.n; j++)
        if (a->dimensions.v[j] >= 0 && a->dimensions.v[j] < v->shape->rank)
            red |= 1u << a->dimensions.v[j];
    return part_mask_padding(p, x, w, v->shape, red, init, part_name(p, v->name, "unpadded"));
}

/* An argmax (arg = REDUCE_MAX) / argmin pair over split dims: each shard's
 * (value, index) pick, the extreme value all-reduced, then the smallest
 * index among the picks that hold it all-reduced.  Float values: a NaN pick
 * wins (the reducer says so) but an all-reduce need not propagate NaN
 * (XLA:CPU's does not), so the NaN picks leave the value all-reduce (as the
 * reduction's identity) and rank first in the index all-reduce, which runs
 * in s64: a NaN pick's index as it is, a pick holding the extreme 2^33
 * above it, INT64_MAX otherwise; the smallest tells whether any shard saw
 * a NaN and which index is meant. */
#define ARG_HIT_OFFSET ((int64_t)1 << 33)

static bool reduce_arg_by_all_reduce(Part *p, int32_t i, const Tiling *w, const Tiling *leaves, const Shape *kept,
                                     const int8_t *atoms, int32_t na, const int64_t *dims, int32_t nd, ReduceKind arg)
{
    const HloInst *in = part_in(p, i);
    const char *nm = in->name;
    int32_t ops[4];
    for (int32_t k = 0; k < 4; k++) {
        Tiling rep;
        tiling_replicated(&rep, part_in(p, in->operands[k])->shape->rank);
        if ((ops[k] = part_operand(p, i, k, k < 2 ? w : &rep)) < 0)
            return false;
    }
    for (int32_t k = 0; k < 2; k++)
        ops[k] = mask_reduced_padding(p, i, k, w, ops[k], ops[2 + k]);
    Shape ls = tuple_shape(p, kept, 2);
    int32_t loc = part_clone(p, i, part_name(p, nm, "local-reduce"), &ls, ops, 4);
    int32_t v = get_element(p, loc, 0, nm), ix = get_element(p, loc, 1, nm);
    const char *why = candidates_reason(p, i, w, dims, nd, arg == REDUCE_MAX ? "the maxima" : "the minima");
    const char *why2 = candidates_reason(p, i, w, dims, nd, "the smallest index of the extreme");
    int32_t res[2];
    if (!elem_type_is_float(kept[0].type)) {
        int32_t m = all_reduce(p, v, arg, atoms, na, i, why, nm);
        int32_t sel[3] = {compare(p, v, m, CMP_EQ, nm), ix, part_identity(p, REDUCE_MIN, &kept[1], nm)};
        int32_t cand = emit_as(p, HLO_SELECT, nm, "index-candidate", &kept[1], sel, 3);
        res[0] = m;
        res[1] = all_reduce(p, cand, REDUCE_MIN, atoms, na, i, why2, nm);
    } else {
        int32_t nan = compare(p, v, v, CMP_NE, nm);
        int32_t s0[3] = {nan, part_identity(p, arg, &kept[0], nm), v};
        int32_t vn = emit_as(p, HLO_SELECT, nm, "numbers", &kept[0], s0, 3);
        int32_t m = all_reduce(p, vn, arg, atoms, na, i, why, nm);
        Shape l64 = kept[1];
        l64.type = ET_S64;
        int64_t none = INT64_MAX;
        int32_t i64 = convert_to(p, ix, ET_S64, nm);
        int32_t hit = binop(p, HLO_ADD, i64, bcast(p, int_scalar(p, ET_S64, ARG_HIT_OFFSET, nm), &l64, NULL, 0, nm), nm,
                            "hit-key");
        int32_t s1[3] = {binop(p, HLO_AND, compare(p, v, m, CMP_EQ, nm), unop(p, HLO_NOT, nan, nm, "number"), nm,
                               "holds-extreme"),
                         hit, bcast(p, int_scalar(p, ET_S64, none, nm), &l64, NULL, 0, nm)};
        int32_t k1 = emit_as(p, HLO_SELECT, nm, "index-key", &l64, s1, 3);
        int32_t s2[3] = {nan, i64, k1};
        int32_t key = emit_as(p, HLO_SELECT, nm, "index-key", &l64, s2, 3);
        int32_t r = all_reduce(p, key, REDUCE_MIN, atoms, na, i, why2, nm);
        int32_t any_nan = compare(p, r, bcast(p, int_scalar(p, ET_S64, (int64_t)1 << 32, nm), &l64, NULL, 0, nm),
                                  CMP_LT, nm);
        int32_t s3[3] = {any_nan, r,
                         binop(p, HLO_SUBTRACT, r, bcast(p, int_scalar(p, ET_S64, ARG_HIT_OFFSET, nm), &l64, NULL, 0, nm),
                               nm, "index")};
        int32_t idx = emit_as(p, HLO_SELECT, nm, "index", &l64, s3, 3);
        res[1] = convert_to(p, idx, kept[1].type, nm);
        Shape sc = shape_scalar(kept[0].type);
        int32_t qn = part_emit(p, HLO_CONSTANT, part_name(p, nm, "nan"), &sc, NULL, 0);
        Literal *lit = ARENA_NEW(p->out->arena, Literal);
        lit->n = 1;
        lit->f = ARENA_ARRAY(p->out->arena, double, 2);
        lit->f[0] = NAN;
        hlo_attrs_mut(p->out, part_out(p, qn))->literal = lit;
        int32_t s4[3] = {any_nan, bcast(p, qn, &kept[0], NULL, 0, nm), m};
        res[0] = emit_as(p, HLO_SELECT, nm, "value", &kept[0], s4, 3);
    }
    int32_t r = part_emit(p, HLO_TUPLE, part_result_name(p, i, leaves, "local"), &ls, res, 2);
    part_out(p, r)->span = in->span;
    part_set_result(p, i, r, leaves, -1, NULL);
    return true;
}

bool part_reduce(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    const HloAttrs *a = hlo_attrs(in);
    int32_t n = in->n_operands / 2;
    if (n < 1 || reducer_kind(p->in, a->to_apply) != REDUCE_NONE || !reducer_is_selection(p->in, a->to_apply, n))
        return part_by_rule(p, i);
    RuleCtx rc;
    RuleChoice ch;
    if (!part_rule_init(p, i, &rc))
        return part_default(p, i);
    bool have = part_rule_choose(p, &rc, NULL, NULL, &ch);
    int32_t t0 = oprule_operand_tensor(&rc.rule, 0);
    const Shape *xs = part_in(p, in->operands[0])->shape;
    if (t0 < 0)
        return have ? part_rule_emit(p, &rc, &ch) : part_default(p, i);
    /* the inputs stay as input 0 is (its pending reduction closed); the
     * split reduced dims' atoms, major dim first, collect the candidates */
    Tiling w = tiling_strip_partial(rc.cur[t0]), res;
    uint32_t red = 0;
    for (int32_t k = 0; k < a->dimensions.n; k++)
        if (a->dimensions.v[k] >= 0 && a->dimensions.v[k] < xs->rank)
            red |= 1u << a->dimensions.v[k];
    int8_t atoms[SPMDC_MAX_ATOMS];
    int32_t na = 0, kr = 0;
    int64_t dims[SPMDC_MAX_RANK];
    int32_t nd = 0;
    tiling_replicated(&res, xs->rank - __builtin_popcount(red));
    for (int32_t d = 0; d < xs->rank; d++) {
        if ((red >> d) & 1u) {
            if (tiling_dim_n(&w, d))
                dims[nd++] = d;
            memcpy(atoms + na, tiling_dim(&w, d), (size_t)tiling_dim_n(&w, d));
            na += tiling_dim_n(&w, d);
        } else if (kr < res.rank) {
            tiling_set_dim(&res, kr++, tiling_dim(&w, d), tiling_dim_n(&w, d));
        }
    }
    if (na == 0)
        return have ? part_rule_emit(p, &rc, &ch) : part_default(p, i);
    Tiling *leaves = ARENA_ARRAY(p->scratch, Tiling, n);
    const Tiling *decl = part_decl_leaves(p, i);
    int64_t cost = 0;
    for (int32_t k = 0; k < n && cost < PART_INF_COST; k++)
        cost += part_cost(p, in->operands[k], &w);
    Shape *cand = ARENA_ARRAY(p->scratch, Shape, n), *kept = ARENA_ARRAY(p->scratch, Shape, n);
    for (int32_t l = 0; l < n && cost < PART_INF_COST; l++) {
        const Shape *ls = shape_is_tuple(in->shape) ? &in->shape->elems[l] : in->shape;
        leaves[l] = res;
        kept[l] = tiling_local_shape(&res, p->mesh, ls);
        cand[l] = kept[l];
        cand[l].dims[cand[l].rank++] = 1;
        cost += all_gather_bytes(p->mesh, &cand[l], cand[l].rank - 1, atoms, na);
        if (part_leaf_read(p, i, l))
            cost += part_reshard_cost(p, ls, &res, &decl[l]);
    }
    /* an argmax / argmin pair may instead be finished by two all-reduces:
     * the extreme value, then the smallest index that holds it */
    ReduceKind arg = n == 2 ? reducer_arg_kind(p->in, a->to_apply) : REDUCE_NONE;
    if (arg != REDUCE_NONE && (!elem_type_is_integral(kept[1].type) || kept[0].rank != kept[1].rank ||
                               memcmp(kept[0].dims, kept[1].dims, sizeof(int64_t) * (size_t)kept[0].rank) != 0 ||
                               elem_type_is_complex(kept[0].type) ||
                               (elem_type_is_float(kept[0].type) && elem_type_bits(kept[1].type) > 32)))
        arg = REDUCE_NONE;
    int64_t ar_cost = PART_INF_COST;
    if (arg != REDUCE_NONE) {
        int64_t g = 1;
        for (int32_t k = 0; k < na; k++)
            g *= p->mesh->atom_size[atoms[k]];
        ar_cost = cost;
        for (int32_t l = 0; l < n; l++) {
            ar_cost -= all_gather_bytes(p->mesh, &cand[l], cand[l].rank - 1, atoms, na);
            Shape k = kept[l];
            if (l == 1 && elem_type_is_float(kept[0].type))
                k.type = ET_S64; /* the index all-reduce's keys */
            int64_t b = local_bytes(&k);
            ar_cost += comm_bytes_per_device(COLL_ALL_REDUCE, g, b, b);
        }
    }
    bool by_ar = ar_cost < cost;
    if (by_ar)
        cost = ar_cost;
    if ((have && ch.bytes < cost) || cost >= PART_INF_COST || kept[0].rank + 1 > SPMDC_MAX_RANK)
        return have ? part_rule_emit(p, &rc, &ch) : part_default(p, i);
    if (by_ar)
        return reduce_arg_by_all_reduce(p, i, &w, leaves, kept, atoms, na, dims, nd, arg);
    /* local reduce, one candidate per shard gathered, final reduce */
    const char *nm = in->name;
    int32_t *ops = ARENA_ARRAY(p->scratch, int32_t, 2 * n);
    for (int32_t k = 0; k < 2 * n; k++) {
        Tiling rep;
        tiling_replicated(&rep, part_in(p, in->operands[k])->shape->rank);
        if ((ops[k] = part_operand(p, i, k, k < n ? &w : &rep)) < 0)
            return false;
    }
    for (int32_t k = 0; k < n; k++)
        ops[k] = mask_reduced_padding(p, i, k, &w, ops[k], ops[n + k]);
    Shape ls = n == 1 ? kept[0] : tuple_shape(p, kept, n);
    int32_t loc = part_clone(p, i, part_name(p, nm, "local-reduce"), &ls, ops, 2 * n);
    const char *why = candidates_reason(p, i, &w, dims, nd, "the reduced candidates");
    for (int32_t l = 0; l < n; l++) {
        int32_t v = n == 1 ? loc : get_element(p, loc, l, nm);
        v = emit_as(p, HLO_RESHAPE, nm, "candidate", &cand[l], &v, 1);
        ops[l] = all_gather(p, v, cand[l].rank - 1, atoms, na, i, why, nm);
    }
    int32_t fin = part_emit(p, HLO_REDUCE, part_result_name(p, i, leaves, "local"), &ls, ops, 2 * n);
    HloAttrs *fa = hlo_attrs_mut(p->out, part_out(p, fin));
    int64_t cd = kept[0].rank;
    fa->dimensions = hlo_intlist(p->out, &cd, 1);
    fa->to_apply = p->mod->comp_map[a->to_apply];
    part_out(p, fin)->span = in->span;
    part_set_result(p, i, fin, leaves, -1, NULL);
    return true;
}

/* ================================================================ random numbers */

bool part_rng(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    RuleCtx rc;
    RuleChoice ch;
    if (!part_rule_init(p, i, &rc) || !part_rule_choose(p, &rc, NULL, NULL, &ch))
        return part_default(p, i);
    int32_t ops[2];
    if (in->n_operands != 2 || part_rule_operands(p, &rc, &ch, ops) < 0)
        return in->n_operands == 2 ? false : part_default(p, i);
    /* every device draws its own tile; where several hold the same tile
     * (the atoms the result is not split on) only the group's first one's
     * draw counts: the others hold zero, a pending sum that the consumer
     * closes (a broadcast within the group, as XLA does) */
    Tiling st = ch.res[0];
    uint32_t all = ((uint32_t)1 << p->mesh->n_atoms) - 1u, rep = all & ~tiling_used(&st);
    Shape l = tiling_local_shape(&st, p->mesh, in->shape);
    int32_t r = part_clone(p, i, rep ? part_name(p, in->name, "draw") : part_result_name(p, i, &st, "local"), &l,
                           ops, 2);
    if (!rep) {
        part_set_result(p, i, r, &st, -1, NULL);
        return true;
    }
    int8_t atoms[SPMDC_MAX_ATOMS];
    int32_t na = 0;
    for (int32_t a = 0; a < p->mesh->n_atoms; a++)
        if ((rep >> a) & 1u)
            atoms[na++] = (int8_t)a;
    int32_t first = part_first_in_group(p, atoms, na, in->name);
    Shape pl = shape_array(ET_PRED, l.rank, l.dims);
    int32_t fb = part_emit(p, HLO_BROADCAST, part_name(p, in->name, "first-broadcast"), &pl, &first, 1);
    int32_t sel[3] = {fb, r, part_identity(p, REDUCE_SUM, &l, in->name)};
    int32_t m = part_emit(p, HLO_SELECT, part_name(p, in->name, "partial"), &l, sel, 3);
    st.partial = rep;
    st.kind = REDUCE_SUM;
    const char *why = NULL;
    if (p->rep) {
        StrBuf b = {0};
        sb_printf(&b, "%s: the draws of each group's first device (rng values are per device)", in->name);
        why = arena_strdup(p->scratch, sb_cstr(&b));
        sb_free(&b);
    }
    part_set_result(p, i, m, &st, i, why);
    return true;
}
