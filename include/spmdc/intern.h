/* intern.h - a set that stores each distinct value once.
 *
 * Pointers to caller-owned items (usually in an arena), found by a 64-bit
 * hash of the item's value and an equality test: open addressing with linear
 * probing, at most half full.  A module keeps its equal attribute sets
 * (hlo_set_attrs) and bind its equal bound shardings through one.  The set
 * owns only its two arrays (intern_free); a zeroed InternSet is empty.
 * Lookups and adds are O(1) expected; growing doubles the capacity.
 */
#ifndef SPMDC_INTERN_H
#define SPMDC_INTERN_H

#include <stdbool.h>
#include <stdint.h>

typedef struct InternSet {
    void **slot;    /* cap entries, NULL = free */
    uint64_t *hash; /* the hash of each slot's item */
    uint32_t cap, n;
} InternSet;

/* Whether a stored item and a candidate have the same value. */
typedef bool (*InternSame)(const void *stored, const void *item);

/* The stored item equal to item (whose hash is h), or NULL.  Grows the set
 * first so that one more item fits; *at receives the slot intern_add fills
 * when nothing equal is stored. */
void *intern_find(InternSet *s, uint64_t h, const void *item, InternSame same, uint32_t *at);
/* Stores item (hash h) in slot at, as returned by the intern_find that found
 * no equal item, with no other change to the set in between. */
void intern_add(InternSet *s, uint32_t at, uint64_t h, void *item);
/* Frees the set's arrays (not the items); the set is empty again. */
void intern_free(InternSet *s);

#endif
