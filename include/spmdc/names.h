/* names.h - a set of names, for passes that must keep instruction names
 * unique in a computation they rewrite (canonicalize, partition).
 *
 * Everything (entries and the hash table) is allocated from the arena given
 * to names_init and released with it: there is nothing to free, and a set
 * must not be used after its arena is reset.  Names are kept by pointer, so
 * a name added with names_add must outlive the set.  Lookups are O(1), the
 * ".N" search of names_unique is deterministic and resumes where the last
 * search for the same name ended (amortized O(1) per name).
 */
#ifndef SPMDC_NAMES_H
#define SPMDC_NAMES_H

#include <stdbool.h>
#include <stdint.h>

#include "spmdc/arena.h"

/* Open addressing over a flat slot array at most half full; a slot holds a
 * name's 32-bit hash and its index in `names` (so a probe compares hashes
 * without touching the strings). */
typedef struct NameSet {
    Arena *arena;         /* slots and the name array */
    uint64_t *slot;       /* [cap]: hash << 32 | (index + 1); 0 = free */
    uint32_t cap;         /* a power of two, or 0 */
    uint32_t n;
    const char **names;   /* [cap_names]: the names, in the order added */
    uint32_t cap_names;
    /* names_unique's ".N" search: per base name that needed a suffix, the
     * N to try first (the set only grows, so every smaller N stays taken). */
    struct NameSet *bases;  /* or NULL */
    long long *next_suffix; /* [cap_suffix], indexed like bases->names */
    uint32_t cap_suffix;
} NameSet;

/* An empty set whose storage comes from arena. */
void names_init(NameSet *s, Arena *arena);
/* Adds name (NUL-terminated, kept by pointer); a no-op if it is present. */
void names_add(NameSet *s, const char *name);
bool names_contains(const NameSet *s, const char *name);
/* name if it is not in the set, else "name.N" with the smallest N >= 1 that
 * is not; the result is a new string in out (an arena that lives at least
 * as long as the set) and is added to the set. */
const char *names_unique(NameSet *s, const char *name, Arena *out);

#endif
