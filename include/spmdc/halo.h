/* halo.h - the geometry of a halo exchange: every device reads a window of
 * one split dimension that reaches into its neighbours' shards.
 *
 * One dimension of a value is split into T tiles of stride c: tile t holds
 * the elements [t*c, min((t+1)*c, n)) of the n real ones, the rest of its c
 * slots is padding (tiling.h's ceil geometry has c = ceil(n/T); a reshard
 * may pass another stride for a value it just gathered).  Every device
 * wants a window of W consecutive positions starting at its own `start`
 * (global coordinates, possibly < 0 or >= n: positions outside [0, n) are
 * the op's padding), of which it actually reads [lo, hi) (the positions its
 * real results depend on; the rest of the window may hold anything).
 *
 * The exchange (the method of XLA's SPMD partitioner, ExchangeHalo):
 *  - hop k on the low side: every tile t sends its last piece_lo[k-1] rows
 *    to tile t+k; hop k on the high side: its first piece_hi[k-1] rows to
 *    tile t-k (one collective-permute per hop and side; a piece is a whole
 *    shard for all hops but the last, so a halo wider than one shard takes
 *    several hops);
 *  - each device concatenates [pad_lo | low pieces, farthest first | its
 *    shard | high pieces, nearest first | pad_hi]: the buffer then holds the
 *    positions [t*c - left - pad_lo, (t+1)*c + right + pad_hi) and its
 *    window starts at buffer offset start - (t*c - left - pad_lo);
 *  - positions outside [0, n) that the device reads are masked with the
 *    op's padding value (`fill`).
 * Direct mode (chosen when it sends fewer rows than the relay above: a halo
 * wider than one shard whose devices need only part of the shards it
 * crosses, such as a roll by several shards or a slice far from the
 * result's shard): hop k carries, straight from tile t-k (t+k), only the
 * rows of that shard some device reads, piece_lo[k-1] (piece_hi[k-1]) rows
 * taken at a per-sender offset (halo_direct_offset); hops no device needs
 * are skipped (piece 0), and the device's own shard is in the buffer only
 * when some device reads from it (`own`).  The buffer is [pad_lo | the
 * low pieces that are not 0, farthest first | own shard | the high pieces,
 * nearest first | pad_hi]: the pieces one device reads are adjacent in
 * it, so its window is one slice of the buffer (halo_offset).
 * Alternatively (gather mode, chosen when a halo is wider than one shard
 * and an all-gather of the dimension sends no more bytes) the dimension is
 * all-gathered: the buffer holds [-pad_lo, T*c + pad_hi).
 * With `circular` the positions are taken modulo n (n == T*c): tile 0's low
 * neighbour is tile T-1 (a roll).
 *
 * Pure integer functions (no IR): the partitioner's lowering and its cost
 * model both use them, so what is reported is what is emitted.
 */
#ifndef SPMDC_HALO_H
#define SPMDC_HALO_H

#include <stdbool.h>
#include <stdint.h>

/* Hops a multi-hop exchange may take per side; wider halos use the gather
 * mode. */
#define HALO_MAX_HOPS 64

/* The split dimension the windows read. */
typedef struct HaloDim {
    int64_t n;        /* real elements (global) */
    int64_t tiles;    /* T >= 1 */
    int64_t chunk;    /* c >= 1: tile t holds [t*c, min((t+1)*c, n)) */
    bool circular;    /* positions modulo n; requires n == tiles * chunk */
} HaloDim;

/* One device's window. */
typedef struct HaloWindow {
    int64_t tile;     /* the device's tile index along the dimension, 0..T-1 */
    int64_t start;    /* global position of window element 0 */
    int64_t lo, hi;   /* global positions [lo, hi) the device reads (lo >= hi: none; then start
                         is ignored); start <= lo and hi <= start + width */
} HaloWindow;

typedef struct HaloPlan {
    int64_t width;                   /* W: window length */
    bool gather;                     /* the dimension is all-gathered instead of exchanged */
    bool direct;                     /* direct mode: pieces straight from the shards that hold them */
    bool own;                        /* the buffer holds the device's own shard (false only when direct
                                        and no device reads its own shard) */
    int64_t need_lo, need_hi;        /* rows some device reads below / above its own shard */
    int64_t left, right;             /* rows taken from lower / higher tiles: the sums of the pieces
                                        (0 when gathering) */
    int32_t hops_lo, hops_hi;        /* the farthest hop per side (collective-permutes per side, less the
                                        skipped ones when direct) */
    int64_t piece_lo[HALO_MAX_HOPS]; /* rows of hop k+1 on the low side (sent to tile t+k+1); 0: skipped */
    int64_t piece_hi[HALO_MAX_HOPS]; /* rows of hop k+1 on the high side (sent to tile t-k-1); 0: skipped */
    int64_t relay_rows;              /* rows the relay (hop by hop, whole shards) would send */
    int64_t pad_lo, pad_hi;          /* positions added before / after the buffer */
    int64_t buffer;                  /* rows of the assembled buffer */
    bool fill;                       /* some device reads a position outside [0, n): mask */
    bool uniform;                    /* every window starts at the same buffer offset */
    int64_t offset0;                 /* that offset when uniform */
    int64_t rows_sent;               /* rows a device sends: sum of the pieces, or (T-1)*c when
                                        gathering */
} HaloPlan;

/* Plans the exchange of n_dev windows of width `width` over d: the relay,
 * or direct mode when that sends fewer rows.  With allow_gather, a halo
 * wider than one shard is all-gathered when that sends no more rows ((T-1)*c
 * against the pieces' sum; ties go to the gather, one collective).  False when the windows cannot be served: a circular
 * dimension that is not evenly split or windows wider than it, or more than
 * HALO_MAX_HOPS hops on a side where gathering is not allowed.  Linear in
 * n_dev. */
bool halo_plan(const HaloDim *d, const HaloWindow *w, int64_t n_dev, int64_t width, bool allow_gather,
               HaloPlan *out);
/* Buffer offset of window w (in [0, buffer - width]). */
int64_t halo_offset(const HaloDim *d, const HaloPlan *p, const HaloWindow *w);
/* Global position of buffer row 0 for window w's device (positions wrap
 * modulo n when circular). */
int64_t halo_buffer_start(const HaloDim *d, const HaloPlan *p, const HaloWindow *w);
/* Whether window w's device needs hop `hop` (1-based) of side `high`
 * (false: the low side). */
bool halo_needs_hop(const HaloDim *d, const HaloPlan *p, const HaloWindow *w, bool high, int32_t hop);
/* Direct mode: the first row (local to the sender's shard, in [0, c -
 * piece]) of the piece that the device of window w receives by hop `hop`
 * of side `high`; 0 when it does not need that hop. */
int64_t halo_direct_offset(const HaloDim *d, const HaloPlan *p, const HaloWindow *w, bool high, int32_t hop);

/* floor(a / b) and ceil(a / b) for b > 0 and any sign of a. */
int64_t halo_floor_div(int64_t a, int64_t b);
int64_t halo_ceil_div(int64_t a, int64_t b);

#endif
