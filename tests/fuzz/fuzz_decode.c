/*
 * fuzz_decode.c — owns the fuzz target for decoding: tki_decoded_length,
 * tki_decode and tki_token_bytes on random id arrays.  The vocabulary, built
 * once, has holes between its ranks, tokens of 1..40 bytes and two special
 * tokens (one of them long); the target keeps its own rank -> bytes
 * table as the reference.  Ids and the output capacity come from the input;
 * both arrays are exact-size heap copies, so any read or write past them is
 * a sanitizer error.  Checked: known ids decode to the concatenation of their
 * bytes; the first unknown id gives TKI_ERR_UNKNOWN_TOKEN with its index in
 * bad_index; a buffer that is too small gives TKI_ERR_ARGUMENT (or the unknown
 * id, if one comes before the buffer runs out).
 */
#include "fuzz_common.h"

enum { EXTRA_TOKENS = 200, RANK_LIMIT = 1000, MAX_IDS = 4096 };

static uint8_t *g_bytes_of[RANK_LIMIT];   /* reference: bytes by rank (NULL: no token) */
static uint32_t g_length_of[RANK_LIMIT];
static tki_vocab *g_vocab;

/* A fixed pseudo-random sequence, so every run builds the same vocabulary. */
static uint64_t g_state = 0x1234567887654321ull;
static uint32_t next_value(void) {
    g_state ^= g_state << 13;
    g_state ^= g_state >> 7;
    g_state ^= g_state << 17;
    return (uint32_t)(g_state >> 11);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    /* Ranks 0..RANK_LIMIT-1: the 256 bytes at odd ranks from 3, tokens at free ranks, holes elsewhere. */
    uint32_t total = 256 + EXTRA_TOKENS;
    uint8_t *bytes = fuzz_malloc((size_t)total * 40);
    uint64_t *offsets = fuzz_malloc(((size_t)total + 1) * sizeof(uint64_t));
    uint32_t *ranks = fuzz_malloc((size_t)total * sizeof(uint32_t));
    uint64_t used = 0;
    offsets[0] = 0;
    uint32_t count = 0;
    for (uint32_t b = 0; b < 256; b++) {
        bytes[used++] = (uint8_t)b;
        ranks[count] = 3 + 2 * b;
        offsets[++count] = used;
    }
    for (uint32_t k = 0; k < EXTRA_TOKENS; k++) {
        uint32_t len = 2 + next_value() % 39;
        for (uint32_t i = 0; i < len; i++) {
            bytes[used + i] = (uint8_t)next_value();
        }
        bytes[used] = (uint8_t)k; /* distinct first two bytes: no duplicates */
        bytes[used + 1] = (uint8_t)(k >> 8);
        used += len;
        ranks[count] = k < 100 ? 4 + 2 * k : 520 + 2 * k; /* even ranks, some holes */
        offsets[++count] = used;
    }
    static const uint8_t special_bytes[] =
        "<|endoftext|><|a-much-longer-special-token-that-decodes-to-many-bytes|>";
    uint64_t special_offsets[3] = {0, 13, sizeof(special_bytes) - 1};
    uint32_t special_ranks[2] = {RANK_LIMIT - 1, 2};
    uint32_t error_index = 0;
    int32_t status = tki_vocab_build(bytes, offsets, ranks, count, special_bytes, special_offsets,
                                     special_ranks, 2, &g_vocab, &error_index);
    FUZZ_CHECK(status == TKI_OK, "build: status %d at %u", (int)status, error_index);
    for (uint32_t i = 0; i < count; i++) {
        g_length_of[ranks[i]] = (uint32_t)(offsets[i + 1] - offsets[i]);
        g_bytes_of[ranks[i]] = fuzz_copy(bytes + offsets[i], g_length_of[ranks[i]]);
    }
    for (uint32_t i = 0; i < 2; i++) {
        g_length_of[special_ranks[i]] = (uint32_t)(special_offsets[i + 1] - special_offsets[i]);
        g_bytes_of[special_ranks[i]] =
            fuzz_copy(special_bytes + special_offsets[i], g_length_of[special_ranks[i]]);
    }
    free(bytes);
    free(offsets);
    free(ranks);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_reader reader = {data, size, 0};
    uint8_t capacity_mode = fuzz_byte(&reader);
    uint32_t capacity_delta = fuzz_byte(&reader);
    size_t count = (reader.size - reader.used) / 2;
    count = count > MAX_IDS ? MAX_IDS : count;
    uint32_t *ids = fuzz_calloc(count, sizeof(uint32_t));
    for (size_t i = 0; i < count; i++) {
        uint32_t v = fuzz_u16(&reader);
        /* Mostly ranks near the vocabulary, some far past it. */
        ids[i] = v >= 0xFF00 ? UINT32_MAX - (v & 0xFF) : v % (RANK_LIMIT + 24);
    }

    /* The reference. */
    size_t first_unknown = SIZE_MAX, total = 0;
    for (size_t i = 0; i < count; i++) {
        if (ids[i] >= RANK_LIMIT || g_bytes_of[ids[i]] == NULL) {
            first_unknown = i;
            break;
        }
        total += g_length_of[ids[i]];
    }

    size_t got_len = 12345, bad = 12345;
    int32_t status = tki_decoded_length(g_vocab, ids, count, &got_len, &bad);
    if (first_unknown != SIZE_MAX) {
        FUZZ_CHECK(status == TKI_ERR_UNKNOWN_TOKEN && bad == first_unknown,
                   "decoded_length: status %d, bad_index %zu, want %zu", (int)status, bad,
                   first_unknown);
    } else {
        FUZZ_CHECK(status == TKI_OK && got_len == total,
                   "decoded_length: status %d, %zu bytes, want %zu", (int)status, got_len, total);
    }

    /* Capacity: exact, short by delta, or long by delta. */
    size_t capacity = total;
    if (capacity_mode % 3 == 1) {
        capacity = capacity_delta < total ? total - capacity_delta : 0;
    } else if (capacity_mode % 3 == 2) {
        capacity = total + capacity_delta;
    }
    uint8_t *out = fuzz_malloc(capacity);
    got_len = 12345;
    bad = 12345;
    status = tki_decode(g_vocab, ids, count, out, capacity, &got_len, &bad);
    /* Where the reference runs out of room, if it does before the first unknown id. */
    size_t needed = 0, overflow_at = SIZE_MAX;
    for (size_t i = 0; i < count && i != first_unknown; i++) {
        needed += g_length_of[ids[i]];
        if (needed > capacity) {
            overflow_at = i;
            break;
        }
    }
    if (overflow_at == SIZE_MAX && first_unknown != SIZE_MAX) {
        FUZZ_CHECK(status == TKI_ERR_UNKNOWN_TOKEN && bad == first_unknown,
                   "decode: status %d, bad_index %zu, want %zu", (int)status, bad, first_unknown);
    } else if (overflow_at != SIZE_MAX) {
        /* Out of room first; an unknown id later may be reported instead. */
        FUZZ_CHECK(status == TKI_ERR_ARGUMENT ||
                       (status == TKI_ERR_UNKNOWN_TOKEN && bad == first_unknown),
                   "decode into %zu bytes: status %d, bad_index %zu", capacity, (int)status, bad);
    } else {
        FUZZ_CHECK(status == TKI_OK && got_len == total, "decode: status %d, %zu bytes, want %zu",
                   (int)status, got_len, total);
        size_t at = 0;
        for (size_t i = 0; i < count; i++) {
            FUZZ_CHECK(memcmp(out + at, g_bytes_of[ids[i]], g_length_of[ids[i]]) == 0,
                       "decode: id %zu (%u) decodes wrong", i, ids[i]);
            at += g_length_of[ids[i]];
        }
    }

    /* tki_token_bytes agrees with the reference for each id. */
    for (size_t i = 0; i < count && i < 64; i++) {
        const uint8_t *bytes = NULL;
        size_t len = 0;
        status = tki_token_bytes(g_vocab, ids[i], &bytes, &len);
        if (ids[i] >= RANK_LIMIT || g_bytes_of[ids[i]] == NULL) {
            FUZZ_CHECK(status == TKI_ERR_UNKNOWN_TOKEN, "token_bytes(%u): status %d", ids[i],
                       (int)status);
        } else {
            FUZZ_CHECK(status == TKI_OK && len == g_length_of[ids[i]] &&
                           memcmp(bytes, g_bytes_of[ids[i]], len) == 0,
                       "token_bytes(%u) wrong", ids[i]);
        }
    }
    free(out);
    free(ids);
    return 0;
}
