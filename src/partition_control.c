/* partition_control.c - the partitioner's control flow: while, conditional,
 * call (docs/partitioning.md, "Loops, conditionals and calls").
 *
 * A called computation is partitioned for its call site, as a computation
 * of its own (part_callee): its parameters arrive in the states the call
 * site passes, its root is brought to the state the call site needs, and
 * every collective it needs sits inside it.
 *  - while: one sharding for the loop state, the while's declared one
 *    (propagation gives the operand, the body's parameter and root, the
 *    condition's parameter and the result one sharding per leaf): the
 *    operand is brought to it, the body runs on it and its root is brought
 *    back to it, the condition reads it and its pred result is replicated
 *    (every device takes the same number of trips).  The report counts a
 *    collective of the body once per trip when the trip count is known
 *    (hlo_while_trip_count), else once, marked per trip.
 *  - conditional: the branch index (or predicate) replicated, so every
 *    device takes the same branch; branch k's operand brought to its
 *    parameter's declared state, every branch root to the conditional's.
 *  - call: the callee partitioned like a branch taken every time.
 */
#include <string.h>

#include "partition_internal.h"

/* ================================================================ handlers */

/* The parameter of computation c with number k, or NULL. */
static const HloInst *param_of(const HloModule *m, int32_t c, int64_t k)
{
    if (c < 0 || c >= m->n_comps)
        return NULL;
    const HloComputation *comp = &m->comps[c];
    for (int32_t i = 0; i < comp->n_insts; i++)
        if (comp->insts[i].op == HLO_PARAMETER && comp->insts[i].param_number == k)
            return &comp->insts[i];
    return NULL;
}

/* The leaves of the root of computation c, all replicated (a condition's pred). */
static const Tiling *replicated_root(Part *p, int32_t c)
{
    if (c < 0 || c >= p->in->n_comps)
        return NULL;
    const HloComputation *comp = &p->in->comps[c];
    if (comp->root < 0)
        return NULL;
    return part_replicated_leaves(p, comp->insts[comp->root].shape, NULL);
}

bool part_while(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    const HloAttrs *a = hlo_attrs(in);
    const Tiling *state = part_decl_leaves(p, i);
    int32_t op = part_operand(p, i, 0, state);
    if (op < 0)
        return false;
    int64_t trips = hlo_while_trip_count(p->in, p->ic, i);
    const Tiling *params[1] = {state};
    uint32_t manual = p->vals[in->operands[0]].manual;
    int32_t cond = part_callee(p, i, a->condition, params, 1, manual, replicated_root(p, a->condition), 1, false);
    if (cond < 0)
        return false;
    int32_t body = part_callee(p, i, a->body, params, 1, manual, state, trips < 0 ? 1 : trips, trips < 0);
    if (body < 0)
        return false;
    Shape l = part_local_shape(p, in->shape, state);
    int32_t r = part_clone(p, i, part_result_name(p, i, state, "local"), &l, &op, 1);
    HloAttrs *w = hlo_attrs_mut(p->out, part_out(p, r));
    w->condition = cond;
    w->body = body;
    part_set_result(p, i, r, state, -1, NULL);
    return true;
}

bool part_conditional(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    const HloAttrs *a = hlo_attrs(in);
    if (in->n_operands != a->branches.n + 1 || a->branches.n == 0) {
        diag_error(p->cx->diag, in->span, "%s: has %d branches for %d operands", in->name, (int)a->branches.n,
                   (int)in->n_operands);
        return false;
    }
    int32_t *ops = ARENA_ARRAY(p->scratch, int32_t, in->n_operands);
    ops[0] = part_operand(p, i, 0, part_replicated_leaves(p, part_in(p, in->operands[0])->shape, NULL));
    if (ops[0] < 0)
        return false;
    const Tiling *result = part_decl_leaves(p, i);
    int32_t *branches = ARENA_ARRAY(p->scratch, int32_t, a->branches.n);
    for (int32_t k = 0; k < a->branches.n; k++) {
        int32_t c = (int32_t)a->branches.v[k];
        const HloInst *param = param_of(p->in, c, 0);
        const Tiling *want = param ? part_inst_decl(p, param) : part_decl_leaves(p, in->operands[k + 1]);
        ops[k + 1] = part_operand(p, i, k + 1, want);
        if (ops[k + 1] < 0)
            return false;
        const Tiling *params[1] = {want};
        branches[k] = part_callee(p, i, c, params, 1, p->vals[i].manual, result, 1, false);
        if (branches[k] < 0)
            return false;
    }
    Shape l = part_local_shape(p, in->shape, result);
    int32_t r = part_clone(p, i, part_result_name(p, i, result, "local"), &l, ops, in->n_operands);
    HloAttrs *w = hlo_attrs_mut(p->out, part_out(p, r));
    for (int32_t k = 0; k < a->branches.n; k++)
        w->branches.v[k] = branches[k];
    part_set_result(p, i, r, result, -1, NULL);
    return true;
}

bool part_call(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    const HloAttrs *a = hlo_attrs(in);
    int32_t *ops = ARENA_ARRAY(p->scratch, int32_t, in->n_operands + 1);
    const Tiling **params = ARENA_ARRAY(p->scratch, const Tiling *, in->n_operands + 1);
    for (int32_t k = 0; k < in->n_operands; k++) {
        const HloInst *param = param_of(p->in, a->to_apply, k);
        params[k] = param ? part_inst_decl(p, param) : part_decl_leaves(p, in->operands[k]);
        ops[k] = part_operand(p, i, k, params[k]);
        if (ops[k] < 0)
            return false;
    }
    const Tiling *result = part_decl_leaves(p, i);
    int32_t callee = part_callee(p, i, a->to_apply, params, in->n_operands, p->vals[i].manual, result, 1, false);
    if (callee < 0)
        return false;
    Shape l = part_local_shape(p, in->shape, result);
    int32_t r = part_clone(p, i, part_result_name(p, i, result, "local"), &l, ops, in->n_operands);
    hlo_attrs_mut(p->out, part_out(p, r))->to_apply = callee;
    part_set_result(p, i, r, result, -1, NULL);
    return true;
}

/* ================================================================ transfers */

/* The device a transfer runs on: -1 every device (replicated, or an
 * outfeed of {manual} data in a manual region: each device sends its own
 * data, as written), N for {maximal device=N} (every maximal leaf on the
 * same N); -2 after an error. */
static int64_t transfer_device(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    const Sharding *sh = in->sharding;
    int32_t n = sh && sh->kind == SHARDING_TUPLE ? sh->n_elems : 1;
    int64_t dev = -1;
    for (int32_t k = 0; sh && k < n; k++) {
        const Sharding *l = sh->kind == SHARDING_TUPLE ? &sh->elems[k] : sh;
        if (l->kind == SHARDING_MAXIMAL && (dev == -1 || dev == l->device)) {
            dev = l->device;
        } else if (l->kind == SHARDING_MANUAL && in->op == HLO_OUTFEED && p->vals[i].manual) {
            continue;
        } else if (l->kind == SHARDING_MAXIMAL || l->kind == SHARDING_MANUAL || l->manual_atoms ||
                   (l->kind == SHARDING_TILED && !sharding_is_replicated(l))) {
            diag_error(p->cx->diag, in->span,
                       "%s: %s with a split or mixed sharding is not partitioned yet (it runs replicated or on one "
                       "device)", in->name, hlo_opcode_name(in->op));
            return -2;
        }
    }
    return dev;
}

/* A value of shape s made of zeros (the identity of a sum, -0.0 for floats)
 * and fresh tokens, in computation oc. */
static int32_t zeros_like(Part *p, int32_t oc, const Shape *s, const char *base)
{
    if (shape_is_tuple(s)) {
        int32_t *el = ARENA_ARRAY(p->scratch, int32_t, s->n_elems + 1);
        for (int32_t e = 0; e < s->n_elems; e++)
            el[e] = zeros_like(p, oc, &s->elems[e], base);
        return hlo_add_inst(p->out, oc, HLO_TUPLE, part_fmt(p, "%s.none", base), s, el, s->n_elems);
    }
    if (s->type == ET_TOKEN)
        return hlo_add_inst(p->out, oc, HLO_AFTER_ALL, part_fmt(p, "%s.token", base), s, NULL, 0);
    Shape sc = shape_scalar(s->type);
    int32_t c = hlo_add_inst(p->out, oc, HLO_CONSTANT, part_fmt(p, "%s.zero", base), &sc, NULL, 0);
    hlo_attrs_mut(p->out, hlo_inst(p->out, oc, c))->literal = part_identity_literal(p, REDUCE_SUM, s->type);
    if (s->rank == 0)
        return c;
    Shape bs = shape_array(s->type, s->rank, s->dims);
    return hlo_add_inst(p->out, oc, HLO_BROADCAST, part_fmt(p, "%s.zeros", base), &bs, &c, 1);
}

/* A branch computation `name` taking the tuple ts: the op on its elements
 * (run) or zeros and tokens of the op's shape. */
static int32_t transfer_branch(Part *p, int32_t i, const Shape *ts, bool run)
{
    const HloInst *in = part_in(p, i);
    const char *name = names_unique(&p->mod->comp_names, part_fmt(p, "%s.%s", in->name, run ? "on-device" : "elsewhere"),
                                    p->scratch);
    int32_t oc = hlo_add_computation(p->out, name, false);
    int32_t prm = hlo_add_inst(p->out, oc, HLO_PARAMETER, "operands", ts, NULL, 0);
    hlo_inst(p->out, oc, prm)->param_number = 0;
    if (!run) {
        hlo_comp(p->out, oc)->root = zeros_like(p, oc, in->shape, in->name);
        return oc;
    }
    int32_t *ops = ARENA_ARRAY(p->scratch, int32_t, ts->n_elems + 1);
    for (int32_t k = 0; k < ts->n_elems; k++) {
        ops[k] = hlo_add_inst(p->out, oc, HLO_GET_TUPLE_ELEMENT, part_fmt(p, "operand.%d", (int)k), &ts->elems[k],
                              &prm, 1);
        hlo_attrs_mut(p->out, hlo_inst(p->out, oc, ops[k]))->index = k;
    }
    hlo_comp(p->out, oc)->root = part_clone_into(p, oc, i, in->name, in->shape, ops, ts->n_elems);
    return oc;
}

/* pred[]: this device is device dev (its id over every atom == dev). */
static int32_t is_device(Part *p, int64_t dev, const char *base)
{
    int8_t all[SPMDC_MAX_ATOMS];
    for (int32_t a = 0; a < p->mesh->n_atoms; a++)
        all[a] = (int8_t)a;
    int32_t id = part_offset(p, all, p->mesh->n_atoms, 1, base);
    Shape s32 = shape_scalar(ET_S32), ps = shape_scalar(ET_PRED);
    int32_t c = part_emit(p, HLO_CONSTANT, part_name(p, base, "device"), &s32, NULL, 0);
    Literal *lit = ARENA_NEW(p->out->arena, Literal);
    lit->n = 1;
    lit->i = arena_memdup(p->out->arena, &dev, sizeof dev);
    hlo_attrs_mut(p->out, part_out(p, c))->literal = lit;
    int32_t ab[2] = {id, c};
    int32_t own = part_emit(p, HLO_COMPARE, part_name(p, base, "is-device"), &ps, ab, 2);
    hlo_attrs_mut(p->out, part_out(p, own))->direction = CMP_EQ;
    return own;
}

/* The result leaves of a transfer run on one device: its array data a
 * pending sum the other devices add zeros to (an outfeed has none), its
 * tokens whole. */
static void one_device_leaves(Part *p, const HloInst *in, Tiling *leaves, int32_t nl)
{
    uint32_t all_mask = p->mesh->n_atoms >= 32 ? 0xffffffffu : (1u << p->mesh->n_atoms) - 1;
    int32_t k = 0, sp = 0;
    const Shape *stack[64];
    stack[sp++] = in->shape;
    while (sp > 0 && k < nl) {
        const Shape *s = stack[--sp];
        if (shape_is_tuple(s)) {
            for (int32_t e = s->n_elems - 1; e >= 0 && sp < 64; e--)
                stack[sp++] = &s->elems[e];
            continue;
        }
        if (s->type != ET_TOKEN && in->op != HLO_OUTFEED) {
            leaves[k].partial = all_mask;
            leaves[k].kind = REDUCE_SUM;
        }
        k++;
    }
}

bool part_transfer(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    int64_t dev = transfer_device(p, i);
    if (dev == -2)
        return false;
    if (dev >= 0 && in->op != HLO_INFEED && in->op != HLO_OUTFEED) {
        diag_error(p->cx->diag, in->span, "%s: %s on a single device is not partitioned yet (send and recv run "
                   "replicated)", in->name, hlo_opcode_name(in->op));
        return false;
    }
    int32_t *ops = ARENA_ARRAY(p->scratch, int32_t, in->n_operands + 1);
    for (int32_t k = 0; k < in->n_operands; k++) {
        ops[k] = part_operand(p, i, k, part_replicated_leaves(p, part_in(p, in->operands[k])->shape, NULL));
        if (ops[k] < 0)
            return false;
    }
    int32_t nl;
    Tiling *leaves = part_replicated_leaves(p, in->shape, &nl);
    if (dev < 0 || p->mesh->n_atoms == 0) {
        int32_t r = part_clone(p, i, part_result_name(p, i, leaves, "full"), in->shape, ops, in->n_operands);
        part_set_result(p, i, r, leaves, -1, NULL);
        return true;
    }
    /* on device dev only: conditional(id == dev, operands, operands) */
    Shape tuple; /* the elements are the operands' records, copied by hlo_shape */
    memset(&tuple, 0, sizeof tuple);
    tuple.type = ET_TUPLE;
    tuple.n_elems = in->n_operands;
    tuple.elems = ARENA_ARRAY(p->tmp, Shape, in->n_operands + 1);
    for (int32_t k = 0; k < in->n_operands; k++)
        tuple.elems[k] = *part_out(p, ops[k])->shape;
    const Shape *ts = hlo_shape(p->out, &tuple);
    int32_t t = part_emit(p, HLO_TUPLE, part_name(p, in->name, "operands"), ts, ops, in->n_operands);
    int32_t cops[3] = {is_device(p, dev, in->name), t, t};
    int32_t bt = transfer_branch(p, i, ts, true), bf = transfer_branch(p, i, ts, false);
    one_device_leaves(p, in, leaves, nl);
    int32_t r = part_emit(p, HLO_CONDITIONAL, part_result_name(p, i, leaves, "device-only"), in->shape, cops, 3);
    HloAttrs *a = hlo_attrs_mut(p->out, part_out(p, r));
    int64_t br[2] = {bt, bf};
    a->branches = hlo_intlist(p->out, br, 2);
    a->branches_by_pred = true;
    part_out(p, r)->span = in->span;
    const char *why = p->rep ? part_fmt(p, "%s: only device %lld runs it ({maximal device=%lld})", in->name,
                                        (long long)dev, (long long)dev)
                             : NULL;
    part_set_result(p, i, r, leaves, i, why);
    return true;
}
