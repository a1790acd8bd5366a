/* oracle.c - the numerical oracle: `spmdc verify IN.hlo [--mesh SPEC] [--seed N] [--program OUT.hlo]`
 * (oracle.h).
 *
 * Generates the entry parameters from the seed (splitmix64: floats uniform
 * in [-1, 1) rounded to their type, integers in [-4, 4] ([0, 8] unsigned),
 * pred random; integers that feed gather / scatter indices or dynamic-slice
 * starts over the whole range they index and beyond, see index_uses), runs
 * IN on one device (the reference), partitions IN (or
 * reads OUT.hlo), runs the per-device program on every device of the mesh
 * with each device's shards of the inputs, and compares every output, shard
 * by shard, with the reference: integers and pred exactly, floats within a
 * tolerance relative to the output's largest magnitude that grows with the
 * reductions on the way (docs/verify.md).  On a mismatch both programs run
 * again and the first instruction of the partitioned program whose value
 * (an output instruction named like an input instruction holds that value's
 * shard under the input's propagated sharding, see partition.h) differs
 * from the reference is named.  The exit status tells a wrong program (1)
 * from a module the simulator cannot run (4) and from an input error (5)
 * (oracle.h); 2 is a usage error.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "sim_internal.h"
#include "spmdc/oracle.h"
#include "spmdc/driver.h"
#include "spmdc/pipeline.h"
#include "spmdc/parse.h"
#include "spmdc/partition.h"
#include "spmdc/report.h"
#include "spmdc/shrink.h"
#include "spmdc/verify.h"

typedef struct NameEntry {
    const char *name;
    int32_t inst;
    UT_hash_handle hh;
} NameEntry;

typedef struct VerifyRun {
    const char *in_path, *prog_path;
    uint32_t prog_fid;       /* diag file id of --program (0 = partitioned here) */
    uint64_t seed;
    DiagEngine *diag;
    PassCtx cx;
    PipelineState st;        /* the input through the pipeline (owns m, and p when partitioned here) */
    HloModule *m;            /* the input, shardings propagated (st.m) */
    HloModule *p;            /* the per-device program (st.out, or read from --program) */
    Mesh mesh;
    int64_t n_dev;
    int32_t n_params;
    int32_t *param_inst;     /* m's entry parameter k -> instruction */
    SimValue *inputs;        /* global inputs, by parameter number */
    double *noise;           /* per instruction of m's entry, relative to its scale (docs/verify.md) */
    double *wide_err;        /* per output leaf: the reference's own error measured against a run
                                widened to f64 (loops only, else NULL) */
    uint8_t **wide_overflow; /* per output leaf (wide_leaves of them): 1 for each element that is
                                infinite or NaN in the reference but finite widened to f64 (it
                                overflowed its type, and what it became depends on the order of
                                evaluation), or NULL when none did; NULL when wide_err is */
    int32_t wide_leaves;
    struct IndexUse *index_use; /* per instruction of m's entry: what it indexes */
    StrBuf printed;          /* the partitioned program as printed (line numbers) */
    double ref_bytes;        /* buffers the reference side holds (small_enough) */
    int fail_status;         /* the exit status when loading or running fails (oracle.h) */
    bool shrink;             /* --shrink: verify the module's small twin (shrink.h) */
    ShrinkResult twin;       /* how the twin was made */
    StrBuf full_plan;        /* --shrink: the full-size plan's collectives (shrink_plan_signature) */
} VerifyRun;

/* Result of comparing one array value (all its shards) with the reference. */
typedef struct Cmp {
    bool exact, bad, shape_bad, skipped;
    double tol, scale, max_abs;
    int64_t n_bad, n_total;
    const uint8_t *overflow; /* the reference's overflowed elements (VerifyRun.wide_overflow), or NULL */
    int64_t n_overflow;      /* how many elements of the value overflowed: never compared */
    int32_t rank;
    int64_t worst[SPMDC_MAX_RANK];
    double worst_got, worst_want;
    int64_t worst_dev;
    char why[200];
} Cmp;

/* ---------------------------------------------------------------- inputs */

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* What an entry value indexes, through the ops that carry index values
 * (converts, reshapes, broadcasts, slices, concatenates, integer arithmetic,
 * selects, clamps): the largest operand dim it addresses as gather / scatter
 * indices (`indices`), as a dynamic-slice / dynamic-update-slice start
 * (`start`), and the mean group size it gives as ragged-dot group sizes
 * (`group`: the ragged dim's size over the group count); 0: none. */
typedef struct IndexUse {
    int64_t indices, start, group;
} IndexUse;

#define IMAX(a, b) ((a) > (b) ? (a) : (b))
#define IMIN(a, b) ((a) < (b) ? (a) : (b))

/* Whether operand k of an op carries its index values to the result. */
static bool carries_index(const HloInst *in, int32_t k)
{
    switch (in->op) {
    case HLO_CONVERT: case HLO_RESHAPE: case HLO_BITCAST: case HLO_BROADCAST: case HLO_TRANSPOSE: case HLO_COPY:
    case HLO_SLICE: case HLO_CONCATENATE: case HLO_REVERSE: case HLO_ADD: case HLO_SUBTRACT: case HLO_MULTIPLY:
    case HLO_NEGATE: case HLO_MAXIMUM: case HLO_MINIMUM: case HLO_REMAINDER: case HLO_ABS:
        return true;
    case HLO_SELECT: return k == 1 || k == 2;
    case HLO_CLAMP: return k == 1;
    case HLO_DYNAMIC_SLICE: case HLO_GATHER: return k == 0;
    default: return false;
    }
}

static int64_t list_max_dim(const IntList *l, const Shape *s)
{
    int64_t n = 0;
    for (int32_t k = 0; k < l->n; k++)
        if (l->v[k] >= 0 && l->v[k] < s->rank && s->dims[l->v[k]] > n) n = s->dims[l->v[k]];
    return n;
}

/* use[i] for every instruction of m's entry: one pass, users before operands. */
static IndexUse *index_uses(const HloModule *m)
{
    const HloComputation *c = hlo_comp(m, m->entry);
    IndexUse *use = xcalloc((size_t)(c->n_insts ? c->n_insts : 1), sizeof(IndexUse));
    for (int32_t i = c->n_insts - 1; i >= 0; i--) {
        const HloInst *in = &c->insts[i];
        const HloAttrs *a = hlo_attrs(in);
        int32_t n = in->n_operands;
        const Shape *s0 = n > 0 ? c->insts[in->operands[0]].shape : NULL;
        IndexUse *u;
        switch (in->op) {
        case HLO_GATHER:
            if (n == 2) {
                u = &use[in->operands[1]];
                u->indices = IMAX(u->indices, list_max_dim(&a->start_index_map, s0));
            }
            break;
        case HLO_SCATTER:
            if (n >= 3 && n % 2) {
                u = &use[in->operands[(n - 1) / 2]];
                u->indices = IMAX(u->indices, list_max_dim(&a->scatter_dims_to_operand_dims, s0));
            }
            break;
        case HLO_RAGGED_DOT:
            if (n == 3 && a->lhs_ragged.n == 1 && a->lhs_ragged.v[0] >= 0 && a->lhs_ragged.v[0] < s0->rank) {
                const Shape *gs = c->insts[in->operands[2]].shape;
                int64_t g = gs->rank ? gs->dims[gs->rank - 1] : 0;
                u = &use[in->operands[2]];
                if (g > 0) u->group = IMAX(u->group, IMAX(1, s0->dims[a->lhs_ragged.v[0]] / g));
            }
            break;
        case HLO_DYNAMIC_SLICE:
        case HLO_DYNAMIC_UPDATE_SLICE:
            for (int32_t k = in->op == HLO_DYNAMIC_SLICE ? 1 : 2, d = 0; k < n && s0 && d < s0->rank; k++, d++) {
                u = &use[in->operands[k]];
                u->start = IMAX(u->start, s0->dims[d]);
            }
            break;
        default: break;
        }
        if (!use[i].indices && !use[i].start && !use[i].group) continue;
        for (int32_t k = 0; k < n; k++) {
            if (!carries_index(in, k) || in->operands[k] < 0 || in->operands[k] >= i) continue;
            u = &use[in->operands[k]];
            u->indices = IMAX(u->indices, use[i].indices);
            u->start = IMAX(u->start, use[i].start);
            u->group = IMAX(u->group, use[i].group);
        }
    }
    return use;
}

/* The values an index input is drawn from: indices over [-N, N-1] (every
 * valid index, and as many negative ones, which XLA clamps to 0 in a gather
 * and skips in a scatter, and JAX's take wraps), starts over
 * [-N/4-1, N+N/4] (clamping at both ends), group sizes of mean size M over
 * [-1, 2M] (their sum falls short of the ragged dim about as often as it
 * passes it; a negative size counts as an empty group); within the element
 * type. */
static void index_range(const IndexUse *u, ElemType t, int64_t *lo, int64_t *hi)
{
    *lo = INT64_MAX;
    *hi = INT64_MIN;
    if (u->indices) {
        *lo = -u->indices;
        *hi = u->indices - 1;
    }
    if (u->start) {
        *lo = IMIN(*lo, -u->start / 4 - 1);
        *hi = IMAX(*hi, u->start + u->start / 4);
    }
    if (u->group) {
        *lo = IMIN(*lo, -1);
        *hi = IMAX(*hi, 2 * u->group);
    }
    int bits = elem_type_bits(t);
    int64_t tlo = elem_type_is_unsigned_int(t) ? 0 : bits >= 64 ? INT64_MIN : -((int64_t)1 << (bits - 1));
    int64_t thi = bits >= 63 ? INT64_MAX : elem_type_is_unsigned_int(t) ? ((int64_t)1 << bits) - 1
                                                                         : ((int64_t)1 << (bits - 1)) - 1;
    *lo = IMAX(*lo, tlo);
    *hi = IMIN(*hi, thi);
}

static bool is_index_input(const IndexUse *u, ElemType t)
{
    return u && (u->indices || u->start || u->group) && elem_type_is_integral(t) && elem_type_bits(t) >= 8;
}

static SimValue random_value(const Shape *s, uint64_t *state, const IndexUse *use)
{
    if (s->type == ET_TUPLE) {
        SimValue t = sim_value_tuple(s->n_elems);
        for (int32_t k = 0; k < s->n_elems; k++) t.elems[k] = random_value(&s->elems[k], state, NULL);
        return t;
    }
    SimValue v = sim_value_new(s);
    int64_t n = shape_elem_count(s), lo = 0, hi = 0;
    if (s->type == ET_TOKEN) return v;
    bool index = is_index_input(use, s->type);
    if (index) index_range(use, s->type, &lo, &hi);
    for (int64_t k = 0; k < n; k++) {
        uint64_t r = splitmix64(state);
        if (index)
            sim_value_set_i64(&v, k, lo + (int64_t)(r % (uint64_t)(hi - lo + 1)));
        else if (num_is_float(s->type))
            sim_value_set_f64(&v, k, (double)(r >> 11) * 0x1p-52 - 1.0);
        else if (s->type == ET_PRED)
            sim_value_set_i64(&v, k, (int64_t)(r & 1));
        else if (elem_type_is_unsigned_int(s->type))
            sim_value_set_i64(&v, k, (int64_t)(r % 9));
        else
            sim_value_set_i64(&v, k, (int64_t)(r % 9) - 4);
    }
    return v;
}

static int64_t atom_stride(const Mesh *mesh, int32_t atom)
{
    int64_t s = 1;
    for (int32_t a = atom + 1; a < mesh->n_atoms; a++) s *= mesh->atom_size[a];
    return s;
}

static bool partial_rep(const Mesh *mesh, const Sharding *s, int64_t d)
{
    for (int32_t a = 0; a < mesh->n_atoms; a++)
        if ((s->tile.partial >> a) & 1 && mesh_atom_coord(mesh, d, a) != 0) return false;
    return true;
}

static HloOpcode reduce_op(ReduceKind k)
{
    switch (k) {
    case REDUCE_MAX: return HLO_MAXIMUM;
    case REDUCE_MIN: return HLO_MINIMUM;
    case REDUCE_PROD: return HLO_MULTIPLY;
    case REDUCE_AND: return HLO_AND;
    case REDUCE_OR: return HLO_OR;
    default: return HLO_ADD;
    }
}

/* The reduction's identity for the non-representative devices of a partial input. */
static void fill_identity(SimValue *v, ReduceKind k)
{
    ElemType t = v->shape.type;
    int64_t n = shape_elem_count(&v->shape);
    bool fl = num_is_float(t);
    for (int64_t i = 0; i < n; i++) {
        if (k == REDUCE_PROD) sim_value_set_i64(v, i, 1);
        else if (k == REDUCE_AND) sim_value_set_i64(v, i, t == ET_PRED ? 1 : -1); /* every bit set */
        else if (k == REDUCE_MAX && fl) sim_value_set_f64(v, i, -INFINITY);
        else if (k == REDUCE_MIN && fl) sim_value_set_f64(v, i, INFINITY);
        else if (k == REDUCE_MAX) sim_value_set_i64(v, i, elem_type_is_signed_int(t) ? num_wrap(t, INT64_MIN) : 0);
        else if (k == REDUCE_MIN) sim_value_set_i64(v, i, elem_type_is_signed_int(t) ? num_wrap(t, INT64_MAX) : -1);
    }
}

/* Offsets and valid lengths of device d's tile of a value of shape g. */
static void tile_region(const VerifyRun *vr, const Sharding *s, const Shape *g, const Shape *local, int64_t d,
                        int64_t *off, int64_t *len)
{
    for (int32_t k = 0; k < g->rank; k++) {
        off[k] = s && s->kind == SHARDING_TILED ? sharding_offset(s, &vr->mesh, g, k, d) : 0;
        int64_t n = g->dims[k] - off[k];
        len[k] = n < 0 ? 0 : n < local->dims[k] ? n : local->dims[k];
    }
}

/* Fills v with a value no correct program lets reach an output: NaN
 * (floats), a fixed pattern (integers, pred). */
static void fill_poison(SimValue *v)
{
    int64_t n = shape_elem_count(&v->shape);
    for (int64_t i = 0; i < n; i++) {
        if (num_is_float(v->shape.type)) sim_value_set_f64(v, i, NAN);
        else sim_value_set_i64(v, i, v->shape.type == ET_PRED ? 1 : 0x5a5a5a5a);
    }
}

/* What a device that does not hold a single-device ({maximal device=N})
 * input gets in its place: poison, so a program that reads it shows. */
static SimValue not_held(const SimValue *v)
{
    SimValue r = sim_value_new(&v->shape);
    fill_poison(&r);
    return r;
}

/* Device d's shard of the global array value v under s.  The padding of an
 * uneven shard is poison (fill_poison): the partitioned program must mask
 * it wherever it could reach a result, as XLA's layout leaves it
 * unspecified. */
static SimValue shard_of(const VerifyRun *vr, const SimValue *v, const Sharding *s, int64_t d)
{
    if (s && s->kind == SHARDING_MAXIMAL && d != s->device) return not_held(v);
    if (!s || s->kind != SHARDING_TILED) return sim_value_share(v);
    Shape local;
    sharding_shard_shape(s, &vr->mesh, &v->shape, &local, NULL);
    SimValue r = sim_value_new(&local);
    if (!partial_rep(&vr->mesh, s, d)) {
        fill_identity(&r, s->tile.kind);
        return r;
    }
    int64_t off[SPMDC_MAX_RANK], len[SPMDC_MAX_RANK], gst[SPMDC_MAX_RANK], lst[SPMDC_MAX_RANK], start = 0;
    tile_region(vr, s, &v->shape, &local, d, off, len);
    for (int32_t k = 0; k < local.rank; k++)
        if (len[k] < local.dims[k]) {
            fill_poison(&r);
            break;
        }
    num_strides(v->shape.dims, v->shape.rank, gst);
    num_strides(local.dims, local.rank, lst);
    for (int32_t k = 0; k < local.rank; k++) start += off[k] * gst[k];
    num_copy_box(sim_value_data(&r), 0, lst, sim_value_data(v), start, gst, len, local.rank, num_elem_bytes(local.type));
    return r;
}

static SimValue shard_tree(const VerifyRun *vr, const SimValue *v, const Sharding *s, int32_t *leaf, int64_t d)
{
    if (v->shape.type == ET_TUPLE) {
        SimValue t = sim_value_tuple(v->shape.n_elems);
        for (int32_t k = 0; k < v->shape.n_elems; k++) t.elems[k] = shard_tree(vr, &v->elems[k], s, leaf, d);
        return t;
    }
    const Sharding *ls = s ? sharding_leaf(s, (*leaf)++) : NULL;
    return shard_of(vr, v, ls, d);
}

/* ---------------------------------------------------------------- tolerances */

static double type_eps(ElemType t)
{
    switch (t) {
    case ET_F64: return 0x1p-52;
    case ET_F32: return 0x1p-23;
    case ET_BF16: return 0x1p-7;
    case ET_F16: return 0x1p-10;
    default: return 0;
    }
}

static double shape_eps(const Shape *s)
{
    if (s->type != ET_TUPLE) return type_eps(s->type);
    double e = 0;
    for (int32_t k = 0; k < s->n_elems; k++) e = fmax(e, shape_eps(&s->elems[k]));
    return e;
}

/* Terms combined per result element by a reduction (1 if unknown). */
static double reduction_terms(const HloModule *m, const HloInst *in, const HloInst *op0)
{
    const HloAttrs *a = hlo_attrs(in);
    double n = 1;
    if (in->op == HLO_REDUCE)
        for (int32_t k = 0; k < a->dimensions.n; k++)
            if (a->dimensions.v[k] >= 0 && a->dimensions.v[k] < op0->shape->rank) n *= (double)op0->shape->dims[a->dimensions.v[k]];
    if ((in->op == HLO_REDUCE_WINDOW || in->op == HLO_SELECT_AND_SCATTER) && a->window)
        for (int32_t k = 0; k < a->window->rank; k++) n *= (double)a->window->dims[k].size;
    if (in->op == HLO_ALL_REDUCE || in->op == HLO_REDUCE_SCATTER)
        n = a->replica_groups.n_groups ? (double)a->replica_groups.group_size : (double)(m->num_partitions > 0 ? m->num_partitions : 1);
    if (in->op == HLO_SCATTER && in->n_operands >= 3) n = 1 + (double)shape_elem_count(op0->shape);
    return n;
}

/* Noise added by one instruction, relative to its value's scale (docs/verify.md). */
static double fresh_noise(const HloModule *m, const HloInst *in, const HloInst *op0, const HloInst *op1)
{
    double eps = shape_eps(in->shape), acc = in->shape->type == ET_F64 ? 0x1p-52 : 0x1p-23;
    const HloAttrs *a = hlo_attrs(in);
    switch (in->op) {
    case HLO_DOT:
    case HLO_RAGGED_DOT: {
        double k = 1;
        for (int32_t i = 0; i < a->lhs_contracting.n; i++)
            if (a->lhs_contracting.v[i] < op0->shape->rank) k *= (double)op0->shape->dims[a->lhs_contracting.v[i]];
        return 2 * eps + acc * sqrt(k);
    }
    case HLO_CONVOLUTION: {
        double k = a->conv && op1->shape->rank > a->conv->k_in ? (double)op1->shape->dims[a->conv->k_in] : 1;
        if (a->window)
            for (int32_t i = 0; i < a->window->rank; i++) k *= (double)a->window->dims[i].size;
        return 2 * eps + acc * sqrt(k);
    }
    case HLO_REDUCE: case HLO_REDUCE_WINDOW: case HLO_ALL_REDUCE: case HLO_REDUCE_SCATTER: case HLO_SCATTER:
    case HLO_SELECT_AND_SCATTER: {
        if (a->to_apply >= 0 && a->to_apply < m->n_comps) {
            const HloComputation *c = hlo_comp(m, a->to_apply);
            HloOpcode r = c->root >= 0 ? c->insts[c->root].op : HLO_OPCODE_COUNT;
            if (r == HLO_MAXIMUM || r == HLO_MINIMUM || r == HLO_AND || r == HLO_OR) return 0; /* order-free */
        }
        return 2 * eps + eps * sqrt(reduction_terms(m, in, op0));
    }
    case HLO_WHILE: case HLO_CALL: case HLO_CONDITIONAL: case HLO_MAP: case HLO_SORT: case HLO_CUSTOM_CALL:
        return 2 * eps;
    default: return 0;
    }
}

/* Trips counted for the noise of a loop whose trip count is unknown
 * (docs/verify.md). */
#define UNKNOWN_TRIPS 8

/* Root noise of each computation as a callee (NAN: not computed yet). */
typedef struct NoiseMemo {
    const HloModule *m;
    double *root;
} NoiseMemo;

static double comp_noise(NoiseMemo *nm, int32_t c, double *out, int depth);

/* Noise a while, call or conditional adds: what its callees add (a loop
 * body once per trip), beyond the 2 eps(T) of fresh_noise. */
static double callee_noise(NoiseMemo *nm, int32_t c, int32_t i, int depth)
{
    const HloModule *m = nm->m;
    const HloInst *in = &m->comps[c].insts[i];
    const HloAttrs *a = hlo_attrs(in);
    double n = 0;
    if (in->op == HLO_WHILE && a->body >= 0 && a->body < m->n_comps) {
        int64_t trips = hlo_while_trip_count(m, c, i);
        n = (double)(trips < 0 ? UNKNOWN_TRIPS : trips) * comp_noise(nm, a->body, NULL, depth + 1);
    } else if (in->op == HLO_CALL && a->to_apply >= 0 && a->to_apply < m->n_comps) {
        n = comp_noise(nm, a->to_apply, NULL, depth + 1);
    } else if (in->op == HLO_CONDITIONAL) {
        for (int32_t k = 0; k < a->branches.n; k++)
            if (a->branches.v[k] >= 0 && a->branches.v[k] < m->n_comps)
                n = fmax(n, comp_noise(nm, (int32_t)a->branches.v[k], NULL, depth + 1));
    }
    return n;
}

/* Noise of every instruction of computation c (into out, if not NULL) with
 * noise-free parameters; returns the root's.  Noise adds up along a path,
 * so a callee's root noise is what a call of it adds. */
static double comp_noise(NoiseMemo *nm, int32_t c, double *out, int depth)
{
    const HloModule *m = nm->m;
    const HloComputation *comp = hlo_comp(m, c);
    if (depth > 64 || comp->n_insts == 0)
        return 0;
    if (!out && !isnan(nm->root[c]))
        return nm->root[c];
    double *noise = out ? out : xcalloc((size_t)comp->n_insts, sizeof(double));
    for (int32_t i = 0; i < comp->n_insts; i++) {
        const HloInst *in = &comp->insts[i];
        double base = 0;
        for (int32_t k = 0; k < in->n_operands; k++)
            if (in->operands[k] >= 0 && in->operands[k] < i) base = fmax(base, noise[in->operands[k]]);
        const HloInst *op0 = in->n_operands > 0 ? &comp->insts[in->operands[0]] : in;
        const HloInst *op1 = in->n_operands > 1 ? &comp->insts[in->operands[1]] : in;
        noise[i] = base + fresh_noise(m, in, op0, op1) + callee_noise(nm, c, i, depth);
    }
    double r = comp->root >= 0 && comp->root < comp->n_insts ? noise[comp->root] : 0;
    if (!out) free(noise);
    nm->root[c] = r;
    return r;
}

static void compute_noise(VerifyRun *vr)
{
    const HloComputation *c = hlo_comp(vr->m, vr->m->entry);
    size_t n = (size_t)(c->n_insts ? c->n_insts : 1);
    free(vr->noise);
    vr->noise = xcalloc(n, sizeof(double));
    NoiseMemo nm = {vr->m, xmalloc(sizeof(double) * (size_t)(vr->m->n_comps ? vr->m->n_comps : 1))};
    for (int32_t k = 0; k < vr->m->n_comps; k++) nm.root[k] = NAN;
    comp_noise(&nm, vr->m->entry, vr->noise, 0);
    free(nm.root);
}

/* ---------------------------------------------------------------- comparing */

static double elem_error(double got, double want)
{
    if (isnan(want) || isnan(got)) return isnan(want) && isnan(got) ? 0 : INFINITY;
    if (isinf(want) || isinf(got)) return got == want ? 0 : INFINITY;
    return fabs(got - want);
}


static bool next_idx(int64_t *idx, const int64_t *len, int32_t rank)
{
    for (int32_t d = rank - 1; d >= 0; d--) {
        if (++idx[d] < len[d]) return true;
        idx[d] = 0;
    }
    return false;
}

/* Compares loc (device d's value, or its partial group's reduction) with the
 * reference over d's tile. */
static void compare_tile(const VerifyRun *vr, const Sharding *s, const SimValue *ref, const SimValue *loc, int64_t d,
                         Cmp *c)
{
    const Shape *g = &ref->shape;
    int64_t off[SPMDC_MAX_RANK], len[SPMDC_MAX_RANK], gst[SPMDC_MAX_RANK], lst[SPMDC_MAX_RANK], idx[SPMDC_MAX_RANK] = {0};
    tile_region(vr, s, g, &loc->shape, d, off, len);
    for (int32_t k = 0; k < g->rank; k++)
        if (len[k] <= 0) return;
    num_strides(g->dims, g->rank, gst);
    num_strides(loc->shape.dims, loc->shape.rank, lst);
    ElemType t = g->type;
    const void *rd = sim_value_data(ref), *ld = sim_value_data(loc);
    do {
        int64_t gi = 0, li = 0;
        for (int32_t k = 0; k < g->rank; k++) {
            gi += (off[k] + idx[k]) * gst[k];
            li += idx[k] * lst[k];
        }
        double got, want, err;
        bool bad;
        if (c->overflow && c->overflow[gi]) continue;
        if (c->exact) {
            int64_t a = num_get_i(t, ld, li), b = num_get_i(t, rd, gi);
            got = num_i2f(t, a);
            want = num_i2f(t, b);
            err = fabs(got - want);
            bad = a != b;
        } else {
            got = num_get_f(t, ld, li);
            want = num_get_f(t, rd, gi);
            err = elem_error(got, want);
            bad = err > c->tol;
        }
        c->n_total++;
        c->n_bad += bad;
        if (err > c->max_abs || (bad && c->worst_dev < 0)) {
            c->max_abs = err;
            c->worst_got = got;
            c->worst_want = want;
            c->worst_dev = d;
            for (int32_t k = 0; k < g->rank; k++) c->worst[k] = off[k] + idx[k];
        }
    } while (next_idx(idx, len, g->rank));
}

/* loc reduced over the partial atoms of s (devices in id order), or NULL
 * when a member's shape differs. */
static SimValue *partial_reduce(const VerifyRun *vr, const Sharding *s, const SimValue *const *locals, int64_t d)
{
    int32_t pa[SPMDC_MAX_ATOMS], np = 0;
    for (int32_t a = 0; a < vr->mesh.n_atoms; a++)
        if ((s->tile.partial >> a) & 1) pa[np++] = a;
    SimValue *r = xmalloc(sizeof(SimValue));
    *r = sim_value_clone(locals[d]);
    int64_t coord[SPMDC_MAX_ATOMS] = {0}, size[SPMDC_MAX_ATOMS];
    for (int32_t k = 0; k < np; k++) size[k] = vr->mesh.atom_size[pa[k]];
    int64_t n = shape_elem_count(&r->shape);
    while (next_idx(coord, size, np)) {
        int64_t mdev = d;
        for (int32_t k = 0; k < np; k++) mdev += coord[k] * atom_stride(&vr->mesh, pa[k]);
        if (!interp_shape_matches(locals[mdev], &r->shape)) {
            sim_value_release(r);
            free(r);
            return NULL;
        }
        num_binary(reduce_op(s->tile.kind), r->shape.type, sim_value_data(r), sim_value_data(locals[mdev]),
                   sim_value_data(r), n);
    }
    return r;
}

static double max_magnitude(const SimValue *v)
{
    double s = 0;
    int64_t n = shape_elem_count(&v->shape);
    for (int64_t k = 0; k < n; k++) {
        double x = fabs(sim_value_get_f64(v, k));
        if (isfinite(x) && x > s) s = x;
    }
    return s;
}

/* Compares the per-device array values locals[0..n_dev) (shards of a value
 * of the reference's shape under s) with ref.  rtol: relative tolerance. */
static void compare_leaf(const VerifyRun *vr, const Sharding *s, const SimValue *ref, const SimValue *const *locals,
                         double rtol, double atol, const uint8_t *overflow, Cmp *c)
{
    memset(c, 0, sizeof *c);
    c->overflow = overflow;
    if (overflow)
        for (int64_t i = 0, n = shape_elem_count(&ref->shape); i < n; i++) c->n_overflow += overflow[i];
    c->worst_dev = -1;
    c->rank = ref->shape.rank;
    c->exact = !num_is_float(ref->shape.type);
    if (s && (s->kind == SHARDING_MANUAL || s->manual_atoms)) {
        c->skipped = true;
        snprintf(c->why, sizeof c->why, "not compared (manual sharding)");
        return;
    }
    c->scale = c->exact ? 0 : max_magnitude(ref);
    c->tol = fmax(rtol * c->scale, atol);
    Shape want = ref->shape;
    if (s && s->kind == SHARDING_TILED) sharding_shard_shape(s, &vr->mesh, &ref->shape, &want, NULL);
    for (int64_t d = 0; d < vr->n_dev && !c->bad; d++) {
        if (s && s->kind == SHARDING_MAXIMAL && d != s->device) continue;
        if (!locals[d] || !interp_shape_matches(locals[d], &want)) {
            StrBuf a = {0}, b = {0};
            if (locals[d] && locals[d]->shape.type != ET_TUPLE) shape_print(&a, &locals[d]->shape, false);
            else sb_puts(&a, "a tuple");
            shape_print(&b, &want, false);
            snprintf(c->why, sizeof c->why, "device %lld holds %s, not the shard shape %s", (long long)d, sb_cstr(&a),
                     sb_cstr(&b));
            sb_free(&a);
            sb_free(&b);
            c->bad = c->shape_bad = true;
            return;
        }
        if (s && s->kind == SHARDING_TILED && s->tile.partial) {
            if (!partial_rep(&vr->mesh, s, d)) continue;
            SimValue *r = partial_reduce(vr, s, locals, d);
            if (!r) {
                snprintf(c->why, sizeof c->why, "the devices of a partial group hold different shapes");
                c->bad = c->shape_bad = true;
                return;
            }
            compare_tile(vr, s, ref, r, d, c);
            sim_value_release(r);
            free(r);
        } else {
            compare_tile(vr, s, ref, locals[d], d, c);
        }
    }
    c->bad = c->bad || c->n_bad > 0;
}

static void print_cmp(StrBuf *b, const VerifyRun *vr, const char *label, const SimValue *ref, const Sharding *s,
                      const Cmp *c, double rtol)
{
    sb_printf(b, "  %s ", label);
    shape_print(b, &ref->shape, false);
    sb_putc(b, ' ');
    if (s) sharding_describe(b, s, &vr->mesh);
    else sb_puts(b, "replicated");
    sb_puts(b, ": ");
    if (c->skipped || c->shape_bad) {
        sb_printf(b, "%s%s\n", c->why, c->shape_bad ? ": MISMATCH" : "");
        return;
    }
    if (c->exact) {
        sb_printf(b, "exact, %lld of %lld elements differ", (long long)c->n_bad, (long long)c->n_total);
        if (c->bad) sb_printf(b, ", max abs error %.2g", c->max_abs);
    } else {
        double rel = c->scale > 0 ? c->max_abs / c->scale : c->max_abs;
        sb_printf(b, "max abs error %.2g, max rel error %.2g %s %.2g", c->max_abs, rel, c->bad ? ">" : "<=", rtol);
        if (c->n_overflow)
            sb_printf(b, " (%lld element%s overflowed %s in the reference, finite in f64: not compared)",
                      (long long)c->n_overflow, c->n_overflow == 1 ? "" : "s", elem_type_name(ref->shape.type));
    }
    sb_puts(b, c->bad ? ": MISMATCH\n" : ": ok\n");
    if (!c->bad || c->worst_dev < 0) return;
    sb_puts(b, "    worst element [");
    for (int32_t k = 0; k < c->rank; k++) sb_printf(b, "%s%lld", k ? "," : "", (long long)c->worst[k]);
    sb_printf(b, "] on device %lld: got %.6g, want %.6g\n", (long long)c->worst_dev, c->worst_got, c->worst_want);
}

/* The leaves of a reference value and of every device's value, found once
 * (a value of N leaves is visited in O(N), not O(N^2) by sim_value_leaf
 * per leaf): ref[k], and dev[k * n_dev + d] for device d (NULL where a
 * value lacks leaf k).  leaf_table_free releases it. */
typedef struct LeafTable {
    int32_t n;
    const SimValue **ref, **dev;
} LeafTable;

static LeafTable leaf_table(const VerifyRun *vr, const SimValue *ref, const SimValue *vals, int32_t leaves)
{
    LeafTable t = {leaves, xcalloc((size_t)(leaves ? leaves : 1), sizeof(SimValue *)),
                   xcalloc((size_t)(leaves ? leaves : 1) * (size_t)vr->n_dev, sizeof(SimValue *))};
    sim_value_leaves(ref, t.ref, leaves);
    const SimValue **one = xcalloc((size_t)(leaves ? leaves : 1), sizeof(SimValue *));
    for (int64_t d = 0; d < vr->n_dev; d++) {
        memset(one, 0, sizeof(SimValue *) * (size_t)(leaves ? leaves : 1));
        sim_value_leaves(&vals[d], one, leaves);
        for (int32_t k = 0; k < leaves; k++) t.dev[(int64_t)k * vr->n_dev + d] = one[k];
    }
    free(one);
    return t;
}

static void leaf_table_free(LeafTable *t)
{
    free(t->ref);
    free(t->dev);
}

static double leaf_rtol(const SimValue *leaf, double noise) { return type_eps(leaf->shape.type) + 2 * noise; }

/* ---------------------------------------------------------------- the program */

static const char *label_of(const VerifyRun *vr, const HloInst *root, int32_t leaf, int32_t n_leaves, char *buf, size_t n)
{
    const HloComputation *c = hlo_comp(vr->m, vr->m->entry);
    if (n_leaves == 1 && root->shape->type != ET_TUPLE) return root->name;
    if (root->op == HLO_TUPLE && n_leaves == root->n_operands && leaf < root->n_operands &&
        c->insts[root->operands[leaf]].shape->type != ET_TUPLE)
        return c->insts[root->operands[leaf]].name;
    snprintf(buf, n, "%s{%d}", root->name, leaf);
    return buf;
}

static bool check_shape(VerifyRun *vr, const HloInst *pi, const HloInst *mi, const char *what)
{
    Shape want;
    if (mi->sharding)
        sharding_shard_shape(mi->sharding, &vr->mesh, mi->shape, &want, vr->cx.scratch);
    else
        want = *mi->shape;
    if (shape_equal(pi->shape, &want)) return true;
    StrBuf a = {0}, b = {0}, s = {0};
    shape_print(&a, pi->shape, false);
    shape_print(&b, &want, false);
    if (mi->sharding) sharding_describe(&s, mi->sharding, &vr->mesh);
    diag_error(vr->diag, pi->span, "%s %s has shape %s, but the shard of %s under %s is %s", what, pi->name, sb_cstr(&a),
               mi->name, mi->sharding ? sb_cstr(&s) : "replicated", sb_cstr(&b));
    sb_free(&a);
    sb_free(&b);
    sb_free(&s);
    return false;
}

/* Entry parameters by number; false (reported) if a number is missing. */
static int32_t *entry_params(const HloModule *m, int32_t *n, DiagEngine *diag)
{
    const HloComputation *c = hlo_comp(m, m->entry);
    int32_t np = 0;
    for (int32_t i = 0; i < c->n_insts; i++) np += c->insts[i].op == HLO_PARAMETER;
    int32_t *p = xmalloc(sizeof(int32_t) * (size_t)(np ? np : 1));
    for (int32_t k = 0; k < np; k++) p[k] = -1;
    for (int32_t i = 0; i < c->n_insts; i++) {
        int64_t num = c->insts[i].param_number;
        if (c->insts[i].op == HLO_PARAMETER && num >= 0 && num < np) p[num] = i;
    }
    for (int32_t k = 0; k < np; k++)
        if (p[k] < 0) {
            diag_error(diag, c->span, "entry computation %s has no parameter(%d)", c->name, k);
            free(p);
            return NULL;
        }
    *n = np;
    return p;
}

static bool check_program(VerifyRun *vr)
{
    const HloModule *p = vr->p;
    SrcSpan file = SRC_SPAN_NONE;
    file.begin.file_id = file.end.file_id = vr->prog_fid;
    if (p->entry < 0) {
        diag_error(vr->diag, file, "the partitioned program has no entry computation");
        return false;
    }
    if (p->num_partitions > 0 && p->num_partitions != vr->n_dev) {
        /* at the header that says it (the module's name), as every error is at a line and column */
        diag_error(vr->diag, p->span.begin.line ? p->span : file,
                   "the partitioned program has num_partitions=%lld, but the mesh has %lld devices",
                   (long long)p->num_partitions, (long long)vr->n_dev);
        return false;
    }
    int32_t np;
    int32_t *pp = entry_params(p, &np, vr->diag);
    if (!pp) return false;
    bool ok = true;
    if (np != vr->n_params) {
        diag_error(vr->diag, hlo_comp(p, p->entry)->span, "the partitioned program has %d parameters, the input %d", np,
                   vr->n_params);
        ok = false;
    }
    const HloComputation *mc = hlo_comp(vr->m, vr->m->entry), *pc = hlo_comp(p, p->entry);
    for (int32_t k = 0; k < np && ok; k++) ok = check_shape(vr, &pc->insts[pp[k]], &mc->insts[vr->param_inst[k]], "parameter");
    if (ok && pc->root >= 0 && mc->root >= 0) ok = check_shape(vr, &pc->insts[pc->root], &mc->insts[mc->root], "root");
    free(pp);
    arena_reset(vr->cx.scratch);
    return ok;
}

/* Line of instruction `name` of the entry in the printed program, or 0. */
static uint32_t printed_line(const VerifyRun *vr, const HloInst *inst)
{
    if (vr->prog_path) return inst->span.begin.line;
    const char *t = sb_cstr(&vr->printed);
    size_t nl = strlen(inst->name);
    bool in_entry = false;
    for (uint32_t line = 1; *t; line++) {
        const char *e = strchr(t, '\n');
        size_t len = e ? (size_t)(e - t) : strlen(t);
        if (len >= 6 && memcmp(t, "ENTRY ", 6) == 0) in_entry = true;
        const char *q = t;
        while (*q == ' ') q++;
        if (strncmp(q, "ROOT ", 5) == 0) q += 5;
        if (*q == '%') q++;
        if (in_entry && strncmp(q, inst->name, nl) == 0 && strncmp(q + nl, " = ", 3) == 0) return line;
        if (!e) break;
        t = e + 1;
    }
    return 0;
}

/* ---------------------------------------------------------------- runs */

typedef struct Observed {
    VerifyRun *vr;
    const bool *keep;       /* reference run: m insts to keep */
    SimValue *ref_vals;     /* m insts */
    const int32_t *match;   /* partitioned run: p inst -> m inst, or -1 */
    bool found;
    int32_t inst;           /* p inst of the first difference */
    int32_t leaf;
    Cmp cmp;
    double rtol;
} Observed;

static void observe_reference(void *user, int32_t inst, const SimValue *vals, int64_t n)
{
    Observed *o = user;
    (void)n;
    if (o->keep[inst]) o->ref_vals[inst] = sim_value_share(&vals[0]);
}

static void observe_program(void *user, int32_t inst, const SimValue *vals, int64_t n)
{
    Observed *o = user;
    VerifyRun *vr = o->vr;
    (void)n;
    int32_t mi = o->match[inst];
    if (o->found || mi < 0) return;
    const HloInst *min = hlo_inst(vr->m, vr->m->entry, mi);
    const SimValue *ref = &o->ref_vals[mi];
    int32_t leaves = shape_leaf_count(min->shape);
    LeafTable lt = leaf_table(vr, ref, vals, leaves);
    for (int32_t k = 0; k < leaves && !o->found; k++) {
        const SimValue *rl = lt.ref[k];
        const SimValue **ls = lt.dev + (int64_t)k * vr->n_dev;
        const Sharding *s = min->sharding ? sharding_leaf(min->sharding, k) : NULL;
        double rtol = rl ? leaf_rtol(rl, vr->noise[mi]) : 0;
        if (rl && rl->shape.type != ET_TOKEN) compare_leaf(vr, s, rl, ls, rtol, 0, NULL, &o->cmp);
        if (rl && o->cmp.bad) {
            o->found = true;
            o->inst = inst;
            o->leaf = k;
            o->rtol = rtol;
        }
    }
    leaf_table_free(&lt);
}

/* Device d's parameters (shards of the global inputs). */
static SimValue *device_args(const VerifyRun *vr)
{
    SimValue *a = xcalloc((size_t)(vr->n_dev * (vr->n_params ? vr->n_params : 1)), sizeof(SimValue));
    const HloComputation *mc = hlo_comp(vr->m, vr->m->entry);
    for (int64_t d = 0; d < vr->n_dev; d++)
        for (int32_t k = 0; k < vr->n_params; k++) {
            int32_t leaf = 0;
            a[d * vr->n_params + k] = shard_tree(vr, &vr->inputs[k], mc->insts[vr->param_inst[k]].sharding, &leaf, d);
        }
    return a;
}

static void release_array(SimValue *v, int64_t n)
{
    for (int64_t k = 0; k < n; k++) sim_value_release(&v[k]);
    free(v);
}

/* Runs IN on one device; keep (or NULL) selects values for o->ref_vals. */
/* Whether the input's meaning involves the devices: a manual region (its
 * borders, the user's collectives, partition-id).  Such an input runs on
 * every device of the mesh (outside its manual regions every device
 * computes the same whole values) and device 0's values are the reference. */
static bool input_needs_devices(const HloModule *m)
{
    for (int32_t c = 0; c < m->n_comps; c++)
        for (int32_t i = 0; i < m->comps[c].n_insts; i++) {
            const HloInst *in = &m->comps[c].insts[i];
            if (sim_is_lockstep(in) || in->op == HLO_PARTITION_ID) return true;
        }
    return false;
}

static bool run_reference(VerifyRun *vr, Observed *o, SimValue *out)
{
    int64_t n = input_needs_devices(vr->m) ? vr->n_dev : 1;
    SimOptions so = {n, 1, o ? observe_reference : NULL, o, 0};
    if (n == 1) return sim_run_spmd(vr->m, &so, vr->inputs, vr->n_params, out, vr->diag);
    SimValue *args = xcalloc((size_t)(n * (vr->n_params ? vr->n_params : 1)), sizeof(SimValue));
    for (int64_t d = 0; d < n; d++)
        for (int32_t k = 0; k < vr->n_params; k++) args[d * vr->n_params + k] = vr->inputs[k];
    SimValue *outs = xcalloc((size_t)n, sizeof(SimValue));
    bool ok = sim_run_spmd(vr->m, &so, args, vr->n_params, outs, vr->diag);
    if (ok) {
        *out = outs[0];
        memset(&outs[0], 0, sizeof outs[0]);
    }
    release_array(outs, n);
    free(args);
    return ok;
}

static bool run_program(VerifyRun *vr, Observed *o, SimValue *outs)
{
    SimValue *args = device_args(vr);
    bool refused = false;
    SimOptions so = {vr->n_dev, 1, o ? observe_program : NULL, o, 0};
    bool ok = sim_run_spmd_why(vr->p, &so, args, vr->n_params, outs, vr->diag, &refused);
    /* devices that disagree or collectives that do not fit make a wrong program */
    if (!ok) vr->fail_status = refused ? ORACLE_EXIT_CANNOT_VERIFY : ORACLE_EXIT_MISMATCH;
    release_array(args, vr->n_dev * vr->n_params);
    return ok;
}

/* Per entry instruction of m: whether it lies in a manual region (from an
 * SPMDFullToShardShape to an SPMDShardToFullShape), where every device holds
 * its own piece and the reference's device-0 value says nothing about the
 * others (heap). */
static bool *manual_values(const HloModule *m)
{
    const HloComputation *c = hlo_comp(m, m->entry);
    bool *r = xcalloc((size_t)(c->n_insts ? c->n_insts : 1), sizeof(bool));
    for (int32_t i = 0; i < c->n_insts; i++) {
        const HloInst *in = &c->insts[i];
        const char *t = in->op == HLO_CUSTOM_CALL ? hlo_attrs(in)->custom_call_target : NULL;
        if (t && strcmp(t, "SPMDFullToShardShape") == 0) r[i] = true;
        else if (!t || strcmp(t, "SPMDShardToFullShape") != 0)
            for (int32_t k = 0; k < in->n_operands; k++)
                if (in->operands[k] >= 0 && in->operands[k] < i && r[in->operands[k]]) r[i] = true;
    }
    return r;
}

/* Second pass after a mismatch: the first named instruction that differs. */
static bool *random_values(const VerifyRun *vr);

static bool localize(VerifyRun *vr, StrBuf *b)
{
    const HloComputation *mc = hlo_comp(vr->m, vr->m->entry), *pc = hlo_comp(vr->p, vr->p->entry);
    NameEntry *map = NULL, *ents = xcalloc((size_t)(mc->n_insts ? mc->n_insts : 1), sizeof(NameEntry));
    for (int32_t i = 0; i < mc->n_insts; i++) {
        ents[i].name = mc->insts[i].name;
        ents[i].inst = i;
        NameEntry *old;
        HASH_FIND_STR(map, ents[i].name, old);
        if (!old) HASH_ADD_KEYPTR(hh, map, ents[i].name, strlen(ents[i].name), &ents[i]);
    }
    bool *keep = xcalloc((size_t)(mc->n_insts ? mc->n_insts : 1), sizeof(bool));
    bool *manual = manual_values(vr->m);
    int32_t *match = xmalloc(sizeof(int32_t) * (size_t)(pc->n_insts ? pc->n_insts : 1));
    bool *random = random_values(vr); /* random values differ from the reference by design */
    for (int32_t j = 0; j < pc->n_insts; j++) {
        NameEntry *e;
        HASH_FIND_STR(map, pc->insts[j].name, e);
        if (e && random && random[e->inst]) e = NULL;
        match[j] = e && !manual[e->inst] ? e->inst : -1;
        if (match[j] >= 0) keep[e->inst] = true;
    }
    free(manual);
    free(random);
    HASH_CLEAR(hh, map);
    free(ents);
    Observed o;
    memset(&o, 0, sizeof o);
    o.vr = vr;
    o.keep = keep;
    o.match = match;
    o.ref_vals = xcalloc((size_t)(mc->n_insts ? mc->n_insts : 1), sizeof(SimValue));
    SimValue ref, *outs = xcalloc((size_t)vr->n_dev, sizeof(SimValue));
    bool ok = run_reference(vr, &o, &ref) && run_program(vr, &o, outs);
    if (ok && o.found) {
        const HloInst *pi = &pc->insts[o.inst];
        const HloInst *mi = &mc->insts[match[o.inst]];
        uint32_t line = printed_line(vr, pi);
        sb_printf(b, "first differing instruction of the partitioned program: %s", pi->name);
        if (line) sb_printf(b, " (line %u)", line);
        sb_putc(b, '\n');
        char label[160];
        int32_t leaves = shape_leaf_count(mi->shape);
        snprintf(label, sizeof label, leaves > 1 ? "%s{%d}" : "%s", pi->name, o.leaf);
        const Sharding *s = mi->sharding ? sharding_leaf(mi->sharding, o.leaf) : NULL;
        print_cmp(b, vr, label, sim_value_leaf(&o.ref_vals[match[o.inst]], o.leaf), s, &o.cmp, o.rtol);
    } else if (ok) {
        sb_puts(b, "no instruction named like an input instruction differs before the outputs\n");
    }
    sim_value_release(&ref);
    release_array(outs, vr->n_dev);
    release_array(o.ref_vals, mc->n_insts);
    free(keep);
    free(match);
    return ok;
}

/* ---------------------------------------------------------------- the widened reference */

static bool load_input(VerifyRun *vr, PipelineState *st, PassCtx *cx, ShrinkResult *twin);

/* How many times the reference's own measured error a partitioned output
 * may be off (both runs err by about as much, in other directions). */
#define WIDE_MARGIN 4

static bool is_narrow_float(ElemType t) { return t == ET_F32 || t == ET_BF16 || t == ET_F16; }

/* Widens every narrow float of s to f64 in place; false if s holds a type
 * a widening would change the meaning of (f8, complex). */
static bool widen_shape(Shape *s)
{
    if (s->type == ET_TUPLE) {
        for (int32_t k = 0; k < s->n_elems; k++)
            if (!widen_shape(&s->elems[k])) return false;
        return true;
    }
    if (elem_type_is_complex(s->type) || (elem_type_is_float(s->type) && !is_narrow_float(s->type) && s->type != ET_F64))
        return false;
    if (is_narrow_float(s->type)) {
        s->type = ET_F64;
        s->has_layout = false;
    }
    return true;
}

/* The module with every narrow float widened to f64, or false when that
 * would change its meaning (bit casts of floats, f8, complex). */
static bool widen_module(HloModule *m)
{
    for (int32_t c = 0; c < m->n_comps; c++)
        for (int32_t i = 0; i < m->comps[c].n_insts; i++) {
            HloInst *in = &m->comps[c].insts[i];
            if ((in->op == HLO_BITCAST_CONVERT || in->op == HLO_BITCAST) && in->n_operands == 1) {
                const Shape *o = m->comps[c].insts[in->operands[0]].shape;
                if (elem_type_is_float(o->type) || elem_type_is_float(in->shape->type)) return false;
            }
        }
    for (int32_t c = 0; c < m->n_comps; c++)
        for (int32_t i = 0; i < m->comps[c].n_insts; i++) {
            HloInst *in = &m->comps[c].insts[i];
            Shape s = hlo_copy_shape(m, in->shape); /* the records are shared: widen a copy */
            if (!widen_shape(&s)) return false;
            in->shape = hlo_shape(m, &s);
        }
    return true;
}

static SimValue widen_value(const SimValue *v)
{
    if (v->shape.type == ET_TUPLE) {
        SimValue t = sim_value_tuple(v->shape.n_elems);
        for (int32_t k = 0; k < v->shape.n_elems; k++) t.elems[k] = widen_value(&v->elems[k]);
        return t;
    }
    if (!is_narrow_float(v->shape.type)) return sim_value_share(v);
    Shape s = v->shape;
    s.type = ET_F64;
    SimValue w = sim_value_new(&s);
    int64_t n = shape_elem_count(&s);
    for (int64_t i = 0; i < n; i++) sim_value_set_f64(&w, i, sim_value_get_f64(v, i));
    return w;
}

/* Whether some value of m has a float type the widened run would change. */
static bool module_has_narrow_float(const HloModule *m)
{
    for (int32_t c = 0; c < m->n_comps; c++)
        for (int32_t i = 0; i < m->comps[c].n_insts; i++) {
            const Shape *s = m->comps[c].insts[i].shape;
            if (s->type == ET_TUPLE || is_narrow_float(s->type)) return true;
        }
    return false;
}

/* Per output leaf of the reference ref, the largest difference from the
 * same module run with every narrow float widened to f64 (heap), or NULL
 * when nothing is narrow, or the module cannot be widened or run so.  The
 * per-op noise model bounds how rounding errors add up; it cannot follow
 * how a program stretches them (a difference of two close sums, a tanh of a
 * large one, a loop carrying them trip after trip).  This measures the
 * reference's own error on these inputs instead (docs/verify.md).  It also
 * marks, in vr->wide_overflow, the elements that overflowed their narrow
 * type in the reference but not in f64. */
static double *widened_error(VerifyRun *vr, const SimValue *ref)
{
    if (!module_has_narrow_float(vr->m)) return NULL;
    PipelineState st;
    memset(&st, 0, sizeof st);
    /* The input's own messages were printed when it was loaded, and a run
     * that fails here only leaves the tolerance without this measure: its
     * messages go to an engine of its own, never to the user's. */
    DiagEngine *quiet = diag_create(NULL);
    PassCtx cx = {vr->cx.scratch, quiet, vr->cx.opt};
    ShrinkResult twin;
    memset(&twin, 0, sizeof twin);
    double *err = NULL;
    int fail_status = vr->fail_status;
    bool loaded = load_input(vr, &st, &cx, &twin);
    vr->fail_status = fail_status;
    if (loaded && widen_module(st.m)) {
        int64_t n = input_needs_devices(st.m) ? vr->n_dev : 1;
        SimValue *args = xcalloc((size_t)(n * (vr->n_params ? vr->n_params : 1)), sizeof(SimValue));
        for (int64_t d = 0; d < n; d++)
            for (int32_t k = 0; k < vr->n_params; k++) args[d * vr->n_params + k] = widen_value(&vr->inputs[k]);
        SimValue *outs = xcalloc((size_t)n, sizeof(SimValue));
        SimOptions so = {n, 1, NULL, NULL, 0};
        if (sim_run_spmd(st.m, &so, args, vr->n_params, outs, quiet)) {
            const HloComputation *mc = hlo_comp(vr->m, vr->m->entry);
            int32_t leaves = shape_leaf_count(mc->insts[mc->root].shape);
            err = xcalloc((size_t)(leaves ? leaves : 1), sizeof(double));
            vr->wide_overflow = xcalloc((size_t)(leaves ? leaves : 1), sizeof(uint8_t *));
            vr->wide_leaves = leaves;
            const SimValue **ra = xcalloc((size_t)(leaves ? leaves : 1), sizeof(SimValue *));
            const SimValue **wa = xcalloc((size_t)(leaves ? leaves : 1), sizeof(SimValue *));
            sim_value_leaves(ref, ra, leaves);
            sim_value_leaves(&outs[0], wa, leaves);
            for (int32_t k = 0; k < leaves; k++) {
                const SimValue *a = ra[k], *w = wa[k];
                if (!a || !w || !num_is_float(a->shape.type)) continue;
                int64_t ne = shape_elem_count(&a->shape);
                for (int64_t i = 0; i < ne; i++) {
                    double x = sim_value_get_f64(a, i), y = sim_value_get_f64(w, i);
                    if (isfinite(x) && isfinite(y)) err[k] = fmax(err[k], fabs(x - y));
                    if (!isfinite(x) && isfinite(y)) {
                        if (!vr->wide_overflow[k]) vr->wide_overflow[k] = xcalloc((size_t)ne, 1);
                        vr->wide_overflow[k][i] = 1;
                    }
                }
            }
            free(ra);
            free(wa);
        }
        release_array(outs, n);
        release_array(args, n * vr->n_params);
    }
    pipeline_state_free(&st);
    shrink_result_free(&twin);
    diag_destroy(quiet);
    return err;
}

/* ---------------------------------------------------------------- random values */

/* Whether computation c (or one it calls) draws random numbers. */
static bool draws_random(const HloModule *m, int32_t c, const bool *comp_random)
{
    const HloComputation *hc = hlo_comp(m, c);
    for (int32_t i = 0; i < hc->n_insts; i++) {
        const HloInst *in = &hc->insts[i];
        const HloAttrs *a = hlo_attrs(in);
        if (in->op == HLO_RNG || in->op == HLO_RNG_BIT_GENERATOR) return true;
        int32_t refs[4] = {a->to_apply, a->select, a->condition, a->body};
        for (int32_t k = 0; k < 4; k++)
            if (refs[k] >= 0 && refs[k] < c && comp_random[refs[k]]) return true;
        for (int32_t k = 0; k < a->branches.n; k++)
            if (a->branches.v[k] >= 0 && a->branches.v[k] < c && comp_random[a->branches.v[k]]) return true;
        for (int32_t k = 0; k < a->called.n; k++)
            if (a->called.v[k] >= 0 && a->called.v[k] < c && comp_random[a->called.v[k]]) return true;
    }
    return false;
}

/* Per entry instruction: its value depends on random numbers a partitioned
 * program draws otherwise than the unpartitioned one (docs/partitioning.md):
 * an rng (drawn per device), an rng-bit-generator whose bits are split
 * (drawn for the shard's shape), anything computed from them or calling a
 * computation that draws.  NULL when nothing does. */
static bool *random_values(const VerifyRun *vr)
{
    const HloModule *m = vr->m;
    bool *comp_random = xcalloc((size_t)(m->n_comps ? m->n_comps : 1), sizeof(bool)), any = false;
    for (int32_t c = 0; c < m->n_comps; c++)
        if (c != m->entry) comp_random[c] = draws_random(m, c, comp_random);
    const HloComputation *e = hlo_comp(m, m->entry);
    bool *r = xcalloc((size_t)(e->n_insts ? e->n_insts : 1), sizeof(bool));
    for (int32_t i = 0; i < e->n_insts; i++) {
        const HloInst *in = &e->insts[i];
        const HloAttrs *a = hlo_attrs(in);
        bool t = in->op == HLO_RNG;
        if (in->op == HLO_RNG_BIT_GENERATOR)
            t = !in->sharding || !shape_is_tuple(in->shape) || in->shape->n_elems != 2 ||
                sharding_is_tiled(sharding_leaf(in->sharding, 1));
        for (int32_t k = 0; k < in->n_operands && !t; k++)
            t = in->operands[k] >= 0 && in->operands[k] < i && r[in->operands[k]];
        int32_t refs[4] = {a->to_apply, a->select, a->condition, a->body};
        for (int32_t k = 0; k < 4 && !t; k++)
            t = refs[k] >= 0 && refs[k] < m->n_comps && comp_random[refs[k]];
        for (int32_t k = 0; k < a->branches.n && !t; k++)
            t = a->branches.v[k] >= 0 && a->branches.v[k] < m->n_comps && comp_random[a->branches.v[k]];
        for (int32_t k = 0; k < a->called.n && !t; k++)
            t = a->called.v[k] >= 0 && a->called.v[k] < m->n_comps && comp_random[a->called.v[k]];
        r[i] = t;
        any |= t;
    }
    free(comp_random);
    if (!any) {
        free(r);
        return NULL;
    }
    return r;
}

/* A random output: not compared with the reference (its draws differ), but
 * every device that holds the same tile must hold the same bits. */
static void compare_random(const VerifyRun *vr, const Sharding *s, const SimValue *ref, const SimValue *const *locals,
                           Cmp *c)
{
    memset(c, 0, sizeof *c);
    c->worst_dev = -1;
    c->rank = ref->shape.rank;
    c->skipped = true;
    if (s && (s->kind == SHARDING_MANUAL || (s->kind == SHARDING_TILED && s->tile.partial))) {
        snprintf(c->why, sizeof c->why, "random values (drawn per device): not compared");
        return;
    }
    int64_t n_tiles = s && s->kind == SHARDING_TILED ? sharding_num_tiles(s, &vr->mesh) : 1;
    int64_t *first = xmalloc(sizeof(int64_t) * (size_t)n_tiles);
    for (int64_t t = 0; t < n_tiles; t++) first[t] = -1;
    int64_t copies = 0;
    for (int64_t d = 0; d < vr->n_dev && !c->bad; d++) {
        if (s && s->kind == SHARDING_MAXIMAL && d != s->device) continue;
        int64_t t = 0;
        for (int32_t k = 0; s && s->kind == SHARDING_TILED && k < ref->shape.rank; k++)
            t = t * sharding_dim_tiles(s, &vr->mesh, k) + sharding_tile_index(s, &vr->mesh, k, d);
        if (!locals[d] || locals[d]->shape.type == ET_TUPLE) {
            snprintf(c->why, sizeof c->why, "device %lld holds no array", (long long)d);
            c->bad = c->shape_bad = true;
            break;
        }
        if (first[t] < 0) {
            first[t] = d;
            continue;
        }
        copies++;
        const SimValue *a = locals[first[t]], *b = locals[d];
        size_t bytes = (size_t)(shape_elem_count(&a->shape) * num_elem_bytes(a->shape.type));
        if (!shape_equal(&a->shape, &b->shape) || memcmp(sim_value_data(a), sim_value_data(b), bytes) != 0) {
            snprintf(c->why, sizeof c->why, "random values (drawn per device): devices %lld and %lld hold the same "
                     "tile but different values", (long long)first[t], (long long)d);
            c->bad = c->shape_bad = true;
        }
    }
    if (!c->bad)
        snprintf(c->why, sizeof c->why, "random values (drawn per device): not compared with the reference; %s: ok",
                 copies ? "the copies of every tile agree" : "every tile is held once");
    free(first);
}

/* Compares every output leaf with the reference and appends one line each
 * to b; *n_bad of the *n_out compared outputs differ. */
static void compare_outputs(VerifyRun *vr, const SimValue *ref, const SimValue *outs, StrBuf *b, int32_t *n_bad,
                            int32_t *n_out)
{
    bool *random = random_values(vr);
    const HloComputation *mc = hlo_comp(vr->m, vr->m->entry);
    const HloInst *root = &mc->insts[mc->root];
    int32_t leaves = shape_leaf_count(root->shape);
    *n_bad = 0;
    *n_out = 0;
    LeafTable lt = leaf_table(vr, ref, outs, leaves);
    for (int32_t k = 0; k < leaves; k++) {
        const SimValue *rl = lt.ref[k];
        if (!rl || rl->shape.type == ET_TOKEN) continue;
        const SimValue **ls = lt.dev + (int64_t)k * vr->n_dev;
        const Sharding *s = root->sharding ? sharding_leaf(root->sharding, k) : NULL;
        int32_t src = root->op == HLO_TUPLE && leaves == root->n_operands ? (int32_t)root->operands[k] : mc->root;
        double rtol = leaf_rtol(rl, vr->noise[src]);
        double atol = vr->wide_err ? WIDE_MARGIN * vr->wide_err[k] : 0;
        Cmp c;
        if (random && random[src]) {
            compare_random(vr, s, rl, ls, &c);
        } else {
            compare_leaf(vr, s, rl, ls, rtol, atol, vr->wide_overflow && k < vr->wide_leaves ? vr->wide_overflow[k] : NULL,
                         &c);
            if (c.scale > 0 && atol / c.scale > rtol) rtol = atol / c.scale; /* the tolerance in force */
        }
        char buf[160];
        print_cmp(b, vr, label_of(vr, root, k, leaves, buf, sizeof buf), rl, s, &c, rtol);
        (*n_out)++;
        *n_bad += c.bad;
    }
    leaf_table_free(&lt);
    free(random);
}

/* ---------------------------------------------------------------- command */

static void usage(FILE *f)
{
    fputs("usage: spmdc verify IN.hlo [--mesh SPEC] [--seed N] [--program OUT.hlo | --shrink] [--keep-calls]\n"
          "Runs IN on one device and its partitioned form (or OUT.hlo) on every device of\n"
          "the mesh with inputs drawn from the seed, and compares the outputs (docs/verify.md).\n",
          f);
}

enum { OPT_MESH = 256, OPT_SEED, OPT_PROGRAM, OPT_HELP, OPT_KEEP_CALLS, OPT_SHRINK };

/* 0 = parsed, else the exit status. */
static int parse_args(int argc, char **argv, VerifyRun *vr, SpmdcOptions *opt)
{
    static const struct option longopts[] = {
        {"mesh", required_argument, NULL, OPT_MESH},   {"seed", required_argument, NULL, OPT_SEED},
        {"program", required_argument, NULL, OPT_PROGRAM}, {"help", no_argument, NULL, OPT_HELP},
        {"keep-calls", no_argument, NULL, OPT_KEEP_CALLS}, {"shrink", no_argument, NULL, OPT_SHRINK},
        {NULL, 0, NULL, 0},
    };
    int c;
    optind = 1;
    opterr = 0;
    DriverOptionsSeen seen = {{0}, 0};
    while ((c = getopt_long(argc, argv, ":", longopts, NULL)) != -1) {
        if (driver_option_once(&seen, c, longopts, NULL)) return 2;
        switch (c) {
        case OPT_MESH:
            if (driver_parse_mesh(optarg, opt)) return 2;
            break;
        case OPT_SEED: {
            char *end;
            errno = 0;
            vr->seed = strtoull(optarg, &end, 10);
            if (!*optarg || *end || optarg[0] == '-' || errno) {
                fprintf(stderr, "spmdc: error: --seed takes a non-negative integer, not '%s'\n", optarg);
                return 2;
            }
            break;
        }
        case OPT_PROGRAM: vr->prog_path = optarg; break;
        case OPT_KEEP_CALLS: opt->keep_calls = true; break;
        case OPT_SHRINK: vr->shrink = true; break;
        case OPT_HELP: usage(stdout); return -1;
        case ':':
            fprintf(stderr, "spmdc: error: option '%s' needs an argument\n", argv[optind - 1]);
            return 2;
        default:
            fprintf(stderr, "spmdc: error: unknown option '%s'\n", argv[optind - 1]);
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "spmdc: error: verify takes exactly one input file\n");
        usage(stderr);
        return 2;
    }
    if (vr->shrink && vr->prog_path) {
        fprintf(stderr, "spmdc: error: --shrink verifies a twin spmdc partitions itself: it excludes --program\n");
        return 2;
    }
    vr->in_path = argv[optind];
    return 0;
}

/* The simulator is an interpreter: a module whose runs would take more
 * than about a minute each or hold more than 4 GiB of buffers is refused
 * before anything runs, with the figures (docs/verify.md).  Work counts
 * every op (sim_inst_work: dot and convolution multiply-adds, windows,
 * reducers, sorts, data movement); memory is the reference run's live peak
 * plus every reference value a mismatch report keeps, plus the per-device
 * program's live peak on every device. */
#define ORACLE_MAX_WORK SIM_WORK_LIMIT
#define ORACLE_MAX_BYTES 4294967296.0

/* Refuses (at the costliest instruction of m, per device) when work or
 * bytes exceed the limits. */
static bool cost_ok(VerifyRun *vr, const HloModule *m, const SimCost *c, const char *what, double work, double bytes)
{
    if (work <= ORACLE_MAX_WORK && bytes <= ORACLE_MAX_BYTES) return true;
    vr->fail_status = ORACLE_EXIT_CANNOT_VERIFY;
    const HloInst *in = c->worst_inst >= 0 ? hlo_inst(m, c->worst_comp, c->worst_inst) : NULL;
    if (vr->shrink) {
        /* The twin is what was measured: show it, and which sizes it kept. */
        StrBuf b = {0}, kept = {0};
        shrink_describe(&b, &vr->twin);
        fputs(sb_cstr(&b), stdout);
        fflush(stdout);
        const ShrinkResult *r = &vr->twin;
        for (int32_t k = r->n_shrunk; k < r->n_shrunk + r->n_kept; k++)
            sb_printf(&kept, "%s%lld by %s", k > r->n_shrunk ? ", " : "", (long long)r->classes[k].from,
                      r->classes[k].kept_by);
        diag_error(vr->diag, in ? in->span : SRC_SPAN_NONE,
                   "the twin of %s is still too large to simulate (%s: %.2g element operations, %.2g bytes of "
                   "buffers; the limits are %.2g and %.2g; the costliest instruction is %s, %.2g element "
                   "operations): %s%s%s; verify a version of the module with smaller sizes",
                   vr->in_path, what, work, bytes, ORACLE_MAX_WORK, ORACLE_MAX_BYTES, in ? in->name : "-",
                   c->worst_work,
                   r->n_kept ? "it keeps the sizes an instruction names, and every size tied to them (the `twin: "
                               "kept` lines: "
                             : "its sizes are as small as the mesh allows",
                   sb_cstr(&kept), r->n_kept ? ")" : "");
        sb_free(&b);
        sb_free(&kept);
        return false;
    }
    diag_error(vr->diag, in ? in->span : SRC_SPAN_NONE,
               "%s is too large to simulate (%s: %.2g element operations, %.2g bytes of buffers; the limits are "
               "%.2g and %.2g; the costliest instruction is %s, %.2g element operations): verify its small twin "
               "with `spmdc verify --shrink`",
               vr->in_path, what, work, bytes, ORACLE_MAX_WORK, ORACLE_MAX_BYTES, in ? in->name : "-",
               c->worst_work);
    return false;
}

static bool small_enough(VerifyRun *vr)
{
    SimCost c = sim_module_cost(vr->m);
    vr->ref_bytes = c.peak_bytes + c.total_bytes;
    return cost_ok(vr, vr->m, &c, "the reference run", c.work, vr->ref_bytes);
}

/* After the per-device program is known: its run on every device, next to
 * what the reference keeps. */
static bool program_small_enough(VerifyRun *vr)
{
    SimCost c = sim_module_cost(vr->p);
    double n = (double)vr->n_dev;
    return cost_ok(vr, vr->p, &c, "the per-device program on every device", c.work * n, c.peak_bytes * n + vr->ref_bytes);
}

/* Parses the input again into st and takes it through propagation, as the
 * module under test was: with --shrink, shrunk to the same twin after
 * canonicalize (twin receives how; shrink_module is deterministic, so the
 * twin is the same every time).  Messages go to cx's engine. */
static bool load_input(VerifyRun *vr, PipelineState *st, PassCtx *cx, ShrinkResult *twin)
{
    st->text = vr->st.text;
    st->len = vr->st.len;
    st->file_id = vr->st.file_id;
    if (!vr->shrink) return pipeline_run(st, cx, PASS_PARSE, PASS_PROPAGATE);
    if (!pipeline_run(st, cx, PASS_PARSE, PASS_CANONICALIZE)) return false;
    shrink_module(st->m, twin);
    if (!verify_module(st->m, cx->diag)) {
        diag_error(cx->diag, SRC_SPAN_NONE, "%s: its twin is not a valid module; verify a smaller version by hand",
                   vr->in_path);
        vr->fail_status = ORACLE_EXIT_CANNOT_VERIFY;
        return false;
    }
    return pipeline_run(st, cx, PASS_PROPAGATE, PASS_PROPAGATE);
}

/* --shrink: the full-size plan is partitioned (no simulation) for its
 * collectives, then the input is loaded again as its twin (load_input). */
static bool load_twin(VerifyRun *vr)
{
    PipelineState full;
    memset(&full, 0, sizeof full);
    full.text = vr->st.text;
    full.len = vr->st.len;
    full.file_id = vr->st.file_id;
    bool ok = pipeline_run(&full, &vr->cx, PASS_PARSE, PASS_PARTITION);
    if (ok) shrink_plan_signature(&vr->full_plan, &full.report);
    pipeline_state_free(&full);
    arena_reset(vr->cx.scratch);
    /* The full-size run showed the input's warnings; the twin's repeat them
     * (also its partitioning's, in load). */
    diag_set_show_warnings(vr->diag, false);
    ok = ok && load_input(vr, &vr->st, &vr->cx, &vr->twin);
    diag_set_show_warnings(vr->diag, true);
    return ok;
}

/* --shrink: the twin's collectives must be the full-size plan's (kind,
 * axes, groups, in order), or the twin proves nothing about it. */
static bool same_plan(VerifyRun *vr)
{
    StrBuf twin = {0};
    shrink_plan_signature(&twin, &vr->st.report);
    bool same = strcmp(sb_cstr(&twin), sb_cstr(&vr->full_plan)) == 0;
    if (!same) {
        diag_error(vr->diag, SRC_SPAN_NONE,
                   "%s: the twin's collectives differ from the full-size plan's, so it cannot stand for it "
                   "(verify without --shrink if the full size is small enough to simulate):\n"
                   "full size:\n%stwin:\n%s", vr->in_path, sb_cstr(&vr->full_plan), sb_cstr(&twin));
        vr->fail_status = ORACLE_EXIT_CANNOT_VERIFY;
    }
    sb_free(&twin);
    return same;
}

static bool load(VerifyRun *vr, char **texts)
{
    size_t len;
    texts[0] = driver_read_file(vr->in_path, &len);
    if (!texts[0]) return false;
    uint32_t fid = diag_add_file(vr->diag, strcmp(vr->in_path, "-") ? vr->in_path : "<stdin>", texts[0], len);
    vr->st.text = texts[0];
    vr->st.len = len;
    vr->st.file_id = fid;
    if (!(vr->shrink ? load_twin(vr) : load_input(vr, &vr->st, &vr->cx, NULL))) return false;
    vr->m = vr->st.m;
    if (vr->m->entry < 0 || hlo_comp(vr->m, vr->m->entry)->root < 0) {
        diag_error(vr->diag, SRC_SPAN_NONE, "%s has no entry computation", vr->in_path);
        return false;
    }
    if (vr->m->has_mesh) {
        vr->mesh = vr->m->mesh;
    } else {
        char err[100];
        if (!mesh_init(&vr->mesh, 0, NULL, NULL, err, sizeof err)) return false;
    }
    vr->n_dev = vr->mesh.n_devices > 0 ? vr->mesh.n_devices : 1;
    if (!small_enough(vr)) return false;
    vr->param_inst = entry_params(vr->m, &vr->n_params, vr->diag);
    if (!vr->param_inst) return false;
    if (vr->prog_path) {
        texts[1] = driver_read_file(vr->prog_path, &len);
        if (!texts[1]) return false;
        vr->prog_fid = diag_add_file(vr->diag, vr->prog_path, texts[1], len);
        vr->p = parse_hlo(texts[1], len, vr->prog_fid, vr->diag);
        if (!vr->p || !verify_module(vr->p, vr->diag)) return false;
    } else {
        diag_set_show_warnings(vr->diag, !vr->shrink); /* the full-size plan showed them (load_twin) */
        bool ok = pipeline_run(&vr->st, &vr->cx, PASS_PARTITION, PASS_PARTITION);
        diag_set_show_warnings(vr->diag, true);
        if (!ok || !vr->st.out) return false;
        vr->p = vr->st.out;
        if (vr->shrink && !same_plan(vr)) return false;
        HloPrintOptions po = {false, false, false};
        hlo_print_module(&vr->printed, vr->p, &po);
    }
    if (!program_small_enough(vr)) return false;
    vr->fail_status = ORACLE_EXIT_MISMATCH; /* a per-device program that does not fit the input is wrong */
    return check_program(vr);
}

static void print_header(StrBuf *b, const VerifyRun *vr)
{
    if (vr->shrink) {
        shrink_describe(b, &vr->twin);
        sb_printf(b, "twin: the same collectives as the full-size plan:\n%s", sb_cstr(&vr->full_plan));
    }
    sb_printf(b, "verify %s%s", vr->shrink ? "the twin of " : "", vr->in_path);
    if (vr->prog_path) sb_printf(b, " against %s", vr->prog_path);
    sb_puts(b, ": mesh ");
    if (vr->mesh.n_axes) mesh_print(b, &vr->mesh);
    else sb_puts(b, "(none)");
    sb_printf(b, " (%lld device%s), seed %" PRIu64 "\n", (long long)vr->n_dev, vr->n_dev == 1 ? "" : "s", vr->seed);
}

/* "  input ids s32[16,8]: index values from [-512, 511] (gather / scatter
 * indices into a dim of 512)", one line per index input (ragged-dot group
 * sizes included). */
static void print_index_inputs(StrBuf *b, const VerifyRun *vr)
{
    const HloComputation *mc = hlo_comp(vr->m, vr->m->entry);
    for (int32_t k = 0; k < vr->n_params; k++) {
        const HloInst *pi = &mc->insts[vr->param_inst[k]];
        const IndexUse *u = &vr->index_use[vr->param_inst[k]];
        if (pi->shape->type == ET_TUPLE || !is_index_input(u, pi->shape->type)) continue;
        int64_t lo, hi;
        index_range(u, pi->shape->type, &lo, &hi);
        sb_printf(b, "  input %s ", pi->name);
        shape_print(b, pi->shape, false);
        sb_printf(b, ": index values from [%lld, %lld] (", (long long)lo, (long long)hi);
        if (u->indices) sb_printf(b, "gather / scatter indices into a dim of %lld", (long long)u->indices);
        if (u->indices && u->start) sb_puts(b, "; ");
        if (u->start) sb_printf(b, "dynamic-slice starts into a dim of %lld", (long long)u->start);
        if ((u->indices || u->start) && u->group) sb_puts(b, "; ");
        if (u->group) sb_printf(b, "ragged-dot group sizes, %lld a group on average", (long long)u->group);
        sb_puts(b, ")\n");
    }
}

/* Runs both programs and compares; returns the exit status. */
static int run_and_compare(VerifyRun *vr)
{
    uint64_t state = vr->seed;
    vr->inputs = xcalloc((size_t)(vr->n_params ? vr->n_params : 1), sizeof(SimValue));
    const HloComputation *mc = hlo_comp(vr->m, vr->m->entry);
    vr->index_use = index_uses(vr->m);
    for (int32_t k = 0; k < vr->n_params; k++)
        vr->inputs[k] = random_value(mc->insts[vr->param_inst[k]].shape, &state, &vr->index_use[vr->param_inst[k]]);
    SimValue ref, *outs = xcalloc((size_t)vr->n_dev, sizeof(SimValue));
    StrBuf b = {0};
    int rc = ORACLE_EXIT_CANNOT_VERIFY; /* the input itself does not run in the simulator */
    if (run_reference(vr, NULL, &ref)) {
        rc = vr->fail_status;
        compute_noise(vr);
        vr->wide_err = widened_error(vr, &ref);
        if (run_program(vr, NULL, outs)) {
            int32_t n_bad, n_out;
            print_header(&b, vr);
            print_index_inputs(&b, vr);
            compare_outputs(vr, &ref, outs, &b, &n_bad, &n_out);
            rc = n_bad ? ORACLE_EXIT_MISMATCH : ORACLE_EXIT_EQUAL;
            if (n_bad) localize(vr, &b);
            if (n_bad) {
                sb_printf(&b, "verify: MISMATCH (%d of %d outputs differ)\n", n_bad, n_out);
            } else if (diag_error_count(vr->diag) > 0) {
                /* An error was reported on the way: "OK" and exit 0 would hide it. */
                rc = ORACLE_EXIT_CANNOT_VERIFY;
                sb_printf(&b, "verify: NOT VERIFIED (the outputs match, but the errors above were reported)\n");
            } else {
                sb_printf(&b, "verify: OK (%d output%s)\n", n_out, n_out == 1 ? " matches" : "s match");
            }
            fputs(sb_cstr(&b), stdout);
            fflush(stdout);
        }
        sim_value_release(&ref);
    }
    release_array(outs, vr->n_dev);
    sb_free(&b);
    return rc;
}

int oracle_main(int argc, char **argv)
{
    VerifyRun vr;
    SpmdcOptions opt;
    memset(&vr, 0, sizeof vr);
    memset(&opt, 0, sizeof opt);
    vr.seed = 1;
    int rc = parse_args(argc, argv, &vr, &opt);
    if (rc) return rc < 0 ? 0 : rc;
    vr.diag = diag_create(stderr);
    vr.cx.scratch = arena_create();
    vr.cx.diag = vr.diag;
    vr.cx.opt = &opt;
    char *texts[2] = {NULL, NULL};
    vr.fail_status = ORACLE_EXIT_INPUT_ERROR;
    rc = load(&vr, texts) ? run_and_compare(&vr) : vr.fail_status;
    /* No error is ever reported beside a success (docs/cli.md, "Exit status"). */
    if (rc == ORACLE_EXIT_EQUAL && diag_error_count(vr.diag) > 0) rc = ORACLE_EXIT_CANNOT_VERIFY;
    if (diag_error_count(vr.diag) > 0)
        fprintf(stderr, "spmdc: %d error%s\n", diag_error_count(vr.diag), diag_error_count(vr.diag) == 1 ? "" : "s");
    if (vr.inputs) release_array(vr.inputs, vr.n_params);
    free(vr.noise);
    free(vr.wide_err);
    for (int32_t k = 0; k < vr.wide_leaves; k++) free(vr.wide_overflow[k]);
    free(vr.wide_overflow);
    free(vr.index_use);
    free(vr.param_inst);
    sb_free(&vr.printed);
    sb_free(&vr.full_plan);
    shrink_result_free(&vr.twin);
    if (vr.p != vr.st.out) hlo_module_free(vr.p); /* read from --program */
    pipeline_state_free(&vr.st);
    arena_destroy(vr.cx.scratch);
    diag_destroy(vr.diag);
    free(texts[0]);
    free(texts[1]);
    return rc;
}
