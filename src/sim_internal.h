/* sim_internal.h - private interfaces of the interpreter, the simulator and the oracle.
 *
 * numeric.c  element storage, rounding, elementwise kernels, strided copies
 * interp.c   values, the per-device interpreter core, data movement ops
 * interp_ops.c  dot, convolution, reduce, reduce-window, select-and-scatter,
 *            gather, scatter, sort, map (ops with their own index math)
 * sim.c      lockstep N-device execution and the collectives
 * oracle.c   `spmdc verify` (oracle.h)
 */
#ifndef SPMDC_SIM_INTERNAL_H
#define SPMDC_SIM_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "spmdc/hlo.h"
#include "spmdc/sim.h"

/* ---------------------------------------------------------------- numeric.c */

/* Bytes per stored element; 0 for token/opaque; -1 for unsupported types
 * (complex, f8, f4). */
int num_elem_bytes(ElemType t);
/* pred, integers, f16, bf16, f32, f64 (and token). */
bool num_type_supported(ElemType t);
bool num_is_float(ElemType t); /* f16 bf16 f32 f64 */
/* x rounded to the nearest value of float type t (ties to even); other types: x. */
double num_round(ElemType t, double x);
/* x wrapped to integer type t's width (sign-extended for signed types, pred: x != 0). */
int64_t num_wrap(ElemType t, int64_t x);
/* Saturating float -> integer conversion (NaN -> 0, truncation toward zero). */
int64_t num_f2i(ElemType to, double x);
/* Integer (of type from; u64 as bit pattern) -> double. */
double num_i2f(ElemType from, int64_t x);

double num_get_f(ElemType t, const void *buf, int64_t i);
void num_set_f(ElemType t, void *buf, int64_t i, double x); /* rounds / saturates */
int64_t num_get_i(ElemType t, const void *buf, int64_t i);
void num_set_i(ElemType t, void *buf, int64_t i, int64_t x); /* wraps */
/* Chunk forms: elements [start, start+n). */
void num_load_f(ElemType t, const void *buf, int64_t start, int64_t n, double *out);
void num_store_f(ElemType t, void *buf, int64_t start, int64_t n, const double *in);
void num_load_i(ElemType t, const void *buf, int64_t start, int64_t n, int64_t *out);
void num_store_i(ElemType t, void *buf, int64_t start, int64_t n, const int64_t *in);

/* Elementwise kernels over n elements (out may alias an input).  False when
 * the opcode does not apply to the type.  unary: in type t, result type rt
 * (differs for is-finite); binary: both operands and result of type t. */
bool num_unary(HloOpcode op, ElemType t, const void *a, ElemType rt, void *r, int64_t n);
/* reduce-precision of n floating-point elements of type t from a to r (XLA's
 * semantics: the mantissa rounded to nearest even to mantissa_bits, values
 * outside the exponent range of exponent_bits to a signed infinity or zero,
 * NaN kept a NaN); false for a type that is not floating-point. */
bool num_reduce_precision(ElemType t, const void *a, void *r, int64_t n, int64_t exponent_bits,
                          int64_t mantissa_bits);
bool num_binary(HloOpcode op, ElemType t, const void *a, const void *b, void *r, int64_t n);
bool num_binary_ok(HloOpcode op, ElemType t);
/* One element of a binary op (num_binary_ok must hold): float types rounded
 * to t, integer types wrapped. */
double num_apply_f(HloOpcode op, ElemType t, double a, double b);
int64_t num_apply_i(HloOpcode op, ElemType t, int64_t a, int64_t b);
/* r[i] = a[i] dir b[i] (pred); total: TOTALORDER comparison of floats. */
void num_compare(CompareDir dir, bool total, ElemType t, const void *a, const void *b, uint8_t *r, int64_t n);
/* XLA convert semantics (float->int saturating, NaN -> 0; int->int wraps). */
void num_convert(ElemType from, const void *a, ElemType to, void *r, int64_t n);

/* 128-bit integers for index arithmetic on attribute values (pads, window
 * strides and dilations, start indices) that may lie near the int64 limits:
 * a result that lands inside a shape fits int64 again. */
__extension__ typedef __int128 SimWide;

/* Row-major element strides of dims[0..rank). */
void num_strides(const int64_t *dims, int32_t rank, int64_t *strides);
/* For every index i of the box dims[0..rank):
 *   dst[dst_off + sum_d i_d*dst_stride[d]] = src[src_off + sum_d i_d*src_stride[d]]
 * (strides in elements, may be 0 or negative; es = bytes per element). */
void num_copy_box(void *dst, int64_t dst_off, const int64_t *dst_stride, const void *src, int64_t src_off,
                  const int64_t *src_stride, const int64_t *dims, int32_t rank, int es);
/* dst[0..n) = *elem (es bytes each). */
void num_fill(void *dst, int64_t n, const void *elem, int es);

/* ---------------------------------------------------------------- interp.c */

typedef struct InterpCompInfo {
    bool ready;
    bool has_collective;   /* the computation or one it calls holds a collective */
    HloOpcode binop;       /* root = binop(param0, param1) on scalars, else HLO_OPCODE_COUNT */
    int32_t *last_use;     /* per instruction: index of its last user; n_insts for the root */
} InterpCompInfo;

/* Shared by every device's interpreter: per-computation facts (lazy). */
typedef struct InterpShared {
    const HloModule *m;
    DiagEngine *diag;
    InterpCompInfo *comps; /* m->n_comps (heap) */
    int64_t n_partitions, n_replicas;
    double work;           /* elements produced + multiply-adds, all devices so far */
    double work_limit;     /* the budget for work (SIM_WORK_LIMIT unless a SimOptions says) */
    bool refused;          /* stopped because the simulator cannot run the module (an op or
                              element type it does not support, the work budget), not
                              because the program is wrong */
} InterpShared;

/* The simulator stops with an error past this much work (elements produced
 * plus dot multiply-adds, over all devices): a loop with many trips would
 * otherwise run for minutes in silence.  About a minute of interpretation. */
#define SIM_WORK_LIMIT 1e10
/* Trips a while loop may take, on the reference interpreter and on the
 * devices in lockstep alike, before the simulation stops with an error at
 * the loop (a loop of a few scalar instructions reaches it in seconds, long
 * before the work budget). */
#define SIM_MAX_WHILE_TRIPS 10000000
/* Element operations one interpreted instruction of a called scalar
 * computation (comparator, reducer without a fast path) is counted as. */
#define SIM_CALL_INST_COST 64.0
/* Element operations an element a gather reads or a scatter writes is
 * counted as: its index arithmetic, measured ~40-60 ns an element. */
#define SIM_INDEXED_ELEM_COST 32.0
/* Element operations an interpreted instruction is charged at least while
 * running: a loop body of scalar instructions costs ~180 ns an instruction
 * (tuples, get-tuple-element, the condition's compare; release build), so
 * counting its one element would let nested loops run for hours under the
 * budget. */
#define SIM_INST_MIN_COST 128.0

typedef struct Interp {
    InterpShared *sh;
    int64_t partition_id, replica_id;
    int32_t depth;         /* nested calls (guard) */
    const HloInst *outer;  /* the instruction of the outermost call being evaluated (messages), or NULL */
} Interp;

void interp_shared_init(InterpShared *sh, const HloModule *m, DiagEngine *diag, int64_t n_partitions,
                        int64_t n_replicas);
void interp_shared_free(InterpShared *sh);
const InterpCompInfo *interp_comp_info(InterpShared *sh, int32_t c);

/* Reports "NAME: message" at the instruction's span; returns false. */
bool interp_error(const Interp *ip, const HloInst *inst, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Evaluates instruction i of computation c: operands are env[...] (values of
 * earlier instructions), params the computation's arguments.  Collectives
 * are executed only when the simulator has one device. */
bool interp_eval(Interp *ip, int32_t c, int32_t i, const SimValue *env, const SimValue *params, int32_t n_params,
                 SimValue *out);
/* Runs computation c on args (not consumed); *out = root value. */
bool interp_call(Interp *ip, int32_t c, const SimValue *args, int32_t n_args, SimValue *out);
/* Checks that v has shape s (arrays: type and dims; tuples leafwise). */
bool interp_shape_matches(const SimValue *v, const Shape *s);
/* An array value of shape s without layout, zero-filled. */
SimValue interp_new_like(const Shape *s);
/* Shared by interp_ops.c: scalar value of type t holding element k of v. */
SimValue interp_scalar_from(const SimValue *v, int64_t k);

/* ---------------------------------------------------------------- interp_ops.c */

bool interp_dot(Interp *ip, const HloInst *inst, const SimValue *lhs, const SimValue *rhs, SimValue *out);
bool interp_ragged_dot(Interp *ip, const HloInst *inst, const SimValue *ops, SimValue *out);
bool interp_convolution(Interp *ip, const HloInst *inst, const SimValue *lhs, const SimValue *rhs, SimValue *out);
bool interp_reduce(Interp *ip, const HloInst *inst, const SimValue *ops, SimValue *out);
bool interp_reduce_window(Interp *ip, const HloInst *inst, const SimValue *ops, SimValue *out);
bool interp_select_and_scatter(Interp *ip, const HloInst *inst, const SimValue *ops, SimValue *out);
bool interp_gather(Interp *ip, const HloInst *inst, const SimValue *ops, SimValue *out);
bool interp_scatter(Interp *ip, const HloInst *inst, const SimValue *ops, SimValue *out);
bool interp_sort(Interp *ip, const HloInst *inst, const SimValue *ops, SimValue *out);
/* rng: one stream per instruction and device (partition and replica id),
 * uniform in [a, b) or normal (mean a, deviation b).  rng-bit-generator: a
 * function of the state and the result's shape only. */
bool interp_rng(Interp *ip, const HloInst *inst, const SimValue *ops, SimValue *out);
bool interp_rng_bit_generator(Interp *ip, const HloInst *inst, const SimValue *ops, SimValue *out);
/* topk(x), k=K and the TopK custom-call (by its comparator). */
bool interp_topk(Interp *ip, const HloInst *inst, const SimValue *ops, SimValue *out);
bool interp_map(Interp *ip, const HloInst *inst, const SimValue *ops, SimValue *out);
/* Combines n arrays elementwise with reducer computation comp, in order:
 * out = f(...f(f(v[0], v[1]), v[2])..., v[n-1]) (fast path for a binop
 * reducer).  Used by all-reduce and reduce-scatter. */
bool interp_combine(Interp *ip, const HloInst *inst, int32_t comp, const SimValue *const *vals, int32_t n,
                    SimValue *out);

/* ---------------------------------------------------------------- sim.c */

/* Whether instruction inst needs every device's operands at once: a
 * collective, or a border of a manual region (SPMDFullToShardShape /
 * SPMDShardToFullShape). */
bool sim_is_lockstep(const HloInst *inst);

/* Executes collective instruction i of computation c for the devices
 * listed in devs[0..n) (all of them: the simulator runs every device):
 * ops[k] holds device devs[k]'s operand values (inst->n_operands each),
 * outs[k] receives its result.  ips[k] is that device's interpreter. */
bool sim_collective(Interp *ips, int32_t c, int32_t i, const SimValue *const *ops, SimValue *outs, int64_t n);

#endif
