/*
 * fuzz_stream.c — owns the fuzz target for the stream and the bounded calls
 * (stream.c) on the real vocabularies (r50k_base and cl100k_base, found as
 * fuzz_encode_text.c finds them).  The input is a header, then a text:
 *   byte 0: pattern (0 one piece, 1..3 the built-in ones), vocabulary (bit 2),
 *           specials: none / allowed / allowed and refused (bits 3..4);
 *   byte 1: a cap for the bounded calls;
 *   then the cut points of the chunks, as 16-bit lengths, up to a zero;
 *   then the text (any bytes).
 * Checks: the stream's ids over the chunks equal tki_encode_with_specials of
 * the whole text (when the text is UTF-8 and holds no refused string), or the
 * stream fails with the error the text calls for (invalid UTF-8 at the first
 * bad sequence, a refused string), after which every call fails; bounded
 * counting equals the one-shot count up to the cap; truncation keeps ids that
 * are a prefix of the one-shot encoding and are the encoding of the prefix;
 * the bounded calls and truncation on a text read from a source (handed out in
 * steps of the cut lengths, each time in a new copy, the old one freed) give
 * what they give on the whole text.
 */
#include "fuzz_common.h"
#include "plain_utf8.h"

enum { MAX_TEXT = 1 << 13, MAX_CUTS = 32 };

static tki_vocab *g_vocabs[2];
static tki_special_matcher *g_allowed, *g_refused;

static tki_special_matcher *matcher_of(const char *const *strings, uint32_t count, uint32_t first_id) {
    uint8_t bytes[256];
    uint64_t offsets[8] = {0};
    uint32_t ids[8];
    size_t used = 0;
    for (uint32_t i = 0; i < count; i++) {
        size_t length = strlen(strings[i]);
        memcpy(bytes + used, strings[i], length);
        used += length;
        offsets[i + 1] = used;
        ids[i] = first_id + i;
    }
    tki_special_matcher *matcher = NULL;
    FUZZ_CHECK(tki_special_matcher_build(bytes, offsets, ids, count, &matcher, NULL) == TKI_OK, "matcher");
    return matcher;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    const char *argv0 = (argc != NULL && *argc > 0 && argv != NULL) ? (*argv)[0] : NULL;
    g_vocabs[0] = fuzz_load_vocab("r50k_base.tiktoken", argv0);
    g_vocabs[1] = fuzz_load_vocab("cl100k_base.tiktoken", argv0);
    static const char *const allowed[] = {"<|endoftext|>", "<|a|>"};
    static const char *const refused[] = {"<|b|>", "<|a|>x"};
    g_allowed = matcher_of(allowed, 2, 900000);
    g_refused = matcher_of(refused, 2, 0);
    return 0;
}

/*
 * A tki_text_source over text[0..len) that hands out at least what is asked and
 * a further cut length, to the end of a character, each time in a new copy with
 * the old one freed: a call that kept a pointer into the text it was given reads
 * freed memory, which the sanitizers catch.
 */
typedef struct dribble {
    const uint8_t *text;
    size_t len;
    const size_t *steps;
    size_t step_count, next_step;
    uint8_t *copy;
    size_t given;
} dribble;

static int32_t dribble_more(void *context, size_t wanted, const uint8_t **data, size_t *length, int32_t *complete) {
    dribble *source = context;
    size_t step = source->step_count > 0 ? source->steps[source->next_step++ % source->step_count] : 1;
    size_t n = wanted > source->given ? wanted : source->given;
    n = n >= source->len || source->len - n <= step ? source->len : n + step;
    while (n < source->len && (source->text[n] & 0xC0) == 0x80) {
        n++;
    }
    uint8_t *copy = fuzz_copy(source->text, n);
    free(source->copy);
    source->copy = copy;
    source->given = n;
    *data = copy;
    *length = n;
    *complete = n == source->len;
    return TKI_OK;
}

/* The bounded call (truncate: truncation) of a new stream on the whole text and on
 * a dribble of it: the same status, counts and ids. */
static void check_source(const tki_vocab *vocab, int32_t pattern, const tki_special_matcher *allowed,
                         const tki_special_matcher *refused, const uint8_t *text, size_t len, uint64_t cap,
                         const size_t *steps, size_t step_count, int truncate) {
    uint32_t *whole = fuzz_malloc(((size_t)cap + 2) * sizeof(uint32_t));
    uint32_t *read = fuzz_malloc(((size_t)cap + 2) * sizeof(uint32_t));
    uint64_t count = 0, count_read = 0;
    size_t consumed = 0, consumed_read = 0;
    int32_t exceeded = 0, exceeded_read = 0, status, status_read;
    tki_stream *stream = NULL;
    FUZZ_CHECK(tki_stream_new_with_specials(vocab, pattern, allowed, refused, 0, &stream) == TKI_OK, "new");
    status = truncate ? tki_stream_truncate(stream, text, len, cap, whole, &count, &consumed)
                      : tki_stream_bounded(stream, text, len, cap, whole, &count, &consumed, &exceeded);
    tki_stream_free(stream);
    dribble source_text = {text, len, steps, step_count, 0, NULL, 0};
    tki_text_source source = {dribble_more, &source_text};
    FUZZ_CHECK(tki_stream_new_with_specials(vocab, pattern, allowed, refused, 0, &stream) == TKI_OK, "new");
    status_read = truncate ? tki_stream_truncate_source(stream, &source, cap, read, &count_read, &consumed_read)
                           : tki_stream_bounded_source(stream, &source, cap, read, &count_read, &consumed_read,
                                                       &exceeded_read);
    tki_stream_free(stream);
    free(source_text.copy);
    FUZZ_CHECK(status_read == status && count_read == count && consumed_read == consumed &&
                   exceeded_read == exceeded,
               "%s from a source, cap %llu: status %d count %llu read %zu, whole text %d %llu %zu",
               truncate ? "truncate" : "bounded", (unsigned long long)cap, (int)status_read,
               (unsigned long long)count_read, consumed_read, (int)status, (unsigned long long)count, consumed);
    if (status == TKI_OK) {
        FUZZ_SAME_IDS(read, (size_t)count_read, whole, (size_t)count, "ids from a source vs the whole text");
    }
    free(read);
    free(whole);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_reader reader = {data, size, 0};
    uint8_t setup = fuzz_byte(&reader);
    uint64_t cap = fuzz_byte(&reader);
    int32_t pattern = setup & 3;
    const tki_vocab *vocab = g_vocabs[(setup >> 2) & 1];
    uint32_t specials = (setup >> 3) & 3;
    const tki_special_matcher *allowed = specials >= 1 ? g_allowed : NULL;
    const tki_special_matcher *refused = specials >= 2 ? g_refused : NULL;
    size_t cut_lengths[MAX_CUTS];
    size_t cut_count = 0;
    while (cut_count < MAX_CUTS) {
        size_t length = fuzz_u16(&reader);
        if (length == 0) {
            break;
        }
        cut_lengths[cut_count++] = length;
    }
    size_t len = size - reader.used > MAX_TEXT ? MAX_TEXT : size - reader.used;
    uint8_t *text = fuzz_copy(data + reader.used, len);

    /* What the one-shot calls say. */
    size_t bad_utf8 = SIZE_MAX;
    if (plain_utf8_error(text, len, &bad_utf8) == 0) {
        bad_utf8 = SIZE_MAX;
    }
    size_t refused_at = 0, found = 0;
    uint32_t refused_string = 0;
    if (refused != NULL) {
        tki_special_matcher_find(refused, text, len, 0, &refused_at, &refused_string, 1, &found);
    }
    uint32_t *want = fuzz_malloc((len + 1) * sizeof(uint32_t));
    size_t want_count = 0;
    int32_t status = tki_encode_with_specials(vocab, pattern, allowed, text, len, 0, want, len + 1, &want_count, NULL);
    FUZZ_CHECK(status == TKI_OK, "one-shot: status %d", (int)status);

    /* The stream over the chunks. */
    tki_stream *stream = NULL;
    FUZZ_CHECK(tki_stream_new_with_specials(vocab, pattern, allowed, refused, 0, &stream) == TKI_OK, "new");
    uint32_t *got = fuzz_malloc((2 * len + 8) * sizeof(uint32_t)); /* room for every call's capacity */
    size_t got_count = 0, start = 0;
    status = TKI_OK;
    for (size_t k = 0; status == TKI_OK && start < len; k++) {
        size_t end = k < cut_count && start + cut_lengths[k] < len ? start + cut_lengths[k] : len;
        size_t produced = 0, capacity = (size_t)tki_stream_pending(stream) + (end - start) + 1;
        status = tki_stream_feed(stream, text + start, end - start, got + got_count, capacity, &produced);
        got_count += produced;
        start = end;
    }
    if (status == TKI_OK) {
        size_t produced = 0;
        status = tki_stream_finish(stream, got + got_count, (size_t)tki_stream_pending(stream) + 1, &produced);
        got_count += produced;
    }
    if (bad_utf8 != SIZE_MAX && (!found || bad_utf8 < refused_at)) {
        tki_stream_error error;
        tki_stream_get_error(stream, &error);
        FUZZ_CHECK(status == TKI_ERR_INVALID_UTF8 && error.offset == bad_utf8,
                   "invalid UTF-8 at %zu: status %d, offset %llu", bad_utf8, (int)status,
                   (unsigned long long)error.offset);
    } else if (found) {
        FUZZ_CHECK(status == TKI_ERR_REFUSED_SPECIAL || status == TKI_ERR_INVALID_UTF8,
                   "refused string at %zu: status %d", refused_at, (int)status);
    } else {
        FUZZ_CHECK(status == TKI_OK, "stream: status %d", (int)status);
        FUZZ_SAME_IDS(got, got_count, want, want_count, "stream vs one-shot");
    }
    if (status != TKI_OK) {
        size_t produced = 1;
        FUZZ_CHECK(tki_stream_feed(stream, text, len > 0 ? 1 : 0, got, 2, &produced) == TKI_ERR_STREAM_FAILED &&
                       produced == 0,
                   "a failed stream took more");
    }
    tki_stream_free(stream);

    /* Bounded calls and truncation (on UTF-8 text without refused strings, as the callers give them). */
    if (bad_utf8 == SIZE_MAX && !found) {
        uint64_t count = 0;
        size_t consumed = 0, prefix = 0;
        int32_t exceeded = 0;
        status = tki_encode_bounded_specials(vocab, pattern, allowed, refused, text, len, cap, got, &count, &consumed,
                                             &exceeded, NULL);
        int over = want_count > cap;
        FUZZ_CHECK(status == TKI_OK && exceeded == over && count == (over ? cap + 1 : want_count) &&
                       consumed <= len,
                   "bounded cap %llu: status %d count %llu", (unsigned long long)cap, (int)status,
                   (unsigned long long)count);
        FUZZ_SAME_IDS(got, (size_t)count, want, (size_t)count, "bounded ids vs one-shot");
        status = tki_truncate(vocab, pattern, allowed, refused, text, len, cap, got, &count, &prefix, NULL);
        FUZZ_CHECK(status == TKI_OK && count <= cap && prefix <= len, "truncate: status %d", (int)status);
        FUZZ_SAME_IDS(got, (size_t)count, want, (size_t)count, "truncated ids vs one-shot");
        FUZZ_CHECK(!over ? count == want_count && prefix == len : 1, "truncate kept less than the whole text");
        FUZZ_CHECK(prefix == len || (text[prefix] & 0xC0) != 0x80, "truncate cut a character");
        uint32_t *again = fuzz_malloc((prefix + 1) * sizeof(uint32_t));
        size_t again_count = 0;
        status = tki_encode_with_specials(vocab, pattern, allowed, text, prefix, 0, again, prefix + 1, &again_count,
                                          NULL);
        FUZZ_CHECK(status == TKI_OK, "prefix: status %d", (int)status);
        FUZZ_SAME_IDS(again, again_count, got, (size_t)count, "the prefix's encoding vs the kept ids");
        free(again);
        check_source(vocab, pattern, allowed, refused, text, len, cap, cut_lengths, cut_count, 0);
        check_source(vocab, pattern, allowed, refused, text, len, cap, cut_lengths, cut_count, 1);
    }
    free(got);
    free(want);
    free(text);
    return 0;
}
