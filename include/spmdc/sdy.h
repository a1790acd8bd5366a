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
 * xla.sdy.meshes, see bind.c).
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
    SDY_UNKNOWN_NAME, /* it names an axis the mesh lacks or a mesh the header does not declare (why) */
} SdyResult;

/* text: a frontend_attributes value as kept verbatim (`{k="...", ...}`,
 * quotes inside escaped).  Reads its xla.sdy.sharding for a single value
 * into *out (kind SSYN_NAMED over the axes of mesh; strings in arena).
 * Open dims (`?`), dim priorities (`p<N>`) and `replicated=` / `unreduced=`
 * axis lists are kept.  module_attrs: the module header's
 * frontend_attributes (verbatim) or NULL; when it holds xla.sdy.meshes, the
 * string's `@name` must be one of them.  Not read (reason in why):
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

/* text: the module header's frontend_attributes (verbatim).  If its
 * xla.sdy.meshes holds exactly one mesh with axes (`#sdy.mesh<["data"=2,
 * "model"=4]>`; empty and maximal meshes are skipped), builds it into *out
 * (named) and returns true; otherwise false. */
bool sdy_module_mesh(const char *text, Mesh *out);

#endif
