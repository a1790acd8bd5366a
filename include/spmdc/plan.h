/* plan.h - one sharding plan: an input module compiled for one mesh, as
 * `spmdc check` and `spmdc sweep` judge it.
 *
 * plan_compile runs the pipeline `spmdc compile` runs (parse, verify, bind,
 * canonicalize, propagate, partition) and then the memory estimate
 * (memory.h), so the plan's report is the one compile prints, memory keys
 * included.
 */
#ifndef SPMDC_PLAN_H
#define SPMDC_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spmdc/hlo.h"
#include "spmdc/pass.h"
#include "spmdc/report.h"

typedef struct Plan {
    HloModule *in;     /* the input, shardings propagated (owned) */
    HloModule *out;    /* the per-device program (owned), NULL if partitioning failed */
    CommReport rep;    /* its report, memory filled */
} Plan;

/* Compiles text[0..len) (registered in cx->diag as file_id) on the mesh of
 * cx->opt (or the file's).  False after errors were reported through
 * cx->diag; p is then still to be freed (p->in may hold the propagated
 * module when only partitioning failed). */
bool plan_compile(const char *text, size_t len, uint32_t file_id, PassCtx *cx, Plan *p);
/* Frees everything the plan holds; p is left empty. */
void plan_free(Plan *p);

#endif
