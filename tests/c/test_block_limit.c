/*
 * test_block_limit.c — owns the test of the automaton's size limit: a
 * vocabulary whose automaton would need TKI_BLOCK_LIMIT blocks or more (block
 * ids are 24 bits, internal.h) is built without one and encodes with the heap
 * BPE, exactly.  Built with -DTKI_BLOCK_LIMIT=274 (.ci/sanitize.sh), so that
 * any token of two bytes or more crosses the limit (the 256 single bytes take
 * 273 blocks: the root's row and 16 tiles, and a row per byte; a state with
 * children takes a tile more per high nibble of theirs): the single bytes
 * still get an automaton, the vocabulary with merges does not, and its ids
 * equal the naive BPE's (tests/c/naive_bpe.h) on every text tried. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tiktoken_inc.h"
#include "naive_bpe.h"

#if !defined(TKI_BLOCK_LIMIT) || TKI_BLOCK_LIMIT != 274
#error "build with -DTKI_BLOCK_LIMIT=274"
#endif

enum { MAX_TOKENS = 512, MAX_TEXT = 64 };

static uint32_t g_passed = 0, g_failed = 0;

#define CHECK(condition, what)                                                   \
    do {                                                                         \
        if (condition) {                                                         \
            g_passed++;                                                          \
        } else {                                                                 \
            g_failed++;                                                          \
            fprintf(stderr, "test_block_limit:%d: %s\n", __LINE__, what);         \
        }                                                                        \
    } while (0)

typedef struct small_vocab {
    uint8_t bytes[MAX_TOKENS * 8];
    uint64_t offsets[MAX_TOKENS + 1];
    uint32_t ranks[MAX_TOKENS];
    uint32_t count;
} small_vocab;

static void add_token(small_vocab *vocab, const char *text, size_t len) {
    uint64_t at = vocab->offsets[vocab->count];
    memcpy(vocab->bytes + at, text, len);
    vocab->ranks[vocab->count] = vocab->count;
    vocab->offsets[++vocab->count] = at + len;
}

static uint32_t small_lookup(const void *context, const uint8_t *data, size_t len) {
    const small_vocab *vocab = context;
    for (uint32_t i = 0; i < vocab->count; i++) {
        uint64_t start = vocab->offsets[i];
        if (vocab->offsets[i + 1] - start == len && memcmp(vocab->bytes + start, data, len) == 0) {
            return vocab->ranks[i];
        }
    }
    return NAIVE_NONE;
}

static tki_vocab *build(const small_vocab *vocab) {
    tki_vocab *built = NULL;
    uint32_t error_index = 0;
    int32_t status = tki_vocab_build(vocab->bytes, vocab->offsets, vocab->ranks, vocab->count, NULL,
                                     NULL, NULL, 0, &built, &error_index);
    CHECK(status == TKI_OK, "the vocabulary builds");
    return built;
}

int main(void) {
    static small_vocab vocab;
    memset(&vocab, 0, sizeof(vocab));
    for (int byte = 0; byte < 256; byte++) {
        char one = (char)byte;
        add_token(&vocab, &one, 1);
    }
    tki_vocab *bytes_only = build(&vocab);
    tki_vocab_info info;
    tki_vocab_get_info(bytes_only, &info);
    CHECK(info.incremental == 1 && info.automaton_states == 257 && info.automaton_tiles == 16, "single bytes: an automaton of 257 states and 16 tiles");
    tki_vocab_free(bytes_only);

    /* Merges in tiktoken's order (each token's parts ranked before it). */
    const char *merges[] = {"ab", "bc", "abc", "aa", "aaa", "aaaa", " t", "he", " the", "ca", "cab", "bca"};
    for (size_t i = 0; i < sizeof(merges) / sizeof(merges[0]); i++) {
        add_token(&vocab, merges[i], strlen(merges[i]));
    }
    tki_vocab *merged = build(&vocab);
    if (merged == NULL) {
        fprintf(stderr, "test_block_limit: %u passed, %u failed\n", g_passed, g_failed);
        return 1;
    }
    tki_vocab_get_info(merged, &info);
    CHECK(info.incremental == 0 && info.automaton_tiles == 0, "over the block limit: no automaton, the heap BPE");

    /* Every text over a small alphabet up to 6 bytes, and a few longer ones, against the naive BPE. */
    const char alphabet[] = "abc th";
    uint8_t text[MAX_TEXT];
    uint32_t got[MAX_TEXT], want[MAX_TEXT];
    size_t starts[MAX_TEXT + 1];
    uint32_t mismatches = 0, texts = 0;
    for (size_t len = 1; len <= 6; len++) {
        size_t total = 1;
        for (size_t i = 0; i < len; i++) {
            total *= sizeof(alphabet) - 1;
        }
        for (size_t code = 0; code < total; code++) {
            size_t rest = code;
            for (size_t i = 0; i < len; i++) {
                text[i] = (uint8_t)alphabet[rest % (sizeof(alphabet) - 1)];
                rest /= sizeof(alphabet) - 1;
            }
            size_t end = len, count = 0;
            int32_t status = tki_encode_pieces(merged, text, len, &end, 1, 0, got, MAX_TEXT, &count);
            size_t expected = naive_bpe(small_lookup, &vocab, text, len, starts, want, NULL);
            if (status != TKI_OK || count != expected || memcmp(got, want, count * sizeof(uint32_t)) != 0) {
                mismatches++;
            }
            texts++;
        }
    }
    CHECK(mismatches == 0, "tki_encode_pieces equals the naive BPE on every short text");
    const char *sentence = "aaaaaaabcabcab the cat the bca";
    size_t count = 0;
    int32_t status = tki_encode_text(merged, TKI_PATTERN_CL100K, (const uint8_t *)sentence,
                                     strlen(sentence), 0, got, MAX_TEXT, &count, NULL);
    CHECK(status == TKI_OK && count > 0, "tki_encode_text encodes with the heap BPE");
    tki_vocab_free(merged);
    fprintf(stderr, "test_block_limit: %u texts; %u passed, %u failed\n", texts, g_passed, g_failed);
    return g_failed == 0 ? 0 : 1;
}
