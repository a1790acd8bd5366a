/* shape.h - element types and array/tuple shapes.
 *
 * A Shape is an array (element type + dims + optional layout) or a tuple of
 * shapes.  Dims are element counts.  Layouts are accepted and kept so they can
 * be printed back, but spmdc's passes ignore them (the per-device program keeps
 * the default row-major layout).  Dynamic dimensions (`<=N`, `?`) are rejected
 * by the front end.
 */
#ifndef SPMDC_SHAPE_H
#define SPMDC_SHAPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spmdc/strbuf.h"

#define SPMDC_MAX_RANK 8

/* X(ENUM, "hlo spelling", bits per element, class)  class: 'p' pred, 's'
 * signed, 'u' unsigned, 'f' float, 'c' complex, 't' token/opaque.
 * Byte sizes are those of docs/report.md (sub-byte types count as packed bits). */
#define SPMDC_ELEM_TYPES(X)                 \
    X(PRED, "pred", 8, 'p')                 \
    X(S1, "s1", 1, 's')                     \
    X(S2, "s2", 2, 's')                     \
    X(S4, "s4", 4, 's')                     \
    X(S8, "s8", 8, 's')                     \
    X(S16, "s16", 16, 's')                  \
    X(S32, "s32", 32, 's')                  \
    X(S64, "s64", 64, 's')                  \
    X(U1, "u1", 1, 'u')                     \
    X(U2, "u2", 2, 'u')                     \
    X(U4, "u4", 4, 'u')                     \
    X(U8, "u8", 8, 'u')                     \
    X(U16, "u16", 16, 'u')                  \
    X(U32, "u32", 32, 'u')                  \
    X(U64, "u64", 64, 'u')                  \
    X(F16, "f16", 16, 'f')                  \
    X(BF16, "bf16", 16, 'f')                \
    X(F32, "f32", 32, 'f')                  \
    X(F64, "f64", 64, 'f')                  \
    X(C64, "c64", 64, 'c')                  \
    X(C128, "c128", 128, 'c')               \
    X(F8E5M2, "f8e5m2", 8, 'f')             \
    X(F8E4M3, "f8e4m3", 8, 'f')             \
    X(F8E4M3FN, "f8e4m3fn", 8, 'f')         \
    X(F8E4M3B11FNUZ, "f8e4m3b11fnuz", 8, 'f') \
    X(F8E3M4, "f8e3m4", 8, 'f')             \
    X(F8E5M2FNUZ, "f8e5m2fnuz", 8, 'f')     \
    X(F8E4M3FNUZ, "f8e4m3fnuz", 8, 'f')     \
    X(F4E2M1FN, "f4e2m1fn", 4, 'f')         \
    X(F8E8M0FNU, "f8e8m0fnu", 8, 'f')       \
    X(TOKEN, "token", 0, 't')               \
    X(OPAQUE, "opaque", 0, 't')

typedef enum ElemType {
    ET_INVALID = 0,
#define X(e, s, b, c) ET_##e,
    SPMDC_ELEM_TYPES(X)
#undef X
    ET_TUPLE, /* not an element type: marks a tuple Shape */
    ET_COUNT
} ElemType;

typedef struct Shape {
    ElemType type;       /* ET_TUPLE for tuples */
    int32_t rank;        /* arrays: number of dims (0 = scalar) */
    int64_t dims[SPMDC_MAX_RANK];          /* elements per dim */
    int8_t minor_to_major[SPMDC_MAX_RANK]; /* valid iff has_layout */
    bool has_layout;
    int32_t n_elems;         /* tuples: element count */
    const char *layout_tail; /* raw text after ':' inside the layout braces, or NULL */
    struct Shape *elems;     /* tuples: elements (owned by the module arena) */
} Shape;

/* Spelling ("bf16"), or "?" for ET_INVALID/ET_TUPLE. */
const char *elem_type_name(ElemType t);
/* ET_INVALID if s[0..len) is not an element type name ("opaque_type" -> ET_OPAQUE). */
ElemType elem_type_from_name(const char *s, size_t len);
/* Bits per element (0 for token/opaque/tuple). */
int elem_type_bits(ElemType t);
/* Bytes per element as docs/report.md counts them: ceil(bits/8); sub-byte
 * types return 1 (callers that need packing use shape_byte_size). */
int64_t elem_type_bytes(ElemType t);
bool elem_type_is_float(ElemType t);    /* f16, bf16, f32, f64, f8*, f4* */
bool elem_type_is_complex(ElemType t);
bool elem_type_is_signed_int(ElemType t);
bool elem_type_is_unsigned_int(ElemType t);
bool elem_type_is_integral(ElemType t); /* signed or unsigned int, not pred */

/* Convenience constructors (no layout). */
Shape shape_array(ElemType t, int32_t rank, const int64_t *dims);
Shape shape_scalar(ElemType t);
static inline bool shape_is_array(const Shape *s) { return s->type != ET_TUPLE && s->type != ET_INVALID; }
static inline bool shape_is_tuple(const Shape *s) { return s->type == ET_TUPLE; }
/* a + b for byte or element counts (both >= 0): INT64_MAX where the sum does
 * not fit, so totals over huge shapes (2^62 bytes each) saturate instead of
 * wrapping to a negative or small figure. */
static inline int64_t bytes_add_sat(int64_t a, int64_t b)
{
    int64_t s;
    return __builtin_add_overflow(a, b, &s) ? INT64_MAX : s;
}
/* Product of dims (1 for scalars); tuples: 0. */
int64_t shape_elem_count(const Shape *s);
/* Bytes of the array (elements * bytes, sub-byte types packed: ceil(n*bits/8));
 * tuples: sum of their leaves; token: 0. */
int64_t shape_byte_size(const Shape *s);
/* Same element type, rank and dims (layouts ignored); tuples compared leafwise. */
bool shape_equal(const Shape *a, const Shape *b);
/* Both arrays with the same rank and dims (element types and layouts ignored). */
bool shape_same_dims(const Shape *a, const Shape *b);
/* Appends the HLO spelling: "f32[8,16]{1,0}" (layout only if with_layout and
 * has_layout), "(f32[2], s32[])" for tuples. */
void shape_print(StrBuf *b, const Shape *s, bool with_layout);
/* Largest array (or tuple total) spmdc handles: 2^62 bytes, so that element
 * counts, byte sizes and the cost model's products never overflow int64. */
#define SPMDC_MAX_SHAPE_BYTES (INT64_C(1) << 62)
/* True iff every leaf's element count and byte size, and the tuple's total
 * byte size, are at most SPMDC_MAX_SHAPE_BYTES (computed without overflow).
 * Callers check this before shape_elem_count/shape_byte_size on untrusted
 * shapes (verify_module does, for every instruction). */
bool shape_size_fits(const Shape *s);
/* Number of array leaves of a (nested) tuple; 1 for arrays. */
int32_t shape_leaf_count(const Shape *s);

/* The prefix sums of the leaf counts of the last tuple asked about:
 * start[e] = the leaves (depth-first) of elements 0..e-1 (n_elems + 1
 * entries, memory from the caller's arena).  Zero-initialize; valid while
 * that arena and the tuple's shape live. */
typedef struct LeafMemo {
    const Shape *s;
    int32_t *start;
} LeafMemo;
struct Arena;
/* The index of the first leaf of element `index` (0 <= index <= n_elems)
 * of tuple s in its depth-first leaf order.  Small indices are summed
 * directly; larger ones are read from memo, which is rebuilt (O(n_elems),
 * in arena a) when s is not the tuple it holds: a run of
 * get-tuple-elements of one N-element tuple costs O(N), not O(N^2). */
int32_t shape_leaf_offset(const Shape *s, int32_t index, LeafMemo *memo, struct Arena *a);

#endif
