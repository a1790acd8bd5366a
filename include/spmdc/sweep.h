/* sweep.h - `spmdc sweep`: one sharding plan compiled at every mesh of a
 * product of axis sizes, one row per mesh (docs/ci.md, "Sweeping mesh
 * sizes").
 *
 *   spmdc sweep IN.hlo --mesh 'data=1,2 model=1,2,4,8' [--format text|csv|json] [-o FILE]
 *
 * The mesh spec lists the sizes of every axis (`name=size,size,...`,
 * separated by spaces; --mesh may be repeated, one axis each); the rows are
 * their product, the last axis varying fastest.  Each row has the
 * collectives by kind, bytes sent per device, peak and parameter memory per
 * device, padding, warnings and status (ok, or the first error).  A row is
 * compared with the row that has the previous size of the innermost axis it
 * does not have at its first size (data=2,model=4 with data=2,model=2;
 * data=2,model=1 with data=1,model=1), and marked where a collective kind
 * appears or disappears or where bytes per device grow faster than the
 * devices.  The first value whose dimension does not divide into its shards
 * gets a remedy: the size to pad it to, or the axes whose size divides it.
 */
#ifndef SPMDC_SWEEP_H
#define SPMDC_SWEEP_H

#include <stdbool.h>
#include <stdint.h>

#include "spmdc/mesh.h"
#include "spmdc/report.h"

/* At most this many meshes in one sweep. */
#define SWEEP_MAX_ROWS 1024

/* The axes of a sweep and the sizes each takes. */
typedef struct SweepSpec {
    int32_t n_axes;
    char names[SPMDC_MAX_MESH_AXES][32];
    int32_t n_sizes[SPMDC_MAX_MESH_AXES];
    int64_t sizes[SPMDC_MAX_MESH_AXES][16];
} SweepSpec;

/* Adds the axes of one --mesh value ("data=1,2 model=1,2,4,8") to spec.
 * False with a message in err on a malformed word, a size < 1, more than
 * 16 sizes for an axis, an axis named twice, or more than
 * SPMDC_MAX_MESH_AXES axes. */
bool sweep_parse_spec(SweepSpec *spec, const char *text, char *err, size_t errlen);
/* Number of meshes of the spec (the product of the list lengths). */
int64_t sweep_n_rows(const SweepSpec *spec);

#define SWEEP_N_KINDS (COLL_COLLECTIVE_PERMUTE + 1)

/* A dimension that does not divide into its shards, and what to do. */
typedef struct SweepRemedy {
    bool any;
    char instruction[64];      /* the input instruction (the first in program order) */
    uint32_t line;
    int32_t dim;
    int64_t size, shards;      /* dim size, tiles along it */
    int64_t pad_to;            /* ceil(size/shards) * shards */
    char axes[64];             /* the axes that split it: "model" */
    char alternatives[128];    /* other axes of the mesh whose size divides it: "data (2)", or "" */
} SweepRemedy;

typedef struct SweepRow {
    Mesh mesh;
    int32_t idx[SPMDC_MAX_MESH_AXES]; /* position of each axis's size in its list */
    bool ok;
    char error[512];           /* the first error ("file:line:col: error: ..."), "" if ok */
    int64_t count[SWEEP_N_KINDS], bytes[SWEEP_N_KINDS];
    int64_t total_count, total_bytes;
    int64_t peak_bytes, parameter_bytes, padding_bytes, value_bytes;
    int32_t n_warnings;
    int32_t ref;               /* the row it is compared with, -1 for none */
    uint32_t appeared, disappeared; /* collective kinds (bit k) vs ref */
    bool bytes_faster;         /* bytes grew by more than the devices did vs ref */
    SweepRemedy remedy;
} SweepRow;

/* The row rows[r] is compared with: the innermost axis whose size is not
 * its first steps back by one size (rows[r].idx must be set; rows are in
 * the product's order); -1 for the first row. */
int32_t sweep_reference_row(const SweepSpec *spec, const SweepRow *rows, int32_t r);
/* Sets rows[r]'s marks (appeared, disappeared, bytes_faster) against
 * rows[rows[r].ref] when both compiled: bytes grow faster than the devices
 * when bytes / ref_bytes > devices / ref_devices (exact, ref_bytes > 0). */
void sweep_compare(SweepRow *rows, int32_t r);

/* Entry point (argv[0] == "sweep"); returns the exit status: 0 the table
 * was written (rows whose mesh fails to compile included, with status
 * error), 1 an error in the input that no mesh changes (it does not parse)
 * or an unwritable output, 2 a usage error. */
int sweep_main(int argc, char **argv);

#endif
