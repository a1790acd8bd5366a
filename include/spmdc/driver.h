/* driver.h - the pipeline the CLI runs: read, parse, verify, bind, propagate,
 * partition, and the file helpers the subcommands share.
 */
#ifndef SPMDC_DRIVER_H
#define SPMDC_DRIVER_H

#include <stdbool.h>
#include <stddef.h>

#include "spmdc/hlo.h"
#include "spmdc/pass.h"

/* Reads a whole file into a heap buffer (NUL-terminated, *len without the
 * NUL).  "-" reads stdin.  NULL after printing `spmdc: error: cannot read
 * PATH: reason` to stderr. */
char *driver_read_file(const char *path, size_t *len);
/* Writes data to path atomically (temp file + rename), so a failed run never
 * leaves a partial output file.  "-" writes stdout.  False after printing. */
bool driver_write_file(const char *path, const char *data, size_t len);

/* parse -> verify -> bind_shardings -> propagate_shardings on text already
 * registered as file_id.  NULL after errors were reported through cx->diag. */
HloModule *driver_load_module(const char *text, size_t len, uint32_t file_id, PassCtx *cx, bool propagate);

#endif
