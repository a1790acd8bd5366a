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

/* Name of the propagation rule of an opcode ("elementwise", "dot", "leaf",
 * "opaque", ...), or NULL if the rule table has no entry for it (a unit test
 * walks hlo_opcodes.def with it). */
const char *propagate_rule_name(HloOpcode op);

#endif
