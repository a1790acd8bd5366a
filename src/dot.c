/* dot.c - the partitioned program as a Graphviz graph (dot.h).
 *
 * The collectives come from the explain sink's links (explain.h): each link
 * names the value resharded and the instruction that needed it, so the
 * collectives land on the data edge between the two.  Computations are
 * found from the entry through the control-flow references (while body
 * and condition, conditional branches, a call's callee), in a fixed order.
 */
#include "spmdc/dot.h"

#include <stdlib.h>
#include <string.h>

#include "spmdc/arena.h"
#include "spmdc/texttable.h"

#define N_KINDS (COLL_COLLECTIVE_PERMUTE + 1)

static const char *const KIND_COLOUR[N_KINDS] = {"red3", "blue3", "darkorange2", "purple3", "green4"};

/* A label-safe copy: quotes and backslashes escaped. */
static void put_escaped(StrBuf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') sb_putc(b, '\\');
        if (*s == '\n') {
            sb_puts(b, "\\n");
            continue;
        }
        sb_putc(b, *s);
    }
}

/* The computations the program runs, entry first, then in the order the
 * control flow reaches them (each once). */
static int32_t program_comps(const HloModule *m, int32_t *order)
{
    bool *seen = xcalloc((size_t)(m->n_comps ? m->n_comps : 1), sizeof(bool));
    int32_t n = 0;
    if (m->entry >= 0) {
        order[n++] = m->entry;
        seen[m->entry] = true;
    }
    for (int32_t k = 0; k < n; k++) {
        const HloComputation *c = &m->comps[order[k]];
        for (int32_t i = 0; i < c->n_insts; i++) {
            const HloInst *x = &c->insts[i];
            const HloAttrs *a = hlo_attrs(x);
            int64_t refs[64];
            int32_t nr = 0;
            if (x->op == HLO_WHILE) {
                refs[nr++] = a->condition;
                refs[nr++] = a->body;
            } else if (x->op == HLO_CALL) {
                refs[nr++] = a->to_apply;
            } else if (x->op == HLO_CONDITIONAL) {
                for (int32_t j = 0; j < a->branches.n && nr < 64; j++) refs[nr++] = a->branches.v[j];
            }
            for (int32_t j = 0; j < nr; j++)
                if (refs[j] >= 0 && refs[j] < m->n_comps && !seen[refs[j]]) {
                    seen[refs[j]] = true;
                    order[n++] = (int32_t)refs[j];
                }
        }
    }
    free(seen);
    return n;
}

static void put_node_id(StrBuf *b, int32_t c, int32_t i)
{
    if (i < 0) sb_printf(b, "c%d_result", (int)c);
    else sb_printf(b, "c%d_i%d", (int)c, (int)i);
}

/* "bf16[8192,8192] -> [8192,1024]" */
static void put_shapes(StrBuf *b, const HloModule *m, const HloInst *x)
{
    shape_print(b, x->shape, false);
    Tiling t;
    if (!shape_is_array(x->shape) || !x->sharding || !sharding_to_tiling(x->sharding, x->shape->rank, &t)) return;
    if (tiling_used(&t) == 0) return;
    Shape l = tiling_local_shape(&t, &m->mesh, x->shape);
    sb_puts(b, " -> ");
    sb_int_list(b, l.dims, l.rank, "[", ",", "]");
}

static void put_node(StrBuf *b, const HloModule *m, int32_t c, int32_t i, const char *indent)
{
    const HloInst *x = &m->comps[c].insts[i];
    StrBuf l = {0};
    sb_printf(&l, "%s = %s", x->name, hlo_opcode_name(x->op));
    if (x->span.begin.line) sb_printf(&l, " (line %u)", (unsigned)x->span.begin.line);
    sb_putc(&l, '\n');
    put_shapes(&l, m, x);
    sb_putc(&l, '\n');
    if (x->sharding) sharding_describe(&l, x->sharding, &m->mesh);
    else sb_puts(&l, "replicated");
    if (x->sharding_from_user) sb_puts(&l, " (annotated)");
    sb_puts(b, indent);
    put_node_id(b, c, i);
    sb_puts(b, " [label=\"");
    put_escaped(b, sb_cstr(&l));
    sb_puts(b, "\"");
    if (x->sharding_from_user) sb_puts(b, ", style=\"rounded,bold\"");
    if (m->comps[c].root == i) sb_puts(b, ", peripheries=2");
    sb_puts(b, "];\n");
    sb_free(&l);
}

/* The collectives of one edge: the links whose value and consumer it joins. */
typedef struct EdgeColl {
    int32_t comp, value, consumer; /* consumer -1: the computation's result */
    int64_t count[N_KINDS], bytes[N_KINDS];
    int64_t trips;                 /* loop trips the bytes count (the report's multiplier) */
} EdgeColl;

static int cmp_edge(const void *pa, const void *pb)
{
    const EdgeColl *a = pa, *b = pb;
    if (a->comp != b->comp) return a->comp < b->comp ? -1 : 1;
    if (a->consumer != b->consumer) return a->consumer < b->consumer ? -1 : 1;
    if (a->value != b->value) return a->value < b->value ? -1 : 1;
    return 0;
}

/* Edges with collectives, sorted by (computation, consumer, value), merged. */
static int32_t collect_edges(const HloModule *in, const CommReport *rep, const Explain *ex, EdgeColl **out)
{
    int32_t n = 0;
    EdgeColl *e = xcalloc((size_t)(ex->n_links ? ex->n_links : 1), sizeof(EdgeColl));
    for (int32_t k = 0; k < ex->n_links; k++) {
        const ExplainLink *l = &ex->links[k];
        if (l->comp < 0 || l->comp >= in->n_comps) continue;
        EdgeColl *x = &e[n++];
        x->comp = l->comp;
        x->value = l->value;
        /* a computation's own result (the root brought to its caller's state) */
        x->consumer = l->consumer == l->value || l->consumer < 0 ? -1 : l->consumer;
        for (int32_t r = l->first; r < l->end && r < rep->n_records; r++) {
            int kd = (int)rep->records[r].kind;
            if (kd < 0 || kd >= N_KINDS) continue;
            x->count[kd]++;
            x->bytes[kd] += rep->records[r].bytes_per_device;
            if (rep->records[r].multiplier > x->trips) x->trips = rep->records[r].multiplier;
        }
    }
    qsort(e, (size_t)n, sizeof *e, cmp_edge);
    int32_t m = 0;
    for (int32_t k = 0; k < n; k++) {
        if (m > 0 && cmp_edge(&e[m - 1], &e[k]) == 0) {
            for (int kd = 0; kd < N_KINDS; kd++) {
                e[m - 1].count[kd] += e[k].count[kd];
                e[m - 1].bytes[kd] += e[k].bytes[kd];
            }
            if (e[k].trips > e[m - 1].trips) e[m - 1].trips = e[k].trips;
            continue;
        }
        e[m++] = e[k];
    }
    *out = e;
    return m;
}

static const EdgeColl *find_edge(const EdgeColl *e, int32_t n, int32_t comp, int32_t value, int32_t consumer)
{
    EdgeColl key;
    memset(&key, 0, sizeof key);
    key.comp = comp;
    key.value = value;
    key.consumer = consumer;
    return bsearch(&key, e, (size_t)n, sizeof *e, cmp_edge);
}

/* Attributes of an edge with collectives: colour of the costliest kind,
 * one label line per kind. */
static void put_coll_attrs(StrBuf *b, const EdgeColl *x)
{
    int best = -1;
    StrBuf l = {0};
    for (int k = 0; k < N_KINDS; k++) {
        if (!x->count[k]) continue;
        if (best < 0 || x->bytes[k] > x->bytes[best]) best = k;
        if (l.len) sb_putc(&l, '\n');
        if (x->count[k] > 1) sb_printf(&l, "%lld x ", (long long)x->count[k]);
        sb_printf(&l, "%s ", collective_kind_name((CollectiveKind)k));
        text_put_bytes(&l, x->bytes[k], 0);
    }
    if (best < 0) best = 0;
    if (x->trips > 1) sb_printf(&l, "\nin %lld loop trips", (long long)x->trips);
    sb_printf(b, " [color=%s, fontcolor=%s, penwidth=2.5, label=\"", KIND_COLOUR[best], KIND_COLOUR[best]);
    put_escaped(b, sb_cstr(&l));
    sb_puts(b, "\"]");
    sb_free(&l);
}

static void put_comp(StrBuf *b, const HloModule *in, int32_t c, const EdgeColl *edges, int32_t n_edges)
{
    const HloComputation *comp = &in->comps[c];
    bool cluster = c != in->entry;
    const char *ind = cluster ? "    " : "  ";
    if (cluster) {
        sb_printf(b, "  subgraph cluster_c%d {\n    label=\"", (int)c);
        put_escaped(b, comp->name);
        sb_puts(b, "\";\n    style=rounded;\n    color=gray50;\n");
    }
    for (int32_t i = 0; i < comp->n_insts; i++) put_node(b, in, c, i, ind);
    /* edges are sorted by computation, then consumer: c's result edges (consumer -1) come first */
    int32_t lo = 0, hi = n_edges;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (edges[mid].comp < c) lo = mid + 1;
        else hi = mid;
    }
    bool result_edge = lo < n_edges && edges[lo].comp == c && edges[lo].consumer < 0;
    if (result_edge) {
        sb_printf(b, "%s", ind);
        put_node_id(b, c, -1);
        sb_puts(b, " [label=\"result\", shape=plaintext];\n");
    }
    /* drawn[v] == u: the edge v -> u is drawn already (an operand used twice) */
    int32_t *drawn = xmalloc(sizeof(int32_t) * (size_t)(comp->n_insts ? comp->n_insts : 1));
    for (int32_t i = 0; i < comp->n_insts; i++) drawn[i] = -1;
    for (int32_t u = 0; u < comp->n_insts; u++) {
        const HloInst *x = &comp->insts[u];
        for (int32_t k = 0; k < x->n_operands; k++) {
            int32_t v = x->operands[k];
            if (v < 0 || v >= comp->n_insts || drawn[v] == u) continue;
            drawn[v] = u;
            sb_puts(b, ind);
            put_node_id(b, c, v);
            sb_puts(b, " -> ");
            put_node_id(b, c, u);
            const EdgeColl *e = find_edge(edges, n_edges, c, v, u);
            if (e) put_coll_attrs(b, e);
            sb_puts(b, ";\n");
        }
    }
    free(drawn);
    if (result_edge) {
        for (int32_t i = lo; i < n_edges && edges[i].comp == c && edges[i].consumer < 0; i++) {
            sb_puts(b, ind);
            put_node_id(b, c, edges[i].value);
            sb_puts(b, " -> ");
            put_node_id(b, c, -1);
            put_coll_attrs(b, &edges[i]);
            sb_puts(b, ";\n");
        }
    }
    if (cluster) sb_puts(b, "  }\n");
}

/* Dashed edges from control flow to the computations it runs. */
static void put_calls(StrBuf *b, const HloModule *in, const int32_t *comps, int32_t n)
{
    bool *shown = xcalloc((size_t)(in->n_comps ? in->n_comps : 1), sizeof(bool));
    for (int32_t k = 0; k < n; k++) shown[comps[k]] = true;
    for (int32_t k = 0; k < n; k++) {
        const HloComputation *comp = &in->comps[comps[k]];
        for (int32_t i = 0; i < comp->n_insts; i++) {
            const HloInst *x = &comp->insts[i];
            const HloAttrs *a = hlo_attrs(x);
            int64_t refs[64];
            const char *role[64];
            int32_t nr = 0;
            if (x->op == HLO_WHILE) {
                refs[nr] = a->condition;
                role[nr++] = "condition";
                refs[nr] = a->body;
                role[nr++] = "body";
            } else if (x->op == HLO_CALL) {
                refs[nr] = a->to_apply;
                role[nr++] = "call";
            } else if (x->op == HLO_CONDITIONAL) {
                for (int32_t j = 0; j < a->branches.n && nr < 64; j++) {
                    refs[nr] = a->branches.v[j];
                    role[nr++] = "branch";
                }
            }
            for (int32_t j = 0; j < nr; j++) {
                int64_t t = refs[j];
                if (t < 0 || t >= in->n_comps || !shown[t] || in->comps[t].n_insts == 0) continue;
                int32_t target = in->comps[t].root >= 0 ? in->comps[t].root : 0;
                sb_puts(b, "  ");
                put_node_id(b, comps[k], i);
                sb_puts(b, " -> ");
                put_node_id(b, (int32_t)t, target);
                sb_printf(b, " [style=dashed, color=gray40, lhead=cluster_c%d, label=\"%s\"];\n", (int)t, role[j]);
            }
        }
    }
    free(shown);
}

void dot_print(StrBuf *b, const HloModule *in, const CommReport *rep, const Explain *ex)
{
    sb_puts(b, "digraph \"");
    put_escaped(b, in->name ? in->name : "module");
    sb_puts(b, "\" {\n  compound=true;\n  rankdir=TB;\n  label=\"");
    StrBuf t = {0};
    sb_printf(&t, "%s on mesh ", in->name ? in->name : "module");
    mesh_print(&t, &rep->mesh);
    sb_printf(&t, ": %d collective%s, ", rep->n_records, rep->n_records == 1 ? "" : "s");
    text_put_bytes(&t, report_total_bytes(rep), 0);
    sb_puts(&t, " sent per device");
    put_escaped(b, sb_cstr(&t));
    sb_free(&t);
    sb_puts(b, "\";\n  labelloc=t;\n  node [shape=box, fontname=\"Helvetica\", fontsize=10];\n"
               "  edge [fontname=\"Helvetica\", fontsize=9];\n");
    EdgeColl *edges = NULL;
    int32_t n_edges = collect_edges(in, rep, ex, &edges);
    int32_t *comps = xmalloc(sizeof(int32_t) * (size_t)(in->n_comps ? in->n_comps : 1));
    int32_t n = program_comps(in, comps);
    for (int32_t k = 0; k < n; k++) put_comp(b, in, comps[k], edges, n_edges);
    put_calls(b, in, comps, n);
    sb_puts(b, "}\n");
    free(comps);
    free(edges);
}
