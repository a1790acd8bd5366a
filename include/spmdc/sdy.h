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

/* text: a frontend_attributes value as kept verbatim (`{k="...", ...}`,
 * quotes inside escaped).  If it holds an xla.sdy.sharding for a single
 * value, fills *out (kind SSYN_NAMED over the axes of mesh, strings in
 * arena) and returns true; false when there is none or it does not read
 * (several values, an unknown shape of string): the caller then leaves the
 * value to propagation. */
bool sdy_sharding_syntax(const char *text, const Mesh *mesh, Arena *arena, ShardingSyntax *out);

#endif
