/* oprule.c - the registry of per-op sharding rules (factor model) and the
 * opcode algebra (see oprule.h and docs/op-rules.md).
 *
 * Every opcode has one entry in REG[]: a rule name, its class, and for
 * factor ops the builder that writes its factors.  A builder declares the
 * factors (size, kind) and, tensor by tensor, the factors of each dim; the
 * common helpers then flatten that into OpRule's arrays.  Builders only
 * describe; they never decide how an op is partitioned.
 */
#include "spmdc/oprule.h"

#include <math.h>
#include <string.h>

/* Factors one dim may list (a reshape dim splits into at most one factor
 * per dim of the other side, plus one). */
#define DIM_MAX_FACTORS (SPMDC_MAX_RANK + 2)

typedef struct Builder {
    const HloModule *m;
    const HloComputation *comp;
    const HloInst *in;
    const HloAttrs *a;
    OpRule *r;
    Arena *arena;
    int32_t cap_tensors;
    /* per tensor dim, its factor list while building */
    int8_t (*lst)[SPMDC_MAX_RANK][DIM_MAX_FACTORS];
    uint8_t (*cnt)[SPMDC_MAX_RANK];
    bool ok;
} Builder;

const char *factor_kind_name(FactorKind k)
{
    switch (k) {
    case FACTOR_PASS: return "pass-through";
    case FACTOR_REDUCTION: return "reduction";
    case FACTOR_NEED_REPLICATION: return "need-replication";
    case FACTOR_PERMUTATION: return "permutation";
    case FACTOR_WINDOW: return "window";
    }
    return "?";
}

/* ================================================================ builder helpers */

static const Shape *opshape(const Builder *b, int32_t k) { return b->comp->insts[b->in->operands[k]].shape; }

static int32_t new_factor(Builder *b, int64_t size, FactorKind kind, ReduceKind red)
{
    OpRule *r = b->r;
    if (r->n_factors >= OPRULE_MAX_FACTORS) {
        b->ok = false;
        return 0;
    }
    Factor *f = &r->factors[r->n_factors];
    f->size = size;
    f->kind = (uint8_t)kind;
    f->reduce = (uint8_t)red;
    return r->n_factors++;
}

/* Adds a tensor for an array of shape s; returns its index. */
static int32_t add_tensor(Builder *b, int32_t slot, int32_t leaf, const Shape *s)
{
    OpRule *r = b->r;
    int32_t k = r->n_in + r->n_out;
    if (k >= b->cap_tensors || !shape_is_array(s)) {
        b->ok = false;
        return 0;
    }
    RuleTensor *t = &r->t[k];
    t->slot = slot;
    t->leaf = leaf;
    t->rank = s->rank;
    t->shape = s->dims;
    if (slot >= 0)
        r->n_in++;
    else
        r->n_out++;
    return k;
}

static int32_t add_operand(Builder *b, int32_t slot) { return add_tensor(b, slot, 0, opshape(b, slot)); }

/* Appends factor f to tensor k's dim d (minor to what is there). */
static void dim_add(Builder *b, int32_t k, int32_t d, int32_t f)
{
    if (d < 0 || d >= b->r->t[k].rank || b->cnt[k][d] >= DIM_MAX_FACTORS) {
        b->ok = false;
        return;
    }
    b->lst[k][d][b->cnt[k][d]++] = (int8_t)f;
}

/* Tensor k's dim d gets a factor of its own (size = the dim) of kind kind. */
static int32_t dim_own(Builder *b, int32_t k, int32_t d, FactorKind kind)
{
    int32_t f = new_factor(b, b->r->t[k].shape[d], kind, REDUCE_NONE);
    dim_add(b, k, d, f);
    return f;
}

/* Every dim of tensor k gets its own PASS factor; returns the first id. */
static int32_t dims_own(Builder *b, int32_t k)
{
    int32_t first = b->r->n_factors;
    for (int32_t d = 0; d < b->r->t[k].rank; d++)
        dim_own(b, k, d, FACTOR_PASS);
    return first;
}

/* Tensor k maps dim d to factor first + d for every dim (same-shape tensors). */
static void dims_same(Builder *b, int32_t k, int32_t first)
{
    for (int32_t d = 0; d < b->r->t[k].rank; d++)
        dim_add(b, k, d, first + d);
}

/* Leaf l of the result shape (arrays: itself). */
static const Shape *result_leaf(const Builder *b, int32_t l)
{
    const Shape *s = b->in->shape;
    if (!shape_is_tuple(s))
        return l == 0 ? s : NULL;
    if (l >= s->n_elems || shape_is_tuple(&s->elems[l]))
        return NULL;
    return &s->elems[l];
}

static int32_t n_result_leaves(const Builder *b)
{
    return shape_is_tuple(b->in->shape) ? b->in->shape->n_elems : 1;
}

/* ================================================================ builders */

typedef bool (*BuildFn)(Builder *b);

/* Elementwise: result dims are PASS factors; array operands of the result's
 * rank map dim to dim, scalar operands (clamp's bounds) map nothing. */
static bool b_elementwise(Builder *b)
{
    const Shape *rs = result_leaf(b, 0);
    if (!rs || n_result_leaves(b) != 1)
        return false;
    int32_t first = b->r->n_factors;
    for (int32_t d = 0; d < rs->rank; d++)
        new_factor(b, rs->dims[d], FACTOR_PASS, REDUCE_NONE);
    for (int32_t k = 0; k < b->in->n_operands; k++) {
        const Shape *os = opshape(b, k);
        if (!shape_is_array(os))
            return false;
        int32_t t = add_operand(b, k);
        if (os->rank == 0)
            continue;
        if (!shape_same_dims(os, rs))
            return false;
        dims_same(b, t, first);
    }
    dims_same(b, add_tensor(b, -1, 0, rs), first);
    return true;
}

/* bitcast-convert: same width is elementwise; a narrowing result has an
 * extra minor dim, a widening one loses the operand's minor dim (that dim
 * must stay whole). */
static bool b_bitcast_convert(Builder *b)
{
    const Shape *os = opshape(b, 0), *rs = b->in->shape;
    if (!shape_is_array(os) || !shape_is_array(rs))
        return false;
    if (os->rank == rs->rank)
        return b_elementwise(b);
    int32_t t0 = add_operand(b, 0), t1 = add_tensor(b, -1, 0, rs);
    int32_t common = os->rank < rs->rank ? os->rank : rs->rank;
    for (int32_t d = 0; d < common; d++) {
        int32_t f = new_factor(b, rs->dims[d], FACTOR_PASS, REDUCE_NONE);
        dim_add(b, t0, d, f);
        dim_add(b, t1, d, f);
    }
    if (os->rank > common)
        dim_own(b, t0, common, FACTOR_NEED_REPLICATION);
    if (rs->rank > common)
        dim_own(b, t1, common, FACTOR_NEED_REPLICATION);
    return true;
}

/* broadcast: operand dim d is output dim dims[d] (a size-1 operand dim that
 * is stretched gets a size-1 factor of its own); other output dims are
 * factors of the output only. */
static bool b_broadcast(Builder *b)
{
    const Shape *os = opshape(b, 0), *rs = b->in->shape;
    const IntList *dims = &b->a->dimensions;
    if (!shape_is_array(os) || !shape_is_array(rs) || dims->n != os->rank)
        return false;
    int32_t t0 = add_operand(b, 0), t1 = add_tensor(b, -1, 0, rs);
    int32_t first = dims_own(b, t1);
    uint32_t seen = 0;
    for (int32_t d = 0; d < os->rank; d++) {
        int64_t j = dims->v[d];
        if (j < 0 || j >= rs->rank || ((seen >> j) & 1u))
            return false;
        seen |= 1u << j;
        if (os->dims[d] == rs->dims[j])
            dim_add(b, t0, d, first + (int32_t)j);
        else
            dim_own(b, t0, d, FACTOR_PASS);
    }
    return true;
}

static bool b_transpose(Builder *b)
{
    const Shape *os = opshape(b, 0), *rs = b->in->shape;
    const IntList *perm = &b->a->dimensions;
    if (!shape_is_array(os) || !shape_is_array(rs) || perm->n != os->rank || os->rank != rs->rank)
        return false;
    int32_t t0 = add_operand(b, 0), t1 = add_tensor(b, -1, 0, rs);
    int32_t first = dims_own(b, t0);
    uint32_t seen = 0;
    for (int32_t k = 0; k < rs->rank; k++) {
        int64_t d = perm->v[k];
        if (d < 0 || d >= os->rank || os->dims[d] != rs->dims[k] || ((seen >> d) & 1u))
            return false;
        seen |= 1u << d;
        dim_add(b, t1, k, first + (int32_t)d);
    }
    return true;
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

/* reshape: walk both dim lists major to minor, cutting common factors:
 * equal remainders are one factor; when one divides the other the smaller
 * is a factor of both; otherwise a gcd > 1 is cut off both.  When the
 * remainders are coprime the rest of the group (up to the next point where
 * both sides' element counts agree) cannot be split: each of its dims gets
 * a need-replication factor of its own. */
static bool b_reshape(Builder *b)
{
    const Shape *os = opshape(b, 0), *rs = b->in->shape;
    if (!shape_is_array(os) || !shape_is_array(rs) || shape_elem_count(os) != shape_elem_count(rs))
        return false;
    int32_t t0 = add_operand(b, 0), t1 = add_tensor(b, -1, 0, rs);
    int32_t i = 0, j = 0;
    int64_t si = os->rank ? os->dims[0] : 1, sj = rs->rank ? rs->dims[0] : 1;
    while (i < os->rank || j < rs->rank) {
        if (i < os->rank && si == 1) { /* dim done (or a size-1 dim) */
            if (b->cnt[t0][i] == 0)
                dim_own(b, t0, i, FACTOR_PASS);
            if (++i < os->rank)
                si = os->dims[i];
            continue;
        }
        if (j < rs->rank && sj == 1) {
            if (b->cnt[t1][j] == 0)
                dim_own(b, t1, j, FACTOR_PASS);
            if (++j < rs->rank)
                sj = rs->dims[j];
            continue;
        }
        if (i >= os->rank || j >= rs->rank)
            return false; /* element counts differ: cannot happen after the check above */
        int64_t g = si == sj ? si : si % sj == 0 ? sj : sj % si == 0 ? si : gcd64(si, sj);
        if (g > 1) {
            int32_t f = new_factor(b, g, FACTOR_PASS, REDUCE_NONE);
            dim_add(b, t0, i, f);
            dim_add(b, t1, j, f);
            si /= g;
            sj /= g;
            continue;
        }
        /* coprime remainders: the group up to the next common boundary stays whole */
        int64_t pi = si, pj = sj; /* prefix products: at most the element count */
        int32_t i1 = i + 1, j1 = j + 1;
        while (pi != pj) {
            if (pi < pj && i1 < os->rank)
                pi *= os->dims[i1++];
            else if (pj < pi && j1 < rs->rank)
                pj *= rs->dims[j1++];
            else
                return false;
        }
        new_factor(b, si, FACTOR_NEED_REPLICATION, REDUCE_NONE);
        dim_add(b, t0, i, b->r->n_factors - 1);
        for (int32_t d = i + 1; d < i1; d++)
            dim_own(b, t0, d, FACTOR_NEED_REPLICATION);
        new_factor(b, sj, FACTOR_NEED_REPLICATION, REDUCE_NONE);
        dim_add(b, t1, j, b->r->n_factors - 1);
        for (int32_t d = j + 1; d < j1; d++)
            dim_own(b, t1, d, FACTOR_NEED_REPLICATION);
        i = i1;
        j = j1;
        si = i < os->rank ? os->dims[i] : 1;
        sj = j < rs->rank ? rs->dims[j] : 1;
    }
    return b->ok;
}

/* Operand 0 and the result have the same rank; dims in `moved` get one
 * PERMUTATION factor shared by both (extents may differ), the others a PASS
 * factor.  Further array operands of the same shape as operand 0 (the
 * concatenated ones) share them too. */
static bool b_moving(Builder *b, uint32_t moved, int32_t n_data)
{
    const Shape *rs = b->in->shape, *os = opshape(b, 0);
    if (!shape_is_array(rs) || !shape_is_array(os) || os->rank != rs->rank)
        return false;
    int32_t first = b->r->n_factors;
    for (int32_t d = 0; d < rs->rank; d++) {
        bool mv = (moved >> d) & 1u;
        if (!mv && os->dims[d] != rs->dims[d])
            return false;
        new_factor(b, rs->dims[d], mv ? FACTOR_PERMUTATION : FACTOR_PASS, REDUCE_NONE);
    }
    for (int32_t k = 0; k < b->in->n_operands; k++) {
        int32_t t = add_operand(b, k);
        if (k < n_data) {
            const Shape *s = opshape(b, k);
            if (s->rank != rs->rank)
                return false;
            dims_same(b, t, first);
        } else if (opshape(b, k)->rank != 0) {
            return false;
        }
    }
    dims_same(b, add_tensor(b, -1, 0, rs), first);
    return true;
}

static uint32_t list_mask(const IntList *l)
{
    uint32_t m = 0;
    for (int32_t k = 0; k < l->n; k++)
        if (l->v[k] >= 0 && l->v[k] < 32)
            m |= 1u << l->v[k];
    return m;
}

static bool b_reverse(Builder *b) { return b_moving(b, list_mask(&b->a->dimensions), 1); }

static bool b_slice(Builder *b)
{
    const Shape *os = opshape(b, 0);
    const HloAttrs *a = b->a;
    uint32_t moved = 0;
    for (int32_t d = 0; d < os->rank; d++) {
        bool whole = d < a->slice_start.n && d < a->slice_limit.n && a->slice_start.v[d] == 0 &&
                     a->slice_limit.v[d] == os->dims[d] && (a->slice_stride.n <= d || a->slice_stride.v[d] == 1);
        if (!whole)
            moved |= 1u << d;
    }
    return b_moving(b, moved, 1);
}

static bool b_pad(Builder *b)
{
    const Shape *os = opshape(b, 0);
    const HloAttrs *a = b->a;
    uint32_t moved = 0;
    for (int32_t d = 0; d < os->rank; d++) {
        bool lo = d < a->pad_lo.n && a->pad_lo.v[d], hi = d < a->pad_hi.n && a->pad_hi.v[d];
        bool inner = d < a->pad_interior.n && a->pad_interior.v[d];
        if (lo || hi || inner)
            moved |= 1u << d;
    }
    return b_moving(b, moved, 1);
}

static bool b_concatenate(Builder *b)
{
    if (b->a->dimensions.n != 1)
        return false;
    return b_moving(b, list_mask(&b->a->dimensions), b->in->n_operands);
}

/* dynamic-slice(operand, starts...): dims taken whole are PASS; sliced dims
 * are one PERMUTATION factor of the operand and the result. */
static bool b_dynamic_slice(Builder *b)
{
    const Shape *os = opshape(b, 0), *rs = b->in->shape;
    if (!shape_is_array(os) || !shape_is_array(rs) || os->rank != rs->rank)
        return false;
    uint32_t moved = 0;
    for (int32_t d = 0; d < os->rank; d++)
        if (os->dims[d] != rs->dims[d])
            moved |= 1u << d;
    return b_moving(b, moved, 1);
}

/* dynamic-update-slice(operand, update, starts...): operand and result share
 * every factor; dims the update covers whole are PASS and shared with the
 * update; the others are PERMUTATION for operand and result, and the
 * update's dim must stay whole. */
static bool b_dynamic_update_slice(Builder *b)
{
    const Shape *os = opshape(b, 0), *us = opshape(b, 1), *rs = b->in->shape;
    if (!shape_is_array(os) || !shape_is_array(us) || !shape_same_dims(os, rs) || us->rank != os->rank)
        return false;
    int32_t t0 = add_operand(b, 0), t1 = add_operand(b, 1);
    int32_t first = b->r->n_factors;
    for (int32_t d = 0; d < os->rank; d++)
        new_factor(b, os->dims[d], us->dims[d] == os->dims[d] ? FACTOR_PASS : FACTOR_PERMUTATION, REDUCE_NONE);
    dims_same(b, t0, first);
    for (int32_t d = 0; d < os->rank; d++) {
        if (us->dims[d] == os->dims[d])
            dim_add(b, t1, d, first + d);
        else
            dim_own(b, t1, d, FACTOR_NEED_REPLICATION);
    }
    for (int32_t k = 2; k < b->in->n_operands; k++)
        add_operand(b, k);
    dims_same(b, add_tensor(b, -1, 0, rs), first);
    return true;
}

/* iota: the result's dims are PASS factors (a split iota dim is computed
 * locally with the shard's offset: a handler). */
static bool b_iota(Builder *b)
{
    if (!shape_is_array(b->in->shape))
        return false;
    dims_own(b, add_tensor(b, -1, 0, b->in->shape));
    return true;
}

/* rng(a, b) and friends: the result's dims are PASS factors, the scalar
 * operands map nothing. */
static bool b_generated(Builder *b)
{
    if (!shape_is_array(b->in->shape))
        return false;
    for (int32_t k = 0; k < b->in->n_operands; k++) {
        if (!shape_is_array(opshape(b, k)) || opshape(b, k)->rank != 0)
            return false;
        add_operand(b, k);
    }
    dims_own(b, add_tensor(b, -1, 0, b->in->shape));
    return true;
}

/* rng-bit-generator(state) -> (new state, bits): the state stays whole, the
 * bits' dims are PASS. */
static bool b_rng_bit_generator(Builder *b)
{
    const Shape *s0 = result_leaf(b, 0), *s1 = result_leaf(b, 1);
    if (!s0 || !s1 || !shape_is_array(opshape(b, 0)))
        return false;
    int32_t t0 = add_operand(b, 0), r0 = add_tensor(b, -1, 0, s0), r1 = add_tensor(b, -1, 1, s1);
    for (int32_t d = 0; d < b->r->t[t0].rank; d++)
        dim_own(b, t0, d, FACTOR_NEED_REPLICATION);
    for (int32_t d = 0; d < b->r->t[r0].rank; d++)
        dim_own(b, r0, d, FACTOR_NEED_REPLICATION);
    dims_own(b, r1);
    return true;
}

/* reduce(inputs..., inits...): inputs share every factor; kept dims are PASS
 * and the results' dims; reduced dims are REDUCTION factors with the
 * reducer's kind. */
static bool b_reduce(Builder *b)
{
    const HloInst *in = b->in;
    if (in->n_operands < 2 || in->n_operands % 2)
        return false;
    int32_t n = in->n_operands / 2;
    const Shape *is = opshape(b, 0);
    if (!shape_is_array(is) || n_result_leaves(b) != n)
        return false;
    uint32_t red = list_mask(&b->a->dimensions);
    ReduceKind kind = reducer_kind(b->m, b->a->to_apply);
    int32_t first = b->r->n_factors;
    for (int32_t d = 0; d < is->rank; d++)
        new_factor(b, is->dims[d], (red >> d) & 1u ? FACTOR_REDUCTION : FACTOR_PASS,
                   (red >> d) & 1u ? kind : REDUCE_NONE);
    for (int32_t k = 0; k < n; k++) {
        if (!shape_same_dims(opshape(b, k), is))
            return false;
        dims_same(b, add_operand(b, k), first);
    }
    for (int32_t k = n; k < 2 * n; k++)
        if (!shape_is_array(opshape(b, k)) || opshape(b, k)->rank != 0 || (add_operand(b, k), false))
            return false;
    for (int32_t l = 0; l < n; l++) {
        const Shape *os = result_leaf(b, l);
        if (!os)
            return false;
        int32_t t = add_tensor(b, -1, l, os), od = 0;
        for (int32_t d = 0; d < is->rank; d++) {
            if ((red >> d) & 1u)
                continue;
            if (od >= os->rank || os->dims[od] != is->dims[d])
                return false;
            dim_add(b, t, od++, first + d);
        }
        if (od != os->rank)
            return false;
    }
    return true;
}

static bool window_trivial(const WindowDim *w)
{
    return w->size == 1 && w->stride == 1 && w->pad_lo == 0 && w->pad_hi == 0 && w->lhs_dilate <= 1 &&
           w->rhs_dilate <= 1 && !w->reversal;
}

/* reduce-window(inputs..., inits...): inputs and results share factors; a
 * dim with a real window is a WINDOW factor (extents differ), else PASS. */
static bool b_reduce_window(Builder *b)
{
    const HloInst *in = b->in;
    const Window *w = b->a->window;
    if (in->n_operands < 2 || in->n_operands % 2 || !w)
        return false;
    int32_t n = in->n_operands / 2;
    const Shape *is = opshape(b, 0), *os0 = result_leaf(b, 0);
    if (!shape_is_array(is) || !os0 || n_result_leaves(b) != n || w->rank != is->rank || os0->rank != is->rank)
        return false;
    int32_t first = b->r->n_factors;
    for (int32_t d = 0; d < is->rank; d++)
        new_factor(b, os0->dims[d], window_trivial(&w->dims[d]) ? FACTOR_PASS : FACTOR_WINDOW, REDUCE_NONE);
    for (int32_t k = 0; k < n; k++) {
        if (!shape_same_dims(opshape(b, k), is))
            return false;
        dims_same(b, add_operand(b, k), first);
    }
    for (int32_t k = n; k < 2 * n; k++)
        add_operand(b, k);
    for (int32_t l = 0; l < n; l++) {
        const Shape *os = result_leaf(b, l);
        if (!os || !shape_same_dims(os, os0))
            return false;
        dims_same(b, add_tensor(b, -1, l, os), first);
    }
    return true;
}

/* select-and-scatter(operand, source, init): operand and result share the
 * factors; source (the window output) shares them too; real windows are
 * WINDOW factors. */
static bool b_select_and_scatter(Builder *b)
{
    const Window *w = b->a->window;
    const Shape *os = opshape(b, 0), *ss = opshape(b, 1), *rs = b->in->shape;
    if (!w || !shape_is_array(os) || !shape_is_array(ss) || !shape_same_dims(os, rs) || ss->rank != os->rank ||
        w->rank != os->rank)
        return false;
    int32_t first = b->r->n_factors;
    for (int32_t d = 0; d < os->rank; d++)
        new_factor(b, os->dims[d], window_trivial(&w->dims[d]) ? FACTOR_PASS : FACTOR_WINDOW, REDUCE_NONE);
    dims_same(b, add_operand(b, 0), first);
    dims_same(b, add_operand(b, 1), first);
    add_operand(b, 2);
    dims_same(b, add_tensor(b, -1, 0, rs), first);
    return true;
}

bool contraction_sums_in_result(ElemType res, ElemType lhs, ElemType rhs)
{
    if (res == ET_PRED) /* a nonzero test of the whole sum, not an OR of the pieces' tests */
        return lhs == ET_PRED && rhs == ET_PRED;
    if (elem_type_is_integral(res)) /* one truncation of the whole sum */
        return !elem_type_is_float(lhs) && !elem_type_is_complex(lhs) && !elem_type_is_float(rhs) &&
               !elem_type_is_complex(rhs);
    return true;
}

/* The factor kind of a dot's or convolution's contracting dims: a reduction
 * when the pieces' results sum to the whole result in its element type,
 * else each dim must be whole. */
static FactorKind contracting_kind(Builder *b)
{
    const Shape *ls = opshape(b, 0), *rs = opshape(b, 1);
    return contraction_sums_in_result(b->in->shape->type, ls->type, rs->type) ? FACTOR_REDUCTION
                                                                              : FACTOR_NEED_REPLICATION;
}

/* dot: batch and free dims PASS, contracting dims REDUCTION (sum; whole
 * when the result type does not carry the sum, contracting_kind).  Output
 * dims: batch (lhs_batch order), lhs free, rhs free. */
static bool b_dot(Builder *b)
{
    const HloAttrs *a = b->a;
    const Shape *ls = opshape(b, 0), *rs = opshape(b, 1), *os = b->in->shape;
    if (!shape_is_array(ls) || !shape_is_array(rs) || !shape_is_array(os) || a->lhs_batch.n != a->rhs_batch.n ||
        a->lhs_contracting.n != a->rhs_contracting.n)
        return false;
    int32_t tl = add_operand(b, 0), tr = add_operand(b, 1), to = add_tensor(b, -1, 0, os);
    uint32_t lused = 0, rused = 0;
    int32_t od = 0;
    for (int32_t k = 0; k < a->lhs_batch.n; k++) {
        int64_t dl = a->lhs_batch.v[k], dr = a->rhs_batch.v[k];
        if (dl < 0 || dl >= ls->rank || dr < 0 || dr >= rs->rank || od >= os->rank)
            return false;
        int32_t f = new_factor(b, ls->dims[dl], FACTOR_PASS, REDUCE_NONE);
        dim_add(b, tl, (int32_t)dl, f);
        dim_add(b, tr, (int32_t)dr, f);
        dim_add(b, to, od++, f);
        lused |= 1u << dl;
        rused |= 1u << dr;
    }
    for (int32_t k = 0; k < a->lhs_contracting.n; k++) {
        int64_t dl = a->lhs_contracting.v[k], dr = a->rhs_contracting.v[k];
        if (dl < 0 || dl >= ls->rank || dr < 0 || dr >= rs->rank)
            return false;
        FactorKind kind = contracting_kind(b);
        int32_t f = new_factor(b, ls->dims[dl], kind, kind == FACTOR_REDUCTION ? REDUCE_SUM : REDUCE_NONE);
        dim_add(b, tl, (int32_t)dl, f);
        dim_add(b, tr, (int32_t)dr, f);
        lused |= 1u << dl;
        rused |= 1u << dr;
    }
    for (int32_t d = 0; d < ls->rank; d++) {
        if ((lused >> d) & 1u)
            continue;
        int32_t f = new_factor(b, ls->dims[d], FACTOR_PASS, REDUCE_NONE);
        dim_add(b, tl, d, f);
        dim_add(b, to, od++, f);
    }
    for (int32_t d = 0; d < rs->rank; d++) {
        if ((rused >> d) & 1u)
            continue;
        int32_t f = new_factor(b, rs->dims[d], FACTOR_PASS, REDUCE_NONE);
        dim_add(b, tr, d, f);
        dim_add(b, to, od++, f);
    }
    return od == os->rank && b->ok;
}

/* Adds a factor of kind kind (sum-reduced if a reduction) on lhs dim dl and
 * rhs dim dr (either -1: not there) and, when to >= 0, the result's next dim. */
static int32_t dot_factor(Builder *b, const int32_t t[3], int64_t dl, int64_t dr, int32_t *od, FactorKind kind)
{
    int64_t size = dl >= 0 ? opshape(b, 0)->dims[dl] : opshape(b, 1)->dims[dr];
    int32_t f = new_factor(b, size, kind, kind == FACTOR_REDUCTION ? REDUCE_SUM : REDUCE_NONE);
    if (dl >= 0)
        dim_add(b, t[0], (int32_t)dl, f);
    if (dr >= 0)
        dim_add(b, t[1], (int32_t)dr, f);
    if (od)
        dim_add(b, t[2], (*od)++, f);
    return f;
}

/* ragged-dot (lhs, rhs, group_sizes): dot's factors (batch i, lhs free j,
 * contracting l, rhs free k) and the group factor m, which indexes rhs's
 * group dim, group_sizes' last dim and, when the ragged dim contracts, the
 * result's leading dim.  Where a shard would need the other shards' group
 * offsets the factor is NEED_REPLICATION: m, and lhs's ragged dim when it is
 * free or contracting (a ragged batch dim is a plain dot's batch dim, and
 * m's group sizes are then unused).  group_sizes' leading dims, if any, are
 * the batch factors. */
static bool b_ragged_dot(Builder *b)
{
    const HloAttrs *a = b->a;
    const Shape *ls = opshape(b, 0), *rs = opshape(b, 1), *gs = opshape(b, 2), *os = b->in->shape;
    if (!shape_is_array(ls) || !shape_is_array(rs) || !shape_is_array(gs) || !shape_is_array(os) || gs->rank < 1 ||
        a->lhs_batch.n != a->rhs_batch.n || a->lhs_contracting.n != a->rhs_contracting.n || a->lhs_ragged.n != 1 ||
        a->rhs_group.n > 1)
        return false;
    for (int32_t k = 0; k < a->lhs_batch.n + a->lhs_contracting.n; k++) {
        int64_t dl = k < a->lhs_batch.n ? a->lhs_batch.v[k] : a->lhs_contracting.v[k - a->lhs_batch.n];
        int64_t dr = k < a->lhs_batch.n ? a->rhs_batch.v[k] : a->rhs_contracting.v[k - a->lhs_batch.n];
        if (dl < 0 || dl >= ls->rank || dr < 0 || dr >= rs->rank)
            return false;
    }
    HloRaggedMode mode = hlo_ragged_mode(a);
    int64_t ragged = a->lhs_ragged.v[0], group = a->rhs_group.n ? a->rhs_group.v[0] : -1;
    if (ragged < 0 || ragged >= ls->rank || group >= rs->rank)
        return false;
    int32_t t[3] = {add_operand(b, 0), add_operand(b, 1), -1}, tg = add_operand(b, 2);
    t[2] = add_tensor(b, -1, 0, os);
    int32_t od = 0;
    b->r->param_tensors = 1u << tg;
    int32_t m = new_factor(b, gs->dims[gs->rank - 1], FACTOR_NEED_REPLICATION, REDUCE_NONE);
    dim_add(b, tg, gs->rank - 1, m);
    if (mode == RAGGED_CONTRACTING)
        dim_add(b, t[2], od++, m);
    if (group >= 0)
        dim_add(b, t[1], (int32_t)group, m);
    uint32_t lused = 1u << ragged, rused = group >= 0 ? 1u << group : 0;
    for (int32_t k = 0; k < a->lhs_batch.n; k++) {
        int64_t dl = a->lhs_batch.v[k], dr = a->rhs_batch.v[k];
        int32_t f = dot_factor(b, t, dl, dr, &od, FACTOR_PASS);
        if (gs->rank > 1 && k < gs->rank - 1)
            dim_add(b, tg, k, f);
        lused |= 1u << dl;
        rused |= 1u << dr;
    }
    for (int32_t k = 0; k < a->lhs_contracting.n; k++) {
        int64_t dl = a->lhs_contracting.v[k], dr = a->rhs_contracting.v[k];
        bool whole = dl == ragged && mode == RAGGED_CONTRACTING;
        dot_factor(b, t, dl, dr, NULL, whole ? FACTOR_NEED_REPLICATION : contracting_kind(b));
        lused |= 1u << dl;
        rused |= 1u << dr;
    }
    for (int32_t d = 0; d < ls->rank; d++)
        if (!((lused >> d) & 1u) || (d == ragged && mode == RAGGED_FREE))
            dot_factor(b, t, d, -1, &od, d == ragged ? FACTOR_NEED_REPLICATION : FACTOR_PASS);
    for (int32_t d = 0; d < rs->rank; d++)
        if (!((rused >> d) & 1u))
            dot_factor(b, t, -1, d, &od, FACTOR_PASS);
    return od == os->rank && b->ok;
}

/* convolution (lhs, kernel -> out), dims from dim_labels:
 *  batch b: lhs batch (minor to the batch-group factor), out batch;
 *  feature groups g (feature_group_count): major part of lhs feature, kernel
 *    output feature and out feature;
 *  batch groups bg (batch_group_count): major part of lhs batch, kernel
 *    output feature and out feature;
 *  input channels c: minor part of lhs feature, kernel input feature:
 *    REDUCTION (sum; whole when contracting_kind says so);
 *  output channels o: minor part of kernel output feature and out feature;
 *  spatial i: lhs spatial i and out spatial i, WINDOW unless the window is
 *    trivial (then PASS); the kernel's spatial dims stay whole. */
static bool b_convolution(Builder *b)
{
    const HloAttrs *a = b->a;
    const ConvDims *cd = a->conv;
    const Window *w = a->window;
    const Shape *ls = opshape(b, 0), *ks = opshape(b, 1), *os = b->in->shape;
    if (!cd || !shape_is_array(ls) || !shape_is_array(ks) || !shape_is_array(os) ||
        ls->rank != cd->n_spatial + 2 || ks->rank != ls->rank || os->rank != ls->rank)
        return false;
    int64_t fgc = a->feature_group_count > 0 ? a->feature_group_count : 1;
    int64_t bgc = a->batch_group_count > 0 ? a->batch_group_count : 1;
    int64_t k_in = ks->dims[cd->k_in], k_out = ks->dims[cd->k_out];
    if (k_out % fgc || k_out % bgc || ls->dims[cd->in_feature] != fgc * k_in || os->dims[cd->out_feature] != k_out ||
        ls->dims[cd->in_batch] != bgc * os->dims[cd->out_batch])
        return false;
    int32_t tl = add_operand(b, 0), tk = add_operand(b, 1), to = add_tensor(b, -1, 0, os);
    if (bgc > 1) {
        int32_t f = new_factor(b, bgc, FACTOR_PASS, REDUCE_NONE);
        dim_add(b, tl, (int32_t)cd->in_batch, f);
        dim_add(b, tk, (int32_t)cd->k_out, f);
        dim_add(b, to, (int32_t)cd->out_feature, f);
    }
    int32_t fb = new_factor(b, os->dims[cd->out_batch], FACTOR_PASS, REDUCE_NONE);
    dim_add(b, tl, (int32_t)cd->in_batch, fb);
    dim_add(b, to, (int32_t)cd->out_batch, fb);
    if (fgc > 1) {
        int32_t f = new_factor(b, fgc, FACTOR_PASS, REDUCE_NONE);
        dim_add(b, tl, (int32_t)cd->in_feature, f);
        dim_add(b, tk, (int32_t)cd->k_out, f);
        dim_add(b, to, (int32_t)cd->out_feature, f);
    }
    FactorKind ck = contracting_kind(b);
    int32_t fc = new_factor(b, k_in, ck, ck == FACTOR_REDUCTION ? REDUCE_SUM : REDUCE_NONE);
    dim_add(b, tl, (int32_t)cd->in_feature, fc);
    dim_add(b, tk, (int32_t)cd->k_in, fc);
    int32_t fo = new_factor(b, k_out / (fgc * bgc), FACTOR_PASS, REDUCE_NONE);
    dim_add(b, tk, (int32_t)cd->k_out, fo);
    dim_add(b, to, (int32_t)cd->out_feature, fo);
    for (int32_t i = 0; i < cd->n_spatial; i++) {
        bool trivial = !w || i >= w->rank || window_trivial(&w->dims[i]);
        int32_t f = new_factor(b, os->dims[cd->out_spatial[i]], trivial ? FACTOR_PASS : FACTOR_WINDOW, REDUCE_NONE);
        dim_add(b, tl, (int32_t)cd->in_spatial[i], f);
        dim_add(b, to, (int32_t)cd->out_spatial[i], f);
        dim_own(b, tk, (int32_t)cd->k_spatial[i], trivial && ks->dims[cd->k_spatial[i]] == 1 ? FACTOR_PASS
                                                                                            : FACTOR_NEED_REPLICATION);
    }
    return b->ok;
}

static int32_t list_index(const IntList *l, int64_t v)
{
    for (int32_t k = 0; k < l->n; k++)
        if (l->v[k] == v)
            return k;
    return -1;
}

/* The output/update batch dim (in order) of every indices dim but
 * index_vector_dim: idx_to_batch[d] = k-th batch dim, -1 for the index
 * vector dim. */
static void index_batch_order(const Shape *ix, int64_t ivd, int32_t *idx_to_batch)
{
    int32_t k = 0;
    for (int32_t d = 0; d < ix->rank; d++)
        idx_to_batch[d] = d == ivd ? -1 : k++;
}

/* gather(operand, indices):
 *  - indices batch dims and the output batch dims are PASS (an indices
 *    batching dim also indexes its operand batching dim);
 *  - an operand dim taken whole (slice size = dim, not indexed) and its
 *    output offset dim are PASS (operand pass-through);
 *  - indexed or partially sliced operand dims, their offset dims and the
 *    index vector dim stay whole (need-replication: the masked method for a
 *    split indexed dim is a handler's). */
static bool b_gather(Builder *b)
{
    const HloAttrs *a = b->a;
    const Shape *op = opshape(b, 0), *ix = opshape(b, 1), *os = b->in->shape;
    if (!shape_is_array(op) || !shape_is_array(ix) || !shape_is_array(os) || a->slice_sizes.n != op->rank)
        return false;
    int64_t ivd = a->index_vector_dim;
    int32_t to_batch[SPMDC_MAX_RANK + 1];
    index_batch_order(ix, ivd, to_batch);
    int32_t t0 = add_operand(b, 0), t1 = add_operand(b, 1), to = add_tensor(b, -1, 0, os);
    /* output batch dims: the output dims that are not offset dims, in order */
    int32_t batch_out[SPMDC_MAX_RANK], nb = 0;
    for (int32_t d = 0; d < os->rank; d++)
        if (list_index(&a->offset_dims, d) < 0)
            batch_out[nb++] = d;
    int32_t batch_factor[SPMDC_MAX_RANK + 1];
    for (int32_t d = 0; d < ix->rank; d++) {
        int32_t k = to_batch[d];
        if (k < 0) {
            dim_own(b, t1, d, FACTOR_NEED_REPLICATION);
            continue;
        }
        if (k >= nb)
            return false;
        int32_t f = new_factor(b, ix->dims[d], FACTOR_PASS, REDUCE_NONE);
        batch_factor[d] = f;
        dim_add(b, t1, d, f);
        dim_add(b, to, batch_out[k], f);
    }
    int32_t next_off = 0;
    for (int32_t d = 0; d < op->rank; d++) {
        int32_t bi = list_index(&a->operand_batching_dims, d);
        if (bi >= 0) {
            int64_t id = bi < a->start_indices_batching_dims.n ? a->start_indices_batching_dims.v[bi] : -1;
            if (id < 0 || id >= ix->rank || to_batch[id] < 0 || ix->dims[id] != op->dims[d])
                return false;
            dim_add(b, t0, d, batch_factor[id]);
            continue;
        }
        if (list_index(&a->collapsed_slice_dims, d) >= 0) {
            dim_own(b, t0, d, FACTOR_NEED_REPLICATION);
            continue;
        }
        if (next_off >= a->offset_dims.n)
            return false;
        int32_t od = (int32_t)a->offset_dims.v[next_off++];
        bool whole = a->slice_sizes.v[d] == op->dims[d] && list_index(&a->start_index_map, d) < 0;
        if (whole) {
            int32_t f = new_factor(b, op->dims[d], FACTOR_PASS, REDUCE_NONE);
            dim_add(b, t0, d, f);
            dim_add(b, to, od, f);
        } else {
            dim_own(b, t0, d, FACTOR_NEED_REPLICATION);
            dim_own(b, to, od, FACTOR_NEED_REPLICATION);
        }
    }
    return b->ok;
}

/* scatter(inputs..., indices, updates...) -> results shaped like the inputs:
 *  - inputs and results share a factor per dim; an operand dim the update
 *    window covers whole (not indexed) is PASS and also the updates' window
 *    dim; an indexed dim the window covers one element wide is PASS between
 *    inputs and results only (the updates that fall in a shard are that
 *    shard's); other inserted or partly covered dims stay whole;
 *  - the indices' batch dims and the updates' scatter dims form factors that
 *    are not in the results: REDUCTION with the combiner's kind (each device
 *    scatters its share of the updates; the shares combine like a
 *    reduction, which a handler carries out);
 *  - a batching dim pairs an indices dim with an input dim: PASS. */
static bool b_scatter(Builder *b)
{
    const HloAttrs *a = b->a;
    const HloInst *in = b->in;
    if (in->n_operands < 3 || (in->n_operands - 1) % 2)
        return false;
    int32_t n = (in->n_operands - 1) / 2;
    const Shape *op = opshape(b, 0), *ix = opshape(b, n), *up = opshape(b, n + 1);
    if (!shape_is_array(op) || !shape_is_array(ix) || !shape_is_array(up) || n_result_leaves(b) != n)
        return false;
    ReduceKind comb = reducer_kind(b->m, a->to_apply);
    int64_t ivd = a->index_vector_dim;
    int32_t to_batch[SPMDC_MAX_RANK + 1];
    index_batch_order(ix, ivd, to_batch);
    /* updates: scatter dims (not window dims) in order <-> indices batch dims */
    int32_t scat_up[SPMDC_MAX_RANK], ns = 0;
    for (int32_t d = 0; d < up->rank; d++)
        if (list_index(&a->update_window_dims, d) < 0)
            scat_up[ns++] = d;
    int32_t opf = b->r->n_factors;
    for (int32_t d = 0; d < op->rank; d++)
        new_factor(b, op->dims[d], FACTOR_NEED_REPLICATION, REDUCE_NONE);
    int32_t idx_f[SPMDC_MAX_RANK + 1];
    for (int32_t d = 0; d < ix->rank; d++) {
        int32_t k = to_batch[d];
        if (k < 0) {
            idx_f[d] = -1;
            continue;
        }
        if (k >= ns)
            return false;
        int32_t bi = list_index(&a->scatter_indices_batching_dims, d);
        if (bi >= 0) { /* paired with an input batching dim */
            int64_t od = bi < a->input_batching_dims.n ? a->input_batching_dims.v[bi] : -1;
            if (od < 0 || od >= op->rank)
                return false;
            b->r->factors[opf + od].kind = FACTOR_PASS;
            idx_f[d] = opf + (int32_t)od;
        } else {
            idx_f[d] = new_factor(b, ix->dims[d], FACTOR_REDUCTION, comb);
        }
    }
    /* update window dims <-> operand dims that are neither inserted nor batching */
    int32_t win_of_op[SPMDC_MAX_RANK];
    for (int32_t d = 0; d < op->rank; d++)
        win_of_op[d] = -1;
    int32_t od = 0;
    for (int32_t k = 0; k < a->update_window_dims.n; k++) {
        while (od < op->rank && (list_index(&a->inserted_window_dims, od) >= 0 ||
                                 list_index(&a->input_batching_dims, od) >= 0))
            od++;
        if (od >= op->rank)
            return false;
        int64_t ud = a->update_window_dims.v[k];
        if (ud < 0 || ud >= up->rank)
            return false;
        win_of_op[od] = (int32_t)ud;
        if (up->dims[ud] == op->dims[od] && list_index(&a->scatter_dims_to_operand_dims, od) < 0)
            b->r->factors[opf + od].kind = FACTOR_PASS;
        od++;
    }
    for (int32_t k = 0; k < n; k++)
        dims_same(b, add_operand(b, k), opf);
    int32_t ti = add_operand(b, n);
    for (int32_t d = 0; d < ix->rank; d++) {
        if (idx_f[d] < 0)
            dim_own(b, ti, d, FACTOR_NEED_REPLICATION);
        else
            dim_add(b, ti, d, idx_f[d]);
    }
    for (int32_t k = 0; k < n; k++) {
        int32_t tu = add_operand(b, n + 1 + k);
        if (!shape_same_dims(opshape(b, n + 1 + k), up))
            return false;
        for (int32_t s = 0; s < ns; s++) {
            int32_t id = -1;
            for (int32_t d = 0; d < ix->rank; d++)
                if (to_batch[d] == s)
                    id = d;
            if (id < 0)
                return false;
            dim_add(b, tu, scat_up[s], idx_f[id]);
        }
        for (int32_t d = 0; d < op->rank; d++) {
            if (win_of_op[d] < 0)
                continue;
            if (b->r->factors[opf + d].kind == FACTOR_PASS)
                dim_add(b, tu, win_of_op[d], opf + d);
            else
                dim_own(b, tu, win_of_op[d], FACTOR_NEED_REPLICATION);
        }
    }
    for (int32_t l = 0; l < n; l++) {
        const Shape *rs = result_leaf(b, l);
        if (!rs || !shape_same_dims(rs, op))
            return false;
        dims_same(b, add_tensor(b, -1, l, rs), opf);
    }
    /* an indexed dim the update window covers one element wide passes
     * between inputs and results: each device scatters the updates that fall
     * in its shard (the partitioner shifts the indices) */
    for (int32_t j = 0; j < a->scatter_dims_to_operand_dims.n; j++) {
        int64_t d = a->scatter_dims_to_operand_dims.v[j];
        if (d < 0 || d >= op->rank || list_index(&a->input_batching_dims, d) >= 0 ||
            (win_of_op[d] >= 0 && up->dims[win_of_op[d]] != 1))
            continue;
        b->r->factors[opf + d].kind = FACTOR_PASS;
    }
    return b->ok;
}

/* sort(operands...): every operand and result leaf share the factors; the
 * sort dim stays whole. */
static bool b_sort(Builder *b)
{
    const HloInst *in = b->in;
    if (in->n_operands < 1 || b->a->dimensions.n != 1)
        return false;
    const Shape *s0 = opshape(b, 0);
    if (!shape_is_array(s0) || n_result_leaves(b) != in->n_operands)
        return false;
    int64_t sd = b->a->dimensions.v[0];
    int32_t first = b->r->n_factors;
    for (int32_t d = 0; d < s0->rank; d++)
        new_factor(b, s0->dims[d], d == sd ? FACTOR_NEED_REPLICATION : FACTOR_PASS, REDUCE_NONE);
    for (int32_t k = 0; k < in->n_operands; k++) {
        if (!shape_same_dims(opshape(b, k), s0))
            return false;
        dims_same(b, add_operand(b, k), first);
    }
    for (int32_t l = 0; l < in->n_operands; l++) {
        const Shape *rs = result_leaf(b, l);
        if (!rs || !shape_same_dims(rs, s0))
            return false;
        dims_same(b, add_tensor(b, -1, l, rs), first);
    }
    return true;
}

/* topk and the TopK custom-call (operand [..., N] -> (values [..., k],
 * indices [..., k])):
 * the batch dims are PASS; the last dim stays whole. */
static bool b_topk(Builder *b)
{
    const Shape *os = opshape(b, 0);
    if (b->in->n_operands != 1 || !shape_is_array(os) || os->rank < 1)
        return false;
    int32_t nl = n_result_leaves(b);
    int32_t t0 = add_operand(b, 0);
    int32_t first = b->r->n_factors;
    for (int32_t d = 0; d + 1 < os->rank; d++)
        new_factor(b, os->dims[d], FACTOR_PASS, REDUCE_NONE);
    for (int32_t d = 0; d + 1 < os->rank; d++)
        dim_add(b, t0, d, first + d);
    dim_own(b, t0, os->rank - 1, FACTOR_NEED_REPLICATION);
    for (int32_t l = 0; l < nl; l++) {
        const Shape *rs = result_leaf(b, l);
        if (!rs || rs->rank != os->rank)
            return false;
        int32_t t = add_tensor(b, -1, l, rs);
        for (int32_t d = 0; d + 1 < os->rank; d++) {
            if (rs->dims[d] != os->dims[d])
                return false;
            dim_add(b, t, d, first + d);
        }
        dim_own(b, t, os->rank - 1, FACTOR_NEED_REPLICATION);
    }
    return true;
}

/* The collectives a user writes inside a manual region (all-reduce,
 * all-gather, reduce-scatter, all-to-all, collective-permute): operand k and
 * result leaf k share one pass-through factor per dim, so a split on the
 * region's automatic axes passes through unchanged (the replica groups run
 * along manual axes only: partition_manual.c); the dims the collective moves
 * data along (the `dimensions` of all-gather, reduce-scatter and an array
 * all-to-all) are need-replication on both sides. */
static bool b_collective(Builder *b)
{
    const HloInst *in = b->in;
    int32_t n = in->n_operands;
    if (n < 1 || n_result_leaves(b) != n)
        return false;
    uint32_t moved = 0;
    if (in->op == HLO_ALL_GATHER || in->op == HLO_REDUCE_SCATTER || in->op == HLO_ALL_TO_ALL)
        for (int32_t k = 0; k < b->a->dimensions.n; k++) {
            int64_t d = b->a->dimensions.v[k];
            if (d < 0 || d >= SPMDC_MAX_RANK)
                return false;
            moved |= 1u << d;
        }
    int32_t *first = ARENA_ARRAY(b->arena, int32_t, n);
    for (int32_t k = 0; k < n; k++) {
        const Shape *os = opshape(b, k);
        if (!shape_is_array(os))
            return false;
        int32_t t = add_operand(b, k);
        first[k] = b->r->n_factors;
        for (int32_t d = 0; d < os->rank; d++)
            new_factor(b, os->dims[d], (moved >> d) & 1u ? FACTOR_NEED_REPLICATION : FACTOR_PASS, REDUCE_NONE);
        dims_same(b, t, first[k]);
    }
    for (int32_t l = 0; l < n; l++) {
        const Shape *os = opshape(b, l), *rs = result_leaf(b, l);
        if (!rs || rs->rank != os->rank)
            return false;
        int32_t t = add_tensor(b, -1, l, rs);
        for (int32_t d = 0; d < rs->rank; d++) {
            if ((moved >> d) & 1u) {
                dim_own(b, t, d, FACTOR_NEED_REPLICATION);
            } else {
                if (rs->dims[d] != os->dims[d])
                    return false;
                dim_add(b, t, d, first[l] + d);
            }
        }
    }
    return true;
}

/* The leading batch dims a custom-call declares (frontend_attributes
 * num_batch_dims="N", which JAX puts on its batched LAPACK calls and XLA's
 * batch partitioner reads), or 0. */
static int64_t custom_call_batch_dims(const HloInst *in)
{
    const HloAttrs *a = hlo_attrs(in);
    static const char key[] = "num_batch_dims=\"";
    for (int32_t k = 0; k < a->n_raw; k++) {
        if (strcmp(a->raw[k].name, "frontend_attributes") != 0)
            continue;
        const char *t = a->raw[k].text, *s = strstr(t, key);
        if (!s || (s > t && s[-1] != '{' && s[-1] != ',' && s[-1] != ' '))
            return 0;
        int64_t v = 0;
        for (s += sizeof key - 1; *s >= '0' && *s <= '9' && v <= SPMDC_MAX_RANK; s++)
            v = v * 10 + (*s - '0');
        return *s == '"' && v <= SPMDC_MAX_RANK ? v : 0;
    }
    return 0;
}

/* Whether every operand and result leaf of custom-call i is an array whose
 * first nb dims are the same sizes (the shared batch dims). */
static bool batch_dims_agree(const HloComputation *comp, const HloInst *in, int64_t nb)
{
    const Shape *first = NULL;
    int32_t nl = shape_is_tuple(in->shape) ? in->shape->n_elems : 1;
    for (int32_t k = 0; k < in->n_operands + nl; k++) {
        const Shape *s = k < in->n_operands ? comp->insts[in->operands[k]].shape
                         : shape_is_tuple(in->shape) ? &in->shape->elems[k - in->n_operands] : in->shape;
        if (!shape_is_array(s) || s->rank < nb)
            return false;
        if (!first)
            first = s;
        else if (memcmp(s->dims, first->dims, sizeof(int64_t) * (size_t)nb) != 0)
            return false;
    }
    return first != NULL;
}

/* A custom-call with nb batch dims: they are pass-through factors shared by
 * every operand and result leaf (each batch element is computed apart, as
 * XLA's batch partitioner runs the call on each device's batch shard); every
 * other dim is needed whole. */
static bool b_batch_custom_call(Builder *b, int64_t nb)
{
    if (!batch_dims_agree(b->comp, b->in, nb))
        return false;
    const Shape *s0 = b->in->n_operands ? opshape(b, 0) : result_leaf(b, 0);
    int32_t first = b->r->n_factors;
    for (int64_t d = 0; d < nb; d++)
        new_factor(b, s0->dims[d], FACTOR_PASS, REDUCE_NONE);
    int32_t nl = n_result_leaves(b);
    for (int32_t k = 0; k < b->in->n_operands + nl; k++) {
        int32_t l = k - b->in->n_operands;
        int32_t t = l < 0 ? add_operand(b, k) : add_tensor(b, -1, l, result_leaf(b, l));
        for (int32_t d = 0; d < b->r->t[t].rank; d++) {
            if (d < nb)
                dim_add(b, t, d, first + d);
            else
                dim_own(b, t, d, FACTOR_NEED_REPLICATION);
        }
    }
    return true;
}

static bool b_custom_call(Builder *b)
{
    if (hlo_is_custom_call(b->in, "TopK"))
        return b_topk(b);
    int64_t nb = custom_call_batch_dims(b->in);
    return nb > 0 && b_batch_custom_call(b, nb);
}

/* ================================================================ the registry */

typedef struct RegEntry {
    const char *name;
    OpRuleClass cls;
    BuildFn build;
    uint8_t tier; /* PropTier */
} RegEntry;

#define ELEM {"elementwise", RULE_FACTORS, b_elementwise, TIER_PASS_OP}
#define FAC(nm, fn) {nm, RULE_FACTORS, fn, TIER_NORMAL}
#define FAC_TIER(nm, fn, tier) {nm, RULE_FACTORS, fn, tier}

static const RegEntry REG[HLO_OPCODE_COUNT] = {
    [HLO_PARAMETER] = {"leaf", RULE_LEAF, NULL, 0},
    [HLO_CONSTANT] = {"leaf", RULE_LEAF, NULL, 0},
    [HLO_IOTA] = FAC("iota", b_iota),
    [HLO_PARTITION_ID] = {"leaf", RULE_LEAF, NULL, 0},
    [HLO_REPLICA_ID] = {"leaf", RULE_LEAF, NULL, 0},
    [HLO_AFTER_ALL] = {"opaque", RULE_OPAQUE, NULL, 0},
    [HLO_INFEED] = {"transfer", RULE_OPAQUE, NULL, 0},
    [HLO_OUTFEED] = {"transfer", RULE_OPAQUE, NULL, 0},
    [HLO_SEND] = {"transfer", RULE_OPAQUE, NULL, 0},
    [HLO_SEND_DONE] = {"transfer", RULE_OPAQUE, NULL, 0},
    [HLO_RECV] = {"transfer", RULE_OPAQUE, NULL, 0},
    [HLO_RECV_DONE] = {"transfer", RULE_OPAQUE, NULL, 0},
    [HLO_TUPLE] = {"identity", RULE_IDENTITY, NULL, 0},
    [HLO_GET_TUPLE_ELEMENT] = {"identity", RULE_IDENTITY, NULL, 0},
    [HLO_OPTIMIZATION_BARRIER] = {"identity", RULE_IDENTITY, NULL, 0},
    [HLO_COPY] = ELEM, [HLO_CONVERT] = ELEM,
    [HLO_BITCAST_CONVERT] = FAC("bitcast-convert", b_bitcast_convert),
    [HLO_ABS] = ELEM, [HLO_NEGATE] = ELEM, [HLO_EXP] = ELEM, [HLO_EXPM1] = ELEM, [HLO_LOG] = ELEM,
    [HLO_LOG1P] = ELEM, [HLO_SQRT] = ELEM, [HLO_RSQRT] = ELEM, [HLO_CBRT] = ELEM, [HLO_TANH] = ELEM,
    [HLO_LOGISTIC] = ELEM, [HLO_SINE] = ELEM, [HLO_COSINE] = ELEM, [HLO_TAN] = ELEM, [HLO_ERF] = ELEM,
    [HLO_FLOOR] = ELEM, [HLO_CEIL] = ELEM, [HLO_ROUND_AFZ] = ELEM, [HLO_ROUND_EVEN] = ELEM, [HLO_SIGN] = ELEM,
    [HLO_NOT] = ELEM, [HLO_IS_FINITE] = ELEM, [HLO_POPCNT] = ELEM, [HLO_CLZ] = ELEM, [HLO_REAL] = ELEM,
    [HLO_IMAG] = ELEM, [HLO_REDUCE_PRECISION] = ELEM,
    [HLO_ADD] = ELEM, [HLO_SUBTRACT] = ELEM, [HLO_MULTIPLY] = ELEM, [HLO_DIVIDE] = ELEM, [HLO_REMAINDER] = ELEM,
    [HLO_MAXIMUM] = ELEM, [HLO_MINIMUM] = ELEM, [HLO_POWER] = ELEM, [HLO_ATAN2] = ELEM, [HLO_AND] = ELEM,
    [HLO_OR] = ELEM, [HLO_XOR] = ELEM, [HLO_SHIFT_LEFT] = ELEM, [HLO_SHIFT_RIGHT_ARITHMETIC] = ELEM,
    [HLO_SHIFT_RIGHT_LOGICAL] = ELEM, [HLO_COMPARE] = ELEM, [HLO_COMPLEX] = ELEM,
    [HLO_SELECT] = ELEM, [HLO_CLAMP] = ELEM,
    [HLO_BROADCAST] = FAC_TIER("broadcast", b_broadcast, TIER_BROADCAST),
    [HLO_RESHAPE] = FAC_TIER("reshape", b_reshape, TIER_PASS_OP),
    [HLO_BITCAST] = FAC_TIER("reshape", b_reshape, TIER_PASS_OP),
    [HLO_TRANSPOSE] = FAC_TIER("transpose", b_transpose, TIER_PASS_OP),
    [HLO_SLICE] = FAC("slice", b_slice),
    [HLO_DYNAMIC_SLICE] = FAC_TIER("dynamic-slice", b_dynamic_slice, TIER_FORWARD_OP),
    [HLO_DYNAMIC_UPDATE_SLICE] = FAC_TIER("dynamic-update-slice", b_dynamic_update_slice, TIER_FORWARD_OP),
    [HLO_PAD] = FAC("pad", b_pad),
    [HLO_CONCATENATE] = FAC("concatenate", b_concatenate),
    [HLO_REVERSE] = FAC("reverse", b_reverse),
    [HLO_GATHER] = FAC("gather", b_gather),
    [HLO_SCATTER] = FAC("scatter", b_scatter),
    [HLO_SORT] = FAC("sort", b_sort),
    [HLO_TOPK] = FAC("topk", b_topk),
    [HLO_DOT] = FAC("dot", b_dot),
    [HLO_RAGGED_DOT] = FAC("ragged-dot", b_ragged_dot),
    [HLO_CONVOLUTION] = FAC("convolution", b_convolution),
    [HLO_REDUCE] = FAC("reduce", b_reduce),
    [HLO_REDUCE_WINDOW] = FAC("reduce-window", b_reduce_window),
    [HLO_SELECT_AND_SCATTER] = FAC("select-and-scatter", b_select_and_scatter),
    [HLO_MAP] = ELEM,
    [HLO_RNG] = FAC("rng", b_generated),
    [HLO_RNG_BIT_GENERATOR] = FAC("rng-bit-generator", b_rng_bit_generator),
    [HLO_WHILE] = {"while", RULE_DATAFLOW, NULL, 0},
    [HLO_CONDITIONAL] = {"conditional", RULE_DATAFLOW, NULL, 0},
    [HLO_CALL] = {"call", RULE_DATAFLOW, NULL, 0},
    [HLO_CUSTOM_CALL] = FAC("custom-call", b_custom_call),
    [HLO_ALL_REDUCE] = FAC_TIER("collective", b_collective, TIER_PASS_OP),
    [HLO_ALL_GATHER] = FAC_TIER("collective", b_collective, TIER_PASS_OP),
    [HLO_REDUCE_SCATTER] = FAC_TIER("collective", b_collective, TIER_PASS_OP),
    [HLO_ALL_TO_ALL] = FAC_TIER("collective", b_collective, TIER_PASS_OP),
    [HLO_COLLECTIVE_PERMUTE] = FAC_TIER("collective", b_collective, TIER_PASS_OP),
};

const char *oprule_name(HloOpcode op) { return (unsigned)op < HLO_OPCODE_COUNT ? REG[op].name : NULL; }

PropTier oprule_tier(HloOpcode op)
{
    if ((unsigned)op >= HLO_OPCODE_COUNT || REG[op].cls != RULE_FACTORS)
        return TIER_PASS_OP;
    return (PropTier)REG[op].tier;
}

void oprule_factor_flow(const OpRule *r, int32_t k, int32_t f, PropTier tier, int32_t phase, bool *gives,
                        bool *takes)
{
    FactorKind kind = (FactorKind)r->factors[f].kind;
    bool operand = k < r->n_in, pass = kind == FACTOR_PASS, g = false, t = false;
    if (kind != FACTOR_NEED_REPLICATION) {
        bool both = phase >= 2 || tier == TIER_PASS_OP || (phase == 1 && pass && tier != TIER_BROADCAST);
        if (both) {
            g = t = true;
        } else if (tier == TIER_FORWARD_OP) { /* operands give, results take */
            g = operand;
            t = !operand;
        } else if (phase == 1 && pass && tier == TIER_BROADCAST) { /* results give, operands take */
            g = !operand;
            t = operand;
        }
    }
    *gives = g;
    *takes = t;
}

void oprule_flow_masks(const OpRule *r, PropTier tier, int32_t phase, uint64_t gives[2], uint64_t takes[2])
{
    /* oprule_factor_flow's cases, per kind of factor */
    uint64_t pass = 0, flowing = 0;
    for (int32_t f = 0; f < r->n_factors; f++) {
        FactorKind kind = (FactorKind)r->factors[f].kind;
        pass |= (uint64_t)(kind == FACTOR_PASS) << f;
        flowing |= (uint64_t)(kind != FACTOR_NEED_REPLICATION) << f;
    }
    uint64_t both = phase >= 2 || tier == TIER_PASS_OP ? flowing : phase == 1 && tier != TIER_BROADCAST ? pass : 0;
    uint64_t fwd = tier == TIER_FORWARD_OP ? flowing & ~both : 0;
    uint64_t back = phase == 1 && tier == TIER_BROADCAST ? pass & ~both : 0;
    gives[0] = both | fwd;  /* operands */
    takes[0] = both | back;
    gives[1] = both | back; /* results */
    takes[1] = both | fwd;
}

OpRuleClass oprule_class(const HloModule *m, int32_t c, int32_t i)
{
    const HloInst *in = hlo_inst(m, c, i);
    if ((unsigned)in->op >= HLO_OPCODE_COUNT || !REG[in->op].name)
        return RULE_OPAQUE;
    if (in->op == HLO_CUSTOM_CALL) {
        if (hlo_is_custom_call(in, "Sharding"))
            return RULE_IDENTITY;
        if (hlo_is_custom_call(in, "SPMDFullToShardShape") || hlo_is_custom_call(in, "SPMDShardToFullShape"))
            return RULE_MANUAL_BORDER;
        if (hlo_is_custom_call(in, "TopK"))
            return RULE_FACTORS;
        int64_t nb = custom_call_batch_dims(in);
        if (nb > 0 && batch_dims_agree(hlo_comp(m, c), in, nb))
            return RULE_FACTORS;
        return RULE_OPAQUE;
    }
    if (in->op == HLO_BITCAST_CONVERT || in->op == HLO_BITCAST) {
        const Shape *os = hlo_comp(m, c)->insts[in->operands[0]].shape;
        if (!shape_is_array(os) || !shape_is_array(in->shape))
            return RULE_OPAQUE;
    }
    return REG[in->op].cls;
}

bool oprule_class_by_opcode(HloOpcode op)
{
    return op != HLO_CUSTOM_CALL && op != HLO_BITCAST_CONVERT && op != HLO_BITCAST; /* oprule_class's cases */
}

bool oprule_is_elementwise(HloOpcode op) { return (unsigned)op < HLO_OPCODE_COUNT && REG[op].build == b_elementwise; }

bool oprule_identity_map(const HloModule *m, int32_t c, int32_t i)
{
    const HloComputation *comp = hlo_comp(m, c);
    const HloInst *in = &comp->insts[i];
    if ((unsigned)in->op >= HLO_OPCODE_COUNT || REG[in->op].build != b_elementwise ||
        oprule_class(m, c, i) != RULE_FACTORS || !shape_is_array(in->shape))
        return false;
    int arity = hlo_opcode_arity(in->op);
    if (arity >= 0 && in->n_operands != arity)
        return false;
    for (int32_t k = 0; k < in->n_operands; k++) {
        if (in->operands[k] < 0 || in->operands[k] >= comp->n_insts)
            return false;
        const Shape *os = comp->insts[in->operands[k]].shape;
        if (!shape_is_array(os) || (os->rank != 0 && !shape_same_dims(os, in->shape)))
            return false;
    }
    return true;
}

/* ================================================================ building */

bool oprule_build(const HloModule *m, int32_t c, int32_t i, Arena *arena, OpRule *r)
{
    /* the header only: factors[] entries are written as factors are made */
    r->n_factors = 0;
    r->n_in = r->n_out = 0;
    r->t = NULL;
    r->dim_start = NULL;
    r->factor_of = NULL;
    r->param_tensors = 0;
    const HloComputation *comp = hlo_comp(m, c);
    const HloInst *in = &comp->insts[i];
    if (oprule_class(m, c, i) != RULE_FACTORS || !REG[in->op].build)
        return false;
    int arity = hlo_opcode_arity(in->op);
    if (arity >= 0 && in->n_operands != arity)
        return false;
    for (int32_t k = 0; k < in->n_operands; k++)
        if (in->operands[k] < 0 || in->operands[k] >= comp->n_insts)
            return false;
    Builder b;
    memset(&b, 0, sizeof b);
    b.m = m;
    b.comp = comp;
    b.in = in;
    b.a = hlo_attrs(in);
    b.r = r;
    b.arena = arena;
    b.ok = true;
    b.cap_tensors = in->n_operands + shape_leaf_count(in->shape) + 1;
    r->t = ARENA_ARRAY(arena, RuleTensor, b.cap_tensors);
    /* the per-dim factor lists of small ops live on the stack */
    enum { SMALL = 8 };
    int8_t lst_small[SMALL][SPMDC_MAX_RANK][DIM_MAX_FACTORS];
    uint8_t cnt_small[SMALL][SPMDC_MAX_RANK];
    if (b.cap_tensors <= SMALL) {
        memset(cnt_small, 0, sizeof(cnt_small[0]) * (size_t)b.cap_tensors);
        b.lst = lst_small;
        b.cnt = cnt_small;
    } else {
        b.lst = arena_alloc(arena, sizeof(*b.lst) * (size_t)b.cap_tensors, 8);
        b.cnt = arena_alloc(arena, sizeof(*b.cnt) * (size_t)b.cap_tensors, 8);
    }
    if (!REG[in->op].build(&b) || !b.ok)
        return false;
    int32_t nt = r->n_in + r->n_out, total_dims = 0, total_f = 0;
    for (int32_t k = 0; k < nt; k++) {
        r->t[k].dims = total_dims;
        total_dims += r->t[k].rank;
        for (int32_t d = 0; d < r->t[k].rank; d++)
            total_f += b.cnt[k][d];
    }
    r->dim_start = ARENA_ARRAY(arena, int32_t, total_dims + 1);
    r->factor_of = ARENA_ARRAY(arena, int8_t, total_f + 1);
    int32_t x = 0, f = 0;
    for (int32_t k = 0; k < nt; k++) {
        for (int32_t d = 0; d < r->t[k].rank; d++) {
            r->dim_start[x++] = f;
            /* every dim must be covered: factor sizes multiply to the dim */
            int64_t prod = 1;
            for (int32_t j = 0; j < b.cnt[k][d]; j++) {
                int32_t fid = b.lst[k][d][j];
                r->factor_of[f++] = (int8_t)fid;
                const Factor *fa = &r->factors[fid];
                bool own_extent = fa->kind == FACTOR_PERMUTATION || fa->kind == FACTOR_WINDOW;
                prod *= own_extent && b.cnt[k][d] == 1 ? r->t[k].shape[d] : fa->size;
            }
            if (b.cnt[k][d] == 0 || prod != r->t[k].shape[d])
                return false;
        }
    }
    r->dim_start[x] = f;
    return true;
}

int32_t oprule_operand_tensor(const OpRule *r, int32_t slot)
{
    /* the rules add operands first, in slot order: tensor k is slot k (a
     * lookup per slot stays O(1) for a concatenate of 100k operands) */
    if (slot >= 0 && slot < r->n_in + r->n_out && r->t[slot].slot == slot)
        return slot;
    for (int32_t k = 0; k < r->n_in; k++)
        if (r->t[k].slot == slot)
            return k;
    return -1;
}

int32_t oprule_result_tensor(const OpRule *r, int32_t leaf)
{
    for (int32_t k = r->n_in; k < r->n_in + r->n_out; k++)
        if (r->t[k].leaf == leaf)
            return k;
    return -1;
}

uint32_t oprule_factor_tensors(const OpRule *r, int32_t f)
{
    uint32_t mask = 0;
    for (int32_t k = 0; k < r->n_in + r->n_out && k < 32; k++)
        for (int32_t d = 0; d < r->t[k].rank; d++)
            for (int32_t j = 0; j < oprule_dim_n(r, k, d); j++)
                if (oprule_dim_factor(r, k, d, j) == f)
                    mask |= 1u << k;
    return mask;
}

/* ================================================================ factor shardings */

void fsh_init(FactorSharding *fs, int32_t n_factors)
{
    memset(fs, 0, sizeof *fs);
    fs->n_factors = n_factors;
}

static int32_t fsh_start(const FactorSharding *fs, int32_t f)
{
    int32_t k = 0;
    for (int32_t i = 0; i < f; i++)
        k += fs->n[i];
    return k;
}


void fsh_set(FactorSharding *fs, int32_t f, const int8_t *atoms, int32_t n)
{
    SPMDC_ASSERT(f >= 0 && f < fs->n_factors && n >= 0);
    int32_t st = 0, total = 0, old = fs->n[f];
    for (int32_t i = 0; i < fs->n_factors; i++) {
        st += i < f ? fs->n[i] : 0;
        total += fs->n[i];
    }
    SPMDC_ASSERT(total - old + n <= SPMDC_MAX_ATOMS);
    if (n != old && total > st + old)
        memmove(fs->atoms + st + n, fs->atoms + st + old, (size_t)(total - st - old));
    if (n)
        memcpy(fs->atoms + st, atoms, (size_t)n);
    int32_t nt = total - old + n;
    if (nt < total) /* the bytes past the runs stay zero */
        memset(fs->atoms + nt, 0, (size_t)(total - nt));
    fs->n[f] = (uint8_t)n;
}

uint32_t fsh_used(const FactorSharding *fs)
{
    uint32_t m = 0;
    for (int32_t i = 0, n = fsh_start(fs, fs->n_factors); i < n; i++)
        m |= 1u << fs->atoms[i];
    return m;
}

bool fsh_equal(const FactorSharding *a, const FactorSharding *b)
{
    if (a->n_factors != b->n_factors || memcmp(a->n, b->n, (size_t)a->n_factors) != 0)
        return false;
    return memcmp(a->atoms, b->atoms, (size_t)fsh_start(a, a->n_factors)) == 0;
}

int64_t fsh_tiles(const FactorSharding *fs, const Mesh *m, int32_t f)
{
    int64_t t = 1;
    const int8_t *a = fsh_factor(fs, f);
    for (int32_t k = 0; k < fs->n[f]; k++)
        t *= m->atom_size[a[k]];
    return t;
}

/* Extent of factor f in tensor k's dim d (a permutation or window factor
 * alone in its dim has the dim's extent). */
static int64_t extent_in(const OpRule *r, int32_t k, int32_t d, int32_t f)
{
    const Factor *fa = &r->factors[f];
    bool own = fa->kind == FACTOR_PERMUTATION || fa->kind == FACTOR_WINDOW;
    return own && oprule_dim_n(r, k, d) == 1 ? r->t[k].shape[d] : fa->size;
}

void oprule_tiling_to_factors(const OpRule *r, int32_t k, const Tiling *t, const Mesh *m, FactorSharding *out,
                              uint32_t *unfit)
{
    fsh_init(out, r->n_factors);
    if (unfit)
        *unfit = 0;
    if (t->rank != r->t[k].rank)
        return;
    /* Collect per-factor runs first (a factor appears in at most one dim of
     * a tensor), then write them in factor order. */
    int8_t run[OPRULE_MAX_FACTORS][SPMDC_MAX_ATOMS];
    uint8_t rn[OPRULE_MAX_FACTORS];
    memset(rn, 0, sizeof rn);
    for (int32_t d = 0; d < t->rank; d++) {
        const int8_t *a = tiling_dim(t, d);
        int32_t na = tiling_dim_n(t, d), nf = oprule_dim_n(r, k, d), fi = 0;
        int64_t left = nf > 0 ? extent_in(r, k, d, oprule_dim_factor(r, k, d, 0)) : 1;
        for (int32_t j = 0; j < na; j++) {
            int64_t p = m->atom_size[a[j]];
            /* move past factors that are split down to one element */
            while (fi < nf && left == 1 && fi + 1 < nf) {
                fi++;
                left = extent_in(r, k, d, oprule_dim_factor(r, k, d, fi));
            }
            int64_t q = left / p; /* one division: they are slow */
            bool divides = q * p == left, fits = fi < nf && (nf == 1 || divides);
            if (!fits) {
                if (unfit)
                    *unfit |= 1u << d;
                break;
            }
            int32_t f = oprule_dim_factor(r, k, d, fi);
            run[f][rn[f]++] = a[j];
            left = divides ? q : 1;
        }
    }
    /* in factor order: each run goes after the ones before it */
    int32_t at = 0;
    for (int32_t f = 0; f < r->n_factors; f++)
        if (rn[f]) {
            memcpy(out->atoms + at, run[f], rn[f]);
            out->n[f] = rn[f];
            at += rn[f];
        }
}

bool oprule_factors_to_tiling(const OpRule *r, int32_t k, const FactorSharding *fs, const Mesh *m, Tiling *out,
                              uint32_t *bad)
{
    tiling_replicated(out, r->t[k].rank);
    if (bad)
        *bad = 0;
    bool ok = true;
    /* the factors' start offsets in fs->atoms */
    int32_t start[OPRULE_MAX_FACTORS];
    for (int32_t f = 0, at = 0; f < r->n_factors; at += fs->n[f], f++)
        start[f] = at;
    int32_t at = 0; /* the dims' runs are written in dim order (tiling.h) */
    for (int32_t d = 0; d < r->t[k].rank; d++) {
        int8_t *run = out->atoms + at;
        int32_t n = 0, nf = oprule_dim_n(r, k, d);
        bool wide_seen = false, dim_ok = true; /* a factor with local extent > 1 seen */
        for (int32_t j = 0; j < nf; j++) {
            int32_t f = oprule_dim_factor(r, k, d, j);
            int64_t ext = extent_in(r, k, d, f), tiles = 1;
            for (int32_t q = 0; q < fs->n[f]; q++)
                tiles *= m->atom_size[fs->atoms[start[f] + q]];
            if (fs->n[f] > 0) {
                SPMDC_ASSERT(at + n + fs->n[f] <= SPMDC_MAX_ATOMS); /* a factor is in one dim of a tensor */
                if (wide_seen || (nf > 1 && ext % tiles != 0))
                    dim_ok = false;
                memcpy(run + n, fs->atoms + start[f], fs->n[f]);
                n += fs->n[f];
            }
            if (ext > tiles) /* a local extent ceil(ext / tiles) > 1 */
                wide_seen = true;
        }
        if (!dim_ok) {
            ok = false;
            if (bad)
                *bad |= 1u << d;
            memset(run, 0, (size_t)n);
            continue;
        }
        out->n[d] = (uint8_t)n;
        at += n;
    }
    return ok;
}

uint32_t oprule_result_partial(const OpRule *r, const FactorSharding *fs, ReduceKind *kind, bool *mixed)
{
    uint32_t mask = 0;
    ReduceKind kd = REDUCE_NONE;
    bool mx = false;
    for (int32_t f = 0; f < r->n_factors; f++) {
        if (r->factors[f].kind != FACTOR_REDUCTION || fs->n[f] == 0)
            continue;
        const int8_t *a = fsh_factor(fs, f);
        for (int32_t j = 0; j < fs->n[f]; j++)
            mask |= 1u << a[j];
        ReduceKind fk = (ReduceKind)r->factors[f].reduce;
        if (kd == REDUCE_NONE)
            kd = fk;
        else if (kd != fk)
            mx = true;
        if (fk == REDUCE_NONE)
            mx = true;
    }
    if (kind)
        *kind = mx ? REDUCE_NONE : kd;
    if (mixed)
        *mixed = mx;
    return mask;
}

/* ================================================================ local attributes */

/* Local extent of tensor k's dim d under fs. */
static int64_t local_dim(const OpRule *r, int32_t k, int32_t d, const FactorSharding *fs, const Mesh *m)
{
    int64_t tiles = 1;
    for (int32_t j = 0; j < oprule_dim_n(r, k, d); j++)
        tiles *= fsh_tiles(fs, m, oprule_dim_factor(r, k, d, j));
    return tiling_shard_size(r->t[k].shape[d], tiles);
}

void oprule_localize_attrs(const OpRule *r, const HloModule *m, int32_t c, int32_t i, const FactorSharding *fs,
                           const Mesh *mesh, HloAttrs *a)
{
    const HloInst *in = hlo_inst(m, c, i);
    int32_t t0 = oprule_operand_tensor(r, 0);
    switch (in->op) {
    case HLO_SLICE:
        for (int32_t d = 0; t0 >= 0 && d < r->t[t0].rank && d < a->slice_limit.n; d++) {
            int32_t f = oprule_dim_factor(r, t0, d, 0);
            if (r->factors[f].kind == FACTOR_PASS && fs->n[f] > 0)
                a->slice_limit.v[d] = local_dim(r, t0, d, fs, mesh);
        }
        break;
    case HLO_DYNAMIC_SLICE:
        for (int32_t d = 0; t0 >= 0 && d < r->t[t0].rank && d < a->dynamic_slice_sizes.n; d++) {
            int32_t f = oprule_dim_factor(r, t0, d, 0);
            if (r->factors[f].kind == FACTOR_PASS && fs->n[f] > 0)
                a->dynamic_slice_sizes.v[d] = local_dim(r, t0, d, fs, mesh);
        }
        break;
    case HLO_GATHER:
        for (int32_t d = 0; t0 >= 0 && d < r->t[t0].rank && d < a->slice_sizes.n; d++) {
            int32_t f = oprule_dim_factor(r, t0, d, 0);
            if (oprule_dim_n(r, t0, d) == 1 && r->factors[f].kind == FACTOR_PASS && fs->n[f] > 0 &&
                a->slice_sizes.v[d] == r->t[t0].shape[d])
                a->slice_sizes.v[d] = local_dim(r, t0, d, fs, mesh);
        }
        break;
    case HLO_CONVOLUTION: {
        const ConvDims *cd = a->conv;
        if (!cd || t0 < 0)
            break;
        /* the group factor is the major factor of the lhs feature (batch) dim */
        if (a->feature_group_count > 1 && oprule_dim_n(r, t0, (int32_t)cd->in_feature) == 2) {
            int32_t g = oprule_dim_factor(r, t0, (int32_t)cd->in_feature, 0);
            a->feature_group_count /= fsh_tiles(fs, mesh, g);
        }
        if (a->batch_group_count > 1 && oprule_dim_n(r, t0, (int32_t)cd->in_batch) == 2) {
            int32_t g = oprule_dim_factor(r, t0, (int32_t)cd->in_batch, 0);
            a->batch_group_count /= fsh_tiles(fs, mesh, g);
        }
        break;
    }
    default: break;
    }
}

/* ================================================================ algebra */

#define ALG(red, comm, assoc, part) {(uint8_t)(red), comm, assoc, (uint8_t)(part)}
#define MOVE ALG(REDUCE_NONE, false, false, PARTIAL_MOVE)
#define NONE ALG(REDUCE_NONE, false, false, PARTIAL_CLOSES)

static const OpAlgebra ALGEBRA[HLO_OPCODE_COUNT] = {
    [HLO_ADD] = ALG(REDUCE_SUM, true, true, PARTIAL_ALL),
    [HLO_SUBTRACT] = ALG(REDUCE_NONE, false, false, PARTIAL_ALL),
    [HLO_MULTIPLY] = ALG(REDUCE_PROD, true, true, PARTIAL_ONE),
    [HLO_DIVIDE] = ALG(REDUCE_NONE, false, false, PARTIAL_ONE),
    [HLO_MAXIMUM] = ALG(REDUCE_MAX, true, true, PARTIAL_ALL),
    [HLO_MINIMUM] = ALG(REDUCE_MIN, true, true, PARTIAL_ALL),
    [HLO_AND] = ALG(REDUCE_AND, true, true, PARTIAL_ALL),
    [HLO_OR] = ALG(REDUCE_OR, true, true, PARTIAL_ALL),
    [HLO_XOR] = ALG(REDUCE_NONE, true, true, PARTIAL_CLOSES),
    [HLO_NEGATE] = ALG(REDUCE_NONE, false, false, PARTIAL_UNARY),
    [HLO_SELECT] = ALG(REDUCE_NONE, false, false, PARTIAL_ALL),
    [HLO_DOT] = ALG(REDUCE_NONE, false, false, PARTIAL_CONTRACT),
    [HLO_RAGGED_DOT] = ALG(REDUCE_NONE, false, false, PARTIAL_CONTRACT),
    [HLO_CONVOLUTION] = ALG(REDUCE_NONE, false, false, PARTIAL_CONTRACT),
    [HLO_COPY] = MOVE, [HLO_CONVERT] = MOVE, [HLO_RESHAPE] = MOVE, [HLO_BITCAST] = MOVE,
    [HLO_TRANSPOSE] = MOVE, [HLO_BROADCAST] = MOVE, [HLO_SLICE] = MOVE, [HLO_REVERSE] = MOVE,
    [HLO_CONCATENATE] = MOVE, [HLO_PAD] = MOVE, [HLO_OPTIMIZATION_BARRIER] = MOVE,
    [HLO_TUPLE] = MOVE, [HLO_GET_TUPLE_ELEMENT] = MOVE,
    [HLO_DYNAMIC_SLICE] = MOVE, [HLO_DYNAMIC_UPDATE_SLICE] = MOVE, [HLO_GATHER] = MOVE,
    [HLO_REDUCE] = ALG(REDUCE_NONE, false, false, PARTIAL_REDUCE),
    [HLO_REDUCE_WINDOW] = ALG(REDUCE_NONE, false, false, PARTIAL_REDUCE),
    [HLO_PARAMETER] = NONE,
};

const OpAlgebra *op_algebra(HloOpcode op)
{
    static const OpAlgebra none = NONE;
    return (unsigned)op < HLO_OPCODE_COUNT ? &ALGEBRA[op] : &none;
}

ReduceKind reducer_kind(const HloModule *m, int32_t comp)
{
    if (comp < 0 || comp >= m->n_comps)
        return REDUCE_NONE;
    const HloComputation *c = &m->comps[comp];
    if (c->root < 0 || c->root >= c->n_insts)
        return REDUCE_NONE;
    const HloInst *r = &c->insts[c->root];
    if (r->n_operands != 2 || !shape_is_array(r->shape) || r->shape->rank != 0)
        return REDUCE_NONE;
    const HloInst *a = &c->insts[r->operands[0]], *b = &c->insts[r->operands[1]];
    if (a->op != HLO_PARAMETER || b->op != HLO_PARAMETER || a->param_number == b->param_number)
        return REDUCE_NONE;
    bool pred = r->shape->type == ET_PRED;
    switch (r->op) {
    case HLO_ADD: return pred ? REDUCE_OR : REDUCE_SUM;
    case HLO_MAXIMUM: return pred ? REDUCE_OR : REDUCE_MAX;
    case HLO_MINIMUM: return pred ? REDUCE_AND : REDUCE_MIN;
    case HLO_MULTIPLY: return pred ? REDUCE_AND : REDUCE_PROD;
    case HLO_AND: return REDUCE_AND;
    case HLO_OR: return REDUCE_OR;
    default: return REDUCE_NONE;
    }
}

static bool is_param_number(const HloComputation *c, int32_t e, int64_t num)
{
    return e >= 0 && e < c->n_insts && c->insts[e].op == HLO_PARAMETER && c->insts[e].param_number == num;
}

/* Whether instruction e of c is parameter a or b, or selects (nested at
 * most `depth` deep) between such. */
static bool picks_between(const HloComputation *c, int32_t e, int64_t pa, int64_t pb, int32_t depth)
{
    if (is_param_number(c, e, pa) || is_param_number(c, e, pb))
        return true;
    if (depth <= 0 || e < 0 || e >= c->n_insts || c->insts[e].op != HLO_SELECT || c->insts[e].n_operands != 3)
        return false;
    return picks_between(c, c->insts[e].operands[1], pa, pb, depth - 1) &&
           picks_between(c, c->insts[e].operands[2], pa, pb, depth - 1);
}

bool reducer_is_selection(const HloModule *m, int32_t comp, int32_t n)
{
    if (comp < 0 || comp >= m->n_comps || n < 1)
        return false;
    const HloComputation *c = &m->comps[comp];
    if (c->root < 0 || c->root >= c->n_insts)
        return false;
    const HloInst *root = &c->insts[c->root];
    if (n > 1 && (root->op != HLO_TUPLE || root->n_operands != n))
        return false;
    for (int32_t j = 0; j < n; j++)
        if (!picks_between(c, n == 1 ? c->root : root->operands[j], j, n + j, 8))
            return false;
    return true;
}

/* ---------------------------------------------------------------- argmax / argmin reducers */

/* A scalar while probing a reducer: a float, an integer or a pred. */
typedef struct Probe {
    double f;
    int64_t i;
    bool is_float;
} Probe;

static int probe_cmp(const Probe *a, const Probe *b, bool *unordered)
{
    *unordered = false;
    if (a->is_float || b->is_float) {
        double x = a->is_float ? a->f : (double)a->i, y = b->is_float ? b->f : (double)b->i;
        if (isnan(x) || isnan(y)) {
            *unordered = true;
            return 0;
        }
        return x < y ? -1 : x > y;
    }
    return a->i < b->i ? -1 : a->i > b->i;
}

/* Evaluates c on args[0..4); writes the root tuple's two values; false for
 * an op the prober does not know. */
static bool probe_eval(const HloComputation *c, const Probe *args, Probe *out)
{
    if (c->n_insts > 64 || c->root < 0)
        return false;
    Probe v[64];
    for (int32_t i = 0; i < c->n_insts; i++) {
        const HloInst *in = &c->insts[i];
        const HloAttrs *a = hlo_attrs(in);
        const Probe *o[3] = {NULL, NULL, NULL};
        for (int32_t k = 0; k < in->n_operands && k < 3; k++) {
            if (in->operands[k] < 0 || in->operands[k] >= i)
                return false;
            o[k] = &v[in->operands[k]];
        }
        bool fl = elem_type_is_float(in->shape->type);
        Probe r = {0, 0, fl};
        switch (in->op) {
        case HLO_PARAMETER:
            if (in->param_number < 0 || in->param_number > 3)
                return false;
            r = args[in->param_number];
            break;
        case HLO_CONSTANT:
            if (!a->literal || a->literal->n != 1 || in->shape->rank != 0)
                return false;
            r.f = a->literal->f ? a->literal->f[0] : a->literal->i ? (double)a->literal->i[0] : 0;
            r.i = a->literal->i ? a->literal->i[0] : (int64_t)r.f;
            break;
        case HLO_COMPARE: {
            if (in->n_operands != 2 || a->compare_type)
                return false;
            bool un;
            int cmp = probe_cmp(o[0], o[1], &un);
            bool t = false;
            switch (a->direction) {
            case CMP_EQ: t = !un && cmp == 0; break;
            case CMP_NE: t = un || cmp != 0; break;
            case CMP_LT: t = !un && cmp < 0; break;
            case CMP_LE: t = !un && cmp <= 0; break;
            case CMP_GT: t = !un && cmp > 0; break;
            case CMP_GE: t = !un && cmp >= 0; break;
            }
            r.i = t;
            break;
        }
        case HLO_SELECT:
            if (in->n_operands != 3)
                return false;
            r = o[0]->i ? *o[1] : *o[2];
            break;
        case HLO_AND:
        case HLO_OR:
            if (in->n_operands != 2 || in->shape->type != ET_PRED)
                return false;
            r.i = in->op == HLO_AND ? (o[0]->i && o[1]->i) : (o[0]->i || o[1]->i);
            break;
        case HLO_NOT:
            if (in->n_operands != 1 || in->shape->type != ET_PRED)
                return false;
            r.i = !o[0]->i;
            break;
        case HLO_TUPLE:
            if (i != c->root || in->n_operands != 2)
                return false;
            out[0] = *o[0];
            out[1] = *o[1];
            return true;
        default: return false;
        }
        v[i] = r;
    }
    return false;
}

ReduceKind reducer_arg_kind(const HloModule *m, int32_t comp)
{
    if (comp < 0 || comp >= m->n_comps)
        return REDUCE_NONE;
    const HloComputation *c = &m->comps[comp];
    const HloInst *p0 = NULL;
    for (int32_t i = 0; i < c->n_insts; i++)
        if (c->insts[i].op == HLO_PARAMETER && c->insts[i].param_number == 0)
            p0 = &c->insts[i];
    if (!p0 || !shape_is_array(p0->shape) || p0->shape->rank != 0)
        return REDUCE_NONE;
    bool fl = elem_type_is_float(p0->shape->type);
    /* (a, ai, b, bi) probes; NaN ones for floats only */
    static const double probes[][4] = {{1, 3, 2, 5}, {2, 5, 1, 3}, {2, 3, 2, 7}, {2, 7, 2, 3}, {-1, 0, -3, 9},
                                       {-3, 9, -1, 0}, {4, 4, 4, 4}, {NAN, 4, 1, 2}, {1, 2, NAN, 4}, {NAN, 6, 3, 1}};
    ReduceKind kinds[2] = {REDUCE_MAX, REDUCE_MIN};
    for (int32_t kk = 0; kk < 2; kk++) {
        bool ok = true;
        for (size_t q = 0; q < sizeof probes / sizeof probes[0] && ok; q++) {
            const double *pr = probes[q];
            bool an = isnan(pr[0]), bn = isnan(pr[2]);
            if (!fl && (an || bn))
                continue;
            Probe args[4] = {{pr[0], (int64_t)(an ? 0 : pr[0]), fl}, {0, (int64_t)pr[1], false},
                             {pr[2], (int64_t)(bn ? 0 : pr[2]), fl}, {0, (int64_t)pr[3], false}};
            Probe out[2];
            if (!probe_eval(c, args, out))
                return REDUCE_NONE;
            /* the expected pick */
            int pick;
            if (an || bn)
                pick = an ? 0 : 2;
            else if (pr[0] == pr[2])
                pick = pr[1] <= pr[3] ? 0 : 2;
            else
                pick = (kinds[kk] == REDUCE_MAX) == (pr[0] > pr[2]) ? 0 : 2;
            double want = pr[pick];
            double got = out[0].is_float ? out[0].f : (double)out[0].i;
            ok = (isnan(want) ? isnan(got) : got == want) && out[1].i == (int64_t)pr[pick + 1];
        }
        if (ok)
            return kinds[kk];
    }
    return REDUCE_NONE;
}

/* Largest and lowest finite values of an integer type, as doubles (exact
 * for the types up to 32 bits; 64-bit ones round, which only a literal
 * compare sees). */
static void int_range(ElemType t, double *lo, double *hi)
{
    int bits = elem_type_bits(t);
    if (elem_type_is_unsigned_int(t)) {
        *lo = 0;
        *hi = ldexp(1.0, bits) - 1;
    } else {
        *lo = -ldexp(1.0, bits - 1);
        *hi = ldexp(1.0, bits - 1) - 1;
    }
}

bool reduce_identity(ReduceKind k, ElemType t, double *out)
{
    double lo = -INFINITY, hi = INFINITY;
    if (elem_type_is_integral(t))
        int_range(t, &lo, &hi);
    else if (t == ET_PRED) {
        lo = 0;
        hi = 1;
    }
    switch (k) {
    case REDUCE_SUM: /* floats: -0.0, the exact identity (x + -0.0 is x also for x = -0.0; +0.0 is not) */
        *out = elem_type_is_float(t) || elem_type_is_complex(t) ? -0.0 : 0;
        return true;
    case REDUCE_OR: *out = 0; return true;
    case REDUCE_PROD: *out = 1; return true;
    case REDUCE_AND: /* every bit set: true, -1 for signed integers, the top value for unsigned ones */
        *out = elem_type_is_signed_int(t) ? -1 : elem_type_is_integral(t) ? hi : 1;
        return true;
    case REDUCE_MAX: *out = lo; return true;
    case REDUCE_MIN: *out = hi; return true;
    case REDUCE_NONE: break;
    }
    return false;
}

bool is_reduce_identity(const HloModule *m, int32_t c, int32_t i, ReduceKind k)
{
    if (k == REDUCE_MAX || k == REDUCE_MIN || k == REDUCE_AND || k == REDUCE_OR)
        return true; /* idempotent: combining the init value twice changes nothing */
    const HloInst *init = hlo_inst(m, c, i);
    const Literal *l = hlo_attrs(init)->literal;
    if (init->op != HLO_CONSTANT || !l || l->elided || l->n != 1 || !shape_is_array(init->shape) ||
        elem_type_is_complex(init->shape->type))
        return false;
    double v = l->f ? l->f[0] : l->i ? (double)l->i[0] : NAN, want;
    return reduce_identity(k, init->shape->type, &want) && v == want;
}

bool op_partial_passes(const HloModule *m, int32_t c, int32_t i, ReduceKind k, uint32_t carriers)
{
    const HloComputation *comp = hlo_comp(m, c);
    const HloInst *in = &comp->insts[i];
    const OpAlgebra *alg = op_algebra(in->op);
    if (k == REDUCE_NONE || carriers == 0 || in->n_operands > 31)
        return false;
    uint32_t all = (1u << in->n_operands) - 1;
    if (carriers & ~all)
        return false;
    const Shape *res = in->shape;
    /* the carriers' element type must be the result's: a widening or
     * narrowing op would have reduced in another type */
    for (int32_t j = 0; j < in->n_operands; j++) {
        const Shape *os = comp->insts[in->operands[j]].shape;
        if ((carriers >> j) & 1u) {
            if (shape_is_array(res) && (!shape_is_array(os) || os->type != res->type))
                return false;
        }
    }
    switch ((PartialRule)alg->partial) {
    case PARTIAL_CLOSES: return false;
    case PARTIAL_UNARY: return k == REDUCE_SUM && carriers == 1;
    case PARTIAL_ALL:
        if (in->op == HLO_SELECT)
            return carriers == 6 && (k == REDUCE_SUM || k == REDUCE_MAX || k == REDUCE_MIN);
        if (carriers != all)
            return false;
        switch (in->op) {
        case HLO_ADD: return k == REDUCE_SUM;
        case HLO_SUBTRACT: /* a pred sum is an OR (a dot's), and pred subtract an XOR: not linear in it */
            return k == REDUCE_SUM && !(shape_is_array(res) && res->type == ET_PRED);
        case HLO_MAXIMUM: return k == REDUCE_MAX;
        case HLO_MINIMUM: return k == REDUCE_MIN;
        case HLO_AND: return k == REDUCE_AND;
        case HLO_OR: return k == REDUCE_OR;
        default: return false;
        }
    case PARTIAL_ONE:
        if (in->op == HLO_MULTIPLY && k == REDUCE_PROD)
            return carriers == all; /* prod(a) * prod(b) = prod(a * b) */
        if (carriers != 1u && carriers != 2u)
            return false;
        if (in->op == HLO_MULTIPLY) /* sum(a) * b = sum(a * b): a ring, also with wrapping integers */
            return k == REDUCE_SUM;
        /* divide: sum(a)/b = sum(a/b) for floats only; integer division rounds */
        return in->op == HLO_DIVIDE && carriers == 1u && k == REDUCE_SUM && shape_is_array(res) &&
               (elem_type_is_float(res->type) || elem_type_is_complex(res->type));
    case PARTIAL_CONTRACT: /* linear in lhs and in rhs; never in ragged-dot's group sizes */
        return k == REDUCE_SUM && carriers < 4u && in->n_operands >= 2 && shape_is_array(res) &&
               contraction_sums_in_result(res->type, comp->insts[in->operands[0]].shape->type,
                                          comp->insts[in->operands[1]].shape->type);
    case PARTIAL_REDUCE: /* reduce(sum(x)) = sum(reduce(x)) for the same reduction, init its identity */
        return carriers == 1u && in->n_operands == 2 && reducer_kind(m, hlo_attrs(in)->to_apply) == k &&
               is_reduce_identity(m, c, in->operands[1], k);
    case PARTIAL_MOVE:
        switch (in->op) {
        case HLO_CONVERT: {
            const Shape *os = comp->insts[in->operands[0]].shape;
            return shape_is_array(os) && shape_is_array(res) && os->type == res->type;
        }
        case HLO_PAD: /* the padding value must be the reduction's identity (max/min: any) */
            return carriers == 1u && is_reduce_identity(m, c, in->operands[1], k);
        case HLO_CONCATENATE:
        case HLO_TUPLE: return carriers == all;
        case HLO_DYNAMIC_UPDATE_SLICE: return carriers == 3u; /* operand and update alike */
        default: return carriers == 1u; /* the data operand only, never an index */
        }
    }
    return false;
}
