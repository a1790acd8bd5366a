/* scan_feed.c - the scanner on a thread of its own, feeding the parser's
 * tokens through a ring of chunks (see ast.h, ScanFeed). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ast.h"
#include "hlo.tab.h"
#include "spmdc/arena.h"

int hlo_yylex(AstSemVal *lval, AstLoc *lloc, void *scanner);

/* Tokens per chunk and chunks in the ring: 8 x 8,192 x 40 bytes = 2.6 MB,
 * and beside each chunk its INST descriptors (AstHead, ast_head_size
 * bytes each) in FEED_HEAD_BYTES = 256 KiB: a chunk ends early when a
 * descriptor of the largest size might not fit.  A chunk is a few hundred
 * to a few thousand instructions, so the two threads meet (a mutex) a few
 * thousand times on a million instructions.  Waking a thread is a system
 * call of tens of microseconds on a virtual machine, so neither side is
 * woken for every chunk: the scanner, usually the faster, sleeps on a full
 * ring until the parser has emptied half of it (FEED_REFILL), and each side
 * signals only a sleeper, after unlocking (a signal under the mutex would
 * wake the sleeper into the mutex still held, and the unlock would wake it
 * a second time). */
#define FEED_CHUNK 8192
#define FEED_CHUNKS 8
#define FEED_HEAD_BYTES ((size_t)256 << 10)
#define FEED_REFILL (FEED_CHUNKS / 2) /* chunks still unread when a sleeping scanner is woken */

struct ScanFeed {
    ScanFeedReader rd;      /* the parser's side (first: ast_feed_lex reads it) */
    void *flex;             /* the flex scanner (yyscan_t) */
    ScanState *st;          /* its state */
    bool threaded;
    /* threaded: */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t room;    /* signalled when the parser releases a chunk */
    pthread_cond_t ready;   /* signalled when the scanner publishes one */
    FeedTok *ring;          /* [FEED_CHUNKS * FEED_CHUNK] */
    char *heads;            /* [FEED_CHUNKS * FEED_HEAD_BYTES]: the chunks' INST descriptors */
    uint32_t count[FEED_CHUNKS];
    uint64_t published, released; /* chunks, counted from the start (under mu) */
    bool stop;              /* the parser is done: the scanner ends (under mu) */
    bool scan_sleeps;       /* the scanner waits on room (under mu) */
    bool parse_sleeps;      /* the parser waits on ready (under mu) */
};

static void *feed_scan(void *arg)
{
    ScanFeed *f = arg;
    for (uint64_t k = 0;; k++) {
        pthread_mutex_lock(&f->mu);
        if (!f->stop && k - f->released == FEED_CHUNKS) { /* full: sleep until half is read */
            f->scan_sleeps = true;
            while (!f->stop && k - f->released > FEED_REFILL) pthread_cond_wait(&f->room, &f->mu);
            f->scan_sleeps = false;
        }
        bool stop = f->stop;
        pthread_mutex_unlock(&f->mu);
        if (stop) return NULL;
        FeedTok *c = f->ring + (size_t)(k % FEED_CHUNKS) * FEED_CHUNK;
        char *heads = f->heads + (size_t)(k % FEED_CHUNKS) * FEED_HEAD_BYTES;
        size_t used = 0;
        uint32_t n = 0;
        bool end = false;
        while (n < FEED_CHUNK && !end && used <= FEED_HEAD_BYTES - sizeof(AstHead)) {
            AstSemVal v;
            memset(&v, 0, sizeof v);
            FeedTok *t = &c[n++];
            f->st->head_at = (AstHead *)(void *)(heads + used); /* 8-byte aligned: used is kept a multiple of 8 */
            t->kind = hlo_yylex(&v, &t->loc, f->flex);
            t->tok = v.tok;
            t->mark = t->kind == TOK_NAME_PCT || t->kind == TOK_IDENT ? FEED_NAME : 0;
            if (t->kind == TOK_INST) { /* its descriptor is the chunk's next */
                t->mark = FEED_HEAD;
                used += (ast_head_size(v.tok.head) + 7) & ~(size_t)7;
            }
            end = t->kind == TOK_YYEOF;
        }
        f->st->head_at = NULL;
        pthread_mutex_lock(&f->mu);
        f->count[k % FEED_CHUNKS] = n;
        f->published = k + 1;
        bool wake = f->parse_sleeps;
        pthread_mutex_unlock(&f->mu);
        if (wake) pthread_cond_signal(&f->ready);
        if (end) return NULL;
    }
}

ScanFeed *ast_feed_start(void *flex, ScanState *st, const ParseCtx *cx, bool threaded)
{
    ScanFeed *f = calloc(1, sizeof *f);
    if (!f) spmdc_oom();
    f->flex = flex;
    f->st = st;
    f->rd.cx = cx;
    if (!threaded || !cx->strings) return f;
    f->ring = malloc(sizeof(FeedTok) * FEED_CHUNK * FEED_CHUNKS);
    f->heads = malloc(FEED_HEAD_BYTES * FEED_CHUNKS);
    if (!f->ring || !f->heads) spmdc_oom();
    /* the scanner's thread touches nothing the parser's does: strings go
     * to cx->strings (the caller's, made before), errors only mark it failed (ast_scan_error),
     * and it leaves the name-table prefetch to the parser (ast_feed_lex, FeedTok.name) */
    st->quiet = true;
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->room, NULL);
    pthread_cond_init(&f->ready, NULL);
    if (pthread_create(&f->thread, NULL, feed_scan, f) != 0) {
        /* no thread: scan on the parser's own */
        pthread_cond_destroy(&f->ready);
        pthread_cond_destroy(&f->room);
        pthread_mutex_destroy(&f->mu);
        free(f->ring);
        free(f->heads);
        f->ring = NULL;
        f->heads = NULL;
        st->quiet = false;
        return f;
    }
    f->threaded = true;
    return f;
}

void ast_feed_finish(ScanFeed *f)
{
    if (!f) return;
    if (f->threaded) {
        pthread_mutex_lock(&f->mu);
        f->stop = true;
        pthread_cond_signal(&f->room);
        pthread_mutex_unlock(&f->mu);
        pthread_join(f->thread, NULL);
        pthread_cond_destroy(&f->ready);
        pthread_cond_destroy(&f->room);
        pthread_mutex_destroy(&f->mu);
    }
    free(f->ring);
    free(f->heads);
    free(f);
}

const AstHead *ast_feed_keep_head(ScanFeedReader *r, const AstTok *t)
{
    const AstHead *h = t->head;
    AstHead *keep = &r->heads[r->n_heads++ % AST_HEAD_RING];
    memcpy(keep, h, ast_head_size(h));
    ast_prefetch_head(r->cx, t->s, keep);
    return keep;
}

/* The next chunk for the parser: releases the one it read, waits for one. */
static void feed_next_chunk(ScanFeed *f)
{
    pthread_mutex_lock(&f->mu);
    bool wake = false;
    if (f->rd.cur) {
        f->released++;
        wake = f->scan_sleeps && f->published - f->released <= FEED_REFILL;
    }
    if (f->published == f->released) {
        if (wake) { /* the scanner must run before this thread can: wake it now */
            pthread_cond_signal(&f->room);
            wake = false;
        }
        f->parse_sleeps = true;
        while (f->published == f->released) pthread_cond_wait(&f->ready, &f->mu);
        f->parse_sleeps = false;
    }
    uint32_t k = (uint32_t)(f->released % FEED_CHUNKS);
    f->rd.n = f->count[k];
    pthread_mutex_unlock(&f->mu);
    if (wake) pthread_cond_signal(&f->room);
    f->rd.cur = f->ring + (size_t)k * FEED_CHUNK;
    f->rd.pos = 0;
}

int ast_feed_lex_next(AstSemVal *lval, AstLoc *lloc, void *feed)
{
    ScanFeed *f = feed;
    if (!f->threaded) return hlo_yylex(lval, lloc, f->flex);
    /* the end is the last token of its chunk, which the scanner then leaves alone */
    const FeedTok *last = f->rd.pos ? &f->rd.cur[f->rd.pos - 1] : NULL;
    if (last && last->kind == TOK_YYEOF) {
        lval->tok = last->tok;
        *lloc = last->loc;
        return TOK_YYEOF;
    }
    feed_next_chunk(f); /* a chunk holds one token or more */
    return ast_feed_lex(lval, lloc, feed);
}
