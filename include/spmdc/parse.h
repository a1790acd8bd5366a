/* parse.h - HLO text -> IR (grammar/hlo.l, grammar/hlo.y, src/ast.c, src/parse.c).
 *
 * The bison grammar builds an AST only; parse.c lowers it to an HloModule:
 * resolves computation and operand names, interprets every attribute spmdc
 * knows (typed HloAttrs), keeps the others verbatim, fills ShardingSyntax for
 * `sharding=`.  Shapes are taken from the text; checking them against the
 * operands is verify.c's job.
 */
#ifndef SPMDC_PARSE_H
#define SPMDC_PARSE_H

#include <stddef.h>

#include "spmdc/diag.h"
#include "spmdc/hlo.h"
#include "spmdc/pass.h"

/* Parses text[0..len) (need not be NUL-terminated; may contain anything).
 * path is used in diagnostics; the text must be registered with
 * diag_add_file by the caller, whose file_id is passed.  Returns the module,
 * or NULL after reporting >= 1 error (nothing leaks either way). */
HloModule *parse_hlo(const char *text, size_t len, uint32_t file_id, DiagEngine *diag);

/* Chooses the module's mesh and binds every instruction's sharding_src to
 * inst->sharding (sets m->mesh, m->has_mesh; sharding_from_user = true):
 * opt->mesh if given (named axes of the file are rebound by name; positional
 * shardings must agree with its device count), else the meshes written in
 * named shardings (they must agree), else num_partitions or the device count
 * positional shardings imply (one axis "d0").  False after reporting errors. */
bool bind_shardings(HloModule *m, PassCtx *cx);

#endif
