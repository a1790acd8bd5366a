/* sharding.c - shardings over mesh atoms: constructors, tile geometry,
 * binding of the parsed text forms, and printing.
 *
 * A TILED Sharding lists, for each tensor dim, a run of mesh atoms (major ->
 * minor) in one flat array (dim 0's atoms first); atoms that split no dim
 * are replicated, and `partial` atoms carry a pending reduction.  The tile
 * of a device along a dim is the mixed-radix value of its coordinates on that
 * dim's atoms, so a sharding is always a transposed iota over the atoms.
 *
 * Binding (sharding_bind) turns the syntax into that form: positional tile
 * assignments are expanded (iota with transpose, or an explicit list) and
 * factored back into runs of atoms by reading the device strides off the
 * array; named shardings are bound axis by name.  Printing gives back the
 * form the input used: XLA's positional text (canonical iota, subgroups in
 * the order unreduced < replicated) or the named `{mesh[...], [...]}` form.
 */
#include "spmdc/sharding.h"

#include <stdlib.h>
#include <string.h>

/* ================================================================ core */

Sharding sharding_replicated(void)
{
    Sharding s;
    memset(&s, 0, sizeof s);
    s.kind = SHARDING_REPLICATED;
    return s;
}

Sharding sharding_maximal(int64_t device)
{
    Sharding s = sharding_replicated();
    s.kind = SHARDING_MAXIMAL;
    s.device = device;
    return s;
}

Sharding sharding_tiled(int32_t rank)
{
    SPMDC_ASSERT(rank >= 0 && rank <= SPMDC_MAX_RANK);
    Sharding s = sharding_replicated();
    s.kind = SHARDING_TILED;
    s.tile.rank = (int8_t)rank;
    return s;
}

/* Index in s->tile.atoms of dim d's first atom. */
static int32_t dim_start(const Sharding *s, int32_t d)
{
    int32_t k = 0;
    for (int32_t i = 0; i < d; i++)
        k += s->tile.n[i];
    return k;
}

void sharding_set_dim(Sharding *s, int32_t dim, const int8_t *atoms, int32_t n)
{
    SPMDC_ASSERT(s->kind == SHARDING_TILED || s->kind == SHARDING_REPLICATED);
    SPMDC_ASSERT(dim >= 0 && dim < s->tile.rank && n >= 0);
    if (s->kind == SHARDING_REPLICATED) {
        s->kind = SHARDING_TILED;
        memset(s->tile.n, 0, sizeof s->tile.n);
    }
    int32_t start = dim_start(s, dim), old = s->tile.n[dim];
    int32_t total = dim_start(s, s->tile.rank);
    SPMDC_ASSERT(total - old + n <= SPMDC_MAX_ATOMS);
    memmove(s->tile.atoms + start + n, s->tile.atoms + start + old, (size_t)(total - start - old));
    if (n)
        memcpy(s->tile.atoms + start, atoms, (size_t)n);
    s->tile.n[dim] = (uint8_t)n;
}

const int8_t *sharding_dim_atoms(const Sharding *s, int32_t dim)
{
    if (!s || s->kind != SHARDING_TILED || dim < 0 || dim >= s->tile.rank)
        return NULL;
    return s->tile.atoms + dim_start(s, dim);
}

int32_t sharding_dim_n(const Sharding *s, int32_t dim)
{
    if (!s || s->kind != SHARDING_TILED || dim < 0 || dim >= s->tile.rank)
        return 0;
    return s->tile.n[dim];
}

void sharding_normalize(Sharding *s)
{
    if (s->kind == SHARDING_TUPLE) {
        for (int32_t i = 0; i < s->n_elems; i++)
            sharding_normalize(&s->elems[i]);
        return;
    }
    if (s->tile.partial == 0)
        s->tile.kind = REDUCE_NONE;
    if (s->kind == SHARDING_TILED && s->tile.partial == 0 && dim_start(s, s->tile.rank) == 0) {
        s->kind = SHARDING_REPLICATED;
        memset(s->tile.n, 0, sizeof s->tile.n);
    }
}

bool sharding_is_replicated(const Sharding *s)
{
    if (s->kind == SHARDING_REPLICATED)
        return true;
    if (s->kind == SHARDING_TUPLE) {
        for (int32_t i = 0; i < s->n_elems; i++)
            if (!sharding_is_replicated(&s->elems[i]))
                return false;
        return true;
    }
    return s->kind == SHARDING_TILED && s->tile.partial == 0 && dim_start(s, s->tile.rank) == 0;
}

bool sharding_is_tiled(const Sharding *s)
{
    if (s->kind == SHARDING_TUPLE) {
        for (int32_t i = 0; i < s->n_elems; i++)
            if (sharding_is_tiled(&s->elems[i]))
                return true;
        return false;
    }
    return s->kind == SHARDING_TILED && dim_start(s, s->tile.rank) > 0;
}

bool sharding_equal(const Sharding *a, const Sharding *b)
{
    if (a->kind != SHARDING_TUPLE && b->kind != SHARDING_TUPLE && a->kind != SHARDING_MANUAL &&
        b->kind != SHARDING_MANUAL && a->manual_atoms != b->manual_atoms)
        return false;
    bool ra = a->kind != SHARDING_TUPLE && sharding_is_replicated(a);
    bool rb = b->kind != SHARDING_TUPLE && sharding_is_replicated(b);
    if (ra || rb)
        return ra == rb;
    if (a->kind != b->kind)
        return false;
    switch (a->kind) {
    case SHARDING_MAXIMAL:
        return a->device == b->device;
    case SHARDING_MANUAL:
    case SHARDING_REPLICATED:
        return true;
    case SHARDING_TUPLE:
        if (a->n_elems != b->n_elems)
            return false;
        for (int32_t i = 0; i < a->n_elems; i++)
            if (!sharding_equal(&a->elems[i], &b->elems[i]))
                return false;
        return true;
    case SHARDING_TILED:
        break;
    }
    return tiling_equal(&a->tile, &b->tile);
}

const Sharding *sharding_leaf(const Sharding *s, int32_t leaf)
{
    if (s->kind != SHARDING_TUPLE)
        return s;
    SPMDC_ASSERT(leaf >= 0 && leaf < s->n_elems);
    return &s->elems[leaf];
}

uint32_t sharding_tiled_atoms(const Sharding *s)
{
    uint32_t mask = 0;
    if (s->kind != SHARDING_TILED)
        return 0;
    for (int32_t k = 0, n = dim_start(s, s->tile.rank); k < n; k++)
        mask |= 1u << s->tile.atoms[k];
    return mask;
}

int64_t sharding_dim_tiles(const Sharding *s, const Mesh *m, int32_t dim)
{
    const int8_t *a = sharding_dim_atoms(s, dim);
    int64_t t = 1;
    for (int32_t k = 0, n = sharding_dim_n(s, dim); k < n; k++)
        t *= m->atom_size[a[k]];
    return t;
}

int64_t sharding_num_tiles(const Sharding *s, const Mesh *m)
{
    int64_t t = 1;
    if (s->kind != SHARDING_TILED)
        return 1;
    for (int32_t d = 0; d < s->tile.rank; d++)
        t *= sharding_dim_tiles(s, m, d);
    return t;
}

int64_t sharding_tile_index(const Sharding *s, const Mesh *m, int32_t dim, int64_t device)
{
    if (s->kind == SHARDING_TILED)
        device = mesh_logical_device(m, s->tile.perm, device);
    const int8_t *a = sharding_dim_atoms(s, dim);
    int64_t idx = 0;
    for (int32_t k = 0, n = sharding_dim_n(s, dim); k < n; k++)
        idx = idx * m->atom_size[a[k]] + mesh_atom_coord(m, device, a[k]);
    return idx;
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

void sharding_shard_shape(const Sharding *s, const Mesh *m, const Shape *global, Shape *local, Arena *arena)
{
    *local = *global;
    if (shape_is_tuple(global)) {
        SPMDC_ASSERT(arena != NULL || global->n_elems == 0);
        local->elems = global->n_elems ? ARENA_ARRAY(arena, Shape, global->n_elems) : NULL;
        int32_t leaf = 0;
        for (int32_t i = 0; i < global->n_elems; i++) {
            const Shape *g = &global->elems[i];
            if (s->kind == SHARDING_TUPLE && shape_is_tuple(g)) {
                /* Nested tuple: its leaves are a slice of the flat list. */
                Sharding sub = *s;
                sub.n_elems = shape_leaf_count(g);
                sub.elems = s->elems + leaf;
                sharding_shard_shape(&sub, m, g, &local->elems[i], arena);
            } else {
                sharding_shard_shape(sharding_leaf(s, leaf), m, g, &local->elems[i], arena);
            }
            leaf += shape_leaf_count(g);
        }
        return;
    }
    if (s->kind != SHARDING_TILED)
        return;
    for (int32_t d = 0; d < global->rank && d < s->tile.rank; d++)
        local->dims[d] = ceil_div(global->dims[d], sharding_dim_tiles(s, m, d));
}

bool sharding_is_even(const Sharding *s, const Mesh *m, const Shape *global)
{
    if (s->kind != SHARDING_TILED || !shape_is_array(global))
        return true;
    for (int32_t d = 0; d < global->rank && d < s->tile.rank; d++)
        if (global->dims[d] % sharding_dim_tiles(s, m, d) != 0)
            return false;
    return true;
}

int64_t sharding_offset(const Sharding *s, const Mesh *m, const Shape *global, int32_t dim, int64_t device)
{
    int64_t c = ceil_div(global->dims[dim], sharding_dim_tiles(s, m, dim));
    return sharding_tile_index(s, m, dim, device) * c;
}

void sharding_transpose(const Sharding *in, const int64_t *perm, int32_t rank, Sharding *out)
{
    Sharding r = *in;
    if (in->kind == SHARDING_TILED) {
        r = sharding_tiled(rank);
        r.tile.partial = in->tile.partial;
        r.tile.kind = in->tile.kind;
        r.named_form = in->named_form;
        for (int32_t k = 0; k < rank; k++)
            sharding_set_dim(&r, k, sharding_dim_atoms(in, (int32_t)perm[k]), sharding_dim_n(in, (int32_t)perm[k]));
    } else if (in->kind == SHARDING_REPLICATED) {
        r.tile.rank = (int8_t)rank;
    }
    *out = r;
}

Sharding sharding_replicate_dims(const Sharding *s, uint32_t dim_mask)
{
    Sharding r = *s;
    if (r.kind != SHARDING_TILED)
        return r;
    for (int32_t d = 0; d < r.tile.rank; d++)
        if (dim_mask & (1u << d))
            sharding_set_dim(&r, d, NULL, 0);
    sharding_normalize(&r);
    return r;
}

/* ================================================================ iota */

void sharding_iota_expand(int32_t n_dims, const int64_t *dims, const int32_t *perm, int64_t *out)
{
    int64_t stride[SPMDC_MAX_TILE_DIMS], radix[SPMDC_MAX_TILE_DIMS], digit[SPMDC_MAX_TILE_DIMS];
    int64_t total = 1, s = 1;
    for (int32_t i = n_dims - 1; i >= 0; i--) {
        stride[i] = s;
        s *= dims[i];
    }
    /* Walk the transposed array row-major: digit i runs over source dim perm[i]. */
    for (int32_t i = 0; i < n_dims; i++) {
        int32_t p = perm ? perm[i] : i;
        radix[i] = dims[p];
        digit[i] = 0;
        total *= dims[p];
    }
    for (int64_t k = 0; k < total; k++) {
        int64_t v = 0;
        for (int32_t i = 0; i < n_dims; i++)
            v += digit[i] * stride[perm ? perm[i] : i];
        out[k] = v;
        for (int32_t i = n_dims - 1; i >= 0; i--) {
            if (++digit[i] < radix[i])
                break;
            digit[i] = 0;
        }
    }
}

/* ================================================================ printing */

/* Names of a run of atoms ("x", "y:(2)2"), separated by sep; with quote,
 * each axis name in single quotes (XLA's spelling: 'y':(2)2). */
static void atoms_names_q(StrBuf *b, const Mesh *m, const int8_t *a, int32_t n, const char *sep, bool quote)
{
    StrBuf tmp = {0};
    mesh_atoms_name(&tmp, m, a, n);
    const char *p = sb_cstr(&tmp);
    for (bool first = true; *p; first = false) {
        size_t len = strcspn(p, ","), name = strcspn(p, ",:");
        if (!first)
            sb_puts(b, sep);
        if (quote) {
            sb_putc(b, '\'');
            sb_putn(b, p, name);
            sb_putc(b, '\'');
            sb_putn(b, p + name, len - name);
        } else {
            sb_putn(b, p, len);
        }
        p += len + (p[len] == ',');
    }
    sb_free(&tmp);
}

static void atoms_names(StrBuf *b, const Mesh *m, const int8_t *a, int32_t n, const char *sep)
{
    atoms_names_q(b, m, a, n, sep, false);
}

/* The atoms of mask in ascending order; returns the count. */
static int32_t mask_atoms(const Mesh *m, uint32_t mask, int8_t *out)
{
    int32_t k = 0;
    for (int32_t a = 0; a < m->n_atoms; a++)
        if (mask & (1u << a))
            out[k++] = (int8_t)a;
    return k;
}

static void print_positional_tiled(StrBuf *b, const Sharding *s, const Mesh *m)
{
    uint32_t all = m->n_atoms >= 32 ? 0xffffffffu : (1u << m->n_atoms) - 1;
    uint32_t tiled = sharding_tiled_atoms(s), man = s->manual_atoms & ~tiled, part = s->tile.partial & ~tiled & ~man;
    uint32_t repl = all & ~tiled & ~part & ~man;
    if (tiled == 0 && part == 0 && man == 0) {
        sb_puts(b, "{replicated}");
        return;
    }
    if (tiled == 0 && repl == 0 && man == 0) {
        sb_puts(b, "{unreduced}");
        return;
    }
    int8_t pos[SPMDC_MAX_ATOMS];
    int64_t dims[SPMDC_MAX_TILE_DIMS];
    int32_t n = dim_start(s, s->tile.rank), nd = 0;
    memcpy(pos, s->tile.atoms, (size_t)n);
    for (int32_t d = 0; d < s->tile.rank; d++)
        dims[nd++] = sharding_dim_tiles(s, m, d);
    if (man) {
        dims[nd++] = mesh_mask_size(m, man);
        n += mask_atoms(m, man, pos + n);
    }
    if (part) {
        dims[nd++] = mesh_mask_size(m, part);
        n += mask_atoms(m, part, pos + n);
    }
    if (repl) {
        dims[nd++] = mesh_mask_size(m, repl);
        n += mask_atoms(m, repl, pos + n);
    }
    sb_int_list(b, dims, nd, "{devices=[", ",", "]");
    SPMDC_ASSERT(n == m->n_atoms);
    if (s->tile.perm) {
        /* position L (mixed radix over pos) is the logical device whose
         * coordinates on pos are L's digits; the list names who holds it */
        int64_t stride[SPMDC_MAX_ATOMS], digit[SPMDC_MAX_ATOMS] = {0}, dev = 0;
        for (int32_t q = 0; q < n; q++) {
            stride[q] = 1;
            for (int32_t a = pos[q] + 1; a < m->n_atoms; a++)
                stride[q] *= m->atom_size[a];
        }
        for (int64_t L = 0; L < m->n_devices; L++) {
            sb_printf(b, "%s%lld", L ? "," : "", (long long)mesh_physical_device(m, s->tile.perm, dev));
            for (int32_t q = n - 1; q >= 0; q--) {
                dev += stride[q];
                if (++digit[q] < m->atom_size[pos[q]])
                    break;
                dev -= stride[q] * digit[q];
                digit[q] = 0;
            }
        }
    } else {
        mesh_iota_src(b, m, pos);
    }
    if (man || part) {
        sb_puts(b, " last_tile_dims={");
        const char *sep = "";
        if (man) {
            sb_puts(b, "manual");
            sep = ", ";
        }
        if (part) {
            sb_printf(b, "%sunreduced", sep);
            sep = ", ";
        }
        if (repl)
            sb_printf(b, "%sreplicated", sep);
        sb_putc(b, '}');
    } else if (repl) {
        sb_puts(b, " last_tile_dim_replicate");
    }
    sb_putc(b, '}');
}

/* `[{x}, {y:(2)2, z}]` (quote: `[{'x'}, {'y':(2)2, 'z'}]`) */
static void print_named_dims(StrBuf *b, const Sharding *s, const Mesh *m, bool quote)
{
    sb_putc(b, '[');
    for (int32_t d = 0; d < s->tile.rank; d++) {
        sb_puts(b, d ? ", {" : "{");
        atoms_names_q(b, m, sharding_dim_atoms(s, d), sharding_dim_n(s, d), ", ", quote);
        sb_putc(b, '}');
    }
    sb_putc(b, ']');
}

static void print_named(StrBuf *b, const Sharding *s, const Mesh *m, bool quote)
{
    if (s->kind == SHARDING_MAXIMAL) {
        sb_printf(b, "{maximal_mesh[device_id=%lld]}", (long long)s->device);
        return;
    }
    sb_puts(b, "{mesh[");
    for (int32_t i = 0; quote && i < m->n_axes; i++)
        sb_printf(b, "%s'%s'=%lld", i ? "," : "", m->axes[i].name, (long long)m->axes[i].size);
    if (!quote)
        mesh_print(b, m);
    sb_puts(b, "], ");
    uint32_t all = m->n_atoms >= 32 ? 0xffffffffu : (1u << m->n_atoms) - 1;
    if (s->kind == SHARDING_MANUAL) {
        sb_puts(b, "manual}");
        return;
    }
    bool repl = sharding_is_replicated(s);
    if (s->tile.rank == 0 && !s->manual_atoms && (repl || (s->tile.partial == all && all != 0))) {
        sb_puts(b, repl ? "replicated}" : "unreduced}");
        return;
    }
    print_named_dims(b, s, m, quote);
    if (s->kind == SHARDING_TILED && s->tile.partial) {
        int8_t a[SPMDC_MAX_ATOMS];
        sb_puts(b, ", unreduced={");
        atoms_names_q(b, m, a, mask_atoms(m, s->tile.partial, a), ", ", quote);
        sb_putc(b, '}');
    }
    if (s->manual_atoms) {
        int8_t a[SPMDC_MAX_ATOMS];
        sb_puts(b, ", manual={");
        atoms_names_q(b, m, a, mask_atoms(m, s->manual_atoms, a), ", ", quote);
        sb_putc(b, '}');
    }
    sb_putc(b, '}');
}

static void print_single(StrBuf *b, const Sharding *s, const Mesh *m, bool quote)
{
    bool permuted = s->kind == SHARDING_TILED && s->tile.perm && !sharding_is_replicated(s);
    if (s->named_form && m && !permuted) { /* the named form has no device order: positional then */
        print_named(b, s, m, quote);
        return;
    }
    switch (s->kind) {
    case SHARDING_REPLICATED:
        if (s->manual_atoms && m)
            print_positional_tiled(b, s, m);
        else
            sb_puts(b, "{replicated}");
        break;
    case SHARDING_MAXIMAL:
        sb_printf(b, "{maximal device=%lld}", (long long)s->device);
        break;
    case SHARDING_MANUAL:
        sb_puts(b, "{manual}");
        break;
    case SHARDING_TILED:
        print_positional_tiled(b, s, m);
        break;
    case SHARDING_TUPLE:
        SPMDC_UNREACHABLE();
    }
}

static void print_sharding(StrBuf *b, const Sharding *s, const Mesh *m, bool quote)
{
    if (s->kind != SHARDING_TUPLE) {
        print_single(b, s, m, quote);
        return;
    }
    /* XLA: elements separated by ", ", a comment before every 5th. */
    sb_putc(b, '{');
    for (int32_t i = 0; i < s->n_elems; i++) {
        if (i) {
            sb_puts(b, ", ");
            if (i % 5 == 0)
                sb_printf(b, "/*index=%d*/", (int)i);
        }
        print_single(b, &s->elems[i], m, quote);
    }
    sb_putc(b, '}');
}

/* " manual over {x}" for a partially manual sharding. */
static void put_manual(StrBuf *b, const Sharding *s, const Mesh *m)
{
    if (!s->manual_atoms || !m)
        return;
    int8_t a[SPMDC_MAX_ATOMS];
    sb_puts(b, " manual over {");
    atoms_names(b, m, a, mask_atoms(m, s->manual_atoms, a), ", ");
    sb_putc(b, '}');
}

void sharding_print(StrBuf *b, const Sharding *s, const Mesh *m) { print_sharding(b, s, m, false); }

void sharding_print_quoted(StrBuf *b, const Sharding *s, const Mesh *m) { print_sharding(b, s, m, true); }

void sharding_describe(StrBuf *b, const Sharding *s, const Mesh *m)
{
    switch (s->kind) {
    case SHARDING_REPLICATED:
        sb_puts(b, "replicated");
        put_manual(b, s, m);
        return;
    case SHARDING_MAXIMAL:
        sb_printf(b, "maximal(device %lld)", (long long)s->device);
        return;
    case SHARDING_MANUAL:
        sb_puts(b, "manual");
        return;
    case SHARDING_TUPLE:
        sb_putc(b, '(');
        for (int32_t i = 0; i < s->n_elems && i < SHARDING_DESCRIBE_LEAVES; i++) {
            if (i)
                sb_puts(b, ", ");
            sharding_describe(b, &s->elems[i], m);
        }
        if (s->n_elems > SHARDING_DESCRIBE_LEAVES)
            sb_printf(b, ", ... (%d in all)", (int)s->n_elems);
        sb_putc(b, ')');
        return;
    case SHARDING_TILED:
        break;
    }
    if (sharding_is_replicated(s)) {
        sb_puts(b, "replicated");
        put_manual(b, s, m);
        return;
    }
    print_named_dims(b, s, m, false);
    if (s->tile.perm && m) {
        /* the devices that stand for the mesh's devices 0, 1, ... */
        if (m->n_devices <= 16) {
            sb_puts(b, " on devices {");
            for (int64_t L = 0; L < m->n_devices; L++)
                sb_printf(b, "%s%lld", L ? "," : "", (long long)mesh_physical_device(m, s->tile.perm, L));
            sb_putc(b, '}');
        } else {
            sb_printf(b, " in device order %d", (int)s->tile.perm);
        }
    }
    if (s->tile.partial) {
        int8_t a[SPMDC_MAX_ATOMS];
        sb_printf(b, " partial(%s) over {", reduce_kind_name((ReduceKind)s->tile.kind));
        atoms_names(b, m, a, mask_atoms(m, s->tile.partial, a), ", ");
        sb_putc(b, '}');
    }
    put_manual(b, s, m);
}

/* ================================================================ syntax text */

static void print_axis_refs(StrBuf *b, const AxisRefSyntax *r, int32_t n)
{
    for (int32_t i = 0; i < n; i++) {
        sb_puts(b, i ? ", " : "");
        sb_puts(b, r[i].name ? r[i].name : "?");
        if (r[i].pre_size)
            sb_printf(b, ":(%lld)%lld", (long long)r[i].pre_size, (long long)r[i].size);
    }
}

static void syntax_print_named(StrBuf *b, const ShardingSyntax *s)
{
    sb_puts(b, "{mesh[");
    for (int32_t i = 0; i < s->n_mesh_axes; i++)
        sb_printf(b, "%s%s=%lld", i ? "," : "", s->mesh_axis_names[i] ? s->mesh_axis_names[i] : "?",
                  (long long)s->mesh_axis_sizes[i]);
    sb_puts(b, "]");
    if (s->named_replicated || s->named_manual || s->named_unreduced) {
        sb_puts(b, s->named_replicated ? ", replicated}" : s->named_manual ? ", manual}" : ", unreduced}");
        return;
    }
    sb_puts(b, ", [");
    for (int32_t d = 0; d < s->n_dims; d++) {
        sb_puts(b, d ? ", {" : "{");
        print_axis_refs(b, s->dim_axes[d], s->dim_n_axes[d]);
        if (s->open_dims & (1u << d))
            sb_puts(b, s->dim_n_axes[d] ? ", ?" : "?");
        sb_putc(b, '}');
        if (s->dim_priority[d])
            sb_printf(b, "p%d", (int)s->dim_priority[d] - 1);
    }
    sb_putc(b, ']');
    const char *what[3] = {"replicated", "unreduced", "manual"};
    const AxisRefSyntax *refs[3] = {s->replicated_axes, s->unreduced_axes, s->manual_axes};
    int32_t ns[3] = {s->n_replicated_axes, s->n_unreduced_axes, s->n_manual_axes};
    for (int k = 0; k < 3; k++) {
        if (!ns[k])
            continue;
        sb_printf(b, ", %s={", what[k]);
        print_axis_refs(b, refs[k], ns[k]);
        sb_putc(b, '}');
    }
    sb_putc(b, '}');
}

static void syntax_print_tiled(StrBuf *b, const ShardingSyntax *s)
{
    static const char *const sub[] = {"replicated", "manual", "unreduced", "maximal"};
    sb_int_list(b, s->tile_dims, s->n_tile_dims, "{devices=[", ",", "]");
    if (s->n_iota_dims > 0) {
        sb_int_list(b, s->iota_dims, s->n_iota_dims, "<=[", ",", "]");
        if (s->has_perm) {
            sb_puts(b, "T(");
            for (int32_t i = 0; i < s->n_iota_dims; i++)
                sb_printf(b, "%s%d", i ? "," : "", (int)s->iota_perm[i]);
            sb_putc(b, ')');
        }
    } else {
        sb_int_list(b, s->devices, (int32_t)s->n_devices, "", ",", "");
    }
    if (s->last_tile_dim_replicate)
        sb_puts(b, " last_tile_dim_replicate");
    if (s->n_subgroups > 0) {
        sb_puts(b, " last_tile_dims={");
        for (int32_t i = 0; i < s->n_subgroups; i++)
            sb_printf(b, "%s%s", i ? ", " : "", sub[s->subgroups[i] & 3]);
        sb_putc(b, '}');
    }
    sb_putc(b, '}');
}

void sharding_syntax_print(StrBuf *b, const ShardingSyntax *s)
{
    switch (s->kind) {
    case SSYN_REPLICATED: sb_puts(b, "{replicated}"); break;
    case SSYN_MAXIMAL: sb_printf(b, "{maximal device=%lld}", (long long)s->device); break;
    case SSYN_MANUAL: sb_puts(b, "{manual}"); break;
    case SSYN_UNKNOWN: sb_puts(b, "{unknown}"); break;
    case SSYN_UNREDUCED: sb_puts(b, "{unreduced}"); break;
    case SSYN_TILED: syntax_print_tiled(b, s); break;
    case SSYN_NAMED: syntax_print_named(b, s); break;
    case SSYN_TUPLE:
        sb_putc(b, '{');
        for (int32_t i = 0; i < s->n_elems; i++) {
            sb_puts(b, i ? ", " : "");
            sharding_syntax_print(b, &s->elems[i]);
        }
        sb_putc(b, '}');
        break;
    }
}

/* Copies of r[0..n) (names copied) into a. */
static AxisRefSyntax *copy_refs(const AxisRefSyntax *r, int32_t n, Arena *a)
{
    if (!r)
        return NULL;
    AxisRefSyntax *c = ARENA_ARRAY(a, AxisRefSyntax, n ? n : 1);
    for (int32_t i = 0; i < n; i++) {
        c[i] = r[i];
        c[i].name = r[i].name ? arena_strdup(a, r[i].name) : NULL;
    }
    return c;
}

static void syntax_copy_into(ShardingSyntax *c, const ShardingSyntax *s, Arena *a)
{
    *c = *s;
    if (s->devices)
        c->devices = arena_memdup(a, s->devices, sizeof(int64_t) * (size_t)s->n_devices);
    for (int32_t i = 0; i < s->n_mesh_axes; i++)
        c->mesh_axis_names[i] = s->mesh_axis_names[i] ? arena_strdup(a, s->mesh_axis_names[i]) : NULL;
    if (s->dim_n_axes)
        c->dim_n_axes = arena_memdup(a, s->dim_n_axes, sizeof(int32_t) * (size_t)(s->n_dims ? s->n_dims : 1));
    if (s->dim_axes) {
        c->dim_axes = ARENA_ARRAY(a, AxisRefSyntax *, s->n_dims ? s->n_dims : 1);
        for (int32_t d = 0; d < s->n_dims; d++)
            c->dim_axes[d] = copy_refs(s->dim_axes[d], s->dim_n_axes ? s->dim_n_axes[d] : 0, a);
    }
    c->replicated_axes = copy_refs(s->replicated_axes, s->n_replicated_axes, a);
    c->unreduced_axes = copy_refs(s->unreduced_axes, s->n_unreduced_axes, a);
    c->manual_axes = copy_refs(s->manual_axes, s->n_manual_axes, a);
    if (s->elems) {
        c->elems = ARENA_ARRAY(a, ShardingSyntax, s->n_elems ? s->n_elems : 1);
        for (int32_t i = 0; i < s->n_elems; i++)
            syntax_copy_into(&c->elems[i], &s->elems[i], a);
    }
}

ShardingSyntax *sharding_syntax_copy(const ShardingSyntax *s, Arena *a)
{
    ShardingSyntax *c = ARENA_NEW(a, ShardingSyntax);
    syntax_copy_into(c, s, a);
    return c;
}

/* A span of a syntax read at (line, col0) moved to a text at (line, col0 + dcol). */
static void rebase_span(SrcSpan *sp, uint32_t line, int64_t dcol)
{
    if (!sp->begin.line) return; /* no position */
    sp->begin.line = sp->end.line = line;
    sp->begin.col = (uint32_t)(sp->begin.col + dcol);
    sp->end.col = (uint32_t)(sp->end.col + dcol);
}

static AxisRefSyntax *rebase_refs(Arena *a, const AxisRefSyntax *refs, int32_t n, uint32_t line, int64_t dcol)
{
    if (!refs || n <= 0) return (AxisRefSyntax *)refs;
    AxisRefSyntax *r = ARENA_ARRAY(a, AxisRefSyntax, n);
    memcpy(r, refs, sizeof *r * (size_t)n);
    for (int32_t k = 0; k < n; k++) rebase_span(&r[k].span, line, dcol);
    return r;
}

/* *dst = src with every span moved by rebase_span; the arrays that hold
 * spans are copied into a, the others shared (sharding_syntax_moved). */
static void rebase_syntax(Arena *a, ShardingSyntax *dst, const ShardingSyntax *src, uint32_t line, int64_t dcol)
{
    *dst = *src;
    rebase_span(&dst->span, line, dcol);
    if (src->dim_axes && src->n_dims > 0) {
        dst->dim_axes = ARENA_ARRAY(a, AxisRefSyntax *, src->n_dims);
        for (int32_t d = 0; d < src->n_dims; d++)
            dst->dim_axes[d] = rebase_refs(a, src->dim_axes[d], src->dim_n_axes[d], line, dcol);
    }
    dst->replicated_axes = rebase_refs(a, src->replicated_axes, src->n_replicated_axes, line, dcol);
    dst->unreduced_axes = rebase_refs(a, src->unreduced_axes, src->n_unreduced_axes, line, dcol);
    dst->manual_axes = rebase_refs(a, src->manual_axes, src->n_manual_axes, line, dcol);
    if (src->elems && src->n_elems > 0) {
        dst->elems = ARENA_ARRAY(a, ShardingSyntax, src->n_elems);
        for (int32_t k = 0; k < src->n_elems; k++) rebase_syntax(a, &dst->elems[k], &src->elems[k], line, dcol);
    }
}

void sharding_syntax_move_into(ShardingSyntax *dst, const ShardingSyntax *s, uint32_t line, int64_t dcol, Arena *a)
{
    rebase_syntax(a, dst, s, line, dcol);
}

ShardingSyntax *sharding_syntax_moved(const ShardingSyntax *s, uint32_t line, int64_t dcol, Arena *a)
{
    ShardingSyntax *c = ARENA_NEW(a, ShardingSyntax);
    rebase_syntax(a, c, s, line, dcol);
    return c;
}

/* ================================================================ binding */

/* The syntax's text in tmp (for messages). */
static const char *syn_text(StrBuf *tmp, const ShardingSyntax *s)
{
    sb_clear(tmp);
    sharding_syntax_print(tmp, s);
    return sb_cstr(tmp);
}

static const char *mesh_text(StrBuf *tmp, const Mesh *m)
{
    sb_clear(tmp);
    mesh_print(tmp, m);
    if (m->n_axes == 0)
        sb_puts(tmp, "(1 device)");
    return sb_cstr(tmp);
}

/* The tile assignment of a positional syntax (P == m->n_devices ids), in a
 * malloc'd array, or NULL after an error. */
static int64_t *tile_assignment(const ShardingSyntax *syn, const Mesh *m, DiagEngine *diag, StrBuf *tmp)
{
    int64_t P = m->n_devices;
    if (syn->n_iota_dims > 0) {
        int64_t q = 1;
        uint32_t seen = 0;
        bool ok = syn->n_iota_dims <= SPMDC_MAX_TILE_DIMS;
        for (int32_t i = 0; ok && i < syn->n_iota_dims; i++) {
            int32_t p = syn->has_perm ? syn->iota_perm[i] : i;
            ok = syn->iota_dims[i] >= 1 && syn->iota_dims[i] <= P && (q *= syn->iota_dims[i]) <= P &&
                 p >= 0 && p < syn->n_iota_dims && !(seen & (1u << p));
            if (ok)
                seen |= 1u << p;
        }
        if (!ok || q != P) {
            diag_error(diag, syn->span, "the iota source of sharding %s does not match its %lld tiles",
                       syn_text(tmp, syn), (long long)P);
            return NULL;
        }
        int64_t *ta = xmalloc(sizeof(int64_t) * (size_t)P);
        sharding_iota_expand(syn->n_iota_dims, syn->iota_dims, syn->has_perm ? syn->iota_perm : NULL, ta);
        return ta;
    }
    if (syn->n_devices != P || !syn->devices) {
        diag_error(diag, syn->span, "sharding %s lists %lld device ids for %lld tiles", syn_text(tmp, syn),
                   (long long)syn->n_devices, (long long)P);
        return NULL;
    }
    for (int64_t i = 0; i < P; i++) {
        if (syn->devices[i] < 0 || syn->devices[i] >= P) {
            diag_error(diag, syn->span, "sharding %s names device %lld but the mesh has %lld devices",
                       syn_text(tmp, syn), (long long)syn->devices[i], (long long)P);
            return NULL;
        }
    }
    int64_t *ta = xmalloc(sizeof(int64_t) * (size_t)P);
    memcpy(ta, syn->devices, sizeof(int64_t) * (size_t)P);
    return ta;
}

/* Gives the subgroup dims' atoms their meaning: replicated (nothing),
 * unreduced (partial sum), manual (manual_atoms); maximal is refused. */
static bool apply_subgroup(Sharding *out, SubgroupType t, const int8_t *atoms, int32_t n,
                           const ShardingSyntax *syn, DiagEngine *diag, StrBuf *tmp)
{
    if (n == 0 || t == SUBGROUP_REPLICATED)
        return true;
    if (t == SUBGROUP_UNREDUCED) {
        for (int32_t i = 0; i < n; i++)
            out->tile.partial |= 1u << atoms[i];
        out->tile.kind = REDUCE_SUM;
        return true;
    }
    if (t == SUBGROUP_MANUAL) {
        for (int32_t i = 0; i < n; i++)
            out->manual_atoms |= 1u << atoms[i];
        return true;
    }
    diag_error(diag, syn->span, "maximal subgroup in sharding %s: partially maximal shardings are not supported yet",
               syn_text(tmp, syn));
    return false;
}

/* Splits the atom order into the tile dims (each a run whose sizes multiply
 * to the dim) and fills out; false (no message) if a dim falls between
 * atoms (*split_ok = false), or after reporting a refused subgroup.  A
 * manual subgroup over every device makes the whole sharding MANUAL. */
static bool assign_tile_dims(const ShardingSyntax *syn, const Mesh *m, const int8_t *order, int32_t rank,
                             Sharding *out, DiagEngine *diag, StrBuf *tmp, bool *split_ok)
{
    int32_t k = 0;
    *split_ok = true;
    for (int32_t t = 0; t < syn->n_tile_dims; t++) {
        int32_t first = k;
        int64_t p = 1;
        while (p < syn->tile_dims[t] && k < m->n_atoms)
            p *= m->atom_size[order[k++]];
        if (p != syn->tile_dims[t]) {
            *split_ok = false;
            return false;
        }
        if (t < rank) {
            sharding_set_dim(out, t, order + first, k - first);
            continue;
        }
        SubgroupType st = syn->last_tile_dim_replicate ? SUBGROUP_REPLICATED : syn->subgroups[t - rank];
        if (st == SUBGROUP_MANUAL && k - first == m->n_atoms) {
            *out = sharding_replicated();
            out->kind = SHARDING_MANUAL;
            out->manual_atoms = m->n_atoms >= 32 ? 0xffffffffu : (1u << m->n_atoms) - 1;
            return true;
        }
        if (!apply_subgroup(out, st, order + first, k - first, syn, diag, tmp))
            return false;
    }
    return true;
}

static bool bind_tiled(const ShardingSyntax *syn, const Mesh *m, int32_t rank, Sharding *out, DiagEngine *diag,
                       StrBuf *tmp, StrBuf *tmp2)
{
    int32_t n_sub = syn->last_tile_dim_replicate ? 1 : syn->n_subgroups;
    if (syn->n_tile_dims - n_sub != rank) {
        diag_error(diag, syn->span, "sharding %s has %d data dims but the value has rank %d",
                   syn_text(tmp, syn), (int)(syn->n_tile_dims - n_sub), (int)rank);
        return false;
    }
    int64_t P = 1;
    for (int32_t t = 0; t < syn->n_tile_dims; t++) {
        if (syn->tile_dims[t] < 1 || syn->tile_dims[t] > SPMDC_MAX_DEVICES) {
            P = -1;
            break;
        }
        P *= syn->tile_dims[t];
        if (P > SPMDC_MAX_DEVICES)
            break;
    }
    if (P < 0) {
        diag_error(diag, syn->span, "sharding %s has a tile dim < 1", syn_text(tmp, syn));
        return false;
    }
    if (P != m->n_devices) {
        diag_error(diag, syn->span, "sharding %s uses %lld devices but the mesh has %lld", syn_text(tmp, syn),
                   (long long)P, (long long)m->n_devices);
        return false;
    }
    int64_t *ta = tile_assignment(syn, m, diag, tmp);
    if (!ta)
        return false;
    int8_t order[SPMDC_MAX_ATOMS];
    bool ok = mesh_factor_order(m, ta, order), split_ok = true;
    int32_t perm = 0;
    if (!ok) {
        /* no transposed iota: the tile dims over the mesh's atoms in order,
         * held by the listed devices (a device order of the mesh's table) */
        for (int32_t k = 0; k < m->n_atoms; k++)
            order[k] = (int8_t)k;
        perm = mesh_perm_intern(m->perms, ta, P);
        ok = perm > 0;
    }
    free(ta);
    *out = sharding_tiled(rank);
    if (ok) {
        ok = assign_tile_dims(syn, m, order, rank, out, diag, tmp, &split_ok);
        if (!ok && split_ok)
            return false; /* reported by apply_subgroup */
    }
    if (ok && perm > 0) {
        if (out->kind != SHARDING_TILED || out->tile.partial || out->manual_atoms) {
            diag_error(diag, syn->span, "sharding %s: a device order that is no transposed iota over the mesh %s is "
                       "not supported with %s subgroups", syn_text(tmp, syn), mesh_text(tmp2, m),
                       out->tile.partial ? "unreduced" : "manual");
            return false;
        }
        out->tile.perm = (uint16_t)perm;
    }
    if (!ok) {
        /* A plain iota order fits the mesh whose axes are its tile dims: say so. */
        bool plain = syn->devices ? true : !syn->has_perm;
        for (int64_t k = 0; syn->devices && k < syn->n_devices; k++)
            if (syn->devices[k] != k) plain = false;
        char hint[128] = "";
        size_t used = 0;
        for (int32_t d = 0; plain && d < syn->n_tile_dims && used + 24 < sizeof hint; d++)
            if (syn->tile_dims[d] > 1)
                used += (size_t)snprintf(hint + used, sizeof hint - used, "%s%lld", used ? "x" : "",
                                         (long long)syn->tile_dims[d]);
        if (used)
            diag_error(diag, syn->span,
                       "the device order of sharding %s is not a transposed iota over the mesh %s "
                       "(every tile dim must be a run of the mesh's prime factors); pass a mesh whose axes "
                       "follow the tiling, e.g. --mesh %s",
                       syn_text(tmp, syn), mesh_text(tmp2, m), hint);
        else
            diag_error(diag, syn->span,
                       "the device order of sharding %s is not a transposed iota over the mesh %s "
                       "(every tile dim must be a run of the mesh's prime factors); such device orders are not "
                       "supported",
                       syn_text(tmp, syn), mesh_text(tmp2, m));
        return false;
    }
    sharding_normalize(out);
    return true;
}

/* The run of atoms an axis ref names (whole axis, or sub-axis (pre)size
 * falling on the axis's prime factors); false after reporting. */
static bool ref_atoms(const AxisRefSyntax *r, const ShardingSyntax *syn, const Mesh *m, int8_t *out, int32_t *n,
                      DiagEngine *diag, StrBuf *tmp, StrBuf *tmp2)
{
    int32_t ax = r->name ? mesh_axis_index(m, r->name) : -1;
    SrcSpan sp = r->span.begin.line ? r->span : syn->span;
    if (ax < 0) {
        diag_error(diag, sp, "axis '%s' of sharding %s is not in the mesh %s", r->name ? r->name : "?",
                   syn_text(tmp, syn), mesh_text(tmp2, m));
        return false;
    }
    const MeshAxis *a = &m->axes[ax];
    int32_t first = a->first_atom, k = first, end = first + a->n_atoms;
    if (r->pre_size != 0) {
        int64_t p = 1;
        while (p < r->pre_size && k < end)
            p *= m->atom_size[k++];
        first = k;
        int64_t q = 1;
        while (p == r->pre_size && q < r->size && k < end)
            q *= m->atom_size[k++];
        if (p != r->pre_size || q != r->size || r->size < 1) {
            diag_error(diag, sp, "sub-axis %s:(%lld)%lld of sharding %s does not fit axis %s=%lld of the mesh",
                       a->name, (long long)r->pre_size, (long long)r->size, syn_text(tmp, syn), a->name,
                       (long long)a->size);
            return false;
        }
        end = k;
    }
    *n = end - first;
    for (int32_t i = 0; i < *n; i++)
        out[i] = (int8_t)(first + i);
    return true;
}

/* Binds a list of axis refs, appending their atoms to out[*n..]; checks that
 * no atom is used twice (mask *used). */
static bool bind_refs(const AxisRefSyntax *refs, int32_t n_refs, const ShardingSyntax *syn, const Mesh *m,
                      int8_t *out, int32_t *n, uint32_t *used, DiagEngine *diag, StrBuf *tmp, StrBuf *tmp2)
{
    for (int32_t i = 0; i < n_refs; i++) {
        int8_t atoms[SPMDC_MAX_ATOMS];
        int32_t k = 0;
        if (!ref_atoms(&refs[i], syn, m, atoms, &k, diag, tmp, tmp2))
            return false;
        for (int32_t j = 0; j < k; j++) {
            if (*used & (1u << atoms[j])) {
                diag_error(diag, refs[i].span.begin.line ? refs[i].span : syn->span,
                           "axis '%s' is used twice in sharding %s", refs[i].name, syn_text(tmp, syn));
                return false;
            }
            *used |= 1u << atoms[j];
            out[(*n)++] = atoms[j];
        }
    }
    return true;
}

/* The index of the axis ref r names in syn's own mesh, or -1. */
static int32_t syn_axis(const ShardingSyntax *syn, const AxisRefSyntax *r)
{
    for (int32_t k = 0; k < syn->n_mesh_axes; k++)
        if (r->name && strcmp(r->name, syn->mesh_axis_names[k]) == 0)
            return k;
    return -1;
}

/* An axis ref as written: x or x:(2)2. */
static const char *ref_str(char *buf, size_t n, const AxisRefSyntax *r)
{
    if (r->pre_size == 0)
        snprintf(buf, n, "%s", r->name);
    else
        snprintf(buf, n, "%s:(%lld)%lld", r->name, (long long)r->pre_size, (long long)r->size);
    return buf;
}

/* One list of axis refs against the sharding's own mesh, as XLA's
 * VerifyNamedSharding and Shardy's verifier check it: a sub-axis is larger
 * than 1 and smaller than its axis; two neighbours that are consecutive
 * pieces of one axis (x:(1)2, x:(2)2) are written as one; the replicated,
 * unreduced and manual lists (sorted) run in mesh order, sub-axes by
 * pre-size.  False after reporting. */
static bool check_ref_list(const AxisRefSyntax *refs, int32_t n_refs, bool sorted, const char *what,
                           const ShardingSyntax *syn, DiagEngine *diag, StrBuf *tmp)
{
    for (int32_t i = 0; i < n_refs; i++) {
        const AxisRefSyntax *r = &refs[i], *q = i ? &refs[i - 1] : NULL;
        SrcSpan sp = r->span.begin.line ? r->span : syn->span;
        int32_t a = syn_axis(syn, r);
        if (a < 0)
            continue; /* the binder names it */
        int64_t whole = syn->mesh_axis_sizes[a];
        if (r->pre_size != 0 && (r->size == 1 || (r->pre_size == 1 && r->size == whole))) { /* else: does not fit */
            diag_error(diag, sp, "sub-axis %s:(%lld)%lld of sharding %s must be larger than 1 and smaller than axis %s=%lld",
                       r->name, (long long)r->pre_size, (long long)r->size, syn_text(tmp, syn), r->name,
                       (long long)whole);
            return false;
        }
        if (!q || syn_axis(syn, q) < 0)
            continue;
        int32_t qa = syn_axis(syn, q);
        if (qa == a && q->pre_size != 0 && r->pre_size != 0 && q->pre_size * q->size == r->pre_size) {
            diag_error(diag, sp, "%s %s:(%lld)%lld, %s:(%lld)%lld of sharding %s can be merged into one sub-axis", what,
                       q->name, (long long)q->pre_size, (long long)q->size, r->name, (long long)r->pre_size,
                       (long long)r->size, syn_text(tmp, syn));
            return false;
        }
        if (sorted && (qa > a || (qa == a && q->pre_size >= r->pre_size))) {
            char rb[96], qb[96];
            diag_error(diag, sp, "%s of sharding %s must be in mesh order (sub-axes by pre-size): %s comes after %s",
                       what, syn_text(tmp, syn), ref_str(rb, sizeof rb, r), ref_str(qb, sizeof qb, q));
            return false;
        }
    }
    return true;
}

static bool bind_named(const ShardingSyntax *syn, const Mesh *m, int32_t rank, Sharding *out, DiagEngine *diag,
                       StrBuf *tmp, StrBuf *tmp2)
{
    for (int32_t d = 0; d < syn->n_dims; d++)
        if (!check_ref_list(syn->dim_axes[d], syn->dim_n_axes[d], false, "adjacent axes", syn, diag, tmp))
            return false;
    if (!check_ref_list(syn->replicated_axes, syn->n_replicated_axes, true, "replicated axes", syn, diag, tmp) ||
        !check_ref_list(syn->unreduced_axes, syn->n_unreduced_axes, true, "unreduced axes", syn, diag, tmp) ||
        !check_ref_list(syn->manual_axes, syn->n_manual_axes, true, "manual axes", syn, diag, tmp))
        return false;
    for (int32_t i = 0; i < syn->n_mesh_axes; i++) {
        if (mesh_axis_index(m, syn->mesh_axis_names[i]) < 0) {
            diag_error(diag, syn->span, "axis '%s' of sharding %s is not in the mesh %s", syn->mesh_axis_names[i],
                       syn_text(tmp, syn), mesh_text(tmp2, m));
            return false;
        }
    }
    uint32_t all = m->n_atoms >= 32 ? 0xffffffffu : (1u << m->n_atoms) - 1, used = 0;
    *out = sharding_tiled(rank);
    if (syn->named_manual) {
        out->kind = SHARDING_MANUAL;
        out->tile.rank = 0;
        out->manual_atoms = all;
        return true;
    }
    if (syn->named_replicated || syn->named_unreduced) {
        out->tile.partial = syn->named_unreduced ? all : 0;
        out->tile.kind = out->tile.partial ? REDUCE_SUM : REDUCE_NONE;
        sharding_normalize(out);
        return true;
    }
    if (syn->n_dims != rank) {
        diag_error(diag, syn->span, "sharding %s has %d dims but the value has rank %d", syn_text(tmp, syn),
                   (int)syn->n_dims, (int)rank);
        return false;
    }
    for (int32_t d = 0; d < rank; d++) {
        int8_t atoms[SPMDC_MAX_ATOMS];
        int32_t n = 0;
        if (!bind_refs(syn->dim_axes[d], syn->dim_n_axes[d], syn, m, atoms, &n, &used, diag, tmp, tmp2))
            return false;
        sharding_set_dim(out, d, atoms, n);
    }
    int8_t rest[SPMDC_MAX_ATOMS];
    int32_t nr = 0, nu, nm;
    if (!bind_refs(syn->replicated_axes, syn->n_replicated_axes, syn, m, rest, &nr, &used, diag, tmp, tmp2))
        return false;
    /* what propagation reads: open dims, the axes kept replicated, priorities */
    uint32_t open = syn->open_dims & (rank >= 32 ? 0xffffffffu : (1u << rank) - 1), rep = 0;
    for (int32_t i = 0; i < nr; i++)
        rep |= 1u << rest[i];
    uint8_t prio[SPMDC_MAX_RANK];
    memcpy(prio, syn->dim_priority, sizeof prio);
    nu = nr;
    if (!bind_refs(syn->unreduced_axes, syn->n_unreduced_axes, syn, m, rest, &nu, &used, diag, tmp, tmp2))
        return false;
    for (int32_t i = nr; i < nu; i++)
        out->tile.partial |= 1u << rest[i];
    out->tile.kind = out->tile.partial ? REDUCE_SUM : REDUCE_NONE;
    nm = nu;
    if (!bind_refs(syn->manual_axes, syn->n_manual_axes, syn, m, rest, &nm, &used, diag, tmp, tmp2))
        return false;
    if (nm > nu) {
        if (nm - nu == m->n_atoms) {
            *out = sharding_replicated();
            out->kind = SHARDING_MANUAL;
            out->manual_atoms = all;
            return true;
        }
        for (int32_t i = nu; i < nm; i++)
            out->manual_atoms |= 1u << rest[i];
    }
    sharding_normalize(out);
    out->open_dims = open;
    out->replicated_atoms = rep;
    memcpy(out->priority, prio, sizeof prio);
    return true;
}

/* One array (or a whole tuple given a kind with no dims) against rank. */
static bool bind_single(const ShardingSyntax *syn, const Mesh *m, int32_t rank, Sharding *out, DiagEngine *diag,
                        StrBuf *tmp, StrBuf *tmp2)
{
    *out = sharding_replicated();
    out->tile.rank = (int8_t)rank;
    switch (syn->kind) {
    case SSYN_REPLICATED:
    case SSYN_UNKNOWN: /* callers leave {unknown} unbound; replicated if they do not */
        return true;
    case SSYN_MAXIMAL:
        if (syn->device < 0 || syn->device >= m->n_devices) {
            diag_error(diag, syn->span, "sharding %s names device %lld but the mesh has %lld devices",
                       syn_text(tmp, syn), (long long)syn->device, (long long)m->n_devices);
            return false;
        }
        *out = sharding_maximal(syn->device);
        return true;
    case SSYN_MANUAL:
        out->kind = SHARDING_MANUAL;
        out->tile.rank = 0;
        out->manual_atoms = m->n_atoms >= 32 ? 0xffffffffu : (1u << m->n_atoms) - 1;
        return true;
    case SSYN_UNREDUCED:
        *out = sharding_tiled(rank);
        out->tile.partial = m->n_atoms >= 32 ? 0xffffffffu : (1u << m->n_atoms) - 1;
        out->tile.kind = out->tile.partial ? REDUCE_SUM : REDUCE_NONE;
        sharding_normalize(out);
        return true;
    case SSYN_TILED:
        return bind_tiled(syn, m, rank, out, diag, tmp, tmp2);
    case SSYN_NAMED:
        if (!bind_named(syn, m, rank, out, diag, tmp, tmp2))
            return false;
        out->named_form = true;
        return true;
    case SSYN_TUPLE:
        break;
    }
    SPMDC_UNREACHABLE();
}

/* The array leaves of a (nested) tuple shape, depth first. */
static void collect_leaves(const Shape *s, const Shape **out, int32_t *n)
{
    if (!shape_is_tuple(s)) {
        out[(*n)++] = s;
        return;
    }
    for (int32_t i = 0; i < s->n_elems; i++)
        collect_leaves(&s->elems[i], out, n);
}

static bool bind_leaves(const ShardingSyntax *syn, const Mesh *m, const Shape *shape, Sharding *out, Arena *arena,
                        DiagEngine *diag, StrBuf *tmp, StrBuf *tmp2)
{
    int32_t n = shape_leaf_count(shape), k = 0;
    const Shape **leaves = xmalloc(sizeof(Shape *) * (size_t)(n ? n : 1));
    collect_leaves(shape, leaves, &k);
    *out = sharding_replicated();
    out->kind = SHARDING_TUPLE;
    out->n_elems = n;
    out->elems = n ? ARENA_ARRAY(arena, Sharding, n) : NULL;
    bool ok = true;
    for (int32_t i = 0; i < n && ok; i++) {
        const ShardingSyntax *e = syn->kind == SSYN_TUPLE ? &syn->elems[i] : syn;
        ok = bind_single(e, m, leaves[i]->rank, &out->elems[i], diag, tmp, tmp2);
    }
    free(leaves);
    return ok;
}

bool sharding_bind(const ShardingSyntax *syn, const Mesh *m, const Shape *shape, Sharding *out, Arena *arena,
                   DiagEngine *diag)
{
    StrBuf tmp = {0}, tmp2 = {0};
    bool ok = false;
    bool tuple_shape = shape_is_tuple(shape);
    if (syn->kind == SSYN_TUPLE) {
        int32_t leaves = tuple_shape ? shape_leaf_count(shape) : -1;
        if (leaves == 0 && syn->n_elems == 1) {
            /* a shape without leaves (`()`) takes one element, as XLA's
             * HloSharding::RequiredLeaves has it: the element alone */
            sb_free(&tmp);
            return sharding_bind(&syn->elems[0], m, shape, out, arena, diag);
        }
        if (leaves != syn->n_elems) {
            StrBuf sh = {0};
            shape_print(&sh, shape, false);
            diag_error(diag, syn->span, "tuple sharding %s has %d elements but the shape %s has %d %s",
                       syn_text(&tmp, syn), (int)syn->n_elems, sb_cstr(&sh), (int)(leaves < 0 ? 1 : leaves),
                       tuple_shape ? "leaves" : "array (not a tuple)");
            sb_free(&sh);
        } else {
            ok = bind_leaves(syn, m, shape, out, arena, diag, &tmp, &tmp2);
        }
    } else if (tuple_shape && (syn->kind == SSYN_TILED || syn->kind == SSYN_NAMED || syn->kind == SSYN_UNREDUCED)) {
        ok = bind_leaves(syn, m, shape, out, arena, diag, &tmp, &tmp2);
    } else {
        ok = bind_single(syn, m, tuple_shape ? 0 : shape->rank, out, diag, &tmp, &tmp2);
    }
    sb_free(&tmp);
    sb_free(&tmp2);
    return ok;
}

Sharding sharding_from_tiling(const Tiling *t)
{
    Sharding r = sharding_replicated();
    r.kind = SHARDING_TILED;
    r.tile = *t;
    r.named_form = true;
    if (tiling_is_replicated(t)) {
        r.kind = SHARDING_REPLICATED;
        r.tile.rank = 0;
    }
    return r;
}

bool sharding_to_tiling(const Sharding *sh, int32_t rank, Tiling *out)
{
    tiling_replicated(out, rank);
    if (!sh || sh->kind == SHARDING_REPLICATED || sh->kind == SHARDING_MAXIMAL)
        return true;
    if (sh->kind != SHARDING_TILED)
        return false;
    int32_t total = 0;
    for (int32_t d = 0; d < sh->tile.rank && d < SPMDC_MAX_RANK; d++)
        total += sh->tile.n[d];
    if (sh->tile.rank != rank && total > 0)
        return false;
    if (total > SPMDC_MAX_ATOMS)
        return false;
    if (total > 0) {
        memcpy(out->n, sh->tile.n, sizeof out->n);
        memcpy(out->atoms, sh->tile.atoms, (size_t)total);
    }
    out->partial = sh->tile.partial;
    out->kind = (uint8_t)(sh->tile.partial ? sh->tile.kind : REDUCE_NONE);
    out->perm = total > 0 && !sh->tile.partial ? sh->tile.perm : 0;
    return tiling_valid(out);
}
