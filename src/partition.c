/* partition.c - the SPMD partitioner's driver: global program -> the program
 * every device runs (docs/partitioning.md).
 *
 * partition_module builds a NEW module.  The computations ops apply
 * (reducers, comparators, custom-call callees) are copied as they are: they
 * run on scalars or on whole values.  Every other computation is
 * partitioned: the entry, and, for each call site, the body and condition
 * of a while, the branches of a conditional and the callee of a call
 * (part_callee; partition_control.c decides the states at the border).
 * One PartModule holds what all of them share (the output module, the
 * report, reducers, channel ids); one Part per computation holds its value
 * table and naming.
 *
 * A computation is walked in program order.  Every input value keeps a list
 * of VStates (partition_internal.h): output instructions that hold it in
 * some sharding state, the first one being what its handler
 * (partition_ops.c) produced, which may be a pending partial sum.  A
 * consumer asks for the state it needs (part_get); the cheapest available
 * state is resharded by the one transition catalogue of reshard.c (decide =
 * reshard_plan, lower = reshard_lower) and every intermediate state is
 * remembered for reuse.  That decision step is also the one place that warns
 * "full-rematerialization" (check_remat): a split value left whole on every
 * device although no sharding asked for it.  Finally the root is resharded
 * to the state its caller needs (the entry's: its declared sharding), and
 * the computations are ordered callee-first (order_callee_first).
 *
 * Names: an output instruction called like an input instruction of the same
 * computation holds that value under the input's (propagated) sharding;
 * anything else gets "<input name>.<role>" (partition.h's naming contract).
 *
 * Report rows say why in words that trace every sharding involved back to
 * the annotation it came from (HloInst.sharding_origin, set by propagation):
 * a reduction names what made the value partial and the sharding that
 * needed it closed, any other collective the source's and the consumer's
 * sharding (the provenance section below).  A collective inside a loop body
 * counts once per trip when the trip count is known (Part.trips).
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uthash.h>

#include "partition_internal.h"
#include "spmdc/explain.h"
#include "spmdc/oprule.h"

typedef struct OffsetKey {
    int8_t atoms[SPMDC_MAX_ATOMS];
    int32_t n;
    int64_t chunk;
} OffsetKey;

struct OffsetEnt {
    OffsetKey key;
    int32_t local;
    UT_hash_handle hh;
};

/* A per-device table (part_device_value), found by the hash of its values;
 * tables with the same hash are chained. */
struct TableEnt {
    uint64_t hash;
    const int64_t *v;
    int32_t local;
    struct TableEnt *next;
    UT_hash_handle hh;
};

/* ================================================================ text helpers */

const char *part_fmt(Part *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *buf = arena_alloc(p->scratch, (size_t)n + 1, 1);
    va_start(ap, fmt);
    vsnprintf(buf, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return buf;
}

const char *part_spec_text(Part *p, const Tiling *s)
{
    StrBuf b = {0};
    tiling_describe(&b, s, p->mesh);
    const char *r = arena_strdup(p->scratch, sb_cstr(&b));
    sb_free(&b);
    return r;
}

const char *part_axes_text(Part *p, const int8_t *atoms, int32_t n)
{
    StrBuf b = {0};
    mesh_atoms_name(&b, p->mesh, atoms, n);
    const char *r = arena_strdup(p->scratch, sb_cstr(&b));
    sb_free(&b);
    return r;
}

const char *part_axes_mask_text(Part *p, uint32_t mask)
{
    int8_t a[SPMDC_MAX_ATOMS];
    int32_t n = 0;
    for (int32_t k = 0; k < p->mesh->n_atoms; k++)
        if (mask & (1u << k))
            a[n++] = (int8_t)k;
    return part_axes_text(p, a, n);
}

void part_put_atoms(Part *p, StrBuf *b, const int8_t *atoms, int32_t n)
{
    PartModule *pm = p->mod;
    if (n < 0 || n > SPMDC_MAX_ATOMS) {
        mesh_atoms_name(b, p->mesh, atoms, n);
        return;
    }
    for (int32_t k = 0; k < pm->n_atom_names; k++) {
        AtomsName *e = &pm->atom_names[k];
        if (e->n == n && memcmp(e->atoms, atoms, (size_t)n) == 0) {
            sb_putn(b, e->text, e->len);
            return;
        }
    }
    size_t start = b->len;
    mesh_atoms_name(b, p->mesh, atoms, n);
    AtomsName *e = &pm->atom_names[pm->n_atom_names < PART_ATOM_NAMES ? pm->n_atom_names++ : PART_ATOM_NAMES - 1];
    e->n = n;
    memcpy(e->atoms, atoms, (size_t)n);
    e->len = (uint32_t)(b->len - start);
    e->text = arena_strndup(pm->scratch, b->data + start, e->len);
}

StrBuf part_buf_take(Part *p)
{
    PartModule *pm = p->mod;
    StrBuf b = {0};
    if (pm->n_bufs > 0)
        b = pm->bufs[--pm->n_bufs];
    return b;
}

void part_buf_give(Part *p, StrBuf *b)
{
    PartModule *pm = p->mod;
    if (pm->n_bufs < PART_BUFS && b->data) {
        sb_clear(b);
        pm->bufs[pm->n_bufs++] = *b;
    } else {
        sb_free(b);
    }
    *b = (StrBuf){0};
}

/* A described tiling (sh NULL) or sharding (by address) and its text. */
#define PART_DESCS 256
typedef struct DescEnt {
    const Sharding *sh;
    Tiling t;
    bool full;
    uint32_t len;
    const char *text;           /* in scratch */
} DescEnt;

/* Appends the text of (sh, t) (t: the tiling when sh is NULL, else not
 * read) from its slot, or words it first (into the slot, replacing what it
 * held) when the slot holds another. */
static void put_desc(Part *p, StrBuf *b, const Sharding *sh, const Tiling *t, uint64_t h)
{
    PartModule *pm = p->mod;
    if (!pm->descs)
        pm->descs = ARENA_ARRAY(pm->scratch, DescEnt, PART_DESCS);
    /* shardings and tilings in halves of their own: a reason that words one
     * of each does not have them evict each other */
    DescEnt *e = &pm->descs[((h ^ (h >> 29)) & (PART_DESCS / 2 - 1)) + (sh ? PART_DESCS / 2 : 0)];
    if (!e->full || e->sh != sh || (!sh && memcmp(&e->t, t, sizeof *t) != 0)) {
        size_t start = b->len;
        if (sh)
            sharding_describe(b, sh, p->mesh);
        else
            tiling_describe(b, t, p->mesh);
        e->full = true;
        e->sh = sh;
        if (!sh)
            e->t = *t;
        e->len = (uint32_t)(b->len - start);
        e->text = arena_strndup(pm->scratch, b->data + start, e->len);
        return;
    }
    sb_putn(b, e->text, e->len);
}

void part_put_tiling(Part *p, StrBuf *b, const Tiling *t)
{
    uint64_t w[sizeof *t / 8], h = 0x9e3779b97f4a7c15ull;
    memcpy(w, t, sizeof w);
    for (size_t k = 0; k < sizeof w / sizeof w[0]; k++)
        h = (h ^ w[k]) * 0xff51afd7ed558ccdull;
    put_desc(p, b, NULL, t, h);
}

void part_put_sharding(Part *p, StrBuf *b, const Sharding *sh)
{
    static const Tiling unused;
    put_desc(p, b, sh, &unused, (uint64_t)(uintptr_t)sh * 0x9e3779b97f4a7c15ull);
}

/* ================================================================ names */

/* cand, or cand.N (smallest N >= 1) if taken; in scratch, and now taken. */
static const char *unique_name(Part *p, const char *cand) { return names_unique(&p->names, cand, p->scratch); }

const char *part_name(Part *p, const char *base, const char *role)
{
    /* the candidate is a temporary (names_unique keeps its own copy): on
     * the stack when it fits */
    size_t nb = strlen(base), nr = strlen(role);
    char few[128];
    char *cand = nb + nr + 2 <= sizeof few ? few : arena_alloc(p->tmp, nb + nr + 2, 1);
    memcpy(cand, base, nb);
    cand[nb] = '.';
    memcpy(cand + nb + 1, role, nr + 1);
    return unique_name(p, cand);
}

/* ================================================================ emission */

int32_t part_emit(Part *p, HloOpcode op, const char *name, const Shape *shape, const int32_t *ops, int32_t n)
{
    return hlo_add_inst(p->out, p->oc, op, name, shape, ops, n);
}

static int32_t part_pid(Part *p)
{
    if (p->pid < 0) {
        Shape s = shape_scalar(ET_U32);
        p->pid = part_emit(p, HLO_PARTITION_ID, unique_name(p, "partition-id"), &s, NULL, 0);
    }
    return p->pid;
}

static int32_t emit_s32_constant(Part *p, const char *name, const int64_t *v, int64_t n, bool scalar)
{
    Shape s = scalar ? shape_scalar(ET_S32) : shape_array(ET_S32, 1, &n);
    int32_t c = part_emit(p, HLO_CONSTANT, name, &s, NULL, 0);
    Literal *lit = ARENA_NEW(p->out->arena, Literal);
    lit->n = n;
    lit->i = arena_memdup(p->out->arena, v, sizeof(int64_t) * (size_t)n);
    hlo_attrs_mut(p->out, part_out(p, c))->literal = lit;
    return c;
}

int32_t part_zero(Part *p)
{
    if (p->zero < 0) {
        int64_t z = 0;
        p->zero = emit_s32_constant(p, unique_name(p, "zero"), &z, 1, true);
    }
    return p->zero;
}

int32_t part_offset(Part *p, const int8_t *atoms, int32_t n, int64_t chunk, const char *base)
{
    OffsetKey key;
    memset(&key, 0, sizeof key);
    memcpy(key.atoms, atoms, (size_t)n);
    key.n = n;
    key.chunk = chunk;
    OffsetEnt *e = NULL;
    HASH_FIND(hh, p->offsets, &key, sizeof key, e);
    if (e)
        return e->local;
    int64_t nd = p->mesh->n_devices;
    int64_t *tab = ARENA_ARRAY(p->scratch, int64_t, nd);
    for (int64_t dev = 0; dev < nd; dev++) {
        int64_t idx = 0;
        for (int32_t k = 0; k < n; k++)
            idx = idx * p->mesh->atom_size[atoms[k]] + mesh_atom_coord(p->mesh, dev, atoms[k]);
        tab[dev] = idx * chunk;
    }
    int32_t t = emit_s32_constant(p, part_name(p, base, "offset-table"), tab, nd, false);
    int32_t ops[2] = {t, part_pid(p)};
    int64_t one = 1;
    Shape s1 = shape_array(ET_S32, 1, &one), s0 = shape_scalar(ET_S32);
    int32_t ds = part_emit(p, HLO_DYNAMIC_SLICE, part_name(p, base, "offset-index"), &s1, ops, 2);
    hlo_attrs_mut(p->out, part_out(p, ds))->dynamic_slice_sizes = hlo_intlist(p->out, &one, 1);
    int32_t r = part_emit(p, HLO_RESHAPE, part_name(p, base, "offset"), &s0, &ds, 1);
    e = ARENA_NEW(p->scratch, OffsetEnt);
    e->key = key;
    e->local = r;
    HASH_ADD(hh, p->offsets, key, sizeof(OffsetKey), e);
    return r;
}

int32_t part_device_value(Part *p, const int64_t *v, const char *base)
{
    int64_t nd = p->mesh->n_devices;
    bool same = true;
    for (int64_t d = 1; d < nd && same; d++)
        same = v[d] == v[0];
    if (same)
        return emit_s32_constant(p, part_name(p, base, "constant"), v, 1, true);
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the values */
    for (int64_t d = 0; d < nd; d++) {
        h ^= (uint64_t)v[d];
        h *= 1099511628211ull;
    }
    TableEnt *head = NULL;
    HASH_FIND(hh, p->tables, &h, sizeof h, head);
    for (TableEnt *e = head; e; e = e->next)
        if (memcmp(e->v, v, sizeof(int64_t) * (size_t)nd) == 0)
            return e->local;
    int32_t t = emit_s32_constant(p, part_name(p, base, "table"), v, nd, false);
    int32_t ops[2] = {t, part_pid(p)};
    int64_t one = 1;
    Shape s1 = shape_array(ET_S32, 1, &one), s0 = shape_scalar(ET_S32);
    int32_t ds = part_emit(p, HLO_DYNAMIC_SLICE, part_name(p, base, "table-index"), &s1, ops, 2);
    hlo_attrs_mut(p->out, part_out(p, ds))->dynamic_slice_sizes = hlo_intlist(p->out, &one, 1);
    int32_t r = part_emit(p, HLO_RESHAPE, part_name(p, base, "value"), &s0, &ds, 1);
    TableEnt *e = ARENA_NEW(p->scratch, TableEnt);
    e->hash = h;
    e->v = arena_memdup(p->scratch, v, sizeof(int64_t) * (size_t)nd);
    e->local = r;
    if (head) {
        e->next = head->next;
        head->next = e;
    } else {
        HASH_ADD(hh, p->tables, hash, sizeof e->hash, e);
    }
    return r;
}

int32_t part_first_in_group(Part *p, const int8_t *atoms, int32_t n, const char *base)
{
    int32_t idx = part_offset(p, atoms, n, 1, base);
    Shape ps = shape_scalar(ET_PRED);
    int32_t ops[2] = {idx, part_zero(p)};
    int32_t r = part_emit(p, HLO_COMPARE, part_name(p, base, "first-in-group"), &ps, ops, 2);
    hlo_attrs_mut(p->out, part_out(p, r))->direction = CMP_EQ;
    return r;
}

Literal *part_identity_literal(Part *p, ReduceKind k, ElemType t)
{
    double v = 0;
    bool ok = reduce_identity(k, t, &v);
    SPMDC_ASSERT(ok);
    Literal *lit = ARENA_NEW(p->out->arena, Literal);
    lit->n = 1;
    if (elem_type_is_float(t) || elem_type_is_complex(t)) {
        lit->f = ARENA_ARRAY(p->out->arena, double, 2);
        lit->f[0] = v;
        if (elem_type_is_complex(t) && k == REDUCE_SUM)
            lit->f[1] = v; /* (-0.0, -0.0) */
    } else {
        /* integers exactly (doubles cannot hold the 64-bit bounds); u64 as its bit pattern */
        int bits = elem_type_bits(t);
        bool sgn = elem_type_is_signed_int(t);
        int64_t top = bits >= 64 ? INT64_MAX : (INT64_C(1) << (bits - 1)) - 1;
        int64_t iv = k == REDUCE_PROD ? 1 : 0;
        if (k == REDUCE_AND) /* every bit set: true for pred, -1 signed, the top value unsigned */
            iv = t == ET_PRED ? 1 : sgn || bits >= 64 ? -1 : (INT64_C(1) << bits) - 1;
        else if (k == REDUCE_MAX)
            iv = sgn ? -top - 1 : 0;
        else if (k == REDUCE_MIN)
            iv = t == ET_PRED ? 1 : sgn ? top : bits >= 64 ? -1 : (INT64_C(1) << bits) - 1;
        lit->i = ARENA_ARRAY(p->out->arena, int64_t, 1);
        lit->i[0] = iv;
    }
    return lit;
}

int32_t part_identity(Part *p, ReduceKind k, const Shape *s, const char *base)
{
    Shape sc = shape_scalar(s->type);
    int32_t c = part_emit(p, HLO_CONSTANT, part_name(p, base, "identity"), &sc, NULL, 0);
    hlo_attrs_mut(p->out, part_out(p, c))->literal = part_identity_literal(p, k, s->type);
    if (s->rank == 0)
        return c;
    Shape bs = shape_array(s->type, s->rank, s->dims);
    return part_emit(p, HLO_BROADCAST, part_name(p, base, "identity-broadcast"), &bs, &c, 1);
}

static const char *reducer_op_name(ReduceKind k, ElemType t, HloOpcode *op)
{
    bool pred = t == ET_PRED;
    switch (k) {
    case REDUCE_MAX: *op = HLO_MAXIMUM; return "maximum";
    case REDUCE_MIN: *op = HLO_MINIMUM; return "minimum";
    case REDUCE_PROD:
    case REDUCE_AND:
        *op = pred || k == REDUCE_AND ? HLO_AND : HLO_MULTIPLY;
        return pred || k == REDUCE_AND ? "and" : "multiply";
    case REDUCE_OR: *op = HLO_OR; return "or";
    default: *op = pred ? HLO_OR : HLO_ADD; return pred ? "or" : "add";
    }
}

int32_t part_reducer(Part *p, ReduceKind kind, ElemType t)
{
    if (p->mod->reducers[kind][t] >= 0)
        return p->mod->reducers[kind][t];
    HloOpcode op;
    const char *opn = reducer_op_name(kind, t, &op);
    const char *name = names_unique(&p->mod->comp_names, part_fmt(p, "%s.%s", opn, elem_type_name(t)), p->scratch);
    int32_t c = hlo_add_computation(p->out, name, false);
    Shape s = shape_scalar(t);
    int32_t x = hlo_add_inst(p->out, c, HLO_PARAMETER, "x", &s, NULL, 0);
    hlo_inst(p->out, c, x)->param_number = 0;
    int32_t y = hlo_add_inst(p->out, c, HLO_PARAMETER, "y", &s, NULL, 0);
    hlo_inst(p->out, c, y)->param_number = 1;
    int32_t xy[2] = {x, y};
    hlo_comp(p->out, c)->root = hlo_add_inst(p->out, c, op, opn, &s, xy, 2);
    p->mod->reducers[kind][t] = c;
    return c;
}

ReplicaGroups part_groups(Part *p, const int8_t *atoms, int32_t n)
{
    /* the few atom runs a program's collectives use share their groups
     * (nothing writes into them) */
    PartModule *pm = p->mod;
    for (int32_t k = 0; k < pm->n_groups; k++)
        if (pm->groups[k].n == n && memcmp(pm->groups[k].atoms, atoms, (size_t)n) == 0)
            return pm->groups[k].g;
    ReplicaGroups g;
    g.ids = ARENA_ARRAY(p->out->arena, int64_t, p->mesh->n_devices);
    mesh_groups(p->mesh, atoms, n, g.ids, &g.n_groups, &g.group_size);
    if (pm->n_groups < PART_GROUP_CACHE && n <= SPMDC_MAX_ATOMS) {
        GroupsEnt *e = &pm->groups[pm->n_groups++];
        e->n = n;
        memcpy(e->atoms, atoms, (size_t)n);
        e->g = g;
    }
    return g;
}

CommRecord *part_record(Part *p, CollectiveKind kind, int32_t local, const int8_t *atoms, int32_t n, int64_t bytes,
                        int32_t cause_inst, const char *reason)
{
    if (!p->rep)
        return NULL;
    const HloInst *ci = part_out(p, local);
    const Shape *os = part_out(p, ci->operands[0])->shape;
    const HloInst *cause = cause_inst >= 0 ? part_in(p, cause_inst) : NULL;
    CommRecord *r = report_add(p->rep, kind, ci->name, cause ? cause->name : "", cause ? cause->span.begin.line : 0,
                               reason ? reason : "");
    r->dtype = ci->shape->type;
    r->operand_rank = os->rank;
    r->result_rank = ci->shape->rank;
    memcpy(r->operand_dims, os->dims, sizeof r->operand_dims);
    memcpy(r->result_dims, ci->shape->dims, sizeof r->result_dims);
    r->n_atoms = n;
    memcpy(r->atoms, atoms, (size_t)n);
    r->group_size = 1;
    for (int32_t k = 0; k < n; k++)
        r->group_size *= p->mesh->atom_size[atoms[k]];
    r->num_groups = p->mesh->n_devices / r->group_size;
    r->bytes_per_device = bytes;
    r->multiplier = p->trips;
    r->per_trip = p->per_trip;
    if (p->trips != 1) /* 0: a loop that runs no trip sends nothing */
        r->bytes_per_device = p->trips == 0 ? 0 : bytes > INT64_MAX / p->trips ? INT64_MAX : bytes * p->trips;
    return r;
}

/* ================================================================ copying */

static Literal *copy_literal(HloModule *out, const Literal *l, const Shape *s)
{
    if (!l)
        return NULL;
    Literal *r = ARENA_NEW(out->arena, Literal);
    *r = *l;
    int64_t nf = s && shape_is_array(s) && elem_type_is_complex(s->type) ? 2 * l->n : l->n;
    if (l->i)
        r->i = arena_memdup(out->arena, l->i, sizeof(int64_t) * (size_t)l->n);
    if (l->f)
        r->f = arena_memdup(out->arena, l->f, sizeof(double) * (size_t)nf);
    if (l->n_elems) {
        r->elems = ARENA_ARRAY(out->arena, Literal, l->n_elems);
        for (int32_t k = 0; k < l->n_elems; k++) {
            const Shape *es = s && shape_is_tuple(s) && k < s->n_elems ? &s->elems[k] : NULL;
            Literal *e = copy_literal(out, &l->elems[k], es);
            r->elems[k] = *e;
        }
    }
    return r;
}

static IntList copy_list(HloModule *out, IntList l) { return hlo_intlist(out, l.v, l.n); }

static int32_t map_comp(const int32_t *map, int32_t c) { return c >= 0 ? map[c] : c; }

/* Deep copy of an instruction's attributes into out, computations remapped. */
static void copy_attrs_into(HloModule *out, const HloAttrs *a, const Shape *s, const int32_t *map, HloAttrs *r);

static HloAttrs *copy_attrs(HloModule *out, const HloAttrs *a, const Shape *s, const int32_t *map)
{
    HloAttrs *r = ARENA_NEW(out->arena, HloAttrs);
    copy_attrs_into(out, a, s, map, r);
    return r;
}

/* The same into *r (its arrays in out's arena). */
static void copy_attrs_into(HloModule *out, const HloAttrs *a, const Shape *s, const int32_t *map, HloAttrs *r)
{
    *r = *a;
    IntList *lists[] = {&r->dimensions, &r->branches, &r->called};
    for (size_t k = 0; k < sizeof lists / sizeof lists[0]; k++)
        *lists[k] = copy_list(out, *lists[k]);
    for (int k = 0; k < HLO_ATTR_OP_LISTS; k++) /* whichever opcode group they hold */
        r->op_lists[k] = copy_list(out, r->op_lists[k]);
    if (a->window)
        r->window = arena_memdup(out->arena, a->window, sizeof *a->window);
    if (a->conv)
        r->conv = arena_memdup(out->arena, a->conv, sizeof *a->conv);
    r->dim_labels = a->dim_labels ? arena_strdup(out->arena, a->dim_labels) : NULL;
    r->compare_type = a->compare_type ? arena_strdup(out->arena, a->compare_type) : NULL;
    r->custom_call_target = a->custom_call_target ? arena_strdup(out->arena, a->custom_call_target) : NULL;
    r->rng_distribution = a->rng_distribution ? arena_strdup(out->arena, a->rng_distribution) : NULL;
    if (a->replica_groups.ids)
        r->replica_groups.ids = arena_memdup(out->arena, a->replica_groups.ids,
                                             sizeof(int64_t) * (size_t)(a->replica_groups.n_groups *
                                                                        a->replica_groups.group_size));
    if (a->pairs)
        r->pairs = arena_memdup(out->arena, a->pairs, sizeof(int64_t) * 2 * (size_t)a->n_pairs);
    r->literal = copy_literal(out, a->literal, s);
    r->to_apply = map_comp(map, a->to_apply);
    r->select = map_comp(map, a->select);
    r->condition = map_comp(map, a->condition);
    r->body = map_comp(map, a->body);
    for (int32_t k = 0; k < r->branches.n; k++)
        r->branches.v[k] = map_comp(map, (int32_t)r->branches.v[k]);
    for (int32_t k = 0; k < r->called.n; k++)
        r->called.v[k] = map_comp(map, (int32_t)r->called.v[k]);
    if (a->n_raw) {
        r->raw = ARENA_ARRAY(out->arena, RawAttr, a->n_raw);
        for (int32_t k = 0; k < a->n_raw; k++) {
            r->raw[k].name = arena_strdup(out->arena, a->raw[k].name);
            r->raw[k].text = arena_strdup(out->arena, a->raw[k].text);
        }
    }
}

/* Calls fn(ref, applied, user) for every computation attributes a refer
 * to: applied = an op applies it (reducers, comparators, scatter combiners,
 * custom-call callees), else it is a while's condition or body, a
 * conditional's branch or a call's callee (partitioned per call site).
 * With w (a's own attributes, writable) the references become fn's
 * results. */
typedef int32_t (*RefFn)(int32_t ref, bool applied, void *user);

static void each_ref(HloOpcode op, const HloAttrs *a, HloAttrs *w, RefFn fn, void *user)
{
    if (!a)
        return;
    int32_t *single[] = {w ? &w->to_apply : NULL, w ? &w->select : NULL, w ? &w->condition : NULL,
                         w ? &w->body : NULL};
    int32_t vals[] = {a->to_apply, a->select, a->condition, a->body};
    bool applied[] = {op != HLO_CALL, true, false, false};
    for (int k = 0; k < 4; k++) {
        int32_t r = fn(vals[k], applied[k], user);
        if (single[k])
            *single[k] = r;
    }
    for (int32_t k = 0; k < a->branches.n; k++) {
        int32_t r = fn((int32_t)a->branches.v[k], false, user);
        if (w)
            w->branches.v[k] = r;
    }
    for (int32_t k = 0; k < a->called.n; k++) {
        int32_t r = fn((int32_t)a->called.v[k], true, user);
        if (w)
            w->called.v[k] = r;
    }
}

/* Whether attributes a refer to some computation (each_ref would call its
 * function with a reference >= 0). */
static bool has_ref(const HloAttrs *a)
{
    return a && (a->to_apply >= 0 || a->select >= 0 || a->condition >= 0 || a->body >= 0 || a->branches.n > 0 ||
                 a->called.n > 0);
}

typedef struct MarkCtx {
    bool *applied;
    int32_t *work;
    int32_t n_work, n_comps;
    bool all;          /* mark every reference (inside an applied computation) */
} MarkCtx;

static int32_t mark_ref(int32_t ref, bool applied, void *user)
{
    MarkCtx *mc = user;
    if (ref < 0 || ref >= mc->n_comps || (!applied && !mc->all) || mc->applied[ref])
        return ref;
    mc->applied[ref] = true;
    mc->work[mc->n_work++] = ref;
    return ref;
}

/* Copies, as they are, the computations ops apply (and everything those
 * call): reducers, comparators, combiners run on scalars or whole values.
 * The computations control flow calls are partitioned per call site
 * instead (part_callee). */
static void copy_applied(PartModule *pm)
{
    const HloModule *in = pm->in;
    int32_t n = in->n_comps;
    MarkCtx mc = {ARENA_ARRAY(pm->scratch, bool, n + 1), ARENA_ARRAY(pm->scratch, int32_t, n + 1), 0, n, false};
    for (int32_t c = 0; c < n; c++)
        for (int32_t i = 0; i < in->comps[c].n_insts; i++) {
            HLO_WALK_PREFETCH(&in->comps[c], i);
            each_ref(in->comps[c].insts[i].op, in->comps[c].insts[i].attrs, NULL, mark_ref, &mc);
        }
    mc.all = true;
    while (mc.n_work > 0) {
        int32_t c = mc.work[--mc.n_work];
        for (int32_t i = 0; i < in->comps[c].n_insts; i++)
            each_ref(in->comps[c].insts[i].op, in->comps[c].insts[i].attrs, NULL, mark_ref, &mc);
    }
    for (int32_t c = 0; c < n; c++) {
        pm->comp_map[c] = -1;
        if (!mc.applied[c] || c == in->entry)
            continue;
        pm->comp_map[c] = hlo_add_computation(pm->out, in->comps[c].name, false);
        pm->name_used[c] = true;
    }
    for (int32_t c = 0; c < n; c++) {
        if (pm->comp_map[c] < 0)
            continue;
        const HloComputation *src = &in->comps[c];
        int32_t oc = pm->comp_map[c];
        for (int32_t i = 0; i < src->n_insts; i++) {
            const HloInst *si = &src->insts[i];
            int32_t k = hlo_add_inst(pm->out, oc, si->op, si->name, si->shape, si->operands, si->n_operands);
            HloInst *di = hlo_inst(pm->out, oc, k);
            di->span = si->span;
            di->param_number = si->param_number;
            if (si->attrs)
                di->attrs = copy_attrs(pm->out, si->attrs, si->shape, pm->comp_map);
        }
        HloComputation *dc = hlo_comp(pm->out, oc);
        dc->root = src->root;
        dc->span = src->span;
        dc->execution_thread = src->execution_thread ? arena_strdup(pm->out->arena, src->execution_thread) : NULL;
    }
}

/* Whether the copy of input instruction si's attributes may be one set
 * shared by every output instruction with equal attributes
 * (hlo_set_attrs): no computation references (order_callee_first rewrites
 * those in place), no literal (its copy depends on the shape), and no list
 * that oprule_localize_attrs writes into (slice, dynamic-slice, gather). */
static bool attrs_shareable(const HloInst *si)
{
    const HloAttrs *a = si->attrs;
    return si->attrs_shared && !has_ref(a) && !a->literal && si->op != HLO_SLICE && si->op != HLO_DYNAMIC_SLICE &&
           si->op != HLO_GATHER;
}

/* Sets di's attributes to the shared copy of si's (attrs_shareable): one
 * copy per shared input set, found by its address. */
static void share_attrs(PartModule *pm, const HloInst *si, HloInst *di)
{
    if (2 * (pm->attrs_n + 1) > pm->attrs_cap) {
        uint32_t cap = pm->attrs_cap ? 2 * pm->attrs_cap : 256, mask = cap - 1;
        const HloAttrs **key = ARENA_ARRAY(pm->scratch, const HloAttrs *, cap);
        HloAttrs **val = ARENA_ARRAY(pm->scratch, HloAttrs *, cap);
        for (uint32_t k = 0; k < pm->attrs_cap; k++) {
            if (!pm->attrs_key[k])
                continue;
            uint32_t j = (uint32_t)(((uintptr_t)pm->attrs_key[k] >> 3) * 2654435761u) & mask;
            while (key[j])
                j = (j + 1) & mask;
            key[j] = pm->attrs_key[k];
            val[j] = pm->attrs_val[k];
        }
        pm->attrs_key = key;
        pm->attrs_val = val;
        pm->attrs_cap = cap;
    }
    uint32_t mask = pm->attrs_cap - 1, j = (uint32_t)(((uintptr_t)si->attrs >> 3) * 2654435761u) & mask;
    while (pm->attrs_key[j] && pm->attrs_key[j] != si->attrs)
        j = (j + 1) & mask;
    if (pm->attrs_key[j]) {
        di->attrs = pm->attrs_val[j];
        di->attrs_shared = true;
        return;
    }
    HloAttrs a;
    copy_attrs_into(pm->out, si->attrs, si->shape, pm->comp_map, &a);
    hlo_set_attrs(pm->out, di, &a);
    pm->attrs_key[j] = si->attrs;
    pm->attrs_val[j] = di->attrs;
    pm->attrs_n++;
}

int32_t part_clone_into(Part *p, int32_t oc, int32_t i, const char *name, const Shape *shape, const int32_t *ops,
                        int32_t n)
{
    const HloInst *si = part_in(p, i);
    int32_t k = hlo_add_inst(p->out, oc, si->op, name, shape, ops, n);
    HloInst *di = hlo_inst(p->out, oc, k);
    di->span = si->span;
    di->param_number = si->param_number;
    if (si->attrs && attrs_shareable(si))
        share_attrs(p->mod, si, di);
    else if (si->attrs)
        di->attrs = copy_attrs(p->out, si->attrs, si->shape, p->mod->comp_map);
    return k;
}

int32_t part_clone(Part *p, int32_t i, const char *name, const Shape *shape, const int32_t *ops, int32_t n)
{
    return part_clone_into(p, p->oc, i, name, shape, ops, n);
}

typedef struct OrderCtx {
    const int32_t *pos;   /* old index -> new index */
} OrderCtx;

static int32_t remap_ref(int32_t ref, bool applied, void *user)
{
    (void)applied;
    const OrderCtx *oc = user;
    return ref >= 0 ? oc->pos[ref] : ref;
}

typedef struct DfsCtx {
    const HloModule *m;
    uint8_t *state;       /* 0 new, 1 on the stack, 2 placed */
    int32_t *order;
    int32_t n;
    int32_t *stack;       /* (computation, next instruction) pairs */
} DfsCtx;

static int32_t visit_ref(int32_t ref, bool applied, void *user)
{
    (void)applied;
    DfsCtx *d = user;
    if (ref < 0 || ref >= d->m->n_comps || d->state[ref])
        return ref;
    d->stack[2 * d->n + 0] = ref; /* pushed: visited before its caller is placed */
    d->stack[2 * d->n + 1] = 0;
    d->state[ref] = 1;
    d->n++;
    return ref;
}

/* Post-order from c over the references: callees before their callers.
 * Iterative (deep call chains must not exhaust the C stack). */
static void dfs(DfsCtx *d, int32_t c, int32_t *placed)
{
    d->state[c] = 1;
    d->stack[0] = c;
    d->stack[1] = 0;
    d->n = 1;
    while (d->n > 0) {
        int32_t top = d->n - 1, cc = d->stack[2 * top], i = d->stack[2 * top + 1];
        const HloComputation *comp = &d->m->comps[cc];
        while (i < comp->n_insts && !has_ref(comp->insts[i].attrs))
            i++;
        if (i < comp->n_insts) {
            d->stack[2 * top + 1] = i + 1;
            const HloInst *in = &comp->insts[i];
            each_ref(in->op, in->attrs, NULL, visit_ref, d);
            continue;
        }
        d->state[cc] = 2;
        d->order[(*placed)++] = cc;
        d->n--;
    }
}

/* Orders the output computations callee-first with the entry last (the
 * computations partitioned for call sites and the reducers were added
 * while their callers were being built) and remaps every reference. */
static void order_callee_first(PartModule *pm)
{
    HloModule *out = pm->out;
    int32_t n = out->n_comps, placed = 0;
    DfsCtx d = {out, ARENA_ARRAY(pm->scratch, uint8_t, n + 1), ARENA_ARRAY(pm->scratch, int32_t, n + 1), 0,
                ARENA_ARRAY(pm->scratch, int32_t, 2 * (n + 1))};
    for (int32_t c = 0; c < n; c++)
        if (c != out->entry && !d.state[c])
            dfs(&d, c, &placed);
    if (out->entry >= 0 && !d.state[out->entry]) {
        /* every other computation is placed: the entry's walk would push
         * none, so it goes last without one */
        d.state[out->entry] = 2;
        d.order[placed++] = out->entry;
    }
    int32_t *pos = ARENA_ARRAY(pm->scratch, int32_t, n + 1);
    bool same = true;
    for (int32_t k = 0; k < n; k++) {
        pos[d.order[k]] = k;
        same &= d.order[k] == k;
    }
    if (same)
        return;
    OrderCtx oc = {pos};
    for (int32_t c = 0; c < n; c++)
        for (int32_t i = 0; i < out->comps[c].n_insts; i++) {
            HLO_WALK_PREFETCH(&out->comps[c], i);
            each_ref(out->comps[c].insts[i].op, out->comps[c].insts[i].attrs, out->comps[c].insts[i].attrs,
                     remap_ref, &oc);
        }
    HloComputation *comps = ARENA_ARRAY(pm->scratch, HloComputation, n + 1);
    for (int32_t k = 0; k < n; k++)
        comps[k] = out->comps[d.order[k]];
    memcpy(out->comps, comps, sizeof(HloComputation) * (size_t)n);
    out->entry = pos[out->entry];
}

/* ================================================================ values */

/* The words of t that say what it is (tiling_equal's fields, and perm as
 * it is): rank, kind, perm and partial; n[0..rank) (the rest masked off);
 * atoms[0..used), eight a word, the last word's unused bytes masked off.
 * Returns how many of w[0..2 + SPMDC_MAX_ATOMS / 8) it wrote. */
static int32_t tiling_words(const Tiling *t, uint64_t *w)
{
    _Static_assert(SPMDC_MAX_RANK == 8 && SPMDC_MAX_ATOMS % 8 == 0, "n[] is one word, atoms[] whole words");
    int32_t rank = t->rank > 0 ? t->rank : 0, k = 2;
    uint64_t n;
    memcpy(&n, t->n, sizeof n);
    if (rank < 8)
        n &= (1ull << (8 * rank)) - 1;
    uint32_t used = (uint32_t)((n * 0x0101010101010101ull) >> 56); /* the bytes' sum (<= SPMDC_MAX_ATOMS) */
    w[0] = (uint64_t)(uint8_t)t->rank | (uint64_t)t->kind << 8 | (uint64_t)t->perm << 16 | (uint64_t)t->partial << 32;
    w[1] = n;
    for (uint32_t j = 0; j < used && j < SPMDC_MAX_ATOMS; j += 8) {
        uint64_t a;
        memcpy(&a, t->atoms + j, sizeof a);
        if (used - j < 8)
            a &= (1ull << (8 * (used - j))) - 1;
        w[k++] = a;
    }
    return k;
}

/* Equal array states: what tiling_words says, and the permutation. */
static bool canon_same(const void *stored, const void *item)
{
    const Tiling *a = stored, *b = item;
    return a->perm == b->perm && tiling_equal(a, b);
}

const Tiling *part_tiling_canon(PartModule *pm, const Tiling *t)
{
    uint64_t w[2 + SPMDC_MAX_ATOMS / 8], h = 0x9e3779b97f4a7c15ull;
    int32_t n = tiling_words(t, w);
    for (int32_t k = 0; k < n; k++) {
        h = (h ^ w[k]) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    uint32_t at = 0;
    const Tiling *found = intern_find(&pm->canon, h, t, canon_same, &at);
    if (found) return found;
    Tiling *c = ARENA_NEW(pm->scratch, Tiling);
    *c = *t;
    intern_add(&pm->canon, at, h, c);
    return c;
}

static const Sharding *leaf_sharding(const Sharding *sh, int32_t leaf)
{
    if (sh && sh->kind == SHARDING_TUPLE)
        return leaf < sh->n_elems ? &sh->elems[leaf] : NULL;
    return sh;
}

/* One (sharding, rank) of PartModule.decl_tab: what sharding_to_tiling
 * makes of it (ok: it fits) and the declared tiling (it, or replicated).
 * Shardings that convert alike share an entry: no sharding, replicated and
 * maximal ones; tiled ones by their tile; any other kind by its kind. */
typedef struct DeclEnt {
    const Sharding *sh;         /* the first one seen */
    uint64_t hash;
    int32_t rank;               /* -1: a free slot */
    bool ok;
    Tiling decl;
    const Tiling *canon;        /* decl's canonical copy (part_tiling_canon) */
} DeclEnt;

static const DeclEnt *find_decl(PartModule *pm, const Sharding *sh, int32_t rank);

static int32_t decl_class(const Sharding *sh)
{
    if (!sh || sh->kind == SHARDING_REPLICATED || sh->kind == SHARDING_MAXIMAL)
        return -1;
    return (int32_t)sh->kind;
}

static uint64_t decl_hash(const Sharding *sh, int32_t rank)
{
    int32_t cls = decl_class(sh);
    uint64_t h = ((uint64_t)(uint32_t)cls << 32 | (uint32_t)rank) * 0x9e3779b97f4a7c15ull;
    if (cls == SHARDING_TILED) {
        uint64_t w[sizeof(Tiling) / 8];
        memcpy(w, &sh->tile, sizeof w);
        for (size_t k = 0; k < sizeof w / sizeof w[0]; k++) {
            h = (h ^ w[k]) * 0xff51afd7ed558ccdull;
            h ^= h >> 32;
        }
    }
    return h;
}

static bool decl_same(const DeclEnt *e, const Sharding *sh, int32_t rank)
{
    if (e->rank != rank)
        return false;
    if (e->sh == sh)
        return true;
    int32_t cls = decl_class(sh);
    if (decl_class(e->sh) != cls)
        return false;
    return cls != SHARDING_TILED || memcmp(&e->sh->tile, &sh->tile, sizeof(Tiling)) == 0;
}

/* The entry of (sh, rank), made on first use.  An entry's contents never
 * change, and the tables a resize leaves behind stay in scratch, so the
 * entries held by PartModule.decl_recent (and PVal.decl) stay valid. */
static const DeclEnt *sharding_tiling_miss(PartModule *pm, const Sharding *sh, int32_t rank, uint32_t r);

static inline const DeclEnt *sharding_tiling(PartModule *pm, const Sharding *sh, int32_t rank)
{
    uint32_t r = (uint32_t)((((uintptr_t)sh >> 4) ^ (uintptr_t)(uint32_t)rank) & (PART_DECL_RECENT - 1));
    if (pm->decl_recent[r].e && pm->decl_recent[r].sh == sh && pm->decl_recent[r].rank == rank)
        return pm->decl_recent[r].e;
    return sharding_tiling_miss(pm, sh, rank, r);
}

/* sharding_tiling when the recent entries do not have it. */
static const DeclEnt *sharding_tiling_miss(PartModule *pm, const Sharding *sh, int32_t rank, uint32_t r)
{
    const DeclEnt *e = find_decl(pm, sh, rank);
    pm->decl_recent[r].sh = sh;
    pm->decl_recent[r].rank = rank;
    pm->decl_recent[r].e = e;
    return e;
}

/* sharding_tiling's table lookup. */
static const DeclEnt *find_decl(PartModule *pm, const Sharding *sh, int32_t rank)
{
    if (2 * (pm->decl_n + 1) > pm->decl_cap) {
        uint32_t cap = pm->decl_cap ? 2 * pm->decl_cap : 64;
        DeclEnt *tab = ARENA_ARRAY(pm->scratch, DeclEnt, cap);
        for (uint32_t k = 0; k < cap; k++)
            tab[k].rank = -1;
        for (uint32_t k = 0; k < pm->decl_cap; k++) {
            if (pm->decl_tab[k].rank < 0)
                continue;
            uint32_t j = (uint32_t)pm->decl_tab[k].hash & (cap - 1);
            while (tab[j].rank >= 0)
                j = (j + 1) & (cap - 1);
            tab[j] = pm->decl_tab[k];
        }
        pm->decl_tab = tab;
        pm->decl_cap = cap;
    }
    uint32_t mask = pm->decl_cap - 1;
    uint64_t h = decl_hash(sh, rank);
    uint32_t j = (uint32_t)h & mask;
    for (; pm->decl_tab[j].rank >= 0; j = (j + 1) & mask)
        if (pm->decl_tab[j].hash == h && decl_same(&pm->decl_tab[j], sh, rank))
            return &pm->decl_tab[j];
    DeclEnt *e = &pm->decl_tab[j];
    e->sh = sh;
    e->hash = h;
    e->rank = rank;
    e->ok = sharding_to_tiling(sh, rank, &e->decl);
    if (!e->ok)
        tiling_replicated(&e->decl, rank);
    e->canon = part_tiling_canon(pm, &e->decl);
    pm->decl_n++;
    return e;
}

/* Writes the declared tiling of every array leaf of shape s (flat order),
 * starting at leaf *k. */
static void decl_walk(const Shape *s, const Sharding *sh, int32_t *k, int32_t n, Tiling *out)
{
    if (shape_is_tuple(s)) {
        for (int32_t e = 0; e < s->n_elems; e++)
            decl_walk(&s->elems[e], sh, k, n, out);
        return;
    }
    if (*k >= n)
        return;
    Tiling *t = &out[*k];
    if (!sharding_to_tiling(leaf_sharding(sh, *k), s->rank, t))
        tiling_replicated(t, s->rank);
    (*k)++;
}

const Tiling *part_decl_leaves_make(const Part *p, int32_t i)
{
    PVal *pv = &p->vals[i];
    if (!pv->decl) {
        const HloInst *in = part_in(p, i);
        if (pv->n_leaves == 1 && !shape_is_tuple(in->shape) && !pv->manual) {
            /* one shared copy per (sharding, rank) */
            pv->decl = sharding_tiling(p->mod, leaf_sharding(in->sharding, 0), in->shape->rank)->canon;
            return pv->decl;
        }
        int32_t n = pv->n_leaves, k = 0;
        Tiling *s = ARENA_ARRAY(p->scratch, Tiling, n ? n : 1);
        decl_walk(part_in(p, i)->shape, part_in(p, i)->sharding, &k, n, s);
        for (int32_t l = 0; pv->manual && l < n; l++)
            s[l] = part_strip_atoms(s[l], pv->manual);
        pv->decl = n == 1 ? part_tiling_canon(p->mod, s) : s; /* one leaf: canonical, as every state */
    }
    return pv->decl;
}

void part_decl(const Part *p, int32_t i, int32_t leaf, Tiling *out)
{
    if (leaf >= 0 && leaf < p->vals[i].n_leaves)
        *out = part_decl_leaves(p, i)[leaf];
    else
        tiling_replicated(out, 0);
}

Tiling *part_inst_decl(Part *p, const HloInst *in)
{
    int32_t n = shape_leaf_count(in->shape), k = 0;
    Tiling *s = ARENA_ARRAY(p->scratch, Tiling, n ? n : 1);
    decl_walk(in->shape, in->sharding, &k, n, s);
    return s;
}

const VState *part_primary(const Part *p, int32_t i) { return p->vals[i].states; }

static bool leaves_equal(const Tiling *a, const Tiling *b, int32_t n)
{
    if (a == b)
        return true;
    for (int32_t k = 0; k < n; k++)
        if (!tiling_equal(&a[k], &b[k]))
            return false;
    return true;
}

static VState *find_state(Part *p, int32_t v, const Tiling *want)
{
    for (VState *s = p->vals[v].states; s; s = s->next)
        if (leaves_equal(s->leaves, want, p->vals[v].n_leaves))
            return s;
    return NULL;
}

int32_t part_held_canon(const Part *p, int32_t v, const Tiling *want)
{
    for (const VState *s = p->vals[v].states; s; s = s->next)
        if (s->leaves == want)
            return s->local;
    return -1;
}

int32_t part_held(Part *p, int32_t v, const Tiling *want)
{
    const VState *s = find_state(p, v, want);
    return s ? s->local : -1;
}

/* Remembers that `local` holds value v in state `leaves` (after the primary). */
static void add_state(Part *p, int32_t v, int32_t local, const Tiling *leaves, int32_t origin, const char *why)
{
    PVal *pv = &p->vals[v];
    if (p->vs_left == 0) { /* allocated in blocks: one per value and reshard adds up */
        p->vs_left = 256;
        p->vs_free = ARENA_ARRAY(p->scratch, VState, p->vs_left);
    }
    VState *s = p->vs_free++;
    p->vs_left--;
    s->local = local;
    /* a one-leaf value's state is its canonical copy (the declared state,
     * the common case, is one already); a tuple's declared state is not
     * stored twice */
    if (pv->n_leaves == 1) {
        const Tiling *d = pv->decl;
        bool same = leaves == d || (d && tiling_equal(leaves, d) && leaves->perm == d->perm);
        s->leaves = same ? d : part_tiling_canon(p->mod, leaves);
    } else if (pv->decl && pv->n_leaves > 0 && leaves_equal(leaves, pv->decl, pv->n_leaves)) {
        s->leaves = pv->decl;
    } else {
        s->leaves = arena_memdup(p->scratch, leaves, sizeof(Tiling) * (size_t)(pv->n_leaves ? pv->n_leaves : 1));
    }
    s->origin = origin;
    s->origin_reason = why;
    if (!pv->states) {
        pv->states = s;
    } else {
        s->next = pv->states->next;
        pv->states->next = s;
    }
}

void part_set_result(Part *p, int32_t i, int32_t local, const Tiling *leaves, int32_t origin, const char *why)
{
    add_state(p, i, local, leaves, origin, why);
}

const char *part_result_name(Part *p, int32_t i, const Tiling *leaves, const char *role)
{
    const Tiling *decl = part_decl_leaves(p, i);
    if (leaves_equal(leaves, decl, p->vals[i].n_leaves) && !find_state(p, i, decl))
        return part_in(p, i)->name;
    return part_name(p, part_in(p, i)->name, role);
}

int64_t part_cost(Part *p, int32_t v, const Tiling *want)
{
    const Shape *s = part_in(p, v)->shape;
    int64_t best = PART_INF_COST;
    for (VState *st = p->vals[v].states; st; st = st->next)
        if (tiling_equal(&st->leaves[0], want))
            return 0;
    for (VState *st = p->vals[v].states; st; st = st->next) {
        int64_t c = part_reshard_cost(p, s, &st->leaves[0], want);
        if (c < best)
            best = c;
    }
    return best;
}

typedef struct StepCtx {
    int32_t v;
    int32_t origin;
    const char *why;
} StepCtx;

static void on_step(Part *p, void *user, int32_t local, const Tiling *state)
{
    StepCtx *sc = user;
    if (!find_state(p, sc->v, state))
        add_state(p, sc->v, local, state, state->partial ? sc->origin : -1, state->partial ? sc->why : NULL);
}

/* ================================================================ provenance */

int32_t part_origin(const Part *p, int32_t i, int32_t d)
{
    const HloInst *in = part_in(p, i);
    if (in->sharding_from_user && in->sharding)
        return i;
    int32_t o = in->sharding_origin;
    if (d >= 0 && in->sharding_dim_origin && shape_is_array(in->shape) && d < in->shape->rank)
        o = in->sharding_dim_origin[d];
    HloRef r;
    return hlo_origin_ref(p->in, p->ic, o, &r) ? o : -1;
}

/* The annotated instruction that origin code o (part_origin, not -1)
 * names: in this computation or another. */
static const HloInst *origin_inst(const Part *p, int32_t o)
{
    HloRef r;
    if (!hlo_origin_ref(p->in, p->ic, o, &r))
        return part_in(p, o); /* part_origin gave it: never reached */
    return &p->in->comps[r.comp].insts[r.inst];
}

/* "a, line 31": origin o's name, and its line when the input gave one. */
static void put_origin_where(Part *p, StrBuf *b, int32_t o)
{
    const HloInst *x = origin_inst(p, o);
    sb_puts(b, x->name);
    if (x->span.begin.line) {
        sb_puts(b, ", line ");
        sb_int(b, x->span.begin.line);
    }
}

int32_t part_split_origin(const Part *p, int32_t v, const Tiling *s, int32_t d)
{
    if (p->vals[v].n_leaves < 1)
        return PART_NOT_OWN; /* part_decl's replicated rank-0 tiling splits no dim */
    const Tiling *decl = part_decl_leaves(p, v);
    if (d < 0 || d >= decl->rank || d >= s->rank || tiling_dim_n(decl, d) == 0 || tiling_dim_n(s, d) == 0 ||
        tiling_dim(decl, d)[0] != tiling_dim(s, d)[0])
        return PART_NOT_OWN;
    return part_origin(p, v, d);
}

void part_put_origin(Part *p, StrBuf *b, int32_t v, int32_t o)
{
    if (o == PART_NOT_OWN) {
        sb_puts(b, "not by its own sharding");
    } else if (o == v) {
        uint32_t line = part_in(p, o)->span.begin.line;
        sb_puts(b, "annotated");
        if (line) {
            sb_puts(b, ", line ");
            sb_int(b, line);
        }
    } else if (o != -1) {
        sb_puts(b, "from the annotation on ");
        put_origin_where(p, b, o);
    }
}

/* Appends where the whole declared sharding of i came from (part_put_origin
 * words, or "from the annotations on x, line 30 and a, line 31" when an
 * array's split dims came from different ones, in dim order); false (and
 * nothing appended) if from none. */
static bool put_sharding_origin(Part *p, StrBuf *b, int32_t i)
{
    const HloInst *in = part_in(p, i);
    int32_t o = part_origin(p, i, -1), seen[SPMDC_MAX_RANK], n = 0;
    if (o != i && in->sharding_dim_origin && shape_is_array(in->shape)) {
        Tiling decl;
        part_decl(p, i, 0, &decl);
        for (int32_t d = 0; d < decl.rank; d++) {
            int32_t od = tiling_dim_n(&decl, d) > 0 ? part_origin(p, i, d) : -1;
            bool dup = od == -1;
            for (int32_t k = 0; k < n && !dup; k++)
                dup = seen[k] == od;
            if (!dup)
                seen[n++] = od;
        }
        if (n == 1)
            o = seen[0];
    }
    if (n <= 1) {
        part_put_origin(p, b, i, o);
        return o != -1;
    }
    sb_puts(b, "from the annotations on");
    for (int32_t k = 0; k < n; k++) {
        sb_puts(b, k == 0 ? " " : k == n - 1 ? " and " : ", ");
        put_origin_where(p, b, seen[k]);
    }
    return true;
}

/* The first leaf of the element of its consumer's tuple result that c's
 * value becomes (0 when it serves the consumer whole). */
static int32_t cause_leaf(Part *p, const Cause *c)
{
    if (c->elem <= 0 || c->inst < 0)
        return 0;
    const Shape *s = part_in(p, c->inst)->shape;
    return shape_is_tuple(s) && c->elem <= s->n_elems ? shape_leaf_offset(s, c->elem - 1, &p->gte_leaves, p->scratch)
                                                      : 0;
}

/* Appends the sharding of element `elem` of tuple-shaped i (its leaves in
 * sh's flat list). */
static void put_elem_sharding(Part *p, StrBuf *b, const HloInst *in, int32_t elem)
{
    const Sharding *sh = in->sharding;
    int32_t off = shape_leaf_offset(in->shape, elem, &p->gte_leaves, p->scratch);
    int32_t n = shape_leaf_count(&in->shape->elems[elem]);
    if (shape_is_array(&in->shape->elems[elem]) && off < sh->n_elems) {
        part_put_sharding(p, b, &sh->elems[off]); /* a stable pointer: its words are memoized */
        return;
    }
    Sharding t = *sh; /* a nested tuple element: its leaves as a tuple of their own */
    t.n_elems = n;
    t.elems = sh->elems + off;
    sharding_describe(b, &t, p->mesh);
}

/* Appends what i's declared sharding is and where it came from: "annotated
 * replicated (line 37)", "[{}, {model}] (from the annotation on a, line
 * 31)", "replicated by default (no annotation splits it)".  elem > 0: of
 * element elem - 1 of tuple-shaped i only. */
static void put_which(Part *p, StrBuf *b, int32_t i, int32_t elem)
{
    const HloInst *in = part_in(p, i);
    if (elem > 0 && (!in->sharding || in->sharding->kind != SHARDING_TUPLE || !shape_is_tuple(in->shape) ||
                     elem > in->shape->n_elems))
        elem = 0;
    if (part_origin(p, i, -1) == i) {
        sb_puts(b, "annotated ");
        if (elem > 0)
            put_elem_sharding(p, b, in, elem - 1);
        else
            part_put_sharding(p, b, in->sharding);
        if (in->span.begin.line) {
            sb_puts(b, " (line ");
            sb_int(b, in->span.begin.line);
            sb_putc(b, ')');
        }
        return;
    }
    if (!p->repl_memo)
        p->repl_memo = ARENA_ARRAY(p->scratch, uint8_t, p->in->comps[p->ic].n_insts);
    if (!p->repl_memo[i])
        p->repl_memo[i] = (uint8_t)(1 + (!in->sharding || sharding_is_replicated(in->sharding)));
    if (p->repl_memo[i] == 2) { /* propagation only passes splits on */
        sb_puts(b, "replicated by default (no annotation splits it)");
        return;
    }
    if (elem > 0)
        put_elem_sharding(p, b, in, elem - 1);
    else
        part_put_sharding(p, b, in->sharding);
    sb_puts(b, " (");
    if (!put_sharding_origin(p, b, i))
        sb_puts(b, "not traced to an annotation");
    sb_putc(b, ')');
}

void part_put_story(Part *p, StrBuf *b, int32_t i)
{
    sb_puts(b, part_in(p, i)->name);
    sb_puts(b, " is ");
    put_which(p, b, i, 0);
}

/* part_put_story of the part of i that cause c's value becomes: "t element
 * {3} is annotated replicated (line 9)" for a tuple's operand, else the
 * whole story of i. */
static void put_cause_story(Part *p, StrBuf *b, const Cause *c)
{
    if (c->elem <= 0) {
        part_put_story(p, b, c->inst);
        return;
    }
    sb_puts(b, part_in(p, c->inst)->name);
    sb_puts(b, " element {");
    sb_int(b, c->elem - 1);
    sb_puts(b, "} is ");
    put_which(p, b, c->inst, c->elem);
}

/* Appends why value v is needed in state want by the consumer c (>= 0):
 * v's own declared sharding when c is v ("y is annotated replicated (line
 * 37)"), else c's ("needed replicated by z, which is [{model}, {}] (from
 * the annotation on a, line 31)"). */
static void put_closing(Part *p, StrBuf *b, int32_t v, const Tiling *want, const Cause *cause)
{
    int32_t c = cause->inst;
    if (c == v) {
        part_put_story(p, b, v);
        return;
    }
    sb_puts(b, "needed ");
    if (tiling_is_replicated(want)) {
        sb_puts(b, "replicated");
    } else {
        sb_puts(b, "as ");
        part_put_tiling(p, b, want);
    }
    sb_puts(b, " by ");
    sb_puts(b, part_in(p, c)->name);
    if (cause->elem > 0) {
        sb_puts(b, " as its element {");
        sb_int(b, cause->elem - 1);
        sb_putc(b, '}');
    }
    sb_puts(b, ", which is ");
    put_which(p, b, c, cause->elem);
}

/* The reason of a reshard the consumer did not explain: "v resharded from F
 * (where F came from, when it is v's declared sharding) to T; <consumer's
 * sharding and where it came from>", written to b (the caller frees it;
 * report_add keeps a copy). */
static const char *default_reason(Part *p, StrBuf *b, int32_t v, const Tiling *from, const Tiling *to,
                                  const Cause *cause)
{
    if (cause->reason)
        return cause->reason;
    sb_puts(b, cause->inst >= 0 ? part_in(p, cause->inst)->name : "result");
    sb_puts(b, ": ");
    sb_puts(b, part_in(p, v)->name);
    sb_puts(b, " resharded from ");
    part_put_tiling(p, b, from);
    Tiling decl;
    part_decl(p, v, 0, &decl);
    if (tiling_equal(from, &decl) && !shape_is_tuple(part_in(p, v)->shape)) {
        StrBuf t = part_buf_take(p);
        if (put_sharding_origin(p, &t, v)) {
            sb_puts(b, " (");
            sb_putn(b, t.data, t.len);
            sb_putc(b, ')');
        }
        else if (tiling_is_replicated(from))
            sb_puts(b, " (replicated by default)");
        part_buf_give(p, &t);
    }
    sb_puts(b, " to ");
    part_put_tiling(p, b, to);
    if (cause->inst >= 0) {
        sb_puts(b, "; ");
        put_cause_story(p, b, cause);
    }
    return sb_cstr(b);
}

/* ================================================================ rematerialization */

/* "dim 0", "dims 0 and 2", "dims 0, 1 and 2". */
static const char *dims_text(Part *p, uint32_t mask)
{
    int32_t n = 0, total = 0;
    for (int32_t d = 0; d < 32; d++)
        total += (mask >> d) & 1u;
    const char *r = total == 1 ? "dim" : "dims";
    for (int32_t d = 0; d < 32; d++) {
        if (!(mask & (1u << d)))
            continue;
        n++;
        r = part_fmt(p, "%s%s%d", r, n == 1 ? " " : n == total ? " and " : ", ", (int)d);
    }
    return r;
}

/* Why op ci cannot keep its operand's split dims `dims` (its handler's
 * limit_dims). */
static const char *limit_text(Part *p, const HloInst *ci, uint32_t dims)
{
    const char *d = dims_text(p, dims), *verb = NULL;
    switch (ci->op) {
    case HLO_SLICE: verb = "slicing"; break;
    case HLO_PAD: verb = "padding"; break;
    case HLO_CONCATENATE: verb = "concatenating along"; break;
    case HLO_REVERSE: verb = "reversing"; break;
    case HLO_SORT: verb = "sorting along"; break;
    case HLO_DYNAMIC_SLICE: verb = "dynamic-slicing"; break;
    case HLO_DYNAMIC_UPDATE_SLICE: verb = "updating a dynamic slice of"; break;
    case HLO_REDUCE_WINDOW: verb = "windowing"; break;
    case HLO_RESHAPE: {
        StrBuf b = {0};
        shape_print(&b, ci->shape, false);
        const char *r = part_fmt(p, "reshaping its split %s to %s is not partitioned yet: the shards are not "
                                 "contiguous pieces of the result", d, sb_cstr(&b));
        sb_free(&b);
        return r;
    }
    case HLO_REDUCE:
        return part_fmt(p, "reducing its split %s is not partitioned yet for this reducer and init value", d);
    case HLO_SCATTER: {
        int32_t comb = hlo_attrs(ci)->to_apply;
        if (reducer_kind(p->in, comb) == REDUCE_NONE && comb >= 0 && comb < p->in->n_comps)
            return part_fmt(p, "its combiner %s is no sum, product, maximum, minimum, and or or, so shares of the "
                            "updates split on %s could not be combined: every device applies all of them, in order",
                            p->in->comps[comb].name, d);
        return part_fmt(p, "scatter along its split %s is not partitioned yet", d);
    }
    default: return part_fmt(p, "%s along its split %s is not partitioned yet", hlo_opcode_name(ci->op), d);
    }
    return part_fmt(p, "%s its split %s is not partitioned yet", verb, d);
}

/* Why leaf `leaf` of value v, split in state `from`, is brought whole to
 * every device (state `want`, nothing split) for the consumer in cause, or
 * NULL when a sharding asked for that:
 *  - v's own sharding is `want` and is the user's (annotated) or the entry
 *    result's: an intended gather;
 *  - the consumer's handler declared a gathered dim as one it cannot keep
 *    split (p->limit_dims): forced, a warning even if the consumer is
 *    annotated replicated (its operand need not have been whole);
 *  - anything else is the partitioner's choice, by the report's cost model,
 *    for a consumer it could have run split: a Sharding custom-call (an
 *    explicit reshard); a consumer whose result is replicated (annotated,
 *    the entry result, or replicated because the annotations around it leave
 *    propagation nothing to split: a weight gradient of batch-split
 *    activations whose update is a replicated output), where gathering the
 *    operands sent fewer bytes than reducing a partial result; a consumer
 *    that stays split itself (a batch-split dot gathering its weight, the
 *    ZeRO pattern).  Those gathers are listed with their causes like every
 *    other collective, but they are the plan, not a fallback. */
static const char *remat_cause(Part *p, int32_t v, int32_t leaf, const Tiling *from, const Tiling *want,
                               const Cause *cause)
{
    int32_t root = p->in->comps[p->ic].root;
    Tiling decl;
    part_decl(p, v, leaf, &decl);
    if (tiling_equal(want, &decl) && (v == root || part_in(p, v)->sharding_from_user))
        return NULL;
    if (cause->inst < 0)
        return "no instruction asked for it";
    const HloInst *ci = part_in(p, cause->inst);
    if (p->limit_dims == PART_LIMIT_ALL)
        return part_fmt(p, "no partitioning rule for this %s yet: it runs at full size on every device",
                        hlo_opcode_name(ci->op));
    uint32_t gathered = 0;
    for (int32_t d = 0; d < from->rank; d++)
        if (tiling_dim_n(from, d) > tiling_dim_n(want, d))
            gathered |= 1u << d;
    if (p->limit_dims & gathered)
        return limit_text(p, ci, p->limit_dims & gathered);
    return NULL;
}

/* The one place that warns "full-rematerialization", when the plan for
 * leaf `leaf` of value v (global shape gs) from `from` to `want`:
 *  - ends with the whole array on every device although `from` was split,
 *    and no sharding asked for that (remat_cause), or
 *  - goes through the whole array to reach a split target (plan->full_remat:
 *    the catalogue cannot reorder the axes of a pending reduction). */
static void check_remat(Part *p, int32_t v, int32_t leaf, const Shape *gs, const Tiling *from, const Tiling *want,
                        const ReshardPlan *plan, const Cause *cause)
{
    if (!p->rep)
        return;
    const char *why = NULL;
    if (plan->full_remat)
        why = part_fmt(p, "its reshard to %s goes through the whole array", part_spec_text(p, want));
    else if (tiling_used(from) != 0 && tiling_used(want) == 0)
        why = remat_cause(p, v, leaf, from, want, cause);
    if (!why)
        return;
    const HloInst *vi = part_in(p, v), *ci = cause->inst >= 0 ? part_in(p, cause->inst) : vi;
    StrBuf b = {0};
    shape_print(&b, gs, false);
    const char *what = shape_is_tuple(vi->shape) ? part_fmt(p, "leaf %d of %s", (int)leaf, vi->name) : vi->name;
    report_warn(p->rep, "full-rematerialization", ci->name, ci->span.begin.line,
                part_fmt(p, "%s: %s split %s is all-gathered to its full size on every device for %s (%s)", what,
                         sb_cstr(&b), part_spec_text(p, from), ci->name, why));
    sb_free(&b);
}

/* Whether some report row of the plan takes its words from the partial's
 * origin (of_origin) or else from the cause: reductions take the origin's
 * when the value has them (have_origin), every other collective the
 * cause's.  Nothing is worded without a report. */
static bool plan_rows(const Part *p, const ReshardPlan *plan, bool of_origin, bool have_origin)
{
    for (int32_t s = 0; p->rep && s < plan->n_steps; s++) {
        StepKind k = plan->steps[s].kind;
        bool origin = have_origin && (k == STEP_ALL_REDUCE || k == STEP_REDUCE_SCATTER);
        if (k != STEP_SLICE && k != STEP_MASK && origin == of_origin)
            return true;
        if (plan->steps[s].halo_bytes > 0 && !of_origin) /* re-chunking collective-permutes */
            return true;
    }
    return false;
}

/* Reshards array value v from its cheapest state to want. */
/* A broadcast of a scalar that is whole on every device is broadcast again,
 * locally, into the tiling a consumer wants: the same elements, no bytes
 * moved (a collective-permute or all-to-all of the broadcast otherwise).
 * Only for even tilings (a shard's padding stays what the handlers expect)
 * outside manual regions.  Returns the new local value, or -1. */
static int32_t rebroadcast(Part *p, int32_t v, const Tiling *want)
{
    const HloInst *in = part_in(p, v);
    if (in->op != HLO_BROADCAST || in->n_operands != 1 || want->partial || p->vals[v].manual ||
        !shape_is_array(in->shape))
        return -1;
    int32_t s = in->operands[0];
    const HloInst *sc = part_in(p, s);
    if (!shape_is_array(sc->shape) || sc->shape->rank != 0 || p->vals[s].manual)
        return -1;
    if (!tiling_is_even(want, p->mesh, in->shape, NULL))
        return -1;
    const VState *whole = NULL;
    for (const VState *st = p->vals[s].states; st && !whole; st = st->next)
        if (!st->leaves[0].partial)
            whole = st;
    if (!whole)
        return -1;
    Shape l = part_local_shape(p, in->shape, want);
    int32_t r = part_clone(p, v, part_result_name(p, v, want, "rebroadcast"), &l, &whole->local, 1);
    add_state(p, v, r, want, -1, NULL);
    return r;
}

static int32_t get_array(Part *p, int32_t v, const Tiling *want, const Cause *cause)
{
    int32_t again = rebroadcast(p, v, want);
    if (again >= 0)
        return again;
    const Shape *gs = part_in(p, v)->shape;
    VState *best = NULL;
    ReshardPlan plans[2];
    ReshardPlan *plan = &plans[0], *tmp = &plans[1];
    for (VState *st = p->vals[v].states; st; st = st->next) {
        if (reshard_plan_memo(p->mod->memo, p->mesh, gs, &st->leaves[0], want, tmp) &&
            (!best || tmp->bytes < plan->bytes)) {
            best = st;
            ReshardPlan *x = plan;
            plan = tmp;
            tmp = x;
        }
    }
    const HloInst *ci = cause->inst >= 0 ? part_in(p, cause->inst) : part_in(p, v);
    if (!best) {
        diag_error(p->cx->diag, ci->span, "%s: cannot bring %s from %s to %s", ci->name, part_in(p, v)->name,
                   part_spec_text(p, &p->vals[v].states->leaves[0]), part_spec_text(p, want));
        return -1;
    }
    StrBuf cb = part_buf_take(p), wb = part_buf_take(p); /* the rows' words (report_add keeps copies) */
    bool own_words = best->origin_reason != NULL;
    Cause c = {cause->inst,
               plan_rows(p, plan, false, own_words) ? default_reason(p, &cb, v, &best->leaves[0], want, cause) : NULL,
               cause->elem};
    check_remat(p, v, 0, gs, &best->leaves[0], want, plan, cause);
    Tiling decl;
    part_decl(p, v, 0, &decl);
    LowerNames nm = {part_in(p, v)->name, &decl, find_state(p, v, &decl) != NULL};
    StepCtx sc = {v, best->origin, best->origin_reason};
    /* a reduction's row: why the value is partial, then who needs it closed */
    const char *why = best->origin_reason;
    if (own_words && cause->inst >= 0 && plan_rows(p, plan, true, true)) {
        sb_puts(&wb, why);
        sb_puts(&wb, "; ");
        put_closing(p, &wb, v, want, cause);
        why = sb_cstr(&wb);
    }
    int32_t first = p->rep ? p->rep->n_records : 0;
    int32_t r = reshard_lower(p, best->local, gs, &best->leaves[0], plan, &nm, &c, best->origin, why, on_step, &sc);
    if (p->rep && p->rep->explain)
        explain_link(p->rep->explain, first, p->rep->n_records, p->ic, p->oc, v, cause->inst, cause->elem,
                     cause_leaf(p, cause), best->origin,
                     &best->leaves[0], want);
    part_buf_give(p, &cb);
    part_buf_give(p, &wb);
    return r;
}

/* Per-device shape of a value of global shape s in state leaves[*k...]. */
static Shape local_tree_shape(Part *p, const Shape *s, const Tiling *leaves, int32_t *k)
{
    if (!shape_is_tuple(s))
        return tiling_local_shape(&leaves[(*k)++], p->mesh, s);
    Shape r = *s;
    r.has_layout = false;
    r.elems = ARENA_ARRAY(p->scratch, Shape, s->n_elems ? s->n_elems : 1);
    for (int32_t e = 0; e < s->n_elems; e++)
        r.elems[e] = local_tree_shape(p, &s->elems[e], leaves, k);
    return r;
}

Shape part_local_shape(Part *p, const Shape *global, const Tiling *leaves)
{
    int32_t k = 0;
    return local_tree_shape(p, global, leaves, &k);
}

/* Reshards a (possibly tuple) local value element-wise; *k walks the leaves. */
static int32_t reshard_tree(Part *p, int32_t v, int32_t local, const Shape *s, const Tiling *from, const Tiling *to,
                            int32_t *k, const Cause *cause, const char *name)
{
    if (!shape_is_tuple(s)) {
        int32_t leaf = (*k)++;
        if (tiling_equal(&from[leaf], &to[leaf]))
            return local;
        ReshardPlan planv, *plan = &planv;
        if (!reshard_plan(p->mesh, s, &from[leaf], &to[leaf], plan)) {
            diag_error(p->cx->diag, part_in(p, v)->span, "%s: cannot reshard leaf %d from %s to %s",
                       part_in(p, v)->name, (int)leaf, part_spec_text(p, &from[leaf]), part_spec_text(p, &to[leaf]));
            return -1;
        }
        check_remat(p, v, leaf, s, &from[leaf], &to[leaf], plan, cause);
        LowerNames nm = {part_in(p, v)->name, NULL, true};
        StrBuf cb = {0};
        Cause c = {cause->inst,
                   plan_rows(p, plan, false, false) ? default_reason(p, &cb, v, &from[leaf], &to[leaf], cause) : NULL,
                   cause->elem};
        int32_t first = p->rep ? p->rep->n_records : 0;
        int32_t r = reshard_lower(p, local, s, &from[leaf], plan, &nm, &c, -1, NULL, NULL, NULL);
        if (p->rep && p->rep->explain)
            explain_link(p->rep->explain, first, p->rep->n_records, p->ic, p->oc, v, cause->inst, cause->elem,
                         cause_leaf(p, cause), -1, &from[leaf],
                         &to[leaf]);
        sb_free(&cb);
        return r;
    }
    int32_t *elems = ARENA_ARRAY(p->scratch, int32_t, s->n_elems ? s->n_elems : 1);
    int32_t kstart = *k; /* this (sub)tuple's first leaf */
    for (int32_t e = 0; e < s->n_elems; e++) {
        int32_t k0 = *k;
        Shape es = local_tree_shape(p, &s->elems[e], from, &k0);
        int32_t g = part_emit(p, HLO_GET_TUPLE_ELEMENT, part_name(p, part_in(p, v)->name, "element"), &es, &local, 1);
        hlo_attrs_mut(p->out, part_out(p, g))->index = e;
        elems[e] = reshard_tree(p, v, g, &s->elems[e], from, to, k, cause, NULL);
        if (elems[e] < 0)
            return -1;
    }
    /* the shape of this level, not of the whole value: a nested tuple is
     * rebuilt from its own leaves */
    Shape ts = local_tree_shape(p, s, to, &kstart);
    if (!name)
        name = part_name(p, part_in(p, v)->name, "tuple");
    return part_emit(p, HLO_TUPLE, name, &ts, elems, s->n_elems);
}

int32_t part_get(Part *p, int32_t v, const Tiling *want, const Cause *cause)
{
    VState *have = find_state(p, v, want);
    if (have)
        return have->local;
    const Shape *gs = part_in(p, v)->shape;
    if (!shape_is_tuple(gs))
        return get_array(p, v, want, cause);
    const VState *src = p->vals[v].states;
    const Tiling *decl = part_decl_leaves(p, v);
    bool is_decl = leaves_equal(want, decl, p->vals[v].n_leaves) && !find_state(p, v, decl);
    int32_t k = 0;
    int32_t r = reshard_tree(p, v, src->local, gs, src->leaves, want, &k, cause, is_decl ? part_in(p, v)->name : NULL);
    if (r >= 0)
        add_state(p, v, r, want, -1, NULL);
    return r;
}

int32_t part_operand(Part *p, int32_t i, int32_t k, const Tiling *want)
{
    Cause c = {i, NULL, part_in(p, i)->op == HLO_TUPLE ? k + 1 : 0};
    return part_get(p, part_in(p, i)->operands[k], want, &c);
}

/* ================================================================ checks */

/* Errors for shardings this version cannot partition (manual, ...). */
static bool check_leaf(Part *p, const HloInst *in, const Sharding *sh, const Shape *ls, const DeclEnt **found)
{
    DiagEngine *d = p->cx->diag;
    if (sh && sh->kind == SHARDING_MANUAL)
        return true; /* per device as written: nothing to check */
    if (sh && sh->kind == SHARDING_MAXIMAL && in->op == HLO_PARAMETER && !p->parent && shape_is_tuple(in->shape)) {
        /* Only that device is given the data: not the same as replicated. */
        diag_error(d, in->span, "%s: a tuple parameter on a single device (maximal sharding, device %lld) is not "
                   "supported yet", in->name, (long long)sh->device);
        return false;
    }
    const DeclEnt *e = ls ? sharding_tiling(p->mod, sh, ls->rank) : NULL;
    if (!e || !e->ok) {
        diag_error(d, in->span, "%s: its sharding does not fit its shape", in->name);
        return false;
    }
    for (int32_t dd = 0; dd < ls->rank; dd++) {
        if (ls->dims[dd] > INT32_MAX && tiling_dim_n(&e->decl, dd) > 0) {
            diag_error(d, in->span, "%s: dimension %d is too large to split (more than 2^31-1 elements)", in->name,
                       (int)dd);
            return false;
        }
    }
    *found = e;
    return true;
}

/* check_leaf on every array leaf of shape s (flat order from leaf *k). */
static bool check_leaves(Part *p, const HloInst *in, const Shape *s, int32_t *k)
{
    const DeclEnt *e;
    if (shape_is_tuple(s)) {
        for (int32_t x = 0; x < s->n_elems; x++)
            if (!check_leaves(p, in, &s->elems[x], k))
                return false;
        return true;
    }
    return check_leaf(p, in, leaf_sharding(in->sharding, (*k)++), s, &e);
}

/* Whether the array shape s split by the canonical tiling t pads nothing
 * (tiling_is_even, or nothing split); the last answers are kept by (t, s):
 * a program's values share few (state, shape) pairs. */
static bool pads_nothing(PartModule *pm, const Tiling *t, const Shape *s)
{
    if (tiling_n_atoms(t) == 0)
        return true;
    int32_t rank = s->rank < SPMDC_MAX_RANK ? s->rank : SPMDC_MAX_RANK;
    EvenEnt *e = &pm->even[((uintptr_t)t >> 4 ^ (uintptr_t)s->dims[0] ^ (uintptr_t)rank) & (PART_EVEN_CACHE - 1)];
    if (e->t == t && e->rank == rank) {
        int32_t d = 0;
        while (d < rank && e->dims[d] == s->dims[d])
            d++;
        if (d >= rank)
            return e->even;
    }
    e->t = t;
    e->rank = rank;
    memcpy(e->dims, s->dims, sizeof e->dims);
    e->even = tiling_is_even(t, pm->mesh, s, NULL);
    return e->even;
}

/* Checks every instruction's sharding against its shape and sets the leaf
 * counts of p->vals. */
static bool check_computation(Part *p)
{
    const HloComputation *e = &p->in->comps[p->ic];
    bool ok = true;
    p->no_pad = ARENA_ARRAY(p->scratch, uint8_t, e->n_insts + 1);
    for (int32_t i = 0; i < e->n_insts; i++) {
        const HloInst *in = &e->insts[i];
        int32_t n = shape_leaf_count(in->shape);
        p->vals[i].n_leaves = n;
        if (in->op == HLO_CUSTOM_CALL ||
            (in->op == HLO_PARAMETER && in->sharding &&
             (in->sharding->kind == SHARDING_MANUAL || in->sharding->kind == SHARDING_TUPLE ||
              in->sharding->manual_atoms)))
            p->manual_sources = true;
        if (in->sharding && in->sharding->kind == SHARDING_TUPLE && in->sharding->n_elems != n) {
            diag_error(p->cx->diag, in->span, "%s: its tuple sharding has %d elements for %d leaves", in->name,
                       (int)in->sharding->n_elems, (int)n);
            ok = false;
            continue;
        }
        const DeclEnt *de = NULL;
        if (!shape_is_tuple(in->shape)) {
            /* the check finds the declared state part_decl_leaves shares (a
             * manual value's is reset once the masks are known) */
            if (!check_leaf(p, in, leaf_sharding(in->sharding, 0), in->shape, &de)) {
                ok = false;
            } else if (de) {
                p->vals[i].decl = de->canon;
                p->no_pad[i] = shape_is_array(in->shape) && pads_nothing(p->mod, de->canon, in->shape);
            }
            continue;
        }
        int32_t k = 0;
        if (!check_leaves(p, in, in->shape, &k))
            ok = false;
    }
    return ok;
}

/* ================================================================ driver */

/* The report's `uneven-padding` warning and padding entry for array leaf
 * `leaf` (shape ls, declared tiling t) of instruction in: the padded dims,
 * and the padding elements and bytes summed over the devices. */
static void padding_warning(Part *p, const HloInst *in, int32_t leaf, const Shape *ls, const Tiling *t)
{
    if (tiling_n_atoms(t) == 0 || tiling_is_even(t, p->mesh, ls, NULL))
        return;
    StrBuf b = {0};
    if (shape_is_tuple(in->shape))
        sb_printf(&b, "leaf %d of ", (int)leaf);
    sb_printf(&b, "%s: ", in->name);
    shape_print(&b, ls, false);
    sb_printf(&b, " split %s pads", part_spec_text(p, t));
    bool first = true;
    for (int32_t d = 0; d < ls->rank; d++) {
        int64_t tiles = tiling_dim_tiles(t, p->mesh, d), c = tiling_shard_size(ls->dims[d], tiles);
        if (ls->dims[d] % tiles == 0)
            continue;
        int64_t last = ls->dims[d] - (ls->dims[d] - 1) / c * c, empty = tiles - halo_ceil_div(ls->dims[d], c);
        sb_printf(&b, "%s dim %d from %lld to %lld (%lld shards of %lld; the last real one holds %lld",
                  first ? "" : ",", (int)d, (long long)ls->dims[d], (long long)(tiles * c), (long long)tiles,
                  (long long)c, (long long)last);
        if (empty > 0)
            sb_printf(&b, ", %lld hold%s only padding", (long long)empty, empty == 1 ? "s" : "");
        sb_putc(&b, ')');
        first = false;
    }
    int64_t elems = tiling_padding_elems(t, p->mesh, ls);
    Shape one = shape_scalar(ls->type);
    int64_t eb = shape_byte_size(&one), most = tiling_max_device_padding(t, p->mesh, ls) * eb;
    sb_printf(&b, ": %lld padding elements (%lld B) over all devices, %lld B on the device with the most",
              (long long)elems, (long long)(elems * eb), (long long)most);
    report_pad(p->rep, in->name, in->span.begin.line, leaf, elems, elems * eb, most);
    report_warn(p->rep, "uneven-padding", in->name, in->span.begin.line, sb_cstr(&b));
    sb_free(&b);
}

static void padding_walk(Part *p, const HloInst *in, const Shape *s, const Tiling *decl, int32_t *k)
{
    if (shape_is_tuple(s)) {
        for (int32_t e = 0; e < s->n_elems; e++)
            padding_walk(p, in, &s->elems[e], decl, k);
        return;
    }
    int32_t leaf = (*k)++;
    if (shape_is_array(s))
        padding_warning(p, in, leaf, s, &decl[leaf]);
}

/* padding_warning for every padded array leaf of instruction i. */
static void padding_warnings(Part *p, int32_t i)
{
    if (!p->rep || p->no_pad[i])
        return;
    int32_t k = 0;
    padding_walk(p, part_in(p, i), part_in(p, i)->shape, part_decl_leaves(p, i), &k);
}

/* Why the root is resharded to what the caller needs, for the report. */
static const char *root_reason(Part *p, int32_t root)
{
    const VState *st = part_primary(p, root);
    if (p->vals[root].n_leaves != 1)
        return NULL;
    /* "r: r is computed as [{x}, {}], but the entry result is replicated by
     * default (no annotation splits it)": the state the root's op left it in,
     * then the state the result must have and why. */
    StrBuf b = {0};
    const char *name = part_in(p, root)->name;
    sb_printf(&b, "%s: %s is computed as ", name, name);
    tiling_describe(&b, &st->leaves[0], p->mesh);
    if (p->parent) {
        const HloInst *ci = part_in(p->parent, p->caller);
        sb_printf(&b, ", but %s needs the result of %s as ", ci->name, p->in->comps[p->ic].name);
        tiling_describe(&b, &p->root_want[0], p->mesh);
    } else {
        sb_puts(&b, ", but the entry result is ");
        put_which(p, &b, root, 0);
    }
    const char *r = arena_strdup(p->scratch, sb_cstr(&b));
    sb_free(&b);
    return r;
}

/* Walks the computation in program order and brings the root to want
 * (leaves; NULL: its declared state). */
static bool partition_body(Part *p, const Tiling *want)
{
    const HloComputation *e = &p->in->comps[p->ic];
    for (int32_t i = 0; i < e->n_insts; i++) {
        /* Operands are often far behind their user (a backward pass reads
         * its layer's forward activations), so their records miss every
         * cache once the computation outgrows it: ask for the records and
         * values of instruction i+16's operands, then the states of i+8's
         * (in the loop itself: GCC drops calls to a function that only
         * prefetches) */
        if (i + 16 < e->n_insts) {
            const HloInst *in = &e->insts[i + 16];
            for (int32_t s = 0; s < in->n_operands && s < 4; s++) {
                int32_t o = in->operands[s];
                if (o >= 0 && o < i + 16) {
                    __builtin_prefetch(&e->insts[o].op);
                    __builtin_prefetch(&e->insts[o].shape);
                    __builtin_prefetch(&p->vals[o]);
                }
            }
        }
        if (i + 8 < e->n_insts) {
            const HloInst *in = &e->insts[i + 8];
            for (int32_t s = 0; s < in->n_operands && s < 4; s++) {
                int32_t o = in->operands[s];
                if (o >= 0 && o < i + 8 && p->vals[o].states)
                    __builtin_prefetch(p->vals[o].states);
            }
        }
        ArenaMark mk = arena_mark(p->tmp);
        padding_warnings(p, i);
        bool ok = part_handle(p, i);
        if (arena_bytes_used(p->tmp) != mk.total) /* many instructions take nothing from it */
            arena_release(p->tmp, mk);
        if (!ok)
            return false;
    }
    if (e->root < 0)
        return true;
    const Tiling *decl = want ? want : part_decl_leaves(p, e->root);
    p->root_want = decl;
    Cause c = {e->root, NULL, 0};
    if (!find_state(p, e->root, decl))
        c.reason = root_reason(p, e->root);
    int32_t r = part_get(p, e->root, decl, &c);
    if (r < 0)
        return false;
    hlo_comp(p->out, p->oc)->root = r;
    return true;
}

void part_param_memory(Part *p, int32_t i, const Shape *local)
{
    if (!p->rep || p->parent)
        return;
    part_param_bytes(p, shape_byte_size(part_in(p, i)->shape), shape_byte_size(local));
}

void part_param_bytes(Part *p, int64_t global, int64_t local)
{
    if (!p->rep || p->parent)
        return;
    p->param_global = bytes_add_sat(p->param_global, global);
    p->param_local = bytes_add_sat(p->param_local, local);
}

/* The entry parameters' bytes (part_param_memory's sums) into the report. */
static void parameter_memory(Part *p)
{
    if (!p->rep)
        return;
    p->rep->parameter_bytes_unpartitioned = bytes_add_sat(p->rep->parameter_bytes_unpartitioned, p->param_global);
    p->rep->parameter_bytes_per_device = bytes_add_sat(p->rep->parameter_bytes_per_device, p->param_local);
}

/* A context for input computation ic inside module context pm. */
static void part_init(Part *p, PartModule *pm, const Part *parent, int32_t caller, int32_t ic)
{
    memset(p, 0, sizeof *p);
    p->mod = pm;
    p->in = pm->in;
    p->out = pm->out;
    p->mesh = pm->mesh;
    p->rep = pm->rep;
    p->cx = pm->cx;
    p->scratch = pm->scratch;
    p->tmp = pm->tmp;
    p->parent = parent;
    p->caller = caller;
    p->ic = ic;
    p->pid = -1;
    p->zero = -1;
    p->trips = 1;
    names_init(&p->names, p->scratch);
    p->vals = ARENA_ARRAY(p->scratch, PVal, pm->in->comps[ic].n_insts + 1);
}

static void part_fini(Part *p)
{
    OffsetEnt *o, *ot;
    HASH_ITER(hh, p->offsets, o, ot) { HASH_DEL(p->offsets, o); }
    TableEnt *t, *tt;
    HASH_ITER(hh, p->tables, t, tt) { HASH_DEL(p->tables, t); }
    part_halo_fini(p);
}

/* Input computations of this many instructions and more get their output's
 * instruction array reserved up front (new_computation). */
#define PART_RESERVE_MIN 64

/* A new output computation for input computation c: its own name the
 * first time, else a ".N" variant. */
static int32_t new_computation(PartModule *pm, int32_t c, bool is_entry)
{
    const char *name = pm->in->comps[c].name;
    if (pm->name_used[c])
        name = names_unique(&pm->comp_names, name, pm->scratch);
    pm->name_used[c] = true;
    int32_t oc = hlo_add_computation(pm->out, name, is_entry);
    HloComputation *dst = hlo_comp(pm->out, oc);
    const HloComputation *src = &pm->in->comps[c];
    dst->span = src->span;
    dst->execution_thread = src->execution_thread ? arena_strdup(pm->out->arena, src->execution_thread) : NULL;
    /* a partitioned computation has about 1.1 to 1.2 times its input's
     * instructions (the collectives and slices added): room for 1.25 times
     * saves the copies of growing by doubling; a small one doubles cheaply */
    if (src->n_insts >= PART_RESERVE_MIN) hlo_reserve_insts(pm->out, oc, src->n_insts + src->n_insts / 4 + 16);
    return oc;
}

/* The name of instruction i of computation ctx (a NameBase's name_at). */
static const char *inst_name_at(const void *ctx, uint32_t i)
{
    return ((const HloComputation *)ctx)->insts[i].name;
}

/* Fills b with the input names of computation ic. */
static void gather_names(NameBase *b, Arena *arena, const HloComputation *ic)
{
    names_base_init(b, arena, (uint32_t)ic->n_insts, inst_name_at, ic);
}

/* Below this many instructions the entry's names are gathered in place. */
#define PART_NAMES_AHEAD_MIN 16384

struct PartNames {
    const HloModule *in;
    int32_t comp;      /* the input computation whose names base holds */
    Arena *arena;      /* base's storage */
    NameBase base;
    bool joined;       /* the thread has ended (or base was taken) */
    pthread_t thread;
};

static void *names_job(void *arg)
{
    PartNames *a = arg;
    gather_names(&a->base, a->arena, &a->in->comps[a->comp]);
    return NULL;
}

PartNames *partition_names_start(const HloModule *in)
{
    if (in->entry < 0 || in->entry >= in->n_comps || in->comps[in->entry].n_insts < PART_NAMES_AHEAD_MIN)
        return NULL;
    PartNames *a = xcalloc(1, sizeof *a);
    a->in = in;
    a->comp = in->entry;
    a->arena = arena_create();
    if (pthread_create(&a->thread, NULL, names_job, a) != 0) {
        arena_destroy(a->arena);
        free(a);
        return NULL;
    }
    return a;
}

static void names_join(PartNames *a)
{
    if (!a->joined)
        pthread_join(a->thread, NULL);
    a->joined = true;
}

void partition_names_free(PartNames *a)
{
    if (!a)
        return;
    names_join(a);
    arena_destroy(a->arena);
    free(a);
}

/* Checks and partitions p's computation into a new output computation. */
static bool run_computation(Part *p, const Tiling *root_want)
{
    if (!check_computation(p) || !part_manual_masks(p))
        return false;
    for (int32_t i = 0; (p->param_manual || p->manual_sources) && i < p->in->comps[p->ic].n_insts; i++)
        if (p->vals[i].manual) {
            p->vals[i].decl = NULL; /* part_decl_leaves strips the manual atoms */
            p->no_pad[i] = 0;
        }
    p->oc = new_computation(p->mod, p->ic, !p->parent);
    PartNames *ahead = p->mod->ahead;
    if (!p->parent && ahead && ahead->in == p->in && ahead->comp == p->ic && p->names.n == 0) {
        names_join(ahead);
        names_set_base(&p->names, &ahead->base); /* its storage stays ahead's, freed after partition_module */
        p->mod->ahead = NULL;
    } else {
        NameBase *base = ARENA_NEW(p->scratch, NameBase);
        gather_names(base, p->scratch, &p->in->comps[p->ic]);
        names_set_base(&p->names, base);
    }
    return partition_body(p, root_want);
}

int32_t part_callee(Part *p, int32_t caller, int32_t c, const Tiling *const *params, int32_t n_params,
                    uint32_t manual, const Tiling *root_want, int64_t trips, bool per_trip)
{
    const HloInst *ci = part_in(p, caller);
    if (c < 0 || c >= p->in->n_comps || c == p->in->entry) {
        diag_error(p->cx->diag, ci->span, "%s: calls no computation it can partition", ci->name);
        return -1;
    }
    int32_t depth = 0;
    for (const Part *q = p; q; q = q->parent, depth++) {
        if (q->ic == c) {
            diag_error(p->cx->diag, ci->span, "%s: computation '%s' calls itself", ci->name, p->in->comps[c].name);
            return -1;
        }
    }
    if (depth >= PART_MAX_NESTING) {
        diag_error(p->cx->diag, ci->span, "%s: loops, branches and calls nest more than %d deep here", ci->name,
                   PART_MAX_NESTING);
        return -1;
    }
    Part child;
    part_init(&child, p->mod, p, caller, c);
    child.param_leaves = params;
    child.n_params = n_params;
    child.param_manual = manual;
    child.trips = p->trips;
    if (trips == 0) /* a loop known to run no trip: its body's collectives never run */
        child.trips = 0;
    else if (trips > 1 && p->trips > 0)
        child.trips = p->trips > INT64_MAX / trips ? INT64_MAX : p->trips * trips;
    child.per_trip = p->per_trip || per_trip;
    bool ok = run_computation(&child, root_want);
    part_fini(&child);
    return ok ? child.oc : -1;
}

bool partition_module(const HloModule *in, HloModule **out, CommReport *rep, PassCtx *cx)
{
    return partition_module_ahead(in, out, rep, cx, NULL);
}

bool partition_module_ahead(const HloModule *in, HloModule **out, CommReport *rep, PassCtx *cx, PartNames *ahead)
{
    *out = NULL;
    if (in->entry < 0 || !in->has_mesh) {
        diag_error(cx->diag, SRC_SPAN_NONE, "%s", in->entry < 0 ? "the module has no entry computation"
                                                                 : "the module has no mesh (bind shardings first)");
        return false;
    }
    PartModule pm;
    memset(&pm, 0, sizeof pm);
    pm.in = in;
    pm.mesh = &in->mesh;
    pm.rep = rep;
    pm.cx = cx;
    pm.scratch = arena_create();
    pm.tmp = arena_create();
    pm.next_channel = 1;
    pm.ahead = ahead;
    int64_t n_insts = 0;
    for (int32_t c = 0; c < in->n_comps; c++) n_insts += in->comps[c].n_insts;
    pm.memo = reshard_memo_new(pm.scratch, n_insts);
    memset(pm.reducers, 0xff, sizeof pm.reducers);
    pm.out = hlo_module_new(in->name);
    pm.out->mesh = in->mesh;
    pm.out->has_mesh = true;
    pm.out->num_partitions = in->mesh.n_devices;
    pm.out->replica_count = in->replica_count;
    pm.comp_map = ARENA_ARRAY(pm.scratch, int32_t, in->n_comps + 1);
    pm.name_used = ARENA_ARRAY(pm.scratch, bool, in->n_comps + 1);
    names_init(&pm.comp_names, pm.scratch);
    for (int32_t c = 0; c < in->n_comps; c++)
        names_add(&pm.comp_names, in->comps[c].name);
    copy_applied(&pm);
    Part p;
    part_init(&p, &pm, NULL, -1, in->entry);
    bool ok = run_computation(&p, NULL);
    if (ok) {
        pm.out->entry = p.oc;
        parameter_memory(&p);
        order_callee_first(&pm);
        *out = pm.out;
    } else {
        hlo_module_free(pm.out);
    }
    part_fini(&p);
    for (int32_t k = 0; k < pm.n_bufs; k++)
        sb_free(&pm.bufs[k]);
    arena_destroy(pm.tmp);
    intern_free(&pm.canon);
    arena_destroy(pm.scratch);
    return ok;
}
