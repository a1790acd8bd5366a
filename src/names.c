/* names.c - NameSet (names.h): an open-addressing set of C strings whose
 * slots live in the set's arena.
 *
 * Nothing is freed: slot arrays outgrown by a rehash stay in the arena until
 * it is reset or destroyed (at most about the final table again;
 * names_reserve avoids them).  A rehash moves the slots by their stored
 * hashes, without reading the strings.  names_unique tries "name", then
 * "name.1", "name.2", ... in that order, so the names it returns depend only
 * on what was added before; the ".N" search resumes after the N it last
 * returned for the same name (every smaller N is still taken: the set only
 * grows).  A set over a NameBase asks the base after its own slots; the
 * base answers a name with a '.' from the table of its names' prefixes
 * unless the prefix is one of them (then from the table of all its names,
 * made on that first need), so the names returned are the same as from a
 * set holding the base's names in its own slots.
 */
#include "spmdc/names.h"
#include "spmdc/strbuf.h"

#include <stddef.h>
#include <string.h>

static uint64_t load64(const char *p)
{
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}

static uint64_t load32(const char *p)
{
    uint32_t w;
    memcpy(&w, p, 4);
    return w;
}

/* The hash of s[0..n), eight bytes at a time: the words in order, the last
 * one overlapping the one before when n is not a multiple of 8 (shorter
 * strings: two 4-byte loads, or the first, middle and last byte); the
 * length is mixed in, so equal strings hash equal and the overlaps are
 * harmless.  Only equality matters to the set (the names it returns do not
 * depend on the hash). */
static uint32_t hash_n(const char *s, size_t n)
{
    const uint64_t k = 0x9e3779b97f4a7c15ull;
    uint64_t h = (uint64_t)n * k;
    if (n >= 8) {
        size_t i = 0;
        for (; i + 8 < n; i += 8)
            h = (h ^ load64(s + i)) * k;
        h = (h ^ load64(s + n - 8)) * k;
    } else if (n >= 4) {
        h = (h ^ (load32(s) | load32(s + n - 4) << 32)) * k;
    } else if (n > 0) {
        uint64_t w = (uint64_t)(unsigned char)s[0] | (uint64_t)(unsigned char)s[n / 2] << 8 |
                     (uint64_t)(unsigned char)s[n - 1] << 16;
        h = (h ^ w) * k;
    }
    h ^= h >> 32;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 29;
    return (uint32_t)h;
}

/* The hash of NUL-terminated s, and its length. */
static uint32_t hash_len(const char *s, size_t *len)
{
    *len = strlen(s);
    return hash_n(s, *len);
}

void names_init(NameSet *s, Arena *arena)
{
    memset(s, 0, sizeof *s);
    s->arena = arena;
}

/* The slot holding name, or the free slot where it would go. */
static NameSlot *probe(const NameSet *s, const char *name, uint32_t h)
{
    uint32_t mask = s->cap - 1;
    for (uint32_t i = h & mask;; i = (i + 1) & mask) {
        NameSlot *e = &s->slot[i];
        if (!e->name || (e->hash == h && strcmp(e->name, name) == 0)) return e;
    }
}

/* The same for the name s[0..len) (no NUL inside it; it need not end
 * there). */
static NameSlot *probe_n(const NameSet *s, const char *name, size_t len, uint32_t h)
{
    uint32_t mask = s->cap - 1;
    for (uint32_t i = h & mask;; i = (i + 1) & mask) {
        NameSlot *e = &s->slot[i];
        if (!e->name || (e->hash == h && strncmp(e->name, name, len) == 0 && e->name[len] == '\0')) return e;
    }
}

/* The length of name's text before its last '.', or -1 without one. */
static ptrdiff_t last_dot(const char *name, size_t len)
{
    for (size_t k = len; k-- > 0;)
        if (name[k] == '.') return (ptrdiff_t)k;
    return -1;
}

/* A table of cap slots (a power of two) holding the current entries. */
static void rehash(NameSet *s, uint32_t cap)
{
    NameSlot *old = s->slot;
    uint32_t old_cap = s->cap;
    s->slot = ARENA_ARRAY(s->arena, NameSlot, cap);
    arena_advise_random(s->arena, s->slot, sizeof(NameSlot) * cap);
    s->cap = cap;
    uint32_t mask = cap - 1;
    for (uint32_t k = 0; k < old_cap; k++) {
        if (!old[k].name) continue;
        uint32_t i = old[k].hash & mask;
        while (s->slot[i].name) i = (i + 1) & mask;
        s->slot[i] = old[k];
    }
}

/* Room for n names with the table at most 3/4 full. */
static bool fits(uint32_t cap, uint64_t n) { return 4 * n <= 3 * (uint64_t)cap; }

void names_reserve(NameSet *s, uint32_t n)
{
    uint32_t cap = s->cap ? s->cap : 128;
    while (!fits(cap, n)) cap *= 2;
    if (cap != s->cap) rehash(s, cap);
}

/* Adds name (hash h) unless present; its slot. */
static NameSlot *add_hashed(NameSet *s, const char *name, uint32_t h)
{
    if (!s->cap) rehash(s, 128);
    NameSlot *e = probe(s, name, h);
    if (e->name) return e;
    if (!fits(s->cap, (uint64_t)s->n + 1)) {
        rehash(s, s->cap * 2);
        e = probe(s, name, h);
    }
    e->name = name;
    e->hash = h;
    e->index = s->n++;
    return e;
}

/* Every name of b in b->whole. */
static void build_whole(NameBase *b)
{
    names_reserve(&b->whole, b->n);
    for (uint32_t i = 0; i < b->n; i++) {
        const char *name = b->name_at(b->ctx, i);
        size_t len;
        add_hashed(&b->whole, name, hash_len(name, &len));
    }
    b->whole_built = true;
}

/* Whether name (len bytes, hash h) is one of b's names: the tables of
 * undotted names and of prefixes answer, and the whole table only when
 * the name's prefix is one of b's. */
static bool base_has(NameBase *b, const char *name, size_t len, uint32_t h)
{
    ptrdiff_t pl = last_dot(name, len);
    if (pl < 0) return b->undotted.cap && probe(&b->undotted, name, h)->name;
    if (!b->prefixes.cap || !probe_n(&b->prefixes, name, (size_t)pl, hash_n(name, (size_t)pl))->name) return false;
    if (!b->whole_built) build_whole(b);
    return probe(&b->whole, name, h)->name != NULL;
}

/* Whether name (len bytes, hash h) is in s: its own slots or its base. */
static bool taken(const NameSet *s, const char *name, size_t len, uint32_t h)
{
    if (s->cap && probe(s, name, h)->name) return true;
    return s->base && base_has(s->base, name, len, h);
}

void names_base_init(NameBase *b, Arena *arena, uint32_t n, const char *(*name_at)(const void *ctx, uint32_t i),
                     const void *ctx)
{
    memset(b, 0, sizeof *b);
    names_init(&b->undotted, arena);
    names_init(&b->prefixes, arena);
    names_init(&b->whole, arena);
    b->name_at = name_at;
    b->ctx = ctx;
    b->n = n;
    const char *prev = NULL; /* the last name with a '.', whose prefix is in the table */
    size_t prev_pl = 0;
    for (uint32_t i = 0; i < n; i++) {
        const char *name = name_at(ctx, i);
        size_t len = strlen(name);
        ptrdiff_t pl = last_dot(name, len);
        if (pl < 0) {
            add_hashed(&b->undotted, name, hash_n(name, len));
            continue;
        }
        if (prev && prev_pl == (size_t)pl && memcmp(prev, name, prev_pl) == 0) continue; /* "h.1", "h.2", ... */
        uint32_t ph = hash_n(name, (size_t)pl);
        if (!b->prefixes.cap || !probe_n(&b->prefixes, name, (size_t)pl, ph)->name)
            add_hashed(&b->prefixes, arena_strndup(arena, name, (size_t)pl), ph);
        prev = name;
        prev_pl = (size_t)pl;
    }
}

void names_set_base(NameSet *s, NameBase *base) { s->base = base; }

bool names_contains(const NameSet *s, const char *name)
{
    size_t len;
    uint32_t h = hash_len(name, &len);
    return taken(s, name, len, h);
}

void names_add(NameSet *s, const char *name)
{
    size_t len;
    uint32_t h = hash_len(name, &len);
    if (!s->base || !base_has(s->base, name, len, h)) add_hashed(s, name, h);
}

const char *names_unique(NameSet *s, const char *name, Arena *out)
{
    size_t len;
    uint32_t h = hash_len(name, &len);
    if (!taken(s, name, len, h)) {
        char *r = arena_strndup(out, name, len);
        add_hashed(s, r, h);
        return r;
    }
    if (!s->bases) {
        s->bases = ARENA_NEW(s->arena, NameSet);
        names_init(s->bases, s->arena);
    }
    NameSlot *be = s->bases->cap ? probe(s->bases, name, h) : NULL;
    uint32_t b;
    if (be && be->name) {
        b = be->index;
    } else {
        b = add_hashed(s->bases, arena_strndup(s->arena, name, len), h)->index;
        if (s->bases->n > s->cap_suffix) {
            uint32_t cap = s->cap_suffix ? s->cap_suffix * 2 : 16;
            s->next_suffix = arena_realloc(s->arena, s->next_suffix, sizeof(long long) * s->cap_suffix,
                                           sizeof(long long) * cap, _Alignof(long long));
            s->cap_suffix = cap;
        }
        s->next_suffix[b] = 1;
    }
    char *r = arena_alloc(out, len + 22, 1); /* '.', up to 20 digits, NUL */
    memcpy(r, name, len);
    r[len] = '.';
    long long k = s->next_suffix[b];
    uint32_t rh;
    for (;; k++) {
        size_t rl = len + 1 + str_put_u64(r + len + 1, (uint64_t)k);
        rh = hash_n(r, rl);
        if (!taken(s, r, rl, rh)) break;
    }
    s->next_suffix[b] = k + 1;
    add_hashed(s, r, rh);
    return r;
}
