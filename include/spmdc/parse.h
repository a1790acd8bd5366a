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
 * or NULL after reporting >= 1 error (nothing leaks either way).
 * Checked here: syntax, names (undefined / duplicate / used before their
 * definition, computations defined before their callers), attribute value
 * kinds, literals against their shapes, operand shapes where the text writes
 * them (`add(f32[4] %x, ...)`), the signature against parameters and root,
 * and sharding syntax (ShardingSyntax; inst->sharding stays NULL).  Dynamic
 * dimensions, nested operand instructions and mesh device_ids are rejected.
 * Linear time; peak memory is the module plus one instruction's parse tree.
 * An elided constant `{...}` has Literal.elided set and i/f NULL. */
HloModule *parse_hlo(const char *text, size_t len, uint32_t file_id, DiagEngine *diag);

/* Inputs of this many bytes or more are scanned on a thread of their own
 * while the parser and the lowering run on the caller's (the first of
 * parse_hlo's two parses; the module and every diagnostic are the same
 * either way).  256 KiB: below it the thread's start costs more than it
 * saves. */
#define PARSE_THREAD_MIN ((size_t)256 << 10)
/* Sets that threshold for the tests (1: every input; 0: the default). */
void parse_set_thread_min(size_t bytes);
/* Whether parse_hlo runs the parser without LAC first (the default, true);
 * false: the LAC parser alone, token by token, for the tests that check
 * both give the same module and messages. */
void parse_set_fast_first(bool on);
/* How many parse_hlo calls so far kept the module of the parser without
 * LAC (it reported nothing); the tests check the coarse tokens do not
 * send clean inputs to the second parse. */
uint64_t parse_fast_kept(void);

/* Chooses the module's mesh and binds every instruction's sharding_src to
 * inst->sharding (sets m->mesh, m->has_mesh; sharding_from_user = true):
 * opt->mesh if given (named axes of the file are rebound by name; positional
 * shardings must agree with its device count), else the meshes written in
 * named shardings (they must agree), else num_partitions or the device count
 * positional shardings imply (one axis "d0").  False after reporting errors. */
bool bind_shardings(HloModule *m, PassCtx *cx);

#endif
