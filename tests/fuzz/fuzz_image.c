/*
 * fuzz_image.c — owns the fuzz target for reading images: tki_vocab_read_image
 * on images the input damages, the checksum made to match each time
 * (tki_vocab_image_seal), so that the fuzzer gets past it to the tables'
 * checks.  Three vocabularies are built once and imaged: the first 768 ranks
 * of cl100k_base (incremental; its automaton, suffix chains and centroid
 * blocks are all there), a small improper one (properized: rules moved, and a
 * watched token, flagged in the rule flags and the automaton's rows) and a
 * small one with a non-canonical token and specials.
 * The input picks one, then gives edits: each an offset into the image (or
 * into its header, for one edit in two of the shorter form), a width and a
 * value written or XORed there.  Checked:
 *   - nothing an image holds makes reading, adding special tokens, encoding
 *     (one-shot with each pattern, the three methods, the stream, the bounded
 *     call, the prefix table) or decoding crash, read out of bounds or hang:
 *     an image that loads is used, whatever ids it gives;
 *   - an image the edits left as it was loads, and gives the ids of the
 *     vocabulary it was made from.
 */
#include "fuzz_common.h"

enum { BASES = 3, CL100K_PREFIX = 768, MAX_EDITS = 64, MAX_IDS = 4096 };

typedef struct base_image {
    tki_vocab *vocab;
    uint8_t *image;
    uint64_t size;
    uint32_t *want[4]; /* ids of g_texts[0] with patterns 0 (one piece), 1, 2, 3 */
    size_t want_count[4];
} base_image;

static base_image g_bases[BASES];

static const char *const g_texts[] = {
    "Hello, world! It's 2024: don't   stop\n\n\t 12345678901234 ab abab ba aaaaa abcabc",
    "\xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80\xf0\x9f\x98\x80 caf\xc3\xa9 \xc3\x28 \xff\xfe",
    "abababababababababababababababababababababababababababababababababababab"
    "abababababababababababababababababababababababababababababababababababab"
    "abababababababababababababababababababababababababababababababababababab",
    "                                                                          x",
};
#define TEXT_COUNT (sizeof(g_texts) / sizeof(g_texts[0]))

/* The ids of text with pattern (0: the text as one piece, shortcut on), or status. */
static int32_t encode_with(const tki_vocab *vocab, int32_t pattern, const uint8_t *text,
                           size_t len, uint32_t flags, uint32_t *out, size_t *count) {
    if (pattern == 0) {
        return tki_encode_pieces(vocab, text, len, &len, 1, flags | TKI_WHOLE_PIECE_SHORTCUT,
                                 out, len, count);
    }
    return tki_encode_text(vocab, pattern, text, len, flags, out, len, count, NULL);
}

static void image_of(base_image *base) {
    FUZZ_CHECK(tki_vocab_image_size(base->vocab, &base->size) == TKI_OK, "image size");
    base->image = aligned_alloc(64, (size_t)base->size);
    FUZZ_CHECK(base->image != NULL, "out of memory");
    FUZZ_CHECK(tki_vocab_write_image(base->vocab, base->image, base->size) == TKI_OK, "image");
    const uint8_t *text = (const uint8_t *)g_texts[0];
    size_t len = strlen(g_texts[0]);
    for (int32_t pattern = 0; pattern <= TKI_PATTERN_O200K; pattern++) {
        base->want[pattern] = fuzz_malloc(len * sizeof(uint32_t));
        int32_t status = encode_with(base->vocab, pattern, text, len, 0, base->want[pattern],
                                     &base->want_count[pattern]);
        FUZZ_CHECK(status == TKI_OK, "encoding with base vocabulary: status %d", (int)status);
    }
}

/* A vocabulary of the 256 bytes (ranks 0..255) and `count` tokens, with specials. */
static tki_vocab *small_vocab(const char *const *tokens, const uint32_t *ranks, uint32_t count,
                              const char *specials, uint32_t special_count) {
    uint8_t bytes[1024];
    uint64_t offsets[300];
    uint32_t all_ranks[300];
    uint32_t n = 0, used = 0;
    offsets[0] = 0;
    for (uint32_t b = 0; b < 256; b++, n++) {
        bytes[used++] = (uint8_t)b;
        all_ranks[n] = b;
        offsets[n + 1] = used;
    }
    for (uint32_t i = 0; i < count; i++, n++) {
        size_t len = strlen(tokens[i]);
        memcpy(bytes + used, tokens[i], len);
        used += (uint32_t)len;
        all_ranks[n] = ranks[i];
        offsets[n + 1] = used;
    }
    /* Specials: "<|a|>" and so on, each 5 bytes, ranks 400, 401, ... */
    uint64_t special_offsets[8];
    uint32_t special_ranks[8];
    for (uint32_t i = 0; i <= special_count; i++) {
        special_offsets[i] = 5ull * i;
        if (i < special_count) {
            special_ranks[i] = 400 + i;
        }
    }
    tki_vocab *vocab = NULL;
    uint32_t error_index = 0;
    int32_t status = tki_vocab_build(bytes, offsets, all_ranks, n, (const uint8_t *)specials,
                                     special_offsets, special_ranks, special_count, &vocab,
                                     &error_index);
    FUZZ_CHECK(status == TKI_OK, "small vocabulary: status %d at %u", (int)status, error_index);
    return vocab;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    const char *argv0 = (argc != NULL && *argc > 0 && argv != NULL) ? (*argv)[0] : NULL;
    char path[4200];
    if (fuzz_find_rank_file("cl100k_base.tiktoken", argv0, path, sizeof(path)) != 0) {
        fprintf(stderr, "fuzz: cannot find cl100k_base.tiktoken (set TKI_RANKS_DIR)\n");
        abort();
    }
    tki_rank_file file;
    FUZZ_CHECK(tki_rank_file_load(path, &file) == 0, "cannot read %s", path);
    /* The file is in rank order: its first CL100K_PREFIX lines. */
    uint32_t count = file.count < CL100K_PREFIX ? file.count : CL100K_PREFIX;
    static const char special[] = "<|endoftext|>";
    uint64_t special_offsets[2] = {0, sizeof(special) - 1};
    uint32_t special_rank = CL100K_PREFIX + 7;
    uint32_t error_index = 0;
    int32_t status = tki_vocab_build(file.bytes, file.offsets, file.ranks, count,
                                     (const uint8_t *)special, special_offsets, &special_rank, 1,
                                     &g_bases[0].vocab, &error_index);
    tki_rank_file_free(&file);
    FUZZ_CHECK(status == TKI_OK, "cl100k prefix: status %d at %u", (int)status, error_index);
    /* abc before ab and bc (moved after them); aaa before aa (watched: "aaaa" is aaa|a). */
    static const char *const improper[] = {"ab", "bc", "abc", "  ", "aaa", "aa"};
    static const uint32_t improper_ranks[] = {301, 300, 299, 302, 303, 304};
    g_bases[1].vocab = small_vocab(improper, improper_ranks, 6, "", 0);
    /* "abcd" is never built: its BPE stops at a|bc|d. */
    static const char *const noncanonical[] = {"bc", "ll", "he", "hell", "abcd"};
    static const uint32_t noncanonical_ranks[] = {256, 257, 258, 259, 300};
    g_bases[2].vocab = small_vocab(noncanonical, noncanonical_ranks, 5, "<|a|><|b|>", 2);
    tki_vocab_info info[BASES];
    for (int i = 0; i < BASES; i++) {
        tki_vocab_get_info(g_bases[i].vocab, &info[i]);
        image_of(&g_bases[i]);
    }
    FUZZ_CHECK(info[0].incremental && info[1].incremental && info[1].moved_rules == 2 &&
                   info[1].watched_tokens == 1 && info[2].incremental &&
                   info[2].noncanonical_count > 0,
               "the base vocabularies are not of the kinds this target wants");
    return 0;
}

/* Everything a program does with a vocabulary: none of it may crash or hang. */
static void use(const tki_vocab *vocab, const uint8_t *text, size_t len) {
    uint32_t *ids = fuzz_malloc((len + 1) * sizeof(uint32_t));
    size_t count = 0;
    for (int32_t pattern = 0; pattern <= TKI_PATTERN_O200K; pattern++) {
        static const uint32_t methods[] = {0, TKI_METHOD_LINEAR, TKI_METHOD_HEAP};
        for (size_t m = 0; m < 3; m++) {
            if (encode_with(vocab, pattern, text, len, methods[m], ids, &count) == TKI_OK) {
                FUZZ_CHECK(count <= len, "%zu ids for %zu bytes", count, len);
                size_t total = 0, bad = 0;
                if (tki_decoded_length(vocab, ids, count, &total, &bad) == TKI_OK &&
                    total <= 1u << 24) {
                    uint8_t *bytes = fuzz_malloc(total);
                    size_t written = 0;
                    (void)tki_decode(vocab, ids, count, bytes, total, &written, &bad);
                    free(bytes);
                }
            }
        }
        /* The stream, fed in uneven chunks, then the bounded call. */
        tki_stream *stream = NULL;
        if (tki_stream_new(vocab, pattern, 0, &stream) == TKI_OK) {
            int32_t status = TKI_OK;
            for (size_t at = 0; status == TKI_OK && at < len;) {
                size_t chunk = len - at < 7 ? len - at : 7;
                size_t capacity = (size_t)tki_stream_pending(stream) + chunk + 1, got = 0;
                uint32_t *out = fuzz_malloc(capacity * sizeof(uint32_t));
                status = tki_stream_feed(stream, text + at, chunk, out, capacity, &got);
                free(out);
                at += chunk;
            }
            if (status == TKI_OK) {
                size_t capacity = (size_t)tki_stream_pending(stream) + 1, got = 0;
                uint32_t *out = fuzz_malloc(capacity * sizeof(uint32_t));
                (void)tki_stream_finish(stream, out, capacity, &got);
                free(out);
            }
            tki_stream_free(stream);
        }
        uint64_t bounded = 0;
        size_t consumed = 0;
        int32_t exceeded = 0;
        (void)tki_encode_bounded(vocab, pattern, text, len, 5, ids, &bounded, &consumed, &exceeded);
    }
    (void)tki_prefix_last_tokens(vocab, text, len, 0, ids);
    (void)tki_prefix_last_tokens(vocab, text, len, TKI_METHOD_LINEAR, ids);
    /* Decoding ids near and past the ranks. */
    for (uint32_t id = 0; id < 1100; id += 3) {
        const uint8_t *bytes = NULL;
        size_t bytes_len = 0;
        if (tki_token_bytes(vocab, id, &bytes, &bytes_len) == TKI_OK && bytes_len > 0) {
            volatile uint8_t sink = bytes[0] ^ bytes[bytes_len - 1];
            (void)sink;
        }
    }
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_reader reader = {data, size, 0};
    base_image *base = &g_bases[fuzz_byte(&reader) % BASES];
    uint8_t *image = aligned_alloc(64, (size_t)base->size); /* a multiple of 64: exact */
    FUZZ_CHECK(image != NULL, "out of memory");
    memcpy(image, base->image, (size_t)base->size);
    for (int edit = 0; edit < MAX_EDITS && reader.used < reader.size; edit++) {
        uint8_t op = fuzz_byte(&reader);
        uint32_t width = 1u << (op & 3);
        uint64_t offset;
        if (op & 4) { /* the header */
            offset = fuzz_byte(&reader) % 128;
        } else {
            offset = fuzz_u16(&reader) | (uint64_t)fuzz_byte(&reader) << 16;
            offset %= base->size;
        }
        uint64_t value = 0;
        for (uint32_t i = 0; i < width; i++) {
            value |= (uint64_t)fuzz_byte(&reader) << (8 * i);
        }
        if (op & 8) {
            value = ~value; /* near the top: TKI_NONE and friends */
        }
        for (uint32_t i = 0; i < width && offset + i < base->size; i++) {
            uint8_t byte = (uint8_t)(value >> (8 * i));
            image[offset + i] = (op & 16) ? image[offset + i] ^ byte : byte;
        }
    }
    int pristine = memcmp(image, base->image, (size_t)base->size) == 0;
    int32_t status = tki_vocab_image_seal(image, base->size);
    FUZZ_CHECK(status == TKI_OK || !pristine, "sealing the base image: status %d", (int)status);
    tki_vocab *vocab = NULL;
    status = tki_vocab_read_image(image, base->size, &vocab);
    if (pristine) {
        FUZZ_CHECK(status == TKI_OK, "the base image is refused: status %d", (int)status);
        const uint8_t *text = (const uint8_t *)g_texts[0];
        size_t len = strlen(g_texts[0]);
        uint32_t *ids = fuzz_malloc(len * sizeof(uint32_t));
        for (int32_t pattern = 0; pattern <= TKI_PATTERN_O200K; pattern++) {
            size_t count = 0;
            status = encode_with(vocab, pattern, text, len, 0, ids, &count);
            FUZZ_CHECK(status == TKI_OK, "encoding with the base image: status %d", (int)status);
            FUZZ_SAME_IDS(ids, count, base->want[pattern], base->want_count[pattern],
                          "the base image");
        }
        free(ids);
    }
    if (status == TKI_OK && vocab != NULL) {
        /* An image holds no special tokens: they are added once it is read. */
        static const uint8_t special_bytes[] = "<|a|><|b|>";
        static const uint64_t special_offsets[3] = {0, 5, 10};
        static const uint32_t special_ids[2] = {900, 401};
        uint32_t error_index = 0;
        status = tki_vocab_set_specials(vocab, special_bytes, special_offsets, special_ids, 2,
                                        &error_index);
        FUZZ_CHECK(status == TKI_OK || status == TKI_ERR_DUPLICATE_RANK,
                   "set_specials: status %d", (int)status);
        for (size_t i = 0; i < TEXT_COUNT; i++) {
            size_t len = strlen(g_texts[i]);
            uint8_t *text = fuzz_copy((const uint8_t *)g_texts[i], len);
            use(vocab, text, len);
            free(text);
        }
        /* The rest of the input as a text too. */
        size_t len = reader.size - reader.used;
        len = len > 512 ? 512 : len;
        uint8_t *text = fuzz_copy(reader.data + reader.used, len);
        use(vocab, text, len);
        free(text);
    }
    tki_vocab_free(vocab);
    free(image);
    return 0;
}
