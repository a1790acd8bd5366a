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

/* The rows [*a, *b) of source tile s (unwrapped: circular positions are not
 * reduced modulo n) that window w fetches, local to that shard; false if
 * none. */
static bool segment(const HaloDim *d, const HaloWindow *w, int64_t s, int64_t *a, int64_t *b)
{
    int64_t f_lo, f_hi, c = d->chunk;
    if (!fetch_range(d, w, &f_lo, &f_hi))
        return false;
    int64_t lo = f_lo - s * c, hi = f_hi - s * c;
    *a = lo > 0 ? lo : 0;
    *b = hi < c ? hi : c;
    return *a < *b;
}

/* Direct mode: the buffer row (pad_lo not counted) of position w->start for
 * a window that fetches something: its lowest piece holds its first
 * fetched row, and the pieces it reads are adjacent. */
static int64_t direct_start(const HaloDim *d, const HaloPlan *p, const HaloWindow *w)
{
    int64_t c = d->chunk, t = w->tile, pos = 0, a, b;
    for (int32_t k = p->hops_lo; k >= 1; k--) {
        int64_t piece = p->piece_lo[k - 1];
        if (!piece)
            continue;
        if (segment(d, w, t - k, &a, &b))
            return pos + w->start - ((t - k) * c + (a < c - piece ? a : c - piece));
        pos += piece;
    }
    if (p->own) {
        if (segment(d, w, t, &a, &b))
            return pos + w->start - t * c;
        pos += c;
    }
    for (int32_t k = 1; k <= p->hops_hi; k++) {
        int64_t piece = p->piece_hi[k - 1];
        if (!piece)
            continue;
        if (segment(d, w, t + k, &a, &b))
            return pos + w->start - ((t + k) * c + (a < c - piece ? a : c - piece));
        pos += piece;
    }
    return 0;
}

static bool fetches(const HaloDim *d, const HaloWindow *w)
{
    int64_t f_lo, f_hi;
    return w->lo < w->hi && fetch_range(d, w, &f_lo, &f_hi);
}

int64_t halo_buffer_start(const HaloDim *d, const HaloPlan *p, const HaloWindow *w)
{
    if (p->gather)
        return -p->pad_lo;
    if (p->direct)
        return w->start - halo_offset(d, p, w);
    return w->tile * d->chunk - p->left - p->pad_lo;
}

int64_t halo_offset(const HaloDim *d, const HaloPlan *p, const HaloWindow *w)
{
    if (p->direct)
        return fetches(d, w) ? p->pad_lo + direct_start(d, p, w) : p->offset0;
    if (w->lo >= w->hi)
        return p->uniform ? p->offset0 : 0;
    return w->start - halo_buffer_start(d, p, w);
}

/* Direct mode's pieces (the most rows any device fetches from the tile
 * hop k below / above it) into p; returns their sum. */
static int64_t direct_pieces(const HaloDim *d, const HaloWindow *w, int64_t n_dev, int32_t hl, int32_t hh,
                             HaloPlan *p)
{
    int64_t a, b, sum = 0;
    p->own = false;
    for (int32_t k = 0; k < hl; k++)
        p->piece_lo[k] = 0;
    for (int32_t k = 0; k < hh; k++)
        p->piece_hi[k] = 0;
    for (int64_t i = 0; i < n_dev; i++) {
        if (w[i].lo >= w[i].hi)
            continue;
        if (segment(d, &w[i], w[i].tile, &a, &b))
            p->own = true;
        for (int32_t k = 1; k <= hl; k++)
            if (segment(d, &w[i], w[i].tile - k, &a, &b) && b - a > p->piece_lo[k - 1])
                p->piece_lo[k - 1] = b - a;
        for (int32_t k = 1; k <= hh; k++)
            if (segment(d, &w[i], w[i].tile + k, &a, &b) && b - a > p->piece_hi[k - 1])
                p->piece_hi[k - 1] = b - a;
    }
    for (int32_t k = 0; k < hl; k++)
        sum += p->piece_lo[k];
    for (int32_t k = 0; k < hh; k++)
        sum += p->piece_hi[k];
    return sum;
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
    out->relay_rows = out->left + out->right;
    int64_t c = d->chunk;
    int32_t hl = (int32_t)halo_ceil_div(out->left, c), hh = (int32_t)halo_ceil_div(out->right, c);
    int64_t gather_rows = (d->tiles - 1) * c, exchange_rows = out->relay_rows;
    bool wide = hl > 1 || hh > 1, too_far = hl > HALO_MAX_HOPS || hh > HALO_MAX_HOPS;
    if (!too_far) {
        int64_t direct_rows = direct_pieces(d, w, n_dev, hl, hh, out);
        out->direct = direct_rows < out->relay_rows;
        exchange_rows = out->direct ? direct_rows : exchange_rows;
    }
    if (allow_gather && !d->circular && ((wide && gather_rows <= exchange_rows) || too_far)) {
        out->gather = true;
        out->direct = false;
    } else if (too_far) {
        return false;
    }
    int64_t core;
    if (out->gather) {
        out->left = out->right = 0;
        out->rows_sent = gather_rows;
        core = d->tiles * c;
    } else if (out->direct) {
        out->hops_lo = hl;
        out->hops_hi = hh;
        out->left = out->right = 0;
        for (int32_t k = 0; k < hl; k++)
            out->left += out->piece_lo[k];
        for (int32_t k = 0; k < hh; k++)
            out->right += out->piece_hi[k];
        out->rows_sent = exchange_rows;
        core = out->left + (out->own ? c : 0) + out->right;
    } else {
        out->own = true;
        pieces(out->left, c, &out->hops_lo, out->piece_lo);
        pieces(out->right, c, &out->hops_hi, out->piece_hi);
        out->rows_sent = out->left + out->right;
        core = out->left + c + out->right;
    }
    /* pads so that every reading window lies inside the buffer */
    for (int64_t i = 0; i < n_dev; i++) {
        if (w[i].lo >= w[i].hi || (out->direct && !fetches(d, &w[i])))
            continue;
        int64_t first = out->direct ? direct_start(d, out, &w[i]) : w[i].start - (out->gather ? 0 : w[i].tile * c - out->left);
        int64_t before = -first, after = first + width - core;
        out->pad_lo = before > out->pad_lo ? before : out->pad_lo;
        out->pad_hi = after > out->pad_hi ? after : out->pad_hi;
    }
    if (out->pad_lo + core + out->pad_hi < width) /* nobody reads: any window that fits */
        out->pad_hi = width - out->pad_lo - core;
    out->buffer = out->pad_lo + core + out->pad_hi;
    out->uniform = true;
    bool first = true;
    for (int64_t i = 0; i < n_dev; i++) {
        if (w[i].lo >= w[i].hi || (out->direct && !fetches(d, &w[i])))
            continue;
        int64_t off = out->direct ? out->pad_lo + direct_start(d, out, &w[i])
                                  : w[i].start - halo_buffer_start(d, out, &w[i]);
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
    if (p->direct) {
        int64_t a, b;
        int64_t piece = high ? p->piece_hi[hop - 1] : p->piece_lo[hop - 1];
        return piece > 0 && w->lo < w->hi && segment(d, w, high ? w->tile + hop : w->tile - hop, &a, &b);
    }
    return extent(d, w, high) > (int64_t)(hop - 1) * d->chunk;
}

int64_t halo_direct_offset(const HaloDim *d, const HaloPlan *p, const HaloWindow *w, bool high, int32_t hop)
{
    int64_t a = 0, b = 0, c = d->chunk;
    if (!halo_needs_hop(d, p, w, high, hop))
        return 0;
    int64_t piece = high ? p->piece_hi[hop - 1] : p->piece_lo[hop - 1];
    segment(d, w, high ? w->tile + hop : w->tile - hop, &a, &b);
    return a < c - piece ? a : c - piece;
}
