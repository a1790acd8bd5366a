/* partition.h - the SPMD partitioner: global program -> per-device program.
 *
 * Input: a module whose every instruction has a sharding (propagate_shardings).
 * Output: a new module, the program every device runs on its own shard, with
 * the collectives (all-reduce, all-gather, reduce-scatter, all-to-all,
 * collective-permute) and local dynamic-slices that resharding needs, and one
 * CommRecord per collective in the report.
 *
 * Every computation the program runs is partitioned: the entry, loop bodies
 * and conditions, conditional branches and called computations (one output
 * computation per call site); computations that ops apply (reducers,
 * comparators) are copied as they are.
 *
 * Naming contract (the simulator's verify relies on it): an output
 * instruction that has the same name as an input instruction of the
 * corresponding computation (the entry for the entry; a body partitioned for
 * a call site for that body) holds that input value's local shard under the
 * input instruction's (propagated) sharding; values in any other state get
 * derived names (name.1, name.arg, ...).
 * Whatever cannot be partitioned correctly is an error naming the
 * instruction; no silently wrong program.
 */
#ifndef SPMDC_PARTITION_H
#define SPMDC_PARTITION_H

#include <stdbool.h>

#include "spmdc/hlo.h"
#include "spmdc/pass.h"
#include "spmdc/report.h"

/* *out receives the new module (caller frees with hlo_module_free), or NULL
 * on error.  rep must be report_init'ed. */
bool partition_module(const HloModule *in, HloModule **out, CommReport *rep, PassCtx *cx);

/* The entry computation's input names as the partitioner's name set needs
 * them first (every output name is checked against them), gathered on a
 * thread of its own while the passes before partition run: the names do
 * not depend on shardings.  From partition_names_start until the set is
 * taken or freed, the module's computations and instruction names must not
 * change (propagation only writes shardings).  NULL when the entry is too
 * small to be worth a thread, or no thread can be made. */
typedef struct PartNames PartNames;
PartNames *partition_names_start(const HloModule *in);
/* Waits for the thread and frees everything; NULL is a no-op. */
void partition_names_free(PartNames *ahead);
/* partition_module, taking the set ahead gathered for in (or NULL); the
 * caller still frees ahead after. */
bool partition_module_ahead(const HloModule *in, HloModule **out, CommReport *rep, PassCtx *cx, PartNames *ahead);

#endif
