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
 * to a few thousand instructions, so the two threads meet (a mutex and
 * at most one wake-up each) a few thousand times on a million instructions. */
#define FEED_CHUNK 8192
#define FEED_CHUNKS 8
#define FEED_HEAD_BYTES ((size_t)256 << 10)

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
};

static void *feed_scan(void *arg)
{
    ScanFeed *f = arg;
    for (uint64_t k = 0;; k++) {
        pthread_mutex_lock(&f->mu);
        while (!f->stop && k - f->released == FEED_CHUNKS) pthread_cond_wait(&f->room, &f->mu);
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
        pthread_cond_signal(&f->ready);
        pthread_mutex_unlock(&f->mu);
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
    if (f->rd.cur) {
        f->released++;
        pthread_cond_signal(&f->room);
    }
    while (f->published == f->released) pthread_cond_wait(&f->ready, &f->mu);
    uint32_t k = (uint32_t)(f->released % FEED_CHUNKS);
    f->rd.n = f->count[k];
    pthread_mutex_unlock(&f->mu);
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
