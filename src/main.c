/* main.c - the spmdc command line.  Parses options and calls the passes;
 * owns no logic of its own.
 *
 *   spmdc compile IN.hlo [--mesh SPEC] [-o OUT.hlo] [--report text|json|none]
 *                        [--report-out FILE] [--dump-after parse|propagate]
 *   spmdc verify IN.hlo [--mesh SPEC] [--seed N] [--program OUT.hlo]
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spmdc/check.h"
#include "spmdc/diag.h"
#include "spmdc/driver.h"
#include "spmdc/hlo.h"
#include "spmdc/memory.h"
#include "spmdc/parse.h"
#include "spmdc/partition.h"
#include "spmdc/propagate.h"
#include "spmdc/report.h"
#include "spmdc/sim.h"
#include "spmdc/sweep.h"
#include "spmdc/verify.h"

#define SPMDC_VERSION "0.1.0"

static void usage(FILE *f)
{
    fputs("usage: spmdc compile IN.hlo [--mesh SPEC] [-o OUT.hlo] [--report text|json|none]\n"
          "                            [--report-out FILE] [--dump-after parse|propagate]\n"
          "       spmdc verify IN.hlo [--mesh SPEC] [--seed N] [--program OUT.hlo]\n"
          "       spmdc check IN.hlo [--mesh SPEC] [--budget FILE] [limits] [--report text|json]\n"
          "       spmdc sweep IN.hlo --mesh 'AXIS=N,N,... ...' [--format text|csv|json] [-o FILE]\n"
          "       spmdc --help | --version\n"
          "\n"
          "SPEC is a device count (8), a shape (2x4) or named axes (x=2,y=4).\n"
          "compile writes the per-device program to stdout (or -o) and the\n"
          "communication report to stderr (or --report-out).  See docs/cli.md.\n",
          f);
}

enum { OPT_MESH = 256, OPT_REPORT, OPT_REPORT_OUT, OPT_DUMP_AFTER, OPT_HELP };

static int cmd_compile(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"mesh", required_argument, NULL, OPT_MESH},
        {"report", required_argument, NULL, OPT_REPORT},
        {"report-out", required_argument, NULL, OPT_REPORT_OUT},
        {"dump-after", required_argument, NULL, OPT_DUMP_AFTER},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    SpmdcOptions opt;
    memset(&opt, 0, sizeof opt);
    const char *out_path = "-", *report_fmt = "text", *report_out = NULL, *dump_after = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_MESH: {
            char err[200];
            if (!mesh_parse_spec(optarg, &opt.mesh, err, sizeof err)) {
                fprintf(stderr, "spmdc: error: %s\n", err);
                return 2;
            }
            opt.has_mesh = true;
            break;
        }
        case OPT_REPORT:
            if (strcmp(optarg, "text") && strcmp(optarg, "json") && strcmp(optarg, "none")) {
                fprintf(stderr, "spmdc: error: --report takes text, json or none, not '%s'\n", optarg);
                return 2;
            }
            report_fmt = optarg;
            break;
        case OPT_REPORT_OUT: report_out = optarg; break;
        case OPT_DUMP_AFTER:
            if (strcmp(optarg, "parse") && strcmp(optarg, "propagate")) {
                fprintf(stderr, "spmdc: error: --dump-after takes parse or propagate, not '%s'\n", optarg);
                return 2;
            }
            dump_after = optarg;
            break;
        case 'o': out_path = optarg; break;
        case OPT_HELP: usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "spmdc: error: compile takes exactly one input file\n");
        usage(stderr);
        return 2;
    }
    const char *in_path = argv[optind];
    const char *outs[2] = {out_path, report_out}, *flags[2] = {"-o", "--report-out"};
    int usage_rc = driver_check_outputs(in_path, outs, flags, report_out && strcmp(report_fmt, "none") ? 2 : 1);
    if (usage_rc) return usage_rc;
    size_t len;
    char *text = driver_read_file(in_path, &len);
    if (!text) return 1;

    DiagEngine *diag = diag_create(stderr);
    uint32_t fid = diag_add_file(diag, strcmp(in_path, "-") ? in_path : "<stdin>", text, len);
    Arena *scratch = arena_create();
    PassCtx cx = {scratch, diag, &opt};
    int rc = 1;
    HloModule *out = NULL;
    CommReport rep;
    memset(&rep, 0, sizeof rep);
    StrBuf prog = {0}, rtext = {0};

    HloModule *m = driver_load_module(text, len, fid, &cx, !dump_after || strcmp(dump_after, "parse"));
    if (!m) goto done;
    if (dump_after) {
        HloPrintOptions po = {true, true, true};
        hlo_print_module(&prog, m, &po);
        if (driver_write_file(out_path, prog.data ? prog.data : "", prog.len)) rc = 0;
        goto done;
    }
    report_init(&rep, m->name, &m->mesh);
    if (!partition_module(m, &out, &rep, &cx)) goto done;
    memory_fill_report(&rep, m, out);
    arena_reset(scratch);
    HloPrintOptions po = {false, false, false};
    hlo_print_module(&prog, out, &po);
    if (strcmp(report_fmt, "json") == 0)
        report_print_json(&rtext, &rep);
    else if (strcmp(report_fmt, "text") == 0)
        report_print_text(&rtext, &rep);
    DriverOutput files[2] = {{out_path, sb_cstr(&prog), prog.len}, {report_out, sb_cstr(&rtext), rtext.len}};
    bool report_file = report_out && strcmp(report_fmt, "none") != 0;
    if (!driver_write_outputs(files, report_file ? 2 : 1)) goto done;
    if (!report_out && strcmp(report_fmt, "none") != 0) fputs(sb_cstr(&rtext), stderr);
    rc = 0;
done:
    if (rc != 0 && diag_error_count(diag) > 0)
        fprintf(stderr, "spmdc: %d error%s; no output written\n", diag_error_count(diag),
                diag_error_count(diag) == 1 ? "" : "s");
    sb_free(&prog);
    sb_free(&rtext);
    report_free(&rep);
    hlo_module_free(out);
    hlo_module_free(m);
    arena_destroy(scratch);
    diag_destroy(diag);
    free(text);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        puts("spmdc " SPMDC_VERSION);
        return 0;
    }
    if (strcmp(argv[1], "compile") == 0) return cmd_compile(argc - 1, argv + 1);
    if (strcmp(argv[1], "verify") == 0) return sim_verify_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "check") == 0) return check_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "sweep") == 0) return sweep_main(argc - 1, argv + 1);
    fprintf(stderr, "spmdc: error: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
