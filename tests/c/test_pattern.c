/*
 * test_pattern.c — C tests of compiled pre-split patterns (csrc/pattern.c), on
 * the programs tests/fuzz/gen_pattern_programs.py writes to a directory:
 *   (a) tiktoken's three patterns, compiled, split texts as the hand-written
 *       splitters do; every program covers each text with non-empty pieces;
 *   (b) the matcher on a text that may go on: a long run fed a byte at a time
 *       is matched again after each byte with one kept scan (which resumes),
 *       and once the match no longer depends on the end it is the whole
 *       text's;
 *   (c) each program's representatives are one character per class, each
 *       of its own class;
 *   (d) built with -DTKI_TEST_ALLOC_FAILURES (.ci/sanitize.sh): every
 *       allocation of tki_pattern_load failed in turn gives TKI_ERR_NOMEM (or
 *       a working pattern, where only an optional shrink failed) and leaks
 *       nothing, and the next load works.
 * Usage: test_pattern PROGRAM_DIR [--alloc-failures-only].
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "rank_file.h"

static int g_failures = 0;

#define CHECK(condition, ...)                                                        \
    do {                                                                             \
        if (!(condition)) {                                                          \
            fprintf(stderr, "%s:%d: check failed: %s\n  ", __FILE__, __LINE__, #condition); \
            fprintf(stderr, __VA_ARGS__);                                            \
            fputc('\n', stderr);                                                     \
            g_failures++;                                                            \
        }                                                                            \
    } while (0)

enum { PROGRAMS = 8 };
static const char *const program_names[PROGRAMS] = {"r50k", "cl100k", "o200k", "llama3",
                                                    "qwen2", "qwen3_5", "tekken", "kimi_k2"};
static uint8_t *programs[PROGRAMS];
static size_t program_lengths[PROGRAMS];

static const char *const texts[] = {
    "Hello world!! don't   stop\n\n  x 12345 \xe4\xb8\xad\xe6\x96\x87 \xc3\x89" "COLE \xc3\xa9" "cole   ",
    "a\n\t\t\t b", "HELLO'S they're I'LL we'VE", "  \n ", "\xff\xfe\xc3(\xe2\x82", "x", "",
    "    def f(x):\n        return x  # comment\r\n\r\n", "\xf0\x9f\x98\x80\xf0\x9f\x98\x80 ok\xc2\xa0\xc2\xa0",
};

static int load_programs(const char *dir) {
    for (int i = 0; i < PROGRAMS; i++) {
        char path[4200];
        snprintf(path, sizeof(path), "%s/%s.tkip", dir, program_names[i]);
        if (tki_read_file(path, &programs[i], &program_lengths[i]) != 0) {
            fprintf(stderr, "test_pattern: cannot read %s\n", path);
            return -1;
        }
    }
    return 0;
}

/* (a) */
static void test_splits(void) {
    static const int32_t builtins[3] = {TKI_PATTERN_R50K, TKI_PATTERN_CL100K, TKI_PATTERN_O200K};
    for (int i = 0; i < PROGRAMS; i++) {
        tki_pattern *pattern = NULL;
        CHECK(tki_pattern_load(programs[i], program_lengths[i], &pattern) == TKI_OK, "%s", program_names[i]);
        if (pattern == NULL) {
            continue;
        }
        for (size_t t = 0; t < sizeof(texts) / sizeof(texts[0]); t++) {
            const uint8_t *data = (const uint8_t *)texts[t];
            size_t len = strlen(texts[t]), count = 0, want_count = 0;
            size_t ends[256], want[256];
            CHECK(tki_pattern_pretokenize(pattern, data, len, ends, 256, &count) == TKI_OK, "%s", program_names[i]);
            for (size_t k = 0; k < count; k++) {
                CHECK(ends[k] > (k ? ends[k - 1] : 0), "%s text %zu piece %zu", program_names[i], t, k);
            }
            CHECK(count == 0 ? len == 0 : ends[count - 1] == len, "%s text %zu", program_names[i], t);
            if (i < 3 && len > 0) {
                CHECK(tki_pretokenize(builtins[i], data, len, want, 256, &want_count) == TKI_OK, "builtin");
                CHECK(want_count == count && memcmp(want, ends, count * sizeof(size_t)) == 0,
                      "%s text %zu: compiled split differs from the hand-written one", program_names[i], t);
            }
        }
        tki_pattern_free(pattern);
    }
    CHECK(tki_pattern_load(programs[0], program_lengths[0] - 1, &(tki_pattern *){NULL}) == TKI_ERR_ARGUMENT,
          "a truncated program");
}

/* (b): "\n" then n spaces then "x", fed a byte at a time, the open piece matched after each. */
static void test_open_text(void) {
    enum { RUN = 20000 };
    uint8_t *text = malloc(RUN + 2);
    CHECK(text != NULL, "malloc");
    if (text == NULL) {
        return;
    }
    text[0] = '\n';
    memset(text + 1, ' ', RUN);
    text[RUN + 1] = 'x';
    for (int i = 0; i < PROGRAMS; i++) {
        tki_pattern *pattern = NULL;
        if (tki_pattern_load(programs[i], program_lengths[i], &pattern) != TKI_OK) {
            continue;
        }
        tki_pattern_scan scan;
        tki_pattern_scan_reset(&scan);
        size_t whole_end;
        {
            tki_pattern_scan fresh;
            tki_pattern_scan_reset(&fresh);
            whole_end = tki_pattern_match(pattern, &fresh, text, RUN + 2, 0, 1, NULL);
        }
        size_t end = 0;
        int touched = 1;
        for (size_t len = 1; len <= RUN + 2 && touched; len++) {
            end = tki_pattern_match(pattern, &scan, text, len, 0, 0, &touched);
            CHECK(scan.open_scanned <= len, "%s: scanned %zu of %zu", program_names[i], scan.open_scanned, len);
        }
        CHECK(!touched && end == whole_end, "%s: open piece %zu, whole text %zu", program_names[i], end, whole_end);
        tki_pattern_free(pattern);
    }
    free(text);
}

/* (c) */
static void test_representatives(void) {
    for (int i = 0; i < PROGRAMS; i++) {
        tki_pattern *pattern = NULL;
        if (tki_pattern_load(programs[i], program_lengths[i], &pattern) != TKI_OK) {
            continue;
        }
        uint32_t out[256];
        size_t count = 0;
        uint32_t atoms = tki_pattern_atom_count(pattern);
        CHECK(tki_pattern_representatives(pattern, out, atoms, &count) == TKI_OK && count >= 2 && count <= atoms,
              "%s: %zu of %u", program_names[i], count, atoms);
        CHECK(count == 0 || tki_pattern_representatives(pattern, out, count - 1, &count) == TKI_ERR_ARGUMENT,
              "%s: capacity too small", program_names[i]);
        tki_pattern_free(pattern);
    }
}

#ifdef TKI_TEST_ALLOC_FAILURES
#include "alloc_failures.h"

/* (d) */
static void test_alloc_failures(void) {
    for (int i = 0; i < PROGRAMS; i++) {
        int64_t n = 0;
        for (;; n++) {
            tki_pattern *pattern = NULL;
            arm_failure(n);
            int32_t status = tki_pattern_load(programs[i], program_lengths[i], &pattern);
            if (!disarm_failure()) {
                CHECK(status == TKI_OK, "%s: no failure, status %d", program_names[i], (int)status);
                tki_pattern_free(pattern);
                break;
            }
            /* (a failed shrink of the class table keeps the larger one: a success) */
            CHECK((status == TKI_ERR_NOMEM && pattern == NULL) || (status == TKI_OK && pattern != NULL),
                  "%s: allocation %lld fails: status %d", program_names[i], (long long)n, (int)status);
            tki_pattern_free(pattern);
        }
        printf("allocation failures: loading %s makes %lld allocations\n", program_names[i], (long long)n);
    }
}
#endif

int main(int argc, char **argv) {
    if (argc < 2 || load_programs(argv[1]) != 0) {
        fprintf(stderr, "usage: %s PROGRAM_DIR [--alloc-failures-only]\n", argv[0]);
        return 2;
    }
    int alloc_failures_only = argc > 2 && strcmp(argv[2], "--alloc-failures-only") == 0;
#ifdef TKI_TEST_ALLOC_FAILURES
    test_alloc_failures();
#endif
    if (!alloc_failures_only) {
        test_splits();
        test_open_text();
        test_representatives();
    }
    for (int i = 0; i < PROGRAMS; i++) {
        free(programs[i]);
    }
    if (g_failures > 0) {
        fprintf(stderr, "test_pattern: %d checks failed\n", g_failures);
        return 1;
    }
    printf("test_pattern: all checks passed\n");
    return 0;
}
