/* names.h - a set of names, for passes that must keep instruction names
 * unique in a computation they rewrite (canonicalize, partition).
 *
 * Everything (entries and the hash table) is allocated from the arena given
 * to names_init and released with it: there is nothing to free, and a set
 * must not be used after its arena is reset.  Names are kept by pointer, so
 * a name added with names_add must outlive the set.  Lookups are O(1), the
 * ".N" search of names_unique is deterministic.
 */
#ifndef SPMDC_NAMES_H
#define SPMDC_NAMES_H

#include <stdbool.h>

#include "spmdc/arena.h"

typedef struct NameSetEntry NameSetEntry;

typedef struct NameSet {
    Arena *arena;         /* entries and hash table */
    NameSetEntry *head;   /* uthash head; NULL when empty */
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
