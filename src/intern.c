/* intern.c - the value-interning set of intern.h. */
#include "spmdc/intern.h"

#include <stdlib.h>

#include "spmdc/arena.h"

static void intern_grow(InternSet *s)
{
    uint32_t cap = s->cap ? s->cap * 2 : 64;
    void **slot = xcalloc(cap, sizeof *slot);
    uint64_t *hash = xmalloc(sizeof(uint64_t) * cap);
    for (uint32_t k = 0; k < s->cap; k++) {
        if (!s->slot[k])
            continue;
        uint32_t j = (uint32_t)s->hash[k] & (cap - 1);
        while (slot[j])
            j = (j + 1) & (cap - 1);
        slot[j] = s->slot[k];
        hash[j] = s->hash[k];
    }
    free(s->slot);
    free(s->hash);
    s->slot = slot;
    s->hash = hash;
    s->cap = cap;
}

void *intern_find(InternSet *s, uint64_t h, const void *item, InternSame same, uint32_t *at)
{
    if ((s->n + 1) * 2 > s->cap)
        intern_grow(s);
    uint32_t j = (uint32_t)h & (s->cap - 1);
    for (; s->slot[j]; j = (j + 1) & (s->cap - 1))
        if (s->hash[j] == h && same(s->slot[j], item))
            return s->slot[j];
    *at = j;
    return NULL;
}

void intern_add(InternSet *s, uint32_t at, uint64_t h, void *item)
{
    s->slot[at] = item;
    s->hash[at] = h;
    s->n++;
}

void intern_free(InternSet *s)
{
    free(s->slot);
    free(s->hash);
    s->slot = NULL;
    s->hash = NULL;
    s->cap = s->n = 0;
}
