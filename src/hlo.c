/* hlo.c - IR construction helpers and the opcode table (see hlo.h). */
#include "spmdc/hlo.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    int arity;
    char cat;
} OPS[HLO_OPCODE_COUNT] = {
#define X(e, s, a, c) [HLO_##e] = {s, a, c},
#include "spmdc/hlo_opcodes.def"
#undef X
};

const char *hlo_opcode_name(HloOpcode op) { return op < HLO_OPCODE_COUNT ? OPS[op].name : "?"; }
int hlo_opcode_arity(HloOpcode op) { return op < HLO_OPCODE_COUNT ? OPS[op].arity : -1; }
char hlo_opcode_category(HloOpcode op) { return op < HLO_OPCODE_COUNT ? OPS[op].cat : 0; }

bool hlo_opcode_is_elementwise(HloOpcode op)
{
    char c = hlo_opcode_category(op);
    return c == 'U' || c == 'B' || c == 'T';
}

HloOpcode hlo_opcode_from_name(const char *s, size_t len)
{
    for (int i = 0; i < HLO_OPCODE_COUNT; i++) {
        const char *n = OPS[i].name;
        if (strlen(n) == len && memcmp(n, s, len) == 0) return (HloOpcode)i;
    }
    /* Older spelling of the barrier. */
    if (len == 20 && memcmp(s, "optimization-barrier", 20) == 0) return HLO_OPTIMIZATION_BARRIER;
    return HLO_OPCODE_COUNT;
}

HloModule *hlo_module_new(const char *name)
{
    Arena *a = arena_create();
    HloModule *m = ARENA_NEW(a, HloModule);
    m->arena = a;
    m->name = arena_strdup(a, name ? name : "module");
    m->entry = -1;
    return m;
}

void hlo_module_free(HloModule *m)
{
    if (m) arena_destroy(m->arena);
}

int32_t hlo_add_computation(HloModule *m, const char *name, bool is_entry)
{
    if (m->n_comps == m->cap_comps) {
        int32_t cap = m->cap_comps ? m->cap_comps * 2 : 8;
        m->comps = arena_realloc(m->arena, m->comps, sizeof(HloComputation) * (size_t)m->cap_comps,
                                 sizeof(HloComputation) * (size_t)cap, _Alignof(HloComputation));
        m->cap_comps = cap;
    }
    int32_t idx = m->n_comps++;
    HloComputation *c = &m->comps[idx];
    memset(c, 0, sizeof *c);
    c->name = arena_strdup(m->arena, name);
    c->is_entry = is_entry;
    c->root = -1;
    if (is_entry) m->entry = idx;
    return idx;
}

int32_t hlo_add_inst(HloModule *m, int32_t ci, HloOpcode op, const char *name, const Shape *shape,
                     const int32_t *operands, int32_t n_operands)
{
    HloComputation *c = &m->comps[ci];
    if (c->n_insts == c->cap_insts) {
        int32_t cap = c->cap_insts ? c->cap_insts * 2 : 16;
        c->insts = arena_realloc(m->arena, c->insts, sizeof(HloInst) * (size_t)c->cap_insts,
                                 sizeof(HloInst) * (size_t)cap, _Alignof(HloInst));
        c->cap_insts = cap;
    }
    int32_t idx = c->n_insts++;
    HloInst *in = &c->insts[idx];
    memset(in, 0, sizeof *in);
    in->op = op;
    in->sharding_origin = -1;
    in->name = arena_strdup(m->arena, name);
    in->shape = hlo_copy_shape(m, shape);
    in->n_operands = n_operands;
    if (n_operands) in->operands = arena_memdup(m->arena, operands, sizeof(int32_t) * (size_t)n_operands);
    c->root = idx;
    return idx;
}

static const HloAttrs DEFAULT_ATTRS = {.to_apply = -1, .select = -1, .condition = -1, .body = -1, .k = -1,
                                       .largest = true};

const HloAttrs *hlo_attrs(const HloInst *inst) { return inst->attrs ? inst->attrs : &DEFAULT_ATTRS; }

HloAttrs *hlo_attrs_mut(HloModule *m, HloInst *inst)
{
    if (!inst->attrs) {
        inst->attrs = ARENA_NEW(m->arena, HloAttrs);
        *inst->attrs = DEFAULT_ATTRS;
    }
    return inst->attrs;
}

IntList hlo_intlist(HloModule *m, const int64_t *v, int32_t n)
{
    IntList l = {n, NULL};
    if (n) l.v = arena_memdup(m->arena, v, sizeof(int64_t) * (size_t)n);
    return l;
}

void hlo_add_raw_attr(HloModule *m, HloInst *inst, const char *name, const char *text)
{
    HloAttrs *a = hlo_attrs_mut(m, inst);
    RawAttr *r = ARENA_ARRAY(m->arena, RawAttr, a->n_raw + 1);
    if (a->n_raw) memcpy(r, a->raw, sizeof(RawAttr) * (size_t)a->n_raw);
    r[a->n_raw].name = arena_strdup(m->arena, name);
    r[a->n_raw].text = arena_strdup(m->arena, text);
    a->raw = r;
    a->n_raw++;
}

Shape hlo_copy_shape(HloModule *m, const Shape *s)
{
    Shape r = *s;
    if (s->type == ET_TUPLE && s->n_elems) {
        r.elems = ARENA_ARRAY(m->arena, Shape, s->n_elems);
        for (int32_t i = 0; i < s->n_elems; i++) r.elems[i] = hlo_copy_shape(m, &s->elems[i]);
    }
    return r;
}

int32_t hlo_find_computation(const HloModule *m, const char *name)
{
    for (int32_t i = 0; i < m->n_comps; i++)
        if (strcmp(m->comps[i].name, name) == 0) return i;
    return -1;
}

int32_t hlo_find_inst(const HloModule *m, int32_t c, const char *name)
{
    const HloComputation *comp = &m->comps[c];
    for (int32_t i = 0; i < comp->n_insts; i++)
        if (strcmp(comp->insts[i].name, name) == 0) return i;
    return -1;
}

HloUsers hlo_compute_users(const HloComputation *c, Arena *arena)
{
    HloUsers u;
    int32_t n = c->n_insts;
    u.start = ARENA_ARRAY(arena, int32_t, n + 1);
    int32_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        for (int32_t k = 0; k < c->insts[i].n_operands; k++) u.start[c->insts[i].operands[k] + 1]++;
        total += c->insts[i].n_operands;
    }
    for (int32_t i = 0; i < n; i++) u.start[i + 1] += u.start[i];
    u.users = ARENA_ARRAY(arena, int32_t, total ? total : 1);
    int32_t *fill = ARENA_ARRAY(arena, int32_t, n ? n : 1);
    for (int32_t i = 0; i < n; i++)
        for (int32_t k = 0; k < c->insts[i].n_operands; k++) {
            int32_t o = c->insts[i].operands[k];
            u.users[u.start[o] + fill[o]++] = i;
        }
    return u;
}

/* ---------------------------------------------------------------- loops */

/* The value of a scalar integer constant (through copies and converts of
 * integers), or false. */
static bool int_constant(const HloComputation *comp, int32_t i, int64_t *v)
{
    for (int guard = 0; guard < 8 && i >= 0 && i < comp->n_insts; guard++) {
        const HloInst *in = &comp->insts[i];
        if ((in->op == HLO_COPY || in->op == HLO_CONVERT) && in->n_operands == 1) {
            i = in->operands[0];
            continue;
        }
        const Literal *l = hlo_attrs(in)->literal;
        if (in->op != HLO_CONSTANT || !shape_is_array(&in->shape) || in->shape.rank != 0 ||
            !elem_type_is_integral(in->shape.type) || !l || l->elided || l->n != 1 || !l->i)
            return false;
        *v = l->i[0];
        return true;
    }
    return false;
}

/* Whether instruction i of comp is get-tuple-element k of parameter 0;
 * *k receives the index. */
static bool param_element(const HloComputation *comp, int32_t i, int64_t *k)
{
    if (i < 0 || i >= comp->n_insts)
        return false;
    const HloInst *in = &comp->insts[i];
    if (in->op != HLO_GET_TUPLE_ELEMENT || in->n_operands != 1)
        return false;
    const HloInst *t = &comp->insts[in->operands[0]];
    if (t->op != HLO_PARAMETER || hlo_attrs(t)->param_number != 0)
        return false;
    *k = hlo_attrs(in)->index;
    return true;
}

/* n from a backend config holding "known_trip_count":{"n":"5"} (quotes
 * escaped or not), or -1. */
static int64_t known_trip_count(const HloInst *in)
{
    const HloAttrs *a = hlo_attrs(in);
    for (int32_t k = 0; k < a->n_raw; k++) {
        if (strcmp(a->raw[k].name, "backend_config") != 0)
            continue;
        const char *s = strstr(a->raw[k].text, "known_trip_count");
        if (!s)
            continue;
        s = strstr(s, "\"n");
        if (!s)
            continue;
        s += 2;
        while (*s && !isdigit((unsigned char)*s) && *s != '}')
            s++;
        if (!isdigit((unsigned char)*s))
            continue;
        char *end = NULL;
        long long n = strtoll(s, &end, 10);
        if (end != s && n >= 0)
            return (int64_t)n;
    }
    return -1;
}

int64_t hlo_while_trip_count(const HloModule *m, int32_t c, int32_t i)
{
    const HloComputation *caller = &m->comps[c];
    const HloInst *w = &caller->insts[i];
    const HloAttrs *a = hlo_attrs(w);
    int64_t known = known_trip_count(w);
    if (known >= 0)
        return known;
    if (a->condition < 0 || a->body < 0 || a->condition >= m->n_comps || a->body >= m->n_comps ||
        w->n_operands != 1)
        return -1;
    /* condition: gte(param, k) < N (or N > gte(param, k)) */
    const HloComputation *cond = &m->comps[a->condition];
    if (cond->root < 0)
        return -1;
    const HloInst *cmp = &cond->insts[cond->root];
    if (cmp->op != HLO_COMPARE || cmp->n_operands != 2)
        return -1;
    CompareDir dir = hlo_attrs(cmp)->direction;
    int32_t var = cmp->operands[0], lim = cmp->operands[1];
    if (dir == CMP_GT) {
        var = cmp->operands[1];
        lim = cmp->operands[0];
    } else if (dir != CMP_LT) {
        return -1;
    }
    int64_t k, limit;
    if (!param_element(cond, var, &k) || !int_constant(cond, lim, &limit))
        return -1;
    /* body: root element k = gte(param, k) + 1 */
    const HloComputation *body = &m->comps[a->body];
    if (body->root < 0)
        return -1;
    const HloInst *root = &body->insts[body->root];
    if (root->op != HLO_TUPLE || k < 0 || k >= root->n_operands)
        return -1;
    const HloInst *inc = &body->insts[root->operands[k]];
    if (inc->op != HLO_ADD || inc->n_operands != 2)
        return -1;
    int64_t kk, one;
    int32_t x = inc->operands[0], y = inc->operands[1];
    if (!param_element(body, x, &kk)) {
        int32_t t = x;
        x = y;
        y = t;
    }
    if (!param_element(body, x, &kk) || kk != k || !int_constant(body, y, &one) || one != 1)
        return -1;
    /* operand: a tuple whose element k is a constant S */
    int32_t init = w->operands[0];
    while (init >= 0 && caller->insts[init].op == HLO_COPY && caller->insts[init].n_operands == 1)
        init = caller->insts[init].operands[0];
    const HloInst *t = &caller->insts[init];
    int64_t start;
    if (t->op != HLO_TUPLE || k >= t->n_operands || !int_constant(caller, t->operands[k], &start))
        return -1;
    return limit > start ? limit - start : 0;
}
