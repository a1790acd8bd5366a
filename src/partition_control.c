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
        if (comp->insts[i].op == HLO_PARAMETER && hlo_attrs(&comp->insts[i])->param_number == k)
            return &comp->insts[i];
    return NULL;
}

/* The leaves of the root of computation c, all replicated (a condition's pred). */
static const Tiling *replicated_root(Part *p, int32_t c)
{
    const HloComputation *comp = &p->in->comps[c];
    if (comp->root < 0)
        return NULL;
    return part_replicated_leaves(p, &comp->insts[comp->root].shape, NULL);
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
    Shape l = part_local_shape(p, &in->shape, state);
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
    ops[0] = part_operand(p, i, 0, part_replicated_leaves(p, &part_in(p, in->operands[0])->shape, NULL));
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
    Shape l = part_local_shape(p, &in->shape, result);
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
    Shape l = part_local_shape(p, &in->shape, result);
    int32_t r = part_clone(p, i, part_result_name(p, i, result, "local"), &l, ops, in->n_operands);
    hlo_attrs_mut(p->out, part_out(p, r))->to_apply = callee;
    part_set_result(p, i, r, result, -1, NULL);
    return true;
}
