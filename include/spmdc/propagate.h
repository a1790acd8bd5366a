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

bool propagate_shardings(HloModule *m, PassCtx *cx);

#endif
