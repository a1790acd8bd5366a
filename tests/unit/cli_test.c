/* cli_test.c - the spmdc binary end to end on the examples: the report's
 * byte counts, each worked out by hand beside its assertion, and the CLI's
 * contracts (exit codes, no output file on error, determinism).
 * Needs SPMDC_BIN and SPMDC_SOURCE_DIR (set by ctest). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spmdc/driver.h"

static const char *bin, *src;

/* Runs a shell command line, returns its exit status; stdout captured in *out (malloc'd). */
static int run(const char *cmdline, char **out)
{
    FILE *p = popen(cmdline, "r");
    assert_non_null(p);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n - 1, p)) > 0) {
        n += got;
        if (n + 1 >= cap) buf = realloc(buf, cap *= 2);
    }
    buf[n] = 0;
    int st = pclose(p);
    if (out) *out = buf;
    else free(buf);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The JSON report of `spmdc compile example --mesh mesh`. */
static json_t *report(const char *example, const char *mesh)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s compile %s/examples/%s %s%s --report json --report-out /dev/stdout -o /dev/null",
             bin, src, example, mesh ? "--mesh " : "", mesh ? mesh : "");
    char *out;
    assert_int_equal(run(cmd, &out), 0);
    json_error_t err;
    json_t *j = json_loads(out, 0, &err);
    free(out);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "schema")), "spmdc.report/v1");
    return j;
}

static json_t *coll(json_t *j, size_t i) { return json_array_get(json_object_get(j, "collectives"), i); }
static size_t n_coll(json_t *j) { return json_array_size(json_object_get(j, "collectives")); }
static long long num(json_t *o, const char *k) { return json_integer_value(json_object_get(o, k)); }
static const char *str(json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }

static void test_mlp_megatron_all_reduce(void **state)
{
    (void)state;
    /* Y = (X.A).B, bf16[8192,8192]: Y per device = 8192*8192*2 = 134,217,728 B.
     * One all-reduce over `model`, ring cost 2(n-1)/n * B. */
    const struct { const char *mesh; long long n, bytes; } cases[] = {
        {"model=8", 8, 234881024}, /* 2*7/8 * 134,217,728 */
        {"model=4", 4, 201326592}, /* 2*3/4 * 134,217,728 */
        {"model=2", 2, 134217728}, /* 2*1/2 * 134,217,728 */
    };
    for (size_t k = 0; k < 3; k++) {
        json_t *j = report("mlp.hlo", cases[k].mesh);
        assert_int_equal(n_coll(j), 1);
        json_t *c = coll(j, 0);
        assert_string_equal(str(c, "kind"), "all-reduce");
        assert_string_equal(str(c, "dtype"), "bf16");
        assert_int_equal(num(c, "group_size"), cases[k].n);
        assert_int_equal(num(c, "num_groups"), 1);
        assert_int_equal(num(c, "bytes_per_device"), cases[k].bytes);
        assert_int_equal(num(json_object_get(j, "totals"), "bytes_per_device"), cases[k].bytes);
        json_decref(j);
    }
}

/* The cause of the MLP's all-reduce names the annotations behind it:
 * h = dot(x, a) is split on dim 1 because a (line 34) is, b is annotated on
 * line 35, and y, whose annotation (line 37) wants it replicated, closes
 * the partial sum.  JSON: the reason without the "y: " prefix. */
static void test_mlp_cause_traced_to_annotations(void **state)
{
    (void)state;
    json_t *j = report("mlp.hlo", "model=8");
    json_t *cause = json_object_get(coll(j, 0), "cause");
    assert_string_equal(str(cause, "instruction"), "y");
    assert_int_equal(num(cause, "line"), 37);
    assert_string_equal(str(cause, "reason"),
                        "contracting dim 1 of lhs h sharded on 'model' (from the annotation on a, line 34) and dim 0 "
                        "of rhs b (annotated, line 35); y is annotated replicated (line 37)");
    json_decref(j);
    /* the table's cause cell: "y (line 37): " and the same words */
    char cmd[1024], *out;
    snprintf(cmd, sizeof cmd, "%s compile %s/examples/mlp.hlo --mesh model=8 --report-out /dev/stdout -o /dev/null",
             bin, src);
    assert_int_equal(run(cmd, &out), 0);
    assert_non_null(strstr(out, "  y (line 37): contracting dim 1 of lhs h sharded on 'model' (from the annotation on a, "
                                "line 34) and dim 0 of rhs b (annotated, line 35); y is annotated replicated (line "
                                "37)\n"));
    free(out);
}

static void test_mlp_parameter_memory(void **state)
{
    (void)state;
    json_t *j = report("mlp.hlo", "model=8");
    json_t *m = json_object_get(j, "memory");
    /* X replicated 134,217,728 + A [8192,1024] 16,777,216 + B [1024,8192] 16,777,216. */
    assert_int_equal(num(m, "parameter_bytes_per_device"), 167772160);
    /* Three bf16[8192,8192]: 3 * 134,217,728. */
    assert_int_equal(num(m, "parameter_bytes_unpartitioned"), 402653184);
    json_decref(j);
}

static void test_mlp_misaligned_costs(void **state)
{
    (void)state;
    json_t *j = report("mlp_misaligned.hlo", "model=8");
    assert_int_equal(n_coll(j), 2);
    /* A arrives split on its input dim: local [1024,8192] bf16 = 16,777,216 B;
     * the all-to-all that moves the split to dim 1 sends 7/8 of it. */
    assert_string_equal(str(coll(j, 0), "kind"), "all-to-all");
    assert_int_equal(num(coll(j, 0), "bytes_per_device"), 14680064);
    /* a is annotated split on dim 0 (line 35); h = dot(x, a) got its split of
     * dim 1 backward from b (line 36), through y = dot(h, b) */
    assert_string_equal(str(json_object_get(coll(j, 0), "cause"), "reason"),
                        "a resharded from [{model}, {}] (annotated, line 35) to [{}, {model}]; h is [{}, {model}] "
                        "(from the annotation on b, line 36)");
    /* Then the same all-reduce as the aligned MLP: 2*7/8 * 134,217,728. */
    assert_string_equal(str(coll(j, 1), "kind"), "all-reduce");
    assert_int_equal(num(coll(j, 1), "bytes_per_device"), 234881024);
    /* 14,680,064 + 234,881,024 */
    assert_int_equal(num(json_object_get(j, "totals"), "bytes_per_device"), 249561088);
    json_decref(j);
}

static void test_2d_mesh_groups(void **state)
{
    (void)state;
    json_t *j = report("mlp_2d_small.hlo", NULL); /* data=2, model=4 */
    assert_int_equal(n_coll(j), 1);
    json_t *c = coll(j, 0);
    /* Y local f32[32,64] (batch 64 split over data=2) = 8,192 B; all-reduce over
     * model (n=4) in 2 groups (one per data index): 2*3/4 * 8,192 = 12,288. */
    assert_int_equal(num(c, "group_size"), 4);
    assert_int_equal(num(c, "num_groups"), 2);
    assert_int_equal(num(c, "bytes_per_device"), 12288);
    assert_string_equal(json_string_value(json_array_get(json_object_get(c, "axes"), 0)), "model");
    /* h = dot(x, a) takes dim 0 from x [{data}, {}] (line 23) and dim 1 from
     * a [{}, {model}] (line 24): the contracting split is traced to a */
    assert_string_equal(str(json_object_get(c, "cause"), "reason"),
                        "contracting dim 1 of lhs h sharded on 'model' (from the annotation on a, line 24) and dim 0 "
                        "of rhs b (annotated, line 25); y is annotated [{data}, {}] (line 27)");
    json_decref(j);
}

static void test_jax_exports(void **state)
{
    (void)state;
    /* JAX MLP block: the second matmul's output f32[8,128] = 4,096 B, all-reduce
     * over model=8: 2*7/8 * 4,096 = 7,168. */
    json_t *j = report("jax_mlp.hlo", NULL);
    assert_int_equal(n_coll(j), 1);
    assert_int_equal(num(coll(j, 0), "bytes_per_device"), 7168);
    json_decref(j);
    /* Attention block on data=2, model=4: output projection f32[4,16,128] =
     * 32,768 B, all-reduce over model (n=4): 2*3/4 * 32,768 = 49,152. */
    j = report("jax_attention.hlo", NULL);
    assert_int_equal(n_coll(j), 1);
    assert_int_equal(num(coll(j, 0), "group_size"), 4);
    assert_int_equal(num(coll(j, 0), "num_groups"), 2);
    assert_int_equal(num(coll(j, 0), "bytes_per_device"), 49152);
    json_decref(j);
}

/* Expects collectives (kind, bytes) in program order and their total. */
static void expect_plan(json_t *j, const char *const *kinds, const long long *bytes, size_t n, long long total)
{
    assert_int_equal(n_coll(j), n);
    for (size_t k = 0; k < n; k++) {
        assert_string_equal(str(coll(j, k), "kind"), kinds[k]);
        assert_int_equal(num(coll(j, k), "bytes_per_device"), bytes[k]);
    }
    assert_int_equal(num(json_object_get(j, "totals"), "bytes_per_device"), total);
    assert_int_equal(json_array_size(json_object_get(j, "warnings")), 0);
}

static void test_training_steps(void **state)
{
    (void)state;
    /* Megatron MLP training step (model=8): the forward's row-parallel matmul
     * and the backward's input gradient (dX = dH.W1^T, contracting the split
     * hidden dim) each leave a partial f32[8,128] = 4,096 B: two all-reduces
     * of 2*7/8 * 4,096 = 7,168 B; the weight gradients are local. XLA: the same. */
    static const char *const ar2[] = {"all-reduce", "all-reduce"};
    static const long long mlp[] = {7168, 7168};
    json_t *j = report("jax_mlp_train.hlo", NULL);
    expect_plan(j, ar2, mlp, 2, 14336);
    json_decref(j);
    /* Data-parallel SGD step (batch split over 8, parameters replicated): the
     * loss f32[] (4 B: floor(2*7/8*4) = 7) and one all-reduce per gradient:
     * dW1 f32[64,32] (8,192 B -> 14,336), db1 f32[64] (256 -> 448), dW2
     * f32[16,64] (4,096 -> 7,168), db2 f32[16] (64 -> 112): 22,071 B, as XLA. */
    static const char *const ar5[] = {"all-reduce", "all-reduce", "all-reduce", "all-reduce", "all-reduce"};
    static const long long dp[] = {7, 14336, 448, 7168, 112};
    j = report("jax_dp_train.hlo", NULL);
    expect_plan(j, ar5, dp, 5, 22071);
    json_decref(j);
    /* The same step with the parameters sharded over data (ZeRO-3): W1, b1, W2
     * all-gathered for the forward (7/8 of 8,192, 256 and 4,096 B: 7,168, 224,
     * 3,584), the loss all-reduced (7), and the gradients reduce-scattered
     * straight into the parameters' shards (7/8 of the same operands: 7,168,
     * 224, 3,584); db2 (b2 replicated) all-reduced (112).  22,071 B in all,
     * where XLA all-reduces the gradients and slices them (33,047 B). */
    static const char *const zk[] = {"all-gather", "all-gather", "all-gather", "all-reduce",
                                     "reduce-scatter", "reduce-scatter", "reduce-scatter", "all-reduce"};
    static const long long zb[] = {7168, 224, 3584, 7, 7168, 224, 3584, 112};
    j = report("jax_dp_train_zero.hlo", NULL);
    expect_plan(j, zk, zb, 8, 22071);
    json_decref(j);
}

static void test_error_writes_nothing(void **state)
{
    (void)state;
    char dir[] = "/tmp/spmdc_cli_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char in[300], out[300], cmd[1024];
    snprintf(in, sizeof in, "%s/bad.hlo", dir);
    snprintf(out, sizeof out, "%s/out.hlo", dir);
    FILE *f = fopen(in, "w");
    fputs("HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT r = f32[4] frobnicate(p)\n}\n", f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s compile %s -o %s 2>&1", bin, in, out);
    char *text;
    assert_int_equal(run(cmd, &text), 1);
    assert_non_null(strstr(text, "bad.hlo:4:"));
    assert_non_null(strstr(text, "error:"));
    free(text);
    struct stat st;
    assert_int_not_equal(stat(out, &st), 0); /* no partial output */
    snprintf(cmd, sizeof cmd, "%s compile --report bogus %s 2>/dev/null", bin, in);
    assert_int_equal(run(cmd, NULL), 2); /* usage error */
    unlink(in);
    rmdir(dir);
}

static void test_output_through_symlinks(void **state)
{
    (void)state;
    char dir[] = "/tmp/spmdc_link_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char link[300], target[300], cmd[1024];
    snprintf(link, sizeof link, "%s/link.hlo", dir);
    snprintf(target, sizeof target, "%s/target.hlo", dir);
    assert_int_equal(symlink("target.hlo", link), 0); /* dangling: the target does not exist yet */
    snprintf(cmd, sizeof cmd, "%s compile %s/examples/mlp_small.hlo -o %s --report none", bin, src, link);
    assert_int_equal(run(cmd, NULL), 0);
    struct stat st;
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode)); /* the link survives */
    assert_int_equal(stat(target, &st), 0);
    assert_true(S_ISREG(st.st_mode) && st.st_size > 0);
    assert_int_equal(run(cmd, NULL), 0); /* and again through a live link */
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    unlink(link);
    unlink(target);
    rmdir(dir);
}

/* A report or explanation that cannot be written to standard error fails
 * the run (exit 1), though the program was written: a CI gate reading the
 * report from stderr must not pass on nothing. */
static void test_stderr_report_lost_fails(void **state)
{
    (void)state;
    struct stat st;
    if (stat("/dev/full", &st) != 0 || !S_ISCHR(st.st_mode)) skip();
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s compile %s/examples/mlp_small.hlo --report json -o /dev/null 2>/dev/full", bin, src);
    assert_int_equal(run(cmd, NULL), 1);
    snprintf(cmd, sizeof cmd, "%s compile %s/examples/mlp_small.hlo --report none -o /dev/null 2>/dev/full", bin, src);
    assert_int_equal(run(cmd, NULL), 0);
    snprintf(cmd, sizeof cmd, "%s propagate %s/examples/mlp_small.hlo --explain -o /dev/null 2>/dev/full", bin, src);
    assert_int_equal(run(cmd, NULL), 1);
    snprintf(cmd, sizeof cmd, "%s propagate %s/examples/mlp_small.hlo -o /dev/null 2>/dev/full", bin, src);
    assert_int_equal(run(cmd, NULL), 0);
}

static void test_deterministic(void **state)
{
    (void)state;
    char cmd[1024];
    char *a, *b;
    snprintf(cmd, sizeof cmd, "%s compile %s/examples/jax_attention.hlo --report json 2>&1", bin, src);
    assert_int_equal(run(cmd, &a), 0);
    assert_int_equal(run(cmd, &b), 0);
    assert_string_equal(a, b);
    free(a);
    free(b);
}

/* ------------------------------------------------------------ streamed outputs */

/* 4.7 MB of numbered lines, a flush point after each (several chunks of
 * SB_SINK_CHUNK through the driver's sink) and a tail after the last. */
static void emit_lines(StrBuf *b, const void *ctx)
{
    (void)ctx;
    for (int i = 0; i < 300000; i++) {
        sb_int(b, i);
        sb_puts(b, " abcdefgh\n");
        sb_flush_point(b);
    }
    sb_puts(b, "end");
}

static size_t entries(const char *dir)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls -A %s | wc -l", dir);
    char *out;
    assert_int_equal(run(cmd, &out), 0);
    size_t n = (size_t)atoi(out);
    free(out);
    return n;
}

/* An output with an emit function streams into its temporary; a failure of
 * any output (a missing directory, a full device written in place after
 * the temporary was filled) leaves no file and no temporary. */
static void test_streamed_outputs_all_or_nothing(void **state)
{
    (void)state;
    char dir[] = "/tmp/spmdc-cli-test.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char a[128], b[128], missing[128];
    snprintf(a, sizeof a, "%s/a.txt", dir);
    snprintf(b, sizeof b, "%s/b.txt", dir);
    snprintf(missing, sizeof missing, "%s/no/such/dir.txt", dir);
    DriverOutput outs[2] = {{a, NULL, 0, emit_lines, NULL, NULL}, {missing, "x", 1, NULL, NULL, NULL}};
    assert_false(driver_write_outputs(outs, 2));
    assert_int_equal(entries(dir), 0);
    struct stat st;
    if (stat("/dev/full", &st) == 0 && S_ISCHR(st.st_mode)) {
        outs[1] = (DriverOutput){"/dev/full", NULL, 0, emit_lines, NULL, NULL};
        assert_false(driver_write_outputs(outs, 2)); /* ENOSPC after a's temporary was written */
        assert_int_equal(entries(dir), 0);
    }
    outs[1] = (DriverOutput){b, "x", 1, NULL, NULL, NULL};
    assert_true(driver_write_outputs(outs, 2));
    assert_int_equal(entries(dir), 2);
    StrBuf want = {0};
    emit_lines(&want, NULL);
    char cmd[512], *out;
    snprintf(cmd, sizeof cmd, "cat %s", a);
    assert_int_equal(run(cmd, &out), 0);
    /* 1,688,890 digits (10*1 + 90*2 + 900*3 + 9,000*4 + 90,000*5 + 200,000*6),
     * 300,000 x " abcdefgh\n" (10 B), "end": 4,688,893 B */
    assert_int_equal(want.len, 4688893);
    assert_int_equal(strlen(out), want.len);
    assert_string_equal(out, sb_cstr(&want));
    free(out);
    /* two printed outputs: the second is printed on a thread of its own
     * while the first is printed here; both files hold every byte */
    outs[1] = (DriverOutput){b, NULL, 0, emit_lines, NULL, NULL};
    assert_true(driver_write_outputs(outs, 2));
    assert_int_equal(entries(dir), 2);
    for (int k = 0; k < 2; k++) {
        snprintf(cmd, sizeof cmd, "cat %s", k ? b : a);
        assert_int_equal(run(cmd, &out), 0);
        assert_int_equal(strlen(out), want.len);
        assert_string_equal(out, sb_cstr(&want));
        free(out);
    }
    sb_free(&want);
    snprintf(cmd, sizeof cmd, "rm -r %s", dir);
    assert_int_equal(run(cmd, NULL), 0);
}

/* An input of DRIVER_MAP_MIN bytes or more is mapped, and a mapping shows
 * the file as it is now: one rewritten in place with as many bytes after it
 * was opened is reported changed (its parse may have read bytes of two
 * versions), one left alone is not; a copied (smaller) input is the file as
 * it was read, whatever happens to the file afterwards. */
static void test_mapped_input_rewritten_is_changed(void **state)
{
    (void)state;
    char path[] = "/tmp/spmdc_cli_map_XXXXXX";
    int w = mkstemp(path);
    assert_true(w >= 0);
    size_t n = DRIVER_MAP_MIN + 100;
    char *bytes = malloc(n);
    memset(bytes, 'a', n);
    assert_int_equal(write(w, bytes, n), (ssize_t)n);
    const struct timespec old_times[2] = {{946684800, 0}, {946684800, 0}};
    assert_int_equal(futimens(w, old_times), 0);

    size_t len = 0;
    int fd = -1;
    struct stat as_read;
    char *text = driver_read_file_fd(path, &len, &fd, &as_read);
    assert_non_null(text);
    assert_int_equal(len, n);
    assert_true(fd >= 0);
    assert_int_equal(text[n], 0);
    assert_false(driver_text_changed(text, fd, &as_read));
    assert_int_equal(pwrite(w, "b", 1, 10), 1); /* as many bytes: only the times move */
    assert_true(driver_text_changed(text, fd, &as_read));
    driver_free_text(text, len);
    close(fd);

    /* below DRIVER_MAP_MIN: copied, never "changed" */
    assert_int_equal(ftruncate(w, 100), 0);
    assert_int_equal(futimens(w, old_times), 0);
    text = driver_read_file_fd(path, &len, &fd, &as_read);
    assert_non_null(text);
    assert_int_equal(len, 100);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(w, "c", 1, 10), 1);
    assert_false(driver_text_changed(text, fd, &as_read));
    assert_int_equal(text[10], 'b');
    driver_free_text(text, len);
    close(fd);
    close(w);
    unlink(path);
    free(bytes);
}

/* A FIFO is read through the one descriptor its path was opened with: its
 * writer, released by that open, may write everything and close at once,
 * and a second open (after a look at whether the input could be mapped)
 * found the FIFO without its data (nobody held it open) and waited forever
 * for another writer, or left the writer a broken pipe.  The writer here
 * writes the moment a reader exists. */
static void test_fifo_input_read_once(void **state)
{
    (void)state;
    char dir[] = "/tmp/spmdc_cli_fifo_XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/in.hlo", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    /* more than a pipe holds: the writer is still writing when the reader
     * has looked at the FIFO */
    size_t n = 1 << 20;
    char *data = malloc(n + 1);
    for (size_t i = 0; i < n; i++) data[i] = (char)('a' + i % 26);
    data[n] = 0;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(10);
        signal(SIGPIPE, SIG_IGN);
        int w;
        while ((w = open(path, O_WRONLY | O_NONBLOCK)) < 0) /* ENXIO until a reader exists */
            if (errno != ENXIO) _exit(2);
        fcntl(w, F_SETFL, 0);
        for (size_t k = 0; k < n;) {
            ssize_t got = write(w, data + k, n - k);
            if (got <= 0) _exit(3);
            k += (size_t)got;
        }
        _exit(0);
    }
    alarm(10); /* a hang fails the test */
    size_t len = 0;
    int fd = -1;
    struct stat as_read;
    char *text = driver_read_file_fd(path, &len, &fd, &as_read);
    alarm(0);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_non_null(text);
    assert_int_equal(fd, -1); /* a FIFO is no file to re-read */
    assert_int_equal(len, n);
    assert_string_equal(text, data);
    driver_free_text(text, len);
    free(data);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    bin = getenv("SPMDC_BIN");
    src = getenv("SPMDC_SOURCE_DIR");
    if (!bin || !src) {
        fprintf(stderr, "cli_test: SPMDC_BIN and SPMDC_SOURCE_DIR must be set (ctest sets them)\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp_megatron_all_reduce),
        cmocka_unit_test(test_mapped_input_rewritten_is_changed),
        cmocka_unit_test(test_fifo_input_read_once),
        cmocka_unit_test(test_mlp_cause_traced_to_annotations),
        cmocka_unit_test(test_mlp_parameter_memory),
        cmocka_unit_test(test_mlp_misaligned_costs),
        cmocka_unit_test(test_2d_mesh_groups),
        cmocka_unit_test(test_jax_exports),
        cmocka_unit_test(test_training_steps),
        cmocka_unit_test(test_error_writes_nothing),
        cmocka_unit_test(test_output_through_symlinks),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_stderr_report_lost_fails),
        cmocka_unit_test(test_streamed_outputs_all_or_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
