/* sdy.h - Shardy shardings carried as strings in frontend_attributes.
 *
 * JAX's default (Shardy) export prints some shardings only as
 * `frontend_attributes={xla.sdy.sharding="#sdy.sharding<@mesh, [{\"x\"}, {}]>"}`
 * (or `#sdy.sharding_per_value<[<@mesh, [...]>]>` on op results, e.g. the
 * `xla.sdy.FuncResultSharding` custom-call that carries out_shardings),
 * with no `sharding=` attribute.  sdy_sharding_syntax reads one such string
 * into the named-form ShardingSyntax the binder already understands
 * (grammar in the reference notes: hlo-input.md, "Grammar of the attribute
 * strings"); the mesh is the module's (its axis names come from
 * xla.sdy.meshes or from the meshes the strings write inline, see bind.c).
 */
#ifndef SPMDC_SDY_H
#define SPMDC_SDY_H

#include <stdbool.h>

#include "spmdc/arena.h"
#include "spmdc/mesh.h"
#include "spmdc/sharding.h"

typedef enum SdyResult {
    SDY_NONE,       /* no xla.sdy.sharding in the text */
    SDY_OK,         /* *out filled */
    SDY_UNREADABLE, /* there is one, but not of a form spmdc reads: why says so */
    SDY_UNKNOWN_NAME, /* it names an axis the mesh lacks or a mesh the header does not declare, or its
                         inline mesh is one Shardy rejects (why) */
} SdyResult;

/* text: a frontend_attributes value as kept verbatim (`{k="...", ...}`,
 * quotes inside escaped).  Reads its xla.sdy.sharding for a single value
 * into *out (kind SSYN_NAMED over the axes of mesh; strings in arena).
 * Open dims (`?`), dim priorities (`p<N>`) and `replicated=` / `unreduced=`
 * axis lists are kept.  module_attrs: the module header's
 * frontend_attributes (verbatim) or NULL; when it holds xla.sdy.meshes, the
 * string's `@name` must be one of them.  The mesh may be written inline
 * (`mesh<[...]>`) instead; either way the axes bind by name to mesh, and a
 * maximal mesh gives kind SSYN_MAXIMAL.  Not read (reason in why):
 * SDY_UNKNOWN_NAME for an axis the mesh lacks or an undeclared mesh,
 * SDY_UNREADABLE for several values or anything malformed. */
SdyResult sdy_sharding_syntax(const char *text, const char *module_attrs, const Mesh *mesh, Arena *arena,
                              ShardingSyntax *out, char *why, size_t whylen);

/* text: a frontend_attributes value (verbatim).  Reads its
 * `key="#sdy.sharding_per_value<[<@mesh, [...]>, ...]>"` (key e.g.
 * "xla.sdy.in_shardings", "xla.sdy.out_shardings": the shardings of a
 * shard_map's operands and results) into out[0..*n), at most max values. */
SdyResult sdy_sharding_list(const char *text, const char *key, const Mesh *mesh, Arena *arena, ShardingSyntax *out,
                            int32_t max, int32_t *n, char *why, size_t whylen);
/* text: a frontend_attributes value (verbatim).  Reads its
 * `xla.sdy.manual_axes="#sdy<manual_axes{\"x\", ...}>"` into *axes (bit a:
 * mesh axis a is manual). */
SdyResult sdy_manual_axes(const char *text, const Mesh *mesh, uint32_t *axes, char *why, size_t whylen);

/* A Shardy mesh as written, by name in the header's xla.sdy.meshes
 * (`mesh = #sdy.mesh<["a"=2, "b"=4]>`) or inline in a sharding
 * (`<mesh<["a"=2, "b"=4]>, [...]>`): the body `<[axes]>`, optionally with
 * `, device_ids=[...]`.  `<[]>` is the empty mesh (every sharding over it is
 * replicated), `<[], device_ids=[d]>` the maximal mesh of device d.  One
 * reader (read_mesh in sdy.c) serves both spellings. */
typedef struct SdyMesh {
    int32_t n_axes;
    char names[SPMDC_MAX_MESH_AXES][32];
    int64_t sizes[SPMDC_MAX_MESH_AXES];
    int64_t device; /* the maximal mesh's device; -1 for a mesh with axes and the empty mesh */
    /* device_ids in another order than 0..N-1: the list's '[' in the text
     * the mesh was read from (row-major over the axes, Shardy's order);
     * NULL for the default order */
    const char *device_ids;
} SdyMesh;

/* Whether a and b are the same mesh (the same axes, names and sizes, in
 * order; the same device). */
bool sdy_mesh_equal(const SdyMesh *a, const SdyMesh *b);

/* A fault in a mesh spmdc reads: where it is in the text checked (byte
 * offset and length, for the caret) and why. */
typedef struct SdyFault {
    size_t at, len;
    char why[200];
} SdyFault;

/* text: a frontend_attributes value (verbatim; NUL-terminated).  Checks
 * every Shardy mesh written in it, the header's named `#sdy.mesh<...>` and
 * the inline `mesh<...>` of tensor shardings, as Shardy's verifier does:
 * axis sizes of at least 1, no axis name twice, device_ids a permutation of
 * as many devices as the axes hold (one for a mesh without axes).  A
 * tensor sharding over an inline
 * mesh may name only that mesh's axes.  each (may be NULL) is called with
 * every well-formed inline mesh and where it is.  Text Shardy's syntax does
 * not describe is left to the readers below (which then ignore the
 * string).  Returns false on the first fault, described in *fault. */
bool sdy_check_meshes(const char *text, Arena *scratch,
                      void (*each)(void *ctx, const SdyMesh *mesh, size_t at, size_t len), void *ctx,
                      SdyFault *fault);

/* Reads one mesh body at text (its '<'), as sdy_check_meshes accepts it.
 * Returns its length through '>', 0 if text is no well-formed valid mesh. */
size_t sdy_read_mesh(const char *text, SdyMesh *out);

/* header: the module header's frontend_attributes (verbatim, or NULL);
 * inline_meshes: n mesh bodies written inline in the module's shardings
 * (NULL entries skipped).  If every mesh with axes among the header's
 * xla.sdy.meshes and the inline ones is one and the same mesh (empty and
 * maximal meshes are skipped), builds it into *out (named), sets *which to
 * -1 if the header declares it, else to the index of the first inline mesh
 * that is it, and returns true; no such mesh, or several different ones:
 * false. */
bool sdy_module_mesh(const char *header, const char *const *inline_meshes, int32_t n, Mesh *out, int32_t *which);

#endif
