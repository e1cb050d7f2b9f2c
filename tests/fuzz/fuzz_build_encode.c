/*
 * fuzz_build_encode.c — owns the fuzz target for building small vocabularies
 * and encoding with them.  The input gives a vocabulary (the 256 bytes plus
 * up to 12 tokens of 2..9 letters over a 2..4 letter alphabet, ranks in an
 * input-chosen order, sometimes with holes, sometimes spread up to 2^32 - 2
 * (renumbered inside: ids must come out as given), sometimes with a special
 * token) and a text.
 * Checked against references, not only for crashes:
 *   - the build succeeds, noncanonical/improper follow docs/algorithm.md section 2
 *     (computed here with the naive oracle), and every vocabulary is
 *     incremental: an improper one properized (csrc/properize.c), rules moved
 *     exactly when it is improper, at most those watched, none refused by the
 *     properization's check;
 *   - tki_encode_pieces: default == TKI_METHOD_LINEAR == TKI_METHOD_HEAP,
 *     == naive_bpe for short texts, with and without the shortcut;
 *   - tki_prefix_last_tokens: default == linear on every prefix, and the
 *     naive last token of each prefix of short texts;
 *   - decoding gives the text back; tki_encode_text equals its own
 *     pretokenized pieces encoded by tki_encode_pieces;
 *   - a stream (without a pattern, and with the text's) fed the text in
 *     three input-chosen chunks gives those ids (watched pieces change their
 *     step mid-piece, after some of their ids came out).
 */
#include "fuzz_common.h"

enum { MAX_TOKENS = 12, MAX_TOKEN_LEN = 9, MAX_TEXT = 1024, NAIVE_TEXT = 96, NAIVE_PREFIX = 40 };

typedef struct small_vocab {
    uint32_t byte_rank[256];
    uint32_t count;
    uint8_t token[MAX_TOKENS][MAX_TOKEN_LEN];
    uint32_t token_len[MAX_TOKENS];
    uint32_t token_rank[MAX_TOKENS];
} small_vocab;

static uint32_t small_lookup(const void *context, const uint8_t *data, size_t len) {
    const small_vocab *vocab = context;
    if (len == 1) {
        return vocab->byte_rank[data[0]];
    }
    for (uint32_t i = 0; i < vocab->count; i++) {
        if (vocab->token_len[i] == len && memcmp(vocab->token[i], data, len) == 0) {
            return vocab->token_rank[i];
        }
    }
    return NAIVE_NONE;
}

/* docs/algorithm.md section 2, with the naive oracle. */
static void classify(const small_vocab *vocab, uint32_t *noncanonical, uint32_t *improper) {
    size_t starts[MAX_TOKEN_LEN + 1];
    uint32_t parts[MAX_TOKEN_LEN];
    int canonical[MAX_TOKENS], bad[MAX_TOKENS];
    uint32_t pre[MAX_TOKENS], suc[MAX_TOKENS];
    *noncanonical = *improper = 0;
    for (uint32_t i = 0; i < vocab->count; i++) {
        naive_record record;
        size_t n = naive_bpe(small_lookup, vocab, vocab->token[i], vocab->token_len[i], starts,
                             parts, &record);
        canonical[i] = n == 1;
        bad[i] = (int)record.ranks_descended;
        pre[i] = suc[i] = NAIVE_NONE;
        if (n == 1) {
            pre[i] = small_lookup(vocab, vocab->token[i], record.last_left_length);
            suc[i] = small_lookup(vocab, vocab->token[i] + record.last_left_length,
                                  vocab->token_len[i] - record.last_left_length);
        } else {
            (*noncanonical)++;
        }
    }
    for (uint32_t i = 0; i < vocab->count; i++) {
        if (!canonical[i]) {
            continue;
        }
        for (uint32_t j = 0; j < vocab->count; j++) {
            if (!canonical[j] && (vocab->token_rank[j] == pre[i] || vocab->token_rank[j] == suc[i])) {
                bad[i] = 1;
            }
        }
        *improper += (uint32_t)(bad[i] != 0);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *input, size_t input_size) {
    fuzz_reader reader = {input, input_size, 0};
    uint8_t config = fuzz_byte(&reader);
    uint32_t letters = 2 + (config & 3u);
    int shuffle_all = (config >> 2) & 1;
    int holes = (config >> 3) & 1;
    int raw_bytes = (config >> 4) & 1;
    int with_special = (config >> 5) & 1;
    int32_t pattern = TKI_PATTERN_R50K + (int32_t)((config >> 6) % 3);
    int sparse = (config >> 6) == 3; /* (with r50k's pattern, as before) */
    static const char alphabet[] = "abcd";

    /* Tokens. */
    small_vocab vocab;
    memset(&vocab, 0, sizeof(vocab));
    uint32_t wanted = 1 + fuzz_byte(&reader) % MAX_TOKENS;
    for (uint32_t k = 0; k < wanted; k++) {
        uint8_t token[MAX_TOKEN_LEN];
        uint32_t len = 2 + fuzz_byte(&reader) % (MAX_TOKEN_LEN - 1);
        for (uint32_t i = 0; i < len; i++) {
            token[i] = (uint8_t)alphabet[fuzz_byte(&reader) % letters];
        }
        if (small_lookup(&vocab, token, len) == NAIVE_NONE) {
            memcpy(vocab.token[vocab.count], token, len);
            vocab.token_len[vocab.count++] = len;
        }
    }
    /* Ranks: a permutation chosen by the input (bytes first unless shuffle_all). */
    uint32_t total = 256 + vocab.count;
    uint32_t order[256 + MAX_TOKENS];
    for (uint32_t i = 0; i < total; i++) {
        order[i] = i;
    }
    uint32_t first = shuffle_all ? 0 : 256;
    for (uint32_t i = total; i > first + 1; i--) {
        uint32_t j = first + fuzz_byte(&reader) % (i - first);
        uint32_t swap = order[i - 1];
        order[i - 1] = order[j];
        order[j] = swap;
    }
    uint32_t stride = sparse ? (UINT32_MAX - 1) / total : holes ? 2 : 1;
    for (uint32_t i = 0; i < total; i++) {
        uint32_t rank = order[i] * stride + (holes ? 1 : 0);
        if (i < 256) {
            vocab.byte_rank[i] = rank;
        } else {
            vocab.token_rank[i - 256] = rank;
        }
    }

    /* Build. */
    uint8_t token_bytes[256 + MAX_TOKENS * MAX_TOKEN_LEN];
    uint64_t offsets[256 + MAX_TOKENS + 1];
    uint32_t ranks[256 + MAX_TOKENS];
    uint64_t used = 0;
    offsets[0] = 0;
    for (uint32_t i = 0; i < total; i++) {
        if (i < 256) {
            token_bytes[used++] = (uint8_t)i;
            ranks[i] = vocab.byte_rank[i];
        } else {
            memcpy(token_bytes + used, vocab.token[i - 256], vocab.token_len[i - 256]);
            used += vocab.token_len[i - 256];
            ranks[i] = vocab.token_rank[i - 256];
        }
        offsets[i + 1] = used;
    }
    static const uint8_t special_text[] = "<|x|>";
    uint64_t special_offsets[2] = {0, 5};
    uint32_t special_rank = 2 * total + 7;
    tki_vocab *core = NULL;
    uint32_t error_index = 0;
    int32_t status = tki_vocab_build(token_bytes, offsets, ranks, total, special_text,
                                     special_offsets, &special_rank, with_special ? 1 : 0, &core,
                                     &error_index);
    FUZZ_CHECK(status == TKI_OK, "build: status %d at %u", (int)status, error_index);
    tki_vocab_info info;
    tki_vocab_get_info(core, &info);
    uint32_t noncanonical = 0, improper = 0;
    classify(&vocab, &noncanonical, &improper);
    FUZZ_CHECK(info.noncanonical_count == noncanonical, "noncanonical %u, want %u",
               info.noncanonical_count, noncanonical);
    FUZZ_CHECK(info.improper_count == improper, "improper %u, want %u", info.improper_count,
               improper);
    FUZZ_CHECK(info.incremental == 1, "incremental %u with %u improper", info.incremental,
               improper);
    FUZZ_CHECK((info.moved_rules == 0) == (improper == 0) && info.watched_tokens <= info.moved_rules &&
                   info.properization_rejects == 0,
               "properization: %u improper, %u moved, %u watched, %u refused", improper,
               info.moved_rules, info.watched_tokens, info.properization_rejects);
    uint8_t cut_a = fuzz_byte(&reader), cut_b = fuzz_byte(&reader);
    FUZZ_CHECK(info.sparse_ids == (uint32_t)sparse, "sparse_ids %u", info.sparse_ids);

    /* The text: the rest of the input, mostly mapped onto the alphabet. */
    size_t len = reader.size - reader.used;
    len = len > MAX_TEXT ? MAX_TEXT : len;
    uint8_t *text = fuzz_malloc(len);
    for (size_t i = 0; i < len; i++) {
        uint8_t b = reader.data[reader.used + i];
        text[i] = raw_bytes && b >= 0xE0 ? (uint8_t)(b - 0xE0 + ' ') : (uint8_t)alphabet[b % letters];
    }
    if (raw_bytes && len > 0) {
        text[len - 1] = reader.data[reader.used + len - 1]; /* any byte at all */
    }

    /* Whole text as one piece: every method, with and without the shortcut. */
    static const uint32_t methods[3] = {0, TKI_METHOD_LINEAR, TKI_METHOD_HEAP};
    uint32_t *ids[2][3];
    size_t count[2][3];
    size_t end = len;
    for (int cut = 0; cut < 2; cut++) {
        for (int m = 0; m < 3; m++) {
            uint32_t flags = methods[m] | (cut ? TKI_WHOLE_PIECE_SHORTCUT : 0u);
            ids[cut][m] = fuzz_malloc(len * sizeof(uint32_t));
            status = tki_encode_pieces(core, text, len, &end, len > 0 ? 1 : 0, flags, ids[cut][m],
                                       len, &count[cut][m]);
            FUZZ_CHECK(status == TKI_OK, "encode_pieces flags %u: status %d", flags, (int)status);
        }
        FUZZ_SAME_IDS(ids[cut][0], count[cut][0], ids[cut][2], count[cut][2], "default vs heap");
        FUZZ_SAME_IDS(ids[cut][1], count[cut][1], ids[cut][2], count[cut][2], "linear vs heap");
    }
    fuzz_check_round_trip(core, ids[0][0], count[0][0], text, len, "encode_pieces");
    uint32_t whole = small_lookup(&vocab, text, len);
    if (len > 0 && whole != NAIVE_NONE) {
        FUZZ_CHECK(count[1][0] == 1 && ids[1][0][0] == whole, "shortcut: %zu ids", count[1][0]);
    } else {
        FUZZ_SAME_IDS(ids[1][0], count[1][0], ids[0][0], count[0][0], "shortcut (no token)");
    }
    size_t *starts = fuzz_malloc((len + 1) * sizeof(size_t));
    uint32_t *naive = fuzz_malloc(len * sizeof(uint32_t));
    if (len <= NAIVE_TEXT) {
        size_t naive_count = naive_bpe(small_lookup, &vocab, text, len, starts, naive, NULL);
        FUZZ_SAME_IDS(ids[0][2], count[0][2], naive, naive_count, "heap vs naive");
    }

    /* Every prefix. */
    if (info.incremental && len > 0) {
        uint32_t *prefix_default = fuzz_malloc(len * sizeof(uint32_t));
        uint32_t *prefix_linear = fuzz_malloc(len * sizeof(uint32_t));
        status = tki_prefix_last_tokens(core, text, len, 0, prefix_default);
        FUZZ_CHECK(status == TKI_OK, "prefix default: status %d", (int)status);
        status = tki_prefix_last_tokens(core, text, len, TKI_METHOD_LINEAR, prefix_linear);
        FUZZ_CHECK(status == TKI_OK, "prefix linear: status %d", (int)status);
        FUZZ_SAME_IDS(prefix_default, len, prefix_linear, len, "prefix default vs linear");
        FUZZ_CHECK(prefix_default[len - 1] == ids[0][2][count[0][2] - 1],
                   "last prefix token %u, last token %u", prefix_default[len - 1],
                   ids[0][2][count[0][2] - 1]);
        for (size_t i = 1; i <= len && i <= NAIVE_PREFIX; i++) {
            size_t n = naive_bpe(small_lookup, &vocab, text, i, starts, naive, NULL);
            FUZZ_CHECK(prefix_default[i - 1] == naive[n - 1], "prefix %zu: %u, naive %u", i,
                       prefix_default[i - 1], naive[n - 1]);
        }
        free(prefix_default);
        free(prefix_linear);
    } else if (len > 0) {
        uint32_t out[1];
        status = tki_prefix_last_tokens(core, text, 1, 0, out);
        FUZZ_CHECK(status == TKI_ERR_ARGUMENT, "prefix on a heap-only vocabulary: status %d",
                   (int)status);
    }

    /* encode_text against its own pieces. */
    size_t *piece_ends = fuzz_malloc(len * sizeof(size_t));
    size_t pieces = 0;
    status = tki_pretokenize(pattern, text, len, piece_ends, len, &pieces);
    FUZZ_CHECK(status == TKI_OK, "pretokenize: status %d", (int)status);
    uint32_t *by_pieces = fuzz_malloc(len * sizeof(uint32_t));
    size_t by_pieces_count = 0;
    status = tki_encode_pieces(core, text, len, piece_ends, pieces,
                               TKI_WHOLE_PIECE_SHORTCUT | TKI_METHOD_HEAP, by_pieces, len,
                               &by_pieces_count);
    FUZZ_CHECK(status == TKI_OK, "encode_pieces of the pieces: status %d", (int)status);
    for (int m = 0; m < 3; m++) {
        uint32_t *by_text = fuzz_malloc(len * sizeof(uint32_t));
        size_t by_text_count = 0, last_piece = 0;
        status = tki_encode_text(core, pattern, text, len, methods[m], by_text, len,
                                 &by_text_count, &last_piece);
        FUZZ_CHECK(status == TKI_OK, "encode_text: status %d", (int)status);
        FUZZ_SAME_IDS(by_text, by_text_count, by_pieces, by_pieces_count,
                      "encode_text vs pretokenize + encode_pieces");
        free(by_text);
    }
    fuzz_check_round_trip(core, by_pieces, by_pieces_count, text, len, "encode_text");

    /* Streams, the text in three chunks: without a pattern, then with the text's. */
    if (!raw_bytes) { /* (the stream checks UTF-8; the alphabet's text is ASCII) */
        size_t cuts[4] = {0, len * cut_a / 256, 0, len};
        cuts[2] = cuts[1] + (len - cuts[1]) * cut_b / 256;
        for (int with_pattern = 0; with_pattern < 2; with_pattern++) {
            tki_stream *stream = NULL;
            status = tki_stream_new(core, with_pattern ? pattern : 0, 0, &stream);
            FUZZ_CHECK(status == TKI_OK, "stream: status %d", (int)status);
            uint32_t *streamed = fuzz_malloc((len + 1) * sizeof(uint32_t));
            size_t streamed_count = 0;
            for (int k = 0; k < 3 && status == TKI_OK; k++) {
                size_t got = 0;
                status = tki_stream_feed(stream, text + cuts[k], cuts[k + 1] - cuts[k],
                                         streamed + streamed_count, len + 1 - streamed_count, &got);
                streamed_count += got;
            }
            size_t got = 0;
            if (status == TKI_OK) {
                status = tki_stream_finish(stream, streamed + streamed_count, len + 1 - streamed_count,
                                           &got);
            }
            FUZZ_CHECK(status == TKI_OK, "stream feed: status %d", (int)status);
            streamed_count += got;
            if (with_pattern) {
                FUZZ_SAME_IDS(streamed, streamed_count, by_pieces, by_pieces_count, "stream with the pattern");
            } else {
                FUZZ_SAME_IDS(streamed, streamed_count, ids[1][2], count[1][2], "stream without a pattern");
            }
            free(streamed);
            tki_stream_free(stream);
        }
    }

    free(piece_ends);
    free(by_pieces);
    free(starts);
    free(naive);
    for (int cut = 0; cut < 2; cut++) {
        for (int m = 0; m < 3; m++) {
            free(ids[cut][m]);
        }
    }
    free(text);
    tki_vocab_free(core);
    return 0;
}
