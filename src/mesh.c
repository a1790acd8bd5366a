/* mesh.c - stub, being written. */
#include "spmdc/mesh.h"
#include <stdio.h>
bool mesh_parse_spec(const char *spec, Mesh *m, char *err, size_t errlen) { (void)spec; (void)m; snprintf(err, errlen, "not written yet"); return false; }
