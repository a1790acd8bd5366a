/* memory.c - per-device memory of a partitioned program (memory.h).
 *
 * memory_estimate computes, for every computation the program runs, the
 * peak of the buffers it allocates itself (callees first: the emitted
 * module lists computations callee-first, and a computation's peak only
 * needs the peaks of the computations its instructions call), in two
 * linear passes per computation:
 *  1. backwards: the last position each buffer is used at, through the
 *     aliasing instructions that name it (tuple, get-tuple-element, bitcast,
 *     opt-barrier, while);
 *  2. forwards: at position i the buffer of i is allocated, the callees of
 *     i add their peak while i runs, and the buffers whose last use is i are
 *     freed after it.
 */
#include "spmdc/memory.h"

#include <stdlib.h>
#include <string.h>

#include "spmdc/tiling.h"

/* Whether the result of in names its operands' buffers instead of its own. */
static bool is_alias(const HloInst *in)
{
    switch (in->op) {
    case HLO_TUPLE:
    case HLO_GET_TUPLE_ELEMENT:
    case HLO_BITCAST:
    case HLO_OPTIMIZATION_BARRIER:
    case HLO_WHILE:
        return true;
    default:
        return false;
    }
}

/* The largest peak among the computations instruction in runs (while body
 * and condition, conditional branches, a call's callee); 0 if none. */
static int64_t callee_peak(const HloModule *m, const HloInst *in, const int64_t *peak)
{
    const HloAttrs *a = hlo_attrs(in);
    int64_t best = 0;
    int32_t refs[2] = {-1, -1};
    if (in->op == HLO_WHILE) {
        refs[0] = a->body;
        refs[1] = a->condition;
    } else if (in->op == HLO_CALL) {
        refs[0] = a->to_apply;
    } else if (in->op == HLO_CONDITIONAL) {
        for (int32_t k = 0; k < a->branches.n; k++) {
            int64_t c = a->branches.v[k];
            if (c >= 0 && c < m->n_comps && peak[c] > best) best = peak[c];
        }
    }
    for (int k = 0; k < 2; k++)
        if (refs[k] >= 0 && refs[k] < m->n_comps && peak[refs[k]] > best) best = peak[refs[k]];
    return best;
}

/* Whether instruction in runs another computation (callee_peak). */
static bool has_callee(const HloInst *in)
{
    return in->op == HLO_WHILE || in->op == HLO_CALL || in->op == HLO_CONDITIONAL;
}

/* Peak of the buffers computation c allocates (its parameters excluded:
 * its caller owns them), with where it is reached (*at: instruction, -1 if
 * the computation allocates nothing).  peak[] holds the peaks of the
 * computations before c.  The instructions are read once (pass 1 keeps
 * each one's own bytes, -1 for one that runs a callee); passes 2 and 3
 * read the flat arrays.  With param_bytes, pass 1 also adds up the bytes
 * of c's parameters there (the entry's, which the program's caller owns). */
static int64_t comp_peak(const HloModule *m, int32_t c, const int64_t *peak, int32_t *at, int64_t *param_bytes)
{
    const HloComputation *comp = &m->comps[c];
    int32_t n = comp->n_insts;
    *at = -1;
    if (n == 0) return 0;
    int32_t *end = xmalloc(sizeof(int32_t) * (size_t)n);
    int32_t *head = xmalloc(sizeof(int32_t) * (size_t)n), *next = xmalloc(sizeof(int32_t) * (size_t)n);
    int64_t *own = xmalloc(sizeof(int64_t) * (size_t)n);
    /* 1. last uses (n: lives to the end), and the bytes each allocates */
    for (int32_t i = 0; i < n; i++) end[i] = i;
    if (comp->root >= 0 && comp->root < n) end[comp->root] = n;
    for (int32_t u = n - 1; u >= 0; u--) {
        const HloInst *in = &comp->insts[u];
        if (u >= 16) { /* the walk misses the cache on every instruction and operand list otherwise */
            __builtin_prefetch(&comp->insts[u - 16]);
            __builtin_prefetch(&comp->insts[u - 16].shape);
        }
        if (u >= 8)
            __builtin_prefetch(comp->insts[u - 8].operands);
        bool alias = is_alias(in);
        if (in->op == HLO_PARAMETER && param_bytes)
            *param_bytes = bytes_add_sat(*param_bytes, shape_byte_size(in->shape)); /* >= 0: any order */
        own[u] = alias || in->op == HLO_PARAMETER ? 0 : shape_byte_size(in->shape);
        if (has_callee(in)) own[u] = -1 - own[u]; /* ~bytes: flags the callee */
        int32_t until = alias ? end[u] : u;
        for (int32_t k = 0; k < in->n_operands; k++) {
            int32_t o = in->operands[k];
            if (o >= 0 && o < u && end[o] < until) end[o] = until;
        }
    }
    /* 2. the sweep: buffers freed after position end[i] are chained there */
    for (int32_t i = 0; i < n; i++) head[i] = -1;
    for (int32_t i = 0; i < n; i++) {
        if (end[i] < n) {
            next[i] = head[end[i]];
            head[end[i]] = i;
        }
    }
    int64_t live = 0, best = 0;
    for (int32_t i = 0; i < n; i++) {
        int64_t bytes = own[i] < 0 ? -1 - own[i] : own[i];
        live = bytes_add_sat(live, bytes);
        int64_t now = own[i] < 0 ? bytes_add_sat(live, callee_peak(m, &comp->insts[i], peak)) : live;
        if (now > best || *at < 0) {
            best = now;
            *at = i;
        }
        for (int32_t j = head[i]; j >= 0; j = next[j]) live -= own[j] < 0 ? -1 - own[j] : own[j];
    }
    free(end);
    free(head);
    free(next);
    free(own);
    return best;
}

MemoryEstimate memory_estimate(const HloModule *m)
{
    MemoryEstimate e = {0, -1, -1, 0};
    if (m->entry < 0 || m->n_comps == 0) return e;
    int64_t *peak = xcalloc((size_t)m->n_comps, sizeof(int64_t));
    int32_t *at = xmalloc(sizeof(int32_t) * (size_t)m->n_comps);
    /* callees precede their callers; a reference to a later computation
     * (not in an emitted module) reads its peak as 0 */
    for (int32_t c = 0; c < m->n_comps; c++)
        peak[c] = comp_peak(m, c, peak, &at[c], c == m->entry ? &e.parameter_bytes : NULL);
    e.peak_bytes = bytes_add_sat(e.parameter_bytes, peak[m->entry]);
    e.peak_comp = m->entry;
    e.peak_inst = at[m->entry];
    free(peak);
    free(at);
    return e;
}

/* A memo of leaf_padding's bytes by sharding (address) and shape: equal
 * bound shardings are mostly stored once, so the leaves of a layered model
 * hit it nearly every time.  Behind it, a memo by the leaf's tiling (its
 * content) and shape catches equal shardings stored at different
 * addresses, so those compute their bytes once too. */
#define PAD_MEMO_MIN 64    /* slots of each memo, a power of two: the fewest */
#define PAD_MEMO_MAX 1024  /* and the most (a module of 4,096 instructions and up) */
typedef struct PadMemo {
    const Sharding *sh;         /* by address: NULL = empty */
    Tiling t;                   /* by content: the tiling (when tiled) */
    int32_t type, rank;         /* rank -1: empty (by content) */
    int64_t dims[SPMDC_MAX_RANK];
    bool tiled;                 /* sharding_to_tiling succeeded */
    int64_t value, pad;         /* local bytes, padding elements of the worst device */
} PadMemo;

/* The memo by address and the one by content, `mask + 1` entries each
 * (sized by the module: clearing 1,024 of each costs a small module more
 * than its whole estimate). */
typedef struct PadMemos {
    PadMemo *by_address, *by_content;
    uint64_t mask;
} PadMemos;

/* Whether memo entry e is for an array of shape s. */
static bool pad_memo_shape(const PadMemo *e, const Shape *s)
{
    if (e->type != (int32_t)s->type || e->rank != s->rank) return false;
    for (int32_t d = 0; d < s->rank; d++) /* a few dims: no library call */
        if (e->dims[d] != s->dims[d]) return false;
    return true;
}

/* The entry of the memo by content for tiling t (zero-filled beyond its
 * fields, so its bytes compare) of array s, computed if new. */
static const PadMemo *pad_memo_content(const HloModule *in, const Tiling *t, const Shape *s, const PadMemos *memo)
{
    const uint64_t *w = (const uint64_t *)(const void *)t;
    uint64_t h = 0x51ed27u ^ (uint64_t)s->type;
    for (size_t k = 0; k < sizeof(Tiling) / sizeof(uint64_t); k++) h = (h ^ w[k]) * 0xff51afd7ed558ccdull;
    for (int32_t d = 0; d < s->rank; d++) h = (h ^ (uint64_t)s->dims[d]) * 0xff51afd7ed558ccdull;
    PadMemo *e = &memo->by_content[(h >> 40) & memo->mask];
    if (e->rank >= 0 && pad_memo_shape(e, s) && memcmp(&e->t, t, sizeof(Tiling)) == 0) return e;
    e->t = *t;
    e->type = (int32_t)s->type;
    e->rank = s->rank;
    memcpy(e->dims, s->dims, sizeof(int64_t) * (size_t)s->rank);
    Shape local = tiling_local_shape(t, &in->mesh, s);
    e->value = shape_byte_size(&local);
    e->pad = tiling_max_device_padding(t, &in->mesh, s);
    return e;
}

/* Padding and local bytes of one array leaf under its tiling (memo: the
 * memo by address, then the one by content). */
static void leaf_padding(const HloModule *in, const Shape *s, const Sharding *sh, PaddingEstimate *p, int32_t c,
                         int32_t i, int32_t leaf, const PadMemos *memo)
{
    if (!shape_is_array(s) || !sh) return;
    uint64_t h = (uint64_t)(uintptr_t)sh * 0x9e3779b97f4a7c15ull;
    for (int32_t d = 0; d < s->rank; d++) h = (h ^ (uint64_t)s->dims[d]) * 0xff51afd7ed558ccdull;
    PadMemo *e = &memo->by_address[(h >> 40) & memo->mask];
    bool hit = e->sh == sh && pad_memo_shape(e, s);
    Tiling t;
    if (!hit) {
        e->sh = sh;
        e->type = (int32_t)s->type;
        e->rank = s->rank;
        memcpy(e->dims, s->dims, sizeof(int64_t) * (size_t)s->rank);
        memset(&t, 0, sizeof t);
        e->tiled = sharding_to_tiling(sh, s->rank, &t);
        if (e->tiled) {
            const PadMemo *x = pad_memo_content(in, &t, s, memo);
            e->value = x->value;
            e->pad = x->pad;
        }
    }
    if (!e->tiled) return;
    p->value_bytes = bytes_add_sat(p->value_bytes, e->value);
    int64_t pad = e->pad;
    if (pad <= 0) return;
    Shape padded = shape_array(s->type, 1, &pad);
    p->padding_bytes = bytes_add_sat(p->padding_bytes, shape_byte_size(&padded));
    if (p->first_inst < 0) {
        int32_t bad = -1;
        if (hit) sharding_to_tiling(sh, s->rank, &t);
        tiling_is_even(&t, &in->mesh, s, &bad);
        p->first_comp = c;
        p->first_inst = i;
        p->first_leaf = leaf;
        p->first_dim = bad;
    }
}

/* Every array leaf of shape s, flat order from leaf *k. */
static void tree_padding(const HloModule *in, const Shape *s, const Sharding *sh, int32_t *k, PaddingEstimate *p,
                         int32_t c, int32_t i, const PadMemos *memo)
{
    if (shape_is_tuple(s)) {
        for (int32_t e = 0; e < s->n_elems; e++) tree_padding(in, &s->elems[e], sh, k, p, c, i, memo);
        return;
    }
    int32_t leaf = (*k)++;
    if (sh->kind != SHARDING_TUPLE || leaf < sh->n_elems)
        leaf_padding(in, s, sharding_leaf(sh, leaf), p, c, i, leaf, memo);
}

static void inst_padding(const HloModule *in, int32_t c, int32_t i, PaddingEstimate *p, const PadMemos *memo)
{
    const HloComputation *comp = &in->comps[c];
    const HloInst *x = &comp->insts[i];
    if (i + 16 < comp->n_insts) { /* a stride of whole instructions: the walk would wait on every one */
        __builtin_prefetch(&comp->insts[i + 16]);
        __builtin_prefetch(&comp->insts[i + 16].shape);
    }
    int32_t k = 0;
    if (x->sharding) tree_padding(in, x->shape, x->sharding, &k, p, c, i, memo);
}

PaddingEstimate memory_padding(const HloModule *in)
{
    PaddingEstimate p = {0, 0, -1, -1, -1, -1};
    if (!in->has_mesh || in->entry < 0) return p;
    /* a slot per 4 instructions: a layered model's leaves share few shardings */
    int64_t n = 0;
    for (int32_t c = 0; c < in->n_comps; c++) n += in->comps[c].n_insts;
    uint64_t slots = PAD_MEMO_MIN;
    while (slots < PAD_MEMO_MAX && (int64_t)slots * 4 < n) slots *= 2;
    PadMemos memo = {xcalloc(2 * slots, sizeof(PadMemo)), NULL, slots - 1};
    memo.by_content = memo.by_address + slots;
    for (uint64_t k = 0; k < slots; k++) memo.by_content[k].rank = -1;
    /* the entry first, so the first uneven value named is the user's */
    for (int32_t i = 0; i < in->comps[in->entry].n_insts; i++) inst_padding(in, in->entry, i, &p, &memo);
    for (int32_t c = 0; c < in->n_comps; c++)
        if (c != in->entry)
            for (int32_t i = 0; i < in->comps[c].n_insts; i++) inst_padding(in, c, i, &p, &memo);
    free(memo.by_address);
    return p;
}

void memory_fill_report(CommReport *rep, const HloModule *in, const HloModule *out)
{
    MemoryEstimate e = memory_estimate(out);
    PaddingEstimate p = memory_padding(in);
    rep->has_memory_estimate = true;
    rep->peak_bytes_per_device = e.peak_bytes;
    free(rep->peak_instruction);
    rep->peak_instruction = NULL;
    if (e.peak_inst >= 0) {
        const char *name = out->comps[e.peak_comp].insts[e.peak_inst].name;
        size_t len = strlen(name) + 1;
        rep->peak_instruction = xmalloc(len);
        memcpy(rep->peak_instruction, name, len);
    }
    rep->padding_bytes_per_device = p.padding_bytes;
    rep->value_bytes_per_device = p.value_bytes;
}
