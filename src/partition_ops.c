/* partition_ops.c - the partitioner's per-opcode handlers and dispatch.
 *
 * part_handle(p, i) partitions input entry instruction i.  An op with a
 * factor rule (oprule.h) goes through the generic path (partition_rule.c):
 * the rule says how its dims map, which may be split, and what a split
 * reduction leaves pending.  A handler exists only for what a rule cannot
 * say: leaves (parameters keep their declared shards, constants are whole),
 * iota offsets, the leaf identities (tuple, get-tuple-element,
 * opt-barrier, the Sharding custom-call), control flow, and ops the
 * partitioner refuses (collectives and partition-id outside manual
 * regions).  An op with neither (an unknown custom-call, after-all) takes
 * the default action: every operand is gathered to full size, the op runs
 * unpartitioned on every device, and its consumers slice the result.
 * part_get (partition.c) warns "full-rematerialization" when a split value
 * is brought whole to every device for a dim the op cannot keep split.
 */
#include <string.h>

#include "partition_internal.h"

Tiling *part_replicated_leaves(Part *p, const Shape *s, int32_t *n_out)
{
    return part_replicated_leaves_in(p->scratch, s, n_out);
}

Tiling *part_replicated_leaves_in(Arena *a, const Shape *s, int32_t *n_out)
{
    int32_t n = shape_leaf_count(s);
    Tiling *r = ARENA_ARRAY(a, Tiling, n ? n : 1);
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

bool part_default(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    int32_t *ops = ARENA_ARRAY(p->scratch, int32_t, in->n_operands ? in->n_operands : 1);
    p->limit_dims = PART_LIMIT_ALL;
    for (int32_t k = 0; k < in->n_operands; k++) {
        Tiling *want = part_replicated_leaves(p, part_in(p, in->operands[k])->shape, NULL);
        ops[k] = part_operand(p, i, k, want);
        if (ops[k] < 0)
            return false;
    }
    Tiling *leaves = part_replicated_leaves(p, in->shape, NULL);
    int32_t r = part_clone(p, i, part_result_name(p, i, leaves, "full"), in->shape, ops, in->n_operands);
    part_set_result(p, i, r, leaves, -1, NULL);
    return true;
}

/* ================================================================ leaves */

/* A parameter keeps its declared shards, or arrives in the state its
 * caller passes (a loop body's parameter holds the loop state). */
/* An entry parameter only device `dev` holds ({maximal device=N}): every
 * device has the whole shape, but only dev's is the value, so the others'
 * are masked to zero: the value is a pending sum over every atom, which the
 * first consumer that needs it whole closes (a broadcast from dev, as an
 * all-reduce; XLA moves a single-device value the same way). */
static bool h_maximal_parameter(Part *p, int32_t i, int64_t dev)
{
    const HloInst *in = part_in(p, i);
    Tiling st;
    tiling_replicated(&st, in->shape->rank);
    Shape whole = part_local_shape(p, in->shape, part_decl_leaves(p, i));
    part_param_memory(p, i, &whole);
    int32_t r = part_clone(p, i, p->mesh->n_atoms ? part_name(p, in->name, "arg") : in->name, in->shape, NULL, 0);
    if (p->mesh->n_atoms == 0) {
        part_set_result(p, i, r, &st, -1, NULL);
        return true;
    }
    int8_t all[SPMDC_MAX_ATOMS];
    for (int32_t a = 0; a < p->mesh->n_atoms; a++)
        all[a] = (int8_t)a;
    Shape s32 = shape_scalar(ET_S32), ps = shape_scalar(ET_PRED), pl = shape_array(ET_PRED, in->shape->rank,
                                                                                     in->shape->dims);
    int32_t id = part_offset(p, all, p->mesh->n_atoms, 1, in->name); /* this device's id */
    int32_t c = part_emit(p, HLO_CONSTANT, part_name(p, in->name, "device"), &s32, NULL, 0);
    Literal *lit = ARENA_NEW(p->out->arena, Literal);
    lit->n = 1;
    lit->i = arena_memdup(p->out->arena, &dev, sizeof dev);
    hlo_attrs_mut(p->out, part_out(p, c))->literal = lit;
    int32_t ab[2] = {id, c};
    int32_t own = part_emit(p, HLO_COMPARE, part_name(p, in->name, "on-device"), &ps, ab, 2);
    hlo_attrs_mut(p->out, part_out(p, own))->direction = CMP_EQ;
    int32_t ob = part_emit(p, HLO_BROADCAST, part_name(p, in->name, "on-device-broadcast"), &pl, &own, 1);
    int32_t sel[3] = {ob, r, part_identity(p, REDUCE_SUM, in->shape, in->name)};
    int32_t m = part_emit(p, HLO_SELECT, part_name(p, in->name, "masked"), in->shape, sel, 3);
    st.partial = ((uint32_t)1 << p->mesh->n_atoms) - 1u;
    st.kind = REDUCE_SUM;
    const char *why = NULL;
    if (p->rep)
        why = in->span.begin.line ? part_fmt(p, "%s: only device %lld holds it ({maximal device=%lld}, line %u)",
                                             in->name, (long long)dev, (long long)dev, (unsigned)in->span.begin.line)
                                  : part_fmt(p, "%s: only device %lld holds it ({maximal device=%lld})", in->name,
                                             (long long)dev, (long long)dev);
    part_set_result(p, i, m, &st, i, why);
    return true;
}

/* An array parameter's per-device shape and bytes, kept by (canonical
 * declared state, shape): a program's parameters share few. */
typedef struct ParamEnt {
    const Tiling *t;            /* NULL: empty */
    ElemType type;
    int32_t rank;
    int64_t dims[SPMDC_MAX_RANK];
    Shape local;
    int64_t global_bytes, local_bytes;
} ParamEnt;

#define PARAM_CACHE 8

static const ParamEnt *param_ent(Part *p, const Tiling *t, const Shape *s)
{
    if (!p->param_cache)
        p->param_cache = ARENA_ARRAY(p->scratch, ParamEnt, PARAM_CACHE);
    uintptr_t h = (uintptr_t)t >> 4 ^ (uintptr_t)s->dims[0] ^ (uintptr_t)s->type;
    ParamEnt *e = &p->param_cache[h & (PARAM_CACHE - 1)];
    int32_t rank = s->rank < SPMDC_MAX_RANK ? s->rank : SPMDC_MAX_RANK;
    if (e->t == t && e->type == s->type && e->rank == s->rank &&
        memcmp(e->dims, s->dims, sizeof(int64_t) * (size_t)(rank > 0 ? rank : 0)) == 0)
        return e;
    e->t = t;
    e->type = s->type;
    e->rank = s->rank;
    memcpy(e->dims, s->dims, sizeof e->dims);
    e->local = tiling_local_shape(t, p->mesh, s);
    e->global_bytes = shape_byte_size(s);
    e->local_bytes = shape_byte_size(&e->local);
    return e;
}

static bool h_parameter(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    int64_t k = in->param_number;
    if (!p->parent && in->sharding && in->sharding->kind == SHARDING_MAXIMAL && shape_is_array(in->shape))
        return h_maximal_parameter(p, i, in->sharding->device);
    const Tiling *leaves = k >= 0 && k < p->n_params && p->param_leaves[k] ? p->param_leaves[k]
                                                                            : part_decl_leaves(p, i);
    Shape l;
    if (leaves == p->vals[i].decl && p->vals[i].n_leaves == 1 && shape_is_array(in->shape)) { /* canonical */
        const ParamEnt *e = param_ent(p, leaves, in->shape);
        l = e->local;
        part_param_bytes(p, e->global_bytes, e->local_bytes);
    } else {
        l = part_local_shape(p, in->shape, leaves);
        part_param_memory(p, i, &l); /* the entry's are in their declared state */
    }
    int32_t r = part_clone(p, i, part_result_name(p, i, leaves, "arg"), &l, NULL, 0);
    part_set_result(p, i, r, leaves, -1, NULL);
    return true;
}

static bool h_constant(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    Tiling *full = part_replicated_leaves(p, in->shape, NULL);
    int32_t r = part_clone(p, i, part_result_name(p, i, full, "full"), in->shape, NULL, 0);
    part_set_result(p, i, r, full, -1, NULL);
    return true;
}

/* iota: the rule picks the tiling; a split iota dim adds this device's
 * offset to a local iota. */
static bool h_iota(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    ElemType t = in->shape->type;
    RuleCtx rc;
    RuleChoice ch;
    int32_t d = (int32_t)hlo_attrs(in)->iota_dimension;
    if (!(elem_type_is_integral(t) || elem_type_is_float(t)) || !part_rule_init(p, i, &rc) ||
        !part_rule_choose(p, &rc, NULL, NULL, &ch) || d < 0 || d >= in->shape->rank)
        return h_constant(p, i);
    const Tiling *o = &ch.res[0];
    Shape l = tiling_local_shape(o, p->mesh, in->shape);
    if (tiling_dim_n(o, d) == 0) {
        int32_t r = part_clone(p, i, part_result_name(p, i, o, "local"), &l, NULL, 0);
        part_set_result(p, i, r, o, -1, NULL);
        return true;
    }
    int32_t li = part_clone(p, i, part_name(p, in->name, "local-iota"), &l, NULL, 0);
    int32_t off = part_offset(p, tiling_dim(o, d), tiling_dim_n(o, d), l.dims[d], in->name);
    if (t != ET_S32) {
        Shape s = shape_scalar(t);
        off = part_emit(p, HLO_CONVERT, part_name(p, in->name, "iota-offset"), &s, &off, 1);
    }
    int32_t b = part_emit(p, HLO_BROADCAST, part_name(p, in->name, "iota-offset-broadcast"), &l, &off, 1);
    int32_t ab[2] = {li, b};
    int32_t r = part_emit(p, HLO_ADD, part_result_name(p, i, o, "local"), &l, ab, 2);
    part_set_result(p, i, r, o, -1, NULL);
    return true;
}

/* ================================================================ tuples, annotations, control flow */

static bool h_tuple(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    const Tiling *decl = part_decl_leaves(p, i);
    int32_t *ops = ARENA_ARRAY(p->scratch, int32_t, in->n_operands ? in->n_operands : 1);
    int32_t off = 0;
    for (int32_t k = 0; k < in->n_operands; k++) {
        if ((ops[k] = part_operand(p, i, k, decl + off)) < 0)
            return false;
        off += p->vals[in->operands[k]].n_leaves;
    }
    Shape l = part_local_shape(p, in->shape, decl);
    int32_t r = part_clone(p, i, part_result_name(p, i, decl, "local"), &l, ops, in->n_operands);
    part_set_result(p, i, r, decl, -1, NULL);
    return true;
}

static bool h_get_tuple_element(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    int32_t v = in->operands[0];
    const Shape *ts = part_in(p, v)->shape;
    int64_t idx = hlo_attrs(in)->index;
    if (!shape_is_tuple(ts) || idx < 0 || idx >= ts->n_elems)
        return part_default(p, i);
    int32_t off = shape_leaf_offset(ts, (int32_t)idx, &p->gte_leaves, p->scratch);
    const VState *st = part_primary(p, v);
    const Tiling *leaves = st->leaves + off;
    Shape l = part_local_shape(p, in->shape, leaves);
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
    if (target && strcmp(target, "TopK") == 0)
        return part_topk(p, i);
    if (oprule_class(p->in, p->ic, i) == RULE_FACTORS)
        return part_by_rule(p, i);
    if (oprule_class(p->in, p->ic, i) == RULE_MANUAL_BORDER)
        return part_manual_border(p, i);
    if (!target || strcmp(target, "Sharding") != 0 || in->n_operands != 1)
        return part_default(p, i);
    return part_copy_as_declared(p, i);
}

bool part_copy_as_declared(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    const Tiling *decl = part_decl_leaves(p, i);
    int32_t op = part_operand(p, i, 0, decl);
    if (op < 0)
        return false;
    Shape l = part_local_shape(p, in->shape, decl);
    int32_t r = part_emit(p, HLO_COPY, in->name, &l, &op, 1);
    part_out(p, r)->span = in->span;
    part_set_result(p, i, r, decl, -1, NULL);
    return true;
}

/* opt-barrier: an identity on its (tuple) operand; every leaf keeps its
 * sharding, so nothing is gathered. */
static bool h_opt_barrier(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    const Tiling *decl = part_decl_leaves(p, i);
    int32_t op = part_operand(p, i, 0, decl);
    if (op < 0)
        return false;
    Shape l = part_local_shape(p, in->shape, decl);
    int32_t r = part_clone(p, i, part_result_name(p, i, decl, "local"), &l, &op, 1);
    part_set_result(p, i, r, decl, -1, NULL);
    return true;
}

/* ================================================================ dispatch */

typedef bool (*Handler)(Part *p, int32_t i);

static const Handler HANDLERS[HLO_OPCODE_COUNT] = {
    [HLO_PARAMETER] = h_parameter,
    [HLO_CONSTANT] = h_constant,
    [HLO_IOTA] = h_iota,
    [HLO_CONVOLUTION] = part_convolution,
    [HLO_REDUCE_WINDOW] = part_reduce_window,
    [HLO_SELECT_AND_SCATTER] = part_select_and_scatter,
    [HLO_SLICE] = part_slice,
    [HLO_PAD] = part_pad,
    [HLO_CONCATENATE] = part_concatenate,
    [HLO_REVERSE] = part_reverse,
    [HLO_TUPLE] = h_tuple,
    [HLO_GET_TUPLE_ELEMENT] = h_get_tuple_element,
    [HLO_OPTIMIZATION_BARRIER] = h_opt_barrier,
    [HLO_CUSTOM_CALL] = h_custom_call,
    [HLO_GATHER] = part_gather,
    [HLO_SCATTER] = part_scatter,
    [HLO_DYNAMIC_SLICE] = part_dynamic_slice,
    [HLO_DYNAMIC_UPDATE_SLICE] = part_dynamic_update_slice,
    [HLO_TOPK] = part_topk,
    [HLO_REDUCE] = part_reduce,
    [HLO_RNG] = part_rng,
    [HLO_WHILE] = part_while,
    [HLO_CALL] = part_call,
    [HLO_CONDITIONAL] = part_conditional,
    [HLO_PARTITION_ID] = part_manual_leaf,
    [HLO_INFEED] = part_transfer,
    [HLO_OUTFEED] = part_transfer,
    [HLO_SEND] = part_transfer,
    [HLO_SEND_DONE] = part_transfer,
    [HLO_RECV] = part_transfer,
    [HLO_RECV_DONE] = part_transfer,
    [HLO_ALL_REDUCE] = part_user_collective,
    [HLO_ALL_GATHER] = part_user_collective,
    [HLO_REDUCE_SCATTER] = part_user_collective,
    [HLO_ALL_TO_ALL] = part_user_collective,
    [HLO_COLLECTIVE_PERMUTE] = part_user_collective,
};

const char *part_handler_name(HloOpcode op)
{
    if ((unsigned)op >= HLO_OPCODE_COUNT)
        return NULL;
    if (HANDLERS[op])
        return "handler";
    const char *rule = oprule_name(op);
    return rule ? rule : NULL;
}

bool part_handle(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    p->limit_dims = 0;
    bool ok;
    if (part_deferred(p, i))
        return true; /* its only user partitions it (partition_shape.c) */
    if ((unsigned)in->op < HLO_OPCODE_COUNT && HANDLERS[in->op])
        ok = HANDLERS[in->op](p, i);
    else if (oprule_class(p->in, p->ic, i) == RULE_FACTORS)
        ok = part_by_rule(p, i);
    else
        ok = part_default(p, i);
    p->limit_dims = 0;
    return ok;
}
