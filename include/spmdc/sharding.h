/* sharding.h - shardings over named mesh axes, and their text forms.
 *
 * Two representations:
 *  - ShardingSyntax: what the text said (positional `{devices=[2,4]<=[8]}`,
 *    iota with transpose, explicit device lists, last_tile_dim_replicate /
 *    last_tile_dims, `{maximal device=N}`, `{manual}`, `{replicated}`, tuples,
 *    or the named form `{mesh[x=2,y=4], [{x},{}]}`).  Built by the parser,
 *    owned by the module arena, never interpreted before the mesh is known.
 *  - Sharding: the compiler's form, bound to a Mesh.  For an array value: for
 *    each tensor dim, the ordered run of mesh atoms (major -> minor) that split
 *    it; atoms not used by any dim are replicated; `partial` atoms mark a
 *    pending reduction (the value is correct only after reducing over them).
 *
 * Binding (bind_shardings in parse.h, then sharding_bind per value) picks
 * the module's mesh (--mesh, else the named meshes in the file, else
 * num_partitions or the device count that positional shardings imply),
 * rebinding named axes by name so `--mesh model=4` recompiles a file written
 * for model=8, and factors positional tile assignments into runs of atoms; a
 * device order that is no transposed iota over the atoms is an error at the
 * sharding.
 *
 * Shard shapes follow XLA: dim d of size N split into t tiles has local size
 * ceil(N/t); tile i covers [i*c, min((i+1)*c, N)).
 */
#ifndef SPMDC_SHARDING_H
#define SPMDC_SHARDING_H

#include <stdbool.h>
#include <stdint.h>

#include "spmdc/arena.h"
#include "spmdc/diag.h"
#include "spmdc/mesh.h"
#include "spmdc/shape.h"
#include "spmdc/strbuf.h"
#include "spmdc/tiling.h"

/* ---------------------------------------------------------------- syntax */

typedef enum ShardingSyntaxKind {
    SSYN_REPLICATED,
    SSYN_MAXIMAL,
    SSYN_MANUAL,
    SSYN_UNKNOWN,
    SSYN_UNREDUCED, /* {unreduced} */
    SSYN_TILED,     /* devices=[...] ... */
    SSYN_NAMED,     /* mesh[...], [...] */
    SSYN_TUPLE,
} ShardingSyntaxKind;

typedef enum SubgroupType { SUBGROUP_REPLICATED, SUBGROUP_MANUAL, SUBGROUP_UNREDUCED, SUBGROUP_MAXIMAL } SubgroupType;

#define SPMDC_MAX_TILE_DIMS (SPMDC_MAX_RANK + 4)

/* One axis reference of the named form: `x`, or a sub-axis `x:(pre)size`. */
typedef struct AxisRefSyntax {
    const char *name;
    int64_t pre_size; /* 0 = the whole axis */
    int64_t size;
    SrcSpan span;
} AxisRefSyntax;

typedef struct ShardingSyntax {
    ShardingSyntaxKind kind;
    SrcSpan span;
    /* SSYN_MAXIMAL */
    int64_t device;
    /* SSYN_TILED: tile dims = data dims + trailing subgroup dims */
    int32_t n_tile_dims;
    int64_t tile_dims[SPMDC_MAX_TILE_DIMS];
    int32_t n_iota_dims;                  /* > 0: iota form `<=[iota_dims] T(perm)` */
    int64_t iota_dims[SPMDC_MAX_TILE_DIMS];
    bool has_perm;
    int32_t iota_perm[SPMDC_MAX_TILE_DIMS];
    int64_t n_devices;                    /* explicit list form: product of tile_dims ids */
    int64_t *devices;
    bool last_tile_dim_replicate;
    int32_t n_subgroups;                  /* last_tile_dims={...} */
    SubgroupType subgroups[4];
    /* SSYN_NAMED */
    int32_t n_mesh_axes;
    const char *mesh_axis_names[SPMDC_MAX_MESH_AXES];
    int64_t mesh_axis_sizes[SPMDC_MAX_MESH_AXES];
    int32_t n_dims;                       /* one entry per tensor dim */
    int32_t *dim_n_axes;                  /* [n_dims] */
    AxisRefSyntax **dim_axes;             /* [n_dims][dim_n_axes[d]] */
    uint32_t open_dims;                   /* bit d: dim d ends with '?' */
    uint8_t dim_priority[SPMDC_MAX_RANK]; /* per dim 1 + N for a trailing `p<N>` (Shardy's priority), 0 if none */
    int32_t n_replicated_axes, n_unreduced_axes, n_manual_axes;
    AxisRefSyntax *replicated_axes, *unreduced_axes, *manual_axes;
    bool named_replicated, named_manual, named_unreduced; /* `mesh[...], replicated` */
    /* SSYN_TUPLE: flat leaves */
    int32_t n_elems;
    struct ShardingSyntax *elems;
} ShardingSyntax;

/* ---------------------------------------------------------------- bound form */

typedef enum ShardingKind {
    SHARDING_REPLICATED, /* every device holds the whole value */
    SHARDING_TILED,      /* some dim split over atoms, and/or a pending partial */
    SHARDING_MAXIMAL,    /* only `device` holds it */
    SHARDING_MANUAL,     /* already per-device: not touched */
    SHARDING_TUPLE,      /* one leaf sharding per array leaf (flat) */
} ShardingKind;

typedef struct Sharding {
    ShardingKind kind;
    Tiling tile;                      /* TILED: per dim the atoms splitting it, and the pending
                                         reduction (tiling.h); REPLICATED: tile.rank only */
    int64_t device;                   /* MAXIMAL */
    /* Atoms along which the value is manual: the program holds each
     * device's own piece and the partitioner leaves it as written (shard_map
     * inside jit).  MANUAL: every atom.  TILED / REPLICATED: a partially
     * manual sharding (`last_tile_dims={manual, ...}`, `manual={x}`): manual
     * along these atoms, automatic (tile) along the others, which never
     * include them. */
    uint32_t manual_atoms;
    bool named_form;                  /* print back as the named (mesh) form */
    /* What an annotation says beyond its tiling (propagation reads these;
     * all 0 for shardings no user wrote): */
    uint32_t open_dims;               /* bit d: propagation may append atoms to dim d (`{x,?}`,
                                         unspecified_dims) */
    uint32_t replicated_atoms;        /* atoms the annotation keeps replicated (`replicated={y}`) */
    uint8_t priority[SPMDC_MAX_RANK]; /* per dim 1 + N for `p<N>` (lower N wins), 0 if none */
    int32_t n_elems;                  /* TUPLE */
    struct Sharding *elems;           /* TUPLE (arena) */
} Sharding;

Sharding sharding_replicated(void);
Sharding sharding_maximal(int64_t device);
/* A TILED sharding of the given rank with no atoms yet (== replicated until
 * atoms are added with sharding_set_dim). */
Sharding sharding_tiled(int32_t rank);
/* Replaces dim d's atoms with atoms[0..n) (major -> minor). */
void sharding_set_dim(Sharding *s, int32_t dim, const int8_t *atoms, int32_t n);
/* Pointer to dim d's atoms (count in s->dim_n[d]); NULL-safe for REPLICATED. */
const int8_t *sharding_dim_atoms(const Sharding *s, int32_t dim);
int32_t sharding_dim_n(const Sharding *s, int32_t dim);
/* REPLICATED when no dim uses an atom and nothing is partial; otherwise TILED. */
void sharding_normalize(Sharding *s);
bool sharding_is_replicated(const Sharding *s); /* no tiling, no partial (or kind REPLICATED) */
bool sharding_is_tiled(const Sharding *s);      /* some dim split */
bool sharding_equal(const Sharding *a, const Sharding *b); /* ignores named_form */
/* Leaf i of a tuple sharding; a non-tuple sharding is its own every leaf. */
const Sharding *sharding_leaf(const Sharding *s, int32_t leaf);

/* Mask of the atoms that split some dim. */
uint32_t sharding_tiled_atoms(const Sharding *s);
/* Tiles along dim d (product of its atoms' sizes; 1 if unsplit). */
int64_t sharding_dim_tiles(const Sharding *s, const Mesh *m, int32_t dim);
/* Number of distinct tiles (product over dims). */
int64_t sharding_num_tiles(const Sharding *s, const Mesh *m);
/* Tile index of `device` along dim d: mixed radix of its atom coordinates. */
int64_t sharding_tile_index(const Sharding *s, const Mesh *m, int32_t dim, int64_t device);
/* Per-device shape: dim d becomes ceil(N_d / tiles_d).  Tuples leafwise
 * (elems allocated in arena; arena may be NULL for arrays). */
void sharding_shard_shape(const Sharding *s, const Mesh *m, const Shape *global, Shape *local, Arena *arena);
/* True iff every split dim divides evenly. */
bool sharding_is_even(const Sharding *s, const Mesh *m, const Shape *global);
/* Element offset of device's tile along dim d: tile_index * ceil(N_d/tiles_d). */
int64_t sharding_offset(const Sharding *s, const Mesh *m, const Shape *global, int32_t dim, int64_t device);

/* out dim k takes in dim perm[k] (transpose semantics); rank = length of perm. */
void sharding_transpose(const Sharding *in, const int64_t *perm, int32_t rank, Sharding *out);
/* Copy of s with the dims in dim_mask unsplit (their atoms become replicated). */
Sharding sharding_replicate_dims(const Sharding *s, uint32_t dim_mask);

/* Binds a parsed syntax to the mesh for a value of the given shape (tuple
 * syntax against tuple shapes, leafwise; a single sharding on a tuple shape
 * applies to every leaf).  On failure reports through diag at syntax->span
 * and returns false.  out->elems come from arena. */
bool sharding_bind(const ShardingSyntax *syn, const Mesh *m, const Shape *shape, Sharding *out,
                   Arena *arena, DiagEngine *diag);
/* Appends the sharding in XLA's text form, without "sharding=":
 * named_form -> "{mesh[x=2,y=4], [{x}, {}]}", else positional
 * "{devices=[2,1,4]<=[8] last_tile_dim_replicate}", "{replicated}",
 * "{maximal device=0}", tuples "{{...}, {...}}".  A replicated sharding in
 * named form prints s->rank empty dims: "{mesh[x=2], [{}, {}]}". */
void sharding_print(StrBuf *b, const Sharding *s, const Mesh *m);
/* sharding_print in the spelling XLA 0.10.2's parser requires for the
 * named form: axis names in single quotes, "{mesh['x'=2,'y'=4], [{'x'},
 * {'y':(2)2}]}" (positional forms as sharding_print). */
void sharding_print_quoted(StrBuf *b, const Sharding *s, const Mesh *m);
/* Appends a short human form for reports: "[{model}, {}]", "replicated",
 * "[{x}, {y}] partial(sum) over {z}"; a tuple's first
 * SHARDING_DESCRIBE_LEAVES leaves, "(replicated, [{x}], ... (67411 in
 * all))", so that a report naming a large tuple once per collective stays
 * linear in the program's size. */
void sharding_describe(StrBuf *b, const Sharding *s, const Mesh *m);
#define SHARDING_DESCRIBE_LEAVES 16
/* The TILED sharding (REPLICATED when nothing is split or partial) holding
 * tiling t, in the named form; no annotation attributes. */
Sharding sharding_from_tiling(const Tiling *t);
/* The tiling a bound sharding gives an array of the given rank: TILED as it
 * is, REPLICATED and MAXIMAL as replicated (every device computes a maximal
 * value; the device that owns it is among them); a partially manual
 * sharding gives its automatic part.  False for MANUAL, TUPLE, a rank
 * mismatch or an invalid tiling. */
bool sharding_to_tiling(const Sharding *sh, int32_t rank, Tiling *out);

/* ---------------------------------------------------------------- helpers
 * (added by the sharding module; not part of the original contract) */

/* Expands XLA's iota form: the ids 0..P-1 reshaped to dims[0..n_dims),
 * transposed by perm (result axis i is source axis perm[i]; NULL = identity),
 * written row-major to out[0..P).  Used for `devices=[..]<=[..]T(..)` and
 * iota replica groups `[G,S]<=[..]T(..)` (row g = group g). */
void sharding_iota_expand(int32_t n_dims, const int64_t *dims, const int32_t *perm, int64_t *out);
/* Appends the syntax as written, e.g. "{devices=[2,4]<=[4,2]T(1,0)}" (used in
 * diagnostics). */
void sharding_syntax_print(StrBuf *b, const ShardingSyntax *s);
/* A deep copy of s (its arrays and names) in a. */
ShardingSyntax *sharding_syntax_copy(const ShardingSyntax *s, Arena *a);
/* s read from a one-line text, moved to the same text on `line`, dcol
 * columns to the right (left if negative): a copy in a whose spans (its
 * own, its leaves', every axis reference's) are on that line and shifted;
 * the arrays without spans, the names and device lists are shared with s,
 * which must outlive the copy.  Spans with line 0 (no position) stay. */
ShardingSyntax *sharding_syntax_moved(const ShardingSyntax *s, uint32_t line, int64_t dcol, Arena *a);
/* sharding_syntax_moved into *dst (a tuple's leaf, say) instead of a new record. */
void sharding_syntax_move_into(ShardingSyntax *dst, const ShardingSyntax *s, uint32_t line, int64_t dcol, Arena *a);

#endif
