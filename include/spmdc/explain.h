/* explain.h - why each collective is there: `spmdc compile --explain`.
 *
 * An Explain is an optional sink the partitioner writes to while it runs
 * (CommReport.explain; NULL costs one pointer test per decision):
 *  - every op partitioned from its rule (partition_rule.c) leaves a
 *    DECISION: the candidate factor shardings it weighed, as the states its
 *    operands would be brought to and its results would get, with the
 *    bytes per device each costs (the partitioner's own figure); the
 *    cheapest EXPLAIN_MAX_ALTS are kept in the partitioner's order (bytes,
 *    then local work, then enumeration order), so the first is the one
 *    chosen;
 *  - every reshard that emits collectives leaves a LINK from its report rows
 *    to the value resharded, its state before and after, the instruction
 *    that needed the new state and, for a pending sum, the instruction that
 *    made it.
 * After partitioning, explain_print_text / explain_print_json give for each
 * collective the chain from it to the annotations that forced it (the
 * value, the op that made it partial, the consumer, each with its sharding
 * and where that came from, ending at the annotated instructions) and the
 * alternatives weighed by the ops on that chain.
 */
#ifndef SPMDC_EXPLAIN_H
#define SPMDC_EXPLAIN_H

#include <stdbool.h>
#include <stdint.h>

#include "spmdc/hlo.h"
#include "spmdc/report.h"
#include "spmdc/strbuf.h"
#include "spmdc/tiling.h"

/* Candidates kept per decision (the cheapest). */
#define EXPLAIN_MAX_ALTS 6
/* Tensors of a candidate kept (operands then results). */
#define EXPLAIN_MAX_TENSORS 8

typedef struct ExplainAlt {
    Tiling t[EXPLAIN_MAX_TENSORS]; /* operands' wanted states, then the results' states */
    int64_t bytes;                 /* bytes per device the partitioner counted for it */
    double work;                   /* local work (its tie break) */
    int64_t order;                 /* position in the enumeration */
} ExplainAlt;

typedef struct ExplainDecision {
    int32_t comp, inst;            /* input computation and instruction */
    int32_t out_comp;              /* the output computation it was partitioned into */
    int32_t n_in, n_out;           /* tensors kept: operands, results (at most EXPLAIN_MAX_TENSORS) */
    int32_t slot[EXPLAIN_MAX_TENSORS]; /* operand slot of tensor k < n_in; result leaf of the others */
    int64_t n_weighed;             /* candidates costed */
    int32_t n_alts, cap_alts;      /* kept candidates; room in alts (grown to at most
                                      EXPLAIN_MAX_ALTS as they come) */
    ExplainAlt *alts;              /* the n_alts cheapest, in the partitioner's order (heap) */
} ExplainDecision;

typedef struct ExplainLink {
    int32_t first, end;            /* report records [first, end) this reshard emitted */
    int32_t comp, out_comp;
    int32_t value;                 /* input instruction resharded */
    int32_t consumer;              /* the instruction that needed the new state (-1: none) */
    /* 1 + k when the value becomes element k of consumer's tuple result
     * (consumer is a tuple): the chain then shows that element's sharding,
     * whose leaves start at consumer_leaf; 0: the consumer as a whole. */
    int32_t consumer_elem, consumer_leaf;
    int32_t origin;                /* the instruction that made the value a pending sum (-1: none) */
    Tiling from, to;
} ExplainLink;

typedef struct Explain {
    int32_t n_dec, cap_dec;
    ExplainDecision *dec;
    int32_t n_links, cap_links;
    ExplainLink *links;
    struct ExplainIndex *index;    /* (out_comp, inst) -> decision (uthash) */
    int32_t current;               /* the decision begun last (-1: none) */
    int64_t next_order;            /* enumeration position of its next candidate */
} Explain;

void explain_init(Explain *e);
void explain_free(Explain *e);

/* ---- the partitioner's side */

/* Starts (or restarts) the decision of instruction inst of input
 * computation comp partitioned into out_comp; n_in operand tensors at
 * slots[0..n_in), n_out result leaves at leaves[0..n_out). */
void explain_begin(Explain *e, int32_t comp, int32_t out_comp, int32_t inst, int32_t n_in, const int32_t *slots,
                   int32_t n_out, const int32_t *leaves);
/* One costed candidate of the decision begun last: wants[0..n_in),
 * results[0..n_out), its bytes per device and local work. */
void explain_candidate(Explain *e, const Tiling *wants, const Tiling *results, int64_t bytes, double work);
/* The report rows [first, end) came from resharding value (of comp, in
 * out_comp) from `from` to `to` for consumer (-1: none), the value being a
 * pending sum made by origin (-1: none).  consumer_elem, consumer_leaf: as
 * ExplainLink's. */
void explain_link(Explain *e, int32_t first, int32_t end, int32_t comp, int32_t out_comp, int32_t value,
                  int32_t consumer, int32_t consumer_elem, int32_t consumer_leaf, int32_t origin, const Tiling *from,
                  const Tiling *to);

/* ---- reading */

/* The decision of (out_comp, inst), or NULL. */
const ExplainDecision *explain_decision(const Explain *e, int32_t out_comp, int32_t inst);
/* The link of report record r, or NULL. */
const ExplainLink *explain_link_of(const Explain *e, int32_t r);

/* Appends, for each collective of rep (partitioned from `in` on rep's
 * mesh), its chain and the alternatives weighed (the text form after the
 * report, docs/report.md "Explain"). */
void explain_print_text(StrBuf *b, const Explain *e, const CommReport *rep, const HloModule *in);
/* The report's JSON (report_print_json) with an `explain` object added to
 * every collective that has a link. */
void explain_print_json(StrBuf *b, const Explain *e, const CommReport *rep, const HloModule *in);

#endif
