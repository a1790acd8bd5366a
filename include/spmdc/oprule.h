/* oprule.h - one sharding rule per opcode: the factor model (docs/op-rules.md),
 * read by propagation and by the partitioner alike.
 *
 * An op is described by the index space it iterates over.  Each independent
 * index is a FACTOR with a size and a kind; every dimension of every tensor
 * of the op (its array operands, then its array result leaves) is a list of
 * factors, major to minor (one factor for most dims; several where a reshape
 * splits or merges dims, or a grouped convolution's feature dim is
 * group x channel).  An einsum string is the whole idea: `dot` with batch b,
 * lhs free m, rhs free n, contraction k is `bmk, bkn -> bmn`.
 *
 * A sharding of the op is a FactorSharding: for each factor the run of mesh
 * atoms that splits it.  From it follow, with no per-op code:
 *  - each tensor's Tiling (oprule_factors_to_tiling: the runs of a dim's
 *    factors, concatenated major to minor);
 *  - what each operand must be resharded to before the local op can run;
 *  - the result's pending reduction: the atoms of REDUCTION factors, which
 *    appear in operands only (the reduction comes from the factor: add for
 *    dot, the reducer for reduce);
 *  - the local op: the same op on local shapes (oprule_localize_attrs fixes
 *    the attributes that name sizes).
 * And back: a tensor's Tiling projects onto factors
 * (oprule_tiling_to_factors): a dim's atoms go to its major factor first,
 * and a factor takes atoms while its size allows, so splits and merges of
 * split dims are exact; what does not fit is reported, never guessed.
 *
 * Factor kinds (FactorKind): pass-through, reduction, need-replication,
 * permutation (data moves between positions: concatenate, reverse, pad,
 * slice with a start, dynamic slicing), window (convolution / reduce-window
 * dims with a real window: a split needs a halo from the neighbours).
 *
 * Ops that are not factor ops are classed by oprule_class: leaves (no
 * operands), leaf identities (tuple, get-tuple-element, opt-barrier, the
 * Sharding custom-call: every array leaf is the same value as an operand
 * leaf), data-flow ops (while, conditional, call: their values are tied to
 * the called computations' parameters and roots), manual-region borders, and
 * opaque ops (no rule: their results are replicated).
 *
 * The opcode algebra lives here too (OpAlgebra, reduce_identity): which
 * reduction a reducer computation performs, and exactly when a pending
 * partial value passes through an op.
 */
#ifndef SPMDC_OPRULE_H
#define SPMDC_OPRULE_H

#include <stdbool.h>
#include <stdint.h>

#include "spmdc/arena.h"
#include "spmdc/hlo.h"
#include "spmdc/mesh.h"
#include "spmdc/tiling.h"

/* Factors of one op, at most (dot: 3 * rank; reshape: rank in + rank out;
 * convolution: rank + 4). */
#define OPRULE_MAX_FACTORS 64

typedef enum FactorKind {
    FACTOR_PASS,             /* indexes operands and results alike: split freely */
    FACTOR_REDUCTION,        /* operands only: split -> the result is partial over its atoms */
    FACTOR_NEED_REPLICATION, /* must be whole on every device for the local op to be right */
    FACTOR_PERMUTATION,      /* result element i reads operand elements elsewhere (concatenate's dim,
                                reverse, pad, slice with a start, dynamic slicing): a split needs data
                                from other shards */
    FACTOR_WINDOW,           /* a windowed dim (convolution / reduce-window / select-and-scatter):
                                a split needs a halo from the neighbouring shards */
} FactorKind;

const char *factor_kind_name(FactorKind k); /* "pass-through", "reduction", ... */

typedef struct Factor {
    int64_t size;     /* extent; PASS and REDUCTION factors have it in every tensor they index,
                         PERMUTATION and WINDOW factors may have another extent per tensor
                         (the tensor dim's size) */
    uint8_t kind;     /* FactorKind */
    uint8_t reduce;   /* REDUCTION: ReduceKind that combines partial results; REDUCE_NONE when
                         the op's reduction is not one an all-reduce can do (a handler must) */
} Factor;

/* One tensor of the rule: an array operand or an array leaf of the result. */
typedef struct RuleTensor {
    int32_t slot;     /* operands: operand index; results: -1 */
    int32_t leaf;     /* results: leaf index of the result; operands: 0 */
    int32_t rank;
    int32_t dims;     /* index of its dim 0 in OpRule.dim_start */
    const int64_t *shape; /* the tensor's dim sizes (the instruction's shape arrays) */
} RuleTensor;

typedef struct OpRule {
    int32_t n_factors;
    Factor factors[OPRULE_MAX_FACTORS];
    int32_t n_in, n_out;    /* tensors: t[0..n_in) operands, t[n_in..n_in+n_out) results */
    RuleTensor *t;
    /* Factors of tensor k's dim d: factor_of[dim_start[x] .. dim_start[x+1]),
     * x = t[k].dims + d, major -> minor. */
    int32_t *dim_start;
    int8_t *factor_of;
    /* Operand tensors (bit k) that parametrize the op rather than flow into
     * its result (ragged-dot's group sizes): where a split reduction factor
     * does not index one it stays a whole value on every device, never
     * masked into the partial sum. */
    uint32_t param_tensors;
} OpRule;

/* What kind of rule an opcode has. */
typedef enum OpRuleClass {
    RULE_FACTORS,      /* a factor rule (oprule_build) */
    RULE_LEAF,         /* no operands: parameter, constant, iota's values come from users (iota also
                          has a factor rule for its result), partition-id, replica-id */
    RULE_IDENTITY,     /* result leaves are operand leaves: tuple, get-tuple-element, opt-barrier,
                          custom-call Sharding */
    RULE_DATAFLOW,     /* while, conditional, call: tied to the called computations */
    RULE_MANUAL_BORDER,/* custom-call SPMDFullToShardShape / SPMDShardToFullShape */
    RULE_OPAQUE,       /* no rule: the result is replicated, operands are taken whole */
} OpRuleClass;

/* The class of instruction i of computation c (custom-calls by target). */
OpRuleClass oprule_class(const HloModule *m, int32_t c, int32_t i);

/* Whether oprule_class is the same for every instruction of opcode op (false
 * for custom-calls, classed by target, and bitcasts, classed by shapes), so
 * a caller may class such instructions once per opcode. */
bool oprule_class_by_opcode(HloOpcode op);
/* When sharding propagation uses an op's rule (Shardy's op-priority
 * schedule, three phases, each run to a fixed point before the next):
 * phase 0 pass-through ops only, phase 1 also the pass-through factors of
 * every op (broadcast backward only), phase 2 every factor of every op. */
typedef enum PropTier {
    TIER_PASS_OP,    /* elementwise, reshape, bitcast, transpose, and every op that is no factor op
                        (identities, data-flow ties): every factor both ways from phase 0 */
    TIER_FORWARD_OP, /* dynamic-slice, dynamic-update-slice: operands to results from phase 0 */
    TIER_BROADCAST,  /* broadcast: pass-through factors result to operand in phase 1, all in phase 2 */
    TIER_NORMAL,     /* every other factor op: pass-through factors in phase 1, all in phase 2 */
} PropTier;

/* The propagation tier of an opcode (custom-calls: TIER_NORMAL for the
 * factor ones). */
PropTier oprule_tier(HloOpcode op);
/* Whether, in propagation phase `phase` (0..2) of an op of tier `tier`,
 * tensor k of rule r may give its sharding of factor f to the op's other
 * tensors (*gives) and take theirs (*takes).  Need-replication factors never
 * flow; reduction factors flow among the operands that index them (results
 * do not); pass-through, permutation and window factors among all tensors
 * that index them. */
void oprule_factor_flow(const OpRule *r, int32_t k, int32_t f, PropTier tier, int32_t phase, bool *gives,
                        bool *takes);
/* The same flows for every factor at once, as masks (bit f = factor f):
 * side 0 for the operands, 1 for the results (flows depend on the side
 * only).  gives and takes hold 2 entries each. */
void oprule_flow_masks(const OpRule *r, PropTier tier, int32_t phase, uint64_t gives[2], uint64_t takes[2]);

/* Name of the rule of an opcode ("elementwise", "dot", "reshape", ...), or
 * NULL when hlo_opcodes.def has an opcode the registry does not know (a unit
 * test walks the table with it). */
const char *oprule_name(HloOpcode op);

/* Builds the factor rule of instruction i of computation c into *r (arrays
 * from arena).  False when the op has no factor rule (oprule_class is not
 * RULE_FACTORS) or its operands and attributes do not fit (the IR verifier
 * rejects those before any pass runs).  Linear in the op's rank and
 * operand count. */
bool oprule_build(const HloModule *m, int32_t c, int32_t i, Arena *arena, OpRule *r);

/* True when instruction i's rule is the identity map: an elementwise op
 * (b_elementwise: unary, binary, select, clamp, compare, convert, map, ...)
 * whose array operands have the result's dims or are scalars, so every dim d
 * of every non-scalar tensor is pass-through factor d alone.  Propagation
 * then merges the tensors' tilings dim by dim without building the rule.
 * Constant time. */
bool oprule_identity_map(const HloModule *m, int32_t c, int32_t i);
/* Whether the opcode's rule is the elementwise one (the first condition of
 * oprule_identity_map; callers that know the shapes check the rest). */
bool oprule_is_elementwise(HloOpcode op);

/* Tensor k of the rule for operand slot `slot` (-1 if that operand is no
 * array), or for result leaf `leaf`. */
int32_t oprule_operand_tensor(const OpRule *r, int32_t slot);
int32_t oprule_result_tensor(const OpRule *r, int32_t leaf);
/* Number of factors of tensor k's dim d and the i-th of them. */
static inline int32_t oprule_dim_n(const OpRule *r, int32_t k, int32_t d)
{
    int32_t x = r->t[k].dims + d;
    return r->dim_start[x + 1] - r->dim_start[x];
}
static inline int32_t oprule_dim_factor(const OpRule *r, int32_t k, int32_t d, int32_t i)
{
    return r->factor_of[r->dim_start[r->t[k].dims + d] + i];
}
/* Mask of the tensors (bit k) that factor f indexes (rules have at most 32
 * tensors that index factors; later tensors are all scalars). */
uint32_t oprule_factor_tensors(const OpRule *r, int32_t f);

/* ---------------------------------------------------------------- factor shardings */

/* For each factor of a rule, the run of atoms (major -> minor) that splits
 * it; the same flat layout as Tiling (factor 0's run first). */
typedef struct FactorSharding {
    int32_t n_factors;
    uint8_t n[OPRULE_MAX_FACTORS];
    int8_t atoms[SPMDC_MAX_ATOMS];
} FactorSharding;

void fsh_init(FactorSharding *fs, int32_t n_factors);
/* Factor f's run (count fs->n[f]): the runs of factors 0..f-1 come first. */
static inline const int8_t *fsh_factor(const FactorSharding *fs, int32_t f)
{
    int32_t k = 0;
    for (int32_t i = 0; i < f; i++)
        k += fs->n[i];
    return fs->atoms + k;
}
void fsh_set(FactorSharding *fs, int32_t f, const int8_t *atoms, int32_t n);
uint32_t fsh_used(const FactorSharding *fs);
bool fsh_equal(const FactorSharding *a, const FactorSharding *b);
/* Product of the sizes of factor f's atoms. */
int64_t fsh_tiles(const FactorSharding *fs, const Mesh *m, int32_t f);

/* Projects tensor k's tiling onto the factors: each dim's run goes to its
 * factors major first; a factor takes the next atom while the atom's size
 * divides what is left of the factor (a single-factor dim takes every atom:
 * a dim that does not divide is padded, tiling.h); an atom goes to the next
 * factor only once the factor before it is split down to size 1 (else the
 * shards would not be contiguous).  Atoms that do not fit are dropped and
 * their dims set in *unfit (may be NULL).  out gets n_factors and the runs of
 * the factors tensor k indexes; other factors are left empty.  The tiling's
 * pending reduction is ignored. */
void oprule_tiling_to_factors(const OpRule *r, int32_t k, const Tiling *t, const Mesh *m, FactorSharding *out,
                              uint32_t *unfit);
/* The tiling factor sharding fs gives tensor k: per dim the runs of its
 * factors, major to minor.  False (and *bad, if not NULL, gets the dims)
 * where that is not a tiling of the dim: a factor of a multi-factor dim
 * whose atoms do not divide it, or a split factor minor to one whose shards
 * hold more than one element (non-contiguous shards).  No partial atoms are
 * set: the caller adds the pending reduction (oprule_result_partial). */
bool oprule_factors_to_tiling(const OpRule *r, int32_t k, const FactorSharding *fs, const Mesh *m, Tiling *out,
                              uint32_t *bad);
/* The atoms of fs on REDUCTION factors, and their reduction in *kind
 * (REDUCE_NONE if none, or if two factors reduce differently: *mixed true). */
uint32_t oprule_result_partial(const OpRule *r, const FactorSharding *fs, ReduceKind *kind, bool *mixed);

/* Local attributes of instruction i (whose rule is r) run on shards: the
 * attributes that name sizes of split dims become local sizes (slice limits
 * of untouched dims, dynamic_slice_sizes, gather slice_sizes, group counts
 * of a split group factor).  fs is the factor sharding the op runs with.
 * a is the output instruction's (copied) attributes. */
void oprule_localize_attrs(const OpRule *r, const HloModule *m, int32_t c, int32_t i, const FactorSharding *fs,
                           const Mesh *mesh, HloAttrs *a);

/* ---------------------------------------------------------------- algebra */

/* How a pending reduction passes through an op. */
typedef enum PartialRule {
    PARTIAL_CLOSES,    /* not linear: the pending reduction must be closed first */
    PARTIAL_ALL,       /* every array operand partial over the same atoms, same kind: add,
                          subtract (sum); maximum (max), minimum (min), multiply (prod), and, or;
                          select (operands 1 and 2, the predicate not partial) */
    PARTIAL_ONE,       /* exactly one operand partial, the others not: multiply (sum); divide's
                          numerator (sum, floats only) */
    PARTIAL_UNARY,     /* the only operand: negate (sum) */
    PARTIAL_CONTRACT,  /* dot / convolution (sum): each operand may carry its own pending sum over
                          atoms the op does not split, if the result has the operand's element type */
    PARTIAL_REDUCE,    /* reduce / reduce-window whose reducer is the pending reduction's kind, its
                          init value the identity */
    PARTIAL_MOVE,      /* data movement (copy, reshape, transpose, broadcast, slice, reverse,
                          gather and dynamic-slice of the data operand, concatenate and
                          dynamic-update-slice of operands partial alike, pad with the reduction's
                          identity, same-type convert): any kind passes */
} PartialRule;

typedef struct OpAlgebra {
    uint8_t as_reducer;  /* ReduceKind a reducer computation with this root op performs */
    bool commutative;
    bool associative;
    uint8_t partial;     /* PartialRule */
} OpAlgebra;

const OpAlgebra *op_algebra(HloOpcode op);
/* Whether a dot or convolution with operands of types lhs and rhs and a
 * result of type res may split its contraction into a pending sum of the
 * pieces' results: XLA accumulates in a wide type and converts once, so a
 * result that truncates (a float contraction into an integer type) or tests
 * for nonzero (pred from anything but pred) cannot be summed after it. */
bool contraction_sums_in_result(ElemType res, ElemType lhs, ElemType rhs);
/* Whether a pending reduction of kind k passes through instruction i of
 * computation c when exactly the operands in `carriers` (bit k: operand k)
 * are partial over the same atoms and the others are the same on every
 * device of the reduction group.  Checks element types (a widening dot, a
 * convert, an integer divide close the sum) and pad values. */
bool op_partial_passes(const HloModule *m, int32_t c, int32_t i, ReduceKind k, uint32_t carriers);
/* The reduction a reducer computation performs: its root is add, maximum,
 * minimum, multiply, and, or of its two parameters (or, for pred, of the
 * same); REDUCE_NONE otherwise (variadic reducers such as argmax pairs). */
ReduceKind reducer_kind(const HloModule *m, int32_t comp);
/* Whether the reducer computation of an n-input reduce picks, for every
 * output j, one of its two arguments j and n+j (a parameter, or selects
 * between them: argmax / argmin pairs).  Such a reducer returns its argument
 * when combined with itself, so a partitioned reduce may apply the init
 * value once per shard (its associativity is the reduce's own contract). */
bool reducer_is_selection(const HloModule *m, int32_t comp, int32_t n);
/* The pair a two-input reducer selects, judged by evaluating it on probe
 * pairs (value, index): REDUCE_MAX for argmax (the larger value; among equal
 * values the smaller index; a float NaN above every number), REDUCE_MIN for
 * argmin, REDUCE_NONE for anything else, or for a reducer with ops other
 * than compare, select, and, or, not, scalar constants, its parameters and
 * the root tuple.  Such a reduce may be finished by two all-reduces: the
 * extreme value, then the smallest index holding it. */
ReduceKind reducer_arg_kind(const HloModule *m, int32_t comp);
/* The identity of reduction k in element type t as a double (sum: -0.0 for
 * floating-point and complex types, whose +0.0 turns a -0.0 it is added to
 * into +0.0, else 0; or: 0, prod/and: 1, max: -inf or the type's lowest
 * value, min: +inf or its largest); false for REDUCE_NONE. */
bool reduce_identity(ReduceKind k, ElemType t, double *out);
/* Whether instruction i of computation c is a constant equal to the
 * identity of k (max/min accept any value as identity-compatible: they are
 * idempotent). */
bool is_reduce_identity(const HloModule *m, int32_t c, int32_t i, ReduceKind k);

#endif
