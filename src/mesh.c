/* mesh.c - the device mesh: axes, prime atoms, replica groups, names.
 *
 * A Mesh is a list of named axes; each axis of size n is factored into its
 * prime factors in ascending order ("atoms", the first one most major), and
 * devices are numbered row-major over the atoms (which is the same as
 * row-major over the axes).  Everything a sharding or a collective needs is
 * expressed over runs of atoms:
 *  - mesh_groups lists the replica groups of a collective along some atoms;
 *  - mesh_groups_iota prints the same groups in XLA's compact iota form
 *    `[G,S]<=[dims]T(perm)`: iota over the atom sizes, transposed so that
 *    the atoms outside the collective come first, then merged wherever two
 *    source dims stay adjacent after the transpose;
 *  - mesh_atoms_name names a run of atoms the way Shardy names axes and
 *    sub-axes ("x", "x,y", "y:(2)2").
 * Strides are recomputed on demand (meshes are tiny: <= 16 atoms).
 */
#include "spmdc/mesh.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Number of devices that one step of `atom` spans (product of the atoms
 * minor to it). */
static int64_t atom_stride(const Mesh *m, int32_t atom)
{
    int64_t s = 1;
    for (int32_t a = atom + 1; a < m->n_atoms; a++)
        s *= m->atom_size[a];
    return s;
}

bool mesh_init(Mesh *m, int32_t n_axes, const char *const *names, const int64_t *sizes,
               char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    m->n_devices = 1;
    if (n_axes < 0 || n_axes > SPMDC_MAX_MESH_AXES) {
        snprintf(err, errlen, "a mesh has at most %d axes (got %d)", SPMDC_MAX_MESH_AXES, (int)n_axes);
        return false;
    }
    m->n_axes = n_axes;
    for (int32_t i = 0; i < n_axes; i++) {
        MeshAxis *ax = &m->axes[i];
        size_t len = strlen(names[i]);
        if (len == 0 || len >= sizeof ax->name) {
            snprintf(err, errlen, "mesh axis name '%s' must have 1 to %d characters", names[i],
                     (int)sizeof ax->name - 1);
            return false;
        }
        memcpy(ax->name, names[i], len + 1);
        for (int32_t j = 0; j < i; j++) {
            if (strcmp(m->axes[j].name, ax->name) == 0) {
                snprintf(err, errlen, "mesh axis '%s' is named twice", ax->name);
                return false;
            }
        }
        if (sizes[i] < 1 || sizes[i] > SPMDC_MAX_DEVICES || m->n_devices * sizes[i] > SPMDC_MAX_DEVICES) {
            if (sizes[i] < 1)
                snprintf(err, errlen, "mesh axis '%s' has size %lld (must be >= 1)", ax->name,
                         (long long)sizes[i]);
            else
                snprintf(err, errlen, "the mesh has more than %d devices", SPMDC_MAX_DEVICES);
            return false;
        }
        ax->size = sizes[i];
        ax->first_atom = m->n_atoms;
        int64_t n = sizes[i];
        for (int64_t p = 2; n > 1; p++) {
            while (n % p == 0) {
                if (m->n_atoms >= SPMDC_MAX_ATOMS) {
                    snprintf(err, errlen, "the mesh has more than %d prime factors", SPMDC_MAX_ATOMS);
                    return false;
                }
                m->atom_size[m->n_atoms] = p;
                m->atom_axis[m->n_atoms] = (int8_t)i;
                m->n_atoms++;
                n /= p;
            }
        }
        ax->n_atoms = m->n_atoms - ax->first_atom;
        m->n_devices *= sizes[i];
    }
    return true;
}

/* Parses a decimal size at *p (advancing it); -1 if there are no digits,
 * -2 if it is larger than SPMDC_MAX_DEVICES. */
static int64_t parse_size(const char **p)
{
    const char *s = *p;
    int64_t v = 0;
    if (!isdigit((unsigned char)*s))
        return -1;
    while (isdigit((unsigned char)*s)) {
        if (v <= SPMDC_MAX_DEVICES)
            v = v * 10 + (*s - '0');
        s++;
    }
    *p = s;
    return v > SPMDC_MAX_DEVICES ? -2 : v;
}

/* Reads one "name=size" of a named spec into names[i]/sizes[i]. */
static bool parse_named_axis(const char **p, char name[32], int64_t *size, const char *spec, char *err,
                             size_t errlen)
{
    const char *s = *p;
    size_t len = 0;
    if (!(isalpha((unsigned char)*s) || *s == '_')) {
        snprintf(err, errlen, "bad --mesh '%s': expected an axis name at '%s'", spec, s);
        return false;
    }
    while (isalnum((unsigned char)s[len]) || s[len] == '_')
        len++;
    if (len >= 32) {
        snprintf(err, errlen, "bad --mesh '%s': axis name longer than 31 characters", spec);
        return false;
    }
    memcpy(name, s, len);
    name[len] = '\0';
    s += len;
    if (*s != '=') {
        snprintf(err, errlen, "bad --mesh '%s': expected '=' after axis '%s'", spec, name);
        return false;
    }
    s++;
    *size = parse_size(&s);
    if (*size == -1) {
        snprintf(err, errlen, "bad --mesh '%s': expected a size after '%s='", spec, name);
        return false;
    }
    *p = s;
    return true;
}

bool mesh_parse_spec(const char *spec, Mesh *m, char *err, size_t errlen)
{
    char names[SPMDC_MAX_MESH_AXES][32];
    const char *name_ptrs[SPMDC_MAX_MESH_AXES];
    int64_t sizes[SPMDC_MAX_MESH_AXES];
    int32_t n = 0;
    const char *s = spec;
    bool named = isalpha((unsigned char)*s) || *s == '_';
    char sep = named ? ',' : 'x';
    memset(m, 0, sizeof *m);
    for (;;) {
        if (n == SPMDC_MAX_MESH_AXES) {
            snprintf(err, errlen, "bad --mesh '%s': at most %d axes", spec, SPMDC_MAX_MESH_AXES);
            return false;
        }
        if (named) {
            if (!parse_named_axis(&s, names[n], &sizes[n], spec, err, errlen))
                return false;
        } else {
            snprintf(names[n], sizeof names[n], "d%d", (int)n);
            sizes[n] = parse_size(&s);
            if (sizes[n] == -1) {
                snprintf(err, errlen, "bad --mesh '%s': expected a size at '%s'", spec, s);
                return false;
            }
        }
        if (sizes[n] == -2) {
            snprintf(err, errlen, "bad --mesh '%s': more than %d devices", spec, SPMDC_MAX_DEVICES);
            return false;
        }
        if (sizes[n] == 0) {
            snprintf(err, errlen, "bad --mesh '%s': axis '%s' has size 0", spec, names[n]);
            return false;
        }
        name_ptrs[n] = names[n];
        n++;
        if (*s == '\0')
            break;
        if (*s != sep) {
            snprintf(err, errlen, "bad --mesh '%s': unexpected '%c'", spec, *s);
            return false;
        }
        s++;
    }
    char e2[200];
    if (!mesh_init(m, n, name_ptrs, sizes, e2, sizeof e2)) {
        snprintf(err, errlen, "bad --mesh '%s': %s", spec, e2);
        return false;
    }
    m->named = named;
    return true;
}

int32_t mesh_axis_index(const Mesh *m, const char *name)
{
    for (int32_t i = 0; i < m->n_axes; i++)
        if (strcmp(m->axes[i].name, name) == 0)
            return i;
    return -1;
}

int64_t mesh_atom_coord(const Mesh *m, int64_t device, int32_t atom)
{
    return (device / atom_stride(m, atom)) % m->atom_size[atom];
}

int64_t mesh_run_index(const Mesh *m, int64_t device, const int8_t *atoms, int32_t n)
{
    int64_t t = 0;
    for (int32_t k = 0; k < n; k++)
        t = t * m->atom_size[atoms[k]] + mesh_atom_coord(m, device, atoms[k]);
    return t;
}

int64_t mesh_device_at(const Mesh *m, int64_t device, const int8_t *atoms, int32_t n, int64_t index)
{
    int64_t r = device;
    for (int32_t k = n - 1; k >= 0; k--) {
        int64_t sz = m->atom_size[atoms[k]], c = index % sz;
        index /= sz;
        r += (c - mesh_atom_coord(m, device, atoms[k])) * atom_stride(m, atoms[k]);
    }
    return r;
}

int64_t mesh_mask_size(const Mesh *m, uint32_t mask)
{
    int64_t s = 1;
    for (int32_t a = 0; a < m->n_atoms; a++)
        if (mask & (1u << a))
            s *= m->atom_size[a];
    return s;
}

/* The atoms NOT in order[0..n), ascending; returns their count. */
static int32_t other_atoms(const Mesh *m, const int8_t *order, int32_t n, int8_t *out)
{
    uint32_t mask = 0;
    int32_t k = 0;
    for (int32_t i = 0; i < n; i++)
        mask |= 1u << order[i];
    for (int32_t a = 0; a < m->n_atoms; a++)
        if (!(mask & (1u << a)))
            out[k++] = (int8_t)a;
    return k;
}

void mesh_groups(const Mesh *m, const int8_t *order, int32_t n_order, int64_t *out, int64_t *n_groups,
                 int64_t *group_size)
{
    int8_t all[SPMDC_MAX_ATOMS];
    int64_t stride[SPMDC_MAX_ATOMS], radix[SPMDC_MAX_ATOMS], digit[SPMDC_MAX_ATOMS];
    int32_t n_other = other_atoms(m, order, n_order, all);
    int32_t n_all = n_other + n_order;
    for (int32_t i = 0; i < n_order; i++)
        all[n_other + i] = order[i];
    /* Enumerate the digits of (other atoms..., order atoms...) row-major:
     * the first n_other digits pick the group, the rest the member. */
    for (int32_t i = 0; i < n_all; i++) {
        stride[i] = atom_stride(m, all[i]);
        radix[i] = m->atom_size[all[i]];
        digit[i] = 0;
    }
    *group_size = 1;
    for (int32_t i = 0; i < n_order; i++)
        *group_size *= m->atom_size[order[i]];
    *n_groups = m->n_devices / *group_size;
    for (int64_t k = 0; k < m->n_devices; k++) {
        int64_t dev = 0;
        for (int32_t i = 0; i < n_all; i++)
            dev += digit[i] * stride[i];
        out[k] = dev;
        for (int32_t i = n_all - 1; i >= 0; i--) {
            if (++digit[i] < radix[i])
                break;
            digit[i] = 0;
        }
    }
}

void mesh_iota_src(StrBuf *b, const Mesh *m, const int8_t *pos)
{
    int32_t at[SPMDC_MAX_ATOMS], src_of[SPMDC_MAX_ATOMS];
    int64_t src[SPMDC_MAX_ATOMS], perm[SPMDC_MAX_ATOMS];
    int32_t n_src = 0, n_perm = 0;
    for (int32_t i = 0; i < m->n_atoms; i++)
        at[pos[i]] = i;
    /* A source dim is a maximal run of atoms a, a+1, ... that also appear
     * consecutively in pos. */
    for (int32_t a = 0; a < m->n_atoms; a++) {
        if (a > 0 && at[a] == at[a - 1] + 1)
            src[n_src - 1] *= m->atom_size[a];
        else
            src[n_src++] = m->atom_size[a];
        src_of[a] = n_src - 1;
    }
    for (int32_t i = 0; i < m->n_atoms; i++)
        if (i == 0 || src_of[pos[i]] != src_of[pos[i - 1]])
            perm[n_perm++] = src_of[pos[i]];
    if (n_src == 0)
        src[n_src++] = 1;
    sb_puts(b, "<=");
    sb_int_list(b, src, n_src, "[", ",", "]");
    if (n_src > 1)
        sb_int_list(b, perm, n_perm, "T(", ",", ")");
}

bool mesh_groups_iota(StrBuf *b, const Mesh *m, const int8_t *order, int32_t n_order)
{
    int8_t perm[SPMDC_MAX_ATOMS];
    int64_t group_size = 1;
    if (m->n_devices <= 1)
        return false;
    int32_t n_other = other_atoms(m, order, n_order, perm);
    for (int32_t i = 0; i < n_order; i++)
        perm[n_other + i] = order[i];
    for (int32_t i = 0; i < n_order; i++)
        group_size *= m->atom_size[order[i]];
    sb_printf(b, "[%lld,%lld]", (long long)(m->n_devices / group_size), (long long)group_size);
    mesh_iota_src(b, m, perm);
    return true;
}

bool mesh_factor_order(const Mesh *m, const int64_t *ids, int8_t *order)
{
    int64_t B = 1;
    uint32_t used = 0;
    if (ids[0] != 0)
        return false;
    /* The minor-most atom's stride is ids[1], the next one's ids[its size]... */
    for (int32_t q = m->n_atoms - 1; q >= 0; q--) {
        int32_t found = -1;
        for (int32_t a = 0; a < m->n_atoms && found < 0; a++)
            if (!(used & (1u << a)) && atom_stride(m, a) == ids[B])
                found = a;
        if (found < 0)
            return false;
        order[q] = (int8_t)found;
        used |= 1u << found;
        B *= m->atom_size[found];
    }
    /* ... then every id is checked. */
    int64_t stride[SPMDC_MAX_ATOMS], digit[SPMDC_MAX_ATOMS] = {0};
    for (int32_t q = 0; q < m->n_atoms; q++)
        stride[q] = atom_stride(m, order[q]);
    int64_t dev = 0;
    for (int64_t L = 0; L < m->n_devices; L++) {
        if (ids[L] != dev)
            return false;
        for (int32_t q = m->n_atoms - 1; q >= 0; q--) {
            dev += stride[q];
            if (++digit[q] < m->atom_size[order[q]])
                break;
            dev -= stride[q] * digit[q];
            digit[q] = 0;
        }
    }
    return true;
}

void mesh_atoms_name(StrBuf *b, const Mesh *m, const int8_t *atoms, int32_t n)
{
    int32_t i = 0;
    while (i < n) {
        int32_t a = atoms[i];
        int32_t ax = m->atom_axis[a];
        int32_t j = i + 1;
        while (j < n && atoms[j] == atoms[j - 1] + 1 && m->atom_axis[atoms[j]] == ax)
            j++;
        const MeshAxis *axis = &m->axes[ax];
        if (i > 0)
            sb_putc(b, ',');
        sb_puts(b, axis->name);
        int32_t span = j - i;
        if (span != axis->n_atoms) {
            int64_t pre = 1, size = 1;
            for (int32_t t = axis->first_atom; t < a; t++)
                pre *= m->atom_size[t];
            for (int32_t t = a; t < a + span; t++)
                size *= m->atom_size[t];
            sb_printf(b, ":(%lld)%lld", (long long)pre, (long long)size);
        }
        i = j;
    }
}

void mesh_print(StrBuf *b, const Mesh *m)
{
    for (int32_t i = 0; i < m->n_axes; i++)
        sb_printf(b, "%s%s=%lld", i ? "," : "", m->axes[i].name, (long long)m->axes[i].size);
}

/* ================================================================ device orders */

/* FNV-1a over a device order; perm_hash32 hashes the stored (int32) form of
 * the same order to the same value. */
static uint64_t perm_hash(const int64_t *phys, int64_t n_devices)
{
    uint64_t h = 1469598103934665603ull;
    for (int64_t L = 0; L < n_devices; L++)
        h = (h ^ (uint64_t)phys[L]) * 1099511628211ull;
    return h ^ (h >> 29);
}

static uint64_t perm_hash32(const int32_t *phys, int64_t n_devices)
{
    uint64_t h = 1469598103934665603ull;
    for (int64_t L = 0; L < n_devices; L++)
        h = (h ^ (uint64_t)(int64_t)phys[L]) * 1099511628211ull;
    return h ^ (h >> 29);
}

static bool perm_equals(const int32_t *have, const int64_t *phys, int64_t n_devices)
{
    for (int64_t L = 0; L < n_devices; L++)
        if (have[L] != phys[L])
            return false;
    return true;
}

/* Rebuilds the hash index with n_slots slots over permutations 1..perms->n. */
static void perm_rehash(MeshPerms *perms, int32_t n_slots)
{
    int32_t *slots = ARENA_ARRAY(perms->arena, int32_t, n_slots);
    for (int32_t k = 0; k < perms->n; k++) {
        uint32_t s = (uint32_t)perm_hash32(perms->phys[k], perms->n_devices) & (uint32_t)(n_slots - 1);
        while (slots[s])
            s = (s + 1) & (uint32_t)(n_slots - 1);
        slots[s] = k + 1;
    }
    perms->slots = slots;
    perms->n_slots = n_slots;
}

int32_t mesh_perm_intern(MeshPerms *perms, const int64_t *phys, int64_t n_devices)
{
    bool identity = true;
    for (int64_t L = 0; L < n_devices; L++)
        identity &= phys[L] == L;
    if (identity)
        return 0;
    if (!perms || !perms->arena || n_devices <= 0 || (perms->n > 0 && perms->n_devices != n_devices))
        return -1;
    Arena *arena = perms->arena;
    uint32_t s = 0;
    if (perms->n_slots) {
        s = (uint32_t)perm_hash(phys, n_devices) & (uint32_t)(perms->n_slots - 1);
        for (; perms->slots[s]; s = (s + 1) & (uint32_t)(perms->n_slots - 1))
            if (perm_equals(perms->phys[perms->slots[s] - 1], phys, n_devices))
                return perms->slots[s];
    }
    if (perms->n >= MESH_MAX_PERMS)
        return -1;
    int32_t *fwd = ARENA_ARRAY(arena, int32_t, n_devices), *inv = ARENA_ARRAY(arena, int32_t, n_devices);
    for (int64_t L = 0; L < n_devices; L++)
        inv[L] = -1;
    for (int64_t L = 0; L < n_devices; L++) {
        if (phys[L] < 0 || phys[L] >= n_devices || inv[phys[L]] >= 0)
            return -1;
        fwd[L] = (int32_t)phys[L];
        inv[phys[L]] = (int32_t)L;
    }
    if (perms->n == perms->cap) {
        int32_t cap = perms->cap ? 2 * perms->cap : 4;
        int32_t **p = ARENA_ARRAY(arena, int32_t *, cap), **l = ARENA_ARRAY(arena, int32_t *, cap);
        if (perms->n) {
            memcpy(p, perms->phys, sizeof(int32_t *) * (size_t)perms->n);
            memcpy(l, perms->logical, sizeof(int32_t *) * (size_t)perms->n);
        }
        perms->phys = p;
        perms->logical = l;
        perms->cap = cap;
    }
    perms->n_devices = n_devices;
    perms->phys[perms->n] = fwd;
    perms->logical[perms->n] = inv;
    perms->n++;
    if (2 * perms->n > perms->n_slots)
        perm_rehash(perms, perms->n_slots ? 2 * perms->n_slots : 16);
    else {
        /* s is the free slot the probe above ended on */
        perms->slots[s] = perms->n;
    }
    return perms->n;
}

int64_t mesh_logical_device(const Mesh *m, int32_t perm, int64_t dev)
{
    if (perm <= 0 || !m->perms || perm > m->perms->n || dev < 0 || dev >= m->perms->n_devices)
        return dev;
    return m->perms->logical[perm - 1][dev];
}

int64_t mesh_physical_device(const Mesh *m, int32_t perm, int64_t logical)
{
    if (perm <= 0 || !m->perms || perm > m->perms->n || logical < 0 || logical >= m->perms->n_devices)
        return logical;
    return m->perms->phys[perm - 1][logical];
}
