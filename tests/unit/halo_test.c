/* halo_test.c - the geometry of halo exchanges (src/halo.c).
 *
 * Hand-worked plans (hops, pieces, pads, offsets, bytes), and a brute-force
 * check: for random dims (uneven, smaller than their tile count, circular)
 * and random windows, the exchange is carried out on plain arrays exactly as
 * the partitioner emits it (each tile's last / first piece rows sent to the
 * tile `hop` above / below, the buffer [pad | low pieces | shard | high
 * pieces | pad], or the gathered dim) and every position a window reads
 * must hold its global element (or lie outside the array when not
 * circular).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "spmdc/halo.h"

/* A 3-wide window with padding 1 on 17 rows over 8 tiles of 3: tile t
 * reads [3t-1, 3t+2) + its outputs' span: rows [3t-1, 3t+4). */
static void test_same_padding(void **state)
{
    (void)state;
    HaloDim d = {17, 8, 3, false};
    HaloWindow w[8];
    for (int t = 0; t < 8; t++) {
        int64_t first = 3 * t, last = first + 3 < 17 ? first + 2 : 16;
        w[t].tile = t;
        w[t].start = first - 1;
        w[t].lo = first - 1;
        w[t].hi = first < 17 ? last + 2 : w[t].lo; /* outputs [first, last] read up to last+1 */
    }
    HaloPlan p;
    assert_true(halo_plan(&d, w, 8, 5, true, &p));
    assert_false(p.gather);
    assert_int_equal(p.hops_lo, 1);
    assert_int_equal(p.hops_hi, 1);
    assert_int_equal(p.piece_lo[0], 1); /* the row below */
    assert_int_equal(p.piece_hi[0], 1); /* the row above */
    assert_true(p.fill);                /* tile 0 reads row -1, tile 5 row 17 */
    assert_int_equal(p.rows_sent, 2);
    assert_int_equal(p.buffer, 5);      /* 1 + 3 + 1: no pads */
    assert_true(p.uniform);
    assert_int_equal(p.offset0, 0);
}

/* A cumulative window over 64 rows in 8 tiles of 8: tile 7 reads 56 rows
 * below: 7 hops of 8 rows, or an all-gather of 7 * 8 rows: a tie, the
 * all-gather wins; with gathering not allowed, 7 hops. */
static void test_wide_halo_gathers(void **state)
{
    (void)state;
    HaloDim d = {64, 8, 8, false};
    HaloWindow w[8];
    for (int t = 0; t < 8; t++) {
        w[t].tile = t;
        w[t].start = 8 * t - 63;
        w[t].lo = w[t].start;
        w[t].hi = 8 * t + 8;
    }
    HaloPlan p;
    assert_true(halo_plan(&d, w, 8, 70, true, &p));
    assert_true(p.gather);
    assert_int_equal(p.need_lo, 56);
    assert_int_equal(p.rows_sent, 56);
    assert_int_equal(p.pad_lo, 63);     /* tile 0's window starts at -63 */
    assert_false(p.uniform);
    assert_true(halo_plan(&d, w, 8, 70, false, &p));
    assert_false(p.gather);
    assert_int_equal(p.hops_lo, 7);
    for (int k = 0; k < 7; k++)
        assert_int_equal(p.piece_lo[k], 8);
}

/* A roll by 3 of 64 rows in 8 tiles: tile t's window starts 3 rows below
 * its shard, circularly (tile 0 takes tile 7's last 3 rows). */
static void test_circular_roll(void **state)
{
    (void)state;
    HaloDim d = {64, 8, 8, true};
    HaloWindow w[8];
    for (int t = 0; t < 8; t++) {
        w[t].tile = t;
        w[t].start = 8 * t - 3;
        w[t].lo = w[t].start;
        w[t].hi = w[t].start + 8;
    }
    HaloPlan p;
    assert_true(halo_plan(&d, w, 8, 8, false, &p));
    assert_int_equal(p.hops_lo, 1);
    assert_int_equal(p.piece_lo[0], 3);
    assert_int_equal(p.hops_hi, 0);
    assert_false(p.fill);
    assert_true(halo_needs_hop(&d, &p, &w[0], false, 1));
    /* a circular dim must divide evenly */
    HaloDim bad = {63, 8, 8, true};
    assert_false(halo_plan(&bad, w, 8, 8, false, &p));
}

/* jnp.roll by 37 of 64 rows in 8 tiles of 8: tile t reads [8t+27, 8t+35)
 * (mod 64): the last 5 rows of tile t+3 and the first 3 of tile t+4.  The
 * relay sends 8+8+8+3 = 27 rows in 4 hops; direct mode 5 + 3 = 8 rows in 2
 * permutes (hops 1 and 2 skipped), and no device reads its own shard. */
static void test_direct_roll(void **state)
{
    (void)state;
    HaloDim d = {64, 8, 8, true};
    HaloWindow w[8];
    for (int t = 0; t < 8; t++) {
        w[t].tile = t;
        w[t].start = 8 * t + 27;
        w[t].lo = w[t].start;
        w[t].hi = w[t].start + 8;
    }
    HaloPlan p;
    assert_true(halo_plan(&d, w, 8, 8, false, &p));
    assert_true(p.direct);
    assert_false(p.own);
    assert_int_equal(p.relay_rows, 27);
    assert_int_equal(p.rows_sent, 8);
    assert_int_equal(p.hops_lo, 0);
    assert_int_equal(p.hops_hi, 4);
    assert_int_equal(p.piece_hi[0], 0);
    assert_int_equal(p.piece_hi[1], 0);
    assert_int_equal(p.piece_hi[2], 5);
    assert_int_equal(p.piece_hi[3], 3);
    assert_false(halo_needs_hop(&d, &p, &w[0], true, 2));
    assert_true(halo_needs_hop(&d, &p, &w[0], true, 3));
    assert_int_equal(halo_direct_offset(&d, &p, &w[0], true, 3), 3); /* rows 27..31 of tile 3 */
    assert_int_equal(halo_direct_offset(&d, &p, &w[0], true, 4), 0); /* rows 32..34 of tile 4 */
    assert_int_equal(p.buffer, 8);
    assert_true(p.uniform);
    assert_int_equal(p.offset0, 0);
}

/* x[0:16] of 17 rows in 8 tiles of 3 (jnp.diff's lower slice), the result
 * in 8 tiles of 2: tile t reads [2t, 2t+2).  Tile 7 reads rows 14, 15,
 * 7 rows below its shard [21, 24): the relay sends 3 + 3 + 1 = 7 rows.
 * Direct: from 1 tile below at most 2 rows (tile 2 reads rows 4, 5 of
 * tile 1), from 2 below 2 (tile 5: rows 10, 11 of tile 3), from 3 below 1
 * (tile 7: row 14 of tile 4): 5 rows. */
static void test_direct_uneven_slice(void **state)
{
    (void)state;
    HaloDim d = {17, 8, 3, false};
    HaloWindow w[8];
    for (int t = 0; t < 8; t++) {
        w[t].tile = t;
        w[t].start = 2 * t;
        w[t].lo = w[t].start;
        w[t].hi = w[t].start + 2;
    }
    HaloPlan p;
    assert_true(halo_plan(&d, w, 8, 2, true, &p));
    assert_true(p.direct);
    assert_true(p.own);
    assert_int_equal(p.relay_rows, 7);
    assert_int_equal(p.rows_sent, 5);
    assert_int_equal(p.hops_lo, 3);
    assert_int_equal(p.piece_lo[0], 2);
    assert_int_equal(p.piece_lo[1], 2);
    assert_int_equal(p.piece_lo[2], 1);
    assert_int_equal(p.hops_hi, 0);
    assert_int_equal(halo_direct_offset(&d, &p, &w[2], false, 1), 1); /* rows 4, 5 = tile 1's 1, 2 */
    assert_int_equal(halo_direct_offset(&d, &p, &w[3], false, 1), 0); /* rows 6, 7 = tile 2's 0, 1 */
    assert_false(p.uniform);
}

/* ------------------------------------------------------------ brute force */

static uint64_t rng_state;
static int64_t rnd(int64_t n)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (int64_t)((rng_state >> 33) % (uint64_t)n);
}

#define POISON INT64_MIN

/* Global element at position g (circular dims wrap; others: POISON outside). */
static int64_t global_at(const HaloDim *d, int64_t g)
{
    if (d->circular)
        g = ((g % d->n) + d->n) % d->n;
    return g >= 0 && g < d->n ? 1000 + g : POISON;
}

/* Tile t's shard: its c slots, padding POISON. */
static int64_t shard_at(const HaloDim *d, int64_t t, int64_t j)
{
    int64_t g = t * d->chunk + j;
    return g < d->n ? 1000 + g : POISON;
}

static int64_t n_plans[3]; /* relay, direct, gather plans the brute force made */

static void check_exchange(const HaloDim *d, const HaloWindow *w, int64_t width, bool allow_gather)
{
    HaloPlan p;
    if (!halo_plan(d, w, d->tiles, width, allow_gather, &p))
        fail_msg("no plan for n=%lld T=%lld c=%lld", (long long)d->n, (long long)d->tiles, (long long)d->chunk);
    n_plans[p.gather ? 2 : p.direct ? 1 : 0]++;
    if (!p.gather)
        assert_true(p.rows_sent <= p.relay_rows);
    int64_t T = d->tiles, c = d->chunk;
    int64_t *buf = malloc(sizeof(int64_t) * (size_t)p.buffer);
    for (int64_t t = 0; t < T; t++) {
        int64_t k = 0;
        for (int64_t x = 0; x < p.pad_lo; x++)
            buf[k++] = POISON;
        if (p.gather) {
            for (int64_t s = 0; s < T; s++)
                for (int64_t j = 0; j < c; j++)
                    buf[k++] = shard_at(d, s, j);
        } else {
            for (int32_t hop = p.hops_lo; hop >= 1; hop--) {
                int64_t src = t - hop, piece = p.piece_lo[hop - 1];
                if (d->circular)
                    src = ((src % T) + T) % T;
                bool got = src >= 0 && halo_needs_hop(d, &p, &w[t], false, hop);
                /* relay: the last rows; direct: from the offset its receiver needs */
                int64_t from = p.direct ? halo_direct_offset(d, &p, &w[t], false, hop) : c - piece;
                if (p.direct)
                    assert_true(from >= 0 && from + piece <= c);
                for (int64_t j = from; j < from + piece; j++)
                    buf[k++] = got ? shard_at(d, src, j) : 0; /* a permute with no source: zeros */
            }
            if (p.own)
                for (int64_t j = 0; j < c; j++)
                    buf[k++] = shard_at(d, t, j);
            for (int32_t hop = 1; hop <= p.hops_hi; hop++) {
                int64_t src = t + hop, piece = p.piece_hi[hop - 1];
                if (d->circular)
                    src = ((src % T) + T) % T;
                bool got = src < T && halo_needs_hop(d, &p, &w[t], true, hop);
                int64_t from = p.direct ? halo_direct_offset(d, &p, &w[t], true, hop) : 0;
                if (p.direct)
                    assert_true(from >= 0 && from + piece <= c);
                for (int64_t j = from; j < from + piece; j++)
                    buf[k++] = got ? shard_at(d, src, j) : 0;
            }
        }
        for (int64_t x = 0; x < p.pad_hi; x++)
            buf[k++] = POISON;
        assert_int_equal(k, p.buffer);
        int64_t off = halo_offset(d, &p, &w[t]);
        assert_true(off >= 0 && off + width <= p.buffer);
        if (w[t].lo < w[t].hi)
            assert_int_equal(halo_buffer_start(d, &p, &w[t]) + off, w[t].start);
        for (int64_t g = w[t].lo; g < w[t].hi; g++) {
            int64_t want = global_at(d, g), got = buf[off + (g - w[t].start)];
            if (want == POISON) {
                assert_true(p.fill); /* masked by the caller */
                continue;
            }
            if (got != want)
                fail_msg("n=%lld T=%lld c=%lld%s tile %lld window [%lld,%lld) reads [%lld,%lld): position %lld holds "
                         "%lld, want %lld", (long long)d->n, (long long)T, (long long)c, d->circular ? " circular" : "",
                         (long long)t, (long long)w[t].start, (long long)(w[t].start + width), (long long)w[t].lo,
                         (long long)w[t].hi, (long long)g, (long long)got, (long long)want);
        }
    }
    free(buf);
}

static void test_brute_force(void **state)
{
    (void)state;
    rng_state = 12345;
    for (int it = 0; it < 20000; it++) {
        HaloDim d;
        d.tiles = 1 + rnd(8);
        d.circular = rnd(4) == 0;
        d.n = 1 + rnd(40);
        d.chunk = (d.n + d.tiles - 1) / d.tiles;
        if (d.circular)
            d.n = d.tiles * d.chunk;
        /* linear windows: start = a*t + b, width W, reads a sub-range */
        int64_t a = rnd(2 * d.chunk + 1), b = rnd(2 * d.n + 1) - d.n, width = 1 + rnd(2 * d.chunk + 4);
        HaloWindow w[8];
        for (int64_t t = 0; t < d.tiles; t++) {
            w[t].tile = t;
            w[t].start = a * t + b;
            int64_t lo = w[t].start + rnd(width), hi = lo + rnd(w[t].start + width - lo + 1);
            if (d.circular && hi - lo > d.n)
                hi = lo + d.n;
            w[t].lo = lo;
            w[t].hi = hi;
        }
        check_exchange(&d, w, width, rnd(2) == 0);
    }
    /* every mode was exercised (counts of seed 12345: 9283, 10671, 46) */
    assert_true(n_plans[0] > 1000);
    assert_true(n_plans[1] > 1000);
    assert_true(n_plans[2] > 10); /* rare: direct mode sends no more than the relay */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_padding),
        cmocka_unit_test(test_wide_halo_gathers),
        cmocka_unit_test(test_circular_roll),
        cmocka_unit_test(test_direct_roll),
        cmocka_unit_test(test_direct_uneven_slice),
        cmocka_unit_test(test_brute_force),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
