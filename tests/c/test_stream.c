/*
 * test_stream.c — owns the standalone C tests of stream.c (no Python), compiled
 * directly with the csrc/ sources:
 *   (a) streams equal one-shot encoding (tki_encode_with_specials) for every
 *       pattern (0 and the built-in ones), with allowed special tokens, on
 *       real text (--text FILE), runs of one character, and random UTF-8
 *       with special-token fragments, cut into random chunks and, for short
 *       texts, byte by byte; a refused string fails the stream exactly when
 *       the one-shot search finds one;
 *   (b) the same for a vocabulary the incremental algorithm cannot encode
 *       (heap BPE) and one with a non-canonical token;
 *   (c) UTF-8 checking against a plain decoder: where and why it fails;
 *   (d) bounded calls: every cap around the count gives the one-shot ids'
 *       prefix, the count, and whether the cap was passed;
 *   (e) truncation against brute force: the longest k whose ids end on a
 *       character boundary and are the one-shot encoding of their text;
 *   (f) a failed stream refuses every later call, saying why;
 *   (g) built with -DTKI_TEST_ALLOC_FAILURES and the linker's --wrap (see
 *       .ci/sanitize.sh): every allocation of a stream's feed and finish
 *       failed in turn gives TKI_ERR_NOMEM, the stream then refuses every
 *       later call (TKI_ERR_STREAM_FAILED), and nothing leaks -- on a heap-BPE
 *       vocabulary too, where a half-grown workspace once let a later piece
 *       write through a NULL buffer.
 * Usage: test_stream [--seed N] [--text FILE] [--alloc-failures-only] RANK_FILE...
 * Closes with "N passed, M failed"; exits 1 on any failure.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plain_utf8.h"
#include "rank_file.h"
#include "tiktoken_inc.h"

static uint64_t g_passed = 0;
static uint64_t g_failed = 0;
static uint64_t g_rng = 20261125u;

#define CHECK(condition, ...)                                                                      \
    do {                                                                                           \
        if (condition) {                                                                           \
            g_passed++;                                                                            \
        } else {                                                                                   \
            g_failed++;                                                                            \
            if (g_failed <= 40) {                                                                  \
                fprintf(stdout, "FAIL (test_stream.c:%d): ", __LINE__);                            \
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
        fprintf(stderr, "test_stream: out of memory\n");
        exit(2);
    }
    return pointer;
}

/* ------------------------------------------------------------------ vocabularies and specials */

static const char *const SPECIALS[] = {"<|endoftext|>", "<|fim|>", "<|fim_middle|>", "ab<|"};
enum { SPECIAL_COUNT = 4 };

/* A matcher of SPECIALS[first .. first + count), ids 900000 + index. */
static tki_special_matcher *specials_matcher(uint32_t first, uint32_t count) {
    uint8_t bytes[256];
    uint64_t offsets[SPECIAL_COUNT + 1] = {0};
    uint32_t ids[SPECIAL_COUNT];
    size_t used = 0;
    for (uint32_t i = 0; i < count; i++) {
        const char *text = SPECIALS[first + i];
        memcpy(bytes + used, text, strlen(text));
        used += strlen(text);
        offsets[i + 1] = used;
        ids[i] = 900000 + first + i;
    }
    tki_special_matcher *matcher = NULL;
    if (count > 0 && tki_special_matcher_build(bytes, offsets, ids, count, &matcher, NULL) != TKI_OK) {
        fprintf(stderr, "test_stream: cannot build a matcher\n");
        exit(2);
    }
    return matcher;
}

static tki_vocab *vocab_from_file(const char *path) {
    tki_rank_file file;
    if (tki_rank_file_load(path, &file) != 0) {
        fprintf(stderr, "test_stream: cannot read %s\n", path);
        exit(2);
    }
    tki_vocab *vocab = NULL;
    int32_t status = tki_vocab_build(file.bytes, file.offsets, file.ranks, file.count, NULL, NULL, NULL, 0,
                                     &vocab, NULL);
    tki_rank_file_free(&file);
    if (status != TKI_OK) {
        fprintf(stderr, "test_stream: cannot build %s: %s\n", path, tki_status_message(status));
        exit(2);
    }
    return vocab;
}

/* The 256 single bytes (ranks 0..255) and `extra` tokens after them, in that rank order. */
static tki_vocab *small_vocab(const char *const *extra, uint32_t extra_count) {
    uint8_t bytes[1024];
    uint64_t offsets[300];
    uint32_t ranks[300];
    uint32_t count = 0;
    size_t used = 0;
    offsets[0] = 0;
    for (uint32_t b = 0; b < 256; b++) {
        bytes[used++] = (uint8_t)b;
        ranks[count++] = b;
        offsets[count] = used;
    }
    for (uint32_t i = 0; i < extra_count; i++) {
        memcpy(bytes + used, extra[i], strlen(extra[i]));
        used += strlen(extra[i]);
        ranks[count++] = 256 + i;
        offsets[count] = used;
    }
    tki_vocab *vocab = NULL;
    if (tki_vocab_build(bytes, offsets, ranks, count, NULL, NULL, NULL, 0, &vocab, NULL) != TKI_OK) {
        fprintf(stderr, "test_stream: cannot build a small vocabulary\n");
        exit(2);
    }
    return vocab;
}

/* ------------------------------------------------------------------ splitters */

/* How a text is split: a built-in pattern (or 0: one piece), or a compiled one. */
typedef struct splitter {
    int32_t pattern;
    const tki_pattern *compiled; /* not NULL: this one */
    const char *name;
} splitter;

static int32_t new_stream(const tki_vocab *vocab, splitter split, const tki_special_matcher *allowed,
                          const tki_special_matcher *refused, tki_stream **out) {
    return split.compiled != NULL ? tki_stream_new_compiled(vocab, split.compiled, allowed, refused, 0, out)
                                  : tki_stream_new_with_specials(vocab, split.pattern, allowed, refused, 0, out);
}

/* ------------------------------------------------------------------ references */

typedef struct ids {
    uint32_t *ids;
    size_t count;
    size_t capacity;
} ids;

static void ids_reserve(ids *list, size_t more) {
    if (list->count + more <= list->capacity) {
        return;
    }
    size_t capacity = (list->count + more) * 2 + 16;
    uint32_t *grown = realloc(list->ids, capacity * sizeof(uint32_t));
    if (grown == NULL) {
        fprintf(stderr, "test_stream: out of memory\n");
        exit(2);
    }
    list->ids = grown;
    list->capacity = capacity;
}

/* One-shot: TKI_OK and the ids, or TKI_ERR_REFUSED_SPECIAL when refused finds a string. */
static int32_t one_shot(const tki_vocab *vocab, splitter split, const tki_special_matcher *allowed,
                        const tki_special_matcher *refused, const uint8_t *data, size_t len, ids *out) {
    if (refused != NULL) {
        size_t start = 0, found = 0;
        uint32_t string = 0;
        tki_special_matcher_find(refused, data, len, 0, &start, &string, 1, &found);
        if (found) {
            return TKI_ERR_REFUSED_SPECIAL;
        }
    }
    out->count = 0;
    ids_reserve(out, len + 1);
    size_t count = 0;
    int32_t status = split.compiled != NULL
                         ? tki_pattern_encode_with_specials(vocab, split.compiled, allowed, data, len, 0, out->ids,
                                                            len + 1, &count, NULL)
                         : tki_encode_with_specials(vocab, split.pattern, allowed, data, len, 0, out->ids, len + 1,
                                                    &count, NULL);
    out->count = count;
    return status;
}

/* Streams data in the given cuts (ascending, within len); the status of the first failure. */
static int32_t streamed(tki_stream *stream, const uint8_t *data, size_t len, const size_t *cuts,
                        size_t cut_count, ids *out) {
    out->count = 0;
    size_t start = 0;
    for (size_t k = 0; k <= cut_count; k++) {
        size_t end = k < cut_count ? cuts[k] : len;
        size_t capacity = (size_t)tki_stream_pending(stream) + (end - start) + 1, produced = 0;
        ids_reserve(out, capacity);
        int32_t status = tki_stream_feed(stream, data + start, end - start, out->ids + out->count, capacity,
                                         &produced);
        out->count += produced;
        if (status != TKI_OK) {
            return status;
        }
        start = end;
    }
    size_t capacity = (size_t)tki_stream_pending(stream) + 1, produced = 0;
    ids_reserve(out, capacity);
    int32_t status = tki_stream_finish(stream, out->ids + out->count, capacity, &produced);
    out->count += produced;
    return status;
}

static int same_ids(const ids *a, const ids *b) {
    return a->count == b->count && (a->count == 0 || memcmp(a->ids, b->ids, a->count * sizeof(uint32_t)) == 0);
}

/* ------------------------------------------------------------------ (a), (b): streams */

/* Random cuts into data (sorted, duplicates allowed: empty feeds). */
static size_t random_cuts(size_t len, size_t *cuts, size_t max_cuts) {
    size_t count = len == 0 ? 0 : random_below((uint32_t)max_cuts + 1);
    for (size_t i = 0; i < count; i++) {
        cuts[i] = random_below((uint32_t)len + 1);
    }
    for (size_t i = 1; i < count; i++) { /* insertion sort */
        for (size_t j = i; j > 0 && cuts[j] < cuts[j - 1]; j--) {
            size_t swap = cuts[j];
            cuts[j] = cuts[j - 1];
            cuts[j - 1] = swap;
        }
    }
    return count;
}

static void check_stream(const tki_vocab *vocab, splitter split, const tki_special_matcher *allowed,
                         const tki_special_matcher *refused, const uint8_t *data, size_t len, const char *what) {
    ids want = {0}, got = {0};
    int32_t want_status = one_shot(vocab, split, allowed, refused, data, len, &want);
    enum { MAX_CUTS = 64 };
    size_t cuts[MAX_CUTS + 1];
    size_t *every = NULL;
    for (int round = 0; round < 4; round++) {
        size_t cut_count = 0;
        const size_t *which = cuts;
        if (round == 0 && len <= 600) { /* byte by byte */
            every = checked_malloc((len + 1) * sizeof(size_t));
            for (size_t i = 0; i < len; i++) {
                every[i] = i;
            }
            which = every;
            cut_count = len;
        } else {
            cut_count = random_cuts(len, cuts, round == 1 ? 3 : MAX_CUTS);
        }
        tki_stream *stream = NULL;
        CHECK(new_stream(vocab, split, allowed, refused, &stream) == TKI_OK, "new");
        int32_t status = streamed(stream, data, len, which, cut_count, &got);
        if (want_status == TKI_ERR_REFUSED_SPECIAL) {
            CHECK(status == TKI_ERR_REFUSED_SPECIAL, "%s: %s, %zu bytes: refused string not found (%d)",
                  what, split.name, len, (int)status);
        } else {
            CHECK(status == TKI_OK && same_ids(&got, &want),
                  "%s: %s, %zu bytes, %zu cuts: status %d, %zu ids, want %zu", what, split.name, len,
                  cut_count, (int)status, got.count, want.count);
            /* and once more after finish: the stream is reusable */
            if (status == TKI_OK) {
                status = streamed(stream, data, len, which, cut_count, &got);
                CHECK(status == TKI_OK && same_ids(&got, &want), "%s: reuse after finish", what);
            }
        }
        tki_stream_free(stream);
        free(every);
        every = NULL;
    }
    free(want.ids);
    free(got.ids);
}

/* Random UTF-8 with fragments that stress the pre-tokenizer and the specials. */
static size_t random_text(uint8_t *out, size_t capacity) {
    static const char *const fragments[] = {
        "<|endoftext|>", "<|", "|>", "<|fim", "_middle|>", "ab", "ab<|", " ", "  ", "\n", "\r\n", "\t",
        "'s", "'LL", "123456", "\xe4\xb8\xad\xe6\x96\x87", "\xf0\x9f\x98\x80", "\xc3\xa9", "hello", " World",
        "!!!", "\xc2\xa0", "a", "x", "0", "\xe3\x80\x80",
    };
    size_t used = 0;
    size_t parts = random_below(24);
    for (size_t p = 0; p < parts; p++) {
        const char *fragment = fragments[random_below(sizeof(fragments) / sizeof(fragments[0]))];
        size_t length = strlen(fragment);
        size_t repeat = random_below(8) == 0 ? 1 + random_below(40) : 1;
        for (size_t r = 0; r < repeat && used + length <= capacity; r++) {
            memcpy(out + used, fragment, length);
            used += length;
        }
    }
    return used;
}

static void run_stream_tests(const tki_vocab *vocab, const char *name, const splitter *splits, size_t split_count,
                             const uint8_t *text, size_t text_len, int quick) {
    tki_special_matcher *allowed = specials_matcher(0, 2);   /* <|endoftext|>, <|fim|> */
    tki_special_matcher *refused = specials_matcher(2, 2);   /* <|fim_middle|>, ab<| */
    tki_special_matcher *all = specials_matcher(0, SPECIAL_COUNT);
    uint8_t buffer[2048];
    char what[128];
    for (size_t p = 0; p < split_count; p++) {
        splitter pattern = splits[p];
        for (int trial = 0; trial < (quick ? 40 : 300); trial++) {
            size_t len = random_text(buffer, sizeof(buffer));
            snprintf(what, sizeof(what), "%s random #%d", name, trial);
            check_stream(vocab, pattern, NULL, NULL, buffer, len, what);
            check_stream(vocab, pattern, allowed, refused, buffer, len, what);
            check_stream(vocab, pattern, all, NULL, buffer, len, what);
        }
        static const char *const units[] = {" ", "a", "\n", "0", "\xe4\xb8\xad", "\xf0\x9f\x98\x80", "ab", "'", "<|"};
        for (size_t u = 0; u < sizeof(units) / sizeof(units[0]); u++) {
            size_t unit = strlen(units[u]);
            size_t repeat = quick ? 700 : 3000;
            uint8_t *run = checked_malloc(unit * repeat);
            for (size_t r = 0; r < repeat; r++) {
                memcpy(run + r * unit, units[u], unit);
            }
            snprintf(what, sizeof(what), "%s run of '%s'", name, units[u]);
            check_stream(vocab, pattern, allowed, NULL, run, unit * repeat, what);
            free(run);
        }
        if (text != NULL) {
            size_t step = quick ? 20000 : 4000;
            for (size_t start = 0; start + 3000 <= text_len; start += step) {
                size_t end = start + 3000;
                while (start < text_len && (text[start] & 0xC0) == 0x80) start++;
                while (end < text_len && (text[end] & 0xC0) == 0x80) end++;
                snprintf(what, sizeof(what), "%s text at %zu", name, start);
                check_stream(vocab, pattern, allowed, refused, text + start, end - start, what);
            }
        }
    }
    tki_special_matcher_free(allowed);
    tki_special_matcher_free(refused);
    tki_special_matcher_free(all);
}

/* ------------------------------------------------------------------ (c) UTF-8 */

static void run_utf8_tests(const tki_vocab *vocab, int quick) {
    uint8_t data[64];
    for (int trial = 0; trial < (quick ? 3000 : 30000); trial++) {
        size_t len = random_below(40);
        for (size_t i = 0; i < len; i++) {
            uint32_t kind = random_below(6);
            data[i] = kind < 2 ? (uint8_t)('a' + random_below(26)) : kind == 2 ? (uint8_t)(0x80 + random_below(64))
                    : (uint8_t)(0xC0 + random_below(64));
        }
        size_t want_offset = 0;
        uint32_t want_reason = plain_utf8_error(data, len, &want_offset);
        size_t cuts[8];
        size_t cut_count = random_cuts(len, cuts, 4);
        tki_stream *stream = NULL;
        tki_stream_new(vocab, TKI_PATTERN_CL100K, 0, &stream);
        ids got = {0};
        int32_t status = streamed(stream, data, len, cuts, cut_count, &got);
        tki_stream_error error;
        tki_stream_get_error(stream, &error);
        if (want_reason == 0) {
            CHECK(status == TKI_OK, "valid UTF-8 refused (%d)", (int)status);
        } else {
            CHECK(status == TKI_ERR_INVALID_UTF8 && error.status == TKI_ERR_INVALID_UTF8 &&
                      error.offset == want_offset && error.reason == want_reason && error.byte == data[want_offset],
                  "UTF-8 error: got status %d offset %llu reason %u, want offset %zu reason %u", (int)status,
                  (unsigned long long)error.offset, error.reason, want_offset, want_reason);
            /* (f) and then every call fails */
            uint32_t out[8];
            size_t produced = 0;
            CHECK(tki_stream_feed(stream, (const uint8_t *)"a", 1, out, 8, &produced) == TKI_ERR_STREAM_FAILED &&
                      produced == 0 && tki_stream_finish(stream, out, 8, &produced) == TKI_ERR_STREAM_FAILED,
                  "a failed stream took more input");
        }
        free(got.ids);
        tki_stream_free(stream);
    }
}

/* ------------------------------------------------------------------ (d), (e): bounded and truncate */

/* tki_stream_bounded / tki_stream_truncate on a new stream of this splitter. */
static int32_t stream_bounded(const tki_vocab *vocab, splitter split, const tki_special_matcher *allowed,
                              const uint8_t *data, size_t len, uint64_t cap, uint32_t *out, uint64_t *count,
                              size_t *consumed, int32_t *exceeded) {
    tki_stream *stream = NULL;
    int32_t status = new_stream(vocab, split, allowed, NULL, &stream);
    if (status == TKI_OK) {
        status = tki_stream_bounded(stream, data, len, cap, out, count, consumed, exceeded);
    }
    tki_stream_free(stream);
    return status;
}

static int32_t stream_truncate(const tki_vocab *vocab, splitter split, const tki_special_matcher *allowed,
                               const uint8_t *data, size_t len, uint64_t cap, uint32_t *out, uint64_t *count,
                               size_t *prefix) {
    tki_stream *stream = NULL;
    int32_t status = new_stream(vocab, split, allowed, NULL, &stream);
    if (status == TKI_OK) {
        status = tki_stream_truncate(stream, data, len, cap, out, count, prefix);
    }
    tki_stream_free(stream);
    return status;
}

/*
 * A tki_text_source over data[0..len) that hands out whole characters, no more than asked
 * (but to the end of a character), each time in a new copy with the old one freed: a
 * bounded call that kept a pointer into the text it was given reads freed memory, which
 * the sanitizers catch.
 */
typedef struct dribble {
    const uint8_t *data;
    size_t len;
    uint8_t *copy;
    size_t given;
} dribble;

static int32_t dribble_more(void *context, size_t wanted, const uint8_t **data, size_t *length, int32_t *complete) {
    dribble *source = context;
    size_t n = wanted < source->len ? wanted : source->len;
    while (n < source->len && (source->data[n] & 0xC0) == 0x80) {
        n++;
    }
    n = n < source->given ? source->given : n;
    uint8_t *copy = checked_malloc(n + 1);
    memcpy(copy, source->data, n);
    free(source->copy);
    source->copy = copy;
    source->given = n;
    *data = copy;
    *length = n;
    *complete = n == source->len;
    return TKI_OK;
}

/* tki_stream_bounded_source (truncate: tki_stream_truncate_source) over a dribble. */
static int32_t stream_from_source(const tki_vocab *vocab, splitter split, const tki_special_matcher *allowed,
                                  const uint8_t *data, size_t len, uint64_t cap, int truncate, uint32_t *out,
                                  uint64_t *count, size_t *consumed_or_prefix, int32_t *exceeded) {
    dribble text = {data, len, NULL, 0};
    tki_text_source source = {dribble_more, &text};
    tki_stream *stream = NULL;
    int32_t status = new_stream(vocab, split, allowed, NULL, &stream);
    if (status == TKI_OK) {
        status = truncate ? tki_stream_truncate_source(stream, &source, cap, out, count, consumed_or_prefix)
                          : tki_stream_bounded_source(stream, &source, cap, out, count, consumed_or_prefix, exceeded);
    }
    tki_stream_free(stream);
    free(text.copy);
    return status;
}

/* The calls on a source that hands out the text as it is read give the answers of the
 * calls on the whole text. */
static void check_bounded_source(const tki_vocab *vocab, splitter pattern, const tki_special_matcher *allowed,
                                 const uint8_t *data, size_t len, uint64_t cap, const char *what) {
    uint32_t *whole = checked_malloc((len + 2) * sizeof(uint32_t));
    uint32_t *read = checked_malloc(((size_t)cap + 2) * sizeof(uint32_t));
    uint64_t count = 0, count_read = 0;
    size_t consumed = 0, consumed_read = 0;
    int32_t exceeded = 0, exceeded_read = 0;
    int32_t status = stream_bounded(vocab, pattern, allowed, data, len, cap, whole, &count, &consumed, &exceeded);
    int32_t status_read = stream_from_source(vocab, pattern, allowed, data, len, cap, 0, read, &count_read,
                                             &consumed_read, &exceeded_read);
    size_t kept = status == TKI_OK ? (size_t)count : 0;
    CHECK(status_read == status && count_read == count && consumed_read == consumed && exceeded_read == exceeded &&
              memcmp(read, whole, kept * sizeof(uint32_t)) == 0,
          "%s: bounded cap %llu from a source: status %d count %llu consumed %zu, whole text %d %llu %zu", what,
          (unsigned long long)cap, (int)status_read, (unsigned long long)count_read, consumed_read, (int)status,
          (unsigned long long)count, consumed);
    size_t prefix = 0, prefix_read = 0;
    status = stream_truncate(vocab, pattern, allowed, data, len, cap, whole, &count, &prefix);
    status_read = stream_from_source(vocab, pattern, allowed, data, len, cap, 1, read, &count_read, &prefix_read,
                                     NULL);
    kept = status == TKI_OK ? (size_t)count : 0;
    CHECK(status_read == status && count_read == count && prefix_read == prefix &&
              memcmp(read, whole, kept * sizeof(uint32_t)) == 0,
          "%s: truncate %llu from a source: status %d kept %llu (%zu bytes), whole text %d %llu (%zu bytes)", what,
          (unsigned long long)cap, (int)status_read, (unsigned long long)count_read, prefix_read, (int)status,
          (unsigned long long)count, prefix);
    free(read);
    free(whole);
}

static void check_bounded(const tki_vocab *vocab, splitter pattern, const tki_special_matcher *allowed,
                          const uint8_t *data, size_t len, const char *what) {
    ids want = {0};
    if (one_shot(vocab, pattern, allowed, NULL, data, len, &want) != TKI_OK) {
        free(want.ids);
        return;
    }
    uint32_t *out = checked_malloc((len + 2) * sizeof(uint32_t));
    uint32_t *lengths = checked_malloc((want.count + 1) * sizeof(uint32_t));
    size_t caps[8] = {0, 1, 2, want.count / 2, want.count > 0 ? want.count - 1 : 0, want.count, want.count + 1,
                      random_below((uint32_t)want.count + 2)};
    for (size_t c = 0; c < 8; c++) {
        uint64_t cap = caps[c], count = 0;
        size_t consumed = 0;
        int32_t exceeded = 0;
        int32_t status = stream_bounded(vocab, pattern, allowed, data, len, cap, out, &count, &consumed, &exceeded);
        int over = want.count > cap;
        size_t expect = over ? (size_t)cap + 1 : want.count;
        CHECK(status == TKI_OK && exceeded == over && count == expect && consumed <= len &&
                  memcmp(out, want.ids, expect * sizeof(uint32_t)) == 0,
              "%s: bounded cap %llu: status %d count %llu exceeded %d, want %zu", what, (unsigned long long)cap,
              (int)status, (unsigned long long)count, (int)exceeded, want.count);
        status = stream_bounded(vocab, pattern, allowed, data, len, cap, NULL, &count, &consumed, &exceeded);
        CHECK(status == TKI_OK && count == expect && exceeded == over, "%s: count-only cap %llu", what,
              (unsigned long long)cap);

        /* truncate: brute force over k from the cap down */
        size_t prefix = 0;
        status = stream_truncate(vocab, pattern, allowed, data, len, cap, out, &count, &prefix);
        size_t want_keep = 0, want_prefix = 0;
        if (!over) {
            want_keep = want.count;
            want_prefix = len;
        } else {
            size_t end = 0;
            for (size_t i = 0; i < (size_t)cap; i++) { /* the bytes of each id, from the text */
                lengths[i] = 0;
            }
            /* lengths from the one-shot encoding of growing prefixes is costly: decode instead,
             * counting special ids by their strings */
            for (size_t i = 0; i < (size_t)cap; i++) {
                uint32_t id = want.ids[i];
                if (id >= 900000) {
                    lengths[i] = (uint32_t)strlen(SPECIALS[id - 900000]);
                } else {
                    const uint8_t *bytes = NULL;
                    size_t token_len = 0;
                    tki_token_bytes(vocab, id, &bytes, &token_len);
                    lengths[i] = (uint32_t)token_len;
                }
                end += lengths[i];
            }
            ids prefix_ids = {0};
            for (size_t k = (size_t)cap; k > 0; k--) {
                if (end >= len || (data[end] & 0xC0) != 0x80) {
                    if (one_shot(vocab, pattern, allowed, NULL, data, end, &prefix_ids) == TKI_OK &&
                        prefix_ids.count == k && memcmp(prefix_ids.ids, want.ids, k * sizeof(uint32_t)) == 0) {
                        want_keep = k;
                        want_prefix = end;
                        break;
                    }
                }
                end -= lengths[k - 1];
            }
            free(prefix_ids.ids);
        }
        CHECK(status == TKI_OK && count == want_keep && prefix == want_prefix &&
                  memcmp(out, want.ids, want_keep * sizeof(uint32_t)) == 0,
              "%s: truncate %llu: status %d, kept %llu (%zu bytes), want %zu (%zu bytes)", what,
              (unsigned long long)cap, (int)status, (unsigned long long)count, prefix, want_keep, want_prefix);
        check_bounded_source(vocab, pattern, allowed, data, len, cap, what);
    }
    free(lengths);
    free(out);
    free(want.ids);
}

static void run_bounded_tests(const tki_vocab *vocab, const char *name, const splitter *patterns, size_t count,
                              const uint8_t *text, size_t text_len, int quick) {
    tki_special_matcher *allowed = specials_matcher(0, 2);
    uint8_t buffer[2048];
    char what[128];
    for (size_t p = 0; p < count; p++) {
        for (int trial = 0; trial < (quick ? 30 : 200); trial++) {
            size_t len = random_text(buffer, sizeof(buffer));
            snprintf(what, sizeof(what), "%s random #%d", name, trial);
            check_bounded(vocab, patterns[p], allowed, buffer, len, what);
        }
        /* a text of many blocks, its prefixes read from a source as the calls go */
        size_t long_len = 0;
        uint8_t *long_text = checked_malloc(300000 + sizeof(buffer));
        while (long_len < 300000) {
            long_len += random_text(long_text + long_len, sizeof(buffer));
        }
        uint64_t long_caps[4] = {0, 1000, 40000, 1000000};
        for (size_t c = 0; c < 4; c++) {
            snprintf(what, sizeof(what), "%s long random text", name);
            check_bounded_source(vocab, patterns[p], allowed, long_text, long_len, long_caps[c], what);
        }
        free(long_text);
        if (text != NULL) {
            for (size_t start = 0; start + 20000 <= text_len; start += quick ? 400000 : 100000) {
                size_t end = start + 20000;
                while (start < text_len && (text[start] & 0xC0) == 0x80) start++;
                while (end < text_len && (text[end] & 0xC0) == 0x80) end++;
                snprintf(what, sizeof(what), "%s text at %zu", name, start);
                check_bounded(vocab, patterns[p], allowed, text + start, end - start, what);
            }
        }
    }
    tki_special_matcher_free(allowed);
}

/* ------------------------------------------------------------------ (g) allocation failures */

#ifdef TKI_TEST_ALLOC_FAILURES
#include "alloc_failures.h"

/* Every allocation of one stream's life failed in turn. */
static void alloc_failures_for(const tki_vocab *vocab, int32_t pattern, const uint8_t *data, size_t len,
                               const char *what) {
    ids want = {0};
    splitter split = {pattern, NULL, "built-in"};
    one_shot(vocab, split, NULL, NULL, data, len, &want);
    for (int64_t n = 0;; n++) {
        tki_stream *stream = NULL;
        arm_failure(n);
        int32_t status = tki_stream_new(vocab, pattern, 0, &stream);
        ids got = {0};
        size_t cuts[3] = {len / 3, len / 2, len - len / 4};
        if (status == TKI_OK) {
            got.ids = __real_malloc((len + 16) * sizeof(uint32_t));
            got.capacity = len + 16;
            size_t start = 0;
            for (size_t k = 0; k <= 3 && status == TKI_OK; k++) {
                size_t end = k < 3 ? cuts[k] : len, produced = 0;
                status = tki_stream_feed(stream, data + start, end - start, got.ids + got.count,
                                         got.capacity - got.count, &produced);
                got.count += produced;
                start = end;
            }
            if (status == TKI_OK) {
                size_t produced = 0;
                status = tki_stream_finish(stream, got.ids + got.count, got.capacity - got.count, &produced);
                got.count += produced;
            }
        }
        int failed = disarm_failure();
        if (!failed) {
            CHECK(status == TKI_OK && same_ids(&got, &want), "%s: stream wrong with no failure", what);
        } else {
            CHECK(status == TKI_ERR_NOMEM, "%s: allocation %lld failed, status %d", what, (long long)n, (int)status);
            if (stream != NULL) {
                /* The stream failed: every later call says so, and writes nothing. */
                size_t produced = 7;
                uint32_t out[4];
                CHECK(tki_stream_feed(stream, data, len < 4 ? len : 3, out, 4, &produced) == TKI_ERR_STREAM_FAILED &&
                          produced == 0,
                      "%s: a failed stream took more input", what);
                CHECK(tki_stream_finish(stream, out, 4, &produced) == TKI_ERR_STREAM_FAILED && produced == 0,
                      "%s: a failed stream finished", what);
                tki_stream_error error;
                tki_stream_get_error(stream, &error);
                CHECK(error.status == TKI_ERR_NOMEM, "%s: the first error is kept", what);
            }
        }
        free(got.ids);
        tki_stream_free(stream);
        if (!failed) {
            break;
        }
    }
    free(want.ids);
}

static void run_alloc_failure_tests(const tki_vocab *vocab) {
    static const char *const heap_tokens[] = {"abc", "ab"}; /* improper: the heap BPE */
    tki_vocab *heap = small_vocab(heap_tokens, 2);
    uint8_t xs[100];
    memset(xs, 'x', sizeof(xs));
    alloc_failures_for(heap, 0, xs, sizeof(xs), "heap, one piece, 100 x");
    alloc_failures_for(heap, TKI_PATTERN_CL100K, (const uint8_t *)"abc abcab xxabc abab", 20, "heap, cl100k");
    static const char sample[] = "Hello, world! \xe4\xb8\xad\xe6\x96\x87 123456789 it's    spaces\n\nend";
    alloc_failures_for(vocab, TKI_PATTERN_CL100K, (const uint8_t *)sample, sizeof(sample) - 1, "cl100k sample");
    alloc_failures_for(vocab, 0, (const uint8_t *)sample, sizeof(sample) - 1, "one piece sample");
    uint8_t *spaces = checked_malloc(3000);
    memset(spaces, ' ', 3000);
    alloc_failures_for(vocab, TKI_PATTERN_O200K, spaces, 3000, "o200k spaces");
    free(spaces);
    tki_vocab_free(heap);
}
#endif

/* ------------------------------------------------------------------ main */

static uint8_t *read_file(const char *path, size_t *len) {
    FILE *file = fopen(path, "rb");
    if (file == NULL) {
        return NULL;
    }
    fseek(file, 0, SEEK_END);
    long size = ftell(file);
    fseek(file, 0, SEEK_SET);
    uint8_t *data = checked_malloc((size_t)size + 1);
    *len = fread(data, 1, (size_t)size, file);
    fclose(file);
    return data;
}

int main(int argc, char **argv) {
    const char *text_path = NULL;
    int alloc_only = 0, quick = 0;
    const char *ranks[8];
    int rank_count = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            g_rng = strtoull(argv[++i], NULL, 10) | 1;
        } else if (strcmp(argv[i], "--text") == 0 && i + 1 < argc) {
            text_path = argv[++i];
        } else if (strcmp(argv[i], "--alloc-failures-only") == 0) {
            alloc_only = 1;
        } else if (strcmp(argv[i], "--quick") == 0) {
            quick = 1;
        } else if (rank_count < 8) {
            ranks[rank_count++] = argv[i];
        }
    }
    if (rank_count == 0) {
        fprintf(stderr, "usage: test_stream [--seed N] [--text FILE] [--quick] [--alloc-failures-only] RANK_FILE...\n");
        return 2;
    }
    size_t text_len = 0;
    uint8_t *text = text_path != NULL ? read_file(text_path, &text_len) : NULL;
    /* The built-in patterns, no pattern, and the compiled programs in $TKI_PATTERN_DIR (written by
     * tests/fuzz/gen_pattern_programs.py), when it is set. */
    splitter splits[16] = {{0, NULL, "one piece"}, {TKI_PATTERN_R50K, NULL, "r50k"},
                           {TKI_PATTERN_CL100K, NULL, "cl100k"}, {TKI_PATTERN_O200K, NULL, "o200k"}};
    size_t split_count = 4;
    static const char *const compiled_names[] = {"cl100k", "o200k", "llama3", "qwen3_5", "tekken", "kimi_k2"};
    tki_pattern *compiled[6] = {NULL};
    const char *directory = getenv("TKI_PATTERN_DIR");
    for (size_t c = 0; directory != NULL && c < 6; c++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s.tkip", directory, compiled_names[c]);
        size_t program_len = 0;
        uint8_t *program = read_file(path, &program_len);
        if (program == NULL || tki_pattern_load(program, program_len, &compiled[c]) != TKI_OK) {
            fprintf(stderr, "test_stream: cannot load %s\n", path);
            return 2;
        }
        free(program);
        splits[split_count].pattern = 0;
        splits[split_count].compiled = compiled[c];
        splits[split_count].name = compiled_names[c];
        split_count++;
    }
    for (int r = 0; r < rank_count; r++) {
        tki_vocab *vocab = vocab_from_file(ranks[r]);
#ifdef TKI_TEST_ALLOC_FAILURES
        run_alloc_failure_tests(vocab);
#endif
        if (!alloc_only) {
            run_stream_tests(vocab, ranks[r], splits, split_count, text, text_len, quick);
            run_bounded_tests(vocab, ranks[r], splits, split_count, text, text_len, quick);
            if (r == 0) {
                run_utf8_tests(vocab, quick);
                static const char *const heap_tokens[] = {"abc", "ab", "xy", "xyz", "bc"};
                tki_vocab *heap = small_vocab(heap_tokens, 5);
                run_stream_tests(heap, "heap vocabulary", splits, split_count, NULL, 0, 1);
                run_bounded_tests(heap, "heap vocabulary", splits, split_count, NULL, 0, 1);
                tki_vocab_free(heap);
                static const char *const noncanonical[] = {"ab", "abc d", "xyz"};
                tki_vocab *odd = small_vocab(noncanonical, 3);
                run_stream_tests(odd, "non-canonical vocabulary", splits, split_count, NULL, 0, 1);
                run_bounded_tests(odd, "non-canonical vocabulary", splits, split_count, NULL, 0, 1);
                tki_vocab_free(odd);
            }
        }
        tki_vocab_free(vocab);
    }
    free(text);
    for (size_t c = 0; c < 6; c++) {
        tki_pattern_free(compiled[c]);
    }
    printf("test_stream: %llu passed, %llu failed\n", (unsigned long long)g_passed, (unsigned long long)g_failed);
    return g_failed == 0 ? 0 : 1;
}
