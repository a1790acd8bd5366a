/* names.h - a set of names, for passes that must keep instruction names
 * unique in a computation they rewrite (canonicalize, partition).
 *
 * Everything (the hash table) is allocated from the arena given to
 * names_init and released with it: there is nothing to free, and a set must
 * not be used after its arena is reset.  Names are kept by pointer, so a
 * name added with names_add must outlive the set.  Lookups and inserts are
 * one probe sequence each, O(1) expected; the ".N" search of names_unique
 * is deterministic and resumes where the last search for the same name
 * ended (amortized O(1) per name).
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

/* Linear probing over a flat slot array at most 3/4 full (16 bytes a
 * slot). */
typedef struct NameSet {
    Arena *arena;         /* the slots */
    NameSlot *slot;       /* [cap] */
    uint32_t cap;         /* a power of two, or 0 */
    uint32_t n;           /* names in the set */
    /* names_unique's ".N" search: per base name that needed a suffix (its
     * index in bases), the N to try first (the set only grows, so every
     * smaller N stays taken). */
    struct NameSet *bases;  /* or NULL */
    long long *next_suffix; /* [cap_suffix] */
    uint32_t cap_suffix;
} NameSet;

/* An empty set whose storage comes from arena. */
void names_init(NameSet *s, Arena *arena);
/* Makes room for n names in all without growing the table again (a caller
 * that knows how many names it adds saves the rehashes). */
void names_reserve(NameSet *s, uint32_t n);
/* Adds name (NUL-terminated, kept by pointer); a no-op if it is present. */
void names_add(NameSet *s, const char *name);
bool names_contains(const NameSet *s, const char *name);
/* The same in two halves, for a caller that adds many names and hides the
 * table's cache misses: names_hash (the name's hash) and names_prefetch a
 * few names ahead, names_add_hashed (h = names_hash(name)) when it gets
 * there. */
uint32_t names_hash(const char *name);
void names_prefetch(const NameSet *s, uint32_t h);
void names_add_hashed(NameSet *s, const char *name, uint32_t h);
/* name if it is not in the set, else "name.N" with the smallest N >= 1 that
 * is not; the result is a new string in out (an arena that lives at least
 * as long as the set) and is added to the set. */
const char *names_unique(NameSet *s, const char *name, Arena *out);

#endif
