/* tiling.c - the tiling of one array value and the geometry of its shards
 * (see tiling.h). */
#include "spmdc/tiling.h"

#include <string.h>

#include "spmdc/diag.h"
#include "spmdc/sharding.h"

const char *reduce_kind_name(ReduceKind k)
{
    switch (k) {
    case REDUCE_SUM: return "sum";
    case REDUCE_MAX: return "max";
    case REDUCE_MIN: return "min";
    case REDUCE_PROD: return "prod";
    case REDUCE_AND: return "and";
    case REDUCE_OR: return "or";
    case REDUCE_NONE: break;
    }
    return "none";
}

/* ================================================================ runs */

void tiling_replicated(Tiling *t, int32_t rank)
{
    SPMDC_ASSERT(rank >= 0 && rank <= SPMDC_MAX_RANK);
    memset(t, 0, sizeof *t);
    t->rank = (int8_t)rank;
}

static int32_t dim_start(const Tiling *t, int32_t d) { return tiling_dim_start(t, d); }

void tiling_set_dim(Tiling *t, int32_t d, const int8_t *atoms, int32_t n)
{
    SPMDC_ASSERT(d >= 0 && d < t->rank && n >= 0);
    int32_t st = dim_start(t, d), old = t->n[d], total = dim_start(t, t->rank);
    SPMDC_ASSERT(total - old + n <= SPMDC_MAX_ATOMS);
    if (n != old && total > st + old)
        memmove(t->atoms + st + n, t->atoms + st + old, (size_t)(total - st - old));
    if (n)
        memcpy(t->atoms + st, atoms, (size_t)n);
    int32_t nt = total - old + n;
    if (nt < total) /* the bytes past the runs stay zero */
        memset(t->atoms + nt, 0, (size_t)(total - nt));
    t->n[d] = (uint8_t)n;
}

uint32_t tiling_used(const Tiling *t)
{
    uint32_t m = 0;
    int32_t total = dim_start(t, t->rank);
    for (int32_t i = 0; i < total; i++)
        m |= 1u << t->atoms[i];
    return m;
}

bool tiling_valid(const Tiling *t)
{
    if (t->rank < 0 || t->rank > SPMDC_MAX_RANK)
        return false;
    uint32_t m = 0;
    int32_t total = dim_start(t, t->rank);
    if (total > SPMDC_MAX_ATOMS)
        return false;
    for (int32_t i = 0; i < total; i++) {
        if (t->atoms[i] < 0 || t->atoms[i] >= SPMDC_MAX_ATOMS || (m & (1u << t->atoms[i])))
            return false;
        m |= 1u << t->atoms[i];
    }
    if ((m & t->partial) != 0)
        return false;
    return (t->partial == 0) == (t->kind == REDUCE_NONE);
}

bool tiling_is_replicated(const Tiling *t) { return t->partial == 0 && dim_start(t, t->rank) == 0; }

Tiling tiling_strip_partial(Tiling t)
{
    t.partial = 0;
    t.kind = REDUCE_NONE;
    return t;
}

Tiling tiling_clear_dims(Tiling t, uint32_t dim_mask)
{
    for (int32_t d = 0; d < t.rank; d++)
        if (dim_mask & (1u << d))
            tiling_set_dim(&t, d, NULL, 0);
    return t;
}

/* ================================================================ geometry */

int64_t tiling_dim_tiles(const Tiling *t, const Mesh *m, int32_t d)
{
    int64_t n = 1;
    const int8_t *a = tiling_dim(t, d);
    for (int32_t i = 0; i < t->n[d]; i++)
        n *= m->atom_size[a[i]];
    return n;
}

int64_t tiling_shard_size(int64_t n, int64_t tiles)
{
    if (tiles <= 1)
        return n;
    return n / tiles + (n % tiles != 0);
}

/* The tiles of a dim split by the run of n atoms at *a (the product of
 * their sizes); *a is moved past the run. */
static inline int64_t run_tiles(const Mesh *m, const int8_t **a, int32_t n)
{
    int64_t tiles = 1;
    for (int32_t i = 0; i < n; i++)
        tiles *= m->atom_size[*(*a)++];
    return tiles;
}

/* The two walk the dims' runs in order (each starts where the last ended),
 * and an unsplit dim costs no division. */
Shape tiling_local_shape(const Tiling *t, const Mesh *m, const Shape *global)
{
    Shape l = shape_array(global->type, global->rank, global->dims);
    const int8_t *a = t->atoms;
    for (int32_t d = 0; d < global->rank && d < t->rank; d++)
        if (t->n[d] != 0)
            l.dims[d] = tiling_shard_size(global->dims[d], run_tiles(m, &a, t->n[d]));
    return l;
}

bool tiling_is_even(const Tiling *t, const Mesh *m, const Shape *global, int32_t *bad_dim)
{
    const int8_t *a = t->atoms;
    for (int32_t d = 0; d < t->rank && d < global->rank; d++) {
        if (t->n[d] == 0)
            continue;
        if (global->dims[d] % run_tiles(m, &a, t->n[d]) != 0) {
            if (bad_dim)
                *bad_dim = d;
            return false;
        }
    }
    return true;
}

int64_t tiling_tile_index(const Tiling *t, const Mesh *m, int32_t d, int64_t device)
{
    device = mesh_logical_device(m, t->perm, device);
    const int8_t *a = tiling_dim(t, d);
    int64_t idx = 0;
    for (int32_t k = 0; k < t->n[d]; k++)
        idx = idx * m->atom_size[a[k]] + mesh_atom_coord(m, device, a[k]);
    return idx;
}

int64_t tiling_offset(const Tiling *t, const Mesh *m, const Shape *global, int32_t d, int64_t device)
{
    int64_t c = tiling_shard_size(global->dims[d], tiling_dim_tiles(t, m, d));
    return tiling_tile_index(t, m, d, device) * c;
}

int64_t tiling_valid_count(const Tiling *t, const Mesh *m, const Shape *global, int32_t d, int64_t device)
{
    int64_t c = tiling_shard_size(global->dims[d], tiling_dim_tiles(t, m, d));
    int64_t rest = global->dims[d] - tiling_offset(t, m, global, d, device);
    return rest <= 0 ? 0 : rest < c ? rest : c;
}

/* a * b saturating at INT64_MAX (both >= 0). */
static int64_t mul_sat(int64_t a, int64_t b)
{
    if (a != 0 && b > INT64_MAX / a)
        return INT64_MAX;
    return a * b;
}

int64_t tiling_padding_elems(const Tiling *t, const Mesh *m, const Shape *global)
{
    int64_t padded = 1, real = 1;
    for (int32_t d = 0; d < global->rank; d++) {
        int64_t tiles = d < t->rank ? tiling_dim_tiles(t, m, d) : 1;
        padded = mul_sat(padded, mul_sat(tiling_shard_size(global->dims[d], tiles), tiles));
        real = mul_sat(real, global->dims[d]);
    }
    int64_t rep = mesh_mask_size(m, ((m->n_atoms >= 32 ? 0u : (1u << m->n_atoms)) - 1u) & ~tiling_used(t));
    if (padded == INT64_MAX)
        return INT64_MAX;
    return mul_sat(padded - real, rep);
}

int64_t tiling_max_device_padding(const Tiling *t, const Mesh *m, const Shape *global)
{
    int64_t held = 1, real = 1;
    for (int32_t d = 0; d < global->rank; d++) {
        int64_t tiles = d < t->rank ? tiling_dim_tiles(t, m, d) : 1;
        int64_t c = tiling_shard_size(global->dims[d], tiles);
        /* the last tile holds the fewest real elements */
        int64_t last = global->dims[d] - (tiles - 1) * c;
        held = mul_sat(held, c);
        real = mul_sat(real, last < 0 ? 0 : last);
    }
    return held == INT64_MAX ? INT64_MAX : held - real;
}

/* ================================================================ text */

void tiling_describe(StrBuf *b, const Tiling *t, const Mesh *m)
{
    Sharding sh = sharding_from_tiling(t);
    sharding_describe(b, &sh, m);
}
