/* tiling.h - how one array value is laid out over the mesh, and the geometry
 * of its shards.
 *
 * A Tiling is the one representation of an array value's sharding state used
 * everywhere: a bound annotation (Sharding's TILED form embeds one), a
 * propagated sharding, and the state of a value during partitioning.
 *  - For each tensor dim, the ordered run of mesh atoms (major -> minor) that
 *    splits it (mesh.h: atoms are the prime factors of the axes).  Atoms that
 *    split no dim are replicated.
 *  - `partial`: atoms over which the value is a pending reduction of `kind`
 *    (the value is the reduction over those atoms of what the devices hold).
 *  - `perm`: the device order, for shardings whose device list is no
 *    transposed iota over the mesh: the tiles are those of the same tiling
 *    on the mesh's own numbering, held by permuted devices (moved to and from
 *    the mesh's order by a collective-permute).
 *
 * Geometry (XLA's layout, also for dims that do not divide): a dim of N
 * elements split into t tiles has shard size c = ceil(N/t) on EVERY device;
 * tile i holds elements [i*c, min((i+1)*c, N)) and the rest of its c slots
 * is padding (a tile past the end holds only padding).  Padding is explicit:
 * tiling_valid_count and tiling_padding_elems say how much there is, and
 * whoever reads a padded shard masks it.
 *
 * A Tiling is a plain 48-byte value (no pointers); copy it freely.
 */
#ifndef SPMDC_TILING_H
#define SPMDC_TILING_H

#include <stdbool.h>
#include <stdint.h>

#include "spmdc/mesh.h"
#include "spmdc/shape.h"
#include "spmdc/strbuf.h"

/* How a pending partial value combines (the reduction of an all-reduce). */
typedef enum ReduceKind { REDUCE_NONE, REDUCE_SUM, REDUCE_MAX, REDUCE_MIN, REDUCE_PROD, REDUCE_AND, REDUCE_OR } ReduceKind;

/* "sum", "max", ... ("none" for REDUCE_NONE). */
const char *reduce_kind_name(ReduceKind k);

typedef struct Tiling {
    int8_t rank;
    uint8_t n[SPMDC_MAX_RANK];     /* atoms splitting each dim */
    int8_t atoms[SPMDC_MAX_ATOMS]; /* the dims' runs, dim 0 first, each major -> minor */
    uint8_t kind;                  /* ReduceKind of the pending reduction (REDUCE_NONE iff !partial) */
    uint16_t perm;                 /* device order: 0 the mesh's own, k > 0 permutation k of the mesh's
                                      table (mesh.h MeshPerms): physical device P holds the tile of
                                      logical device mesh_logical_device(m, k, P); never with partial */
    uint32_t partial;              /* atoms with a pending reduction */
} Tiling;

_Static_assert(sizeof(Tiling) == 48, "a Tiling is a 48-byte value");

/* ---------------------------------------------------------------- the runs */

/* Replicated, non-partial tiling of the given rank (0..SPMDC_MAX_RANK). */
void tiling_replicated(Tiling *t, int32_t rank);
/* Offset of dim d's run in t->atoms (the runs of dims 0..d-1 come first). */
static inline int32_t tiling_dim_start(const Tiling *t, int32_t d)
{
    int32_t k = 0;
    for (int32_t i = 0; i < d; i++)
        k += t->n[i];
    return k;
}
/* Atoms of dim d (count tiling_dim_n). */
static inline const int8_t *tiling_dim(const Tiling *t, int32_t d) { return t->atoms + tiling_dim_start(t, d); }
static inline int32_t tiling_dim_n(const Tiling *t, int32_t d) { return t->n[d]; }
/* Replaces dim d's run with atoms[0..n) (the total must stay <= SPMDC_MAX_ATOMS). */
void tiling_set_dim(Tiling *t, int32_t d, const int8_t *atoms, int32_t n);
/* Mask of the atoms that split some dim. */
uint32_t tiling_used(const Tiling *t);
/* Total number of atoms over all dims. */
static inline int32_t tiling_n_atoms(const Tiling *t) { return tiling_dim_start(t, t->rank); }
/* True iff no atom is used twice, no partial atom splits a dim, and kind is
 * set exactly when something is partial. */
bool tiling_valid(const Tiling *t);
bool tiling_is_replicated(const Tiling *t); /* nothing split, nothing partial */
/* Same runs, pending reduction and device order (the order of a value
 * split on nothing does not matter).  Inline: the partitioner compares
 * states on every operand of every instruction, mostly runs of 0 to 3
 * atoms, where two memcmp calls cost more than the bytes they compare. */
static inline bool tiling_equal(const Tiling *a, const Tiling *b)
{
    if (a->rank != b->rank || a->partial != b->partial || a->kind != b->kind)
        return false;
    int32_t total = 0;
    for (int32_t d = 0; d < a->rank; d++) {
        if (a->n[d] != b->n[d])
            return false;
        total += a->n[d];
    }
    if (a->perm != b->perm && (a->partial || total != 0))
        return false;
    for (int32_t k = 0; k < total; k++)
        if (a->atoms[k] != b->atoms[k])
            return false;
    return true;
}
/* The tiling without its pending reduction. */
Tiling tiling_strip_partial(Tiling t);
/* Copy of t with the dims in mask unsplit. */
Tiling tiling_clear_dims(Tiling t, uint32_t dim_mask);

/* ---------------------------------------------------------------- geometry */

/* Tiles along dim d: product of its atoms' sizes (1 if unsplit). */
int64_t tiling_dim_tiles(const Tiling *t, const Mesh *m, int32_t d);
/* ceil(n / tiles): the shard size of a dim of n elements in `tiles` tiles. */
int64_t tiling_shard_size(int64_t n, int64_t tiles);
/* Per-device shape (every device has the same): dim d becomes
 * ceil(N_d / tiles_d).  The layout is dropped.  global must be an array. */
Shape tiling_local_shape(const Tiling *t, const Mesh *m, const Shape *global);
/* True iff every split dim divides evenly; else *bad_dim (may be NULL) gets
 * the first dim that does not. */
bool tiling_is_even(const Tiling *t, const Mesh *m, const Shape *global, int32_t *bad_dim);
/* Tile index of (physical) `device` along dim d: mixed radix of the
 * coordinates on the dim's atoms of the logical device it stands for
 * (t->perm). */
int64_t tiling_tile_index(const Tiling *t, const Mesh *m, int32_t d, int64_t device);
/* First element of device's tile along dim d: tile index * ceil(N_d/t_d).
 * May be >= N_d (a tile that holds only padding). */
int64_t tiling_offset(const Tiling *t, const Mesh *m, const Shape *global, int32_t d, int64_t device);
/* Real (non-padding) elements of device's tile along dim d:
 * clamp(N_d - offset, 0, ceil(N_d/t_d)). */
int64_t tiling_valid_count(const Tiling *t, const Mesh *m, const Shape *global, int32_t d, int64_t device);
/* Padding elements per device summed over all devices, i.e. the elements
 * of the padded global array (tiles_d * ceil(N_d/tiles_d) per dim, times the
 * replication) minus those of the real array (times the replication); 0 for
 * an even tiling.  Saturates at INT64_MAX. */
int64_t tiling_padding_elems(const Tiling *t, const Mesh *m, const Shape *global);
/* Padding elements of the device that holds the most (the last tile on
 * every uneven dim): prod(ceil) - prod(valid counts of that device). */
int64_t tiling_max_device_padding(const Tiling *t, const Mesh *m, const Shape *global);

/* ---------------------------------------------------------------- text */

/* "[{model}, {}]", "replicated", "[{x}, {}] partial(sum) over {y}". */
void tiling_describe(StrBuf *b, const Tiling *t, const Mesh *m);

#endif
