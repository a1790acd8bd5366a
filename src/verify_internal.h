/* verify_internal.h - what verify.c (driver, well-formed shapes, parameter
 * tables) and verify_shape.c (per-opcode shape inference) share.  Not part of
 * the contract: only src/verify*.c include it.
 */
#ifndef SPMDC_VERIFY_INTERNAL_H
#define SPMDC_VERIFY_INTERNAL_H

#include "spmdc/verify.h"

#define SBUF_LEN 200
#define SBUF_N 6

/* One shape inference: the instruction, where results and temporaries go,
 * and the error text. */
typedef struct Infer {
    const HloModule *m;
    const HloComputation *comp;
    const HloInst *in;
    const HloAttrs *a;
    Arena *out;                /* tuple elements of the inferred shape */
    Arena *tmp;                /* temporaries (created on demand if own_tmp) */
    bool own_tmp;
    int32_t *const *ptab;      /* verify_module: per computation, inst of param k */
    const int32_t *pcount;     /* verify_module: parameters per computation */
    bool overflow;             /* some shape arithmetic overflowed int64 */
    char *err;
    size_t errlen;
    int nsbuf;
    char sbuf[SBUF_N][SBUF_LEN]; /* ring of formatted shapes for messages */
} Infer;

/* An element type a shape may carry (not ET_INVALID, not ET_TUPLE). */
static inline bool type_ok(ElemType t) { return t > ET_INVALID && t < ET_TUPLE; }

/* ---------------------------------------------------------------- verify.c */

/* The top level of s is well formed: a typed array of rank <= 8 with dims
 * >= 0, or a tuple with its element array. */
bool verify_shape_top_ok(const Shape *s);
/* s is well formed all the way down (depth: the current tuple nesting, 0). */
bool verify_shape_ok(const Shape *s, int depth);
/* shape_equal (layouts ignored) that never reads past a malformed shape. */
bool verify_same_shape(const Shape *a, const Shape *b);
/* Appends s as text, or "<malformed shape>" (depth: as for verify_shape_ok). */
void verify_put_shape(StrBuf *b, const Shape *s, int depth);
/* Instruction index of parameter k for every k of computation cc (-1 where a
 * number is missing), in a; *n = number of parameter instructions. */
int32_t *verify_param_table(const HloComputation *cc, Arena *a, int32_t *n);

/* ---------------------------------------------------------------- verify_shape.c */

/* Zeroes x (but the ring buffer) and points it at instruction i of
 * computation c; err[0..errlen) receives the message of a failure.  The
 * caller sets x->out (and optionally x->tmp, x->ptab, x->pcount). */
void verify_infer_setup(Infer *x, const HloModule *m, int32_t c, int32_t i, char *err, size_t errlen);
/* Infers the result shape of x's instruction into *o; false (message in
 * x->err) if an operand, attribute or callee breaks the opcode's rule. */
bool verify_infer_inst(Infer *x, Shape *o);

#endif
