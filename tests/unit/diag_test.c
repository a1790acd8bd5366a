/* diag_test.c - the exact diagnostic format, excerpts, limits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "spmdc/diag.h"

static void test_error_with_caret(void **state)
{
    (void)state;
    DiagEngine *d = diag_create(NULL);
    const char *src = "HloModule m\n  x = f32[] foo()\n";
    uint32_t f = diag_add_file(d, "m.hlo", src, strlen(src));
    SrcSpan sp = {{f, 2, 13}, {f, 2, 15}}; /* 'foo' */
    diag_error(d, sp, "unknown opcode '%s'", "foo");
    assert_string_equal(diag_text(d), "m.hlo:2:13: error: unknown opcode 'foo'\n"
                                      "    x = f32[] foo()\n"
                                      "              ^~~\n");
    assert_int_equal(diag_error_count(d), 1);
    diag_destroy(d);
}

static void test_no_location_and_levels(void **state)
{
    (void)state;
    DiagEngine *d = diag_create(NULL);
    diag_warning(d, SRC_SPAN_NONE, "w %d", 1);
    diag_note(d, SRC_SPAN_NONE, "n");
    assert_string_equal(diag_text(d), "spmdc: warning: w 1\nspmdc: note: n\n");
    assert_int_equal(diag_error_count(d), 0);
    assert_int_equal(diag_warning_count(d), 1);
    diag_destroy(d);
}

static void test_error_limit(void **state)
{
    (void)state;
    DiagEngine *d = diag_create(NULL);
    diag_set_error_limit(d, 2);
    for (int i = 0; i < 5; i++) diag_error(d, SRC_SPAN_NONE, "e%d", i);
    assert_string_equal(diag_text(d), "spmdc: error: e0\nspmdc: error: e1\n"
                                      "spmdc: note: too many errors; further errors are not shown\n");
    assert_int_equal(diag_error_count(d), 5);
    diag_destroy(d);
}

static void test_line_out_of_range_and_last_line(void **state)
{
    (void)state;
    DiagEngine *d = diag_create(NULL);
    const char *src = "abc"; /* no trailing newline */
    uint32_t f = diag_add_file(d, "t.hlo", src, 3);
    diag_error(d, src_span_at(f, 1, 4), "end");
    diag_error(d, src_span_at(f, 9, 1), "far");
    assert_string_equal(diag_text(d), "t.hlo:1:4: error: end\n  abc\n     ^\n"
                                      "t.hlo:9:1: error: far\n");
    diag_destroy(d);
}

/* Hidden warnings are neither printed nor counted, nor are their notes;
 * errors and their notes always are. */
static void test_hidden_warnings(void **state)
{
    (void)state;
    DiagEngine *d = diag_create(NULL);
    diag_set_show_warnings(d, false);
    diag_warning(d, SRC_SPAN_NONE, "w");
    diag_note(d, SRC_SPAN_NONE, "of w");
    diag_error(d, SRC_SPAN_NONE, "e");
    diag_note(d, SRC_SPAN_NONE, "of e");
    diag_set_show_warnings(d, true);
    diag_warning(d, SRC_SPAN_NONE, "w2");
    assert_string_equal(diag_text(d), "spmdc: error: e\nspmdc: note: of e\nspmdc: warning: w2\n");
    assert_int_equal(diag_error_count(d), 1);
    assert_int_equal(diag_warning_count(d), 1);
    diag_destroy(d);
}

/* A text released by its owner (freed at once) is re-read from the file
 * for the first excerpt that needs it, so the excerpt is the one the text
 * gave; a file whose bytes have changed since (same size or not) gets none. */
/* A temporary file (path: a mkstemp template) holding src; its descriptor. */
static int temp_file_with(char *path, const char *src)
{
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, src, strlen(src)), (ssize_t)strlen(src));
    return fd;
}

static void test_released_text_is_reread(void **state)
{
    (void)state;
    char path[] = "/tmp/spmdc_diag_test_XXXXXX";
    const char *src = "HloModule m\n  x = f32[] foo()\n";
    size_t n = strlen(src);
    int fd = temp_file_with(path, src);
    SrcSpan sp = {{1, 2, 13}, {1, 2, 15}}; /* 'foo' */

    char *text = malloc(n + 1);
    memcpy(text, src, n + 1);
    DiagEngine *d = diag_create(NULL);
    uint32_t f = diag_add_file(d, "m.hlo", text, n);
    assert_int_equal(f, 1);
    diag_release_text(d, f, dup(fd), NULL);
    memset(text, '?', n);
    free(text);
    diag_error(d, sp, "unknown opcode '%s'", "foo");
    diag_warning(d, src_span_at(f, 1, 1), "second");
    assert_string_equal(diag_text(d), "m.hlo:2:13: error: unknown opcode 'foo'\n"
                                      "    x = f32[] foo()\n"
                                      "              ^~~\n"
                                      "m.hlo:1:1: warning: second\n"
                                      "  HloModule m\n"
                                      "  ^\n");
    diag_destroy(d);

    d = diag_create(NULL);
    f = diag_add_file(d, "m.hlo", src, n);
    /* the file's times set well in the past first, so the rewrite below
     * moves them whatever the clock's granularity */
    const struct timespec old_times[2] = {{946684800, 0}, {946684800, 0}};
    assert_int_equal(futimens(fd, old_times), 0);
    diag_release_text(d, f, dup(fd), NULL);
    /* rewritten in place with as many bytes: the excerpt would show text the
     * message is not about ("  y = s32[] bar()" under a caret at 'foo') */
    const char *other = "HloModule m\n  y = s32[] bar()\n";
    assert_int_equal(strlen(other), n);
    assert_int_equal(pwrite(fd, other, n, 0), (ssize_t)n);
    diag_error(d, sp, "unknown opcode '%s'", "foo");
    assert_string_equal(diag_text(d), "m.hlo:2:13: error: unknown opcode 'foo'\n");
    diag_destroy(d);

    d = diag_create(NULL);
    f = diag_add_file(d, "m.hlo", other, n);
    diag_release_text(d, f, dup(fd), NULL);
    assert_int_equal(ftruncate(fd, 4), 0);
    diag_error(d, sp, "unknown opcode '%s'", "foo");
    assert_string_equal(diag_text(d), "m.hlo:2:13: error: unknown opcode 'foo'\n");
    diag_destroy(d);
    close(fd);
    unlink(path);
}

/* The stamp a released text is checked against is the file as it was read
 * (as_read), not as it is at release: a file rewritten in place with as
 * many bytes while its text was parsed gets no excerpts (they would show
 * the new bytes under a caret placed in the old ones), and a file left
 * alone since it was read gets them. */
static void test_released_text_checked_against_read_stamp(void **state)
{
    (void)state;
    char path[] = "/tmp/spmdc_diag_test_XXXXXX";
    const char *src = "HloModule m\n  x = f32[] foo()\n";
    size_t n = strlen(src);
    int fd = temp_file_with(path, src);
    const struct timespec old_times[2] = {{946684800, 0}, {946684800, 0}};
    assert_int_equal(futimens(fd, old_times), 0);
    SrcSpan sp = {{1, 2, 13}, {1, 2, 15}}; /* 'foo' */
    struct stat as_read;
    assert_int_equal(fstat(fd, &as_read), 0);

    /* unchanged since it was read: the excerpt */
    DiagEngine *d = diag_create(NULL);
    uint32_t f = diag_add_file(d, "m.hlo", src, n);
    diag_release_text(d, f, dup(fd), &as_read);
    diag_error(d, sp, "unknown opcode '%s'", "foo");
    assert_string_equal(diag_text(d), "m.hlo:2:13: error: unknown opcode 'foo'\n"
                                      "    x = f32[] foo()\n"
                                      "              ^~~\n");
    diag_destroy(d);

    /* rewritten between the read and the release: none */
    d = diag_create(NULL);
    f = diag_add_file(d, "m.hlo", src, n);
    const char *other = "HloModule m\n  y = s32[] bar()\n";
    assert_int_equal(pwrite(fd, other, n, 0), (ssize_t)n);
    diag_release_text(d, f, dup(fd), &as_read);
    diag_error(d, sp, "unknown opcode '%s'", "foo");
    assert_string_equal(diag_text(d), "m.hlo:2:13: error: unknown opcode 'foo'\n");
    diag_destroy(d);
    close(fd);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_with_caret),
        cmocka_unit_test(test_no_location_and_levels),
        cmocka_unit_test(test_error_limit),
        cmocka_unit_test(test_line_out_of_range_and_last_line),
        cmocka_unit_test(test_hidden_warnings),
        cmocka_unit_test(test_released_text_is_reread),
        cmocka_unit_test(test_released_text_checked_against_read_stamp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
