/*
 * fuzz_encode_text.c — owns the fuzz target for tki_encode_text on the real
 * vocabularies.  r50k_base and cl100k_base are built once (from
 * $TKI_RANKS_DIR, or tiktoken_inc/ranks found from the current directory or
 * the executable's).  For each input text, each vocabulary and each of the
 * three patterns: tki_encode_text (default, linear and heap methods) must
 * equal tki_pretokenize's pieces encoded one tki_encode_pieces call at a time
 * (heap method + shortcut, the reference semantics), report the last piece's
 * token count, and decode back to the input; and tki_prefix_pass, with and
 * without the slot before its output (long pieces stepped into the output, or
 * copied), must give for every piece what tki_prefix_last_tokens gives for
 * that piece alone, and put the slot back; without a pattern (the text one
 * piece), what it gives for the text.
 */
#include "fuzz_common.h"

enum { MAX_TEXT = 1 << 14 };

static tki_vocab *g_vocabs[2];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    const char *argv0 = (argc != NULL && *argc > 0 && argv != NULL) ? (*argv)[0] : NULL;
    g_vocabs[0] = fuzz_load_vocab("r50k_base.tiktoken", argv0);
    g_vocabs[1] = fuzz_load_vocab("cl100k_base.tiktoken", argv0);
    return 0;
}

static void check_one(const tki_vocab *vocab, int32_t pattern, const uint8_t *text, size_t len) {
    /* The reference: one encode_pieces call per piece. */
    size_t *ends = fuzz_malloc(len * sizeof(size_t));
    size_t pieces = 0;
    int32_t status = tki_pretokenize(pattern, text, len, ends, len, &pieces);
    FUZZ_CHECK(status == TKI_OK, "pretokenize: status %d", (int)status);
    uint32_t *want = fuzz_malloc(len * sizeof(uint32_t));
    size_t want_count = 0, last_piece_tokens = 0;
    for (size_t k = 0, start = 0; k < pieces; k++) {
        FUZZ_CHECK(ends[k] > start && ends[k] <= len, "piece %zu ends at %zu after %zu", k,
                   ends[k], start);
        size_t piece_len = ends[k] - start, one_end = piece_len, got = 0;
        uint8_t *piece = fuzz_copy(text + start, piece_len);
        status = tki_encode_pieces(vocab, piece, piece_len, &one_end, 1,
                                   TKI_WHOLE_PIECE_SHORTCUT | TKI_METHOD_HEAP, want + want_count,
                                   piece_len, &got);
        FUZZ_CHECK(status == TKI_OK, "encode_pieces of piece %zu: status %d", k, (int)status);
        free(piece);
        want_count += got;
        last_piece_tokens = got;
        start = ends[k];
    }
    FUZZ_CHECK(pieces == 0 ? len == 0 : ends[pieces - 1] == len, "pieces do not cover the text");

    /* The prefix pass against each piece's own pass. */
    uint32_t *plain = fuzz_malloc((len + 1) * sizeof(uint32_t));
    uint32_t *slotted = fuzz_malloc((len + 1) * sizeof(uint32_t));
    uint32_t *alone = fuzz_malloc((len + 1) * sizeof(uint32_t));
    slotted[0] = 0x5EED;
    status = tki_prefix_pass(vocab, pattern, text, len, 0, plain);
    FUZZ_CHECK(status == TKI_OK, "prefix_pass: status %d", (int)status);
    status = tki_prefix_pass(vocab, pattern, text, len, TKI_PREFIX_SLOT_BEFORE, slotted + 1);
    FUZZ_CHECK(status == TKI_OK, "prefix_pass with the slot: status %d", (int)status);
    FUZZ_CHECK(slotted[0] == 0x5EED, "prefix_pass did not put the slot back: %u", slotted[0]);
    FUZZ_SAME_IDS(slotted + 1, len, plain, len, "prefix_pass with the slot vs without");
    for (size_t k = 0, start = 0; k < pieces; k++) {
        status = tki_prefix_last_tokens(vocab, text + start, ends[k] - start, 0, alone);
        FUZZ_CHECK(status == TKI_OK, "prefix_last_tokens of piece %zu: status %d", k, (int)status);
        FUZZ_SAME_IDS(plain + start, ends[k] - start, alone, ends[k] - start, "prefix_pass vs the piece alone");
        start = ends[k];
    }
    free(plain);
    free(slotted);
    free(alone);

    static const uint32_t methods[3] = {0, TKI_METHOD_LINEAR, TKI_METHOD_HEAP};
    for (int m = 0; m < 3; m++) {
        uint32_t *got = fuzz_malloc(len * sizeof(uint32_t));
        size_t got_count = 0, got_last = SIZE_MAX;
        status = tki_encode_text(vocab, pattern, text, len, methods[m], got, len, &got_count,
                                 &got_last);
        FUZZ_CHECK(status == TKI_OK, "encode_text method %u: status %d", methods[m], (int)status);
        FUZZ_SAME_IDS(got, got_count, want, want_count, "encode_text vs per-piece encode_pieces");
        FUZZ_CHECK(got_last == last_piece_tokens, "last piece: %zu tokens, want %zu", got_last,
                   last_piece_tokens);
        if (m == 0) {
            fuzz_check_round_trip(vocab, got, got_count, text, len, "encode_text");
        }
        free(got);
    }
    free(ends);
    free(want);
}

/* Without a pattern (any bytes, one piece): the pass, with and without the slot, against the piece alone. */
static void check_one_piece(const tki_vocab *vocab, const uint8_t *text, size_t len) {
    uint32_t *slotted = fuzz_malloc((len + 1) * sizeof(uint32_t));
    uint32_t *plain = fuzz_malloc((len + 1) * sizeof(uint32_t));
    uint32_t *alone = fuzz_malloc((len + 1) * sizeof(uint32_t));
    slotted[0] = 0x5EED;
    int32_t status = tki_prefix_pass(vocab, 0, text, len, TKI_PREFIX_SLOT_BEFORE, slotted + 1);
    FUZZ_CHECK(status == TKI_OK, "one-piece prefix_pass with the slot: status %d", (int)status);
    FUZZ_CHECK(slotted[0] == 0x5EED, "one-piece prefix_pass did not put the slot back: %u", slotted[0]);
    status = tki_prefix_pass(vocab, 0, text, len, 0, plain);
    FUZZ_CHECK(status == TKI_OK, "one-piece prefix_pass: status %d", (int)status);
    status = tki_prefix_last_tokens(vocab, text, len, 0, alone);
    FUZZ_CHECK(status == TKI_OK, "prefix_last_tokens of the text: status %d", (int)status);
    FUZZ_SAME_IDS(slotted + 1, len, alone, len, "one-piece prefix_pass with the slot vs the text alone");
    FUZZ_SAME_IDS(plain, len, alone, len, "one-piece prefix_pass vs the text alone");
    free(slotted);
    free(plain);
    free(alone);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t len = size > MAX_TEXT ? MAX_TEXT : size;
    uint8_t *text = fuzz_copy(data, len);
    for (int v = 0; v < 2; v++) {
        for (int32_t pattern = TKI_PATTERN_R50K; pattern <= TKI_PATTERN_O200K; pattern++) {
            check_one(g_vocabs[v], pattern, text, len);
        }
        check_one_piece(g_vocabs[v], text, len);
    }
    free(text);
    return 0;
}
