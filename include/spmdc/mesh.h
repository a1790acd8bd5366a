/* mesh.h - the device mesh: named axes, each factored into prime "atoms".
 *
 * A mesh such as x=2,y=4 has 8 devices, numbered row-major over its axes
 * (x major): device = ix*4 + iy.  Every axis is factored into prime atoms in
 * ascending order (y=4 -> atoms y0=2 (major), y1=2), so that any piece of an
 * axis that a sharding uses (a sub-axis, Shardy's "y":(2)2, or a factor of a
 * positional devices=[...] tile assignment) is a run of atoms.  Devices are
 * numbered row-major over the atoms as well (the same numbering).
 *
 * Atom masks are uint32_t (bit a = atom a).  A Mesh is a plain value (names
 * are stored inline, at most 31 bytes), so it can be copied freely.
 */
#ifndef SPMDC_MESH_H
#define SPMDC_MESH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spmdc/arena.h"
#include "spmdc/strbuf.h"

#define SPMDC_MAX_MESH_AXES 8
#define SPMDC_MAX_ATOMS 32
#define SPMDC_MAX_DEVICES 65536

typedef struct MeshAxis {
    char name[32];      /* "model"; numeric specs name their axes d0, d1, ... */
    int64_t size;       /* devices along the axis */
    int32_t first_atom; /* index of its most major atom */
    int32_t n_atoms;
} MeshAxis;

/* Device orders that are no transposed iota over the atoms (sharding.h):
 * permutation k (ids 1..n; 0 is the identity) maps each logical device L
 * (the mesh's own row-major numbering, over which tilings are defined) to
 * the physical device that holds L's tile (phys[k-1][L]), and back
 * (logical[k-1][dev]).  Owned by the module (its arena); meshes point to it. */
typedef struct MeshPerms {
    Arena *arena;               /* where the permutations live (the module's) */
    int32_t n, cap;
    int64_t n_devices;
    int32_t **phys, **logical;
    int32_t *slots;             /* hash index: open addressing on the order's
                                   hash, each slot a permutation id (0: free) */
    int32_t n_slots;            /* a power of two, at least 2 * n (0: none yet) */
} MeshPerms;

#define MESH_MAX_PERMS 65535

typedef struct Mesh {
    int32_t n_axes;
    MeshAxis axes[SPMDC_MAX_MESH_AXES];
    int32_t n_atoms;
    int64_t atom_size[SPMDC_MAX_ATOMS]; /* prime */
    int8_t atom_axis[SPMDC_MAX_ATOMS];  /* owning axis */
    int64_t n_devices;                  /* product of axis sizes */
    bool named;                         /* axis names came from the user */
    MeshPerms *perms;                   /* the module's device orders (NULL: none yet) */
} Mesh;

/* Builds a mesh from axis names and sizes (each >= 1; size-1 axes have no
 * atoms).  Returns false (with a message in err) if there are too many axes
 * or atoms, or more than SPMDC_MAX_DEVICES devices. */
bool mesh_init(Mesh *m, int32_t n_axes, const char *const *names, const int64_t *sizes,
               char *err, size_t errlen);
/* Parses a --mesh spec: "8" (one axis d0), "2x4" (axes d0=2, d1=4) or
 * "x=2,y=4" (named; m->named = true).  False with a message in err on a
 * malformed spec, a size < 1, a duplicate or over-long name. */
bool mesh_parse_spec(const char *spec, Mesh *m, char *err, size_t errlen);
/* Index of the axis called name, or -1. */
int32_t mesh_axis_index(const Mesh *m, const char *name);
/* Coordinate of device (0..n_devices-1) along one atom. */
int64_t mesh_atom_coord(const Mesh *m, int64_t device, int32_t atom);
/* Mixed-radix index of device's coordinates on atoms[0..n) (major ->
 * minor): its tile index along a dim split by that run. */
int64_t mesh_run_index(const Mesh *m, int64_t device, const int8_t *atoms, int32_t n);
/* The device whose coordinates agree with `device` on every atom outside
 * atoms[0..n) and whose index on that run (mesh_run_index) is `index`. */
int64_t mesh_device_at(const Mesh *m, int64_t device, const int8_t *atoms, int32_t n, int64_t index);
/* Product of the sizes of the atoms in mask. */
int64_t mesh_mask_size(const Mesh *m, uint32_t mask);

/* Replica groups over the atoms of `order` (n_order atoms, major -> minor):
 * devices that agree on every atom NOT in order form one group; inside a
 * group, members are ordered by the mixed-radix value of their coordinates
 * on `order`.  Groups are listed by their smallest member.  Writes
 * n_groups * group_size device ids, row-major, to out (room for n_devices).
 * This is the group generator for every collective "along" a set of atoms. */
void mesh_groups(const Mesh *m, const int8_t *order, int32_t n_order, int64_t *out,
                 int64_t *n_groups, int64_t *group_size);
/* Appends XLA's compact iota form of the same groups when it exists
 * ("[2,4]<=[8]", "[4,2]<=[2,4]T(1,0)"): always possible for mesh_groups'
 * output.  Returns false and appends nothing for 1 group of 1. */
bool mesh_groups_iota(StrBuf *b, const Mesh *m, const int8_t *order, int32_t n_order);
/* The id (1..MESH_MAX_PERMS) of the device order phys[0..n_devices)
 * (phys[L]: the physical device that stands at logical device L), added to
 * perms (arrays from perms->arena) when new; 0 for the identity; -1 if phys
 * is no permutation of the devices, perms is NULL or the table is full. */
int32_t mesh_perm_intern(MeshPerms *perms, const int64_t *phys, int64_t n_devices);
/* The logical device physical device `dev` holds the tile of under device
 * order `perm` (0: dev), and the inverse. */
int64_t mesh_logical_device(const Mesh *m, int32_t perm, int64_t dev);
int64_t mesh_physical_device(const Mesh *m, int32_t perm, int64_t logical);

/* Appends the axes that a run of atoms spans, Shardy style: "model",
 * "x,y", or sub-axes "y:(2)2".  n == 0 appends nothing. */
void mesh_atoms_name(StrBuf *b, const Mesh *m, const int8_t *atoms, int32_t n);
/* Appends "x=2,y=4". */
void mesh_print(StrBuf *b, const Mesh *m);

/* ---- added by the mesh module (not in the original contract) ---- */

/* True iff ids[0..n_devices) is the iota over the mesh atoms transposed to
 * the atom order order[0..n_atoms) (major -> minor), i.e. ids[L] is the
 * device whose coordinates on order[] are L's mixed-radix digits; fills
 * order.  Positional tile assignments and replica-group lists are factored
 * over the mesh with this. */
bool mesh_factor_order(const Mesh *m, const int64_t *ids, int8_t *order);
/* Appends XLA's iota source for the array whose axes (major -> minor) are
 * the atoms pos[0..n_atoms): "<=[8]", "<=[2,4]T(1,0)"; source dims are the
 * atom sizes, merged where adjacent atoms stay adjacent in pos. */
void mesh_iota_src(StrBuf *b, const Mesh *m, const int8_t *pos);

#endif
