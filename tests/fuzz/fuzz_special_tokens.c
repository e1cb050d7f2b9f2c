/*
 * fuzz_special_tokens.c — owns the fuzz target for the special-token matcher
 * (tki_special_matcher_build and tki_special_matcher_find) against a naive
 * search.  The input gives an alphabet size, up to 16 strings of 1..32 bytes
 * and a text, all over that alphabet (a small one makes overlaps, prefixes and
 * repeats likely).  Checked on every input:
 *   - a repeated string gives TKI_ERR_DUPLICATE_BYTES naming its second
 *     occurrence; otherwise the build succeeds;
 *   - all the occurrences found at once equal the naive search's (at each
 *     position from the left, the longest string starting there; the next
 *     search starts at the end of the previous occurrence);
 *   - so do one-at-a-time searches, each from the end of the one before, and
 *     a search from a start the input picks.
 * Strings and the text are exact-size heap copies, so a read past either is a
 * sanitizer error.
 */
#include "fuzz_common.h"

enum { MAX_STRINGS = 16, MAX_STRING = 32, MAX_TEXT = 4096 };

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    return 0;
}

typedef struct string_list {
    uint32_t count;
    uint8_t *pool;
    uint64_t offsets[MAX_STRINGS + 1];
} string_list;

static uint64_t string_length(const string_list *list, uint32_t i) {
    return list->offsets[i + 1] - list->offsets[i];
}

/* The naive search from `from`: 1 with the leftmost, longest occurrence, else 0. */
static int naive_find(const string_list *list, const uint8_t *text, size_t len, size_t from,
                      size_t *out_start, uint32_t *out_string) {
    for (size_t position = from; position < len; position++) {
        uint64_t best_len = 0;
        for (uint32_t i = 0; i < list->count; i++) {
            uint64_t n = string_length(list, i);
            if (n <= len - position && n > best_len &&
                memcmp(text + position, list->pool + list->offsets[i], n) == 0) {
                best_len = n;
                *out_string = i;
            }
        }
        if (best_len > 0) {
            *out_start = position;
            return 1;
        }
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_reader reader = {data, size, 0};
    uint32_t alphabet = 1 + fuzz_byte(&reader) % 6;
    uint32_t count = fuzz_byte(&reader) % (MAX_STRINGS + 1);
    string_list list;
    list.count = count;
    list.offsets[0] = 0;
    uint8_t pool[MAX_STRINGS * MAX_STRING];
    uint32_t duplicate = UINT32_MAX; /* the first string equal to an earlier one */
    for (uint32_t i = 0; i < count; i++) {
        uint32_t len = 1 + fuzz_byte(&reader) % MAX_STRING;
        for (uint32_t k = 0; k < len; k++) {
            pool[list.offsets[i] + k] = (uint8_t)('a' + fuzz_byte(&reader) % alphabet);
        }
        list.offsets[i + 1] = list.offsets[i] + len;
        for (uint32_t j = 0; j < i && duplicate == UINT32_MAX; j++) {
            if (string_length(&list, j) == len &&
                memcmp(pool + list.offsets[j], pool + list.offsets[i], len) == 0) {
                duplicate = i;
            }
        }
    }
    list.pool = fuzz_copy(pool, (size_t)list.offsets[count]);
    size_t start_pick = fuzz_u16(&reader);
    size_t len = size - reader.used < MAX_TEXT ? size - reader.used : MAX_TEXT;
    uint8_t *text = fuzz_malloc(len);
    for (size_t k = 0; k < len; k++) {
        text[k] = (uint8_t)('a' + data[reader.used + k] % (alphabet + 1));
    }

    tki_special_matcher *matcher = NULL;
    uint32_t error_index = UINT32_MAX;
    int32_t status =
        tki_special_matcher_build(list.pool, list.offsets, NULL, count, &matcher, &error_index);
    if (duplicate != UINT32_MAX) {
        FUZZ_CHECK(status == TKI_ERR_DUPLICATE_BYTES && error_index == duplicate && matcher == NULL,
                   "duplicate string %u: status %d, index %u", duplicate, (int)status, error_index);
        goto done;
    }
    FUZZ_CHECK(status == TKI_OK, "build of %u strings: status %d", count, (int)status);

    size_t *starts = fuzz_malloc((len + 1) * sizeof(size_t));
    uint32_t *strings = fuzz_malloc((len + 1) * sizeof(uint32_t));
    size_t found = 0;
    status = tki_special_matcher_find(matcher, text, len, 0, starts, strings, len + 1, &found);
    FUZZ_CHECK(status == TKI_OK, "find all: status %d", (int)status);
    size_t from = 0, want_start = 0;
    uint32_t want_string = 0;
    for (size_t k = 0; k <= found; k++) {
        int want = naive_find(&list, text, len, from, &want_start, &want_string);
        if (k == found) {
            FUZZ_CHECK(!want, "%zu occurrences, the naive search finds one more at %zu", found,
                       want_start);
            break;
        }
        FUZZ_CHECK(want && starts[k] == want_start && strings[k] == want_string,
                   "occurrence %zu at %zu (string %u), naive: %d at %zu (string %u)", k, starts[k],
                   strings[k], want, want_start, want_string);
        size_t one_start = 0, one_count = 0;
        uint32_t one_string = 0;
        status = tki_special_matcher_find(matcher, text, len, from, &one_start, &one_string, 1,
                                          &one_count);
        FUZZ_CHECK(status == TKI_OK && one_count == 1 && one_start == want_start &&
                       one_string == want_string,
                   "one at a time, occurrence %zu", k);
        from = want_start + string_length(&list, want_string);
    }
    size_t pick = len == 0 ? 0 : start_pick % (len + 1);
    size_t got_start = 0, got_count = 0;
    uint32_t got_string = 0;
    status = tki_special_matcher_find(matcher, text, len, pick, &got_start, &got_string, 1,
                                      &got_count);
    int want = naive_find(&list, text, len, pick, &want_start, &want_string);
    FUZZ_CHECK(status == TKI_OK && got_count == (size_t)want &&
                   (!want || (got_start == want_start && got_string == want_string)),
               "from %zu: found %zu at %zu, naive %d at %zu", pick, got_count, got_start, want,
               want_start);
    free(starts);
    free(strings);

done:
    tki_special_matcher_free(matcher);
    free(list.pool);
    free(text);
    return 0;
}
