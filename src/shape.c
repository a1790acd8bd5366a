/* shape.c - element type table and shape helpers (see shape.h). */
#include "spmdc/shape.h"
#include "spmdc/arena.h"

#include <string.h>

static const struct {
    const char *name;
    int bits;
    char cls;
} ET_INFO[ET_COUNT] = {
    [ET_INVALID] = {"?", 0, 0},
#define X(e, s, b, c) [ET_##e] = {s, b, c},
    SPMDC_ELEM_TYPES(X)
#undef X
    [ET_TUPLE] = {"?", 0, 0},
};

const char *elem_type_name(ElemType t)
{
    return (t > ET_INVALID && t < ET_COUNT) ? ET_INFO[t].name : "?";
}

ElemType elem_type_from_name(const char *s, size_t len)
{
    if (len == 11 && memcmp(s, "opaque_type", 11) == 0) return ET_OPAQUE;
    for (int t = ET_INVALID + 1; t < ET_TUPLE; t++) {
        const char *n = ET_INFO[t].name;
        if (strlen(n) == len && memcmp(n, s, len) == 0) return (ElemType)t;
    }
    return ET_INVALID;
}

int elem_type_bits(ElemType t) { return (t > ET_INVALID && t < ET_COUNT) ? ET_INFO[t].bits : 0; }
int64_t elem_type_bytes(ElemType t) { return (elem_type_bits(t) + 7) / 8; }
static char cls(ElemType t) { return (t > ET_INVALID && t < ET_COUNT) ? ET_INFO[t].cls : 0; }
bool elem_type_is_float(ElemType t) { return cls(t) == 'f'; }
bool elem_type_is_complex(ElemType t) { return cls(t) == 'c'; }
bool elem_type_is_signed_int(ElemType t) { return cls(t) == 's'; }
bool elem_type_is_unsigned_int(ElemType t) { return cls(t) == 'u'; }
bool elem_type_is_integral(ElemType t) { return cls(t) == 's' || cls(t) == 'u'; }

Shape shape_array(ElemType t, int32_t rank, const int64_t *dims)
{
    Shape s;
    memset(&s, 0, sizeof s);
    s.type = t;
    s.rank = rank;
    for (int32_t i = 0; i < rank && i < SPMDC_MAX_RANK; i++) s.dims[i] = dims[i];
    return s;
}

Shape shape_scalar(ElemType t) { return shape_array(t, 0, NULL); }

int64_t shape_elem_count(const Shape *s)
{
    if (s->type == ET_TUPLE) return 0;
    int64_t n = 1;
    for (int32_t i = 0; i < s->rank; i++) n *= s->dims[i];
    return n;
}

int64_t shape_byte_size(const Shape *s)
{
    if (s->type == ET_TUPLE) {
        int64_t n = 0;
        for (int32_t i = 0; i < s->n_elems; i++) n += shape_byte_size(&s->elems[i]);
        return n;
    }
    int bits = elem_type_bits(s->type);
    int64_t n = shape_elem_count(s);
    if (bits >= 8) return n * (bits / 8);
    return (n / 8) * bits + ((n % 8) * bits + 7) / 8; /* ceil(n * bits / 8) without forming n * bits */
}

bool shape_equal(const Shape *a, const Shape *b)
{
    if (a == b) return true; /* a module's instructions share their shapes' records (hlo_shape) */
    if (a->type != b->type) return false;
    if (a->type == ET_TUPLE) {
        if (a->n_elems != b->n_elems) return false;
        for (int32_t i = 0; i < a->n_elems; i++)
            if (!shape_equal(&a->elems[i], &b->elems[i])) return false;
        return true;
    }
    if (a->rank != b->rank) return false;
    for (int32_t i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

void shape_print(StrBuf *b, const Shape *s, bool with_layout)
{
    if (s->type == ET_TUPLE) {
        sb_putc(b, '(');
        for (int32_t i = 0; i < s->n_elems; i++) {
            if (i) sb_puts(b, ", ");
            shape_print(b, &s->elems[i], with_layout);
        }
        sb_putc(b, ')');
        return;
    }
    sb_puts(b, elem_type_name(s->type));
    sb_putc(b, '[');
    for (int32_t i = 0; i < s->rank; i++) {
        if (i) sb_putc(b, ',');
        sb_int(b, s->dims[i]);
    }
    sb_putc(b, ']');
    if (with_layout && s->has_layout && (s->rank > 0 || s->layout_tail)) {
        sb_putc(b, '{');
        for (int32_t i = 0; i < s->rank; i++) {
            if (i) sb_putc(b, ',');
            sb_int(b, s->minor_to_major[i]);
        }
        if (s->layout_tail) {
            sb_putc(b, ':');
            sb_puts(b, s->layout_tail);
        }
        sb_putc(b, '}');
    }
}

/* Byte size of s, or -1 when it exceeds SPMDC_MAX_SHAPE_BYTES. */
static int64_t checked_bytes(const Shape *s, int depth)
{
    if (depth > 64) return -1;
    int64_t total = 0;
    if (s->type == ET_TUPLE) {
        for (int32_t i = 0; i < s->n_elems; i++) {
            int64_t b = checked_bytes(&s->elems[i], depth + 1);
            if (b < 0 || b > SPMDC_MAX_SHAPE_BYTES - total) return -1;
            total += b;
        }
        return total;
    }
    int64_t n = 1;
    for (int32_t i = 0; i < s->rank; i++) {
        if (s->dims[i] < 0 || __builtin_mul_overflow(n, s->dims[i], &n) || n > SPMDC_MAX_SHAPE_BYTES) return -1;
    }
    int bits = elem_type_bits(s->type);
    if (bits == 0) bits = 8; /* token/opaque count as bytes here */
    int64_t bytes;
    if (bits >= 8) {
        if (__builtin_mul_overflow(n, (int64_t)(bits / 8), &bytes)) return -1;
    } else {
        bytes = (n / 8) * bits + ((n % 8) * bits + 7) / 8; /* n <= 2^62: no overflow */
    }
    return bytes > SPMDC_MAX_SHAPE_BYTES ? -1 : bytes;
}

bool shape_size_fits(const Shape *s) { return checked_bytes(s, 0) >= 0; }

int32_t shape_leaf_count(const Shape *s)
{
    if (s->type != ET_TUPLE) return 1;
    int32_t n = 0;
    for (int32_t i = 0; i < s->n_elems; i++) n += shape_leaf_count(&s->elems[i]);
    return n;
}

int32_t shape_leaf_offset(const Shape *s, int32_t index, LeafMemo *memo, struct Arena *a)
{
    if (index < 16) {
        int32_t off = 0;
        for (int32_t e = 0; e < index; e++) off += shape_leaf_count(&s->elems[e]);
        return off;
    }
    if (memo->s != s) {
        memo->start = ARENA_ARRAY(a, int32_t, s->n_elems + 1);
        for (int32_t e = 0; e < s->n_elems; e++) memo->start[e + 1] = memo->start[e] + shape_leaf_count(&s->elems[e]);
        memo->s = s;
    }
    return memo->start[index];
}

bool shape_same_dims(const Shape *a, const Shape *b)
{
    if (!shape_is_array(a) || !shape_is_array(b) || a->rank != b->rank)
        return false;
    for (int32_t d = 0; d < a->rank; d++)
        if (a->dims[d] != b->dims[d])
            return false;
    return true;
}
