/* sdy.c - read a Shardy `xla.sdy.sharding` string into a ShardingSyntax
 * (see sdy.h).
 *
 * After the key, the value is a C-escaped string: `#sdy.sharding<@mesh,
 * [dims]( , replicated={..})?( , unreduced={..})?>` or the same inside
 * `#sdy.sharding_per_value<[<...>]>` with exactly one entry.  A dim is
 * `{}` / `{"x", "y"}` / `{"x":(2)2}` with an optional trailing `?` (open)
 * and `pN` priority (propagation's rounds).  Escapes are skipped as we
 * scan: a `\"` is a quote.  Anything else makes the reader give up quietly.
 */
#include "spmdc/sdy.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Rd {
    const char *p;
    const char *meshes;  /* the header's frontend attributes, for the mesh names; NULL: not checked */
    bool unknown;        /* gave up on an axis or mesh name the module does not declare */
} Rd;

/* Whether the header's xla.sdy.meshes declares a mesh called name[0..len)
 * (`name = #sdy.mesh<...>`). */
static bool mesh_declared(const char *meshes, const char *name, size_t len)
{
    const char *list = strstr(meshes, "xla.sdy.meshes");
    if (!list || len == 0) return false;
    for (const char *p = strstr(list, "#sdy.mesh<"); p; p = strstr(p + 1, "#sdy.mesh<")) {
        const char *e = p;
        while (e > list && (e[-1] == ' ' || e[-1] == '=')) e--; /* back over ` = ` */
        const char *b = e;
        while (b > list && b[-1] != '{' && b[-1] != ',' && b[-1] != ' ' && b[-1] != '"' && b[-1] != '\\') b--;
        if ((size_t)(e - b) == len && memcmp(b, name, len) == 0) return true;
    }
    return false;
}

static void skip(Rd *r)
{
    while (*r->p == ' ' || *r->p == '\\') r->p++;
}

static bool eat(Rd *r, char c)
{
    skip(r);
    if (*r->p != c) return false;
    r->p++;
    return true;
}

static bool read_int(Rd *r, int64_t *v)
{
    skip(r);
    char *end;
    long long x = strtoll(r->p, &end, 10);
    if (end == r->p || x < 1) return false;
    *v = x;
    r->p = end;
    return true;
}

/* `"name"` or `"name":(pre)size` */
static bool read_axis(Rd *r, Arena *arena, AxisRefSyntax *ax)
{
    memset(ax, 0, sizeof *ax); /* no span: the string's instruction is the location */
    if (!eat(r, '"')) return false;
    const char *s = r->p;
    while (*r->p && *r->p != '"' && *r->p != '\\') r->p++;
    if (r->p == s) return false;
    ax->name = arena_strndup(arena, s, (size_t)(r->p - s));
    if (!eat(r, '"')) return false;
    ax->pre_size = 0;
    ax->size = 0;
    skip(r);
    if (*r->p == ':') {
        r->p++;
        if (!eat(r, '(') || !read_int(r, &ax->pre_size) || !eat(r, ')') || !read_int(r, &ax->size)) return false;
    }
    return true;
}

/* `{` axes [`?`] `}` [`p` N] into a run of axis refs; *prio gets 1 + N
 * (0 without a priority). */
static bool read_dim(Rd *r, Arena *arena, AxisRefSyntax **axes, int32_t *n, bool *open, uint8_t *prio)
{
    if (!eat(r, '{')) return false;
    AxisRefSyntax tmp[SPMDC_MAX_ATOMS];
    *n = 0;
    *open = false;
    for (;;) {
        skip(r);
        if (*r->p == '}') break;
        if (*r->p == '?') {
            r->p++;
            *open = true;
            continue;
        }
        if (*r->p == ',') {
            r->p++;
            continue;
        }
        if (*n == SPMDC_MAX_ATOMS || !read_axis(r, arena, &tmp[*n])) return false;
        (*n)++;
    }
    r->p++;
    *prio = 0;
    if (*r->p == 'p') { /* Shardy's user priority of the dim */
        int64_t v = 0;
        const char *start = ++r->p;
        for (; *r->p >= '0' && *r->p <= '9' && v <= 254; r->p++)
            v = v * 10 + (*r->p - '0');
        if (r->p == start || v > 254) return false;
        *prio = (uint8_t)(v + 1);
    }
    *axes = *n ? arena_memdup(arena, tmp, sizeof(AxisRefSyntax) * (size_t)*n) : NULL;
    return true;
}

/* Writes the reason a string is not read; always false. */
static bool failf(char *why, size_t whylen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool failf(char *why, size_t whylen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
    return false;
}

/* `<@mesh, [dims] ...>` after the opening '<'; false with a reason. */
static bool read_tensor(Rd *r, const Mesh *mesh, Arena *arena, ShardingSyntax *out, char *why, size_t whylen)
{
    if (!eat(r, '@')) return failf(why, whylen, "expected '@mesh'");
    const char *name = r->p;
    while (*r->p && *r->p != ',' && *r->p != '>' && *r->p != ' ') r->p++; /* the module has one mesh */
    if (r->meshes && !mesh_declared(r->meshes, name, (size_t)(r->p - name))) {
        r->unknown = true;
        return failf(why, whylen, "mesh @%.*s is not declared in the header's xla.sdy.meshes",
                     (int)(r->p - name), name);
    }
    if (!eat(r, ',') || !eat(r, '[')) return failf(why, whylen, "expected a list of dimension shardings");
    AxisRefSyntax *dims[SPMDC_MAX_RANK];
    int32_t counts[SPMDC_MAX_RANK], nd = 0;
    uint32_t open = 0;
    uint8_t prio[SPMDC_MAX_RANK] = {0};
    skip(r);
    while (*r->p != ']') {
        bool o;
        if (nd == SPMDC_MAX_RANK || !read_dim(r, arena, &dims[nd], &counts[nd], &o, &prio[nd]))
            return failf(why, whylen, "malformed sharding of dimension %d", (int)nd);
        if (o) open |= 1u << nd;
        nd++;
        skip(r);
        if (*r->p == ',') r->p++;
        skip(r);
    }
    r->p++;
    skip(r);
    /* `, replicated={...}` and `, unreduced={...}`, in either order */
    AxisRefSyntax *lists[2] = {NULL, NULL};
    int32_t nlists[2] = {0, 0};
    while (*r->p == ',') {
        r->p++;
        skip(r);
        int k = strncmp(r->p, "replicated=", 11) == 0 ? 0 : strncmp(r->p, "unreduced=", 10) == 0 ? 1 : -1;
        if (k < 0 || lists[k]) return failf(why, whylen, "expected replicated={...} or unreduced={...}");
        r->p += k == 0 ? 11 : 10;
        AxisRefSyntax *axes;
        int32_t n;
        bool o;
        uint8_t pr;
        if (!read_dim(r, arena, &axes, &n, &o, &pr) || o || pr)
            return failf(why, whylen, "malformed %s axis list", k == 0 ? "replicated" : "unreduced");
        lists[k] = axes ? axes : ARENA_ARRAY(arena, AxisRefSyntax, 1);
        nlists[k] = n;
        skip(r);
    }
    if (*r->p != '>')
        return failf(why, whylen, "unexpected text after the dimension shardings");
    memset(out, 0, sizeof *out);
    out->kind = SSYN_NAMED;
    out->n_mesh_axes = mesh->n_axes;
    for (int32_t i = 0; i < mesh->n_axes; i++) {
        out->mesh_axis_names[i] = arena_strdup(arena, mesh->axes[i].name);
        out->mesh_axis_sizes[i] = mesh->axes[i].size;
    }
    out->n_dims = nd;
    out->dim_n_axes = ARENA_ARRAY(arena, int32_t, nd ? nd : 1);
    out->dim_axes = ARENA_ARRAY(arena, AxisRefSyntax *, nd ? nd : 1);
    for (int32_t d = 0; d < nd; d++) {
        out->dim_n_axes[d] = counts[d];
        out->dim_axes[d] = dims[d];
        for (int32_t k = 0; k < counts[d]; k++) {
            AxisRefSyntax *ax = &dims[d][k];
            int32_t a = mesh_axis_index(mesh, ax->name);
            if (a < 0) r->unknown = true;
            if (a < 0) return failf(why, whylen, "axis '%s' is not in the mesh", ax->name);
            if (ax->pre_size == 0) ax->size = mesh->axes[a].size;
        }
    }
    for (int k = 0; k < 2; k++)
        for (int32_t j = 0; j < nlists[k]; j++) {
            AxisRefSyntax *ax = &lists[k][j];
            int32_t a = mesh_axis_index(mesh, ax->name);
            if (a < 0) r->unknown = true;
            if (a < 0) return failf(why, whylen, "axis '%s' is not in the mesh", ax->name);
            if (ax->pre_size == 0) ax->size = mesh->axes[a].size;
        }
    out->replicated_axes = lists[0];
    out->n_replicated_axes = nlists[0];
    out->unreduced_axes = lists[1];
    out->n_unreduced_axes = nlists[1];
    out->open_dims = open;
    memcpy(out->dim_priority, prio, sizeof prio);
    return true;
}

SdyResult sdy_sharding_syntax(const char *text, const char *module_attrs, const Mesh *mesh, Arena *arena,
                              ShardingSyntax *out, char *why, size_t whylen)
{
    const char *key = text ? strstr(text, "xla.sdy.sharding=") : NULL;
    if (!key) return SDY_NONE;
    const char *meshes = module_attrs && strstr(module_attrs, "xla.sdy.meshes") ? module_attrs : NULL;
    Rd r = {key + strlen("xla.sdy.sharding="), meshes, false};
    why[0] = 0;
    if (!eat(&r, '"')) {
        snprintf(why, whylen, "expected a string");
        return SDY_UNREADABLE;
    }
    if (strncmp(r.p, "#sdy.sharding_per_value<[<", 26) == 0) {
        r.p += 26;
        if (!read_tensor(&r, mesh, arena, out, why, whylen)) return r.unknown ? SDY_UNKNOWN_NAME : SDY_UNREADABLE;
        if (eat(&r, '>') && eat(&r, ']')) return SDY_OK;
        snprintf(why, whylen, "it describes several values");
        return SDY_UNREADABLE;
    }
    if (strncmp(r.p, "#sdy.sharding<", 14) == 0) {
        r.p += 14;
        return read_tensor(&r, mesh, arena, out, why, whylen) ? SDY_OK : r.unknown ? SDY_UNKNOWN_NAME : SDY_UNREADABLE;
    }
    snprintf(why, whylen, "expected #sdy.sharding<...> or #sdy.sharding_per_value<[...]>");
    return SDY_UNREADABLE;
}

/* Reads `"name"=size, ...` after "#sdy.mesh<[" (quotes may be escaped).
 * Returns the number of axes, 0 if malformed. */
static int32_t scan_mesh_axes(const char *p, char names[][32], int64_t *sizes)
{
    int32_t n = 0;
    for (;;) {
        while (*p == ' ' || *p == '\\') p++;
        if (*p == ']') return n;
        if (*p++ != '"' || n == SPMDC_MAX_MESH_AXES) return 0;
        size_t len = 0;
        while (*p && *p != '"' && *p != '\\' && len < 31) names[n][len++] = *p++;
        names[n][len] = 0;
        while (*p == '\\') p++;
        if (*p++ != '"' || *p++ != '=' || len == 0) return 0;
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 1) return 0;
        sizes[n++] = v;
        p = end;
        while (*p == ' ') p++;
        if (*p == ',') p++;
        else if (*p != ']') return 0;
    }
}

bool sdy_module_mesh(const char *text, Mesh *out)
{
    if (!text || !strstr(text, "xla.sdy.meshes")) return false;
    const char *hit = NULL;
    for (const char *p = strstr(text, "#sdy.mesh<["); p; p = strstr(p + 1, "#sdy.mesh<[")) {
        if (p[11] == ']') continue; /* empty or maximal mesh */
        if (hit) return false;      /* several meshes: no single answer */
        hit = p;
    }
    if (!hit) return false;
    char names[SPMDC_MAX_MESH_AXES][32];
    int64_t sizes[SPMDC_MAX_MESH_AXES];
    int32_t k = scan_mesh_axes(hit + 11, names, sizes);
    const char *ptrs[SPMDC_MAX_MESH_AXES];
    for (int32_t i = 0; i < k; i++) ptrs[i] = names[i];
    char err[200];
    if (k == 0 || !mesh_init(out, k, ptrs, sizes, err, sizeof err)) return false;
    out->named = true;
    return true;
}

SdyResult sdy_sharding_list(const char *text, const char *key, const Mesh *mesh, Arena *arena, ShardingSyntax *out,
                            int32_t max, int32_t *n, char *why, size_t whylen)
{
    *n = 0;
    why[0] = 0;
    size_t kl = strlen(key);
    const char *hit = NULL;
    for (const char *p = text ? strstr(text, key) : NULL; p; p = strstr(p + 1, key))
        if (p[kl] == '=') {
            hit = p + kl + 1;
            break;
        }
    if (!hit) return SDY_NONE;
    Rd r = {hit, NULL, false};
    if (!eat(&r, '"') || strncmp(r.p, "#sdy.sharding_per_value<[", 25) != 0) {
        snprintf(why, whylen, "expected #sdy.sharding_per_value<[...]>");
        return SDY_UNREADABLE;
    }
    r.p += 25;
    for (;;) {
        skip(&r);
        if (*r.p == ']') return SDY_OK;
        if (*n == max) {
            snprintf(why, whylen, "more than %d values", (int)max);
            return SDY_UNREADABLE;
        }
        if (!eat(&r, '<') || !read_tensor(&r, mesh, arena, &out[*n], why, whylen) || !eat(&r, '>'))
            return SDY_UNREADABLE;
        (*n)++;
        skip(&r);
        if (*r.p == ',') r.p++;
    }
}

SdyResult sdy_manual_axes(const char *text, const Mesh *mesh, uint32_t *axes, char *why, size_t whylen)
{
    *axes = 0;
    why[0] = 0;
    const char *hit = text ? strstr(text, "xla.sdy.manual_axes=") : NULL;
    if (!hit) return SDY_NONE;
    Rd r = {hit + strlen("xla.sdy.manual_axes="), NULL, false};
    if (!eat(&r, '"') || strncmp(r.p, "#sdy<manual_axes{", 17) != 0) {
        snprintf(why, whylen, "expected #sdy<manual_axes{...}>");
        return SDY_UNREADABLE;
    }
    r.p += 17;
    for (;;) {
        skip(&r);
        if (*r.p == '}') return SDY_OK;
        if (*r.p == ',') {
            r.p++;
            continue;
        }
        if (!eat(&r, '"')) {
            snprintf(why, whylen, "malformed manual axes");
            return SDY_UNREADABLE;
        }
        const char *s = r.p;
        while (*r.p && *r.p != '"' && *r.p != '\\') r.p++;
        char name[64];
        size_t len = (size_t)(r.p - s) < sizeof name - 1 ? (size_t)(r.p - s) : sizeof name - 1;
        memcpy(name, s, len);
        name[len] = 0;
        int32_t a = mesh_axis_index(mesh, name);
        if (a < 0 || !eat(&r, '"')) {
            snprintf(why, whylen, "manual axis '%s' is not in the mesh", name);
            return SDY_UNREADABLE;
        }
        *axes |= 1u << a;
    }
}
