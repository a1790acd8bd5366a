/* reshard.h - the transition catalogue: how an array value moves from one
 * tiling to another, and what that costs.
 *
 * reshard_plan decides the steps (local slice, reduce-scatter, all-reduce,
 * all-to-all, all-gather, collective-permute), each costed in bytes sent per
 * device by comm_bytes_per_device (report.h, docs/report.md); the
 * partitioner lowers a plan to instructions (reshard_lower, internal), and
 * propagation and the partitioner compare candidate shardings with
 * reshard_cost.  Pure functions of the mesh, the global shape and the two
 * tilings.
 */
#ifndef SPMDC_RESHARD_H
#define SPMDC_RESHARD_H

#include <stdbool.h>
#include <stdint.h>

#include "spmdc/arena.h"
#include "spmdc/mesh.h"
#include "spmdc/report.h"
#include "spmdc/shape.h"
#include "spmdc/tiling.h"

/* Cost of something impossible.  Every cost is at most this, so the sum of
 * two never overflows (callers add costs pairwise and clamp).  A real cost
 * reaches it only for an all-reduce of a value of nearly 2^62 bytes (the
 * largest shape spmdc takes), which then counts as impossible. */
#define RESHARD_INF_COST (INT64_MAX / 2)


typedef enum StepKind {
    STEP_SLICE,          /* local dynamic-slice: some dims get more (replicated) atoms appended */
    STEP_ALL_REDUCE,     /* atoms: the reduced partial atoms */
    STEP_REDUCE_SCATTER, /* dim: scattered dim; atoms appended to it (minor) */
    STEP_ALL_TO_ALL,     /* atoms: suffix of `dim` moved to the end of `dim2` */
    STEP_ALL_GATHER,     /* atoms: suffix of `dim` gathered away */
    STEP_COLLECTIVE_PERMUTE, /* same tiles per dim in another device order; atoms: those involved */
    STEP_MASK,           /* a value the same on every device of a group becomes a pending reduction
                            over the group's atoms: the group's first device keeps it, the others
                            hold the reduction's identity (local, no bytes); atoms: the group */
} StepKind;

typedef struct ReshardStep {
    StepKind kind;
    int32_t dim, dim2;
    int32_t n_atoms;
    int8_t atoms[SPMDC_MAX_ATOMS]; /* group order (major -> minor) */
    Tiling after;                  /* the state the step produces */
    int64_t bytes;                 /* per device, comm_bytes_per_device, halo_bytes included */
    int64_t halo_bytes;            /* of the halo exchanges that re-chunk a dim whose shards do not
                                      nest (uneven dims; reshard.c) */
} ReshardStep;

#define RESHARD_MAX_STEPS 64

typedef struct ReshardPlan {
    int32_t n_steps;
    int64_t bytes;        /* sum over the steps */
    bool full_remat;      /* a step gathers the whole tensor although the target is split */
    ReshardStep steps[RESHARD_MAX_STEPS];
} ReshardPlan;

/* Decides how an array of shape `global` moves from state `from` to `to`
 * (dims that do not divide keep XLA's ceil layout: reshard.c's fix-ups).  Order: local slices first (they shrink the data), then
 * reduce-scatters, all-reduces, all-to-alls, and all-gathers last; a
 * single collective-permute instead when both states have the same tile
 * count on every dim (only the device order differs) and that is cheaper.
 * Atoms `to` is partial over and `from` is not are reached last by a mask
 * step (the value becomes a pending reduction whose other shares are the
 * identity).  False when impossible: both are partial with different
 * kinds.  plan->bytes is the per-device total. */
bool reshard_plan(const Mesh *m, const Shape *global, const Tiling *from, const Tiling *to, ReshardPlan *plan);
/* plan->bytes of the plan from -> to, RESHARD_INF_COST if impossible. */
int64_t reshard_cost(const Mesh *m, const Shape *global, const Tiling *from, const Tiling *to);

/* A memo of reshard_cost for one mesh: a direct-mapped table keyed by the
 * whole input (element type, dims, both tilings byte for byte), so a hit
 * returns exactly what reshard_cost would.  A pass that costs the same
 * transitions again and again (every layer of a model repeats them) keeps
 * one for its run.  Sized by n_insts, the instructions the pass will visit:
 * the power of two at or above a quarter of it, from 256 to RESHARD_MEMO_SLOTS entries
 * (about 180 bytes each: 1.4 MiB at the most), and a sixteenth as many
 * plans (below), so a small module does not clear megabytes it never
 * uses.  Storage comes from arena and lives as long as it. */
#define RESHARD_MEMO_SLOTS 8192
typedef struct ReshardMemo ReshardMemo;
ReshardMemo *reshard_memo_new(Arena *arena, int64_t n_insts);
/* reshard_cost(m, global, from, to) through memo (m: the one mesh the memo
 * is used with; global: an array). */
int64_t reshard_cost_memo(ReshardMemo *memo, const Mesh *m, const Shape *global, const Tiling *from,
                          const Tiling *to);
/* reshard_plan(m, global, from, to, plan) through memo: the same result and
 * plan (a failed one with no steps).  Plans of up to 4 steps are kept, in a
 * direct-mapped table of 16 to 512 inside the memo (about 640 bytes each),
 * so a program of repeated layers plans each of its transitions once. */
bool reshard_plan_memo(ReshardMemo *memo, const Mesh *m, const Shape *global, const Tiling *from, const Tiling *to,
                       ReshardPlan *plan);

#endif
