/* names.c - NameSet (names.h): a uthash set of C strings whose entries and
 * bucket tables live in the set's arena.
 *
 * uthash_malloc is pointed at the arena and uthash_free is a no-op, so a set
 * needs no destructor: tables outgrown by an expansion stay in the arena
 * until it is reset or destroyed (at most about twice the final table).
 * names_unique tries "name", then "name.1", "name.2", ... in that order, so
 * the names it returns depend only on what was added before.
 */
#include "spmdc/names.h"

#include <stdio.h>
#include <string.h>

#define uthash_malloc(sz) arena_alloc(hash_arena, (sz), 16)
#define uthash_free(ptr, sz) ((void)(ptr), (void)(sz))
#include <uthash.h>

struct NameSetEntry {
    const char *name;
    UT_hash_handle hh;
};

void names_init(NameSet *s, Arena *arena)
{
    s->arena = arena;
    s->head = NULL;
}

bool names_contains(const NameSet *s, const char *name)
{
    NameSetEntry *e = NULL;
    HASH_FIND_STR(s->head, name, e);
    return e != NULL;
}

void names_add(NameSet *s, const char *name)
{
    if (names_contains(s, name)) return;
    Arena *hash_arena = s->arena;
    NameSetEntry *e = ARENA_NEW(hash_arena, NameSetEntry);
    e->name = name;
    HASH_ADD_KEYPTR(hh, s->head, e->name, strlen(e->name), e);
}

const char *names_unique(NameSet *s, const char *name, Arena *out)
{
    char *r;
    if (!names_contains(s, name)) {
        r = arena_strdup(out, name);
    } else {
        size_t n = strlen(name) + 24; /* '.', 20 digits, NUL */
        r = arena_alloc(out, n, 1);
        for (long long k = 1;; k++) {
            snprintf(r, n, "%s.%lld", name, k);
            if (!names_contains(s, r)) break;
        }
    }
    names_add(s, r);
    return r;
}
