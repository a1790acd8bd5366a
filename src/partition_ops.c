/* partition_ops.c - the per-opcode handlers of the SPMD partitioner.
 *
 * part_handle(p, i) partitions input entry instruction i: it decides the
 * state (Tiling) in which to compute the op on every device, asks for its
 * operands in the states that requires (part_operand reshards them through
 * reshard.c), emits the local op and records the result's state, which may
 * differ from the instruction's declared sharding (a dot or reduce over a
 * split dim leaves a pending partial sum; the consumers decide later how it
 * is reduced).  Where several states would do, the handler tries a few
 * candidates (the declared sharding, the operands' current states, ...) and
 * keeps the one whose reshards cost the fewest bytes per device
 * (comm_bytes_per_device, the report's model), then the least local work.
 *
 * An opcode without a handler takes default_action: every operand is
 * gathered to full size, the op runs unpartitioned on every device, and the
 * result is sliced later by its consumers.  A handler that cannot keep some
 * operand dims split declares them in p->limit_dims before asking for its
 * operands; part_get (partition.c) then warns "full-rematerialization" when
 * that brings a split value whole to every device.
 */
#include <math.h>
#include <string.h>

#include "partition_internal.h"

#define MAX_CANDS 96

static Tiling strip_partial(Tiling s)
{
    s.partial = 0;
    s.kind = REDUCE_NONE;
    return s;
}

/* Operand k's current (primary) state, leaf 0. */
static Tiling operand_state(const Part *p, int32_t i, int32_t k)
{
    return part_primary(p, part_in(p, i)->operands[k])->leaves[0];
}

static const Shape *operand_shape(const Part *p, int32_t i, int32_t k)
{
    return &part_in(p, part_in(p, i)->operands[k])->shape;
}

static Tiling decl0(const Part *p, int32_t i)
{
    Tiling s;
    part_decl(p, i, 0, &s);
    return s;
}

static double local_elems(const Part *p, const Tiling *s, const Shape *global)
{
    Shape l = tiling_local_shape(s, p->mesh, global);
    double e = 1;
    for (int32_t d = 0; d < l.rank; d++)
        e *= (double)l.dims[d];
    return e;
}

/* Cost of bringing the result from state res to its declared state. */
static int64_t result_cost(const Part *p, int32_t i, const Tiling *res)
{
    Tiling d = decl0(p, i);
    return reshard_cost(p->mesh, &part_in(p, i)->shape, res, &d);
}

static bool add_cand(Tiling *cands, int32_t *n, const Tiling *s)
{
    for (int32_t k = 0; k < *n; k++)
        if (tiling_equal(&cands[k], s))
            return false;
    if (*n >= MAX_CANDS)
        return false;
    cands[(*n)++] = *s;
    return true;
}

static bool better(int64_t bytes, double work, int64_t best_bytes, double best_work)
{
    return bytes < best_bytes || (bytes == best_bytes && work < best_work);
}

/* Tiling s with the dims in mask unsplit. */
static Tiling clear_dims(Tiling s, uint32_t mask)
{
    for (int32_t d = 0; d < s.rank; d++)
        if (mask & (1u << d))
            tiling_set_dim(&s, d, NULL, 0);
    return s;
}

static Tiling *replicated_leaves(Part *p, const Shape *s, int32_t *n_out)
{
    int32_t n = shape_leaf_count(s);
    Tiling *r = ARENA_ARRAY(p->scratch, Tiling, n ? n : 1);
    int32_t k = 0;
    const Shape *stack[64];
    int32_t sp = 0;
    stack[sp++] = s;
    /* Leaves in flat (depth-first) order. */
    while (sp > 0 && k < n) {
        const Shape *t = stack[--sp];
        if (shape_is_tuple(t)) {
            for (int32_t e = t->n_elems - 1; e >= 0 && sp < 64; e--)
                stack[sp++] = &t->elems[e];
        } else {
            tiling_replicated(&r[k++], t->rank);
        }
    }
    if (n_out)
        *n_out = n;
    return r;
}

/* ================================================================ default */

static bool default_action(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    int32_t *ops = ARENA_ARRAY(p->scratch, int32_t, in->n_operands ? in->n_operands : 1);
    p->limit_dims = PART_LIMIT_ALL;
    for (int32_t k = 0; k < in->n_operands; k++) {
        Tiling *want = replicated_leaves(p, &part_in(p, in->operands[k])->shape, NULL);
        ops[k] = part_operand(p, i, k, want);
        if (ops[k] < 0)
            return false;
    }
    Tiling *leaves = replicated_leaves(p, &in->shape, NULL);
    int32_t r = part_clone(p, i, part_result_name(p, i, leaves, "full"), &in->shape, ops, in->n_operands);
    part_set_result(p, i, r, leaves, -1, NULL);
    return true;
}

/* ================================================================ leaves */

static bool h_parameter(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    Tiling *leaves = part_decl_leaves(p, i);
    Shape l = part_local_shape(p, &in->shape, leaves);
    int32_t r = part_clone(p, i, in->name, &l, NULL, 0);
    part_set_result(p, i, r, leaves, -1, NULL);
    return true;
}

static bool h_constant(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    Tiling *full = replicated_leaves(p, &in->shape, NULL);
    int32_t r = part_clone(p, i, part_result_name(p, i, full, "full"), &in->shape, NULL, 0);
    part_set_result(p, i, r, full, -1, NULL);
    return true;
}

/* iota split along its iota dim: local iota + this device's offset. */
static bool h_iota(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    Tiling o = decl0(p, i);
    int32_t d = (int32_t)hlo_attrs(in)->iota_dimension;
    ElemType t = in->shape.type;
    bool numeric = elem_type_is_integral(t) || elem_type_is_float(t);
    if (!shape_is_array(&in->shape) || o.partial || !numeric || d < 0 || d >= in->shape.rank)
        return h_constant(p, i);
    Shape l = tiling_local_shape(&o, p->mesh, &in->shape);
    if (tiling_dim_n(&o, d) == 0) {
        int32_t r = part_clone(p, i, part_result_name(p, i, &o, "local"), &l, NULL, 0);
        part_set_result(p, i, r, &o, -1, NULL);
        return true;
    }
    int32_t li = part_clone(p, i, part_name(p, in->name, "local-iota"), &l, NULL, 0);
    int32_t off = part_offset(p, tiling_dim(&o, d), tiling_dim_n(&o, d), l.dims[d], in->name);
    if (t != ET_S32) {
        Shape s = shape_scalar(t);
        off = part_emit(p, HLO_CONVERT, part_name(p, in->name, "iota-offset"), &s, &off, 1);
    }
    int32_t b = part_emit(p, HLO_BROADCAST, part_name(p, in->name, "iota-offset-broadcast"), &l, &off, 1);
    int32_t ab[2] = {li, b};
    int32_t r = part_emit(p, HLO_ADD, part_result_name(p, i, &o, "local"), &l, ab, 2);
    part_set_result(p, i, r, &o, -1, NULL);
    return true;
}

/* ================================================================ elementwise */

/* Whether a pending reduction of kind k passes through op when exactly the
 * operands in `carriers` (bit k: operand k) are partial and the others are
 * the same on every device of the reduction group:
 * sum(a)+sum(b) = sum(a+b), sum(a)*b = sum(a*b), -sum(a) = sum(-a),
 * max(max(a), b) = max(max(a, b)), ... */
static bool passes_partial(HloOpcode op, ReduceKind k, uint32_t carriers, int32_t n_ops)
{
    bool all = carriers == (1u << n_ops) - 1;
    switch (op) {
    case HLO_ADD:
    case HLO_SUBTRACT: return k == REDUCE_SUM && all;
    case HLO_MULTIPLY: return (k == REDUCE_SUM && (carriers == 1 || carriers == 2)) || (k == REDUCE_PROD && all);
    case HLO_DIVIDE: return k == REDUCE_SUM && carriers == 1;
    case HLO_NEGATE: return k == REDUCE_SUM;
    case HLO_MAXIMUM: return k == REDUCE_MAX;
    case HLO_MINIMUM: return k == REDUCE_MIN;
    case HLO_AND: return k == REDUCE_AND;
    case HLO_OR: return k == REDUCE_OR;
    default: return false;
    }
}

/* The operands whose current state is partial, if the op lets that pending
 * reduction through (all of them partial over the same atoms, same kind);
 * 0 otherwise.  *state: one carrier's state. */
static uint32_t partial_carriers(const Part *p, int32_t i, Tiling *state)
{
    const HloInst *in = part_in(p, i);
    uint32_t carriers = 0;
    if (in->n_operands > 8)
        return 0;
    for (int32_t k = 0; k < in->n_operands; k++) {
        Tiling s = operand_state(p, i, k);
        if (!s.partial)
            continue;
        if (operand_shape(p, i, k)->rank != in->shape.rank || (carriers && (s.partial != state->partial ||
                                                                            s.kind != state->kind)))
            return 0;
        *state = s;
        carriers |= 1u << k;
    }
    if (!carriers || !passes_partial(in->op, (ReduceKind)state->kind, carriers, in->n_operands))
        return 0;
    return carriers;
}

/* The partial candidates: the declared state or an operand's, carrying the
 * pending reduction through. */
static void partial_cands(const Part *p, int32_t i, Tiling *cands, int32_t *nc)
{
    const HloInst *in = part_in(p, i);
    Tiling a;
    if (!partial_carriers(p, i, &a))
        return;
    Tiling c = strip_partial(decl0(p, i));
    c.partial = a.partial;
    c.kind = a.kind;
    if (tiling_valid(&c))
        add_cand(cands, nc, &c);
    for (int32_t k = 0; k < in->n_operands; k++) {
        if (operand_shape(p, i, k)->rank != in->shape.rank)
            continue;
        c = strip_partial(operand_state(p, i, k));
        c.partial = a.partial;
        c.kind = a.kind;
        if (tiling_valid(&c))
            add_cand(cands, nc, &c);
    }
}

/* The state operand k must be in for the op to run in state c. */
static Tiling elementwise_want(const Part *p, int32_t i, int32_t k, const Tiling *c, uint32_t carriers)
{
    Tiling want;
    const Shape *os = operand_shape(p, i, k);
    if (os->rank != part_in(p, i)->shape.rank)
        tiling_replicated(&want, os->rank);
    else if (c->partial && !(carriers & (1u << k)))
        want = strip_partial(*c);
    else
        want = *c;
    return want;
}

static int64_t elementwise_cost(Part *p, int32_t i, const Tiling *c, uint32_t carriers)
{
    const HloInst *in = part_in(p, i);
    int64_t bytes = result_cost(p, i, c);
    for (int32_t k = 0; k < in->n_operands && bytes < PART_INF_COST; k++) {
        if (c->partial && operand_shape(p, i, k)->rank != in->shape.rank)
            return PART_INF_COST;
        Tiling want = elementwise_want(p, i, k, c, carriers);
        bytes += part_cost(p, in->operands[k], &want);
    }
    return bytes;
}

static bool h_elementwise(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    if (!shape_is_array(&in->shape))
        return default_action(p, i);
    Tiling cands[MAX_CANDS], carrier;
    int32_t nc = 0;
    Tiling o = decl0(p, i), os = strip_partial(o);
    add_cand(cands, &nc, &o);
    add_cand(cands, &nc, &os);
    for (int32_t k = 0; k < in->n_operands; k++) {
        if (operand_shape(p, i, k)->rank != in->shape.rank)
            continue;
        Tiling s = strip_partial(operand_state(p, i, k));
        add_cand(cands, &nc, &s);
    }
    uint32_t carriers = partial_carriers(p, i, &carrier);
    partial_cands(p, i, cands, &nc);
    int32_t best = -1;
    int64_t best_bytes = PART_INF_COST;
    double best_work = HUGE_VAL;
    for (int32_t c = 0; c < nc; c++) {
        int64_t bytes = elementwise_cost(p, i, &cands[c], carriers);
        double work = local_elems(p, &cands[c], &in->shape);
        if (bytes < PART_INF_COST && better(bytes, work, best_bytes, best_work)) {
            best = c;
            best_bytes = bytes;
            best_work = work;
        }
    }
    if (best < 0)
        return default_action(p, i);
    const Tiling *c = &cands[best];
    int32_t *opv = ARENA_ARRAY(p->scratch, int32_t, in->n_operands ? in->n_operands : 1);
    for (int32_t k = 0; k < in->n_operands; k++) {
        Tiling want = elementwise_want(p, i, k, c, carriers);
        if ((opv[k] = part_operand(p, i, k, &want)) < 0)
            return false;
    }
    Shape l = tiling_local_shape(c, p->mesh, &in->shape);
    int32_t r = part_clone(p, i, part_result_name(p, i, c, c->partial ? "partial" : "local"), &l, opv, in->n_operands);
    const VState *src = NULL;
    for (int32_t k = 0; k < in->n_operands && c->partial && !src; k++)
        if (carriers & (1u << k))
            src = part_primary(p, in->operands[k]);
    part_set_result(p, i, r, c, src ? src->origin : -1, src ? src->origin_reason : NULL);
    return true;
}

/* ================================================================ dot */

typedef struct DotDims {
    int32_t nb, nc, nlf, nrf;
    int64_t lb[SPMDC_MAX_RANK], rb[SPMDC_MAX_RANK], lc[SPMDC_MAX_RANK], rc[SPMDC_MAX_RANK];
    int64_t lf[SPMDC_MAX_RANK], rf[SPMDC_MAX_RANK];
} DotDims;

static int32_t free_dims(int32_t rank, const IntList *a, const IntList *b, int64_t *out)
{
    int32_t n = 0;
    for (int32_t d = 0; d < rank; d++) {
        bool used = false;
        for (int32_t k = 0; k < a->n; k++)
            used |= a->v[k] == d;
        for (int32_t k = 0; k < b->n; k++)
            used |= b->v[k] == d;
        if (!used)
            out[n++] = d;
    }
    return n;
}

static bool dot_dims(const Part *p, int32_t i, DotDims *dd)
{
    const HloInst *in = part_in(p, i);
    const HloAttrs *a = hlo_attrs(in);
    const Shape *ls = operand_shape(p, i, 0), *rs = operand_shape(p, i, 1);
    if (!shape_is_array(ls) || !shape_is_array(rs) || !shape_is_array(&in->shape))
        return false;
    if (a->lhs_batch.n != a->rhs_batch.n || a->lhs_contracting.n != a->rhs_contracting.n)
        return false;
    dd->nb = a->lhs_batch.n;
    dd->nc = a->lhs_contracting.n;
    for (int32_t k = 0; k < dd->nb; k++) {
        dd->lb[k] = a->lhs_batch.v[k];
        dd->rb[k] = a->rhs_batch.v[k];
    }
    for (int32_t k = 0; k < dd->nc; k++) {
        dd->lc[k] = a->lhs_contracting.v[k];
        dd->rc[k] = a->rhs_contracting.v[k];
    }
    dd->nlf = free_dims(ls->rank, &a->lhs_batch, &a->lhs_contracting, dd->lf);
    dd->nrf = free_dims(rs->rank, &a->rhs_batch, &a->rhs_contracting, dd->rf);
    return dd->nb + dd->nlf + dd->nrf == in->shape.rank;
}

enum { SRC_L, SRC_R, SRC_O, SRC_NONE };

typedef struct DotCand {
    Tiling l, r, out;
} DotCand;

/* Puts atoms on dim d of s unless some atom is already used. */
static bool put(Tiling *s, int32_t d, const int8_t *atoms, int32_t n, uint32_t *used)
{
    for (int32_t k = 0; k < n; k++) {
        if (*used & (1u << atoms[k]))
            return false;
        *used |= 1u << atoms[k];
    }
    tiling_set_dim(s, d, atoms, n);
    return true;
}

/* The atoms source `src` gives the dims of group g (0 batch, 1 contracting,
 * 2 lhs-free, 3 rhs-free), as a Tiling whose dim k is the group's k-th dim. */
static void group_assign(const DotDims *dd, int32_t g, int src, const Tiling *L, const Tiling *R, const Tiling *O,
                         Tiling *out)
{
    int32_t n = g == 0 ? dd->nb : g == 1 ? dd->nc : g == 2 ? dd->nlf : dd->nrf;
    tiling_replicated(out, n);
    for (int32_t k = 0; k < n; k++) {
        const Tiling *s = NULL;
        int32_t d = 0;
        if (src == SRC_L) {
            s = L;
            d = (int32_t)(g == 0 ? dd->lb[k] : g == 1 ? dd->lc[k] : dd->lf[k]);
        } else if (src == SRC_R) {
            s = R;
            d = (int32_t)(g == 0 ? dd->rb[k] : g == 1 ? dd->rc[k] : dd->rf[k]);
        } else if (src == SRC_O) {
            s = O;
            d = g == 0 ? k : g == 2 ? dd->nb + k : dd->nb + dd->nlf + k;
        }
        if (s)
            tiling_set_dim(out, k, tiling_dim(s, d), tiling_dim_n(s, d));
    }
}

static bool dot_build(const DotDims *dd, const Tiling *L, const Tiling *R, const Tiling *O, const int src[4], DotCand *c)
{
    tiling_replicated(&c->l, L->rank);
    tiling_replicated(&c->r, R->rank);
    tiling_replicated(&c->out, O->rank);
    uint32_t used = 0, partial = 0;
    Tiling g;
    group_assign(dd, 0, src[0], L, R, O, &g);
    for (int32_t k = 0; k < dd->nb; k++) {
        if (!put(&c->out, k, tiling_dim(&g, k), tiling_dim_n(&g, k), &used))
            return false;
        tiling_set_dim(&c->l, (int32_t)dd->lb[k], tiling_dim(&g, k), tiling_dim_n(&g, k));
        tiling_set_dim(&c->r, (int32_t)dd->rb[k], tiling_dim(&g, k), tiling_dim_n(&g, k));
    }
    group_assign(dd, 1, src[1], L, R, O, &g);
    for (int32_t k = 0; k < dd->nc; k++) {
        uint32_t before = used;
        if (!put(&c->l, (int32_t)dd->lc[k], tiling_dim(&g, k), tiling_dim_n(&g, k), &used))
            return false;
        tiling_set_dim(&c->r, (int32_t)dd->rc[k], tiling_dim(&g, k), tiling_dim_n(&g, k));
        partial |= used & ~before;
    }
    group_assign(dd, 2, src[2], L, R, O, &g);
    for (int32_t k = 0; k < dd->nlf; k++) {
        if (!put(&c->l, (int32_t)dd->lf[k], tiling_dim(&g, k), tiling_dim_n(&g, k), &used))
            return false;
        tiling_set_dim(&c->out, dd->nb + k, tiling_dim(&g, k), tiling_dim_n(&g, k));
    }
    group_assign(dd, 3, src[3], L, R, O, &g);
    for (int32_t k = 0; k < dd->nrf; k++) {
        if (!put(&c->r, (int32_t)dd->rf[k], tiling_dim(&g, k), tiling_dim_n(&g, k), &used))
            return false;
        tiling_set_dim(&c->out, dd->nb + dd->nlf + k, tiling_dim(&g, k), tiling_dim_n(&g, k));
    }
    c->out.partial = partial;
    c->out.kind = partial ? REDUCE_SUM : REDUCE_NONE;
    return true;
}

/* Per group, the sources that give distinct atom assignments (first wins). */
static int32_t group_sources(const DotDims *dd, int32_t g, const Tiling *L, const Tiling *R, const Tiling *O, int *out)
{
    static const int options[4][3] = {{SRC_O, SRC_L, SRC_R}, {SRC_L, SRC_R, SRC_NONE},
                                      {SRC_O, SRC_L, SRC_NONE}, {SRC_O, SRC_R, SRC_NONE}};
    Tiling seen[3];
    int32_t n = 0;
    for (int32_t k = 0; k < 3; k++) {
        Tiling a;
        group_assign(dd, g, options[g][k], L, R, O, &a);
        bool dup = false;
        for (int32_t j = 0; j < n; j++)
            dup |= tiling_equal(&seen[j], &a);
        if (dup)
            continue;
        seen[n] = a;
        out[n++] = options[g][k];
    }
    return n;
}

static double dot_work(const Part *p, const DotDims *dd, const DotCand *c, int32_t i)
{
    double w = local_elems(p, &c->out, &part_in(p, i)->shape);
    const Shape *ls = operand_shape(p, i, 0);
    for (int32_t k = 0; k < dd->nc; k++)
        w *= (double)ls->dims[dd->lc[k]] / (double)tiling_dim_tiles(&c->l, p->mesh, (int32_t)dd->lc[k]);
    return w;
}

/* Appends the dims among dims[0..n) of operand k of i that are split in
 * state s, each traced to the annotation that split it (part_split_origin):
 * "dim 1 of lhs h sharded on 'model' (from the annotation on a, line 31)",
 * "dim 1 of x sharded on 'x', dim 2 on 'y' (annotated, line 3)"; one
 * parenthesis when the dims agree, else one per dim.  role: "lhs ", "".
 * axes: say which axes split each dim.  False (nothing appended) if no dim
 * is split. */
static bool put_split_dims(Part *p, StrBuf *b, int32_t i, int32_t k, const Tiling *s, const int64_t *dims, int32_t n,
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
        if (!started)
            sb_printf(b, "dim %d of %s%s%s", (int)d, role, part_in(p, v)->name, axes ? " sharded" : "");
        else
            sb_printf(b, ", dim %d", (int)d);
        started = true;
        if (axes) {
            sb_puts(b, " on '");
            mesh_atoms_name(b, p->mesh, tiling_dim(s, d), tiling_dim_n(s, d));
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
 * on a, line 31) and dim 0 of rhs b (annotated, line 32)". */
static const char *dot_partial_reason(Part *p, int32_t i, const DotDims *dd, const Tiling *l, const Tiling *r)
{
    StrBuf b = {0};
    sb_printf(&b, "%s: contracting ", part_in(p, i)->name);
    if (!put_split_dims(p, &b, i, 0, l, dd->lc, dd->nc, "lhs ", true))
        sb_puts(&b, "dims");
    StrBuf t = {0};
    if (put_split_dims(p, &t, i, 1, r, dd->rc, dd->nc, "rhs ", false))
        sb_printf(&b, " and %s", sb_cstr(&t));
    const char *res = arena_strdup(p->scratch, sb_cstr(&b));
    sb_free(&t);
    sb_free(&b);
    return res;
}

/* pass 1 (2): the lhs's (rhs's) pending sum goes through the dot, which is
 * linear in it, when the candidate leaves those atoms unused elsewhere (the
 * other operand is the same on all devices of the sum). */
static bool dot_pass_partial(const Part *p, int32_t i, int pass, DotCand *dc)
{
    if (pass == 0)
        return true;
    Tiling s = operand_state(p, i, pass - 1);
    uint32_t busy = tiling_used(&dc->l) | tiling_used(&dc->r) | tiling_used(&dc->out) | dc->out.partial;
    if (!s.partial || s.kind != REDUCE_SUM || (s.partial & busy))
        return false;
    Tiling *opnd = pass == 1 ? &dc->l : &dc->r;
    opnd->partial = s.partial;
    opnd->kind = REDUCE_SUM;
    dc->out.partial |= s.partial;
    dc->out.kind = REDUCE_SUM;
    return true;
}

static bool dot_choose(Part *p, int32_t i, const DotDims *dd, DotCand *best)
{
    const HloInst *in = part_in(p, i);
    Tiling L = strip_partial(operand_state(p, i, 0)), R = strip_partial(operand_state(p, i, 1)), O = decl0(p, i);
    const Shape *ls = operand_shape(p, i, 0), *rs = operand_shape(p, i, 1);
    int opts[4][3], nopt[4];
    for (int32_t g = 0; g < 4; g++)
        nopt[g] = group_sources(dd, g, &L, &R, &O, opts[g]);
    int64_t best_bytes = PART_INF_COST;
    double best_work = HUGE_VAL;
    bool found = false;
    /* every (batch, contracting, lhs-free, rhs-free) source, and which
     * operand's pending sum passes through (none, lhs, rhs); first wins ties */
    int32_t total = nopt[0] * nopt[1] * nopt[2] * nopt[3] * 3;
    for (int32_t k = 0; k < total; k++) {
        int32_t x = k / 3, pass = k % 3;
        int src[4];
        for (int32_t g = 3; g >= 0; g--) {
            src[g] = opts[g][x % nopt[g]];
            x /= nopt[g];
        }
        DotCand dc;
        if (!dot_build(dd, &L, &R, &O, src, &dc) || !dot_pass_partial(p, i, pass, &dc) ||
            !tiling_is_even(&dc.l, p->mesh, ls, NULL) || !tiling_is_even(&dc.r, p->mesh, rs, NULL) ||
            !tiling_is_even(&dc.out, p->mesh, &in->shape, NULL))
            continue;
        int64_t bytes = part_cost(p, in->operands[0], &dc.l);
        if (bytes < PART_INF_COST)
            bytes += part_cost(p, in->operands[1], &dc.r);
        if (bytes < PART_INF_COST)
            bytes += result_cost(p, i, &dc.out);
        double work = dot_work(p, dd, &dc, i);
        if (bytes < PART_INF_COST && better(bytes, work, best_bytes, best_work)) {
            *best = dc;
            best_bytes = bytes;
            best_work = work;
            found = true;
        }
    }
    return found;
}

static bool h_dot(Part *p, int32_t i)
{
    DotDims dd;
    DotCand c;
    if (!dot_dims(p, i, &dd) || !dot_choose(p, i, &dd, &c))
        return default_action(p, i);
    const HloInst *in = part_in(p, i);
    int32_t ops[2];
    if ((ops[0] = part_operand(p, i, 0, &c.l)) < 0 || (ops[1] = part_operand(p, i, 1, &c.r)) < 0)
        return false;
    Shape l = tiling_local_shape(&c.out, p->mesh, &in->shape);
    int32_t r = part_clone(p, i, part_result_name(p, i, &c.out, c.out.partial ? "partial" : "local"), &l, ops, 2);
    uint32_t own = c.out.partial & ~(c.l.partial | c.r.partial);
    const VState *src = !own && c.out.partial ? part_primary(p, in->operands[c.l.partial ? 0 : 1]) : NULL;
    const char *why = src ? src->origin_reason : NULL;
    if (own && p->rep) /* words only for the report */
        why = dot_partial_reason(p, i, &dd, &c.l, &c.r);
    part_set_result(p, i, r, &c.out, own ? i : src ? src->origin : -1, why);
    return true;
}

/* ================================================================ reduce */

ReduceKind part_reducer_kind(const HloModule *m, int32_t comp)
{
    if (comp < 0 || comp >= m->n_comps)
        return REDUCE_NONE;
    const HloComputation *c = &m->comps[comp];
    if (c->root < 0)
        return REDUCE_NONE;
    const HloInst *r = &c->insts[c->root];
    if (r->n_operands != 2)
        return REDUCE_NONE;
    const HloInst *a = &c->insts[r->operands[0]], *b = &c->insts[r->operands[1]];
    if (a->op != HLO_PARAMETER || b->op != HLO_PARAMETER ||
        hlo_attrs(a)->param_number == hlo_attrs(b)->param_number)
        return REDUCE_NONE;
    switch (r->op) {
    case HLO_ADD: return REDUCE_SUM;
    case HLO_MAXIMUM: return REDUCE_MAX;
    case HLO_MINIMUM: return REDUCE_MIN;
    case HLO_MULTIPLY: return REDUCE_PROD;
    case HLO_AND: return REDUCE_AND;
    case HLO_OR: return REDUCE_OR;
    default: return REDUCE_NONE;
    }
}

/* Whether init is the identity of kind (so partial results can be combined). */
static bool init_is_identity(const HloInst *init, ReduceKind kind)
{
    if (kind == REDUCE_MAX || kind == REDUCE_MIN)
        return true;
    const Literal *l = hlo_attrs(init)->literal;
    if (init->op != HLO_CONSTANT || !l || l->elided || l->n != 1 || !shape_is_array(&init->shape))
        return false;
    double v = l->f ? l->f[0] : l->i ? (double)l->i[0] : NAN;
    switch (kind) {
    case REDUCE_SUM:
    case REDUCE_OR: return v == 0;
    case REDUCE_PROD:
    case REDUCE_AND: return v == 1;
    default: return false;
    }
}

typedef struct ReduceCand {
    Tiling opnd, out;
} ReduceCand;

/* keep: kept dims from X (0) or from the declared output (1); red: reduced
 * dims keep X's atoms (-> partial) or are gathered; pass: X's own pending
 * partial passes through. */
static bool reduce_build(const HloInst *in, const Tiling *X, const Tiling *O, int keep, bool red, bool pass,
                         ReduceKind kind, ReduceCand *c)
{
    const HloAttrs *a = hlo_attrs(in);
    uint32_t rmask = 0;
    for (int32_t k = 0; k < a->dimensions.n; k++)
        rmask |= 1u << a->dimensions.v[k];
    tiling_replicated(&c->opnd, X->rank);
    tiling_replicated(&c->out, O->rank);
    uint32_t used = 0;
    int32_t od = 0;
    for (int32_t d = 0; d < X->rank; d++) {
        if (rmask & (1u << d)) {
            if (red && !put(&c->opnd, d, tiling_dim(X, d), tiling_dim_n(X, d), &used))
                return false;
            continue;
        }
        const Tiling *s = keep == 0 ? X : O;
        int32_t sd = keep == 0 ? d : od;
        if (!put(&c->opnd, d, tiling_dim(s, sd), tiling_dim_n(s, sd), &used))
            return false;
        tiling_set_dim(&c->out, od++, tiling_dim(s, sd), tiling_dim_n(s, sd));
    }
    uint32_t partial = red ? (used & ~tiling_used(&c->out)) : 0;
    if (pass) {
        if (X->kind != kind || (X->partial & used))
            return false;
        c->opnd.partial = X->partial;
        c->opnd.kind = X->kind;
        partial |= X->partial;
    }
    c->out.partial = partial;
    c->out.kind = partial ? kind : REDUCE_NONE;
    return !(partial && kind == REDUCE_NONE);
}

/* The cheapest way to run reduce i: kept dims from the operand's or the
 * declared state, reduced dims split (partial result) or gathered, the
 * operand's own partial passed through or reduced first. */
static bool reduce_choose(Part *p, int32_t i, ReduceKind kind, bool ident, ReduceCand *best)
{
    const HloInst *in = part_in(p, i);
    Tiling Xp = operand_state(p, i, 0), X = strip_partial(Xp), O = decl0(p, i);
    const Shape *xs = operand_shape(p, i, 0);
    ReduceCand c;
    int64_t best_bytes = PART_INF_COST;
    double best_work = HUGE_VAL;
    for (int keep = 0; keep < 2; keep++)
        for (int red = 0; red < 2; red++)
            for (int pass = 0; pass < 2; pass++) {
                if (((red || pass) && !ident) || (pass && !Xp.partial))
                    continue;
                if (!reduce_build(in, pass ? &Xp : &X, &O, keep, red, pass, kind, &c) ||
                    !tiling_is_even(&c.opnd, p->mesh, xs, NULL))
                    continue;
                int64_t bytes = part_cost(p, in->operands[0], &c.opnd);
                if (bytes < PART_INF_COST)
                    bytes += result_cost(p, i, &c.out);
                double work = local_elems(p, &c.opnd, xs);
                if (bytes < PART_INF_COST && better(bytes, work, best_bytes, best_work)) {
                    *best = c;
                    best_bytes = bytes;
                    best_work = work;
                }
            }
    return best_bytes < PART_INF_COST;
}

/* Why the result of reduce i is partial: its own split reduced dims, or
 * the operand's pending partial passed through. */
static const char *reduce_origin(Part *p, int32_t i, const ReduceCand *c, int32_t *origin)
{
    const HloInst *in = part_in(p, i);
    uint32_t own = c->out.partial & ~c->opnd.partial;
    *origin = -1;
    if (own && !p->rep) { /* words only for the report */
        *origin = i;
        return NULL;
    }
    if (own) {
        const IntList *dims = &hlo_attrs(in)->dimensions;
        StrBuf b = {0};
        sb_printf(&b, "%s: reduced ", in->name);
        if (!put_split_dims(p, &b, i, 0, &c->opnd, dims->v, dims->n, "", true))
            sb_puts(&b, "dims");
        *origin = i;
        const char *r = arena_strdup(p->scratch, sb_cstr(&b));
        sb_free(&b);
        return r;
    }
    if (!c->out.partial)
        return NULL;
    const VState *src = part_primary(p, in->operands[0]);
    *origin = src->origin;
    return src->origin_reason;
}

static bool h_reduce(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    if (in->n_operands != 2 || !shape_is_array(&in->shape))
        return default_action(p, i);
    ReduceKind kind = part_reducer_kind(p->in, hlo_attrs(in)->to_apply);
    bool ident = kind != REDUCE_NONE && init_is_identity(part_in(p, in->operands[1]), kind);
    if (!ident) /* the reduced dims must be whole: no partial result to combine */
        for (int32_t k = 0; k < hlo_attrs(in)->dimensions.n; k++)
            if (hlo_attrs(in)->dimensions.v[k] >= 0 && hlo_attrs(in)->dimensions.v[k] < 32)
                p->limit_dims |= 1u << hlo_attrs(in)->dimensions.v[k];
    ReduceCand best;
    if (!reduce_choose(p, i, kind, ident, &best))
        return default_action(p, i);
    Tiling init;
    tiling_replicated(&init, 0);
    int32_t ops[2];
    if ((ops[0] = part_operand(p, i, 0, &best.opnd)) < 0 || (ops[1] = part_operand(p, i, 1, &init)) < 0)
        return false;
    Shape l = tiling_local_shape(&best.out, p->mesh, &in->shape);
    int32_t r = part_clone(p, i, part_result_name(p, i, &best.out, best.out.partial ? "partial" : "local"), &l, ops, 2);
    int32_t origin;
    const char *why = reduce_origin(p, i, &best, &origin);
    part_set_result(p, i, r, &best.out, origin, why);
    return true;
}

/* ================================================================ data movement */

/* Generic chooser for one-operand ops whose operand state follows from the
 * result state: want_of(c) gives the operand state for result state c
 * (false if none), and forward(X) the result state for operand state X. */
typedef bool (*WantFn)(const Part *p, int32_t i, const Tiling *res, Tiling *want);
typedef bool (*ForwardFn)(const Part *p, int32_t i, const Tiling *x, Tiling *res);

static bool choose_unary(Part *p, int32_t i, WantFn want_of, ForwardFn forward, ForwardFn near, Tiling *res,
                         Tiling *want)
{
    const HloInst *in = part_in(p, i);
    Tiling cands[8];
    int32_t nc = 0;
    Tiling o = decl0(p, i), os = strip_partial(o), x = operand_state(p, i, 0), xs = strip_partial(x), f;
    add_cand(cands, &nc, &o);
    add_cand(cands, &nc, &os);
    if (forward(p, i, &x, &f))
        add_cand(cands, &nc, &f);
    if (forward(p, i, &xs, &f))
        add_cand(cands, &nc, &f);
    if (near && near(p, i, &os, &f))
        add_cand(cands, &nc, &f);
    int64_t best_bytes = PART_INF_COST;
    double best_work = HUGE_VAL;
    for (int32_t c = 0; c < nc; c++) {
        Tiling w;
        if (!want_of(p, i, &cands[c], &w) || !tiling_is_even(&w, p->mesh, operand_shape(p, i, 0), NULL) ||
            !tiling_is_even(&cands[c], p->mesh, &in->shape, NULL))
            continue;
        int64_t bytes = part_cost(p, in->operands[0], &w);
        if (bytes < PART_INF_COST)
            bytes += result_cost(p, i, &cands[c]);
        double work = local_elems(p, &cands[c], &in->shape);
        if (bytes < PART_INF_COST && better(bytes, work, best_bytes, best_work)) {
            *res = cands[c];
            *want = w;
            best_bytes = bytes;
            best_work = work;
        }
    }
    return best_bytes < PART_INF_COST;
}

static bool emit_unary(Part *p, int32_t i, const Tiling *res, const Tiling *want)
{
    const HloInst *in = part_in(p, i);
    int32_t op = part_operand(p, i, 0, want);
    if (op < 0)
        return false;
    Shape l = tiling_local_shape(res, p->mesh, &in->shape);
    int32_t r = part_clone(p, i, part_result_name(p, i, res, res->partial ? "partial" : "local"), &l, &op, 1);
    const VState *src = res->partial ? part_primary(p, in->operands[0]) : NULL;
    part_set_result(p, i, r, res, src ? src->origin : -1, src ? src->origin_reason : NULL);
    return true;
}

static bool unary_handler(Part *p, int32_t i, WantFn want_of, ForwardFn forward, ForwardFn near)
{
    const HloInst *in = part_in(p, i);
    Tiling res, want;
    if (!shape_is_array(&in->shape) || !shape_is_array(operand_shape(p, i, 0)) ||
        !choose_unary(p, i, want_of, forward, near, &res, &want))
        return default_action(p, i);
    return emit_unary(p, i, &res, &want);
}

/* transpose: out dim k = in dim perm[k]. */
static bool transpose_want(const Part *p, int32_t i, const Tiling *res, Tiling *want)
{
    const IntList *perm = &hlo_attrs(part_in(p, i))->dimensions;
    tiling_replicated(want, res->rank);
    for (int32_t k = 0; k < perm->n && k < res->rank; k++)
        tiling_set_dim(want, (int32_t)perm->v[k], tiling_dim(res, k), tiling_dim_n(res, k));
    want->partial = res->partial;
    want->kind = res->kind;
    return perm->n == res->rank;
}

static bool transpose_forward(const Part *p, int32_t i, const Tiling *x, Tiling *res)
{
    const IntList *perm = &hlo_attrs(part_in(p, i))->dimensions;
    tiling_replicated(res, x->rank);
    for (int32_t k = 0; k < perm->n && k < x->rank; k++)
        tiling_set_dim(res, k, tiling_dim(x, (int32_t)perm->v[k]), tiling_dim_n(x, (int32_t)perm->v[k]));
    res->partial = x->partial;
    res->kind = x->kind;
    return perm->n == x->rank;
}

/* broadcast: operand dim k -> output dim dims[k]; other output dims are new
 * (a split new dim is just a smaller local broadcast). */
static bool broadcast_want(const Part *p, int32_t i, const Tiling *res, Tiling *want)
{
    const IntList *bd = &hlo_attrs(part_in(p, i))->dimensions;
    tiling_replicated(want, operand_shape(p, i, 0)->rank);
    for (int32_t k = 0; k < bd->n && k < want->rank; k++)
        tiling_set_dim(want, k, tiling_dim(res, (int32_t)bd->v[k]), tiling_dim_n(res, (int32_t)bd->v[k]));
    want->partial = res->partial;
    want->kind = res->kind;
    return bd->n == want->rank;
}

static bool broadcast_forward(const Part *p, int32_t i, const Tiling *x, Tiling *res)
{
    const IntList *bd = &hlo_attrs(part_in(p, i))->dimensions;
    tiling_replicated(res, part_in(p, i)->shape.rank);
    for (int32_t k = 0; k < bd->n && k < x->rank; k++)
        tiling_set_dim(res, (int32_t)bd->v[k], tiling_dim(x, k), tiling_dim_n(x, k));
    res->partial = x->partial;
    res->kind = x->kind;
    return bd->n == x->rank;
}

/* Reshape: dims are grouped into runs with equal element counts on both
 * sides; a group's sharding carries over iff only its major-most non-1 dim is
 * split (on the source side) and its tile count divides the major-most non-1
 * dim of the other side (a contiguous split of the group's linear range).
 * relax: a group that does not carry over is left unsplit instead of
 * failing (the caller then brings the source to the mapped-back state).
 * *bad (if not NULL) gets the source dims of the groups that do not. */
static bool reshape_map(const Mesh *m, const Shape *from, const Shape *to, const Tiling *fs, Tiling *ts, bool relax,
                        uint32_t *bad)
{
    tiling_replicated(ts, to->rank);
    ts->partial = fs->partial;
    ts->kind = fs->kind;
    if (shape_elem_count(from) == 0)
        return tiling_used(fs) == 0;
    int32_t i = 0, j = 0;
    while (i < from->rank || j < to->rank) {
        int32_t i0 = i, j0 = j;
        int64_t pf = i < from->rank ? from->dims[i++] : 1, pt = j < to->rank ? to->dims[j++] : 1;
        while (pf != pt) {
            if (pf < pt && i < from->rank)
                pf *= from->dims[i++];
            else if (pt < pf && j < to->rank)
                pt *= to->dims[j++];
            else
                return false;
        }
        int32_t fmaj = -1, tmaj = -1;
        bool ok = true;
        for (int32_t d = i0; d < i; d++) {
            if (from->dims[d] > 1 && fmaj < 0)
                fmaj = d;
            if (tiling_dim_n(fs, d) > 0 && d != fmaj)
                ok = false;
        }
        for (int32_t d = j0; d < j && tmaj < 0; d++)
            if (to->dims[d] > 1)
                tmaj = d;
        if (ok && fmaj >= 0 && tiling_dim_n(fs, fmaj) > 0) {
            int64_t t = tiling_dim_tiles(fs, m, fmaj);
            if (tmaj < 0 || to->dims[tmaj] % t != 0)
                ok = false;
            else
                tiling_set_dim(ts, tmaj, tiling_dim(fs, fmaj), tiling_dim_n(fs, fmaj));
        }
        if (!ok && bad)
            for (int32_t d = i0; d < i; d++)
                *bad |= 1u << d;
        if (!ok && !relax)
            return false;
    }
    return true;
}

static bool reshape_want(const Part *p, int32_t i, const Tiling *res, Tiling *want)
{
    return reshape_map(p->mesh, &part_in(p, i)->shape, operand_shape(p, i, 0), res, want, false, NULL);
}

/* Forward from the operand state, keeping the groups that carry over. */
static bool reshape_forward(const Part *p, int32_t i, const Tiling *x, Tiling *res)
{
    return reshape_map(p->mesh, operand_shape(p, i, 0), &part_in(p, i)->shape, x, res, true, NULL);
}

/* The result state closest to res that a local reshape can produce. */
static bool reshape_near(const Part *p, int32_t i, const Tiling *res, Tiling *out)
{
    Tiling back;
    return reshape_map(p->mesh, &part_in(p, i)->shape, operand_shape(p, i, 0), res, &back, true, NULL) &&
           reshape_forward(p, i, &back, out);
}

static bool h_transpose(Part *p, int32_t i) { return unary_handler(p, i, transpose_want, transpose_forward, NULL); }
static bool h_broadcast(Part *p, int32_t i) { return unary_handler(p, i, broadcast_want, broadcast_forward, NULL); }
/* The operand dims whose split (in the operand's current state) a local
 * reshape cannot keep are the handler's limit. */
static bool h_reshape(Part *p, int32_t i)
{
    const Shape *xs = operand_shape(p, i, 0);
    Tiling x = operand_state(p, i, 0), res;
    if (shape_is_array(xs) && shape_is_array(&part_in(p, i)->shape))
        reshape_map(p->mesh, xs, &part_in(p, i)->shape, &x, &res, true, &p->limit_dims);
    return unary_handler(p, i, reshape_want, reshape_forward, reshape_near);
}

/* ================================================================ pass-through ops */

/* Ops that act along some dims ("touched": they must be unsplit) and leave
 * the others alone: the op runs locally on the untouched dims' shards. */
static uint32_t touched_dims(const Part *p, int32_t i, int32_t *n_data)
{
    const HloInst *in = part_in(p, i);
    const HloAttrs *a = hlo_attrs(in);
    const Shape *x = operand_shape(p, i, 0);
    uint32_t t = 0;
    *n_data = 1;
    switch (in->op) {
    case HLO_SLICE:
        for (int32_t d = 0; d < x->rank && d < a->slice_start.n; d++)
            if (a->slice_start.v[d] != 0 || a->slice_limit.v[d] != x->dims[d] ||
                (a->slice_stride.n > d && a->slice_stride.v[d] != 1))
                t |= 1u << d;
        return t;
    case HLO_PAD:
        for (int32_t d = 0; d < x->rank && d < a->pad_lo.n; d++)
            if (a->pad_lo.v[d] || a->pad_hi.v[d] || (a->pad_interior.n > d && a->pad_interior.v[d]))
                t |= 1u << d;
        return t;
    case HLO_CONCATENATE:
    case HLO_SORT:
        *n_data = in->n_operands;
        for (int32_t k = 0; k < a->dimensions.n; k++)
            t |= 1u << a->dimensions.v[k];
        return t;
    case HLO_REVERSE:
        for (int32_t k = 0; k < a->dimensions.n; k++)
            t |= 1u << a->dimensions.v[k];
        return t;
    case HLO_DYNAMIC_SLICE:
        for (int32_t d = 0; d < x->rank && d < a->dynamic_slice_sizes.n; d++)
            if (a->dynamic_slice_sizes.v[d] != x->dims[d])
                t |= 1u << d;
        return t;
    case HLO_DYNAMIC_UPDATE_SLICE: {
        const Shape *u = operand_shape(p, i, 1);
        *n_data = 2;
        for (int32_t d = 0; d < x->rank && d < u->rank; d++)
            if (u->dims[d] != x->dims[d])
                t |= 1u << d;
        return t;
    }
    case HLO_REDUCE_WINDOW:
        for (int32_t d = 0; a->window && d < a->window->rank; d++) {
            const WindowDim *w = &a->window->dims[d];
            if (w->size != 1 || w->stride != 1 || w->pad_lo || w->pad_hi || w->lhs_dilate > 1 || w->rhs_dilate > 1 ||
                w->reversal)
                t |= 1u << d;
        }
        return t;
    case HLO_MAP:
        *n_data = in->n_operands;
        return 0;
    default: return ~0u;
    }
}

static bool passthrough_ok(const Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    if (in->n_operands < 1 || !shape_is_array(operand_shape(p, i, 0)))
        return false;
    int32_t rank = operand_shape(p, i, 0)->rank;
    if (in->op == HLO_REDUCE_WINDOW)
        return in->n_operands == 2 && hlo_attrs(in)->window && shape_is_array(&in->shape);
    if (in->op == HLO_SORT) {
        for (int32_t k = 0; k < in->n_operands; k++)
            if (!shape_is_array(operand_shape(p, i, k)) || operand_shape(p, i, k)->rank != rank)
                return false;
        return true;
    }
    return shape_is_array(&in->shape) && in->shape.rank == rank;
}

static int64_t passthrough_cost(Part *p, int32_t i, const Tiling *c, int32_t n_data)
{
    const HloInst *in = part_in(p, i);
    int64_t bytes = 0;
    for (int32_t k = 0; k < n_data && bytes < PART_INF_COST; k++)
        bytes += part_cost(p, in->operands[k], c);
    if (bytes >= PART_INF_COST)
        return PART_INF_COST;
    if (shape_is_tuple(&in->shape)) {
        const Tiling *decl = part_decl_leaves(p, i);
        for (int32_t k = 0; k < in->shape.n_elems && bytes < PART_INF_COST; k++)
            bytes += reshard_cost(p->mesh, &in->shape.elems[k], c, &decl[k]);
        return bytes;
    }
    return bytes + result_cost(p, i, c);
}

/* Local attribute fix-ups: sizes of untouched dims become local sizes. */
static void passthrough_fix(Part *p, int32_t i, int32_t r, const Tiling *c)
{
    const HloInst *in = part_in(p, i);
    HloAttrs *a = hlo_attrs_mut(p->out, part_out(p, r));
    Shape lx = tiling_local_shape(c, p->mesh, operand_shape(p, i, 0));
    if (in->op == HLO_SLICE)
        for (int32_t d = 0; d < a->slice_limit.n && d < lx.rank; d++)
            if (tiling_dim_n(c, d) > 0)
                a->slice_limit.v[d] = lx.dims[d];
    if (in->op == HLO_DYNAMIC_SLICE)
        for (int32_t d = 0; d < a->dynamic_slice_sizes.n && d < lx.rank; d++)
            if (tiling_dim_n(c, d) > 0)
                a->dynamic_slice_sizes.v[d] = lx.dims[d];
}

static bool h_passthrough(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    int32_t n_data;
    uint32_t t = touched_dims(p, i, &n_data);
    if (!passthrough_ok(p, i))
        return default_action(p, i);
    p->limit_dims = t;
    Tiling cands[4];
    int32_t nc = 0;
    Tiling o = shape_is_tuple(&in->shape) ? part_decl_leaves(p, i)[0] : decl0(p, i);
    Tiling c1 = clear_dims(strip_partial(o), t), c2 = clear_dims(strip_partial(operand_state(p, i, 0)), t);
    add_cand(cands, &nc, &c1);
    add_cand(cands, &nc, &c2);
    int32_t best = -1;
    int64_t best_bytes = PART_INF_COST;
    double best_work = HUGE_VAL;
    for (int32_t c = 0; c < nc; c++) {
        int64_t b = passthrough_cost(p, i, &cands[c], n_data);
        double w = local_elems(p, &cands[c], operand_shape(p, i, 0));
        if (b < PART_INF_COST && better(b, w, best_bytes, best_work)) {
            best = c;
            best_bytes = b;
            best_work = w;
        }
    }
    if (best < 0)
        return default_action(p, i);
    const Tiling *c = &cands[best];
    int32_t *ops = ARENA_ARRAY(p->scratch, int32_t, in->n_operands);
    for (int32_t k = 0; k < in->n_operands; k++) {
        Tiling want;
        if (k < n_data)
            want = *c;
        else
            tiling_replicated(&want, operand_shape(p, i, k)->rank);
        if ((ops[k] = part_operand(p, i, k, &want)) < 0)
            return false;
    }
    int32_t n_leaves = p->vals[i].n_leaves;
    Tiling *leaves = ARENA_ARRAY(p->scratch, Tiling, n_leaves);
    for (int32_t k = 0; k < n_leaves; k++)
        leaves[k] = *c;
    Shape l = part_local_shape(p, &in->shape, leaves);
    int32_t r = part_clone(p, i, part_result_name(p, i, leaves, "local"), &l, ops, in->n_operands);
    passthrough_fix(p, i, r, c);
    part_set_result(p, i, r, leaves, -1, NULL);
    return true;
}

/* ================================================================ tuples, annotations, control flow */

static bool h_tuple(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    Tiling *decl = part_decl_leaves(p, i);
    int32_t *ops = ARENA_ARRAY(p->scratch, int32_t, in->n_operands ? in->n_operands : 1);
    int32_t off = 0;
    for (int32_t k = 0; k < in->n_operands; k++) {
        if ((ops[k] = part_operand(p, i, k, decl + off)) < 0)
            return false;
        off += p->vals[in->operands[k]].n_leaves;
    }
    Shape l = part_local_shape(p, &in->shape, decl);
    int32_t r = part_clone(p, i, part_result_name(p, i, decl, "local"), &l, ops, in->n_operands);
    part_set_result(p, i, r, decl, -1, NULL);
    return true;
}

static bool h_get_tuple_element(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    int32_t v = in->operands[0];
    const Shape *ts = &part_in(p, v)->shape;
    int64_t idx = hlo_attrs(in)->index;
    if (!shape_is_tuple(ts) || idx < 0 || idx >= ts->n_elems)
        return default_action(p, i);
    int32_t off = 0;
    for (int64_t e = 0; e < idx; e++)
        off += shape_leaf_count(&ts->elems[e]);
    const VState *st = part_primary(p, v);
    const Tiling *leaves = st->leaves + off;
    Shape l = part_local_shape(p, &in->shape, leaves);
    int32_t r = part_clone(p, i, part_result_name(p, i, leaves, "element"), &l, &st->local, 1);
    bool partial = false;
    for (int32_t k = 0; k < p->vals[i].n_leaves; k++)
        partial |= leaves[k].partial != 0;
    part_set_result(p, i, r, leaves, partial ? st->origin : -1, partial ? st->origin_reason : NULL);
    return true;
}

static bool h_custom_call(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    const char *target = hlo_attrs(in)->custom_call_target;
    if (!target || strcmp(target, "Sharding") != 0 || in->n_operands != 1)
        return default_action(p, i);
    Tiling *decl = part_decl_leaves(p, i);
    int32_t op = part_operand(p, i, 0, decl);
    if (op < 0)
        return false;
    Shape l = part_local_shape(p, &in->shape, decl);
    int32_t r = part_emit(p, HLO_COPY, in->name, &l, &op, 1);
    part_out(p, r)->span = in->span;
    part_set_result(p, i, r, decl, -1, NULL);
    return true;
}

static bool h_control_flow(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    const HloAttrs *a = hlo_attrs(in);
    int32_t refs[4 + SPMDC_MAX_RANK];
    int32_t n = 0;
    refs[n++] = a->to_apply;
    refs[n++] = a->condition;
    refs[n++] = a->body;
    for (int32_t k = 0; k < a->branches.n && n < (int32_t)(sizeof refs / sizeof refs[0]); k++)
        refs[n++] = (int32_t)a->branches.v[k];
    for (int32_t k = 0; k < n; k++) {
        if (refs[k] >= 0 && refs[k] < p->in->n_comps && p->comp_sharded[refs[k]]) {
            diag_error(p->cx->diag, in->span,
                       "%s: computation '%s' holds split values; partitioning the inside of %s is not supported "
                       "yet (its values must be replicated)",
                       in->name, p->in->comps[refs[k]].name, hlo_opcode_name(in->op));
            return false;
        }
    }
    return default_action(p, i);
}

/* opt-barrier: an identity on its (tuple) operand; every leaf keeps its
 * sharding, so nothing is gathered. */
static bool h_opt_barrier(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    Tiling *decl = part_decl_leaves(p, i);
    int32_t op = part_operand(p, i, 0, decl);
    if (op < 0)
        return false;
    Shape l = part_local_shape(p, &in->shape, decl);
    int32_t r = part_clone(p, i, part_result_name(p, i, decl, "local"), &l, &op, 1);
    part_set_result(p, i, r, decl, -1, NULL);
    return true;
}

/* bitcast-convert keeping the element width is elementwise (JAX's random
 * bits -> float); a width change alters the last dim: default action. */
static bool h_bitcast_convert(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    const Shape *src = operand_shape(p, i, 0);
    if (shape_is_array(&in->shape) && shape_is_array(src) && elem_type_bits(src->type) == elem_type_bits(in->shape.type))
        return h_elementwise(p, i);
    return default_action(p, i);
}

static bool h_unsupported(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    diag_error(p->cx->diag, in->span, "%s: %s in the input program is not supported by the partitioner", in->name,
               hlo_opcode_name(in->op));
    return false;
}

/* ================================================================ dispatch */

typedef bool (*Handler)(Part *p, int32_t i);

static Handler handler_for(HloOpcode op)
{
    switch (op) {
    case HLO_PARAMETER: return h_parameter;
    case HLO_CONSTANT: return h_constant;
    case HLO_IOTA: return h_iota;
    case HLO_TUPLE: return h_tuple;
    case HLO_GET_TUPLE_ELEMENT: return h_get_tuple_element;
    case HLO_BROADCAST: return h_broadcast;
    case HLO_TRANSPOSE: return h_transpose;
    case HLO_RESHAPE: return h_reshape;
    case HLO_DOT: return h_dot;
    case HLO_REDUCE: return h_reduce;
    case HLO_SLICE:
    case HLO_PAD:
    case HLO_CONCATENATE:
    case HLO_REVERSE:
    case HLO_SORT:
    case HLO_DYNAMIC_SLICE:
    case HLO_DYNAMIC_UPDATE_SLICE:
    case HLO_REDUCE_WINDOW:
    case HLO_MAP: return h_passthrough;
    case HLO_CUSTOM_CALL: return h_custom_call;
    case HLO_WHILE:
    case HLO_CALL:
    case HLO_CONDITIONAL: return h_control_flow;
    case HLO_PARTITION_ID: return h_unsupported;
    case HLO_BITCAST_CONVERT: return h_bitcast_convert;
    case HLO_OPTIMIZATION_BARRIER: return h_opt_barrier;
    default: break;
    }
    if (hlo_opcode_is_elementwise(op))
        return h_elementwise;
    if (hlo_opcode_category(op) == 'C')
        return h_unsupported;
    return default_action;
}

bool part_handle(Part *p, int32_t i)
{
    p->limit_dims = 0;
    bool ok = handler_for(part_in(p, i)->op)(p, i);
    p->limit_dims = 0;
    return ok;
}
