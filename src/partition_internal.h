/* partition_internal.h - shared between partition.c (driver, value table,
 * emission helpers), partition_ops.c (per-opcode handlers) and reshard.c
 * (the sharding states, the reshard planner and its lowering).
 *
 * Vocabulary:
 *  - Tiling: the state of one array value during partitioning: per dim the run
 *    of mesh atoms splitting it (major -> minor) plus a pending reduction
 *    (`partial` atoms, `kind`).  Compact (flat atoms, dim 0's run first) so
 *    a million values stay cheap; reshard.c widens it while planning.
 *  - VState: one local instruction of the output that holds an input value
 *    in some Tiling (per array leaf).  Every input value keeps a list of them
 *    (the first is what its handler produced); reshards add more, so a
 *    second consumer that needs the same state reuses the first one's work.
 *  - ReshardPlan: the decided transition from one Tiling to another, a list
 *    of steps (local slice, all-reduce, reduce-scatter, all-to-all,
 *    all-gather) with the bytes each costs (comm_bytes_per_device).
 *    reshard_lower turns a plan into instructions.
 */
#ifndef SPMDC_PARTITION_INTERNAL_H
#define SPMDC_PARTITION_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "spmdc/halo.h"
#include "spmdc/hlo.h"
#include "spmdc/intern.h"
#include "spmdc/names.h"
#include "spmdc/oprule.h"
#include "spmdc/partition.h"
#include "spmdc/report.h"
#include "spmdc/reshard.h"

/* How deep while / conditional / call may nest (each level is a few C
 * stack frames of the partitioner). */
#define PART_MAX_NESTING 200

/* Cost of something impossible (kept far from overflow when summed). */
#define PART_INF_COST RESHARD_INF_COST

/* ---------------------------------------------------------------- partitioner state */

typedef struct VState {
    struct VState *next;
    const Tiling *leaves;         /* one per array leaf (scratch) */
    const char *origin_reason;  /* why it is partial, traced to the annotations ("y: contracting dim 1
                                   of lhs h sharded on 'model' (from the annotation on a, line 34) and
                                   ..."; scratch), or NULL (also when there is no report) */
    int32_t local;              /* instruction of the output computation */
    int32_t origin;             /* input instruction that made it partial, or -1 */
} VState;

typedef struct PVal {
    int32_t n_leaves;
    uint32_t manual;            /* atoms along which the value is manual (partition_manual.c), 0: none */
    VState *states;             /* first: what the value's handler produced */
    const Tiling *decl;         /* [n_leaves] declared (propagated) states, computed on first use
                                   (part_decl_leaves; scratch) */
} PVal;

typedef struct OffsetEnt OffsetEnt;

/* Slots of PartModule.decl_recent. */
#define PART_DECL_RECENT 16

/* Text buffers kept for reuse (part_buf_take). */
#define PART_BUFS 4

/* Replica groups made for one atom run (part_groups). */
#define PART_GROUP_CACHE 16
typedef struct GroupsEnt {
    int32_t n;
    int8_t atoms[SPMDC_MAX_ATOMS];
    ReplicaGroups g;            /* ids in the output module's arena */
} GroupsEnt;
typedef struct TableEnt TableEnt;

/* The words of an atom run worded lately (part_put_atoms). */
#define PART_ATOM_NAMES 8
typedef struct AtomsName {
    int32_t n;
    int8_t atoms[SPMDC_MAX_ATOMS];
    uint32_t len;
    const char *text;           /* in scratch */
} AtomsName;

/* Whether a (canonical tiling, shape) pads nothing (pads_nothing). */
#define PART_EVEN_CACHE 16
typedef struct EvenEnt {
    const Tiling *t;            /* NULL: empty */
    int32_t rank;
    bool even;
    int64_t dims[SPMDC_MAX_RANK];
} EvenEnt;

/* What every computation's partitioning shares: the input and output
 * modules, the report, the reducers and channel ids of the collectives. */
typedef struct PartModule {
    const HloModule *in;
    HloModule *out;
    const Mesh *mesh;
    CommReport *rep;
    PassCtx *cx;
    Arena *scratch;             /* everything the partitioner keeps until it ends */
    void *rule_scratch;         /* partition_rule.c's candidate buffer (~40 KB), reused by every op of
                                   every computation: part_rule_choose never runs inside another, as
                                   callees are partitioned by the control handlers, outside it */
    Arena *tmp;                 /* per-instruction temporaries: released after each instruction's
                                   handler (arena_mark / arena_release), so nothing kept may point
                                   into it (the rule path's contexts and candidates) */
    int32_t *comp_map;          /* input computation -> its output copy, for computations ops apply
                                   (reducers, comparators, custom-call callees), -1 if none */
    NameSet comp_names;         /* output computation names (input names reserved) */
    struct PartNames *ahead;    /* the entry's input names gathered ahead (partition_names_start), or NULL */
    bool *name_used;            /* per input computation: its own name went to an output computation */
    int32_t reducers[REDUCE_OR + 1][ET_COUNT]; /* output computation, or -1 */
    int64_t next_channel;
    ReshardMemo *memo;          /* reshard_cost of the candidates, for the whole run (in scratch) */
    struct RuleMemo *rule_memo; /* part_by_rule's decisions by what they read (partition_rule.c; in
                                   scratch, made on first use) */
    /* shared input attribute sets -> their shared output copies (part_clone;
     * open addressing by address, in scratch) */
    const HloAttrs **attrs_key;
    HloAttrs **attrs_val;
    uint32_t attrs_cap, attrs_n;
    /* the tilings of the (leaf) shardings values are declared with, by
     * (sharding, rank): bind shares equal shardings, so a program has few
     * (part_sharding_tiling; open addressing, in scratch) */
    struct DeclEnt *decl_tab;
    uint32_t decl_cap, decl_n;
    struct {                    /* entries found lately, by (sharding address, rank): an instruction's
                                   check and its declared state look the same one up, and neighbours
                                   share theirs */
        const Sharding *sh;
        int32_t rank;
        const struct DeclEnt *e; /* NULL: none */
    } decl_recent[PART_DECL_RECENT];
    GroupsEnt groups[PART_GROUP_CACHE]; /* part_groups' runs so far */
    int32_t n_groups;
    StrBuf bufs[PART_BUFS];     /* emptied text buffers for the report's words (part_buf_take) */
    int32_t n_bufs;
    struct DescEnt *descs;      /* the texts of tilings and shardings described so far (part_put_tiling;
                                   direct-mapped, in scratch, made on first use) */
    /* one copy of every distinct array state (part_tiling_canon: the
     * copies in scratch, the set's arrays freed with the module's pass) */
    InternSet canon;
    EvenEnt even[PART_EVEN_CACHE]; /* pads_nothing's last answers */
    AtomsName atom_names[PART_ATOM_NAMES]; /* part_put_atoms' runs so far (the last slot is replaced) */
    int32_t n_atom_names;
} PartModule;

/* One computation being partitioned (the entry, or a loop body, condition,
 * branch or callee partitioned for its call site). */
typedef struct Part {
    PartModule *mod;
    /* the module's, for brevity */
    const HloModule *in;
    HloModule *out;
    const Mesh *mesh;
    CommReport *rep;
    PassCtx *cx;
    Arena *scratch;
    Arena *tmp;
    const struct Part *parent;  /* the computation whose instruction calls this one, or NULL (entry) */
    int32_t caller;             /* that instruction in parent, or -1 */
    int32_t ic;                 /* input computation */
    int32_t oc;                 /* output computation */
    PVal *vals;                 /* per input instruction of ic */
    NameSet names;              /* names used in the output computation (in scratch) */
    OffsetEnt *offsets;         /* offset tables by (atoms, chunk) (uthash) */
    TableEnt *tables;           /* per-device value tables by content (uthash) */
    int32_t pid;                /* partition-id instruction, or -1 */
    int32_t zero;               /* s32[] constant 0, or -1 */
    /* Parameter states set by the caller: param_leaves[k] are the leaves
     * of parameter number k (NULL or k >= n_params: its declared state). */
    const Tiling *const *param_leaves;
    int32_t n_params;
    uint32_t param_manual;      /* the parameters are manual along these atoms (a callee inside a manual
                                   region) */
    int64_t param_global, param_local; /* the entry: its parameters' bytes, whole and per device
                                   (part_param_memory) */
    bool manual_sources;        /* some parameter's sharding is manual, or some instruction is a
                                   custom-call: values may be manual (check_computation) */
    const Tiling *root_want;    /* the leaves the root is brought to (set once the body is walked) */
    /* How often one run of the program runs this computation: the product of
     * the known trip counts of the loops around it; per_trip: some loop
     * around it has an unknown trip count (bytes are then counted per trip
     * of that loop). */
    int64_t trips;
    bool per_trip;
    /* Dims of its (array) operands that the op being partitioned cannot keep
     * split, declared by its handler before it asks for them (0: none;
     * PART_LIMIT_ALL: default action).  A full gather of a split value that
     * such a dim forces is an involuntary rematerialization (part_get warns). */
    uint32_t limit_dims;
    void *halo_buf[4];          /* partition_window.c's per-device arrays for costing candidates */
    struct HaloMemo *halos;     /* exchanges already emitted, reused by a second identical one (uthash) */
    int32_t identity[REDUCE_OR + 1][ET_COUNT]; /* scalar identity constants + 1 (0: none yet) */
    struct ParamEnt *param_cache; /* h_parameter's shapes and bytes by (state, shape) (partition_ops.c; in
                                   scratch, made on first use) */
    uint8_t *const_id;          /* per instruction of ic: a constant's identity bits for part_by_rule's key
                                   (0x80 | bits once known; in scratch, made on first use) */
    uint8_t *no_pad;            /* per instruction of ic: 1 if its declared state is known to pad nothing
                                   (found while its sharding is checked; the padding warning is skipped) */
    HloUsers users;             /* users of ic's instructions (partition_shape.c), once have_users */
    uint8_t *repl_memo;         /* per instruction of ic: 1 + whether its sharding is replicated (0: not
                                   known yet; a tuple's check reads every element); in scratch, made on
                                   first use (put_which) */
    LeafMemo gte_leaves;        /* leaf offsets of the last tuple a get-tuple-element read (in scratch) */
    int32_t *copy_end;          /* per instruction of ic: for a foldable copy, 1 + the first user down its
                                   chain of foldable copies that is not one (0: not known yet); in
                                   scratch, made on first use (part_deferred) */
    bool have_users;
    VState *vs_free;            /* zeroed VStates allocated ahead (add_state) */
    int32_t vs_left;            /* ... how many */
} Part;

#define PART_LIMIT_ALL UINT32_MAX

/* Why a reshard happens, for the report. */
typedef struct Cause {
    int32_t inst;               /* input instruction that needs the new state (-1: none) */
    const char *reason;         /* words, or NULL to describe the transition */
    /* 1 + k when the value becomes element k of inst's tuple result (it
     * is operand k of a tuple): the reason then words that element's
     * sharding, not the whole tuple's, so N resharded operands of one
     * tuple cost O(N) words in all.  0: the value serves inst whole. */
    int32_t elem;
} Cause;

/* The one copy (in scratch) of every tiling equal to t in what tiling_equal
 * compares and in perm: the states (VState.leaves) and the declared state
 * (PVal.decl) of a value with one leaf are these copies, so equal states
 * are equal pointers (part_by_rule's memo keys on them). */
const Tiling *part_tiling_canon(PartModule *pm, const Tiling *t);

/* ---- partition.c: emission helpers */

/* Appends an instruction to the output computation; returns its index. */
int32_t part_emit(Part *p, HloOpcode op, const char *name, const Shape *shape, const int32_t *ops, int32_t n);
static inline HloInst *part_out(Part *p, int32_t local) { return hlo_inst(p->out, p->oc, local); }
static inline const HloInst *part_in(const Part *p, int32_t i) { return hlo_inst(p->in, p->ic, i); }
/* A fresh name "base.role" (".1", ".2", ... appended if taken); never an
 * input name.  Arena string. */
const char *part_name(Part *p, const char *base, const char *role);
/* s32[] holding, on each device, (mixed-radix index of its coordinates on
 * atoms[0..n)) * chunk: partition-id -> constant table -> dynamic-slice ->
 * reshape, one per distinct (atoms, chunk). */
int32_t part_offset(Part *p, const int8_t *atoms, int32_t n, int64_t chunk, const char *base);
int32_t part_zero(Part *p);     /* the shared s32[] 0 */
/* s32[] holding v[d] on device d (v has one entry per device; values fit in
 * s32): a constant when every device agrees, else partition-id -> constant
 * table -> dynamic-slice -> reshape, one per distinct table. */
int32_t part_device_value(Part *p, const int64_t *v, const char *base);
/* pred[] that is true on the devices whose coordinates on atoms[0..n) are
 * all 0 (the first device of each group along those atoms); one per
 * distinct atom list. */
int32_t part_first_in_group(Part *p, const int8_t *atoms, int32_t n, const char *base);
/* An array of shape s (type and dims) filled with the identity of reduction
 * k (reduce_identity): a constant broadcast. */
int32_t part_identity(Part *p, ReduceKind k, const Shape *s, const char *base);
/* The scalar literal of reduction k's identity in element type t
 * (reduce_identity; integers exact, complex sums (-0.0, -0.0)), in the
 * output module's arena: what part_identity and the zeros of a transfer
 * hold. */
Literal *part_identity_literal(Part *p, ReduceKind k, ElemType t);
/* The reducer computation (`add.bf16`, `maximum.f32`, ...). */
int32_t part_reducer(Part *p, ReduceKind kind, ElemType t);
/* Replica groups of a collective along atoms[0..n) (mesh_groups order). */
ReplicaGroups part_groups(Part *p, const int8_t *atoms, int32_t n);
/* Fills the report row of collective `local` (its operand is operand 0) and
 * returns it (valid until the next row), or NULL without a report. */
CommRecord *part_record(Part *p, CollectiveKind kind, int32_t local, const int8_t *atoms, int32_t n, int64_t bytes,
                 int32_t cause_inst, const char *reason);
/* The text of a Tiling / the axes of an atom run / of an atom mask, in scratch. */
const char *part_spec_text(Part *p, const Tiling *s);
const char *part_axes_text(Part *p, const int8_t *atoms, int32_t n);
const char *part_axes_mask_text(Part *p, uint32_t mask);
/* Appends mesh_atoms_name(atoms[0..n)), each run worded once. */
void part_put_atoms(Part *p, StrBuf *b, const int8_t *atoms, int32_t n);
/* printf into scratch. */
const char *part_fmt(Part *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* An empty text buffer, one a part_buf_give kept if any (the report's words
 * are built for every collective and every partial value: reusing buffers
 * saves their reallocations); the caller gives it back or frees it. */
StrBuf part_buf_take(Part *p);
/* Keeps b (emptied) for the next part_buf_take, or frees it. */
void part_buf_give(Part *p, StrBuf *b);
/* Appends tiling_describe(t) / sharding_describe(sh) (sh: a sharding of the
 * input module, which stays as it is while partitioning), each distinct one
 * worded once. */
void part_put_tiling(Part *p, StrBuf *b, const Tiling *t);
void part_put_sharding(Part *p, StrBuf *b, const Sharding *sh);

/* ---- partition.c: provenance (for the report's reasons) */

/* The annotated input instruction the declared sharding of
 * instruction i came from (d >= 0: the one that split its dim d), as an
 * origin code (HloInst.sharding_origin, checked): i itself if annotated,
 * another index of this computation, a code <= -2 for an annotation in
 * another computation (a loop's carried value split outside the loop),
 * -1 if none. */
int32_t part_origin(const Part *p, int32_t i, int32_t d);
/* part_split_origin: v's declared sharding does not split the dim that way. */
#define PART_NOT_OWN (INT32_MIN + 1)
/* Where the split of dim d of array value v in state s came from: the
 * origin of that dim of v's declared sharding when it splits d the same way
 * (same major atom), -1 if it has none recorded, PART_NOT_OWN if it does
 * not split d so. */
int32_t part_split_origin(const Part *p, int32_t v, const Tiling *s, int32_t d);
/* Appends origin o of value v in words: "annotated, line 32" (o == v),
 * "from the annotation on a, line 31" (a in this computation or
 * another), "not by its own sharding"
 * (PART_NOT_OWN); nothing for -1. */
void part_put_origin(Part *p, StrBuf *b, int32_t v, int32_t o);
/* Appends i's declared sharding and where it came from: "y is annotated
 * replicated (line 37)", "h is [{}, {model}] (from the annotation on a,
 * line 31)", "z is replicated by default (no annotation splits it)". */
void part_put_story(Part *p, StrBuf *b, int32_t i);

/* ---- partition.c: values */

/* Declared (propagated) state of leaf `leaf` of input instruction i. */
void part_decl(const Part *p, int32_t i, int32_t leaf, Tiling *out);
/* All leaves of the declared state (scratch array of p->vals[i].n_leaves):
 * made on first use (an array's is found while its sharding is checked). */
const Tiling *part_decl_leaves_make(const Part *p, int32_t i);
static inline const Tiling *part_decl_leaves(const Part *p, int32_t i)
{
    const Tiling *d = p->vals[i].decl;
    return d ? d : part_decl_leaves_make(p, i);
}
/* The declared leaves of any input instruction (another computation's too),
 * in scratch. */
Tiling *part_inst_decl(Part *p, const HloInst *in);
/* The state the handler of i produced (first VState). */
const VState *part_primary(const Part *p, int32_t i);
/* reshard_cost through the run's memo. */
static inline int64_t part_reshard_cost(Part *p, const Shape *global, const Tiling *from, const Tiling *to)
{
    return reshard_cost_memo(p->mod->memo, p->mesh, global, from, to);
}
/* Per-device bytes to bring array value v into state want (cheapest of its
 * states), PART_INF_COST if impossible. */
int64_t part_cost(Part *p, int32_t v, const Tiling *want);
/* The local instruction that already holds value v in state want (leaves),
 * what part_get returns without a reshard; -1 if none does. */
int32_t part_held(Part *p, int32_t v, const Tiling *want);
/* The same for an array value (one leaf) and a canonical want
 * (part_tiling_canon): its states are canonical too, so equal is the same
 * address. */
int32_t part_held_canon(const Part *p, int32_t v, const Tiling *want);
/* Local instruction holding value v in state want (leaves), resharding if
 * needed.  cause: the consumer.  -1 after reporting an error. */
int32_t part_get(Part *p, int32_t v, const Tiling *want, const Cause *cause);
/* Local instruction holding operand k of instruction i in state want. */
int32_t part_operand(Part *p, int32_t i, int32_t k, const Tiling *want);
/* Name for input instruction i's handler result: its own name when the
 * state is the declared one (and not taken yet), else a derived name. */
const char *part_result_name(Part *p, int32_t i, const Tiling *leaves, const char *role);
/* Records the handler's result. leaves are copied. */
void part_set_result(Part *p, int32_t i, int32_t local, const Tiling *leaves, int32_t origin, const char *why);
/* Per-device shape of a value of global shape `global` in state leaves. */
Shape part_local_shape(Part *p, const Shape *global, const Tiling *leaves);
/* Counts entry parameter i (global shape) with per-device shape local
 * (that of its declared state) in the report's parameter bytes; nothing
 * inside other computations or without a report. */
void part_param_memory(Part *p, int32_t i, const Shape *local);
/* The same from the bytes: whole (global) and per device (local). */
void part_param_bytes(Part *p, int64_t global, int64_t local);
/* Emits a copy of input instruction i (attributes deep-copied, called
 * computations remapped) with new operands and shape. */
int32_t part_clone(Part *p, int32_t i, const char *name, const Shape *shape, const int32_t *ops, int32_t n);
/* The same into output computation oc (a computation the handler builds). */
int32_t part_clone_into(Part *p, int32_t oc, int32_t i, const char *name, const Shape *shape, const int32_t *ops,
                        int32_t n);

/* Partitions input computation c for the call site `caller` (an
 * instruction of p's computation) into a new output computation (named like
 * c, ".N" added when taken): parameter number k arrives in state params[k]
 * (leaves; NULL or k >= n_params: its declared state), the root is brought
 * to root_want (leaves; NULL: its declared state); inside a manual region
 * the parameters are manual along the atoms of `manual`.  The computation runs
 * `trips` times per run of p's (per_trip: an unknown number of times,
 * counted once).  Returns the output computation, -1 after an error. */
int32_t part_callee(Part *p, int32_t caller, int32_t c, const Tiling *const *params, int32_t n_params,
                    uint32_t manual, const Tiling *root_want, int64_t trips, bool per_trip);
/* Number of leaves of value i (its array leaves, flat order). */
static inline int32_t part_n_leaves(const Part *p, int32_t i) { return p->vals[i].n_leaves; }

/* ---- partition_control.c: while, conditional, call */

/* while: body and condition partitioned with the loop state's sharding (the
 * while's declared one), condition result replicated. */
bool part_while(Part *p, int32_t i);
/* conditional: the branch index / predicate replicated, branch k's
 * parameter in its declared state, every branch root brought to the
 * conditional's declared state. */
bool part_conditional(Part *p, int32_t i);
/* call: the callee partitioned as a computation of its own. */
bool part_call(Part *p, int32_t i);
/* infeed, outfeed, send, send-done, recv, recv-done: kept as written on
 * whole values, on every device (replicated) or on one ({maximal
 * device=N}: infeed and outfeed run in a conditional on the device id). */
bool part_transfer(Part *p, int32_t i);

/* ---- partition_manual.c: manual regions */

/* t without the atoms of mask (dims and pending reduction). */
Tiling part_strip_atoms(Tiling t, uint32_t mask);
/* Sets PVal.manual of every instruction of p's computation; false after an
 * error (operands manual along different axes, a border without a manual
 * sharding). */
bool part_manual_masks(Part *p);
/* SPMDFullToShardShape / SPMDShardToFullShape. */
bool part_manual_border(Part *p, int32_t i);
/* Instruction i (one operand, an identity: a Sharding custom-call, a
 * manual border on one device) as a copy of its operand resharded to i's
 * declared sharding; false after an error. */
bool part_copy_as_declared(Part *p, int32_t i);
/* all-reduce, all-gather, reduce-scatter, all-to-all, collective-permute
 * written in the input: kept inside a manual region, an error elsewhere. */
bool part_user_collective(Part *p, int32_t i);
/* partition-id: kept inside a manual region, an error elsewhere. */
bool part_manual_leaf(Part *p, int32_t i);

/* ---- partition_ops.c */

/* Partitions input instruction i of p's computation (sets p->vals[i]).
 * False after reporting an error. */
bool part_handle(Part *p, int32_t i);
/* The default action: every operand gathered whole, the op run
 * unpartitioned on every device, the result replicated. */
bool part_default(Part *p, int32_t i);
/* Replicated tilings, one per array leaf of s (flat order), in scratch. */
Tiling *part_replicated_leaves(Part *p, const Shape *s, int32_t *n_out);
/* The same in arena a (p->tmp for leaves used only while the instruction
 * is partitioned). */
Tiling *part_replicated_leaves_in(Arena *a, const Shape *s, int32_t *n_out);
/* "handler" if the opcode has a handler, else its rule's name (oprule.h),
 * NULL if neither (a unit test walks hlo_opcodes.def with it). */
const char *part_handler_name(HloOpcode op);

/* ---- partition_rule.c: the generic path from an op's rule */

/* An op about to be partitioned from its rule. */
typedef struct RuleCtx {
    int32_t inst;
    OpRule rule;
    Tiling *cur;            /* [n_in + n_out]: operands' current (primary) states, then the results'
                               declared states */
    uint32_t splittable;    /* FactorKind bits that may be split (default: pass-through and
                               reduction); a handler widens it (windows, permutations) */
    uint32_t unmasked;      /* operand tensors (bit k) that stay whole values where a split reduction
                               factor does not index them (a gather's indices: a handler masks the
                               result instead); default 0: such an operand is wanted as a pending
                               reduction (the mask step) */
    uint16_t order;         /* the device order (Tiling.perm) every split operand is in, 0 if none or
                               they differ */
    bool keep_order;        /* candidates may also run in `order` (the local op does not depend on
                               the device's position: the generic emission only) */
    bool move_whole;        /* candidates may also move the atoms a tensor puts on a need-replication
                               factor to another factor of its (an all-to-all each way) instead of
                               gathering them: the generic emission and handlers whose local op
                               runs on any such split (default false) */
    struct Decision *dec;   /* part_by_rule's kept decision this context comes from: what the
                               emission derives from the decision alone is kept with it (NULL:
                               none) */
} RuleCtx;

/* A decided way to run the op. */
typedef struct RuleChoice {
    FactorSharding fs;      /* the factors' atoms */
    uint32_t pass;          /* operand tensors whose pending reduction passes through */
    Tiling *want;           /* [n_in] states the operands are brought to (Part.tmp) */
    Tiling *res;            /* [n_out] the results' states (partial over split reduction factors and
                               what passed) */
    int64_t bytes;          /* operands' + results' reshards, bytes per device, + the handler's extra */
    double work;            /* local iteration space (product of the factors' local extents) */
} RuleChoice;

/* Extra bytes per device a handler adds to a candidate (halos, ...), or
 * PART_INF_COST to reject it. */
typedef int64_t (*RuleExtraFn)(Part *p, const RuleCtx *rc, const RuleChoice *cand, void *user);

/* Builds the rule and reads the states; false if the op has no factor rule
 * (or an operand of a rule tensor is no array). */
bool part_rule_init(Part *p, int32_t i, RuleCtx *rc);
/* The cheapest candidate (partition_rule.c's comment); false if none. */
bool part_rule_choose(Part *p, RuleCtx *rc, RuleExtraFn extra, void *user, RuleChoice *best);
/* Brings every operand to its wanted state (ops[slot] = local
 * instruction); -1 after an error. */
int32_t part_rule_operands(Part *p, const RuleCtx *rc, const RuleChoice *ch, int32_t *ops);
/* The result leaves of a choice (tuple results: every leaf; non-rule
 * leaves replicated), in Part.tmp (valid while the instruction is
 * partitioned; part_set_result keeps a copy). */
Tiling *part_result_leaves(Part *p, const RuleCtx *rc, const RuleChoice *ch);
/* Records `local` as the op's result in the choice's state, with the
 * partial's origin and words for the report. */
void part_rule_result(Part *p, const RuleCtx *rc, const RuleChoice *ch, int32_t local);
/* Operands, the cloned op on local shapes with localized attributes, the
 * result: the whole generic emission. */
bool part_rule_emit(Part *p, const RuleCtx *rc, const RuleChoice *ch);
/* part_rule_init + part_rule_choose + part_rule_emit, or the default action
 * when no candidate exists. */
bool part_by_rule(Part *p, int32_t i);
/* Appends the split dims among dims[0..n) of operand slot k of i in state
 * s, traced to their annotations ("dim 1 of lhs h sharded on 'model' (from
 * the annotation on a, line 31)"); false if none is split. */
bool part_put_split_dims(Part *p, StrBuf *b, int32_t i, int32_t k, const Tiling *s, const int64_t *dims, int32_t n,
                         const char *role, bool axes);

/* ---- partition_index.c: indexing, sorting, multi-output reductions */

/* gather, scatter, dynamic-slice, dynamic-update-slice, topk (and the TopK
 * custom-call), variadic reduce: the rule's method or a handler's, whichever
 * sends fewer bytes (partition_index.c).  False after reporting an error. */
bool part_gather(Part *p, int32_t i);
bool part_scatter(Part *p, int32_t i);
bool part_dynamic_slice(Part *p, int32_t i);
bool part_dynamic_update_slice(Part *p, int32_t i);
bool part_topk(Part *p, int32_t i);
bool part_reduce(Part *p, int32_t i);
/* rng: each device draws its own tile; the devices that hold the same tile
 * take the draw of their group's first device (a pending sum, closed by a
 * broadcast where needed). */
bool part_rng(Part *p, int32_t i);

/* ---- partition_window.c: halo exchanges and windowed ops */

/* Local data movement along one dim of x (local shape xs; the rest whole):
 * slice [start, limit) with stride; pad by lo, hi and interior with the
 * scalar instruction v (negative lo/hi crop); dynamic-slice of w rows at the
 * s32[] instruction off. */
int32_t part_slice_dim(Part *p, int32_t x, const Shape *xs, int32_t dim, int64_t start, int64_t limit, int64_t stride,
                       const char *name);
int32_t part_pad_dim(Part *p, int32_t x, const Shape *xs, int32_t v, int32_t dim, int64_t lo, int64_t hi,
                     int64_t interior, const char *name);
int32_t part_dynamic_slice_dim(Part *p, int32_t x, const Shape *xs, int32_t dim, int32_t off, int64_t w,
                               const char *name);

/* A halo exchange: every device reads a window of one split dim of a local
 * value (halo.h's geometry). */
typedef struct HaloReq {
    int32_t dim;              /* dim of the local value the windows run along */
    HaloDim d;                /* its split: the local dim holds d.chunk rows of tile win[dev].tile */
    int64_t width;            /* window rows */
    HaloWindow *win;          /* one per device (scratch) */
    const int8_t *atoms;      /* the dim's atoms, major -> minor (the tile order) */
    int32_t n_atoms;
    int32_t fill;             /* local scalar instruction: the value of positions outside [0, n) that
                                 a device reads; -1: no device reads any */
} HaloReq;

/* Whom an exchange serves, for the report rows. */
typedef struct HaloCause {
    int32_t inst;             /* input instruction */
    const char *words;        /* the rows' leading words, or NULL */
} HaloCause;

/* Emits exchange hp (planned by halo_plan for rq) on local value `local`
 * of local shape ls (dim rq->dim of ls->dims = rq->d.chunk); returns the
 * window instruction (ls with that dim rq->width).  Report rows: one per
 * collective-permute (or the all-gather), with the halo it carries. */
int32_t part_halo(Part *p, int32_t local, const Shape *ls, const HaloReq *rq, const HaloPlan *hp, const char *base,
                  const HaloCause *why);
/* Frees part_halo's index of the exchanges already emitted (part_fini). */
void part_halo_fini(Part *p);
/* Bytes a device sends for exchange hp on a local value of shape ls (the
 * report's cost of its collectives). */
int64_t part_halo_bytes(const Shape *ls, int32_t dim, const HaloPlan *hp);
/* x (local shape xs) with the positions whose global coordinate
 * win[dev].start + j along dim lies outside [lo, hi) replaced by the scalar
 * `fill`: iota + per-device start, compare, select. */
int32_t part_mask_range(Part *p, int32_t x, const Shape *xs, int32_t dim, const HaloWindow *win, int64_t lo,
                        int64_t hi, int32_t fill, const char *base);
/* x, the local shard in state t of a value of global shape gs, with the
 * padding of every dim d in `dims` (bit mask) that t splits unevenly (its
 * positions at or past gs->dims[d]) replaced by the scalar `fill`; x itself
 * when no dim in `dims` is padded.  A reduction over such dims masks its
 * inputs with its init value (or its reducer's identity) this way, so the
 * padding of uneven shards never reaches the result. */
int32_t part_mask_padding(Part *p, int32_t x, const Tiling *t, const Shape *gs, uint32_t dims, int32_t fill,
                          const char *base);

/* One window dim of an op, in XLA's terms: output o reads the padded,
 * base-dilated input positions o*stride - pad_lo + k*rhs_dilate, k < size
 * (a pad is a window of size 1 with base dilation interior+1). */
typedef struct WinGeom {
    int64_t n_in, n_out;      /* input and output extents */
    int64_t size, stride, pad_lo, lhs_dilate, rhs_dilate;
} WinGeom;

/* Whether every attribute of g is small enough (magnitude <= 2^31) for the
 * exchange arithmetic to stay in int64; a window dim that is not is kept
 * whole. */
bool part_geom_tame(const WinGeom *g);

/* Dim `dim` of local value x (local shape *xs, updated) split by
 * atoms[0..n) exchanged so that every device holds the input positions its
 * output shard (ceil layout over the same atoms) reads under g: the window
 * of (n_out/T - 1)*stride + (size-1)*rhs_dilate + 1 positions, base
 * dilation made explicit, positions outside the input masked with the
 * scalar `fill`.  -1 if the exchange cannot be planned.  The _bytes variant
 * is its cost (and updates *xs alike). */
int32_t part_window_dim(Part *p, int32_t x, Shape *xs, int32_t dim, const WinGeom *g, const int8_t *atoms,
                        int32_t n_atoms, int32_t fill, const char *base, const HaloCause *why);
int64_t part_window_dim_bytes(Part *p, Shape *xs, int32_t dim, const WinGeom *g, const int8_t *atoms,
                              int32_t n_atoms);

/* Handlers (HANDLERS in partition_ops.c): convolution and reduce-window
 * split on window dims by halo exchange. */
bool part_convolution(Part *p, int32_t i);
bool part_reduce_window(Part *p, int32_t i);
/* select-and-scatter split on window dims: halos of the operand and the
 * source, a local select-and-scatter, each device's shard cut out. */
bool part_select_and_scatter(Part *p, int32_t i);

/* ---- partition_shape.c: shape ops along split dims */

/* Whether leaf `leaf` of instruction i's result is read: always for an
 * array result, the computation's root or a tuple of tuples; for a tuple
 * of arrays, when some user other than a get-tuple-element reads i, or a
 * get-tuple-element of that leaf is itself read (has a user or is the
 * root).  A leaf no one reads is never resharded, so its declared sharding
 * costs nothing. */
bool part_leaf_read(Part *p, int32_t i, int32_t leaf);

/* Handlers: slice, pad, concatenate, reverse split on their moved dims by
 * halo exchanges and collective-permutes. */
bool part_slice(Part *p, int32_t i);
bool part_pad(Part *p, int32_t i);
bool part_concatenate(Part *p, int32_t i);
bool part_reverse(Part *p, int32_t i);
/* Whether instruction i is folded into the op that uses it (a pad, or a
 * copy on the way, whose slice folds the pad; a slice of a roll): its
 * user partitions it, part_handle emits nothing for it. */
bool part_deferred(Part *p, int32_t i);

/* ---- reshard.c: lowering */

typedef struct LowerNames {
    const char *base;           /* input value's name */
    const Tiling *decl;           /* its declared state: a step reaching it is named `base` */
    bool decl_named;            /* ... unless the declared state already exists */
} LowerNames;

/* Emits the plan's steps on local instruction `local` (state `from`, global
 * shape `global`); returns the final instruction.  Each step's result is
 * passed to on_step (may be NULL) so the caller can cache the states.
 * Collective rows go to the report: all-reduce / reduce-scatter carry the
 * partial's origin (origin_inst, origin_reason), the others `cause`. */
typedef void (*StepFn)(Part *p, void *user, int32_t local, const Tiling *state);
int32_t reshard_lower(Part *p, int32_t local, const Shape *global, const Tiling *from, const ReshardPlan *plan,
                      LowerNames *names, const Cause *cause, int32_t origin_inst, const char *origin_reason,
                      StepFn on_step, void *user);

#endif
