/* sim.c - the N-device SPMD simulator: lockstep execution and collectives.
 *
 * Every device runs the same program with its own partition id and
 * buffers.  The entry computation is executed instruction by instruction on
 * all devices before moving on (lockstep), so a collective sees every
 * device's operand at once.  call / while / conditional whose callees hold
 * collectives are run in lockstep too (every device must take the same
 * path: the same trip count, the same branch); everything else is handed to
 * each device's interpreter.
 *
 * Collective groups follow XLA (hlo-input.md §3): no channel_id = groups of
 * replica ids (cross-replica); channel_id + use_global_device_ids = global
 * device ids (replica * P + partition); channel_id alone = cross-replica-
 * and-partition for all-reduce/all-gather/reduce-scatter, cross-partition
 * for all-to-all and collective-permute.  Groups must cover every id exactly
 * once; anything else is an error naming the instruction.
 */
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

typedef enum GroupMode { GM_CROSS_REPLICA, GM_CROSS_PARTITION, GM_CROSS_REPLICA_AND_PARTITION, GM_FLATTENED } GroupMode;

static GroupMode group_mode(const HloInst *inst)
{
    const HloAttrs *a = hlo_attrs(inst);
    if (a->channel_id == 0) return GM_CROSS_REPLICA;
    if (inst->op == HLO_ALL_TO_ALL || inst->op == HLO_COLLECTIVE_PERMUTE) return GM_CROSS_PARTITION;
    return a->use_global_device_ids ? GM_FLATTENED : GM_CROSS_REPLICA_AND_PARTITION;
}

static const char *space_name(GroupMode gm)
{
    return gm == GM_CROSS_PARTITION ? "partitions" : gm == GM_FLATTENED ? "devices" : "replicas";
}

/* Device groups of a collective: groups[g * size + k] is member k of group g. */
typedef struct DevGroups {
    int64_t n_groups, size;
    int64_t *ids; /* heap */
} DevGroups;

static bool check_ids(const Interp *ip, const HloInst *inst, const ReplicaGroups *rg, int64_t space, GroupMode gm)
{
    uint8_t *seen = xcalloc((size_t)space, 1);
    bool ok = true;
    for (int64_t k = 0; k < rg->n_groups * rg->group_size && ok; k++) {
        int64_t id = rg->ids[k];
        if (id < 0 || id >= space)
            ok = interp_error(ip, inst, "replica_groups: id %lld is out of range (%lld %s)", (long long)id,
                              (long long)space, space_name(gm));
        else if (seen[id]++)
            ok = interp_error(ip, inst, "replica_groups: id %lld appears in more than one group", (long long)id);
    }
    for (int64_t id = 0; id < space && ok; id++)
        if (!seen[id]) ok = interp_error(ip, inst, "replica_groups: id %lld is in no group", (long long)id);
    free(seen);
    return ok;
}

static bool device_groups(const Interp *ip, const HloInst *inst, DevGroups *g)
{
    int64_t R = ip->sh->n_replicas, P = ip->sh->n_partitions;
    GroupMode gm = group_mode(inst);
    int64_t space = gm == GM_CROSS_PARTITION ? P : gm == GM_FLATTENED ? R * P : R;
    const ReplicaGroups *rg = &hlo_attrs(inst)->replica_groups;
    ReplicaGroups all = {1, space, NULL};
    if (rg->n_groups == 0) {
        all.ids = xmalloc(sizeof(int64_t) * (size_t)space);
        for (int64_t k = 0; k < space; k++) all.ids[k] = k;
        rg = &all;
    }
    bool ok = rg->group_size > 0 ? check_ids(ip, inst, rg, space, gm)
                                 : interp_error(ip, inst, "replica_groups: empty group");
    memset(g, 0, sizeof *g);
    if (ok) {
        int64_t G = rg->n_groups, S = rg->group_size, *out;
        g->n_groups = gm == GM_CROSS_REPLICA ? G * P : gm == GM_CROSS_PARTITION ? G * R : G;
        g->size = gm == GM_CROSS_REPLICA_AND_PARTITION ? S * P : S;
        out = g->ids = xmalloc(sizeof(int64_t) * (size_t)(R * P));
        if (gm == GM_FLATTENED) {
            memcpy(out, rg->ids, sizeof(int64_t) * (size_t)(G * S));
        } else if (gm == GM_CROSS_REPLICA) {
            for (int64_t p = 0; p < P; p++)
                for (int64_t k = 0; k < G * S; k++) *out++ = rg->ids[k] * P + p;
        } else if (gm == GM_CROSS_PARTITION) {
            for (int64_t r = 0; r < R; r++)
                for (int64_t k = 0; k < G * S; k++) *out++ = r * P + rg->ids[k];
        } else {
            for (int64_t gi = 0; gi < G; gi++)
                for (int64_t p = 0; p < P; p++)
                    for (int64_t k = 0; k < S; k++) *out++ = rg->ids[gi * S + k] * P + p;
        }
    }
    free(all.ids);
    return ok;
}

/* ---------------------------------------------------------------- collectives */

static bool same_shapes(const Interp *ip, const HloInst *inst, const SimValue *const *ops, const int64_t *members,
                        int64_t size, int32_t j)
{
    for (int64_t k = 1; k < size; k++)
        if (!interp_shape_matches(&ops[members[k]][j], &ops[members[0]][j].shape) ||
            ops[members[k]][j].shape.type == ET_TUPLE)
            return interp_error(ip, inst, "operand %d differs in shape between devices %lld and %lld", j,
                                (long long)members[0], (long long)members[k]);
    return true;
}

static int32_t collective_dim(const Interp *ip, const HloInst *inst, const Shape *s)
{
    const IntList *dl = &hlo_attrs(inst)->dimensions;
    if (dl->n != 1 || dl->v[0] < 0 || dl->v[0] >= s->rank) {
        interp_error(ip, inst, "needs one dimension in range");
        return -1;
    }
    return (int32_t)dl->v[0];
}

/* out = the concatenation of vals[0..n) along dim. */
static SimValue concat_values(const SimValue *const *vals, int64_t n, int32_t dim)
{
    Shape s = vals[0]->shape;
    s.dims[dim] *= n;
    SimValue r = sim_value_new(&s);
    int64_t ost[SPMDC_MAX_RANK], ist[SPMDC_MAX_RANK];
    num_strides(s.dims, s.rank, ost);
    num_strides(vals[0]->shape.dims, s.rank, ist);
    for (int64_t k = 0; k < n; k++)
        num_copy_box(sim_value_data(&r), k * vals[0]->shape.dims[dim] * ost[dim], ost, sim_value_data(vals[k]), 0, ist,
                     vals[0]->shape.dims, s.rank, num_elem_bytes(s.type));
    return r;
}

/* Chunk k (of n equal chunks along dim) of v. */
static SimValue chunk_value(const SimValue *v, int32_t dim, int64_t n, int64_t k)
{
    Shape s = v->shape;
    s.dims[dim] /= n;
    SimValue r = sim_value_new(&s);
    int64_t ost[SPMDC_MAX_RANK], ist[SPMDC_MAX_RANK];
    num_strides(s.dims, s.rank, ost);
    num_strides(v->shape.dims, s.rank, ist);
    num_copy_box(sim_value_data(&r), 0, ost, sim_value_data(v), k * s.dims[dim] * ist[dim], ist, s.dims, s.rank,
                 num_elem_bytes(s.type));
    return r;
}

/* res[dev] (one value per device, per operand j) for one group. */
static bool group_reduce_like(Interp *ips, const HloInst *inst, const SimValue *const *ops, const int64_t *mem,
                              int64_t size, int32_t j, SimValue *res)
{
    Interp *ip = &ips[mem[0]];
    if (!same_shapes(ip, inst, ops, mem, size, j)) return false;
    const SimValue **vals = xmalloc(sizeof(SimValue *) * (size_t)size);
    for (int64_t k = 0; k < size; k++) vals[k] = &ops[mem[k]][j];
    bool ok = true;
    SimValue acc = {0};
    int32_t dim = inst->op == HLO_ALL_REDUCE ? 0 : collective_dim(ip, inst, &vals[0]->shape);
    if (dim < 0) ok = false;
    if (ok && inst->op == HLO_ALL_GATHER) {
        acc = concat_values(vals, size, dim);
    } else if (ok) {
        ok = interp_combine(ip, inst, hlo_attrs(inst)->to_apply, vals, (int32_t)size, &acc);
    }
    if (ok && inst->op == HLO_REDUCE_SCATTER && acc.shape.dims[dim] % size)
        ok = interp_error(ip, inst, "dimension %d (size %lld) does not split into %lld pieces", dim,
                          (long long)acc.shape.dims[dim], (long long)size);
    for (int64_t k = 0; k < size && ok; k++)
        res[mem[k]] = inst->op == HLO_REDUCE_SCATTER ? chunk_value(&acc, dim, size, k) : sim_value_share(&acc);
    sim_value_release(&acc);
    free(vals);
    return ok;
}

static bool group_all_to_all(Interp *ips, const HloInst *inst, const SimValue *const *ops, const int64_t *mem,
                             int64_t size, SimValue *res)
{
    Interp *ip = &ips[mem[0]];
    if (hlo_attrs(inst)->dimensions.n == 0) { /* tuple form: operand m of member k goes to member m */
        if (inst->n_operands != size)
            return interp_error(ip, inst, "tuple all-to-all needs %lld operands (one per group member)", (long long)size);
        for (int64_t k = 0; k < size; k++) {
            res[mem[k]] = sim_value_tuple((int32_t)size);
            for (int64_t m = 0; m < size; m++) res[mem[k]].elems[m] = sim_value_share(&ops[mem[m]][k]);
        }
        return true;
    }
    if (inst->n_operands != 1) return interp_error(ip, inst, "array all-to-all takes one operand");
    if (!same_shapes(ip, inst, ops, mem, size, 0)) return false;
    const Shape *s = &ops[mem[0]][0].shape;
    int32_t dim = collective_dim(ip, inst, s);
    if (dim < 0) return false;
    if (s->dims[dim] % size)
        return interp_error(ip, inst, "dimension %d (size %lld) does not split into %lld pieces", dim,
                            (long long)s->dims[dim], (long long)size);
    SimValue *chunks = xmalloc(sizeof(SimValue) * (size_t)size);
    const SimValue **ptrs = xmalloc(sizeof(SimValue *) * (size_t)size);
    for (int64_t k = 0; k < size; k++) {
        for (int64_t m = 0; m < size; m++) {
            chunks[m] = chunk_value(&ops[mem[m]][0], dim, size, k);
            ptrs[m] = &chunks[m];
        }
        res[mem[k]] = concat_values(ptrs, size, dim);
        for (int64_t m = 0; m < size; m++) sim_value_release(&chunks[m]);
    }
    free(chunks);
    free(ptrs);
    return true;
}

static bool collective_permute(Interp *ips, const HloInst *inst, const SimValue *const *ops, SimValue *outs, int64_t n)
{
    const Interp *ip = &ips[0];
    const HloAttrs *a = hlo_attrs(inst);
    int64_t R = ip->sh->n_replicas, P = ip->sh->n_partitions;
    GroupMode gm = group_mode(inst);
    int64_t space = gm == GM_CROSS_PARTITION ? P : R;
    int64_t *src = xmalloc(sizeof(int64_t) * (size_t)space);
    for (int64_t k = 0; k < space; k++) src[k] = -1;
    bool ok = true;
    for (int32_t k = 0; k < a->n_pairs && ok; k++) {
        int64_t s = a->pairs[2 * k], t = a->pairs[2 * k + 1];
        if (s < 0 || s >= space || t < 0 || t >= space)
            ok = interp_error(ip, inst, "source_target_pairs: pair {%lld,%lld} is out of range (%lld %s)", (long long)s,
                              (long long)t, (long long)space, space_name(gm));
        else if (src[t] >= 0)
            ok = interp_error(ip, inst, "source_target_pairs: %lld is the target of more than one pair", (long long)t);
        else
            src[t] = s;
    }
    for (int64_t d = 0; d < n && ok; d++) {
        int64_t r = d / P, p = d % P, self = gm == GM_CROSS_PARTITION ? p : r;
        if (src[self] < 0) {
            outs[d] = sim_value_new(&ops[d][0].shape); /* not a target: zeros */
        } else {
            int64_t from = gm == GM_CROSS_PARTITION ? r * P + src[self] : src[self] * P + p;
            outs[d] = sim_value_share(&ops[from][0]);
        }
        if (ops[d][0].shape.type == ET_TUPLE) ok = interp_error(ip, inst, "tuple operands are not supported");
    }
    free(src);
    return ok;
}

bool sim_collective(Interp *ips, int32_t c, int32_t i, const SimValue *const *ops, SimValue *outs, int64_t n)
{
    const HloInst *inst = hlo_inst(ips[0].sh->m, c, i);
    for (int64_t d = 0; d < n; d++) memset(&outs[d], 0, sizeof outs[d]);
    if (n != ips[0].sh->n_partitions * ips[0].sh->n_replicas)
        return interp_error(&ips[0], inst, "internal: collective run for %lld of the devices", (long long)n);
    if (inst->op == HLO_COLLECTIVE_PERMUTE) return collective_permute(ips, inst, ops, outs, n);
    DevGroups g;
    if (!device_groups(&ips[0], inst, &g)) return false;
    bool ok = true;
    int32_t n_ops = inst->n_operands;
    bool tuple = inst->op != HLO_ALL_TO_ALL && n_ops != 1;
    SimValue *res = xcalloc((size_t)(n * (tuple ? n_ops : 1)), sizeof(SimValue));
    if (n_ops < 1) ok = interp_error(&ips[0], inst, "needs at least one operand");
    for (int64_t gi = 0; gi < g.n_groups && ok; gi++) {
        const int64_t *mem = g.ids + gi * g.size;
        if (inst->op == HLO_ALL_TO_ALL) {
            ok = group_all_to_all(ips, inst, ops, mem, g.size, res);
            continue;
        }
        for (int32_t j = 0; j < n_ops && ok; j++) {
            SimValue *rj = xcalloc((size_t)n, sizeof(SimValue));
            ok = group_reduce_like(ips, inst, ops, mem, g.size, j, rj);
            for (int64_t k = 0; k < g.size; k++) res[mem[k] * (tuple ? n_ops : 1) + (tuple ? j : 0)] = rj[mem[k]];
            free(rj);
        }
    }
    for (int64_t d = 0; d < n; d++) {
        if (!tuple) {
            outs[d] = res[d];
            continue;
        }
        outs[d] = sim_value_tuple(n_ops);
        for (int32_t j = 0; j < n_ops; j++) outs[d].elems[j] = res[d * n_ops + j];
    }
    free(res);
    free(g.ids);
    if (!ok)
        for (int64_t d = 0; d < n; d++) sim_value_release(&outs[d]);
    return ok;
}

/* ---------------------------------------------------------------- manual borders */

bool sim_is_lockstep(const HloInst *inst)
{
    return hlo_opcode_category(inst->op) == 'C' || hlo_is_custom_call(inst, "SPMDFullToShardShape") ||
           hlo_is_custom_call(inst, "SPMDShardToFullShape");
}

/* Atoms along which a bound sharding is manual. */
static uint32_t manual_of(const Mesh *m, const Sharding *s)
{
    if (!s) return 0;
    if (s->kind == SHARDING_MANUAL) return m->n_atoms >= 32 ? 0xffffffffu : (1u << m->n_atoms) - 1;
    return s->kind == SHARDING_TUPLE ? 0 : s->manual_atoms;
}

/* The tiling of sharding s (rank) restricted to the atoms of mask. */
static Tiling manual_layout(const Sharding *s, int32_t rank, uint32_t mask)
{
    Tiling t, r;
    tiling_replicated(&r, rank);
    if (!s || !sharding_to_tiling(s, rank, &t)) return r;
    for (int32_t d = 0; d < rank; d++) {
        int8_t a[SPMDC_MAX_ATOMS];
        int32_t n = 0;
        for (int32_t k = 0; k < tiling_dim_n(&t, d); k++)
            if (mask & (1u << tiling_dim(&t, d)[k])) a[n++] = tiling_dim(&t, d)[k];
        tiling_set_dim(&r, d, a, n);
    }
    return r;
}

/* Copies the box of `local`'s shape between local (at 0) and global (at the
 * tile of `device` in layout t); to_local: global -> local. */
static void copy_piece(const Mesh *m, const Tiling *t, int64_t device, SimValue *global, SimValue *local, bool to_local)
{
    const Shape *gs = &global->shape, *ls = &local->shape;
    int64_t gstr[SPMDC_MAX_RANK], lstr[SPMDC_MAX_RANK], off = 0;
    num_strides(gs->dims, gs->rank, gstr);
    num_strides(ls->dims, ls->rank, lstr);
    for (int32_t d = 0; d < gs->rank; d++) off += tiling_tile_index(t, m, d, device) * ls->dims[d] * gstr[d];
    int es = num_elem_bytes(gs->type);
    if (to_local)
        num_copy_box(sim_value_data(local), 0, lstr, sim_value_data(global), off, gstr, ls->dims, ls->rank, es);
    else
        num_copy_box(sim_value_data(global), off, gstr, sim_value_data(local), 0, lstr, ls->dims, ls->rank, es);
}

/* SPMDFullToShardShape: each device takes its piece of the whole value by
 * the operand's sharding restricted to the manual atoms of the result's.
 * SPMDShardToFullShape: each device assembles the pieces of the devices
 * that differ from it only along the manual atoms of the operand's sharding
 * that the result's sharding does not keep manual,
 * placed by the result's sharding restricted to those atoms (devices whose
 * pieces land on the same tile hold the same piece: the last one wins). */
static bool manual_border(Interp *ips, int32_t c, int32_t i, const SimValue *const *ops, SimValue *outs, int64_t n)
{
    const HloModule *mod = ips[0].sh->m;
    const HloComputation *comp = hlo_comp(mod, c);
    const HloInst *inst = &comp->insts[i];
    if (!mod->has_mesh || inst->n_operands != 1 || !shape_is_array(inst->shape))
        return interp_error(&ips[0], inst, "a manual region's border needs a bound mesh and one array operand");
    const Mesh *m = &mod->mesh;
    const HloInst *x = &comp->insts[inst->operands[0]];
    bool to_shard = hlo_is_custom_call(inst, "SPMDFullToShardShape");
    /* the atoms this border starts or ends: a nested region (shard_map
     * inside shard_map) only those its outer region leaves automatic */
    uint32_t mask = to_shard ? manual_of(m, inst->sharding) & ~manual_of(m, x->sharding)
                             : manual_of(m, x->sharding) & ~manual_of(m, inst->sharding);
    Tiling t = manual_layout(to_shard ? x->sharding : inst->sharding, inst->shape->rank, mask);
    const Shape *ls = to_shard ? inst->shape : x->shape, *gs = to_shard ? x->shape : inst->shape;
    for (int32_t d = 0; d < gs->rank; d++)
        if (ls->rank != gs->rank || ls->dims[d] * tiling_dim_tiles(&t, m, d) != gs->dims[d])
            return interp_error(&ips[0], inst, "the manual pieces of dim %d do not fit the shapes", d);
    if (n != m->n_devices) return interp_error(&ips[0], inst, "simulated on %lld devices, the mesh has %lld", (long long)n, (long long)m->n_devices);
    for (int64_t d = 0; d < n; d++) {
        if (!interp_shape_matches(&ops[d][0], to_shard ? gs : ls)) {
            for (int64_t e = 0; e < d; e++) sim_value_release(&outs[e]);
            return interp_error(&ips[0], inst, "operand on device %lld does not have the declared shape", (long long)d);
        }
        outs[d] = sim_value_new(inst->shape);
        if (to_shard) {
            copy_piece(m, &t, d, (SimValue *)&ops[d][0], &outs[d], true);
            continue;
        }
        for (int64_t e = 0; e < n; e++) {
            bool same = true;
            for (int32_t a = 0; a < m->n_atoms && same; a++)
                if (!(mask & (1u << a))) same = mesh_atom_coord(m, d, a) == mesh_atom_coord(m, e, a);
            if (same) copy_piece(m, &t, e, &outs[d], (SimValue *)&ops[e][0], false);
        }
    }
    return true;
}

/* ---------------------------------------------------------------- lockstep */

typedef struct Sim {
    InterpShared sh;
    Interp *ips;   /* one per device */
    int64_t n;     /* devices */
    const SimOptions *opt;
} Sim;

static bool run_lockstep(Sim *s, int32_t c, const SimValue *args, int32_t n_args, SimValue *outs, bool top);

/* Per-device operand arrays of instruction inst: ops[d][k] (borrowed). */
static SimValue **gather_operands(const Sim *s, const HloInst *inst, SimValue *envs, int32_t n_insts)
{
    SimValue **ops = xmalloc(sizeof(SimValue *) * (size_t)s->n);
    for (int64_t d = 0; d < s->n; d++) {
        ops[d] = xmalloc(sizeof(SimValue) * (size_t)(inst->n_operands ? inst->n_operands : 1));
        for (int32_t k = 0; k < inst->n_operands; k++) ops[d][k] = envs[d * n_insts + inst->operands[k]];
    }
    return ops;
}

static void free_operands(const Sim *s, SimValue **ops)
{
    for (int64_t d = 0; d < s->n; d++) free(ops[d]);
    free(ops);
}

/* Flattens per-device operand arrays into args[d * n + k]. */
static SimValue *flat_args(const Sim *s, SimValue **ops, int32_t first, int32_t n)
{
    SimValue *a = xmalloc(sizeof(SimValue) * (size_t)(s->n * (n ? n : 1)));
    for (int64_t d = 0; d < s->n; d++)
        for (int32_t k = 0; k < n; k++) a[d * n + k] = ops[d][first + k];
    return a;
}

static bool lockstep_while(Sim *s, const HloInst *inst, SimValue **ops, SimValue *res)
{
    const HloAttrs *a = hlo_attrs(inst);
    SimValue *state = xmalloc(sizeof(SimValue) * (size_t)s->n), *pred = xcalloc((size_t)s->n, sizeof(SimValue));
    for (int64_t d = 0; d < s->n; d++) state[d] = sim_value_share(&ops[d][0]);
    bool ok = a->condition >= 0 && a->body >= 0;
    if (!ok) interp_error(&s->ips[0], inst, "missing condition or body");
    for (int64_t trip = 0; ok; trip++) {
        ok = run_lockstep(s, a->condition, state, 1, pred, false);
        bool go = false;
        for (int64_t d = 0; d < s->n && ok; d++) {
            if (pred[d].shape.type != ET_PRED || pred[d].shape.rank != 0) {
                ok = interp_error(&s->ips[0], inst, "condition does not return pred[]");
                break;
            }
            bool g = num_get_i(ET_PRED, sim_value_data(&pred[d]), 0) != 0;
            if (d == 0) go = g;
            else if (g != go)
                ok = interp_error(&s->ips[0], inst, "devices 0 and %lld disagree on the loop condition (the body holds collectives)", (long long)d);
        }
        for (int64_t d = 0; d < s->n; d++) sim_value_release(&pred[d]);
        if (!ok || !go) break;
        if (trip >= SIM_MAX_WHILE_TRIPS) {
            ok = interp_error(&s->ips[0], inst, "loop did not finish after %d iterations", SIM_MAX_WHILE_TRIPS);
            break;
        }
        ok = run_lockstep(s, a->body, state, 1, res, false);
        for (int64_t d = 0; d < s->n; d++) {
            sim_value_release(&state[d]);
            if (ok) state[d] = res[d]; /* moved: res holds nothing until the loop ends */
            memset(&res[d], 0, sizeof res[d]);
        }
    }
    for (int64_t d = 0; d < s->n; d++) {
        if (ok) res[d] = state[d];
        else sim_value_release(&state[d]);
    }
    free(state);
    free(pred);
    return ok;
}

static bool lockstep_control(Sim *s, const HloInst *inst, SimValue **ops, SimValue *res)
{
    const HloAttrs *a = hlo_attrs(inst);
    if (inst->op == HLO_WHILE) return lockstep_while(s, inst, ops, res);
    if (inst->op == HLO_CALL) {
        SimValue *args = flat_args(s, ops, 0, inst->n_operands);
        bool ok = run_lockstep(s, a->to_apply, args, inst->n_operands, res, false);
        free(args);
        return ok;
    }
    /* conditional: every device must pick the same branch */
    int64_t branch = -1, nb = a->branches.n;
    for (int64_t d = 0; d < s->n; d++) {
        const SimValue *sel = &ops[d][0];
        int64_t b = sel->shape.type == ET_PRED ? (num_get_i(ET_PRED, sim_value_data(sel), 0) ? 0 : 1)
                                               : num_get_i(sel->shape.type, sim_value_data(sel), 0);
        if (b < 0 || b >= nb) b = nb - 1;
        if (d > 0 && b != branch)
            return interp_error(&s->ips[0], inst, "devices 0 and %lld take different branches (the branches hold collectives)", (long long)d);
        branch = b;
    }
    if (branch < 0 || inst->n_operands != nb + 1) return interp_error(&s->ips[0], inst, "branch count does not match the operands");
    SimValue *args = flat_args(s, ops, (int32_t)branch + 1, 1);
    bool ok = run_lockstep(s, (int32_t)a->branches.v[branch], args, 1, res, false);
    free(args);
    return ok;
}

static bool needs_lockstep(Sim *s, const HloInst *inst)
{
    const HloAttrs *a = hlo_attrs(inst);
    int32_t m = s->sh.m->n_comps;
    if (inst->op == HLO_CALL) return a->to_apply >= 0 && a->to_apply < m && interp_comp_info(&s->sh, a->to_apply)->has_collective;
    if (inst->op == HLO_WHILE)
        return (a->body >= 0 && a->body < m && interp_comp_info(&s->sh, a->body)->has_collective) ||
               (a->condition >= 0 && a->condition < m && interp_comp_info(&s->sh, a->condition)->has_collective);
    if (inst->op == HLO_CONDITIONAL)
        for (int32_t k = 0; k < a->branches.n; k++)
            if (a->branches.v[k] >= 0 && a->branches.v[k] < m && interp_comp_info(&s->sh, (int32_t)a->branches.v[k])->has_collective)
                return true;
    return false;
}

/* Instruction i on every device; results into envs[d * n_insts + i]. */
static bool step(Sim *s, int32_t c, int32_t i, SimValue *envs, const SimValue *args, int32_t n_args)
{
    const HloComputation *comp = hlo_comp(s->sh.m, c);
    const HloInst *inst = &comp->insts[i];
    int32_t ni = comp->n_insts;
    bool coll = sim_is_lockstep(inst);
    /* messages name the entry's instruction that is running (a loop), as
     * the interpreter's do: computations run in lockstep count as nested */
    for (int64_t d = 0; d < s->n; d++)
        if (s->ips[d].depth == 0) s->ips[d].outer = inst;
    if (!coll && !needs_lockstep(s, inst)) {
        for (int64_t d = 0; d < s->n; d++)
            if (!interp_eval(&s->ips[d], c, i, envs + d * ni, args + d * n_args, n_args, &envs[d * ni + i])) return false;
        return true;
    }
    for (int32_t k = 0; k < inst->n_operands; k++)
        if (inst->operands[k] < 0 || inst->operands[k] >= i)
            return interp_error(&s->ips[0], inst, "operand %d is not an earlier instruction", k);
    SimValue **ops = gather_operands(s, inst, envs, ni);
    SimValue *res = xcalloc((size_t)s->n, sizeof(SimValue));
    bool ok = !coll                               ? lockstep_control(s, inst, ops, res)
              : hlo_opcode_category(inst->op) == 'C' ? sim_collective(s->ips, c, i, (const SimValue *const *)ops, res, s->n)
                                                     : manual_border(s->ips, c, i, (const SimValue *const *)ops, res, s->n);
    for (int64_t d = 0; d < s->n && ok; d++)
        if (!interp_shape_matches(&res[d], inst->shape))
            ok = interp_error(&s->ips[d], inst, "result on device %lld does not have the declared shape", (long long)d);
    for (int64_t d = 0; d < s->n; d++) {
        if (ok) envs[d * ni + i] = res[d];
        else sim_value_release(&res[d]);
    }
    free(res);
    free_operands(s, ops);
    return ok;
}

static bool run_lockstep(Sim *s, int32_t c, const SimValue *args, int32_t n_args, SimValue *outs, bool top)
{
    const HloComputation *comp = hlo_comp(s->sh.m, c);
    int32_t ni = comp->n_insts;
    if (comp->root < 0 || ni == 0) {
        diag_error(s->sh.diag, comp->span, "computation %s has no root", comp->name);
        return false;
    }
    const InterpCompInfo *ci = interp_comp_info(&s->sh, c);
    SimValue *envs = xcalloc((size_t)(s->n * ni), sizeof(SimValue));
    SimValue *vals = top && s->opt->observe ? xmalloc(sizeof(SimValue) * (size_t)s->n) : NULL;
    bool ok = true;
    for (int64_t d = 0; d < s->n && !top; d++) s->ips[d].depth++;
    for (int32_t i = 0; i < ni && ok; i++) {
        ok = step(s, c, i, envs, args, n_args);
        if (ok && vals) {
            for (int64_t d = 0; d < s->n; d++) vals[d] = envs[d * ni + i];
            s->opt->observe(s->opt->observe_user, i, vals, s->n);
        }
        const HloInst *inst = &comp->insts[i];
        for (int64_t d = 0; d < s->n; d++) {
            SimValue *env = envs + d * ni;
            for (int32_t k = 0; k < inst->n_operands; k++) {
                int32_t o = inst->operands[k];
                if (o >= 0 && o < i && ci->last_use[o] == i) sim_value_release(&env[o]);
            }
            if (ci->last_use[i] == i) sim_value_release(&env[i]);
        }
    }
    for (int64_t d = 0; d < s->n && !top; d++) s->ips[d].depth--;
    for (int64_t d = 0; d < s->n; d++) {
        if (ok) {
            outs[d] = envs[d * ni + comp->root];
            memset(&envs[d * ni + comp->root], 0, sizeof(SimValue));
        }
        for (int32_t i = 0; i < ni; i++) sim_value_release(&envs[d * ni + i]);
    }
    free(envs);
    free(vals);
    return ok;
}

bool sim_run_spmd(const HloModule *m, const SimOptions *opt, const SimValue *args, int32_t n_args, SimValue *outs,
                  DiagEngine *diag)
{
    return sim_run_spmd_why(m, opt, args, n_args, outs, diag, NULL);
}

bool sim_run_spmd_why(const HloModule *m, const SimOptions *opt, const SimValue *args, int32_t n_args,
                      SimValue *outs, DiagEngine *diag, bool *refused)
{
    if (refused) *refused = false;
    int64_t P = opt->n_partitions, R = opt->n_replicas;
    if (m->entry < 0 || P < 1 || R < 1 || P * R > SPMDC_MAX_DEVICES) {
        diag_error(diag, SRC_SPAN_NONE, "cannot simulate module %s on %lld x %lld devices", m->name, (long long)R,
                   (long long)P);
        return false;
    }
    Sim s;
    memset(&s, 0, sizeof s);
    interp_shared_init(&s.sh, m, diag, P, R);
    if (opt->work_limit > 0) s.sh.work_limit = opt->work_limit;
    s.n = P * R;
    s.opt = opt;
    s.ips = xcalloc((size_t)s.n, sizeof(Interp));
    for (int64_t d = 0; d < s.n; d++) {
        s.ips[d].sh = &s.sh;
        s.ips[d].partition_id = d % P;
        s.ips[d].replica_id = d / P;
    }
    for (int64_t d = 0; d < s.n; d++) memset(&outs[d], 0, sizeof outs[d]);
    bool ok = run_lockstep(&s, m->entry, args, n_args, outs, true);
    if (!ok && refused) *refused = s.sh.refused;
    free(s.ips);
    interp_shared_free(&s.sh);
    return ok;
}
