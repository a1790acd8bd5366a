/* names.h - a set of names, for passes that must keep instruction names
 * unique in a computation they rewrite (canonicalize, partition).
 *
 * Everything (the hash table) is allocated from the arena given to
 * names_init and released with it: there is nothing to free, and a set must
 * not be used after its arena is reset.  Names are kept by pointer, so a
 * name added with names_add must outlive the set.  Lookups and inserts are
 * one probe sequence each, O(1) expected (over a NameBase, one more in its
 * small prefix table); the ".N" search of names_unique is deterministic and
 * resumes where the last search for the same name ended (amortized O(1) per
 * name).
 */
#ifndef SPMDC_NAMES_H
#define SPMDC_NAMES_H

#include <stdbool.h>
#include <stdint.h>

#include "spmdc/arena.h"

/* One slot of the open-addressing table: the name (NULL = free), its 32-bit
 * hash (a probe compares hashes before touching the strings) and the order
 * it was added in (0, 1, ...). */
typedef struct NameSlot {
    const char *name;
    uint32_t hash;
    uint32_t index;
} NameSlot;

struct NameBase;

/* Linear probing over a flat slot array at most 3/4 full (16 bytes a
 * slot).  A set over a base (names_set_base) holds the base's names as
 * well as the ones added to it; the slots hold only the added ones. */
typedef struct NameSet {
    Arena *arena;         /* the slots */
    struct NameBase *base; /* or NULL */
    NameSlot *slot;       /* [cap] */
    uint32_t cap;         /* a power of two, or 0 */
    uint32_t n;           /* names in its own slots */
    /* names_unique's ".N" search: per base name that needed a suffix (its
     * index in bases), the N to try first (the set only grows, so every
     * smaller N stays taken). */
    struct NameSet *bases;  /* or NULL */
    long long *next_suffix; /* [cap_suffix] */
    uint32_t cap_suffix;
} NameSet;

/* An empty set whose storage comes from arena. */
void names_init(NameSet *s, Arena *arena);

/* A fixed set of names (the instruction names of one input computation, say)
 * read through name_at(ctx, 0..n-1), kept so that a set over it answers
 * most lookups from small tables.  A lookup of a name with a '.' that is
 * not among the base's names is answered by the table of the texts before
 * the last '.' of the base's names ("h.3" -> "h"): derived names such as
 * "y.7.partial" miss it at once, and it holds one entry per distinct
 * prefix (a handful for XLA's "op.N" names).  Names without a '.' have a
 * table of their own.  The table of every name is made only when a lookup
 * needs it (its prefix is one of the base's).  The names must outlive the
 * base; name_at is called again for that late table, from whichever
 * thread makes the lookup. */
typedef struct NameBase {
    NameSet undotted;      /* the names without a '.' */
    NameSet prefixes;      /* copies of the text before the last '.' */
    NameSet whole;         /* every name, once built (whole_built) */
    bool whole_built;
    const char *(*name_at)(const void *ctx, uint32_t i);
    const void *ctx;
    uint32_t n;
} NameBase;

/* Fills b with the n names name_at(ctx, i); its tables and the copied
 * prefixes come from arena. */
void names_base_init(NameBase *b, Arena *arena, uint32_t n, const char *(*name_at)(const void *ctx, uint32_t i),
                     const void *ctx);
/* Puts s over base (which must outlive it): s holds base's names as well as
 * the ones in its own slots, which stay; names added later go into its own
 * slots. */
void names_set_base(NameSet *s, NameBase *base);
/* Makes room for n names in all without growing the table again (a caller
 * that knows how many names it adds saves the rehashes). */
void names_reserve(NameSet *s, uint32_t n);
/* Adds name (NUL-terminated, kept by pointer); a no-op if it is present. */
void names_add(NameSet *s, const char *name);
bool names_contains(const NameSet *s, const char *name);
/* name if it is not in the set (or its base), else "name.N" with the
 * smallest N >= 1 that is not; the result is a new string in out (an arena
 * that lives at least as long as the set) and is added to the set. */
const char *names_unique(NameSet *s, const char *name, Arena *out);

#endif
