/*
 * fuzz_pretokenize.c — owns the fuzz target for tki_pretokenize (all three
 * built-in patterns).  Invariants checked on every input:
 *   - the pieces are non-empty, ascending and cover the input exactly;
 *   - every piece boundary lies on a character boundary: of UTF-8 characters
 *     for valid UTF-8, and for any input of the characters the core documents
 *     (a byte that starts no valid sequence is one character of its own);
 *   - a capacity of one piece too few gives TKI_ERR_ARGUMENT;
 *   - splitting the text at a piece boundary b: the tail text[b..) splits
 *     into exactly the pieces after b (the patterns never look behind); the
 *     head text[0..b) splits into exactly the pieces before b when the
 *     character before b is not whitespace (the patterns look ahead only in
 *     their whitespace alternatives: \s++$ and \s+(?!\S), which can reach b
 *     only through a whitespace run that ends at b);
 *   - the pieces (tki_pretokenize: 64-byte windows split from bit masks,
 *     csrc/pretokenize_block.h) are those of the per-piece matcher
 *     (tki_pretokenize_next), which tests/test_pretokenize.py checks against
 *     the `regex` package; and every window's classes are the same from the
 *     portable loop, SSE2 and AVX2 (where the processor has them), its
 *     ideographs those of the one-character test, and the compression of its
 *     masks to one bit per character (portable, and PDEP where the windows use
 *     it) that of a bit-by-bit loop.
 */
#include "fuzz_common.h"
#include "internal.h"
#include "pretokenize_ascii.h"
#include "pretokenize_block.h"

enum { MAX_TEXT = 1 << 13, MAX_SPLITS = 6 };

/* Length of the character at s (left >= 1 bytes): 1..4 for valid UTF-8 (Unicode table 3-7), else 1. */
static size_t char_length(const uint8_t *s, size_t left, uint32_t *code_point) {
    uint8_t b0 = s[0];
    size_t need = 0;
    uint8_t lo = 0x80, hi = 0xBF; /* range of the second byte */
    uint32_t cp = 0;
    if (b0 <= 0x7F) {
        *code_point = b0;
        return 1;
    } else if (b0 >= 0xC2 && b0 <= 0xDF) {
        need = 2;
        cp = b0 & 0x1Fu;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        need = 3;
        cp = b0 & 0x0Fu;
        lo = b0 == 0xE0 ? 0xA0 : 0x80;
        hi = b0 == 0xED ? 0x9F : 0xBF;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        need = 4;
        cp = b0 & 0x07u;
        lo = b0 == 0xF0 ? 0x90 : 0x80;
        hi = b0 == 0xF4 ? 0x8F : 0xBF;
    } else {
        *code_point = UINT32_MAX;
        return 1;
    }
    if (left < need || s[1] < lo || s[1] > hi) {
        *code_point = UINT32_MAX;
        return 1;
    }
    for (size_t i = 1; i < need; i++) {
        if (i > 1 && (s[i] < 0x80 || s[i] > 0xBF)) {
            *code_point = UINT32_MAX;
            return 1;
        }
        cp = (cp << 6) | (s[i] & 0x3Fu);
    }
    *code_point = cp;
    return need;
}

/* Could the code point be in \s?  (Generous: a false "maybe" only skips a check.) */
static int maybe_space(uint32_t cp) {
    return cp <= 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0x1680 || cp == 0x180E ||
           (cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F) ||
           (cp >= 0x205F && cp <= 0x2060) || cp == 0x3000 || cp == 0xFEFF;
}

/* Pieces of data[0..len) (exact-size copy); *ends must be freed. */
static size_t split(int32_t pattern, const uint8_t *data, size_t len, size_t **ends) {
    uint8_t *copy = fuzz_copy(data, len);
    *ends = fuzz_malloc(len * sizeof(size_t));
    size_t count = SIZE_MAX;
    int32_t status = tki_pretokenize(pattern, copy, len, *ends, len, &count);
    FUZZ_CHECK(status == TKI_OK, "pattern %d: status %d", (int)pattern, (int)status);
    free(copy);
    return count;
}

/* The per-piece matcher's pieces of data[0..len) must be the `count` ends given. */
static void check_per_piece(int32_t pattern, const uint8_t *data, size_t len, const size_t *ends,
                            size_t count) {
    uint8_t *copy = fuzz_copy(data, len);
    size_t k = 0;
    for (size_t pos = 0; pos < len; k++) {
        size_t end = tki_pretokenize_next(pattern, copy, len, pos);
        FUZZ_CHECK(k < count && end == ends[k], "pattern %d: piece %zu ends at %zu by the matcher, %zu by the windows",
                   (int)pattern, k, end, k < count ? ends[k] : 0);
        pos = end;
    }
    FUZZ_CHECK(k == count, "pattern %d: %zu pieces by the matcher, %zu by the windows", (int)pattern, k, count);
    free(copy);
}

/* Every way of classifying a window gives the same masks. */
static void check_classes(const uint8_t *data, size_t len) {
    for (size_t at = 0; at < len; at += 17) {
        size_t left = len - at;
        uint32_t valid = left < TKI_BLOCK_BYTES ? (uint32_t)left : TKI_BLOCK_BYTES;
        uint8_t window[TKI_BLOCK_BYTES] = {0};
        memcpy(window, data + at, valid);
        tki_block_classes portable, chosen;
        tki_block_classify_portable(window, &portable);
        portable.valid = valid < TKI_BLOCK_BYTES ? ((uint64_t)1 << valid) - 1 : ~(uint64_t)0;
        tki_block_classify(data + at, valid, &chosen);
        FUZZ_CHECK(memcmp(&portable, &chosen, sizeof(chosen)) == 0, "window at %zu: classes differ", at);
#if defined(TKI_SSE2)
        tki_block_classes sse2 = tki_block_classify_sse2(window);
        sse2.valid = portable.valid;
        FUZZ_CHECK(memcmp(&portable, &sse2, sizeof(sse2)) == 0, "window at %zu: SSE2 classes differ", at);
#endif
#if defined(TKI_BLOCK_AVX2)
        if (__builtin_cpu_supports("avx2")) {
            tki_block_classes avx2 = tki_block_classify_avx2(window);
            avx2.valid = portable.valid;
            FUZZ_CHECK(memcmp(&portable, &avx2, sizeof(avx2)) == 0, "window at %zu: AVX2 classes differ", at);
        }
#endif
    }
}

/* Bit i of x moved to the position of its rank among the set bits of leads (PEXT), and back (PDEP). */
static uint64_t compress_bit_by_bit(uint64_t x, uint64_t leads) {
    uint64_t packed = 0;
    uint32_t rank = 0;
    for (uint32_t i = 0; i < 64; i++) {
        if (leads >> i & 1) {
            packed |= (x >> i & 1) << rank++;
        }
    }
    return packed;
}

static uint64_t expand_bit_by_bit(uint64_t x, uint64_t leads) {
    uint64_t spread = 0;
    uint32_t rank = 0;
    for (uint32_t i = 0; i < 64; i++) {
        if (leads >> i & 1) {
            spread |= (x >> rank++ & 1) << i;
        }
    }
    return spread;
}

/* A window's ideographs are those the test of one character finds (its continuation bytes and
 * first bytes of three-byte characters too), and the portable compression of
 * masks to one bit per character (and back) moves the bits PEXT and PDEP move. */
static void check_wide(const uint8_t *data, size_t len) {
    for (size_t at = 0; at < len; at += 17) {
        uint8_t window[TKI_BLOCK_BYTES] = {0};
        memcpy(window, data + at, len - at < TKI_BLOCK_BYTES ? len - at : TKI_BLOCK_BYTES);
        uint64_t want = 0;
        for (uint32_t i = 0; i + 3 <= TKI_BLOCK_BYTES; i++) {
            want |= tki_is_ideograph(window + i) ? (uint64_t)1 << i : 0;
        }
        uint64_t want_continuation = 0, continuation = 0, want_three = 0, three = 0;
        for (uint32_t i = 0; i < TKI_BLOCK_BYTES; i++) {
            want_continuation |= (window[i] & 0xC0u) == 0x80u ? (uint64_t)1 << i : 0;
            want_three |= window[i] >= 0xE0u && window[i] <= 0xEFu ? (uint64_t)1 << i : 0;
        }
        FUZZ_CHECK(tki_block_ideographs(window, &continuation, &three) == want, "window at %zu: ideographs differ",
                   at);
        FUZZ_CHECK(continuation == want_continuation, "window at %zu: continuation bytes differ", at);
        FUZZ_CHECK(three == want_three, "window at %zu: three-byte first bytes differ", at);
        for (uint32_t k = 0; k + 16 <= TKI_BLOCK_BYTES; k += 16) {
            uint64_t leads, x;
            memcpy(&leads, window + k, 8);
            memcpy(&x, window + k + 8, 8);
            leads |= (uint64_t)1 << (x & 63); /* (never empty) */
            tki_char_plan plan;
            tki_char_plan_make(&plan, leads);
            FUZZ_CHECK(tki_char_compress(&plan, x) == compress_bit_by_bit(x, leads),
                       "window at %zu: compression differs", at);
            FUZZ_CHECK(tki_char_expand(&plan, x) == expand_bit_by_bit(x, leads),
                       "window at %zu: expansion differs", at);
            FUZZ_CHECK(tki_block_bytes_of_chars(&plan, x) == expand_bit_by_bit(x, leads),
                       "window at %zu: expansion (as the windows spread) differs", at);
        }
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t len = size > MAX_TEXT ? MAX_TEXT : size;
    /* Character starts, and whether the character ending at each position may be a space. */
    uint8_t *starts = fuzz_malloc(len + 1);
    uint8_t *space_before = fuzz_malloc(len + 1);
    memset(starts, 0, len + 1);
    memset(space_before, 0, len + 1);
    for (size_t at = 0; at < len;) {
        uint32_t cp = 0;
        size_t n = char_length(data + at, len - at, &cp);
        starts[at] = 1;
        at += n;
        space_before[at] = cp != UINT32_MAX && maybe_space(cp);
    }
    starts[len] = 1;
    check_classes(data, len);
    check_wide(data, len);

    for (int32_t pattern = TKI_PATTERN_R50K; pattern <= TKI_PATTERN_O200K; pattern++) {
        size_t *ends = NULL;
        size_t count = split(pattern, data, len, &ends);
        FUZZ_CHECK(len == 0 ? count == 0 : count >= 1 && count <= len, "pattern %d: %zu pieces",
                   (int)pattern, count);
        for (size_t k = 0; k < count; k++) {
            size_t previous = k == 0 ? 0 : ends[k - 1];
            FUZZ_CHECK(ends[k] > previous && ends[k] <= len,
                       "pattern %d: piece %zu ends at %zu after %zu", (int)pattern, k, ends[k],
                       previous);
            FUZZ_CHECK(starts[ends[k]], "pattern %d: piece %zu ends at %zu, inside a character",
                       (int)pattern, k, ends[k]);
        }
        FUZZ_CHECK(count == 0 || ends[count - 1] == len, "pattern %d: pieces end at %zu of %zu",
                   (int)pattern, count > 0 ? ends[count - 1] : 0, len);
        check_per_piece(pattern, data, len, ends, count);
        if (count >= 1) {
            size_t *few = fuzz_malloc((count - 1) * sizeof(size_t));
            size_t got = 0;
            int32_t status = tki_pretokenize(pattern, data, len, few, count - 1, &got);
            FUZZ_CHECK(status == TKI_ERR_ARGUMENT, "pattern %d: capacity %zu for %zu pieces: %d",
                       (int)pattern, count - 1, count, (int)status);
            free(few);
        }
        /* Split at some boundaries and re-split each side. */
        size_t boundaries = count > 0 ? count - 1 : 0;
        size_t step = boundaries > MAX_SPLITS ? boundaries / MAX_SPLITS : 1;
        for (size_t k = 0; k < boundaries; k += step) {
            size_t b = ends[k];
            size_t *tail = NULL;
            size_t tail_count = split(pattern, data + b, len - b, &tail);
            int same = tail_count == count - k - 1;
            for (size_t i = 0; same && i < tail_count; i++) {
                same = tail[i] + b == ends[k + 1 + i];
            }
            FUZZ_CHECK(same, "pattern %d: text[%zu..] splits differently on its own",
                       (int)pattern, b);
            free(tail);
            if (!space_before[b]) {
                size_t *head = NULL;
                size_t head_count = split(pattern, data, b, &head);
                same = head_count == k + 1;
                for (size_t i = 0; same && i < head_count; i++) {
                    same = head[i] == ends[i];
                }
                FUZZ_CHECK(same, "pattern %d: text[..%zu] splits differently on its own",
                           (int)pattern, b);
                free(head);
            }
        }
        free(ends);
    }
    free(starts);
    free(space_before);
    return 0;
}
