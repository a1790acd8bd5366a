/* sim.h - reference interpreter and N-device SPMD simulator (oracle.h builds
 * `spmdc verify` on them).
 *
 * Values (SimValue) are a shape plus one contiguous, reference-counted,
 * row-major buffer holding the elements in their own type (pred/s8/u8 one
 * byte, s16/u16/f16/bf16 two, s32/u32/f32 four, s64/u64/f64 eight; s1..s4
 * and u1..u4 one byte each, sign-extended / zero-extended).  Tuples hold
 * element values.  Copying a value (sim_value_share) shares its buffers;
 * buffers are never written once a value is shared.
 *
 * The interpreter (interp.c, interp_ops.c, numeric.c) runs one device:
 * every opcode of hlo_opcodes.def except rng, rng-bit-generator and
 * custom-calls other than "Sharding"; element types pred, s*, u*, f16,
 * bf16, f32, f64 (complex and f8/f4 types are rejected).  Floats are
 * computed in double and rounded to their type after every op (bf16/f16 to
 * nearest even), integers wrap like XLA's.
 *
 * The simulator (sim.c) runs a partitioned program on N devices in lockstep
 * over the entry computation and executes the collectives with their real
 * group semantics (replica_groups, channel_id, use_global_device_ids).
 *
 * Errors (unsupported ops, inconsistent replica groups, bad arguments) are
 * reported through the DiagEngine at the instruction's span, naming it; the
 * functions then return false.  Nothing is printed otherwise.
 */
#ifndef SPMDC_SIM_H
#define SPMDC_SIM_H

#include <stdbool.h>
#include <stdint.h>

#include "spmdc/diag.h"
#include "spmdc/hlo.h"
#include "spmdc/shape.h"

typedef struct SimBuffer SimBuffer; /* refcounted element storage (sim.h's comment) */

typedef struct SimValue {
    Shape shape;              /* arrays: type, rank, dims (no layout, no elems);
                                 tuples: type ET_TUPLE, n_elems (elems NULL) */
    SimBuffer *buf;           /* arrays: the elements (NULL for 0 bytes) */
    struct SimValue *elems;   /* tuples: shape.n_elems values (heap) */
} SimValue;

/* ---------------------------------------------------------------- values */

/* A zero-filled array value of shape s (an array shape; layout dropped). */
SimValue sim_value_new(const Shape *s);
/* A tuple of n empty values (fill elems[i] with owned values). */
SimValue sim_value_tuple(int32_t n);
/* Drops v's references (buffers are freed with their last reference) and
 * sets *v to the empty value.  An empty value is a no-op. */
void sim_value_release(SimValue *v);
/* A new reference to the same contents (buffers shared, tuple arrays copied). */
SimValue sim_value_share(const SimValue *v);
/* A deep copy whose buffers are not shared (writable). */
SimValue sim_value_clone(const SimValue *v);
/* Element storage of an array value (NULL when it has no bytes).  Write only
 * to values you created and have not shared. */
void *sim_value_data(const SimValue *v);
/* Bytes per stored element of type t (0 for token; -1 unsupported). */
int sim_elem_bytes(ElemType t);
/* Element i (row-major) as a double (integers converted, pred 0/1). */
double sim_value_get_f64(const SimValue *v, int64_t i);
/* Element i as an integer (floats truncated; u64 as its bit pattern). */
int64_t sim_value_get_i64(const SimValue *v, int64_t i);
/* Sets element i from a double, rounded to the element type (integers:
 * truncated toward zero, saturated). */
void sim_value_set_f64(SimValue *v, int64_t i, double x);
/* Sets element i from an integer (wraps to the type's width; floats rounded). */
void sim_value_set_i64(SimValue *v, int64_t i, int64_t x);
/* Leaf k of a (nested) tuple value in shape order (the value itself for
 * arrays).  O(k): to visit every leaf use sim_value_leaves. */
const SimValue *sim_value_leaf(const SimValue *v, int32_t k);
/* The leaves of v in shape order (depth-first; v itself for an array) into
 * out[0..min(n, cap)), pointers into v; returns n, v's leaf count. */
int32_t sim_value_leaves(const SimValue *v, const SimValue **out, int32_t cap);
/* Appends the value as HLO literal text ("{1, 2}", "(1, {2})") to b. */
void sim_value_print(StrBuf *b, const SimValue *v);

/* ---------------------------------------------------------------- running */

/* Runs the entry computation of m on one device with the given partition
 * and replica id.  args[0..n_args) are the entry's parameters (not
 * consumed; shapes must match).  Collectives need every participant to be
 * this device (groups of one).  *out receives the root value (owned by the
 * caller).  False after reporting through diag. */
bool sim_interp_run(const HloModule *m, const SimValue *args, int32_t n_args, int64_t partition_id,
                    SimValue *out, DiagEngine *diag);

/* Called after the simulator computed an instruction of the entry
 * computation: vals[0..n_devices) are each device's value (borrowed). */
typedef void (*SimObserveFn)(void *user, int32_t inst, const SimValue *vals, int64_t n_devices);

typedef struct SimOptions {
    int64_t n_partitions;     /* devices per replica (>= 1) */
    int64_t n_replicas;       /* replicas (>= 1); device id = replica * n_partitions + partition */
    SimObserveFn observe;     /* or NULL */
    void *observe_user;
    double work_limit;        /* element operations before the run stops (0: SIM_WORK_LIMIT, 1e10) */
} SimOptions;

/* Runs the entry computation of m on n = n_partitions * n_replicas devices
 * in lockstep.  args is device-major: device d's parameters are
 * args[d * n_args .. (d+1) * n_args) (not consumed).  outs[0..n) receive each
 * device's root value (owned by the caller; left empty on failure).
 * Collectives inside while/conditional/call bodies are run in lockstep too
 * as long as every device takes the same path (otherwise an error).  False
 * after reporting through diag. */
bool sim_run_spmd(const HloModule *m, const SimOptions *opt, const SimValue *args, int32_t n_args,
                  SimValue *outs, DiagEngine *diag);
/* sim_run_spmd that also says why a run failed: *refused (not NULL) is set
 * true when the simulator cannot run the module (an op or element type it
 * does not support, the work budget), false when the program itself failed
 * (devices that disagree on a loop condition or branch, collectives whose
 * groups do not fit). */
bool sim_run_spmd_why(const HloModule *m, const SimOptions *opt, const SimValue *args, int32_t n_args,
                      SimValue *outs, DiagEngine *diag, bool *refused);

/* ---------------------------------------------------------------- cost */

/* What running a module in the simulator costs, from its declared shapes. */
typedef struct SimCost {
    double work;        /* element operations of one run of the entry computation
                           (sim_inst_work summed; a while body counted once) */
    double peak_bytes;  /* largest total of live buffers (values are freed after
                           their last use; called computations add their own peak) */
    double total_bytes; /* every buffer the entry computation allocates, summed */
    int32_t worst_comp, worst_inst; /* the instruction with the most work (-1: none) */
    double worst_work;
} SimCost;

/* Element operations of one instruction of computation c: elements produced
 * (elementwise, data movement), times the contracted size for dot, times
 * the kernel's input features and window for convolution, times the window
 * for reduce-window and select-and-scatter, times log2 of the sorted
 * dimension for sort, reduced/scattered/mapped elements times one
 * application of the called computation (callee_work[comp], or 1 when
 * callee_work is NULL).  Doubles: no shape overflows them. */
double sim_inst_work(const HloModule *m, const HloComputation *c, const HloInst *in, const double *callee_work);
/* The cost of one run of m's entry computation on one device.  Linear in
 * the module. */
SimCost sim_module_cost(const HloModule *m);

#endif
