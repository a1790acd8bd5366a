/* verify.h - semantic checks of a parsed or generated module.
 *
 * verify_module checks, for every instruction, its operand count (opcode
 * table arity), its attributes and its shape against the shape inferred from
 * its operands (XLA's shape inference rules), the called computations'
 * signatures (reducers take two scalars, while body/cond, ...), and that
 * every computation has a root.  Each failure is an error at the
 * instruction's span naming it: "dot.3: result shape f32[8,8] does not match
 * the shape inferred from its operands, f32[8,4]".  An instruction whose
 * operand failed is not checked (no cascades).  Layouts are ignored.
 */
#ifndef SPMDC_VERIFY_H
#define SPMDC_VERIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spmdc/diag.h"
#include "spmdc/hlo.h"

/* True iff no error was reported.  Linear in the module. */
bool verify_module(const HloModule *m, DiagEngine *diag);

/* Infers the result shape of instruction i of computation c from its
 * operands and attributes (XLA's shape inference).  False (with a message in
 * err, e.g. "reshape cannot change the element count: ...") when the operands
 * or attributes do not fit the opcode.  Ops whose result is not a function of
 * the operands (parameter, constant, iota, custom-call, broadcast's and
 * reshape's dims, convert's and dot's element type) take it from the declared
 * shape.  Tuple results get fresh elems from m's arena, except results that
 * are an operand's or a callee's tuple (copy, get-tuple-element, while, call,
 * ...), which share its elems: hlo_add_inst copies shapes anyway. */
bool verify_infer_shape(const HloModule *m, int32_t c, int32_t i, Shape *out, char *err, size_t errlen);

/* Devices per replica group of a collective, as XLA counts them
 * (GetSubgroupSize): the replica_groups' group size, times num_partitions in
 * cross-replica-and-partition mode (channel_id without
 * use_global_device_ids, all-reduce/all-gather/reduce-scatter); with no
 * replica_groups, every device of the mode (replica_count, num_partitions or
 * both).  0 when there are no replica_groups and the module header gives
 * neither num_partitions nor replica_count. */
int64_t verify_collective_group_size(const HloModule *m, const HloInst *in);

#endif
