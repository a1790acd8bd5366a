/* canonicalize.h - rewrites that put a module in the form the later passes
 * expect, run after bind_shardings and before propagate_shardings:
 *  - every `call` is inlined into its caller (XLA's partitioner sees calls
 *    inlined too; JAX emits non-inlined helper calls such as jit(tril)),
 *    unless the options say keep_calls (the partitioner then partitions
 *    each callee for its call site);
 *    an array-shaped call's value becomes a `copy` that keeps the call's
 *    name and sharding, so names in the per-device program still match the
 *    input (a tuple-shaped call is replaced by the body's root);
 *  - custom-call "xla.sdy.FuncResultSharding" (a Shardy identity) becomes a
 *    copy;
 *  - Shardy's shard_map borders (custom-calls xla.sdy.GlobalToLocalShape /
 *    xla.sdy.LocalToGlobalShape with xla.sdy.in_shardings, out_shardings and
 *    manual_axes) become XLA's: per value a Sharding custom-call and
 *    SPMDFullToShardShape / SPMDShardToFullShape with the manual sharding;
 *  - an rng-bit-generator declared with its values only (no state; XLA's
 *    verifier takes that form) becomes the (state, values) form, named
 *    NAME.state-bits, and get-tuple-element 1 of it, which keeps the name
 *    and sharding;
 *  - computations no longer reachable from the entry are dropped.
 * A module whose called computations, expanded per use (calls inlined, loop
 * bodies and branches partitioned per use), would pass four times its
 * instructions plus 2^22 is refused with an error first.
 */
#ifndef SPMDC_CANONICALIZE_H
#define SPMDC_CANONICALIZE_H

#include <stdbool.h>

#include "spmdc/hlo.h"
#include "spmdc/pass.h"

/* False after reporting errors (none are expected for a verified module). */
bool canonicalize_module(HloModule *m, PassCtx *cx);

#endif
