/* hlo.h - the IR: modules, computations, instructions (flat arrays, handles).
 *
 * HloModule owns computations in definition order (callees before callers);
 * each computation keeps its instructions in a flat array in program order
 * (every operand precedes its users).  Instructions and computations are
 * referred to by int32_t indices, never by pointers (arrays grow), so side
 * tables are plain arrays indexed the same way.  Everything is allocated in
 * m->arena (see arena.h) but the parsed sharding syntax (m->syntax_arena,
 * released by bind_shardings); nothing is freed individually.
 *
 * Attributes that spmdc interprets live in HloAttrs (allocated on demand,
 * hlo_attrs() returns a shared all-default value for instructions without);
 * attributes it only carries (metadata, frontend_attributes, backend_config,
 * unknown ones) are kept verbatim as RawAttr text and printed back.
 *
 * The text form (hlo_print.c) and the reader (parse.c) round-trip.
 */
#ifndef SPMDC_HLO_H
#define SPMDC_HLO_H

#include <stdbool.h>
#include <stdint.h>

#include "spmdc/arena.h"
#include "spmdc/diag.h"
#include "spmdc/intern.h"
#include "spmdc/mesh.h"
#include "spmdc/shape.h"
#include "spmdc/sharding.h"
#include "spmdc/strbuf.h"

/* One byte (packed): HloInst keeps its opcode beside its flags. */
typedef enum __attribute__((packed)) HloOpcode {
#define X(e, s, a, c) HLO_##e,
#include "spmdc/hlo_opcodes.def"
#undef X
    HLO_OPCODE_COUNT
} HloOpcode;

const char *hlo_opcode_name(HloOpcode op);
/* HLO_OPCODE_COUNT if unknown. */
HloOpcode hlo_opcode_from_name(const char *s, size_t len);
int hlo_opcode_arity(HloOpcode op);     /* -1 = variadic */
char hlo_opcode_category(HloOpcode op); /* 'U','B','T','L','C','F','O' (hlo_opcodes.def) */
bool hlo_opcode_is_elementwise(HloOpcode op);
/* True for the opcodes whose attributes may name computations (to_apply,
 * select/scatter, condition/body, the branches, called_computations):
 * reduce, reduce-window, select-and-scatter, map, scatter, sort, while,
 * conditional, call, custom-call, all-reduce, reduce-scatter.  The parser
 * takes such an attribute on no other opcode (parse_attrs.c checks its
 * tables against this list), so a whole-module walk for callees reads the
 * attributes of these instructions only. */
bool hlo_opcode_names_computations(HloOpcode op);

typedef struct IntList {
    int32_t n;
    int64_t *v; /* arena */
} IntList;

typedef enum CompareDir { CMP_EQ, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE } CompareDir;

/* One dimension of a `window={...}`. */
typedef struct WindowDim {
    int64_t size, stride, pad_lo, pad_hi, lhs_dilate, rhs_dilate;
    bool reversal;
} WindowDim;

typedef struct Window {
    int32_t rank;
    WindowDim dims[SPMDC_MAX_RANK];
} Window;

/* Convolution dimension numbers, from dim_labels (e.g. b01f_01io->b01f). */
typedef struct ConvDims {
    int32_t n_spatial;
    int64_t in_batch, in_feature, in_spatial[SPMDC_MAX_RANK];
    int64_t k_in, k_out, k_spatial[SPMDC_MAX_RANK];
    int64_t out_batch, out_feature, out_spatial[SPMDC_MAX_RANK];
} ConvDims;

/* Replica groups: n_groups rows of group_size device ids.  n_groups == 0
 * means the attribute was absent or `{}` (all devices, one group). */
typedef struct ReplicaGroups {
    int64_t n_groups, group_size;
    int64_t *ids; /* arena, row-major */
} ReplicaGroups;

/* Constant literal.  Values are stored by class: integers and pred in i
 * (u64 as its bit pattern), floats (any width) in f as the doubles written
 * (the interpreter rounds them to the element type), complex in f as
 * (re, im) pairs.  elided: the
 * text said `{...}`; values are unspecified (interp treats them as zeros). */
typedef struct Literal {
    int64_t n;          /* elements (array literals) */
    bool elided;
    int64_t *i;
    double *f;
    int32_t n_elems;    /* tuple literals */
    struct Literal *elems;
} Literal;

/* Verbatim attribute: printed back as name=text. */
typedef struct RawAttr {
    const char *name;
    const char *text;
} RawAttr;

/* IntLists in HloAttrs.op_lists: the most any one opcode's group holds. */
#define HLO_ATTR_OP_LISTS 6

/* An instruction's interpreted attributes.  The list groups of dot, slice,
 * dynamic-slice, pad, gather and scatter share storage (no instruction has
 * two of them): read and write only the group of the instruction's opcode.
 * op_lists views the same storage as one array (for copying).
 *
 * Equal attributes of one module may be one shared copy (hlo_set_attrs):
 * write only through hlo_attrs_mut, which gives the instruction a copy of
 * its own first, and replace a list (hlo_intlist) rather than write into
 * its elements.  Fields are ordered by size with explicit padding, so two
 * attribute sets compare bytewise (pointers by what they point to). */
typedef struct HloAttrs {
    IntList dimensions;                 /* broadcast, transpose, reduce, reverse, concatenate,
                                           all-gather, reduce-scatter, all-to-all, sort, map */
    union {
        struct {
            IntList lhs_contracting, rhs_contracting, lhs_batch, rhs_batch; /* dot, ragged-dot */
            IntList lhs_ragged, rhs_group; /* ragged-dot */
        };
        struct {
            IntList slice_start, slice_limit, slice_stride; /* slice */
        };
        struct {
            IntList dynamic_slice_sizes; /* dynamic-slice */
        };
        struct {
            IntList pad_lo, pad_hi, pad_interior; /* pad */
        };
        struct {
            IntList offset_dims, collapsed_slice_dims, start_index_map, slice_sizes, operand_batching_dims,
                start_indices_batching_dims; /* gather */
        };
        struct {
            IntList update_window_dims, inserted_window_dims, scatter_dims_to_operand_dims, input_batching_dims,
                scatter_indices_batching_dims; /* scatter */
        };
        IntList op_lists[HLO_ATTR_OP_LISTS];
    };
    IntList branches;                   /* conditional: computation indices */
    IntList called;                     /* custom-call called_computations */
    ReplicaGroups replica_groups;
    Window *window;                     /* convolution, reduce-window, select-and-scatter */
    ConvDims *conv;                     /* convolution */
    const char *dim_labels;             /* convolution, verbatim */
    int64_t feature_group_count, batch_group_count; /* 0 = absent (means 1) */
    int64_t index;                      /* get-tuple-element */
    int64_t iota_dimension;             /* iota */
    int64_t exponent_bits, mantissa_bits; /* reduce-precision */
    int64_t channel_id;                 /* 0 = absent */
    int64_t k;                          /* topk: the number of elements kept (-1 = absent) */
    int64_t index_vector_dim;           /* gather/scatter */
    int64_t *pairs;                     /* 2*n_pairs: src0,dst0,src1,dst1,... */
    const char *compare_type;           /* compare type=..., or NULL */
    Literal *literal;                   /* constant */
    const char *custom_call_target;     /* custom-call */
    const char *rng_distribution;       /* rng */
    RawAttr *raw;                       /* verbatim attributes, input order */
    int32_t n_pairs;                    /* collective-permute source_target_pairs */
    CompareDir direction;               /* compare */
    int32_t to_apply;                   /* computation index or -1: reduce, all-reduce, map, sort,
                                           reduce-scatter, scatter, call, reduce-window,
                                           select-and-scatter's scatter= */
    int32_t select;                     /* select-and-scatter select=, or -1 */
    int32_t condition, body;            /* while, or -1 */
    int32_t n_raw;
    bool use_global_device_ids;
    bool branches_by_pred;              /* printed as true_computation/false_computation */
    bool is_stable;                     /* sort */
    bool largest;                       /* topk: the k largest (true, the default) or smallest */
    bool indices_are_sorted, unique_indices;
    uint8_t padding_[6];                /* always 0 */
} HloAttrs;

/* Fields are ordered so that what the passes read for every instruction
 * (opcode, operands, attributes, sharding) shares the first cache line. */
typedef struct HloInst {
    HloOpcode op;
    bool sharding_from_user;   /* the input annotated it (never overwritten) */
    bool attrs_shared;         /* attrs is a shared copy (hlo_set_attrs): hlo_attrs_mut copies it */
    int32_t n_operands;
    int32_t *operands;         /* indices into the computation's insts */
    HloAttrs *attrs;           /* NULL: all defaults (use hlo_attrs()) */
    Sharding *sharding;        /* bound/propagated sharding, or NULL (may be shared by
                                  several instructions: replace it, never write into it) */
    /* Provenance, set by propagate_shardings: the user-annotated
     * instruction this sharding came from: itself if annotated; for an
     * inferred one, the annotation that first reached it (when two reach
     * it, the first kept).  An origin code: an index (>= 0) into this
     * computation; -1 = none (replicated by default, or not propagated
     * yet); <= -2, an instruction of another computation (a loop body's
     * value split by an annotation outside the loop), held by the module:
     * HloModule.origins[-2 - code] (hlo_origin_ref resolves any code).
     * hlo_add_inst sets -1; code that copies instructions between
     * computations must reset it. */
    int32_t sharding_origin;
    /* parameter: its number, parameter(N) (0..INT32_MAX); 0 for other
     * opcodes.  Kept here rather than in HloAttrs so that a module's many
     * parameters share one attribute set.  Code that copies an instruction
     * into another module copies it with the attributes. */
    int32_t param_number;
    const char *name;          /* without '%', unique in its computation */
    /* As written, or NULL.  bind_shardings releases the syntax of the
     * shardings it bound (NULL afterwards); an unbound one ({unknown}) stays. */
    const ShardingSyntax *sharding_src;
    /* NULL: every split dim came from sharding_origin.  Else (arrays only,
     * module arena) [shape.rank]: per dim, the origin code (as
     * sharding_origin's) of the annotation that first split it (-1 =
     * unsplit or unknown). */
    const int32_t *sharding_dim_origin;
    /* Global (logical) shape: the module's record of it (hlo_shape), shared
     * by every instruction of an identical shape and valid as long as the
     * module.  To change it, build a new Shape and store hlo_shape(m, &s). */
    const Shape *shape;
    SrcSpan span;              /* the whole instruction in the input */
} HloInst;

typedef struct HloComputation {
    const char *name;
    bool is_entry;
    int32_t n_insts, cap_insts;
    HloInst *insts;            /* program order */
    int32_t root;              /* index into insts; -1 while empty */
    const char *execution_thread; /* or NULL */
    SrcSpan span;
} HloComputation;

/* How many records ahead a walk over a computation's instructions in
 * program order asks for (HLO_WALK_PREFETCH): 64 records are 6 KiB, past
 * the next 4 KiB page boundary, where the hardware's stream prefetcher
 * stops and the next page's address translation has to be walked.  On a
 * computation of 1M instructions (96 MB of records, with page tables that
 * no longer stay in the cache) this takes about a quarter off a light walk
 * (a test walk over a million 88-byte records: 6.97 -> 5.07 ns a record;
 * docs/performance.md, the twenty-second round). */
#define HLO_WALK_AHEAD 64

/* In a walk over comp's instructions (comp: const HloComputation *) at
 * index i: asks for the record HLO_WALK_AHEAD ahead.  A macro, not a
 * function: GCC drops calls to a function that only prefetches. */
#define HLO_WALK_PREFETCH(comp, i)                                                                                     \
    do {                                                                                                               \
        if ((i) + HLO_WALK_AHEAD < (comp)->n_insts)                                                                    \
            __builtin_prefetch(&(comp)->insts[(i) + HLO_WALK_AHEAD]);                                                  \
    } while (0)

typedef struct HloAttrsTable HloAttrsTable;

/* A warning a pass gave about the input that the communication report
 * carries too (docs/report.md, warnings[]): kind (e.g. "ignored-annotation"),
 * the instruction's name, its line, the message; strings in the module
 * arena. */
typedef struct HloInputWarning {
    const char *kind, *instruction, *message;
    uint32_t line;
} HloInputWarning;

typedef struct HloModule {
    Arena *arena;              /* owns everything below */
    /* The parsed sharding syntax (sharding_src), which bind_shardings
     * releases once it has bound it (NULL afterwards). */
    Arena *syntax_arena;
    /* Instructions whose sharding_src is shared with an earlier one's
     * (HloSyntaxMove), in syntax_arena; released with it. */
    struct HloSyntaxMove *syntax_moves;
    int32_t n_syntax_moves, cap_syntax_moves;
    bool syntax_moves_unsorted; /* appended out of (comp, inst) order */
    HloAttrsTable *attrs_table; /* the shared attribute sets (hlo_set_attrs), or NULL */
    InternSet shapes;          /* the instructions' shapes, one record per distinct shape (hlo_shape) */
    const char *name;
    int32_t n_comps, cap_comps;
    HloComputation *comps;     /* definition order: callees first */
    int32_t entry;             /* index, -1 if none */
    int64_t num_partitions;    /* 0 = header did not say */
    int64_t replica_count;     /* 0 = header did not say */
    int32_t n_raw;
    RawAttr *raw;              /* other header attributes, verbatim */
    /* Shardy meshes with axes written inline in the instructions' xla.sdy
     * strings (`<mesh<["x"=4]>, [...]>`; sdy.h): the first one and the first
     * that is another mesh (NULL: none), each its body from '<' to '>' and
     * where it is written; bind.c chooses the module's mesh among them and
     * the header's xla.sdy.meshes. */
    const char *sdy_inline_mesh[2];
    SrcSpan sdy_inline_span[2];
    Mesh mesh;                 /* valid once has_mesh */
    bool has_mesh;
    SrcSpan span;              /* the header's module name in the input (line 0: none) */
    HloInputWarning *input_warnings; /* in the order given (hlo_add_input_warning) */
    int32_t n_input_warnings, cap_input_warnings;
    /* The instructions that origin codes <= -2 name (HloInst.sharding_origin):
     * origins[-2 - code]; set by propagate_shardings (hlo_add_origin). */
    struct HloRef *origins;
    int32_t n_origins, cap_origins;
} HloModule;

/* An instruction of a module by computation and index. */
typedef struct HloRef {
    int32_t comp, inst;
} HloRef;

/* A sharding_src shared with an earlier instruction whose one-line
 * sharding text is the same: the parse reads each such text once and
 * hands every later instruction of that text the same syntax, whose spans
 * are therefore the first text's.  This instruction's text is on `line`,
 * `dcol` columns right of the first text (left if negative).  A move
 * applies only while the instruction's sharding_src is still `shared`.
 * hlo_sharding_syntax gives the syntax with its spans where this
 * instruction's text is; the content is the same either way. */
typedef struct HloSyntaxMove {
    int32_t comp, inst;
    const ShardingSyntax *shared;
    uint32_t line;
    int32_t dcol;
} HloSyntaxMove;

/* ---------------------------------------------------------------- building */

/* A new empty module (own arena).  name is copied. */
HloModule *hlo_module_new(const char *name);
/* Frees the module and everything in its arena.  NULL is a no-op. */
void hlo_module_free(HloModule *m);
/* Appends a computation (name copied); returns its index. */
int32_t hlo_add_computation(HloModule *m, const char *name, bool is_entry);
/* Appends an instruction to computation c; name and operands are copied,
 * the shape becomes m's record of it (hlo_shape), attrs are left NULL.  Returns the instruction's index.  Does not check.
 * The instruction array grows by doubling from 4 (a module of many small
 * computations, a reducer each, holds no unused room to speak of), so an
 * HloInst pointer is valid only until the next add to its computation
 * (hold indices, or reserve with hlo_reserve_insts). */
int32_t hlo_add_inst(HloModule *m, int32_t c, HloOpcode op, const char *name, const Shape *shape,
                     const int32_t *operands, int32_t n_operands);
/* Grows computation c's instruction array to hold n instructions, so
 * adding up to n in all moves none (their pointers stay valid). */
void hlo_reserve_insts(HloModule *m, int32_t c, int32_t n);
/* hlo_add_inst with the name given as name[0..name_len) (no NUL needed). */
int32_t hlo_add_inst_n(HloModule *m, int32_t c, HloOpcode op, const char *name, size_t name_len, const Shape *shape,
                       const int32_t *operands, int32_t n_operands);
/* hlo_add_inst_n with shape already a record of m (hlo_shape's result, or
 * an instruction's shape in m), which the instruction shares as it is. */
int32_t hlo_add_inst_rec(HloModule *m, int32_t c, HloOpcode op, const char *name, size_t name_len,
                         const Shape *shape, const int32_t *operands, int32_t n_operands);
/* A 64-bit hash of the n bytes at p, continuing from seed h: eight bytes
 * a step (four independent lanes from 64 bytes on), each mixed with a
 * multiply and shifts.  For the module's tables of shared values and other
 * in-process tables; not stable across versions (nothing stores it). */
uint64_t hlo_hash_bytes(uint64_t h, const void *p, size_t n);

/* The origin code (HloInst.sharding_origin) of instruction `inst` of
 * computation `comp` for an instruction of another computation: a new
 * code <= -2 each call (callers look theirs up before adding).  The table
 * is in m's arena.  Amortized constant time. */
int32_t hlo_add_origin(HloModule *m, int32_t comp, int32_t inst);
/* Resolves origin code o of an instruction of computation c
 * (HloInst.sharding_origin, an entry of sharding_dim_origin) to the
 * instruction it names: true and *r set for an index into c or a code m
 * holds; false for -1 and for codes m does not hold (an instruction copied
 * from another module keeps the codes of that module). */
bool hlo_origin_ref(const HloModule *m, int32_t c, int32_t o, HloRef *r);
/* Records a warning about the input for the report (HloInputWarning;
 * the strings are copied). */
void hlo_add_input_warning(HloModule *m, const char *kind, const char *instruction, uint32_t line,
                           const char *message);
/* Records that instruction (c, i)'s sharding_src is `shared`, read for a
 * text `dcol` columns left of this one's on `line` (HloSyntaxMove).  The
 * record lives in m->syntax_arena.  Amortized constant time. */
void hlo_note_syntax_move(HloModule *m, int32_t c, int32_t i, const ShardingSyntax *shared, uint32_t line,
                          int32_t dcol);
/* Instruction (c, i)'s sharding_src with its source spans where its own
 * text is: for a shared syntax (hlo_note_syntax_move) a copy with moved
 * spans is made in m->syntax_arena, becomes the instruction's
 * sharding_src, and is returned; otherwise sharding_src itself (may be
 * NULL).  Use it wherever a span of the syntax may reach a message or be
 * kept; reading only the content, sharding_src serves.  O(log moves),
 * plus one sort after out-of-order records. */
const ShardingSyntax *hlo_sharding_syntax(HloModule *m, int32_t c, int32_t i);
/* The instruction's attributes for writing (allocated on first use, with
 * to_apply/select/condition/body = -1; a shared set is copied first). */
HloAttrs *hlo_attrs_mut(HloModule *m, HloInst *inst);
/* Sets the instruction's attributes to *a, stored once per module for
 * equal sets (the lists, strings, replica groups, pairs and verbatim
 * attributes compared by content; window, conv and literal by address):
 * every instruction with equal attributes shares one read-only copy
 * (inst->attrs_shared).  a's arrays must live in m's arena.  Amortized
 * constant time. */
void hlo_set_attrs(HloModule *m, HloInst *inst, const HloAttrs *a);
/* The instruction's attributes for reading (a shared default if none). */
const HloAttrs *hlo_attrs(const HloInst *inst);
/* True when in is a custom-call whose custom_call_target is target (the
 * attributes are read only for a custom-call). */
bool hlo_is_custom_call(const HloInst *in, const char *target);

/* ragged-dot's mode, from where lhs's one ragged dim is: a free
 * (non-contracting) dim, a contracting dim or a batch dim. */
typedef enum HloRaggedMode { RAGGED_FREE, RAGGED_CONTRACTING, RAGGED_BATCH } HloRaggedMode;
HloRaggedMode hlo_ragged_mode(const HloAttrs *a);
/* An arena copy of v[0..n). */
IntList hlo_intlist(HloModule *m, const int64_t *v, int32_t n);
/* Appends a verbatim attribute (name and text copied). */
void hlo_add_raw_attr(HloModule *m, HloInst *inst, const char *name, const char *text);
/* Deep copy of a shape's tuple elements into m's arena (arrays: plain copy). */
Shape hlo_copy_shape(HloModule *m, const Shape *s);
/* m's record of shape s (HloInst.shape): the one record, in m's arena, that
 * every identical shape maps to (type, dims, layout and its tail text,
 * tuple elements, all compared deeply); s may be temporary.  An instruction
 * record holds 8 bytes for its shape instead of the Shape's 104, and most of
 * a program's instructions share a few hundred shapes.  Cost: one hash of s
 * (O(leaves)) and one probe of an open-addressing set (intern.h). */
const Shape *hlo_shape(HloModule *m, const Shape *s);

static inline HloComputation *hlo_comp(const HloModule *m, int32_t c) { return &m->comps[c]; }
static inline HloInst *hlo_inst(const HloModule *m, int32_t c, int32_t i) { return &m->comps[c].insts[i]; }
/* Index of the computation called name, or -1 (linear scan: for tests and the CLI). */
int32_t hlo_find_computation(const HloModule *m, const char *name);
/* Index of the instruction called name in computation c, or -1 (linear). */
int32_t hlo_find_inst(const HloModule *m, int32_t c, const char *name);

/* Users of every instruction of one computation, CSR form: the users of
 * inst i are users[start[i] .. start[i+1]) (each user once per operand slot,
 * in program order).  Arrays come from arena. */
typedef struct HloUsers {
    int32_t *start; /* n_insts + 1 */
    int32_t *users;
} HloUsers;
HloUsers hlo_compute_users(const HloComputation *c, Arena *arena);

/* Trip count of while instruction i of computation c: a `known_trip_count`
 * backend config (`{"known_trip_count":{"n":"5"}}`), or the induction
 * variable lax.scan and fori_loop write (condition `gte(param, k) < N` with
 * N a constant, body root a tuple whose element k is `gte(param, k) + 1`,
 * the while's operand a tuple whose element k is a constant S): N - S trips
 * (0 when N <= S).  -1 when neither is found. */
int64_t hlo_while_trip_count(const HloModule *m, int32_t c, int32_t i);

/* ---------------------------------------------------------------- text form */

typedef struct HloPrintOptions {
    bool print_shardings;  /* sharding={...} (needs m->has_mesh for bound ones) */
    bool print_layouts;    /* shapes' layouts as read */
    bool print_raw_attrs;  /* metadata, frontend_attributes, backend_config, ... */
} HloPrintOptions;

/* Appends the module as HLO text XLA's parser accepts: header, computations
 * callee-first, `%name = shape opcode(%a, %b), attrs`, ROOT marked. */
void hlo_print_module(StrBuf *b, const HloModule *m, const HloPrintOptions *opt);
/* hlo_print_module with named shardings in the spelling XLA 0.10.2's parser
 * requires (quoted axis names, sharding_print_quoted). */
void hlo_print_module_quoted(StrBuf *b, const HloModule *m, const HloPrintOptions *opt);
/* One instruction's text without a trailing newline (for diagnostics). */
void hlo_print_inst(StrBuf *b, const HloModule *m, int32_t c, int32_t i, const HloPrintOptions *opt);

#endif
