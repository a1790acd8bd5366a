/* explain.c - the explain sink and its printers (explain.h).
 *
 * Decisions are kept in one array with a hash from (output computation,
 * instruction) to their index; a decision that is begun again (a handler
 * that weighs twice) starts over.  Links are appended as the partitioner
 * lowers reshards, so their report rows increase; explain_link_of finds a
 * row's link by binary search (a linear scan as a fallback if a reshard ever
 * nested inside another).
 */
#include "spmdc/explain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uthash.h>

#include "spmdc/arena.h"
#include "spmdc/texttable.h"

typedef struct ExplainKey {
    int32_t out_comp, inst;
} ExplainKey;

typedef struct ExplainIndex {
    ExplainKey key;
    int32_t dec;
    UT_hash_handle hh;
} ExplainIndex;

void explain_init(Explain *e)
{
    memset(e, 0, sizeof *e);
    e->current = -1;
}

void explain_free(Explain *e)
{
    ExplainIndex *x, *t;
    HASH_ITER(hh, e->index, x, t)
    {
        HASH_DEL(e->index, x);
        free(x);
    }
    for (int32_t k = 0; k < e->n_dec; k++) free(e->dec[k].alts);
    free(e->dec);
    free(e->links);
    memset(e, 0, sizeof *e);
    e->current = -1;
}

/* ---------------------------------------------------------------- recording */

static ExplainIndex *find(const Explain *e, int32_t out_comp, int32_t inst)
{
    ExplainKey key;
    memset(&key, 0, sizeof key);
    key.out_comp = out_comp;
    key.inst = inst;
    ExplainIndex *x = NULL;
    HASH_FIND(hh, e->index, &key, sizeof key, x);
    return x;
}

void explain_begin(Explain *e, int32_t comp, int32_t out_comp, int32_t inst, int32_t n_in, const int32_t *slots,
                   int32_t n_out, const int32_t *leaves)
{
    ExplainIndex *x = find(e, out_comp, inst);
    if (!x) {
        if (e->n_dec == e->cap_dec) {
            e->cap_dec = e->cap_dec ? 2 * e->cap_dec : 64;
            e->dec = xrealloc(e->dec, sizeof(ExplainDecision) * (size_t)e->cap_dec);
        }
        x = xcalloc(1, sizeof *x);
        x->key.out_comp = out_comp;
        x->key.inst = inst;
        x->dec = e->n_dec++;
        memset(&e->dec[x->dec], 0, sizeof(ExplainDecision));
        HASH_ADD(hh, e->index, key, sizeof(ExplainKey), x);
    }
    ExplainDecision *d = &e->dec[x->dec];
    ExplainAlt *room = d->alts; /* a decision made again keeps its room, not its candidates */
    int32_t cap = d->cap_alts;
    memset(d, 0, sizeof *d);
    d->alts = room;
    d->cap_alts = cap;
    d->comp = comp;
    d->inst = inst;
    d->out_comp = out_comp;
    d->n_in = n_in < EXPLAIN_MAX_TENSORS ? n_in : EXPLAIN_MAX_TENSORS;
    d->n_out = n_out < EXPLAIN_MAX_TENSORS - d->n_in ? n_out : EXPLAIN_MAX_TENSORS - d->n_in;
    for (int32_t k = 0; k < d->n_in; k++) d->slot[k] = slots[k];
    for (int32_t k = 0; k < d->n_out; k++) d->slot[d->n_in + k] = leaves[k];
    e->current = x->dec;
    e->next_order = 0;
}

/* a before b in the partitioner's order: bytes, then work, then enumeration */
static bool before(const ExplainAlt *a, const ExplainAlt *b)
{
    if (a->bytes != b->bytes) return a->bytes < b->bytes;
    if (a->work != b->work) return a->work < b->work;
    return a->order < b->order;
}

void explain_candidate(Explain *e, const Tiling *wants, const Tiling *results, int64_t bytes, double work)
{
    if (e->current < 0) return;
    ExplainDecision *d = &e->dec[e->current];
    ExplainAlt a;
    memset(&a, 0, sizeof a);
    for (int32_t k = 0; k < d->n_in; k++) a.t[k] = wants[k];
    for (int32_t k = 0; k < d->n_out; k++) a.t[d->n_in + k] = results[k];
    a.bytes = bytes;
    a.work = work;
    a.order = e->next_order++;
    d->n_weighed++;
    /* the same states weighed again (another pass-through set, say) count once */
    for (int32_t j = 0; j < d->n_alts; j++) {
        bool same = true;
        for (int32_t k = 0; k < d->n_in + d->n_out && same; k++) same = tiling_equal(&d->alts[j].t[k], &a.t[k]);
        if (!same) continue;
        if (before(&a, &d->alts[j])) {
            for (; j > 0 && before(&a, &d->alts[j - 1]); j--) d->alts[j] = d->alts[j - 1];
            d->alts[j] = a;
        }
        return;
    }
    int32_t pos = d->n_alts;
    while (pos > 0 && before(&a, &d->alts[pos - 1])) pos--;
    if (pos >= EXPLAIN_MAX_ALTS) return;
    if (d->n_alts == d->cap_alts && d->n_alts < EXPLAIN_MAX_ALTS) {
        d->cap_alts = d->cap_alts ? (2 * d->cap_alts < EXPLAIN_MAX_ALTS ? 2 * d->cap_alts : EXPLAIN_MAX_ALTS) : 1;
        d->alts = xrealloc(d->alts, sizeof(ExplainAlt) * (size_t)d->cap_alts);
    }
    int32_t last = d->n_alts < EXPLAIN_MAX_ALTS ? d->n_alts : EXPLAIN_MAX_ALTS - 1;
    for (int32_t j = last; j > pos; j--) d->alts[j] = d->alts[j - 1];
    d->alts[pos] = a;
    if (d->n_alts < EXPLAIN_MAX_ALTS) d->n_alts++;
}

void explain_link(Explain *e, int32_t first, int32_t end, int32_t comp, int32_t out_comp, int32_t value,
                  int32_t consumer, int32_t consumer_elem, int32_t consumer_leaf, int32_t origin, const Tiling *from,
                  const Tiling *to)
{
    if (end <= first) return;
    if (e->n_links == e->cap_links) {
        e->cap_links = e->cap_links ? 2 * e->cap_links : 64;
        e->links = xrealloc(e->links, sizeof(ExplainLink) * (size_t)e->cap_links);
    }
    ExplainLink *l = &e->links[e->n_links++];
    l->first = first;
    l->end = end;
    l->comp = comp;
    l->out_comp = out_comp;
    l->value = value;
    l->consumer = consumer;
    l->consumer_elem = consumer_elem;
    l->consumer_leaf = consumer_leaf;
    l->origin = origin;
    l->from = *from;
    l->to = *to;
}

const ExplainDecision *explain_decision(const Explain *e, int32_t out_comp, int32_t inst)
{
    const ExplainIndex *x = find(e, out_comp, inst);
    return x ? &e->dec[x->dec] : NULL;
}

const ExplainLink *explain_link_of(const Explain *e, int32_t r)
{
    int32_t lo = 0, hi = e->n_links;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (e->links[mid].end <= r) lo = mid + 1;
        else hi = mid;
    }
    if (lo < e->n_links && e->links[lo].first <= r && r < e->links[lo].end) return &e->links[lo];
    for (int32_t k = 0; k < e->n_links; k++)
        if (e->links[k].first <= r && r < e->links[k].end) return &e->links[k];
    return NULL;
}

/* ---------------------------------------------------------------- the chain */

/* The annotated instructions (at most 16, as origin codes of computation
 * comp: HloInst.sharding_origin) whose annotations the shardings of the
 * instructions of interest came from, in definition order (computation,
 * then instruction: an annotation outside a loop body before the body's
 * own when the body is defined first, as HLO text does). */
typedef struct Chain {
    const HloModule *in;
    const Mesh *mesh;
    int32_t comp;
    int32_t n;
    int32_t ann[16];
    HloRef ref[16]; /* what ann[k] names */
    /* The consumer of a tuple's operand and the element (1 + k) and first
     * leaf the value becomes: its sharding is shown as that element's. */
    const HloInst *elem_of;
    int32_t elem, elem_leaf;
} Chain;

static bool ref_before(HloRef a, HloRef b) { return a.comp != b.comp ? a.comp < b.comp : a.inst < b.inst; }

/* Adds origin code i (an index into c->comp or a code for another
 * computation; -1 and codes the module does not hold are skipped). */
static void add_ann(Chain *c, int32_t i)
{
    HloRef r;
    if (!hlo_origin_ref(c->in, c->comp, i, &r)) return;
    for (int32_t k = 0; k < c->n; k++)
        if (c->ref[k].comp == r.comp && c->ref[k].inst == r.inst) return;
    if (c->n == 16) return;
    int32_t k = c->n++;
    while (k > 0 && ref_before(r, c->ref[k - 1])) {
        c->ann[k] = c->ann[k - 1];
        c->ref[k] = c->ref[k - 1];
        k--;
    }
    c->ann[k] = i;
    c->ref[k] = r;
}

/* Where instruction i's sharding came from: itself when annotated, else
 * the annotations that reached it (the whole sharding's and each split
 * dim's). */
static void add_origins(Chain *c, int32_t i)
{
    if (i < 0 || i >= c->in->comps[c->comp].n_insts) return;
    const HloInst *x = &c->in->comps[c->comp].insts[i];
    if (x->sharding_from_user && x->sharding) {
        add_ann(c, i);
        return;
    }
    add_ann(c, x->sharding_origin);
    if (x->sharding_dim_origin && shape_is_array(x->shape))
        for (int32_t d = 0; d < x->shape->rank; d++) add_ann(c, x->sharding_dim_origin[d]);
}

static const HloInst *inst_of(const Chain *c, int32_t i) { return &c->in->comps[c->comp].insts[i]; }

/* The instruction origin code i names (an index into c->comp, or a code
 * for another computation that add_ann took). */
static const HloInst *ann_inst(const Chain *c, int32_t i)
{
    HloRef r;
    return hlo_origin_ref(c->in, c->comp, i, &r) ? &c->in->comps[r.comp].insts[r.inst] : inst_of(c, i);
}

/* Whether x is shown as one element of its tuple (Chain.elem_of). */
static bool shows_elem(const Chain *c, const HloInst *x)
{
    return x == c->elem_of && c->elem > 0 && x->sharding && x->sharding->kind == SHARDING_TUPLE &&
           shape_is_tuple(x->shape) && c->elem <= x->shape->n_elems;
}

static void put_sharding(StrBuf *b, const Chain *c, const HloInst *x)
{
    if (shows_elem(c, x)) {
        const Shape *es = &x->shape->elems[c->elem - 1];
        int32_t n = shape_is_tuple(es) ? shape_leaf_count(es) : 1;
        if (c->elem_leaf >= 0 && c->elem_leaf + n <= x->sharding->n_elems) {
            Sharding t = *x->sharding;
            t.n_elems = n;
            t.elems = x->sharding->elems + c->elem_leaf;
            sharding_describe(b, shape_is_tuple(es) ? &t : &t.elems[0], c->mesh);
            return;
        }
    }
    if (x->sharding) sharding_describe(b, x->sharding, c->mesh);
    else sb_puts(b, "replicated");
}

/* " element {3}" after x's name when x is shown as one element. */
static void put_elem(StrBuf *b, const Chain *c, const HloInst *x)
{
    if (shows_elem(c, x)) sb_printf(b, " element {%d}", (int)(c->elem - 1));
}

/* "y (line 37)" */
static void put_where(StrBuf *b, const HloInst *x)
{
    sb_puts(b, x->name);
    if (x->span.begin.line) sb_printf(b, " (line %u)", (unsigned)x->span.begin.line);
}

/* "annotated [{}, {model}]" or "[{}, {model}] from the annotation on a (line 34)" */
static void put_story(StrBuf *b, const Chain *c, int32_t i)
{
    const HloInst *x = inst_of(c, i);
    if (x->sharding_from_user && x->sharding) {
        sb_puts(b, "annotated ");
        put_sharding(b, c, x);
        return;
    }
    put_sharding(b, c, x);
    Chain own = {c->in, c->mesh, c->comp, 0, {0}, {{0, 0}}, NULL, 0, 0};
    add_origins(&own, i);
    if (own.n == 0) {
        sb_puts(b, x->sharding && !sharding_is_replicated(x->sharding) ? "" : " by default (no annotation splits it)");
        return;
    }
    sb_puts(b, own.n == 1 ? " from the annotation on " : " from the annotations on ");
    for (int32_t k = 0; k < own.n; k++) {
        if (k) sb_puts(b, k == own.n - 1 ? " and " : ", ");
        put_where(b, ann_inst(c, own.ann[k]));
    }
}

/* The alternatives of decision d as "h as [{}, {model}], b as [{model}, {}] -> [{}, {}] partial(sum) over {model}" */
static void put_alt(StrBuf *b, const Chain *c, const ExplainDecision *d, const ExplainAlt *a)
{
    const HloInst *x = inst_of(c, d->inst);
    for (int32_t k = 0; k < d->n_in; k++) {
        int32_t s = d->slot[k];
        const char *name = s >= 0 && s < x->n_operands ? inst_of(c, x->operands[s])->name : "?";
        sb_printf(b, "%s%s as ", k ? ", " : "", name);
        tiling_describe(b, &a->t[k], c->mesh);
    }
    sb_puts(b, " -> ");
    for (int32_t k = 0; k < d->n_out; k++) {
        if (k) sb_puts(b, ", ");
        tiling_describe(b, &a->t[d->n_in + k], c->mesh);
    }
}

/* The decisions on the chain of link l: the op that made the sum, then the
 * consumer (each once). */
static int32_t chain_decisions(const Explain *e, const ExplainLink *l, const ExplainDecision **out)
{
    int32_t n = 0;
    int32_t who[2] = {l->origin, l->consumer};
    for (int k = 0; k < 2; k++) {
        if (who[k] < 0 || (k == 1 && who[1] == who[0])) continue;
        const ExplainDecision *d = explain_decision(e, l->out_comp, who[k]);
        if (d) out[n++] = d;
    }
    return n;
}

static Chain chain_of(const ExplainLink *l, const HloModule *in, const Mesh *mesh)
{
    Chain c = {in, mesh, l->comp, 0, {0}, {{0, 0}}, NULL, 0, 0};
    add_origins(&c, l->value);
    add_origins(&c, l->consumer);
    if (l->consumer >= 0 && l->consumer_elem > 0) {
        c.elem_of = inst_of(&c, l->consumer);
        c.elem = l->consumer_elem;
        c.elem_leaf = l->consumer_leaf;
    }
    if (l->origin >= 0) {
        add_origins(&c, l->origin);
        const HloInst *o = inst_of(&c, l->origin);
        for (int32_t k = 0; k < o->n_operands; k++) add_origins(&c, o->operands[k]);
    }
    return c;
}

/* ---------------------------------------------------------------- handler rows */

/* Input instructions by source line, to find a report row's cause (name
 * and line) in O(log n): (line, comp, inst) sorted by line. */
typedef struct LineEntry {
    uint32_t line;
    int32_t comp, inst;
} LineEntry;

typedef struct LineIndex {
    LineEntry *v;
    int32_t n;
} LineIndex;

static int cmp_line(const void *a, const void *b)
{
    const LineEntry *x = a, *y = b;
    if (x->line != y->line) return x->line < y->line ? -1 : 1;
    if (x->comp != y->comp) return x->comp < y->comp ? -1 : 1;
    return x->inst < y->inst ? -1 : x->inst > y->inst;
}

static LineIndex line_index(const HloModule *in)
{
    LineIndex li = {NULL, 0};
    int64_t n = 0;
    for (int32_t c = 0; c < in->n_comps; c++) n += in->comps[c].n_insts;
    li.v = xmalloc(sizeof(LineEntry) * (size_t)(n ? n : 1));
    for (int32_t c = 0; c < in->n_comps; c++)
        for (int32_t i = 0; i < in->comps[c].n_insts; i++)
            li.v[li.n++] = (LineEntry){in->comps[c].insts[i].span.begin.line, c, i};
    qsort(li.v, (size_t)li.n, sizeof(LineEntry), cmp_line);
    return li;
}

/* The input instruction a report row names as its cause; false if none. */
static bool find_cause(const LineIndex *li, const HloModule *in, const CommRecord *rec, int32_t *comp, int32_t *inst)
{
    if (!rec->cause_instruction || !rec->cause_line) return false;
    int32_t lo = 0, hi = li->n;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (li->v[mid].line < rec->cause_line) lo = mid + 1;
        else hi = mid;
    }
    for (int32_t k = lo; k < li->n && li->v[k].line == rec->cause_line; k++) {
        const HloInst *x = &in->comps[li->v[k].comp].insts[li->v[k].inst];
        if (strcmp(x->name, rec->cause_instruction) == 0) {
            *comp = li->v[k].comp;
            *inst = li->v[k].inst;
            return true;
        }
    }
    return false;
}

/* The row's reason without a leading "name: " (report.h tolerates one). */
static const char *row_reason(const CommRecord *rec)
{
    const char *r = rec->reason ? rec->reason : "";
    size_t n = rec->cause_instruction ? strlen(rec->cause_instruction) : 0;
    if (n && strncmp(r, rec->cause_instruction, n) == 0 && r[n] == ':' && r[n + 1] == ' ') r += n + 2;
    return r;
}

/* The chain of a collective an op's handler emitted: the op, its operands
 * and the annotations their shardings came from. */
static Chain handler_chain(const HloModule *in, const Mesh *mesh, int32_t comp, int32_t inst)
{
    Chain c = {in, mesh, comp, 0, {0}, {{0, 0}}, NULL, 0, 0};
    add_origins(&c, inst);
    const HloInst *x = inst_of(&c, inst);
    for (int32_t k = 0; k < x->n_operands; k++) add_origins(&c, x->operands[k]);
    return c;
}

/* ---------------------------------------------------------------- text */

static void print_decision_text(StrBuf *b, const Chain *c, const ExplainDecision *d)
{
    const HloInst *x = inst_of(c, d->inst);
    sb_printf(b, "     alternatives weighed for %s (%s, %lld candidate%s", x->name, hlo_opcode_name(x->op),
              (long long)d->n_weighed, d->n_weighed == 1 ? "" : "s");
    if (d->n_weighed > d->n_alts) sb_printf(b, ", the %d cheapest", (int)d->n_alts);
    sb_puts(b, c->comp != c->in->entry ? "; bytes for one run of the computation):\n" : "):\n");
    TextTable t = {3, 0, 0, "lrl", NULL};
    StrBuf cell = {0};
    size_t w = 0;
    for (int32_t k = 0; k < d->n_alts; k++)
        if (text_bytes_width(d->alts[k].bytes) > w) w = text_bytes_width(d->alts[k].bytes);
    for (int32_t k = 0; k < d->n_alts; k++) {
        text_table_puts(&t, k == 0 ? "   chosen" : "         ");
        text_put_bytes(&cell, d->alts[k].bytes, w);
        text_table_put(&t, &cell);
        put_alt(&cell, c, d, &d->alts[k]);
        text_table_put(&t, &cell);
    }
    text_table_print(b, &t);
    text_table_free(&t);
    sb_free(&cell);
}

/* "     annotations: x (line 9) [{}, {d0}]; w (line 10) replicated" */
static void put_annotations(StrBuf *b, const Chain *c)
{
    sb_puts(b, "     annotations:");
    if (c->n == 0) sb_puts(b, " none (every sharding on the chain is the default)");
    for (int32_t k = 0; k < c->n; k++) {
        sb_puts(b, k ? "; " : " ");
        put_where(b, ann_inst(c, c->ann[k]));
        put_elem(b, c, ann_inst(c, c->ann[k]));
        sb_putc(b, ' ');
        put_sharding(b, c, ann_inst(c, c->ann[k]));
    }
    sb_putc(b, '\n');
}

/* The chain of report row rec, a collective the handler of input
 * instruction (comp, inst) emitted. */
static void print_handler_text(StrBuf *b, const CommRecord *rec, const HloModule *in, const Mesh *mesh, int32_t comp,
                               int32_t inst)
{
    Chain c = handler_chain(in, mesh, comp, inst);
    const HloInst *x = inst_of(&c, inst);
    if (comp != in->entry) sb_printf(b, "     in computation %s\n", in->comps[comp].name);
    sb_puts(b, "     emitted by the handler of ");
    put_where(b, x);
    sb_printf(b, ", a %s: %s\n", hlo_opcode_name(x->op), row_reason(rec));
    for (int32_t k = 0; k < x->n_operands; k++) {
        const HloInst *o = inst_of(&c, x->operands[k]);
        if (!shape_is_array(o->shape) || o->shape->rank == 0) continue;
        sb_printf(b, "     operand %d: ", (int)k);
        put_where(b, o);
        sb_putc(b, ' ');
        put_story(b, &c, x->operands[k]);
        sb_putc(b, '\n');
    }
    put_annotations(b, &c);
}

void explain_print_text(StrBuf *b, const Explain *e, const CommReport *rep, const HloModule *in)
{
    sb_puts(b, "\nexplain: for each collective, the chain to the annotations that forced it and the\n"
               "alternatives the partitioner weighed (bytes sent per device each would cost)\n");
    if (rep->n_records == 0) {
        sb_puts(b, "\n  no collectives\n");
        return;
    }
    LineIndex li = line_index(in);
    for (int32_t r = 0; r < rep->n_records; r++) {
        sb_flush_point(b); /* the records before r are final: a report file streams */
        const CommRecord *rec = &rep->records[r];
        sb_printf(b, "\n  %d  %s %s, ", (int)r + 1, collective_kind_name(rec->kind), rec->instruction ? rec->instruction : "-");
        text_put_bytes(b, rec->bytes_per_device, 0);
        sb_puts(b, " per device\n");
        const ExplainLink *l = explain_link_of(e, r);
        if (!l || l->comp < 0 || l->comp >= in->n_comps) {
            int32_t hc, hi;
            if (rec->from_input) {
                sb_puts(b, "     written in the input (inside a manual region)\n");
            } else if (!find_cause(&li, in, rec, &hc, &hi)) {
                sb_puts(b, "     emitted by an op's own handler; its cause is the report's row\n");
            } else {
                print_handler_text(b, rec, in, &rep->mesh, hc, hi);
            }
            continue;
        }
        Chain c = chain_of(l, in, &rep->mesh);
        if (l->comp != in->entry) sb_printf(b, "     in computation %s\n", in->comps[l->comp].name);
        sb_puts(b, "     reshards ");
        put_where(b, inst_of(&c, l->value));
        sb_puts(b, " from ");
        tiling_describe(b, &l->from, c.mesh);
        sb_puts(b, " to ");
        tiling_describe(b, &l->to, c.mesh);
        sb_putc(b, '\n');
        if (l->origin >= 0) {
            const HloInst *o = inst_of(&c, l->origin);
            sb_puts(b, "     a pending ");
            sb_puts(b, reduce_kind_name((ReduceKind)l->from.kind));
            sb_puts(b, " made by ");
            put_where(b, o);
            sb_printf(b, ", a %s whose split operands leave partial results\n", hlo_opcode_name(o->op));
        }
        if (l->consumer >= 0) {
            sb_puts(b, "     needed so by ");
            put_where(b, inst_of(&c, l->consumer));
            put_elem(b, &c, inst_of(&c, l->consumer));
            sb_puts(b, l->consumer == in->comps[l->comp].root ? ", the result, " : ", ");
            put_story(b, &c, l->consumer);
            sb_putc(b, '\n');
        }
        put_annotations(b, &c);
        const ExplainDecision *ds[2];
        int32_t nd = chain_decisions(e, l, ds);
        for (int32_t k = 0; k < nd; k++) print_decision_text(b, &c, ds[k]);
    }
    free(li.v);
}

/* ---------------------------------------------------------------- JSON */

/* The explain objects are written straight into the report's JSON as it is
 * printed (report_print_json_with), one collective at a time, with the
 * report's own writer: the whole document is never held as a tree. */

static void jkey_str(JsonOut *j, const char *key, const char *v)
{
    report_json_key(j, key);
    report_json_str(j, v);
}

static void jkey_int(JsonOut *j, const char *key, int64_t v)
{
    report_json_key(j, key);
    report_json_int(j, v);
}

/* A tiling's words as a string value; tmp is the caller's buffer. */
static void jtiling(JsonOut *j, StrBuf *tmp, const Tiling *t, const Mesh *m)
{
    sb_clear(tmp);
    tiling_describe(tmp, t, m);
    report_json_str(j, sb_cstr(tmp));
}

/* {instruction, line, opcode[, element], sharding[, story]} of origin code
 * i, left open for the caller's members (close it with '}'). */
static void jinst_open(JsonOut *j, StrBuf *tmp, const Chain *c, int32_t i, bool story)
{
    const HloInst *x = ann_inst(c, i);
    report_json_open(j, '{');
    jkey_str(j, "instruction", x->name);
    jkey_int(j, "line", x->span.begin.line);
    jkey_str(j, "opcode", hlo_opcode_name(x->op));
    if (shows_elem(c, x)) jkey_int(j, "element", c->elem - 1);
    sb_clear(tmp);
    put_sharding(tmp, c, x);
    jkey_str(j, "sharding", sb_cstr(tmp));
    if (story) {
        sb_clear(tmp);
        put_story(tmp, c, i);
        jkey_str(j, "story", sb_cstr(tmp));
    }
}

static void jinst(JsonOut *j, StrBuf *tmp, const Chain *c, int32_t i, bool story)
{
    jinst_open(j, tmp, c, i, story);
    report_json_close(j, '}');
}

static void jannotations(JsonOut *j, StrBuf *tmp, const Chain *c)
{
    report_json_key(j, "annotations");
    report_json_open(j, '[');
    for (int32_t k = 0; k < c->n; k++) jinst(j, tmp, c, c->ann[k], false);
    report_json_close(j, ']');
}

static void jdecision(JsonOut *j, StrBuf *tmp, const Chain *c, const ExplainDecision *d)
{
    const HloInst *x = inst_of(c, d->inst);
    report_json_open(j, '{');
    jkey_str(j, "instruction", x->name);
    jkey_int(j, "line", x->span.begin.line);
    jkey_str(j, "opcode", hlo_opcode_name(x->op));
    jkey_int(j, "weighed", d->n_weighed);
    report_json_key(j, "alternatives");
    report_json_open(j, '[');
    for (int32_t k = 0; k < d->n_alts; k++) {
        const ExplainAlt *a = &d->alts[k];
        report_json_open(j, '{');
        report_json_key(j, "operands");
        report_json_open(j, '[');
        for (int32_t t = 0; t < d->n_in; t++) {
            int32_t s = d->slot[t];
            report_json_open(j, '{');
            jkey_int(j, "operand", s);
            jkey_str(j, "instruction", s >= 0 && s < x->n_operands ? inst_of(c, x->operands[s])->name : NULL);
            report_json_key(j, "state");
            jtiling(j, tmp, &a->t[t], c->mesh);
            report_json_close(j, '}');
        }
        report_json_close(j, ']');
        report_json_key(j, "results");
        report_json_open(j, '[');
        for (int32_t t = 0; t < d->n_out; t++) jtiling(j, tmp, &a->t[d->n_in + t], c->mesh);
        report_json_close(j, ']');
        jkey_int(j, "bytes_per_device", a->bytes);
        report_json_key(j, "chosen");
        report_json_bool(j, k == 0);
        report_json_close(j, '}');
    }
    report_json_close(j, ']');
    report_json_close(j, '}');
}

static void jexplain(JsonOut *j, StrBuf *tmp, const Explain *e, const ExplainLink *l, const HloModule *in,
                     const Mesh *mesh)
{
    Chain c = chain_of(l, in, mesh);
    report_json_open(j, '{');
    jkey_str(j, "computation", in->comps[l->comp].name);
    const HloInst *x = inst_of(&c, l->value);
    report_json_key(j, "value");
    report_json_open(j, '{');
    jkey_str(j, "instruction", x->name);
    jkey_int(j, "line", x->span.begin.line);
    report_json_key(j, "from");
    jtiling(j, tmp, &l->from, mesh);
    report_json_key(j, "to");
    jtiling(j, tmp, &l->to, mesh);
    report_json_close(j, '}');
    report_json_key(j, "partial_from");
    if (l->origin >= 0) jinst(j, tmp, &c, l->origin, false);
    else report_json_null(j);
    report_json_key(j, "needed_by");
    if (l->consumer >= 0) jinst(j, tmp, &c, l->consumer, true);
    else report_json_null(j);
    jannotations(j, tmp, &c);
    const ExplainDecision *ds[2];
    int32_t nd = chain_decisions(e, l, ds);
    report_json_key(j, "decisions");
    report_json_open(j, '[');
    for (int32_t k = 0; k < nd; k++) jdecision(j, tmp, &c, ds[k]);
    report_json_close(j, ']');
    report_json_close(j, '}');
}

/* A handler row's explain object: the op (with its story), the reason, its
 * array operands (with their stories) and the annotations; no value moved
 * by a reshard and no decisions. */
static void jhandler(JsonOut *j, StrBuf *tmp, const CommRecord *rec, const HloModule *in, const Mesh *mesh,
                     int32_t comp, int32_t inst)
{
    Chain c = handler_chain(in, mesh, comp, inst);
    report_json_open(j, '{');
    jkey_str(j, "computation", in->comps[comp].name);
    report_json_key(j, "value");
    report_json_null(j);
    report_json_key(j, "emitted_by");
    jinst(j, tmp, &c, inst, true);
    jkey_str(j, "reason", row_reason(rec));
    const HloInst *x = inst_of(&c, inst);
    report_json_key(j, "operands");
    report_json_open(j, '[');
    for (int32_t k = 0; k < x->n_operands; k++) {
        const HloInst *op = inst_of(&c, x->operands[k]);
        if (!shape_is_array(op->shape) || op->shape->rank == 0) continue;
        jinst_open(j, tmp, &c, x->operands[k], true);
        jkey_int(j, "operand", k);
        report_json_close(j, '}');
    }
    report_json_close(j, ']');
    jannotations(j, tmp, &c);
    report_json_key(j, "decisions");
    report_json_open(j, '[');
    report_json_close(j, ']');
    report_json_close(j, '}');
}

typedef struct JsonCtx {
    const Explain *e;
    const CommReport *rep;
    const HloModule *in;
    LineIndex li;
    StrBuf tmp;
} JsonCtx;

/* The `explain` member of record i (report_print_json_with's hook). */
static void explain_member(JsonOut *j, int32_t i, void *arg)
{
    JsonCtx *x = arg;
    if (i < 0) return; /* the document's end: nothing to add */
    const ExplainLink *l = explain_link_of(x->e, i);
    const CommRecord *rec = &x->rep->records[i];
    int32_t hc, hi;
    report_json_key(j, "explain");
    if (l && l->comp >= 0 && l->comp < x->in->n_comps)
        jexplain(j, &x->tmp, x->e, l, x->in, &x->rep->mesh);
    else if (!rec->from_input && find_cause(&x->li, x->in, rec, &hc, &hi))
        jhandler(j, &x->tmp, rec, x->in, &x->rep->mesh, hc, hi);
    else
        report_json_null(j);
}

void explain_print_json(StrBuf *b, const Explain *e, const CommReport *rep, const HloModule *in)
{
    JsonCtx x = {e, rep, in, line_index(in), {0}};
    report_print_json_with(b, rep, explain_member, &x);
    sb_free(&x.tmp);
    free(x.li.v);
}
