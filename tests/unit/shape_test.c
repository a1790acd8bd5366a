/* shape_test.c - element type table, sizes, printing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "spmdc/arena.h"
#include "spmdc/shape.h"

static void test_names_round_trip(void **state)
{
    (void)state;
    for (int t = ET_INVALID + 1; t < ET_TUPLE; t++) {
        const char *n = elem_type_name((ElemType)t);
        assert_int_equal(elem_type_from_name(n, strlen(n)), t);
    }
    assert_int_equal(elem_type_from_name("f3", 2), ET_INVALID);
    assert_int_equal(elem_type_from_name("opaque_type", 11), ET_OPAQUE);
}

static void test_byte_sizes(void **state)
{
    (void)state;
    /* report.md: pred/s8/u8/f8 1 byte; s16/u16/f16/bf16 2; s32/u32/f32 4; s64/u64/f64/c64 8; c128 16; token 0. */
    assert_int_equal(elem_type_bytes(ET_PRED), 1);
    assert_int_equal(elem_type_bytes(ET_F8E4M3FN), 1);
    assert_int_equal(elem_type_bytes(ET_BF16), 2);
    assert_int_equal(elem_type_bytes(ET_F32), 4);
    assert_int_equal(elem_type_bytes(ET_C64), 8);
    assert_int_equal(elem_type_bytes(ET_C128), 16);
    assert_int_equal(elem_type_bytes(ET_TOKEN), 0);
    int64_t d[] = {8192, 8192};
    Shape s = shape_array(ET_BF16, 2, d);
    assert_int_equal(shape_byte_size(&s), 134217728); /* 8192*8192*2 */
    int64_t d4[] = {3};
    Shape s4 = shape_array(ET_S4, 1, d4);
    assert_int_equal(shape_byte_size(&s4), 2); /* 3 * 4 bits = 12 bits -> 2 bytes packed */
    Shape sc = shape_scalar(ET_F32);
    assert_int_equal(shape_elem_count(&sc), 1);
    assert_int_equal(shape_byte_size(&sc), 4);
}

/* Sizes near the 2^62-byte limit are computed without overflow: the bit
 * count n * bits of a sub-byte array would pass 2^63 long before its bytes. */
static void test_huge_sizes(void **state)
{
    (void)state;
    int64_t n62 = INT64_C(1) << 62, n60 = INT64_C(1) << 60;
    Shape u4 = shape_array(ET_U4, 1, &n62); /* 2^62 elements x 4 bits = 2^61 bytes */
    assert_true(shape_size_fits(&u4));
    assert_int_equal(shape_byte_size(&u4), INT64_C(1) << 61);
    int64_t odd = n62 - 1; /* 2^62 - 1 nibbles: ceil((2^62 - 1) / 2) = 2^61 bytes */
    Shape u4o = shape_array(ET_U4, 1, &odd);
    assert_int_equal(shape_byte_size(&u4o), INT64_C(1) << 61);
    Shape f32 = shape_array(ET_F32, 1, &n60); /* exactly 2^62 bytes: the limit itself fits */
    assert_true(shape_size_fits(&f32));
    assert_int_equal(shape_byte_size(&f32), n62);
    int64_t over = n60 + 1;
    Shape f32o = shape_array(ET_F32, 1, &over);
    assert_false(shape_size_fits(&f32o));
    int64_t dims[2] = {INT64_C(1) << 40, INT64_C(1) << 40}; /* 2^80 elements: the count itself overflows */
    Shape big = shape_array(ET_PRED, 2, dims);
    assert_false(shape_size_fits(&big));
    int64_t neg = -1;
    Shape bad = shape_array(ET_F32, 1, &neg);
    assert_false(shape_size_fits(&bad));
}

static void test_print_and_equal(void **state)
{
    (void)state;
    int64_t d[] = {8, 16};
    Shape a = shape_array(ET_F32, 2, d);
    a.has_layout = true;
    a.minor_to_major[0] = 1;
    a.minor_to_major[1] = 0;
    Shape elems[2] = {a, shape_scalar(ET_S32)};
    Shape t = shape_scalar(ET_TUPLE);
    t.n_elems = 2;
    t.elems = elems;
    StrBuf b = {0};
    shape_print(&b, &t, true);
    assert_string_equal(sb_cstr(&b), "(f32[8,16]{1,0}, s32[])");
    sb_clear(&b);
    shape_print(&b, &t, false);
    assert_string_equal(sb_cstr(&b), "(f32[8,16], s32[])");
    sb_free(&b);
    Shape a2 = shape_array(ET_F32, 2, d);
    assert_true(shape_equal(&a, &a2)); /* layouts ignored */
    a2.dims[1] = 15;
    assert_false(shape_equal(&a, &a2));
    assert_int_equal(shape_leaf_count(&t), 2);
    assert_int_equal(shape_byte_size(&t), 8 * 16 * 4 + 4);
}

/* A 40-element tuple whose element e is a 2-leaf tuple when e % 3 == 0,
 * else an array: element e starts at leaf e + ceil(e / 3) (one extra leaf
 * per tuple element before it); the total is 40 + 14 = 54.  Offsets past
 * 16 come from the memo, which a second tuple (20 arrays: offset = index)
 * replaces, and the first one rebuilds. */
static void test_leaf_offsets(void **state)
{
    (void)state;
    Arena *a = arena_create();
    Shape f = shape_scalar(ET_F32);
    Shape pair = {.type = ET_TUPLE, .n_elems = 2, .elems = (Shape[]){f, f}};
    Shape el[40], flat_el[20];
    for (int e = 0; e < 40; e++) el[e] = e % 3 == 0 ? pair : f;
    for (int e = 0; e < 20; e++) flat_el[e] = f;
    Shape t = {.type = ET_TUPLE, .n_elems = 40, .elems = el};
    Shape flat = {.type = ET_TUPLE, .n_elems = 20, .elems = flat_el};
    LeafMemo memo = {0};
    assert_int_equal(shape_leaf_count(&t), 54);
    for (int round = 0; round < 2; round++) {
        for (int e = 0; e <= 40; e++)
            assert_int_equal(shape_leaf_offset(&t, e, &memo, a), e + (e + 2) / 3);
        assert_ptr_equal(memo.s, &t);
        assert_int_equal(shape_leaf_offset(&flat, 19, &memo, a), 19);
        assert_int_equal(shape_leaf_offset(&flat, 20, &memo, a), 20);
        assert_ptr_equal(memo.s, &flat);
    }
    arena_destroy(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_round_trip),
        cmocka_unit_test(test_byte_sizes),
        cmocka_unit_test(test_huge_sizes),
        cmocka_unit_test(test_print_and_equal),
        cmocka_unit_test(test_leaf_offsets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
