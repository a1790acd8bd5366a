/* shrink.c - the small twin of a module (shrink.h).
 *
 * Nodes: one per dim of every array leaf of every instruction (flat, in
 * computation and program order), then one per factor of every op rule
 * built.  Union-find joins a dim with the single factor it is, a value's
 * leaves with the leaves identity and control-flow ops tie them to; a dim of
 * several factors is recorded as a product.  Then every class gets its new
 * size (shrunk, kept, or the product of its factors' new sizes) and the
 * shapes are rewritten.
 */
#include "spmdc/shrink.h"

#include <stdlib.h>
#include <string.h>

#include "spmdc/arena.h"
#include "spmdc/oprule.h"

typedef struct Product {
    int32_t dim;             /* dim node */
    const char *by;          /* the op (a reshape) whose rule says so */
    int32_t first, n;        /* factor nodes in Shrink.pf[first .. first+n) */
} Product;

typedef struct Shrink {
    HloModule *m;
    int32_t **first;         /* [comp][inst]: node of leaf 0, dim 0 */
    int32_t ***elem_off;     /* [comp][inst]: tuples: node offset of each top-level element (NULL: array) */
    int32_t n, cap;          /* nodes */
    int32_t *parent;
    int64_t *size;           /* original size of each node (its class's, at roots) */
    const char **fixed;      /* at roots: the instruction that keeps the class's size, or NULL */
    Product *prod;
    int32_t n_prod, cap_prod;
    int32_t *pf;
    int32_t n_pf, cap_pf;
} Shrink;

static int32_t add_node(Shrink *s, int64_t size)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 1024;
        s->parent = xrealloc(s->parent, sizeof(int32_t) * (size_t)s->cap);
        s->size = xrealloc(s->size, sizeof(int64_t) * (size_t)s->cap);
        s->fixed = xrealloc(s->fixed, sizeof(char *) * (size_t)s->cap);
    }
    s->parent[s->n] = s->n;
    s->size[s->n] = size;
    s->fixed[s->n] = NULL;
    return s->n++;
}

static int32_t find(Shrink *s, int32_t x)
{
    while (s->parent[x] != x) {
        s->parent[x] = s->parent[s->parent[x]];
        x = s->parent[x];
    }
    return x;
}

static void fix(Shrink *s, int32_t x, const char *by)
{
    x = find(s, x);
    if (!s->fixed[x]) s->fixed[x] = by;
}

static void unite(Shrink *s, int32_t a, int32_t b, const char *by)
{
    a = find(s, a);
    b = find(s, b);
    if (a == b) return;
    if (s->size[a] != s->size[b]) { /* not one size: keep both as they are */
        fix(s, a, by);
        fix(s, b, by);
        return;
    }
    if (a > b) {
        int32_t t = a;
        a = b;
        b = t;
    }
    s->parent[b] = a;
    if (!s->fixed[a]) s->fixed[a] = s->fixed[b];
}

/* ---------------------------------------------------------------- dim nodes */

/* Adds the dim nodes of every array leaf of shape sh, flat order. */
static void add_leaves(Shrink *s, const Shape *sh)
{
    if (shape_is_tuple(sh)) {
        for (int32_t e = 0; e < sh->n_elems; e++) add_leaves(s, &sh->elems[e]);
        return;
    }
    for (int32_t d = 0; d < sh->rank; d++) add_node(s, sh->dims[d]);
}

/* Dim nodes of a shape (all leaves). */
static int32_t count_dims(const Shape *sh)
{
    if (!shape_is_tuple(sh)) return sh->rank;
    int32_t n = 0;
    for (int32_t e = 0; e < sh->n_elems; e++) n += count_dims(&sh->elems[e]);
    return n;
}

/* Node of dim d of array leaf `leaf` of instruction i of computation c. */
static int32_t leaf_dim(Shrink *s, int32_t c, int32_t i, int32_t leaf, int32_t d)
{
    const Shape *sh = s->m->comps[c].insts[i].shape;
    if (!shape_is_tuple(sh)) return s->first[c][i] + d;
    /* walk the leaves (rule tensors of tuple results are few per op) */
    int32_t node = s->first[c][i], k = 0;
    const Shape *stack[64];
    int32_t idx[64], top = 0;
    stack[0] = sh;
    idx[0] = 0;
    while (top >= 0) {
        if (idx[top] >= stack[top]->n_elems) {
            top--;
            continue;
        }
        const Shape *e = &stack[top]->elems[idx[top]++];
        if (shape_is_tuple(e)) {
            if (top + 1 < 64) {
                stack[++top] = e;
                idx[top] = 0;
            }
            continue;
        }
        if (k++ == leaf) return node + d;
        node += e->rank;
    }
    return -1;
}

/* Unites the dims of two values of one shape: n dims from node a and node b. */
static void unite_range(Shrink *s, int32_t a, int32_t b, int32_t n, const char *by)
{
    for (int32_t k = 0; k < n; k++) unite(s, a + k, b + k, by);
}

static void fix_range(Shrink *s, int32_t a, int32_t n, const char *by)
{
    for (int32_t k = 0; k < n; k++) fix(s, a + k, by);
}

static void fix_inst(Shrink *s, int32_t c, int32_t i)
{
    const HloInst *x = &s->m->comps[c].insts[i];
    fix_range(s, s->first[c][i], count_dims(x->shape), x->name);
    for (int32_t k = 0; k < x->n_operands; k++) {
        int32_t o = x->operands[k];
        fix_range(s, s->first[c][o], count_dims(s->m->comps[c].insts[o].shape), x->name);
    }
}

/* ---------------------------------------------------------------- ops */

/* Ops whose attributes name sizes of their dims: every dim of them keeps
 * its size. */
static bool names_sizes(HloOpcode op)
{
    switch (op) {
    case HLO_SLICE:
    case HLO_DYNAMIC_SLICE:
    case HLO_DYNAMIC_UPDATE_SLICE:
    case HLO_PAD:
    case HLO_CONCATENATE:
    case HLO_GATHER:
    case HLO_SCATTER:
    case HLO_REDUCE_WINDOW:
    case HLO_SELECT_AND_SCATTER:
    case HLO_CONVOLUTION:
    case HLO_CONSTANT:
    case HLO_TOPK:
    case HLO_CUSTOM_CALL:
        return true;
    default:
        return false;
    }
}

static void add_product(Shrink *s, int32_t dim, const int32_t *factors, int32_t n, const char *by)
{
    if (s->n_prod == s->cap_prod) {
        s->cap_prod = s->cap_prod ? 2 * s->cap_prod : 64;
        s->prod = xrealloc(s->prod, sizeof(Product) * (size_t)s->cap_prod);
    }
    while (s->n_pf + n > s->cap_pf) {
        s->cap_pf = s->cap_pf ? 2 * s->cap_pf : 256;
        s->pf = xrealloc(s->pf, sizeof(int32_t) * (size_t)s->cap_pf);
    }
    Product *p = &s->prod[s->n_prod++];
    p->dim = dim;
    p->by = by;
    p->first = s->n_pf;
    p->n = n;
    memcpy(s->pf + s->n_pf, factors, sizeof(int32_t) * (size_t)n);
    s->n_pf += n;
}

static void tie_rule(Shrink *s, int32_t c, int32_t i, Arena *arena)
{
    const HloInst *x = &s->m->comps[c].insts[i];
    OpRule r;
    if (!oprule_build(s->m, c, i, arena, &r)) {
        fix_inst(s, c, i);
        return;
    }
    int32_t base = s->n;
    for (int32_t f = 0; f < r.n_factors; f++) {
        int32_t node = add_node(s, r.factors[f].size);
        FactorKind k = (FactorKind)r.factors[f].kind;
        if (k != FACTOR_PASS && k != FACTOR_REDUCTION && x->op != HLO_REVERSE && x->op != HLO_SORT)
            fix(s, node, x->name);
    }
    for (int32_t t = 0; t < r.n_in + r.n_out; t++) {
        const RuleTensor *rt = &r.t[t];
        for (int32_t d = 0; d < rt->rank; d++) {
            int32_t node = t < r.n_in ? leaf_dim(s, c, x->operands[rt->slot], 0, d) : leaf_dim(s, c, i, rt->leaf, d);
            if (node < 0) continue;
            int32_t nf = oprule_dim_n(&r, t, d);
            if (nf == 1) {
                unite(s, node, base + oprule_dim_factor(&r, t, d, 0), x->name);
            } else if (nf > 1) {
                int32_t fs[OPRULE_MAX_FACTORS];
                for (int32_t j = 0; j < nf; j++) fs[j] = base + oprule_dim_factor(&r, t, d, j);
                add_product(s, node, fs, nf, x->name);
            } else {
                fix(s, node, x->name);
            }
        }
    }
    arena_reset(arena);
}

/* Node offset of top-level element e of tuple value i. */
static int32_t elem_node(Shrink *s, int32_t c, int32_t i, int32_t e)
{
    return s->first[c][i] + s->elem_off[c][i][e];
}

static void tie_identity(Shrink *s, int32_t c, int32_t i)
{
    const HloInst *x = &s->m->comps[c].insts[i];
    const HloComputation *comp = &s->m->comps[c];
    if (x->op == HLO_TUPLE) {
        for (int32_t k = 0; k < x->n_operands && k < x->shape->n_elems; k++) {
            int32_t o = x->operands[k];
            unite_range(s, elem_node(s, c, i, k), s->first[c][o], count_dims(comp->insts[o].shape), x->name);
        }
    } else if (x->op == HLO_GET_TUPLE_ELEMENT) {
        int32_t o = x->operands[0];
        int64_t e = hlo_attrs(x)->index;
        if (shape_is_tuple(comp->insts[o].shape) && e >= 0 && e < comp->insts[o].shape->n_elems)
            unite_range(s, s->first[c][i], elem_node(s, c, o, (int32_t)e), count_dims(x->shape), x->name);
    } else if (x->n_operands == 1) { /* opt-barrier, the Sharding custom-call */
        unite_range(s, s->first[c][i], s->first[c][x->operands[0]], count_dims(x->shape), x->name);
    } else {
        fix_inst(s, c, i);
    }
}

/* The parameter number p of computation cc, or -1. */
static int32_t param_of(const HloModule *m, int32_t cc, int64_t p)
{
    const HloComputation *k = &m->comps[cc];
    for (int32_t j = 0; j < k->n_insts; j++)
        if (k->insts[j].op == HLO_PARAMETER && k->insts[j].param_number == p) return j;
    return -1;
}

/* value (c, v) and parameter p of computation cc are one. */
static void tie_param(Shrink *s, int32_t c, int32_t v, int32_t cc, int64_t p, const char *by)
{
    if (cc < 0 || cc >= s->m->n_comps) return;
    int32_t j = param_of(s->m, cc, p);
    if (j < 0) return;
    int32_t n = count_dims(s->m->comps[c].insts[v].shape);
    if (n == count_dims(s->m->comps[cc].insts[j].shape)) unite_range(s, s->first[c][v], s->first[cc][j], n, by);
}

/* value (c, v) and the root of cc are one. */
static void tie_root(Shrink *s, int32_t c, int32_t v, int32_t cc, const char *by)
{
    if (cc < 0 || cc >= s->m->n_comps || s->m->comps[cc].root < 0) return;
    int32_t r = s->m->comps[cc].root;
    int32_t n = count_dims(s->m->comps[c].insts[v].shape);
    if (n == count_dims(s->m->comps[cc].insts[r].shape)) unite_range(s, s->first[c][v], s->first[cc][r], n, by);
}

static void tie_dataflow(Shrink *s, int32_t c, int32_t i)
{
    const HloInst *x = &s->m->comps[c].insts[i];
    const HloAttrs *a = hlo_attrs(x);
    if (x->op == HLO_WHILE && x->n_operands == 1) {
        unite_range(s, s->first[c][i], s->first[c][x->operands[0]], count_dims(x->shape), x->name);
        tie_param(s, c, i, a->body, 0, x->name);
        tie_param(s, c, i, a->condition, 0, x->name);
        tie_root(s, c, i, a->body, x->name);
    } else if (x->op == HLO_CONDITIONAL) {
        for (int32_t k = 0; k < a->branches.n && k + 1 < x->n_operands; k++) {
            tie_param(s, c, x->operands[k + 1], (int32_t)a->branches.v[k], 0, x->name);
            tie_root(s, c, i, (int32_t)a->branches.v[k], x->name);
        }
    } else if (x->op == HLO_CALL) {
        for (int32_t k = 0; k < x->n_operands; k++) tie_param(s, c, x->operands[k], a->to_apply, k, x->name);
        tie_root(s, c, i, a->to_apply, x->name);
    } else {
        fix_inst(s, c, i);
    }
}

/* ---------------------------------------------------------------- sizes */

typedef struct Eval {
    Shrink *s;
    int64_t D;
    int32_t *formula;   /* root -> product index, -1 */
    int64_t *to;        /* root -> new size, 0 = not yet */
    uint8_t *busy;
} Eval;

static int64_t shrunk(int64_t n, int64_t D)
{
    int64_t t = 2 * D + n % D;
    return t < n ? t : n;
}

static int64_t new_size(Eval *ev, int32_t r)
{
    Shrink *s = ev->s;
    if (ev->to[r]) return ev->to[r];
    if (s->fixed[r] || ev->busy[r]) {
        ev->to[r] = s->size[r];
        return ev->to[r];
    }
    if (ev->formula[r] < 0) {
        ev->to[r] = shrunk(s->size[r], ev->D);
        return ev->to[r];
    }
    ev->busy[r] = 1;
    const Product *p = &s->prod[ev->formula[r]];
    int64_t v = 1;
    for (int32_t j = 0; j < p->n; j++) {
        int64_t f = new_size(ev, find(s, s->pf[p->first + j]));
        v = v > INT64_MAX / (f ? f : 1) ? s->size[r] : v * f;
    }
    ev->busy[r] = 0;
    ev->to[r] = v;
    return v;
}

static void apply_leaves(Eval *ev, Shape *sh, int32_t *node, double *before, double *after)
{
    if (shape_is_tuple(sh)) {
        for (int32_t e = 0; e < sh->n_elems; e++) apply_leaves(ev, &sh->elems[e], node, before, after);
        return;
    }
    double b = 1, a = 1;
    for (int32_t d = 0; d < sh->rank; d++) {
        b *= (double)sh->dims[d];
        sh->dims[d] = new_size(ev, find(ev->s, (*node)++));
        a *= (double)sh->dims[d];
    }
    *before += b;
    *after += a;
}

static int cmp_class(const void *pa, const void *pb)
{
    const ShrinkClass *a = pa, *b = pb;
    /* shrunk (from > 0) before kept (from < 0, negated), each largest first */
    if ((a->from < 0) != (b->from < 0)) return a->from < 0 ? 1 : -1;
    int64_t fa = a->from < 0 ? -a->from : a->from, fb = b->from < 0 ? -b->from : b->from;
    if (fa != fb) return fa > fb ? -1 : 1;
    if (a->to != b->to) return a->to < b->to ? -1 : 1;
    return 0;
}

void shrink_module(HloModule *m, ShrinkResult *res)
{
    memset(res, 0, sizeof *res);
    Shrink s;
    memset(&s, 0, sizeof s);
    s.m = m;
    int32_t nc = m->n_comps;
    s.first = xcalloc((size_t)(nc ? nc : 1), sizeof(int32_t *));
    s.elem_off = xcalloc((size_t)(nc ? nc : 1), sizeof(int32_t **));
    for (int32_t c = 0; c < nc; c++) {
        const HloComputation *comp = &m->comps[c];
        s.first[c] = xmalloc(sizeof(int32_t) * (size_t)(comp->n_insts ? comp->n_insts : 1));
        s.elem_off[c] = xcalloc((size_t)(comp->n_insts ? comp->n_insts : 1), sizeof(int32_t *));
        for (int32_t i = 0; i < comp->n_insts; i++) {
            const Shape *sh = comp->insts[i].shape;
            s.first[c][i] = s.n;
            if (shape_is_tuple(sh)) {
                s.elem_off[c][i] = xmalloc(sizeof(int32_t) * (size_t)(sh->n_elems ? sh->n_elems : 1));
                int32_t off = 0;
                for (int32_t e = 0; e < sh->n_elems; e++) {
                    s.elem_off[c][i][e] = off;
                    off += count_dims(&sh->elems[e]);
                }
            }
            add_leaves(&s, sh);
        }
    }
    int32_t n_dims = s.n;
    Arena *arena = arena_create();
    for (int32_t c = 0; c < nc; c++) {
        const HloComputation *comp = &m->comps[c];
        for (int32_t i = 0; i < comp->n_insts; i++) {
            const HloInst *x = &comp->insts[i];
            if (names_sizes(x->op) && oprule_class(m, c, i) != RULE_IDENTITY) {
                fix_inst(&s, c, i);
                continue;
            }
            switch (oprule_class(m, c, i)) {
            case RULE_FACTORS: tie_rule(&s, c, i, arena); break;
            case RULE_LEAF: break; /* parameters, iota's values, partition-id: free */
            case RULE_IDENTITY: tie_identity(&s, c, i); break;
            case RULE_DATAFLOW: tie_dataflow(&s, c, i); break;
            default: fix_inst(&s, c, i); break;
            }
        }
    }
    arena_destroy(arena);
    Eval ev = {&s, m->has_mesh && m->mesh.n_devices > 0 ? m->mesh.n_devices : 1,
               xmalloc(sizeof(int32_t) * (size_t)(s.n ? s.n : 1)), xcalloc((size_t)(s.n ? s.n : 1), sizeof(int64_t)),
               xcalloc((size_t)(s.n ? s.n : 1), 1)};
    res->devices = ev.D;
    for (int32_t k = 0; k < s.n; k++) ev.formula[k] = -1;
    /* a class that is a product of factor classes one way only takes their new sizes */
    for (int32_t p = 0; p < s.n_prod; p++) {
        int32_t r = find(&s, s.prod[p].dim);
        bool bad = s.fixed[r] != NULL;
        for (int32_t j = 0; j < s.prod[p].n && !bad; j++) bad = s.fixed[find(&s, s.pf[s.prod[p].first + j])] != NULL;
        if (!bad && ev.formula[r] >= 0) {
            /* a second factorization of the same class: the same pieces, size by size, are one */
            const Product *q = &s.prod[ev.formula[r]];
            bad = q->n != s.prod[p].n;
            for (int32_t j = 0; j < q->n && !bad; j++)
                bad = s.size[find(&s, s.pf[q->first + j])] != s.size[find(&s, s.pf[s.prod[p].first + j])];
            for (int32_t j = 0; j < q->n && !bad; j++)
                unite(&s, s.pf[q->first + j], s.pf[s.prod[p].first + j], s.prod[p].by);
        }
        if (bad) {
            const char *by = s.fixed[r] ? s.fixed[r] : s.prod[p].by;
            fix(&s, r, by);
            for (int32_t j = 0; j < s.prod[p].n; j++) fix(&s, s.pf[s.prod[p].first + j], by);
            if (ev.formula[r] >= 0) {
                const Product *q = &s.prod[ev.formula[r]];
                for (int32_t j = 0; j < q->n; j++) fix(&s, s.pf[q->first + j], by);
            }
            continue;
        }
        ev.formula[r] = p;
    }
    for (int32_t k = 0; k < s.n; k++) {
        if (ev.formula[k] < 0 || find(&s, k) == k) continue;
        int32_t r = find(&s, k);
        if (ev.formula[r] < 0) ev.formula[r] = ev.formula[k];
        ev.formula[k] = -1;
    }
    /* the classes, for the description: per root its dims */
    int32_t *count = xcalloc((size_t)(s.n ? s.n : 1), sizeof(int32_t));
    for (int32_t k = 0; k < n_dims; k++) count[find(&s, k)]++;
    res->classes = xmalloc(sizeof(ShrinkClass) * (size_t)(n_dims ? n_dims : 1));
    int32_t n_cls = 0;
    for (int32_t k = 0; k < s.n; k++) {
        if (find(&s, k) != k || !count[k]) continue;
        int64_t to = new_size(&ev, k);
        if (to != s.size[k] || s.size[k] > 2 * ev.D + s.size[k] % ev.D) {
            ShrinkClass *cl = &res->classes[n_cls++];
            cl->from = s.size[k];
            cl->to = to;
            cl->n_dims = count[k];
            cl->kept_by = to == s.size[k] ? (s.fixed[k] ? s.fixed[k] : "-") : NULL;
        }
    }
    /* shrunk first, then kept; merge classes of the same sizes */
    for (int32_t k = 0; k < n_cls; k++)
        if (res->classes[k].kept_by) res->classes[k].from = -res->classes[k].from; /* kept sort last */
    qsort(res->classes, (size_t)n_cls, sizeof(ShrinkClass), cmp_class);
    int32_t w = 0;
    for (int32_t k = 0; k < n_cls; k++) {
        ShrinkClass c = res->classes[k];
        if (w > 0 && res->classes[w - 1].from == c.from && res->classes[w - 1].to == c.to) {
            res->classes[w - 1].n_dims += c.n_dims;
            continue;
        }
        res->classes[w++] = c;
    }
    for (int32_t k = 0; k < w; k++) {
        if (res->classes[k].from < 0) {
            res->classes[k].from = -res->classes[k].from;
            res->n_kept++;
        } else {
            res->n_shrunk++;
        }
    }
    /* rewrite the shapes */
    for (int32_t c = 0; c < nc; c++) {
        HloComputation *comp = &m->comps[c];
        for (int32_t i = 0; i < comp->n_insts; i++) {
            int32_t node = s.first[c][i];
            Shape sh = hlo_copy_shape(m, comp->insts[i].shape); /* the records are shared: rewrite a copy */
            apply_leaves(&ev, &sh, &node, &res->elems_before, &res->elems_after);
            comp->insts[i].shape = hlo_shape(m, &sh);
        }
    }
    for (int32_t c = 0; c < nc; c++) {
        for (int32_t i = 0; i < m->comps[c].n_insts; i++) free(s.elem_off[c][i]);
        free(s.first[c]);
        free(s.elem_off[c]);
    }
    free(count);
    free(ev.formula);
    free(ev.to);
    free(ev.busy);
    free(s.first);
    free(s.elem_off);
    free(s.parent);
    free(s.size);
    free(s.fixed);
    free(s.prod);
    free(s.pf);
}

void shrink_result_free(ShrinkResult *r)
{
    free(r->classes);
    memset(r, 0, sizeof *r);
}

void shrink_describe(StrBuf *b, const ShrinkResult *r)
{
    sb_printf(b, "twin: every size class shrunk to 2*%lld + (size mod %lld) elements (the mesh's devices)",
              (long long)r->devices, (long long)r->devices);
    if (r->n_shrunk == 0) sb_puts(b, "; nothing to shrink");
    for (int32_t k = 0; k < r->n_shrunk; k++)
        sb_printf(b, "%s %lld -> %lld (%d dim%s)", k ? "," : ":", (long long)r->classes[k].from,
                  (long long)r->classes[k].to, r->classes[k].n_dims, r->classes[k].n_dims == 1 ? "" : "s");
    sb_putc(b, '\n');
    for (int32_t k = r->n_shrunk; k < r->n_shrunk + r->n_kept; k++)
        sb_printf(b, "twin: kept %lld (%d dim%s): %s fixes it\n", (long long)r->classes[k].from, r->classes[k].n_dims,
                  r->classes[k].n_dims == 1 ? "" : "s", r->classes[k].kept_by);
    sb_printf(b, "twin: %.3g array elements instead of %.3g\n", r->elems_after, r->elems_before);
}

void shrink_plan_signature(StrBuf *b, const CommReport *rep)
{
    if (rep->n_records == 0) sb_puts(b, "  no collectives\n");
    for (int32_t i = 0; i < rep->n_records; i++) {
        const CommRecord *c = &rep->records[i];
        sb_printf(b, "  %s over ", collective_kind_name(c->kind));
        if (c->n_atoms > 0) mesh_atoms_name(b, &rep->mesh, c->atoms, c->n_atoms);
        else sb_puts(b, "-");
        sb_printf(b, " \xC3\x97%lld, %lld group%s", (long long)c->group_size, (long long)c->num_groups,
                  c->num_groups == 1 ? "" : "s");
        if (c->multiplier > 1) sb_printf(b, ", %lld loop trips", (long long)c->multiplier);
        sb_putc(b, '\n');
    }
}
