/* hlo.c - IR construction helpers and the opcode table (see hlo.h). */
#include "spmdc/hlo.h"

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

static const HloAttrs DEFAULT_ATTRS = {.to_apply = -1, .select = -1, .condition = -1, .body = -1};

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
