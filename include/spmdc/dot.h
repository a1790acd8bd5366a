/* dot.h - the partitioned program as a Graphviz graph (`spmdc compile --dot FILE`).
 *
 * One node per instruction of the input program's partitioned computations
 * (the entry, loop bodies and conditions, branches, callees; the
 * computations ops apply are left out), labelled with its name, opcode,
 * global -> per-device shape and its sharding per dimension
 * ("[{}, {model}]").  Data edges run from operand to user.  An edge whose
 * value had to be resharded for its user is drawn in the colour of the
 * collective kind (all-reduce red, all-gather blue, reduce-scatter orange,
 * all-to-all purple, collective-permute green) and labelled with the
 * collectives and the bytes each device sends; a reshard of a computation's
 * result goes to a "result" node.  Every computation but the entry is a
 * cluster (a loop body is drawn once, whatever its trip count), and a
 * dashed edge leads from a while, conditional or call to the computations
 * it runs.  Output is deterministic.
 */
#ifndef SPMDC_DOT_H
#define SPMDC_DOT_H

#include "spmdc/explain.h"
#include "spmdc/hlo.h"
#include "spmdc/report.h"
#include "spmdc/strbuf.h"

/* Appends the graph of `in` (propagated and partitioned: the report rep
 * and its links in ex come from partitioning it). */
void dot_print(StrBuf *b, const HloModule *in, const CommReport *rep, const Explain *ex);

#endif
