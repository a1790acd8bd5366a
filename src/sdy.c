/* sdy.c - read a Shardy `xla.sdy.sharding` string into a ShardingSyntax
 * (see sdy.h).
 *
 * After the key, the value is a C-escaped string: `#sdy.sharding<MESH,
 * [dims]( , replicated={..})?( , unreduced={..})?>` or the same inside
 * `#sdy.sharding_per_value<[<...>]>` with exactly one entry.  MESH is a
 * name `@mesh` declared in the header's xla.sdy.meshes or a mesh written
 * inline, `mesh<["x"=2, "y"=4]>`; both are read by read_mesh, and a sharding
 * over either binds by axis name to the module's mesh (bind.c).  A maximal
 * mesh (`<[], device_ids=[d]>`) makes the sharding {maximal device=d}.  A
 * dim is `{}` / `{"x", "y"}` / `{"x":(2)2}` with an optional trailing `?`
 * (open) and `pN` priority (propagation's rounds).  Escapes are skipped as
 * we scan: a `\"` is a quote.  Malformed text makes the reader give up
 * quietly; a well-formed mesh Shardy's verifier rejects is a fault
 * (SdyFault) with its place in the text, which the parser reports.
 */
#include "spmdc/sdy.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Rd {
    const char *p;
    const char *base;    /* start of the text: fault offsets count from here */
    const char *meshes;  /* the header's frontend attributes, for the mesh names; NULL: not checked */
    bool check_own;      /* the sharding being read has an inline mesh (own): only its axes are allowed */
    SdyMesh own;
    bool unknown;        /* gave up on an axis or mesh name the module does not declare */
    bool faulted;        /* found a fault (in f) */
    SdyFault f;
} Rd;

/* Records a fault at text[at .. at+len); always false. */
static bool fault(Rd *r, const char *at, size_t len, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static bool fault(Rd *r, const char *at, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->f.why, sizeof r->f.why, fmt, ap);
    va_end(ap);
    r->f.at = (size_t)(at - r->base);
    r->f.len = len ? len : 1;
    r->faulted = true;
    return false;
}

/* The body (at its '<') of the mesh the header's xla.sdy.meshes declares
 * under name[0..len) (`name = #sdy.mesh<...>`), or NULL. */
static const char *mesh_declared(const char *meshes, const char *name, size_t len)
{
    const char *list = strstr(meshes, "xla.sdy.meshes");
    if (!list || len == 0) return NULL;
    for (const char *p = strstr(list, "#sdy.mesh<"); p; p = strstr(p + 1, "#sdy.mesh<")) {
        const char *e = p;
        while (e > list && (e[-1] == ' ' || e[-1] == '=')) e--; /* back over ` = ` */
        const char *b = e;
        while (b > list && b[-1] != '{' && b[-1] != ',' && b[-1] != ' ' && b[-1] != '"' && b[-1] != '\\') b--;
        if ((size_t)(e - b) == len && memcmp(b, name, len) == 0) return p + 9;
    }
    return NULL;
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

/* The device_ids list of a mesh body with n_axes axes of `product`
 * devices, at r->p (after `device_ids=`), into out->device (maximal mesh);
 * false on malformed text or a fault. */
static bool read_device_ids(Rd *r, SdyMesh *out, int64_t product)
{
    const char *list = r->p - strlen("device_ids=");
    if (!eat(r, '[')) return false;
    int64_t cap = out->n_axes ? product : 1, n = 0;
    int64_t *ids = xmalloc(sizeof(int64_t) * (size_t)(cap + 1));
    const char **at = xmalloc(sizeof(char *) * (size_t)(cap + 1));
    bool ok = true;
    for (skip(r); ok && *r->p != ']'; skip(r)) {
        char *end;
        ok = !n || eat(r, ',');
        skip(r);
        long long v = strtoll(r->p, &end, 10);
        if (!ok || end == r->p) {
            ok = false;
        } else if (v < 0) {
            ok = fault(r, r->p, (size_t)(end - r->p), "device id %lld is negative", v);
        } else {
            if (n <= cap) { /* beyond: only counted (a wrong count) */
                ids[n] = v;
                at[n] = r->p;
            }
            r->p = end;
            n++;
        }
    }
    ok = ok && eat(r, ']');
    if (ok && out->n_axes == 0 && n != 1)
        ok = fault(r, list, (size_t)(r->p - list), "a mesh without axes takes one device id (the maximal mesh), "
                   "not %lld", (long long)n);
    else if (ok && out->n_axes == 0)
        out->device = ids[0];
    else if (ok && n != product)
        ok = fault(r, list, (size_t)(r->p - list), "device_ids lists %lld devices but the mesh's axes hold %lld",
                   (long long)n, (long long)product);
    unsigned char *seen = ok && out->n_axes ? xmalloc((size_t)product) : NULL;
    if (seen) memset(seen, 0, (size_t)product);
    for (int64_t k = 0; seen && ok && k < n; k++) {
        size_t len = strspn(at[k], "0123456789");
        if (ids[k] >= product || seen[ids[k]])
            ok = fault(r, at[k], len, "device id %lld %s: device_ids must list each of 0..%lld once", (long long)ids[k],
                       ids[k] >= product ? "is out of range" : "is listed twice", (long long)product - 1);
        else
            seen[ids[k]] = 1;
    }
    for (int64_t k = 0; seen && ok && k < n; k++)
        if (ids[k] != k) {
            out->device_ids = list + strlen("device_ids=");
            break;
        }
    free(seen);
    free(ids);
    free(at);
    return ok;
}

/* A mesh body `<["a"=2, "b"=4]>` / `<[], device_ids=[3]>` at r->p (its
 * '<') into *out: the one reader of the header's named meshes and of the
 * meshes written inline.  False on malformed text or a fault (r->faulted):
 * an axis of size < 1, a name given twice or too long, too many axes or
 * devices, bad device_ids. */
static bool read_mesh(Rd *r, SdyMesh *out)
{
    memset(out, 0, sizeof *out);
    out->device = -1;
    if (!eat(r, '<') || !eat(r, '[')) return false;
    int64_t product = 1;
    for (skip(r); *r->p != ']'; skip(r)) {
        if (out->n_axes && !eat(r, ',')) return false;
        skip(r);
        const char *name = r->p;
        if (!eat(r, '"')) return false;
        const char *s = r->p;
        while (*r->p && *r->p != '"' && *r->p != '\\') r->p++;
        size_t len = (size_t)(r->p - s);
        if (!eat(r, '"') || !eat(r, '=')) return false;
        skip(r);
        char *end;
        long long v = strtoll(r->p, &end, 10);
        if (end == r->p) return false;
        const char *num = r->p;
        r->p = end;
        if (len == 0 || len >= sizeof out->names[0])
            return fault(r, len ? s : name, len, "mesh axis names are 1 to %d bytes long",
                         (int)sizeof out->names[0] - 1);
        for (int32_t i = 0; i < out->n_axes; i++)
            if (strlen(out->names[i]) == len && memcmp(out->names[i], s, len) == 0)
                return fault(r, s, len, "axis '%.*s' is declared twice in the mesh", (int)len, s);
        if (v < 1)
            return fault(r, num, (size_t)(end - num), "axis '%.*s' has size %lld; a mesh axis has size at least 1",
                         (int)len, s, v);
        if (out->n_axes == SPMDC_MAX_MESH_AXES)
            return fault(r, name, (size_t)(end - name), "a mesh has at most %d axes", SPMDC_MAX_MESH_AXES);
        if (v > SPMDC_MAX_DEVICES / product)
            return fault(r, name, (size_t)(end - name), "the mesh has more than %d devices", SPMDC_MAX_DEVICES);
        product *= v;
        memcpy(out->names[out->n_axes], s, len);
        out->sizes[out->n_axes++] = v;
    }
    r->p++;
    skip(r);
    if (*r->p == ',') {
        r->p++;
        skip(r);
        if (strncmp(r->p, "device_ids=", 11) != 0) return false;
        r->p += 11;
        if (!read_device_ids(r, out, product)) return false;
    }
    return eat(r, '>');
}

bool sdy_mesh_equal(const SdyMesh *a, const SdyMesh *b)
{
    if (a->n_axes != b->n_axes || a->device != b->device) return false;
    for (int32_t i = 0; i < a->n_axes; i++)
        if (strcmp(a->names[i], b->names[i]) != 0 || a->sizes[i] != b->sizes[i]) return false;
    return true;
}

size_t sdy_read_mesh(const char *text, SdyMesh *out)
{
    Rd r = {.p = text, .base = text};
    return read_mesh(&r, out) ? (size_t)(r.p - text) : 0;
}

/* `mesh<["a"=2, "b"=4]>` of m in buf. */
static const char *mesh_text(const SdyMesh *m, char *buf, size_t len)
{
    size_t k = (size_t)snprintf(buf, len, "mesh<[");
    for (int32_t i = 0; i < m->n_axes && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s\"%s\"=%lld", i ? ", " : "", m->names[i], (long long)m->sizes[i]);
    if (k < len) snprintf(buf + k, len - k, "]>");
    return buf;
}

/* Whether the mesh m has an axis called name. */
static bool has_axis(const SdyMesh *m, const char *name)
{
    for (int32_t i = 0; i < m->n_axes; i++)
        if (strcmp(m->names[i], name) == 0) return true;
    return false;
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
    char mesh[160];
    if (r->check_own && !has_axis(&r->own, ax->name))
        return fault(r, s, (size_t)(r->p - s), "axis '%s' is not an axis of %s, the sharding's mesh", ax->name,
                     mesh_text(&r->own, mesh, sizeof mesh));
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

/* The sharding's mesh at r->p: `@name` (declared in the header's
 * xla.sdy.meshes when r->meshes says which are) or an inline `mesh<...>`.
 * r->own gets the mesh when it is known (*has_own); an inline one's axes
 * are the only ones the sharding may name (r->check_own). */
static bool read_mesh_ref(Rd *r, bool *has_own, char *why, size_t whylen)
{
    *has_own = false;
    r->check_own = false;
    skip(r);
    if (strncmp(r->p, "mesh<", 5) == 0) {
        r->p += 4;
        if (!read_mesh(r, &r->own)) return r->faulted ? false : failf(why, whylen, "malformed inline mesh");
        r->check_own = *has_own = true;
        return true;
    }
    if (!eat(r, '@')) return failf(why, whylen, "expected '@mesh' or an inline mesh<[...]>");
    const char *name = r->p;
    while (*r->p && *r->p != ',' && *r->p != '>' && *r->p != ' ') r->p++;
    if (!r->meshes) return true;
    const char *body = mesh_declared(r->meshes, name, (size_t)(r->p - name));
    if (!body) {
        r->unknown = true;
        return failf(why, whylen, "mesh @%.*s is not declared in the header's xla.sdy.meshes",
                     (int)(r->p - name), name);
    }
    Rd b = {.p = body, .base = body};
    *has_own = read_mesh(&b, &r->own);
    return true;
}

/* `, replicated={...}` and `, unreduced={...}` (either order, each at most
 * once) at r->p into lists[0] and lists[1]. */
static bool read_axis_lists(Rd *r, Arena *arena, AxisRefSyntax *lists[2], int32_t nlists[2], char *why,
                            size_t whylen)
{
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
    return true;
}

/* Binds axes[0..n) to mesh by name (a whole axis takes the mesh's size);
 * false, with r->unknown, for an axis the mesh lacks. */
static bool bind_axes(Rd *r, const Mesh *mesh, AxisRefSyntax *axes, int32_t n, char *why, size_t whylen)
{
    for (int32_t k = 0; k < n; k++) {
        int32_t a = mesh_axis_index(mesh, axes[k].name);
        if (a < 0) {
            r->unknown = true;
            return failf(why, whylen, "axis '%s' is not in the mesh", axes[k].name);
        }
        if (axes[k].pre_size == 0) axes[k].size = mesh->axes[a].size;
    }
    return true;
}

/* The named sharding *out over a mesh whose device_ids are in another
 * order (r->own) as XLA's positional form with its explicit device list:
 * tile dims per tensor dim the product of its axes (a trailing replicated
 * dim for the axes no dim uses), and the device of each tile the mesh's
 * device at those axes' coordinates: device_ids[row-major position over
 * the mesh's axes].  The binder gives such a list its device order.  The
 * module's mesh must be the sharding's (the same axes in the same order),
 * with no sub-axis and no unreduced axis; otherwise the string is not
 * read (the instruction's sharding= is used, or propagation decides).
 * Open dims and priorities have no positional form: the sharding is
 * closed. */
static bool with_device_order(Rd *r, const Mesh *mesh, Arena *arena, ShardingSyntax *out, char *why,
                              size_t whylen)
{
    const SdyMesh *sm = &r->own;
    bool same = sm->n_axes == mesh->n_axes;
    for (int32_t i = 0; same && i < sm->n_axes; i++)
        same = strcmp(sm->names[i], mesh->axes[i].name) == 0 && sm->sizes[i] == mesh->axes[i].size;
    if (!same)
        return failf(why, whylen, "its mesh lists device_ids in another order, which spmdc reads only on that "
                                  "mesh itself (the same axes in the same order)");
    if (out->n_unreduced_axes)
        return failf(why, whylen, "unreduced axes over a mesh with device_ids in another order are not read");
    int32_t axis_of_dim[SPMDC_MAX_RANK][SPMDC_MAX_MESH_AXES], n_of_dim[SPMDC_MAX_RANK];
    bool used[SPMDC_MAX_MESH_AXES] = {false};
    ShardingSyntax t;
    memset(&t, 0, sizeof t);
    t.kind = SSYN_TILED;
    for (int32_t d = 0; d < out->n_dims; d++) {
        n_of_dim[d] = 0;
        int64_t tiles = 1;
        for (int32_t k = 0; k < out->dim_n_axes[d]; k++) {
            const AxisRefSyntax *ax = &out->dim_axes[d][k];
            int32_t a = 0;
            while (a < mesh->n_axes && strcmp(mesh->axes[a].name, ax->name) != 0) a++;
            if (a == mesh->n_axes || ax->pre_size || used[a])
                return failf(why, whylen, "sub-axes over a mesh with device_ids in another order are not read");
            used[a] = true;
            axis_of_dim[d][n_of_dim[d]++] = a;
            tiles *= mesh->axes[a].size;
        }
        t.tile_dims[t.n_tile_dims++] = tiles;
    }
    int32_t rest[SPMDC_MAX_MESH_AXES], n_rest = 0;
    int64_t repl = 1;
    for (int32_t a = 0; a < mesh->n_axes; a++)
        if (!used[a]) {
            rest[n_rest++] = a;
            repl *= mesh->axes[a].size;
        }
    if (repl > 1) {
        t.tile_dims[t.n_tile_dims++] = repl;
        t.last_tile_dim_replicate = true;
    }
    /* the mesh's device ids, row-major over its axes */
    int64_t n = mesh->n_devices;
    int64_t *dev = ARENA_ARRAY(arena, int64_t, n);
    const char *p = sm->device_ids + 1;
    for (int64_t k = 0; k < n; k++) {
        while (*p == ' ' || *p == ',' || *p == '\\') p++;
        dev[k] = strtoll(p, (char **)&p, 10);
    }
    /* tile position (row-major over t.tile_dims) -> mesh coordinates -> id */
    t.n_devices = n;
    t.devices = ARENA_ARRAY(arena, int64_t, n);
    int64_t stride[SPMDC_MAX_MESH_AXES];
    for (int32_t a = mesh->n_axes - 1, s = 1; a >= 0; a--) {
        stride[a] = s;
        s *= (int32_t)mesh->axes[a].size;
    }
    for (int64_t pos = 0; pos < n; pos++) {
        int64_t rem = pos, lin = 0;
        /* the last tile dim varies fastest: peel the digits from the end */
        for (int32_t td = t.n_tile_dims - 1; td >= 0; td--) {
            int64_t digit = rem % t.tile_dims[td];
            rem /= t.tile_dims[td];
            const int32_t *axes = td < out->n_dims ? axis_of_dim[td] : rest;
            int32_t na = td < out->n_dims ? n_of_dim[td] : n_rest;
            for (int32_t k = na - 1; k >= 0; k--) { /* an axis list is major -> minor */
                int64_t size = mesh->axes[axes[k]].size;
                lin += (digit % size) * stride[axes[k]];
                digit /= size;
            }
        }
        t.devices[pos] = dev[lin];
    }
    t.span = out->span;
    *out = t;
    return true;
}

/* `<MESH, [dims] ...>` after the opening '<'; false with a reason.  mesh
 * NULL: only checks the text (sdy_check_meshes), out is not filled. */
static bool read_tensor(Rd *r, const Mesh *mesh, Arena *arena, ShardingSyntax *out, char *why, size_t whylen)
{
    bool has_own;
    if (!read_mesh_ref(r, &has_own, why, whylen)) return false;
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
    AxisRefSyntax *lists[2] = {NULL, NULL};
    int32_t nlists[2] = {0, 0};
    if (!read_axis_lists(r, arena, lists, nlists, why, whylen)) return false;
    if (*r->p != '>')
        return failf(why, whylen, "unexpected text after the dimension shardings");
    r->check_own = false;
    if (!mesh) return true;
    memset(out, 0, sizeof *out);
    if (has_own && r->own.device >= 0) { /* the maximal mesh: one device holds the value */
        out->kind = SSYN_MAXIMAL;
        out->device = r->own.device;
        return true;
    }
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
        if (!bind_axes(r, mesh, dims[d], counts[d], why, whylen)) return false;
    }
    for (int k = 0; k < 2; k++)
        if (!bind_axes(r, mesh, lists[k], nlists[k], why, whylen)) return false;
    out->replicated_axes = lists[0];
    out->n_replicated_axes = nlists[0];
    out->unreduced_axes = lists[1];
    out->n_unreduced_axes = nlists[1];
    out->open_dims = open;
    memcpy(out->dim_priority, prio, sizeof prio);
    if (has_own && r->own.device_ids) return with_device_order(r, mesh, arena, out, why, whylen);
    return true;
}

/* The result of a read that failed: a fault or a name the module lacks is
 * SDY_UNKNOWN_NAME (an error), anything else SDY_UNREADABLE. */
static SdyResult failed(const Rd *r, char *why, size_t whylen)
{
    if (r->faulted) snprintf(why, whylen, "%s", r->f.why);
    return r->unknown || r->faulted ? SDY_UNKNOWN_NAME : SDY_UNREADABLE;
}

SdyResult sdy_sharding_syntax(const char *text, const char *module_attrs, const Mesh *mesh, Arena *arena,
                              ShardingSyntax *out, char *why, size_t whylen)
{
    const char *key = text ? strstr(text, "xla.sdy.sharding=") : NULL;
    if (!key) return SDY_NONE;
    const char *meshes = module_attrs && strstr(module_attrs, "xla.sdy.meshes") ? module_attrs : NULL;
    Rd r = {.p = key + strlen("xla.sdy.sharding="), .base = text, .meshes = meshes};
    why[0] = 0;
    if (!eat(&r, '"')) {
        snprintf(why, whylen, "expected a string");
        return SDY_UNREADABLE;
    }
    if (strncmp(r.p, "#sdy.sharding_per_value<[<", 26) == 0) {
        r.p += 26;
        if (!read_tensor(&r, mesh, arena, out, why, whylen)) return failed(&r, why, whylen);
        if (eat(&r, '>') && eat(&r, ']')) return SDY_OK;
        snprintf(why, whylen, "it describes several values");
        return SDY_UNREADABLE;
    }
    if (strncmp(r.p, "#sdy.sharding<", 14) == 0) {
        r.p += 14;
        return read_tensor(&r, mesh, arena, out, why, whylen) ? SDY_OK : failed(&r, why, whylen);
    }
    snprintf(why, whylen, "expected #sdy.sharding<...> or #sdy.sharding_per_value<[...]>");
    return SDY_UNREADABLE;
}

bool sdy_module_mesh(const char *header, const char *const *inline_meshes, int32_t n, Mesh *out, int32_t *which)
{
    SdyMesh found, m;
    bool have = false;
    *which = -1;
    const char *list = header ? strstr(header, "xla.sdy.meshes") : NULL;
    for (const char *p = list ? strstr(list, "#sdy.mesh<") : NULL; p; p = strstr(p + 1, "#sdy.mesh<")) {
        if (!sdy_read_mesh(p + 9, &m)) return false;
        if (m.n_axes == 0) continue; /* empty or maximal mesh */
        if (have && !sdy_mesh_equal(&found, &m)) return false; /* several meshes: no single answer */
        found = m;
        have = true;
    }
    for (int32_t i = 0; i < n; i++) {
        if (!inline_meshes[i] || !sdy_read_mesh(inline_meshes[i], &m) || m.n_axes == 0) continue;
        if (have && !sdy_mesh_equal(&found, &m)) return false;
        if (!have) *which = i;
        found = m;
        have = true;
    }
    if (!have) return false;
    const char *ptrs[SPMDC_MAX_MESH_AXES];
    for (int32_t i = 0; i < found.n_axes; i++) ptrs[i] = found.names[i];
    char err[200];
    if (!mesh_init(out, found.n_axes, ptrs, found.sizes, err, sizeof err)) return false;
    out->named = true;
    return true;
}

bool sdy_check_meshes(const char *text, Arena *scratch,
                      void (*each)(void *ctx, const SdyMesh *mesh, size_t at, size_t len), void *ctx,
                      SdyFault *fault_out)
{
    for (const char *p = text ? strstr(text, "mesh<") : NULL; p; p = strstr(p + 1, "mesh<")) {
        bool named = p - text >= 5 && memcmp(p - 5, "#sdy.", 5) == 0; /* declared in xla.sdy.meshes */
        const char *q = p;
        while (q > text && q[-1] == ' ') q--;
        if (!named && (q == text || q[-1] != '<')) continue; /* not the mesh of a tensor sharding */
        Rd r = {.p = p + 4, .base = text};
        SdyMesh m;
        bool ok = read_mesh(&r, &m);
        size_t len = (size_t)(r.p - p);
        if (ok && !named) { /* the sharding over it names only its axes */
            r.p = p;
            ShardingSyntax unused;
            char why[8];
            read_tensor(&r, NULL, scratch, &unused, why, sizeof why);
        }
        if (r.faulted) {
            *fault_out = r.f;
            return false;
        }
        if (ok && !named && each) each(ctx, &m, (size_t)(p - text), len);
    }
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
    Rd r = {.p = hit, .base = text};
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
        if (!eat(&r, '<') || !read_tensor(&r, mesh, arena, &out[*n], why, whylen)) return failed(&r, why, whylen);
        if (!eat(&r, '>')) return SDY_UNREADABLE;
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
    Rd r = {.p = hit + strlen("xla.sdy.manual_axes="), .base = text};
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
