/* propagate.h - sharding propagation over the whole module.
 *
 * Every instruction of every computation ends with a sharding (inst->sharding
 * non-NULL).  The rules are the op-rule registry's (oprule.h, the factor
 * model); loop bodies, branches and callees are tied to their callers by
 * data-flow edges; a worklist over def-use edges runs Shardy's schedule
 * (user priorities, then op priorities) and decides conflicts by the
 * report's cost model (reshard_cost), so the work is linear in the module
 * and the result does not depend on the order of instructions.  A user's
 * annotation (sharding_from_user) is never overwritten; an open dim of one
 * may be extended.  Values nothing reaches become replicated.  The values
 * of a partially manual region (shard_map over some mesh axes) get
 * shardings with manual_atoms set: manual along those atoms, split by
 * propagation over the others.  Requires
 * m->has_mesh (bind_shardings).  The rules, their order and the tie-break:
 * docs/propagation.md.
 */
#ifndef SPMDC_PROPAGATE_H
#define SPMDC_PROPAGATE_H

#include <stdbool.h>

#include "spmdc/hlo.h"
#include "spmdc/pass.h"

/* Fills inst->sharding of every instruction of every computation (new
 * shardings in m->arena; tuple values get SHARDING_TUPLE, one leaf per array
 * leaf).  Shardings with sharding_from_user are kept as they are.  Uses
 * cx->scratch for temporaries.  Reports nothing and returns true (there is no
 * user error to find here); without m->has_mesh everything not annotated
 * becomes replicated.  The rules and their order: docs/propagation.md.
 * Also sets every instruction's sharding_origin / sharding_dim_origin
 * (hlo.h): the annotation each inferred sharding (and each split dim of an
 * array) came from. */
bool propagate_shardings(HloModule *m, PassCtx *cx);

/* propagate_shardings, and appends to *why (may be NULL) why every value
 * got its sharding (the text `spmdc propagate --explain` prints, docs/cli.md):
 * a summary line, then per instruction and array leaf the annotation(s) it
 * came from (instruction and line), the path it travelled (each value on the
 * way and the instruction it came through), and every conflict decided there
 * with its candidates and their costs in bytes per device (reshard_cost). */
bool propagate_shardings_explained(HloModule *m, PassCtx *cx, StrBuf *why);

#endif
