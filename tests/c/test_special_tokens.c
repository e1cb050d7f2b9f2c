/*
 * test_special_tokens.c — owns the standalone C tests of special_tokens.c
 * (no Python), compiled directly with the csrc/ sources:
 *   (a) tki_special_matcher_find against a naive search (at each position from
 *       the left, the longest string that starts there) on random string sets
 *       over small alphabets -- prefixes of each other, overlapping, repeated
 *       letters -- and random texts, finding all at once and one at a time;
 *   (b) inputs that make a forward search rescan (a run of "a" against
 *       {"a", "aaaaab"}), "<|" repeated against real special tokens, long
 *       strings against short windows;
 *   (c) tki_encode_with_specials equal to the naive cut, each stretch encoded
 *       by tki_encode_text (or tki_encode_pieces as one piece, pattern 0), with
 *       the special's id between, and the right last-piece token count;
 *   (d) error paths: empty and duplicate strings, NULL arguments, a start past
 *       the end, a small output array;
 *   (e) built with -DTKI_TEST_ALLOC_FAILURES and the linker's --wrap (see
 *       .ci/sanitize.sh): every allocation of the build, the search and the
 *       encode failed in turn gives TKI_ERR_NOMEM and leaks nothing.
 * Usage: test_special_tokens [--seed N] [--alloc-failures-only].
 * Closes with "N passed, M failed"; exits 1 on any failure.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tiktoken_inc.h"

static uint64_t g_passed = 0;
static uint64_t g_failed = 0;
static uint64_t g_rng = 20240611u;

#define CHECK(condition, ...)                                                                      \
    do {                                                                                           \
        if (condition) {                                                                           \
            g_passed++;                                                                            \
        } else {                                                                                   \
            g_failed++;                                                                            \
            if (g_failed <= 40) {                                                                  \
                fprintf(stdout, "FAIL (test_special_tokens.c:%d): ", __LINE__);                    \
                fprintf(stdout, __VA_ARGS__);                                                      \
                fputc('\n', stdout);                                                               \
            }                                                                                      \
        }                                                                                          \
    } while (0)

static uint32_t random_below(uint32_t bound) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)((g_rng >> 11) % bound);
}

static void *checked_malloc(size_t size) {
    void *pointer = malloc(size == 0 ? 1 : size);
    if (pointer == NULL) {
        fprintf(stderr, "test_special_tokens: out of memory\n");
        exit(2);
    }
    return pointer;
}

/* ------------------------------------------------------------------ string sets */

enum { MAX_STRINGS = 64, MAX_POOL = 4096 };

typedef struct string_set {
    uint32_t count;
    uint8_t pool[MAX_POOL];
    uint64_t offsets[MAX_STRINGS + 1];
    uint32_t ids[MAX_STRINGS];
} string_set;

static void set_clear(string_set *set) {
    set->count = 0;
    set->offsets[0] = 0;
}

static int set_has(const string_set *set, const uint8_t *bytes, size_t len) {
    for (uint32_t i = 0; i < set->count; i++) {
        if (set->offsets[i + 1] - set->offsets[i] == len &&
            memcmp(set->pool + set->offsets[i], bytes, len) == 0) {
            return 1;
        }
    }
    return 0;
}

/* Adds a string unless it is there already or does not fit; returns whether it was added. */
static int set_add(string_set *set, const uint8_t *bytes, size_t len, uint32_t id) {
    if (len == 0 || set->count == MAX_STRINGS || set->offsets[set->count] + len > MAX_POOL ||
        set_has(set, bytes, len)) {
        return 0;
    }
    memcpy(set->pool + set->offsets[set->count], bytes, len);
    set->ids[set->count] = id;
    set->offsets[set->count + 1] = set->offsets[set->count] + len;
    set->count++;
    return 1;
}

static void set_add_text(string_set *set, const char *text, uint32_t id) {
    set_add(set, (const uint8_t *)text, strlen(text), id);
}

static tki_special_matcher *set_build(const string_set *set) {
    tki_special_matcher *matcher = NULL;
    uint32_t error_index = 0;
    int32_t status =
        tki_special_matcher_build(set->pool, set->offsets, set->ids, set->count, &matcher, &error_index);
    CHECK(status == TKI_OK, "build of %u strings: status %d (%s), index %u", set->count, (int)status,
          tki_status_message(status), error_index);
    return matcher;
}

/* The naive search: the leftmost position >= from where a string starts, the longest there. */
static int naive_find(const string_set *set, const uint8_t *data, size_t len, size_t from,
                      size_t *out_start, uint32_t *out_string) {
    for (size_t position = from; position < len; position++) {
        uint32_t best = UINT32_MAX;
        uint64_t best_len = 0;
        for (uint32_t i = 0; i < set->count; i++) {
            uint64_t string_len = set->offsets[i + 1] - set->offsets[i];
            if (string_len <= len - position && string_len > best_len &&
                memcmp(data + position, set->pool + set->offsets[i], string_len) == 0) {
                best = i;
                best_len = string_len;
            }
        }
        if (best != UINT32_MAX) {
            *out_start = position;
            *out_string = best;
            return 1;
        }
    }
    return 0;
}

/* All naive matches from 0; returns their number. */
static size_t naive_find_all(const string_set *set, const uint8_t *data, size_t len,
                             size_t *starts, uint32_t *strings) {
    size_t count = 0, from = 0, start = 0;
    uint32_t string = 0;
    while (naive_find(set, data, len, from, &start, &string)) {
        starts[count] = start;
        strings[count] = string;
        count++;
        from = start + (set->offsets[string + 1] - set->offsets[string]);
    }
    return count;
}

/* Checks tki_special_matcher_find against the naive search, all at once and one by one. */
static void check_find(const string_set *set, const tki_special_matcher *matcher,
                       const uint8_t *data, size_t len, const char *what) {
    size_t *want_starts = checked_malloc((len + 1) * sizeof(size_t));
    uint32_t *want_strings = checked_malloc((len + 1) * sizeof(uint32_t));
    size_t *got_starts = checked_malloc((len + 1) * sizeof(size_t));
    uint32_t *got_strings = checked_malloc((len + 1) * sizeof(uint32_t));
    size_t want = naive_find_all(set, data, len, want_starts, want_strings);
    size_t got = 0;
    int32_t status = tki_special_matcher_find(matcher, data, len, 0, got_starts, got_strings,
                                              len + 1, &got);
    CHECK(status == TKI_OK && got == want, "%s: all at once: status %d, %zu matches, want %zu",
          what, (int)status, got, want);
    for (size_t k = 0; status == TKI_OK && k < got && k < want; k++) {
        if (got_starts[k] != want_starts[k] || got_strings[k] != want_strings[k]) {
            CHECK(0, "%s: match %zu at %zu (string %u), want %zu (string %u)", what, k,
                  got_starts[k], got_strings[k], want_starts[k], want_strings[k]);
            break;
        }
    }
    /* One by one, each search from the end of the one before. */
    size_t from = 0;
    for (size_t k = 0; k <= want; k++) {
        size_t start = 0, found = 0;
        uint32_t string = 0;
        status = tki_special_matcher_find(matcher, data, len, from, &start, &string, 1, &found);
        if (status != TKI_OK || found != (k < want ? 1u : 0u) ||
            (k < want && (start != want_starts[k] || string != want_strings[k]))) {
            CHECK(0, "%s: one by one, match %zu: status %d, found %zu at %zu", what, k,
                  (int)status, found, start);
            break;
        }
        if (k < want) {
            from = start + (set->offsets[string + 1] - set->offsets[string]);
        }
    }
    free(want_starts);
    free(want_strings);
    free(got_starts);
    free(got_strings);
}

/* check_find on a matcher built from `set` (nothing to check when the build fails: set_build has said why). */
static void check_set(const string_set *set, const uint8_t *data, size_t len, const char *what) {
    tki_special_matcher *matcher = set_build(set);
    if (matcher != NULL) {
        check_find(set, matcher, data, len, what);
        tki_special_matcher_free(matcher);
    }
}

/* ------------------------------------------------------------------ (a), (b) the search */

static void run_random_find_tests(void) {
    string_set *set = checked_malloc(sizeof(string_set));
    uint8_t text[600];
    char what[64];
    for (uint32_t round = 0; round < 3000; round++) {
        uint32_t alphabet = 1 + random_below(round % 3 == 0 ? 2 : 5);
        set_clear(set);
        uint32_t wanted = 1 + random_below(round % 4 == 0 ? 40 : 6);
        for (uint32_t i = 0; i < wanted; i++) {
            uint8_t string[24];
            size_t len = 1 + random_below(round % 5 == 0 ? 20 : 5);
            for (size_t k = 0; k < len; k++) {
                string[k] = (uint8_t)('a' + random_below(alphabet));
            }
            set_add(set, string, len, 1000 + i);
        }
        size_t len = random_below(round % 10 == 0 ? 600 : 60);
        for (size_t k = 0; k < len; k++) {
            text[k] = (uint8_t)('a' + random_below(alphabet + 1));
        }
        /* Plant some of the strings. */
        for (uint32_t plant = random_below(4); plant > 0 && set->count > 0; plant--) {
            uint32_t i = random_below(set->count);
            size_t string_len = set->offsets[i + 1] - set->offsets[i];
            if (string_len <= len) {
                size_t at = random_below((uint32_t)(len - string_len + 1));
                memcpy(text + at, set->pool + set->offsets[i], string_len);
            }
        }
        tki_special_matcher *matcher = set_build(set);
        if (matcher == NULL) {
            continue;
        }
        snprintf(what, sizeof(what), "random round %u", round);
        check_find(set, matcher, text, len, what);
        tki_special_matcher_free(matcher);
    }
    free(set);
}

static void run_shaped_find_tests(void) {
    string_set *set = checked_malloc(sizeof(string_set));
    size_t len = 100000;
    uint8_t *text = checked_malloc(len);

    /* A forward search would rescan after every "a". */
    set_clear(set);
    set_add_text(set, "a", 1);
    set_add_text(set, "aaaaaaaaaaaaaaaaaaaab", 2);
    memset(text, 'a', len);
    text[len - 1] = 'b';
    check_set(set, text, len, "a run against {a, a...ab}");

    /* "<|" repeated against real special tokens, with one real token at the end. */
    set_clear(set);
    set_add_text(set, "<|endoftext|>", 100257);
    set_add_text(set, "<|fim_prefix|>", 100258);
    set_add_text(set, "<|fim_middle|>", 100259);
    set_add_text(set, "<|fim_suffix|>", 100260);
    set_add_text(set, "<|endofprompt|>", 100276);
    for (size_t k = 0; k < len; k++) {
        text[k] = k % 2 == 0 ? '<' : '|';
    }
    memcpy(text + len - 13, "<|endoftext|>", 13);
    check_set(set, text, len, "<| repeated");

    /* Adjacent, prefix-related and overlapping tokens. */
    set_clear(set);
    set_add_text(set, "<|a|>", 1);
    set_add_text(set, "<|a|>b", 2);
    set_add_text(set, "|><|", 3);
    set_add_text(set, "b", 4);
    static const char mixed[] = "<|a|><|a|>b<|a|>bb|><|<|a<|a|";
    check_set(set, (const uint8_t *)mixed, sizeof(mixed) - 1, "mixed");

    /* Long strings (windows of four longest strings) and several first bytes. */
    set_clear(set);
    uint8_t long_string[1000];
    for (size_t k = 0; k < sizeof(long_string); k++) {
        long_string[k] = (uint8_t)('a' + k % 3);
    }
    set_add(set, long_string, sizeof(long_string), 1);
    set_add(set, long_string + 1, 500, 2);
    set_add(set, long_string + 2, 3, 3);
    for (size_t k = 0; k < 20000; k++) {
        text[k] = (uint8_t)('a' + (k % 3 + (k % 4001 == 0)) % 3);
    }
    check_set(set, text, 20000, "long strings");

    /* No strings: nothing is ever found. */
    set_clear(set);
    tki_special_matcher *matcher = set_build(set);
    if (matcher != NULL) {
        check_find(set, matcher, text, 100, "no strings");
        check_find(set, matcher, text, 0, "no strings, no text");
        tki_special_matcher_free(matcher);
    }
    free(text);
    free(set);
}

/* ------------------------------------------------------------------ (c) encoding */

/* A small vocabulary: every byte, and merges of common pairs of the test texts. */
static tki_vocab *build_small_vocab(void) {
    static const char *const merges[] = {"ab", "abab", "ba", " a", " ab", "<|", "|>", "  ", "\n\n"};
    enum { MERGES = sizeof(merges) / sizeof(merges[0]) };
    uint8_t bytes[256 + 64];
    uint64_t offsets[256 + MERGES + 1];
    uint32_t ranks[256 + MERGES];
    uint64_t used = 0;
    offsets[0] = 0;
    for (uint32_t b = 0; b < 256; b++) {
        bytes[used++] = (uint8_t)b;
        ranks[b] = b;
        offsets[b + 1] = used;
    }
    for (uint32_t m = 0; m < MERGES; m++) {
        size_t len = strlen(merges[m]);
        memcpy(bytes + used, merges[m], len);
        used += len;
        ranks[256 + m] = 256 + m;
        offsets[256 + m + 1] = used;
    }
    static const uint8_t special_bytes[] = "<|end|><|end|>b";
    uint64_t special_offsets[3] = {0, 7, 15};
    uint32_t special_ranks[2] = {400, 401};
    tki_vocab *vocab = NULL;
    uint32_t error_index = 0;
    int32_t status = tki_vocab_build(bytes, offsets, ranks, 256 + MERGES, special_bytes,
                                     special_offsets, special_ranks, 2, &vocab, &error_index);
    CHECK(status == TKI_OK, "small vocabulary: status %d", (int)status);
    return vocab;
}

/* The naive cut, each stretch encoded by the public one-stretch entry points. */
static size_t naive_encode(const tki_vocab *vocab, int32_t pattern, const string_set *set,
                           const uint8_t *data, size_t len, uint32_t *out, size_t *out_last) {
    size_t count = 0, position = 0, last = 0;
    for (;;) {
        size_t start = len;
        uint32_t string = 0;
        int found = set != NULL && naive_find(set, data, len, position, &start, &string);
        if (start > position) {
            size_t produced = 0, stretch_last = 0;
            size_t end = start - position;
            int32_t status =
                pattern != 0
                    ? tki_encode_text(vocab, pattern, data + position, start - position, 0,
                                      out + count, len - count, &produced, &stretch_last)
                    : tki_encode_pieces(vocab, data + position, start - position, &end, 1,
                                        TKI_WHOLE_PIECE_SHORTCUT, out + count, len - count,
                                        &produced);
            CHECK(status == TKI_OK, "naive encode: status %d", (int)status);
            if (pattern == 0) {
                stretch_last = produced;
            }
            count += produced;
            if (produced > 0) {
                last = stretch_last;
            }
        }
        if (!found) {
            break;
        }
        out[count++] = set->ids[string];
        last = 0;
        position = start + (set->offsets[string + 1] - set->offsets[string]);
    }
    *out_last = last;
    return count;
}

static void check_encode(const tki_vocab *vocab, int32_t pattern, const string_set *set,
                         const tki_special_matcher *matcher, const uint8_t *data, size_t len,
                         const char *what) {
    uint32_t *want = checked_malloc((len + 1) * sizeof(uint32_t));
    uint32_t *got = checked_malloc((len + 1) * sizeof(uint32_t));
    size_t want_last = 0, got_last = 99, got_count = 0;
    size_t want_count = naive_encode(vocab, pattern, set, data, len, want, &want_last);
    int32_t status = tki_encode_with_specials(vocab, pattern, matcher, data, len, 0, got, len,
                                              &got_count, &got_last);
    CHECK(status == TKI_OK && got_count == want_count && got_last == want_last &&
              memcmp(got, want, want_count * sizeof(uint32_t)) == 0,
          "%s (pattern %d): status %d, %zu ids (last piece %zu), want %zu (last piece %zu)", what,
          (int)pattern, (int)status, got_count, got_last, want_count, want_last);
    free(want);
    free(got);
}

static void run_encode_tests(void) {
    tki_vocab *vocab = build_small_vocab();
    if (vocab == NULL) {
        return;
    }
    string_set *set = checked_malloc(sizeof(string_set));
    set_clear(set);
    set_add_text(set, "<|end|>", 400);
    set_add_text(set, "<|end|>b", 401);
    tki_special_matcher *matcher = set_build(set);
    static const char *const texts[] = {
        "",
        "<|end|>",
        "<|end|><|end|>",
        "<|end|>b<|end|>bb",
        "ab <|end|>  \n\n<|end|>",
        "abab baba  <|end|>   ",
        "<|end<|end|>ab",
        "x<|en|>y",
        "  \n<|end|>  \n",
        "hello world's <|end|> 12345 \xe4\xb8\xad\xe6\x96\x87  ",
    };
    static const int32_t patterns[] = {0, TKI_PATTERN_R50K, TKI_PATTERN_CL100K, TKI_PATTERN_O200K};
    for (size_t p = 0; p < sizeof(patterns) / sizeof(patterns[0]); p++) {
        for (size_t t = 0; t < sizeof(texts) / sizeof(texts[0]); t++) {
            char what[64];
            snprintf(what, sizeof(what), "text %zu", t);
            check_encode(vocab, patterns[p], set, matcher, (const uint8_t *)texts[t],
                         strlen(texts[t]), what);
            check_encode(vocab, patterns[p], NULL, NULL, (const uint8_t *)texts[t],
                         strlen(texts[t]), "no specials");
        }
        /* Random texts from pieces that meet the patterns' corners. */
        static const char *const parts[] = {"<|end|>", "<|end|>b", "<|", "|>", "ab", " ", "  ",
                                            "\n", "'s", "12", "\xc3\xa9", "b", "<|end"};
        enum { PARTS = sizeof(parts) / sizeof(parts[0]) };
        uint8_t text[400];
        for (uint32_t round = 0; round < 300; round++) {
            size_t len = 0;
            for (uint32_t k = random_below(40); k > 0; k--) {
                const char *part = parts[random_below(PARTS)];
                size_t part_len = strlen(part);
                memcpy(text + len, part, part_len);
                len += part_len;
            }
            check_encode(vocab, patterns[p], set, matcher, text, len, "random parts");
        }
    }
    /* A small output array, a bad pattern, NULL arguments. */
    uint32_t out[8];
    size_t count = 0;
    static const uint8_t text[] = "ab<|end|>ab";
    CHECK(tki_encode_with_specials(vocab, TKI_PATTERN_CL100K, matcher, text, 11, 0, out, 10,
                                   &count, NULL) == TKI_ERR_ARGUMENT,
          "an output array shorter than the text");
    CHECK(tki_encode_with_specials(vocab, 7, matcher, text, 11, 0, out, 11, &count, NULL) ==
              TKI_ERR_ARGUMENT,
          "an unknown pattern");
    CHECK(tki_encode_with_specials(NULL, TKI_PATTERN_CL100K, matcher, text, 11, 0, out, 11, &count,
                                   NULL) == TKI_ERR_ARGUMENT,
          "no vocabulary");
    CHECK(tki_encode_with_specials(vocab, TKI_PATTERN_CL100K, matcher, NULL, 11, 0, out, 11, &count,
                                   NULL) == TKI_ERR_ARGUMENT,
          "no text");
    CHECK(tki_encode_with_specials(vocab, TKI_PATTERN_CL100K, matcher, text, 0, 0, NULL, 0, &count,
                                   NULL) == TKI_OK &&
              count == 0,
          "an empty text with no output array");
    tki_special_matcher_free(matcher);
    tki_vocab_free(vocab);
    free(set);
}

/* ------------------------------------------------------------------ (d) error paths */

static void run_error_tests(void) {
    static const uint8_t pool[] = "abcab";
    uint64_t offsets[4] = {0, 3, 3, 5};
    tki_special_matcher *matcher = (tki_special_matcher *)&g_rng;
    uint32_t error_index = 99;
    CHECK(tki_special_matcher_build(pool, offsets, NULL, 3, &matcher, &error_index) ==
                  TKI_ERR_EMPTY_TOKEN &&
              error_index == 1 && matcher == NULL,
          "an empty string");
    uint64_t duplicate_offsets[3] = {0, 2, 4};
    static const uint8_t duplicate_pool[] = "abab";
    CHECK(tki_special_matcher_build(duplicate_pool, duplicate_offsets, NULL, 2, &matcher,
                                    &error_index) == TKI_ERR_DUPLICATE_BYTES &&
              error_index == 1 && matcher == NULL,
          "a duplicate string");
    uint64_t falling_offsets[3] = {0, 3, 2};
    CHECK(tki_special_matcher_build(pool, falling_offsets, NULL, 2, &matcher, NULL) ==
              TKI_ERR_ARGUMENT,
          "offsets that fall");
    CHECK(tki_special_matcher_build(NULL, offsets, NULL, 1, &matcher, NULL) == TKI_ERR_ARGUMENT,
          "no bytes");
    CHECK(tki_special_matcher_build(pool, offsets, NULL, 1, NULL, NULL) == TKI_ERR_ARGUMENT,
          "no output");
    CHECK(tki_special_matcher_build(pool, offsets, NULL, 1, &matcher, NULL) == TKI_OK,
          "one string, no ids, no error index");
    size_t start = 0, count = 7;
    uint32_t string = 7;
    CHECK(tki_special_matcher_find(matcher, pool, 5, 6, &start, &string, 1, &count) ==
              TKI_ERR_ARGUMENT && count == 0,
          "a start past the end");
    CHECK(tki_special_matcher_find(matcher, pool, 5, 5, &start, &string, 1, &count) == TKI_OK &&
              count == 0,
          "a start at the end");
    CHECK(tki_special_matcher_find(matcher, pool, 5, 1, &start, &string, 1, &count) == TKI_OK &&
              count == 0,
          "a start past the only match");
    CHECK(tki_special_matcher_find(matcher, pool, 5, 0, &start, &string, 1, &count) == TKI_OK &&
              count == 1 && start == 0 && string == 0,
          "the match at 0, its index for an id");
    CHECK(tki_special_matcher_find(matcher, pool, 5, 0, NULL, NULL, 0, &count) == TKI_OK &&
              count == 0,
          "capacity 0");
    CHECK(tki_special_matcher_find(matcher, pool, 5, 0, NULL, &string, 1, &count) ==
              TKI_ERR_ARGUMENT,
          "no start array");
    CHECK(tki_special_matcher_find(matcher, NULL, 5, 0, &start, &string, 1, &count) ==
              TKI_ERR_ARGUMENT,
          "no text");
    CHECK(tki_special_matcher_find(NULL, pool, 5, 0, &start, &string, 1, &count) ==
              TKI_ERR_ARGUMENT,
          "no matcher");
    CHECK(tki_special_matcher_find(matcher, pool, 5, 0, &start, &string, 1, NULL) ==
              TKI_ERR_ARGUMENT,
          "no count");
    tki_special_matcher_free(matcher);
    tki_special_matcher_free(NULL);
}

/* ------------------------------------------------------------------ (e) allocation failures */

#ifdef TKI_TEST_ALLOC_FAILURES
#include "alloc_failures.h"

enum { MAX_FAILURE_POINTS = 1000 };

static void run_alloc_failure_tests(void) {
    string_set *set = checked_malloc(sizeof(string_set));
    set_clear(set);
    set_add_text(set, "<|end|>", 400);
    set_add_text(set, "<|end|>b", 401);
    set_add_text(set, "|>ab", 402);
    /* The build. */
    tki_special_matcher *matcher = NULL;
    int64_t n = 0;
    for (; n < MAX_FAILURE_POINTS; n++) {
        tki_special_matcher *attempt = (tki_special_matcher *)&g_rng;
        arm_failure(n);
        int32_t status =
            tki_special_matcher_build(set->pool, set->offsets, set->ids, set->count, &attempt, NULL);
        int failed = disarm_failure();
        if (!failed) {
            CHECK(status == TKI_OK, "build with no failed allocation: status %d", (int)status);
            matcher = attempt;
            break;
        }
        CHECK(status == TKI_ERR_NOMEM && attempt == NULL,
              "build, allocation %lld fails: status %d", (long long)n, (int)status);
        if (status == TKI_OK) {
            tki_special_matcher_free(attempt);
        }
    }
    fprintf(stdout, "allocation failures: the build makes %lld allocations\n", (long long)n);
    tki_vocab *vocab = build_small_vocab();
    static const uint8_t text[] = "ab <|end|>b abab  <|end|><|end|> |>ab\n\n";
    size_t len = sizeof(text) - 1;
    uint32_t want[sizeof(text)], got[sizeof(text)];
    size_t starts[sizeof(text)];
    uint32_t strings[sizeof(text)];
    size_t want_count = 0;
    for (int call = 0; matcher != NULL && vocab != NULL && call < 3; call++) {
        for (n = -1; n < MAX_FAILURE_POINTS; n++) {
            size_t count = 0;
            arm_failure(n);
            int32_t status =
                call == 0 ? tki_special_matcher_find(matcher, text, len, 0, starts, strings, len,
                                                     &count)
                          : tki_encode_with_specials(vocab, call == 1 ? TKI_PATTERN_CL100K : 0,
                                                     matcher, text, len, 0, got, len, &count, NULL);
            int failed = disarm_failure();
            if (call == 0) {
                memcpy(got, strings, count * sizeof(uint32_t));
            }
            if (n < 0) {
                CHECK(status == TKI_OK, "call %d with no failure: status %d", call, (int)status);
                memcpy(want, got, count * sizeof(uint32_t));
                want_count = count;
                continue;
            }
            if (!failed) {
                break;
            }
            CHECK(status == TKI_ERR_NOMEM ||
                      (status == TKI_OK && count == want_count &&
                       memcmp(got, want, count * sizeof(uint32_t)) == 0),
                  "call %d, allocation %lld fails: status %d", call, (long long)n, (int)status);
        }
        fprintf(stdout, "allocation failures: call %d makes %lld allocations\n", call, (long long)n);
    }
    tki_vocab_free(vocab);
    tki_special_matcher_free(matcher);
    free(set);
}
#endif

int main(int argc, char **argv) {
    int alloc_failures_only = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            g_rng = strtoull(argv[++i], NULL, 0) | 1u;
        } else if (strcmp(argv[i], "--alloc-failures-only") == 0) {
            alloc_failures_only = 1;
        } else {
            fprintf(stderr, "usage: %s [--seed N] [--alloc-failures-only]\n", argv[0]);
            return 2;
        }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
#ifdef TKI_TEST_ALLOC_FAILURES
    run_alloc_failure_tests();
#else
    if (alloc_failures_only) {
        fprintf(stderr, "test_special_tokens: built without TKI_TEST_ALLOC_FAILURES\n");
        return 2;
    }
#endif
    if (!alloc_failures_only) {
        run_error_tests();
        run_shaped_find_tests();
        run_random_find_tests();
        run_encode_tests();
    }
    fprintf(stdout, "%llu passed, %llu failed\n", (unsigned long long)g_passed,
            (unsigned long long)g_failed);
    return g_failed == 0 ? 0 : 1;
}
