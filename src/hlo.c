/* hlo.c - IR construction helpers and the opcode table (see hlo.h). */
#include "spmdc/hlo.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "spmdc/intern.h"

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

bool hlo_opcode_names_computations(HloOpcode op)
{
    switch (op) {
    case HLO_REDUCE: case HLO_REDUCE_WINDOW: case HLO_SELECT_AND_SCATTER: case HLO_MAP: case HLO_SCATTER:
    case HLO_SORT: case HLO_WHILE: case HLO_CONDITIONAL: case HLO_CALL: case HLO_CUSTOM_CALL:
    case HLO_ALL_REDUCE: case HLO_REDUCE_SCATTER:
        return true;
    default:
        return false;
    }
}

bool hlo_is_custom_call(const HloInst *in, const char *target)
{
    if (in->op != HLO_CUSTOM_CALL) return false;
    const char *ct = hlo_attrs(in)->custom_call_target;
    return ct && strcmp(ct, target) == 0;
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
    m->syntax_arena = arena_create();
    return m;
}

void hlo_add_input_warning(HloModule *m, const char *kind, const char *instruction, uint32_t line,
                           const char *message)
{
    if (m->n_input_warnings == m->cap_input_warnings) {
        int32_t cap = m->cap_input_warnings ? m->cap_input_warnings * 2 : 8;
        m->input_warnings = arena_realloc(m->arena, m->input_warnings,
                                          sizeof(HloInputWarning) * (size_t)m->cap_input_warnings,
                                          sizeof(HloInputWarning) * (size_t)cap, _Alignof(HloInputWarning));
        m->cap_input_warnings = cap;
    }
    HloInputWarning *w = &m->input_warnings[m->n_input_warnings++];
    w->kind = arena_strdup(m->arena, kind);
    w->instruction = arena_strdup(m->arena, instruction);
    w->message = arena_strdup(m->arena, message);
    w->line = line;
}

void hlo_note_syntax_move(HloModule *m, int32_t c, int32_t i, const ShardingSyntax *shared, uint32_t line,
                          int32_t dcol)
{
    if (m->n_syntax_moves == m->cap_syntax_moves) {
        int32_t cap = m->cap_syntax_moves ? m->cap_syntax_moves * 2 : 64;
        m->syntax_moves = arena_realloc(m->syntax_arena, m->syntax_moves,
                                        sizeof(HloSyntaxMove) * (size_t)m->cap_syntax_moves,
                                        sizeof(HloSyntaxMove) * (size_t)cap, _Alignof(HloSyntaxMove));
        m->cap_syntax_moves = cap;
    }
    if (m->n_syntax_moves > 0) {
        const HloSyntaxMove *last = &m->syntax_moves[m->n_syntax_moves - 1];
        if (last->comp > c || (last->comp == c && last->inst >= i)) m->syntax_moves_unsorted = true;
    }
    m->syntax_moves[m->n_syntax_moves++] = (HloSyntaxMove){c, i, shared, line, dcol};
}

static int cmp_move(const void *pa, const void *pb)
{
    const HloSyntaxMove *a = pa, *b = pb;
    if (a->comp != b->comp) return a->comp < b->comp ? -1 : 1;
    return a->inst < b->inst ? -1 : a->inst > b->inst;
}

const ShardingSyntax *hlo_sharding_syntax(HloModule *m, int32_t c, int32_t i)
{
    HloInst *in = &m->comps[c].insts[i];
    if (!in->sharding_src || m->n_syntax_moves == 0 || !m->syntax_arena) return in->sharding_src;
    if (m->syntax_moves_unsorted) {
        /* the parse records an instruction once, so keys are distinct */
        qsort(m->syntax_moves, (size_t)m->n_syntax_moves, sizeof(HloSyntaxMove), cmp_move);
        m->syntax_moves_unsorted = false;
    }
    int32_t lo = 0, hi = m->n_syntax_moves;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        const HloSyntaxMove *x = &m->syntax_moves[mid];
        if (x->comp < c || (x->comp == c && x->inst < i)) lo = mid + 1;
        else hi = mid;
    }
    for (; lo < m->n_syntax_moves && m->syntax_moves[lo].comp == c && m->syntax_moves[lo].inst == i; lo++) {
        HloSyntaxMove *x = &m->syntax_moves[lo];
        if (x->shared != in->sharding_src) continue;
        in->sharding_src = sharding_syntax_moved(x->shared, x->line, x->dcol, m->syntax_arena);
        x->shared = NULL; /* resolved: the instruction holds its own copy now */
        break;
    }
    return in->sharding_src;
}

/* The shared attribute sets of a module, each stored once. */
struct HloAttrsTable {
    InternSet set;
};

void hlo_module_free(HloModule *m)
{
    if (!m) return;
    intern_free(&m->shapes);
    if (m->attrs_table) {
        intern_free(&m->attrs_table->set);
        free(m->attrs_table);
    }
    arena_destroy(m->syntax_arena);
    arena_destroy(m->arena);
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
    return hlo_add_inst_n(m, ci, op, name, strlen(name), shape, operands, n_operands);
}

void hlo_reserve_insts(HloModule *m, int32_t ci, int32_t n)
{
    HloComputation *c = &m->comps[ci];
    if (n <= c->cap_insts) return;
    c->insts = arena_realloc(m->arena, c->insts, sizeof(HloInst) * (size_t)c->cap_insts, sizeof(HloInst) * (size_t)n,
                             _Alignof(HloInst));
    c->cap_insts = n;
}

int32_t hlo_add_inst_n(HloModule *m, int32_t ci, HloOpcode op, const char *name, size_t name_len, const Shape *shape,
                       const int32_t *operands, int32_t n_operands)
{
    return hlo_add_inst_rec(m, ci, op, name, name_len, hlo_shape(m, shape), operands, n_operands);
}

int32_t hlo_add_inst_rec(HloModule *m, int32_t ci, HloOpcode op, const char *name, size_t name_len,
                         const Shape *shape, const int32_t *operands, int32_t n_operands)
{
    HloComputation *c = &m->comps[ci];
    if (c->n_insts == c->cap_insts)
        hlo_reserve_insts(m, ci, c->cap_insts ? c->cap_insts * 2 : 4);
    int32_t idx = c->n_insts++;
    HloInst *in = &c->insts[idx];
    memset(in, 0, sizeof *in);
    in->op = op;
    in->sharding_origin = -1;
    /* the operands and the name in one allocation */
    size_t ob = sizeof(int32_t) * (size_t)n_operands;
    char *blk = arena_alloc(m->arena, ob + name_len + 1, _Alignof(int32_t));
    if (n_operands) {
        memcpy(blk, operands, ob);
        in->operands = (int32_t *)(void *)blk;
    }
    memcpy(blk + ob, name, name_len);
    blk[ob + name_len] = 0;
    in->name = blk + ob;
    in->shape = shape;
    in->n_operands = n_operands;
    c->root = idx;
    return idx;
}

int32_t hlo_add_origin(HloModule *m, int32_t comp, int32_t inst)
{
    if (m->n_origins == m->cap_origins) {
        int32_t cap = m->cap_origins ? m->cap_origins * 2 : 8;
        m->origins = arena_realloc(m->arena, m->origins, sizeof(HloRef) * (size_t)m->cap_origins,
                                   sizeof(HloRef) * (size_t)cap, _Alignof(HloRef));
        m->cap_origins = cap;
    }
    m->origins[m->n_origins] = (HloRef){comp, inst};
    return -2 - m->n_origins++;
}

bool hlo_origin_ref(const HloModule *m, int32_t c, int32_t o, HloRef *r)
{
    if (o >= 0) {
        if (c < 0 || c >= m->n_comps || o >= m->comps[c].n_insts) return false;
        *r = (HloRef){c, o};
        return true;
    }
    if (o > -2 || -2 - (int64_t)o >= m->n_origins) return false;
    HloRef x = m->origins[-2 - o];
    if (x.comp < 0 || x.comp >= m->n_comps || x.inst < 0 || x.inst >= m->comps[x.comp].n_insts) return false;
    *r = x;
    return true;
}

static const HloAttrs DEFAULT_ATTRS = {.to_apply = -1, .select = -1, .condition = -1, .body = -1, .k = -1,
                                       .largest = true};

const HloAttrs *hlo_attrs(const HloInst *inst) { return inst->attrs ? inst->attrs : &DEFAULT_ATTRS; }

HloAttrs *hlo_attrs_mut(HloModule *m, HloInst *inst)
{
    if (!inst->attrs) {
        inst->attrs = ARENA_NEW(m->arena, HloAttrs);
        *inst->attrs = DEFAULT_ATTRS;
    } else if (inst->attrs_shared) {
        HloAttrs *own = ARENA_NEW(m->arena, HloAttrs);
        *own = *inst->attrs;
        inst->attrs = own;
    }
    inst->attrs_shared = false;
    return inst->attrs;
}

static bool list_has(const IntList *l, int64_t d)
{
    for (int32_t k = 0; k < l->n; k++)
        if (l->v[k] == d)
            return true;
    return false;
}

HloRaggedMode hlo_ragged_mode(const HloAttrs *a)
{
    int64_t rd = a->lhs_ragged.n == 1 ? a->lhs_ragged.v[0] : -1;
    if (list_has(&a->lhs_batch, rd))
        return RAGGED_BATCH;
    return list_has(&a->lhs_contracting, rd) ? RAGGED_CONTRACTING : RAGGED_FREE;
}

/* ---------------------------------------------------------------- shared attributes */

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

uint64_t hlo_hash_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    size_t i = 0;
    if (n >= 64) { /* four independent lanes */
        uint64_t l[4] = {h, h ^ 0x9e3779b97f4a7c15ull, h ^ 0xc2b2ae3d27d4eb4full, h ^ 0x165667b19e3779f9ull};
        for (; i + 32 <= n; i += 32)
            for (int k = 0; k < 4; k++) {
                uint64_t v;
                memcpy(&v, b + i + 8 * k, 8);
                l[k] = (l[k] ^ v) * 0xff51afd7ed558ccdull;
                l[k] ^= l[k] >> 29;
            }
        h = mix(mix(mix(mix(h, l[0]), l[1]), l[2]), l[3]);
    }
    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        memcpy(&v, b + i, 8);
        h = mix(h, v);
    }
    uint64_t t = 0;
    for (size_t k = 0; i < n; i++, k += 8) t |= (uint64_t)b[i] << k;
    return mix(h, t ^ n);
}

static uint64_t hash_str(uint64_t h, const char *s) { return s ? hlo_hash_bytes(h, s, strlen(s)) : mix(h, 1); }

/* The lists and strings a set's equality reads by content, as one table:
 * visit(list) for every IntList, and the rest by hand below. */
#define ATTR_LISTS(a) {&(a)->dimensions, &(a)->op_lists[0], &(a)->op_lists[1], &(a)->op_lists[2], \
                       &(a)->op_lists[3], &(a)->op_lists[4], &(a)->op_lists[5], &(a)->branches, &(a)->called}
enum { N_ATTR_LISTS = 9 };
_Static_assert(HLO_ATTR_OP_LISTS == 6, "ATTR_LISTS names every op list");
_Static_assert(sizeof(HloInst) == 96, "two instructions fill three 64-byte cache lines");

/* A copy of a with every field compared by content zeroed: the rest
 * (scalars, and pointers compared by address) compares bytewise. */
static void attrs_plain(const HloAttrs *a, HloAttrs *out)
{
    memcpy(out, a, sizeof *out);
    IntList *lists[N_ATTR_LISTS] = ATTR_LISTS(out);
    for (int k = 0; k < N_ATTR_LISTS; k++) memset(lists[k], 0, sizeof(IntList));
    out->replica_groups.ids = NULL;
    out->pairs = NULL;
    out->dim_labels = out->compare_type = out->custom_call_target = out->rng_distribution = NULL;
    out->raw = NULL;
}

static int64_t rg_count(const ReplicaGroups *g) { return g->ids && g->n_groups > 0 ? g->n_groups * g->group_size : 0; }

static uint64_t attrs_hash(const HloAttrs *a)
{
    HloAttrs p;
    attrs_plain(a, &p);
    uint64_t h = hlo_hash_bytes(0x51ed27, &p, sizeof p);
    const IntList *lists[N_ATTR_LISTS] = ATTR_LISTS(a);
    for (int k = 0; k < N_ATTR_LISTS; k++)
        h = lists[k]->n > 0 && lists[k]->v ? hlo_hash_bytes(h, lists[k]->v, sizeof(int64_t) * (size_t)lists[k]->n)
                                           : mix(h, (uint64_t)lists[k]->n);
    h = hlo_hash_bytes(h, a->replica_groups.ids, sizeof(int64_t) * (size_t)rg_count(&a->replica_groups));
    h = hlo_hash_bytes(h, a->pairs, a->pairs && a->n_pairs > 0 ? sizeof(int64_t) * 2 * (size_t)a->n_pairs : 0);
    h = hash_str(hash_str(hash_str(hash_str(h, a->dim_labels), a->compare_type), a->custom_call_target),
                 a->rng_distribution);
    for (int32_t k = 0; a->raw && k < a->n_raw; k++) h = hash_str(hash_str(h, a->raw[k].name), a->raw[k].text);
    return h;
}

static bool str_same(const char *x, const char *y) { return x == y || (x && y && strcmp(x, y) == 0); }

static bool ints_same(const int64_t *x, const int64_t *y, int64_t n)
{
    return n <= 0 || x == y || (x && y && memcmp(x, y, sizeof(int64_t) * (size_t)n) == 0);
}

static bool attrs_same(const HloAttrs *a, const HloAttrs *b)
{
    HloAttrs pa, pb;
    attrs_plain(a, &pa);
    attrs_plain(b, &pb);
    if (memcmp(&pa, &pb, sizeof pa) != 0) return false;
    const IntList *la[N_ATTR_LISTS] = ATTR_LISTS(a), *lb[N_ATTR_LISTS] = ATTR_LISTS(b);
    for (int k = 0; k < N_ATTR_LISTS; k++)
        if (la[k]->n != lb[k]->n || (la[k]->n > 0 && !ints_same(la[k]->v, lb[k]->v, la[k]->n))) return false;
    if (rg_count(&a->replica_groups) != rg_count(&b->replica_groups) ||
        !ints_same(a->replica_groups.ids, b->replica_groups.ids, rg_count(&a->replica_groups)) ||
        (a->replica_groups.ids == NULL) != (b->replica_groups.ids == NULL) || (a->pairs == NULL) != (b->pairs == NULL) ||
        !ints_same(a->pairs, b->pairs, 2 * (int64_t)a->n_pairs) || !str_same(a->dim_labels, b->dim_labels) ||
        !str_same(a->compare_type, b->compare_type) || !str_same(a->custom_call_target, b->custom_call_target) ||
        !str_same(a->rng_distribution, b->rng_distribution) || (a->raw == NULL) != (b->raw == NULL))
        return false;
    for (int32_t k = 0; a->raw && k < a->n_raw; k++)
        if (!str_same(a->raw[k].name, b->raw[k].name) || !str_same(a->raw[k].text, b->raw[k].text)) return false;
    return true;
}

static bool attrs_same_v(const void *stored, const void *item) { return attrs_same(stored, item); }

void hlo_set_attrs(HloModule *m, HloInst *inst, const HloAttrs *a)
{
    if (!m->attrs_table) m->attrs_table = xcalloc(1, sizeof(HloAttrsTable));
    uint64_t h = attrs_hash(a);
    uint32_t at;
    HloAttrs *own = intern_find(&m->attrs_table->set, h, a, attrs_same_v, &at);
    if (!own) {
        own = ARENA_NEW(m->arena, HloAttrs);
        *own = *a;
        intern_add(&m->attrs_table->set, at, h, own);
    }
    inst->attrs = own;
    inst->attrs_shared = true;
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

/* Identical, not only equal (shape_equal ignores layouts). */
static bool shape_identical(const Shape *a, const Shape *b)
{
    if (a->type != b->type || a->rank != b->rank || a->n_elems != b->n_elems || a->has_layout != b->has_layout)
        return false;
    if ((a->layout_tail == NULL) != (b->layout_tail == NULL)) return false;
    if (a->layout_tail && strcmp(a->layout_tail, b->layout_tail) != 0) return false;
    for (int32_t i = 0; i < a->rank && i < SPMDC_MAX_RANK; i++)
        if (a->dims[i] != b->dims[i] || (a->has_layout && a->minor_to_major[i] != b->minor_to_major[i])) return false;
    if (a->type == ET_TUPLE)
        for (int32_t i = 0; i < a->n_elems; i++)
            if (!shape_identical(&a->elems[i], &b->elems[i])) return false;
    return true;
}

static bool shape_same_v(const void *stored, const void *item) { return shape_identical(stored, item); }

/* A hash of the fields shape_identical compares (mix and hash_str, as the
 * attribute sets' hash). */
static uint64_t shape_hash(const Shape *s)
{
    uint64_t h = mix(mix(0, (uint64_t)s->type), (uint64_t)(uint32_t)s->rank | (uint64_t)s->has_layout << 32);
    for (int32_t i = 0; i < s->rank && i < SPMDC_MAX_RANK; i++) {
        h = mix(h, (uint64_t)s->dims[i]);
        if (s->has_layout) h = mix(h, (uint64_t)(uint8_t)s->minor_to_major[i]);
    }
    h = hash_str(h, s->layout_tail);
    if (s->type == ET_TUPLE) {
        h = mix(h, (uint64_t)(uint32_t)s->n_elems);
        for (int32_t i = 0; i < s->n_elems; i++) h = mix(h, shape_hash(&s->elems[i]));
    }
    return h;
}

const Shape *hlo_shape(HloModule *m, const Shape *s)
{
    uint64_t h = shape_hash(s);
    uint32_t at;
    const Shape *found = intern_find(&m->shapes, h, s, shape_same_v, &at);
    if (found) return found;
    Shape *own = ARENA_NEW(m->arena, Shape);
    *own = hlo_copy_shape(m, s);
    intern_add(&m->shapes, at, h, own);
    return own;
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
        if (in->op != HLO_CONSTANT || !shape_is_array(in->shape) || in->shape->rank != 0 ||
            !elem_type_is_integral(in->shape->type) || !l || l->elided || l->n != 1 || !l->i)
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
    if (t->op != HLO_PARAMETER || t->param_number != 0)
        return false;
    *k = hlo_attrs(in)->index;
    return true;
}

/* n from a backend config holding "known_trip_count":{"n":"5"} (quotes
 * escaped or not), or -1: also for a count that is negative or does not fit
 * an int64 (no count of trips; the loop's own induction variable may still
 * give one). */
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
        while (*s && !isdigit((unsigned char)*s) && *s != '-' && *s != '}')
            s++;
        if (*s == '-')
            return -1;
        if (!isdigit((unsigned char)*s))
            continue;
        char *end = NULL;
        errno = 0;
        long long n = strtoll(s, &end, 10);
        if (end != s && n >= 0 && errno != ERANGE)
            return (int64_t)n;
        return -1;
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
