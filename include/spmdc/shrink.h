/* shrink.h - the small twin of a real-size module, for `spmdc verify --shrink`.
 *
 * Every dimension of every value is tied to the factors of the op rules
 * (oprule.h) that read and write it: a factor is one size, so every dim it
 * indexes, in every tensor of the op, has that size; a value's dims are the
 * same in its producer's rule and in each consumer's; tuple, get-tuple-element
 * and control flow (while, conditional, call: loop state, body parameter and
 * root, branch parameters and results) tie leaves to leaves.  Union-find over
 * dims and factors gives SIZE CLASSES; a dim made of several factors (a
 * reshape's split or merge) is the product of their classes.  Each class of
 * size N on a mesh of D devices shrinks to
 *     N' = 2·D + (N mod D)      when that is smaller than N,
 * so N' ≡ N (mod D): for every number of shards t (t divides D) a dim that
 * divides still divides and a padded one is padded alike; the shardings, and
 * so the partitioner's choices, stay the same.  A product class is the
 * product of its shrunk factors.  Classes touching a dimension an op names in
 * its attributes (slice, pad, concatenate, dynamic slicing, gather, scatter,
 * windows, convolution, top-k), a constant's literal, a custom-call, or a
 * factor that is not pass-through or reduction (except reverse and sort) keep
 * their size.
 */
#ifndef SPMDC_SHRINK_H
#define SPMDC_SHRINK_H

#include <stdbool.h>
#include <stdint.h>

#include "spmdc/hlo.h"
#include "spmdc/report.h"
#include "spmdc/strbuf.h"

/* One size class that changed (or was kept although large). */
typedef struct ShrinkClass {
    int64_t from, to;   /* sizes */
    int32_t n_dims;     /* value dims of that class */
    const char *kept_by; /* kept: the instruction that names the size (module arena), else NULL */
} ShrinkClass;

typedef struct ShrinkResult {
    int64_t devices;          /* D */
    int32_t n_shrunk;         /* classes[0..n_shrunk): shrunk, largest first */
    int32_t n_kept;           /* classes[n_shrunk..n_shrunk+n_kept): kept, larger than 2·D, largest first */
    ShrinkClass *classes;     /* heap */
    double elems_before, elems_after; /* array elements over all instructions */
} ShrinkResult;

/* Shrinks m in place (shapes only; m must be bound to its mesh, or have
 * none: D = 1), then nothing else changes: the caller re-checks it
 * (verify_module) and runs the later passes.  Linear in the module. */
void shrink_module(HloModule *m, ShrinkResult *r);
void shrink_result_free(ShrinkResult *r);
/* "twin: 8192 -> 16 (15 dims); kept 224 (conv window, at c1)" lines for the
 * verify output. */
void shrink_describe(StrBuf *b, const ShrinkResult *r);

/* Appends the plan's collectives, one line each, in program order: kind,
 * axes, group size and number of groups ("  all-reduce over model ×8, 1
 * group\n"); none: "  no collectives\n".  Two plans with the same lines
 * have the same collectives. */
void shrink_plan_signature(StrBuf *b, const CommReport *rep);

#endif
