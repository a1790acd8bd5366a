/* interp.c - the reference interpreter: values, the per-device evaluation
 * loop, leaves, elementwise ops, data movement and control flow.
 *
 * A computation runs over an env array (one SimValue per instruction, in
 * program order); a value is released right after its last user (the
 * per-computation last_use table, computed once), so peak memory is the
 * live set.  Buffers are shared by reshape, bitcast, copy, get-tuple-element,
 * tuple and opt-barrier and never written once shared: every op that writes
 * allocates its result.  Ops with their own index math (dot, convolution,
 * reduce, gather, scatter, sort, ...) live in interp_ops.c; collectives in
 * sim.c (the interpreter alone runs them only for a single device).
 * Errors name the instruction ("NAME: ...") at its span and return false.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

#define MAX_CALL_DEPTH 64

struct SimBuffer {
    int64_t refs;
    size_t bytes;
    uint64_t data[]; /* 8-byte aligned elements */
};

/* ---------------------------------------------------------------- values */

/* Elements of an array shape; a count above int64 cannot be allocated (out of memory). */
static int64_t elem_count(const Shape *s)
{
    int64_t n = 1;
    for (int32_t d = 0; d < s->rank; d++)
        if (__builtin_mul_overflow(n, s->dims[d], &n)) spmdc_oom();
    return n;
}

SimValue sim_value_new(const Shape *s)
{
    SimValue v;
    memset(&v, 0, sizeof v);
    v.shape.type = s->type;
    v.shape.rank = s->rank;
    for (int32_t d = 0; d < s->rank && d < SPMDC_MAX_RANK; d++) v.shape.dims[d] = s->dims[d];
    int es = num_elem_bytes(s->type);
    int64_t nbytes = 0;
    if (es > 0 && __builtin_mul_overflow(elem_count(s), (int64_t)es, &nbytes)) spmdc_oom(); /* no such buffer fits */
    size_t bytes = (size_t)nbytes;
    if (bytes) {
        v.buf = xcalloc(1, sizeof(SimBuffer) + bytes);
        v.buf->refs = 1;
        v.buf->bytes = bytes;
    }
    return v;
}

SimValue interp_new_like(const Shape *s) { return sim_value_new(s); }

SimValue sim_value_tuple(int32_t n)
{
    SimValue v;
    memset(&v, 0, sizeof v);
    v.shape.type = ET_TUPLE;
    v.shape.n_elems = n;
    if (n) v.elems = xcalloc((size_t)n, sizeof(SimValue));
    return v;
}

void sim_value_release(SimValue *v)
{
    if (v->shape.type == ET_TUPLE) {
        for (int32_t k = 0; k < v->shape.n_elems; k++) sim_value_release(&v->elems[k]);
        free(v->elems);
    } else if (v->buf && --v->buf->refs == 0) {
        free(v->buf);
    }
    memset(v, 0, sizeof *v);
}

SimValue sim_value_share(const SimValue *v)
{
    SimValue r = *v;
    if (v->shape.type == ET_TUPLE) {
        r.elems = v->shape.n_elems ? xcalloc((size_t)v->shape.n_elems, sizeof(SimValue)) : NULL;
        for (int32_t k = 0; k < v->shape.n_elems; k++) r.elems[k] = sim_value_share(&v->elems[k]);
    } else if (v->buf) {
        v->buf->refs++;
    }
    return r;
}

SimValue sim_value_clone(const SimValue *v)
{
    if (v->shape.type == ET_TUPLE) {
        SimValue r = sim_value_tuple(v->shape.n_elems);
        for (int32_t k = 0; k < v->shape.n_elems; k++) r.elems[k] = sim_value_clone(&v->elems[k]);
        return r;
    }
    SimValue r = sim_value_new(&v->shape);
    if (v->buf && r.buf) memcpy(r.buf->data, v->buf->data, r.buf->bytes);
    return r;
}

void *sim_value_data(const SimValue *v) { return v->buf ? (void *)v->buf->data : NULL; }
int sim_elem_bytes(ElemType t) { return num_elem_bytes(t); }
double sim_value_get_f64(const SimValue *v, int64_t i) { return num_get_f(v->shape.type, sim_value_data(v), i); }
int64_t sim_value_get_i64(const SimValue *v, int64_t i) { return num_get_i(v->shape.type, sim_value_data(v), i); }
void sim_value_set_f64(SimValue *v, int64_t i, double x) { num_set_f(v->shape.type, sim_value_data(v), i, x); }
void sim_value_set_i64(SimValue *v, int64_t i, int64_t x) { num_set_i(v->shape.type, sim_value_data(v), i, x); }

static int32_t value_leaves(const SimValue *v)
{
    if (v->shape.type != ET_TUPLE) return 1;
    int32_t n = 0;
    for (int32_t k = 0; k < v->shape.n_elems; k++) n += value_leaves(&v->elems[k]);
    return n;
}

const SimValue *sim_value_leaf(const SimValue *v, int32_t k)
{
    if (v->shape.type != ET_TUPLE) return k == 0 ? v : NULL;
    for (int32_t e = 0; e < v->shape.n_elems; e++) {
        int32_t n = value_leaves(&v->elems[e]);
        if (k < n) return sim_value_leaf(&v->elems[e], k);
        k -= n;
    }
    return NULL;
}

static int32_t flatten(const SimValue *v, const SimValue **out, int32_t cap, int32_t n)
{
    if (v->shape.type != ET_TUPLE) {
        if (n < cap) out[n] = v;
        return n + 1;
    }
    for (int32_t e = 0; e < v->shape.n_elems; e++) n = flatten(&v->elems[e], out, cap, n);
    return n;
}

int32_t sim_value_leaves(const SimValue *v, const SimValue **out, int32_t cap)
{
    return flatten(v, out, cap, 0);
}

static void print_elem(StrBuf *b, const SimValue *v, int64_t i)
{
    ElemType t = v->shape.type;
    if (t == ET_PRED)
        sb_puts(b, sim_value_get_i64(v, i) ? "true" : "false");
    else if (num_is_float(t))
        sb_printf(b, t == ET_F64 ? "%.17g" : "%.9g", sim_value_get_f64(v, i));
    else if (t == ET_U64)
        sb_printf(b, "%llu", (unsigned long long)sim_value_get_i64(v, i));
    else
        sb_printf(b, "%lld", (long long)sim_value_get_i64(v, i));
}

static void print_dims(StrBuf *b, const SimValue *v, int32_t d, int64_t *pos)
{
    if (d == v->shape.rank) {
        print_elem(b, v, (*pos)++);
        return;
    }
    sb_putc(b, '{');
    for (int64_t k = 0; k < v->shape.dims[d]; k++) {
        if (k) sb_puts(b, ", ");
        print_dims(b, v, d + 1, pos);
    }
    sb_putc(b, '}');
}

void sim_value_print(StrBuf *b, const SimValue *v)
{
    if (v->shape.type == ET_TUPLE) {
        sb_putc(b, '(');
        for (int32_t k = 0; k < v->shape.n_elems; k++) {
            if (k) sb_puts(b, ", ");
            sim_value_print(b, &v->elems[k]);
        }
        sb_putc(b, ')');
        return;
    }
    if (v->shape.type == ET_TOKEN) {
        sb_puts(b, "token");
        return;
    }
    int64_t pos = 0;
    print_dims(b, v, 0, &pos);
}

SimValue interp_scalar_from(const SimValue *v, int64_t k)
{
    Shape s = shape_scalar(v->shape.type);
    SimValue r = sim_value_new(&s);
    int es = num_elem_bytes(v->shape.type);
    if (es > 0) memcpy(sim_value_data(&r), (const char *)sim_value_data(v) + k * es, (size_t)es);
    return r;
}

bool interp_shape_matches(const SimValue *v, const Shape *s)
{
    if (s->type == ET_TUPLE) {
        if (v->shape.type != ET_TUPLE || v->shape.n_elems != s->n_elems) return false;
        for (int32_t k = 0; k < s->n_elems; k++)
            if (!interp_shape_matches(&v->elems[k], &s->elems[k])) return false;
        return true;
    }
    if (v->shape.type != s->type || v->shape.rank != s->rank) return false;
    for (int32_t d = 0; d < s->rank; d++)
        if (v->shape.dims[d] != s->dims[d]) return false;
    return true;
}

/* ---------------------------------------------------------------- module facts */

void interp_shared_init(InterpShared *sh, const HloModule *m, DiagEngine *diag, int64_t n_partitions,
                        int64_t n_replicas)
{
    memset(sh, 0, sizeof *sh);
    sh->m = m;
    sh->diag = diag;
    sh->comps = xcalloc((size_t)(m->n_comps ? m->n_comps : 1), sizeof(InterpCompInfo));
    sh->n_partitions = n_partitions;
    sh->n_replicas = n_replicas;
    sh->work_limit = SIM_WORK_LIMIT;
}

void interp_shared_free(InterpShared *sh)
{
    if (!sh->comps) return;
    for (int32_t c = 0; c < sh->m->n_comps; c++) free(sh->comps[c].last_use);
    free(sh->comps);
    sh->comps = NULL;
}

/* Calls fn for every computation inst calls. */
static void called_comps(const HloInst *inst, int32_t *out, int32_t *n)
{
    const HloAttrs *a = hlo_attrs(inst);
    *n = 0;
    if (a->to_apply >= 0) out[(*n)++] = a->to_apply;
    if (a->select >= 0) out[(*n)++] = a->select;
    if (a->condition >= 0) out[(*n)++] = a->condition;
    if (a->body >= 0) out[(*n)++] = a->body;
}

static bool compute_has_collective(InterpShared *sh, int32_t c, uint8_t *state)
{
    if (state[c]) return state[c] == 2;
    state[c] = 1; /* visiting: a cycle counts as no collective (the call depth guard stops it) */
    const HloComputation *comp = hlo_comp(sh->m, c);
    bool has = false;
    for (int32_t i = 0; i < comp->n_insts && !has; i++) {
        const HloInst *inst = &comp->insts[i];
        if (sim_is_lockstep(inst)) has = true;
        int32_t cs[4], n;
        called_comps(inst, cs, &n);
        for (int32_t k = 0; k < n && !has; k++)
            if (cs[k] < sh->m->n_comps && compute_has_collective(sh, cs[k], state)) has = true;
        const HloAttrs *a = hlo_attrs(inst);
        for (int32_t k = 0; k < a->branches.n && !has; k++)
            if (a->branches.v[k] >= 0 && a->branches.v[k] < sh->m->n_comps &&
                compute_has_collective(sh, (int32_t)a->branches.v[k], state))
                has = true;
    }
    state[c] = has ? 2 : 3;
    return has;
}

/* root = op(param 0, param 1) on two scalar parameters of one type. */
static HloOpcode detect_binop(const HloComputation *comp)
{
    if (comp->root < 0) return HLO_OPCODE_COUNT;
    const HloInst *r = &comp->insts[comp->root];
    if (hlo_opcode_category(r->op) != 'B' || r->op == HLO_COMPLEX || r->n_operands != 2) return HLO_OPCODE_COUNT;
    const HloInst *a = &comp->insts[r->operands[0]], *b = &comp->insts[r->operands[1]];
    if (a->op != HLO_PARAMETER || b->op != HLO_PARAMETER) return HLO_OPCODE_COUNT;
    int64_t pa = a->param_number, pb = b->param_number;
    bool commutes = r->op == HLO_ADD || r->op == HLO_MULTIPLY || r->op == HLO_MAXIMUM || r->op == HLO_MINIMUM ||
                    r->op == HLO_AND || r->op == HLO_OR || r->op == HLO_XOR;
    if (!(pa == 0 && pb == 1) && !(commutes && pa == 1 && pb == 0)) return HLO_OPCODE_COUNT;
    if (a->shape->rank != 0 || b->shape->rank != 0 || a->shape->type != b->shape->type) return HLO_OPCODE_COUNT;
    if (r->op != HLO_COMPARE && r->shape->type != a->shape->type) return HLO_OPCODE_COUNT;
    return r->op;
}

const InterpCompInfo *interp_comp_info(InterpShared *sh, int32_t c)
{
    InterpCompInfo *ci = &sh->comps[c];
    if (ci->ready) return ci;
    const HloComputation *comp = hlo_comp(sh->m, c);
    ci->last_use = xmalloc(sizeof(int32_t) * (size_t)(comp->n_insts ? comp->n_insts : 1));
    for (int32_t i = 0; i < comp->n_insts; i++) {
        ci->last_use[i] = i;
        for (int32_t k = 0; k < comp->insts[i].n_operands; k++) {
            int32_t o = comp->insts[i].operands[k];
            if (o >= 0 && o < i) ci->last_use[o] = i;
        }
    }
    if (comp->root >= 0) ci->last_use[comp->root] = comp->n_insts;
    uint8_t *state = xcalloc((size_t)sh->m->n_comps, 1);
    ci->has_collective = compute_has_collective(sh, c, state);
    free(state);
    ci->binop = detect_binop(comp);
    ci->ready = true;
    return ci;
}

bool interp_error(const Interp *ip, const HloInst *inst, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    diag_error(ip->sh->diag, inst->span, "%s: %s", inst->name, msg);
    return false;
}

/* ---------------------------------------------------------------- leaves */

static bool literal_to_value(const Interp *ip, const HloInst *inst, const Literal *lit, const Shape *s, SimValue *out)
{
    if (s->type == ET_TUPLE) {
        if (lit->n_elems != s->n_elems) return interp_error(ip, inst, "tuple literal has %d elements, shape %d", lit->n_elems, s->n_elems);
        *out = sim_value_tuple(s->n_elems);
        for (int32_t k = 0; k < s->n_elems; k++)
            if (!literal_to_value(ip, inst, &lit->elems[k], &s->elems[k], &out->elems[k])) return false;
        return true;
    }
    *out = sim_value_new(s);
    int64_t n = elem_count(s);
    if (lit->elided || s->type == ET_TOKEN) return true;
    if (lit->n != n) return interp_error(ip, inst, "literal has %lld values, shape needs %lld", (long long)lit->n, (long long)n);
    void *d = sim_value_data(out);
    for (int64_t k = 0; k < n; k++) {
        if (num_is_float(s->type))
            num_set_f(s->type, d, k, lit->f ? lit->f[k] : lit->i ? (double)lit->i[k] : 0);
        else
            num_set_i(s->type, d, k, lit->i ? lit->i[k] : lit->f ? num_f2i(s->type, lit->f[k]) : 0);
    }
    return true;
}

static bool eval_iota(const Interp *ip, const HloInst *inst, SimValue *out)
{
    int64_t dim = hlo_attrs(inst)->iota_dimension;
    const Shape *s = inst->shape;
    if (dim < 0 || dim >= s->rank) return interp_error(ip, inst, "iota_dimension %lld out of range", (long long)dim);
    *out = sim_value_new(s);
    int64_t st[SPMDC_MAX_RANK];
    num_strides(s->dims, s->rank, st);
    int64_t n = elem_count(s);
    void *d = sim_value_data(out);
    for (int64_t k = 0; k < n; k++) {
        int64_t v = (k / st[dim]) % s->dims[dim];
        if (num_is_float(s->type))
            num_set_f(s->type, d, k, (double)v);
        else
            num_set_i(s->type, d, k, v);
    }
    return true;
}

static SimValue scalar_u32(int64_t v)
{
    Shape s = shape_scalar(ET_U32);
    SimValue r = sim_value_new(&s);
    num_set_i(ET_U32, sim_value_data(&r), 0, v);
    return r;
}

/* ---------------------------------------------------------------- elementwise */

static bool same_count(const Interp *ip, const HloInst *inst, const SimValue *v)
{
    if (v->shape.type == ET_TUPLE || elem_count(&v->shape) != elem_count(inst->shape))
        return interp_error(ip, inst, "operand has %lld elements, result %lld", (long long)elem_count(&v->shape),
                            (long long)elem_count(inst->shape));
    return true;
}

/* A full-size copy of v (a scalar is broadcast) for select/clamp. */
static SimValue expand_scalar(const SimValue *v, const Shape *s)
{
    if (v->shape.rank != 0 || s->rank == 0) return sim_value_share(v);
    Shape t = *s;
    t.type = v->shape.type;
    SimValue r = sim_value_new(&t);
    num_fill(sim_value_data(&r), elem_count(&t), sim_value_data(v), num_elem_bytes(t.type));
    return r;
}

/* bitcast-convert between element types of different widths (u32[8,2] ->
 * u64[8]): XLA reinterprets the bytes on a little-endian host, so the
 * row-major buffers are the same bytes. */
static bool eval_bitcast_resize(const Interp *ip, const HloInst *inst, const SimValue *a, SimValue *out)
{
    ElemType t = a->shape.type, rt = inst->shape->type;
    if (elem_type_bits(t) < 8 || elem_type_bits(rt) < 8 || shape_byte_size(&a->shape) != shape_byte_size(inst->shape))
        return interp_error(ip, inst, "bitcast-convert from %s to %s does not keep the byte size", elem_type_name(t),
                            elem_type_name(rt));
    *out = sim_value_new(inst->shape);
    if (out->buf) memcpy(sim_value_data(out), sim_value_data(a), out->buf->bytes);
    return true;
}

static bool eval_unary(const Interp *ip, const HloInst *inst, const SimValue *a, SimValue *out)
{
    if (inst->op == HLO_BITCAST_CONVERT && elem_type_bits(a->shape.type) != elem_type_bits(inst->shape->type))
        return eval_bitcast_resize(ip, inst, a, out);
    /* copy takes any shape, a tuple too (the verifier checked it keeps the shape); it shares the buffers */
    if (inst->op == HLO_COPY) {
        *out = sim_value_share(a);
        return true;
    }
    if (!same_count(ip, inst, a)) return false;
    ElemType t = a->shape.type, rt = inst->shape->type;
    if (inst->op == HLO_CONVERT || inst->op == HLO_BITCAST_CONVERT) {
        *out = sim_value_new(inst->shape);
        if (inst->op == HLO_CONVERT) {
            num_convert(t, sim_value_data(a), rt, sim_value_data(out), elem_count(inst->shape));
            return true;
        }
        if (elem_type_bits(t) != elem_type_bits(rt) || elem_type_bits(t) < 8)
            return interp_error(ip, inst, "bitcast-convert from %s to %s changes the element size", elem_type_name(t),
                                elem_type_name(rt));
        if (out->buf) memcpy(sim_value_data(out), sim_value_data(a), out->buf->bytes);
        return true;
    }
    *out = sim_value_new(inst->shape);
    if (inst->op == HLO_REDUCE_PRECISION) {
        const HloAttrs *at = hlo_attrs(inst);
        if (!num_reduce_precision(t, sim_value_data(a), sim_value_data(out), elem_count(inst->shape),
                                  at->exponent_bits, at->mantissa_bits))
            return interp_error(ip, inst, "reduce-precision is not defined on %s", elem_type_name(t));
        return true;
    }
    if (!num_unary(inst->op, t, sim_value_data(a), rt, sim_value_data(out), elem_count(inst->shape)))
        return interp_error(ip, inst, "%s is not defined on %s", hlo_opcode_name(inst->op), elem_type_name(t));
    return true;
}

static bool eval_binary(const Interp *ip, const HloInst *inst, const SimValue *a, const SimValue *b, SimValue *out)
{
    if (!same_count(ip, inst, a) || !same_count(ip, inst, b)) return false;
    ElemType t = a->shape.type;
    if (b->shape.type != t)
        return interp_error(ip, inst, "operand types %s and %s differ", elem_type_name(t), elem_type_name(b->shape.type));
    *out = sim_value_new(inst->shape);
    int64_t n = elem_count(inst->shape);
    if (inst->op == HLO_COMPARE) {
        const char *ct = hlo_attrs(inst)->compare_type;
        bool total = ct && strcmp(ct, "TOTALORDER") == 0;
        num_compare(hlo_attrs(inst)->direction, total, t, sim_value_data(a), sim_value_data(b), sim_value_data(out), n);
        return true;
    }
    if (inst->op == HLO_COMPLEX || !num_binary(inst->op, t, sim_value_data(a), sim_value_data(b), sim_value_data(out), n))
        return interp_error(ip, inst, "%s is not defined on %s", hlo_opcode_name(inst->op), elem_type_name(t));
    return true;
}

static bool eval_select(const Interp *ip, const HloInst *inst, const SimValue *ops, SimValue *out)
{
    for (int k = 1; k < 3; k++)
        if (!same_count(ip, inst, &ops[k])) return false;
    if (ops[0].shape.rank != 0 && !same_count(ip, inst, &ops[0])) return false;
    int64_t n = elem_count(inst->shape);
    int es = num_elem_bytes(inst->shape->type);
    *out = sim_value_new(inst->shape);
    const uint8_t *p = sim_value_data(&ops[0]);
    const char *t = sim_value_data(&ops[1]), *f = sim_value_data(&ops[2]);
    char *r = sim_value_data(out);
    bool scalar = ops[0].shape.rank == 0;
    for (int64_t k = 0; k < n; k++) memcpy(r + k * es, (p[scalar ? 0 : k] ? t : f) + k * es, (size_t)es);
    return true;
}

static bool eval_clamp(const Interp *ip, const HloInst *inst, const SimValue *ops, SimValue *out)
{
    if (!same_count(ip, inst, &ops[1])) return false;
    for (int k = 0; k < 3; k += 2)
        if (ops[k].shape.rank != 0 && !same_count(ip, inst, &ops[k])) return false;
    SimValue lo = expand_scalar(&ops[0], inst->shape), hi = expand_scalar(&ops[2], inst->shape);
    ElemType t = inst->shape->type;
    int64_t n = elem_count(inst->shape);
    *out = sim_value_new(inst->shape);
    bool ok = num_binary(HLO_MAXIMUM, t, sim_value_data(&ops[1]), sim_value_data(&lo), sim_value_data(out), n) &&
              num_binary(HLO_MINIMUM, t, sim_value_data(out), sim_value_data(&hi), sim_value_data(out), n);
    sim_value_release(&lo);
    sim_value_release(&hi);
    return ok || interp_error(ip, inst, "clamp is not defined on %s", elem_type_name(t));
}

/* ---------------------------------------------------------------- data movement */

static bool eval_broadcast(const Interp *ip, const HloInst *inst, const SimValue *a, SimValue *out)
{
    const IntList *dims = &hlo_attrs(inst)->dimensions;
    const Shape *s = inst->shape;
    if (dims->n != a->shape.rank) return interp_error(ip, inst, "dimensions has %d entries, operand rank %d", dims->n, a->shape.rank);
    int64_t in_st[SPMDC_MAX_RANK], src[SPMDC_MAX_RANK] = {0}, dst[SPMDC_MAX_RANK];
    num_strides(a->shape.dims, a->shape.rank, in_st);
    num_strides(s->dims, s->rank, dst);
    for (int32_t k = 0; k < dims->n; k++) {
        int64_t d = dims->v[k];
        if (d < 0 || d >= s->rank || s->dims[d] != a->shape.dims[k])
            return interp_error(ip, inst, "broadcast dimension %d does not fit", k);
        src[d] = in_st[k];
    }
    *out = sim_value_new(s);
    num_copy_box(sim_value_data(out), 0, dst, sim_value_data(a), 0, src, s->dims, s->rank, num_elem_bytes(s->type));
    return true;
}

static bool eval_reshape(const Interp *ip, const HloInst *inst, const SimValue *a, SimValue *out)
{
    if (!same_count(ip, inst, a)) return false;
    if (a->shape.type != inst->shape->type) {
        if (inst->op != HLO_BITCAST) return interp_error(ip, inst, "reshape changes the element type");
        if (num_elem_bytes(a->shape.type) != num_elem_bytes(inst->shape->type))
            return interp_error(ip, inst, "bitcast changes the element size");
    }
    *out = sim_value_share(a);
    memset(&out->shape, 0, sizeof out->shape);
    out->shape.type = inst->shape->type;
    out->shape.rank = inst->shape->rank;
    for (int32_t d = 0; d < inst->shape->rank; d++) out->shape.dims[d] = inst->shape->dims[d];
    return true;
}

static bool eval_transpose(const Interp *ip, const HloInst *inst, const SimValue *a, SimValue *out)
{
    const IntList *perm = &hlo_attrs(inst)->dimensions;
    const Shape *s = inst->shape;
    if (perm->n != s->rank || a->shape.rank != s->rank) return interp_error(ip, inst, "bad transpose permutation");
    int64_t in_st[SPMDC_MAX_RANK], src[SPMDC_MAX_RANK], dst[SPMDC_MAX_RANK];
    num_strides(a->shape.dims, a->shape.rank, in_st);
    num_strides(s->dims, s->rank, dst);
    for (int32_t k = 0; k < s->rank; k++) {
        int64_t p = perm->v[k];
        if (p < 0 || p >= s->rank || a->shape.dims[p] != s->dims[k]) return interp_error(ip, inst, "bad transpose permutation");
        src[k] = in_st[p];
    }
    *out = sim_value_new(s);
    num_copy_box(sim_value_data(out), 0, dst, sim_value_data(a), 0, src, s->dims, s->rank, num_elem_bytes(s->type));
    return true;
}

static bool eval_slice(const Interp *ip, const HloInst *inst, const SimValue *a, SimValue *out)
{
    const HloAttrs *at = hlo_attrs(inst);
    const Shape *s = inst->shape;
    int32_t r = a->shape.rank;
    if (at->slice_start.n != r || at->slice_limit.n != r || s->rank != r) return interp_error(ip, inst, "bad slice attribute");
    int64_t in_st[SPMDC_MAX_RANK], src[SPMDC_MAX_RANK], dst[SPMDC_MAX_RANK], off = 0;
    num_strides(a->shape.dims, r, in_st);
    num_strides(s->dims, r, dst);
    for (int32_t d = 0; d < r; d++) {
        int64_t lo = at->slice_start.v[d], hi = at->slice_limit.v[d];
        int64_t st = at->slice_stride.n == r ? at->slice_stride.v[d] : 1;
        if (st < 1 || lo < 0 || hi > a->shape.dims[d] || (hi > lo ? (hi - lo - 1) / st + 1 : 0) != s->dims[d])
            return interp_error(ip, inst, "slice of dimension %d does not fit the operand", d);
        off += lo * in_st[d];
        /* a stride only matters between two elements, and then st < dims[d]: no overflow */
        src[d] = s->dims[d] > 1 ? in_st[d] * st : 0;
    }
    *out = sim_value_new(s);
    num_copy_box(sim_value_data(out), 0, dst, sim_value_data(a), off, src, s->dims, r, num_elem_bytes(s->type));
    return true;
}

/* Start indices of dynamic-(update-)slice: scalars ops[first..first+rank), or
 * one rank-1 vector (legacy form); each clamped to [0, dim - size]. */
static bool dyn_starts(const Interp *ip, const HloInst *inst, const SimValue *ops, int32_t n_ops, int32_t first,
                       const Shape *base, const int64_t *sizes, int64_t *starts)
{
    int32_t r = base->rank;
    bool vec = n_ops == first + 1 && ops[first].shape.rank == 1 && ops[first].shape.dims[0] == r && r != 1;
    if (!vec && n_ops != first + r) return interp_error(ip, inst, "expected %d start indices, got %d", r, n_ops - first);
    for (int32_t d = 0; d < r; d++) {
        const SimValue *iv = vec ? &ops[first] : &ops[first + d];
        if (!elem_type_is_integral(iv->shape.type) || (!vec && iv->shape.rank != 0))
            return interp_error(ip, inst, "start index %d is not an integer scalar", d);
        int64_t v = num_get_i(iv->shape.type, sim_value_data(iv), vec ? d : 0);
        if (iv->shape.type == ET_U64 && v < 0) v = INT64_MAX;
        int64_t hi = base->dims[d] - sizes[d];
        if (hi < 0) return interp_error(ip, inst, "slice size %lld exceeds dimension %d", (long long)sizes[d], d);
        starts[d] = v < 0 ? 0 : v > hi ? hi : v;
    }
    return true;
}

static bool eval_dynamic_slice(const Interp *ip, const HloInst *inst, const SimValue *ops, SimValue *out)
{
    const Shape *s = inst->shape, *in = &ops[0].shape;
    if (s->rank != in->rank || s->type != in->type) return interp_error(ip, inst, "result does not fit the operand");
    int64_t starts[SPMDC_MAX_RANK], in_st[SPMDC_MAX_RANK], dst[SPMDC_MAX_RANK], off = 0;
    if (!dyn_starts(ip, inst, ops, inst->n_operands, 1, in, s->dims, starts)) return false;
    num_strides(in->dims, in->rank, in_st);
    num_strides(s->dims, s->rank, dst);
    for (int32_t d = 0; d < s->rank; d++) off += starts[d] * in_st[d];
    *out = sim_value_new(s);
    num_copy_box(sim_value_data(out), 0, dst, sim_value_data(&ops[0]), off, in_st, s->dims, s->rank,
                 num_elem_bytes(s->type));
    return true;
}

static bool eval_dynamic_update_slice(const Interp *ip, const HloInst *inst, const SimValue *ops, SimValue *out)
{
    const Shape *in = &ops[0].shape, *up = &ops[1].shape;
    if (up->rank != in->rank || up->type != in->type || !interp_shape_matches(&ops[0], inst->shape))
        return interp_error(ip, inst, "update does not fit the operand");
    int64_t starts[SPMDC_MAX_RANK], in_st[SPMDC_MAX_RANK], up_st[SPMDC_MAX_RANK], off = 0;
    if (!dyn_starts(ip, inst, ops, inst->n_operands, 2, in, up->dims, starts)) return false;
    num_strides(in->dims, in->rank, in_st);
    num_strides(up->dims, up->rank, up_st);
    for (int32_t d = 0; d < in->rank; d++) off += starts[d] * in_st[d];
    *out = sim_value_clone(&ops[0]);
    num_copy_box(sim_value_data(out), off, in_st, sim_value_data(&ops[1]), 0, up_st, up->dims, up->rank,
                 num_elem_bytes(in->type));
    return true;
}

static bool eval_pad(const Interp *ip, const HloInst *inst, const SimValue *ops, SimValue *out)
{
    const HloAttrs *at = hlo_attrs(inst);
    const Shape *s = inst->shape, *in = &ops[0].shape;
    int32_t r = in->rank;
    if (at->pad_lo.n != r || at->pad_hi.n != r || s->rank != r || ops[1].shape.rank != 0 || ops[1].shape.type != in->type)
        return interp_error(ip, inst, "bad padding attribute");
    int es = num_elem_bytes(s->type);
    *out = sim_value_new(s);
    num_fill(sim_value_data(out), elem_count(s), sim_value_data(&ops[1]), es);
    int64_t in_st[SPMDC_MAX_RANK], out_st[SPMDC_MAX_RANK], src[SPMDC_MAX_RANK], dst[SPMDC_MAX_RANK], box[SPMDC_MAX_RANK];
    int64_t soff = 0, doff = 0;
    num_strides(in->dims, r, in_st);
    num_strides(s->dims, r, out_st);
    for (int32_t d = 0; d < r; d++) {
        int64_t lo = at->pad_lo.v[d], hi = at->pad_hi.v[d], n = in->dims[d];
        int64_t interior = at->pad_interior.n == r ? at->pad_interior.v[d] : 0, step = interior + 1;
        /* edges may be near the int64 limits: the index arithmetic is done in 128 bits */
        SimWide size = (SimWide)lo + hi + (n ? n + (SimWide)(n - 1) * interior : 0);
        if (interior < 0 || size != s->dims[d])
            return interp_error(ip, inst, "padding of dimension %d does not give the result size", d);
        /* source index i lands at lo + i * step; the ones landing in [0, size) are [i0, i1) */
        SimWide i0 = lo >= 0 ? 0 : (-(SimWide)lo + step - 1) / step;
        SimWide i1 = size - lo <= 0 ? 0 : (size - lo + step - 1) / step;
        if (i1 > n) i1 = n;
        box[d] = i1 > i0 ? (int64_t)(i1 - i0) : 0;
        src[d] = dst[d] = 0;
        if (box[d] == 0) continue; /* nothing of the operand lands in the result */
        soff += (int64_t)i0 * in_st[d];
        doff += (int64_t)(lo + i0 * step) * out_st[d];
        src[d] = in_st[d];
        dst[d] = box[d] > 1 ? out_st[d] * step : 0;
    }
    num_copy_box(sim_value_data(out), doff, dst, sim_value_data(&ops[0]), soff, src, box, r, es);
    return true;
}

static bool eval_concatenate(const Interp *ip, const HloInst *inst, const SimValue *ops, SimValue *out)
{
    const Shape *s = inst->shape;
    const IntList *dl = &hlo_attrs(inst)->dimensions;
    if (dl->n != 1 || dl->v[0] < 0 || dl->v[0] >= s->rank) return interp_error(ip, inst, "bad concatenate dimension");
    int32_t cd = (int32_t)dl->v[0];
    int64_t out_st[SPMDC_MAX_RANK], in_st[SPMDC_MAX_RANK], at = 0;
    num_strides(s->dims, s->rank, out_st);
    *out = sim_value_new(s);
    for (int32_t k = 0; k < inst->n_operands; k++) {
        const Shape *in = &ops[k].shape;
        bool fits = in->rank == s->rank && in->type == s->type;
        for (int32_t d = 0; d < s->rank && fits; d++)
            if (d != cd && in->dims[d] != s->dims[d]) fits = false;
        if (!fits || at + in->dims[cd] > s->dims[cd]) return interp_error(ip, inst, "operand %d does not fit the result", k);
        num_strides(in->dims, in->rank, in_st);
        num_copy_box(sim_value_data(out), at * out_st[cd], out_st, sim_value_data(&ops[k]), 0, in_st, in->dims, in->rank,
                     num_elem_bytes(s->type));
        at += in->dims[cd];
    }
    return at == s->dims[cd] || interp_error(ip, inst, "operands do not fill the result");
}

static bool eval_reverse(const Interp *ip, const HloInst *inst, const SimValue *a, SimValue *out)
{
    const Shape *s = inst->shape;
    const IntList *dl = &hlo_attrs(inst)->dimensions;
    if (!interp_shape_matches(a, s)) return interp_error(ip, inst, "operand shape differs from the result");
    int64_t st[SPMDC_MAX_RANK], src[SPMDC_MAX_RANK], off = 0;
    num_strides(s->dims, s->rank, st);
    memcpy(src, st, sizeof st);
    for (int32_t k = 0; k < dl->n; k++) {
        int64_t d = dl->v[k];
        if (d < 0 || d >= s->rank) return interp_error(ip, inst, "reverse dimension out of range");
        if (src[d] > 0 && s->dims[d] > 0) {
            off += (s->dims[d] - 1) * st[d];
            src[d] = -st[d];
        }
    }
    *out = sim_value_new(s);
    num_copy_box(sim_value_data(out), 0, st, sim_value_data(a), off, src, s->dims, s->rank, num_elem_bytes(s->type));
    return true;
}

/* ---------------------------------------------------------------- control flow */

static bool pred_value(const SimValue *v, bool *out)
{
    if (v->shape.type != ET_PRED || v->shape.rank != 0) return false;
    *out = num_get_i(ET_PRED, sim_value_data(v), 0) != 0;
    return true;
}

static bool comp_ok(const Interp *ip, const HloInst *inst, int32_t c, const char *what)
{
    if (c < 0 || c >= ip->sh->m->n_comps) return interp_error(ip, inst, "missing %s computation", what);
    return true;
}

static bool eval_while(Interp *ip, const HloInst *inst, const SimValue *init, SimValue *out)
{
    const HloAttrs *a = hlo_attrs(inst);
    if (!comp_ok(ip, inst, a->condition, "condition") || !comp_ok(ip, inst, a->body, "body")) return false;
    SimValue state = sim_value_share(init);
    for (int64_t trip = 0;; trip++) {
        SimValue c;
        bool go;
        if (!interp_call(ip, a->condition, &state, 1, &c)) goto fail;
        bool ok = pred_value(&c, &go);
        sim_value_release(&c);
        if (!ok) {
            interp_error(ip, inst, "condition does not return pred[]");
            goto fail;
        }
        if (!go) break;
        if (trip >= SIM_MAX_WHILE_TRIPS) {
            interp_error(ip, inst, "loop did not finish after %d iterations", SIM_MAX_WHILE_TRIPS);
            goto fail;
        }
        SimValue next;
        if (!interp_call(ip, a->body, &state, 1, &next)) goto fail;
        sim_value_release(&state);
        state = next;
    }
    *out = state;
    return true;
fail:
    sim_value_release(&state);
    return false;
}

static bool eval_conditional(Interp *ip, const HloInst *inst, const SimValue *ops, SimValue *out)
{
    const HloAttrs *a = hlo_attrs(inst);
    int32_t nb = a->branches.n;
    if (nb < 1 || inst->n_operands != nb + 1) return interp_error(ip, inst, "branch count does not match the operands");
    const SimValue *sel = &ops[0];
    int64_t b;
    if (sel->shape.type == ET_PRED && sel->shape.rank == 0) {
        b = num_get_i(ET_PRED, sim_value_data(sel), 0) ? 0 : 1;
    } else if (sel->shape.type == ET_S32 && sel->shape.rank == 0) {
        b = num_get_i(ET_S32, sim_value_data(sel), 0);
        if (b < 0 || b >= nb) b = nb - 1;
    } else {
        return interp_error(ip, inst, "selector must be pred[] or s32[]");
    }
    if (b >= nb || !comp_ok(ip, inst, (int32_t)a->branches.v[b], "branch")) return interp_error(ip, inst, "missing branch");
    return interp_call(ip, (int32_t)a->branches.v[b], &ops[b + 1], 1, out);
}

static bool eval_custom_call(Interp *ip, const HloInst *inst, const SimValue *ops, SimValue *out)
{
    /* annotations that are identities (hlo-input.md §4.4, §5) */
    static const char *const identity[] = {"Sharding", "xla.sdy.FuncResultSharding", "ShardBarrierFrom",
                                           "ShardBarrierTo", "LayoutConstraint"};
    const char *t = hlo_attrs(inst)->custom_call_target;
    for (size_t k = 0; t && k < sizeof identity / sizeof identity[0]; k++)
        if (strcmp(t, identity[k]) == 0 && inst->n_operands == 1 && interp_shape_matches(&ops[0], inst->shape)) {
            *out = sim_value_share(&ops[0]);
            return true;
        }
    if (t && strcmp(t, "TopK") == 0) return interp_topk(ip, inst, ops, out);
    ip->sh->refused = true;
    return interp_error(ip, inst, "the interpreter does not support custom-call target \"%s\"", t ? t : "");
}

/* ---------------------------------------------------------------- dispatch */

static bool check_types(const Interp *ip, const HloInst *inst, const Shape *s)
{
    if (s->type == ET_TUPLE) {
        for (int32_t k = 0; k < s->n_elems; k++)
            if (!check_types(ip, inst, &s->elems[k])) return false;
        return true;
    }
    if (!num_type_supported(s->type)) {
        ip->sh->refused = true;
        return interp_error(ip, inst, "the interpreter does not support element type %s", elem_type_name(s->type));
    }
    return true;
}

/* ---------------------------------------------------------------- transfers */

/* Data an infeed or recv receives: the simulator has no host or peer, so
 * it makes the same pseudo-random values (floats in [-1, 1), integers in
 * [-4, 4], pred random) from the instruction's name on every call and
 * every device; an unpartitioned program and its partitioned form thus see
 * the same data. */
static SimValue incoming_data(const HloInst *inst, const Shape *s)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *p = inst->name; p && *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ull;
    SimValue v = sim_value_new(s);
    int64_t n = shape_elem_count(s);
    for (int64_t i = 0; i < n; i++) {
        uint64_t z = (h += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        if (num_is_float(s->type)) sim_value_set_f64(&v, i, (double)(z >> 11) * 0x1p-52 - 1.0);
        else if (s->type == ET_PRED) sim_value_set_i64(&v, i, (int64_t)(z & 1));
        else sim_value_set_i64(&v, i, (int64_t)(z % 9) - 4);
    }
    return v;
}

/* infeed -> (data, token); recv -> (data, u32 0, token); outfeed -> token;
 * send -> (its data, u32 0, token); send-done -> token; recv-done ->
 * (data, token) of its recv. */
static bool eval_transfer(Interp *ip, const HloInst *inst, const SimValue *ops, SimValue *out)
{
    const Shape *s = inst->shape;
    Shape tok = shape_scalar(ET_TOKEN), u32 = shape_scalar(ET_U32);
    switch (inst->op) {
    case HLO_OUTFEED: case HLO_SEND_DONE: *out = sim_value_new(&tok); return true;
    case HLO_INFEED: case HLO_RECV:
        if (s->type != ET_TUPLE || s->n_elems < 2 || s->elems[0].type == ET_TUPLE)
            return interp_error(ip, inst, "the simulator feeds arrays only");
        *out = sim_value_tuple(s->n_elems);
        out->elems[0] = incoming_data(inst, &s->elems[0]);
        if (s->n_elems == 3) out->elems[1] = sim_value_new(&u32);
        out->elems[s->n_elems - 1] = sim_value_new(&tok);
        return true;
    case HLO_SEND:
        *out = sim_value_tuple(3);
        out->elems[0] = sim_value_share(&ops[0]);
        out->elems[1] = sim_value_new(&u32);
        out->elems[2] = sim_value_new(&tok);
        return true;
    case HLO_RECV_DONE:
        if (ops[0].shape.type != ET_TUPLE || ops[0].shape.n_elems != 3) return interp_error(ip, inst, "recv-done of no recv");
        *out = sim_value_tuple(2);
        out->elems[0] = sim_value_share(&ops[0].elems[0]);
        out->elems[1] = sim_value_new(&tok);
        return true;
    default: return interp_error(ip, inst, "not a transfer");
    }
}

static bool eval_op(Interp *ip, int32_t c, const HloInst *inst, const SimValue *ops, const SimValue *params,
                    int32_t n_params, SimValue *out)
{
    const HloAttrs *a = hlo_attrs(inst);
    char cat = hlo_opcode_category(inst->op);
    switch (inst->op) {
    case HLO_PARAMETER:
        if (inst->param_number < 0 || inst->param_number >= n_params)
            return interp_error(ip, inst, "no argument for parameter %lld", (long long)inst->param_number);
        if (!interp_shape_matches(&params[inst->param_number], inst->shape)) {
            StrBuf b = {0};
            shape_print(&b, inst->shape, false);
            interp_error(ip, inst, "argument does not have the parameter's shape %s", sb_cstr(&b));
            sb_free(&b);
            return false;
        }
        *out = sim_value_share(&params[inst->param_number]);
        return true;
    case HLO_CONSTANT:
        if (!a->literal) return interp_error(ip, inst, "constant without a literal");
        return literal_to_value(ip, inst, a->literal, inst->shape, out);
    case HLO_IOTA: return eval_iota(ip, inst, out);
    case HLO_PARTITION_ID: *out = scalar_u32(ip->partition_id); return true;
    case HLO_REPLICA_ID: *out = scalar_u32(ip->replica_id); return true;
    case HLO_AFTER_ALL: *out = sim_value_new(inst->shape); return true;
    case HLO_INFEED: case HLO_OUTFEED: case HLO_SEND: case HLO_SEND_DONE: case HLO_RECV: case HLO_RECV_DONE:
        return eval_transfer(ip, inst, ops, out);
    case HLO_TUPLE:
        *out = sim_value_tuple(inst->n_operands);
        for (int32_t k = 0; k < inst->n_operands; k++) out->elems[k] = sim_value_share(&ops[k]);
        return true;
    case HLO_GET_TUPLE_ELEMENT:
        if (ops[0].shape.type != ET_TUPLE || a->index < 0 || a->index >= ops[0].shape.n_elems)
            return interp_error(ip, inst, "tuple index %lld out of range", (long long)a->index);
        *out = sim_value_share(&ops[0].elems[a->index]);
        return true;
    case HLO_OPTIMIZATION_BARRIER: *out = sim_value_share(&ops[0]); return true;
    case HLO_SELECT: return eval_select(ip, inst, ops, out);
    case HLO_CLAMP: return eval_clamp(ip, inst, ops, out);
    case HLO_BROADCAST: return eval_broadcast(ip, inst, &ops[0], out);
    case HLO_RESHAPE: case HLO_BITCAST: return eval_reshape(ip, inst, &ops[0], out);
    case HLO_TRANSPOSE: return eval_transpose(ip, inst, &ops[0], out);
    case HLO_SLICE: return eval_slice(ip, inst, &ops[0], out);
    case HLO_DYNAMIC_SLICE: return eval_dynamic_slice(ip, inst, ops, out);
    case HLO_DYNAMIC_UPDATE_SLICE: return eval_dynamic_update_slice(ip, inst, ops, out);
    case HLO_PAD: return eval_pad(ip, inst, ops, out);
    case HLO_CONCATENATE: return eval_concatenate(ip, inst, ops, out);
    case HLO_REVERSE: return eval_reverse(ip, inst, &ops[0], out);
    case HLO_GATHER: return interp_gather(ip, inst, ops, out);
    case HLO_SCATTER: return interp_scatter(ip, inst, ops, out);
    case HLO_SORT: return interp_sort(ip, inst, ops, out);
    case HLO_TOPK: return interp_topk(ip, inst, ops, out);
    case HLO_RNG: return interp_rng(ip, inst, ops, out);
    case HLO_RNG_BIT_GENERATOR: return interp_rng_bit_generator(ip, inst, ops, out);
    case HLO_DOT: return interp_dot(ip, inst, &ops[0], &ops[1], out);
    case HLO_RAGGED_DOT: return interp_ragged_dot(ip, inst, ops, out);
    case HLO_CONVOLUTION: return interp_convolution(ip, inst, &ops[0], &ops[1], out);
    case HLO_REDUCE: return interp_reduce(ip, inst, ops, out);
    case HLO_REDUCE_WINDOW: return interp_reduce_window(ip, inst, ops, out);
    case HLO_SELECT_AND_SCATTER: return interp_select_and_scatter(ip, inst, ops, out);
    case HLO_MAP: return interp_map(ip, inst, ops, out);
    case HLO_WHILE: return eval_while(ip, inst, &ops[0], out);
    case HLO_CONDITIONAL: return eval_conditional(ip, inst, ops, out);
    case HLO_CALL:
        if (!comp_ok(ip, inst, a->to_apply, "to_apply")) return false;
        return interp_call(ip, a->to_apply, ops, inst->n_operands, out);
    case HLO_CUSTOM_CALL: return eval_custom_call(ip, inst, ops, out);
    default: break;
    }
    if (cat == 'U') return eval_unary(ip, inst, &ops[0], out);
    if (cat == 'B') return eval_binary(ip, inst, &ops[0], &ops[1], out);
    if (cat == 'C') {
        if (ip->sh->n_partitions * ip->sh->n_replicas != 1)
            return interp_error(ip, inst, "the simulator runs collectives only in lockstep code (not inside this computation)");
        int32_t idx = (int32_t)(inst - hlo_comp(ip->sh->m, c)->insts);
        const SimValue *p = ops;
        return sim_collective(ip, c, idx, &p, out, 1);
    }
    ip->sh->refused = true;
    return interp_error(ip, inst, "the interpreter does not support opcode '%s'", hlo_opcode_name(inst->op));
}

/* ---------------------------------------------------------------- cost */

/* Elements of every array leaf of s (a double: never overflows). */
static double leaf_elems(const Shape *s)
{
    if (s->type == ET_TUPLE) {
        double n = 0;
        for (int32_t k = 0; k < s->n_elems; k++) n += leaf_elems(&s->elems[k]);
        return n;
    }
    double n = 1;
    for (int32_t d = 0; d < s->rank; d++) n *= (double)s->dims[d];
    return n;
}

/* Bytes the simulator stores for a value of shape s (sim.h: its own
 * element size per type, sub-byte types one byte each). */
static double leaf_bytes(const Shape *s)
{
    if (s->type == ET_TUPLE) {
        double n = 0;
        for (int32_t k = 0; k < s->n_elems; k++) n += leaf_bytes(&s->elems[k]);
        return n;
    }
    int es = num_elem_bytes(s->type);
    return leaf_elems(s) * (es > 0 ? es : 8);
}

static double window_elems(const HloAttrs *a)
{
    double n = 1;
    for (int32_t k = 0; a->window && k < a->window->rank; k++) n *= (double)a->window->dims[k].size;
    return n;
}

/* Work of one application of computation c (1 when unknown or callee_work
 * is NULL): a single binary op of its two parameters runs on the
 * interpreter's fast path, one element operation; any other called
 * computation is interpreted instruction by instruction on scalars, about
 * SIM_CALL_INST_COST element operations each (a sort's comparator, a
 * variadic reducer: measured ~70 ns an instruction against ~1 ns an element
 * of an array op). */
static double apply_cost(const HloModule *m, int32_t c, const double *callee_work)
{
    if (!callee_work || c < 0 || c >= m->n_comps) return 1;
    const HloComputation *cc = &m->comps[c];
    if (cc->n_insts == 3 && cc->root >= 0 && cc->root < 3 && cc->insts[cc->root].n_operands == 2 &&
        cc->insts[cc->insts[cc->root].operands[0]].op == HLO_PARAMETER &&
        cc->insts[cc->insts[cc->root].operands[1]].op == HLO_PARAMETER && cc->insts[cc->root].op != HLO_COMPARE)
        return 1;
    double w = callee_work[c] > 1 ? callee_work[c] : 1;
    return w * SIM_CALL_INST_COST;
}

double sim_inst_work(const HloModule *m, const HloComputation *c, const HloInst *in, const double *callee_work)
{
    const HloAttrs *a = hlo_attrs(in);
    const Shape *o0 = in->n_operands > 0 ? c->insts[in->operands[0]].shape : in->shape;
    /* operand 0's elements only where an op's cost reads them: summing a
     * tuple operand's leaves for every get-tuple-element of it would make a
     * loop carrying N values cost O(N^2) */
    double out = leaf_elems(in->shape), in0;
    switch (in->op) {
    case HLO_SORT: case HLO_TOPK: case HLO_CUSTOM_CALL: case HLO_MAP: case HLO_ALL_REDUCE: case HLO_REDUCE_SCATTER:
    case HLO_GATHER: case HLO_PAD: case HLO_DYNAMIC_UPDATE_SLICE:
        in0 = leaf_elems(o0);
        break;
    default:
        in0 = 0;
        break;
    }
    switch (in->op) {
    case HLO_DOT:
    case HLO_RAGGED_DOT: {
        double k = 1;
        for (int32_t j = 0; j < a->lhs_contracting.n; j++)
            if (a->lhs_contracting.v[j] >= 0 && a->lhs_contracting.v[j] < o0->rank)
                k *= (double)o0->dims[a->lhs_contracting.v[j]];
        return out * k;
    }
    case HLO_CONVOLUTION: { /* per output element: the kernel's input features x window */
        const Shape *k = in->n_operands > 1 ? c->insts[in->operands[1]].shape : o0;
        double kout = a->conv && a->conv->k_out >= 0 && a->conv->k_out < k->rank ? (double)k->dims[a->conv->k_out] : 1;
        return out * (kout > 0 ? leaf_elems(k) / kout : leaf_elems(k));
    }
    case HLO_REDUCE: {
        double n = 0;
        for (int32_t j = 0; j < in->n_operands / 2; j++) n += leaf_elems(c->insts[in->operands[j]].shape);
        return n * apply_cost(m, a->to_apply, callee_work) + out;
    }
    case HLO_REDUCE_WINDOW:
        return out * window_elems(a) * apply_cost(m, a->to_apply, callee_work);
    case HLO_SELECT_AND_SCATTER: {
        const Shape *src = in->n_operands > 1 ? c->insts[in->operands[1]].shape : o0;
        return leaf_elems(src) * window_elems(a) *
                   (apply_cost(m, a->select, callee_work) + apply_cost(m, a->to_apply, callee_work)) + out;
    }
    case HLO_SCATTER: {
        double upd = 0;
        for (int32_t j = (in->n_operands + 1) / 2; j < in->n_operands; j++) upd += leaf_elems(c->insts[in->operands[j]].shape);
        return upd * (SIM_INDEXED_ELEM_COST + apply_cost(m, a->to_apply, callee_work)) + out;
    }
    case HLO_SORT: { /* merge sort along one dimension */
        int64_t d = a->dimensions.n == 1 ? a->dimensions.v[0] : -1;
        double len = d >= 0 && d < o0->rank ? (double)o0->dims[d] : in0, lg = 1;
        while (len > 1 && (double)(1ull << (int)lg) < len && lg < 62) lg++;
        return in0 * lg * apply_cost(m, a->to_apply, callee_work) + out;
    }
    case HLO_TOPK: case HLO_CUSTOM_CALL: { /* a merge sort of every row of the last dimension (interp_topk) */
        if (in->op == HLO_CUSTOM_CALL && !(a->custom_call_target && strcmp(a->custom_call_target, "TopK") == 0))
            return out > 1 ? out : 1;
        double len = o0->rank > 0 ? (double)o0->dims[o0->rank - 1] : 1, lg = 1;
        while (len > 1 && (double)(1ull << (int)lg) < len && lg < 62) lg++;
        /* a comparison costs about as much as an interpreted scalar
         * instruction (measured ~50 ns, also through the comparator's fast
         * path); a comparator of more than one compare is interpreted */
        double per = SIM_CALL_INST_COST;
        if (in->op == HLO_CUSTOM_CALL && a->to_apply >= 0 && a->to_apply < m->n_comps &&
            m->comps[a->to_apply].n_insts > 3)
            per = apply_cost(m, a->to_apply, callee_work);
        return in0 * lg * per + out;
    }
    case HLO_MAP: case HLO_ALL_REDUCE: case HLO_REDUCE_SCATTER:
        return (in0 > out ? in0 : out) * apply_cost(m, a->to_apply, callee_work);
    case HLO_GATHER:
        return out * SIM_INDEXED_ELEM_COST + in0;
    case HLO_PAD: case HLO_DYNAMIC_UPDATE_SLICE:
        return out + in0;
    default:
        return out > 1 ? out : 1;
    }
}

SimCost sim_module_cost(const HloModule *m)
{
    SimCost r = {0, 0, 0, -1, -1, 0};
    if (m->entry < 0 || m->n_comps <= 0) return r;
    double *work = xcalloc((size_t)m->n_comps, sizeof(double)), *peak = xcalloc((size_t)m->n_comps, sizeof(double));
    int32_t *last = NULL;
    size_t last_cap = 0;
    /* Callees are defined before their callers (parse.h), so one pass in index order sees them done. */
    for (int32_t ci = 0; ci < m->n_comps; ci++) {
        const HloComputation *c = &m->comps[ci];
        if ((size_t)c->n_insts > last_cap) {
            last_cap = (size_t)c->n_insts;
            last = xrealloc(last, sizeof(int32_t) * last_cap);
        }
        for (int32_t i = 0; i < c->n_insts; i++) last[i] = i;
        for (int32_t i = 0; i < c->n_insts; i++)
            for (int32_t k = 0; k < c->insts[i].n_operands; k++) {
                int32_t o = c->insts[i].operands[k];
                if (o >= 0 && o < i) last[o] = i;
            }
        if (c->root >= 0 && c->root < c->n_insts) last[c->root] = c->n_insts;
        double live = 0, top = 0, w = 0;
        for (int32_t i = 0; i < c->n_insts; i++) {
            const HloInst *in = &c->insts[i];
            const HloAttrs *a = hlo_attrs(in);
            double iw = sim_inst_work(m, c, in, work);
            w += iw;
            if (iw > r.worst_work) {
                r.worst_work = iw;
                r.worst_comp = ci;
                r.worst_inst = i;
            }
            double callee_peak = 0;
            int32_t callees[2] = {-1, -1};
            if (in->op == HLO_CALL) callees[0] = a->to_apply;
            if (in->op == HLO_WHILE) callees[0] = a->condition, callees[1] = a->body;
            for (int k = 0; k < 2; k++)
                if (callees[k] >= 0 && callees[k] < ci) {
                    w += work[callees[k]];
                    if (peak[callees[k]] > callee_peak) callee_peak = peak[callees[k]];
                }
            if (in->op == HLO_CONDITIONAL) {
                double bw = 0;
                for (int32_t k = 0; k < a->branches.n; k++) {
                    int64_t b = a->branches.v[k];
                    if (b < 0 || b >= ci) continue;
                    if (work[b] > bw) bw = work[b];
                    if (peak[b] > callee_peak) callee_peak = peak[b];
                }
                w += bw;
            }
            /* every value counts its buffers, also one that shares its operand's
             * (copy, reshape, tuple, ...): the operand's are then freed at
             * this user, so the sum stays an upper bound within 2x */
            double bytes = leaf_bytes(in->shape);
            if (ci == m->entry) r.total_bytes += bytes;
            live += bytes;
            if (live + callee_peak > top) top = live + callee_peak;
            for (int32_t k = 0; k < in->n_operands; k++) {
                int32_t o = in->operands[k];
                if (o >= 0 && o < i && last[o] == i) {
                    live -= leaf_bytes(c->insts[o].shape);
                    last[o] = -1; /* an operand used twice by i is freed once */
                }
            }
            if (last[i] == i) live -= bytes;
        }
        work[ci] = w;
        peak[ci] = top;
    }
    r.work = work[m->entry];
    r.peak_bytes = peak[m->entry];
    free(work);
    free(peak);
    free(last);
    return r;
}

/* Counts the instruction's work against SIM_WORK_LIMIT (see sim_internal.h):
 * sim_inst_work with called computations counted as they run. */
static bool charge_work(Interp *ip, int32_t c, const HloInst *inst)
{
    double w = sim_inst_work(ip->sh->m, hlo_comp(ip->sh->m, c), inst, NULL);
    ip->sh->work += w > SIM_INST_MIN_COST ? w : SIM_INST_MIN_COST;
    if (ip->sh->work <= ip->sh->work_limit) return true;
    ip->sh->refused = true;
    /* named at the outermost instruction running (a loop of the entry), the one inside it in a note */
    const HloInst *at = ip->outer ? ip->outer : inst;
    interp_error(ip, at, "the simulation went past its budget of %.0e element operations (a loop with many "
                 "trips?); verify a smaller twin of this module", ip->sh->work_limit);
    if (at != inst)
        diag_note(ip->sh->diag, inst->span, "it was running %s in computation %s", inst->name, hlo_comp(ip->sh->m, c)->name);
    return false;
}

bool interp_eval(Interp *ip, int32_t c, int32_t i, const SimValue *env, const SimValue *params, int32_t n_params,
                 SimValue *out)
{
    const HloInst *inst = hlo_inst(ip->sh->m, c, i);
    if (ip->depth == 0) ip->outer = inst;
    memset(out, 0, sizeof *out);
    int arity = hlo_opcode_arity(inst->op);
    if (arity >= 0 && inst->n_operands != arity)
        return interp_error(ip, inst, "expected %d operands, got %d", arity, inst->n_operands);
    if (!check_types(ip, inst, inst->shape)) return false;
    SimValue stack_ops[4], *ops = inst->n_operands <= 4 ? stack_ops : xmalloc(sizeof(SimValue) * (size_t)inst->n_operands);
    bool ok = true;
    for (int32_t k = 0; k < inst->n_operands && ok; k++) {
        int32_t o = inst->operands[k];
        if (o < 0 || o >= i) {
            ok = interp_error(ip, inst, "operand %d is not an earlier instruction", k);
            break;
        }
        ops[k] = env[o]; /* borrowed */
        if (ops[k].shape.type == ET_INVALID) ok = interp_error(ip, inst, "operand %d has no value", k);
        else if (ops[k].shape.type != ET_TUPLE) ok = check_types(ip, inst, &ops[k].shape);
    }
    if (ok) ok = charge_work(ip, c, inst);
    if (ok) ok = eval_op(ip, c, inst, ops, params, n_params, out);
    if (ops != stack_ops) free(ops);
    if (ok && !interp_shape_matches(out, inst->shape)) {
        StrBuf b = {0};
        shape_print(&b, inst->shape, false);
        ok = interp_error(ip, inst, "computed value does not have the declared shape %s", sb_cstr(&b));
        sb_free(&b);
    }
    if (!ok) sim_value_release(out);
    return ok;
}

bool interp_call(Interp *ip, int32_t c, const SimValue *args, int32_t n_args, SimValue *out)
{
    const HloComputation *comp = hlo_comp(ip->sh->m, c);
    memset(out, 0, sizeof *out);
    if (comp->root < 0 || comp->n_insts == 0) {
        diag_error(ip->sh->diag, comp->span, "computation %s has no root", comp->name);
        return false;
    }
    if (ip->depth >= MAX_CALL_DEPTH) {
        diag_error(ip->sh->diag, comp->span, "calls nested deeper than %d at computation %s", MAX_CALL_DEPTH, comp->name);
        return false;
    }
    const InterpCompInfo *ci = interp_comp_info(ip->sh, c);
    SimValue *env = xcalloc((size_t)comp->n_insts, sizeof(SimValue));
    bool ok = true;
    ip->depth++;
    for (int32_t i = 0; i < comp->n_insts && ok; i++) {
        ok = interp_eval(ip, c, i, env, args, n_args, &env[i]);
        const HloInst *inst = &comp->insts[i];
        for (int32_t k = 0; k < inst->n_operands; k++) {
            int32_t o = inst->operands[k];
            if (o >= 0 && o < i && ci->last_use[o] == i) sim_value_release(&env[o]);
        }
        if (ci->last_use[i] == i) sim_value_release(&env[i]);
    }
    ip->depth--;
    if (ok) {
        *out = env[comp->root];
        memset(&env[comp->root], 0, sizeof(SimValue));
    }
    for (int32_t i = 0; i < comp->n_insts; i++) sim_value_release(&env[i]);
    free(env);
    return ok;
}

bool sim_interp_run(const HloModule *m, const SimValue *args, int32_t n_args, int64_t partition_id, SimValue *out,
                    DiagEngine *diag)
{
    memset(out, 0, sizeof *out);
    if (m->entry < 0) {
        diag_error(diag, SRC_SPAN_NONE, "module %s has no entry computation", m->name);
        return false;
    }
    InterpShared sh;
    interp_shared_init(&sh, m, diag, 1, 1);
    Interp ip = {&sh, partition_id, 0, 0, NULL};
    bool ok = interp_call(&ip, m->entry, args, n_args, out);
    interp_shared_free(&sh);
    return ok;
}
