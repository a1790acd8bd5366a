/* partition_manual.c - regions the user partitioned by hand (shard_map):
 * manual and partially manual values (docs/partitioning.md, "Manual
 * regions").
 *
 * A value is manual along a set of mesh atoms M when the program holds each
 * device's own piece along M: its shape is already the per-device shape
 * along M, and the partitioner keeps the ops on it as the user wrote them.
 * Along the other atoms (a partially manual region) the value is automatic
 * and partitioned as usual, so a value's states (Tiling) never use an atom
 * of M, and every collective the partitioner inserts there runs along
 * automatic atoms only.
 *
 * part_manual_masks gives every instruction of a computation its mask
 * (PVal.manual): the result of SPMDFullToShardShape takes the manual atoms
 * of its sharding, any other op the atoms of its manual operands (an
 * automatic operand is used whole: replicated), SPMDShardToFullShape ends
 * the region; a leaf (constant, iota, partition-id, ...) all of whose users
 * are manual along M is manual along M too, so partition-id and replica-id
 * there keep the meaning the user gave them.
 *
 * Borders:
 *  - SPMDFullToShardShape(x): the operand's declared sharding, restricted
 *    to M, says which piece each device takes (the manual layout); x is
 *    brought to that layout (M atoms major) joined with the result's
 *    automatic tiling, and the local data is the region's value.
 *  - SPMDShardToFullShape(y): the result's declared sharding, restricted to
 *    M, says where each device's piece goes; y's local data is the result
 *    in the state "M layout joined with y's automatic tiling" (atoms of M
 *    the layout does not use: the pieces are taken to be equal, as JAX's
 *    out_specs promise).
 * Collectives the user wrote inside a region (all-reduce, all-gather,
 * reduce-scatter, all-to-all, collective-permute) keep their replica groups
 * (global device ids: the mesh's devices in order); they must run along
 * manual atoms only, are checked against the mesh and reported as the
 * user's own.
 */
#include <string.h>

#include "partition_internal.h"

/* ================================================================ tilings */

/* t without the atoms of mask (dims' runs and the pending reduction). */
Tiling part_strip_atoms(Tiling t, uint32_t mask)
{
    if (!mask)
        return t;
    Tiling r;
    tiling_replicated(&r, t.rank);
    for (int32_t d = 0; d < t.rank; d++) {
        int8_t a[SPMDC_MAX_ATOMS];
        int32_t n = 0;
        const int8_t *src = tiling_dim(&t, d);
        for (int32_t k = 0; k < tiling_dim_n(&t, d); k++)
            if (!(mask & (1u << src[k])))
                a[n++] = src[k];
        tiling_set_dim(&r, d, a, n);
    }
    r.partial = t.partial & ~mask;
    r.kind = r.partial ? t.kind : REDUCE_NONE;
    return r;
}

/* Per dim the runs of major (atoms of M) then minor: the layout of a value
 * whose manual pieces are split further by automatic atoms. */
static Tiling join(const Tiling *major, const Tiling *minor)
{
    Tiling r;
    tiling_replicated(&r, major->rank);
    for (int32_t d = 0; d < major->rank; d++) {
        int8_t a[SPMDC_MAX_ATOMS];
        int32_t n = 0;
        for (int32_t k = 0; k < tiling_dim_n(major, d); k++)
            a[n++] = tiling_dim(major, d)[k];
        for (int32_t k = 0; d < minor->rank && k < tiling_dim_n(minor, d); k++)
            a[n++] = tiling_dim(minor, d)[k];
        tiling_set_dim(&r, d, a, n);
    }
    return r;
}

static uint32_t all_atoms(const Mesh *m) { return m->n_atoms >= 32 ? 0xffffffffu : (1u << m->n_atoms) - 1; }

/* The atoms along which sharding sh (any leaf) is manual. */
static uint32_t sharding_manual(const Part *p, const Sharding *sh)
{
    if (!sh)
        return 0;
    if (sh->kind == SHARDING_MANUAL)
        return all_atoms(p->mesh);
    if (sh->kind == SHARDING_TUPLE) {
        uint32_t m = 0;
        for (int32_t k = 0; k < sh->n_elems; k++)
            m |= sharding_manual(p, &sh->elems[k]);
        return m;
    }
    return sh->manual_atoms;
}

/* ================================================================ masks */

bool part_manual_masks(Part *p)
{
    const HloComputation *c = &p->in->comps[p->ic];
    if (!p->param_manual && !p->manual_sources)
        return true; /* nothing makes a value manual: every mask stays 0 */
    bool any = p->param_manual != 0;
    for (int32_t i = 0; i < c->n_insts; i++) {
        const HloInst *in = &c->insts[i];
        uint32_t m = 0;
        if (in->op == HLO_PARAMETER) {
            m = p->parent ? p->param_manual : sharding_manual(p, in->sharding);
        } else if (hlo_is_custom_call(in, "SPMDFullToShardShape")) {
            m = sharding_manual(p, in->sharding);
            if (!m && !(all_atoms(p->mesh) == 0 && in->sharding && in->sharding->kind == SHARDING_MANUAL)) {
                diag_error(p->cx->diag, in->span, "%s: SPMDFullToShardShape needs a manual sharding ({manual} or "
                           "last_tile_dims={manual, ...})", in->name);
                return false;
            }
        } else if (hlo_is_custom_call(in, "SPMDShardToFullShape")) {
            /* a nested region ends: the result stays manual along the atoms
             * its own sharding keeps manual (none for the outermost) */
            m = sharding_manual(p, in->sharding);
        } else {
            /* a Sharding constraint with manual atoms inside a region names
             * them for values made from leaves alone (a nested shard_map
             * with no inputs: jax.lax.axis_index) */
            if (hlo_is_custom_call(in, "Sharding"))
                m = sharding_manual(p, in->sharding);
            for (int32_t k = 0; k < in->n_operands; k++) {
                uint32_t om = p->vals[in->operands[k]].manual;
                if (om && m && om != m && !(hlo_is_custom_call(in, "Sharding") && (om & ~m) == 0)) {
                    diag_error(p->cx->diag, in->span,
                               "%s: its operands are manual along different mesh axes (%s and %s)", in->name,
                               part_axes_mask_text(p, m), part_axes_mask_text(p, om));
                    return false;
                }
                m |= om;
            }
        }
        p->vals[i].manual = m;
        any |= m != 0;
    }
    if (!any)
        return true;
    /* values made from leaves alone (constants, iotas, partition-id and what
     * is computed from them) whose users are all manual along the same
     * atoms belong to the region; users come later in program order, so a
     * walk from the end settles whole chains (partition-id / 1 % 4 ->
     * convert -> broadcast for jax.lax.axis_index) */
    bool *from_leaves = ARENA_ARRAY(p->scratch, bool, c->n_insts + 1);
    for (int32_t i = 0; i < c->n_insts; i++) {
        const HloInst *in = &c->insts[i];
        bool leafy = in->op != HLO_PARAMETER && !p->vals[i].manual && in->op != HLO_CUSTOM_CALL;
        for (int32_t k = 0; k < in->n_operands && leafy; k++)
            leafy = from_leaves[in->operands[k]];
        from_leaves[i] = leafy;
    }
    HloUsers u = hlo_compute_users(c, p->scratch);
    for (int32_t i = c->n_insts - 1; i >= 0; i--) {
        if (!from_leaves[i] || u.start[i] == u.start[i + 1])
            continue;
        uint32_t m = p->vals[u.users[u.start[i]]].manual;
        for (int32_t e = u.start[i]; e < u.start[i + 1] && m; e++) {
            const HloInst *user = &c->insts[u.users[e]];
            if (p->vals[u.users[e]].manual != m || hlo_is_custom_call(user, "SPMDFullToShardShape"))
                m = 0;
        }
        p->vals[i].manual = m;
    }
    for (int32_t i = 0; i < c->n_insts; i++) {
        const HloInst *in = &c->insts[i];
        if (!hlo_is_custom_call(in, "Sharding") || in->n_operands != 1)
            continue;
        uint32_t sm = sharding_manual(p, in->sharding), om = p->vals[in->operands[0]].manual;
        if (sm & ~om) {
            diag_error(p->cx->diag, in->span,
                       "%s: a sharding manual along %s on %s, which is not manual along %s (a value enters a "
                       "manual region through SPMDFullToShardShape)",
                       in->name, part_axes_mask_text(p, sm), c->insts[in->operands[0]].name,
                       part_axes_mask_text(p, sm & ~om));
            return false;
        }
    }
    return true;
}

/* ================================================================ borders */

/* layout restricted to the atoms of M, checked against the local and
 * global shapes: local[d] * tiles(d) == global[d]. */
static bool manual_layout(Part *p, int32_t i, const Tiling *decl, uint32_t m, const Shape *local, const Shape *global,
                          Tiling *out)
{
    const HloInst *in = part_in(p, i);
    Tiling t = part_strip_atoms(*decl, ~m);
    t = tiling_strip_partial(t);
    for (int32_t d = 0; d < global->rank; d++) {
        int64_t tiles = d < t.rank ? tiling_dim_tiles(&t, p->mesh, d) : 1;
        if (local->rank != global->rank || local->dims[d] * tiles != global->dims[d]) {
            StrBuf l = {0}, g = {0};
            shape_print(&l, local, false);
            shape_print(&g, global, false);
            diag_error(p->cx->diag, in->span,
                       "%s: the per-device shape %s is not %s split as %s along the manual axes %s", in->name,
                       sb_cstr(&l), sb_cstr(&g), part_spec_text(p, &t), part_axes_mask_text(p, m));
            sb_free(&l);
            sb_free(&g);
            return false;
        }
    }
    *out = t;
    return true;
}

bool part_manual_border(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    if (in->n_operands != 1 || !shape_is_array(in->shape) || !shape_is_array(part_in(p, in->operands[0])->shape)) {
        diag_error(p->cx->diag, in->span, "%s: %s takes one array and returns one", in->name,
                   hlo_attrs(in)->custom_call_target);
        return false;
    }
    if (all_atoms(p->mesh) == 0) {
        /* one device: a manual region's border is a copy (its shard is the whole value) */
        if (!shape_equal(in->shape, part_in(p, in->operands[0])->shape)) {
            diag_error(p->cx->diag, in->span, "%s: on one device %s keeps the shape of its operand", in->name,
                       hlo_attrs(in)->custom_call_target);
            return false;
        }
        return part_copy_as_declared(p, i);
    }
    int32_t x = in->operands[0];
    const HloInst *xi = part_in(p, x);
    bool to_shard = hlo_is_custom_call(in, "SPMDFullToShardShape");
    /* m: the atoms this border starts (to_shard) or ends; a nested region
     * starts or ends only atoms its outer region leaves automatic */
    uint32_t inner = to_shard ? p->vals[i].manual : p->vals[x].manual;
    uint32_t outer = to_shard ? p->vals[x].manual : p->vals[i].manual;
    uint32_t m = inner & ~outer;
    if (!to_shard && (!m || (outer & ~inner))) {
        diag_error(p->cx->diag, in->span, "%s: SPMDShardToFullShape of %s, which is not manual along %s", in->name,
                   xi->name, outer ? "more axes than its result" : "any axis");
        return false;
    }
    if (to_shard && (!m || (outer & ~inner))) {
        diag_error(p->cx->diag, in->span, "%s: SPMDFullToShardShape of %s, which is manual already along %s",
                   in->name, xi->name, part_axes_mask_text(p, outer));
        return false;
    }
    Tiling layout, state, want;
    const Tiling *own = part_decl_leaves(p, i);
    if (to_shard) {
        if (!manual_layout(p, i, &part_decl_leaves(p, x)[0], m, in->shape, xi->shape, &layout))
            return false;
        want = join(&layout, &own[0]);
        state = own[0];
    } else {
        if (!manual_layout(p, i, &own[0], m, xi->shape, in->shape, &layout))
            return false;
        /* a result declared unreduced along manual atoms ({unreduced}, an
         * unreduced out_spec) would make the devices' pieces a pending sum;
         * the layout takes them to be equal copies (and so does verify's
         * reference), so devices would disagree on a replicated value */
        if (own[0].partial & m) {
            diag_error(p->cx->diag, in->span,
                       "%s: SPMDShardToFullShape to a sharding unreduced along the manual axes %s is not supported; "
                       "sum the pieces inside the region (an all-reduce) or end it in a sharding without unreduced",
                       in->name, part_axes_mask_text(p, own[0].partial & m));
            return false;
        }
        want = tiling_strip_partial(part_decl_leaves(p, x)[0]);
        state = join(&layout, &want);
    }
    if (!tiling_valid(&want) || !tiling_valid(&state)) {
        diag_error(p->cx->diag, in->span, "%s: its automatic sharding uses a manual axis", in->name);
        return false;
    }
    int32_t op = part_operand(p, i, 0, &want);
    if (op < 0)
        return false;
    Shape l = tiling_local_shape(&state, p->mesh, in->shape);
    int32_t r = part_emit(p, HLO_COPY, part_result_name(p, i, &state, to_shard ? "local" : "full"), &l, &op, 1);
    part_out(p, r)->span = in->span;
    part_set_result(p, i, r, &state, -1, NULL);
    return true;
}

/* ================================================================ the user's collectives */

/* A collective-permute's groups: the mesh's groups along the atoms on
 * which a source and its target differ; false after an error. */
static bool permute_groups(Part *p, const HloInst *in, int64_t *ids, int64_t *n_groups, int64_t *size)
{
    const HloAttrs *a = hlo_attrs(in);
    int64_t nd = p->mesh->n_devices;
    uint32_t mask = 0;
    for (int32_t k = 0; k < a->n_pairs; k++) {
        int64_t s = a->pairs[2 * k], t = a->pairs[2 * k + 1];
        if (s < 0 || t < 0 || s >= nd || t >= nd) {
            diag_error(p->cx->diag, in->span, "%s: source_target_pairs name a device the mesh does not have",
                       in->name);
            return false;
        }
        for (int32_t at = 0; at < p->mesh->n_atoms; at++)
            if (mesh_atom_coord(p->mesh, s, at) != mesh_atom_coord(p->mesh, t, at))
                mask |= 1u << at;
    }
    int8_t order[SPMDC_MAX_ATOMS];
    int32_t n = 0;
    for (int32_t at = 0; at < p->mesh->n_atoms; at++)
        if (mask & (1u << at))
            order[n++] = (int8_t)at;
    mesh_groups(p->mesh, order, n, ids, n_groups, size);
    return true;
}

/* The device ids of instruction in's groups (global ids: replica * P +
 * partition, one replica) as n_groups rows of size; false after an error. */
static bool user_groups(Part *p, int32_t i, int64_t **ids, int64_t *n_groups, int64_t *size)
{
    const HloInst *in = part_in(p, i);
    const HloAttrs *a = hlo_attrs(in);
    int64_t nd = p->mesh->n_devices;
    int64_t parts = p->in->num_partitions > 0 ? p->in->num_partitions : nd;
    int64_t reps = p->in->replica_count > 0 ? p->in->replica_count : 1;
    if (parts != nd || reps != 1) {
        diag_error(p->cx->diag, in->span,
                   "%s: written for %lld partitions and %lld replicas, but the mesh has %lld devices", in->name,
                   (long long)parts, (long long)reps, (long long)nd);
        return false;
    }
    *ids = ARENA_ARRAY(p->scratch, int64_t, nd);
    if (in->op == HLO_COLLECTIVE_PERMUTE)
        return permute_groups(p, in, *ids, n_groups, size);
    /* no channel_id: groups of replica ids; with one replica each device
     * is alone */
    if (a->channel_id == 0) {
        *n_groups = nd;
        *size = 1;
        for (int64_t d = 0; d < nd; d++)
            (*ids)[d] = d;
        return true;
    }
    if (a->replica_groups.n_groups == 0) {
        *n_groups = 1;
        *size = nd;
        for (int64_t d = 0; d < nd; d++)
            (*ids)[d] = d;
        return true;
    }
    const ReplicaGroups *g = &a->replica_groups;
    if (g->n_groups * g->group_size != nd) {
        diag_error(p->cx->diag, in->span, "%s: its replica groups do not cover the %lld devices once", in->name,
                   (long long)nd);
        return false;
    }
    uint8_t *seen = ARENA_ARRAY(p->scratch, uint8_t, nd);
    for (int64_t k = 0; k < nd; k++) {
        int64_t id = g->ids[k];
        if (id < 0 || id >= nd || seen[id]++) {
            diag_error(p->cx->diag, in->span, "%s: its replica groups do not cover the %lld devices once", in->name,
                       (long long)nd);
            return false;
        }
        (*ids)[k] = id;
    }
    *n_groups = g->n_groups;
    *size = g->group_size;
    return true;
}

/* The mesh atoms the groups run along (atoms on which members of a group
 * differ), in *atoms (major first); false when the groups are not exactly
 * the mesh's groups along those atoms (then *n = 0). */
static bool group_atoms(Part *p, const int64_t *ids, int64_t n_groups, int64_t size, int8_t *atoms, int32_t *n)
{
    const Mesh *m = p->mesh;
    uint32_t mask = 0;
    for (int64_t g = 0; g < n_groups; g++)
        for (int64_t k = 1; k < size; k++)
            for (int32_t a = 0; a < m->n_atoms; a++)
                if (mesh_atom_coord(m, ids[g * size], a) != mesh_atom_coord(m, ids[g * size + k], a))
                    mask |= 1u << a;
    *n = 0;
    for (int32_t a = 0; a < m->n_atoms; a++)
        if (mask & (1u << a))
            atoms[(*n)++] = (int8_t)a;
    if (mesh_mask_size(m, mask) != size) {
        *n = 0;
        return false;
    }
    /* same partition of the devices as the mesh's groups along mask */
    int64_t *gid = ARENA_ARRAY(p->scratch, int64_t, m->n_devices);
    for (int64_t g = 0; g < n_groups; g++)
        for (int64_t k = 0; k < size; k++)
            gid[ids[g * size + k]] = ids[g * size];
    for (int64_t d = 0; d < m->n_devices; d++) {
        for (int32_t a = 0; a < m->n_atoms; a++) {
            bool same = mesh_atom_coord(m, d, a) == mesh_atom_coord(m, gid[d], a);
            if (!(mask & (1u << a)) && !same) {
                *n = 0;
                return false;
            }
        }
    }
    return true;
}

static CollectiveKind kind_of(HloOpcode op)
{
    switch (op) {
    case HLO_ALL_GATHER: return COLL_ALL_GATHER;
    case HLO_REDUCE_SCATTER: return COLL_REDUCE_SCATTER;
    case HLO_ALL_TO_ALL: return COLL_ALL_TO_ALL;
    case HLO_COLLECTIVE_PERMUTE: return COLL_COLLECTIVE_PERMUTE;
    default: return COLL_ALL_REDUCE;
    }
}

/* Dims a collective moves data along (they must stay unsplit): the
 * `dimensions` of all-gather, reduce-scatter and all-to-all; as a mask. */
static uint32_t moved_dims(const HloInst *in)
{
    const HloAttrs *a = hlo_attrs(in);
    uint32_t m = 0;
    if (in->op == HLO_ALL_GATHER || in->op == HLO_REDUCE_SCATTER || in->op == HLO_ALL_TO_ALL)
        for (int32_t k = 0; k < a->dimensions.n; k++)
            if (a->dimensions.v[k] >= 0 && a->dimensions.v[k] < 32)
                m |= 1u << a->dimensions.v[k];
    return m;
}

/* Bytes one device sends for the emitted collective `local` (local shapes). */
static int64_t user_bytes(Part *p, int32_t local, CollectiveKind k, int64_t size)
{
    const HloInst *ci = part_out(p, local);
    int64_t ob = 0;
    for (int32_t j = 0; j < ci->n_operands; j++)
        ob += shape_byte_size(part_out(p, ci->operands[j])->shape);
    int64_t rb = shape_byte_size(ci->shape);
    if (k == COLL_COLLECTIVE_PERMUTE) {
        const HloAttrs *a = hlo_attrs(ci);
        for (int32_t j = 0; j < a->n_pairs; j++)
            if (a->pairs[2 * j] != a->pairs[2 * j + 1])
                return ob;
        return 0;
    }
    return comm_bytes_per_device(k, size, ob, rb);
}

/* The report row of the user's collective i, emitted as r: its groups run
 * along atoms[0..n) (NULL: not along mesh axes), n_groups of size. */
static void record_user(Part *p, int32_t i, int32_t r, const int8_t *atoms, int32_t n, int64_t n_groups,
                        int64_t size)
{
    const HloInst *in = part_in(p, i);
    CollectiveKind k = kind_of(in->op);
    const char *axes = !atoms ? "devices not along mesh axes" : n ? part_axes_text(p, atoms, n) : "no axis";
    static const int8_t none[1] = {0};
    const char *why = p->vals[i].manual
                          ? part_fmt(p, "written in the input inside a manual region (manual along %s): %s over %s, "
                                     "kept as written",
                                     part_axes_mask_text(p, p->vals[i].manual), hlo_opcode_name(in->op), axes)
                          : part_fmt(p, "written in the input: %s whose replica groups hold one device each (one "
                                     "replica), kept as written; no data moves",
                                     hlo_opcode_name(in->op));
    CommRecord *rec = part_record(p, k, r, atoms ? atoms : none, atoms ? n : 0, user_bytes(p, r, k, size), i, why);
    if (rec) {
        rec->from_input = true;
        rec->group_size = size;
        rec->num_groups = n_groups;
    }
}

bool part_user_collective(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    uint32_t m = p->vals[i].manual;
    int64_t *ids, n_groups, size;
    if (!m && (in->op == HLO_COLLECTIVE_PERMUTE || !user_groups(p, i, &ids, &n_groups, &size) || size != 1)) {
        diag_error(p->cx->diag, in->span,
                   "%s: %s outside a manual region (the partitioner inserts the collectives; write them inside "
                   "shard_map or a region with a manual sharding)",
                   in->name, hlo_opcode_name(in->op));
        return false;
    }
    /* outside a manual region only groups of one device each (a cross-replica
     * op in a module of one replica): nothing moves, each device keeps its
     * piece */
    if (m && !user_groups(p, i, &ids, &n_groups, &size))
        return false;
    int8_t atoms[SPMDC_MAX_ATOMS];
    int32_t n = 0;
    bool on_mesh = group_atoms(p, ids, n_groups, size, atoms, &n);
    for (int32_t k = 0; k < n; k++) {
        if (!(m & (1u << atoms[k]))) {
            diag_error(p->cx->diag, in->span,
                       "%s: its replica groups run along %s, which the region leaves automatic (manual: %s)",
                       in->name, part_axes_text(p, atoms + k, 1), part_axes_mask_text(p, m));
            return false;
        }
    }
    /* every operand in the result's automatic tiling, the moved dims whole */
    uint32_t moved = moved_dims(in);
    const Tiling *decl = part_decl_leaves(p, i);
    int32_t nl = p->vals[i].n_leaves;
    Tiling *res = ARENA_ARRAY(p->scratch, Tiling, nl ? nl : 1);
    for (int32_t l = 0; l < nl; l++)
        res[l] = tiling_strip_partial(tiling_clear_dims(decl[l], moved));
    int32_t *ops = ARENA_ARRAY(p->scratch, int32_t, in->n_operands + 1);
    for (int32_t k = 0; k < in->n_operands; k++) {
        int32_t v = in->operands[k];
        const Tiling *want = &res[k < nl ? k : 0];
        if (p->vals[v].n_leaves != 1 || part_in(p, v)->shape->rank != want->rank) {
            diag_error(p->cx->diag, in->span, "%s: operand %d does not match its result", in->name, (int)k);
            return false;
        }
        if ((ops[k] = part_operand(p, i, k, want)) < 0)
            return false;
    }
    Shape l = part_local_shape(p, in->shape, res);
    int32_t r = part_clone(p, i, part_result_name(p, i, res, "local"), &l, ops, in->n_operands);
    HloAttrs *a = hlo_attrs_mut(p->out, part_out(p, r));
    if (a->channel_id)
        a->channel_id = p->mod->next_channel++;
    part_set_result(p, i, r, res, -1, NULL);
    record_user(p, i, r, on_mesh ? atoms : NULL, n, n_groups, size);
    return true;
}

bool part_manual_leaf(Part *p, int32_t i)
{
    const HloInst *in = part_in(p, i);
    if (!p->vals[i].manual) {
        diag_error(p->cx->diag, in->span,
                   "%s: %s outside a manual region is not supported by the partitioner (its value depends on "
                   "the device; use it inside shard_map)",
                   in->name, hlo_opcode_name(in->op));
        return false;
    }
    Tiling t;
    tiling_replicated(&t, 0);
    int32_t r = part_clone(p, i, in->name, in->shape, NULL, 0);
    part_set_result(p, i, r, &t, -1, NULL);
    return true;
}
