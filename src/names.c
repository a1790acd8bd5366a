/* names.c - NameSet (names.h): an open-addressing set of C strings whose
 * slots and name array live in the set's arena.
 *
 * Nothing is freed: slot arrays outgrown by a rehash stay in the arena until
 * it is reset or destroyed (at most about the final table again).
 * names_unique tries "name", then "name.1", "name.2", ... in that order, so
 * the names it returns depend only on what was added before; the ".N" search
 * resumes after the N it last returned for the same name (every smaller N
 * is still taken: the set only grows).
 */
#include "spmdc/names.h"

#include <stdio.h>
#include <string.h>

/* FNV-1a, 32 bits, and the length. */
static uint32_t hash_len(const char *s, size_t *len)
{
    uint32_t h = 2166136261u;
    const char *p = s;
    for (; *p; p++) h = (h ^ (unsigned char)*p) * 16777619u;
    *len = (size_t)(p - s);
    return h;
}

void names_init(NameSet *s, Arena *arena)
{
    memset(s, 0, sizeof *s);
    s->arena = arena;
}

/* The index of name in s->names, or -1. */
static int64_t find_index(const NameSet *s, const char *name, uint32_t h, size_t len)
{
    if (!s->cap) return -1;
    uint32_t mask = s->cap - 1;
    for (uint32_t i = h & mask;; i = (i + 1) & mask) {
        uint64_t v = s->slot[i];
        if (!v) return -1;
        if ((uint32_t)(v >> 32) == h) {
            const char *o = s->names[(uint32_t)v - 1];
            if (strncmp(o, name, len) == 0 && o[len] == 0) return (int64_t)(uint32_t)v - 1;
        }
    }
}

static bool find(const NameSet *s, const char *name, uint32_t h, size_t len)
{
    return find_index(s, name, h, len) >= 0;
}

static void put_slot(NameSet *s, uint32_t h, uint32_t k)
{
    uint32_t mask = s->cap - 1, i = h & mask;
    while (s->slot[i]) i = (i + 1) & mask;
    s->slot[i] = (uint64_t)h << 32 | (k + 1);
}

bool names_contains(const NameSet *s, const char *name)
{
    size_t len;
    uint32_t h = hash_len(name, &len);
    return find(s, name, h, len);
}

void names_add(NameSet *s, const char *name)
{
    size_t len;
    uint32_t h = hash_len(name, &len);
    if (find(s, name, h, len)) return;
    if (s->n == s->cap_names) {
        uint32_t cap = s->cap_names ? s->cap_names * 2 : 64;
        s->names = arena_realloc(s->arena, s->names, sizeof(char *) * s->cap_names, sizeof(char *) * cap,
                                 _Alignof(const char *));
        s->cap_names = cap;
    }
    if (2 * (s->n + 1) > s->cap) { /* rehash into twice the slots */
        uint32_t cap = s->cap ? s->cap * 2 : 128;
        s->slot = ARENA_ARRAY(s->arena, uint64_t, cap);
        s->cap = cap;
        for (uint32_t k = 0; k < s->n; k++) {
            size_t l;
            put_slot(s, hash_len(s->names[k], &l), k);
        }
    }
    s->names[s->n] = name;
    put_slot(s, h, s->n);
    s->n++;
}

const char *names_unique(NameSet *s, const char *name, Arena *out)
{
    char *r;
    if (!names_contains(s, name)) {
        r = arena_strdup(out, name);
    } else {
        size_t len;
        uint32_t h = hash_len(name, &len);
        if (!s->bases) {
            s->bases = ARENA_NEW(s->arena, NameSet);
            names_init(s->bases, s->arena);
        }
        int64_t b = find_index(s->bases, name, h, len);
        if (b < 0) {
            names_add(s->bases, arena_strndup(s->arena, name, len));
            b = (int64_t)s->bases->n - 1;
            if (s->bases->n > s->cap_suffix) {
                uint32_t cap = s->cap_suffix ? s->cap_suffix * 2 : 16;
                s->next_suffix = arena_realloc(s->arena, s->next_suffix, sizeof(long long) * s->cap_suffix,
                                               sizeof(long long) * cap, _Alignof(long long));
                s->cap_suffix = cap;
            }
            s->next_suffix[b] = 1;
        }
        size_t n = len + 24; /* '.', 20 digits, NUL */
        r = arena_alloc(out, n, 1);
        long long k = s->next_suffix[b];
        for (;; k++) {
            snprintf(r, n, "%s.%lld", name, k);
            if (!names_contains(s, r)) break;
        }
        s->next_suffix[b] = k + 1;
    }
    names_add(s, r);
    return r;
}
