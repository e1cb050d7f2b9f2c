/*
 * fuzz_pattern.c — owns the fuzz target for compiled pre-split patterns
 * (csrc/pattern.c), over the programs of tiktoken's three patterns and of the
 * open-model patterns (written to $TKI_PATTERN_DIR, default build/patterns,
 * by tests/fuzz/gen_pattern_programs.py).  On every input text:
 *   - the pieces are non-empty, ascending and cover the text; one capacity
 *     too few gives TKI_ERR_ARGUMENT;
 *   - tiktoken's three patterns, compiled, split exactly as the hand-written
 *     splitters (tki_pretokenize), which the Python tests hold to tiktoken;
 *   - Llama 3's pattern, which borrows cl100k's hand-written splitter in
 *     one-shot encoding (tki_pattern_use_builtin), has the pieces of that
 *     splitter up to the one that reaches the end of the text;
 *   - a text that may go on: on a prefix of the text, a match that says it
 *     did not depend on the end (touched_end 0) is the match on the whole
 *     text, and one that says it did is the match as if the text ended there;
 *   - the same matches come out when one scan is kept while the text grows
 *     byte by byte (resumed scans and remembered runs) as from fresh scans;
 *   - the split (tki_pattern_pretokenize: pieces in a row, tki_pattern_split)
 *     gives the pieces that tki_pattern_match gives one at a time from fresh
 *     scans, and on a prefix of the text tki_pattern_split, a few pieces per
 *     call and its scan kept, hands out only pieces of the whole text.
 * An input that starts with 0xFF instead alters a program with the bytes that
 * follow: it must be refused, or load and split a fixed text as above.
 */
#include "fuzz_common.h"
#include "internal.h"

enum { MAX_TEXT = 1 << 12, PROGRAMS = 8, BUILTINS = 3, GROWTH = 256, LLAMA3 = 3 };

static const char *const program_names[PROGRAMS] = {"r50k", "cl100k", "o200k", "llama3",
                                                    "qwen2", "qwen3_5", "tekken", "kimi_k2"};
static const int32_t builtin_ids[BUILTINS] = {TKI_PATTERN_R50K, TKI_PATTERN_CL100K, TKI_PATTERN_O200K};
static tki_pattern *patterns[PROGRAMS];
static uint8_t *programs[PROGRAMS];
static size_t program_lengths[PROGRAMS];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *dir = getenv("TKI_PATTERN_DIR");
    for (int i = 0; i < PROGRAMS; i++) {
        char path[4200];
        snprintf(path, sizeof(path), "%s/%s.tkip", dir != NULL && dir[0] ? dir : "build/patterns",
                 program_names[i]);
        if (tki_read_file(path, &programs[i], &program_lengths[i]) != 0) {
            fprintf(stderr, "fuzz: cannot read %s (run tests/fuzz/gen_pattern_programs.py, set TKI_PATTERN_DIR)\n",
                    path);
            abort();
        }
        int32_t status = tki_pattern_load(programs[i], program_lengths[i], &patterns[i]);
        FUZZ_CHECK(status == TKI_OK, "%s: load status %d", path, (int)status);
    }
    return 0;
}

/* The piece ends of data[0..len) (exact-size copy); *ends must be freed. */
static size_t split(const tki_pattern *pattern, const uint8_t *data, size_t len, size_t **ends) {
    uint8_t *copy = fuzz_copy(data, len);
    *ends = fuzz_malloc((len + 1) * sizeof(size_t));
    size_t count = SIZE_MAX;
    int32_t status = tki_pattern_pretokenize(pattern, copy, len, *ends, len, &count);
    FUZZ_CHECK(status == TKI_OK, "split: status %d", (int)status);
    FUZZ_CHECK(len == 0 ? count == 0 : count >= 1 && count <= len, "%zu pieces of %zu bytes", count, len);
    for (size_t k = 0; k < count; k++) {
        size_t previous = k == 0 ? 0 : (*ends)[k - 1];
        FUZZ_CHECK((*ends)[k] > previous && (*ends)[k] <= len, "piece %zu ends at %zu", k, (*ends)[k]);
    }
    FUZZ_CHECK(count == 0 || (*ends)[count - 1] == len, "pieces end before the text");
    if (count >= 1) {
        size_t got = 0;
        FUZZ_CHECK(tki_pattern_pretokenize(pattern, copy, len, *ends, count - 1, &got) == TKI_ERR_ARGUMENT,
                   "a capacity one piece too few");
        status = tki_pattern_pretokenize(pattern, copy, len, *ends, len, &count); /* restore */
        FUZZ_CHECK(status == TKI_OK, "split again: status %d", (int)status);
    }
    free(copy);
    return count;
}

/* The open-text contract at the cut, from fresh scans and from one kept scan. */
static void check_open_text(const tki_pattern *pattern, const uint8_t *data, size_t len,
                            const size_t *ends, size_t count, size_t cut) {
    size_t start = 0;
    for (size_t k = 0; k < count && start < cut; k++) {
        tki_pattern_scan fresh;
        tki_pattern_scan_reset(&fresh);
        int touched = -1;
        size_t end = tki_pattern_match(pattern, &fresh, data, cut, start, 0, &touched);
        tki_pattern_scan final_scan;
        tki_pattern_scan_reset(&final_scan);
        size_t as_final = tki_pattern_match(pattern, &final_scan, data, cut, start, 1, NULL);
        FUZZ_CHECK(end == as_final, "open match at %zu of %zu: %zu, as final %zu", start, cut, end, as_final);
        if (!touched) {
            FUZZ_CHECK(end == ends[k], "open match at %zu of %zu untouched: %zu, whole text %zu", start, cut,
                       end, ends[k]);
        }
        start = ends[k];
    }
    /* The piece that holds the cut, its text growing a byte at a time (up to GROWTH bytes). */
    start = 0;
    size_t k = 0;
    while (k < count && ends[k] <= cut) {
        start = ends[k++];
    }
    if (k == count) {
        return;
    }
    tki_pattern_scan kept;
    tki_pattern_scan_reset(&kept);
    for (size_t grown = start + 1; grown <= len && grown <= start + GROWTH; grown++) {
        int touched = -1, fresh_touched = -1;
        size_t end = tki_pattern_match(pattern, &kept, data, grown, start, 0, &touched);
        tki_pattern_scan fresh;
        tki_pattern_scan_reset(&fresh);
        size_t fresh_end = tki_pattern_match(pattern, &fresh, data, grown, start, 0, &fresh_touched);
        FUZZ_CHECK(end == fresh_end && touched == fresh_touched,
                   "kept scan at %zu of %zu: %zu (%d), fresh %zu (%d)", start, grown, end, touched,
                   fresh_end, fresh_touched);
        if (!touched) {
            FUZZ_CHECK(end == ends[k], "grown text %zu: %zu, whole text %zu", grown, end, ends[k]);
            break;
        }
    }
}

/* The pieces one match at a time, and those tki_pattern_split hands out on data[0..cut). */
static void check_split(const tki_pattern *pattern, const uint8_t *data, size_t len, const size_t *ends,
                        size_t count, size_t cut) {
    size_t start = 0;
    for (size_t k = 0; k < count; k++) {
        tki_pattern_scan fresh;
        tki_pattern_scan_reset(&fresh);
        size_t end = tki_pattern_match(pattern, &fresh, data, len, start, 1, NULL);
        FUZZ_CHECK(end == ends[k], "piece %zu from %zu: match %zu, split %zu", k, start, end, ends[k]);
        start = end;
    }
    tki_pattern_scan scan;
    tki_pattern_scan_reset(&scan);
    size_t got[5];
    const size_t capacity = cut % 5 + 1;
    size_t k = 0;
    start = 0;
    while (start < cut) {
        size_t found = tki_pattern_split(pattern, &scan, data, cut, start, got, capacity);
        FUZZ_CHECK(found <= capacity, "%zu pieces for room for %zu", found, capacity);
        if (found == 0) {
            break;
        }
        for (size_t i = 0; i < found; i++, k++) {
            FUZZ_CHECK(k < count && got[i] == ends[k] && got[i] < cut,
                       "split of %zu bytes of %zu: piece %zu ends at %zu", cut, len, k, got[i]);
        }
        start = got[found - 1];
    }
    if (start < cut) { /* what is left: the piece that reaches the cut */
        int touched = 0;
        size_t end = tki_pattern_match(pattern, &scan, data, cut, start, 0, &touched);
        FUZZ_CHECK(touched || (k < count && end == ends[k]), "the piece after the split at %zu", start);
    }
}

static void check_text(const uint8_t *data, size_t len, size_t cut) {
    for (int i = 0; i < PROGRAMS; i++) {
        size_t *ends = NULL;
        size_t count = split(patterns[i], data, len, &ends);
        if ((i < BUILTINS || i == LLAMA3) && len > 0) {
            size_t *want = fuzz_malloc(len * sizeof(size_t));
            size_t want_count = 0;
            int32_t builtin = i == LLAMA3 ? TKI_PATTERN_CL100K : builtin_ids[i];
            int32_t status = tki_pretokenize(builtin, data, len, want, len, &want_count);
            FUZZ_CHECK(status == TKI_OK, "builtin %s: status %d", program_names[i], (int)status);
            /* Llama 3: the pieces but the one that reaches the end (cl100k's \s++$ may take more) */
            size_t compared = i == LLAMA3 ? want_count - 1 : want_count;
            int same = i == LLAMA3 ? compared <= count : want_count == count;
            for (size_t k = 0; same && k < compared; k++) {
                same = want[k] == ends[k];
            }
            FUZZ_CHECK(same, "%s: compiled split differs from the hand-written one", program_names[i]);
            free(want);
        }
        if (len > 0) {
            check_open_text(patterns[i], data, len, ends, count, cut % (len + 1));
            check_split(patterns[i], data, len, ends, count, cut % (len + 1));
        }
        free(ends);
    }
}

static void check_damaged_program(const uint8_t *data, size_t size) {
    int which = size > 1 ? data[1] % PROGRAMS : 0;
    uint8_t *program = fuzz_copy(programs[which], program_lengths[which]);
    size_t length = program_lengths[which];
    for (size_t i = 2; i + 2 < size; i += 3) { /* (position: two bytes, value) triples */
        size_t at = ((size_t)data[i] << 8 | data[i + 1]) % length;
        program[at] = data[i + 2];
    }
    if (size % 7 == 3) {
        length -= size % length; /* cut short */
    }
    tki_pattern *pattern = NULL;
    if (tki_pattern_load(program, length, &pattern) == TKI_OK) {
        static const char text[] = "Hello, \xe4\xb8\x96\xe7\x95\x8c! don't  stop\n\n 12345 \xc3\x89\xff\xc3";
        size_t *ends = NULL;
        size_t count = split(pattern, (const uint8_t *)text, sizeof(text) - 1, &ends);
        (void)count;
        free(ends);
        tki_pattern_free(pattern);
    }
    free(program);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size >= 1 && data[0] == 0xFF) {
        check_damaged_program(data, size);
        return 0;
    }
    size_t cut = size >= 1 ? data[0] : 0;
    size_t len = size > MAX_TEXT ? MAX_TEXT : size;
    uint8_t *text = fuzz_copy(data, len);
    check_text(text, len, cut * len / 255);
    free(text);
    return 0;
}
