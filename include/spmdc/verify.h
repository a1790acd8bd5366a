/* verify.h - semantic checks of a parsed or generated module.
 *
 * verify_module checks, for every instruction, its operand count (opcode
 * table arity), its attributes and its shape against the shape inferred from
 * its operands (XLA's shape inference rules), the called computations'
 * signatures (reducers take two scalars, while body/cond, ...), and that
 * every computation has a root.  Each failure is an error at the
 * instruction's span naming it: "dot.3: result shape f32[8,8] does not match
 * the inferred f32[8,4]".
 */
#ifndef SPMDC_VERIFY_H
#define SPMDC_VERIFY_H

#include <stdbool.h>

#include "spmdc/diag.h"
#include "spmdc/hlo.h"

bool verify_module(const HloModule *m, DiagEngine *diag);

/* Infers the result shape of instruction i of computation c from its
 * operands and attributes.  False (with a message in err) when the operands
 * do not fit the opcode.  Tuple results get elems from m's arena. */
bool verify_infer_shape(const HloModule *m, int32_t c, int32_t i, Shape *out, char *err, size_t errlen);

#endif
