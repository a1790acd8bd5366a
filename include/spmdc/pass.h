/* pass.h - what every pass receives, and the pipeline's options.
 *
 * A pass returns false iff it reported at least one error through cx->diag;
 * the module must then not reach later passes.  Passes never print to
 * stdout/stderr directly and never exit.
 */
#ifndef SPMDC_PASS_H
#define SPMDC_PASS_H

#include <stdbool.h>

#include "spmdc/arena.h"
#include "spmdc/diag.h"
#include "spmdc/mesh.h"

typedef struct SpmdcOptions {
    bool has_mesh;      /* --mesh given */
    Mesh mesh;          /* parsed --mesh */
    const char *mesh_from; /* where mesh came from when not --mesh, for messages ("x.budget:3", the budget
                              file's `mesh =` line; not owned); NULL: --mesh */
    bool keep_calls;    /* --keep-calls: calls are partitioned as computations, not inlined */
} SpmdcOptions;

typedef struct PassCtx {
    Arena *scratch;            /* reset by the driver after every pass */
    DiagEngine *diag;          /* every user-facing message goes here */
    const SpmdcOptions *opt;
} PassCtx;

#endif
