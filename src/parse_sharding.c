/* parse_sharding.c - the `sharding=` syntax -> ShardingSyntax (part of
 * parse.c's AST -> IR lowering; shared state in parse_internal.h).
 *
 * Two families are read, both syntactic only (the mesh is bound later by
 * bind.c, which also checks device orders):
 *  - positional (GSPMD): {replicated}, {maximal device=N}, {manual},
 *    {unknown}, {devices=[2,4]0,1,...} or {devices=[2,4]<=[8]T(...)}, with
 *    last_tile_dim_replicate or last_tile_dims={...};
 *  - named (Shardy export): {mesh[x=2,y=4], [{x}, {y, ?}], replicated={..}}
 *    with sub-axes x:(pre)size, and {maximal_mesh[device_id=N]}.
 * A tuple sharding is a flat brace list of single shardings.  Every problem
 * is one diag error at the offending item; results live in the module's
 * syntax arena (m->syntax_arena, released by bind_shardings).
 */
#include <string.h>

#include "parse_internal.h"


/* A sharding's brace content, flattened: the prims of every element in order,
 * with a comma item (v == NULL) between elements. */
typedef struct ShItem {
    const AstVal *v;
    const AstVal *elem; /* the element this item belongs to (comma: the next one) */
} ShItem;

typedef struct ShItems {
    ShItem *it;
    int32_t n;
} ShItems;

static ShItems sh_flatten(Lower *lw, const AstVal *brace)
{
    int32_t n = 0;
    for (const AstVal *e = brace->child; e; e = e->next) n += ast_count(e->child) + 1;
    ShItems r = {ARENA_ARRAY(lw->tmp, ShItem, n ? n : 1), 0};
    for (const AstVal *e = brace->child; e; e = e->next) {
        if (e != brace->child) r.it[r.n++] = (ShItem){NULL, e};
        for (const AstVal *p = e->child; p; p = p->next) r.it[r.n++] = (ShItem){p, e};
    }
    return r;
}

static const AstLoc *item_loc(const ShItems *its, int32_t i)
{
    if (i >= its->n) i = its->n - 1;
    return its->it[i].v ? &its->it[i].v->loc : &its->it[i].elem->loc;
}

static const char *item_describe(Lower *lw, const ShItems *its, int32_t i)
{
    if (i >= its->n) return "the end of the sharding";
    return its->it[i].v ? describe(lw, its->it[i].v) : "','";
}

/* devices=[t0,t1,...] then `<=[dims] T(perm)` or an explicit id list.
 * *i indexes the devices= item; on return it indexes the last item used. */
static bool sh_devices(Lower *lw, const ShItems *its, int32_t *i, ShardingSyntax *s)
{
    const AstVal *tv = its->it[*i].v->child;
    if (!is_group(tv, AV_BRACKET) || !tv->child)
        return parse_err(lw, tv ? &tv->loc : item_loc(its, *i), "devices= expects tile dimensions like [2,4], found %s",
                         describe(lw, tv));
    int64_t prod = 1;
    for (const AstVal *e = tv->child; e; e = e->next) {
        if (s->n_tile_dims == SPMDC_MAX_TILE_DIMS)
            return parse_err(lw, &e->loc, "more than %d tile dimensions", SPMDC_MAX_TILE_DIMS);
        int64_t d;
        if (!parse_int_of(lw, elem_single(e) ? elem_single(e) : e, "tile dimension", &d)) return false;
        if (d < 1) return parse_err(lw, &e->loc, "tile dimensions must be at least 1, found %lld", (long long)d);
        s->tile_dims[s->n_tile_dims++] = d;
        prod = mul_capped(prod, d, SPMDC_MAX_DEVICES);
        if (prod < 0) return parse_err(lw, &tv->loc, "tile assignment has more than %d devices", SPMDC_MAX_DEVICES);
    }
    int32_t j = *i + 1;
    const AstVal *nx = j < its->n ? its->it[j].v : NULL;
    if (nx && nx->kind == AV_PUNCT && nx->punct == AP_LE) {
        const AstVal *src = j + 1 < its->n ? its->it[j + 1].v : NULL;
        const AstVal *t = j + 2 < its->n && is_group(its->it[j + 2].v, AV_TPAREN) ? its->it[j + 2].v : NULL;
        if (!is_group(src, AV_BRACKET))
            return parse_err(lw, item_loc(its, j + 1), "expected the iota source like [8] after '<=', found %s",
                             item_describe(lw, its, j + 1));
        int64_t total = 0;
        if (!parse_iota_source(lw, src, t, true, s->iota_dims, &s->n_iota_dims, s->iota_perm, &total,
                               SPMDC_MAX_TILE_DIMS))
            return false;
        s->has_perm = t != NULL;
        if (total != prod)
            return parse_err(lw, &src->loc, "iota source has %lld devices but the tile dimensions need %lld",
                             (long long)total, (long long)prod);
        *i = j + (t ? 2 : 1);
        return true;
    }
    if (!nx || nx->kind != AV_INT)
        return parse_err(lw, item_loc(its, j), "expected device ids or '<=' after devices=[...], found %s",
                         item_describe(lw, its, j));
    int64_t n = 1;
    while (j + 2 < its->n && !its->it[j + 1].v && its->it[j + 2].v && its->it[j + 2].v->kind == AV_INT) {
        j += 2;
        n++;
    }
    if (n != prod)
        return parse_err(lw, &tv->loc, "devices=[...] needs %lld device ids, but %lld are listed", (long long)prod,
                         (long long)n);
    if (n <= 1) return parse_err(lw, &tv->loc, "a tiled sharding needs at least 2 devices; use {maximal device=N}");
    s->n_devices = n;
    s->devices = ARENA_ARRAY(lw->m->syntax_arena, int64_t, n);
    for (int64_t k = 0, at = *i + 1; k < n; k++, at += 2) {
        if (!parse_int_of(lw, its->it[at].v, "device id", &s->devices[k])) return false;
        if (s->devices[k] < 0) return parse_err(lw, &its->it[at].v->loc, "device ids must be non-negative");
    }
    *i = j;
    return true;
}

static bool sh_subgroups(Lower *lw, const AstVal *v, ShardingSyntax *s)
{
    static const char *const names[] = {"replicated", "manual", "unreduced", "maximal"};
    const AstVal *g = v->child;
    if (!is_group(g, AV_BRACE) || !g->child)
        return parse_err(lw, &v->loc, "last_tile_dims= expects a list like {manual, replicated}");
    for (const AstVal *e = g->child; e; e = e->next) {
        const AstVal *w = elem_single(e);
        int k = -1;
        for (int q = 0; q < 4; q++)
            if (is_word(w, names[q])) k = q;
        if (k < 0)
            return parse_err(lw, &e->loc, "last_tile_dims: expected replicated, manual, unreduced or maximal, found %s",
                             describe(lw, e));
        if (s->n_subgroups == 4) return parse_err(lw, &e->loc, "last_tile_dims lists more than 4 subgroups");
        s->subgroups[s->n_subgroups++] = (SubgroupType)k;
    }
    return true;
}

static bool sh_check_positional(Lower *lw, const AstVal *brace, const AstVal *kind, const AstVal *device,
                                const AstVal *devices, const AstVal *ltdr, const AstVal *ltd, ShardingSyntax *s)
{
    if (kind && is_word(kind, "maximal")) {
        if (devices) return parse_err(lw, &devices->loc, "'maximal' cannot be combined with devices=[...]");
        if (!device) return parse_err(lw, &kind->loc, "'maximal' needs a device, like {maximal device=0}");
    } else if (device) {
        return parse_err(lw, &device->loc, "device=N is only valid after 'maximal'");
    }
    if (kind && devices)
        return parse_err(lw, &devices->loc, "'%.*s' cannot be combined with devices=[...]", TOKF(kind->t));
    const AstVal *sub = ltdr ? ltdr : ltd;
    if (sub && !devices) return parse_err(lw, &sub->loc, "'%.*s' needs devices=[...]", TOKF(sub->t));
    if (!kind && !devices)
        return parse_err(lw, &brace->loc, "sharding has no kind: expected replicated, maximal device=N, manual, "
                                          "unknown or devices=[...]");
    if (ltdr && ltd) return parse_err(lw, &ltd->loc, "use either last_tile_dim_replicate or last_tile_dims=, not both");
    int32_t n_sub = ltdr ? 1 : s->n_subgroups;
    if (devices && n_sub > s->n_tile_dims)
        return parse_err(lw, &sub->loc, "%d subgroup dimension%s but only %d tile dimension%s", n_sub,
                         n_sub == 1 ? "" : "s", s->n_tile_dims, s->n_tile_dims == 1 ? "" : "s");
    return true;
}

/* {replicated} {maximal device=0} {devices=[2,2]0,1,2,3 last_tile_dim_replicate} ... */
static bool sh_positional(Lower *lw, const AstVal *brace, const ShItems *its, ShardingSyntax *s)
{
    static const char *const kinds[] = {"replicated", "maximal", "manual", "unknown", "unreduced"};
    static const ShardingSyntaxKind kind_of[] = {SSYN_REPLICATED, SSYN_MAXIMAL, SSYN_MANUAL, SSYN_UNKNOWN,
                                                 SSYN_UNREDUCED};
    const AstVal *kind = NULL, *device = NULL, *devices = NULL, *ltdr = NULL, *ltd = NULL;
    for (int32_t i = 0; i < its->n; i++) {
        const AstVal *v = its->it[i].v;
        if (!v)
            return parse_err(lw, item_loc(its, i),
                             "unexpected ',' before %s in sharding (items are separated by spaces)",
                             item_describe(lw, its, i + 1));
        int k = -1;
        for (int q = 0; q < 5; q++)
            if (is_word(v, kinds[q])) k = q;
        if (k >= 0) {
            if (kind)
                return parse_err(lw, &v->loc, "sharding has two kinds, '%.*s' and '%.*s'", TOKF(kind->t),
                                 TOKF(v->t));
            kind = v;
            s->kind = kind_of[k];
        } else if (is_word(v, "last_tile_dim_replicate")) {
            ltdr = v;
            s->last_tile_dim_replicate = true;
        } else if (is_word(v, "shard_as") || is_word(v, "shard_like")) {
            int64_t g;
            if (i + 1 >= its->n || !parse_int_of(lw, its->it[i + 1].v, describe(lw, v), &g)) return false;
            i++; /* accepted and ignored */
        } else if (v->kind == AV_ATTR && ast_tok_eq(v->t, "device")) {
            if (!parse_int_of(lw, v->child, "device=", &s->device)) return false;
            if (s->device < 0) return parse_err(lw, &v->child->loc, "device ids must be non-negative");
            device = v;
        } else if (v->kind == AV_ATTR && ast_tok_eq(v->t, "devices") && !devices) {
            devices = v;
            s->kind = SSYN_TILED;
            if (!sh_devices(lw, its, &i, s)) return false;
        } else if (v->kind == AV_ATTR && ast_tok_eq(v->t, "last_tile_dims") && !ltd) {
            ltd = v;
            if (!sh_subgroups(lw, v, s)) return false;
        } else if (!(v->kind == AV_ATTR && ast_tok_eq(v->t, "metadata"))) {
            return parse_err(lw, &v->loc, "unexpected %s in sharding", describe(lw, v));
        }
    }
    return sh_check_positional(lw, brace, kind, device, devices, ltdr, ltd, s);
}

/* ---------------------------------------------------------------- named (mesh) form */

typedef struct AxisUse {
    bool full;
    int32_t n_sub;
} AxisUse;

/* `x`, `'x'`, `"x"`, or a sub-axis `x:(pre)size` / `'x':(pre)size` (one element's prims). */
static bool sh_axis_ref(Lower *lw, const AstVal *e, ShardingSyntax *s, AxisUse *use, AxisRefSyntax *out)
{
    const AstVal *p = e->child, *pre = NULL, *size = NULL;
    bool sub = false;
    if (p && p->kind == AV_LABEL) {
        sub = true;
        pre = p->next;
    } else if (p && p->kind == AV_STRING && p->next && p->next->kind == AV_PUNCT && p->next->punct == AP_COLON) {
        sub = true;
        pre = p->next->next;
    }
    size = pre ? pre->next : NULL;
    if (!p || (!sub && ((p->kind != AV_WORD && p->kind != AV_STRING) || p->next)) ||
        (sub && (!is_group(pre, AV_PAREN) || !elem_single(pre->child) || !size || size->next)))
        return parse_err(lw, &e->loc, "expected a mesh axis like x or x:(2)2, found %s", describe(lw, e));
    int32_t a = -1;
    for (int32_t k = 0; k < s->n_mesh_axes; k++)
        if (ast_tok_eq(p->t, s->mesh_axis_names[k])) a = k;
    if (a < 0) return parse_err(lw, &p->loc, "axis '%.*s' is not in the sharding's mesh", TOKF(p->t));
    memset(out, 0, sizeof *out);
    out->name = s->mesh_axis_names[a];
    out->span = ast_span(lw->cx, &e->loc);
    if (sub) {
        if (!parse_int_of(lw, elem_single(pre->child), "sub-axis", &out->pre_size) ||
            !parse_int_of(lw, size, "sub-axis", &out->size))
            return false;
        int64_t whole = s->mesh_axis_sizes[a], span = mul_capped(out->pre_size, out->size, whole);
        if (out->pre_size < 1 || out->size < 1 || span < 0 || whole % span != 0)
            return parse_err(lw, &e->loc, "sub-axis %s:(%lld)%lld does not fit axis '%s' of size %lld", out->name,
                             (long long)out->pre_size, (long long)out->size, out->name, (long long)whole);
    } else {
        out->size = s->mesh_axis_sizes[a];
    }
    if (use[a].full || (!sub && use[a].n_sub))
        return parse_err(lw, &e->loc, "axis '%s' is used twice in one sharding", out->name);
    if (sub) use[a].n_sub++;
    else use[a].full = true;
    return true;
}

/* `{x, y}` axis lists (replicated=, unreduced=, manual=). */
static bool sh_axis_list(Lower *lw, const AstVal *v, ShardingSyntax *s, AxisUse *use, AxisRefSyntax **out,
                         int32_t *n)
{
    const AstVal *g = v->child;
    if (!is_group(g, AV_BRACE)) return parse_err(lw, &v->loc, "%.*s= expects a list of axes like {x, y}", TOKF(v->t));
    *n = ast_count(g->child);
    *out = ARENA_ARRAY(lw->m->syntax_arena, AxisRefSyntax, *n ? *n : 1);
    int32_t k = 0;
    for (const AstVal *e = g->child; e; e = e->next)
        if (!sh_axis_ref(lw, e, s, use, &(*out)[k++])) return false;
    return true;
}

/* The N of a dim's `p<N>` priority word, or -1 if w is no such word. */
static int64_t priority_word(const AstVal *w)
{
    if (!w || w->kind != AV_WORD || w->t.n < 2 || w->t.s[0] != 'p')
        return -1;
    int64_t n = 0;
    for (size_t k = 1; k < w->t.n; k++) {
        if (w->t.s[k] < '0' || w->t.s[k] > '9' || n > 1000)
            return -1;
        n = n * 10 + (w->t.s[k] - '0');
    }
    return n;
}

/* `[{x}, {y, ?}, {}]`: one entry per tensor dim; `?` (last) marks it open;
 * a `p<N>` after a dim is its priority (Shardy's user priorities). */
static bool sh_dims(Lower *lw, const AstVal *v, ShardingSyntax *s, AxisUse *use)
{
    int32_t nd = ast_count(v->child);
    if (nd > SPMDC_MAX_RANK) return parse_err(lw, &v->loc, "sharding lists more than %d dimensions", SPMDC_MAX_RANK);
    s->n_dims = nd;
    s->dim_n_axes = ARENA_ARRAY(lw->m->syntax_arena, int32_t, nd ? nd : 1);
    s->dim_axes = ARENA_ARRAY(lw->m->syntax_arena, AxisRefSyntax *, nd ? nd : 1);
    int32_t d = 0;
    for (const AstVal *e = v->child; e; e = e->next, d++) {
        const AstVal *g = elem_single(e);
        if (!g && e->child && e->child->next && !e->child->next->next && is_group(e->child, AV_BRACE)) {
            int64_t prio = priority_word(e->child->next);
            if (prio < 0 || prio > 254)
                return parse_err(lw, &e->child->next->loc,
                                 "expected a priority like p0 after a dimension sharding, found %s",
                                 describe(lw, e->child->next));
            g = e->child;
            s->dim_priority[d] = (uint8_t)(prio + 1);
        }
        if (!is_group(g, AV_BRACE))
            return parse_err(lw, &e->loc, "expected a dimension sharding like {x} or {}, found %s", describe(lw, e));
        int32_t n = ast_count(g->child);
        s->dim_axes[d] = ARENA_ARRAY(lw->m->syntax_arena, AxisRefSyntax, n ? n : 1);
        for (const AstVal *a = g->child; a; a = a->next) {
            const AstVal *q = elem_single(a);
            if (q && q->kind == AV_PUNCT && q->punct == AP_QUESTION) {
                if (a->next) return parse_err(lw, &q->loc, "'?' must come last in a dimension sharding");
                s->open_dims |= 1u << d;
            } else if (!sh_axis_ref(lw, a, s, use, &s->dim_axes[d][s->dim_n_axes[d]++])) {
                return false;
            }
        }
    }
    return true;
}

/* mesh[x=2,y=4] or maximal_mesh[device_id=3]. */
static bool sh_mesh(Lower *lw, const AstVal *word, const AstVal *axes, ShardingSyntax *s)
{
    if (is_word(word, "maximal_mesh")) {
        const AstVal *a = elem_single(axes->child);
        if (!a || a->kind != AV_ATTR || !ast_tok_eq(a->t, "device_id") ||
            !parse_int_of(lw, a->child, "device_id=", &s->device))
            return parse_err(lw, &axes->loc, "maximal_mesh expects [device_id=N]");
        s->kind = SSYN_MAXIMAL;
        return true;
    }
    int64_t prod = 1;
    for (const AstVal *e = axes->child; e; e = e->next) {
        /* x=2 (ATTR), or 'x'=2 / "x"=2 (STRING '=' INT) */
        const AstVal *a = e->child, *sz = NULL;
        if (a && a->kind == AV_ATTR && !a->next)
            sz = a->child;
        else if (a && a->kind == AV_STRING && a->next && a->next->punct == AP_EQ && a->next->next &&
                 !a->next->next->next)
            sz = a->next->next;
        if (!sz) return parse_err(lw, &e->loc, "expected a mesh axis like x=2, found %s", describe(lw, e));
        if (s->n_mesh_axes == SPMDC_MAX_MESH_AXES)
            return parse_err(lw, &e->loc, "mesh has more than %d axes", SPMDC_MAX_MESH_AXES);
        if (a->t.n >= 32 || a->t.n == 0 || memchr(a->t.s, 0, a->t.n))
            return parse_err(lw, &a->loc, "mesh axis name '%.*s' is empty or longer than 31 bytes", TOKF(a->t));
        for (int32_t k = 0; k < s->n_mesh_axes; k++)
            if (ast_tok_eq(a->t, s->mesh_axis_names[k]))
                return parse_err(lw, &a->loc, "mesh axis '%.*s' is declared twice", TOKF(a->t));
        int64_t size;
        if (!parse_int_of(lw, sz, "mesh axis size", &size)) return false;
        prod = mul_capped(prod, size, SPMDC_MAX_DEVICES);
        if (size < 1 || prod < 0)
            return parse_err(lw, &sz->loc, "mesh axis sizes must be at least 1 and the mesh at most %d devices",
                             SPMDC_MAX_DEVICES);
        NameEnt *in = name_find(lw->axis_names, a->t.s, a->t.n);
        if (!in) {
            char *copy = ast_tok_str(lw->m->syntax_arena, a->t);
            in = name_add(lw->keep, &lw->axis_names, copy, a->t.n, 0, NULL);
        }
        s->mesh_axis_names[s->n_mesh_axes] = in->key;
        s->mesh_axis_sizes[s->n_mesh_axes++] = size;
    }
    s->kind = SSYN_NAMED;
    return true;
}

/* One item after the mesh: [dims], a bare kind word, or an axis-list attribute. */
static bool sh_named_item(Lower *lw, const AstVal *v, ShardingSyntax *s, AxisUse *use, bool *has_dims)
{
    if (is_group(v, AV_BRACKET) && !*has_dims && s->kind == SSYN_NAMED) {
        *has_dims = true;
        return sh_dims(lw, v, s, use);
    }
    if ((is_word(v, "replicated") || is_word(v, "manual") || is_word(v, "unreduced")) && !*has_dims) {
        s->named_replicated |= is_word(v, "replicated");
        s->named_manual |= is_word(v, "manual");
        s->named_unreduced |= is_word(v, "unreduced");
        return true;
    }
    if (v->kind == AV_ATTR && ast_tok_eq(v->t, "replicated") && !s->replicated_axes)
        return sh_axis_list(lw, v, s, use, &s->replicated_axes, &s->n_replicated_axes);
    if (v->kind == AV_ATTR && ast_tok_eq(v->t, "unreduced") && !s->unreduced_axes)
        return sh_axis_list(lw, v, s, use, &s->unreduced_axes, &s->n_unreduced_axes);
    if (v->kind == AV_ATTR && ast_tok_eq(v->t, "manual") && !s->manual_axes)
        return sh_axis_list(lw, v, s, use, &s->manual_axes, &s->n_manual_axes);
    if (v->kind == AV_ATTR && ast_tok_eq(v->t, "metadata")) return true;
    if (v->kind == AV_ATTR && ast_tok_eq(v->t, "device_ids"))
        return parse_err(lw, &v->loc, "device_ids= in a mesh is not supported (spmdc numbers mesh devices in order)");
    return parse_err(lw, &v->loc, "unexpected %s in a mesh sharding", describe(lw, v));
}

/* {mesh[x=2,y=4], [{x}, {}], replicated={y}} and {maximal_mesh[device_id=0]}. */
static bool sh_named(Lower *lw, const ShItems *its, ShardingSyntax *s)
{
    if (its->n < 2 || !is_group(its->it[1].v, AV_BRACKET))
        return parse_err(lw, item_loc(its, 0), "expected the mesh axes like mesh[x=2,y=4]");
    if (!sh_mesh(lw, its->it[0].v, its->it[1].v, s)) return false;
    AxisUse use[SPMDC_MAX_MESH_AXES];
    memset(use, 0, sizeof use);
    bool has_dims = false;
    for (int32_t i = 2; i < its->n; i += 2) {
        if (its->it[i].v || i + 1 >= its->n || !its->it[i + 1].v)
            return parse_err(lw, item_loc(its, i), "expected ',' between the parts of a mesh sharding, found %s",
                             item_describe(lw, its, i));
        if (!sh_named_item(lw, its->it[i + 1].v, s, use, &has_dims)) return false;
    }
    if (s->kind == SSYN_NAMED && !has_dims && !s->named_replicated && !s->named_manual && !s->named_unreduced)
        return parse_err(lw, item_loc(its, 1), "mesh sharding needs per-dimension axes like [{x}, {}] or a kind "
                                               "(replicated, manual, unreduced)");
    return true;
}

/* One sharding (not a tuple) written as the brace group v. */
static bool sh_single(Lower *lw, const AstVal *v, ShardingSyntax *s)
{
    memset(s, 0, sizeof *s);
    s->span = ast_span(lw->cx, &v->loc);
    ShItems its = sh_flatten(lw, v);
    if (its.n == 0) return parse_err(lw, &v->loc, "empty sharding '{}' inside a tuple sharding");
    const AstVal *first = its.it[0].v;
    if (is_word(first, "mesh") || is_word(first, "maximal_mesh")) return sh_named(lw, &its, s);
    return sh_positional(lw, v, &its, s);
}

/* sharding=: a single sharding or a flat tuple `{{...}, {...}}` (`{}` = empty tuple). */
/* ---------------------------------------------------------------- shared texts */

/* The syntax read for one instruction's one-line sharding text, and where
 * the text began (its spans are on that line). */
typedef struct SharedSyntax {
    const char *s;
    uint32_t n;
    const ShardingSyntax *syn;
    uint32_t line, col;
} SharedSyntax;

static bool shared_same(const void *stored, const void *item)
{
    const SharedSyntax *a = stored, *b = item;
    return a->n == b->n && memcmp(a->s, b->s, a->n) == 0;
}

/* An AV_SHARED value (an instruction's whole sharding, or a tuple's leaf):
 * the record of an earlier instruction's sharding of the same text, and in
 * *at where this text is; NULL after an error.  The scanner makes such a
 * token only of a text it saw before after an instruction's `sharding=`,
 * where it was lowered here (the parse without LAC, whose module is kept
 * only when it reported nothing); should it not be found, the error sends
 * the input to the LAC parser, which reads every sharding itself. */
static const SharedSyntax *find_shared(Lower *lw, const AstVal *v, SrcLoc *at)
{
    SharedSyntax probe = {v->t.s, v->t.n, NULL, 0, 0};
    uint32_t slot;
    const SharedSyntax *e = intern_find(&lw->shared_syntax, (uint32_t)v->t.i, &probe, shared_same, &slot);
    if (!e) {
        parse_err(lw, &v->loc, "sharding %s was not read before", describe(lw, v));
        return NULL;
    }
    *at = ast_span(lw->cx, &v->loc).begin;
    return e;
}

/* An instruction's whole sharding as an AV_SHARED value: the earlier
 * syntax itself; lw->move says where this text is (the instruction's
 * HloSyntaxMove, recorded by lower_inst once it has its index). */
static const ShardingSyntax *shared_sharding(Lower *lw, const AstVal *v)
{
    SrcLoc at;
    const SharedSyntax *e = find_shared(lw, v, &at);
    if (!e) return NULL;
    lw->move = (HloSyntaxMove){-1, -1, e->syn, at.line, (int32_t)((int64_t)at.col - (int64_t)e->col)};
    return e->syn;
}

/* Keeps syn, read from the brace group v of an instruction's sharding, for
 * AV_SHARED values of the same text (one line only: the scanner makes no
 * SHARDING token of a text with a line break). */
static void share_syntax(Lower *lw, const AstVal *v, const ShardingSyntax *syn)
{
    const char *s = lw->cx->text + v->loc.off;
    uint32_t n = v->loc.end - v->loc.off, slot;
    if (memchr(s, '\n', n) || memchr(s, '\r', n)) return;
    SharedSyntax probe = {s, n, NULL, 0, 0};
    uint32_t h = ast_name_hash(s, n);
    if (intern_find(&lw->shared_syntax, h, &probe, shared_same, &slot)) return;
    SrcLoc at = ast_span(lw->cx, &v->loc).begin;
    SharedSyntax *e = ARENA_NEW(lw->keep, SharedSyntax);
    *e = (SharedSyntax){s, n, syn, at.line, at.col};
    intern_add(&lw->shared_syntax, slot, h, e);
}

/* A tuple's leaf read as a SHARDING_LEAF token (ast_scan_sharding_leaf):
 * into *out, the syntax an earlier instruction's sharding of the same
 * text gave, moved to where the leaf is (what sh_single would read there). */
static bool shared_leaf(Lower *lw, const AstVal *v, ShardingSyntax *out)
{
    SrcLoc at;
    const SharedSyntax *e = find_shared(lw, v, &at);
    if (!e) return false;
    sharding_syntax_move_into(out, e->syn, at.line, (int64_t)at.col - (int64_t)e->col, lw->m->syntax_arena);
    return true;
}

static const ShardingSyntax *lower_sharding_group(Lower *lw, const AstVal *attr, const AstVal *v);

const ShardingSyntax *parse_lower_sharding(Lower *lw, const AstVal *attr, const AstVal *v)
{
    if (v->kind == AV_SHARED) return shared_sharding(lw, v);
    int errors = lw->n_errors;
    const ShardingSyntax *s = lower_sharding_group(lw, attr, v);
    if (s && lw->share_shardings && lw->n_errors == errors) share_syntax(lw, v, s);
    return s;
}

/* parse_lower_sharding of a value that is no AV_SHARED one. */
static const ShardingSyntax *lower_sharding_group(Lower *lw, const AstVal *attr, const AstVal *v)
{
    if (!is_group(v, AV_BRACE)) {
        parse_want(lw, attr, v, "a sharding like {replicated} or {devices=[2,1]0,1}");
        return NULL;
    }
    ShardingSyntax *s = ARENA_NEW(lw->m->syntax_arena, ShardingSyntax);
    const AstVal *first = v->child ? v->child->child : NULL;
    if (first && !is_group(first, AV_BRACE) && first->kind != AV_SHARED) return sh_single(lw, v, s) ? s : NULL;
    s->kind = SSYN_TUPLE;
    s->span = ast_span(lw->cx, &v->loc);
    s->n_elems = ast_count(v->child);
    s->elems = ARENA_ARRAY(lw->m->syntax_arena, ShardingSyntax, s->n_elems ? s->n_elems : 1);
    int32_t k = 0;
    for (const AstVal *e = v->child; e; e = e->next, k++) {
        const AstVal *x = elem_single(e);
        if (x && x->kind == AV_SHARED) { /* a leaf whose text an earlier instruction's sharding had */
            if (!shared_leaf(lw, x, &s->elems[k])) return NULL;
            continue;
        }
        if (!is_group(x, AV_BRACE)) {
            parse_err(lw, &e->loc, "a tuple sharding lists one {...} per tuple element, found %s", describe(lw, e));
            return NULL;
        }
        const AstVal *inner = x->child ? x->child->child : NULL;
        if (is_group(inner, AV_BRACE)) {
            parse_err(lw, &x->loc, "nested tuple shardings are not allowed: list one sharding per leaf, flat");
            return NULL;
        }
        if (!sh_single(lw, x, &s->elems[k])) return NULL;
    }
    return s;
}

