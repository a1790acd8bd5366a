/* sdy.c - read a Shardy `xla.sdy.sharding` string into a ShardingSyntax
 * (see sdy.h).
 *
 * After the key, the value is a C-escaped string: `#sdy.sharding<@mesh,
 * [dims]( , replicated={..})?( , unreduced={..})?>` or the same inside
 * `#sdy.sharding_per_value<[<...>]>` with exactly one entry.  A dim is
 * `{}` / `{"x", "y"}` / `{"x":(2)2}` with an optional trailing `?` (open)
 * and `pN` priority (ignored).  Escapes are skipped as we scan: a `\"` is a
 * quote.  Anything else makes the reader give up quietly.
 */
#include "spmdc/sdy.h"

#include <stdlib.h>
#include <string.h>

typedef struct Rd {
    const char *p;
} Rd;

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

/* `{` axes [`?`] `}` [`p` N] into a run of axis refs. */
static bool read_dim(Rd *r, Arena *arena, AxisRefSyntax **axes, int32_t *n, bool *open)
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
    if (*r->p == 'p') /* priority: no effect on partitioning */
        for (r->p++; *r->p >= '0' && *r->p <= '9'; r->p++) {}
    *axes = *n ? arena_memdup(arena, tmp, sizeof(AxisRefSyntax) * (size_t)*n) : NULL;
    return true;
}

/* `<@mesh, [dims] ...>` after the opening '<'. */
static bool read_tensor(Rd *r, const Mesh *mesh, Arena *arena, ShardingSyntax *out)
{
    if (!eat(r, '@')) return false;
    while (*r->p && *r->p != ',' && *r->p != '>') r->p++; /* the mesh name: the module has one mesh */
    if (!eat(r, ',') || !eat(r, '[')) return false;
    AxisRefSyntax *dims[SPMDC_MAX_RANK];
    int32_t counts[SPMDC_MAX_RANK], nd = 0;
    uint32_t open = 0;
    skip(r);
    while (*r->p != ']') {
        bool o;
        if (nd == SPMDC_MAX_RANK || !read_dim(r, arena, &dims[nd], &counts[nd], &o)) return false;
        if (o) open |= 1u << nd;
        nd++;
        skip(r);
        if (*r->p == ',') r->p++;
        skip(r);
    }
    r->p++;
    skip(r);
    if (*r->p != '>') return false; /* replicated= / unreduced= lists: not read yet */
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
            if (a < 0) return false;
            if (ax->pre_size == 0) ax->size = mesh->axes[a].size;
        }
    }
    out->open_dims = open;
    return true;
}

bool sdy_sharding_syntax(const char *text, const Mesh *mesh, Arena *arena, ShardingSyntax *out)
{
    const char *key = text ? strstr(text, "xla.sdy.sharding=") : NULL;
    if (!key || !mesh->named) return false;
    Rd r = {key + strlen("xla.sdy.sharding=")};
    if (!eat(&r, '"')) return false;
    if (strncmp(r.p, "#sdy.sharding_per_value<[<", 26) == 0) {
        r.p += 26;
        if (!read_tensor(&r, mesh, arena, out)) return false;
        return eat(&r, '>') && eat(&r, ']'); /* exactly one value */
    }
    if (strncmp(r.p, "#sdy.sharding<", 14) == 0) {
        r.p += 14;
        return read_tensor(&r, mesh, arena, out);
    }
    return false;
}
