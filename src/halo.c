/* halo.c - the geometry of a halo exchange (see halo.h). */
#include "spmdc/halo.h"

#include <string.h>

int64_t halo_floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

int64_t halo_ceil_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && a > 0) ? q + 1 : q;
}

/* The positions [*f_lo, *f_hi) window w must fetch (real data only when
 * not circular); false if none. */
static bool fetch_range(const HaloDim *d, const HaloWindow *w, int64_t *f_lo, int64_t *f_hi)
{
    int64_t lo = w->lo, hi = w->hi;
    if (!d->circular) {
        lo = lo < 0 ? 0 : lo;
        hi = hi > d->n ? d->n : hi;
    }
    *f_lo = lo;
    *f_hi = hi;
    return lo < hi;
}

/* Rows window w needs below (high = false) or above its own shard. */
static int64_t extent(const HaloDim *d, const HaloWindow *w, bool high)
{
    int64_t f_lo, f_hi;
    if (!fetch_range(d, w, &f_lo, &f_hi))
        return 0;
    int64_t e = high ? f_hi - (w->tile + 1) * d->chunk : w->tile * d->chunk - f_lo;
    return e > 0 ? e : 0;
}

static void pieces(int64_t rows, int64_t c, int32_t *hops, int64_t *piece)
{
    int32_t h = (int32_t)halo_ceil_div(rows, c);
    *hops = h;
    for (int32_t k = 0; k < h && k < HALO_MAX_HOPS; k++)
        piece[k] = rows - (int64_t)k * c < c ? rows - (int64_t)k * c : c;
}

int64_t halo_buffer_start(const HaloDim *d, const HaloPlan *p, const HaloWindow *w)
{
    if (p->gather)
        return -p->pad_lo;
    return w->tile * d->chunk - p->left - p->pad_lo;
}

int64_t halo_offset(const HaloDim *d, const HaloPlan *p, const HaloWindow *w)
{
    if (w->lo >= w->hi)
        return p->uniform ? p->offset0 : 0;
    return w->start - halo_buffer_start(d, p, w);
}

bool halo_plan(const HaloDim *d, const HaloWindow *w, int64_t n_dev, int64_t width, bool allow_gather,
               HaloPlan *out)
{
    memset(out, 0, sizeof *out);
    out->width = width;
    if (d->chunk < 1 || d->tiles < 1 || width < 0)
        return false;
    if (d->circular && d->n != d->tiles * d->chunk)
        return false;
    for (int64_t i = 0; i < n_dev; i++) {
        if (w[i].lo >= w[i].hi)
            continue;
        if (d->circular && w[i].hi - w[i].lo > d->n)
            return false;
        if (!d->circular && (w[i].lo < 0 || w[i].hi > d->n))
            out->fill = true;
        int64_t lo = extent(d, &w[i], false), hi = extent(d, &w[i], true);
        out->left = lo > out->left ? lo : out->left;
        out->right = hi > out->right ? hi : out->right;
    }
    out->need_lo = out->left;
    out->need_hi = out->right;
    int64_t c = d->chunk;
    int32_t hl = (int32_t)halo_ceil_div(out->left, c), hh = (int32_t)halo_ceil_div(out->right, c);
    int64_t gather_rows = (d->tiles - 1) * c;
    bool wide = hl > 1 || hh > 1;
    if (allow_gather && !d->circular && ((wide && gather_rows <= out->left + out->right) || hl > HALO_MAX_HOPS ||
                                         hh > HALO_MAX_HOPS)) {
        out->gather = true;
    } else if (hl > HALO_MAX_HOPS || hh > HALO_MAX_HOPS) {
        return false;
    }
    int64_t core;
    if (out->gather) {
        out->left = out->right = 0;
        out->rows_sent = gather_rows;
        core = d->tiles * c;
    } else {
        pieces(out->left, c, &out->hops_lo, out->piece_lo);
        pieces(out->right, c, &out->hops_hi, out->piece_hi);
        out->rows_sent = out->left + out->right;
        core = out->left + c + out->right;
    }
    /* pads so that every reading window lies inside the buffer */
    for (int64_t i = 0; i < n_dev; i++) {
        if (w[i].lo >= w[i].hi)
            continue;
        int64_t base = out->gather ? 0 : w[i].tile * c - out->left;
        int64_t before = base - w[i].start, after = w[i].start + width - (base + core);
        out->pad_lo = before > out->pad_lo ? before : out->pad_lo;
        out->pad_hi = after > out->pad_hi ? after : out->pad_hi;
    }
    if (out->pad_lo + core + out->pad_hi < width) /* nobody reads: any window that fits */
        out->pad_hi = width - out->pad_lo - core;
    out->buffer = out->pad_lo + core + out->pad_hi;
    out->uniform = true;
    bool first = true;
    for (int64_t i = 0; i < n_dev; i++) {
        if (w[i].lo >= w[i].hi)
            continue;
        int64_t off = w[i].start - halo_buffer_start(d, out, &w[i]);
        if (first)
            out->offset0 = off;
        else if (off != out->offset0)
            out->uniform = false;
        first = false;
    }
    return true;
}

bool halo_needs_hop(const HaloDim *d, const HaloPlan *p, const HaloWindow *w, bool high, int32_t hop)
{
    if (p->gather)
        return false;
    return extent(d, w, high) > (int64_t)(hop - 1) * d->chunk;
}
