/* memory.h - per-device memory of a partitioned program: the peak of live
 * buffers in program order, and the padding uneven shards carry.
 *
 * The estimate (docs/report.md, "Memory") walks the per-device program the
 * partitioner emitted, so every buffer it allocates counts at its local
 * (padded) size: collective results, halo pieces, masks and slices alike.
 *  - The entry's parameters live for the whole run (the caller owns them).
 *  - Every other instruction allocates its result (shape_byte_size of its
 *    local shape) where it is defined and frees it after its last use; the
 *    entry's root lives to the end.
 *  - tuple, get-tuple-element, bitcast and opt-barrier allocate nothing:
 *    they name their operands' buffers, which then live as long as they are
 *    used through them (a get-tuple-element keeps the whole tuple alive).
 *    A while's result is its operand's buffer (the loop state is updated in
 *    place).
 *  - An instruction that calls computations (while, conditional, call)
 *    adds, while it runs, the largest peak of the computations it calls;
 *    a loop body counts once, whatever its trip count (its buffers are
 *    reused by every trip).  Computations ops apply (reducers,
 *    comparators) run on scalars and are not counted.
 * Operands and result are live together at an instruction (no in-place
 * reuse), so the figure is an upper estimate of what XLA's buffer
 * assignment reaches with the same order; it does not reorder instructions.
 * Linear in the module.
 */
#ifndef SPMDC_MEMORY_H
#define SPMDC_MEMORY_H

#include <stdint.h>

#include "spmdc/hlo.h"
#include "spmdc/report.h"

typedef struct MemoryEstimate {
    int64_t peak_bytes;       /* largest total of live buffers on one device, bytes */
    int32_t peak_comp;        /* the computation and instruction of the per-device program where the */
    int32_t peak_inst;        /* peak is reached (the entry's instruction that runs then; -1 if empty) */
    int64_t parameter_bytes;  /* the entry's parameters on one device, bytes */
} MemoryEstimate;

/* The peak of live buffers of one device running the per-device program m
 * (partition_module's output; local shapes).  Sizes saturate at
 * INT64_MAX. */
MemoryEstimate memory_estimate(const HloModule *m);

/* Padding of uneven shards: per array value of the input module `in`
 * (after propagation; every instruction with a tiled sharding, in every
 * computation), the padding elements of the device that holds the most
 * (tiling_max_device_padding) in bytes, summed; and the per-device bytes of
 * the same values at their padded local size, summed (the denominator of
 * the padding share).  Both 0 when nothing is split. */
typedef struct PaddingEstimate {
    int64_t padding_bytes;    /* bytes of padding on the most padded device, summed over values */
    int64_t value_bytes;      /* bytes of every split value's local shard, summed over values */
    int32_t first_comp;       /* the first value (program order, entry first) with padding: */
    int32_t first_inst;       /* computation, instruction, array leaf (0 for arrays) and first */
    int32_t first_leaf;       /* uneven dim; -1 if none */
    int32_t first_dim;
} PaddingEstimate;

PaddingEstimate memory_padding(const HloModule *in);

/* Fills the report's memory keys (peak_bytes_per_device, peak_instruction,
 * padding_bytes_per_device, value_bytes_per_device) from the input module
 * (propagated) and the per-device program. */
void memory_fill_report(CommReport *rep, const HloModule *in, const HloModule *out);

#endif
