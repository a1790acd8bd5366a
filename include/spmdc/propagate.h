/* propagate.h - sharding propagation to a fixed point.
 *
 * Every instruction of every computation ends with a sharding (inst->sharding
 * non-NULL).  Forward (from operands) and backward (from users) rules per
 * opcode, GSPMD-style lattice (more tiles is more specific; a user's
 * annotation, sharding_from_user, is never overwritten).  Deterministic: the
 * same module gives the same shardings.  Values nothing reaches become
 * replicated.  Requires m->has_mesh (bind_shardings).
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
 * got its sharding: per instruction and array leaf, the annotation(s) it
 * came from (instruction and line), the instructions it came through, and
 * every conflict decided on the way with its candidates and their costs in
 * bytes per device (the report's cost model). */
bool propagate_shardings_explained(HloModule *m, PassCtx *cx, StrBuf *why);

#endif
